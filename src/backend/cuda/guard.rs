//! Guard bytes after every plane nvJPEG writes into the hardware output buffer.
//!
//! The plan gives each plane of an encoded image its rows padded to whole MCUs (a decoder
//! may write the last MCU whole), then [`GUARD_BYTES`] bytes nothing may write
//! ([`StoredPlane`](crate::backend::device::batch::StoredPlane)). Before a batch goes to
//! nvJPEG the guards are filled with a pattern; after it, the guards of every image nvJPEG
//! decoded are read back, and one that changed fails the batch
//! ([`CudaError::GuardOverwritten`]) instead of delivering a neighbour's corrupted
//! pixels. The CPU decoder's uploads (interleaved RGB rows over the whole region) are
//! not checked: they may cover the guards of their own image, never another's.
//!
//! The layout and the check are host logic, tested here on a host buffer standing for
//! the device's; [`arm`] and [`check`] do the copies.

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

use super::error::CudaError;
use super::memory;
use crate::backend::device::batch::{EncodedJob, GUARD_BYTES};
use crate::error::Result;

/// One guard: after plane `plane` of the encoded job `job`, at byte `offset` of the
/// hardware output buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    /// Index of the job in the batch's encoded jobs.
    pub job: usize,
    /// The component plane.
    pub plane: usize,
    /// Byte offset in the hardware output buffer.
    pub offset: u64,
}

/// The guard after every plane of every job, where the plan put them.
pub fn guards(jobs: &[EncodedJob]) -> Vec<Guard> {
    let mut out = Vec::with_capacity(jobs.len() * 3);
    for (job, j) in jobs.iter().enumerate() {
        for (plane, p) in j.planes[..j.components.min(3) as usize].iter().enumerate() {
            out.push(Guard {
                job,
                plane,
                offset: j.rgbi.0 + p.offset + p.pitch * u64::from(p.rows),
            });
        }
    }
    out
}

/// The word the guards are filled with (a 4-byte fill is one asynchronous driver call).
const WORD: u32 = 0x3CC3_A55A;

/// The pattern one guard holds: [`WORD`] repeated, no run of one byte value, so that
/// neither a cleared buffer nor a flat plane matches it.
pub fn pattern() -> Vec<u8> {
    WORD.to_le_bytes()
        .into_iter()
        .cycle()
        .take(GUARD_BYTES as usize)
        .collect()
}

/// Checks the guards read back (`read`: each guard's bytes, in the order of `guards`):
/// the first that changed among the jobs `decoded_by_nvjpeg` names is the error.
pub fn verify(
    jobs: &[EncodedJob],
    guards: &[Guard],
    read: &[u8],
    decoded_by_nvjpeg: &dyn Fn(usize) -> bool,
) -> std::result::Result<(), CudaError> {
    let want = pattern();
    for (g, got) in guards.iter().zip(read.chunks_exact(want.len())) {
        if !decoded_by_nvjpeg(g.job) {
            continue;
        }
        let changed = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        if changed > 0 {
            return Err(CudaError::GuardOverwritten {
                sample: jobs.get(g.job).map_or(g.job, |j| j.sample),
                plane: g.plane,
                changed,
                guard: GUARD_BYTES,
            });
        }
    }
    Ok(())
}

/// Fills every guard with [`pattern`] on `stream`.
///
/// # Safety
/// Each guard, `base + offset .. + GUARD_BYTES`, lies within one live device allocation
/// of the context that owns `stream`, which nothing else uses until `stream` has passed
/// the fills. (`base` and the offsets are multiples of 4: the plan puts planes and their
/// rows at multiples of 256.)
pub(crate) unsafe fn arm(stream: &CudaStream, base: CUdeviceptr, guards: &[Guard]) -> Result<()> {
    for g in guards {
        // SAFETY: by the caller's contract.
        unsafe { memory::fill_words(stream, base + g.offset, WORD, GUARD_BYTES as usize / 4)? };
    }
    Ok(())
}

/// Reads every guard back (waiting for `stream`) and [`verify`]s them.
///
/// # Safety
/// As for [`arm`]; nothing writes the guards other than work ordered before this call.
pub(crate) unsafe fn check(
    stream: &CudaStream,
    base: CUdeviceptr,
    jobs: &[EncodedJob],
    guards: &[Guard],
    decoded_by_nvjpeg: &dyn Fn(usize) -> bool,
) -> Result<()> {
    let from: Vec<CUdeviceptr> = guards
        .iter()
        .filter(|g| decoded_by_nvjpeg(g.job))
        .map(|g| base + g.offset)
        .collect();
    if from.is_empty() {
        return Ok(());
    }
    let kept: Vec<Guard> = guards
        .iter()
        .filter(|g| decoded_by_nvjpeg(g.job))
        .copied()
        .collect();
    let mut read = vec![0u8; from.len() * GUARD_BYTES as usize];
    // SAFETY: by the caller's contract.
    unsafe { memory::download(stream, &from, GUARD_BYTES as usize, &mut read)? };
    Ok(verify(jobs, &kept, &read, decoded_by_nvjpeg)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::device::batch::stored_planes;

    /// An image's size and sampling factors.
    type Shape = ([u32; 2], &'static [(u8, u8)]);

    /// Jobs for images of these sizes and samplings, laid out one after another as the
    /// plan lays them out (regions at multiples of 256); and the buffer's length.
    fn layout(images: &[Shape]) -> (Vec<EncodedJob>, u64) {
        let mut at = 0u64;
        let mut jobs = Vec::new();
        for (k, &(full, factors)) in images.iter().enumerate() {
            let (components, planes) = stored_planes(full, factors).expect("planes");
            let mut job = EncodedJob {
                sample: 10 + k,
                window: [0, 0, full[0], full[1]],
                full,
                dst: 0,
                header: 0,
                rgbi: (at, (3 * u64::from(full[0])).next_multiple_of(256)),
                components,
                planes,
            };
            job.rgbi.0 = at;
            at += job.rgbi_bytes().next_multiple_of(256);
            jobs.push(job);
        }
        (jobs, at)
    }

    /// Writes `value` over plane `c` of `job` as a decoder that writes whole MCUs does:
    /// every column and row of the image's last MCU (`extra_rows` more past it, for a
    /// decoder that overruns).
    fn write_plane(
        buf: &mut [u8],
        job: &EncodedJob,
        factors: &[(u8, u8)],
        c: usize,
        value: u8,
        extra_rows: u32,
    ) {
        let max_h = factors.iter().map(|f| u32::from(f.0)).max().expect("h");
        let max_v = factors.iter().map(|f| u32::from(f.1)).max().expect("v");
        let (h, v) = (u32::from(factors[c].0), u32::from(factors[c].1));
        // Independent of the plan: the MCU grid of the interleaved scan.
        let cols = job.full[0].div_ceil(8 * max_h) * 8 * h;
        let rows = job.full[1].div_ceil(8 * max_v) * 8 * v + extra_rows;
        let p = &job.planes[c];
        for y in 0..u64::from(rows) {
            let at = (job.rgbi.0 + p.offset + y * p.pitch) as usize;
            buf[at..at + cols as usize].fill(value);
        }
    }

    fn arm_host(buf: &mut [u8], guards: &[Guard]) {
        for g in guards {
            let at = g.offset as usize;
            buf[at..at + GUARD_BYTES as usize].copy_from_slice(&pattern());
        }
    }

    fn read_host(buf: &[u8], guards: &[Guard]) -> Vec<u8> {
        guards
            .iter()
            .flat_map(|g| buf[g.offset as usize..(g.offset + GUARD_BYTES) as usize].to_vec())
            .collect()
    }

    const S420: &[(u8, u8)] = &[(2, 2), (1, 1), (1, 1)];
    const S422: &[(u8, u8)] = &[(2, 1), (1, 1), (1, 1)];
    const S444: &[(u8, u8)] = &[(1, 1), (1, 1), (1, 1)];
    const GRAY: &[(u8, u8)] = &[(1, 1)];

    /// Many sizes (none a multiple of its MCU) in one batch.
    fn batch() -> Vec<Shape> {
        vec![
            ([101, 77], S420),
            ([33, 17], S422),
            ([250, 9], S420),
            ([7, 5], GRAY),
            ([64, 63], S444),
            ([1, 1], S420),
            ([513, 300], S420),
        ]
    }

    #[test]
    fn planes_written_as_whole_mcus_stay_in_their_own_region() {
        let images = batch();
        let (jobs, len) = layout(&images);
        let mut buf = vec![0u8; len as usize];
        let guards = guards(&jobs);
        arm_host(&mut buf, &guards);
        // Last image first, last plane first: whatever order a decoder writes in, each
        // plane keeps its own value.
        for (k, (job, (_, factors))) in jobs.iter().zip(&images).enumerate().rev() {
            for c in (0..job.components as usize).rev() {
                write_plane(&mut buf, job, factors, c, (1 + k * 3 + c) as u8, 0);
            }
        }
        for (k, job) in jobs.iter().enumerate() {
            for c in 0..job.components as usize {
                let p = &job.planes[c];
                for y in 0..u64::from(p.height) {
                    let at = (job.rgbi.0 + p.offset + y * p.pitch) as usize;
                    let row = &buf[at..at + p.width as usize];
                    assert!(
                        row.iter().all(|&b| b == (1 + k * 3 + c) as u8),
                        "image {k} plane {c} row {y} was overwritten by a neighbour"
                    );
                }
            }
        }
        let read = read_host(&buf, &guards);
        verify(&jobs, &guards, &read, &|_| true).expect("no guard touched");
    }

    #[test]
    fn a_write_past_the_padded_rows_is_caught_naming_the_sample_and_plane() {
        let images = batch();
        let (jobs, len) = layout(&images);
        let guards = guards(&jobs);
        assert_eq!(guards.len(), 3 * 6 + 1);
        for (k, c) in [(0, 0), (2, 2), (3, 0), (6, 1)] {
            let mut buf = vec![0u8; len as usize];
            arm_host(&mut buf, &guards);
            let (_, factors) = images[k];
            write_plane(&mut buf, &jobs[k], factors, c, 0xEE, 1);
            let read = read_host(&buf, &guards);
            let err = verify(&jobs, &guards, &read, &|_| true).expect_err("spill caught");
            match err {
                CudaError::GuardOverwritten {
                    sample,
                    plane,
                    changed,
                    ..
                } => {
                    assert_eq!((sample, plane), (10 + k, c));
                    assert!(changed > 0);
                }
                other => panic!("{other}"),
            }
            // An image the CPU decoded (RGB rows over its region) is not checked.
            let not_k = move |j: usize| j != k;
            verify(&jobs, &guards, &read, &not_k).expect("only the CPU's image touched");
        }
    }

    #[test]
    fn the_pattern_is_no_flat_run() {
        let p = pattern();
        assert_eq!(p.len() as u64, GUARD_BYTES);
        assert!(p.windows(2).all(|w| w[0] != w[1]));
    }
}

//! EXIF orientation on the device: the decoded windows (stored frame) of a batch's
//! rotated samples are turned upright, all in one pass, into the [`Buffer::Oriented`]
//! scratch buffer by the `orient` kernel, then copied back into the windows buffer where
//! the augment pass reads them (wgpu binds no buffer both read-only and read-write in one
//! dispatch, hence the scratch). The pixels are those of the CPU decoder's `reorient`
//! (Pillow's `exif_transpose`).
//!
//! # The job table
//!
//! One record of [`JOB_WORDS`] words per window, uploaded with the decode input
//! ([`Buffer::DecodeInput`], after its chunks):
//!
//! | word | what |
//! | --- | --- |
//! | 0 | first word of the source window, relative to the launch's source binding |
//! | 1, 2 | source width, height |
//! | 3 | orientation (2-8) |
//! | 4, 5 | upright width, height |
//! | 6 | first word of the upright window, relative to the launch's output binding |
//! | 7 | first invocation: the upright pixels of the group's windows before it |
//!
//! # Launches
//!
//! One invocation per upright pixel of every window, the windows flattened; an invocation
//! finds its window by a binary search over word 7. Where the windows, their upright
//! copies or the table do not fit one binding (`max_binding`), or their pixels one grid
//! (`per_dim` workgroups along each dimension), they are split into groups, one launch
//! each, each with its own stretch of the table (starting on a 256-byte boundary).
//!
//! [`Buffer::Oriented`] mirrors the stretch of the windows buffer from the first upright
//! window to the end of the last, so that one copy per run of adjacent upright windows
//! (one copy, as a batch plan places them) brings them back.
//!
//! Parameter words of an `orient` launch: the group's jobs, its invocations (upright
//! pixels) and the invocations per grid row (`grid[0] * 64`).
#![doc(hidden)]

use super::decode::DeviceImage;
use super::error::DeviceError;
use super::launch::{grid, Binding, Buffer, Kernel, Launch, Step, PARAM_WORDS};
use crate::error::{Error, Result};

/// Binding offsets are multiples of this.
const ALIGN: u64 = 256;
/// Words of one job record in the table.
pub const JOB_WORDS: usize = 8;

/// One window to turn: `src` as decoded, `orientation` (2-8), written at word `dst`.
#[derive(Debug, Clone, Copy)]
pub struct OrientJob {
    /// The decoded (stored-frame) window.
    pub src: DeviceImage,
    /// EXIF orientation, 2-8.
    pub orientation: u8,
    /// First word of the upright window in the windows buffer.
    pub dst: u64,
}

impl OrientJob {
    /// Width and height of the upright window.
    pub fn size(&self) -> (u32, u32) {
        if self.orientation >= 5 {
            (self.src.height, self.src.width)
        } else {
            (self.src.width, self.src.height)
        }
    }

    fn pixels(&self) -> u64 {
        u64::from(self.src.width) * u64::from(self.src.height)
    }
}

/// What [`launches`] plans.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrientPass {
    /// The `orient` launches (one per group), then the copies back into
    /// [`Buffer::Windows`].
    pub steps: Vec<Step>,
    /// The job table the launches read, to be placed at the byte offset of
    /// [`Buffer::DecodeInput`] given to [`launches`].
    pub table: Vec<u32>,
    /// Bytes [`Buffer::Oriented`] needs.
    pub oriented: u64,
}

/// Words of the windows a group reads, its outputs (in [`Buffer::Oriented`]) and its
/// invocations.
#[derive(Debug, Clone, Copy)]
struct Group {
    jobs: usize,
    src: (u64, u64),
    out: (u64, u64),
    pixels: u64,
}

impl Group {
    fn of(src: (u64, u64), out: (u64, u64), pixels: u64) -> Self {
        Group {
            jobs: 1,
            src,
            out,
            pixels,
        }
    }

    fn with(&self, other: &Group) -> Group {
        Group {
            jobs: self.jobs + other.jobs,
            src: (self.src.0.min(other.src.0), self.src.1.max(other.src.1)),
            out: (self.out.0.min(other.out.0), self.out.1.max(other.out.1)),
            pixels: self.pixels + other.pixels,
        }
    }

    /// First word of a binding that holds `words` (aligned down), and its bytes.
    fn binding(words: (u64, u64)) -> (u64, u64) {
        let base = words.0 * 4 / ALIGN * ALIGN;
        (base, (words.1 * 4 - base).max(4))
    }

    /// The grid, where its bindings hold at most `max` bytes and its grid fits.
    fn grid(&self, max: u64, per_dim: u64) -> Option<[u32; 2]> {
        let fits = Self::binding(self.src).1 <= max
            && Self::binding(self.out).1 <= max
            && (self.jobs * JOB_WORDS * 4) as u64 <= max;
        grid(self.pixels, Kernel::Orient.workgroup(), per_dim).filter(|_| fits)
    }
}

/// The steps that turn every job's window upright: the `orient` launches into
/// [`Buffer::Oriented`] (as few as the device's `max_binding` bytes per binding and
/// `per_dim` workgroups per grid dimension allow; one where they do not bind), reading
/// the windows from [`Buffer::Windows`] (`windows_bytes` long) and the job table from
/// [`Buffer::DecodeInput`] at byte `table_at` (a multiple of 256), then the copies back to
/// each job's destination (one where the upright windows are adjacent). A malformed job
/// (a bad orientation, a source or destination outside the windows, a destination over
/// its source or another's) or a window that alone exceeds the limits is
/// [`crate::Error::Device`].
pub fn launches(
    jobs: &[OrientJob],
    windows_bytes: u64,
    table_at: u64,
    max_binding: u64,
    per_dim: u64,
) -> Result<OrientPass> {
    if jobs.is_empty() {
        return Ok(OrientPass::default());
    }
    if !table_at.is_multiple_of(ALIGN) {
        return Err(Error::internal(
            "an orientation job table off a 256-byte boundary",
        ));
    }
    // Word indices in the kernels are u32: bindings stay below 2 GiB.
    let max = max_binding.min(1 << 31);
    let malformed = |k: usize, j: &OrientJob| DeviceError::OrientJob {
        job: k,
        orientation: j.orientation,
        src: u64::from(j.src.offset),
        dst: j.dst,
    };
    for (k, j) in jobs.iter().enumerate() {
        let src = u64::from(j.src.offset);
        let (px, src_end) = (j.pixels(), src + j.pixels());
        let dst_overlaps = j.dst < src_end && src < j.dst + px;
        if !(2..=8).contains(&j.orientation)
            || (j.dst + px) * 4 > windows_bytes
            || src_end * 4 > windows_bytes
            || dst_overlaps
        {
            return Err(malformed(k, j).into());
        }
    }
    // Destinations in order: disjoint, and in runs of adjacent windows (one copy each).
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&k| jobs[k].dst);
    let first = jobs[order[0]].dst;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &k in &order {
        let j = &jobs[k];
        let end = j.dst + j.pixels();
        match runs.last_mut() {
            Some(run) if j.dst < run.1 => return Err(malformed(k, j).into()),
            Some(run) if j.dst == run.1 => run.1 = end,
            _ => runs.push((j.dst, end)),
        }
    }
    let oriented = runs.last().map_or(4, |r| (r.1 - first) * 4).max(4);

    // Groups of consecutive jobs, each as large as the limits allow.
    let mut groups: Vec<Group> = Vec::new();
    for j in jobs {
        let src = u64::from(j.src.offset);
        let (px, out) = (j.pixels(), j.dst - first);
        let alone = Group::of((src, src + px), (out, out + px), px);
        if alone.grid(max, per_dim).is_none() {
            let (width, height) = j.size();
            return Err(DeviceError::OrientedWindow { width, height }.into());
        }
        match groups.last_mut() {
            Some(g) if g.with(&alone).grid(max, per_dim).is_some() => *g = g.with(&alone),
            _ => groups.push(alone),
        }
    }

    let mut steps = Vec::with_capacity(groups.len() + runs.len());
    let mut table: Vec<u32> = Vec::new();
    let mut next = 0;
    for g in &groups {
        let (src_base, src_bytes) = Group::binding(g.src);
        let (out_base, out_bytes) = Group::binding(g.out);
        let at = table.len();
        let mut invocation = 0u64;
        for j in &jobs[next..next + g.jobs] {
            let (ow, oh) = j.size();
            // Within bindings of at most 2 GiB: below 2^29 words.
            table.extend_from_slice(&[
                (u64::from(j.src.offset) - src_base / 4) as u32,
                j.src.width,
                j.src.height,
                u32::from(j.orientation),
                ow,
                oh,
                (j.dst - first - out_base / 4) as u32,
                invocation as u32,
            ]);
            invocation += j.pixels();
        }
        next += g.jobs;
        let Some(grid) = g.grid(max, per_dim) else {
            return Err(Error::internal("an orientation group outgrew its limits"));
        };
        let mut params = [0u32; PARAM_WORDS];
        params[..3].copy_from_slice(&[
            g.jobs as u32,
            g.pixels as u32,
            grid[0] * Kernel::Orient.workgroup(),
        ]);
        steps.push(Step::Launch(Launch {
            kernel: Kernel::Orient,
            grid,
            bindings: vec![
                Binding {
                    buffer: Buffer::Windows,
                    offset: src_base,
                    size: src_bytes,
                },
                Binding {
                    buffer: Buffer::DecodeInput,
                    offset: table_at + at as u64 * 4,
                    size: (g.jobs * JOB_WORDS * 4) as u64,
                },
                Binding {
                    buffer: Buffer::Oriented,
                    offset: out_base,
                    size: out_bytes,
                },
            ],
            params,
        }));
        // The next group's records start on a binding boundary.
        table.resize(table.len().next_multiple_of(ALIGN as usize / 4), 0);
    }
    for (start, end) in runs {
        let size = (end - start) * 4;
        steps.push(Step::Copy {
            src: Binding {
                buffer: Buffer::Oriented,
                offset: (start - first) * 4,
                size,
            },
            dst: Binding {
                buffer: Buffer::Windows,
                offset: start * 4,
                size,
            },
        });
    }
    Ok(OrientPass {
        steps,
        table,
        oriented,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(offset: u32, w: u32, h: u32, orientation: u8, dst: u64) -> OrientJob {
        OrientJob {
            src: DeviceImage {
                offset,
                width: w,
                height: h,
                ..DeviceImage::default()
            },
            orientation,
            dst,
        }
    }

    fn counts(steps: &[Step]) -> (usize, usize) {
        let launches = steps
            .iter()
            .filter(|s| matches!(s, Step::Launch(_)))
            .count();
        (launches, steps.len() - launches)
    }

    #[test]
    fn adjacent_windows_take_one_launch_and_one_copy() {
        // Three windows of 10x20, 7x3 and 5x5, their upright copies after them.
        let jobs = [
            job(0, 10, 20, 6, 300),
            job(200, 7, 3, 3, 500),
            job(221, 5, 5, 8, 521),
        ];
        let p = launches(&jobs, 4 * 546, 1024, 1 << 27, 65535).expect("plan");
        assert_eq!(counts(&p.steps), (1, 1));
        assert_eq!(p.oriented, 4 * 246);
        let Step::Launch(l) = &p.steps[0] else {
            panic!("a launch first");
        };
        assert_eq!(&l.params[..3], &[3, 246, 64 * 4]);
        assert_eq!(l.grid, [4, 1]);
        assert_eq!(l.bindings[1].offset, 1024);
        assert_eq!(l.bindings[1].size, 3 * 32);
        // Output words relative to the first upright window; invocations prefixed.
        assert_eq!(&p.table[..8], &[0, 10, 20, 6, 20, 10, 0, 0]);
        assert_eq!(&p.table[8..16], &[200, 7, 3, 3, 7, 3, 200, 200]);
        assert_eq!(&p.table[16..24], &[221, 5, 5, 8, 5, 5, 221, 221]);
        let Step::Copy { src, dst } = p.steps[1] else {
            panic!("then a copy");
        };
        assert_eq!(
            (src.buffer, src.offset, src.size),
            (Buffer::Oriented, 0, 984)
        );
        assert_eq!(
            (dst.buffer, dst.offset, dst.size),
            (Buffer::Windows, 1200, 984)
        );
    }

    #[test]
    fn small_limits_split_the_jobs_into_groups() {
        // 40 windows of 32x32 (4 KiB each): 16 KiB bindings hold 4 (less where a
        // binding starts before its first window); a 2x2 grid 256 invocations.
        let jobs: Vec<OrientJob> = (0..40)
            .map(|k| {
                job(
                    1024 * k,
                    32,
                    32,
                    2 + (k % 7) as u8,
                    40 * 1024 + 1024 * u64::from(k),
                )
            })
            .collect();
        let p = launches(&jobs, 4 * 80 * 1024, 0, 16 << 10, 65535).expect("plan");
        let (launched, copies) = counts(&p.steps);
        assert_eq!((launched, copies), (10, 1));
        let p = launches(&jobs, 4 * 80 * 1024, 0, 1 << 27, 4).expect("plan");
        assert_eq!(counts(&p.steps), (40, 1));
        for s in &p.steps {
            if let Step::Launch(l) = s {
                assert!(l.grid[0] <= 4 && l.grid[1] <= 4);
                assert!(l.bindings[1].offset % 256 == 0);
            }
        }
        // A window that alone exceeds a grid is refused.
        let e = launches(&jobs, 4 * 80 * 1024, 0, 1 << 27, 3).expect_err("too large");
        assert!(matches!(
            DeviceError::of(&e),
            Some(DeviceError::OrientedWindow {
                width: 32,
                height: 32
            })
        ));
    }

    #[test]
    fn malformed_jobs_are_refused() {
        let bad = |jobs: &[OrientJob]| {
            launches(jobs, 4 * 1000, 0, 1 << 27, 65535)
                .is_err_and(|e| matches!(DeviceError::of(&e), Some(DeviceError::OrientJob { .. })))
        };
        assert!(bad(&[job(0, 10, 10, 1, 500)]));
        assert!(bad(&[job(0, 10, 10, 9, 500)]));
        // Over its own source, past the windows, over another's destination.
        assert!(bad(&[job(0, 10, 10, 6, 50)]));
        assert!(bad(&[job(0, 10, 10, 6, 950)]));
        assert!(bad(&[job(950, 10, 10, 6, 0)]));
        assert!(bad(&[job(0, 10, 10, 6, 500), job(100, 10, 10, 6, 550)]));
        // Gaps between destinations: one copy per run.
        let p = launches(
            &[job(0, 10, 10, 6, 500), job(100, 10, 10, 6, 700)],
            4 * 1000,
            0,
            1 << 27,
            65535,
        )
        .expect("plan");
        assert_eq!(counts(&p.steps), (1, 2));
        assert_eq!(p.oriented, 4 * 300);
        assert!(launches(&[job(0, 1, 1, 2, 1)], 8, 100, 1 << 27, 65535).is_err());
    }
}

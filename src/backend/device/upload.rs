//! Where a batch's upload is written ([`UploadTarget`]: host memory, or a mapped staging
//! buffer written in ranges) and how it is spread over threads.

use crate::error::Result;

/// The most threads [`BatchPlan::write_upload`](super::batch::BatchPlan::write_upload)
/// spreads a batch's payload copies over.
pub const UPLOAD_THREADS: usize = 8;

/// Upload bytes below which [`BatchPlan::write_upload`](super::batch::BatchPlan::write_upload)
/// writes on the calling thread alone (a thread costs tens of microseconds to start; a core
/// copies about a megabyte in that time).
pub(super) const SPREAD_BYTES: usize = 4 << 20;

/// Where [`BatchPlan::write_upload`](super::batch::BatchPlan::write_upload) writes: host memory (`&mut [u8]`, CUDA's pinned
/// staging), or a mapped staging buffer that may only be written in ranges (wgpu's).
pub trait UploadTarget {
    /// One range of it, written by one thread.
    type Part<'p>: UploadPart + Send
    where
        Self: 'p;

    /// Bytes.
    fn len(&self) -> usize;

    /// Whether it holds no byte.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The disjoint ranges `bounds[i]..bounds[i + 1]` (increasing, on 8-byte boundaries
    /// but the last, within [`Self::len`]), one part each.
    fn parts(&mut self, bounds: &[usize]) -> Result<Vec<Self::Part<'_>>>;
}

/// One range of an [`UploadTarget`].
pub trait UploadPart {
    /// Writes `src` from byte `at` of the range (as much of it as fits).
    fn write_at(&mut self, at: usize, src: &[u8]);
}

impl UploadTarget for &mut [u8] {
    type Part<'p>
        = &'p mut [u8]
    where
        Self: 'p;

    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn parts(&mut self, bounds: &[usize]) -> Result<Vec<&mut [u8]>> {
        let mut out = Vec::with_capacity(bounds.len().saturating_sub(1));
        let first = bounds.first().copied().unwrap_or(0);
        let mut rest = self.get_mut(first..).ok_or_else(bad_bounds)?;
        for w in bounds.windows(2) {
            let n = w[1].checked_sub(w[0]).ok_or_else(bad_bounds)?;
            let (piece, tail) = rest.split_at_mut_checked(n).ok_or_else(bad_bounds)?;
            out.push(piece);
            rest = tail;
        }
        Ok(out)
    }
}

impl UploadPart for &mut [u8] {
    fn write_at(&mut self, at: usize, src: &[u8]) {
        let n = src.len().min(<[u8]>::len(self).saturating_sub(at));
        if n > 0 {
            self[at..at + n].copy_from_slice(&src[..n]);
        }
    }
}

fn bad_bounds() -> crate::Error {
    crate::Error::internal("upload ranges outside their target")
}

/// Threads to write an upload of `bytes` with: one below [`SPREAD_BYTES`], else up to
/// [`UPLOAD_THREADS`] (and the host's cores), a megabyte or more each.
pub(super) fn spread_threads(bytes: usize) -> usize {
    if bytes < SPREAD_BYTES {
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(UPLOAD_THREADS)
        .min(bytes / (1 << 20))
        .max(1)
}

/// Writes what of `parts` (sorted, disjoint `(first byte, bytes)`) falls in `range` into
/// `piece`, which holds that range.
pub(super) fn write_range<P: UploadPart>(
    piece: &mut P,
    (lo, hi): (usize, usize),
    parts: &[(usize, &[u8])],
) {
    let first = parts.partition_point(|(at, b)| at + b.len() <= lo);
    for &(at, bytes) in &parts[first..] {
        if at >= hi {
            break;
        }
        let (a, b) = (at.max(lo), (at + bytes.len()).min(hi));
        piece.write_at(a - lo, &bytes[a - at..b - at]);
    }
}

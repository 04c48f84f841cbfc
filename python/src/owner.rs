//! The Rust batch behind a Python `Batch` and every tensor exported from it: below both
//! (`batch`, `tensor`), so that each names it without naming the other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The Rust batch, kept alive by the Python batch and by every tensor exported from it.
/// Dropping the last reference returns its buffers to the pipeline's ring.
pub(crate) struct BatchOwner {
    pub(crate) batch: stoker::Batch,
    /// The pipeline's count of batches alive (handed out, not yet returned).
    live: Arc<AtomicUsize>,
}

impl BatchOwner {
    pub(crate) fn new(batch: stoker::Batch, live: Arc<AtomicUsize>) -> Self {
        live.fetch_add(1, Ordering::AcqRel);
        BatchOwner { batch, live }
    }
}

impl Drop for BatchOwner {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

//! Staging: a fixed ring of host byte buffers that readers fill with compressed bytes.
//!
//! The ring holds `slots` buffers. A reader takes one (blocking while all are in use: this
//! is what bounds memory in flight), fills it, and passes it with the job to a worker; the
//! worker returns it once the sample is decoded. Buffers keep their capacity, so in the
//! steady state reading allocates nothing.
//!
//! What a buffer keeps is capped: each would otherwise keep the capacity of the largest
//! file it ever held, and over epochs of mixed sizes more and more of the ring's buffers
//! meet one of the rare large photos, so resident memory crept up towards (slots) x
//! (largest file) (measured: the readers' buffers held 184 MB at the peak of a few epochs
//! of the 500-image set with 16 Mpx photos beside it, CPU backend, and memory still rose
//! after 20 minutes). A buffer coming back larger than [`KEEP_FACTOR`] times the typical
//! file (a running mean), or [`KEEP_FLOOR`] if that is more, is freed (being large, it
//! goes back to the system: `pipeline::heap`); the next large file allocates its own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver, Sender};

/// A buffer up to this capacity is always kept.
const KEEP_FLOOR: usize = 1 << 20;
/// A buffer up to this many times the typical file is kept.
const KEEP_FACTOR: usize = 2;

/// One staging slot: the image bytes and, for segmentation samples, the mask bytes.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub image: Vec<u8>,
    pub mask: Vec<u8>,
}

/// The ring: a channel of free slots.
#[derive(Debug, Clone)]
pub(crate) struct StagingRing {
    pub free_tx: Sender<Staged>,
    pub free_rx: Receiver<Staged>,
    /// Mean bytes per file, over roughly the last 16 given back (0: none yet).
    typical: Arc<AtomicUsize>,
}

impl StagingRing {
    /// A ring of `slots` buffers, taken from `kept` (buffers of an earlier epoch, which
    /// keep their capacity) first, then new and empty, with room to [`Self::grow`] to
    /// `cap` buffers.
    pub(crate) fn new(slots: usize, cap: usize, kept: &mut Vec<Staged>) -> Self {
        let slots = slots.max(1);
        let (free_tx, free_rx) = bounded(cap.max(slots));
        for _ in 0..slots {
            // Cannot fail: the channel has room for exactly `slots` buffers.
            let _ = free_tx.send(kept.pop().unwrap_or_default());
        }
        StagingRing {
            free_tx,
            free_rx,
            typical: Arc::default(),
        }
    }

    /// Adds `n` new, empty buffers (autotune added readers), as many as the ring has room
    /// for.
    pub(crate) fn grow(&self, n: usize) {
        for _ in 0..n {
            if self.free_tx.try_send(Staged::default()).is_err() {
                return;
            }
        }
    }

    /// The buffers back in the ring, to keep for the next epoch.
    pub(crate) fn drain(&self) -> impl Iterator<Item = Staged> + '_ {
        self.free_rx.try_iter()
    }

    /// Returns a slot to the ring.
    pub(crate) fn give_back(&self, mut s: Staged) {
        // (Threads give back at once: a mean updated by a racing store is still a mean.)
        let mut typical = self.typical.load(Ordering::Relaxed);
        for used in [s.image.len(), s.mask.len()] {
            if used > 0 {
                typical = match typical {
                    0 => used,
                    t => t - t / 16 + used / 16,
                };
            }
        }
        self.typical.store(typical, Ordering::Relaxed);
        let cap = typical.saturating_mul(KEEP_FACTOR).max(KEEP_FLOOR);
        for buf in [&mut s.image, &mut s.mask] {
            if buf.capacity() > cap {
                *buf = Vec::new();
            } else {
                buf.clear();
            }
        }
        // Never blocks: at most `slots` buffers exist. Fails only during shutdown.
        let _ = self.free_tx.try_send(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer that held a rare large file is freed when it comes back; those of the
    /// typical size keep their capacity.
    #[test]
    fn buffers_larger_than_the_typical_file_are_freed() {
        let ring = StagingRing::new(2, 2, &mut Vec::new());
        let fill = |n: usize| {
            let mut s = ring.free_rx.try_recv().expect("a free slot");
            s.image.resize(n, 1);
            s
        };
        for _ in 0..40 {
            ring.give_back(fill(100_000));
        }
        let s = ring.free_rx.try_recv().expect("slot");
        assert!(
            s.image.capacity() >= 100_000,
            "kept: {}",
            s.image.capacity()
        );
        ring.give_back(s);
        ring.give_back(fill(8 << 20));
        let caps: Vec<usize> = ring.drain().map(|s| s.image.capacity()).collect();
        assert_eq!(caps.len(), 2);
        assert!(caps.iter().all(|&c| c < KEEP_FLOOR), "{caps:?}");
    }
}

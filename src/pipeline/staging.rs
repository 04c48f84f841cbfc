//! Staging: a fixed ring of host byte buffers that readers fill with compressed bytes.
//!
//! The ring holds `slots` buffers. A reader takes one (blocking while all are in use: this
//! is what bounds memory in flight), fills it, and passes it with the job to a worker; the
//! worker returns it once the sample is decoded. Buffers keep their capacity, so in the
//! steady state reading allocates nothing.

use crossbeam_channel::{bounded, Receiver, Sender};

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
}

impl StagingRing {
    /// A ring of `slots` buffers, taken from `kept` (buffers of an earlier epoch, which
    /// keep their capacity) first, then new and empty.
    pub(crate) fn new(slots: usize, kept: &mut Vec<Staged>) -> Self {
        let slots = slots.max(1);
        let (free_tx, free_rx) = bounded(slots);
        for _ in 0..slots {
            // Cannot fail: the channel has room for exactly `slots` buffers.
            let _ = free_tx.send(kept.pop().unwrap_or_default());
        }
        StagingRing { free_tx, free_rx }
    }

    /// The buffers back in the ring, to keep for the next epoch.
    pub(crate) fn drain(&self) -> impl Iterator<Item = Staged> + '_ {
        self.free_rx.try_iter()
    }

    /// Returns a slot to the ring.
    pub(crate) fn give_back(&self, mut s: Staged) {
        s.image.clear();
        s.mask.clear();
        // Never blocks: at most `slots` buffers exist. Fails only during shutdown.
        let _ = self.free_tx.try_send(s);
    }
}

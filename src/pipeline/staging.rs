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
    /// A ring of `slots` empty buffers.
    pub(crate) fn new(slots: usize) -> Self {
        let slots = slots.max(1);
        let (free_tx, free_rx) = bounded(slots);
        for _ in 0..slots {
            // Cannot fail: the channel has room for exactly `slots` buffers.
            let _ = free_tx.send(Staged::default());
        }
        StagingRing { free_tx, free_rx }
    }

    /// Returns a slot to the ring.
    pub(crate) fn give_back(&self, mut s: Staged) {
        s.image.clear();
        s.mask.clear();
        // Never blocks: at most `slots` buffers exist. Fails only during shutdown.
        let _ = self.free_tx.try_send(s);
    }
}

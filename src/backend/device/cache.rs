//! The device cache of decoded samples: whole decoded images kept in device memory
//! (the batcher's [`Buffer::DecodedCache`](crate::backend::device::Buffer::DecodedCache)),
//! keyed by sample id, within a byte budget.
//!
//! It sits where the host cache sits (after decode, before augmentation) and fills the
//! same way: first come, first kept, nothing evicted. A worker that meets a sample not yet
//! kept *reserves* a place for its whole upright image (a [`Reservation`]); the sample is
//! then decoded whole on the device and the batch's plan copies the image into that place.
//! The entry is *recorded* only once the batch that fills it has been submitted
//! ([`Reservation::commit`]); a reservation dropped before (the sample failed, was left
//! out or replaced, the batch or the epoch ended early) gives its place back. A recorded
//! entry is served by the readers without reading the file, and the plan copies it into
//! the batch's windows: the device runs a batch's work after the work of every batch
//! submitted before it, so a copy out follows the copy in.
//!
//! Here the host keeps only the map: where each image is, its size, the decoder's warning
//! (delivered again with the sample in every epoch) and its label plane (uploaded with
//! the augment input, as for any sample).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::decode::{DecodeWarning, LabelPlane};

/// Places start on this many bytes.
const ALIGN: u64 = 256;

/// One image kept in the device cache.
#[derive(Debug, Clone)]
pub(crate) struct DeviceEntry {
    /// First byte of the image in the cache buffer.
    pub offset: u64,
    /// Width of the upright image.
    pub width: u32,
    /// Height of the upright image.
    pub height: u32,
    /// What the decoder tolerated reading the file.
    pub warning: Option<DecodeWarning>,
    /// The label plane, for segmentation sets.
    pub mask: Option<LabelPlane>,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<u64, Arc<DeviceEntry>>,
    /// Places reserved and not yet recorded: id -> (offset, bytes).
    pending: HashMap<u64, (u64, u64)>,
    /// The first byte after every place handed out.
    next: u64,
    /// Bytes of the recorded entries' places.
    used: u64,
}

/// The map of the device cache: which sample is where, within `capacity` bytes.
#[derive(Debug)]
pub(crate) struct DeviceCache {
    capacity: u64,
    inner: Mutex<Inner>,
}

impl DeviceCache {
    /// A cache of `capacity` bytes (the budget the batcher granted).
    pub(crate) fn new(capacity: u64) -> Self {
        DeviceCache {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The entry of sample `id`, once recorded.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<DeviceEntry>> {
        self.inner.lock().ok()?.map.get(&id).cloned()
    }

    /// Bytes a `width` x `height` image takes (its place).
    pub(crate) fn place_bytes(width: u32, height: u32) -> u64 {
        (4 * u64::from(width) * u64::from(height)).next_multiple_of(ALIGN)
    }

    /// Reserves a place for the `width` x `height` image of sample `id`: `None` when the
    /// budget has no room left for it, or the sample is kept or reserved already (a
    /// sample met twice in one epoch, as a replacement or padding).
    pub(crate) fn reserve(
        self: &Arc<Self>,
        id: u64,
        width: u32,
        height: u32,
    ) -> Option<Reservation> {
        let bytes = Self::place_bytes(width, height);
        let mut g = self.inner.lock().ok()?;
        if bytes == 0
            || g.map.contains_key(&id)
            || g.pending.contains_key(&id)
            || g.next.checked_add(bytes)? > self.capacity
        {
            return None;
        }
        let offset = g.next;
        g.next += bytes;
        g.pending.insert(id, (offset, bytes));
        Some(Reservation {
            cache: Arc::clone(self),
            id,
            offset,
            width,
            height,
            warning: None,
            done: false,
        })
    }

    /// Gives a reserved place back: the last one handed out is taken back for the next
    /// reservation; one further down stays spent (the budget is never exceeded).
    fn abort(&self, id: u64) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        if let Some((offset, bytes)) = g.pending.remove(&id) {
            if offset + bytes == g.next {
                g.next = offset;
            }
        }
    }

    fn record(&self, id: u64, entry: DeviceEntry) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        if let Some((_, bytes)) = g.pending.remove(&id) {
            g.used += bytes;
            g.map.insert(id, Arc::new(entry));
        }
    }

    /// Bytes of device memory the recorded entries take.
    pub(crate) fn used(&self) -> u64 {
        self.inner.lock().map(|g| g.used).unwrap_or(0)
    }

    /// Entries recorded.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().map(|g| g.map.len()).unwrap_or(0)
    }
}

/// A place reserved in the device cache for one sample's image, given back when dropped
/// unless [`Self::commit`]ted.
#[derive(Debug)]
pub(crate) struct Reservation {
    cache: Arc<DeviceCache>,
    id: u64,
    offset: u64,
    width: u32,
    height: u32,
    /// What the decoder tolerated (recorded with the entry).
    pub warning: Option<DecodeWarning>,
    done: bool,
}

impl Reservation {
    /// Where the batch's plan puts the image.
    pub(crate) fn slot(&self) -> crate::backend::device::CacheSlot {
        crate::backend::device::CacheSlot {
            offset: self.offset,
            width: self.width,
            height: self.height,
        }
    }

    /// Records the entry, with the sample's label plane: the batch that fills its place
    /// has been submitted.
    pub(crate) fn commit(mut self, mask: Option<LabelPlane>) {
        self.done = true;
        let entry = DeviceEntry {
            offset: self.offset,
            width: self.width,
            height: self.height,
            warning: self.warning.take(),
            mask,
        };
        self.cache.record(self.id, entry);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.done {
            self.cache.abort(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_kept_within_the_budget_and_given_back_when_dropped() {
        let c = Arc::new(DeviceCache::new(3 * 1024));
        // 16 x 16 RGBA words: 1024 bytes a place.
        let a = c.reserve(1, 16, 16).expect("room");
        assert_eq!(a.slot().offset, 0);
        assert!(c.reserve(1, 16, 16).is_none(), "reserved already");
        let b = c.reserve(2, 16, 16).expect("room");
        assert_eq!(b.slot().offset, 1024);
        // The last place handed out is taken back.
        drop(b);
        let b = c.reserve(2, 16, 16).expect("room");
        assert_eq!(b.slot().offset, 1024);
        a.commit(None);
        assert_eq!(c.get(1).map(|e| e.offset), Some(0));
        assert!(c.reserve(1, 16, 16).is_none(), "kept already");
        let d = c.reserve(3, 16, 16).expect("room");
        assert!(c.reserve(4, 1, 1).is_none(), "the budget is spent");
        // A place further down stays spent when given back.
        drop(b);
        assert!(c.reserve(4, 1, 1).is_none());
        d.commit(None);
        assert_eq!((c.len(), c.used()), (2, 2048));
        assert!(c.get(2).is_none());
    }
}

//! The decoded-sample cache: pixels after decode, before augmentation, bounded in bytes.
//!
//! It is filled in the first epoch (first come, first kept, until the byte budget is
//! spent; nothing is evicted) and keyed by sample id. Augmentation always runs on the
//! cached pixels with the plan of the current epoch, so a cached sample still looks
//! different every epoch.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::decode::{DecodeWarning, Image8, LabelPlane};

/// A decoded sample: image and optional mask, and what the decoder tolerated (kept with
/// the pixels, so a cached sample is marked in every epoch it is delivered).
#[derive(Debug, Clone, Default)]
pub(crate) struct Decoded {
    pub image: Image8,
    pub mask: Option<LabelPlane>,
    pub warning: Option<DecodeWarning>,
}

impl AsRef<crate::decode::Image8> for Decoded {
    fn as_ref(&self) -> &crate::decode::Image8 {
        &self.image
    }
}

impl Decoded {
    pub(crate) fn byte_len(&self) -> u64 {
        (self.image.byte_len() + self.mask.as_ref().map_or(0, LabelPlane::byte_len)) as u64
    }
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<u64, Arc<Decoded>>,
    used: u64,
}

/// Bounded cache of decoded samples.
#[derive(Debug)]
pub(crate) struct Cache {
    capacity: u64,
    inner: RwLock<Inner>,
}

impl Cache {
    pub(crate) fn new(capacity: u64) -> Self {
        Cache {
            capacity,
            inner: RwLock::new(Inner::default()),
        }
    }

    pub(crate) fn get(&self, id: u64) -> Option<Arc<Decoded>> {
        self.inner.read().ok()?.map.get(&id).cloned()
    }

    /// Keeps a copy of `d` if it fits in the remaining budget.
    pub(crate) fn offer(&self, id: u64, d: &Decoded) {
        let size = d.byte_len();
        let Ok(mut g) = self.inner.write() else {
            return;
        };
        if g.map.contains_key(&id) || g.used + size > self.capacity {
            return;
        }
        g.used += size;
        g.map.insert(id, Arc::new(d.clone()));
    }

    /// Bytes held.
    pub(crate) fn used(&self) -> u64 {
        self.inner.read().map(|g| g.used).unwrap_or(0)
    }
}

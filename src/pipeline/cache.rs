//! The decoded-sample cache: pixels after decode, before augmentation, bounded in bytes.
//!
//! It is filled in the first epoch (first come, first kept, until the byte budget is
//! spent; nothing is evicted) and keyed by sample id. Augmentation always runs on the
//! cached pixels with the plan of the current epoch, so a cached sample still looks
//! different every epoch.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

pub(crate) use crate::backend::device::sample_work::Decoded;

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

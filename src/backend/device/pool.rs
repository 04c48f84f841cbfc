//! Coefficient and packed-upload buffers kept between samples, with what is kept capped.
//!
//! A JPEG's coefficients take about twice its pixel count in bytes, too much to allocate
//! (and page in) per sample, so the buffers of prepared samples come back here after
//! their batch is packed and serve the next samples. Each buffer keeps the capacity of
//! the largest image it held, so a pool that kept everything would creep up over epochs
//! of mixed sizes towards (buffers in flight) x (largest image), as more and more of its
//! buffers meet one of the rare large photos (measured on the wgpu backend: 312 MB held
//! by these buffers after three minutes, still rising). So a buffer is kept only while
//! its capacity is at most [`KEEP_FACTOR`] times the typical need (a running mean of what
//! samples used) or [`KEEP_FLOOR`], whichever is larger; a larger one is freed (and, being
//! large, goes back to the system: see `pipeline::heap`), and the rare large sample that
//! follows allocates its own. A set of large images alone makes large the typical need,
//! and their buffers are kept.

use std::sync::Mutex;

use crate::decode::jpeg::coeffs::{Coefficients, PackedJpeg};

/// Keeps at most this many buffers of each kind.
const MAX_KEPT: usize = 1024;
/// Buffers up to this size are always kept (within [`MAX_KEPT`]).
pub(crate) const KEEP_FLOOR: usize = 4 << 20;
/// Buffers up to this many times the typical need are kept.
pub(crate) const KEEP_FACTOR: usize = 2;

/// A buffer the pool keeps: how much it holds allocated and how much it used last.
pub(crate) trait Reusable: Default {
    fn heap_bytes(&self) -> usize;
    fn used_bytes(&self) -> usize;
}

impl Reusable for Coefficients {
    fn heap_bytes(&self) -> usize {
        Coefficients::heap_bytes(self)
    }
    fn used_bytes(&self) -> usize {
        Coefficients::used_bytes(self)
    }
}

impl Reusable for PackedJpeg {
    fn heap_bytes(&self) -> usize {
        PackedJpeg::heap_bytes(self)
    }
    fn used_bytes(&self) -> usize {
        PackedJpeg::used_bytes(self)
    }
}

/// Free buffers of one kind and the running mean of what they were used for.
#[derive(Debug)]
struct Kept<T> {
    // Boxed as the jobs hold them, so a buffer goes back and forth without re-boxing.
    #[allow(clippy::vec_box)]
    free: Vec<Box<T>>,
    /// Mean bytes used per sample, over roughly the last 16 returned (0: none yet).
    typical: usize,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept {
            free: Vec::new(),
            typical: 0,
        }
    }
}

impl<T: Reusable> Kept<T> {
    fn take(this: &Mutex<Self>) -> Box<T> {
        this.lock()
            .ok()
            .and_then(|mut k| k.free.pop())
            .unwrap_or_default()
    }

    fn put(this: &Mutex<Self>, item: Box<T>) {
        let Ok(mut k) = this.lock() else {
            return;
        };
        let used = item.used_bytes();
        k.typical = if k.typical == 0 {
            used
        } else {
            k.typical - k.typical / 16 + used / 16
        };
        let cap = (k.typical.saturating_mul(KEEP_FACTOR)).max(KEEP_FLOOR);
        if k.free.len() < MAX_KEPT && item.heap_bytes() <= cap {
            k.free.push(item);
        }
    }

    fn held_bytes(this: &Mutex<Self>) -> usize {
        this.lock()
            .map(|k| k.free.iter().map(|b| b.heap_bytes()).sum())
            .unwrap_or(0)
    }
}

/// Coefficient buffers handed back after their batch was packed, for the next samples
/// (see the module docs for what is kept).
#[derive(Debug, Default)]
pub struct CoeffPool {
    free: Mutex<Kept<Coefficients>>,
    /// Packed uploads (`DeviceSample::Packed`), as their samples hold them.
    packed: Mutex<Kept<PackedJpeg>>,
}

impl CoeffPool {
    pub(super) fn take(&self) -> Box<Coefficients> {
        Kept::take(&self.free)
    }

    pub(super) fn put(&self, coeffs: Box<Coefficients>) {
        Kept::put(&self.free, coeffs);
    }

    pub(super) fn take_packed(&self) -> Box<PackedJpeg> {
        Kept::take(&self.packed)
    }

    pub(super) fn put_packed(&self, packed: Box<PackedJpeg>) {
        Kept::put(&self.packed, packed);
    }

    /// The bytes the free buffers hold allocated.
    pub fn held_bytes(&self) -> usize {
        Kept::held_bytes(&self.free) + Kept::held_bytes(&self.packed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(words: usize) -> Box<PackedJpeg> {
        let mut p = Box::<PackedJpeg>::default();
        p.data = vec![0; words];
        p
    }

    #[test]
    fn a_rare_large_buffer_is_freed_and_typical_ones_kept() {
        let pool = CoeffPool::default();
        // Typical samples of 1 MB each.
        for _ in 0..64 {
            pool.put_packed(packed(256 << 10));
        }
        let typical = pool.held_bytes();
        assert_eq!(typical, 64 * (1 << 20));
        // A 48 MB one among them is not kept.
        pool.put_packed(packed(12 << 20));
        assert_eq!(pool.held_bytes(), typical);
        // Over many rounds of taking and returning, with one large sample in 16, what is
        // held stays what the typical samples need.
        for round in 0..400 {
            let mut b = pool.take_packed();
            let words = if round % 16 == 0 { 12 << 20 } else { 256 << 10 };
            b.data.clear();
            b.data.resize(words, 0);
            pool.put_packed(b);
        }
        assert!(
            pool.held_bytes() <= 64 * (1 << 20) + KEEP_FLOOR,
            "held {} bytes",
            pool.held_bytes()
        );
    }

    #[test]
    fn a_set_of_large_images_keeps_its_buffers() {
        let pool = CoeffPool::default();
        for _ in 0..8 {
            pool.put_packed(packed(12 << 20));
        }
        assert_eq!(pool.held_bytes(), 8 * (48 << 20));
    }
}

//! A global allocator that forwards to the system's and counts: the bytes held now, the
//! most held since the last reset, and the largest single allocation. A test binary
//! installs it with `#[global_allocator] static ALLOC: common::peak_alloc::Peak =
//! common::peak_alloc::Peak;` (the counters are process-wide: one measurement at a time).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The counting allocator.
pub struct Peak;

/// Bytes held now.
pub static CURRENT: AtomicUsize = AtomicUsize::new(0);
/// The most bytes held since the last [`reset`].
pub static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The largest single allocation since the last [`reset`].
pub static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = CURRENT.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
    LARGEST.fetch_max(by, Ordering::Relaxed);
}

/// Starts a measurement: the peak from what is held now, the largest allocation from 0.
/// Returns the bytes held now.
pub fn reset() -> usize {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    LARGEST.store(0, Ordering::Relaxed);
    base
}

/// The most bytes held since the last [`reset`].
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// The largest single allocation since the last [`reset`].
pub fn largest() -> usize {
    LARGEST.load(Ordering::Relaxed)
}

/// Peak bytes above the start while `f` runs: (Rust heap, resident set where measurable:
/// Linux's `VmHWM`, reset through `/proc/self/clear_refs`).
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, Option<usize>) {
    let rss_base = reset_rss_peak();
    let base = reset();
    let out = f();
    let heap = peak().saturating_sub(base);
    let rss = rss_base.and_then(|b| Some(status_kb("VmHWM")?.saturating_sub(b) * 1024));
    (out, heap, rss)
}

/// Resets the peak resident set to the current one (Linux 4.0+); the current one in kB,
/// or `None` where that is not allowed.
fn reset_rss_peak() -> Option<usize> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    status_kb("VmRSS")
}

/// A `kB` field of `/proc/self/status`, in kB.
fn status_kb(field: &str) -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// SAFETY: forwards every call to the system allocator unchanged; it only counts bytes.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // While it moves, both blocks exist: count the new one before the old goes.
            grew(new_size);
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

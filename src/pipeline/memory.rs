//! Host batch memory: the one place the pipeline uses `unsafe`.
//!
//! A batch buffer is one contiguous allocation of `slots * slot_bytes` bytes, 64-byte
//! aligned (a cache line) so it can be viewed as `u16`, `f16` or `f32`. Worker threads
//! write their samples straight into their slots, concurrently, with no copy:
//! [`SlotMemory::claim`] hands out each slot at most once, and the only way back to
//! reading the whole buffer is [`SlotMemory::reclaim`], which succeeds only when no
//! writer is left. A batch-sized buffer is advised to transparent huge pages before its
//! first touch (`madvise`, Linux).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One cache line: the unit a [`HostBuffer`] is allocated in, so that the buffer starts on
/// a line. A slot whose size is a multiple of 64 bytes (a 224x224 image in f32 or u8, for
/// example) then starts on a line too, and the vectorised writes of the CPU backend never
/// split a line (1.5 % of one core's throughput through the pipeline).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Line([u64; 8]);
// SAFETY: 64 bytes of plain integers with no padding (its size is its alignment); any
// bits are a valid value.
unsafe impl bytemuck::Zeroable for Line {}
// SAFETY: as above; `Copy` and `'static`.
unsafe impl bytemuck::Pod for Line {}

/// An owned byte buffer that starts on a cache line.
#[derive(Debug, Default)]
pub(crate) struct HostBuffer {
    words: Vec<Line>,
    len: usize,
}

impl HostBuffer {
    /// A zeroed buffer of `len` bytes. Failing to allocate it is an error, not an abort
    /// (the builder's memory check makes that rare).
    pub(crate) fn new(len: usize) -> Result<Self, crate::Error> {
        let words = len.div_ceil(64);
        let mut v = Vec::new();
        v.try_reserve_exact(words).map_err(|e| {
            crate::Error::config(
                "memory",
                format!(
                    "cannot allocate a batch buffer of {}: {e}",
                    bytes_figure(len as u128)
                ),
            )
        })?;
        advise_huge_pages(&v);
        v.resize(words, Line([0; 8]));
        Ok(HostBuffer { words: v, len })
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<Line, u8>(&self.words)[..self.len]
    }

    /// The bytes, writable.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<Line, u8>(&mut self.words)[..self.len]
    }
}

/// Asks the kernel to back the whole 2 MiB pages inside `v`'s allocation with huge pages
/// (transparent huge pages, which most distributions enable in their `madvise` mode)
/// before anything touches them: a 19 MB batch of 224x224 f32 images then faults in
/// about 10 times instead of about 4,700 (a batch ring of a few buffers was most of a
/// first epoch's page faults), and the workers' writes into it miss the TLB less. Only
/// advice: where the kernel has no huge pages, or declines, nothing changes. Buffers
/// under 4 MiB are left alone.
#[cfg(target_os = "linux")]
fn advise_huge_pages(v: &Vec<Line>) {
    const HUGE: usize = 2 << 20;
    let start = v.as_ptr() as usize;
    let end = start.saturating_add(v.capacity().saturating_mul(std::mem::size_of::<Line>()));
    let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
    if end - start < 2 * HUGE || last <= first {
        return;
    }
    // SAFETY: madvise(MADV_HUGEPAGE) only advises the kernel how to back the range
    // [first, last): whole 2 MiB pages (so page-aligned, as madvise requires) inside this
    // vector's own allocation, which is not shared; it changes neither the memory's
    // contents nor its validity. Its result is advice taken or not, and is ignored.
    unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            last - first,
            libc::MADV_HUGEPAGE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_: &Vec<Line>) {}

/// Bytes as `206.2 GB (206158430208 bytes)`, for messages that name a figure.
pub(crate) fn bytes_figure(bytes: u128) -> String {
    let b = bytes as f64;
    let (v, unit) = if b >= 1e12 {
        (b / 1e12, "TB")
    } else if b >= 1e9 {
        (b / 1e9, "GB")
    } else if b >= 1e6 {
        (b / 1e6, "MB")
    } else {
        return format!("{bytes} bytes");
    };
    format!("{v:.1} {unit} ({bytes} bytes)")
}

/// The host memory this process can still have, where the system says: the least of
/// Linux's `MemAvailable` and the cgroup's limit less its use (cgroup v2). `None` where
/// neither can be read (another system): the configuration is then not checked against it.
pub(crate) fn available_host_memory() -> Option<u64> {
    let read = |p: &str| crate::source::fsio::read_text(std::path::Path::new(p), 1 << 20).ok();
    let meminfo = read("/proc/meminfo").and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|kb| kb.saturating_mul(1024))
    });
    let number = |p: &str| read(p).and_then(|t| t.trim().parse::<u64>().ok());
    // "max" (no limit) does not parse, and leaves MemAvailable.
    let cgroup = number("/sys/fs/cgroup/memory.max")
        .map(|max| max.saturating_sub(number("/sys/fs/cgroup/memory.current").unwrap_or(0)));
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A [`HostBuffer`] shared by writers that each own one slot.
pub(crate) struct SlotMemory {
    buffer: UnsafeCell<HostBuffer>,
    base: *mut u8,
    slot_bytes: usize,
    claimed: Box<[AtomicBool]>,
}

// SAFETY: the raw pointer refers to the heap allocation owned by `buffer`, which lives as
// long as `self` and never reallocates while shared (no method resizes it). Concurrent
// access goes only through `SlotWriter`s, each holding a distinct slot handed out once by
// an atomic compare-exchange, so no two threads touch the same bytes.
unsafe impl Send for SlotMemory {}
// SAFETY: as above; `&SlotMemory` only allows claiming slots, which is synchronised.
unsafe impl Sync for SlotMemory {}

impl std::fmt::Debug for SlotMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotMemory")
            .field("slot_bytes", &self.slot_bytes)
            .field("slots", &self.claimed.len())
            .finish()
    }
}

impl SlotMemory {
    /// Shares `buffer` as `slots` slots of `slot_bytes` each. Returns the buffer back if it
    /// is too small for them.
    pub(crate) fn share(
        mut buffer: HostBuffer,
        slots: usize,
        slot_bytes: usize,
    ) -> Result<Arc<SlotMemory>, HostBuffer> {
        match slots.checked_mul(slot_bytes) {
            Some(need) if need <= buffer.len() => {}
            _ => return Err(buffer),
        }
        let base = buffer.bytes_mut().as_mut_ptr();
        Ok(Arc::new(SlotMemory {
            buffer: UnsafeCell::new(buffer),
            base,
            slot_bytes,
            claimed: (0..slots).map(|_| AtomicBool::new(false)).collect(),
        }))
    }

    /// The writer of `slot`, or `None` if the slot does not exist or was already claimed.
    pub(crate) fn claim(self: &Arc<Self>, slot: usize) -> Option<SlotWriter> {
        let flag = self.claimed.get(slot)?;
        flag.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        Some(SlotWriter {
            mem: Arc::clone(self),
            slot,
        })
    }

    /// The buffer back, once no writer (and no other handle) is left.
    pub(crate) fn reclaim(this: Arc<SlotMemory>) -> Result<HostBuffer, Arc<SlotMemory>> {
        Arc::try_unwrap(this).map(|m| m.buffer.into_inner())
    }
}

/// Exclusive write access to one slot of a [`SlotMemory`].
#[derive(Debug)]
pub(crate) struct SlotWriter {
    mem: Arc<SlotMemory>,
    slot: usize,
}

impl SlotWriter {
    /// The slot's bytes.
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        let len = self.mem.slot_bytes;
        // SAFETY: `share` checked `slots * slot_bytes <= buffer.len()`, so the range
        // `[slot * slot_bytes, (slot + 1) * slot_bytes)` lies inside the allocation `base`
        // points to. `claim` hands each slot to exactly one `SlotWriter`, and `&mut self`
        // makes this borrow unique within it, so no other reference to these bytes exists
        // while it lives. The allocation outlives the borrow: `self.mem` keeps it alive.
        unsafe { std::slice::from_raw_parts_mut(self.mem.base.add(self.slot * len), len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch-sized buffer's mapping is advised to huge pages: where the kernel gives
    /// them only to advised memory (`madvise` mode), its mapping in `/proc/self/smaps` is
    /// eligible for them (`THPeligible: 1`), which no other mapping of the test is. This
    /// checks the advice, not whether the kernel found free 2 MiB pages at that moment.
    /// Skipped (with a line saying so) in any other mode: off, or `always`, where every
    /// mapping is eligible with or without the advice.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_batch_buffer_is_advised_to_huge_pages() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !mode.contains("[madvise]") {
            eprintln!("transparent huge pages not in madvise mode ({mode:?}): nothing to check");
            return;
        }
        let b = HostBuffer::new(19 << 20).expect("alloc");
        let at = b.bytes().as_ptr() as usize + (10 << 20);
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        let mut eligible = None;
        for line in smaps.lines() {
            let range = line
                .split_whitespace()
                .next()
                .and_then(|r| r.split_once('-'));
            if let Some((lo, hi)) = range.filter(|_| !line.starts_with(|c: char| c.is_uppercase()))
            {
                let (lo, hi) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16));
                inside = matches!((lo, hi), (Ok(lo), Ok(hi)) if lo <= at && at < hi);
            } else if inside && line.starts_with("THPeligible:") {
                eligible = line.split_whitespace().nth(1).map(str::to_owned);
            }
        }
        assert_eq!(eligible.as_deref(), Some("1"), "the buffer's mapping");
    }

    #[test]
    fn a_buffer_starts_on_a_cache_line_and_is_as_long_as_asked() {
        for len in [0, 1, 63, 64, 65, 602_112, 1_000_003] {
            let mut b = HostBuffer::new(len).expect("alloc");
            assert_eq!(b.bytes().len(), len);
            assert_eq!(b.bytes_mut().len(), len);
            assert_eq!(b.bytes().as_ptr() as usize % 64, 0, "{len} bytes");
            assert!(b.bytes().iter().all(|&v| v == 0));
        }
    }

    #[test]
    fn slots_are_claimed_once_and_written_concurrently() {
        let mem = SlotMemory::share(HostBuffer::new(4 * 16).expect("alloc"), 4, 16).expect("fits");
        assert!(mem.claim(4).is_none());
        let writers: Vec<SlotWriter> = (0..4).filter_map(|s| mem.claim(s)).collect();
        assert_eq!(writers.len(), 4);
        assert!(mem.claim(0).is_none());
        std::thread::scope(|s| {
            for (i, mut w) in writers.into_iter().enumerate() {
                s.spawn(move || w.bytes().fill(i as u8 + 1));
            }
        });
        let buf = SlotMemory::reclaim(mem).expect("no writer left");
        let b = buf.bytes();
        for slot in 0..4 {
            assert!(b[slot * 16..(slot + 1) * 16]
                .iter()
                .all(|&v| v == slot as u8 + 1));
        }
    }

    #[test]
    fn reclaim_fails_while_a_writer_lives() {
        let mem = SlotMemory::share(HostBuffer::new(8).expect("alloc"), 1, 8).expect("fits");
        let w = mem.claim(0);
        let mem = SlotMemory::reclaim(mem).expect_err("writer alive");
        drop(w);
        assert!(SlotMemory::reclaim(mem).is_ok());
        assert!(SlotMemory::share(HostBuffer::new(8).expect("alloc"), 2, 8).is_err());
    }
}

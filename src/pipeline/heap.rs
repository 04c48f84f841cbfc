//! The C library's allocator settings: FFI to glibc's `mallopt`.
//!
//! Decoding images of mixed sizes allocates and frees buffers from a few kilobytes to
//! tens of megabytes on many threads (readers, decode workers, libjpeg's own working
//! memory). glibc's `malloc` serves each thread from an arena of its own, and by default
//! it moves its thresholds as it goes: once a large buffer served by `mmap` is freed, the
//! mmap threshold rises to that buffer's size (up to 32 MiB) and the trim threshold to
//! twice that, so every later buffer below it is carved from an arena, and each arena
//! keeps up to 64 MiB of freed memory at its top without returning it. Over epochs each
//! of a dozen arenas fills up that way: measured on a mixed-size set (the 500-image bench
//! set with photos up to 16 Mpx, CPU backend), resident memory went from 522 MB to 912 MB
//! in five minutes and was still rising, with 11 arenas holding 700 MB for 280 MB in use.
//! `malloc_trim` alone does not help (each arena's top stays above the raised trim
//! threshold).
//!
//! So a pipeline, when it is built, fixes the mmap threshold (which also stops glibc
//! moving either threshold): buffers of [`MMAP_THRESHOLD`] and more are mapped and
//! unmapped on their own, never carved from an arena, and the trim threshold stays where
//! glibc has it (its 128 KiB, unless a freed large buffer moved it before). (A trim
//! threshold fixed at 4 MiB as well kept a forged bomb's 500 MB resident after other work
//! in the process: `tests/bomb.rs`.) When an epoch ends, [`release`] hands back the whole
//! free pages inside the arenas too. Resident memory then follows what is live; what
//! the pipeline keeps live between samples is capped where it is kept (the staging ring,
//! the device path's coefficient pool), see BENCHMARKS.md, "Memory over epochs". The
//! settings are process-wide:
//! they are left as they are where the user set them already (`MALLOC_MMAP_THRESHOLD_`,
//! `MALLOC_TRIM_THRESHOLD_`, `MALLOC_TOP_PAD_` or `GLIBC_TUNABLES` in the environment), or
//! where the pipeline was told not to ([`crate::PipelineBuilder::tune_allocator`]).
//!
//! Why not another allocator: the global allocator is the program's choice, not a
//! library's (the Python extension and a user's binary have their own), and mimalloc held
//! more memory at every epoch here. Other C libraries than glibc return freed memory on
//! their own terms; there this does nothing.

use std::sync::OnceLock;

/// Buffers of this size and more get a mapping of their own, returned when freed.
pub(crate) const MMAP_THRESHOLD: usize = 1 << 20;
/// The environment variables through which a user tunes glibc's allocator: where one is
/// set, stoker leaves the settings alone.
const USER_SETTINGS: &[&str] = &[
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "GLIBC_TUNABLES",
];

/// Whether [`tune`] ran, and whether the thresholds it left are stoker's.
static TUNED: OnceLock<bool> = OnceLock::new();

/// Fixes the allocator's thresholds once per process (see the module docs); later calls
/// do nothing. Returns whether the thresholds are stoker's (set by this call or an
/// earlier one).
pub(crate) fn tune() -> bool {
    *TUNED.get_or_init(|| {
        if USER_SETTINGS.iter().any(|v| std::env::var_os(v).is_some()) {
            log::debug!("allocator: the environment tunes glibc's malloc; left as it is");
            return false;
        }
        let set = set_thresholds();
        if set {
            log::debug!("allocator: mmap threshold fixed at {MMAP_THRESHOLD} bytes");
        }
        set
    })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_thresholds() -> bool {
    // SAFETY: mallopt takes two integers and changes the allocator's parameters under its
    // own lock; any thread may call it at any time.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_thresholds() -> bool {
    false
}

/// Hands the free pages inside the allocator's arenas back to the system, where stoker
/// tuned the allocator ([`tune`]); called when an epoch ends, once its threads have
/// stopped. Freed buffers below [`MMAP_THRESHOLD`] leave holes in the arenas that later
/// buffers of other sizes only partly fill; `malloc_trim` returns the whole pages of every
/// such hole (in every arena, not only at their tops), so resident memory stays what is
/// live plus what the next epoch fills again. It walks the arenas' free lists under their
/// locks: a few milliseconds per epoch.
pub(crate) fn release() {
    if TUNED.get() == Some(&true) {
        trim();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes an integer (the padding to keep) and works under the
    // allocator's own locks; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

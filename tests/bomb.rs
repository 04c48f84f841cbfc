//! A decompression-bomb header is refused before anything large is allocated.
//! (Its own test binary: it installs a counting allocator.)

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use stoker::decode::{cpu, DecodeError, DecodeOptions, Image8, LabelPlane};

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; it only records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn bomb_headers_are_refused_without_allocating() {
    let jpeg = std::fs::read(common::data_dir().join("jpeg/jd_crash_max_size.jpg")).expect("bomb");
    // A PNG header claiming 60000 x 60000 pixels, followed by nothing.
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
    png.extend_from_slice(b"IHDR");
    png.extend_from_slice(&60000u32.to_be_bytes());
    png.extend_from_slice(&60000u32.to_be_bytes());
    png.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    LARGEST.store(0, Ordering::Relaxed);
    let opts = DecodeOptions::default();
    let mut img = Image8::default();
    let r = cpu::decode_image(&jpeg, &opts, &mut img);
    assert!(
        matches!(
            r,
            Err(DecodeError::TooManyPixels {
                width: 65535,
                height: 65535,
                ..
            })
        ),
        "{r:?}"
    );
    let r = cpu::decode_image(&png, &opts, &mut img);
    assert!(matches!(r, Err(DecodeError::TooManyPixels { .. })), "{r:?}");
    let mut plane = LabelPlane::default();
    assert!(cpu::decode_mask(&png, &opts, &mut plane).is_err());
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest < 1 << 20,
        "allocated {largest} bytes for a refused header"
    );
    assert!(img.data.capacity() == 0 && plane.data.capacity() == 0);
}

//! No allocation per sample in the steady state: staging buffers, decode buffers, scratch
//! and batch buffers are reused. (Its own test binary: it installs a counting allocator.)
//!
//! Two pipelines over 48 and 96 JPEGs, one batch per epoch, are warmed up for four epochs;
//! the allocations of a fifth epoch are counted. What an epoch allocates for itself
//! (threads, channels, the batch handle) is the same for both; a per-sample allocation
//! would add at least 48 to the larger one.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use stoker::{Augment, DType, Dataset, Pipeline};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn epoch_allocations(n: usize) -> usize {
    let dir = tempfile::tempdir().expect("tempdir");
    let sources: Vec<std::path::PathBuf> = [
        "photo/skimage_coffee.jpg",
        "photo/sklearn_china.jpg",
        "science/skimage_camera.jpg",
    ]
    .iter()
    .map(|p| common::data_dir().join("samples").join(p))
    .collect();
    for i in 0..n {
        let bytes = std::fs::read(&sources[i % sources.len()]).expect("sample");
        common::write(dir.path(), &format!("c/{i:03}.jpg"), &bytes);
    }
    // The CPU backend's steady state (the device path allocates its inputs per sample).
    let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .backend(stoker::BackendKind::Cpu)
        .augment(
            Augment::new()
                .random_resized_crop(64, (0.08, 1.0), (0.75, 1.33))
                .flip_horizontal(0.5)
                .normalize([0.5; 3], [0.25; 3])
                .dtype(DType::F32),
        )
        .batch_size(n)
        .workers(2)
        .readers(2)
        .build()
        .expect("pipeline");
    let run = |e: u64| {
        for b in pipe.epoch(e).expect("epoch") {
            assert_eq!(b.expect("batch").len(), n);
        }
    };
    // Warm-up: reused buffers grow until each has met the largest file it will hold.
    for e in 0..4 {
        run(e);
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    run(4);
    ALLOCS.load(Ordering::Relaxed) - before
}

#[test]
fn steady_state_epochs_allocate_nothing_per_sample() {
    let small = epoch_allocations(48);
    let large = epoch_allocations(96);
    println!("allocations in a warm epoch: {small} for 48 samples, {large} for 96");
    // Measured (this test prints both counts): 0 to 4 apart, also with both cores loaded (a reused buffer may still
    // grow once when scheduling hands it a larger file than before). One allocation per
    // sample would add at least 48.
    assert!(
        large < small + 24,
        "{} more allocations for 48 more samples",
        large.saturating_sub(small)
    );
}

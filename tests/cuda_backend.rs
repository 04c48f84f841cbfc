//! The CUDA backend on a GPU: every case of `common/executor/` (orientation, Huffman
//! decoding, the self-synchronising Huffman decode's passes, decode, augment, against the
//! CPU oracles; see `common/executor/cuda_device.rs`), the caller's
//! own context and stream, `Auto` choosing CUDA, and device memory that does not grow
//! over a thousand batches. Pipeline parity (augment within ±1, masks exact, every sample
//! once) runs for CUDA in `device_pipeline.rs`, `pipeline.rs` and `shutdown.rs` through
//! `common::backends()`.
//!
//! Skipped where there is no CUDA device; `STOKER_REQUIRE_CUDA=1` (set on GPU machines)
//! makes that a failure.
#![cfg(feature = "cuda")]

mod common;
#[path = "common/executor/mod.rs"]
mod executor;

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use stoker::backend::cuda::cudarc::driver::CudaContext;
use stoker::{Augment, BackendKind, CudaBatch, DType, Dataset, Pipeline};

/// The device, as the tests here share it. The harness runs them in parallel, and a test
/// that measures free device memory must not see another's allocations: it takes this
/// lock with [`exclusive`], and every other test here that touches the device takes it
/// with [`shared`] first (a new one too), so they still run side by side.
static DEVICE: RwLock<()> = RwLock::new(());

/// The device shared with the other tests that do not measure its memory.
fn shared() -> RwLockReadGuard<'static, ()> {
    // A test that failed holding the lock left nothing to repair.
    DEVICE.read().unwrap_or_else(PoisonError::into_inner)
}

/// The device alone, for a test that measures its free memory.
fn exclusive() -> RwLockWriteGuard<'static, ()> {
    DEVICE.write().unwrap_or_else(PoisonError::into_inner)
}

/// `value`; called as `holding(&shared(), ..)` in an `if let` scrutinee, where the guard
/// (a temporary) lives until the end of the `if let`, around the case it runs.
fn holding<T>(_guard: &RwLockReadGuard<'static, ()>, value: T) -> T {
    value
}

executor::executor_tests!(holding(&shared(), executor::cuda_device::get()));

fn photos() -> stoker::Subset {
    Dataset::image_folder(common::data_dir().join("samples"))
        .expect("samples")
        .all()
}

#[test]
fn batches_arrive_on_the_callers_stream() {
    let _device = shared();
    if common::cuda_device().is_none() {
        return;
    }
    let ctx = CudaContext::new(0).expect("context");
    let stream = ctx.new_stream().expect("stream");
    let aug = Augment::new()
        .random_resized_crop(32, (0.2, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .dtype(DType::U8);
    let pipe = Pipeline::builder(photos())
        .cuda_stream(ctx.clone(), stream.clone())
        .augment(aug.clone())
        .batch_size(4)
        .seed(5)
        .build()
        .expect("pipeline");
    assert_eq!(pipe.backend().kind(), BackendKind::Cuda);
    let cpu = Pipeline::builder(photos())
        .backend(BackendKind::Cpu)
        .augment(aug)
        .batch_size(4)
        .seed(5)
        .build()
        .expect("cpu pipeline");
    let mut host = cpu.epoch(0).expect("epoch");
    for b in pipe.epoch(0).expect("epoch") {
        let b = b.expect("batch");
        let c = host.next().expect("same batch count").expect("cpu batch");
        assert_eq!(b.ids(), c.ids());
        let images = b.cuda_images().expect("a CUDA batch");
        assert!(b.cuda_event().is_some());
        #[cfg(feature = "wgpu")]
        assert!(stoker::WgpuBatch::wgpu_images(&b).is_none());
        // The caller's stream already waits for the batch: a copy on it sees the pixels.
        let n = b.images_len_bytes();
        let got = stream
            .clone_dtoh(&images.slice(..n))
            .expect("copy on the caller's stream");
        let want = c.raw_images().expect("host batch");
        let worst = got
            .iter()
            .zip(want)
            .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
            .max()
            .unwrap_or(0);
        assert!(
            worst <= 3,
            "batch {}: {worst} levels from the CPU",
            b.index()
        );
    }
}

#[test]
fn auto_prefers_cuda() {
    let _device = shared();
    if common::cuda_device().is_none() {
        return;
    }
    let pipe = Pipeline::builder(photos())
        .augment(Augment::new().resize(16, 16))
        .build()
        .expect("pipeline");
    let (backend, reason) = (pipe.backend(), pipe.backend_reason());
    assert_eq!(backend.kind(), BackendKind::Cuda, "{reason}");
}

#[test]
fn device_memory_does_not_grow_over_a_thousand_batches() {
    let _device = exclusive();
    let Some(device) = common::cuda_device() else {
        return;
    };
    let aug = Augment::new()
        .random_resized_crop(64, (0.08, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .color_jitter(0.4, 0.4, 0.4)
        .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
        .dtype(DType::F16);
    let pipe = Pipeline::builder(photos())
        .backend(BackendKind::Cuda)
        .augment(aug)
        .batch_size(2)
        .drop_last(true)
        .seed(9)
        .build()
        .expect("pipeline");
    let mut batches = 0;
    let mut epoch = 0;
    let mut baseline = None;
    while batches < 1000 {
        for b in pipe.epoch(epoch).expect("epoch") {
            b.expect("batch");
            batches += 1;
        }
        epoch += 1;
        if epoch == 20 {
            // Grow-only buffers are near their largest by now (random crops vary the
            // batches, so one may still grow a little later).
            pipe.wait_device().expect("sync");
            baseline = Some((
                device.memory().expect("mem info").0,
                pipe.memory_in_flight(),
            ));
        }
    }
    pipe.wait_device().expect("sync");
    let (free0, flight0) = baseline.expect("baseline");
    let (free1, _) = device.memory().expect("mem info");
    let flight1 = pipe.memory_in_flight();
    println!("{batches} batches: free {free0} -> {free1} bytes; in flight {flight0} -> {flight1}");
    // A leak grows with the batches (880 more after the baseline); growth of a buffer to
    // a larger crop is bounded by the images (6 photos of at most 2 Mpx).
    assert!(
        flight1 <= 2 * flight0,
        "memory in flight grew from {flight0} to {flight1}"
    );
    assert!(
        free1 + (32 << 20) >= free0,
        "device memory shrank by {} bytes",
        free0 - free1
    );
}

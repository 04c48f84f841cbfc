//! Device memory stays bounded over many batches of mixed sizes (wgpu): the pipeline runs
//! 25 epochs (200 batches) of random crops over 32 JPEGs from 32x24 to 2048x1536 (4:2:0, 4:2:2 and
//! 4:4:4) on a device the test owns, and the device's own allocator (wgpu's allocator
//! report: every live allocation of the device, whoever made it) is read after every
//! batch. After the first epoch (warm-up: the grow-only buffers reach the sizes the
//! batches need), live device memory stays under a bound derived from the configuration,
//! and from the second epoch to the last the memory the batcher does not account for
//! (live bytes less [`stoker::Pipeline::memory_in_flight`]) does not grow: a per-batch
//! allocation never dropped, or a pool that never frees, grows with the batches. Nor is a
//! buffer made per batch ([`stoker::backend::wgpu::buffers_created`]).
//!
//! Runs on lavapipe in CI (`STOKER_REQUIRE_WGPU=1` makes a missing adapter a failure).

#![cfg(feature = "wgpu")]

mod common;

use std::path::Path;

use stoker::{Augment, BackendKind, DType, Dataset, Pipeline};

/// The images: (width, height, chroma subsampling), widely mixed, a few large.
const SIZES: &[(usize, usize, turbojpeg::Subsamp)] = {
    use turbojpeg::Subsamp::{None as S444, Sub2x1 as S422, Sub2x2 as S420};
    &[
        (32, 24, S420),
        (48, 320, S444),
        (64, 64, S422),
        (120, 90, S420),
        (200, 150, S444),
        (257, 129, S420),
        (320, 240, S422),
        (500, 375, S420),
        (640, 480, S444),
        (800, 600, S420),
        (1280, 200, S422),
        (200, 1280, S420),
        (1024, 768, S444),
        (1920, 1080, S420),
        (2048, 1536, S444),
        (96, 72, S420),
    ]
};

const BATCH: usize = 4;
const PREFETCH: usize = 2;
const OUT: usize = 48;
const EPOCHS: u64 = 25;
/// Each size is written this many times (different pixels, so different files).
const COPIES: usize = 2;

/// Device bytes per pixel of the largest image that one sample of a batch may hold in
/// the grow-only buffers of the device path: its coefficients uploaded (2 bytes per
/// coefficient, 3 full components at 4:4:4: 6), the decoded planes (4-byte words per
/// component sample: 12), the decoded window, the oriented window and the horizontal
/// pass (4 each): 30, rounded up.
const DEVICE_PER_PIXEL: u64 = 32;
/// Staging bytes per pixel of the largest image, per staging buffer: the upload (6) and
/// the augment parameters, rounded up.
const STAGING_PER_PIXEL: u64 = 8;
/// Grow-only buffers grow to half again what is asked.
const GROWTH: f64 = 1.5;
/// What the device holds whatever the batches (pipelines, parameter buffers, wgpu's own).
const FIXED: u64 = 16 << 20;

/// Writes the JPEGs of [`SIZES`] into `dir` (one class folder), smooth gradients with
/// noise so the coefficients are not all zero.
fn write_jpegs(dir: &Path) {
    let mut rng = common::TestRng(5);
    let sizes = SIZES.iter().cycle().take(SIZES.len() * COPIES);
    for (i, &(w, h, sub)) in sizes.enumerate() {
        let mut rgb = common::random_rgb(&mut rng, w as u32, h as u32);
        for (k, p) in rgb.chunks_exact_mut(3).enumerate() {
            let (x, y) = (k % w, k / w);
            p[0] = (p[0] / 8).wrapping_add((x * 255 / w) as u8);
            p[1] = (p[1] / 8).wrapping_add((y * 255 / h) as u8);
            p[2] = (p[2] / 8).wrapping_add(((x + y) * 127 / (w + h)) as u8);
        }
        let image = turbojpeg::Image {
            pixels: &rgb[..],
            width: w,
            pitch: w * 3,
            height: h,
            format: turbojpeg::PixelFormat::RGB,
        };
        let jpeg = turbojpeg::compress(image, 90, sub).expect("compress");
        common::write(dir, &format!("c/{i:02}_{w}x{h}.jpg"), &jpeg);
    }
}

/// The device's live allocations, in bytes, once the work submitted so far has finished
/// and what it released has been freed.
fn live(device: &wgpu::Device) -> u64 {
    let _ = device.poll(wgpu::PollType::Wait {
        submission_index: None,
        timeout: None,
    });
    device
        .generate_allocator_report()
        .expect("the device's allocator report (Vulkan, DX12)")
        .total_allocated_bytes
}

/// The tests that use the device take turns: one measures live device memory, the other
/// counts what is created.
static DEVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn device_memory_stays_bounded_over_epochs_of_mixed_sizes() {
    let _turn = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let (device, queue) = (ctx.device().clone(), ctx.queue().clone());
    if device.generate_allocator_report().is_none() {
        // (A backend without an allocator report: GL. lavapipe is Vulkan.)
        assert!(
            std::env::var_os("STOKER_REQUIRE_WGPU").is_none(),
            "no allocator report on this adapter"
        );
        eprintln!("skipped: the adapter gives no allocator report");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    write_jpegs(dir.path());
    let subset = Dataset::image_folder(dir.path()).expect("folder").all();
    let aug = Augment::new()
        .random_resized_crop(OUT as u32, (0.08, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .color_jitter(0.2, 0.2, 0.2)
        .dtype(DType::F16);
    let before = live(&device);
    let pipe = Pipeline::builder(subset)
        .backend(BackendKind::Wgpu)
        .wgpu_device(device.clone(), queue)
        .augment(aug)
        .batch_size(BATCH)
        .prefetch(PREFETCH)
        .workers(2)
        .readers(2)
        .seed(3)
        .build()
        .expect("pipeline");
    assert_eq!(pipe.backend().kind(), BackendKind::Wgpu);

    // The bound: every sample of a batch the largest image, in the device buffers and in
    // each staging buffer (the ring holds at least 2), grown by half; the output ring
    // (prefetch batches, and one more lent while one waits ready); what is fixed.
    let largest = SIZES
        .iter()
        .map(|&(w, h, _)| (w * h) as u64)
        .max()
        .unwrap_or(0);
    let staging = PREFETCH.max(2) as u64;
    let per_batch = BATCH as u64 * largest * (DEVICE_PER_PIXEL + staging * STAGING_PER_PIXEL);
    let out = (PREFETCH as u64 + 1) * BATCH as u64 * (OUT * OUT * 3 * 2) as u64;
    let bound = (per_batch as f64 * GROWTH) as u64 + out + FIXED;

    // Per epoch: the largest live figure seen after a batch, and the settled figures at
    // its end (live, the batcher's own account, and what it does not account for).
    let mut epochs = Vec::new();
    // Buffers stoker has created on the device by the end of each epoch.
    let mut created = Vec::new();
    // And bind groups (for the record: batches of mixed sizes bind mixed ranges).
    let mut groups = Vec::new();
    let mut batches = 0;
    for e in 0..EPOCHS {
        let mut peak = 0;
        let mut n = 0;
        for b in pipe.epoch(e).expect("epoch") {
            let b = b.expect("batch");
            assert!(b.errors().is_empty(), "{:?}", b.errors());
            assert!(b.on_device());
            drop(b);
            peak = peak.max(live(&device));
            n += 1;
        }
        assert_eq!(
            n,
            (SIZES.len() * COPIES).div_ceil(BATCH),
            "epoch {e}: every batch"
        );
        batches += n;
        pipe.wait_device().expect("wait");
        let settled = live(&device) - before.min(live(&device));
        let tracked = pipe.memory_in_flight() as u64;
        eprintln!(
            "epoch {e}: peak {peak} B live, settled {settled} B, batcher and ring {tracked} B, \
             other {} B (bound {bound} B)",
            settled as i64 - tracked as i64
        );
        epochs.push((peak, settled, tracked));
        created.push(stoker::backend::wgpu::buffers_created());
        groups.push(stoker::backend::wgpu::bind_groups_created());
    }
    eprintln!(
        "{batches} batches of {BATCH}; before the pipeline {before} B live; largest image {largest} px"
    );
    for (e, &(peak, _, _)) in epochs.iter().enumerate().skip(1) {
        assert!(
            peak <= bound + before,
            "epoch {e}: {peak} B live on the device, more than the bound of {bound} B (and {before} B before)"
        );
    }
    // No buffer per batch (launch parameters, staging, outputs): once the grow-only
    // buffers have reached what the batches need, the later epochs make (almost) none.
    let half = created.len() / 2;
    let late = created[created.len() - 1] - created[half];
    let late_batches = (created.len() - 1 - half) * (SIZES.len() * COPIES).div_ceil(BATCH);
    eprintln!("buffers created by the end of each epoch: {created:?}");
    eprintln!("bind groups created by the end of each epoch: {groups:?}");
    assert!(
        late * 4 <= late_batches as u64,
        "{late} buffers created over the last {late_batches} batches"
    );
    let other = |(_, settled, tracked): (u64, u64, u64)| settled as i64 - tracked as i64;
    let (second, last) = (epochs[1], epochs[epochs.len() - 1]);
    // (Less than a page of slack: the allocator rounds each allocation, so a grow-only
    // buffer that grows changes the rounding by a few bytes; a leak of one buffer per batch
    // over these 190 batches would be tens of kilobytes.)
    assert!(
        other(last) <= other(second) + 4096,
        "memory the batcher does not account for grew from epoch 1 ({} B) to epoch {} ({} B)",
        other(second),
        epochs.len() - 1,
        other(last)
    );
    assert!(
        last.1 <= bound,
        "{} B live after the last epoch, more than the bound of {bound} B",
        last.1
    );
    drop(pipe);
    let after = live(&device);
    eprintln!("after the pipeline is dropped: {after} B live");
    assert!(
        after <= before,
        "{after} B live after the pipeline was dropped, {before} B before it was built"
    );
}

/// Every buffer the wgpu backend makes goes through `WgpuContext::create_buffer`, which
/// counts it (so the count above sees a per-batch buffer): no other call creates one.
#[test]
fn the_wgpu_backend_creates_buffers_in_one_place() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/wgpu");
    let mut direct = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/backend/wgpu") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("source");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if [
                "create_buffer_init",
                "device.create_buffer(",
                "device().create_buffer(",
            ]
            .iter()
            .any(|p| code.contains(p))
            {
                direct.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    // The one in `WgpuContext::create_buffer` itself.
    assert_eq!(direct.len(), 1, "{direct:#?}");
    assert!(direct[0].contains("mod.rs"), "{direct:#?}");
}

/// A batch that binds what one of the batches just before it bound (the same kernels,
/// buffers and ranges) makes no bind group: over epochs of identical batches (one file
/// again and again, resized whole), the batches after the first epoch make none.
#[test]
fn identical_batches_reuse_their_bind_groups() {
    let _turn = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes =
        std::fs::read(common::data_dir().join("samples/photo/skimage_coffee.jpg")).expect("sample");
    for i in 0..16 {
        common::write(dir.path(), &format!("c/{i:02}.jpg"), &bytes);
    }
    let subset = Dataset::image_folder(dir.path()).expect("folder").all();
    let pipe = Pipeline::builder(subset)
        .backend(BackendKind::Wgpu)
        .wgpu_device(ctx.device().clone(), ctx.queue().clone())
        .augment(Augment::new().resize(48, 40))
        .batch_size(4)
        .workers(2)
        .build()
        .expect("pipeline");
    let mut made = Vec::new();
    for epoch in 0..3 {
        let before = stoker::backend::wgpu::bind_groups_created();
        for b in pipe.epoch(epoch).expect("epoch") {
            let b = b.expect("batch");
            assert_eq!(b.len(), 4);
        }
        made.push(stoker::backend::wgpu::bind_groups_created() - before);
    }
    eprintln!("bind groups made per epoch of 4 batches: {made:?}");
    assert!(made[0] > 0, "{made:?}");
    assert_eq!(made[1..], [0, 0], "bind groups made after the first epoch");
}

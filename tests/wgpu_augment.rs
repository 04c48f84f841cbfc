//! The wgpu augmentation pass against the CPU reference, on fresh random inputs: random
//! images and decoded windows (scales 1, 2 and 4), random plans from `Augment` builders
//! (every dtype and layout, flips, the four jitter ops in random orders, normalisation,
//! antialias on and off, upscales and downscales, odd output sizes whose slots are not
//! word aligned), several samples per batch.
//!
//! Tolerances: u8 within 1 level of `reference::execute_image` on every element; f16 and
//! f32 within one 0-255 level after normalisation (`1 / 255 / std`) plus the f16 rounding
//! step. Label planes equal `reference::execute_mask` exactly and hold only input classes.
//! The worst differences are printed (`--nocapture`).
#![cfg(feature = "wgpu")]

mod common;

use common::cases::{check_batch, random_augment, random_sample, Sample, Worst, MEAN, STD};
use common::TestRng;
use stoker::backend::wgpu::augment::{AugmentInput, AugmentKernels, AugmentScratch, DeviceImage};
use stoker::backend::wgpu::WgpuContext;
use stoker::decode::LabelPlane;
use stoker::{Augment, DType, Layout};
use wgpu::util::DeviceExt;

struct DeviceOut {
    images: Vec<u8>,
    masks: Option<Vec<u8>>,
}

/// Runs a batch through the wgpu pass: windows packed as RGBA words at scattered
/// offsets, outputs pre-filled with garbage so unwritten bytes show.
fn run_gpu(
    ctx: &WgpuContext,
    kernels: &AugmentKernels,
    samples: &[Sample],
    masks: bool,
    rng: &mut TestRng,
) -> DeviceOut {
    let mut words: Vec<u32> = Vec::new();
    let mut input = AugmentInput::new();
    for s in samples {
        words.extend((0..rng.below(70)).map(|_| 0xDEAD_BEEF));
        let offset = words.len() as u32;
        words.extend(
            s.image
                .data
                .chunks_exact(3)
                .map(|p| u32::from_le_bytes([p[0], p[1], p[2], 255])),
        );
        let image = DeviceImage {
            offset,
            width: s.image.width,
            height: s.image.height,
            origin_x: s.image.origin.0,
            origin_y: s.image.origin.1,
            full_width: s.image.full.0,
            full_height: s.image.full.1,
            scale: s.image.scale,
        };
        input
            .push(&s.plan, image, s.mask.as_ref().filter(|_| masks))
            .expect("push");
    }
    words.push(0);
    let device = ctx.device();
    let storage = |contents: &[u8], extra: wgpu::BufferUsages| {
        device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents,
            usage: wgpu::BufferUsages::STORAGE | extra,
        })
    };
    let blob = storage(input.bytes(), wgpu::BufferUsages::empty());
    let windows = storage(bytemuck::cast_slice(&words), wgpu::BufferUsages::empty());
    let garbage = |n: u64| vec![0xA5u8; n as usize];
    let images_out = storage(&garbage(input.images_bytes()), wgpu::BufferUsages::COPY_SRC);
    let masks_out =
        masks.then(|| storage(&garbage(input.masks_bytes()), wgpu::BufferUsages::COPY_SRC));
    let mut scratch = AugmentScratch::default();
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    kernels
        .encode(
            ctx,
            &mut encoder,
            &input,
            &blob,
            &windows,
            &images_out,
            masks_out.as_ref(),
            &mut scratch,
        )
        .expect("encode");
    ctx.queue().submit([encoder.finish()]);
    let images = ctx
        .read_buffer(&images_out, 0, input.images_bytes())
        .expect("read images");
    let masks = masks_out.map(|m| {
        ctx.read_buffer(&m, 0, input.masks_bytes())
            .expect("read masks")
    });
    DeviceOut { images, masks }
}

fn kernels(ctx: &WgpuContext) -> AugmentKernels {
    AugmentKernels::new(ctx).expect("augment pipelines")
}

#[test]
fn images_match_the_reference_for_every_dtype_and_layout() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let kernels = kernels(&ctx);
    let mut rng = TestRng(0x5EED_0A06);
    let mut id = 0;
    for dtype in [DType::U8, DType::F16, DType::F32] {
        let mut worst = Worst::default();
        for layout in [Layout::Nchw, Layout::Nhwc] {
            for batch in 0..4 {
                let aug = random_augment(&mut rng, dtype, layout);
                let n = 1 + rng.below(7) as usize;
                let samples: Vec<Sample> = (0..n)
                    .map(|_| {
                        id += 1;
                        random_sample(&mut rng, &aug, id, false)
                    })
                    .collect();
                let out = run_gpu(&ctx, &kernels, &samples, false, &mut rng);
                check_batch(
                    &samples,
                    &out.images,
                    out.masks.as_deref(),
                    &mut worst,
                    &format!("{dtype:?} {layout:?} batch {batch}"),
                );
            }
        }
        eprintln!(
            "{dtype:?}: worst difference {:.3} levels; {} of {} elements differ",
            worst.levels, worst.off, worst.elements
        );
    }
}

#[test]
fn every_jitter_order_matches_the_reference() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let kernels = kernels(&ctx);
    let mut rng = TestRng(77);
    let mut worst = Worst::default();
    // Strong jitter on larger outputs: many orders, contrast anywhere in the order.
    let aug = Augment::new()
        .random_resized_crop(40, (0.2, 1.0), (0.75, 4.0 / 3.0))
        .output_size(41, 23)
        .color_jitter(0.8, 0.9, 0.9)
        .hue(0.5)
        .flip_horizontal(0.5)
        .crop_aware(false);
    let samples: Vec<Sample> = (0..24)
        .map(|id| random_sample(&mut rng, &aug, 1000 + id, false))
        .collect();
    let orders: std::collections::BTreeSet<u32> =
        samples.iter().map(|s| s.plan.jitter_order).collect();
    assert!(orders.len() >= 8, "only {} orders", orders.len());
    let out = run_gpu(&ctx, &kernels, &samples, false, &mut rng);
    check_batch(
        &samples,
        &out.images,
        out.masks.as_deref(),
        &mut worst,
        "jitter",
    );
    eprintln!(
        "jitter u8: worst difference {:.0} levels; {} of {} elements differ",
        worst.levels, worst.off, worst.elements
    );
}

#[test]
fn large_outputs_match_the_reference() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let kernels = kernels(&ctx);
    let mut rng = TestRng(31337);
    let mut worst = Worst::default();
    // 240 000 pixels: the contrast sum passes 2^24, so the mean takes the wide path.
    let aug = Augment::new()
        .resize(600, 400)
        .color_jitter(0.3, 0.5, 0.3)
        .hue(0.2)
        .dtype(DType::F16)
        .layout(Layout::Nhwc)
        .normalize(MEAN, STD);
    let samples: Vec<Sample> = (0..3)
        .map(|id| random_sample(&mut rng, &aug, 3000 + id, false))
        .collect();
    let out = run_gpu(&ctx, &kernels, &samples, false, &mut rng);
    check_batch(
        &samples,
        &out.images,
        out.masks.as_deref(),
        &mut worst,
        "large",
    );
    eprintln!(
        "large f16: worst difference {:.3} levels; {} of {} elements differ",
        worst.levels, worst.off, worst.elements
    );
}

#[test]
fn masks_match_the_reference_exactly() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let kernels = kernels(&ctx);
    let mut rng = TestRng(99);
    let mut worst = Worst::default();
    for (i, dtype) in [DType::U8, DType::F16, DType::F32].into_iter().enumerate() {
        let aug = random_augment(&mut rng, dtype, Layout::Nchw);
        let mut samples: Vec<Sample> = (0..5)
            .map(|id| random_sample(&mut rng, &aug, 500 + 10 * i as u64 + id, true))
            .collect();
        // A sample without a mask in a batch with masks gets zeros.
        samples[2].mask = None;
        let out = run_gpu(&ctx, &kernels, &samples, true, &mut rng);
        check_batch(
            &samples,
            &out.images,
            out.masks.as_deref(),
            &mut worst,
            &format!("masks {dtype:?}"),
        );
    }
}

#[test]
fn small_bindings_split_the_batch_and_give_the_same_result() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let mut rng = TestRng(4242);
    let split = kernels(&ctx).with_max_binding(8192);
    let whole = kernels(&ctx);
    for (dtype, layout) in [(DType::F32, Layout::Nhwc), (DType::U8, Layout::Nchw)] {
        let aug = Augment::new()
            .random_resized_crop(9, (0.3, 1.0), (0.75, 4.0 / 3.0))
            .output_size(9, 7)
            .color_jitter(0.4, 0.4, 0.4)
            .flip_horizontal(0.5)
            .dtype(dtype)
            .layout(layout)
            .crop_aware(false);
        let samples: Vec<Sample> = (0..30)
            .map(|id| {
                let mut s = random_sample(&mut rng, &aug, 2000 + id, true);
                // Keep every sample within the 8 KiB bindings.
                while s.image.data.len() > 1200 * 3
                    || s.mask.as_ref().is_some_and(|m| m.data.len() > 2000)
                {
                    s = random_sample(&mut rng, &aug, 2000 + id, true);
                }
                s
            })
            .collect();
        let a = run_gpu(&ctx, &split, &samples, true, &mut rng);
        let b = run_gpu(&ctx, &whole, &samples, true, &mut rng);
        assert_eq!(a.images, b.images, "{dtype:?}: split and whole differ");
        assert_eq!(a.masks, b.masks);
        check_batch(
            &samples,
            &a.images,
            a.masks.as_deref(),
            &mut Worst::default(),
            "split",
        );
    }
}

#[test]
fn inconsistent_batches_and_small_buffers_are_errors() {
    let aug = Augment::new().resize(8, 8);
    let plan = aug.plan(1, 0, 1, 20, 20);
    let other = Augment::new().resize(8, 9).plan(1, 0, 2, 20, 20);
    let image = DeviceImage {
        width: 20,
        height: 20,
        full_width: 20,
        full_height: 20,
        scale: 1,
        ..DeviceImage::default()
    };
    let mut input = AugmentInput::new();
    input.push(&plan, image, None).expect("first");
    assert!(matches!(
        input.push(&other, image, None),
        Err(stoker::Error::Config { .. })
    ));
    let bad = LabelPlane {
        width: 3,
        height: 3,
        data: vec![0; 8],
    };
    assert!(input.push(&plan, image, Some(&bad)).is_err());
    assert_eq!(input.len(), 1);
    input.clear();
    assert!(input.is_empty());
    input.push(&plan, image, None).expect("after clear");

    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let kernels = kernels(&ctx);
    let device = ctx.device();
    let buffer = |size: u64| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    };
    let blob = buffer(input.bytes().len() as u64);
    let windows = buffer(20 * 20 * 4);
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    let mut scratch = AugmentScratch::default();
    let small = buffer(64);
    let r = kernels.encode(
        &ctx,
        &mut encoder,
        &input,
        &blob,
        &windows,
        &small,
        None,
        &mut scratch,
    );
    assert!(matches!(r, Err(stoker::Error::Device(_))), "{r:?}");
    let short_windows = buffer(64);
    let out = buffer(input.images_bytes());
    let r = kernels.encode(
        &ctx,
        &mut encoder,
        &input,
        &blob,
        &short_windows,
        &out,
        None,
        &mut scratch,
    );
    assert!(matches!(r, Err(stoker::Error::Device(_))), "{r:?}");
}

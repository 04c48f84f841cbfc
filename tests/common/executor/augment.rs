//! Augment (`horizontal`, `vertical_jitter`, `write_image`, `write_mask`) against the CPU
//! reference, on fresh random inputs ([`super::random`]): random images and decoded
//! windows (scales 1, 2 and 4), random plans from `Augment` builders (every dtype and
//! layout, flips, the four jitter ops in random orders, normalisation, antialias on and
//! off, upscales and downscales, odd output sizes whose slots are not word aligned),
//! several samples per batch; bindings small enough to split the batch; f16 rounding ties
//! and overflow bit for bit; a whole batch (decode, then augment) planned by
//! [`BatchPlan`]; buffers too short for the plan refused.
//!
//! Tolerances: u8 within 1 level of `reference::execute_image` on every element; f16 and
//! f32 within one 0-255 level after normalisation (`1 / 255 / std`) plus the f16 rounding
//! step; where the executor's arithmetic is the reference's
//! ([`Executor::exact_arithmetic`]), at most 0.1 % of elements off at all. Label planes
//! equal `reference::execute_mask` exactly and hold only input classes. The worst
//! differences are printed (`--nocapture`).

use stoker::augment::reference::{execute_image, needed_window, Scratch};
use stoker::augment::SamplePlan;
use stoker::backend::device::{
    prepare, AugmentInput, BatchPlan, Buffer, DeviceImage, DeviceJob, DeviceSample, Step,
};
use stoker::decode::jpeg::coeffs::{pack, PackedJpeg};
use stoker::decode::jpeg::color::decode_window;
use stoker::decode::{cpu, peek_info, DecodeOptions, Image8};
use stoker::{Augment, DType, Layout};

use super::random::{
    check_batch, random_augment, random_mask, random_sample, Sample, Worst, MEAN, STD,
};
use super::{garbage, words_to_bytes, Buffers, Executor};
use crate::common::{data_dir, TestRng};

/// Bindings as large as the executor allows.
const WHOLE: u64 = u64::MAX;

/// A batch's outputs, and how many launches made them.
pub struct AugmentOut {
    pub images: Vec<u8>,
    pub masks: Option<Vec<u8>>,
    pub launches: usize,
}

/// The augment input of `samples` (label planes when `masks`), their windows packed as
/// RGBA words at scattered offsets.
fn pack_windows(samples: &[Sample], masks: bool, rng: &mut TestRng) -> (AugmentInput, Vec<u8>) {
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
    (input, words_to_bytes(&words))
}

/// Runs a batch through the augment launches, no binding over `max_binding` bytes:
/// windows packed as RGBA words at scattered offsets, outputs and scratch pre-filled with
/// garbage so unwritten bytes show.
pub fn run_augment(
    e: &dyn Executor,
    samples: &[Sample],
    masks: bool,
    max_binding: u64,
    rng: &mut TestRng,
) -> AugmentOut {
    let (input, windows) = pack_windows(samples, masks, rng);
    let limits = e.limits();
    let (launches, scratch) = input
        .launches(
            windows.len() as u64,
            masks,
            max_binding.min(limits.max_binding),
            limits.per_dim,
        )
        .expect("augment plan");
    let steps: Vec<Step> = launches.into_iter().map(Step::Launch).collect();
    let mut buffers = Buffers::default()
        .with(Buffer::AugmentInput, input.bytes().to_vec())
        .with(Buffer::Windows, windows)
        .with(Buffer::Horizontal, garbage(scratch.horizontal.max(4)))
        .with(Buffer::Resized, garbage(scratch.resized.max(4)))
        .with(Buffer::Images, garbage(input.images_bytes()));
    if masks {
        buffers = buffers.with(Buffer::Masks, garbage(input.masks_bytes()));
    }
    e.run(&steps, &mut buffers);
    AugmentOut {
        images: buffers.get(Buffer::Images).to_vec(),
        masks: masks.then(|| buffers.get(Buffer::Masks).to_vec()),
        launches: steps.len(),
    }
}

/// [`run_augment`] with whole bindings, checked against the reference.
fn run_and_check(
    e: &dyn Executor,
    samples: &[Sample],
    masks: bool,
    rng: &mut TestRng,
    worst: &mut Worst,
    what: &str,
) {
    let out = run_augment(e, samples, masks, WHOLE, rng);
    check_batch(samples, &out.images, out.masks.as_deref(), worst, what);
}

/// A random resized crop (`area` of the source's, the usual aspect ratios) to `size`,
/// colour jitter (brightness, contrast, saturation, hue) and horizontal flips half the
/// time; crop-aware decoding off (the cases make the windows themselves).
fn crop_and_jitter(area: (f64, f64), size: (u32, u32), jitter: [f64; 4]) -> Augment {
    Augment::new()
        .random_resized_crop(size.0, area, (0.75, 4.0 / 3.0))
        .output_size(size.0, size.1)
        .color_jitter(jitter[0], jitter[1], jitter[2])
        .hue(jitter[3])
        .flip_horizontal(0.5)
        .crop_aware(false)
}

/// Prints the worst difference; where the executor does the reference's f32 operations in
/// its order, checks that differing elements stay rare: a difference is then a rounding
/// accident (the f32 wide contrast sum), never a pattern a one-level tolerance would hide.
fn report(e: &dyn Executor, worst: &Worst, what: &str) {
    eprintln!(
        "{what}: worst difference {:.3} levels; {} of {} elements differ, {} past the \
         tolerance (steps: posterize, solarize, equalize, auto-contrast, sharpness)",
        worst.levels, worst.off, worst.elements, worst.jumps
    );
    worst.check_jumps(what);
    if e.exact_arithmetic() {
        assert!(
            worst.off * 1000 <= worst.elements,
            "{what}: {} of {} elements differ from the reference",
            worst.off,
            worst.elements
        );
    }
}

/// Runs `case(dtype, layout, worst)` for every output dtype and layout, then reports each
/// dtype's worst difference (as `what` followed by the dtype).
fn for_dtypes_and_layouts(
    e: &dyn Executor,
    what: &str,
    mut case: impl FnMut(DType, Layout, &mut Worst),
) {
    for dtype in [DType::U8, DType::F16, DType::F32] {
        let mut worst = Worst::default();
        for layout in [Layout::Nchw, Layout::Nhwc] {
            case(dtype, layout, &mut worst);
        }
        report(e, &worst, &format!("{what}{dtype:?}"));
    }
}

pub fn augment_matches_the_reference_for_every_dtype_and_layout(e: &dyn Executor) {
    let mut rng = TestRng(0x5EED_0A06);
    let mut id = 0;
    for_dtypes_and_layouts(e, "", |dtype, layout, worst| {
        for batch in 0..4 {
            let aug = random_augment(&mut rng, dtype, layout);
            let n = 1 + rng.below(7) as usize;
            let samples: Vec<Sample> = (0..n)
                .map(|_| {
                    id += 1;
                    random_sample(&mut rng, &aug, id, false)
                })
                .collect();
            let what = format!("{dtype:?} {layout:?} batch {batch}");
            run_and_check(e, &samples, false, &mut rng, worst, &what);
        }
    });
}

pub fn every_jitter_order_matches_the_reference(e: &dyn Executor) {
    let mut rng = TestRng(77);
    let mut worst = Worst::default();
    // Strong jitter on larger outputs: many orders, contrast anywhere in the order (the
    // workgroup reduction of `vertical_jitter`, once or twice per sample).
    let aug = crop_and_jitter((0.2, 1.0), (41, 23), [0.8, 0.9, 0.9, 0.5]);
    let samples: Vec<Sample> = (0..24)
        .map(|id| random_sample(&mut rng, &aug, 1000 + id, false))
        .collect();
    let orders: std::collections::BTreeSet<u32> =
        samples.iter().map(|s| s.plan.jitter_order).collect();
    assert!(orders.len() >= 8, "only {} orders", orders.len());
    run_and_check(e, &samples, false, &mut rng, &mut worst, "jitter");
    report(e, &worst, "jitter u8");
}

pub fn colour_ops_after_the_jitter_match_the_reference(e: &dyn Executor) {
    let mut rng = TestRng(0xC010_0125);
    let mut worst = Worst::default();
    // All four jitter ops and up to three colour ops: lists of up to 7 ops, running on
    // into the plan's second order word, contrast anywhere among the first four; the
    // thresholds and bits cover their ends (solarize 0 inverts everything, posterize 0
    // leaves black).
    for (i, (bits, threshold)) in [(0u32, 0.0), (3, 127.5), (8, 255.0), (1, 64.0)]
        .into_iter()
        .enumerate()
    {
        let aug = crop_and_jitter((0.3, 1.0), (29, 19), [0.6, 0.7, 0.8, 0.4])
            .random_grayscale(0.4)
            .random_posterize(bits, 0.6)
            .random_solarize(threshold, 0.6);
        let samples: Vec<Sample> = (0..16)
            .map(|id| random_sample(&mut rng, &aug, 7000 + 100 * i as u64 + id, false))
            .collect();
        let longest = samples
            .iter()
            .map(|s| s.plan.jitter_ops().count())
            .max()
            .unwrap_or(0);
        assert!(longest > 4, "no plan's list reached the second word");
        run_and_check(e, &samples, false, &mut rng, &mut worst, "colour ops");
    }
    report(e, &worst, "colour ops u8");
}

pub fn whole_image_ops_match_the_reference(e: &dyn Executor) {
    let mut rng = TestRng(0xB1_0125);
    let mut worst = Worst::default();
    // Blur (kernels from 1 to 23 taps, some wider than the output, which reflect more
    // than once), sharpness (smoothing to sharpening), auto-contrast and equalize, each
    // a round of its own, after the jitter (contrast a round too) and among the colour
    // ops; outputs from 1x1 (sharpness leaves 2-pixel sides alone) to 45x31.
    let sizes = [(45u32, 31u32), (17, 9), (3, 3), (2, 7), (1, 1), (24, 40)];
    let kernels = [(3u32, 3u32), (5, 9), (23, 23), (7, 1), (1, 5)];
    let factors = [0.0, 0.5, 2.0, 5.3];
    let mut seen = std::collections::BTreeMap::new();
    for (i, &(w, h)) in sizes.iter().enumerate() {
        for round in 0..2 {
            let mut aug = crop_and_jitter((0.3, 1.0), (w, h), [0.5, 0.6, 0.7, 0.2])
                .gaussian_blur(kernels[(i + round) % kernels.len()], (0.1, 4.0), 0.7)
                .random_adjust_sharpness(factors[(i + 2 * round) % factors.len()], 0.6)
                .random_autocontrast(0.5)
                .random_equalize(0.5);
            if round == 1 {
                aug = aug
                    .random_grayscale(0.3)
                    .random_posterize(5, 0.4)
                    .random_solarize(200.0, 0.4);
            }
            let samples: Vec<Sample> = (0..12)
                .map(|id| random_sample(&mut rng, &aug, 9000 + 100 * i as u64 + id, false))
                .collect();
            for s in &samples {
                for op in s.plan.jitter_ops() {
                    *seen.entry(op).or_insert(0u32) += 1;
                }
            }
            run_and_check(e, &samples, false, &mut rng, &mut worst, "whole-image ops");
        }
    }
    {
        use stoker::augment::plan::{OP_AUTOCONTRAST, OP_BLUR, OP_EQUALIZE, OP_SHARPNESS};
        for op in [OP_BLUR, OP_SHARPNESS, OP_AUTOCONTRAST, OP_EQUALIZE] {
            assert!(
                seen.get(&op).copied().unwrap_or(0) >= 20,
                "op {op}: {seen:?}"
            );
        }
    }
    report(e, &worst, "whole-image ops u8");
}

pub fn policies_match_the_reference(e: &dyn Executor) {
    let mut rng = TestRng(0x9011_C1E5);
    let mut worst = Worst::default();
    // RandAugment (the usual 2 ops at 9 of 31, and 5 strong ops) and TrivialAugmentWide,
    // with label planes (the warps' nearest path) and an f32 normalised output.
    let policies = [
        Augment::new().rand_augment(2, 9, 31),
        Augment::new().rand_augment(5, 28, 31),
        Augment::new().trivial_augment_wide(31),
    ];
    for (i, base) in policies.into_iter().enumerate() {
        let aug = base
            .random_resized_crop(37, (0.3, 1.0), (0.75, 4.0 / 3.0))
            .output_size(37, 29)
            .flip_horizontal(0.5)
            .fill([90, 20, 250])
            .mask_fill(255)
            .crop_aware(false);
        let aug = if i == 1 {
            aug.normalize(super::random::MEAN, super::random::STD)
        } else {
            aug
        };
        let samples: Vec<Sample> = (0..16)
            .map(|id| random_sample(&mut rng, &aug, 12_000 + 100 * i as u64 + id, true))
            .collect();
        let ops: usize = samples.iter().map(|s| s.plan.jitter_ops().count()).sum();
        assert!(ops > 0, "no colour op drawn");
        assert!(samples
            .iter()
            .any(|s| s.plan.has(stoker::augment::plan::AFFINE)));
        let out = run_augment(e, &samples, true, WHOLE, &mut rng);
        check_batch(
            &samples,
            &out.images,
            out.masks.as_deref(),
            &mut worst,
            "policies",
        );
    }
    report(e, &worst, "policies");
}

pub fn erasing_matches_the_reference_for_every_dtype_and_layout(e: &dyn Executor) {
    let mut rng = TestRng(0xE2A5E);
    let mut erased = 0;
    for_dtypes_and_layouts(e, "erasing ", |dtype, layout, worst| {
        let value = if dtype == DType::U8 {
            [255.0, 0.0, 77.0]
        } else {
            [0.0, -2.0, 1.0 / 3.0]
        };
        // Flips and a warp first: the rectangle is in the batch's coordinates.
        let mut aug = crop_and_jitter((0.3, 1.0), (27, 21), [0.2, 0.2, 0.2, 0.0])
            .flip_vertical(0.5)
            .random_rotation(20.0)
            .random_erasing(0.8, (0.02, 0.5), (0.3, 3.3), value)
            .dtype(dtype)
            .layout(layout);
        if dtype != DType::U8 {
            aug = aug.normalize(MEAN, STD);
        }
        let samples: Vec<Sample> = (0..8)
            .map(|id| random_sample(&mut rng, &aug, 9000 + id, false))
            .collect();
        erased += samples
            .iter()
            .filter(|s| s.plan.has(stoker::augment::plan::ERASE))
            .count();
        let what = format!("erasing {dtype:?} {layout:?}");
        run_and_check(e, &samples, false, &mut rng, worst, &what);
    });
    assert!(erased >= 24, "only {erased} of 48 samples erased");
}

pub fn large_outputs_take_the_wide_contrast_sum(e: &dyn Executor) {
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
    run_and_check(e, &samples, false, &mut rng, &mut worst, "large");
    report(e, &worst, "large f16");
}

pub fn masks_match_the_reference_exactly(e: &dyn Executor) {
    let mut rng = TestRng(99);
    let mut worst = Worst::default();
    for (i, dtype) in [DType::U8, DType::F16, DType::F32].into_iter().enumerate() {
        let aug = random_augment(&mut rng, dtype, Layout::Nchw);
        let mut samples: Vec<Sample> = (0..5)
            .map(|id| random_sample(&mut rng, &aug, 500 + 10 * i as u64 + id, true))
            .collect();
        // A sample without a mask in a batch with masks gets zeros.
        samples[2].mask = None;
        let what = format!("masks {dtype:?}");
        run_and_check(e, &samples, true, &mut rng, &mut worst, &what);
    }
    report(e, &worst, "masks");
}

pub fn small_bindings_split_the_augment_and_give_the_same_result(e: &dyn Executor) {
    let mut rng = TestRng(4242);
    for (dtype, layout) in [(DType::F32, Layout::Nhwc), (DType::U8, Layout::Nchw)] {
        let aug = crop_and_jitter((0.3, 1.0), (9, 7), [0.4, 0.4, 0.4, 0.0])
            .dtype(dtype)
            .layout(layout);
        let samples: Vec<Sample> = (0..30)
            .map(|id| {
                let mut s = random_sample(&mut rng, &aug, 2000 + id, true);
                // Keep every sample, and any two neighbours (a chunk of mask words may
                // straddle two samples and bind both label planes), within the binding.
                while s.image.data.len() > 1200 * 3
                    || s.mask.as_ref().is_some_and(|m| m.data.len() > 1200)
                {
                    s = random_sample(&mut rng, &aug, 2000 + id, true);
                }
                s
            })
            .collect();
        // 12 KiB: the batch's plans (32 slots of 256 bytes after the header, 8256
        // bytes) are bound whole, so the binding must hold them.
        let a = run_augment(e, &samples, true, 12 * 1024, &mut rng);
        let b = run_augment(e, &samples, true, WHOLE, &mut rng);
        assert!(
            a.launches > b.launches + 4,
            "{dtype:?}: {} launches split, {} whole",
            a.launches,
            b.launches
        );
        assert_eq!(a.images, b.images, "{dtype:?}: split and whole differ");
        assert_eq!(a.masks, b.masks);
        let mut worst = Worst::default();
        check_batch(&samples, &a.images, a.masks.as_deref(), &mut worst, "split");
        report(e, &worst, &format!("split {dtype:?}"));
    }
}

/// The f16 conversion at its edges, where a one-step tolerance would hide a wrong rounding:
/// black pixels of an identity resize normalised to exact halfway cases (subnormal ties,
/// the tie at 65520 that rounds to infinity). The slots equal the reference bit for bit.
pub fn f16_rounding_ties_and_overflow_match_half(e: &dyn Executor) {
    let mut rng = TestRng(0xF16);
    let q = 2f32.powi(-24); // the smallest f16 subnormal
    let cases: [([f32; 3], [u16; 3]); 2] = [
        // 0.5q, 1.5q, 2.5q: ties to even give 0, 2q, 2q.
        ([-0.5 * q, -1.5 * q, -2.5 * q], [0x0000, 0x0002, 0x0002]),
        // 65504 (the largest f16), the tie at 65520 (to infinity), just below the tie.
        ([-65504.0, -65520.0, -65519.99], [0x7bff, 0x7c00, 0x7bff]),
    ];
    for (id, (mean, want)) in cases.into_iter().enumerate() {
        let aug = Augment::new()
            .output_size(8, 8)
            .normalize(mean, [1.0; 3])
            .dtype(DType::F16)
            .layout(Layout::Nhwc);
        let plan = aug.plan(1, 0, id as u64, 8, 8);
        let data: Vec<u8> = (0..8 * 8)
            .flat_map(|i| {
                let v = if i % 3 == 0 { 0 } else { rng.below(256) as u8 };
                [v; 3]
            })
            .collect();
        let image = Image8 {
            width: 8,
            height: 8,
            data,
            origin: (0, 0),
            full: (8, 8),
            scale: 1,
        };
        let sample = Sample {
            plan,
            image,
            mask: None,
        };
        let out = run_augment(e, std::slice::from_ref(&sample), false, WHOLE, &mut rng);
        let mut cpu = vec![0u8; sample.plan.image_bytes()];
        execute_image(
            &sample.plan,
            &sample.image,
            &mut cpu,
            &mut Scratch::default(),
        );
        assert_eq!(&out.images[..cpu.len()], &cpu[..], "case {id}: f16 bits");
        let bits: Vec<u16> = cpu
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert!(
            bits.chunks_exact(3).any(|p| p == want),
            "case {id}: no black pixel gave {want:04x?}"
        );
    }
}

/// A whole batch as the backends run it: JPEGs (some rotated) and CPU-decoded images,
/// planned by [`BatchPlan::plan`] with masks, every step on the executor. The decoded
/// windows equal the oracle's, and the slots equal the reference augmentation of those
/// windows (within one level; masks exactly).
pub fn a_batch_plan_decodes_and_augments_like_the_reference(e: &dyn Executor) {
    let mut rng = TestRng(0xBA7C);
    let dir = data_dir().join("jpeg");
    let files = [
        "go_video-001_q50_411.jpg",
        "pil_hopper_orientation_6.jpg",
        "jd_moz_jpg-gray.jpg",
        "go_video-001_cmyk.jpg",
        "ljt_testorig.jpg",
        "go_video-001_221212.jpg",
    ];
    for (dtype, layout) in [(DType::F16, Layout::Nchw), (DType::U8, Layout::Nhwc)] {
        let aug = crop_and_jitter((0.2, 1.0), (24, 19), [0.4, 0.4, 0.4, 0.1])
            .flip_vertical(0.5)
            .normalize(MEAN, STD)
            .dtype(dtype)
            .layout(layout);
        let mut jobs = Vec::new();
        let mut oracles = Vec::new();
        for (id, file) in files.iter().enumerate() {
            let bytes = std::fs::read(dir.join(file)).expect("jpeg");
            let info = peek_info(&bytes).expect("info");
            let (w, h) = if info.orientation >= 5 {
                (info.height, info.width)
            } else {
                (info.width, info.height)
            };
            let plan = aug.plan(11, 0, id as u64, w, h);
            let scale = [1u32, 2, 4][rng.below(3) as usize];
            let full = (w.div_ceil(scale), h.div_ceil(scale));
            let window = needed_window(&plan, full, scale);
            let opts = DecodeOptions {
                scale,
                window: Some(window),
                ..DecodeOptions::default()
            };
            // Every other sample the CPU decodes, as a fallback would.
            let image = if id % 3 == 2 {
                let mut img = Image8::default();
                cpu::decode_image(&bytes, &opts, &mut img).expect("cpu decode");
                DeviceSample::Rgb(img)
            } else {
                let p = prepare(&bytes, &opts).expect("prepare");
                assert!(p.cpu_reason.is_none(), "{file}: {:?}", p.cpu_reason);
                p.image
            };
            let oracle = match &image {
                DeviceSample::Jpeg {
                    coeffs,
                    scale,
                    window,
                    orientation: 1,
                } => {
                    let mut packed = PackedJpeg::default();
                    pack(coeffs, *scale, *window, &mut packed).expect("pack");
                    Some(decode_window(&packed))
                }
                DeviceSample::Rgb(img) => Some(img.clone()),
                // Rotated windows are covered by the decode cases.
                DeviceSample::Jpeg { .. } => None,
                other => panic!("{file}: prepare gave {other:?}"),
            };
            oracles.push(oracle);
            let mask = (id % 2 == 0).then(|| random_mask(&mut rng, w, h));
            jobs.push(DeviceJob {
                plan,
                image,
                mask,
                cache_to: None,
            });
        }
        let mut plan = BatchPlan::new(e.limits());
        plan.plan(&jobs, true).expect("plan");
        let mut buffers = Buffers::for_plan(&plan, &jobs);
        e.run(plan.steps(), &mut buffers);
        let windows = plan
            .windows_to_host(buffers.get(Buffer::Windows))
            .expect("windows");
        for (i, (img, oracle)) in windows.iter().zip(&oracles).enumerate() {
            if let Some(o) = oracle {
                assert_eq!(
                    (img.width, img.height, img.origin, &img.data),
                    (o.width, o.height, o.origin, &o.data),
                    "{}: decoded window",
                    files[i]
                );
            }
        }
        let samples: Vec<Sample> = jobs
            .into_iter()
            .zip(windows)
            .map(|(j, image)| Sample {
                plan: j.plan,
                image,
                mask: j.mask,
            })
            .collect();
        let what = format!("batch plan {dtype:?} {layout:?}");
        let mut worst = Worst::default();
        check_batch(
            &samples,
            buffers.get(Buffer::Images),
            Some(buffers.get(Buffer::Masks)),
            &mut worst,
            &what,
        );
        report(e, &worst, &what);
    }
}

/// The plan of an 8x8 resize of a 20x20 image, and its whole window at word 0.
pub fn small_sample() -> (SamplePlan, DeviceImage) {
    let plan = Augment::new().resize(8, 8).plan(1, 0, 1, 20, 20);
    let image = DeviceImage {
        width: 20,
        height: 20,
        full_width: 20,
        full_height: 20,
        scale: 1,
        ..DeviceImage::default()
    };
    (plan, image)
}

/// Buffers shorter than the plan binds are refused before anything runs: a windows
/// buffer the samples' windows lie outside of (by the planner), an image output too small
/// for the batch (by the executor).
pub fn short_buffers_are_refused(e: &dyn Executor) {
    let (plan, image) = small_sample();
    let mut input = AugmentInput::new();
    input.push(&plan, image, None).expect("push");
    let limits = e.limits();
    let short_windows = input.launches(64, false, limits.max_binding, limits.per_dim);
    assert!(
        matches!(short_windows, Err(stoker::Error::Device { .. })),
        "{short_windows:?}"
    );
    let windows = 20 * 20 * 4;
    let (launches, scratch) = input
        .launches(windows, false, limits.max_binding, limits.per_dim)
        .expect("plan");
    let steps: Vec<Step> = launches.into_iter().map(Step::Launch).collect();
    let mut buffers = Buffers::default()
        .with(Buffer::AugmentInput, input.bytes().to_vec())
        .with(Buffer::Windows, garbage(windows))
        .with(Buffer::Horizontal, garbage(scratch.horizontal.max(4)))
        .with(Buffer::Resized, garbage(scratch.resized.max(4)))
        .with(Buffer::Images, garbage(64));
    assert!(input.images_bytes() > 64);
    let r = e.try_run(&steps, &mut buffers);
    assert!(r.is_err(), "{} ran into a 64-byte image buffer", e.name());
    eprintln!("{}: {}", e.name(), r.unwrap_err());
}

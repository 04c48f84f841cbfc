//! Plan invariants: a sample's plan and pixels depend on (seed, epoch, id, image size,
//! config) alone; they differ across samples and epochs; the cache does not freeze them.

use crate::common;

use std::collections::BTreeMap;

use proptest::prelude::*;
use stoker::augment::plan::{FLIP_H, FLIP_V};
use stoker::{Augment, DType, Dataset, Layout, Pipeline, SamplePlan};

type Seen = BTreeMap<u64, (SamplePlan, Vec<u8>)>;

fn train_augment() -> Augment {
    Augment::new()
        .random_resized_crop(16, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
        .flip_horizontal(0.5)
        .flip_vertical(0.2)
        .color_jitter(0.4, 0.4, 0.4)
        .hue(0.1)
        .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
}

fn collect(pipe: &Pipeline, epoch: u64) -> Seen {
    let mut seen = Seen::new();
    for b in pipe.epoch(epoch).expect("epoch") {
        let b = b.expect("batch");
        let per = b.raw_images().expect("images").len() / b.len().max(1);
        for (k, id) in b.ids().iter().enumerate() {
            let px = b.raw_images().expect("images")[k * per..(k + 1) * per].to_vec();
            assert!(
                seen.insert(*id, (b.plans()[k], px)).is_none(),
                "delivered twice"
            );
        }
    }
    seen
}

#[test]
fn plans_and_pixels_ignore_threads_batches_and_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 3, 12, 21);
    let build = |workers: usize, readers: usize, batch: usize| {
        Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
            .augment(train_augment())
            .workers(workers)
            .readers(readers)
            .batch_size(batch)
            .seed(99)
            .build()
            .expect("pipeline")
    };
    let a = build(1, 1, 5);
    let b = build(3, 4, 8);
    let c = build(2, 8, 36);
    for epoch in [0, 1] {
        let (sa, sb, sc) = (collect(&a, epoch), collect(&b, epoch), collect(&c, epoch));
        assert_eq!(sa.len(), 36);
        assert_eq!(sa, sb, "epoch {epoch}: 1 worker vs 3 workers");
        assert_eq!(sa, sc, "epoch {epoch}: batch 5 vs batch 36");
        // The plan is the pure function of (seed, epoch, id, size, config).
        for (id, (plan, _)) in &sa {
            let again = train_augment().plan(99, epoch, *id, plan.src_width, plan.src_height);
            assert_eq!(&again, plan);
        }
    }
    // Epochs differ for every sample.
    let (e0, e1) = (collect(&a, 0), collect(&a, 1));
    let same = e0.iter().filter(|(id, v)| e1[*id].0 == v.0).count();
    assert_eq!(same, 0, "plans repeated across epochs");
}

#[test]
fn plans_differ_across_samples_and_epochs() {
    let aug = train_augment();
    let plans: Vec<SamplePlan> = (0..200u64).map(|id| aug.plan(5, 0, id, 640, 480)).collect();
    let mut boxes: Vec<[u32; 4]> = plans
        .iter()
        .map(|p| {
            [
                p.crop_x.to_bits(),
                p.crop_y.to_bits(),
                p.crop_w.to_bits(),
                p.crop_h.to_bits(),
            ]
        })
        .collect();
    boxes.sort_unstable();
    boxes.dedup();
    assert!(
        boxes.len() > 190,
        "only {} distinct crops of 200",
        boxes.len()
    );
    let flips = plans.iter().filter(|p| p.has(FLIP_H)).count();
    assert!(
        (70..130).contains(&flips),
        "{flips} of 200 flipped at p = 0.5"
    );
    let vflips = plans.iter().filter(|p| p.has(FLIP_V)).count();
    assert!(
        (20..60).contains(&vflips),
        "{vflips} of 200 flipped at p = 0.2"
    );
    for id in 0..50u64 {
        assert_ne!(aug.plan(5, 0, id, 640, 480), aug.plan(5, 1, id, 640, 480));
        assert_ne!(aug.plan(5, 0, id, 640, 480), aug.plan(6, 0, id, 640, 480));
    }
    // Every op appears at every position of the jitter order.
    let mut firsts = [0; 5];
    for p in &plans {
        firsts[(p.jitter_order & 0xFF) as usize] += 1;
    }
    assert!(firsts[1..].iter().all(|&c| c > 20), "{firsts:?}");
}

#[test]
fn validation_plans_are_fixed() {
    let aug = Augment::validation(224);
    let p = aug.plan(1, 0, 7, 500, 375);
    for (seed, epoch, id) in [(2, 0, 7), (1, 5, 7), (1, 0, 8)] {
        let q = aug.plan(seed, epoch, id, 500, 375);
        assert_eq!(
            (p.crop_x, p.crop_y, p.crop_w, p.crop_h, p.flags),
            (q.crop_x, q.crop_y, q.crop_w, q.crop_h, q.flags)
        );
    }
    // Shorter side 375 -> 256, longer 500 -> 341 (truncated); the centre 224 box starts at
    // round((341 - 224) / 2) = 58 (half to even) and 16, and maps back by 500/341, 375/256.
    let (sx, sy) = (500.0 / 341.0, 375.0 / 256.0);
    assert!((p.crop_w - 224.0 * sx).abs() < 1e-3);
    assert!((p.crop_h - 224.0 * sy).abs() < 1e-3);
    assert!((p.crop_y - 16.0 * sy).abs() < 1e-3);
    assert!((p.crop_x - 58.0 * sx).abs() < 1e-3);
}

#[test]
fn random_resized_crop_falls_back_to_a_centre_crop() {
    // A 1000x10 strip cannot hold a near-square crop of 90 % of its area: torchvision's
    // rule is 10 attempts, then the widest centre crop within the ratio range.
    let aug = Augment::new().random_resized_crop(8, (0.9, 1.0), (0.5, 2.0));
    for id in 0..20 {
        let p = aug.plan(0, 0, id, 1000, 10);
        assert_eq!((p.crop_w, p.crop_h), (20.0, 10.0));
        assert_eq!((p.crop_x, p.crop_y), (490.0, 0.0));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_resized_crops_stay_inside_and_in_range(
        w in 1u32..3000, h in 1u32..3000, id in any::<u64>(), epoch in 0u64..100,
        lo in 0.05f64..0.9, span in 0.0f64..0.5, rlo in 0.3f64..1.0, rspan in 0.0f64..2.0,
    ) {
        let scale = (lo, (lo + span).min(1.0));
        let ratio = (rlo, rlo + rspan);
        let aug = Augment::new().random_resized_crop(32, scale, ratio);
        let p = aug.plan(3, epoch, id, w, h);
        prop_assert!(p.crop_x >= 0.0 && p.crop_y >= 0.0 && p.crop_w >= 1.0 && p.crop_h >= 1.0);
        prop_assert!(p.crop_x + p.crop_w <= w as f32 && p.crop_y + p.crop_h <= h as f32);
        prop_assert_eq!(p.crop_x.fract(), 0.0);
        prop_assert_eq!(p.crop_w.fract(), 0.0);
        prop_assert_eq!(p, aug.plan(3, epoch, id, w, h));
    }
}

#[test]
fn cache_keeps_decoded_pixels_not_augmentations() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 2, 8, 4);
    let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .augment(train_augment())
        .batch_size(4)
        .cache_bytes(64 << 20)
        .seed(1)
        .build()
        .expect("pipeline");
    let e0 = collect(&pipe, 0);
    let e1_stats;
    let e1 = {
        let mut seen = Seen::new();
        let mut ep = pipe.epoch(1).expect("epoch");
        for b in ep.by_ref() {
            let b = b.expect("batch");
            let per = b.raw_images().expect("images").len() / b.len().max(1);
            for (k, id) in b.ids().iter().enumerate() {
                seen.insert(
                    *id,
                    (
                        b.plans()[k],
                        b.raw_images().expect("images")[k * per..(k + 1) * per].to_vec(),
                    ),
                );
            }
        }
        e1_stats = ep.stats();
        seen
    };
    let hits = e1_stats.cache_hits;
    assert_eq!(hits, 16, "second epoch should be served from the cache");
    assert!(pipe.cache_bytes_used() > 0);
    for (id, (plan, px)) in &e0 {
        assert_ne!(&e1[id].0, plan, "same plan in two epochs");
        assert_ne!(&e1[id].1, px, "same pixels in two epochs");
    }
    // And a cached epoch equals the uncached computation of the same epoch (the cache
    // keeps whole images, so it turns crop-aware decode off; do the same here).
    let fresh = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .augment(train_augment().crop_aware(false))
        .batch_size(4)
        .seed(1)
        .build()
        .expect("pipeline");
    assert_eq!(collect(&fresh, 1), e1);
}

#[test]
fn layouts_and_dtypes_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 1, 4, 8);
    let run = |layout: Layout, dtype: DType| {
        let aug = Augment::new()
            .random_resized_crop(12, (0.3, 1.0), (0.75, 1.33))
            .flip_horizontal(0.5)
            .layout(layout)
            .dtype(dtype);
        let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
            .augment(aug)
            .batch_size(4)
            .seed(3)
            .build()
            .expect("pipeline");
        let b = common::first_batch(&pipe);
        let vals: Vec<f32> = match dtype {
            DType::U8 => b
                .images::<u8>()
                .expect("u8")
                .iter()
                .map(|&v| f32::from(v) / 255.0)
                .collect(),
            DType::F16 => b
                .images::<half::f16>()
                .expect("f16")
                .iter()
                .map(|v| v.to_f32())
                .collect(),
            DType::F32 => b.images::<f32>().expect("f32").to_vec(),
        };
        (b.shape(), b.ids().to_vec(), vals)
    };
    let (shape, ids, nchw) = run(Layout::Nchw, DType::F32);
    assert_eq!(shape, [4, 3, 12, 12]);
    let (shape2, ids2, nhwc) = run(Layout::Nhwc, DType::F32);
    assert_eq!(shape2, [4, 12, 12, 3]);
    assert_eq!(ids, ids2);
    for n in 0..4 {
        for c in 0..3 {
            for i in 0..144 {
                assert_eq!(nchw[n * 432 + c * 144 + i], nhwc[n * 432 + i * 3 + c]);
            }
        }
    }
    let (_, _, u8s) = run(Layout::Nchw, DType::U8);
    let (_, _, f16s) = run(Layout::Nchw, DType::F16);
    for ((a, b), c) in nchw.iter().zip(&u8s).zip(&f16s) {
        assert!((a - b).abs() < 1e-6);
        assert!((a - c).abs() < 1e-3);
    }
}

/// The affine warp's draws are keyed by (seed, epoch, id), stay in their ranges and move
/// with the epoch; the fixed-point map the backends execute is the float map torchvision
/// computes, within `2^-17` of a pixel per pixel of distance from the centre.
#[test]
fn affine_draws_are_in_range_keyed_and_exact_in_fixed_point() {
    use stoker::augment::{affine_fixed, inverse_affine_matrix, AffineParams};
    use stoker::rng::{Rng, Stream};
    use stoker::Affine;
    let ranges = Affine::new()
        .degrees(-30.0, 45.0)
        .translate(0.25, 0.1)
        .scale(0.5, 2.0)
        .shear(-20.0, 10.0)
        .shear_y(-5.0, 5.0);
    let aug = Augment::new().resize(40, 30).random_affine(ranges);
    let mut seen = std::collections::BTreeSet::new();
    for id in 0..300u64 {
        let p = ranges.draw(&mut Rng::new(9, 2, id, Stream::Affine), 40, 30);
        assert!((-30.0..=45.0).contains(&p.angle), "{p:?}");
        assert!(
            p.translate.0.abs() <= 10.0 && p.translate.1.abs() <= 3.0,
            "{p:?}"
        );
        assert_eq!(p.translate.0.fract(), 0.0, "whole-pixel translations");
        assert!((0.5..=2.0).contains(&p.scale) && (-20.0..=10.0).contains(&p.shear.0));
        let plan = aug.plan(9, 2, id, 640, 480);
        assert_eq!(plan, aug.plan(9, 2, id, 640, 480));
        assert_ne!(plan.affine, aug.plan(9, 3, id, 640, 480).affine);
        seen.insert(plan.affine);
    }
    assert!(seen.len() > 295, "only {} distinct maps of 300", seen.len());

    let mut rng = common::TestRng(0xAFF1);
    for _ in 0..200 {
        let (w, h) = (1 + rng.below(3000) as u32, 1 + rng.below(3000) as u32);
        let p = AffineParams {
            angle: rng.below(7200) as f64 / 10.0 - 360.0,
            translate: (rng.below(200) as f64 - 100.0, rng.below(200) as f64 - 100.0),
            scale: 0.05 + rng.below(1000) as f64 / 100.0,
            shear: (rng.below(140) as f64 - 70.0, rng.below(140) as f64 - 70.0),
        };
        let m = inverse_affine_matrix(&p);
        let (affine, affine_frac) = affine_fixed(&m, w, h);
        let plan = SamplePlan {
            affine,
            affine_frac,
            ..Augment::new().resize(w, h).plan(0, 0, 0, w, h)
        };
        for (x, y) in [
            (0, 0),
            (w - 1, 0),
            (0, h - 1),
            (w - 1, h - 1),
            (w / 2, h / 3),
        ] {
            // The float map, centred coordinates in and out, as torchvision's grid.
            let (xc, yc) = (
                f64::from(x) + 0.5 - f64::from(w) / 2.0,
                f64::from(y) + 0.5 - f64::from(h) / 2.0,
            );
            let u = m[0] * xc + m[1] * yc + m[2] + f64::from(w) / 2.0 - 0.5;
            let v = m[3] * xc + m[4] * yc + m[5] + f64::from(h) / 2.0 - 0.5;
            let (qu, qv) = plan.affine_source(x, y);
            let one = 65536.0;
            let dist = xc.abs() + yc.abs() + 1.0;
            let tol = dist * (1.0 / 131072.0) + 1.0 / one;
            assert!(
                (qu as f64 / one - u).abs() <= tol && (qv as f64 / one - v).abs() <= tol,
                "{p:?} {w}x{h} at ({x}, {y}): fixed ({}, {}) float ({u}, {v})",
                qu as f64 / one,
                qv as f64 / one
            );
        }
    }
}

#[test]
fn affine_ranges_out_of_bounds_are_refused() {
    use stoker::Affine;
    for bad in [
        Affine::new().degrees(10.0, -10.0),
        Affine::new().degrees(f64::NAN, 1.0),
        Affine::new().translate(1.5, 0.0),
        Affine::new().translate(-0.1, 0.0),
        Affine::new().scale(0.0, 1.0),
        Affine::new().scale(1.0, 100.0),
        Affine::new().shear(-85.0, 0.0),
        Affine::new().shear_y(0.0, 80.0),
    ] {
        let aug = Augment::new().resize(8, 8).random_affine(bad);
        assert!(
            matches!(aug.validate(), Err(stoker::Error::Config { .. })),
            "{bad:?} accepted"
        );
    }
    assert!(Augment::new()
        .resize(8, 8)
        .random_rotation(180.0)
        .validate()
        .is_ok());
}

/// A hand-made plan naming a valid rect past its frame is read clamped to the frame: the
/// reference neither panics nor reads outside the sample.
#[test]
fn a_valid_rect_past_the_frame_is_clamped() {
    use stoker::augment::reference::{execute_image, execute_mask, Scratch};
    use stoker::decode::{Image8, LabelPlane};
    let aug = Augment::new().letterbox(12, 9).dtype(DType::U8);
    let mut plan = aug.plan(0, 0, 0, 30, 10);
    let good = plan;
    assert_eq!(good.valid_rect(), ((0, 12), (2, 6)));
    plan.valid = [0xFFFF_0000, 0xFFFF_0005];
    assert_eq!(plan.valid_rect(), ((0, 12), (5, 9)));
    plan.valid = [0x0000_0020, 0x0003_0002];
    assert_eq!(plan.valid_rect(), ((0, 0), (2, 3)));
    let img = Image8::new(30, 10, vec![200; 30 * 10 * 3]);
    let mut out = vec![0u8; plan.image_bytes()];
    execute_image(&plan, &img, &mut out, &mut Scratch::default());
    let mask = LabelPlane {
        width: 30,
        height: 10,
        data: vec![3; 300],
    };
    let mut labels = vec![0u16; 12 * 9];
    execute_mask(&plan, &mask, &mut labels);
}

/// The colour ops after the jitter: each applies with its probability, in the fixed order
/// after the jitter's ops, keyed by (seed, epoch, id); adding them changes no other part
/// of a plan; bad settings are refused.
#[test]
fn colour_ops_are_drawn_on_their_own_stream_in_their_order() {
    use stoker::augment::plan::{OP_GRAYSCALE, OP_POSTERIZE, OP_SOLARIZE};
    let base = train_augment();
    let with = base
        .clone()
        .random_grayscale(0.5)
        .random_posterize(3, 0.5)
        .random_solarize(100.5, 0.5);
    assert!(with.validate().is_ok());
    let mut seen = BTreeMap::new();
    for id in 0..400u64 {
        let (a, b) = (base.plan(5, 2, id, 64, 48), with.plan(5, 2, id, 64, 48));
        assert_eq!(b, with.plan(5, 2, id, 64, 48), "keyed by (seed, epoch, id)");
        let jitter: Vec<u32> = a.jitter_ops().collect();
        let ops: Vec<u32> = b.jitter_ops().collect();
        assert_eq!(
            &ops[..jitter.len()],
            &jitter[..],
            "the jitter's ops come first"
        );
        let colour = &ops[jitter.len()..];
        // Every other field as without the colour ops.
        let mut same = b;
        (same.jitter_order, same.jitter_order_hi, same.color_params) =
            (a.jitter_order, a.jitter_order_hi, a.color_params);
        assert_eq!(same, a, "sample {id}");
        let want: Vec<u32> = [OP_GRAYSCALE, OP_POSTERIZE, OP_SOLARIZE]
            .into_iter()
            .filter(|op| colour.contains(op))
            .collect();
        assert_eq!(colour, &want[..], "fixed order");
        if colour.contains(&OP_POSTERIZE) {
            assert_eq!(b.posterize_bits(), 3);
        }
        if colour.contains(&OP_SOLARIZE) {
            assert_eq!(b.solarize_threshold(), 101, "the ceiling of 100.5");
        }
        *seen.entry(colour.to_vec()).or_insert(0) += 1;
    }
    // Each of the 8 subsets about 400 / 8 = 50 times.
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert!(seen.values().all(|&n| (20..=90).contains(&n)), "{seen:?}");
    // Another epoch draws again.
    let differ = (0..100u64)
        .filter(|&id| with.plan(5, 2, id, 64, 48) != with.plan(5, 3, id, 64, 48))
        .count();
    assert!(differ > 90);
    // Probability 1 always, 0 never.
    let always = Augment::new().resize(8, 8).random_grayscale(1.0);
    let never = Augment::new().resize(8, 8).random_solarize(0.0, 0.0);
    for id in 0..50 {
        assert_eq!(
            always.plan(1, 0, id, 9, 9).jitter_ops().collect::<Vec<_>>(),
            [OP_GRAYSCALE]
        );
        assert_eq!(never.plan(1, 0, id, 9, 9).jitter_ops().count(), 0);
    }
    for bad in [
        Augment::new().resize(8, 8).random_grayscale(1.5),
        Augment::new().resize(8, 8).random_posterize(9, 0.5),
        Augment::new().resize(8, 8).random_posterize(4, -0.1),
        Augment::new().resize(8, 8).random_solarize(256.0, 0.5),
        Augment::new().resize(8, 8).random_solarize(f64::NAN, 0.5),
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}

/// Random erasing's rectangles: drawn as torchvision's `RandomErasing.get_params`
/// (area within `scale` of the output's up to rounding, aspect within `ratio`, inside
/// the frame), with probability `p`, keyed by (seed, epoch, id), on a stream of their
/// own; the value is the configured one; bad settings are refused.
#[test]
fn erasing_rectangles_follow_torchvisions_draw() {
    use stoker::augment::plan::ERASE;
    let base = train_augment();
    let value = [0.0, 0.5, -1.0];
    let with = base
        .clone()
        .random_erasing(0.5, (0.02, 0.33), (0.3, 3.3), value);
    assert!(with.validate().is_ok());
    let (w, h) = with.get_output_size();
    let mut erased = 0;
    for id in 0..1000u64 {
        let (a, b) = (base.plan(3, 1, id, 50, 40), with.plan(3, 1, id, 50, 40));
        assert_eq!(b, with.plan(3, 1, id, 50, 40));
        let mut same = b;
        same.flags &= !ERASE;
        (same.erase, same.erase_value) = (a.erase, a.erase_value);
        assert_eq!(same, a, "sample {id}: erasing changed another parameter");
        if !b.has(ERASE) {
            assert_eq!(b.erase_rect(), ((0, 0), (0, 0)));
            continue;
        }
        erased += 1;
        assert_eq!(b.erase_value, value);
        let ((x0, x1), (y0, y1)) = b.erase_rect();
        assert!(x1 <= w && y1 <= h && x0 <= x1 && y0 <= y1);
        let (ew, eh) = (f64::from(x1 - x0), f64::from(y1 - y0));
        let area = f64::from(w * h);
        // h = round(sqrt(A r)), w = round(sqrt(A / r)): within half a pixel of a
        // rectangle of the drawn area and ratio.
        assert!(ew < f64::from(w) && eh < f64::from(h));
        let (lo, hi) = ((ew - 0.5) * (eh - 0.5), (ew + 0.5) * (eh + 0.5));
        assert!(
            lo <= 0.33 * area && hi >= 0.02 * area,
            "sample {id}: {ew}x{eh} in {w}x{h}"
        );
        if ew >= 1.0 && eh >= 1.0 {
            let ratio = eh / ew;
            let slack = (eh + 0.5) / (ew - 0.5).max(0.5) / ratio;
            assert!(ratio <= 3.3 * slack && ratio * slack >= 0.3, "{ew}x{eh}");
        }
    }
    assert!(
        (420..=580).contains(&erased),
        "{erased} of 1000 erased at p = 0.5"
    );
    for bad in [
        Augment::new()
            .resize(8, 8)
            .random_erasing(1.2, (0.02, 0.33), (0.3, 3.3), [0.0; 3]),
        Augment::new()
            .resize(8, 8)
            .random_erasing(0.5, (0.4, 0.2), (0.3, 3.3), [0.0; 3]),
        Augment::new()
            .resize(8, 8)
            .random_erasing(0.5, (0.02, 0.33), (0.0, 3.3), [0.0; 3]),
        Augment::new().resize(8, 8).random_erasing(
            0.5,
            (0.02, 0.33),
            (0.3, 3.3),
            [f32::NAN, 0.0, 0.0],
        ),
        // A u8 batch takes whole values within 0..=255.
        Augment::new()
            .resize(8, 8)
            .random_erasing(0.5, (0.02, 0.33), (0.3, 3.3), [0.5, 0.0, 0.0]),
        Augment::new().resize(8, 8).random_erasing(
            0.5,
            (0.02, 0.33),
            (0.3, 3.3),
            [256.0, 0.0, 0.0],
        ),
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}

/// Blur, sharpness, auto-contrast and equalize: drawn on their own stream, in their
/// fixed order after grayscale (blur, sharpness, posterize, solarize, auto-contrast,
/// equalize), the blur's sigma within its range and its kernel in the plan; nothing else
/// of a plan changes; bad settings are refused.
#[test]
fn whole_image_ops_are_drawn_on_their_own_stream_in_their_order() {
    use stoker::augment::plan::{
        OP_AUTOCONTRAST, OP_BLUR, OP_EQUALIZE, OP_GRAYSCALE, OP_POSTERIZE, OP_SHARPNESS,
        OP_SOLARIZE,
    };
    let base = train_augment()
        .random_grayscale(0.5)
        .random_posterize(3, 0.5)
        .random_solarize(100.5, 0.5);
    let with = base
        .clone()
        .gaussian_blur((5, 9), (0.1, 2.0), 0.5)
        .random_adjust_sharpness(2.0, 0.5)
        .random_autocontrast(0.5)
        .random_equalize(0.5);
    assert!(with.validate().is_ok());
    let order = [
        OP_GRAYSCALE,
        OP_BLUR,
        OP_SHARPNESS,
        OP_POSTERIZE,
        OP_SOLARIZE,
        OP_AUTOCONTRAST,
        OP_EQUALIZE,
    ];
    let mut counts = BTreeMap::new();
    for id in 0..400u64 {
        let (a, b) = (base.plan(5, 2, id, 64, 48), with.plan(5, 2, id, 64, 48));
        assert_eq!(b, with.plan(5, 2, id, 64, 48));
        let before: Vec<u32> = a.jitter_ops().collect();
        let after: Vec<u32> = b.jitter_ops().collect();
        // The ops without the new ones are those of the plan without them, in order.
        let kept: Vec<u32> = after
            .iter()
            .copied()
            .filter(|op| ![OP_BLUR, OP_SHARPNESS, OP_AUTOCONTRAST, OP_EQUALIZE].contains(op))
            .collect();
        assert_eq!(kept, before, "sample {id}");
        // The colour ops after the jitter keep the fixed order.
        let colour: Vec<usize> = after
            .iter()
            .filter_map(|op| order.iter().position(|o| o == op))
            .collect();
        assert!(colour.windows(2).all(|w| w[0] < w[1]), "{after:?}");
        for (k, &op) in after.iter().enumerate() {
            *counts.entry(op).or_insert(0) += 1;
            if op == OP_BLUR {
                let sigma = b.op_factor(k, 0.0);
                assert!((0.1..=2.0).contains(&sigma), "sigma {sigma}");
                assert_eq!(b.blur_kernel(), (5, 9));
            }
            if op == OP_SHARPNESS {
                assert_eq!(b.op_factor(k, 1.0), 2.0);
            }
        }
        let mut same = b;
        (same.jitter_order, same.jitter_order_hi, same.order_ext) =
            (a.jitter_order, a.jitter_order_hi, a.order_ext);
        (same.op_params, same.blur_size) = (a.op_params, a.blur_size);
        assert_eq!(same, a, "sample {id}: nothing else changes");
    }
    for op in [OP_BLUR, OP_SHARPNESS, OP_AUTOCONTRAST, OP_EQUALIZE] {
        let n = counts.get(&op).copied().unwrap_or(0);
        assert!((140..=260).contains(&n), "op {op}: {n} of 400");
    }
    let small = || Augment::new().resize(8, 8);
    // Blurs with a kernel, a sigma range or a probability out of bounds.
    let blurs = [
        ((4, 3), (0.1, 2.0), 1.0),
        ((3, 257), (0.1, 2.0), 1.0),
        ((3, 3), (0.0, 2.0), 1.0),
        ((3, 3), (2.0, 1.0), 1.0),
        ((3, 3), (1.0, 2.0), 1.5),
    ]
    .map(|(kernel, sigma, p)| small().gaussian_blur(kernel, sigma, p));
    let others = [
        small().random_adjust_sharpness(-1.0, 0.5),
        small().random_adjust_sharpness(f64::NAN, 0.5),
        small().random_autocontrast(-0.1),
        small().random_equalize(2.0),
        small().rand_augment(2, 31, 31),
        small().rand_augment(2, 0, 1),
        small().trivial_augment_wide(1),
        // 4 jitter ops, 3 colour ops and 4 whole-image ops leave room for 5.
        train_augment()
            .random_grayscale(0.5)
            .random_posterize(3, 0.5)
            .random_solarize(100.5, 0.5)
            .gaussian_blur((3, 3), (0.1, 2.0), 0.5)
            .random_adjust_sharpness(2.0, 0.5)
            .random_autocontrast(0.5)
            .random_equalize(0.5)
            .rand_augment(6, 9, 31),
    ];
    for bad in blurs.iter().chain(&others) {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}

/// The policies draw as torchvision's do: every op of the space equally often, signed
/// magnitudes negative half the time, TrivialAugmentWide's bins uniform, RandAugment's
/// fixed; a plan holds exactly the drawn ops (colour ops with their own parameters, in
/// order; the warps composed), keyed by (seed, epoch, id).
#[test]
fn policies_draw_every_op_evenly_and_plans_hold_what_was_drawn() {
    use stoker::augment::plan::AFFINE;
    use stoker::augment::policy::{step, Step};
    use stoker::augment::{
        affine_fixed, compose_inverse, inverse_affine_matrix_about, Policy, PolicyKind, PolicyOp,
    };
    use stoker::rng::{Rng, Stream};
    let trivial = Policy {
        kind: PolicyKind::TrivialAugmentWide,
        bins: 31,
    };
    let mut ops = BTreeMap::new();
    let (mut signed, mut negative) = (0, 0);
    let mut bins = std::collections::BTreeSet::new();
    for id in 0..14_000u64 {
        let mut rng = Rng::new(3, 1, id, Stream::Policy);
        let drawn = trivial.draw(&mut rng, 224, 224);
        assert_eq!(drawn.len(), 1);
        let (op, m) = drawn[0];
        *ops.entry(op.name()).or_insert(0u32) += 1;
        if op.signed() {
            signed += 1;
            negative += u32::from(m < 0.0);
        }
        if op == PolicyOp::Rotate {
            bins.insert(m.abs().to_bits());
        }
    }
    assert_eq!(ops.len(), 14, "{ops:?}");
    // 1000 each, give or take four standard deviations (about 30).
    assert!(ops.values().all(|&n| (875..=1125).contains(&n)), "{ops:?}");
    let share = f64::from(negative) / f64::from(signed);
    assert!((0.47..=0.53).contains(&share), "negative share {share}");
    // Rotations at every bin but 0 (whose magnitude 0 has one sign's bits either way).
    assert!(bins.len() >= 30, "{} rotation magnitudes", bins.len());

    let rand = Policy {
        kind: PolicyKind::RandAugment {
            num_ops: 2,
            magnitude: 9,
        },
        bins: 31,
    };
    let aug = Augment::new()
        .resize(64, 48)
        .rand_augment(2, 9, 31)
        .fill([1, 2, 3]);
    let mut warped = 0;
    for id in 0..500u64 {
        let plan = aug.plan(7, 1, id, 300, 200);
        assert_eq!(plan, aug.plan(7, 1, id, 300, 200));
        let drawn = rand.draw(&mut Rng::new(7, 1, id, Stream::Policy), 64, 48);
        assert_eq!(drawn.len(), 2);
        let mut colour = Vec::new();
        let mut inverse: Option<[f64; 6]> = None;
        for &(op, m) in &drawn {
            if let Some(mag) = rand.magnitude(op, 9, 64, 48) {
                assert_eq!(m.abs(), f64::from(mag), "{op:?}: the magnitude of bin 9");
            }
            match step(op, m, 64, 48) {
                Step::None => {}
                Step::Colour(code, param) => colour.push((code, param)),
                Step::Warp(p, centre) => {
                    let m = inverse_affine_matrix_about(&p, centre);
                    inverse = Some(inverse.map_or(m, |before| compose_inverse(&before, &m)));
                }
            }
        }
        let held: Vec<(u32, u32)> = plan
            .jitter_ops()
            .enumerate()
            .map(|(k, op)| (op, plan.op_params[k]))
            .collect();
        assert_eq!(held, colour, "sample {id}: {drawn:?}");
        match inverse {
            Some(m) => {
                warped += 1;
                assert!(plan.has(AFFINE));
                assert_eq!((plan.affine, plan.affine_frac), affine_fixed(&m, 64, 48));
            }
            None => assert!(!plan.has(AFFINE), "sample {id}: {drawn:?}"),
        }
    }
    // P(no geometric op in two draws) = (9 / 14)^2: about 41 %.
    assert!((230..=360).contains(&warped), "{warped} of 500 warped");
    let differ = (0..100u64)
        .filter(|&id| aug.plan(7, 1, id, 300, 200) != aug.plan(7, 2, id, 300, 200))
        .count();
    assert!(differ > 80, "{differ} of 100 plans differ across epochs");
}

//! User transforms (`PipelineBuilder::transform`): the caller's code on each decoded
//! sample, with its own random stream keyed by (seed, epoch, sample id) — the same draws on
//! every backend, thread count and batch size — before the fused pass; masks and boxes
//! stay with their pixels through the transform's geometry and the plan's; its errors and
//! panics are per-sample reports under each policy; the cache keeps samples before it.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use crate::common::TestRng;
use stoker::rng::{Rng, Stream};
use stoker::{
    Augment, BackendKind, BoundingBox, DType, Dataset, Error, OnError, Pipeline, Sample,
    SampleErrorKind, Subset, Targets,
};

/// Five colours far apart, one per class id of the label planes.
const PALETTE: [[u8; 3]; 5] = [
    [20, 20, 20],
    [230, 40, 40],
    [40, 220, 60],
    [50, 60, 230],
    [235, 230, 60],
];

/// Images whose 8x8 blocks take the colour of their class, with the class ids as a mask
/// beside each, of random sizes.
fn blocks_with_masks(dir: &Path, n: usize, seed: u64) -> Subset {
    let mut rng = TestRng(seed);
    for i in 0..n {
        let (w, h) = (40 + rng.below(40) as u32, 40 + rng.below(40) as u32);
        let (cw, ch) = (w.div_ceil(8), h.div_ceil(8));
        let cells: Vec<u16> = (0..cw * ch).map(|_| rng.below(5) as u16).collect();
        let ids: Vec<u16> = (0..h)
            .flat_map(|y| {
                let cells = &cells;
                (0..w).map(move |x| cells[((y / 8) * cw + x / 8) as usize])
            })
            .collect();
        let rgb: Vec<u8> = ids.iter().flat_map(|&c| PALETTE[c as usize]).collect();
        common::write(
            dir,
            &format!("img/s{i:02}.png"),
            &common::png_rgb(w, h, &rgb),
        );
        common::write(
            dir,
            &format!("masks/s{i:02}.png"),
            &common::png_labels(w, h, &ids, false),
        );
    }
    Dataset::flat(dir.join("img"))
        .expect("images")
        .with_masks(dir.join("masks"))
        .expect("masks")
        .all()
}

/// A random crop of both the image and the mask, then a mirror half the time: the kind
/// of geometry a user transform does, with the sample's own draws.
fn crop_and_mirror(s: &mut stoker::pipeline::UserSample<'_>) -> stoker::pipeline::TransformResult {
    let (w, h) = (s.width(), s.height());
    let cw = 16 + s.rng().below(u64::from(w - 15)) as u32;
    let ch = 16 + s.rng().below(u64::from(h - 15)) as u32;
    let x0 = s.rng().below(u64::from(w - cw + 1)) as u32;
    let y0 = s.rng().below(u64::from(h - ch + 1)) as u32;
    let mirror = s.rng().bernoulli(0.5);
    let src_x = |x: u32| if mirror { x0 + cw - 1 - x } else { x0 + x };
    let px = s.pixels();
    let rgb: Vec<u8> = (0..ch)
        .flat_map(|y| (0..cw).map(move |x| (x, y)))
        .flat_map(|(x, y)| {
            let at = 3 * ((y0 + y) * w + src_x(x)) as usize;
            [px[at], px[at + 1], px[at + 2]]
        })
        .collect();
    let m = s.mask().ok_or("no mask")?;
    let ids: Vec<u16> = (0..ch)
        .flat_map(|y| (0..cw).map(move |x| (x, y)))
        .map(|(x, y)| m.data[((y0 + y) * w + src_x(x)) as usize])
        .collect();
    s.set_image(cw, ch, rgb)?;
    s.set_mask(cw, ch, ids)
}

/// Every sample of `epoch` by id: its image bytes (HWC u8) and mask, and the ids reported.
type Run = (
    HashMap<u64, (Vec<u8>, Option<Vec<u16>>)>,
    Vec<stoker::SampleError>,
);

fn run_epoch(pipe: &Pipeline, epoch: u64) -> Run {
    let mut got = HashMap::new();
    let mut errors = Vec::new();
    for b in pipe.epoch(epoch).expect("epoch") {
        let b = b.expect("batch");
        let [_, h, w, c] = b.shape();
        let per = h * w * c;
        let images = b.read_images().expect("images");
        let masks = b.read_masks().expect("masks");
        for (slot, &id) in b.ids().iter().enumerate() {
            let m = masks
                .as_ref()
                .map(|m| m[slot * h * w..(slot + 1) * h * w].to_vec());
            let fresh = got.insert(id, (images[slot * per..(slot + 1) * per].to_vec(), m));
            assert!(fresh.is_none(), "sample {id:x} delivered twice");
        }
        errors.extend(b.errors().iter().cloned());
    }
    (got, errors)
}

fn nhwc_u8() -> Augment {
    Augment::new().dtype(DType::U8).layout(stoker::Layout::Nhwc)
}

#[test]
fn draws_are_keyed_by_seed_epoch_and_sample_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 3, 7, 5);
    let subset = Dataset::image_folder(dir.path()).expect("folder").all();
    let seed = 77;
    // Each image becomes one colour drawn from the sample's stream: the output is that
    // colour everywhere, and the colour is what the stream of (seed, epoch, id) gives.
    let pipe = |backend: BackendKind, workers: usize, batch: usize| {
        Pipeline::builder(subset.clone())
            .backend(backend)
            .workers(workers)
            .batch_size(batch)
            .seed(seed)
            .augment(nhwc_u8().resize(12, 10))
            .transform(|s| {
                let c = [0; 3].map(|_| s.rng().below(256) as u8);
                let n = s.pixels().len() / 3;
                s.pixels_mut()
                    .copy_from_slice(&c.iter().copied().cycle().take(3 * n).collect::<Vec<_>>());
                Ok(())
            })
            .build()
            .expect("pipeline")
    };
    let want = |epoch: u64, id: u64| {
        let mut r = Rng::new(seed, epoch, id, Stream::User);
        [0; 3].map(|_| r.below(256) as u8)
    };
    let mut by_epoch = Vec::new();
    for epoch in 0..2 {
        let (got, errors) = run_epoch(&pipe(BackendKind::Cpu, 2, 4), epoch);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(got.len(), 21);
        for (id, (img, _)) in &got {
            let c = want(epoch, *id);
            assert!(
                img.chunks(3).all(|p| p == c),
                "sample {id:x} epoch {epoch}: not the colour its stream draws"
            );
        }
        assert_eq!(
            run_epoch(&pipe(BackendKind::Cpu, 1, 5), epoch).0,
            got,
            "thread count and batch size"
        );
        for backend in common::backends()
            .into_iter()
            .filter(|b| *b != BackendKind::Cpu)
        {
            let (on_device, errors) = run_epoch(&pipe(backend, 2, 3), epoch);
            assert!(errors.is_empty(), "{backend}: {errors:?}");
            assert_eq!(on_device, got, "{backend} gives the CPU's samples");
        }
        by_epoch.push(got);
    }
    let differ = by_epoch[0]
        .iter()
        .filter(|(id, v)| by_epoch[1][id] != **v)
        .count();
    assert!(
        differ >= 19,
        "only {differ} of 21 samples drew anew in epoch 1"
    );
}

#[test]
fn masks_stay_with_their_pixels_through_the_transform_and_the_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let subset = blocks_with_masks(dir.path(), 16, 21);
    let aug = nhwc_u8()
        .random_resized_crop(32, (0.3, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .flip_vertical(0.5);
    let pipe = |backend: BackendKind| {
        Pipeline::builder(subset.clone())
            .backend(backend)
            .batch_size(5)
            .seed(3)
            .augment(aug.clone())
            .transform(crop_and_mirror)
            .build()
            .expect("pipeline")
    };
    let (cpu, errors) = run_epoch(&pipe(BackendKind::Cpu), 1);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(cpu.len(), 16);
    let (w, h) = (32usize, 32usize);
    let mut checked = 0;
    for (id, (img, mask)) in &cpu {
        let mask = mask.as_ref().expect("mask");
        assert!(mask.iter().all(|&c| c < 5), "only the input's class ids");
        // Where the mask is one class over a 5x5 neighbourhood, the pixel is that
        // class's colour: the transform's crop and mirror and the plan's crop, resize and
        // flips moved both planes alike.
        for y in 2..h - 2 {
            for x in 2..w - 2 {
                let c = mask[y * w + x];
                let uniform =
                    (y - 2..=y + 2).all(|yy| (x - 2..=x + 2).all(|xx| mask[yy * w + xx] == c));
                if !uniform {
                    continue;
                }
                let px = &img[3 * (y * w + x)..3 * (y * w + x) + 3];
                let want = PALETTE[c as usize];
                let off = px
                    .iter()
                    .zip(want)
                    .map(|(&a, b)| (i32::from(a) - i32::from(b)).abs())
                    .max()
                    .unwrap_or(0);
                assert!(
                    off <= 24,
                    "sample {id:x} at ({x}, {y}): class {c} but colour {px:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 2000, "only {checked} interior pixels checked");
    for backend in common::backends()
        .into_iter()
        .filter(|b| *b != BackendKind::Cpu)
    {
        let (dev, errors) = run_epoch(&pipe(backend), 1);
        assert!(errors.is_empty(), "{backend}: {errors:?}");
        assert_eq!(dev.len(), cpu.len());
        for (id, (img, mask)) in &dev {
            let (cimg, cmask) = &cpu[id];
            assert_eq!(mask, cmask, "{backend}: sample {id:x}'s mask");
            let worst = img
                .iter()
                .zip(cimg)
                .map(|(&a, &b)| (i32::from(a) - i32::from(b)).abs())
                .max()
                .unwrap_or(0);
            assert!(
                worst <= 1,
                "{backend}: sample {id:x} off the CPU by {worst}"
            );
        }
    }
}

/// A black PNG of `w x h` with a white rectangle `[x0, x1) x [y0, y1)`.
fn rectangle_png(w: u32, h: u32, r: [u32; 4]) -> Vec<u8> {
    let rgb: Vec<u8> = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .flat_map(|(x, y)| {
            let inside = x >= r[0] && x < r[2] && y >= r[1] && y < r[3];
            [if inside { 255 } else { 0 }; 3]
        })
        .collect();
    common::png_rgb(w, h, &rgb)
}

#[test]
fn boxes_the_transform_moves_are_then_moved_by_the_plan() {
    let mut rng = TestRng(8);
    let mut samples = Vec::new();
    let mut drawn = HashMap::new();
    for i in 0..12 {
        let (w, h) = (40 + rng.below(30) as u32, 30 + rng.below(30) as u32);
        let x0 = rng.below(u64::from(w / 2)) as u32;
        let y0 = rng.below(u64::from(h / 2)) as u32;
        let r = [
            x0,
            y0,
            x0 + 6 + rng.below(u64::from(w / 2 - 5)) as u32,
            y0 + 6 + rng.below(u64::from(h / 2 - 5)) as u32,
        ];
        let path = format!("r{i:02}.png");
        let bytes: Arc<[u8]> = rectangle_png(w, h, r).into();
        let s = Sample::in_memory(path, bytes, Some(0)).with_targets(Targets {
            boxes: vec![BoundingBox {
                x0: r[0] as f32,
                y0: r[1] as f32,
                x1: r[2] as f32,
                y1: r[3] as f32,
                class: i,
            }],
            ..Targets::default()
        });
        drawn.insert(s.id, (w, h, r));
        samples.push(s);
    }
    let subset = Dataset::from_samples(None, samples, vec!["r".into()])
        .expect("dataset")
        .all();
    let (ow, oh) = (48u32, 40u32);
    let pipe = Pipeline::builder(subset)
        .backend(BackendKind::Cpu)
        .batch_size(5)
        .augment(nhwc_u8().resize(ow, oh))
        // The transform mirrors the image left-right, half the time, and moves the box.
        .transform(|s| {
            if !s.rng().bernoulli(0.5) {
                return Ok(());
            }
            let (w, h) = (s.width() as usize, s.height() as usize);
            let px = s.pixels_mut();
            for row in px.chunks_mut(3 * w).take(h) {
                for x in 0..w / 2 {
                    for k in 0..3 {
                        row.swap(3 * x + k, 3 * (w - 1 - x) + k);
                    }
                }
            }
            let wf = w as f32;
            for b in &mut s.targets_mut().ok_or("no targets")?.boxes {
                (b.x0, b.x1) = (wf - b.x1, wf - b.x0);
            }
            Ok(())
        })
        .build()
        .expect("pipeline");
    let mut mirrored = 0;
    for b in pipe.epoch(0).expect("epoch") {
        let b = b.expect("batch");
        let img = b.images::<u8>().expect("u8");
        for (slot, (&id, t)) in b.ids().iter().zip(b.targets()).enumerate() {
            let bx = t.as_ref().expect("targets").boxes[0];
            let (w, h, r) = drawn[&id];
            // Where the white rectangle is now, from the pixels alone.
            let slot_px = &img[slot * (3 * ow * oh) as usize..][..(3 * ow * oh) as usize];
            let white: Vec<(u32, u32)> = (0..oh)
                .flat_map(|y| (0..ow).map(move |x| (x, y)))
                .filter(|&(x, y)| slot_px[3 * (y * ow + x) as usize] > 200)
                .collect();
            let xs = || white.iter().map(|p| p.0);
            let (px0, px1) = (xs().min().expect("white"), xs().max().expect("white") + 1);
            let sx = ow as f32 / w as f32;
            let sy = oh as f32 / h as f32;
            // The box must sit on the rectangle's pixels (within the resize's blur).
            assert!(
                (bx.x0 - px0 as f32).abs() <= 1.5 && (bx.x1 - px1 as f32).abs() <= 1.5,
                "sample {id:x}: box x [{}, {}] but white pixels x [{px0}, {px1})",
                bx.x0,
                bx.x1
            );
            assert!((bx.y0 - r[1] as f32 * sy).abs() < 1e-3);
            assert!((bx.y1 - r[3] as f32 * sy).abs() < 1e-3);
            if (bx.x0 - r[0] as f32 * sx).abs() > 1e-3 {
                mirrored += 1;
                assert!((bx.x1 - (w - r[0]) as f32 * sx).abs() < 1e-3);
            }
        }
    }
    assert!(
        (2..=10).contains(&mirrored),
        "{mirrored} of 12 mirrored at p = 0.5"
    );
}

#[test]
fn failures_are_reported_under_each_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 2, 12, 9);
    let subset = Dataset::image_folder(dir.path()).expect("folder").all();
    let all: HashSet<u64> = subset.samples().iter().map(|s| s.id).collect();
    let fails = |id: u64| id.is_multiple_of(5);
    let panics = |id: u64| id % 5 == 1;
    let bad: HashSet<u64> = all
        .iter()
        .copied()
        .filter(|&id| fails(id) || panics(id))
        .collect();
    assert!(
        bad.len() >= 3 && bad.len() <= all.len() - 6,
        "{}",
        bad.len()
    );
    let pipe = |policy: OnError| {
        Pipeline::builder(subset.clone())
            .backend(BackendKind::Cpu)
            .batch_size(5)
            .on_error(policy)
            .augment(nhwc_u8().resize(8, 8))
            .transform(move |s| {
                if fails(s.id()) {
                    return Err(format!("no good: {}", s.path()).into());
                }
                assert!(!panics(s.id()), "boom");
                Ok(())
            })
            .build()
            .expect("pipeline")
    };
    // Skip: every sample delivered once or reported once, with its path and why.
    for epoch in 0..2 {
        let (got, errors) = run_epoch(&pipe(OnError::Skip), epoch);
        let reported: HashSet<u64> = errors.iter().map(|e| e.id).collect();
        assert_eq!(reported.len(), errors.len(), "each reported once");
        assert_eq!(reported, bad);
        assert_eq!(got.keys().copied().collect::<HashSet<_>>(), &all - &bad);
        for e in &errors {
            assert_eq!(e.kind, SampleErrorKind::Transform);
            assert!(e.path.ends_with(".png"), "{e}");
            if fails(e.id) {
                assert!(
                    e.reason.contains("no good") && e.reason.contains(&e.path),
                    "{e}"
                );
            } else {
                assert!(
                    e.reason.contains("panicked") && e.reason.contains("boom"),
                    "{e}"
                );
            }
        }
    }
    // Replace: full batches, the failed ones stood in for by good samples.
    let p = pipe(OnError::Replace);
    let mut total = 0;
    let mut reported = HashSet::new();
    for b in p.epoch(0).expect("epoch") {
        let b = b.expect("batch");
        total += b.len();
        for r in b.replacements() {
            assert!(bad.contains(&r.failed_id) && !bad.contains(&r.by_id));
        }
        assert!(b.ids().iter().all(|id| !bad.contains(id)));
        reported.extend(b.errors().iter().map(|e| e.id));
    }
    assert_eq!(total, all.len());
    assert_eq!(reported, bad);
    // Fail: the epoch stops with the sample's error.
    let first_error = pipe(OnError::Fail)
        .epoch(0)
        .expect("epoch")
        .find_map(|b| b.err())
        .expect("the epoch fails");
    assert!(
        first_error.to_string().contains("user transform"),
        "{first_error}"
    );
}

#[test]
fn the_cache_keeps_samples_as_decoded_and_the_transform_runs_every_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let subset = blocks_with_masks(dir.path(), 10, 4);
    let pipe = |cache: u64| {
        Pipeline::builder(subset.clone())
            .backend(BackendKind::Cpu)
            .batch_size(4)
            .cache_bytes(cache)
            .augment(nhwc_u8().random_resized_crop(24, (0.5, 1.0), (0.8, 1.25)))
            .transform(crop_and_mirror)
            .build()
            .expect("pipeline")
    };
    let (cached, plain) = (pipe(64 << 20), pipe(0));
    let mut epochs = Vec::new();
    for epoch in 0..3 {
        let got = run_epoch(&cached, epoch);
        assert_eq!(got, run_epoch(&plain, epoch), "epoch {epoch}");
        epochs.push(got.0);
    }
    assert!(cached.stats().cache_hits >= 20, "{:?}", cached.stats());
    assert_ne!(epochs[1], epochs[2], "a cached sample is transformed anew");
}

#[test]
fn what_a_transform_leaves_is_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let subset = blocks_with_masks(dir.path(), 4, 6);
    let reasons =
        |f: fn(&mut stoker::pipeline::UserSample<'_>) -> stoker::pipeline::TransformResult| {
            let pipe = Pipeline::builder(subset.clone())
                .backend(BackendKind::Cpu)
                .augment(nhwc_u8().resize(8, 8))
                .transform(f)
                .build()
                .expect("pipeline");
            let (got, errors) = run_epoch(&pipe, 0);
            assert!(got.is_empty());
            errors
                .into_iter()
                .map(|e| (e.kind, e.reason))
                .collect::<Vec<_>>()
        };
    // A wrong number of bytes for the size asked.
    for (kind, reason) in reasons(|s| s.set_image(10, 10, vec![0; 299])) {
        assert_eq!(kind, SampleErrorKind::Transform);
        assert!(reason.contains("299 bytes"), "{reason}");
    }
    // A new image size without a mask of that size: image and mask would not line up.
    for (kind, reason) in reasons(|s| s.set_image(10, 10, vec![7; 300])) {
        assert_eq!(kind, SampleErrorKind::Mask);
        assert!(reason.contains("10x10"), "{reason}");
    }
}

#[test]
fn a_transform_cannot_use_the_device_cache() {
    if common::wgpu_context().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 1, 2, 1);
    let r = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .backend(BackendKind::Wgpu)
        .allow_software_gpu(true)
        .augment(nhwc_u8().resize(8, 8))
        .device_cache_bytes(1 << 20)
        .transform(|_| Ok(()))
        .build();
    match r {
        Err(Error::Config { setting, .. }) => assert_eq!(setting, "device_cache_bytes"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

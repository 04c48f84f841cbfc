//! Aspect-ratio buckets: each batch holds samples of one bucket (the closest in log
//! aspect ratio to the size the test wrote), at that bucket's size; every rank runs the
//! same steps; every sample once per epoch apart from marked padding; the bucket order
//! follows (seed, epoch); masks and boxes stay on their object; a state resumes exactly;
//! a damaged header is reported every epoch, never dropped.

use crate::common::{self, TestRng};
use crate::targets::{box_gaps, extent};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use stoker::{
    Augment, BackendKind, BoundingBox, BucketPipeline, Buckets, Dataset, Error, Location, Pipeline,
    ResumeError, Sample, Subset, Targets,
};

/// The buckets: square, two landscapes and two portraits.
const SIZES: [(u32, u32); 5] = [(32, 32), (40, 24), (24, 40), (48, 16), (16, 48)];

/// The bucket of `w x h`, by the documented rule: the smallest
/// `|ln(w / h) - ln(bw / bh)|`, ties to the first.
fn closest(w: u32, h: u32) -> usize {
    let r = (f64::from(w) / f64::from(h)).ln();
    let mut best = (0, f64::INFINITY);
    for (i, &(bw, bh)) in SIZES.iter().enumerate() {
        let d = (r - (f64::from(bw) / f64::from(bh)).ln()).abs();
        if d < best.1 - 1e-12 {
            best = (i, d);
        }
    }
    best.0
}

/// A JPEG of `w x h` random pixels whose frame header lies past the first 64 KiB (two
/// large APP2 segments before it).
fn late_frame_header(rng: &mut TestRng, w: u32, h: u32) -> Vec<u8> {
    let jpeg = common::random_jpeg(rng, w, h, turbojpeg::Subsamp::Sub2x2);
    let mut out = jpeg[..2].to_vec();
    for _ in 0..2 {
        out.extend_from_slice(&[0xFF, 0xE2, 0xFF, 0xFF]);
        out.extend(std::iter::repeat_n(0u8, 0xFFFF - 2));
    }
    out.extend_from_slice(&jpeg[2..]);
    out
}

/// A folder of JPEGs of many aspect ratios (one with its frame header past 64 KiB), and
/// each one's size by file name.
fn aspect_folder(dir: &Path, n: usize, seed: u64) -> (Subset, BTreeMap<String, (u32, u32)>) {
    let mut rng = TestRng(seed);
    let mut sizes = BTreeMap::new();
    for i in 0..n {
        let (w, h) = (16 + rng.below(90) as u32, 16 + rng.below(90) as u32);
        let name = format!("{i:03}.jpg");
        let bytes = if i == 3 {
            late_frame_header(&mut rng, w, h)
        } else {
            common::random_jpeg(&mut rng, w, h, turbojpeg::Subsamp::Sub2x2)
        };
        common::write(dir, &name, &bytes);
        sizes.insert(name, (w, h));
    }
    (Dataset::flat(dir).expect("folder").all(), sizes)
}

/// The random crops of the bucketed pipelines (sized to each sample's bucket).
fn crops() -> Augment {
    Augment::new().random_resized_crop(32, (0.5, 1.0), (0.8, 1.25))
}

fn bucketed(subset: &Subset, rank: usize, world: usize, seed: u64) -> BucketPipeline {
    Pipeline::builder(subset.clone())
        .backend(BackendKind::Cpu)
        .augment(crops().flip_horizontal(0.5))
        .batch_size(3)
        .readers(1)
        .workers(1)
        .shard(rank, world)
        .seed(seed)
        .buckets(
            Buckets::sizes(&SIZES)
                .expect("sizes")
                .batch_sizes(&[3, 4, 4, 2, 2])
                .expect("batch sizes"),
        )
        .build()
        .expect("bucket pipeline")
}

/// One delivered batch: its bucket (from its shape), ids, repeated flags, pixels.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    index: usize,
    size: (u32, u32),
    ids: Vec<u64>,
    repeated: Vec<bool>,
    pixels: Vec<u8>,
}

impl Seen {
    /// What batch `b` delivered (3 channels, u8).
    fn of(b: &stoker::Batch) -> Seen {
        let [_, c, h, w] = b.shape();
        assert_eq!(c, 3);
        Seen {
            index: b.index(),
            size: (w as u32, h as u32),
            ids: b.ids().to_vec(),
            repeated: b.repeated().to_vec(),
            pixels: b.images::<u8>().expect("u8").to_vec(),
        }
    }
}

/// Every batch of `epoch`.
fn run(epoch: stoker::BucketEpoch) -> Vec<Seen> {
    epoch.map(|b| Seen::of(&b.expect("batch"))).collect()
}

#[test]
fn batches_hold_one_bucket_at_its_size_and_ranks_share_the_steps() {
    let dir = tempfile::tempdir().expect("tmp");
    let (subset, sizes) = aspect_folder(dir.path(), 41, 3);
    let by_id: BTreeMap<u64, (u32, u32)> = subset
        .samples()
        .iter()
        .map(|s| (s.id, sizes[&s.path]))
        .collect();
    let bucket_of = |id: u64| closest(by_id[&id].0, by_id[&id].1);
    for world in 1..=3 {
        let ranks: Vec<Vec<Seen>> = (0..world)
            .map(|r| {
                let pipe = bucketed(&subset, r, world, 7);
                assert!(pipe.unreadable().is_empty(), "{:?}", pipe.unreadable());
                let seen = run(pipe.epoch(2).expect("epoch"));
                assert_eq!(seen.len(), pipe.num_batches());
                let schedule = pipe.schedule(2);
                for s in &seen {
                    let b = bucket_of(s.ids[0]);
                    for &id in &s.ids {
                        assert_eq!(bucket_of(id), b, "world {world} rank {r}: mixed buckets");
                    }
                    assert_eq!(s.size, SIZES[b], "the batch has its bucket's size");
                    assert_eq!(schedule[s.index], b);
                    let want = [3, 4, 4, 2, 2][b];
                    assert!(!s.ids.is_empty() && s.ids.len() <= want);
                }
                seen
            })
            .collect();
        // Equal steps, and at each step the same bucket on every rank.
        for r in &ranks {
            assert_eq!(r.len(), ranks[0].len(), "world {world}: steps differ");
            for (a, b) in r.iter().zip(&ranks[0]) {
                assert_eq!(a.size, b.size, "world {world}: step {} differs", a.index);
            }
        }
        // Every sample once, apart from the padding marked repeated.
        let mut real = Vec::new();
        for s in ranks.iter().flatten() {
            for (&id, &rep) in s.ids.iter().zip(&s.repeated) {
                if rep {
                    assert!(by_id.contains_key(&id));
                } else {
                    real.push(id);
                }
            }
        }
        real.sort_unstable();
        let all: Vec<u64> = by_id.keys().copied().collect();
        assert_eq!(real, all, "world {world}: every sample exactly once");
        let used: BTreeSet<(u32, u32)> = ranks[0].iter().map(|s| s.size).collect();
        assert!(used.len() >= 4, "only buckets {used:?} used");
    }
    // Under drop_last a bucket's short last global batch is not read: no padding, no
    // sample twice, the same steps on every rank.
    let ranks: Vec<Vec<Seen>> = (0..2)
        .map(|r| {
            let pipe = Pipeline::builder(subset.clone())
                .backend(BackendKind::Cpu)
                .augment(Augment::new())
                .batch_size(2)
                .readers(1)
                .workers(1)
                .shard(r, 2)
                .drop_last(true)
                .seed(7)
                .buckets(Buckets::sizes(&SIZES).expect("sizes"))
                .build()
                .expect("pipeline");
            run(pipe.epoch(0).expect("epoch"))
        })
        .collect();
    assert_eq!(ranks[0].len(), ranks[1].len());
    let mut ids = Vec::new();
    for s in ranks.iter().flatten() {
        assert_eq!(s.ids.len(), 2, "whole batches only");
        assert!(s.repeated.iter().all(|r| !r));
        assert!(s.ids.iter().all(|&id| bucket_of(id) == bucket_of(s.ids[0])));
        ids.extend(s.ids.iter().copied());
    }
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "no sample twice");
    // Each bucket's samples beyond its whole global batches of 4 are left out.
    let mut per_bucket = [0usize; 5];
    for &id in by_id.keys() {
        per_bucket[bucket_of(id)] += 1;
    }
    let kept: usize = per_bucket.iter().map(|c| c / 4 * 4).sum();
    assert_eq!(n, kept);
}

#[test]
fn the_bucket_order_follows_seed_and_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    let (subset, _) = aspect_folder(dir.path(), 40, 5);
    let a = bucketed(&subset, 0, 1, 7);
    let b = bucketed(&subset, 0, 1, 7);
    assert_eq!(a.schedule(0), b.schedule(0));
    assert_ne!(a.schedule(0), a.schedule(1));
    let first = |p: &BucketPipeline, e| -> Vec<Vec<u64>> {
        run(p.epoch(e).expect("epoch"))
            .into_iter()
            .map(|s| s.ids)
            .collect()
    };
    assert_eq!(
        first(&a, 0),
        first(&b, 0),
        "same (seed, epoch), same batches"
    );
    assert_ne!(first(&a, 0), first(&a, 1), "another epoch, another order");
    let other = bucketed(&subset, 0, 1, 8);
    assert_ne!(
        a.schedule(0),
        other.schedule(0),
        "another seed, another order"
    );
}

#[test]
fn a_mid_epoch_state_resumes_exactly_and_names_its_buckets() {
    let dir = tempfile::tempdir().expect("tmp");
    let (subset, _) = aspect_folder(dir.path(), 30, 9);
    let pipe = bucketed(&subset, 0, 1, 3);
    let full = {
        let mut states = Vec::new();
        let seen: Vec<Seen> = pipe
            .epoch(4)
            .expect("epoch")
            .map(|b| {
                let b = b.expect("batch");
                states.push(b.state());
                Seen::of(&b)
            })
            .collect();
        (seen, states)
    };
    let (seen, states) = full;
    assert!(seen.len() > 4);
    let k = seen.len() / 2;
    let saved = serde_json::to_string(&states[k]).expect("json");
    let state: stoker::ResumeState = serde_json::from_str(&saved).expect("state");
    let fresh = bucketed(&subset, 0, 1, 3);
    let rest = run(fresh.resume(&state).expect("resume"));
    assert_eq!(
        rest,
        seen[k + 1..].to_vec(),
        "the rest of the epoch, exactly"
    );
    // The end of the epoch resumes to nothing.
    let end = states.last().expect("states");
    assert_eq!(fresh.resume(end).expect("resume").count(), 0);
    // Other buckets: another order.
    let other = Pipeline::builder(subset.clone())
        .backend(BackendKind::Cpu)
        .augment(crops())
        .batch_size(3)
        .seed(3)
        .buckets(
            Buckets::sizes(&[(32, 32), (40, 24), (24, 40)])
                .expect("sizes")
                .batch_sizes(&[3, 4, 4])
                .expect("batch sizes"),
        )
        .build()
        .expect("pipeline");
    match other.resume(&state) {
        Err(Error::Resume(ResumeError::Order { .. })) => {}
        r => panic!("another bucket list resumed: {:?}", r.map(|_| ())),
    }
}

#[test]
fn a_damaged_header_is_reported_every_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    let (_, _) = aspect_folder(dir.path(), 12, 13);
    // A JPEG cut off before its frame header.
    common::write(
        dir.path(),
        "zz_bad.jpg",
        &[0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F'],
    );
    let subset = Dataset::flat(dir.path()).expect("folder").all();
    let pipe = bucketed(&subset, 0, 1, 1);
    let bad = pipe.unreadable();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].path, "zz_bad.jpg");
    assert!(!bad[0].reason.is_empty());
    for epoch in 0..2 {
        let mut errors = Vec::new();
        let mut delivered = BTreeSet::new();
        for b in pipe.epoch(epoch).expect("epoch") {
            let b = b.expect("batch");
            errors.extend(
                b.errors()
                    .iter()
                    .map(|e| (e.path.clone(), e.reason.clone())),
            );
            for (&id, &rep) in b.ids().iter().zip(b.repeated()) {
                assert!(rep || delivered.insert(id), "sample twice");
            }
        }
        assert_eq!(
            errors,
            vec![(bad[0].path.clone(), bad[0].reason.clone())],
            "epoch {epoch}"
        );
        assert_eq!(delivered.len(), 12, "epoch {epoch}: the others, once each");
    }
}

/// A white rectangle on black in the image, class 1 in the mask, and its box: under
/// bucketed plans the three stay together.
#[test]
fn masks_and_boxes_follow_bucketed_plans() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut rng = TestRng(21);
    let mut samples = Vec::new();
    for i in 0..24 {
        let (w, h) = (40 + rng.below(120) as u32, 40 + rng.below(120) as u32);
        let x0 = w / 4 + rng.below(u64::from(w / 8)) as u32;
        let y0 = h / 4 + rng.below(u64::from(h / 8)) as u32;
        let (x1, y1) = (x0 + w / 3, y0 + h / 3);
        let inside = |x: u32, y: u32| (x0..x1).contains(&x) && (y0..y1).contains(&y);
        let rgb: Vec<u8> = (0..h)
            .flat_map(|y| (0..w).flat_map(move |x| [if inside(x, y) { 255 } else { 0 }; 3]))
            .collect();
        let jpeg = common::rgb_jpeg(&rgb, w, h, 95, turbojpeg::Subsamp::None);
        let ids: Vec<u16> = (0..h)
            .flat_map(|y| (0..w).map(move |x| u16::from(inside(x, y))))
            .collect();
        let img = common::write(dir.path(), &format!("img/{i:02}.jpg"), &jpeg);
        let mask = common::write(
            dir.path(),
            &format!("mask/{i:02}.png"),
            &common::png_labels(w, h, &ids, false),
        );
        let t = Targets {
            boxes: vec![BoundingBox {
                x0: x0 as f32,
                y0: y0 as f32,
                x1: x1 as f32,
                y1: y1 as f32,
                class: 1,
            }],
            ..Targets::default()
        };
        samples.push(
            Sample::new(format!("{i:02}.jpg"), Location::File(img), Some(0))
                .with_mask(Location::File(mask))
                .with_targets(t),
        );
    }
    let data =
        Dataset::from_samples(Some(dir.path().into()), samples, vec!["a".into()]).expect("dataset");
    let mut checked = 0;
    for aug in [
        Augment::new(),
        Augment::new().resize_center_crop(36, 32),
        Augment::new()
            .random_resized_crop(32, (0.6, 1.0), (0.8, 1.25))
            .flip_horizontal(0.5),
    ] {
        let pipe = Pipeline::builder(data.clone().all())
            .backend(BackendKind::Cpu)
            .augment(aug)
            .batch_size(4)
            .readers(1)
            .workers(1)
            .seed(2)
            .buckets(Buckets::sizes(&SIZES).expect("sizes"))
            .build()
            .expect("pipeline");
        for b in pipe.epoch(0).expect("epoch") {
            let b = b.expect("batch");
            assert!(b.errors().is_empty(), "{:?}", b.errors());
            let [n, _, h, w] = b.shape();
            let images = b.images::<u8>().expect("u8");
            let masks = b.masks().expect("masks");
            for i in 0..n {
                let plane = &images[i * 3 * h * w..][..h * w];
                let labels = &masks[i * h * w..][..h * w];
                let Some(t) = &b.targets()[i] else {
                    panic!("targets missing")
                };
                let Some(bx) = t.boxes.first() else { continue };
                let bx = [bx.x0, bx.y0, bx.x1, bx.y1];
                if bx[2] - bx[0] < 4.0 || bx[3] - bx[1] < 4.0 {
                    continue;
                }
                let in_mask = extent(w, h, |x, y| labels[y * w + x] == 1);
                let in_image = extent(w, h, |x, y| plane[y * w + x] > 127);
                for (what, got, sound, slack) in
                    [("mask", in_mask, 1.0, 1.5), ("image", in_image, 1.5, 2.0)]
                {
                    let got =
                        got.unwrap_or_else(|| panic!("box {bx:?} but no object in the {what}"));
                    let (outside, loose) = box_gaps(bx, got);
                    assert!(
                        outside <= sound && loose <= slack,
                        "the {what} spans {got:?}, the box {bx:?} ({w}x{h})"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} samples compared");
}

/// The augmentation's crop onto a bucket's size, as documented: the whole image is
/// resized to cover the bucket and centre-cropped; `resize_center_crop` shrinks that box
/// by `resize / size`; `random_resized_crop`'s ratio range follows the bucket's;
/// `letterbox` keeps the whole image.
#[test]
fn the_augments_crop_maps_onto_the_bucket() {
    // A 100x50 image onto a 40x24 (5:3) bucket: the covering box is the full height, 250/3
    // wide, centred.
    let close = |a: f32, b: f64, what: &str| {
        assert!((f64::from(a) - b).abs() < 0.01, "{what}: {a} is not {b}")
    };
    let cover_w = 50.0 * 40.0 / 24.0;
    let p = Augment::new().for_bucket(40, 24).plan(1, 0, 0, 100, 50);
    assert_eq!((p.out_width, p.out_height), (40, 24));
    close(p.crop_w, cover_w, "cover width");
    close(p.crop_h, 50.0, "cover height");
    close(p.crop_x, (100.0 - cover_w) / 2.0, "cover left");
    close(p.crop_y, 0.0, "cover top");
    let p = Augment::new()
        .resize_center_crop(36, 32)
        .for_bucket(40, 24)
        .plan(1, 0, 0, 100, 50);
    let (w, h) = (cover_w * 32.0 / 36.0, 50.0 * 32.0 / 36.0);
    close(p.crop_w, w, "centre crop width");
    close(p.crop_h, h, "centre crop height");
    close(p.crop_x, (100.0 - w) / 2.0, "centre crop left");
    close(p.crop_y, (50.0 - h) / 2.0, "centre crop top");
    // A ratio range of exactly 1 becomes the bucket's 5:3 (torchvision's fallback centre
    // crop, rounded to whole pixels).
    let p = Augment::new()
        .random_resized_crop(32, (1.0, 1.0), (1.0, 1.0))
        .for_bucket(40, 24)
        .plan(1, 0, 0, 100, 50);
    close(
        p.crop_w,
        (50.0f64 * 5.0 / 3.0).round(),
        "resized crop width",
    );
    close(p.crop_h, 50.0, "resized crop height");
    let p = Augment::new()
        .letterbox(32, 32)
        .for_bucket(40, 24)
        .plan(1, 0, 0, 100, 50);
    assert_eq!((p.out_width, p.out_height), (40, 24));
    close(p.crop_w, 100.0, "letterbox width");
    close(p.crop_h, 50.0, "letterbox height");
}

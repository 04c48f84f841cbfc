//! Targets beyond one class id: manifests (JSON Lines, CSV) and COCO files read into
//! [`Targets`]; boxes and keypoints moved by each sample's plan so that they stay on the
//! pixels and the mask of their object; batches carrying them, the same on every backend
//! and in every epoch; unusable records reported, never delivered or dropped silently.
//! ([`stoker::Targets`] is what a sample carries.)

use crate::common;

use std::path::Path;

use crate::common::TestRng;
use stoker::augment::geometry::{transform, PointMap};
use stoker::augment::plan::{AFFINE, JITTER};
use stoker::augment::reference::{execute_image, execute_mask, Scratch};
use stoker::decode::{Image8, LabelPlane};
use stoker::{
    Affine, Augment, BackendKind, BoundingBox, BoxRule, DType, Dataset, Keypoint, Layout, OnError,
    Pipeline, SampleErrorKind,
};

/// A random training geometry: a crop (random resized, centre, letterbox, padded random
/// crop, or the whole image), flips, and half the time an affine warp, a third of the time
/// a RandAugment or TrivialAugment policy (whose shears, translations and rotations join
/// the warp; its colour ops are taken off the plan by the caller); label fill 9.
fn random_geometry(rng: &mut TestRng, out: (u32, u32)) -> Augment {
    let aug = match rng.below(5) {
        0 => Augment::new().random_resized_crop(out.0, (0.2, 1.0), (0.75, 1.333)),
        1 => Augment::new().resize_center_crop(out.0 + rng.below(16) as u32, out.0),
        2 => Augment::new().letterbox(out.0, out.1),
        3 => Augment::new().random_crop_padded(out.0, out.1, rng.below(8) as u32),
        _ => Augment::new(),
    }
    .output_size(out.0, out.1)
    .flip_horizontal(0.5)
    .flip_vertical(0.3)
    .mask_fill(9)
    .crop_aware(false);
    let aug = match rng.below(3) {
        0 => aug.rand_augment(3, 20, 31),
        1 => aug.trivial_augment_wide(31),
        _ => aug,
    };
    if rng.below(2) == 0 {
        aug.random_affine(
            Affine::new()
                .degrees(-90.0, 90.0)
                .translate(0.1, 0.1)
                .scale(0.8, 1.25)
                .shear(-10.0, 10.0),
        )
    } else {
        aug
    }
}

/// The bounding rectangle `[x0, y0, x1, y1]` of the pixels where `inside` holds.
pub(crate) fn extent(
    w: usize,
    h: usize,
    inside: impl Fn(usize, usize) -> bool,
) -> Option<[f32; 4]> {
    let mut r: Option<[f32; 4]> = None;
    for y in 0..h {
        for x in 0..w {
            if inside(x, y) {
                let (fx, fy) = (x as f32, y as f32);
                let e = r.get_or_insert([fx, fy, fx + 1.0, fy + 1.0]);
                *e = [
                    e[0].min(fx),
                    e[1].min(fy),
                    e[2].max(fx + 1.0),
                    e[3].max(fy + 1.0),
                ];
            }
        }
    }
    r
}

/// How far an object's extent `got` reaches outside the box `b` (the "sound" gap: the
/// box holds the object), and how far the box reaches beyond the object (the "loose"
/// gap: the box is tight), each the worst side, in pixels; boxes as `[x0, y0, x1, y1]`.
pub(crate) fn box_gaps(b: [f32; 4], got: [f32; 4]) -> (f32, f32) {
    let outside = (b[0] - got[0])
        .max(b[1] - got[1])
        .max(got[2] - b[2])
        .max(got[3] - b[3]);
    let loose = (got[0] - b[0])
        .max(got[1] - b[1])
        .max(b[2] - got[2])
        .max(b[3] - got[3]);
    (outside, loose)
}

/// A filled rectangle drawn into an image (white on black) and a label plane (class 1 on
/// 0) lands, under random plans, where its box is moved to: the object's pixels and mask
/// lie in the moved box and reach its edges (within the slack below), and a dropped box
/// leaves no object to speak of.
#[test]
fn boxes_stay_on_their_object_in_the_image_and_the_mask() {
    let mut rng = TestRng(0xB0_C5);
    let (mut checked, mut dropped) = (0, 0);
    let mut scratch = Scratch::default();
    for case in 0..400u64 {
        let (w, h) = (40 + rng.below(200) as u32, 40 + rng.below(200) as u32);
        let out = (24 + rng.below(60) as u32, 24 + rng.below(60) as u32);
        let aug = random_geometry(&mut rng, out);
        let mut plan = aug.plan(3, case, case, w, h);
        // The geometry alone: a policy's colour ops would hide the white rectangle.
        plan.flags &= !JITTER;
        let bx0 = rng.below(u64::from(w) - 12) as u32;
        let by0 = rng.below(u64::from(h) - 12) as u32;
        let bx1 = (bx0 + 12 + rng.below(u64::from(w - bx0 - 12) + 1) as u32).min(w);
        let by1 = (by0 + 12 + rng.below(u64::from(h - by0 - 12) + 1) as u32).min(h);
        let inside = |x: u32, y: u32| (bx0..bx1).contains(&x) && (by0..by1).contains(&y);
        let mask = LabelPlane {
            width: w,
            height: h,
            data: (0..h)
                .flat_map(|y| (0..w).map(move |x| u16::from(inside(x, y))))
                .collect(),
        };
        let rgb: Vec<u8> = (0..h)
            .flat_map(|y| (0..w).flat_map(move |x| [if inside(x, y) { 255 } else { 0 }; 3]))
            .collect();
        let image = Image8::new(w, h, rgb);
        let (ow, oh) = (out.0 as usize, out.1 as usize);
        let mut labels = vec![0u16; ow * oh];
        execute_mask(&plan, &mask, &mut labels);
        let mut pixels = vec![0u8; plan.image_bytes()];
        let nhwc = SamplePlanExt::nhwc(&plan);
        execute_image(&nhwc, &image, &mut pixels, &mut scratch);
        let object = BoundingBox {
            x0: bx0 as f32,
            y0: by0 as f32,
            x1: bx1 as f32,
            y1: by1 as f32,
            class: 1,
        };
        let moved = PointMap::new(&plan).bounding_box(&object, &BoxRule::default());
        let in_mask = extent(ow, oh, |x, y| labels[y * ow + x] == 1);
        let in_image = extent(ow, oh, |x, y| pixels[(y * ow + x) * 3] > 127);
        match moved {
            Some(b) if b.x1 - b.x0 >= 4.0 && b.y1 - b.y0 >= 4.0 => {
                let b = [b.x0, b.y0, b.x1, b.y1];
                for (what, got) in [("mask", in_mask), ("image", in_image)] {
                    let got = got.unwrap_or_else(|| {
                        panic!("case {case}: box {b:?} of {object:?} but no object in the {what}: {plan:?}")
                    });
                    // Sound: the object lies inside the box (within a pixel: two
                    // nearest-neighbour steps of half a pixel, the first scaled by the
                    // warp's zoom, at most 1.25). Tight: the box reaches the object within
                    // a pixel and a half, or two and a half where the warp rotates (a
                    // rotated rectangle's sharp corner holds no pixel centre).
                    let (sound, slack) = if plan.has(AFFINE) {
                        (1.15, 2.5)
                    } else {
                        (1.0, 1.5)
                    };
                    let (outside, loose) = box_gaps(b, got);
                    assert!(
                        outside <= sound && loose <= slack,
                        "case {case}: the {what} spans {got:?}, the moved box {b:?}: {plan:?}"
                    );
                }
                checked += 1;
            }
            Some(_) => {}
            None => {
                let n = labels.iter().filter(|&&l| l == 1).count();
                assert!(
                    n <= ow.max(oh) * 2,
                    "case {case}: dropped box, {n} object pixels"
                );
                dropped += 1;
            }
        }
    }
    assert!(checked > 250, "only {checked} cases compared");
    assert!(dropped > 0, "no case dropped its box");
}

/// [`execute_image`] writes NCHW by default; the extent check reads NHWC pixels.
trait SamplePlanExt {
    fn nhwc(&self) -> Self;
}
impl SamplePlanExt for stoker::SamplePlan {
    fn nhwc(&self) -> Self {
        let mut p = *self;
        p.layout = Layout::Nhwc as u32;
        p.dtype = DType::U8 as u32;
        p
    }
}

/// Keypoints land where their pixel does: a keypoint at the centre of a marked source
/// pixel moves onto an output pixel whose label is the mark (nearest-neighbour chains its
/// pixel), flips and warps included; a keypoint moved out of the output is marked not
/// visible.
#[test]
fn keypoints_follow_their_pixel() {
    let mut rng = TestRng(0x4B_50);
    let mut inside = 0;
    let mut outside = 0;
    for case in 0..300u64 {
        let (w, h) = (30 + rng.below(100) as u32, 30 + rng.below(100) as u32);
        let out = (20 + rng.below(40) as u32, 20 + rng.below(40) as u32);
        let aug = random_geometry(&mut rng, out);
        let plan = aug.plan(5, 0, case, w, h);
        // A block of class 1 around the keypoint, wide enough for nearest sampling to keep
        // it at the largest downscale the geometry can take (the whole image, letterbox).
        let r = 2 + (w / out.0).max(h / out.1);
        let (kx, ky) = (
            r + rng.below(u64::from(w.saturating_sub(2 * r)).max(1)) as u32,
            r + rng.below(u64::from(h.saturating_sub(2 * r)).max(1)) as u32,
        );
        let mask = LabelPlane {
            width: w,
            height: h,
            data: (0..h)
                .flat_map(|y| {
                    (0..w).map(move |x| u16::from(x.abs_diff(kx) <= r && y.abs_diff(ky) <= r))
                })
                .collect(),
        };
        let mut labels = vec![0u16; out.0 as usize * out.1 as usize];
        execute_mask(&plan, &mask, &mut labels);
        let k = PointMap::new(&plan).keypoint(&Keypoint {
            x: kx as f32 + 0.5,
            y: ky as f32 + 0.5,
            visibility: 2,
            object: 0,
        });
        let (ow, oh) = (out.0 as usize, out.1 as usize);
        if k.visibility == 0 {
            // Outside the output, or where the output shows the fill (outside the crop).
            let (x, y) = (k.x.floor(), k.y.floor());
            if (0.0..out.0 as f32).contains(&k.x) && (0.0..out.1 as f32).contains(&k.y) {
                let fill_near = (x as usize).saturating_sub(1)..=(x as usize + 1).min(ow - 1);
                let filled = fill_near.clone().any(|xx| {
                    ((y as usize).saturating_sub(1)..=(y as usize + 1).min(oh - 1))
                        .any(|yy| labels[yy * ow + xx] == 9)
                });
                assert!(
                    filled,
                    "case {case}: invisible at {:?}, no fill near: {plan:?}",
                    (k.x, k.y)
                );
            }
            outside += 1;
            continue;
        }
        let (px, py) = (k.x.floor() as usize, k.y.floor() as usize);
        // Within a pixel of a labelled pixel (the block shrinks by rounding at most that).
        let near = (px.saturating_sub(1)..=(px + 1).min(ow - 1)).any(|x| {
            (py.saturating_sub(1)..=(py + 1).min(oh - 1)).any(|y| labels[y * ow + x] == 1)
        });
        assert!(
            near,
            "case {case}: keypoint at {:?} is not on its pixel: {plan:?}",
            (k.x, k.y)
        );
        inside += 1;
    }
    assert!(
        inside > 150 && outside > 0,
        "{inside} inside, {outside} outside"
    );
}

/// Random JPEGs named `names` in `dir`, drawn from a generator seeded with `seed`.
fn write_jpegs(dir: &Path, names: &[&str], seed: u64) {
    let mut rng = TestRng(seed);
    for n in names {
        let (w, h) = (48 + rng.below(40) as u32, 40 + rng.below(40) as u32);
        let jpeg = common::random_jpeg(&mut rng, w, h, turbojpeg::Subsamp::Sub2x2);
        common::write(dir, n, &jpeg);
    }
}

/// JSON Lines and CSV manifests give the same samples and targets; what a record gets
/// wrong is reported with its line, and the rest is read.
#[test]
fn manifests_read_targets_and_report_bad_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_jpegs(dir.path(), &["a.jpg", "b.jpg", "sub/c.jpg", "d.jpg"], 17);
    std::fs::write(
        dir.path().join("m.jsonl"),
        concat!(
            r#"{"path": "a.jpg", "label": 2, "labels": [1, 4], "values": [0.5, -2], "group": "g1"}"#,
            "\n",
            r#"{"path": "b.jpg", "boxes": [[1, 2, 30, 20, 7], [5, 5, 9, 9]], "keypoints": [[3, 4], [10, 11, 1]]}"#,
            "\n\n",
            r#"{"path": "sub/c.jpg", "boxes": [[1, 2, 3, 4]], "box_classes": [5]}"#,
            "\n",
            r#"{"path": "d.jpg", "boxes": [[30, 2, 10, 4]]}"#,
            "\n",
        ),
    )
    .expect("write");
    std::fs::write(
        dir.path().join("m.csv"),
        "path,label,labels,values,boxes,keypoints,box_classes,group\n\
         a.jpg,2,1 4,0.5 -2,,,,g1\n\
         b.jpg,,,,1 2 30 20 7; 5 5 9 9,3 4; 10 11 1,,\n\
         sub/c.jpg,,,,1 2 3 4,,5,\n\
         \"d.jpg\",,,,30 2 10 4,,,\n",
    )
    .expect("write");
    let mut read = Vec::new();
    for m in ["m.jsonl", "m.csv"] {
        let d = Dataset::from_manifest(dir.path().join(m)).expect(m);
        let s = d.samples();
        assert_eq!(s.len(), 4, "{m}");
        let a = s.iter().find(|s| s.path == "a.jpg").expect("a");
        assert_eq!(a.label, Some(2));
        assert_eq!(a.group.as_deref(), Some("g1"));
        let t = a.targets.as_deref().expect("targets");
        assert_eq!(
            (t.classes.as_slice(), t.values.as_slice()),
            (&[1, 4][..], &[0.5, -2.0][..])
        );
        let b = s.iter().find(|s| s.path == "b.jpg").expect("b");
        let t = b.targets.as_deref().expect("targets");
        assert_eq!(t.boxes.len(), 2);
        assert_eq!(
            (t.boxes[0].x1, t.boxes[0].class, t.boxes[1].class),
            (30.0, 7, 0)
        );
        assert_eq!(t.keypoints[0].visibility, 2);
        assert_eq!((t.keypoints[1].x, t.keypoints[1].visibility), (10.0, 1));
        let c = s.iter().find(|s| s.path == "sub/c.jpg").expect("c");
        assert_eq!(c.targets.as_deref().expect("c").boxes[0].class, 5);
        let d_ = s.iter().find(|s| s.path == "d.jpg").expect("d");
        assert!(
            matches!(
                &d_.location,
                stoker::source::Location::Refused { kind: SampleErrorKind::Label, reason }
                    if reason.contains("x1 < x0") && reason.contains(m)
            ),
            "{:?}",
            d_.location
        );
        read.push(s.to_vec());
    }
    assert_eq!(
        read[0]
            .iter()
            .map(|s| (&s.path, &s.targets))
            .collect::<Vec<_>>(),
        read[1]
            .iter()
            .map(|s| (&s.path, &s.targets))
            .collect::<Vec<_>>(),
        "JSON Lines and CSV read alike"
    );
    // A record without a path, or a line that is not JSON, is an error naming the line.
    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"path\": \"a.jpg\"}\n{\"label\": 1}\n",
    )
    .expect("w");
    let e = Dataset::from_manifest(dir.path().join("bad.jsonl")).expect_err("no path");
    assert!(e.to_string().contains("bad.jsonl:2"), "{e}");
    std::fs::write(dir.path().join("bad2.jsonl"), "{\"path\": \"a.jpg\"\n").expect("w");
    let e = Dataset::from_manifest(dir.path().join("bad2.jsonl")).expect_err("not JSON");
    assert!(e.to_string().contains("bad2.jsonl:1"), "{e}");
    // Too many boxes for one sample is refused, not allocated.
    let many: Vec<String> = (0..5000).map(|i| format!("[0, 0, {i}, 1]")).collect();
    std::fs::write(
        dir.path().join("many.jsonl"),
        format!(
            "{{\"path\": \"a.jpg\", \"boxes\": [{}]}}\n",
            many.join(", ")
        ),
    )
    .expect("w");
    let d = Dataset::from_manifest(dir.path().join("many.jsonl")).expect("many");
    assert!(
        matches!(&d.samples()[0].location, stoker::source::Location::Refused { reason, .. } if reason.contains("4096"))
    );
}

#[test]
fn coco_files_give_xyxy_boxes_keypoints_and_category_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_jpegs(dir.path(), &["img/1.jpg", "img/2.jpg", "img/3.jpg"], 23);
    let coco = serde_json::json!({
        "images": [
            {"id": 10, "file_name": "1.jpg", "width": 50, "height": 40},
            {"id": 11, "file_name": "2.jpg", "width": 50, "height": 40},
            {"id": 12, "file_name": "3.jpg", "width": 50, "height": 40},
        ],
        "annotations": [
            {"id": 1, "image_id": 10, "category_id": 18, "bbox": [4, 5, 20, 10],
             "keypoints": [6, 7, 2, 0, 0, 0]},
            {"id": 2, "image_id": 10, "category_id": 1, "bbox": [0, 0, 5, 5], "iscrowd": 1},
            {"id": 3, "image_id": 10, "category_id": 1, "bbox": [1, 1, 2, 3]},
            {"id": 4, "image_id": 12, "category_id": 1, "bbox": [1, 1, -2, 3]},
        ],
        "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}],
    });
    let ann = dir.path().join("ann.json");
    std::fs::write(&ann, coco.to_string()).expect("write");
    let d = Dataset::coco(&ann, dir.path().join("img")).expect("coco");
    assert_eq!(d.classes()[1], "person");
    assert_eq!(d.classes()[18], "dog");
    let s = d.samples();
    let one = s.iter().find(|s| s.path == "1.jpg").expect("1");
    let t = one.targets.as_deref().expect("targets");
    assert_eq!(t.boxes.len(), 2, "the crowd box is left out");
    assert_eq!(
        (
            t.boxes[0].x0,
            t.boxes[0].y0,
            t.boxes[0].x1,
            t.boxes[0].y1,
            t.boxes[0].class
        ),
        (4.0, 5.0, 24.0, 15.0, 18)
    );
    assert_eq!(t.keypoints.len(), 2);
    assert_eq!(
        (
            t.keypoints[0].x,
            t.keypoints[0].visibility,
            t.keypoints[1].visibility
        ),
        (6.0, 2, 0)
    );
    let two = s.iter().find(|s| s.path == "2.jpg").expect("2");
    assert!(
        two.targets.as_deref().expect("empty").boxes.is_empty(),
        "no annotations: no boxes"
    );
    let three = s.iter().find(|s| s.path == "3.jpg").expect("3");
    assert!(
        matches!(&three.location, stoker::source::Location::Refused { reason, .. } if reason.contains("negative"))
    );
}

/// Batches carry each slot's moved targets: the same on the CPU and device backends, for
/// any worker count and batch size, equal to the geometry of the slot's plan, and as
/// padded arrays with counts; a refused record is reported with its path every epoch.
#[test]
fn batches_carry_moved_targets_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let names: Vec<String> = (0..9).map(|i| format!("im{i}.jpg")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    write_jpegs(dir.path(), &refs, 99);
    let mut lines = String::new();
    for (i, n) in names.iter().enumerate() {
        let boxes: Vec<String> = (0..i % 4)
            .map(|k| format!("[{}, {}, {}, {}, {k}]", 2 + k, 3, 20 + 5 * k, 30))
            .collect();
        lines += &format!(
            "{{\"path\": \"{n}\", \"label\": {}, \"boxes\": [{}], \"keypoints\": [[10, 12]]}}\n",
            i % 3,
            boxes.join(", ")
        );
    }
    lines += "{\"path\": \"im0.jpg\", \"boxes\": \"wrong\"}\n"
        .replace("im0", "missing")
        .as_str();
    std::fs::write(dir.path().join("train.jsonl"), lines).expect("write");
    let subset = Dataset::from_manifest(dir.path().join("train.jsonl"))
        .expect("manifest")
        .all();
    let aug = Augment::new()
        .random_resized_crop(32, (0.3, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .random_affine(Affine::new().degrees(-20.0, 20.0).scale(0.9, 1.1))
        .dtype(DType::U8);
    let run = |backend: BackendKind, workers: usize, batch: usize, epoch: u64| {
        let pipe = Pipeline::builder(subset.clone())
            .backend(backend)
            .augment(aug.clone())
            .batch_size(batch)
            .workers(workers)
            .seed(4)
            .on_error(OnError::Skip)
            .build()
            .expect("pipeline");
        let mut got = Vec::new();
        let errors = common::walk_epoch(&pipe, epoch, |b| {
            let padded = b.padded_boxes();
            assert_eq!(padded.counts.len(), b.len());
            for (slot, (t, plan)) in b.targets().iter().zip(b.plans()).enumerate() {
                let t = t.as_ref().expect("every sample has targets");
                let src = subset
                    .samples()
                    .iter()
                    .find(|s| s.id == b.ids()[slot])
                    .expect("sample");
                let want = transform(
                    plan,
                    src.targets.as_deref().expect("src"),
                    &BoxRule::default(),
                );
                assert_eq!(t, &want);
                assert_eq!(padded.counts[slot] as usize, t.boxes.len());
                for (k, bx) in t.boxes.iter().enumerate() {
                    let at = slot * padded.max + k;
                    assert_eq!(
                        &padded.boxes[at * 4..at * 4 + 4],
                        &[bx.x0, bx.y0, bx.x1, bx.y1]
                    );
                    assert_eq!(padded.classes[at], i64::from(bx.class));
                    assert!(bx.x0 >= 0.0 && bx.x1 <= 32.0 && bx.x0 < bx.x1);
                }
                assert!(
                    padded.classes[slot * padded.max + t.boxes.len()..(slot + 1) * padded.max]
                        .iter()
                        .all(|&c| c == -1)
                );
                got.push((b.ids()[slot], t.clone()));
            }
        });
        let errors: Vec<(String, String)> =
            errors.into_iter().map(|e| (e.path, e.reason)).collect();
        got.sort_by_key(|g| g.0);
        (got, errors)
    };
    let (cpu, errors) = run(BackendKind::Cpu, 2, 4, 1);
    assert_eq!(cpu.len(), 9);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].0 == "missing.jpg" && errors[0].1.contains("boxes"),
        "{errors:?}"
    );
    assert_eq!(
        run(BackendKind::Cpu, 1, 3, 1).0,
        cpu,
        "workers and batch size"
    );
    assert_ne!(
        run(BackendKind::Cpu, 2, 4, 2).0,
        cpu,
        "the next epoch moves the boxes anew"
    );
    for backend in common::backends()
        .into_iter()
        .filter(|b| *b != BackendKind::Cpu)
    {
        assert_eq!(
            run(backend, 2, 4, 1),
            (cpu.clone(), errors.clone()),
            "{backend}"
        );
    }
}

/// A WebDataset shard's `json` members carry targets with a JSON Lines manifest's keys:
/// the shard gives the targets the manifest gives, keeps them in its index (a second
/// listing reads them back from it), and delivers them moved with each sample; a member
/// that cannot give targets is reported with its sample and why, every epoch.
#[test]
fn webdataset_json_members_carry_the_manifests_targets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records = [
        (
            "a.jpg",
            r#"{"labels": [1, 4], "values": [0.5, -2], "caption": "other keys are ignored"}"#,
        ),
        (
            "b.jpg",
            r#"{"boxes": [[1, 2, 30, 20, 7], [5, 5, 9, 9]], "keypoints": [[3, 4], [10, 11, 1]]}"#,
        ),
        ("c.jpg", r#"{"boxes": [[1, 2, 3, 4]], "box_classes": [5]}"#),
        ("d.jpg", r#"{"boxes": [[30, 2, 10, 4]]}"#),
        ("e.jpg", r#"{"boxes": [[1, 2, 3"#),
        ("f.jpg", r#"{"url": "https://example.com/f.jpg"}"#),
        ("g.jpg", r#"[1, 2, 3]"#),
    ];
    let names: Vec<&str> = records.iter().map(|r| r.0).collect();
    write_jpegs(dir.path(), &names, 2024);
    // The shard: key.jpg, key.cls, key.json, key.path.txt per sample.
    let shard = dir.path().join("train-000000.tar");
    let mut tar = tar::Builder::new(Vec::new());
    let mut add = |name: String, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, name, data).expect("member");
    };
    let mut manifest = String::new();
    for (i, (path, json)) in records.iter().enumerate() {
        let key = format!("{i:06}");
        add(
            format!("{key}.jpg"),
            &std::fs::read(dir.path().join(path)).expect("jpeg"),
        );
        add(format!("{key}.cls"), format!("{}", i % 3).as_bytes());
        add(format!("{key}.json"), json.as_bytes());
        add(format!("{key}.path.txt"), path.as_bytes());
        // The manifest holds the records that are JSON objects.
        if let Ok(serde_json::Value::Object(mut m)) = serde_json::from_str(json) {
            m.insert("path".into(), (*path).into());
            m.insert("label".into(), (i % 3).into());
            manifest += &serde_json::Value::Object(m).to_string();
            manifest.push('\n');
        }
    }
    std::fs::write(&shard, tar.into_inner().expect("tar")).expect("shard");
    std::fs::write(dir.path().join("m.jsonl"), manifest).expect("manifest");
    let from_manifest = Dataset::from_manifest(dir.path().join("m.jsonl")).expect("manifest");
    let listed = Dataset::tar(std::slice::from_ref(&shard)).expect("shard");
    let again = Dataset::tar(std::slice::from_ref(&shard)).expect("shard, from its index");
    assert_eq!(
        listed.samples(),
        again.samples(),
        "the index keeps the targets"
    );
    let by_path = |d: &Dataset, p: &str| {
        d.samples()
            .iter()
            .find(|s| s.path.ends_with(p))
            .unwrap_or_else(|| panic!("{p}"))
            .clone()
    };
    for p in ["a.jpg", "b.jpg", "c.jpg", "f.jpg"] {
        let (s, m) = (by_path(&listed, p), by_path(&from_manifest, p));
        assert_eq!(s.targets, m.targets, "{p}");
        assert_eq!(s.label, m.label, "{p}");
        assert!(
            !matches!(s.location, stoker::source::Location::Refused { .. }),
            "{p}"
        );
    }
    assert!(by_path(&listed, "a.jpg").targets.is_some());
    assert!(
        by_path(&listed, "f.jpg").targets.is_none(),
        "no targets' keys"
    );
    for (p, says) in [
        ("d.jpg", "x1 < x0"),
        ("e.jpg", "not JSON"),
        ("g.jpg", "not a JSON object"),
    ] {
        let s = by_path(&listed, p);
        assert!(
            matches!(
                &s.location,
                stoker::source::Location::Refused { kind: SampleErrorKind::Label, reason }
                    if reason.contains(says) && reason.contains(".json")
            ),
            "{p}: {:?}",
            s.location
        );
    }
    // Delivered with their targets moved by each plan; the refused reported every epoch.
    let aug = Augment::new()
        .random_resized_crop(32, (0.5, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .dtype(DType::U8);
    let subset = listed.all();
    let pipe = Pipeline::builder(subset.clone())
        .augment(aug)
        .batch_size(3)
        .seed(8)
        .on_error(OnError::Skip)
        .build()
        .expect("pipeline");
    for epoch in 0..2 {
        let (mut delivered, mut errors) = (0, Vec::new());
        for b in pipe.epoch(epoch).expect("epoch") {
            let b = b.expect("batch");
            for (slot, (t, plan)) in b.targets().iter().zip(b.plans()).enumerate() {
                let src = subset
                    .samples()
                    .iter()
                    .find(|s| s.id == b.ids()[slot])
                    .expect("sample");
                let want = src
                    .targets
                    .as_deref()
                    .map(|t| transform(plan, t, &BoxRule::default()));
                assert_eq!(t, &want, "{}", src.path);
                delivered += 1;
            }
            errors.extend(b.errors().iter().map(|e| e.path.clone()));
        }
        errors.sort();
        assert_eq!(delivered, 4, "epoch {epoch}");
        assert_eq!(errors.len(), 3, "epoch {epoch}: {errors:?}");
        for (e, p) in errors.iter().zip(["d.jpg", "e.jpg", "g.jpg"]) {
            assert!(e.ends_with(p), "{e}");
        }
    }
}

/// What targets.json says one sample gives: its targets, or a reason it is refused.
fn check_fixture_sample(format: &str, s: &stoker::source::Sample, want: &serde_json::Value) {
    let at = format!("{format}: {}", s.path);
    let key = want["key"].as_str().expect("key");
    assert!(s.path.ends_with(key), "{at}: expected {key}");
    if let Some(says) = want["refused"].as_str() {
        assert!(
            matches!(
                &s.location,
                stoker::source::Location::Refused { kind: SampleErrorKind::Label, reason }
                    if reason.contains(says)
            ),
            "{at}: {:?}",
            s.location
        );
        assert!(s.targets.is_none(), "{at}");
        return;
    }
    assert!(
        !matches!(s.location, stoker::source::Location::Refused { .. }),
        "{at}: {:?}",
        s.location
    );
    assert_eq!(s.label.map(i64::from), want["label"].as_i64(), "{at}");
    let t = &want["targets"];
    if t.is_null() {
        assert!(s.targets.is_none(), "{at}: {:?}", s.targets);
        return;
    }
    let got = s
        .targets
        .as_deref()
        .unwrap_or_else(|| panic!("{at}: no targets"));
    let f = |v: &serde_json::Value| v.as_f64().expect("number") as f32;
    let u = |v: &serde_json::Value| v.as_u64().expect("integer") as u32;
    let list = |k: &str| t[k].as_array().expect("list").clone();
    let classes: Vec<u32> = list("classes").iter().map(u).collect();
    let values: Vec<f32> = list("values").iter().map(f).collect();
    let boxes: Vec<BoundingBox> = list("boxes")
        .iter()
        .map(|b| BoundingBox {
            x0: f(&b[0]),
            y0: f(&b[1]),
            x1: f(&b[2]),
            y1: f(&b[3]),
            class: u(&b[4]),
        })
        .collect();
    let keypoints: Vec<Keypoint> = list("keypoints")
        .iter()
        .map(|k| Keypoint {
            x: f(&k[0]),
            y: f(&k[1]),
            visibility: u(&k[2]) as u8,
            object: u(&k[3]),
        })
        .collect();
    assert_eq!(got.classes, classes, "{at}");
    assert_eq!(got.values, values, "{at}");
    assert_eq!(got.boxes, boxes, "{at}");
    assert_eq!(got.keypoints, keypoints, "{at}");
}

/// Targets in shards written by the tools users write them with: a TFRecord of the
/// TensorFlow Object Detection API's features (normalised boxes and keypoints, their class
/// ids and visibilities) written by TensorFlow, a WebDataset tar with `json` members
/// written by webdataset, and a Parquet file with list columns written by pyarrow
/// (tests/data/shards/targets, scripts/make_shard_fixtures.py --targets). Each sample gives
/// exactly the targets in pixels that targets.json lists, or is reported with why: a box
/// with its right edge left of its left edge, several ids in the label feature.
#[test]
fn shards_written_by_tensorflow_webdataset_and_pyarrow_carry_their_targets() {
    let root = common::data_dir().join("shards").join("targets");
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("targets.json")).expect("targets.json"))
            .expect("json");
    // The shard readers write their index beside the shard: read copies.
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = |name: &str| {
        let to = dir.path().join(name);
        std::fs::copy(root.join(name), &to).expect("copy");
        to
    };
    let keys = stoker::source::shards::ExampleKeys {
        path: "image/filename".into(),
        ..Default::default()
    };
    let tfrecord = copy("objects.tfrecord");
    let tar = copy("objects.tar");
    let mut formats = vec![
        (
            "tfrecord",
            Dataset::tfrecord_with_keys(std::slice::from_ref(&tfrecord), &keys).expect("tfrecord"),
        ),
        (
            "tar",
            Dataset::tar(std::slice::from_ref(&tar)).expect("tar"),
        ),
    ];
    #[cfg(feature = "parquet")]
    formats.push((
        "parquet",
        Dataset::parquet(&[copy("objects.parquet")]).expect("parquet"),
    ));
    // And again from the indexes the first listings wrote.
    formats.push((
        "tfrecord",
        Dataset::tfrecord_with_keys(&[tfrecord], &keys).expect("tfrecord, indexed"),
    ));
    formats.push(("tar", Dataset::tar(&[tar]).expect("tar, indexed")));
    for (format, data) in &formats {
        let want = expected[*format].as_array().expect("samples");
        assert_eq!(data.len(), want.len(), "{format}");
        // The listing's order is the dataset's (by path), not the file's.
        for w in want {
            let key = w["key"].as_str().expect("key");
            let s = data
                .samples()
                .iter()
                .find(|s| s.path.ends_with(key))
                .unwrap_or_else(|| panic!("{format}: no sample {key}"));
            check_fixture_sample(format, s, w);
        }
    }
}

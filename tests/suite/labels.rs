//! Label planes: nearest only, aligned with the image, never colour-jittered, and never
//! holding a class their input lacked.

use crate::common;

use std::collections::BTreeSet;

use proptest::prelude::*;
use stoker::augment::reference::execute_mask;
use stoker::decode::{cpu::decode_mask, DecodeOptions, LabelPlane};
use stoker::{Augment, Dataset, Layout, Pipeline};

const PALETTE: [[u8; 3]; 4] = [[0, 0, 0], [250, 20, 20], [20, 250, 20], [20, 20, 250]];

/// An asymmetric scene of big blocks: the class of a pixel is a function of its colour.
fn scene(w: u32, h: u32, variant: u32) -> (Vec<u8>, Vec<u16>) {
    let mut rgb = Vec::new();
    let mut ids = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let c = if x < w / 3 {
                1
            } else if y < h / 4 + variant * 3 {
                2
            } else if x > (w * 3) / 4 && y > h / 2 {
                3
            } else {
                0
            };
            ids.push(c as u16);
            rgb.extend_from_slice(&PALETTE[c]);
        }
    }
    (rgb, ids)
}

fn seg_dataset(dir: &std::path::Path, n: u32) -> Dataset {
    for i in 0..n {
        let (w, h) = (90 + 7 * i, 70 + 5 * i);
        let (rgb, ids) = scene(w, h, i);
        common::write(
            dir,
            &format!("images/s{i:02}.png"),
            &common::png_rgb(w, h, &rgb),
        );
        common::write(
            dir,
            &format!("masks/s{i:02}.png"),
            &common::png_labels(w, h, &ids, i % 2 == 0),
        );
    }
    Dataset::flat(dir.join("images"))
        .and_then(|d| d.with_masks(dir.join("masks")))
        .expect("dataset with masks")
}

fn classify(p: &[u8]) -> u16 {
    (0..4)
        .min_by_key(|&c| {
            PALETTE[c]
                .iter()
                .zip(p)
                .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
                .sum::<i32>()
        })
        .unwrap_or(0) as u16
}

#[test]
fn masks_follow_the_image_geometry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = seg_dataset(dir.path(), 8);
    let size = 48usize;
    let pipe = Pipeline::builder(data.all())
        .augment(
            Augment::new()
                .random_resized_crop(size as u32, (0.2, 1.0), (0.6, 1.6))
                .flip_horizontal(0.5)
                .flip_vertical(0.5)
                .layout(Layout::Nhwc),
        )
        .batch_size(4)
        .seed(17)
        .build()
        .expect("pipeline");
    let mut flipped_seen = 0;
    for epoch in 0..4 {
        for b in pipe.epoch(epoch).expect("epoch") {
            let b = b.expect("batch");
            let masks = b.masks().expect("masks");
            let imgs = b.images::<u8>().expect("u8");
            for k in 0..b.len() {
                let m = &masks[k * size * size..(k + 1) * size * size];
                let im = &imgs[k * size * size * 3..(k + 1) * size * size * 3];
                let agree = (0..size * size)
                    .filter(|&i| classify(&im[i * 3..i * 3 + 3]) == m[i])
                    .count();
                let frac = agree as f64 / (size * size) as f64;
                assert!(
                    frac > 0.95,
                    "image and mask disagree on {:.1} % of pixels",
                    100.0 * (1.0 - frac)
                );
                // Sensitivity: the mask mirrored is visibly wrong whenever the content is not symmetric.
                let mirrored = (0..size * size)
                    .filter(|&i| {
                        let (y, x) = (i / size, i % size);
                        classify(&im[i * 3..i * 3 + 3]) == m[y * size + (size - 1 - x)]
                    })
                    .count();
                if mirrored < agree * 9 / 10 {
                    flipped_seen += 1;
                }
            }
        }
    }
    assert!(
        flipped_seen > 10,
        "alignment check was not sensitive to a flipped mask"
    );
}

#[test]
fn jitter_never_touches_masks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = seg_dataset(dir.path(), 6);
    let run = |jitter: bool| {
        let mut aug = Augment::new()
            .random_resized_crop(32, (0.3, 1.0), (0.75, 1.33))
            .flip_horizontal(0.5);
        if jitter {
            aug = aug.color_jitter(0.9, 0.9, 0.9).hue(0.4);
        }
        let pipe = Pipeline::builder(data.clone().all())
            .augment(aug)
            .batch_size(6)
            .seed(2)
            .build()
            .expect("pipeline");
        let b = common::first_batch(&pipe);
        (
            b.masks().expect("masks").to_vec(),
            b.images::<u8>().expect("u8").to_vec(),
        )
    };
    let (m0, i0) = run(false);
    let (m1, i1) = run(true);
    assert_eq!(m0, m1, "colour jitter changed a mask");
    assert_ne!(i0, i1, "jitter did nothing to the images");
}

fn arb_plane() -> impl Strategy<Value = LabelPlane> {
    (
        1u32..40,
        1u32..40,
        prop::collection::vec(any::<u16>(), 1..6),
    )
        .prop_flat_map(|(w, h, classes)| {
            prop::collection::vec(prop::sample::select(classes), (w * h) as usize).prop_map(
                move |data| LabelPlane {
                    width: w,
                    height: h,
                    data,
                },
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn output_masks_hold_only_input_classes(
        plane in arb_plane(), id in any::<u64>(), epoch in 0u64..50,
        ow in 1u32..64, oh in 1u32..64, lo in 0.01f64..1.0,
        fh in 0.0f64..=1.0, fv in 0.0f64..=1.0, mode in 0u8..3,
    ) {
        let aug = match mode {
            0 => Augment::new().random_resized_crop(ow, (lo, 1.0), (0.5, 2.0)),
            1 => Augment::new().resize_center_crop(ow + 3, ow),
            _ => Augment::new().resize(ow, oh),
        }
        .flip_horizontal(fh)
        .flip_vertical(fv)
        .color_jitter(0.5, 0.5, 0.5);
        let plan = aug.plan(11, epoch, id, plane.width, plane.height);
        let mut out = vec![0u16; (plan.out_width * plan.out_height) as usize];
        execute_mask(&plan, &plane, &mut out);
        let input: BTreeSet<u16> = plane.data.iter().copied().collect();
        for v in &out {
            prop_assert!(input.contains(v), "class {} not in input {:?}", v, input);
        }
    }
}

#[test]
fn sixteen_bit_palette_and_low_depth_masks_decode_to_exact_ids() {
    let opts = DecodeOptions::default();
    let ids: Vec<u16> = (0..64u16).map(|i| i * 1000 + 7).collect();
    let mut plane = LabelPlane::default();
    decode_mask(&common::png_labels(8, 8, &ids, true), &opts, &mut plane).expect("16-bit");
    assert_eq!(plane.data, ids);

    // A palette PNG: the indices are the classes, not the palette colours.
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, 4, 2);
        enc.set_color(png::ColorType::Indexed);
        enc.set_depth(png::BitDepth::Four);
        enc.set_palette(vec![0u8; 16 * 3]);
        let mut w = enc.write_header().expect("header");
        w.write_image_data(&[0x01, 0x23, 0x45, 0x6F]).expect("data");
    }
    decode_mask(&bytes, &opts, &mut plane).expect("palette");
    assert_eq!(plane.data, vec![0, 1, 2, 3, 4, 5, 6, 15]);

    // RGB and JPEG masks are refused: they cannot hold exact class ids.
    let rgb = common::png_rgb(2, 2, &[0; 12]);
    assert!(decode_mask(&rgb, &opts, &mut plane).is_err());
    let jpeg = std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("jpeg");
    assert!(decode_mask(&jpeg, &opts, &mut plane).is_err());
}

#[test]
fn bundled_nuclei_labels_keep_their_instances() {
    let bytes = std::fs::read(common::data_dir().join("masks/labels/nuclei.png")).expect("labels");
    let mut plane = LabelPlane::default();
    decode_mask(&bytes, &DecodeOptions::default(), &mut plane).expect("decode");
    let classes: BTreeSet<u16> = plane.data.iter().copied().collect();
    assert_eq!((plane.width, plane.height), (512, 512));
    assert_eq!(classes.len(), 126, "background and 125 nuclei");
}

//! Crop-aware decode (only the rows and iMCU columns the resize reads, at the plan's
//! reduced IDCT scale) against a whole decode followed by the same reference ops.
//!
//! Tolerances: with scale 1 the result is bit-exact (the window holds every pixel the
//! resize reads, decoded exactly as in a whole decode). With scale 2, 4 or 8 the scaled
//! IDCT replaces part of the antialiasing filter's averaging: mean absolute error at most
//! 2.0 and no pixel more than 64 levels off (sharp edges) on 224 x 224 outputs. Measured
//! on the bundled and corpus photos (400 plans; the test prints its worst case): worst
//! mean 1.39, worst pixel 42.

use crate::common;

use stoker::augment::reference::{execute_image, Scratch};
use stoker::decode::{cpu, peek_info, DecodeOptions, Image8};
use stoker::{Augment, DType, Layout};

fn images() -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for class in ["photo", "science"] {
        let dir = common::data_dir().join("samples").join(class);
        for e in std::fs::read_dir(dir).expect("samples").flatten() {
            v.push(e.path());
        }
    }
    if let Some(c) = common::corpus_dir() {
        for f in [
            "lxqt_Butterfly-Kenneth-Wimer.jpg",
            "mate_FreshFlower.jpg",
            "plasma_Kite.jpg",
        ] {
            v.push(c.join("photos").join(f));
        }
        v.push(c.join("jpeg/exif_portrait_6.jpg"));
    }
    v.sort();
    v
}

#[test]
fn crop_aware_decode_matches_whole_decode_then_reference() {
    let aug = Augment::new()
        .random_resized_crop(224, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
        .flip_horizontal(0.5)
        .layout(Layout::Nhwc)
        .dtype(DType::U8);
    let (mut whole, mut part) = (Image8::default(), Image8::default());
    let mut scratch = Scratch::default();
    let (mut exact, mut scaled, mut worst_mae, mut worst_max) = (0, 0, 0f64, 0u8);
    let mut decoded_fraction = Vec::new();
    for path in images() {
        let bytes = std::fs::read(&path).expect("image");
        let info = peek_info(&bytes).expect("header");
        cpu::decode_image(&bytes, &DecodeOptions::default(), &mut whole).expect("whole");
        for id in 0..40u64 {
            let plan = aug.plan(1, 0, id, whole.width, whole.height);
            let opts = plan.decode_options(DecodeOptions::default(), &info);
            cpu::decode_image(&bytes, &opts, &mut part).expect("crop-aware");
            let mut a = vec![0u8; plan.image_bytes()];
            let mut b = vec![0u8; plan.image_bytes()];
            execute_image(&plan, &part, &mut a, &mut scratch);
            execute_image(&plan, &whole, &mut b, &mut scratch);
            decoded_fraction.push(
                part.data.len() as f64 * f64::from(part.scale * part.scale)
                    / whole.data.len() as f64,
            );
            if plan.decode_scale == 1 {
                let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
                assert_eq!(
                    differ,
                    0,
                    "{}: plan {id} (scale 1): {differ} bytes differ from the whole decode",
                    path.display()
                );
                exact += 1;
            } else {
                let mae = a
                    .iter()
                    .zip(&b)
                    .map(|(x, y)| f64::from(x.abs_diff(*y)))
                    .sum::<f64>()
                    / a.len() as f64;
                let max = common::max_diff(&a, &b);
                assert!(
                    mae <= 2.0 && max <= 64,
                    "{}: plan {id} at 1/{}: mae {mae:.3}, max {max}",
                    path.display(),
                    plan.decode_scale
                );
                worst_mae = worst_mae.max(mae);
                worst_max = worst_max.max(max);
                scaled += 1;
            }
        }
    }
    let mean = decoded_fraction.iter().sum::<f64>() / decoded_fraction.len() as f64;
    println!("{exact} exact, {scaled} scaled (worst mae {worst_mae:.3}, max {worst_max}); decoded {:.0} % of the pixels on average", 100.0 * mean);
    assert!(
        exact > 50 && scaled > 20,
        "{exact} exact, {scaled} scaled: the cases do not cover both paths"
    );
    assert!(
        mean < 0.8,
        "crop-aware decode decoded {:.0} % of the pixels",
        100.0 * mean
    );
}

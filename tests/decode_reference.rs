//! Decoded pixels against the reference PNGs bundled with the JPEG edge cases.
//!
//! Each file has a stated tolerance: mean absolute error and maximum per-channel error
//! against its reference. References made by libjpeg-turbo's `djpeg` are near-exact
//! matches (different IDCT and upsampling rounding); the Go test images' references are
//! the lossless source pictures, so they carry the JPEG's own compression error.
//! Features this build does not decode must say so with a typed `Unsupported` error.

mod common;

use stoker::decode::{cpu, peek_info, DecodeError, DecodeOptions, Image8};

/// (file stem, largest accepted mean abs error, largest accepted per-channel error).
/// Measured with zune-jpeg 0.5 (accurate integer IDCT, fancy upsampling) in strict mode.
const CASES: &[(&str, f64, u8)] = &[
    // References decoded by djpeg (libjpeg-turbo 2.1.5): rounding differences only.
    ("go_video-001_q50_411", 0.1, 3),
    ("go_video-001_q50_444", 0.1, 3),
    ("jd_moz_jpg-gray", 0.1, 2),
    ("jd_moz_jpg-progressive", 0.6, 3),
    ("jd_moz_jpg-size-1x1", 0.1, 1),
    ("jd_moz_jpg-size-33x33", 0.6, 3),
    ("jd_extraneous-data", 0.6, 3),
    ("ljt_testorig", 0.4, 5),
    ("pil_hopper_orientation_6", 0.4, 4),
    ("jd_rgb", 0.1, 2),
    ("jd_ycck", 0.1, 4),
    // Upstream references that are the lossless source picture (Go's image tests): the
    // JPEG's own compression error is part of the difference.
    ("go_video-001_221212", 1.2, 32),
    ("go_video-001_cmyk", 0.4, 3),
    ("go_video-001_progressive_truncated", 0.4, 5),
];

fn load(stem: &str) -> (Image8, Image8) {
    let dir = common::data_dir().join("jpeg");
    let opts = DecodeOptions {
        strict: false,
        ..DecodeOptions::default()
    };
    let mut ours = Image8::default();
    let jpeg = std::fs::read(dir.join(format!("{stem}.jpg"))).expect("jpeg");
    cpu::decode_image(&jpeg, &opts, &mut ours).expect("decodes");
    let mut reference = Image8::default();
    let png = std::fs::read(dir.join(format!("{stem}.png"))).expect("png");
    cpu::decode_image(&png, &opts, &mut reference).expect("reference png");
    (ours, reference)
}

fn errors(a: &Image8, b: &Image8) -> (f64, u8) {
    let mut sum = 0u64;
    let mut max = 0u8;
    for (x, y) in a.data.iter().zip(&b.data) {
        let d = x.abs_diff(*y);
        sum += u64::from(d);
        max = max.max(d);
    }
    (sum as f64 / a.data.len().max(1) as f64, max)
}

#[test]
fn corpus_jpegs_match_their_references_within_tolerance() {
    let mut failures = Vec::new();
    for &(stem, max_mae, max_err) in CASES {
        let (ours, reference) = load(stem);
        assert_eq!(
            (ours.width, ours.height),
            (reference.width, reference.height),
            "{stem}"
        );
        let (mae, max) = errors(&ours, &reference);
        println!("{stem}: mean abs error {mae:.3}, max {max}");
        if mae > max_mae || max > max_err {
            failures.push(format!(
                "{stem}: mae {mae:.3} (<= {max_mae}), max {max} (<= {max_err})"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn strict_mode_accepts_every_reference_case() {
    let dir = common::data_dir().join("jpeg");
    for &(stem, _, _) in CASES {
        let jpeg = std::fs::read(dir.join(format!("{stem}.jpg"))).expect("jpeg");
        let r = cpu::decode_image(&jpeg, &DecodeOptions::default(), &mut Image8::default());
        assert!(r.is_ok(), "{stem}: {r:?}");
    }
}

#[test]
fn unsupported_features_say_which() {
    let dir = common::data_dir().join("jpeg");
    for (file, feature) in [
        ("jd_ll_jpeg_lossless_sel1-8bit.jpg", "lossless"),
        ("ljt_testimgari.jpg", "arithmetic"),
        ("ljt_monkey12.jpg", "12-bit"),
    ] {
        let bytes = std::fs::read(dir.join(file)).expect("file");
        assert!(peek_info(&bytes).is_ok());
        match cpu::decode_image(&bytes, &DecodeOptions::default(), &mut Image8::default()) {
            Err(DecodeError::Unsupported(m)) => assert!(m.contains(feature), "{file}: {m}"),
            other => panic!("{file}: expected Unsupported({feature}), got {other:?}"),
        }
    }
}

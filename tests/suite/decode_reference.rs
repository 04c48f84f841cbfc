//! Decoded pixels against the reference PNGs bundled with the JPEG edge cases.
//!
//! Each file has a stated tolerance: mean absolute error and maximum per-channel error
//! against its reference. References made by libjpeg-turbo's `djpeg` are near-exact
//! matches (different IDCT and upsampling rounding); the Go test images' references are
//! the lossless source pictures, so they carry the JPEG's own compression error.
//! Features this build does not decode must say so with a typed `Unsupported` error.

use crate::common;

use stoker::decode::{cpu, peek_info, DecodeError, DecodeOptions, Image8};

/// (file stem, largest accepted mean abs error, largest accepted per-channel error).
/// Measured with libjpeg-turbo (accurate integer IDCT, fancy upsampling) in strict mode.
const CASES: &[(&str, f64, u8)] = &[
    // References decoded by djpeg (libjpeg-turbo 2.1.5): the same IDCT and upsampling, so
    // the decode is exact; one level of slack for other SIMD paths.
    ("go_video-001_q50_411", 0.01, 1),
    ("go_video-001_q50_444", 0.01, 1),
    ("jd_moz_jpg-gray", 0.01, 1),
    ("jd_moz_jpg-progressive", 0.01, 1),
    ("jd_moz_jpg-size-1x1", 0.01, 1),
    ("jd_moz_jpg-size-33x33", 0.01, 1),
    ("jd_extraneous-data", 0.01, 1),
    ("ljt_testorig", 0.01, 1),
    ("ljt_testimgari", 0.01, 1),
    ("pil_hopper_orientation_6", 0.01, 1),
    // References made by ImageMagick (another colour conversion).
    ("jd_rgb", 0.05, 2),
    ("jd_ycck", 0.1, 4),
    // Upstream references that are the lossless source picture (Go's image tests): the
    // JPEG's own compression error is part of the difference.
    ("go_video-001_221212", 1.2, 32),
    ("go_video-001_cmyk", 0.4, 3),
    ("go_video-001_progressive_truncated", 0.2, 5),
];

fn load(stem: &str) -> (Image8, Image8) {
    let dir = common::data_dir().join("jpeg");
    // The references are decodes without the EXIF rotation.
    let opts = DecodeOptions {
        strict: false,
        orientation: false,
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
        let opts = DecodeOptions {
            orientation: false,
            ..DecodeOptions::default()
        };
        let r = cpu::decode_image(&jpeg, &opts, &mut Image8::default());
        assert!(r.is_ok(), "{stem}: {r:?}");
    }
}

#[test]
fn unsupported_features_say_which() {
    let dir = common::data_dir().join("jpeg");
    for (file, feature) in [
        ("jd_ll_jpeg_lossless_sel2.jpg", "lossless"),
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

fn decode_oriented(path: &std::path::Path) -> Image8 {
    let bytes = std::fs::read(path).expect("file");
    let mut img = Image8::default();
    cpu::decode_image(&bytes, &DecodeOptions::default(), &mut img).expect("decodes");
    img
}

#[test]
fn exif_orientation_makes_every_variant_upright() {
    let Some(corpus) = common::corpus_or_skip() else {
        return;
    };
    // The same photo stored in each EXIF orientation: applied, all look alike (chroma
    // subsampling is rotated with the picture, so a few levels of difference remain).
    let path = |name: &str| corpus.join(format!("jpeg/exif_{name}.jpg"));
    for (reference, others) in [
        (
            "landscape_1",
            &[
                "landscape_0",
                "landscape_2",
                "landscape_3",
                "landscape_4",
                "landscape_5",
            ][..],
        ),
        ("portrait_6", &["portrait_7", "portrait_8"][..]),
    ] {
        let upright = decode_oriented(&path(reference));
        for name in others {
            let img = decode_oriented(&path(name));
            assert_eq!(
                (img.width, img.height),
                (upright.width, upright.height),
                "{name}"
            );
            let (mae, _) = errors(&img, &upright);
            assert!(
                mae < 6.0,
                "{name}: mean abs error {mae:.2} against {reference}"
            );
        }
    }
    // Sensitivity: the stored, unrotated pixels of a flipped variant are far from upright.
    let upright = decode_oriented(&path("landscape_1"));
    let bytes = std::fs::read(path("landscape_3")).expect("file");
    let mut raw = Image8::default();
    let opts = DecodeOptions {
        orientation: false,
        ..DecodeOptions::default()
    };
    cpu::decode_image(&bytes, &opts, &mut raw).expect("decodes");
    let (mae, _) = errors(&raw, &upright);
    assert!(
        mae > 20.0,
        "unrotated variant too close to upright ({mae:.2}): test not sensitive"
    );
    // Switched off, the stored pixels come back unrotated.
    let bytes = std::fs::read(corpus.join("jpeg/exif_portrait_6.jpg")).expect("file");
    let mut img = Image8::default();
    let opts = DecodeOptions {
        orientation: false,
        ..DecodeOptions::default()
    };
    let info = cpu::decode_image(&bytes, &opts, &mut img).expect("decodes");
    assert_eq!(info.orientation, 6);
    assert_eq!((img.width, img.height), (info.width, info.height));
}

/// How close a corpus reference PNG is expected to be, from its MANIFEST.tsv notes.
fn corpus_tolerance(notes: &str) -> Option<(f64, u8)> {
    let desc = notes.split("reference png: ").nth(1)?;
    if notes.contains("progressive stream cut") {
        // Incomplete progressive data: the block smoothing libjpeg applies to missing
        // coefficients differs between libjpeg-turbo versions (ours is mozjpeg's build).
        return Some((1.0, 12));
    }
    if desc.contains("generated with djpeg")
        || desc.contains("identical to djpeg")
        || desc.contains("what djpeg decodes")
    {
        // Made by libjpeg-turbo, as we decode: exact, one level of slack for SIMD paths.
        return Some((0.01, 1));
    }
    if let Some(rest) = desc.split("max abs diff vs djpeg").nth(1) {
        // Made by another tool: we may differ from it as much as libjpeg-turbo does.
        let n: u8 = rest
            .split('=')
            .nth(1)?
            .trim()
            .trim_end_matches(')')
            .trim()
            .parse()
            .ok()?;
        return Some((8.0, n.saturating_add(1)));
    }
    // Other tools' decodes (ImageMagick, Mozilla, Go) with no stated distance: CMYK, YCCK
    // and progressive edge cases, where colour conversion and rounding differ a little.
    Some((1.0, 8))
}

/// One decode of a corpus file: the image, and whether a device decoded it (`false`: the
/// CPU, directly or as the device path's fallback).
type Decoded = Result<(Image8, bool), DecodeError>;

/// Decodes every corpus JPEG that has a reference PNG with `decode` and checks it against
/// the reference within the file's stated tolerance. Prints, per JPEG kind (MANIFEST's
/// `kind` column), the files checked, how many the device decoded, and the worst errors.
fn check_corpus(what: &str, decode: &mut dyn FnMut(&[u8], &DecodeOptions) -> Decoded) {
    let Some(corpus) = common::corpus_or_skip() else {
        return;
    };
    let manifest = std::fs::read_to_string(corpus.join("MANIFEST.tsv")).expect("manifest");
    let mut header = Vec::new();
    let (mut checked, mut unsupported, mut failures) = (0, 0, Vec::new());
    // kind -> (files, on the device, worst mae, worst max, tolerance mae, tolerance max)
    let mut kinds: std::collections::BTreeMap<String, (usize, usize, f64, u8, f64, u8)> =
        Default::default();
    for (n, line) in manifest.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        if n == 0 {
            header = cols.iter().map(|c| c.to_string()).collect();
            continue;
        }
        let col = |name: &str| {
            header
                .iter()
                .position(|h| h == name)
                .and_then(|i| cols.get(i))
                .copied()
                .unwrap_or("")
        };
        let (file, notes, kind) = (col("file"), col("notes"), col("kind"));
        let Some((max_mae, max_err)) = corpus_tolerance(notes) else {
            continue;
        };
        if !file.ends_with(".jpg") {
            continue;
        }
        let path = corpus.join(file);
        let png = path.with_extension("png");
        let bytes = std::fs::read(&path).expect("jpeg");
        // References are unrotated decodes; damaged files are compared as decoded leniently.
        let opts = DecodeOptions {
            strict: false,
            orientation: false,
            ..DecodeOptions::default()
        };
        let (ours, on_device) = match decode(&bytes, &opts) {
            Err(DecodeError::Unsupported(m)) => {
                assert!(
                    kind.starts_with("lossless"),
                    "{file} ({kind}) reported unsupported: {m}"
                );
                unsupported += 1;
                continue;
            }
            Err(e) => {
                failures.push(format!("{file}: {e}"));
                continue;
            }
            Ok(d) => d,
        };
        let mut reference = Image8::default();
        cpu::decode_image(&std::fs::read(&png).expect("png"), &opts, &mut reference)
            .expect("reference png");
        if (ours.width, ours.height) != (reference.width, reference.height) {
            failures.push(format!(
                "{file}: {}x{} but the reference is {}x{}",
                ours.width, ours.height, reference.width, reference.height
            ));
            continue;
        }
        let (mae, max) = errors(&ours, &reference);
        if mae > max_mae || max > max_err {
            failures.push(format!(
                "{file}: mae {mae:.3} (<= {max_mae}), max {max} (<= {max_err})"
            ));
        }
        let k = kinds.entry(kind.to_string()).or_default();
        k.0 += 1;
        k.1 += usize::from(on_device);
        k.2 = k.2.max(mae);
        k.3 = k.3.max(max);
        k.4 = k.4.max(max_mae);
        k.5 = k.5.max(max_err);
        checked += 1;
    }
    println!("{what}: {checked} corpus JPEGs within tolerance of their reference, {unsupported} reported unsupported");
    println!(
        "{:<40} {:>5} {:>9} {:>9} {:>7}  tolerance (mae, max)",
        "kind", "files", "on device", "worst mae", "max"
    );
    for (kind, (files, dev, mae, max, tmae, tmax)) in &kinds {
        println!("{kind:<40} {files:>5} {dev:>9} {mae:>9.3} {max:>7}  {tmae}, {tmax}");
    }
    assert!(checked >= 60, "only {checked} corpus references checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_corpus_jpeg_with_a_reference_matches_it_or_is_unsupported() {
    check_corpus("cpu", &mut |bytes, opts| {
        let mut img = Image8::default();
        cpu::decode_image(bytes, opts, &mut img).map(|_| (img, false))
    });
}

/// The same references through every device backend's decode path, reached through
/// `Backend::batcher` as the pipeline reaches it (coefficients on the host, the rest on the
/// device; the files it does not take fall back to the CPU decoder, as in the pipeline).
#[test]
fn every_corpus_jpeg_with_a_reference_matches_it_on_every_device_backend() {
    use stoker::backend::device::prepare;
    // (The CPU backend has no batcher: the test above.)
    for (kind, mut batcher) in common::device_batchers() {
        check_corpus(&kind.to_string(), &mut |bytes, opts| {
            let p = prepare(bytes, opts)?;
            let mut imgs = batcher
                .decode_to_host(std::slice::from_ref(&p.image))
                .map_err(|e| DecodeError::Jpeg(format!("device: {e}")))?;
            let img = imgs.pop().ok_or(DecodeError::Jpeg("no image".into()))?;
            Ok((img, p.cpu_reason.is_none()))
        });
    }
}

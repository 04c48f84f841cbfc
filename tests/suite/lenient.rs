//! Damaged and imperfect JPEGs: what strict decoding refuses, what every mode delivers
//! with a warning, and that the warning reaches the batch and the stats on every backend.
//!
//! The files in `tests/data/lenient/` are made from one corpus photo by
//! `scripts/make_damaged_jpegs.py` (which says how each is damaged); the PNGs beside them
//! are Pillow's decodes (libjpeg-turbo). Before any damaged file is compared with Pillow,
//! the clean files are checked to decode to Pillow's pixels exactly: the two libjpeg
//! builds agree, so Pillow's decode of a damaged file is its reference.

use crate::common;

use stoker::decode::jpeg::coeffs::{CoeffStatus, Coefficients};
use stoker::decode::jpeg::read_coefficients;
use stoker::decode::{cpu, DecodeError, DecodeOptions, Image8, WarningKind};
use stoker::{Augment, BackendKind, Dataset, Pipeline};

fn read(name: &str) -> Vec<u8> {
    std::fs::read(common::data_dir().join("lenient").join(name)).expect("test file")
}

/// Pillow's decode of a case, as RGB bytes.
fn reference(name: &str) -> Image8 {
    let mut img = Image8::default();
    cpu::decode_image(&read(name), &DecodeOptions::default(), &mut img).expect("reference png");
    img
}

fn opts(strict: bool) -> DecodeOptions {
    DecodeOptions {
        strict,
        ..DecodeOptions::default()
    }
}

/// Decodes `name` with `strict`, returning the image and its warning kind and message.
fn decode(
    name: &str,
    strict: bool,
) -> Result<(Image8, Option<(WarningKind, String)>), DecodeError> {
    let mut img = Image8::default();
    let report = cpu::decode_image_report(&read(name), &opts(strict), &mut img)?;
    Ok((img, report.warning.map(|w| (w.kind, w.message))))
}

fn assert_same_pixels(name: &str, ours: &Image8, reference: &Image8) {
    assert_eq!(
        (ours.width, ours.height),
        (reference.width, reference.height),
        "{name}"
    );
    let differing = ours
        .data
        .iter()
        .zip(&reference.data)
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(
        differing, 0,
        "{name}: {differing} bytes differ from Pillow's decode"
    );
}

/// Decodes `jpg` strictly and leniently: each decode gives `want`'s pixels with a warning
/// of `kind`. Returns the two warnings' messages.
fn warns_in_both_modes(jpg: &str, kind: WarningKind, want: &Image8) -> Vec<String> {
    let mut messages = Vec::new();
    for strict in [true, false] {
        let (img, warning) = decode(jpg, strict).unwrap_or_else(|e| panic!("{jpg}: {e}"));
        let (got, msg) = warning.unwrap_or_else(|| panic!("{jpg}: no warning"));
        assert_eq!(got, kind, "{jpg}: {msg}");
        assert_same_pixels(jpg, &img, want);
        messages.push(msg);
    }
    messages
}

#[test]
fn clean_files_decode_to_pillows_pixels_exactly_and_without_warning() {
    for (jpg, png) in [
        ("seeding_baseline.jpg", "seeding_baseline.png"),
        ("seeding_progressive.jpg", "seeding_progressive.png"),
    ] {
        let (img, warning) = decode(jpg, true).expect("clean file decodes");
        assert_eq!(warning, None, "{jpg}");
        assert_same_pixels(jpg, &img, &reference(png));
    }
}

#[test]
fn extraneous_bytes_before_a_marker_decode_strictly_to_the_clean_pixels_with_a_warning() {
    // Between two header segments (before SOS), and after a scan's entropy-coded data.
    for (jpg, png, marker) in [
        ("seeding_extraneous.jpg", "seeding_baseline.png", "0xda"),
        (
            "seeding_progressive_extraneous.jpg",
            "seeding_progressive.png",
            "marker 0x",
        ),
    ] {
        for msg in warns_in_both_modes(jpg, WarningKind::Extraneous, &reference(png)) {
            assert!(
                msg.contains("extraneous bytes before") && msg.contains(marker),
                "{jpg}: {msg}"
            );
        }
    }
}

#[test]
fn a_progressive_file_without_its_last_scan_decodes_strictly_to_pillows_pixels_with_a_warning() {
    // Cut after its second-to-last scan: the file ends there, or has its end marker.
    let cut = reference("seeding_progressive_cut.png");
    assert_ne!(cut.data, reference("seeding_progressive.png").data);
    for jpg in [
        "seeding_progressive_cut.jpg",
        "seeding_progressive_cut_eoi.jpg",
    ] {
        warns_in_both_modes(jpg, WarningKind::Incomplete, &cut);
    }
    let (_, w) = decode("seeding_progressive_cut.jpg", true).expect("decodes");
    assert!(w.is_some_and(|(_, m)| m.contains("Premature end of JPEG file")));
}

#[test]
fn damage_inside_a_scan_is_refused_strictly_and_delivered_with_a_warning_leniently() {
    for jpg in [
        "seeding_truncated.jpg",
        "seeding_corrupt.jpg",
        "seeding_marker.jpg",
    ] {
        match decode(jpg, true) {
            Err(DecodeError::Jpeg(m)) => assert!(m.contains("corrupt data"), "{jpg}: {m}"),
            other => panic!("{jpg}: strict decoding should refuse it, got {other:?}"),
        }
        let (img, warning) = decode(jpg, false).unwrap_or_else(|e| panic!("{jpg}: {e}"));
        let (kind, msg) = warning.unwrap_or_else(|| panic!("{jpg}: no warning"));
        assert_eq!(kind, WarningKind::Damaged, "{jpg}: {msg}");
        assert!(
            msg.contains("Corrupt JPEG data") || msg.contains("Premature end"),
            "{jpg}: {msg}"
        );
        assert_eq!((img.width, img.height), (240, 135), "{jpg}");
    }
    // The truncated file decodes leniently as Pillow decodes it (grey where data is missing).
    let (img, w) = decode("seeding_truncated.jpg", false).expect("lenient");
    assert!(w.is_some_and(|(_, m)| m.contains("inside a scan")));
    assert_same_pixels(
        "seeding_truncated.jpg",
        &img,
        &reference("seeding_truncated.png"),
    );
}

#[test]
fn a_crop_above_the_cut_does_not_hide_it() {
    // The window covers only rows the truncated file still has: the verdict is the same.
    let crop = DecodeOptions {
        window: Some([0, 0, 64, 16]),
        ..opts(true)
    };
    let r = cpu::decode_image(
        &read("seeding_truncated.jpg"),
        &crop,
        &mut Image8::default(),
    );
    assert!(matches!(r, Err(DecodeError::Jpeg(_))), "{r:?}");
    let lenient = DecodeOptions {
        strict: false,
        ..crop
    };
    let mut img = Image8::default();
    let report = cpu::decode_image_report(&read("seeding_truncated.jpg"), &lenient, &mut img)
        .expect("lenient");
    assert_eq!(report.warning.map(|w| w.kind), Some(WarningKind::Damaged));
}

#[test]
fn coefficients_are_judged_as_the_cpu_decode_is() {
    let mut c = Coefficients::default();
    let kind = |c: &Coefficients| c.warning.as_ref().map(|w| w.kind);
    for strict in [true, false] {
        // Extraneous bytes: the coefficients are whole, the device path takes them.
        let s = read_coefficients(&read("seeding_extraneous.jpg"), strict, &mut c);
        assert_eq!(s, Ok(CoeffStatus::Ready));
        assert_eq!(kind(&c), Some(WarningKind::Extraneous));
        // A missing last scan: delivered (by the CPU, which smooths what is unrefined).
        for f in [
            "seeding_progressive_cut.jpg",
            "seeding_progressive_cut_eoi.jpg",
        ] {
            assert!(read_coefficients(&read(f), strict, &mut c).is_ok(), "{f}");
            assert_eq!(kind(&c), Some(WarningKind::Incomplete), "{f}");
        }
        // Damage: an error when strict; CPU-only, marked, when lenient.
        for f in [
            "seeding_truncated.jpg",
            "seeding_corrupt.jpg",
            "seeding_marker.jpg",
        ] {
            let s = read_coefficients(&read(f), strict, &mut c);
            if strict {
                assert!(matches!(s, Err(DecodeError::Jpeg(_))), "{f}: {s:?}");
            } else {
                assert!(matches!(s, Ok(CoeffStatus::CpuOnly(_))), "{f}: {s:?}");
                assert_eq!(kind(&c), Some(WarningKind::Damaged), "{f}");
            }
        }
    }
    assert_eq!(
        read_coefficients(&read("seeding_baseline.jpg"), true, &mut c),
        Ok(CoeffStatus::Ready)
    );
    assert_eq!(kind(&c), None);
}

/// What the pipeline should make of a file.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Delivered, no warning.
    Clean,
    /// Delivered with a warning of this kind.
    Warned(WarningKind),
    /// Reported as an error, not delivered.
    Refused,
}

/// (file, what lenient decoding makes of it, what strict decoding makes of it).
const PIPELINE_CASES: &[(&str, Expect, Expect)] = &[
    ("seeding_baseline.jpg", Expect::Clean, Expect::Clean),
    (
        "seeding_extraneous.jpg",
        Expect::Warned(WarningKind::Extraneous),
        Expect::Warned(WarningKind::Extraneous),
    ),
    (
        "seeding_progressive_cut.jpg",
        Expect::Warned(WarningKind::Incomplete),
        Expect::Warned(WarningKind::Incomplete),
    ),
    (
        "seeding_truncated.jpg",
        Expect::Warned(WarningKind::Damaged),
        Expect::Refused,
    ),
    (
        "seeding_corrupt.jpg",
        Expect::Warned(WarningKind::Damaged),
        Expect::Refused,
    ),
];

/// Runs the pipeline over the cases for `epochs` epochs and checks every batch: what is
/// delivered, reported and marked, and the stats' count.
fn check_pipeline(backend: BackendKind, strict: bool, cache_bytes: u64, epochs: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, _, _) in PIPELINE_CASES {
        common::write(dir.path(), &format!("a/{name}"), &read(name));
    }
    let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .backend(backend)
        .augment(Augment::new().resize(32, 24))
        .batch_size(PIPELINE_CASES.len())
        .cache_bytes(cache_bytes)
        .strict_decode(strict)
        .build()
        .expect("pipeline");
    assert_eq!(pipe.backend().kind(), backend);
    for epoch in 0..epochs {
        let what = format!("{backend:?}, strict {strict}, epoch {epoch}");
        let mut ep = pipe.epoch(epoch).expect("epoch");
        let mut delivered = Vec::new();
        let mut reported = Vec::new();
        let mut warned = Vec::new();
        for b in ep.by_ref() {
            let b = b.expect("batch");
            for w in b.warnings() {
                assert_eq!(b.ids()[w.slot], w.id, "{what}: {w}");
                assert!(!w.message.is_empty(), "{what}: {w}");
                warned.push((w.path.clone(), w.kind));
            }
            for i in b.ids() {
                delivered.push(*i);
            }
            reported.extend(b.errors().iter().map(|e| e.path.clone()));
        }
        let stats = ep.stats();
        let mut want_warned = Vec::new();
        let mut want_reported = Vec::new();
        for &(name, lenient, strict_case) in PIPELINE_CASES {
            let path = format!("a/{name}");
            match if strict { strict_case } else { lenient } {
                Expect::Warned(kind) => want_warned.push((path, kind)),
                Expect::Clean => {}
                Expect::Refused => want_reported.push(path),
            }
        }
        warned.sort();
        reported.sort();
        want_warned.sort();
        want_reported.sort();
        assert_eq!(warned, want_warned, "{what}");
        assert_eq!(reported, want_reported, "{what}");
        assert_eq!(
            delivered.len() + reported.len(),
            PIPELINE_CASES.len(),
            "{what}"
        );
        assert_eq!(
            stats.samples_with_warnings,
            want_warned.len() as u64,
            "{what}"
        );
        assert_eq!(stats.samples_reported, want_reported.len() as u64, "{what}");
    }
}

#[test]
fn lenient_pipeline_on_the_cpu_delivers_damaged_files_marked_and_counted() {
    check_pipeline(BackendKind::Cpu, false, 0, 1);
    check_pipeline(BackendKind::Cpu, true, 0, 1);
    // Samples served from the decoded-sample cache stay marked.
    check_pipeline(BackendKind::Cpu, false, 64 << 20, 2);
}

#[test]
fn lenient_pipeline_on_wgpu_delivers_damaged_files_marked_and_counted() {
    if common::wgpu_context().is_none() {
        return; // Said on stderr; STOKER_REQUIRE_WGPU=1 makes it a failure.
    }
    check_pipeline(BackendKind::Wgpu, false, 0, 1);
    check_pipeline(BackendKind::Wgpu, true, 0, 1);
}
#[test]
fn a_few_stray_bytes_after_the_last_scan_are_padding() {
    // A file from another decoder's test suite: 3 bytes between its scan's data and EOI;
    // its reference decode (ImageMagick) matches, so they are not part of the data.
    let b = std::fs::read(common::data_dir().join("jpeg/jd_extraneous-data.jpg")).expect("file");
    let mut img = Image8::default();
    let r = cpu::decode_image_report(&b, &opts(true), &mut img).expect("strict decode");
    let w = r.warning.expect("a warning");
    assert_eq!(w.kind, WarningKind::Extraneous, "{w}");
    assert!(
        w.message.contains("3 extraneous bytes before marker 0xd9"),
        "{w}"
    );
}

/// A bit flip in the entropy-coded data near the end of the scan of `jpeg` (keeping its
/// size) that a whole strict decode refuses but a strict decode of the top half of the
/// image does not see: the damage a crop-aware decode can miss.
fn damaged_below_the_top_half(jpeg: &[u8]) -> Vec<u8> {
    let sos = jpeg
        .windows(2)
        .rposition(|w| w == [0xFF, 0xDA])
        .expect("a scan");
    let end = jpeg.len() - 2;
    let strict = |window| DecodeOptions {
        strict: true,
        window,
        ..DecodeOptions::default()
    };
    let info = stoker::decode::peek_info(jpeg).expect("headers");
    let top = Some([0, 0, info.width, info.height / 2]);
    let mut img = Image8::default();
    for at in (sos + (end - sos) * 7 / 10..end).rev() {
        for bit in [0x01u8, 0x08, 0x40] {
            let mut m = jpeg.to_vec();
            m[at] ^= bit;
            if m[at] == 0xFF || jpeg[at] == 0xFF || (at > 0 && m[at - 1] == 0xFF) {
                continue;
            }
            if cpu::decode_image(&m, &strict(None), &mut img).is_err()
                && cpu::decode_image(&m, &strict(top), &mut img).is_ok()
            {
                return m;
            }
        }
    }
    panic!("no late-detected bit flip found");
}

/// Strict decoding means the same in every epoch and on every backend: a file whose
/// damage lies below what some crops decode (a bit flip found only at the end of its
/// scan) is reported in every epoch, whatever the crop, never delivered with garbage.
/// (Before, a crop-aware CPU decode delivered it in the epochs whose crop stopped above
/// the damage, while wgpu, which entropy-decodes whole files, reported it.)
#[test]
fn strict_decoding_refuses_late_damage_in_every_epoch_whatever_the_crop() {
    let jpeg = std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("jpeg");
    let damaged = damaged_below_the_top_half(&jpeg);
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..12 {
        common::write(dir.path(), &format!("a/bad{i:02}.jpg"), &damaged);
    }
    for i in 0..4 {
        common::write(dir.path(), &format!("a/good{i}.jpg"), &jpeg);
    }
    let data = Dataset::image_folder(dir.path()).expect("folder");
    for backend in common::backends() {
        let pipe = Pipeline::builder(data.clone().all())
            .backend(backend)
            .augment(Augment::new().random_resized_crop(32, (0.08, 0.3), (0.75, 1.33)))
            .batch_size(8)
            .seed(7)
            .build()
            .expect("pipeline");
        for epoch in 0..4 {
            let (delivered, errors) = common::delivered_and_reported(&pipe, &data, epoch);
            let delivered: Vec<String> = delivered.into_iter().map(|(p, ..)| p).collect();
            let mut reported: Vec<String> = errors.into_iter().map(|e| e.path).collect();
            reported.sort();
            let want_reported: Vec<String> = (0..12).map(|i| format!("a/bad{i:02}.jpg")).collect();
            let want_delivered: Vec<String> = (0..4).map(|i| format!("a/good{i}.jpg")).collect();
            assert_eq!(reported, want_reported, "{backend:?}, epoch {epoch}");
            assert_eq!(delivered, want_delivered, "{backend:?}, epoch {epoch}");
        }
    }
}

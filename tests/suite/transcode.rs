//! Lossless restart-marker transcoding (`stoker::decode::jpeg::transcode`): over every
//! JPEG in `tests/data` (recursively) and in the shared corpus beside the checkout (when
//! present), a transcoded file decodes on the CPU to exactly the original's pixels, is one
//! baseline scan with restart markers at the interval asked, and keeps its EXIF
//! orientation and Adobe transform; a file kept as it is carries the reason that fits it.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stoker::decode::jpeg::markers::peek;
use stoker::decode::jpeg::transcode::{layout, same_coefficients};
use stoker::decode::jpeg::{add_restarts, KeptReason, Restart, TranscodeOptions, Transcoded};
use stoker::decode::{cpu, DecodeOptions, Image8, JpegProcess};

/// Every `.jpg` / `.jpeg` below `dir`, sorted.
fn jpegs_below(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    common::files_below(dir, &mut files);
    files.retain(|p| {
        p.extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| x.eq_ignore_ascii_case("jpg") || x.eq_ignore_ascii_case("jpeg"))
    });
    files
}

/// The CPU decode of `bytes` (strict, oriented), or the error as text.
fn pixels(bytes: &[u8]) -> Result<Image8, String> {
    let mut img = Image8::default();
    cpu::decode_image(bytes, &DecodeOptions::default(), &mut img)
        .map(|_| img)
        .map_err(|e| e.to_string())
}

/// Checks one transcoded file against its original; panics naming `name`.
fn check_written(name: &str, original: &[u8], out: &[u8], interval: u16, restart: Restart) {
    let lay = layout(out).unwrap_or_else(|| panic!("{name}: output layout unreadable"));
    assert_eq!(lay.frame, 0xC0, "{name}: output is not baseline");
    assert_eq!(lay.scans, 1, "{name}: output has {} scans", lay.scans);
    assert_eq!(lay.restart_interval, interval, "{name}");
    let src = layout(original).expect("input layout");
    assert_eq!(interval, restart.interval(src.mcus_per_row), "{name}");
    if interval > 0 {
        let mcus = u64::from(lay.mcus_per_row) * u64::from(lay.mcu_rows);
        let want = mcus.div_ceil(u64::from(interval)) - 1;
        assert_eq!(
            u64::from(lay.restart_markers),
            want,
            "{name}: restart markers"
        );
    }
    let (a, b) = (
        peek(original).expect("input headers"),
        peek(out).expect("output headers"),
    );
    assert_eq!(a.orientation, b.orientation, "{name}: EXIF orientation");
    assert_eq!(a.adobe_transform, b.adobe_transform, "{name}: Adobe marker");
    assert_eq!(
        (a.width, a.height, a.components),
        (b.width, b.height, b.components)
    );
    assert_eq!(b.process, Some(JpegProcess::Baseline), "{name}");
    let want = pixels(original).unwrap_or_else(|e| panic!("{name}: original: {e}"));
    let got = pixels(out).unwrap_or_else(|e| panic!("{name}: transcoded: {e}"));
    assert_eq!((got.width, got.height), (want.width, want.height), "{name}");
    assert!(got.data == want.data, "{name}: pixels differ");
    same_coefficients(original, out).unwrap_or_else(|e| panic!("{name}: {e}"));
}

/// Checks that a kept file's reason fits it; panics naming `name`.
fn check_kept(name: &str, bytes: &[u8], why: &KeptReason) {
    let info = peek(bytes);
    match why {
        KeptReason::NotEightBit(b) => {
            assert_eq!(info.map(|i| i.bit_depth).ok(), Some(*b), "{name}");
            assert_ne!(*b, 8, "{name}");
        }
        KeptReason::Lossless => {
            assert_eq!(
                info.ok().and_then(|i| i.process),
                Some(JpegProcess::Lossless)
            )
        }
        KeptReason::Hierarchical => assert_eq!(
            info.ok().and_then(|i| i.process),
            Some(JpegProcess::Hierarchical)
        ),
        KeptReason::BlockSmoothing(_) => assert_eq!(
            info.ok().and_then(|i| i.process),
            Some(JpegProcess::Progressive),
            "{name}"
        ),
        KeptReason::Damaged(w) => {
            // The CPU decoder reports the same: refused (strict) or delivered with a warning.
            let mut img = Image8::default();
            let r = cpu::decode_image_report(bytes, &DecodeOptions::default(), &mut img);
            match r {
                Err(_) => {}
                Ok(rep) => assert!(rep.warning.is_some(), "{name}: {w:?} but decodes clean"),
            }
        }
        KeptReason::Unreadable(_) => assert!(pixels(bytes).is_err(), "{name}: {why}"),
        KeptReason::AlreadyRestarted { interval } => {
            let lay = layout(bytes).expect("layout");
            assert_eq!((lay.frame, lay.scans), (0xC0, 1), "{name}");
            assert_eq!(lay.restart_interval, *interval, "{name}");
        }
        KeptReason::NotJpeg => assert!(!bytes.starts_with(&[0xFF, 0xD8]), "{name}"),
        // A quantisation table above 255, a coefficient beyond the baseline range: the
        // file itself decodes.
        KeptReason::NotBaseline(_) => assert!(pixels(bytes).is_ok(), "{name}: {why}"),
        other => panic!("{name}: unexpected reason {other}"),
    }
}

/// Transcodes every file with `opts`; returns the count of each outcome.
fn run_over(files: &[PathBuf], opts: &TranscodeOptions) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for p in files {
        let name = p.display().to_string();
        let bytes = std::fs::read(p).expect("read");
        let label = match add_restarts(&bytes, opts) {
            Transcoded::Written {
                bytes: out,
                restart_interval,
            } => {
                check_written(&name, &bytes, &out, restart_interval, opts.restart);
                "written".to_string()
            }
            Transcoded::Kept(why) => {
                check_kept(&name, &bytes, &why);
                eprintln!("kept {name}: {why}");
                why.label().to_string()
            }
        };
        *counts.entry(label).or_insert(0) += 1;
    }
    counts
}

/// The reason each bundled file whose outcome is known ahead is kept for.
#[test]
fn every_bundled_jpeg_transcodes_to_the_same_pixels_or_is_kept_for_its_reason() {
    let files = jpegs_below(&common::data_dir());
    assert!(files.len() >= 40, "{} files", files.len());
    let opts = TranscodeOptions::default();
    let counts = run_over(&files, &opts);
    eprintln!("tests/data: {counts:?}");
    let outcome = |rel: &str| {
        let bytes = std::fs::read(common::data_dir().join(rel)).expect("read");
        match add_restarts(&bytes, &opts) {
            Transcoded::Written { .. } => "written",
            Transcoded::Kept(why) => why.label(),
        }
    };
    for (rel, want) in [
        ("jpeg/ljt_testorig.jpg", "written"),
        ("jpeg/jd_moz_jpg-progressive.jpg", "written"),
        ("jpeg/ljt_testimgari.jpg", "written"),
        ("jpeg/go_video-001_cmyk.jpg", "written"),
        ("jpeg/jd_ycck.jpg", "already_restarted"),
        ("jpeg/jd_rgb.jpg", "written"),
        ("jpeg/jd_moz_jpg-gray.jpg", "written"),
        ("jpeg/ljt_monkey12.jpg", "not_8_bit"),
        ("jpeg/jd_ll_jpeg_lossless_sel2.jpg", "lossless"),
        (
            "jpeg/go_video-001_progressive_truncated.jpg",
            "block_smoothing",
        ),
        ("lenient/seeding_corrupt.jpg", "damaged"),
        ("lenient/seeding_truncated.jpg", "damaged"),
        ("lenient/seeding_extraneous.jpg", "damaged"),
    ] {
        assert_eq!(outcome(rel), want, "{rel}");
    }
    assert!(
        counts.get("written").copied().unwrap_or(0) >= 20,
        "{counts:?}"
    );
}

/// Every interval option gives the same pixels and its own interval.
#[test]
fn every_interval_option_keeps_the_pixels() {
    let dir = common::data_dir();
    let files: Vec<PathBuf> = [
        "jpeg/ljt_testorig.jpg",
        "jpeg/go_video-001_q50_411.jpg",
        "jpeg/jd_moz_jpg-size-33x33.jpg",
        "samples/photo/skimage_coffee.jpg",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect();
    for restart in [
        Restart::Off,
        Restart::McuRows(1),
        Restart::McuRows(3),
        Restart::PerRow(2),
        Restart::Mcus(16),
        Restart::Mcus(4),
        Restart::Mcus(1),
    ] {
        let opts = TranscodeOptions {
            restart,
            ..TranscodeOptions::default()
        };
        let counts = run_over(&files, &opts);
        assert_eq!(
            counts.get("written"),
            Some(&files.len()),
            "{restart}: {counts:?}"
        );
    }
}

/// With the standard Huffman tables (one pass, as the pipeline's in-memory copies of
/// progressive JPEGs are made) every bundled JPEG the optimised transcode writes is
/// written too, to the same pixels (`check_written`: the coefficients read back equal),
/// with other tables: no smaller than the optimised file.
#[test]
fn standard_tables_keep_the_pixels() {
    let files = jpegs_below(&common::data_dir());
    let standard = TranscodeOptions {
        optimize_tables: false,
        ..TranscodeOptions::default()
    };
    let (mut written, mut larger) = (0, 0);
    for f in &files {
        let bytes = std::fs::read(f).expect("read");
        let (
            Transcoded::Written {
                bytes: optimised, ..
            },
            plain,
        ) = (
            add_restarts(&bytes, &TranscodeOptions::default()),
            add_restarts(&bytes, &standard),
        )
        else {
            continue;
        };
        let name = f.display().to_string();
        match plain {
            Transcoded::Written {
                bytes: out,
                restart_interval,
            } => {
                check_written(&name, &bytes, &out, restart_interval, standard.restart);
                assert!(
                    out.len() >= optimised.len(),
                    "{name}: {} < {}",
                    out.len(),
                    optimised.len()
                );
                written += 1;
                larger += usize::from(out.len() > optimised.len());
            }
            Transcoded::Kept(why) => panic!("{name}: optimised written, standard kept: {why}"),
        }
    }
    assert!(
        written >= 20 && larger * 2 > written,
        "{written} written, {larger} larger"
    );
}

/// A transcoded file with restarts at least as often as asked is kept as it is, and
/// transcoding again at a finer interval rewrites it.
#[test]
fn a_file_already_restarted_is_kept_unless_a_finer_interval_is_asked() {
    let bytes = std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("read");
    let once = match add_restarts(&bytes, &TranscodeOptions::default()) {
        Transcoded::Written { bytes, .. } => bytes,
        Transcoded::Kept(why) => panic!("kept: {why}"),
    };
    let again = add_restarts(&once, &TranscodeOptions::default());
    assert!(
        matches!(again, Transcoded::Kept(KeptReason::AlreadyRestarted { .. })),
        "{again:?}"
    );
    let finer = TranscodeOptions {
        restart: Restart::Mcus(4),
        ..TranscodeOptions::default()
    };
    match add_restarts(&once, &finer) {
        Transcoded::Written {
            bytes: out,
            restart_interval,
        } => {
            assert_eq!(restart_interval, 4);
            check_written("twice", &bytes, &out, 4, Restart::Mcus(4));
        }
        Transcoded::Kept(why) => panic!("kept: {why}"),
    }
}

/// The EXIF, ICC, JFIF and Adobe segments (every APPn and COM) are copied in order.
#[test]
fn every_app_and_comment_segment_is_copied_in_order() {
    fn segments(b: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        let mut i = 2;
        while i + 4 <= b.len() && b[i] == 0xFF {
            let m = b[i + 1];
            let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
            if m == 0xDA {
                break;
            }
            if (0xE0..=0xEF).contains(&m) || m == 0xFE {
                out.push((m, b[i + 4..i + 2 + len].to_vec()));
            }
            i += 2 + len;
        }
        out
    }
    let dir = common::data_dir();
    // Finer than the YCCK file's own interval, so that it is rewritten too.
    let opts = TranscodeOptions {
        restart: Restart::Mcus(2),
        ..TranscodeOptions::default()
    };
    let mut seen_app = 0;
    let mut files: Vec<(String, Vec<u8>)> = [
        "jpeg/go_video-001_cmyk.jpg",
        "jpeg/jd_ycck.jpg",
        "jpeg/jd_rgb.jpg",
        "jpeg/ljt_testorig.jpg",
        "samples/photo/skimage_coffee.jpg",
    ]
    .iter()
    .map(|f| (f.to_string(), std::fs::read(dir.join(f)).expect("read")))
    .collect();
    let photo = std::fs::read(dir.join("jpeg/ljt_testorig.jpg")).expect("read");
    files.push((
        "orientation 6, a comment".into(),
        with_exif_orientation(&photo, 6),
    ));
    for (f, bytes) in &files {
        let Transcoded::Written {
            bytes: out,
            restart_interval,
        } = add_restarts(bytes, &opts)
        else {
            panic!("{f} kept: {:?}", add_restarts(bytes, &opts));
        };
        check_written(f, bytes, &out, restart_interval, opts.restart);
        let (a, b) = (segments(bytes), segments(&out));
        seen_app += a.len();
        assert_eq!(a, b, "{f}: APPn/COM segments");
    }
    assert!(seen_app >= 4, "the files have APPn segments to copy");
}

/// `jpeg` with an EXIF segment of orientation `o` and a comment after its start marker.
fn with_exif_orientation(jpeg: &[u8], o: u8) -> Vec<u8> {
    // Big-endian TIFF: header, IFD0 at 8 with one entry (0x0112, SHORT, 1, o), no next IFD.
    let mut exif = b"Exif\0\0MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0".to_vec();
    exif.extend_from_slice(&[o, 0, 0, 0, 0, 0, 0]);
    let mut out = jpeg[..2].to_vec();
    for (marker, body) in [(0xE1u8, &exif[..]), (0xFE, &b"a comment"[..])] {
        out.extend_from_slice(&[0xFF, marker]);
        out.extend_from_slice(&(body.len() as u16 + 2).to_be_bytes());
        out.extend_from_slice(body);
    }
    out.extend_from_slice(&jpeg[2..]);
    assert_eq!(peek(&out).expect("headers").orientation, o);
    out
}

/// The shared corpus, when it is beside the checkout.
#[test]
fn every_corpus_jpeg_transcodes_to_the_same_pixels_or_is_kept_for_its_reason() {
    let Some(corpus) = common::corpus_or_skip() else {
        return;
    };
    let files = jpegs_below(&corpus);
    let counts = run_over(&files, &TranscodeOptions::default());
    eprintln!("corpus ({} files): {counts:?}", files.len());
    assert!(
        counts.get("written").copied().unwrap_or(0) > files.len() / 2,
        "{counts:?}"
    );
}

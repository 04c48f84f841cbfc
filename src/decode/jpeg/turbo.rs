//! libjpeg-turbo's decoder (the build vendored by `mozjpeg-sys`) behind a safe wrapper:
//! the FFI module of the CPU decoder. `unsafe` lives only in FFI and memory modules: here
//! (libjpeg), `pipeline::memory` (the host batch slots), `backend::cuda::memory`
//! (device and pinned memory, launches, raw copies) and `backend::cuda::nvjpeg` (the
//! nvJPEG FFI); the rest of `backend::cuda` only probes for and loads the CUDA libraries
//! and calls `memory`'s `unsafe fn`s, each call with its reason.
//!
//! Why a wrapper of our own over `mozjpeg-sys` rather than a safe crate (`turbojpeg`,
//! `jpeg-decoder`, `zune-jpeg`): the pipeline needs libjpeg-turbo's exact pixels (its
//! accurate integer IDCT and fancy upsampling, the CPU reference every backend is held
//! to), its scaled and cropped decode (`jpeg_crop_scanline`, `jpeg_skip_scanlines`), raw
//! DCT coefficients for the device paths (`jpeg_read_coefficients`), and corrupt-data
//! warnings as errors in strict mode; no safe crate exposes all of these.
//!
//! It decodes at a reduced IDCT scale (1/2, 1/4, 1/8), skips the rows above a window with
//! `jpeg_skip_scanlines`, decodes only the iMCU columns the window needs with
//! `jpeg_crop_scanline`, and stops after the window's last row.
//!
//! libjpeg reports fatal errors through `error_exit`, which must not return. Ours unwinds
//! with [`std::panic::resume_unwind`] (no panic hook, nothing printed) through the C code,
//! which `mozjpeg-sys`'s `unwinding` feature compiles with unwind tables; every entry into
//! libjpeg is wrapped in `catch_unwind` and the error becomes a [`DecodeError`]. This
//! needs `panic = "unwind"` (the default); the crate refuses to build with `abort`.

use std::cell::RefCell;
use std::ffi::{c_int, c_ulong};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use mozjpeg_sys as ffi;

use crate::decode::jpeg::coeffs::{CoeffStatus, Coefficients, ColorModel};
use crate::decode::{DecodeError, DecodeWarning, WarningKind};

mod coefficients;
mod decoder;
mod judgement;
mod resume;
mod session;
mod transcoder;

pub use coefficients::read_coefficients;
use coefficients::smoothing_needed;
pub(crate) use decoder::{decode, decode_rows};
use decoder::{with_decoder, Decoder};
use judgement::{damage_so_far, verdict, Scans, Seen, MAX_EXTRANEOUS};
use resume::Hook;
pub(crate) use resume::{RowIndex, Rows};
use session::{classify, forget_progression, scans_of, ErrorMgr, Fatal, Stopped};
pub(crate) use transcoder::{transcode, TranscodeStop};

/// What to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    /// IDCT scale denominator: 1, 2, 4 or 8.
    pub scale: u32,
    /// `[x0, y0, x1, y1)` in the scaled image; `None` for the whole image.
    pub window: Option<[u32; 4]>,
    /// Refuse damaged data (a [`WarningKind::Damaged`] verdict) instead of delivering it.
    pub strict: bool,
    /// After a window that ends above the image's last row, read on to the end of the
    /// file (the rows below entropy-decoded and dropped, as `jpeg_skip_scanlines` does,
    /// then the last row, then the markers up to the end of the image), so the warning
    /// and the verdict are the whole file's, as a whole decode's are.
    pub to_end: bool,
}

/// What was decoded: a window of the scaled image, `channels` bytes per pixel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Output {
    pub width: u32,
    pub height: u32,
    pub x0: u32,
    pub y0: u32,
    pub full_width: u32,
    pub full_height: u32,
    /// 3 (RGB, gray expanded) or 4 (CMYK, as stored).
    pub channels: u32,
}

/// What our own marker scan knows that the verdict needs (libjpeg keeps it private).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hints {
    /// Arithmetic-coded (SOF9-SOF11).
    pub arithmetic: bool,
    /// Components in the first scan (0 when there is none).
    pub first_scan_components: u8,
}

impl Hints {
    /// The hints for `bytes`, whose headers are `info`.
    pub(crate) fn of(bytes: &[u8], info: &crate::decode::ImageInfo) -> Hints {
        Hints {
            arithmetic: info.process == Some(crate::decode::JpegProcess::Arithmetic),
            first_scan_components: crate::decode::jpeg::markers::first_scan_components(bytes)
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::judgement::TRAILING_PADDING_MAX;
    use super::*;

    /// A progressive file leaves libjpeg's `coef_bits` pointing into memory freed when the
    /// decode ends; neither the next file on the reused decompressor nor the progressive
    /// file's own verdict (read after `jpeg_finish_decompress` before this was fixed) may
    /// read it. (The fuzzer found this as a heap use-after-free under AddressSanitizer:
    /// tests/data/regress/coefficients/.)
    /// `bytes` without its header segments of marker `m` (up to the first scan).
    fn without(bytes: &[u8], m: u8) -> Vec<u8> {
        let mut out = bytes[..2].to_vec();
        let mut i = 2;
        while i + 4 <= bytes.len() && bytes[i] == 0xFF && bytes[i + 1] != 0xDA {
            let end = i + 2 + usize::from(u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]));
            if bytes[i + 1] != m {
                out.extend_from_slice(&bytes[i..end]);
            }
            i = end;
        }
        out.extend_from_slice(&bytes[i..]);
        out
    }

    /// libjpeg keeps tables from one image to the next on a decompressor. A file that
    /// uses a table it never defines must decode as on a fresh decompressor whatever was
    /// decoded before it on the thread: refused without its quantisation tables, decoded
    /// with the standard Huffman tables without its own. (The fuzzer found the device
    /// oracle and the CPU decoder disagreeing on such a file: each borrowed the tables of
    /// the file its thread had decoded last; tests/data/regress/device_oracle/.)
    #[test]
    fn a_file_never_borrows_the_tables_of_the_one_before() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jpeg");
        let read = |f: &str| std::fs::read(dir.join(f)).expect("test JPEG");
        let (a, b) = (read("ljt_testorig.jpg"), read("go_video-001_q50_444.jpg"));
        fn run(bytes: &[u8]) -> (Result<Vec<u8>, DecodeError>, Result<usize, DecodeError>) {
            let req = Request {
                scale: 1,
                window: None,
                strict: false,
                to_end: false,
            };
            let info = crate::decode::jpeg::markers::peek(bytes).expect("headers");
            let mut out = Vec::new();
            let pixels = decode(bytes, &req, &Hints::of(bytes, &info), &mut out).map(|_| out);
            let mut c = Coefficients::default();
            let coeffs = read_coefficients(bytes, false, &mut c).map(|_| c.components.len());
            (pixels, coeffs)
        }
        let no_dqt = without(&b, 0xDB);
        let no_dht = without(&b, 0xC4);
        assert!(crate::decode::jpeg::markers::borrows_tables(&no_dqt));
        assert!(crate::decode::jpeg::markers::borrows_tables(&no_dht));
        assert!(!crate::decode::jpeg::markers::borrows_tables(&a));
        assert!(!crate::decode::jpeg::markers::borrows_tables(&b));
        // On a thread whose decompressor is fresh.
        let fresh = |bytes: Vec<u8>| {
            std::thread::spawn(move || run(&bytes))
                .join()
                .expect("thread")
        };
        let (dqt_fresh, dht_fresh) = (fresh(no_dqt.clone()), fresh(no_dht.clone()));
        let refused = |r: &(Result<Vec<u8>, DecodeError>, Result<usize, DecodeError>)| {
            (r.0.is_err(), r.1.is_err())
        };
        assert_eq!(refused(&dqt_fresh), (true, true), "on a fresh decompressor");
        // After other files on this thread, with their tables left in the decompressor.
        for before in [&a, &b] {
            let _ = run(before);
            let dqt = run(&no_dqt);
            assert_eq!(refused(&dqt), (true, true), "after another file");
            let _ = run(before);
            let dht = run(&no_dht);
            assert!(
                dht.0.as_ref().ok() == dht_fresh.0.as_ref().ok(),
                "pixels without Huffman tables differ from a fresh decode's"
            );
            assert_eq!(dht.1.as_ref().ok(), dht_fresh.1.as_ref().ok());
        }
    }

    #[test]
    fn a_reused_decoder_never_keeps_a_progressive_files_state() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jpeg");
        let read = |f: &str| std::fs::read(dir.join(f)).expect("test JPEG");
        let (progressive, baseline) =
            (read("jd_moz_jpg-progressive.jpg"), read("ljt_testorig.jpg"));
        let req = Request {
            scale: 1,
            window: None,
            strict: true,
            to_end: false,
        };
        let mut dec = Decoder::new().expect("decoder");
        let mut out = Vec::new();
        let mut coeffs = Coefficients::default();
        for bytes in [&progressive, &baseline, &progressive, &baseline] {
            let info = crate::decode::jpeg::markers::peek(bytes).expect("headers");
            let hints = Hints::of(bytes, &info);
            dec.decode(bytes, &req, &hints, &mut out, Rows::Plain)
                .expect("decode");
            let progressive = info.process == Some(crate::decode::JpegProcess::Progressive);
            // Set only by a progressive file's own decode.
            assert!(dec.cinfo.coef_bits.is_null() || progressive);
            let status = dec
                .read_coefficients(bytes, true, &hints, &mut coeffs)
                .expect("coefficients");
            assert!(matches!(status, CoeffStatus::Ready), "{status:?}");
            assert!(dec.cinfo.coef_bits.is_null() || progressive);
        }
    }

    fn scans(progressive: bool, complete: bool) -> Scans {
        Scans {
            arithmetic: false,
            dc_complete: progressive && complete,
            unrefined: None,
            sequential_complete: !progressive && complete,
            progressive,
        }
    }

    #[test]
    fn the_most_severe_fault_wins() {
        // The data ends at a scan boundary (Incomplete) but a scan also stopped 40 bytes
        // short of its data (Damaged): the damage decides.
        let seen = Seen {
            eof: true,
            extraneous: vec![(40, 0xDA, "40 extraneous bytes before marker 0xda".into())],
            ..Seen::default()
        };
        let w = verdict(&seen, &scans(true, true), &[0xFF, 0xD8]);
        assert_eq!(w.map(|w| w.kind), Some(WarningKind::Damaged));
        // Two faults of one severity: the first is kept.
        let eof = Seen {
            eof: true,
            ..Seen::default()
        };
        let unrefined = Scans {
            unrefined: Some("component 0".into()),
            ..scans(true, true)
        };
        let w = verdict(&eof, &unrefined, &[0xFF, 0xD8]).expect("a warning");
        assert_eq!(w.kind, WarningKind::Incomplete);
        assert!(w.message.contains("Premature end"), "{}", w.message);
    }

    #[test]
    fn the_verdict_follows_the_documented_table() {
        let kind = |seen: &Seen, s: &Scans| verdict(seen, s, &[0xFF, 0xD8]).map(|w| w.kind);
        let clean = Seen::default();
        assert_eq!(kind(&clean, &scans(false, true)), None);
        let eof = Seen {
            eof: true,
            ..Seen::default()
        };
        assert_eq!(
            kind(&eof, &scans(false, true)),
            Some(WarningKind::Incomplete)
        );
        assert_eq!(
            kind(&eof, &scans(true, true)),
            Some(WarningKind::Incomplete)
        );
        assert_eq!(kind(&eof, &scans(true, false)), Some(WarningKind::Damaged));
        assert_eq!(kind(&eof, &scans(false, false)), Some(WarningKind::Damaged));
        let arith = Scans {
            arithmetic: true,
            ..scans(false, true)
        };
        assert_eq!(kind(&eof, &arith), Some(WarningKind::Damaged));
        let cut_in_scan = Seen {
            eof: true,
            hit_marker: true,
            damage: Some("Corrupt JPEG data: premature end of data segment".into()),
            ..Seen::default()
        };
        assert_eq!(
            kind(&cut_in_scan, &scans(false, true)),
            Some(WarningKind::Damaged)
        );
        let stray = |n| Seen {
            extraneous: vec![(n, 0xD9, format!("{n} extraneous bytes"))],
            ..Seen::default()
        };
        assert_eq!(
            kind(&stray(TRAILING_PADDING_MAX), &scans(false, true)),
            Some(WarningKind::Extraneous)
        );
        assert_eq!(
            kind(&stray(TRAILING_PADDING_MAX + 1), &scans(false, true)),
            Some(WarningKind::Damaged)
        );
        let unrefined = Scans {
            unrefined: Some("component 0, coefficient 1 known to bit 1".into()),
            ..scans(true, true)
        };
        assert_eq!(kind(&clean, &unrefined), Some(WarningKind::Incomplete));
    }
}

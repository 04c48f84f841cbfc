//! What each fuzz target checks, shared with `tests/regress.rs`, which replays every file
//! of `tests/data/regress/<target>/` through the same function. Each function takes the
//! fuzzer's bytes and panics on a property that does not hold; returning is a pass. A
//! panic inside stoker is a finding too, as is an allocation over libFuzzer's
//! `-malloc_limit_mb` (scripts/fuzz.sh sets it far above what these small limits allow).

#![allow(dead_code)]

use stoker::decode::jpeg::coeffs::Coefficients;
use stoker::decode::{self, cpu, DecodeOptions, Image8, LabelPlane, Limits};

/// Small limits: a legitimate decode here needs a few tens of MB at most.
fn limits() -> Limits {
    Limits {
        max_pixels: 4 << 20,
        max_bytes: 16 << 20,
    }
}

fn options(strict: bool, scale: u32, window: Option<[u32; 4]>) -> DecodeOptions {
    DecodeOptions {
        limits: limits(),
        strict,
        scale,
        window,
        ..Default::default()
    }
}

/// An image the decoder returned holds what it says.
fn consistent(what: &str, info: &decode::ImageInfo, img: &Image8) {
    assert_eq!(
        img.data.len(),
        img.width as usize * img.height as usize * 3,
        "{what}: {}x{} image with {} bytes",
        img.width,
        img.height,
        img.data.len()
    );
    assert!(
        u64::from(info.width) * u64::from(info.height) <= limits().max_pixels,
        "{what}: {}x{} passed a limit of {} pixels",
        info.width,
        info.height,
        limits().max_pixels
    );
}

/// An IDCT scale and maybe a window from the input's last bytes, so the fuzzer explores
/// them too.
fn scale_and_window(data: &[u8]) -> (u32, Option<[u32; 4]>) {
    let tail = data.last().copied().unwrap_or(0);
    let scale = 1 << (tail & 3);
    let window = (tail & 4 != 0).then(|| {
        let b = |i: usize| {
            u32::from(
                data.get(data.len().saturating_sub(i + 2))
                    .copied()
                    .unwrap_or(0),
            )
        };
        let (x0, y0) = (b(0), b(1));
        [x0, y0, x0 + 1 + b(2), y0 + 1 + b(3)]
    });
    (scale, window)
}

/// Largest channel difference between `ours` and `cpu` where they overlap (both carry
/// their origin in the scaled image), and how many channels were compared / differed.
pub fn overlap_difference(ours: &Image8, cpu: &Image8) -> (u8, u64, u64) {
    let (mut max, mut n, mut diff) = (0u8, 0u64, 0u64);
    for y in 0..ours.height {
        let gy = ours.origin.1 + y;
        let Some(cy) = gy.checked_sub(cpu.origin.1).filter(|&v| v < cpu.height) else {
            continue;
        };
        for x in 0..ours.width {
            let gx = ours.origin.0 + x;
            let Some(cx) = gx.checked_sub(cpu.origin.0).filter(|&v| v < cpu.width) else {
                continue;
            };
            let a = ((y * ours.width + x) * 3) as usize;
            let b = ((cy * cpu.width + cx) * 3) as usize;
            for c in 0..3 {
                let d = ours.data[a + c].abs_diff(cpu.data[b + c]);
                max = max.max(d);
                n += 1;
                diff += u64::from(d != 0);
            }
        }
    }
    (max, n, diff)
}

/// The largest per-channel difference between the device path's oracle and the CPU
/// decoder (`tests/coeff_decode.rs`): designed to be exact.
pub const ORACLE_TOLERANCE: u8 = 2;

/// The device path against the CPU decoder (differential): the coefficient reader, then
/// the scalar oracles of the device stages (`decode::jpeg::{idct, color}`, which the
/// shaders port line by line), at a scale and window from the input, against the CPU
/// decode of the same window. What the reader takes as ready for the device, the CPU
/// decodes, to the same pixels within [`ORACLE_TOLERANCE`]; what it refuses as damaged,
/// the CPU's lenient decode refuses too. (A file the device would decode to other pixels
/// than the CPU backend's must be left to the CPU: `CoeffStatus::CpuOnly`.)
pub fn device_oracle(data: &[u8]) {
    let (scale, window) = scale_and_window(data);
    device_oracle_at(data, scale, window);
}

/// [`device_oracle`] at IDCT scale `1/scale` for `window` (`None`: the whole image).
pub fn device_oracle_at(data: &[u8], scale: u32, window: Option<[u32; 4]>) {
    let Ok(info) = decode::peek_info(data) else {
        return;
    };
    // The scalar oracle is slow: small images only.
    let small = Limits {
        max_pixels: 1 << 18,
        ..limits()
    };
    if info.format != decode::Format::Jpeg || decode::check_limits(&info, &small).is_err() {
        return;
    }
    let mut c = Coefficients::default();
    let mut img = Image8::default();
    let lenient = |scale, window| DecodeOptions {
        orientation: false,
        ..options(false, scale, window)
    };
    match decode::jpeg::read_coefficients(data, false, &mut c) {
        Ok(decode::jpeg::coeffs::CoeffStatus::Ready) => {}
        Ok(decode::jpeg::coeffs::CoeffStatus::CpuOnly(_)) => return,
        Err(decode::DecodeError::Unsupported(_)) => return,
        Err(e) => {
            let cpu = cpu::decode_image(data, &lenient(1, None), &mut img);
            assert!(
                cpu.is_err(),
                "the coefficient reader refused ({e}) what the CPU decoder decodes leniently"
            );
            return;
        }
    }
    let full = c.scaled_size(scale);
    let Some(w) = (match window {
        None => Some([0, 0, full.0, full.1]),
        Some(w) => decode::jpeg::coeffs::clamp_window(w, full).ok(),
    }) else {
        return;
    };
    let cpu = cpu::decode_image(data, &lenient(scale, Some(w)), &mut img);
    assert!(
        cpu.is_ok(),
        "1/{scale} {w:?}: the device path takes what the CPU decoder refuses: {cpu:?}"
    );
    let ours = match decode::jpeg::color::decode_coefficients(&c, scale, w) {
        Ok(o) => o,
        Err(e) => panic!("1/{scale} {w:?}: the oracle failed on ready coefficients: {e}"),
    };
    assert_eq!(ours.full, img.full, "1/{scale}: scaled size");
    let (max, n, _) = overlap_difference(&ours, &img);
    assert!(n > 0, "1/{scale} {w:?}: no overlap with the CPU decode");
    assert!(
        max <= ORACLE_TOLERANCE,
        "1/{scale} {w:?}: the device path's pixels differ from the CPU decoder's by {max}"
    );
}

/// JPEG headers and markers, and the CPU decode in strict and lenient mode, whole, scaled
/// and crop-aware (the scale and window come from the input's last bytes, so the fuzzer
/// explores them too). Whatever the bytes, no panic; an image delivered is consistent;
/// strict decoding never delivers what lenient decoding calls damaged.
pub fn jpeg_decode(data: &[u8]) {
    let _ = decode::peek_info(data);
    let _ = decode::jpeg::markers::sampling_factors(data);
    let _ = decode::jpeg::markers::segment_gaps(data);
    let _ = decode::jpeg::markers::first_scan_components(data);
    let _ = decode::jpeg::markers::exif_orientation(data);
    let (scale, window) = scale_and_window(data);
    let mut img = Image8::default();
    let mut verdicts = Vec::new();
    for strict in [true, false] {
        let o = options(strict, scale, window);
        let r = cpu::decode_image_report(data, &o, &mut img);
        if let Ok(report) = &r {
            consistent(
                &format!("strict {strict}, scale {scale}, window {window:?}"),
                &report.info,
                &img,
            );
        }
        verdicts.push(r.map(|rep| rep.warning.map(|w| w.kind)));
    }
    if let (Ok(strict), Ok(Some(lenient))) = (&verdicts[0], &verdicts[1]) {
        assert_ne!(
            *lenient,
            stoker::WarningKind::Damaged,
            "strict decoding delivered (warning {strict:?}) what lenient decoding calls damaged"
        );
    }
}

/// The coefficient reader (the device path's entropy decode) in both modes: no panic,
/// and in strict mode it agrees with the CPU decoder: what it reads whole, the CPU
/// decodes (the device path would otherwise deliver what the CPU backend reports).
pub fn coefficients(data: &[u8]) {
    let mut c = Coefficients::default();
    let mut img = Image8::default();
    // The reader has no limits of its own: only headers the CPU path would take.
    let Ok(info) = decode::peek_info(data) else {
        return;
    };
    if decode::check_limits(&info, &limits()).is_err() {
        return;
    }
    for strict in [true, false] {
        let coeffs = decode::jpeg::read_coefficients(data, strict, &mut c);
        if strict && coeffs.is_ok() {
            let cpu = cpu::decode_image(data, &options(true, 1, None), &mut img);
            assert!(
                cpu.is_ok(),
                "the coefficient reader read {coeffs:?} what the CPU decoder refuses: {cpu:?}"
            );
        }
    }
}

/// PNG, WebP, BMP, TIFF and GIF through the CPU decoder: no panic, images consistent.
pub fn image_formats(data: &[u8]) {
    let mut img = Image8::default();
    for strict in [true, false] {
        if let Ok(info) = cpu::decode_image(data, &options(strict, 1, None), &mut img) {
            consistent(&format!("strict {strict}"), &info, &img);
        }
    }
}

/// Label masks: no panic; a mask delivered holds `width * height` ids.
pub fn png_mask(data: &[u8]) {
    let mut m = LabelPlane::default();
    if cpu::decode_mask(data, &options(true, 1, None), &mut m).is_ok() {
        assert_eq!(m.data.len(), m.width as usize * m.height as usize);
    }
}

/// The bytes as a tar shard and as a TFRecord shard: listing never panics, and every
/// listed sample either reads (within the byte limit) or says why not.
pub fn shards(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    for (name, tar) in [("x.tar", true), ("x.tfrecord", false)] {
        let p = dir.path().join(name);
        if std::fs::write(&p, data).is_err() {
            return;
        }
        let listed = if tar {
            stoker::Dataset::tar(std::slice::from_ref(&p))
        } else {
            stoker::Dataset::tfrecord(std::slice::from_ref(&p))
        };
        let Ok(d) = listed else { continue };
        for s in d.samples() {
            if let Ok(bytes) = s.location.read(limits().max_bytes) {
                assert!(bytes.len() as u64 <= limits().max_bytes);
                assert!(
                    bytes.len() <= data.len(),
                    "{} read more bytes than the shard holds",
                    s.path
                );
            }
        }
    }
}

/// The bytes as a file list: parsing never panics; a listed path stays below the list's
/// folder.
pub fn file_list(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    let p = dir.path().join("list.txt");
    if std::fs::write(&p, data).is_err() {
        return;
    }
    if let Ok(d) = stoker::Dataset::files(&p) {
        for s in d.samples() {
            assert!(
                !s.path.starts_with('/') && !s.path.split('/').any(|c| c == ".."),
                "{:?}",
                s.path
            );
            assert!(s.label.is_none_or(|l| l <= stoker::MAX_LABEL));
        }
    }
}

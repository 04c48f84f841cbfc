//! What each fuzz target checks, shared with `tests/suite/regress.rs`, which replays every file
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
/// decoder (`tests/suite/coeff_decode.rs`): designed to be exact.
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

/// Where two coefficient sets differ (`None`: the frame, the components, the
/// quantisation tables and every block agree).
pub fn coefficient_difference(a: &Coefficients, b: &Coefficients) -> Option<String> {
    let frame = |c: &Coefficients| {
        (
            c.width,
            c.height,
            c.color,
            c.max_h,
            c.max_v,
            c.adobe_inverted,
        )
    };
    if frame(a) != frame(b) {
        return Some(format!("frame {:?} vs {:?}", frame(a), frame(b)));
    }
    if a.components.len() != b.components.len() {
        return Some("component count".into());
    }
    for (ci, (x, y)) in a.components.iter().zip(&b.components).enumerate() {
        let layout = |c: &decode::jpeg::coeffs::Component| {
            (
                c.h_samp,
                c.v_samp,
                c.width_in_blocks,
                c.height_in_blocks,
                c.quant,
            )
        };
        if layout(x) != layout(y) {
            return Some(format!("component {ci}: layout or quantisation"));
        }
        if x.blocks.len() != y.blocks.len() {
            return Some(format!(
                "component {ci}: {} vs {} blocks",
                x.blocks.len(),
                y.blocks.len()
            ));
        }
        if let Some(at) = x.blocks.iter().zip(&y.blocks).position(|(p, q)| p != q) {
            return Some(format!(
                "component {ci} block {at}:\n{:?}\n{:?}",
                x.blocks[at], y.blocks[at]
            ));
        }
    }
    None
}

/// The synchronising Huffman decode's oracle (`decode::jpeg::huffman::sync`), with a
/// subsequence size from the input's last byte (32 to 1024 bits, so that small inputs
/// run many subsequences and sync rounds too): no panic; a status clean but for
/// `STATUS_SIMD_RANGE` means libjpeg reads the file in strict mode without a warning to
/// the same coefficients; and on a file with restart markers it judges clean exactly
/// what the interval oracle judges clean (unless its rounds ran out: `STATUS_NO_SYNC`).
pub fn sync_huffman(data: &[u8]) {
    let bits = 32 * (1 + u32::from(data.last().copied().unwrap_or(0) % 32));
    sync_huffman_at(data, bits);
}

/// [`sync_huffman`] with subsequences of `bits` bits. Returns the decode's status, or
/// `None` for a file it does not take.
pub fn sync_huffman_at(data: &[u8], bits: u32) -> Option<u32> {
    use decode::jpeg::huffman::{self as hf, RestartScan};
    let info = decode::peek_info(data).ok()?;
    let small = Limits {
        max_pixels: 1 << 18,
        ..limits()
    };
    if info.format != decode::Format::Jpeg || decode::check_limits(&info, &small).is_err() {
        return None;
    }
    let scan = RestartScan::parse_sync(data).ok()?;
    let mut ours = Coefficients::default();
    let status = hf::decode_sync_with(&scan, data, bits, hf::sync::MAX_SYNC_ROUNDS, &mut ours)
        .unwrap_or_else(|e| panic!("the sync decode failed on a file it parsed: {e}"));
    let clean = status & !hf::STATUS_SIMD_RANGE == 0;
    // Rounds that did not converge judge nothing: the host path decodes the file.
    let judged = status & hf::STATUS_NO_SYNC == 0;
    if let (true, Ok(rs)) = (judged, RestartScan::parse(data)) {
        let mut by_interval = Coefficients::default();
        let interval = hf::decode_coefficients(&rs, data, &mut by_interval)
            .unwrap_or_else(|e| panic!("the interval oracle failed on a file it parsed: {e}"));
        assert_eq!(
            clean,
            interval & !hf::STATUS_SIMD_RANGE == 0,
            "{bits}-bit subsequences: status {status:#x}, the interval oracle's {interval:#x}"
        );
    }
    if !clean {
        return Some(status);
    }
    let mut theirs = Coefficients::default();
    let r = decode::jpeg::read_coefficients(data, true, &mut theirs);
    // Read whole: ready, or for the CPU decoder only, where the decode flagged a block
    // the SIMD IDCT may treat differently (not for damage: libjpeg filled that in).
    let read = match &r {
        Ok(decode::jpeg::coeffs::CoeffStatus::Ready) => true,
        Ok(decode::jpeg::coeffs::CoeffStatus::CpuOnly(why)) => {
            status & hf::STATUS_SIMD_RANGE != 0 && !why.starts_with("corrupt")
        }
        _ => false,
    };
    assert!(
        read && theirs.warning.is_none(),
        "{bits}-bit subsequences: clean ({status:#x}), but libjpeg: {r:?}, {:?}",
        theirs.warning
    );
    if let Some(d) = coefficient_difference(&ours, &theirs) {
        panic!("{bits}-bit subsequences: clean, but not libjpeg's coefficients: {d}");
    }
    Some(status)
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

/// PNG, WebP, BMP, TIFF and GIF through the header peek and the CPU decoder: no panic,
/// images consistent (scripts/fuzz.sh also fails any single allocation over 256 MB here,
/// far above what the 4 Mpx limit lets a decoder need).
pub fn image_formats(data: &[u8]) {
    let _ = decode::peek_info(data);
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

/// The bytes as a JSON Lines manifest, a CSV manifest and a COCO file: listing never
/// panics; every file a sample names is below the listed folder (paths outside it are
/// refused by default); labels are class ids; in a set where some sample has a label, none
/// is delivered without one; a delivered sample's boxes are ordered, within the bound, and
/// (COCO) of a category the file lists.
pub fn manifests(data: &[u8]) {
    use stoker::source::Location;
    let Ok(dir) = tempfile::tempdir() else { return };
    let below = |l: &Location| match l {
        Location::File(p) => p.strip_prefix(dir.path()).is_ok_and(|r| {
            r.components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
        }),
        _ => true,
    };
    for name in ["m.jsonl", "m.csv", "coco.json"] {
        let p = dir.path().join(name);
        if std::fs::write(&p, data).is_err() {
            return;
        }
        let listed = if name == "coco.json" {
            stoker::Dataset::coco(&p, dir.path())
        } else {
            stoker::Dataset::from_manifest(&p)
        };
        let Ok(d) = listed else { continue };
        let categories: Vec<u64> = serde_json::from_slice::<serde_json::Value>(data)
            .ok()
            .and_then(|v| v.get("categories").and_then(|c| c.as_array()).cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|c| c.get("id").and_then(|i| i.as_u64()))
            .collect();
        let labelled = d.samples().iter().any(|s| s.label.is_some());
        for s in d.samples() {
            assert!(
                below(&s.location) && s.mask.as_ref().is_none_or(below),
                "{name}: {:?} reads outside the folder",
                s.path
            );
            assert!(!s.path.starts_with('/') && !s.path.split('/').any(|c| c == ".."));
            assert!(s.label.is_none_or(|l| l <= stoker::MAX_LABEL));
            if matches!(s.location, Location::Refused { .. }) {
                continue;
            }
            assert!(
                !labelled || s.label.is_some(),
                "{name}: {:?} delivered unlabelled in a labelled set",
                s.path
            );
            let Some(t) = &s.targets else { continue };
            assert!(t.boxes.len() <= stoker::source::target::MAX_TARGETS);
            assert!(t.keypoints.len() <= stoker::source::target::MAX_TARGETS);
            for b in &t.boxes {
                assert!(b.x0 <= b.x1 && b.y0 <= b.y1, "{name}: {:?}: {b:?}", s.path);
                if name == "coco.json" {
                    assert!(
                        categories.contains(&u64::from(b.class)),
                        "{name}: {:?}: class {} is no category",
                        s.path,
                        b.class
                    );
                }
            }
        }
    }
}

/// A small real shard of each kind and its sidecar index, made once per process (see
/// [`shard_index`]).
struct IndexFixture {
    _dir: tempfile::TempDir,
    /// Tar, then TFRecord.
    shards: Vec<IndexedShard>,
}

/// A shard, its bytes, its valid sidecar index and what listing it with that index gives.
struct IndexedShard {
    path: std::path::PathBuf,
    tar: bool,
    bytes: Vec<u8>,
    index: Vec<u8>,
    listed: Result<Listing, String>,
}

/// What listing a shard gives: the classes, and each sample with what reading its image
/// and mask gives.
#[derive(Debug, PartialEq)]
struct Listing {
    classes: Vec<String>,
    samples: Vec<ListedSample>,
}

#[derive(Debug, PartialEq)]
struct ListedSample {
    id: u64,
    path: String,
    label: Option<u32>,
    location: String,
    image: Result<Vec<u8>, String>,
    mask: Option<Result<Vec<u8>, String>>,
}

/// The modification time the fixture's shards are given: the same in every process, so
/// that a sidecar the fuzzer keeps (a seed, a mutation of one) still matches its shard.
const FIXTURE_MTIME_S: u64 = 1_700_000_000;

fn list_shard(path: &std::path::Path, tar: bool) -> Result<Listing, String> {
    let paths = [path.to_path_buf()];
    let d = if tar {
        stoker::Dataset::tar(&paths)
    } else {
        stoker::Dataset::tfrecord(&paths)
    }
    .map_err(|e| e.to_string())?;
    let read = |l: &stoker::source::Location| l.read(limits().max_bytes).map_err(|e| e.to_string());
    Ok(Listing {
        classes: d.classes().to_vec(),
        samples: d
            .samples()
            .iter()
            .map(|s| ListedSample {
                id: s.id,
                path: s.path.clone(),
                label: s.label,
                location: format!("{:?}", s.location),
                image: read(&s.location),
                mask: s.mask.as_ref().map(read),
            })
            .collect(),
    })
}

/// Writes the fixture: six samples with labels and masks in one tar and one TFRecord
/// shard (the TFRecord one with a damaged tail, so its index holds a reported entry), at a
/// fixed modification time, each listed once (which writes its sidecar).
fn index_fixture() -> Option<IndexFixture> {
    use stoker::source::shards::{index_path, ShardFormat, ShardWriter};
    let dir = tempfile::tempdir().ok()?;
    let mut shards = Vec::new();
    for (format, tar) in [(ShardFormat::Tar, true), (ShardFormat::TfRecord, false)] {
        let sub = dir.path().join(if tar { "tar" } else { "tfrecord" });
        let classes = vec!["a".to_string(), "b".into(), "c".into()];
        let mut w = ShardWriter::new(format, &sub, "fz", u64::MAX)
            .ok()?
            .with_classes(classes);
        for i in 0..6u32 {
            // Bytes that sniff as a JPEG and a PNG: listing and reading never decode.
            let mut image = vec![0xFF, 0xD8, 0xFF, 0xE0];
            image.extend((0..100 + 300 * i).map(|k| (k * 7 + i) as u8));
            let mut mask = b"\x89PNG\r\n\x1a\n".to_vec();
            mask.extend((0..20 + 50 * i).map(|k| (k + i) as u8));
            w.add(
                &format!("c{}/s{i}.jpg", i % 3),
                &image,
                Some(i % 3),
                Some(&mask[..]),
            )
            .ok()?;
        }
        let written = w.finish().ok()?;
        let path = written.first()?.clone();
        if !tar {
            let mut f = std::fs::OpenOptions::new().append(true).open(&path).ok()?;
            std::io::Write::write_all(&mut f, b"not a record header, a damaged tail").ok()?;
        }
        let f = std::fs::OpenOptions::new().write(true).open(&path).ok()?;
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(FIXTURE_MTIME_S))
            .ok()?;
        drop(f);
        let listed = list_shard(&path, tar);
        let index = std::fs::read(index_path(&path)).ok()?;
        let bytes = std::fs::read(&path).ok()?;
        assert!(listed.is_ok(), "the fixture lists: {listed:?}");
        assert_eq!(
            list_shard(&path, tar),
            listed,
            "the fixture lists the same with its sidecar"
        );
        assert_eq!(
            std::fs::read(index_path(&path)).ok().as_deref(),
            Some(&index[..]),
            "the fixture's sidecar is kept"
        );
        shards.push(IndexedShard {
            path,
            tar,
            bytes,
            index,
            listed,
        });
    }
    Some(IndexFixture { _dir: dir, shards })
}

/// The fuzz inputs that are [`shard_index`]'s seeds: each fixture shard's valid sidecar
/// as it is (raw mode) and with no edits (sealed mode), named for the files of
/// `tests/data/shard_index/`.
pub fn shard_index_seeds() -> Vec<(String, Vec<u8>)> {
    let fx = index_fixture().expect("the index fixture");
    let mut out = Vec::new();
    for (k, sh) in fx.shards.iter().enumerate() {
        let kind = if sh.tar { "tar" } else { "tfrecord" };
        let mut raw = vec![k as u8];
        raw.extend_from_slice(&sh.index);
        out.push((format!("{kind}-index"), raw));
        out.push((format!("{kind}-sealed"), vec![k as u8 | 2]));
    }
    out
}

/// Applies edits (10 bytes each: what, which entry, a 64-bit value) to the entries of the
/// JSON index `index`: set an entry's offset, length, label, mask range, path or flags;
/// remove, duplicate or swap entries.
fn edit_entries(index: &[u8], edits: &[u8]) -> Option<Vec<u8>> {
    use serde_json::{json, Value};
    let mut ix: Value = serde_json::from_slice(index).ok()?;
    let entries = ix.get_mut("entries")?.as_array_mut()?;
    for op in edits.chunks_exact(10).take(16) {
        let n = entries.len();
        if n == 0 {
            break;
        }
        let i = usize::from(op[1]) % n;
        let mut v = [0u8; 8];
        v.copy_from_slice(&op[2..10]);
        let a = u64::from_le_bytes(v);
        let e = &mut entries[i];
        match op[0] % 10 {
            0 => e["offset"] = json!(a),
            1 => e["len"] = json!(a),
            2 => e["label"] = json!(a as i64),
            3 => e["mask"] = json!([a >> 32, a & 0xFFFF_FFFF]),
            4 => e["path"] = json!(format!("c{}/s{}.jpg", a % 3, a % 8)),
            5 => {
                e["problem"] = Value::Null;
                e["unread"] = json!(a & 1 == 1);
            }
            6 => {
                entries.remove(i);
            }
            7 => {
                let d = entries[i].clone();
                entries.insert(i, d);
            }
            8 => entries.swap(i, (a % n as u64) as usize),
            _ => {
                let o = e["offset"].as_u64()?;
                e["offset"] = json!(o.wrapping_add(a % 1024));
            }
        }
    }
    stoker::source::shards::seal_index(&serde_json::to_vec(&ix).ok()?)
}

/// One of a process's inputs at a time: they share the fixture's sidecars.
static INDEX_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The bytes as the sidecar index of a real shard. The first byte picks the shard (bit 0:
/// tar or TFRecord) and the mode (bit 1): raw, the rest of the bytes are the sidecar (the
/// fixture's shards have a fixed modification time, so a mutated valid index still
/// matches its shard's stamp); or sealed, the rest are edits to the valid index's entries
/// ([`edit_entries`]) after which its digest is made to hold again, to reach what an index
/// that passes the digest can do.
///
/// Whatever the bytes: no panic, no allocation beyond the byte limit. A raw sidecar,
/// rejected and rebuilt or accepted, lists every sample exactly as the valid index does
/// (same ids, paths, labels, classes, locations, bytes read or reasons): a damaged or
/// edited sidecar neither drops, adds nor moves a sample. A sealed one that is accepted
/// reads no byte outside the shard: a tar sample's bytes are its range of the shard.
pub fn shard_index(data: &[u8]) {
    static FIXTURE: std::sync::OnceLock<Option<IndexFixture>> = std::sync::OnceLock::new();
    let Some(fx) = FIXTURE.get_or_init(index_fixture) else {
        return;
    };
    let _one = INDEX_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (head, rest) = data.split_first().map_or((0, &[][..]), |(h, r)| (*h, r));
    let Some(sh) = fx.shards.get(usize::from(head & 1)) else {
        return;
    };
    let sealed = head & 2 != 0;
    let sidecar = if sealed {
        match edit_entries(&sh.index, rest) {
            Some(s) => s,
            None => return,
        }
    } else {
        rest.to_vec()
    };
    let side = stoker::source::shards::index_path(&sh.path);
    if std::fs::write(&side, &sidecar).is_err() {
        return;
    }
    let listed = list_shard(&sh.path, sh.tar);
    let after = std::fs::read(&side).unwrap_or_default();
    let rebuilt = after != sidecar;
    if rebuilt {
        assert_eq!(after, sh.index, "a rejected sidecar is rebuilt as it was");
    }
    if !sealed || rebuilt || sidecar == sh.index {
        assert_eq!(
            listed, sh.listed,
            "the sidecar (rebuilt: {rebuilt}) changed what the shard lists"
        );
        return;
    }
    // An accepted sealed sidecar: whatever it lists reads inside the shard.
    let Ok(listing) = listed else { return };
    let d = if sh.tar {
        stoker::Dataset::tar(std::slice::from_ref(&sh.path))
    } else {
        stoker::Dataset::tfrecord(std::slice::from_ref(&sh.path))
    };
    let Ok(d) = d else {
        panic!("listed once, then not");
    };
    for (s, l) in d.samples().iter().zip(&listing.samples) {
        for (loc, got) in std::iter::once((&s.location, Some(&l.image)))
            .chain(s.mask.as_ref().map(|m| (m, l.mask.as_ref())))
        {
            let Some(Ok(bytes)) = got else { continue };
            assert!(
                bytes.len() <= sh.bytes.len(),
                "{}: more bytes than the shard",
                s.path
            );
            let range = match loc {
                stoker::source::Location::Range { offset, len, .. } => Some((offset, len)),
                stoker::source::Location::Member(m) => Some((&m.offset, &m.len)),
                _ => None,
            };
            if let Some((offset, len)) = range {
                let range = usize::try_from(*offset)
                    .ok()
                    .and_then(|o| Some(o..o.checked_add(usize::try_from(*len).ok()?)?));
                let inside = range.and_then(|r| sh.bytes.get(r));
                assert_eq!(
                    inside,
                    Some(&bytes[..]),
                    "{}: bytes outside its range",
                    s.path
                );
            }
        }
    }
}

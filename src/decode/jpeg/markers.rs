//! The JPEG marker scan: the frame header, the EXIF orientation and the Adobe transform,
//! read from the segments before the first scan without decoding anything.
//!
//! Written here rather than taken from a crate: the pipeline reads every file's headers
//! before it plans (crop, scale, limits, which decode path) and must never allocate on
//! what a header claims, so it needs a scan that stops at the first scan, borrows the
//! bytes and fails with typed errors on anything malformed. The decoders that read
//! headers (zune-jpeg, jpeg-decoder, libjpeg) parse them as part of setting up a decode
//! and give neither the EXIF orientation nor the Adobe transform without decoding.
#![doc(hidden)]

use crate::decode::{DecodeError, Format, ImageInfo, JpegProcess};

/// Reads the headers of a JPEG (which must start with `FF D8`).
pub fn peek(bytes: &[u8]) -> Result<ImageInfo, DecodeError> {
    let mut i = 2;
    let mut orientation = 1;
    let mut adobe_transform = None;
    loop {
        // Skip fill bytes and anything that is not a marker (tolerated, as decoders do).
        while i < bytes.len() && bytes[i] != 0xFF {
            i += 1;
        }
        while i < bytes.len() && bytes[i] == 0xFF {
            i += 1;
        }
        let Some(&marker) = bytes.get(i) else {
            return Err(DecodeError::BadHeader(
                "no frame header (SOF) before the end of the file".into(),
            ));
        };
        i += 1;
        match marker {
            0xD8 | 0x01 | 0xD0..=0xD7 => continue,
            0xD9 => {
                return Err(DecodeError::BadHeader(
                    "end of image before any frame".into(),
                ))
            }
            0xDA => {
                return Err(DecodeError::BadHeader(
                    "scan before any frame header".into(),
                ))
            }
            _ => {}
        }
        let len = bytes
            .get(i..i + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .ok_or_else(|| DecodeError::BadHeader("segment length cut off".into()))?;
        if len < 2 {
            if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
                return Err(DecodeError::BadHeader(format!(
                    "frame header {marker:02X} has length {len}"
                )));
            }
            // libjpeg skips nothing past the length bytes of such a segment; neither do we.
            i += 2;
            continue;
        }
        let body = bytes.get(i + 2..(i + len).min(bytes.len())).unwrap_or(&[]);
        match marker {
            0xE1 if body.starts_with(b"Exif\0\0") && orientation == 1 => {
                orientation = exif_orientation(&body[6..]).unwrap_or(1);
            }
            0xEE if body.starts_with(b"Adobe") && body.len() >= 12 => {
                adobe_transform = Some(body[11]);
            }
            _ => {}
        }
        let process = match marker {
            0xC0 => Some(JpegProcess::Baseline),
            0xC1 => Some(JpegProcess::Extended),
            0xC2 => Some(JpegProcess::Progressive),
            0xC3 => Some(JpegProcess::Lossless),
            0xC5..=0xC7 | 0xCD..=0xCF => Some(JpegProcess::Hierarchical),
            0xC9..=0xCB => Some(JpegProcess::Arithmetic),
            _ => None,
        };
        if let Some(process) = process {
            let sof = body
                .get(..6)
                .ok_or_else(|| DecodeError::BadHeader("frame header cut off".into()))?;
            let (precision, components) = (sof[0], sof[5]);
            let precision_ok = match process {
                JpegProcess::Lossless => (2..=16).contains(&precision),
                _ => precision == 8 || precision == 12,
            };
            if !precision_ok || !(1..=4).contains(&components) {
                return Err(DecodeError::BadHeader(format!(
                    "frame header with {components} components of {precision} bits"
                )));
            }
            let height = u32::from(u16::from_be_bytes([sof[1], sof[2]]));
            let width = u32::from(u16::from_be_bytes([sof[3], sof[4]]));
            return Ok(ImageInfo {
                format: Format::Jpeg,
                width,
                height,
                components,
                bit_depth: precision,
                process: Some(process),
                orientation,
                adobe_transform,
            });
        }
        i += len;
    }
}

/// The orientation tag (0x0112) of IFD0 in a TIFF-structured EXIF block; `None` when the
/// block is malformed or the value is outside 1-8.
pub fn exif_orientation(tiff: &[u8]) -> Option<u8> {
    let le = match tiff.get(..4)? {
        [b'I', b'I', 42, 0] => true,
        [b'M', b'M', 0, 42] => false,
        _ => return None,
    };
    let u16_at = |o: usize| -> Option<u16> {
        let b = tiff.get(o..o + 2)?;
        Some(if le {
            u16::from_le_bytes([b[0], b[1]])
        } else {
            u16::from_be_bytes([b[0], b[1]])
        })
    };
    let u32_at = |o: usize| -> Option<u32> {
        let b = tiff.get(o..o + 4)?;
        Some(if le {
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        } else {
            u32::from_be_bytes([b[0], b[1], b[2], b[3]])
        })
    };
    let ifd = u32_at(4)? as usize;
    let count = usize::from(u16_at(ifd)?);
    for k in 0..count.min(512) {
        let e = ifd + 2 + 12 * k;
        if u16_at(e)? == 0x0112 {
            // Type SHORT (3), count 1: the value sits in the first two bytes of the field.
            let v = u16_at(e + 8)?;
            return (1..=8).contains(&v).then_some(v as u8);
        }
    }
    None
}

/// The marker segments of a JPEG's header, in file order, as `(marker, offset of the
/// marker, its length field)`: up to and including the first scan header (SOS); stops at
/// the end-of-image marker or where the data runs out. Fill bytes, standalone markers and
/// bytes that are not a marker are stepped over.
fn header_segments(bytes: &[u8]) -> impl Iterator<Item = (u8, usize, usize)> + '_ {
    let mut i = 2;
    std::iter::from_fn(move || {
        while i + 4 <= bytes.len() {
            if bytes[i] != 0xFF {
                i += 1;
                continue;
            }
            let marker = bytes[i + 1];
            if marker == 0xFF || marker == 0x01 || (0xD0..=0xD8).contains(&marker) {
                i += if marker == 0xFF { 1 } else { 2 };
                continue;
            }
            if marker == 0xD9 {
                return None;
            }
            let at = i;
            let len = usize::from(u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]));
            // Nothing after the first scan header is header.
            i = if marker == 0xDA {
                bytes.len()
            } else {
                i + 2 + len.max(2)
            };
            return Some((marker, at, len));
        }
        None
    })
}

/// Whether a scan of this JPEG uses a quantisation or Huffman table the file has not
/// defined before that scan. libjpeg keeps tables from one image to the next on a reused
/// decompressor (for abbreviated streams), so such a file would borrow the previous
/// image's tables there, while a fresh decompressor refuses it (quantisation) or takes the
/// standard tables (Huffman): the decoders give it a fresh one. Conservative: a Huffman
/// table a scan names is counted as used even where the scan would not read it.
pub fn borrows_tables(bytes: &[u8]) -> bool {
    let (mut quant, mut dc, mut ac) = ([false; 4], [false; 4], [false; 4]);
    // Each frame component's (id, quantisation table); libjpeg takes at most 10. A fixed
    // array: this runs on every decode, which must not allocate.
    let mut frame = [(0u8, 0u8); 10];
    let mut frame_len = 0;
    let (mut arithmetic, mut progressive) = (false, false);
    let mut i = 2;
    loop {
        let Some(k) = bytes.get(i..).and_then(|rest| memchr::memchr(0xFF, rest)) else {
            return false;
        };
        i += k;
        let Some(&m) = bytes.get(i + 1) else {
            return false;
        };
        match m {
            0xFF => {
                i += 1;
                continue;
            }
            0x00 | 0x01 | 0xD0..=0xD8 => {
                i += 2;
                continue;
            }
            0xD9 => return false,
            _ => {}
        }
        let Some(len) = bytes
            .get(i + 2..i + 4)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        else {
            return false;
        };
        let body = bytes
            .get(i + 4..(i + 2 + len).min(bytes.len()))
            .unwrap_or(&[]);
        match m {
            0xDB => {
                let mut j = 0;
                while let Some(&pq_tq) = body.get(j) {
                    if let Some(q) = quant.get_mut(usize::from(pq_tq & 0x0F)) {
                        *q = true;
                    }
                    j += 1 + 64 * (1 + usize::from(pq_tq >> 4 != 0));
                }
            }
            0xC4 => {
                let mut j = 0;
                while let Some(&tc_th) = body.get(j) {
                    let Some(counts) = body.get(j + 1..j + 17) else {
                        break;
                    };
                    let table = if tc_th & 0x10 != 0 { &mut ac } else { &mut dc };
                    if let Some(t) = table.get_mut(usize::from(tc_th & 0x0F)) {
                        *t = true;
                    }
                    j += 17 + counts.iter().map(|&c| usize::from(c)).sum::<usize>();
                }
            }
            0xC0..=0xCF if !matches!(m, 0xC4 | 0xC8 | 0xCC) => {
                arithmetic = m >= 0xC9;
                progressive = matches!(m, 0xC2 | 0xC6 | 0xCA | 0xCE);
                let n = body.get(5).map_or(0, |&n| usize::from(n));
                frame_len = 0;
                for (f, c) in frame
                    .iter_mut()
                    .zip(body.get(6..6 + 3 * n).unwrap_or(&[]).chunks_exact(3))
                {
                    *f = (c[0], c[2]);
                    frame_len += 1;
                }
            }
            0xDA => {
                let n = body.first().map_or(0, |&n| usize::from(n));
                for c in body.get(1..1 + 2 * n).unwrap_or(&[]).chunks_exact(2) {
                    let tq = frame[..frame_len].iter().find(|f| f.0 == c[0]).map(|f| f.1);
                    let defined = |t: &[bool; 4], id: u8| t.get(usize::from(id)) == Some(&true);
                    let huffman_ok =
                        arithmetic || (defined(&dc, c[1] >> 4) && defined(&ac, c[1] & 0x0F));
                    if tq.is_some_and(|tq| !defined(&quant, tq)) || !huffman_ok {
                        return true;
                    }
                }
                // A sequential scan of every component is the only one libjpeg reads
                // (it refuses a second): the entropy-coded data need not be walked.
                if !progressive && n == frame_len {
                    return false;
                }
            }
            _ => {}
        }
        i += 2 + len.max(2);
    }
}

/// Whether the headers before the first scan define a restart interval (a DRI segment
/// with a non-zero interval).
pub fn has_restart_interval(bytes: &[u8]) -> bool {
    header_segments(bytes).any(|(m, i, len)| {
        m == 0xDD && len >= 4 && bytes.get(i + 4..i + 6).is_some_and(|b| b != [0, 0])
    })
}

/// The `(horizontal, vertical)` sampling factors of each component, from the frame
/// header; `None` when there is no readable one.
pub fn sampling_factors(bytes: &[u8]) -> Option<Vec<(u8, u8)>> {
    let is_sof = |m: u8| (0xC0..=0xCF).contains(&m) && !matches!(m, 0xC4 | 0xC8 | 0xCC);
    let (_, i, len) = header_segments(bytes).find(|&(m, _, _)| is_sof(m))?;
    let body = bytes.get(i + 4..i + 2 + len)?;
    let n = usize::from(*body.get(5)?);
    let comps = body.get(6..6 + 3 * n)?;
    Some(
        comps
            .chunks_exact(3)
            .map(|c| (c[1] >> 4, c[1] & 15))
            .collect(),
    )
}

/// What every JPEG decode path checks before libjpeg sees the file: the features this
/// build does not decode (a typed `Unsupported`). A missing end marker is not refused
/// here: where the data ends (inside a scan or after one) decides, which only the
/// decoder knows.
pub(crate) fn jpeg_preflight(info: &ImageInfo) -> Result<(), DecodeError> {
    match info.process {
        Some(JpegProcess::Lossless) => {
            return Err(DecodeError::Unsupported("lossless JPEG (SOF3)".into()))
        }
        Some(JpegProcess::Hierarchical) => {
            return Err(DecodeError::Unsupported("hierarchical JPEG".into()))
        }
        _ => {}
    }
    if info.bit_depth != 8 {
        return Err(DecodeError::Unsupported(format!(
            "{}-bit JPEG",
            info.bit_depth
        )));
    }
    Ok(())
}

/// Whether the file ends with an end-of-image marker (trailing zero padding allowed): a
/// file cut short does not. Decoders that stop before the end of the data (a crop that
/// ends above the last row, a hardware decoder) take only such files, so that where a
/// file without one ends is judged by a decoder that reads it all.
pub(crate) fn ends_with_eoi(bytes: &[u8]) -> bool {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    bytes[..end].ends_with(&[0xFF, 0xD9])
}

/// The runs of extraneous bytes between marker segments (outside entropy-coded data), as
/// libjpeg counts them: `(bytes, the marker after them)`, in file order, at most 64.
/// Bytes after a scan's entropy-coded data are not found here: only the decoder knows
/// where a scan's data ends.
pub fn segment_gaps(bytes: &[u8]) -> Vec<(usize, u8)> {
    walk_gaps(
        bytes,
        |bytes, i| memchr::memchr(0xFF, &bytes[i..]).map_or(bytes.len(), |k| i + k),
        |bytes, mut i| {
            // The next FF that is not stuffed (`FF 00`), a fill byte or a restart marker.
            while i + 1 < bytes.len() {
                let Some(k) = memchr::memchr(0xFF, &bytes[i..bytes.len() - 1]) else {
                    return bytes.len() - 1;
                };
                i += k;
                if !matches!(bytes[i + 1], 0x00 | 0xFF | 0xD0..=0xD7) {
                    break;
                }
                i += 1;
            }
            i
        },
    )
}

/// [`segment_gaps`]' walk over the marker segments, with its two searches given:
/// `next_ff(bytes, i)`, the first `FF` at or after `i` (or the end), and
/// `scan_end(bytes, i)`, where the entropy-coded data that starts at `i` ends (the next
/// marker that is not a restart).
fn walk_gaps(
    bytes: &[u8],
    next_ff: impl Fn(&[u8], usize) -> usize,
    scan_end: impl Fn(&[u8], usize) -> usize,
) -> Vec<(usize, u8)> {
    let mut gaps = Vec::new();
    let mut i = 2;
    let mut carried = 0;
    while i + 1 < bytes.len() && gaps.len() < 64 {
        // `i` is the end of a segment: count the bytes before the next marker.
        let start = i;
        i = next_ff(bytes, i);
        let skipped = i - start;
        while i + 1 < bytes.len() && bytes[i + 1] == 0xFF {
            i += 1; // fill bytes before a marker are not counted
        }
        let Some(&marker) = bytes.get(i + 1) else {
            break;
        };
        if marker == 0x00 {
            // libjpeg counts `FF 00` as two extraneous bytes and looks on.
            carried += skipped + 2;
            i += 2;
            continue;
        }
        if carried + skipped > 0 {
            gaps.push((carried + skipped, marker));
        }
        carried = 0;
        i += 2;
        match marker {
            0xD9 => break,
            0xD8 | 0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        let Some(len) = bytes
            .get(i..i + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        else {
            break;
        };
        i += len.max(2);
        if marker == 0xDA {
            i = scan_end(bytes, i);
        }
    }
    gaps
}

/// The number of components in the first scan header (SOS), `None` when there is no
/// readable one.
pub fn first_scan_components(bytes: &[u8]) -> Option<u8> {
    let (_, i, _) = header_segments(bytes).find(|&(m, _, _)| m == 0xDA)?;
    bytes.get(i + 4).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_orientation_in_both_byte_orders() {
        // II, IFD at 8, one entry: tag 0x0112, type 3, count 1, value 6.
        let le = [
            b'I', b'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0,
        ];
        assert_eq!(exif_orientation(&le), Some(6));
        let be = [
            b'M', b'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 8, 0, 0,
        ];
        assert_eq!(exif_orientation(&be), Some(8));
        assert_eq!(exif_orientation(&le[..12]), None);
        assert_eq!(exif_orientation(b"garbage"), None);
    }

    #[test]
    fn gaps_between_segments_are_found_but_not_inside_scans() {
        // SOI, APP0 (len 4), 3 stray bytes, DQT-like segment (len 2), SOS (len 3, one
        // component) with data holding a stuffed FF and a restart, 2 stray bytes, EOI.
        let f = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 1, 2, 7, 7, 7, 0xFF, 0xFF, 0xDB, 0x00, 0x02, 0xFF,
            0xDA, 0x00, 0x03, 0x01, 0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56, 9, 9, 0xFF, 0xD9,
        ];
        assert_eq!(segment_gaps(&f), vec![(3, 0xDB)]);
        assert_eq!(first_scan_components(&f), Some(1));
        assert!(ends_with_eoi(&f));
        let mut padded = f.to_vec();
        padded.extend_from_slice(&[0, 0]);
        assert!(ends_with_eoi(&padded));
        assert!(!ends_with_eoi(&f[..f.len() - 1]));
        assert!(!ends_with_eoi(&[]));
        assert_eq!(segment_gaps(&f[..5]), vec![]);
        assert_eq!(first_scan_components(&f[..12]), None);
    }

    /// The searches done one byte at a time, as libjpeg reads: what [`segment_gaps`] must
    /// find with its faster ones.
    fn plain_gaps(bytes: &[u8]) -> Vec<(usize, u8)> {
        walk_gaps(
            bytes,
            |bytes, mut i| {
                while i < bytes.len() && bytes[i] != 0xFF {
                    i += 1;
                }
                i
            },
            |bytes, mut i| {
                while i + 1 < bytes.len() {
                    if bytes[i] == 0xFF && !matches!(bytes[i + 1], 0x00 | 0xFF | 0xD0..=0xD7) {
                        break;
                    }
                    i += 1;
                }
                i
            },
        )
    }

    /// Every test JPEG, cut short at random points and with random bytes (many of them
    /// FF) written over random places: the gaps found are the plain scan's.
    #[test]
    fn gaps_are_those_of_the_plain_scan() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jpeg");
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: usize| -> usize {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1) as u64) as usize
        };
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).expect("tests/data/jpeg") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "jpg") {
                continue;
            }
            let bytes = std::fs::read(&path).expect("test file");
            files += 1;
            assert_eq!(
                segment_gaps(&bytes),
                plain_gaps(&bytes),
                "{}",
                path.display()
            );
            for _ in 0..20 {
                let mut b = bytes[..2 + next(bytes.len().saturating_sub(1))].to_vec();
                for _ in 0..next(6) {
                    let at = next(b.len());
                    let v = [0xFF, 0x00, 0xD0 + next(8) as u8, 0xD9, next(256) as u8][next(5)];
                    b[at] = v;
                }
                assert_eq!(
                    segment_gaps(&b),
                    plain_gaps(&b),
                    "{} mutated",
                    path.display()
                );
            }
        }
        assert!(files > 10, "only {files} test JPEGs");
    }

    #[test]
    fn sampling_factors_read_the_frame_header() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jpeg");
        let read = |f: &str| std::fs::read(dir.join(f)).expect("test file");
        assert_eq!(
            sampling_factors(&read("go_video-001_q50_444.jpg")),
            Some(vec![(1, 1), (1, 1), (1, 1)])
        );
        assert_eq!(
            sampling_factors(&read("go_video-001_q50_411.jpg")),
            Some(vec![(4, 1), (1, 1), (1, 1)])
        );
        assert_eq!(
            sampling_factors(&read("jd_moz_jpg-gray.jpg")).map(|f| f.len()),
            Some(1)
        );
        assert_eq!(sampling_factors(&read("jd_crash_missing-sof.jpg")), None);
        assert_eq!(sampling_factors(&[0xFF, 0xD8]), None);
    }
}

//! Files too short for the image their headers declare, refused before any pixel buffer
//! is allocated.
//!
//! The `image` crate's decoders write into an output buffer of the declared size, which
//! must exist before they read the first pixel; the WebP decoder also sizes its own frame
//! buffers from the headers before it reads the data. A small file whose header claims an
//! image just under [`Limits::max_pixels`](super::Limits) would cost hundreds of MB before
//! its missing data is noticed. Where the data a decoder must read can be bounded from the
//! headers, [`check`] compares that bound with the bytes present first:
//!
//! - BMP without compression: every row but the last is read whole with its padding, and
//!   the last up to its last pixel; RLE4 and RLE8: the instruction stream is walked (no
//!   pixel is decoded) and must reach its end-of-bitmap or its last row before the file
//!   ends, as the decoder requires.
//! - WebP lossy (`VP8 `, also inside `VP8X`): the first partition, which the decoder reads
//!   whole, must be present, and hold at least one bit per two macroblocks (a key frame
//!   codes at least a luma and a chroma mode per macroblock with fixed probabilities,
//!   1.67 bits or more); a frame must have the canvas size of its `VP8X` header; raw
//!   alpha (`ALPH`) must hold a byte per pixel.
//! - GIF: the decoder refuses a first frame its LZW data does not fill; a code takes two
//!   bits at least and gives 4096 pixels at most (the longest string of a full table), so
//!   the frame may not have more pixels than 16384 per byte of its data.
//!
//! Each bound is what the decoder itself would find missing: a file refused here fails
//! there too, later. A lossless WebP (`VP8L`), a TIFF's strips and an RLE bitmap's runs
//! can code a large image in a few bytes: those are decoded (within the limits) and
//! refused by their decoder when the data runs out.

use super::{DecodeError, Format, ImageInfo};

/// Refuses `bytes` (whose headers say `info`) when they cannot hold the data the decoder
/// will read (see the module's documentation); other formats pass.
pub(crate) fn check(bytes: &[u8], info: &ImageInfo) -> Result<(), DecodeError> {
    let r = match info.format {
        Format::Bmp => bmp(bytes, info),
        Format::Webp => webp(bytes, info),
        Format::Gif => gif(bytes),
        _ => Ok(()),
    };
    r.map_err(|short| DecodeError::Image {
        format: info.format.name(),
        reason: short.to_string(),
    })
}

/// Why a file cannot hold the data its headers declare (each a bound broken, from the
/// header's numbers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Short {
    /// An uncompressed BMP's pixels past the end.
    #[error(
        "{w}x{h} pixels of {bpp} bits need {need} bytes from offset {start}, the file has {len}"
    )]
    BmpPixels {
        w: u64,
        h: u64,
        bpp: u64,
        need: u64,
        start: u64,
        len: u64,
    },
    /// RLE data that ends before its last row.
    #[error("the RLE data ends after {rows} of {height} rows, without an end of bitmap")]
    Rle { rows: u64, height: u64 },
    /// Raw WebP alpha of less than a byte per pixel.
    #[error("raw alpha of {w}x{h} pixels needs {} bytes, the file has {present}", w * h)]
    Alpha { w: u64, h: u64, present: u64 },
    /// A WebP frame of another size than its canvas.
    #[error("the {what} frame is {}x{}, the image {}x{}", frame.0, frame.1, canvas.0, canvas.1)]
    FrameSize {
        what: String,
        frame: (u64, u64),
        canvas: (u64, u64),
    },
    /// A lossy frame's first partition past the data.
    #[error(
        "the lossy frame's first partition of {first} bytes ends past the data \
         ({present} bytes with the frame header)"
    )]
    Partition { first: u64, present: u64 },
    /// A first partition too short for its macroblocks' modes.
    #[error(
        "a first partition of {first} bytes cannot code the modes of {macroblocks} macroblocks"
    )]
    Modes { first: u64, macroblocks: u64 },
    /// A GIF frame with more pixels than its LZW data can give.
    #[error("the first frame's {w}x{h} pixels cannot come from {data} bytes of LZW data")]
    Lzw { w: u64, h: u64, data: u64 },
}

fn le16(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn le32(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(
        b.get(at..at + 4)?.try_into().ok()?,
    )))
}

fn bmp(bytes: &[u8], info: &ImageInfo) -> Result<(), Short> {
    // File header: "BM", size, reserved, offset of the pixels; then the info header, whose
    // first field is its size: 12 for the OS/2 core header, 40 or more otherwise.
    let (Some(offset), Some(header)) = (le32(bytes, 10), le32(bytes, 14)) else {
        return Ok(());
    };
    let (bpp, compression) = if header == 12 {
        (le16(bytes, 24), Some(0))
    } else {
        (le16(bytes, 28), le32(bytes, 30))
    };
    let (Some(bpp), Some(compression)) = (bpp, compression) else {
        return Ok(());
    };
    // The decoder reads from the offset, or from the end of the headers when the offset
    // points inside them: the nearer of the two bounds where it starts.
    let start = offset.min(14 + header);
    let len = bytes.len() as u64;
    let (w, h) = (u64::from(info.width), u64::from(info.height));
    match (compression, bpp) {
        (0 | 3 | 6, 1 | 2 | 4 | 8 | 16 | 24 | 32) => {
            let row = (bpp * w).div_ceil(32) * 4;
            let need = row * h.saturating_sub(1) + (bpp * w).div_ceil(8);
            if start.saturating_add(need) > len {
                return Err(Short::BmpPixels {
                    w,
                    h,
                    bpp,
                    need,
                    start,
                    len,
                });
            }
            Ok(())
        }
        (1 | 2, _) => rle(bytes, start, h, compression == 2),
        _ => Ok(()),
    }
}

/// Walks the RLE instructions from `start`: each is two bytes, `(n, index)` a run, `(0, 0)`
/// an end of row, `(0, 1)` the end of the bitmap, `(0, 2, dx, dy)` a move, `(0, n)` `n`
/// literal pixels (bytes, or nibbles for RLE4) padded to an even count.
fn rle(bytes: &[u8], start: u64, height: u64, rle4: bool) -> Result<(), Short> {
    let mut i = usize::try_from(start).unwrap_or(usize::MAX);
    let mut rows = 0u64;
    while rows < height {
        let (Some(&count), Some(&op)) = (bytes.get(i), bytes.get(i.saturating_add(1))) else {
            return Err(Short::Rle { rows, height });
        };
        i += 2;
        if count != 0 {
            continue;
        }
        match op {
            0 => rows += 1,
            1 => return Ok(()),
            2 => {
                let dy = bytes.get(i + 1).copied().unwrap_or(0);
                i += 2;
                rows += u64::from(dy);
            }
            n => {
                let n = usize::from(n);
                let n = if rle4 { n.div_ceil(2) } else { n };
                i += n + (n & 1);
            }
        }
    }
    Ok(())
}

/// The chunks of a RIFF WebP: (fourcc, payload as present in the file, declared size).
fn chunks(bytes: &[u8]) -> Vec<([u8; 4], &[u8], u64)> {
    let end = le32(bytes, 4).map_or(0, |s| (s as usize).saturating_add(8));
    let end = end.min(bytes.len());
    let mut out = Vec::new();
    let mut at = 12usize;
    while at + 8 <= end {
        let mut fourcc = [0u8; 4];
        fourcc.copy_from_slice(&bytes[at..at + 4]);
        let size = le32(bytes, at + 4).unwrap_or(0);
        let from = at + 8;
        let to = from.saturating_add(size as usize).min(end);
        out.push((fourcc, &bytes[from..to], size));
        at = from
            .saturating_add(size as usize)
            .saturating_add(size as usize & 1);
        if out.len() >= 64 {
            break;
        }
    }
    out
}

fn webp(bytes: &[u8], info: &ImageInfo) -> Result<(), Short> {
    let chunks = chunks(bytes);
    if chunks.iter().any(|(c, ..)| c == b"ANIM" || c == b"ANMF") {
        // Animated: frames of their own sizes on the canvas, decoded one by one.
        return Ok(());
    }
    let (w, h) = (u64::from(info.width), u64::from(info.height));
    for (fourcc, data, declared) in &chunks {
        match fourcc {
            b"VP8 " => vp8(data, *declared, w, h)?,
            b"VP8L" => {
                // The signature, then 14 bits of width - 1 and 14 of height - 1.
                if let Some(bits) = le32(data, 1) {
                    let fw = (bits & 0x3FFF) + 1;
                    let fh = ((bits >> 14) & 0x3FFF) + 1;
                    same_size("lossless", (fw, fh), (w, h))?;
                }
            }
            b"ALPH" => {
                // Raw alpha (compression 0): one byte per pixel after the header byte.
                if let Some(&head) = data.first() {
                    let present = data.len() as u64 - 1;
                    if head & 3 == 0 && present < w * h {
                        return Err(Short::Alpha { w, h, present });
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn same_size(what: &str, frame: (u64, u64), canvas: (u64, u64)) -> Result<(), Short> {
    if frame != canvas {
        return Err(Short::FrameSize {
            what: what.to_string(),
            frame,
            canvas,
        });
    }
    Ok(())
}

/// A lossy frame: a 3-byte tag (key frame bit, version, shown bit, 19 bits of first
/// partition size); a key frame then has a start code and 14-bit width and height.
fn vp8(data: &[u8], declared: u64, w: u64, h: u64) -> Result<(), Short> {
    let Some(tag) = data.get(..3) else {
        return Ok(());
    };
    let tag = u64::from(tag[0]) | (u64::from(tag[1]) << 8) | (u64::from(tag[2]) << 16);
    let first = tag >> 5;
    let header = if tag & 1 == 0 { 10 } else { 3 };
    if tag & 1 == 0 {
        if let (Some(fw), Some(fh)) = (le16(data, 6), le16(data, 8)) {
            same_size("lossy", (fw & 0x3FFF, fh & 0x3FFF), (w, h))?;
        }
    }
    let present = (data.len() as u64).min(declared);
    if header + first > present {
        return Err(Short::Partition { first, present });
    }
    let macroblocks = w.div_ceil(16) * h.div_ceil(16);
    // With the decoder's tolerance of a few bytes read past the end.
    let bits = 8 * (first + 8);
    if macroblocks > 2 * bits {
        return Err(Short::Modes { first, macroblocks });
    }
    Ok(())
}

/// Skips GIF sub-blocks from `at` (a size byte, that many bytes, up to a size of 0):
/// where they end, and the bytes of data they hold (those present).
fn sub_blocks(bytes: &[u8], mut at: usize) -> (usize, u64) {
    let mut data = 0u64;
    while let Some(&n) = bytes.get(at) {
        at += 1;
        if n == 0 {
            break;
        }
        let n = usize::from(n);
        data += n.min(bytes.len().saturating_sub(at)) as u64;
        at += n;
    }
    (at, data)
}

/// The first frame of a GIF against the LZW data it has (see the module's documentation).
fn gif(bytes: &[u8]) -> Result<(), Short> {
    // Signature (6), screen width and height, flags, background, aspect.
    let table = |flags: u8| {
        if flags & 0x80 != 0 {
            3usize << ((flags & 7) + 1)
        } else {
            0
        }
    };
    let Some(&flags) = bytes.get(10) else {
        return Ok(());
    };
    let mut at = 13 + table(flags);
    loop {
        match bytes.get(at) {
            Some(0x21) => at = sub_blocks(bytes, at + 2).0,
            Some(0x2C) => break,
            _ => return Ok(()),
        }
    }
    // Descriptor: left, top, width, height, flags; a local table; the LZW code size.
    let (Some(w), Some(h), Some(&flags)) =
        (le16(bytes, at + 5), le16(bytes, at + 7), bytes.get(at + 9))
    else {
        return Ok(());
    };
    let (_, data) = sub_blocks(bytes, at + 10 + table(flags) + 1);
    if w * h > (data + 1) * 16384 {
        return Err(Short::Lzw { w, h, data });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rle_streams_end_where_their_instructions_say() {
        // Two rows of runs with ends of row, then the end of the bitmap.
        let full = [4, 1, 0, 0, 4, 2, 0, 0, 0, 1];
        assert_eq!(rle(&full, 0, 100, false), Ok(()));
        // Two rows in a 2-row image need no end of bitmap.
        assert_eq!(rle(&full[..8], 0, 2, false), Ok(()));
        assert!(rle(&full[..8], 0, 3, false).is_err());
        // A move of 200 rows, and literal runs skipped by their padded length.
        assert_eq!(rle(&[0, 2, 0, 200], 0, 200, false), Ok(()));
        assert_eq!(rle(&[0, 3, 1, 2, 3, 0, 0, 0], 0, 1, false), Ok(()));
        assert_eq!(rle(&[0, 3, 1, 2, 0, 0], 0, 1, true), Ok(()));
        assert!(rle(&[0, 3, 1, 2, 3, 0, 0, 0], 0, 2, false).is_err());
    }
}

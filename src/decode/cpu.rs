//! Full CPU decode: JPEG through zune-jpeg, PNG through the `png` crate. This is the CPU
//! backend's decoder and the per-sample fallback of the GPU backends.
//!
//! Every entry point reads headers first, checks [`Limits`], and only then lets a decoder
//! allocate. Decoder panics are caught and returned as [`DecodeError::Panicked`], so one
//! hostile file cannot take a training run down.

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use super::{
    check_limits, peek_info, DecodeError, DecodeOptions, Format, Image8, ImageInfo, JpegProcess,
    LabelPlane,
};

fn check_bytes(bytes: &[u8], opts: &DecodeOptions) -> Result<(), DecodeError> {
    let n = bytes.len() as u64;
    if n > opts.limits.max_bytes {
        return Err(DecodeError::TooManyBytes {
            bytes: n,
            max: opts.limits.max_bytes,
        });
    }
    Ok(())
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Decodes a JPEG or PNG into 8-bit RGB, reusing `out`'s allocation.
pub fn decode_image(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
) -> Result<ImageInfo, DecodeError> {
    check_bytes(bytes, opts)?;
    let info = peek_info(bytes)?;
    check_limits(&info, &opts.limits)?;
    let res = catch_unwind(AssertUnwindSafe(|| match info.format {
        Format::Jpeg => decode_jpeg(bytes, &info, opts.strict, out),
        Format::Png => decode_png_rgb(bytes, &info, out),
    }));
    match res {
        Ok(r) => r.map(|()| info),
        Err(p) => Err(DecodeError::Panicked(panic_message(p.as_ref()))),
    }
}

fn decode_jpeg(
    bytes: &[u8],
    info: &ImageInfo,
    strict: bool,
    out: &mut Image8,
) -> Result<(), DecodeError> {
    match info.process {
        Some(JpegProcess::Lossless) => {
            return Err(DecodeError::Unsupported("lossless JPEG (SOF3)".into()))
        }
        Some(JpegProcess::Arithmetic) => {
            return Err(DecodeError::Unsupported(
                "arithmetic-coded JPEG (SOF9-11)".into(),
            ))
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
    let options = DecoderOptions::default()
        .set_max_width(usize::from(u16::MAX))
        .set_max_height(usize::from(u16::MAX))
        .set_strict_mode(strict)
        .jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut dec = JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    dec.decode_headers().map_err(jpeg_err)?;
    let (w, h) = dec
        .dimensions()
        .ok_or_else(|| DecodeError::Jpeg("no dimensions after headers".into()))?;
    let channels = dec
        .output_colorspace()
        .map(|c| c.num_components())
        .unwrap_or(3);
    let need = w * h * channels;
    out.width = u32::try_from(w).map_err(|_| DecodeError::BadHeader("width".into()))?;
    out.height = u32::try_from(h).map_err(|_| DecodeError::BadHeader("height".into()))?;
    out.data.resize(need, 0);
    dec.decode_into(&mut out.data).map_err(jpeg_err)?;
    match channels {
        3 => Ok(()),
        1 => {
            gray_to_rgb(&mut out.data, w * h);
            Ok(())
        }
        c => Err(DecodeError::Unsupported(format!(
            "JPEG decoded to {c} channels"
        ))),
    }
}

fn jpeg_err(e: zune_jpeg::errors::DecodeErrors) -> DecodeError {
    use zune_jpeg::errors::DecodeErrors as E;
    match e {
        E::Unsupported(s) => DecodeError::Unsupported(format!("{s:?}")),
        other => DecodeError::Jpeg(format!("{other:?}")),
    }
}

/// Expands `n` gray bytes at the front of `data` into RGB in place (`data` grows to 3n).
fn gray_to_rgb(data: &mut Vec<u8>, n: usize) {
    data.resize(n * 3, 0);
    for i in (0..n).rev() {
        let v = data[i];
        data[3 * i] = v;
        data[3 * i + 1] = v;
        data[3 * i + 2] = v;
    }
}

fn png_reader<'a>(
    bytes: &'a [u8],
    info: &ImageInfo,
    transform: png::Transformations,
) -> Result<png::Reader<Cursor<&'a [u8]>>, DecodeError> {
    // The output buffer is ours; the decoder's own allocations are bounded by the image.
    let budget = (info.pixels() as usize)
        .saturating_mul(8)
        .saturating_add(1 << 20);
    let mut dec = png::Decoder::new_with_limits(Cursor::new(bytes), png::Limits { bytes: budget });
    dec.set_transformations(transform);
    dec.read_info().map_err(|e| DecodeError::Png(e.to_string()))
}

fn decode_png_rgb(bytes: &[u8], info: &ImageInfo, out: &mut Image8) -> Result<(), DecodeError> {
    let mut reader = png_reader(
        bytes,
        info,
        png::Transformations::EXPAND | png::Transformations::STRIP_16,
    )?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| DecodeError::Png("image too large for this platform".into()))?;
    let mut buf = vec![0u8; size];
    let frame = reader
        .next_frame(&mut buf)
        .map_err(|e| DecodeError::Png(e.to_string()))?;
    let (w, h) = (frame.width as usize, frame.height as usize);
    let n = w * h;
    out.width = frame.width;
    out.height = frame.height;
    out.data.clear();
    out.data.reserve(n * 3);
    let line = frame.line_size;
    let channels = match frame.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err(DecodeError::Png("palette was not expanded".into())),
    };
    for y in 0..h {
        let row = &buf[y * line..y * line + w * channels];
        for px in row.chunks_exact(channels) {
            match channels {
                1 | 2 => out.data.extend_from_slice(&[px[0], px[0], px[0]]),
                _ => out.data.extend_from_slice(&px[..3]),
            }
        }
    }
    Ok(())
}

/// Decodes a label mask: a single-channel PNG (1 to 16 bit gray, or palette, whose
/// indices are the class ids), reusing `out`'s allocation. Colour and lossy masks are
/// refused: a class map must hold exact ids.
pub fn decode_mask(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut LabelPlane,
) -> Result<ImageInfo, DecodeError> {
    check_bytes(bytes, opts)?;
    let info = peek_info(bytes)?;
    check_limits(&info, &opts.limits)?;
    if info.format != Format::Png {
        return Err(DecodeError::Mask(
            "label masks must be PNG (JPEG is lossy and would invent classes)".into(),
        ));
    }
    let res = catch_unwind(AssertUnwindSafe(|| decode_mask_png(bytes, &info, out)));
    match res {
        Ok(r) => r.map(|()| info),
        Err(p) => Err(DecodeError::Panicked(panic_message(p.as_ref()))),
    }
}

fn decode_mask_png(
    bytes: &[u8],
    info: &ImageInfo,
    out: &mut LabelPlane,
) -> Result<(), DecodeError> {
    let mut reader = png_reader(bytes, info, png::Transformations::IDENTITY)?;
    let (color, depth) = reader.output_color_type();
    if !matches!(color, png::ColorType::Grayscale | png::ColorType::Indexed) {
        return Err(DecodeError::Mask(format!(
            "{color:?} PNG; a label mask must be gray or palette (one class id per pixel)"
        )));
    }
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| DecodeError::Png("image too large for this platform".into()))?;
    let mut buf = vec![0u8; size];
    let frame = reader
        .next_frame(&mut buf)
        .map_err(|e| DecodeError::Png(e.to_string()))?;
    let (w, h) = (frame.width as usize, frame.height as usize);
    out.width = frame.width;
    out.height = frame.height;
    out.data.clear();
    out.data.reserve(w * h);
    let bits = depth as usize;
    let line = frame.line_size;
    for y in 0..h {
        let row = &buf[y * line..(y + 1) * line];
        match bits {
            16 => out.data.extend(
                row[..2 * w]
                    .chunks_exact(2)
                    .map(|b| u16::from_be_bytes([b[0], b[1]])),
            ),
            8 => out.data.extend(row[..w].iter().map(|&b| u16::from(b))),
            1 | 2 | 4 => {
                let per = 8 / bits;
                let mask = (1u8 << bits) - 1;
                for x in 0..w {
                    let byte = row[x / per];
                    let shift = 8 - bits * (x % per + 1);
                    out.data.push(u16::from((byte >> shift) & mask));
                }
            }
            b => return Err(DecodeError::Mask(format!("bit depth {b}"))),
        }
    }
    Ok(())
}

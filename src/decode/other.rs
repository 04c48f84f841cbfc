//! WebP, BMP, TIFF and GIF through the `image` crate's decoders, on the CPU.
//!
//! The output follows the PNG path's conventions: 8-bit RGB; gray is replicated to the
//! three channels; an alpha channel is dropped, not composited (the stored colour is
//! kept, as for an RGBA PNG); 16-bit samples keep their high byte (`v >> 8`, as the PNG
//! path's `STRIP_16`). A GIF or an animated WebP gives its first frame (a GIF frame's
//! transparent pixels keep their palette colour; the canvas outside a smaller first
//! frame is black); a multi-page TIFF its first page. Floating-point TIFFs are refused
//! as unsupported. EXIF orientation is not applied for these formats.
//!
//! Headers are read first ([`peek`]) and [`Limits`](super::Limits) checked by the caller
//! before any pixel buffer is allocated; then a file too short for what its headers
//! declare is refused (`super::truncated`) before the decoder allocates its output; the
//! crate's own limits are set too (width and height, and an allocation budget of the
//! output plus its own working memory). The output buffer is taken zeroed from the
//! allocator when it must grow, so its pages cost memory only as the decoder writes them.

use std::io::Cursor;

use image::codecs::{bmp::BmpDecoder, gif::GifDecoder, tiff::TiffDecoder, webp::WebPDecoder};
use image::{ColorType, ImageDecoder, ImageError};

use super::{set_len, DecodeError, DecodeOptions, Format, Image8, ImageInfo};

/// The format named by the first bytes, among those this module decodes.
pub(crate) fn sniff(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(Format::Gif)
    } else if bytes.starts_with(b"BM") {
        Some(Format::Bmp)
    } else if bytes.starts_with(b"II*\0")
        || bytes.starts_with(b"MM\0*")
        || bytes.starts_with(b"II+\0")
        || bytes.starts_with(b"MM\0+")
    {
        Some(Format::Tiff)
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some(Format::Webp)
    } else {
        None
    }
}

fn error(format: Format, e: ImageError) -> DecodeError {
    match e {
        ImageError::Unsupported(e) => DecodeError::Unsupported(format!("{}: {e}", format.name())),
        e => DecodeError::Image {
            format: format.name(),
            reason: e.to_string(),
        },
    }
}

/// A decoder over `bytes` with its headers read (no pixel data yet).
fn open<'a>(bytes: &'a [u8], format: Format) -> Result<Box<dyn ImageDecoder + 'a>, DecodeError> {
    let r = Cursor::new(bytes);
    let dec: Result<Box<dyn ImageDecoder + 'a>, ImageError> = match format {
        Format::Webp => WebPDecoder::new(r).map(|d| Box::new(d) as Box<dyn ImageDecoder>),
        Format::Bmp => BmpDecoder::new(r).map(|d| Box::new(d) as Box<dyn ImageDecoder>),
        Format::Tiff => TiffDecoder::new(r).map(|d| Box::new(d) as Box<dyn ImageDecoder>),
        Format::Gif => GifDecoder::new(r).map(|d| Box::new(d) as Box<dyn ImageDecoder>),
        Format::Jpeg | Format::Png => {
            return Err(DecodeError::Unsupported(format!(
                "{} is not decoded by the image crate here",
                format.name()
            )))
        }
    };
    dec.map_err(|e| error(format, e))
}

/// The headers of a WebP, BMP, TIFF or GIF file: size, channels and bits as stored. The
/// crate's decoder is built to read them, so a panic in it is caught here, as in the
/// decode itself ([`DecodeError::Panicked`]).
pub(crate) fn peek(bytes: &[u8], format: Format) -> Result<ImageInfo, DecodeError> {
    std::panic::catch_unwind(|| peek_unguarded(bytes, format)).unwrap_or_else(|p| {
        Err(DecodeError::Panicked(crate::error::panic_message(
            p.as_ref(),
        )))
    })
}

fn peek_unguarded(bytes: &[u8], format: Format) -> Result<ImageInfo, DecodeError> {
    let dec = open(bytes, format)?;
    let (width, height) = dec.dimensions();
    let stored = dec.original_color_type();
    let components = stored.channel_count();
    let bit_depth = match components {
        0 => 0,
        c => u8::try_from(stored.bits_per_pixel() / u16::from(c)).unwrap_or(u8::MAX),
    };
    Ok(ImageInfo::plain(
        format, width, height, components, bit_depth,
    ))
}

/// Decodes into 8-bit RGB (see the module's conventions), reusing `out`'s allocation.
/// `info` is the [`peek`] of the same bytes, already checked against the limits.
pub(crate) fn decode_rgb(
    bytes: &[u8],
    info: &ImageInfo,
    opts: &DecodeOptions,
    out: &mut Image8,
) -> Result<(), DecodeError> {
    let format = info.format;
    super::truncated::check(bytes, info)?;
    let mut dec = open(bytes, format)?;
    let (w, h) = dec.dimensions();
    if (w, h) != (info.width, info.height) {
        return Err(DecodeError::Image {
            format: format.name(),
            reason: format!(
                "the decoder sees {w}x{h}, the headers said {}x{}",
                info.width, info.height
            ),
        });
    }
    let color = dec.color_type();
    let total = dec.total_bytes();
    // The output of the widest colour type (RGBA, 16 bits) bounds what the decoder can ask.
    let most = info.pixels().saturating_mul(8);
    if total > most {
        return Err(DecodeError::Image {
            format: format.name(),
            reason: format!("{total} bytes of output for {w}x{h} pixels"),
        });
    }
    let side = u32::try_from(opts.limits.max_pixels).unwrap_or(u32::MAX);
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(side);
    limits.max_image_height = Some(side);
    // The output buffer, the decoder's own copy of it at most (a TIFF's strips, a
    // lossless WebP's RGBA), and a little for tables.
    limits.max_alloc = Some(total.saturating_mul(2).saturating_add(1 << 20));
    dec.set_limits(limits).map_err(|e| error(format, e))?;
    let total = usize::try_from(total).map_err(|_| DecodeError::Image {
        format: format.name(),
        reason: "image too large for this platform".into(),
    })?;
    let n = (w as usize) * (h as usize);
    out.width = w;
    out.height = h;
    out.origin = (0, 0);
    out.full = (w, h);
    out.scale = 1;
    if color == ColorType::Rgb8 {
        if out.data.capacity() < total {
            // Zeroed by the allocator (fresh pages, untouched until the decoder writes
            // them), rather than a resize that writes every byte before decoding.
            out.data = vec![0u8; total];
        }
        set_len(&mut out.data, total);
        return dec
            .read_image_boxed(&mut out.data)
            .map_err(|e| error(format, e));
    }
    let mut buf = vec![0u8; total];
    dec.read_image_boxed(&mut buf)
        .map_err(|e| error(format, e))?;
    out.data.clear();
    out.data.reserve(n * 3);
    match color {
        ColorType::L8 => to_rgb(&buf, 1, 1, out),
        ColorType::La8 => to_rgb(&buf, 2, 1, out),
        ColorType::Rgba8 => to_rgb(&buf, 4, 1, out),
        ColorType::L16 => to_rgb(&buf, 1, 2, out),
        ColorType::La16 => to_rgb(&buf, 2, 2, out),
        ColorType::Rgb16 => to_rgb(&buf, 3, 2, out),
        ColorType::Rgba16 => to_rgb(&buf, 4, 2, out),
        c => {
            return Err(DecodeError::Unsupported(format!(
                "{} decoded as {c:?}",
                format.name()
            )))
        }
    }
    if out.data.len() != n * 3 {
        return Err(DecodeError::Image {
            format: format.name(),
            reason: format!("{} bytes decoded for {w}x{h} pixels", buf.len()),
        });
    }
    Ok(())
}

/// Appends the RGB of each pixel of `buf` (`channels` samples of `bytes` each, 16-bit ones
/// in native byte order) to `out.data`: gray replicated, alpha dropped, 16 bits to their
/// high byte.
fn to_rgb(buf: &[u8], channels: usize, bytes: usize, out: &mut Image8) {
    let sample = |px: &[u8], c: usize| -> u8 {
        if bytes == 2 {
            (u16::from_ne_bytes([px[2 * c], px[2 * c + 1]]) >> 8) as u8
        } else {
            px[c]
        }
    };
    for px in buf.chunks_exact(channels * bytes) {
        if channels <= 2 {
            let g = sample(px, 0);
            out.data.extend_from_slice(&[g, g, g]);
        } else {
            out.data
                .extend_from_slice(&[sample(px, 0), sample(px, 1), sample(px, 2)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bit_samples_keep_their_high_byte() {
        let mut out = Image8::default();
        let px: Vec<u8> = [0x12ffu16, 0xab00, 0x00ff, 0xffff]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        to_rgb(&px, 4, 2, &mut out);
        assert_eq!(out.data, vec![0x12, 0xab, 0x00]);
        out.data.clear();
        to_rgb(&[7, 200, 9, 1], 2, 1, &mut out);
        assert_eq!(out.data, vec![7, 7, 7, 9, 9, 9]);
    }
}

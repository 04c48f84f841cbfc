//! CPU decode: JPEG through libjpeg-turbo (`jpeg::turbo`), PNG through the `png` crate, WebP, BMP,
//! TIFF and GIF through the `image` crate's decoders (`decode::other`). This is the CPU
//! backend's decoder and the per-sample fallback of the GPU backends.
//!
//! Every entry point reads headers first, checks [`Limits`](super::Limits), and only then lets a decoder
//! allocate. Decoder panics are caught and returned as [`DecodeError::Panicked`], so one
//! hostile file cannot take a training run down.

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub(crate) use super::jpeg::turbo::RowIndex;
use super::jpeg::{color, turbo};
use super::{
    check_limits, peek_info, DecodeError, DecodeOptions, DecodeReport, DecodeWarning, Format,
    Image8, ImageInfo, LabelPlane,
};
use crate::error::panic_message;

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

/// Decodes a JPEG, PNG, WebP, BMP, TIFF or GIF into 8-bit RGB, reusing `out`'s
/// allocation. What the decoder tolerated is dropped: [`decode_image_report`] returns it.
pub fn decode_image(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
) -> Result<ImageInfo, DecodeError> {
    decode_image_report(bytes, opts, out).map(|r| r.info)
}

/// Decodes an image into 8-bit RGB, reusing `out`'s allocation, and says what the
/// decoder tolerated ([`DecodeReport::warning`]): extraneous bytes or an end at a scan
/// boundary in either mode, damaged data when `opts.strict` is off.
pub fn decode_image_report(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
) -> Result<DecodeReport, DecodeError> {
    decode_image_with(bytes, opts, out, turbo::Rows::Plain)
}

/// [`decode_image_report`], but a JPEG decoded for a window that ends above its last row
/// is read on to its end (the rows below entropy-decoded and dropped) and decoded without
/// cutting off the rows above (a restart-marked file's rows above are otherwise left
/// out), so the warning and the refusal are the whole file's, as a whole decode's are:
/// the whole file entropy-decoded, only the window transformed, about one decode where
/// a window's decode and a whole one were two (a window near the top costs the whole
/// file's Huffman decoding). The pixels in the window are a windowed decode's. The
/// pipeline's first crop of a file verifies it this way (`pipeline::verdict`). A JPEG
/// whose one scan is Huffman-coded without restart markers leaves its [`RowIndex`] in
/// `index`, for [`decode_image_resuming`].
pub(crate) fn decode_image_judging_whole(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
    index: &mut Option<RowIndex>,
) -> Result<DecodeReport, DecodeError> {
    decode_image_with(bytes, opts, out, turbo::Rows::Record(index))
}

/// [`decode_image_report`] of a file whose [`RowIndex`] a decode of the same bytes
/// recorded: a JPEG's window is entropy-decoded from its first MCU row, and each row
/// only to the window's last column. The result is the same, bit for bit.
pub(crate) fn decode_image_resuming(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
    index: &RowIndex,
) -> Result<DecodeReport, DecodeError> {
    decode_image_with(bytes, opts, out, turbo::Rows::Resume(index))
}

fn decode_image_with(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
    rows: turbo::Rows<'_>,
) -> Result<DecodeReport, DecodeError> {
    let info = checked_headers(bytes, opts)?;
    let mut warning = None;
    let info = guarded(info, || match info.format {
        Format::Jpeg => decode_jpeg(bytes, &info, opts, out, rows, &mut warning),
        Format::Png => decode_png_rgb(bytes, &info, out),
        Format::Webp | Format::Bmp | Format::Tiff | Format::Gif => {
            super::other::decode_rgb(bytes, &info, opts, out)
        }
    })?;
    Ok(DecodeReport { info, warning })
}

/// The headers, after the file size and the pixel count have passed the limits.
pub(crate) fn checked_headers(
    bytes: &[u8],
    opts: &DecodeOptions,
) -> Result<ImageInfo, DecodeError> {
    check_bytes(bytes, opts)?;
    let info = peek_info(bytes)?;
    check_limits(&info, &opts.limits)?;
    Ok(info)
}

/// Runs a decoder, turning a panic inside it into [`DecodeError::Panicked`].
fn guarded(
    info: ImageInfo,
    f: impl FnOnce() -> Result<(), DecodeError>,
) -> Result<ImageInfo, DecodeError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map(|()| info),
        Err(p) => Err(DecodeError::Panicked(panic_message(p.as_ref()))),
    }
}

fn decode_jpeg(
    bytes: &[u8],
    info: &ImageInfo,
    opts: &DecodeOptions,
    out: &mut Image8,
    rows: turbo::Rows<'_>,
    warning: &mut Option<DecodeWarning>,
) -> Result<(), DecodeError> {
    let to_end = matches!(rows, turbo::Rows::Record(_));
    super::jpeg::markers::jpeg_preflight(info)?;
    let orientation = if opts.orientation {
        info.orientation
    } else {
        1
    };
    let scale = match opts.scale {
        s @ (1 | 2 | 4 | 8) => s,
        s => return Err(DecodeError::Unsupported(format!("IDCT scale 1/{s}"))),
    };
    let req = turbo::Request {
        scale,
        // A window is in the oriented frame; with a rotation, decode whole and turn.
        // Widened by a margin: libjpeg upsamples the edge columns of a cropped region (and
        // the first row after a skip) without their neighbours, so the pixels at the very
        // edge may differ from a whole decode. Outside the needed window, they do not matter.
        // A file that does not end with its end marker is decoded whole, so that libjpeg
        // reads to where its data ends and judges it whatever the crop.
        window: if orientation == 1 && super::jpeg::markers::ends_with_eoi(bytes) {
            opts.window.map(|[x0, y0, x1, y1]| {
                [
                    x0.saturating_sub(WINDOW_MARGIN),
                    y0.saturating_sub(WINDOW_MARGIN),
                    x1 + WINDOW_MARGIN,
                    y1 + WINDOW_MARGIN,
                ]
            })
        } else {
            None
        },
        strict: opts.strict,
        to_end,
    };
    let hints = turbo::Hints::of(bytes, info);
    let below = req.window.filter(|_| !to_end);
    let (o, w) = match below.and_then(|w| rows_below(bytes, info, scale, w)) {
        // Restart markers: decode only the MCU rows from just above the window.
        Some((sub, top)) => {
            let dy = top / scale;
            let window = req
                .window
                .map(|[x0, y0, x1, y1]| [x0, y0 - dy, x1, y1 - dy]);
            let (mut o, w) = turbo::decode(
                &sub,
                &turbo::Request { window, ..req },
                &hints,
                &mut out.data,
            )?;
            o.y0 += dy;
            o.full_height = info.height.div_ceil(scale);
            (o, w)
        }
        None => turbo::decode_rows(bytes, &req, &hints, &mut out.data, rows)?,
    };
    *warning = w;
    if o.channels == 4 {
        cmyk_to_rgb(&mut out.data, info.adobe_transform.is_some());
    } else if o.channels != 3 {
        return Err(DecodeError::Unsupported(format!(
            "JPEG decoded to {} channels",
            o.channels
        )));
    }
    out.width = o.width;
    out.height = o.height;
    out.origin = (o.x0, o.y0);
    out.full = (o.full_width, o.full_height);
    out.scale = scale;
    if orientation != 1 {
        reorient(out, orientation);
    }
    Ok(())
}

/// Extra pixels decoded around a requested window (see `decode_jpeg`).
const WINDOW_MARGIN: u32 = 2;

/// For a JPEG with restart markers and a window `[x0, y0, x1, y1)` of the image scaled by
/// `1/scale` that starts below its second MCU row: the JPEG of its MCU rows from one above
/// the window's first (libjpeg upsamples a cut image's first row from itself, not from the
/// row above: that row is outside the window) to one below its last
/// ([`huffman::splice_rows`]), and the first pixel row (unscaled) it holds. The rows above
/// are then neither entropy-decoded nor read, so a strict decode judges only the rows it
/// reads, as a crop ending above damage already does.
fn rows_below(
    bytes: &[u8],
    info: &ImageInfo,
    scale: u32,
    window: [u32; 4],
) -> Option<(Vec<u8>, u32)> {
    use super::jpeg::huffman::{splice_rows, RestartScan};
    let [_, y0, _, y1] = window;
    // A cheap look first: a restart interval defined in the headers.
    if !super::jpeg::markers::has_restart_interval(bytes) {
        return None;
    }
    let scan = RestartScan::parse(bytes).ok()?;
    let row_px = if scan.single() {
        8
    } else {
        8 * scan.header.max_v
    };
    let (top, bottom) = (y0 * scale, (y1 * scale).min(info.height));
    let first = (top / row_px).checked_sub(1).filter(|&r| r > 0)?;
    let last = bottom.div_ceil(row_px) + 1;
    let mut sub = Vec::new();
    let at = splice_rows(bytes, &scan, first..last, &mut sub)?;
    Some((sub, at))
}

/// CMYK (as stored) to RGB in place, 4 bytes per pixel in, 3 out. Adobe files store the
/// inks inverted (Photoshop's convention): `R = C * K / 255`; others `(255 - C)(255 - K) / 255`.
fn cmyk_to_rgb(data: &mut Vec<u8>, inverted: bool) {
    let n = data.len() / 4;
    for i in 0..n {
        let p = [
            data[4 * i],
            data[4 * i + 1],
            data[4 * i + 2],
            data[4 * i + 3],
        ];
        data[3 * i..3 * i + 3].copy_from_slice(&color::cmyk_to_rgb(p, inverted));
    }
    data.truncate(3 * n);
}

/// Applies an EXIF orientation (2-8) to a whole image, as Pillow's `exif_transpose`.
fn reorient(img: &mut Image8, orientation: u8) {
    let (w, h) = (img.width as usize, img.height as usize);
    let (ow, oh) = if orientation >= 5 { (h, w) } else { (w, h) };
    let mut out = vec![0u8; ow * oh * 3];
    for y in 0..oh {
        for x in 0..ow {
            let (sx, sy) = match orientation {
                2 => (w - 1 - x, y),
                3 => (w - 1 - x, h - 1 - y),
                4 => (x, h - 1 - y),
                5 => (y, x),
                6 => (y, h - 1 - x),
                7 => (w - 1 - y, h - 1 - x),
                8 => (w - 1 - y, x),
                _ => (x, y),
            };
            let s = (sy * w + sx) * 3;
            out[(y * ow + x) * 3..(y * ow + x) * 3 + 3].copy_from_slice(&img.data[s..s + 3]);
        }
    }
    img.data = out;
    img.width = ow as u32;
    img.height = oh as u32;
    img.full = (ow as u32, oh as u32);
    img.origin = (0, 0);
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

/// Reads the (first) frame of a PNG into a new buffer, laid out as `Reader::next_frame`
/// lays it out, row by row: the buffer grows as rows arrive (doubling, so amortised), not
/// sized by the header up front, so that what a file cut short costs is what it decoded
/// before it was refused. The rows of an interlaced image's passes are kept as they come
/// and spread over the whole image once the last has arrived.
fn read_frame(
    reader: &mut png::Reader<Cursor<&[u8]>>,
) -> Result<(Vec<u8>, png::OutputInfo), DecodeError> {
    let png_err = |e: png::DecodingError| DecodeError::Png(e.to_string());
    let (width, height) = (reader.info().width, reader.info().height);
    let (color_type, bit_depth) = reader.output_color_type();
    let line_size = reader
        .output_line_size(width)
        .ok_or_else(|| DecodeError::Png("image too large for this platform".into()))?;
    let total = line_size
        .checked_mul(height as usize)
        .ok_or_else(|| DecodeError::Png("image too large for this platform".into()))?;
    let frame = png::OutputInfo {
        width,
        height,
        color_type,
        bit_depth,
        line_size,
    };
    // The passes' rows of a sub-byte depth end on whole bytes: up to one more per row.
    let most = if reader.info().interlaced {
        total.saturating_add(16 * height as usize)
    } else {
        total
    };
    let mut rows = Vec::new();
    let mut passes = Vec::new();
    while let Some(row) = reader.next_interlaced_row().map_err(png_err)? {
        let data = row.data();
        let need = rows.len() + data.len();
        if need > most {
            return Err(DecodeError::Png(
                "more rows than the header declares".into(),
            ));
        }
        if need > rows.capacity() {
            rows.reserve_exact(need.max(2 * rows.len()).min(most) - rows.len());
        }
        if let png::InterlaceInfo::Adam7(pass) = row.interlace() {
            passes.push((*pass, rows.len(), data.len()));
        }
        rows.extend_from_slice(data);
    }
    if passes.is_empty() && rows.len() != total {
        return Err(DecodeError::Png(format!(
            "{} bytes of rows decoded for {width}x{height} pixels",
            rows.len()
        )));
    }
    if passes.is_empty() {
        return Ok((rows, frame));
    }
    let bits = color_type.samples() as u8 * bit_depth as u8;
    let mut buf = vec![0u8; total];
    for (pass, at, len) in passes {
        png::expand_interlaced_row(&mut buf, line_size, &rows[at..at + len], &pass, bits);
    }
    Ok((buf, frame))
}

fn decode_png_rgb(bytes: &[u8], info: &ImageInfo, out: &mut Image8) -> Result<(), DecodeError> {
    let mut reader = png_reader(
        bytes,
        info,
        png::Transformations::EXPAND | png::Transformations::STRIP_16,
    )?;
    let (buf, frame) = read_frame(&mut reader)?;
    let (w, h) = (frame.width as usize, frame.height as usize);
    let n = w * h;
    out.width = frame.width;
    out.height = frame.height;
    out.origin = (0, 0);
    out.full = (frame.width, frame.height);
    out.scale = 1;
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
    let info = checked_headers(bytes, opts)?;
    if info.format != Format::Png {
        return Err(DecodeError::Mask(
            "label masks must be PNG (JPEG is lossy and would invent classes)".into(),
        ));
    }
    guarded(info, || decode_mask_png(bytes, &info, out))
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
    let (buf, frame) = read_frame(&mut reader)?;
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

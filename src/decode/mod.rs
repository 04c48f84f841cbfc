//! Decoding: options, limits checked before allocating, and header peeking.
//!
//! [`peek_info`] reads only the headers (JPEG markers up to the frame header, PNG's IHDR),
//! so the pipeline can check [`Limits`] and compute a sample's plan before any pixel
//! buffer is allocated. A 65535 x 65535 header is refused here, in microseconds. A file
//! too short for the data its headers declare is refused before its decoder allocates
//! where that data can be bounded from the headers (`truncated`); PNG rows are kept as
//! they arrive, as JPEG rows are.

pub mod cpu;
// The pipeline's crop index: public for the transform benchmark only.
#[doc(hidden)]
pub mod crop_index;
pub mod jpeg;
mod other;
mod truncated;

use serde::Serialize;

pub use crate::error::DecodeError;

/// Limits checked before allocating: a decompression bomb is an error, not an OOM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted `width * height`. Default: 178,956,970 (Pillow's bomb threshold).
    pub max_pixels: u64,
    /// Largest accepted compressed file, in bytes. Default: 256 MiB.
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pixels: 178_956_970,
            max_bytes: 256 << 20,
        }
    }
}

/// Options for decoding one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Size limits.
    pub limits: Limits,
    /// Refuse damaged JPEGs (cut short inside a scan, corrupt entropy-coded segments,
    /// stray markers) instead of filling the damage with grey, as PyTorch/Pillow and
    /// tf.data do by default: a damaged sample is reported, not trained on. Faults that
    /// leave the pixels as the file defines them (extraneous bytes, an end at a scan
    /// boundary) are decoded in both modes, with a [`DecodeWarning`]; lenient decoding
    /// delivers damaged files with a [`WarningKind::Damaged`] warning. Default: on.
    pub strict: bool,
    /// Apply the EXIF orientation, as Pillow's `exif_transpose` does. Default: on.
    pub orientation: bool,
    /// JPEG IDCT scale denominator (1, 2, 4 or 8): decode at 1/scale of the size, as
    /// libjpeg-turbo's scaled decode does. Other formats ignore it. Default: 1.
    pub scale: u32,
    /// For JPEGs without an EXIF rotation: decode only `[x0, y0, x1, y1)` of the (scaled)
    /// image, widened to whole iMCU columns. Default: `None`, the whole image.
    pub window: Option<[u32; 4]>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            limits: Limits::default(),
            strict: true,
            orientation: true,
            scale: 1,
            window: None,
        }
    }
}

/// What a decoder tolerated in an image it delivered: the sample is decoded, but not from
/// a clean file. The pipeline reports it per sample (`Batch::warnings`) and counts it
/// (`Stats::samples_with_warnings`), so no altered sample goes unnoticed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DecodeWarning {
    /// What kind of fault it is, and so whether the pixels are affected.
    pub kind: WarningKind,
    /// The decoder's message (libjpeg's for JPEGs), with where it applies.
    pub message: String,
}

impl DecodeWarning {
    /// A warning of `kind` with `message`.
    pub fn new(kind: WarningKind, message: impl Into<String>) -> Self {
        DecodeWarning {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for DecodeWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)
    }
}

/// The kinds of [`DecodeWarning`], from harmless to damaging. The first two leave the
/// pixels as the file's data defines them and are delivered in strict mode too; the last
/// is delivered only when strict decoding is off (the [`jpeg`] module says which
/// libjpeg messages fall in which kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WarningKind {
    /// Bytes that belong to no segment, skipped before a marker (libjpeg's
    /// `JWRN_EXTRANEOUS_DATA`, common in Motion-JPEG frames).
    Extraneous,
    /// The file ends at a scan boundary (no end-of-image marker), or a progressive file
    /// stops before its last refinement scans: decoded from the complete scans present,
    /// as every JPEG decoder does; a progressive image is then coarser than intended.
    Incomplete,
    /// Damaged data decoded leniently: cut short inside a scan, corrupt entropy-coded
    /// data (bad codes, a marker where data should be, lost restart markers). libjpeg
    /// fills what it could not decode; the pixels differ from the intended image.
    Damaged,
}

impl WarningKind {
    /// The lower-case name, as in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            WarningKind::Extraneous => "extraneous",
            WarningKind::Incomplete => "incomplete",
            WarningKind::Damaged => "damaged",
        }
    }
}

/// What a successful decode returns: the headers, and what the decoder had to tolerate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeReport {
    /// What the headers say.
    pub info: ImageInfo,
    /// The most severe fault tolerated (the first one of that kind), `None` for a clean
    /// file.
    pub warning: Option<DecodeWarning>,
}

/// The container format of an image, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Format {
    /// JPEG (starts with FF D8).
    Jpeg,
    /// PNG (starts with the 8-byte PNG signature).
    Png,
    /// WebP, lossless or lossy (a RIFF file of form `WEBP`); animated ones give their
    /// first frame.
    Webp,
    /// Windows bitmap (starts with `BM`).
    Bmp,
    /// TIFF, little- or big-endian, and BigTIFF; the first image of the file.
    Tiff,
    /// GIF (starts with `GIF87a` or `GIF89a`); the first frame.
    Gif,
}

impl Format {
    /// The lower-case name, as in JSON output and [`ImageInfo::kind`].
    pub fn name(self) -> &'static str {
        match self {
            Format::Jpeg => "jpeg",
            Format::Png => "png",
            Format::Webp => "webp",
            Format::Bmp => "bmp",
            Format::Tiff => "tiff",
            Format::Gif => "gif",
        }
    }

    /// The usual file extension: `jpg`, `png`, `webp`, `bmp`, `tif`, `gif`.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Jpeg => "jpg",
            Format::Tiff => "tif",
            f => f.name(),
        }
    }

    /// The format the first bytes announce, if it is one stoker decodes; nothing is
    /// parsed beyond the signature.
    pub fn sniff(bytes: &[u8]) -> Option<Format> {
        if bytes.starts_with(&[0xFF, 0xD8]) {
            Some(Format::Jpeg)
        } else if bytes.starts_with(&PNG_SIGNATURE) {
            Some(Format::Png)
        } else {
            other::sniff(bytes)
        }
    }
}

/// The JPEG coding process named by the frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum JpegProcess {
    /// SOF0.
    Baseline,
    /// SOF1, extended sequential Huffman.
    Extended,
    /// SOF2, progressive Huffman.
    Progressive,
    /// SOF3, lossless Huffman.
    Lossless,
    /// SOF9-SOF11, arithmetic coding.
    Arithmetic,
    /// SOF5-7 and SOF13-15, hierarchical.
    Hierarchical,
}

impl JpegProcess {
    /// The lower-case name, as in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            JpegProcess::Baseline => "baseline",
            JpegProcess::Extended => "extended",
            JpegProcess::Progressive => "progressive",
            JpegProcess::Lossless => "lossless",
            JpegProcess::Arithmetic => "arithmetic",
            JpegProcess::Hierarchical => "hierarchical",
        }
    }
}

/// What the headers say about an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ImageInfo {
    /// Container format.
    pub format: Format,
    /// Width in pixels, as stored (before any EXIF orientation).
    pub width: u32,
    /// Height in pixels, as stored.
    pub height: u32,
    /// Number of colour components (JPEG) or channels (PNG).
    pub components: u8,
    /// Bits per sample.
    pub bit_depth: u8,
    /// The JPEG coding process, for JPEGs.
    pub process: Option<JpegProcess>,
    /// EXIF orientation (1-8; 1 when absent or invalid), for JPEGs.
    pub orientation: u8,
    /// The Adobe APP14 colour transform byte, when the marker is present (JPEG).
    pub adobe_transform: Option<u8>,
}

impl ImageInfo {
    /// The header of a non-JPEG image: no JPEG process, no orientation to apply, no Adobe
    /// transform.
    pub(crate) fn plain(
        format: Format,
        width: u32,
        height: u32,
        components: u8,
        bit_depth: u8,
    ) -> Self {
        ImageInfo {
            format,
            width,
            height,
            components,
            bit_depth,
            process: None,
            orientation: 1,
            adobe_transform: None,
        }
    }

    /// Width and height after the EXIF orientation is applied.
    pub fn oriented_size(&self) -> (u32, u32) {
        if self.orientation >= 5 {
            (self.height, self.width)
        } else {
            (self.width, self.height)
        }
    }

    /// `width * height`.
    pub fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }

    /// A short description: `jpeg/progressive/3c/8bit`, `png/1c/16bit`, `webp/4c/8bit`
    /// (format, components as stored, bits per sample).
    pub fn kind(&self) -> String {
        match (self.format, self.process) {
            (Format::Jpeg, Some(p)) => format!(
                "jpeg/{}/{}c/{}bit",
                p.name(),
                self.components,
                self.bit_depth
            ),
            (Format::Jpeg, None) => "jpeg".to_string(),
            (f, _) => format!("{}/{}c/{}bit", f.name(), self.components, self.bit_depth),
        }
    }
}

/// An 8-bit RGB image, rows top to bottom, pixels interleaved `RGBRGB...`: the whole
/// decoded image, or a window of it (a crop-aware decode) at `1/scale` of its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image8 {
    /// Width of the pixels held.
    pub width: u32,
    /// Height of the pixels held.
    pub height: u32,
    /// `width * height * 3` bytes.
    pub data: Vec<u8>,
    /// Where the held window starts in the full (scaled) image.
    pub origin: (u32, u32),
    /// Size of the full (scaled, oriented) image the window belongs to.
    pub full: (u32, u32),
    /// The IDCT scale denominator the image was decoded at (1 = full size).
    pub scale: u32,
}

impl Default for Image8 {
    fn default() -> Self {
        Image8 {
            width: 0,
            height: 0,
            data: Vec::new(),
            origin: (0, 0),
            full: (0, 0),
            scale: 1,
        }
    }
}

impl Image8 {
    /// A whole image at full scale.
    pub fn new(width: u32, height: u32, data: Vec<u8>) -> Self {
        Image8 {
            width,
            height,
            data,
            origin: (0, 0),
            full: (width, height),
            scale: 1,
        }
    }

    /// Bytes held.
    pub fn byte_len(&self) -> usize {
        self.data.len()
    }
}

/// A label plane: one class id per pixel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelPlane {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height` class ids.
    pub data: Vec<u16>,
}

impl LabelPlane {
    /// Bytes held.
    pub fn byte_len(&self) -> usize {
        self.data.len() * 2
    }
}

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// Reads the headers only and returns size and kind; checks nothing against limits.
pub fn peek_info(bytes: &[u8]) -> Result<ImageInfo, DecodeError> {
    if bytes.is_empty() {
        return Err(DecodeError::Empty);
    }
    match Format::sniff(bytes) {
        Some(Format::Jpeg) => return jpeg::markers::peek(bytes),
        Some(Format::Png) => return peek_png(bytes),
        Some(format) => return other::peek(bytes, format),
        None => {}
    }
    let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
    Err(DecodeError::UnknownFormat(head.join(" ")))
}

/// Checks `info` against `limits`: zero sizes and pixel counts.
pub fn check_limits(info: &ImageInfo, limits: &Limits) -> Result<(), DecodeError> {
    if info.width == 0 || info.height == 0 {
        return Err(DecodeError::ZeroSize {
            width: info.width,
            height: info.height,
        });
    }
    if info.pixels() > limits.max_pixels {
        return Err(DecodeError::TooManyPixels {
            width: info.width,
            height: info.height,
            pixels: info.pixels(),
            max: limits.max_pixels,
        });
    }
    Ok(())
}

fn peek_png(bytes: &[u8]) -> Result<ImageInfo, DecodeError> {
    // Signature (8), chunk length (4), "IHDR" (4), then width, height, depth, colour type.
    let ihdr = bytes
        .get(8..8 + 8 + 13)
        .ok_or_else(|| DecodeError::BadHeader("PNG shorter than its IHDR chunk".into()))?;
    if &ihdr[4..8] != b"IHDR" {
        return Err(DecodeError::BadHeader(
            "PNG does not start with IHDR".into(),
        ));
    }
    let be = |o: usize| u32::from_be_bytes([ihdr[o], ihdr[o + 1], ihdr[o + 2], ihdr[o + 3]]);
    let (width, height) = (be(8), be(12));
    let bit_depth = ihdr[16];
    let components = match ihdr[17] {
        0 | 3 => 1,
        2 => 3,
        4 => 2,
        6 => 4,
        t => return Err(DecodeError::BadHeader(format!("PNG colour type {t}"))),
    };
    Ok(ImageInfo::plain(
        Format::Png,
        width,
        height,
        components,
        bit_depth,
    ))
}

/// Makes `v` exactly `n` long without clearing what it holds: every caller overwrites
/// all `n` elements, and skipping the fill saves a memset per sample.
pub(crate) fn set_len<T: Copy + Default>(v: &mut Vec<T>, n: usize) {
    if v.len() >= n {
        v.truncate(n);
    } else {
        v.resize(n, T::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peeks_refuse_garbage_without_panicking() {
        assert_eq!(peek_info(&[]), Err(DecodeError::Empty));
        assert!(matches!(
            peek_info(b"P6\n1 1\n255\n"),
            Err(DecodeError::UnknownFormat(_))
        ));
        // Signatures of the other formats with nothing after them.
        for head in [
            &b"GIF89a"[..],
            b"BM",
            b"II*\0",
            b"MM\0*",
            b"RIFF\0\0\0\0WEBP",
        ] {
            assert!(
                matches!(peek_info(head), Err(DecodeError::Image { .. })),
                "{head:?}: {:?}",
                peek_info(head)
            );
        }
        assert!(peek_info(&[0xFF, 0xD8]).is_err());
        assert!(peek_info(&[0xFF, 0xD8, 0xFF, 0xC0, 0x00]).is_err());
        assert!(peek_info(&PNG_SIGNATURE).is_err());
    }

    #[test]
    fn limits_refuse_bombs() {
        let info = ImageInfo {
            format: Format::Jpeg,
            width: 65535,
            height: 65535,
            components: 1,
            bit_depth: 8,
            process: Some(JpegProcess::Baseline),
            orientation: 1,
            adobe_transform: None,
        };
        assert!(matches!(
            check_limits(&info, &Limits::default()),
            Err(DecodeError::TooManyPixels { .. })
        ));
    }
}

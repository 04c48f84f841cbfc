//! Decoding: options, limits checked before allocating, and header peeking.
//!
//! [`peek_info`] reads only the headers (JPEG markers up to the frame header, PNG's IHDR),
//! so the pipeline can check [`Limits`] and compute a sample's plan before any pixel
//! buffer is allocated. A 65535 x 65535 header is refused here, in microseconds.

pub mod cpu;

use serde::Serialize;

use crate::error::SampleErrorKind;

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
    /// Refuse damaged JPEGs (truncated data, corrupt entropy-coded segments, stray
    /// markers) instead of filling the damage with grey, as PyTorch/Pillow and tf.data
    /// do by default: a damaged sample is reported, not trained on. Default: on.
    pub strict: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            limits: Limits::default(),
            strict: true,
        }
    }
}

/// The container format of an image, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// JPEG (starts with FF D8).
    Jpeg,
    /// PNG (starts with the 8-byte PNG signature).
    Png,
}

/// The JPEG coding process named by the frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
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

/// What the headers say about an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
}

impl ImageInfo {
    /// `width * height`.
    pub fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }

    /// A short description: `jpeg/progressive/3c/8bit`, `png/1c/16bit`.
    pub fn kind(&self) -> String {
        match (self.format, self.process) {
            (Format::Jpeg, Some(p)) => format!(
                "jpeg/{}/{}c/{}bit",
                serde_json::to_value(p)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                self.components,
                self.bit_depth
            ),
            (Format::Jpeg, None) => "jpeg".to_string(),
            (Format::Png, _) => format!("png/{}c/{}bit", self.components, self.bit_depth),
        }
    }
}

/// Why an image could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Zero bytes.
    #[error("empty file")]
    Empty,
    /// Neither a JPEG nor a PNG.
    #[error("not a JPEG or PNG (starts with {0})")]
    UnknownFormat(String),
    /// The headers are malformed or end early.
    #[error("bad header: {0}")]
    BadHeader(String),
    /// Width or height is zero.
    #[error("image has zero size ({width}x{height})")]
    ZeroSize {
        /// Width from the header.
        width: u32,
        /// Height from the header.
        height: u32,
    },
    /// More pixels than [`Limits::max_pixels`].
    #[error("{width}x{height} = {pixels} pixels exceeds the limit of {max} (decompression bomb?)")]
    TooManyPixels {
        /// Width from the header.
        width: u32,
        /// Height from the header.
        height: u32,
        /// Their product.
        pixels: u64,
        /// The limit.
        max: u64,
    },
    /// More bytes than [`Limits::max_bytes`].
    #[error("file of {bytes} bytes exceeds the limit of {max}")]
    TooManyBytes {
        /// File size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The JPEG decoder rejected the data.
    #[error("jpeg: {0}")]
    Jpeg(String),
    /// The PNG decoder rejected the data.
    #[error("png: {0}")]
    Png(String),
    /// A feature this build does not decode.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A label mask that is not a single-channel class map.
    #[error("label mask: {0}")]
    Mask(String),
    /// The decoder panicked; caught and reported instead of crashing the run.
    #[error("decoder failed internally: {0}")]
    Panicked(String),
}

impl DecodeError {
    /// The sample-error category of this failure.
    pub fn kind(&self) -> SampleErrorKind {
        match self {
            DecodeError::TooManyPixels { .. } | DecodeError::TooManyBytes { .. } => {
                SampleErrorKind::Limit
            }
            DecodeError::Unsupported(_) => SampleErrorKind::Unsupported,
            DecodeError::Mask(_) => SampleErrorKind::Mask,
            DecodeError::Panicked(_) => SampleErrorKind::Internal,
            _ => SampleErrorKind::Decode,
        }
    }
}

/// An 8-bit RGB image, rows top to bottom, pixels interleaved `RGBRGB...`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Image8 {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 3` bytes.
    pub data: Vec<u8>,
}

impl Image8 {
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
    if bytes.starts_with(&[0xFF, 0xD8]) {
        return peek_jpeg(bytes);
    }
    if bytes.starts_with(&PNG_SIGNATURE) {
        return peek_png(bytes);
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
    Ok(ImageInfo {
        format: Format::Png,
        width,
        height,
        components,
        bit_depth,
        process: None,
    })
}

fn peek_jpeg(bytes: &[u8]) -> Result<ImageInfo, DecodeError> {
    let mut i = 2;
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
            return Err(DecodeError::BadHeader(format!(
                "segment {marker:02X} has length {len}"
            )));
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
            let sof = bytes
                .get(i + 2..i + 8)
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
                components: sof[5],
                bit_depth: sof[0],
                process: Some(process),
            });
        }
        i += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peeks_refuse_garbage_without_panicking() {
        assert_eq!(peek_info(&[]), Err(DecodeError::Empty));
        assert!(matches!(
            peek_info(b"GIF89a"),
            Err(DecodeError::UnknownFormat(_))
        ));
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
        };
        assert!(matches!(
            check_limits(&info, &Limits::default()),
            Err(DecodeError::TooManyPixels { .. })
        ));
    }
}

//! Lossless restart-marker transcoding: a JPEG rewritten from its own DCT coefficients
//! (libjpeg's `jpeg_read_coefficients` / `jpeg_write_coefficients`, as `jpegtran -copy all
//! -optimize -restart N` does) as one baseline sequential Huffman scan with optimised
//! tables and a restart marker every few MCUs. No coefficient changes, so every decoder
//! gives the same pixels; the restart intervals are what a GPU entropy-decodes in
//! parallel (the "GPU entropy" decode path).
//!
//! [`add_restarts`] takes any 8-bit JPEG libjpeg reads (baseline, extended, progressive,
//! arithmetic-coded; gray, YCbCr, RGB, CMYK, YCCK) and says what it did: written (new
//! bytes: SOF0, one scan, a DRI marker) or kept as it is, with the reason
//! ([`KeptReason`]). Every APPn and COM marker is copied in order, as it was (EXIF with
//! its orientation, ICC profiles, JFIF, Adobe APP14 with its colour transform), and libjpeg
//! writes none of its own, so the copy is read the same way by every decoder.
//!
//! Kept as they are: what is not a JPEG; 12-bit, lossless and hierarchical files (libjpeg
//! here reads none of them); progressive files whose refinement is incomplete (libjpeg
//! decodes them with block smoothing, which a baseline copy would lose); files libjpeg
//! warns about while reading (damaged, cut short, extraneous bytes: the verdict of
//! [`crate::decode::jpeg`]'s table, any kind); files already baseline with restart
//! markers at least as often as asked; and, with [`TranscodeOptions::verify`], an output
//! whose coefficients (read back by [`super::read_coefficients`]) differ from the input's.
//!
//! Sizes and times on a set of 500 photos, by interval: see [`Restart`].
#![doc(hidden)]

use super::coeffs::Coefficients;
use super::markers;
use super::turbo::{self, Hints, TranscodeStop};
use crate::decode::{check_limits, DecodeError, DecodeWarning, JpegProcess, Limits};

/// How often a restart marker is written.
///
/// Measured on 500 photos (ImageNet-like, baseline 4:2:0, about 36 KB and 19-81 MCUs per
/// row each; `stoker convert --to folder --restart-interval ...`), the total size out over
/// in, and the time per image (one core, with and without the verification read-back):
///
/// | interval | size | ms per image (verified / not) |
/// | --- | --- | --- |
/// | none ([`Restart::Off`]) | 0.970 | 7.5 / 2.6 |
/// | every MCU row (`McuRows(1)`, the default) | 0.973 | 6.2 / 2.1 |
/// | every half row (`PerRow(2)`) | 0.979 | 5.7 / 2.3 |
/// | every 16 MCUs | 0.984 | 5.7 / 2.2 |
/// | every 8 MCUs | 0.998 | 6.6 / 2.5 |
/// | every 4 MCUs | 1.024 | 5.7 / 2.0 |
///
/// (The totals are byte for byte those of libjpeg-turbo's `jpegtran -copy all -optimize
/// -restart N`.) The optimised Huffman tables save about 3%; each interval costs its
/// marker and a partial byte. The default, every MCU row, is the finest of these at which
/// the output stays clearly smaller than the input: a few dozen independent intervals an
/// image, thousands a batch, for the GPU to entropy-decode in parallel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Restart {
    /// No restart markers (only the tables are optimised and the scans merged).
    Off,
    /// Every `n` MCU rows (`n` at least 1).
    McuRows(u16),
    /// `n` intervals per MCU row (an interval of `ceil(MCUs per row / n)` MCUs).
    PerRow(u16),
    /// Every `n` MCUs (`n` at least 1).
    Mcus(u16),
}

impl Restart {
    /// The default: every MCU row.
    pub const DEFAULT: Restart = Restart::McuRows(1);

    /// The restart interval in MCUs for an image of `mcus_per_row` MCUs per row (0: none),
    /// at most 65535 (what the DRI marker holds).
    pub fn interval(self, mcus_per_row: u32) -> u16 {
        let mcus_per_row = u64::from(mcus_per_row.max(1));
        let n = match self {
            Restart::Off => 0,
            Restart::McuRows(r) => u64::from(r.max(1)) * mcus_per_row,
            Restart::PerRow(k) => mcus_per_row.div_ceil(u64::from(k.max(1))),
            Restart::Mcus(m) => u64::from(m.max(1)),
        };
        n.min(u64::from(u16::MAX)) as u16
    }

    /// Parses `off`, `row` (every MCU row), `rows:N`, `per-row:N` or `mcus:N` (also a bare
    /// `N`: every N MCUs).
    pub fn parse(s: &str) -> Result<Restart, RestartParseError> {
        let t = s.trim().to_ascii_lowercase();
        let num = |v: &str| -> Result<u16, RestartParseError> {
            match v.trim().parse::<u16>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(RestartParseError::Number(s.to_string())),
            }
        };
        Ok(match t.as_str() {
            "off" | "none" | "0" => Restart::Off,
            "row" => Restart::McuRows(1),
            "half-row" => Restart::PerRow(2),
            _ => match t.split_once(':') {
                Some(("rows", v)) => Restart::McuRows(num(v)?),
                Some(("per-row", v)) => Restart::PerRow(num(v)?),
                Some(("mcus", v)) => Restart::Mcus(num(v)?),
                Some(_) => return Err(RestartParseError::Form(s.to_string())),
                None => Restart::Mcus(num(&t)?),
            },
        })
    }
}

/// Why [`Restart::parse`] refused a restart interval (the text as given in each).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestartParseError {
    /// The number is not 1-65535.
    #[error("bad restart interval {0:?}: expected a number 1-65535")]
    Number(String),
    /// Not one of the forms.
    #[error("bad restart interval {0:?} (expected off, row, rows:N, per-row:N or mcus:N)")]
    Form(String),
}

impl Default for Restart {
    fn default() -> Self {
        Restart::DEFAULT
    }
}

impl std::fmt::Display for Restart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Restart::Off => write!(f, "off"),
            Restart::McuRows(1) => write!(f, "row"),
            Restart::McuRows(n) => write!(f, "rows:{n}"),
            Restart::PerRow(n) => write!(f, "per-row:{n}"),
            Restart::Mcus(n) => write!(f, "mcus:{n}"),
        }
    }
}

/// Options of [`add_restarts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscodeOptions {
    /// How often a restart marker is written.
    pub restart: Restart,
    /// Read the output's coefficients back and compare them with the input's (two more
    /// entropy decodes); an output that differs is not given ([`KeptReason::Mismatch`]).
    pub verify: bool,
    /// The pixel limit checked on the header before libjpeg allocates the coefficients.
    pub limits: Limits,
    /// Huffman tables made for the file (two passes over its coefficients: the smaller
    /// output); off, the standard tables of the JPEG specification's Annex K (one pass,
    /// a few percent larger; a file whose coefficients they cannot code, as some 12-bit
    /// ones, is not given).
    pub optimize_tables: bool,
}

impl Default for TranscodeOptions {
    /// Every MCU row, verified, the default limits, optimised tables.
    fn default() -> Self {
        TranscodeOptions {
            restart: Restart::DEFAULT,
            verify: true,
            limits: Limits::default(),
            optimize_tables: true,
        }
    }
}

/// What [`add_restarts`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Transcoded {
    /// Transcoded: the new file.
    Written {
        /// The new JPEG: SOF0, one interleaved scan, restart markers.
        bytes: Vec<u8>,
        /// Its restart interval in MCUs (0 with [`Restart::Off`]).
        restart_interval: u16,
    },
    /// The input is to be kept as it is, for this reason.
    Kept(KeptReason),
}

/// Why a file is kept as it is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum KeptReason {
    /// Not a JPEG (no start-of-image marker).
    NotJpeg,
    /// Not 8 bits per sample (12-bit): this libjpeg does not read it.
    NotEightBit(u8),
    /// Lossless JPEG (SOF3): no DCT coefficients.
    Lossless,
    /// Hierarchical JPEG: libjpeg does not read it.
    Hierarchical,
    /// A progressive file libjpeg decodes with block smoothing (incomplete refinement):
    /// a baseline copy of its coefficients would decode to other pixels.
    BlockSmoothing(String),
    /// libjpeg warned reading it (damaged, cut short, extraneous bytes): the verdict.
    Damaged(DecodeWarning),
    /// Its headers or data could not be read (or claim more pixels than the limit).
    Unreadable(DecodeError),
    /// Already baseline, one scan, with restart markers at least as often as asked.
    AlreadyRestarted {
        /// Its restart interval in MCUs.
        interval: u16,
    },
    /// The coefficients do not make one baseline scan with the interval asked: a
    /// quantisation table above 255 (only extended sequential JPEG holds one), a
    /// coefficient beyond what baseline Huffman coding holds (libjpeg refuses to write
    /// it), ...
    NotBaseline(String),
    /// The output would be larger than the bound (twice the input and the markers).
    TooLarge(usize),
    /// The output's coefficients, read back, differ from the input's.
    Mismatch(CoefficientsDiffer),
}

impl KeptReason {
    /// A short snake_case name, as in JSON reports: `not_jpeg`, `not_8_bit`, `lossless`,
    /// `hierarchical`, `block_smoothing`, `damaged`, `unreadable`, `already_restarted`,
    /// `not_baseline`, `too_large`, `mismatch`.
    pub fn label(&self) -> &'static str {
        match self {
            KeptReason::NotJpeg => "not_jpeg",
            KeptReason::NotEightBit(_) => "not_8_bit",
            KeptReason::Lossless => "lossless",
            KeptReason::Hierarchical => "hierarchical",
            KeptReason::BlockSmoothing(_) => "block_smoothing",
            KeptReason::Damaged(_) => "damaged",
            KeptReason::Unreadable(_) => "unreadable",
            KeptReason::AlreadyRestarted { .. } => "already_restarted",
            KeptReason::NotBaseline(_) => "not_baseline",
            KeptReason::TooLarge(_) => "too_large",
            KeptReason::Mismatch(_) => "mismatch",
        }
    }
}

impl std::fmt::Display for KeptReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeptReason::NotJpeg => write!(f, "not a JPEG"),
            KeptReason::NotEightBit(b) => write!(f, "{b}-bit JPEG"),
            KeptReason::Lossless => write!(f, "lossless JPEG"),
            KeptReason::Hierarchical => write!(f, "hierarchical JPEG"),
            KeptReason::BlockSmoothing(m) => write!(f, "{m}"),
            KeptReason::Damaged(w) => write!(f, "libjpeg warned: {}", w.message),
            KeptReason::Unreadable(e) => write!(f, "unreadable: {e}"),
            KeptReason::AlreadyRestarted { interval } => {
                write!(f, "already baseline with a restart every {interval} MCUs")
            }
            KeptReason::NotBaseline(m) => write!(f, "output not baseline: {m}"),
            KeptReason::TooLarge(n) => write!(f, "output over {n} bytes"),
            KeptReason::Mismatch(m) => write!(f, "output coefficients differ: {m}"),
        }
    }
}

/// A tally of [`add_restarts`] outcomes over many files (what `stoker convert` reports).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TranscodeCounts {
    /// JPEGs seen.
    pub jpegs: u64,
    /// JPEGs transcoded.
    pub transcoded: u64,
    /// JPEGs kept as they are, by [`KeptReason::label`].
    pub kept: std::collections::BTreeMap<String, u64>,
    /// The JPEGs' bytes as they came.
    pub bytes_before: u64,
    /// The JPEGs' bytes as written (a kept file counts its own size).
    pub bytes_after: u64,
    /// Time spent in [`add_restarts`], in seconds.
    pub seconds: f64,
}

impl TranscodeCounts {
    /// Counts one outcome for an input of `input_len` bytes that took `took`.
    pub fn record(&mut self, input_len: usize, outcome: &Transcoded, took: std::time::Duration) {
        self.jpegs += 1;
        self.bytes_before += input_len as u64;
        self.seconds += took.as_secs_f64();
        match outcome {
            Transcoded::Written { bytes, .. } => {
                self.transcoded += 1;
                self.bytes_after += bytes.len() as u64;
            }
            Transcoded::Kept(why) => {
                *self.kept.entry(why.label().to_string()).or_insert(0) += 1;
                self.bytes_after += input_len as u64;
            }
        }
    }
}

/// The scan structure of a JPEG: what [`add_restarts`] writes and checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegLayout {
    /// The frame marker's second byte: `0xC0` baseline, `0xC1` extended, `0xC2`
    /// progressive, ...
    pub frame: u8,
    /// Scans (SOS markers) in the file.
    pub scans: u32,
    /// The restart interval in force at the first scan, in MCUs (0: none).
    pub restart_interval: u16,
    /// Restart markers (RST0-7) in the entropy-coded data.
    pub restart_markers: u32,
    /// MCUs per row of an interleaved scan (blocks per row for one component).
    pub mcus_per_row: u32,
    /// MCU rows.
    pub mcu_rows: u32,
}

/// Reads the [`JpegLayout`] of `bytes` by walking its marker segments and stepping over
/// each scan's entropy-coded data; `None` without a start-of-image marker or a readable
/// frame header.
pub fn layout(bytes: &[u8]) -> Option<JpegLayout> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut i = 2;
    let (mut frame, mut dims) = (None, None);
    let (mut scans, mut restarts, mut dri, mut first_dri) = (0u32, 0u32, 0u16, None);
    while i + 1 < bytes.len() {
        if bytes[i] != 0xFF {
            i += 1;
            continue;
        }
        let marker = bytes[i + 1];
        match marker {
            0xFF => {
                i += 1;
                continue;
            }
            0x00 | 0x01 | 0xD8 => {
                i += 2;
                continue;
            }
            0xD0..=0xD7 => {
                restarts += 1;
                i += 2;
                continue;
            }
            0xD9 => break,
            _ => {}
        }
        let len = usize::from(u16::from_be_bytes([*bytes.get(i + 2)?, *bytes.get(i + 3)?]));
        if len < 2 {
            // libjpeg skips nothing past the length bytes of such a segment (as `peek`).
            i += 4;
            continue;
        }
        let body = bytes
            .get(i + 4..(i + 2 + len).min(bytes.len()))
            .unwrap_or(&[]);
        let is_sof = (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof && frame.is_none() {
            frame = Some(marker);
            let w = u32::from(u16::from_be_bytes([*body.get(3)?, *body.get(4)?]));
            let h = u32::from(u16::from_be_bytes([*body.get(1)?, *body.get(2)?]));
            let n = usize::from(*body.get(5)?);
            let comps = body.get(6..6 + 3 * n)?;
            let hmax = comps.chunks_exact(3).map(|c| u32::from(c[1] >> 4)).max()?;
            let vmax = comps.chunks_exact(3).map(|c| u32::from(c[1] & 15)).max()?;
            let (mw, mh) = if n == 1 {
                (8, 8)
            } else {
                (8 * hmax.max(1), 8 * vmax.max(1))
            };
            dims = Some((w.div_ceil(mw), h.div_ceil(mh)));
        }
        if marker == 0xDD {
            dri = u16::from_be_bytes([*body.first()?, *body.get(1)?]);
        }
        i += 2 + len;
        if marker == 0xDA {
            scans += 1;
            first_dri.get_or_insert(dri);
            // Step over the entropy-coded data, counting its restart markers.
            while i + 1 < bytes.len() {
                if bytes[i] == 0xFF {
                    match bytes[i + 1] {
                        0x00 | 0xFF => {}
                        0xD0..=0xD7 => restarts += 1,
                        _ => break,
                    }
                }
                i += 1;
            }
        }
    }
    let (mcus_per_row, mcu_rows) = dims?;
    Some(JpegLayout {
        frame: frame?,
        scans,
        restart_interval: first_dri.unwrap_or(dri),
        restart_markers: restarts,
        mcus_per_row,
        mcu_rows,
    })
}

/// Transcodes `bytes` losslessly to one baseline scan with restart markers (see the
/// module docs), or says why it keeps the file as it is (a libjpeg that could not be set
/// up is [`KeptReason::Unreadable`] too: the file is then kept, never lost).
pub fn add_restarts(bytes: &[u8], opts: &TranscodeOptions) -> Transcoded {
    match try_add_restarts(bytes, opts) {
        Ok((bytes, restart_interval)) => Transcoded::Written {
            bytes,
            restart_interval,
        },
        Err(why) => Transcoded::Kept(why),
    }
}

fn try_add_restarts(bytes: &[u8], opts: &TranscodeOptions) -> Result<(Vec<u8>, u16), KeptReason> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Err(KeptReason::NotJpeg);
    }
    let info = markers::peek(bytes).map_err(KeptReason::Unreadable)?;
    match info.process {
        Some(JpegProcess::Lossless) => return Err(KeptReason::Lossless),
        Some(JpegProcess::Hierarchical) => return Err(KeptReason::Hierarchical),
        _ => {}
    }
    if info.bit_depth != 8 {
        return Err(KeptReason::NotEightBit(info.bit_depth));
    }
    check_limits(&info, &opts.limits).map_err(KeptReason::Unreadable)?;
    let before = layout(bytes).ok_or_else(|| {
        KeptReason::Unreadable(DecodeError::BadHeader("no readable frame header".into()))
    })?;
    let interval = opts.restart.interval(before.mcus_per_row);
    if before.frame == 0xC0
        && before.scans == 1
        && before.restart_interval > 0
        && interval > 0
        && before.restart_interval <= interval
    {
        return Err(KeptReason::AlreadyRestarted {
            interval: before.restart_interval,
        });
    }
    // The entropy-coded data of the same coefficients with optimised tables is about the
    // size of the input's; each restart adds a marker and at most a byte of padding.
    let mcus = u64::from(before.mcus_per_row) * u64::from(before.mcu_rows);
    let markers_bytes = if interval == 0 {
        0
    } else {
        3 * (mcus / u64::from(interval) + 1)
    };
    let max_out = (bytes.len() as u64)
        .saturating_mul(2)
        .saturating_add(markers_bytes)
        .saturating_add(1 << 20);
    let max_out = usize::try_from(max_out).unwrap_or(usize::MAX);
    let hints = Hints::of(bytes, &info);
    let out = turbo::transcode(bytes, &hints, (interval, opts.optimize_tables), max_out).map_err(
        |stop| match stop {
            TranscodeStop::Warned(w) => KeptReason::Damaged(w),
            TranscodeStop::Smoothing(m) => KeptReason::BlockSmoothing(m),
            TranscodeStop::Failed(e) => KeptReason::Unreadable(e),
            TranscodeStop::TooLarge(n) => KeptReason::TooLarge(n),
            TranscodeStop::WriteFailed(m) => KeptReason::NotBaseline(format!("libjpeg: {m}")),
        },
    )?;
    let after = layout(&out)
        .ok_or_else(|| KeptReason::NotBaseline("the output's frame header is unreadable".into()))?;
    if after.frame != 0xC0 || after.scans != 1 || after.restart_interval != interval {
        return Err(KeptReason::NotBaseline(format!(
            "frame {:02X}, {} scan(s), restart interval {} (asked {interval})",
            after.frame, after.scans, after.restart_interval
        )));
    }
    if opts.verify {
        same_coefficients(bytes, &out).map_err(KeptReason::Mismatch)?;
    }
    Ok((out, interval))
}

/// Whether two JPEGs hold the same image: the same coefficients, quantisation tables,
/// sampling, size and colour model (read by [`super::read_coefficients`]), and the same
/// EXIF orientation and Adobe transform ([`markers::peek`]). `Err` says the first
/// difference.
pub fn same_coefficients(a: &[u8], b: &[u8]) -> Result<(), CoefficientsDiffer> {
    use CoefficientsDiffer as D;
    let (ia, ib) = (
        markers::peek(a).map_err(D::First)?,
        markers::peek(b).map_err(D::Second)?,
    );
    if (ia.orientation, ia.adobe_transform) != (ib.orientation, ib.adobe_transform) {
        return Err(D::Markers {
            first: format!("{:?}", (ia.orientation, ia.adobe_transform)),
            second: format!("{:?}", (ib.orientation, ib.adobe_transform)),
        });
    }
    let (mut ca, mut cb) = (Coefficients::default(), Coefficients::default());
    super::read_coefficients(a, true, &mut ca).map_err(D::First)?;
    super::read_coefficients(b, true, &mut cb).map_err(D::Second)?;
    let head = |c: &Coefficients| {
        (
            c.width,
            c.height,
            c.color,
            c.adobe_inverted,
            c.max_h,
            c.max_v,
        )
    };
    if head(&ca) != head(&cb) {
        return Err(D::Headers {
            first: format!("{:?}", head(&ca)),
            second: format!("{:?}", head(&cb)),
        });
    }
    if ca.components.len() != cb.components.len() {
        return Err(D::ComponentCount);
    }
    for (ci, (x, y)) in ca.components.iter().zip(&cb.components).enumerate() {
        if (x.h_samp, x.v_samp, x.width_in_blocks, x.height_in_blocks)
            != (y.h_samp, y.v_samp, y.width_in_blocks, y.height_in_blocks)
        {
            return Err(D::Sampling(ci));
        }
        if x.quant != y.quant {
            return Err(D::Quantisation(ci));
        }
        if x.blocks.len() != y.blocks.len() {
            return Err(D::BlockCount(ci));
        }
        if let Some(k) = x.blocks.iter().zip(&y.blocks).position(|(p, q)| p != q) {
            return Err(D::Block {
                component: ci,
                block: k,
            });
        }
    }
    Ok(())
}

/// The first difference [`same_coefficients`] found between two JPEGs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoefficientsDiffer {
    /// The first could not be read.
    #[error("first: {0}")]
    First(#[source] DecodeError),
    /// The second could not be read.
    #[error("second: {0}")]
    Second(#[source] DecodeError),
    /// Their EXIF orientations or Adobe transforms differ (each as read).
    #[error("orientation and Adobe transform {first} and {second}")]
    Markers {
        /// The first's.
        first: String,
        /// The second's.
        second: String,
    },
    /// Their sizes, colour models or sampling maxima differ (each as read).
    #[error("headers {first} and {second}")]
    Headers {
        /// The first's.
        first: String,
        /// The second's.
        second: String,
    },
    /// They have different numbers of components.
    #[error("component counts differ")]
    ComponentCount,
    /// A component's sampling or size in blocks differs.
    #[error("component {0}: sampling or size")]
    Sampling(usize),
    /// A component's quantisation table differs.
    #[error("component {0}: quantisation table")]
    Quantisation(usize),
    /// A component has another number of blocks.
    #[error("component {0}: block counts")]
    BlockCount(usize),
    /// A block's coefficients differ.
    #[error("component {component}: block {block}")]
    Block {
        /// The component.
        component: usize,
        /// The block, in the component's order.
        block: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that cannot be read is named (first or second) and keeps its decode error
    /// as the source.
    #[test]
    fn an_unreadable_file_keeps_its_decode_error() {
        let e = same_coefficients(b"not a jpeg", b"nor this").expect_err("unreadable");
        assert!(matches!(e, CoefficientsDiffer::First(_)), "{e}");
        assert!(e.to_string().starts_with("first: "), "{e}");
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.downcast_ref::<DecodeError>().is_some());
    }

    #[test]
    fn intervals_follow_the_row() {
        assert_eq!(Restart::Off.interval(40), 0);
        assert_eq!(Restart::McuRows(1).interval(40), 40);
        assert_eq!(Restart::McuRows(2).interval(40), 80);
        assert_eq!(Restart::PerRow(2).interval(41), 21);
        assert_eq!(Restart::Mcus(4).interval(41), 4);
        assert_eq!(Restart::McuRows(u16::MAX).interval(4000), u16::MAX);
        for s in ["off", "row", "rows:2", "per-row:2", "mcus:16"] {
            assert_eq!(Restart::parse(s).map(|r| r.to_string()), Ok(s.to_string()));
        }
        assert_eq!(Restart::parse("8"), Ok(Restart::Mcus(8)));
        assert!(Restart::parse("rows:0").is_err());
        assert!(Restart::parse("every:3").is_err());
    }

    #[test]
    fn kept_reasons_are_typed() {
        let opts = TranscodeOptions::default();
        let kept = |b: &[u8]| match add_restarts(b, &opts) {
            Transcoded::Kept(r) => Some(r.label()),
            Transcoded::Written { .. } => None,
        };
        assert_eq!(kept(b"\x89PNG\r\n\x1a\n"), Some("not_jpeg"));
        assert_eq!(kept(&[0xFF, 0xD8, 0xFF, 0xD9]), Some("unreadable"));
    }
}

//! The crop index: what a clean JPEG keeps from its first decode so that its later crops
//! decode less, to the same pixels.
//!
//! - A JPEG whose one scan is Huffman-coded without restart markers keeps its row index
//!   (`jpeg::turbo::RowIndex`): where each MCU row's entropy-coded data starts, recorded by
//!   its first decode, which reads the file whole. Later crops entropy-decode only the
//!   rows and columns they need (`cpu::decode_image_resuming`).
//! - A progressive JPEG has no such rows: each scan covers the whole image, and libjpeg
//!   decodes them all before the first row. Its first decode makes a baseline copy of its
//!   coefficients with a restart marker every MCU row ([`add_restarts`], as `stoker
//!   convert` makes; the transcode reads the whole file and refuses one with any warning,
//!   or one libjpeg would smooth) and decodes the crop from the copy; this and every later
//!   crop decode only the copy's MCU rows they need (the restart splice). A file whose
//!   copy is refused is decoded as it is, every time.
//!
//! The pipeline keeps each file's [`CropAid`] with its verdict (`pipeline::verdict`),
//! keyed by the file's bytes, within a cap; the decode benchmark uses the same calls.

use std::sync::Arc;

use super::cpu::{self, RowIndex};
use super::jpeg::{add_restarts, TranscodeOptions, Transcoded};
use super::{DecodeError, DecodeOptions, DecodeReport, Format, Image8, JpegProcess};

/// What one clean file keeps so that its later crops decode less.
#[derive(Debug, Clone, Default)]
pub struct CropAid(Aid);

#[derive(Debug, Clone, Default)]
enum Aid {
    /// Nothing: not a file that has an aid, or past the cap.
    #[default]
    None,
    /// Its row index.
    Rows(Arc<RowIndex>),
    /// Its restart-marked baseline copy: the same coefficients.
    Copy(Arc<[u8]>),
}

impl CropAid {
    /// The memory it holds.
    pub fn bytes(&self) -> usize {
        match &self.0 {
            Aid::Rows(index) => index.bytes(),
            Aid::Copy(copy) => copy.len(),
            Aid::None => 0,
        }
    }

    /// A file's row index of `rows` MCU rows, for tests of what holds aids.
    #[cfg(test)]
    pub(crate) fn rows_for_tests(rows: usize) -> CropAid {
        CropAid(Aid::Rows(Arc::new(RowIndex::of_rows(rows))))
    }

    /// A copy of `len` bytes, for tests of what holds aids.
    #[cfg(test)]
    pub(crate) fn copy_for_tests(len: usize) -> CropAid {
        CropAid(Aid::Copy(vec![0u8; len].into()))
    }

    /// Whether it is a row index.
    #[cfg(test)]
    pub(crate) fn is_rows(&self) -> bool {
        matches!(self.0, Aid::Rows(_))
    }

    /// Whether it holds nothing.
    #[cfg(test)]
    pub(crate) fn is_none(&self) -> bool {
        matches!(self.0, Aid::None)
    }
}

/// A file's first decode, with the aid to keep when it is clean (no warning). The window
/// is decoded and the file read whole, so the warning and the refusal are the whole
/// file's (`cpu::decode_image_judging_whole`):
///
/// - a progressive JPEG, when `copies` (the pipeline keeps aids), through its baseline
///   copy: the transcode reads the whole file and refuses it at any warning, and the crop
///   decoded from a copy it makes is the file's own crop; the copy is the aid. A refused
///   copy leaves the file to the decode below, without an aid;
/// - any other file decoded as it is, a JPEG whose one scan is Huffman-coded without
///   restart markers keeping its row index.
pub fn decode_first(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
    copies: bool,
) -> Result<(DecodeReport, CropAid), DecodeError> {
    let info = cpu::checked_headers(bytes, opts)?;
    let progressive = info.format == Format::Jpeg && info.process == Some(JpegProcess::Progressive);
    if progressive && copies {
        if let Some(copy) = first_from_copy(bytes, opts, out) {
            return Ok((
                DecodeReport {
                    info,
                    warning: None,
                },
                CropAid(Aid::Copy(copy)),
            ));
        }
    }
    let mut index = None;
    let report = cpu::decode_image_judging_whole(bytes, opts, out, &mut index)?;
    let aid = match index {
        Some(index) if report.warning.is_none() => Aid::Rows(Arc::new(index)),
        _ => Aid::None,
    };
    Ok((report, CropAid(aid)))
}

/// A progressive JPEG's baseline copy, its crop decoded from it into `out`; `None` where
/// the transcode refuses the file (a warning, damage, smoothing) or the copy does not
/// decode cleanly.
fn first_from_copy(bytes: &[u8], opts: &DecodeOptions, out: &mut Image8) -> Option<Arc<[u8]>> {
    let made = add_restarts(
        bytes,
        &TranscodeOptions {
            // The coefficients are copied by libjpeg; the tests hold the copies' pixels
            // to the file's.
            verify: false,
            limits: opts.limits,
            // One pass (the copy stays in memory: a few percent larger, as fast to read).
            optimize_tables: false,
            ..TranscodeOptions::default()
        },
    );
    let Transcoded::Written { bytes: copy, .. } = made else {
        return None;
    };
    let report = cpu::decode_image_report(&copy, opts, out).ok()?;
    report.warning.is_none().then(|| copy.into())
}

/// A later decode of a clean file whose first decode gave `aid`: the crop decoded with
/// it. Returns whether it decoded (when not, the caller decodes the file itself: a
/// decode with the aid fails only where the aid does not fit, as a row index on a
/// libjpeg it does not mirror, or where there is no aid).
pub fn decode_with(bytes: &[u8], opts: &DecodeOptions, out: &mut Image8, aid: &CropAid) -> bool {
    match &aid.0 {
        Aid::Rows(index) => cpu::decode_image_resuming(bytes, opts, out, index).is_ok(),
        Aid::Copy(copy) => cpu::decode_image_report(copy, opts, out).is_ok(),
        Aid::None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::fresh_for_tests as rng;

    /// A first decode through a progressive JPEG's copy is the first decode without it:
    /// for every bundled JPEG (clean, damaged, cut, smoothed, with extraneous bytes) and
    /// random windows and scales, strict and lenient, the same report or error and the
    /// same pixels; and a clean progressive file keeps its copy, which later crops decode
    /// to the file's own pixels.
    #[test]
    fn a_first_decode_through_the_copy_is_the_decode_of_the_file() {
        let (seed, mut next) = rng();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let mut files: Vec<_> = ["jpeg", "lenient"]
            .iter()
            .flat_map(|d| {
                std::fs::read_dir(root.join(d))
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
            .collect();
        files.sort();
        let mut copies = 0;
        for path in &files {
            let Ok(bytes) = std::fs::read(path) else {
                continue;
            };
            let Ok(info) = crate::decode::peek_info(&bytes) else {
                continue;
            };
            for case in 0..6 {
                let scale = [1, 2, 4, 8][next(4) as usize];
                let (w, h) = (
                    info.width.div_ceil(scale).max(1),
                    info.height.div_ceil(scale).max(1),
                );
                let (x0, y0) = (next(w), next(h));
                let window = [x0, y0, x0 + 1 + next(w - x0), y0 + 1 + next(h - y0)];
                let opts = DecodeOptions {
                    strict: case % 2 == 0,
                    scale,
                    window: (case > 1).then_some(window),
                    ..DecodeOptions::default()
                };
                let (mut with, mut without) = (Image8::default(), Image8::default());
                let a = decode_first(&bytes, &opts, &mut with, true);
                let b = decode_first(&bytes, &opts, &mut without, false);
                let what = format!("seed {seed}, {}, case {case}, {opts:?}", path.display());
                match (a, b) {
                    (Ok((ra, aid)), Ok((rb, _))) => {
                        assert_eq!(ra, rb, "{what}");
                        assert!(with == without, "{what}: pixels differ");
                        if matches!(aid.0, Aid::Copy(_)) {
                            copies += 1;
                            let mut later = Image8::default();
                            assert!(decode_with(&bytes, &opts, &mut later, &aid), "{what}");
                            assert!(later == without, "{what}: a later crop differs");
                        }
                    }
                    (Err(ea), Err(eb)) => assert_eq!(ea.to_string(), eb.to_string(), "{what}"),
                    (a, b) => panic!("{what}: {:?} against {:?}", a.map(|r| r.0), b.map(|r| r.0)),
                }
            }
        }
        assert!(copies >= 6, "seed {seed}: {copies} copies");
    }
}

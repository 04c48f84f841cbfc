//! The crop index: what a clean JPEG keeps from its first decodes so that its later crops
//! decode less, to the same pixels.
//!
//! - A JPEG whose one scan is Huffman-coded without restart markers keeps its row index
//!   (`jpeg::turbo::RowIndex`): where each MCU row's entropy-coded data starts, recorded by
//!   its first decode, which reads the file whole. Later crops entropy-decode only the
//!   rows and columns they need (`cpu::decode_image_resuming`).
//! - A progressive JPEG has no such rows: each scan covers the whole image, and libjpeg
//!   decodes them all before the first row. At its second decode it gets a baseline copy
//!   of its coefficients with a restart marker every MCU row ([`add_restarts`], as
//!   `stoker convert` makes; a file libjpeg would smooth is kept as it is). Later crops
//!   decode the copy, of which the restart splice decodes only their MCU rows.
//!
//! The pipeline keeps each file's [`CropAid`] with its verdict (`pipeline::verdict`),
//! keyed by the file's bytes, within a cap; the decode benchmark uses the same calls.

use std::sync::Arc;

use super::cpu::{self, RowIndex};
use super::jpeg::{add_restarts, TranscodeOptions, Transcoded};
use super::{DecodeError, DecodeOptions, DecodeReport, Image8, JpegProcess};

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
    /// A progressive JPEG whose baseline copy is made at its next decode.
    CopyDue,
    /// Its restart-marked baseline copy: the same coefficients.
    Copy(Arc<[u8]>),
}

impl CropAid {
    /// The memory it holds.
    pub fn bytes(&self) -> usize {
        match &self.0 {
            Aid::Rows(index) => index.bytes(),
            Aid::Copy(copy) => copy.len(),
            Aid::None | Aid::CopyDue => 0,
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

    /// A copy due, for tests of what holds aids.
    #[cfg(test)]
    pub(crate) fn copy_due_for_tests() -> CropAid {
        CropAid(Aid::CopyDue)
    }

    /// Whether it is a row index.
    #[cfg(test)]
    pub(crate) fn is_rows(&self) -> bool {
        matches!(self.0, Aid::Rows(_))
    }

    /// Whether it holds nothing and has nothing due.
    #[cfg(test)]
    pub(crate) fn is_none(&self) -> bool {
        matches!(self.0, Aid::None)
    }
}

/// A file's first decode (`cpu::decode_image_judging_whole`: the window decoded, the
/// file read whole, so the warning and the refusal are the whole file's), with the aid to
/// keep when it is clean (no warning): its row index, a copy due for a progressive JPEG,
/// or none.
pub fn decode_first(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
) -> Result<(DecodeReport, CropAid), DecodeError> {
    let mut index = None;
    let report = cpu::decode_image_judging_whole(bytes, opts, out, &mut index)?;
    let aid = match index {
        _ if report.warning.is_some() => Aid::None,
        Some(index) => Aid::Rows(Arc::new(index)),
        None if report.info.process == Some(JpegProcess::Progressive) => Aid::CopyDue,
        None => Aid::None,
    };
    Ok((report, CropAid(aid)))
}

/// A later decode of a clean file whose first decode gave `aid`: the crop decoded with
/// it, making a progressive JPEG's copy when one is due. Returns whether it decoded (when
/// not, the caller decodes the file itself: a decode with the aid fails only where the
/// aid does not fit, as a row index on a libjpeg it does not mirror) and, when a copy was
/// due, the aid to keep from now on.
pub fn decode_with(
    bytes: &[u8],
    opts: &DecodeOptions,
    out: &mut Image8,
    aid: &CropAid,
) -> (bool, Option<CropAid>) {
    match &aid.0 {
        Aid::Rows(index) => (
            cpu::decode_image_resuming(bytes, opts, out, index).is_ok(),
            None,
        ),
        Aid::Copy(copy) => (cpu::decode_image_report(copy, opts, out).is_ok(), None),
        Aid::CopyDue => {
            let made = add_restarts(
                bytes,
                &TranscodeOptions {
                    // The coefficients are copied by libjpeg; the tests hold the copies'
                    // pixels to the file's.
                    verify: false,
                    limits: opts.limits,
                    ..TranscodeOptions::default()
                },
            );
            match made {
                Transcoded::Written { bytes: copy, .. } => {
                    let copy: Arc<[u8]> = copy.into();
                    let decoded = cpu::decode_image_report(&copy, opts, out).is_ok();
                    (decoded, Some(CropAid(Aid::Copy(copy))))
                }
                Transcoded::Kept(_) => (false, Some(CropAid(Aid::None))),
            }
        }
        Aid::None => (false, None),
    }
}

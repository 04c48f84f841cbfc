//! The verdict on one decode from the warnings libjpeg emitted and the scans it read:
//! the rules of the module docs of [`crate::decode::jpeg`].

use super::*;

/// The warnings libjpeg emitted during one decode, by what they mean.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    /// `JWRN_EXTRANEOUS_DATA`: the byte count, the marker and the message of each (the
    /// first [`MAX_EXTRANEOUS`]; `extraneous_more` says there were more).
    pub(super) extraneous: Vec<(u32, u8, String)>,
    pub(super) extraneous_more: bool,
    /// `JWRN_JPEG_EOF`: the data ran out (libjpeg then inserts an end-of-image marker).
    pub(super) eof: bool,
    /// `JWRN_HIT_MARKER`: the entropy decoder needed more data than its scan holds.
    pub(super) hit_marker: bool,
    /// The first warning that means damaged data (every other corrupt-data code).
    pub(super) damage: Option<String>,
}

/// At most this many runs of extraneous bytes are judged; a file with more is damaged.
pub(super) const MAX_EXTRANEOUS: usize = 8;

/// At most this many extraneous bytes after a scan's entropy-coded data are taken as
/// padding (some Motion-JPEG encoders and cameras write a few before the end marker);
/// more are taken as the unread tail of a scan whose corrupt data made the Huffman
/// decoder finish early, which is how most corruption shows: libjpeg-turbo's fast
/// Huffman path does not report bad codes.
pub(super) const TRAILING_PADDING_MAX: u32 = 4;

/// What the decoder knows, after the decode, about the scans it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Scans {
    /// Arithmetic-coded: its decoder fills missing data without a warning.
    pub(super) arithmetic: bool,
    /// Progressive: the DC coefficients of every component were received.
    pub(super) dc_complete: bool,
    /// Progressive: the first coefficient not refined to its last bit, described.
    pub(super) unrefined: Option<String>,
    /// Sequential: the scans read cover every component (one interleaved scan).
    pub(super) sequential_complete: bool,
    /// Whether the file is progressive.
    pub(super) progressive: bool,
}

/// The damage libjpeg reported, as the verdict states it (`None` when it reported none).
fn damage_warning(seen: &Seen) -> Option<DecodeWarning> {
    let m = seen.damage.as_ref()?;
    let m = if seen.eof && seen.hit_marker {
        format!("Premature end of JPEG file inside a scan's entropy-coded data ({m})")
    } else {
        m.clone()
    };
    Some(DecodeWarning::new(WarningKind::Damaged, m))
}

/// What is known to be damage while the decode still runs: a damage warning, or the end
/// of an arithmetic-coded file's data (where it ends is unknown, see [`eof_warning`]).
/// The verdict on the whole decode is then this warning, whatever comes after.
pub(super) fn damage_so_far(seen: &Seen, arithmetic: bool) -> Option<DecodeWarning> {
    damage_warning(seen).or_else(|| {
        (seen.eof && arithmetic).then(|| {
            eof_warning(&Scans {
                arithmetic: true,
                dc_complete: false,
                unrefined: None,
                sequential_complete: false,
                progressive: false,
            })
        })
    })
}

/// The verdict on one decode: the warning to attach to the image (`None` when libjpeg
/// warned of nothing). See the module docs of [`crate::decode::jpeg`] for the rules.
pub(super) fn verdict(seen: &Seen, scans: &Scans, bytes: &[u8]) -> Option<DecodeWarning> {
    if let Some(w) = damage_warning(seen) {
        return Some(w);
    }
    // Every fault found is a candidate; the most severe wins (the first of equals), so a
    // harmless one never hides damage.
    let candidates = [
        seen.eof.then(|| eof_warning(scans)),
        extraneous_warning(seen, bytes),
        scans
            .unrefined
            .as_ref()
            .filter(|_| scans.progressive)
            .map(|u| {
                DecodeWarning::new(
                    WarningKind::Incomplete,
                    format!("progressive JPEG without its last refinement scans ({u})"),
                )
            }),
    ];
    candidates
        .into_iter()
        .flatten()
        .fold(None, |best, w| match best {
            Some(b) if b.kind >= w.kind => Some(b),
            _ => Some(w),
        })
}

/// The verdict on data that ran out (no `HIT_MARKER`): at a scan boundary, or not.
fn eof_warning(scans: &Scans) -> DecodeWarning {
    let at_boundary = !scans.arithmetic
        && if scans.progressive {
            scans.dc_complete
        } else {
            scans.sequential_complete
        };
    if at_boundary {
        DecodeWarning::new(
            WarningKind::Incomplete,
            "Premature end of JPEG file, after a complete scan (no end-of-image marker)",
        )
    } else if scans.arithmetic {
        DecodeWarning::new(
            WarningKind::Damaged,
            "Premature end of JPEG file in arithmetic-coded data (where it ends is unknown)",
        )
    } else {
        DecodeWarning::new(
            WarningKind::Damaged,
            "Premature end of JPEG file before every component had a scan",
        )
    }
}

/// The verdict on libjpeg's extraneous-bytes warnings: between segments (found in the
/// file) or a few after a scan they are harmless; more after a scan, or too many runs,
/// mean the decoder stopped short of the data.
fn extraneous_warning(seen: &Seen, bytes: &[u8]) -> Option<DecodeWarning> {
    let (_, _, first) = seen.extraneous.first()?;
    let gaps = crate::decode::jpeg::markers::segment_gaps(bytes);
    for (n, marker, m) in &seen.extraneous {
        if !gaps.contains(&(*n as usize, *marker)) && *n > TRAILING_PADDING_MAX {
            return Some(DecodeWarning::new(
                WarningKind::Damaged,
                format!(
                    "{m}: after a scan's entropy-coded data, the decoder stopped short \
                     of them, as corrupt data makes it do"
                ),
            ));
        }
    }
    if seen.extraneous_more {
        return Some(DecodeWarning::new(
            WarningKind::Damaged,
            format!("more than {MAX_EXTRANEOUS} runs of extraneous bytes"),
        ));
    }
    Some(DecodeWarning::new(WarningKind::Extraneous, first.clone()))
}

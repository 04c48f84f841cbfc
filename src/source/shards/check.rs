//! What a read of a tar sample checks against its shard (see `member.rs` here): byte
//! ranges of the shard and their CRC-32C, as indexing found them.

use serde::{Deserialize, Serialize};

/// A tar header block's bytes.
const HEADER: u64 = 512;

/// The most ranges a check holds: a member's headers and four recorded members, with
/// room to spare.
pub(super) const MAX_PIECES: usize = 16;

/// The most bytes a check's ranges hold together: recorded texts and targets are read
/// while indexing only up to a MiB ([`super::tar::TARGETS_LIMIT`]), headers up to
/// 64 KiB each.
pub(super) const PIECES_LIMIT: u64 = 4 << 20;

/// What of a shard a read of a sample checks: byte ranges (offset, length), in order,
/// and a CRC-32C of the CRC-32Cs of each (little-endian), so that one check covers
/// ranges that are not contiguous.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Check {
    /// The ranges, in shard order, none empty.
    pub(crate) pieces: Vec<(u64, u64)>,
    /// The CRC-32C of the ranges' CRC-32Cs.
    pub(crate) crc: u32,
    /// The CRC-32C of the member's data, where indexing read it (a local shard; `None`
    /// in an index of a shard in a store, and in sidecars written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<u32>,
}

impl Check {
    /// The check of `pieces`: (offset, length, CRC-32C of those bytes), without the
    /// data's CRC-32C.
    pub(super) fn new(mut pieces: Vec<(u64, u64, u32)>) -> Check {
        pieces.sort_unstable();
        pieces.dedup();
        pieces.retain(|p| p.1 > 0);
        Check {
            pieces: pieces.iter().map(|&(o, l, _)| (o, l)).collect(),
            crc: combine(pieces.iter().map(|p| p.2)),
            data: None,
        }
    }

    /// Why the check's ranges do not fit a shard of `size` bytes, or cannot guard the
    /// member whose data is at `data`: `None` when they do.
    pub(super) fn unfit(&self, size: u64, data: u64) -> Option<String> {
        if self.pieces.len() > MAX_PIECES {
            return Some(format!("a check of more than {MAX_PIECES} ranges"));
        }
        let mut total = 0u64;
        let mut last = 0u64;
        for &(o, l) in &self.pieces {
            let end = o
                .checked_add(l)
                .filter(|&e| e <= size && l > 0 && o >= last);
            let Some(end) = end else {
                return Some(format!(
                    "a check of {l} bytes at {o}: empty, out of order, or past the shard's {size}"
                ));
            };
            total += l;
            last = end;
        }
        if total > PIECES_LIMIT {
            return Some(format!("a check of more than {PIECES_LIMIT} bytes"));
        }
        if !self
            .pieces
            .iter()
            .any(|&(o, l)| o + l == data && l >= HEADER)
        {
            return Some(format!("no check of the header before the data at {data}"));
        }
        None
    }
}

/// The CRC-32C of `crcs`, each as 4 little-endian bytes.
pub(super) fn combine(crcs: impl Iterator<Item = u32>) -> u32 {
    crcs.fold(0, |acc, c| crc32c::crc32c_append(acc, &c.to_le_bytes()))
}

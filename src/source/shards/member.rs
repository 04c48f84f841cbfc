//! Reading a tar member as its shard's index recorded it, checked against the shard.
//!
//! An index is found by offsets, and a shard rewritten without changing its size or
//! modification time (`touch -r`, a deterministic writer and `cp -p`) can hold other
//! bytes at those offsets. So a sample's entry records what indexing read to find it, a
//! [`Check`]: the byte ranges of the image member's header (with the extension headers
//! before it) and of the members whose data the entry holds (label, class name, path,
//! targets: headers and data), and their CRC-32C. A read reads them with the member's
//! data (one read where they lie close, as a sample's members do) and checks them: the
//! header right before the data must be a tar header whose checksum holds, and the
//! ranges must hold what they held when the shard was indexed. Anything else is the
//! sample's report ([`ReadError::StaleIndex`]), never another member's bytes or a label
//! its member no longer gives; the stale sidecar is removed, so that the next listing
//! indexes the shard again.

use std::path::PathBuf;
use std::sync::Arc;

use super::check::{combine, Check};
use super::tar::{checksum_holds, name_of, number, Block, BLOCK};
use super::{index_path, with_shard, ReadError};

/// Ranges closer than this are read as one (what lies between is read and dropped).
const GAP: u64 = 64 << 10;

/// A tar member as its shard's index records it: where its data is, and what of the
/// shard indexing read to find it (see the module docs), which a read checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarMember {
    /// The shard.
    pub shard: PathBuf,
    /// Where the member's data starts.
    pub offset: u64,
    /// Bytes of data.
    pub len: u64,
    /// The ranges of the shard a read checks (offset, length), in order: the member's
    /// header ends where its data starts.
    pub pieces: Arc<[(u64, u64)]>,
    /// The CRC-32C of the ranges' CRC-32Cs (little-endian), as indexing found them.
    pub crc: u32,
    /// The CRC-32C of the member's data, where indexing read it (a local shard, or a
    /// sidecar written from one): a read whose data does not give it is read again, then
    /// reported ([`ReadError::MemberDamaged`]).
    pub data_crc: Option<u32>,
}

impl TarMember {
    /// The member `offset`, `len` of `shard` with `check`.
    pub(super) fn new(shard: PathBuf, offset: u64, len: u64, check: &Check) -> TarMember {
        TarMember {
            shard,
            offset,
            len,
            pieces: check.pieces.clone().into(),
            crc: check.crc,
            data_crc: check.data,
        }
    }

    /// The error for what a read found, `what`, with the stale sidecar removed (a local
    /// one: a store's is replaced by whoever writes the shards).
    fn stale(&self, what: String) -> ReadError {
        let side = index_path(&self.shard);
        let removed =
            !crate::source::remote::is_url(&self.shard) && std::fs::remove_file(&side).is_ok();
        if removed {
            log::warn!(
                "{}: stale index removed ({what}); the next listing indexes the shard again",
                side.display()
            );
        }
        ReadError::StaleIndex {
            shard: self.shard.clone(),
            offset: self.offset,
            what,
            side,
        }
    }
}

/// Reads of a member whose data does not give its recorded CRC-32C (or, in a store,
/// whose headers do not check), before it is reported: a body damaged in transit (a store
/// over plain HTTP, a flaky link) is read again, from the source, not from a buffer; data
/// damaged where it is stored stays damaged.
const DATA_READS: u32 = 5;

/// Reads the data of `m` into `buf`, refusing more than `max_bytes`, after checking that
/// the shard still holds what its index recorded ([`TarMember::pieces`]), and that the
/// data gives the CRC-32C indexing recorded, where it did ([`TarMember::data_crc`]).
pub fn read_member(m: &TarMember, max_bytes: u64, buf: &mut Vec<u8>) -> Result<(), ReadError> {
    let remote = crate::source::remote::is_url(&m.shard);
    let mut reads = 0;
    loop {
        reads += 1;
        match read_checked(m, max_bytes, buf) {
            // In a store, headers that do not check may be a body damaged on its way.
            Err(ReadError::StaleIndex { what, .. }) if remote && reads < DATA_READS => {
                log::debug!("{} at {}: {what}; read again", m.shard.display(), m.offset);
                super::forget_buffers(&m.shard);
                continue;
            }
            r => r?,
        }
        let Some(want) = m.data_crc else {
            return Ok(());
        };
        let got = crc32c::crc32c(buf);
        if got == want {
            return Ok(());
        }
        if reads >= DATA_READS {
            buf.clear();
            return Err(ReadError::MemberDamaged {
                shard: m.shard.clone(),
                offset: m.offset,
                len: m.len,
                reads,
                got,
                want,
            });
        }
        log::debug!(
            "{} at {}: the member's data gives CRC-32C {got:#010x}, not the {want:#010x} indexed; read again",
            m.shard.display(),
            m.offset
        );
        super::forget_buffers(&m.shard);
    }
}

/// [`read_member`] without the data's CRC-32C.
fn read_checked(m: &TarMember, max_bytes: u64, buf: &mut Vec<u8>) -> Result<(), ReadError> {
    if m.len > max_bytes {
        return Err(ReadError::MemberTooLarge {
            len: m.len,
            limit: max_bytes,
        });
    }
    let check = Check {
        pieces: m.pieces.to_vec(),
        crc: m.crc,
        data: None,
    };
    let end = m.offset.saturating_add(m.len);
    if let Some(what) = check.unfit(u64::MAX, m.offset) {
        return Err(m.stale(what));
    }
    // Runs of the data and the ranges, each read once; at most the data, the ranges
    // (bounded above) and the gaps between them.
    let mut runs: Vec<(u64, u64)> = Vec::with_capacity(check.pieces.len() + 1);
    let mut spans: Vec<(u64, u64)> = check.pieces.iter().map(|&(o, l)| (o, o + l)).collect();
    spans.push((m.offset, end));
    spans.sort_unstable();
    for (s, e) in spans {
        match runs.last_mut() {
            Some(r) if s <= r.1.saturating_add(GAP) => r.1 = r.1.max(e),
            _ => runs.push((s, e)),
        }
    }
    buf.clear();
    let mut crcs = Vec::with_capacity(check.pieces.len());
    let mut header: Option<Block> = None;
    let mut scratch = Vec::new();
    for (s, e) in runs {
        let holds_data = s <= m.offset && end <= e;
        let bytes = if holds_data { &mut *buf } else { &mut scratch };
        bytes.clear();
        bytes.resize((e - s) as usize, 0);
        with_shard(&m.shard, s, e - s, |f| f.read_exact(bytes)).map_err(|error| {
            ReadError::MemberCutShort {
                path: m.shard.clone(),
                offset: s,
                error,
            }
        })?;
        let at = |o: u64, l: u64| bytes.get((o - s) as usize..(o - s + l) as usize);
        for &(o, l) in check.pieces.iter().filter(|p| s <= p.0 && p.0 + p.1 <= e) {
            crcs.push(at(o, l).map_or(0, crc32c::crc32c));
        }
        if let Some(h) = m.offset.checked_sub(BLOCK).filter(|&h| h >= s) {
            header = header.or_else(|| at(h, BLOCK).and_then(|b| b.try_into().ok()));
        }
        if holds_data {
            let from = (m.offset - s) as usize;
            buf.copy_within(from..from + m.len as usize, 0);
            buf.truncate(m.len as usize);
        }
    }
    let header_at = m.offset.saturating_sub(BLOCK);
    let what = match header {
        Some(h) if !checksum_holds(&h) => format!(
            "the block before the member's data, at offset {header_at}, is not a tar header whose checksum holds"
        ),
        _ if combine(crcs.iter().copied()) != m.crc => {
            let now = header.map_or_else(String::new, |h| {
                let size = number(&h[124..136]).map_or_else(|| "?".into(), |n| n.to_string());
                format!(
                    ": the header at offset {header_at} now gives {:?} of {size} bytes",
                    name_of(&h)
                )
            });
            format!("the member's headers, label, class name, path or targets differ from those indexed{now}")
        }
        _ => return Ok(()),
    };
    buf.clear();
    Err(m.stale(what))
}

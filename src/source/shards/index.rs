//! The sidecar index of a shard, `<shard>.stoker-index`: every sample's offset and length,
//! its label, whether it has a mask (JSON), checked against the shard's size,
//! modification time and content fingerprint and rebuilt when any changed.
//!
//! A sidecar is trusted only as far as it is checked: it is read only when it is a
//! regular file of at most [`sidecar_limit`] bytes, and used only when its stamp (format,
//! kind, keys, the shard's size and modification time) matches, the shard's fingerprint
//! (CRC-32C of its first and last [`FINGERPRINT_SPAN`] bytes: a local shard rewritten
//! with its size and modification time kept, `touch -r` or `cp -p`, is indexed again)
//! matches, its digest (CRC-32C of its entries) holds, so that a damaged or edited
//! sidecar cannot drop, add or move a sample, and every entry fits the shard (what would
//! be read lies inside it, no two samples' bytes overlap, recorded texts are no longer
//! than indexing records, a tar sample's checks lie inside it). Anything else is rebuilt
//! from the shard, and the reason logged.
//!
//! A change the fingerprint does not see (in the middle of a shard larger than twice
//! the span) is found when a sample is read: a tar sample's read checks its member's
//! header and the members its entry holds (see `member.rs` here), and a TFRecord
//! record's read checks its CRC-32Cs.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{file_stamp, tar, tfrecord, Entry, ExampleKeys, MAX_RECORDED};
use crate::error::Result;
use crate::source::target::MAX_TARGETS;

/// A shard's sidecar index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Index {
    version: u32,
    kind: String,
    size: u64,
    mtime_ns: u128,
    keys: Option<ExampleKeys>,
    /// The shard's content fingerprint ([`fingerprint`]).
    fingerprint: u32,
    /// CRC-32C of `entries` as serialised (JSON).
    digest: u32,
    pub(super) entries: Vec<Entry>,
}

/// 2: entries carry the recorded path and class name. 3: labels as recorded (checked when
/// listed, so an out-of-range label is reported rather than dropped), what indexing found
/// wrong with a sample, damaged regions of a shard as entries of their own. 4: the digest
/// of the entries. 6: the shard's fingerprint, and what a read of a tar sample checks.
/// 7: the CRC-32C of a tar member's data, where indexing read it (a local shard).
const INDEX_VERSION: u32 = 7;

/// The bytes at each end of a shard its fingerprint covers (all of a shard of up to twice
/// as many).
pub(super) const FINGERPRINT_SPAN: u64 = 64 << 10;

/// The shard's content fingerprint: the CRC-32C of its first and last
/// [`FINGERPRINT_SPAN`] bytes (of all of it when it is no larger than both).
fn fingerprint(shard: &Path, size: u64) -> std::io::Result<u32> {
    let spans = if size <= 2 * FINGERPRINT_SPAN {
        vec![(0, size)]
    } else {
        vec![
            (0, FINGERPRINT_SPAN),
            (size - FINGERPRINT_SPAN, FINGERPRINT_SPAN),
        ]
    };
    let mut crc = 0u32;
    let mut buf = Vec::new();
    for (offset, len) in spans {
        // At most 128 KiB.
        buf.resize(len as usize, 0);
        super::with_shard(shard, offset, len, |f| f.read_exact(&mut buf))?;
        crc = crc32c::crc32c_append(crc, &buf);
    }
    Ok(crc)
}

/// Why a sidecar is not used (and the index is rebuilt): logged, never an error.
#[derive(Debug, thiserror::Error)]
enum Stale {
    /// Not there, not a regular file, unreadable, or larger than [`sidecar_limit`].
    #[error("{0}")]
    Read(#[from] crate::source::fsio::ReadError),
    /// Not an index (JSON of the wrong shape).
    #[error("not an index: {0}")]
    Json(#[from] serde_json::Error),
    /// Another format version.
    #[error("format {found}, expected {INDEX_VERSION}")]
    Version {
        /// The sidecar's version.
        found: u32,
    },
    /// Made for another shard, another state of this one, another kind or other keys.
    #[error("made for another shard or another version of it ({what} differs)")]
    Stamp {
        /// What differs.
        what: &'static str,
    },
    /// The shard's fingerprint could not be read.
    #[error("the shard's fingerprint could not be read: {0}")]
    Fingerprint(std::io::Error),
    /// The entries are not those the digest was made of: damaged or edited.
    #[error("digest {stored:#010x} does not match the entries' {computed:#010x}")]
    Digest {
        /// The digest the sidecar holds.
        stored: u32,
        /// The digest of the entries it holds.
        computed: u32,
    },
    /// An entry that does not fit the shard.
    #[error("entry {index}: {what}")]
    Entry {
        /// The entry's index.
        index: usize,
        /// What is wrong with it.
        what: String,
    },
}

/// The most bytes a sidecar of a shard of `size` bytes is read with: a generous bound on
/// what indexing writes (an entry per sample, a sample at least a byte of the shard: tar
/// members take 512), so that a sidecar cannot make listing read a file of any size.
pub(super) fn sidecar_limit(size: u64) -> u64 {
    (1u64 << 20).saturating_add(size.saturating_mul(512))
}

/// CRC-32C of `entries` serialised as JSON, streamed (nothing allocated).
fn digest(entries: &[Entry]) -> std::result::Result<u32, serde_json::Error> {
    struct Crc(u32);
    impl Write for Crc {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = crc32c::crc32c_append(self.0, buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut crc = Crc(0);
    serde_json::to_writer(&mut crc, entries)?;
    Ok(crc.0)
}

/// The bytes a TFRecord record of `len` data bytes takes: its 12-byte header, its data and
/// its 4-byte checksum.
const RECORD_FRAME: u64 = 16;

/// Checks that `entries` fit a shard of `size` bytes of `kind`: every sample that would be
/// read lies inside the shard (a tar member's data starts on a block), no two overlap, and
/// recorded texts are no longer than indexing records.
fn check_entries(entries: &[Entry], size: u64, kind: Kind<'_>) -> std::result::Result<(), Stale> {
    let bad = |index: usize, what: String| Stale::Entry { index, what };
    // (start, end, entry) of the bytes each delivered sample reads.
    let mut spans = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        for (what, text) in [("path", &e.path), ("class", &e.class)] {
            if text.as_ref().is_some_and(|t| t.len() as u64 > MAX_RECORDED) {
                return Err(bad(i, format!("a {what} longer than {MAX_RECORDED} bytes")));
            }
        }
        if let Some(t) = &e.targets {
            let most = [
                t.classes.len(),
                t.values.len(),
                t.boxes.len(),
                t.keypoints.len(),
            ];
            if most.into_iter().max().unwrap_or(0) > MAX_TARGETS {
                return Err(bad(i, format!("more than {MAX_TARGETS} targets of a kind")));
            }
        }
        if e.problem.is_some() || e.unread {
            continue;
        }
        let (frame, mask) = match kind {
            Kind::TfRecord(_) => (RECORD_FRAME, None),
            Kind::Tar => (0, e.mask),
        };
        if matches!(kind, Kind::Tar) && !e.offset.is_multiple_of(512) {
            return Err(bad(
                i,
                format!("member data at {}, not on a block", e.offset),
            ));
        }
        if matches!(kind, Kind::TfRecord(_)) && e.mask.is_some_and(|m| m != (0, 0)) {
            return Err(bad(i, "a record with a mask range".into()));
        }
        if matches!(kind, Kind::Tar) {
            // What a read checks: the image's (and the mask's) header and the recorded
            // members, inside the shard and bounded.
            let checks = [(e.offset, e.check.as_ref(), "image")]
                .into_iter()
                .chain(e.mask.map(|(o, _)| (o, e.mask_check.as_ref(), "mask")));
            for (data, check, what) in checks {
                let unfit = match check {
                    Some(c) => c.unfit(size, data),
                    None => Some(format!("no check of its {what}")),
                };
                if let Some(why) = unfit {
                    return Err(bad(i, format!("{why} ({what})")));
                }
            }
        }
        for (offset, len) in std::iter::once((e.offset, e.len)).chain(mask) {
            let end = offset.checked_add(len).and_then(|x| x.checked_add(frame));
            match end {
                Some(end) if end <= size => spans.push((offset, end, i)),
                _ => {
                    return Err(bad(
                        i,
                        format!("{len} bytes at {offset} run past the shard's {size}"),
                    ))
                }
            }
        }
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if let [(_, end, i), (start, _, j)] = *w {
            if start < end {
                return Err(bad(j, format!("its bytes overlap those of entry {i}")));
            }
        }
    }
    Ok(())
}

/// The sidecar `side` as the index of `shard`, of `size` bytes modified at `mtime_ns`, of
/// `kind`, if it is one ([`Stale`] says why not).
fn load(
    shard: &Path,
    side: &Path,
    size: u64,
    mtime_ns: u128,
    kind: Kind<'_>,
) -> std::result::Result<Index, Stale> {
    let mut text = Vec::new();
    crate::source::fsio::read_bounded(side, sidecar_limit(size), &mut text)?;
    let ix = serde_json::from_slice::<Index>(&text)?;
    if ix.version != INDEX_VERSION {
        return Err(Stale::Version { found: ix.version });
    }
    let keys = match kind {
        Kind::TfRecord(k) => Some(k),
        Kind::Tar => None,
    };
    for (differs, what) in [
        (ix.size != size, "size"),
        (ix.mtime_ns != mtime_ns, "modification time"),
        (ix.kind != kind.name(), "kind"),
        (ix.keys.as_ref() != keys, "feature keys"),
    ] {
        if differs {
            return Err(Stale::Stamp { what });
        }
    }
    // A store sets an object's modification time whenever it is written; a local file's
    // can be set to anything.
    if !crate::source::remote::is_url(shard) {
        let now = fingerprint(shard, size).map_err(Stale::Fingerprint)?;
        if now != ix.fingerprint {
            return Err(Stale::Stamp {
                what: "content fingerprint",
            });
        }
    }
    let computed = digest(&ix.entries)?;
    if computed != ix.digest {
        return Err(Stale::Digest {
            stored: ix.digest,
            computed,
        });
    }
    check_entries(&ix.entries, size, kind)?;
    Ok(ix)
}

/// The kind of a shard, and for TFRecord the feature keys its index reads.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind<'a> {
    /// A TFRecord shard of `tf.train.Example` records.
    TfRecord(&'a ExampleKeys),
    /// A WebDataset tar shard.
    Tar,
}

impl Kind<'_> {
    /// The kind's name in the sidecar.
    fn name(self) -> &'static str {
        match self {
            Kind::TfRecord(_) => "tfrecord",
            Kind::Tar => "tar",
        }
    }
}

/// The sidecar `text` with its digest made that of the entries it holds; `None` when it is
/// no index. For tests and fuzzing: what an index that passes the digest can make listing
/// and reading do (the other checks still apply).
#[doc(hidden)]
pub fn seal_index(text: &[u8]) -> Option<Vec<u8>> {
    let mut ix = serde_json::from_slice::<Index>(text).ok()?;
    ix.digest = digest(&ix.entries).ok()?;
    serde_json::to_vec(&ix).ok()
}

/// The sidecar `text` made for the same shard at another place: its stamp set to `size`
/// and `mtime_ns` (the shard as uploaded to a store, whose modification time is the
/// upload's). `None` when it is no index, or an index of a shard of another size.
pub fn restamp_index(text: &[u8], size: u64, mtime_ns: u128) -> Option<Vec<u8>> {
    let mut ix = serde_json::from_slice::<Index>(text).ok()?;
    if ix.size != size {
        return None;
    }
    ix.mtime_ns = mtime_ns;
    serde_json::to_vec(&ix).ok()
}

/// The sidecar index path of `shard`.
pub fn index_path(shard: &Path) -> PathBuf {
    let mut name = shard.file_name().unwrap_or_default().to_os_string();
    name.push(".stoker-index");
    shard.with_file_name(name)
}

/// The shard's index: the sidecar when it matches the shard (size, modification time,
/// content fingerprint, kind, keys), else built now and saved (a sidecar that cannot be written is logged, not
/// an error: read-only datasets index in memory).
pub(super) fn index(shard: &Path, kind: Kind<'_>) -> Result<Index> {
    let (size, mtime_ns) = file_stamp(shard)?;
    let keys = match kind {
        Kind::TfRecord(k) => Some(k),
        Kind::Tar => None,
    };
    let side = index_path(shard);
    match load(shard, &side, size, mtime_ns, kind) {
        Ok(ix) => return Ok(ix),
        Err(Stale::Read(crate::source::fsio::ReadError::File { error, .. }))
            if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(why) => log::info!("{}: index rebuilt ({why})", side.display()),
    }
    let entries = match kind {
        Kind::TfRecord(k) => tfrecord::index(shard, size, k)?,
        Kind::Tar => tar::index(shard, size)?,
    };
    let fingerprint = fingerprint(shard, size).map_err(|e| crate::error::Error::io(shard, e))?;
    let ix = Index {
        version: INDEX_VERSION,
        kind: kind.name().into(),
        size,
        mtime_ns,
        keys: keys.cloned(),
        fingerprint,
        digest: digest(&entries).unwrap_or(0),
        entries,
    };
    match serde_json::to_vec(&ix) {
        // A shard in a store: its sidecar is written by whoever writes the shards
        // (`stoker convert --out s3://...`), never into someone's bucket uninvited.
        Ok(_) if crate::source::remote::is_url(shard) => {
            log::info!("{}: no sidecar index; indexed in memory", shard.display());
        }
        Ok(bytes) => {
            if let Err(e) = save(&side, &bytes) {
                log::info!("{}: index kept in memory ({e})", side.display());
            }
        }
        Err(e) => log::info!("{}: index not saved ({e})", side.display()),
    }
    Ok(ix)
}

/// Writes `bytes` to `side` whole or not at all: into a file of its own beside it, renamed
/// over it, so that a reader never sees half an index and whatever was at `side` (a FIFO
/// that would block the write, a file another process is reading) is replaced, not
/// written into.
fn save(side: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut name = side.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = side.with_file_name(name);
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, side));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::super::{ShardFormat, ShardWriter};
    use super::*;

    /// A tar shard of `n` samples (each a few blocks, labelled) in a new temporary folder
    /// (removed when dropped), listed once so that its sidecar is written.
    fn shard(n: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = ShardWriter::new(ShardFormat::Tar, dir.path(), "t", u64::MAX).expect("writer");
        for i in 0..n {
            let mut image = vec![0xFF, 0xD8, 0xFF, 0xE0];
            image.resize(600 + 100 * i as usize, i as u8);
            w.add(&format!("s{i}.jpg"), &image, Some(i % 2), None)
                .expect("add");
        }
        let path = w.finish().expect("finish").remove(0);
        super::super::tar(std::slice::from_ref(&path)).expect("listed");
        (dir, path)
    }

    /// The samples of `path` as listed: (path, location, label).
    fn listed(path: &Path) -> Vec<String> {
        let d = super::super::tar(&[path.to_path_buf()]).expect("listed");
        d.samples()
            .iter()
            .map(|s| format!("{} {:?} {:?}", s.path, s.location, s.label))
            .collect()
    }

    /// The sidecar of `shard` with `edit` applied to its JSON, written back.
    fn edit_sidecar(shard: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let side = index_path(shard);
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&side).expect("sidecar")).expect("json");
        edit(&mut v);
        std::fs::write(&side, serde_json::to_vec(&v).expect("json")).expect("write");
    }

    #[test]
    fn a_sidecar_whose_entries_were_edited_is_rebuilt() {
        let (_dir, p) = shard(4);
        let fresh = listed(&p);
        assert_eq!(fresh.len(), 4);
        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 4] = [
            ("an entry removed", |v| {
                v["entries"].as_array_mut().expect("entries").remove(1);
            }),
            ("an offset moved a block on", |v| {
                let o = v["entries"][2]["offset"].as_u64().expect("offset");
                v["entries"][2]["offset"] = (o + 512).into();
            }),
            ("a label changed", |v| v["entries"][0]["label"] = 7.into()),
            ("entries swapped", |v| {
                v["entries"].as_array_mut().expect("entries").swap(0, 3);
            }),
        ];
        for (what, edit) in edits {
            edit_sidecar(&p, edit);
            assert_eq!(listed(&p), fresh, "{what}");
        }
    }

    #[test]
    fn entries_outside_the_shard_or_overlapping_are_not_trusted() {
        let (_dir, p) = shard(3);
        let fresh = listed(&p);
        let size = std::fs::metadata(&p).expect("shard").len();
        type Edit = Box<dyn Fn(&mut serde_json::Value)>;
        let edits: Vec<(&str, Edit)> = vec![
            (
                "past the end",
                Box::new(move |v| v["entries"][1]["offset"] = (size + 512).into()),
            ),
            (
                "a length that wraps",
                Box::new(|v| v["entries"][1]["len"] = u64::MAX.into()),
            ),
            (
                "overlapping",
                Box::new(|v| v["entries"][1]["offset"] = v["entries"][0]["offset"].clone()),
            ),
            (
                "off a block",
                Box::new(|v| {
                    let o = v["entries"][1]["offset"].as_u64().expect("offset");
                    v["entries"][1]["offset"] = (o + 1).into();
                }),
            ),
        ];
        for (what, edit) in edits {
            // The digest made to hold: only the entry checks stand between it and a read.
            edit_sidecar(&p, |v| edit(v));
            let side = index_path(&p);
            let sealed = seal_index(&std::fs::read(&side).expect("sidecar")).expect("index");
            std::fs::write(&side, sealed).expect("write");
            assert_eq!(listed(&p), fresh, "{what}");
        }
    }

    #[test]
    fn a_sidecar_larger_than_its_bound_is_not_read() {
        let (_dir, p) = shard(2);
        let side = index_path(&p);
        let valid = std::fs::read(&side).expect("sidecar");
        let size = std::fs::metadata(&p).expect("shard").len();
        // Still a valid index (JSON allows trailing white space), but past the bound.
        let mut padded = valid.clone();
        padded.resize(sidecar_limit(size) as usize + 1, b' ');
        std::fs::write(&side, &padded).expect("write");
        listed(&p);
        let after = std::fs::read(&side).expect("sidecar");
        assert!(
            after == valid,
            "not rebuilt: {} bytes, the index is {}",
            after.len(),
            valid.len()
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_where_the_sidecar_goes_does_not_hang_listing() {
        let (_dir, p) = shard(2);
        let fresh = listed(&p);
        let side = index_path(&p);
        std::fs::remove_file(&side).expect("remove");
        let made = std::process::Command::new("mkfifo")
            .arg(&side)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || {
            let _ = tx.send(listed(&q));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("listing returned");
        assert_eq!(got, fresh);
        assert!(std::fs::metadata(&side).expect("sidecar").is_file());
    }
}

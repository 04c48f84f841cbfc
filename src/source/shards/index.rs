//! The sidecar index of a shard, `<shard>.stoker-index`: every sample's offset and length,
//! its label, whether it has a mask (JSON), checked against the shard's size and
//! modification time and rebuilt when either changed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{file_stamp, tar, tfrecord, Entry, ExampleKeys};
use crate::error::Result;

/// A shard's sidecar index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Index {
    version: u32,
    kind: String,
    size: u64,
    mtime_ns: u128,
    keys: Option<ExampleKeys>,
    pub(super) entries: Vec<Entry>,
}

/// 2: entries carry the recorded path and class name. 3: labels as recorded (checked when
/// listed, so an out-of-range label is reported rather than dropped), what indexing found
/// wrong with a sample, damaged regions of a shard as entries of their own.
const INDEX_VERSION: u32 = 3;

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

/// The sidecar index path of `shard`.
pub fn index_path(shard: &Path) -> PathBuf {
    let mut name = shard.file_name().unwrap_or_default().to_os_string();
    name.push(".stoker-index");
    shard.with_file_name(name)
}

/// The shard's index: the sidecar when it matches the shard (size, modification time,
/// kind, keys), else built now and saved (a sidecar that cannot be written is logged, not
/// an error: read-only datasets index in memory).
pub(super) fn index(shard: &Path, kind: Kind<'_>) -> Result<Index> {
    let (size, mtime_ns) = file_stamp(shard)?;
    let keys = match kind {
        Kind::TfRecord(k) => Some(k),
        Kind::Tar => None,
    };
    let side = index_path(shard);
    if let Ok(text) = std::fs::read(&side) {
        if let Ok(ix) = serde_json::from_slice::<Index>(&text) {
            if ix.version == INDEX_VERSION
                && ix.size == size
                && ix.mtime_ns == mtime_ns
                && ix.kind == kind.name()
                && ix.keys.as_ref() == keys
            {
                return Ok(ix);
            }
        }
    }
    let entries = match kind {
        Kind::TfRecord(k) => tfrecord::index(shard, size, k)?,
        Kind::Tar => tar::index(shard, size)?,
    };
    let ix = Index {
        version: INDEX_VERSION,
        kind: kind.name().into(),
        size,
        mtime_ns,
        keys: keys.cloned(),
        entries,
    };
    match serde_json::to_vec(&ix) {
        Ok(bytes) => {
            if let Err(e) = std::fs::write(&side, bytes) {
                log::info!("{}: index kept in memory ({e})", side.display());
            }
        }
        Err(e) => log::info!("{}: index not saved ({e})", side.display()),
    }
    Ok(ix)
}

//! Samples in shards: TFRecord files of `tf.train.Example` records, and tar files in the
//! WebDataset layout. Each shard is indexed once (every record's offset and length, its
//! label, whether it has a mask) into a sidecar file beside it, `<shard>.stoker-index`
//! ([`index_path`]), checked against the shard's size and modification time and rebuilt
//! when either changed, so that any sample is read by offset and the sampler's full
//! permutation works across shards. [`ShardWriter`] writes shards (`stoker convert`).
//!
//! A sample's id is stable: it is [`super::sample_id`] of `<shard file name>/<record>`
//! (the record's index, 8 digits, for TFRecord; the sample key for tar).
//!
//! Damage is found when a sample is read, and reported as a [`crate::SampleError`] with
//! the shard and record: a TFRecord record is read with both of its masked CRC-32C
//! checks verified (a bad length checksum, a bad data checksum, a record cut short); a
//! tar member that runs past the end of the file is cut short. Indexing skips past a
//! damaged TFRecord header by looking for the next header whose checksum holds, and past a
//! damaged tar header by looking for the next tar header whose checksum holds, so the rest
//! of the shard is still delivered.
//!
//! This module also holds what the Parquet source shares with the shard sources: the
//! location of a Parquet cell (present in every build, so [`super::Location`] is the same
//! with or without the `parquet` feature), listing files, and the read error type.

mod index;
mod tar;
mod tfrecord;
mod write;

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::{sample_id, Dataset, Location, Sample};
use crate::error::{Error, Result};
use index::Kind;

pub use self::tar::read_range;
pub use index::index_path;
pub use tfrecord::{
    crc32c, encode_example, frame_record, masked_crc, read_field, RecordError, WireError,
};
pub use write::{ShardFormat, ShardWriter};
// Kept at its old path; it lives beside `Location::read`, so that this module and
// `source::parquet` need not import each other.
#[doc(no_inline)]
pub use super::read_parquet;

/// One indexed sample of a shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// TFRecord: the record index (8 digits); tar: the sample key.
    pub(crate) name: String,
    /// TFRecord: the record's offset; tar: the image member's data offset.
    pub(crate) offset: u64,
    /// TFRecord: the record's data length; tar: the image member's length.
    pub(crate) len: u64,
    /// The class label, when the record or sample has one.
    pub(crate) label: Option<u32>,
    /// Tar: the mask member (offset, length); TFRecord: `(0, 0)` when the example has the
    /// mask feature.
    pub(crate) mask: Option<(u64, u64)>,
}

/// The `tf.train.Example` feature keys a TFRecord source reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExampleKeys {
    /// The encoded image (bytes). Default `image/encoded`.
    pub image: String,
    /// The class label (int64). Default `image/class/label`.
    pub label: String,
    /// The encoded label mask (bytes), when records have one. Default
    /// `image/segmentation/class/encoded`.
    pub mask: String,
}

impl Default for ExampleKeys {
    fn default() -> Self {
        ExampleKeys {
            image: "image/encoded".into(),
            label: "image/class/label".into(),
            mask: "image/segmentation/class/encoded".into(),
        }
    }
}

/// What to read from a TFRecord record: the bytes feature `key` of its example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordField {
    /// The shard.
    pub shard: PathBuf,
    /// Where the record starts (its length field).
    pub offset: u64,
    /// Bytes of the record's data.
    pub len: u64,
    /// Index of the record in the shard (for reports).
    pub index: u64,
    /// The bytes feature to return.
    pub key: Arc<str>,
}

/// One cell of a Parquet file: the bytes of `column` in row `row` of row group
/// `row_group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetCell {
    /// The file.
    pub path: PathBuf,
    /// The row group.
    pub row_group: usize,
    /// The row within the row group.
    pub row: usize,
    /// The row's index in the file (for reports).
    pub index: u64,
    /// The column (binary, or struct with `bytes`).
    pub column: Arc<str>,
}

/// Why a sample's bytes could not be read from a shard or a Parquet file. Its message
/// names the file and where in it.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The bytes are more than the limit (checked before reading them).
    #[error("{bytes} bytes exceed the limit of {limit}")]
    TooLarge {
        /// Bytes there are.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A file could not be read.
    #[error("{}: {error}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// The indexed record is larger than the limit (checked before reading it).
    #[error("record of {len} bytes exceeds the limit of {limit}")]
    RecordTooLarge {
        /// The record's length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// A TFRecord record could not be read, or is damaged.
    #[error("{} record {index} (offset {offset}): {error}", shard.display())]
    Record {
        /// The shard.
        shard: PathBuf,
        /// The record's index in the shard.
        index: u64,
        /// Where the record starts.
        offset: u64,
        /// What is wrong.
        error: RecordError,
    },
    /// The tar member is larger than the limit (checked before reading it).
    #[error("member of {len} bytes exceeds the limit of {limit}")]
    MemberTooLarge {
        /// The member's length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// A tar member could not be read whole (the shard ends inside it, or could not be
    /// read).
    #[error("{} at {offset}: member cut short ({error})", path.display())]
    MemberCutShort {
        /// The shard.
        path: PathBuf,
        /// Where the member's data starts.
        offset: u64,
        /// What reading said.
        error: std::io::Error,
    },
    /// A Parquet cell, in a build without the `parquet` feature.
    #[error("{}: this build of stoker reads no Parquet (the `parquet` feature is off)", path.display())]
    NoParquet {
        /// The file.
        path: PathBuf,
    },
    /// A Parquet cell could not be read (`source::parquet::CellError`).
    #[error(transparent)]
    Parquet(Box<dyn std::error::Error + Send + Sync>),
}

/// A file's size and modification time (ns since the epoch): what an index or a cached
/// footer is checked against.
pub(crate) fn file_stamp(path: &Path) -> Result<(u64, u128)> {
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok((m.len(), mtime))
}

/// Bytes a reader thread reads ahead from a shard: samples that follow each other in a
/// shard (a validation pass, or the neighbours one thread is given) come from one large
/// sequential read instead of one small read each.
pub(super) const READ_AHEAD: usize = 4 << 20;

/// A reader thread's open shard, with its read-ahead buffer.
struct Cursor {
    path: PathBuf,
    /// Size and modification time when opened: a rewritten shard is opened again.
    stamp: (u64, u128),
    file: BufReader<File>,
    /// Where the last read ended: a read that starts there continues a sequential run.
    end: u64,
}

thread_local! {
    static CURSOR: std::cell::RefCell<Option<Cursor>> = const { std::cell::RefCell::new(None) };
}

/// Runs `read` on `path` positioned at `offset`, reusing this thread's open shard when it
/// is the same one. A read inside the read-ahead buffer skips forward in it; a read that
/// continues where the last one ended goes through the buffer (a sequential run: one
/// large read serves the samples that follow); any other read seeks and reads exactly
/// what it asks for, so random access costs no more than it reads.
pub(super) fn with_shard<T>(
    path: &Path,
    offset: u64,
    read: impl FnOnce(&mut dyn Read) -> std::io::Result<T>,
) -> std::io::Result<T> {
    CURSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let stamp = file_stamp(path).map_err(|e| std::io::Error::other(e.to_string()))?;
        if !slot
            .as_ref()
            .is_some_and(|c| c.path == path && c.stamp == stamp)
        {
            *slot = Some(Cursor {
                path: path.to_path_buf(),
                stamp,
                file: BufReader::with_capacity(READ_AHEAD, File::open(path)?),
                end: u64::MAX,
            });
        }
        let Some(c) = slot.as_mut() else {
            return Err(std::io::Error::other("no open shard"));
        };
        let pos = c.file.stream_position()?;
        let ahead = offset.wrapping_sub(pos);
        let buffered = if offset >= pos && ahead <= c.file.buffer().len() as u64 {
            c.file.consume(ahead as usize);
            true
        } else {
            c.file.seek(SeekFrom::Start(offset))?;
            offset == c.end
        };
        let r = if buffered {
            read(&mut c.file)
        } else {
            read(c.file.get_mut())
        };
        match r {
            Ok(v) => {
                c.end = c.file.stream_position()?;
                Ok(v)
            }
            Err(e) => {
                // Where a failed read left the file is unknown: open it afresh next time.
                *slot = None;
                Err(e)
            }
        }
    })
}

// ---------------------------------------------------------------------------------------
// Datasets.

/// The shards `paths` name: files as given, folders searched (not recursively) for files
/// ending in `ext`. Sorted, so the listing does not depend on the order given.
pub(crate) fn shard_paths(paths: &[PathBuf], ext: &[&str]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| Error::io(p, e))?;
            for e in rd.flatten() {
                let q = e.path();
                let name = q.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                if q.is_file() && ext.iter().any(|x| name.ends_with(x)) {
                    out.push(q);
                }
            }
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(Error::source_at(p, "no shard here"));
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(Error::dataset(format!(
            "no shards ({}) in {:?}",
            ext.join(", "),
            paths
        )));
    }
    Ok(out)
}

/// The shard's file name: the first part of its samples' paths.
pub(crate) fn shard_name(shard: &Path) -> String {
    shard
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The dataset of `shards`: each shard's index (of `kind`), each entry a sample at
/// `<shard file name>/<entry name>` whose image and mask locations `locate` gives (shard,
/// entry index, entry).
fn dataset(
    shards: &[PathBuf],
    kind: Kind<'_>,
    locate: impl Fn(&Path, usize, &Entry) -> (Location, Option<Location>),
) -> Result<Dataset> {
    let mut samples = Vec::new();
    for shard in shards {
        let ix = index::index(shard, kind)?;
        let name = shard_name(shard);
        for (i, e) in ix.entries.iter().enumerate() {
            let path = format!("{name}/{}", e.name);
            let (location, mask) = locate(shard, i, e);
            samples.push(Sample {
                id: sample_id(&path),
                path,
                location,
                label: e.label,
                mask,
                group: None,
            });
        }
    }
    from_files(shards, samples)
}

/// The dataset of `samples` listed from `files` (shards, Parquet files): rooted at the
/// first file's folder, classes named by their ids up to the largest label.
pub(crate) fn from_files(files: &[PathBuf], samples: Vec<Sample>) -> Result<Dataset> {
    let classes = super::numbered_classes(samples.iter().filter_map(|s| s.label).max());
    let root = files
        .first()
        .and_then(|s| s.parent())
        .map(Path::to_path_buf);
    Dataset::from_samples(root, samples, classes)
}

/// A TFRecord dataset: every record of the shards (`*.tfrecord`, `*.tfrecords`,
/// `*.record` files and folders of them) is a sample, read through `keys`.
pub fn tfrecord(paths: &[PathBuf], keys: &ExampleKeys) -> Result<Dataset> {
    let shards = shard_paths(paths, &[".tfrecord", ".tfrecords", ".record"])?;
    let (image, mask): (Arc<str>, Arc<str>) =
        (keys.image.as_str().into(), keys.mask.as_str().into());
    dataset(&shards, Kind::TfRecord(keys), |shard, i, e| {
        let field = |key: &Arc<str>| {
            Location::Record(RecordField {
                shard: shard.to_path_buf(),
                offset: e.offset,
                len: e.len,
                index: i as u64,
                key: Arc::clone(key),
            })
        };
        (field(&image), e.mask.map(|_| field(&mask)))
    })
}

/// A WebDataset tar dataset: every sample key of the shards (`*.tar` files and folders
/// of them) is a sample: its image member, its `cls` label, its mask member.
pub fn tar(paths: &[PathBuf]) -> Result<Dataset> {
    let shards = shard_paths(paths, &[".tar"])?;
    dataset(&shards, Kind::Tar, |shard, _, e| {
        let range = |offset, len| Location::Range {
            path: shard.to_path_buf(),
            offset,
            len,
        };
        (range(e.offset, e.len), e.mask.map(|(o, l)| range(o, l)))
    })
}

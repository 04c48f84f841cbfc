//! Samples in shards: TFRecord files of `tf.train.Example` records, and tar files in the
//! WebDataset layout. Each shard is indexed once (every record's offset and length, its
//! label, whether it has a mask) into a sidecar file beside it, `<shard>.stoker-index`
//! ([`index_path`]), checked against the shard's size, modification time and content
//! fingerprint (its first and last 64 KiB) and rebuilt when any changed (or when the
//! sidecar is damaged: its entries carry a digest and are checked against the shard), so
//! that any sample is read by offset and the sampler's full permutation works across
//! shards. A tar sample is read as a `TarMember`: the read checks that its member's
//! header and the members its entry holds (label, class name, path, targets) are those
//! indexed, so that a shard rewritten with its size and modification time kept never
//! delivers another member's bytes or a stale label: the sample is reported
//! ([`ReadError::StaleIndex`]) and the sidecar removed, to be rebuilt by the next listing.
//! [`ShardWriter`] writes shards (`stoker convert`).
//!
//! A sample's id is stable: it is [`super::sample_id`] of its path. A shard written by
//! [`ShardWriter`] (`stoker convert`) records each sample's path in the dataset it came
//! from (see [`mod@write`] for the layout), and that is the sample's path, so a sample has the
//! same id, split side and augmentations as a folder file and as a shard record. A sample
//! whose shard records no path (shards written by other tools) is at
//! `<shard file name>/<record>` (the record's index, 8 digits, for TFRecord; the sample
//! key for tar). A path recorded twice is an error naming both places.
//!
//! Class names: the class list beside the shards (`<prefix>.classes.json`, see
//! [`classes_path`]), checked against the class name each sample records; without it,
//! the names the samples record; without those, the labels' numbers (`"0"`, `"1"`, ...).
//!
//! Every sample a shard holds is delivered or reported, never silently left out. Damage
//! is reported as a [`crate::SampleError`] naming the shard and where in it: found when
//! a sample is read (a TFRecord record is read with both of its masked CRC-32C checks
//! verified: a bad length checksum, a bad data checksum, a record cut short), or found
//! while indexing and listed as a sample with [`Location::Refused`] that every epoch
//! reports. Indexing walks past a damaged TFRecord header (or one whose length runs past
//! the end of the shard) to the next header whose checksum holds, and past damage in a
//! tar shard to the next tar header whose checksum holds (see `tar.rs` here for whose
//! sample a damaged region is reported under), so the rest of the shard is still
//! delivered; the search reads the shard once, through a small window. Damage that no
//! sample can be named for is listed as `<shard file name>/@<offset>`, and so is an
//! empty shard (0 bytes) or a tar shard with no header in it.
//!
//! Labels: a label is checked against [`super::MAX_LABEL`] when listed; one out of range
//! (negative, too large), a `cls` member that is not a number, and, in a dataset whose
//! samples have labels, a sample without one are reported as
//! [`crate::SampleErrorKind::Label`] rather than delivered without a label.
//!
//! This module also holds what the Parquet source shares with the shard sources: the
//! location of a Parquet cell (present in every build, so [`super::Location`] is the same
//! with or without the `parquet` feature), listing files, and the read error type.

mod check;
mod index;
mod member;
mod tar;
mod tfrecord;
pub mod write;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::target::Targets;
use super::{sample_id, Dataset, Location, Sample};
use crate::error::{Error, Result};
use index::Kind;

#[doc(hidden)]
pub use self::tar::read_range;
pub use index::index_path;
#[doc(hidden)]
pub use index::{restamp_index, seal_index};
#[doc(hidden)]
pub use member::{read_member, TarMember};
#[doc(hidden)]
pub use tfrecord::{
    crc32c, encode_example, frame_record, masked_crc, read_field, RecordError, WireError,
};
pub use write::{Converted, ShardFormat, ShardWriter};
// Kept at its old path; it lives beside `Location::read`, so that this module and
// `source::parquet` need not import each other.
#[doc(hidden)]
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
    /// The class label as the record or sample records it, when it has one: checked
    /// against [`super::MAX_LABEL`] when listed (a value out of range is the sample's
    /// report, kind [`crate::SampleErrorKind::Label`]).
    pub(crate) label: Option<i128>,
    /// Tar: the mask member (offset, length); TFRecord: `(0, 0)` when the example has the
    /// mask feature.
    pub(crate) mask: Option<(u64, u64)>,
    /// The sample's path as the shard records it (tar: the `path.txt` member; TFRecord:
    /// the [`ExampleKeys::path`] feature): its path in the dataset it was converted from.
    #[serde(default)]
    pub(crate) path: Option<String>,
    /// The name of its class as the shard records it (tar: the `cls.txt` member;
    /// TFRecord: the [`ExampleKeys::class_text`] feature).
    #[serde(default)]
    pub(crate) class: Option<String>,
    /// Why indexing found that the sample cannot be delivered: it is listed with
    /// [`Location::Refused`] and reported every epoch.
    #[serde(default)]
    pub(crate) problem: Option<Problem>,
    /// TFRecord: indexing could not read the record's example (its header or data is
    /// damaged, or it runs past the end of the shard), so its label is unknown rather than
    /// missing; reading it reports what is wrong.
    #[serde(default)]
    pub(crate) unread: bool,
    /// Tar: the targets of the sample's `json` member (class ids, values, boxes,
    /// keypoints: the keys of a JSON Lines manifest), when it has one that holds any.
    #[serde(default)]
    pub(crate) targets: Option<Targets>,
    /// Tar: what a read of the image checks (its header, and the members whose data this
    /// entry holds: label, class name, path, targets), for a sample that is delivered.
    #[serde(default)]
    pub(crate) check: Option<check::Check>,
    /// Tar: what a read of the mask checks (its header).
    #[serde(default)]
    pub(crate) mask_check: Option<check::Check>,
}

impl Entry {
    /// An entry that stands for what indexing found at `offset` (`len` bytes) and cannot
    /// deliver: a damaged region of a shard that no sample can be named for, or a whole
    /// shard that is empty or not a shard at all. Its name is `@<offset>`, so its path is
    /// `<shard file name>/@<offset>`.
    pub(super) fn damage(offset: u64, len: u64, what: String) -> Entry {
        Entry {
            name: format!("@{offset}"),
            offset,
            len,
            label: None,
            mask: None,
            path: None,
            class: None,
            problem: Some(Problem::Corrupt(what)),
            unread: false,
            targets: None,
            check: None,
            mask_check: None,
        }
    }
}

/// Why a sample cannot be delivered, as its shard's index records it. The text says
/// where in the shard, and reads after the shard's path, which listing puts before it
/// (`<shard> sample "key": ...`, `<shard> record 12 (offset 3456): ...`,
/// `<shard> at offset 1024: ...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Problem {
    /// Damage: reported as [`crate::SampleErrorKind::Corrupt`].
    Corrupt(String),
    /// A label that is not a class id (a `cls` member that is not a number): reported as
    /// [`crate::SampleErrorKind::Label`].
    Label(String),
}

/// The `tf.train.Example` feature keys a TFRecord source reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct ExampleKeys {
    /// The encoded image (bytes). Default `image/encoded`.
    pub image: String,
    /// The class label (int64, one value: a record whose feature holds several is
    /// reported; several class ids go in [`ExampleKeys::labels`]). Default
    /// `image/class/label`.
    pub label: String,
    /// The encoded label mask (bytes), when records have one. Default
    /// `image/segmentation/class/encoded`.
    pub mask: String,
    /// The sample's path (bytes, UTF-8), when records have one: the sample's
    /// [`super::Sample::path`], which its id derives from, instead of
    /// `<shard>/<record>`. Default `stoker/path` (what `stoker convert` writes). Set it
    /// to `image/filename` for shards whose file names are unique paths.
    pub path: String,
    /// The class name (bytes, UTF-8) of the record's label, when records have one.
    /// Default `image/class/text`.
    pub class_text: String,
    /// Several class ids (int64 list; multi-label classification) into
    /// [`crate::source::Targets::classes`]. Default `stoker/labels`.
    pub labels: String,
    /// A value vector (float list; regression) into [`crate::source::Targets::values`].
    /// Default `stoker/values`.
    pub values: String,
    /// Boxes: four float lists of the same length, a box's left, top, right and bottom
    /// edges, as the TensorFlow Object Detection API writes them. Defaults
    /// `image/object/bbox/xmin`, `image/object/bbox/ymin`, `image/object/bbox/xmax`,
    /// `image/object/bbox/ymax`.
    pub box_xmin: String,
    /// See [`ExampleKeys::box_xmin`].
    pub box_ymin: String,
    /// See [`ExampleKeys::box_xmin`].
    pub box_xmax: String,
    /// See [`ExampleKeys::box_xmin`].
    pub box_ymax: String,
    /// The boxes' class ids (int64 list, one per box; without it every box is class 0).
    /// Default `image/object/class/label`.
    pub box_class: String,
    /// Keypoints: x and y (float lists of the same length) and visibility (int64 list,
    /// COCO's 0, 1, 2; without it every keypoint is visible), every object's keypoints
    /// in turn: with boxes, the keypoints are split evenly among them in order
    /// ([`crate::source::Keypoint::object`]). Defaults `image/object/keypoint/x`,
    /// `image/object/keypoint/y`, `image/object/keypoint/visibility`.
    pub keypoint_x: String,
    /// See [`ExampleKeys::keypoint_x`].
    pub keypoint_y: String,
    /// See [`ExampleKeys::keypoint_x`].
    pub keypoint_visibility: String,
    /// Whether box and keypoint coordinates are fractions of the image's width and
    /// height (the Object Detection API's convention; default `true`), turned into
    /// pixels with the [`ExampleKeys::width`] and [`ExampleKeys::height`] features,
    /// rather than pixels.
    pub normalized: bool,
    /// The image's width (int64), for normalised coordinates. Default `image/width`.
    pub width: String,
    /// The image's height (int64), for normalised coordinates. Default `image/height`.
    pub height: String,
}

impl Default for ExampleKeys {
    fn default() -> Self {
        ExampleKeys {
            image: "image/encoded".into(),
            label: "image/class/label".into(),
            mask: "image/segmentation/class/encoded".into(),
            path: "stoker/path".into(),
            class_text: "image/class/text".into(),
            labels: "stoker/labels".into(),
            values: "stoker/values".into(),
            box_xmin: "image/object/bbox/xmin".into(),
            box_ymin: "image/object/bbox/ymin".into(),
            box_xmax: "image/object/bbox/xmax".into(),
            box_ymax: "image/object/bbox/ymax".into(),
            box_class: "image/object/class/label".into(),
            keypoint_x: "image/object/keypoint/x".into(),
            keypoint_y: "image/object/keypoint/y".into(),
            keypoint_visibility: "image/object/keypoint/visibility".into(),
            normalized: true,
            width: "image/width".into(),
            height: "image/height".into(),
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
    /// A tar member's index no longer matches its shard: the bytes a read checks
    /// (`TarMember::pieces`) are not those indexed. The sample is not delivered; the
    /// stale sidecar is removed (a local one), so that the next listing indexes the
    /// shard again.
    #[error("{} at {offset}: the shard's index {} is stale (the shard changed since it was indexed): {what}", shard.display(), side.display())]
    StaleIndex {
        /// The shard.
        shard: PathBuf,
        /// Where the member's data starts, as indexed.
        offset: u64,
        /// What the read found.
        what: String,
        /// The sidecar index.
        side: PathBuf,
    },
    /// A tar member's data does not give the CRC-32C its index recorded, read after
    /// read: damaged where it is stored, or the shard changed since it was indexed.
    #[error("{} at {offset}: the member's {len} bytes give CRC-32C {got:#010x}, not the {want:#010x} its index recorded, in {reads} reads (damaged, or the shard changed since it was indexed)", shard.display())]
    MemberDamaged {
        /// The shard.
        shard: PathBuf,
        /// Where the member's data starts.
        offset: u64,
        /// Bytes of data.
        len: u64,
        /// How many times it was read.
        reads: u32,
        /// The CRC-32C of the last read.
        got: u32,
        /// The CRC-32C indexing recorded.
        want: u32,
    },
    /// A Parquet cell, in a build without the `parquet` feature.
    #[error("{}: this build of stoker reads no Parquet (the `parquet` feature is off)", path.display())]
    NoParquet {
        /// The file.
        path: PathBuf,
    },
    /// Listing found the sample but it cannot be delivered ([`Location::Refused`]).
    #[error("{reason}")]
    Refused {
        /// The category it is reported under.
        kind: crate::error::SampleErrorKind,
        /// Why, with where.
        reason: Arc<str>,
    },
    /// A Parquet cell could not be read (`source::parquet::CellError`).
    #[error(transparent)]
    Parquet(Box<dyn std::error::Error + Send + Sync>),
}

impl From<crate::source::fsio::ReadError> for ReadError {
    fn from(e: crate::source::fsio::ReadError) -> Self {
        match e {
            crate::source::fsio::ReadError::File { path, error } => ReadError::File { path, error },
            crate::source::fsio::ReadError::TooLarge { bytes, limit } => {
                ReadError::TooLarge { bytes, limit }
            }
        }
    }
}

/// A file's size and modification time (ns since the epoch): what an index or a cached
/// footer is checked against.
/// For an object in a store (a URL), its size and last-modified time.
pub(crate) fn file_stamp(path: &Path) -> Result<(u64, u128)> {
    if super::remote::is_url(path) {
        let info =
            super::remote::info(&path.to_string_lossy()).map_err(|e| Error::io(path, e.into()))?;
        return Ok((info.size, info.mtime_ns));
    }
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok((m.len(), mtime))
}

/// What indexing reads a shard through: a file, or an object in a store.
pub(super) trait ShardRead: Read + Seek + Send {}
impl<T: Read + Seek + Send> ShardRead for T {}

/// The shard at `path` (a file, or an object for a URL) for one pass from its start.
pub(super) fn open_shard(path: &Path) -> std::io::Result<Box<dyn ShardRead>> {
    if super::remote::is_url(path) {
        return Ok(Box::new(super::remote::stream(&path.to_string_lossy())?));
    }
    Ok(Box::new(super::fsio::open_regular(path)?))
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
///
/// `want` is the bytes `read` takes: a shard in a store (a URL) is read by a ranged
/// request of that many bytes (or more, read ahead when reads follow each other: see
/// [`super::remote`]).
pub(super) fn with_shard<T>(
    path: &Path,
    offset: u64,
    want: u64,
    read: impl FnOnce(&mut dyn Read) -> std::io::Result<T>,
) -> std::io::Result<T> {
    if super::remote::is_url(path) {
        let bytes = super::remote::read_at(&path.to_string_lossy(), offset, want)?;
        return read(&mut bytes.as_slice());
    }
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
                file: BufReader::with_capacity(READ_AHEAD, super::fsio::open_regular(path)?),
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

/// Drops this thread's buffered bytes of the shard `path` (its open file, or what it read
/// ahead of the object), so that the next read of it reads again: after a read whose
/// bytes failed a check.
pub(super) fn forget_buffers(path: &Path) {
    if super::remote::is_url(path) {
        super::remote::forget_read_ahead(&path.to_string_lossy());
        return;
    }
    CURSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_some_and(|c| c.path == path) {
            *slot = None;
        }
    });
}

// ---------------------------------------------------------------------------------------
// Datasets.

/// The shards `paths` name ([`shard_paths`]), and the entries of the folders searched
/// that end in a shard's extension but cannot be shards, with why.
pub(crate) struct ShardList {
    /// The shards, sorted, so that the listing does not depend on the order given.
    pub files: Vec<PathBuf>,
    /// Named like a shard but not one (a broken link, a FIFO, a folder; an entry of the
    /// folder that could not be read): each is listed as a sample that every epoch reports
    /// ([`unlisted`]), never dropped without a word.
    pub bad: Vec<(PathBuf, Error)>,
}

impl ShardList {
    /// Every path named, the bad ones too (sorted).
    pub fn all(&self) -> Vec<PathBuf> {
        let mut all: Vec<PathBuf> = self.files.to_vec();
        all.extend(self.bad.iter().map(|(p, _)| p.clone()));
        all.sort();
        all
    }
}

/// The shards `paths` name: files as given, folders searched (not recursively) for files
/// ending in `ext`. A path given that is neither is an error; in a folder, an entry named
/// like a shard that is not a regular file (after links) is kept in [`ShardList::bad`].
pub(crate) fn shard_paths(paths: &[PathBuf], ext: &[&str]) -> Result<ShardList> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for p in paths {
        if super::remote::is_url(p) {
            out.extend(remote_shards(p, ext)?);
        } else if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| Error::io(p, e))?;
            for e in rd {
                let e = match e {
                    Ok(e) => e,
                    Err(e) => {
                        bad.push((p.clone(), Error::io(p, e)));
                        continue;
                    }
                };
                let q = e.path();
                let name = q.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                if !ext.iter().any(|x| name.ends_with(x)) {
                    continue;
                }
                // (Follows links: a link to a shard is a shard.)
                match std::fs::metadata(&q) {
                    Ok(m) if m.is_file() => out.push(q),
                    Ok(m) => {
                        let what = super::fsio::kind_of(&m.file_type());
                        let e = Error::source_at(&q, format!("a {what}, not a regular file"));
                        bad.push((q, e));
                    }
                    Err(e) => bad.push((q.clone(), Error::io(&q, e))),
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
    bad.sort_by(|a, b| a.0.cmp(&b.0));
    if out.is_empty() {
        if let Some((_, e)) = bad.into_iter().next() {
            return Err(e);
        }
        return Err(Error::dataset(format!(
            "no shards ({}) in {:?}",
            ext.join(", "),
            paths
        )));
    }
    Ok(ShardList { files: out, bad })
}

/// The sample that stands for a shard (or Parquet file) that could not be listed,
/// `<file name>/@0`: every epoch reports it with the file and why
/// ([`crate::error::SampleErrorKind::Corrupt`]). In a dataset with masks (`masks`) its
/// report is its mask too (a pipeline pairs masks for all samples or none).
pub(crate) fn unlisted(path: &Path, why: &Error, masks: bool) -> Sample {
    let location = Location::Refused {
        kind: crate::error::SampleErrorKind::Corrupt,
        reason: format!("{}: cannot be listed: {why}", path.display()).into(),
    };
    let mut sample = Sample::new(format!("{}/@0", shard_name(path)), location, None);
    if masks {
        sample.mask = Some(sample.location.clone());
    }
    sample
}

/// The shards a URL names: the object itself, or the objects directly under it (a folder:
/// not recursively) whose names end in `ext`, as URLs.
fn remote_shards(url: &Path, ext: &[&str]) -> Result<Vec<PathBuf>> {
    let s = url.to_string_lossy();
    let err = |e: super::remote::RemoteError| Error::io(url, e.into());
    if !super::remote::is_folder_url(&s) {
        match super::remote::info(&s) {
            Ok(_) => return Ok(vec![url.to_path_buf()]),
            Err(super::remote::RemoteError::NotFound { .. }) => {}
            Err(e) => return Err(err(e)),
        }
    }
    let folder = if s.ends_with('/') {
        s.to_string()
    } else {
        format!("{s}/")
    };
    let found: Vec<PathBuf> = super::remote::list(&folder)
        .map_err(err)?
        .into_iter()
        .filter(|o| {
            o.url
                .strip_prefix(&folder)
                .is_some_and(|name| !name.contains('/') && ext.iter().any(|x| name.ends_with(x)))
        })
        .map(|o| PathBuf::from(o.url))
        .collect();
    if found.is_empty() {
        return Err(Error::source_at(url, "no shard here"));
    }
    Ok(found)
}

/// Whether a file (or an object, for a URL) is at `path`.
fn exists(path: &Path) -> bool {
    if super::remote::is_url(path) {
        return super::remote::info(&path.to_string_lossy()).is_ok();
    }
    path.is_file()
}

/// The shard's file name: the first part of its samples' paths.
pub(crate) fn shard_name(shard: &Path) -> String {
    shard
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The most bytes a recorded path or class name may have.
pub(super) const MAX_RECORDED: u64 = 4096;

/// A path or class name as a shard records it: UTF-8 without a trailing line break, not
/// empty, without NUL, at most [`MAX_RECORDED`] bytes. `None` for anything else: the
/// sample is then named as if the shard recorded nothing.
pub(super) fn recorded_text(bytes: &[u8]) -> Option<String> {
    if bytes.len() as u64 > MAX_RECORDED {
        return None;
    }
    let s = std::str::from_utf8(bytes).ok()?;
    let s = s
        .strip_suffix('\n')
        .map_or(s, |s| s.strip_suffix('\r').unwrap_or(s));
    (!s.is_empty() && !s.contains('\0')).then(|| s.to_string())
}

/// The class list of shards `<prefix>-NNNNN.<ext>` (what [`ShardWriter`] writes):
/// `<prefix>.classes.json` beside them. `None` for a shard not so named.
pub fn classes_path(shard: &Path) -> Option<PathBuf> {
    let name = shard.file_name()?.to_str()?;
    let (stem, _ext) = name.rsplit_once('.')?;
    let (prefix, n) = stem.rsplit_once('-')?;
    let numbered = !prefix.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    numbered.then(|| shard.with_file_name(classes_file_name(prefix)))
}

/// The file name of the class list of shards named `<prefix>-NNNNN.<ext>`.
pub(super) fn classes_file_name(prefix: &str) -> String {
    format!("{prefix}.classes.json")
}

/// The format tag of a class list file.
pub(super) const CLASSES_FORMAT: &str = "stoker-classes/1";

/// A class list file: the class names, indexed by class id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct ClassList {
    /// [`CLASSES_FORMAT`].
    pub(super) format: String,
    /// Class names, indexed by class id.
    pub(super) classes: Vec<String>,
}

/// The most bytes of a class list file read.
const MAX_CLASS_LIST: u64 = 64 << 20;

/// Reads the class list file `path`.
fn read_class_list(path: &Path) -> Result<Vec<String>> {
    let mut text = Vec::new();
    match super::fsio::read_bounded(path, MAX_CLASS_LIST, &mut text) {
        Ok(()) => {}
        Err(super::fsio::ReadError::TooLarge { bytes, limit }) => {
            return Err(Error::source_at(
                path,
                format!("class list of {bytes} bytes exceeds the limit of {limit}"),
            ))
        }
        Err(super::fsio::ReadError::File { error, .. }) => return Err(Error::io(path, error)),
    }
    let list: ClassList = serde_json::from_slice(&text).map_err(|e| Error::Json {
        what: path.display().to_string(),
        source: e,
    })?;
    if list.format != CLASSES_FORMAT {
        return Err(Error::source_at(
            path,
            format!("format {:?}, expected {CLASSES_FORMAT:?}", list.format),
        ));
    }
    Ok(list.classes)
}

/// The class names of a shard dataset: the class list beside the shards ([`classes_path`];
/// all the shards' lists must agree), checked against the class names the samples record
/// (`names`: by label, the name and the first sample that records it); without a list, the
/// recorded names of the labels, and the label's number for a label none names; without
/// either, the labels' numbers.
fn class_names(
    shards: &[PathBuf],
    samples: &[Sample],
    names: &BTreeMap<u32, (String, usize)>,
) -> Result<Vec<String>> {
    let mut list: Option<(PathBuf, Vec<String>)> = None;
    let mut read = BTreeSet::new();
    for side in shards.iter().filter_map(|s| classes_path(s)) {
        if read.contains(&side) || !exists(&side) {
            continue;
        }
        read.insert(side.clone());
        let classes = read_class_list(&side)?;
        match &list {
            Some((first, c)) if *c != classes => {
                return Err(Error::dataset(format!(
                    "the shards' class lists differ: {} has {} classes ({:?}...), {} has {} ({:?}...)",
                    first.display(),
                    c.len(),
                    c.first(),
                    side.display(),
                    classes.len(),
                    classes.first()
                )));
            }
            Some(_) => {}
            None => list = Some((side, classes)),
        }
    }
    let max_label = samples.iter().filter_map(|s| s.label).max();
    let Some((side, classes)) = list else {
        return Ok(match max_label {
            Some(m) if !names.is_empty() => (0..=m)
                .map(|l| {
                    names
                        .get(&l)
                        .map_or_else(|| l.to_string(), |(n, _)| n.clone())
                })
                .collect(),
            m => super::numbered_classes(m),
        });
    };
    if let Some(s) = samples
        .iter()
        .find(|s| s.label.is_some_and(|l| l as usize >= classes.len()))
    {
        return Err(Error::source_at(
            &side,
            format!(
                "lists {} classes, but {:?} has label {:?}",
                classes.len(),
                s.path,
                s.label
            ),
        ));
    }
    for (label, (name, i)) in names {
        let listed = classes.get(*label as usize).map_or("", String::as_str);
        if listed != name.as_str() {
            let path = samples.get(*i).map_or("?", |s| s.path.as_str());
            return Err(Error::source_at(
                &side,
                format!("class {label} is {listed:?} here, but {path:?} records {name:?}"),
            ));
        }
    }
    Ok(classes)
}

/// The dataset of `shards`: each shard's index (of `kind`), each entry a sample whose
/// image and mask locations `locate` gives (shard, entry index, entry). A sample's path is
/// the one its shard records (the path it had in the dataset it was converted from), else
/// `<shard file name>/<entry name>`; a path recorded twice is an error naming both places.
///
/// An entry is listed with [`Location::Refused`] when indexing found a problem with it
/// (damage, a `cls` that is not a number), when its label is not a class id
/// ([`super::checked_label`]), or when it has no label while other samples of the dataset
/// have one (a sample is never delivered unlabelled among labelled ones).
fn dataset(
    listed: ShardList,
    kind: Kind<'_>,
    locate: impl Fn(&Path, usize, &Entry) -> (Location, Option<Location>),
) -> Result<Dataset> {
    let all = listed.all();
    // A shard that cannot be indexed (unreadable, not the format at its start) is reported
    // as a sample, as a bad entry of its folder is, and the others are listed.
    let mut bad = listed.bad;
    let mut shards = Vec::with_capacity(listed.files.len());
    let mut indexes = Vec::with_capacity(listed.files.len());
    for s in listed.files {
        match index::index(&s, kind) {
            Ok(ix) => {
                shards.push(s);
                indexes.push(ix);
            }
            Err(e) => bad.push((s, e)),
        }
    }
    if shards.is_empty() {
        if let Some((_, e)) = bad.into_iter().next() {
            return Err(e);
        }
        return Err(Error::dataset("no shards"));
    }
    let shards = &shards[..];
    let labelled = indexes
        .iter()
        .any(|ix| ix.entries.iter().any(|e| e.label.is_some()));
    let (noun, no_label) = match kind {
        Kind::TfRecord(keys) => ("record", format!("no int64 feature {:?}", keys.label)),
        Kind::Tar => ("sample", "no cls member".to_string()),
    };
    let mut samples: Vec<Sample> = Vec::new();
    let mut names: BTreeMap<u32, (String, usize)> = BTreeMap::new();
    // Recorded paths by id: where each was recorded (shard, entry, sample).
    let mut recorded: HashMap<u64, (usize, usize, usize)> = HashMap::new();
    let mut twice = Vec::new();
    // Samples that are reported, never delivered.
    let mut undeliverable = Vec::new();
    for (k, (shard, ix)) in shards.iter().zip(&indexes).enumerate() {
        let name = shard_name(shard);
        for (i, e) in ix.entries.iter().enumerate() {
            let path = e
                .path
                .clone()
                .unwrap_or_else(|| format!("{name}/{}", e.name));
            let id = sample_id(&path);
            if e.path.is_some() {
                let first = recorded.insert(id, (k, i, samples.len()));
                // (Two paths of one id are a hash collision, which the dataset reports.)
                if let Some((k0, i0, _)) =
                    first.filter(|f| samples.get(f.2).is_some_and(|s| s.path == path))
                {
                    let first = shards.get(k0).map(|s| shard_name(s)).unwrap_or_default();
                    twice.push(format!(
                        "{path:?} (in {first} entry {i0} and {name} entry {i})"
                    ));
                }
            }
            // What indexing found reads after the shard's name: "<shard> sample ...",
            // "<shard> record ...", "<shard> at offset ...".
            let refused = |kind, what: &str| Location::Refused {
                kind,
                reason: format!("{} {what}", shard.display()).into(),
            };
            let at = format!("{} {noun} {}", shard.display(), e.name);
            let label = match (&e.problem, e.label) {
                (Some(Problem::Corrupt(what)), _) => {
                    Err(refused(crate::error::SampleErrorKind::Corrupt, what))
                }
                (Some(Problem::Label(what)), _) => {
                    Err(refused(crate::error::SampleErrorKind::Label, what))
                }
                (None, Some(v)) => super::checked_label(v, &v.to_string(), &at).map(Some),
                (None, None) if labelled && !e.unread => Err(Location::Refused {
                    kind: crate::error::SampleErrorKind::Label,
                    reason: format!(
                        "{at}: no label ({no_label}), though other samples of the dataset have labels"
                    )
                    .into(),
                }),
                (None, None) => Ok(None),
            };
            if let (Some(class), Ok(Some(label))) = (&e.class, &label) {
                match names.get(label) {
                    None => {
                        names.insert(*label, (class.clone(), samples.len()));
                    }
                    Some((other, j)) if other != class => {
                        let first = samples.get(*j).map_or("?", |s| s.path.as_str());
                        return Err(Error::dataset(format!(
                            "label {label} is class {other:?} in {first:?} but {class:?} in {path:?}"
                        )));
                    }
                    Some(_) => {}
                }
            }
            let (location, mask, label) = match label {
                Ok(label) => {
                    let (location, mask) = locate(shard, i, e);
                    (location, mask, label)
                }
                Err(refused) => (refused, None, None),
            };
            if matches!(location, Location::Refused { .. }) || e.unread {
                undeliverable.push(samples.len());
            }
            samples.push(Sample {
                id,
                path,
                location,
                label,
                mask,
                group: None,
                targets: e.targets.clone().map(Arc::new),
                source: 0,
            });
        }
    }
    if !twice.is_empty() {
        let n = twice.len();
        twice.truncate(10);
        return Err(Error::dataset(format!(
            "{n} sample path(s) recorded twice in the shards: {}{}",
            twice.join(", "),
            if n > 10 { ", ..." } else { "" }
        )));
    }
    // A pipeline pairs masks for all samples or none: in a dataset with masks, a sample
    // that is only ever reported gets its own location as its mask (never read).
    if samples.iter().any(|s| s.mask.is_some()) {
        for i in undeliverable {
            if let Some(s) = samples.get_mut(i).filter(|s| s.mask.is_none()) {
                s.mask = Some(s.location.clone());
            }
        }
    }
    let masks = samples.iter().any(|s| s.mask.is_some());
    samples.extend(bad.iter().map(|(path, e)| unlisted(path, e, masks)));
    let classes = class_names(shards, &samples, &names)?;
    let root = all.first().and_then(|s| s.parent()).map(Path::to_path_buf);
    Dataset::from_samples(root, samples, classes)
}

/// The dataset of `samples` listed from `files` (shards, Parquet files): rooted at the
/// first file's folder, classes named by their ids up to the largest label.
#[cfg(feature = "parquet")]
pub(crate) fn from_files(files: &[PathBuf], samples: Vec<Sample>) -> Result<Dataset> {
    let classes = super::numbered_classes(samples.iter().filter_map(|s| s.label).max());
    let root = files
        .first()
        .and_then(|s| s.parent())
        .map(Path::to_path_buf);
    Dataset::from_samples(root, samples, classes)
}

/// A TFRecord dataset: every record of the shards (`*.tfrecord`, `*.tfrecords`,
/// `*.record` files and folders of them) is a sample, read through `keys`: its path the
/// `keys.path` feature where the record has one, its class names from the class list
/// beside the shards or the `keys.class_text` features (see the module docs).
pub(crate) fn tfrecord(paths: &[PathBuf], keys: &ExampleKeys) -> Result<Dataset> {
    let shards = shard_paths(paths, &[".tfrecord", ".tfrecords", ".record"])?;
    let (image, mask): (Arc<str>, Arc<str>) =
        (keys.image.as_str().into(), keys.mask.as_str().into());
    dataset(shards, Kind::TfRecord(keys), |shard, i, e| {
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
/// of them) is a sample: its image member, its `cls` label, its mask member, its path
/// from its `path.txt` member where it has one, its class name from the class list beside
/// the shards or its `cls.txt` member (see the module docs).
pub(crate) fn tar(paths: &[PathBuf]) -> Result<Dataset> {
    let shards = shard_paths(paths, &[".tar"])?;
    dataset(shards, Kind::Tar, |shard, _, e| {
        let member = |offset, len, check: Option<&check::Check>| match check {
            Some(c) => Location::Member(TarMember::new(shard.to_path_buf(), offset, len, c)),
            // (Not in an index that loads: every sample delivered has its checks.)
            None => Location::Range {
                path: shard.to_path_buf(),
                offset,
                len,
            },
        };
        let image = member(e.offset, e.len, e.check.as_ref());
        (
            image,
            e.mask.map(|(o, l)| member(o, l, e.mask_check.as_ref())),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_list_is_named_by_the_shards_prefix() {
        let list = |shard: &str| classes_path(Path::new(shard));
        assert_eq!(
            list("d/my-train-00012.tar"),
            Some(PathBuf::from("d/my-train.classes.json"))
        );
        assert_eq!(
            list("s.v2-123456.tfrecord"),
            Some(PathBuf::from("s.v2.classes.json"))
        );
        for unnumbered in [
            "d/train.tar",
            "d/-00001.tar",
            "d/train-.tar",
            "d/train-0a.tar",
        ] {
            assert_eq!(list(unnumbered), None, "{unnumbered}");
        }
    }

    #[test]
    fn recorded_text_is_utf8_without_its_line_break() {
        assert_eq!(recorded_text(b"cat/1.jpg").as_deref(), Some("cat/1.jpg"));
        assert_eq!(
            recorded_text(b"cat/1.jpg\r\n").as_deref(),
            Some("cat/1.jpg")
        );
        assert_eq!(recorded_text(b" a b \n").as_deref(), Some(" a b "));
        for bad in [&b""[..], b"\n", b"a\0b", b"\xff\xfe"] {
            assert_eq!(recorded_text(bad), None, "{bad:?}");
        }
        assert_eq!(recorded_text(&vec![b'a'; MAX_RECORDED as usize + 1]), None);
    }
}

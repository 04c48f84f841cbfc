//! What exists: samples with stable ids, listed cheaply, before anything random happens.
//!
//! A [`Dataset`] is a sorted list of [`Sample`]s. The only ways forward from a dataset are
//! [`Dataset::split`] (a fixed train/validation split) or [`Dataset::all`] (no validation
//! set); both consume it and return [`Subset`]s, and only a subset can feed a pipeline.
//! Subsets cannot be split again, so a split can never be taken after a shuffle: shuffling
//! happens per epoch inside the pipeline's sampler.
//!
//! ```compile_fail
//! # fn f(subset: stoker::Subset) {
//! // A subset, the only thing a pipeline reads, has no way to be split again.
//! let _ = subset.split(stoker::SplitSpec::fraction(0.1));
//! # }
//! ```

pub mod aspect;
pub mod buckets;
mod coco;
pub mod files;
pub mod fsio;
mod listing;
pub mod mixture;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod remote;
pub mod sampler;
pub mod shards;
pub mod split;
pub mod target;
mod walk;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result, SampleError, SampleErrorKind};
use crate::rng::{fnv1a64, mix64};

pub use listing::ListingOptions;
pub use mixture::Mixture;
pub use sampler::Sampler;
pub use split::{CheckReport, Manifest, Split};
pub use target::{BoundingBox, Keypoint, Targets};
pub use walk::{WalkOptions, IMAGE_EXTENSIONS};

/// Where a sample's bytes live.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// A file on disk (absolute, or relative to the working directory).
    File(PathBuf),
    /// Bytes already in memory (generated data, tests, benchmarks).
    Memory(Arc<[u8]>),
    /// A bytes feature of a TFRecord record's example (see [`shards`]).
    Record(shards::RecordField),
    /// A cell of a Parquet file (feature `parquet`).
    Parquet(shards::ParquetCell),
    /// A byte range of a file.
    Range {
        /// The file.
        path: PathBuf,
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// A tar member, read with what its shard's index recorded checked (see
    /// `shards::TarMember`).
    Member(shards::TarMember),
    /// Nowhere: listing found this sample but it cannot be delivered (a label above
    /// [`MAX_LABEL`], a damaged region of a shard that no sample key can be read from).
    /// Every epoch reports it, with `kind` and `reason`, in place of delivering it, so it is
    /// counted like any other failed sample and never silently left out.
    Refused {
        /// The category it is reported under.
        kind: SampleErrorKind,
        /// Why, with where (the file, the offset, the value).
        reason: Arc<str>,
    },
}

impl Location {
    /// Reads the bytes, refusing more than `max_bytes`; the error says why, and where.
    pub fn read(&self, max_bytes: u64) -> std::result::Result<Vec<u8>, shards::ReadError> {
        let too_big = |bytes: u64| shards::ReadError::TooLarge {
            bytes,
            limit: max_bytes,
        };
        match self {
            Location::Memory(b) => {
                if b.len() as u64 > max_bytes {
                    return Err(too_big(b.len() as u64));
                }
                Ok(b.to_vec())
            }
            Location::File(p) => {
                let mut buf = Vec::new();
                fsio::read_bounded(p, max_bytes, &mut buf)?;
                Ok(buf)
            }
            Location::Record(field) => {
                let mut buf = Vec::new();
                shards::read_field(field, max_bytes, &mut buf)?;
                Ok(buf)
            }
            Location::Range { path, offset, len } => {
                let mut buf = Vec::new();
                shards::read_range(path, *offset, *len, max_bytes, &mut buf)?;
                Ok(buf)
            }
            Location::Parquet(cell) => {
                let mut buf = Vec::new();
                shards::read_parquet(cell, max_bytes, &mut buf)?;
                Ok(buf)
            }
            Location::Member(m) => {
                let mut buf = Vec::new();
                shards::read_member(m, max_bytes, &mut buf)?;
                Ok(buf)
            }
            Location::Refused { kind, reason } => Err(shards::ReadError::Refused {
                kind: *kind,
                reason: Arc::clone(reason),
            }),
        }
    }
}

/// The shard (or Parquet file) whose bytes a location is part of; `None` for a location
/// that is a file of its own, memory, or nothing.
#[doc(hidden)]
pub fn shard_of(location: &Location) -> Option<&Path> {
    match location {
        Location::Range { path, .. } => Some(path),
        Location::Member(m) => Some(&m.shard),
        Location::Record(f) => Some(&f.shard),
        Location::Parquet(c) => Some(&c.path),
        Location::File(_) | Location::Memory(_) | Location::Refused { .. } => None,
    }
}

/// Reads a Parquet cell into `buf`; `max_bytes` bounds it. Without the `parquet` feature,
/// an error saying so. (Here rather than in [`shards`], which only re-exports it, so that
/// `shards` and `parquet` need not import each other.)
#[doc(hidden)]
pub fn read_parquet(
    cell: &shards::ParquetCell,
    max_bytes: u64,
    buf: &mut Vec<u8>,
) -> std::result::Result<(), shards::ReadError> {
    #[cfg(feature = "parquet")]
    return parquet::read_cell(cell, max_bytes, buf)
        .map_err(|e| shards::ReadError::Parquet(Box::new(e)));
    #[cfg(not(feature = "parquet"))]
    {
        let _ = (max_bytes, buf);
        Err(shards::ReadError::NoParquet {
            path: cell.path.clone(),
        })
    }
}

/// One sample: an image, its optional class label and label mask, and a stable id.
/// Made by the dataset constructors, or by [`Sample::new`] / [`Sample::in_memory`]; it
/// will grow fields, so it cannot be written as a struct literal outside stoker:
///
/// ```compile_fail
/// let s = stoker::Sample {
///     id: 0,
///     path: "a.jpg".into(),
///     location: stoker::source::Location::File("a.jpg".into()),
///     label: None,
///     mask: None,
///     group: None,
///     targets: None,
/// };
/// ```
///
/// ```
/// use stoker::source::{sample_id, Location};
/// let s = stoker::Sample::new("cat/1.jpg", Location::File("data/cat/1.jpg".into()), Some(3));
/// assert_eq!(s.id, sample_id("cat/1.jpg"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sample {
    /// Stable id derived from `path` (see [`sample_id`]); the same in every run.
    pub id: u64,
    /// Path relative to the dataset root, with `/` separators.
    pub path: String,
    /// Where the image bytes are.
    pub location: Location,
    /// Class id, if the source has labels.
    pub label: Option<u32>,
    /// Where the label mask is, if the source pairs one.
    pub mask: Option<Location>,
    /// Group key for group-aware splits, if a pattern assigned one.
    pub group: Option<String>,
    /// Targets beyond the class id (several class ids, a vector, boxes, keypoints), if
    /// the source has them ([`Targets`]); shared, since a sample is cloned per epoch.
    pub targets: Option<Arc<Targets>>,
    /// The source it came from in a [`Mixture`]: its index in the mixture's list
    /// (which [`PipelineBuilder::augment_source`](crate::PipelineBuilder::augment_source)
    /// names); 0 for a sample of one dataset.
    pub source: usize,
}

impl Sample {
    /// A sample at `location` with the stable id of `path` (its path relative to the
    /// dataset root, `/` separators), no mask and no group.
    pub fn new(path: impl Into<String>, location: Location, label: Option<u32>) -> Sample {
        let path = path.into();
        Sample {
            id: sample_id(&path),
            path,
            location,
            label,
            mask: None,
            group: None,
            targets: None,
            source: 0,
        }
    }

    /// The same sample with `targets` (several class ids, a vector, boxes, keypoints, in
    /// the image's pixels: see [`Targets`]).
    pub fn with_targets(mut self, targets: Targets) -> Sample {
        self.targets = Some(Arc::new(targets));
        self
    }

    /// The same sample with its label mask at `mask`.
    pub fn with_mask(mut self, mask: Location) -> Sample {
        self.mask = Some(mask);
        self
    }

    /// The same sample in group `group` (for group-aware splits).
    pub fn with_group(mut self, group: impl Into<String>) -> Sample {
        self.group = Some(group.into());
        self
    }

    /// A sample whose bytes are in memory (`Arc`-shared, so many samples may share one
    /// image), with the stable id of `path`: for synthetic datasets, benchmarks and tests
    /// ([`Dataset::from_samples`] makes a dataset of them).
    pub fn in_memory(path: impl Into<String>, bytes: Arc<[u8]>, label: Option<u32>) -> Sample {
        Sample::new(path, Location::Memory(bytes), label)
    }
}

/// The stable id of a sample: SplitMix64's finaliser over FNV-1a-64 of its relative path
/// (UTF-8, `/` separators). It depends on the path alone, never on listing order.
pub fn sample_id(rel_path: &str) -> u64 {
    mix64(fnv1a64(rel_path.as_bytes()))
}

/// The largest class label stoker takes: 2^20 - 1 (1,048,575). Labels are data, never a
/// size, but a dataset whose labels are bare numbers gets a class name for every id up to
/// its largest label ([`Dataset::classes`]), so the bound keeps that list small (a few tens
/// of MB at most). A sample whose label is larger (or negative, or not a number) is listed
/// and reported every epoch with [`SampleErrorKind::Label`], never delivered with a wrong
/// label and never allowed to abort listing.
pub const MAX_LABEL: u32 = (1 << 20) - 1;

/// A label as a source records it (`raw`, for the report), checked against [`MAX_LABEL`]:
/// `Ok` with the label, or `Err` with the location that reports it.
pub(crate) fn checked_label(
    value: i128,
    raw: &str,
    at: &str,
) -> std::result::Result<u32, Location> {
    u32::try_from(value)
        .ok()
        .filter(|l| *l <= MAX_LABEL)
        .ok_or_else(|| Location::Refused {
            kind: SampleErrorKind::Label,
            reason: format!(
                "{at}: label {raw} is not a class id from 0 to {MAX_LABEL} (stoker::MAX_LABEL)"
            )
            .into(),
        })
}

/// Class names `"0"` to `max` for sources whose labels are bare ids.
pub(crate) fn numbered_classes(max: Option<u32>) -> Vec<String> {
    max.map_or_else(Vec::new, |m| (0..=m).map(|i| i.to_string()).collect())
}

/// A file that listing left out, and why (see [`Dataset::skipped`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Skipped {
    /// Path relative to the dataset root, with `/` separators (a folder's ends in `/`).
    pub path: String,
    /// Why it is not a sample.
    pub reason: SkipReason,
}

/// Why listing left a file (or folder) out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// Its extension (lower-cased; empty when it has none) is not one of
    /// [`IMAGE_EXTENSIONS`].
    Extension(String),
    /// A hidden file or folder (its name starts with `.`); a hidden folder is not entered.
    Hidden,
    /// A file directly in the root of an image-folder tree, outside every class folder.
    OutsideClasses,
    /// Not a regular file or folder: a FIFO, a socket, a device (what it is, in words, from
    /// `fsio::kind_of`). Only regular files (and symlinks to them) are samples, so no read
    /// can block on a FIFO or run on forever from `/dev/zero`.
    NotAFile(String),
    /// A folder that could not be read, or an entry whose type could not be found (a broken
    /// symlink); what the operating system said. The rest of the dataset is listed.
    Unreadable(String),
    /// A folder (a link to one, most often) that is the same folder, by device and inode,
    /// as one listed already: not entered again. The path it was listed under (relative,
    /// ending in `/`; empty for the dataset folder itself). So links that lead back up
    /// (`up -> ..`, `here -> .`) are reported, never walked round.
    Listed(String),
    /// A link to a folder outside the dataset folder (where it leads): not followed
    /// unless [`WalkOptions::follow_links_outside`] is set.
    LinkOutside(String),
    /// A folder nested deeper than [`WalkOptions::max_depth`] (the limit) below the
    /// dataset folder: not entered.
    TooDeep(usize),
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Extension(e) if e.is_empty() => {
                f.write_str("no file extension (not a format stoker decodes)")
            }
            SkipReason::Extension(e) => write!(f, "extension .{e} is not a format stoker decodes"),
            SkipReason::Hidden => f.write_str("hidden (name starts with '.')"),
            SkipReason::OutsideClasses => f.write_str("not inside a class folder"),
            SkipReason::NotAFile(kind) => write!(f, "a {kind}, not a regular file"),
            SkipReason::Unreadable(why) => write!(f, "cannot be read: {why}"),
            SkipReason::Listed(at) if at.is_empty() => {
                f.write_str("the dataset folder itself (a link back up): not followed")
            }
            SkipReason::Listed(at) => {
                write!(f, "the same folder as {at:?}, listed already: not followed")
            }
            SkipReason::LinkOutside(to) => write!(
                f,
                "a link to {to}, outside the dataset folder: not followed (WalkOptions::follow_links_outside)"
            ),
            SkipReason::TooDeep(max) => {
                write!(f, "nested deeper than {max} folders: not entered")
            }
        }
    }
}

/// A listed dataset: samples sorted by relative path, class names by class id.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub(crate) root: Option<PathBuf>,
    pub(crate) samples: Vec<Sample>,
    pub(crate) classes: Vec<String>,
    pub(crate) read_latency: Option<Duration>,
    pub(crate) skipped: Vec<Skipped>,
}

impl Dataset {
    /// A dataset from explicit samples; sorts them by path and checks ids are unique.
    pub fn from_samples(
        root: Option<PathBuf>,
        mut samples: Vec<Sample>,
        classes: Vec<String>,
    ) -> Result<Self> {
        samples.sort_by(|a, b| a.path.cmp(&b.path));
        let mut ids: Vec<(u64, &str)> = samples.iter().map(|s| (s.id, s.path.as_str())).collect();
        ids.sort_unstable();
        for w in ids.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(Error::dataset(format!(
                    "two samples share id {:016x}: {:?} and {:?} (duplicate path or hash collision)",
                    w[0].0, w[0].1, w[1].1
                )));
            }
        }
        Ok(Dataset {
            root,
            samples,
            classes,
            read_latency: None,
            skipped: Vec::new(),
        })
    }

    /// Records what listing left out, sorted by path, and says so in the log: one
    /// warning with the count per reason and a few examples.
    pub(crate) fn with_skipped(mut self, mut skipped: Vec<Skipped>) -> Self {
        skipped.sort_by(|a, b| a.path.cmp(&b.path));
        if !skipped.is_empty() {
            let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
            for s in &skipped {
                let key = match &s.reason {
                    SkipReason::Extension(e) if e.is_empty() => "no extension".to_string(),
                    SkipReason::Extension(e) => format!(".{e}"),
                    SkipReason::Hidden => "hidden".to_string(),
                    SkipReason::OutsideClasses => "outside class folders".to_string(),
                    SkipReason::NotAFile(_) => "not regular files".to_string(),
                    SkipReason::Unreadable(_) => "unreadable".to_string(),
                    SkipReason::Listed(_) => "folders listed already".to_string(),
                    SkipReason::LinkOutside(_) => "links outside".to_string(),
                    SkipReason::TooDeep(_) => "too deep".to_string(),
                };
                *counts.entry(key).or_default() += 1;
            }
            let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
            let shown: Vec<&str> = skipped.iter().take(3).map(|s| s.path.as_str()).collect();
            log::warn!(
                "{}: listing skipped {} file(s) that are not samples ({}), e.g. {}{}",
                self.root
                    .as_deref()
                    .map_or_else(|| "dataset".into(), |r| r.display().to_string()),
                skipped.len(),
                counts.join(", "),
                shown.join(", "),
                if skipped.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                }
            );
        }
        self.skipped = skipped;
        self
    }

    /// An image-folder tree: one sub-folder per class (class ids from sorted folder names).
    pub fn image_folder(root: impl AsRef<Path>) -> Result<Self> {
        files::image_folder(root.as_ref())
    }

    /// [`Dataset::image_folder`] with the folder walk's bounds and rules ([`WalkOptions`]).
    pub fn image_folder_with(root: impl AsRef<Path>, options: &WalkOptions) -> Result<Self> {
        files::image_folder_with(root.as_ref(), options)
    }

    /// A file list: UTF-8 text, one sample per line, in one of three forms:
    ///
    /// - `PATH` — a sample without a label;
    /// - `PATH<TAB>LABEL` — everything before the (single) tab is the path, so it may hold
    ///   spaces; spaces around either field are trimmed;
    /// - `PATH LABEL` — without a tab, the line is split at runs of spaces: one field is a
    ///   path, two are a path and a label; a path with spaces needs the tab form.
    ///
    /// `PATH` is relative to the list's folder, with `/` separators, and stays below it (no
    /// absolute paths, no `..`; [`Dataset::files_with`] and
    /// [`ListingOptions::allow_outside_root`] allow them). `LABEL` is a decimal integer
    /// from 0 to 1048575 (2^20 - 1); the class names are the decimal strings `"0"` to the
    /// largest label. Either every sample has a label or none has: in a list where some
    /// line has a label, a line without one is listed and reported every epoch
    /// ([`SampleErrorKind::Label`], with its line number), never delivered unlabelled.
    /// Blank lines and lines whose first non-blank character is `#` are skipped; a `\r`
    /// before the line break (a Windows file) is ignored.
    ///
    /// A malformed line is refused here, with its line number and text, rather than failing
    /// later as a missing file: a label that is not such an integer (`a.jpg cat`, `a.jpg -1`),
    /// more than two fields (`my photos/a.jpg 3`: use a tab), more than one tab, an empty path
    /// (`<TAB>3`), a comma-separated `path,label` (`a.jpg,1`: a comma does not separate
    /// fields, and a path without a tab ending in `,` and digits is taken as that mistake;
    /// in a labelled list such a path can be written in the tab form), or a path outside
    /// the list's folder.
    /// Whether the files exist is not checked here (a missing one is reported when read).
    /// A file that is not UTF-8 text is refused saying so, or that it is an image.
    pub fn files(list: impl AsRef<Path>) -> Result<Self> {
        files::file_list(list.as_ref(), &ListingOptions::default())
    }

    /// [`Dataset::files`] with `options` (paths outside the list's folder allowed or not).
    pub fn files_with(list: impl AsRef<Path>, options: &ListingOptions) -> Result<Self> {
        files::file_list(list.as_ref(), options)
    }

    /// Every image file under `root` (recursively), without labels; the
    /// folder walk's rules and bounds are [`WalkOptions`]' defaults.
    pub fn flat(root: impl AsRef<Path>) -> Result<Self> {
        files::flat(root.as_ref())
    }

    /// [`Dataset::flat`] with the folder walk's bounds and rules ([`WalkOptions`]).
    pub fn flat_with(root: impl AsRef<Path>, options: &WalkOptions) -> Result<Self> {
        files::flat_with(root.as_ref(), options)
    }

    /// A manifest: a CSV or JSON Lines file with one sample per record, its `path`
    /// (relative to the manifest's folder) and any of `label`, `labels`, `values`,
    /// `boxes`, `box_classes`, `keypoints`, `mask` and `group`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(
    ///     dir.path().join("train.jsonl"),
    ///     r#"{"path": "a.jpg", "label": 1, "boxes": [[10, 20, 50, 60, 3]]}"#,
    /// )
    /// .unwrap();
    /// let data = stoker::Dataset::from_manifest(dir.path().join("train.jsonl")).unwrap();
    /// let t = data.samples()[0].targets.as_ref().unwrap();
    /// assert_eq!((t.boxes[0].x1, t.boxes[0].class), (50.0, 3));
    /// ```
    pub fn from_manifest(path: impl AsRef<Path>) -> Result<Self> {
        target::manifest(path.as_ref(), &ListingOptions::default())
    }

    /// [`Dataset::from_manifest`] with `options` (paths outside the manifest's folder
    /// allowed or not).
    pub fn from_manifest_with(path: impl AsRef<Path>, options: &ListingOptions) -> Result<Self> {
        target::manifest(path.as_ref(), options)
    }

    /// A COCO-style annotation file over the images in `images`: boxes (made
    /// `[x0, y0, x1, y1]`) with their category ids, and keypoints. What it refuses
    /// and what it reports per sample: `docs/sources.md`.
    pub fn coco(annotations: impl AsRef<Path>, images: impl AsRef<Path>) -> Result<Self> {
        coco::coco(
            annotations.as_ref(),
            images.as_ref(),
            &ListingOptions::default(),
        )
    }

    /// [`Dataset::coco`] with `options` (image paths outside `images` allowed or not).
    pub fn coco_with(
        annotations: impl AsRef<Path>,
        images: impl AsRef<Path>,
        options: &ListingOptions,
    ) -> Result<Self> {
        coco::coco(annotations.as_ref(), images.as_ref(), options)
    }

    /// TFRecord shards (files, or folders of `*.tfrecord` files) of `tf.train.Example`
    /// records with the default keys (`image/encoded`, `image/class/label`,
    /// `image/segmentation/class/encoded`). See [`shards`].
    pub fn tfrecord(paths: &[PathBuf]) -> Result<Self> {
        shards::tfrecord(paths, &shards::ExampleKeys::default())
    }

    /// [`Dataset::tfrecord`] with other feature keys.
    pub fn tfrecord_with_keys(paths: &[PathBuf], keys: &shards::ExampleKeys) -> Result<Self> {
        shards::tfrecord(paths, keys)
    }

    /// WebDataset tar shards (files, or folders of `*.tar` files): `key.jpg` (or another
    /// image), `key.cls`, `key.png` for a mask. See [`shards`].
    pub fn tar(paths: &[PathBuf]) -> Result<Self> {
        shards::tar(paths)
    }

    /// Parquet files (files, or folders of `*.parquet` files): a row per sample, with the
    /// default columns `image`, `label`, `mask`. See [`parquet`].
    #[cfg(feature = "parquet")]
    pub fn parquet(paths: &[PathBuf]) -> Result<Self> {
        parquet::parquet(paths, &parquet::ParquetColumns::default())
    }

    /// [`Dataset::parquet`] with other columns.
    #[cfg(feature = "parquet")]
    pub fn parquet_with_columns(
        paths: &[PathBuf],
        columns: &parquet::ParquetColumns,
    ) -> Result<Self> {
        parquet::parquet(paths, columns)
    }

    /// Pairs each image with the label mask of the same file stem in `mask_dir`.
    pub fn with_masks(self, mask_dir: impl AsRef<Path>) -> Result<Self> {
        files::with_masks(self, mask_dir.as_ref())
    }

    /// Simulates a storage read latency per sample in the readers (benchmarks, tests).
    pub fn with_read_latency(mut self, latency: Duration) -> Self {
        self.read_latency = Some(latency);
        self
    }

    /// The samples, sorted by path.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// Class names, indexed by class id.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// What listing a folder left out, sorted by path, each with its reason: files whose
    /// extension is not a format stoker decodes ([`IMAGE_EXTENSIONS`]), hidden
    /// files and folders, files outside the class folders of an image-folder tree, and
    /// the folders the walk does not enter ([`WalkOptions`]: a link back to a folder listed
    /// already, a link to a folder outside the dataset folder, a folder nested too deep).
    /// Empty for file lists, shards, Parquet files and [`Dataset::from_samples`], which
    /// list every entry they are given (a damaged shard or Parquet file is listed as a
    /// sample that every epoch reports). The same list is logged once, as a warning with the count.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The root folder, if the dataset has one.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the dataset has no samples.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Splits once, deterministically, into train and validation. Consumes the dataset.
    pub fn split(self, how: split::SplitSpec) -> Result<Split> {
        Split::make(self, &how)
    }

    /// The whole dataset as one training subset (no validation set).
    pub fn all(self) -> Subset {
        Subset::new(self, Role::Train, None)
    }
}

/// Which part of a split a subset is; decides shuffling in the sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Training: shuffled each epoch.
    Train,
    /// Validation: fixed order, every epoch the same.
    Validation,
}

/// A fixed part of a dataset that a pipeline can read. It has no way to be split again.
#[derive(Debug, Clone)]
pub struct Subset {
    pub(crate) inner: Arc<SubsetInner>,
}

#[derive(Debug)]
pub(crate) struct SubsetInner {
    pub(crate) samples: Vec<Sample>,
    pub(crate) classes: Vec<String>,
    pub(crate) role: Role,
    pub(crate) root: Option<PathBuf>,
    pub(crate) read_latency: Option<Duration>,
    /// The order of a [`Mixture`]'s subset: its sources, weights and policy.
    pub(crate) mixing: Option<sampler::Mixing>,
}

impl Subset {
    pub(crate) fn new(data: Dataset, role: Role, keep: Option<&[bool]>) -> Subset {
        let samples = match keep {
            None => data.samples,
            Some(keep) => data
                .samples
                .into_iter()
                .zip(keep.iter())
                .filter(|(_, k)| **k)
                .map(|(s, _)| s)
                .collect(),
        };
        Subset {
            inner: Arc::new(SubsetInner {
                samples,
                classes: data.classes,
                role,
                root: data.root,
                read_latency: data.read_latency,
                mixing: None,
            }),
        }
    }

    /// The samples, sorted by path.
    pub fn samples(&self) -> &[Sample] {
        &self.inner.samples
    }

    /// Class names, indexed by class id.
    pub fn classes(&self) -> &[String] {
        &self.inner.classes
    }

    /// Train (shuffled per epoch) or validation (fixed order).
    pub fn role(&self) -> Role {
        self.inner.role
    }

    /// The same samples read in the order `role` gives: [`Role::Validation`] in the
    /// subset's sorted order every epoch, [`Role::Train`] shuffled each epoch.
    pub fn with_role(&self, role: Role) -> Subset {
        let s = &self.inner;
        Subset {
            inner: Arc::new(SubsetInner {
                samples: s.samples.clone(),
                classes: s.classes.clone(),
                role,
                root: s.root.clone(),
                read_latency: s.read_latency,
                mixing: s.mixing.clone(),
            }),
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.inner.samples.len()
    }

    /// Whether the subset is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.samples.is_empty()
    }

    /// The dataset root, if any.
    pub fn root(&self) -> Option<&Path> {
        self.inner.root.as_deref()
    }
}

impl SampleError {
    /// The report for `sample`.
    pub fn new(sample: &Sample, kind: SampleErrorKind, reason: String) -> Self {
        SampleError {
            id: sample.id,
            path: sample.path.clone(),
            kind,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_depend_on_path_only() {
        assert_eq!(sample_id("cat/1.jpg"), sample_id("cat/1.jpg"));
        assert_ne!(sample_id("cat/1.jpg"), sample_id("cat/2.jpg"));
        // FNV-1a of the empty string is its offset basis.
        assert_eq!(sample_id(""), mix64(0xCBF2_9CE4_8422_2325));
    }

    #[test]
    fn with_role_keeps_the_samples_and_sets_the_role() {
        let samples = (0..5u32)
            .map(|i| {
                Sample::new(
                    format!("{i}.png"),
                    Location::Memory(Arc::from(vec![])),
                    Some(i % 2),
                )
            })
            .collect();
        let classes = vec!["a".to_string(), "b".to_string()];
        let data = Dataset::from_samples(Some("/r".into()), samples, classes).unwrap();
        let train = data.clone().all();
        let val = train.with_role(Role::Validation);
        assert_eq!((train.role(), val.role()), (Role::Train, Role::Validation));
        assert_eq!(val.samples(), data.samples());
        assert_eq!(val.classes(), data.classes());
        assert_eq!(val.root(), data.root());
        assert_eq!(val.with_role(Role::Train).role(), Role::Train);
    }
}

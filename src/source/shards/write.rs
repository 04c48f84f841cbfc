//! Writing shards (`stoker convert`): TFRecord files of `tf.train.Example` records, or
//! WebDataset tar files (written by the `tar` crate), each indexed when it is closed.
//!
//! # The layout stoker writes
//!
//! In the output folder: shards `<prefix>-00000.<ext>`, `<prefix>-00001.<ext>`, ...
//! (`tfrecord` or `tar`), each closed once it holds the shard size, the samples in the
//! order given, streamed as they are added to a temporary name (`<shard>.partial`: memory
//! holds about a sample at a time, whatever the shard size), flushed to the disk and then
//! renamed, so a shard under its final name is complete even if the run was interrupted
//! (a writer dropped unfinished removes its `.partial` file; a killed run may leave one,
//! which readers do not list); beside each its index `<shard>.stoker-index` (a cache:
//! rebuilt when missing or stale); and, when the dataset has classes, the class list
//! `<prefix>.classes.json`: `{"format": "stoker-classes/1", "classes": ["cat", "dog"]}`,
//! the class names by class id (what [`crate::Dataset::classes`] gives when the shards
//! are read back).
//!
//! Every sample records its path in the dataset it came from (`cat/001.jpg`, relative,
//! `/` separators; [`crate::Sample::path`]). Read back, that is the sample's path, so its
//! id ([`crate::source::sample_id`]), its side of a saved split and its augmentations are
//! those it had in the folder. Paths must be unique across the shards.
//!
//! TFRecord: each record (no compression) is a `tf.train.Example` with
//!
//! | feature | type | value |
//! | --- | --- | --- |
//! | `image/encoded` | bytes | the image file, byte for byte |
//! | `image/format` | bytes | `jpg`, `png`, `webp`, `bmp`, `tif`, `gif` (from its first bytes) |
//! | `image/filename` | bytes | the sample's path |
//! | `stoker/path` | bytes | the sample's path (read back as its path: [`super::ExampleKeys::path`]) |
//! | `image/class/label` | int64 | the class id (labelled samples) |
//! | `image/class/text` | bytes | the class name (labelled samples of a dataset with classes) |
//! | `image/segmentation/class/encoded` | bytes | the label mask file (samples with a mask) |
//!
//! WebDataset tar (ustar members, regular files, mode 644, owner 0, time 0): each sample's
//! key (`__key__`) is `NNNNNN_<path>`, its number in the shard and its path with every
//! character other than an ASCII letter, digit, `-` or `_` made `_` (keys hold no dots),
//! at most 60 of them; its members, in this order:
//!
//! | member | value |
//! | --- | --- |
//! | `KEY.jpg` (`png`, `webp`, `bmp`, `tif`, `gif` from its first bytes) | the image file, byte for byte |
//! | `KEY.cls` | the class id, ASCII decimal (labelled samples) |
//! | `KEY.cls.txt` | the class name, UTF-8 (labelled samples of a dataset with classes) |
//! | `KEY.path.txt` | the sample's path, UTF-8 |
//! | `KEY.mask.png` | the label mask file (samples with a mask) |
//!
//! A WebDataset reader sees them as the sample's `jpg`, `cls` (an integer), `cls.txt` and
//! `path.txt` (text) and `mask.png`; TensorFlow's `parse_single_example` skips the features
//! it is not asked for.
//!
//! Folder ([`ShardFormat::Folder`], not shards): each image at its path under the output
//! folder (`OUT/cat/001.jpg`), so [`crate::Dataset::image_folder`] lists the same samples,
//! paths and classes (every class gets its folder, an empty one too). With masks, the
//! images go under `OUT/images/` and each mask under `OUT/masks/`, in its image's folder
//! with its image's stem (`OUT/masks/cat/001.png`), so
//! `Dataset::image_folder("OUT/images")?.with_masks("OUT/masks")` pairs them again. Each
//! file is written under a temporary name (`.partial`) and then renamed. Labels come back
//! from the class folders only: a dataset whose labels are not its first folder (a file
//! list) loses them.
//!
//! "Byte for byte" above holds without transcoding. With
//! [`ShardWriter::with_transcode`] (`stoker convert`'s default), each JPEG that can be is
//! rewritten losslessly as one baseline scan with restart markers
//! ([`add_restarts`]: the same coefficients, so the same pixels); the
//! others are written as they are.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::index::{index, Kind};
use super::tfrecord::{encode_example, frame_record};
use super::{classes_file_name, ClassList, ExampleKeys, ReadError, CLASSES_FORMAT, MAX_RECORDED};
use crate::decode::jpeg::transcode::{add_restarts, TranscodeCounts, TranscodeOptions, Transcoded};
use crate::error::{Error, Result};
use crate::source::{sample_id, Dataset, Sample};

/// The shard formats [`ShardWriter`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardFormat {
    /// TFRecord files of `tf.train.Example` records.
    TfRecord,
    /// WebDataset tar files.
    Tar,
    /// A plain folder of image files at their paths (not shards; see the module docs).
    Folder,
}

impl ShardFormat {
    /// `tfrecord`, `tar` or `folder`.
    pub fn name(self) -> &'static str {
        match self {
            ShardFormat::TfRecord => "tfrecord",
            ShardFormat::Tar => "tar",
            ShardFormat::Folder => "folder",
        }
    }
}

/// A writer that counts the bytes written through it: where the next byte of a shard goes.
struct Counted<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The file a shard is streamed into, through a buffer.
type ShardFile = Counted<BufWriter<File>>;

/// Bytes buffered on their way to a shard's file.
const WRITE_BUFFER: usize = 1 << 20;

/// The shard's contents so far, as they are streamed to its file.
enum Body {
    TfRecord(ShardFile),
    Tar(::tar::Builder<ShardFile>),
}

/// A shard's temporary file, `<shard>.partial`: removed when dropped unless it was
/// renamed to the shard's final name.
struct Partial {
    path: PathBuf,
    published: bool,
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The shard being written: streamed to `<shard>.partial` as samples are added (memory
/// holds the sample being added and a write buffer, whatever the shard size), flushed to
/// the disk and renamed to its final name when it is closed. Dropped before that (an
/// error, a writer never finished), it removes its temporary file.
struct Open {
    /// The shard's final name.
    path: PathBuf,
    /// Where it is written until it is complete.
    partial: Partial,
    body: Body,
}

impl Open {
    /// Starts the shard `path` in `<path>.partial` (replacing what was there).
    fn create(format: ShardFormat, path: PathBuf) -> Result<Self> {
        let mut partial = path.clone().into_os_string();
        partial.push(".partial");
        let partial = Partial {
            path: PathBuf::from(partial),
            published: false,
        };
        let file = File::create(&partial.path).map_err(|e| Error::io(&partial.path, e))?;
        let file = Counted {
            inner: BufWriter::with_capacity(WRITE_BUFFER, file),
            written: 0,
        };
        let body = match format {
            ShardFormat::Tar => Body::Tar(::tar::Builder::new(file)),
            ShardFormat::TfRecord | ShardFormat::Folder => Body::TfRecord(file),
        };
        Ok(Open {
            path,
            partial,
            body,
        })
    }

    /// Bytes written so far.
    fn len(&self) -> u64 {
        match &self.body {
            Body::TfRecord(f) => f.written,
            Body::Tar(t) => t.get_ref().written,
        }
    }

    /// Completes the shard (a tar file gets its end-of-archive blocks), flushes it to the
    /// disk and renames it to its final name, so that a shard under its final name is
    /// always complete, whenever the run is interrupted (readers do not list `.partial`
    /// files). Returns the final name.
    fn close(self) -> Result<PathBuf> {
        let Open {
            path,
            mut partial,
            body,
        } = self;
        let io = |e| Error::io(&partial.path, e);
        let counted = match body {
            Body::TfRecord(f) => f,
            Body::Tar(t) => t.into_inner().map_err(io)?,
        };
        let file = counted.inner.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&partial.path, &path).map_err(|e| Error::io(&path, e))?;
        partial.published = true;
        Ok(path)
    }
}

impl std::fmt::Debug for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.body {
            Body::TfRecord(_) => "TfRecord",
            Body::Tar(_) => "Tar",
        };
        write!(
            f,
            "{kind}({}: {} bytes)",
            self.partial.path.display(),
            self.len()
        )
    }
}

/// Appends one member (a regular file, mode 644, owner 0, time 0) to a tar shard.
fn tar_member<W: Write>(
    tar: &mut ::tar::Builder<W>,
    name: &str,
    data: &[u8],
) -> std::io::Result<()> {
    let mut h = ::tar::Header::new_ustar();
    h.set_entry_type(::tar::EntryType::Regular);
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    tar.append_data(&mut h, name, data)
}

/// The extension of an encoded image, from its magic bytes (the decoder's own
/// signatures, so every format it reads keeps its name); `bin` for anything else (which
/// [`ShardWriter::add`] refuses before it gets here).
fn image_ext(bytes: &[u8]) -> &'static str {
    crate::decode::Format::sniff(bytes).map_or("bin", crate::decode::Format::extension)
}

/// Writes `bytes` to `path` (its folders created) under a temporary name, then renames
/// it: a file under its final name is complete.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, bytes).map_err(|e| Error::io(&partial, e))?;
    std::fs::rename(&partial, path).map_err(|e| Error::io(path, e))
}

/// `name` (a sample's path) as a relative path that stays inside the output folder:
/// `/`-separated names, none empty, `.` or `..`, no backslash, not absolute.
fn relative_inside(name: &str) -> Result<PathBuf> {
    let ok = !name.starts_with('/')
        && !name.contains('\\')
        && name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains(':'));
    if !ok {
        return Err(Error::dataset(format!(
            "sample path {:?}: a folder output needs relative paths inside it",
            name.chars().take(80).collect::<String>()
        )));
    }
    Ok(name.split('/').collect())
}

/// Why [`ShardWriter::add`] refuses an image: `None` for bytes in a format stoker decodes
/// (a shard reader finds a sample by its image member's extension, so anything else would
/// be written and then vanish on reading).
fn not_an_image(image: &[u8]) -> Option<String> {
    if image.is_empty() {
        return Some("empty file: not an image".into());
    }
    match crate::decode::Format::sniff(image) {
        Some(_) => None,
        None => Some(format!(
            "not a JPEG, PNG, WebP, BMP, TIFF or GIF (starts with {:02x?})",
            &image[..image.len().min(8)]
        )),
    }
}

/// What [`ShardWriter::write_dataset`] wrote.
#[derive(Debug)]
pub struct Converted {
    /// The shards, in order.
    pub shards: Vec<PathBuf>,
    /// The class list beside them (none for a dataset without classes).
    pub classes: Option<PathBuf>,
    /// Samples written.
    pub samples: u64,
    /// Image and mask bytes written.
    pub bytes: u64,
    /// The samples left out (their index in the dataset's samples) and why.
    pub unreadable: Vec<(usize, ReadError)>,
    /// What transcoding did to the JPEGs (all zero without
    /// [`ShardWriter::with_transcode`]).
    pub transcode: TranscodeCounts,
}

/// Writes samples into shards of about `shard_bytes` each (`<prefix>-00000.tfrecord` or
/// `.tar` in `dir`), each indexed when it is closed, and the class list beside them. Samples
/// keep their order. See the module docs for the layout.
#[derive(Debug)]
pub struct ShardWriter {
    format: ShardFormat,
    dir: PathBuf,
    prefix: String,
    shard_bytes: u64,
    /// The shard being written, once a sample is added to it.
    open: Option<Open>,
    in_shard: usize,
    written: Vec<PathBuf>,
    keys: ExampleKeys,
    classes: Vec<String>,
    /// The ids of the paths added so far: a path added twice is refused.
    ids: HashSet<u64>,
    /// Transcode JPEGs to baseline with restart markers, with these options.
    transcode: Option<TranscodeOptions>,
    /// What transcoding did so far.
    counts: TranscodeCounts,
    /// Folder output: images under `images/`, masks under `masks/`.
    masks_apart: bool,
}

impl ShardWriter {
    /// A writer into `dir` (created if missing). `prefix` names the files: it must be
    /// neither empty nor hold a path separator. A shard is closed once it holds
    /// `shard_bytes` (at least 1; `u64::MAX`: one shard): shards are streamed to the disk,
    /// so memory holds about a sample at a time, whatever the shard size.
    pub fn new(format: ShardFormat, dir: &Path, prefix: &str, shard_bytes: u64) -> Result<Self> {
        if prefix.is_empty() || prefix.contains(['/', '\\']) {
            return Err(Error::config(
                "prefix",
                format!("{prefix:?}: shard names need a prefix without path separators"),
            ));
        }
        if shard_bytes == 0 {
            return Err(Error::config(
                "shard size",
                "0 bytes: a shard holds at least one sample, so at least 1 byte",
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        Ok(ShardWriter {
            format,
            dir: dir.to_path_buf(),
            prefix: prefix.into(),
            shard_bytes,
            open: None,
            in_shard: 0,
            written: Vec::new(),
            keys: ExampleKeys::default(),
            classes: Vec::new(),
            ids: HashSet::new(),
            transcode: None,
            counts: TranscodeCounts::default(),
            masks_apart: false,
        })
    }

    /// Transcodes each JPEG added, losslessly, to one baseline scan with restart markers
    /// ([`add_restarts`]: the same pixels); a JPEG it keeps as it is, and every other
    /// image, is written byte for byte. `None` (the default): every image byte for byte.
    pub fn with_transcode(mut self, opts: Option<TranscodeOptions>) -> Self {
        self.transcode = opts;
        self
    }

    /// Folder output with masks: images under `images/`, masks under `masks/` (see the
    /// module docs). [`ShardWriter::write_dataset`] sets it when the dataset has masks; a
    /// folder writer without it refuses a mask.
    pub fn with_masks_apart(mut self) -> Self {
        self.masks_apart = true;
        self
    }

    /// What transcoding did so far.
    pub fn transcode_counts(&self) -> &TranscodeCounts {
        &self.counts
    }

    /// The dataset's class names, by class id ([`crate::Dataset::classes`]): each labelled
    /// sample records its class's name, and [`ShardWriter::finish`] writes the list beside
    /// the shards ([`ShardWriter::classes_path`]).
    pub fn with_classes(mut self, classes: Vec<String>) -> Self {
        self.classes = classes;
        self
    }

    /// Where [`ShardWriter::finish`] writes the class list, if the writer has classes
    /// (never for a folder: its class folders are the list).
    pub fn classes_path(&self) -> Option<PathBuf> {
        (!self.classes.is_empty() && self.format != ShardFormat::Folder)
            .then(|| self.dir.join(classes_file_name(&self.prefix)))
    }

    /// Where a folder writer puts the images.
    fn image_root(&self) -> PathBuf {
        if self.masks_apart {
            self.dir.join("images")
        } else {
            self.dir.clone()
        }
    }

    /// Adds a sample: its path in its dataset (`name`, [`crate::Sample::path`]: recorded in
    /// the shard as the sample's path when read back, and the tar key's suffix), its
    /// encoded image, label and mask. A path added before, or one that is empty or longer
    /// than 4096 bytes, is refused, as is a label without a class name when the writer has
    /// classes, and an image that is not in a format stoker decodes (it would not be read
    /// back).
    pub fn add(
        &mut self,
        name: &str,
        image: &[u8],
        label: Option<u32>,
        mask: Option<&[u8]>,
    ) -> Result<()> {
        if name.is_empty() || name.len() as u64 > MAX_RECORDED || name.contains('\0') {
            return Err(Error::dataset(format!(
                "sample path {:?}: shards record paths of 1 to {MAX_RECORDED} bytes without NUL",
                name.chars().take(80).collect::<String>()
            )));
        }
        let class = match label {
            Some(l) if !self.classes.is_empty() => {
                let class = self.classes.get(l as usize).ok_or_else(|| {
                    Error::dataset(format!(
                        "{name:?}: label {l}, but the dataset has {} classes",
                        self.classes.len()
                    ))
                })?;
                Some(class.as_str())
            }
            _ => None,
        };
        if let Some(why) = not_an_image(image) {
            return Err(Error::dataset(format!("{name:?}: {why}")));
        }
        let rel = match self.format {
            ShardFormat::Folder => {
                if mask.is_some() && !self.masks_apart {
                    return Err(Error::config(
                        "masks",
                        format!("{name:?}: a folder writer takes masks after with_masks_apart"),
                    ));
                }
                Some(relative_inside(name)?)
            }
            _ => None,
        };
        if !self.ids.insert(sample_id(name)) {
            return Err(Error::dataset(format!(
                "{name:?} added twice (or its id collides with another path's)"
            )));
        }
        let transcoded = self.transcode.and_then(|opts| {
            if crate::decode::Format::sniff(image) != Some(crate::decode::Format::Jpeg) {
                return None;
            }
            let t0 = std::time::Instant::now();
            let outcome = add_restarts(image, &opts);
            self.counts.record(image.len(), &outcome, t0.elapsed());
            match outcome {
                Transcoded::Written { bytes, .. } => Some(bytes),
                Transcoded::Kept(_) => None,
            }
        });
        let image = transcoded.as_deref().unwrap_or(image);
        if let Some(rel) = rel {
            let root = self.image_root();
            write_file(&root.join(&rel), image)?;
            if let Some(m) = mask {
                let mut at = self.dir.join("masks").join(&rel);
                at.set_extension(image_ext(m));
                write_file(&at, m)?;
            }
            self.in_shard += 1;
            return Ok(());
        }
        let path = self.shard_path();
        let open = match &mut self.open {
            Some(open) => open,
            slot => slot.insert(Open::create(self.format, path)?),
        };
        let at = &open.partial.path;
        match &mut open.body {
            Body::TfRecord(file) => {
                let mut bytes: Vec<(&str, &[u8])> = vec![
                    (&self.keys.image, image),
                    ("image/filename", name.as_bytes()),
                    (&self.keys.path, name.as_bytes()),
                    ("image/format", image_ext(image).as_bytes()),
                ];
                if let Some(c) = class {
                    bytes.push((&self.keys.class_text, c.as_bytes()));
                }
                if let Some(m) = mask {
                    bytes.push((&self.keys.mask, m));
                }
                let ints: Vec<(&str, i64)> = label
                    .map(|l| vec![(self.keys.label.as_str(), i64::from(l))])
                    .unwrap_or_default();
                let mut record = Vec::new();
                frame_record(&encode_example(&bytes, &ints), &mut record);
                file.write_all(&record).map_err(|e| Error::io(at, e))?;
            }
            Body::Tar(tar) => {
                // WebDataset keys hold no dots (the first dot starts the extension).
                let stem: String = name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .take(60)
                    .collect();
                let key = format!("{:06}_{stem}", self.in_shard);
                let io = |e| Error::io(at, e);
                tar_member(tar, &format!("{key}.{}", image_ext(image)), image).map_err(io)?;
                if let Some(l) = label {
                    tar_member(tar, &format!("{key}.cls"), l.to_string().as_bytes()).map_err(io)?;
                }
                if let Some(c) = class {
                    tar_member(tar, &format!("{key}.cls.txt"), c.as_bytes()).map_err(io)?;
                }
                tar_member(tar, &format!("{key}.path.txt"), name.as_bytes()).map_err(io)?;
                if let Some(m) = mask {
                    tar_member(tar, &format!("{key}.mask.png"), m).map_err(io)?;
                }
            }
        }
        self.in_shard += 1;
        if open.len() >= self.shard_bytes {
            self.flush()?;
        }
        Ok(())
    }

    /// The final name of the shard being written (or the next one).
    fn shard_path(&self) -> PathBuf {
        let ext = match self.format {
            ShardFormat::TfRecord => "tfrecord",
            ShardFormat::Tar | ShardFormat::Folder => "tar",
        };
        self.dir
            .join(format!("{}-{:05}.{ext}", self.prefix, self.written.len()))
    }

    /// Closes the open shard, if a sample was added to it: completes it, flushes it to the
    /// disk, renames it to its final name ([`Open::close`]) and indexes it.
    fn flush(&mut self) -> Result<()> {
        self.in_shard = 0;
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let kind = match self.format {
            ShardFormat::TfRecord => Kind::TfRecord(&self.keys),
            ShardFormat::Tar | ShardFormat::Folder => Kind::Tar,
        };
        let path = open.close()?;
        // The index is built by reading the shard back from its start, as a reader that
        // finds no sidecar would: one sequential pass through a small buffer.
        index(&path, kind)?;
        self.written.push(path);
        Ok(())
    }

    /// Writes every sample of `data` (its image and mask bytes, its label, at its path)
    /// with the dataset's classes ([`ShardWriter::with_classes`]), then finishes
    /// ([`ShardWriter::finish`]). A sample whose bytes cannot be read (or are more than
    /// the pipeline's byte limit, [`crate::Limits`]), or are not an image in a format
    /// stoker decodes, is left out and reported in [`Converted::unreadable`]: written plus
    /// reported is the dataset's size. `progress` is called after each sample. This is
    /// `stoker convert`.
    pub fn write_dataset(
        mut self,
        data: &Dataset,
        mut progress: impl FnMut(&Sample),
    ) -> Result<Converted> {
        self.classes = data.classes().to_vec();
        if self.format == ShardFormat::Folder && data.samples().iter().any(|s| s.mask.is_some()) {
            self.masks_apart = true;
        }
        let classes = self.classes_path();
        let (mut samples, mut bytes) = (0u64, 0u64);
        let mut unreadable = Vec::new();
        // The pipeline's readers' byte limit: a sample it would refuse is not copied.
        let max_bytes = crate::decode::Limits::default().max_bytes;
        for (i, s) in data.samples().iter().enumerate() {
            let read = s.location.read(max_bytes).and_then(|image| {
                let mask = match &s.mask {
                    Some(m) => Some(m.read(max_bytes)?),
                    None => None,
                };
                Ok((image, mask))
            });
            // What would be written and then not read back is reported instead.
            let read = read.and_then(|(image, mask)| match not_an_image(&image) {
                Some(why) => Err(ReadError::Refused {
                    kind: crate::error::SampleErrorKind::Decode,
                    reason: why.into(),
                }),
                None => Ok((image, mask)),
            });
            match read {
                Ok((image, mask)) => {
                    let before = self.counts.bytes_after;
                    let jpegs = self.counts.jpegs;
                    self.add(&s.path, &image, s.label, mask.as_deref())?;
                    samples += 1;
                    // A transcoded JPEG's size is what was written.
                    let image_len = if self.counts.jpegs > jpegs {
                        self.counts.bytes_after - before
                    } else {
                        image.len() as u64
                    };
                    bytes += image_len + mask.as_ref().map_or(0, Vec::len) as u64;
                }
                Err(e) => unreadable.push((i, e)),
            }
            progress(s);
        }
        let transcode = self.counts.clone();
        Ok(Converted {
            shards: self.finish()?,
            classes,
            samples,
            bytes,
            unreadable,
            transcode,
        })
    }

    /// Writes the last shard and the class list, and returns every shard written.
    /// (For a folder: no shards; every class gets its folder, so that a class without
    /// images is listed too.)
    pub fn finish(mut self) -> Result<Vec<PathBuf>> {
        self.flush()?;
        if self.format == ShardFormat::Folder {
            let root = self.image_root();
            for class in &self.classes {
                if let Ok(rel) = relative_inside(class) {
                    let d = root.join(rel);
                    std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
                }
            }
        }
        if let Some(path) = self.classes_path() {
            let list = ClassList {
                format: CLASSES_FORMAT.into(),
                classes: std::mem::take(&mut self.classes),
            };
            let text = serde_json::to_string_pretty(&list).map_err(|e| Error::Json {
                what: path.display().to_string(),
                source: e,
            })?;
            std::fs::write(&path, text + "\n").map_err(|e| Error::io(&path, e))?;
        }
        Ok(std::mem::take(&mut self.written))
    }
}

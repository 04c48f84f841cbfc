//! `stoker convert`: export a folder dataset (images, labels, masks) to TFRecord or
//! WebDataset tar shards with their indexes, or to a plain folder, so a dataset is
//! exported once and trained on many times. The shards keep each sample's path and the
//! class names (the layout: `stoker::source::shards::write`), so a sample has the same id,
//! split side and augmentations in the shards as in the folder. By default each JPEG that
//! can be is transcoded losslessly to one baseline scan with restart markers (the same
//! pixels; what the GPU decodes in parallel): `--restarts off` copies every file byte for
//! byte.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use stoker::decode::jpeg::{Restart, TranscodeCounts, TranscodeOptions};
use stoker::source::shards::{ShardFormat, ShardWriter};

use crate::args::ArgError;
use crate::common::{self, fail, kv, progress, Cause, Ctx, Failure, Report, Res};

/// What `stoker convert --help` adds after the options: the layout it writes.
const LAYOUT: &str = "\
Layout written to OUT (tfrecord, tar):
  PREFIX-00000.EXT, PREFIX-00001.EXT, ...  the shards (EXT: tfrecord or tar), each closed
                                          once it holds SHARD_SIZE, samples in path order;
                                          each streamed to SHARD.partial (memory: a few
                                          samples) and renamed once complete
  SHARD.stoker-index                      each shard's index (a cache, rebuilt if missing)
  PREFIX.classes.json                     the class names by class id:
                                          {\"format\": \"stoker-classes/1\", \"classes\": [...]}

Every sample records its path in the dataset (e.g. cat/001.jpg). Reading the shards back,
that is the sample's path and so its id: a split saved on the folder loads on the shards,
and a sample gets the same augmentations from either. The classes are the folder's.

The image file: with --restarts off, byte for byte. With --restarts auto (the default),
a JPEG is transcoded losslessly (the same DCT coefficients, so the same pixels) to one
baseline scan with optimised Huffman tables and a restart marker every
--restart-interval, its APPn and COM segments (EXIF, ICC, JFIF, Adobe) copied; a JPEG
that cannot be (12-bit, lossless, damaged, progressive with incomplete refinement,
already restarted often enough, ...) and every other image is copied byte for byte. The
report counts each.

TFRecord: one tf.train.Example per record (no compression) with
  image/encoded (bytes)     the image file
  image/format (bytes)      jpg, png, webp, bmp or bin
  image/filename (bytes)    the sample's path
  stoker/path (bytes)       the sample's path (what stoker reads back)
  image/class/label (int64) the class id (labelled samples)
  image/class/text (bytes)  the class name (labelled samples)
  image/segmentation/class/encoded (bytes)  the mask file (with --masks)

WebDataset tar: sample key NNNNNN_<path> (its number in the shard, then its path with
every character other than A-Za-z0-9_- made _, at most 60), members
  KEY.jpg (or png, webp, bmp)  the image file
  KEY.cls                      the class id, ASCII decimal (labelled samples)
  KEY.cls.txt                  the class name, UTF-8 (labelled samples)
  KEY.path.txt                 the sample's path, UTF-8
  KEY.mask.png                 the mask file (with --masks)

Folder (not shards; --shard-size and --prefix unused): each image at its path,
OUT/cat/001.jpg, every class a folder (an empty one too), so stoker's image-folder
listing gives the same samples and classes. With --masks: the images under OUT/images/,
each mask under OUT/masks/ in its image's folder with its image's stem
(OUT/masks/cat/001.png), read back with --masks OUT/masks.";

#[derive(Debug, Args)]
#[command(after_long_help = LAYOUT)]
pub struct ConvertArgs {
    /// The dataset: an image folder (class sub-folders or flat) or a file list.
    dir: PathBuf,
    /// Label masks paired by file stem from this folder.
    #[arg(long)]
    masks: Option<PathBuf>,
    /// Output: tfrecord or tar (shards), or folder (plain files).
    #[arg(long, value_parser = parse_format)]
    to: ShardFormat,
    /// JPEG restart markers: auto (transcode each JPEG that can be, losslessly, keep the
    /// rest) or off (every file byte for byte).
    #[arg(long, default_value = "auto", value_parser = parse_restarts)]
    restarts: Restarts,
    /// With --restarts auto: a restart marker every MCU row (row), every N rows (rows:N),
    /// N per row (per-row:N) or every N MCUs (mcus:N), or none (off: only the tables are
    /// optimised and the scans merged).
    #[arg(long, default_value = "row", value_parser = Restart::parse)]
    restart_interval: Restart,
    /// With --restarts auto: do not read each transcoded file back to check that its
    /// coefficients are the original's (the check costs two more entropy decodes a file).
    #[arg(long)]
    no_verify: bool,
    /// Bytes per shard (a shard closes once it holds this much), e.g. 256MiB, 1GB: from 1
    /// byte (a sample per shard) to 1TiB. Shards are streamed to the disk: memory holds a
    /// few samples, whatever the size.
    #[arg(long, default_value = "256MiB", value_parser = parse_shard_size)]
    shard_size: u64,
    /// Shard file names: PREFIX-00000.tfrecord, ...
    #[arg(long, default_value = "shard")]
    prefix: String,
    /// Where to write the shards: a folder, or a folder in an object store
    /// (`s3://bucket/prefix/`, feature `object-store`: written to a temporary folder, then
    /// each file uploaded in parts, complete or not at all).
    #[arg(long)]
    out: PathBuf,
}

/// The JSON object of `stoker convert`.
#[derive(Debug, Serialize)]
struct ConvertReport {
    out: String,
    /// `tfrecord`, `tar` or `folder`.
    format: &'static str,
    /// `auto` (JPEGs transcoded with restart markers where they can be) or `off`.
    restarts: &'static str,
    /// The restart interval asked (`row`, `rows:N`, `per-row:N`, `mcus:N`, `off`).
    restart_interval: String,
    /// What transcoding did to the JPEGs: `jpegs`, `transcoded`, `kept` (by reason),
    /// `bytes_before`, `bytes_after`, `seconds` (all zero with `--restarts off`).
    jpegs: TranscodeCounts,
    /// Samples written.
    samples: u64,
    /// Image and mask bytes written.
    bytes: u64,
    shards: Vec<String>,
    /// The class list written beside the shards (none for a dataset without classes).
    classes: Option<String>,
    /// Samples that could not be read (not written).
    errors: Vec<Failure>,
    /// Files that listing left out (not samples), each with the reason: a folder that
    /// could not be read, a FIFO, ...
    skipped: Vec<Failure>,
}

impl ConvertReport {
    fn text(&self) -> String {
        let mut text = kv(&[
            ("out", self.out.clone()),
            ("samples", self.samples.to_string()),
            ("shards", self.shards.len().to_string()),
            ("bytes", self.bytes.to_string()),
        ]);
        if self.restarts == "auto" {
            let j = &self.jpegs;
            let kept: Vec<String> = j.kept.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let ratio = if j.bytes_before > 0 {
                j.bytes_after as f64 / j.bytes_before as f64
            } else {
                1.0
            };
            text.push_str(&kv(&[
                (
                    "jpegs",
                    format!(
                        "{} transcoded ({}), {} kept{}",
                        j.transcoded,
                        self.restart_interval,
                        j.jpegs - j.transcoded,
                        if kept.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", kept.join(", "))
                        }
                    ),
                ),
                (
                    "jpeg bytes",
                    format!("{} -> {} ({ratio:.3}x)", j.bytes_before, j.bytes_after),
                ),
            ]));
        }
        for e in &self.errors {
            text.push_str(&format!("unreadable: {}: {}\n", e.path, e.reason));
        }
        for k in &self.skipped {
            text.push_str(&format!("left out at listing: {}: {}\n", k.path, k.reason));
        }
        text
    }
}

fn parse_format(s: &str) -> Result<ShardFormat, ArgError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "tfrecord" => Ok(ShardFormat::TfRecord),
        "tar" | "webdataset" => Ok(ShardFormat::Tar),
        "folder" | "dir" => Ok(ShardFormat::Folder),
        other => Err(ArgError::UnknownFormat(other.to_string())),
    }
}

/// `--restarts`: transcode the JPEGs that can be, or copy every file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restarts {
    Auto,
    Off,
}

fn parse_restarts(s: &str) -> Result<Restarts, ArgError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "auto" | "on" => Ok(Restarts::Auto),
        "off" | "none" => Ok(Restarts::Off),
        other => Err(ArgError::UnknownRestarts(other.to_string())),
    }
}

/// The largest `--shard-size`: shards are streamed to the disk, so a larger one would
/// not run out of memory, but a shard of more than a terabyte is no shard (a reader
/// indexes and shuffles shard by shard): a mistyped unit, not a plan.
const MAX_SHARD_SIZE: u64 = 1 << 40;

/// `--shard-size`: [`parse_size`], from 1 byte (a sample per shard) to
/// [`MAX_SHARD_SIZE`].
fn parse_shard_size(s: &str) -> Result<u64, ArgError> {
    let v = parse_size(s)?;
    if v > MAX_SHARD_SIZE {
        return Err(ArgError::ShardTooLarge {
            value: s.to_string(),
            bytes: v,
            max: MAX_SHARD_SIZE,
        });
    }
    Ok(v)
}

/// `256MiB`, `1GB`, `4096`, ...: bytes (a whole number of them, at least 1).
pub fn parse_size(s: &str) -> Result<u64, ArgError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|source| ArgError::BadSize {
        value: s.to_string(),
        source,
    })?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" => 1e12,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(ArgError::UnknownUnit {
                unit: other.to_string(),
                value: s.to_string(),
            })
        }
    };
    let v = (n * mult).round();
    if !(1.0..=1e15).contains(&v) {
        return Err(ArgError::SizeOutOfRange(s.to_string()));
    }
    Ok(v as u64)
}

pub fn run(ctx: Ctx, a: &ConvertArgs) -> Res<Report> {
    let mut data = common::open_dataset(&a.dir)?;
    if let Some(m) = &a.masks {
        data = data.with_masks(m)?;
    }
    let transcode = (a.restarts == Restarts::Auto).then(|| TranscodeOptions {
        restart: a.restart_interval,
        verify: !a.no_verify,
        ..TranscodeOptions::default()
    });
    // Into a store (a URL): written into a local folder first, then uploaded.
    let remote = stoker::source::remote::is_url(&a.out);
    let staging =
        remote.then(|| std::env::temp_dir().join(format!("stoker-convert-{}", std::process::id())));
    let local_out = staging.clone().unwrap_or_else(|| a.out.clone());
    let w = ShardWriter::new(a.to, &local_out, &a.prefix, a.shard_size)
        .map_err(writing)?
        .with_transcode(transcode);
    let pb = progress(ctx, data.len() as u64, "converting");
    let written = w.write_dataset(&data, |_| pb.inc(1)).map_err(writing);
    pb.finish_and_clear();
    let done = match (written, &staging) {
        (Ok(done), Some(dir)) => {
            let up = upload(done, dir, &a.out);
            let _ = std::fs::remove_dir_all(dir);
            up?
        }
        (Ok(done), None) => done,
        (Err(e), dir) => {
            if let Some(dir) = dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            return Err(e);
        }
    };
    let errors = done
        .unreadable
        .iter()
        .filter_map(|(i, reason)| {
            let s = data.samples().get(*i)?;
            Some(Failure::new(common::sample_display(s), reason.to_string()))
        })
        .collect();
    let r = ConvertReport {
        out: a.out.display().to_string(),
        format: a.to.name(),
        restarts: match a.restarts {
            Restarts::Auto => "auto",
            Restarts::Off => "off",
        },
        restart_interval: a.restart_interval.to_string(),
        jpegs: done.transcode.clone(),
        samples: done.samples,
        bytes: done.bytes,
        shards: done
            .shards
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        classes: done.classes.map(|p| p.display().to_string()),
        errors,
        skipped: Failure::skipped_at_listing(&data),
    };
    // Some samples unreadable: partly done; all of them (or none listed): nothing could
    // be read.
    let failures = r.errors.len();
    Ok(Report::new(&r, r.text())?.failed_inputs(failures, data.len(), "sample(s)"))
}

/// Uploads what the writer wrote into `dir` to the store folder `out` (a URL): each
/// file in parts, complete or not at all. The shards (or files) first, then each sidecar
/// index stamped with its shard as the store has it (size and modification time), then
/// the class list. Returns `done` with the files named by their URLs.
fn upload(
    mut done: stoker::source::shards::Converted,
    dir: &std::path::Path,
    out: &std::path::Path,
) -> Res<stoker::source::shards::Converted> {
    use std::path::{Path, PathBuf};
    use stoker::source::remote;
    use stoker::source::shards::{index_path, restamp_index};
    let base = out.to_string_lossy().trim_end_matches('/').to_string();
    let output = |what: String| fail(Cause::Output, what);
    let url_of = |local: &Path| -> String {
        let rel = local.strip_prefix(dir).unwrap_or(local);
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        format!("{base}/{}", parts.join("/"))
    };
    let put = |local: &Path| -> Res<String> {
        let url = url_of(local);
        remote::upload(local, &url).map_err(|e| output(e.to_string()))?;
        Ok(url)
    };
    // Every file written, sidecars and the class list aside.
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| output(format!("{}: {e}", d.display())))?;
        for entry in rd.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.is_file() {
                files.push(p);
            }
        }
    }
    files.sort();
    let is_side = |p: &Path| p.to_string_lossy().ends_with(".stoker-index");
    let is_classes = |p: &Path| done.classes.as_deref() == Some(p);
    for f in files.iter().filter(|f| !is_side(f) && !is_classes(f)) {
        let url = put(f)?;
        let side = index_path(f);
        if let Ok(text) = std::fs::read(&side) {
            let info = remote::stat(&url).map_err(|e| output(e.to_string()))?;
            if let Some(stamped) = restamp_index(&text, info.size, info.mtime_ns) {
                std::fs::write(&side, stamped)
                    .map_err(|e| output(format!("{}: {e}", side.display())))?;
                put(&side)?;
            }
        }
    }
    if let Some(c) = &done.classes {
        done.classes = Some(PathBuf::from(put(c)?));
    }
    done.shards = done
        .shards
        .iter()
        .map(|s| PathBuf::from(url_of(s)))
        .collect();
    Ok(done)
}

/// An error of the shard writer: a failed write or folder creation is an `Output` error
/// (the shards could not be written), anything else keeps its category.
fn writing(e: stoker::Error) -> Box<dyn std::error::Error> {
    match e {
        stoker::Error::Io { .. } => fail(Cause::Output, e.to_string()),
        e => e.into(),
    }
}

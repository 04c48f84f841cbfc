//! `stoker convert`: export a folder dataset (images, labels, masks) to TFRecord or
//! WebDataset tar shards with their indexes, so a dataset is exported once and trained on
//! many times. The shards keep each sample's path and the class names (the layout:
//! `stoker::source::shards::write`), so a sample has the same id, split side and
//! augmentations in the shards as in the folder.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use stoker::source::shards::{ShardFormat, ShardWriter};

use crate::common::{self, fail, kv, progress, Cause, Ctx, Failure, Report, Res};

/// What `stoker convert --help` adds after the options: the layout it writes.
const LAYOUT: &str = "\
Layout written to OUT:
  PREFIX-00000.EXT, PREFIX-00001.EXT, ...  the shards (EXT: tfrecord or tar), each closed
                                          once it holds SHARD_SIZE, samples in path order
  SHARD.stoker-index                      each shard's index (a cache, rebuilt if missing)
  PREFIX.classes.json                     the class names by class id:
                                          {\"format\": \"stoker-classes/1\", \"classes\": [...]}

Every sample records its path in the dataset (e.g. cat/001.jpg). Reading the shards back,
that is the sample's path and so its id: a split saved on the folder loads on the shards,
and a sample gets the same augmentations from either. The classes are the folder's.

TFRecord: one tf.train.Example per record (no compression) with
  image/encoded (bytes)     the image file, byte for byte
  image/format (bytes)      jpg, png, webp, bmp or bin
  image/filename (bytes)    the sample's path
  stoker/path (bytes)       the sample's path (what stoker reads back)
  image/class/label (int64) the class id (labelled samples)
  image/class/text (bytes)  the class name (labelled samples)
  image/segmentation/class/encoded (bytes)  the mask file (with --masks)

WebDataset tar: sample key NNNNNN_<path> (its number in the shard, then its path with
every character other than A-Za-z0-9_- made _, at most 60), members
  KEY.jpg (or png, webp, bmp)  the image file, byte for byte
  KEY.cls                      the class id, ASCII decimal (labelled samples)
  KEY.cls.txt                  the class name, UTF-8 (labelled samples)
  KEY.path.txt                 the sample's path, UTF-8
  KEY.mask.png                 the mask file (with --masks)";

#[derive(Debug, Args)]
#[command(after_long_help = LAYOUT)]
pub struct ConvertArgs {
    /// The dataset: an image folder (class sub-folders or flat) or a file list.
    dir: PathBuf,
    /// Label masks paired by file stem from this folder.
    #[arg(long)]
    masks: Option<PathBuf>,
    /// Shard format: tfrecord or tar.
    #[arg(long, value_parser = parse_format)]
    to: ShardFormat,
    /// Bytes per shard (a shard closes once it holds this much), e.g. 256MiB, 1GB.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    shard_size: u64,
    /// Shard file names: PREFIX-00000.tfrecord, ...
    #[arg(long, default_value = "shard")]
    prefix: String,
    /// Where to write the shards.
    #[arg(long)]
    out: PathBuf,
}

/// The JSON object of `stoker convert`.
#[derive(Debug, Serialize)]
struct ConvertReport {
    out: String,
    /// `tfrecord` or `tar`.
    format: &'static str,
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
        for e in &self.errors {
            text.push_str(&format!("unreadable: {}: {}\n", e.path, e.reason));
        }
        for k in &self.skipped {
            text.push_str(&format!("left out at listing: {}: {}\n", k.path, k.reason));
        }
        text
    }
}

fn parse_format(s: &str) -> Result<ShardFormat, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "tfrecord" => Ok(ShardFormat::TfRecord),
        "tar" | "webdataset" => Ok(ShardFormat::Tar),
        other => Err(format!(
            "unknown shard format {other:?} (expected tfrecord or tar)"
        )),
    }
}

/// `256MiB`, `1GB`, `4096`, ...: bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad size {s:?}"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("unknown size unit {other:?} in {s:?}")),
    };
    let v = n * mult;
    if !(1.0..=1e15).contains(&v) {
        return Err(format!("size {s:?} out of range"));
    }
    Ok(v as u64)
}

pub fn run(ctx: Ctx, a: &ConvertArgs) -> Res<Report> {
    let mut data = common::open_dataset(&a.dir)?;
    if let Some(m) = &a.masks {
        data = data.with_masks(m)?;
    }
    let w = ShardWriter::new(a.to, &a.out, &a.prefix, a.shard_size).map_err(writing)?;
    let pb = progress(ctx, data.len() as u64, "converting");
    let done = w.write_dataset(&data, |_| pb.inc(1)).map_err(writing)?;
    pb.finish_and_clear();
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
        format: match a.to {
            ShardFormat::TfRecord => "tfrecord",
            ShardFormat::Tar => "tar",
        },
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

/// An error of the shard writer: a failed write or folder creation is an `Output` error
/// (the shards could not be written), anything else keeps its category.
fn writing(e: stoker::Error) -> Box<dyn std::error::Error> {
    match e {
        stoker::Error::Io { .. } => fail(Cause::Output, e.to_string()),
        e => e.into(),
    }
}

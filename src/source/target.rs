//! Per-sample targets beyond one class id ([`Targets`]: several class ids, a vector,
//! boxes with class ids, keypoints), and the files that carry them: manifests (CSV and
//! JSON Lines, [`manifest`]) and COCO-style JSON (`coco`).
//!
//! Coordinates are pixels of the image as stoker decodes it (after its EXIF orientation
//! when orientation is on), corner-based: the image spans `[0, width] x [0, height]`, so
//! pixel `(i, j)` covers `[i, i + 1] x [j, j + 1]`, as torchvision's boxes do. Boxes are
//! `[x0, y0, x1, y1]` (torchvision's XYXY); COCO's `[x, y, w, h]` is converted on reading.
//! The pipeline moves boxes and keypoints with each sample's plan
//! ([`crate::augment::geometry`]).
#![doc(hidden)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::{
    checked_label, numbered_classes, sample_id, Dataset, ListingOptions, Location, Sample,
    MAX_LABEL,
};
use crate::error::{Error, Result, SampleErrorKind};

/// Most boxes, keypoints, class ids or values one sample may carry: a bound on what a
/// manifest line can make stoker allocate per sample and per batch.
pub const MAX_TARGETS: usize = 4096;

/// The largest manifest or annotation file stoker reads (1 GiB: tens of millions of
/// records).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// A manifest's text, bounded by [`MAX_MANIFEST_BYTES`] (and opened so a FIFO cannot
/// hang the read).
pub(crate) fn read_text(path: &Path) -> Result<String> {
    let mut buf = Vec::new();
    super::fsio::read_bounded(path, MAX_MANIFEST_BYTES, &mut buf)
        .map_err(|e| Error::source_at(path, e.to_string()))?;
    String::from_utf8(buf).map_err(|_| Error::source_at(path, "not UTF-8 text"))
}

/// A box `[x0, y0, x1, y1]` in pixels (corner coordinates), with a class id.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct BoundingBox {
    /// Left edge.
    pub x0: f32,
    /// Top edge.
    pub y0: f32,
    /// Right edge.
    pub x1: f32,
    /// Bottom edge.
    pub y1: f32,
    /// Class id.
    pub class: u32,
}

/// A keypoint in pixels (corner coordinates), with its visibility and the object (box)
/// it belongs to.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Keypoint {
    /// x.
    pub x: f32,
    /// y.
    pub y: f32,
    /// COCO's flag: 0 not labelled, 1 labelled but hidden, 2 visible. A keypoint the
    /// sample's geometry moves outside the output gets 0.
    pub visibility: u8,
    /// Index of the object it belongs to (COCO: the annotation's order within the image;
    /// 0 for a manifest's keypoints).
    pub object: u32,
}

/// What a sample carries besides its class id and mask. Empty lists mean none.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Targets {
    /// Several class ids (multi-label classification).
    pub classes: Vec<u32>,
    /// A vector of values (regression).
    pub values: Vec<f32>,
    /// Boxes with class ids (detection).
    pub boxes: Vec<BoundingBox>,
    /// Keypoints.
    pub keypoints: Vec<Keypoint>,
}

// Equality by bit pattern, so that it is an equivalence (and `Sample` keeps `Eq`).
impl PartialEq for BoundingBox {
    fn eq(&self, o: &Self) -> bool {
        [self.x0, self.y0, self.x1, self.y1].map(f32::to_bits)
            == [o.x0, o.y0, o.x1, o.y1].map(f32::to_bits)
            && self.class == o.class
    }
}
impl Eq for BoundingBox {}

impl PartialEq for Keypoint {
    fn eq(&self, o: &Self) -> bool {
        [self.x, self.y].map(f32::to_bits) == [o.x, o.y].map(f32::to_bits)
            && (self.visibility, self.object) == (o.visibility, o.object)
    }
}
impl Eq for Keypoint {}

impl PartialEq for Targets {
    fn eq(&self, o: &Self) -> bool {
        self.classes == o.classes
            && self.values.len() == o.values.len()
            && self
                .values
                .iter()
                .zip(&o.values)
                .all(|(a, b)| a.to_bits() == b.to_bits())
            && self.boxes == o.boxes
            && self.keypoints == o.keypoints
    }
}
impl Eq for Targets {}

impl Targets {
    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
            && self.values.is_empty()
            && self.boxes.is_empty()
            && self.keypoints.is_empty()
    }
}

/// A problem with one record's targets: the sample is listed and reported every epoch
/// with this reason ([`SampleErrorKind::Label`]), never delivered with wrong targets.
/// The reason is a description of the rule the record breaks (a value out of range, a
/// list of the wrong shape); no lower-level error underlies it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TargetsError(String);

impl From<String> for TargetsError {
    fn from(why: String) -> Self {
        TargetsError(why)
    }
}

pub(crate) type Bad = TargetsError;

pub(crate) fn finite(v: &Value, what: &str) -> std::result::Result<f32, Bad> {
    let f = v
        .as_f64()
        .ok_or_else(|| format!("{what} {v} is not a number"))?;
    if !f.is_finite() || f.abs() > 1e9 {
        return Err(Bad::from(format!(
            "{what} {v} is not a finite coordinate or value"
        )));
    }
    Ok(f as f32)
}

pub(crate) fn class_id(v: &Value, what: &str) -> std::result::Result<u32, Bad> {
    v.as_u64()
        .and_then(|c| u32::try_from(c).ok())
        .filter(|&c| c <= MAX_LABEL)
        .ok_or_else(|| {
            Bad::from(format!(
                "{what} {v} is not a class id from 0 to {MAX_LABEL}"
            ))
        })
}

pub(crate) fn bounded<'a>(v: &'a Value, what: &str) -> std::result::Result<&'a [Value], Bad> {
    let a = v
        .as_array()
        .ok_or_else(|| format!("{what} is not a list"))?;
    if a.len() > MAX_TARGETS {
        return Err(Bad::from(format!(
            "{} {what}: more than {MAX_TARGETS} (stoker::source::target::MAX_TARGETS)",
            a.len()
        )));
    }
    Ok(a)
}

/// A box from `[x0, y0, x1, y1]` or `[x0, y0, x1, y1, class]`, checked.
fn xyxy(v: &Value, class: Option<u32>) -> std::result::Result<BoundingBox, Bad> {
    let a = bounded(v, "box")?;
    if !(a.len() == 4 || a.len() == 5) {
        return Err(Bad::from(format!(
            "box {v} is not [x0, y0, x1, y1] or [x0, y0, x1, y1, class]"
        )));
    }
    let c = |i: usize| finite(&a[i], "box coordinate");
    let b = BoundingBox {
        x0: c(0)?,
        y0: c(1)?,
        x1: c(2)?,
        y1: c(3)?,
        class: match a.get(4) {
            Some(k) => class_id(k, "box class")?,
            None => class.unwrap_or(0),
        },
    };
    if b.x1 < b.x0 || b.y1 < b.y0 {
        return Err(Bad::from(format!(
            "box {v} has x1 < x0 or y1 < y0 (boxes are [x0, y0, x1, y1])"
        )));
    }
    Ok(b)
}

pub(crate) fn keypoint(v: &Value, object: u32) -> std::result::Result<Keypoint, Bad> {
    let a = bounded(v, "keypoint")?;
    if !(a.len() == 2 || a.len() == 3) {
        return Err(Bad::from(format!(
            "keypoint {v} is not [x, y] or [x, y, visibility]"
        )));
    }
    let visibility = match a.get(2) {
        // A whole float too (2.0): a numeric column or a tool that writes floats.
        Some(f) => match f.as_u64().or_else(|| {
            f.as_f64()
                .filter(|x| x.fract() == 0.0 && *x >= 0.0)
                .map(|x| x as u64)
        }) {
            Some(k @ 0..=2) => k as u8,
            _ => {
                return Err(Bad::from(format!(
                    "keypoint visibility {f} is not 0, 1 or 2"
                )))
            }
        },
        None => 2,
    };
    Ok(Keypoint {
        x: finite(&a[0], "keypoint coordinate")?,
        y: finite(&a[1], "keypoint coordinate")?,
        visibility,
        object,
    })
}

/// The targets of one JSON record (a JSON Lines manifest line, a WebDataset `.json`):
/// `labels` (class ids), `values` (numbers), `boxes` (`[x0, y0, x1, y1]` or with the
/// class as a fifth number; `box_classes` gives classes for four-number boxes) and
/// `keypoints` (`[x, y]` or `[x, y, visibility]`). Other keys are ignored.
pub fn targets_from_json(record: &Value) -> std::result::Result<Option<Targets>, Bad> {
    let mut t = Targets::default();
    if let Some(v) = record.get("labels").filter(|v| !v.is_null()) {
        for c in bounded(v, "labels")? {
            t.classes.push(class_id(c, "label")?);
        }
    }
    if let Some(v) = record.get("values").filter(|v| !v.is_null()) {
        for x in bounded(v, "values")? {
            t.values.push(finite(x, "value")?);
        }
    }
    let box_classes = match record.get("box_classes").filter(|v| !v.is_null()) {
        Some(v) => Some(
            bounded(v, "box_classes")?
                .iter()
                .map(|c| class_id(c, "box class"))
                .collect::<std::result::Result<Vec<u32>, Bad>>()?,
        ),
        None => None,
    };
    if let Some(v) = record.get("boxes").filter(|v| !v.is_null()) {
        let boxes = bounded(v, "boxes")?;
        if let Some(c) = &box_classes {
            if c.len() != boxes.len() {
                return Err(Bad::from(format!(
                    "{} boxes but {} box_classes",
                    boxes.len(),
                    c.len()
                )));
            }
        }
        for (i, b) in boxes.iter().enumerate() {
            t.boxes.push(xyxy(b, box_classes.as_ref().map(|c| c[i]))?);
        }
    }
    if let Some(v) = record.get("keypoints").filter(|v| !v.is_null()) {
        for k in bounded(v, "keypoints")? {
            t.keypoints.push(keypoint(k, 0)?);
        }
    }
    Ok((!t.is_empty()).then_some(t))
}

/// A manifest record as a sample: the sample, its label where usable, and whether the
/// record has a label at all (a usable one or not).
struct Record {
    sample: Sample,
    label: Option<u32>,
    has_label: bool,
}

/// One record of a manifest as JSON: a JSON Lines line, or a CSV row turned into the same
/// keys (list columns split into numbers). Its `path` and `mask` are checked by `options`.
fn record_sample(
    root: &Path,
    record: &Value,
    at: &str,
    options: &ListingOptions,
) -> Result<Record> {
    let path = record
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| Error::dataset(format!("{at}: no \"path\"")))?;
    let outside = |why: super::listing::OutsideRoot| Error::dataset(format!("{at}: {why}"));
    options
        .check_path(path, "the manifest's folder")
        .map_err(outside)?;
    let rel = path.replace('\\', "/");
    let file = root.join(path);
    let mut refused = None;
    let label_value = record.get("label").filter(|v| !v.is_null());
    let label = match label_value {
        None => None,
        Some(v) => match v.as_i64().map(i128::from) {
            Some(n) => match checked_label(n, &v.to_string(), at) {
                Ok(l) => Some(l),
                Err(r) => {
                    refused = Some(r);
                    None
                }
            },
            None => {
                refused = Some(Location::Refused {
                    kind: SampleErrorKind::Label,
                    reason: format!("{at}: label {v} is not a class id").into(),
                });
                None
            }
        },
    };
    let targets = match targets_from_json(record) {
        Ok(t) => t,
        Err(why) => {
            refused.get_or_insert(Location::Refused {
                kind: SampleErrorKind::Label,
                reason: format!("{at}: {why}").into(),
            });
            None
        }
    };
    let mut s = Sample {
        id: sample_id(&rel),
        path: rel,
        location: refused.unwrap_or(Location::File(file)),
        label,
        mask: None,
        group: None,
        targets: targets.map(Arc::new),
        source: 0,
    };
    if let Some(m) = record
        .get("mask")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        options
            .check_path(m, "the manifest's folder")
            .map_err(outside)?;
        s.mask = Some(Location::File(root.join(m)));
    }
    if let Some(g) = record.get("group").filter(|v| !v.is_null()) {
        s.group = Some(match g.as_str() {
            Some(g) => g.to_string(),
            None => g.to_string(),
        });
    }
    Ok(Record {
        sample: s,
        label,
        has_label: label_value.is_some(),
    })
}

/// Splits a CSV list cell: numbers separated by spaces (and groups by `;` where `group`
/// is set), as JSON.
fn csv_list(cell: &str, group: Option<usize>, what: &str) -> std::result::Result<Value, Bad> {
    let number = |t: &str| -> std::result::Result<Value, Bad> {
        let f: f64 = t
            .parse()
            .map_err(|_| format!("{what}: {t:?} is not a number"))?;
        Ok(serde_json::Number::from_f64(f)
            .map(|n| {
                if f.fract() == 0.0 && (0.0..9.0e15).contains(&f) {
                    Value::from(f as u64)
                } else {
                    Value::Number(n)
                }
            })
            .unwrap_or(Value::Null))
    };
    let items: std::result::Result<Vec<Value>, Bad> = match group {
        None => cell.split_whitespace().map(number).collect(),
        Some(_) => cell
            .split(';')
            .filter(|g| !g.trim().is_empty())
            .map(|g| {
                g.split_whitespace()
                    .map(number)
                    .collect::<std::result::Result<Vec<Value>, Bad>>()
                    .map(Value::Array)
            })
            .collect(),
    };
    Ok(Value::Array(items?))
}

/// A manifest being listed: its samples so far, and what the labelled-set rule needs.
struct ManifestListing<'a> {
    file: &'a Path,
    root: PathBuf,
    options: &'a ListingOptions,
    samples: Vec<Sample>,
    max_label: Option<u32>,
    /// The first line whose record has a label.
    labelled: Option<usize>,
    /// The samples whose records have none, with their lines.
    unlabelled: Vec<(usize, usize)>,
}

impl ManifestListing<'_> {
    fn at(&self, line: usize) -> String {
        format!("{}:{line}", self.file.display())
    }

    /// Adds the record at `line`; `bad` says why a cell of it could not be read (the
    /// sample is then reported).
    fn add(&mut self, record: &Value, line: usize, bad: Option<Bad>) -> Result<()> {
        let at = self.at(line);
        let r = record_sample(&self.root, record, &at, self.options)?;
        let mut s = r.sample;
        if let Some(why) = bad {
            s.location = Location::Refused {
                kind: SampleErrorKind::Label,
                reason: format!("{at}: {why}").into(),
            };
            s.targets = None;
        }
        if r.has_label {
            self.labelled.get_or_insert(line);
        } else {
            self.unlabelled.push((self.samples.len(), line));
        }
        self.max_label = self.max_label.max(r.label);
        self.samples.push(s);
        Ok(())
    }

    /// The dataset, a record without a label in a labelled manifest reported.
    fn finish(mut self) -> Result<Dataset> {
        if let Some(has) = self.labelled {
            let missing = std::mem::take(&mut self.unlabelled)
                .into_iter()
                .map(|(i, line)| {
                    let why = format!(
                        "{}: no label, though line {has} has one (label every record, or none)",
                        self.at(line)
                    );
                    (i, why)
                })
                .collect();
            super::listing::report_unlabelled(&mut self.samples, missing);
        }
        Dataset::from_samples(
            Some(self.root),
            self.samples,
            numbered_classes(self.max_label),
        )
    }
}

/// The rows of a CSV manifest, each turned into a JSON record; a row's line is where it
/// starts (from the reader's position, blank lines and quoted line breaks counted).
fn csv_rows(text: &str, list: &mut ManifestListing<'_>) -> Result<()> {
    let mut r = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    // A position is where the reader began the record: blank lines it then skipped are
    // before the record, so they are counted from the text.
    let line_at = |pos: &csv::Position| {
        let blank = text
            .as_bytes()
            .get(pos.byte() as usize..)
            .map_or(0, |rest| {
                rest.iter()
                    .take_while(|b| matches!(b, b'\r' | b'\n'))
                    .filter(|&&b| b == b'\n')
                    .count()
            });
        pos.line() as usize + blank
    };
    let line_of = |e: &csv::Error, or: usize| e.position().map_or(or, line_at);
    let headers = match r.headers() {
        Ok(h) => h.clone(),
        Err(e) => {
            let line = line_of(&e, 1);
            return Err(Error::dataset(format!("{}: {e}", list.at(line))));
        }
    };
    let mut row = csv::StringRecord::new();
    loop {
        match r.read_record(&mut row) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) => {
                let line = line_of(&e, r.position().line() as usize);
                return Err(Error::dataset(format!("{}: {e}", list.at(line))));
            }
        }
        let line = row.position().map_or(r.position().line() as usize, line_at);
        let mut obj = serde_json::Map::new();
        let mut bad = None;
        for (h, cell) in headers.iter().zip(row.iter()) {
            if cell.is_empty() {
                continue;
            }
            let v = match h {
                "path" | "mask" | "group" => Ok(Value::from(cell)),
                "label" => cell
                    .parse::<i64>()
                    .map(Value::from)
                    .or_else(|_| Ok(Value::from(cell))),
                "labels" | "values" | "box_classes" => csv_list(cell, None, h),
                "boxes" | "keypoints" => csv_list(cell, Some(0), h),
                _ => continue,
            };
            match v {
                Ok(v) => {
                    obj.insert(h.to_string(), v);
                }
                Err(why) => bad = Some(why),
            }
        }
        list.add(&Value::Object(obj), line, bad)?;
    }
}

/// A manifest: one sample per record, paths relative to the manifest's folder.
///
/// - JSON Lines (`.jsonl`, `.ndjson`): one object per line with `path` and any of
///   `label`, `labels`, `values`, `boxes`, `box_classes`, `keypoints`, `mask` (a label
///   plane's path) and `group` ([`targets_from_json`] says what each holds).
/// - CSV (`.csv`, a header row naming the same columns): list columns hold numbers
///   separated by spaces; `boxes` and `keypoints` hold groups separated by `;`
///   (`"10 20 50 80 3; 0 0 5 5 1"`).
///
/// A record without a path, a `path` or `mask` outside the manifest's folder (absolute,
/// or with a `..` part) unless `options` allow it
/// ([`ListingOptions::allow_outside_root`]), or a file that is not valid CSV or JSON, is
/// an error naming the line (a CSV row's line is where it starts, blank lines and quoted
/// line breaks counted). A record whose label or targets are unusable is listed and
/// reported every epoch with why ([`SampleErrorKind::Label`]), and so is a record without
/// a label in a manifest where some record has one: it is never delivered unlabelled.
/// Class names are the numbers up to the largest label.
pub fn manifest(path: &Path, options: &ListingOptions) -> Result<Dataset> {
    let text = read_text(path)?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let mut list = ManifestListing {
        file: path,
        root: path.parent().map_or_else(PathBuf::new, Path::to_path_buf),
        options,
        samples: Vec::new(),
        max_label: None,
        labelled: None,
        unlabelled: Vec::new(),
    };
    match ext.as_str() {
        "jsonl" | "ndjson" => {
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(line)
                    .map_err(|e| Error::dataset(format!("{}: not JSON: {e}", list.at(i + 1))))?;
                list.add(&v, i + 1, None)?;
            }
        }
        "csv" => csv_rows(&text, &mut list)?,
        _ => {
            return Err(Error::dataset(format!(
                "{}: a manifest is .csv, .jsonl or .ndjson",
                path.display()
            )))
        }
    }
    list.finish()
}

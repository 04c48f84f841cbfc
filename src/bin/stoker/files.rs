//! `stoker decode` (files to PNGs on one backend) and `stoker inspect` (what a dataset
//! holds).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;
use stoker::backend;
use stoker::decode::{self, DecodeOptions, Image8};
use stoker::{BackendKind, Limits};

use crate::common::{
    self, cores, fail, kv, progress, Cause, Ctx, Failure, Report, Res, Table, SAMPLES_DIR,
};

/// Writes an 8-bit RGB image as a PNG; a failure is an `Output` error.
pub fn write_png_rgb(path: &Path, width: u32, height: u32, rgb: &[u8]) -> Res<()> {
    let file = std::fs::File::create(path).map_err(|e| {
        fail(
            Cause::Output,
            format!("cannot create {}: {e}", path.display()),
        )
    })?;
    let writing =
        |e: png::EncodingError| fail(Cause::Output, format!("writing {}: {e}", path.display()));
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), width, height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(writing)?;
    w.write_image_data(rgb).map_err(writing)?;
    w.finish().map_err(writing)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// decode

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// JPEG or PNG files to decode.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Backend to decode on (auto, cpu, wgpu, cuda).
    #[arg(long, default_value = "cpu", value_parser = clap::value_parser!(BackendKind))]
    backend: BackendKind,
    /// Folder for the PNGs (created if missing, in a folder that exists); each file
    /// becomes <stem>.png.
    #[arg(long)]
    out: PathBuf,
}

/// The JSON object of `stoker decode`.
#[derive(Debug, Serialize)]
struct DecodeReport {
    decoded: Vec<Decoded>,
    errors: Vec<FileFailure>,
    backend: String,
    device: String,
}

/// A file decoded and written.
#[derive(Debug, Serialize)]
struct Decoded {
    file: String,
    /// The PNG written.
    out: String,
    width: u32,
    height: u32,
    /// Format and JPEG kind.
    kind: String,
}

/// A file that could not be read, decoded or written, and why.
#[derive(Debug, Serialize)]
struct FileFailure {
    file: String,
    reason: String,
}

/// `<stem>.png`, or `<stem>-2.png`, ... when two inputs share a stem.
fn out_name(file: &Path, used: &mut BTreeSet<String>) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "image".into());
    let mut name = format!("{stem}.png");
    let mut k = 2;
    while !used.insert(name.clone()) {
        name = format!("{stem}-{k}.png");
        k += 1;
    }
    name
}

pub fn decode(ctx: Ctx, a: &DecodeArgs) -> Res<Report> {
    let sel = backend::select(a.backend, cores())?;
    let be = sel.backend.as_ref();
    // The folder itself is made when missing, the folders above it are not: a mistyped
    // path is an error, not a new tree.
    if !a.out.is_dir() {
        crate::ensure_parent(&a.out)?;
        std::fs::create_dir(&a.out).map_err(|e| {
            fail(
                Cause::Output,
                format!("cannot create folder {}: {e}", a.out.display()),
            )
        })?;
    }
    let opts = DecodeOptions::default();
    let mut used = BTreeSet::new();
    let mut decoded = Vec::new();
    let mut errors = Vec::new();
    let mut img = Image8::default();
    // On a device backend, files decode through the device path (CPU-only files fall
    // back as in the pipeline) and are read back.
    let mut device = common::device_decoder(be, stoker::HardwareDecode::Exact, 1)?;
    let pb = progress(ctx, a.files.len() as u64, "decoding");
    for file in &a.files {
        let name = out_name(file, &mut used);
        let r: Result<Decoded, FileFault> = (|| {
            let mut bytes = Vec::new();
            stoker::source::fsio::read_bounded(file, Limits::default().max_bytes, &mut bytes)
                .map_err(FileFault::Read)?;
            let info = match device.as_mut() {
                Some(d) => d.decode_one(&bytes, &opts, &mut img)?,
                None => decode::cpu::decode_image(&bytes, &opts, &mut img)?,
            };
            let out = a.out.join(&name);
            write_png_rgb(&out, img.width, img.height, &img.data).map_err(FileFault::Write)?;
            Ok(Decoded {
                file: file.display().to_string(),
                out: out.display().to_string(),
                width: img.width,
                height: img.height,
                kind: info.kind(),
            })
        })();
        match r {
            Ok(v) => decoded.push(v),
            Err(fault) => errors.push(FileFailure {
                file: file.display().to_string(),
                reason: common::reason(fault),
            }),
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let r = DecodeReport {
        decoded,
        errors,
        backend: be.kind().to_string(),
        device: be.device(),
    };
    let failures = r.errors.len();
    Ok(Report::new(&r, r.text())?.failed_inputs(failures, a.files.len(), "file(s)"))
}

/// Why `stoker decode` could not decode a file and write its PNG.
#[derive(Debug, thiserror::Error)]
enum FileFault {
    #[error("cannot read: {0}")]
    Read(#[source] stoker::source::fsio::ReadError),
    /// On the device path.
    #[error("{0}")]
    Device(#[from] stoker::Error),
    #[error("{0}")]
    Decode(#[from] stoker::DecodeError),
    #[error("{0}")]
    Write(#[source] Box<dyn std::error::Error>),
}

impl DecodeReport {
    fn text(&self) -> String {
        let mut t = Table::new(&["file", "size", "kind", "written to"]);
        for d in &self.decoded {
            t.row(vec![
                d.file.clone(),
                format!("{}x{}", d.width, d.height),
                d.kind.clone(),
                d.out.clone(),
            ]);
        }
        let mut text = format!(
            "decoded {} of {} file(s) on {}\n\n{}",
            self.decoded.len(),
            self.decoded.len() + self.errors.len(),
            self.device,
            t.render()
        );
        if !self.errors.is_empty() {
            text.push_str("\nfailed:\n");
            for e in &self.errors {
                text.push_str(&format!("  {}: {}\n", e.file, e.reason));
            }
        }
        text
    }
}

// ---------------------------------------------------------------------------------------
// inspect

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Image folder (class sub-folders or flat), shards, a file list or one image; default:
    /// the bundled samples.
    path: Option<PathBuf>,
    /// Also decode every image fully (slower; finds corrupt data past the headers).
    #[arg(long)]
    decode: bool,
    /// Threads for reading and decoding (default: available cores).
    #[arg(long, value_parser = crate::bench::positive)]
    threads: Option<usize>,
}

struct Seen {
    bytes: u64,
    kind: Option<String>,
    size: Option<(u32, u32)>,
    error: Option<String>,
}

fn look(loc: &stoker::source::Location, full: bool, limits: &Limits) -> Seen {
    let mut seen = Seen {
        bytes: 0,
        kind: None,
        size: None,
        error: None,
    };
    let bytes = match loc.read(limits.max_bytes) {
        Ok(b) => b,
        Err(e) => {
            seen.error = Some(e.to_string());
            return seen;
        }
    };
    seen.bytes = bytes.len() as u64;
    let info = match decode::peek_info(&bytes) {
        Ok(i) => i,
        Err(e) => {
            seen.error = Some(common::reason(e));
            return seen;
        }
    };
    seen.kind = Some(info.kind());
    if let Err(e) = decode::check_limits(&info, limits) {
        seen.error = Some(e.to_string());
        return seen;
    }
    if full {
        let opts = DecodeOptions {
            limits: *limits,
            ..Default::default()
        };
        let mut img = Image8::default();
        if let Err(e) = decode::cpu::decode_image(&bytes, &opts, &mut img) {
            seen.error = Some(common::reason(e));
            return seen;
        }
    }
    seen.size = Some((info.width, info.height));
    seen
}

/// The JSON object of `stoker inspect`.
#[derive(Debug, Serialize)]
struct InspectReport {
    path: String,
    samples: usize,
    classes: usize,
    /// Samples per class name.
    labels: BTreeMap<String, u64>,
    unlabeled: u64,
    /// Files per format and JPEG kind.
    by_kind: BTreeMap<String, u64>,
    sizes: Sizes,
    /// Whether every image was decoded fully (`--decode`), not just its headers.
    decoded: bool,
    errors: Vec<Failure>,
    /// Files that listing left out (not samples), each with the reason.
    skipped: Vec<Failure>,
}

/// Image sizes over the files whose headers (or, with `--decode`, data) are fine; `null`s
/// when there are none.
#[derive(Debug, Serialize)]
struct Sizes {
    min_width: Option<u32>,
    max_width: Option<u32>,
    mean_width: Option<f64>,
    min_height: Option<u32>,
    max_height: Option<u32>,
    mean_height: Option<f64>,
    /// Bytes of every file read.
    total_bytes: u64,
    /// Files measured.
    measured: u64,
}

pub fn inspect(ctx: Ctx, a: &InspectArgs) -> Res<Report> {
    let path = common::resolve_dir(a.path.as_deref(), SAMPLES_DIR, "a PATH")?;
    let data = common::open_dataset(&path)?;
    let limits = Limits::default();
    let pb = progress(
        ctx,
        data.len() as u64,
        if a.decode {
            "decoding"
        } else {
            "reading headers"
        },
    );
    let seen = common::par_map(
        data.samples(),
        a.threads.unwrap_or_else(cores),
        |s| look(&s.location, a.decode, &limits),
        || pb.inc(1),
    );
    pb.finish_and_clear();

    let mut labels: BTreeMap<String, u64> = BTreeMap::new();
    let mut unlabeled = 0u64;
    for s in data.samples() {
        match s.label {
            Some(l) => {
                let name = data
                    .classes()
                    .get(l as usize)
                    .cloned()
                    .unwrap_or_else(|| l.to_string());
                *labels.entry(name).or_default() += 1;
            }
            None => unlabeled += 1,
        }
    }
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors = Vec::new();
    let (mut total_bytes, mut ok) = (0u64, 0u64);
    let (mut min_w, mut max_w, mut min_h, mut max_h) = (u32::MAX, 0u32, u32::MAX, 0u32);
    let (mut sum_w, mut sum_h) = (0f64, 0f64);
    for (s, v) in data.samples().iter().zip(&seen) {
        total_bytes += v.bytes;
        if let Some(k) = &v.kind {
            *by_kind.entry(k.clone()).or_default() += 1;
        }
        if let Some(e) = &v.error {
            errors.push(Failure::new(common::sample_display(s), e.as_str()));
        }
        if let Some((w, h)) = v.size {
            ok += 1;
            min_w = min_w.min(w);
            max_w = max_w.max(w);
            min_h = min_h.min(h);
            max_h = max_h.max(h);
            sum_w += f64::from(w);
            sum_h += f64::from(h);
        }
    }
    let any = ok > 0;
    let sizes = Sizes {
        min_width: any.then_some(min_w),
        max_width: any.then_some(max_w),
        mean_width: any.then(|| sum_w / ok as f64),
        min_height: any.then_some(min_h),
        max_height: any.then_some(max_h),
        mean_height: any.then(|| sum_h / ok as f64),
        total_bytes,
        measured: ok,
    };
    let r = InspectReport {
        path: path.display().to_string(),
        samples: data.len(),
        classes: data.classes().len(),
        labels,
        unlabeled,
        by_kind,
        sizes,
        decoded: a.decode,
        errors,
        skipped: Failure::skipped_at_listing(&data),
    };
    // Unreadable files are what inspect looks for, and a script checking a dataset
    // wants them in the status: some is `Partial`, all (or an empty dataset) `NoInput`.
    let failures = r.errors.len();
    Ok(Report::new(&r, r.text())?.failed_inputs(failures, r.samples, "sample(s)"))
}

/// A size for the text: whole numbers without decimals, `-` when none was measured.
fn num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.fract() == 0.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "-".into(),
    }
}

impl InspectReport {
    fn text(&self) -> String {
        let s = &self.sizes;
        let min_max_mean = |min: Option<u32>, mean: Option<f64>, max: Option<u32>| {
            format!(
                "{} / {} / {}",
                num(min.map(f64::from)),
                num(mean),
                num(max.map(f64::from))
            )
        };
        let mut out = format!("{}\n\n", self.path);
        out.push_str(&kv(&[
            ("samples", self.samples.to_string()),
            (
                "width (min/mean/max)",
                min_max_mean(s.min_width, s.mean_width, s.max_width),
            ),
            (
                "height (min/mean/max)",
                min_max_mean(s.min_height, s.mean_height, s.max_height),
            ),
            ("total bytes", s.total_bytes.to_string()),
            (
                if self.decoded {
                    "decoded fine"
                } else {
                    "headers fine"
                },
                s.measured.to_string(),
            ),
        ]));
        let mut t = Table::new(&["label", "samples"]);
        for (k, v) in &self.labels {
            t.row(vec![k.clone(), v.to_string()]);
        }
        if self.unlabeled > 0 {
            t.row(vec!["(no label)".into(), self.unlabeled.to_string()]);
        }
        out.push('\n');
        out.push_str(&t.render());
        let mut t = Table::new(&["kind", "files"]);
        for (k, v) in &self.by_kind {
            t.row(vec![k.clone(), v.to_string()]);
        }
        out.push('\n');
        out.push_str(&t.render());
        if !self.skipped.is_empty() {
            const SHOWN: usize = 20;
            out.push_str(&format!(
                "\n{} skipped at listing (not samples):\n",
                self.skipped.len()
            ));
            for k in self.skipped.iter().take(SHOWN) {
                out.push_str(&format!("  {}: {}\n", k.path, k.reason));
            }
            if self.skipped.len() > SHOWN {
                out.push_str(&format!(
                    "  ... and {} more (--json lists them all)\n",
                    self.skipped.len() - SHOWN
                ));
            }
        }
        if !self.errors.is_empty() {
            out.push_str(&format!("\n{} unreadable:\n", self.errors.len()));
            for e in &self.errors {
                out.push_str(&format!("  {}: {}\n", e.path, e.reason));
            }
        }
        out
    }
}

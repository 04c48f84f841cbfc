//! What every subcommand shares: the logger, the report type, tables, progress bars,
//! dataset opening and a small parallel map.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use log::{Level, LevelFilter, Log, Metadata, Record};
use serde::Serialize;
use serde_json::Value;
use stoker::source::{Location, Sample};
use stoker::Dataset;

/// Errors of the command line: anything displayable, printed as `error: ...`; the exit
/// status comes from [`Cause::of`] (a [`CliError`] says its cause, a library error's
/// category decides).
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

// ---------------------------------------------------------------------------------------
// Exit status

/// Why a command did not do (all of) what was asked; each cause has its exit status,
/// listed in `stoker --help` and docs/cli.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Some inputs could not be read or decoded (the report lists them), or a check
    /// found problems.
    Partial,
    /// Bad arguments or settings (including `RANK`/`WORLD_SIZE`, and batches too large
    /// for host memory or the device).
    Usage,
    /// Nothing could be read: a missing or empty input, or every input failed.
    NoInput,
    /// A backend asked for is not in this build or not on this machine.
    BackendUnavailable,
    /// A result could not be written (a missing output folder, a write error).
    Output,
    /// The work failed while running (a device or pipeline error).
    Failed,
}

impl Cause {
    /// Every cause, in the order of their codes.
    pub const ALL: [Cause; 6] = [
        Cause::Partial,
        Cause::Usage,
        Cause::NoInput,
        Cause::BackendUnavailable,
        Cause::Output,
        Cause::Failed,
    ];

    /// The exit status.
    pub fn code(self) -> u8 {
        match self {
            Cause::Partial => 1,
            Cause::Usage => 2,
            Cause::NoInput => 3,
            Cause::BackendUnavailable => 4,
            Cause::Output => 5,
            Cause::Failed => 6,
        }
    }

    /// The cause with exit status `code`, if any.
    pub fn from_code(code: u8) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.code() == code)
    }

    /// What the code means, in words.
    pub fn meaning(self) -> &'static str {
        match self {
            Cause::Partial => {
                "partly done: some inputs could not be read or decoded (the report lists them), or a check found problems"
            }
            Cause::Usage => {
                "usage: bad arguments or settings (RANK/WORLD_SIZE included; batches too large for memory or the device)"
            }
            Cause::NoInput => {
                "nothing could be read: a missing or empty input, or every input failed"
            }
            Cause::BackendUnavailable => {
                "a backend asked for is unavailable in this build or on this machine (the report lists the others)"
            }
            Cause::Output => {
                "a result could not be written (a missing output folder, a write error)"
            }
            Cause::Failed => "failed while running (a device or pipeline error)",
        }
    }

    /// The exit-status table of `stoker --help`.
    pub fn table() -> String {
        let mut s = String::from("Exit status:\n   0  everything asked was done\n");
        for c in Cause::ALL {
            s.push_str(&format!("  {:>2}  {}\n", c.code(), c.meaning()));
        }
        s.push_str(
            "With --json, a non-zero status comes with an \"error\" object on stdout:\n  \
             {\"error\": {\"kind\": \"no_input\", \"message\": \"...\", \"code\": 3}} (with the report's\n  \
             fields, when there is a report).",
        );
        s
    }

    /// The cause of a command's error: a [`CliError`]'s own, a library error's by its
    /// category, a usage error's; anything else failed while running.
    pub fn of(e: &(dyn std::error::Error + 'static)) -> Cause {
        if let Some(c) = e.downcast_ref::<CliError>() {
            return c.cause;
        }
        if e.downcast_ref::<clap::Error>().is_some() {
            return Cause::Usage;
        }
        if let Some(e) = e.downcast_ref::<stoker::Error>() {
            return match e {
                // A batch larger than host memory (`Config`) or than a device's buffers
                // (`Limit`) is the same mistake in the settings on every backend.
                stoker::Error::Config { .. } | stoker::Error::Limit { .. } => Cause::Usage,
                stoker::Error::Io { .. }
                | stoker::Error::Source { .. }
                | stoker::Error::Listing { .. }
                | stoker::Error::Split { .. } => Cause::NoInput,
                stoker::Error::BackendUnavailable { .. } => Cause::BackendUnavailable,
                _ => Cause::Failed,
            };
        }
        Cause::Failed
    }
}

/// An error of the command line with its cause.
#[derive(Debug)]
pub struct CliError {
    pub cause: Cause,
    pub message: String,
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// A boxed [`CliError`], for `Err(fail(..))` and `.map_err(|e| fail(..))`.
pub fn fail(cause: Cause, message: impl Into<String>) -> Box<dyn std::error::Error> {
    Box::new(CliError {
        cause,
        message: message.into(),
    })
}

/// The JSON error object a failed command prints (alone, or within its report).
#[derive(Debug, Clone, Serialize)]
pub struct ErrorObject {
    pub kind: Cause,
    pub message: String,
    pub code: u8,
}

impl ErrorObject {
    pub fn new(kind: Cause, message: impl Into<String>) -> Self {
        ErrorObject {
            kind,
            message: message.into(),
            code: kind.code(),
        }
    }
}

/// The bundled image-folder tree of sample photos.
pub const SAMPLES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/samples");
/// The bundled segmentation sample: images ...
pub const MASK_IMAGES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/masks/images");
/// ... and their label maps, paired by stem.
pub const MASK_LABELS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/masks/labels");

// ---------------------------------------------------------------------------------------
// Logger

/// A minimal stderr logger; the level comes from `STOKER_LOG` (default `warn`).
struct StderrLogger;

static LOGGER: StderrLogger = StderrLogger;

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        // The GPU stack logs adapter probing failures (an absent GL driver, say) as
        // errors; stoker says what it chose and why. Its messages show from debug on.
        let gpu_stack = ["wgpu", "naga"]
            .iter()
            .any(|p| metadata.target().starts_with(p));
        metadata.level() <= log::max_level() && (!gpu_stack || log::max_level() >= Level::Debug)
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            Level::Error => "ERROR",
            Level::Warn => "WARN ",
            Level::Info => "INFO ",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        };
        // A failed write to stderr has nowhere better to go.
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr().lock(),
            format_args!("[{level} {}] {}\n", record.target(), record.args()),
        );
    }

    fn flush(&self) {}
}

/// Installs the logger. `quiet` lowers the default level to `error`; `STOKER_LOG` wins.
pub fn init_logger(quiet: bool) {
    let default = if quiet {
        LevelFilter::Error
    } else {
        LevelFilter::Warn
    };
    let (level, bad) = match std::env::var("STOKER_LOG") {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<LevelFilter>() {
            Ok(l) => (l, None),
            Err(_) => (default, Some(v)),
        },
        _ => (default, None),
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
    if let Some(v) = bad {
        log::warn!("STOKER_LOG={v:?} is not a level (off, error, warn, info, debug, trace); using {default}");
    }
}

// ---------------------------------------------------------------------------------------
// Output

/// Global output options.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    /// Print one JSON object instead of tables.
    pub json: bool,
    /// No progress bars.
    pub quiet: bool,
}

/// What a subcommand produced: the JSON object, the table text and the exit code.
///
/// Each subcommand builds a typed `#[derive(Serialize)]` report and renders its text from
/// it; [`Report::new`] turns the typed report into a `serde_json::Value` at the end. One
/// concrete type (not a generic) so `main` handles every subcommand alike, and `bench`
/// with no sub-command nests three reports in one object. The printed object keeps the
/// key order of serde_json's map (sorted), as the hand-built objects had.
#[derive(Debug)]
pub struct Report {
    pub json: Value,
    pub text: String,
    pub code: u8,
    /// Why the command did not do all that was asked, with `code` its cause's.
    pub error: Option<ErrorObject>,
}

impl Report {
    /// A report with exit code 0.
    pub fn new(json: &impl Serialize, text: String) -> Res<Self> {
        Ok(Report {
            json: serde_json::to_value(json)?,
            text,
            code: 0,
            error: None,
        })
    }

    /// The same report with exit code `code`.
    pub fn with_code(self, code: u8) -> Self {
        Report { code, ..self }
    }

    /// The same report, failed with `cause`: its exit status, and an error object in the
    /// JSON report and on stderr.
    pub fn failed(self, cause: Cause, message: impl Into<String>) -> Self {
        Report {
            code: cause.code(),
            error: Some(ErrorObject::new(cause, message)),
            ..self
        }
    }

    /// The same report, failed as `Partial` when `failures` of `total` inputs failed
    /// and some did not, as `NoInput` when all did (or there were none).
    pub fn failed_inputs(self, failures: usize, total: usize, what: &str) -> Self {
        if total == 0 {
            self.failed(Cause::NoInput, format!("no {what} to read"))
        } else if failures >= total {
            self.failed(
                Cause::NoInput,
                format!("none of the {total} {what} could be used"),
            )
        } else if failures > 0 {
            self.failed(
                Cause::Partial,
                format!("{failures} of {total} {what} failed"),
            )
        } else {
            self
        }
    }
}

/// A sample or file a subcommand could not read or decode, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub path: String,
    pub reason: String,
}

impl Failure {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Failure {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// What listing `data` left out (not samples: a FIFO, an unreadable folder), each
    /// with the reason: a report's `skipped`.
    pub fn skipped_at_listing(data: &stoker::Dataset) -> Vec<Failure> {
        data.skipped()
            .iter()
            .map(|k| Failure::new(k.path.clone(), k.reason.to_string()))
            .collect()
    }
}

/// A progress bar on stderr, hidden with `--json`, `--quiet` or when stderr is not a
/// terminal.
pub fn progress(ctx: Ctx, len: u64, what: &str) -> ProgressBar {
    if ctx.json || ctx.quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{msg:>16} [{bar:40.cyan/blue}] {pos}/{len} ({elapsed}, eta {eta})",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}

/// A plain text table: numeric columns right-aligned, the others left-aligned.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let ncol = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut width = vec![0usize; ncol];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        // A column is right-aligned when every body cell in it starts like a number.
        let right: Vec<bool> = (0..ncol)
            .map(|i| {
                i > 0
                    && self.rows.iter().all(|r| {
                        r.get(i).is_none_or(|c| {
                            c.is_empty()
                                || c.trim_start_matches('-')
                                    .starts_with(|ch: char| ch.is_ascii_digit())
                        })
                    })
            })
            .collect();
        let line = |r: &[String]| -> String {
            let mut s = String::new();
            for (i, w) in width.iter().enumerate() {
                let c = r.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    s.push_str("  ");
                }
                if right[i] {
                    s.push_str(&format!("{c:>w$}"));
                } else {
                    s.push_str(&format!("{c:<w$}"));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(&self.header);
        let total: usize = width.iter().sum::<usize>() + 2 * ncol.saturating_sub(1);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// Key/value lines, keys aligned.
pub fn kv(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{k:<w$}  {v}\n"))
        .collect()
}

/// Seconds with a sensible number of digits.
pub fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

// ---------------------------------------------------------------------------------------
// Datasets

/// The folder to use: the one given, or the bundled default, which must exist.
pub fn resolve_dir(given: Option<&Path>, default: &str, flag: &str) -> Res<PathBuf> {
    match given {
        Some(p) => Ok(p.to_path_buf()),
        None => {
            let p = PathBuf::from(default);
            if p.is_dir() {
                Ok(p)
            } else {
                Err(fail(
                    Cause::NoInput,
                    format!(
                        "the bundled sample images are not at {default} (this binary was \
                         built from a checkout that is gone or moved); pass {flag} DIR"
                    ),
                ))
            }
        }
    }
}

fn has_image_ext(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        stoker::source::files::IMAGE_EXTENSIONS
            .iter()
            .any(|x| x.eq_ignore_ascii_case(e))
    })
}

/// [`open_dataset`] of a URL: an object named as a shard, Parquet file or image, or a file
/// list, else a folder whose objects say what it is (shards directly in it; an
/// image-folder tree when images are in sub-folders; else a flat folder of images).
fn open_remote(path: &Path) -> Res<Dataset> {
    let url = path.to_string_lossy();
    let is = |name: &str, exts: &[&str]| exts.iter().any(|e| name.ends_with(e));
    const TFRECORD: [&str; 3] = [".tfrecord", ".tfrecords", ".record"];
    let one = [path.to_path_buf()];
    if !stoker::source::remote::is_folder_url(&url) {
        if is(&url, &TFRECORD) {
            return Ok(Dataset::tfrecord(&one)?);
        }
        #[cfg(feature = "parquet")]
        if is(&url, &[".parquet"]) {
            return Ok(Dataset::parquet(&one)?);
        }
        if is(&url, &[".tar"]) {
            return Ok(Dataset::tar(&one)?);
        }
        if has_image_ext(path) && stoker::source::remote::stat(&url).is_ok() {
            return one_image(path);
        }
        if stoker::source::remote::stat(&url).is_ok() {
            return Ok(Dataset::files(path)?);
        }
    }
    let objects =
        stoker::source::remote::list(&url).map_err(|e| fail(Cause::NoInput, e.to_string()))?;
    let folder = format!("{}/", url.trim_end_matches('/'));
    let names: Vec<&str> = objects
        .iter()
        .filter_map(|o| o.url.strip_prefix(&folder))
        .collect();
    let direct = |exts: &[&str]| names.iter().any(|n| !n.contains('/') && is(n, exts));
    if direct(&TFRECORD) {
        return Ok(Dataset::tfrecord(&one)?);
    }
    #[cfg(feature = "parquet")]
    if direct(&[".parquet"]) {
        return Ok(Dataset::parquet(&one)?);
    }
    if direct(&[".tar"]) {
        return Ok(Dataset::tar(&one)?);
    }
    if names.is_empty() {
        return Err(fail(Cause::NoInput, format!("{url}: no objects")));
    }
    let nested = names
        .iter()
        .any(|n| n.contains('/') && has_image_ext(Path::new(n)));
    Ok(if nested {
        Dataset::image_folder(path)?
    } else {
        Dataset::flat(path)?
    })
}

/// Whether the file at `path` is an image: by its extension, or by its first bytes (a
/// bitmap's only when its reserved header bytes are zero: text may start with "BM").
fn is_image_file(path: &Path) -> bool {
    use std::io::Read;
    if has_image_ext(path) {
        return true;
    }
    let mut head = Vec::new();
    if std::fs::File::open(path)
        .and_then(|f| f.take(16).read_to_end(&mut head))
        .is_err()
    {
        return false;
    }
    match stoker::decode::Format::sniff(&head) {
        Some(stoker::decode::Format::Bmp) => head.get(6..10) == Some(&[0u8; 4][..]),
        Some(_) => true,
        None => false,
    }
}

/// A dataset of the one image at `path`, unlabelled, named by its file name.
fn one_image(path: &Path) -> Res<Dataset> {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    let root = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let sample = Sample::new(name, Location::File(path.to_path_buf()), None);
    Ok(Dataset::from_samples(
        Some(root.to_path_buf()),
        vec![sample],
        Vec::new(),
    )?)
}

/// Opens a dataset: shards (a TFRecord, tar or Parquet file, or a folder of them); an
/// image-folder tree when sub-folders hold images and the folder itself holds none
/// directly, else every image below the folder without labels. A file that is an image
/// (by extension or first bytes) is a one-image set; another file is read as a file list
/// (`path [label]` per line).
pub fn open_dataset(path: &Path) -> Res<Dataset> {
    if stoker::source::remote::is_url(path) {
        return open_remote(path);
    }
    let name = path.to_string_lossy();
    let is = |exts: &[&str]| exts.iter().any(|e| name.ends_with(e));
    let shards = |exts: &[&str]| {
        path.is_dir()
            && std::fs::read_dir(path).is_ok_and(|rd| {
                rd.flatten().any(|e| {
                    exts.iter()
                        .any(|x| e.file_name().to_string_lossy().ends_with(x))
                })
            })
    };
    const TFRECORD: [&str; 3] = [".tfrecord", ".tfrecords", ".record"];
    if (path.is_file() && is(&TFRECORD)) || shards(&TFRECORD) {
        log::info!("{}: TFRecord shards", path.display());
        return Ok(Dataset::tfrecord(&[path.to_path_buf()])?);
    }
    #[cfg(feature = "parquet")]
    if (path.is_file() && is(&[".parquet"])) || shards(&[".parquet"]) {
        log::info!("{}: Parquet files", path.display());
        return Ok(Dataset::parquet(&[path.to_path_buf()])?);
    }
    if (path.is_file() && is(&[".tar"])) || shards(&[".tar"]) {
        log::info!("{}: WebDataset tar shards", path.display());
        return Ok(Dataset::tar(&[path.to_path_buf()])?);
    }
    if path.is_file() && is_image_file(path) {
        log::info!("{} is an image: a one-image set", path.display());
        return one_image(path);
    }
    if path.is_file() {
        log::info!("{} is a file: reading it as a file list", path.display());
        return Ok(Dataset::files(path)?);
    }
    if !path.exists() {
        return Err(fail(
            Cause::NoInput,
            format!("{} does not exist", path.display()),
        ));
    }
    if !path.is_dir() {
        return Err(fail(
            Cause::NoInput,
            format!("{} is not a folder", path.display()),
        ));
    }
    std::fs::read_dir(path).map_err(|e| {
        fail(
            Cause::NoInput,
            format!("cannot list {}: {e}", path.display()),
        )
    })?;
    // Walked by the library's rules: each folder once, links leaving the folder not
    // followed, bounded.
    let layout = stoker::source::files::layout(path)?;
    let (top_images, class_dirs) = (layout.top_images, layout.class_images);
    if class_dirs && !top_images {
        log::info!(
            "{}: image-folder tree (one sub-folder per class)",
            path.display()
        );
        Ok(Dataset::image_folder(path)?)
    } else {
        if class_dirs {
            log::warn!(
                "{} holds images both directly and in sub-folders: read flat, without labels",
                path.display()
            );
        }
        Ok(Dataset::flat(path)?)
    }
}

/// The display path of a sample: the file on disk if it has one, else its relative path.
pub fn sample_display(s: &Sample) -> String {
    match &s.location {
        Location::File(p) => p.display().to_string(),
        _ => s.path.clone(),
    }
}

/// An error's message for a report, without trailing whitespace (some decoders end
/// theirs with a newline).
pub fn reason(e: impl std::fmt::Display) -> String {
    e.to_string().trim_end().to_string()
}

/// The number of threads to use by default.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `f` over `items` on `threads` threads (work taken by an atomic index), results in
/// order; `tick` runs after each item (progress).
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
    tick: impl Fn() + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                if let Ok(mut o) = out.lock() {
                    o[i] = Some(r);
                }
                tick();
            });
        }
    });
    out.into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect()
}

/// A backend's device path (host entropy decoding, decode on the device), for
/// `stoker decode` and the decode benchmark.
pub type DeviceDecoder = Box<dyn stoker::backend::device::DeviceBatcher>;

/// The device decoder of `be`, or `None` for host backends. `hardware`: which JPEGs go
/// to the device's hardware decoder, where it has one (batches of `batch`).
pub fn device_decoder(
    be: &dyn stoker::backend::Backend,
    hardware: stoker::HardwareDecode,
    batch: usize,
) -> stoker::Result<Option<DeviceDecoder>> {
    be.batcher(&stoker::backend::device::BatcherConfig {
        ring: 2,
        batch_size: batch,
        hardware,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["a".into(), "10".into()]);
        t.row(vec!["long name".into(), "2".into()]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "name        n");
        assert_eq!(lines[2], "a          10");
        assert_eq!(lines[3], "long name   2");
    }

    #[test]
    fn causes_have_distinct_codes_and_a_row_in_the_table() {
        let table = Cause::table();
        for (i, c) in Cause::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(c.code()), i + 1);
            assert_eq!(Cause::from_code(c.code()), Some(c));
            assert!(table.contains(&format!("{:>2}  {}", c.code(), c.meaning())));
        }
        assert_eq!(Cause::from_code(0), None);
        let e = ErrorObject::new(Cause::BackendUnavailable, "cuda: not here");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"kind": "backend_unavailable", "message": "cuda: not here", "code": 4})
        );
    }

    #[test]
    fn the_cause_of_a_library_error_is_its_category() {
        let unavailable = stoker::Error::BackendUnavailable {
            backend: "cuda".into(),
            reason: "no GPU".into(),
        };
        let cases: [(Box<dyn std::error::Error>, Cause); 4] = [
            (Box::new(unavailable), Cause::BackendUnavailable),
            (Box::new(stoker::Error::config("RANK", "bad")), Cause::Usage),
            (fail(Cause::Output, "no folder"), Cause::Output),
            ("something else".into(), Cause::Failed),
        ];
        for (e, cause) in cases {
            assert_eq!(Cause::of(e.as_ref()), cause, "{e}");
        }
    }

    #[test]
    fn par_map_keeps_order() {
        let v: Vec<usize> = (0..100).collect();
        let r = par_map(&v, 4, |x| x * 2, || {});
        assert_eq!(r, (0..100).map(|x| x * 2).collect::<Vec<_>>());
    }
}

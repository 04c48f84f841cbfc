//! Errors, grouped by category, and the per-sample report [`SampleError`].

use std::path::PathBuf;

use serde::Serialize;

/// Everything that can go wrong in stoker, by category.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading a file or folder failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A dataset source could not be listed or is inconsistent.
    #[error("source error{}: {reason}", at(path))]
    Source {
        /// The file, folder or shard at fault, where there is one.
        path: Option<PathBuf>,
        /// What is wrong with it.
        reason: String,
    },
    /// Listing a folder tree went past a bound of its walk (`source::WalkOptions`: the
    /// entries looked at, the time taken) and stopped.
    #[error(
        "listing {} stopped: {bound} (after {entries} entries in {:.1} s; a link to a large folder, or a tree larger than the bounds of WalkOptions?)",
        path.display(),
        elapsed.as_secs_f64()
    )]
    Listing {
        /// The folder being listed.
        path: PathBuf,
        /// The bound passed.
        bound: ListingBound,
        /// Entries looked at.
        entries: u64,
        /// Time taken.
        elapsed: std::time::Duration,
    },
    /// A split could not be made, loaded or checked.
    #[error("split error{}: {reason}", at(path))]
    Split {
        /// The manifest, where one was read or written.
        path: Option<PathBuf>,
        /// What is wrong.
        reason: String,
    },
    /// A configuration value is out of range or contradicts another.
    #[error("invalid configuration: {setting}: {reason}")]
    Config {
        /// The setting at fault, as the builder or the environment names it
        /// (`batch_size`, `RANK`, ...).
        setting: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// A batch was read as another element type than the one it holds.
    #[error("the batch holds {found} images; they were asked for as {asked} (set Augment::dtype, or ask for {found})")]
    DType {
        /// The element type asked for.
        asked: &'static str,
        /// The element type the batch holds.
        found: &'static str,
    },
    /// A batch was asked for as a framework's tensor on another device than the one it
    /// lives on.
    #[error("the batch lives on {batch}, the tensor was asked for on {wanted}: {hint}")]
    DeviceMismatch {
        /// Where the batch lives (`cpu`, `wgpu: <adapter>`, `cuda: <context>`).
        batch: String,
        /// The device the tensor was asked for on.
        wanted: String,
        /// How to get the two on one device.
        hint: String,
    },
    /// A deep-learning framework (burn, candle) refused a step of the hand-off.
    #[error("{framework}: {reason}")]
    Framework {
        /// `burn` or `candle`.
        framework: &'static str,
        /// What the framework said.
        reason: String,
    },
    /// A configuration needs more of something than a limit allows.
    #[error("{what} needs {needed} bytes, more than the {limit} allowed")]
    Limit {
        /// What needs it (a batch buffer on a named device, the memory in flight).
        what: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes allowed.
        limit: u64,
    },
    /// Decoding an image outside the pipeline failed.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A sample failed under the `OnError::Fail` policy.
    #[error("{0}")]
    Sample(SampleError),
    /// The requested backend is not available in this build or on this machine.
    #[error("backend {backend} is unavailable: {reason}")]
    BackendUnavailable {
        /// The backend asked for.
        backend: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A GPU device failed at run time (out of memory, lost device, a batch that does
    /// not fit it). The source is typed: a `backend::device::DeviceError` for what every
    /// device backend shares, or the backend's own `CudaError` or `WgpuError` (down to
    /// the driver's error). It is boxed so that this module names nothing above it, as
    /// candle's `Error::Cuda` is; `DeviceError::of` finds the shared one again.
    #[error("device error: {0}")]
    Device(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A pipeline thread stopped in a way the pipeline cannot recover from.
    #[error("pipeline error: {0}")]
    Pipeline(#[from] PipelineError),
    /// A saved state cannot resume this pipeline (`Pipeline::resume`).
    #[error("cannot resume: {0}")]
    Resume(#[from] ResumeError),
    /// JSON (manifest, report) could not be read or written.
    #[error("json error in {what}: {source}")]
    Json {
        /// What was being read or written.
        what: String,
        /// The parser's message.
        source: serde_json::Error,
    },
}

/// The bound of a folder listing that [`Error::Listing`] passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListingBound {
    /// The most entries a listing looks at.
    Entries(u64),
    /// The longest a listing may take.
    Time(std::time::Duration),
}

impl std::fmt::Display for ListingBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListingBound::Entries(n) => write!(f, "more than {n} entries (max_entries)"),
            ListingBound::Time(t) => write!(f, "longer than {} s (max_time)", t.as_secs_f64()),
        }
    }
}

/// Why a saved [`ResumeState`](crate::pipeline::ResumeState) cannot resume a pipeline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// The state is of another format version than this stoker reads.
    #[error(
        "the state is of format version {found}; this version of stoker reads version {expected}"
    )]
    Version {
        /// The state's version.
        found: u32,
        /// The version this stoker writes and reads.
        expected: u32,
    },
    /// The state was taken with another seed.
    #[error("the state was taken with seed {state}; this pipeline's seed is {pipeline}")]
    Seed {
        /// The state's seed.
        state: u64,
        /// The pipeline's.
        pipeline: u64,
    },
    /// The state was taken on another dataset or another order: other samples, other
    /// weights or blocks, another `drop_last`, or under per-rank sharding another world
    /// size or sharding.
    #[error("the state was taken on another dataset or order (order fingerprint {state:016x}; this pipeline's is {pipeline:016x})")]
    Order {
        /// The state's fingerprint of the dataset and order.
        state: u64,
        /// The pipeline's.
        pipeline: u64,
    },
    /// The global batch size (batch size per rank times world size) changed: the global
    /// batches of the rest of the epoch would be others.
    #[error("the state was taken with global batches of {state} samples; this pipeline's are {pipeline} (batch size per rank x world size): resume with batch_size = {state} / world_size, or start the next epoch afresh")]
    GlobalBatchSize {
        /// The state's global batch size.
        state: u64,
        /// The pipeline's.
        pipeline: u64,
    },
    /// The samples consumed are not at the end of a global batch, or past the epoch.
    #[error("{consumed} samples consumed is not the end of a global batch of {global_batch_size} in an epoch of {total}")]
    Position {
        /// The state's samples consumed.
        consumed: u64,
        /// The global batch size.
        global_batch_size: u64,
        /// Samples in the epoch (padding left out).
        total: u64,
    },
    /// The state's per-source positions (over a [`Mixture`](crate::Mixture)) are not
    /// those its `samples_consumed` gives under this pipeline's order.
    #[error("the state says its mixed sources stand at {state:?}; its samples consumed are {pipeline:?} of them in this pipeline's order")]
    Sources {
        /// The state's counts per source.
        state: Vec<u64>,
        /// The pipeline's, at the state's position.
        pipeline: Vec<u64>,
    },
}

/// How a pipeline failed as a whole (not one sample: see [`SampleError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// A lock is poisoned: a thread panicked while holding it.
    #[error("the {what} is poisoned (a thread panicked while holding it)")]
    Poisoned {
        /// What the lock guards.
        what: &'static str,
    },
    /// A thread could not be started.
    #[error("cannot start the thread {name}: {source}")]
    Spawn {
        /// The thread's name.
        name: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The pipeline's threads stopped before the epoch was complete.
    #[error("pipeline threads stopped before the epoch was complete")]
    Stopped,
    /// A broken internal invariant: a bug in stoker (please report it).
    #[error("internal: {0}")]
    Internal(String),
    /// [`OnError::Replace`](crate::OnError::Replace) promises full batches, but for these
    /// samples every replacement candidate failed too (or the shard has no other sample).
    #[error(
        "OnError::Replace found no readable replacement in {attempts} attempts for {} sample(s): {}",
        samples.len(),
        list_samples(samples)
    )]
    ReplacementsExhausted {
        /// Candidates tried per failed sample.
        attempts: usize,
        /// The failed samples, each with its path and reason.
        samples: Vec<SampleError>,
    },
}

/// Up to eight samples as `path (reason)`, then how many more.
fn list_samples(samples: &[SampleError]) -> String {
    let mut s: Vec<String> = samples
        .iter()
        .take(8)
        .map(|e| format!("{} ({})", e.path, e.reason))
        .collect();
    if samples.len() > 8 {
        s.push(format!("and {} more", samples.len() - 8));
    }
    s.join("; ")
}

/// ` in {path}`, or nothing.
fn at(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map_or_else(String::new, |p| format!(" in {}", p.display()))
}

impl Error {
    /// An [`Error::Source`] about `path`.
    pub fn source_at(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Source {
            path: Some(path.into()),
            reason: reason.into(),
        }
    }

    /// An [`Error::Source`] about a dataset as a whole, no one file.
    pub fn dataset(reason: impl Into<String>) -> Self {
        Error::Source {
            path: None,
            reason: reason.into(),
        }
    }

    /// An [`Error::Split`], about the manifest at `path` where there is one.
    pub fn split(path: Option<&std::path::Path>, reason: impl Into<String>) -> Self {
        Error::Split {
            path: path.map(PathBuf::from),
            reason: reason.into(),
        }
    }

    /// An [`Error::Config`] about `setting`.
    pub fn config(setting: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Config {
            setting: setting.into(),
            reason: reason.into(),
        }
    }

    /// An internal [`PipelineError`]: a broken invariant.
    pub(crate) fn internal(reason: impl Into<String>) -> Self {
        Error::Pipeline(PipelineError::Internal(reason.into()))
    }

    /// A [`PipelineError::Poisoned`] lock.
    pub(crate) fn poisoned(what: &'static str) -> Self {
        Error::Pipeline(PipelineError::Poisoned { what })
    }

    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why one sample could not be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SampleErrorKind {
    /// The file is missing or could not be read.
    Io,
    /// The bytes are not a decodable image (corrupt, truncated, empty, another format).
    Decode,
    /// The image exceeds the configured limits (file size or pixel count).
    Limit,
    /// The image uses a feature this build does not decode.
    Unsupported,
    /// The label mask is missing, unreadable or does not match the image.
    Mask,
    /// A shard record is damaged: a checksum fails, a length is wrong, it is cut short.
    Corrupt,
    /// The sample's label is not a class id stoker takes (above [`crate::MAX_LABEL`],
    /// negative, or not a number), it has none in a dataset whose other samples have one,
    /// or its targets (boxes, keypoints, annotations) cannot be used.
    Label,
    /// An internal failure while processing the sample (a bug: please report it).
    Internal,
    /// The pipeline's user transform returned an error or panicked on the sample
    /// ([`crate::PipelineBuilder::transform`]).
    Transform,
}

/// A sample that could not be delivered, with where it came from and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("sample {id:016x} ({path}): {reason}")]
#[non_exhaustive]
pub struct SampleError {
    /// The stable sample id.
    pub id: u64,
    /// The sample's path (relative to the dataset root) or other location.
    pub path: String,
    /// The category of failure.
    pub kind: SampleErrorKind,
    /// A human-readable reason.
    pub reason: String,
}

/// Why an image could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Zero bytes.
    #[error("empty file")]
    Empty,
    /// Not a format stoker decodes (JPEG, PNG, WebP, BMP, TIFF, GIF).
    #[error("not a JPEG, PNG, WebP, BMP, TIFF or GIF (starts with {0})")]
    UnknownFormat(String),
    /// The headers are malformed or end early.
    #[error("bad header: {0}")]
    BadHeader(String),
    /// Width or height is zero.
    #[error("image has zero size ({width}x{height})")]
    ZeroSize {
        /// Width from the header.
        width: u32,
        /// Height from the header.
        height: u32,
    },
    /// More pixels than [`crate::decode::Limits::max_pixels`].
    #[error("{width}x{height} = {pixels} pixels exceeds the limit of {max} (decompression bomb?)")]
    TooManyPixels {
        /// Width from the header.
        width: u32,
        /// Height from the header.
        height: u32,
        /// Their product.
        pixels: u64,
        /// The limit.
        max: u64,
    },
    /// More bytes than [`crate::decode::Limits::max_bytes`].
    #[error("file of {bytes} bytes exceeds the limit of {max}")]
    TooManyBytes {
        /// File size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The JPEG decoder rejected the data.
    #[error("jpeg: {0}")]
    Jpeg(String),
    /// The PNG decoder rejected the data.
    #[error("png: {0}")]
    Png(String),
    /// The WebP, BMP, TIFF or GIF decoder rejected the data (or its limits were reached).
    #[error("{format}: {reason}")]
    Image {
        /// The format's lower-case name.
        format: &'static str,
        /// What the decoder said.
        reason: String,
    },
    /// A feature this build does not decode.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A label mask that is not a single-channel class map.
    #[error("label mask: {0}")]
    Mask(String),
    /// The decoder panicked; caught and reported instead of crashing the run.
    #[error("decoder failed internally: {0}")]
    Panicked(String),
}

impl DecodeError {
    /// The sample-error category of this failure.
    pub fn kind(&self) -> SampleErrorKind {
        match self {
            DecodeError::TooManyPixels { .. } | DecodeError::TooManyBytes { .. } => {
                SampleErrorKind::Limit
            }
            DecodeError::Unsupported(_) => SampleErrorKind::Unsupported,
            DecodeError::Mask(_) => SampleErrorKind::Mask,
            DecodeError::Panicked(_) => SampleErrorKind::Internal,
            _ => SampleErrorKind::Decode,
        }
    }
}

/// The message of a caught panic payload (`&str` or `String`), for error reports.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Implements `FromStr` for the settings enum `$ty` by [`parse_choice`]: the accepted
/// names and the variant each stands for, in the order the error lists them.
macro_rules! from_str_by_name {
    ($(#[$doc:meta])* $ty:ident, $setting:literal, $what:literal,
     { $($name:literal => $variant:ident),+ $(,)? }) => {
        impl std::str::FromStr for $ty {
            type Err = $crate::error::Error;
            $(#[$doc])*
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                $crate::error::parse_choice($setting, $what, s, &[$(($name, $ty::$variant)),+])
            }
        }
    };
}
pub(crate) use from_str_by_name;

/// Parses `value` (trimmed, any case) as one of the named `choices` of `setting`, for the
/// `FromStr` impls of the settings' enums ([`from_str_by_name`]). An unknown name is an [`Error::Config`] that
/// quotes it and lists the accepted names in the order given:
/// `unknown {what} "x" (expected a, b or c)`.
pub(crate) fn parse_choice<T: Copy>(
    setting: &str,
    what: &str,
    value: &str,
    choices: &[(&str, T)],
) -> Result<T> {
    let v = value.trim().to_ascii_lowercase();
    if let Some(&(_, t)) = choices.iter().find(|(name, _)| *name == v) {
        return Ok(t);
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    let expected = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    };
    Err(Error::config(
        setting,
        format!("unknown {what} {v:?} (expected {expected})"),
    ))
}

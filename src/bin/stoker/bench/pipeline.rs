//! `stoker bench pipeline`: the full pipeline with a simulated training step.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use serde_json::{Map, Value};
use stoker::{Augment, BackendKind, DType, HardwareDecode, Pipeline};

use super::plot::{self, Line};
use super::{plotted, positive, results_table, with_notes, BenchReport, BenchResult, Unavailable};
use crate::args::ArgError;
use crate::common::{self, fail, progress, Cause, Ctx, Failure, Report, Res, SAMPLES_DIR};

const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// Failures listed per backend (all are counted in `reported`).
const LISTED_FAILURES: usize = 20;

#[derive(Debug, Args)]
pub struct PipelineBenchArgs {
    /// Backends, comma-separated (auto, cpu, wgpu, cuda).
    #[arg(long, value_delimiter = ',', default_value = "cpu", value_parser = clap::value_parser!(BackendKind))]
    pub(super) backend: Vec<BackendKind>,
    /// Image folder (class sub-folders or flat), shards, a file list or one image; default:
    /// the bundled samples.
    #[arg(long)]
    images: Option<PathBuf>,
    /// Output size (random resized crop to size x size).
    #[arg(long, default_value = "224", value_parser = clap::value_parser!(u32).range(1..=16384))]
    size: u32,
    /// Samples per batch.
    #[arg(long, default_value = "32", value_parser = positive)]
    batch: usize,
    /// Epochs to run.
    #[arg(long, default_value = "2", value_parser = positive)]
    epochs: usize,
    /// Simulated training step after each batch, in milliseconds.
    #[arg(long, default_value = "0", value_parser = super::millis)]
    step_ms: u64,
    /// Decode and augment threads (default: available cores).
    #[arg(long, value_parser = positive)]
    workers: Option<usize>,
    /// Reader threads (default: 8, or 32 for a dataset in object storage).
    #[arg(long, value_parser = positive)]
    readers: Option<usize>,
    /// Batches prepared ahead (default: 2, or chosen by autotune).
    #[arg(long, value_parser = positive)]
    prefetch: Option<usize>,
    /// Autotune the readers, workers and prefetch not given (on or off): chosen and
    /// adjusted at run time from the stages' measured rates and waits.
    #[arg(
        long,
        default_value = "off",
        action = clap::ArgAction::Set,
        value_parser = clap::builder::TypedValueParser::map(
            clap::builder::PossibleValuesParser::new(["on", "off"]),
            |s: String| s == "on"
        )
    )]
    autotune: bool,
    /// Autotune's memory budget for the batch ring and the staging buffers, in MiB
    /// (default: a quarter of the available memory).
    #[arg(long, value_parser = cache_mb)]
    memory_budget_mb: Option<u64>,
    /// The most memory the crop index may take, in MiB (0: none): JPEGs' row indexes and
    /// progressive JPEGs' baseline copies, with which later crops decode less.
    #[arg(long, value_parser = cache_mb, default_value = "256")]
    crop_index_mb: u64,
    /// Block order with windows of this many shards (shards permuted, samples permuted
    /// within a window; not a full permutation): for shards in object storage, each
    /// window's shards fetched whole and held in memory. Default: a full permutation.
    #[arg(long, value_name = "SHARDS", value_parser = positive)]
    block_order: Option<usize>,
    /// Batch element type: u8 (no normalisation), f16 or f32.
    #[arg(long, default_value = "f32", value_parser = clap::value_parser!(DType))]
    dtype: DType,
    /// Decoded-sample cache, in MiB (0: none).
    #[arg(long, default_value = "0", value_parser = cache_mb)]
    cache_mb: u64,
    /// Device cache of decoded samples on the GPU backends, in MiB (0: none): cached
    /// epochs run on the device (`stats.device_cache_hits`).
    #[arg(long, default_value = "0", value_parser = cache_mb)]
    device_cache_mb: u64,
    /// Add a random affine warp to the transform (RandomAffine: rotation of up to 15
    /// degrees, translation of up to a tenth, scale 0.9 to 1.1, shear of up to 5 degrees).
    #[arg(long)]
    affine: bool,
    /// Add the SimCLR recipe's Gaussian blur to the transform (23x23 kernel, sigma 0.1 to
    /// 2, half the samples).
    #[arg(long)]
    blur: bool,
    /// Add an augmentation policy: `rand-augment` (RandAugment(2, 9, 31)) or
    /// `trivial-augment` (TrivialAugmentWide(31)).
    #[arg(long, value_parser = ["rand-augment", "trivial-augment"])]
    policy: Option<String>,
    /// Mix each batch with MixUp of this alpha (f16 and f32 only; with --cutmix too, each
    /// batch gets one of the two).
    #[arg(long, value_parser = alpha)]
    mixup: Option<f64>,
    /// Mix each batch with CutMix of this alpha.
    #[arg(long, value_parser = alpha)]
    cutmix: Option<f64>,
    /// Training seed.
    #[arg(long, default_value = "0")]
    seed: u64,
    /// JPEGs for the GPU's hardware decoder (CUDA with nvJPEG engines): exact (those it
    /// decodes as the CPU does), all, or off.
    #[arg(long, default_value = "exact", value_parser = clap::value_parser!(HardwareDecode))]
    hardware: HardwareDecode,
    /// The share of the JPEGs both the engines and device Huffman decoding take
    /// (restart-marked baseline files) that go to the engines, 0 to 1; the rest are
    /// Huffman-decoded on the SMs (CUDA with nvJPEG engines; elsewhere it changes nothing).
    #[arg(long, default_value = "1")]
    hardware_share: f32,
    /// This process's rank in data-parallel training (with --world-size); without both,
    /// from the launcher's environment (torchrun's RANK and WORLD_SIZE, else SLURM's
    /// SLURM_PROCID and SLURM_NTASKS), else 0 of 1.
    #[arg(long, requires = "world_size")]
    rank: Option<usize>,
    /// The number of data-parallel ranks (with --rank).
    #[arg(long, requires = "rank")]
    world_size: Option<usize>,
    /// Draw each batch's input wait against time, a line per backend, to this SVG file.
    #[arg(long, value_parser = plot::plot_file)]
    plot: Option<PathBuf>,
    /// Write a Chrome trace of the stages (a span per sample read, decoded and augmented,
    /// per batch waited for or submitted) to this JSON file, for Perfetto; with several
    /// backends, one file each, the backend's name before the extension.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Print a checksum of each epoch's delivery (CRC-32C over every batch's ids, pixels
    /// and errors, in order): runs that deliver the same batches print the same digests.
    #[arg(long)]
    digest: bool,
}

/// `--digest`: `crc` extended by one batch's ids, host pixels and errors.
fn digest_batch(crc: u32, batch: &stoker::Batch) -> Res<u32> {
    let mut crc = batch
        .ids()
        .iter()
        .fold(crc, |c, id| crc32c::crc32c_append(c, &id.to_le_bytes()));
    crc = crc32c::crc32c_append(crc, batch.raw_images()?);
    for e in batch.errors() {
        let text = format!("{} {} {:?} {}", e.id, e.path, e.kind, e.reason);
        crc = crc32c::crc32c_append(crc, text.as_bytes());
    }
    Ok(crc)
}

/// Where `--trace` writes `kind`'s trace: `path`, or with several backends `path` with the
/// backend's name before its extension.
fn trace_path(path: &std::path::Path, kind: BackendKind, backends: usize) -> PathBuf {
    if backends < 2 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy());
    let ext = path
        .extension()
        .map_or("json".into(), |e| e.to_string_lossy());
    path.with_file_name(format!("{stem}.{kind}.{ext}"))
}

impl PipelineBenchArgs {
    /// `(rank, world_size)`: the flags, else `RANK`/`WORLD_SIZE`, else `(0, 1)`. A
    /// malformed variable is a usage error naming it.
    fn shard(&self) -> Res<(usize, usize)> {
        Ok(match (self.rank, self.world_size) {
            (Some(r), Some(w)) if r < w => (r, w),
            (Some(r), Some(w)) => {
                return Err(fail(
                    Cause::Usage,
                    format!("--rank {r} must be below --world-size {w}"),
                ))
            }
            _ => stoker::source::sampler::shard_from_env()?,
        })
    }
}

/// `--cache-mb`, `--device-cache-mb`: MiB that fit in a `u64` of bytes (whether they fit in memory is the
/// pipeline's check, at build).
fn cache_mb(s: &str) -> Result<u64, ArgError> {
    let mb = s.trim().parse::<u64>()?;
    match mb.checked_mul(1 << 20) {
        Some(_) => Ok(mb),
        None => Err(ArgError::TooManyMib(mb)),
    }
}

/// `--mixup`, `--cutmix`: a positive, finite alpha.
fn alpha(s: &str) -> Result<f64, ArgError> {
    let a = s.trim().parse::<f64>()?;
    if a > 0.0 && a.is_finite() {
        Ok(a)
    } else {
        Err(ArgError::Alpha(a))
    }
}

/// A configuration error of the pipeline, as the option(s) that set it: the library
/// names its settings (`memory`, `batch_size`, ...), the user typed flags.
fn as_usage(e: stoker::Error) -> Box<dyn std::error::Error> {
    let flags = match &e {
        stoker::Error::Config { setting, .. } => match setting.as_str() {
            "memory" => "--size, --batch, --prefetch, --cache-mb",
            "cache_bytes" => "--cache-mb",
            "batch_size" => "--batch",
            "workers" => "--workers",
            "readers" => "--readers",
            "prefetch" => "--prefetch",
            "block_order" => "--block-order",
            "hardware_share" => "--hardware-share",
            "shard" => "--rank, --world-size",
            "mixup" | "cutmix" => "--mixup, --cutmix, --dtype",
            _ => return e.into(),
        },
        // A batch larger than the device's largest buffer (or its memory): the device's
        // side of the host's `memory` check, set by the same flags.
        stoker::Error::Limit { .. } => "--size, --batch, --dtype",
        _ => return e.into(),
    };
    fail(Cause::Usage, format!("{e} (set by {flags})"))
}

/// The JSON object of `bench pipeline`.
#[derive(Debug, Serialize)]
pub struct PipelineReport {
    results: Vec<PipelineResult>,
    images_dir: String,
    batch: usize,
    size: u32,
    dtype: DType,
    step_ms: u64,
    epochs: usize,
    /// This process's shard: rank `rank` of `world_size`.
    rank: usize,
    world_size: usize,
    /// Files that listing left out (not samples), each with the reason: a folder that
    /// could not be read, a FIFO, ...
    skipped: Vec<Failure>,
}

/// One backend's entry of `results`.
type PipelineResult = BenchResult<PipelineMeasured, PipelineUnavailable>;

/// What every entry of `results` holds: the counts of the run (at zero for a backend
/// that did not run).
#[derive(Debug, Serialize)]
struct Counts {
    epochs: usize,
    /// The shard this rank read: rank `rank` of `world_size`.
    rank: usize,
    world_size: usize,
    /// This rank's batches per epoch (`Pipeline::num_batches`); `null` when the backend
    /// did not run.
    batches: Option<usize>,
    /// Samples in the dataset (all ranks).
    samples: usize,
    delivered: u64,
    /// Samples reported as failed (skipped).
    reported: u64,
    images_per_s: f64,
    epoch_seconds: Vec<f64>,
}

/// A backend's measured run.
#[derive(Debug, Serialize)]
struct PipelineMeasured {
    backend: String,
    device: String,
    #[serde(flatten)]
    counts: Counts,
    /// The LAST epoch's (`Epoch::stats` after its iteration): the first epoch also pays
    /// thread start-up and cache filling.
    input_wait_fraction: f64,
    input_wait_fraction_per_epoch: Vec<f64>,
    /// `--digest`: each epoch's checksum of what it delivered, in hex (empty without).
    epoch_digests: Vec<String>,
    /// The last epoch's verdict (`Stats::report`): input-bound or not, each stage's
    /// utilisation, the bottleneck and what to try.
    report: Option<stoker::pipeline::Report>,
    batch: usize,
    size: u32,
    dtype: DType,
    step_ms: u64,
    readers: usize,
    prefetch: usize,
    /// `--block-order`: shards a window holds (`null`: a full permutation).
    block_order: Option<usize>,
    /// `--hardware-share`: the engines' share of the files both decoders take.
    hardware_share: f32,
    /// The pipeline's `Stats` without its error list (`failed` lists the first ones): a
    /// map, so a field added to `Stats` shows here unchanged.
    stats: Map<String, Value>,
    /// The first [`LISTED_FAILURES`] failures.
    failed: Vec<Failure>,
    /// Per batch, in delivery order over all epochs: when it arrived and how long the
    /// training loop waited for it.
    batch_waits: Vec<BatchWait>,
    /// This process's resident memory after each epoch (Linux's `VmRSS`; empty where the
    /// system does not say): flat after warm-up, or something grows.
    rss_bytes_per_epoch: Vec<u64>,
    /// The process's peak resident memory so far (`VmHWM`), after the last epoch.
    peak_rss_bytes: Option<u64>,
    /// The memory the crop index holds after the last epoch (`Pipeline::crop_index_bytes`).
    crop_index_bytes: usize,
    /// Which decoder took the encoded JPEGs, over every epoch (a hardware decoder's
    /// batches): all zero without one.
    decode_paths: stoker::backend::device::DecodePaths,
    /// Samples decoded on the hybrid path over every epoch (host entropy decoding, the
    /// device's IDCT and colour passes): the stats' `host_entropy`. Those whose entropy
    /// decoding ran on the device too (restart intervals, the sync decode) and those of
    /// the hardware decoder are the stats' other device paths.
    hybrid_samples: u64,
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`); `None` off Linux.
fn proc_status_bytes(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = text
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb.saturating_mul(1024))
}

/// One batch's entry of `batch_waits`.
#[derive(Debug, Serialize)]
struct BatchWait {
    /// Seconds from the start of the backend's first epoch to the batch's arrival.
    at_s: f64,
    /// Seconds the training loop waited for the batch.
    wait_s: f64,
}

/// A backend this build or machine lacks: the reason, and the figures at zero so a reader
/// finds the fields of a measured run.
#[derive(Debug, Serialize)]
struct PipelineUnavailable {
    backend: String,
    #[serde(flatten)]
    counts: Counts,
    /// Always `null`.
    input_wait_fraction: Option<f64>,
    error: String,
}

impl Unavailable for PipelineUnavailable {
    fn backend(&self) -> &str {
        &self.backend
    }

    fn error(&self) -> &str {
        &self.error
    }
}

pub fn run(ctx: Ctx, a: &PipelineBenchArgs) -> Res<Report> {
    let r = measure(ctx, a)?;
    let report = plotted(&r, a.plot.as_deref())?;
    // Samples reported instead of delivered: partly done (all of them: nothing could be
    // read). A run where no backend ran says so itself (`backend_unavailable`).
    Ok(match r.ran_counts() {
        Some((delivered, reported)) => report.failed_inputs(
            reported as usize,
            (delivered + reported) as usize,
            "sample reads",
        ),
        None => report,
    })
}

/// The augmentation `a` asks for.
fn augment_of(a: &PipelineBenchArgs) -> Augment {
    let mut aug = Augment::new()
        .random_resized_crop(a.size, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
        .flip_horizontal(0.5);
    if a.dtype != DType::U8 {
        aug = aug.normalize(IMAGENET_MEAN, IMAGENET_STD);
    }
    if a.affine {
        aug = aug.random_affine(
            stoker::Affine::new()
                .degrees(-15.0, 15.0)
                .translate(0.1, 0.1)
                .scale(0.9, 1.1)
                .shear(-5.0, 5.0),
        );
    }
    if a.blur {
        aug = aug.gaussian_blur((23, 23), (0.1, 2.0), 0.5);
    }
    match a.policy.as_deref() {
        Some("rand-augment") => aug = aug.rand_augment(2, 9, 31),
        Some(_) => aug = aug.trivial_augment_wide(31),
        None => {}
    }
    if let Some(alpha) = a.mixup {
        aug = aug.mixup(alpha);
    }
    if let Some(alpha) = a.cutmix {
        aug = aug.cutmix(alpha);
    }
    aug.dtype(a.dtype)
}

/// The result of a backend that is not available: `e`, why.
fn unavailable(
    a: &PipelineBenchArgs,
    kind: BackendKind,
    (rank, world_size): (usize, usize),
    samples: usize,
    e: &stoker::Error,
) -> PipelineResult {
    PipelineResult::Unavailable(PipelineUnavailable {
        backend: kind.to_string(),
        counts: Counts {
            epochs: a.epochs,
            rank,
            world_size,
            batches: None,
            samples,
            delivered: 0,
            reported: 0,
            images_per_s: 0.0,
            epoch_seconds: Vec::new(),
        },
        input_wait_fraction: None,
        error: e.to_string(),
    })
}

/// The pipeline `a` asks for on backend `kind`, as rank `shard.0` of `shard.1`.
fn builder(
    a: &PipelineBenchArgs,
    data: &stoker::Dataset,
    aug: &Augment,
    kind: BackendKind,
    (rank, world_size): (usize, usize),
) -> stoker::PipelineBuilder {
    let mut b = Pipeline::builder(data.clone().all())
        .backend(kind)
        .augment(aug.clone())
        .batch_size(a.batch)
        .autotune(a.autotune)
        .seed(a.seed)
        .shard(rank, world_size)
        .hardware_decode(a.hardware)
        .hardware_share(a.hardware_share)
        .cache_bytes(a.cache_mb.saturating_mul(1 << 20))
        .device_cache_bytes(a.device_cache_mb.saturating_mul(1 << 20));
    if let Some(k) = a.prefetch {
        b = b.prefetch(k);
    }
    if let Some(mb) = a.memory_budget_mb {
        b = b.memory_budget(mb.saturating_mul(1 << 20));
    }
    b = b.crop_index_bytes(
        usize::try_from(a.crop_index_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
    );
    if let Some(w) = a.workers {
        b = b.workers(w);
    }
    if let Some(r) = a.readers {
        b = b.readers(r);
    }
    if let Some(window) = a.block_order {
        b = b.block_order(window);
    }
    if let Some(path) = &a.trace {
        b = b.trace(trace_path(path, kind, a.backend.len()));
    }
    b
}

/// Runs the benchmark on every backend of `a`.
pub fn measure(ctx: Ctx, a: &PipelineBenchArgs) -> Res<PipelineReport> {
    let dir = common::resolve_dir(a.images.as_deref(), SAMPLES_DIR, "--images")?;
    let data = common::open_dataset(&dir)?;
    if data.is_empty() {
        return Err(crate::common::fail(
            crate::common::Cause::NoInput,
            format!("no images in {}", dir.display()),
        ));
    }
    let aug = augment_of(a);
    let step = Duration::from_millis(a.step_ms);
    let (rank, world_size) = a.shard()?;
    let mut results = Vec::new();
    for &kind in &a.backend {
        let b = builder(a, &data, &aug, kind, (rank, world_size));
        let pipe = match b.build() {
            Ok(p) => p,
            Err(e @ stoker::Error::BackendUnavailable { .. }) => {
                log::warn!("bench pipeline: {e}");
                results.push(unavailable(a, kind, (rank, world_size), data.len(), &e));
                continue;
            }
            Err(e) => return Err(as_usage(e)),
        };
        let pb = progress(
            ctx,
            (a.epochs * pipe.num_batches()) as u64,
            &format!("{kind} pipeline"),
        );
        let (mut delivered, mut reported) = (0u64, 0u64);
        let mut epoch_seconds = Vec::new();
        let mut wait_fractions = Vec::new();
        let mut last_report = None;
        let mut failed = Vec::new();
        let mut batch_waits = Vec::new();
        let mut rss_bytes_per_epoch = Vec::new();
        let mut epoch_digests = Vec::new();
        let start = Instant::now();
        for e in 0..a.epochs as u64 {
            let t = Instant::now();
            let mut epoch = pipe.epoch(e)?;
            let mut crc = 0u32;
            loop {
                let w = Instant::now();
                let Some(batch) = epoch.next() else { break };
                batch_waits.push(BatchWait {
                    at_s: start.elapsed().as_secs_f64(),
                    wait_s: w.elapsed().as_secs_f64(),
                });
                let batch = batch?;
                if a.digest {
                    crc = digest_batch(crc, &batch)?;
                }
                delivered += batch.len() as u64;
                reported += batch.errors().len() as u64;
                for err in batch.errors() {
                    log::info!("{err}");
                    if failed.len() < LISTED_FAILURES {
                        failed.push(Failure::new(err.path.as_str(), err.reason.trim_end()));
                    }
                }
                // The simulated training step holds the batch, as a real one would.
                std::thread::sleep(step);
                drop(batch);
                pb.inc(1);
            }
            // A device backend may still be working on the last batches.
            pipe.wait_device()?;
            epoch_seconds.push(t.elapsed().as_secs_f64());
            if a.digest {
                epoch_digests.push(format!("{crc:08x}"));
            }
            // Taken after the iteration: the epoch's wall clock stops at its last batch.
            let es = epoch.stats();
            wait_fractions.push(es.input_wait_fraction);
            last_report = Some(es.report());
            drop(epoch);
            rss_bytes_per_epoch.extend(proc_status_bytes("VmRSS"));
        }
        pb.finish_and_clear();
        let total: f64 = epoch_seconds.iter().sum();
        let paths = pipe.decode_paths();
        let stats = match serde_json::to_value(pipe.stats())? {
            Value::Object(mut o) => {
                o.remove("errors");
                o
            }
            _ => Map::new(),
        };
        let be = pipe.backend();
        results.push(PipelineResult::Ran(PipelineMeasured {
            backend: kind.to_string(),
            device: be.device(),
            counts: Counts {
                epochs: a.epochs,
                rank,
                world_size,
                batches: Some(pipe.num_batches()),
                samples: pipe.subset().len(),
                delivered,
                reported,
                images_per_s: delivered as f64 / total.max(1e-9),
                epoch_seconds,
            },
            input_wait_fraction: wait_fractions.last().copied().unwrap_or(0.0),
            input_wait_fraction_per_epoch: wait_fractions,
            epoch_digests,
            report: last_report,
            batch: a.batch,
            size: a.size,
            dtype: a.dtype,
            step_ms: a.step_ms,
            readers: pipe.readers(),
            prefetch: pipe.stats().prefetch,
            block_order: a.block_order,
            hardware_share: a.hardware_share,
            stats,
            failed,
            batch_waits,
            decode_paths: paths,
            hybrid_samples: pipe.stats().host_entropy,
            rss_bytes_per_epoch,
            peak_rss_bytes: proc_status_bytes("VmHWM"),
            crop_index_bytes: pipe.crop_index_bytes(),
        }));
    }
    Ok(PipelineReport {
        results,
        images_dir: dir.display().to_string(),
        batch: a.batch,
        size: a.size,
        dtype: a.dtype,
        step_ms: a.step_ms,
        epochs: a.epochs,
        rank,
        world_size,
        skipped: Failure::skipped_at_listing(&data),
    })
}

impl PipelineReport {
    /// Delivered and reported samples over the backends that ran; `None` when none did.
    fn ran_counts(&self) -> Option<(u64, u64)> {
        self.results
            .iter()
            .filter_map(|r| match r {
                PipelineResult::Ran(m) => Some((m.counts.delivered, m.counts.reported)),
                PipelineResult::Unavailable(_) => None,
            })
            .reduce(|a, b| (a.0 + b.0, a.1 + b.1))
    }
}

impl BenchReport for PipelineReport {
    /// The `--plot` chart: each batch's input wait against its arrival, a line per
    /// backend that ran.
    fn plot(&self, path: &std::path::Path) -> Res<()> {
        let lines: Vec<Line> = self
            .results
            .iter()
            .filter_map(|r| match r {
                PipelineResult::Ran(m) => Some(Line {
                    name: m.backend.clone(),
                    points: m
                        .batch_waits
                        .iter()
                        .map(|b| (b.at_s, 1000.0 * b.wait_s))
                        .collect(),
                }),
                PipelineResult::Unavailable(_) => None,
            })
            .collect();
        plot::lines(
            path,
            &format!(
                "pipeline: input wait per batch (batch {}, {}x{} {}, step {} ms)",
                self.batch,
                self.size,
                self.size,
                self.dtype.name(),
                self.step_ms
            ),
            "seconds since the backend's first epoch started",
            "input wait (ms)",
            &lines,
        )
    }

    /// The table of `bench pipeline`, with a note per unavailable backend and the listed
    /// failures.
    fn text(&self) -> String {
        let header = [
            "backend",
            "samples",
            "epochs",
            "batches",
            "delivered",
            "reported",
            "images/s",
            "epoch times",
            "input wait",
        ];
        let (t, mut notes) = results_table(&header, &self.results, |r, t, notes| {
            let c = &r.counts;
            let times: Vec<String> = c.epoch_seconds.iter().map(|s| format!("{s:.2}")).collect();
            t.row(vec![
                r.backend.clone(),
                c.samples.to_string(),
                c.epochs.to_string(),
                c.batches.map_or("-".into(), |b| b.to_string()),
                c.delivered.to_string(),
                c.reported.to_string(),
                format!("{:.1}", c.images_per_s),
                format!("{} s", times.join(" ")),
                format!("{:.1}%", 100.0 * r.input_wait_fraction),
            ]);
            if let Some(rep) = &r.report {
                notes.push_str(&format!("{} (last epoch): {rep}", r.backend));
            }
            if !r.failed.is_empty() {
                notes.push_str(&format!(
                    "{}: {} sample(s) reported (skipped); the first {}:\n",
                    r.backend,
                    c.reported,
                    r.failed.len()
                ));
                for x in &r.failed {
                    notes.push_str(&format!("  {}: {}\n", x.path, x.reason));
                }
            }
        });
        if !self.skipped.is_empty() {
            notes.push_str(&format!(
                "{} file(s) left out at listing (not samples):\n",
                self.skipped.len()
            ));
            for k in &self.skipped {
                notes.push_str(&format!("  {}: {}\n", k.path, k.reason));
            }
        }
        let shard = if self.world_size > 1 {
            format!(", rank {} of {}", self.rank, self.world_size)
        } else {
            String::new()
        };
        format!(
            "pipeline: {} (batch {}, {}x{} {}, step {} ms{shard}; input wait of the last epoch; batches per epoch of this rank)\n\n{}",
            self.images_dir,
            self.batch,
            self.size,
            self.size,
            self.dtype.name(),
            self.step_ms,
            with_notes(&t, &notes)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        let p: PipelineBenchArgs = crate::defaults().unwrap();
        assert_eq!(p.backend, vec![BackendKind::Cpu]);
        assert_eq!(
            (p.size, p.batch, p.epochs, p.dtype),
            (224, 32, 2, DType::F32)
        );
    }

    #[test]
    fn autotune_takes_on_and_off() {
        use clap::FromArgMatches;
        let parse = |args: &[&str]| {
            let cmd = PipelineBenchArgs::augment_args(clap::Command::new("p"));
            let m = cmd.try_get_matches_from(args.iter().copied())?;
            PipelineBenchArgs::from_arg_matches(&m)
        };
        let at = |args: &[&str]| parse(args).map(|p| p.autotune).unwrap();
        assert!(!at(&["p"]));
        assert!(at(&["p", "--autotune", "on"]));
        assert!(!at(&["p", "--autotune", "off"]));
        assert!(parse(&["p", "--autotune", "maybe"]).is_err());
        assert_eq!(parse(&["p"]).unwrap().prefetch, None);
    }

    #[test]
    fn dtype_names_are_the_serialised_ones() {
        for d in [DType::U8, DType::F16, DType::F32] {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name());
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
    }
}

//! `stoker bench decode`: decode throughput per backend on the same files, all read into
//! memory first.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use stoker::backend::{self, Backend};
use stoker::decode::{DecodeOptions, Image8};
use stoker::{BackendKind, HardwareDecode};

use super::plot::{self, Bar};
use super::{plotted, positive, results_table, with_notes, BenchReport, BenchResult, Unavailable};
use crate::common::{self, cores, progress, secs, Ctx, Failure, Report, Res, SAMPLES_DIR};

#[derive(Debug, Args)]
pub struct DecodeBenchArgs {
    /// Backends to compare, comma-separated (auto, cpu, wgpu, cuda).
    #[arg(long, value_delimiter = ',', default_value = "cpu", value_parser = clap::value_parser!(BackendKind))]
    pub(super) backend: Vec<BackendKind>,
    /// Image folder (class sub-folders or flat), shards, a file list or one image; default:
    /// the bundled samples.
    #[arg(long)]
    images: Option<PathBuf>,
    /// Images a thread takes at a time.
    #[arg(long, default_value = "32", value_parser = positive)]
    batch: usize,
    /// Passes over the files (default: enough for >= 1 s, at most 50).
    #[arg(long, value_parser = positive)]
    repeat: Option<usize>,
    /// Decoding threads (default: available cores).
    #[arg(long, value_parser = positive)]
    threads: Option<usize>,
    /// JPEGs for the GPU's hardware decoder (CUDA with nvJPEG engines): exact (those it
    /// decodes as the CPU does), all, or off.
    #[arg(long, default_value = "exact", value_parser = clap::value_parser!(HardwareDecode))]
    hardware: HardwareDecode,
    /// Where JPEGs are entropy-decoded on a GPU backend: device (the huffman pass for
    /// files with restart markers, and on wgpu the self-synchronising decode for
    /// baseline files without them; the host reads headers only) or host (libjpeg).
    #[arg(long, default_value = "device", value_parser = ["device", "host"])]
    entropy: String,
    /// Draw images/s per backend and decode path as bars to this SVG file.
    #[arg(long, value_parser = plot::plot_file)]
    plot: Option<PathBuf>,
}

impl DecodeBenchArgs {
    /// `--repeat`, or enough passes for about a second after a warm-up pass of
    /// `warm_seconds` (1 to 50).
    fn repeats_after(&self, warm_seconds: f64) -> usize {
        self.repeat
            .unwrap_or_else(|| ((1.0 / warm_seconds.max(1e-6)).ceil() as usize).clamp(1, 50))
    }
}

/// The JSON object of `bench decode`.
#[derive(Debug, Serialize)]
pub struct DecodeReport {
    results: Vec<DecodeResult>,
    images_dir: String,
    /// Files that could not be read into memory (not part of any run).
    unreadable: Vec<Failure>,
    /// Files read into memory, each decoded per pass.
    files: usize,
    threads: usize,
}

/// One backend's entry of `results`.
type DecodeResult = BenchResult<DecodeMeasured, DecodeUnavailable>;

/// What every entry of `results` holds: the figures of the timed passes (at zero for a
/// backend that did not run) and the threads.
#[derive(Debug, Default, Serialize)]
struct Figures {
    /// Successful decodes over all timed passes.
    images: u64,
    seconds: f64,
    images_per_s: f64,
    megapixels_per_s: f64,
    /// Files a device backend handed to the CPU whole.
    fallbacks: u64,
    /// Files the warm-up pass could not decode.
    errors: usize,
    threads: usize,
}

/// A backend's measured run.
#[derive(Debug, Serialize)]
struct DecodeMeasured {
    backend: String,
    device: String,
    #[serde(flatten)]
    figures: Figures,
    /// Timed passes over the files.
    repeats: usize,
    batch: usize,
    files: usize,
    bytes: u64,
    /// Files the warm-up pass could not decode.
    failed: Vec<Failure>,
    /// Device backends only.
    #[serde(flatten)]
    host: Option<HostFeed>,
}

/// On a device backend, the host side alone: how fast these threads feed the device (its
/// ceiling here).
#[derive(Debug, Serialize)]
struct HostFeed {
    /// Seconds the host threads spent preparing (entropy decoding, CPU decodes of
    /// fallbacks).
    host_seconds: f64,
    host_images_per_s: f64,
    /// Of the timed passes' images: those decoded on the hybrid path (host entropy
    /// decoding, the device's IDCT and colour passes)...
    hybrid_images: u64,
    /// ... and those handed whole to the hardware decoder's chain (the rest are
    /// `fallbacks`, decoded by the CPU before the device).
    hardware_images: u64,
    /// Which decoder of that chain took them (engines, nvJPEG's GPU decoder, the CPU),
    /// over the warm-up and the timed passes: all zero without a hardware decoder.
    decode_paths: stoker::backend::device::DecodePaths,
    /// Host thread time spent preparing one image for the device (headers, entropy
    /// decoding or the interval scan, packing, CPU decodes of fallbacks; file reading
    /// excluded: the files are in memory), in microseconds, over the timed passes.
    host_us_per_image: f64,
    /// Of the timed passes' images, how many took each decode path.
    paths: Paths,
    /// What the timed passes' batch plans came to: uploads, launches, copies, entropy
    /// read-backs (summed), and per sample and per batch.
    plan: stoker::backend::device::PlanCounts,
    upload_bytes_per_image: f64,
    launches_per_batch: f64,
}

/// Samples per decode path.
#[derive(Debug, Default, Serialize, Clone, Copy)]
struct Paths {
    /// Huffman-decoded on the device (JPEGs with restart markers).
    gpu_entropy: u64,
    /// Huffman-decoded on the device by the self-synchronising decode (wgpu: baseline
    /// JPEGs without restart markers).
    gpu_sync_entropy: u64,
    /// Entropy-decoded on the host, the rest on the device.
    host_entropy: u64,
    /// Handed whole to the hardware decoder's chain.
    hardware: u64,
    /// Decoded by the CPU before the device.
    cpu: u64,
}

/// A backend this build or machine lacks: the reason, and the figures at zero so a reader
/// finds the fields of a measured run.
#[derive(Debug, Serialize)]
struct DecodeUnavailable {
    backend: String,
    /// Always `null`: no device was opened.
    device: Option<String>,
    #[serde(flatten)]
    figures: Figures,
    error: String,
}

impl Unavailable for DecodeUnavailable {
    fn backend(&self) -> &str {
        &self.backend
    }

    fn error(&self) -> &str {
        &self.error
    }
}

impl DecodeUnavailable {
    fn new(kind: BackendKind, threads: usize, error: String) -> Self {
        DecodeUnavailable {
            backend: kind.to_string(),
            device: None,
            figures: Figures {
                threads,
                ..Figures::default()
            },
            error,
        }
    }
}

/// What every backend's run takes: the files, in memory, and the threads.
struct Inputs {
    files: Vec<Vec<u8>>,
    /// Display path of each file.
    paths: Vec<String>,
    bytes: u64,
    threads: usize,
}

/// What the timed passes counted.
struct DecodeRun {
    images: u64,
    pixels: u64,
    /// Files handed to the CPU whole (device backends).
    fallbacks: u64,
    seconds: f64,
}

impl DecodeRun {
    /// One backend's result of `bench decode`.
    fn measured(
        &self,
        kind: BackendKind,
        be: &dyn Backend,
        failed: Vec<Failure>,
        repeats: usize,
        a: &DecodeBenchArgs,
        inputs: &Inputs,
    ) -> DecodeMeasured {
        let s = self.seconds.max(1e-9);
        DecodeMeasured {
            backend: kind.to_string(),
            device: be.device(),
            figures: Figures {
                images: self.images,
                seconds: self.seconds,
                images_per_s: self.images as f64 / s,
                megapixels_per_s: self.pixels as f64 / 1e6 / s,
                fallbacks: self.fallbacks,
                errors: failed.len(),
                threads: inputs.threads,
            },
            repeats,
            batch: a.batch,
            files: inputs.files.len(),
            bytes: inputs.bytes,
            failed,
            host: None,
        }
    }
}

/// Decodes `repeats` passes over `files` on `threads` threads, work taken `batch` at a
/// time from an atomic index; counts successful decodes and their pixels.
fn decode_pass(
    files: &[Vec<u8>],
    repeats: usize,
    threads: usize,
    batch: usize,
    tick: &(dyn Fn(u64) + Sync),
) -> DecodeRun {
    let n = files.len();
    let total = n * repeats;
    let next = AtomicUsize::new(0);
    let opts = DecodeOptions::default();
    let start = Instant::now();
    let parts: Vec<(u64, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.clamp(1, total.max(1)))
            .map(|_| {
                s.spawn(|| {
                    let mut img = Image8::default();
                    let (mut ok, mut px) = (0u64, 0u64);
                    loop {
                        let first = next.fetch_add(batch, Ordering::Relaxed);
                        if first >= total {
                            break;
                        }
                        let end = (first + batch).min(total);
                        for i in first..end {
                            if let Ok(info) =
                                stoker::decode::cpu::decode_image(&files[i % n], &opts, &mut img)
                            {
                                ok += 1;
                                px += info.pixels();
                            }
                        }
                        tick((end - first) as u64);
                    }
                    (ok, px)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((0, 0)))
            .collect()
    });
    DecodeRun {
        images: parts.iter().map(|p| p.0).sum(),
        pixels: parts.iter().map(|p| p.1).sum(),
        // The CPU backend decodes every file itself: it never falls back.
        fallbacks: 0,
        seconds: start.elapsed().as_secs_f64(),
    }
}

pub fn run(ctx: Ctx, a: &DecodeBenchArgs) -> Res<Report> {
    let r = measure(ctx, a)?;
    plotted(&r, a.plot.as_deref())
}

/// Runs the benchmark on every backend of `a`.
pub fn measure(ctx: Ctx, a: &DecodeBenchArgs) -> Res<DecodeReport> {
    let dir = common::resolve_dir(a.images.as_deref(), SAMPLES_DIR, "--images")?;
    let data = common::open_dataset(&dir)?;
    let threads = a.threads.unwrap_or_else(cores);
    let limits = stoker::Limits::default();

    // Everything into memory first: the benchmark times decoding, not the disk.
    let pb = progress(ctx, data.len() as u64, "reading");
    let mut inputs = Inputs {
        files: Vec::new(),
        paths: Vec::new(),
        bytes: 0,
        threads,
    };
    let mut unreadable = Vec::new();
    for s in data.samples() {
        match s.location.read(limits.max_bytes) {
            Ok(b) => {
                inputs.paths.push(common::sample_display(s));
                inputs.files.push(b);
            }
            Err(reason) => {
                unreadable.push(Failure::new(common::sample_display(s), reason.to_string()))
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    if inputs.files.is_empty() {
        return Err(crate::common::fail(
            crate::common::Cause::NoInput,
            format!("no readable images in {}", dir.display()),
        ));
    }
    inputs.bytes = inputs.files.iter().map(|f| f.len() as u64).sum();
    let files = &inputs.files;

    let mut results = Vec::new();
    for &kind in &a.backend {
        let sel = match backend::select(kind, threads) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("bench decode: {e}");
                results.push(DecodeResult::Unavailable(DecodeUnavailable::new(
                    kind,
                    threads,
                    e.to_string(),
                )));
                continue;
            }
        };
        let be = sel.backend.as_ref();
        if let Some(dev) = common::device_decoder(be, a.hardware, a.batch)? {
            results.push(DecodeResult::Ran(decode_device(
                ctx, a, kind, be, dev, &inputs,
            )?));
            continue;
        }
        // Warm-up pass, one file at a time: which files fail, and how long a pass takes.
        let pb = progress(ctx, files.len() as u64, &format!("{kind} warm-up"));
        let opts = DecodeOptions::default();
        let warm_start = Instant::now();
        let per_file = common::par_map(
            files,
            threads,
            |f| {
                let mut img = Image8::default();
                stoker::decode::cpu::decode_image(f, &opts, &mut img).map(|_| ())
            },
            || pb.inc(1),
        );
        let warm = warm_start.elapsed().as_secs_f64();
        pb.finish_and_clear();
        let failed: Vec<Failure> = per_file
            .iter()
            .zip(&inputs.paths)
            .filter_map(|(r, p)| {
                r.as_ref()
                    .err()
                    .map(|e| Failure::new(p.as_str(), common::reason(e)))
            })
            .collect();
        let repeats = a.repeats_after(warm);
        let pb = progress(
            ctx,
            (repeats * files.len()) as u64,
            &format!("{kind} decode"),
        );
        let run = decode_pass(files, repeats, threads, a.batch, &|d| pb.inc(d));
        pb.finish_and_clear();
        results.push(DecodeResult::Ran(
            run.measured(kind, be, failed, repeats, a, &inputs),
        ));
    }
    Ok(DecodeReport {
        results,
        images_dir: dir.display().to_string(),
        unreadable,
        files: files.len(),
        threads,
    })
}

/// A file prepared for the device as the pipeline's workers prepare it (packed on this
/// thread).
fn prepare(
    bytes: &[u8],
    opts: &DecodeOptions,
    pool: &stoker::backend::device::CoeffPool,
    hardware: HardwareDecode,
    entropy: stoker::backend::device::job::EntropyPaths,
    max_binding: u64,
) -> Result<stoker::backend::device::job::Prepared, stoker::decode::DecodeError> {
    use stoker::backend::device::job::prepare_device;
    stoker::decode::peek_info(bytes)
        .and_then(|info| {
            stoker::decode::check_limits(&info, &opts.limits)?;
            prepare_device(bytes, info, opts, pool, hardware, entropy, max_binding)
        })
        .and_then(|p| p.fit_bindings(bytes, opts, pool, max_binding))
        // Packed on this thread, as the pipeline's workers do.
        .and_then(|p| p.packed(pool))
}

/// Counts the path a prepared file takes.
fn count_path(counts: &std::sync::Mutex<Paths>, p: &stoker::backend::device::job::Prepared) {
    use stoker::backend::device::DeviceSample;
    if let Ok(mut c) = counts.lock() {
        match (&p.image, &p.cpu_reason) {
            (_, Some(_)) => c.cpu += 1,
            (DeviceSample::Entropy { packed, .. }, _) if packed.sync.is_some() => {
                c.gpu_sync_entropy += 1
            }
            (DeviceSample::Entropy { .. }, _) => c.gpu_entropy += 1,
            (DeviceSample::Encoded { .. }, _) => c.hardware += 1,
            _ => c.host_entropy += 1,
        }
    }
}

/// Takes the samples the device `rejected` out of the batch (`samples` and their
/// `of_sample` entries), their inputs back to `pool`.
fn remove_rejected(
    rejected: &[stoker::backend::device::Rejected],
    samples: &mut Vec<stoker::backend::device::DeviceSample>,
    of_sample: &mut Vec<(usize, u64)>,
    pool: &stoker::backend::device::CoeffPool,
) {
    let mut gone: Vec<usize> = rejected.iter().map(|r| r.sample).collect();
    gone.sort_unstable();
    gone.dedup();
    for &k in gone.iter().rev() {
        if k < samples.len() {
            pool.recycle(std::iter::once(samples.remove(k)));
            of_sample.remove(k);
        }
    }
}

/// The plan counts of what ran between the counts `before` and `after`.
fn plan_delta(
    before: stoker::backend::device::PlanCounts,
    after: stoker::backend::device::PlanCounts,
) -> stoker::backend::device::PlanCounts {
    stoker::backend::device::PlanCounts {
        batches: after.batches - before.batches,
        samples: after.samples - before.samples,
        upload_bytes: after.upload_bytes - before.upload_bytes,
        decode_input_bytes: after.decode_input_bytes - before.decode_input_bytes,
        launches: after.launches - before.launches,
        copies: after.copies - before.copies,
        entropy_checks: after.entropy_checks - before.entropy_checks,
        payload_bytes: after.payload_bytes - before.payload_bytes,
    }
}

impl HostFeed {
    /// The host side of `run`: `host` seconds preparing, `encoded` files handed to the
    /// hardware decoder, the `plan` counts; the decode paths, the time per image and the
    /// paths taken left at their defaults.
    fn of(
        run: &DecodeRun,
        host: f64,
        encoded: u64,
        plan: stoker::backend::device::PlanCounts,
    ) -> HostFeed {
        HostFeed {
            host_seconds: host,
            host_images_per_s: run.images as f64 / host.max(1e-9),
            hybrid_images: run.images.saturating_sub(run.fallbacks + encoded),
            hardware_images: encoded,
            decode_paths: Default::default(),
            host_us_per_image: 0.0,
            paths: Paths::default(),
            plan,
            upload_bytes_per_image: plan.upload_bytes as f64 / plan.samples.max(1) as f64,
            launches_per_batch: plan.launches as f64 / plan.batches.max(1) as f64,
        }
    }
}

/// What takes the samples the device flags (damaged entropy-coded data) to the host
/// path, as the pipeline does.
struct Rehost<'a> {
    pool: &'a stoker::backend::device::CoeffPool,
    max_binding: u64,
    counts: &'a std::sync::Mutex<Paths>,
}

impl Rehost<'_> {
    /// Prepares each of the `flagged` samples on the host path, in place in `samples`;
    /// counts the CPU decodes among them in `fallbacks`.
    fn flagged(
        &self,
        flagged: &[(usize, u32)],
        samples: &mut [stoker::backend::device::DeviceSample],
        fallbacks: &mut u64,
    ) -> Res<()> {
        use stoker::backend::device::job::prepare_host;
        use stoker::backend::device::DeviceSample;
        let (pool, max_binding) = (self.pool, self.max_binding);
        for &(k, _) in flagged {
            let Some(DeviceSample::Entropy {
                packed,
                bytes,
                info,
                opts,
                ..
            }) = samples.get(k)
            else {
                return Err(
                    format!("the device flagged sample {k}, not on its entropy path").into(),
                );
            };
            let p = prepare_host(bytes, *info, opts, pool).and_then(|p| {
                p.fit_bindings(bytes, opts, pool, max_binding)
                    .and_then(|p| p.packed(pool))
            })?;
            if let Ok(mut c) = self.counts.lock() {
                match packed.sync {
                    Some(_) => c.gpu_sync_entropy = c.gpu_sync_entropy.saturating_sub(1),
                    None => c.gpu_entropy = c.gpu_entropy.saturating_sub(1),
                }
                if p.cpu_reason.is_some() {
                    c.cpu += 1;
                    *fallbacks += 1;
                } else {
                    c.host_entropy += 1;
                }
            }
            samples[k] = p.image;
        }
        Ok(())
    }
}

/// `bench decode` on a device backend: host threads entropy-decode `batch` files at a
/// time (CPU-only files are decoded whole by the CPU, counted as fallbacks), and the
/// device decodes each group while the threads work on the next; the clock stops after
/// the device has finished.
fn decode_device(
    ctx: Ctx,
    a: &DecodeBenchArgs,
    kind: BackendKind,
    be: &dyn Backend,
    mut dev: common::DeviceDecoder,
    inputs: &Inputs,
) -> Res<DecodeMeasured> {
    use stoker::backend::device::{CoeffPool, DeviceError, DeviceSample};
    let (files, paths, threads) = (&inputs.files, &inputs.paths, inputs.threads);
    let opts = DecodeOptions::default();
    let pool = CoeffPool::default();
    let hardware = dev.hardware_decode();
    let max_binding = dev.max_binding();
    let entropy = stoker::backend::device::job::EntropyPaths {
        restart: a.entropy == "device",
        sync: a.entropy == "device" && dev.sync_entropy(),
    };
    let thread_ns = std::sync::atomic::AtomicU64::new(0);
    let counts = std::sync::Mutex::new(Paths::default());
    // Returns the run, the CPU fallbacks, the failures, and the seconds the host threads
    // spent preparing (entropy decoding, and CPU decodes of fallbacks).
    let pass = |dev: &mut common::DeviceDecoder,
                repeats: usize,
                tick: &dyn Fn(u64)|
     -> Res<(DecodeRun, Vec<Failure>, f64, u64)> {
        let n = files.len();
        let total = n * repeats;
        let (mut images, mut pixels, mut fallbacks) = (0u64, 0u64, 0u64);
        // Files handed to the hardware decoder whole (and decoded by one of its chain).
        let mut encoded = 0u64;
        let mut failed = Vec::new();
        let start = Instant::now();
        let mut host = 0.0;
        let mut first = 0;
        while first < total {
            let idx: Vec<usize> = (first..(first + a.batch).min(total)).collect();
            let t = Instant::now();
            let prepared = common::par_map(
                &idx,
                threads,
                |&i| {
                    let bytes = &files[i % n];
                    let t = Instant::now();
                    let p = prepare(bytes, &opts, &pool, hardware, entropy, max_binding);
                    thread_ns.fetch_add(
                        t.elapsed().as_nanos() as u64,
                        std::sync::atomic::Ordering::Relaxed,
                    );
                    p
                },
                || {},
            );
            host += t.elapsed().as_secs_f64();
            let mut samples: Vec<DeviceSample> = Vec::with_capacity(idx.len());
            let mut of_sample: Vec<(usize, u64)> = Vec::with_capacity(idx.len());
            for (p, &i) in prepared.into_iter().zip(&idx) {
                match p {
                    Ok(p) => {
                        images += 1;
                        pixels += p.info.pixels();
                        fallbacks += u64::from(p.cpu_reason.is_some());
                        encoded += u64::from(matches!(p.image, DeviceSample::Encoded { .. }));
                        count_path(&counts, &p);
                        of_sample.push((i, p.info.pixels()));
                        samples.push(p.image);
                    }
                    Err(e) if i < n => {
                        failed.push(Failure::new(paths[i].as_str(), common::reason(e)))
                    }
                    Err(_) => {}
                }
            }
            // Files nothing on the device decodes are reported as the warm-up's failures
            // (and not counted), and the batch runs again without them.
            loop {
                match dev.decode(&samples) {
                    Ok(()) => break,
                    Err(e) => {
                        if let Some(DeviceError::EntropyFlagged(flagged)) = DeviceError::of(&e) {
                            // Damaged data: the host path, as the pipeline does.
                            let rehost = Rehost {
                                pool: &pool,
                                max_binding,
                                counts: &counts,
                            };
                            rehost.flagged(flagged, &mut samples, &mut fallbacks)?;
                            continue;
                        }
                        let Some(DeviceError::Rejected(rejected)) = DeviceError::of(&e) else {
                            return Err(e.into());
                        };
                        for r in rejected {
                            let Some(&(i, px)) = of_sample.get(r.sample) else {
                                return Err(format!(
                                    "the device rejected sample {} of a batch of {}",
                                    r.sample,
                                    samples.len()
                                )
                                .into());
                            };
                            images = images.saturating_sub(1);
                            encoded = encoded.saturating_sub(1);
                            pixels = pixels.saturating_sub(px);
                            if i < n {
                                failed.push(Failure::new(paths[i].as_str(), r.reason.clone()));
                            }
                        }
                        remove_rejected(rejected, &mut samples, &mut of_sample, &pool);
                    }
                }
            }
            pool.recycle(samples);
            tick(idx.len() as u64);
            first += a.batch;
        }
        dev.wait()?;
        let run = DecodeRun {
            images,
            pixels,
            fallbacks,
            seconds: start.elapsed().as_secs_f64(),
        };
        Ok((run, failed, host, encoded))
    };
    let pb = progress(ctx, files.len() as u64, &format!("{kind} warm-up"));
    let (warm, failed, _, _) = pass(&mut dev, 1, &|d| pb.inc(d))?;
    thread_ns.store(0, std::sync::atomic::Ordering::Relaxed);
    if let Ok(mut c) = counts.lock() {
        *c = Paths::default();
    }
    pb.finish_and_clear();
    let repeats = a.repeats_after(warm.seconds);
    let pb = progress(
        ctx,
        (repeats * files.len()) as u64,
        &format!("{kind} decode"),
    );
    let before = dev.plan_counts();
    let (run, _, host, encoded) = pass(&mut dev, repeats, &|d| pb.inc(d))?;
    let after = dev.plan_counts();
    let plan = plan_delta(before, after);
    pb.finish_and_clear();
    let mut r = run.measured(kind, be, failed, repeats, a, inputs);
    r.host = Some(HostFeed {
        decode_paths: dev.decode_paths(),
        host_us_per_image: thread_ns.load(std::sync::atomic::Ordering::Relaxed) as f64
            / 1e3
            / run.images.max(1) as f64,
        paths: counts.lock().map(|c| *c).unwrap_or_default(),
        ..HostFeed::of(&run, host, encoded, plan)
    });
    Ok(r)
}

/// The decode paths of the `--plot` bars, by colour: a CPU backend's decode, a device
/// backend's (host and device, end to end), and its host side alone.
const DECODE_PATHS: [&str; 3] = [
    "CPU decode",
    "device decode (end to end)",
    "host side of the device decode",
];

impl BenchReport for DecodeReport {
    /// The `--plot` bars: per backend that ran, its images/s, and on a device backend
    /// also its host side's; a backend that did not run keeps its place, unfilled.
    fn plot(&self, path: &std::path::Path) -> Res<()> {
        let mut bars = Vec::new();
        for r in &self.results {
            match r {
                DecodeResult::Ran(m) => {
                    bars.push(Bar {
                        label: m.backend.clone(),
                        value: Some(m.figures.images_per_s),
                        kind: if m.host.is_some() { 1 } else { 0 },
                    });
                    if let Some(h) = &m.host {
                        bars.push(Bar {
                            label: format!("{} host", m.backend),
                            value: Some(h.host_images_per_s),
                            kind: 2,
                        });
                    }
                }
                DecodeResult::Unavailable(u) => bars.push(Bar {
                    label: format!("{} (unavailable)", u.backend),
                    value: None,
                    kind: 0,
                }),
            }
        }
        plot::bars(
            path,
            &format!(
                "decode throughput: {} files, {} threads",
                self.files, self.threads
            ),
            "images/s",
            &DECODE_PATHS,
            &bars,
        )
    }

    /// The table of `bench decode`, with a note per unavailable backend and failure.
    fn text(&self) -> String {
        let header = [
            "backend",
            "device",
            "passes",
            "images",
            "time",
            "images/s",
            "Mpx/s",
            "errors",
            "fallbacks",
        ];
        let (t, mut notes) = results_table(&header, &self.results, |r, t, notes| {
            let f = &r.figures;
            t.row(vec![
                r.backend.clone(),
                r.device.clone(),
                r.repeats.to_string(),
                f.images.to_string(),
                secs(f.seconds),
                format!("{:.1}", f.images_per_s),
                format!("{:.1}", f.megapixels_per_s),
                f.errors.to_string(),
                f.fallbacks.to_string(),
            ]);
            if let Some(h) = &r.host {
                notes.push_str(&format!(
                        "{}: host threads prepared {:.1} images/s (entropy decoding and CPU fallbacks), the most this host can feed the device\n",
                        r.backend, h.host_images_per_s
                    ));
                let p = &h.paths;
                notes.push_str(&format!(
                    "{}: {:.1} us of host thread time per image; paths: {} GPU entropy, {} GPU sync entropy, {} host entropy, {} hardware, {} CPU\n",
                    r.backend, h.host_us_per_image, p.gpu_entropy, p.gpu_sync_entropy, p.host_entropy, p.hardware, p.cpu
                ));
                notes.push_str(&format!(
                    "{}: {:.0} bytes uploaded per image, {:.1} launches per batch\n",
                    r.backend, h.upload_bytes_per_image, h.launches_per_batch
                ));
            }
            for x in &r.failed {
                notes.push_str(&format!(
                    "{}: cannot decode {}: {}\n",
                    r.backend, x.path, x.reason
                ));
            }
        });
        for x in &self.unreadable {
            notes.push_str(&format!("cannot read {}: {}\n", x.path, x.reason));
        }
        format!(
            "decode throughput: {} ({} files, {} threads)\n\n{}",
            self.images_dir,
            self.files,
            self.threads,
            with_notes(&t, &notes)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        let d: DecodeBenchArgs = crate::defaults().unwrap();
        assert_eq!(d.backend, vec![BackendKind::Cpu]);
        assert_eq!((d.batch, d.hardware), (32, HardwareDecode::Exact));
    }

    #[test]
    fn an_unavailable_backend_keeps_the_measured_fields() {
        let u = serde_json::to_value(DecodeResult::Unavailable(DecodeUnavailable::new(
            BackendKind::Cuda,
            4,
            "not built".into(),
        )))
        .unwrap();
        let keys: Vec<&str> = u.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "backend",
                "device",
                "error",
                "errors",
                "fallbacks",
                "images",
                "images_per_s",
                "megapixels_per_s",
                "seconds",
                "threads"
            ]
        );
        assert!(u["device"].is_null());
    }
}

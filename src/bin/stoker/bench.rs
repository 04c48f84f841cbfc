//! `stoker bench`: decode throughput, the full pipeline, and the overlap experiment.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use stoker::backend::{self, Backend};
use stoker::decode::{DecodeOptions, Image8};
use stoker::source::{sample_id, Location, Sample};
use stoker::{Augment, BackendKind, DType, Dataset, HardwareDecode, Pipeline};

use crate::common::{self, cores, kv, progress, secs, Ctx, Report, Res, Table, SAMPLES_DIR};

const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// At least 1 (a value parser for counts and sizes).
pub fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

// ---------------------------------------------------------------------------------------
// bench decode

#[derive(Debug, Args)]
pub struct DecodeBenchArgs {
    /// Backends to compare, comma-separated (auto, cpu, wgpu, cuda).
    #[arg(long, value_delimiter = ',', default_value = "cpu", value_parser = clap::value_parser!(BackendKind))]
    backend: Vec<BackendKind>,
    /// Image folder (class sub-folders or flat); default: the bundled samples.
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
}

struct DecodeRun {
    images: u64,
    pixels: u64,
    seconds: f64,
}

impl DecodeRun {
    /// One backend's result object of `bench decode`.
    #[allow(clippy::too_many_arguments)]
    fn json(
        &self,
        kind: BackendKind,
        be: &dyn Backend,
        fallbacks: u64,
        failed: Vec<Value>,
        threads: usize,
        repeats: usize,
        a: &DecodeBenchArgs,
        files: usize,
        bytes: u64,
    ) -> Value {
        let s = self.seconds.max(1e-9);
        json!({
            "backend": kind.to_string(),
            "device": be.device(),
            "images": self.images,
            "seconds": self.seconds,
            "images_per_s": self.images as f64 / s,
            "megapixels_per_s": self.pixels as f64 / 1e6 / s,
            "fallbacks": fallbacks,
            "errors": failed.len(),
            "threads": threads,
            "repeats": repeats,
            "batch": a.batch,
            "files": files,
            "bytes": bytes,
            "failed": failed,
        })
    }
}

impl DecodeBenchArgs {
    /// `--repeat`, or enough passes for about a second after a warm-up pass of
    /// `warm_seconds` (1 to 50).
    fn repeats_after(&self, warm_seconds: f64) -> usize {
        self.repeat
            .unwrap_or_else(|| ((1.0 / warm_seconds.max(1e-6)).ceil() as usize).clamp(1, 50))
    }
}

/// Decodes `repeats` passes over `files` on `threads` threads, work taken `batch` at a
/// time from an atomic index; counts successful decodes and their pixels.
fn decode_pass(
    be: &dyn Backend,
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
                            if let Ok(info) = be.decode_image(&files[i % n], &opts, &mut img) {
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
        seconds: start.elapsed().as_secs_f64(),
    }
}

pub fn decode(ctx: Ctx, a: &DecodeBenchArgs) -> Res<Report> {
    let dir = common::resolve_dir(a.images.as_deref(), SAMPLES_DIR, "--images")?;
    let data = common::open_dataset(&dir)?;
    let threads = a.threads.unwrap_or_else(cores);
    let limits = stoker::Limits::default();

    // Everything into memory first: the benchmark times decoding, not the disk.
    let pb = progress(ctx, data.len() as u64, "reading");
    let mut paths = Vec::new();
    let mut files = Vec::new();
    let mut unreadable = Vec::new();
    for s in data.samples() {
        match s.location.read(limits.max_bytes) {
            Ok(b) => {
                paths.push(common::sample_display(s));
                files.push(b);
            }
            Err(reason) => {
                unreadable.push(json!({"path": common::sample_display(s), "reason": reason}))
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    if files.is_empty() {
        return Err(format!("no readable images in {}", dir.display()).into());
    }
    let bytes: u64 = files.iter().map(|f| f.len() as u64).sum();

    let mut results = Vec::new();
    for &kind in &a.backend {
        let sel = match backend::select(kind, threads) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("bench decode: {e}");
                results.push(json!({
                    "backend": kind.to_string(), "device": Value::Null, "images": 0,
                    "seconds": 0.0, "images_per_s": 0.0, "megapixels_per_s": 0.0,
                    "fallbacks": 0, "errors": 0, "threads": threads, "error": e.to_string(),
                }));
                continue;
            }
        };
        let be = sel.backend.as_ref();
        if let Some(dev) = common::device_decoder(be, a.hardware, a.batch)? {
            results.push(decode_device(
                ctx, a, kind, be, dev, &files, &paths, threads,
            )?);
            continue;
        }
        // Warm-up pass, one file at a time: which files fail, and how long a pass takes.
        let pb = progress(ctx, files.len() as u64, &format!("{kind} warm-up"));
        let opts = DecodeOptions::default();
        let warm_start = Instant::now();
        let per_file = common::par_map(
            &files,
            threads,
            |f| {
                let mut img = Image8::default();
                be.decode_image(f, &opts, &mut img).map(|_| ())
            },
            || pb.inc(1),
        );
        let warm = warm_start.elapsed().as_secs_f64();
        pb.finish_and_clear();
        let failed: Vec<Value> = per_file
            .iter()
            .zip(&paths)
            .filter_map(|(r, p)| {
                r.as_ref()
                    .err()
                    .map(|e| json!({"path": p, "reason": common::reason(e)}))
            })
            .collect();
        let repeats = a.repeats_after(warm);
        let pb = progress(
            ctx,
            (repeats * files.len()) as u64,
            &format!("{kind} decode"),
        );
        let run = decode_pass(be, &files, repeats, threads, a.batch, &|d| pb.inc(d));
        pb.finish_and_clear();
        // The CPU backend decodes every file itself: it never falls back.
        results.push(run.json(kind, be, 0, failed, threads, repeats, a, files.len(), bytes));
    }
    let json = json!({
        "results": results,
        "images_dir": dir.display().to_string(),
        "unreadable": unreadable,
        "files": files.len(),
        "threads": threads,
    });
    let text = decode_text(&json);
    Ok(Report::ok(json, text))
}

/// `bench decode` on a device backend: host threads entropy-decode `batch` files at a
/// time (CPU-only files are decoded whole by the CPU, counted as fallbacks), and the
/// device decodes each group while the threads work on the next; the clock stops after
/// the device has finished.
#[allow(clippy::too_many_arguments)]
fn decode_device(
    ctx: Ctx,
    a: &DecodeBenchArgs,
    kind: BackendKind,
    be: &dyn Backend,
    mut dev: common::DeviceDecoder,
    files: &[Vec<u8>],
    paths: &[String],
    threads: usize,
) -> Res<Value> {
    use stoker::backend::device::job::prepare_with;
    use stoker::backend::device::{CoeffPool, DeviceSample};
    let opts = DecodeOptions::default();
    let pool = CoeffPool::default();
    let hardware = dev.hardware_decode();
    // Returns the run, the CPU fallbacks, the failures, and the seconds the host threads
    // spent preparing (entropy decoding, and CPU decodes of fallbacks).
    let pass = |dev: &mut common::DeviceDecoder,
                repeats: usize,
                tick: &dyn Fn(u64)|
     -> Res<(DecodeRun, u64, Vec<Value>, f64)> {
        let n = files.len();
        let total = n * repeats;
        let (mut images, mut pixels, mut fallbacks) = (0u64, 0u64, 0u64);
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
                |&i| prepare_with(&files[i % n], &opts, &pool, hardware),
                || {},
            );
            host += t.elapsed().as_secs_f64();
            let mut samples: Vec<DeviceSample> = Vec::with_capacity(idx.len());
            for (p, &i) in prepared.into_iter().zip(&idx) {
                match p {
                    Ok(p) => {
                        images += 1;
                        pixels += p.info.pixels();
                        fallbacks += u64::from(p.cpu_reason.is_some());
                        samples.push(p.image);
                    }
                    Err(e) if i < n => {
                        failed.push(json!({"path": paths[i], "reason": common::reason(e)}))
                    }
                    Err(_) => {}
                }
            }
            dev.submit(&samples)?;
            pool.recycle(samples);
            tick(idx.len() as u64);
            first += a.batch;
        }
        dev.wait()?;
        let run = DecodeRun {
            images,
            pixels,
            seconds: start.elapsed().as_secs_f64(),
        };
        Ok((run, fallbacks, failed, host))
    };
    let pb = progress(ctx, files.len() as u64, &format!("{kind} warm-up"));
    let (warm, _, failed, _) = pass(&mut dev, 1, &|d| pb.inc(d))?;
    pb.finish_and_clear();
    let repeats = a.repeats_after(warm.seconds);
    let pb = progress(
        ctx,
        (repeats * files.len()) as u64,
        &format!("{kind} decode"),
    );
    let (run, fallbacks, _, host) = pass(&mut dev, repeats, &|d| pb.inc(d))?;
    pb.finish_and_clear();
    let bytes = files.iter().map(|f| f.len() as u64).sum();
    let mut r = run.json(
        kind,
        be,
        fallbacks,
        failed,
        threads,
        repeats,
        a,
        files.len(),
        bytes,
    );
    if let Some(o) = r.as_object_mut() {
        // The host side alone: how fast these threads feed the device (its ceiling here).
        o.insert("host_seconds".into(), json!(host));
        o.insert(
            "host_images_per_s".into(),
            json!(run.images as f64 / host.max(1e-9)),
        );
    }
    Ok(r)
}

fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn st(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// For a result of a backend this build or machine lacks: a table row and a note with
/// the reason. Returns whether it was one.
fn unavailable(r: &Value, t: &mut Table, notes: &mut String) -> bool {
    let Some(e) = r.get("error").and_then(Value::as_str) else {
        return false;
    };
    t.row(vec![st(r, "backend"), "unavailable".into()]);
    notes.push_str(&format!("{}: {e}\n", st(r, "backend")));
    true
}

fn decode_text(j: &Value) -> String {
    let mut t = Table::new(&[
        "backend",
        "device",
        "passes",
        "images",
        "time",
        "images/s",
        "Mpx/s",
        "errors",
        "fallbacks",
    ]);
    let mut notes = String::new();
    for r in j["results"].as_array().into_iter().flatten() {
        if unavailable(r, &mut t, &mut notes) {
            continue;
        }
        t.row(vec![
            st(r, "backend"),
            st(r, "device"),
            u(r, "repeats").to_string(),
            u(r, "images").to_string(),
            secs(f(r, "seconds")),
            format!("{:.1}", f(r, "images_per_s")),
            format!("{:.1}", f(r, "megapixels_per_s")),
            u(r, "errors").to_string(),
            u(r, "fallbacks").to_string(),
        ]);
        if r.get("host_images_per_s").is_some() {
            notes.push_str(&format!(
                "{}: host threads prepared {:.1} images/s (entropy decoding and CPU fallbacks), the most this host can feed the device\n",
                st(r, "backend"),
                f(r, "host_images_per_s")
            ));
        }
        for x in r["failed"].as_array().into_iter().flatten() {
            notes.push_str(&format!(
                "{}: cannot decode {}: {}\n",
                st(r, "backend"),
                st(x, "path"),
                st(x, "reason")
            ));
        }
    }
    for x in j["unreadable"].as_array().into_iter().flatten() {
        notes.push_str(&format!(
            "cannot read {}: {}\n",
            st(x, "path"),
            st(x, "reason")
        ));
    }
    format!(
        "decode throughput: {} ({} files, {} threads)\n\n{}{}{}",
        st(j, "images_dir"),
        u(j, "files"),
        u(j, "threads"),
        t.render(),
        if notes.is_empty() { "" } else { "\n" },
        notes
    )
}

// ---------------------------------------------------------------------------------------
// bench pipeline

#[derive(Debug, Args)]
pub struct PipelineBenchArgs {
    /// Backends, comma-separated (auto, cpu, wgpu, cuda).
    #[arg(long, value_delimiter = ',', default_value = "cpu", value_parser = clap::value_parser!(BackendKind))]
    backend: Vec<BackendKind>,
    /// Image folder (class sub-folders or flat); default: the bundled samples.
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
    #[arg(long, default_value = "0")]
    step_ms: u64,
    /// Decode and augment threads (default: available cores).
    #[arg(long, value_parser = positive)]
    workers: Option<usize>,
    /// Reader threads.
    #[arg(long, default_value = "8", value_parser = positive)]
    readers: usize,
    /// Batches prepared ahead.
    #[arg(long, default_value = "2", value_parser = positive)]
    prefetch: usize,
    /// Batch element type: u8 (no normalisation), f16 or f32.
    #[arg(long, default_value = "f32", value_parser = clap::value_parser!(DType))]
    dtype: DType,
    /// Decoded-sample cache, in MiB (0: none).
    #[arg(long, default_value = "0")]
    cache_mb: u64,
    /// Training seed.
    #[arg(long, default_value = "0")]
    seed: u64,
    /// JPEGs for the GPU's hardware decoder (CUDA with nvJPEG engines): exact (those it
    /// decodes as the CPU does), all, or off.
    #[arg(long, default_value = "exact", value_parser = clap::value_parser!(HardwareDecode))]
    hardware: HardwareDecode,
}

pub fn pipeline(ctx: Ctx, a: &PipelineBenchArgs) -> Res<Report> {
    let dir = common::resolve_dir(a.images.as_deref(), SAMPLES_DIR, "--images")?;
    let data = common::open_dataset(&dir)?;
    if data.is_empty() {
        return Err(format!("no images in {}", dir.display()).into());
    }
    let mut aug = Augment::new()
        .random_resized_crop(a.size, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
        .flip_horizontal(0.5);
    if a.dtype != DType::U8 {
        aug = aug.normalize(IMAGENET_MEAN, IMAGENET_STD);
    }
    let aug = aug.dtype(a.dtype);
    let step = Duration::from_millis(a.step_ms);
    let mut results = Vec::new();
    for &kind in &a.backend {
        let mut b = Pipeline::builder(data.clone().all())
            .backend(kind)
            .augment(aug.clone())
            .batch_size(a.batch)
            .prefetch(a.prefetch)
            .readers(a.readers)
            .seed(a.seed)
            .hardware_decode(a.hardware)
            .cache_bytes(a.cache_mb.saturating_mul(1 << 20));
        if let Some(w) = a.workers {
            b = b.workers(w);
        }
        let pipe = match b.build() {
            Ok(p) => p,
            Err(e @ stoker::Error::BackendUnavailable { .. }) => {
                log::warn!("bench pipeline: {e}");
                results.push(json!({
                    "backend": kind.to_string(), "epochs": a.epochs, "samples": data.len(),
                    "delivered": 0, "reported": 0, "images_per_s": 0.0, "epoch_seconds": [],
                    "input_wait_fraction": Value::Null, "error": e.to_string(),
                }));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let pb = progress(
            ctx,
            (a.epochs * pipe.num_batches()) as u64,
            &format!("{kind} pipeline"),
        );
        let (mut delivered, mut reported) = (0u64, 0u64);
        let mut epoch_seconds = Vec::new();
        let mut wait_fractions = Vec::new();
        let mut failed = Vec::new();
        for e in 0..a.epochs as u64 {
            let t = Instant::now();
            let mut epoch = pipe.epoch(e)?;
            for batch in &mut epoch {
                let batch = batch?;
                delivered += batch.len() as u64;
                reported += batch.errors().len() as u64;
                for err in batch.errors() {
                    log::info!("{err}");
                    if failed.len() < 20 {
                        failed.push(json!({"path": err.path, "reason": err.reason.trim_end()}));
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
            // Taken after the iteration: the epoch's wall clock stops at its last batch.
            wait_fractions.push(epoch.stats().input_wait_fraction);
        }
        pb.finish_and_clear();
        let total: f64 = epoch_seconds.iter().sum();
        let mut stats = serde_json::to_value(pipe.stats())?;
        if let Some(o) = stats.as_object_mut() {
            o.remove("errors");
        }
        let (be, _) = pipe.backend();
        results.push(json!({
            "backend": kind.to_string(),
            "device": be.device(),
            "epochs": a.epochs,
            "samples": pipe.subset().len(),
            "delivered": delivered,
            "reported": reported,
            "images_per_s": delivered as f64 / total.max(1e-9),
            "epoch_seconds": epoch_seconds,
            // input_wait_fraction is the LAST epoch's (Epoch::stats after its iteration):
            // the first epoch also pays thread start-up and cache filling. Every epoch's
            // value is in input_wait_fraction_per_epoch.
            "input_wait_fraction": wait_fractions.last().copied().unwrap_or(0.0),
            "input_wait_fraction_per_epoch": wait_fractions,
            "batch": a.batch,
            "size": a.size,
            "dtype": a.dtype,
            "step_ms": a.step_ms,
            "readers": a.readers,
            "prefetch": a.prefetch,
            "stats": stats,
            "failed": failed,
        }));
    }
    let json = json!({
        "results": results,
        "images_dir": dir.display().to_string(),
        "batch": a.batch,
        "size": a.size,
        "dtype": a.dtype,
        "step_ms": a.step_ms,
        "epochs": a.epochs,
    });
    let text = pipeline_text(&json);
    Ok(Report::ok(json, text))
}

fn pipeline_text(j: &Value) -> String {
    let mut t = Table::new(&[
        "backend",
        "samples",
        "epochs",
        "delivered",
        "reported",
        "images/s",
        "epoch times",
        "input wait",
    ]);
    let mut notes = String::new();
    for r in j["results"].as_array().into_iter().flatten() {
        if unavailable(r, &mut t, &mut notes) {
            continue;
        }
        let times: Vec<String> = r["epoch_seconds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_f64)
            .map(|s| format!("{s:.2}"))
            .collect();
        t.row(vec![
            st(r, "backend"),
            u(r, "samples").to_string(),
            u(r, "epochs").to_string(),
            u(r, "delivered").to_string(),
            u(r, "reported").to_string(),
            format!("{:.1}", f(r, "images_per_s")),
            format!("{} s", times.join(" ")),
            format!("{:.1}%", 100.0 * f(r, "input_wait_fraction")),
        ]);
        let failed = r["failed"].as_array().map_or(&[][..], Vec::as_slice);
        if !failed.is_empty() {
            notes.push_str(&format!(
                "{}: {} sample(s) reported (skipped); the first {}:\n",
                st(r, "backend"),
                u(r, "reported"),
                failed.len()
            ));
            for x in failed {
                notes.push_str(&format!("  {}: {}\n", st(x, "path"), st(x, "reason")));
            }
        }
    }
    format!(
        "pipeline: {} (batch {}, {}x{} {}, step {} ms; input wait of the last epoch)\n\n{}{}{}",
        st(j, "images_dir"),
        u(j, "batch"),
        u(j, "size"),
        u(j, "size"),
        st(j, "dtype"),
        u(j, "step_ms"),
        t.render(),
        if notes.is_empty() { "" } else { "\n" },
        notes
    )
}

// ---------------------------------------------------------------------------------------
// bench overlap

#[derive(Debug, Args)]
pub struct OverlapArgs {
    /// Number of synthetic samples.
    #[arg(long, default_value = "256", value_parser = positive)]
    n: usize,
    /// Samples per batch.
    #[arg(long, default_value = "8", value_parser = positive)]
    batch: usize,
    /// Simulated storage latency per sample, in milliseconds.
    #[arg(long, default_value = "10")]
    load_ms: u64,
    /// Simulated training step per batch, in milliseconds.
    #[arg(long, default_value = "20")]
    step_ms: u64,
    /// Reader threads of the pipeline.
    #[arg(long, default_value = "8", value_parser = positive)]
    readers: usize,
    /// Batches prepared ahead.
    #[arg(long, default_value = "2", value_parser = positive)]
    prefetch: usize,
    /// Decode and augment threads of the pipeline.
    #[arg(long, default_value = "2", value_parser = positive)]
    workers: usize,
    /// Pipelined runs; the median is reported (timings on shared machines are noisy).
    #[arg(long, default_value = "3", value_parser = positive)]
    repeat: usize,
}

/// One tiny 8x8 RGB PNG (a gradient), encoded with the png crate.
fn tiny_png() -> Res<Arc<[u8]>> {
    let mut buf = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut buf, 8, 8);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header()?;
        let data: Vec<u8> = (0..64u8)
            .flat_map(|i| [i * 4, (i % 8) * 32, (i / 8) * 32])
            .collect();
        w.write_image_data(&data)?;
        w.finish()?;
    }
    Ok(buf.into())
}

/// `n` in-memory samples sharing one PNG, labels `i % 10`.
pub fn synthetic_dataset(n: usize) -> Res<Dataset> {
    let png = tiny_png()?;
    let samples = (0..n)
        .map(|i| {
            let path = format!("synthetic/{i:06}.png");
            Sample {
                id: sample_id(&path),
                path,
                location: Location::Memory(Arc::clone(&png)),
                label: Some((i % 10) as u32),
                mask: None,
                group: None,
            }
        })
        .collect();
    Ok(Dataset::from_samples(None, samples, Vec::new())?)
}

pub fn overlap(ctx: Ctx, a: &OverlapArgs) -> Res<Report> {
    let nb = a.n.div_ceil(a.batch);
    let load = Duration::from_millis(a.load_ms);
    let step = Duration::from_millis(a.step_ms);
    let pb = progress(ctx, 2 * nb as u64, "overlap");

    // Naive: load the batch item by item, then train on it; nothing overlaps.
    let t = Instant::now();
    for b in 0..nb {
        let items = a.batch.min(a.n - b * a.batch);
        for _ in 0..items {
            std::thread::sleep(load);
        }
        std::thread::sleep(step);
        pb.inc(1);
    }
    let naive_s = t.elapsed().as_secs_f64();

    // Pipelined: the same latency in the pipeline's readers, overlapping the steps.
    let data = synthetic_dataset(a.n)?.with_read_latency(load);
    let pipe = Pipeline::builder(data.all())
        .backend(BackendKind::Cpu)
        .augment(Augment::new().resize(8, 8))
        .batch_size(a.batch)
        .readers(a.readers)
        .prefetch(a.prefetch)
        .workers(a.workers)
        .build()?;
    let mut runs = Vec::new();
    let mut wait = 0.0;
    let mut delivered = 0usize;
    for r in 0..a.repeat {
        let t = Instant::now();
        let mut epoch = pipe.epoch(r as u64)?;
        delivered = 0;
        for batch in &mut epoch {
            let batch = batch?;
            delivered += batch.len();
            std::thread::sleep(step);
            drop(batch);
        }
        runs.push(t.elapsed().as_secs_f64());
        if r == 0 {
            pb.inc(nb as u64);
        }
        wait += epoch.stats().input_wait_fraction / a.repeat as f64;
    }
    pb.finish_and_clear();
    if delivered != a.n {
        log::warn!("overlap: delivered {delivered} of {} samples", a.n);
    }
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    let pipelined_s = sorted[sorted.len() / 2];

    let ideal_s = nb as f64 * a.step_ms as f64 / 1000.0;
    let ratio = if ideal_s > 0.0 {
        json!(pipelined_s / ideal_s)
    } else {
        Value::Null
    };
    let json = json!({
        "naive_s": naive_s,
        "pipelined_s": pipelined_s,
        "ideal_s": ideal_s,
        "ratio_to_ideal": ratio,
        "n": a.n,
        "batch": a.batch,
        "load_ms": a.load_ms,
        "step_ms": a.step_ms,
        "readers": a.readers,
        "prefetch": a.prefetch,
        "workers": a.workers,
        "delivered": delivered,
        "speedup": naive_s / pipelined_s.max(1e-9),
        "input_wait_fraction": wait,
        "pipelined_runs_s": runs,
    });
    let text = format!(
        "overlap: {} samples, batch {}, load {} ms/sample, step {} ms/batch, {} readers, prefetch {}\n\n{}",
        a.n,
        a.batch,
        a.load_ms,
        a.step_ms,
        a.readers,
        a.prefetch,
        kv(&[
            ("naive", secs(naive_s)),
            (
                "pipelined (median)",
                format!("{} of {} runs", secs(pipelined_s), runs.len()),
            ),
            ("ideal (steps only)", secs(ideal_s)),
            (
                "pipelined / ideal",
                ratio.as_f64().map_or("n/a".into(), |r| format!("{r:.2}x")),
            ),
            ("speedup over naive", format!("{:.2}x", naive_s / pipelined_s.max(1e-9))),
            ("input wait", format!("{:.1}%", 100.0 * wait)),
        ])
    );
    Ok(Report::ok(json, text))
}

// ---------------------------------------------------------------------------------------
// bench (all three)

pub fn all(ctx: Ctx) -> Res<Report> {
    let mut d: DecodeBenchArgs = crate::defaults()?;
    d.backend = vec![BackendKind::Cpu];
    let mut p: PipelineBenchArgs = crate::defaults()?;
    p.backend = vec![BackendKind::Cpu];
    let o: OverlapArgs = crate::defaults()?;
    let d = decode(ctx, &d)?;
    let p = pipeline(ctx, &p)?;
    let o = overlap(ctx, &o)?;
    let json = json!({"decode": d.json, "pipeline": p.json, "overlap": o.json});
    let text = format!("{}\n{}\n{}", d.text, p.text, o.text);
    Ok(Report::ok(json, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        let d: DecodeBenchArgs = crate::defaults().unwrap();
        assert_eq!(d.backend, vec![BackendKind::Cpu]);
        assert_eq!(d.batch, 32);
        let p: PipelineBenchArgs = crate::defaults().unwrap();
        assert_eq!(
            (p.size, p.batch, p.epochs, p.dtype),
            (224, 32, 2, DType::F32)
        );
        let o: OverlapArgs = crate::defaults().unwrap();
        assert_eq!((o.n, o.batch, o.load_ms, o.step_ms), (256, 8, 10, 20));
    }

    #[test]
    fn synthetic_png_decodes() {
        let d = synthetic_dataset(3).unwrap();
        assert_eq!(d.len(), 3);
        let Location::Memory(b) = &d.samples()[0].location else {
            panic!("not in memory")
        };
        let info = stoker::decode::peek_info(b).unwrap();
        assert_eq!((info.width, info.height), (8, 8));
    }
}

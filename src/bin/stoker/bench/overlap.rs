//! `stoker bench overlap`: the classic overlap experiment. A fake load per sample and a
//! fake training step per batch, run naively (nothing overlaps) and through the pipeline.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use stoker::source::Sample;
use stoker::{Augment, BackendKind, Dataset, Pipeline};

use super::plot::{self, Lane};
use super::{plotted, positive, BenchReport};
use crate::common::{kv, progress, secs, Ctx, Report, Res};

#[derive(Debug, Args)]
pub struct OverlapArgs {
    /// Number of synthetic samples.
    #[arg(long, default_value = "256", value_parser = positive)]
    n: usize,
    /// Samples per batch.
    #[arg(long, default_value = "8", value_parser = positive)]
    batch: usize,
    /// Simulated storage latency per sample, in milliseconds.
    #[arg(long, default_value = "10", value_parser = super::millis)]
    load_ms: u64,
    /// Simulated training step per batch, in milliseconds.
    #[arg(long, default_value = "20", value_parser = super::millis)]
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
    /// Draw the timelines of loading and training, naive against pipelined, to this SVG file.
    #[arg(long, value_parser = plot::plot_file)]
    plot: Option<PathBuf>,
}

/// The JSON object of `bench overlap`.
#[derive(Debug, Serialize)]
pub struct OverlapReport {
    /// Load then step, batch after batch.
    naive_s: f64,
    /// The median of the pipelined runs.
    pipelined_s: f64,
    /// The steps alone: what perfect overlap would take.
    ideal_s: f64,
    /// `pipelined_s / ideal_s`; `null` when the steps take no time.
    ratio_to_ideal: Option<f64>,
    n: usize,
    batch: usize,
    load_ms: u64,
    step_ms: u64,
    readers: usize,
    prefetch: usize,
    workers: usize,
    /// Samples delivered by the last pipelined run.
    delivered: usize,
    speedup: f64,
    /// The mean over the pipelined runs.
    input_wait_fraction: f64,
    pipelined_runs_s: Vec<f64>,
    /// What `--plot` draws: the naive run's and the median pipelined run's spans.
    #[serde(skip)]
    timeline: Timeline,
}

/// Per batch, the spans (start, end) in seconds from the start of the run: of the naive
/// run, its loading and its step; of the pipelined run, the trainer's wait for the batch
/// (the loading it could not hide) and its step.
#[derive(Debug, Default)]
struct Timeline {
    naive_load: Vec<(f64, f64)>,
    naive_step: Vec<(f64, f64)>,
    pipelined_wait: Vec<(f64, f64)>,
    pipelined_step: Vec<(f64, f64)>,
}

/// `(start, end)` of a span begun at `from`, in seconds since `t0`.
fn span(t0: Instant, from: Instant) -> (f64, f64) {
    let s = |t: Instant| t.duration_since(t0).as_secs_f64();
    (s(from), s(Instant::now()))
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
fn synthetic_dataset(n: usize) -> Res<Dataset> {
    let png = tiny_png()?;
    let samples = (0..n)
        .map(|i| {
            Sample::in_memory(
                format!("synthetic/{i:06}.png"),
                Arc::clone(&png),
                Some((i % 10) as u32),
            )
        })
        .collect();
    Ok(Dataset::from_samples(None, samples, Vec::new())?)
}

pub fn run(ctx: Ctx, a: &OverlapArgs) -> Res<Report> {
    let r = measure(ctx, a)?;
    plotted(&r, a.plot.as_deref())
}

/// Runs the experiment naively once and pipelined `a.repeat` times.
pub fn measure(ctx: Ctx, a: &OverlapArgs) -> Res<OverlapReport> {
    let nb = a.n.div_ceil(a.batch);
    let load = Duration::from_millis(a.load_ms);
    let step = Duration::from_millis(a.step_ms);
    let pb = progress(ctx, 2 * nb as u64, "overlap");

    // Naive: load the batch item by item, then train on it; nothing overlaps.
    let mut timeline = Timeline::default();
    let t = Instant::now();
    for b in 0..nb {
        let items = a.batch.min(a.n - b * a.batch);
        let l = Instant::now();
        for _ in 0..items {
            std::thread::sleep(load);
        }
        timeline.naive_load.push(span(t, l));
        let s = Instant::now();
        std::thread::sleep(step);
        timeline.naive_step.push(span(t, s));
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
    let mut spans = Vec::new();
    let mut wait = 0.0;
    let mut delivered = 0usize;
    for r in 0..a.repeat {
        let t = Instant::now();
        let mut epoch = pipe.epoch(r as u64)?;
        delivered = 0;
        let (mut waits, mut steps) = (Vec::new(), Vec::new());
        loop {
            let w = Instant::now();
            let Some(batch) = epoch.next() else { break };
            let batch = batch?;
            waits.push(span(t, w));
            delivered += batch.len();
            let s = Instant::now();
            std::thread::sleep(step);
            steps.push(span(t, s));
            drop(batch);
        }
        runs.push(t.elapsed().as_secs_f64());
        spans.push((waits, steps));
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
    // The spans of the run whose time is the median.
    if let Some(i) = runs.iter().position(|&r| r == pipelined_s) {
        (timeline.pipelined_wait, timeline.pipelined_step) = spans.swap_remove(i);
    }

    let ideal_s = nb as f64 * a.step_ms as f64 / 1000.0;
    Ok(OverlapReport {
        naive_s,
        pipelined_s,
        ideal_s,
        ratio_to_ideal: (ideal_s > 0.0).then(|| pipelined_s / ideal_s),
        n: a.n,
        batch: a.batch,
        load_ms: a.load_ms,
        step_ms: a.step_ms,
        readers: a.readers,
        prefetch: a.prefetch,
        workers: a.workers,
        delivered,
        speedup: naive_s / pipelined_s.max(1e-9),
        input_wait_fraction: wait,
        pipelined_runs_s: runs,
        timeline,
    })
}

impl BenchReport for OverlapReport {
    /// The `--plot` chart: four lanes, the naive run's loading and steps above the median
    /// pipelined run's waits and steps, on one time axis.
    fn plot(&self, path: &std::path::Path) -> Res<()> {
        let t = &self.timeline;
        let lane = |name: &str, spans: &[(f64, f64)]| Lane {
            name: name.into(),
            spans: spans.to_vec(),
        };
        plot::timelines(
            path,
            &format!(
                "overlap: {} samples, batch {}, load {} ms/sample, step {} ms: naive {}, pipelined {}",
                self.n,
                self.batch,
                self.load_ms,
                self.step_ms,
                secs(self.naive_s),
                secs(self.pipelined_s)
            ),
            &[
                lane("naive: load", &t.naive_load),
                lane("naive: train", &t.naive_step),
                lane("pipelined: wait for batch", &t.pipelined_wait),
                lane("pipelined: train", &t.pipelined_step),
            ],
        )
    }

    /// The settings, then the timings as key/value lines.
    fn text(&self) -> String {
        format!(
            "overlap: {} samples, batch {}, load {} ms/sample, step {} ms/batch, {} readers, prefetch {}\n\n{}",
            self.n,
            self.batch,
            self.load_ms,
            self.step_ms,
            self.readers,
            self.prefetch,
            kv(&[
                ("naive", secs(self.naive_s)),
                (
                    "pipelined (median)",
                    format!(
                        "{} of {} runs",
                        secs(self.pipelined_s),
                        self.pipelined_runs_s.len()
                    ),
                ),
                ("ideal (steps only)", secs(self.ideal_s)),
                (
                    "pipelined / ideal",
                    self.ratio_to_ideal
                        .map_or("n/a".into(), |r| format!("{r:.2}x")),
                ),
                ("speedup over naive", format!("{:.2}x", self.speedup)),
                ("input wait", format!("{:.1}%", 100.0 * self.input_wait_fraction)),
            ])
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoker::source::Location;

    #[test]
    fn defaults_parse() {
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

//! Per-stage timings, counters and reported errors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use super::trace::Trace;
use crate::error::SampleError;

/// At most this many sample errors are kept in a stats snapshot (the count is exact).
pub const MAX_KEPT_ERRORS: usize = 1000;

/// Live counters, updated by the pipeline threads.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub read_ns: AtomicU64,
    pub decode_ns: AtomicU64,
    pub augment_ns: AtomicU64,
    pub wait_ns: AtomicU64,
    pub wall_ns: AtomicU64,
    pub bytes_read: AtomicU64,
    pub samples_delivered: AtomicU64,
    pub samples_reported: AtomicU64,
    pub replacements: AtomicU64,
    pub cache_hits: AtomicU64,
    pub device_cache_hits: AtomicU64,
    pub batches: AtomicU64,
    pub gpu_decoded: AtomicU64,
    pub gpu_entropy: AtomicU64,
    pub gpu_sync_entropy: AtomicU64,
    pub entropy_flagged: AtomicU64,
    pub hardware: AtomicU64,
    pub cpu_fallbacks: AtomicU64,
    pub device_ns: AtomicU64,
    pub samples_with_warnings: AtomicU64,
    /// Samples read from storage (for autotune: the mean time of a read).
    pub reads: AtomicU64,
    /// Samples the workers made (for autotune: the mean time of a sample's work).
    pub worked: AtomicU64,
    /// Time the workers spent waiting for bytes from the readers (for autotune).
    pub starved_ns: AtomicU64,
    /// The largest file read (a sizing hint for staging buffers, not a statistic).
    pub largest_file: std::sync::atomic::AtomicUsize,
    pub errors: Mutex<Vec<SampleError>>,
    /// Samples delivered from each source of a mixture (one source otherwise).
    pub per_source: Mutex<Vec<u64>>,
    /// Where each stage's spans go too, when the pipeline is traced.
    pub trace: Option<Arc<Trace>>,
    /// The epoch these counters count (for the trace).
    pub epoch: u64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, d: Duration) {
        counter.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Counters for `epoch`, whose spans also go to `trace`.
    pub(crate) fn traced(trace: Option<Arc<Trace>>, epoch: u64) -> Self {
        Counters {
            trace,
            epoch,
            ..Counters::default()
        }
    }

    /// Adds `d`, spent in stage `name` (of sample or batch `id`) and ending now, to
    /// `counter`, and to the trace when there is one.
    pub(crate) fn spent(&self, counter: &AtomicU64, name: &'static str, d: Duration, id: u64) {
        Self::add(counter, d);
        if let Some(t) = &self.trace {
            t.span(name, d, self.epoch, Some(id));
        }
    }

    pub(crate) fn report(&self, e: &SampleError) {
        self.samples_reported.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut v) = self.errors.lock() {
            if v.len() < MAX_KEPT_ERRORS {
                v.push(e.clone());
            }
        }
    }

    /// Counts the delivered samples of `sources` (each one's source, of `n`).
    pub(crate) fn count_sources(&self, sources: &[usize], n: usize) {
        if let Ok(mut v) = self.per_source.lock() {
            if v.len() < n {
                v.resize(n, 0);
            }
            for &k in sources {
                if let Some(c) = v.get_mut(k) {
                    *c += 1;
                }
            }
        }
    }

    pub(crate) fn merge_into(&self, total: &Counters) {
        for (a, b) in [
            (&self.read_ns, &total.read_ns),
            (&self.decode_ns, &total.decode_ns),
            (&self.augment_ns, &total.augment_ns),
            (&self.wait_ns, &total.wait_ns),
            (&self.wall_ns, &total.wall_ns),
            (&self.bytes_read, &total.bytes_read),
            (&self.samples_delivered, &total.samples_delivered),
            (&self.samples_reported, &total.samples_reported),
            (&self.replacements, &total.replacements),
            (&self.cache_hits, &total.cache_hits),
            (&self.device_cache_hits, &total.device_cache_hits),
            (&self.batches, &total.batches),
            (&self.gpu_decoded, &total.gpu_decoded),
            (&self.gpu_entropy, &total.gpu_entropy),
            (&self.gpu_sync_entropy, &total.gpu_sync_entropy),
            (&self.entropy_flagged, &total.entropy_flagged),
            (&self.hardware, &total.hardware),
            (&self.cpu_fallbacks, &total.cpu_fallbacks),
            (&self.device_ns, &total.device_ns),
            (&self.samples_with_warnings, &total.samples_with_warnings),
            (&self.reads, &total.reads),
            (&self.worked, &total.worked),
            (&self.starved_ns, &total.starved_ns),
        ] {
            b.fetch_add(a.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        if let (Ok(src), Ok(mut dst)) = (self.per_source.lock(), total.per_source.lock()) {
            if dst.len() < src.len() {
                dst.resize(src.len(), 0);
            }
            for (d, s) in dst.iter_mut().zip(src.iter()) {
                *d += s;
            }
        }
        if let (Ok(src), Ok(mut dst)) = (self.errors.lock(), total.errors.lock()) {
            for e in src.iter() {
                if dst.len() < MAX_KEPT_ERRORS {
                    dst.push(e.clone());
                }
            }
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        self.snapshot_at(None)
    }

    /// A snapshot with the wall time given (an epoch still running), or the recorded one.
    pub(crate) fn snapshot_at(&self, wall_seconds: Option<f64>) -> Stats {
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e9;
        let wall = wall_seconds.unwrap_or_else(|| s(&self.wall_ns));
        let wait = s(&self.wait_ns);
        Stats {
            read_seconds: s(&self.read_ns),
            decode_seconds: s(&self.decode_ns),
            augment_seconds: s(&self.augment_ns),
            wait_seconds: wait,
            wall_seconds: wall,
            input_wait_fraction: if wall > 0.0 {
                (wait / wall).min(1.0)
            } else {
                0.0
            },
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            samples_delivered: self.samples_delivered.load(Ordering::Relaxed),
            samples_reported: self.samples_reported.load(Ordering::Relaxed),
            replacements: self.replacements.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            device_cache_hits: self.device_cache_hits.load(Ordering::Relaxed),
            device_cache_bytes: 0,
            batches: self.batches.load(Ordering::Relaxed),
            gpu_decoded: self.gpu_decoded.load(Ordering::Relaxed),
            gpu_entropy: self.gpu_entropy.load(Ordering::Relaxed),
            gpu_sync_entropy: self.gpu_sync_entropy.load(Ordering::Relaxed),
            entropy_flagged: self.entropy_flagged.load(Ordering::Relaxed),
            hardware: self.hardware.load(Ordering::Relaxed),
            host_entropy: self
                .gpu_decoded
                .load(Ordering::Relaxed)
                .saturating_sub(self.gpu_entropy.load(Ordering::Relaxed))
                .saturating_sub(self.gpu_sync_entropy.load(Ordering::Relaxed))
                .saturating_sub(self.hardware.load(Ordering::Relaxed)),
            cpu_fallbacks: self.cpu_fallbacks.load(Ordering::Relaxed),
            device_submit_seconds: s(&self.device_ns),
            samples_with_warnings: self.samples_with_warnings.load(Ordering::Relaxed),
            errors: self.errors.lock().map(|v| v.clone()).unwrap_or_default(),
            samples_per_source: self
                .per_source
                .lock()
                .map(|v| v.clone())
                .unwrap_or_default(),
            readers: 0,
            workers: 0,
            prefetch: 0,
            initial_readers: 0,
            initial_workers: 0,
            initial_prefetch: 0,
            autotuned: Vec::new(),
            on_device: false,
        }
    }
}

/// A snapshot of pipeline statistics. Stage times are summed over threads (CPU-seconds
/// spent in the stage); wait and wall are the consumer's.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// Time reader threads spent reading bytes.
    pub read_seconds: f64,
    /// Time workers spent decoding.
    pub decode_seconds: f64,
    /// Time workers spent executing plans.
    pub augment_seconds: f64,
    /// Time the consumer waited for a batch.
    pub wait_seconds: f64,
    /// Time from the start of the epoch(s) to the last batch handed out.
    pub wall_seconds: f64,
    /// `wait_seconds / wall_seconds`: 0 means the consumer never waited for input.
    pub input_wait_fraction: f64,
    /// Compressed bytes read.
    pub bytes_read: u64,
    /// Samples delivered in batches (replacements included).
    pub samples_delivered: u64,
    /// Samples reported as failed.
    pub samples_reported: u64,
    /// Slots filled by a replacement sample (`OnError::Replace`).
    pub replacements: u64,
    /// Samples served from the decoded-sample cache in host memory.
    pub cache_hits: u64,
    /// GPU backends: samples served from the device cache of decoded samples
    /// ([`PipelineBuilder::device_cache_bytes`](super::PipelineBuilder::device_cache_bytes)):
    /// neither read nor decoded, their image copied on the device.
    pub device_cache_hits: u64,
    /// GPU backends: bytes of device memory the device cache's entries take now.
    pub device_cache_bytes: u64,
    /// Batches delivered.
    pub batches: u64,
    /// GPU backends: images whose JPEG decode ran on the device: the sum of
    /// [`Self::gpu_entropy`], [`Self::gpu_sync_entropy`], [`Self::host_entropy`] and
    /// [`Self::hardware`].
    pub gpu_decoded: u64,
    /// GPU backends: JPEGs with restart markers Huffman-decoded on the device too, an
    /// interval per invocation (the host read their headers only).
    pub gpu_entropy: u64,
    /// wgpu: baseline JPEGs without restart markers Huffman-decoded on the device too,
    /// by the self-synchronising decode (the host read their headers and un-stuffed
    /// their data only).
    pub gpu_sync_entropy: u64,
    /// GPU backends: samples the device Huffman pass flagged (damaged data, or blocks only
    /// the CPU decoder reproduces) and the host path then decoded, or refused as the CPU
    /// backend does; each cost its batch a second run on the device.
    pub entropy_flagged: u64,
    /// GPU backends: JPEGs entropy-decoded on the host, the rest on the device.
    pub host_entropy: u64,
    /// CUDA: JPEGs handed to the hardware decoder (nvJPEG; what it refuses is counted by
    /// the batcher's `decode_paths`).
    pub hardware: u64,
    /// GPU backends: images the CPU decoded instead, one sample at a time (other formats,
    /// JPEG features the device path does not take, samples for the host cache, every
    /// sample of a pipeline with a user transform).
    pub cpu_fallbacks: u64,
    /// GPU backends: time the collector thread spent packing, uploading and submitting
    /// batches (off the consumer's thread).
    pub device_submit_seconds: f64,
    /// Samples delivered from files the decoder had to tolerate something in
    /// (extraneous bytes, an end at a scan boundary, or, with strict decoding off,
    /// damaged data): each is listed in its batch's [`Batch::warnings`](super::Batch::warnings).
    pub samples_with_warnings: u64,
    /// Reported sample errors (the first [`MAX_KEPT_ERRORS`]).
    pub errors: Vec<SampleError>,
    /// Samples delivered from each source of the [`Mixture`](crate::Mixture) read, by
    /// source index (replacements and padding counted under their own source): one
    /// entry, [`Self::samples_delivered`], for a pipeline over one subset; empty before
    /// a batch is delivered.
    pub samples_per_source: Vec<u64>,
    /// The pipeline's reader threads (under autotune: the number it has settled on).
    pub readers: usize,
    /// The pipeline's worker threads.
    pub workers: usize,
    /// Batches prepared ahead of the consumer (under autotune: the number it has settled
    /// on).
    pub prefetch: usize,
    /// The reader threads the pipeline started with (equal to [`Self::readers`] unless
    /// autotune moved them).
    pub initial_readers: usize,
    /// The worker threads the pipeline started with.
    pub initial_workers: usize,
    /// The prefetch the pipeline started with.
    pub initial_prefetch: usize,
    /// The settings autotune chose (`"readers"`, `"workers"`, `"prefetch"`: those the
    /// caller left unset), empty without autotune
    /// ([`PipelineBuilder::autotune`](super::PipelineBuilder::autotune)).
    pub autotuned: Vec<String>,
    /// Whether a GPU backend made the batches (the workers then prepare device jobs).
    pub on_device: bool,
}

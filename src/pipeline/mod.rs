//! The pipeline: readers, workers and a ring of batches, overlapping input with training.
//!
//! # Threads and channels
//!
//! ```text
//!  planner ──Job──► readers (N) ──Loaded──► workers (M) ──Done──► Epoch::next (consumer)
//!     ▲        bounded(S)          bounded(S)    │  write into batch slots    │
//!     │                                          │                            │
//!     └──────────── free batch buffers (ring of K) ◄──── Batch dropped ◄──────┘
//!                   staging buffers (ring of S) ◄──── returned by workers
//! ```
//!
//! - The **planner** walks the epoch's batches in order. For each it takes a free batch
//!   buffer from the ring of `K = prefetch` buffers (blocking while the consumer and the
//!   batches in flight hold all of them: backpressure), announces the batch to the
//!   consumer, and sends one job per sample to the readers.
//! - **Readers** (`readers`, default 8) take a staging buffer from the ring of `S` staging
//!   slots (default `max(2 * batch_size, 2 * workers)`), read the sample's compressed bytes
//!   (and mask) into it, and pass it on. A decoded-sample cache hit (host or device)
//!   skips the read.
//! - **Workers** (`workers`, default: the available cores) decode, compute the sample's
//!   [`SamplePlan`](crate::augment::SamplePlan) and execute it straight into the sample's
//!   slot of the batch buffer; then they return the staging buffer and report `Done`.
//! - The consumer's [`Epoch`] iterator collects `Done` messages, reorders batches, packs
//!   the slots of skipped samples out, and hands out [`Batch`]es in order.
//!
//! On a device backend (wgpu or CUDA) the workers stop short of the pixels: they
//! entropy-decode each JPEG to DCT coefficients (only the blocks of the window the plan
//! reads, at its IDCT scale), hand it over whole for nvJPEG's hardware decoder (CUDA), or
//! decode on the CPU what the device path does not take. When a batch is complete a
//! collector thread (`stoker-collector`) packs its inputs into the next staging buffer
//! (mapped for wgpu, pinned for CUDA), uploads them with one copy, records and submits the
//! decode and augment passes into the batch's device buffers, and queues the batch for the
//! consumer (one ready ahead). So batch `b + 1` is packed, uploaded and on the device while
//! the caller trains on batch `b`; the caller's own work on the same queue (or, on CUDA,
//! its stream, which waits for each batch's event) runs after each batch's
//! (`crate::backend::wgpu::batch`, `crate::backend::cuda::batch`).
//!
//! # Memory
//!
//! In flight: `K` batch buffers plus `S` staging buffers plus one decode buffer per
//! worker, whatever the dataset size. The decoded-sample caches add their budgets: `cache_bytes` of host
//! memory, and on a device backend `device_cache_bytes` of device memory (its entries'
//! label planes stay on the host). If the caller keeps every batch of the ring alive
//! and asks for the next one, the epoch lends one more buffer instead of deadlocking.
//!
//! # Errors
//!
//! Every sample of an epoch is either delivered exactly once or reported as a
//! [`SampleError`](crate::error::SampleError) (id, path, reason) in the batch it belonged
//! to ([`Batch::errors`]) and in the stats, according to [`OnError`].
//!
//! On a device backend a sample can also fail when its batch runs: one that nothing on
//! the device decodes (the CUDA backend's nvJPEG decoders and its CPU fallback all refuse
//! it) is rejected before anything is written
//! ([`DeviceError::Rejected`](crate::backend::device::DeviceError::Rejected)). The collector
//! reports it as a worker reports a failure, then ends the epoch (`Fail`), leaves it out
//! (`Skip`), or puts in its slot the replacement a worker would have drawn for it
//! (`Replace`: the same candidates in the same order, read and prepared by the collector),
//! and runs the batch again.
//!
//! # Shutdown
//!
//! Dropping an [`Epoch`] (or breaking out of the loop) drops its cancel channel. Every
//! blocking call in every thread also waits on that channel, so all threads return at
//! once (a worker finishes the sample it is on), and the drop joins them. Nothing is left
//! running.

pub mod autotune;
mod batch;
mod buckets;
mod builder;
mod cache;
mod epoch;
mod heap;
mod memory;
mod readers;
mod report;
mod source_augment;
mod staging;
mod state;
mod stats;
mod trace;
pub mod transform;
mod verdict;
mod worker;

use std::sync::{Arc, Mutex};

pub use batch::{Batch, PaddedBoxes, Replacement, SampleWarning};
pub use buckets::{BucketBuilder, BucketEpoch, BucketPipeline};
pub use builder::PipelineBuilder;
pub use epoch::Epoch;
pub use report::{InputBound, Report, Stage, StageLoad, INPUT_BOUND_HIGH, INPUT_BOUND_MODERATE};
pub use state::ResumeState;
pub use stats::{Stats, MAX_KEPT_ERRORS};
pub use trace::MAX_TRACE_EVENTS;
pub use transform::{TransformResult, UserSample};

use crate::augment::Augment;
use crate::backend::device::DeviceBatcher;
use crate::backend::Backend;
use crate::decode::Limits;
use crate::error::Result;
use crate::source::{Sampler, Subset};

/// What happens when a sample cannot be read or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Stop the epoch: the iterator yields the error, then ends.
    Fail,
    /// Report it and go on; the batch is one sample shorter.
    #[default]
    Skip,
    /// Report it and deliver another sample (chosen deterministically) in its slot.
    Replace,
}

impl Config {
    /// `s` with the pipeline's threads, prefetch and kind of batches filled in.
    pub(crate) fn describe(&self, mut s: Stats) -> Stats {
        let t = &self.tune;
        s.readers = t.readers();
        s.workers = t.workers();
        s.prefetch = t.prefetch();
        (s.initial_readers, s.initial_workers, s.initial_prefetch) = t.initial;
        s.autotuned = t.autotuned();
        s.on_device = !self.work.writes_host_slots();
        s
    }
}

crate::error::from_str_by_name! {
    OnError, "on_error", "error policy", { "fail" => Fail, "skip" => Skip, "replace" => Replace }
}

/// The resolved configuration, shared by every thread.
#[derive(Debug)]
pub(crate) struct Config {
    pub backend: Arc<dyn Backend>,
    pub backend_reason: String,
    pub augment: Augment,
    /// Each mixture source's own augmentation, where one was given (empty if none).
    pub source_augments: Vec<Option<Augment>>,
    pub batch_size: usize,
    /// Readers, workers, prefetch and staging slots: fixed, or moved by autotune.
    pub tune: autotune::Tuned,
    pub seed: u64,
    pub on_error: OnError,
    pub limits: Limits,
    pub strict_decode: bool,
    pub has_masks: bool,
    pub replace_attempts: usize,
    /// The device path, when the backend runs batches on a device.
    pub batcher: Option<Arc<Mutex<Box<dyn DeviceBatcher>>>>,
    /// Where the stages' spans go, when traced ([`PipelineBuilder::trace`]).
    pub trace: Option<Arc<trace::Trace>>,
    /// A sample's host work, as the backend does it (decided once, when the pipeline is
    /// built).
    pub work: Arc<dyn crate::backend::device::sample_work::SampleWork>,
    /// Coefficient buffers recycled from packed batches to the workers.
    pub coeff_pool: Arc<crate::backend::device::job::CoeffPool>,
    /// Verdicts on whole JPEGs, for crop-aware decodes (see `verdict`).
    pub verdicts: verdict::Verdicts,
    /// The caller's transform of each decoded sample.
    pub transform: Option<transform::UserTransform>,
    /// What the batches' [`ResumeState`]s share, and the last one handed out.
    pub progress: state::Progress,
}

impl Config {
    /// The augmentation of sample `s`: its mixture source's own
    /// ([`PipelineBuilder::augment_source`]), else the pipeline's.
    pub fn augment_of(&self, s: &crate::source::Sample) -> &Augment {
        source_augment::of(&self.source_augments, &self.augment, s)
    }
}

impl Config {
    pub(crate) fn image_bytes(&self) -> usize {
        self.augment.bytes_per_image()
    }

    /// Bytes of one image slot in host batch memory: none when batches live on a device.
    pub(crate) fn host_image_bytes(&self) -> usize {
        match self.work.writes_host_slots() {
            true => self.image_bytes(),
            false => 0,
        }
    }

    /// Bytes of one mask slot in host batch memory.
    pub(crate) fn host_mask_bytes(&self) -> usize {
        match self.work.writes_host_slots() {
            true => self.mask_bytes(),
            false => 0,
        }
    }

    pub(crate) fn mask_bytes(&self) -> usize {
        if self.has_masks {
            let (w, h) = self.augment.get_output_size();
            w as usize * h as usize * 2
        } else {
            0
        }
    }
}

/// A configured pipeline over one subset. Call [`Pipeline::epoch`] once per epoch.
#[derive(Debug)]
pub struct Pipeline {
    cfg: Arc<Config>,
    subset: Subset,
    sampler: Sampler,
    cache: Option<Arc<cache::Cache>>,
    total: Arc<stats::Counters>,
    pool: Arc<Mutex<Vec<batch::BatchBuffers>>>,
    staging: Arc<Mutex<Vec<staging::Staged>>>,
    workers: Arc<Mutex<Vec<worker::WorkerState>>>,
}

impl Pipeline {
    /// Starts configuring a pipeline over `subset` (from a split, or [`crate::Dataset::all`]).
    pub fn builder(subset: Subset) -> PipelineBuilder {
        PipelineBuilder::new(subset)
    }

    /// Starts configuring a pipeline over a [`Mixture`](crate::Mixture) of subsets:
    /// `Pipeline::builder(mixture.subset()?)` ([`Mixture::subset`](crate::Mixture::subset)
    /// says what it refuses).
    pub fn builder_mixture(mixture: crate::source::Mixture) -> Result<PipelineBuilder> {
        Ok(PipelineBuilder::new(mixture.subset()?))
    }

    /// The batches of `epoch`, produced in the background while the caller trains.
    pub fn epoch(&self, epoch: u64) -> Result<Epoch> {
        self.epoch_from(epoch, 0)
    }

    /// The batches of `epoch` from batch `first_batch` on: exactly the batches a full
    /// epoch gives from there (the same samples, augmentation and replacements, since all
    /// of them are keyed by `(seed, epoch, sample id)`), without reading or decoding the
    /// batches before it. A checkpoint needs only `(seed, epoch, batch index)`: resume
    /// with `epoch_from(epoch, index + 1)` after batch `index` was trained on (or, on any
    /// world size with the same global batch size, with [`Pipeline::resume`] and the
    /// batch's [`Batch::state`]). `first_batch == num_batches()` gives an empty epoch;
    /// beyond it is an error.
    pub fn epoch_from(&self, epoch: u64, first_batch: usize) -> Result<Epoch> {
        let order = self.sampler.epoch_order(epoch);
        let batches: Vec<Vec<usize>> = order
            .chunks(self.sampler.batch_size())
            .map(<[usize]>::to_vec)
            .collect();
        if first_batch > batches.len() {
            return Err(crate::error::Error::config(
                "first_batch",
                format!(
                    "batch {first_batch} is past the end of an epoch of {} batches",
                    batches.len()
                ),
            ));
        }
        let real = order.len() - self.sampler.padding();
        let holds = self.holds(epoch, &order);
        // Replacements are drawn from the rank's own samples, or with global batches from
        // the whole epoch's (so that they do not depend on the world size).
        let replace_pool: Arc<[usize]> = match self.sampler.sharding_mode() {
            crate::source::sampler::Sharding::Global => self.sampler.global_order(epoch).into(),
            _ => order[..real].into(),
        };
        self.cfg
            .progress
            .set(self.cfg.progress.at(epoch, first_batch));
        Epoch::start(epoch::EpochParts {
            cfg: Arc::clone(&self.cfg),
            subset: self.subset.clone(),
            cache: self.cache.clone(),
            total: Arc::clone(&self.total),
            pool: Arc::clone(&self.pool),
            staging: Arc::clone(&self.staging),
            workers: Arc::clone(&self.workers),
            first_batch,
            num_batches: batches.len(),
            repeat_from: real,
            replace_pool,
            batches: batches.into_iter().skip(first_batch).collect(),
            // From the hold in force at `first_batch` (made at or before it) on.
            holds: {
                let from = holds.iter().rposition(|h| h.0 <= first_batch).unwrap_or(0);
                holds
                    .into_iter()
                    .skip(from)
                    .map(|(b, u)| (b.saturating_sub(first_batch), u))
                    .collect()
            },
            epoch,
        })
    }

    /// Block order over shards in object storage: at which batches (of the whole epoch)
    /// which shards are to be held in memory: those of the windows the batch reads from,
    /// and of the window after (fetched while this one is read). Empty otherwise.
    fn holds(&self, epoch: u64, order: &[usize]) -> Vec<(usize, Vec<String>)> {
        let Some(windows) = self.sampler.epoch_windows(epoch) else {
            return Vec::new();
        };
        let samples = self.subset.samples();
        // The object-storage shards of each window.
        let mut shards: std::collections::BTreeMap<u32, std::collections::BTreeSet<String>> =
            Default::default();
        for (&w, &i) in windows.iter().zip(order) {
            if let Some(p) = samples
                .get(i)
                .and_then(|s| crate::source::shard_of(&s.location))
            {
                if crate::source::remote::is_url(p) {
                    shards
                        .entry(w)
                        .or_default()
                        .insert(p.to_string_lossy().into_owned());
                }
            }
        }
        if shards.is_empty() {
            return Vec::new();
        }
        let mut out: Vec<(usize, Vec<String>)> = Vec::new();
        for (b, chunk) in windows.chunks(self.sampler.batch_size()).enumerate() {
            let (Some(&lo), Some(&hi)) = (chunk.iter().min(), chunk.iter().max()) else {
                continue;
            };
            let want: Vec<String> = (lo..=hi.saturating_add(1))
                .filter_map(|w| shards.get(&w))
                .flatten()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            if out.last().is_none_or(|(_, prev)| *prev != want) {
                out.push((b, want));
            }
        }
        out
    }

    /// Where the job stands: the state after the last batch any of this pipeline's
    /// epochs handed out, or at the start of the epoch last started before it hands out
    /// one (epoch 0, nothing consumed, before any). With batches prepared ahead, the last
    /// batch handed out may not be trained on yet: for a checkpoint take the
    /// [`Batch::state`] of the last batch trained on.
    pub fn state(&self) -> ResumeState {
        self.cfg.progress.last()
    }

    /// The rest of the epoch `state` was taken in ([`Batch::state`], [`Pipeline::state`],
    /// saved with a checkpoint and read back): the global batches after its
    /// `samples_consumed`, with every rank taking its slice of each, so a job continues
    /// on any world size whose `batch_size * world_size` is the state's global batch size.
    /// A state at the end of its epoch gives an empty epoch: go on with
    /// `epoch(state.epoch + 1)`.
    ///
    /// Refused, with [`Error::Resume`](crate::Error::Resume): a state of another format
    /// version, seed, dataset or order ([`ResumeError`](crate::error::ResumeError) says
    /// which), or of another global batch size (a change of global batch size is refused,
    /// not handled at the epoch's boundary: start the next epoch with [`Pipeline::epoch`]
    /// instead). Under [`Sharding::PerRank`](crate::source::sampler::Sharding::PerRank) a
    /// state resumes on the same world size only.
    pub fn resume(&self, state: &ResumeState) -> Result<Epoch> {
        let first = self.cfg.progress.check(state)?;
        self.epoch_from(state.epoch, first)
    }

    /// Reader threads (set, or the default for where the subset lives; under
    /// [`PipelineBuilder::autotune`], the number autotune has settled on so far).
    pub fn readers(&self) -> usize {
        self.cfg.tune.readers()
    }

    /// The sampler (epoch order, shards, batches).
    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// Batches per epoch on this shard.
    pub fn num_batches(&self) -> usize {
        self.sampler.num_batches()
    }

    /// The subset being read.
    pub fn subset(&self) -> &Subset {
        &self.subset
    }

    /// The backend in use ([`Backend::kind`] says which).
    pub fn backend(&self) -> &dyn Backend {
        self.cfg.backend.as_ref()
    }

    /// Why this backend was chosen (the request, and each fallback with its reason).
    pub fn backend_reason(&self) -> &str {
        &self.cfg.backend_reason
    }

    /// The augmentation configuration.
    pub fn augment(&self) -> &Augment {
        &self.cfg.augment
    }

    /// Bytes held by the decoded-sample cache.
    pub fn cache_bytes_used(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.used())
    }

    /// Bytes of device memory the entries of the device cache of decoded samples take
    /// (0 without one: see [`PipelineBuilder::device_cache_bytes`]).
    pub fn device_cache_bytes_used(&self) -> u64 {
        self.cfg.work.kept_bytes()
    }

    /// The memory the crop index holds now ([`PipelineBuilder::crop_index_bytes`]): it
    /// grows while files are first (and, for progressive JPEGs, second) decoded, up to
    /// that cap, and not after.
    pub fn crop_index_bytes(&self) -> usize {
        self.cfg.verdicts.index_bytes()
    }

    /// Bytes of the batch ring (`prefetch` batches of images and masks), fixed by the
    /// configuration: host memory, or device memory on a device backend (which may lend
    /// one more batch while one waits ready for the caller). The staging ring adds
    /// `staging_slots` buffers that each grow to the largest file read.
    pub fn memory_in_flight(&self) -> usize {
        let c = &self.cfg;
        let device = c
            .batcher
            .as_ref()
            .and_then(|g| g.lock().ok().map(|g| g.memory_in_flight()))
            .unwrap_or(0);
        c.tune.prefetch() * c.batch_size * (c.image_bytes() + c.mask_bytes()) + device as usize
    }

    /// Which decoder took the encoded JPEGs so far, on a device backend with a hardware
    /// decoder (all zero elsewhere).
    pub fn decode_paths(&self) -> crate::backend::device::DecodePaths {
        self.cfg
            .batcher
            .as_ref()
            .and_then(|g| g.lock().ok().map(|g| g.decode_paths()))
            .unwrap_or_default()
    }

    /// Waits until the device has finished every batch handed out so far (a no-op on the
    /// CPU backend). For benchmarks: stop the clock after it.
    pub fn wait_device(&self) -> Result<()> {
        match &self.cfg.batcher {
            Some(b) => b
                .lock()
                .map_err(|_| crate::error::Error::poisoned("device batcher"))?
                .wait(),
            None => Ok(()),
        }
    }

    /// Statistics over every finished epoch.
    pub fn stats(&self) -> Stats {
        let mut s = self.cfg.describe(self.total.snapshot());
        s.device_cache_bytes = self.device_cache_bytes_used();
        s
    }
}

//! Configuring a [`Pipeline`].

use std::sync::{Arc, Mutex};

use super::transform::{TransformResult, UserSample, UserTransform};
use super::{cache::Cache, stats::Counters, Config, OnError, Pipeline};
use crate::augment::Augment;
use crate::backend::device::job::{CoeffPool, HardwareDecode};
use crate::backend::device::sample_work::WorkOptions;
use crate::backend::device::share::EngineShare;
use crate::backend::device::BatcherConfig;
use crate::backend::{self, Backend, BackendKind, Selected};
use crate::decode::Limits;
use crate::error::{Error, Result};
use crate::source::sampler::{shard_from_env, Sharding, Weighting};
use crate::source::{Role, Sampler, Subset};

/// Builder for [`Pipeline`]; every value is checked in [`PipelineBuilder::build`].
#[derive(Debug, Clone)]
pub struct PipelineBuilder {
    pub(super) subset: Subset,
    backend: BackendKind,
    /// A backend the caller made: used as it is, with no selection.
    backend_instance: Option<Arc<dyn Backend>>,
    backend_opts: backend::BackendOptions,
    pub(super) augment: Augment,
    pub(super) batch_size: usize,
    /// Whether the caller set the batch size (else it may follow the global one).
    batch_size_set: bool,
    /// The global batch size the caller gave, if any.
    global_batch_size: Option<usize>,
    sharding: Sharding,
    prefetch: usize,
    /// Whether the caller set the prefetch (else autotune may move it).
    prefetch_set: bool,
    autotune: bool,
    memory_budget: Option<u64>,
    crop_index_bytes: usize,
    readers: Option<usize>,
    workers: Option<usize>,
    staging_slots: Option<usize>,
    pub(super) seed: u64,
    on_error: OnError,
    pub(super) limits: Limits,
    strict_decode: bool,
    cache_bytes: u64,
    device_cache_bytes: u64,
    shard: Option<(usize, usize)>,
    shard_from_env: bool,
    drop_last: bool,
    hardware_decode: HardwareDecode,
    device_entropy: bool,
    hardware_share: f32,
    memory_limit: Option<u64>,
    tune_allocator: bool,
    /// Weighted sampling: a weight per sample of the subset, draws an epoch (the subset's
    /// length when `None`), with replacement.
    pub(super) weighting: Option<(Vec<f64>, Option<usize>, bool)>,
    /// Mixture sources' own augmentations, as given.
    source_augments: Vec<(usize, Augment)>,
    /// Block order: shards a window holds.
    block_window: Option<usize>,
    /// The caller's transform of each decoded sample.
    transform: Option<UserTransform>,
    /// Where the Chrome trace of the stages goes (`trace`).
    trace: Option<std::path::PathBuf>,
    /// A setting refused when it was made (`setting`, `reason`), reported by `build`.
    refused: Option<(String, String)>,
    #[cfg(feature = "cuda")]
    cuda_user: Option<(
        std::sync::Arc<cudarc::driver::CudaContext>,
        std::sync::Arc<cudarc::driver::CudaStream>,
    )>,
}

impl PipelineBuilder {
    pub(crate) fn new(subset: Subset) -> Self {
        PipelineBuilder {
            subset,
            backend: BackendKind::Auto,
            backend_instance: None,
            backend_opts: backend::BackendOptions::default(),
            augment: Augment::new(),
            batch_size: 32,
            batch_size_set: false,
            global_batch_size: None,
            sharding: Sharding::Global,
            prefetch: 2,
            prefetch_set: false,
            autotune: false,
            memory_budget: None,
            crop_index_bytes: super::verdict::INDEX_BYTES,
            readers: None,
            workers: None,
            staging_slots: None,
            seed: 0,
            on_error: OnError::Skip,
            limits: Limits::default(),
            strict_decode: true,
            cache_bytes: 0,
            device_cache_bytes: 0,
            memory_limit: None,
            tune_allocator: true,
            weighting: None,
            source_augments: Vec::new(),
            block_window: None,
            transform: None,
            trace: None,
            refused: None,
            shard: None,
            shard_from_env: false,
            drop_last: false,
            hardware_decode: HardwareDecode::default(),
            device_entropy: true,
            hardware_share: EngineShare::DEFAULT,
            #[cfg(feature = "cuda")]
            cuda_user: None,
        }
    }

    setters! {
        /// Allow a software GPU adapter (Mesa lavapipe, WARP) for the wgpu backend when no
        /// hardware adapter exists (default: off; `Auto` then prefers the CPU backend).
        pub fn allow_software_gpu(yes: bool) => self.backend_opts.allow_software_gpu = yes;

        /// Runs the wgpu backend on the caller's own device and queue: every batch is a
        /// `wgpu::Buffer` on that device
        /// ([`WgpuBatch::wgpu_images`](crate::backend::wgpu::WgpuBatch::wgpu_images)), ready
        /// for the caller's passes without a copy. Selects [`BackendKind::Wgpu`].
        #[cfg(feature = "wgpu")]
        pub fn wgpu_device(device: ::wgpu::Device, queue: ::wgpu::Queue) =>
            self.backend_opts.wgpu = Some(backend::wgpu::WgpuContext::from_device(device, queue)),
            self.backend = BackendKind::Wgpu;

        /// Runs the wgpu backend on `ctx`, a context stoker keeps for a framework's device
        /// (its batches then name that very context, see [`WgpuContext::same_as`]).
        ///
        /// [`WgpuContext::same_as`]: crate::backend::wgpu::WgpuContext::same_as
        #[cfg(feature = "wgpu")]
        #[allow(dead_code)] // Used by the burn hand-off only.
        pub(crate) fn wgpu_context(ctx: backend::wgpu::WgpuContext) =>
            self.backend_opts.wgpu = Some(ctx), self.backend = BackendKind::Wgpu;

        /// Which JPEGs go to the GPU's hardware JPEG decoder (nvJPEG's engines, on the CUDA
        /// backend, where the card has them): [`HardwareDecode::Exact`] by default, those
        /// whose pixels it gives as the CPU decoder does but for the engines' IDCT (greyscale,
        /// 4:4:4, 4:2:2, 4:2:0, 4:4:0); [`HardwareDecode::All`] every sampling the engines
        /// take; [`HardwareDecode::Off`]. The rest take the hybrid path.
        pub fn hardware_decode(which: HardwareDecode) => self.hardware_decode = which;

        /// Whether JPEGs with restart markers (written so by `stoker convert`, `jpegtran
        /// -restart` or a camera) are Huffman-decoded on the GPU, the host reading only their
        /// headers (on by default; GPU backends only). A file the device flags (damaged data)
        /// is decoded again on the host path, where libjpeg judges it. Files without restart
        /// markers are entropy-decoded on the host (or by the hardware decoder) either way.
        pub fn device_entropy(on: bool) => self.device_entropy = on;

        /// On a GPU with both a hardware JPEG decoder and the device Huffman path (CUDA with
        /// nvJPEG's engines), the fraction of the JPEGs both take (restart-marked baseline
        /// files the [`Self::hardware_decode`] policy hands the engines) that go to the
        /// engines, 0 to 1; the rest are Huffman-decoded on the SMs, so both decoders work on
        /// every batch. Which samples go where is keyed by the seed and the sample id alone:
        /// the same whatever the workers, the batch size or the epoch. Default 1 (every such
        /// file to the engines); the share that keeps both busy depends on the card and is to
        /// be measured on it. Outside `0..=1` (or NaN) it is an [`Error::Config`] at `build`.
        pub fn hardware_share(share: f32) => self.hardware_share = share;
    }

    /// Runs the CUDA backend on the caller's own context and stream: every batch is a
    /// `CudaSlice` on that context
    /// ([`CudaBatch::cuda_images`](crate::backend::cuda::CudaBatch::cuda_images)), and `stream` waits for
    /// each batch before the caller receives it (no host synchronisation), so the
    /// caller's kernels on `stream` read the finished batch. Selects [`BackendKind::Cuda`]
    /// (an error at [`Self::build`] if NVRTC is missing).
    #[cfg(feature = "cuda")]
    pub fn cuda_stream(
        mut self,
        ctx: std::sync::Arc<cudarc::driver::CudaContext>,
        stream: std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Self {
        self.cuda_user = Some((ctx, stream));
        self.backend = BackendKind::Cuda;
        self
    }

    /// Records a setting that cannot be honoured, for [`Self::build`] to report (the
    /// setters chain, so they cannot fail themselves). The first one is kept.
    #[allow(dead_code)] // Used by the framework hand-offs only.
    pub(crate) fn refuse(mut self, setting: &str, reason: impl Into<String>) -> Self {
        self.refused
            .get_or_insert_with(|| (setting.to_string(), reason.into()));
        self
    }

    setters! {
        /// The backend (default `Auto`).
        pub fn backend(kind: BackendKind) => self.backend = kind;

        /// Runs the pipeline on `backend`, a backend made outside stoker's own selection: a
        /// custom device batcher (a [`Backend`] whose [`Backend::batcher`] hands out the
        /// caller's own [`DeviceBatcher`](crate::backend::device::DeviceBatcher)), or one
        /// already opened. It takes the place of [`Self::backend`] and of the caller's own
        /// device ([`Self::wgpu_device`], `cuda_stream`); its batcher is set up at
        /// [`Self::build`] as stoker's own backends' are.
        pub fn backend_instance(backend: Arc<dyn Backend>) => self.backend_instance = Some(backend);

        /// The augmentation; required. There is no default transform: without an output size
        /// (`Augment::new()` alone, or no call to this method) [`Self::build`] fails with
        /// [`Error::Config`] naming `augment`, saying how to choose one
        /// ([`Augment::resize`], [`Augment::random_resized_crop`],
        /// [`Augment::resize_center_crop`], [`Augment::output_size`]).
        pub fn augment(a: Augment) => self.augment = a;
    }

    /// Source `source` of the [`Mixture`](crate::Mixture) read (its index in the
    /// mixture's list) is augmented by `augment` instead of [`Self::augment`]'s: for
    /// example a stronger colour jitter for one dataset, or none for a clean one. A
    /// batch holds samples of every source, so `augment` must give what the pipeline's
    /// augmentation gives: the same output size, dtype, layout, batch mixing and box
    /// rule; [`Self::build`] refuses it otherwise ([`Error::Config`] naming
    /// `augment_source`), and for a subset that is not a mixture, a source it does not
    /// have, or a source named twice. Its randomness is keyed by `(seed, epoch, sample
    /// id)` as the pipeline's is, so every backend, thread count and resume gives the
    /// same pixels.
    pub fn augment_source(mut self, source: usize, augment: Augment) -> Self {
        self.source_augments.push((source, augment));
        self
    }

    setters! {
        /// Samples per batch on each rank (default 32; with [`Self::global_batch_size`], that
        /// over the world size).
        pub fn batch_size(n: usize) => self.batch_size = n, self.batch_size_set = true;

        /// Samples per global batch, all ranks together: each rank's batch size is then
        /// `n / world_size` (an [`Error::Config`] of setting `global_batch_size` at
        /// [`Self::build`] if the world size does not divide `n`, or if a
        /// [`Self::batch_size`] also given disagrees). Without it the global batch size is
        /// `batch_size * world_size`. With the default [`Sharding::Global`] the epoch's
        /// batches are fixed by `(seed, epoch, global batch size)`: a job keeps its batches,
        /// and resumes ([`Pipeline::resume`]), on any world size.
        pub fn global_batch_size(n: usize) => self.global_batch_size = Some(n);

        /// How the ranks split each epoch (see [`crate::source::sampler`]):
        /// [`Sharding::Global`] (the default: global batches of `batch_size * world_size`,
        /// each rank its contiguous slice, the same batches whatever the world size) or
        /// [`Sharding::PerRank`] (each rank its own strided shard of the whole epoch, stoker's
        /// order before global batches). With one rank both give the same batches.
        pub fn sharding(sharding: Sharding) => self.sharding = sharding;

        /// Batches prepared ahead: the size `K` of the batch ring (default 2; under
        /// [`Self::autotune`], chosen and raised at run time unless set here).
        pub fn prefetch(k: usize) => self.prefetch = k, self.prefetch_set = true;

        /// Reader threads (default 8, or 32 for a subset in object storage, where each read
        /// waits on a request: reading is I/O-bound; under [`Self::autotune`], chosen and
        /// raised at run time unless set here).
        pub fn readers(n: usize) => self.readers = Some(n);

        /// Chooses the readers, workers and prefetch the caller did not set at run time, from
        /// the stages' measured rates and waits (default: off). Readers start at 2 for local
        /// files (never more than the cores while reads are fast: page cache, local disks) or
        /// 32 for object storage, and rise mid-epoch when the workers wait for bytes, to the
        /// workers' rate times the measured read latency (up to
        /// [`MAX_READERS`](super::autotune::MAX_READERS) when reads wait on storage); workers
        /// are the available cores; prefetch starts at 2 (1 if two batches exceed
        /// [`Self::memory_budget`]) and grows while the consumer waits, the workers are not
        /// saturated and the ring stays within the budget. Settings given with
        /// [`Self::readers`], [`Self::workers`], [`Self::prefetch`] and
        /// [`Self::staging_slots`] are kept as given. Only the speed changes: the batches
        /// (samples, order, pixels, errors) are those of fixed settings. [`Stats`] says what
        /// was chosen ([`Stats::autotuned`], the `initial_*` fields) and so does its report.
        /// The policy is in [`crate::pipeline::autotune`].
        ///
        /// [`Stats`]: super::Stats
        /// [`Stats::autotuned`]: super::Stats::autotuned
        pub fn autotune(on: bool) => self.autotune = on;

        /// The most host memory autotune may let the batch ring (`prefetch` batch buffers)
        /// and the staging buffers (one file each) hold when it raises prefetch and readers.
        /// Default: a quarter of the memory available when [`Self::build`] runs, or the
        /// [`Self::memory_limit`] less the cache where one is set; never more than that limit.
        /// One batch buffer is always held, however small the budget. Without
        /// [`Self::autotune`] it changes nothing.
        ///
        /// The two differ: [`Self::memory_limit`] refuses, at `build`, a configuration whose
        /// fixed buffers would need more; the budget is the room autotune grows into at run
        /// time, a cap on the bytes in flight it adds, never a refusal.
        pub fn memory_budget(bytes: u64) => self.memory_budget = Some(bytes);

        /// The most memory the crop index may take (default 256 MiB; 0 keeps none): what the
        /// pipeline keeps per file, from its first decode, so that later crops decode less.
        /// A JPEG whose one scan is Huffman-coded without restart markers keeps its row
        /// index, where each MCU row's data starts (about 24 bytes a row, about 1 KB for a
        /// 500x375 photo): later crops entropy-decode only the rows and columns they need.
        /// A progressive JPEG keeps a restart-marked baseline copy of its coefficients (about
        /// its own size, with the standard Huffman tables), made by its first decode, which
        /// decodes its crop from it as later crops do: only their rows. The pixels are the
        /// same either way. Files past the cap are decoded as they are; with 0, progressive
        /// JPEGs are not copied.
        pub fn crop_index_bytes(bytes: usize) => self.crop_index_bytes = bytes;

        /// Decode and augment threads (default: available cores).
        pub fn workers(n: usize) => self.workers = Some(n);

        /// Staging buffers for compressed bytes (default `max(2 * batch_size, 2 * workers)`).
        pub fn staging_slots(n: usize) => self.staging_slots = Some(n);

        /// Writes a Chrome trace of the stages to `path` (Perfetto and `chrome://tracing` open
        /// it): one span per sample read, decoded and augmented, and per batch waited for or
        /// submitted to the device, on the thread that did it; the file is rewritten at the
        /// end of every epoch with every span so far (at most
        /// [`MAX_TRACE_EVENTS`](super::MAX_TRACE_EVENTS)). Off by default, and then free. A
        /// trace that cannot be written is logged, never an error.
        pub fn trace(path: impl Into<std::path::PathBuf>) => self.trace = Some(path.into());

        /// The training seed: with the epoch and the sample id it keys all randomness.
        pub fn seed(seed: u64) => self.seed = seed;

        /// What to do with a sample that fails (default `Skip`).
        pub fn on_error(p: OnError) => self.on_error = p;

        /// Limits checked before allocating (default: 178.9 Mpx, 256 MiB files).
        pub fn limits(l: Limits) => self.limits = l;

        /// Refuse damaged JPEGs (default) or decode what can be decoded, filling the damage
        /// with grey. See [`DecodeOptions::strict`](crate::decode::DecodeOptions::strict).
        pub fn strict_decode(strict: bool) => self.strict_decode = strict;

        /// The most host memory the pipeline's batch buffers and decoded-sample cache may
        /// hold (default: the memory the system says is available when [`build`] runs: Linux's
        /// `MemAvailable`, or what the cgroup leaves, whichever is less; unchecked where neither
        /// can be read). A configuration that needs more (say `--size 16384 --batch 64` in
        /// `f32`: 206 GB a batch) is an [`Error::Config`] of setting `memory` at `build`,
        /// naming the figure, rather than an allocation that aborts the process.
        ///
        /// [`build`]: PipelineBuilder::build
        pub fn memory_limit(bytes: u64) => self.memory_limit = Some(bytes);

        /// Whether building the pipeline may fix glibc's allocator thresholds for the process
        /// (default `true`): buffers of 1 MiB and more mapped on their own and arenas trimmed
        /// beyond 128 KiB, so that resident memory stays flat over epochs of mixed image sizes
        /// instead of creeping up in each thread's arena. Process-wide, done once, and never
        /// where the environment tunes the allocator already (`MALLOC_MMAP_THRESHOLD_`,
        /// `MALLOC_TRIM_THRESHOLD_`, `MALLOC_TOP_PAD_`, `GLIBC_TUNABLES`); nothing on other C
        /// libraries. `false` leaves the allocator as the program has it.
        pub fn tune_allocator(tune: bool) => self.tune_allocator = tune;

        /// Keep up to `bytes` of decoded samples (before augmentation) across epochs, in host
        /// memory: whole images, filled in the first epoch (first come, first kept, nothing
        /// evicted) and served in later ones without reading the file. Augmentation runs on
        /// them with each epoch's plan. On a GPU backend a sample kept here is decoded on the
        /// CPU and its pixels uploaded in every epoch; with [`Self::device_cache_bytes`] it is
        /// kept in device memory instead, as far as that budget goes.
        pub fn cache_bytes(bytes: u64) => self.cache_bytes = bytes;

        /// GPU backends: keep up to `bytes` of decoded samples in device memory across epochs
        /// (default 0: none). A sample's first epoch decodes its whole image on the device
        /// (upright after its EXIF orientation, at full scale: the pixels of the CPU decode)
        /// and a copy on the device keeps it; later epochs neither read nor decode it, the
        /// image is copied into the batch and augmented with the epoch's plan (each epoch
        /// still looks different). Label planes stay in host memory (they are uploaded with
        /// every batch), so do the decoder's warnings, delivered again in every epoch.
        ///
        /// The budget is capped by what the device allows for one buffer (wgpu:
        /// `max_buffer_size`; CUDA: the memory free when the pipeline is built) and filled
        /// first come, first kept, nothing evicted. A sample with no room left goes to the
        /// host cache of [`Self::cache_bytes`] when there is one (decoded on the CPU, as
        /// without this option); otherwise it is decoded on the device in every epoch. Both
        /// caches turn the crop-aware decode off (they keep whole images). On the CPU
        /// backend this option does nothing ([`Self::cache_bytes`] applies).
        /// [`crate::Stats::device_cache_hits`] counts the samples served from it.
        pub fn device_cache_bytes(bytes: u64) => self.device_cache_bytes = bytes;

        /// Read shard `rank` of `world_size` (data-parallel training).
        ///
        /// By default ([`Sharding::Global`], see [`Self::sharding`]) the epoch is a sequence
        /// of global batches of `batch_size * world_size` samples, fixed by the seed, the
        /// epoch and the global batch size, and rank `rank` takes the `rank`-th contiguous
        /// slice of each: the batches do not depend on the world size.
        ///
        /// Every rank gets the same number of samples and batches per epoch, so no rank
        /// leaves an all-reduce early: by default the epoch's permutation is padded by
        /// repeating its first samples (at most one per rank unless the world is larger
        /// than the dataset), and the padded slots are marked in
        /// [`Batch::repeated`](crate::Batch::repeated) so metrics can leave them out; with
        /// [`PipelineBuilder::drop_last`] each rank takes whole batches only and the tail of
        /// the permutation is left out instead. The shards are disjoint apart from the
        /// padding, together cover every sample, and depend only on `(seed, epoch)`.
        /// [`OnError::Replace`](crate::OnError::Replace) draws replacements from the whole
        /// epoch's samples under global batches (the same on any world size), from this
        /// rank's own shard under [`Sharding::PerRank`]. See [`crate::source::sampler`] for
        /// the arithmetic.
        pub fn shard(rank: usize, world_size: usize) => self.shard = Some((rank, world_size));
    }

    /// Read the shard from the launcher's environment: torchrun's `RANK` and `WORLD_SIZE`,
    /// else SLURM's `SLURM_PROCID` and `SLURM_NTASKS`
    /// ([`launch_from_env`](crate::source::sampler::launch_from_env)).
    pub fn shard_from_env(mut self) -> Self {
        self.shard_from_env = true;
        self
    }

    setters! {
        /// Drop the last partial batch of each epoch (default: keep it). With
        /// [`PipelineBuilder::shard`], every rank then takes the same number of whole batches
        /// and the permutation's tail is left out that epoch, instead of padding.
        pub fn drop_last(yes: bool) => self.drop_last = yes;

        /// Block order (see [`crate::source::sampler`]): each training epoch permutes the
        /// shards, and the samples of `window` shards at a time among themselves, rather
        /// than every sample (a full permutation, the default). **Not a full permutation**:
        /// for shards in object storage, where a read by sample costs a request each, the
        /// window's shards are fetched whole and held in memory while it is read (about
        /// `window` shards' bytes, and the next window's on the way). Deterministic for
        /// `(seed, epoch)`; the ranks take contiguous runs of it, each the same length. Samples
        /// that are no shard's (files) are a block each. A validation subset keeps its fixed
        /// order.
        pub fn block_order(window: usize) => self.block_window = Some(window);
    }

    /// Weighted sampling ([`crate::source::sampler::Weighting`]): each training epoch is
    /// `num_samples` draws (the subset's length when `None`), sample `s` drawn with
    /// probability proportional to `weight(s)`, with or without replacement, as PyTorch's
    /// `WeightedRandomSampler`; deterministic for `(seed, epoch)` and sharded across ranks
    /// as the permutation is. A validation subset keeps its fixed order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # for (c, n) in [("cat", 1), ("dog", 9)] {
    /// #     std::fs::create_dir_all(dir.path().join(c)).unwrap();
    /// #     for i in 0..n { std::fs::write(dir.path().join(format!("{c}/{i}.png")), []).unwrap(); }
    /// # }
    /// let data = stoker::Dataset::image_folder(dir.path()).unwrap().all();
    /// // Cats nine times as likely as dogs: balanced classes, 64 draws an epoch.
    /// let pipe = stoker::Pipeline::builder(data)
    ///     .weighted_by(|s| if s.label == Some(0) { 9.0 } else { 1.0 }, Some(64), true)
    ///     .augment(stoker::Augment::new().resize(8, 8))
    ///     .backend(stoker::BackendKind::Cpu)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(pipe.num_batches(), 64 / 32);
    /// ```
    pub fn weighted_by(
        mut self,
        weight: impl Fn(&crate::Sample) -> f64,
        num_samples: Option<usize>,
        replacement: bool,
    ) -> Self {
        let w = self.subset.samples().iter().map(weight).collect();
        self.weighting = Some((w, num_samples, replacement));
        self
    }

    /// Class-balanced sampling: [`PipelineBuilder::weighted_by`] with each sample weighted
    /// by one over the number of samples of its class, so every class is drawn equally
    /// often. Samples without a label get weight 0 (never drawn).
    pub fn class_balanced(self, num_samples: Option<usize>, replacement: bool) -> Self {
        let mut counts = std::collections::HashMap::new();
        for s in self.subset.samples() {
            if let Some(l) = s.label {
                *counts.entry(l).or_insert(0usize) += 1;
            }
        }
        self.weighted_by(
            move |s| {
                s.label
                    .and_then(|l| counts.get(&l))
                    .map_or(0.0, |&c| 1.0 / c as f64)
            },
            num_samples,
            replacement,
        )
    }

    /// Runs `f`, the caller's own code, on every decoded sample before the augment pass,
    /// on the worker threads: it gets the whole upright image, the label plane and the
    /// targets, and the sample's own random stream keyed by `(seed, epoch, sample id)`
    /// ([`UserSample::rng`]), and may change them or replace the image (the sample's plan
    /// is then made for the image it returns). Its error or panic fails the sample with
    /// [`SampleErrorKind::Transform`](crate::SampleErrorKind::Transform), under the
    /// pipeline's [`OnError`] policy.
    ///
    /// It runs on the CPU on every backend: on wgpu and CUDA each sample is then decoded
    /// on the CPU (crop-aware decoding is off), transformed, uploaded, and augmented on
    /// the device. The host cache ([`Self::cache_bytes`]) keeps samples as decoded, before
    /// the transform; the device cache cannot be combined with a transform (an error at
    /// [`Self::build`]). See [`crate::pipeline::transform`].
    ///
    /// ```no_run
    /// # fn main() -> stoker::Result<()> {
    /// use stoker::{Augment, Dataset, Pipeline};
    ///
    /// let pipe = Pipeline::builder(Dataset::image_folder("data/train")?.all())
    ///     // Random inversion, as a recipe stoker does not have would do it.
    ///     .transform(|s| {
    ///         if s.rng().bernoulli(0.2) {
    ///             s.pixels_mut().iter_mut().for_each(|v| *v = 255 - *v);
    ///         }
    ///         Ok(())
    ///     })
    ///     .augment(Augment::new().random_resized_crop(224, (0.08, 1.0), (0.75, 4.0 / 3.0)))
    ///     .build()?;
    /// # let _ = pipe; Ok(()) }
    /// ```
    pub fn transform(
        mut self,
        f: impl Fn(&mut UserSample<'_>) -> TransformResult + Send + Sync + 'static,
    ) -> Self {
        self.transform = Some(UserTransform(Arc::new(f)));
        self
    }

    /// Validates the configuration, selects the backend and returns the pipeline.
    pub fn build(mut self) -> Result<Pipeline> {
        if let Some((setting, reason)) = &self.refused {
            return Err(Error::config(setting, reason));
        }
        let (rank, world) = self.rank_and_world()?;
        self.batch_size = self.per_rank_batch(world)?;
        self.augment.validate()?;
        if self.tune_allocator {
            super::heap::tune();
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = self.workers.unwrap_or(cores);
        let auto = self.auto();
        let readers = self.readers.unwrap_or_else(|| {
            let remote = is_remote(&self.subset);
            match auto.readers {
                true => super::autotune::initial_readers(remote, cores),
                false if remote => super::autotune::REMOTE_READERS,
                false => 8,
            }
        });
        if workers == 0 || readers == 0 || self.prefetch == 0 {
            let setting = match (workers, readers) {
                (0, _) => "workers",
                (_, 0) => "readers",
                _ => "prefetch",
            };
            return Err(Error::config(setting, "must be at least 1"));
        }
        if self.batch_size == 0 {
            return Err(Error::config("batch_size", "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&self.hardware_share) {
            return Err(Error::config("hardware_share", "must be between 0 and 1"));
        }
        // Under autotune, a staging buffer for each reader besides the workers' own.
        let staging_slots = self.staging_slots.unwrap_or(
            (2 * self.batch_size)
                .max(2 * workers)
                .max(usize::from(auto.readers) * (readers + 2 * workers)),
        );
        if staging_slots == 0 {
            return Err(Error::config("staging_slots", "must be at least 1"));
        }
        let samples = self.subset.samples();
        let has_masks = self.check_masks(samples)?;
        let shuffle = self.subset.role() == Role::Train;
        if !shuffle && self.augment.is_random() {
            log::warn!("validation subset with random augmentation; use Augment::validation for a fixed transform");
        }
        let mut sampler = Sampler::new(samples.len(), self.seed, shuffle)
            .sharding(self.sharding)
            .shard(rank, world)?
            .batches_of(self.batch_size, self.drop_last)?;
        if let Some((weights, num_samples, replacement)) = &self.weighting {
            let n = num_samples.unwrap_or(samples.len());
            sampler = sampler.weighted(Weighting::new(weights.clone(), n, *replacement)?)?;
        }
        if let Some(window) = self.block_window {
            sampler = sampler.blocks(block_groups(samples), window)?;
        }
        if let Some(m) = self.subset.mixing() {
            sampler = sampler.mixed(m.clone())?;
        }
        let selected = self.select(workers)?;
        let mut batcher = selected.backend.batcher(&BatcherConfig {
            ring: self.prefetch.max(2),
            batch_size: self.batch_size,
            batch_bytes: self.batch_bytes(has_masks),
            hardware: self.hardware_decode,
            strict: self.strict_decode,
        })?;
        let coeff_pool = Arc::new(CoeffPool::default());
        let work = crate::backend::sample_work(
            batcher.as_deref_mut(),
            WorkOptions {
                device_entropy: self.device_entropy,
                share: EngineShare::new(self.hardware_share, self.seed),
                device_cache_bytes: self.device_cache_bytes,
                coeff_pool: Arc::clone(&coeff_pool),
            },
        )?;
        let host_batch = self.host_batch_bytes(has_masks, work.writes_host_slots());
        let budget = self.budget();
        if auto.prefetch {
            self.prefetch = super::autotune::initial_prefetch(budget, host_batch);
        }
        self.check_memory(has_masks, work.writes_host_slots())?;
        if work.keeps_decoded() && self.transform.is_some() {
            return Err(Error::config(
                "device_cache_bytes",
                "the device cache keeps decoded samples on the device, where a user \
                 transform (which runs on the host) cannot reach them: use cache_bytes",
            ));
        }
        let (augment, source_augments) = super::source_augment::prepare(
            &self.subset,
            self.augment,
            self.source_augments,
            self.transform.is_some(),
            self.cache_bytes > 0 || work.keeps_decoded(),
        )?;
        let cfg = Config {
            backend: selected.backend,
            backend_reason: selected.reason,
            augment,
            source_augments,
            batch_size: self.batch_size,
            tune: super::autotune::Tuned::new(super::autotune::Start {
                readers,
                workers,
                prefetch: self.prefetch,
                staging: staging_slots,
                staging_fixed: self.staging_slots.is_some(),
                auto,
                budget,
                batch_bytes: host_batch,
                host_ring: batcher.is_none(),
                batch_size: self.batch_size,
            }),
            seed: self.seed,
            on_error: self.on_error,
            limits: self.limits,
            strict_decode: self.strict_decode,
            has_masks,
            replace_attempts: 16,
            batcher: batcher.map(|b| Arc::new(Mutex::new(b))),
            work,
            coeff_pool,
            verdicts: super::verdict::Verdicts::new(self.crop_index_bytes),
            transform: self.transform,
            trace: self.trace.map(|p| Arc::new(super::trace::Trace::new(&p))),
            progress: super::state::Progress::new(self.seed, &self.subset, &sampler),
        };
        Ok(Pipeline {
            cache: (self.cache_bytes > 0).then(|| Arc::new(Cache::new(self.cache_bytes))),
            cfg: Arc::new(cfg),
            subset: self.subset,
            sampler,
            total: Arc::new(Counters::default()),
            pool: Arc::new(Mutex::new(Vec::new())),
            staging: Arc::new(Mutex::new(Vec::new())),
            workers: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// The shard: given, from the environment, or the only one.
    fn rank_and_world(&self) -> Result<(usize, usize)> {
        match (self.shard, self.shard_from_env) {
            (Some(s), false) => Ok(s),
            (None, true) => shard_from_env(),
            (None, false) => Ok((0, 1)),
            (Some(_), true) => Err(Error::config(
                "shard",
                "give the shard explicitly or from the environment, not both",
            )),
        }
    }

    /// Each rank's batch size: the one set, or the global batch size over the world size.
    fn per_rank_batch(&self, world: usize) -> Result<usize> {
        let Some(global) = self.global_batch_size else {
            return Ok(self.batch_size);
        };
        let bad = |m: String| Err(Error::config("global_batch_size", m));
        if global == 0 || world == 0 || !global.is_multiple_of(world) {
            return bad(format!(
                "{global} is not a positive multiple of the world size {world}"
            ));
        }
        let per_rank = global / world;
        if self.batch_size_set && self.batch_size != per_rank {
            return bad(format!(
                "batch_size {} on {world} rank(s) is a global batch of {}, not {global}",
                self.batch_size,
                self.batch_size.saturating_mul(world)
            ));
        }
        Ok(per_rank)
    }

    /// Whether the samples have masks (all or none may), refusing mixing for a dataset
    /// with masks or targets it cannot mix.
    fn check_masks(&self, samples: &[crate::source::Sample]) -> Result<bool> {
        let has_masks = samples.first().is_some_and(|s| s.mask.is_some());
        if samples.iter().any(|s| s.mask.is_some() != has_masks) {
            return Err(Error::dataset(
                "some samples have masks and some do not; pair masks for all or none",
            ));
        }
        if self.augment.get_mixing().any() {
            if has_masks {
                return Err(Error::config(
                    "mixup",
                    "MixUp and CutMix mix image planes only: a dataset with masks cannot be \
                     mixed (its masks would no longer match the images)",
                ));
            }
            if let Some(s) = samples.iter().find(|s| s.targets.is_some()) {
                return Err(Error::config(
                    "mixup",
                    format!(
                        "MixUp and CutMix mix image planes and class labels only: {:?} has \
                         targets (boxes, keypoints, several class ids, values), which cannot \
                         be mixed",
                        s.path
                    ),
                ));
            }
        }
        Ok(has_masks)
    }

    /// The backend: the caller's own instance, or the one selected as asked.
    fn select(&self, workers: usize) -> Result<Selected> {
        if let Some(b) = &self.backend_instance {
            let reason = format!("{} backend given by the caller: {}", b.kind(), b.device());
            log::info!("backend: {reason}");
            return Ok(Selected {
                backend: Arc::clone(b),
                reason,
            });
        }
        #[cfg(feature = "cuda")]
        {
            let mut opts = self.backend_opts.clone();
            if let Some((ctx, stream)) = &self.cuda_user {
                opts.cuda = Some(backend::cuda::CudaDevice::from_context(
                    Arc::clone(ctx),
                    Arc::clone(stream),
                )?);
            }
            backend::select_with(self.backend, workers, &opts)
        }
        #[cfg(not(feature = "cuda"))]
        backend::select_with(self.backend, workers, &self.backend_opts)
    }

    /// Refuses a configuration whose host memory in flight (the ring of batch buffers, on
    /// the host unless batches are made on a device, and the cache) is more than
    /// [`PipelineBuilder::memory_limit`] or what the system has available.
    fn check_memory(&self, has_masks: bool, host_slots: bool) -> Result<()> {
        let (w, h) = self.augment.get_output_size();
        let image = self.augment.bytes_per_image() as u128;
        let mask = if has_masks {
            2 * u128::from(w) * u128::from(h)
        } else {
            0
        };
        let ring = self.prefetch.max(1) as u128;
        let batch = match host_slots {
            true => (image + mask) * self.batch_size as u128,
            false => 0,
        };
        let need = ring * batch + u128::from(self.cache_bytes);
        let (limit, whose) = match self.memory_limit {
            Some(l) => (Some(l), "the memory_limit"),
            None => (
                super::memory::available_host_memory(),
                "the memory available",
            ),
        };
        match limit {
            Some(limit) if need > u128::from(limit) => Err(Error::config(
                "memory",
                format!(
                    "the pipeline would hold {} of host memory ({ring} batch buffer(s) of {} = {} samples of {w}x{h} {}{}{}), more than {whose}, {}; lower batch_size, the output size, prefetch or cache_bytes",
                    super::memory::bytes_figure(need),
                    super::memory::bytes_figure(batch),
                    self.batch_size,
                    self.augment.get_dtype().name(),
                    if has_masks { " with masks" } else { "" },
                    if self.cache_bytes > 0 {
                        format!(", plus a cache of {}", super::memory::bytes_figure(self.cache_bytes.into()))
                    } else {
                        String::new()
                    },
                    super::memory::bytes_figure(limit.into()),
                ),
            )),
            _ => Ok(()),
        }
    }

    /// What autotune moves: what the caller left unset, when it is on.
    fn auto(&self) -> super::autotune::Auto {
        let on = self.autotune;
        super::autotune::Auto {
            on,
            readers: on && self.readers.is_none(),
            workers: on && self.workers.is_none(),
            prefetch: on && !self.prefetch_set,
        }
    }

    /// Autotune's memory budget (see [`PipelineBuilder::memory_budget`]).
    fn budget(&self) -> u64 {
        let limit = self
            .memory_limit
            .map(|l| l.saturating_sub(self.cache_bytes));
        let budget = match (self.memory_budget, limit) {
            (Some(b), _) => b,
            (None, Some(l)) => l,
            (None, None) => super::memory::available_host_memory().map_or(u64::MAX, |a| a / 4),
        };
        limit.map_or(budget, |l| budget.min(l))
    }

    /// Host bytes of one buffer of the batch ring: images and masks, none when batches
    /// are made on a device.
    fn host_batch_bytes(&self, has_masks: bool, host_slots: bool) -> u64 {
        if !host_slots {
            return 0;
        }
        let (w, h) = self.augment.get_output_size();
        let mask = match has_masks {
            true => 2 * u64::from(w) * u64::from(h),
            false => 0,
        };
        (self.augment.bytes_per_image() as u64)
            .saturating_add(mask)
            .saturating_mul(self.batch_size as u64)
    }

    /// Bytes of the largest output buffer of one batch: its images, or its masks.
    fn batch_bytes(&self, has_masks: bool) -> u64 {
        let (w, h) = self.augment.get_output_size();
        let masks = if has_masks {
            2 * u64::from(w) * u64::from(h)
        } else {
            0
        };
        let per_sample = (self.augment.bytes_per_image() as u64).max(masks);
        per_sample.saturating_mul(self.batch_size as u64)
    }
}

/// The block of each sample for block order: its shard (a tar or TFRecord shard, a
/// Parquet file), numbered in the order first met; a sample in a file of its own is a
/// block of its own.
fn block_groups(samples: &[crate::Sample]) -> Vec<u32> {
    let mut ids: std::collections::HashMap<&std::path::Path, u32> = Default::default();
    let mut next = 0u32;
    samples
        .iter()
        .map(|s| {
            let shard = crate::source::shard_of(&s.location);
            let id = match shard {
                Some(p) => *ids.entry(p).or_insert(next),
                None => next,
            };
            if id == next {
                next += 1;
            }
            id
        })
        .collect()
}

/// Whether the subset is read from object storage: reader threads when not set are then
/// [`REMOTE_READERS`](super::autotune::REMOTE_READERS), for each read waits tens of
/// milliseconds on a request (the threads wait, they do not compute); else 8.
fn is_remote(subset: &Subset) -> bool {
    subset.samples().iter().any(|s| match &s.location {
        crate::source::Location::File(p) => crate::source::remote::is_url(p),
        l => crate::source::shard_of(l).is_some_and(crate::source::remote::is_url),
    })
}

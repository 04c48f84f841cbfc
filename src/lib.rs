//! # stoker
//!
//! Keeps accelerators fed: reads, decodes, resizes and augments image batches in the
//! background while the training step runs, with the same samples on every backend.
//!
//! ```no_run
//! use stoker::{Augment, Dataset, OnError, Pipeline, SplitSpec};
//!
//! # fn main() -> stoker::Result<()> {
//! let data = Dataset::image_folder("data/train")?;            // one folder per class
//! let split = data.split(SplitSpec::fraction(0.1).seed(7))?;  // fixed, before any shuffle
//! split.save("split.json")?;
//! let pipe = Pipeline::builder(split.train())
//!     .augment(
//!         Augment::new()
//!             .random_resized_crop(224, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
//!             .flip_horizontal(0.5)
//!             .color_jitter(0.4, 0.4, 0.4)
//!             .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
//!     )
//!     .batch_size(256)
//!     .seed(42)
//!     .on_error(OnError::Skip)
//!     .build()?;
//! for epoch in 0..90 {
//!     for batch in pipe.epoch(epoch)? {
//!         let batch = batch?;
//!         let _images: &[f32] = batch.images::<f32>()?; // [N, 3, 224, 224]; Err names the dtype if not f32
//!         let _labels: Vec<i64> = batch.labels_i64(-100); // None (unlabelled) as -100
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! ## What stoker guarantees
//! - A split is made once, before anything is shuffled, saved as a manifest and checked
//!   ([`source::split`]); a [`Subset`] cannot be split again.
//! - Each epoch is a full permutation from `(seed, epoch)`, sharded into disjoint shards
//!   that cover it ([`source::sampler`]).
//! - All randomness is Philox4x32-10 keyed by `(seed, epoch, sample id)`
//!   ([`rng`]): the same on every backend and thread count.
//! - Label masks are resampled nearest-neighbour only, with the image's geometry, and
//!   never colour-jittered (the CPU reference every backend is checked against).
//! - Every sample is delivered once or reported with its path and reason ([`pipeline`]).
//!
//! ## The API
//!
//! What a program uses is named at the top of the crate (`stoker::Pipeline`,
//! `stoker::Dataset`, `stoker::Augment`, `stoker::Batch`, the errors, ...), and the
//! modules below add what a user reaches for beyond that: [`source`] (sources' options,
//! [`source::split`] and its manifest, [`source::sampler`] and the launcher's rank,
//! [`source::shards`] and the [`ShardWriter`](source::shards::ShardWriter) `stoker convert`
//! uses, [`source::remote`] for object storage), [`decode`] (decode options and limits,
//! [`decode::cpu`], [`decode::jpeg`]'s lossless restart-marker transcoding), [`rng`] (the
//! generator a user transform draws from), [`backend`] (choosing a backend, the device
//! handles [`backend::cuda::CudaDevice`] and [`backend::wgpu::WgpuContext`], and
//! [`backend::device`], the interface a backend of one's own implements),
//! [`pipeline::transform`] (user transforms) and [`frameworks`]. That is the API: the
//! modules and items these docs show.
//!
//! The crate also has modules and items these docs do not show (`#[doc(hidden)]`): the
//! kernels' host layouts, the scalar oracles, the reference execution of every pixel,
//! the formats' readers. They are internal and unstable, public only for the crate's own
//! tests, benchmarks, fuzz targets, command-line tool and Python bindings; a program
//! that names one may break with any release. `scripts/check_api.py` keeps the shown
//! API to the list in `scripts/public-api.txt`.
//!
//! ## Backends
//!
//! | backend | status in this release | fallback |
//! | --- | --- | --- |
//! | CPU (`BackendKind::Cpu`) | always available | none needed |
//! | CUDA (`BackendKind::Cuda`, feature `cuda`) | JPEG decode and augmentation in NVRTC-compiled CUDA kernels ([`backend::cuda`]); every CUDA library loaded at run time | `Auto` falls back to wgpu, then CPU, logged |
//! | wgpu (`BackendKind::Wgpu`, feature `wgpu`) | JPEG decode and augmentation in WGSL ([`backend::wgpu`]) | `Auto` falls back to CPU, logged |
//!
//! Both GPU backends run the same host-planned kernel launches ([`backend::device`]),
//! each behind one interface, [`backend::device::DeviceBatcher`], which a backend hands
//! out through [`backend::Backend::batcher`]. A backend compiled out keeps its names
//! (`backend::cuda::CudaDevice`, `backend::wgpu::WgpuContext`, ...) as stand-ins whose
//! constructors say it is not in this build, so code written for every build needs no
//! `cfg`.
//!
//! ## Features
//!
//! `wgpu` and `cuda` (the device backends) and `cli` (the `stoker` command-line tool
//! and its dependencies, `clap` and `indicatif`) are on by default; `parquet` adds
//! Parquet sources. A library user can take only what they need:
//! `stoker = { version = "0.1", default-features = false, features = ["wgpu"] }` builds
//! neither the CLI nor CUDA support.
//!
//! ## Logging
//!
//! stoker logs through the [`log`](https://docs.rs/log) facade and installs no logger:
//! a program sees the messages once it installs one (`env_logger`, `tracing-log`, ...;
//! `cargo run --example logging` shows them with `env_logger`). The targets are the
//! module paths, all under `stoker`:
//!
//! | level | target | what |
//! | --- | --- | --- |
//! | info | `stoker::backend` | the backend [`BackendKind::Auto`] chose and why it passed over the others (`backend: auto: chose cpu (cuda: ...; wgpu: ...)`) |
//! | info | `stoker::backend::cuda`, `stoker::pipeline::builder`, `stoker::source::shards` | nvJPEG's hardware decoder used or not, the decoded-sample cache turning crop-aware decoding off, a shard index kept in memory |
//! | warn | `stoker::source::shards`, `stoker::pipeline::builder`, `stoker::backend` | shard records skipped, a validation subset with random augmentation, a device buffer replaced or a release event not recorded |
//! | error | `stoker::pipeline` | a pipeline thread that panicked, a batch that could not be read back |
//! | debug | `stoker::pipeline`, `stoker::backend::cuda` | per-sample CPU fallbacks and their reasons, nvJPEG details |
//!
//! Samples that fail are not only logged: they come back as [`SampleError`]s in
//! [`Batch::errors`] and the epoch's stats. `RUST_LOG=stoker=info`
//! with `env_logger` shows the backend choice; the `stoker` tool reads `STOKER_LOG`.
//!
//! Listing wgpu adapters prints nothing either: stoker's Vulkan instance leaves out the
//! Wayland surface extension (it never presents), which made Mesa's device-select layer
//! print `error: XDG_RUNTIME_DIR is invalid or not set in the environment` on stderr on
//! a headless Linux machine. A device the caller makes on an instance of their own
//! ([`backend::wgpu::WgpuContext::from_device`], a framework's) is listed by that
//! instance; there `NODEVICE_SELECT=1` in the environment turns the layer off.
//! `WGPU_BACKEND` (`vulkan`, `gl`, ...) chooses which graphics APIs stoker asks wgpu for.
//!
//! ## Layers
//!
//! The modules stand in layers and import only downwards (`scripts/check_layers.py`
//! checks it in CI):
//!
//! | layer | owns |
//! | --- | --- |
//! | [`error`] | [`Error`], the per-sample report [`SampleError`], [`DecodeError`] |
//! | [`rng`], [`decode`] | the counter-based generator every random choice draws from; the CPU decoders, headers and limits, the JPEG coefficient layout and the scalar oracles of the device stages |
//! | [`source`] | what exists: samples and their stable ids, folders, file lists, shards, Parquet; the split and its manifest; the epoch's order and sharding |
//! | [`augment`] | the per-sample plan from `(seed, epoch, id)` and the reference execution of every pixel |
//! | [`backend`] | who decodes and executes plans: the CPU, and the device backends with what they share ([`backend::device`]: job preparation, batch packing, the launch plan, the batcher interface) |
//! | [`pipeline`] | threads, rings, backpressure and shutdown; the [`Batch`] handle |
//! | [`frameworks`] | batches as burn and candle tensors on the framework's own device (features `burn`, `candle`, `candle-cuda`) |
//!
//! The command-line tool (`src/bin/stoker`) stands on top: the API, and the hidden
//! modules for what only it does (benchmarks, inspection, conversion).

#![warn(missing_docs)]

/// Builder setters that store their arguments in fields of the builder and return it:
/// `pub fn name(arg: T) => self.field = value, self.other = value2;` (after its doc
/// comment and attributes) is
/// `pub fn name(mut self, arg: T) -> Self { self.field = value; self.other = value2; self }`.
/// Defined before the modules so that every module below can use it.
macro_rules! setters {
    ($(
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) =>
            $(self.$($field:ident).+ = $value:expr),+;
    )*) => {
        $(
            $(#[$attr])*
            $vis fn $name(mut self, $($arg: $ty),*) -> Self {
                $(self.$($field).+ = $value;)+
                self
            }
        )*
    };
}

// Hidden modules and items (`#[doc(hidden)]`) are internal and unstable: public only for
// the crate's own tests, benchmarks, fuzz targets, command-line tool and Python bindings.
// What the docs show is the API (scripts/check_api.py, scripts/public-api.txt).
pub mod augment;
pub mod backend;
pub mod decode;
pub mod error;
pub mod frameworks;
pub mod pipeline;
pub mod rng;
pub mod source;

// What the public API takes and returns can be named from the top: the builders' inputs,
// and the types of what `Batch`, `Pipeline`, `Dataset`, `Split` and `Subset` hand back
// (`tests/suite/reexports.rs` names each so).
pub use augment::mix::{BatchMix, MixKind};
pub use augment::{Affine, Augment, BoxRule, DType, Element, Layout, SamplePlan};
pub use backend::device::job::HardwareDecode;
pub use backend::device::{DecodePaths, OnDevice};
// The device batches' typed accessors, one extension trait per backend.
#[cfg(feature = "cuda")]
pub use backend::cuda::CudaBatch;
#[cfg(feature = "wgpu")]
pub use backend::wgpu::WgpuBatch;
pub use backend::BackendKind;
pub use decode::{DecodeError, Limits, WarningKind};
pub use error::{Error, PipelineError, Result, ResumeError, SampleError, SampleErrorKind};
pub use pipeline::{
    Batch, Epoch, OnError, PaddedBoxes, Pipeline, PipelineBuilder, Replacement, ResumeState,
    SampleWarning, Stats, TransformResult, UserSample,
};
pub use pipeline::{BucketBuilder, BucketEpoch, BucketPipeline};
pub use source::buckets::Buckets;
pub use source::sampler::{Exhausted, Sharding};
pub use source::split::{Added, SplitSpec};
pub use source::ListingOptions;
pub use source::{
    BoundingBox, CheckReport, Dataset, Keypoint, Location, Manifest, Mixture, Role, Sample,
    Sampler, SkipReason, Skipped, Split, Subset, Targets, MAX_LABEL,
};

/// The README's examples, compiled as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The examples of `docs/augment.md`, compiled as doc tests.
#[doc = include_str!("../docs/augment.md")]
#[cfg(doctest)]
pub struct GuideAugmentDoctests;

/// The examples of `docs/shards-and-storage.md`, compiled as doc tests.
#[doc = include_str!("../docs/shards-and-storage.md")]
#[cfg(doctest)]
pub struct GuideShardsAndStorageDoctests;

/// The examples of `docs/gpu.md`, compiled as doc tests.
#[doc = include_str!("../docs/gpu.md")]
#[cfg(doctest)]
pub struct GuideGpuDoctests;

/// The examples of `docs/frameworks.md`, compiled as doc tests.
#[doc = include_str!("../docs/frameworks.md")]
#[cfg(doctest)]
pub struct GuideFrameworksDoctests;

/// The examples of `docs/profiling.md`, compiled as doc tests.
#[doc = include_str!("../docs/profiling.md")]
#[cfg(doctest)]
pub struct GuideProfilingDoctests;

/// The examples of `docs/many-gpus.md`, compiled as doc tests.
#[doc = include_str!("../docs/many-gpus.md")]
#[cfg(doctest)]
pub struct GuideManyGpusDoctests;

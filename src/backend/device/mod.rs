//! What every GPU backend shares: the host side of a device batch.
//!
//! Worker threads prepare each sample (entropy decoding to DCT coefficients, or a
//! CPU decode for what the device path does not take); the batch's collector packs the
//! samples into one upload and plans the kernel launches ([`BatchPlan`]); the
//! backend (wgpu or CUDA) only allocates buffers, uploads and runs the planned
//! [`Step`]s. The same plan runs on every backend, and each backend runs it behind
//! one interface, [`DeviceBatcher`].

pub mod augment;
pub mod batch;
pub mod batcher;
pub(crate) mod cache;
pub mod constants;
pub mod decode;
pub mod error;
mod fit;
pub mod job;
pub mod launch;
pub mod mix;
pub mod orient;
mod pool;
pub(crate) mod sample_work;
pub mod share;
pub mod sync_decode;
mod upload;
pub(crate) mod work;

pub use augment::AugmentInput;
#[doc(hidden)]
pub use batch::UPLOAD_THREADS;
pub use batch::{BatchPlan, DeviceLimits, PlanCounts, Sizes, UploadPart, UploadTarget};
pub use batcher::{
    BatchShape, BatcherConfig, DecodePaths, DeviceBatcher, DeviceBuffers, OnDevice, Plane,
};
pub use decode::{DecodeInput, DeviceImage};
pub use error::{DeviceError, Rejected};
#[doc(hidden)]
pub use job::{prepare, prepare_from, prepare_reusing};
pub use job::{CacheSlot, CoeffPool, DeviceJob, DeviceSample, Prepared, SharedImage};
pub use launch::{Binding, Buffer, Kernel, Launch, Step};
pub use mix::MixShape;
pub use orient::OrientJob;

//! What a device backend does with a batch, behind one interface: the pipeline, the
//! command-line tool and the tests drive the wgpu and CUDA backends through
//! [`DeviceBatcher`] alone, with no backend named and no `cfg` at the call site.
//!
//! A backend hands one out through [`crate::backend::Backend::batcher`]; host backends
//! hand out none. The batcher owns what is reused from batch to batch (staging ring,
//! scratch, compiled kernels); each batch's output lives in [`DeviceBuffers`] from
//! [`DeviceBatcher::buffers`], owned by the pipeline's batch ring.
#![doc(hidden)]

use std::any::Any;
use std::fmt;

use super::error::DeviceError;
use super::job::{prepare_with, CoeffPool, DeviceJob, DeviceSample, HardwareDecode};
use crate::augment::mix::BatchMix;
use crate::decode::{DecodeOptions, Image8, ImageInfo};
use crate::error::{Error, Result};

/// Which plane of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plane {
    /// The images, in the batch's layout and dtype.
    Images,
    /// The label masks: `u16` class ids, `[N, H, W]`.
    Masks,
}

impl Plane {
    /// The buffer of this plane, from a batch's image buffer and its mask buffer (where
    /// it has one): what each backend's [`DeviceBuffers::read`] reads.
    #[allow(dead_code)] // Unused in a build without device backends.
    pub(crate) fn pick<'a, T>(self, images: &'a T, masks: Option<&'a T>) -> Option<&'a T> {
        match self {
            Plane::Images => Some(images),
            Plane::Masks => masks,
        }
    }
}

/// How many encoded JPEGs ([`DeviceSample::Encoded`]) each decoder took, and how many of
/// the hardware decoder's batches failed as a whole, since the batcher was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DecodePaths {
    /// Decoded by the hardware JPEG engines.
    pub hardware: u64,
    /// Decoded by nvJPEG's GPU (CUDA) decoder: refused by the engines, or by
    /// `nvjpegDecodeBatchedSupported` for them.
    pub gpu_decoder: u64,
    /// Decoded by the CPU decoder and uploaded: refused by both nvJPEG decoders.
    pub cpu: u64,
    /// Refused by every decoder ([`DeviceError::Rejected`]).
    pub rejected: u64,
    /// Calls on the hardware engines that failed as a whole (their images were retried).
    pub engine_batches_failed: u64,
    /// Calls on nvJPEG's GPU decoder that failed as a whole (their images were retried).
    pub gpu_batches_failed: u64,
}

/// How a batcher is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatcherConfig {
    /// Batches in flight: staging slots of the ring (at least 2 are used).
    pub ring: usize,
    /// Samples per batch (sizes the hardware decoder's batches).
    pub batch_size: usize,
    /// Bytes of the largest output buffer of one batch (its images, or its masks): the
    /// device must hold it in one storage binding.
    pub batch_bytes: u64,
    /// Which JPEGs go to the device's hardware decoder, where it has one.
    pub hardware: HardwareDecode,
    /// Whether what the hardware decoder refuses is decoded strictly by the CPU.
    pub strict: bool,
}

impl Default for BatcherConfig {
    fn default() -> Self {
        BatcherConfig {
            ring: 2,
            batch_size: 1,
            batch_bytes: 0,
            hardware: HardwareDecode::Off,
            strict: true,
        }
    }
}

/// A value as [`Any`], to be downcast to its own type: implemented for every `'static`
/// type, so that trait objects of the traits built on it can be downcast.
pub trait AsAny: Any {
    /// The value as [`Any`].
    fn as_any(&self) -> &dyn Any;

    /// The value as mutable [`Any`].
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// One batch's output buffers on a device, made by [`DeviceBatcher::buffers`] and
/// written by [`DeviceBatcher::run`]. They remember what the consumer must be ordered
/// after (the batch's completion) and what the next write must wait for (the consumer's
/// hand-back). As `AsAny` they are downcast to the type of the backend that made them,
/// for its typed accessors (`WgpuBatch::wgpu_images`, `CudaBatch::cuda_images`, through
/// [`OnDevice`]) and for the batcher that writes them.
pub trait DeviceBuffers: AsAny + Send + Sync + fmt::Debug {
    /// Whether the batch has a mask plane.
    fn has_masks(&self) -> bool;

    /// Reads the first `n` bytes of `plane` back to the host, after the batch's work.
    /// Blocks. `None` where the batch has no such plane.
    fn read(&self, plane: Plane, n: usize) -> Result<Option<Vec<u8>>>;

    /// Called when the consumer hands the batch back: the next write into these buffers
    /// waits for the work the consumer enqueued on them until now.
    fn release(&mut self);
}

/// What lives on a device: a batch (or anything holding one) gives its device buffers,
/// which each backend's typed accessors (`stoker::WgpuBatch`, `stoker::CudaBatch`, extension
/// traits for every `OnDevice` type) downcast to its own buffer type. The pipeline's
/// `Batch` implements it; it names no backend.
pub trait OnDevice {
    /// The batch's device buffers; `None` for a batch in host memory.
    fn device_buffers(&self) -> Option<&dyn DeviceBuffers>;

    /// The device buffers as the backend's own type `T`; `None` for a host batch or one
    /// another backend made.
    fn device_buffers_as<T: 'static>(&self) -> Option<&T> {
        self.device_buffers()?.as_any().downcast_ref::<T>()
    }
}

/// The output buffers of one batch: `slots` samples of `image_bytes` each, and as many
/// masks of `mask_bytes` when that is not 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchShape {
    /// Samples in the batch.
    pub slots: usize,
    /// Bytes of one sample's image.
    pub image_bytes: usize,
    /// Bytes of one sample's mask; 0 for a batch without masks.
    pub mask_bytes: usize,
}

impl BatchShape {
    /// Bytes of `slots` planes of `each` bytes ([`BatchShape::image_bytes`] or
    /// [`BatchShape::mask_bytes`]); a product past `u64` is [`DeviceError::Overflow`],
    /// named `what`.
    pub fn bytes(&self, what: &str, each: usize) -> std::result::Result<u64, DeviceError> {
        (self.slots as u64)
            .checked_mul(each as u64)
            .ok_or_else(|| DeviceError::Overflow {
                what: what.into(),
                count: self.slots as u64,
                each: each as u64,
            })
    }
}

/// Runs planned batches on one device. Used by one thread at a time; everything it
/// allocates is reused from batch to batch, so memory in flight stops growing once the
/// largest batch has been seen.
pub trait DeviceBatcher: Send + fmt::Debug {
    /// Output buffers for one batch of `shape`, zeroed.
    fn buffers(&self, shape: BatchShape) -> Result<Box<dyn DeviceBuffers>>;

    /// Decodes and augments `jobs` into `out` (slot `i` for job `i`) and submits the work
    /// without waiting. Work the consumer orders after the batch ([`crate::Batch`]'s
    /// device accessors say how) sees it finished.
    ///
    /// Samples that nothing decodes (a file the hardware decoder, nvJPEG's GPU decoder and
    /// the CPU decoder all refuse) are [`DeviceError::Rejected`], returned before anything
    /// is written into `out`: the caller leaves them out or replaces them and runs the
    /// batch again. Samples the device entropy pass flags are
    /// [`DeviceError::EntropyFlagged`], returned after the whole batch is queued (`out`
    /// may hold what it wrote): the caller prepares them on the host path and runs the
    /// batch again into the same `out`.
    ///
    /// With `mix`, the batch's images are then mixed as it says (MixUp or CutMix, after
    /// the per-sample pass: `super::mix`), in the same submission.
    fn run(
        &mut self,
        jobs: &[DeviceJob],
        mix: Option<&BatchMix>,
        out: &mut dyn DeviceBuffers,
    ) -> Result<()>;

    /// How many images took each decode path so far, where the backend has more than one
    /// for encoded JPEGs ([`DeviceSample::Encoded`]); all zero elsewhere.
    fn decode_paths(&self) -> DecodePaths {
        DecodePaths::default()
    }

    /// What the batches planned so far came to (uploads, launches, copies), where the
    /// backend plans batches; all zero elsewhere.
    fn plan_counts(&self) -> super::batch::PlanCounts {
        super::batch::PlanCounts::default()
    }

    /// Decodes `images` on the device and submits the work without waiting (decode
    /// benchmarks: [`Self::wait`] before the clock stops).
    fn decode(&mut self, images: &[DeviceSample]) -> Result<()>;

    /// Decodes `images` on the device and reads the decoded windows back (to compare
    /// backends, write previews). Blocks.
    fn decode_to_host(&mut self, images: &[DeviceSample]) -> Result<Vec<Image8>>;

    /// Blocks until everything submitted so far, and every batch handed out, is done.
    fn wait(&self) -> Result<()>;

    /// Bytes of device and pinned memory held for batches in flight (staging, inputs,
    /// scratch; not the output buffers), where the backend tracks it.
    fn memory_in_flight(&self) -> u64;

    /// Which JPEGs workers hand over whole ([`DeviceSample::Encoded`]): the policy asked
    /// for where a hardware decoder is open, else [`HardwareDecode::Off`].
    fn hardware_decode(&self) -> HardwareDecode;

    /// The largest storage binding of the device: a decoded window must fit one.
    fn max_binding(&self) -> u64;

    /// Whether the batcher runs the self-synchronising Huffman decode
    /// ([`super::Kernel::SYNC`]), so that baseline JPEGs without restart markers may go
    /// to the device entropy path too. False by default (a backend without those
    /// kernels: such files take host entropy decoding).
    fn sync_entropy(&self) -> bool {
        false
    }

    /// Sets up the device cache of decoded samples ([`super::Buffer::DecodedCache`]): a
    /// buffer the batcher keeps across batches and epochs, grown (keeping its contents)
    /// up to `bytes` as the plans' copies reach further, capped by what the device allows
    /// for one buffer. Returns the budget granted: at most `bytes`, 0 where the batcher
    /// keeps no such buffer (the default), in which case no plan may copy into it.
    fn set_decoded_cache(&mut self, bytes: u64) -> Result<u64> {
        let _ = bytes;
        Ok(0)
    }

    /// Bytes of device memory the cache of decoded samples holds now.
    fn decoded_cache_bytes(&self) -> u64 {
        0
    }

    /// Decodes one file through the device path into `out` and reads it back, as
    /// `stoker decode` does to compare backends: what the device path does not take is
    /// decoded by the CPU decoder, as in the pipeline. Blocks.
    fn decode_one(
        &mut self,
        bytes: &[u8],
        opts: &DecodeOptions,
        out: &mut Image8,
    ) -> Result<ImageInfo> {
        let pool = CoeffPool::default();
        let p = prepare_with(bytes, opts, &pool, self.hardware_decode())?.fit_bindings(
            bytes,
            opts,
            &pool,
            self.max_binding(),
        )?;
        let mut images = self.decode_to_host(std::slice::from_ref(&p.image))?;
        *out = images.pop().ok_or(DeviceError::ShortRead {
            len: 0,
            requested: 1,
        })?;
        Ok(p.info)
    }
}

/// `out` as the buffer type `T` of the batcher writing it, or an error naming `T` (the
/// buffers of another backend were handed in: a bug in the caller).
pub fn downcast_buffers<T: 'static>(out: &mut dyn DeviceBuffers) -> Result<&mut T> {
    out.as_any_mut().downcast_mut::<T>().ok_or_else(|| {
        Error::internal(format!(
            "buffers of another backend handed to the batcher of {}",
            std::any::type_name::<T>()
        ))
    })
}

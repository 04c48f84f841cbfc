//! candle: a batch as candle tensors on candle's own device (feature `candle`; CUDA with
//! `candle-cuda`).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use stoker::{Augment, DType, Dataset, Pipeline};
//!
//! // A stream of its own (not `new_cuda`'s per-thread default stream), shared with stoker.
//! let device = candle_core::Device::new_cuda_with_stream(0).unwrap_or(candle_core::Device::Cpu);
//! let pipe = Pipeline::builder(Dataset::image_folder("data/train")?.all())
//!     .candle_device(&device) // CUDA: candle's own context and stream
//!     .augment(Augment::new().resize(64, 64).dtype(DType::F32))
//!     .build()?;
//! for batch in pipe.epoch(0)? {
//!     let t = batch?.to_candle(&device)?;
//!     let (images, labels) = (t.images, t.labels); // [N, 3, 64, 64] f32, [N] u32
//!     # let _ = (images, labels);
//! }
//! # Ok(()) }
//! ```
//!
//! On CUDA the hand-off is ordered on the device, never by a host wait: candle's stream
//! waits for the batch's event, and one device-to-device copy per plane puts the batch
//! into memory candle owns (the batch's own buffers go back to the pipeline's ring when the
//! batch is dropped, so a tensor cannot borrow them). The copy runs on candle's stream,
//! which is the pipeline's consumer stream when it was built with
//! [`PipelineBuilder::candle_device`]: the ring then reuses the buffers only after it.

use candle_core::{Device, Tensor};

use crate::augment::DType;
use crate::error::{Error, Result};
use crate::pipeline::{Batch, PipelineBuilder};

/// A batch as candle tensors.
#[derive(Debug, Clone)]
pub struct CandleBatch {
    /// The images, `[N, 3, H, W]` (or `[N, H, W, 3]`, following the batch's layout), in the
    /// batch's dtype (`U8`, `F16` or `F32`).
    pub images: Tensor,
    /// The class labels, `[N]` `U32`; `None` when no sample of the batch has one.
    pub labels: Option<Tensor>,
    /// The label masks, `[N, H, W]` `U32` class ids, for segmentation sets.
    pub masks: Option<Tensor>,
}

fn candle_err(e: candle_core::Error) -> Error {
    Error::Framework {
        framework: "candle",
        reason: e.to_string(),
    }
}

fn describe(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "the candle CPU device".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("candle CUDA device {gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("candle Metal device {gpu_id}"),
    }
}

impl PipelineBuilder {
    /// Runs the pipeline where candle's `device` is: on the CPU backend for
    /// `Device::Cpu`, on the CUDA backend on candle's own context and stream for
    /// `Device::Cuda` (feature `candle-cuda`), so [`Batch::to_candle`] hands batches over
    /// on the device. Another device (Metal, or CUDA in a build without `candle-cuda`) is
    /// an [`Error::Config`] at [`PipelineBuilder::build`].
    pub fn candle_device(self, device: &Device) -> Self {
        match device {
            Device::Cpu => self.backend(crate::BackendKind::Cpu),
            #[cfg(feature = "candle-cuda")]
            Device::Cuda(d) => {
                let stream = d.cuda_stream();
                // `Device::new_cuda` runs candle on the per-thread default stream, which is
                // another stream on each host thread: stoker's threads could not order
                // their work against the training thread's on it.
                if stream.cu_stream() as usize == 0x2 {
                    return self.refuse(
                        "candle_device",
                        "candle's device runs on the per-thread default stream \
                         (Device::new_cuda); make it with Device::new_cuda_with_stream so \
                         stoker and candle share one stream",
                    );
                }
                let ctx = std::sync::Arc::clone(stream.context());
                self.cuda_stream(ctx, stream)
            }
            other => {
                let reason = format!(
                    "stoker cannot run on {}{}",
                    describe(other),
                    match other.is_cuda() {
                        true => " in this build (enable stoker's `candle-cuda` feature)",
                        false => "",
                    }
                );
                self.refuse("candle_device", reason)
            }
        }
    }
}

impl Batch {
    /// The batch as candle tensors on `device` (see [`CandleBatch`]).
    ///
    /// - A host batch (CPU backend) becomes tensors by one copy, onto any device: on a GPU
    ///   that copy is the upload (the CPU fallback of a CUDA model).
    /// - A CUDA batch becomes tensors on the same CUDA device by one device-to-device copy
    ///   per plane, ordered after the batch's event on candle's stream (feature
    ///   `candle-cuda`).
    /// - A device batch wanted on another device (a CUDA batch on the CPU or on another
    ///   context, a wgpu batch anywhere) is an [`Error::DeviceMismatch`].
    pub fn to_candle(&self, device: &Device) -> Result<CandleBatch> {
        let labels = self.candle_labels(device)?;
        if !self.on_device() {
            return self.host_to_candle(device, labels);
        }
        #[cfg(feature = "candle-cuda")]
        if let (Some(_), Device::Cuda(d)) = (crate::CudaBatch::cuda_images(self), device) {
            return cuda::to_candle(self, d, labels);
        }
        Err(Error::DeviceMismatch {
            batch: super::batch_location(self),
            wanted: describe(device),
            hint: match (self.on_device(), device.is_cuda()) {
                (true, false) => "build the pipeline with candle_device(&device), or read the \
                                  batch back with read_images()"
                    .into(),
                _ => "build the pipeline with candle_device(&device)".into(),
            },
        })
    }

    /// `[N]` u32 labels (see [`super::labels`]).
    fn candle_labels(&self, device: &Device) -> Result<Option<Tensor>> {
        match super::labels(self, "candle")? {
            Some(values) => Tensor::from_vec(values, self.len(), device)
                .map(Some)
                .map_err(candle_err),
            None => Ok(None),
        }
    }

    fn host_to_candle(&self, device: &Device, labels: Option<Tensor>) -> Result<CandleBatch> {
        let shape = self.shape();
        let images = match self.dtype() {
            DType::U8 => Tensor::from_slice(self.images::<u8>()?, &shape, device),
            DType::F16 => Tensor::from_slice(self.images::<half::f16>()?, &shape, device),
            DType::F32 => Tensor::from_slice(self.images::<f32>()?, &shape, device),
        }
        .map_err(candle_err)?;
        let masks = match self.masks() {
            Some(m) => {
                // candle has no u16: the class ids widen to u32 in the one copy.
                let wide: Vec<u32> = m.iter().map(|&v| u32::from(v)).collect();
                let [n, h, w] = super::mask_shape(self);
                Some(Tensor::from_vec(wide, (n, h, w), device).map_err(candle_err)?)
            }
            None => None,
        };
        Ok(CandleBatch {
            images,
            labels,
            masks,
        })
    }
}

#[cfg(feature = "candle-cuda")]
mod cuda {
    //! The CUDA hand-off: device-to-device copies on candle's stream.

    use candle_core::op::BackpropOp;
    use candle_core::{CudaDevice, CudaStorage, Storage, Tensor};
    use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};

    use candle_core::DType as CandleDType;

    use super::{candle_err, CandleBatch};
    use crate::augment::DType;
    use crate::backend::cuda::batch::CudaBatchBuffers;
    use crate::backend::cuda::CudaBatch;
    use crate::backend::device::OnDevice;
    use crate::error::{Error, Result};
    use crate::pipeline::Batch;

    fn cuda_err(e: cudarc::driver::DriverError) -> Error {
        Error::Framework {
            framework: "candle",
            reason: format!("CUDA: {e}"),
        }
    }

    /// A copy of the first `len` elements of `src` (bytes of `T`s) into memory candle
    /// owns, enqueued on `stream`.
    fn copy_out<T: DeviceRepr + candle_core::cuda::CudaDType>(
        stream: &std::sync::Arc<CudaStream>,
        src: &CudaSlice<u8>,
        len: usize,
        device: &CudaDevice,
    ) -> Result<CudaStorage> {
        let bytes = len * std::mem::size_of::<T>();
        if bytes > src.len() {
            return Err(Error::internal(format!(
                "a CUDA batch plane of {} bytes holds fewer than the {bytes} asked for",
                src.len()
            )));
        }
        let view = src.slice(..bytes);
        // SAFETY: the view holds exactly `len` elements of `T` in bytes the pipeline
        // wrote as `T`s (its dtype is `T`'s; `DeviceRepr` types are plain data), and
        // device allocations are aligned for every element type.
        let typed = unsafe { view.transmute::<T>(len) }
            .ok_or_else(|| Error::internal("cannot view a CUDA batch plane as its dtype"))?;
        // SAFETY: every element of the new allocation is written by the copy enqueued
        // next on the same stream, before anything on that stream reads it.
        let mut dst = unsafe { stream.alloc::<T>(len) }.map_err(cuda_err)?;
        stream.memcpy_dtod(&typed, &mut dst).map_err(cuda_err)?;
        Ok(CudaStorage::wrap_cuda_slice(dst, device.clone()))
    }

    fn tensor(storage: CudaStorage, shape: &[usize]) -> Tensor {
        Tensor::from_storage(Storage::Cuda(storage), shape, BackpropOp::none(), false)
    }

    pub(super) fn to_candle(
        batch: &Batch,
        device: &CudaDevice,
        labels: Option<Tensor>,
    ) -> Result<CandleBatch> {
        let bufs = batch
            .device_buffers_as::<CudaBatchBuffers>()
            .ok_or_else(|| Error::internal("a CUDA batch without CUDA buffers"))?;
        let stream = device.cuda_stream();
        let ours = bufs.device().context();
        if ours.cu_ctx() != stream.context().cu_ctx() {
            return Err(Error::DeviceMismatch {
                batch: format!("CUDA device {}", ours.ordinal()),
                wanted: format!("candle CUDA device {}", stream.context().ordinal()),
                hint: "build the pipeline with candle_device(&device)".into(),
            });
        }
        if !std::sync::Arc::ptr_eq(&stream, bufs.device().stream()) {
            // The pipeline's ring reuses the buffers after its consumer stream's work:
            // a copy on another stream could read a batch being overwritten.
            return Err(Error::DeviceMismatch {
                batch: "the pipeline's consumer stream".into(),
                wanted: "another stream of candle's device".into(),
                hint: "build the pipeline with candle_device(&device), so both use candle's \
                       stream"
                    .into(),
            });
        }
        if let Some(ready) = batch.cuda_event() {
            // Already waited for on the consumer stream; stated here so the order holds
            // by the event, whatever stream candle's device hands out.
            stream.wait(ready).map_err(cuda_err)?;
        }
        let shape = batch.shape();
        let count: usize = shape.iter().product();
        let images = match batch.dtype() {
            DType::U8 => copy_out::<u8>(&stream, &bufs.images, count, device)?,
            DType::F16 => copy_out::<half::f16>(&stream, &bufs.images, count, device)?,
            DType::F32 => copy_out::<f32>(&stream, &bufs.images, count, device)?,
        };
        let images = tensor(images, &shape);
        let masks = match &bufs.masks {
            Some(m) => {
                let [n, h, w] = crate::frameworks::mask_shape(batch);
                // The u16 class ids as byte pairs, widened on the device: lo + 256 hi
                // (candle has no u16, and casts from u8 exist on every backend).
                let bytes = copy_out::<u8>(&stream, m, 2 * n * h * w, device)?;
                let pairs = tensor(bytes, &[n, h, w, 2])
                    .to_dtype(CandleDType::U32)
                    .map_err(candle_err)?;
                let lo = pairs.narrow(3, 0, 1).map_err(candle_err)?;
                let hi = pairs.narrow(3, 1, 1).map_err(candle_err)?;
                // (affine has a u32 kernel: no scalar is uploaded for the product)
                let wide = hi
                    .affine(256.0, 0.0)
                    .and_then(|h| h.add(&lo))
                    .and_then(|t| t.squeeze(3))
                    .map_err(candle_err)?;
                Some(wide)
            }
            None => None,
        };
        Ok(CandleBatch {
            images,
            labels,
            masks,
        })
    }
}

//! The device that makes a pipeline's batches (wgpu or CUDA), behind one interface for
//! the collector and the [`super::Batch`] handle.

use crate::backend::device::job::DeviceJob;
use crate::error::{Error, Result};

#[cfg(feature = "cuda")]
use crate::backend::cuda::{self, batch::CudaBatchBuffers, batch::CudaBatcher};
#[cfg(feature = "wgpu")]
use crate::backend::wgpu::{self, batch::WgpuBatchBuffers, batch::WgpuBatcher};

/// Runs batches on the pipeline's device.
#[derive(Debug)]
pub(crate) enum DeviceBatcher {
    /// No device backend in this build.
    #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
    #[allow(dead_code)]
    None(std::convert::Infallible),
    #[cfg(feature = "wgpu")]
    Wgpu(Box<WgpuBatcher>),
    #[cfg(feature = "cuda")]
    Cuda(Box<CudaBatcher>),
}

/// One batch's output buffers on the device.
#[derive(Debug)]
pub(crate) enum DeviceBuffers {
    /// No device backend in this build.
    #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
    #[allow(dead_code)]
    None(std::convert::Infallible),
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuBatchBuffers),
    #[cfg(feature = "cuda")]
    Cuda(CudaBatchBuffers),
}

/// What a finished batch needs to be read back, and to be ordered before the consumer's
/// work.
#[derive(Debug)]
pub(crate) enum DeviceHandle {
    /// No device backend in this build.
    #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
    #[allow(dead_code)]
    None(std::convert::Infallible),
    #[cfg(feature = "wgpu")]
    Wgpu(wgpu::WgpuContext),
    #[cfg(feature = "cuda")]
    Cuda {
        device: cuda::CudaDevice,
        ready: cudarc::driver::CudaEvent,
    },
}

impl DeviceBatcher {
    /// Output buffers for one batch.
    pub(crate) fn buffers(
        &self,
        batch_size: usize,
        image_bytes: usize,
        mask_bytes: usize,
    ) -> Result<DeviceBuffers> {
        let _ = (batch_size, image_bytes, mask_bytes);
        match self {
            #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
            DeviceBatcher::None(n) => match *n {},
            #[cfg(feature = "wgpu")]
            DeviceBatcher::Wgpu(b) => Ok(DeviceBuffers::Wgpu(WgpuBatchBuffers::new(
                b.context(),
                batch_size,
                image_bytes,
                mask_bytes,
            )?)),
            #[cfg(feature = "cuda")]
            DeviceBatcher::Cuda(b) => Ok(DeviceBuffers::Cuda(CudaBatchBuffers::new(
                b.device(),
                batch_size,
                image_bytes,
                mask_bytes,
            )?)),
        }
    }

    /// Decodes and augments `jobs` into `out` and submits the work; the handle orders
    /// the consumer's work after it.
    pub(crate) fn run(
        &mut self,
        jobs: &[DeviceJob],
        out: &mut DeviceBuffers,
    ) -> Result<DeviceHandle> {
        let _ = &jobs;
        match (self, out) {
            #[cfg(feature = "wgpu")]
            (DeviceBatcher::Wgpu(b), DeviceBuffers::Wgpu(o)) => {
                b.run(jobs, o)?;
                Ok(DeviceHandle::Wgpu(b.context().clone()))
            }
            #[cfg(feature = "cuda")]
            (DeviceBatcher::Cuda(b), DeviceBuffers::Cuda(o)) => {
                let ready = b.run(jobs, o)?;
                let device = b.device().clone();
                // The consumer's stream waits for the batch: its work enqueued after it
                // receives the batch sees the finished batch, with no host wait.
                device
                    .stream()
                    .wait(&ready)
                    .map_err(crate::backend::cuda::device_err)?;
                Ok(DeviceHandle::Cuda { device, ready })
            }
            #[allow(unreachable_patterns)]
            _ => Err(Error::Pipeline(
                "internal: device buffers of another backend".into(),
            )),
        }
    }

    /// Bytes of device and pinned memory held for batches in flight (staging, inputs,
    /// scratch), where the backend tracks it.
    pub(crate) fn memory_in_flight(&self) -> u64 {
        match self {
            #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
            DeviceBatcher::None(n) => match *n {},
            #[cfg(feature = "wgpu")]
            DeviceBatcher::Wgpu(_) => 0,
            #[cfg(feature = "cuda")]
            DeviceBatcher::Cuda(b) => b.memory_in_flight(),
        }
    }
}

impl DeviceHandle {
    /// Reads `n` bytes of the images (or masks) in `bufs` back to the host. Blocks.
    pub(crate) fn read(
        &self,
        bufs: &DeviceBuffers,
        masks: bool,
        n: usize,
    ) -> Result<Option<Vec<u8>>> {
        let _ = (masks, n);
        match (self, bufs) {
            #[cfg(feature = "wgpu")]
            (DeviceHandle::Wgpu(ctx), DeviceBuffers::Wgpu(b)) => {
                let buffer = if masks {
                    b.masks.as_ref()
                } else {
                    Some(&b.images)
                };
                match buffer {
                    Some(buf) => Ok(Some(ctx.read_buffer(buf, 0, n as u64)?)),
                    None => Ok(None),
                }
            }
            #[cfg(feature = "cuda")]
            (DeviceHandle::Cuda { device, .. }, DeviceBuffers::Cuda(b)) => {
                let buffer = if masks {
                    b.masks.as_ref()
                } else {
                    Some(&b.images)
                };
                match buffer {
                    Some(buf) if n <= buf.len() => {
                        // On the consumer's stream, which already waits for the batch.
                        let bytes = device
                            .stream()
                            .clone_dtoh(&buf.slice(..n))
                            .map_err(crate::backend::cuda::device_err)?;
                        Ok(Some(bytes))
                    }
                    Some(buf) => Err(crate::backend::device::DeviceError::ShortRead {
                        len: buf.len(),
                        requested: n,
                    }
                    .into()),
                    None => Ok(None),
                }
            }
            #[allow(unreachable_patterns)]
            _ => Err(Error::Pipeline(
                "internal: device buffers of another backend".into(),
            )),
        }
    }

    /// Called when the consumer hands the batch back: later writes into `bufs` wait for
    /// the work the consumer enqueued on the batch until now.
    pub(crate) fn release(&self, bufs: &mut DeviceBuffers) {
        match (self, bufs) {
            #[cfg(feature = "wgpu")]
            (DeviceHandle::Wgpu(_), _) => {}
            #[cfg(feature = "cuda")]
            (DeviceHandle::Cuda { device, .. }, DeviceBuffers::Cuda(b)) => {
                match device.stream().record_event(None) {
                    Ok(e) => b.released = Some(e),
                    Err(e) => {
                        // Without the event the next batch could overwrite buffers the
                        // consumer still reads: wait instead.
                        log::warn!("cannot record a release event ({e}); synchronising");
                        let _ = device.stream().synchronize();
                    }
                }
            }
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }
}

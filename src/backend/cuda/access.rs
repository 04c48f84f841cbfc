//! A CUDA batch's device memory, typed: the accessors a CUDA consumer reads a batch
//! through, for any [`OnDevice`] value (the pipeline's `Batch`). Bring the trait into
//! scope (`use stoker::CudaBatch;`) to call them as methods.

use cudarc::driver::{CudaEvent, CudaSlice};

use super::batch::CudaBatchBuffers;
use crate::backend::device::OnDevice;

/// The CUDA memory of a batch made by the CUDA backend; `None` for other batches.
pub trait CudaBatch {
    /// The images in CUDA device memory: slot `i` at byte
    /// `i * 3 * width * height * dtype size`, in the batch's layout and dtype. `None` for
    /// other batches. The pipeline's consumer stream already waits for the batch
    /// ([`CudaBatch::cuda_event`] is the event, for other streams). Valid until the batch
    /// is dropped: work the consumer stream has been given by then is ordered before the
    /// buffer is written again.
    fn cuda_images(&self) -> Option<&CudaSlice<u8>>;

    /// The label masks in CUDA device memory: `u16` class ids, `[N, H, W]`.
    fn cuda_masks(&self) -> Option<&CudaSlice<u8>>;

    /// The event that completes when this CUDA batch is ready: a stream other than the
    /// pipeline's consumer stream waits on it before reading the batch.
    fn cuda_event(&self) -> Option<&CudaEvent>;
}

impl<B: OnDevice + ?Sized> CudaBatch for B {
    fn cuda_images(&self) -> Option<&CudaSlice<u8>> {
        Some(&self.device_buffers_as::<CudaBatchBuffers>()?.images)
    }

    fn cuda_masks(&self) -> Option<&CudaSlice<u8>> {
        self.device_buffers_as::<CudaBatchBuffers>()?.masks.as_ref()
    }

    fn cuda_event(&self) -> Option<&CudaEvent> {
        self.device_buffers_as::<CudaBatchBuffers>()?.ready()
    }
}

//! A wgpu batch's buffers, typed: the accessors a wgpu consumer reads a batch through, for
//! any [`OnDevice`] value (the pipeline's `Batch`). Bring the trait into scope
//! (`use stoker::WgpuBatch;`) to call them as methods.

use super::batch::WgpuBatchBuffers;
use crate::backend::device::OnDevice;

/// The wgpu buffers of a batch made by the wgpu backend; `None` for other batches.
pub trait WgpuBatch {
    /// The images as a buffer on the wgpu device (`STORAGE | COPY_SRC | COPY_DST`): slot
    /// `i` at byte `i * 3 * width * height * dtype size`, in the batch's layout and dtype.
    /// `None` for other batches. Valid until the batch is dropped; work submitted on the
    /// same queue before the drop is ordered before the buffer is written again.
    fn wgpu_images(&self) -> Option<&wgpu::Buffer>;

    /// The label masks as a buffer on the wgpu device: `u16` class ids, `[N, H, W]`.
    fn wgpu_masks(&self) -> Option<&wgpu::Buffer>;
}

impl<B: OnDevice + ?Sized> WgpuBatch for B {
    fn wgpu_images(&self) -> Option<&wgpu::Buffer> {
        Some(&self.device_buffers_as::<WgpuBatchBuffers>()?.images)
    }

    fn wgpu_masks(&self) -> Option<&wgpu::Buffer> {
        self.device_buffers_as::<WgpuBatchBuffers>()?.masks.as_ref()
    }
}

//! The fused augmentation pass on wgpu: `shaders/augment.wgsl` runs the launches
//! [`AugmentInput::launches`] plans (see [`crate::backend::device::augment`] for the
//! upload's layout and the passes).

use super::kernels::Pipelines;
use super::WgpuContext;
use crate::backend::device::launch::{Buffer, Kernel, Step};
use crate::error::Result;

pub use crate::backend::device::augment::AugmentInput;
pub use crate::backend::device::decode::DeviceImage;

/// GPU buffers for the intermediates of [`AugmentKernels::encode`], grown when a batch
/// needs more and otherwise reused. One per batch in flight.
#[derive(Debug, Default)]
pub struct AugmentScratch {
    horizontal: Option<wgpu::Buffer>,
    resized: Option<wgpu::Buffer>,
}

/// The augmentation pipelines, built once per device.
#[derive(Debug)]
pub struct AugmentKernels {
    pipelines: Pipelines,
    max_binding: u64,
}

impl AugmentKernels {
    /// Compiles `shaders/augment.wgsl`'s four entry points. A shader or pipeline the device
    /// rejects is [`crate::Error::Device`].
    pub fn new(ctx: &WgpuContext) -> Result<Self> {
        Ok(AugmentKernels {
            pipelines: Pipelines::new(
                ctx,
                &[
                    Kernel::Horizontal,
                    Kernel::VerticalJitter,
                    Kernel::WriteImage,
                    Kernel::WriteMask,
                ],
            )?,
            max_binding: u64::MAX,
        })
    }

    /// Binds at most `bytes` of any buffer per dispatch (the device's
    /// `max_storage_buffer_binding_size` applies anyway): batches are then split into
    /// more dispatches. For tests of the splitting, and for devices that are slow with
    /// large bindings.
    pub fn with_max_binding(mut self, bytes: u64) -> Self {
        self.max_binding = bytes;
        self
    }

    /// Records the augmentation of `input`'s batch into `encoder`: images into
    /// `images_out` (sample `i` at byte `i * image_bytes`; [`AugmentInput::images_bytes`]
    /// long at least) and, when given, label planes into `masks_out` (sample `i` at byte
    /// `i * out_width * out_height * 2`, u16 little-endian; [`AugmentInput::masks_bytes`]).
    ///
    /// `input_buffer` holds [`AugmentInput::bytes`]; `windows` the decoded windows the
    /// samples' [`DeviceImage`]s point into. All need `STORAGE` usage. Buffers too small, a
    /// window outside `windows`, or a sample too large for the device's binding limit are
    /// [`crate::Error::Device`], reported before anything is recorded.
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        &self,
        ctx: &WgpuContext,
        encoder: &mut wgpu::CommandEncoder,
        input: &AugmentInput,
        input_buffer: &wgpu::Buffer,
        windows: &wgpu::Buffer,
        images_out: &wgpu::Buffer,
        masks_out: Option<&wgpu::Buffer>,
        scratch: &mut AugmentScratch,
    ) -> Result<()> {
        if input.is_empty() {
            return Ok(());
        }
        let limits = ctx.device().limits();
        let max = limits.max_storage_buffer_binding_size.min(self.max_binding);
        let per_dim = u64::from(limits.max_compute_workgroups_per_dimension.max(1));
        let (launches, sizes) =
            input.launches(windows.size(), masks_out.is_some(), max, per_dim)?;
        let storage = wgpu::BufferUsages::STORAGE;
        let horizontal = ctx.grow_buffer(
            &mut scratch.horizontal,
            "stoker augment horizontal",
            sizes.horizontal,
            storage,
        )?;
        let resized = ctx.grow_buffer(
            &mut scratch.resized,
            "stoker augment resized",
            sizes.resized,
            storage,
        )?;
        let steps: Vec<Step> = launches.into_iter().map(Step::Launch).collect();
        self.pipelines.record(ctx, encoder, &steps, |b| match b {
            Buffer::AugmentInput => Some(input_buffer),
            Buffer::Windows => Some(windows),
            Buffer::Horizontal => Some(&horizontal),
            Buffer::Resized => Some(&resized),
            Buffer::Images => Some(images_out),
            Buffer::Masks => masks_out,
            _ => None,
        })
    }
}

//! The hybrid JPEG decode on wgpu: `shaders/idct.wgsl` and `shaders/color.wgsl` run the
//! launches [`DecodeInput::launches`] plans (see [`crate::backend::device::decode`] for
//! the upload's layout).

use super::kernels::Pipelines;
use super::WgpuContext;
use crate::backend::device::launch::{Buffer, Kernel, Step};
use crate::error::Result;

pub use crate::backend::device::decode::{DecodeInput, DeviceImage};

/// Grow-only GPU buffers [`DecodeKernels::encode`] uses: the component planes. One per
/// batch in flight.
#[derive(Debug, Default)]
pub struct DecodeScratch {
    planes: Option<wgpu::Buffer>,
}

impl DecodeScratch {
    /// Empty; buffers are made on first use.
    pub fn new() -> Self {
        Self::default()
    }
}

/// The decode pipelines, built once per device.
#[derive(Debug)]
pub struct DecodeKernels {
    pipelines: Pipelines,
}

impl DecodeKernels {
    /// Compiles `shaders/idct.wgsl` and `shaders/color.wgsl`. A shader or pipeline the
    /// device rejects is [`crate::Error::Device`].
    pub fn new(ctx: &WgpuContext) -> Result<Self> {
        Ok(DecodeKernels {
            pipelines: Pipelines::new(ctx, &[Kernel::Idct, Kernel::Color])?,
        })
    }

    /// Records the decode of `input`'s batch into `encoder`. `input_buffer` holds
    /// [`DecodeInput::bytes`]; `windows` receives the RGBA windows at the offsets the
    /// [`DeviceImage`]s returned by the pushes say ([`DecodeInput::window_words`] words). Both
    /// need `STORAGE` usage. Buffers too small, or chunks larger than the device binds, are
    /// [`crate::Error::Device`], reported before anything is recorded.
    pub fn encode(
        &self,
        ctx: &WgpuContext,
        encoder: &mut wgpu::CommandEncoder,
        input: &DecodeInput,
        input_buffer: &wgpu::Buffer,
        windows: &wgpu::Buffer,
        scratch: &mut DecodeScratch,
    ) -> Result<()> {
        if input.is_empty() {
            return Ok(());
        }
        let limits = ctx.device().limits();
        let per_dim = u64::from(limits.max_compute_workgroups_per_dimension.max(1));
        let steps: Vec<Step> = input
            .launches(limits.max_storage_buffer_binding_size, per_dim)?
            .into_iter()
            .map(Step::Launch)
            .collect();
        let planes = ctx.grow_buffer(
            &mut scratch.planes,
            "stoker decode planes",
            input.plane_words() * 4,
            wgpu::BufferUsages::STORAGE,
        )?;
        self.pipelines.record(ctx, encoder, &steps, |b| match b {
            Buffer::DecodeInput => Some(input_buffer),
            Buffer::Planes => Some(&planes),
            Buffer::Windows => Some(windows),
            _ => None,
        })
    }
}

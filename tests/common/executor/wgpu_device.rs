//! The WGSL shaders on this machine's wgpu adapter (software adapters allowed: Mesa
//! lavapipe runs them on the CPU in CI): steps recorded by the backend's own
//! [`Pipelines`], decodes through its [`WgpuBatcher`]. Skips without an adapter unless
//! `STOKER_REQUIRE_WGPU=1`.

use std::sync::{Mutex, OnceLock};

use stoker::backend::device::{DeviceLimits, DeviceSample, Kernel, Step};
use stoker::backend::wgpu::batch::WgpuBatcher;
use stoker::backend::wgpu::kernels::Pipelines;
use stoker::backend::wgpu::WgpuContext;
use stoker::decode::Image8;
use wgpu::util::DeviceExt;

use super::{Buffers, Executor};

/// A wgpu device with every WGSL pipeline built (the batch pipeline's and the sync
/// decode's, [`Kernel::SYNC`]).
pub struct WgpuExecutor {
    ctx: WgpuContext,
    pipelines: Pipelines,
    batcher: Mutex<WgpuBatcher>,
}

/// The executor on [`crate::common::wgpu_context`]'s adapter, built once per test binary;
/// `None` (said on stderr) without one, unless `STOKER_REQUIRE_WGPU=1`.
pub fn get() -> Option<&'static WgpuExecutor> {
    static EXEC: OnceLock<WgpuExecutor> = OnceLock::new();
    let ctx = crate::common::wgpu_context()?;
    Some(EXEC.get_or_init(|| {
        WgpuExecutor {
            pipelines: Pipelines::new(&ctx, &[Kernel::wgsl(), &Kernel::SYNC].concat())
                .expect("the WGSL pipelines"),
            batcher: Mutex::new(WgpuBatcher::new(&ctx, 2).expect("the batcher")),
            ctx,
        }
    }))
}

impl Executor for WgpuExecutor {
    fn name(&self) -> &str {
        self.ctx.name()
    }

    fn limits(&self) -> DeviceLimits {
        let limits = self.ctx.device().limits();
        DeviceLimits {
            max_binding: limits.max_storage_buffer_binding_size,
            per_dim: u64::from(limits.max_compute_workgroups_per_dimension.max(1)),
        }
    }

    fn runs(&self, kernel: Kernel) -> bool {
        Kernel::wgsl().contains(&kernel) || Kernel::SYNC.contains(&kernel)
    }

    /// One storage buffer per entry (copied in, and out when done); the steps recorded
    /// by [`Pipelines::record`], whose refusals ([`stoker::Error::Device`]) are the `Err`.
    fn try_run(&self, steps: &[Step], buffers: &mut Buffers) -> Result<(), String> {
        let device = self.ctx.device();
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        let gpu: Vec<wgpu::Buffer> = buffers
            .0
            .iter()
            .map(|(b, bytes)| {
                device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(&format!("{b:?}")),
                    contents: bytes,
                    usage,
                })
            })
            .collect();
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let mut params = None;
        let recorded =
            self.pipelines
                .record(&self.ctx, &mut encoder, steps, true, &mut params, |b| {
                    buffers.index(b).map(|i| &gpu[i])
                });
        match recorded {
            Ok(()) => {}
            Err(e @ stoker::Error::Device { .. }) => return Err(e.to_string()),
            Err(e) => panic!("wgpu: {e}"),
        }
        self.ctx.queue().submit([encoder.finish()]);
        for ((_, bytes), buffer) in buffers.0.iter_mut().zip(&gpu) {
            *bytes = self
                .ctx
                .read_buffer(buffer, 0, bytes.len() as u64)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Through the backend's [`WgpuBatcher::decode_to_host`].
    fn decode_to_host(&self, samples: &[DeviceSample]) -> Vec<Image8> {
        super::decoded(&self.batcher, |b| b.decode_to_host(samples))
    }
}

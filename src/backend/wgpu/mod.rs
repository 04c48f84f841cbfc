//! The wgpu backend: JPEG decode (host entropy decoding, then dequantisation, IDCT,
//! upsampling and colour conversion in WGSL) and the fused augmentation pass, on any
//! adapter wgpu drives (Vulkan, Metal, DX12).
//!
//! [`WgpuContext`] owns or borrows a `wgpu::Device` and `Queue`. A user who trains with
//! wgpu passes their own with [`WgpuContext::from_device`] and receives each batch as a
//! `wgpu::Buffer` on that device, usable in their own passes without a copy.

mod access;
pub mod batch;
pub mod error;
mod hardware;
mod instance;
pub mod kernels;
mod readback;
pub mod shaders;

use std::fmt;
use std::sync::Arc;

pub use access::WgpuBatch;
pub use error::WgpuError;
pub use kernels::bind_groups_created;

use super::device::{BatcherConfig, DeviceBatcher};
use super::{Backend, BackendKind};
use crate::error::{Error, Result};

/// Environment variable: when `1`, [`WgpuContext::new`] also accepts a software adapter
/// (Mesa lavapipe, WARP) if no hardware adapter exists. CI sets it.
pub const ALLOW_SOFTWARE_ENV: &str = "STOKER_WGPU_ALLOW_SOFTWARE";

/// Whether [`ALLOW_SOFTWARE_ENV`] is set to `1`.
pub fn software_allowed_by_env() -> bool {
    std::env::var(ALLOW_SOFTWARE_ENV).is_ok_and(|v| v.trim() == "1")
}

struct Inner {
    device: wgpu::Device,
    queue: wgpu::Queue,
    name: String,
    software: bool,
}

static BUFFERS_CREATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Buffers stoker has created on wgpu devices so far, in this process (every context):
/// once its grow-only buffers have reached the sizes the batches need, a pipeline makes
/// none per batch.
pub fn buffers_created() -> u64 {
    BUFFERS_CREATED.load(std::sync::atomic::Ordering::Relaxed)
}

/// A wgpu device and queue, owned by stoker or passed in by the user. Cheap to clone.
#[derive(Clone)]
pub struct WgpuContext {
    inner: Arc<Inner>,
}

impl fmt::Debug for WgpuContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WgpuContext")
            .field("device", &self.inner.name)
            .field("software", &self.inner.software)
            .finish()
    }
}

fn unavailable(reason: impl Into<String>) -> Error {
    Error::BackendUnavailable {
        backend: "wgpu".into(),
        reason: reason.into(),
    }
}

/// The adapter stoker picks: the first hardware adapter (discrete, then integrated, then
/// virtual or unknown), and a software one only when `allow_software`.
fn pick(adapters: Vec<wgpu::Adapter>, allow_software: bool) -> Option<wgpu::Adapter> {
    let rank = |t: wgpu::DeviceType| match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu | wgpu::DeviceType::Other => 2,
        wgpu::DeviceType::Cpu => 3,
    };
    adapters
        .into_iter()
        .filter(|a| allow_software || a.get_info().device_type != wgpu::DeviceType::Cpu)
        // Compute shaders need a compute-capable backend: prefer Vulkan/Metal/DX12 to GL.
        .min_by_key(|a| {
            let info = a.get_info();
            (rank(info.device_type), info.backend == wgpu::Backend::Gl)
        })
}

fn describe(info: &wgpu::AdapterInfo) -> String {
    format!(
        "{} ({:?}, {:?})",
        info.name.trim(),
        info.backend,
        info.device_type
    )
}

/// A compute-stage storage buffer entry of a bind group layout.
pub(crate) fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: std::num::NonZeroU64::new(4),
        },
        count: None,
    }
}

/// A bind group entry for `size` bytes (at least 4) of `buffer` at `offset`.
pub(crate) fn bind(
    buffer: &wgpu::Buffer,
    binding: u32,
    offset: u64,
    size: u64,
) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset,
            size: std::num::NonZeroU64::new(size.max(4)),
        }),
    }
}

/// Every adapter wgpu finds on this machine, in words (for logs and `stoker bench`).
pub fn adapters() -> Vec<String> {
    probed_adapters()
        .iter()
        .map(|a| describe(&a.get_info()))
        .collect()
}

/// The adapters of this machine, enumerated once per process: every later pipeline build
/// (an `Auto` build probes wgpu each time) reuses them, as enumerating costs tens of
/// milliseconds. The instances they come from are made so that listing them prints
/// nothing on a headless Linux machine (see the `instance` module).
fn probed_adapters() -> Vec<wgpu::Adapter> {
    static ADAPTERS: std::sync::OnceLock<Vec<wgpu::Adapter>> = std::sync::OnceLock::new();
    ADAPTERS
        .get_or_init(|| {
            let backends = probed_backends();
            instance::instances(backends)
                .iter()
                .flat_map(|i| pollster::block_on(i.enumerate_adapters(backends)))
                .collect()
        })
        .clone()
}

/// The graphics APIs stoker asks wgpu for: those `WGPU_BACKEND` names when it is set
/// (`vulkan`, `gl`, `metal`, `dx12`, comma-separated), else the primary ones and GL.
fn probed_backends() -> wgpu::Backends {
    wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY | wgpu::Backends::GL)
}

/// Why no hardware adapter was found, once looked for: `Auto` asks again on every
/// pipeline it builds, and enumerating adapters costs tens of milliseconds.
static NO_HARDWARE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

impl WgpuContext {
    /// Opens a device of its own: the best hardware adapter, or a software adapter when
    /// `allow_software` and no hardware adapter exists. No adapter is
    /// [`Error::BackendUnavailable`] with the reason.
    pub fn new(allow_software: bool) -> Result<Self> {
        if let (false, Some(why)) = (allow_software, NO_HARDWARE.get()) {
            return Err(unavailable(why.clone()));
        }
        // No GPU device node: listing adapters would load the software drivers alone,
        // which are not taken unless asked for (`hardware`).
        if let (false, Some(why)) = (allow_software, hardware::no_gpu_device()) {
            let _ = NO_HARDWARE.set(why.clone());
            return Err(unavailable(why));
        }
        let adapters = probed_adapters();
        let found: Vec<String> = adapters.iter().map(|a| describe(&a.get_info())).collect();
        let Some(adapter) = pick(adapters, allow_software) else {
            let why = if found.is_empty() {
                "no GPU adapter found (no Vulkan, Metal or DX12 driver)".to_string()
            } else {
                format!(
                    "only software adapters found ({}); set {ALLOW_SOFTWARE_ENV}=1 or ask for wgpu by name to use them",
                    found.join(", ")
                )
            };
            if !allow_software {
                let _ = NO_HARDWARE.set(why.clone());
            }
            return Err(unavailable(why));
        };
        let info = adapter.get_info();
        let desc = wgpu::DeviceDescriptor {
            label: Some("stoker"),
            required_features: wgpu::Features::empty(),
            // Big batches need big storage bindings: ask for what the adapter has.
            required_limits: adapter.limits(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc)).map_err(|e| {
            unavailable(format!("{}: cannot open the device: {e}", describe(&info)))
        })?;
        Ok(Self::wrap(
            device,
            queue,
            describe(&info),
            info.device_type == wgpu::DeviceType::Cpu,
        ))
    }

    /// Uses the caller's device and queue: batches are created on this device, so the
    /// caller's own passes can read them without a copy.
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        Self::wrap(device, queue, "user-provided wgpu device".into(), false)
    }

    fn wrap(device: wgpu::Device, queue: wgpu::Queue, name: String, software: bool) -> Self {
        WgpuContext {
            inner: Arc::new(Inner {
                device,
                queue,
                name,
                software,
            }),
        }
    }

    /// Whether `other` is this very context (a clone of it), not only a device that
    /// compares equal: wgpu compares devices by their id alone, and the devices of two
    /// instances can share one.
    pub fn same_as(&self, other: &WgpuContext) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.inner.device
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    /// The adapter, in words.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether the adapter is a software rasteriser (lavapipe, WARP).
    pub fn is_software(&self) -> bool {
        self.inner.software
    }

    /// Waits until the device has finished all submitted work.
    pub fn wait(&self) -> Result<()> {
        self.inner
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| WgpuError::Poll(e).into())
    }

    /// Creates a buffer, or says why not: larger than the device allows, or out of memory
    /// (wgpu would otherwise report either to its uncaptured-error handler, which panics).
    /// Counted in [`buffers_created`].
    pub fn create_buffer(&self, desc: &wgpu::BufferDescriptor<'_>) -> Result<wgpu::Buffer> {
        BUFFERS_CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let device = self.device();
        let max = device.limits().max_buffer_size;
        let label = desc.label.unwrap_or("buffer");
        if desc.size > max {
            return Err(WgpuError::BufferTooLarge {
                label: label.into(),
                bytes: desc.size,
                max,
            }
            .into());
        }
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let invalid = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = device.create_buffer(desc);
        let invalid = pollster::block_on(invalid.pop());
        let oom = pollster::block_on(oom.pop());
        match invalid.or(oom) {
            Some(source) => Err(WgpuError::CreateBuffer {
                label: label.into(),
                bytes: desc.size,
                source,
            }
            .into()),
            None => Ok(buffer),
        }
    }

    /// A grow-only buffer kept in `slot`: the one there when it holds `bytes`, else a new
    /// one half as large again (within the device's largest buffer), in whole 256-byte
    /// blocks so that any 256-aligned span of it can be bound.
    pub(crate) fn grow_buffer(
        &self,
        slot: &mut Option<wgpu::Buffer>,
        label: &str,
        bytes: u64,
        usage: wgpu::BufferUsages,
    ) -> Result<wgpu::Buffer> {
        let need = bytes.max(256).next_multiple_of(256);
        if let Some(b) = slot.as_ref().filter(|b| b.size() >= need) {
            return Ok(b.clone());
        }
        // Drop the old one first: its memory may be needed for the new one.
        *slot = None;
        let max = self.device().limits().max_buffer_size;
        let size = (need + need / 2).next_multiple_of(256).min(max).max(need);
        let b = self.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        })?;
        *slot = Some(b.clone());
        Ok(b)
    }

    /// Copies `len` bytes at `offset` of `buffer` (which needs `COPY_SRC`) to the host.
    /// For tests, previews and users who want a batch on the host; blocks until done.
    pub fn read_buffer(&self, buffer: &wgpu::Buffer, offset: u64, len: u64) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let mut enc = self
            .device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let readback = self.record_readback(&mut enc, buffer, offset, len, &mut None)?;
        let index = self.queue().submit([enc.finish()]);
        readback.wait(self, index)
    }
}

/// The wgpu backend: the pipeline batches samples through `batch::WgpuBatcher`; samples
/// the GPU path does not take (other formats, JPEG features the shaders do not cover)
/// are decoded by the CPU decoder and uploaded.
#[derive(Debug, Clone)]
pub struct WgpuBackend {
    ctx: WgpuContext,
}

impl WgpuBackend {
    /// A backend on `ctx`.
    pub fn new(ctx: WgpuContext) -> Self {
        WgpuBackend { ctx }
    }
}

impl Backend for WgpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Wgpu
    }

    fn device(&self) -> String {
        self.ctx.name().to_string()
    }

    fn batcher(&self, cfg: &BatcherConfig) -> Result<Option<Box<dyn DeviceBatcher>>> {
        // One buffer holds a batch's images (or masks): it must fit the device.
        let limits = self.ctx.device().limits();
        let max = limits
            .max_buffer_size
            .min(limits.max_storage_buffer_binding_size);
        if cfg.batch_bytes > max {
            return Err(Error::Limit {
                what: format!(
                    "a batch of {} samples in one buffer on {} (use smaller batches)",
                    cfg.batch_size,
                    self.ctx.name()
                ),
                needed: cfg.batch_bytes,
                limit: max,
            });
        }
        Ok(Some(Box::new(batch::WgpuBatcher::new(
            &self.ctx, cfg.ring,
        )?)))
    }
}

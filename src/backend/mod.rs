//! Backends: who decodes and executes plans. One small trait, thin implementations.
//!
//! The CPU backend is always compiled and always works; it is also the reference the GPU
//! backends are tested against. [`select`] resolves [`BackendKind::Auto`] to the best
//! backend this build and machine offer and says why, so a missing GPU is a logged
//! fallback, never an abort.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
/// Stand-in for the CUDA backend in a build without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
#[path = "cuda_dummy.rs"]
pub mod cuda;
pub mod device;
/// What the stand-ins for compiled-out backends share.
#[cfg(not(all(feature = "cuda", feature = "wgpu")))]
mod dummy;
#[cfg(feature = "wgpu")]
pub mod wgpu;
/// Stand-in for the wgpu backend in a build without the `wgpu` feature.
#[cfg(not(feature = "wgpu"))]
#[path = "wgpu_dummy.rs"]
pub mod wgpu;

use std::fmt;
use std::sync::Arc;

use crate::error::Result;
use device::{BatcherConfig, DeviceBatcher};

/// Which backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The best available: CUDA, then wgpu, then CPU.
    #[default]
    Auto,
    /// Host threads (always available).
    Cpu,
    /// wgpu compute shaders (Vulkan, Metal, DX12).
    Wgpu,
    /// CUDA kernels and nvJPEG.
    Cuda,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Auto => "auto",
            BackendKind::Cpu => "cpu",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Cuda => "cuda",
        })
    }
}

crate::error::from_str_by_name! {
    BackendKind, "backend", "backend",
    { "auto" => Auto, "cpu" => Cpu, "wgpu" => Wgpu, "cuda" => Cuda }
}

/// What a backend does for the pipeline: it names itself and, for a device backend,
/// hands out the [`DeviceBatcher`] that runs its batches. Every backend gives the same
/// samples: the CPU backend is the CPU decoder ([`crate::decode::cpu`]) and the reference
/// augmentation (`crate::augment::reference`); a device backend runs the same plans in
/// its kernels and decodes what its device path does not take with the CPU decoder.
pub trait Backend: Send + Sync + fmt::Debug {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// The device, in words (`"cpu (8 threads)"`, an adapter or GPU name).
    fn device(&self) -> String;

    /// The batcher that makes this backend's batches on its device, set up as `cfg`
    /// says; `None` for a host backend, whose batches the pipeline's workers make with
    /// the CPU decoder and `crate::augment::reference`.
    fn batcher(&self, cfg: &BatcherConfig) -> Result<Option<Box<dyn DeviceBatcher>>> {
        let _ = cfg;
        Ok(None)
    }
}

/// A chosen backend and the reason it was chosen.
#[derive(Debug, Clone)]
pub struct Selected {
    /// The backend.
    pub backend: Arc<dyn Backend>,
    /// Why it was chosen (logged at info level by [`select`]).
    pub reason: String,
}

/// How [`select`] may choose.
#[derive(Debug, Clone, Default)]
pub struct BackendOptions {
    /// Let `Auto` accept a software GPU adapter (Mesa lavapipe, WARP) when no hardware
    /// adapter exists. Off by default: a software rasteriser is slower than the CPU
    /// backend. The environment variable `STOKER_WGPU_ALLOW_SOFTWARE=1` turns it on too;
    /// asking for `Wgpu` by name always accepts one.
    pub allow_software_gpu: bool,
    /// The caller's own wgpu device and queue: batches are made on it.
    pub wgpu: Option<wgpu::WgpuContext>,
    /// The caller's own CUDA context and stream: batches are made on it.
    pub cuda: Option<cuda::CudaDevice>,
}

/// Opens the CUDA backend (GPU 0, or the caller's context), or says why not.
fn open_cuda(opts: &BackendOptions) -> Result<(Arc<dyn Backend>, String)> {
    let device = match &opts.cuda {
        Some(d) => d.clone(),
        None => cuda::CudaDevice::new(0)?,
    };
    let backend = cuda::CudaBackend::new(device);
    let name = backend.device();
    Ok((Arc::new(backend), name))
}

/// Opens the wgpu backend as asked, or says why not.
fn open_wgpu(opts: &BackendOptions, asked: bool) -> Result<(Arc<dyn Backend>, String)> {
    let ctx = match &opts.wgpu {
        Some(c) => c.clone(),
        None => wgpu::WgpuContext::new(
            asked || opts.allow_software_gpu || wgpu::software_allowed_by_env(),
        )?,
    };
    let name = ctx.name().to_string();
    let soft = if ctx.is_software() {
        ", a software adapter"
    } else {
        ""
    };
    Ok((
        Arc::new(wgpu::WgpuBackend::new(ctx)),
        format!("{name}{soft}"),
    ))
}

/// Resolves `kind` to a backend. `Auto` never fails: it tries CUDA, then wgpu (a hardware
/// adapter), then falls back to the CPU, and logs why. An explicit GPU kind that is unavailable is an error naming the reason.
pub fn select(kind: BackendKind, threads: usize) -> Result<Selected> {
    select_with(kind, threads, &BackendOptions::default())
}

/// [`select`] with options: a software adapter allowed, or the caller's own device.
pub fn select_with(kind: BackendKind, threads: usize, opts: &BackendOptions) -> Result<Selected> {
    let cpu = || -> Arc<dyn Backend> { Arc::new(cpu::CpuBackend::new(threads)) };
    let selected = match kind {
        BackendKind::Cpu => Selected {
            backend: cpu(),
            reason: "cpu backend requested".into(),
        },
        BackendKind::Wgpu => {
            // Asked for by name: a software adapter will do when there is no other.
            let (backend, name) = open_wgpu(opts, true)?;
            Selected {
                backend,
                reason: format!("wgpu backend requested: {name}"),
            }
        }
        BackendKind::Auto => match open_cuda(opts) {
            Ok((backend, name)) => Selected {
                backend,
                reason: format!("auto: chose cuda on {name}"),
            },
            Err(cuda_err) => match open_wgpu(opts, false) {
                Ok((backend, name)) => Selected {
                    backend,
                    reason: format!("auto: chose wgpu on {name} (cuda: {cuda_err})"),
                },
                Err(e) => Selected {
                    backend: cpu(),
                    reason: format!("auto: chose cpu (cuda: {cuda_err}; wgpu: {e})"),
                },
            },
        },
        BackendKind::Cuda => {
            let (backend, name) = open_cuda(opts)?;
            Selected {
                backend,
                reason: format!("cuda backend requested: {name}"),
            }
        }
    };
    log::info!("backend: {}", selected.reason);
    Ok(selected)
}

/// The host work of a pipeline's samples, decided once when the pipeline is built: the
/// CPU's decode and execution where the backend hands out no device batcher, a device
/// job's preparation where it does (setting up the batcher's device cache as `opts`
/// asks).
pub(crate) fn sample_work(
    batcher: Option<&mut (dyn DeviceBatcher + '_)>,
    opts: device::sample_work::WorkOptions,
) -> Result<Arc<dyn device::sample_work::SampleWork>> {
    let Some(b) = batcher else {
        if opts.device_cache_bytes > 0 {
            log::info!("device cache: no device batches on this backend; off");
        }
        return Ok(Arc::new(cpu::CpuWork));
    };
    let asked = opts.device_cache_bytes;
    let cache = match asked {
        0 => None,
        _ => {
            let granted = b.set_decoded_cache(asked)?;
            if granted < asked {
                log::info!(
                    "device cache: {granted} of the {asked} bytes asked for (what the device allows for one buffer)"
                );
            }
            (granted > 0).then(|| Arc::new(device::cache::DeviceCache::new(granted)))
        }
    };
    Ok(Arc::new(device::work::DeviceWork::new(
        device::sample_work::DeviceWorkConfig {
            max_binding: b.max_binding(),
            hardware_decode: b.hardware_decode(),
            device_entropy: opts.device_entropy,
            device_sync: opts.device_entropy && b.sync_entropy(),
            share: opts.share,
            coeff_pool: opts.coeff_pool,
            cache,
        },
    )))
}

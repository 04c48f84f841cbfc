//! The CUDA backend: the hybrid JPEG decode (host entropy decoding, then dequantisation,
//! IDCT, upsampling and colour conversion in `kernels/*.cu`) and the fused augmentation
//! pass, compiled at run time by NVRTC; nvJPEG's hardware decoder where the card has one.
//!
//! Every CUDA library (the driver, NVRTC, nvJPEG) is loaded at run time, so the crate
//! builds with nothing CUDA installed and one binary runs everywhere: a machine without
//! a driver, a GPU or NVRTC gets a clear [`Error::BackendUnavailable`] (and `Auto` falls
//! back), never a panic. cudarc panics when it touches a library that is absent, so its
//! presence is checked first.
//!
//! [`CudaDevice`] owns or borrows a `cudarc` context. A user who trains with CUDA passes
//! their own context and stream ([`CudaDevice::from_context`]) and receives each batch as
//! a `CudaSlice` on that context with an event their stream waits on.

/// The cudarc release this backend is built on: pass contexts and streams made with it.
pub use cudarc;

mod access;
pub mod batch;
pub mod error;
mod guard;
mod hardware;
pub mod kernel_cache;
pub mod kernels;
pub mod memory;
pub mod nvjpeg;
pub mod nvrtc;

pub use access::CudaBatch;
pub use error::CudaError;

use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use super::device::{BatcherConfig, DeviceBatcher};
use super::{Backend, BackendKind};
use crate::error::{Error, Result};

fn unavailable(reason: impl Into<String>) -> Error {
    Error::BackendUnavailable {
        backend: "cuda".into(),
        reason: reason.into(),
    }
}

/// Whether the CUDA driver library can be loaded (no panic when it cannot).
pub fn driver_present() -> bool {
    library_loads(&["cuda", "nvcuda"])
}

/// Whether cudarc finds one of the libraries `names` (`"cuda"`, `"nvrtc"`) when it opens
/// them by name. cudarc's own probe (`is_culib_present`) exists only when cudarc loads
/// its libraries at run time; stoker asks for that (`fallback-dynamic-loading`), but a
/// crate beside it (candle's `cuda` feature) may make cudarc link them instead, and stoker
/// must build either way. So this probe is stoker's: it tries the names cudarc tries
/// (`cudarc::get_lib_name_candidates` for CUDA 13.0, the version stoker selects), and
/// drops the handle. Where cudarc links the libraries, the program has them loaded
/// already and the probe finds them by their SONAMEs.
pub(crate) fn library_loads(names: &[&str]) -> bool {
    use std::env::consts::{DLL_PREFIX as P, DLL_SUFFIX as S};
    let candidates = names.iter().flat_map(|lib| {
        let width = ["", "13", "130", "130_0", "10", "11", "12", "9"]
            .map(|v| format!("{P}{lib}64{}{v}{S}", if v.is_empty() { "" } else { "_" }));
        let soname = ["13", "12", "11", "10", "9", "1"].map(|v| format!("{P}{lib}{S}.{v}"));
        std::iter::once(format!("{P}{lib}{S}"))
            .chain(width)
            .chain(soname)
    });
    for name in candidates {
        // SAFETY: opening a CUDA library by name runs only its own initialisers; the
        // handle is dropped at once (the library stays loaded for cudarc when it is
        // already in use).
        if unsafe { libloading::Library::new(&name) }.is_ok() {
            return true;
        }
    }
    false
}

/// A CUDA context and the stream batches are handed over on. Cheap to clone.
#[derive(Clone)]
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    /// The stream the consumer works on: each batch's ready event is waited on here
    /// before the batch is handed over (the caller's, or one of ours).
    consumer: Arc<CudaStream>,
    name: String,
    capability: (i32, i32),
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaDevice")
            .field("name", &self.name)
            .field("capability", &self.capability)
            .finish()
    }
}

impl CudaDevice {
    /// Opens GPU `ordinal`, after checking that the driver and NVRTC can be loaded. No
    /// driver, no device or no NVRTC is [`Error::BackendUnavailable`] with the reason.
    pub fn new(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(unavailable(
                "the CUDA driver (libcuda.so.1) is not installed: no NVIDIA GPU here",
            ));
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| unavailable(format!("no CUDA device {ordinal}: {e}")))?;
        let consumer = ctx
            .new_stream()
            .map_err(|e| unavailable(format!("cannot create a stream: {e}")))?;
        Self::from_context(ctx, consumer)
    }

    /// Uses the caller's context and stream: batches are made on `ctx` and each is
    /// ordered before the work the caller enqueues on `stream` after receiving it.
    pub fn from_context(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<Self> {
        kernels::nvrtc_available()?;
        let name = ctx.name().unwrap_or_else(|_| "CUDA device".into());
        let capability = ctx
            .compute_capability()
            .map_err(|e| unavailable(format!("cannot query the device: {e}")))?;
        Ok(CudaDevice {
            ctx,
            consumer: stream,
            name,
            capability,
        })
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The consumer's stream.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.consumer
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compute capability `(major, minor)`.
    pub fn capability(&self) -> (i32, i32) {
        self.capability
    }

    /// Blocks until the consumer stream has finished its work.
    pub fn wait(&self) -> Result<()> {
        self.consumer.synchronize().map_err(device_err)
    }

    /// Free and total device memory, in bytes.
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(device_err)
    }
}

/// A driver error as [`Error::Device`] ([`CudaError::Driver`]).
pub(crate) fn device_err(e: cudarc::driver::DriverError) -> Error {
    CudaError::Driver(e).into()
}

/// The CUDA backend: batches decoded and augmented on a CUDA device.
#[derive(Debug)]
pub struct CudaBackend {
    device: CudaDevice,
}

impl CudaBackend {
    /// A backend on `device`.
    pub fn new(device: CudaDevice) -> Self {
        CudaBackend { device }
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn device(&self) -> String {
        let (major, minor) = self.device.capability;
        format!("{} (sm_{major}{minor})", self.device.name)
    }

    fn batcher(&self, cfg: &BatcherConfig) -> Result<Option<Box<dyn DeviceBatcher>>> {
        // The batches in flight live in device memory: a ring of them larger than the
        // whole device is refused here as a setting ([`Error::Limit`], as the wgpu
        // backend refuses a batch larger than its largest buffer), not met at the first
        // epoch as an allocation failure.
        let (_, total) = self.device.memory()?;
        let ring = cfg.ring.max(2);
        let needed = cfg.batch_bytes.saturating_mul(ring as u64);
        if needed > total as u64 {
            return Err(Error::Limit {
                what: format!(
                    "{ring} batches of {} samples in flight on {} (use smaller batches)",
                    cfg.batch_size, self.device.name
                ),
                needed,
                limit: total as u64,
            });
        }
        let batcher = batch::CudaBatcher::new(&self.device, cfg.ring)?
            .with_hardware_decode(cfg.hardware, cfg.batch_size)
            .strict(cfg.strict);
        Ok(Some(Box::new(batcher)))
    }
}

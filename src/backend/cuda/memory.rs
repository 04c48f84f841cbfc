//! Device and pinned memory, kernel launches and raw copies: the unsafe of the CUDA
//! backend lives here, each block with the reason it is sound.

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PinnedHostSlice,
    PushKernelArg,
};

use super::error::CudaError;
use super::nvjpeg::{self, Refusal};
use super::{device_err, CudaDevice};
use crate::backend::device::launch::{Launch, MAX_BINDINGS, PARAM_WORDS};
use crate::error::Result;

/// The one argument of every kernel (`struct KernelArgs` in `kernels/common.cuh`): the
/// storage bindings' addresses and lengths in u32 words, and the parameter words.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelArgs {
    /// Device address of each binding.
    pub ptr: [u64; MAX_BINDINGS],
    /// Length of each binding in u32 words.
    pub words: [u32; MAX_BINDINGS],
    /// The launch's parameter words.
    pub params: [u32; PARAM_WORDS],
}

// SAFETY: `KernelArgs` is `repr(C)` plain data (integers only, no padding: 64 + 32 + 64
// bytes) with the layout of the CUDA struct it is passed as, by value.
unsafe impl DeviceRepr for KernelArgs {}

/// Enqueues `launch` of `func` on `stream` with `args`.
pub(crate) fn launch(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    l: &Launch,
    args: &KernelArgs,
) -> Result<()> {
    launch_raw(stream, func, l.grid, l.kernel.workgroup(), args)
}

/// Enqueues `func` over `grid` blocks of `block` threads on `stream` with `args`.
pub(crate) fn launch_raw(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    grid: [u32; 2],
    block: u32,
    args: &KernelArgs,
) -> Result<()> {
    let cfg = LaunchConfig {
        grid_dim: (grid[0], grid[1], 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(func);
    b.arg(args);
    // SAFETY: every kernel takes exactly one `KernelArgs` by value, which is what is
    // pushed; the addresses in it were checked by the caller to lie within live device
    // allocations of this context that outlive the enqueued work (they are only freed
    // after the stream has passed the batch's completion event).
    unsafe { b.launch(cfg) }.map_err(device_err)?;
    Ok(())
}

/// Enqueues a device-to-device copy of `bytes` on `stream`.
pub(crate) fn copy_dtod(
    stream: &CudaStream,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
) -> Result<()> {
    // SAFETY: the caller checked both ranges lie within live device allocations of this
    // context, which stay alive until the stream has passed this copy.
    unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }
        .map_err(device_err)
}

/// A grow-only device buffer of bytes, allocated on `stream`.
#[derive(Debug, Default)]
pub struct DeviceBuffer {
    slice: Option<CudaSlice<u8>>,
}

impl DeviceBuffer {
    /// At least `bytes` (rounded up to 256, grown by half again when it grows): the
    /// contents are undefined.
    pub fn ensure(&mut self, stream: &Arc<CudaStream>, bytes: u64) -> Result<&CudaSlice<u8>> {
        let need = bytes.max(256).next_multiple_of(256) as usize;
        if self.slice.as_ref().is_none_or(|s| s.len() < need) {
            self.slice = None;
            let size = (need + need / 2).next_multiple_of(256);
            // SAFETY: device memory of bytes; every byte the kernels read is written
            // first by an upload or an earlier kernel of the same batch.
            let s = unsafe { stream.alloc::<u8>(size) }.map_err(|source| CudaError::Alloc {
                what: "device memory",
                bytes: size,
                source,
            })?;
            self.slice = Some(s);
        }
        self.slice
            .as_ref()
            .ok_or_else(|| CudaError::Missing("device buffer").into())
    }

    /// The buffer, if allocated.
    pub fn get(&self) -> Option<&CudaSlice<u8>> {
        self.slice.as_ref()
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> u64 {
        self.slice.as_ref().map_or(0, |s| s.len() as u64)
    }
}

/// The device address of `slice` (for [`KernelArgs`]).
pub(crate) fn address(slice: &CudaSlice<u8>, stream: &Arc<CudaStream>) -> CUdeviceptr {
    // The guard only records that `stream` reads the slice; ordering of our own work is
    // explicit (events), so dropping it at once is fine.
    let (ptr, _guard) = slice.device_ptr(stream);
    ptr
}

/// Page-locked, write-combined host memory the host writes and the copy engine reads
/// (nothing reads it back on the host), grow-only.
#[derive(Default)]
pub struct Pinned {
    slice: Option<PinnedHostSlice<u8>>,
}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pinned")
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl Pinned {
    /// At least `bytes`, writable. The caller has made sure no copy out of it is still
    /// in flight.
    pub fn ensure(&mut self, device: &CudaDevice, bytes: u64) -> Result<&mut [u8]> {
        let need = bytes.max(4096).next_multiple_of(4096) as usize;
        if self.slice.as_ref().is_none_or(|s| s.len() < need) {
            self.slice = None;
            let size = (need + need / 2).next_multiple_of(4096);
            // SAFETY: page-locked host bytes; they are written before any copy reads
            // them.
            let s = unsafe {
                device.context().alloc_pinned_with_flags::<u8>(
                    size,
                    cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED,
                )
            }
            .map_err(|source| CudaError::Alloc {
                what: "pinned host memory",
                bytes: size,
                source,
            })?;
            self.slice = Some(s);
        }
        match self.slice.as_mut() {
            Some(s) => s.as_mut_slice().map_err(device_err),
            None => Err(CudaError::Missing("pinned buffer").into()),
        }
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> u64 {
        self.slice.as_ref().map_or(0, |s| s.len() as u64)
    }

    /// Enqueues the copy of the first `bytes` into `dst` on `stream`. More bytes than
    /// either holds is [`CudaError::Upload`].
    pub fn upload(&self, stream: &CudaStream, dst: &CudaSlice<u8>, bytes: usize) -> Result<()> {
        let src = self
            .slice
            .as_ref()
            .ok_or(CudaError::Missing("pinned buffer"))?;
        if bytes > src.len() || bytes > dst.len() {
            return Err(CudaError::Upload {
                bytes,
                pinned: src.len(),
                device: dst.len(),
            }
            .into());
        }
        let host = src.as_slice().map_err(device_err)?;
        let (ptr, _guard) = dst.device_ptr(stream);
        // SAFETY: `host[..bytes]` is page-locked memory that stays allocated and is not
        // written until the copy's completion event has been waited on (the batcher's
        // slot discipline); `ptr` addresses at least `bytes` of live device memory.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(ptr, &host[..bytes], stream.cu_stream())
        }
        .map_err(device_err)
    }
}

/// Enqueues nvJPEG's batched decode of `images` into `outputs` on `stream`; per-image
/// results as [`nvjpeg::Decoder::decode_batch`] gives them.
pub(crate) fn nvjpeg_decode(
    decoder: &mut nvjpeg::Decoder,
    stream: &CudaStream,
    images: &[&[u8]],
    outputs: &[nvjpeg::DeviceImage],
) -> Result<Vec<std::result::Result<(), Refusal>>> {
    // SAFETY: `stream` belongs to the context bound on this thread (the batcher binds it
    // first); every output addresses `pitch * height` bytes of one device buffer that
    // nothing else touches until the stream has passed this batch (the batcher's
    // ordering); the input slices are owned by the batch's jobs, which outlive the
    // stream's use of them because the batcher synchronises the stream before returning
    // from a batch that used the hardware decoder.
    unsafe { decoder.decode_batch(stream.cu_stream(), images, outputs) }
}

/// Enqueues the copy of `host` to device address `dst` on `stream`. The caller keeps
/// `host` alive until the stream has passed the copy.
pub(crate) fn upload(stream: &CudaStream, dst: CUdeviceptr, host: &[u8]) -> Result<()> {
    // SAFETY: the caller checked `dst` addresses at least `host.len()` bytes of a live
    // device allocation of this context, and keeps `host` alive and unchanged until the
    // stream has passed the copy.
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, host, stream.cu_stream()) }
        .map_err(device_err)
}

//! Device and pinned memory, kernel launches and raw copies: the unsafe of the CUDA
//! backend lives here (with the nvJPEG FFI in [`super::nvjpeg`]), each block with the
//! reason it is sound. Launches and raw copies take device addresses, so they are
//! `unsafe fn`s: their callers state why the addresses are valid.
#![doc(hidden)]

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    LaunchConfig, PinnedHostSlice, PushKernelArg,
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
///
/// # Safety
/// As for [`launch_raw`]: `func` takes one [`KernelArgs`], and every binding in `args`
/// (`ptr[i]`, `words[i]` for the bindings `l` uses) is live device memory of the context
/// that owns `stream`, not freed before `stream` has passed this launch.
pub(crate) unsafe fn launch(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    l: &Launch,
    args: &KernelArgs,
) -> Result<()> {
    // SAFETY: the caller upholds `launch_raw`'s contract (this function's own).
    unsafe { launch_raw(stream, func, l.grid, l.kernel.workgroup(), args) }
}

/// Enqueues `func` over `grid` blocks of `block` threads on `stream` with `args`.
///
/// # Safety
/// - `func` is a kernel of the context that owns `stream` and takes exactly one
///   [`KernelArgs`] by value (every kernel in `kernels/*.cu` does).
/// - For every binding the kernel reads or writes, `args.ptr[i]` is the address of at least
///   `4 * args.words[i]` bytes of one live device allocation of that context, and that
///   allocation is not freed before `stream` has passed this launch (freeing on `stream`
///   itself, as cudarc does, is ordered after it).
/// - Nothing else writes those bytes while the launch runs, other than work ordered
///   before or after it on `stream` or by events.
pub(crate) unsafe fn launch_raw(
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
    // SAFETY: one `KernelArgs` is pushed, the one argument the kernel takes (the caller's
    // first point); the memory it addresses is live until the launch is done and has no
    // unordered writer, by the caller's other two points.
    unsafe { b.launch(cfg) }.map_err(device_err)?;
    Ok(())
}

/// Enqueues a device-to-device copy of `bytes` from `src` to `dst` on `stream`.
///
/// # Safety
/// - `src..src + bytes` and `dst..dst + bytes` each lie within one live device allocation
///   of the context that owns `stream`, and the two ranges do not overlap.
/// - Neither allocation is freed before `stream` has passed the copy (freeing on `stream`
///   itself is ordered after it).
pub(crate) unsafe fn copy_dtod(
    stream: &CudaStream,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
) -> Result<()> {
    // SAFETY: both ranges are live device memory of this context until the stream has
    // passed the copy, by the caller's contract.
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
            // SAFETY: the bytes are left uninitialised, which is sound for `u8` (every bit
            // pattern is a value): a kernel reads only bytes its batch wrote first (the
            // upload, nvJPEG or an earlier kernel), and a read-back of bytes nothing wrote
            // (padding between windows) copies unspecified values to the host.
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

/// A device buffer kept across batches whose contents survive its growth (the device
/// cache of decoded samples), allocated on one stream: a larger buffer is allocated and
/// what the old one holds is copied into it, both on that stream, and the old one is freed
/// on it after the copy.
/// Its [`DeviceBuffer::get`] and [`DeviceBuffer::bytes`] are the inner buffer's (`Deref`).
#[derive(Debug, Default)]
pub struct KeptBuffer(DeviceBuffer);

impl std::ops::Deref for KeptBuffer {
    type Target = DeviceBuffer;

    fn deref(&self) -> &DeviceBuffer {
        &self.0
    }
}

impl KeptBuffer {
    /// At least `bytes` (at most `cap`, which `bytes` may not exceed), holding what it
    /// held. Every use of it must be on `stream`, the stream of its first call.
    pub fn ensure(
        &mut self,
        stream: &Arc<CudaStream>,
        bytes: u64,
        cap: u64,
    ) -> Result<&CudaSlice<u8>> {
        let held = self.bytes();
        if bytes > held {
            // Doubling keeps the copies few.
            let size = bytes
                .max(held.saturating_mul(2))
                .max(1 << 20)
                .next_multiple_of(256)
                .min(cap)
                .max(bytes);
            let len = usize::try_from(size).map_err(|_| CudaError::Missing("address space"))?;
            // SAFETY: the bytes are left uninitialised, which is sound for `u8`; the old
            // contents are copied in below, and a copy out of the cache reads only places
            // a batch wrote (their entries are recorded once that batch was submitted).
            let grown = unsafe { stream.alloc::<u8>(len) }.map_err(|source| CudaError::Alloc {
                what: "the device cache of decoded samples",
                bytes: len,
                source,
            })?;
            if let Some(old) = &self.0.slice {
                // SAFETY: two distinct live allocations of this context, `old.len()` bytes
                // each at least; `old` is freed on `stream` (it was allocated there) when
                // dropped just below, which is ordered after the copy.
                unsafe {
                    copy_dtod(
                        stream,
                        address(&grown, stream),
                        address(old, stream),
                        old.len(),
                    )?
                };
            }
            self.0.slice = Some(grown);
        }
        self.0
            .slice
            .as_ref()
            .ok_or_else(|| CudaError::Missing("device cache buffer").into())
    }

    /// Frees the buffer (on its stream).
    pub fn clear(&mut self) {
        self.0.slice = None;
    }
}

/// The device address of `slice` (for [`KernelArgs`]).
pub(crate) fn address(slice: &CudaSlice<u8>, stream: &Arc<CudaStream>) -> CUdeviceptr {
    // The guard only records that `stream` reads the slice; ordering of our own work is
    // explicit (events), so dropping it at once is fine.
    let (ptr, _guard) = slice.device_ptr(stream);
    ptr
}

/// Device memory from a plain `cuMemAlloc`, not the stream-ordered pool: it is there from
/// the moment [`PlainBuffer::new`] returns until it is dropped, whatever any stream has
/// queued. For writers that ignore stream order (nvJPEG's hardware decoder writes its
/// output when called): a pool block freed on a stream may be handed to such a writer
/// while kernels queued earlier still read it; this memory is never handed to anyone
/// else while it lives.
pub struct PlainBuffer {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Arc<CudaContext>,
}

impl std::fmt::Debug for PlainBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainBuffer")
            .field("bytes", &self.len)
            .finish()
    }
}

impl PlainBuffer {
    /// `bytes` (at least 256) of device memory of `ctx`, uninitialised.
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<PlainBuffer> {
        let len = bytes.max(256);
        ctx.bind_to_thread().map_err(device_err)?;
        // SAFETY: the context is current on this thread (bound above); the memory is
        // left uninitialised and only ever addressed by device work as bytes.
        let ptr = unsafe { cudarc::driver::result::malloc_sync(len) }.map_err(|source| {
            CudaError::Alloc {
                what: "device memory for the hardware decoder",
                bytes: len,
                source,
            }
        })?;
        Ok(PlainBuffer {
            ptr,
            len,
            ctx: Arc::clone(ctx),
        })
    }

    /// The device address.
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Bytes allocated.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes (never: at least 256 are allocated).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for PlainBuffer {
    fn drop(&mut self) {
        // The owner drops it only once no device work uses it (it host-waits the events
        // of the work that reads or writes it first).
        if let Err(e) = self.ctx.bind_to_thread() {
            log::warn!("cuda: freeing a buffer: {e}");
            return;
        }
        // SAFETY: `ptr` came from `malloc_sync` in this context and is freed once, here;
        // no device work uses it any more (see above).
        if let Err(e) = unsafe { cudarc::driver::result::free_sync(self.ptr) } {
            log::warn!("cuda: freeing a buffer: {e}");
        }
    }
}

/// Page-locked host memory the host writes and the copy engine (or nvJPEG) reads,
/// grow-only: write-combined by default (nothing reads it back on the host), or plain
/// ([`Pinned::readable`]) where the host reads it too (nvJPEG parses its input on the
/// host), or where the device writes it back ([`Pinned::download`]).
#[derive(Default)]
pub struct Pinned {
    slice: Option<PinnedHostSlice<u8>>,
    readable: bool,
    /// Recorded after the last [`Pinned::download`] not yet waited for: the copy may
    /// still be writing the memory.
    pending: Option<CudaEvent>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // The memory is freed with `slice`: not while a download may still write it.
        if let Err(e) = self.wait_download() {
            log::warn!("cuda: waiting for a download before freeing pinned memory: {e}");
        }
    }
}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pinned")
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl Pinned {
    /// An empty buffer whose memory, once allocated, is not write-combined: the host reads
    /// it at normal speed.
    pub fn readable() -> Pinned {
        Pinned {
            slice: None,
            readable: true,
            pending: None,
        }
    }

    /// At least `bytes`, writable. Call it only once no copy out of the buffer is in
    /// flight: writing or growing it earlier breaks [`Pinned::upload`]'s contract.
    pub fn ensure(&mut self, device: &CudaDevice, bytes: u64) -> Result<&mut [u8]> {
        let need = bytes.max(4096).next_multiple_of(4096) as usize;
        if self.slice.as_ref().is_none_or(|s| s.len() < need) {
            self.slice = None;
            let size = (need + need / 2).next_multiple_of(4096);
            // SAFETY: the bytes are left uninitialised, which is sound for `u8` (every bit
            // pattern is a value). The host only ever writes them (through `as_mut_slice`;
            // write-combined memory is never read back here). The copy engine may copy
            // bytes the host did not write (padding between the parts of an upload): that
            // leaves those device bytes unspecified, and no kernel reads them.
            let flags = match self.readable {
                true => 0,
                false => cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED,
            };
            let s = unsafe { device.context().alloc_pinned_with_flags::<u8>(size, flags) }
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

    /// Enqueues on `stream` the copy of the first `bytes` of `src` into this buffer (grown
    /// to hold them first, once any earlier download has finished). Read them with
    /// [`Pinned::downloaded`]. More bytes than `src` holds is [`CudaError::Download`].
    pub fn download(
        &mut self,
        device: &CudaDevice,
        stream: &CudaStream,
        src: &CudaSlice<u8>,
        bytes: usize,
    ) -> Result<()> {
        self.wait_download()?;
        if bytes > src.len() {
            return Err(CudaError::Download {
                bytes,
                device: src.len(),
                pinned: self.bytes() as usize,
            }
            .into());
        }
        let host = self.ensure(device, bytes as u64)?;
        let host = host
            .get_mut(..bytes)
            .ok_or(CudaError::Missing("pinned bytes"))?;
        let (ptr, _guard) = src.device_ptr(stream);
        // SAFETY: `host` is `bytes` of page-locked memory of this context, which stays
        // allocated and is neither read nor written until the event recorded below has
        // completed (`wait_download` before any later use, and on drop); `ptr` addresses
        // `src`, at least `bytes` of live device memory (checked above), and `_guard`
        // orders the read after the work queued on `src` so far. cudarc's own
        // `memcpy_dtoh` would copy the whole pinned buffer, past `src`'s end.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(host, ptr, stream.cu_stream()) }
            .map_err(device_err)?;
        match stream.record_event(None) {
            Ok(e) => {
                self.pending = Some(e);
                Ok(())
            }
            Err(e) => {
                // Without the event nothing could wait for the copy: wait for it now.
                let _ = stream.synchronize();
                Err(device_err(e))
            }
        }
    }

    /// Waits for the last [`Pinned::download`], if it was not waited for yet.
    fn wait_download(&mut self) -> Result<()> {
        match self.pending.take() {
            Some(e) => e.synchronize().map_err(device_err),
            None => Ok(()),
        }
    }

    /// The first `bytes`, once the copy [`Pinned::download`] enqueued has run: a wait for
    /// that copy (and the work queued on its stream before it) alone.
    pub fn downloaded(&mut self, bytes: usize) -> Result<&[u8]> {
        self.wait_download()?;
        let s = self
            .slice
            .as_ref()
            .ok_or(CudaError::Missing("pinned buffer"))?;
        let host = s.as_slice().map_err(device_err)?;
        host.get(..bytes).ok_or_else(|| {
            CudaError::Download {
                bytes,
                device: bytes,
                pinned: host.len(),
            }
            .into()
        })
    }

    /// Enqueues the copy of the first `bytes` into `dst` on `stream`. More bytes than
    /// either holds is [`CudaError::Upload`].
    ///
    /// # Safety
    /// The copy reads the pinned memory after this returns, so until `stream` has passed
    /// it (an event recorded after it has completed):
    /// - this buffer is not written, grown ([`Pinned::ensure`]) or dropped;
    /// - `dst` stays allocated (cudarc frees a slice on the stream it was allocated on: when
    ///   that is `stream`, dropping it is ordered after the copy), and nothing else uses its
    ///   first `bytes` other than work ordered before or after the copy.
    pub unsafe fn upload(
        &self,
        stream: &CudaStream,
        dst: &CudaSlice<u8>,
        bytes: usize,
    ) -> Result<()> {
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
        // SAFETY: `host[..bytes]` is page-locked memory of this context (checked above to
        // hold `bytes`), left allocated and unwritten until the stream has passed the copy
        // by the caller's contract; `ptr` addresses `dst`, at least `bytes` of live device
        // memory (checked above) that the caller keeps alive as long.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(ptr, &host[..bytes], stream.cu_stream())
        }
        .map_err(device_err)
    }
}

/// nvJPEG's batched decode of `images` into planar `outputs` on `stream`; per-image
/// results as [`nvjpeg::Decoder::decode_batch_planes`] gives them.
///
/// # Safety
/// [`nvjpeg::Decoder::decode_batch_planes`]'s contract, with `stream` for its stream: the
/// context that owns `stream` and `decoder` is current on this thread; each plane is
/// `pitch * height` bytes of live device memory of it that nothing else uses while nvJPEG
/// may write it (from this call, since the hardware backend may write when called, until
/// `stream` has passed the work queued here); `images` stay alive and unchanged as long.
pub(crate) unsafe fn nvjpeg_decode_planes(
    decoder: &mut nvjpeg::Decoder,
    stream: &CudaStream,
    images: &[&[u8]],
    outputs: &[nvjpeg::DevicePlanes],
) -> Result<Vec<std::result::Result<(), Refusal>>> {
    // SAFETY: `stream.cu_stream()` is a live stream of the context the caller made
    // current; the planes and inputs are valid as long as nvJPEG uses them by the caller's
    // contract, which is `decode_batch_planes`'s.
    unsafe { decoder.decode_batch_planes(stream.cu_stream(), images, outputs) }
}

/// Enqueues the copy of `host` to device address `dst` on `stream`.
///
/// # Safety
/// - `dst..dst + host.len()` lies within one live device allocation of the context that
///   owns `stream`, not freed before `stream` has passed the copy (freeing on `stream`
///   itself is ordered after it), and nothing else uses those bytes other than work
///   ordered before or after the copy.
/// - `host` stays allocated and unchanged until `stream` has passed the copy: from
///   pageable memory the driver may read it after this returns.
pub(crate) unsafe fn upload(stream: &CudaStream, dst: CUdeviceptr, host: &[u8]) -> Result<()> {
    // SAFETY: `dst` addresses `host.len()` live device bytes and `host` outlives the copy,
    // by the caller's contract.
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, host, stream.cu_stream()) }
        .map_err(device_err)
}

/// Copies `len` bytes from each device address of `from`, in order, back to back into
/// `host` (`from.len() * len` bytes) on `stream`, and waits for `stream` to pass the
/// copies.
///
/// # Safety
/// Each `src..src + len` of `from` lies within one live device allocation of the context
/// that owns `stream`, and nothing writes those bytes other than work ordered before the
/// copies.
pub(crate) unsafe fn download(
    stream: &CudaStream,
    from: &[CUdeviceptr],
    len: usize,
    host: &mut [u8],
) -> Result<()> {
    if len == 0 || host.len() != from.len().saturating_mul(len) {
        return Err(CudaError::Missing("room for the bytes read back").into());
    }
    for (&src, dst) in from.iter().zip(host.chunks_exact_mut(len)) {
        // SAFETY: `src` addresses `len` live device bytes by the caller's contract; `dst`
        // is `len` bytes of `host`, borrowed mutably until the stream has passed the copy
        // (waited for below, also when a later copy fails to enqueue).
        let r = unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream()) };
        if let Err(e) = r {
            let _ = stream.synchronize();
            return Err(device_err(e));
        }
    }
    stream.synchronize().map_err(device_err)
}

/// Fills `words` 32-bit words from device address `dst` with `value` on `stream`.
///
/// # Safety
/// `dst..dst + 4 * words` lies within one live device allocation of the context that owns
/// `stream`, 4-byte aligned, not freed before `stream` has passed the fill, and nothing
/// else uses those bytes other than work ordered before or after it.
pub(crate) unsafe fn fill_words(
    stream: &CudaStream,
    dst: CUdeviceptr,
    value: u32,
    words: usize,
) -> Result<()> {
    // SAFETY: `dst` addresses `4 * words` live, aligned device bytes by the caller's
    // contract; the fill is enqueued on `stream`, a live stream of their context.
    unsafe { cudarc::driver::sys::cuMemsetD32Async(dst, value, words, stream.cu_stream()) }
        .result()
        .map_err(device_err)
}

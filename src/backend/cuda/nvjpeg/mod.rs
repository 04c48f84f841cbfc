//! nvJPEG, loaded at run time: batched JPEG decode into caller-owned device memory.
//!
//! The safe layer over `ffi` (the raw declarations and the function-pointer table), as
//! cudarc keeps `sys` apart from its safe API.
//!
//! # Why our own FFI, not `nvjpeg-sys`
//! nvJPEG is loaded at run time: `libnvjpeg.so.13` is opened with `libloading` when a
//! [`Library`] is loaded, and every function used is resolved up front. Building needs
//! nothing from CUDA; one binary runs with or without CUDA, and a missing library or GPU is
//! an `Err`, never a crash. `nvjpeg-sys` 0.1 cannot do that: it binds the nvJPEG **11.9**
//! headers (CUDA 11.8) and its build script always links `-lnvjpeg` (no `links =` key to
//! override it), so a build needs nvJPEG at link time and the binary does not start
//! without it. `ffi` declares only the 13 functions, 3 opaque handles and one struct used
//! here, copied from the 13.0 header.
//!
//! # Use
//! ```no_run
//! # fn main() -> stoker::Result<()> {
//! use stoker::backend::cuda::nvjpeg::{Decoder, DeviceImage, Library};
//! let lib = Library::load()?; // Err(BackendUnavailable) without libnvjpeg
//! let mut dec = Decoder::new(&lib, 64)?; // Err without a GPU; bind the CUDA context first
//! let bytes: &[u8] = &[]; // a JPEG file
//! let info = dec.image_info(bytes)?; // size the output from this
//! let hw = dec.hardware_supports(bytes); // false: take this image through the hybrid path
//! # let (ptr, stream) = (0, std::ptr::null_mut());
//! let out = DeviceImage::packed(ptr, info.width, info.height);
//! // SAFETY (example): `ptr` holds `out.min_bytes()` bytes of device memory, owned by us
//! // until `stream` has finished, and `bytes` outlives that too.
//! let results = unsafe { dec.decode_batch(stream, &[bytes], &[out]) }?;
//! # let _ = (hw, results);
//! # Ok(())
//! # }
//! ```
//!
//! nvJPEG works in the CUDA context current on the calling thread (the runtime's primary
//! context of the current device when none is): bind the context that owns the stream and
//! the output memory (`CudaContext::bind_to_thread`) before creating a [`Decoder`] and
//! before every call on it.
#![doc(hidden)]

mod ffi;

use std::ffi::{c_int, c_uchar, c_uint, OsStr, OsString};
use std::fmt;
use std::path::Path;
use std::ptr;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{CUdeviceptr, CUstream};

pub use super::error::Status;

use super::error::CudaError;
use crate::decode::DecodeError;
use crate::error::{Error, Result};
use ffi::Api;

/// `"<call> failed: <STATUS> (<n>)"`.
fn failed(call: &str, status: ffi::nvjpegStatus_t) -> String {
    format!("{call} failed: {}", Status(status))
}

/// Creates an nvJPEG handle on `backend` with the default allocators and flags: the
/// status, and the handle (null, or not to be used, where the status is not success).
fn create_handle(api: &Api, backend: c_int) -> (ffi::nvjpegStatus_t, ffi::nvjpegHandle_t) {
    let mut h: ffi::nvjpegHandle_t = ptr::null_mut();
    // SAFETY: null allocators select nvJPEG's defaults (cudaMalloc, cudaHostAlloc), flags
    // 0 is NVJPEG_FLAGS_DEFAULT, and `h` is a valid out-pointer.
    let st = unsafe {
        (api.create_ex)(
            backend,
            ptr::null_mut(),
            ptr::null_mut(),
            ffi::NVJPEG_FLAGS_DEFAULT,
            &mut h,
        )
    };
    (st, h)
}

/// `call` failed with `status`, as [`Error::Device`].
fn device_err(call: &'static str, status: ffi::nvjpegStatus_t) -> Error {
    CudaError::Nvjpeg {
        call,
        status: Status(status),
    }
    .into()
}

fn unavailable(reason: String) -> Error {
    Error::BackendUnavailable {
        backend: "nvjpeg".to_string(),
        reason,
    }
}

/// Logs a status that is deliberately ignored (clean-up paths).
fn log_ignored(call: &str, status: ffi::nvjpegStatus_t) {
    if status != ffi::NVJPEG_STATUS_SUCCESS {
        log::debug!("nvJPEG: {} (ignored)", failed(call, status));
    }
}

/// Where [`Library::load`] looks, in order: the loader's search path (`LD_LIBRARY_PATH`,
/// the ld.so cache), `$CUDA_HOME/lib`, `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`, and
/// last the unversioned development name `libnvjpeg.so`.
fn candidates() -> Vec<OsString> {
    let mut out = vec![OsString::from("libnvjpeg.so.13")];
    if let Some(home) = std::env::var_os("CUDA_HOME").filter(|h| !h.is_empty()) {
        for sub in ["lib", "lib64"] {
            out.push(Path::new(&home).join(sub).join("libnvjpeg.so.13").into());
        }
    }
    out.push(OsString::from("/usr/local/cuda/lib64/libnvjpeg.so.13"));
    out.push(OsString::from("libnvjpeg.so"));
    out
}

/// The first library loaded in this process, shared by later [`Library::load`] calls.
static LOADED: OnceLock<Arc<Api>> = OnceLock::new();

/// libnvjpeg, opened at run time with every function this module needs resolved.
///
/// Cheap to clone; the library stays loaded while any clone or [`Decoder`] lives.
#[derive(Clone)]
pub struct Library {
    api: Arc<Api>,
}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Library")
            .field("path", &self.api.path)
            .finish()
    }
}

impl Library {
    /// Finds and opens libnvjpeg (see the search order below), once per process.
    ///
    /// Tries `libnvjpeg.so.13` through the loader's search path, then
    /// `$CUDA_HOME/lib/libnvjpeg.so.13`, `$CUDA_HOME/lib64/libnvjpeg.so.13`,
    /// `/usr/local/cuda/lib64/libnvjpeg.so.13` and `libnvjpeg.so`. A candidate that opens
    /// but lacks a needed function is skipped. Fails with [`Error::BackendUnavailable`]
    /// naming every attempt. Needs no GPU.
    pub fn load() -> Result<Library> {
        if let Some(api) = LOADED.get() {
            return Ok(Library { api: api.clone() });
        }
        let mut tried = Vec::new();
        for file in candidates() {
            match Api::open(&file) {
                Ok(api) => {
                    log::debug!("nvJPEG: loaded {}", api.path);
                    let api = LOADED.get_or_init(|| Arc::new(api)).clone();
                    return Ok(Library { api });
                }
                Err(e) => tried.push(e.to_string()),
            }
        }
        Err(unavailable(format!(
            "libnvjpeg.so.13 not found (tried: {})",
            tried.join("; ")
        )))
    }

    /// Opens the library at `path` (a file name for the loader's search path, or a path),
    /// bypassing the search and the per-process cache of [`Library::load`].
    pub fn load_from(path: impl AsRef<OsStr>) -> Result<Library> {
        Api::open(path.as_ref())
            .map(|api| Library { api: Arc::new(api) })
            .map_err(|e| unavailable(e.to_string()))
    }

    /// What was opened: a file name resolved by the loader, or a path.
    pub fn path(&self) -> &str {
        &self.api.path
    }

    /// The library's `(major, minor, patch)` version, from `nvjpegGetProperty`. Needs no
    /// GPU.
    pub fn version(&self) -> Result<(i32, i32, i32)> {
        let mut v = [0 as c_int; 3];
        let props = [ffi::MAJOR_VERSION, ffi::MINOR_VERSION, ffi::PATCH_LEVEL];
        for (slot, prop) in v.iter_mut().zip(props) {
            // SAFETY: `prop` is a valid libraryPropertyType and `slot` a valid out-pointer.
            let st = unsafe { (self.api.get_property)(prop, slot) };
            if st != ffi::NVJPEG_STATUS_SUCCESS {
                return Err(device_err("nvjpegGetProperty", st));
            }
        }
        Ok((v[0], v[1], v[2]))
    }
}

/// The version of the libnvjpeg [`Library::load`] finds: `(major, minor, patch)`, e.g.
/// `(13, 0, 4)`. Needs no GPU.
pub fn version() -> Result<(i32, i32, i32)> {
    Library::load()?.version()
}

/// Chroma subsampling of a JPEG, as nvJPEG classifies it (`nvjpegChromaSubsampling_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subsampling {
    /// 4:4:4, no chroma subsampling.
    Css444,
    /// 4:2:2, chroma halved horizontally.
    Css422,
    /// 4:2:0, chroma halved both ways.
    Css420,
    /// 4:4:0, chroma halved vertically.
    Css440,
    /// 4:1:1, chroma quartered horizontally.
    Css411,
    /// 4:1:0, chroma quartered horizontally and halved vertically.
    Css410,
    /// nvJPEG's second 4:1:0 layout (`NVJPEG_CSS_410V`).
    Css410V,
    /// One component: greyscale.
    Gray,
    /// Sampling factors nvJPEG does not name (or 2/4 components).
    Unknown,
}

impl Subsampling {
    fn from_raw(v: c_int) -> Subsampling {
        match v {
            0 => Subsampling::Css444,
            1 => Subsampling::Css422,
            2 => Subsampling::Css420,
            3 => Subsampling::Css440,
            4 => Subsampling::Css411,
            5 => Subsampling::Css410,
            6 => Subsampling::Gray,
            7 => Subsampling::Css410V,
            _ => Subsampling::Unknown,
        }
    }
}

/// A JPEG's header, as `nvjpegGetImageInfo` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    /// Width of component 0 (the full image width), in pixels.
    pub width: u32,
    /// Height of component 0 (the full image height), in pixels.
    pub height: u32,
    /// Number of encoded components (1 to 4).
    pub components: u32,
    /// Chroma subsampling.
    pub subsampling: Subsampling,
    /// Each component's `(width, height)` at its stored resolution (the first
    /// `components`; what planar output writes).
    pub component_sizes: [(u32, u32); 4],
}

impl ImageInfo {
    /// Bytes in one row of the interleaved RGB output: `width * 3`.
    pub fn rgb_row_bytes(&self) -> usize {
        self.width as usize * 3
    }
}

/// Caller-owned device memory that receives one image as interleaved RGB (`RGBRGB...`,
/// 8 bits per channel), `height` rows of `pitch` bytes starting at `ptr`.
///
/// `width` and `height` are the capacity in pixels: an image up to that size is written
/// to the top-left corner and the rest is left untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceImage {
    /// Device address of the first row.
    pub ptr: CUdeviceptr,
    /// Bytes from one row to the next; at least `3 * width` of the image decoded.
    pub pitch: usize,
    /// Capacity in pixels per row.
    pub width: u32,
    /// Capacity in rows.
    pub height: u32,
}

impl DeviceImage {
    /// An output with rows packed back to back: `pitch = 3 * width`.
    pub fn packed(ptr: CUdeviceptr, width: u32, height: u32) -> DeviceImage {
        DeviceImage {
            ptr,
            pitch: width as usize * 3,
            width,
            height,
        }
    }

    /// The bytes the memory at `ptr` must hold: `pitch * height`.
    pub fn min_bytes(&self) -> usize {
        self.pitch.saturating_mul(self.height as usize)
    }
}

/// Caller-owned device memory that receives one image's components as planes at their
/// stored resolution (`NVJPEG_OUTPUT_UNCHANGED`: Y, Cb, Cr of a YCbCr JPEG, or Y alone):
/// plane `c` is `height[c]` rows of `pitch[c]` bytes from `ptr[c]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePlanes {
    /// 1 or 3.
    pub components: u32,
    /// Device address of each plane's first row.
    pub ptr: [CUdeviceptr; 3],
    /// Bytes from one row to the next.
    pub pitch: [usize; 3],
    /// Capacity of each plane in samples per row.
    pub width: [u32; 3],
    /// Capacity of each plane in rows.
    pub height: [u32; 3],
}

/// The output descriptor naming `channels` (device address and pitch of each, in order).
fn descriptor(channels: &[(CUdeviceptr, usize)]) -> Result<ffi::nvjpegImage_t, Refusal> {
    let mut dest = ffi::nvjpegImage_t {
        channel: [ptr::null_mut(); ffi::NVJPEG_MAX_COMPONENT],
        pitch: [0; ffi::NVJPEG_MAX_COMPONENT],
    };
    for (c, &(addr, pitch)) in channels.iter().enumerate().take(ffi::NVJPEG_MAX_COMPONENT) {
        let addr = usize::try_from(addr).map_err(|_| Refusal::PointerRange(addr))?;
        // A device address, only ever dereferenced by nvJPEG on the GPU.
        dest.channel[c] = ptr::with_exposed_provenance_mut::<c_uchar>(addr);
        dest.pitch[c] = pitch;
    }
    Ok(dest)
}

/// Checks image `k` of a batch (its bytes given) and gives its output descriptor.
/// An image's output descriptor and its size (width, height), or why it is refused.
type Destination<'a> =
    dyn Fn(&Decoder, usize, &[u8]) -> Result<(ffi::nvjpegImage_t, (u32, u32)), Refusal> + 'a;

/// Why [`Decoder::decode_batch`] left an image out of the batch (checked on the host,
/// before nvJPEG is asked to decode).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The output's device address is 0.
    #[error("output pointer is null")]
    NullOutput,
    /// The output's device address does not fit in a host pointer.
    #[error("output pointer {0:#x} does not fit in a host pointer")]
    PointerRange(CUdeviceptr),
    /// `nvjpegGetImageInfo` could not read the header: [`Error::Decode`] for malformed
    /// data, [`Error::Device`] when nvJPEG failed otherwise.
    #[error(transparent)]
    Header(#[from] Box<Error>),
    /// Four components (CMYK or YCCK), which this decoder does not convert.
    #[error("4-component JPEG (CMYK/YCCK) is not decoded by nvJPEG here")]
    Cmyk,
    /// Neither 1 nor 3 (nor 4) components.
    #[error("{0}-component JPEG is not supported by nvJPEG")]
    Components(u32),
    /// Chroma subsampling nvJPEG does not name.
    #[error("chroma subsampling that nvJPEG does not recognise")]
    Subsampling,
    /// The image is larger than its output.
    #[error("image is {width}x{height} but the output holds {out_width}x{out_height}")]
    TooLarge {
        /// Image width in pixels.
        width: u32,
        /// Image height in pixels.
        height: u32,
        /// The output's capacity in pixels per row.
        out_width: u32,
        /// The output's capacity in rows.
        out_height: u32,
    },
    /// The image's components differ from its planar output's.
    #[error("the image's components ({image}) do not match its planes ({planes})")]
    Planes {
        /// What the image has: `WxH` per component.
        image: String,
        /// What the output holds.
        planes: String,
    },
    /// The output's rows are too short for one row of interleaved RGB.
    #[error("output pitch {pitch} is less than {row} bytes per RGB row")]
    Pitch {
        /// The output's pitch in bytes.
        pitch: usize,
        /// Bytes in one RGB row of the image.
        row: usize,
    },
}

/// A batched nvJPEG decoder: a library handle, a decode state and a parsed-stream object,
/// on the hardware JPEG engines when the GPU has them.
///
/// `Send` but not `Sync`: the decode state and the parsed-stream object may move between
/// threads but must not be used by two at once. nvJPEG binds them to the CUDA device current
/// when the decoder is created; use and drop it with that device's context current, and
/// after the streams it decoded on have finished (dropping frees its device buffers).
pub struct Decoder {
    api: Arc<Api>,
    handle: ffi::nvjpegHandle_t,
    state: ffi::nvjpegJpegState_t,
    jpeg_stream: ffi::nvjpegJpegStream_t,
    hardware: bool,
    engines: (u32, u32),
    /// The batch size the state is initialised for; `None` after a failed batch.
    initialized: Option<usize>,
    /// The hardware backend's buffers asked for so far (`nvjpegDecodeBatchedPreAllocate`):
    /// images, width, height, and the output format.
    preallocated: (usize, u32, u32, c_int),
    /// `NVJPEG_OUTPUT_RGBI` ([`Decoder::decode_batch`]) or `NVJPEG_OUTPUT_UNCHANGED`
    /// ([`Decoder::decode_batch_planes`]): the state is initialised for one.
    format: c_int,
    // Host arrays handed to nvjpegDecodeBatched, kept to reuse their allocations. They are
    // cleared after each call, so they never hold pointers past it.
    data: Vec<*const c_uchar>,
    lengths: Vec<usize>,
    destinations: Vec<ffi::nvjpegImage_t>,
}

// SAFETY: nvJPEG's library handle is thread safe; the decode state and the JPEG stream have
// no thread affinity and need only exclusive use, which `&mut self` (and `Decoder: !Sync`,
// from its raw pointers) provide. The pointer vectors are empty between calls.
unsafe impl Send for Decoder {}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("library", &self.api.path)
            .field("hardware", &self.hardware)
            .field("engines", &self.engines)
            .field("batch_size", &self.initialized)
            .finish()
    }
}

/// `batch_size` as the `int` nvJPEG takes, refusing 0.
fn batch_int(batch_size: usize) -> Result<c_int> {
    match c_int::try_from(batch_size) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::config(
            "batch_size",
            format!(
                "nvJPEG batch size must be 1..={}, got {batch_size}",
                c_int::MAX
            ),
        )),
    }
}

impl Decoder {
    /// A decoder for batches of `batch_size` images, on the hardware JPEG engines when
    /// `nvjpegGetHardwareDecoderInfo` reports some, else on nvJPEG's default backend.
    ///
    /// Call it with the CUDA context of the target device current on this thread. Without
    /// a CUDA driver or GPU, nvJPEG cannot create a handle and this returns
    /// [`Error::BackendUnavailable`] with the nvJPEG status (typically
    /// `NVJPEG_STATUS_EXECUTION_FAILED`).
    pub fn new(library: &Library, batch_size: usize) -> Result<Decoder> {
        Decoder::with_hardware(library, batch_size, true)
    }

    /// As [`Decoder::new`]; with `allow_hardware == false`, always nvJPEG's default
    /// (hybrid CPU/GPU) backend.
    pub fn with_hardware(
        library: &Library,
        batch_size: usize,
        allow_hardware: bool,
    ) -> Result<Decoder> {
        let api = library.api.clone();
        let batch = batch_int(batch_size)?;
        let mut handle: ffi::nvjpegHandle_t = ptr::null_mut();
        let mut hardware = false;
        let mut engines = (0, 0);
        let mut hardware_note = String::new();
        if allow_hardware {
            let (st, h) = create_handle(&api, ffi::NVJPEG_BACKEND_HARDWARE);
            if st == ffi::NVJPEG_STATUS_SUCCESS && !h.is_null() {
                let (mut n, mut cores): (c_uint, c_uint) = (0, 0);
                // SAFETY: `h` is the live handle created above; both are valid out-pointers.
                let st = unsafe { (api.get_hardware_decoder_info)(h, &mut n, &mut cores) };
                if st == ffi::NVJPEG_STATUS_SUCCESS && n > 0 {
                    handle = h;
                    hardware = true;
                    engines = (n, cores);
                } else {
                    hardware_note = if st == ffi::NVJPEG_STATUS_SUCCESS {
                        engines = (n, cores);
                        "no hardware JPEG engines".to_string()
                    } else {
                        failed("nvjpegGetHardwareDecoderInfo", st)
                    };
                    // SAFETY: `h` was created above and is not used after this.
                    log_ignored("nvjpegDestroy", unsafe { (api.destroy)(h) });
                }
            } else {
                hardware_note = failed("nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE)", st);
            }
            if !hardware {
                log::debug!("nvJPEG: hardware backend not used: {hardware_note}");
            }
        }
        if handle.is_null() {
            let (st, h) = create_handle(&api, ffi::NVJPEG_BACKEND_DEFAULT);
            if st != ffi::NVJPEG_STATUS_SUCCESS || h.is_null() {
                let mut reason = failed("nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT)", st);
                if st == ffi::NVJPEG_STATUS_EXECUTION_FAILED
                    || st == ffi::NVJPEG_STATUS_ARCH_MISMATCH
                {
                    reason.push_str(" (no usable CUDA driver or GPU?)");
                }
                if !hardware_note.is_empty() {
                    reason.push_str("; hardware backend: ");
                    reason.push_str(&hardware_note);
                }
                return Err(unavailable(reason));
            }
            handle = h;
        }
        // From here on, `Drop` releases whatever has been created.
        let mut dec = Decoder {
            api,
            handle,
            state: ptr::null_mut(),
            jpeg_stream: ptr::null_mut(),
            hardware,
            engines,
            initialized: None,
            preallocated: (0, 0, 0, -1),
            format: ffi::NVJPEG_OUTPUT_RGBI,
            data: Vec::with_capacity(batch_size),
            lengths: Vec::with_capacity(batch_size),
            destinations: Vec::with_capacity(batch_size),
        };
        // SAFETY: `dec.handle` is live; `dec.state` is a valid out-pointer.
        let st = unsafe { (dec.api.jpeg_state_create)(dec.handle, &mut dec.state) };
        if st != ffi::NVJPEG_STATUS_SUCCESS || dec.state.is_null() {
            return Err(device_err("nvjpegJpegStateCreate", st));
        }
        // SAFETY: `dec.handle` is live; `dec.jpeg_stream` is a valid out-pointer.
        let st = unsafe { (dec.api.jpeg_stream_create)(dec.handle, &mut dec.jpeg_stream) };
        if st != ffi::NVJPEG_STATUS_SUCCESS || dec.jpeg_stream.is_null() {
            return Err(device_err("nvjpegJpegStreamCreate", st));
        }
        dec.initialize(batch)?;
        log::debug!(
            "nvJPEG: decoder on the {} backend (engines {:?}), batch {batch_size}",
            if hardware { "hardware" } else { "default" },
            engines
        );
        Ok(dec)
    }

    /// Whether the hardware JPEG engines decode (`NVJPEG_BACKEND_HARDWARE`); `false` means
    /// nvJPEG's default backend.
    pub fn hardware(&self) -> bool {
        self.hardware
    }

    /// `(engines, cores per engine)` from `nvjpegGetHardwareDecoderInfo`; `(0, 0)` when it
    /// was not asked or failed.
    pub fn engines(&self) -> (u32, u32) {
        self.engines
    }

    /// The batch size the decoder is currently initialised for, if any.
    pub fn batch_size(&self) -> Option<usize> {
        self.initialized
    }

    /// Runs `nvjpegDecodeBatchedInitialize` for `batch` images (in `self.format`).
    fn initialize(&mut self, batch: c_int) -> Result<()> {
        self.initialized = None;
        // SAFETY: handle and state are live and owned by `self`; no other call on this
        // state is running on the host (we hold `&mut self`). max_cpu_threads = 1: the
        // parameter is unused by current nvJPEG, and 0 is rejected by some versions.
        let st = unsafe {
            (self.api.decode_batched_initialize)(self.handle, self.state, batch, 1, self.format)
        };
        if st != ffi::NVJPEG_STATUS_SUCCESS {
            return Err(device_err("nvjpegDecodeBatchedInitialize", st));
        }
        self.initialized = usize::try_from(batch).ok();
        Ok(())
    }

    /// On the hardware backend, asks nvJPEG (`nvjpegDecodeBatchedPreAllocate`, as DALI
    /// does with its size hints) for the buffers of `batch` images of up to `largest`
    /// (width, height) in `format`, whenever a batch needs more than was asked for before:
    /// the buffers then grow a few times in a run, not inside the decode calls. A failure
    /// is logged and leaves the decode to allocate as it goes.
    fn preallocate(&mut self, batch: usize, largest: (u32, u32), format: c_int) {
        let (n, w, h, f) = self.preallocated;
        if !self.hardware || (batch <= n && largest.0 <= w && largest.1 <= h && format == f) {
            return;
        }
        let grown = (batch.max(n), largest.0.max(w), largest.1.max(h), format);
        self.preallocated = grown;
        let (Ok(b), Ok(gw), Ok(gh)) = (
            c_int::try_from(grown.0),
            c_int::try_from(grown.1),
            c_int::try_from(grown.2),
        ) else {
            return;
        };
        // SAFETY: handle and state are live and owned by `self`, and no other call on
        // this state is running on the host (we hold `&mut self`): the conditions nvJPEG
        // states for a call on a decode state; it takes no pointers of ours.
        let st = unsafe {
            (self.api.decode_batched_pre_allocate)(
                self.handle,
                self.state,
                b,
                gw,
                gh,
                ffi::NVJPEG_CSS_444,
                format,
            )
        };
        if st != ffi::NVJPEG_STATUS_SUCCESS {
            log::debug!("nvJPEG: {}", failed("nvjpegDecodeBatchedPreAllocate", st));
        }
    }

    /// The header of a JPEG, by `nvjpegGetImageInfo`: size the output from `width` and
    /// `height` (interleaved RGB needs `3 * width` bytes per row).
    ///
    /// Malformed data is [`Error::Decode`]; nvJPEG failing otherwise is [`Error::Device`].
    pub fn image_info(&self, bytes: &[u8]) -> Result<ImageInfo> {
        if bytes.is_empty() {
            return Err(Error::Decode(DecodeError::Empty));
        }
        let mut components: c_int = 0;
        let mut subsampling: c_int = -1;
        let mut widths = [0 as c_int; ffi::NVJPEG_MAX_COMPONENT];
        let mut heights = [0 as c_int; ffi::NVJPEG_MAX_COMPONENT];
        // SAFETY: the handle is live; `bytes` is readable for `bytes.len()` bytes for the
        // call; the outputs are valid, and the arrays have NVJPEG_MAX_COMPONENT elements as
        // the header requires. nvjpegGetImageInfo is documented thread safe.
        let st = unsafe {
            (self.api.get_image_info)(
                self.handle,
                bytes.as_ptr(),
                bytes.len(),
                &mut components,
                &mut subsampling,
                widths.as_mut_ptr(),
                heights.as_mut_ptr(),
            )
        };
        match st {
            ffi::NVJPEG_STATUS_SUCCESS => {}
            ffi::NVJPEG_STATUS_BAD_JPEG | ffi::NVJPEG_STATUS_INCOMPLETE_BITSTREAM => {
                return Err(Error::Decode(DecodeError::Jpeg(failed(
                    "nvjpegGetImageInfo",
                    st,
                ))))
            }
            ffi::NVJPEG_STATUS_JPEG_NOT_SUPPORTED => {
                return Err(Error::Decode(DecodeError::Unsupported(failed(
                    "nvjpegGetImageInfo",
                    st,
                ))))
            }
            _ => return Err(device_err("nvjpegGetImageInfo", st)),
        }
        let (width, height) = match (u32::try_from(widths[0]), u32::try_from(heights[0])) {
            (Ok(w), Ok(h)) if w > 0 && h > 0 => (w, h),
            _ => {
                return Err(Error::Decode(DecodeError::ZeroSize {
                    width: widths[0].max(0) as u32,
                    height: heights[0].max(0) as u32,
                }))
            }
        };
        let components = match u32::try_from(components) {
            Ok(c @ 1..=4) => c,
            _ => {
                return Err(Error::Decode(DecodeError::BadHeader(format!(
                    "nvjpegGetImageInfo reported {components} components"
                ))))
            }
        };
        let mut component_sizes = [(0, 0); 4];
        for (c, size) in component_sizes.iter_mut().enumerate() {
            *size = (widths[c].max(0) as u32, heights[c].max(0) as u32);
        }
        Ok(ImageInfo {
            width,
            height,
            components,
            subsampling: Subsampling::from_raw(subsampling),
            component_sizes,
        })
    }

    /// Whether the hardware engines can decode this JPEG (`nvjpegJpegStreamParseHeader`,
    /// then `nvjpegDecodeBatchedSupported`, as torchvision and DALI ask: the verdict needs
    /// the frame header alone, and the header parse does not read the entropy-coded data,
    /// which the full parse walks to its end). Always `false` on the default backend, and
    /// for data nvJPEG cannot parse.
    ///
    /// With the hardware backend, send only images for which this is `true` to
    /// [`Decoder::decode_batch`] and decode the rest another way: one unsupported image
    /// (progressive, 4:1:1, ...) can fail the whole batch.
    pub fn hardware_supports(&self, bytes: &[u8]) -> bool {
        if !self.hardware || bytes.is_empty() {
            return false;
        }
        // SAFETY: handle and jpeg stream are live and owned by `self`, which is not `Sync`,
        // so no other thread uses the stream object. `bytes` is readable for its length.
        // The stream object may keep a pointer into `bytes`, but it is only read by the
        // query below and replaced by the next parse.
        let st = unsafe {
            (self.api.jpeg_stream_parse_header)(
                self.handle,
                bytes.as_ptr(),
                bytes.len(),
                self.jpeg_stream,
            )
        };
        if st != ffi::NVJPEG_STATUS_SUCCESS {
            log::debug!("nvJPEG: {}", failed("nvjpegJpegStreamParseHeader", st));
            return false;
        }
        let mut is_supported: c_int = -1;
        // SAFETY: handle and the stream parsed above are live; `is_supported` is a valid
        // out-pointer.
        let st = unsafe {
            (self.api.decode_batched_supported)(self.handle, self.jpeg_stream, &mut is_supported)
        };
        if st != ffi::NVJPEG_STATUS_SUCCESS {
            log::debug!("nvJPEG: {}", failed("nvjpegDecodeBatchedSupported", st));
            return false;
        }
        // nvjpeg.h: "sets is_supported value to 0 if decoder is capable to handle jpeg_stream".
        is_supported == 0
    }

    /// The header of `bytes`, or why nvJPEG is not given it (not 1 or 3 components, a
    /// subsampling nvJPEG does not name).
    fn check_header(&self, bytes: &[u8]) -> Result<ImageInfo, Refusal> {
        let info = self.image_info(bytes).map_err(Box::new)?;
        match info.components {
            1 | 3 => {}
            4 => return Err(Refusal::Cmyk),
            n => return Err(Refusal::Components(n)),
        }
        if info.subsampling == Subsampling::Unknown {
            return Err(Refusal::Subsampling);
        }
        Ok(info)
    }

    /// Why `bytes` cannot go to nvJPEG into `out` as planes, checked on the host.
    fn check_planes(&self, bytes: &[u8], out: &DevicePlanes) -> Result<(u32, u32), Refusal> {
        let info = self.check_header(bytes)?;
        let n = info.components as usize;
        let fits = out.components == info.components
            && (0..n).all(|c| {
                let (w, h) = info.component_sizes[c];
                out.ptr[c] != 0
                    && w <= out.width[c]
                    && h <= out.height[c]
                    && out.pitch[c] >= w as usize
            });
        if fits {
            return Ok((info.width, info.height));
        }
        let list = |v: &mut dyn Iterator<Item = (u32, u32)>| {
            v.map(|(w, h)| format!("{w}x{h}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(Refusal::Planes {
            image: list(&mut info.component_sizes[..n].iter().copied()),
            planes: list(
                &mut (0..out.components.min(3) as usize).map(|c| (out.width[c], out.height[c])),
            ),
        })
    }

    /// Why `bytes` cannot go to nvJPEG into `out`, checked on the host before the batch.
    fn check_output(&self, bytes: &[u8], out: &DeviceImage) -> Result<(u32, u32), Refusal> {
        if out.ptr == 0 {
            return Err(Refusal::NullOutput);
        }
        let info = self.check_header(bytes)?;
        if info.width > out.width || info.height > out.height {
            return Err(Refusal::TooLarge {
                width: info.width,
                height: info.height,
                out_width: out.width,
                out_height: out.height,
            });
        }
        if out.pitch < info.rgb_row_bytes() {
            return Err(Refusal::Pitch {
                pitch: out.pitch,
                row: info.rgb_row_bytes(),
            });
        }
        Ok((info.width, info.height))
    }

    /// Decodes `images[i]` into `outputs[i]` as interleaved RGB, in one
    /// `nvjpegDecodeBatched` call on `stream`. Asynchronous: the pixels are there once
    /// `stream` has finished the work queued here.
    ///
    /// Each image's header is read first (`nvjpegGetImageInfo`); an image that is
    /// malformed, not 1 or 3 components, of a subsampling nvJPEG does not name, or larger
    /// than its output gets `Err(`[`Refusal`]`)` in the returned vector and is left out of the
    /// batch; the others get `Ok(())`. The state is re-initialised when the number of
    /// images sent differs from the last call. If nvJPEG fails the batch as a whole, this
    /// returns `Err` (the outputs' contents are then unspecified) and the next call
    /// re-initialises. With the hardware backend, filter with
    /// [`Decoder::hardware_supports`] first.
    ///
    /// `images.len() != outputs.len()` is [`Error::Config`].
    ///
    /// # Safety
    /// - `stream` is null (the legacy default stream) or a live stream of the CUDA context
    ///   current on this thread, the context this decoder was created in.
    /// - Each `outputs[i].ptr` is device memory of that context, at least
    ///   `outputs[i].min_bytes()` long, that stays allocated until `stream` has finished
    ///   this work and that nothing else reads or writes from this call until then. That
    ///   includes work enqueued on `stream` before this call and not yet finished: the
    ///   hardware backend may write the outputs while the call runs, not in stream order.
    /// - Each `images[i]` stays alive and unchanged until `stream` has finished this work:
    ///   nvJPEG does not document whether every backend is done reading its host input when
    ///   the call returns.
    pub unsafe fn decode_batch(
        &mut self,
        stream: CUstream,
        images: &[&[u8]],
        outputs: &[DeviceImage],
    ) -> Result<Vec<Result<(), Refusal>>> {
        let dest = |d: &Decoder, k: usize, bytes: &[u8]| {
            let out = &outputs[k];
            let size = d.check_output(bytes, out)?;
            Ok((descriptor(&[(out.ptr, out.pitch)])?, size))
        };
        // SAFETY: the caller upholds this function's contract, which is `run_batch`'s.
        unsafe {
            self.run_batch(
                stream,
                images,
                outputs.len(),
                ffi::NVJPEG_OUTPUT_RGBI,
                &dest,
            )
        }
    }

    /// As [`Decoder::decode_batch`], with each image's components written as planes at
    /// their stored resolution (`NVJPEG_OUTPUT_UNCHANGED`) into `outputs[i]`; an image
    /// whose components do not match its output's (count, sizes) is refused
    /// ([`Refusal::Planes`]). The state is re-initialised when the format or the number of
    /// images differs from the last call.
    ///
    /// # Safety
    /// As for [`Decoder::decode_batch`], for every plane of every output: `ptr[c]` holds
    /// `pitch[c] * height[c]` bytes of device memory of the decoder's context, allocated
    /// and used by nothing else from this call until `stream` has finished this work.
    pub unsafe fn decode_batch_planes(
        &mut self,
        stream: CUstream,
        images: &[&[u8]],
        outputs: &[DevicePlanes],
    ) -> Result<Vec<Result<(), Refusal>>> {
        let dest = |d: &Decoder, k: usize, bytes: &[u8]| {
            let out = &outputs[k];
            let size = d.check_planes(bytes, out)?;
            let n = out.components.min(3) as usize;
            let channels: Vec<(CUdeviceptr, usize)> =
                (0..n).map(|c| (out.ptr[c], out.pitch[c])).collect();
            Ok((descriptor(&channels)?, size))
        };
        // SAFETY: the caller upholds this function's contract, which is `run_batch`'s.
        unsafe {
            self.run_batch(
                stream,
                images,
                outputs.len(),
                ffi::NVJPEG_OUTPUT_UNCHANGED,
                &dest,
            )
        }
    }

    /// One `nvjpegDecodeBatched` call in `format` for the images `dest` accepts (it
    /// checks each on the host and gives its output descriptor).
    ///
    /// # Safety
    /// [`Decoder::decode_batch`]'s contract, for the outputs `dest` names.
    unsafe fn run_batch(
        &mut self,
        stream: CUstream,
        images: &[&[u8]],
        outputs: usize,
        format: c_int,
        dest: &Destination<'_>,
    ) -> Result<Vec<Result<(), Refusal>>> {
        if images.len() != outputs {
            return Err(Error::internal(format!(
                "nvJPEG decode_batch: {} images but {outputs} outputs",
                images.len(),
            )));
        }
        self.data.clear();
        self.lengths.clear();
        self.destinations.clear();
        let mut results = Vec::with_capacity(images.len());
        let mut accepted = Vec::with_capacity(images.len());
        let mut largest = (0, 0);
        for (k, bytes) in images.iter().enumerate() {
            match dest(self, k, bytes) {
                Ok((d, (w, h))) => {
                    largest = (largest.0.max(w), largest.1.max(h));
                    accepted.push((bytes.as_ptr(), bytes.len(), d));
                    results.push(Ok(()));
                }
                Err(reason) => results.push(Err(reason)),
            }
        }
        for (p, len, d) in accepted {
            self.data.push(p);
            self.lengths.push(len);
            self.destinations.push(d);
        }
        let n = self.data.len();
        if n == 0 {
            return Ok(results);
        }
        self.preallocate(n, largest, format);
        if self.initialized != Some(n) || self.format != format {
            self.format = format;
            if let Err(e) = self.initialize(batch_int(n)?) {
                self.data.clear();
                self.lengths.clear();
                self.destinations.clear();
                return Err(e);
            }
        }
        // SAFETY: handle and state are live and owned by `self` (exclusive through
        // `&mut self`), and the state is initialised for `n` images in `format`. The three
        // arrays hold exactly `n` entries: host pointers to `images` (readable for their
        // lengths, alive for as long as the caller guarantees) and output descriptors whose
        // channels name device memory large enough for the image (checked by `dest` against
        // nvjpegGetImageInfo; validity guaranteed by the caller). `stream` is valid by the
        // caller's contract.
        let st = unsafe {
            (self.api.decode_batched)(
                self.handle,
                self.state,
                self.data.as_ptr(),
                self.lengths.as_ptr(),
                self.destinations.as_mut_ptr(),
                stream,
            )
        };
        self.data.clear();
        self.lengths.clear();
        self.destinations.clear();
        if st != ffi::NVJPEG_STATUS_SUCCESS {
            // nvJPEG: "if the batch decoding fails, call nvjpegDecodeBatchedInitialize again".
            self.initialized = None;
            return Err(device_err("nvjpegDecodeBatched", st));
        }
        Ok(results)
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // Order: decode state, parsed-stream object, then the library handle they came from.
        if !self.state.is_null() {
            // SAFETY: created by nvjpegJpegStateCreate on `self.handle`, destroyed once.
            log_ignored("nvjpegJpegStateDestroy", unsafe {
                (self.api.jpeg_state_destroy)(self.state)
            });
            self.state = ptr::null_mut();
        }
        if !self.jpeg_stream.is_null() {
            // SAFETY: created by nvjpegJpegStreamCreate on `self.handle`, destroyed once.
            log_ignored("nvjpegJpegStreamDestroy", unsafe {
                (self.api.jpeg_stream_destroy)(self.jpeg_stream)
            });
            self.jpeg_stream = ptr::null_mut();
        }
        if !self.handle.is_null() {
            // SAFETY: created by nvjpegCreateEx, its state and stream are gone, destroyed once.
            log_ignored("nvjpegDestroy", unsafe { (self.api.destroy)(self.handle) });
            self.handle = ptr::null_mut();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names() {
        assert_eq!(Status(6).to_string(), "NVJPEG_STATUS_EXECUTION_FAILED (6)");
        assert_eq!(Status(42).to_string(), "NVJPEG_STATUS_UNKNOWN (42)");
        assert_eq!(
            failed("nvjpegCreateEx", 7),
            "nvjpegCreateEx failed: NVJPEG_STATUS_ARCH_MISMATCH (7)"
        );
    }

    #[test]
    fn subsampling_from_raw() {
        assert_eq!(Subsampling::from_raw(0), Subsampling::Css444);
        assert_eq!(Subsampling::from_raw(6), Subsampling::Gray);
        assert_eq!(Subsampling::from_raw(7), Subsampling::Css410V);
        assert_eq!(Subsampling::from_raw(-1), Subsampling::Unknown);
        assert_eq!(Subsampling::from_raw(99), Subsampling::Unknown);
    }

    #[test]
    fn thread_traits() {
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync>() {}
        send::<Decoder>();
        send_sync::<Library>();
    }

    #[test]
    fn batch_sizes() {
        assert!(batch_int(0).is_err());
        assert_eq!(batch_int(1).ok(), Some(1));
        assert!(batch_int(usize::MAX).is_err());
    }

    #[test]
    fn packed_output() {
        let out = DeviceImage::packed(0x1000, 150, 103);
        assert_eq!(out.pitch, 450);
        assert_eq!(out.min_bytes(), 450 * 103);
    }

    #[test]
    fn missing_library_is_an_error() {
        let err = Library::load_from("/nonexistent/libnvjpeg.so.13").err();
        assert!(matches!(err, Some(Error::BackendUnavailable { .. })));
        // The loader's own message (libloading's error source) comes through.
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains("/nonexistent/libnvjpeg.so.13 could not be loaded: dlopen failed: "),
            "{msg}"
        );
    }
}

//! The raw nvJPEG 13 interface: the handles, status and enum values, the one struct layout
//! and the function signatures of `nvjpeg.h` that stoker uses, and the table of function
//! pointers resolved from the library. Nothing here is safe-wrapped; [`super`] is the safe
//! layer (as cudarc splits `sys` from its safe API).
//!
//! # Why our own FFI, not `nvjpeg-sys`
//! nvJPEG is loaded at run time, so that building needs nothing from CUDA and one binary
//! runs with or without it. `nvjpeg-sys` 0.1 binds the nvJPEG **11.9** headers (CUDA 11.8)
//! and its build script always links `-lnvjpeg` (`cargo:rustc-link-lib=dylib=nvjpeg`, with
//! no `links =` key to override it): a build would need nvJPEG at link time, and the binary
//! would get a `NEEDED libnvjpeg.so.*` entry and not even start on a machine without CUDA.
//! The declarations below are copied from the 13.0 header (`nvjpeg.h` of the
//! `nvidia-nvjpeg` 13.0.4.44 wheel), whose `nvjpegImage_t` and enum values are unchanged
//! since 11.x.
#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_uchar, c_uint, c_void, OsStr};
use std::marker::{PhantomData, PhantomPinned};

use cudarc::driver::sys::CUstream;

use crate::backend::cuda::error::CudaError;

/// `struct nvjpegHandle` (opaque).
#[repr(C)]
pub struct nvjpegHandle {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}
/// `struct nvjpegJpegState` (opaque).
#[repr(C)]
pub struct nvjpegJpegState {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}
/// `struct nvjpegJpegStream` (opaque).
#[repr(C)]
pub struct nvjpegJpegStream {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type nvjpegHandle_t = *mut nvjpegHandle;
pub type nvjpegJpegState_t = *mut nvjpegJpegState;
pub type nvjpegJpegStream_t = *mut nvjpegJpegStream;
/// `nvjpegStatus_t`, a C enum (an `int` on every supported ABI).
pub type nvjpegStatus_t = c_int;

pub const NVJPEG_STATUS_SUCCESS: nvjpegStatus_t = 0;
pub const NVJPEG_STATUS_BAD_JPEG: nvjpegStatus_t = 3;
pub const NVJPEG_STATUS_JPEG_NOT_SUPPORTED: nvjpegStatus_t = 4;
pub const NVJPEG_STATUS_EXECUTION_FAILED: nvjpegStatus_t = 6;
pub const NVJPEG_STATUS_ARCH_MISMATCH: nvjpegStatus_t = 7;
pub const NVJPEG_STATUS_INCOMPLETE_BITSTREAM: nvjpegStatus_t = 10;
/// `nvjpegBackend_t` values.
pub const NVJPEG_BACKEND_DEFAULT: c_int = 0;
pub const NVJPEG_BACKEND_HARDWARE: c_int = 3;
/// `nvjpegOutputFormat_t::NVJPEG_OUTPUT_UNCHANGED`: each component as a plane at its
/// stored resolution, `channel[c]`.
pub const NVJPEG_OUTPUT_UNCHANGED: c_int = 0;
/// `NVJPEG_CSS_444`: the chroma subsampling whose buffers are the largest.
pub const NVJPEG_CSS_444: c_int = 0;
/// `nvjpegOutputFormat_t::NVJPEG_OUTPUT_RGBI`: interleaved RGB in `channel[0]`.
pub const NVJPEG_OUTPUT_RGBI: c_int = 5;
pub const NVJPEG_FLAGS_DEFAULT: c_uint = 0;
pub const NVJPEG_MAX_COMPONENT: usize = 4;
/// `libraryPropertyType` (`library_types.h`).
pub const MAJOR_VERSION: c_int = 0;
pub const MINOR_VERSION: c_int = 1;
pub const PATCH_LEVEL: c_int = 2;

/// `nvjpegImage_t`: output planes (device pointers) and their pitches in bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct nvjpegImage_t {
    pub channel: [*mut c_uchar; NVJPEG_MAX_COMPONENT],
    pub pitch: [usize; NVJPEG_MAX_COMPONENT],
}

pub type GetProperty = unsafe extern "C" fn(c_int, *mut c_int) -> nvjpegStatus_t;
/// `nvjpegCreateEx(backend, dev_allocator, pinned_allocator, flags, handle)`; the
/// allocators are only ever passed as null (nvJPEG's defaults).
pub type CreateEx = unsafe extern "C" fn(
    c_int,
    *mut c_void,
    *mut c_void,
    c_uint,
    *mut nvjpegHandle_t,
) -> nvjpegStatus_t;
pub type Destroy = unsafe extern "C" fn(nvjpegHandle_t) -> nvjpegStatus_t;
pub type GetHardwareDecoderInfo =
    unsafe extern "C" fn(nvjpegHandle_t, *mut c_uint, *mut c_uint) -> nvjpegStatus_t;
pub type JpegStateCreate =
    unsafe extern "C" fn(nvjpegHandle_t, *mut nvjpegJpegState_t) -> nvjpegStatus_t;
pub type JpegStateDestroy = unsafe extern "C" fn(nvjpegJpegState_t) -> nvjpegStatus_t;
/// `nvjpegGetImageInfo(handle, data, length, nComponents, subsampling, widths, heights)`;
/// `subsampling` is an `nvjpegChromaSubsampling_t` (an `int`), widths/heights arrays of
/// `NVJPEG_MAX_COMPONENT`.
pub type GetImageInfo = unsafe extern "C" fn(
    nvjpegHandle_t,
    *const c_uchar,
    usize,
    *mut c_int,
    *mut c_int,
    *mut c_int,
    *mut c_int,
) -> nvjpegStatus_t;
/// `nvjpegDecodeBatchedInitialize(handle, state, batch_size, max_cpu_threads, format)`.
pub type DecodeBatchedInitialize =
    unsafe extern "C" fn(nvjpegHandle_t, nvjpegJpegState_t, c_int, c_int, c_int) -> nvjpegStatus_t;
/// `nvjpegDecodeBatchedPreAllocate(handle, state, batch_size, width, height,
/// chroma_subsampling, output_format)`.
pub type DecodeBatchedPreAllocate = unsafe extern "C" fn(
    nvjpegHandle_t,
    nvjpegJpegState_t,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
) -> nvjpegStatus_t;
/// `nvjpegDecodeBatched(handle, state, data, lengths, destinations, stream)`.
pub type DecodeBatched = unsafe extern "C" fn(
    nvjpegHandle_t,
    nvjpegJpegState_t,
    *const *const c_uchar,
    *const usize,
    *mut nvjpegImage_t,
    CUstream,
) -> nvjpegStatus_t;
pub type JpegStreamCreate =
    unsafe extern "C" fn(nvjpegHandle_t, *mut nvjpegJpegStream_t) -> nvjpegStatus_t;
pub type JpegStreamDestroy = unsafe extern "C" fn(nvjpegJpegStream_t) -> nvjpegStatus_t;
/// `nvjpegJpegStreamParseHeader(handle, data, length, jpeg_stream)`: the markers up to
/// the first scan's header, not the entropy-coded data.
pub type JpegStreamParseHeader = unsafe extern "C" fn(
    nvjpegHandle_t,
    *const c_uchar,
    usize,
    nvjpegJpegStream_t,
) -> nvjpegStatus_t;
/// `nvjpegDecodeBatchedSupported(handle, jpeg_stream, is_supported)`: 0 means supported.
pub type DecodeBatchedSupported =
    unsafe extern "C" fn(nvjpegHandle_t, nvjpegJpegStream_t, *mut c_int) -> nvjpegStatus_t;

/// The resolved functions, and the library that keeps them valid.
///
/// Calling a pointer is `unsafe`: each one is an `extern "C"` function of nvJPEG with the
/// requirements `nvjpeg.h` states for it; the safe layer upholds them.
pub struct Api {
    pub get_property: GetProperty,
    pub create_ex: CreateEx,
    pub destroy: Destroy,
    pub get_hardware_decoder_info: GetHardwareDecoderInfo,
    pub jpeg_state_create: JpegStateCreate,
    pub jpeg_state_destroy: JpegStateDestroy,
    pub get_image_info: GetImageInfo,
    pub decode_batched_initialize: DecodeBatchedInitialize,
    pub decode_batched: DecodeBatched,
    pub decode_batched_pre_allocate: DecodeBatchedPreAllocate,
    pub jpeg_stream_create: JpegStreamCreate,
    pub jpeg_stream_destroy: JpegStreamDestroy,
    pub jpeg_stream_parse_header: JpegStreamParseHeader,
    pub decode_batched_supported: DecodeBatchedSupported,
    /// What was opened (a file name or path).
    pub path: String,
    /// Never unloaded before the function pointers above: they live in the same `Api`,
    /// shared through an `Arc` by every `Library` and `Decoder` of the safe layer.
    _lib: libloading::Library,
}

/// Resolves `name` in `lib` as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the C signature of `name` (an `unsafe extern "C" fn`), and the result must
/// not be called after `lib` is unloaded.
unsafe fn symbol<T: Copy>(
    lib: &libloading::Library,
    name: &'static str,
    path: &str,
) -> Result<T, CudaError> {
    // SAFETY: the caller guarantees `T` is the symbol's type; the pointer is copied out of
    // the `Symbol` and kept next to `lib` (see `Api::_lib`).
    unsafe { lib.get::<T>(name) }
        .map(|s| *s)
        .map_err(|source| CudaError::Symbol {
            path: path.to_string(),
            name,
            source,
        })
}

impl Api {
    /// Opens `file` (a file name for the loader's search path, or a path) and resolves
    /// every function above. A library that cannot be opened, or lacks one of them, is
    /// [`CudaError::Load`] or [`CudaError::Symbol`].
    pub fn open(file: &OsStr) -> Result<Api, CudaError> {
        let path = file.to_string_lossy().into_owned();
        // SAFETY: loading runs libnvjpeg's initialisers. It is NVIDIA's library, whose
        // constructors do not touch process state we rely on; the same as any dlopen.
        let lib = unsafe { libloading::Library::new(file) }.map_err(|source| CudaError::Load {
            path: path.clone(),
            source,
        })?;
        // SAFETY: for every `symbol` call below, the field's type is copied from the
        // declaration of the same name in nvjpeg.h 13.0, and the pointers are stored with
        // `lib` in one `Api`, so they are never called after it is unloaded.
        unsafe {
            Ok(Api {
                get_property: symbol(&lib, "nvjpegGetProperty", &path)?,
                create_ex: symbol(&lib, "nvjpegCreateEx", &path)?,
                destroy: symbol(&lib, "nvjpegDestroy", &path)?,
                get_hardware_decoder_info: symbol(&lib, "nvjpegGetHardwareDecoderInfo", &path)?,
                jpeg_state_create: symbol(&lib, "nvjpegJpegStateCreate", &path)?,
                jpeg_state_destroy: symbol(&lib, "nvjpegJpegStateDestroy", &path)?,
                get_image_info: symbol(&lib, "nvjpegGetImageInfo", &path)?,
                decode_batched_initialize: symbol(&lib, "nvjpegDecodeBatchedInitialize", &path)?,
                decode_batched: symbol(&lib, "nvjpegDecodeBatched", &path)?,
                decode_batched_pre_allocate: symbol(&lib, "nvjpegDecodeBatchedPreAllocate", &path)?,
                jpeg_stream_create: symbol(&lib, "nvjpegJpegStreamCreate", &path)?,
                jpeg_stream_destroy: symbol(&lib, "nvjpegJpegStreamDestroy", &path)?,
                jpeg_stream_parse_header: symbol(&lib, "nvjpegJpegStreamParseHeader", &path)?,
                decode_batched_supported: symbol(&lib, "nvjpegDecodeBatchedSupported", &path)?,
                path,
                _lib: lib,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        // nvjpegImage_t: 4 pointers then 4 size_t.
        assert_eq!(
            std::mem::size_of::<nvjpegImage_t>(),
            8 * std::mem::size_of::<usize>()
        );
    }
}

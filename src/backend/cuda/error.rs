//! What can go wrong in the CUDA backend at run time: the driver (through cudarc), NVRTC,
//! nvJPEG, and loading the libraries. A [`CudaError`] reaches the caller as
//! [`crate::Error::Device`], boxed.

use std::fmt;

use cudarc::driver::DriverError;
use cudarc::nvrtc::result::NvrtcError;

use crate::error::Error;

/// A CUDA failure, with the operation and the values involved.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// A driver call failed.
    #[error("CUDA: {0}")]
    Driver(#[from] DriverError),
    /// Device or pinned host memory could not be allocated.
    #[error("cannot allocate {bytes} bytes of {what}: {source}")]
    Alloc {
        /// `"device memory"` or `"pinned host memory"`.
        what: &'static str,
        /// The size asked for.
        bytes: usize,
        /// What the driver said.
        source: DriverError,
    },
    /// A compiled kernel module could not be loaded onto the device.
    #[error("cannot load {file}: {source}")]
    Module {
        /// The kernel source file (`augment.cu`, ...).
        file: &'static str,
        /// What the driver said.
        source: DriverError,
    },
    /// A loaded module lacks a kernel.
    #[error("{file} has no {kernel}: {source}")]
    Function {
        /// The kernel source file.
        file: &'static str,
        /// The kernel's entry point.
        kernel: &'static str,
        /// What the driver said.
        source: DriverError,
    },
    /// NVRTC rejected a kernel source; `log` is NVRTC's compile log.
    #[error("NVRTC could not compile {file} for {arch} ({status:?}):\n{log}")]
    Nvrtc {
        /// The kernel source file.
        file: String,
        /// The virtual architecture (`compute_90`, ...).
        arch: String,
        /// NVRTC's status.
        status: NvrtcError,
        /// NVRTC's compile log: the errors, with file and line.
        log: String,
    },
    /// Another NVRTC call failed (creating a program, fetching its PTX or CUBIN, asking
    /// the version).
    #[error("NVRTC: {call} failed ({what}): {status:?}")]
    NvrtcCall {
        /// The NVRTC function.
        call: &'static str,
        /// What it was called for: `idct.cu for sm_90`, or the library's path.
        what: String,
        /// NVRTC's status.
        status: NvrtcError,
    },
    /// An nvJPEG call returned a status other than success.
    #[error("nvJPEG: {call} failed: {status}")]
    Nvjpeg {
        /// The function (and, for `nvjpegCreateEx`, the backend asked for).
        call: &'static str,
        /// What it returned.
        status: Status,
    },
    /// A shared library (nvJPEG, NVRTC) could not be loaded.
    #[error("{path} could not be loaded: {}", chain(.source))]
    Load {
        /// The file name or path tried.
        path: String,
        /// The loader's error.
        source: libloading::Error,
    },
    /// A shared library lacks a function this crate needs.
    #[error("{path}: missing symbol {name}: {}", chain(.source))]
    Symbol {
        /// The library's file name or path.
        path: String,
        /// The function.
        name: &'static str,
        /// The loader's error.
        source: libloading::Error,
    },
    /// A library is on none of the paths searched.
    #[error("{library} was not found: {hint}")]
    NotFound {
        /// The library's file name.
        library: &'static str,
        /// Where it was looked for and how to install it.
        hint: &'static str,
    },
    /// A buffer this backend allocated before is gone (an internal error).
    #[error("{0} missing")]
    Missing(&'static str),
    /// A host-to-device copy larger than its source or its destination.
    #[error("upload of {bytes} bytes from {pinned} pinned into {device} device bytes")]
    Upload {
        /// The bytes to copy.
        bytes: usize,
        /// The pinned source's size.
        pinned: usize,
        /// The device destination's size.
        device: usize,
    },
    /// A device-to-host copy larger than its source or its destination.
    #[error("download of {bytes} bytes from {device} device into {pinned} pinned bytes")]
    Download {
        /// The bytes to copy.
        bytes: usize,
        /// The device source's size.
        device: usize,
        /// The pinned destination's size.
        pinned: usize,
    },
    /// nvJPEG wrote past the end of an image's plane, into the guard bytes that follow
    /// it (and maybe into the next plane or image): the batch is not delivered.
    #[error(
        "nvJPEG wrote past plane {plane} of sample {sample}: {changed} of the {guard} guard \
         bytes after its region changed"
    )]
    GuardOverwritten {
        /// The sample's index in the batch.
        sample: usize,
        /// The component plane (0: Y).
        plane: usize,
        /// Guard bytes found changed.
        changed: usize,
        /// Guard bytes after the plane.
        guard: u64,
    },
}

impl From<CudaError> for Error {
    fn from(e: CudaError) -> Self {
        Error::Device(Box::new(e))
    }
}

/// An `nvjpegStatus_t` that is not `NVJPEG_STATUS_SUCCESS`; shown as its name and number:
/// `NVJPEG_STATUS_BAD_JPEG (3)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub(crate) std::ffi::c_int);

impl Status {
    /// The status as nvJPEG returned it.
    pub fn code(self) -> i32 {
        self.0
    }

    /// The status's name in `nvjpeg.h` (`NVJPEG_STATUS_UNKNOWN` for a number it does not
    /// define).
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "NVJPEG_STATUS_SUCCESS",
            1 => "NVJPEG_STATUS_NOT_INITIALIZED",
            2 => "NVJPEG_STATUS_INVALID_PARAMETER",
            3 => "NVJPEG_STATUS_BAD_JPEG",
            4 => "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
            5 => "NVJPEG_STATUS_ALLOCATOR_FAILURE",
            6 => "NVJPEG_STATUS_EXECUTION_FAILED",
            7 => "NVJPEG_STATUS_ARCH_MISMATCH",
            8 => "NVJPEG_STATUS_INTERNAL_ERROR",
            9 => "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
            10 => "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
            _ => "NVJPEG_STATUS_UNKNOWN",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// An error with its sources: libloading's `Display` alone says only "dlopen failed".
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nvrtc_log_reaches_the_message() {
        let e: Error = CudaError::Nvrtc {
            file: "augment.cu".into(),
            arch: "compute_90".into(),
            status: NvrtcError(cudarc::nvrtc::sys::nvrtcResult::NVRTC_ERROR_COMPILATION),
            log: "augment.cu(3): error: identifier \"undefined_thing\" is undefined".into(),
        }
        .into();
        let msg = e.to_string();
        assert!(msg.starts_with("device error: NVRTC could not compile augment.cu for compute_90"));
        assert!(msg.contains("undefined_thing"), "{msg}");
    }
}

//! The CUDA backend: NVRTC-compiled kernels (`kernels/*.cu`) and nvJPEG, every CUDA
//! library loaded at run time.

/// The cudarc release this backend is built on: pass contexts and streams made with it.
pub use cudarc;

pub mod kernels;
pub mod nvjpeg;

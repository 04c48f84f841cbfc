//! The CUDA backend: NVRTC-compiled kernels (`kernels/*.cu`) and nvJPEG, every CUDA
//! library loaded at run time.

pub mod nvjpeg;

//! The CUDA backend's names in a build without the `cuda` feature, so code written for
//! both builds needs no `cfg`: opening a device is
//! [`Error::BackendUnavailable`](crate::Error::BackendUnavailable), and no value of these
//! types can exist.

use std::convert::Infallible;

use crate::error::Result;

/// Whether the CUDA driver library can be loaded: never, in this build.
pub fn driver_present() -> bool {
    false
}

/// A CUDA context and stream; none can be opened in this build.
#[derive(Debug, Clone)]
pub struct CudaDevice(Infallible);

impl CudaDevice {
    /// Always [`Error::BackendUnavailable`](crate::Error::BackendUnavailable): this build
    /// has no CUDA backend.
    pub fn new(ordinal: usize) -> Result<Self> {
        let _ = ordinal;
        Err(super::dummy::not_compiled("cuda", "CUDA"))
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        match self.0 {}
    }

    /// Compute capability `(major, minor)`.
    pub fn capability(&self) -> (i32, i32) {
        match self.0 {}
    }

    /// Blocks until the consumer stream has finished its work.
    pub fn wait(&self) -> Result<()> {
        match self.0 {}
    }

    /// Free and total device memory, in bytes.
    pub fn memory(&self) -> Result<(usize, usize)> {
        match self.0 {}
    }
}

super::dummy::compiled_out_backend!(
    /// The CUDA backend; none can be made in this build.
    #[derive(Debug)]
    CudaBackend(CudaDevice),
    device,
    super::BackendKind::Cuda
);

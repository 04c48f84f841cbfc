//! The CUDA backend's names in a build without the `cuda` feature, so code written for
//! both builds needs no `cfg`: opening a device is
//! [`Error::BackendUnavailable`](crate::Error::BackendUnavailable), and no value of these
//! types can exist.

use crate::error::Result;

/// Whether the CUDA driver library can be loaded: never, in this build.
pub fn driver_present() -> bool {
    false
}

super::dummy::compiled_out_device!(
    /// A CUDA context and stream; none can be opened in this build.
    CudaDevice,
    ordinal: usize,
    "cuda",
    "CUDA"
);

impl CudaDevice {
    /// Compute capability `(major, minor)`.
    pub fn capability(&self) -> (i32, i32) {
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

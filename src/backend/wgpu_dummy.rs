//! The wgpu backend's names in a build without the `wgpu` feature, so code written for
//! both builds needs no `cfg`: opening a device is [`Error::BackendUnavailable`], and no
//! value of these types can exist.

use std::convert::Infallible;

use super::device::{BatcherConfig, DeviceBatcher};
use super::{Backend, BackendKind};
use crate::error::{Error, Result};

/// Environment variable: when `1`, a software adapter is accepted (no effect in this
/// build).
pub const ALLOW_SOFTWARE_ENV: &str = "STOKER_WGPU_ALLOW_SOFTWARE";

/// Whether [`ALLOW_SOFTWARE_ENV`] is set to `1`.
pub fn software_allowed_by_env() -> bool {
    std::env::var(ALLOW_SOFTWARE_ENV).is_ok_and(|v| v.trim() == "1")
}

/// Every adapter wgpu finds on this machine: none, in this build.
pub fn adapters() -> Vec<String> {
    Vec::new()
}

/// A wgpu device and queue; none can be opened in this build.
#[derive(Debug, Clone)]
pub struct WgpuContext(Infallible);

impl WgpuContext {
    /// Always [`Error::BackendUnavailable`]: this build has no wgpu backend.
    pub fn new(allow_software: bool) -> Result<Self> {
        let _ = allow_software;
        Err(Error::BackendUnavailable {
            backend: "wgpu".into(),
            reason: "this build of stoker has no wgpu backend (the `wgpu` feature is off)".into(),
        })
    }

    /// The adapter, in words.
    pub fn name(&self) -> &str {
        match self.0 {}
    }

    /// Whether the adapter is a software rasteriser.
    pub fn is_software(&self) -> bool {
        match self.0 {}
    }

    /// Blocks until the queue is idle.
    pub fn wait(&self) -> Result<()> {
        match self.0 {}
    }
}

/// The wgpu backend; none can be made in this build.
#[derive(Debug, Clone)]
pub struct WgpuBackend(WgpuContext);

impl WgpuBackend {
    /// A backend on `ctx` (which cannot exist in this build).
    pub fn new(ctx: WgpuContext) -> Self {
        WgpuBackend(ctx)
    }
}

impl Backend for WgpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Wgpu
    }

    fn device(&self) -> String {
        match (self.0).0 {}
    }

    fn batcher(&self, _: &BatcherConfig) -> Result<Option<Box<dyn DeviceBatcher>>> {
        match (self.0).0 {}
    }
}

//! The wgpu backend's names in a build without the `wgpu` feature, so code written for
//! both builds needs no `cfg`: opening a device is
//! [`Error::BackendUnavailable`](crate::Error::BackendUnavailable), and no value of these
//! types can exist.

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

super::dummy::compiled_out_device!(
    /// A wgpu device and queue; none can be opened in this build.
    WgpuContext,
    allow_software: bool,
    "wgpu",
    "wgpu"
);

impl WgpuContext {
    /// Whether the adapter is a software rasteriser.
    pub fn is_software(&self) -> bool {
        match self.0 {}
    }
}

super::dummy::compiled_out_backend!(
    /// The wgpu backend; none can be made in this build.
    #[derive(Debug, Clone)]
    WgpuBackend(WgpuContext),
    ctx,
    super::BackendKind::Wgpu
);

//! Backends: who decodes and executes plans. One small trait, thin implementations.
//!
//! The CPU backend is always compiled and always works; it is also the reference the GPU
//! backends are tested against. [`select`] resolves [`BackendKind::Auto`] to the best
//! backend this build and machine offer and says why, so a missing GPU is a logged
//! fallback, never an abort.

pub mod cpu;
#[cfg(feature = "wgpu")]
pub mod wgpu;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::augment::reference::Scratch;
use crate::augment::SamplePlan;
use crate::decode::{DecodeError, DecodeOptions, Image8, ImageInfo, LabelPlane};
use crate::error::{Error, Result};

/// Which backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The best available: CUDA, then wgpu, then CPU.
    #[default]
    Auto,
    /// Host threads (always available).
    Cpu,
    /// wgpu compute shaders (Vulkan, Metal, DX12).
    Wgpu,
    /// CUDA kernels and nvJPEG.
    Cuda,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Auto => "auto",
            BackendKind::Cpu => "cpu",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Cuda => "cuda",
        })
    }
}

impl FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendKind::Auto),
            "cpu" => Ok(BackendKind::Cpu),
            "wgpu" => Ok(BackendKind::Wgpu),
            "cuda" => Ok(BackendKind::Cuda),
            other => Err(Error::Config(format!(
                "unknown backend {other:?} (expected auto, cpu, wgpu or cuda)"
            ))),
        }
    }
}

/// What a backend does for the pipeline. Decoding and plan execution take the same
/// inputs on every backend; GPU backends batch them internally.
pub trait Backend: Send + Sync + fmt::Debug {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// The device, in words (`"cpu (8 threads)"`, an adapter or GPU name).
    fn device(&self) -> String;

    /// Decodes a JPEG or PNG image into 8-bit RGB, reusing `out`.
    fn decode_image(
        &self,
        bytes: &[u8],
        opts: &DecodeOptions,
        out: &mut Image8,
    ) -> Result<ImageInfo, DecodeError>;

    /// Decodes a label mask, reusing `out`.
    fn decode_mask(
        &self,
        bytes: &[u8],
        opts: &DecodeOptions,
        out: &mut LabelPlane,
    ) -> Result<ImageInfo, DecodeError>;

    /// Executes a plan on an image plane into its batch slot.
    fn execute_image(&self, plan: &SamplePlan, src: &Image8, out: &mut [u8], scratch: &mut Scratch);

    /// Executes a plan on a label plane (nearest only) into its batch slot.
    fn execute_mask(&self, plan: &SamplePlan, src: &LabelPlane, out: &mut [u16]);
}

/// A chosen backend and the reason it was chosen.
#[derive(Debug, Clone)]
pub struct Selected {
    /// The backend.
    pub backend: Arc<dyn Backend>,
    /// Why it was chosen (logged at info level by [`select`]).
    pub reason: String,
}

const NO_GPU_IN_BUILD: &str =
    "this build of stoker has no GPU backend compiled in (the wgpu and CUDA backends are not part of this release)";

/// Resolves `kind` to a backend. `Auto` never fails: it falls back to the CPU and logs
/// why. An explicit GPU kind that is unavailable is an error naming the reason.
pub fn select(kind: BackendKind, threads: usize) -> Result<Selected> {
    let cpu = || -> Arc<dyn Backend> { Arc::new(cpu::CpuBackend::new(threads)) };
    let selected = match kind {
        BackendKind::Cpu => Selected {
            backend: cpu(),
            reason: "cpu backend requested".into(),
        },
        BackendKind::Auto => Selected {
            backend: cpu(),
            reason: format!("auto: chose cpu because {NO_GPU_IN_BUILD}"),
        },
        BackendKind::Wgpu | BackendKind::Cuda => {
            return Err(Error::BackendUnavailable {
                backend: kind.to_string(),
                reason: NO_GPU_IN_BUILD.into(),
            })
        }
    };
    log::info!("backend: {}", selected.reason);
    Ok(selected)
}

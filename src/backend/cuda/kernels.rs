//! The CUDA kernels: `kernels/*.cu` with `kernels/common.cuh` prepended, compiled at
//! first use by NVRTC for the device's architecture and cached for the process.
//!
//! Compiled with `--fmad=false`: the colour jitter and normalisation are f32 arithmetic
//! that must round as the CPU reference does, which a fused multiply-add would not.
//!
//! NVRTC is found by its library name (`libnvrtc.so.13` on the loader path); when that
//! fails, it is loaded from `$CUDA_HOME/lib`, `$CUDA_HOME/lib64` or
//! `/usr/local/cuda/lib64` by absolute path (its builtins library first, which the 13.0
//! release does not find on its own), so that cudarc's later lookup by name succeeds.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use super::error::CudaError;
use crate::backend::device::launch::Kernel;
use crate::error::{Error, Result};

/// The header prepended to every kernel source.
pub const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// The kernel sources, by file name (without `common.cuh`).
pub const SOURCES: [(&str, &str); 4] = [
    ("idct.cu", include_str!("../../../kernels/idct.cu")),
    ("color.cu", include_str!("../../../kernels/color.cu")),
    ("orient.cu", include_str!("../../../kernels/orient.cu")),
    ("augment.cu", include_str!("../../../kernels/augment.cu")),
];

/// The full source of `file` as NVRTC compiles it: `common.cuh`, then the file.
pub fn full_source(file: &str) -> Option<String> {
    SOURCES
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(f, s)| format!("{COMMON}\n#line 1 \"{f}\"\n{s}"))
}

/// The source file (under `kernels/`) of a kernel.
pub fn file_of(kernel: Kernel) -> &'static str {
    match kernel.source() {
        "idct" => "idct.cu",
        "color" => "color.cu",
        "orient" => "orient.cu",
        _ => "augment.cu",
    }
}

/// Directories where a CUDA installation keeps its libraries: `$CUDA_HOME/lib`,
/// `$CUDA_HOME/lib64` (also `$CUDA_PATH`), then `/usr/local/cuda/lib64`.
pub fn library_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let home = PathBuf::from(home);
            dirs.push(home.join("lib"));
            dirs.push(home.join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs
}

/// Makes NVRTC loadable, or says why it is not. Checked once per process.
pub fn nvrtc_available() -> Result<()> {
    // The reason is kept as text: it becomes `BackendUnavailable`'s reason on every call.
    static FOUND: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| find_nvrtc().map_err(|e| e.to_string()))
        .clone()
        .map_err(|reason| Error::BackendUnavailable {
            backend: "cuda".into(),
            reason,
        })
}

fn find_nvrtc() -> std::result::Result<(), CudaError> {
    // SAFETY: cudarc's probe only tries to dlopen NVRTC by name and drops the handle;
    // loading NVRTC runs no code of ours.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(());
    }
    for dir in library_dirs() {
        let (builtins, nvrtc) = (
            dir.join("libnvrtc-builtins.so.13.0"),
            dir.join("libnvrtc.so.13"),
        );
        if !nvrtc.exists() {
            continue;
        }
        for lib in [builtins, nvrtc] {
            if !lib.exists() {
                continue;
            }
            // SAFETY: loading NVRTC runs only its own initialisers. The handle is leaked
            // on purpose: the library stays loaded so cudarc's later dlopen by SONAME
            // finds it.
            match unsafe { libloading::Library::new(&lib) } {
                Ok(l) => std::mem::forget(l),
                Err(source) => {
                    return Err(CudaError::Load {
                        path: lib.display().to_string(),
                        source,
                    })
                }
            }
        }
        // SAFETY: as above.
        if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Ok(());
        }
    }
    Err(CudaError::NotFound {
        library: "NVRTC (libnvrtc.so.13)",
        hint: "install the CUDA 13 toolkit or the nvidia-cuda-nvrtc wheel and put its lib/ \
               on LD_LIBRARY_PATH or in CUDA_HOME",
    })
}

/// Compiles `file` (one of [`SOURCES`]) to PTX for `arch` (`compute_90`, ...). An NVRTC
/// error carries NVRTC's log.
pub fn compile(file: &str, arch: &str) -> Result<String> {
    nvrtc_available()?;
    let source =
        full_source(file).ok_or_else(|| Error::internal(format!("no kernel source {file:?}")))?;
    let opts = cudarc::nvrtc::CompileOptions {
        fmad: Some(false),
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".into(),
            "-default-device".into(),
        ],
        name: Some(file.into()),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(source, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { nvrtc, log, .. }) => {
            Err(CudaError::Nvrtc {
                file: file.into(),
                arch: arch.into(),
                status: nvrtc,
                log: log.to_string_lossy().into_owned(),
            }
            .into())
        }
        Err(source) => Err(CudaError::NvrtcFailed {
            file: file.into(),
            arch: arch.into(),
            source,
        }
        .into()),
    }
}

/// PTX of every kernel source, `(file, PTX)`.
pub type Compiled = Arc<Vec<(&'static str, String)>>;

/// Every kernel source compiled for `arch`, cached for the process.
pub fn compile_all(arch: &str) -> Result<Compiled> {
    static CACHE: OnceLock<Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(arch).cloned()) {
        return Ok(hit);
    }
    let mut out = Vec::with_capacity(SOURCES.len());
    for (file, _) in SOURCES {
        out.push((file, compile(file, arch)?));
    }
    let out = Arc::new(out);
    if let Ok(mut c) = cache.lock() {
        c.insert(arch.to_string(), Arc::clone(&out));
    }
    Ok(out)
}

/// The virtual architecture NVRTC compiles for on a device of compute capability
/// `(major, minor)`.
pub fn arch_for(major: i32, minor: i32) -> String {
    format!("compute_{major}{minor}")
}

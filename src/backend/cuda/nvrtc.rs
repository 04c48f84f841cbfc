//! NVRTC, the CUDA runtime compiler: finding the library, and compiling one source to
//! PTX and, for a real architecture (`sm_90`), to a CUBIN.
//!
//! NVRTC is found by its library name (`libnvrtc.so.13` on the loader path); when that
//! fails, it is loaded from `$CUDA_HOME/lib`, `$CUDA_HOME/lib64` or
//! `/usr/local/cuda/lib64` by absolute path, so that cudarc's later lookup by name
//! succeeds. NVRTC opens its builtins library (`libnvrtc-builtins.so.MAJOR.MINOR`) only
//! when it first compiles, by name, and the 13.0 release does not look beside itself; so
//! the builtins matching the version NVRTC reports are loaded first, from the same
//! directory, and kept loaded: the loader then finds them by their SONAME.
//!
//! cudarc's own compile helper unwraps on some NVRTC failures; the calls here go to
//! NVRTC directly and return every failure as an error.
#![doc(hidden)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::result::{self, NvrtcError};
use cudarc::nvrtc::sys;

use super::error::CudaError;
use crate::error::{Error, Result};

/// The names NVRTC's library goes by in a CUDA installation's library directory.
const NVRTC_FILES: [&str; 2] = ["libnvrtc.so.13", "libnvrtc.so"];

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

/// Makes NVRTC loadable and returns its version `(major, minor)`, or says why it cannot
/// be loaded. Looked for once per process.
pub fn version() -> Result<(i32, i32)> {
    // The error is kept whole, shared: it becomes `BackendUnavailable`'s reason on every
    // call.
    static FOUND: OnceLock<std::result::Result<(i32, i32), std::sync::Arc<CudaError>>> =
        OnceLock::new();
    FOUND
        .get_or_init(|| find().map_err(std::sync::Arc::new))
        .clone()
        .map_err(|e| Error::BackendUnavailable {
            backend: "cuda".into(),
            reason: e.to_string(),
        })
}

fn find() -> std::result::Result<(i32, i32), CudaError> {
    if super::library_loads(&["nvrtc"]) {
        let version = loaded_version()?;
        builtins_by_name(version);
        return Ok(version);
    }
    for dir in library_dirs() {
        let Some(nvrtc) = NVRTC_FILES.iter().map(|f| dir.join(f)).find(|p| p.exists()) else {
            continue;
        };
        let lib = open(&nvrtc)?;
        let version = version_of(&lib, &nvrtc)?;
        builtins_in(&dir, version)?;
        // Kept loaded on purpose, like the builtins: cudarc's dlopen by name then finds
        // this library by its SONAME.
        std::mem::forget(lib);
        if super::library_loads(&["nvrtc"]) {
            log::debug!(
                "cuda: NVRTC {}.{} from {}",
                version.0,
                version.1,
                nvrtc.display()
            );
            return Ok(version);
        }
    }
    Err(CudaError::NotFound {
        library: "NVRTC (libnvrtc.so.13)",
        hint: "install the CUDA 13 toolkit or the nvidia-cuda-nvrtc wheel and put its lib/ \
               on LD_LIBRARY_PATH or in CUDA_HOME",
    })
}

/// Loads a library by path or name.
fn open(path: &Path) -> std::result::Result<libloading::Library, CudaError> {
    // SAFETY: loading NVRTC or its builtins runs only their own initialisers.
    unsafe { libloading::Library::new(path) }.map_err(|source| CudaError::Load {
        path: path.display().to_string(),
        source,
    })
}

/// The version of the NVRTC cudarc has loaded.
fn loaded_version() -> std::result::Result<(i32, i32), CudaError> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: NVRTC is loadable (checked by the caller), and `nvrtcVersion`, which every
    // NVRTC release exports, writes two ints through the pointers, which are valid.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|status| CudaError::NvrtcCall {
            call: "nvrtcVersion",
            what: "the NVRTC found by name".into(),
            status,
        })?;
    Ok((major, minor))
}

/// The version of the NVRTC loaded from `path`, asked through that library's own handle
/// (before cudarc loads it).
fn version_of(
    lib: &libloading::Library,
    path: &Path,
) -> std::result::Result<(i32, i32), CudaError> {
    type Version = unsafe extern "C" fn(*mut c_int, *mut c_int) -> sys::nvrtcResult;
    // SAFETY: `nvrtcVersion` has this signature in every NVRTC release (`nvrtc.h`).
    let f =
        unsafe { lib.get::<Version>(b"nvrtcVersion\0") }.map_err(|source| CudaError::Symbol {
            path: path.display().to_string(),
            name: "nvrtcVersion",
            source,
        })?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the function writes two ints through the pointers, which are valid; `lib`
    // outlives the call.
    unsafe { f(&mut major, &mut minor) }
        .result()
        .map_err(|status| CudaError::NvrtcCall {
            call: "nvrtcVersion",
            what: path.display().to_string(),
            status,
        })?;
    Ok((major, minor))
}

/// The builtins library's file name for NVRTC `version`.
fn builtins_name((major, minor): (i32, i32)) -> String {
    format!("libnvrtc-builtins.so.{major}.{minor}")
}

/// NVRTC was found by name: its builtins are loaded by name too, or from a CUDA library
/// directory where the loader would not find them. Not finding them is no error here
/// (this NVRTC may find them on its own); compiling says so if it cannot.
fn builtins_by_name(version: (i32, i32)) {
    let name = builtins_name(version);
    if let Ok(lib) = open(Path::new(&name)) {
        std::mem::forget(lib);
        return;
    }
    for dir in library_dirs() {
        let path = dir.join(&name);
        if path.exists() {
            match open(&path) {
                Ok(lib) => return std::mem::forget(lib),
                Err(e) => log::debug!("cuda: {e}"),
            }
        }
    }
    log::debug!("cuda: {name} is not on the loader's path nor in a CUDA library directory");
}

/// Loads (and keeps loaded) the builtins for NVRTC `version` from `dir`; where that
/// file is missing, any `libnvrtc-builtins.so.*` there, as a last resort.
fn builtins_in(dir: &Path, version: (i32, i32)) -> std::result::Result<(), CudaError> {
    let exact = dir.join(builtins_name(version));
    if exact.exists() {
        std::mem::forget(open(&exact)?);
        return Ok(());
    }
    let mut others: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc-builtins.so."))
        })
        .collect();
    others.sort();
    for path in others.iter().rev() {
        match open(path) {
            Ok(lib) => {
                log::info!(
                    "cuda: NVRTC {}.{} in {}: no {}, loaded {} instead",
                    version.0,
                    version.1,
                    dir.display(),
                    exact.display(),
                    path.display()
                );
                std::mem::forget(lib);
                return Ok(());
            }
            Err(e) => log::debug!("cuda: {e}"),
        }
    }
    log::info!(
        "cuda: no NVRTC builtins library beside NVRTC in {}: compiling may fail",
        dir.display()
    );
    Ok(())
}

/// What NVRTC made of one source.
#[derive(Debug, Clone)]
pub struct Output {
    /// The PTX (for a real architecture, its `.target` is that architecture).
    pub ptx: String,
    /// The CUBIN, an ELF image for the architecture: only when compiled for a real one
    /// (`sm_90`, not `compute_90`).
    pub cubin: Option<Vec<u8>>,
}

/// An NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by `nvrtcCreateProgram` and is destroyed only
        // here. A failure leaks it, which is all that could be done about it.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

/// Compiles `source` (named `file` in messages) for `arch` with `options` (the
/// `--gpu-architecture` option is added here). A rejected source is
/// [`CudaError::Nvrtc`] with NVRTC's log.
pub fn compile(file: &str, source: &str, arch: &str, options: &[String]) -> Result<Output> {
    version()?;
    let call = |call: &'static str| {
        move |status: NvrtcError| CudaError::NvrtcCall {
            call,
            what: format!("{file} for {arch}"),
            status,
        }
    };
    let nul = |what: &str| Error::internal(format!("NVRTC {what} for {file} holds a NUL byte"));
    let src = CString::new(source).map_err(|_| nul("source"))?;
    let name = CString::new(file).map_err(|_| nul("file name"))?;
    let mut opts =
        vec![CString::new(format!("--gpu-architecture={arch}")).map_err(|_| nul("architecture"))?];
    for o in options {
        opts.push(CString::new(o.as_str()).map_err(|_| nul("option"))?);
    }
    let prog =
        Program(result::create_program(&src, Some(&name)).map_err(call("nvrtcCreateProgram"))?);
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let count =
        c_int::try_from(ptrs.len()).map_err(|_| Error::internal("too many NVRTC options"))?;
    // SAFETY: `prog` is a live program; `ptrs` holds `count` pointers to NUL-terminated
    // strings (`opts`), which outlive the call. `src` and `name`, which the program may
    // refer to, are declared before `prog` and so dropped after it.
    let compiled = unsafe { sys::nvrtcCompileProgram(prog.0, count, ptrs.as_ptr()) }.result();
    if let Err(status) = compiled {
        // SAFETY: `prog` is a live program.
        let log = unsafe { result::get_program_log(prog.0) }
            .map(|l| text(&l))
            .unwrap_or_else(|e| format!("(no log: {e})"));
        return Err(CudaError::Nvrtc {
            file: file.into(),
            arch: arch.into(),
            status,
            log,
        }
        .into());
    }
    // SAFETY: `prog` is a live, compiled program.
    let ptx = text(&unsafe { result::get_ptx(prog.0) }.map_err(call("nvrtcGetPTX"))?);
    let cubin = if arch.starts_with("sm_") {
        Some(cubin(&prog).map_err(call("nvrtcGetCUBIN"))?)
    } else {
        None
    };
    Ok(Output { ptx, cubin })
}

/// The CUBIN of a program compiled for a real architecture.
fn cubin(prog: &Program) -> std::result::Result<Vec<u8>, NvrtcError> {
    let mut size = 0usize;
    // SAFETY: `prog` is a live, compiled program; NVRTC writes the size through the
    // pointer, which is valid.
    unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }.result()?;
    let mut image = vec![0u8; size];
    // SAFETY: `image` holds the `size` bytes NVRTC said the CUBIN takes, which it copies
    // there.
    unsafe { sys::nvrtcGetCUBIN(prog.0, image.as_mut_ptr().cast::<c_char>()) }.result()?;
    Ok(image)
}

/// NVRTC's NUL-terminated text (a log, PTX) as a string.
fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtins_are_named_by_the_nvrtc_version() {
        assert_eq!(builtins_name((13, 0)), "libnvrtc-builtins.so.13.0");
        assert_eq!(builtins_name((12, 9)), "libnvrtc-builtins.so.12.9");
    }

    #[test]
    fn a_directory_without_builtins_is_no_error() {
        let dir = std::env::temp_dir().join(format!("stoker-nvrtc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("libnvrtc-builtins.so.13.0.txt"), b"not a library").expect("file");
        assert!(builtins_in(&dir, (13, 0)).is_ok());
        assert!(builtins_in(&dir.join("missing"), (13, 0)).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn nvrtc_text_stops_at_the_nul() {
        let chars: Vec<c_char> = b".version 9.0\n\0junk"
            .iter()
            .map(|&b| b as c_char)
            .collect();
        assert_eq!(text(&chars), ".version 9.0\n");
    }
}

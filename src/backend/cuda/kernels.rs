//! The CUDA kernels: `kernels/*.cu` with `kernels/common.cuh` prepended (and after it, to
//! the three decode kernels and the sync Huffman decode, `kernels/decode_common.cuh`; to
//! those of them that run the IDCT, `kernels/idct_common.cuh`; to the two Huffman
//! kernels, `kernels/huffman_common.cuh`), compiled at first use by NVRTC for the device's
//! architecture and cached for the process, then loaded on a context by [`load`].
//!
//! Each source is compiled for the device's real architecture (`sm_90`) and loaded as
//! that CUBIN, which the driver runs as it is: PTX would be compiled by the driver, which
//! refuses PTX of an ISA newer than itself, so an NVRTC newer than the driver could not
//! be used. PTX for the virtual architecture (`compute_90`) is the fallback, where NVRTC
//! cannot make the CUBIN or the driver refuses it. NVRTC runs on the CPU: compiling needs
//! no GPU.
//!
//! Compiled with `--fmad=false`: the colour jitter and normalisation are f32 arithmetic
//! that must round as the CPU reference does, which a fused multiply-add would not.
//!
//! How NVRTC itself is found: see [`super::nvrtc`].
#![doc(hidden)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use super::error::CudaError;
use super::{kernel_cache, nvrtc};
use crate::backend::device::constants;
use crate::backend::device::launch::Kernel;
use crate::error::{Error, Result};

pub use super::nvrtc::library_dirs;

/// The header prepended to every kernel source.
pub const COMMON: &str = include_str!("../../../kernels/common.cuh");

/// What the decode kernels (`huffman`, `idct`, `color`, and the sync decode's passes)
/// share, prepended to their sources after [`COMMON`]: the invocation index and the
/// lookups into the chunk's tables.
pub const DECODE_COMMON: &str = include_str!("../../../kernels/decode_common.cuh");

/// The IDCT arithmetic the `huffman` and `idct` kernels (and the sync decode's SIMD
/// check) share, prepended to their sources after [`DECODE_COMMON`].
pub const IDCT_COMMON: &str = include_str!("../../../kernels/idct_common.cuh");

/// What the two Huffman kernels (`huffman.cu`, `sync_huffman.cu`) share: the zigzag
/// order, the decode table lookup, extend and the SIMD check of a block, prepended to
/// their sources after [`IDCT_COMMON`].
pub const HUFFMAN_COMMON: &str = include_str!("../../../kernels/huffman_common.cuh");

/// The kernel sources, by file name (without `common.cuh` and the headers of
/// [`headers_of`]).
pub const SOURCES: [(&str, &str); 7] = [
    ("huffman.cu", include_str!("../../../kernels/huffman.cu")),
    ("idct.cu", include_str!("../../../kernels/idct.cu")),
    ("color.cu", include_str!("../../../kernels/color.cu")),
    ("orient.cu", include_str!("../../../kernels/orient.cu")),
    ("augment.cu", include_str!("../../../kernels/augment.cu")),
    ("mix.cu", include_str!("../../../kernels/mix.cu")),
    (
        "sync_huffman.cu",
        include_str!("../../../kernels/sync_huffman.cu"),
    ),
];

/// The headers (name, text) prepended to the kernel source `file` after `common.cuh`:
/// `decode_common.cuh` for the three decode kernels and the sync decode, then
/// `idct_common.cuh` for those that run the IDCT, then `huffman_common.cuh` for the two
/// Huffman kernels.
pub fn headers_of(file: &str) -> &'static [(&'static str, &'static str)] {
    match file {
        "huffman.cu" | "sync_huffman.cu" => &[
            ("decode_common.cuh", DECODE_COMMON),
            ("idct_common.cuh", IDCT_COMMON),
            ("huffman_common.cuh", HUFFMAN_COMMON),
        ],
        "idct.cu" => &[
            ("decode_common.cuh", DECODE_COMMON),
            ("idct_common.cuh", IDCT_COMMON),
        ],
        "color.cu" => &[("decode_common.cuh", DECODE_COMMON)],
        _ => &[],
    }
}

/// The full source of `file` as NVRTC compiles it: `common.cuh`, the headers of
/// [`headers_of`], then the file, each after a `#line` directive so that NVRTC's
/// messages name the file and line they come from, and each header and the file after
/// the constants it reads ([`constants::cuda`]; the tests' kernel emulator includes the
/// same text).
pub fn full_source(file: &str) -> Option<String> {
    let (f, s) = SOURCES.iter().find(|(f, _)| *f == file)?;
    let mut out = format!("#line 1 \"common.cuh\"\n{COMMON}\n");
    for (name, text) in headers_of(f).iter().chain([&(*f, *s)]) {
        let stem = name.split('.').next().unwrap_or(name);
        let consts = constants::cuda(stem);
        if !consts.is_empty() {
            out += &format!("#line 1 \"{stem}.constants\"\n{consts}\n");
        }
        out += &format!("#line 1 \"{name}\"\n{text}\n");
    }
    Some(out)
}

/// The source file (under `kernels/`) of a kernel.
pub fn file_of(kernel: Kernel) -> &'static str {
    match kernel.source() {
        "huffman" => "huffman.cu",
        "idct" => "idct.cu",
        "color" => "color.cu",
        "orient" => "orient.cu",
        "mix" => "mix.cu",
        "sync_huffman" => "sync_huffman.cu",
        _ => "augment.cu",
    }
}

/// Makes NVRTC loadable, or says why it is not. Checked once per process.
pub fn nvrtc_available() -> Result<()> {
    nvrtc::version().map(|_| ())
}

/// The version `(major, minor)` of the NVRTC that compiles the kernels (loading it first
/// where needed).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    nvrtc::version()
}

/// One kernel source compiled by NVRTC.
#[derive(Debug, Clone)]
pub struct CompiledFile {
    /// The source file (one of [`SOURCES`]).
    pub file: &'static str,
    /// The PTX.
    pub ptx: String,
    /// The CUBIN (an ELF image), when compiled for a real architecture (`sm_90`).
    pub cubin: Option<Vec<u8>>,
    /// How long NVRTC took, in seconds.
    pub seconds: f64,
}

/// Compiles `file` (one of [`SOURCES`]) for `arch`: a virtual architecture
/// (`compute_90`) gives PTX, a real one (`sm_90`) PTX and a CUBIN. An NVRTC error
/// carries NVRTC's log. With `STOKER_KERNEL_CACHE=DIR`, what NVRTC made is kept in DIR
/// and read back by every later process (see [`super::kernel_cache`]).
pub fn compile_file(file: &str, arch: &str) -> Result<CompiledFile> {
    let (file, _) = SOURCES
        .iter()
        .find(|(f, _)| *f == file)
        .ok_or_else(|| Error::internal(format!("no kernel source {file:?}")))?;
    let source =
        full_source(file).ok_or_else(|| Error::internal(format!("no kernel source {file:?}")))?;
    let options = [
        "--fmad=false".to_string(),
        "--std=c++17".into(),
        "-default-device".into(),
    ];
    let t = Instant::now();
    // Taken from the cache on disk of `STOKER_KERNEL_CACHE` where it has this source.
    let key = kernel_cache::Key {
        file,
        source: &source,
        arch,
        options: &options,
        nvrtc: nvrtc::version()?,
    };
    let (out, _) = kernel_cache::compile_cached(kernel_cache::dir().as_deref(), &key, || {
        nvrtc::compile(file, &source, arch, &options)
    })?;
    Ok(CompiledFile {
        file,
        ptx: out.ptx,
        cubin: out.cubin,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// Compiles `file` (one of [`SOURCES`]) to PTX for `arch` (`compute_90`, ...). An NVRTC
/// error carries NVRTC's log.
pub fn compile(file: &str, arch: &str) -> Result<String> {
    compile_file(file, arch).map(|c| c.ptx)
}

/// Every kernel source compiled for one architecture, in the order of [`SOURCES`].
pub type Compiled = Arc<Vec<CompiledFile>>;

/// Every kernel source compiled for `arch` (see [`compile_file`]), cached for the
/// process.
pub fn compile_all(arch: &str) -> Result<Compiled> {
    compile_cached(arch).map(|(c, _)| c)
}

/// [`compile_all`], and whether it came from the cache.
fn compile_cached(arch: &str) -> Result<(Compiled, bool)> {
    static CACHE: OnceLock<Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(arch).cloned()) {
        return Ok((hit, true));
    }
    let mut out = Vec::with_capacity(SOURCES.len());
    for (file, _) in SOURCES {
        out.push(compile_file(file, arch)?);
    }
    let out = Arc::new(out);
    if let Ok(mut c) = cache.lock() {
        c.insert(arch.to_string(), Arc::clone(&out));
    }
    Ok((out, false))
}

/// The virtual architecture NVRTC compiles PTX for on a device of compute capability
/// `(major, minor)`: `compute_90`.
pub fn arch_for(major: i32, minor: i32) -> String {
    format!("compute_{major}{minor}")
}

/// The real architecture of a device of compute capability `(major, minor)`, which its
/// CUBIN is compiled for: `sm_90`.
pub fn sm_for(major: i32, minor: i32) -> String {
    format!("sm_{major}{minor}")
}

/// The PTX ISA version of `ptx`, from its `.version` line: `"9.0"`.
pub fn ptx_isa(ptx: &str) -> Option<&str> {
    ptx.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(".version"))
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// What was loaded onto the device for one kernel source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Image {
    /// The CUBIN for the device's own architecture, as NVRTC made it.
    Cubin,
    /// PTX, compiled by the driver when loaded.
    Ptx,
}

/// How one kernel source was compiled and loaded.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileReport {
    /// The source file.
    pub file: &'static str,
    /// What was loaded.
    pub image: Image,
    /// NVRTC's time for what was loaded, in seconds (when first compiled in this
    /// process: see [`LoadReport::cached`]).
    pub compile_seconds: f64,
    /// The driver's time to load it (for PTX, its JIT compile), in seconds.
    pub load_seconds: f64,
    /// Why the CUBIN was not loaded, for [`Image::Ptx`].
    pub fallback: Option<String>,
}

/// The resources of one loaded kernel, as the driver reports them
/// (`cuFuncGetAttribute`); `None` where the driver would not say.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelReport {
    /// The entry point.
    pub name: &'static str,
    /// Its source file.
    pub file: &'static str,
    /// The threads per block it is launched with.
    pub workgroup: u32,
    /// Registers per thread.
    pub registers: Option<i32>,
    /// Local memory (the stack frame: arrays and spills) per thread, in bytes.
    pub local_bytes: Option<i32>,
    /// Statically allocated shared memory per block, in bytes.
    pub shared_bytes: Option<i32>,
    /// Constant memory, in bytes.
    pub const_bytes: Option<i32>,
    /// The most threads per block it can be launched with on this device.
    pub max_threads_per_block: Option<i32>,
    /// The PTX virtual architecture it was compiled from (`90`).
    pub ptx_version: Option<i32>,
    /// The architecture of its binary (`90`).
    pub binary_version: Option<i32>,
}

/// What [`load`] did: NVRTC's version, what was compiled and loaded and how long it
/// took, and each kernel's resources.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    /// The NVRTC version, `"13.0"`.
    pub nvrtc: String,
    /// The device's architecture, `"sm_90"`.
    pub arch: String,
    /// The PTX ISA version NVRTC wrote (`.version` of the PTX), `"9.0"`.
    pub ptx_isa: Option<String>,
    /// Whether the compiled kernels came from this process's cache.
    pub cached: bool,
    /// Whether every source was loaded as a CUBIN.
    pub all_cubin: bool,
    /// NVRTC's time, in seconds, summed over what was loaded.
    pub compile_seconds: f64,
    /// The time to load every module and its functions, in seconds.
    pub load_seconds: f64,
    /// Per source file, in the order of [`SOURCES`].
    pub files: Vec<FileReport>,
    /// Per kernel, in the order of [`Kernel::cuda`].
    pub kernels: Vec<KernelReport>,
}

impl LoadReport {
    /// Logs the report: at `info` level the first time in the process, at `debug` after
    /// (every batcher loads the kernels).
    pub fn log(&self) {
        static LOGGED: AtomicBool = AtomicBool::new(false);
        let level = if LOGGED.swap(true, Ordering::Relaxed) {
            log::Level::Debug
        } else {
            log::Level::Info
        };
        let images = if self.all_cubin {
            "CUBIN"
        } else if self.files.iter().any(|f| f.image == Image::Cubin) {
            "CUBIN and PTX"
        } else {
            "PTX"
        };
        log::log!(
            level,
            "cuda: kernels for {} loaded as {images} in {:.3} s (NVRTC {}, PTX ISA {}, compiled in {:.2} s{})",
            self.arch,
            self.load_seconds,
            self.nvrtc,
            self.ptx_isa.as_deref().unwrap_or("unknown"),
            self.compile_seconds,
            if self.cached { ", cached" } else { "" }
        );
        let n = |v: Option<i32>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
        for k in &self.kernels {
            log::log!(
                level,
                "cuda: kernel {}: {} registers, {} local bytes, {} shared bytes",
                k.name,
                n(k.registers),
                n(k.local_bytes),
                n(k.shared_bytes)
            );
        }
    }
}

/// The kernels loaded on a context, and how.
#[derive(Debug)]
pub struct Loaded {
    /// Every kernel of [`Kernel::cuda`].
    pub functions: HashMap<Kernel, CudaFunction>,
    /// What was compiled and loaded.
    pub report: LoadReport,
}

/// Compiles (or takes from the cache) every kernel for a device of compute capability
/// `(major, minor)` and loads it on `ctx`.
///
/// Each source is loaded as the CUBIN for the device's own architecture (`sm_XY`), which
/// the driver runs as it is; where NVRTC cannot make it or the driver refuses it, as PTX
/// for `compute_XY`, which the driver compiles (and which needs a driver at least as new
/// as NVRTC). Each fallback is logged at `info` level with its reason.
pub fn load(ctx: &Arc<CudaContext>, major: i32, minor: i32) -> Result<Loaded> {
    let (nv_major, nv_minor) = nvrtc_version()?;
    let mut images = Images::new(sm_for(major, minor), arch_for(major, minor));
    let mut files = Vec::with_capacity(SOURCES.len());
    let mut kernels = Vec::with_capacity(Kernel::cuda().count());
    let mut functions = HashMap::new();
    let mut isa = None;
    let t = Instant::now();
    for (file, _) in SOURCES {
        let (module, report, ptx_isa) = images.load(ctx, file)?;
        isa = isa.or(ptx_isa);
        for k in Kernel::cuda().filter(|k| file_of(*k) == file) {
            let f = module
                .load_function(k.name())
                .map_err(|source| CudaError::Function {
                    file,
                    kernel: k.name(),
                    source,
                })?;
            kernels.push(resources(k, file, &f));
            functions.insert(k, f);
        }
        files.push(report);
    }
    let load_seconds = t.elapsed().as_secs_f64();
    kernels.sort_by_key(|k| Kernel::cuda().position(|a| a.name() == k.name));
    let report = LoadReport {
        nvrtc: format!("{nv_major}.{nv_minor}"),
        cached: images.cached(),
        arch: images.sm,
        ptx_isa: isa,
        all_cubin: files.iter().all(|f| f.image == Image::Cubin),
        compile_seconds: files.iter().map(|f| f.compile_seconds).sum(),
        load_seconds,
        files,
        kernels,
    };
    Ok(Loaded { functions, report })
}

/// Why a kernel file's CUBIN was not loaded (its PTX is then).
#[derive(Debug, thiserror::Error)]
enum CubinError {
    /// NVRTC compiled no CUBINs for the device.
    #[error("{0}")]
    NotCompiled(#[source] Arc<Error>),
    /// NVRTC compiled CUBINs, but none of this file.
    #[error("NVRTC made no {sm} CUBIN of {file}")]
    NotMade {
        /// The device's architecture.
        sm: String,
        /// The kernel file.
        file: String,
    },
    /// The driver would not load the CUBIN.
    #[error("the driver refused the {sm} CUBIN: {source}")]
    Refused {
        /// The device's architecture.
        sm: String,
        /// What the driver said.
        source: cudarc::driver::DriverError,
    },
}

/// The compiled kernels [`load`] chooses from: the CUBINs (or why there are none), and
/// the PTX, compiled when first needed.
struct Images {
    /// The device's architecture, `sm_90`.
    sm: String,
    /// Its virtual architecture, `compute_90`.
    compute: String,
    cubins: std::result::Result<(Compiled, bool), Arc<Error>>,
    ptx: Option<(Compiled, bool)>,
}

impl Images {
    fn new(sm: String, compute: String) -> Self {
        let cubins = compile_cached(&sm).map_err(|e| {
            log::info!("cuda: no {sm} CUBIN, loading PTX for {compute} instead: {e}");
            Arc::new(e)
        });
        Images {
            sm,
            compute,
            cubins,
            ptx: None,
        }
    }

    /// Whether everything loaded came from this process's cache.
    fn cached(&self) -> bool {
        let cubins = self.cubins.as_ref().map_or(true, |(_, hit)| *hit);
        cubins && self.ptx.as_ref().is_none_or(|(_, hit)| *hit)
    }

    /// Loads `file` as its CUBIN or else as PTX; with its report and PTX ISA version.
    fn load(
        &mut self,
        ctx: &Arc<CudaContext>,
        file: &'static str,
    ) -> Result<(Arc<CudaModule>, FileReport, Option<String>)> {
        let (module, image, compiled, fallback) = match self.cubin(ctx, file) {
            Ok((m, c)) => (m, Image::Cubin, c, None),
            Err(why) => {
                if self.cubins.is_ok() {
                    let compute = &self.compute;
                    log::info!("cuda: {file}: {why}; loading PTX for {compute} instead");
                }
                let (m, c) = self.ptx(ctx, file)?;
                (m, Image::Ptx, c, Some(why.to_string()))
            }
        };
        let report = FileReport {
            file,
            image,
            compile_seconds: compiled.seconds,
            load_seconds: compiled.load_seconds,
            fallback,
        };
        Ok((module, report, compiled.ptx_isa))
    }

    /// `file`'s CUBIN loaded, or why it could not be.
    fn cubin(
        &self,
        ctx: &Arc<CudaContext>,
        file: &str,
    ) -> std::result::Result<(Arc<CudaModule>, Summary), CubinError> {
        let all = &self
            .cubins
            .as_ref()
            .map_err(|e| CubinError::NotCompiled(Arc::clone(e)))?
            .0;
        let c = all.iter().find(|c| c.file == file);
        let (c, image) = c
            .and_then(|c| c.cubin.as_ref().map(|b| (c, b)))
            .ok_or_else(|| CubinError::NotMade {
                sm: self.sm.clone(),
                file: file.to_string(),
            })?;
        let t = Instant::now();
        match ctx.load_module(Ptx::from_binary(image.clone())) {
            Ok(m) => Ok((m, Summary::of(c, t))),
            Err(source) => Err(CubinError::Refused {
                sm: self.sm.clone(),
                source,
            }),
        }
    }

    /// `file`'s PTX (compiled on the first call) loaded, which the driver compiles.
    fn ptx(
        &mut self,
        ctx: &Arc<CudaContext>,
        file: &'static str,
    ) -> Result<(Arc<CudaModule>, Summary)> {
        let all = match &self.ptx {
            Some((all, _)) => Arc::clone(all),
            None => {
                let p = compile_cached(&self.compute)?;
                let all = Arc::clone(&p.0);
                self.ptx = Some(p);
                all
            }
        };
        let c = all
            .iter()
            .find(|c| c.file == file)
            .ok_or_else(|| Error::internal(format!("{file} missing from the compiled kernels")))?;
        let t = Instant::now();
        let m = ctx
            .load_module(Ptx::from_src(c.ptx.clone()))
            .map_err(|source| CudaError::Module { file, source })?;
        Ok((m, Summary::of(c, t)))
    }
}

/// What the report keeps of a compiled source and its loading.
struct Summary {
    seconds: f64,
    ptx_isa: Option<String>,
    load_seconds: f64,
}

impl Summary {
    /// `c`, loaded from `start` until now.
    fn of(c: &CompiledFile, start: Instant) -> Self {
        Summary {
            seconds: c.seconds,
            ptx_isa: ptx_isa(&c.ptx).map(str::to_string),
            load_seconds: start.elapsed().as_secs_f64(),
        }
    }
}

/// What the driver says `f` uses.
fn resources(kernel: Kernel, file: &'static str, f: &CudaFunction) -> KernelReport {
    use cudarc::driver::sys::CUfunction_attribute_enum as A;
    let get = |a: A| match f.get_attribute(a) {
        Ok(v) => Some(v),
        Err(e) => {
            log::debug!("cuda: {}: cannot query {a:?}: {e}", kernel.name());
            None
        }
    };
    KernelReport {
        name: kernel.name(),
        file,
        workgroup: kernel.workgroup(),
        registers: get(A::CU_FUNC_ATTRIBUTE_NUM_REGS),
        local_bytes: get(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
        shared_bytes: get(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        const_bytes: get(A::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
        max_threads_per_block: get(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        ptx_version: get(A::CU_FUNC_ATTRIBUTE_PTX_VERSION),
        binary_version: get(A::CU_FUNC_ATTRIBUTE_BINARY_VERSION),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_isa_is_read_from_the_version_line() {
        let ptx = "//\n// Generated by NVIDIA NVVM Compiler\n//\n\n.version 9.0\n.target sm_90\n";
        assert_eq!(ptx_isa(ptx), Some("9.0"));
        assert_eq!(ptx_isa(".target sm_90\n"), None);
    }

    #[test]
    fn architectures_are_named_from_the_compute_capability() {
        assert_eq!(sm_for(9, 0), "sm_90");
        assert_eq!(arch_for(9, 0), "compute_90");
        assert_eq!(sm_for(12, 0), "sm_120");
    }

    #[test]
    fn the_load_report_serialises_with_its_units_in_the_names() {
        let report = LoadReport {
            nvrtc: "13.0".into(),
            arch: "sm_90".into(),
            ptx_isa: Some("9.0".into()),
            cached: false,
            all_cubin: false,
            compile_seconds: 1.5,
            load_seconds: 0.25,
            files: vec![FileReport {
                file: "idct.cu",
                image: Image::Ptx,
                compile_seconds: 1.5,
                load_seconds: 0.25,
                fallback: Some("the driver refused the sm_90 CUBIN".into()),
            }],
            kernels: vec![KernelReport {
                name: "idct",
                file: "idct.cu",
                workgroup: 64,
                registers: Some(96),
                local_bytes: Some(0),
                shared_bytes: Some(0),
                const_bytes: None,
                max_threads_per_block: Some(640),
                ptx_version: Some(90),
                binary_version: Some(90),
            }],
        };
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["files"][0]["image"], "ptx");
        assert_eq!(json["kernels"][0]["registers"], 96);
        assert!(json["kernels"][0]["const_bytes"].is_null());
        assert_eq!(json["ptx_isa"], "9.0");
    }

    /// The line `n` (from 1) of `file` as it stands in `full`, by the `#line` directives.
    fn mapped_line<'a>(full: &'a str, file: &str, n: usize) -> Option<&'a str> {
        let start = full.find(&format!("#line 1 \"{file}\"\n"))?;
        full[start..].lines().nth(n)
    }

    #[test]
    fn each_source_is_compiled_after_its_headers_with_line_directives() {
        for (file, source) in SOURCES {
            let full = full_source(file).expect("source");
            let mut parts = vec![("common.cuh", COMMON)];
            parts.extend(headers_of(file));
            parts.push((file, source));
            for (name, text) in parts {
                assert_eq!(
                    full.matches(&format!("#line 1 \"{name}\"\n")).count(),
                    1,
                    "{file}: {name}"
                );
                // Every line of each part lies where its directive says.
                for (i, line) in text.lines().enumerate() {
                    assert_eq!(
                        mapped_line(&full, name, i + 1),
                        Some(line),
                        "{name}:{}",
                        i + 1
                    );
                }
            }
        }
        let with_idct: Vec<_> = SOURCES
            .iter()
            .filter(|(f, _)| headers_of(f).iter().any(|(h, _)| *h == "idct_common.cuh"))
            .map(|(f, _)| *f)
            .collect();
        assert_eq!(with_idct, ["huffman.cu", "idct.cu", "sync_huffman.cu"]);
        let with_decode: Vec<_> = SOURCES
            .iter()
            .filter(|(f, _)| headers_of(f).iter().any(|(h, _)| *h == "decode_common.cuh"))
            .map(|(f, _)| *f)
            .collect();
        assert_eq!(
            with_decode,
            ["huffman.cu", "idct.cu", "color.cu", "sync_huffman.cu"]
        );
        let with_huffman: Vec<_> = SOURCES
            .iter()
            .filter(|(f, _)| {
                headers_of(f)
                    .iter()
                    .any(|(h, _)| *h == "huffman_common.cuh")
            })
            .map(|(f, _)| *f)
            .collect();
        assert_eq!(with_huffman, ["huffman.cu", "sync_huffman.cu"]);
    }

    #[test]
    fn every_kernel_lives_in_a_source() {
        for k in Kernel::cuda() {
            assert!(full_source(file_of(k)).is_some(), "{}", k.name());
        }
    }
}

//! The CUDA kernels on the CPU. `tests/kernel_host/emulator.cpp` compiles the very sources
//! NVRTC compiles, as C++ with a host compiler (no FMA contraction, like `--fmad=false`),
//! and runs planned [`Step`]s over buffers: each binding in its own allocation ending at a
//! guard page, so a kernel that reads or writes past a binding fails the test instead of
//! passing by luck.
//!
//! Without a C++ compiler (`CXX`, `c++`, `g++`, `clang++`) the tests say so and pass, unless
//! `STOKER_REQUIRE_KERNEL_HOST=1`, which makes that a failure. `STOKER_KERNEL_HOST_VERBOSE=1`
//! makes the emulator time every launch; `STOKER_KERNEL_HOST_CXXFLAGS` adds compiler flags
//! (`-fsanitize=undefined` finds UB in the kernels on the test data).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use stoker::backend::device::{constants, Binding, DeviceLimits, Step};

use super::{Buffers, Executor};

/// The built emulator.
pub struct Emulator {
    exe: PathBuf,
}

/// The emulator, built once per test binary (and cached across runs by a hash of its
/// sources); `None`, said on stderr, when there is no C++ compiler, unless
/// `STOKER_REQUIRE_KERNEL_HOST=1`.
pub fn get() -> Option<&'static Emulator> {
    static EMU: OnceLock<Result<Emulator, String>> = OnceLock::new();
    let emu = EMU.get_or_init(build);
    crate::common::require_or_skip(
        emu.as_ref(),
        "STOKER_REQUIRE_KERNEL_HOST",
        "kernel emulator",
    )
}

/// The kernel files (stems) that read constants, as `emulator.cpp` includes them.
const CONSTANT_STEMS: [&str; 8] = [
    "decode_common",
    "idct_common",
    "huffman_common",
    "huffman",
    "sync_huffman",
    "color",
    "augment",
    "mix",
];

const CXX_FLAGS: &[&str] = &[
    "-std=c++20",
    "-O2",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-pthread",
    "-Wall",
    "-Wextra",
    "-Wno-unknown-pragmas",
];

/// Builds the emulator; `Err` only when no compiler is found (a build error panics).
fn build() -> Result<Emulator, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut candidates: Vec<String> = std::env::var("CXX").into_iter().collect();
    candidates.extend(["c++", "g++", "clang++"].map(String::from));
    let cxx = candidates
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .ok_or_else(|| "no C++ compiler (CXX, c++, g++, clang++)".to_string())?;
    let mut sources = vec![
        root.join("tests/kernel_host/emulator.cpp"),
        root.join("tests/kernel_host/cuda_host.h"),
    ];
    let mut kernels: Vec<PathBuf> = std::fs::read_dir(root.join("kernels"))
        .expect("kernels/")
        .map(|e| e.expect("kernels/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu" || x == "cuh"))
        .collect();
    kernels.sort();
    sources.extend(kernels);
    let mut h = std::hash::DefaultHasher::new();
    for p in &sources {
        std::hash::Hash::hash(&std::fs::read(p).expect("source"), &mut h);
    }
    // The constants the host prepends to each kernel source, included by emulator.cpp.
    let constants: Vec<(String, String)> = CONSTANT_STEMS
        .iter()
        .map(|stem| (format!("{stem}.constants.h"), constants::cuda(stem)))
        .collect();
    std::hash::Hash::hash(&constants, &mut h);
    // Extra flags, e.g. `-fsanitize=undefined` to look for UB in the kernels.
    let extra: Vec<String> = std::env::var("STOKER_KERNEL_HOST_CXXFLAGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    std::hash::Hash::hash(&(&cxx, CXX_FLAGS, &extra), &mut h);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_host");
    std::fs::create_dir_all(&dir).expect("emulator dir");
    let exe = dir.join(format!("emulator-{:016x}", std::hash::Hasher::finish(&h)));
    if !exe.is_file() {
        let tmp = dir.join(format!("emulator-{}.tmp", std::process::id()));
        let include = dir.join(format!("constants-{}", std::process::id()));
        std::fs::create_dir_all(&include).expect("constants dir");
        for (name, text) in &constants {
            std::fs::write(include.join(name), text).expect("write the constants");
        }
        let out = Command::new(&cxx)
            .args(CXX_FLAGS)
            .args(&extra)
            .arg("-I")
            .arg(&include)
            .arg(&sources[0])
            .arg("-o")
            .arg(&tmp)
            .output()
            .expect("run the C++ compiler");
        let _ = std::fs::remove_dir_all(&include);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{cxx} failed to build the kernel emulator:\n{log}"
        );
        if !log.is_empty() {
            eprintln!("{log}");
        }
        std::fs::rename(&tmp, &exe).expect("place the emulator");
    }
    Ok(Emulator { exe })
}

/// Appends a binding to the request: buffer index, offset, size.
fn put_range(req: &mut Vec<u8>, buffers: &Buffers, b: &Binding) -> Result<(), String> {
    let index = buffers
        .index(b.buffer)
        .ok_or_else(|| format!("the steps bind {:?}, which the run lacks", b.buffer))?;
    req.extend((index as u32).to_le_bytes());
    req.extend(b.offset.to_le_bytes());
    req.extend(b.size.to_le_bytes());
    Ok(())
}

impl Executor for Emulator {
    fn name(&self) -> &str {
        "the kernel emulator"
    }

    fn limits(&self) -> DeviceLimits {
        DeviceLimits::UNBOUNDED
    }

    fn exact_arithmetic(&self) -> bool {
        true
    }

    /// Runs `steps` over `buffers`; `Err` carries the emulator's message.
    fn try_run(&self, steps: &[Step], buffers: &mut Buffers) -> Result<(), String> {
        let mut req = b"SKH1".to_vec();
        req.extend((buffers.0.len() as u32).to_le_bytes());
        for (_, bytes) in &buffers.0 {
            req.extend((bytes.len() as u64).to_le_bytes());
            req.extend_from_slice(bytes);
        }
        req.extend((steps.len() as u32).to_le_bytes());
        for step in steps {
            match step {
                Step::Launch(l) => {
                    req.extend(0u32.to_le_bytes());
                    let name = l.kernel.name().as_bytes();
                    req.extend((name.len() as u32).to_le_bytes());
                    req.extend_from_slice(name);
                    req.extend(l.grid[0].to_le_bytes());
                    req.extend(l.grid[1].to_le_bytes());
                    req.extend((l.bindings.len() as u32).to_le_bytes());
                    for b in &l.bindings {
                        put_range(&mut req, buffers, b)?;
                    }
                    for p in l.params {
                        req.extend(p.to_le_bytes());
                    }
                }
                Step::Copy { src, dst } => {
                    req.extend(1u32.to_le_bytes());
                    put_range(&mut req, buffers, src)?;
                    put_range(&mut req, buffers, dst)?;
                }
                // The hardware decoder's step (nvJPEG): no kernel of ours to emulate.
                other => return Err(format!("the emulator cannot run {other:?}")),
            }
        }
        let mut child = Command::new(&self.exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the emulator");
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &req));
        let out = child.wait_with_output().expect("emulator output");
        let written = writer.join().expect("writer thread");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(format!("emulator {}: {stderr}", out.status));
        }
        written.map_err(|e| format!("writing the request: {e}"))?;
        if !stderr.is_empty() {
            eprint!("{stderr}");
        }
        let mut r = &out.stdout[..];
        let mut take = |n: usize| {
            let (a, b) = r.split_at(n);
            r = b;
            a.to_vec()
        };
        assert_eq!(take(4), b"SKH1");
        let count = u32::from_le_bytes(take(4).try_into().expect("u32")) as usize;
        assert_eq!(count, buffers.0.len());
        for (_, bytes) in &mut buffers.0 {
            let n = u64::from_le_bytes(take(8).try_into().expect("u64")) as usize;
            *bytes = take(n);
        }
        assert!(r.is_empty(), "trailing bytes in the reply");
        Ok(())
    }
}

//! Every CUDA kernel compiles with NVRTC: to PTX for compute_90, which
//! `ptxas -arch=sm_90 -v` assembles without register spills and within a bound on local
//! memory (the resources of each kernel printed as a table), and to an sm_90 CUBIN, the
//! image the backend loads. Runs without a GPU: NVRTC and ptxas are found under
//! `CUDA_HOME` (`lib/`, `bin/`) or in the usual system places. With
//! `STOKER_REQUIRE_NVRTC=1` (set by `scripts/test.sh`) a missing NVRTC or ptxas fails the
//! test instead of skipping it.
//!
//! Where a CUDA device is usable, the kernels are also loaded on it and the driver's
//! report of each one's resources checked (skipped without a device unless
//! `STOKER_REQUIRE_CUDA=1`). With `STOKER_CHECK_OUT` set (a folder), the ptxas table goes
//! to `kernels_ptxas.json` there and the device's load report to `kernels.json`.
#![cfg(feature = "cuda")]

use std::path::PathBuf;
use std::process::Command;

use serde::Serialize;
use stoker::backend::cuda::kernels::{self, Image};
use stoker::backend::cuda::CudaDevice;
use stoker::backend::device::launch::Kernel;

/// The most local memory (stack frame) a kernel may use per thread, in bytes. The IDCT
/// keeps the most per-thread state: two 64-word arrays (the dequantised block and the
/// samples), 512 bytes, which ptxas keeps in registers today but may place in local
/// memory. The Huffman pass keeps what it indexes by data there (the block it decodes,
/// the SIMD check's pass-1 workspace, the DC predictions: 400 bytes). Twice the IDCT's
/// leaves room for both; a kernel above the bound holds per-thread state nobody budgeted
/// for, and local memory is device memory, read through the caches at every access.
const MAX_LOCAL_BYTES: u32 = 1024;

fn required() -> bool {
    std::env::var("STOKER_REQUIRE_NVRTC").is_ok_and(|v| v == "1")
}

fn skip(why: &str) {
    assert!(!required(), "STOKER_REQUIRE_NVRTC=1 but {why}");
    eprintln!("skipped: {why}");
}

fn ptxas() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            candidates.push(PathBuf::from(home).join("bin/ptxas"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("ptxas")));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/ptxas"));
    candidates.into_iter().find(|p| p.is_file())
}

/// `STOKER_CHECK_OUT/name`, when that folder is asked for (and made).
fn check_out(name: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("STOKER_CHECK_OUT").filter(|v| !v.is_empty())?);
    std::fs::create_dir_all(&dir).expect("STOKER_CHECK_OUT");
    Some(dir.join(name))
}

/// One function's resources as `ptxas -v` reports them.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
struct Resources {
    /// The function's (mangled) name.
    name: String,
    /// The kernel source it came from (filled in by the caller).
    file: String,
    /// Whether it is a kernel entry point (`Compiling entry function`).
    entry: bool,
    registers: u32,
    barriers: u32,
    /// The stack frame: local memory per thread.
    local_bytes: u32,
    spill_stores: u32,
    spill_loads: u32,
    /// Static shared memory per block.
    shared_bytes: u32,
    /// Bank 0 of constant memory (the kernel's parameters among it).
    cmem0_bytes: u32,
}

/// The functions in `ptxas -v` output, in the order it names them.
///
/// ptxas names a function in `Compiling entry function '<name>' for 'sm_90'` (entry
/// points) or `Function properties for <name>` and then prints, for the function last
/// named, `N bytes stack frame, N bytes spill stores, N bytes spill loads` and
/// `Used N registers, used N barriers, N bytes smem, N bytes cmem[0]` (parts it has
/// nothing for are left out).
fn parse_ptxas(log: &str) -> Vec<Resources> {
    let mut out: Vec<Resources> = Vec::new();
    let mut current: Option<usize> = None;
    fn named(out: &mut Vec<Resources>, name: &str, entry: bool) -> usize {
        match out.iter().position(|r| r.name == name) {
            Some(i) => {
                out[i].entry |= entry;
                i
            }
            None => {
                out.push(Resources {
                    name: name.to_string(),
                    entry,
                    ..Resources::default()
                });
                out.len() - 1
            }
        }
    }
    for line in log.lines() {
        let text = line
            .trim()
            .strip_prefix("ptxas info")
            .map(|l| l.trim_start().trim_start_matches(':').trim())
            .unwrap_or(line.trim());
        if let Some(rest) = text.strip_prefix("Compiling entry function '") {
            let name = rest.split('\'').next().unwrap_or(rest);
            current = Some(named(&mut out, name, true));
            continue;
        }
        if let Some(name) = text.strip_prefix("Function properties for ") {
            current = Some(named(&mut out, name.trim(), false));
            continue;
        }
        let Some(i) = current else { continue };
        for part in text.split(',').map(str::trim) {
            let mut words = part.split_whitespace();
            let (Some(first), Some(second)) = (words.next(), words.next()) else {
                continue;
            };
            let rest: Vec<&str> = words.collect();
            let r = &mut out[i];
            // "Used 29 registers", "used 1 barriers": the number is second.
            if first.eq_ignore_ascii_case("used") {
                let Ok(n) = second.parse::<u32>() else {
                    continue;
                };
                match rest.first().copied() {
                    Some("registers") => r.registers = n,
                    Some("barriers") => r.barriers = n,
                    _ => {}
                }
                continue;
            }
            // "256 bytes smem", "0 bytes stack frame", "0 bytes spill stores": first.
            let (Ok(n), "bytes") = (first.parse::<u32>(), second) else {
                continue;
            };
            match rest.join(" ").as_str() {
                "stack frame" => r.local_bytes = n,
                "spill stores" => r.spill_stores = n,
                "spill loads" => r.spill_loads = n,
                "smem" => r.shared_bytes = n,
                "cmem[0]" => r.cmem0_bytes = n,
                _ => {}
            }
        }
    }
    out
}

fn table(rows: &[Resources]) -> String {
    let mut s = format!(
        "{:<16} {:<15} {:>5} {:>6} {:>7} {:>7} {:>6} {:>5} {:>6}\n",
        "kernel", "file", "regs", "local", "spill-s", "spill-l", "smem", "bars", "cmem0"
    );
    for r in rows {
        s += &format!(
            "{:<16} {:<15} {:>5} {:>6} {:>7} {:>7} {:>6} {:>5} {:>6}{}\n",
            r.name,
            r.file,
            r.registers,
            r.local_bytes,
            r.spill_stores,
            r.spill_loads,
            r.shared_bytes,
            r.barriers,
            r.cmem0_bytes,
            if r.entry { "" } else { "  (device function)" }
        );
    }
    s
}

#[test]
fn the_ptxas_report_is_parsed() {
    let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'idct' for 'sm_90'
ptxas info    : Function properties for idct
    512 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 96 registers, used 0 barriers
ptxas info    : Compile time = 248.414 ms
ptxas info    : Function properties for _Z6helperPj
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'vertical_jitter' for 'sm_90'
ptxas info    : Function properties for vertical_jitter
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 56 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
";
    let got = parse_ptxas(log);
    let want = [
        Resources {
            name: "idct".into(),
            entry: true,
            registers: 96,
            local_bytes: 512,
            spill_stores: 8,
            spill_loads: 4,
            ..Resources::default()
        },
        Resources {
            name: "_Z6helperPj".into(),
            local_bytes: 16,
            ..Resources::default()
        },
        Resources {
            name: "vertical_jitter".into(),
            entry: true,
            registers: 56,
            barriers: 1,
            shared_bytes: 2048,
            cmem0_bytes: 400,
            ..Resources::default()
        },
    ];
    assert_eq!(got, want);
}

#[test]
fn every_kernel_compiles_for_sm_90_without_spills_within_the_local_memory_bound() {
    if let Err(e) = kernels::nvrtc_available() {
        return skip(&e.to_string());
    }
    let Some(ptxas) = ptxas() else {
        return skip("ptxas was not found (CUDA_HOME/bin, PATH, /usr/local/cuda/bin)");
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ptx");
    std::fs::create_dir_all(&dir).expect("ptx dir");
    let mut rows = Vec::new();
    for (file, _) in kernels::SOURCES {
        let ptx = match kernels::compile(file, "compute_90") {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        // Every entry point of the contract that lives in this file is in the PTX.
        for k in Kernel::cuda().filter(|k| kernels::file_of(*k) == file) {
            assert!(
                ptx.contains(&format!(".entry {}(", k.name())),
                "{file}: no entry point {}",
                k.name()
            );
        }
        assert!(
            ptx.contains(".version 9.0") || ptx.contains(".target sm_90"),
            "{file}: unexpected PTX header:\n{}",
            ptx.lines().take(15).collect::<Vec<_>>().join("\n")
        );
        let path = dir.join(file.replace(".cu", ".ptx"));
        std::fs::write(&path, &ptx).expect("write ptx");
        let out = Command::new(&ptxas)
            .args(["-arch=sm_90", "-v"])
            .arg(&path)
            .args(["-o", "/dev/null"])
            .output()
            .expect("run ptxas");
        let log = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "ptxas failed on {file}:\n{log}");
        let found = parse_ptxas(&log);
        for k in Kernel::cuda().filter(|k| kernels::file_of(*k) == file) {
            assert!(
                found.iter().any(|r| r.entry && r.name == k.name()),
                "ptxas printed no report for {} in {file}:\n{log}",
                k.name()
            );
        }
        rows.extend(found.into_iter().map(|r| Resources {
            file: file.to_string(),
            ..r
        }));
    }
    let table = table(&rows);
    println!("ptxas -arch=sm_90 -v, per function:\n{table}");
    if let Some(path) = check_out("kernels_ptxas.json") {
        let json = serde_json::json!({
            "ptxas": ptxas.display().to_string(),
            "arch": "sm_90",
            "max_local_bytes": MAX_LOCAL_BYTES,
            "functions": rows,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&json).expect("json"))
            .expect("write kernels_ptxas.json");
    }
    let spills: Vec<_> = rows
        .iter()
        .filter(|r| r.spill_stores > 0 || r.spill_loads > 0)
        .map(|r| r.name.as_str())
        .collect();
    assert!(spills.is_empty(), "register spills in {spills:?}:\n{table}");
    let big: Vec<_> = rows
        .iter()
        .filter(|r| r.local_bytes > MAX_LOCAL_BYTES)
        .map(|r| r.name.as_str())
        .collect();
    assert!(
        big.is_empty(),
        "more than {MAX_LOCAL_BYTES} bytes of local memory per thread in {big:?}:\n{table}"
    );
}

#[test]
fn every_kernel_compiles_to_an_sm_90_cubin() {
    if let Err(e) = kernels::nvrtc_available() {
        return skip(&e.to_string());
    }
    for (file, _) in kernels::SOURCES {
        let c = kernels::compile_file(file, "sm_90").unwrap_or_else(|e| panic!("{e}"));
        let cubin = c
            .cubin
            .unwrap_or_else(|| panic!("{file}: no CUBIN for sm_90"));
        assert!(
            cubin.starts_with(b"\x7fELF"),
            "{file}: the CUBIN is not an ELF image: {:?}",
            &cubin[..cubin.len().min(16)]
        );
        // e_machine (bytes 18..20, little-endian): EM_CUDA.
        assert_eq!(
            cubin.get(18..20),
            Some(&190u16.to_le_bytes()[..]),
            "{file}: not a CUDA ELF"
        );
        assert!(c.ptx.contains(".target sm_90"), "{file}: PTX for sm_90");
        for k in Kernel::cuda().filter(|k| kernels::file_of(*k) == file) {
            let name = format!("{}\0", k.name());
            assert!(
                cubin.windows(name.len()).any(|w| w == name.as_bytes()),
                "{file}: the CUBIN has no symbol {}",
                k.name()
            );
        }
        // A virtual architecture gives PTX alone.
        let ptx = kernels::compile_file(file, "compute_90").unwrap_or_else(|e| panic!("{e}"));
        assert!(ptx.cubin.is_none());
    }
}

#[test]
fn the_kernels_load_on_the_device_as_cubins_within_bounds() {
    let device = match CudaDevice::new(0) {
        Ok(d) => d,
        Err(e) => {
            let require = std::env::var("STOKER_REQUIRE_CUDA").is_ok_and(|v| v == "1");
            assert!(
                !require,
                "STOKER_REQUIRE_CUDA=1 but there is no CUDA device: {e}"
            );
            return eprintln!("skipped: no CUDA device: {e}");
        }
    };
    let (major, minor) = device.capability();
    let loaded = kernels::load(device.context(), major, minor).unwrap_or_else(|e| panic!("{e}"));
    let report = &loaded.report;
    let json = serde_json::to_string_pretty(report).expect("json");
    println!("{json}");
    if let Some(path) = check_out("kernels.json") {
        std::fs::write(&path, &json).expect("write kernels.json");
    }
    for k in Kernel::cuda() {
        assert!(loaded.functions.contains_key(&k), "{} not loaded", k.name());
    }
    let fallbacks: Vec<_> = report
        .files
        .iter()
        .filter(|f| f.image != Image::Cubin)
        .map(|f| format!("{}: {}", f.file, f.fallback.as_deref().unwrap_or("?")))
        .collect();
    assert!(
        report.all_cubin && fallbacks.is_empty(),
        "loaded as PTX, not as the {} CUBIN: {fallbacks:?}",
        report.arch
    );
    for k in &report.kernels {
        let local = k.local_bytes.expect("the driver reports local memory");
        assert!(
            u32::try_from(local).is_ok_and(|l| l <= MAX_LOCAL_BYTES),
            "{}: {local} bytes of local memory per thread (at most {MAX_LOCAL_BYTES})",
            k.name
        );
        let max = k
            .max_threads_per_block
            .expect("the driver reports a block limit");
        assert!(
            i64::from(max) >= i64::from(k.workgroup),
            "{}: launched with {} threads per block, at most {max} possible",
            k.name,
            k.workgroup
        );
    }
}

#[test]
fn a_broken_kernel_is_an_error_with_the_nvrtc_log() {
    if let Err(e) = kernels::nvrtc_available() {
        return skip(&e.to_string());
    }
    let src = "extern \"C\" __global__ void k() { undefined_thing(); }";
    for arch in ["compute_90", "sm_90"] {
        match stoker::backend::cuda::nvrtc::compile("broken.cu", src, arch, &[]) {
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&format!("NVRTC could not compile broken.cu for {arch}")),
                    "{msg}"
                );
                assert!(msg.contains("undefined_thing"), "{msg}");
            }
            Ok(_) => panic!("{arch}: a broken kernel compiled"),
        }
    }
}

//! Every CUDA kernel compiles with NVRTC for compute_90 and assembles with
//! `ptxas -arch=sm_90` without register spills. Runs without a GPU: NVRTC and ptxas are
//! found under `CUDA_HOME` (`lib/`, `bin/`) or in the usual system places. With
//! `STOKER_REQUIRE_NVRTC=1` (set by `scripts/test.sh`) a missing NVRTC or ptxas fails the
//! test instead of skipping it.
#![cfg(feature = "cuda")]

use std::path::PathBuf;
use std::process::Command;

use stoker::backend::cuda::kernels;
use stoker::backend::device::launch::Kernel;

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

#[test]
fn every_kernel_compiles_for_sm_90_without_spills() {
    if let Err(e) = kernels::nvrtc_available() {
        return skip(&e.to_string());
    }
    let Some(ptxas) = ptxas() else {
        return skip("ptxas was not found (CUDA_HOME/bin, PATH, /usr/local/cuda/bin)");
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ptx");
    std::fs::create_dir_all(&dir).expect("ptx dir");
    for (file, _) in kernels::SOURCES {
        let ptx = match kernels::compile(file, "compute_90") {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        // Every entry point of the contract that lives in this file is in the PTX.
        for k in Kernel::ALL.iter().filter(|k| kernels::file_of(**k) == file) {
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
        eprintln!("{file}:\n{log}");
        let spills = log
            .lines()
            .filter(|l| l.contains("bytes spill stores") || l.contains("bytes spill loads"))
            .filter(|l| {
                l.split(',')
                    .filter(|part| part.contains("spill"))
                    .any(|part| !part.trim().starts_with("0 bytes"))
            })
            .collect::<Vec<_>>();
        assert!(
            spills.is_empty(),
            "{file} spills registers:\n{}",
            spills.join("\n")
        );
        assert!(
            log.contains("Used") && log.contains("registers"),
            "ptxas printed no register report for {file}:\n{log}"
        );
    }
}

#[test]
fn a_broken_kernel_is_an_error_with_the_nvrtc_log() {
    if let Err(e) = kernels::nvrtc_available() {
        return skip(&e.to_string());
    }
    let r = stoker::backend::cuda::cudarc::nvrtc::compile_ptx_with_opts(
        "extern \"C\" __global__ void k() { undefined_thing(); }",
        stoker::backend::cuda::cudarc::nvrtc::CompileOptions {
            options: vec!["--gpu-architecture=compute_90".into()],
            ..Default::default()
        },
    );
    match r {
        Err(stoker::backend::cuda::cudarc::nvrtc::CompileError::CompileError { log, .. }) => {
            assert!(log.to_string_lossy().contains("undefined_thing"));
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

//! The wgpu probe runs once per process, and prints nothing: on a headless Linux machine
//! Mesa's device-selection layer wrote `XDG_RUNTIME_DIR is invalid or not set` to stderr
//! each time adapters were enumerated, twice per probe, whatever logger the program had.

use crate::common;

use std::process::Command;

use stoker::{Augment, BackendKind, Dataset, Pipeline};

/// Run in a child process by the test below: builds five `Auto` pipelines, then runs a
/// batch on the wgpu backend where there is an adapter (lavapipe in CI).
#[test]
fn child_builds_five_auto_pipelines() {
    if std::env::var_os("STOKER_PROBE_CHILD").is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 1, 2, 3);
    let builder = || {
        Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
            .augment(Augment::new().resize(8, 8))
    };
    for _ in 0..5 {
        let p = builder()
            .backend(BackendKind::Auto)
            .build()
            .expect("pipeline");
        eprintln!("built on {}", p.backend().kind());
        let _ = stoker::backend::wgpu::adapters();
    }
    match builder().backend(BackendKind::Wgpu).build() {
        Ok(p) => eprintln!("wgpu batch of {}", common::first_batch(&p).len()),
        Err(e) => eprintln!("no wgpu: {e}"),
    }
}

#[test]
fn the_adapter_probe_runs_once_per_process() {
    let exe = std::env::current_exe().expect("test binary");
    // The child test's name as the harness knows it: below the crate root's module name
    // (`probe::` in the test suite's binary).
    let child = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::child_builds_five_auto_pipelines"),
        None => "child_builds_five_auto_pipelines".to_string(),
    };
    let out = Command::new(exe)
        .args([child.as_str(), "--exact", "--nocapture"])
        .env("STOKER_PROBE_CHILD", "1")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NODEVICE_SELECT")
        .output()
        .expect("child runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert_eq!(stderr.matches("built on").count(), 5, "{stderr}");
    assert!(
        stderr.contains("wgpu batch of 2") || stderr.contains("no wgpu"),
        "{stderr}"
    );
    // Not one message from the graphics stack, with no session and the layer on.
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "{stderr}");
}

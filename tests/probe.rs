//! The wgpu probe runs once per process: building many `Auto` pipelines does not repeat
//! the graphics stack's messages (on a headless Linux machine its device-selection layer
//! writes `XDG_RUNTIME_DIR is invalid or not set` to stderr each time adapters are
//! enumerated).

mod common;

use std::process::Command;

use stoker::{Augment, BackendKind, Dataset, Pipeline};

/// Run in a child process by the test below: builds five `Auto` pipelines.
#[test]
fn child_builds_five_auto_pipelines() {
    if std::env::var_os("STOKER_PROBE_CHILD").is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 1, 2, 3);
    for _ in 0..5 {
        let p = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
            .backend(BackendKind::Auto)
            .augment(Augment::new().resize(8, 8))
            .build()
            .expect("pipeline");
        eprintln!("built on {}", p.backend().kind());
        let _ = stoker::backend::wgpu::adapters();
    }
}

#[test]
fn the_adapter_probe_runs_once_per_process() {
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(exe)
        .args(["child_builds_five_auto_pipelines", "--exact", "--nocapture"])
        .env("STOKER_PROBE_CHILD", "1")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NODEVICE_SELECT")
        .output()
        .expect("child runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert_eq!(stderr.matches("built on").count(), 5, "{stderr}");
    // At most one probe's worth of messages (the layer may write one line per Vulkan
    // instance it sees during that one probe), not one per build.
    let noise = stderr.matches("XDG_RUNTIME_DIR").count();
    assert!(noise <= 2, "{noise} messages for five builds:\n{stderr}");
}

//! Runs the `stoker` binary under a watchdog, for the tests of the command-line tool
//! (included with `#[path]` by test binaries that need the `cli` feature: the binary's
//! path, `CARGO_BIN_EXE_stoker`, exists only in those builds).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Long enough for a debug build on a busy machine; a blocked read never ends.
pub const WATCHDOG: Duration = Duration::from_secs(120);

/// Whether the tests run as root (who reads any folder whatever its mode).
pub fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// What a run gave.
pub struct Run {
    pub code: i32,
    pub json: Value,
    pub stderr: String,
}

/// `bench pipeline` over `images`: one epoch of batches of 2 images of 16 x 16 (the
/// backend left to the caller).
pub fn small_bench(images: &Path) -> Vec<String> {
    [
        "bench",
        "pipeline",
        "--images",
        images.to_str().expect("utf-8 path"),
        "--size",
        "16",
        "--batch",
        "2",
        "--epochs",
        "1",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect()
}

/// Runs `stoker args.. --json` (as `nobody` when `nobody` and this is root, so that file
/// modes count), killed and failed if it outlives [`WATCHDOG`]. Stdout must be exactly
/// one JSON object, whatever the status.
pub fn stoker<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S], nobody: bool) -> Run {
    let exe = env!("CARGO_BIN_EXE_stoker");
    let mut cmd = if nobody && is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            exe,
        ]);
        c
    } else {
        Command::new(exe)
    };
    for k in ["RANK", "WORLD_SIZE", "STOKER_LOG"] {
        cmd.env_remove(k);
    }
    cmd.args(args)
        .arg("--json")
        .env("HOME", "/tmp")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn stoker");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stoker {args:?} hung for {WATCHDOG:?} (killed)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let values: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("stoker {args:?}: stdout is not JSON ({e}): {stdout:?}"));
    assert_eq!(
        values.len(),
        1,
        "stoker {args:?}: stdout holds {} JSON values: {stdout:?}; stderr: {stderr}",
        values.len()
    );
    assert!(values[0].is_object(), "stoker {args:?}: {stdout}");
    Run {
        code: status.code().unwrap_or(-1),
        json: values.into_iter().next().expect("one value"),
        stderr,
    }
}

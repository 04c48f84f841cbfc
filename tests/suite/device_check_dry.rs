//! The GPU check (`scripts/device-check.sh run`) keeps its contract on a machine without
//! a GPU, so that it cannot rot between the rare runs on one: it completes and exits 0,
//! `steps.jsonl` has one JSON line per step (`step`, `rc`, `seconds`, `reason`), a step
//! that could not run says why, `results.json` parses and has its fields. Also: steps
//! past the deadline are recorded as cut (and results.json is still written), and a stand-in
//! GPU machine (a fake `nvidia-smi`, a package of fake test executables and a fake
//! `stoker`) has its figures, benchmark reports and failures collected.
//!
//! Every run uses `STOKER_CHECK_NO_GPU=1` or the fake `nvidia-smi`, so no test executable
//! of a real package runs: each takes seconds, whatever is built here.
#![cfg(unix)]

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Far more than a dry run takes (about 5 s on 2 cores); a hang fails the test.
const WATCHDOG: Duration = Duration::from_secs(90);

/// The fields every line of `steps.jsonl` has.
const STEP_KEYS: [&str; 4] = ["step", "rc", "seconds", "reason"];

/// The fields of `results.json`.
const RESULT_KEYS: [&str; 12] = [
    "complete",
    "gpu",
    "deadline_s",
    "steps",
    "failed_steps",
    "cut_steps",
    "skipped_steps",
    "versions",
    "environment",
    "summary",
    "benchmarks",
    "figures",
];

/// Steps that need the GPU: without one, each is recorded as not run, with a reason.
const GPU_STEPS: [&str; 14] = [
    "kernels_compile",
    "nvjpeg_load",
    "cuda_backend",
    "device_pipeline",
    "pipeline",
    "shutdown",
    "wgpu_kernels",
    "bench_decode",
    "bench_pipeline",
    "torchvision",
    "python_package",
    "bench_python",
    "memcheck",
    "racecheck",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What a run of the check gave.
struct Check {
    code: i32,
    stdout: String,
    steps: Vec<Value>,
    results: Value,
    seconds: f64,
}

impl Check {
    fn step(&self, name: &str) -> &Value {
        self.steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no step {name} in steps.jsonl:\n{}", self.stdout))
    }
}

/// `check` without a GPU (`STOKER_CHECK_NO_GPU=1`), given `deadline` seconds and `more`,
/// which must exit with `code` and keep the output contract.
fn no_gpu_check(
    out: &Path,
    deadline: &str,
    more: (&str, &str),
    during: Option<&dyn Fn(&Path) -> bool>,
    code: i32,
) -> Check {
    let envs = [
        ("STOKER_CHECK_DEADLINE", deadline),
        ("STOKER_CHECK_NO_GPU", "1"),
        more,
    ];
    let c = check(out, &envs, during);
    assert_eq!(c.code, code, "{}", c.stdout);
    assert_contract(&c);
    c
}

/// Runs `bash scripts/device-check.sh run` with `OUT` in `out` and `envs`, under the
/// watchdog (its stdout in `out.stdout` beside it). `during`, when given, is asked (with
/// the folder) every 50 ms while the check runs until it returns true, and must have
/// returned true before the check ends.
fn check(out: &Path, envs: &[(&str, &str)], during: Option<&dyn Fn(&Path) -> bool>) -> Check {
    let log = out.with_extension("stdout");
    let mut cmd = Command::new("bash");
    cmd.arg("scripts/device-check.sh")
        .arg("run")
        .current_dir(repo())
        .env("OUT", out)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&log).expect("stdout file"))
        .stderr(Stdio::inherit());
    for k in [
        "STOKER_CHECK_STRICT",
        "STOKER_CHECK_SLEEP",
        "STOKER_CHECK_NO_GPU",
        "STOKER_CHECK_PKG",
        "STOKER_DEVICE_CHECK_IMAGES",
    ] {
        cmd.env_remove(k);
    }
    cmd.envs(envs.iter().copied());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn bash");
    let mut seen = during.is_none();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if let (false, Some(f)) = (seen, during) {
            seen = f(out);
        }
        if start.elapsed() > WATCHDOG {
            let _ = child.kill();
            panic!("the check ran over {WATCHDOG:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let seconds = start.elapsed().as_secs_f64();
    let stdout = fs::read_to_string(&log).unwrap_or_default();
    assert!(
        seen,
        "what was looked for while the check ran never showed:\n{stdout}"
    );
    let lines = fs::read_to_string(out.join("steps.jsonl")).expect("steps.jsonl");
    let steps: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let results = fs::read_to_string(out.join("results.json")).expect("results.json");
    let results: Value = serde_json::from_str(&results).expect("results.json parses");
    Check {
        code: status.code().unwrap_or(-1),
        stdout,
        steps,
        results,
        seconds,
    }
}

/// The contract of every line of `steps.jsonl` and of `results.json`.
fn assert_contract(c: &Check) {
    let mut names = BTreeSet::new();
    for s in &c.steps {
        for k in STEP_KEYS {
            assert!(s.get(k).is_some(), "step line without {k:?}: {s}");
        }
        let name = s["step"].as_str().expect("step is a string");
        assert!(names.insert(name), "step {name} recorded twice");
        assert!(s["rc"].is_null() || s["rc"].is_i64(), "rc: {s}");
        assert!(s["seconds"].as_f64().is_some_and(|x| x >= 0.0), "{s}");
        let reason = s["reason"].as_str().expect("reason is a string");
        assert!(!reason.is_empty(), "empty reason: {s}");
        if s["rc"].is_null() {
            assert!(
                reason.starts_with("skipped: ") || reason.starts_with("cut: "),
                "a step that did not run must say why: {s}"
            );
        }
    }
    for k in RESULT_KEYS {
        assert!(c.results.get(k).is_some(), "results.json without {k:?}");
    }
    assert_eq!(c.results["complete"], true, "{}", c.stdout);
    assert_eq!(
        c.results["steps"].as_array().map(Vec::len),
        Some(c.steps.len()),
        "results.json lists every step"
    );
}

#[test]
fn a_dry_run_completes_and_says_why_each_gpu_step_did_not_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    // While the first step sleeps, results.json is already there, says it is not
    // complete and names the step under way: a run killed at any point leaves its results.
    let midway = |out: &Path| {
        let Ok(text) = fs::read_to_string(out.join("results.json")) else {
            return false; // not yet written
        };
        let j: Value = serde_json::from_str(&text).expect("results.json parses at any time");
        j["running"]["step"] == "sleep" && j["complete"] == false
    };
    let c = no_gpu_check(&out, "60", ("STOKER_CHECK_SLEEP", "3"), Some(&midway), 0);
    assert!(
        c.seconds < 60.0,
        "a dry run took {:.1} s: {}",
        c.seconds,
        c.stdout
    );
    assert_eq!(c.step("sleep")["rc"], 0);
    for name in GPU_STEPS {
        let s = c.step(name);
        assert!(s["rc"].is_null(), "{name} ran without a GPU: {s}");
        let reason = s["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("skipped: "), "{name}: {s}");
        if name != "memcheck" && name != "racecheck" {
            assert!(reason.contains("no GPU"), "{name}: {s}");
        }
    }
    // The probes that need no GPU ran.
    for name in ["probe_libraries", "probe_python"] {
        assert_eq!(c.step(name)["rc"], 0, "{}", c.stdout);
    }
    assert_eq!(c.results["gpu"], false);
    assert!(c.results["environment"]["python"]["python"].is_string());
    assert_eq!(c.results["failed_steps"], serde_json::json!([]));
    // The benchmarks would fall back to the bundled images.
    assert!(c.results["bench_images"]["path"]
        .as_str()
        .is_some_and(|p| p.ends_with("tests/data/samples")));
    // Strict: no GPU is a failure.
    no_gpu_check(
        &dir.path().join("strict"),
        "60",
        ("STOKER_CHECK_STRICT", "1"),
        None,
        1,
    );
}

#[test]
fn steps_past_the_deadline_are_recorded_as_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The first step sleeps through the whole deadline: it is stopped, every later one
    // is not started.
    let c = no_gpu_check(
        &dir.path().join("out"),
        "5",
        ("STOKER_CHECK_SLEEP", "30"),
        None,
        0,
    );
    assert!(c.seconds < 40.0, "{:.1} s: {}", c.seconds, c.stdout);
    let sleep = c.step("sleep");
    assert_eq!(sleep["rc"], 124, "{sleep}");
    assert!(
        sleep["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("cut by the deadline")),
        "{sleep}"
    );
    assert!(c.steps.len() > 10, "{}", c.stdout);
    for s in &c.steps[1..] {
        assert!(s["rc"].is_null(), "{s}");
        assert!(
            s["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("cut: deadline")),
            "{s}"
        );
    }
    let cut = c.results["cut_steps"].as_array().expect("cut_steps");
    assert_eq!(cut.len(), c.steps.len());
}

/// Writes an executable shell script.
fn script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/bash\n{body}")).expect("write script");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// libtest's output for a passing executable that also writes a figure.
const PASSING_TEST: &str = r#"echo "running 1 test"
echo "test a ... ok"
echo "{\"test\": \"$(basename "$0")\", \"ld\": \"$LD_LIBRARY_PATH\"}" >"$STOKER_CHECK_OUT/$(basename "$0").json"
echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s"
"#;

/// ... and for a failing one.
const FAILING_TEST: &str = r#"echo "running 2 tests"
echo "test a ... ok"
echo "test b ... FAILED"
printf '\nfailures:\n\n---- b stdout ----\npanicked\n\nfailures:\n    b\n\n'
echo "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s"
exit 101
"#;

#[test]
fn a_stand_in_gpu_machine_has_its_figures_reports_and_failures_collected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, pkg, src) = (
        dir.path().join("path"),
        dir.path().join("pkg"),
        dir.path().join("src"),
    );
    for d in [&path, &pkg, &src.join("bin"), &src.join("lib")] {
        fs::create_dir_all(d).expect("mkdir");
    }
    script(
        &path.join("nvidia-smi"),
        r##"case "$1" in
    -q) echo "Driver Version : 580.1"; echo "CUDA Version : 13.0" ;;
    --query-gpu*) echo "name, driver_version, memory.total [MiB]"; echo "Stand-in GPU, 580.1, 1024 MiB" ;;
    dmon) echo "# gpu jpg"; while :; do echo "0 1"; sleep 0.2; done ;;
    *) echo "a stand-in nvidia-smi" ;;
esac
"##,
    );
    for t in ["kernels_compile", "nvjpeg_load", "pipeline"] {
        script(&src.join("bin").join(t), PASSING_TEST);
    }
    script(&src.join("bin/cuda_backend"), FAILING_TEST);
    script(
        &src.join("bin/stoker"),
        r#"echo "{\"results\": [{\"backend\": \"cuda\", \"images_per_s\": 1000}], \"ld\": \"$LD_LIBRARY_PATH\", \"log\": \"$STOKER_LOG\"}"
"#,
    );
    fs::write(src.join("lib/libnvjpeg.so.13"), b"not a library").expect("lib");
    let packed = Command::new("python3")
        .arg(repo().join("scripts/device_check.py"))
        .args(["pack"])
        .arg(pkg.join("bin"))
        .arg(&src)
        .args(["bin", "lib"])
        .stdout(Stdio::null())
        .status()
        .expect("python3");
    assert!(packed.success());
    let search = format!(
        "{}:{}",
        path.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let samples = repo().join("tests/data/samples");
    let out = dir.path().join("out");
    let c = check(
        &out,
        &[
            ("PATH", search.as_str()),
            ("STOKER_CHECK_DEADLINE", "40"),
            ("STOKER_CHECK_PKG", pkg.to_str().expect("utf-8 path")),
            (
                "STOKER_DEVICE_CHECK_IMAGES",
                samples.to_str().expect("utf-8 path"),
            ),
        ],
        None,
    );
    assert_eq!(c.code, 0, "{}", c.stdout);
    assert_contract(&c);
    assert_eq!(c.results["gpu"], true, "{}", c.stdout);
    assert_eq!(c.step("kernels_compile")["rc"], 0);
    assert_eq!(c.step("kernels_compile")["status"], "ok");
    // The failing executable: failed, its failing test named.
    let failed = c.step("cuda_backend");
    assert_eq!(failed["rc"], 101);
    assert!(
        failed["reason"].as_str().is_some_and(|r| r.contains("b")),
        "{failed}"
    );
    assert!(c.results["failed_steps"]
        .as_array()
        .is_some_and(|f| f.contains(&Value::from("cuda_backend"))));
    // Executables the package lacks are skipped, saying so.
    let missing = c.step("shutdown");
    assert!(missing["rc"].is_null());
    assert!(
        missing["reason"]
            .as_str()
            .is_some_and(|r| r.contains("not in the package")),
        "{missing}"
    );
    // Figures written into STOKER_CHECK_OUT are merged by file stem; stoker's steps have
    // the carried lib/ first on the loader path and STOKER_LOG=info.
    let figures = &c.results["figures"];
    for t in ["kernels_compile", "nvjpeg_load", "pipeline"] {
        assert_eq!(figures[t]["test"], t, "{figures}");
    }
    let ld = figures["nvjpeg_load"]["ld"].as_str().unwrap_or_default();
    let carried = ld.split(':').next().unwrap_or_default();
    assert!(
        carried.contains("stoker-device-check.") && carried.ends_with("/lib"),
        "{ld}"
    );
    let decode = &c.results["benchmarks"]["bench_decode"];
    assert_eq!(decode["log"], "info", "{decode}");
    assert_eq!(c.results["summary"]["cuda_decode_images_per_s"], 1000);
    assert_eq!(c.results["versions"]["driver"], "580.1");
    assert!(out.join("nvidia-smi-q.txt").is_file());
    assert!(out.join("dmon.txt").is_file());
    assert_eq!(c.step("dmon")["rc"], 0);
}

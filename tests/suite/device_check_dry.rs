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
const GPU_STEPS: [&str; 26] = [
    "sanity_kernels",
    "sanity_nvjpeg",
    "sanity_engine_batch",
    "sanity_device_huffman",
    "sanity_device_sync",
    "bench_decode",
    "torchvision",
    "restart_set",
    "bench_decode_rst_engines",
    "bench_decode_rst_device_huffman",
    "bench_pipeline",
    "bench_pipeline_shards",
    "bench_share_half",
    "bench_share_none",
    "python_package",
    "nvjpeg_load",
    "cuda_backend",
    "cuda_hardware",
    "device_pipeline",
    "pipeline",
    "shutdown",
    "wgpu_kernels",
    "device_memory",
    "bench_python",
    "memcheck",
    "racecheck",
];

/// What the GPU machine gives back of `$OUT`: at most this many files ...
const MAX_FILES: usize = 8;
/// ... of at most 16 MiB each ...
const MAX_FILE_BYTES: u64 = 16 << 20;
/// ... and 64 MiB together.
const MAX_TOTAL_BYTES: u64 = 64 << 20;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What a run of the check gave.
struct Check {
    out: PathBuf,
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
    check_args(out, &[], envs, during)
}

/// [`check`] with more arguments to `run`.
fn check_args(
    out: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
    during: Option<&dyn Fn(&Path) -> bool>,
) -> Check {
    let log = out.with_extension("stdout");
    let mut cmd = Command::new("bash");
    cmd.arg("scripts/device-check.sh")
        .arg("run")
        .args(args)
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
        out: out.to_path_buf(),
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
    assert_returnable(&c.out);
    assert_eq!(
        c.results["steps"].as_array().map(Vec::len),
        Some(c.steps.len()),
        "results.json lists every step"
    );
}

/// `$OUT` holds only what the GPU machine gives back: at most [`MAX_FILES`] plain files,
/// flat (no folder: nothing deeper to lose), named with `[A-Za-z0-9._-]`, of at most
/// [`MAX_FILE_BYTES`] each and [`MAX_TOTAL_BYTES`] together; `results.json` and
/// `steps.jsonl` among them, and the archive of everything else.
fn assert_returnable(out: &Path) {
    let mut names = Vec::new();
    let mut total = 0;
    for e in fs::read_dir(out).expect("OUT") {
        let e = e.expect("entry");
        let name = e.file_name().into_string().expect("a UTF-8 name");
        let meta = fs::symlink_metadata(e.path()).expect("metadata");
        assert!(meta.is_file(), "{name} in OUT is not a plain file");
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "{name:?} is not a name that comes back"
        );
        assert!(meta.len() <= MAX_FILE_BYTES, "{name}: {} bytes", meta.len());
        total += meta.len();
        names.push(name);
    }
    names.sort();
    assert!(names.len() <= MAX_FILES, "{names:?}");
    assert!(total <= MAX_TOTAL_BYTES, "{total} bytes");
    assert_has_all(
        &names,
        &[
            "results.json",
            "steps.jsonl",
            "device-check.log",
            "results.tar.gz",
        ],
    );
}

/// Fails naming the first of `wanted` that `names` lacks.
fn assert_has_all(names: &[String], wanted: &[&str]) {
    for want in wanted {
        assert!(names.iter().any(|n| n == want), "no {want} in {names:?}");
    }
}

/// The names in `$OUT/results.tar.gz`.
fn archived(out: &Path) -> Vec<String> {
    let o = Command::new("tar")
        .arg("-tzf")
        .arg(out.join("results.tar.gz"))
        .output()
        .expect("tar");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
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
    // Every step's log is in the archive, beside the probes' findings.
    assert_has_all(
        &archived(&out),
        &[
            "results/logs/probe_python.log",
            "results/env/python.json",
            "results/steps.jsonl",
        ],
    );
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
    // A rerun of some steps: those, and the probes they need, nothing else.
    let only = check_args(
        &dir.path().join("only"),
        &["--only", "cuda_hardware,bench_pipeline"],
        &[
            ("STOKER_CHECK_DEADLINE", "60"),
            ("STOKER_CHECK_NO_GPU", "1"),
        ],
        None,
    );
    assert_eq!(only.code, 0, "{}", only.stdout);
    assert_contract(&only);
    let names: BTreeSet<&str> = only
        .steps
        .iter()
        .filter_map(|s| s["step"].as_str())
        .collect();
    assert!(
        names.contains("cuda_hardware") && names.contains("bench_pipeline"),
        "{names:?}"
    );
    for not_asked in ["cuda_backend", "memcheck", "torchvision", "sanity_kernels"] {
        assert!(!names.contains(not_asked), "{not_asked} ran: {names:?}");
    }
    assert_eq!(only.step("cuda_hardware")["rc"], Value::Null);
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
    fake_wheel(&pkg.join("python"));
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
            // Room for the sanity phase (its 20%) on a loaded machine; the run takes
            // seconds, since nothing here hangs.
            ("STOKER_CHECK_DEADLINE", "120"),
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
    assert_eq!(c.step("sanity_kernels")["rc"], 0);
    assert_eq!(c.step("sanity_kernels")["status"], "ok");
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
    assert_has_all(
        &archived(&out),
        &[
            "results/nvidia-smi-q.txt",
            "results/dmon.txt",
            "results/logs/cuda_backend.log",
            "results/figures/nvjpeg_load.json",
        ],
    );
    assert_eq!(c.step("dmon")["rc"], 0);
    // The wheel is installed for the machine's own python3 (its tags checked first); the
    // pytest suite then needs torch there, and fails, not skips, without it.
    assert_eq!(c.step("python_install")["status"], "ok", "{}", c.stdout);
    let py = c.step("python_package");
    if !has_torch() {
        assert_eq!(py["status"], "failed", "{py}");
        assert!(
            py["reason"]
                .as_str()
                .is_some_and(|r| r.contains("torch is not importable")),
            "{py}"
        );
    }
    // The sanity steps ran first, each with its filter.
    let first_gpu = c
        .steps
        .iter()
        .position(|s| s["step"] == "sanity_kernels")
        .expect("sanity_kernels");
    let bench = c
        .steps
        .iter()
        .position(|s| s["step"] == "bench_decode")
        .expect("bench_decode");
    let tests = c
        .steps
        .iter()
        .position(|s| s["step"] == "cuda_backend")
        .expect("cuda_backend");
    assert!(first_gpu < bench && bench < tests, "{}", c.stdout);
}

/// Whether this machine's python3 imports torch.
fn has_torch() -> bool {
    Command::new("python3")
        .args(["-c", "import torch"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A minimal wheel named as the package's (a `stoker` module that imports), in `dir`.
fn fake_wheel(dir: &Path) {
    fs::create_dir_all(dir).expect("python dir");
    let made = Command::new("python3")
        .arg("-c")
        .arg(
            r#"import sys, zipfile
name = sys.argv[1] + "/stoker-0.1.0-cp310-abi3-manylinux_2_17_x86_64.whl"
d = "stoker-0.1.0.dist-info/"
with zipfile.ZipFile(name, "w") as z:
    z.writestr("stoker/__init__.py", "")
    z.writestr(d + "METADATA", "Metadata-Version: 2.1\nName: stoker\nVersion: 0.1.0\n")
    z.writestr(d + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp310-abi3-manylinux_2_17_x86_64\n")
    z.writestr(d + "RECORD", "")
"#,
        )
        .arg(dir)
        .status()
        .expect("python3");
    assert!(made.success());
}

/// `device_check.py wheel-tags --python 3.12` on these wheel names: its exit status.
fn wheel_tags(names: &[&str]) -> bool {
    Command::new("python3")
        .arg(repo().join("scripts/device_check.py"))
        .args(["wheel-tags", "--python", "3.12"])
        .args(names)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("python3")
        .success()
}

#[test]
fn the_package_wheel_is_checked_against_cpython_3_12_on_x86_64_linux() {
    // The tag the Python package's build gives its wheel, from the stable ABI it is built
    // for (pyo3's `abi3-pyXY` feature in python/Cargo.toml).
    let manifest = fs::read_to_string(repo().join("python/Cargo.toml")).expect("manifest");
    let abi3 = manifest
        .split('"')
        .find_map(|w| w.strip_prefix("abi3-py"))
        .expect("pyo3 builds for the stable ABI (abi3-pyXY)");
    let tag = format!("cp{abi3}-abi3");
    let ours = format!("stoker-0.1.0-{tag}-manylinux_2_34_x86_64.whl");
    assert!(
        wheel_tags(&[&ours, "pytest-9.2.0-py3-none-any.whl"]),
        "{ours}"
    );
    // A built wheel, where there is one.
    let pkg = repo().join(".device-pkg/python");
    if let Ok(entries) = fs::read_dir(&pkg) {
        for e in entries.flatten() {
            let n = e.file_name().into_string().unwrap_or_default();
            if n.starts_with("stoker-") && n.ends_with(".whl") {
                assert!(wheel_tags(&[&n]), "{n} does not install on CPython 3.12");
            }
        }
    }
    for refused in [
        "stoker-0.1.0-cp313-abi3-manylinux_2_34_x86_64.whl",
        "stoker-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl",
        "stoker-0.1.0-cp310-abi3-macosx_11_0_arm64.whl",
        "stoker-0.1.0-cp310-abi3-manylinux_2_34_aarch64.whl",
        "stoker-0.1.0-cp310-abi3-linux_x86_64.whl",
    ] {
        assert!(!wheel_tags(&[refused]), "{refused} was accepted");
    }
    assert!(wheel_tags(&[
        "stoker-0.1.0-cp312-cp312-manylinux2014_x86_64.whl"
    ]));
}

#[test]
fn what_travels_fits_the_carry_limit() {
    // The working tree (tracked and untracked files git does not ignore) and, where they
    // are built, the package and the Vulkan loader: under 64 MiB.
    let o = Command::new("python3")
        .current_dir(repo())
        .arg("scripts/device_check.py")
        .args([
            "carry",
            "--limit-mib",
            "64",
            "--pkg",
            ".device-pkg",
            "--also",
            ".gl",
            "--dry",
        ])
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("of 64 MiB"), "{text}");
}

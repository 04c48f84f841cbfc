//! The command-line tool: every subcommand runs and its `--json` output carries the
//! fields that DESIGN.md lists (scripts rely on the names).

mod common;

use std::process::Command;

use serde_json::Value;

fn stoker(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_stoker"))
        .args(args)
        .arg("--json")
        .output()
        .expect("run stoker");
    assert!(
        out.status.success(),
        "stoker {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stoker {args:?}: stdout is not one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn has(v: &Value, fields: &[&str]) {
    for f in fields {
        assert!(v.get(f).is_some(), "field {f:?} missing in {v}");
    }
}

#[test]
fn bench_commands_report_their_fields() {
    let o = stoker(&[
        "bench",
        "overlap",
        "--n",
        "16",
        "--batch",
        "4",
        "--load-ms",
        "2",
        "--step-ms",
        "4",
    ]);
    has(&o, &["naive_s", "pipelined_s", "ideal_s", "ratio_to_ideal"]);
    assert!(o["ratio_to_ideal"].as_f64().is_some_and(|r| r >= 1.0));

    let d = stoker(&["bench", "decode", "--backend", "cpu,cuda", "--repeat", "1"]);
    let results = d["results"].as_array().expect("results");
    has(
        &results[0],
        &[
            "backend",
            "device",
            "images",
            "seconds",
            "images_per_s",
            "megapixels_per_s",
            "fallbacks",
            "errors",
        ],
    );
    assert_eq!(results[0]["errors"], 0);
    // A backend this build lacks is listed with its reason, not a failed run.
    assert!(results[1].get("error").is_some(), "{}", results[1]);

    let p = stoker(&[
        "bench", "pipeline", "--epochs", "1", "--size", "32", "--batch", "4",
    ]);
    let r = &p["results"][0];
    has(
        r,
        &[
            "backend",
            "epochs",
            "samples",
            "delivered",
            "reported",
            "images_per_s",
            "epoch_seconds",
            "input_wait_fraction",
        ],
    );
    assert_eq!(r["delivered"], 6);
}

#[test]
fn decode_inspect_split_and_render_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = common::data_dir();
    let good = data.join("jpeg/ljt_testorig.jpg");
    let bad = data.join("jpeg/jd_crash_missing-sof.jpg");
    let out = dir.path().join("decoded");
    let d = stoker(&[
        "decode",
        good.to_str().expect("path"),
        bad.to_str().expect("path"),
        "--backend",
        "cpu",
        "--out",
        out.to_str().expect("path"),
    ]);
    has(&d["decoded"][0], &["file", "out", "width", "height"]);
    has(&d["errors"][0], &["file", "reason"]);
    assert!(std::path::Path::new(d["decoded"][0]["out"].as_str().expect("out")).is_file());

    let i = stoker(&["inspect", data.join("jpeg").to_str().expect("path")]);
    has(&i, &["samples", "labels", "by_kind", "errors"]);
    assert!(!i["errors"].as_array().expect("errors").is_empty());

    let manifest = dir.path().join("split.json");
    let s = stoker(&[
        "split",
        data.join("samples").to_str().expect("path"),
        "--val",
        "0.34",
        "--seed",
        "3",
        "--out",
        manifest.to_str().expect("path"),
    ]);
    has(&s, &["train", "val", "groups", "disjoint"]);
    assert_eq!(s["disjoint"], true);
    let c = stoker(&[
        "split",
        "--check",
        manifest.to_str().expect("path"),
        "--images",
        data.join("samples").to_str().expect("path"),
    ]);
    assert_eq!(c["disjoint"], true);

    let png = dir.path().join("sheet.png");
    let r = stoker(&[
        "render",
        "--n",
        "2",
        "--size",
        "64",
        "--out",
        png.to_str().expect("path"),
    ]);
    has(&r, &["out", "samples"]);
    assert!(png.is_file());
}

/// `bench decode --backend cpu,wgpu`, `bench pipeline --backend wgpu` and
/// `decode --backend wgpu` run on this machine's adapter (lavapipe in CI), and the device
/// writes the same PNG as the CPU.
#[cfg(feature = "wgpu")]
#[test]
fn the_wgpu_backend_runs_from_the_command_line() {
    if common::wgpu_context().is_none() {
        return;
    }
    let d = stoker(&["bench", "decode", "--backend", "cpu,wgpu", "--repeat", "1"]);
    let results = d["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    for r in results {
        assert!(r.get("error").is_none(), "{r}");
        assert_eq!(r["images"], 6, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
    }
    assert_eq!(results[1]["backend"], "wgpu");
    assert_eq!(
        results[1]["fallbacks"], 0,
        "every sample JPEG decodes on the device"
    );

    let p = stoker(&[
        "bench",
        "pipeline",
        "--backend",
        "wgpu",
        "--epochs",
        "1",
        "--size",
        "32",
        "--batch",
        "4",
    ]);
    let r = &p["results"][0];
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(r["delivered"], 6);
    assert_eq!(r["stats"]["gpu_decoded"], 6, "{r}");

    let dir = tempfile::tempdir().expect("tempdir");
    let good = common::data_dir().join("samples/photo/sklearn_flower.jpg");
    let mut written = Vec::new();
    for backend in ["cpu", "wgpu"] {
        let out = dir.path().join(backend);
        let d = stoker(&[
            "decode",
            good.to_str().expect("path"),
            "--backend",
            backend,
            "--out",
            out.to_str().expect("path"),
        ]);
        let file = d["decoded"][0]["out"].as_str().expect("out").to_string();
        written.push(std::fs::read(file).expect("png"));
    }
    assert_eq!(
        written[0], written[1],
        "the device decode differs from the CPU's"
    );
}

#[test]
fn convert_writes_shards_that_inspect_and_bench_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let samples = common::data_dir().join("samples");
    let samples = samples.to_str().expect("utf-8 path");
    for (to, ext) in [("tfrecord", "tfrecord"), ("tar", "tar")] {
        let out = dir.path().join(to);
        let out_s = out.to_str().expect("utf-8 path");
        let o = stoker(&[
            "convert",
            samples,
            "--to",
            to,
            "--shard-size",
            "300KiB",
            "--out",
            out_s,
        ]);
        has(
            &o,
            &["out", "format", "samples", "bytes", "shards", "errors"],
        );
        assert_eq!(o["samples"], 6);
        let shards = o["shards"].as_array().expect("shards");
        assert!(shards.len() >= 2, "{o}");
        assert!(shards
            .iter()
            .all(|s| s.as_str().is_some_and(|s| s.ends_with(ext))));
        let i = stoker(&["inspect", out_s]);
        assert_eq!(i["samples"], 6, "{i}");
        let b = stoker(&[
            "bench", "pipeline", "--images", out_s, "--size", "32", "--batch", "4", "--epochs", "1",
        ]);
        assert_eq!(b["results"][0]["delivered"], 6, "{b}");
    }
}

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

// ---------------------------------------------------------------------------------------
// `bench ... --plot FILE`

/// The fill colours of the plots, in order (`PALETTE` of the CLI's `bench::plot`): lane,
/// line or bar kind `i` has colour `i`.
const PLOT_COLOURS: [&str; 4] = ["#4E79A7", "#F28E2B", "#59A14F", "#E15759"];

/// The attributes of every `<tag ...>` element of `svg`, in order.
fn svg_elements<'a>(svg: &'a str, tag: &str) -> Vec<std::collections::HashMap<&'a str, &'a str>> {
    let open = format!("<{tag} ");
    svg.match_indices(&open)
        .map(|(i, _)| {
            let rest = &svg[i + open.len()..];
            let body = &rest[..rest.find('>').expect("element not closed")];
            let mut attrs = std::collections::HashMap::new();
            let mut s = body;
            while let Some(eq) = s.find("=\"") {
                let name = s[..eq].trim();
                let v = &s[eq + 2..];
                let end = v.find('"').expect("attribute not closed");
                attrs.insert(name, &v[..end]);
                s = &v[end + 1..];
            }
            attrs
        })
        .collect()
}

/// The texts of the `<text>` elements of `svg`, trimmed.
fn svg_texts(svg: &str) -> Vec<&str> {
    svg.split("<text ")
        .skip(1)
        .map(|t| {
            let t = &t[t.find('>').expect("text not closed") + 1..];
            t[..t.find("</text>").expect("no </text>")].trim()
        })
        .collect()
}

/// Reads a plot: one `<svg>` root, every `<text>` closed; returns the text.
fn read_svg(path: &std::path::Path) -> String {
    let svg = std::fs::read_to_string(path).expect("plot written");
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.trim_end().ends_with("</svg>"), "the SVG is cut short");
    assert_eq!(svg.matches("<svg").count(), 1);
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    svg
}

/// `(x, width)` of the `<rect>`s filled with `colour`, left to right.
fn bars_of(svg: &str, colour: &str) -> Vec<(f64, f64)> {
    let num = |a: &std::collections::HashMap<&str, &str>, k: &str| -> f64 {
        a[k].parse().unwrap_or_else(|e| panic!("{k}={}: {e}", a[k]))
    };
    let mut v: Vec<(f64, f64)> = svg_elements(svg, "rect")
        .iter()
        .filter(|a| a.get("fill") == Some(&colour))
        .map(|a| (num(a, "x"), num(a, "width")))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

#[test]
fn bench_overlap_plot_draws_the_lanes_with_their_gaps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plot = dir.path().join("sub/overlap.svg");
    let (n, batch) = (12usize, 4usize);
    let o = stoker(&[
        "bench",
        "overlap",
        "--n",
        &n.to_string(),
        "--batch",
        &batch.to_string(),
        "--load-ms",
        "3",
        "--step-ms",
        "4",
        "--repeat",
        "1",
        "--plot",
        plot.to_str().expect("path"),
    ]);
    has(&o, &["naive_s", "pipelined_s"]);
    let svg = read_svg(&plot);
    let texts = svg_texts(&svg);
    for lane in [
        "naive: load",
        "naive: train",
        "pipelined: wait for batch",
        "pipelined: train",
    ] {
        assert!(texts.contains(&lane), "no lane {lane:?} in {texts:?}");
    }
    // One span per batch in each lane.
    let lanes: Vec<Vec<(f64, f64)>> = PLOT_COLOURS.iter().map(|c| bars_of(&svg, c)).collect();
    let nb = n.div_ceil(batch);
    for (l, spans) in lanes.iter().enumerate() {
        assert_eq!(spans.len(), nb, "lane {l}: {spans:?}");
    }
    // Naive: nothing overlaps, load and step take turns; the other lane idles meanwhile
    // (a gap in it). A pixel of slack for rounding.
    let (load, train) = (&lanes[0], &lanes[1]);
    for b in 0..nb {
        assert!(load[b].1 > 1.0 && train[b].1 > 1.0, "{load:?} {train:?}");
        assert!(
            load[b].0 + load[b].1 <= train[b].0 + 1.0,
            "{load:?} {train:?}"
        );
        if b + 1 < nb {
            assert!(train[b].0 + train[b].1 <= load[b + 1].0 + 1.0);
        }
    }
    // Pipelined: the trainer waits for a batch, then trains on it; the steps never
    // overlap each other, and the run ends before the naive one (same time axis).
    let (wait, step) = (&lanes[2], &lanes[3]);
    for b in 0..nb {
        assert!(
            wait[b].0 + wait[b].1 <= step[b].0 + 1.0,
            "{wait:?} {step:?}"
        );
        if b + 1 < nb {
            assert!(step[b].0 + step[b].1 <= step[b + 1].0 + 1.0, "{step:?}");
        }
    }
    let naive_px = train[nb - 1].0 + train[nb - 1].1 - load[0].0;
    let pipe_px = step[nb - 1].0 + step[nb - 1].1 - load[0].0;
    let (naive_s, pipe_s) = (
        o["naive_s"].as_f64().expect("naive_s"),
        o["pipelined_s"].as_f64().expect("pipelined_s"),
    );
    // The drawn lengths keep the ratio of the measured times: the naive run ends with its
    // last step, the pipelined one a little after (its epoch closes).
    let ratio = (pipe_px / naive_px) / (pipe_s / naive_s);
    assert!(
        (0.5..1.05).contains(&ratio),
        "{pipe_px}/{naive_px} px vs {pipe_s}/{naive_s} s"
    );
}

#[test]
fn bench_pipeline_plot_draws_a_point_per_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plot = dir.path().join("pipeline.svg");
    let p = stoker(&[
        "bench",
        "pipeline",
        "--epochs",
        "2",
        "--size",
        "32",
        "--batch",
        "4",
        "--plot",
        plot.to_str().expect("path"),
    ]);
    let r = &p["results"][0];
    let waits = r["batch_waits"].as_array().expect("batch_waits");
    // 6 samples in batches of 4: two batches an epoch.
    assert_eq!(waits.len(), 4, "{r}");
    let at: Vec<f64> = waits
        .iter()
        .map(|w| w["at_s"].as_f64().expect("at_s"))
        .collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
    assert!(waits.iter().all(|w| w["wait_s"]
        .as_f64()
        .is_some_and(|s| (0.0..=at[3]).contains(&s))));
    let svg = read_svg(&plot);
    let points: Vec<_> = svg_elements(&svg, "circle")
        .into_iter()
        .filter(|c| c.get("fill") == Some(&PLOT_COLOURS[0]))
        .collect();
    assert_eq!(points.len(), waits.len());
    // Later batches are further right.
    let cx: Vec<f64> = points
        .iter()
        .map(|c| c["cx"].parse().expect("cx"))
        .collect();
    assert!(cx.windows(2).all(|w| w[0] <= w[1]), "{cx:?}");
    assert!(svg_texts(&svg).contains(&"cpu"), "no legend entry for cpu");
}

#[test]
fn bench_decode_plot_draws_a_bar_per_backend_and_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plot = dir.path().join("decode.svg");
    let d = stoker(&[
        "bench",
        "decode",
        "--backend",
        "cpu,cuda",
        "--repeat",
        "1",
        "--plot",
        plot.to_str().expect("path"),
    ]);
    let svg = read_svg(&plot);
    let texts = svg_texts(&svg);
    let results = d["results"].as_array().expect("results");
    let mut expected = [0usize; 3];
    for r in results {
        let backend = r["backend"].as_str().expect("backend");
        if r.get("error").is_some() {
            let label = format!("{backend} (unavailable)");
            assert!(
                texts.contains(&label.as_str()),
                "{label:?} not in {texts:?}"
            );
            continue;
        }
        let v = format!("{:.1}", r["images_per_s"].as_f64().expect("images/s"));
        assert!(texts.contains(&v.as_str()), "{v} not in {texts:?}");
        match r.get("host_images_per_s").and_then(Value::as_f64) {
            Some(h) => {
                expected[1] += 1;
                expected[2] += 1;
                let h = format!("{h:.1}");
                assert!(texts.contains(&h.as_str()), "{h} not in {texts:?}");
            }
            None => expected[0] += 1,
        }
    }
    assert!(expected[0] >= 1, "the CPU backend ran: {d}");
    for (k, &want) in expected.iter().enumerate() {
        assert_eq!(
            bars_of(&svg, PLOT_COLOURS[k]).len(),
            want,
            "bars of kind {k}"
        );
    }
}

#[test]
fn bench_plot_refuses_other_formats() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (cmd, ext) in [("overlap", "png"), ("pipeline", "pdf"), ("decode", "")] {
        let plot = dir.path().join(format!("plot.{ext}"));
        let out = Command::new(env!("CARGO_BIN_EXE_stoker"))
            .args(["bench", cmd, "--plot", plot.to_str().expect("path")])
            .output()
            .expect("run stoker");
        assert!(
            !out.status.success(),
            "bench {cmd} --plot {plot:?} succeeded"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(".svg"), "{err}");
        assert!(!plot.exists());
    }
}

#[test]
fn bench_plot_says_which_file_it_cannot_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A folder where the file should go.
    let plot = dir.path().join("taken.svg");
    std::fs::create_dir(&plot).expect("mkdir");
    let out = Command::new(env!("CARGO_BIN_EXE_stoker"))
        .args([
            "bench",
            "overlap",
            "--n",
            "2",
            "--batch",
            "2",
            "--load-ms",
            "1",
        ])
        .args(["--step-ms", "1", "--repeat", "1", "--plot"])
        .arg(&plot)
        .output()
        .expect("run stoker");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write the plot") && err.contains("taken.svg"),
        "{err}"
    );
}

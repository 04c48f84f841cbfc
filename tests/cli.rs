//! The command-line tool: every subcommand runs and its `--json` output carries the
//! fields that DESIGN.md lists (scripts rely on the names); a command that did not do
//! what was asked exits with its cause's code and says why in a JSON error object.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// What a run of `stoker ... --json` gave: the exit status, stdout as JSON, stderr.
struct Run {
    code: i32,
    json: Value,
    stderr: String,
}

/// Runs `stoker args.. --json` with `env` set (`None`: removed) and parses stdout, which
/// must be one JSON object whatever the status.
fn run(args: &[&str], env: &[(&str, Option<&str>)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stoker"));
    cmd.args(args).arg("--json");
    // The shard comes from the flags or the environment: none unless a test sets it.
    for k in ["RANK", "WORLD_SIZE"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().expect("run stoker");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stoker {args:?}: stdout is not one JSON object ({e}): {:?}; stderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    Run {
        code: out.status.code().unwrap_or(-1),
        json,
        stderr,
    }
}

/// `stoker args.. --json`, which must succeed.
fn stoker(args: &[&str]) -> Value {
    let r = run(args, &[]);
    assert_eq!(r.code, 0, "stoker {args:?} failed: {}", r.stderr);
    assert!(r.json.get("error").is_none(), "{}", r.json);
    r.json
}

/// `stoker args.. --json`, which must exit with `code` and an error object of `kind`
/// (with that code) on stdout, and say `error: ...` on stderr. Returns the JSON.
fn failing(args: &[&str], env: &[(&str, Option<&str>)], code: i32, kind: &str) -> Value {
    let r = run(args, env);
    assert_eq!(r.code, code, "stoker {args:?}: {} / {}", r.json, r.stderr);
    let e = &r.json["error"];
    assert_eq!(e["kind"], kind, "{}", r.json);
    assert_eq!(e["code"], code, "{}", r.json);
    let message = e["message"].as_str().expect("message");
    assert!(!message.is_empty());
    assert!(
        r.stderr.contains(&format!("error: {message}")),
        "stderr lacks the message: {}",
        r.stderr
    );
    r.json
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `bench pipeline` of the bundled samples on `backend` in batches of 64 images of
/// 16384 x 16384 (206 GB a batch), which must be refused as a usage error. Returns the JSON.
fn batch_too_large(backend: &str) -> Value {
    let samples = common::data_dir().join("samples");
    failing(
        &[
            "bench",
            "pipeline",
            "--images",
            path(&samples),
            "--size",
            "16384",
            "--batch",
            "64",
            "--epochs",
            "1",
            "--backend",
            backend,
        ],
        &[],
        2,
        "usage",
    )
}

/// `bench pipeline` of the bundled samples for `epochs` epochs of batches of 4 images of
/// 32 x 32, then `extra`.
fn pipeline_args<'a>(epochs: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "bench", "pipeline", "--epochs", epochs, "--size", "32", "--batch", "4",
    ];
    args.extend_from_slice(extra);
    args
}

/// `decode inputs.. --backend backend --out out`.
fn decode_args<'a>(inputs: &[&'a Path], backend: &'a str, out: &'a Path) -> Vec<&'a str> {
    let mut args = vec!["decode"];
    args.extend(inputs.iter().map(|p| path(p)));
    args.extend(["--backend", backend, "--out", path(out)]);
    args
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

    let d = stoker(&["bench", "decode", "--backend", "cpu", "--repeat", "1"]);
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

    let p = stoker(&pipeline_args("2", &[]));
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
            "rss_bytes_per_epoch",
            "peak_rss_bytes",
        ],
    );
    assert_eq!(r["delivered"], 12);
    // Batches mixed (MixUp needs floats: asked of u8 it is a usage error naming the flags).
    let m = stoker(&pipeline_args("1", &["--mixup", "0.2", "--cutmix", "1"]));
    assert_eq!(m["results"][0]["delivered"], 6);
    let e = failing(
        &[
            "bench", "pipeline", "--epochs", "1", "--size", "32", "--dtype", "u8", "--mixup", "0.2",
        ],
        &[],
        2,
        "usage",
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--mixup")),
        "{e}"
    );
    // Resident memory after each epoch, never above the peak (Linux says both).
    if cfg!(target_os = "linux") {
        let rss: Vec<u64> = r["rss_bytes_per_epoch"]
            .as_array()
            .expect("rss")
            .iter()
            .filter_map(|v| v.as_u64())
            .collect();
        let peak = r["peak_rss_bytes"].as_u64().expect("peak");
        assert_eq!(rss.len(), 2, "{r}");
        assert!(
            rss.iter().all(|&b| b > 1 << 20 && b <= peak),
            "{rss:?} {peak}"
        );
    }
}

#[test]
fn decode_inspect_split_and_render_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = common::data_dir();
    let good = data.join("jpeg/ljt_testorig.jpg");
    let bad = data.join("jpeg/jd_crash_missing-sof.jpg");
    let out = dir.path().join("decoded");
    let d = stoker(&decode_args(&[&good], "cpu", &out));
    has(&d["decoded"][0], &["file", "out", "width", "height"]);
    assert!(std::path::Path::new(d["decoded"][0]["out"].as_str().expect("out")).is_file());
    // One of two failed: the report lists both, the status says partly done.
    let d = failing(&decode_args(&[&good, &bad], "cpu", &out), &[], 1, "partial");
    has(&d["decoded"][0], &["file", "out", "width", "height"]);
    has(&d["errors"][0], &["file", "reason"]);

    let i = stoker(&["inspect", path(&data.join("samples"))]);
    has(&i, &["samples", "labels", "by_kind", "errors"]);
    assert_eq!(i["samples"], 6);
    let i = failing(&["inspect", path(&data.join("jpeg"))], &[], 1, "partial");
    has(&i, &["samples", "labels", "by_kind", "errors"]);
    assert!(!i["errors"].as_array().expect("errors").is_empty());

    let manifest = dir.path().join("split.json");
    let s = stoker(&[
        "split",
        path(&data.join("samples")),
        "--val",
        "0.34",
        "--seed",
        "3",
        "--out",
        path(&manifest),
    ]);
    has(&s, &["train", "val", "groups", "disjoint"]);
    assert_eq!(s["disjoint"], true);
    let c = stoker(&[
        "split",
        "--check",
        path(&manifest),
        "--images",
        path(&data.join("samples")),
    ]);
    assert_eq!(c["disjoint"], true);

    let png = dir.path().join("sheet.png");
    let r = stoker(&["render", "--n", "2", "--size", "64", "--out", path(&png)]);
    has(&r, &["out", "samples"]);
    assert!(png.is_file());
}

/// An 8-bit RGB PNG file's size and pixels.
fn read_rgb_png(p: &Path) -> (usize, usize, Vec<u8>) {
    let bytes = std::fs::read(p).expect("png");
    let mut dec = png::Decoder::new(std::io::Cursor::new(bytes));
    dec.set_transformations(png::Transformations::IDENTITY);
    let mut r = dec.read_info().expect("png header");
    let mut buf = vec![0u8; r.output_buffer_size().expect("size")];
    let f = r.next_frame(&mut buf).expect("png pixels");
    assert_eq!(f.color_type, png::ColorType::Rgb);
    buf.truncate(f.buffer_size());
    (f.width as usize, f.height as usize, buf)
}

/// `render --manifest`: each sample's boxes and keypoints drawn on the original and, where
/// the batch moved them, on the augmented image, in their class's colour; a legend under
/// the rows with each class's swatch; the report lists what was drawn.
#[test]
fn render_draws_boxes_keypoints_and_a_legend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, h) = (80u32, 60u32);
    let grey = vec![128u8; (3 * w * h) as usize];
    let mut lines = String::new();
    for (name, class) in [("a.png", 3), ("b.png", 5)] {
        common::write(dir.path(), name, &common::png_rgb(w, h, &grey));
        // Boxes over most of the image, so any crop keeps them.
        lines += &format!(
            "{{\"path\": \"{name}\", \"boxes\": [[6, 5, 74, 55, {class}]], \"keypoints\": [[40, 30]]}}\n"
        );
    }
    let manifest = common::write(dir.path(), "m.jsonl", lines.as_bytes());
    let png = dir.path().join("sheet.png");
    let size = 64usize;
    let r = stoker(&[
        "render",
        "--manifest",
        path(&manifest),
        "--backend",
        "cpu",
        "--n",
        "2",
        "--size",
        "64",
        "--seed",
        "2",
        "--out",
        path(&png),
    ]);
    let legend = r["legend"].as_array().expect("legend");
    let colour = |class: u64| -> [u8; 3] {
        let e = legend
            .iter()
            .find(|e| e["id"] == class)
            .unwrap_or_else(|| panic!("class {class} in the legend: {r}"));
        let hex = e["colour"].as_str().expect("colour");
        [1, 3, 5].map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
    };
    assert_eq!(legend.len(), 2, "{r}");
    let (sw, sh, px) = read_rgb_png(&png);
    let at = |x: usize, y: usize| -> [u8; 3] {
        let i = 3 * (y * sw + x);
        [px[i], px[i + 1], px[i + 2]]
    };
    let gap = 4;
    let rows_h = 2 * size + 3 * gap;
    assert_eq!((sw, sh), (2 * size + 3 * gap, rows_h + 12 + gap));
    let mut drawn = 0;
    for (i, row) in r["rows"].as_array().expect("rows").iter().enumerate() {
        let y_row = gap + i * (size + gap);
        let class = if row["path"] == "a.png" { 3 } else { 5 };
        // The original, fitted to 64x48 and centred: its box's top-left corner.
        let s = size as f64 / f64::from(w);
        let (ox, oy) = (gap, y_row + (size - 48) / 2);
        let corner = |v: f64| (v * s).round() as usize;
        assert_eq!(
            at(ox + corner(6.0), oy + corner(5.0)),
            colour(class),
            "{row}"
        );
        // The augmented image: the moved box's corners, and the keypoint's centre.
        for b in row["boxes"].as_array().expect("boxes") {
            let v: Vec<f64> = (0..5).map(|k| b[k].as_f64().expect("number")).collect();
            assert_eq!(v[4] as u64, class);
            let (x0, y0) = (v[0].round() as usize, v[1].round() as usize);
            let (x1, y1) = (v[2].round() as usize - 1, v[3].round() as usize - 1);
            let ax = 2 * gap + size;
            for (x, y) in [(x0, y0), (x1, y1), (x0, y1), (x1, y0)] {
                assert_eq!(at(ax + x, y_row + y), colour(class), "{row} at ({x}, {y})");
            }
            drawn += 1;
        }
        for k in row["keypoints"].as_array().expect("keypoints") {
            let (x, y) = (k[0].as_f64().expect("x"), k[1].as_f64().expect("y"));
            let (x, y) = (x.floor() as usize, y.floor() as usize);
            assert_eq!(at(2 * gap + size + x, y_row + y), colour(class), "{row}");
        }
    }
    assert_eq!(drawn, 2, "{r}");
    // The legend's swatches, side by side on one line under the rows.
    let mut xs = Vec::new();
    for e in legend {
        let c = colour(e["id"].as_u64().expect("id"));
        let (x, y) = (
            e["at"][0].as_u64().expect("x"),
            e["at"][1].as_u64().expect("y"),
        );
        assert_eq!(y as usize, rows_h, "{e}");
        assert_eq!(at(x as usize + 3, y as usize + 3), c);
        xs.push(x);
    }
    assert!(xs[0] < xs[1], "{xs:?}");
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
    let paths = &results[1]["paths"];
    let sum: u64 = [
        "gpu_entropy",
        "gpu_sync_entropy",
        "host_entropy",
        "hardware",
        "cpu",
    ]
    .iter()
    .map(|k| paths[k].as_u64().expect("a path count"))
    .sum();
    assert_eq!(sum, 6, "{paths}");
    // The bundled JPEGs have no restart markers: the wgpu backend decodes the baseline
    // ones whole on the device, by the self-synchronising decode.
    assert!(paths["gpu_sync_entropy"].as_u64() > Some(0), "{paths}");
    assert!(results[1]["host_us_per_image"]
        .as_f64()
        .is_some_and(|us| us > 0.0));

    // The bundled samples through the wgpu pipeline, `epochs` epochs of batches of 4.
    let wgpu_pipeline = |epochs: &str, extra: &[&str]| -> Value {
        let mut args = pipeline_args(epochs, &["--backend", "wgpu"]);
        args.extend_from_slice(extra);
        let p = stoker(&args);
        let r = p["results"][0].clone();
        assert!(r.get("error").is_none(), "{r}");
        r
    };
    let r = wgpu_pipeline("1", &[]);
    assert_eq!(r["delivered"], 6);
    assert_eq!(r["stats"]["gpu_decoded"], 6, "{r}");
    // The hybrid path is host entropy decoding only: the sync-decoded files are not on it.
    assert!(r["stats"]["gpu_sync_entropy"].as_u64() > Some(0), "{r}");
    assert_eq!(r["hybrid_samples"], r["stats"]["host_entropy"], "{r}");
    // With the device cache, the epochs after the first are served from device memory.
    let r = wgpu_pipeline("3", &["--device-cache-mb", "64"]);
    assert_eq!(r["delivered"], 18, "{r}");
    assert_eq!(r["stats"]["device_cache_hits"], 12, "{r}");
    assert_eq!(r["stats"]["cpu_fallbacks"], 0, "{r}");
    // The affine warp on: still every sample on the device.
    let r = wgpu_pipeline("1", &["--affine"]);
    assert_eq!(r["delivered"], 6, "{r}");
    assert_eq!(r["stats"]["gpu_decoded"], 6, "{r}");
    // The blur and a policy (whole-image rounds of the fused pass): on the device too.
    let r = wgpu_pipeline("1", &["--blur", "--policy", "rand-augment"]);
    assert_eq!(r["delivered"], 6, "{r}");
    assert_eq!(r["stats"]["gpu_decoded"], 6, "{r}");
    assert_eq!(r["stats"]["cpu_fallbacks"], 0, "{r}");

    // The samples transcoded with restart markers: every one Huffman-decoded on the
    // device, by the decode benchmark and through the pipeline, none falling back.
    let rst = tempfile::tempdir().expect("tempdir");
    let samples = common::data_dir().join("samples");
    let out = rst.path().join("samples");
    let c = stoker(&[
        "convert",
        path(&samples),
        "--to",
        "folder",
        "--out",
        path(&out),
    ]);
    assert_eq!(c["jpegs"]["transcoded"], 6, "{c}");
    let out_s = path(&out);
    let bench_decode = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "decode",
            "--backend",
            "wgpu",
            "--repeat",
            "1",
            "--images",
            out_s,
        ];
        args.extend_from_slice(extra);
        stoker(&args)
    };
    let d = bench_decode(&[]);
    let r = &d["results"][0];
    assert_eq!(r["paths"]["gpu_entropy"], 6, "{r}");
    assert_eq!(r["fallbacks"], 0, "{r}");
    let h = bench_decode(&["--entropy", "host"]);
    assert_eq!(h["results"][0]["paths"]["host_entropy"], 6, "{h}");
    // The entropy-coded bytes upload smaller than their coefficients, at one status
    // read-back per batch.
    let bytes = |j: &serde_json::Value| j["upload_bytes_per_image"].as_f64().expect("bytes");
    assert!(bytes(r) * 3.0 < bytes(&h["results"][0]), "{r} {h}");
    assert!(
        r["plan"]["entropy_checks"].as_u64().is_some_and(|n| n >= 1),
        "{r}"
    );
    assert_eq!(h["results"][0]["plan"]["entropy_checks"], 0, "{h}");
    // Nearly every byte uploaded (the entropy-coded bytes, the packed coefficients) is
    // copied once, straight from the buffer the host thread filled; the planner writes
    // the records and tables.
    for j in [r, &h["results"][0]] {
        let plan = &j["plan"];
        let (payload, input) = (
            plan["payload_bytes"].as_f64().expect("payload"),
            plan["decode_input_bytes"].as_f64().expect("input"),
        );
        assert!(payload > 0.9 * input && payload < input, "{plan}");
    }
    let p = stoker(&pipeline_args(
        "2",
        &["--backend", "wgpu", "--images", out_s],
    ));
    let r = &p["results"][0];
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(r["delivered"], 12, "{r}");
    assert_eq!(r["stats"]["gpu_entropy"], 12, "{r}");
    assert_eq!(r["stats"]["cpu_fallbacks"], 0, "{r}");

    let dir = tempfile::tempdir().expect("tempdir");
    let good = common::data_dir().join("samples/photo/sklearn_flower.jpg");
    let mut written = Vec::new();
    for backend in ["cpu", "wgpu"] {
        let out = dir.path().join(backend);
        let d = stoker(&decode_args(&[&good], backend, &out));
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
    let samples = path(&samples);
    for (to, ext) in [("tfrecord", "tfrecord"), ("tar", "tar")] {
        let out = dir.path().join(to);
        let out_s = path(&out);
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

/// `decode` with nothing decodable, `inspect` of a missing path or of a folder of
/// unreadable files: nothing could be read, exit 3, with the report (or the error alone)
/// on stdout.
#[test]
fn nothing_readable_exits_3() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("decoded");
    let missing = dir.path().join("nope.jpg");
    let d = failing(
        &["decode", path(&missing), "--out", path(&out)],
        &[],
        3,
        "no_input",
    );
    assert_eq!(d["decoded"].as_array().map(Vec::len), Some(0), "{d}");
    assert_eq!(d["errors"][0]["file"], path(&missing), "{d}");

    let e = failing(&["inspect", path(&missing)], &[], 3, "no_input");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nope.jpg")),
        "{e}"
    );

    // Random bytes named like JPEGs: every file is listed as unreadable.
    let bad = dir.path().join("bad");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(3, |d| d.as_nanos() as u64);
    eprintln!("seed {seed:#x}");
    let mut rng = common::TestRng(seed);
    for k in 0..3 {
        let bytes: Vec<u8> = (0..64 + rng.below(200))
            .map(|_| rng.next_u64() as u8)
            .collect();
        common::write(&bad, &format!("x{k}.jpg"), &bytes);
    }
    let i = failing(&["inspect", path(&bad)], &[], 3, "no_input");
    assert_eq!(i["samples"], 3, "{i}");
    assert_eq!(i["errors"].as_array().map(Vec::len), Some(3), "{i}");
}

/// A backend that is not here: exit 4, the report still says why.
#[test]
fn an_unavailable_backend_exits_4() {
    if stoker::backend::select(stoker::BackendKind::Cuda, 1).is_ok() {
        eprintln!("skipped: CUDA is available here");
        return;
    }
    let p = failing(
        &[
            "bench",
            "pipeline",
            "--backend",
            "cuda",
            "--epochs",
            "1",
            "--size",
            "32",
        ],
        &[],
        4,
        "backend_unavailable",
    );
    assert_eq!(p["results"][0]["backend"], "cuda", "{p}");
    assert!(p["results"][0]["error"].is_string(), "{p}");
    // Next to a backend that ran, the report has both and the status says one is missing.
    let d = failing(
        &["bench", "decode", "--backend", "cpu,cuda", "--repeat", "1"],
        &[],
        4,
        "backend_unavailable",
    );
    assert_eq!(d["results"][0]["errors"], 0, "{d}");
    assert!(d["results"][1]["error"].is_string(), "{d}");
    let dir = tempfile::tempdir().expect("tempdir");
    let good = common::data_dir().join("jpeg/ljt_testorig.jpg");
    failing(
        &decode_args(&[&good], "cuda", dir.path()),
        &[],
        4,
        "backend_unavailable",
    );
}

/// An output in a folder that does not exist: refused before any work, the missing
/// folder named, nothing created (render and split; decode makes its folder, not the
/// ones above it).
#[test]
fn a_missing_output_folder_exits_5_and_is_not_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no/such");
    let png = missing.join("sheet.png");
    let e = failing(
        &["render", "--n", "1", "--size", "32", "--out", path(&png)],
        &[],
        5,
        "output",
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(path(&missing))),
        "the message names the missing folder: {e}"
    );
    assert!(!dir.path().join("no").exists(), "a folder was created");

    let samples = common::data_dir().join("samples");
    let manifest = missing.join("split.json");
    failing(
        &[
            "split",
            path(&samples),
            "--val",
            "0.3",
            "--out",
            path(&manifest),
        ],
        &[],
        5,
        "output",
    );
    let good = common::data_dir().join("jpeg/ljt_testorig.jpg");
    failing(
        &["decode", path(&good), "--out", path(&missing)],
        &[],
        5,
        "output",
    );
    assert!(!dir.path().join("no").exists(), "a folder was created");
}

/// A usage error with `--json` is an error object on stdout too, exit 2; `--help` lists
/// every code.
#[test]
fn usage_errors_exit_2_and_help_lists_the_codes() {
    let e = failing(&["decode", "--backend", "nope"], &[], 2, "usage");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nope")),
        "{e}"
    );
    // Batches that cannot fit in memory: refused before anything is allocated (this
    // aborted, allocating 206 GB).
    let e = batch_too_large("cpu");
    let m = e["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("memory") && m.contains("bytes)"), "{e}");
    // A share outside 0..=1 names the flag that set it.
    let args = pipeline_args("1", &["--backend", "cpu", "--hardware-share", "1.5"]);
    let e = failing(&args, &[], 2, "usage");
    let m = e["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("--hardware-share"), "{e}");
    let r = stoker(&pipeline_args(
        "1",
        &["--backend", "cpu", "--hardware-share", "0.25"],
    ));
    assert_eq!(r["results"][0]["hardware_share"], 0.25, "{r}");
    let out = Command::new(env!("CARGO_BIN_EXE_stoker"))
        .arg("--help")
        .output()
        .expect("run stoker");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for code in 0..=6 {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{code}  "))),
            "code {code} missing in --help: {help}"
        );
    }
}

/// A batch too large to hold is the same mistake on every backend: a usage error (exit 2)
/// naming the flags that set it, whether the CPU refuses it against host memory or a
/// device backend against the device (wgpu's largest buffer, CUDA's memory). wgpu's
/// refusal exited 6, as if the device had failed.
#[test]
fn a_batch_too_large_is_a_usage_error_on_every_backend() {
    #[allow(unused_mut)]
    let mut backends = vec!["cpu"];
    #[cfg(feature = "wgpu")]
    if common::wgpu_context().is_some() {
        backends.push("wgpu");
    }
    #[cfg(feature = "cuda")]
    if common::cuda_device().is_some() {
        backends.push("cuda");
    }
    for backend in backends {
        let e = batch_too_large(backend);
        let m = e["error"]["message"].as_str().unwrap_or_default();
        // 64 samples of 16384 x 16384 x 3 f32: 206158430208 bytes a batch.
        assert!(
            m.contains("--batch") && m.contains("bytes"),
            "{backend}: {e}"
        );
    }
}

/// `--images` (and `inspect`'s PATH) given one image: a one-image set, whether its name
/// says it is an image or only its first bytes do. It was read as a file list ("invalid
/// utf-8 sequence of 1 bytes from index 0"). A file that is neither an image nor text is
/// refused naming it and saying it is not UTF-8 text.
#[test]
fn one_image_is_a_one_image_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jpg = common::data_dir().join("samples/photo/skimage_coffee.jpg");
    let bytes = std::fs::read(&jpg).expect("sample");
    let named = common::write(dir.path(), "coffee.jpg", &bytes);
    let bare = common::write(dir.path(), "coffee", &bytes);
    for img in [&named, &bare, &jpg] {
        let r = stoker(&pipeline_args(
            "1",
            &["--images", path(img), "--backend", "cpu"],
        ));
        assert_eq!(r["results"][0]["samples"], 1, "{}: {r}", img.display());
        assert_eq!(r["results"][0]["delivered"], 1, "{}: {r}", img.display());
        let i = stoker(&["inspect", path(img)]);
        assert_eq!(i["samples"], 1, "{}: {i}", img.display());
        assert_eq!(i["by_kind"].as_object().map(|o| o.len()), Some(1), "{i}");
    }
    // Bytes that are no image and no text (a JPEG's without its signature).
    let junk = common::write(dir.path(), "data.bin", &bytes[2..]);
    let e = failing(&["inspect", path(&junk)], &[], 3, "no_input");
    let m = e["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains(path(&junk)) && m.contains("UTF-8"), "{e}");
}

/// The shard of `bench pipeline`: from the flags, else from `RANK`/`WORLD_SIZE`; the
/// report's `batches` is the library's `Pipeline::num_batches` for that rank.
#[test]
fn bench_pipeline_reports_the_shard_of_a_rank() {
    let samples = common::data_dir().join("samples");
    let batches = |rank: usize, world: usize| {
        let data = stoker::Dataset::image_folder(&samples).expect("samples");
        stoker::Pipeline::builder(data.all())
            .augment(stoker::Augment::validation(32))
            .batch_size(4)
            .shard(rank, world)
            .build()
            .expect("pipeline")
            .num_batches()
    };
    let args = pipeline_args("1", &[]);
    let mut delivered = 0;
    for rank in 0..2usize {
        let r = rank.to_string();
        let mut a = args.to_vec();
        a.extend(["--rank", &r, "--world-size", "2"]);
        let p = stoker(&a);
        let res = &p["results"][0];
        assert_eq!(res["rank"], rank, "{p}");
        assert_eq!(res["world_size"], 2, "{p}");
        assert_eq!(res["batches"], batches(rank, 2), "{p}");
        assert_eq!(
            (p["rank"].clone(), p["world_size"].clone()),
            (rank.into(), 2.into())
        );
        let d = res["delivered"].as_u64().expect("delivered");
        assert!(d <= 4 * batches(rank, 2) as u64, "{p}");
        delivered += d;
    }
    // The two ranks together read at least the whole dataset once.
    assert!(delivered >= 6, "{delivered}");

    // From the environment, as torchrun sets it.
    let env = [("RANK", Some("2")), ("WORLD_SIZE", Some("3"))];
    let r = run(&args, &env);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let res = &r.json["results"][0];
    assert_eq!(
        (res["rank"].clone(), res["world_size"].clone()),
        (2.into(), 3.into())
    );
    assert_eq!(res["batches"], batches(2, 3), "{}", r.json);
    // The flags win over the environment.
    let mut a = args.to_vec();
    a.extend(["--rank", "0", "--world-size", "1"]);
    let r = run(&a, &env);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json["results"][0]["world_size"], 1, "{}", r.json);

    // A malformed or impossible shard is a usage error naming the variable.
    for (rank, world) in [("x", "2"), ("2", "2"), ("1", "")] {
        let e = failing(
            &args,
            &[("RANK", Some(rank)), ("WORLD_SIZE", Some(world))],
            2,
            "usage",
        );
        assert!(
            e["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("RANK") || m.contains("WORLD_SIZE")),
            "{e}"
        );
    }
    let mut a = args.to_vec();
    a.extend(["--rank", "2", "--world-size", "2"]);
    failing(&a, &[], 2, "usage");
}

/// On a headless machine (no `XDG_RUNTIME_DIR`) probing for a GPU prints nothing on the
/// terminal, and the wgpu adapter (lavapipe in CI) is still found.
#[test]
fn the_device_probe_is_quiet_without_a_session() {
    let headless = [
        ("XDG_RUNTIME_DIR", None),
        ("NODEVICE_SELECT", None),
        ("STOKER_LOG", None),
    ];
    let args = pipeline_args("1", &[]);
    let mut auto = args.to_vec();
    auto.extend(["--backend", "auto"]);
    let r = run(&auto, &headless);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stderr.contains("XDG_RUNTIME_DIR"),
        "the probe wrote to the terminal: {}",
        r.stderr
    );
    #[cfg(feature = "wgpu")]
    if common::wgpu_context().is_some() {
        let mut wgpu = args.to_vec();
        wgpu.extend(["--backend", "wgpu"]);
        let r = run(&wgpu, &headless);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(!r.stderr.contains("XDG_RUNTIME_DIR"), "{}", r.stderr);
        assert_eq!(r.json["results"][0]["backend"], "wgpu", "{}", r.json);
        assert_eq!(r.json["results"][0]["delivered"], 6, "{}", r.json);
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
    // An output's folder must exist (it is not created).
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
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
        path(&plot),
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
    let p = stoker(&pipeline_args("2", &["--plot", path(&plot)]));
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
    let r = run(
        &[
            "bench",
            "decode",
            "--backend",
            "cpu,cuda",
            "--repeat",
            "1",
            "--plot",
            path(&plot),
        ],
        &[],
    );
    let d = r.json;
    let svg = read_svg(&plot);
    let texts = svg_texts(&svg);
    let results = d["results"].as_array().expect("results");
    // A backend that is not here is drawn as such, and the status says it is missing.
    let missing = results.iter().any(|r| r.get("error").is_some());
    assert_eq!(r.code, if missing { 4 } else { 0 }, "{d}: {}", r.stderr);
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
            .args(["bench", cmd, "--plot", path(&plot)])
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
    // An output that could not be written.
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write the plot") && err.contains("taken.svg"),
        "{err}"
    );
}

/// The crop index, in the binary (which links the libjpeg `mozjpeg-sys` vendors, not the
/// libjpeg-turbo 3 the test binaries link for their encoder): a pipeline whose later
/// crops resume from each JPEG's row index, or decode a progressive JPEG's baseline copy,
/// delivers the epochs a pipeline without them delivers, bit for bit (the epoch digests),
/// on fresh random JPEGs of every chroma subsampling, sequential and progressive; and it
/// did keep both kinds (a folder of progressive files alone has no row index).
#[test]
fn crops_decoded_with_the_crop_index_are_the_crops_decoded_without() {
    use turbojpeg::Subsamp::*;
    let seed = common::fresh_seed("crop index");
    let mut rng = common::TestRng(seed);
    let (mixed, progressive) = (
        tempfile::tempdir().expect("temp dir"),
        tempfile::tempdir().expect("temp dir"),
    );
    for i in 0..30 {
        let (w, h) = (40 + rng.below(500) as u32, 40 + rng.below(400) as u32);
        let sub = [None, Sub2x1, Sub2x2, Sub1x2, Sub4x1, Gray][rng.below(6) as usize];
        let rgb = common::random_rgb(&mut rng, w, h);
        let image = turbojpeg::Image {
            pixels: &rgb[..],
            width: w as usize,
            pitch: 3 * w as usize,
            height: h as usize,
            format: turbojpeg::PixelFormat::RGB,
        };
        let mut c = turbojpeg::Compressor::new().expect("compressor");
        c.set_quality(40 + rng.below(60) as i32).expect("quality");
        c.set_subsamp(sub).expect("subsampling");
        let is_progressive = i >= 24 || rng.below(3) == 0;
        c.set_progressive(is_progressive).expect("progressive");
        let jpeg = c.compress_to_vec(image).expect("encode");
        let dir = if i >= 24 { &progressive } else { &mixed };
        common::write(dir.path(), &format!("c{}/{i}.jpg", i % 3), &jpeg);
    }
    let run = |dir: &Path, extra: &[&str]| {
        let mut args = vec![
            "bench",
            "pipeline",
            "--images",
            path(dir),
            "--epochs",
            "3",
            "--size",
            "48",
            "--batch",
            "4",
            "--digest",
        ];
        args.extend_from_slice(extra);
        stoker(&args)["results"][0].clone()
    };
    for (dir, n) in [(mixed.path(), 72), (progressive.path(), 18)] {
        let (indexed, plain) = (run(dir, &[]), run(dir, &["--crop-index-mb", "0"]));
        assert!(
            indexed["crop_index_bytes"].as_u64() > Some(0),
            "seed {seed}: {indexed}"
        );
        assert_eq!(plain["crop_index_bytes"], 0, "seed {seed}");
        assert_eq!(indexed["delivered"], n, "seed {seed}");
        assert_eq!(
            indexed["epoch_digests"], plain["epoch_digests"],
            "seed {seed}: the epochs differ"
        );
    }
}

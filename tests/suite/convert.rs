//! `stoker convert` keeps what a dataset is: a folder converted to TFRecord or tar shards
//! has the same samples (paths, ids), the same classes, the same saved split and the same
//! augmented batches as the folder; shards naming one path twice are refused; the class
//! list beside the shards is checked against the names the samples record.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::TestRng;
use stoker::source::shards::{classes_path, Converted, ShardFormat, ShardWriter};
use stoker::{Augment, BackendKind, DType, Dataset, Pipeline, Split, SplitSpec, Subset};

/// An image folder: classes `bird`, `cat` (with a nested folder and two real JPEGs),
/// `dog fish` (a space in the class name, dots in a file name) and `zebra` (no images: a
/// class all the same). Random PNGs of random sizes. Returns the number of images.
fn folder(dir: &Path, seed: u64) -> usize {
    let mut rng = TestRng(seed);
    let mut png = |rel: &str| {
        let (w, h) = (20 + rng.below(50) as u32, 20 + rng.below(50) as u32);
        let rgb = common::random_rgb(&mut rng, w, h);
        common::write(dir, rel, &common::png_rgb(w, h, &rgb));
    };
    let mut n = 0;
    for i in 0..4 {
        png(&format!("bird/b{i}.png"));
        n += 1;
    }
    for i in 0..3 {
        png(&format!("cat/indoor/c{i}.png"));
        n += 1;
    }
    for (name, src) in [
        ("cat/photo.jpg", "jpeg/ljt_testorig.jpg"),
        ("cat/gray.jpg", "jpeg/jd_moz_jpg-gray.jpg"),
    ] {
        let bytes = std::fs::read(common::data_dir().join(src)).expect("test JPEG");
        common::write(dir, name, &bytes);
        n += 1;
    }
    for i in 0..3 {
        png(&format!("dog fish/d.{i}.v2.png"));
        n += 1;
    }
    png("dog fish/last.png");
    n += 1;
    std::fs::create_dir_all(dir.join("zebra")).expect("mkdir");
    n
}

/// Converts the image folder `dir` to shards of `to` in `out` (`prefix`, `shard_bytes`),
/// as `stoker convert` does.
fn convert_with(dir: &Path, to: &str, out: &Path, prefix: &str, shard_bytes: u64) -> Converted {
    let format = match to {
        "tar" => ShardFormat::Tar,
        _ => ShardFormat::TfRecord,
    };
    let data = Dataset::image_folder(dir).expect("folder");
    let done = ShardWriter::new(format, out, prefix, shard_bytes)
        .expect("writer")
        .write_dataset(&data, |_| ())
        .expect("convert");
    assert!(done.unreadable.is_empty(), "{:?}", done.unreadable);
    assert_eq!(done.samples as usize, data.len());
    done
}

/// [`convert_with`] the default prefix, `shard`, and shards of 6 KiB.
fn convert(dir: &Path, to: &str, out: &Path) -> Converted {
    convert_with(dir, to, out, "shard", 6 << 10)
}

/// The shard dataset of `out`, in format `to`.
fn shards(to: &str, out: &Path) -> stoker::Result<Dataset> {
    let paths = [out.to_path_buf()];
    match to {
        "tar" => Dataset::tar(&paths),
        _ => Dataset::tfrecord(&paths),
    }
}

/// Every batch of epochs 0 and 1 of `subset`, with random augmentation, on the CPU: per
/// batch the ids, labels and pixel bytes.
type Batches = Vec<(Vec<u64>, Vec<i64>, Vec<u8>)>;

fn batches(subset: Subset, seed: u64) -> Batches {
    let augment = Augment::new()
        .random_resized_crop(24, (0.3, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .color_jitter(0.4, 0.4, 0.4)
        .dtype(DType::U8);
    assert!(augment.is_random());
    let pipe = Pipeline::builder(subset)
        .backend(BackendKind::Cpu)
        .augment(augment)
        .batch_size(3)
        .seed(seed)
        .build()
        .expect("pipeline");
    let mut out = Vec::new();
    for epoch in 0..2 {
        for b in pipe.epoch(epoch).expect("epoch") {
            let b = b.expect("batch");
            assert!(b.errors().is_empty(), "{:?}", b.errors());
            let pixels = b.images::<u8>().expect("u8 images").to_vec();
            out.push((b.ids().to_vec(), b.labels_i64(-1), pixels));
        }
    }
    out
}

#[test]
fn a_split_made_on_a_folder_loads_on_its_shards_with_the_same_classes_and_batches() {
    let seed = common::fresh_seed("folder and pipeline");
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("folder");
    let n = folder(&src, seed);
    let data = Dataset::image_folder(&src).expect("folder");
    assert_eq!(data.len(), n);
    let classes = data.classes().to_vec();
    assert_eq!(classes, ["bird", "cat", "dog fish", "zebra"]);
    let manifest = dir.path().join("split.json");
    let split = data
        .split(SplitSpec::fraction(0.3).seed(seed % 1000))
        .expect("split");
    split.save(&manifest).expect("save");
    let paths = |s: &Subset| {
        s.samples()
            .iter()
            .map(|x| (x.id, x.path.clone(), x.label))
            .collect::<Vec<_>>()
    };
    let (train, val) = (paths(&split.train()), paths(&split.val()));
    // (A split by hash may leave the small validation part empty; training is not.)
    assert!(!train.is_empty(), "{val:?}");
    let want = batches(split.train(), seed);
    let delivered: usize = want.iter().map(|b| b.0.len()).sum();
    assert_eq!(delivered, 2 * train.len(), "two epochs of the training set");
    assert!(want.iter().all(|b| b.2.len() == b.0.len() * 24 * 24 * 3));

    for to in ["tar", "tfrecord"] {
        let out = dir.path().join(to);
        let done = convert(&src, to, &out);
        assert!(done.shards.len() >= 2, "{to}: {:?}", done.shards);
        // The class list beside the shards.
        let side = out.join("shard.classes.json");
        assert_eq!(done.classes.as_ref(), Some(&side));
        assert_eq!(classes_path(&done.shards[0]), Some(side.clone()));
        let list: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&side).expect("class list")).expect("json");
        assert_eq!(list["classes"], serde_json::json!(classes), "{to}");

        let data = shards(to, &out).expect("listing");
        let listed = data.classes().to_vec();
        let loaded = Split::load(&manifest, data).expect("the folder's split loads on the shards");
        assert_eq!(listed, classes, "{to}");
        assert_eq!(paths(&loaded.train()), train, "{to}");
        assert_eq!(paths(&loaded.val()), val, "{to}");
        assert_eq!(loaded.train().classes(), classes, "{to}");
        // The same batches: ids, labels, and pixels through random augmentation.
        let got = batches(loaded.train(), seed);
        assert_eq!(got.len(), want.len(), "{to}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.0, w.0, "{to}: ids of batch {i}");
            assert_eq!(g.1, w.1, "{to}: labels of batch {i}");
            assert!(g.2 == w.2, "{to}: pixels of batch {i} differ");
        }
        // Listed again from the indexes: the same.
        let again = shards(to, &out).expect("listing from the indexes");
        assert_eq!(again.classes(), classes);
        let loaded = Split::load(&manifest, again).expect("loads again");
        assert_eq!(paths(&loaded.val()), val, "{to}");
    }
}

/// An image folder of `paths` (random PNGs; the first folder of each is its class).
fn folder_of(dir: &Path, paths: &[&str], rng: &mut TestRng) {
    for p in paths {
        let (w, h) = (4 + rng.below(8) as u32, 4 + rng.below(8) as u32);
        let rgb = common::random_rgb(rng, w, h);
        common::write(dir, p, &common::png_rgb(w, h, &rgb));
    }
}

#[test]
fn a_path_recorded_twice_in_the_shards_is_an_error_naming_it() {
    let mut rng = TestRng(common::fresh_seed("duplicates"));
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    folder_of(&a, &["x/1.png", "x/2.png"], &mut rng);
    folder_of(&b, &["x/2.png", "x/3.png"], &mut rng);
    for to in ["tar", "tfrecord"] {
        // Two folders with a file of the same path, converted into one folder of shards
        // (one sample a shard).
        let out = dir.path().join(to);
        for (src, prefix) in [(&a, "one"), (&b, "two")] {
            convert_with(src, to, &out, prefix, 1);
        }
        let err = shards(to, &out)
            .expect_err("the same path in two shards")
            .to_string();
        for part in ["\"x/2.png\"", "one-00001", "two-00000"] {
            assert!(err.contains(part), "{to}: {part} not in {err}");
        }
    }
    // And the writer refuses a path added twice.
    for format in [ShardFormat::Tar, ShardFormat::TfRecord] {
        let out = dir.path().join(format!("w-{format:?}"));
        let mut w = ShardWriter::new(format, &out, "three", 1 << 20).expect("writer");
        let img = common::png_rgb(1, 1, &[1, 2, 3]);
        w.add("y.png", &img, None, None).expect("first");
        assert!(w.add("y.png", &img, None, None).is_err(), "{format:?}");
    }
}

#[test]
fn the_class_list_is_checked_against_the_names_the_samples_record() {
    let mut rng = TestRng(common::fresh_seed("class list"));
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("folder");
    folder_of(&src, &["a/0.png", "b/1.png", "a/2.png"], &mut rng);
    for to in ["tar", "tfrecord"] {
        let out = dir.path().join(to);
        convert(&src, to, &out);
        let data = shards(to, &out).expect("listing");
        assert_eq!(data.classes(), ["a", "b"], "{to}");
        let paths: Vec<&str> = data.samples().iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, ["a/0.png", "a/2.png", "b/1.png"], "{to}");
        let side = out.join("shard.classes.json");
        // Without the list, the names the samples record.
        let text = std::fs::read(&side).expect("class list");
        std::fs::remove_file(&side).expect("remove");
        let data = shards(to, &out).expect("listing without the list");
        assert_eq!(data.classes(), ["a", "b"], "{to}");
        // A list that names the classes otherwise is refused, naming it.
        let swapped = String::from_utf8(text)
            .expect("utf-8")
            .replace("\"a\"", "\"tmp\"")
            .replace("\"b\"", "\"a\"")
            .replace("\"tmp\"", "\"b\"");
        std::fs::write(&side, swapped).expect("write");
        let err = shards(to, &out)
            .expect_err("a class list the samples contradict")
            .to_string();
        assert!(err.contains("shard.classes.json"), "{to}: {err}");
        // One with too few classes too.
        std::fs::write(&side, r#"{"format": "stoker-classes/1", "classes": ["a"]}"#)
            .expect("write");
        assert!(shards(to, &out).is_err(), "{to}");
    }
}

/// `stoker convert` itself: its report names the class list, and a split saved on the
/// folder loads on what it wrote.
#[test]
fn stoker_convert_keeps_paths_and_classes() {
    let mut rng = TestRng(common::fresh_seed("stoker convert"));
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("folder");
    let files = ["ant/0.png", "bee/1.png", "bee/sub/2.png", "ant/3.png"];
    folder_of(&src, &files, &mut rng);
    let manifest = dir.path().join("split.json");
    let split = Dataset::image_folder(&src)
        .expect("folder")
        .split(SplitSpec::fraction(0.5).seed(3))
        .expect("split");
    split.save(&manifest).expect("save");
    for to in ["tar", "tfrecord"] {
        let out = dir.path().join(to);
        let report = stoker_convert(&src, &["--to", to, "--shard-size", "1"], &out);
        assert_eq!(report["samples"], 4, "{report}");
        let side = out.join("shard.classes.json");
        assert_eq!(
            report["classes"].as_str().map(PathBuf::from),
            Some(side),
            "{report}"
        );
        let data = shards(to, &out).expect("listing");
        assert_eq!(data.classes(), ["ant", "bee"], "{to}");
        let loaded = Split::load(&manifest, data).expect("the folder's split loads");
        let ids = |s: &Subset| s.samples().iter().map(|x| x.id).collect::<Vec<_>>();
        assert_eq!(ids(&loaded.val()), ids(&split.val()), "{to}");
        assert_eq!(ids(&loaded.train()), ids(&split.train()), "{to}");
    }
}

#[test]
fn every_decodable_format_survives_conversion_to_both_shard_formats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let formats = common::data_dir().join("formats");
    // Three formats in class `a`, three in `b`.
    for (i, name) in common::FORMAT_FILES.into_iter().enumerate() {
        let class = if i < 3 { "a" } else { "b" };
        let bytes = std::fs::read(formats.join(name)).expect("bundled file");
        common::write(dir.path(), &format!("{class}/{name}"), &bytes);
    }
    let want = batches(Dataset::image_folder(dir.path()).expect("folder").all(), 3);
    for to in ["tar", "tfrecord"] {
        let out = tempfile::tempdir().expect("tempdir");
        convert(dir.path(), to, out.path());
        let data = shards(to, out.path()).expect("shards");
        assert_eq!(data.len(), 6, "{to}: every format listed from the shards");
        assert_eq!(batches(data.all(), 3), want, "{to}");
    }
}

/// `convert` loses nothing silently: zero-byte and text files named `.jpg` (which were
/// written as `.bin` members and vanished on reading, 7 samples becoming 5 with
/// `errors: []`) are reported by path and not written, and written plus reported is the
/// input's count, in both formats, through the library and the command line.
#[test]
fn convert_reports_what_it_cannot_convert_and_its_counts_match() {
    let mut rng = TestRng(common::fresh_seed("convert counts"));
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("folder");
    folder_of(
        &src,
        &["a/0.png", "a/1.png", "b/2.png", "b/3.png", "b/4.png"],
        &mut rng,
    );
    common::write(&src, "a/empty.jpg", b"");
    common::write(&src, "b/notes.jpg", b"these are notes, not a JPEG\n");
    let data = Dataset::image_folder(&src).expect("folder");
    assert_eq!(data.len(), 7);
    for (to, format) in [
        ("tar", ShardFormat::Tar),
        ("tfrecord", ShardFormat::TfRecord),
    ] {
        let out = dir.path().join(format!("lib-{to}"));
        let done = ShardWriter::new(format, &out, "shard", 1 << 20)
            .expect("writer")
            .write_dataset(&data, |_| ())
            .expect("convert");
        let mut refused: Vec<(&str, String)> = done
            .unreadable
            .iter()
            .map(|(i, e)| (data.samples()[*i].path.as_str(), e.to_string()))
            .collect();
        refused.sort();
        assert_eq!(done.samples, 5, "{to}");
        assert_eq!(refused.len(), 2, "{to}: {refused:?}");
        assert_eq!(refused[0].0, "a/empty.jpg");
        assert!(refused[0].1.contains("empty"), "{refused:?}");
        assert_eq!(refused[1].0, "b/notes.jpg");
        assert!(refused[1].1.contains("not a JPEG"), "{refused:?}");
        let back = shards(to, &out).expect("listing");
        assert_eq!(back.len(), 5, "{to}: every sample written reads back");
        // The writer itself refuses an image it would not read back.
        let mut w = ShardWriter::new(format, &dir.path().join(format!("add-{to}")), "s", 1 << 20)
            .expect("writer");
        assert!(w.add("x.jpg", b"", None, None).is_err());
        assert!(w.add("y.jpg", b"plain text", None, None).is_err());

        let out = dir.path().join(format!("cli-{to}"));
        let run = Command::new(env!("CARGO_BIN_EXE_stoker"))
            .arg("convert")
            .arg(&src)
            .args(["--to", to, "--out"])
            .arg(&out)
            .arg("--json")
            .output()
            .expect("run stoker");
        assert_eq!(run.status.code(), Some(1), "partial: {:?}", run);
        let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON");
        assert_eq!(report["samples"], 5, "{report}");
        let errors = report["errors"].as_array().expect("errors");
        assert_eq!(errors.len(), 2, "{report}");
        assert_eq!(shards(to, &out).expect("listing").len(), 5);
    }
}

/// A shard appears under its final name only when complete: a `convert` killed at any
/// moment leaves whole shards (each reads back with every record it holds, none cut
/// short) and at most one `.partial` file, which readers do not list.
#[test]
fn an_interrupted_convert_leaves_only_whole_shards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("folder");
    let jpeg = std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("jpeg");
    for i in 0..400 {
        common::write(&src, &format!("c/{i:04}.jpg"), &jpeg);
    }
    for (k, delay_ms) in [30u64, 120, 400].into_iter().enumerate() {
        let out = dir.path().join(format!("out{k}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_stoker"))
            .arg("convert")
            .arg(&src)
            .args(["--to", "tar", "--shard-size", "2MiB", "--out"])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run stoker");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let Ok(rd) = std::fs::read_dir(&out) else {
            continue; // killed before it made the folder
        };
        let names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().filter(|n| n.ends_with(".partial")).count() <= 1,
            "{names:?}"
        );
        if !names.iter().any(|n| n.ends_with(".tar")) {
            continue;
        }
        let back = Dataset::tar(std::slice::from_ref(&out)).expect("the whole shards list");
        let pipe = Pipeline::builder(back.clone().all())
            .backend(BackendKind::Cpu)
            .augment(Augment::new().resize(8, 8))
            .batch_size(64)
            .build()
            .expect("pipeline");
        let mut delivered = 0;
        for b in pipe.epoch(0).expect("epoch") {
            let b = b.expect("batch");
            assert!(b.errors().is_empty(), "{:?}", b.errors());
            delivered += b.len();
        }
        assert_eq!(delivered, back.len());
    }
}

// ---------------------------------------------------------------------------------------
// JPEG restart-marker transcoding and the folder output.

/// A folder of JPEGs of every kind the transcoder meets (baseline, progressive,
/// arithmetic-coded, CMYK, gray: transcoded; 12-bit, lossless: kept), a PNG, and an empty
/// class. Returns the relative paths and the kept reasons expected.
fn jpeg_folder(dir: &Path) -> Vec<&'static str> {
    let files = [
        ("a/testorig.jpg", "jpeg/ljt_testorig.jpg"),
        ("a/progressive.jpg", "jpeg/jd_moz_jpg-progressive.jpg"),
        ("a/arith.jpg", "jpeg/ljt_testimgari.jpg"),
        ("b/cmyk.jpg", "jpeg/go_video-001_cmyk.jpg"),
        ("b/gray.jpg", "jpeg/jd_moz_jpg-gray.jpg"),
        ("b/sub/twelve.jpg", "jpeg/ljt_monkey12.jpg"),
        ("b/lossless.jpg", "jpeg/jd_ll_jpeg_lossless_sel2.jpg"),
        ("b/coffee.png", "formats/coffee.png"),
    ];
    for (to, from) in files {
        let bytes = std::fs::read(common::data_dir().join(from)).expect("test file");
        common::write(dir, to, &bytes);
    }
    std::fs::create_dir_all(dir.join("empty")).expect("mkdir");
    files.iter().map(|f| f.0).collect()
}

/// The CPU decode of `bytes` (strict), or the error as text.
fn cpu_pixels(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut img = stoker::decode::Image8::default();
    stoker::decode::cpu::decode_image(bytes, &stoker::decode::DecodeOptions::default(), &mut img)
        .map(|_| img.data)
        .map_err(|e| e.to_string())
}

/// Runs `stoker convert SRC --json ARGS`; returns the JSON report.
fn stoker_convert(src: &Path, args: &[&str], out: &Path) -> serde_json::Value {
    let run = Command::new(env!("CARGO_BIN_EXE_stoker"))
        .arg("convert")
        .arg(src)
        .args(args)
        .arg("--out")
        .arg(out)
        .arg("--json")
        .output()
        .expect("run stoker");
    common::json_report(&run, &format!("stoker convert {args:?}"))
}

/// Each image's bytes as written, by sample path, from what `to` wrote in `out`.
fn written(to: &str, out: &Path) -> Vec<(String, Vec<u8>)> {
    let data = match to {
        "folder" => Dataset::image_folder(out),
        other => shards(other, out),
    }
    .expect("listing");
    data.samples()
        .iter()
        .map(|s| (s.path.clone(), s.location.read(u64::MAX).expect("read")))
        .collect()
}

/// `stoker convert` transcodes the JPEGs that can be (the same pixels, one baseline scan
/// with a restart marker every MCU row, the counts in its report), keeps the others byte
/// for byte with their reasons, and with `--restarts off` copies every file; the folder
/// output lists the same samples and classes (the empty one too).
#[test]
fn stoker_convert_transcodes_jpegs_to_restart_intervals_with_the_same_pixels() {
    use stoker::decode::jpeg::transcode::layout;
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    let paths = jpeg_folder(&src);
    let original = |p: &str| std::fs::read(src.join(p)).expect("original");
    let jpeg_bytes: u64 = paths
        .iter()
        .filter(|p| p.ends_with(".jpg"))
        .map(|p| original(p).len() as u64)
        .sum();
    for to in ["folder", "tar", "tfrecord"] {
        let out = dir.path().join(to);
        let report = stoker_convert(&src, &["--to", to], &out);
        let j = &report["jpegs"];
        assert_eq!(report["samples"], 8, "{to}: {report}");
        assert_eq!(report["restarts"], "auto", "{report}");
        assert_eq!(report["restart_interval"], "row", "{report}");
        assert_eq!(j["jpegs"], 7, "{to}: {report}");
        assert_eq!(j["transcoded"], 5, "{to}: {report}");
        assert_eq!(
            j["kept"],
            serde_json::json!({"lossless": 1, "not_8_bit": 1}),
            "{to}: {report}"
        );
        assert_eq!(j["bytes_before"], jpeg_bytes, "{to}: {report}");
        let after = j["bytes_after"].as_u64().expect("bytes_after");
        let got = written(to, &out);
        let listed: Vec<&str> = got.iter().map(|g| g.0.as_str()).collect();
        let mut want: Vec<&str> = paths.clone();
        want.sort();
        assert_eq!(listed, want, "{to}");
        let mut sum = 0;
        for (path, bytes) in &got {
            let orig = original(path);
            if path.ends_with(".jpg") {
                sum += bytes.len() as u64;
            }
            if path.contains("twelve") || path.contains("lossless") || path.ends_with(".png") {
                assert!(*bytes == orig, "{to}: {path} is kept byte for byte");
                continue;
            }
            let lay = layout(bytes).expect("layout");
            assert_eq!((lay.frame, lay.scans), (0xC0, 1), "{to}: {path}");
            assert_eq!(
                lay.restart_interval as u32, lay.mcus_per_row,
                "{to}: {path}"
            );
            assert_eq!(cpu_pixels(bytes), cpu_pixels(&orig), "{to}: {path}: pixels");
        }
        assert_eq!(sum, after, "{to}: bytes_after");
        if to == "folder" {
            let data = Dataset::image_folder(&out).expect("folder");
            assert_eq!(
                data.classes(),
                ["a", "b", "empty"],
                "every class, the empty one too"
            );
        }
        // Byte for byte with --restarts off.
        let out = dir.path().join(format!("{to}-off"));
        let report = stoker_convert(&src, &["--to", to, "--restarts", "off"], &out);
        assert_eq!(report["jpegs"]["jpegs"], 0, "{report}");
        for (path, bytes) in written(to, &out) {
            assert!(bytes == original(&path), "{to} --restarts off: {path}");
        }
    }
    // Another interval, unverified.
    let out = dir.path().join("mcus");
    let report = stoker_convert(
        &src,
        &[
            "--to",
            "folder",
            "--restart-interval",
            "mcus:4",
            "--no-verify",
        ],
        &out,
    );
    assert_eq!(report["jpegs"]["transcoded"], 5, "{report}");
    let (_, bytes) = written("folder", &out)
        .into_iter()
        .find(|g| g.0 == "a/testorig.jpg")
        .expect("testorig");
    assert_eq!(layout(&bytes).map(|l| l.restart_interval), Some(4));
    assert_eq!(cpu_pixels(&bytes), cpu_pixels(&original("a/testorig.jpg")));
}

/// A folder output with masks: images under `images/`, masks under `masks/`, read back
/// paired as they were; the library writer refuses a path that leaves the folder.
#[test]
fn a_folder_output_keeps_masks_apart_and_paths_inside() {
    let mut rng = TestRng(common::fresh_seed("folder masks"));
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, masks) = (dir.path().join("img"), dir.path().join("masks"));
    for (i, p) in ["x/0.png", "x/1.png", "y/deep/2.png"].iter().enumerate() {
        let (w, h) = (4 + i as u32, 5);
        common::write(
            &src,
            p,
            &common::png_rgb(w, h, &common::random_rgb(&mut rng, w, h)),
        );
        let ids: Vec<u16> = (0..w * h).map(|k| (k % 3) as u16).collect();
        let stem = Path::new(p)
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("stem");
        common::write(
            &masks,
            &format!("{stem}.png"),
            &common::png_labels(w, h, &ids, false),
        );
    }
    let data = Dataset::image_folder(&src)
        .expect("folder")
        .with_masks(&masks)
        .expect("masks");
    let out = dir.path().join("out");
    let done = ShardWriter::new(ShardFormat::Folder, &out, "unused", 1)
        .expect("writer")
        .with_transcode(Some(Default::default()))
        .write_dataset(&data, |_| ())
        .expect("convert");
    assert_eq!(done.samples, 3);
    assert!(done.shards.is_empty() && done.classes.is_none(), "{done:?}");
    let back = Dataset::image_folder(out.join("images"))
        .expect("images")
        .with_masks(out.join("masks"))
        .expect("masks pair again");
    assert_eq!(back.classes(), data.classes());
    for (a, b) in data.samples().iter().zip(back.samples()) {
        assert_eq!((a.id, &a.path, a.label), (b.id, &b.path, b.label));
        let read = |l: &Option<stoker::source::Location>| {
            l.as_ref().expect("mask").read(u64::MAX).expect("read")
        };
        assert_eq!(read(&a.mask), read(&b.mask), "{}", a.path);
    }
    let mut w = ShardWriter::new(ShardFormat::Folder, &dir.path().join("w"), "s", 1).expect("w");
    let img = common::png_rgb(1, 1, &[1, 2, 3]);
    for bad in ["../up.png", "/abs.png", "a//b.png", "a/./b.png"] {
        assert!(w.add(bad, &img, None, None).is_err(), "{bad}");
    }
    assert!(
        w.add("ok/fine.png", &img, None, Some(&img)).is_err(),
        "a mask without masks apart"
    );
    w.add("ok/fine.png", &img, None, None)
        .expect("a plain path");
}

// ---------------------------------------------------------------------------------------
// Shards streamed to the disk: memory, interruption, the shard size, the indexes.

/// Bytes of each image of [`large_folder`].
const LARGE_IMAGE: u64 = 2 << 20;

/// The image `i` of [`large_folder`]: a JPEG signature, then `i` and random bytes, zeros
/// (a hole in the file: the folder takes next to no disk), and random bytes at its end.
fn large_image(i: u64, seed: u64) -> Vec<u8> {
    let mut rng = TestRng(seed ^ i.wrapping_mul(0x9E37_79B9));
    let mut bytes = vec![0xFF, 0xD8, 0xFF, 0xE0];
    bytes.extend_from_slice(&i.to_le_bytes());
    bytes.extend((0..52).map(|_| rng.next_u64() as u8));
    bytes.resize(LARGE_IMAGE as usize - 64, 0);
    bytes.extend((0..64).map(|_| rng.next_u64() as u8));
    bytes
}

/// A folder of `n` images of [`LARGE_IMAGE`] bytes ([`large_image`]) in classes `a` and
/// `b`, written sparse. Returns (path, label, image index) of each, in path order.
fn large_folder(dir: &Path, n: u64, seed: u64) -> Vec<(String, u32, u64)> {
    use std::io::{Seek, SeekFrom, Write};
    let mut want = Vec::new();
    for i in 0..n {
        let (class, label) = if i % 3 == 0 { ("b", 1) } else { ("a", 0) };
        let rel = format!("{class}/{i:04}.jpg");
        let bytes = large_image(i, seed);
        let path = dir.join(&rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let mut f = std::fs::File::create(&path).expect("create");
        f.write_all(&bytes[..64]).expect("head");
        f.seek(SeekFrom::Start(LARGE_IMAGE - 64)).expect("seek");
        f.write_all(&bytes[LARGE_IMAGE as usize - 64..])
            .expect("tail");
        assert_eq!(f.metadata().expect("size").len(), LARGE_IMAGE);
        want.push((rel, label, i));
    }
    want.sort();
    want
}

/// Runs `cmd` to its end; returns whether it succeeded, its peak resident set in bytes
/// (the kernel's count for the child, `ru_maxrss`), and its stdout and stderr.
#[cfg(target_os = "linux")]
fn run_measured(mut cmd: Command) -> (bool, u64, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let child = cmd
        .stdout(std::fs::File::create(&out).expect("stdout"))
        .stderr(std::fs::File::create(&err).expect("stderr"))
        .spawn()
        .expect("run stoker");
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: `rusage` is a plain C struct, valid zeroed; `wait4` writes the status and
    // usage of the child `pid` (ours, not yet waited for) into the two locals.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    drop(child);
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    let text = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).expect("output")).into_owned();
    let peak = u64::try_from(usage.ru_maxrss).expect("maxrss") * 1024;
    (ok, peak, text(&out), text(&err))
}

/// `stoker convert SRC --to TO --restarts off --shard-size SIZE --out OUT --json`.
fn convert_command(src: &Path, to: &str, size: &str, out: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stoker"));
    cmd.arg("convert")
        .arg(src)
        .args([
            "--to",
            to,
            "--restarts",
            "off",
            "--shard-size",
            size,
            "--out",
        ])
        .arg(out)
        .arg("--json");
    cmd
}

/// A 200 MiB set converted into one shard (`--shard-size 4GiB`) takes memory for a few
/// samples, not the shard (it was built in memory: 2.15 GB took 2.31 GB, and aborted under
/// a 2 GB limit), in both formats; the shard reads back every sample, label and byte.
#[cfg(target_os = "linux")]
#[test]
fn a_shard_larger_than_memory_allows_is_streamed_to_the_disk() {
    let seed = common::fresh_seed("streamed shard");
    let dir = tempfile::tempdir().expect("tempdir");
    let (large, small) = (dir.path().join("large"), dir.path().join("small"));
    let n = 100;
    let want = large_folder(&large, n, seed);
    large_folder(&small, 3, seed);
    let set = n * LARGE_IMAGE;
    for to in ["tar", "tfrecord"] {
        // The same command on three images: what the binary takes before any shard.
        let (ok, base, _, err) =
            run_measured(convert_command(&small, to, "4GiB", &dir.path().join("s")));
        assert!(ok, "{to}: {err}");
        let out = dir.path().join(to);
        let (ok, peak, report, err) = run_measured(convert_command(&large, to, "4GiB", &out));
        assert!(ok, "{to}: {err}");
        eprintln!("{to}: peak resident {peak} bytes, {base} on three images, set {set}");
        let grown = peak.saturating_sub(base);
        assert!(
            grown < set / 8,
            "{to}: {grown} bytes more resident for a {set}-byte set than for three images"
        );
        assert!(
            peak < set / 3,
            "{to}: peak resident {peak} for a {set}-byte set"
        );
        let report: serde_json::Value = serde_json::from_str(&report).expect("JSON");
        assert_eq!(report["samples"], n, "{report}");
        assert_eq!(
            report["shards"].as_array().map(Vec::len),
            Some(1),
            "{report}"
        );
        let back = shards(to, &out).expect("listing");
        assert_eq!(back.classes(), ["a", "b"]);
        assert_eq!(back.len(), want.len(), "{to}");
        for (s, (path, label, i)) in back.samples().iter().zip(&want) {
            assert_eq!((&s.path, s.label), (path, Some(*label)), "{to}");
            let bytes = s.location.read(u64::MAX).expect("read back");
            assert!(bytes == large_image(*i, seed), "{to}: {path} differs");
        }
        let names: Vec<String> = std::fs::read_dir(&out)
            .expect("out")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.ends_with(".partial")),
            "{to}: {names:?}"
        );
    }
}

/// A `convert` killed while its one shard is being streamed leaves nothing under the
/// shard's final name (nor an index): only the `.partial` file, which readers do not list.
#[test]
fn a_convert_killed_mid_shard_leaves_no_shard_under_its_final_name() {
    let seed = common::fresh_seed("killed mid-shard");
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    let n = 60;
    large_folder(&src, n, seed);
    for (to, ext) in [("tar", "tar"), ("tfrecord", "tfrecord")] {
        let out = dir.path().join(to);
        let shard = out.join(format!("shard-00000.{ext}"));
        let partial = out.join(format!("shard-00000.{ext}.partial"));
        let mut child = convert_command(&src, to, "4GiB", &out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run stoker");
        // Killed once part of the shard is on the disk, before the end of the set.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut seen = 0;
        while std::time::Instant::now() < deadline {
            seen = std::fs::metadata(&partial).map_or(0, |m| m.len());
            if seen > 4 * LARGE_IMAGE || child.try_wait().expect("try_wait").is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            seen > 4 * LARGE_IMAGE && seen < n * LARGE_IMAGE,
            "{to}: the shard was not seen being streamed ({seen} bytes)"
        );
        assert!(!shard.exists(), "{to}: a half shard under its final name");
        let index = stoker::source::shards::index_path(&shard);
        assert!(!index.exists(), "{to}: an index of a shard not written");
        assert!(partial.exists(), "{to}");
        // Readers see no shard in the folder (no sample, or an error saying so).
        assert!(
            !shards(to, &out).is_ok_and(|d| !d.is_empty()),
            "{to}: a sample listed from a half shard"
        );
    }
}

/// `--shard-size` beyond 1TiB (a mistyped unit, a number of samples taken for bytes) or
/// under a byte is refused with an error naming the option and its bounds, before any
/// file is written; the library refuses a size of 0 rather than making it 1. 1TiB works.
#[test]
fn an_absurd_shard_size_is_refused_with_a_clear_error() {
    let mut rng = TestRng(common::fresh_seed("shard size"));
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("folder");
    folder_of(&src, &["a/0.png", "b/1.png"], &mut rng);
    for (size, says) in [
        ("1099511627777", "1TiB"),
        ("2TiB", "1TiB"),
        ("1PB", "unit"),
        ("0", "1 byte"),
        ("0.4", "1 byte"),
        ("5 parsecs", "unit"),
    ] {
        let out = dir.path().join("refused");
        let run = convert_command(&src, "tar", size, &out)
            .output()
            .expect("run stoker");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "--shard-size {size} accepted");
        assert!(
            err.contains("--shard-size") && err.contains(says),
            "--shard-size {size}: {err}"
        );
        assert!(!out.exists(), "--shard-size {size}: wrote {out:?}");
    }
    let out = dir.path().join("tib");
    let report = stoker_convert(&src, &["--to", "tar", "--shard-size", "1TiB"], &out);
    assert_eq!(report["samples"], 2, "{report}");
    assert_eq!(
        report["shards"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    let err = ShardWriter::new(ShardFormat::Tar, &dir.path().join("lib"), "s", 0)
        .expect_err("a shard size of 0");
    assert!(err.to_string().contains("shard size"), "{err}");
}

/// The index written beside each streamed shard is the one a reader builds from the shard
/// itself: removed and rebuilt by listing, it comes back byte for byte (several shards of
/// both formats, labels, class names and masks).
#[test]
fn each_streamed_shard_is_written_with_the_index_its_reader_builds() {
    let mut rng = TestRng(common::fresh_seed("streamed indexes"));
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, masks) = (dir.path().join("img"), dir.path().join("masks"));
    let paths = ["x/0.png", "x/1.png", "y/2.png", "y/deep/3.png", "z/4.png"];
    folder_of(&src, &paths, &mut rng);
    for p in paths {
        let stem = Path::new(p)
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("stem");
        let ids: Vec<u16> = (0..30).map(|k| (k % 3) as u16).collect();
        common::write(
            &masks,
            &format!("{stem}.png"),
            &common::png_labels(5, 6, &ids, false),
        );
    }
    let data = Dataset::image_folder(&src)
        .expect("folder")
        .with_masks(&masks)
        .expect("masks");
    for format in [ShardFormat::Tar, ShardFormat::TfRecord] {
        let out = dir.path().join(format.name());
        let done = ShardWriter::new(format, &out, "s", 600)
            .expect("writer")
            .write_dataset(&data, |_| ())
            .expect("convert");
        assert!(done.shards.len() >= 2, "{format:?}: {:?}", done.shards);
        let to = format.name();
        let mut written = Vec::new();
        for shard in &done.shards {
            let side = stoker::source::shards::index_path(shard);
            written.push(std::fs::read(&side).expect("index written with the shard"));
            std::fs::remove_file(&side).expect("remove");
        }
        let back = shards(to, &out).expect("listing");
        assert_eq!(back.len(), paths.len(), "{to}");
        assert!(back.samples().iter().all(|s| s.mask.is_some()), "{to}");
        for (shard, was) in done.shards.iter().zip(&written) {
            let side = stoker::source::shards::index_path(shard);
            let rebuilt = std::fs::read(&side).expect("index rebuilt");
            assert!(
                &rebuilt == was,
                "{to}: {shard:?}'s index differs from its rebuild"
            );
        }
    }
}

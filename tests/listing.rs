//! Listing: what a folder listing leaves out is reported with path and reason (the
//! dataset, `stoker inspect` in text and JSON); file lists are parsed as documented at
//! `Dataset::files`, and a malformed line is refused with its number and text.

mod common;

use std::path::Path;
use std::process::Command;

use stoker::source::SkipReason;
use stoker::Dataset;

/// One image of each of the six formats, plus files that are not samples.
fn folder_with_extras(dir: &Path) {
    let formats = common::data_dir().join("formats");
    for (from, to) in [
        ("coffee.jpg", "a.jpg"),
        ("coffee.png", "b.PNG"),
        ("coffee_lossless.webp", "c.webp"),
        ("coffee.bmp", "d.bmp"),
        ("coffee_lzw.tiff", "sub/e.tif"),
        ("coffee_2frames.gif", "sub/f.gif"),
    ] {
        let to = dir.join(to);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(formats.join(from), to).expect("copy");
    }
    common::write(dir, "notes.txt", b"not an image");
    common::write(dir, "sub/README", b"no extension");
    common::write(dir, ".DS_Store", b"hidden");
    common::write(dir, ".cache/x.jpg", b"in a hidden folder");
}

fn reasons(d: &Dataset) -> Vec<(String, SkipReason)> {
    d.skipped()
        .iter()
        .map(|s| (s.path.clone(), s.reason.clone()))
        .collect()
}

#[test]
fn a_flat_folder_lists_six_formats_and_reports_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    folder_with_extras(dir.path());
    let d = Dataset::flat(dir.path()).expect("list");
    let paths: Vec<&str> = d.samples().iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "a.jpg",
            "b.PNG",
            "c.webp",
            "d.bmp",
            "sub/e.tif",
            "sub/f.gif"
        ]
    );
    assert_eq!(
        reasons(&d),
        [
            (".DS_Store".to_string(), SkipReason::Hidden),
            (".cache/".to_string(), SkipReason::Hidden),
            ("notes.txt".to_string(), SkipReason::Extension("txt".into())),
            (
                "sub/README".to_string(),
                SkipReason::Extension(String::new())
            ),
        ]
    );
    assert!(d.skipped()[2].reason.to_string().contains(".txt"));
}

#[test]
fn an_image_folder_reports_files_outside_its_classes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let formats = common::data_dir().join("formats");
    std::fs::create_dir_all(dir.path().join("cat")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("dog")).expect("mkdir");
    std::fs::copy(formats.join("coffee.bmp"), dir.path().join("cat/1.bmp")).expect("copy");
    std::fs::copy(formats.join("coffee.jpg"), dir.path().join("dog/2.jpg")).expect("copy");
    std::fs::copy(formats.join("coffee.jpg"), dir.path().join("stray.jpg")).expect("copy");
    common::write(dir.path(), "labels.csv", b"x");
    common::write(dir.path(), "dog/2.json", b"{}");
    let d = Dataset::image_folder(dir.path()).expect("list");
    assert_eq!(d.len(), 2);
    assert_eq!(
        reasons(&d),
        [
            (
                "dog/2.json".to_string(),
                SkipReason::Extension("json".into())
            ),
            (
                "labels.csv".to_string(),
                SkipReason::Extension("csv".into())
            ),
            ("stray.jpg".to_string(), SkipReason::OutsideClasses),
        ]
    );
}

fn stoker(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stoker"))
        .args(args)
        .output()
        .expect("run stoker")
}

#[test]
fn inspect_counts_every_format_and_names_what_it_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    folder_with_extras(dir.path());
    let p = dir.path().to_str().expect("utf-8 path");
    let out = stoker(&["--json", "inspect", p]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["samples"], 6, "{v}");
    let kinds = v["by_kind"].as_object().expect("by_kind");
    for f in ["jpeg/", "png/", "webp/", "bmp/", "tiff/", "gif/"] {
        assert!(kinds.keys().any(|k| k.starts_with(f)), "{f} in {kinds:?}");
    }
    assert_eq!(v["sizes"]["measured"], 6);
    let skipped = v["skipped"].as_array().expect("skipped");
    let paths: Vec<&str> = skipped.iter().filter_map(|s| s["path"].as_str()).collect();
    assert_eq!(paths, [".DS_Store", ".cache/", "notes.txt", "sub/README"]);
    assert!(skipped[2]["reason"]
        .as_str()
        .is_some_and(|r| r.contains(".txt")));
    // The log says it once, with the count.
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        log.matches("skipped 4 file(s)").count(),
        1,
        "one warning line: {log}"
    );

    let out = stoker(&["inspect", p]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("4 skipped at listing"), "{text}");
    assert!(text.contains("notes.txt: extension .txt"), "{text}");
}

/// A list file in a folder holding `good/good_0.jpg` and `good_1.jpg`.
fn list(dir: &Path, text: &str) -> stoker::Result<Dataset> {
    let p = dir.join("list.txt");
    std::fs::write(&p, text).expect("write list");
    Dataset::files(&p)
}

fn samples(d: &Dataset) -> Vec<(String, Option<u32>)> {
    d.samples()
        .iter()
        .map(|s| (s.path.clone(), s.label))
        .collect()
}

#[test]
fn file_lists_accept_the_documented_forms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let s = |p: &str, l: Option<u32>| (p.to_string(), l);
    // Paths alone; comments, blank lines, CRLF.
    let got = list(
        d,
        "# files\r\n\r\ngood/good_0.jpg\r\n   \n  # indented comment\ngood_1.jpg\n",
    )
    .expect("paths alone");
    assert_eq!(
        samples(&got),
        [s("good/good_0.jpg", None), s("good_1.jpg", None)]
    );
    assert!(got.classes().is_empty());
    // Space-separated labels, runs of spaces, surrounding spaces.
    let got = list(d, "good/good_0.jpg 3\n  good_1.jpg    0  \n").expect("space labels");
    assert_eq!(
        samples(&got),
        [s("good/good_0.jpg", Some(3)), s("good_1.jpg", Some(0))]
    );
    assert_eq!(got.classes(), ["0", "1", "2", "3"]);
    // Tab-separated: the path may hold spaces.
    let got = list(d, "my photos/a b.jpg\t7\ngood_1.jpg \t 1048575\n").expect("tab labels");
    assert_eq!(
        samples(&got),
        [
            s("good_1.jpg", Some(1_048_575)),
            s("my photos/a b.jpg", Some(7))
        ]
    );
    // In the tab form a path may end in a comma and digits.
    let got = list(d, "odd,1\t2\n").expect("tab form with a comma");
    assert_eq!(samples(&got), [s("odd,1", Some(2))]);
    // A comma elsewhere in a path is a path.
    let got = list(d, "a,b.jpg\n").expect("comma inside a path");
    assert_eq!(samples(&got), [s("a,b.jpg", None)]);
}

#[test]
fn file_lists_refuse_a_malformed_line_with_its_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        // (list, line number, text of the line, what the message says)
        (
            "good/good_0.jpg 1\ngood/good_0.jpg cat\n",
            2,
            "good/good_0.jpg cat",
            "not a non-negative integer",
        ),
        ("# header\ngood_1.jpg,1\n", 2, "good_1.jpg,1", "comma"),
        ("my photos/a.jpg 3\n", 1, "my photos/a.jpg 3", "3 fields"),
        ("my photos/a.jpg\n", 1, "my photos/a.jpg", "tab"),
        ("a.jpg\t1\t2\n", 1, "a.jpg\t1\t2", "more than one tab"),
        ("\t3\n", 1, "\t3", "empty path"),
        (
            "a.jpg\tcat\n",
            1,
            "a.jpg\tcat",
            "not a non-negative integer",
        ),
        ("a.jpg -1\n", 1, "a.jpg -1", "not a non-negative integer"),
        ("a.jpg 1\n\nb.jpg\n", 3, "b.jpg", "has no label"),
        ("a.jpg\nb.jpg 2\n", 2, "b.jpg 2", "has no label"),
        ("../up.jpg\n", 1, "../up.jpg", "relative"),
    ];
    for (text, n, line, why) in cases {
        let e = list(dir.path(), text).expect_err(text).to_string();
        assert!(e.contains(&format!("line {n}:")), "{text:?}: {e}");
        assert!(e.contains(&format!("{line:?}")), "{text:?}: {e}");
        assert!(e.contains(why), "{text:?}: {e}");
    }
}

/// A file given as a list that is not UTF-8 text is refused naming it and saying what it
/// is: an image (a JPEG, a PNG: "is a JPEG image, not a file list"), or not text. Both
/// said only "invalid utf-8 sequence of 1 bytes from index 0".
#[test]
fn a_list_that_is_not_text_says_what_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jpg =
        std::fs::read(common::data_dir().join("samples/photo/skimage_coffee.jpg")).expect("sample");
    let png = common::png_rgb(2, 1, &[0, 0, 0, 255, 255, 255]);
    let cases: [(&str, &[u8], &str); 3] = [
        ("photo.jpg", &jpg, "a JPEG image, not a file list"),
        ("list.txt", &png, "a PNG image, not a file list"),
        ("data.bin", &jpg[2..], "not UTF-8 text"),
    ];
    for (name, bytes, says) in cases {
        let p = common::write(dir.path(), name, bytes);
        let e = Dataset::files(&p).expect_err(name).to_string();
        assert!(e.contains(says), "{name}: {e}");
        assert!(e.contains(&p.display().to_string()), "{name}: {e}");
    }
}

/// A label is data, never a size: a stray huge label (the 4,000,000,000, one just
/// above the bound, one too long for any integer type) neither aborts listing nor sizes the
/// class list; each such sample is reported every epoch with kind `Label`, its path and the
/// list's line, and the rest are delivered with their labels.
#[test]
fn labels_above_the_bound_are_reported_per_sample_and_size_nothing() {
    use stoker::{Augment, OnError, Pipeline, SampleErrorKind, MAX_LABEL};
    let dir = tempfile::tempdir().expect("tempdir");
    let jpg = std::fs::read(common::data_dir().join("formats/coffee.jpg")).expect("jpg");
    let big = format!("{}", u64::from(MAX_LABEL) + 1);
    let lines = [
        ("a.jpg", "3".to_string()),
        ("b.jpg", "4000000000".to_string()),
        ("c.jpg", big.clone()),
        ("d.jpg", MAX_LABEL.to_string()),
        (
            "e.jpg",
            "123456789012345678901234567890123456789012345678901234567890".into(),
        ),
        ("f.jpg", "0".to_string()),
    ];
    let mut text = String::new();
    for (name, label) in &lines {
        common::write(dir.path(), name, &jpg);
        text.push_str(&format!("{name} {label}\n"));
    }
    let data = list(dir.path(), &text).expect("the list is read despite the labels");
    assert_eq!(data.len(), lines.len(), "every line is a sample");
    assert_eq!(
        data.classes().len(),
        MAX_LABEL as usize + 1,
        "classes run to the largest label taken, not to 4e9"
    );
    let refused = ["b.jpg", "c.jpg", "e.jpg"];
    for epoch in 0..2 {
        let pipe = Pipeline::builder(data.clone().all())
            .augment(Augment::new().resize(16, 16))
            .batch_size(2)
            .on_error(OnError::Skip)
            .build()
            .expect("pipeline");
        let (mut delivered, mut reported) = (Vec::new(), Vec::new());
        for b in pipe.epoch(epoch).expect("epoch") {
            let b = b.expect("batch");
            for (id, label) in b.ids().iter().zip(b.labels()) {
                let s = data.samples().iter().find(|s| s.id == *id).expect("id");
                delivered.push((s.path.clone(), *label));
            }
            for e in b.errors() {
                assert_eq!(e.kind, SampleErrorKind::Label, "{e}");
                assert!(e.reason.contains("list.txt line"), "{e}");
                assert!(e.reason.contains("MAX_LABEL"), "{e}");
                reported.push(e.path.clone());
            }
        }
        delivered.sort();
        reported.sort();
        assert_eq!(
            delivered,
            [
                ("a.jpg".to_string(), Some(3)),
                ("d.jpg".to_string(), Some(MAX_LABEL)),
                ("f.jpg".to_string(), Some(0))
            ],
            "epoch {epoch}"
        );
        assert_eq!(reported, refused, "epoch {epoch}");
    }
}

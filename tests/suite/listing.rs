//! Listing: what a folder listing leaves out is reported with path and reason (the
//! dataset, `stoker inspect` in text and JSON); file lists are parsed as documented at
//! `Dataset::files`, and a malformed line is refused with its number and text.

use crate::common;

use std::path::Path;
use std::process::Command;

use stoker::source::SkipReason;
use stoker::Dataset;

/// One image of each of the six formats, plus files that are not samples.
fn folder_with_extras(dir: &Path) {
    let formats = common::data_dir().join("formats");
    let names = ["a.jpg", "b.PNG", "c.webp", "d.bmp", "e.tif", "f.gif"];
    for (k, (from, to)) in common::FORMAT_FILES.into_iter().zip(names).enumerate() {
        // The TIFF and the GIF in a subfolder.
        let to = dir.join(if k < 4 { "" } else { "sub" }).join(to);
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
    let v = common::json_report(&out, "stoker inspect");
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
    use stoker::{SampleErrorKind, MAX_LABEL};
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
        let pipe = common::skipping_pipeline(&data, 2);
        let (delivered, errors) = common::delivered_and_reported(&pipe, &data, epoch);
        let delivered: Vec<_> = delivered.into_iter().map(|(p, l, _)| (p, l)).collect();
        let mut reported = Vec::new();
        for e in errors {
            assert_eq!(e.kind, SampleErrorKind::Label, "{e}");
            assert!(e.reason.contains("list.txt line"), "{e}");
            assert!(e.reason.contains("MAX_LABEL"), "{e}");
            reported.push(e.path);
        }
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

// ---------------------------------------------------------------------------------------
// Folder walks: links that lead back up, out of the folder, trees too deep.

/// `f` on a thread of its own, failing (not hanging) when it takes over `secs` seconds.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("listing did not end within {secs} s"))
}

/// `list` of `dir` (`Dataset::flat` or `Dataset::image_folder`), which must end within
/// 20 s and succeed.
fn list_within(dir: &Path, list: fn(&Path) -> stoker::Result<Dataset>) -> Dataset {
    let root = dir.to_path_buf();
    within(20, move || list(&root)).expect("list")
}

fn symlink(target: impl AsRef<Path>, link: &Path) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

/// `a.jpg`, `sub/b.jpg`, and in `sub/` three links back up: `up1 -> ..`, `up2 -> ..`,
/// `here -> .`.
fn fan_out(dir: &Path) {
    let jpg = std::fs::read(common::data_dir().join("formats/coffee.jpg")).expect("jpeg");
    common::write(dir, "a.jpg", &jpg);
    common::write(dir, "sub/b.jpg", &jpg);
    symlink("..", &dir.join("sub/up1"));
    symlink("..", &dir.join("sub/up2"));
    symlink(".", &dir.join("sub/here"));
}

fn paths(d: &Dataset) -> Vec<String> {
    d.samples().iter().map(|s| s.path.clone()).collect()
}

#[test]
fn links_branching_back_up_list_each_image_once_and_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    fan_out(dir.path());
    let d = list_within(dir.path(), |p| Dataset::flat(p));
    assert_eq!(paths(&d), ["a.jpg", "sub/b.jpg"]);
    assert_eq!(
        reasons(&d),
        [
            ("sub/here/".to_string(), SkipReason::Listed("sub/".into())),
            ("sub/up1/".to_string(), SkipReason::Listed(String::new())),
            ("sub/up2/".to_string(), SkipReason::Listed(String::new())),
        ]
    );
    assert!(d.skipped()[1].reason.to_string().contains("not followed"));

    // An image-folder tree: the same links in a class folder; a class that is a link to
    // another class is no class of its own.
    let dir = tempfile::tempdir().expect("tempdir");
    fan_out(&dir.path().join("cat"));
    std::fs::create_dir_all(dir.path().join("dog")).expect("mkdir");
    std::fs::copy(
        common::data_dir().join("formats/coffee.png"),
        dir.path().join("dog/c.png"),
    )
    .expect("copy");
    symlink("dog", &dir.path().join("alias"));
    let d = list_within(dir.path(), |p| Dataset::image_folder(p));
    assert_eq!(d.classes(), ["cat", "dog"]);
    let got: Vec<(String, Option<u32>)> = d
        .samples()
        .iter()
        .map(|s| (s.path.clone(), s.label))
        .collect();
    let s = |p: &str, l: u32| (p.to_string(), Some(l));
    assert_eq!(
        got,
        [s("cat/a.jpg", 0), s("cat/sub/b.jpg", 0), s("dog/c.png", 1)]
    );
    let skipped: Vec<&str> = d.skipped().iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        skipped,
        ["alias/", "cat/sub/here/", "cat/sub/up1/", "cat/sub/up2/"]
    );
    assert_eq!(d.skipped()[0].reason, SkipReason::Listed("dog/".into()));
}

#[test]
fn a_symlink_loop_is_reported_and_the_rest_listed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jpg = std::fs::read(common::data_dir().join("formats/coffee.jpg")).expect("jpeg");
    common::write(dir.path(), "a.jpg", &jpg);
    common::write(dir.path(), "sub/b.jpg", &jpg);
    symlink("../sub", &dir.path().join("sub/loop"));
    let d = list_within(dir.path(), |p| Dataset::flat(p));
    assert_eq!(paths(&d), ["a.jpg", "sub/b.jpg"]);
    assert_eq!(
        reasons(&d),
        [("sub/loop/".to_string(), SkipReason::Listed("sub/".into()))]
    );
}

#[test]
fn links_to_folders_outside_are_not_followed_and_walks_are_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jpg = std::fs::read(common::data_dir().join("formats/coffee.jpg")).expect("jpeg");
    common::write(dir.path(), "a.jpg", &jpg);
    symlink("/usr", &dir.path().join("usr"));
    symlink("/", &dir.path().join("root"));
    // A link to a folder inside is followed (after the real folders).
    common::write(dir.path(), "real/b.jpg", &jpg);
    symlink("real", &dir.path().join("alias"));
    let real_usr = std::fs::canonicalize("/usr").expect("/usr");
    let d = list_within(dir.path(), |p| Dataset::flat(p));
    assert_eq!(paths(&d), ["a.jpg", "real/b.jpg"]);
    assert_eq!(
        reasons(&d),
        [
            ("alias/".to_string(), SkipReason::Listed("real/".into())),
            ("root/".to_string(), SkipReason::LinkOutside("/".into())),
            (
                "usr/".to_string(),
                SkipReason::LinkOutside(real_usr.display().to_string())
            ),
        ]
    );
    // The same link as a class of an image-folder tree is no class.
    let dir = tempfile::tempdir().expect("tempdir");
    common::write(dir.path(), "cat/a.jpg", &jpg);
    symlink("/", &dir.path().join("root"));
    let d = list_within(dir.path(), |p| Dataset::image_folder(p));
    assert_eq!(d.classes(), ["cat"]);
    assert_eq!(
        reasons(&d),
        [("root/".to_string(), SkipReason::LinkOutside("/".into()))]
    );

    // Followed when asked, the walk stops at its bounds with a typed error.
    let dir = tempfile::tempdir().expect("tempdir");
    common::write(dir.path(), "a.jpg", &jpg);
    symlink("/usr", &dir.path().join("usr"));
    let mut options = stoker::source::WalkOptions::default();
    options.follow_links_outside = true;
    options.max_entries = 500;
    let root = dir.path().to_path_buf();
    let opts = options.clone();
    match within(20, move || Dataset::flat_with(&root, &opts)) {
        Err(stoker::Error::Listing {
            bound: stoker::error::ListingBound::Entries(500),
            entries: 501,
            ref path,
            ..
        }) if path == dir.path() => {}
        other => panic!("{other:?}"),
    }
    options.max_entries = u64::MAX;
    options.max_time = std::time::Duration::ZERO;
    let root = dir.path().to_path_buf();
    let e = within(20, move || Dataset::flat_with(&root, &options)).expect_err("bounded");
    assert!(
        matches!(
            e,
            stoker::Error::Listing {
                bound: stoker::error::ListingBound::Time(_),
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("max_time"), "{e}");
}

#[test]
fn a_tree_deeper_than_the_limit_is_reported_and_the_rest_listed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jpg = std::fs::read(common::data_dir().join("formats/coffee.jpg")).expect("jpeg");
    // An image in the root and in each of 70 nested folders d/, d/d/, ...
    let mut want = Vec::new();
    let mut rel = String::new();
    for _ in 0..=70 {
        common::write(dir.path(), &format!("{rel}x.jpg"), &jpg);
        want.push(format!("{rel}x.jpg"));
        rel.push_str("d/");
    }
    let max = stoker::source::WalkOptions::default().max_depth;
    assert!(max < 70);
    let d = list_within(dir.path(), |p| Dataset::flat(p));
    // Folders down to `max` deep are listed; the one below is reported, not entered.
    want.truncate(max + 1);
    want.sort();
    assert_eq!(paths(&d), want);
    assert_eq!(
        reasons(&d),
        [("d/".repeat(max + 1), SkipReason::TooDeep(max))]
    );
}

#[test]
fn inspect_ends_on_links_branching_back_up_and_lists_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    fan_out(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_stoker"))
        .args(["--json", "inspect"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run stoker");
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stoker inspect did not end within 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    assert!(out.status.success(), "{:?}", out.status);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["samples"], 2, "{v}");
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .filter_map(|s| s["path"].as_str())
        .collect();
    assert_eq!(skipped, ["sub/here/", "sub/up1/", "sub/up2/"], "{v}");
}

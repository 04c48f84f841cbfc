//! Special files in a dataset: a FIFO named `x.jpg`, a symlink to `/dev/zero`, a broken
//! symlink and an unreadable sub-folder. Listing reports each with its path and reason and
//! lists the rest; nothing blocks in `open()` or reads without end, whether the file is met
//! at listing, named in a file list, or given to `decode`, `inspect`, `convert` and
//! `bench pipeline`, each run under a watchdog.
#![cfg(unix)]

mod common;
#[path = "common/watched.rs"]
mod watched;

use std::path::{Path, PathBuf};
use std::time::Instant;

use stoker::source::SkipReason;
use stoker::{Augment, Dataset, OnError, Pipeline, SampleErrorKind};

use watched::WATCHDOG;

/// A class folder tree: `cat/` with two JPEGs, a FIFO, a symlink to `/dev/zero` and a
/// broken symlink, all named `.jpg`; `dog/` with one JPEG and the unreadable `dog/locked/`
/// holding one more. Returns the tree's root.
fn tree(dir: &Path) -> PathBuf {
    let root = dir.join("data");
    let jpg = std::fs::read(common::data_dir().join("formats/coffee.jpg")).expect("jpg");
    for rel in ["cat/a.jpg", "cat/b.jpg", "dog/c.jpg", "dog/locked/d.jpg"] {
        common::write(&root, rel, &jpg);
    }
    common::mkfifo(&root.join("cat/fifo.jpg"));
    std::os::unix::fs::symlink("/dev/zero", root.join("cat/zero.jpg")).expect("symlink");
    std::os::unix::fs::symlink(root.join("gone.jpg"), root.join("cat/broken.jpg"))
        .expect("symlink");
    let mode = |p: &Path, m: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
    };
    mode(&root.join("dog/locked"), 0o000);
    // Root reads every folder whatever its mode: the commands then run as `nobody`, who
    // must be able to reach the rest.
    for p in [dir, root.as_path()] {
        mode(p, 0o755);
    }
    root
}

/// Runs `stoker args.. --json`, as `nobody` when this is root (so that a folder of mode
/// 000 is unreadable), under the watchdog: returns (exit code, stdout as JSON).
fn run_watched(args: &[&str]) -> (i32, serde_json::Value) {
    let r = watched::stoker(args, true);
    (r.code, r.json)
}

fn skipped_of(v: &serde_json::Value) -> Vec<(String, String)> {
    v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap_or_default().to_string(),
                s["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn listing_reports_special_files_and_lists_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = tree(dir.path());
    // In this process (root or not) the locked folder may be readable: the reasons of the
    // special files are what this checks; the CLI run below checks the locked folder.
    let d = Dataset::image_folder(&root).expect("list");
    let by_path: Vec<(&str, &SkipReason)> = d
        .skipped()
        .iter()
        .map(|s| (s.path.as_str(), &s.reason))
        .collect();
    assert!(
        by_path.contains(&("cat/fifo.jpg", &SkipReason::NotAFile("FIFO".into()))),
        "{by_path:?}"
    );
    assert!(
        by_path.contains(&(
            "cat/zero.jpg",
            &SkipReason::NotAFile("character device".into())
        )),
        "{by_path:?}"
    );
    assert!(
        by_path
            .iter()
            .any(|(p, r)| *p == "cat/broken.jpg" && matches!(r, SkipReason::Unreadable(_))),
        "{by_path:?}"
    );
    let paths: Vec<&str> = d.samples().iter().map(|s| s.path.as_str()).collect();
    for p in ["cat/a.jpg", "cat/b.jpg", "dog/c.jpg"] {
        assert!(paths.contains(&p), "{paths:?}");
    }

    // The CLI, as a user that cannot read `dog/locked/`: the folder is reported, the
    // rest listed and inspected.
    let (code, v) = run_watched(&["inspect", root.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["samples"], 3, "{v}");
    let skipped = skipped_of(&v);
    let find = |path: &str| {
        skipped
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("{path} not reported: {skipped:?}"))
    };
    assert!(find("cat/fifo.jpg").contains("FIFO"));
    assert!(find("cat/zero.jpg").contains("character device"));
    assert!(find("cat/broken.jpg").contains("cannot be read"));
    assert!(find("dog/locked/").contains("ermission denied"));
}

/// A file list naming the FIFO and `/dev/zero` (listing a list does not look at the
/// files): every epoch reports both with kind `Io` and delivers the rest, on every backend.
#[test]
fn a_listed_fifo_or_device_is_reported_every_epoch_not_waited_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = tree(dir.path());
    let list = root.join("list.txt");
    std::fs::write(
        &list,
        "cat/a.jpg 0\ncat/fifo.jpg 0\ncat/zero.jpg 0\ndog/c.jpg 1\n",
    )
    .expect("list");
    let data = Dataset::files(&list).expect("list");
    assert_eq!(data.len(), 4);
    for backend in common::backends() {
        let pipe = Pipeline::builder(data.clone().all())
            .backend(backend)
            .augment(Augment::new().resize(16, 16))
            .batch_size(4)
            .on_error(OnError::Skip)
            .build()
            .expect("pipeline");
        for epoch in 0..2 {
            let start = Instant::now();
            let (mut delivered, mut reported) = (0, Vec::new());
            for b in pipe.epoch(epoch).expect("epoch") {
                let b = b.expect("batch");
                delivered += b.len();
                for e in b.errors() {
                    assert_eq!(e.kind, SampleErrorKind::Io, "{e}");
                    assert!(e.reason.contains("not a regular file"), "{e}");
                    reported.push(e.path.clone());
                }
            }
            reported.sort();
            assert_eq!(reported, ["cat/fifo.jpg", "cat/zero.jpg"], "{backend:?}");
            assert_eq!(delivered, 2, "{backend:?}");
            assert!(
                start.elapsed() < WATCHDOG,
                "{backend:?} took {:?}",
                start.elapsed()
            );
        }
    }
}

/// `decode`, `inspect`, `convert` and `bench pipeline` over the special files finish under
/// the watchdog and say what they could not read.
#[test]
fn the_commands_finish_and_name_what_they_could_not_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = tree(dir.path());
    let s = |p: &Path| p.to_str().expect("utf-8").to_string();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }

    let (code, v) = run_watched(&[
        "decode",
        &s(&root.join("cat/fifo.jpg")),
        &s(&root.join("cat/zero.jpg")),
        &s(&root.join("cat/a.jpg")),
        "--out",
        &s(&out.join("png")),
    ]);
    assert_eq!(code, 1, "one of three decoded: partial: {v}");
    let errors = v["errors"].to_string();
    assert!(errors.contains("FIFO"), "{v}");
    assert!(errors.contains("character device"), "{v}");

    let list = root.join("list.txt");
    std::fs::write(&list, "cat/a.jpg\ncat/fifo.jpg\ncat/zero.jpg\n").expect("list");
    let (code, v) = run_watched(&["inspect", &s(&list), "--decode"]);
    assert_eq!(code, 1, "partial: {v}");
    let errors = v["errors"].to_string();
    assert!(errors.contains("FIFO"), "{v}");
    assert!(errors.contains("character device"), "{v}");

    let (code, v) = run_watched(&[
        "convert",
        &s(&root),
        "--to",
        "tar",
        "--out",
        &s(&out.join("shards")),
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["samples"], 3, "{v}");

    let r = watched::stoker(&watched::small_bench(&root), true);
    let (code, v) = (r.code, r.json);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["results"][0]["delivered"], 3, "{v}");
}

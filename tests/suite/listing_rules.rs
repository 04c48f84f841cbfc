//! The rules every listing source follows (docs/sources.md): a path outside the dataset's
//! folder is refused unless allowed; a sample without a label in a labelled dataset is
//! reported, never delivered unlabelled; what a COCO file holds is attributed to an image
//! or reported (duplicate image ids, annotations of no image, unknown categories,
//! duplicate annotation ids); a CSV manifest's bad row is named by its real line.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use stoker::source::Location;
use stoker::{Dataset, SampleErrorKind};

/// A real JPEG at `dir/name`.
fn jpeg(dir: &Path, name: &str) {
    let bytes = std::fs::read(common::data_dir().join("formats/coffee.jpg")).expect("jpg");
    common::write(dir, name, &bytes);
}

/// The reason a sample is reported with, if it is.
fn refused(data: &Dataset, path: &str) -> Option<String> {
    let s = data
        .samples()
        .iter()
        .find(|s| s.path == path)
        .unwrap_or_else(|| panic!("no sample {path:?} in {:?}", paths(data)));
    match &s.location {
        Location::Refused { kind, reason } => {
            assert_eq!(*kind, SampleErrorKind::Label, "{path}: {reason}");
            Some(reason.to_string())
        }
        _ => None,
    }
}

fn paths(data: &Dataset) -> Vec<String> {
    data.samples().iter().map(|s| s.path.clone()).collect()
}

/// One epoch: what is delivered (path, label, box count) and what is reported (path,
/// reason), sorted by path.
type Delivered = Vec<common::DeliveredSample>;

fn epoch(data: &Dataset) -> (Delivered, BTreeMap<String, String>) {
    let pipe = common::skipping_pipeline(data, 3);
    let (delivered, errors) = common::delivered_and_reported(&pipe, data, 0);
    let mut reported = BTreeMap::new();
    for e in errors {
        assert_eq!(e.kind, SampleErrorKind::Label, "{e}");
        reported.insert(e.path, e.reason);
    }
    (delivered, reported)
}

/// Two image entries with one id refuse the file, naming both: their annotations could
/// not be told apart (the second image used to be delivered with no boxes).
#[test]
fn coco_refuses_two_images_with_one_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let coco = serde_json::json!({
        "images": [
            {"id": 1, "file_name": "a.jpg"},
            {"id": 1, "file_name": "b.jpg"},
        ],
        "annotations": [{"id": 5, "image_id": 1, "category_id": 1, "bbox": [1, 1, 4, 4]}],
        "categories": [{"id": 1, "name": "cat"}],
    });
    let ann = dir.path().join("ann.json");
    std::fs::write(&ann, coco.to_string()).expect("write");
    let e = Dataset::coco(&ann, dir.path())
        .expect_err("one id, two images")
        .to_string();
    assert!(
        e.contains("image id 1") && e.contains("a.jpg") && e.contains("b.jpg"),
        "{e}"
    );
}

/// Annotations of no image, an unknown category and a shared annotation id are each
/// reported, every epoch, with the annotation's id; the rest is delivered with its boxes.
#[test]
fn coco_reports_annotations_it_cannot_attribute() {
    let dir = tempfile::tempdir().expect("tempdir");
    for n in ["good.jpg", "unknown.jpg", "twice.jpg", "none.jpg"] {
        jpeg(dir.path(), n);
    }
    let coco = serde_json::json!({
        "images": [
            {"id": 1, "file_name": "good.jpg"},
            {"id": 2, "file_name": "unknown.jpg"},
            {"id": 3, "file_name": "twice.jpg"},
            {"id": 4, "file_name": "none.jpg"},
        ],
        "annotations": [
            {"id": 10, "image_id": 1, "category_id": 1, "bbox": [0, 0, 500, 350]},
            {"id": 11, "image_id": 1, "category_id": 2, "bbox": [50, 40, 400, 300]},
            {"id": 20, "image_id": 2, "category_id": 1, "bbox": [1, 1, 4, 4]},
            {"id": 21, "image_id": 2, "category_id": 7, "bbox": [1, 1, 4, 4]},
            {"id": 30, "image_id": 3, "category_id": 1, "bbox": [1, 1, 4, 4]},
            {"id": 30, "image_id": 3, "category_id": 1, "bbox": [1, 1, 4, 4]},
            {"id": 40, "image_id": 99, "category_id": 1, "bbox": [1, 1, 4, 4]},
            {"id": 41, "image_id": 99, "category_id": 2, "bbox": [1, 1, 4, 4]},
        ],
        "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}],
    });
    let ann = dir.path().join("ann.json");
    std::fs::write(&ann, coco.to_string()).expect("write");
    let data = Dataset::coco(&ann, dir.path()).expect("coco");

    let unknown = refused(&data, "unknown.jpg").expect("an unknown category is reported");
    assert!(
        unknown.contains("annotation 21") && unknown.contains("category_id 7"),
        "{unknown}"
    );
    let twice = refused(&data, "twice.jpg").expect("a shared annotation id is reported");
    assert!(twice.contains("annotation id 30"), "{twice}");
    let orphans = data
        .samples()
        .iter()
        .find(|s| s.path.contains("99"))
        .map(|s| s.path.clone())
        .expect("the annotations of image 99 are listed");
    let why = refused(&data, &orphans).expect("reported");
    assert!(
        why.contains("40") && why.contains("41") && why.contains("image id 99"),
        "{why}"
    );
    assert_eq!(refused(&data, "good.jpg"), None);
    assert_eq!(refused(&data, "none.jpg"), None);

    // Every epoch delivers the rest, with their boxes once each, and reports these.
    let (delivered, reported) = epoch(&data);
    assert_eq!(
        delivered,
        [
            ("good.jpg".to_string(), None, 2),
            ("none.jpg".to_string(), None, 0)
        ]
    );
    assert_eq!(
        reported.keys().cloned().collect::<Vec<_>>(),
        [orphans, "twice.jpg".to_string(), "unknown.jpg".to_string()]
    );
}

/// A record without a label in a labelled manifest (JSON Lines: no `label` or a null;
/// CSV: an empty cell) or a file list is reported with its line, never delivered
/// unlabelled; an unlabelled manifest stays unlabelled.
#[test]
fn a_missing_label_in_a_labelled_list_or_manifest_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    for n in ["a.jpg", "b.jpg", "c.jpg"] {
        jpeg(dir.path(), n);
    }
    let d = dir.path();
    let lists = [
        (
            "m.jsonl",
            "{\"path\": \"a.jpg\", \"label\": 1}\n{\"path\": \"b.jpg\"}\n\n{\"path\": \"c.jpg\", \"label\": null}\n",
            ["m.jsonl:2", "m.jsonl:4"],
        ),
        (
            "m.csv",
            "path,label\nb.jpg,\na.jpg,1\nc.jpg,\n",
            ["m.csv:2", "m.csv:4"],
        ),
        ("list.txt", "a.jpg 1\nb.jpg\n\nc.jpg\n", ["line 2", "line 4"]),
    ];
    for (name, text, lines) in lists {
        std::fs::write(d.join(name), text).expect("write");
        let data = if name.ends_with(".txt") {
            Dataset::files(d.join(name))
        } else {
            Dataset::from_manifest(d.join(name))
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (path, line) in ["b.jpg", "c.jpg"].iter().zip(lines) {
            let why = refused(&data, path).unwrap_or_else(|| panic!("{name}: {path} delivered"));
            assert!(
                why.contains(line) && why.contains("no label"),
                "{name}: {why}"
            );
        }
        let (delivered, reported) = epoch(&data);
        assert_eq!(delivered, [("a.jpg".to_string(), Some(1), 0)], "{name}");
        assert_eq!(reported.len(), 2, "{name}: {reported:?}");
    }
    // Without any label, nothing is missing.
    std::fs::write(
        d.join("u.jsonl"),
        "{\"path\": \"a.jpg\"}\n{\"path\": \"b.jpg\"}\n",
    )
    .expect("write");
    let data = Dataset::from_manifest(d.join("u.jsonl")).expect("unlabelled");
    assert_eq!(refused(&data, "a.jpg"), None);
    assert_eq!(refused(&data, "b.jpg"), None);
}

/// A null in a Parquet file's label column, where other rows have labels, is reported
/// with its row.
#[cfg(feature = "parquet")]
#[test]
fn a_null_parquet_label_is_reported() {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch};
    let dir = tempfile::tempdir().expect("tempdir");
    let img = std::fs::read(common::data_dir().join("formats/coffee.jpg")).expect("jpg");
    let images: ArrayRef = Arc::new(BinaryArray::from_iter_values([&img, &img, &img]));
    let labels: ArrayRef = Arc::new(Int64Array::from(vec![Some(2), None, Some(0)]));
    let batch = RecordBatch::try_from_iter([("image", images), ("label", labels)]).expect("batch");
    let path = dir.path().join("t.parquet");
    let f = std::fs::File::create(&path).expect("create");
    let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), None).expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");
    let data = Dataset::parquet(std::slice::from_ref(&path)).expect("parquet");
    let why = refused(&data, "t.parquet/00000001").expect("the null label is reported");
    assert!(why.contains("row 1") && why.contains("no label"), "{why}");
    assert_eq!(refused(&data, "t.parquet/00000000"), None);
    let (delivered, reported) = epoch(&data);
    assert_eq!(
        delivered,
        [
            ("t.parquet/00000000".to_string(), Some(2), 0),
            ("t.parquet/00000002".to_string(), Some(0), 0)
        ]
    );
    assert_eq!(reported.len(), 1);
}

/// A CSV row's line is the reader's: blank lines and a quoted path over two lines count.
#[test]
fn csv_rows_are_named_by_their_real_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("m.csv");
    std::fs::write(
        &m,
        "path,label\na.jpg,1\n\nb.jpg,cat\n\"two\nlines.jpg\",2\nc.jpg,dog\n",
    )
    .expect("write");
    let data = Dataset::from_manifest(&m).expect("manifest");
    let b = refused(&data, "b.jpg").expect("b");
    assert!(b.contains("m.csv:4:"), "{b}");
    let c = refused(&data, "c.jpg").expect("c");
    assert!(c.contains("m.csv:7:"), "{c}");
    // A malformed row refuses the manifest, naming its line.
    std::fs::write(&m, "path,label\na.jpg,1\n\n\nb.jpg,1,extra\n").expect("write");
    let e = Dataset::from_manifest(&m)
        .expect_err("malformed")
        .to_string();
    assert!(e.contains("m.csv:5"), "{e}");
}

/// `dir/outside.jpg` and `dir/data/in.jpg`: the folder `dir/data` and the outside file's
/// absolute path.
fn outside_and_in(dir: &Path) -> (std::path::PathBuf, String) {
    let data = dir.join("data");
    jpeg(dir, "outside.jpg");
    jpeg(&data, "in.jpg");
    let abs = dir.join("outside.jpg");
    (data, abs.to_str().expect("utf-8").to_string())
}

/// Paths outside the dataset's folder (`..`, absolute) in a manifest (image or mask) or a
/// COCO file are refused by default, naming the line or image.
#[test]
fn paths_outside_the_folder_are_refused_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, abs) = outside_and_in(dir.path());
    let abs = abs.as_str();
    let manifests = [
        (
            "m.jsonl",
            "{\"path\": \"in.jpg\"}\n{\"path\": \"../outside.jpg\"}\n".to_string(),
            "m.jsonl:2",
        ),
        ("a.jsonl", format!("{{\"path\": {abs:?}}}\n"), "a.jsonl:1"),
        (
            "k.jsonl",
            "{\"path\": \"in.jpg\", \"mask\": \"../outside.jpg\"}\n".to_string(),
            "k.jsonl:1",
        ),
        (
            "m.csv",
            "path,label\nin.jpg,1\nsub/../../outside.jpg,2\n".to_string(),
            "m.csv:3",
        ),
    ];
    for (name, text, at) in &manifests {
        std::fs::write(data.join(name), text).expect("write");
        let e = Dataset::from_manifest(data.join(name))
            .expect_err(name)
            .to_string();
        assert!(e.contains(at) && e.contains("outside.jpg"), "{name}: {e}");
    }
    for file in ["../outside.jpg", abs] {
        let coco = serde_json::json!({"images": [{"id": 3, "file_name": file}]});
        std::fs::write(data.join("c.json"), coco.to_string()).expect("write");
        let e = Dataset::coco(data.join("c.json"), &data)
            .expect_err(file)
            .to_string();
        assert!(e.contains("image 3") && e.contains("outside.jpg"), "{e}");
    }
}

/// `ListingOptions::allow_outside_root` lets a file list, a manifest and a COCO file name
/// files outside their folder: the sample then reads the file named.
#[test]
fn paths_outside_the_folder_are_read_when_allowed() {
    use stoker::ListingOptions;
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, abs) = outside_and_in(dir.path());
    let want = std::fs::read(dir.path().join("outside.jpg")).expect("read");
    let allow = ListingOptions::new().allow_outside_root(true);
    std::fs::write(data.join("list.txt"), "in.jpg\n../outside.jpg\n").expect("write");
    std::fs::write(
        data.join("m.jsonl"),
        format!("{{\"path\": \"in.jpg\"}}\n{{\"path\": {abs:?}}}\n"),
    )
    .expect("write");
    let coco = serde_json::json!({"images": [
        {"id": 1, "file_name": "in.jpg"},
        {"id": 2, "file_name": "../outside.jpg"},
    ]});
    std::fs::write(data.join("c.json"), coco.to_string()).expect("write");
    let refused = [
        Dataset::files(data.join("list.txt")).is_err(),
        Dataset::from_manifest(data.join("m.jsonl")).is_err(),
        Dataset::coco(data.join("c.json"), &data).is_err(),
    ];
    assert_eq!(refused, [true; 3], "refused by default");
    for listed in [
        Dataset::files_with(data.join("list.txt"), &allow),
        Dataset::from_manifest_with(data.join("m.jsonl"), &allow),
        Dataset::coco_with(data.join("c.json"), &data, &allow),
    ] {
        let listed = listed.expect("allowed");
        assert_eq!(listed.len(), 2);
        let s = listed
            .samples()
            .iter()
            .find(|s| s.path.contains("outside"))
            .expect("the outside file is a sample");
        assert_eq!(
            s.location.read(u64::MAX).expect("reads"),
            want,
            "{}",
            s.path
        );
        let (delivered, reported) = epoch(&listed);
        assert_eq!((delivered.len(), reported.len()), (2, 0));
    }
}

/// `stoker render --manifest` refuses a path outside the manifest's folder, naming it,
/// and renders it with `--allow-outside-root`.
#[test]
fn render_allows_outside_paths_only_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    jpeg(dir.path(), "outside.jpg");
    let m = common::write(&data, "m.jsonl", b"{\"path\": \"../outside.jpg\"}\n");
    let render = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_stoker"))
            .args(["render", "--manifest"])
            .arg(&m)
            .args(["--backend", "cpu", "--n", "1", "--size", "32", "--out"])
            .arg(dir.path().join("sheet.png"))
            .args(extra)
            .output()
            .expect("run stoker")
    };
    let out = render(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("../outside.jpg") && stderr.contains("m.jsonl:1"),
        "{stderr}"
    );
    let out = render(&["--allow-outside-root"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("sheet.png").is_file());
}

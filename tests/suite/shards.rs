//! TFRecord and WebDataset tar shards as sources: the samples, labels and masks they hold,
//! stable ids, sidecar indexes, exactly-once delivery through a pipeline, and damaged
//! records reported with their shard and record while the rest is delivered.
//!
//! The shards here are written by the test itself: TFRecord framing and `tf.train.Example`
//! protobuf encoding byte by byte from the formats' definitions, tar files by the `tar`
//! crate.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::TestRng;
use stoker::source::shards::{index_path, masked_crc};
use stoker::{Augment, BackendKind, DType, Dataset, OnError, Pipeline, SampleErrorKind};

// ---------------------------------------------------------------------------------------
// Writers.

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(num: u64, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    varint(num << 3 | 2, &mut v);
    varint(body.len() as u64, &mut v);
    v.extend_from_slice(body);
    v
}

/// A `tf.train.Example` with bytes and int64 (packed) features.
fn example(bytes: &[(&str, &[u8])], ints: &[(&str, i64)]) -> Vec<u8> {
    let mut features = Vec::new();
    for (k, v) in bytes {
        let feature = field(1, &field(1, v));
        features.extend(field(
            1,
            &[field(1, k.as_bytes()), field(2, &feature)].concat(),
        ));
    }
    for (k, v) in ints {
        let mut packed = Vec::new();
        varint(*v as u64, &mut packed);
        let feature = field(3, &field(1, &packed));
        features.extend(field(
            1,
            &[field(1, k.as_bytes()), field(2, &feature)].concat(),
        ));
    }
    field(1, &features)
}

fn tfrecord(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let len = (r.len() as u64).to_le_bytes();
        out.extend_from_slice(&len);
        out.extend_from_slice(&masked_crc(&len).to_le_bytes());
        out.extend_from_slice(r);
        out.extend_from_slice(&masked_crc(r).to_le_bytes());
    }
    out
}

/// A tar file of `members` (ustar headers, written by the `tar` crate).
fn tar(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        out.append_data(&mut h, name, &data[..])
            .expect("tar member");
    }
    out.into_inner().expect("tar")
}

/// One sample: its image, label and mask.
struct Item {
    image: Vec<u8>,
    label: u32,
    mask: Option<Vec<u8>>,
}

/// `n` samples; every one with a mask when `masks` (a pipeline pairs masks for all or
/// none).
fn items(n: usize, seed: u64, masks: bool) -> Vec<Item> {
    let mut rng = TestRng(seed);
    (0..n)
        .map(|i| {
            let (w, h) = (16 + rng.below(24) as u32, 16 + rng.below(24) as u32);
            let rgb = common::random_rgb(&mut rng, w, h);
            let mask = masks.then(|| {
                let ids: Vec<u16> = (0..w * h).map(|p| ((p / 7) % 3) as u16).collect();
                common::png_labels(w, h, &ids, false)
            });
            Item {
                image: common::png_rgb(w, h, &rgb),
                label: (i % 5) as u32,
                mask,
            }
        })
        .collect()
}

fn records(items: &[Item]) -> Vec<Vec<u8>> {
    items
        .iter()
        .map(|it| {
            let mut bytes: Vec<(&str, &[u8])> = vec![("image/encoded", &it.image)];
            if let Some(m) = &it.mask {
                bytes.push(("image/segmentation/class/encoded", m));
            }
            example(&bytes, &[("image/class/label", i64::from(it.label))])
        })
        .collect()
}

fn tar_members(items: &[Item], first: usize) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let key = format!("s{:05}", first + i);
        // A JPEG-named member is what WebDataset writers produce for photos; the bytes
        // here are PNG (the decoder goes by content), and a PNG beside it is the mask.
        out.push((format!("{key}.jpg"), it.image.clone()));
        out.push((format!("{key}.cls"), it.label.to_string().into_bytes()));
        if let Some(m) = &it.mask {
            out.push((format!("{key}.png"), m.clone()));
        }
    }
    out
}

/// [`deliver`], for a subset whose samples are all good: checks that none is reported and
/// that `n` are delivered.
fn deliver_all(subset: stoker::Subset, n: usize) {
    let (seen, errors) = deliver(subset);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(seen.len(), n);
}

/// Delivers every sample of `subset` once through a CPU pipeline; returns, by id, the
/// label, and the reported errors.
fn deliver(subset: stoker::Subset) -> (BTreeMap<u64, i64>, Vec<stoker::SampleError>) {
    let pipe = Pipeline::builder(subset)
        .backend(BackendKind::Cpu)
        .augment(Augment::new().resize(8, 8).dtype(DType::U8))
        .batch_size(3)
        .on_error(OnError::Skip)
        .build()
        .expect("pipeline");
    let mut seen = BTreeMap::new();
    let errors = common::walk_epoch(&pipe, 0, |b| {
        for (id, label) in b.ids().iter().zip(b.labels_i64(-1)) {
            assert!(
                seen.insert(*id, label).is_none(),
                "{id:016x} delivered twice"
            );
        }
    });
    (seen, errors)
}

/// The shard `bytes` written alone as `dir/name` (a tar file or TFRecords, as its name
/// says), listed and delivered: the samples listed, and [`deliver`]'s answer.
fn deliver_shard(
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> (usize, BTreeMap<u64, i64>, Vec<stoker::SampleError>) {
    let shard = [write(dir, name, bytes)];
    let data = if name.ends_with(".tar") {
        Dataset::tar(&shard)
    } else {
        Dataset::tfrecord(&shard)
    }
    .expect("listing");
    let listed = data.len();
    let (seen, errors) = deliver(data.all());
    (listed, seen, errors)
}

/// `items` in two TFRecord shards of `dir`, `a.tfrecord` (the first `split`) and
/// `b.tfrecord`, listed.
fn two_tfrecords(dir: &Path, items: Vec<Item>, split: usize) -> Dataset {
    write(dir, "a.tfrecord", &tfrecord(&records(&items[..split])));
    write(dir, "b.tfrecord", &tfrecord(&records(&items[split..])));
    Dataset::tfrecord(&[dir.to_path_buf()]).expect("listing")
}

/// The bundled shards' folder and what its `expected.json` says they hold.
fn bundled_shards() -> (PathBuf, serde_json::Value) {
    let root = common::data_dir().join("shards");
    let text = std::fs::read(root.join("expected.json")).expect("expected.json");
    (root, serde_json::from_slice(&text).expect("json"))
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    common::write(dir, name, bytes)
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn tfrecord_shards_list_read_and_deliver_every_record_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(11, 1, true);
    let (a, b) = all.split_at(6);
    write(dir.path(), "train-0.tfrecord", &tfrecord(&records(a)));
    write(dir.path(), "train-1.tfrecord", &tfrecord(&records(b)));
    let data = Dataset::tfrecord(&[dir.path().to_path_buf()]).expect("listing");
    assert_eq!(data.len(), 11);
    assert!(index_path(&dir.path().join("train-0.tfrecord")).is_file());
    // Stable ids: the same listing again (from the sidecar index) gives the same samples.
    let again = Dataset::tfrecord(&[
        dir.path().join("train-1.tfrecord"),
        dir.path().join("train-0.tfrecord"),
    ])
    .expect("listing from the index");
    assert_eq!(
        data.samples()
            .iter()
            .map(|s| (s.id, s.label))
            .collect::<Vec<_>>(),
        again
            .samples()
            .iter()
            .map(|s| (s.id, s.label))
            .collect::<Vec<_>>()
    );
    for (s, it) in data.samples().iter().zip(&all) {
        assert_eq!(s.label, Some(it.label), "{}", s.path);
        assert_eq!(s.mask.is_some(), it.mask.is_some(), "{}", s.path);
    }
    // Every record's image and mask bytes read back as written.
    for (s, it) in data.samples().iter().zip(&all) {
        let stoker::source::Location::Record(f) = &s.location else {
            panic!("{}: not a record", s.path);
        };
        let mut buf = Vec::new();
        stoker::source::shards::read_field(f, u64::MAX, &mut buf).expect("reads");
        assert_eq!(buf, it.image, "{}", s.path);
    }
    deliver_all(data.all(), 11);
}

#[test]
fn damaged_tfrecords_are_reported_with_shard_and_record_and_the_rest_is_delivered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(8, 2, false);
    let recs = records(&all);
    let mut shard = tfrecord(&recs);
    // Record 2: one flipped byte in its data (the data checksum fails).
    let start2: usize = recs[..2].iter().map(|r| r.len() + 16).sum();
    shard[start2 + 12 + 20] ^= 0x40;
    // Record 5: a damaged length (the length checksum fails); indexing resumes after it.
    let start5: usize = recs[..5].iter().map(|r| r.len() + 16).sum();
    shard[start5] ^= 0x01;
    // The shard cut short inside its last record.
    let cut = shard.len() - 9;
    shard.truncate(cut);
    let (_, seen, errors) = deliver_shard(dir.path(), "bad.tfrecord", &shard);
    let bad: Vec<(String, SampleErrorKind)> =
        errors.iter().map(|e| (e.path.clone(), e.kind)).collect();
    println!("{errors:#?}");
    for e in &errors {
        assert_eq!(e.kind, SampleErrorKind::Corrupt, "{e}");
        assert!(e.reason.contains("bad.tfrecord record"), "{e}");
    }
    assert!(
        bad.iter().any(|(p, _)| p == "bad.tfrecord/00000002"),
        "{bad:?}"
    );
    assert!(errors.iter().any(|e| e.reason.contains("checksum")));
    assert!(errors.iter().any(|e| e.reason.contains("cut short")));
    // Records 0, 1, 3, 4 and 6 are intact and delivered; 2, 5 and 7 are reported.
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert_eq!(
        seen.len() + errors.len(),
        data_len(&dir.path().join("bad.tfrecord"))
    );
}

fn data_len(shard: &Path) -> usize {
    Dataset::tfrecord(&[shard.to_path_buf()])
        .expect("listing")
        .len()
}

#[test]
fn a_changed_shard_is_indexed_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(4, 3, false);
    let p = write(dir.path(), "s.tfrecord", &tfrecord(&records(&all[..2])));
    assert_eq!(
        Dataset::tfrecord(std::slice::from_ref(&p))
            .expect("listing")
            .len(),
        2
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(dir.path(), "s.tfrecord", &tfrecord(&records(&all)));
    assert_eq!(
        Dataset::tfrecord(std::slice::from_ref(&p))
            .expect("listing")
            .len(),
        4
    );
    // A garbled sidecar is ignored and rebuilt.
    std::fs::write(index_path(&p), b"{not json").expect("write");
    assert_eq!(Dataset::tfrecord(&[p]).expect("listing").len(), 4);
}

#[test]
fn tar_shards_group_members_by_key_with_labels_and_masks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(9, 4, true);
    let (a, b) = all.split_at(5);
    write(dir.path(), "train-000000.tar", &tar(&tar_members(a, 0)));
    write(dir.path(), "train-000001.tar", &tar(&tar_members(b, 5)));
    let data = Dataset::tar(&[dir.path().to_path_buf()]).expect("listing");
    assert_eq!(data.len(), 9);
    for (s, it) in data.samples().iter().zip(&all) {
        assert_eq!(s.label, Some(it.label), "{}", s.path);
        assert_eq!(s.mask.is_some(), it.mask.is_some(), "{}", s.path);
        let stoker::source::Location::Member(m) = &s.location else {
            panic!("{}: not a tar member", s.path);
        };
        let mut buf = Vec::new();
        stoker::source::shards::read_member(m, u64::MAX, &mut buf).expect("reads");
        assert_eq!(buf, it.image, "{}", s.path);
        stoker::source::shards::read_range(&m.shard, m.offset, m.len, u64::MAX, &mut buf)
            .expect("reads");
        assert_eq!(buf, it.image, "{}", s.path);
    }
    assert_eq!(data.samples()[0].path, "train-000000.tar/s00000");
    deliver_all(data.all(), 9);
}

#[test]
fn a_truncated_tar_reports_the_cut_member_and_delivers_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(4, 5, false);
    let mut bytes = tar(&tar_members(&all, 0));
    // Cut inside the last sample's image member (before its label and mask).
    let members = tar_members(&all, 0);
    let mut at = 0;
    for (name, data) in &members {
        if name == "s00003.jpg" {
            at += 512 + data.len() / 2;
            break;
        }
        at += 512 + data.len().div_ceil(512) * 512;
    }
    bytes.truncate(at);
    let (listed, seen, errors) = deliver_shard(dir.path(), "cut.tar", &bytes);
    assert_eq!(listed, 4);
    assert_eq!(seen.len(), 3);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "cut.tar/s00003");
    assert!(errors[0].reason.contains("cut short"), "{}", errors[0]);
}

#[test]
fn splits_and_shards_of_shard_datasets_are_fixed_and_disjoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(20, 6, false);
    write(dir.path(), "a.tfrecord", &tfrecord(&records(&all)));
    let split = |seed| {
        Dataset::tfrecord(&[dir.path().to_path_buf()])
            .expect("listing")
            .split(stoker::SplitSpec::fraction(0.25).seed(seed))
            .expect("split")
    };
    let (s1, s2) = (split(7), split(7));
    let ids = |s: &stoker::Subset| s.samples().iter().map(|x| x.id).collect::<Vec<_>>();
    assert_eq!(ids(&s1.train()), ids(&s2.train()));
    assert_eq!(ids(&s1.val()), ids(&s2.val()));
    let train: std::collections::BTreeSet<u64> = ids(&s1.train()).into_iter().collect();
    assert!(ids(&s1.val()).iter().all(|id| !train.contains(id)));
    assert_eq!(train.len() + s1.val().len(), 20);
}

// ---------------------------------------------------------------------------------------
// Shards written by the real tools (tests/data/shards, see its README.md).

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}

#[test]
fn shards_written_by_tensorflow_and_webdataset_read_as_they_wrote_them() {
    let (root, expected) = bundled_shards();
    // Copies, so the sidecar indexes go to a scratch folder, not into the repository.
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["tfrecord", "tar"] {
        for e in std::fs::read_dir(root.join(sub))
            .expect("fixtures")
            .flatten()
        {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.ends_with(".stoker-index") {
                std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
                std::fs::copy(e.path(), dir.path().join(sub).join(&name)).expect("copy");
            }
        }
    }
    let tf = Dataset::tfrecord(&[dir.path().join("tfrecord")]).expect("tfrecord listing");
    let wds = Dataset::tar(&[dir.path().join("tar")]).expect("tar listing");
    let mut checked = 0;
    for shard in expected["shards"].as_array().expect("shards") {
        let path = shard["path"].as_str().expect("path");
        if path.starts_with("parquet/") {
            continue; // parquet_files_written_by_pyarrow_read_as_written
        }
        let file = path.rsplit('/').next().expect("file name");
        let data = if path.starts_with("tfrecord/") {
            &tf
        } else {
            &wds
        };
        let samples: Vec<&stoker::Sample> = data
            .samples()
            .iter()
            .filter(|s| s.path.starts_with(&format!("{file}/")))
            .collect();
        let want = shard["samples"].as_array().expect("samples");
        assert_eq!(samples.len(), want.len(), "{path}");
        for (s, w) in samples.iter().zip(want) {
            assert_eq!(
                s.label.map(i64::from),
                w["label"].as_i64(),
                "{path}: {}",
                s.path
            );
            let read = |loc: &stoker::source::Location| loc.read(u64::MAX).expect("reads");
            assert_eq!(
                sha256(&read(&s.location)),
                w["image_sha256"].as_str().expect("hash"),
                "{path}: {}",
                s.path
            );
            let mask = s.mask.as_ref().map(|m| sha256(&read(m)));
            assert_eq!(
                mask.as_deref(),
                w["mask_sha256"].as_str(),
                "{path}: {}",
                s.path
            );
            // Shards that record no paths name samples by shard and record, as before.
            if let Some(key) = w["key"].as_str().filter(|_| path.starts_with("tar/")) {
                assert_eq!(s.path, format!("{file}/{key}"));
            } else {
                let record = w["record"].as_u64().expect("record");
                assert_eq!(s.path, format!("{file}/{record:08}"));
            }
            assert_eq!(s.id, stoker::source::sample_id(&s.path));
            checked += 1;
        }
    }
    assert_eq!(checked, 18, "9 samples in each format");
    // Without class names in them, the classes are the labels' numbers.
    assert_eq!(tf.classes(), ["0", "1", "2"]);
    assert_eq!(wds.classes(), ["0", "1", "2"]);
    // And every image decodes through a pipeline (read without the masks, which only
    // some records have).
    let keys = stoker::source::shards::ExampleKeys {
        mask: "no/such/feature".into(),
        ..Default::default()
    };
    deliver_all(
        Dataset::tfrecord_with_keys(&[dir.path().join("tfrecord")], &keys)
            .expect("listing")
            .all(),
        9,
    );
}

// ---------------------------------------------------------------------------------------
// Conversion.

#[test]
fn a_folder_converted_to_shards_reads_back_with_the_same_images_labels_and_masks() {
    use stoker::source::shards::{ShardFormat, ShardWriter};
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(13, 7, true);
    for format in [ShardFormat::TfRecord, ShardFormat::Tar] {
        let out = dir.path().join(format!("{format:?}"));
        let mut w = ShardWriter::new(format, &out, "train", 4000).expect("writer");
        for (i, it) in all.iter().enumerate() {
            w.add(
                &format!("class{}/img{i:03}.png", it.label),
                &it.image,
                Some(it.label),
                it.mask.as_deref(),
            )
            .expect("add");
        }
        let shards = w.finish().expect("finish");
        assert!(shards.len() > 2, "{format:?}: {} shards", shards.len());
        let data = match format {
            ShardFormat::TfRecord => Dataset::tfrecord(std::slice::from_ref(&out)),
            ShardFormat::Tar => Dataset::tar(std::slice::from_ref(&out)),
            ShardFormat::Folder => unreachable!("shard formats only"),
        }
        .expect("listing");
        assert_eq!(data.len(), all.len(), "{format:?}");
        // Each sample is at the path it was written with (the samples sorted by it).
        let mut written: Vec<(String, &Item)> = all
            .iter()
            .enumerate()
            .map(|(i, it)| (format!("class{}/img{i:03}.png", it.label), it))
            .collect();
        written.sort_by(|a, b| a.0.cmp(&b.0));
        for (s, (path, it)) in data.samples().iter().zip(&written) {
            assert_eq!(&s.path, path, "{format:?}");
            assert_eq!(s.id, stoker::source::sample_id(path), "{format:?}");
            assert_eq!(s.label, Some(it.label), "{format:?} {}", s.path);
            let read = |loc: &stoker::source::Location| loc.read(u64::MAX).expect("reads");
            assert_eq!(read(&s.location), it.image, "{format:?} {}", s.path);
            let mask = s.mask.as_ref().map(read);
            assert_eq!(mask.as_deref(), it.mask.as_deref(), "{format:?} {}", s.path);
        }
        deliver_all(data.all(), all.len());
    }
}

#[test]
fn data_parallel_ranks_split_shard_datasets_disjointly_and_completely() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = two_tfrecords(dir.path(), items(17, 8, false), 9);
    let subset = || data.clone().all();
    for epoch in 0..2 {
        let mut union = std::collections::BTreeSet::new();
        let mut total = 0;
        for rank in 0..3 {
            let pipe = Pipeline::builder(subset())
                .backend(BackendKind::Cpu)
                .augment(Augment::new().resize(8, 8).dtype(DType::U8))
                .batch_size(2)
                .shard(rank, 3)
                .build()
                .expect("pipeline");
            for b in pipe.epoch(epoch).expect("epoch") {
                let b = b.expect("batch");
                total += b.len();
                union.extend(b.ids().iter().copied());
            }
        }
        // Ranks are padded to equal length, so a sample may appear on two ranks only as
        // padding; every sample appears somewhere.
        assert_eq!(union.len(), 17, "epoch {epoch}");
        assert!((17..17 + 3).contains(&total), "epoch {epoch}: {total}");
    }
}

#[test]
fn reads_in_any_order_across_shards_return_the_right_bytes() {
    // Each reader thread keeps its shard open with a read-ahead buffer: forward skips,
    // backward seeks, switches between shards and a rewritten shard must all read right.
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (items(7, 9, false), items(5, 10, false));
    write(dir.path(), "a.tfrecord", &tfrecord(&records(&a)));
    write(dir.path(), "b.tfrecord", &tfrecord(&records(&b)));
    let data = Dataset::tfrecord(&[dir.path().to_path_buf()]).expect("listing");
    let want: Vec<&Vec<u8>> = a.iter().chain(&b).map(|it| &it.image).collect();
    let mut rng = TestRng(11);
    let n = data.len();
    let orders: Vec<Vec<usize>> = vec![
        (0..n).collect(),
        (0..n).rev().collect(),
        (0..n).step_by(2).chain((1..n).step_by(2)).collect(),
        (0..40).map(|_| rng.below(n as u64) as usize).collect(),
        (0..n)
            .map(|i| if i % 2 == 0 { i / 2 } else { n - 1 - i / 2 })
            .collect(),
    ];
    for order in &orders {
        for &i in order {
            let got = data.samples()[i].location.read(u64::MAX).expect("reads");
            assert_eq!(&got, want[i], "sample {i} in order {order:?}");
        }
    }
    // The shard rewritten with other records: read again, not from the old buffer.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let c = items(7, 12, false);
    write(dir.path(), "a.tfrecord", &tfrecord(&records(&c)));
    let data = Dataset::tfrecord(&[dir.path().join("a.tfrecord")]).expect("listing");
    for (s, it) in data.samples().iter().zip(&c) {
        assert_eq!(s.location.read(u64::MAX).expect("reads"), it.image);
    }
}

// ---------------------------------------------------------------------------------------
// Damage of every kind: listing and reading never panic, and every listed sample is
// delivered or reported.

mod mutated {
    use super::*;
    use proptest::prelude::*;

    /// A valid TFRecord shard and tar shard of `n` samples, then `edits` applied to each:
    /// (position fraction, xor byte) flips, and an optional cut at a fraction.
    fn damaged(bytes: &[u8], edits: &[(f64, u8)], cut: Option<f64>) -> Vec<u8> {
        let mut b = bytes.to_vec();
        for &(at, x) in edits {
            if !b.is_empty() {
                let i = ((at * b.len() as f64) as usize).min(b.len() - 1);
                b[i] ^= x;
            }
        }
        if let Some(c) = cut {
            b.truncate((c * b.len() as f64) as usize);
        }
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn damaged_shards_list_and_read_without_panicking(
            n in 1usize..6,
            seed in any::<u64>(),
            edits in proptest::collection::vec((0.0f64..1.0, 1u8..=255), 0..4),
            cut in proptest::option::of(0.0f64..1.0),
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let all = items(n, seed, false);
            let tf = damaged(&tfrecord(&records(&all)), &edits, cut);
            let members = tar_members(&all, 0);
            let t = damaged(&tar(&members), &edits, cut);
            write(dir.path(), "x.tfrecord", &tf);
            write(dir.path(), "x.tar", &t);
            for data in [
                Dataset::tfrecord(&[dir.path().join("x.tfrecord")]),
                Dataset::tar(&[dir.path().join("x.tar")]),
            ] {
                // Listing may refuse a shard (a garbled tar header) with an error, never
                // a panic; what it lists is delivered or reported, each sample once.
                let Ok(data) = data else { continue };
                if data.is_empty() {
                    continue;
                }
                for s in data.samples() {
                    let _ = s.location.read(1 << 20);
                }
                let listed = data.len();
                let (seen, errors) = deliver(data.all());
                prop_assert_eq!(seen.len() + errors.len(), listed);
            }
        }
    }
}

#[test]
fn a_header_claiming_an_enormous_record_is_reported_not_allocated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(2, 13, false);
    let mut shard = tfrecord(&records(&all[..1]));
    // A well-formed header (its checksum holds) for a record of 2^64 - 1 bytes.
    let len = u64::MAX.to_le_bytes();
    shard.extend_from_slice(&len);
    shard.extend_from_slice(&masked_crc(&len).to_le_bytes());
    shard.extend_from_slice(&[0u8; 32]);
    let (listed, seen, errors) = deliver_shard(dir.path(), "huge.tfrecord", &shard);
    assert_eq!(listed, 2);
    assert_eq!(seen.len(), 1);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].reason.contains("exceeds the limit"),
        "{}",
        errors[0]
    );
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_files_written_by_pyarrow_read_as_written() {
    let (root, expected) = bundled_shards();
    let mut checked = 0;
    for shard in expected["shards"].as_array().expect("shards") {
        let path = shard["path"].as_str().expect("path");
        if !path.starts_with("parquet/") {
            continue;
        }
        let data = Dataset::parquet(&[root.join(path)]).expect("listing");
        let want = shard["samples"].as_array().expect("samples");
        assert_eq!(data.len(), want.len(), "{path}");
        for (s, w) in data.samples().iter().zip(want) {
            assert_eq!(
                s.label.map(i64::from),
                w["label"].as_i64(),
                "{path}: {}",
                s.path
            );
            let image = s.location.read(u64::MAX).expect("reads");
            assert_eq!(
                sha256(&image),
                w["image_sha256"].as_str().expect("hash"),
                "{path}: {}",
                s.path
            );
            // train.parquet has a mask column with nulls: a null reads as an error.
            match (&s.mask, w["mask_sha256"].as_str()) {
                (Some(m), Some(h)) => assert_eq!(sha256(&m.read(u64::MAX).expect("mask")), h),
                (Some(m), None) => assert!(m.read(u64::MAX).is_err(), "{path}: {}", s.path),
                (None, h) => assert!(h.is_none(), "{path}: {}", s.path),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 18, "9 rows in each of the two files");
    // Every image through a pipeline, in any order (the sampler's permutation reads rows
    // of different row groups one by one).
    deliver_all(
        Dataset::parquet(&[root.join("parquet/hf.parquet")])
            .expect("listing")
            .all(),
        9,
    );
}

/// A truncated Parquet file among good ones is reported (one sample naming it and why,
/// every epoch) and the others delivered; with no good file, the listing fails.
#[cfg(feature = "parquet")]
#[test]
fn a_truncated_parquet_file_is_reported_and_the_others_delivered() {
    let good = std::fs::read(common::data_dir().join("shards/parquet/hf.parquet")).expect("hf");
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.parquet", &good);
    write(dir.path(), "b.parquet", &good);
    write(dir.path(), "c.parquet", &good[..good.len() / 2]);
    let all = [dir.path().to_path_buf()];
    let one = Dataset::parquet(&[dir.path().join("a.parquet")]).expect("one good file");
    let rows = one.len();
    assert!(rows > 0);
    let data = Dataset::parquet(&all).expect("listing goes on past the bad file");
    assert_eq!(data.len(), 2 * rows + 1);
    let bad: Vec<&stoker::Sample> = data
        .samples()
        .iter()
        .filter(|s| s.path.starts_with("c.parquet"))
        .collect();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].path, "c.parquet/@0");
    let (seen, errors) = deliver(data.all());
    assert_eq!(seen.len(), 2 * rows, "the good files' rows are delivered");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind, SampleErrorKind::Corrupt);
    assert_eq!(errors[0].path, "c.parquet/@0");
    assert!(errors[0].reason.contains("c.parquet"), "{}", errors[0]);
    // The bad file alone: nothing can be listed, so that is the error.
    let e = Dataset::parquet(&[dir.path().join("c.parquet")]).expect_err("nothing to list");
    assert!(e.to_string().contains("c.parquet"), "{e}");
}

/// In a folder of shards, an entry named like a shard that is not one (a broken link, a
/// FIFO, a folder) is reported as a sample naming it and why, every epoch, and the good
/// shards are delivered: never dropped without a word, never blocking on the FIFO. Before,
/// such entries were left out of the listing silently.
#[cfg(unix)]
#[test]
fn shards_that_cannot_be_read_are_reported_and_the_others_delivered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let all = items(12, 41, false);
    write(dir.path(), "a.tar", &tar(&tar_members(&all[..6], 0)));
    write(dir.path(), "b.tar", &tar(&tar_members(&all[6..], 6)));
    std::os::unix::fs::symlink(dir.path().join("gone.tar"), dir.path().join("c.tar"))
        .expect("link");
    common::mkfifo(&dir.path().join("d.tar"));
    std::fs::create_dir(dir.path().join("e.tar")).expect("folder");
    let data = Dataset::tar(&[dir.path().to_path_buf()]).expect("listing goes on");
    assert_eq!(data.len(), 12 + 3);
    let (seen, errors) = deliver(data.all());
    assert_eq!(seen.len(), 12, "the good shards' samples are delivered");
    let mut reported: Vec<(&str, &str)> = errors
        .iter()
        .map(|e| (e.path.as_str(), e.reason.as_str()))
        .collect();
    reported.sort();
    assert_eq!(
        reported.iter().map(|r| r.0).collect::<Vec<_>>(),
        ["c.tar/@0", "d.tar/@0", "e.tar/@0"]
    );
    assert!(errors.iter().all(|e| e.kind == SampleErrorKind::Corrupt));
    assert!(reported[0].1.contains("c.tar"), "{}", reported[0].1);
    assert!(reported[1].1.contains("FIFO"), "{}", reported[1].1);
    assert!(reported[2].1.contains("folder"), "{}", reported[2].1);
    // Only bad entries: nothing to list, which is the error, naming one.
    let bad_only = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(
        bad_only.path().join("x"),
        bad_only.path().join("x.tfrecord"),
    )
    .expect("link");
    let e = Dataset::tfrecord(&[bad_only.path().to_path_buf()]).expect_err("nothing to list");
    assert!(e.to_string().contains("x.tfrecord"), "{e}");
}

#[test]
fn every_epoch_over_shards_is_a_new_full_permutation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = two_tfrecords(dir.path(), items(24, 14, false), 12);
    let pipe = Pipeline::builder(data.all())
        .backend(BackendKind::Cpu)
        .augment(Augment::new().resize(8, 8).dtype(DType::U8))
        .batch_size(5)
        .seed(3)
        .build()
        .expect("pipeline");
    let order = |e: u64| -> Vec<u64> {
        pipe.epoch(e)
            .expect("epoch")
            .flat_map(|b| b.expect("batch").ids().to_vec())
            .collect()
    };
    let (e0, e1, e0_again) = (order(0), order(1), order(0));
    let set = |v: &[u64]| v.iter().copied().collect::<std::collections::BTreeSet<_>>();
    assert_eq!(e0.len(), 24);
    assert_eq!(set(&e0).len(), 24, "each record once");
    assert_eq!(set(&e0), set(&e1), "the same records every epoch");
    assert_ne!(e0, e1, "a new order every epoch");
    assert_eq!(e0, e0_again, "the same order for the same epoch");
    // Records of the two shards are interleaved, not read shard by shard.
    let first_shard: std::collections::BTreeSet<u64> = pipe
        .subset()
        .samples()
        .iter()
        .filter(|s| s.path.starts_with("a.tfrecord/"))
        .map(|s| s.id)
        .collect();
    assert!(e0[..12].iter().any(|id| !first_shard.contains(id)));
}

// ---------------------------------------------------------------------------------------
// Damage to 500 samples in 5 shards: every sample a shard held is delivered or reported,
// what cannot be told to a sample is reported against the shard at its offset.

/// The paths of the 500 samples of [`five_shards`]: sample `s{n:05}` in shard `n / 100`.
fn five_paths(ext: &str, tar: bool) -> Vec<String> {
    (0..500)
        .map(|n| {
            let shard = format!("train-{:05}.{ext}", n / 100);
            if tar {
                format!("{shard}/s{n:05}")
            } else {
                format!("{shard}/{:08}", n % 100)
            }
        })
        .collect()
}

/// 500 samples (label `n % 5`) in 5 tar shards `train-0000k.tar` of 100 each, as bytes,
/// the members of each sample an image `s{n:05}.jpg` and a label `s{n:05}.cls`.
fn five_shards(edit: impl Fn(usize, &mut Vec<(String, Vec<u8>)>)) -> Vec<Vec<u8>> {
    let all = items(500, 21, false);
    (0..5)
        .map(|k| {
            let mut members = tar_members(&all[k * 100..(k + 1) * 100], k * 100);
            edit(k, &mut members);
            tar(&members)
        })
        .collect()
}

/// Where the tar header of member `name` is.
fn header_at(bytes: &[u8], name: &str) -> usize {
    (0..bytes.len())
        .step_by(512)
        .find(|&at| bytes[at..].starts_with(name.as_bytes()) && bytes[at + name.len()] == 0)
        .expect("member")
}

/// Edits the tar header at `at` and writes its checksum again (POSIX: the sum of the
/// header's bytes, the checksum field counted as spaces, in six octal digits, a NUL and a
/// space): a header that is intact but says something else.
fn edit_header(bytes: &mut [u8], at: usize, edit: impl FnOnce(&mut [u8])) {
    let h = &mut bytes[at..at + 512];
    edit(h);
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// A tar size field: 11 octal digits and a NUL.
fn octal_size(n: u64) -> [u8; 12] {
    let mut f = [0u8; 12];
    f[..11].copy_from_slice(format!("{n:011o}").as_bytes());
    f
}

/// Writes `shards` (named `train-0000k.<ext>`) to a new folder, lists it, delivers one
/// epoch (CPU, skipping failures) and checks what came of the `expected` samples (the
/// paths of all the samples the shards held): exactly those not in `lost` are delivered,
/// with their labels; the reports are exactly `reports` (path, kind, and text the reason
/// holds after the shard's path), so that every sample is delivered or reported.
/// [`check_damage`] of the five tar shards when exactly `s00242` is lost, reported as
/// `kind`, its reason saying `says`.
fn check_s00242_reported(shards: &[Vec<u8>], kind: SampleErrorKind, says: &str) {
    let reports = [(one(242)[0].clone(), kind, says.to_string())];
    check_damage(shards, "tar", &five_paths("tar", true), &one(242), &reports);
}

/// Shard 2 of [`five_shards`] changed by `damage` (given the shard and the offset of the
/// header of its member `member`), which returns what the report of s00242, of `kind`,
/// must say.
fn s00242_reported_after(
    member: &str,
    kind: SampleErrorKind,
    damage: impl FnOnce(&mut Vec<u8>, usize) -> String,
) {
    let mut shards = five_shards(|_, _| {});
    let at = header_at(&shards[2], member);
    let says = damage(&mut shards[2], at);
    check_s00242_reported(&shards, kind, &says);
}

fn check_damage(
    shards: &[Vec<u8>],
    ext: &str,
    expected: &[String],
    lost: &[String],
    reports: &[(String, SampleErrorKind, String)],
) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (k, bytes) in shards.iter().enumerate() {
        write(dir.path(), &format!("train-{k:05}.{ext}"), bytes);
    }
    let data = if ext == "tar" {
        Dataset::tar(&[dir.path().to_path_buf()])
    } else {
        Dataset::tfrecord(&[dir.path().to_path_buf()])
    }
    .expect("listing");
    let (seen, errors) = deliver(data.all());
    let want: BTreeMap<u64, i64> = expected
        .iter()
        .enumerate()
        .filter(|(_, p)| !lost.contains(p))
        .map(|(n, p)| (stoker::source::sample_id(p), (n % 5) as i64))
        .collect();
    assert_eq!(seen.len(), want.len());
    assert!(seen == want, "delivered other samples or labels");
    let mut got: Vec<(String, SampleErrorKind)> =
        errors.iter().map(|e| (e.path.clone(), e.kind)).collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    let mut wanted: Vec<(String, SampleErrorKind)> =
        reports.iter().map(|(p, k, _)| (p.clone(), *k)).collect();
    wanted.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, wanted, "{errors:#?}");
    for (path, _, says) in reports {
        let e = errors.iter().find(|e| &e.path == path).expect("reported");
        let shard = path.split('/').next().expect("shard");
        let named = dir.path().join(shard).display().to_string();
        assert!(
            e.reason.starts_with(&format!("{named} {says}")),
            "{:?} does not start with {named} {says}",
            e.reason
        );
    }
    // Every sample the shards held is delivered or reported, under its own path or
    // (where the sample cannot be told) under the shard's.
    for p in lost {
        let shard = p.split('/').next().expect("shard");
        assert!(
            got.iter()
                .any(|(r, _)| r == p || r.starts_with(&format!("{shard}/@"))),
            "{p} lost unreported"
        );
    }
}

/// The path of sample `n` in the tar shards, as a vector of one.
fn one(n: usize) -> Vec<String> {
    vec![five_paths("tar", true)[n].clone()]
}

#[test]
fn five_tar_shards_undamaged_deliver_all_500() {
    check_damage(
        &five_shards(|_, _| {}),
        "tar",
        &five_paths("tar", true),
        &[],
        &[],
    );
}

#[test]
fn a_zeroed_header_block_reports_its_sample_finding_9_lost_68() {
    // Before: the zeros read as the end of the archive, and the 68 samples after it were
    // lost without a word. Now: s00242, left without its image, is reported with the
    // offset of the zeros; the samples after it are delivered.
    s00242_reported_after("s00242.jpg", SampleErrorKind::Corrupt, |shard, at| {
        shard[at..at + 512].fill(0);
        format!("sample \"s00242\": damaged region beside it at offset {at}: a block of zeros where a tar header should be")
    });
}

#[test]
fn a_size_of_77777777777_reports_its_sample_finding_9_lost_67() {
    // An intact header (its checksum written again) with a size of 8 GiB - 1, past the
    // end of the shard: before, 67 samples were lost and 1 reported.
    s00242_reported_after("s00242.jpg", SampleErrorKind::Corrupt, |shard, at| {
        edit_header(shard, at, |h| h[124..136].copy_from_slice(b"77777777777\0"));
        let size = shard.len();
        format!("sample \"s00242\": the size of s00242.jpg at offset {at}, 8589934591 bytes, runs past the end of the shard ({size} bytes)")
    });
}

#[test]
fn an_empty_shard_is_reported_against_the_shard_finding_9_lost_136() {
    // Before: the 100 samples of an empty shard vanished without a word. Now the shard is
    // one report at offset 0; its samples cannot be named.
    let mut shards = five_shards(|_, _| {});
    shards[2].clear();
    let lost: Vec<String> = five_paths("tar", true)[200..300].to_vec();
    let reports = [(
        "train-00002.tar/@0".to_string(),
        SampleErrorKind::Corrupt,
        "is empty (0 bytes): not a tar file".to_string(),
    )];
    check_damage(&shards, "tar", &five_paths("tar", true), &lost, &reports);
    // And a shard that is not a tar file at all: one report, not a failed listing.
    shards[2] = b"not a tar file\n".repeat(1000);
    let reports = [(
        "train-00002.tar/@0".to_string(),
        SampleErrorKind::Corrupt,
        "at offset 0: damaged region: a block that is not a tar header, to the end of the shard"
            .to_string(),
    )];
    check_damage(&shards, "tar", &five_paths("tar", true), &lost, &reports);
}

#[test]
fn a_renamed_image_member_reports_its_sample_finding_9() {
    s00242_reported_after("s00242.jpg", SampleErrorKind::Corrupt, |shard, at| {
        edit_header(shard, at, |h| h[..10].copy_from_slice(b"s00242.jpx"));
        "sample \"s00242\" has no image member (members: s00242.jpx, s00242.cls)".into()
    });
}

#[test]
fn a_changed_type_flag_reports_its_sample_finding_9() {
    // The image member made a directory (type '5'), its size and data left as they were.
    s00242_reported_after("s00242.jpg", SampleErrorKind::Corrupt, |shard, at| {
        edit_header(shard, at, |h| h[156] = b'5');
        "sample \"s00242\" has no image member (members: s00242.jpg (type '5', not a regular file), s00242.cls)".into()
    });
}

#[test]
fn a_renamed_label_member_is_a_label_report_finding_9_delivered_label_minus_1() {
    s00242_reported_after("s00242.cls", SampleErrorKind::Label, |shard, at| {
        edit_header(shard, at, |h| h[..10].copy_from_slice(b"s00242.clx"));
        "sample s00242: no label (no cls member), though other samples of the dataset have labels"
            .into()
    });
}

#[test]
fn a_size_512_too_large_reports_its_sample_finding_9_delivered_label_minus_1() {
    // The image's size 512 bytes too large: its data swallows the label's header, and
    // where the next header should be is the label's data. s00242 (its image wrong, its
    // label gone) is reported with that offset.
    let len = items(500, 21, false)[242].image.len() as u64;
    s00242_reported_after("s00242.jpg", SampleErrorKind::Corrupt, |shard, at| {
        edit_header(shard, at, |h| {
            h[124..136].copy_from_slice(&octal_size(len + 512))
        });
        let label_data = header_at(shard, "s00242.cls") + 512;
        let next = header_at(shard, "s00243.jpg");
        format!("sample \"s00242\": damaged region beside it at offset {label_data}: a block that is not a tar header, up to the next tar header, at offset {next}")
    });
}

#[test]
fn a_non_octal_size_reports_its_sample_finding_9_refused_the_dataset() {
    s00242_reported_after("s00242.jpg", SampleErrorKind::Corrupt, |shard, at| {
        edit_header(shard, at, |h| h[124..136].copy_from_slice(b"0000abc1234\0"));
        format!("sample \"s00242\": the size field of s00242.jpg at offset {at} is not a number")
    });
}

#[test]
fn base_256_sizes_are_read_finding_9_refused_the_dataset() {
    // Every member of shard 2 with its size in GNU base-256 (a 0x80 byte, then the size
    // big-endian), as GNU tar writes sizes too large for octal: all 500 are delivered.
    let mut shards = five_shards(|_, _| {});
    let mut at = 0;
    let mut members = 0;
    while shards[2][at] != 0 {
        let size = std::str::from_utf8(&shards[2][at + 124..at + 135])
            .ok()
            .and_then(|s| u64::from_str_radix(s, 8).ok())
            .expect("octal size");
        edit_header(&mut shards[2], at, |h| {
            h[124] = 0x80;
            h[125..128].fill(0);
            h[128..136].copy_from_slice(&size.to_be_bytes());
        });
        at += 512 + (size as usize).div_ceil(512) * 512;
        members += 1;
    }
    assert_eq!(members, 200);
    check_damage(&shards, "tar", &five_paths("tar", true), &[], &[]);
}

#[test]
fn a_header_whose_checksum_fails_reports_its_sample_finding_9_never_verified() {
    s00242_reported_after("s00242.jpg", SampleErrorKind::Corrupt, |shard, at| {
        let digit = &mut shard[at + 150];
        *digit = if *digit == b'0' { b'1' } else { b'0' };
        format!("sample \"s00242\": the tar header of s00242.jpg at offset {at} fails its checksum")
    });
}

#[test]
fn labels_out_of_range_or_not_numbers_are_label_reports() {
    let shards = five_shards(|k, members| {
        if k == 2 {
            for (name, data) in members.iter_mut() {
                match name.as_str() {
                    "s00242.cls" => *data = b"4000000000".to_vec(),
                    "s00243.cls" => *data = b"-1".to_vec(),
                    "s00244.cls" => *data = b"cat".to_vec(),
                    _ => {}
                }
            }
        }
    });
    let lost: Vec<String> = (242..245).flat_map(one).collect();
    let range = "is not a class id from 0 to 1048575";
    // A label report for each sample lost, saying in turn what `says` holds.
    let label_reports = |lost: &[String], says: Vec<String>| {
        assert_eq!(lost.len(), says.len());
        lost.iter()
            .cloned()
            .zip(says)
            .map(|(path, says)| (path, SampleErrorKind::Label, says))
            .collect::<Vec<_>>()
    };
    let reports = label_reports(
        &lost,
        vec![
            format!("sample s00242: label 4000000000 {range}"),
            format!("sample s00243: label -1 {range}"),
            "sample \"s00244\": its label member s00244.cls holds \"cat\", not a class id".into(),
        ],
    );
    check_damage(&shards, "tar", &five_paths("tar", true), &lost, &reports);
    // A TFRecord int64 label out of range, which the index once dropped (delivering the
    // record unlabelled).
    let all = items(500, 21, false);
    let shards: Vec<Vec<u8>> = (0..5)
        .map(|k| {
            let recs: Vec<Vec<u8>> = (k * 100..(k + 1) * 100)
                .map(|n| {
                    let label = match n {
                        242 => 4_000_000_000,
                        243 => -1,
                        _ => (n % 5) as i64,
                    };
                    example(
                        &[("image/encoded", &all[n].image)],
                        &[("image/class/label", label)],
                    )
                })
                .collect();
            tfrecord(&recs)
        })
        .collect();
    let paths = five_paths("tfrecord", false);
    let lost = vec![paths[242].clone(), paths[243].clone()];
    let reports = label_reports(
        &lost,
        vec![
            format!("record 00000042: label 4000000000 {range}"),
            format!("record 00000043: label -1 {range}"),
        ],
    );
    check_damage(&shards, "tfrecord", &paths, &lost, &reports);
}

#[test]
fn a_tfrecord_length_of_1_tib_is_reported_and_the_records_after_it_delivered_finding_9_hid_70() {
    // Record 42 of shard 2 with a length of 1 TiB whose masked CRC holds: it is reported
    // (it runs past the end of the shard) and the 57 records after it are delivered.
    let all = items(500, 21, false);
    let recs: Vec<Vec<Vec<u8>>> = (0..5)
        .map(|k| records(&all[k * 100..(k + 1) * 100]))
        .collect();
    let mut shards: Vec<Vec<u8>> = recs.iter().map(|r| tfrecord(r)).collect();
    let start: usize = recs[2][..42].iter().map(|r| r.len() + 16).sum();
    let len = (1u64 << 40).to_le_bytes();
    shards[2][start..start + 8].copy_from_slice(&len);
    shards[2][start + 8..start + 12].copy_from_slice(&masked_crc(&len).to_le_bytes());
    let left = shards[2].len() - start - 12;
    let paths = five_paths("tfrecord", false);
    let says = format!(
        "record 42 (offset {start}): its length of 1099511627776 bytes exceeds the limit of the {left} bytes the shard holds after its header"
    );
    let reports = [(paths[242].clone(), SampleErrorKind::Corrupt, says)];
    check_damage(&shards, "tfrecord", &paths, &[paths[242].clone()], &reports);
}

#[test]
fn a_header_whose_checksum_fails_with_a_damaged_name_reports_its_sample_once() {
    // A byte of the image's name changed with the checksum left as it was: the name the
    // damaged header gives (`s0x242.jpg`) is not trusted to be a sample of its own
    // beside s00242 (left without its image). Before: 501 listed for 500, s00242
    // reported twice (once as `s0x242`, once for lacking its image). Then the same for
    // its label's header.
    for ext in ["jpg", "cls"] {
        let member = format!("s00242.{ext}");
        s00242_reported_after(&member, SampleErrorKind::Corrupt, |shard, at| {
            shard[at + 2] = b'x';
            format!("sample \"s00242\": the tar header of s0x242.{ext} at offset {at} fails its checksum")
        });
    }
}

/// Writes `bytes` over the shard `path` (the same file), then sets its modification time
/// back to what it was: a shard rewritten as `touch -r` or a deterministic writer and
/// `cp -p` leave it, its size and modification time those its index was made for.
fn rewrite_keeping_mtime(path: &Path, bytes: &[u8]) {
    let before = std::fs::metadata(path).expect("shard");
    assert_eq!(before.len(), bytes.len() as u64, "the same size");
    let mtime = before.modified().expect("mtime");
    std::fs::write(path, bytes).expect("rewrite");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    f.set_modified(mtime).expect("set mtime");
    drop(f);
    let after = std::fs::metadata(path).expect("shard");
    assert_eq!(after.modified().expect("mtime"), mtime);
    assert_eq!(after.len(), before.len());
}

/// `n` samples `s{i:05}` of a tar shard: an image of `len` bytes, every byte `i` after a
/// JPEG's first bytes (never decoded here), and a label `i % 5`.
fn same_size_samples(n: usize, len: usize) -> Vec<(String, Vec<u8>)> {
    let mut members = Vec::new();
    for i in 0..n {
        let mut image = vec![0xFF, 0xD8, 0xFF, 0xE0];
        image.resize(len, i as u8);
        members.push((format!("s{i:05}.jpg"), image));
        members.push((format!("s{i:05}.cls"), (i % 5).to_string().into_bytes()));
    }
    members
}

/// Lists the tar shard `path` and reads every sample's image: each is either the image
/// `members` holds for the sample's key now, or a report that the index is stale (the
/// keys so reported are returned); never another sample's image.
fn read_back(path: &Path, members: &[(String, Vec<u8>)]) -> Vec<String> {
    read_back_reporting(path, members, &["index", "is stale"])
}

/// [`read_back`], with the reports saying each of `says`.
fn read_back_reporting(path: &Path, members: &[(String, Vec<u8>)], says: &[&str]) -> Vec<String> {
    let data = Dataset::tar(&[path.to_path_buf()]).expect("listing");
    assert_eq!(data.len(), members.len() / 2);
    let mut stale = Vec::new();
    for s in data.samples() {
        let key = s.path.rsplit('/').next().expect("key");
        let want = &members
            .iter()
            .find(|(name, _)| name == &format!("{key}.jpg"))
            .expect("a member")
            .1;
        match s.location.read(u64::MAX) {
            Ok(got) => assert!(
                &got == want,
                "{}: delivered the image of sample {}",
                s.path,
                got[4]
            ),
            Err(e) => {
                let e = e.to_string();
                assert!(says.iter().all(|w| e.contains(w)), "{e}");
                stale.push(key.to_string());
            }
        }
    }
    stale
}

#[test]
fn a_tar_shard_rewritten_with_its_size_and_mtime_kept_never_delivers_another_samples_image() {
    for (n, len, swap) in [(6, 5000, (2, 3)), (12, 30_000, (5, 6))] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut members = same_size_samples(n, len);
        let path = write(dir.path(), "s.tar", &tar(&members));
        assert!(read_back(&path, &members).is_empty());
        assert!(index_path(&path).is_file());
        // Two samples' members swapped: the same size, every offset of the index still a
        // member's data, but another sample's.
        let (a, b) = swap;
        members.swap(2 * a, 2 * b);
        members.swap(2 * a + 1, 2 * b + 1);
        rewrite_keeping_mtime(&path, &tar(&members));
        let stale = read_back(&path, &members);
        let size = std::fs::metadata(&path).expect("shard").len();
        if size <= 128 << 10 {
            // A small shard: its content fingerprint changed, the index was rebuilt.
            assert!(stale.is_empty(), "{stale:?}");
        } else {
            // The middle of a large one: each read of the two finds the header before
            // the data names another member, and reports it.
            assert_eq!(stale, [format!("s{a:05}"), format!("s{b:05}")]);
            // The stale sidecar is gone: the next listing indexes the shard again.
            assert!(read_back(&path, &members).is_empty());
        }
    }
}

#[test]
fn a_label_member_changed_with_the_size_and_mtime_kept_is_never_delivered_stale() {
    // A small shard (its fingerprint covers it all) and one of 100 samples changed in the
    // middle (beyond the fingerprint's ends: the read's check finds it).
    for (n, changed) in [(5, 0), (100, 50)] {
        let all = items(n, 31, false);
        let dir = tempfile::tempdir().expect("tempdir");
        let mut members = tar_members(&all, 0);
        let path = write(dir.path(), "s.tar", &tar(&members));
        let (seen, errors) = deliver(
            Dataset::tar(std::slice::from_ref(&path))
                .expect("listing")
                .all(),
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(seen.len(), n);
        let key = format!("s{changed:05}");
        let id = stoker::source::sample_id(&format!("s.tar/{key}"));
        assert_eq!(seen[&id], 0, "label {changed} % 5");
        let cls = members
            .iter_mut()
            .find(|(name, _)| name == &format!("{key}.cls"))
            .expect("label member");
        assert_eq!(cls.1, b"0");
        cls.1 = b"1".to_vec();
        rewrite_keeping_mtime(&path, &tar(&members));
        let (seen, errors) = deliver(
            Dataset::tar(std::slice::from_ref(&path))
                .expect("listing")
                .all(),
        );
        match seen.get(&id) {
            // Indexed again: the label the member gives now.
            Some(label) => {
                assert_eq!(*label, 1, "{key} delivered with its old label");
                assert!(errors.is_empty(), "{errors:?}");
            }
            // Or reported: the index is stale.
            None => {
                assert_eq!(errors.len(), 1, "{errors:?}");
                assert_eq!(errors[0].path, format!("s.tar/{key}"));
                assert_eq!(errors[0].kind, SampleErrorKind::Corrupt);
                assert!(errors[0].reason.contains("is stale"), "{:?}", errors[0]);
                // The next listing indexes the shard again, with the new label.
                let (seen, errors) = deliver(
                    Dataset::tar(std::slice::from_ref(&path))
                        .expect("listing")
                        .all(),
                );
                assert!(errors.is_empty(), "{errors:?}");
                assert_eq!(seen[&id], 1);
            }
        }
        assert_eq!(seen.len() + errors.len(), n);
        if n == 100 {
            let size = std::fs::metadata(&path).expect("shard").len();
            assert!(
                size > 128 << 10,
                "{size} bytes: the change is past the fingerprint"
            );
            assert!(!seen.contains_key(&id), "the read's check reports it");
        }
    }
}

/// A byte of a member's data changed where the shard is stored (the size and modification
/// time kept, past the content fingerprint's ends): the read finds the data's CRC-32C is
/// not the one indexing recorded and reports the sample, never delivering the damaged
/// bytes; the other samples read as they are. Before, headers were checked but not data.
#[test]
fn a_tar_members_data_damaged_in_place_is_reported_never_delivered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let members = same_size_samples(12, 30_000);
    let bytes = tar(&members);
    let path = write(dir.path(), "s.tar", &bytes);
    assert!(read_back(&path, &members).is_empty());
    // A byte in the middle of s00006's image data.
    let at = header_at(&bytes, "s00006.jpg") + 512 + 15_000;
    let mut damaged = bytes.clone();
    damaged[at] ^= 0x10;
    assert!(at > 128 << 10 && at < damaged.len() - (128 << 10));
    rewrite_keeping_mtime(&path, &damaged);
    let reported = read_back_reporting(&path, &members, &["CRC-32C", "5 reads"]);
    assert_eq!(reported, ["s00006"]);
}

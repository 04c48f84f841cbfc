//! `PipelineBuilder::hardware_share`: how a batch is divided between a GPU's hardware JPEG
//! decoder and the device Huffman path. The device is the host stand-in of
//! [`crate::host_device`], its hardware decoder taking the JPEGs of
//! [`HardwareDecode::Exact`] (as the CUDA backend's does on a card with nvJPEG's engines);
//! it records how the workers handed it each sample: whole for the engines
//! ([`Took::Encoded`]) or packed for the device Huffman path ([`Took::Entropy`]). These
//! tests look only at the hand-over.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::TestRng;
use crate::host_device::{device, Calls, Took};
use stoker::decode::jpeg::transcode::{add_restarts, TranscodeOptions, Transcoded};
use stoker::{Augment, DType, Dataset, Error, HardwareDecode, Pipeline};

/// 32 baseline JPEGs with restart markers (4:2:0 and 4:4:4, written by the lossless
/// transcode `stoker convert` uses) and 4 without, in two class folders; the paths of
/// those with restart markers.
fn dataset(dir: &Path) -> Vec<String> {
    let mut rng = TestRng(23);
    let mut restarted = Vec::new();
    for i in 0..36 {
        let plain = common::random_jpeg_between(&mut rng, 32, 48, i % 2 == 0);
        let rel = format!("c{}/img{i:02}.jpg", i % 2);
        let bytes = match i < 32 {
            true => {
                restarted.push(rel.clone());
                match add_restarts(&plain, &TranscodeOptions::default()) {
                    Transcoded::Written { bytes, .. } => bytes,
                    Transcoded::Kept(why) => panic!("{rel}: kept ({why:?})"),
                }
            }
            false => plain,
        };
        common::write(dir, &rel, &bytes);
    }
    restarted
}

/// A pipeline on the stand-in over `dir` with `share` (whole files at full size, so the
/// engines may take every JPEG), and the stand-in's record.
fn pipeline(dir: &Path, share: f32, workers: usize, batch: usize) -> (Pipeline, Calls) {
    let (device, calls) = device(&BTreeSet::new(), HardwareDecode::Exact);
    let pipe = Pipeline::builder(Dataset::image_folder(dir).expect("folder").all())
        .augment(
            Augment::new()
                .random_resized_crop(32, (0.3, 1.0), (0.75, 1.333))
                .crop_aware(false)
                .dtype(DType::U8),
        )
        .batch_size(batch)
        .workers(workers)
        .readers(2)
        .seed(5)
        .hardware_share(share)
        .backend_instance(device)
        .build()
        .expect("pipeline");
    (pipe, calls)
}

/// How each sample was handed over in `epoch`, by path; checks each was handed over once.
fn epoch(pipe: &Pipeline, calls: &Calls, epoch: u64) -> BTreeMap<String, Took> {
    calls.lock().expect("calls").clear();
    let mut delivered = 0;
    for b in &mut pipe.epoch(epoch).expect("epoch") {
        delivered += b.expect("batch").len();
    }
    let paths: BTreeMap<u64, String> = pipe
        .subset()
        .samples()
        .iter()
        .map(|s| (s.id, s.path.clone()))
        .collect();
    let record: Vec<(u64, Took)> = calls
        .lock()
        .expect("calls")
        .iter()
        .flat_map(|c| c.jobs.iter().copied())
        .collect();
    assert_eq!(delivered, paths.len(), "every sample delivered");
    assert_eq!(record.len(), paths.len(), "every sample handed over once");
    let by_path: BTreeMap<String, Took> = record
        .iter()
        .map(|(id, took)| (paths[id].clone(), *took))
        .collect();
    assert_eq!(by_path.len(), paths.len(), "no sample handed over twice");
    by_path
}

/// Splits a record into the restart-marked files' (by path) and the others' ways.
fn split(
    took: &BTreeMap<String, Took>,
    restarted: &[String],
) -> (BTreeMap<String, Took>, Vec<Took>) {
    let (mut r, mut other) = (BTreeMap::new(), Vec::new());
    for (path, t) in took {
        match restarted.iter().any(|p| path.ends_with(p.as_str())) {
            true => {
                r.insert(path.clone(), *t);
            }
            false => other.push(*t),
        }
    }
    (r, other)
}

#[test]
fn share_0_sends_restart_marked_jpegs_to_device_huffman_and_1_to_the_engines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let restarted = dataset(dir.path());
    for (share, want) in [(0.0, Took::Entropy), (1.0, Took::Encoded)] {
        let (pipe, record) = pipeline(dir.path(), share, 2, 8);
        let (r, other) = split(&epoch(&pipe, &record, 0), &restarted);
        assert_eq!(r.len(), restarted.len());
        for (path, t) in &r {
            assert_eq!(*t, want, "share {share}: {path}");
        }
        // Files without restart markers: only the engines take them.
        assert_eq!(other, vec![Took::Encoded; 4], "share {share}");
    }
}

#[test]
fn a_share_divides_every_run_the_same_way_whatever_the_workers_batches_and_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let restarted = dataset(dir.path());
    let mut first: Option<BTreeMap<String, Took>> = None;
    for (workers, batch) in [(1, 4), (3, 7), (2, 36)] {
        let (pipe, record) = pipeline(dir.path(), 0.5, workers, batch);
        for e in 0..2 {
            let (r, other) = split(&epoch(&pipe, &record, e), &restarted);
            assert_eq!(other, vec![Took::Encoded; 4]);
            let engines = r.values().filter(|&&t| t == Took::Encoded).count();
            let huffman = r.values().filter(|&&t| t == Took::Entropy).count();
            assert_eq!(engines + huffman, restarted.len());
            assert!(
                engines > 0 && huffman > 0,
                "{workers} workers, batches of {batch}, epoch {e}: {engines} to the engines, {huffman} to device Huffman"
            );
            match &first {
                None => first = Some(r),
                Some(f) => assert_eq!(
                    f, &r,
                    "{workers} workers, batches of {batch}, epoch {e}: another division"
                ),
            }
        }
    }
    // Both decoders work in most batches (batches of 9, 8 of them restart-marked files on
    // average: all going one way is a 1-in-128 chance a batch).
    let (pipe, record) = pipeline(dir.path(), 0.5, 2, 9);
    let order = pipe.sampler().batches(0);
    let (r, _) = split(&epoch(&pipe, &record, 0), &restarted);
    let samples = pipe.subset().samples();
    let mixed = order
        .iter()
        .filter(|b| {
            let ways: Vec<_> = b
                .iter()
                .filter_map(|&i| r.get(&samples[i].path).copied())
                .collect();
            ways.contains(&Took::Encoded) && ways.contains(&Took::Entropy)
        })
        .count();
    assert!(
        mixed >= order.len() / 2,
        "{mixed} of {} batches mixed",
        order.len()
    );
}

#[test]
fn a_share_outside_0_to_1_is_a_config_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::write(
        dir.path(),
        "c0/a.jpg",
        &common::random_jpeg(&mut TestRng(1), 16, 16, turbojpeg::Subsamp::None),
    );
    for share in [-0.1f32, 1.5, f32::NAN] {
        let (device, _) = device(&BTreeSet::new(), HardwareDecode::Exact);
        let r = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
            .augment(Augment::new().resize(16, 16).dtype(DType::U8))
            .hardware_share(share)
            .backend_instance(device)
            .build();
        match r {
            Err(Error::Config { setting, .. }) => assert_eq!(setting, "hardware_share"),
            other => panic!("share {share}: {:?}", other.map(|_| ())),
        }
    }
}

//! Samples a device backend cannot decode, and damaged files handed to its hardware JPEG
//! decoder, through the whole pipeline: the same samples delivered, in the same batches
//! and slots, the same replacements, the same samples reported (with their paths) and the
//! same statistics as on the CPU backend, in every epoch, under every error policy.
//!
//! The device is the host stand-in of [`crate::host_device`], its hardware decoder taking
//! every baseline JPEG whole, as the CUDA backend's nvJPEG hardware decoder does
//! ([`HardwareDecode::All`]: workers hand them over as `DeviceSample::Encoded`), and
//! rejecting the samples a test names. The CPU backend reads the same dataset with those
//! files genuinely broken (cut short), so its workers refuse them.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use crate::common::TestRng;
use crate::host_device::{device, Call, Took};
use stoker::backend::Backend;
use stoker::rng::{Rng, Stream};
use stoker::{
    Augment, BackendKind, DType, Dataset, Error, HardwareDecode, OnError, Pipeline, PipelineError,
    SampleErrorKind, WarningKind,
};

/// The decode and augment tolerance of `tests/device_pipeline.rs`, in levels.
const LEVELS: u8 = 3;

/// One batch as the consumer sees it, pixels aside.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    index: usize,
    ids: Vec<u64>,
    /// `(slot, failed_id, by_id)`.
    replacements: Vec<(usize, u64, u64)>,
    repeated: Vec<bool>,
    /// `(id, path, kind)`, sorted: a worker's reports come in slot order, the device's
    /// after them.
    errors: Vec<(u64, String, SampleErrorKind)>,
    /// `(slot, id, kind)`.
    warnings: Vec<(usize, u64, WarningKind)>,
}

/// How an epoch ended.
#[derive(Debug, Clone, PartialEq)]
enum End {
    Complete,
    /// `OnError::Fail`: the sample's id and path.
    Failed(u64, String),
    /// `OnError::Replace` ran out of candidates for these samples (ids, sorted).
    Exhausted(Vec<u64>),
}

/// The statistics compared.
#[derive(Debug, Clone, PartialEq)]
struct Counts {
    delivered: u64,
    reported: u64,
    replacements: u64,
    batches: u64,
    with_warnings: u64,
    /// `(id, path, kind)` of each reported sample, sorted.
    errors: Vec<(u64, String, SampleErrorKind)>,
}

#[derive(Debug)]
struct EpochSeen {
    batches: Vec<Seen>,
    /// Each delivered sample's pixels, by batch then slot.
    pixels: Vec<Vec<Vec<u8>>>,
    end: End,
    counts: Counts,
}

type ErrorKey = (u64, String, SampleErrorKind);

fn error_key(e: &stoker::SampleError) -> ErrorKey {
    (e.id, e.path.clone(), e.kind)
}

fn by_sample(a: &ErrorKey, b: &ErrorKey) -> std::cmp::Ordering {
    (a.0, &a.1).cmp(&(b.0, &b.1))
}

/// How a pipeline is set up for a comparison.
#[derive(Clone, Copy)]
struct Setup {
    policy: OnError,
    strict: bool,
    prefetch: usize,
    batch_size: usize,
    augment: fn() -> Augment,
}

fn random_crops() -> Augment {
    Augment::new()
        .random_resized_crop(32, (0.3, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .dtype(DType::U8)
}

/// Crop-aware decodes of larger crops: some JPEGs at full size (for the hardware
/// decoder), some at a reduced scale (coefficients).
fn crops_64() -> Augment {
    Augment::new()
        .random_resized_crop(64, (0.2, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .dtype(DType::U8)
}

/// Whole files at full size: every baseline JPEG goes to the hardware decoder.
fn whole_files() -> Augment {
    Augment::new()
        .random_resized_crop(64, (0.2, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .crop_aware(false)
        .dtype(DType::U8)
}

fn pipeline(dir: &Path, device: Option<Arc<dyn Backend>>, s: Setup) -> Pipeline {
    let b = Pipeline::builder(Dataset::image_folder(dir).expect("folder").all())
        .augment((s.augment)())
        .batch_size(s.batch_size)
        .prefetch(s.prefetch)
        .workers(2)
        .readers(2)
        .seed(3)
        .on_error(s.policy)
        .strict_decode(s.strict);
    match device {
        Some(d) => b.backend_instance(d),
        None => b.backend(BackendKind::Cpu),
    }
    .build()
    .expect("pipeline")
}

fn run(pipe: &Pipeline, epochs: u64) -> Vec<EpochSeen> {
    (0..epochs)
        .map(|e| {
            let mut epoch = pipe.epoch(e).expect("epoch");
            let (mut batches, mut pixels, mut end) = (Vec::new(), Vec::new(), End::Complete);
            for b in &mut epoch {
                let b = match b {
                    Ok(b) => b,
                    Err(Error::Sample(s)) => {
                        end = End::Failed(s.id, s.path.clone());
                        break;
                    }
                    Err(Error::Pipeline(PipelineError::ReplacementsExhausted {
                        samples, ..
                    })) => {
                        let mut ids: Vec<u64> = samples.iter().map(|s| s.id).collect();
                        ids.sort();
                        end = End::Exhausted(ids);
                        break;
                    }
                    Err(other) => panic!("epoch {e}: {other}"),
                };
                let px = b.read_images().expect("images");
                let per = px.len() / b.len().max(1);
                pixels.push(px.chunks(per.max(1)).map(<[u8]>::to_vec).collect());
                let mut errors: Vec<_> = b.errors().iter().map(error_key).collect();
                errors.sort_by(by_sample);
                batches.push(Seen {
                    index: b.index(),
                    ids: b.ids().to_vec(),
                    replacements: b
                        .replacements()
                        .iter()
                        .map(|r| (r.slot, r.failed_id, r.by_id))
                        .collect(),
                    repeated: b.repeated().to_vec(),
                    errors,
                    warnings: b
                        .warnings()
                        .iter()
                        .map(|w| (w.slot, w.id, w.kind))
                        .collect(),
                });
            }
            let st = epoch.stats();
            let mut errors: Vec<_> = st.errors.iter().map(error_key).collect();
            errors.sort_by(by_sample);
            EpochSeen {
                batches,
                pixels,
                end,
                counts: Counts {
                    delivered: st.samples_delivered,
                    reported: st.samples_reported,
                    replacements: st.replacements,
                    batches: st.batches,
                    with_warnings: st.samples_with_warnings,
                    errors,
                },
            }
        })
        .collect()
}

/// Checks two runs saw the same batches, naming the first that differs.
fn same_batches(a: &[Seen], b: &[Seen], what: &str) {
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y, "{what}: batch {}", x.index);
    }
    assert_eq!(a.len(), b.len(), "{what}: batches");
}

/// The largest difference between the delivered pixels of two runs, with the batches and
/// slots seen equal.
fn worst_difference(a: &EpochSeen, b: &EpochSeen) -> u8 {
    let mut worst = 0;
    for (pa, pb) in a.pixels.iter().zip(&b.pixels) {
        assert_eq!(pa.len(), pb.len());
        for (x, y) in pa.iter().zip(pb) {
            let w = x.iter().zip(y).map(|(p, q)| p.abs_diff(*q)).max();
            worst = worst.max(w.unwrap_or(0));
        }
    }
    worst
}

/// Files at the same paths in two datasets: `good` as made, `broken` with the files the
/// device stand-in will reject cut short.
struct Datasets {
    good: tempfile::TempDir,
    broken: tempfile::TempDir,
    /// Relative path of each file, by sample id.
    paths: BTreeMap<u64, String>,
}

impl Datasets {
    /// `files` (relative path, bytes); those in `cut` written cut short in `broken`.
    fn new(files: &[(String, Vec<u8>)], cut: &BTreeSet<String>) -> Datasets {
        let (good, broken) = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        for (rel, bytes) in files {
            common::write(good.path(), rel, bytes);
            let b = if cut.contains(rel) {
                &bytes[..bytes.len() / 2]
            } else {
                &bytes[..]
            };
            common::write(broken.path(), rel, b);
        }
        let paths = Dataset::image_folder(good.path())
            .expect("folder")
            .all()
            .samples()
            .iter()
            .map(|s| (s.id, s.path.clone()))
            .collect();
        Datasets {
            good,
            broken,
            paths,
        }
    }
}

/// The dataset of the rejection tests: 22 JPEGs (4:2:0 and 4:4:4, 40 to 80 pixels a side)
/// and one PNG in three class folders, and, with `garbage`, one file of garbage (refused
/// by every backend's workers) or, without, one more JPEG.
fn rejection_files(garbage: bool) -> Vec<(String, Vec<u8>)> {
    let mut rng = TestRng(17);
    let mut files = Vec::new();
    for i in 0..22 {
        files.push((
            format!("c{}/img{i:02}.jpg", i % 3),
            common::random_jpeg_between(&mut rng, 40, 40, i % 3 == 0),
        ));
    }
    let (w, h) = (50, 44);
    let rgb = common::random_rgb(&mut rng, w, h);
    files.push(("c1/picture.png".into(), common::png_rgb(w, h, &rgb)));
    match garbage {
        true => files.push(("c2/garbage.jpg".into(), b"not an image at all".repeat(8))),
        false => files.push((
            "c2/img22.jpg".into(),
            common::random_jpeg(&mut rng, 48, 48, turbojpeg::Subsamp::Sub2x2),
        )),
    }
    files
}

/// The first `n` replacement candidates of `failed` in `epoch` (ids, the failed one passed
/// over), as the pipeline documents them: keyed by (seed, epoch, failed id), drawn from
/// the epoch's order.
fn candidates(pipe: &Pipeline, seed: u64, epoch: u64, failed: u64, n: usize) -> Vec<u64> {
    let order = pipe.sampler().epoch_order(epoch);
    let samples = pipe.subset().samples();
    let mut rng = Rng::new(seed, epoch, failed, Stream::Replace);
    (0..n)
        .map(|_| samples[order[rng.below(order.len() as u64) as usize]].id)
        .filter(|&id| id != failed)
        .collect()
}

/// Runs `setup` on the stand-in device over `data.good` (rejecting `reject`) and on the
/// CPU backend over `data.broken`, two epochs each, and checks they agree; returns both
/// runs and the stand-in's calls.
fn compare(
    data: &Datasets,
    reject: &BTreeSet<u64>,
    setup: Setup,
    what: &str,
) -> (Vec<EpochSeen>, Vec<EpochSeen>, Vec<Call>) {
    let (dev, calls) = device(reject, HardwareDecode::All);
    let on_device = run(&pipeline(data.good.path(), Some(dev), setup), 2);
    let on_cpu = run(&pipeline(data.broken.path(), None, setup), 2);
    for (e, (d, c)) in on_device.iter().zip(&on_cpu).enumerate() {
        let what = format!("{what}, epoch {e}");
        same_batches(&d.batches, &c.batches, &what);
        assert_eq!(d.end, c.end, "{what}: end");
        assert_eq!(d.counts, c.counts, "{what}: stats");
        let worst = worst_difference(d, c);
        println!("{what}: worst difference {worst} levels");
        assert!(worst <= LEVELS, "{what}: pixels differ by {worst}");
        for b in &d.batches {
            for (id, path, _) in &b.errors {
                assert_eq!(data.paths.get(id), Some(path), "{what}: the path reported");
            }
        }
    }
    let calls = calls.lock().expect("calls").clone();
    (on_device, on_cpu, calls)
}

/// The samples the rejection tests break: in epoch 0's order (batches of 6), the first
/// slot of batch 0, the third and the last of batch 1 (two in one batch), the whole of
/// batch 3, and the first replacement candidate of the garbage file where there is one
/// (a replacement rejected too). The garbage file's own id, and the candidate chosen.
fn rejected_ids(data: &Datasets) -> (BTreeSet<u64>, Option<(u64, u64)>) {
    let setup = Setup {
        policy: OnError::Skip,
        strict: true,
        prefetch: 2,
        batch_size: 6,
        augment: random_crops,
    };
    let pipe = pipeline(data.good.path(), None, setup);
    let samples = pipe.subset().samples();
    let garbage = samples
        .iter()
        .find(|s| s.path.ends_with("garbage.jpg"))
        .map(|s| s.id);
    let order: Vec<u64> = pipe
        .sampler()
        .epoch_order(0)
        .iter()
        .map(|&i| samples[i].id)
        .collect();
    let mut reject: BTreeSet<u64> = [0, 6 + 2, 6 + 5, 18, 19, 20, 21, 22, 23]
        .iter()
        .map(|&p| order[p])
        .filter(|&id| Some(id) != garbage)
        .collect();
    let garbage = garbage.map(|g| {
        let first = candidates(&pipe, 3, 0, g, 4)[0];
        reject.insert(first);
        (g, first)
    });
    (reject, garbage)
}

/// The datasets of a rejection test, the ids the device rejects (and the CPU backend
/// finds cut short), and the garbage file's id and its first candidate's, where it has one.
fn rejection_data(garbage: bool) -> (Datasets, BTreeSet<u64>, Option<(u64, u64)>) {
    let files = rejection_files(garbage);
    // Which paths to cut depends on ids, which depend on paths alone: find them first.
    let probe = Datasets::new(&files, &BTreeSet::new());
    let (reject, garbage) = rejected_ids(&probe);
    let cut: BTreeSet<String> = reject.iter().map(|id| probe.paths[id].clone()).collect();
    (Datasets::new(&files, &cut), reject, garbage)
}

fn setup(policy: OnError, prefetch: usize) -> Setup {
    Setup {
        policy,
        strict: true,
        prefetch,
        batch_size: 6,
        augment: random_crops,
    }
}

/// How many times the stand-in rejected `id`, and the ways it was handed samples.
fn rejections_of(calls: &[Call], id: u64) -> usize {
    calls
        .iter()
        .map(|c| c.rejected.iter().filter(|&&r| r == id).count())
        .sum()
}

fn took(calls: &[Call]) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for (_, t) in calls.iter().flat_map(|c| &c.jobs) {
        let name = match t {
            Took::Encoded => "encoded",
            Took::Entropy => "entropy",
            Took::Coefficients => "coefficients",
            Took::Pixels => "pixels",
        };
        *m.entry(name).or_default() += 1;
    }
    m
}

#[test]
fn skipped_rejections_leave_the_same_batches_and_reports_as_on_the_cpu_backend() {
    let (data, reject, garbage) = rejection_data(true);
    let (garbage, _) = garbage.expect("a garbage file");
    let (dev, _, calls) = compare(&data, &reject, setup(OnError::Skip, 2), "skip");
    let b0 = &dev[0].batches;
    assert_eq!(b0.len(), 4);
    assert_eq!(b0[3].ids, Vec::<u64>::new(), "batch 3 is rejected whole");
    let reported: BTreeSet<u64> = dev[0].counts.errors.iter().map(|e| e.0).collect();
    let mut expected = reject.clone();
    expected.insert(garbage);
    assert_eq!(reported, expected);
    for e in &dev {
        assert_eq!(e.counts.delivered, 24 - expected.len() as u64);
    }
    // Every rejected file was handed to the device once an epoch and left out after.
    for id in &reject {
        assert_eq!(rejections_of(&calls, *id), 2, "{id:016x}");
    }
    let took = took(&calls);
    println!("the stand-in took {took:?}");
    assert!(took.get("encoded").is_some_and(|&n| n > 0) && took.contains_key("pixels"));
}

#[test]
fn rejections_are_replaced_by_the_candidates_a_worker_draws() {
    let (data, reject, garbage) = rejection_data(true);
    let (garbage, first) = garbage.expect("a garbage file");
    let (dev, _, calls) = compare(&data, &reject, setup(OnError::Replace, 2), "replace");
    let failed = reject.len() + usize::from(!reject.contains(&garbage));
    for (e, ep) in dev.iter().enumerate() {
        assert_eq!(ep.end, End::Complete);
        assert_eq!(ep.counts.delivered, 24, "epoch {e}: full batches");
        assert_eq!(ep.counts.replacements as usize, failed, "epoch {e}");
        assert_eq!(ep.counts.reported as usize, failed, "epoch {e}");
        for b in &ep.batches {
            for &(slot, _, by) in &b.replacements {
                assert!(b.repeated[slot], "a replacement is marked repeated");
                assert!(
                    !reject.contains(&by) && by != garbage,
                    "a broken file delivered"
                );
            }
        }
    }
    // The garbage file's first candidate was rejected in its own slot in both epochs, and
    // as the garbage file's replacement in epoch 0.
    assert!(rejections_of(&calls, first) >= 3, "{first:016x}");
}

#[test]
fn a_rejection_fails_the_epoch_at_the_same_batch_as_on_the_cpu_backend() {
    // Without the garbage file: a failure the workers find in a batch prepared ahead of
    // the one the device rejects a sample of would end the epoch first, on either backend.
    let (data, broken, _) = rejection_data(false);
    let reject = broken.clone();
    // One batch in flight: the CPU backend's workers find the failure in the batch that
    // holds it, not in one prepared ahead.
    let s = setup(OnError::Fail, 1);
    let (dev, calls) = device(&reject, HardwareDecode::All);
    let on_device = run(&pipeline(data.good.path(), Some(dev), s), 2);
    let cpu_pipe = pipeline(data.broken.path(), None, s);
    let on_cpu = run(&cpu_pipe, 2);
    for (e, (d, c)) in on_device.iter().zip(&on_cpu).enumerate() {
        same_batches(&d.batches, &c.batches, &format!("epoch {e}"));
        assert!(worst_difference(d, c) <= LEVELS);
        // The failing batch's broken samples: either may be found first on the CPU.
        let batch = cpu_pipe.sampler().batches(e as u64)[d.batches.len()].clone();
        let samples = cpu_pipe.subset().samples();
        let in_batch: BTreeSet<u64> = batch
            .iter()
            .map(|&i| samples[i].id)
            .filter(|id| broken.contains(id))
            .collect();
        for (who, end) in [("device", &d.end), ("cpu", &c.end)] {
            let End::Failed(id, path) = end else {
                panic!("epoch {e}, {who}: {end:?}");
            };
            assert!(in_batch.contains(id), "epoch {e}, {who}: {id:016x}");
            assert_eq!(data.paths.get(id), Some(path));
        }
        assert_eq!(d.counts.reported, 1, "epoch {e}");
        assert_eq!(c.counts.reported, 1, "epoch {e}");
        if d.end == c.end {
            assert_eq!(d.counts, c.counts, "epoch {e}");
        }
    }
    // Epoch 0 fails at its first batch, whose first slot is rejected.
    assert!(on_device[0].batches.is_empty());
    assert_eq!(
        calls.lock().expect("calls").len(),
        1 + on_device[1].batches.len() + 1
    );
}

#[test]
fn replacements_exhausted_on_the_device_fail_as_on_the_cpu_backend() {
    // Every file is rejected: no candidate is left for any.
    let files: Vec<_> = rejection_files(false).into_iter().take(5).collect();
    let probe = Datasets::new(&files, &BTreeSet::new());
    let reject: BTreeSet<u64> = probe.paths.keys().copied().collect();
    let cut = probe.paths.values().cloned().collect();
    let data = Datasets::new(&files, &cut);
    let (dev, _, _) = compare(&data, &reject, setup(OnError::Replace, 2), "exhausted");
    for e in &dev {
        assert!(
            matches!(&e.end, End::Exhausted(ids) if !ids.is_empty()),
            "{:?}",
            e.end
        );
        assert!(e.batches.is_empty());
    }
}

/// Baseline JPEGs (those the hardware decoder takes) of every sampling the test data has.
const BASELINE: &[&str] = &[
    "jpeg/go_video-001_q50_411.jpg",
    "jpeg/go_video-001_q50_444.jpg",
    "jpeg/ljt_testorig.jpg",
    "jpeg/jd_moz_jpg-gray.jpg",
    "jpeg/jd_moz_jpg-size-33x33.jpg",
    "lenient/seeding_baseline.jpg",
];

/// Damaged files made by `scripts/make_damaged_jpegs.py`, as they are.
const DAMAGED: &[&str] = &[
    "lenient/seeding_corrupt.jpg",
    "lenient/seeding_extraneous.jpg",
    "lenient/seeding_marker.jpg",
];

#[test]
fn damaged_files_for_the_hardware_decoder_are_delivered_or_refused_as_on_the_cpu_backend() {
    let seed = common::fresh_seed("mutants");
    let mut rng = TestRng(seed);
    let mut files = Vec::new();
    for (s, src) in BASELINE.iter().enumerate() {
        let bytes = std::fs::read(common::data_dir().join(src)).expect("source");
        files.push((format!("c{}/s{s}_clean.jpg", s % 2), bytes.clone()));
        for m in 0..16 {
            files.push((
                format!("c{}/s{s}_m{m}.jpg", s % 2),
                common::mutant(&bytes, &mut rng),
            ));
        }
    }
    for (d, src) in DAMAGED.iter().enumerate() {
        let bytes = std::fs::read(common::data_dir().join(src)).expect("damaged file");
        files.push((format!("c0/damaged{d}.jpg"), bytes));
    }
    let data = Datasets::new(&files, &BTreeSet::new());
    for (strict, whole, augment) in [
        (true, true, whole_files as fn() -> Augment),
        (false, true, whole_files),
        (true, false, crops_64),
        (false, false, crops_64),
    ] {
        let what = format!("seed {seed}, strict {strict}, whole files {whole}");
        let s = Setup {
            policy: OnError::Skip,
            strict,
            prefetch: 2,
            batch_size: 8,
            augment,
        };
        // Nothing rejected and nothing cut: both backends read the same files.
        let (on_device, _, calls) = compare(&data, &BTreeSet::new(), s, &what);
        let first = &on_device[0];
        let warned: BTreeMap<u64, WarningKind> = first
            .batches
            .iter()
            .flat_map(|b| b.warnings.iter().map(|&(_, id, kind)| (id, kind)))
            .collect();
        let damaged = warned
            .values()
            .filter(|&&k| k == WarningKind::Damaged)
            .count();
        println!(
            "{what}: {} delivered ({} with a warning, {damaged} damaged), {} refused",
            first.counts.delivered,
            warned.len(),
            first.counts.reported
        );
        if strict {
            assert!(first.counts.reported > 0, "{what}: some file is refused");
            assert_eq!(damaged, 0, "{what}: strict delivers no damaged file");
        } else {
            assert!(
                damaged > 0,
                "{what}: lenient delivers damaged files, warned"
            );
        }
        // What the verdict found a fault in took the hybrid path; the rest of the whole
        // files went to the hardware decoder.
        for (id, how) in calls.iter().flat_map(|c| &c.jobs) {
            match warned.contains_key(id) {
                true => assert_ne!(*how, Took::Encoded, "{what}: {}", data.paths[id]),
                false if whole => assert_eq!(*how, Took::Encoded, "{what}: {}", data.paths[id]),
                false => {}
            }
        }
        println!("{what}: the stand-in took {:?}", took(&calls));
    }
}

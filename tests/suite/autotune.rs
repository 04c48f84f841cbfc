//! Autotune (`PipelineBuilder::autotune`): the batches are those of fixed settings, the
//! settings the caller gives are kept, and the chosen values follow the constructed
//! conditions (a slow store, files in the page cache, a tiny memory budget). Assertions
//! are on the chosen values, with wide margins, never on timings.

use std::path::Path;
use std::time::Duration;

use stoker::{Augment, BackendKind, Dataset, Pipeline, PipelineBuilder, Stats};

use crate::common::{self, TestRng};

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// 48 PNGs of random sizes in two classes and two damaged JPEGs (one cut short, one not
/// an image at all).
fn folder(dir: &Path) -> Dataset {
    common::png_folder(dir, 2, 24, common::fresh_seed("autotune folder"));
    let mut rng = TestRng(common::fresh_seed("autotune damaged"));
    let jpeg = common::random_jpeg(&mut rng, 48, 40, turbojpeg::Subsamp::Sub2x2);
    common::write(dir, "class0/cut.jpg", &jpeg[..jpeg.len() / 3]);
    common::write(dir, "class1/junk.jpg", b"not a jpeg at all");
    Dataset::image_folder(dir).expect("dataset")
}

fn builder(data: &Dataset, batch: usize) -> PipelineBuilder {
    Pipeline::builder(data.clone().all())
        .backend(BackendKind::Cpu)
        .augment(
            Augment::new()
                .random_resized_crop(16, (0.3, 1.0), (0.75, 4.0 / 3.0))
                .flip_horizontal(0.5),
        )
        .batch_size(batch)
        .seed(7)
}

/// Per epoch, in delivery order: each batch's ids, pixels and errors.
type Digest = Vec<Vec<(Vec<u64>, Vec<u8>, Vec<String>)>>;

/// Runs `epochs` epochs; returns what they delivered and the pipeline's stats.
fn run(pipe: &Pipeline, epochs: u64) -> (Digest, Stats) {
    let digest = (0..epochs)
        .map(|e| {
            pipe.epoch(e)
                .expect("epoch")
                .map(|b| {
                    let b = b.expect("batch");
                    let errors = b
                        .errors()
                        .iter()
                        .map(|x| format!("{} {} {:?} {}", x.id, x.path, x.kind, x.reason))
                        .collect();
                    (
                        b.ids().to_vec(),
                        b.raw_images().expect("host pixels").to_vec(),
                        errors,
                    )
                })
                .collect()
        })
        .collect();
    (digest, pipe.stats())
}

/// `n` in-memory PNGs behind a store that takes `read_ms` a read.
fn slow_store(n: usize, read_ms: u64) -> Dataset {
    common::in_memory_dataset(common::png_rgb(8, 8, &[70; 192]), n, "png")
        .with_read_latency(Duration::from_millis(read_ms))
}

/// Runs `epochs` epochs of `b` with autotune on; returns what they delivered and the
/// pipeline's stats.
fn run_tuned(b: PipelineBuilder, epochs: u64) -> (Digest, Stats) {
    run(&b.autotune(true).build().expect("pipeline"), epochs)
}

/// The samples an epoch digest holds.
fn samples_delivered(digest: &Digest) -> usize {
    digest.iter().flatten().map(|b| b.0.len()).sum()
}

#[test]
fn autotune_delivers_what_fixed_settings_deliver() {
    let dir = tempfile::tempdir().expect("tmp");
    // A store slow enough that autotune adds readers mid-epoch.
    let data = folder(dir.path()).with_read_latency(Duration::from_millis(5));
    let fixed = builder(&data, 8).build().expect("fixed");
    let tuned = builder(&data, 8).autotune(true).build().expect("autotuned");
    let (want, fs) = run(&fixed, 2);
    let (got, ts) = run(&tuned, 2);
    assert!(fs.autotuned.is_empty(), "{:?}", fs.autotuned);
    assert_eq!(ts.autotuned, ["readers", "workers", "prefetch"]);
    assert!(
        ts.readers > ts.initial_readers,
        "readers did not move: {} -> {}",
        ts.initial_readers,
        ts.readers
    );
    assert_eq!(want.len(), 2);
    for (e, (w, g)) in want.iter().zip(&got).enumerate() {
        let errors: usize = w.iter().map(|b| b.2.len()).sum();
        assert_eq!(errors, 2, "epoch {e}: the two damaged files are reported");
        assert_eq!(w.len(), g.len(), "epoch {e}: batches");
        for (i, (wb, gb)) in w.iter().zip(g).enumerate() {
            assert_eq!(wb.0, gb.0, "epoch {e} batch {i}: ids");
            assert!(wb.1 == gb.1, "epoch {e} batch {i}: pixels differ");
            assert_eq!(wb.2, gb.2, "epoch {e} batch {i}: errors");
        }
    }
    let report = ts.report().to_string();
    assert!(report.contains("autotuned: readers "), "{report}");
    assert!(fs.report().autotuned.is_none());
}

#[test]
fn settings_the_caller_gives_are_kept() {
    let data = slow_store(64, 10);
    let (_, s) = run_tuned(builder(&data, 8).readers(3).workers(1).prefetch(3), 2);
    assert_eq!((s.readers, s.workers, s.prefetch), (3, 1, 3));
    assert_eq!(
        (s.initial_readers, s.initial_workers, s.initial_prefetch),
        (3, 1, 3)
    );
    assert!(s.autotuned.is_empty(), "{:?}", s.autotuned);
    // Only what is left unset is autotuned.
    let (_, s) = run_tuned(builder(&data, 8).readers(3), 1);
    assert_eq!(s.readers, 3);
    assert_eq!(s.autotuned, ["workers", "prefetch"]);
    let text = s.report().to_string();
    assert!(text.contains("readers 3 (set)"), "{text}");
}

#[test]
fn a_slow_store_raises_readers_above_the_local_start() {
    // 20 ms a read: two readers give 100 samples/s, the workers take thousands.
    let data = slow_store(160, 20);
    let (digest, s) = run_tuned(builder(&data, 32), 2);
    assert_eq!(samples_delivered(&digest), 320);
    assert_eq!(s.initial_readers, 2.min(cores()), "the local start");
    // Little's law asks for the workers' rate times 20 ms: far above the cores of a small
    // machine, and at most the samples in flight.
    assert!(s.readers >= 16, "readers {}", s.readers);
    assert!(s.readers <= s.prefetch * 32, "readers {}", s.readers);
    assert_eq!(s.workers, cores());
}

#[test]
fn files_in_the_page_cache_get_no_more_readers_than_cores() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = folder(dir.path());
    // Read once so that the files are in the page cache.
    for s in data.samples() {
        if let stoker::Location::File(p) = &s.location {
            std::fs::read(dir.path().join(p)).ok();
        }
    }
    let (_, s) = run_tuned(builder(&data, 4).workers(1), 3);
    assert!(s.initial_readers <= cores(), "{}", s.initial_readers);
    assert!(
        s.readers <= cores(),
        "readers {} on {} cores",
        s.readers,
        cores()
    );
}

#[test]
fn a_tiny_budget_keeps_prefetch_at_one() {
    let data = slow_store(96, 10);
    let (digest, s) = run_tuned(builder(&data, 16).memory_budget(1), 2);
    assert_eq!(samples_delivered(&digest), 192);
    assert_eq!((s.initial_prefetch, s.prefetch), (1, 1));
    // With room, the same waits raise it.
    let (_, s) = run_tuned(builder(&data, 16).memory_budget(1 << 30), 2);
    assert_eq!(s.initial_prefetch, 2);
    assert!(s.prefetch > 2, "prefetch {}", s.prefetch);
}

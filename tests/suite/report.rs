//! The verdict on an epoch (`Stats::report`) in constructed cases whose bottleneck is
//! known by construction: a slow store behind one reader, large JPEGs on one worker, and
//! a consumer slower than its input.

use std::time::Duration;

use stoker::pipeline::{InputBound, Report, Stage};
use stoker::{Augment, BackendKind, Dataset, Pipeline};

use crate::common::{self, TestRng};

/// Runs epoch 0 on the CPU backend, sleeping `step` after each batch (the training
/// step), and returns the epoch's report.
fn report(data: &Dataset, readers: usize, workers: usize, batch: usize, step: Duration) -> Report {
    let pipe = Pipeline::builder(data.clone().all())
        .backend(BackendKind::Cpu)
        .augment(Augment::new().resize(16, 16))
        .batch_size(batch)
        .readers(readers)
        .workers(workers)
        .build()
        .expect("pipeline");
    let mut epoch = pipe.epoch(0).expect("epoch");
    for b in epoch.by_ref() {
        b.expect("batch");
        std::thread::sleep(step);
    }
    let stats = epoch.stats();
    assert_eq!((stats.readers, stats.workers), (readers, workers));
    assert!(!stats.on_device);
    let r = stats.report();
    // Every report says it in words, with each stage that worked.
    let text = r.to_string();
    eprintln!("{text}");
    assert!(text.contains("input-bound"), "{text}");
    assert!(text.contains("reading"), "{text}");
    r
}

#[test]
fn a_slow_store_behind_one_reader_is_the_bottleneck() {
    let png = common::png_rgb(8, 8, &[90; 192]);
    // 40 reads of 25 ms on one reader: about a second of reading, nothing else to do.
    let data =
        common::in_memory_dataset(png, 40, "png").with_read_latency(Duration::from_millis(25));
    let r = report(&data, 1, 2, 8, Duration::ZERO);
    assert_eq!(r.input_bound, InputBound::Highly, "{r}");
    assert_eq!(r.bottleneck, Some(Stage::Read), "{r}");
    assert_eq!(r.stages[0].stage, Stage::Read, "busiest first: {r}");
    assert!(r.stages[0].utilisation > 0.5, "{r}");
    assert!(r.advice[0].contains("readers"), "{r}");
}

#[test]
fn large_jpegs_on_one_worker_make_decoding_the_bottleneck() {
    let mut rng = TestRng(common::fresh_seed("report decode"));
    // Noise at 4:4:4 is costly to entropy-decode; the resize to 16x16 reads the same
    // pixels whatever they hold.
    let jpeg = common::random_jpeg(&mut rng, 1536, 1536, turbojpeg::Subsamp::None);
    let data = common::in_memory_dataset(jpeg, 12, "jpg");
    let r = report(&data, 4, 1, 4, Duration::ZERO);
    assert_ne!(r.input_bound, InputBound::No, "{r}");
    let load = |s: Stage| {
        r.stages
            .iter()
            .find(|l| l.stage == s)
            .map_or(0.0, |l| l.utilisation)
    };
    // The workers' stages together have no slack; the bottleneck is the larger of them.
    assert!(load(Stage::Decode) + load(Stage::Augment) > 0.6, "{r}");
    assert!(load(Stage::Read) < 0.2, "{r}");
    assert_eq!(r.bottleneck, Some(Stage::Decode), "{r}");
    assert!(r.advice.iter().any(|a| a.contains("GPU backend")), "{r}");
}

#[test]
fn a_slow_training_step_is_not_input_bound() {
    let png = common::png_rgb(8, 8, &[30; 192]);
    let data = common::in_memory_dataset(png, 80, "png");
    // 10 batches, 100 ms of training each: only the first batch is waited for.
    let r = report(&data, 2, 2, 8, Duration::from_millis(100));
    assert_eq!(r.input_bound, InputBound::No, "{r}");
    assert_eq!(r.bottleneck, None, "{r}");
    assert!(r.advice[0].contains("training step"), "{r}");
    assert!(r.to_string().starts_with("not input-bound"), "{r}");
}

#[test]
fn the_trace_holds_a_span_per_stage_per_sample_and_per_batch() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("trace.json");
    let png = common::png_rgb(8, 8, &[60; 192]);
    let data = common::in_memory_dataset(png, 24, "png");
    let pipe = Pipeline::builder(data.clone().all())
        .backend(BackendKind::Cpu)
        .augment(Augment::new().resize(16, 16))
        .batch_size(8)
        .readers(2)
        .workers(2)
        .trace(&path)
        .build()
        .expect("pipeline");
    let mut ids = std::collections::BTreeSet::new();
    for epoch in 0..2 {
        for b in pipe.epoch(epoch).expect("epoch") {
            ids.extend(b.expect("batch").ids().iter().copied());
        }
    }
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("trace written")).expect("JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let spans: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    // Every thread that left a span is named.
    for s in &spans {
        assert!(
            events
                .iter()
                .any(|m| m["ph"] == "M" && m["tid"] == s["tid"] && m["args"]["name"].is_string()),
            "unnamed thread in {s}"
        );
        assert!(s["dur"].as_f64().expect("dur") >= 0.0 && s["ts"].as_f64().is_some());
    }
    let count = |name: &str, epoch: u64, key: &str, id: u64| {
        spans
            .iter()
            .filter(|s| s["name"] == name && s["args"]["epoch"] == epoch && s["args"][key] == id)
            .count()
    };
    assert_eq!(ids.len(), 24);
    for epoch in 0..2 {
        for &id in &ids {
            for stage in ["read", "decode", "augment"] {
                assert_eq!(
                    count(stage, epoch, "sample", id),
                    1,
                    "{stage} of {id}, epoch {epoch}"
                );
            }
        }
        for k in 0..3 {
            assert_eq!(count("wait for batch", epoch, "batch", k), 1, "batch {k}");
        }
    }
    assert_eq!(spans.len(), 2 * (3 * 24 + 3), "nothing else: {spans:?}");
    assert_eq!(json["otherData"]["dropped_events"], 0);
}

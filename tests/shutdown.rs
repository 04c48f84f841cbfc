//! Dropping a pipeline mid-epoch returns within a second and leaves no thread behind.
//! (Its own test binary: it counts the process's threads.)

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use stoker::{Augment, Dataset, Pipeline, Sample};

fn stoker_threads() -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(name) = std::fs::read_to_string(t.path().join("comm")) {
                if name.starts_with("stoker-") {
                    names.push(name.trim().to_string());
                }
            }
        }
    }
    names
}

#[test]
fn dropping_mid_epoch_stops_every_thread_quickly() {
    let png: Arc<[u8]> = common::png_rgb(4, 4, &[128; 48]).into();
    let samples = (0..5000)
        .map(|i| Sample::in_memory(format!("synthetic/{i:05}.png"), Arc::clone(&png), Some(0)))
        .collect();
    // A slow store: every read takes 200 ms, so threads are mid-wait when we drop.
    let data = Dataset::from_samples(None, samples, vec![])
        .expect("dataset")
        .with_read_latency(Duration::from_millis(200));
    // On every backend: a device backend adds its collector thread.
    for backend in common::backends() {
        drop_on(&data, backend);
    }
}

fn drop_on(data: &Dataset, backend: stoker::BackendKind) {
    let pipe = Pipeline::builder(data.clone().all())
        .backend(backend)
        .augment(Augment::new().resize(4, 4))
        .batch_size(16)
        .readers(16)
        .workers(2)
        .build()
        .expect("pipeline");
    for round in 0..3 {
        let mut epoch = pipe.epoch(round).expect("epoch");
        let first = epoch.next().expect("a batch").expect("ok");
        assert_eq!(first.len(), 16);
        assert!(
            !stoker_threads().is_empty(),
            "no pipeline threads seen while running"
        );
        // Drop on another thread and wait with a timeout: a hang fails the test instead of
        // hanging the suite.
        let (tx, rx) = std::sync::mpsc::channel();
        let t = Instant::now();
        std::thread::spawn(move || {
            drop(epoch);
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("dropping the epoch hung for 5 s");
        let took = t.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "{backend}: drop took {took:?}"
        );
        assert_eq!(
            stoker_threads(),
            Vec::<String>::new(),
            "threads left behind"
        );
        // A batch kept past its epoch stays valid and is freed on drop.
        assert_eq!(first.images::<u8>().map(<[u8]>::len).ok(), Some(16 * 48));
    }
    drop(pipe);
    assert!(stoker_threads().is_empty());
}

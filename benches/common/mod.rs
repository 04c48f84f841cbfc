//! Shared by the benchmarks: the image set and a throughput runner.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The JPEGs to measure: `STOKER_BENCH_IMAGES` (a folder, searched recursively), else the
/// 500-image set made by `make_bench_set.py` under `bench-data/`, else the bundled samples.
pub fn images() -> (PathBuf, Vec<Vec<u8>>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::var_os("STOKER_BENCH_IMAGES")
        .map(PathBuf::from)
        .or_else(|| Some(root.join("bench-data/imagenet500")).filter(|p| p.is_dir()))
        .unwrap_or_else(|| root.join("tests/data/samples"));
    let mut files = Vec::new();
    collect(&dir, &mut files);
    files.sort();
    let data = files.iter().filter_map(|f| std::fs::read(f).ok()).collect();
    (dir, data)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| x.eq_ignore_ascii_case("jpg") || x.eq_ignore_ascii_case("jpeg"))
        {
            out.push(p);
        }
    }
}

/// Runs `work(thread, index)` over every image on `threads` threads, whole passes until
/// at least `min` has passed; returns images per second. `make` builds each thread's state.
pub fn throughput<S>(
    n: usize,
    threads: usize,
    min: Duration,
    make: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize) + Sync,
) -> f64 {
    let start = Instant::now();
    let mut done = 0usize;
    while done == 0 || start.elapsed() < min {
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut state = make();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        work(&mut state, i);
                    }
                });
            }
        });
        done += n;
    }
    done as f64 / start.elapsed().as_secs_f64()
}

/// Threads to measure with: `STOKER_BENCH_THREADS` (a comma-separated list), else 1 and
/// every core.
pub fn thread_counts() -> Vec<usize> {
    if let Ok(list) = std::env::var("STOKER_BENCH_THREADS") {
        let counts: Vec<usize> = list
            .split(',')
            .filter_map(|t| t.trim().parse().ok())
            .filter(|&t| t > 0)
            .collect();
        if !counts.is_empty() {
            return counts;
        }
    }
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    if all > 1 {
        vec![1, all]
    } else {
        vec![1]
    }
}

/// How long each measurement runs: `STOKER_BENCH_SECONDS`, else 2 s under `cargo bench`
/// and a single pass under `cargo test --all-targets` (a smoke test, not a figure).
pub fn min_duration() -> Duration {
    let default = if std::env::args().any(|a| a == "--bench") {
        2.0
    } else {
        0.0
    };
    Duration::from_secs_f64(
        std::env::var("STOKER_BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default),
    )
}

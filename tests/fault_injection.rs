//! Files that change while an epoch reads them: truncated to nothing or to half, garbage
//! appended, rewritten as another valid JPEG of another size, replaced by a FIFO or by a
//! symlink to `/dev/zero`, deleted, restored. A second thread does that over and over to
//! a folder of a few hundred JPEGs while the pipeline runs several epochs on every backend
//! of this machine, each under a watchdog. Whatever it meets, every listed sample is
//! delivered exactly once or reported exactly once (with its path and a reason), none
//! twice and none lost; a delivered sample is the output of a version of its file that was
//! whole (the original or the rewrite), never of a cut or garbled one (strict decoding);
//! and memory stays bounded. A file that grows past the byte limit between listing and
//! reading is reported as too large, not read. (Its own test binary: it installs a
//! peak-tracking allocator.)
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::peak_alloc;
use std::sync::Arc;
use std::time::Duration;

use stoker::{Augment, BackendKind, Dataset, Limits, OnError, Pipeline, SampleErrorKind};

#[global_allocator]
static ALLOC: common::peak_alloc::Peak = common::peak_alloc::Peak;

/// Long enough for a debug build on a busy machine; a blocked read never ends.
const WATCHDOG: Duration = Duration::from_secs(120);
/// JPEGs in the folder.
const FILES: usize = 240;
/// Epochs run while the mutator works.
const EPOCHS: u64 = 4;
/// The pipeline's byte limit in these tests.
const MAX_BYTES: u64 = 256 << 10;
/// Output size: every sample is resized to this square, no random crop or flip, so the
/// output of a file is a function of its bytes alone.
const SIZE: u32 = 12;

/// The relative path of file `i`, in one of three class folders.
fn rel(i: usize) -> String {
    format!("c{}/img{i:03}.jpg", i % 3)
}

/// The two whole versions of every file: the original and its rewrite (another image, of
/// another size).
struct Versions {
    original: Vec<Vec<u8>>,
    rewrite: Vec<Vec<u8>>,
}

fn versions() -> Versions {
    let mut rng = common::TestRng(0x5EED_FA17);
    let mut original = Vec::new();
    let mut rewrite = Vec::new();
    for _ in 0..FILES {
        // Large enough that a cut keeps the headers (a cut in them fails either way).
        let (w, h) = (40 + rng.below(48) as u32, 40 + rng.below(48) as u32);
        original.push(common::random_jpeg(
            &mut rng,
            w,
            h,
            turbojpeg::Subsamp::Sub2x2,
        ));
        rewrite.push(common::random_jpeg(
            &mut rng,
            w + 9,
            h + 5,
            turbojpeg::Subsamp::Sub2x2,
        ));
    }
    Versions { original, rewrite }
}

/// Writes version `files[i]` of every file under `root`.
fn write_tree(root: &Path, files: &[Vec<u8>]) {
    for (i, bytes) in files.iter().enumerate() {
        common::write(root, &rel(i), bytes);
    }
}

fn pipeline(data: &Dataset, backend: BackendKind, limits: Limits) -> Pipeline {
    Pipeline::builder(data.clone().all())
        .backend(backend)
        .augment(Augment::new().resize(SIZE, SIZE))
        .batch_size(16)
        .readers(3)
        .workers(2)
        .prefetch(2)
        .on_error(OnError::Skip)
        .strict_decode(true)
        .limits(limits)
        .seed(11)
        .build()
        .expect("pipeline")
}

/// What one epoch gave: every delivered sample's output bytes by id (a `Vec` per id, so a
/// sample delivered twice shows), and every report by id.
#[derive(Default)]
struct Outcome {
    delivered: BTreeMap<u64, Vec<Vec<u8>>>,
    reported: BTreeMap<u64, Vec<stoker::SampleError>>,
}

/// Runs epoch `epoch` of `p` on a thread of its own and waits for it under the watchdog:
/// an epoch that outlives it fails the test (it would hang otherwise). Gives the
/// pipeline back. `step`: a simulated training step after each batch, while the readers
/// read ahead (and the mutator works).
fn run_epoch(p: Pipeline, epoch: u64, step: Duration) -> (Pipeline, Outcome) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let mut out = Outcome::default();
        for b in p.epoch(epoch).expect("epoch") {
            let b = b.expect("a batch (Skip reports, it does not fail)");
            let pixels = b.read_images().expect("pixels");
            let per = if b.is_empty() {
                0
            } else {
                pixels.len() / b.len()
            };
            for (k, &id) in b.ids().iter().enumerate() {
                out.delivered
                    .entry(id)
                    .or_default()
                    .push(pixels[k * per..(k + 1) * per].to_vec());
            }
            for e in b.errors() {
                out.reported.entry(e.id).or_default().push(e.clone());
            }
            drop(b);
            std::thread::sleep(step);
        }
        p.wait_device().expect("device");
        let _ = tx.send((p, out));
    });
    rx.recv_timeout(WATCHDOG)
        .unwrap_or_else(|e| panic!("epoch {epoch} did not finish within {WATCHDOG:?}: {e}"))
}

/// The output of every file of `root` (all whole), by id.
fn outputs_of(root: &Path, backend: BackendKind, epoch: u64) -> BTreeMap<u64, Vec<u8>> {
    let data = Dataset::image_folder(root).expect("list");
    assert_eq!(data.len(), FILES);
    let (_, out) = run_epoch(
        pipeline(&data, backend, Limits::default()),
        epoch,
        Duration::ZERO,
    );
    assert!(out.reported.is_empty(), "{:?}", out.reported);
    out.delivered
        .into_iter()
        .map(|(id, mut v)| {
            assert_eq!(v.len(), 1);
            (id, v.remove(0))
        })
        .collect()
}

/// Whether `p` is a regular file itself (not a symlink, a FIFO, a socket).
fn is_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

/// The mutator: until `stop`, picks a file and does one thing to it, a pause between.
/// Replacements go through a rename, so a reader sees the old file or the new one; the
/// in-place edits (truncation, appending) are what a reader may meet half done.
fn mutate(root: &Path, v: &Versions, fifos: &[PathBuf], stop: &AtomicBool, done: &AtomicUsize) {
    let mut rng = common::TestRng(0xBAD_F11E);
    let tmp = root.join(".tmp.jpg");
    let mut fifos = fifos.iter();
    let mut sockets = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let i = rng.below(FILES as u64) as usize;
        let path = root.join(rel(i));
        let replace_with = |bytes: &[u8]| {
            std::fs::write(&tmp, bytes).expect("write");
            std::fs::rename(&tmp, &path).expect("rename");
        };
        // The in-place edits only edit a regular file (only this thread changes the
        // folder, so what it finds stays so): opening a FIFO to write would block.
        match rng.below(10) {
            0 if is_file(&path) => {
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_len(0));
            }
            1 if is_file(&path) => {
                // To half, or to anywhere from a quarter to the last byte (the end marker).
                let cut = rng.next_u64();
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| {
                        let len = f.metadata()?.len();
                        let to = if cut & 1 == 0 {
                            len / 2
                        } else {
                            len / 4 + (cut >> 1) % (len - len / 4).max(1)
                        };
                        f.set_len(to)
                    });
            }
            2 if is_file(&path) => {
                use std::io::Write;
                let garbage: Vec<u8> = (0..64 + rng.below(512))
                    .map(|_| rng.next_u64() as u8)
                    .collect();
                let _ = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(&garbage));
            }
            0..=2 => {}
            3 => replace_with(&v.rewrite[i]),
            4 => match fifos.next() {
                Some(f) => std::fs::rename(f, &path).expect("rename a FIFO"),
                None => {
                    // The FIFOs are used up: a socket is as little a regular file.
                    let s = root.join(format!(".sock{}", sockets.len()));
                    let l = std::os::unix::net::UnixListener::bind(&s).expect("socket");
                    std::fs::rename(&s, &path).expect("rename a socket");
                    sockets.push(l);
                }
            },
            5 => {
                let _ = std::fs::remove_file(&path);
            }
            6 => {
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink("/dev/zero", &tmp).expect("symlink");
                std::fs::rename(&tmp, &path).expect("rename");
            }
            _ => replace_with(&v.original[i]),
        }
        done.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn files_that_change_mid_epoch_are_delivered_whole_or_reported_once() {
    let v = versions();
    let dir = tempfile::tempdir().expect("tempdir");
    let (originals, rewrites, live) = (
        dir.path().join("originals"),
        dir.path().join("rewrites"),
        dir.path().join("live"),
    );
    write_tree(&originals, &v.original);
    write_tree(&rewrites, &v.rewrite);
    let v = Arc::new(v);
    for backend in common::backends() {
        if backend == BackendKind::Cuda && !common::cuda_present() {
            continue;
        }
        let _ = std::fs::remove_dir_all(&live);
        write_tree(&live, &v.original);
        let data = Dataset::image_folder(&live).expect("list");
        assert_eq!(data.len(), FILES);
        let paths: BTreeMap<u64, String> = data
            .samples()
            .iter()
            .map(|s| (s.id, s.path.clone()))
            .collect();
        let limits = Limits {
            max_bytes: MAX_BYTES,
            ..Limits::default()
        };
        let mut pipe = pipeline(&data, backend, limits);
        // FIFOs made ahead, in one call, and renamed over samples as the mutator goes.
        let fifos: Vec<PathBuf> = (0..48).map(|k| live.join(format!(".fifo{k}"))).collect();
        let ok = std::process::Command::new("mkfifo")
            .args(&fifos)
            .status()
            .expect("mkfifo");
        assert!(ok.success());

        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let mutator = {
            let (live, v, stop, done) = (
                live.clone(),
                Arc::clone(&v),
                Arc::clone(&stop),
                Arc::clone(&done),
            );
            std::thread::spawn(move || mutate(&live, &v, &fifos, &stop, &done))
        };
        let base = peak_alloc::reset();
        let mut outcomes = Vec::new();
        for epoch in 0..EPOCHS {
            let (p, out) = run_epoch(pipe, epoch, Duration::from_millis(3));
            pipe = p;
            outcomes.push(out);
        }
        drop(pipe);
        let (peak, largest) = (peak_alloc::peak() - base, peak_alloc::largest());
        stop.store(true, Ordering::Relaxed);
        mutator.join().expect("mutator");
        let mutations = done.load(Ordering::Relaxed);
        eprintln!(
            "{backend:?}: {mutations} mutations; heap peak {peak} bytes above the start, \
             largest allocation {largest}"
        );
        assert!(mutations > 0, "the mutator did nothing");

        let mut reports = 0;
        for (epoch, out) in outcomes.iter().enumerate() {
            // The expected outputs on this backend of every whole version.
            let want_original = outputs_of(&originals, backend, epoch as u64);
            let want_rewrite = outputs_of(&rewrites, backend, epoch as u64);
            for (&id, path) in &paths {
                let d = out.delivered.get(&id).map_or(0, Vec::len);
                let r = out.reported.get(&id).map_or(0, Vec::len);
                assert_eq!(
                    d + r,
                    1,
                    "{backend:?} epoch {epoch}: {path} delivered {d} and reported {r} times"
                );
                if let Some(px) = out.delivered.get(&id).and_then(|v| v.first()) {
                    assert!(
                        Some(px) == want_original.get(&id) || Some(px) == want_rewrite.get(&id),
                        "{backend:?} epoch {epoch}: {path} was delivered with pixels of no \
                         whole version of it (a damaged sample delivered as good)"
                    );
                }
                if let Some(e) = out.reported.get(&id).and_then(|v| v.first()) {
                    assert_eq!(&e.path, path, "{e}");
                    assert!(!e.reason.trim().is_empty(), "{e}");
                    reports += 1;
                }
            }
            let unknown: Vec<&u64> = out
                .delivered
                .keys()
                .chain(out.reported.keys())
                .filter(|id| !paths.contains_key(id))
                .collect();
            assert!(
                unknown.is_empty(),
                "ids that were never listed: {unknown:?}"
            );
        }
        eprintln!("{backend:?}: {reports} reports in {EPOCHS} epochs of {FILES} samples");
        // Memory in flight is bounded by the configuration: nothing the mutator made (a
        // FIFO, /dev/zero, garbage) was read without bound. The bound is loose (the
        // backend's own buffers count too); an unbounded read of /dev/zero would pass
        // any bound.
        assert!(
            largest < 16 << 20,
            "{backend:?}: an allocation of {largest} bytes"
        );
        assert!(
            peak < 128 << 20,
            "{backend:?}: the heap grew by {peak} bytes"
        );
    }
}

/// A file that grows past the byte limit between listing and reading is reported as too
/// large (kind `Limit`) every epoch, and not read: no allocation of its size is made.
#[test]
fn a_file_that_grows_past_the_limit_after_listing_is_reported_not_read() {
    let v = versions();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("data");
    write_tree(&root, &v.original[..12]);
    let data = Dataset::image_folder(&root).expect("list");
    assert_eq!(data.len(), 12);
    let grown = data.samples()[3].clone();
    // 4 MiB of garbage after the image: past the limit of 256 KiB.
    let big: Vec<u8> = v.original[3]
        .iter()
        .copied()
        .chain(std::iter::repeat_n(0xA5, 4 << 20))
        .collect();
    std::fs::write(root.join(&grown.path), &big).expect("grow");
    let limits = Limits {
        max_bytes: MAX_BYTES,
        ..Limits::default()
    };
    for backend in common::backends() {
        let mut pipe = pipeline(&data, backend, limits);
        for epoch in 0..2 {
            peak_alloc::reset();
            let (p, out) = run_epoch(pipe, epoch, Duration::ZERO);
            pipe = p;
            let largest = peak_alloc::largest();
            assert_eq!(out.delivered.len(), 11, "{backend:?}");
            assert!(out.delivered.values().all(|v| v.len() == 1));
            let reported: Vec<&stoker::SampleError> = out.reported.values().flatten().collect();
            assert_eq!(reported.len(), 1, "{backend:?}: {reported:?}");
            let e = reported[0];
            assert_eq!((e.id, e.path.as_str()), (grown.id, grown.path.as_str()));
            assert_eq!(e.kind, SampleErrorKind::Limit, "{e}");
            assert!(e.reason.contains("exceeds the limit"), "{e}");
            assert!(
                largest < big.len(),
                "{backend:?}: an allocation of {largest} bytes for a file of {}",
                big.len()
            );
        }
    }
}

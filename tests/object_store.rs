//! Datasets in object storage, against a real S3 API server on this machine (moto's server
//! mode, installed by scripts/test.sh; without it these tests say they were skipped, and
//! with `STOKER_REQUIRE_S3=1` they fail) and a fault-injecting proxy between stoker and
//! the server (tests/support/s3.rs): listing, sidecar indexes and indexes built by
//! streaming, every sample of an epoch delivered once over several ranks and byte for byte
//! what the same shards give from local files, a split made on local files that loads
//! unchanged on the shards in the store, block order, the disk cache, and faults (latency,
//! 5xx, throttling, connections reset mid-body, truncated bodies, flipped bits): delivered +
//! reported is always every sample, none twice, requests in flight stay within the bound,
//! and whole objects damaged in transit are never delivered; without credentials, the
//! first request fails within seconds.
//!
//! The object-storage client is process-wide, so the tests take turns (one lock).
#![cfg(feature = "object-store")]

mod common;
#[path = "support/s3.rs"]
mod s3;

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use stoker::source::remote::{self, CacheConfig, RemoteConfig};
use stoker::source::shards::{index_path, ShardFormat, ShardWriter};
use stoker::{Augment, BackendKind, Dataset, OnError, Pipeline, SampleErrorKind, Subset};

static TURN: Mutex<()> = Mutex::new(());

/// Samples in the test dataset, in three classes.
const N: usize = 48;

/// The S3 server and this test's turn, or `None` (skipped) without a server.
fn server() -> Option<(MutexGuard<'static, ()>, s3::S3Server)> {
    let turn = TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = s3::S3Server::start()?;
    Some((turn, server))
}

/// Points the client at `endpoint` (the server, or the proxy in front of it), with
/// `tune` applied to the settings.
fn configure(endpoint: &str, tune: impl FnOnce(&mut RemoteConfig)) {
    let mut c = RemoteConfig::default();
    c.options = [
        ("aws_endpoint", endpoint),
        ("aws_allow_http", "true"),
        ("aws_access_key_id", "test"),
        ("aws_secret_access_key", "test"),
        ("aws_region", "us-east-1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    tune(&mut c);
    remote::configure(c).expect("configure");
}

/// A folder of `N` random JPEGs (`c<k>/img<i>.jpg`) under `dir/folder`, and the same
/// samples as tar shards (`dir/tar`, about 8 samples a shard) and TFRecord shards
/// (`dir/tfr`), sidecars and class lists beside them.
fn dataset(dir: &Path) -> (PathBuf, Vec<PathBuf>, Vec<PathBuf>) {
    let folder = dir.join("folder");
    let mut rng = common::TestRng(0x530B_1EC7);
    for i in 0..N {
        let (w, h) = (24 + rng.below(40) as u32, 24 + rng.below(40) as u32);
        let jpeg = common::random_jpeg(&mut rng, w, h, turbojpeg::Subsamp::Sub2x2);
        common::write(&folder, &format!("c{}/img{i:03}.jpg", i % 3), &jpeg);
    }
    let data = Dataset::image_folder(&folder).expect("folder");
    let mut files = Vec::new();
    common::files_below(&folder, &mut files);
    let total: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let mut shards = Vec::new();
    for (format, sub) in [(ShardFormat::Tar, "tar"), (ShardFormat::TfRecord, "tfr")] {
        // About 6 shards of 8 samples (a tar sample's four members add 2.5 KB of headers
        // and padding).
        let bytes = (total + N as u64 * 2560) / 6;
        let w = ShardWriter::new(format, &dir.join(sub), "train", bytes).expect("writer");
        let done = w.write_dataset(&data, |_| {}).expect("written");
        assert!(done.unreadable.is_empty());
        shards.push(done.shards);
    }
    let tfr = shards.pop().expect("tfr");
    let tar = shards.pop().expect("tar");
    assert!(tar.len() >= 4, "{} tar shards", tar.len());
    (folder, tar, tfr)
}

/// Uploads every file under `local` to `s3://bucket/prefix/...`; sidecar indexes are
/// left out unless `sidecars`, and then stamped for the uploaded shards, as `stoker
/// convert --out s3://...` does.
fn upload(local: &Path, bucket: &str, prefix: &str, sidecars: bool) {
    let mut files = Vec::new();
    common::files_below(local, &mut files);
    files.sort();
    let url = |f: &Path| {
        let rel = f
            .strip_prefix(local)
            .expect("below")
            .to_string_lossy()
            .into_owned();
        format!("s3://{bucket}/{prefix}/{rel}")
    };
    let side = |f: &Path| f.to_string_lossy().ends_with(".stoker-index");
    for f in files.iter().filter(|f| !side(f)) {
        remote::upload(f, &url(f)).expect("upload");
        let sidecar = index_path(f);
        if sidecars && sidecar.is_file() {
            let info = remote::stat(&url(f)).expect("stat");
            let text = std::fs::read(&sidecar).expect("sidecar");
            let stamped = stoker::source::shards::restamp_index(&text, info.size, info.mtime_ns)
                .expect("an index of this shard");
            let tmp = local.join("stamped.tmp");
            std::fs::write(&tmp, stamped).expect("write");
            remote::upload(&tmp, &url(&sidecar)).expect("upload sidecar");
            std::fs::remove_file(&tmp).expect("remove");
        }
    }
}

/// A test's turn, the server, a scratch folder holding the [`dataset`] (its folder, tar
/// and TFRecord shards).
type Stored = (
    MutexGuard<'static, ()>,
    s3::S3Server,
    tempfile::TempDir,
    (PathBuf, Vec<PathBuf>, Vec<PathBuf>),
);

/// [`Stored`], with the bucket `bucket` holding the dataset's tar shards (their sidecars
/// stamped) under `tar/` and the client pointed at the server; `None` (skipped) without
/// a server.
fn stored(bucket: &str) -> Option<Stored> {
    let (turn, server) = server()?;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dataset(dir.path());
    server.create_bucket(bucket);
    configure(&server.endpoint, |_| {});
    upload(&dir.path().join("tar"), bucket, "tar", true);
    Some((turn, server, dir, data))
}

/// (path, id, label) of every sample, and the class names.
type Listing = (Vec<(String, u64, Option<u32>)>, Vec<String>);

/// Per batch: ids, image bytes, mask ids.
type Masked = Vec<(Vec<u64>, Vec<u8>, Vec<u16>)>;

fn listing(d: &Dataset) -> Listing {
    let s = d
        .samples()
        .iter()
        .map(|s| (s.path.clone(), s.id, s.label))
        .collect();
    (s, d.classes().to_vec())
}

/// Random crops (30 % of the area or more) to `size`, flipped half the time.
fn crops(size: u32) -> Augment {
    Augment::new()
        .random_resized_crop(size, (0.3, 1.0), (0.75, 1.33))
        .flip_horizontal(0.5)
}

fn pipeline(
    subset: Subset,
    rank: usize,
    world: usize,
    tune: impl FnOnce(stoker::PipelineBuilder) -> stoker::PipelineBuilder,
) -> Pipeline {
    tune(
        Pipeline::builder(subset)
            .backend(BackendKind::Cpu)
            .augment(crops(16))
            .batch_size(5)
            .readers(4)
            .workers(2)
            .shard(rank, world)
            .on_error(OnError::Skip)
            .seed(3),
    )
    .build()
    .expect("pipeline")
}

/// What one epoch of a rank gave: each delivered sample's pixels by id (padding left
/// out), and each reported sample's (kind, reason) by path.
#[derive(Default)]
struct Got {
    delivered: BTreeMap<u64, Vec<u8>>,
    twice: Vec<u64>,
    reported: BTreeMap<String, (SampleErrorKind, String)>,
    batches: usize,
}

fn run(p: &Pipeline, epoch: u64, got: &mut Got) {
    for b in p.epoch(epoch).expect("epoch") {
        let b = b.expect("batch");
        got.batches += 1;
        let images = b.read_images().expect("images");
        let per = images.len() / b.len().max(1);
        for (k, (&id, &rep)) in b.ids().iter().zip(b.repeated()).enumerate() {
            if rep {
                continue;
            }
            let px = images[k * per..(k + 1) * per].to_vec();
            if got.delivered.insert(id, px).is_some() {
                got.twice.push(id);
            }
        }
        for e in b.errors() {
            got.reported
                .insert(e.path.clone(), (e.kind, e.reason.clone()));
        }
    }
}

/// Every sample of `data` through `world` ranks: delivered + reported is every sample,
/// none twice; returns what was delivered and reported.
fn every_sample_once(
    data: &Dataset,
    world: usize,
    epoch: u64,
    tune: impl Fn(stoker::PipelineBuilder) -> stoker::PipelineBuilder,
) -> Got {
    let mut got = Got::default();
    let mut steps = BTreeSet::new();
    for rank in 0..world {
        let p = pipeline(data.clone().all(), rank, world, &tune);
        let before = got.batches;
        run(&p, epoch, &mut got);
        steps.insert(got.batches - before);
    }
    assert_eq!(
        steps.len(),
        1,
        "every rank the same number of steps: {steps:?}"
    );
    assert!(got.twice.is_empty(), "delivered twice: {:?}", got.twice);
    let ids: BTreeSet<u64> = data.samples().iter().map(|s| s.id).collect();
    let by_path: BTreeMap<&str, u64> = data
        .samples()
        .iter()
        .map(|s| (s.path.as_str(), s.id))
        .collect();
    let mut seen: BTreeSet<u64> = got.delivered.keys().copied().collect();
    for path in got.reported.keys() {
        let id = by_path.get(path.as_str()).expect("a listed sample");
        assert!(seen.insert(*id), "{path} delivered and reported");
    }
    assert_eq!(seen, ids, "delivered + reported = every sample");
    got
}

#[test]
fn shards_and_folders_in_the_store_list_and_deliver_as_local_files_do() {
    let Some((_turn, server, dir, (folder, tar, tfr))) = stored("data") else {
        return;
    };
    upload(&dir.path().join("tfr"), "data", "tfr", false);
    upload(&folder, "data", "folder", false);
    // A hidden object and a non-image are left out, as in a local folder.
    let side = dir.path().join("x");
    std::fs::write(&side, b"notes").expect("write");
    remote::upload(&side, "s3://data/folder/c0/notes.txt").expect("upload");
    remote::upload(&side, "s3://data/folder/.hidden/a.jpg").expect("upload");

    let local_tar = Dataset::tar(&tar).expect("local tar");
    let local_folder = Dataset::image_folder(&folder).expect("local folder");
    // Tar shards with their sidecars: listing reads the sidecars, not the shards.
    configure(&server.endpoint, |_| {});
    let s3_tar = Dataset::tar(&[PathBuf::from("s3://data/tar/")]).expect("s3 tar");
    assert_eq!(listing(&s3_tar), listing(&local_tar));
    let shard_bytes: u64 = tar
        .iter()
        .map(|p| std::fs::metadata(p).expect("shard").len())
        .sum();
    let st = remote::stats();
    assert!(
        st.bytes < shard_bytes / 2,
        "listing with sidecars read {} bytes of {shard_bytes} in shards",
        st.bytes
    );
    // Reads that follow each other in a shard (one thread, in the shards' order)
    // coalesce: a read of 8 MiB serves the rest of the shard.
    let before = remote::stats().requests;
    let mut order: Vec<&stoker::Sample> = s3_tar.samples().iter().collect();
    order.sort_by_key(|s| match &s.location {
        stoker::source::Location::Member(m) => (m.shard.clone(), m.offset),
        other => panic!("{other:?}"),
    });
    for s in order {
        s.location.read(1 << 20).expect("read");
    }
    let reads = remote::stats().requests - before;
    assert!(
        reads as usize <= 2 * tar.len() && reads as usize <= N / 2,
        "{reads} requests for {N} samples in {} shards",
        tar.len()
    );
    // TFRecord shards without sidecars: indexed by one streaming pass each.
    configure(&server.endpoint, |_| {});
    let s3_tfr = Dataset::tfrecord(&[PathBuf::from("s3://data/tfr")]).expect("s3 tfrecord");
    assert_eq!(
        listing(&s3_tfr),
        listing(&Dataset::tfrecord(&tfr).expect("local tfrecord"))
    );
    let tfr_bytes: u64 = tfr
        .iter()
        .map(|p| std::fs::metadata(p).expect("shard").len())
        .sum();
    assert!(remote::stats().bytes >= tfr_bytes, "streamed every shard");
    // A bucket named without a path is a folder.
    let whole = Dataset::tar(&[PathBuf::from("s3://data")]);
    assert!(
        matches!(&whole, Err(e) if e.to_string().contains("no shard")),
        "the bucket's top holds no shard: {whole:?}"
    );
    // A shard named by its URL, and a folder of images.
    let one = Dataset::tar(&[PathBuf::from(format!(
        "s3://data/tar/{}",
        tar[1].file_name().expect("name").to_string_lossy()
    ))])
    .expect("one shard");
    assert_eq!(
        listing(&one),
        listing(&Dataset::tar(&tar[1..2]).expect("local shard"))
    );
    let s3_folder = Dataset::image_folder("s3://data/folder").expect("s3 folder");
    assert_eq!(listing(&s3_folder), listing(&local_folder));
    let skipped: Vec<String> = s3_folder.skipped().iter().map(|s| s.path.clone()).collect();
    assert_eq!(skipped, [".hidden/", "c0/notes.txt"]);

    // Every sample once over three ranks, each the pixels the local shards give.
    let local = every_sample_once(&local_tar, 3, 1, |b| b);
    assert!(local.reported.is_empty());
    for (name, data) in [
        ("tar", &s3_tar),
        ("tfrecord", &s3_tfr),
        ("folder", &s3_folder),
    ] {
        let got = every_sample_once(data, 3, 1, |b| b);
        assert!(got.reported.is_empty(), "{name}: {:?}", got.reported);
        assert!(
            got.delivered == local.delivered,
            "{name}: the pixels of the local shards"
        );
    }

    // A split made on the local files loads unchanged on the shards in the store.
    let split = Dataset::image_folder(&folder)
        .expect("folder")
        .split(stoker::SplitSpec::fraction(0.25).seed(9))
        .expect("split");
    let manifest = dir.path().join("split.json");
    split.save(&manifest).expect("save");
    let again = stoker::Split::load(
        &manifest,
        Dataset::tar(&[PathBuf::from("s3://data/tar/")]).expect("s3 tar"),
    )
    .expect("load");
    let ids = |s: &Subset| s.samples().iter().map(|s| s.id).collect::<BTreeSet<_>>();
    assert_eq!(ids(&again.train()), ids(&split.train()));
    assert_eq!(ids(&again.val()), ids(&split.val()));
    assert!(!split.val().is_empty());

    // A file list in the store names objects beside it.
    let list = dir.path().join("list.txt");
    std::fs::write(&list, "c0/img000.jpg\t0\nc1/img004.jpg\t1\n").expect("write");
    remote::upload(&list, "s3://data/folder/list.txt").expect("upload");
    let listed = Dataset::files("s3://data/folder/list.txt").expect("file list");
    let got = every_sample_once(&listed, 1, 1, |b| b);
    assert_eq!(got.delivered.len(), 2);
    for (id, px) in &got.delivered {
        assert!(
            local.delivered[id] == *px,
            "the same sample as in the folder"
        );
    }
}

#[test]
fn faults_are_retried_or_reported_never_lost_or_delivered_twice() {
    let Some((_turn, server, _dir, (_, tar, _))) = stored("flaky") else {
        return;
    };
    let local = every_sample_once(&Dataset::tar(&tar).expect("local"), 2, 0, |b| b);

    let proxy = s3::Proxy::start(&server.endpoint);
    let max_requests = 3;
    let tune = |c: &mut RemoteConfig| {
        c.max_requests = max_requests;
        // Larger than a sample's read (a few KB), smaller than some shards (read whole
        // for their fingerprint at listing): such a read takes the whole budget.
        c.max_bytes_in_flight = 16 << 10;
        // A try fails about one time in three: 13 tries in a row about one read in a
        // million.
        c.retries = 12;
        c.backoff = Duration::from_millis(2);
        c.max_backoff = Duration::from_millis(20);
        c.timeout = Duration::from_secs(5);
    };
    // Every kind of fault, on listing and reads alike, often (a third of the requests):
    // all retried through.
    proxy.set(s3::Faults {
        latency: Duration::from_millis(3),
        error_every: 13,
        throttle_every: 17,
        server_error_every: 19,
        reset_every: 7,
        truncate_every: 11,
        flip_every: 0,
        only_ranged: false,
    });
    configure(&proxy.endpoint, tune);
    let data = Dataset::tar(&[PathBuf::from("s3://flaky/tar/")]).expect("listed through faults");
    let got = every_sample_once(&data, 2, 0, |b| b.readers(8));
    assert!(got.reported.is_empty(), "{:?}", got.reported);
    assert!(
        got.delivered == local.delivered,
        "the bytes the server holds, whole"
    );
    let st = remote::stats();
    assert!(st.retries > 0 && st.failures == 0, "{st:?}");
    let counts = &proxy.counts;
    assert!(counts.faults.load(std::sync::atomic::Ordering::Relaxed) > 10);
    let peak = counts
        .max_in_flight
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        peak <= max_requests as u64,
        "{peak} requests in flight, bound {max_requests}"
    );
    assert!(st.max_in_flight <= max_requests as u64, "{st:?}");
    // Within the budget, or one read larger than it alone (it takes every permit).
    let largest = tar
        .iter()
        .map(|f| std::fs::metadata(f).expect("shard").len())
        .max()
        .unwrap_or(0);
    assert!(
        st.max_bytes_in_flight <= largest.max(16 << 10),
        "{st:?}, largest shard {largest} B"
    );

    // Reads that never succeed: every sample reported (kind io, with its URL and the
    // last error), none lost, the run ends.
    // `faults` on every read by range (not on listing), with `retries`: every sample of
    // the shards once through `world` ranks.
    let ranged_faults = |faults: s3::Faults, retries: u32, world: usize| {
        proxy.set(s3::Faults {
            only_ranged: true,
            ..faults
        });
        configure(&proxy.endpoint, |c| {
            tune(c);
            c.retries = retries;
        });
        let data = Dataset::tar(&[PathBuf::from("s3://flaky/tar/")]).expect("listed");
        every_sample_once(&data, world, 0, |b| b)
    };
    let t = Instant::now();
    let error = s3::Faults {
        error_every: 1,
        ..Default::default()
    };
    let got = ranged_faults(error, 2, 2);
    assert!(got.delivered.is_empty());
    assert_eq!(got.reported.len(), N);
    for (path, (kind, reason)) in &got.reported {
        assert_eq!(*kind, SampleErrorKind::Io, "{path}: {reason}");
        assert!(
            reason.contains("s3://flaky/tar/train-") && reason.contains("3 attempt"),
            "{path}: {reason}"
        );
        assert!(
            reason.contains("503") || reason.contains("SlowDown"),
            "{path}: {reason}"
        );
    }
    assert!(t.elapsed() < Duration::from_secs(60));
    // Bodies cut short on every read: never delivered as good.
    let truncate = s3::Faults {
        truncate_every: 1,
        ..Default::default()
    };
    let got = ranged_faults(truncate, 1, 1);
    assert!(got.delivered.is_empty() && got.reported.len() == N);
}

#[test]
fn block_order_reads_whole_shards_and_delivers_every_sample_once() {
    let Some((_turn, server, dir, (_, tar, _))) = stored("blocks") else {
        return;
    };
    let local = Dataset::tar(&tar).expect("local");
    configure(&server.endpoint, |c| c.read_ahead = 1 << 20);
    let data = Dataset::tar(&[PathBuf::from("s3://blocks/tar/")]).expect("listed");
    let before = remote::stats();
    let got = every_sample_once(&data, 2, 4, |b| b.block_order(2));
    assert!(got.reported.is_empty(), "{:?}", got.reported);
    let st = remote::stats();
    assert!(st.held_hits as usize >= N, "{st:?}");
    // A shard is fetched whole, once per rank that reads it: about a request per shard,
    // not one per sample.
    let requests = st.requests - before.requests;
    assert!(
        requests as usize <= 2 * tar.len() + 4,
        "{requests} requests for {} shards",
        tar.len()
    );
    // The same order on local files, and the same samples.
    let local_got = every_sample_once(&local, 2, 4, |b| b.block_order(2));
    assert!(local_got.delivered == got.delivered);

    // Resumed mid-epoch (by a fresh client): the same batches, every read from a shard
    // held in memory, the first batches' too.
    let p = pipeline(data.clone().all(), 0, 1, |b| b.block_order(2));
    let ids = |ep: stoker::Epoch| -> Vec<Vec<u64>> {
        ep.map(|b| b.expect("batch").ids().to_vec()).collect()
    };
    let full = ids(p.epoch(7).expect("epoch"));
    // A batch that reads from the same windows as the one before it (so no new hold is
    // asked for at it).
    let windows = p.sampler().epoch_windows(7).expect("block order");
    let span = |b: &[u32]| (b.iter().min().copied(), b.iter().max().copied());
    let spans: Vec<_> = windows.chunks(5).map(span).collect();
    let k = (1..spans.len())
        .find(|&k| spans[k] == spans[k - 1])
        .expect("two batches in one window");
    configure(&server.endpoint, |c| c.read_ahead = 1 << 20);
    let resumed = ids(p.epoch_from(7, k).expect("resumed"));
    assert_eq!(resumed, full[k..]);
    let read: usize = resumed.iter().map(Vec::len).sum();
    assert_eq!(
        remote::stats().held_hits as usize,
        read,
        "{:?}",
        remote::stats()
    );

    // With the disk cache, a later run's windows come from disk: no request after
    // listing.
    let cache = dir.path().join("cache");
    let tune = |c: &mut RemoteConfig| {
        c.read_ahead = 1 << 20;
        c.cache = Some(CacheConfig::new(&cache, 64 << 20));
    };
    configure(&server.endpoint, tune);
    let data = Dataset::tar(&[PathBuf::from("s3://blocks/tar/")]).expect("listed");
    every_sample_once(&data, 1, 5, |b| b.block_order(2));
    configure(&server.endpoint, tune);
    let data = Dataset::tar(&[PathBuf::from("s3://blocks/tar/")]).expect("listed");
    let before = remote::stats();
    let again = every_sample_once(&data, 1, 6, |b| b.block_order(2));
    let st = remote::stats();
    assert_eq!(st.requests, before.requests, "{st:?}");
    assert!(
        st.cache_hits >= before.cache_hits + tar.len() as u64,
        "{st:?}"
    );
    assert!(again.delivered == every_sample_once(&local, 1, 6, |b| b.block_order(2)).delivered);
}

#[test]
fn the_disk_cache_serves_later_epochs_and_fetches_a_changed_object_again() {
    let Some((_turn, server, dir, (_, tar, _))) = stored("cached") else {
        return;
    };
    let cache = dir.path().join("cache");
    let tune = |c: &mut RemoteConfig| c.cache = Some(CacheConfig::new(&cache, 64 << 20));
    configure(&server.endpoint, tune);
    let data = Dataset::tar(&[PathBuf::from("s3://cached/tar/")]).expect("listed");
    let first = every_sample_once(&data, 1, 0, |b| b);
    // The shards arrive in the cache in the background.
    let t = Instant::now();
    while remote::stats().cache_fills < 2 * tar.len() as u64 + 1
        && t.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The shards, their sidecars and the class list: every object read.
    let objects = std::fs::read_dir(dir.path().join("tar"))
        .expect("tar")
        .count() as u64;
    assert_eq!(remote::stats().cache_fills, objects);
    let before = remote::stats();
    let second = every_sample_once(&data, 1, 0, |b| b);
    let st = remote::stats();
    assert_eq!(
        st.requests, before.requests,
        "a later epoch reads the cache alone"
    );
    assert!(st.cache_hits >= before.cache_hits + N as u64);
    assert!(second.delivered == first.delivered);

    // An object rewritten in the store (another ETag). A dataset listed before the
    // change reports the sample as changed, never half old, half new (no cache here);
    // listed again, the new version is read, and cached anew.
    let folder = dir.path().join("folder");
    upload(&folder, "cached", "folder", false);
    configure(&server.endpoint, |_| {});
    let stale = Dataset::image_folder("s3://cached/folder/").expect("listed");
    let before_change = every_sample_once(&stale, 1, 0, |b| b);
    let mut rng = common::TestRng(77);
    let other = common::random_jpeg(&mut rng, 40, 30, turbojpeg::Subsamp::Sub2x2);
    // (Written by another client: this one remembers what it listed.)
    server.put_object("cached", "folder/c1/img001.jpg", &other);
    let got = every_sample_once(&stale, 1, 0, |b| b);
    assert_eq!(got.reported.len(), 1, "{:?}", got.reported);
    let (kind, reason) = &got.reported["c1/img001.jpg"];
    assert_eq!(*kind, SampleErrorKind::Io);
    assert!(reason.contains("changed since it was listed"), "{reason}");
    configure(&server.endpoint, tune);
    let fresh = Dataset::image_folder("s3://cached/folder/").expect("listed again");
    let fills = remote::stats().cache_fills;
    let got = every_sample_once(&fresh, 1, 0, |b| b);
    assert!(got.reported.is_empty(), "{:?}", got.reported);
    let changed = fresh
        .samples()
        .iter()
        .find(|s| s.path == "c1/img001.jpg")
        .expect("sample")
        .id;
    for (id, px) in &got.delivered {
        assert_eq!(
            *id == changed,
            before_change.delivered[id] != *px,
            "sample {id:016x}"
        );
    }
    let t = Instant::now();
    while remote::stats().cache_fills < fills + N as u64 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every image of the folder, the new version among them, beside the shards.
    let files = std::fs::read_dir(&cache).expect("cache").count();
    assert_eq!(
        files as u64,
        objects + N as u64,
        "one file per object version read"
    );
}

/// The `stoker` command with the store's settings in its environment, as a user sets them.
fn stoker_cmd(endpoint: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_stoker"))
        .args(args)
        .env("AWS_ENDPOINT", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("RUST_LOG", "warn")
        .output()
        .expect("stoker runs")
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn the_cli_converts_into_the_store_and_reads_urls_like_paths() {
    let Some((_turn, server)) = server() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (folder, _, _) = dataset(dir.path());
    server.create_bucket("cli");
    let e = &server.endpoint;
    let folder_arg = folder.to_string_lossy().into_owned();
    let convert = json_of(&stoker_cmd(
        e,
        &[
            "convert",
            &folder_arg,
            "--to",
            "tar",
            "--restarts",
            "off",
            "--shard-size",
            "64KiB",
            "--out",
            "s3://cli/shards/",
            "--json",
        ],
    ));
    assert_eq!(convert["samples"], N as u64);
    let shards = convert["shards"].as_array().expect("shards").clone();
    assert!(shards.len() >= 2, "{convert}");
    assert!(shards.iter().all(|s| s
        .as_str()
        .is_some_and(|s| s.starts_with("s3://cli/shards/shard-"))));
    // Uploaded beside the shards: a sidecar each (stamped for the uploaded shard: listing
    // reads it rather than the shard) and the class list.
    configure(e, |_| {});
    let listed = remote::list("s3://cli/shards/").expect("list");
    let sidecars = listed
        .iter()
        .filter(|o| o.url.ends_with(".stoker-index"))
        .count();
    assert_eq!(sidecars, shards.len());
    assert!(listed.iter().any(|o| o.url.ends_with("shard.classes.json")));
    let data = Dataset::tar(&[PathBuf::from("s3://cli/shards/")]).expect("listed");
    let shard_bytes: u64 = listed
        .iter()
        .filter(|o| o.url.ends_with(".tar"))
        .map(|o| o.size)
        .sum();
    assert!(
        remote::stats().bytes < shard_bytes / 2,
        "sidecars read, not shards"
    );
    assert_eq!(
        listing(&data),
        listing(&Dataset::image_folder(&folder).expect("folder"))
    );

    // inspect, split and bench pipeline take the URL as a path.
    let inspect = json_of(&stoker_cmd(e, &["inspect", "s3://cli/shards/", "--json"]));
    assert_eq!(inspect["samples"], N as u64, "{inspect}");
    let manifest = dir.path().join("split.json");
    let manifest_arg = manifest.to_string_lossy().into_owned();
    json_of(&stoker_cmd(
        e,
        &[
            "split",
            "s3://cli/shards/",
            "--val",
            "0.25",
            "--out",
            &manifest_arg,
            "--json",
        ],
    ));
    let from_store =
        stoker::Split::load(&manifest, Dataset::image_folder(&folder).expect("folder"))
            .expect("the split of the shards in the store loads on the local files");
    assert_eq!(from_store.val().len(), N / 4);
    for block in [None, Some("2")] {
        let mut args = vec![
            "bench",
            "pipeline",
            "--images",
            "s3://cli/shards/",
            "--size",
            "16",
            "--batch",
            "8",
            "--epochs",
            "1",
            "--json",
            "--quiet",
        ];
        if let Some(w) = block {
            args.extend(["--block-order", w]);
        }
        let bench = json_of(&stoker_cmd(e, &args));
        let run = &bench["results"][0];
        assert_eq!(run["delivered"], N as u64, "{bench}");
        assert_eq!(run["reported"], 0, "{bench}");
    }
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_files_in_the_store_read_as_local_ones() {
    let Some((_turn, server)) = server() else {
        return;
    };
    server.create_bucket("parquet");
    configure(&server.endpoint, |_| {});
    let local = common::data_dir().join("shards/parquet/train.parquet");
    remote::upload(&local, "s3://parquet/a/train.parquet").expect("upload");
    let here = Dataset::parquet(std::slice::from_ref(&local)).expect("local");
    let there = Dataset::parquet(&[PathBuf::from("s3://parquet/a/")]).expect("in the store");
    assert_eq!(listing(&there), listing(&here));
    assert!(!here.is_empty());
    for (a, b) in here.samples().iter().zip(there.samples()) {
        let (x, y) = (a.location.read(1 << 24), b.location.read(1 << 24));
        match (x, y) {
            (Ok(x), Ok(y)) => assert_eq!(x, y, "{}", a.path),
            (Err(x), Err(y)) => assert_eq!(x.to_string().is_empty(), y.to_string().is_empty()),
            (x, y) => panic!("{}: {x:?} here, {y:?} in the store", a.path),
        }
    }
}

#[test]
fn masks_in_the_store_pair_with_their_images() {
    let Some((_turn, server)) = server() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = common::TestRng(0x3A5C);
    for i in 0..6u32 {
        let (w, h) = (20 + 3 * i, 16 + 2 * i);
        let rgb = common::random_rgb(&mut rng, w, h);
        common::write(
            dir.path(),
            &format!("img/c{}/s{i}.png", i % 2),
            &common::png_rgb(w, h, &rgb),
        );
        let ids: Vec<u16> = (0..w * h).map(|p| ((p + i) % 5) as u16).collect();
        common::write(
            dir.path(),
            &format!("masks/s{i}.png"),
            &common::png_labels(w, h, &ids, false),
        );
    }
    server.create_bucket("masks");
    configure(&server.endpoint, |_| {});
    upload(&dir.path().join("img"), "masks", "img", false);
    upload(&dir.path().join("masks"), "masks", "m", false);
    let local = Dataset::image_folder(dir.path().join("img"))
        .and_then(|d| d.with_masks(dir.path().join("masks")))
        .expect("local");
    let there = Dataset::image_folder("s3://masks/img/")
        .and_then(|d| d.with_masks("s3://masks/m"))
        .expect("in the store");
    assert_eq!(listing(&there), listing(&local));
    for (a, b) in local.samples().iter().zip(there.samples()) {
        let (ma, mb) = (
            a.mask.as_ref().expect("mask"),
            b.mask.as_ref().expect("mask"),
        );
        assert_eq!(
            ma.read(1 << 20).expect("local"),
            mb.read(1 << 20).expect("store")
        );
    }
    // Through the pipeline: the masks follow their images' geometry, as from local files.
    let run_masks = |d: &Dataset| -> Masked {
        let p = Pipeline::builder(d.clone().all())
            .backend(BackendKind::Cpu)
            .augment(crops(12))
            .batch_size(3)
            .seed(5)
            .build()
            .expect("pipeline");
        p.epoch(2)
            .expect("epoch")
            .map(|b| {
                let b = b.expect("batch");
                (
                    b.ids().to_vec(),
                    b.read_images().expect("images"),
                    b.read_masks().expect("masks").unwrap_or_default(),
                )
            })
            .collect()
    };
    assert_eq!(run_masks(&there), run_masks(&local));
}

/// With no credentials (none in the options or the environment) and an instance metadata
/// service that accepts connections and never answers, the first request fails within
/// seconds, saying that no credentials were found and where they were looked for, rather
/// than after minutes of retried token requests. (No S3 server needed: nothing is asked
/// of the store.)
#[test]
fn missing_credentials_fail_within_seconds_naming_where_they_were_looked_for() {
    let _turn = TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Credentials in this process's environment would be found first (the other tests
    // give theirs in the options).
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| k.starts_with("AWS_")) {
            std::env::remove_var(&k);
        }
    }
    // A metadata service that accepts connections, keeps them and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let metadata = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let mut c = RemoteConfig::default();
    c.options = [
        ("aws_endpoint", "http://127.0.0.1:9"),
        ("aws_allow_http", "true"),
        ("aws_region", "us-east-1"),
        ("aws_metadata_endpoint", metadata.as_str()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    remote::configure(c).expect("configure");
    let (tx, rx) = std::sync::mpsc::channel();
    let t = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(remote::list("s3://no-credentials/data/").map(|l| l.len()));
    });
    let got = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("an answer within 20 s");
    let elapsed = t.elapsed();
    let err = got.expect_err("no credentials: an error");
    let msg = err.to_string();
    assert!(elapsed < Duration::from_secs(8), "{elapsed:?}: {msg}");
    assert!(
        matches!(err, remote::RemoteError::NoCredentials { .. }),
        "{msg}"
    );
    assert!(msg.contains("no credentials found (looked in: "), "{msg}");
    for place in [
        "AWS_ACCESS_KEY_ID",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        metadata.as_str(),
    ] {
        assert!(msg.contains(place), "{place} not named: {msg}");
    }
    // A dataset constructor says the same.
    let data = Dataset::image_folder("s3://no-credentials/data/");
    assert!(
        matches!(&data, Err(e) if e.to_string().contains("no credentials found")),
        "{data:?}"
    );
}

/// A proxy that flips one bit in a third of the bodies. Whole objects are checked against
/// their ETags (the loose files of a folder, put in one request each; shards uploaded in
/// parts and fetched whole in block order; objects fetched into the disk cache): every
/// sample is delivered with the pixels the local file gives, never damaged (the damaged
/// bodies retried), and the disk cache holds only undamaged objects.
#[test]
fn bits_flipped_in_whole_objects_are_caught_never_delivered_nor_cached() {
    let Some((_turn, server, dir, (folder, tar, _))) = stored("flips") else {
        return;
    };
    let mut files = Vec::new();
    common::files_below(&folder, &mut files);
    let mut originals = BTreeSet::new();
    for f in &files {
        let rel = f.strip_prefix(&folder).expect("below").to_string_lossy();
        let bytes = std::fs::read(f).expect("read");
        // Put in one request: its ETag is the MD5 of its bytes.
        server.put_object(
            "flips",
            &format!("folder/{}", rel.replace('\\', "/")),
            &bytes,
        );
        originals.insert(bytes);
    }
    for f in &tar {
        originals.insert(std::fs::read(f).expect("shard"));
    }
    // The other objects of the shards' folder, as stored: the class list, and the
    // sidecar indexes stamped with the stored shards' size and time.
    let mut below = Vec::new();
    common::files_below(&dir.path().join("tar"), &mut below);
    for f in &below {
        let bytes = std::fs::read(f).expect("read");
        match f.to_string_lossy().strip_suffix(".stoker-index") {
            Some(shard) => {
                let name = Path::new(shard)
                    .file_name()
                    .expect("name")
                    .to_string_lossy();
                let info = remote::stat(&format!("s3://flips/tar/{name}")).expect("stat");
                let stamped =
                    stoker::source::shards::restamp_index(&bytes, info.size, info.mtime_ns)
                        .expect("an index");
                originals.insert(stamped);
            }
            None => {
                originals.insert(bytes);
            }
        }
    }
    let local = every_sample_once(&Dataset::image_folder(&folder).expect("local"), 1, 0, |b| b);
    let local_tar = Dataset::tar(&tar).expect("local tar");
    let local_blocks = every_sample_once(&local_tar, 2, 4, |b| b.block_order(2));
    let local_ranged = every_sample_once(&local_tar, 2, 0, |b| b);

    let proxy = s3::Proxy::start(&server.endpoint);
    let flips = || s3::Faults {
        flip_every: 3,
        ..Default::default()
    };
    let faults = || {
        proxy
            .counts
            .faults
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    let cache = dir.path().join("cache");
    let tune = |c: &mut RemoteConfig| {
        // A try fails one time in three: 13 in a row about one read in a million.
        c.retries = 12;
        c.backoff = Duration::from_millis(2);
        c.max_backoff = Duration::from_millis(20);
        c.read_ahead = 1 << 20;
    };

    // The loose files of a folder, read whole, and fetched into the disk cache.
    configure(&proxy.endpoint, |c| {
        tune(c);
        c.cache = Some(CacheConfig::new(&cache, 64 << 20));
    });
    let data = Dataset::image_folder("s3://flips/folder/").expect("listed without faults");
    proxy.set(flips());
    let got = every_sample_once(&data, 1, 0, |b| b);
    assert!(faults() as usize >= N / 4, "{} bits flipped", faults());
    assert!(got.reported.is_empty(), "{:?}", got.reported);
    for (id, px) in &got.delivered {
        assert!(
            local.delivered[id] == *px,
            "sample {id:016x} delivered damaged"
        );
    }
    let t = Instant::now();
    while remote::stats().cache_fills < N as u64 / 2 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let undamaged = |cache: &Path| {
        let mut cached = 0;
        for f in std::fs::read_dir(cache).expect("cache").flatten() {
            if f.path().extension().is_some_and(|x| x == "obj") {
                let bytes = std::fs::read(f.path()).expect("cached");
                assert!(
                    originals.contains(&bytes),
                    "{} is damaged",
                    f.path().display()
                );
                cached += 1;
            }
        }
        cached
    };
    let cached = undamaged(&cache);
    assert!(cached >= N / 2, "{cached} objects cached");

    // Shards uploaded in parts, fetched whole in block order: half the bodies flipped,
    // more retries.
    proxy.set(s3::Faults::default());
    let before = faults();
    let cache2 = dir.path().join("cache2");
    configure(&proxy.endpoint, |c| {
        tune(c);
        c.retries = 20;
        c.cache = Some(CacheConfig::new(&cache2, 64 << 20));
    });
    let data = Dataset::tar(&[PathBuf::from("s3://flips/tar/")]).expect("listed");
    proxy.set(s3::Faults {
        flip_every: 2,
        ..Default::default()
    });
    let got = every_sample_once(&data, 2, 4, |b| b.block_order(2));
    assert!(faults() > before, "no bit flipped");
    assert!(got.reported.is_empty(), "{:?}", got.reported);
    assert!(
        got.delivered == local_blocks.delivered,
        "the pixels of the local shards"
    );
    assert!(
        remote::stats().held_hits as usize >= N,
        "{:?}",
        remote::stats()
    );
    let t = Instant::now();
    while remote::stats().cache_fills == 0 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(undamaged(&cache2) > 0, "shards cached");

    // Shards read by range (the default order), no cache: a range has no checksum of the
    // store's, but the sidecars (indexed from the local shards) record each member's
    // CRC-32C, so a body with a flipped bit is read again, never delivered.
    proxy.set(s3::Faults::default());
    configure(&proxy.endpoint, tune);
    let data = Dataset::tar(&[PathBuf::from("s3://flips/tar/")]).expect("listed");
    let before = faults();
    proxy.set(s3::Faults {
        flip_every: 5,
        only_ranged: true,
        ..Default::default()
    });
    let got = every_sample_once(&data, 2, 0, |b| b);
    assert!(faults() >= before + 5, "{} bits flipped", faults() - before);
    assert!(got.reported.is_empty(), "{:?}", got.reported);
    assert!(
        got.delivered == local_ranged.delivered,
        "the pixels of the local shards, read by range"
    );
}

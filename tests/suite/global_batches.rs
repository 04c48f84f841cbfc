//! Global batches: an epoch is a sequence of global batches fixed by the seed, the epoch
//! and the global batch size, whatever the world size; a job's `ResumeState` (taken from
//! a batch, saved as JSON) continues that sequence on another number of ranks.

use crate::common;
use crate::data_parallel::{folder, pipe_with};

use std::collections::BTreeSet;
use std::path::Path;

use stoker::{
    Augment, BackendKind, Dataset, Error, OnError, Pipeline, ResumeError, ResumeState, Sharding,
};

/// A delivered sample (id, label, pixels), and whether it was marked repeated.
type Slot = ((u64, Option<u32>, Vec<u8>), bool);

/// An image folder of `n` small random PNGs in three classes.
fn classes(dir: &Path, n: usize) -> Dataset {
    let mut rng = common::TestRng(n as u64 * 7 + 1);
    for i in 0..n {
        let (w, h) = (12 + rng.below(20) as u32, 12 + rng.below(20) as u32);
        let png = common::png_rgb(w, h, &common::random_rgb(&mut rng, w, h));
        common::write(dir, &format!("c{}/{i:03}.png", i % 3), &png);
    }
    Dataset::image_folder(dir).expect("folder")
}

/// Rank `rank` of `world` with global batches of `global` (each rank `global / world`).
fn rank(data: &Dataset, rank: usize, world: usize, global: usize, s: Sharding) -> Pipeline {
    let shard = (rank, world, global / world);
    pipe_with(
        data.clone().all(),
        shard,
        false,
        OnError::Skip,
        BackendKind::Cpu,
        s,
    )
}

/// The state `p` gives after the first batch of epoch 1.
fn state_after_first_batch(p: &Pipeline) -> ResumeState {
    let mut epoch = p.epoch(1).expect("epoch");
    epoch.next().expect("a batch").expect("batch").state()
}

/// A batch's samples, each with its pixels and its padding mark.
fn unpack(b: stoker::Batch) -> Vec<Slot> {
    let images = b.read_images().expect("images");
    let per = images.len() / b.len().max(1);
    (0..b.len())
        .map(|i| {
            let pixels = images[i * per..(i + 1) * per].to_vec();
            ((b.ids()[i], b.labels()[i], pixels), b.repeated()[i])
        })
        .collect()
}

/// The ranks' batches step by step, in rank order: the global batches.
fn global(ranks: Vec<Vec<Vec<Slot>>>) -> Vec<Vec<Slot>> {
    let steps = ranks[0].len();
    assert!(ranks.iter().all(|r| r.len() == steps), "unequal steps");
    (0..steps)
        .map(|s| ranks.iter().flat_map(|r| r[s].clone()).collect())
        .collect()
}

/// A global batch without its padding.
fn real(batch: &[Slot]) -> Vec<(u64, Option<u32>, Vec<u8>)> {
    batch.iter().filter(|s| !s.1).map(|s| s.0.clone()).collect()
}

/// Each global batch's padding count.
fn padding(batches: &[Vec<Slot>]) -> Vec<usize> {
    batches
        .iter()
        .map(|b| b.iter().filter(|s| s.1).count())
        .collect()
}

#[test]
fn a_job_stopped_on_4_ranks_resumes_on_2_and_8_with_the_same_global_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (n, g, epoch, k) = (50, 8, 2, 3);
    let data = classes(dir.path(), n);
    // The reference: one rank, global batches of 8, uninterrupted.
    let one = rank(&data, 0, 1, g, Sharding::Global);
    let reference: Vec<Vec<Slot>> = one
        .epoch(epoch)
        .expect("epoch")
        .map(|b| unpack(b.expect("batch")))
        .collect();
    assert_eq!(reference.len(), n.div_ceil(g));
    assert!(padding(&reference).iter().all(|&p| p == 0));
    let ids: Vec<u64> = reference
        .iter()
        .flat_map(|b| real(b))
        .map(|s| s.0)
        .collect();
    let all: BTreeSet<u64> = data.samples().iter().map(|s| s.id).collect();
    assert_eq!(ids.len(), n, "every sample once");
    assert_eq!(ids.iter().copied().collect::<BTreeSet<_>>(), all);
    assert!(
        reference.iter().flatten().all(|s| s.0 .1.is_some()),
        "labelled"
    );
    let reference: Vec<_> = reference.iter().map(|b| real(b)).collect();

    // Four ranks run k steps; each batch's state says where the job stands.
    let mut before = Vec::new();
    let mut states = Vec::new();
    for r in 0..4 {
        let p = rank(&data, r, 4, g, Sharding::Global);
        let mut ep = p.epoch(epoch).expect("epoch");
        let mut got = Vec::new();
        for _ in 0..k {
            let b = ep.next().expect("a batch").expect("batch");
            states.push(b.state());
            got.push(unpack(b));
        }
        drop(ep);
        assert_eq!(p.state(), states[states.len() - 1], "Pipeline::state");
        before.push(got);
    }
    let state = states[k - 1].clone();
    assert!(
        states.chunks(k).all(|c| c[k - 1] == state),
        "every rank's state after step {k} is the same"
    );
    let json = serde_json::to_string(&state).expect("json");
    let back: ResumeState = serde_json::from_str(&json).expect("read back");
    assert_eq!(back, state);
    let v: serde_json::Value = serde_json::from_str(&json).expect("value");
    let keys: BTreeSet<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    let want = [
        "version",
        "seed",
        "epoch",
        "samples_consumed",
        "global_batch_size",
        "order",
        "sources",
    ];
    assert_eq!(keys, want.into_iter().collect(), "{json}");
    assert_eq!(v["samples_consumed"], (k * g) as u64, "{json}");
    assert_eq!(v["global_batch_size"], g as u64);
    assert_eq!(
        (v["epoch"].as_u64(), v["seed"].as_u64()),
        (Some(epoch), Some(11))
    );
    let before = global(before);
    let first: Vec<_> = before.iter().map(|b| real(b)).collect();
    assert_eq!(first, reference[..k], "the first steps on 4 ranks");

    for world in [2, 8] {
        let rest: Vec<Vec<Vec<Slot>>> = (0..world)
            .map(|r| {
                let ep = rank(&data, r, world, g, Sharding::Global)
                    .resume(&back)
                    .expect("resume");
                assert_eq!(ep.first_batch(), k);
                ep.map(|b| unpack(b.expect("batch"))).collect()
            })
            .collect();
        let mut job = before.clone();
        job.extend(global(rest));
        let got: Vec<_> = job.iter().map(|b| real(b)).collect();
        assert_eq!(got, reference, "stopped on 4 ranks, resumed on {world}");
        // Padding only in the epoch's last global batch: its slices of ceil(rem / w).
        let rem = n % g;
        let mut want = vec![0; job.len()];
        want[job.len() - 1] = world * rem.div_ceil(world) - rem;
        assert_eq!(padding(&job), want, "world {world}");
    }
}

#[test]
fn per_rank_sharding_depends_on_the_world_size_and_resumes_on_the_same_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = classes(dir.path(), 30);
    let run = |world: usize, s: Sharding| -> Vec<Vec<u64>> {
        let ranks = (0..world)
            .map(|r| {
                let p = rank(&data, r, world, 8, s);
                let ep = p.epoch(1).expect("epoch");
                ep.map(|b| unpack(b.expect("batch"))).collect()
            })
            .collect();
        global(ranks)
            .iter()
            .map(|b| real(b).into_iter().map(|s| s.0).collect())
            .collect()
    };
    let one = run(1, Sharding::Global);
    assert_eq!(one, run(1, Sharding::PerRank), "one rank: the same order");
    assert_eq!(run(4, Sharding::Global), one);
    let per_rank = run(4, Sharding::PerRank);
    assert_ne!(per_rank, one, "per-rank shards are not the global batches");
    let flat = |b: &[Vec<u64>]| b.iter().flatten().copied().collect::<BTreeSet<_>>();
    assert_eq!(flat(&per_rank), flat(&one), "but the same samples");

    // A per-rank state resumes on its own world size only.
    let p = rank(&data, 0, 4, 8, Sharding::PerRank);
    let state = state_after_first_batch(&p);
    let other = rank(&data, 0, 2, 8, Sharding::PerRank).resume(&state);
    assert!(
        matches!(other.err(), Some(Error::Resume(ResumeError::Order { .. }))),
        "per-rank state on another world size"
    );
    for r in 0..4 {
        let p = rank(&data, r, 4, 8, Sharding::PerRank);
        let full: Vec<Vec<u64>> = p
            .epoch(1)
            .expect("epoch")
            .map(|b| b.expect("b").ids().to_vec())
            .collect();
        let rest: Vec<Vec<u64>> = p
            .resume(&state)
            .expect("same world")
            .map(|b| b.expect("b").ids().to_vec())
            .collect();
        assert_eq!(rest, full[1..], "rank {r}");
    }
}

#[test]
fn a_state_from_any_batch_resumes_exactly_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 23 samples, 2 of them broken (skipped and reported); global batches of 6.
    let (n, g) = (23, 6);
    let data = folder(dir.path(), n, 2);
    let mut full = Vec::new();
    let mut states = Vec::new();
    for r in 0..2 {
        let p = rank(&data, r, 2, g, Sharding::Global);
        let mut got = Vec::new();
        for b in p.epoch(4).expect("epoch") {
            let b = b.expect("batch");
            if r == 0 {
                states.push(b.state());
            }
            got.push(unpack(b));
        }
        full.push(got);
    }
    let full = global(full);
    assert_eq!(full.len(), n.div_ceil(g));
    for (i, s) in states.iter().enumerate() {
        // Global batches of 6 consumed, the epoch's 23 after the last one.
        assert_eq!(s.samples_consumed, ((i + 1) * g).min(n) as u64);
        assert_eq!((s.epoch, s.global_batch_size), (4, g as u64));
        let json = serde_json::to_string(s).expect("json");
        let s: ResumeState = serde_json::from_str(&json).expect("read back");
        let rest: Vec<Vec<Vec<Slot>>> = (0..3)
            .map(|r| {
                let ep = rank(&data, r, 3, g, Sharding::Global)
                    .resume(&s)
                    .expect("resume");
                assert_eq!(ep.len(), full.len() - i - 1);
                ep.map(|b| unpack(b.expect("batch"))).collect()
            })
            .collect();
        if i + 1 == full.len() {
            assert!(
                rest.iter().all(Vec::is_empty),
                "the epoch's end: nothing left"
            );
            continue;
        }
        let rest: Vec<_> = global(rest).iter().map(|b| real(b)).collect();
        let want: Vec<_> = full[i + 1..].iter().map(|b| real(b)).collect();
        assert_eq!(rest, want, "resumed after global batch {i}");
    }
}

#[test]
fn a_state_of_another_global_batch_size_version_seed_or_dataset_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = classes(dir.path(), 20);
    let p = rank(&data, 0, 4, 8, Sharding::Global);
    let state = state_after_first_batch(&p);
    // Why resuming `s` on `p` is refused.
    let refusal = |p: Pipeline, s: &ResumeState| match p.resume(s).expect_err("refused") {
        Error::Resume(e) => e,
        e => panic!("refused, but not as a resume error: {e}"),
    };
    // Another format version.
    let json = serde_json::to_string(&state).expect("json");
    assert!(json.contains("\"version\":2"), "{json}");
    let v3: ResumeState =
        serde_json::from_str(&json.replace("\"version\":2", "\"version\":3")).expect("v3");
    // Another seed.
    let mut seeded = state.clone();
    seeded.seed = 12;
    // Each refused, saying why (the first on global batches of 4, 2 ranks of 2, after
    // global batches of 8).
    for (global_batch, s, want) in [
        (
            4,
            &state,
            ResumeError::GlobalBatchSize {
                state: 8,
                pipeline: 4,
            },
        ),
        (
            8,
            &v3,
            ResumeError::Version {
                found: 3,
                expected: 2,
            },
        ),
        (
            8,
            &seeded,
            ResumeError::Seed {
                state: 12,
                pipeline: 11,
            },
        ),
    ] {
        let p = rank(&data, 0, 2, global_batch, Sharding::Global);
        assert_eq!(refusal(p, s), want);
    }
    // A version 1 state, as stoker wrote it before `sources`, still resumes.
    let v1 = format!(
        r#"{{"version":1,"seed":11,"epoch":1,"samples_consumed":8,"global_batch_size":8,"order":{}}}"#,
        state.order
    );
    let v1: ResumeState = serde_json::from_str(&v1).expect("v1");
    let ep = rank(&data, 1, 2, 8, Sharding::Global)
        .resume(&v1)
        .expect("a version 1 state");
    assert_eq!((ep.first_batch(), ep.len()), (1, 2));
    // Another dataset (one sample fewer).
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = classes(other_dir.path(), 19);
    let e = refusal(rank(&other, 0, 2, 8, Sharding::Global), &state);
    assert!(matches!(e, ResumeError::Order { .. }), "{e}");
    // Not at the end of a global batch, or past the epoch.
    for consumed in [5, 21, 24] {
        let mut s = state.clone();
        s.samples_consumed = consumed;
        let e = refusal(rank(&data, 0, 2, 8, Sharding::Global), &s);
        assert!(matches!(e, ResumeError::Position { .. }), "{consumed}: {e}");
    }
    // The same state resumes on 2 ranks of 4.
    let ep = rank(&data, 1, 2, 8, Sharding::Global)
        .resume(&state)
        .expect("resume");
    assert_eq!((ep.first_batch(), ep.len()), (1, 2));
}

#[test]
fn a_global_batch_size_sets_each_rank_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = classes(dir.path(), 12);
    let build = |rank: usize, world: usize, batch: Option<usize>| {
        let b = Pipeline::builder(data.clone().all())
            .backend(BackendKind::Cpu)
            .augment(Augment::new().resize(8, 8))
            .shard(rank, world)
            .global_batch_size(8);
        match batch {
            Some(n) => b.batch_size(n),
            None => b,
        }
        .build()
    };
    let p = build(1, 4, None).expect("4 ranks");
    assert_eq!(p.sampler().batch_size(), 2);
    assert_eq!(p.sampler().global_batch_size(), 8);
    assert_eq!(p.state().global_batch_size, 8);
    assert!(build(0, 4, Some(2)).is_ok(), "an agreeing batch size");
    for (world, batch) in [(3, None), (4, Some(3))] {
        let e = build(0, world, batch).expect_err("refused");
        assert!(
            matches!(&e, Error::Config { setting, .. } if setting == "global_batch_size"),
            "{e}"
        );
    }
}

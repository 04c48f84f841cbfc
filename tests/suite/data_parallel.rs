//! Data-parallel shards and resumed epochs through the whole pipeline: every rank runs the
//! same number of steps, padding is marked, replacements stay on their rank, and an epoch
//! resumed at a batch gives exactly the batches the full epoch gives from there.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use stoker::{
    Augment, BackendKind, Dataset, Error, OnError, Pipeline, PipelineError, Sharding, Subset,
};

/// A flat folder of `n` small random PNGs; `bad` of them (every `n / bad`-th) are not
/// images at all.
pub(crate) fn folder(dir: &Path, n: usize, bad: usize) -> Dataset {
    let mut rng = common::TestRng(n as u64 * 31 + bad as u64);
    for i in 0..n {
        let name = format!("{i:03}.png");
        if bad > 0 && i % (n / bad) == 0 && i / (n / bad) < bad {
            common::write(dir, &name, b"not a png at all");
        } else {
            let (w, h) = (12 + rng.below(20) as u32, 12 + rng.below(20) as u32);
            common::write(
                dir,
                &name,
                &common::png_rgb(w, h, &common::random_rgb(&mut rng, w, h)),
            );
        }
    }
    Dataset::flat(dir).expect("folder")
}

fn pipe(
    subset: Subset,
    rank: usize,
    world: usize,
    batch: usize,
    drop_last: bool,
    on_error: OnError,
    backend: BackendKind,
) -> Pipeline {
    pipe_with(
        subset,
        (rank, world, batch),
        drop_last,
        on_error,
        backend,
        Sharding::Global,
    )
}

/// [`pipe`] of shard `(rank, world, batch)` with the ranks split by `sharding`.
pub(crate) fn pipe_with(
    subset: Subset,
    (rank, world, batch): (usize, usize, usize),
    drop_last: bool,
    on_error: OnError,
    backend: BackendKind,
    sharding: Sharding,
) -> Pipeline {
    Pipeline::builder(subset)
        .sharding(sharding)
        .backend(backend)
        .augment(
            Augment::new()
                .random_resized_crop(8, (0.3, 1.0), (0.75, 1.33))
                .flip_horizontal(0.5)
                .color_jitter(0.3, 0.3, 0.3),
        )
        .batch_size(batch)
        .readers(2)
        .workers(2)
        .shard(rank, world)
        .drop_last(drop_last)
        .on_error(on_error)
        .seed(11)
        .build()
        .expect("pipeline")
}

/// Per rank: (batch count, delivered ids, ids not marked repeated).
fn run_ranks(
    data: &Dataset,
    world: usize,
    batch: usize,
    drop_last: bool,
) -> Vec<(usize, Vec<u64>, Vec<u64>)> {
    (0..world)
        .map(|rank| {
            let p = pipe(
                data.clone().all(),
                rank,
                world,
                batch,
                drop_last,
                OnError::Skip,
                BackendKind::Cpu,
            );
            let mut n = 0;
            let (mut all, mut own) = (Vec::new(), Vec::new());
            let ep = p.epoch(3).expect("epoch");
            assert_eq!(ep.len(), p.num_batches(), "ExactSizeIterator::len");
            for b in ep {
                let b = b.expect("batch");
                n += 1;
                assert_eq!(b.repeated().len(), b.len());
                for (id, &rep) in b.ids().iter().zip(b.repeated()) {
                    all.push(*id);
                    if !rep {
                        own.push(*id);
                    }
                }
            }
            assert_eq!(n, p.num_batches());
            (n, all, own)
        })
        .collect()
}

#[test]
fn every_rank_runs_the_same_number_of_steps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = folder(dir.path(), 60, 0);
    let ids: BTreeSet<u64> = data.samples().iter().map(|s| s.id).collect();
    // 60 samples, world 7, batch 4 gave [3,3,3,3,2,2,2] batches per rank.
    let ranks = run_ranks(&data, 7, 4, false);
    let counts: Vec<usize> = ranks.iter().map(|r| r.0).collect();
    assert_eq!(counts, vec![3; 7]);
    let sizes: Vec<usize> = ranks.iter().map(|r| r.1.len()).collect();
    assert_eq!(sizes, vec![9; 7], "samples per rank");
    // Disjoint apart from the marked padding, and covering every sample.
    let own: Vec<u64> = ranks.iter().flat_map(|r| r.2.clone()).collect();
    let set: BTreeSet<u64> = own.iter().copied().collect();
    assert_eq!(set.len(), own.len(), "a sample on two ranks");
    assert_eq!(set, ids);
    let padding: usize = ranks.iter().map(|r| r.1.len() - r.2.len()).sum();
    assert_eq!(padding, 63 - 60);
    // Deterministic for (seed, epoch).
    let again = run_ranks(&data, 7, 4, false);
    assert!(ranks.iter().zip(&again).all(|(a, b)| a.1 == b.1));
}

#[test]
fn drop_last_gives_every_rank_the_same_whole_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = folder(dir.path(), 25, 0);
    // 25 samples, world 3, batch 3 with drop_last gave [3,2,2].
    let ranks = run_ranks(&data, 3, 3, true);
    assert_eq!(ranks.iter().map(|r| r.0).collect::<Vec<_>>(), vec![2; 3]);
    let all: Vec<u64> = ranks.iter().flat_map(|r| r.1.clone()).collect();
    let set: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(
        (all.len(), set.len()),
        (18, 18),
        "no repeats with drop_last"
    );
    assert!(ranks.iter().all(|r| r.1 == r.2), "nothing marked repeated");
}

/// Per-rank sharding draws replacements from the rank's own shard. (Global batches draw
/// them from the whole epoch, so that they do not depend on the world size: see
/// `replacements_under_global_batches_do_not_depend_on_the_world_size`.)
#[test]
fn replacements_come_from_the_rank_own_shard() {
    for backend in common::backends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = folder(dir.path(), 48, 6);
        let world = 3;
        let mut shards = Vec::new();
        let mut replacements = Vec::new();
        for rank in 0..world {
            let p = pipe_with(
                data.clone().all(),
                (rank, world, 4),
                false,
                OnError::Replace,
                backend,
                Sharding::PerRank,
            );
            let order: BTreeSet<u64> = p
                .sampler()
                .epoch_order(1)
                .iter()
                .map(|&i| p.subset().samples()[i].id)
                .collect();
            let mut reps = Vec::new();
            for b in p.epoch(1).expect("epoch") {
                let b = b.expect("batch");
                assert_eq!(b.len(), 4, "Replace keeps batches full");
                for r in b.replacements() {
                    assert!(b.repeated()[r.slot], "a replacement is marked repeated");
                    reps.push(r.by_id);
                }
            }
            shards.push(order);
            replacements.push(reps);
        }
        let total: usize = replacements.iter().map(Vec::len).sum();
        assert_eq!(total, 6, "{backend:?}: every broken sample replaced");
        for (rank, reps) in replacements.iter().enumerate() {
            for id in reps {
                assert!(
                    shards[rank].contains(id),
                    "{backend:?}: replacement from another rank"
                );
                for (other, shard) in shards.iter().enumerate() {
                    if other != rank {
                        assert!(!shard.contains(id), "{backend:?}: also on rank {other}");
                    }
                }
            }
        }
    }
}

#[test]
fn replace_with_every_candidate_broken_names_the_samples() {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..5 {
        common::write(dir.path(), &format!("broken{i}.png"), b"no pixels here");
    }
    let data = Dataset::flat(dir.path()).expect("folder");
    let p = pipe(
        data.all(),
        0,
        1,
        2,
        false,
        OnError::Replace,
        BackendKind::Cpu,
    );
    let mut ep = p.epoch(0).expect("epoch");
    match ep.next() {
        Some(Err(Error::Pipeline(PipelineError::ReplacementsExhausted { samples, attempts }))) => {
            assert!(attempts > 0);
            assert_eq!(samples.len(), 2, "both samples of the batch named");
            assert!(
                samples.iter().all(|s| s.path.starts_with("broken")),
                "{samples:?}"
            );
        }
        other => panic!("expected exhausted replacements, got {other:?}"),
    }
    assert!(ep.next().is_none(), "the epoch ends after the error");
}

/// (index, ids, labels, repeated, image bytes) of each batch.
type Seen = Vec<(usize, Vec<u64>, Vec<Option<u32>>, Vec<bool>, Vec<u8>)>;

fn collect(ep: stoker::Epoch) -> Seen {
    ep.map(|b| {
        let b = b.expect("batch");
        (
            b.index(),
            b.ids().to_vec(),
            b.labels().to_vec(),
            b.repeated().to_vec(),
            b.read_images().expect("images"),
        )
    })
    .collect()
}

#[test]
fn an_epoch_resumed_at_a_batch_gives_the_same_batches_without_reading_the_rest() {
    for backend in common::backends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = folder(dir.path(), 37, 2);
        for on_error in [OnError::Skip, OnError::Replace] {
            let p = pipe(data.clone().all(), 1, 2, 4, false, on_error, backend);
            let full = collect(p.epoch(5).expect("epoch"));
            let total_read = p.stats().bytes_read;
            assert_eq!(full.len(), p.num_batches());
            for first in [0, 1, 3, full.len() - 1, full.len()] {
                let ep = p.epoch_from(5, first).expect("resume");
                assert_eq!(ep.len(), full.len() - first);
                assert_eq!(ep.first_batch(), first);
                let before = p.stats().bytes_read;
                let resumed = collect(ep);
                let read = p.stats().bytes_read - before;
                assert_eq!(
                    resumed,
                    full[first..],
                    "{backend:?} {on_error:?} from {first}"
                );
                if first > 0 {
                    assert!(read < total_read, "the skipped batches were read");
                }
                if first == full.len() {
                    assert_eq!(read, 0);
                }
            }
            assert!(p.epoch_from(5, full.len() + 1).is_err());
        }
    }
}

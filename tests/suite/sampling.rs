//! Weighted sampling: draws in proportion to the weights, with and without replacement,
//! class-balanced from labels; deterministic for (seed, epoch), new every epoch, split
//! across ranks with equal steps; a sample drawn twice in one batch is delivered twice
//! alike on every backend; bad weights refused.

use crate::common;

use stoker::source::sampler::{Sampler, Weighting};
use stoker::{Augment, BackendKind, DType, Dataset, Pipeline};

fn weighted(weights: Vec<f64>, n: usize, replacement: bool) -> Sampler {
    let len = weights.len();
    Sampler::new(len, 21, true)
        .weighted(Weighting::new(weights, n, replacement).expect("weights"))
        .expect("sampler")
}

#[test]
fn draws_follow_the_weights_and_change_every_epoch() {
    let weights = vec![1.0, 2.0, 0.0, 4.0, 8.0, 1.0];
    let total: f64 = weights.iter().sum();
    let s = weighted(weights.clone(), 1000, true);
    let mut counts = [0usize; 6];
    for epoch in 0..40 {
        let order = s.permutation(epoch);
        assert_eq!(order.len(), 1000);
        assert_eq!(order, s.permutation(epoch), "deterministic");
        assert_ne!(order, s.permutation(epoch + 1), "a new draw every epoch");
        for i in order {
            counts[i] += 1;
        }
    }
    assert_eq!(counts[2], 0, "weight 0 is never drawn");
    for (i, &w) in weights.iter().enumerate() {
        let want = 40_000.0 * w / total;
        let got = counts[i] as f64;
        // Five standard deviations of a binomial count.
        let sd = (want * (1.0 - w / total)).sqrt().max(1.0);
        assert!(
            (got - want).abs() < 5.0 * sd,
            "sample {i}: {got} draws, {want:.0} expected"
        );
    }
}

#[test]
fn draws_without_replacement_are_distinct_and_favour_heavy_samples() {
    let weights: Vec<f64> = (0..50).map(|i| if i < 10 { 10.0 } else { 1.0 }).collect();
    let s = weighted(weights.clone(), 20, false);
    let mut heavy = 0;
    for epoch in 0..200 {
        let mut order = s.permutation(epoch);
        assert_eq!(order.len(), 20);
        heavy += order.iter().filter(|&&i| i < 10).count();
        order.sort_unstable();
        order.dedup();
        assert_eq!(order.len(), 20, "no sample twice without replacement");
    }
    // The ten heavy samples make up 100 of 140 weight: nearly all of them are in every
    // draw of 20, far above the 4 a uniform draw would take.
    assert!(
        heavy as f64 / 200.0 > 8.0,
        "{} heavy samples a draw",
        heavy as f64 / 200.0
    );
    // Every sample of positive weight, once each, when the draw takes them all.
    let mut all = weighted(vec![1.0, 0.0, 3.0, 2.0], 3, false).permutation(5);
    all.sort_unstable();
    assert_eq!(all, vec![0, 2, 3]);
}

#[test]
fn weighted_epochs_split_across_ranks_with_equal_steps() {
    let weights: Vec<f64> = (0..37).map(|i| 1.0 + (i % 5) as f64).collect();
    for (n, world, batch, drop_last) in [(100, 3, 4, false), (100, 4, 8, true), (7, 8, 2, false)] {
        let ranks: Vec<Sampler> = (0..world)
            .map(|r| {
                weighted(weights.clone(), n, true)
                    .shard(r, world)
                    .and_then(|s| s.batches_of(batch, drop_last))
                    .expect("shard")
            })
            .collect();
        let steps: Vec<usize> = ranks.iter().map(|s| s.batches(3).len()).collect();
        assert!(steps.windows(2).all(|w| w[0] == w[1]), "{steps:?}");
        if !drop_last {
            // The real positions of the ranks together are the global draw, once each.
            let mut real: Vec<usize> = ranks
                .iter()
                .flat_map(|s| {
                    let o = s.epoch_order(3);
                    o[..o.len() - s.padding()].to_vec()
                })
                .collect();
            let mut global = ranks[0].permutation(3);
            real.sort_unstable();
            global.sort_unstable();
            assert_eq!(real, global, "n {n} world {world}");
        }
    }
}

#[test]
fn bad_weights_are_refused() {
    for (w, n, repl) in [
        (vec![1.0, -1.0], 2, true),
        (vec![1.0, f64::NAN], 2, true),
        (vec![0.0, 0.0], 2, true),
        (vec![1.0, 0.0, 1.0], 3, false),
        (vec![1.0], 0, true),
    ] {
        assert!(
            matches!(
                Weighting::new(w.clone(), n, repl),
                Err(stoker::Error::Config { .. })
            ),
            "{w:?} {n} {repl}"
        );
    }
    let s = Sampler::new(3, 0, true);
    let w = Weighting::new(vec![1.0, 1.0], 2, true).expect("weights");
    assert!(s.weighted(w).is_err(), "weights for another subset");
}

/// Class-balanced sampling of a 1:9 dataset draws both classes alike; a pipeline whose
/// draws repeat samples within a batch delivers them on every backend alike.
#[test]
fn class_balanced_pipelines_draw_classes_alike_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = common::TestRng(3);
    for (class, n) in [("rare", 2), ("common", 18)] {
        for i in 0..n {
            let jpeg = common::random_jpeg(&mut rng, 40, 30, turbojpeg::Subsamp::Sub2x2);
            common::write(dir.path(), &format!("{class}/{i}.jpg"), &jpeg);
        }
    }
    let data = Dataset::image_folder(dir.path()).expect("folder").all();
    let run = |backend: BackendKind| {
        let pipe = Pipeline::builder(data.clone())
            .backend(backend)
            .class_balanced(Some(400), true)
            .augment(
                Augment::new()
                    .random_resized_crop(16, (0.5, 1.0), (0.75, 1.333))
                    .dtype(DType::U8),
            )
            .batch_size(16)
            .workers(2)
            .seed(8)
            .device_cache_bytes(1 << 20)
            .build()
            .expect("pipeline");
        let mut ids = Vec::new();
        let mut labels = Vec::new();
        let mut pixels = Vec::new();
        for b in pipe.epoch(1).expect("epoch") {
            let b = b.expect("batch");
            assert!(b.errors().is_empty());
            ids.extend_from_slice(b.ids());
            labels.extend(b.labels().iter().map(|l| l.expect("label")));
            pixels.extend(b.read_images().expect("images"));
        }
        (ids, labels, pixels)
    };
    let (ids, labels, pixels) = run(BackendKind::Cpu);
    assert_eq!(ids.len(), 400);
    // Class 1 is "rare" (sorted folder names: common = 0, rare = 1).
    let rare = labels.iter().filter(|&&l| l == 1).count();
    assert!(
        (150..250).contains(&rare),
        "{rare} of 400 draws from the rare class"
    );
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(
        distinct.len() <= 20 && distinct.len() < ids.len(),
        "draws repeat samples"
    );
    for backend in common::backends()
        .into_iter()
        .filter(|b| *b != BackendKind::Cpu)
    {
        let (i, l, p) = run(backend);
        assert_eq!((&i, &l), (&ids, &labels), "{backend}: the same draws");
        let worst = common::max_diff(&p, &pixels);
        assert!(worst <= 1, "{backend}: pixels differ by {worst}");
    }
}

/// Block order over `groups` (the block of each sample), `window` blocks at a time.
fn blocks(groups: &[u32], window: usize, seed: u64) -> Sampler {
    Sampler::new(groups.len(), seed, true)
        .blocks(groups.to_vec(), window)
        .expect("block order")
}

#[test]
fn block_order_permutes_shards_and_keeps_each_window_together() {
    // 13 shards of 1 to 13 samples, their samples interleaved in the subset's order (as
    // sorting by path leaves them).
    let mut groups = Vec::new();
    for g in 0..13u32 {
        groups.extend(std::iter::repeat_n(g, 1 + g as usize));
    }
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..groups.len()).rev() {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        groups.swap(i, (rng >> 33) as usize % (i + 1));
    }
    let n = groups.len();
    let s = blocks(&groups, 3, 7);
    let mut orders = Vec::new();
    for epoch in 0..4 {
        let order = s.permutation(epoch);
        // Every sample once.
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "epoch {epoch}");
        // Windows: runs of positions whose samples come from 3 shards (the last from
        // fewer), no shard in two windows.
        let windows = s.epoch_windows(epoch).expect("windows");
        assert_eq!(windows.len(), n);
        assert!(windows.windows(2).all(|w| w[0] <= w[1]), "windows in order");
        let mut seen_in: std::collections::HashMap<u32, u32> = Default::default();
        for (&w, &i) in windows.iter().zip(&order) {
            let before = seen_in.insert(groups[i], w);
            assert!(
                before.is_none_or(|b| b == w),
                "shard {} in two windows",
                groups[i]
            );
        }
        let per_window = |w: u32| seen_in.values().filter(|x| **x == w).count();
        assert_eq!((0..4).map(per_window).collect::<Vec<_>>(), [3, 3, 3, 3]);
        assert_eq!(per_window(4), 1);
        // The same for the same (seed, epoch).
        assert_eq!(blocks(&groups, 3, 7).permutation(epoch), order);
        orders.push(order);
    }
    assert!(
        orders.windows(2).all(|w| w[0] != w[1]),
        "another order each epoch"
    );
    // Samples within a window are shuffled: not in the subset's order.
    let first = &orders[0];
    assert!(first.windows(2).any(|w| w[0] > w[1]));
    // Another seed, another order.
    assert_ne!(blocks(&groups, 3, 8).permutation(0), orders[0]);
}

/// The block-order rank tests' 103 samples, in blocks of 10.
const BLOCKED: usize = 103;

/// One case of the block-order rank tests.
struct BlockCase {
    world: usize,
    batch: usize,
    drop_last: bool,
    samplers: Vec<Sampler>,
    full: Vec<usize>,
}

/// For each (world size, batch size, drop_last) of the block-order rank tests: those,
/// each rank's sampler (windows of 2 blocks, seed 5) over [`BLOCKED`] samples in blocks
/// of 10, and the whole order of epoch 3.
fn block_ranks(sharding: stoker::Sharding) -> Vec<BlockCase> {
    let groups: Vec<u32> = (0..BLOCKED as u32).map(|i| i / 10).collect();
    [(1, 8, false), (2, 8, false), (4, 5, false), (3, 7, true)]
        .into_iter()
        .map(|(world, batch, drop_last)| {
            let samplers: Vec<Sampler> = (0..world)
                .map(|r| {
                    Sampler::new(groups.len(), 5, true)
                        .sharding(sharding)
                        .shard(r, world)
                        .and_then(|s| s.batches_of(batch, drop_last))
                        .and_then(|s| s.blocks(groups.clone(), 2))
                        .expect("sampler")
                })
                .collect();
            let full = samplers[0].permutation(3);
            BlockCase {
                world,
                batch,
                drop_last,
                samplers,
                full,
            }
        })
        .collect()
}

#[test]
fn block_order_splits_across_ranks_in_runs_of_equal_length() {
    // Per-rank sharding (runs of the whole order); global batches are below.
    for BlockCase {
        world,
        drop_last,
        samplers,
        full,
        ..
    } in block_ranks(stoker::Sharding::PerRank)
    {
        let mut all = Vec::new();
        let steps: Vec<usize> = samplers.iter().map(Sampler::num_batches).collect();
        assert!(steps.iter().all(|s| *s == steps[0]), "{steps:?}");
        for (r, s) in samplers.iter().enumerate() {
            let order = s.epoch_order(3);
            let per = s.samples_per_epoch();
            assert_eq!(order.len(), per);
            // A contiguous run of the one global order (wrapping for padding).
            let expect: Vec<usize> = (0..per).map(|k| full[(r * per + k) % full.len()]).collect();
            assert_eq!(order, expect, "rank {r} of {world}");
            all.extend_from_slice(&order[..order.len() - s.padding()]);
        }
        all.sort_unstable();
        let unique = all.len();
        all.dedup();
        assert_eq!(all.len(), unique, "no sample twice outside padding");
        if !drop_last {
            assert_eq!(all, (0..BLOCKED).collect::<Vec<_>>(), "every sample");
        }
    }
}

#[test]
fn block_order_splits_global_batches_across_ranks() {
    for BlockCase {
        world,
        batch,
        drop_last,
        samplers,
        full,
    } in block_ranks(stoker::Sharding::Global)
    {
        let batches: Vec<Vec<Vec<usize>>> = samplers.iter().map(|s| s.batches(3)).collect();
        let steps = batches[0].len();
        assert!(batches.iter().all(|b| b.len() == steps));
        // Step by step, the ranks' batches in rank order (padding left out) are the
        // block order's global batches of `batch * world`, one after another.
        let mut joined = Vec::new();
        for step in 0..steps {
            for (r, b) in batches.iter().enumerate() {
                let batch = &b[step];
                let pad = if step + 1 == steps {
                    samplers[r].padding()
                } else {
                    0
                };
                joined.extend_from_slice(&batch[..batch.len() - pad]);
            }
        }
        let whole = BLOCKED / (batch * world) * batch * world;
        let want = if drop_last { &full[..whole] } else { &full[..] };
        assert_eq!(joined, want, "world {world}");
    }
}

#[test]
fn block_order_is_refused_with_weights_and_kept_out_of_validation() {
    let s = Sampler::new(4, 1, true);
    assert!(
        s.clone().blocks(vec![0, 0, 1], 1).is_err(),
        "a block per sample"
    );
    assert!(
        s.clone().blocks(vec![0, 0, 1, 1], 0).is_err(),
        "an empty window"
    );
    let w = weighted(vec![1.0; 4], 4, true);
    assert!(w.blocks(vec![0, 0, 1, 1], 1).is_err(), "not with weights");
    let v = Sampler::new(4, 1, false)
        .blocks(vec![1, 0, 1, 0], 1)
        .expect("validation");
    assert_eq!(v.permutation(2), [0, 1, 2, 3], "validation keeps its order");
    assert!(!v.is_block_order());
}

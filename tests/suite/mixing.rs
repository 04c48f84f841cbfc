//! Mixtures of datasets: the sources' shares follow the weights, each exhaustion policy
//! does what it says, the order is the same for any thread count, batch size and backend,
//! labels and sources are right per sample, and a mixture's state resumes exactly (on
//! another world size too) and names each source's position.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use stoker::source::sample_id;
use stoker::source::sampler::MIXTURE_ROUND;
use stoker::{
    Augment, BackendKind, Dataset, Error, Exhausted, Mixture, Pipeline, ResumeError, ResumeState,
    Sample, Subset,
};

/// `n` small in-memory PNGs named `{tag}{i}.png`, labelled `i % classes.len()`.
fn mem(tag: &str, n: usize, classes: &[&str]) -> Subset {
    let mut rng = common::TestRng(n as u64 * 131 + tag.len() as u64);
    let samples = (0..n)
        .map(|i| {
            let (w, h) = (10 + rng.below(12) as u32, 10 + rng.below(12) as u32);
            let png = common::png_rgb(w, h, &common::random_rgb(&mut rng, w, h));
            let label = (!classes.is_empty()).then(|| (i % classes.len()) as u32);
            Sample::in_memory(format!("{tag}{i:03}.png"), Arc::from(png), label)
        })
        .collect();
    let classes = classes.iter().map(|c| c.to_string()).collect();
    Dataset::from_samples(None, samples, classes)
        .expect("dataset")
        .all()
}

fn builder(m: Mixture) -> stoker::PipelineBuilder {
    Pipeline::builder_mixture(m)
        .expect("mixture")
        .backend(BackendKind::Cpu)
        .augment(
            Augment::new()
                .random_resized_crop(8, (0.3, 1.0), (0.75, 1.33))
                .flip_horizontal(0.5),
        )
        .readers(2)
        .seed(5)
}

/// A pipeline over `m` with the order only looked at (no epoch run).
fn sampler_of(m: Mixture) -> Pipeline {
    builder(m)
        .batch_size(8)
        .workers(1)
        .build()
        .expect("pipeline")
}

/// The source of each position of `epoch`'s order.
fn sources_of(p: &Pipeline, epoch: u64) -> Vec<usize> {
    let order = p.sampler().permutation(epoch);
    order.iter().map(|&i| p.subset().source_of(i)).collect()
}

#[test]
fn shares_follow_the_weights_over_many_epochs() {
    let weights = [0.5, 0.3, 0.2];
    let m = Mixture::new(vec![
        (mem("a", 30, &["x"]), 5.0),
        (mem("b", 50, &["x"]), 3.0),
        (mem("c", 7, &["x"]), 2.0),
    ])
    .epoch_size(1000);
    let p = sampler_of(m);
    let mut counts = [0f64; 3];
    let epochs = 20;
    for epoch in 0..epochs {
        let s = sources_of(&p, epoch);
        assert_eq!(s.len(), 1000);
        assert_ne!(s, sources_of(&p, epoch + 1), "another order every epoch");
        let mut c = [0f64; 3];
        for (t, &k) in s.iter().enumerate() {
            c[k] += 1.0;
            // At each round's end the counts are the smooth round robin's: within
            // (T w - (K - 1), T w + 1) of the exact share.
            if (t + 1) % MIXTURE_ROUND == 0 || t + 1 == s.len() {
                for k in 0..3 {
                    let d = c[k] - (t + 1) as f64 * weights[k];
                    assert!(d > -2.0 && d < 1.0, "epoch {epoch} at {t}: source {k} {d}");
                }
            }
        }
        for k in 0..3 {
            counts[k] += c[k];
        }
    }
    // Pearson's chi-square of the counts against the weights, 2 degrees of freedom:
    // 13.82 is its 0.999 quantile, so independent draws would exceed it with probability
    // 0.001 (the round robin keeps it far below).
    let n = (epochs * 1000) as f64;
    let chi2: f64 = (0..3)
        .map(|k| (counts[k] - n * weights[k]).powi(2) / (n * weights[k]))
        .sum();
    assert!(chi2 < 13.82, "chi-square {chi2}: {counts:?}");
}

#[test]
fn restart_repeats_a_small_source_in_fresh_permutations() {
    let m = Mixture::new(vec![
        (mem("big", 40, &["x"]), 0.8),
        (mem("small", 7, &["x"]), 0.2),
    ])
    .epoch_size(400)
    .when_exhausted(Exhausted::Restart);
    let p = sampler_of(m);
    let small: BTreeSet<usize> = (40..47).collect();
    for epoch in 0..3 {
        let order = p.sampler().permutation(epoch);
        assert_eq!(order.len(), 400);
        let draws: Vec<usize> = order.iter().copied().filter(|&i| i >= 40).collect();
        let big: Vec<usize> = order.iter().copied().filter(|&i| i < 40).collect();
        assert_eq!(draws.len(), 80, "the weight's share");
        // Every pass over the small source has each of its samples once.
        let passes: Vec<&[usize]> = draws.chunks(7).collect();
        for (k, pass) in passes.iter().enumerate() {
            let set: BTreeSet<usize> = pass.iter().copied().collect();
            assert_eq!(set.len(), pass.len(), "epoch {epoch} pass {k} repeats");
            if pass.len() == 7 {
                assert_eq!(set, small, "epoch {epoch} pass {k}");
            }
        }
        let distinct: BTreeSet<&[usize]> = passes[..11].iter().copied().collect();
        assert!(
            distinct.len() > 5,
            "a fresh permutation per pass: {passes:?}"
        );
        // The big source: 320 draws, 8 passes of 40.
        for pass in big.chunks(40) {
            let set: BTreeSet<usize> = pass.iter().copied().collect();
            assert_eq!(set, (0..40).collect(), "epoch {epoch}");
        }
    }
}

#[test]
fn stop_ends_the_epoch_when_the_first_source_runs_out() {
    let m = |w: f64| {
        Mixture::new(vec![(mem("a", 10, &["x"]), 1.0), (mem("b", 40, &["x"]), w)])
            .when_exhausted(Exhausted::Stop)
    };
    // Weights 1:1: source a runs out after its 10 samples, with 10 of b's: 20 positions,
    // not the default epoch size of 50.
    let p = sampler_of(m(1.0));
    assert_eq!(p.sampler().epoch_total(), 20);
    assert_eq!(p.num_batches(), 3);
    for epoch in 0..3 {
        let order = p.sampler().permutation(epoch);
        let set: BTreeSet<usize> = order.iter().copied().collect();
        assert_eq!((order.len(), set.len()), (20, 20), "no sample twice");
        assert_eq!(order.iter().filter(|&&i| i < 10).count(), 10);
    }
    // Weights in proportion to the lengths: one whole pass over each source.
    let p = sampler_of(m(4.0));
    let mut order = p.sampler().permutation(2);
    order.sort_unstable();
    assert_eq!(order, (0..50).collect::<Vec<_>>());
}

#[test]
fn replacement_draws_with_repeats() {
    let m = Mixture::new(vec![(mem("a", 5, &["x"]), 1.0), (mem("b", 5, &["x"]), 1.0)])
        .epoch_size(100)
        .when_exhausted(Exhausted::Replacement);
    let p = sampler_of(m);
    let a = p.sampler().permutation(0);
    assert_eq!(a.len(), 100);
    assert_ne!(a, p.sampler().permutation(1));
    let mut counts = BTreeMap::new();
    for &i in &a {
        *counts.entry(i).or_insert(0) += 1;
    }
    assert!(counts.keys().all(|&i| i < 10));
    assert_eq!(a.iter().filter(|&&i| i < 5).count(), 50);
    assert!(counts.values().any(|&c| c > 1), "draws repeat");
    // Not passes: some pass-sized chunk of a source's draws has a repeat.
    let draws: Vec<usize> = a.iter().copied().filter(|&i| i < 5).collect();
    assert!(draws
        .chunks(5)
        .any(|c| c.iter().collect::<BTreeSet<_>>().len() < 5));
}

#[test]
fn bad_mixtures_are_refused() {
    for m in [
        Mixture::new(vec![]),
        Mixture::new(vec![(mem("a", 3, &[]), 0.0)]),
        Mixture::new(vec![(mem("a", 3, &[]), f64::NAN)]),
        Mixture::new(vec![(mem("a", 3, &[]), 1.0), (mem("b", 0, &[]), 1.0)]),
        Mixture::new(vec![(mem("a", 3, &[]), 1.0)]).epoch_size(0),
    ] {
        let e = m.subset().expect_err("refused");
        assert!(
            matches!(&e, Error::Config { setting, .. } if setting == "mixture"),
            "{e}"
        );
    }
}

/// Every delivered slot: (id, label, source, pixels).
type Slot = (u64, Option<u32>, usize, Vec<u8>);

fn run(p: &Pipeline, epoch: u64) -> Vec<Vec<Slot>> {
    p.epoch(epoch)
        .expect("epoch")
        .map(|b| unpack(&b.expect("batch")))
        .collect()
}

/// A batch's slots, padding (repeats) left out.
fn unpack(b: &stoker::Batch) -> Vec<Slot> {
    let images = b.read_images().expect("images");
    let per = images.len() / b.len().max(1);
    (0..b.len())
        .filter(|&i| !b.repeated()[i])
        .map(|i| {
            let px = images[i * per..(i + 1) * per].to_vec();
            (b.ids()[i], b.labels()[i], b.sources()[i], px)
        })
        .collect()
}

/// Three sources of different classes (and one without labels) on disk and in memory.
fn three(dir: &Path) -> (Vec<Subset>, Mixture) {
    common::png_folder(&dir.join("a"), 2, 6, 3);
    let mut rng = common::TestRng(9);
    for (c, name) in ["bird", "class1"].iter().enumerate() {
        for i in 0..5 + c {
            let img = common::random_rgb(&mut rng, 14, 11);
            common::write(
                &dir.join("b"),
                &format!("{name}/{i}.png"),
                &common::png_rgb(14, 11, &img),
            );
        }
    }
    let a = Dataset::image_folder(dir.join("a")).expect("a").all();
    let b = Dataset::image_folder(dir.join("b")).expect("b").all();
    let c = mem("c", 9, &[]);
    let sources = vec![a, b, c];
    let m = Mixture::new(sources.iter().cloned().zip([0.5, 0.3, 0.2]).collect()).epoch_size(40);
    (sources, m)
}

#[test]
fn labels_and_sources_are_each_samples_own_and_classes_are_the_union() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sources, m) = three(dir.path());
    let p = builder(m)
        .batch_size(6)
        .workers(2)
        .build()
        .expect("pipeline");
    assert_eq!(
        p.subset().classes(),
        ["class0", "class1", "bird"],
        "the union in source order"
    );
    // Each source's samples by their id in the mixture: (source, class name).
    let mut want: BTreeMap<u64, (usize, Option<String>)> = BTreeMap::new();
    for (k, s) in sources.iter().enumerate() {
        for x in s.samples() {
            let name = x.label.map(|l| s.classes()[l as usize].clone());
            want.insert(sample_id(&format!("{k}/{}", x.path)), (k, name));
        }
    }
    let mut per_source = vec![0u64; 3];
    for epoch in 0..2 {
        let batches = run(&p, epoch);
        let n: usize = batches.iter().map(Vec::len).sum();
        assert_eq!(n, 40);
        for (id, label, source, _) in batches.iter().flatten() {
            let (k, name) = want.get(id).expect("a sample of a source");
            assert_eq!(source, k, "Batch::sources");
            let got = label.map(|l| p.subset().classes()[l as usize].clone());
            assert_eq!(&got, name, "the label's class is the source's");
            per_source[*k] += 1;
        }
    }
    assert_eq!(p.stats().samples_per_source, per_source);
    assert_eq!(per_source, vec![40, 24, 16], "the weights' shares");
}

#[test]
fn the_order_and_pixels_do_not_depend_on_threads_batch_size_or_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, m) = three(dir.path());
    let flat = |b: Vec<Vec<Slot>>| b.into_iter().flatten().collect::<Vec<_>>();
    // Three epochs' samples, in order, with `batch` samples a batch on `workers` threads.
    let samples = |batch: usize, workers: usize| {
        let p = builder(m.clone())
            .batch_size(batch)
            .workers(workers)
            .build()
            .expect("p");
        flat(run(&p, 3))
    };
    let one = samples(4, 1);
    assert_eq!(one, samples(4, 3), "workers 1 and 3");
    assert_eq!(one, samples(6, 2), "batches of 4 and 6");
    // Other backends (when present): the same samples, labels and sources in the same
    // order (pixels are compared between backends elsewhere).
    let meta = |v: &[Slot]| v.iter().map(|s| (s.0, s.1, s.2)).collect::<Vec<_>>();
    for backend in common::backends() {
        let p = builder(m.clone())
            .allow_software_gpu(true)
            .backend(backend)
            .batch_size(4)
            .workers(2)
            .build()
            .expect("p");
        assert_eq!(meta(&flat(run(&p, 3))), meta(&one), "{backend:?}");
    }
}

#[test]
fn a_mixture_state_at_every_batch_resumes_exactly_on_other_world_sizes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, m) = three(dir.path());
    let (g, epoch) = (6, 2);
    let rank = |r: usize, w: usize| {
        builder(m.clone())
            .shard(r, w)
            .global_batch_size(g)
            .workers(1)
            .build()
            .expect("rank")
    };
    let one = rank(0, 1);
    let mut full = Vec::new();
    let mut states = Vec::new();
    for b in one.epoch(epoch).expect("epoch") {
        let b = b.expect("batch");
        states.push(b.state());
        full.push(unpack(&b));
    }
    assert_eq!(full.len(), 40usize.div_ceil(g));
    let mut counts = vec![0u64; 3];
    for (i, s) in states.iter().enumerate() {
        for slot in &full[i] {
            counts[slot.2] += 1;
        }
        assert_eq!(s.sources, counts, "each source's position after batch {i}");
        assert_eq!(s.sources.iter().sum::<u64>(), s.samples_consumed);
        let json = serde_json::to_string(s).expect("json");
        let s: ResumeState = serde_json::from_str(&json).expect("read back");
        for world in [2, 3] {
            let ranks: Vec<Vec<Vec<Slot>>> = (0..world)
                .map(|r| {
                    let ep = rank(r, world).resume(&s).expect("resume");
                    ep.map(|b| unpack(&b.expect("batch"))).collect()
                })
                .collect();
            let steps = ranks[0].len();
            assert_eq!(steps, full.len() - i - 1, "world {world} after {i}");
            let rest: Vec<Vec<Slot>> = (0..steps)
                .map(|t| ranks.iter().flat_map(|r| r[t].clone()).collect())
                .collect();
            assert_eq!(rest, full[i + 1..], "world {world} after batch {i}");
        }
    }
    // A state whose sources disagree with its position, or of other weights, is refused.
    let mut bad = states[1].clone();
    bad.sources[0] += 1;
    let e = one.resume(&bad).expect_err("refused");
    assert!(
        matches!(e, Error::Resume(ResumeError::Sources { .. })),
        "{e}"
    );
    // The same sources again, elsewhere: the same relative paths, so the same ids.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let (s, _) = three(dir2.path());
    let (a, b, c) = (s[0].clone(), s[1].clone(), s[2].clone());
    // The same mixture made again resumes: the refusals below are the definition's.
    let same = Mixture::new(vec![(a.clone(), 0.5), (b.clone(), 0.3), (c.clone(), 0.2)]);
    let p = builder(same.epoch_size(40))
        .global_batch_size(g)
        .workers(1)
        .build()
        .expect("p");
    assert_eq!(p.resume(&states[1]).expect("resume").len(), full.len() - 2);
    for other in [
        Mixture::new(vec![(a.clone(), 0.4), (b.clone(), 0.4), (c.clone(), 0.2)]).epoch_size(40),
        Mixture::new(vec![(a.clone(), 0.5), (b.clone(), 0.3), (c.clone(), 0.2)])
            .epoch_size(40)
            .when_exhausted(Exhausted::Replacement),
        Mixture::new(vec![(a, 0.5), (b, 0.3), (c, 0.2)]).epoch_size(41),
    ] {
        let p = builder(other)
            .global_batch_size(g)
            .workers(1)
            .build()
            .expect("p");
        let e = p.resume(&states[1]).expect_err("refused");
        assert!(matches!(e, Error::Resume(ResumeError::Order { .. })), "{e}");
    }
}

/// `resize(8, 8)` to 8-bit NHWC: deterministic, so a sample's pixels do not depend on its
/// id (which a mixture changes), and easy to mirror.
fn resize8() -> Augment {
    Augment::new()
        .resize(8, 8)
        .dtype(stoker::DType::U8)
        .layout(stoker::Layout::Nhwc)
}

/// `px` (an 8x8 RGB NHWC image) mirrored left to right.
fn mirrored(px: &[u8]) -> Vec<u8> {
    px.chunks(8 * 3)
        .flat_map(|row| row.chunks(3).rev().flatten().copied().collect::<Vec<_>>())
        .collect()
}

#[test]
fn each_source_takes_its_own_augmentation_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sources, m) = three(dir.path());
    // Source 0 keeps the pipeline's resize; source 1 is mirrored; source 2 upside down.
    let with = |b: stoker::PipelineBuilder| {
        b.augment(resize8())
            .augment_source(1, resize8().flip_horizontal(1.0))
            .augment_source(2, resize8().flip_vertical(1.0))
            .batch_size(4)
            .workers(2)
    };
    // Each source alone under the pipeline's augmentation: its samples' pixels by the id
    // they have in the mixture.
    let mut plain: BTreeMap<u64, (usize, Vec<u8>)> = BTreeMap::new();
    for (k, s) in sources.iter().enumerate() {
        let p = Pipeline::builder(s.clone())
            .backend(BackendKind::Cpu)
            .augment(resize8())
            .batch_size(4)
            .readers(2)
            .build()
            .expect("one source");
        let path_of: BTreeMap<u64, &str> = s
            .samples()
            .iter()
            .map(|x| (x.id, x.path.as_str()))
            .collect();
        for (id, _, _, px) in run(&p, 0).into_iter().flatten() {
            plain.insert(sample_id(&format!("{k}/{}", path_of[&id])), (k, px));
        }
    }
    let mut cpu = None;
    for backend in common::backends() {
        let p = with(builder(m.clone()))
            .allow_software_gpu(true)
            .backend(backend)
            .build()
            .expect("pipeline");
        let got: Vec<Slot> = run(&p, 1).into_iter().flatten().collect();
        assert_eq!(got.len(), 40);
        let mut seen = [0usize; 3];
        for (id, _, source, px) in &got {
            let (k, alone) = &plain[id];
            assert_eq!(source, k);
            seen[*k] += 1;
            match k {
                0 => assert_eq!(px, alone, "{backend:?}: source 0 has the pipeline's"),
                1 => assert_eq!(*px, mirrored(alone), "{backend:?}: source 1 mirrored"),
                _ => {
                    let rows: Vec<u8> = alone.chunks(8 * 3).rev().flatten().copied().collect();
                    assert_eq!(*px, rows, "{backend:?}: source 2 upside down");
                }
            }
        }
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
        match &cpu {
            None => cpu = Some(got),
            Some(c) => assert_eq!(&got, c, "{backend:?} as the CPU"),
        }
    }
}

#[test]
fn augmentations_per_source_that_cannot_share_a_batch_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sources, m) = three(dir.path());
    let refused = |b: stoker::PipelineBuilder, why: &str| match b.build() {
        Err(Error::Config { setting, reason }) => {
            assert_eq!(setting, "augment_source", "{why}: {reason}");
            assert!(reason.contains(why), "{why}: {reason}");
        }
        other => panic!("{why}: {:?}", other.map(|_| ())),
    };
    let base = || builder(m.clone()).augment(resize8());
    refused(
        base().augment_source(1, Augment::new().resize(9, 8)),
        "the same output size",
    );
    refused(
        base().augment_source(1, resize8().dtype(stoker::DType::F32)),
        "the same output size",
    );
    refused(base().augment_source(3, resize8()), "has 3 sources");
    refused(
        base()
            .augment_source(1, resize8())
            .augment_source(1, resize8()),
        "two augmentations",
    );
    refused(
        Pipeline::builder(sources[0].clone())
            .augment(resize8())
            .augment_source(0, resize8()),
        "needs a Mixture",
    );
}

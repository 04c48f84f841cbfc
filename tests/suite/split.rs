//! Split invariants: disjoint, identical across runs and listing orders, groups whole,
//! manifests round-trip, and tampering is caught; and as a dataset grows, no sample ever
//! changes side (split again or extended), groups stay whole, the validation share stays
//! within the documented bound, and removed samples are errors that name them.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use crate::common::TestRng;
use stoker::source::sample_id;
use stoker::source::split::Manifest;
use stoker::{Dataset, Sample, Split, SplitSpec};

fn synthetic(paths: &[String]) -> Dataset {
    let samples = paths
        .iter()
        .map(|p| Sample::in_memory(p.clone(), vec![0u8; 1].into(), None))
        .collect();
    Dataset::from_samples(None, samples, vec![]).expect("unique ids")
}

fn paths(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("patient{:03}/scan{:02}.png", i / 7, i % 7))
        .collect()
}

fn ids(s: &stoker::Subset) -> BTreeSet<u64> {
    s.samples().iter().map(|s| s.id).collect()
}

#[test]
fn fraction_split_is_disjoint_complete_and_stable() {
    let p = paths(500);
    let a = synthetic(&p)
        .split(SplitSpec::fraction(0.2).seed(7))
        .expect("split");
    let mut rev = p.clone();
    rev.reverse();
    let b = synthetic(&rev)
        .split(SplitSpec::fraction(0.2).seed(7))
        .expect("split");
    let (ta, va) = (ids(&a.train()), ids(&a.val()));
    assert!(within_bound(va.len(), 500, 0.2), "val size {}", va.len());
    assert!(ta.is_disjoint(&va));
    assert_eq!(ta.len() + va.len(), 500);
    // Same seed, other listing order: the same split.
    assert_eq!(ta, ids(&b.train()));
    assert_eq!(va, ids(&b.val()));
    assert_eq!(a.manifest(), b.manifest());
    // Another seed: another split.
    let c = synthetic(&p)
        .split(SplitSpec::fraction(0.2).seed(8))
        .expect("split");
    assert_ne!(va, ids(&c.val()));
    assert!(a.manifest().check(Some(&synthetic(&p))).ok());
}

#[test]
fn group_split_keeps_groups_whole() {
    let p = paths(500);
    let s = synthetic(&p)
        .split(
            SplitSpec::fraction(0.25)
                .seed(3)
                .group_by(r"^(patient\d+)/"),
        )
        .expect("split");
    // The groups (first path component) of a side of the split.
    let groups = |side: &[stoker::Sample]| -> BTreeSet<String> {
        side.iter()
            .filter_map(|x| x.path.split('/').next().map(str::to_string))
            .collect()
    };
    let (tg, vg) = (groups(s.train().samples()), groups(s.val().samples()));
    assert!(tg.is_disjoint(&vg), "a group straddles the split");
    assert!(!vg.is_empty() && !tg.is_empty());
    // About a quarter, within the documented bound for groups (72 groups of up to 7).
    let nv = s.val().len();
    let sizes = group_sizes(&p, |x| x.split('/').next().unwrap_or("").to_string());
    assert!(within_group_bound(nv, &sizes, 0.25), "val size {nv}");
    let r = s.manifest().check(Some(&synthetic(&p)));
    assert!(r.ok(), "{:?}", r.problems);
    assert!(s.val().samples().iter().all(|x| x.group.is_some()));
}

#[test]
fn group_pattern_that_misses_a_path_is_an_error() {
    let mut p = paths(20);
    p.push("stray.png".into());
    assert!(synthetic(&p)
        .split(SplitSpec::fraction(0.2).group_by(r"^(patient\d+)/"))
        .is_err());
    assert!(synthetic(&paths(5))
        .split(SplitSpec::fraction(1.5))
        .is_err());
}

#[test]
fn manifest_round_trips_and_reloads_the_same_split() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 3, 10, 1);
    let data = Dataset::image_folder(dir.path()).expect("folder");
    let split = data
        .split(SplitSpec::fraction(0.3).seed(11))
        .expect("split");
    let file = dir.path().join("split.json");
    split.save(&file).expect("save");
    let loaded = Manifest::load(&file).expect("load");
    assert_eq!(&loaded, split.manifest());
    // Reload over a fresh listing: identical subsets, in every "run".
    for _ in 0..2 {
        let again = stoker::Split::load(&file, Dataset::image_folder(dir.path()).expect("folder"))
            .expect("reload");
        assert_eq!(ids(&again.train()), ids(&split.train()));
        assert_eq!(ids(&again.val()), ids(&split.val()));
    }
    // A file added after the split: the manifest no longer covers the data, and the error
    // names the file and says how to place it.
    common::write(
        dir.path(),
        "class0/new.png",
        &common::png_rgb(1, 1, &[1, 2, 3]),
    );
    let err = stoker::Split::load(&file, Dataset::image_folder(dir.path()).expect("folder"))
        .expect_err("a sample the manifest lacks");
    let msg = err.to_string();
    assert!(msg.contains("\"class0/new.png\""), "{msg}");
    assert!(
        msg.contains("Split::extend") && msg.contains("stoker split --extend"),
        "{msg}"
    );
    // Extending places it and keeps the rest.
    let grown =
        Split::extend(&file, Dataset::image_folder(dir.path()).expect("folder")).expect("extend");
    assert_eq!(grown.added().train + grown.added().val, 1);
    assert!(ids(&split.train()).is_subset(&ids(&grown.train())));
    assert!(ids(&split.val()).is_subset(&ids(&grown.val())));
}

#[test]
fn check_catches_a_tampered_manifest() {
    let p = paths(100);
    let split = synthetic(&p)
        .split(SplitSpec::fraction(0.2).seed(1).group_by(r"^(patient\d+)/"))
        .expect("split");
    let good = split.manifest().clone();
    assert!(good.check(Some(&synthetic(&p))).ok());

    // A validation sample copied into train: not disjoint (and digest broken).
    let mut m = good.clone();
    m.train.push(m.val[0].clone());
    let r = m.check(None);
    assert!(!r.disjoint && !r.digest_ok && !r.ok());

    // Even with the digest recomputed by a careful forger, the overlap is found.
    let mut m = good.clone();
    let moved = m.val.remove(0);
    m.train.push(moved);
    let r = m.check(Some(&synthetic(&p)));
    assert!(!r.groups_whole, "a group now straddles: {:?}", r.problems);

    // A sample dropped: incomplete.
    let mut m = good.clone();
    m.train.pop();
    let r = m.check(Some(&synthetic(&p)));
    assert_eq!(r.complete, Some(false));
    assert!(!r.ok());

    // An id that is not its path's id.
    let mut m = good.clone();
    m.val[0].id = "0000000000000000".into();
    assert!(!m.check(None).ids_match_paths);

    // Round trip through JSON keeps it valid; an edited JSON fails the digest.
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("m.json");
    good.save(&f).expect("save");
    let text = std::fs::read_to_string(&f).expect("read");
    std::fs::write(&f, text.replacen("\"seed\": 1", "\"seed\": 2", 1)).expect("write");
    let r = Manifest::load(&f).expect("load").check(None);
    assert!(!r.digest_ok);
}

#[test]
fn ids_are_stable_and_pinned() {
    // Pinned: a change here silently reshuffles every user's split. Never change it.
    assert_eq!(sample_id("class0/img000.png"), PINNED_ID);
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 2, 3, 5);
    let a = Dataset::image_folder(dir.path()).expect("folder");
    let b = Dataset::image_folder(dir.path()).expect("folder");
    assert_eq!(a.samples(), b.samples());
    assert_eq!(a.classes(), &["class0".to_string(), "class1".to_string()]);
    assert_eq!(a.samples()[0].id, PINNED_ID);
}

const PINNED_ID: u64 = 0xffae_1198_d4a4_f9e5;

// ---------------------------------------------------------------------------------------
// A growing dataset.

/// The bound the module docs state for a split by fraction: the validation share `f̂` of
/// `n` samples satisfies `|f̂ − f| ≤ 4·sqrt(f(1 − f)/n) + 1/n`.
fn within_bound(val: usize, n: usize, f: f64) -> bool {
    let n_f = n as f64;
    let share = val as f64 / n_f;
    (share - f).abs() <= 4.0 * (f * (1.0 - f) / n_f).sqrt() + 1.0 / n_f
}

/// The bound for a split by group: `4·sqrt(f(1 − f)·Σ s²)/n + s_max/n`.
fn within_group_bound(val: usize, sizes: &[usize], f: f64) -> bool {
    let n: usize = sizes.iter().sum();
    let n_f = n as f64;
    let sum_sq: f64 = sizes.iter().map(|&s| (s * s) as f64).sum();
    let s_max = sizes.iter().copied().max().unwrap_or(0) as f64;
    let share = val as f64 / n_f;
    (share - f).abs() <= (4.0 * (f * (1.0 - f) * sum_sq).sqrt() + s_max) / n_f
}

fn group_sizes(paths: &[String], group: impl Fn(&str) -> String) -> Vec<usize> {
    let mut sizes: BTreeMap<String, usize> = BTreeMap::new();
    for p in paths {
        *sizes.entry(group(p)).or_default() += 1;
    }
    sizes.into_values().collect()
}

/// `n` fresh random file names in a few random folders, none of them in `taken`.
fn fresh_names(rng: &mut TestRng, n: usize, taken: &BTreeSet<String>) -> Vec<String> {
    let mut out = BTreeSet::new();
    while out.len() < n {
        let name = format!(
            "d{}/{:012x}.{}",
            rng.below(5),
            rng.next_u64() >> 16,
            ["jpg", "png"][rng.below(2) as usize]
        );
        if !taken.contains(&name) {
            out.insert(name);
        }
    }
    out.into_iter().collect()
}

/// Sample path -> is it in validation.
fn sides(split: &Split) -> BTreeMap<String, bool> {
    let mut m = BTreeMap::new();
    for s in split.train().samples() {
        m.insert(s.path.clone(), false);
    }
    for s in split.val().samples() {
        m.insert(s.path.clone(), true);
    }
    m
}

/// The sizes a dataset grows through: 60, 80, then seeded random steps up to a few
/// thousand.
fn growth(rng: &mut TestRng) -> Vec<usize> {
    let mut sizes = vec![60, 80, 200];
    while sizes.len() < 7 {
        let last = sizes[sizes.len() - 1];
        sizes.push(last + 1 + rng.below(last as u64 * 2) as usize);
    }
    sizes
}

/// Every sample of `before` has the same side in `after`.
fn assert_nobody_moved(
    before: &BTreeMap<String, bool>,
    after: &BTreeMap<String, bool>,
    what: &str,
) {
    let moved: Vec<&String> = before
        .iter()
        .filter(|(p, v)| after.get(*p) != Some(v))
        .map(|(p, _)| p)
        .collect();
    assert!(
        moved.is_empty(),
        "{what}: {} samples changed side: {moved:?}",
        moved.len()
    );
}

/// The issue's reproduction: a 60-image folder split 80/20, 20 images added, split again
/// with the same seed. The old rule (the lowest `round(n·f)` scores) moved validation
/// images into training for most seeds; now nobody moves, for any seed.
#[test]
fn adding_20_images_to_60_moves_no_validation_image() {
    let old: Vec<String> = (0..60).map(|i| format!("img{i:03}.jpg")).collect();
    let mut grown = old.clone();
    grown.extend((60..80).map(|i| format!("img{i:03}.jpg")));
    for seed in 0..8 {
        let spec = || SplitSpec::fraction(0.2).seed(seed);
        let a = sides(&synthetic(&old).split(spec()).expect("split"));
        let b = sides(&synthetic(&grown).split(spec()).expect("split"));
        let leaked: Vec<&String> = a
            .iter()
            .filter(|(p, &v)| v && b.get(*p) == Some(&false))
            .map(|(p, _)| p)
            .collect();
        assert!(
            leaked.is_empty(),
            "seed {seed}: validation images now in training: {leaked:?}"
        );
        assert_nobody_moved(&a, &b, &format!("seed {seed}"));
    }
}

/// Seeded random growth in several steps: split again from scratch at each step, and
/// extend the previous manifest at each step. No sample ever changes side; both ways give
/// the same split; the share stays within the bound; each manifest checks out.
#[test]
fn growing_a_dataset_moves_nobody_split_again_or_extended() {
    for seed in [1u64, 17, 4242] {
        let mut rng = TestRng(seed ^ 0xA5A5);
        let f = [0.1, 0.2, 0.35][(seed % 3) as usize];
        let spec = || SplitSpec::fraction(f).seed(seed);
        let mut paths: Vec<String> = Vec::new();
        let mut first: Option<BTreeMap<String, bool>> = None;
        let mut prev_extended: Option<Split> = None;
        let mut prev_sides = BTreeMap::new();
        for n in growth(&mut rng) {
            let taken: BTreeSet<String> = paths.iter().cloned().collect();
            let new = fresh_names(&mut rng, n - paths.len(), &taken);
            paths.extend(new.iter().cloned());
            // Listing order must not matter either: hand the samples over shuffled.
            let mut shuffled = paths.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let fresh = synthetic(&shuffled).split(spec()).expect("split");
            let fresh_sides = sides(&fresh);
            assert_nobody_moved(
                &prev_sides,
                &fresh_sides,
                &format!("seed {seed}, n {n}, re-split"),
            );
            assert!(
                within_bound(fresh.val().len(), n, f),
                "seed {seed}: {} of {n} in validation, f = {f}",
                fresh.val().len()
            );
            let extended = match &prev_extended {
                None => fresh.clone(),
                Some(prev) => {
                    let e = Split::extend_from(prev.manifest(), synthetic(&paths)).expect("extend");
                    let added = e.added();
                    assert_eq!(added.train + added.val, new.len());
                    let new_val = new.iter().filter(|p| fresh_sides[*p]).count();
                    assert_eq!(added.val, new_val, "seed {seed}, n {n}");
                    e
                }
            };
            let ext_sides = sides(&extended);
            assert_nobody_moved(
                &prev_sides,
                &ext_sides,
                &format!("seed {seed}, n {n}, extended"),
            );
            assert_eq!(
                ext_sides, fresh_sides,
                "extending and splitting again differ"
            );
            assert_eq!(extended.manifest(), fresh.manifest());
            let r = extended.manifest().check(Some(&synthetic(&paths)));
            assert!(r.ok(), "{:?}", r.problems);
            prev_sides = ext_sides;
            first.get_or_insert_with(|| prev_sides.clone());
            prev_extended = Some(extended);
        }
        // The very first assignments survived every step.
        assert_nobody_moved(&first.expect("steps"), &prev_sides, "first to last");
    }
}

/// The share is within the documented bound for many seeds, sizes and fractions, and on
/// average it is the fraction (the rule is unbiased); 0 and 1 are exact.
#[test]
fn validation_share_stays_within_the_stated_bound() {
    let mut rng = TestRng(99);
    for &n in &[7usize, 60, 333, 2000] {
        let taken = BTreeSet::new();
        let paths = fresh_names(&mut rng, n, &taken);
        for &f in &[0.01, 0.05, 0.2, 0.5, 0.9] {
            let mut total = 0usize;
            let seeds = 40u64;
            for seed in 0..seeds {
                let s = synthetic(&paths)
                    .split(SplitSpec::fraction(f).seed(seed))
                    .expect("split");
                let v = s.val().len();
                assert_eq!(v + s.train().len(), n);
                assert!(
                    within_bound(v, n, f),
                    "n {n}, f {f}, seed {seed}: {v} in validation"
                );
                total += v;
            }
            // The mean of 40 independent shares: its standard deviation is
            // sqrt(f(1-f)/(40 n)).
            let mean = total as f64 / (seeds as usize * n) as f64;
            let sd = (f * (1.0 - f) / (seeds as f64 * n as f64)).sqrt();
            assert!(
                (mean - f).abs() <= 4.0 * sd,
                "n {n}, f {f}: mean share {mean}"
            );
        }
        for (f, want) in [(0.0, 0), (1.0, n)] {
            let s = synthetic(&paths)
                .split(SplitSpec::fraction(f).seed(5))
                .expect("split");
            assert_eq!(s.val().len(), want, "f {f}");
        }
    }
}

/// Group splits under growth: new samples of known groups and new groups arrive; groups
/// stay whole, a new sample of a known group joins its group's side, no sample moves,
/// and splitting again gives the same as extending.
#[test]
fn group_splits_keep_groups_whole_as_the_dataset_grows() {
    let pattern = r"^(site\d+/patient\d+)/";
    let group = |p: &str| {
        p.rsplit_once('/')
            .map_or(String::new(), |(g, _)| g.to_string())
    };
    for seed in [3u64, 8] {
        let mut rng = TestRng(seed * 1000 + 1);
        let spec = || SplitSpec::fraction(0.25).seed(seed).group_by(pattern);
        let mut paths: BTreeSet<String> = BTreeSet::new();
        let mut prev: Option<Split> = None;
        let mut groups_seen = 30;
        for step in 0..5 {
            // A few new scans of groups already there, and some new groups.
            let adds = 40 + rng.below(120) as usize;
            let mut added = Vec::new();
            while added.len() < adds {
                let g = rng.below(groups_seen as u64 + 8);
                let p = format!(
                    "site{}/patient{g:04}/scan{:06}.png",
                    g % 3,
                    rng.below(1 << 20)
                );
                if paths.insert(p.clone()) {
                    added.push(p);
                }
            }
            groups_seen += 8;
            let all: Vec<String> = paths.iter().cloned().collect();
            let fresh = synthetic(&all).split(spec()).expect("split");
            let split = match &prev {
                None => fresh.clone(),
                Some(p) => Split::extend_from(p.manifest(), synthetic(&all)).expect("extend"),
            };
            let now = sides(&split);
            assert_eq!(now, sides(&fresh), "seed {seed}, step {step}");
            // Groups whole.
            let mut group_side: BTreeMap<String, bool> = BTreeMap::new();
            for (p, v) in &now {
                let prior = group_side.insert(group(p), *v);
                assert!(prior.is_none_or(|w| w == *v), "group of {p} straddles");
            }
            assert!(split
                .val()
                .samples()
                .iter()
                .all(|s| s.group.as_deref() == Some(group(&s.path).as_str())));
            if let Some(p) = &prev {
                let before = sides(p);
                assert_nobody_moved(&before, &now, &format!("seed {seed}, step {step}"));
                let old_groups: BTreeMap<String, bool> =
                    before.iter().map(|(p, v)| (group(p), *v)).collect();
                for a in &added {
                    if let Some(&v) = old_groups.get(&group(a)) {
                        assert_eq!(now[a], v, "{a} left its group's side");
                    }
                }
            }
            let sizes = group_sizes(&all, group);
            assert!(
                within_group_bound(split.val().len(), &sizes, 0.25),
                "step {step}"
            );
            let r = split.manifest().check(Some(&synthetic(&all)));
            assert!(r.ok(), "{:?}", r.problems);
            prev = Some(split);
        }
    }
}

/// Samples the manifest lists but the dataset lacks are errors that name them, in load
/// and in extend; past the first ten, a count.
#[test]
fn removed_samples_are_errors_that_name_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("split.json");
    let p = paths(100);
    let split = synthetic(&p)
        .split(SplitSpec::fraction(0.3).seed(2))
        .expect("split");
    split.save(&file).expect("save");

    // One removed, one added: both named by load; extend names the removed one.
    let mut q: Vec<String> = p.iter().filter(|x| *x != &p[42]).cloned().collect();
    q.push("patient999/scan00.png".into());
    let msg = Split::load(&file, synthetic(&q))
        .expect_err("removed")
        .to_string();
    assert!(msg.contains(&format!("{:?}", p[42])), "{msg}");
    assert!(msg.contains("not in the dataset"), "{msg}");
    let msg = Split::extend(&file, synthetic(&q))
        .expect_err("removed")
        .to_string();
    assert!(
        msg.contains(&format!("{:?}", p[42])) && msg.contains("1 sample"),
        "{msg}"
    );
    assert!(msg.contains(&file.display().to_string()), "{msg}");
    let msg = Split::extend_from(split.manifest(), synthetic(&q))
        .expect_err("removed")
        .to_string();
    assert!(msg.contains(&format!("{:?}", p[42])), "{msg}");

    // 25 removed: ten named (the first by path), then a count.
    let gone: Vec<&String> = p.iter().step_by(4).collect();
    let q: Vec<String> = p.iter().filter(|x| !gone.contains(x)).cloned().collect();
    let msg = Split::extend(&file, synthetic(&q))
        .expect_err("removed")
        .to_string();
    assert!(
        msg.contains("25 sample(s)") && msg.contains("and 15 more"),
        "{msg}"
    );
    let named = gone
        .iter()
        .filter(|g| msg.contains(&format!("{g:?}")))
        .count();
    assert_eq!(named, 10, "{msg}");
    assert!(msg.contains(&format!("{:?}", gone[0])), "{msg}");
}

/// Manifests of the previous format (`stoker-split/1`, made by the old cut-off rule; see
/// scripts/make_split_v1_manifests.sh) still load, and extend keeps their assignments even
/// where the current rule would put a sample elsewhere.
#[test]
fn format_1_manifests_still_load_and_extend() {
    let fixture = |name: &str| common::data_dir().join("split").join(name);
    let old: Vec<String> = (0..60)
        .map(|i| format!("patient{:02}/scan{}.png", i / 6, i % 6))
        .collect();
    let mut grown = old.clone();
    grown.extend((0..20).map(|i| format!("patient{:02}/scan{}.png", i / 2, 6 + i % 2)));
    grown.extend((0..6).map(|i| format!("patient10/scan{i}.png")));
    for (name, spec) in [
        ("v1-fraction.json", SplitSpec::fraction(0.2).seed(5)),
        (
            "v1-group.json",
            SplitSpec::fraction(0.25)
                .seed(9)
                .group_by(r"^(patient\d+)/"),
        ),
    ] {
        let file = fixture(name);
        let m = Manifest::load(&file).expect("a format 1 manifest loads");
        assert_eq!(m.format, "stoker-split/1");
        assert!(m.check(Some(&synthetic(&old))).ok());
        let loaded = Split::load(&file, synthetic(&old)).expect("load");
        let stored: BTreeMap<String, bool> = m
            .train
            .iter()
            .map(|e| (e.path.clone(), false))
            .chain(m.val.iter().map(|e| (e.path.clone(), true)))
            .collect();
        assert_eq!(sides(&loaded), stored, "{name}");
        assert_eq!(loaded.manifest(), &m, "load keeps the manifest as it is");
        // The current rule disagrees with the stored split somewhere (or this test would
        // not show that stored assignments win).
        let by_rule = sides(&synthetic(&old).split(spec.clone()).expect("split"));
        assert_ne!(
            by_rule, stored,
            "{name}: pick a fixture where the rules differ"
        );

        let e = Split::extend(&file, synthetic(&grown)).expect("extend");
        let now = sides(&e);
        assert_nobody_moved(&stored, &now, name);
        assert_eq!(e.added().train + e.added().val, grown.len() - old.len());
        assert_eq!(e.manifest().format, "stoker-split/2");
        let r = e.manifest().check(Some(&synthetic(&grown)));
        assert!(r.ok(), "{name}: {:?}", r.problems);
        if m.group_by.is_some() {
            // New scans joined their patient's side.
            for p in &grown[60..80] {
                let twin = format!("{}/scan0.png", &p[..9]);
                assert_eq!(now[p], stored[&twin], "{p}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The command line.

fn stoker_cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stoker"))
        .args(args)
        .output()
        .expect("run stoker")
}

fn touch_images(dir: &Path, names: &[String]) {
    for n in names {
        common::write(dir, n, &[]);
    }
}

/// `stoker split`, then `stoker split --extend` after the folder grew: the extended
/// manifest keeps every side, reports how many new samples went where, and loads; a
/// removed file makes `--extend` fail naming it.
#[test]
fn the_cli_extends_a_manifest_to_a_grown_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let images = dir.path().join("images");
    let names = |r: std::ops::Range<usize>| -> Vec<String> {
        r.map(|i| format!("class{}/img{i:03}.png", i % 2)).collect()
    };
    touch_images(&images, &names(0..60));
    let manifest = dir.path().join("split.json");
    let (img, man) = (
        images.to_str().expect("path"),
        manifest.to_str().expect("path"),
    );
    let out = stoker_cli(&[
        "split", img, "--val", "0.2", "--seed", "4", "--out", man, "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = Manifest::load(&manifest).expect("manifest");

    touch_images(&images, &names(60..80));
    let grown = dir.path().join("grown.json");
    let out = stoker_cli(&[
        "split",
        "--extend",
        man,
        img,
        "--out",
        grown.to_str().expect("path"),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let after = Manifest::load(&grown).expect("extended manifest");
    let (at, av) = (v["added"]["train"].as_u64(), v["added"]["val"].as_u64());
    let new_val = after.val.len() - before.val.len();
    assert_eq!(av, Some(new_val as u64), "{v}");
    assert_eq!(
        at,
        Some((after.train.len() - before.train.len()) as u64),
        "{v}"
    );
    assert_eq!(at.unwrap_or(0) + av.unwrap_or(0), 20);
    assert_eq!(v["ok"], true);
    assert_eq!(v["train"].as_u64(), Some(after.train.len() as u64));
    let val_after: BTreeSet<&str> = after.val.iter().map(|e| e.path.as_str()).collect();
    assert!(before
        .val
        .iter()
        .all(|e| val_after.contains(e.path.as_str())));
    let train_after: BTreeSet<&str> = after.train.iter().map(|e| e.path.as_str()).collect();
    assert!(before
        .train
        .iter()
        .all(|e| train_after.contains(e.path.as_str())));
    Split::load(&grown, Dataset::image_folder(&images).expect("folder")).expect("load");
    // The text report says where the new samples went.
    let out = stoker_cli(&["split", "--extend", grown.to_str().expect("path"), img]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0 new samples, 0 to train and 0 to val"),
        "{text}"
    );

    // In place by default; a removed file is an error naming it.
    std::fs::remove_file(images.join("class1/img007.png")).expect("rm");
    let out = stoker_cli(&["split", "--extend", man, img]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("class1/img007.png"), "{err}");
    assert_eq!(Manifest::load(&manifest).expect("unchanged"), before);
}

//! Split invariants: disjoint, identical across runs and listing orders, groups whole,
//! manifests round-trip, and tampering is caught.

mod common;

use std::collections::BTreeSet;

use stoker::source::sample_id;
use stoker::source::split::Manifest;
use stoker::{Dataset, Sample, SplitSpec};

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
    assert_eq!(va.len(), 100);
    assert_eq!(ta.len(), 400);
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
    // About a quarter, overshooting by less than one group.
    let nv = s.val().len();
    assert!((125..125 + 7).contains(&nv), "val size {nv}");
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
    // A file added after the split: the manifest no longer covers the data.
    common::write(
        dir.path(),
        "class0/new.png",
        &common::png_rgb(1, 1, &[1, 2, 3]),
    );
    let err = stoker::Split::load(&file, Dataset::image_folder(dir.path()).expect("folder"));
    assert!(err.is_err());
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

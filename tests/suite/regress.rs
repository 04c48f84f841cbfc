//! Every file in `tests/data/regress/<target>/` (an input a fuzz target once failed on,
//! see `fuzz/`) is replayed through that target's check, and so is every bundled test
//! file (the fuzzers' seeds), on every test run: a fixed bug stays fixed without a
//! nightly toolchain.

use crate::common;

use crate::checks;

type Check = fn(&[u8]);

const TARGETS: &[(&str, Check)] = &[
    ("jpeg_decode", checks::jpeg_decode),
    ("coefficients", checks::coefficients),
    ("image_formats", checks::image_formats),
    ("png_mask", checks::png_mask),
    ("shards", checks::shards),
    ("shard_index", checks::shard_index),
    ("file_list", checks::file_list),
    ("manifests", checks::manifests),
    ("device_oracle", checks::device_oracle),
    ("sync_huffman", checks::sync_huffman),
];

#[test]
fn every_regression_file_passes_its_fuzz_target() {
    let root = common::data_dir().join("regress");
    let mut replayed = 0;
    for (target, check) in TARGETS {
        let mut files = Vec::new();
        common::files_below(&root.join(target), &mut files);
        for f in files.iter().filter(|f| !f.ends_with("README.md")) {
            let bytes = std::fs::read(f).expect("regression file");
            eprintln!("{target}: {}", f.display());
            check(&bytes);
            replayed += 1;
        }
    }
    // Every directory under regress/ is a target's.
    for e in std::fs::read_dir(&root)
        .expect("tests/data/regress")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            !e.path().is_dir() || TARGETS.iter().any(|(t, _)| *t == name),
            "tests/data/regress/{name}/ is no fuzz target's"
        );
    }
    eprintln!("{replayed} regression file(s) replayed");
}

/// The fuzzers' seeds pass their checks: the checks hold on real files, so a fuzz failure
/// is the mutation's, not the check's.
#[test]
fn every_seed_passes_every_check() {
    let mut seeds = Vec::new();
    for d in [
        "jpeg",
        "formats",
        "lenient",
        "masks",
        "samples",
        "shards",
        "shard_index",
    ] {
        common::files_below(&common::data_dir().join(d), &mut seeds);
    }
    assert!(seeds.len() > 50, "{} seeds", seeds.len());
    for f in &seeds {
        let bytes = std::fs::read(f).expect("seed");
        for (target, check) in TARGETS {
            // The shard and list checks write a file per call: the shard seeds only.
            let heavy = matches!(
                *target,
                "shards" | "shard_index" | "file_list" | "manifests"
            );
            let shard_seed = f
                .components()
                .any(|c| c.as_os_str() == "shards" || c.as_os_str() == "shard_index");
            if heavy && !shard_seed {
                continue;
            }
            eprintln!("{target}: {}", f.display());
            check(&bytes);
        }
    }
}

/// The seeds of the `shard_index` target (`tests/data/shard_index/`) are the valid
/// sidecars of its fixture as this build writes them, so that the fuzzer starts from
/// indexes that pass the stamp and the digest. `STOKER_UPDATE_SEEDS=1` rewrites them.
#[test]
fn the_shard_index_seeds_are_current() {
    let dir = common::data_dir().join("shard_index");
    let update = std::env::var_os("STOKER_UPDATE_SEEDS").is_some_and(|v| v == "1");
    for (name, bytes) in checks::shard_index_seeds() {
        let path = dir.join(&name);
        if update {
            std::fs::create_dir_all(&dir).expect("seed folder");
            std::fs::write(&path, &bytes).expect("seed");
        }
        let kept = std::fs::read(&path).unwrap_or_default();
        assert!(
            kept == bytes,
            "{} is not the fixture's sidecar of this build: rerun with STOKER_UPDATE_SEEDS=1",
            path.display()
        );
    }
}

//! Every file in `tests/data/regress/<target>/` (an input a fuzz target once failed on,
//! see `fuzz/`) is replayed through that target's check, and so is every bundled test
//! file (the fuzzers' seeds), on every test run: a fixed bug stays fixed without a
//! nightly toolchain.

mod common;

#[path = "../fuzz/checks.rs"]
mod checks;

type Check = fn(&[u8]);

const TARGETS: &[(&str, Check)] = &[
    ("jpeg_decode", checks::jpeg_decode),
    ("coefficients", checks::coefficients),
    ("image_formats", checks::image_formats),
    ("png_mask", checks::png_mask),
    ("shards", checks::shards),
    ("file_list", checks::file_list),
    ("device_oracle", checks::device_oracle),
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
    for d in ["jpeg", "formats", "lenient", "masks", "samples", "shards"] {
        common::files_below(&common::data_dir().join(d), &mut seeds);
    }
    assert!(seeds.len() > 50, "{} seeds", seeds.len());
    for f in &seeds {
        let bytes = std::fs::read(f).expect("seed");
        for (target, check) in TARGETS {
            // The shard and list checks write a file per call: the shard seeds only.
            let heavy = matches!(*target, "shards" | "file_list");
            if heavy && !f.components().any(|c| c.as_os_str() == "shards") {
                continue;
            }
            eprintln!("{target}: {}", f.display());
            check(&bytes);
        }
    }
}

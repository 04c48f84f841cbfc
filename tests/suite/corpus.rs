//! No panic on any file of the shared corpus (runs whenever `../shared/corpus` exists),
//! and the pipeline delivers or reports every corpus JPEG exactly once.

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use stoker::decode::{cpu, peek_info, DecodeError, DecodeOptions, Image8, LabelPlane};
use stoker::{Augment, Dataset, OnError, Pipeline};

#[test]
fn no_file_of_the_corpus_makes_the_decoders_panic() {
    let Some(corpus) = common::corpus_or_skip() else {
        return;
    };
    let mut files = Vec::new();
    common::files_below(&corpus, &mut files);
    common::files_below(&common::data_dir(), &mut files);
    assert!(
        files.len() > 200,
        "corpus looks incomplete: {} files",
        files.len()
    );
    let opts = DecodeOptions::default();
    let (mut img, mut plane) = (Image8::default(), LabelPlane::default());
    let mut panicked = Vec::new();
    let (mut ok, mut refused) = (0, 0);
    for f in &files {
        let bytes = std::fs::read(f).expect("readable corpus file");
        let _ = peek_info(&bytes);
        for r in [
            cpu::decode_image(&bytes, &opts, &mut img).map(|_| ()),
            cpu::decode_mask(&bytes, &opts, &mut plane).map(|_| ()),
        ] {
            match r {
                Ok(()) => ok += 1,
                Err(DecodeError::Panicked(m)) => panicked.push(format!("{}: {m}", f.display())),
                Err(_) => refused += 1,
            }
        }
        // Truncations of every file, too: a cut-off download must not panic either.
        for cut in [1usize, 2, 7, 64, bytes.len() / 2] {
            if cut < bytes.len() {
                if let Err(DecodeError::Panicked(m)) =
                    cpu::decode_image(&bytes[..cut], &opts, &mut img)
                {
                    panicked.push(format!("{} cut at {cut}: {m}", f.display()));
                }
            }
        }
    }
    assert!(
        panicked.is_empty(),
        "decoder panics (caught, but they must not happen):\n{}",
        panicked.join("\n")
    );
    assert!(ok > 100 && refused > 50, "ok {ok}, refused {refused}");
}

/// One epoch over the corpus JPEGs on `backend` under `policy`: (delivered ids in order,
/// reported ids, slots filled by replacements).
fn corpus_epoch(
    data: &Dataset,
    backend: stoker::BackendKind,
    policy: OnError,
) -> (Vec<u64>, BTreeSet<u64>, usize) {
    let pipe = Pipeline::builder(data.clone().all())
        .backend(backend)
        .augment(
            Augment::new()
                .random_resized_crop(32, (0.08, 1.0), (0.75, 1.33))
                .flip_horizontal(0.5),
        )
        .batch_size(16)
        .on_error(policy)
        .build()
        .expect("pipeline");
    let mut delivered = Vec::new();
    let mut reported = Vec::new();
    let mut replaced = 0;
    for b in pipe.epoch(0).expect("epoch") {
        let b = b.expect("skip and replace never fail");
        delivered.extend_from_slice(b.ids());
        reported.extend(b.errors().iter().map(|e| e.id));
        replaced += b.replacements().len();
    }
    let n = reported.len();
    let reported: BTreeSet<u64> = reported.into_iter().collect();
    assert_eq!(n, reported.len(), "{backend}: a sample was reported twice");
    (delivered, reported, replaced)
}

#[test]
fn the_corpus_jpegs_are_each_delivered_or_reported_once() {
    let Some(corpus) = common::corpus_or_skip() else {
        return;
    };
    let data = Dataset::flat(corpus.join("jpeg")).expect("corpus folder");
    let all: BTreeSet<u64> = data.samples().iter().map(|s| s.id).collect();
    let mut first: Option<(Vec<u64>, BTreeSet<u64>)> = None;
    for backend in common::backends() {
        // Skip: every sample delivered once or reported once, never both.
        let (delivered, reported, _) = corpus_epoch(&data, backend, OnError::Skip);
        let mut both: Vec<u64> = delivered.iter().chain(&reported).copied().collect();
        both.sort_unstable();
        let n = both.len();
        both.dedup();
        assert_eq!(
            n,
            both.len(),
            "{backend}: a sample was delivered or reported twice"
        );
        assert_eq!(both.into_iter().collect::<BTreeSet<_>>(), all);
        assert!(
            delivered.len() > 100 && reported.len() > 20,
            "{backend}: {} delivered, {} reported",
            delivered.len(),
            reported.len()
        );
        // Replace: every slot filled, the same samples reported, each failure replaced.
        let (filled, replaced_reported, replaced) = corpus_epoch(&data, backend, OnError::Replace);
        assert_eq!(
            filled.len(),
            all.len(),
            "{backend}: replace leaves a slot empty"
        );
        assert_eq!(
            replaced_reported, reported,
            "{backend}: replace reports other files"
        );
        assert_eq!(replaced, reported.len());
        // Every backend delivers the same samples in the same order, except that the
        // CPU's crop-aware decode stops after the last row its crop reads, so it never
        // sees damage further on, while the device path entropy-decodes the whole file.
        // Each sample only a device reports must fail a whole-image CPU decode too.
        match &first {
            None => first = Some((delivered, reported)),
            Some((d, r)) => {
                assert!(
                    reported.is_superset(r),
                    "{backend}: delivered what the CPU reports"
                );
                let common: Vec<u64> = d
                    .iter()
                    .copied()
                    .filter(|id| !reported.contains(id))
                    .collect();
                assert_eq!(common, delivered, "{backend}: other samples or order");
                for s in data
                    .samples()
                    .iter()
                    .filter(|s| reported.contains(&s.id) && !r.contains(&s.id))
                {
                    let bytes = std::fs::read(corpus.join("jpeg").join(&s.path)).expect("read");
                    let mut img = stoker::decode::Image8::default();
                    let whole = stoker::decode::DecodeOptions::default();
                    assert!(
                        stoker::decode::cpu::decode_image(&bytes, &whole, &mut img).is_err(),
                        "{backend} reports {}, which decodes whole on the CPU",
                        s.path
                    );
                    println!(
                        "{backend}: also reports {} (damage past the crop's rows)",
                        s.path
                    );
                }
            }
        }
    }
}

#[test]
fn mutated_and_truncated_jpegs_never_panic_or_crash() {
    // Damage the bundled JPEGs the way storage and networks do: flipped bits, overwritten
    // runs, cut-off tails, dropped and duplicated bytes. Every result must be a decoded
    // image or an error; a decoder panic (caught) fails, a crash in C kills the test.
    let dir = common::data_dir().join("jpeg");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("bundled jpeg folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    files.sort();
    let mut rng = common::TestRng(2024);
    let (mut img, mut panicked, mut decoded, mut refused) = (Image8::default(), Vec::new(), 0, 0);
    for f in &files {
        let original = std::fs::read(f).expect("jpeg");
        if original.len() < 16 {
            continue;
        }
        for round in 0..60 {
            let mut b = original.clone();
            let n = b.len() as u64;
            match round % 5 {
                0 => {
                    for _ in 0..1 + rng.below(8) {
                        let i = rng.below(n) as usize;
                        b[i] ^= 1 << rng.below(8);
                    }
                }
                1 => {
                    let start = rng.below(n) as usize;
                    let end = (start + 1 + rng.below(64) as usize).min(b.len());
                    let v = rng.below(256) as u8;
                    b[start..end].fill(v);
                }
                2 => b.truncate(2 + rng.below(n - 2) as usize),
                3 => {
                    let i = rng.below(n) as usize;
                    b.remove(i);
                }
                _ => {
                    let i = rng.below(n) as usize;
                    let v = b[i];
                    b.insert(i, v);
                }
            }
            for strict in [true, false] {
                let opts = DecodeOptions {
                    strict,
                    ..DecodeOptions::default()
                };
                match cpu::decode_image(&b, &opts, &mut img) {
                    Ok(_) => decoded += 1,
                    Err(DecodeError::Panicked(m)) => {
                        panicked.push(format!("{} round {round}: {m}", f.display()))
                    }
                    Err(_) => refused += 1,
                }
            }
        }
    }
    println!("{decoded} decoded, {refused} refused");
    assert!(
        panicked.is_empty(),
        "decoder panics:\n{}",
        panicked.join("\n")
    );
    assert!(
        decoded > 100 && refused > 100,
        "{decoded} decoded, {refused} refused"
    );
}

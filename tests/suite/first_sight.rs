//! The epoch in which the CPU backend first sees a JPEG judges the whole file by reading
//! its crop's decode on to the file's end (`pipeline::verdict`); later epochs take the
//! verdict kept and decode only down to the crop, and a restart-marked file's crop only
//! from the rows just above it. Whichever epoch a pipeline starts in, every epoch must
//! deliver the same samples with the same pixels and warnings, and refuse the same ones
//! with the same reasons, as the whole file's verdict says (an independent whole decode
//! at 1/8 scale, the file's reference verdict).
//!
//! Fresh files each run of the suite's seed: the bundled JPEGs of every kind the decoder
//! takes, eight of the shared corpus's (when it is present), random restart-marked JPEGs
//! of every sampling, tall enough that crops end far above their last row, and damaged
//! copies of all (bits flipped, cut short, a byte taken out or put in), strict and
//! lenient.

use crate::common;

use std::collections::BTreeMap;

use crate::common::outcomes::{folder_epochs, Outcome};
use crate::common::TestRng;
use stoker::decode::{cpu, DecodeOptions};
use stoker::{Augment, BackendKind, DType};

const BUNDLED: &[&str] = &[
    "jpeg/go_video-001_221212.jpg",
    "jpeg/go_video-001_q50_411.jpg",
    "jpeg/go_video-001_cmyk.jpg",
    "jpeg/jd_moz_jpg-progressive.jpg",
    "jpeg/jd_moz_jpg-gray.jpg",
    "jpeg/ljt_testorig.jpg",
    "jpeg/ljt_testimgari.jpg",
    "jpeg/jd_ycck.jpg",
    "jpeg/jd_extraneous-data.jpg",
    "lenient/seeding_baseline.jpg",
    "lenient/seeding_extraneous.jpg",
    "lenient/seeding_truncated.jpg",
];

/// Writes the test files into `dir/j`; returns how many.
fn write_files(dir: &std::path::Path, rng: &mut TestRng) -> usize {
    let mut files: Vec<Vec<u8>> = BUNDLED
        .iter()
        .map(|f| std::fs::read(common::data_dir().join(f)).expect("bundled JPEG"))
        .collect();
    // A few of the shared corpus's JPEGs too, when it is here: real files of every kind.
    if let Some(corpus) = common::corpus_dir() {
        let mut found = Vec::new();
        common::files_below(&corpus, &mut found);
        found.retain(|p| p.extension().is_some_and(|e| e == "jpg" || e == "jpeg"));
        found.sort();
        for _ in 0..8.min(found.len()) {
            let p = found.swap_remove(rng.below(found.len() as u64) as usize);
            let bytes = std::fs::read(&p).expect("corpus JPEG");
            // With a scan to damage (some of the corpus's crash cases have none).
            if common::scan_start(&bytes).is_some_and(|s| s + 4 < bytes.len()) {
                files.push(bytes);
            }
        }
    }
    let samplings = [(1, 1), (2, 1), (1, 2), (2, 2)];
    for k in 0..10 {
        let (w, h) = (48 + rng.below(160) as u32, 160 + rng.below(240) as u32);
        let samp = samplings[k % samplings.len()];
        let (mcus, rows) = (rng.below(4) as u32, 1 + rng.below(2) as i32);
        files.push(common::restart_jpeg(rng, w, h, samp, k == 9, mcus, rows));
    }
    let damaged: Vec<Vec<u8>> = files
        .iter()
        .flat_map(|f| [common::damaged(f, rng).0, common::damaged(f, rng).0])
        .collect();
    files.extend(damaged);
    for (k, f) in files.iter().enumerate() {
        common::write(dir, &format!("j/f{k:03}.jpg"), f);
    }
    files.len()
}

/// The epochs `epochs` of a fresh pipeline over `dir`, in turn: each sample's outcome.
fn run(
    dir: &std::path::Path,
    strict: bool,
    seed: u64,
    epochs: &[u64],
) -> Vec<BTreeMap<String, Outcome>> {
    let aug = Augment::new()
        .random_resized_crop(24, (0.05, 1.0), (0.5, 2.0))
        .flip_horizontal(0.5)
        .dtype(DType::U8);
    folder_epochs(dir, (BackendKind::Cpu, aug, strict, seed), epochs)
}

/// The file's reference verdict: refused, or delivered with this warning.
fn verdict(bytes: &[u8], strict: bool) -> Result<Option<String>, String> {
    let opts = DecodeOptions {
        strict,
        scale: 8,
        ..Default::default()
    };
    let mut img = stoker::decode::Image8::default();
    cpu::decode_image_report(bytes, &opts, &mut img)
        .map(|r| r.warning.map(|w| format!("{:?}: {}", w.kind, w.message)))
        .map_err(|e| e.to_string())
}

#[test]
fn the_epoch_a_file_is_first_seen_in_delivers_what_every_other_epoch_does() {
    let seed = common::fresh_seed("first_sight");
    let mut rng = TestRng(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let n = write_files(dir.path(), &mut rng);
    let (mut delivered, mut warned, mut refused) = (0, 0, 0);
    for strict in [true, false] {
        // Epochs 0, 1 and 2 in one pipeline; 1 and 2 each first in a fresh one.
        let all = run(dir.path(), strict, seed, &[0, 1, 2]);
        let first = [
            run(dir.path(), strict, seed, &[1]),
            run(dir.path(), strict, seed, &[2]),
        ];
        for (e, fresh) in [(1, &first[0][0]), (2, &first[1][0])] {
            for (path, o) in &all[e] {
                assert!(
                    fresh.get(path) == Some(o),
                    "strict {strict}, epoch {e}, {path}: {:?} after earlier epochs, {:?} when first seen",
                    short(o),
                    fresh.get(path).map(short),
                );
            }
        }
        for epoch in &all {
            for (path, o) in epoch {
                let bytes = std::fs::read(dir.path().join(path)).expect("file");
                match (verdict(&bytes, strict), o) {
                    (Err(_), Outcome::Refused(_)) => refused += 1,
                    (Ok(w), Outcome::Delivered(_, got)) if &w == got => {
                        delivered += 1;
                        warned += usize::from(w.is_some());
                    }
                    (v, o) => panic!("strict {strict}, {path}: verdict {v:?} but {:?}", short(o)),
                }
            }
        }
    }
    eprintln!("{n} files: {delivered} delivered ({warned} with a warning), {refused} refused");
    assert!(refused > 0 && warned > 0, "the damaged files were judged");
}

/// An outcome without its pixels, for messages.
fn short(o: &Outcome) -> String {
    match o {
        Outcome::Delivered(_, w) => format!("delivered ({w:?})"),
        Outcome::Refused(r) => format!("refused ({r})"),
    }
}

//! The synchronising Huffman decode's oracle (`decode::jpeg::huffman::sync`) against
//! libjpeg's `jpeg_read_coefficients`: every baseline file bundled (and in the shared
//! corpus, where present) and random encodes, with and without restart markers, decode
//! to libjpeg's coefficients, with subsequences of every size down to 32 bits (many
//! subsequences and sync rounds on small images); damaged files are flagged, never
//! decoded silently; the sync rounds stop at their bound with `STATUS_NO_SYNC`.

use std::collections::BTreeMap;

use crate::checks::{coefficient_difference, sync_huffman_at};
use crate::common::{self, restart_jpeg, TestRng, RESTART_SAMPLINGS};
use stoker::decode::jpeg::coeffs::{CoeffStatus, Coefficients};
use stoker::decode::jpeg::huffman::sync::{
    decode_batch, pack_batch, pack_sync, set_sync_regions, sync_round, sync_scan, sync_start,
    sync_write, BATCH_WORDS, RECORD_WORDS, SUBSEQUENCE_BITS,
};
use stoker::decode::jpeg::huffman::{
    decode_coefficients_sync, decode_sync_with, RestartScan, STATUS_NO_SYNC, STATUS_SIMD_RANGE,
};
use stoker::decode::jpeg::read_coefficients;

/// Subsequence sizes the random cases draw from.
const SIZES: [u32; 7] = [32, 64, 96, 256, 1024, 4096, SUBSEQUENCE_BITS];

/// Rounds enough for any file here: the rounds converge after at most one more than the
/// subsequences of the longest segment (each round fixes at least the first subsequence
/// whose start is still wrong).
const ENOUGH_ROUNDS: u32 = 1 << 20;

/// libjpeg's strict read is clean: no warning, and the coefficients read (those of a
/// file only the CPU decoder reproduces, `CpuOnly` but not for damage, too).
fn libjpeg_clean(r: &Result<CoeffStatus, stoker::decode::DecodeError>, c: &Coefficients) -> bool {
    let read = match r {
        Ok(CoeffStatus::Ready) => true,
        Ok(CoeffStatus::CpuOnly(why)) => !why.starts_with("corrupt"),
        _ => false,
    };
    read && c.warning.is_none()
}

/// libjpeg's strict read of `jpeg`, asserted clean.
fn libjpeg(jpeg: &[u8], what: &str) -> Coefficients {
    let mut theirs = Coefficients::default();
    let r = read_coefficients(jpeg, true, &mut theirs);
    assert!(
        libjpeg_clean(&r, &theirs),
        "{what}: libjpeg {r:?} {:?}",
        theirs.warning
    );
    theirs
}

/// A random JPEG: size, sampling, restart markers (none in a third of the cases) and
/// tables (optimised or not, quality: [`restart_jpeg`]) from `rng`.
fn random_case(rng: &mut TestRng, case: usize) -> (Vec<u8>, String) {
    let (samp, gray) = RESTART_SAMPLINGS[case % RESTART_SAMPLINGS.len()];
    let (w, h) = match rng.below(8) {
        0 => (1 + rng.below(3) as u32, 1 + rng.below(3) as u32),
        _ => (1 + rng.below(300) as u32, 1 + rng.below(240) as u32),
    };
    let (mcus, rows) = match case % 3 {
        0 => (0, 0),
        1 => (1 + rng.below(40) as u32, 0),
        _ => (0, 1 + rng.below(3) as i32),
    };
    let jpeg = restart_jpeg(rng, w, h, samp, gray, mcus, rows);
    let what = format!("{w}x{h} sampling {samp:?} gray {gray}, restart {mcus} MCUs / {rows} rows");
    (jpeg, what)
}

#[test]
fn random_jpegs_decode_as_libjpeg_reads_them() {
    let seed = common::fresh_seed("random sync decodes");
    let mut rng = TestRng(seed);
    let mut ours = Coefficients::default();
    for case in 0..90 {
        let (jpeg, what) = random_case(&mut rng, case);
        let bits = SIZES[rng.below(SIZES.len() as u64) as usize];
        let what = format!("seed {seed} case {case}: {what}, {bits}-bit subsequences");
        let scan = RestartScan::parse_sync(&jpeg).unwrap_or_else(|e| panic!("{what}: {e}"));
        let status =
            decode_sync_with(&scan, &jpeg, bits, ENOUGH_ROUNDS, &mut ours).expect("decode");
        assert_eq!(status & !STATUS_SIMD_RANGE, 0, "{what}: status");
        let theirs = libjpeg(&jpeg, &what);
        if let Some(d) = coefficient_difference(&ours, &theirs) {
            panic!("{what}: {d}");
        }
    }
}

#[test]
fn files_without_restart_markers_are_one_interval() {
    let mut rng = TestRng(11);
    let jpeg = restart_jpeg(&mut rng, 70, 50, (2, 2), false, 0, 0);
    // `RestartScan::parse` refuses it (tests/suite/huffman.rs); the sync decode takes it.
    let scan = RestartScan::parse_sync(&jpeg).expect("parse_sync");
    assert_eq!(scan.intervals.len(), 1);
    // 70x50 at 2x2: 5 x 4 MCUs of 16x16 pixels.
    assert_eq!((scan.mcus_per_row, scan.mcu_rows), (5, 4));
    assert_eq!(u64::from(scan.restart_interval), scan.total_mcus());
    let mut ours = Coefficients::default();
    assert_eq!(
        decode_coefficients_sync(&scan, &jpeg, &mut ours).expect("decode") & !STATUS_SIMD_RANGE,
        0
    );
    let theirs = libjpeg(&jpeg, "70x50");
    assert_eq!(coefficient_difference(&ours, &theirs), None);
}

/// The passes run as the driver runs them, counting the rounds that changed an exit.
/// Returns the status, the subsequences and those rounds.
fn run_passes(
    scan: &RestartScan,
    jpeg: &[u8],
    bits: u32,
    rounds: u32,
    out: &mut Coefficients,
) -> (u32, usize, u32) {
    let mut chunk = Vec::new();
    pack_sync(scan, jpeg, bits, rounds, &mut chunk).expect("pack");
    let subs = chunk[1] as usize;
    let mut a = vec![0u32; subs * RECORD_WORDS];
    for s in 0..subs as u32 {
        sync_start(&chunk, &mut a, s);
    }
    let mut b = a.clone();
    let (mut changing, mut converged) = (0, false);
    for _ in 0..rounds {
        let mut changed = 0;
        for s in 0..subs as u32 {
            changed |= sync_round(&chunk, &a, &mut b, s);
        }
        std::mem::swap(&mut a, &mut b);
        if changed == 0 {
            converged = true;
            break;
        }
        changing += 1;
    }
    let mut status = if converged { 0 } else { STATUS_NO_SYNC };
    for g in 0..chunk[0] {
        status |= sync_scan(&chunk, &mut a, g);
    }
    let mut coefs = vec![0u32; chunk[10] as usize];
    for s in 0..subs as u32 {
        status |= sync_write(&chunk, &a, &mut coefs, s);
    }
    // The driver's result for the same chunk.
    let st = decode_sync_with(scan, jpeg, bits, rounds, out).expect("decode");
    assert_eq!(st, status, "the driver runs the passes as here");
    (status, subs, changing)
}

#[test]
fn small_subsequences_sync_over_many_rounds_or_say_they_did_not() {
    let seed = common::fresh_seed("small subsequences");
    let mut rng = TestRng(seed);
    let mut ours = Coefficients::default();
    let (mut most_subs, mut most_rounds) = (0, 0);
    for case in 0..24 {
        let (samp, gray) = RESTART_SAMPLINGS[case % RESTART_SAMPLINGS.len()];
        let (w, h) = (64 + rng.below(200) as u32, 48 + rng.below(150) as u32);
        let mcus = if case % 2 == 0 {
            0
        } else {
            3 + rng.below(20) as u32
        };
        let jpeg = restart_jpeg(&mut rng, w, h, samp, gray, mcus, 0);
        let what = format!("seed {seed} case {case}: {w}x{h} {samp:?} gray {gray}, restart {mcus}");
        let theirs = libjpeg(&jpeg, &what);
        let scan = RestartScan::parse_sync(&jpeg).expect("parse");
        let (status, subs, changing) = run_passes(&scan, &jpeg, 32, ENOUGH_ROUNDS, &mut ours);
        assert_eq!(status & !STATUS_SIMD_RANGE, 0, "{what}");
        if let Some(d) = coefficient_difference(&ours, &theirs) {
            panic!("{what}: {d}");
        }
        most_subs = most_subs.max(subs);
        most_rounds = most_rounds.max(changing);
        // One round fewer than it took: not converged, said so.
        let (status, _, _) = run_passes(&scan, &jpeg, 32, changing, &mut ours);
        assert_ne!(status & STATUS_NO_SYNC, 0, "{what}: {changing} rounds");
    }
    eprintln!("most subsequences {most_subs}, most rounds changing an exit {most_rounds}");
    assert!(most_subs > 200, "{most_subs} subsequences");
    assert!(most_rounds >= 2, "{most_rounds} rounds");
}

#[test]
fn damaged_files_are_flagged_or_decode_as_libjpeg_does() {
    // Whatever the damage, a clean status means libjpeg reads the same coefficients
    // without a warning, and the interval oracle judges a restart file the same
    // (`checks::sync_huffman_at` asserts both).
    let seed = common::fresh_seed("damaged sync decodes");
    let mut rng = TestRng(seed);
    let (mut flagged, mut clean, mut refused) = (0, 0, 0);
    for case in 0..240 {
        let (src, what) = random_case(&mut rng, case);
        if src.len() < 700 {
            continue;
        }
        let (bad, _) = common::damaged(&src, &mut rng);
        let bits = SIZES[rng.below(SIZES.len() as u64) as usize];
        eprintln!("seed {seed} case {case}: {what}, {bits}-bit subsequences");
        match sync_huffman_at(&bad, bits) {
            None => refused += 1,
            Some(s) if s & !STATUS_SIMD_RANGE != 0 => flagged += 1,
            Some(_) => clean += 1,
        }
    }
    eprintln!("damaged: {flagged} flagged, {clean} clean, {refused} left to the host path");
    assert!(flagged > 60, "{flagged} flagged");
}

/// What [`check_folder`] saw.
#[derive(Debug, Default)]
struct Seen {
    /// Files libjpeg reads cleanly, decoded to its coefficients.
    checked: usize,
    /// Files libjpeg warns about or refuses, flagged.
    flagged: usize,
    /// Files the parse left to the host path, by reason.
    skipped: BTreeMap<String, usize>,
    /// Files by the rounds that changed an exit, with subsequences of the default size.
    rounds: BTreeMap<u32, usize>,
}

/// Every JPEG below `dir` the parse takes decodes as libjpeg reads it (a file libjpeg
/// warns about is flagged), with subsequences of each of `sizes` and rounds enough
/// ([`ENOUGH_ROUNDS`]); with the default size also within the default rounds.
fn check_folder(dir: &std::path::Path, sizes: &[u32]) -> Seen {
    let mut files = Vec::new();
    common::files_below(dir, &mut files);
    let mut seen = Seen::default();
    let mut ours = Coefficients::default();
    let mut theirs = Coefficients::default();
    let limits = stoker::decode::Limits {
        max_pixels: 40 << 20,
        ..Default::default()
    };
    for f in &files {
        let bytes = std::fs::read(f).expect("read");
        if !bytes.starts_with(&[0xFF, 0xD8]) {
            continue;
        }
        let fits = stoker::decode::peek_info(&bytes)
            .is_ok_and(|info| stoker::decode::check_limits(&info, &limits).is_ok());
        let why = match RestartScan::parse_sync(&bytes) {
            Ok(_) if !fits => "over the test's pixel limit".to_string(),
            Ok(scan) => {
                let r = read_coefficients(&bytes, true, &mut theirs);
                let clean = libjpeg_clean(&r, &theirs);
                for &bits in sizes {
                    let what = format!("{}, {bits}-bit subsequences", f.display());
                    let (status, _, rounds) =
                        run_passes(&scan, &bytes, bits, ENOUGH_ROUNDS, &mut ours);
                    if bits == SUBSEQUENCE_BITS {
                        *seen.rounds.entry(rounds).or_default() += 1;
                        let st =
                            decode_coefficients_sync(&scan, &bytes, &mut ours).expect("decode");
                        assert_eq!(st, status, "{what}: within the default rounds");
                    }
                    if clean {
                        assert_eq!(status & !STATUS_SIMD_RANGE, 0, "{what}: status");
                        if let Some(d) = coefficient_difference(&ours, &theirs) {
                            panic!("{what}: {d}");
                        }
                    } else {
                        assert_ne!(
                            status & !STATUS_SIMD_RANGE,
                            0,
                            "{what}: libjpeg {r:?} {:?}, the sync decode says clean",
                            theirs.warning
                        );
                    }
                }
                if clean {
                    seen.checked += 1;
                } else {
                    seen.flagged += 1;
                }
                continue;
            }
            Err(e) => e.0,
        };
        *seen.skipped.entry(why).or_default() += 1;
    }
    seen
}

#[test]
fn bundled_jpegs_decode_as_libjpeg_reads_them() {
    let seen = check_folder(&common::data_dir(), &[32, 64, SUBSEQUENCE_BITS]);
    eprintln!("tests/data: {seen:?}");
    assert!(seen.checked >= 15, "{} checked", seen.checked);
}

#[test]
fn corpus_jpegs_decode_as_libjpeg_reads_them() {
    let Some(corpus) = common::corpus_or_skip() else {
        return;
    };
    let dir = corpus.join("jpeg");
    let seen = check_folder(&dir, &[256, SUBSEQUENCE_BITS]);
    eprintln!("corpus: {seen:?}");
    if dir.is_dir() {
        assert!(seen.checked >= 50, "{} checked", seen.checked);
    }
}

/// The per-chunk passes on `chunk` as the driver runs them (rounds until one changed no
/// exit): the status and the coefficient words.
fn chunk_passes(chunk: &[u32]) -> (u32, Vec<u32>) {
    let subs = chunk[1] as usize;
    let mut a = vec![0u32; subs * RECORD_WORDS];
    for s in 0..subs as u32 {
        sync_start(chunk, &mut a, s);
    }
    let mut b = a.clone();
    let mut status = STATUS_NO_SYNC;
    for _ in 0..chunk[12] {
        let mut changed = 0;
        for s in 0..subs as u32 {
            changed |= sync_round(chunk, &a, &mut b, s);
        }
        std::mem::swap(&mut a, &mut b);
        if changed == 0 {
            status = 0;
            break;
        }
    }
    for g in 0..chunk[0] {
        status |= sync_scan(chunk, &mut a, g);
    }
    let mut coefs = vec![0u32; chunk[10] as usize];
    for s in 0..subs as u32 {
        status |= sync_write(chunk, &a, &mut coefs, s);
    }
    (status, coefs)
}

/// The batched passes (one thread numbering over every sample, a fixed number of rounds,
/// nothing read between them) give each sample of a batch the status and coefficient
/// words the per-chunk passes give it alone; a region narrows the writes to its blocks,
/// libjpeg's, stored row by row; rounds too few for a sample flag it.
#[test]
fn a_batch_decodes_each_sample_as_the_per_chunk_passes_do() {
    let seed = common::fresh_seed("sync batches");
    let mut rng = TestRng(seed);
    for trial in 0..4 {
        let mut chunks = Vec::new();
        let mut expected = Vec::new();
        let rounds = if trial == 3 { 1 } else { 48 };
        for case in 0..6 {
            let (jpeg, what) = random_case(&mut rng, case);
            let what = format!("seed {seed} trial {trial} case {case}: {what}");
            let theirs = libjpeg(&jpeg, &what);
            let scan = RestartScan::parse_sync(&jpeg).expect("parse_sync");
            let bits = [32, 64, 256, SUBSEQUENCE_BITS][rng.below(4) as usize];
            let mut chunk = Vec::new();
            pack_sync(&scan, &jpeg, bits, rounds, &mut chunk).expect("pack");
            // Every other sample writes a random region of each component only.
            let regions: Vec<[u32; 5]> = if case % 2 == 1 {
                let mut at = 0;
                theirs
                    .components
                    .iter()
                    .map(|c| {
                        let bx0 = rng.below(u64::from(c.width_in_blocks)) as u32;
                        let by0 = rng.below(u64::from(c.height_in_blocks)) as u32;
                        let bw = 1 + rng.below(u64::from(c.width_in_blocks - bx0)) as u32;
                        let bh = 1 + rng.below(u64::from(c.height_in_blocks - by0)) as u32;
                        let r = [at, bx0, by0, bw, bh];
                        at += 32 * bw * bh;
                        r
                    })
                    .collect()
            } else {
                Vec::new()
            };
            if !regions.is_empty() {
                set_sync_regions(&mut chunk, &regions).expect("regions");
            }
            let (status, coefs) = chunk_passes(&chunk);
            expected.push((status, coefs, regions, theirs, what));
            chunks.push(chunk);
        }
        let refs: Vec<&[u32]> = chunks.iter().map(|c| c.as_slice()).collect();
        let (blob, p, [rec_words, coef_words, status_words]) = pack_batch(&refs, rounds + 1);
        let mut rec = vec![0xDEAD_BEEF; rec_words];
        let mut coefs = vec![0u32; coef_words];
        // Status words over garbage: the start pass zeroes each sample's.
        let mut status = vec![0x5A5A_5A5A; status_words];
        decode_batch(&blob, &p, &mut rec, &mut coefs, &mut status);
        for (i, (st, words, regions, theirs, what)) in expected.iter().enumerate() {
            let t = BATCH_WORDS * i;
            let (cf, sw) = (blob[t + 4] as usize, blob[t + 5] as usize);
            assert_eq!(status[sw], *st, "{what}: status");
            let n = chunks[i][10] as usize;
            assert_eq!(&coefs[cf..cf + n], &words[..], "{what}: coefficient words");
            if trial == 3 || st & !STATUS_SIMD_RANGE != 0 {
                continue;
            }
            // The region's blocks are libjpeg's, row by row.
            for (ci, &[at, bx0, by0, bw, bh]) in regions.iter().enumerate() {
                let c = &theirs.components[ci];
                for y in 0..bh {
                    for x in 0..bw {
                        let block = &c.blocks[((by0 + y) * c.width_in_blocks + bx0 + x) as usize];
                        let w = cf + (at + 32 * (y * bw + x)) as usize;
                        for (z, &v) in block.iter().enumerate() {
                            let got = (coefs[w + z / 2] >> (16 * (z % 2))) as u16 as i16;
                            assert_eq!(
                                got, v,
                                "{what}: component {ci} block ({x}, {y}) of its region"
                            );
                        }
                    }
                }
            }
        }
        if trial == 3 {
            assert!(
                expected.iter().any(|e| e.0 & STATUS_NO_SYNC != 0),
                "seed {seed}: one round synchronised every sample"
            );
        }
    }
}

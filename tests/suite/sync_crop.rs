//! The synchronising Huffman decode's write limit (`sync::set_sync_limit`, set by
//! `pack_sync_window` for a crop of a file whose verdict is known): a crop's blocks are
//! those of the whole decode and libjpeg's, the subsequences wholly below the crop's last
//! MCU are skipped (counted by `run_sync_chunk`), and damage below a crop is only judged
//! where the file is decoded whole (the device path's first crop of a file), which flags it.

use crate::common::{self, restart_jpeg, TestRng, RESTART_SAMPLINGS};
use stoker::decode::jpeg::coeffs::{CoeffStatus, Coefficients};
use stoker::decode::jpeg::huffman::sync::{
    pack_sync_window, run_sync_chunk, SyncRun, MAX_SYNC_ROUNDS,
};
use stoker::decode::jpeg::huffman::{PackedEntropy, RestartScan, STATUS_SIMD_RANGE};
use stoker::decode::jpeg::read_coefficients;

/// A tall random JPEG without restart markers (every sampling, by `case`), labelled.
fn tall_jpeg(rng: &mut TestRng, case: usize) -> (Vec<u8>, String) {
    let (samp, gray) = RESTART_SAMPLINGS[case % RESTART_SAMPLINGS.len()];
    let (w, h) = (8 + rng.below(120) as u32, 300 + rng.below(500) as u32);
    let jpeg = restart_jpeg(rng, w, h, samp, gray, 0, 0);
    (jpeg, format!("case {case}: {w}x{h} {samp:?} gray {gray}"))
}

/// `jpeg` packed for the device's sync decode at `scale` and `window`, decoding every
/// block (`all`) or only up to the window's last MCU; the packing and the passes' run.
fn run(jpeg: &[u8], scale: u32, window: [u32; 4], all: bool) -> (PackedEntropy, SyncRun) {
    let scan = RestartScan::parse_sync(jpeg).expect("parse_sync");
    let mut p = PackedEntropy::default();
    pack_sync_window(&scan, jpeg, scale, window, MAX_SYNC_ROUNDS, all, &mut p).expect("pack");
    let at = p.sync.expect("a sync chunk") as usize;
    let r = run_sync_chunk(&p.packed.data[at..]);
    (p, r)
}

/// A random window `[x0, y0, x1, y1)` of a `w x h` image whose rows lie in its top
/// `top` rows.
fn window_in_top(rng: &mut TestRng, (w, h): (u32, u32), top: u32) -> [u32; 4] {
    let top = top.clamp(1, h);
    let x0 = rng.below(u64::from(w)) as u32;
    let y0 = rng.below(u64::from(top)) as u32;
    let x1 = x0 + 1 + rng.below(u64::from(w - x0)) as u32;
    let y1 = y0 + 1 + rng.below(u64::from(top - y0)) as u32;
    [x0, y0, x1, y1]
}

/// The blocks of the window's regions in `r`'s coefficients equal libjpeg's.
fn assert_libjpeg(p: &PackedEntropy, r: &SyncRun, theirs: &Coefficients, what: &str) {
    for (ci, (d, c)) in p
        .packed
        .components
        .iter()
        .zip(&theirs.components)
        .enumerate()
    {
        for by in d.by0..d.by0 + d.bh {
            for bx in d.bx0..d.bx0 + d.bw {
                let at =
                    d.coef_offset as usize + 32 * ((by - d.by0) * d.bw + (bx - d.bx0)) as usize;
                let block = &c.blocks[(by * c.width_in_blocks + bx) as usize];
                for (z, &v) in block.iter().enumerate() {
                    let got = (r.coefs[at + z / 2] >> (16 * (z % 2))) as u16 as i16;
                    assert_eq!(
                        got, v,
                        "{what}: component {ci} block ({bx}, {by}) coefficient {z}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_crop_decodes_its_blocks_as_the_whole_decode_and_skips_the_subsequences_below_it() {
    let seed = common::fresh_seed("sync crop");
    let mut rng = TestRng(seed);
    for case in 0..12 {
        let (jpeg, what) = tall_jpeg(&mut rng, case);
        let what = format!("seed {seed}: {what}");
        let mut theirs = Coefficients::default();
        let read = read_coefficients(&jpeg, true, &mut theirs);
        assert!(
            matches!(read, Ok(CoeffStatus::Ready | CoeffStatus::CpuOnly(_))),
            "{what}"
        );
        let scan = RestartScan::parse_sync(&jpeg).expect("parse_sync");
        let scale = [1u32, 1, 2, 4, 8][rng.below(5) as usize];
        let size = scan.header.scaled_size(scale);
        // A window in the top quarter of the rows, and one anywhere.
        for (k, top) in [size.1 / 4, size.1].into_iter().enumerate() {
            let window = window_in_top(&mut rng, size, top);
            let what = format!("{what}, 1/{scale} {window:?}");
            let (whole_p, whole) = run(&jpeg, scale, window, true);
            let (crop_p, crop) = run(&jpeg, scale, window, false);
            assert!(whole_p.whole, "{what}: all is whole");
            assert_eq!(whole.skipped, 0, "{what}: nothing skipped when whole");
            // Every block of the window is the whole decode's, bit for bit, and libjpeg's.
            assert_eq!(crop.coefs, whole.coefs, "{what}: the crop's blocks");
            assert_libjpeg(&crop_p, &crop, &theirs, &what);
            assert_eq!(crop.status & !STATUS_SIMD_RANGE, 0, "{what}");
            assert_eq!(crop.written + crop.skipped, whole.written, "{what}");
            if crop_p.whole {
                assert_eq!(crop.skipped, 0, "{what}: whole, yet skipped");
            }
            eprintln!(
                "{what}: {} of {} subsequences skipped",
                crop.skipped, whole.written
            );
            if k == 0 {
                // A crop in the top quarter of a tall image leaves most of it unwritten.
                assert!(crop.skipped > 0, "{what}: nothing skipped");
                assert!(
                    !crop_p.whole,
                    "{what}: a crop above the last row is not whole"
                );
            }
        }
        // The whole image, not limited: whole, nothing skipped.
        let (p, r) = run(&jpeg, scale, [0, 0, size.0, size.1], false);
        assert!(p.whole && r.skipped == 0, "{what}: the whole window");
    }
}

#[test]
fn damage_below_a_crop_is_flagged_by_the_whole_decode_the_first_crop_runs() {
    // A file damaged in its bottom third (until the oracle sees it: a flipped bit may
    // leave a scan that still decodes): the packing of a file not yet verified (`all`, as
    // the device path packs a file's first crop) flags it whatever the crop, as the CPU
    // path's whole-file verdict reports it; the limited packing, for a file already known
    // clean, skips what lies below the crop and does not judge it.
    let seed = common::fresh_seed("sync crop damage");
    let mut rng = TestRng(seed);
    let mut unjudged = 0;
    for case in 0..8 {
        let (clean, what) = tall_jpeg(&mut rng, case);
        let what = format!("seed {seed}: {what}");
        let scan = RestartScan::parse_sync(&clean).expect("parse_sync");
        let size = scan.header.scaled_size(1);
        let window = window_in_top(&mut rng, size, size.1 / 8);
        let mut jpeg = clean.clone();
        let flagged = (0..64).any(|_| {
            jpeg.clone_from(&clean);
            common::flip_in_bottom_third(&mut jpeg, &mut rng);
            RestartScan::parse_sync(&jpeg).is_ok()
                && run(&jpeg, 1, window, true).1.status & !STATUS_SIMD_RANGE != 0
        });
        assert!(flagged, "{what}: no damage the oracle flags in 64 tries");
        let (_, crop) = run(&jpeg, 1, window, false);
        unjudged += u32::from(crop.status & !STATUS_SIMD_RANGE == 0 && crop.skipped > 0);
    }
    // Most crops of the top eighth end before the damage in the bottom third.
    assert!(
        unjudged > 0,
        "seed {seed}: every limited decode judged the damage"
    );
}

/// A random-resized-crop window of a `w x h` image (8% to all of its area, aspect 3:4
/// to 4:3, as `Augment::random_resized_crop` draws them; the whole image when none fits).
fn random_resized_window(rng: &mut TestRng, (w, h): (u32, u32)) -> [u32; 4] {
    let area = f64::from(w) * f64::from(h);
    for _ in 0..10 {
        let a = area * (0.08 + 0.92 * rng.below(1 << 20) as f64 / f64::from(1 << 20));
        let ratio = (0.75f64.ln()
            + (4.0f64 / 3.0 / 0.75).ln() * rng.below(1 << 20) as f64 / f64::from(1 << 20))
        .exp();
        let (cw, ch) = (
            (a * ratio).sqrt().round() as u32,
            (a / ratio).sqrt().round() as u32,
        );
        if (1..=w).contains(&cw) && (1..=h).contains(&ch) {
            let x0 = rng.below(u64::from(w - cw + 1)) as u32;
            let y0 = rng.below(u64::from(h - ch + 1)) as u32;
            return [x0, y0, x0 + cw, y0 + ch];
        }
    }
    [0, 0, w, h]
}

#[test]
fn crops_of_the_corpus_jpegs_are_the_whole_decode_and_skip_what_lies_below_them() {
    // The bundled and corpus baseline JPEGs without restart markers, three random
    // resized crops each: the limited decode's blocks are the whole decode's; the share of
    // write-pass subsequences skipped is printed (the work a crop saves in that pass).
    let seed = common::fresh_seed("sync crops of the corpus");
    let mut rng = TestRng(seed);
    let mut files = Vec::new();
    common::files_below(&common::data_dir(), &mut files);
    if let Some(corpus) = common::corpus_or_skip() {
        common::files_below(&corpus, &mut files);
    }
    let (mut checked, mut written, mut skipped) = (0u32, 0u64, 0u64);
    for f in &files {
        let Ok(bytes) = std::fs::read(f) else {
            continue;
        };
        let small = stoker::decode::peek_info(&bytes)
            .is_ok_and(|i| u64::from(i.width) * u64::from(i.height) <= 1 << 24);
        if !small || RestartScan::parse(&bytes).is_ok() {
            continue;
        }
        let Ok(scan) = RestartScan::parse_sync(&bytes) else {
            continue;
        };
        let size = scan.header.scaled_size(1);
        for _ in 0..3 {
            let window = random_resized_window(&mut rng, size);
            let what = format!("seed {seed}: {} {window:?}", f.display());
            let (_, whole) = run(&bytes, 1, window, true);
            if whole.status & !STATUS_SIMD_RANGE != 0 {
                break;
            }
            let (_, crop) = run(&bytes, 1, window, false);
            assert_eq!(crop.coefs, whole.coefs, "{what}: the crop's blocks");
            assert_eq!(crop.status & !STATUS_SIMD_RANGE, 0, "{what}");
            written += u64::from(crop.written);
            skipped += u64::from(crop.skipped);
            checked += 1;
        }
    }
    eprintln!(
        "seed {seed}: {checked} crops: {skipped} of {} write-pass subsequences skipped ({:.1}%)",
        written + skipped,
        100.0 * skipped as f64 / (written + skipped).max(1) as f64
    );
    assert!(
        checked >= 30 && skipped > 0,
        "{checked} crops, {skipped} skipped"
    );
}

//! The self-synchronising Huffman decode's write limit on the device (`SH_LIMIT`, set by
//! `pack_sync_window` for a crop of a file whose verdict is known): fresh random tall
//! JPEGs without restart markers, each packed for a random window in its top rows with
//! the limit and without it (every block decoded), all in one batch: every pass equals
//! its batched oracle word for word (`sync_huffman::check_chunks`), each sample's status
//! and skipped subsequences are the per-chunk driver's (`run_sync_chunk`), the limited
//! decode skips subsequences, and the window's blocks equal the unlimited decode's.

use stoker::backend::device::Kernel;
use stoker::decode::jpeg::huffman::sync::{pack_sync_window, run_sync_chunk};
use stoker::decode::jpeg::huffman::{PackedEntropy, RestartScan};

use super::sync_huffman::{check_chunks, ROUNDS};
use super::Executor;
use crate::common::{self, restart_jpeg, TestRng, RESTART_SAMPLINGS};

/// Random tall JPEGs, each with a window in its top third packed with the write limit
/// and without it.
pub fn sync_huffman_matches_the_oracle_on_cropped_jpegs(e: &dyn Executor) {
    if !e.runs(Kernel::SyncStart) {
        eprintln!("{}: no sync_huffman kernels", e.name());
        return;
    }
    let seed = common::fresh_seed("sync crop on the device");
    let mut rng = TestRng(seed);
    let (mut chunks, mut labels, mut windows) = (Vec::new(), Vec::new(), Vec::new());
    for case in 0..6 {
        let (samp, gray) = RESTART_SAMPLINGS[(case + seed as usize) % RESTART_SAMPLINGS.len()];
        let (w, h) = (8 + rng.below(90) as u32, 160 + rng.below(300) as u32);
        let jpeg = restart_jpeg(&mut rng, w, h, samp, gray, 0, 0);
        let scan = RestartScan::parse_sync(&jpeg).expect("parse_sync");
        let scale = [1u32, 2, 4][rng.below(3) as usize];
        let (sw, sh) = scan.header.scaled_size(scale);
        let top = (sh / 3).max(1);
        let (x0, y0) = (
            rng.below(u64::from(sw)) as u32,
            rng.below(u64::from(top)) as u32,
        );
        let x1 = x0 + 1 + rng.below(u64::from(sw - x0)) as u32;
        let y1 = y0 + 1 + rng.below(u64::from(top - y0)) as u32;
        let window = [x0, y0, x1, y1];
        for all in [false, true] {
            let mut p = PackedEntropy::default();
            pack_sync_window(&scan, &jpeg, scale, window, ROUNDS, all, &mut p).expect("pack");
            let at = p.sync.expect("a sync chunk") as usize;
            chunks.push(p.packed.data[at..].to_vec());
            labels.push(format!(
                "seed {seed}: case {case}: {w}x{h} {samp:?} gray {gray}, 1/{scale} {window:?}, all {all}"
            ));
            windows.push(p.packed.components.clone());
        }
    }
    let outs = check_chunks(e, chunks, ROUNDS, &format!("seed {seed}: cropped batch"));
    let mut skipped = 0;
    for (pair, (labels, comps)) in outs.chunks(2).zip(labels.chunks(2).zip(windows.chunks(2))) {
        let (crop, whole) = (&pair[0], &pair[1]);
        for (o, what) in pair.iter().zip(labels) {
            let run = run_sync_chunk(&o.chunk);
            assert_eq!(o.status, run.status, "{what}: the driver's status");
            assert_eq!(o.skipped, run.skipped, "{what}: the driver's skips");
            eprintln!(
                "{what}: {} of {} subsequences skipped",
                o.skipped, o.chunk[1]
            );
        }
        assert_eq!(whole.skipped, 0, "{}: skipped without a limit", labels[1]);
        skipped += crop.skipped;
        // The window's blocks (its regions, where the IDCT reads them) are the
        // unlimited decode's.
        for (ci, d) in comps[0].iter().enumerate() {
            let (a, n) = (d.coef_offset as usize, 32 * (d.bw * d.bh) as usize);
            assert_eq!(
                crop.coefs[a..a + n],
                whole.coefs[a..a + n],
                "{}: component {ci}'s region",
                labels[0]
            );
        }
    }
    assert!(skipped > 0, "seed {seed}: no subsequence skipped");
}

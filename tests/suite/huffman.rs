//! The device entropy path's host half and scalar oracle (`decode::jpeg::huffman`) against
//! libjpeg's `jpeg_read_coefficients`: JPEGs with restart markers decode to the same
//! coefficients, files without them (or with anything the path does not take) are
//! refused with a reason, and damaged intervals are flagged, never decoded silently.

use crate::common;

use crate::common::{restart_jpeg, TestRng};
use stoker::decode::jpeg::coeffs::{CoeffStatus, Coefficients};
use stoker::decode::jpeg::huffman::{decode_coefficients, RestartScan};
use stoker::decode::jpeg::read_coefficients;

use crate::common::RESTART_SAMPLINGS as SAMPLINGS;

fn assert_same(a: &Coefficients, b: &Coefficients, what: &str) {
    assert_eq!(
        (a.width, a.height, a.color, a.max_h, a.max_v),
        (b.width, b.height, b.color, b.max_h, b.max_v),
        "{what}: frame"
    );
    assert_eq!(a.adobe_inverted, b.adobe_inverted, "{what}: adobe");
    assert_eq!(a.components.len(), b.components.len(), "{what}: components");
    for (ci, (x, y)) in a.components.iter().zip(&b.components).enumerate() {
        assert_eq!(
            (x.h_samp, x.v_samp, x.width_in_blocks, x.height_in_blocks),
            (y.h_samp, y.v_samp, y.width_in_blocks, y.height_in_blocks),
            "{what}: component {ci}"
        );
        assert_eq!(x.quant, y.quant, "{what}: component {ci} quantisation");
        if let Some(at) = x.blocks.iter().zip(&y.blocks).position(|(p, q)| p != q) {
            panic!(
                "{what}: component {ci} block {at} differs:\n{:?}\n{:?}",
                x.blocks[at], y.blocks[at]
            );
        }
        assert_eq!(
            x.blocks.len(),
            y.blocks.len(),
            "{what}: component {ci} blocks"
        );
    }
}

/// Runs `body(case, rng, sampling, gray)` for `n` cases, through the samplings of
/// `SAMPLINGS` in turn, all drawing from one generator seeded with `seed`.
fn for_cases(seed: u64, n: usize, mut body: impl FnMut(usize, &mut TestRng, (i32, i32), bool)) {
    let mut rng = TestRng(seed);
    for case in 0..n {
        let (samp, gray) = SAMPLINGS[case % SAMPLINGS.len()];
        body(case, &mut rng, samp, gray);
    }
}

#[test]
fn random_jpegs_with_restarts_decode_as_libjpeg_reads_them() {
    let (mut ours, mut theirs) = (Coefficients::default(), Coefficients::default());
    for_cases(0x005e_ed0f_4e57, 60, |case, rng, samp, gray| {
        let (w, h) = (1 + rng.below(300) as u32, 1 + rng.below(200) as u32);
        let (mcus, rows) = if rng.below(2) == 0 {
            (1 + rng.below(40) as i32, 0)
        } else {
            (0, 1 + rng.below(3) as i32)
        };
        let jpeg = restart_jpeg(rng, w, h, samp, gray, mcus as u32, rows);
        let what = format!(
            "case {case}: {w}x{h} sampling {samp:?} gray {gray}, restart {mcus} MCUs / {rows} rows"
        );
        let scan = RestartScan::parse(&jpeg).unwrap_or_else(|e| panic!("{what}: {e}"));
        let status = decode_coefficients(&scan, &jpeg, &mut ours).expect("decode");
        assert_eq!(status, 0, "{what}: status");
        assert_eq!(
            read_coefficients(&jpeg, true, &mut theirs).expect("libjpeg"),
            CoeffStatus::Ready,
            "{what}"
        );
        assert_same(&ours, &theirs, &what);
    });
}

#[test]
fn files_without_restart_markers_take_the_host_path() {
    let mut rng = TestRng(7);
    let jpeg = restart_jpeg(&mut rng, 64, 48, (2, 2), false, 0, 0);
    let err = RestartScan::parse(&jpeg).expect_err("no restarts");
    assert!(err.0.contains("restart"), "{err}");
}

#[test]
fn damaged_intervals_are_flagged_or_decode_as_libjpeg_does() {
    // Whatever a flipped bit does, a clean status means libjpeg reads the same
    // coefficients without a warning.
    let (mut ours, mut theirs) = (Coefficients::default(), Coefficients::default());
    let (mut flagged, mut clean, mut refused) = (0, 0, 0);
    for_cases(0xdead_beef, 200, |case, rng, samp, gray| {
        let (w, h, mcus) = (
            40 + rng.below(100) as u32,
            30 + rng.below(80) as u32,
            1 + rng.below(8) as i32,
        );
        let src = restart_jpeg(rng, w, h, samp, gray, mcus as u32, 0);
        let bad = common::mutant(&src, rng);
        let Ok(scan) = RestartScan::parse(&bad) else {
            refused += 1;
            return;
        };
        let status = decode_coefficients(&scan, &bad, &mut ours).expect("decode");
        if status != 0 {
            flagged += 1;
            return;
        }
        clean += 1;
        let r = read_coefficients(&bad, true, &mut theirs);
        assert!(
            matches!(r, Ok(CoeffStatus::Ready)),
            "case {case}: clean on the device, {r:?} for libjpeg"
        );
        assert!(
            theirs.warning.is_none(),
            "case {case}: libjpeg warns {:?}",
            theirs.warning
        );
        assert_same(&ours, &theirs, &format!("mutant {case}"));
    });
    eprintln!("mutants: {flagged} flagged, {clean} clean, {refused} left to the host path");
    assert!(flagged > 50, "{flagged} flagged");
}

#[test]
fn crops_of_restart_jpegs_skip_the_rows_above_with_the_same_pixels() {
    // The CPU decoder decodes a crop of a restart JPEG from a spliced file of the MCU rows
    // around it: every pixel of the window is the whole decode's.
    use stoker::decode::{cpu, DecodeOptions, Image8};
    let (mut whole, mut crop) = (Image8::default(), Image8::default());
    for_cases(0x00c0_ffee, 80, |case, rng, samp, gray| {
        let (w, h) = (16 + rng.below(300) as u32, 40 + rng.below(400) as u32);
        let (mcus, rows) = match case % 3 {
            0 => (0, 1 + rng.below(3) as i32),
            1 => (1 + rng.below(6) as u32, 0),
            _ => (0, 1),
        };
        let jpeg = restart_jpeg(rng, w, h, samp, gray, mcus, rows);
        let scale = [1, 2, 4, 8][rng.below(4) as usize];
        let full = (w.div_ceil(scale), h.div_ceil(scale));
        let y0 = rng.below(u64::from(full.1)) as u32;
        let y1 = y0 + 1 + rng.below(u64::from(full.1 - y0)) as u32;
        let x0 = rng.below(u64::from(full.0)) as u32;
        let x1 = x0 + 1 + rng.below(u64::from(full.0 - x0)) as u32;
        let opts = DecodeOptions {
            scale,
            ..DecodeOptions::default()
        };
        cpu::decode_image(&jpeg, &opts, &mut whole).expect("whole");
        let windowed = DecodeOptions {
            window: Some([x0, y0, x1, y1]),
            ..opts
        };
        cpu::decode_image(&jpeg, &windowed, &mut crop).expect("crop");
        assert_eq!(crop.full, whole.full, "case {case}");
        let (ox, oy) = crop.origin;
        assert!(
            ox <= x0 && oy <= y0 && ox + crop.width >= x1 && oy + crop.height >= y1,
            "case {case}: window not covered"
        );
        for y in y0..y1 {
            for x in x0..x1 {
                let a = ((y * whole.width + x) * 3) as usize;
                let b = (((y - oy) * crop.width + (x - ox)) * 3) as usize;
                assert_eq!(
                    whole.data[a..a + 3],
                    crop.data[b..b + 3],
                    "case {case}: {w}x{h} {samp:?} gray {gray}, restart {mcus}/{rows}, scale {scale}, window {:?}, pixel ({x}, {y})",
                    [x0, y0, x1, y1]
                );
            }
        }
    });
}

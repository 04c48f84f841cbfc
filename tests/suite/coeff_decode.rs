//! The scalar oracle of the hybrid JPEG path (host entropy decoding, then the IDCT,
//! upsampling and colour conversion of `decode::jpeg::{idct, color}`) against the CPU
//! decoder (libjpeg-turbo) on every test JPEG, at IDCT scales 1/1, 1/2, 1/4, 1/8, whole
//! images and random windows: within +-2 per channel (designed to be exact).

use crate::checks;
use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use stoker::decode::jpeg::coeffs::{CoeffStatus, Coefficients};
use stoker::decode::jpeg::color::decode_coefficients;
use stoker::decode::jpeg::read_coefficients;
use stoker::decode::{check_limits, cpu, peek_info, DecodeOptions, Format, Image8, Limits};

/// Largest accepted per-channel difference from the CPU decode.
const TOLERANCE: u8 = checks::ORACLE_TOLERANCE;

/// What a comparison found: the largest channel difference on the overlap, and whether
/// every channel was equal.
#[derive(Default)]
struct Tally {
    cases: usize,
    exact: usize,
    max: u8,
    channels: u64,
    differing: u64,
}

/// The windows tried at one scale: the whole image and three random ones.
pub fn windows(rng: &mut common::TestRng, full: (u32, u32)) -> Vec<Option<[u32; 4]>> {
    let mut out = vec![None];
    for _ in 0..3 {
        let x0 = rng.below(u64::from(full.0)) as u32;
        let y0 = rng.below(u64::from(full.1)) as u32;
        let x1 = x0 + 1 + rng.below(u64::from(full.0 - x0)) as u32;
        let y1 = y0 + 1 + rng.below(u64::from(full.1 - y0)) as u32;
        out.push(Some([x0, y0, x1, y1]));
    }
    out
}

fn name(p: &Path) -> String {
    let s = p.to_string_lossy();
    s.rsplit_once("/tests/")
        .or_else(|| s.rsplit_once("/corpus/"))
        .map(|(_, r)| r.to_string())
        .unwrap_or_else(|| s.to_string())
}

#[test]
fn oracle_matches_the_cpu_decoder_at_every_scale() {
    let files = common::decode_test_jpegs();
    assert!(files.len() >= 20, "only {} test JPEGs found", files.len());
    let mut tallies: BTreeMap<u32, Tally> = BTreeMap::new();
    let (mut cpu_only, mut unsupported, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    let mut failures = Vec::new();
    let mut coeffs = Coefficients::default();
    let mut rng = common::TestRng(0x5EED);
    let mut ready = 0;
    for path in &files {
        let file = name(path);
        let bytes = std::fs::read(path).expect("read");
        let Ok(info) = peek_info(&bytes) else {
            refused.push(format!("{file}: headers"));
            continue;
        };
        if info.format != Format::Jpeg || check_limits(&info, &Limits::default()).is_err() {
            refused.push(format!("{file}: limits"));
            continue;
        }
        match read_coefficients(&bytes, false, &mut coeffs) {
            Ok(CoeffStatus::Ready) => {}
            Ok(CoeffStatus::CpuOnly(why)) => {
                cpu_only.push(format!("{file}: {why}"));
                continue;
            }
            Err(stoker::decode::DecodeError::Unsupported(why)) => {
                unsupported.push(format!("{file}: {why}"));
                continue;
            }
            Err(e) => {
                // The CPU decoder must refuse it too.
                let r = cpu::decode_image(
                    &bytes,
                    &DecodeOptions {
                        strict: false,
                        orientation: false,
                        ..DecodeOptions::default()
                    },
                    &mut Image8::default(),
                );
                if r.is_ok() {
                    failures.push(format!(
                        "{file}: coefficients failed ({e}) but the CPU decodes it"
                    ));
                }
                refused.push(format!("{file}: {e}"));
                continue;
            }
        }
        ready += 1;
        for scale in [1u32, 2, 4, 8] {
            let full = coeffs.scaled_size(scale);
            for window in windows(&mut rng, full) {
                let opts = DecodeOptions {
                    strict: false,
                    orientation: false,
                    scale,
                    window,
                    ..DecodeOptions::default()
                };
                let mut cpu_img = Image8::default();
                if let Err(e) = cpu::decode_image(&bytes, &opts, &mut cpu_img) {
                    failures.push(format!(
                        "{file} 1/{scale} {window:?}: CPU decode failed: {e}"
                    ));
                    continue;
                }
                let w = window.unwrap_or([0, 0, full.0, full.1]);
                let ours = match decode_coefficients(&coeffs, scale, w) {
                    Ok(img) => img,
                    Err(e) => {
                        failures.push(format!("{file} 1/{scale} {w:?}: oracle failed: {e}"));
                        continue;
                    }
                };
                assert_eq!(cpu_img.full, ours.full, "{file} 1/{scale}: scaled size");
                let (max, n, diff) = checks::overlap_difference(&ours, &cpu_img);
                let t = tallies.entry(scale).or_default();
                t.cases += 1;
                t.exact += usize::from(diff == 0);
                t.max = t.max.max(max);
                t.channels += n;
                t.differing += diff;
                if n == 0 {
                    failures.push(format!(
                        "{file} 1/{scale} {w:?}: no overlap with the CPU decode"
                    ));
                }
                if max > TOLERANCE {
                    failures.push(format!("{file} 1/{scale} {w:?}: max diff {max}"));
                }
            }
        }
    }
    println!("{} files: {ready} through the oracle", files.len());
    for (scale, t) in &tallies {
        println!(
            "scale 1/{scale}: {} cases, {} bit-exact{}, max diff {}, {} of {} channel values differ",
            t.cases,
            t.exact,
            if t.exact == t.cases { " (all exact)" } else { "" },
            t.max,
            t.differing,
            t.channels
        );
    }
    println!("{} CPU-only:", cpu_only.len());
    for l in &cpu_only {
        println!("  {l}");
    }
    println!("{} unsupported:", unsupported.len());
    for l in &unsupported {
        println!("  {l}");
    }
    println!(
        "{} refused (the CPU decoder refuses them too):",
        refused.len()
    );
    for l in &refused {
        println!("  {l}");
    }
    assert!(
        ready
            >= if common::corpus_dir().is_some() {
                50
            } else {
                15
            },
        "only {ready} files went through the oracle"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn coefficients_are_reused_and_strict_mode_refuses_damage() {
    let dir = common::data_dir().join("jpeg");
    let mut coeffs = Coefficients::default();
    let big = std::fs::read(dir.join("go_video-001_q50_411.jpg")).expect("file");
    let small = std::fs::read(dir.join("jd_moz_jpg-gray.jpg")).expect("file");
    assert_eq!(
        read_coefficients(&big, true, &mut coeffs),
        Ok(CoeffStatus::Ready)
    );
    assert_eq!(coeffs.components.len(), 3);
    assert_eq!(
        read_coefficients(&small, true, &mut coeffs),
        Ok(CoeffStatus::Ready)
    );
    assert_eq!(coeffs.components.len(), 1);
    let c = &coeffs.components[0];
    assert_eq!(
        c.blocks.len(),
        (c.width_in_blocks * c.height_in_blocks) as usize
    );
    // Incomplete progressive refinement: libjpeg smooths blocks, so the CPU must decode it.
    let cut = std::fs::read(dir.join("go_video-001_progressive_truncated.jpg")).expect("file");
    for strict in [true, false] {
        assert!(matches!(
            read_coefficients(&cut, strict, &mut coeffs),
            Ok(CoeffStatus::CpuOnly(m)) if m.contains("refinement")
        ));
    }
    // Cut short: an error when strict, CPU-only (libjpeg fills the rest) when lenient.
    let half = &big[..big.len() / 2];
    assert!(read_coefficients(half, true, &mut coeffs).is_err());
    assert!(matches!(
        read_coefficients(half, false, &mut coeffs),
        Ok(CoeffStatus::CpuOnly(m)) if m.contains("corrupt")
    ));
    // Features the CPU decoder does not take are Unsupported here too.
    for f in ["jd_ll_jpeg_lossless_sel2.jpg", "ljt_monkey12.jpg"] {
        let bytes = std::fs::read(dir.join(f)).expect("file");
        assert!(matches!(
            read_coefficients(&bytes, false, &mut coeffs),
            Err(stoker::decode::DecodeError::Unsupported(_))
        ));
    }
    assert!(read_coefficients(b"\xFF\xD8garbage", false, &mut coeffs).is_err());
}

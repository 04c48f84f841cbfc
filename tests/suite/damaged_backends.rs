//! Damaged JPEGs through the whole pipeline on every backend: the same samples delivered
//! and the same reported, in every epoch, and the delivered ones with the same pixels.
//!
//! Fresh mutants each run of the suite's seed: one to three bit flips in the entropy-coded
//! data of JPEGs of every kind the decoders take (baseline 4:2:0, 4:2:2, 4:1:1, 4:4:4,
//! progressive, gray, RGB, CMYK, YCCK, arithmetic-coded), which keep the file's size. A bit
//! flip can make coefficients no encoder writes; libjpeg's C inverse DCT (which the device
//! shaders port) wraps such samples while its SIMD code (which the CPU decoder runs)
//! saturates them, so before the device path checked for them, 5 of 131 delivered mutants
//! here differed by up to 255 levels from the CPU backend's pixels; and a flip that made a
//! false marker below the crop was delivered by the CPU backend's crop-aware lenient decode
//! but refused by the device path, which entropy-decodes whole files.

use crate::checks;
use crate::common;

use std::collections::BTreeMap;

use crate::common::outcomes::folder_epochs;
use crate::common::TestRng;
use stoker::decode::jpeg::coeffs::{CoeffStatus, Coefficients};
use stoker::{Augment, BackendKind, DType};

/// The decode and augment tolerance of `tests/device_pipeline.rs`, in levels.
const LEVELS: u8 = 3;

const SOURCES: &[&str] = &[
    "jpeg/go_video-001_221212.jpg",
    "jpeg/go_video-001_q50_411.jpg",
    "jpeg/go_video-001_q50_444.jpg",
    "jpeg/go_video-001_cmyk.jpg",
    "jpeg/jd_moz_jpg-progressive.jpg",
    "jpeg/jd_moz_jpg-gray.jpg",
    "jpeg/ljt_testorig.jpg",
    "jpeg/ljt_testimgari.jpg",
    "jpeg/jd_rgb.jpg",
    "jpeg/jd_ycck.jpg",
    "lenient/seeding_baseline.jpg",
    "lenient/seeding_progressive.jpg",
];

const MUTANTS_PER_SOURCE: usize = 12;

/// Per epoch: each sample's path and its pixels (`None`: reported).
type Outcomes = Vec<BTreeMap<String, Option<Vec<u8>>>>;

fn run(dir: &std::path::Path, backend: BackendKind, strict: bool, epochs: u64) -> Outcomes {
    let aug = Augment::new()
        .random_resized_crop(64, (0.2, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .dtype(DType::U8);
    let all: Vec<u64> = (0..epochs).collect();
    folder_epochs(dir, (backend, aug, strict, 5), &all)
        .into_iter()
        .map(|e| {
            e.into_iter()
                .map(|(path, o)| (path, o.pixels().map(<[u8]>::to_vec)))
                .collect()
        })
        .collect()
}

/// The mutants, written under `dir/c/`; returns how many the coefficient reader leaves to
/// the CPU for coefficients out of range (the case the device path once got wrong).
fn write_mutants(dir: &std::path::Path, seed: u64) -> usize {
    let mut rng = TestRng(seed);
    let mut beyond = 0;
    let mut c = Coefficients::default();
    for (s, src) in SOURCES.iter().enumerate() {
        let bytes = std::fs::read(common::data_dir().join(src)).expect("source");
        for m in 0..MUTANTS_PER_SOURCE {
            let b = common::mutant(&bytes, &mut rng);
            if let Ok(CoeffStatus::CpuOnly(why)) =
                stoker::decode::jpeg::read_coefficients(&b, false, &mut c)
            {
                beyond += usize::from(why.contains("8-bit encoder"));
            }
            common::write(dir, &format!("c/s{s:02}_m{m:02}.jpg"), &b);
        }
    }
    beyond
}

/// Within one backend: every epoch delivers and reports the same samples.
fn same_in_every_epoch(what: &str, runs: &Outcomes) {
    let delivered = |o: &BTreeMap<String, Option<Vec<u8>>>| -> Vec<String> {
        o.iter()
            .filter(|(_, p)| p.is_some())
            .map(|(n, _)| n.clone())
            .collect()
    };
    for (e, r) in runs.iter().enumerate().skip(1) {
        assert_eq!(delivered(r), delivered(&runs[0]), "{what}: epoch {e}");
    }
}

#[test]
fn damaged_files_are_delivered_alike_with_the_same_pixels_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let beyond = write_mutants(dir.path(), 7);
    assert!(
        beyond >= 2,
        "the mutants should include coefficients out of range ({beyond})"
    );
    let devices: Vec<BackendKind> = common::backends()
        .into_iter()
        .filter(|b| *b != BackendKind::Cpu)
        .collect();
    for strict in [false, true] {
        let cpu = run(dir.path(), BackendKind::Cpu, strict, 3);
        same_in_every_epoch(&format!("cpu, strict {strict}"), &cpu);
        let delivered = cpu[0].values().filter(|p| p.is_some()).count();
        println!("strict {strict}: {delivered} of {} delivered", cpu[0].len());
        assert!(delivered > 0 && delivered < cpu[0].len(), "{delivered}");
        for &backend in &devices {
            let gpu = run(dir.path(), backend, strict, 3);
            for (e, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
                let what = format!("{backend}, strict {strict}, epoch {e}");
                let (mut worst, mut differing) = (0u8, Vec::new());
                for (name, cp) in c {
                    let gp = &g[name];
                    match (cp, gp) {
                        (Some(cp), Some(gp)) => {
                            let w = cp.iter().zip(gp).map(|(a, b)| a.abs_diff(*b)).max();
                            let w = w.unwrap_or(0);
                            worst = worst.max(w);
                            if w > LEVELS {
                                differing.push(format!("{name} by {w}"));
                            }
                        }
                        (None, None) => {}
                        _ => differing.push(format!(
                            "{name} delivered by one backend only (cpu: {})",
                            cp.is_some()
                        )),
                    }
                }
                println!("{what}: worst difference {worst} levels");
                assert!(differing.is_empty(), "{what}: {differing:?}");
            }
        }
    }
}

/// The differential fuzz target's check (`fuzz/checks.rs`, `device_oracle`) on every
/// mutant at every IDCT scale, whole and in windows: the coefficient reader and the
/// scalar oracles of the device stages against the CPU decoder.
#[test]
fn the_device_oracles_agree_with_the_cpu_decoder_on_every_mutant() {
    let mut rng = TestRng(11);
    for src in SOURCES {
        let bytes = std::fs::read(common::data_dir().join(src)).expect("source");
        for _ in 0..MUTANTS_PER_SOURCE {
            let b = common::mutant(&bytes, &mut rng);
            for scale in [1, 2, 4, 8] {
                checks::device_oracle_at(&b, scale, None);
                let (x0, y0) = (rng.below(200) as u32, rng.below(200) as u32);
                let (w, h) = (1 + rng.below(150) as u32, 1 + rng.below(150) as u32);
                checks::device_oracle_at(&b, scale, Some([x0, y0, x0 + w, y0 + h]));
            }
        }
    }
}

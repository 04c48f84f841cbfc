//! The mixing pass (MixUp, CutMix) against its definition, `stoker::augment::mix::apply`:
//! random batches of every element type and layout, odd sizes (slots that start inside a
//! word), boxes drawn as the pipeline draws them.

use stoker::augment::mix::{self, MixKind, Mixing};
use stoker::backend::device::mix::{steps, MixShape};
use stoker::backend::device::Buffer;
use stoker::{DType, Layout};

use super::{garbage, Buffers, Executor};
use crate::common::TestRng;

/// Random finite element bits of `dtype`, `n` elements, as bytes.
fn random_elements(rng: &mut TestRng, dtype: DType, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 4);
    for _ in 0..n {
        match dtype {
            DType::U8 => out.push(rng.below(256) as u8),
            DType::F16 => {
                // Any finite half, subnormals and signed zeros among them.
                let mut h = rng.below(1 << 16) as u16;
                if (h >> 10) & 31 == 31 {
                    h &= !(1 << 14);
                }
                out.extend_from_slice(&h.to_le_bytes());
            }
            DType::F32 => {
                let v = (rng.below(1 << 24) as f32 / (1 << 22) as f32 - 2.0)
                    * [1.0f32, 1e-3, 37.0][rng.below(3) as usize];
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    out
}

/// Elements of `dtype` in `a` and `b` that differ, and whether each differs by at most
/// one unit in the last place.
fn differences(a: &[u8], b: &[u8], dtype: DType) -> (usize, bool) {
    let (mut n, mut within) = (0, true);
    match dtype {
        DType::U8 => {
            n = a.iter().zip(b).filter(|(x, y)| x != y).count();
            within = n == 0;
        }
        DType::F16 | DType::F32 => {
            let size = if dtype == DType::F16 { 2 } else { 4 };
            for (x, y) in a.chunks_exact(size).zip(b.chunks_exact(size)) {
                if x != y {
                    n += 1;
                    let bits =
                        |c: &[u8]| c.iter().rev().fold(0i64, |v, &b| (v << 8) | i64::from(b));
                    within &= (bits(x) - bits(y)).abs() <= 1;
                }
            }
        }
    }
    (n, within)
}

pub fn mixing_matches_its_definition_for_every_dtype_and_layout(e: &dyn Executor) {
    let mut rng = TestRng(0x6d69_7862);
    let limits = e.limits();
    let mut cases = 0;
    for dtype in [DType::U8, DType::F16, DType::F32] {
        for layout in [Layout::Nchw, Layout::Nhwc] {
            for round in 0..6 {
                let (w, h) = (1 + rng.below(13) as u32, 1 + rng.below(9) as u32);
                let len = 1 + rng.below(6) as usize;
                // Both on (a draw picks one), or one of the two; MixUp only on floats.
                let mixing = match (round % 3, dtype) {
                    (_, DType::U8) | (0, _) => Mixing {
                        mixup: None,
                        cutmix: Some(1.0),
                    },
                    (1, _) => Mixing {
                        mixup: Some(0.4),
                        cutmix: None,
                    },
                    _ => Mixing {
                        mixup: Some(0.4),
                        cutmix: Some(1.0),
                    },
                };
                let m = mixing
                    .draw(rng.next_u64(), rng.below(9), rng.below(1000), w, h)
                    .expect("mixing is on");
                let shape = MixShape {
                    dtype,
                    layout,
                    len,
                    width: w,
                    height: h,
                };
                let elements = len * 3 * (w * h) as usize;
                let mut images = random_elements(&mut rng, dtype, elements);
                // Past the batch: bytes of the last word, and a tail no word reaches.
                images.resize(shape.bytes() as usize, 0x5a);
                images.extend_from_slice(&garbage(64));
                let mut want = images.clone();
                mix::apply(&m, &mut want, dtype, layout, len, w as usize, h as usize)
                    .expect("reference");
                let planned = steps(&m, shape, limits.max_binding, limits.per_dim).expect("steps");
                assert_eq!(planned.is_empty(), len < 2);
                let mut buffers = Buffers::default()
                    .with(Buffer::Images, images.clone())
                    .with(Buffer::MixScratch, garbage(shape.bytes().max(4)));
                if !planned.is_empty() {
                    e.run(&planned, &mut buffers);
                }
                let got = buffers.get(Buffer::Images);
                let what = format!("{dtype:?} {layout:?} {w}x{h} x{len} {m:?}");
                let (n, within) = differences(got, &want, dtype);
                if m.kind == MixKind::CutMix || e.exact_arithmetic() {
                    assert_eq!(n, 0, "{}: {what}: {n} elements differ", e.name());
                } else {
                    assert!(
                        within,
                        "{}: {what}: elements off by more than 1 ulp",
                        e.name()
                    );
                }
                if m.kind == MixKind::CutMix && len > 1 && m.lambda < 1.0 {
                    assert_ne!(got, &images[..], "{what}: nothing mixed");
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 36);
}

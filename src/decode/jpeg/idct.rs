//! Scalar oracle of dequantisation and the inverse DCT, an exact integer port of
//! libjpeg-turbo's `jpeg_idct_islow` (`jidctint.c`, 8x8 output) and `jidctred.c`'s reduced
//! IDCTs (4x4, 2x2, 1x1 outputs), with libjpeg's range limiting. `shaders/idct.wgsl` is a
//! line-by-line port of this file.
//!
//! Arithmetic is 32-bit and wrapping, as in the shaders (WGSL has no 64-bit integers).
//! libjpeg computes in `long`; the two agree unless the coefficients are far outside
//! what an 8-bit encoder produces. libjpeg's SIMD IDCT, which the CPU decoder uses, works
//! in 16-bit lanes that saturate, and differs from the C code for such blocks too:
//! [`agrees_with_simd`] finds them, and the coefficient reader leaves their files to the
//! CPU decoder. Quantisation entries are used as
//! the SIMD build's `short` multiplier table holds them: sign-extended from 16 bits.
#![doc(hidden)]

use super::coeffs::{block_words, coef_at, quant_at, PackedJpeg};

pub(crate) const CONST_BITS: u32 = 13;
pub(crate) const PASS1_BITS: u32 = 2;

pub(crate) const FIX_0_298631336: i32 = 2446;
pub(crate) const FIX_0_390180644: i32 = 3196;
pub(crate) const FIX_0_541196100: i32 = 4433;
pub(crate) const FIX_0_765366865: i32 = 6270;
pub(crate) const FIX_0_899976223: i32 = 7373;
pub(crate) const FIX_1_175875602: i32 = 9633;
pub(crate) const FIX_1_501321110: i32 = 12299;
pub(crate) const FIX_1_847759065: i32 = 15137;
pub(crate) const FIX_1_961570560: i32 = 16069;
pub(crate) const FIX_2_053119869: i32 = 16819;
pub(crate) const FIX_2_562915447: i32 = 20995;
pub(crate) const FIX_3_072711026: i32 = 25172;
// jidctred.c
pub(crate) const FIX_0_211164243: i32 = 1730;
pub(crate) const FIX_0_509795579: i32 = 4176;
pub(crate) const FIX_0_601344887: i32 = 4926;
pub(crate) const FIX_0_720959822: i32 = 5906;
pub(crate) const FIX_0_850430095: i32 = 6967;
pub(crate) const FIX_1_061594337: i32 = 8697;
pub(crate) const FIX_1_272758580: i32 = 10426;
pub(crate) const FIX_1_451774981: i32 = 11893;
pub(crate) const FIX_2_172734803: i32 = 17799;
pub(crate) const FIX_3_624509785: i32 = 29692;

/// libjpeg's post-IDCT range limit: `x` is a descaled sample without its +128 level
/// shift; the result is `range_limit[x & RANGE_MASK]` of `jdmaster.c`'s table: clamped to
/// 0-255 for `x` in -512..=511, wrapping modulo 1024 outside that.
pub fn range_limit(x: i32) -> u8 {
    let i = x & 1023;
    if i < 128 {
        (i + 128) as u8
    } else if i < 512 {
        255
    } else if i < 896 {
        0
    } else {
        (i - 896) as u8
    }
}

fn descale(x: i32, n: u32) -> i32 {
    x.wrapping_add(1 << (n - 1)) >> n
}

fn mul(a: i32, b: i32) -> i32 {
    a.wrapping_mul(b)
}

/// `DEQUANTIZE`: the coefficient times the quantiser (as a `short`).
fn deq(block: &[i16; 64], quant: &[u16; 64], i: usize) -> i32 {
    i32::from(block[i]).wrapping_mul(i32::from(quant[i] as i16))
}

/// One block's inverse DCT before the range limit: the pass-1 workspace and the descaled
/// samples (without the +128 level shift), `samples[row * 8 + col]` for the `n x n` output.
struct Passes {
    ws: [i32; 64],
    samples: [i32; 64],
}

impl Passes {
    fn new() -> Passes {
        Passes {
            ws: [0; 64],
            samples: [0; 64],
        }
    }

    /// The `n x n` samples, range-limited, to `out[row * stride + col]`.
    fn write(&self, n: usize, out: &mut [u8], stride: usize) {
        for row in 0..n {
            for (d, &v) in out[row * stride..row * stride + n]
                .iter_mut()
                .zip(&self.samples[row * 8..row * 8 + n])
            {
                *d = range_limit(v);
            }
        }
    }
}

/// `jpeg_idct_islow`'s two passes over an 8x8 block.
fn islow_8x8(block: &[i16; 64], quant: &[u16; 64]) -> Passes {
    let mut p = Passes::new();
    let ws = &mut p.ws;
    for col in 0..8 {
        let q = |r: usize| deq(block, quant, r * 8 + col);
        if (1..8).all(|r| block[r * 8 + col] == 0) {
            let dc = q(0).wrapping_shl(PASS1_BITS);
            for r in 0..8 {
                ws[r * 8 + col] = dc;
            }
            continue;
        }
        let (w0, w1, w2, w3, w4, w5, w6, w7) = (q(0), q(1), q(2), q(3), q(4), q(5), q(6), q(7));
        let out8 = idct8_1d([w0, w1, w2, w3, w4, w5, w6, w7], CONST_BITS - PASS1_BITS);
        for r in 0..8 {
            ws[r * 8 + col] = out8[r];
        }
    }
    for row in 0..8 {
        let w = &p.ws[row * 8..row * 8 + 8];
        let dst = &mut p.samples[row * 8..row * 8 + 8];
        if w[1..].iter().all(|&v| v == 0) {
            dst.fill(descale(w[0], PASS1_BITS + 3));
            continue;
        }
        let o = idct8_1d(
            [w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]],
            CONST_BITS + PASS1_BITS + 3,
        );
        dst.copy_from_slice(&o);
    }
    p
}

/// `jpeg_idct_islow`: an 8x8 block to 8x8 samples at `out[row * stride + col]`.
pub fn idct_8x8(block: &[i16; 64], quant: &[u16; 64], out: &mut [u8], stride: usize) {
    islow_8x8(block, quant).write(8, out, stride);
}

/// One 8-point pass of `jpeg_idct_islow` on dequantised (or pass-1) values `x`, descaled
/// by `shift` bits.
fn idct8_1d(x: [i32; 8], shift: u32) -> [i32; 8] {
    // Even part.
    let (z2, z3) = (x[2], x[6]);
    let z1 = mul(z2.wrapping_add(z3), FIX_0_541196100);
    let tmp2 = z1.wrapping_add(mul(z3, -FIX_1_847759065));
    let tmp3 = z1.wrapping_add(mul(z2, FIX_0_765366865));
    let tmp0 = x[0].wrapping_add(x[4]).wrapping_shl(CONST_BITS);
    let tmp1 = x[0].wrapping_sub(x[4]).wrapping_shl(CONST_BITS);
    let tmp10 = tmp0.wrapping_add(tmp3);
    let tmp13 = tmp0.wrapping_sub(tmp3);
    let tmp11 = tmp1.wrapping_add(tmp2);
    let tmp12 = tmp1.wrapping_sub(tmp2);
    // Odd part.
    let (t0, t1, t2, t3) = (x[7], x[5], x[3], x[1]);
    let z1 = t0.wrapping_add(t3);
    let z2 = t1.wrapping_add(t2);
    let z3 = t0.wrapping_add(t2);
    let z4 = t1.wrapping_add(t3);
    let z5 = mul(z3.wrapping_add(z4), FIX_1_175875602);
    let t0 = mul(t0, FIX_0_298631336);
    let t1 = mul(t1, FIX_2_053119869);
    let t2 = mul(t2, FIX_3_072711026);
    let t3 = mul(t3, FIX_1_501321110);
    let z1 = mul(z1, -FIX_0_899976223);
    let z2 = mul(z2, -FIX_2_562915447);
    let z3 = mul(z3, -FIX_1_961570560).wrapping_add(z5);
    let z4 = mul(z4, -FIX_0_390180644).wrapping_add(z5);
    let t0 = t0.wrapping_add(z1).wrapping_add(z3);
    let t1 = t1.wrapping_add(z2).wrapping_add(z4);
    let t2 = t2.wrapping_add(z2).wrapping_add(z3);
    let t3 = t3.wrapping_add(z1).wrapping_add(z4);
    [
        descale(tmp10.wrapping_add(t3), shift),
        descale(tmp11.wrapping_add(t2), shift),
        descale(tmp12.wrapping_add(t1), shift),
        descale(tmp13.wrapping_add(t0), shift),
        descale(tmp13.wrapping_sub(t0), shift),
        descale(tmp12.wrapping_sub(t1), shift),
        descale(tmp11.wrapping_sub(t2), shift),
        descale(tmp10.wrapping_sub(t3), shift),
    ]
}

/// One 4-point pass of `jpeg_idct_4x4` (inputs 0-3, 5-7 of a column or row; 4 unused).
fn idct4_1d(x: [i32; 8], shift: u32) -> [i32; 4] {
    let tmp0 = x[0].wrapping_shl(CONST_BITS + 1);
    let tmp2 = mul(x[2], FIX_1_847759065).wrapping_add(mul(x[6], -FIX_0_765366865));
    let tmp10 = tmp0.wrapping_add(tmp2);
    let tmp12 = tmp0.wrapping_sub(tmp2);
    let (z1, z2, z3, z4) = (x[7], x[5], x[3], x[1]);
    let t0 = mul(z1, -FIX_0_211164243)
        .wrapping_add(mul(z2, FIX_1_451774981))
        .wrapping_add(mul(z3, -FIX_2_172734803))
        .wrapping_add(mul(z4, FIX_1_061594337));
    let t2 = mul(z1, -FIX_0_509795579)
        .wrapping_add(mul(z2, -FIX_0_601344887))
        .wrapping_add(mul(z3, FIX_0_899976223))
        .wrapping_add(mul(z4, FIX_2_562915447));
    [
        descale(tmp10.wrapping_add(t2), shift),
        descale(tmp12.wrapping_add(t0), shift),
        descale(tmp12.wrapping_sub(t0), shift),
        descale(tmp10.wrapping_sub(t2), shift),
    ]
}

/// `jpeg_idct_4x4`'s two passes.
fn islow_4x4(block: &[i16; 64], quant: &[u16; 64]) -> Passes {
    let mut p = Passes::new();
    let ws = &mut p.ws;
    for col in 0..8 {
        if col == 4 {
            continue;
        }
        let q = |r: usize| deq(block, quant, r * 8 + col);
        if [1, 2, 3, 5, 6, 7].iter().all(|&r| block[r * 8 + col] == 0) {
            let dc = q(0).wrapping_shl(PASS1_BITS);
            for r in 0..4 {
                ws[r * 8 + col] = dc;
            }
            continue;
        }
        let o = idct4_1d(
            [q(0), q(1), q(2), q(3), 0, q(5), q(6), q(7)],
            CONST_BITS - PASS1_BITS + 1,
        );
        for r in 0..4 {
            ws[r * 8 + col] = o[r];
        }
    }
    for row in 0..4 {
        let w = &p.ws[row * 8..row * 8 + 8];
        let dst = &mut p.samples[row * 8..row * 8 + 4];
        if [1, 2, 3, 5, 6, 7].iter().all(|&i| w[i] == 0) {
            dst.fill(descale(w[0], PASS1_BITS + 3));
            continue;
        }
        let o = idct4_1d(
            [w[0], w[1], w[2], w[3], 0, w[5], w[6], w[7]],
            CONST_BITS + PASS1_BITS + 3 + 1,
        );
        dst.copy_from_slice(&o);
    }
    p
}

/// `jpeg_idct_4x4`: an 8x8 block to 4x4 samples.
pub fn idct_4x4(block: &[i16; 64], quant: &[u16; 64], out: &mut [u8], stride: usize) {
    islow_4x4(block, quant).write(4, out, stride);
}

/// One 2-point pass of `jpeg_idct_2x2` (inputs 0, 1, 3, 5, 7).
fn idct2_1d(x: [i32; 8], shift: u32) -> [i32; 2] {
    let tmp10 = x[0].wrapping_shl(CONST_BITS + 2);
    let tmp0 = mul(x[7], -FIX_0_720959822)
        .wrapping_add(mul(x[5], FIX_0_850430095))
        .wrapping_add(mul(x[3], -FIX_1_272758580))
        .wrapping_add(mul(x[1], FIX_3_624509785));
    [
        descale(tmp10.wrapping_add(tmp0), shift),
        descale(tmp10.wrapping_sub(tmp0), shift),
    ]
}

/// `jpeg_idct_2x2`'s two passes.
fn islow_2x2(block: &[i16; 64], quant: &[u16; 64]) -> Passes {
    let mut p = Passes::new();
    let ws = &mut p.ws;
    for col in [0, 1, 3, 5, 7] {
        let q = |r: usize| deq(block, quant, r * 8 + col);
        if [1, 3, 5, 7].iter().all(|&r| block[r * 8 + col] == 0) {
            let dc = q(0).wrapping_shl(PASS1_BITS);
            ws[col] = dc;
            ws[8 + col] = dc;
            continue;
        }
        let o = idct2_1d(
            [q(0), q(1), 0, q(3), 0, q(5), 0, q(7)],
            CONST_BITS - PASS1_BITS + 2,
        );
        ws[col] = o[0];
        ws[8 + col] = o[1];
    }
    for row in 0..2 {
        let w = &p.ws[row * 8..row * 8 + 8];
        let dst = &mut p.samples[row * 8..row * 8 + 2];
        if [1, 3, 5, 7].iter().all(|&i| w[i] == 0) {
            dst.fill(descale(w[0], PASS1_BITS + 3));
            continue;
        }
        let o = idct2_1d(
            [w[0], w[1], 0, w[3], 0, w[5], 0, w[7]],
            CONST_BITS + PASS1_BITS + 3 + 2,
        );
        dst.copy_from_slice(&o);
    }
    p
}

/// `jpeg_idct_2x2`: an 8x8 block to 2x2 samples.
pub fn idct_2x2(block: &[i16; 64], quant: &[u16; 64], out: &mut [u8], stride: usize) {
    islow_2x2(block, quant).write(2, out, stride);
}

/// The sum of the magnitudes of a block's dequantised coefficients at or below which
/// every sample of every reduced and full IDCT lies within -512..=511 and every pass-1
/// value within 16 bits (`tests::the_quick_bound_keeps_every_pass_in_range` derives it
/// from each coefficient's largest weight): most blocks of real photos are far below it.
pub(crate) const QUICK_BOUND: u32 = 2000;

/// Whether libjpeg-turbo's SIMD IDCTs, which the CPU decoder runs (16-bit lanes that
/// saturate), compute the same samples as libjpeg's C code, which this oracle and the
/// shaders port (32-bit, with a range limit that wraps outside -512..=511), for `block` at
/// every scale: its dequantised coefficients and pass-1 values fit in 16 bits and its
/// samples lie within -512..=511. An 8-bit encoder's coefficients always do (a DCT of 8-bit
/// samples is within 1024 and its rounding within half a quantiser step); a block that does
/// not comes from damaged or crafted data, and only the CPU decoder reproduces its pixels.
pub fn agrees_with_simd(block: &[i16; 64], quant: &[u16; 64]) -> bool {
    let mut sum = 0u32;
    for i in 0..64 {
        let d = deq(block, quant, i).unsigned_abs();
        if d > i16::MAX as u32 {
            return false;
        }
        sum += d;
    }
    if sum <= QUICK_BOUND {
        return true;
    }
    [islow_8x8, islow_4x4, islow_2x2].iter().all(|f| {
        let p = f(block, quant);
        p.ws.iter().all(|&v| i16::try_from(v).is_ok())
            && p.samples.iter().all(|v| (-512..=511).contains(v))
    })
}

/// `jpeg_idct_1x1`: the block's DC to one sample.
pub fn idct_1x1(block: &[i16; 64], quant: &[u16; 64], out: &mut [u8], _stride: usize) {
    out[0] = range_limit(descale(deq(block, quant, 0), 3));
}

/// The IDCT libjpeg uses for a component whose DCT output size is `size` (1, 2, 4, 8;
/// anything else is treated as 8), writing `size x size` samples.
pub fn idct_block(size: u32, block: &[i16; 64], quant: &[u16; 64], out: &mut [u8], stride: usize) {
    match size {
        1 => idct_1x1(block, quant, out, stride),
        2 => idct_2x2(block, quant, out, stride),
        4 => idct_4x4(block, quant, out, stride),
        _ => idct_8x8(block, quant, out, stride),
    }
}

/// Runs the IDCT over component `c`'s region of `packed` into `plane` (resized): the
/// plane as the shaders lay it out, `plane_stride * 4` bytes a row, `bh * dct_size` rows,
/// bytes past the region's `bw * dct_size` samples zero. The blocks are in the layout of
/// the component's DCT output size, as [`super::coeffs::pack`] stores them.
pub fn idct_component(packed: &PackedJpeg, c: usize, plane: &mut Vec<u8>) {
    let d = &packed.components[c];
    let size = d.dct_size as usize;
    let stride = d.plane_stride as usize * 4;
    plane.clear();
    plane.resize(stride * d.bh as usize * size, 0);
    let mut quant = [0u16; 64];
    for (i, q) in quant.iter_mut().enumerate() {
        *q = quant_at(&packed.data, d.quant_offset as usize, i);
    }
    let mut block = [0i16; 64];
    let words = block_words(d.dct_size) as usize;
    for by in 0..d.bh as usize {
        for bx in 0..d.bw as usize {
            let at = d.coef_offset as usize + words * (by * d.bw as usize + bx);
            for (i, v) in block.iter_mut().enumerate() {
                *v = coef_at(&packed.data, at, d.dct_size, i);
            }
            let start = by * size * stride + bx * size;
            idct_block(d.dct_size, &block, &quant, &mut plane[start..], stride);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_limit_matches_libjpegs_table() {
        assert_eq!(range_limit(0), 128);
        assert_eq!(range_limit(-128), 0);
        assert_eq!(range_limit(127), 255);
        assert_eq!(range_limit(-129), 0);
        assert_eq!(range_limit(511), 255);
        assert_eq!(range_limit(-512), 0);
        assert_eq!(range_limit(1024), 128);
    }

    /// [`QUICK_BOUND`] from the transforms themselves: each coefficient's largest weight in
    /// a sample and in a pass-1 value, at every IDCT size, times the bound, plus the
    /// descaling's rounding, stays within range. (The passes are linear but for that
    /// rounding, so a block's samples are at most the sum of its coefficients' weights.)
    #[test]
    fn the_quick_bound_keeps_every_pass_in_range() {
        const PROBE: i16 = 4096;
        let quant = [1u16; 64];
        let (mut sample_w, mut ws_w) = (0.0f64, 0.0f64);
        for i in 0..64 {
            for sign in [1, -1] {
                let mut block = [0i16; 64];
                block[i] = PROBE * sign;
                for p in [
                    islow_8x8(&block, &quant),
                    islow_4x4(&block, &quant),
                    islow_2x2(&block, &quant),
                ] {
                    let most = |v: &[i32]| {
                        v.iter()
                            .map(|x| f64::from(x.unsigned_abs()))
                            .fold(0.0, f64::max)
                    };
                    sample_w = sample_w.max(most(&p.samples) / f64::from(PROBE));
                    ws_w = ws_w.max(most(&p.ws) / f64::from(PROBE));
                }
            }
        }
        let b = f64::from(QUICK_BOUND);
        // Rounding: half a level per pass-1 value, which pass 2 sums with weights of at
        // most 11/32, and half a level more at the end: under two levels.
        assert!(b * sample_w + 2.0 <= 511.0, "sample weight {sample_w}");
        assert!(
            b * ws_w + 2.0 <= f64::from(i16::MAX),
            "pass-1 weight {ws_w}"
        );
        // And the check itself: a block at the bound with all its weight in the worst
        // coefficient passes the quick test and the exact one.
        let mut block = [0i16; 64];
        block[0] = QUICK_BOUND as i16;
        assert!(agrees_with_simd(&block, &quant));
    }

    /// Far-out coefficients (a bit flip in the entropy-coded data can make them) are
    /// caught, at-the-limit ones of real photos are not.
    #[test]
    fn only_coefficients_no_encoder_writes_disagree() {
        let mut quant = [1u16; 64];
        let mut block = [0i16; 64];
        block[0] = 1016; // the brightest flat block: 8 * 127
        block[1] = 300;
        block[9] = -200;
        assert!(agrees_with_simd(&block, &quant));
        block[0] = 8000; // 1000 above white: wraps in C, saturates in SIMD
        assert!(!agrees_with_simd(&block, &quant));
        block[0] = 100;
        quant[5] = 255;
        block[5] = 200; // 51000: over 16 bits
        assert!(!agrees_with_simd(&block, &quant));
    }

    #[test]
    fn dc_only_blocks_are_flat_at_every_size() {
        let mut block = [0i16; 64];
        block[0] = 80; // 80 * 2 / 8 = 20 above mid-grey
        let quant = [2u16; 64];
        for size in [1usize, 2, 4, 8] {
            let mut out = vec![0u8; 64];
            idct_block(size as u32, &block, &quant, &mut out, 8);
            for r in 0..size {
                assert!(out[r * 8..r * 8 + size].iter().all(|&v| v == 148), "{size}");
            }
        }
    }

    /// Each IDCT reads only the coefficients the layout of its size keeps
    /// ([`super::super::coeffs::block_slot`]): whatever the others hold, the samples are
    /// the same.
    #[test]
    fn each_idct_reads_only_what_its_layout_keeps() {
        use super::super::coeffs::block_slot;
        let mut quant = [0u16; 64];
        let mut base = [0i16; 64];
        for i in 0..64 {
            quant[i] = 1 + (i as u16 * 7) % 13;
            base[i] = ((i as i16 * 37) % 29) - 14;
        }
        base[0] = 300;
        for size in [1u32, 2, 4, 8] {
            let mut want = vec![0u8; 64];
            idct_block(size, &base, &quant, &mut want, 8);
            for i in (0..64).filter(|&i| block_slot(size, i).is_none()) {
                for v in [i16::MIN, -1000, 1000, i16::MAX] {
                    let mut block = base;
                    block[i] = v;
                    let mut got = vec![0u8; 64];
                    idct_block(size, &block, &quant, &mut got, 8);
                    assert_eq!(got, want, "size {size}, coefficient {i} = {v}");
                }
            }
        }
    }
}

//! The kernels at 256 bits: AVX2 and FMA (pulp's `V3`). The AVX-512 kernels finish their
//! rows' last pixels with these.

use core::arch::x86_64::{__m128i, __m256, __m256i};
use pulp::x86::V3;

use super::{
    interleave_scalar, planes_lut, vertical_scalar, HorizontalRows, Kernels, Normalisation,
    LO_BITS, PICKS, PRECISION_BITS, R255,
};

impl Kernels for V3 {
    #[inline(always)]
    fn vertical(self, rows: &[u8], line: usize, w: &[i32], pairs: &[[i32; 2]], out: &mut [u8]) {
        vertical_v3(self, (rows, line, w, pairs, out), 0);
    }

    #[inline(always)]
    fn planes(
        self,
        rgb: &[u8],
        lut: &[[f32; 256]; 3],
        norm: &Normalisation,
        flip: bool,
        out: [&mut [f32]; 3],
    ) {
        planes_v3(self, (rgb, lut, norm, flip, out), 0);
    }

    #[inline(always)]
    fn horizontal(self, rows: HorizontalRows<'_, '_>) {
        horizontal_v3(self, rows);
    }

    #[inline(always)]
    fn interleave(self, a: &[u8], b: &[u8], out: &mut [[u8; 8]]) {
        interleave_v3(self, a, b, out);
    }
}

#[inline(always)]
fn load32(s: &[u8]) -> __m256i {
    bytemuck::pod_read_unaligned(&s[..32])
}

#[inline(always)]
fn load16(s: &[u8]) -> __m128i {
    bytemuck::pod_read_unaligned(&s[..16])
}

/// One output row of the vertical pass from byte `from` on, 32 bytes at a time, the
/// rest scalar.
#[inline(always)]
#[allow(clippy::type_complexity)]
pub(super) fn vertical_v3(
    simd: V3,
    (taps, line, w, pairs, out): (&[u8], usize, &[i32], &[[i32; 2]], &mut [u8]),
    from: usize,
) {
    let (a, x) = (simd.avx2, simd.avx);
    let n = w.len();
    let zero = x._mm256_setzero_si256();
    let round = x._mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    let len = out.len();
    let mut i = from;
    while i + 32 <= len {
        let mut hi = [zero; 4];
        let mut lo = [zero; 4];
        for (p, &[wh, wl]) in pairs.iter().enumerate() {
            let (wh, wl) = (x._mm256_set1_epi32(wh), x._mm256_set1_epi32(wl));
            let ra = load32(&taps[2 * p * line + i..]);
            let rb = if 2 * p + 1 < n {
                load32(&taps[(2 * p + 1) * line + i..])
            } else {
                zero
            };
            // (a_j, b_j) as 16-bit pairs: elements [0, 4) and [16, 20) in q[0], [4, 8)
            // and [20, 24) in q[1], and so on; the packs below undo that order.
            let (ab0, ab1) = (
                a._mm256_unpacklo_epi8(ra, rb),
                a._mm256_unpackhi_epi8(ra, rb),
            );
            let q = [
                a._mm256_unpacklo_epi8(ab0, zero),
                a._mm256_unpackhi_epi8(ab0, zero),
                a._mm256_unpacklo_epi8(ab1, zero),
                a._mm256_unpackhi_epi8(ab1, zero),
            ];
            for k in 0..4 {
                hi[k] = a._mm256_add_epi32(hi[k], a._mm256_madd_epi16(q[k], wh));
                lo[k] = a._mm256_add_epi32(lo[k], a._mm256_madd_epi16(q[k], wl));
            }
        }
        // A loop, not `array::from_fn`: its closure was left out of line (see `kernel!`).
        let mut v = [zero; 4];
        for k in 0..4 {
            let s = a._mm256_add_epi32(a._mm256_slli_epi32::<{ LO_BITS as i32 }>(hi[k]), lo[k]);
            v[k] = a._mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(a._mm256_add_epi32(s, round));
        }
        let bytes = a._mm256_packus_epi16(
            a._mm256_packs_epi32(v[0], v[1]),
            a._mm256_packs_epi32(v[2], v[3]),
        );
        out[i..i + 32].copy_from_slice(bytemuck::bytes_of(&bytes));
        i += 32;
    }
    vertical_scalar(taps, line, w, out, i);
}

/// The shuffles taking channel `c` of 8 packed RGB pixels to lanes 0-7 ([`PICKS`]).
#[inline(always)]
pub(super) fn picks() -> [(__m128i, __m128i); 3] {
    // Explicit arrays, not `.map`: a map's closure was left out of line, once a row.
    let pick = |c: usize| -> (__m128i, __m128i) {
        (
            bytemuck::cast(PICKS[2 * c]),
            bytemuck::cast(PICKS[2 * c + 1]),
        )
    };
    [pick(0), pick(1), pick(2)]
}

/// `norm`'s value of the 8 bytes `v` (as floats) of channel `c`: the reciprocals' path
/// where [`Normalisation::new`] found it exact (`super::divide` lane by lane), the two
/// divisions otherwise.
#[inline(always)]
fn normalise8(simd: V3, norm: &Normalisation, c: usize, v: __m256) -> __m256 {
    let x = simd.avx;
    let mean = x._mm256_set1_ps(norm.mean[c]);
    let std = x._mm256_set1_ps(norm.std[c]);
    let k255 = x._mm256_set1_ps(255.0);
    match norm.reciprocals {
        Some(rstd) => {
            let t = divide8(simd, v, k255, R255);
            divide8(simd, x._mm256_sub_ps(t, mean), std, rstd[c])
        }
        None => x._mm256_div_ps(x._mm256_sub_ps(x._mm256_div_ps(v, k255), mean), std),
    }
}

/// `super::divide` on 8 lanes: `a / d` through `d`'s reciprocal `r` and one correction.
#[inline(always)]
fn divide8(simd: V3, a: __m256, d: __m256, r: f32) -> __m256 {
    let (x, f) = (simd.avx, simd.fma);
    let r = x._mm256_set1_ps(r);
    let q = x._mm256_mul_ps(a, r);
    f._mm256_fmadd_ps(f._mm256_fnmadd_ps(q, d, a), r, q)
}

/// One row of the normalising write from pixel `from` on, 8 pixels at a time, the rest
/// through the table.
#[inline(always)]
#[allow(clippy::type_complexity)]
pub(super) fn planes_v3(
    simd: V3,
    (rgb, lut, norm, flip, out): (
        &[u8],
        &[[f32; 256]; 3],
        &Normalisation,
        bool,
        [&mut [f32]; 3],
    ),
    from: usize,
) {
    let (a, x, s) = (simd.avx2, simd.avx, simd.ssse3);
    let w = out[0].len();
    let picks = picks();
    let reverse = x._mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    let [r, g, b] = out;
    let mut planes = [r, g, b];
    let mut i = from;
    // 8 pixels need 24 bytes; the two 16-byte loads reach 24.
    while i + 8 <= w && 3 * i + 24 <= rgb.len() {
        let p0 = load16(&rgb[3 * i..]);
        let p1 = load16(&rgb[3 * i + 8..]);
        for (c, plane) in planes.iter_mut().enumerate() {
            let (m0, m1) = picks[c];
            let bytes = simd
                .sse2
                ._mm_or_si128(s._mm_shuffle_epi8(p0, m0), s._mm_shuffle_epi8(p1, m1));
            let v: __m256 = x._mm256_cvtepi32_ps(a._mm256_cvtepu8_epi32(bytes));
            let mut y = normalise8(simd, norm, c, v);
            let at = if flip {
                y = a._mm256_permutevar8x32_ps(y, reverse);
                w - 8 - i
            } else {
                i
            };
            let y: [f32; 8] = bytemuck::cast(y);
            plane[at..at + 8].copy_from_slice(&y);
        }
        i += 8;
    }
    planes_lut(rgb, lut, flip, planes, i);
}

/// Four rows of the horizontal pass: per output pixel and tap pair, each half of `row8`
/// gives two rows' `(p_t, p_t+1)` channel pairs, multiplied by the pair's split weights
/// (only the pairs of the pixel's own taps: past them the weights are zero), rows 0 and
/// 1 in one register's 128-bit lanes, rows 2 and 3 in another's; stored by
/// [`store_rows`].
#[inline(always)]
fn horizontal_v3(simd: V3, j: HorizontalRows<'_, '_>) {
    // Two source pixels (16 bytes) to (p_t, p_t+1) pairs per lane: R, G, B, 0 of one row,
    // then of the next.
    let shuf: __m128i = bytemuck::cast(PAIRS_OF_TWO);
    store_rows(&HorizontalTaps::new(simd, &j, shuf), j.bounds.len(), j.outs);
}

/// The byte shuffle taking two source pixels of two rows (16 bytes of `row8`: `RGB0` of
/// row a then of row b, pixel `t`, then the same of pixel `t + 1`) to `(p_t, p_t+1)`
/// pairs: R, G, B, 0 of row a, then of row b.
pub(super) const PAIRS_OF_TWO: [i8; 16] = [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15];

/// The byte shuffle taking `RGB0` x 4 to `RGB` x 4 in a 128-bit lane (12 bytes, the last
/// 4 zero).
pub(super) const RGB_OF_RGB0: [i8; 16] = [0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1];

/// What a horizontal pass's output pixels share, at either level: the two halves of
/// `row8` as bytes, the taps, and the level's token and pair shuffle.
pub(super) struct HorizontalTaps<'a, S, M> {
    pub simd: S,
    b0: &'a [u8],
    b1: &'a [u8],
    bounds: &'a [(usize, usize)],
    pairs: &'a [[i32; 2]],
    kp: usize,
    cfirst: usize,
    pub shuf: M,
}

impl<'a, S, M> HorizontalTaps<'a, S, M> {
    #[inline(always)]
    pub(super) fn new(simd: S, j: &HorizontalRows<'a, '_>, shuf: M) -> Self {
        HorizontalTaps {
            simd,
            b0: bytemuck::cast_slice(j.row8[0]),
            b1: bytemuck::cast_slice(j.row8[1]),
            bounds: j.bounds,
            pairs: j.pairs,
            kp: j.kp,
            cfirst: j.cfirst,
            shuf,
        }
    }

    /// Output pixel `xx`'s source bytes in each half of `row8` (from its first tap on,
    /// 16 bytes a tap pair) and its own tap pairs.
    #[inline(always)]
    pub(super) fn of(&self, xx: usize) -> (&'a [u8], &'a [u8], &'a [[i32; 2]]) {
        let (xmin, n) = self.bounds[xx];
        let w = &self.pairs[xx * self.kp..][..n.div_ceil(2).min(self.kp)];
        let base = (xmin - self.cfirst) * 8;
        (
            self.b0.get(base..).unwrap_or_default(),
            self.b1.get(base..).unwrap_or_default(),
            w,
        )
    }
}

/// A horizontal pass's output pixels, four rows of each.
pub(super) trait Pixels {
    /// Pixel `xx`: row `k`'s `RGB0` at bytes `4k..4k + 4`.
    fn pixel(&self, xx: usize) -> __m128i;

    /// Pixels `xx..xx + 4` narrowed together: row `k`'s four pixels as `RGB` (12 bytes,
    /// then 4 spare) in element `k`. The packs work within each 128-bit lane, where the
    /// sums keep each row, so they leave each row's four pixels in its own lane, clamped
    /// to bytes by their saturation.
    fn four(&self, xx: usize) -> [__m128i; 4];
}

/// Stores output pixels `0..ow` of four rows (`None`: a row past the image's last): four
/// pixels at a time as one 16-byte store a row ([`Pixels::four`]; the next four overwrite
/// its last 4 bytes, or they are spare at the row's end), and the pixels past the last
/// four, or where a row has no room for 16 bytes, one at a time: a 4-byte store of each
/// row's `RGB0`, the zero lane overwritten by the next pixel (or spare at the row's end).
#[inline(always)]
pub(super) fn store_rows<P: Pixels>(pixels: &P, ow: usize, mut outs: [Option<&mut [u8]>; 4]) {
    let room = outs.iter().flatten().map(|o| o.len()).min().unwrap_or(0);
    let mut xx = 0;
    while xx + 4 <= ow && 3 * xx + 16 <= room {
        for (o, row) in outs.iter_mut().zip(pixels.four(xx)) {
            if let Some(o) = o
                .as_deref_mut()
                .and_then(|o| o.get_mut(3 * xx..3 * xx + 16))
            {
                o.copy_from_slice(bytemuck::bytes_of(&row));
            }
        }
        xx += 4;
    }
    for xx in xx..ow {
        let p: [u8; 16] = bytemuck::cast(pixels.pixel(xx));
        for (k, o) in outs.iter_mut().enumerate() {
            if let Some(o) = o.as_deref_mut().and_then(|o| o.get_mut(3 * xx..3 * xx + 4)) {
                o.copy_from_slice(&p[4 * k..4 * k + 4]);
            }
        }
    }
}

impl HorizontalTaps<'_, V3, __m128i> {
    /// Output pixel `xx`'s values in the four rows before clamping, as 32-bit integers:
    /// rows 0 and 1 in the first register's 128-bit lanes, rows 2 and 3 in the second's.
    #[inline(always)]
    fn sums(&self, xx: usize) -> [__m256i; 2] {
        let (a, x, s) = (self.simd.avx2, self.simd.avx, self.simd.ssse3);
        let (r0, r1, w) = self.of(xx);
        // The rounding term starts the low sums: `(hi << 11) + lo + 2^21`.
        let (mut hi0, mut hi1) = (x._mm256_setzero_si256(), x._mm256_setzero_si256());
        let round = x._mm256_set1_epi32(1 << (PRECISION_BITS - 1));
        let (mut lo0, mut lo1) = (round, round);
        for ((s0, s1), &[wh, wl]) in r0.chunks_exact(16).zip(r1.chunks_exact(16)).zip(w) {
            let q0 = a._mm256_cvtepu8_epi16(s._mm_shuffle_epi8(load16(s0), self.shuf));
            let q1 = a._mm256_cvtepu8_epi16(s._mm_shuffle_epi8(load16(s1), self.shuf));
            let (wh, wl) = (x._mm256_set1_epi32(wh), x._mm256_set1_epi32(wl));
            hi0 = a._mm256_add_epi32(hi0, a._mm256_madd_epi16(q0, wh));
            lo0 = a._mm256_add_epi32(lo0, a._mm256_madd_epi16(q0, wl));
            hi1 = a._mm256_add_epi32(hi1, a._mm256_madd_epi16(q1, wh));
            lo1 = a._mm256_add_epi32(lo1, a._mm256_madd_epi16(q1, wl));
        }
        let s0 = a._mm256_add_epi32(a._mm256_slli_epi32::<{ LO_BITS as i32 }>(hi0), lo0);
        let s1 = a._mm256_add_epi32(a._mm256_slli_epi32::<{ LO_BITS as i32 }>(hi1), lo1);
        [
            a._mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(s0),
            a._mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(s1),
        ]
    }
}

impl Pixels for HorizontalTaps<'_, V3, __m128i> {
    #[inline(always)]
    fn pixel(&self, xx: usize) -> __m128i {
        let (a, x) = (self.simd.avx2, self.simd.avx);
        let [v0, v1] = self.sums(xx);
        // packs puts v0's then v1's four lanes in each 128-bit half, packus clamps them
        // to bytes: rows 0 and 2 in the low half's first 8 bytes, rows 1 and 3 in the
        // high half's.
        let p = a._mm256_packus_epi16(a._mm256_packs_epi32(v0, v1), x._mm256_setzero_si256());
        let (low, high) = (
            x._mm256_castsi256_si128(p),
            a._mm256_extracti128_si256::<1>(p),
        );
        self.simd.sse2._mm_unpacklo_epi32(low, high)
    }

    #[inline(always)]
    fn four(&self, xx: usize) -> [__m128i; 4] {
        let a = self.simd.avx2;
        let rgb: __m256i = bytemuck::cast([RGB_OF_RGB0; 2]);
        let v = [
            self.sums(xx),
            self.sums(xx + 1),
            self.sums(xx + 2),
            self.sums(xx + 3),
        ];
        // Rows 0 and 1, then rows 2 and 3. No closure here: one left out of line loses
        // the CPU features (see `kernel!`).
        let mut packed = [rgb; 2];
        for (k, p) in packed.iter_mut().enumerate() {
            let bytes = a._mm256_packus_epi16(
                a._mm256_packs_epi32(v[0][k], v[1][k]),
                a._mm256_packs_epi32(v[2][k], v[3][k]),
            );
            *p = a._mm256_shuffle_epi8(bytes, rgb);
        }
        bytemuck::cast(packed)
    }
}

/// [`Kernels::interleave`]: 4 pixels at a time (two 16-byte loads, of which 12 bytes are
/// used, shuffled to `RGB0` and interleaved row by row), the rest scalar.
#[inline(always)]
pub(super) fn interleave_v3(simd: V3, a: &[u8], b: &[u8], out: &mut [[u8; 8]]) {
    let (s, e) = (simd.ssse3, simd.sse2);
    let rgb0: __m128i =
        bytemuck::cast::<[i8; 16], _>([0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1]);
    let n = out.len().min(a.len() / 3).min(b.len() / 3);
    let mut x = 0;
    while x + 4 <= n && 3 * x + 16 <= a.len() && 3 * x + 16 <= b.len() {
        let pa = s._mm_shuffle_epi8(load16(&a[3 * x..]), rgb0);
        let pb = s._mm_shuffle_epi8(load16(&b[3 * x..]), rgb0);
        let v: [[u8; 8]; 4] =
            bytemuck::cast([e._mm_unpacklo_epi32(pa, pb), e._mm_unpackhi_epi32(pa, pb)]);
        out[x..x + 4].copy_from_slice(&v);
        x += 4;
    }
    interleave_scalar(a, b, out, x);
}

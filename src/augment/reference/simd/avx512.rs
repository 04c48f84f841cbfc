//! The kernels at 512 bits: AVX-512 F and BW (pulp's `V4`, which also has CD, DQ and
//! VL). Each does what its 256-bit kernel (`avx2`) does with twice the lanes, and hands
//! a row's last pixels to it.

use core::arch::x86_64::{__m128i, __m256i, __m512, __m512i};
use pulp::x86::V4;

use super::avx2::{
    interleave_v3, picks, planes_v3, store_rows, vertical_v3, HorizontalTaps, Pixels, PAIRS_OF_TWO,
    RGB_OF_RGB0,
};
use super::{HorizontalRows, Kernels, Normalisation, LO_BITS, PRECISION_BITS, R255};

impl Kernels for V4 {
    #[inline(always)]
    fn vertical(self, rows: &[u8], line: usize, w: &[i32], pairs: &[[i32; 2]], out: &mut [u8]) {
        vertical_v4(self, (rows, line, w, pairs, out));
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
        planes_v4(self, (rgb, lut, norm, flip, out));
    }

    #[inline(always)]
    fn horizontal(self, rows: HorizontalRows<'_, '_>) {
        horizontal_v4(self, rows);
    }

    #[inline(always)]
    fn interleave(self, a: &[u8], b: &[u8], out: &mut [[u8; 8]]) {
        interleave_v3(*self, a, b, out);
    }
}

#[inline(always)]
fn load64(s: &[u8]) -> __m512i {
    bytemuck::pod_read_unaligned(&s[..64])
}

#[inline(always)]
fn load16(s: &[u8]) -> __m128i {
    bytemuck::pod_read_unaligned(&s[..16])
}

/// One output row of the vertical pass, 64 bytes at a time. The byte unpacks and packs
/// work within each 128-bit lane, as at 256 bits, so the order they leave is undone the
/// same way in each lane.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn vertical_v4(
    simd: V4,
    (taps, line, w, pairs, out): (&[u8], usize, &[i32], &[[i32; 2]], &mut [u8]),
) {
    let (b, f) = (simd.avx512bw, simd.avx512f);
    let n = w.len();
    let zero = f._mm512_setzero_si512();
    let round = f._mm512_set1_epi32(1 << (PRECISION_BITS - 1));
    let len = out.len();
    let mut i = 0;
    while i + 64 <= len {
        let mut hi = [zero; 4];
        let mut lo = [zero; 4];
        for (p, &[wh, wl]) in pairs.iter().enumerate() {
            let (wh, wl) = (f._mm512_set1_epi32(wh), f._mm512_set1_epi32(wl));
            let ra = load64(&taps[2 * p * line + i..]);
            let rb = if 2 * p + 1 < n {
                load64(&taps[(2 * p + 1) * line + i..])
            } else {
                zero
            };
            let (ab0, ab1) = (
                b._mm512_unpacklo_epi8(ra, rb),
                b._mm512_unpackhi_epi8(ra, rb),
            );
            let q = [
                b._mm512_unpacklo_epi8(ab0, zero),
                b._mm512_unpackhi_epi8(ab0, zero),
                b._mm512_unpacklo_epi8(ab1, zero),
                b._mm512_unpackhi_epi8(ab1, zero),
            ];
            for k in 0..4 {
                hi[k] = f._mm512_add_epi32(hi[k], b._mm512_madd_epi16(q[k], wh));
                lo[k] = f._mm512_add_epi32(lo[k], b._mm512_madd_epi16(q[k], wl));
            }
        }
        // A loop, not `array::from_fn`: its closure was left out of line (see `kernel!`).
        let mut v = [zero; 4];
        for k in 0..4 {
            let s = f._mm512_add_epi32(f._mm512_slli_epi32::<LO_BITS>(hi[k]), lo[k]);
            v[k] = f._mm512_srai_epi32::<PRECISION_BITS>(f._mm512_add_epi32(s, round));
        }
        let bytes = b._mm512_packus_epi16(
            b._mm512_packs_epi32(v[0], v[1]),
            b._mm512_packs_epi32(v[2], v[3]),
        );
        out[i..i + 64].copy_from_slice(bytemuck::bytes_of(&bytes));
        i += 64;
    }
    vertical_v3(*simd, (taps, line, w, pairs, out), i);
}

/// [`super::avx2`]'s normalisation on 16 lanes.
#[inline(always)]
fn normalise16(simd: V4, norm: &Normalisation, c: usize, v: __m512) -> __m512 {
    let f = simd.avx512f;
    let mean = f._mm512_set1_ps(norm.mean[c]);
    let std = f._mm512_set1_ps(norm.std[c]);
    let k255 = f._mm512_set1_ps(255.0);
    match norm.reciprocals {
        Some(rstd) => {
            let t = divide16(simd, v, k255, R255);
            divide16(simd, f._mm512_sub_ps(t, mean), std, rstd[c])
        }
        None => f._mm512_div_ps(f._mm512_sub_ps(f._mm512_div_ps(v, k255), mean), std),
    }
}

/// `super::divide` on 16 lanes.
#[inline(always)]
fn divide16(simd: V4, a: __m512, d: __m512, r: f32) -> __m512 {
    let f = simd.avx512f;
    let r = f._mm512_set1_ps(r);
    let q = f._mm512_mul_ps(a, r);
    f._mm512_fmadd_ps(f._mm512_fnmadd_ps(q, d, a), r, q)
}

/// One row of the normalising write, 16 pixels at a time: each 8-pixel half picked as at
/// 256 bits, the halves joined, widened and normalised together.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn planes_v4(
    simd: V4,
    (rgb, lut, norm, flip, out): (
        &[u8],
        &[[f32; 256]; 3],
        &Normalisation,
        bool,
        [&mut [f32]; 3],
    ),
) {
    let (f, s, e) = (simd.avx512f, simd.ssse3, simd.sse2);
    let w = out[0].len();
    let picks = picks();
    let reverse = f._mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    let [r, g, b] = out;
    let mut planes = [r, g, b];
    let mut i = 0;
    // 16 pixels need 48 bytes; the four 16-byte loads reach 48.
    while i + 16 <= w && 3 * i + 48 <= rgb.len() {
        let p = [
            load16(&rgb[3 * i..]),
            load16(&rgb[3 * i + 8..]),
            load16(&rgb[3 * i + 24..]),
            load16(&rgb[3 * i + 32..]),
        ];
        for (c, plane) in planes.iter_mut().enumerate() {
            let (m0, m1) = picks[c];
            let first = e._mm_or_si128(s._mm_shuffle_epi8(p[0], m0), s._mm_shuffle_epi8(p[1], m1));
            let second = e._mm_or_si128(s._mm_shuffle_epi8(p[2], m0), s._mm_shuffle_epi8(p[3], m1));
            let bytes = e._mm_unpacklo_epi64(first, second);
            let v = f._mm512_cvtepi32_ps(f._mm512_cvtepu8_epi32(bytes));
            let mut y = normalise16(simd, norm, c, v);
            let at = if flip {
                y = f._mm512_permutexvar_ps(reverse, y);
                w - 16 - i
            } else {
                i
            };
            let y: [f32; 16] = bytemuck::cast(y);
            plane[at..at + 16].copy_from_slice(&y);
        }
        i += 16;
    }
    planes_v3(*simd, (rgb, lut, norm, flip, planes), i);
}

/// Four rows of the horizontal pass in one register: per output pixel and tap pair, the
/// two halves of `row8` (16 bytes each: two rows' pixels `t` and `t + 1`) are joined,
/// shuffled to `(p_t, p_t+1)` channel pairs and widened, so one multiply-add per split
/// weight gives all four rows' `RGB0`, row `k` in 128-bit lane `k` (only the pairs of the
/// pixel's own taps: past them the weights are zero); stored by [`store_rows`].
#[inline(always)]
fn horizontal_v4(simd: V4, j: HorizontalRows<'_, '_>) {
    let shuf: __m256i = bytemuck::cast([PAIRS_OF_TWO; 2]);
    store_rows(&HorizontalTaps::new(simd, &j, shuf), j.bounds.len(), j.outs);
}

impl HorizontalTaps<'_, V4, __m256i> {
    /// Output pixel `xx`'s values in the four rows before clamping: row `k`'s `RGB0` as
    /// 32-bit integers in 128-bit lane `k`.
    #[inline(always)]
    fn sums(&self, xx: usize) -> __m512i {
        let simd = self.simd;
        let (b, f) = (simd.avx512bw, simd.avx512f);
        let (r0, r1, w) = self.of(xx);
        // The rounding term starts the low sum: `(hi << 11) + lo + 2^21`.
        let mut hi = f._mm512_setzero_si512();
        let mut lo = f._mm512_set1_epi32(1 << (PRECISION_BITS - 1));
        for ((s0, s1), &[wh, wl]) in r0.chunks_exact(16).zip(r1.chunks_exact(16)).zip(w) {
            let s = simd.avx._mm256_set_m128i(load16(s1), load16(s0));
            let q = b._mm512_cvtepu8_epi16(simd.avx2._mm256_shuffle_epi8(s, self.shuf));
            let (wh, wl) = (f._mm512_set1_epi32(wh), f._mm512_set1_epi32(wl));
            hi = f._mm512_add_epi32(hi, b._mm512_madd_epi16(q, wh));
            lo = f._mm512_add_epi32(lo, b._mm512_madd_epi16(q, wl));
        }
        let s = f._mm512_add_epi32(f._mm512_slli_epi32::<LO_BITS>(hi), lo);
        f._mm512_srai_epi32::<PRECISION_BITS>(s)
    }
}

impl Pixels for HorizontalTaps<'_, V4, __m256i> {
    #[inline(always)]
    fn pixel(&self, xx: usize) -> __m128i {
        let f = self.simd.avx512f;
        // Clamped to [0, 255]: the floor here, the ceiling by the unsigned narrowing.
        f._mm512_cvtusepi32_epi8(f._mm512_max_epi32(self.sums(xx), f._mm512_setzero_si512()))
    }

    #[inline(always)]
    fn four(&self, xx: usize) -> [__m128i; 4] {
        let b = self.simd.avx512bw;
        let rgb: __m512i = bytemuck::cast([RGB_OF_RGB0; 4]);
        let v = [
            self.sums(xx),
            self.sums(xx + 1),
            self.sums(xx + 2),
            self.sums(xx + 3),
        ];
        let bytes = b._mm512_packus_epi16(
            b._mm512_packs_epi32(v[0], v[1]),
            b._mm512_packs_epi32(v[2], v[3]),
        );
        bytemuck::cast(b._mm512_shuffle_epi8(bytes, rgb))
    }
}

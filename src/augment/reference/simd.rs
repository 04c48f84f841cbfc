//! The image resize's two passes and the f32 normalising write, explicitly vectorised for
//! x86-64 (AVX2, chosen at run time) with the scalar code's exact integer and IEEE
//! arithmetic, so every pixel and every float is bit-identical to the scalar path (which
//! stays the definition, and runs where AVX2 is absent). The intrinsics come through
//! `pulp`'s safe, run-time-checked wrappers (the crate is in the build already, for
//! `gemm`): no `unsafe` here.
//!
//! Both passes multiply 8-bit pixels by Pillow's 22-bit weights. A 22-bit weight does not
//! fit the 16-bit multiply-add (`vpmaddwd`, two taps per instruction), so each weight is
//! split as `w = hi * 2^11 + lo` (`0 <= lo < 2^11`, both then fit in 16 bits) and the sum
//! is `(sum(p * hi) << 11) + sum(p * lo)`: the same integer, two multiply-adds per two taps
//! instead of two 32-bit multiplies per tap. [`split_pairs`] splits an axis's weights
//! once per image.

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::{__m128i, __m256, __m256i};
#[cfg(target_arch = "x86_64")]
use pulp::x86::V3;

/// The fixed point of the resize weights (Pillow's `PRECISION_BITS`).
pub(super) const PRECISION_BITS: u32 = 32 - 8 - 2;
/// Bits of a weight's low part in the split `w = hi * 2^LO_BITS + lo`.
const LO_BITS: u32 = 11;

/// `$name(simd, args)`: the kernel `$kernel` and its arguments, which `pulp` calls with
/// the CPU's features enabled. `call` names the kernel directly so that it is inlined
/// there: a closure, or a function called through `FnOnce`, is compiled apart, without
/// the features, and each of its intrinsics becomes a call.
macro_rules! kernel {
    ($name:ident, $kernel:ident, $args:ty) => {
        #[cfg(target_arch = "x86_64")]
        struct $name<'a>(V3, $args);

        #[cfg(target_arch = "x86_64")]
        impl<'a> pulp::NullaryFnOnce for $name<'a> {
            type Output = ();

            #[inline(always)]
            fn call(self) {
                $kernel(self.0, self.1)
            }
        }
    };
}

kernel!(
    VerticalPass,
    vertical_pass_v3,
    (&'a [u8], usize, usize, Taps<'a>, &'a mut [u8], usize)
);
kernel!(
    PlanesImage,
    planes_image_v3,
    (
        &'a [u8],
        (usize, usize, bool, bool),
        &'a [[f32; 256]; 3],
        &'a Normalisation,
        &'a mut [f32]
    )
);

/// The SIMD token a kernel runs with: pulp's AVX2 level on x86-64, none elsewhere.
#[cfg(target_arch = "x86_64")]
type Token = V3;
#[cfg(not(target_arch = "x86_64"))]
type Token = core::convert::Infallible;

/// One axis's resize taps: per output pixel its first source index and tap count
/// (`bounds`), `ksize` weights (`weights`, zero past its own count), and the same weights
/// split into pairs by [`split_pairs`] (`None` where they do not split: the scalar pass).
#[derive(Clone, Copy)]
pub(super) struct Taps<'a> {
    pub bounds: &'a [(usize, usize)],
    pub weights: &'a [i32],
    pub ksize: usize,
    pub pairs: Option<&'a [[i32; 2]]>,
}

/// The flipped source index of output index `i` of `n` (a column or a row).
#[inline]
pub(super) fn src_index(flip: bool, n: usize, i: usize) -> usize {
    if flip {
        n - 1 - i
    } else {
        i
    }
}

/// `clamp((2^21 + sum) >> 22, 0, 255)`: one resized value.
#[inline]
pub(super) fn clip8(v: i32) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The vertical pass: output row `y` (`width` bytes from `out[y * width]`) is
/// `clip8(2^21 + sum_t h_t[i] * w[t])` over the rows `h_t` of `h` (`line` bytes each, row
/// `ymin - first + t`) and the weights `w` that `taps` gives it, `(ymin, n) = bounds[y]`.
pub(super) fn vertical_pass(
    h: &[u8],
    line: usize,
    first: usize,
    taps: Taps,
    out: &mut [u8],
    width: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = V3::try_new() {
        return simd.vectorize(VerticalPass(simd, (h, line, first, taps, out, width)));
    }
    vertical_rows(None, (h, line, first, taps, out, width));
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn vertical_pass_v3(simd: V3, job: (&[u8], usize, usize, Taps, &mut [u8], usize)) {
    vertical_rows(Some(simd), job);
}

/// [`vertical_pass`]'s rows, vectorised when `simd` is given and the weights split.
#[inline(always)]
fn vertical_rows(
    simd: Option<Token>,
    (h, line, first, taps, out, width): (&[u8], usize, usize, Taps, &mut [u8], usize),
) {
    let kp = taps.ksize.div_ceil(2);
    for (y, (&(ymin, n), o)) in taps
        .bounds
        .iter()
        .zip(out.chunks_exact_mut(width))
        .enumerate()
    {
        let w = &taps.weights[y * taps.ksize..y * taps.ksize + n];
        let rows = &h[(ymin - first) * line..(ymin - first + n) * line];
        match (simd, taps.pairs) {
            #[cfg(target_arch = "x86_64")]
            (Some(simd), Some(pairs)) => {
                let pairs = &pairs[y * kp..y * kp + n.div_ceil(2)];
                vertical_v3(simd, (rows, line, w, pairs, o))
            }
            _ => vertical_scalar(rows, line, w, o, 0),
        }
    }
}

/// The scalar vertical pass over `out[from..]`.
fn vertical_scalar(taps: &[u8], line: usize, w: &[i32], out: &mut [u8], from: usize) {
    for (i, o) in out.iter_mut().enumerate().skip(from) {
        let mut acc = 1i32 << (PRECISION_BITS - 1);
        for (t, &wt) in w.iter().enumerate() {
            acc += i32::from(taps[t * line + i]) * wt;
        }
        *o = clip8(acc);
    }
}

/// `w` as `(hi, lo)` with `w = hi * 2^LO_BITS + lo`, `0 <= lo < 2^LO_BITS`, when `hi`
/// fits in 16 bits (every weight of a resize does: at most `2^22`).
fn split(w: i32) -> Option<(i16, i16)> {
    let hi = i16::try_from(w >> LO_BITS).ok()?;
    Some((hi, (w & ((1 << LO_BITS) - 1)) as i16))
}

/// Two 16-bit weights as the pair a `vpmaddwd` lane multiplies `(a, b)` by.
fn pair(a: i16, b: i16) -> i32 {
    i32::from(a as u16) | i32::from(b as u16) << 16
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn load32(s: &[u8]) -> __m256i {
    bytemuck::pod_read_unaligned(&s[..32])
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::type_complexity)]
fn vertical_v3(
    simd: V3,
    (taps, line, w, pairs, out): (&[u8], usize, &[i32], &[[i32; 2]], &mut [u8]),
) {
    let (a, x) = (simd.avx2, simd.avx);
    let n = w.len();
    let zero = x._mm256_setzero_si256();
    let round = x._mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    let len = out.len();
    let mut i = 0;
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
        let v: [__m256i; 4] = std::array::from_fn(|k| {
            let s = a._mm256_add_epi32(a._mm256_slli_epi32::<{ LO_BITS as i32 }>(hi[k]), lo[k]);
            a._mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(a._mm256_add_epi32(s, round))
        });
        let bytes = a._mm256_packus_epi16(
            a._mm256_packs_epi32(v[0], v[1]),
            a._mm256_packs_epi32(v[2], v[3]),
        );
        out[i..i + 32].copy_from_slice(bytemuck::bytes_of(&bytes));
        i += 32;
    }
    vertical_scalar(taps, line, w, out, i);
}

/// Writes a `w x h` RGB image into three f32 planes (NCHW): `r[y][x] =
/// lut[0][rgb[y][x].r]` and so on, flipped as `flip_h` and `flip_v` say; `lut` holds
/// `norm`'s values, which the vectorised path computes instead of looking up.
pub(super) fn planes_f32_image(
    rgb: &[u8],
    (w, h, flip_h, flip_v): (usize, usize, bool, bool),
    lut: &[[f32; 256]; 3],
    norm: &Normalisation,
    out: &mut [f32],
) {
    let job = (rgb, (w, h, flip_h, flip_v), lut, norm, out);
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = V3::try_new() {
        return simd.vectorize(PlanesImage(simd, job));
    }
    planes_image(None, job);
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::type_complexity)]
fn planes_image_v3(
    simd: V3,
    job: (
        &[u8],
        (usize, usize, bool, bool),
        &[[f32; 256]; 3],
        &Normalisation,
        &mut [f32],
    ),
) {
    planes_image(Some(simd), job);
}

/// [`planes_f32_image`]'s rows, vectorised when `simd` is given.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn planes_image(
    simd: Option<Token>,
    (rgb, (w, h, flip_h, flip_v), lut, norm, out): (
        &[u8],
        (usize, usize, bool, bool),
        &[[f32; 256]; 3],
        &Normalisation,
        &mut [f32],
    ),
) {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = norm;
    for (y, planes) in plane_rows(out, w, h).enumerate() {
        let srow = &rgb[src_index(flip_v, h, y) * w * 3..][..w * 3];
        match simd {
            #[cfg(target_arch = "x86_64")]
            Some(simd) => planes_v3(simd, (srow, lut, norm, flip_h, planes)),
            _ => planes_lut(srow, lut, flip_h, planes, 0),
        }
    }
}

/// The rows of a `w x h` image's three planes (`out` holds them one after another), row
/// `y` of each together.
pub(super) fn plane_rows<T>(
    out: &mut [T],
    w: usize,
    h: usize,
) -> impl Iterator<Item = [&mut [T]; 3]> {
    let (r, rest) = out[..3 * w * h].split_at_mut(w * h);
    let (g, b) = rest.split_at_mut(w * h);
    r.chunks_exact_mut(w)
        .zip(g.chunks_exact_mut(w))
        .zip(b.chunks_exact_mut(w))
        .map(|((r, g), b)| [r, g, b])
}

/// [`planes_f32_image`]'s scalar definition of a row, for any element type: pixels
/// `from..` of the row through the tables.
pub(super) fn planes_lut<T: Copy>(
    rgb: &[u8],
    lut: &[[T; 256]; 3],
    flip: bool,
    out: [&mut [T]; 3],
    from: usize,
) {
    let w = out[0].len();
    let [r, g, b] = out;
    for x in from..w {
        let px = &rgb[3 * x..3 * x + 3];
        let o = src_index(flip, w, x);
        r[o] = lut[0][usize::from(px[0])];
        g[o] = lut[1][usize::from(px[1])];
        b[o] = lut[2][usize::from(px[2])];
    }
}

/// The normalisation `((v / 255) - mean) / std` per channel, as the vectorised write
/// computes it: the same two IEEE divisions and subtraction as the scalar table, lane
/// by lane, so each value is bit-identical to the table's.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) struct Normalisation {
    /// Per-channel mean (0 when not normalising).
    pub mean: [f32; 3],
    /// Per-channel standard deviation (1 when not normalising).
    pub std: [f32; 3],
}

/// The byte shuffles that take channel `c` of 8 packed RGB pixels (24 bytes, loaded as
/// `[0, 16)` and `[8, 24)`) to lanes 0-7: byte `c + 3j` to lane `j`, from the first load
/// (`PICKS[2c]`) or the second (`PICKS[2c + 1]`); -1 zeroes a lane. Constants, so a row's
/// write does not build them.
const PICKS: [[i8; 16]; 6] = {
    let mut t = [[-1i8; 16]; 6];
    let mut c = 0;
    while c < 3 {
        let mut j = 0;
        while j < 8 {
            let k = c + 3 * j;
            if k < 16 {
                t[2 * c][j] = k as i8;
            } else {
                t[2 * c + 1][j] = (k - 8) as i8;
            }
            j += 1;
        }
        c += 1;
    }
    t
};

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::type_complexity)]
fn planes_v3(
    simd: V3,
    (rgb, lut, f, flip, out): (
        &[u8],
        &[[f32; 256]; 3],
        &Normalisation,
        bool,
        [&mut [f32]; 3],
    ),
) {
    let (a, x, s) = (simd.avx2, simd.avx, simd.ssse3);
    let w = out[0].len();
    // Explicit arrays, not `.map`: a map's closure was left out of line, once a row.
    let pick = |c: usize| -> (__m128i, __m128i) {
        (
            bytemuck::cast(PICKS[2 * c]),
            bytemuck::cast(PICKS[2 * c + 1]),
        )
    };
    let picks = [pick(0), pick(1), pick(2)];
    let k255 = x._mm256_set1_ps(255.0);
    let (m, d) = (f.mean, f.std);
    let mean = [
        x._mm256_set1_ps(m[0]),
        x._mm256_set1_ps(m[1]),
        x._mm256_set1_ps(m[2]),
    ];
    let std = [
        x._mm256_set1_ps(d[0]),
        x._mm256_set1_ps(d[1]),
        x._mm256_set1_ps(d[2]),
    ];
    let reverse = x._mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    let [r, g, b] = out;
    let mut planes = [r, g, b];
    let mut i = 0;
    // 8 pixels need 24 bytes; the two 16-byte loads reach 24.
    while i + 8 <= w && 3 * i + 24 <= rgb.len() {
        let p0: __m128i = bytemuck::pod_read_unaligned(&rgb[3 * i..3 * i + 16]);
        let p1: __m128i = bytemuck::pod_read_unaligned(&rgb[3 * i + 8..3 * i + 24]);
        for (c, plane) in planes.iter_mut().enumerate() {
            let (m0, m1) = picks[c];
            let bytes = simd
                .sse2
                ._mm_or_si128(s._mm_shuffle_epi8(p0, m0), s._mm_shuffle_epi8(p1, m1));
            let v: __m256 = x._mm256_cvtepi32_ps(a._mm256_cvtepu8_epi32(bytes));
            let mut y = x._mm256_div_ps(x._mm256_sub_ps(x._mm256_div_ps(v, k255), mean[c]), std[c]);
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

/// Fills `out` with an axis's weights of `ksize` taps per output pixel as tap pairs,
/// `[hi pair, lo pair]` per pair ([`split`]; an odd last tap pairs with a zero weight),
/// for [`horizontal_pass`] and [`vertical_pass`]. False (and `out` unusable) when a weight
/// does not split.
pub(super) fn split_pairs(weights: &[i32], ksize: usize, out: &mut Vec<[i32; 2]>) -> bool {
    out.clear();
    if ksize == 0 {
        return false;
    }
    for w in weights.chunks_exact(ksize) {
        for t in (0..ksize).step_by(2) {
            let (Some((h0, l0)), Some((h1, l1))) =
                (split(w[t]), split(w.get(t + 1).copied().unwrap_or(0)))
            else {
                return false;
            };
            out.push([pair(h0, h1), pair(l0, l1)]);
        }
    }
    true
}

/// The horizontal pass, vectorised: `rows` rows, source row `r` from `src_row(r)` (the
/// taps' source pixels, RGB), output row `r` at `out[r * line..]`. Rows go four at a time
/// through the two halves of `row8`, two rows in each (`[r, g, b, 0, r, g, b, 0]` per
/// source pixel, each half's padding past the last tap already zero), with the weights
/// from [`split_pairs`] (`ksize.div_ceil(2)` pairs per output pixel). Output pixel `x` goes to bytes `3x..3x + 3` of its row (as a
/// 4-byte store: each row has a spare byte at its end).
pub(super) struct HorizontalJob<'a, F> {
    pub rows: usize,
    pub src_row: F,
    pub row8: &'a mut [[u8; 8]],
    pub bounds: &'a [(usize, usize)],
    pub pairs: &'a [[i32; 2]],
    pub cfirst: usize,
    pub out: &'a mut [u8],
    pub line: usize,
}

/// Runs a [`HorizontalJob`]; false, writing nothing, where AVX2 is absent.
pub(super) fn horizontal_pass<'s, F: Fn(usize) -> &'s [u8]>(job: HorizontalJob<'_, F>) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = V3::try_new() {
        simd.vectorize(HorizontalPass(simd, job));
        return true;
    }
    let _ = job;
    false
}

#[cfg(target_arch = "x86_64")]
struct HorizontalPass<'a, F>(V3, HorizontalJob<'a, F>);

#[cfg(target_arch = "x86_64")]
impl<'s, F: Fn(usize) -> &'s [u8]> pulp::NullaryFnOnce for HorizontalPass<'_, F> {
    type Output = ();

    #[inline(always)]
    fn call(self) {
        horizontal_pass_v3(self.0, self.1)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn horizontal_pass_v3<'s, F: Fn(usize) -> &'s [u8]>(simd: V3, j: HorizontalJob<'_, F>) {
    let kp = j.pairs.len() / j.bounds.len().max(1);
    let half = j.row8.len() / 2;
    let (row8a, row8b) = j.row8.split_at_mut(half);
    let mut r = 0;
    while r < j.rows {
        // Up to four rows: two interleaved in each half of `row8` (a missing row repeats
        // the last one, and its output is not written).
        let n = (j.rows - r).min(4);
        let src = |k: usize| (j.src_row)(r + k.min(n - 1));
        for (half, k) in [(&mut *row8a, 0), (&mut *row8b, 2)] {
            let (a, b) = (src(k), src(k + 1));
            for ((d, p), q) in half
                .iter_mut()
                .zip(a.chunks_exact(3))
                .zip(b.chunks_exact(3))
            {
                *d = [p[0], p[1], p[2], 0, q[0], q[1], q[2], 0];
            }
        }
        let mut outs = j.out[r * j.line..(r + n) * j.line].chunks_exact_mut(j.line);
        let outs = [outs.next(), outs.next(), outs.next(), outs.next()];
        horizontal_v3(
            simd,
            ([&*row8a, &*row8b], j.bounds, j.pairs, kp, j.cfirst, outs),
        );
        r += n;
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::type_complexity)]
fn horizontal_v3(
    simd: V3,
    (row8, bounds, pairs, kp, cfirst, mut outs): (
        [&[[u8; 8]]; 2],
        &[(usize, usize)],
        &[[i32; 2]],
        usize,
        usize,
        [Option<&mut [u8]>; 4],
    ),
) {
    let (a, x) = (simd.avx2, simd.avx);
    // Two source pixels (16 bytes) to (p_t, p_t+1) pairs per lane: R, G, B, 0 of one row,
    // then of the next.
    let shuf: __m128i =
        bytemuck::cast::<[i8; 16], _>([0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15]);
    let round = x._mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    let (b0, b1): (&[u8], &[u8]) = (bytemuck::cast_slice(row8[0]), bytemuck::cast_slice(row8[1]));
    if kp == 0 {
        return;
    }
    for (xx, (&(xmin, _), w)) in bounds.iter().zip(pairs.chunks_exact(kp)).enumerate() {
        let base = (xmin - cfirst) * 8;
        let z = x._mm256_setzero_si256();
        let (mut hi0, mut lo0, mut hi1, mut lo1) = (z, z, z, z);
        for (p, &[wh, wl]) in w.iter().enumerate() {
            let at = base + 16 * p;
            let (Some(s0), Some(s1)) = (b0.get(at..at + 16), b1.get(at..at + 16)) else {
                break;
            };
            let (s0, s1): (__m128i, __m128i) = (
                bytemuck::pod_read_unaligned(s0),
                bytemuck::pod_read_unaligned(s1),
            );
            let q0 = a._mm256_cvtepu8_epi16(simd.ssse3._mm_shuffle_epi8(s0, shuf));
            let q1 = a._mm256_cvtepu8_epi16(simd.ssse3._mm_shuffle_epi8(s1, shuf));
            let (wh, wl) = (x._mm256_set1_epi32(wh), x._mm256_set1_epi32(wl));
            hi0 = a._mm256_add_epi32(hi0, a._mm256_madd_epi16(q0, wh));
            lo0 = a._mm256_add_epi32(lo0, a._mm256_madd_epi16(q0, wl));
            hi1 = a._mm256_add_epi32(hi1, a._mm256_madd_epi16(q1, wh));
            lo1 = a._mm256_add_epi32(lo1, a._mm256_madd_epi16(q1, wl));
        }
        // No closures here: one left out of line loses the CPU features (see `kernel!`).
        let s0 = a._mm256_add_epi32(a._mm256_slli_epi32::<{ LO_BITS as i32 }>(hi0), lo0);
        let s1 = a._mm256_add_epi32(a._mm256_slli_epi32::<{ LO_BITS as i32 }>(hi1), lo1);
        let v0 = a._mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(a._mm256_add_epi32(s0, round));
        let v1 = a._mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(a._mm256_add_epi32(s1, round));
        let p = a._mm256_packs_epi32(v0, v1);
        let p: [u8; 32] = bytemuck::cast(a._mm256_packus_epi16(p, p));
        // packs puts v0's then v1's four lanes in each 128-bit half; packus repeats them:
        // row 0 at bytes 0..4, row 2 at 4..8, row 1 at 16..20, row 3 at 20..24.
        let px = [&p[0..4], &p[16..20], &p[4..8], &p[20..24]];
        for (o, v) in outs.iter_mut().zip(px) {
            if let Some(o) = o.as_deref_mut().and_then(|o| o.get_mut(3 * xx..3 * xx + 4)) {
                o.copy_from_slice(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A fresh seed per run (printed on failure) and numbers from it.
    use crate::rng::fresh_for_tests as rng;

    /// The vectorised vertical pass gives the scalar one's bytes: 1 to 70 taps, rows
    /// shorter and longer than a vector, and weights up to 1.5 * 2^22, some negative (both
    /// split).
    #[test]
    fn the_vertical_pass_is_the_scalar_one() {
        let (seed, mut next) = rng();
        for case in 0..300 {
            let n = 1 + next(70) as usize;
            let len = 1 + next(200) as usize;
            let line = len + next(3) as usize;
            let taps: Vec<u8> = (0..n * line).map(|_| next(256) as u8).collect();
            // Sums stay inside i32 (as a resize's do): |weights| add up to at most 1.5 * 2^22.
            let cap = (3 << 21) / n as u32;
            let w: Vec<i32> = (0..n)
                .map(|_| next(cap) as i32 - (cap / 2) as i32 * i32::from(next(4) == 0))
                .collect();
            // Two output rows: all the taps, then the last ones from a later first row.
            let k = next(n as u32) as usize;
            let mut weights = w.clone();
            weights.extend(w[k..].iter().chain(std::iter::repeat_n(&0, k)));
            let bounds = [(0, n), (k, n - k)];
            let mut pairs = Vec::new();
            assert!(split_pairs(&weights, n, &mut pairs));
            let rows = Taps {
                bounds: &bounds,
                weights: &weights,
                ksize: n,
                pairs: Some(&pairs),
            };
            let (mut fast, mut plain) = (vec![0u8; 2 * len], vec![0u8; 2 * len]);
            vertical_pass(&taps, line, 0, rows, &mut fast, len);
            let (p0, p1) = plain.split_at_mut(len);
            vertical_scalar(&taps, line, &w, p0, 0);
            vertical_scalar(&taps[k * line..], line, &w[k..], p1, 0);
            assert_eq!(
                fast, plain,
                "seed {seed}, case {case}: {n} taps, {len} bytes"
            );
        }
    }

    /// The vectorised normalising write gives the table's floats bit for bit, for random
    /// means and deviations (and none: 0 and 1), flipped or not, widths that are and are
    /// not multiples of 8.
    #[test]
    fn the_vectorised_write_is_the_table() {
        let (seed, mut next) = rng();
        for case in 0..200 {
            let (w, h) = (1 + next(300) as usize, 1 + next(4) as usize);
            let rgb: Vec<u8> = (0..3 * w * h).map(|_| next(256) as u8).collect();
            let norm = if case % 4 == 0 {
                Normalisation {
                    mean: [0.0; 3],
                    std: [1.0; 3],
                }
            } else {
                Normalisation {
                    mean: std::array::from_fn(|_| next(1000) as f32 / 999.0),
                    std: std::array::from_fn(|_| 0.01 + next(1000) as f32 / 500.0),
                }
            };
            let lut: [[f32; 256]; 3] = std::array::from_fn(|c| {
                std::array::from_fn(|v| (v as f32 / 255.0 - norm.mean[c]) / norm.std[c])
            });
            let (flip_h, flip_v) = (next(2) == 1, next(2) == 1);
            let mut fast = vec![0f32; 3 * w * h];
            planes_f32_image(&rgb, (w, h, flip_h, flip_v), &lut, &norm, &mut fast);
            let mut plain = vec![0f32; 3 * w * h];
            for (y, planes) in plane_rows(&mut plain, w, h).enumerate() {
                let sy = if flip_v { h - 1 - y } else { y };
                planes_lut(&rgb[sy * w * 3..][..w * 3], &lut, flip_h, planes, 0);
            }
            let bits = |p: &[f32]| -> Vec<u32> { p.iter().map(|v| v.to_bits()).collect() };
            assert_eq!(
                bits(&fast),
                bits(&plain),
                "seed {seed}, case {case}: {w}x{h}, flips {flip_h} {flip_v}"
            );
        }
    }
}

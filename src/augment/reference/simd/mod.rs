//! The image resize's two passes and the f32 normalising write, explicitly vectorised for
//! x86-64 (AVX-512 or AVX2, chosen at run time) with the scalar code's exact integer and
//! IEEE arithmetic, so every pixel and every float is bit-identical to the scalar path
//! (which stays the definition, and runs where neither is present). The intrinsics come
//! through `pulp`'s safe, run-time-checked wrappers (the crate is in the build already,
//! for `gemm`): no `unsafe` here.
//!
//! Both passes multiply 8-bit pixels by Pillow's 22-bit weights. A 22-bit weight does not
//! fit the 16-bit multiply-add (`vpmaddwd`, two taps per instruction), so each weight is
//! split as `w = hi * 2^11 + lo` (`0 <= lo < 2^11`, both then fit in 16 bits) and the sum
//! is `(sum(p * hi) << 11) + sum(p * lo)`: the same integer, two multiply-adds per two taps
//! instead of two 32-bit multiplies per tap. [`split_pairs`] splits an axis's weights
//! once per image.
//!
//! One file per instruction set: `avx2` (pulp's `V3`) and `avx512` (`V4`: AVX-512 F, BW,
//! CD, DQ and VL), each implementing [`Kernels`]; the loops around the kernels are here,
//! written once for both. [`Level`] says which runs: the widest the CPU has, capped by
//! `STOKER_SIMD` (`avx2` or `scalar`), read once.

use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "x86_64")]
use pulp::x86::{V3, V4};

/// The fixed point of the resize weights (Pillow's `PRECISION_BITS`).
pub(super) const PRECISION_BITS: u32 = 32 - 8 - 2;
/// Bits of a weight's low part in the split `w = hi * 2^LO_BITS + lo`.
const LO_BITS: u32 = 11;

/// An instruction set the kernels are written for, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    /// The scalar definition.
    Scalar,
    /// AVX2 with FMA (x86-64-v3).
    Avx2,
    /// AVX-512 F, BW, CD, DQ and VL (x86-64-v4).
    Avx512,
}

impl Level {
    /// The level the kernels run at: the widest this CPU has, capped by the environment's
    /// `STOKER_SIMD` (`avx2` or `scalar`; any other value caps nothing). Read once.
    fn current() -> Level {
        static LEVEL: OnceLock<Level> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            let cap = match std::env::var("STOKER_SIMD").as_deref() {
                Ok("scalar") => Level::Scalar,
                Ok("avx2") => Level::Avx2,
                _ => Level::Avx512,
            };
            Level::detected().min(cap)
        })
    }

    /// The widest level this CPU has.
    fn detected() -> Level {
        match Isa::at(Level::Avx512) {
            Isa::Scalar => Level::Scalar,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2(_) => Level::Avx2,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512(_) => Level::Avx512,
        }
    }

    /// Every level this CPU has, narrowest first (the tests run each).
    #[cfg(test)]
    fn available() -> Vec<Level> {
        [Level::Scalar, Level::Avx2, Level::Avx512]
            .into_iter()
            .filter(|l| *l <= Level::detected())
            .collect()
    }
}

/// The instruction set's token a call runs with, for `level` (at most what the CPU has).
#[derive(Clone, Copy)]
enum Isa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2(V3),
    #[cfg(target_arch = "x86_64")]
    Avx512(V4),
}

impl Isa {
    fn at(level: Level) -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if level >= Level::Avx512 {
                if let Some(simd) = V4::try_new() {
                    return Isa::Avx512(simd);
                }
            }
            if level >= Level::Avx2 {
                if let Some(simd) = V3::try_new() {
                    return Isa::Avx2(simd);
                }
            }
        }
        let _ = level;
        Isa::Scalar
    }
}

/// The kernels an instruction set implements; the loops around them are generic.
/// Every method is `#[inline(always)]` in its implementation, so that it is compiled
/// inside the loop that `pulp` runs with the CPU's features enabled.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
trait Kernels: Copy {
    /// One output row of the vertical pass (see [`vertical_pass`]): `rows` holds its taps'
    /// source rows (`line` bytes apart), `w` and `pairs` their weights.
    fn vertical(self, rows: &[u8], line: usize, w: &[i32], pairs: &[[i32; 2]], out: &mut [u8]);

    /// One row of [`planes_f32_image`]: `rgb`'s pixels into the three planes' rows.
    fn planes(
        self,
        rgb: &[u8],
        lut: &[[f32; 256]; 3],
        norm: &Normalisation,
        flip: bool,
        out: [&mut [f32]; 3],
    );

    /// Four rows of the horizontal pass (see [`HorizontalJob`]).
    fn horizontal(self, rows: HorizontalRows<'_, '_>);

    /// Two RGB rows `a` and `b` into `row8`'s layout, `[a.r, a.g, a.b, 0, b.r, b.g, b.b,
    /// 0]` per pixel, as far as both reach.
    fn interleave(self, a: &[u8], b: &[u8], out: &mut [[u8; 8]]);
}

/// [`Kernels::horizontal`]'s arguments: `row8`'s two halves (two rows interleaved in
/// each), the taps, and the four output rows (`None` past the image's last row).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct HorizontalRows<'a, 'o> {
    row8: [&'a [[u8; 8]]; 2],
    bounds: &'a [(usize, usize)],
    pairs: &'a [[i32; 2]],
    kp: usize,
    cfirst: usize,
    outs: [Option<&'o mut [u8]>; 4],
}

/// `$name(simd, job)`: the loop `$run` over a job, which `pulp` calls with the CPU's
/// features enabled. `call` names the loop directly so that it is inlined there: a
/// closure, or a function called through `FnOnce`, is compiled apart, without the
/// features, and each of its intrinsics becomes a call.
macro_rules! kernel {
    ($name:ident, $run:ident, $job:ty) => {
        #[cfg(target_arch = "x86_64")]
        struct $name<'a, S>(S, $job);

        #[cfg(target_arch = "x86_64")]
        impl<'a, S: Kernels> pulp::NullaryFnOnce for $name<'a, S> {
            type Output = ();

            #[inline(always)]
            fn call(self) {
                $run(self.0, self.1)
            }
        }
    };
}

/// [`vertical_pass`]'s arguments.
type VerticalJob<'a> = (&'a [u8], usize, usize, Taps<'a>, &'a mut [u8], usize);
/// [`planes_f32_image`]'s arguments.
type PlanesJob<'a> = (
    &'a [u8],
    (usize, usize, bool, bool),
    &'a [[f32; 256]; 3],
    &'a Normalisation,
    &'a mut [f32],
);

kernel!(VerticalPass, vertical_rows, VerticalJob<'a>);
kernel!(PlanesImage, planes_image, PlanesJob<'a>);

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
    vertical_pass_at(Level::current(), (h, line, first, taps, out, width));
}

fn vertical_pass_at(level: Level, job: VerticalJob) {
    match (Isa::at(level), job.3.pairs) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512(simd), Some(_)) => simd.vectorize(VerticalPass(simd, job)),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2(simd), Some(_)) => simd.vectorize(VerticalPass(simd, job)),
        _ => {
            let (h, line, first, taps, out, width) = job;
            for (rows, w, _, o) in vertical_row_jobs(h, line, first, taps, out, width) {
                vertical_scalar(rows, line, w, o, 0);
            }
        }
    }
}

/// One output row of a vertical pass: its taps' source rows, weights and weight pairs, and
/// the row.
type VerticalRow<'a> = (&'a [u8], &'a [i32], &'a [[i32; 2]], &'a mut [u8]);

/// Each output row of a vertical pass with its taps' rows, weights and weight pairs (empty
/// when the weights do not split).
#[inline(always)]
fn vertical_row_jobs<'a>(
    h: &'a [u8],
    line: usize,
    first: usize,
    taps: Taps<'a>,
    out: &'a mut [u8],
    width: usize,
) -> impl Iterator<Item = VerticalRow<'a>> {
    let kp = taps.ksize.div_ceil(2);
    taps.bounds
        .iter()
        .zip(out.chunks_exact_mut(width))
        .enumerate()
        .map(move |(y, (&(ymin, n), o))| {
            let w = &taps.weights[y * taps.ksize..y * taps.ksize + n];
            let rows = &h[(ymin - first) * line..(ymin - first + n) * line];
            let pairs = taps
                .pairs
                .map_or(&[][..], |p| &p[y * kp..y * kp + n.div_ceil(2)]);
            (rows, w, pairs, o)
        })
}

/// [`vertical_pass`]'s rows through `simd`'s kernel (the weights split: the caller checked).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn vertical_rows<S: Kernels>(simd: S, (h, line, first, taps, out, width): VerticalJob) {
    for (rows, w, pairs, o) in vertical_row_jobs(h, line, first, taps, out, width) {
        simd.vertical(rows, line, w, pairs, o);
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
    planes_f32_at(
        Level::current(),
        (rgb, (w, h, flip_h, flip_v), lut, norm, out),
    );
}

fn planes_f32_at(level: Level, job: PlanesJob) {
    match Isa::at(level) {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512(simd) => simd.vectorize(PlanesImage(simd, job)),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2(simd) => simd.vectorize(PlanesImage(simd, job)),
        Isa::Scalar => {
            let (rgb, (w, h, flip_h, flip_v), lut, _, out) = job;
            for (y, planes) in plane_rows(out, w, h).enumerate() {
                let srow = &rgb[src_index(flip_v, h, y) * w * 3..][..w * 3];
                planes_lut(srow, lut, flip_h, planes, 0);
            }
        }
    }
}

/// [`planes_f32_image`]'s rows through `simd`'s kernel.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn planes_image<S: Kernels>(simd: S, (rgb, (w, h, flip_h, flip_v), lut, norm, out): PlanesJob) {
    for (y, planes) in plane_rows(out, w, h).enumerate() {
        let srow = &rgb[src_index(flip_v, h, y) * w * 3..][..w * 3];
        simd.planes(srow, lut, norm, flip_h, planes);
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
/// computes it: by default the same two IEEE divisions and subtraction as the scalar
/// table, lane by lane; where [`Normalisation::new`] found that a division through the
/// divisor's reciprocal and one FMA correction (`q = a * r`, then `q + (a - q * d) * r`,
/// Markstein's) gives the table's value for every byte of every channel, that instead
/// (`reciprocals`), several times faster than a vector division. Either way each value
/// is bit-identical to the table's.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) struct Normalisation {
    /// Per-channel mean (0 when not normalising).
    pub mean: [f32; 3],
    /// Per-channel standard deviation (1 when not normalising).
    pub std: [f32; 3],
    /// `1 / std` per channel (rounded to f32; `1 / 255` is [`R255`]), where the corrected
    /// multiplications give the table exactly.
    pub reciprocals: Option<[f32; 3]>,
}

/// `1 / 255` rounded to f32: the first division's reciprocal.
pub(super) const R255: f32 = 1.0 / 255.0;

impl Normalisation {
    /// `mean` and `std` with the table `lut` holds their values in; checks the
    /// reciprocal path against all 768 of them.
    pub(super) fn new(mean: [f32; 3], std: [f32; 3], lut: &[[f32; 256]; 3]) -> Normalisation {
        let rstd = std.map(|s| 1.0 / s);
        let exact = (0..3).all(|c| {
            (0..256).all(|v| {
                let t = divide(v as f32, 255.0, R255);
                divide(t - mean[c], std[c], rstd[c]).to_bits() == lut[c][v].to_bits()
            })
        });
        Normalisation {
            mean,
            std,
            reciprocals: exact.then_some(rstd),
        }
    }
}

/// `a / d` through `r`, `d`'s reciprocal rounded to f32, as the vector kernels compute
/// it: `q = a * r`, then `q + (a - q * d) * r` with each product fused (`mul_add` is IEEE
/// `fusedMultiplyAdd`, as `vfnmadd` and `vfmadd` are). [`Normalisation::new`] checks it.
fn divide(a: f32, d: f32, r: f32) -> f32 {
    let q = a * r;
    (-q).mul_add(d, a).mul_add(r, q)
}

/// The byte shuffles that take channel `c` of 8 packed RGB pixels (24 bytes, loaded as
/// `[0, 16)` and `[8, 24)`) to lanes 0-7: byte `c + 3j` to lane `j`, from the first load
/// (`PICKS[2c]`) or the second (`PICKS[2c + 1]`); -1 zeroes a lane. Constants, so a row's
/// write does not build them.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
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
/// from [`split_pairs`] (`ksize.div_ceil(2)` pairs per output pixel, of which those of
/// the pixel's own taps are run). Output pixel `x` goes to bytes `3x..3x + 3` of its row:
/// four pixels as one 16-byte store where the row has room for it (the next four
/// overwrite its last 4 bytes; with 4 spare bytes at a row's end, every group of four
/// has room), the others as a 4-byte store each (a row needs a spare byte at its end).
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

/// Runs a [`HorizontalJob`]; false, writing nothing, where neither AVX2 nor AVX-512 is
/// present (the resize then runs its scalar rows).
pub(super) fn horizontal_pass<'s, F: Fn(usize) -> &'s [u8]>(job: HorizontalJob<'_, F>) -> bool {
    horizontal_pass_at(Level::current(), job)
}

fn horizontal_pass_at<'s, F: Fn(usize) -> &'s [u8]>(
    level: Level,
    job: HorizontalJob<'_, F>,
) -> bool {
    match Isa::at(level) {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512(simd) => simd.vectorize(HorizontalPass(simd, job)),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2(simd) => simd.vectorize(HorizontalPass(simd, job)),
        Isa::Scalar => {
            let _ = job;
            return false;
        }
    }
    true
}

#[cfg(target_arch = "x86_64")]
struct HorizontalPass<'a, S, F>(S, HorizontalJob<'a, F>);

#[cfg(target_arch = "x86_64")]
impl<'s, S: Kernels, F: Fn(usize) -> &'s [u8]> pulp::NullaryFnOnce for HorizontalPass<'_, S, F> {
    type Output = ();

    #[inline(always)]
    fn call(self) {
        horizontal_rows(self.0, self.1)
    }
}

/// [`horizontal_pass`]'s rows through `simd`'s kernel, four at a time.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn horizontal_rows<'s, S: Kernels, F: Fn(usize) -> &'s [u8]>(simd: S, j: HorizontalJob<'_, F>) {
    let kp = j.pairs.len() / j.bounds.len().max(1);
    let half = j.row8.len() / 2;
    let (row8a, row8b) = j.row8.split_at_mut(half);
    let mut r = 0;
    while r < j.rows {
        // Up to four rows: two interleaved in each half of `row8` (a missing row repeats
        // the last one, and its output is not written).
        let n = (j.rows - r).min(4);
        let src = |k: usize| (j.src_row)(r + k.min(n - 1));
        simd.interleave(src(0), src(1), row8a);
        simd.interleave(src(2), src(3), row8b);
        let mut outs = j.out[r * j.line..(r + n) * j.line].chunks_exact_mut(j.line);
        let outs = [outs.next(), outs.next(), outs.next(), outs.next()];
        simd.horizontal(HorizontalRows {
            row8: [&*row8a, &*row8b],
            bounds: j.bounds,
            pairs: j.pairs,
            kp,
            cfirst: j.cfirst,
            outs,
        });
        r += n;
    }
}

/// The scalar interleave of `a` and `b` into `out` from pixel `from` on.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn interleave_scalar(a: &[u8], b: &[u8], out: &mut [[u8; 8]], from: usize) {
    let (a, b) = (&a[3 * from..], &b[3 * from..]);
    for ((d, p), q) in out[from..]
        .iter_mut()
        .zip(a.chunks_exact(3))
        .zip(b.chunks_exact(3))
    {
        *d = [p[0], p[1], p[2], 0, q[0], q[1], q[2], 0];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A fresh seed per run (printed on failure) and numbers from it.
    use crate::rng::fresh_for_tests as rng;

    /// The vectorised vertical pass, at every level this CPU has, gives the scalar one's
    /// bytes: 1 to 70 taps, rows shorter and longer than a vector (up to 4 of 512 bits),
    /// and weights up to 1.5 * 2^22, some negative (both split).
    #[test]
    fn the_vertical_pass_is_the_scalar_one() {
        let (seed, mut next) = rng();
        for case in 0..300 {
            let n = 1 + next(70) as usize;
            let len = 1 + next(260) as usize;
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
            let mut plain = vec![0u8; 2 * len];
            let (p0, p1) = plain.split_at_mut(len);
            vertical_scalar(&taps, line, &w, p0, 0);
            vertical_scalar(&taps[k * line..], line, &w[k..], p1, 0);
            for level in Level::available() {
                let rows = Taps {
                    bounds: &bounds,
                    weights: &weights,
                    ksize: n,
                    pairs: Some(&pairs),
                };
                let mut fast = vec![0u8; 2 * len];
                vertical_pass_at(level, (&taps, line, 0, rows, &mut fast, len));
                assert_eq!(
                    fast, plain,
                    "seed {seed}, case {case}, {level:?}: {n} taps, {len} bytes"
                );
            }
        }
    }

    /// The vectorised normalising write, at every level, gives the table's floats bit for
    /// bit, for random means and deviations (and none: 0 and 1), flipped or not, widths
    /// that are and are not multiples of 8 and 16; through the reciprocals where they are
    /// exact and through the divisions where they are not (both are run).
    #[test]
    fn the_vectorised_write_is_the_table() {
        let (seed, mut next) = rng();
        for case in 0..200 {
            let (w, h) = (1 + next(300) as usize, 1 + next(4) as usize);
            let rgb: Vec<u8> = (0..3 * w * h).map(|_| next(256) as u8).collect();
            let (mean, std) = if case % 4 == 0 {
                ([0.0; 3], [1.0; 3])
            } else {
                (
                    std::array::from_fn(|_| next(1000) as f32 / 999.0),
                    std::array::from_fn(|_| 0.01 + next(1000) as f32 / 500.0),
                )
            };
            let lut: [[f32; 256]; 3] = std::array::from_fn(|c| {
                std::array::from_fn(|v| (v as f32 / 255.0 - mean[c]) / std[c])
            });
            let exact = Normalisation::new(mean, std, &lut);
            let divided = Normalisation {
                reciprocals: None,
                ..exact
            };
            let (flip_h, flip_v) = (next(2) == 1, next(2) == 1);
            let mut plain = vec![0f32; 3 * w * h];
            for (y, planes) in plane_rows(&mut plain, w, h).enumerate() {
                let sy = if flip_v { h - 1 - y } else { y };
                planes_lut(&rgb[sy * w * 3..][..w * 3], &lut, flip_h, planes, 0);
            }
            let bits = |p: &[f32]| -> Vec<u32> { p.iter().map(|v| v.to_bits()).collect() };
            for level in Level::available() {
                for norm in [&exact, &divided] {
                    let mut fast = vec![0f32; 3 * w * h];
                    planes_f32_at(level, (&rgb, (w, h, flip_h, flip_v), &lut, norm, &mut fast));
                    assert_eq!(
                        bits(&fast),
                        bits(&plain),
                        "seed {seed}, case {case}, {level:?}: {w}x{h}, flips {flip_h} {flip_v}, \
                         reciprocals {:?}",
                        norm.reciprocals
                    );
                }
            }
        }
    }

    /// The reciprocals are taken where they give the table (torchvision's ImageNet
    /// normalisation, none, random ones) and refused where they do not: a deviation so
    /// small that `1 / std` overflows to infinity.
    #[test]
    fn the_reciprocals_are_checked_against_the_table() {
        let table = |mean: [f32; 3], std: [f32; 3]| -> [[f32; 256]; 3] {
            std::array::from_fn(|c| std::array::from_fn(|v| (v as f32 / 255.0 - mean[c]) / std[c]))
        };
        let imagenet = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]);
        for (mean, std) in [imagenet, ([0.0; 3], [1.0; 3])] {
            let lut = table(mean, std);
            assert!(Normalisation::new(mean, std, &lut).reciprocals.is_some());
        }
        let (seed, mut next) = rng();
        for case in 0..200 {
            let mean: [f32; 3] = std::array::from_fn(|_| next(1000) as f32 / 999.0);
            let std: [f32; 3] = std::array::from_fn(|_| 0.01 + next(100_000) as f32 / 50_000.0);
            let lut = table(mean, std);
            let norm = Normalisation::new(mean, std, &lut);
            // Whatever it decided, it decided by the table.
            let agrees = (0..3).all(|c| {
                (0..256).all(|v| {
                    let t = divide(v as f32, 255.0, 1.0 / 255.0);
                    divide(t - mean[c], std[c], 1.0 / std[c]).to_bits() == lut[c][v].to_bits()
                })
            });
            assert_eq!(
                norm.reciprocals.is_some(),
                agrees,
                "seed {seed}, case {case}"
            );
        }
        let tiny = ([0.5; 3], [1e-39; 3]);
        let lut = table(tiny.0, tiny.1);
        assert!(Normalisation::new(tiny.0, tiny.1, &lut)
            .reciprocals
            .is_none());
    }

    /// The vectorised horizontal pass, at every vector level, gives the scalar sums: random
    /// rows (1 to 11 of them, so the last group of four is short), 1 to 9 taps of random
    /// split weights per output pixel, and the interleave of rows of any width.
    #[test]
    fn the_horizontal_pass_is_the_scalar_one() {
        let (seed, mut next) = rng();
        for case in 0..200 {
            let rows = 1 + next(11) as usize;
            let width = 1 + next(90) as usize;
            let ksize = 1 + next(9) as usize;
            let ow = 1 + next(70) as usize;
            let src: Vec<Vec<u8>> = (0..rows)
                .map(|_| (0..3 * width).map(|_| next(256) as u8).collect())
                .collect();
            // Each output pixel's taps start anywhere their count fits the row.
            let bounds: Vec<(usize, usize)> = (0..ow)
                .map(|_| {
                    let n = 1 + next(ksize.min(width) as u32) as usize;
                    (next((width - n + 1) as u32) as usize, n)
                })
                .collect();
            let cap = (3 << 21) / ksize as u32;
            let mut weights = vec![0i32; ow * ksize];
            for (x, &(_, n)) in bounds.iter().enumerate() {
                for t in 0..n {
                    weights[x * ksize + t] =
                        next(cap) as i32 - (cap / 2) as i32 * i32::from(next(4) == 0);
                }
            }
            let mut pairs = Vec::new();
            assert!(split_pairs(&weights, ksize, &mut pairs));
            // Rows with 1 to 4 spare bytes (the AVX-512 pass stores 16 bytes where 4 fit).
            let line = ow * 3 + 1 + next(4) as usize;
            let mut plain = vec![0u8; rows * line];
            for (r, row) in src.iter().enumerate() {
                for (x, &(xmin, n)) in bounds.iter().enumerate() {
                    for c in 0..3 {
                        let mut acc = 1i32 << (PRECISION_BITS - 1);
                        for t in 0..n {
                            acc += i32::from(row[3 * (xmin + t) + c]) * weights[x * ksize + t];
                        }
                        plain[r * line + 3 * x + c] = clip8(acc);
                    }
                }
            }
            for level in Level::available() {
                let half = width + ksize + 1;
                let mut row8 = vec![[0u8; 8]; 2 * half];
                let mut fast = vec![0u8; rows * line];
                let job = HorizontalJob {
                    rows,
                    src_row: |r: usize| &src[r][..],
                    row8: &mut row8,
                    bounds: &bounds,
                    pairs: &pairs,
                    cfirst: 0,
                    out: &mut fast,
                    line,
                };
                let ran = horizontal_pass_at(level, job);
                assert_eq!(ran, level > Level::Scalar, "{level:?}");
                if !ran {
                    continue;
                }
                // The spare byte at each row's end is scratch.
                for r in 0..rows {
                    assert_eq!(
                        fast[r * line..r * line + 3 * ow],
                        plain[r * line..r * line + 3 * ow],
                        "seed {seed}, case {case}, {level:?}: row {r} of {rows}, {width} px, \
                         {ksize} taps"
                    );
                }
            }
        }
    }

    /// `STOKER_SIMD` caps the level, and AVX-512 is taken where the CPU has it.
    #[test]
    fn the_level_is_the_widest_the_cpu_has() {
        let detected = Level::detected();
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            detected >= Level::Avx512,
            pulp::x86::V4::try_new().is_some()
        );
        let expected = match std::env::var("STOKER_SIMD").as_deref() {
            Ok("scalar") => Level::Scalar,
            Ok("avx2") => detected.min(Level::Avx2),
            _ => detected,
        };
        assert_eq!(Level::current(), expected);
    }
}

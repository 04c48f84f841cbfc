//! The image resize: Pillow's `Image.resize(size, BILINEAR, box)` in its fixed point, over
//! the decoded window, and the coefficient tables GPU backends upload to do the same.

use super::simd::{
    clip8, horizontal_pass, split_pairs, vertical_pass, HorizontalJob, Taps, PRECISION_BITS,
};
use super::Scratch;
use crate::augment::plan::{SamplePlan, ANTIALIAS};
use crate::decode::{set_len, DecodeOptions, Format, Image8, ImageInfo};

/// Fixed-point resize coefficients of one axis, as the image resize uses them: filled by
/// [`resize_coeffs`] for GPU backends, which apply them with the same integer arithmetic
/// (`(1 << 21) + sum(pixel * weight)`, then `clamp(acc >> 22, 0, 255)`).
#[derive(Debug, Default)]
pub struct Coeffs {
    /// Per output pixel: first source index (in the frame of the whole scaled image, not
    /// the window) and tap count (at most `ksize`).
    pub bounds: Vec<(usize, usize)>,
    /// `ksize` fixed-point weights per output pixel (22 fractional bits); the weights past
    /// a pixel's own tap count are zero.
    pub weights: Vec<i32>,
    /// Weights stored per output pixel.
    pub ksize: usize,
    /// Unnormalised weights of one output pixel (reused).
    tmp: Vec<f64>,
    /// One source row widened to 4 lanes (horizontal pass only).
    row4: Vec<[u8; 4]>,
    /// Source rows interleaved pixel by pixel, each pixel widened to 4 lanes (horizontal
    /// pass only): two rows for the unrolled kernels, two halves of two rows each for the
    /// vectorised pass.
    row8: Vec<[u8; 8]>,
    /// The weights split into pairs, as the vectorised passes take them ([`split_pairs`]).
    pairs: Vec<[i32; 2]>,
}

impl Coeffs {
    /// The source range `[first, last)` the taps read (`empty` = `(lo, lo)` when there
    /// are none).
    pub fn span(&self, lo: usize) -> (usize, usize) {
        let first = self.bounds.iter().map(|b| b.0).min().unwrap_or(lo);
        let last = self
            .bounds
            .iter()
            .map(|b| b.0 + b.1)
            .max()
            .unwrap_or(first)
            .max(first);
        (first, last)
    }
}

fn triangle(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

/// Pillow's `precompute_coeffs` for the bilinear filter, then its 8-bit normalisation.
/// Taps are clamped to `[lo, hi)`: the image (Pillow's behaviour at the borders), or the
/// decoded window when that is what exists (it covers every tap, see [`needed_window`]).
fn precompute(
    c: &mut Coeffs,
    lo: usize,
    hi: usize,
    in0: f64,
    in1: f64,
    out_size: usize,
    antialias: bool,
) {
    let scale = (in1 - in0) / out_size as f64;
    let filterscale = if antialias { scale.max(1.0) } else { 1.0 };
    let support = filterscale;
    let ksize = (support.ceil() as usize) * 2 + 1;
    c.ksize = ksize;
    c.bounds.clear();
    c.weights.clear();
    c.weights.resize(out_size * ksize, 0);
    let mut k = std::mem::take(&mut c.tmp);
    k.clear();
    k.resize(ksize, 0.0);
    let ss = 1.0 / filterscale;
    for xx in 0..out_size {
        let center = in0 + (xx as f64 + 0.5) * scale;
        let (xmin, xmax) = tap_range(center, support, lo, hi);
        let n = (xmax - xmin).min(ksize);
        let mut ww = 0.0;
        for (x, kx) in k.iter_mut().enumerate().take(n) {
            let w = triangle((x as f64 + xmin as f64 - center + 0.5) * ss);
            *kx = w;
            ww += w;
        }
        let row = &mut c.weights[xx * ksize..(xx + 1) * ksize];
        for x in 0..n {
            let w = if ww != 0.0 { k[x] / ww } else { 0.0 };
            let f = w * f64::from(1u32 << PRECISION_BITS);
            row[x] = if f < 0.0 {
                (f - 0.5) as i32
            } else {
                (f + 0.5) as i32
            };
        }
        c.bounds.push((xmin, n));
    }
    c.tmp = k;
}

/// Pillow's tap range `[xmin, xmax)` for one output pixel, clamped to `[lo, hi)`.
#[inline]
fn tap_range(center: f64, support: f64, lo: usize, hi: usize) -> (usize, usize) {
    let xmin = ((center - support + 0.5) as i64).max(lo as i64) as usize;
    let xmax = ((center + support + 0.5) as i64).clamp(lo as i64, hi as i64) as usize;
    let xmin = xmin.min(hi.saturating_sub(1)).max(lo);
    (xmin, xmax.max(xmin))
}

/// The crop box of `plan` in the frame of an image decoded at `1/scale`.
fn scaled_box(plan: &SamplePlan, scale: u32) -> (f64, f64, f64, f64) {
    let s = f64::from(scale.max(1));
    let (x0, y0) = (f64::from(plan.crop_x) / s, f64::from(plan.crop_y) / s);
    (
        x0,
        y0,
        x0 + f64::from(plan.crop_w) / s,
        y0 + f64::from(plan.crop_h) / s,
    )
}

/// The horizontal (`kx`) and vertical (`ky`) coefficients [`execute_image`](super::execute_image) uses to resize
/// the plan's crop box of a window of `size` pixels at `origin` in an image decoded at
/// `1/scale`: exactly the tables the CPU path computes, for GPU backends to upload.
pub fn resize_coeffs(
    plan: &SamplePlan,
    origin: (u32, u32),
    size: (u32, u32),
    scale: u32,
    kx: &mut Coeffs,
    ky: &mut Coeffs,
) {
    let (ox, oy) = (origin.0 as usize, origin.1 as usize);
    let antialias = plan.has(ANTIALIAS);
    let (x0, y0, x1, y1) = scaled_box(plan, scale);
    let (vx, vy) = plan.valid_rect();
    placed(
        kx,
        ox,
        ox + size.0 as usize,
        x0,
        x1,
        plan.out_width,
        vx,
        antialias,
    );
    placed(
        ky,
        oy,
        oy + size.1 as usize,
        y0,
        y1,
        plan.out_height,
        vy,
        antialias,
    );
}

/// [`precompute`] for the output pixels `[v0, v1)` of `out` (the image's part of the
/// frame, [`SamplePlan::valid_rect`]): the box resized onto them, and every other output
/// pixel given no taps (it is fill), at the source index of its nearest neighbour in
/// `[v0, v1)` so the rows and columns the taps read stay those of the image.
#[allow(clippy::too_many_arguments)]
fn placed(
    c: &mut Coeffs,
    lo: usize,
    hi: usize,
    in0: f64,
    in1: f64,
    out: u32,
    (v0, v1): (u32, u32),
    antialias: bool,
) {
    let (out, v0, v1) = (out as usize, v0 as usize, (v1 as usize).min(out as usize));
    if (v0, v1) == (0, out) {
        return precompute(c, lo, hi, in0, in1, out, antialias);
    }
    let n = v1.saturating_sub(v0);
    precompute(c, lo, hi, in0, in1, n.max(1), antialias);
    let k = c.ksize;
    let (first, last) = (
        c.bounds.first().map_or(lo, |b| b.0),
        c.bounds.last().map_or(lo, |b| b.0),
    );
    let (bounds, weights) = (
        std::mem::take(&mut c.bounds),
        std::mem::take(&mut c.weights),
    );
    c.bounds = (0..out)
        .map(|i| match i {
            i if i < v0 => (first, 0),
            i if i >= v1 || n == 0 => (last, 0),
            i => bounds[i - v0],
        })
        .collect();
    c.weights = vec![0; out * k];
    if n > 0 {
        c.weights[v0 * k..v1 * k].copy_from_slice(&weights[..n * k]);
    }
}

impl SamplePlan {
    /// The crop-aware decode request for this plan on an image whose headers are `info`:
    /// the plan's IDCT scale for JPEGs (1 for other formats) and only the window its
    /// resize reads. `base` supplies the limits, strictness and orientation.
    pub fn decode_options(&self, base: DecodeOptions, info: &ImageInfo) -> DecodeOptions {
        let (w, h) = if base.orientation {
            info.oriented_size()
        } else {
            (info.width, info.height)
        };
        let scale = if info.format == Format::Jpeg {
            self.decode_scale.max(1)
        } else {
            1
        };
        let full = (w.div_ceil(scale), h.div_ceil(scale));
        DecodeOptions {
            scale,
            window: Some(needed_window(self, full, scale)),
            ..base
        }
    }
}

/// The part `[x0, y0, x1, y1)` of an image of `full` size decoded at `1/scale` that the
/// plan's image resize reads: what a crop-aware decode must produce.
pub fn needed_window(plan: &SamplePlan, full: (u32, u32), scale: u32) -> [u32; 4] {
    let (x0, y0, x1, y1) = scaled_box(plan, scale);
    let ((vx0, vx1), (vy0, vy1)) = plan.valid_rect();
    // Over the output pixels that show the box (the valid part of the frame).
    let axis = |b0: f64, b1: f64, out: u32, size: u32| -> (u32, u32) {
        let out = out.max(1) as usize;
        let sc = (b1 - b0) / out as f64;
        let support = if plan.has(ANTIALIAS) {
            sc.max(1.0)
        } else {
            1.0
        };
        let (first, _) = tap_range(b0 + 0.5 * sc, support, 0, size as usize);
        let (_, last) = tap_range(b0 + (out as f64 - 0.5) * sc, support, 0, size as usize);
        (
            first as u32,
            (last as u32).max(first as u32 + 1).min(size.max(1)),
        )
    };
    let (wx0, wx1) = axis(x0, x1, vx1.saturating_sub(vx0), full.0);
    let (wy0, wy1) = axis(y0, y1, vy1.saturating_sub(vy0), full.1);
    [wx0, wy0, wx1, wy1]
}

/// Resamples the plan's crop box of `src` to `out_width x out_height` RGB u8 into `out`.
#[multiversion::multiversion(targets("x86_64+avx2+fma", "x86_64+sse4.1", "aarch64+neon"))]
pub(super) fn resize_rgb_impl(
    plan: &SamplePlan,
    src: &Image8,
    out: &mut Vec<u8>,
    horizontal: &mut Vec<u8>,
    kx: &mut Coeffs,
    ky: &mut Coeffs,
) {
    let (ox, oy) = (src.origin.0 as usize, src.origin.1 as usize);
    let (sw, sh) = (src.width as usize, src.height as usize);
    let (ow, oh) = (plan.out_width as usize, plan.out_height as usize);
    let antialias = plan.has(ANTIALIAS);
    let (x0, y0, x1, y1) = scaled_box(plan, src.scale);
    let (vx, vy) = plan.valid_rect();
    placed(kx, ox, ox + sw, x0, x1, plan.out_width, vx, antialias);
    placed(ky, oy, oy + sh, y0, y1, plan.out_height, vy, antialias);
    // Rows the vertical pass reads, in window coordinates.
    let (first, last) = ky.span(oy);
    let rows = last - first;
    // The horizontal pass works on 4 lanes per pixel (RGB and a zero lane): each tap is one
    // 4-lane multiply-add, explicit SIMD where the CPU allows ([`horizontal_pass`]) and the
    // vectoriser's elsewhere. It writes packed RGB rows, each pixel as one 4-byte store whose
    // zero lane the next pixel overwrites, or (AVX-512) four pixels as one 16-byte store, of
    // which the next four overwrite the last 4 bytes (so a row has 4 spare bytes); the
    // vertical pass ([`vertical_pass`]) reads them as bytes.
    let line = ow * 3 + 4;
    set_len(horizontal, rows * line);
    let (cfirst, clast) = kx.span(ox);
    let mut row4 = std::mem::take(&mut kx.row4);
    let mut row8 = std::mem::take(&mut kx.row8);
    // Padded by `ksize` zero pixels so every output pixel can read a full `ksize` taps
    // (the weights past its own `n` taps are zero).
    set_len(&mut row4, clast - cfirst + kx.ksize);
    row4[clast - cfirst..].fill([0; 4]);
    let src_row = |sy: usize| &src.data[(sy * sw + cfirst - ox) * 3..(sy * sw + clast - ox) * 3];
    let mut r = 0;
    // Vectorised where the CPU allows: four rows at a time, any tap count.
    let mut pairs = std::mem::take(&mut kx.pairs);
    if split_pairs(&kx.weights, kx.ksize, &mut pairs) {
        // Two halves (two rows interleaved in each), each padded.
        let half = clast - cfirst + kx.ksize + 1;
        set_len(&mut row8, 2 * half);
        row8[clast - cfirst..half].fill([0; 8]);
        row8[half + clast - cfirst..].fill([0; 8]);
        let job = HorizontalJob {
            rows,
            src_row: |r: usize| src_row(first + r - oy),
            row8: &mut row8,
            bounds: &kx.bounds,
            pairs: &pairs,
            cfirst,
            out: &mut horizontal[..rows * line],
            line,
        };
        if horizontal_pass(job) {
            r = rows;
        }
    }
    kx.pairs = pairs;
    // Two rows at a time where the tap count has an unrolled kernel: both rows share the
    // output pixel's taps and weights, which are then loaded once for both.
    if matches!(kx.ksize, 3 | 5 | 7 | 9) {
        set_len(&mut row8, clast - cfirst + kx.ksize);
        row8[clast - cfirst..].fill([0; 8]);
        while r + 2 <= rows {
            let (a, b) = (src_row(first + r - oy), src_row(first + r + 1 - oy));
            for ((d, p), q) in row8
                .iter_mut()
                .zip(a.chunks_exact(3))
                .zip(b.chunks_exact(3))
            {
                *d = [p[0], p[1], p[2], 0, q[0], q[1], q[2], 0];
            }
            let (ha, hb) = horizontal[r * line..(r + 2) * line].split_at_mut(line);
            match kx.ksize {
                3 => horizontal_pair::<3>(kx, &row8, cfirst, ha, hb),
                5 => horizontal_pair::<5>(kx, &row8, cfirst, ha, hb),
                7 => horizontal_pair::<7>(kx, &row8, cfirst, ha, hb),
                _ => horizontal_pair::<9>(kx, &row8, cfirst, ha, hb),
            }
            r += 2;
        }
    }
    for r in r..rows {
        let srow = src_row(first + r - oy);
        for (d, p) in row4.iter_mut().zip(srow.chunks_exact(3)) {
            *d = [p[0], p[1], p[2], 0];
        }
        let hrow = &mut horizontal[r * line..(r + 1) * line];
        match kx.ksize {
            3 => horizontal_row::<3>(kx, &row4, cfirst, hrow),
            5 => horizontal_row::<5>(kx, &row4, cfirst, hrow),
            7 => horizontal_row::<7>(kx, &row4, cfirst, hrow),
            9 => horizontal_row::<9>(kx, &row4, cfirst, hrow),
            _ => {
                for (xx, (&(xmin, n), o)) in
                    kx.bounds.iter().zip(hrow.chunks_exact_mut(3)).enumerate()
                {
                    let w = &kx.weights[xx * kx.ksize..xx * kx.ksize + n];
                    let taps = &row4[xmin - cfirst..xmin - cfirst + n];
                    let mut acc = [1i32 << (PRECISION_BITS - 1); 4];
                    for (p, &wt) in taps.iter().zip(w) {
                        for k in 0..4 {
                            acc[k] += i32::from(p[k]) * wt;
                        }
                    }
                    for k in 0..3 {
                        o[k] = clip8(acc[k]);
                    }
                }
            }
        }
    }
    kx.row4 = row4;
    kx.row8 = row8;
    set_len(out, ow * oh * 3);
    let mut pairs = std::mem::take(&mut ky.pairs);
    let split = split_pairs(&ky.weights, ky.ksize, &mut pairs);
    let taps = Taps {
        bounds: &ky.bounds,
        weights: &ky.weights,
        ksize: ky.ksize,
        pairs: split.then_some(&pairs[..]),
    };
    vertical_pass(horizontal, line, first, taps, out, ow * 3);
    ky.pairs = pairs;
}

/// One row of the horizontal pass with exactly `K` taps per output pixel (zero weights
/// past a pixel's own taps), so the tap loop is unrolled.
///
/// This loop and [`horizontal_pair`]'s are written out each, not shared through an
/// iterator helper: the helper's `Zip::next` is not inlined into the target-feature
/// (AVX2) copy of `resize_rgb_impl` that calls them, and the CPU pipeline lost 15% of its
/// throughput that way (`perf` on `stoker bench pipeline --backend cpu`).
#[inline(always)]
fn horizontal_row<const K: usize>(kx: &Coeffs, row4: &[[u8; 4]], cfirst: usize, hrow: &mut [u8]) {
    for (xx, (&(xmin, _), w)) in kx.bounds.iter().zip(kx.weights.chunks_exact(K)).enumerate() {
        let (Some(taps), Some(o)) = (
            row4.get(xmin - cfirst..xmin - cfirst + K),
            hrow.get_mut(3 * xx..3 * xx + 4),
        ) else {
            continue;
        };
        let mut acc = [1i32 << (PRECISION_BITS - 1); 4];
        for t in 0..K {
            for k in 0..4 {
                acc[k] += i32::from(taps[t][k]) * w[t];
            }
        }
        o.copy_from_slice(&acc.map(clip8));
    }
}

/// [`horizontal_row`] for two rows at once: `row8` holds both rows' pixels side by side,
/// `ha` and `hb` receive them.
#[inline(always)]
fn horizontal_pair<const K: usize>(
    kx: &Coeffs,
    row8: &[[u8; 8]],
    cfirst: usize,
    ha: &mut [u8],
    hb: &mut [u8],
) {
    for (xx, (&(xmin, _), w)) in kx.bounds.iter().zip(kx.weights.chunks_exact(K)).enumerate() {
        let (Some(taps), Some(oa), Some(ob)) = (
            row8.get(xmin - cfirst..xmin - cfirst + K),
            ha.get_mut(3 * xx..3 * xx + 4),
            hb.get_mut(3 * xx..3 * xx + 4),
        ) else {
            continue;
        };
        let mut acc = [1i32 << (PRECISION_BITS - 1); 8];
        for t in 0..K {
            for k in 0..8 {
                acc[k] += i32::from(taps[t][k]) * w[t];
            }
        }
        let v = acc.map(clip8);
        oa.copy_from_slice(&v[..4]);
        ob.copy_from_slice(&v[4..]);
    }
}

/// Executes a plan without flips, jitter or normalisation and returns the RGB u8 result:
/// the geometric part alone (for tests, previews and contact sheets).
pub fn resize_only(plan: &SamplePlan, src: &Image8) -> Vec<u8> {
    let mut s = Scratch::default();
    resize_rgb_impl(
        plan,
        src,
        &mut s.resized,
        &mut s.horizontal,
        &mut s.kx,
        &mut s.ky,
    );
    s.resized
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::Augment;

    /// Pillow's two passes written plainly, one value at a time, from the same tables.
    fn plain_resize(plan: &SamplePlan, src: &Image8) -> Vec<u8> {
        let (mut kx, mut ky) = (Coeffs::default(), Coeffs::default());
        resize_coeffs(
            plan,
            src.origin,
            (src.width, src.height),
            src.scale,
            &mut kx,
            &mut ky,
        );
        let (ox, oy, sw) = (
            src.origin.0 as usize,
            src.origin.1 as usize,
            src.width as usize,
        );
        let (ow, oh) = (plan.out_width as usize, plan.out_height as usize);
        fn tap(c: &Coeffs, i: usize) -> impl Iterator<Item = (usize, &i32)> {
            let (first, n) = c.bounds[i];
            (first..first + n).zip(&c.weights[i * c.ksize..i * c.ksize + n])
        }
        let horizontal = |y: usize, x: usize, ch: usize| -> u8 {
            let mut acc = 1i32 << (PRECISION_BITS - 1);
            for (sx, &w) in tap(&kx, x) {
                acc += i32::from(src.data[((y - oy) * sw + sx - ox) * 3 + ch]) * w;
            }
            clip8(acc)
        };
        let mut out = vec![0u8; ow * oh * 3];
        for yy in 0..oh {
            for xx in 0..ow {
                for ch in 0..3 {
                    let mut acc = 1i32 << (PRECISION_BITS - 1);
                    for (sy, &w) in tap(&ky, yy) {
                        acc += i32::from(horizontal(sy, xx, ch)) * w;
                    }
                    out[(yy * ow + xx) * 3 + ch] = clip8(acc);
                }
            }
        }
        out
    }

    /// The unrolled kernels (two rows at a time, then one; 3 to 9 taps; the general loop
    /// past 9) give what the plain passes give, bit for bit, over random images, windows,
    /// crops, odd and even row counts, upscales and downscales.
    #[test]
    fn the_fast_resize_is_the_plain_one() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u32| -> u32 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % u64::from(n.max(1))) as u32
        };
        for case in 0..60 {
            let (w, h) = (8 + next(300), 8 + next(300));
            let size = 4 + next(120);
            let aug = Augment::new()
                .random_resized_crop(size, (0.02, 1.0), (0.5, 2.0))
                .antialias(case % 5 != 0);
            let plan = aug.plan(7, case, case, w, h);
            let full = (w, h);
            let [x0, y0, x1, y1] = needed_window(&plan, full, 1);
            // Sometimes the window exactly, sometimes a wider one.
            let grow = next(2);
            let (x0, y0) = (x0.saturating_sub(grow), y0.saturating_sub(grow));
            let (x1, y1) = ((x1 + grow).min(w), (y1 + grow).min(h));
            let (ww, wh) = (x1 - x0, y1 - y0);
            let src = Image8 {
                width: ww,
                height: wh,
                data: (0..ww * wh * 3).map(|_| next(256) as u8).collect(),
                origin: (x0, y0),
                full,
                scale: 1,
            };
            assert_eq!(
                resize_only(&plan, &src),
                plain_resize(&plan, &src),
                "case {case}: {w}x{h} -> {size}, window {ww}x{wh} at ({x0}, {y0})"
            );
        }
    }
}

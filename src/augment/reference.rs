//! The CPU definition of every pixel a [`SamplePlan`] produces. GPU shaders and kernels
//! are tested against these functions.
//!
//! - Image resize: Pillow's `Image.resize(size, BILINEAR, box)`: separable triangle filter,
//!   support widened by the scale factor when downscaling (antialias), half-pixel centres,
//!   horizontal pass then vertical, 22-bit fixed-point coefficients, u8 between passes.
//!   Without [`ANTIALIAS`] the support stays 1 (plain bilinear).
//! - Label resize: Pillow's NEAREST over the same box: `src = floor(x0 + (i + 0.5) * scale)`.
//! - Jitter (image planes only), in the plan's order, as torchvision.transforms.v2 does on
//!   u8 tensors: brightness blends with black, contrast with the mean of the (floored)
//!   grayscale, saturation with the (floored) grayscale, each result clamped and truncated
//!   to u8; hue through HSV, scaled back by 255.999 and truncated. The colour ops after
//!   it, likewise on u8 in the plan's order: grayscale, posterize, solarize (integer);
//!   auto-contrast and equalize (torchvision's f32 and integer steps from each channel's
//!   extremes and histogram); sharpness (the 3x3 smoothing exactly, the blend in f32);
//!   Gaussian blur (separable, integer weights, exact sums, [`gaussian_blur`]).
//! - Affine warp ([`AFFINE`]), in the output frame after the jitter, as
//!   torchvision.transforms.v2's `affine` does on u8 tensors (`grid_sample`, zero
//!   padding, the fill blended by the interpolated coverage, rounded): the position each
//!   output pixel reads is exact fixed point ([`SamplePlan::affine_source`]), bilinear
//!   weights have [`AFFINE_WEIGHT_BITS`] bits and the arithmetic is integer, so every
//!   backend computes the same value. Label planes: the nearest pixel of the resized
//!   plane (ties to even, as `grid_sample`'s nearest mode), the mask fill outside.
//! - Flips, then `(x / 255 - mean) / std` for float outputs, layout and dtype.

use half::f16;

use super::plan::{
    SamplePlan, AFFINE, AFFINE_FRAC_BITS, AFFINE_WEIGHT_BITS, ANTIALIAS, BLUR_WEIGHT_BITS, ERASE,
    FLIP_H, FLIP_V, JITTER, MAX_BLUR_KERNEL, NORMALIZE, OP_AUTOCONTRAST, OP_BLUR, OP_BRIGHTNESS,
    OP_CONTRAST, OP_EQUALIZE, OP_GRAYSCALE, OP_HUE, OP_POSTERIZE, OP_SATURATION, OP_SHARPNESS,
    OP_SOLARIZE,
};
use super::{DType, Layout};
use crate::decode::{set_len, DecodeOptions, Format, Image8, ImageInfo, LabelPlane};

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Reusable buffers for [`execute_image`]; one per worker thread.
#[derive(Debug, Default)]
pub struct Scratch {
    resized: Vec<u8>,
    warped: Vec<u8>,
    horizontal: Vec<u8>,
    acc: Vec<i32>,
    kx: Coeffs,
    ky: Coeffs,
}

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
    /// Two source rows, pixel by pixel, each widened to 4 lanes (horizontal pass only).
    row8: Vec<[u8; 8]>,
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

/// The horizontal (`kx`) and vertical (`ky`) coefficients [`execute_image`] uses to resize
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

#[inline]
fn clip8(v: i32) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Resamples the plan's crop box of `src` to `out_width x out_height` RGB u8 into `out`.
#[multiversion::multiversion(targets("x86_64+avx2+fma", "x86_64+sse4.1", "aarch64+neon"))]
fn resize_rgb_impl(
    plan: &SamplePlan,
    src: &Image8,
    out: &mut Vec<u8>,
    horizontal: &mut Vec<u8>,
    acc: &mut Vec<i32>,
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
    // Both passes work on 4 lanes per pixel (RGB and a zero lane) so that each tap is one
    // 4-lane multiply-add, which the vectoriser turns into SIMD; the zero lane is dropped
    // when the result is written.
    let line = ow * 4;
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
                    kx.bounds.iter().zip(hrow.chunks_exact_mut(4)).enumerate()
                {
                    let w = &kx.weights[xx * kx.ksize..xx * kx.ksize + n];
                    let taps = &row4[xmin - cfirst..xmin - cfirst + n];
                    let mut acc = [1i32 << (PRECISION_BITS - 1); 4];
                    for (p, &wt) in taps.iter().zip(w) {
                        for k in 0..4 {
                            acc[k] += i32::from(p[k]) * wt;
                        }
                    }
                    for k in 0..4 {
                        o[k] = clip8(acc[k]);
                    }
                }
            }
        }
    }
    kx.row4 = row4;
    kx.row8 = row8;
    set_len(out, ow * oh * 3);
    for (yy, &(ymin, n)) in ky.bounds.iter().enumerate() {
        let w = &ky.weights[yy * ky.ksize..yy * ky.ksize + n];
        let orow = &mut out[yy * ow * 3..(yy + 1) * ow * 3];
        acc.clear();
        acc.resize(line, 1i32 << (PRECISION_BITS - 1));
        for (t, &wt) in w.iter().enumerate() {
            let hrow = &horizontal[(ymin - first + t) * line..(ymin - first + t + 1) * line];
            for (a, &h) in acc.iter_mut().zip(hrow) {
                *a += i32::from(h) * wt;
            }
        }
        for (o, a) in orow.chunks_exact_mut(3).zip(acc.chunks_exact(4)) {
            o[0] = clip8(a[0]);
            o[1] = clip8(a[1]);
            o[2] = clip8(a[2]);
        }
    }
}

/// One row of the horizontal pass with exactly `K` taps per output pixel (zero weights
/// past a pixel's own taps), so the tap loop is unrolled.
#[inline(always)]
fn horizontal_row<const K: usize>(kx: &Coeffs, row4: &[[u8; 4]], cfirst: usize, hrow: &mut [u8]) {
    for ((&(xmin, _), w), o) in kx
        .bounds
        .iter()
        .zip(kx.weights.chunks_exact(K))
        .zip(hrow.chunks_exact_mut(4))
    {
        let Some(taps) = row4.get(xmin - cfirst..xmin - cfirst + K) else {
            continue;
        };
        let mut acc = [1i32 << (PRECISION_BITS - 1); 4];
        for t in 0..K {
            for k in 0..4 {
                acc[k] += i32::from(taps[t][k]) * w[t];
            }
        }
        for k in 0..4 {
            o[k] = clip8(acc[k]);
        }
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
    for (((&(xmin, _), w), oa), ob) in kx
        .bounds
        .iter()
        .zip(kx.weights.chunks_exact(K))
        .zip(ha.chunks_exact_mut(4))
        .zip(hb.chunks_exact_mut(4))
    {
        let Some(taps) = row8.get(xmin - cfirst..xmin - cfirst + K) else {
            continue;
        };
        let mut acc = [1i32 << (PRECISION_BITS - 1); 8];
        for t in 0..K {
            for k in 0..8 {
                acc[k] += i32::from(taps[t][k]) * w[t];
            }
        }
        for k in 0..4 {
            oa[k] = clip8(acc[k]);
            ob[k] = clip8(acc[k + 4]);
        }
    }
}

/// Resamples a label plane with the plan's box, affine warp and flips, nearest only, into
/// `out` (`out_width * out_height` ids). Every output id is an input id or, where the
/// warp reads outside, the plan's mask fill.
pub fn execute_mask(plan: &SamplePlan, src: &LabelPlane, out: &mut [u16]) {
    let (sw, sh) = (src.width as usize, src.height as usize);
    let (ow, oh) = (plan.out_width as usize, plan.out_height as usize);
    let (cols, rows) = mask_tables(plan, sw, sh);
    if plan.has(AFFINE) {
        let fill = plan.mask_fill as u16;
        let (vx, vy) = plan.valid_rect();
        for (y, orow) in out[..ow * oh].chunks_exact_mut(ow).enumerate() {
            let yy = src_index(plan.has(FLIP_V), oh, y);
            for (x, o) in orow.iter_mut().enumerate() {
                let xx = src_index(plan.has(FLIP_H), ow, x);
                let (u, v) = plan.affine_source(xx as u32, yy as u32);
                *o = match (nearest_index(u, vx), nearest_index(v, vy)) {
                    (Some(c), Some(r)) => src.data[rows[r] * sw + cols[c]],
                    _ => fill,
                };
            }
        }
        return;
    }
    for (y, orow) in out[..ow * oh].chunks_exact_mut(ow).enumerate() {
        let row = rows[src_index(plan.has(FLIP_V), oh, y)];
        let srow = &src.data[row * sw..(row + 1) * sw];
        if plan.has(FLIP_H) {
            for (o, &c) in orow.iter_mut().zip(cols.iter().rev()) {
                *o = srow[c];
            }
        } else {
            for (o, &c) in orow.iter_mut().zip(&cols) {
                *o = srow[c];
            }
        }
    }
}

/// The pixel nearest a fixed-point position (ties to even, as `grid_sample`'s nearest
/// mode rounds), if it is inside `[lo, hi)`.
#[inline]
fn nearest_index(q: i64, (lo, hi): (u32, u32)) -> Option<usize> {
    let half = 1i64 << (AFFINE_FRAC_BITS - 1);
    let (i, f) = (q >> AFFINE_FRAC_BITS, q & ((1 << AFFINE_FRAC_BITS) - 1));
    let i = if f > half || (f == half && i & 1 == 1) {
        i + 1
    } else {
        i
    };
    (i64::from(lo)..i64::from(hi))
        .contains(&i)
        .then_some(i as usize)
}

/// One axis of a fixed-point position: the pixel at or before it and the bilinear weight
/// of the next one ([`AFFINE_WEIGHT_BITS`] bits, rounded).
#[inline]
fn bilinear_axis(q: i64) -> (i64, i32) {
    let shift = AFFINE_FRAC_BITS - AFFINE_WEIGHT_BITS;
    let f = (q & ((1 << AFFINE_FRAC_BITS) - 1)) as i32;
    (q >> AFFINE_FRAC_BITS, (f + (1 << (shift - 1))) >> shift)
}

/// The affine warp of an RGB u8 image of the output size (the resized, jittered image)
/// into `out`, before flips: per output pixel, the bilinear taps inside the image's part
/// of the frame ([`SamplePlan::valid_rect`]), their
/// coverage `m` and the fill `f` give `f + round(m * (sum - f))`, as torchvision's
/// `_apply_grid_transform` blends its fill, in integers.
pub fn warp_rgb(plan: &SamplePlan, src: &[u8], out: &mut Vec<u8>) {
    let (ow, oh) = (plan.out_width as usize, plan.out_height as usize);
    let one = 1i32 << AFFINE_WEIGHT_BITS;
    let fill = plan.fill.to_le_bytes();
    let ((x0, x1), (y0, y1)) = plan.valid_rect();
    let (cols, rows) = (i64::from(x0)..i64::from(x1), i64::from(y0)..i64::from(y1));
    set_len(out, ow * oh * 3);
    // Every tap inside: the common case, taken without the per-tap checks (the same sums:
    // the weights then add up to one, and `blend_fill` only rounds).
    let inner = |i: i64, r: &std::ops::Range<i64>| i >= r.start && i + 1 < r.end;
    let full = 2 * AFFINE_WEIGHT_BITS;
    for y in 0..oh {
        for x in 0..ow {
            let (u, v) = plan.affine_source(x as u32, y as u32);
            let (ui, wx) = bilinear_axis(u);
            let (vi, wy) = bilinear_axis(v);
            let o = &mut out[(y * ow + x) * 3..][..3];
            if inner(ui, &cols) && inner(vi, &rows) {
                let (r, c) = (vi as usize, ui as usize);
                let top = &src[(r * ow + c) * 3..][..6];
                let bottom = &src[((r + 1) * ow + c) * 3..][..6];
                let w = [
                    (one - wy) * (one - wx),
                    (one - wy) * wx,
                    wy * (one - wx),
                    wy * wx,
                ];
                for k in 0..3 {
                    let acc = w[0] * i32::from(top[k])
                        + w[1] * i32::from(top[3 + k])
                        + w[2] * i32::from(bottom[k])
                        + w[3] * i32::from(bottom[3 + k]);
                    o[k] = round_even(acc, full).clamp(0, 255) as u8;
                }
                continue;
            }
            let mut acc = [0i32; 3];
            let mut m = 0i32;
            for (r, wr) in [(vi, one - wy), (vi + 1, wy)] {
                if !rows.contains(&r) {
                    continue;
                }
                for (c, wc) in [(ui, one - wx), (ui + 1, wx)] {
                    if !cols.contains(&c) {
                        continue;
                    }
                    let (r, c) = (r as usize, c as usize);
                    let w = wr * wc;
                    m += w;
                    let p = &src[(r * ow + c) * 3..][..3];
                    for k in 0..3 {
                        acc[k] += w * i32::from(p[k]);
                    }
                }
            }
            for k in 0..3 {
                o[k] = blend_fill(acc[k], m, fill[k]);
            }
        }
    }
}

/// `f + round(m * (t - f))` in the fixed point of [`warp_rgb`]: `acc` is the weighted sum
/// of the taps inside (`2 * AFFINE_WEIGHT_BITS` fractional bits), `m` the sum of their
/// weights. With every tap inside it is `acc` rounded, exactly; otherwise `t` and `m` are
/// first rounded to [`AFFINE_WEIGHT_BITS`] bits. Ties go to even, as `torch.round` does.
#[inline]
pub fn blend_fill(acc: i32, m: i32, fill: u8) -> u8 {
    let wb = AFFINE_WEIGHT_BITS;
    if m == 1 << (2 * wb) {
        return round_even(acc, 2 * wb).clamp(0, 255) as u8;
    }
    let t = (acc + (1 << (wb - 1))) >> wb;
    let m = (m + (1 << (wb - 1))) >> wb;
    let f = i32::from(fill);
    (f + round_even(m * (t - (f << wb)), 2 * wb)).clamp(0, 255) as u8
}

/// `x / 2^bits` rounded to the nearest integer, ties to even (`x` may be negative).
#[inline]
fn round_even(x: i32, bits: u32) -> i32 {
    let q = x >> bits;
    let r = x - (q << bits);
    let half = 1 << (bits - 1);
    if r > half || (r == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// The source column of each output column and the source row of each output row of
/// the nearest resize of a `width x height` label plane (before the warp and flips): the
/// crop box resized onto the image's part of the frame by [`nearest_table`], the pixels
/// outside it given their nearest neighbour's (they show the fill). GPU backends upload
/// these tables.
pub fn mask_tables(plan: &SamplePlan, width: usize, height: usize) -> (Vec<usize>, Vec<usize>) {
    let (vx, vy) = plan.valid_rect();
    let axis = |x0: f32, extent: f32, out: u32, (v0, v1): (u32, u32), size: usize| {
        let (out, v0, v1) = (out as usize, v0 as usize, (v1 as usize).min(out as usize));
        let t = nearest_table(
            f64::from(x0),
            f64::from(extent),
            v1.saturating_sub(v0),
            size,
        );
        (0..out)
            .map(|i| {
                let k = i.saturating_sub(v0).min(t.len().saturating_sub(1));
                t.get(k).copied().unwrap_or(0)
            })
            .collect()
    };
    (
        axis(plan.crop_x, plan.crop_w, plan.out_width, vx, width),
        axis(plan.crop_y, plan.crop_h, plan.out_height, vy, height),
    )
}

/// Source indices of Pillow's NEAREST resize with a box along one axis, computed as
/// Pillow's `ImagingScaleAffine` does: start at `x0 + step / 2` and add `step` per
/// output pixel (accumulated in double precision), truncating each position.
///
/// [`execute_mask`] reads output column `x` from source column
/// `nearest_table(crop_x, crop_w, out_width, width)[x]` (before flips), and rows likewise:
/// GPU backends upload these tables.
pub fn nearest_table(x0: f64, extent: f64, out: usize, size: usize) -> Vec<usize> {
    let step = extent / out.max(1) as f64;
    let mut pos = x0 + step * 0.5;
    (0..out)
        .map(|_| {
            let i = if pos < 0.0 {
                0
            } else {
                (pos as usize).min(size.saturating_sub(1))
            };
            pos += step;
            i
        })
        .collect()
}

fn gray(p: &[u8]) -> f32 {
    0.2989 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2])
}

/// torchvision's `_blend` on u8: `clamp(a * r + b * (1 - r), 0, 255)`, truncated.
/// PyTorch fuses the second product and the sum (`add` with `alpha`); this rounds them
/// apart, as the WGSL shader can be sure to (Vulkan need not fuse its `fma`), which puts
/// about 1 % of values one level from torchvision's where `r` is not a multiple of a
/// power of two (the reference cases allow one level).
#[inline]
fn blend(a: u8, b: f32, r: f32) -> u8 {
    (f32::from(a) * r + b * (1.0 - r)).clamp(0.0, 255.0) as u8
}

/// Applies the plan's colour ops in order to an RGB u8 image of `width` pixels per row
/// in place.
pub fn jitter_rgb(plan: &SamplePlan, rgb: &mut [u8], width: usize) {
    let width = width.max(1);
    let height = rgb.len() / 3 / width;
    let rgb = &mut rgb[..width * height * 3];
    for (k, op) in plan.jitter_ops().enumerate() {
        match op {
            OP_BRIGHTNESS => {
                let f = plan.op_factor(k, plan.brightness);
                if f != 1.0 {
                    for v in rgb.iter_mut() {
                        *v = (f32::from(*v) * f).clamp(0.0, 255.0) as u8;
                    }
                }
            }
            OP_CONTRAST => {
                let f = plan.op_factor(k, plan.contrast);
                if f != 1.0 {
                    let n = (rgb.len() / 3).max(1);
                    let sum: f64 = rgb
                        .chunks_exact(3)
                        .map(|p| f64::from(gray(p).floor()))
                        .sum();
                    let mean = (sum / n as f64) as f32;
                    for v in rgb.iter_mut() {
                        *v = blend(*v, mean, f);
                    }
                }
            }
            OP_SATURATION => {
                let f = plan.op_factor(k, plan.saturation);
                if f != 1.0 {
                    for p in rgb.chunks_exact_mut(3) {
                        let g = gray(p).floor();
                        for v in p.iter_mut() {
                            *v = blend(*v, g, f);
                        }
                    }
                }
            }
            OP_HUE if plan.hue != 0.0 => {
                for p in rgb.chunks_exact_mut(3) {
                    hue_shift(p, plan.hue);
                }
            }
            OP_GRAYSCALE => {
                for p in rgb.chunks_exact_mut(3) {
                    let g = gray(p) as u8;
                    p.fill(g);
                }
            }
            OP_POSTERIZE => {
                let keep = posterize_mask(plan.posterize_bits_at(k));
                for v in rgb.iter_mut() {
                    *v &= keep;
                }
            }
            OP_SOLARIZE => {
                let t = plan.solarize_threshold_at(k);
                for v in rgb.iter_mut() {
                    if u32::from(*v) >= t {
                        *v = 255 - *v;
                    }
                }
            }
            OP_AUTOCONTRAST => {
                let (lo, hi) = channel_extremes(rgb);
                for p in rgb.chunks_exact_mut(3) {
                    for c in 0..3 {
                        p[c] = autocontrast_value(p[c], lo[c], hi[c]);
                    }
                }
            }
            OP_EQUALIZE => {
                let luts = equalize_luts(&channel_histograms(rgb), rgb.len() as u32 / 3);
                for p in rgb.chunks_exact_mut(3) {
                    for c in 0..3 {
                        p[c] = luts[c][usize::from(p[c])];
                    }
                }
            }
            OP_SHARPNESS => sharpen(rgb, width, height, plan.op_factor(k, 1.0)),
            OP_BLUR => {
                let (kx, ky) = plan.blur_kernel();
                let sigma = plan.op_factor(k, 0.0);
                gaussian_blur(
                    rgb,
                    width,
                    height,
                    &blur_weights(kx, sigma),
                    &blur_weights(ky, sigma),
                );
            }
            _ => {}
        }
    }
}

/// Whether the op at position `k` of the plan's list needs more than its own pixel (a
/// statistic of the whole image or a neighbourhood): contrast (unless its factor is 1),
/// auto-contrast, equalize, sharpness (unless the image is 2 pixels or less along a side,
/// which leaves it unchanged) and blur. The GPU passes run each in a round of its own.
pub fn needs_whole_image(plan: &SamplePlan, k: usize) -> bool {
    match plan.op_at(k) {
        OP_CONTRAST => plan.op_factor(k, plan.contrast) != 1.0,
        OP_SHARPNESS => plan.out_width > 2 && plan.out_height > 2,
        OP_AUTOCONTRAST | OP_EQUALIZE | OP_BLUR => true,
        _ => false,
    }
}

/// Per channel, the smallest and largest value of an RGB image.
pub fn channel_extremes(rgb: &[u8]) -> ([u8; 3], [u8; 3]) {
    let (mut lo, mut hi) = ([255u8; 3], [0u8; 3]);
    for p in rgb.chunks_exact(3) {
        for c in 0..3 {
            lo[c] = lo[c].min(p[c]);
            hi[c] = hi[c].max(p[c]);
        }
    }
    (lo, hi)
}

/// torchvision's `autocontrast` of one value of a channel whose extremes are `lo` and
/// `hi`, in its f32 steps: `(v - lo) / ((hi - lo) * (1 / 255))`, clamped and truncated;
/// unchanged when `lo == hi`.
#[inline]
pub fn autocontrast_value(v: u8, lo: u8, hi: u8) -> u8 {
    if lo >= hi {
        return v;
    }
    let inv_scale = f32::from(hi - lo) * (1.0f32 / 255.0);
    ((f32::from(v) - f32::from(lo)) / inv_scale).clamp(0.0, 255.0) as u8
}

/// Per channel, how many pixels hold each value.
pub fn channel_histograms(rgb: &[u8]) -> [[u32; 256]; 3] {
    let mut h = [[0u32; 256]; 3];
    for p in rgb.chunks_exact(3) {
        for c in 0..3 {
            h[c][usize::from(p[c])] += 1;
        }
    }
    h
}

/// torchvision's `equalize` look-up tables (Pillow's scheme) from the channel histograms
/// of an image of `pixels` pixels: `step = (pixels - count of the largest value) / 255`;
/// with `step == 0` the identity, else `lut[0] = 0` and
/// `lut[v] = min(255, (cumulative[v - 1] + step / 2) / step)`.
pub fn equalize_luts(hist: &[[u32; 256]; 3], pixels: u32) -> [[u8; 256]; 3] {
    std::array::from_fn(|c| {
        let h = &hist[c];
        let last = h.iter().rposition(|&n| n != 0).unwrap_or(0);
        let step = pixels.saturating_sub(h[last]) / 255;
        if step == 0 {
            return std::array::from_fn(|v| v as u8);
        }
        let mut lut = [0u8; 256];
        let mut cum = 0u32;
        for v in 1..256 {
            cum += h[v - 1];
            lut[v] = ((cum + step / 2) / step).min(255) as u8;
        }
        lut
    })
}

/// torchvision's `adjust_sharpness` on u8: inside the one-pixel border, the 3x3 smoothing
/// `(sum of the 8 neighbours + 5 * centre) / 13` rounded (exact in integers: a sum over
/// 13 never ends in a half), then `x + (1 - factor) * (smooth - x)` in f32 (fused, as
/// PyTorch's `add` with `alpha` computes it), clamped and truncated. Images 2 pixels or
/// less along a side are unchanged.
pub fn sharpen(rgb: &mut [u8], width: usize, height: usize, factor: f32) {
    if width <= 2 || height <= 2 {
        return;
    }
    let src = rgb.to_vec();
    let alpha = 1.0 - factor;
    for y in 1..height - 1 {
        for x in 1..width - 1 {
            for c in 0..3 {
                let at = |dx: usize, dy: usize| {
                    u32::from(src[((y + dy - 1) * width + x + dx - 1) * 3 + c])
                };
                let mut sum = 0;
                for dy in 0..3 {
                    for dx in 0..3 {
                        sum += at(dx, dy);
                    }
                }
                let centre = at(1, 1);
                rgb[(y * width + x) * 3 + c] = sharpen_value(centre, sum + 4 * centre, alpha);
            }
        }
    }
}

/// One sharpened value: `centre` and `sum13` (the 3x3 sum plus 4 more centres, the
/// smoothing kernel's numerator), with `alpha = 1 - factor`.
#[inline]
pub fn sharpen_value(centre: u32, sum13: u32, alpha: f32) -> u8 {
    let smooth = (2 * sum13 + 13) / 26;
    let x = centre as f32;
    alpha.mul_add(smooth as f32 - x, x).clamp(0.0, 255.0) as u8
}

/// torchvision's Gaussian kernel of `size` taps for `sigma` (`softmax(-(d / sigma)^2 / 2)`
/// over the offsets `d` from the centre), as integer weights summing to exactly
/// `2^BLUR_WEIGHT_BITS`: each rounded down, the remainder given to the largest fractions
/// (ties to the tap nearer the centre, then the left). `size` odd; sigma not positive or
/// not finite: the identity.
pub fn blur_weights(size: u32, sigma: f32) -> Vec<u32> {
    let size = (size.clamp(1, MAX_BLUR_KERNEL) | 1) as usize;
    let half = (size / 2) as f64;
    let total = 1u32 << BLUR_WEIGHT_BITS;
    let mut w = vec![0u32; size];
    let sigma = f64::from(sigma);
    if !(sigma > 0.0 && sigma.is_finite()) {
        w[size / 2] = total;
        return w;
    }
    let g: Vec<f64> = (0..size)
        .map(|i| {
            let d = (i as f64 - half) / sigma;
            (-0.5 * d * d).exp()
        })
        .collect();
    let sum: f64 = g.iter().sum();
    let exact: Vec<f64> = g.iter().map(|v| v / sum * f64::from(total)).collect();
    for (wi, e) in w.iter_mut().zip(&exact) {
        *wi = e.floor() as u32;
    }
    let mut left = total - w.iter().sum::<u32>();
    let mut order: Vec<usize> = (0..size).collect();
    order.sort_by(|&a, &b| {
        let (fa, fb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        fb.total_cmp(&fa)
            .then((a as f64 - half).abs().total_cmp(&(b as f64 - half).abs()))
            .then(a.cmp(&b))
    });
    for i in order {
        if left == 0 {
            break;
        }
        w[i] += 1;
        left -= 1;
    }
    w
}

/// The index a tap at `i` (possibly outside `[0, n)`) reads under torch's `reflect`
/// padding (the edge pixel not repeated), reflected again as often as needed.
#[inline]
pub fn reflect(i: i64, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    let period = 2 * (n as i64 - 1);
    let m = i.rem_euclid(period);
    (if m < n as i64 { m } else { period - m }) as usize
}

/// Separable Gaussian blur with the integer weights of [`blur_weights`] (each axis summing
/// to `2^BLUR_WEIGHT_BITS`) and reflecting edges: the horizontal sums are kept exactly
/// (at most 23 bits), the vertical sums are exact (taken as the high and low 12 bits of
/// the horizontal sums apart, as the GPU code takes them), and the result is rounded half
/// up. torchvision convolves with the 2D kernel in f32; the two agree but where the
/// weights' rounding moves a value across a half.
///
/// Both passes run a row at a time, tap after tap over whole rows, so the inner loops are
/// plain multiply-adds over contiguous values.
pub fn gaussian_blur(rgb: &mut [u8], width: usize, height: usize, wx: &[u32], wy: &[u32]) {
    let (rx, ry) = ((wx.len() / 2) as i64, (wy.len() / 2) as i64);
    let line = width * 3;
    let mut h = vec![0u32; line * height];
    // Columns whose taps all fall inside the row: a contiguous run of source values.
    let (inner0, inner1) = (rx as usize, width.saturating_sub(rx as usize));
    for (y, hrow) in h.chunks_exact_mut(line).enumerate() {
        let src = &rgb[y * line..(y + 1) * line];
        for x in (0..width).filter(|&x| x < inner0 || x >= inner1.max(inner0)) {
            for (t, &w) in wx.iter().enumerate() {
                let sx = reflect(x as i64 + t as i64 - rx, width);
                for c in 0..3 {
                    hrow[x * 3 + c] += w * u32::from(src[sx * 3 + c]);
                }
            }
        }
        if inner1 > inner0 {
            let out = &mut hrow[inner0 * 3..inner1 * 3];
            for (t, &w) in wx.iter().enumerate() {
                let from = &src[(inner0 + t - rx as usize) * 3..][..out.len()];
                for (o, &v) in out.iter_mut().zip(from) {
                    *o += w * u32::from(v);
                }
            }
        }
    }
    let mut hi = vec![0u32; line];
    let mut lo = vec![0u32; line];
    for (y, orow) in rgb[..line * height].chunks_exact_mut(line).enumerate() {
        hi.fill(0);
        lo.fill(0);
        for (t, &w) in wy.iter().enumerate() {
            let sy = reflect(y as i64 + t as i64 - ry, height);
            let hrow = &h[sy * line..(sy + 1) * line];
            for ((a, b), &v) in hi.iter_mut().zip(lo.iter_mut()).zip(hrow) {
                *a += w * (v >> 12);
                *b += w * (v & 4095);
            }
        }
        for ((o, &a), &b) in orow.iter_mut().zip(&hi).zip(&lo) {
            *o = blur_round(a, b);
        }
    }
}

/// The blur's rounding: `(a * 2^12 + b + 2^29) >> 30` for the vertical pass's sums of the
/// high (`a`) and low (`b`) parts, without leaving 32 bits.
#[inline]
pub fn blur_round(a: u32, b: u32) -> u8 {
    let shift = 2 * BLUR_WEIGHT_BITS;
    ((a + ((b + (1 << (shift - 1))) >> 12)) >> (shift - 12)).min(255) as u8
}

/// torchvision's posterize mask: the high `bits` bits of a byte.
pub fn posterize_mask(bits: u32) -> u8 {
    (0xFF00u32 >> bits.min(8)) as u8
}

/// torchvision's `_rgb_to_hsv`, hue shift, `_hsv_to_rgb`, back to u8 by `* 255.999`.
fn hue_shift(p: &mut [u8], shift: f32) {
    let (r, g, b) = (
        f32::from(p[0]) / 255.0,
        f32::from(p[1]) / 255.0,
        f32::from(p[2]) / 255.0,
    );
    let maxc = r.max(g).max(b);
    let minc = r.min(g).min(b);
    let eqc = maxc == minc;
    let range = maxc - minc;
    let s = range / if eqc { 1.0 } else { maxc };
    let div = if eqc { 1.0 } else { range };
    let (rc, gc, bc) = ((maxc - r) / div, (maxc - g) / div, (maxc - b) / div);
    let h = if maxc == r {
        bc - gc
    } else if maxc == g {
        2.0 + rc - bc
    } else {
        4.0 + gc - rc
    };
    let h = (h / 6.0 + 1.0) % 1.0;
    let h = (h + shift).rem_euclid(1.0);
    let v = maxc;
    let h6 = h * 6.0;
    let i = h6.floor();
    let f = h6 - i;
    let i = (i as i32).rem_euclid(6);
    let q = ((1.0 - s * f) * v).clamp(0.0, 1.0);
    let t = ((s * f + (1.0 - s)) * v).clamp(0.0, 1.0);
    let pp = ((1.0 - s) * v).clamp(0.0, 1.0);
    let (r, g, b) = match i {
        0 => (v, t, pp),
        1 => (q, v, pp),
        2 => (pp, v, t),
        3 => (pp, q, v),
        4 => (t, pp, v),
        _ => (v, pp, q),
    };
    let to8 = |x: f32| (x * (255.0 + 1.0 - 1e-3)).clamp(0.0, 255.0) as u8;
    p[0] = to8(r);
    p[1] = to8(g);
    p[2] = to8(b);
}

/// Writes an RGB u8 image (already resized and jittered) into a batch slot with the
/// plan's flips, normalisation, layout and dtype. Element values are little-endian.
pub fn write_slot(plan: &SamplePlan, rgb: &[u8], out: &mut [u8]) {
    let norm = plan.has(NORMALIZE);
    let value = |c: usize, v: usize| -> f32 {
        let x = v as f32 / 255.0;
        if norm {
            (x - plan.mean[c]) / plan.std[c]
        } else {
            x
        }
    };
    match plan.dtype() {
        DType::U8 => {
            let lut: [[u8; 256]; 3] = [std::array::from_fn(|v| v as u8); 3];
            write_typed(plan, rgb, out, &lut);
        }
        DType::F16 => {
            let lut: [[u16; 256]; 3] = std::array::from_fn(|c| {
                std::array::from_fn(|v| f16::from_f32(value(c, v)).to_bits())
            });
            match bytemuck::try_cast_slice_mut::<u8, u16>(out) {
                Ok(o) if cfg!(target_endian = "little") => write_typed(plan, rgb, o, &lut),
                _ => write_bytes(plan, rgb, out, &lut, |v| v.to_le_bytes()),
            }
        }
        DType::F32 => {
            let lut: [[f32; 256]; 3] =
                std::array::from_fn(|c| std::array::from_fn(|v| value(c, v)));
            match bytemuck::try_cast_slice_mut::<u8, f32>(out) {
                Ok(o) if cfg!(target_endian = "little") => write_typed(plan, rgb, o, &lut),
                _ => write_bytes(plan, rgb, out, &lut, |v| v.to_le_bytes()),
            }
        }
    }
}

/// The flipped source column of output column `x` (and likewise for rows).
#[inline]
fn src_index(flip: bool, n: usize, i: usize) -> usize {
    if flip {
        n - 1 - i
    } else {
        i
    }
}

/// `write_slot` for an output already viewed as elements: one table lookup per value.
fn write_typed<T: Copy>(plan: &SamplePlan, rgb: &[u8], out: &mut [T], lut: &[[T; 256]; 3]) {
    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
    let (fh, fv) = (plan.has(FLIP_H), plan.has(FLIP_V));
    match plan.layout() {
        Layout::Nchw => {
            // One pass over each source row, writing its three planes' rows.
            let (r, rest) = out[..3 * w * h].split_at_mut(w * h);
            let (g, b) = rest.split_at_mut(w * h);
            let rows = r
                .chunks_exact_mut(w)
                .zip(g.chunks_exact_mut(w))
                .zip(b.chunks_exact_mut(w));
            for (y, ((ro, go), bo)) in rows.enumerate() {
                let srow = &rgb[src_index(fv, h, y) * w * 3..][..w * 3];
                for (x, px) in srow.chunks_exact(3).enumerate() {
                    let ox = src_index(fh, w, x);
                    ro[ox] = lut[0][usize::from(px[0])];
                    go[ox] = lut[1][usize::from(px[1])];
                    bo[ox] = lut[2][usize::from(px[2])];
                }
            }
        }
        Layout::Nhwc => {
            for (y, orow) in out[..w * h * 3].chunks_exact_mut(w * 3).enumerate() {
                let srow = &rgb[src_index(fv, h, y) * w * 3..][..w * 3];
                for (x, o) in orow.chunks_exact_mut(3).enumerate() {
                    let sx = src_index(fh, w, x) * 3;
                    o[0] = lut[0][usize::from(srow[sx])];
                    o[1] = lut[1][usize::from(srow[sx + 1])];
                    o[2] = lut[2][usize::from(srow[sx + 2])];
                }
            }
        }
    }
}

/// `write_slot` for an unaligned byte output: element by element, little-endian.
fn write_bytes<T: Copy, const N: usize>(
    plan: &SamplePlan,
    rgb: &[u8],
    out: &mut [u8],
    lut: &[[T; 256]; 3],
    bytes: impl Fn(T) -> [u8; N],
) {
    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
    let (fh, fv) = (plan.has(FLIP_H), plan.has(FLIP_V));
    for y in 0..h {
        let sy = src_index(fv, h, y);
        for x in 0..w {
            let s = (sy * w + src_index(fh, w, x)) * 3;
            for c in 0..3 {
                let idx = match plan.layout() {
                    Layout::Nchw => c * w * h + y * w + x,
                    Layout::Nhwc => (y * w + x) * 3 + c,
                };
                out[idx * N..(idx + 1) * N]
                    .copy_from_slice(&bytes(lut[c][usize::from(rgb[s + c])]));
            }
        }
    }
}

/// Executes a plan on an image plane: resize, jitter, affine warp, flip, normalise, layout,
/// dtype, written into `out` (exactly [`SamplePlan::image_bytes`] long).
pub fn execute_image(plan: &SamplePlan, src: &Image8, out: &mut [u8], scratch: &mut Scratch) {
    resize_rgb_impl(
        plan,
        src,
        &mut scratch.resized,
        &mut scratch.horizontal,
        &mut scratch.acc,
        &mut scratch.kx,
        &mut scratch.ky,
    );
    if plan.has(JITTER) {
        jitter_rgb(plan, &mut scratch.resized, plan.out_width as usize);
    }
    if plan.has(AFFINE) {
        warp_rgb(plan, &scratch.resized, &mut scratch.warped);
        write_slot(plan, &scratch.warped, out);
    } else {
        write_slot(plan, &scratch.resized, out);
    }
    if plan.has(ERASE) {
        erase_slot(plan, out);
    }
}

/// Random erasing on a written slot: the elements of the plan's erased rectangle (output
/// coordinates, after flips) take its value per channel, as the batch's dtype holds it
/// (u8: the value truncated into 0-255; f16: rounded to nearest even).
pub fn erase_slot(plan: &SamplePlan, out: &mut [u8]) {
    let ((x0, x1), (y0, y1)) = plan.erase_rect();
    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
    let size = plan.dtype().size();
    for c in 0..3 {
        let v = plan.erase_value[c];
        let bytes: [u8; 4] = match plan.dtype() {
            DType::U8 => [v.clamp(0.0, 255.0) as u8, 0, 0, 0],
            DType::F16 => {
                let b = f16::from_f32(v).to_le_bytes();
                [b[0], b[1], 0, 0]
            }
            DType::F32 => v.to_le_bytes(),
        };
        for y in y0 as usize..y1 as usize {
            for x in x0 as usize..x1 as usize {
                let idx = match plan.layout() {
                    Layout::Nchw => c * w * h + y * w + x,
                    Layout::Nhwc => (y * w + x) * 3 + c,
                };
                if let Some(o) = out.get_mut(idx * size..(idx + 1) * size) {
                    o.copy_from_slice(&bytes[..size]);
                }
            }
        }
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
        &mut s.acc,
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

    /// The row-wise blur is the plain two-pass definition (64-bit vertical sums, every
    /// tap reflected), bit for bit, over random images, kernels wider than the image and
    /// one-pixel sides.
    #[test]
    fn the_row_wise_blur_is_the_plain_one() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: u32| -> u32 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % u64::from(n.max(1))) as u32
        };
        for case in 0..80 {
            let (w, h) = (1 + next(40) as usize, 1 + next(30) as usize);
            let (kx, ky) = (1 + 2 * next(13), 1 + 2 * next(13));
            let sigma = 0.1 + next(500) as f32 / 100.0;
            let (wx, wy) = (blur_weights(kx, sigma), blur_weights(ky, sigma));
            let img: Vec<u8> = (0..w * h * 3).map(|_| next(256) as u8).collect();
            let mut want = img.clone();
            let mut hsum = vec![0u32; w * h * 3];
            for y in 0..h {
                for x in 0..w {
                    for (t, &wt) in wx.iter().enumerate() {
                        let sx = reflect(x as i64 + t as i64 - (kx / 2) as i64, w);
                        for c in 0..3 {
                            hsum[(y * w + x) * 3 + c] += wt * u32::from(img[(y * w + sx) * 3 + c]);
                        }
                    }
                }
            }
            for y in 0..h {
                for x in 0..w {
                    for c in 0..3 {
                        let mut acc = 0u64;
                        for (t, &wt) in wy.iter().enumerate() {
                            let sy = reflect(y as i64 + t as i64 - (ky / 2) as i64, h);
                            acc += u64::from(wt) * u64::from(hsum[(sy * w + x) * 3 + c]);
                        }
                        want[(y * w + x) * 3 + c] = ((acc + (1 << 29)) >> 30).min(255) as u8;
                    }
                }
            }
            let mut got = img.clone();
            gaussian_blur(&mut got, w, h, &wx, &wy);
            assert_eq!(
                got, want,
                "case {case}: {w}x{h}, kernel {kx}x{ky}, sigma {sigma}"
            );
        }
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

//! The CPU definition of every pixel a [`SamplePlan`] produces. GPU shaders and kernels
//! are tested against these functions.
//!
//! - Image resize: Pillow's `Image.resize(size, BILINEAR, box)`: separable triangle filter,
//!   support widened by the scale factor when downscaling (antialias), half-pixel centres,
//!   horizontal pass then vertical, 22-bit fixed-point coefficients, u8 between passes.
//!   Without [`ANTIALIAS`](super::plan::ANTIALIAS) the support stays 1 (plain bilinear).
//! - Label resize: Pillow's NEAREST over the same box: `src = floor(x0 + (i + 0.5) * scale)`.
//! - Jitter (image planes only), in the plan's order, as torchvision.transforms.v2 does on
//!   u8 tensors: brightness blends with black, contrast with the mean of the (floored)
//!   grayscale, saturation with the (floored) grayscale, each result clamped and truncated
//!   to u8; hue through HSV, scaled back by 255.999 and truncated.
//! - Flips, then `(x / 255 - mean) / std` for float outputs, layout and dtype.

use half::f16;

use super::plan::{
    SamplePlan, ANTIALIAS, FLIP_H, FLIP_V, JITTER, NORMALIZE, OP_BRIGHTNESS, OP_CONTRAST, OP_HUE,
    OP_SATURATION,
};
use super::{DType, Layout};
use crate::decode::{Image8, LabelPlane};

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Reusable buffers for [`execute_image`]; one per worker thread.
#[derive(Debug, Default)]
pub struct Scratch {
    resized: Vec<u8>,
    horizontal: Vec<u8>,
    acc: Vec<i32>,
    kx: Coeffs,
    ky: Coeffs,
}

#[derive(Debug, Default)]
struct Coeffs {
    /// Per output pixel: first source index and tap count.
    bounds: Vec<(usize, usize)>,
    /// `ksize` fixed-point weights per output pixel.
    weights: Vec<i32>,
    ksize: usize,
    /// Unnormalised weights of one output pixel (reused).
    tmp: Vec<f64>,
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

/// The part `[x0, y0, x1, y1)` of an image of `full` size decoded at `1/scale` that the
/// plan's image resize reads: what a crop-aware decode must produce.
pub fn needed_window(plan: &SamplePlan, full: (u32, u32), scale: u32) -> [u32; 4] {
    let (x0, y0, x1, y1) = scaled_box(plan, scale);
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
    let (wx0, wx1) = axis(x0, x1, plan.out_width, full.0);
    let (wy0, wy1) = axis(y0, y1, plan.out_height, full.1);
    [wx0, wy0, wx1, wy1]
}

#[inline]
fn clip8(v: i32) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Resamples the plan's crop box of `src` to `out_width x out_height` RGB u8 into `out`.
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
    precompute(kx, ox, ox + sw, x0, x1, ow, antialias);
    precompute(ky, oy, oy + sh, y0, y1, oh, antialias);
    // Rows the vertical pass reads, in window coordinates.
    let first = ky.bounds.iter().map(|b| b.0).min().unwrap_or(oy);
    let last = ky
        .bounds
        .iter()
        .map(|b| b.0 + b.1)
        .max()
        .unwrap_or(first)
        .max(first);
    let rows = last - first;
    horizontal.clear();
    horizontal.resize(rows * ow * 3, 0);
    for r in 0..rows {
        let sy = first + r - oy;
        let srow = &src.data[sy * sw * 3..(sy + 1) * sw * 3];
        let hrow = &mut horizontal[r * ow * 3..(r + 1) * ow * 3];
        for (xx, &(xmin, n)) in kx.bounds.iter().enumerate() {
            let w = &kx.weights[xx * kx.ksize..xx * kx.ksize + n];
            let taps = &srow[(xmin - ox) * 3..(xmin - ox + n) * 3];
            let mut acc = [1i32 << (PRECISION_BITS - 1); 3];
            for (p, &wt) in taps.chunks_exact(3).zip(w) {
                acc[0] += i32::from(p[0]) * wt;
                acc[1] += i32::from(p[1]) * wt;
                acc[2] += i32::from(p[2]) * wt;
            }
            hrow[xx * 3] = clip8(acc[0]);
            hrow[xx * 3 + 1] = clip8(acc[1]);
            hrow[xx * 3 + 2] = clip8(acc[2]);
        }
    }
    out.clear();
    out.resize(ow * oh * 3, 0);
    let line = ow * 3;
    for (yy, &(ymin, n)) in ky.bounds.iter().enumerate() {
        let w = &ky.weights[yy * ky.ksize..yy * ky.ksize + n];
        let orow = &mut out[yy * line..(yy + 1) * line];
        acc.clear();
        acc.resize(line, 1i32 << (PRECISION_BITS - 1));
        for (t, &wt) in w.iter().enumerate() {
            let hrow = &horizontal[(ymin - first + t) * line..(ymin - first + t + 1) * line];
            for (a, &h) in acc.iter_mut().zip(hrow) {
                *a += i32::from(h) * wt;
            }
        }
        for (o, a) in orow.iter_mut().zip(acc.iter()) {
            *o = clip8(*a);
        }
    }
}

/// Nearest-neighbour source index along one axis (Pillow's NEAREST with a box).
#[inline]
fn nearest(i: usize, x0: f64, scale: f64, size: usize) -> usize {
    let v = x0 + (i as f64 + 0.5) * scale;
    if v < 0.0 {
        0
    } else {
        (v as usize).min(size.saturating_sub(1))
    }
}

/// Resamples a label plane with the plan's box and flips, nearest only, into `out`
/// (`out_width * out_height` ids). Every output id is an input id.
pub fn execute_mask(plan: &SamplePlan, src: &LabelPlane, out: &mut [u16]) {
    let (sw, sh) = (src.width as usize, src.height as usize);
    let (ow, oh) = (plan.out_width as usize, plan.out_height as usize);
    let sx = f64::from(plan.crop_w) / ow as f64;
    let sy = f64::from(plan.crop_h) / oh as f64;
    let cols: Vec<usize> = (0..ow)
        .map(|x| {
            let xs = if plan.has(FLIP_H) { ow - 1 - x } else { x };
            nearest(xs, f64::from(plan.crop_x), sx, sw)
        })
        .collect();
    for y in 0..oh {
        let ys = if plan.has(FLIP_V) { oh - 1 - y } else { y };
        let row = nearest(ys, f64::from(plan.crop_y), sy, sh);
        let srow = &src.data[row * sw..(row + 1) * sw];
        for (o, &c) in out[y * ow..(y + 1) * ow].iter_mut().zip(&cols) {
            *o = srow[c];
        }
    }
}

fn gray(p: &[u8]) -> f32 {
    0.2989 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2])
}

/// torchvision's `_blend` on u8: `clamp(a * r + b * (1 - r), 0, 255)`, truncated.
#[inline]
fn blend(a: u8, b: f32, r: f32) -> u8 {
    (f32::from(a) * r + b * (1.0 - r)).clamp(0.0, 255.0) as u8
}

/// Applies the plan's jitter ops in order to an RGB u8 image in place.
pub fn jitter_rgb(plan: &SamplePlan, rgb: &mut [u8]) {
    for op in plan.jitter_ops() {
        match op {
            OP_BRIGHTNESS if plan.brightness != 1.0 => {
                let f = plan.brightness;
                for v in rgb.iter_mut() {
                    *v = (f32::from(*v) * f).clamp(0.0, 255.0) as u8;
                }
            }
            OP_CONTRAST if plan.contrast != 1.0 => {
                let n = (rgb.len() / 3).max(1);
                let sum: f64 = rgb
                    .chunks_exact(3)
                    .map(|p| f64::from(gray(p).floor()))
                    .sum();
                let mean = (sum / n as f64) as f32;
                for v in rgb.iter_mut() {
                    *v = blend(*v, mean, plan.contrast);
                }
            }
            OP_SATURATION if plan.saturation != 1.0 => {
                for p in rgb.chunks_exact_mut(3) {
                    let g = gray(p).floor();
                    for v in p.iter_mut() {
                        *v = blend(*v, g, plan.saturation);
                    }
                }
            }
            OP_HUE if plan.hue != 0.0 => {
                for p in rgb.chunks_exact_mut(3) {
                    hue_shift(p, plan.hue);
                }
            }
            _ => {}
        }
    }
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
/// plan's flips, normalisation, layout and dtype.
pub fn write_slot(plan: &SamplePlan, rgb: &[u8], out: &mut [u8]) {
    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
    let plane = w * h;
    let norm = plan.has(NORMALIZE);
    let value = |c: usize, v: u8| -> f32 {
        let x = f32::from(v) / 255.0;
        if norm {
            (x - plan.mean[c]) / plan.std[c]
        } else {
            x
        }
    };
    let dtype = plan.dtype();
    let layout = plan.layout();
    for y in 0..h {
        let sy = if plan.has(FLIP_V) { h - 1 - y } else { y };
        for x in 0..w {
            let sx = if plan.has(FLIP_H) { w - 1 - x } else { x };
            let s = (sy * w + sx) * 3;
            for c in 0..3 {
                let idx = match layout {
                    Layout::Nchw => c * plane + y * w + x,
                    Layout::Nhwc => (y * w + x) * 3 + c,
                };
                let v = rgb[s + c];
                match dtype {
                    DType::U8 => out[idx] = v,
                    DType::F16 => {
                        let b = f16::from_f32(value(c, v)).to_le_bytes();
                        out[idx * 2..idx * 2 + 2].copy_from_slice(&b);
                    }
                    DType::F32 => {
                        out[idx * 4..idx * 4 + 4].copy_from_slice(&value(c, v).to_le_bytes());
                    }
                }
            }
        }
    }
}

/// Executes a plan on an image plane: resize, jitter, flip, normalise, layout, dtype,
/// written into `out` (exactly [`SamplePlan::image_bytes`] long).
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
        jitter_rgb(plan, &mut scratch.resized);
    }
    write_slot(plan, &scratch.resized, out);
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

//! The affine warp of the resized image, and the label planes' nearest resize and warp.

use super::simd::src_index;
use crate::augment::plan::{
    SamplePlan, AFFINE, AFFINE_FRAC_BITS, AFFINE_WEIGHT_BITS, FLIP_H, FLIP_V,
};
use crate::decode::{set_len, LabelPlane};

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

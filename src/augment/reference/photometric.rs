//! The colour jitter and the colour ops after it, on the resized RGB u8 image, in the
//! plan's order (the GPU side: the colour rounds of `shaders/augment.wgsl`).

use crate::augment::plan::{
    SamplePlan, BLUR_WEIGHT_BITS, MAX_BLUR_KERNEL, OP_AUTOCONTRAST, OP_BLUR, OP_BRIGHTNESS,
    OP_CONTRAST, OP_EQUALIZE, OP_GRAYSCALE, OP_HUE, OP_POSTERIZE, OP_SATURATION, OP_SHARPNESS,
    OP_SOLARIZE,
};

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
    let (r, g, b) = hsv_sector(i as u32, v, pp, q, t);
    let to8 = |x: f32| (x * (255.0 + 1.0 - 1e-3)).clamp(0.0, 255.0) as u8;
    p[0] = to8(r);
    p[1] = to8(g);
    p[2] = to8(b);
}
/// The (r, g, b) of HSV sector `i` (0 to 5; 5 past it) from the value `v` and the
/// sector's three intermediates, as `colorsys` and torchvision pick them.
pub fn hsv_sector<T: Copy>(i: u32, v: T, p: T, q: T, t: T) -> (T, T, T) {
    match i {
        0 => (v, t, p),
        1 => (q, v, p),
        2 => (p, v, t),
        3 => (p, q, v),
        4 => (t, p, v),
        _ => (v, p, q),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

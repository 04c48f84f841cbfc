//! [`Augment::plan`]: a sample's [`SamplePlan`] drawn from the configuration, one stage
//! at a time. Each stage draws from a Philox stream of its own, keyed by `(seed, epoch,
//! sample id)` ([`crate::rng`]), so adding an option leaves every other stage's draws as
//! they were; within a stream the order of the draws is part of the plans a seed makes.

use super::*;

/// What keys a sample's random draws.
#[derive(Debug, Clone, Copy)]
struct Key {
    seed: u64,
    epoch: u64,
    id: u64,
}

impl Key {
    /// The sample's generator for one stage.
    fn rng(self, stream: Stream) -> Rng {
        Rng::new(self.seed, self.epoch, self.id, stream)
    }
}

/// The colour jitter's drawn factors and op order (the identity when there is none).
struct JitterDraw {
    brightness: f32,
    contrast: f32,
    saturation: f32,
    hue: f32,
    order: u32,
}

/// The colour ops after the jitter, in the order they run, with their own parameter words
/// (0: the plan's shared one), and the plan's shared words they set.
struct ColourDraw {
    ops: Vec<(u32, u32)>,
    params: u32,
    blur_size: u32,
}

impl Augment {
    /// The plan for one sample. Depends on nothing but the arguments and `self`.
    pub fn plan(
        &self,
        seed: u64,
        epoch: u64,
        id: u64,
        src_width: u32,
        src_height: u32,
    ) -> SamplePlan {
        let key = Key { seed, epoch, id };
        let ((cx, cy, cw, ch), valid) = self.crop_box(key, src_width, src_height);
        let mut flags = self.flip_flags(key);
        let JitterDraw {
            brightness: b,
            contrast: c,
            saturation: s,
            hue,
            order,
        } = self.draw_jitter(key);
        if self.jitter.is_some() {
            flags |= JITTER;
        }
        let ColourDraw {
            ops: mut color,
            params: color_params,
            blur_size,
        } = self.draw_colour_ops(key);
        let policy_warp = self.draw_policy(key, &mut color);
        if !color.is_empty() {
            flags |= JITTER;
        }
        let (mean, std) = match self.normalize {
            Some((m, s)) => {
                flags |= NORMALIZE;
                (m, s)
            }
            None => ([0.0; 3], [1.0; 3]),
        };
        let (mut affine, mut affine_frac) = ([0; 6], [0; 2]);
        if let Some(warp) = self.draw_warp(key, valid != self.full_frame(), policy_warp) {
            flags |= AFFINE;
            (affine, affine_frac) = warp;
        }
        let erase = match self.draw_erase(key) {
            Some(erase) => {
                flags |= ERASE;
                erase
            }
            None => [0; 2],
        };
        let mut plan = SamplePlan {
            id_lo: id as u32,
            id_hi: (id >> 32) as u32,
            src_width,
            src_height,
            crop_x: cx as f32,
            crop_y: cy as f32,
            crop_w: cw as f32,
            crop_h: ch as f32,
            out_width: self.out_width,
            out_height: self.out_height,
            flags,
            jitter_order: order,
            brightness: b,
            contrast: c,
            saturation: s,
            hue,
            mean,
            layout: self.layout as u32,
            std,
            dtype: self.dtype as u32,
            decode_scale: if self.crop_aware {
                let ((x0, x1), (y0, y1)) = (
                    (valid[0] & 0xFFFF, valid[0] >> 16),
                    (valid[1] & 0xFFFF, valid[1] >> 16),
                );
                decode_scale(cw, ch, x1 - x0, y1 - y0)
            } else {
                1
            },
            affine,
            affine_frac,
            fill: u32::from_le_bytes([self.fill[0], self.fill[1], self.fill[2], 0]),
            mask_fill: u32::from(self.mask_fill),
            valid,
            jitter_order_hi: 0,
            color_params,
            erase,
            erase_value: self.erasing.map_or([0.0; 3], |e| e.value),
            order_ext: [0; 2],
            op_params: [0; plan::MAX_OPS],
            blur_size,
            _pad: 0,
        };
        // Validation keeps the list within the plan's places (`rand_augment`'s ops).
        plan.push_ops_with(&color);
        plan
    }

    /// The `valid` words of an output the image covers whole.
    fn full_frame(&self) -> [u32; 2] {
        [self.out_width << 16, self.out_height << 16]
    }

    /// The crop box `(x, y, w, h)` in source pixels, and the plan's `valid` words (the
    /// output pixels that show the image).
    fn crop_box(
        &self,
        key: Key,
        src_width: u32,
        src_height: u32,
    ) -> ((f64, f64, f64, f64), [u32; 2]) {
        let (w, h) = (f64::from(src_width), f64::from(src_height));
        let (ow, oh) = (f64::from(self.out_width), f64::from(self.out_height));
        let mut valid = self.full_frame();
        let crop = match self.crop {
            Crop::Full => (0.0, 0.0, w, h),
            Crop::RandomResized { scale, ratio } => {
                let mut rng = key.rng(Stream::Augment);
                let draw = AreaDraw {
                    width: src_width,
                    height: src_height,
                    scale,
                    ratio,
                };
                draw.resized_crop_box(&mut rng)
            }
            Crop::ResizeCenterCrop { resize } => {
                // torchvision Resize(resize): shorter side to `resize`, longer truncated.
                let r = f64::from(resize);
                let (rw, rh) = if src_width <= src_height {
                    (r, (r * h / w).floor().max(1.0))
                } else {
                    ((r * w / h).floor().max(1.0), r)
                };
                // CenterCrop: offsets rounded half to even, as Python's round() does; a
                // side shorter than the crop is padded by floor(difference / 2) first,
                // as torchvision pads it.
                let offset = |r: f64, o: f64| {
                    if r < o {
                        -((o - r) / 2.0).floor()
                    } else {
                        ((r - o) / 2.0).round_ties_even()
                    }
                };
                let (left, top) = (offset(rw, ow), offset(rh, oh));
                let (sx, sy) = (w / rw, h / rh);
                if left >= 0.0 && top >= 0.0 {
                    (left * sx, top * sy, ow * sx, oh * sy)
                } else {
                    // A crop larger than the resized image: torchvision pads it with the
                    // fill, so the image shows on the output pixels it covers and the
                    // rest is fill.
                    let axis = |o: f64, size: f64, out: f64| {
                        let (lo, hi) = (o.max(0.0), (o + out).min(size));
                        (lo, hi - lo, (lo - o) as u32 | ((hi - o) as u32) << 16)
                    };
                    let (x0, nx, vx) = axis(left, rw, ow);
                    let (y0, ny, vy) = axis(top, rh, oh);
                    valid = [vx, vy];
                    (x0 * sx, y0 * sy, nx * sx, ny * sy)
                }
            }
            Crop::CenterCover { zoom } => {
                let r = ow / oh;
                let (cw, ch) = if w / h > r { (h * r, h) } else { (w, w / r) };
                let (cw, ch) = (cw / zoom, ch / zoom);
                ((w - cw) / 2.0, (h - ch) / 2.0, cw, ch)
            }
            Crop::Letterbox => {
                let r = (ow / w).min(oh / h);
                let nw = (w * r).round().clamp(1.0, ow);
                let nh = (h * r).round().clamp(1.0, oh);
                let (px, py) = (((ow - nw) / 2.0).floor(), ((oh - nh) / 2.0).floor());
                valid = [
                    px as u32 | ((px + nw) as u32) << 16,
                    py as u32 | ((py + nh) as u32) << 16,
                ];
                (0.0, 0.0, w, h)
            }
            Crop::RandomPadded { padding } => {
                let p = u64::from(padding);
                let mut rng = key.rng(Stream::Augment);
                let span =
                    |size: u32, out: u32| (u64::from(size) + 2 * p).saturating_sub(u64::from(out));
                let dx = rng.below(span(src_width, self.out_width) + 1);
                let dy = rng.below(span(src_height, self.out_height) + 1);
                let (b, v) = padded_crop(
                    (src_width, src_height),
                    (self.out_width, self.out_height),
                    padding,
                    (dx, dy),
                );
                valid = v;
                (b[0], b[1], b[2], b[3])
            }
        };
        (crop, valid)
    }

    /// The antialias flag and the drawn flips.
    fn flip_flags(&self, key: Key) -> u32 {
        let mut flags = 0;
        if self.antialias {
            flags |= ANTIALIAS;
        }
        let mut flip = key.rng(Stream::Flip);
        if flip.bernoulli(self.flip_h) {
            flags |= FLIP_H;
        }
        if flip.bernoulli(self.flip_v) {
            flags |= FLIP_V;
        }
        flags
    }

    /// The colour jitter's factors and the random order of its ops.
    fn draw_jitter(&self, key: Key) -> JitterDraw {
        let (mut b, mut c, mut s, mut hue, mut order) = (1.0f32, 1.0f32, 1.0f32, 0.0f32, 0u32);
        if let Some(j) = self.jitter {
            let mut rng = key.rng(Stream::Jitter);
            // A random order of the four ops (torchvision draws randperm(4)).
            let mut ops = [
                plan::OP_BRIGHTNESS,
                plan::OP_CONTRAST,
                plan::OP_SATURATION,
                plan::OP_HUE,
            ];
            for i in (1..4).rev() {
                let k = rng.below(i as u64 + 1) as usize;
                ops.swap(i, k);
            }
            let factor = |rng: &mut Rng, v: f64| rng.uniform((1.0 - v).max(0.0), 1.0 + v) as f32;
            b = factor(&mut rng, j.brightness);
            c = factor(&mut rng, j.contrast);
            s = factor(&mut rng, j.saturation);
            hue = rng.uniform(-j.hue, j.hue) as f32;
            let enabled = |op: u32| match op {
                plan::OP_BRIGHTNESS => j.brightness > 0.0,
                plan::OP_CONTRAST => j.contrast > 0.0,
                plan::OP_SATURATION => j.saturation > 0.0,
                _ => j.hue > 0.0,
            };
            let mut shift = 0;
            for op in ops.into_iter().filter(|&op| enabled(op)) {
                order |= op << shift;
                shift += 8;
            }
        }
        JitterDraw {
            brightness: b,
            contrast: c,
            saturation: s,
            hue,
            order,
        }
    }

    /// The colour ops after the jitter that this sample gets: grayscale, blur, sharpness,
    /// posterize, solarize, auto-contrast, equalize, in that order.
    fn draw_colour_ops(&self, key: Key) -> ColourDraw {
        let mut blur_size = 0;
        // The colour ops after the jitter, in the order they run, with their own
        // parameter words (0: the plan's shared one).
        let mut color: Vec<(u32, u32)> = Vec::new();
        let mut color_params = 0;
        let (mut posterize, mut solarize) = (false, false);
        if self.color.any() {
            // One draw per configured op, in a stream of their own: adding one leaves the
            // others' draws (and every other parameter) as they were.
            let mut rng = key.rng(Stream::Color);
            if self.color.grayscale > 0.0 && rng.bernoulli(self.color.grayscale) {
                color.push((plan::OP_GRAYSCALE, 0));
            }
            if let Some((bits, p)) = self.color.posterize {
                if rng.bernoulli(p) {
                    posterize = true;
                    color_params |= bits.min(8) << 8;
                }
            }
            if let Some((threshold, p)) = self.color.solarize {
                if rng.bernoulli(p) {
                    solarize = true;
                    color_params |= policy::solarize_threshold(threshold);
                }
            }
        }
        let (mut autocontrast, mut equalize) = (false, false);
        if self.filters.any() {
            let f = &self.filters;
            let mut rng = key.rng(Stream::Filter);
            if let Some(Blur {
                kernel: (kx, ky),
                sigma: (lo, hi),
                p,
            }) = f.blur
            {
                let on = rng.bernoulli(p);
                let sigma = rng.uniform(lo, hi) as f32;
                if on {
                    color.push((plan::OP_BLUR, plan::factor_word(sigma)));
                    blur_size = kx | ky << 16;
                }
            }
            if let Some((factor, p)) = f.sharpness {
                if rng.bernoulli(p) {
                    color.push((plan::OP_SHARPNESS, plan::factor_word(factor as f32)));
                }
            }
            autocontrast = f.autocontrast > 0.0 && rng.bernoulli(f.autocontrast);
            equalize = f.equalize > 0.0 && rng.bernoulli(f.equalize);
        }
        for (on, op) in [
            (posterize, plan::OP_POSTERIZE),
            (solarize, plan::OP_SOLARIZE),
            (autocontrast, plan::OP_AUTOCONTRAST),
            (equalize, plan::OP_EQUALIZE),
        ] {
            if on {
                color.push((op, 0));
            }
        }
        ColourDraw {
            ops: color,
            params: color_params,
            blur_size,
        }
    }

    /// The augmentation policy's ops: its colour ops appended to `color`, and the inverse
    /// map of its warps, if any.
    fn draw_policy(&self, key: Key, color: &mut Vec<(u32, u32)>) -> Option<[f64; 6]> {
        let mut policy_warp: Option<[f64; 6]> = None;
        if let Some(policy) = &self.policy {
            let mut rng = key.rng(Stream::Policy);
            for (op, m) in policy.draw(&mut rng, self.out_width, self.out_height) {
                match policy::step(op, m, self.out_width, self.out_height) {
                    policy::Step::None => {}
                    policy::Step::Colour(op, param) => color.push((op, param)),
                    policy::Step::Warp(p, centre) => {
                        policy_warp = Some(then_warp(
                            policy_warp,
                            &inverse_affine_matrix_about(&p, centre),
                        ));
                    }
                }
            }
        }
        policy_warp
    }

    /// The plan's fixed-point inverse map, if the output is warped: the random affine
    /// (drawn here) then the policy's warps (`policy_warp`), or else the identity around
    /// a letterboxed or padded image (`framed`).
    fn draw_warp(
        &self,
        key: Key,
        framed: bool,
        policy_warp: Option<[f64; 6]>,
    ) -> Option<([i32; 6], [u32; 2])> {
        let mut warp = None;
        let mut inverse: Option<[f64; 6]> = None;
        if framed {
            // The fill around a letterboxed or padded image: the warp's, with the
            // identity map (each output pixel reads its own, exactly) unless one follows.
            warp = Some((
                [1 << AFFINE_FRAC_BITS, 0, 0, 0, 1 << AFFINE_FRAC_BITS, 0],
                [0; 2],
            ));
        }
        if let Some(a) = &self.affine {
            let mut rng = key.rng(Stream::Affine);
            let p = a.draw(&mut rng, self.out_width, self.out_height);
            inverse = Some(inverse_affine_matrix(&p));
        }
        if let Some(m) = policy_warp {
            inverse = Some(then_warp(inverse, &m));
        }
        if let Some(m) = inverse {
            warp = Some(affine_fixed(&m, self.out_width, self.out_height));
        }
        warp
    }

    /// Random erasing's rectangle as the plan's `erase` words, if this sample gets one.
    fn draw_erase(&self, key: Key) -> Option<[u32; 2]> {
        let e = self.erasing?;
        let mut rng = key.rng(Stream::Erase);
        if !rng.bernoulli(e.p) {
            return None;
        }
        let draw = AreaDraw {
            width: self.out_width,
            height: self.out_height,
            scale: e.scale,
            ratio: e.ratio,
        };
        let [x, y, w, h] = draw.erase_box(&mut rng)?;
        Some([x | (x + w) << 16, y | (y + h) << 16])
    }
}

/// The crop of [`Crop::RandomPadded`] at offset `(dx, dy)` of the padded image: the part
/// of the image it shows as a box `[x, y, w, h]` in source pixels, and the plan's
/// [`valid`](SamplePlan::valid) words, the output pixels that show it (the same size: no
/// resampling). The padding must be smaller than the output, so some image shows.
pub fn padded_crop(
    src: (u32, u32),
    out: (u32, u32),
    padding: u32,
    (dx, dy): (u64, u64),
) -> ([f64; 4], [u32; 2]) {
    let p = i64::from(padding);
    // One axis: the window [o, o + out) of the image [0, size), in both frames.
    let axis = |o: i64, size: u32, out: u32| -> (f64, f64, u32) {
        let lo = o.clamp(0, i64::from(size));
        let hi = (o + i64::from(out)).clamp(lo, i64::from(size)).max(lo + 1);
        let at = (lo - o).clamp(0, i64::from(out)) as u32;
        let end = (at + (hi - lo) as u32).min(out);
        (lo as f64, (hi - lo) as f64, at | end << 16)
    };
    let (x, w, vx) = axis(dx as i64 - p, src.0, out.0);
    let (y, h, vy) = axis(dy as i64 - p, src.1, out.1);
    ([x, y, w, h], [vx, vy])
}

/// The largest IDCT scale denominator `s` in {1, 2, 4, 8} with the crop still at least
/// `s` times the output in both directions: decoding at `1/s` then loses nothing the
/// resize would keep.
pub fn decode_scale(crop_w: f64, crop_h: f64, out_w: u32, out_h: u32) -> u32 {
    let f = (crop_w / f64::from(out_w.max(1))).min(crop_h / f64::from(out_h.max(1)));
    [8, 4, 2]
        .into_iter()
        .find(|&s| f >= f64::from(s))
        .unwrap_or(1)
}

/// A box drawn as torchvision's `RandomResizedCrop` and `RandomErasing` draw theirs, in a
/// `width x height` image: its area a fraction in `scale` of the image's, its aspect
/// ratio log-uniform in `ratio`.
struct AreaDraw {
    width: u32,
    height: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
}

impl AreaDraw {
    /// The draws both share: up to 10 tries, each drawing an area and an aspect ratio,
    /// which `fit` makes a box of (drawing its place) or refuses; the first box, or `None`
    /// when every try is refused.
    fn ten_tries<T>(
        &self,
        rng: &mut Rng,
        mut fit: impl FnMut(&mut Rng, f64, f64) -> Option<T>,
    ) -> Option<T> {
        let area = f64::from(self.width) * f64::from(self.height);
        let (log_lo, log_hi) = (self.ratio.0.ln(), self.ratio.1.ln());
        for _ in 0..10 {
            let target = area * rng.uniform(self.scale.0, self.scale.1);
            let aspect = rng.uniform(log_lo, log_hi).exp();
            if let Some(found) = fit(rng, target, aspect) {
                return Some(found);
            }
        }
        None
    }

    /// torchvision's `RandomErasing.get_params` (the image is the output), on our
    /// generator: `[x, y, w, h]`, or `None` when 10 tries find no rectangle inside it.
    fn erase_box(&self, rng: &mut Rng) -> Option<[u32; 4]> {
        let (width, height) = (self.width, self.height);
        self.ten_tries(rng, |rng, erase_area, aspect| {
            // Python's round(): half to even.
            let h = (erase_area * aspect).sqrt().round_ties_even();
            let w = (erase_area / aspect).sqrt().round_ties_even();
            if !(h < f64::from(height) && w < f64::from(width)) {
                return None;
            }
            let (w, h) = (w as u32, h as u32);
            let y = rng.below(u64::from(height - h) + 1) as u32;
            let x = rng.below(u64::from(width - w) + 1) as u32;
            Some([x, y, w, h])
        })
    }

    /// torchvision's `RandomResizedCrop.get_params`, on our generator: returns
    /// (x, y, w, h).
    fn resized_crop_box(&self, rng: &mut Rng) -> (f64, f64, f64, f64) {
        let (width, height, ratio) = (self.width, self.height, self.ratio);
        let found = self.ten_tries(rng, |rng, target, aspect| {
            let w = (target * aspect).sqrt().round();
            let h = (target / aspect).sqrt().round();
            if !(w > 0.0 && h > 0.0 && w <= f64::from(width) && h <= f64::from(height)) {
                return None;
            }
            let (w, h) = (w as u64, h as u64);
            let y = rng.below(u64::from(height) - h + 1);
            let x = rng.below(u64::from(width) - w + 1);
            Some((x as f64, y as f64, w as f64, h as f64))
        });
        if let Some(b) = found {
            return b;
        }
        // Fallback: centre crop clamped to the ratio range.
        let (wf, hf) = (f64::from(width), f64::from(height));
        let in_ratio = wf / hf;
        let (w, h) = if in_ratio < ratio.0 {
            (wf, (wf / ratio.0).round())
        } else if in_ratio > ratio.1 {
            ((hf * ratio.1).round(), hf)
        } else {
            (wf, hf)
        };
        let w = w.clamp(1.0, wf);
        let h = h.clamp(1.0, hf);
        (((wf - w) / 2.0).floor(), ((hf - h) / 2.0).floor(), w, h)
    }
}

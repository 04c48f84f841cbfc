//! Augmentation: a pure, backend-independent plan per sample, then its execution.
//!
//! [`Augment`] is the configuration. [`Augment::plan`] turns `(seed, epoch, sample id,
//! source size)` into a [`SamplePlan`] using Philox streams keyed by exactly those inputs
//! (see [`crate::rng`]), so the plan for a sample is the same on every backend, for every thread
//! count and batch size, and differs across samples and epochs. [`reference`](mod@reference) defines the
//! pixels a plan produces; GPU backends are tested against it.

pub mod plan;
pub mod reference;

pub use plan::{DType, Element, Layout, SamplePlan};

use crate::error::{Error, Result};
use crate::rng::{Rng, Stream};
use plan::{ANTIALIAS, FLIP_H, FLIP_V, JITTER, NORMALIZE};

/// How the crop box is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Crop {
    /// The whole image, resized to the output size (aspect ratio not kept).
    Full,
    /// torchvision's `RandomResizedCrop`: area fraction in `scale`, aspect ratio
    /// (width / height) log-uniform in `ratio`; 10 attempts, then a centre crop.
    RandomResized {
        /// Area fraction range.
        scale: (f64, f64),
        /// Aspect-ratio range.
        ratio: (f64, f64),
    },
    /// Validation: resize the shorter side to `resize`, then take the centre
    /// `out_width x out_height` (done as one resample of the equivalent source box).
    ResizeCenterCrop {
        /// Shorter side after the resize.
        resize: u32,
    },
}

/// Colour jitter strengths, as torchvision's `ColorJitter(b, c, s, h)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Jitter {
    /// Brightness factor drawn from `[max(0, 1 - b), 1 + b]`.
    pub brightness: f64,
    /// Contrast factor drawn from `[max(0, 1 - c), 1 + c]`.
    pub contrast: f64,
    /// Saturation factor drawn from `[max(0, 1 - s), 1 + s]`.
    pub saturation: f64,
    /// Hue shift drawn from `[-h, h]`, `h <= 0.5`.
    pub hue: f64,
}

/// The augmentation configuration. Build with the methods below; validated by
/// [`Augment::validate`] when a pipeline is built.
#[derive(Debug, Clone, PartialEq)]
pub struct Augment {
    crop: Crop,
    out_width: u32,
    out_height: u32,
    flip_h: f64,
    flip_v: f64,
    jitter: Option<Jitter>,
    normalize: Option<([f32; 3], [f32; 3])>,
    layout: Layout,
    dtype: DType,
    antialias: bool,
    crop_aware: bool,
}

impl Default for Augment {
    fn default() -> Self {
        Self::new()
    }
}

impl Augment {
    /// An augmentation with nothing chosen yet: u8, NCHW, no randomness, and no output
    /// size. Choose the geometry with [`Augment::resize`], [`Augment::random_resized_crop`],
    /// [`Augment::resize_center_crop`] or [`Augment::output_size`]; a pipeline refuses an
    /// augmentation without one ([`Augment::validate`]) rather than pick a size silently.
    pub fn new() -> Self {
        Augment {
            crop: Crop::Full,
            out_width: 0,
            out_height: 0,
            flip_h: 0.0,
            flip_v: 0.0,
            jitter: None,
            normalize: None,
            layout: Layout::Nchw,
            dtype: DType::U8,
            antialias: true,
            crop_aware: true,
        }
    }

    /// The usual validation transform: shorter side to `size * 256 / 224`, centre crop `size`.
    pub fn validation(size: u32) -> Self {
        let resize = ((f64::from(size) * 256.0 / 224.0).round()) as u32;
        Augment::new().resize_center_crop(resize, size)
    }

    /// torchvision's `RandomResizedCrop(size, scale, ratio)`, square output.
    pub fn random_resized_crop(mut self, size: u32, scale: (f64, f64), ratio: (f64, f64)) -> Self {
        self.crop = Crop::RandomResized { scale, ratio };
        self.out_width = size;
        self.out_height = size;
        self
    }

    /// Shorter side to `resize`, then the centre `size x size`.
    pub fn resize_center_crop(mut self, resize: u32, size: u32) -> Self {
        self.crop = Crop::ResizeCenterCrop { resize };
        self.out_width = size;
        self.out_height = size;
        self
    }

    /// The whole image resized to `width x height`.
    pub fn resize(mut self, width: u32, height: u32) -> Self {
        self.crop = Crop::Full;
        self.out_width = width;
        self.out_height = height;
        self
    }

    /// Output size (width, height), keeping the crop mode.
    pub fn output_size(mut self, width: u32, height: u32) -> Self {
        self.out_width = width;
        self.out_height = height;
        self
    }

    /// Mirror left-right with probability `p`.
    pub fn flip_horizontal(mut self, p: f64) -> Self {
        self.flip_h = p;
        self
    }

    /// Mirror top-bottom with probability `p`.
    pub fn flip_vertical(mut self, p: f64) -> Self {
        self.flip_v = p;
        self
    }

    /// Brightness, contrast and saturation jitter, applied in a random order per sample.
    pub fn color_jitter(mut self, brightness: f64, contrast: f64, saturation: f64) -> Self {
        let hue = self.jitter.map_or(0.0, |j| j.hue);
        self.jitter = Some(Jitter {
            brightness,
            contrast,
            saturation,
            hue,
        });
        self
    }

    /// Hue jitter (a shift in turns drawn from `[-h, h]`, `h <= 0.5`).
    pub fn hue(mut self, h: f64) -> Self {
        let mut j = self.jitter.unwrap_or(Jitter {
            brightness: 0.0,
            contrast: 0.0,
            saturation: 0.0,
            hue: 0.0,
        });
        j.hue = h;
        self.jitter = Some(j);
        self
    }

    /// `(x / 255 - mean) / std` per channel (needs a float dtype; sets f32 if u8).
    pub fn normalize(mut self, mean: [f32; 3], std: [f32; 3]) -> Self {
        self.normalize = Some((mean, std));
        if self.dtype == DType::U8 {
            self.dtype = DType::F32;
        }
        self
    }

    /// Batch layout.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Batch element type.
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// Antialias when downscaling (default on, as Pillow does); off gives plain bilinear.
    pub fn antialias(mut self, on: bool) -> Self {
        self.antialias = on;
        self
    }

    /// Crop-aware JPEG decode (default on): when the crop is downscaled by 2x, 4x or 8x
    /// or more in both directions, the plan asks for a JPEG decode at 1/2, 1/4 or 1/8 of
    /// the size (libjpeg-turbo's scaled IDCT) and the resize starts from that. Only the
    /// rows and iMCU columns the resize reads are decoded either way. The scale is part of
    /// the plan ([`SamplePlan::decode_scale`]), so every backend makes the same picture.
    /// Off: every JPEG is decoded at full size.
    pub fn crop_aware(mut self, on: bool) -> Self {
        self.crop_aware = on;
        self
    }

    /// Whether crop-aware decode is on.
    pub fn is_crop_aware(&self) -> bool {
        self.crop_aware
    }

    /// Output width and height, as set by [`Augment::output_size`] or the crop methods
    /// (`(0, 0)` before any sets it). Getters are `get_*`, as `std::process::Command`'s
    /// are, since the setters of the builder take the plain names.
    pub fn get_output_size(&self) -> (u32, u32) {
        (self.out_width, self.out_height)
    }

    /// The batch element type, as set by [`Augment::dtype`] (or [`Augment::normalize`]).
    pub fn get_dtype(&self) -> DType {
        self.dtype
    }

    /// The batch layout, as set by [`Augment::layout`].
    pub fn get_layout(&self) -> Layout {
        self.layout
    }

    /// Output width and height.
    #[deprecated(note = "use `get_output_size()`; `output_size(w, h)` is the setter")]
    pub fn out_size(&self) -> (u32, u32) {
        self.get_output_size()
    }

    /// The batch element type.
    #[deprecated(note = "use `get_dtype()`")]
    pub fn out_dtype(&self) -> DType {
        self.dtype
    }

    /// The batch layout.
    #[deprecated(note = "use `get_layout()`")]
    pub fn out_layout(&self) -> Layout {
        self.layout
    }

    /// Whether any parameter is random (crop, flips or jitter).
    pub fn is_random(&self) -> bool {
        matches!(self.crop, Crop::RandomResized { .. })
            || self.flip_h > 0.0
            || self.flip_v > 0.0
            || self.jitter.is_some()
    }

    /// Bytes of one image of a batch: `3 * width * height * dtype size` (a whole batch's
    /// are [`Batch::images_len_bytes`](crate::Batch::images_len_bytes)).
    pub fn bytes_per_image(&self) -> usize {
        3 * self.out_width as usize * self.out_height as usize * self.dtype.size()
    }

    /// Bytes of one image in the batch.
    #[deprecated(note = "use `bytes_per_image()`")]
    pub fn image_bytes(&self) -> usize {
        self.bytes_per_image()
    }

    /// Checks every value is in range and the options agree with each other.
    pub fn validate(&self) -> Result<()> {
        let bad = |setting: &str, m: String| Err(Error::config(setting, m));
        if (self.out_width, self.out_height) == (0, 0) {
            return bad(
                "augment",
                "no output size: choose one with resize(w, h), random_resized_crop(size, ..), \
                 resize_center_crop(resize, size) or output_size(w, h)"
                    .into(),
            );
        }
        if self.out_width == 0
            || self.out_height == 0
            || self.out_width > 16384
            || self.out_height > 16384
        {
            return bad(
                "size",
                format!(
                    "output size {}x{} must be within 1..=16384",
                    self.out_width, self.out_height
                ),
            );
        }
        for (name, p) in [
            ("flip_horizontal", self.flip_h),
            ("flip_vertical", self.flip_v),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return bad(name, format!("probability {p} is not in [0, 1]"));
            }
        }
        match self.crop {
            Crop::RandomResized { scale, ratio } => {
                if !(scale.0 > 0.0 && scale.0 <= scale.1 && scale.1 <= 1.0) {
                    return bad(
                        "random_resized_crop",
                        format!("crop scale {scale:?} must satisfy 0 < lo <= hi <= 1"),
                    );
                }
                if !(ratio.0 > 0.0 && ratio.0 <= ratio.1 && ratio.1.is_finite()) {
                    return bad(
                        "random_resized_crop",
                        format!("crop ratio {ratio:?} must satisfy 0 < lo <= hi"),
                    );
                }
            }
            Crop::ResizeCenterCrop { resize } => {
                if resize == 0 {
                    return bad("resize_center_crop", "resize must be at least 1".into());
                }
            }
            Crop::Full => {}
        }
        if let Some(j) = self.jitter {
            for (name, v) in [
                ("brightness", j.brightness),
                ("contrast", j.contrast),
                ("saturation", j.saturation),
            ] {
                if !(v >= 0.0 && v.is_finite()) {
                    return bad("color_jitter", format!("{name} jitter {v} must be >= 0"));
                }
            }
            if !(0.0..=0.5).contains(&j.hue) {
                return bad(
                    "color_jitter",
                    format!("hue jitter {} is not in [0, 0.5]", j.hue),
                );
            }
        }
        if let Some((mean, std)) = self.normalize {
            if self.dtype == DType::U8 {
                return bad("normalize", "normalize needs an f16 or f32 dtype".into());
            }
            if std.iter().any(|s| !(s.is_finite() && *s != 0.0))
                || mean.iter().any(|m| !m.is_finite())
            {
                return bad(
                    "normalize",
                    format!("normalize mean {mean:?} / std {std:?} must be finite, std non-zero"),
                );
            }
        }
        Ok(())
    }

    /// The plan for one sample. Depends on nothing but the arguments and `self`.
    pub fn plan(
        &self,
        seed: u64,
        epoch: u64,
        id: u64,
        src_width: u32,
        src_height: u32,
    ) -> SamplePlan {
        let (w, h) = (f64::from(src_width), f64::from(src_height));
        let (ow, oh) = (f64::from(self.out_width), f64::from(self.out_height));
        let (cx, cy, cw, ch) = match self.crop {
            Crop::Full => (0.0, 0.0, w, h),
            Crop::RandomResized { scale, ratio } => {
                let mut rng = Rng::new(seed, epoch, id, Stream::Augment);
                random_resized_box(&mut rng, src_width, src_height, scale, ratio)
            }
            Crop::ResizeCenterCrop { resize } => {
                // torchvision Resize(resize): shorter side to `resize`, longer truncated.
                let r = f64::from(resize);
                let (rw, rh) = if src_width <= src_height {
                    (r, (r * h / w).floor().max(1.0))
                } else {
                    ((r * w / h).floor().max(1.0), r)
                };
                // CenterCrop: offsets rounded half to even, as Python's round() does.
                let left = ((rw - ow) / 2.0).round_ties_even();
                let top = ((rh - oh) / 2.0).round_ties_even();
                let (sx, sy) = (w / rw, h / rh);
                (left * sx, top * sy, ow * sx, oh * sy)
            }
        };
        let mut flags = 0;
        if self.antialias {
            flags |= ANTIALIAS;
        }
        let mut flip = Rng::new(seed, epoch, id, Stream::Flip);
        if flip.bernoulli(self.flip_h) {
            flags |= FLIP_H;
        }
        if flip.bernoulli(self.flip_v) {
            flags |= FLIP_V;
        }
        let (mut b, mut c, mut s, mut hue, mut order) = (1.0f32, 1.0f32, 1.0f32, 0.0f32, 0u32);
        if let Some(j) = self.jitter {
            flags |= JITTER;
            let mut rng = Rng::new(seed, epoch, id, Stream::Jitter);
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
        let (mean, std) = match self.normalize {
            Some((m, s)) => {
                flags |= NORMALIZE;
                (m, s)
            }
            None => ([0.0; 3], [1.0; 3]),
        };
        SamplePlan {
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
                decode_scale(cw, ch, self.out_width, self.out_height)
            } else {
                1
            },
            _pad: [0; 3],
        }
    }
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

/// torchvision's `RandomResizedCrop.get_params`, on our generator: returns (x, y, w, h).
fn random_resized_box(
    rng: &mut Rng,
    width: u32,
    height: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
) -> (f64, f64, f64, f64) {
    let area = f64::from(width) * f64::from(height);
    let (log_lo, log_hi) = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target = area * rng.uniform(scale.0, scale.1);
        let aspect = rng.uniform(log_lo, log_hi).exp();
        let w = (target * aspect).sqrt().round();
        let h = (target / aspect).sqrt().round();
        if w > 0.0 && h > 0.0 && w <= f64::from(width) && h <= f64::from(height) {
            let (w, h) = (w as u64, h as u64);
            let y = rng.below(u64::from(height) - h + 1);
            let x = rng.below(u64::from(width) - w + 1);
            return (x as f64, y as f64, w as f64, h as f64);
        }
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

//! Augmentation: a pure, backend-independent plan per sample, then its execution.
//!
//! [`Augment`] is the configuration. [`Augment::plan`] turns `(seed, epoch, sample id,
//! source size)` into a [`SamplePlan`] using Philox streams keyed by exactly those inputs
//! (see [`crate::rng`]), so the plan for a sample is the same on every backend, for every thread
//! count and batch size, and differs across samples and epochs. [`reference`](mod@reference) defines the
//! pixels a plan produces; GPU backends are tested against it.

pub mod geometry;
pub mod mix;
pub mod plan;
pub mod policy;
pub mod reference;

mod builder;
mod validate;

pub use geometry::BoxRule;
pub use plan::{DType, Element, Layout, SamplePlan};
pub use policy::{Policy, PolicyKind, PolicyOp};

use crate::error::{Error, Result};
use crate::rng::{Rng, Stream};
use plan::{AFFINE, AFFINE_FRAC_BITS, ANTIALIAS, ERASE, FLIP_H, FLIP_V, JITTER, NORMALIZE};

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
    /// `out_width x out_height` (done as one resample of the equivalent source box). A
    /// centre larger than the resized image is padded with the fill, as torchvision's
    /// `CenterCrop` pads.
    ResizeCenterCrop {
        /// Shorter side after the resize.
        resize: u32,
    },
    /// Detection's letterbox: the whole image resized to fit the output with its aspect
    /// ratio kept (`round(side * scale)` pixels, as Pillow's and OpenCV's letterboxes
    /// size it), centred, the rest [`Augment::fill`] (and [`Augment::mask_fill`]).
    Letterbox,
    /// torchvision's `RandomCrop(size, padding)`, the CIFAR recipe: the image padded by
    /// `padding` pixels of fill on every side, then an output-sized crop at a uniform
    /// random offset. A padded image smaller than the output is filled out (as
    /// `pad_if_needed`).
    RandomPadded {
        /// Fill pixels on each side.
        padding: u32,
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

/// Ranges of a random affine warp, as torchvision.transforms.v2's
/// `RandomAffine(degrees, translate, scale, shear)`: per sample an angle, a translation, a
/// scale and shears are drawn uniformly from these ranges, and the resized image is warped
/// about its centre (bilinear for images, nearest for label planes, the fill values where
/// the warp reads outside). Build with [`Affine::new`] and the methods below.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    degrees: (f64, f64),
    translate: (f64, f64),
    scale: (f64, f64),
    shear_x: (f64, f64),
    shear_y: (f64, f64),
}

impl Default for Affine {
    fn default() -> Self {
        Self::new()
    }
}

/// The drawn parameters of one sample's affine warp, in torchvision's terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AffineParams {
    /// Rotation in degrees, clockwise as torchvision's `affine` takes it.
    pub angle: f64,
    /// Translation in output pixels (whole pixels, as torchvision rounds them).
    pub translate: (f64, f64),
    /// Scale factor.
    pub scale: f64,
    /// Shear along x and y, in degrees.
    pub shear: (f64, f64),
}

impl Affine {
    /// The identity: no rotation, translation, scaling or shear.
    pub fn new() -> Self {
        Affine {
            degrees: (0.0, 0.0),
            translate: (0.0, 0.0),
            scale: (1.0, 1.0),
            shear_x: (0.0, 0.0),
            shear_y: (0.0, 0.0),
        }
    }

    /// Rotation angle drawn from `[lo, hi]` degrees, clockwise (torchvision's `affine`
    /// convention; its `RandomAffine(degrees=d)` is `(-d, d)`).
    pub fn degrees(mut self, lo: f64, hi: f64) -> Self {
        self.degrees = (lo, hi);
        self
    }

    /// Translation by up to `fx` of the output width and `fy` of its height either way,
    /// rounded to whole pixels (fractions in `[0, 1]`).
    pub fn translate(mut self, fx: f64, fy: f64) -> Self {
        self.translate = (fx, fy);
        self
    }

    /// Scale factor drawn from `[lo, hi]` (within `[1/64, 64]`).
    pub fn scale(mut self, lo: f64, hi: f64) -> Self {
        self.scale = (lo, hi);
        self
    }

    /// Shear along x drawn from `[lo, hi]` degrees (within `(-80, 80)`).
    pub fn shear(mut self, lo: f64, hi: f64) -> Self {
        self.shear_x = (lo, hi);
        self
    }

    /// Shear along y drawn from `[lo, hi]` degrees (within `(-80, 80)`).
    pub fn shear_y(mut self, lo: f64, hi: f64) -> Self {
        self.shear_y = (lo, hi);
        self
    }

    /// One sample's parameters for an output of `width x height`, drawn as torchvision's
    /// `RandomAffine` draws them (angle, translation, scale, shear x, shear y; a draw is
    /// taken for each even when its range is a point).
    pub fn draw(&self, rng: &mut Rng, width: u32, height: u32) -> AffineParams {
        let angle = rng.uniform(self.degrees.0, self.degrees.1);
        let (mx, my) = (
            self.translate.0 * f64::from(width),
            self.translate.1 * f64::from(height),
        );
        let tx = rng.uniform(-mx, mx).round_ties_even();
        let ty = rng.uniform(-my, my).round_ties_even();
        let scale = rng.uniform(self.scale.0, self.scale.1);
        let sx = rng.uniform(self.shear_x.0, self.shear_x.1);
        let sy = rng.uniform(self.shear_y.0, self.shear_y.1);
        AffineParams {
            angle,
            translate: (tx + 0.0, ty + 0.0),
            scale,
            shear: (sx, sy),
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::config("random_affine", m));
        let range = |(lo, hi): (f64, f64)| lo.is_finite() && hi.is_finite() && lo <= hi;
        if !range(self.degrees) || self.degrees.0 < -360.0 || self.degrees.1 > 360.0 {
            return bad(format!(
                "degrees {:?} must satisfy -360 <= lo <= hi <= 360",
                self.degrees
            ));
        }
        let (fx, fy) = self.translate;
        if !((0.0..=1.0).contains(&fx) && (0.0..=1.0).contains(&fy)) {
            return bad(format!(
                "translate fractions {:?} must be within [0, 1]",
                self.translate
            ));
        }
        if !range(self.scale) || self.scale.0 < 1.0 / 64.0 || self.scale.1 > 64.0 {
            return bad(format!(
                "scale {:?} must satisfy 1/64 <= lo <= hi <= 64",
                self.scale
            ));
        }
        for s in [self.shear_x, self.shear_y] {
            if !range(s) || s.0 <= -80.0 || s.1 >= 80.0 {
                return bad(format!(
                    "shear {s:?} must satisfy -80 < lo <= hi < 80 degrees"
                ));
            }
        }
        Ok(())
    }
}

/// torchvision's `_get_inverse_affine_matrix` about the centre: the map from a point of
/// the output (centred coordinates, y down) to the point of the input it shows, as
/// `[a, b, c, d, e, f]` with `x_in = a x + b y + c`, `y_in = d x + e y + f`.
pub fn inverse_affine_matrix(p: &AffineParams) -> [f64; 6] {
    inverse_affine_matrix_about(p, (0.0, 0.0))
}

/// [`inverse_affine_matrix`] about `centre` (pixels from the image's centre, as
/// torchvision's `center_f`; the top-left corner is `(-w / 2, -h / 2)`).
pub fn inverse_affine_matrix_about(p: &AffineParams, (cx, cy): (f64, f64)) -> [f64; 6] {
    let rot = p.angle.to_radians();
    let (sx, sy) = (p.shear.0.to_radians(), p.shear.1.to_radians());
    let (tx, ty) = p.translate;
    let a = (rot - sy).cos() / sy.cos();
    let b = -(a * sx.tan() + rot.sin());
    let c = (rot - sy).sin() / sy.cos();
    let d = rot.cos() - c * sx.tan();
    let mut m = [
        d / p.scale,
        -b / p.scale,
        0.0,
        -c / p.scale,
        a / p.scale,
        0.0,
    ];
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx;
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty) + cy;
    m
}

/// The inverse map of warping by `second` after `first` (if there is a first), given
/// their inverse maps.
pub fn then_warp(first: Option<[f64; 6]>, second: &[f64; 6]) -> [f64; 6] {
    match first {
        Some(first) => compose_inverse(&first, second),
        None => *second,
    }
}

/// The inverse map of warping by `second` after `first`, given their inverse maps: an
/// output point goes through `second`'s inverse, then `first`'s.
pub fn compose_inverse(first: &[f64; 6], second: &[f64; 6]) -> [f64; 6] {
    let [a, b, c, d, e, f] = *first;
    let [p, q, r, s, t, u] = *second;
    [
        a * p + b * s,
        a * q + b * t,
        a * r + b * u + c,
        d * p + e * s,
        d * q + e * t,
        d * r + e * u + f,
    ]
}

/// The plan's fixed-point form of an inverse map `m` (centred coordinates) for an image
/// of `width x height`, in pixel-index coordinates: `(affine, affine_frac)` of
/// [`SamplePlan`]. The constant terms absorb the rounding of the slopes at the image
/// centre, so the rounding error is smallest there and at most `2^-17` times the distance
/// from it at the edges.
pub fn affine_fixed(m: &[f64; 6], width: u32, height: u32) -> ([i32; 6], [u32; 2]) {
    let one = f64::from(1u32 << AFFINE_FRAC_BITS);
    let (cw, ch) = (f64::from(width) / 2.0, f64::from(height) / 2.0);
    // Centre of the output in pixel-index coordinates: x = cw - 0.5.
    let (mx, my) = (cw - 0.5, ch - 0.5);
    let q = |v: f64| (v * one).round().clamp(-2_147_483_647.0, 2_147_483_647.0);
    let row = |a: f64, b: f64, c: f64, centre_in: f64| -> (i32, i32, i64) {
        let (qa, qb) = (q(a), q(b));
        // Value at the output centre (mx, my), exactly as the map gives it there.
        let at_centre = (a * mx + b * my + c + centre_in) * one;
        let qc = (at_centre - qa * mx - qb * my).round();
        let qc = qc.clamp(-(1i64 << 46) as f64, (1i64 << 46) as f64) as i64;
        (qa as i32, qb as i32, qc)
    };
    // x_in (centred) = a x_c + b y_c + c with x_c = x - mx; index = x_in + mx.
    let (a, b, cu) = row(m[0], m[1], m[2] - m[0] * mx - m[1] * my, mx);
    let (d, e, cv) = row(m[3], m[4], m[5] - m[3] * mx - m[4] * my, my);
    let int =
        |c: i64| (c >> AFFINE_FRAC_BITS).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    let frac = |c: i64| (c & ((1 << AFFINE_FRAC_BITS) - 1)) as u32;
    ([a, b, int(cu), d, e, int(cv)], [frac(cu), frac(cv)])
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
    affine: Option<Affine>,
    fill: [u8; 3],
    mask_fill: u16,
    box_rule: BoxRule,
    color: ColorOps,
    filters: Filters,
    policy: Option<Policy>,
    erasing: Option<Erasing>,
    mixing: mix::Mixing,
}

/// torchvision's `GaussianBlur(kernel_size, sigma)`, applied with a probability.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Blur {
    kernel: (u32, u32),
    sigma: (f64, f64),
    p: f64,
}

/// The whole-image colour ops after grayscale: each applies with its probability.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Filters {
    blur: Option<Blur>,
    /// Factor, probability.
    sharpness: Option<(f64, f64)>,
    autocontrast: f64,
    equalize: f64,
}

impl Filters {
    fn any(&self) -> bool {
        self.count() > 0
    }

    /// Ops a plan can get from these.
    fn count(&self) -> usize {
        usize::from(self.blur.is_some())
            + usize::from(self.sharpness.is_some())
            + usize::from(self.autocontrast > 0.0)
            + usize::from(self.equalize > 0.0)
    }
}

/// torchvision's `RandomErasing(p, scale, ratio, value)`, with constant values.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Erasing {
    p: f64,
    scale: (f64, f64),
    ratio: (f64, f64),
    value: [f32; 3],
}

/// The colour ops after the jitter: each applies to a sample with its probability.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct ColorOps {
    grayscale: f64,
    /// Bits kept, probability.
    posterize: Option<(u32, f64)>,
    /// torchvision's threshold, probability.
    solarize: Option<(f64, f64)>,
}

impl ColorOps {
    fn any(&self) -> bool {
        self.count() > 0
    }

    /// Ops a plan can get from these.
    fn count(&self) -> usize {
        usize::from(self.grayscale > 0.0)
            + usize::from(self.posterize.is_some())
            + usize::from(self.solarize.is_some())
    }
}

impl Default for Augment {
    fn default() -> Self {
        Self::new()
    }
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
        let (w, h) = (f64::from(src_width), f64::from(src_height));
        let (ow, oh) = (f64::from(self.out_width), f64::from(self.out_height));
        let full_frame = [self.out_width << 16, self.out_height << 16];
        let mut valid = full_frame;
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
                let mut rng = Rng::new(seed, epoch, id, Stream::Augment);
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
        let mut blur_size = 0;
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
        // The colour ops after the jitter, in the order they run, with their own
        // parameter words (0: the plan's shared one).
        let mut color: Vec<(u32, u32)> = Vec::new();
        let mut color_params = 0;
        let (mut posterize, mut solarize) = (false, false);
        if self.color.any() {
            // One draw per configured op, in a stream of their own: adding one leaves the
            // others' draws (and every other parameter) as they were.
            let mut rng = Rng::new(seed, epoch, id, Stream::Color);
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
            let mut rng = Rng::new(seed, epoch, id, Stream::Filter);
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
        let mut policy_warp: Option<[f64; 6]> = None;
        if let Some(policy) = &self.policy {
            let mut rng = Rng::new(seed, epoch, id, Stream::Policy);
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
        let mut inverse: Option<[f64; 6]> = None;
        if valid != full_frame {
            // The fill around a letterboxed or padded image: the warp's, with the
            // identity map (each output pixel reads its own, exactly) unless one follows.
            flags |= AFFINE;
            (affine, affine_frac) = (
                [1 << AFFINE_FRAC_BITS, 0, 0, 0, 1 << AFFINE_FRAC_BITS, 0],
                [0; 2],
            );
        }
        if let Some(a) = &self.affine {
            let mut rng = Rng::new(seed, epoch, id, Stream::Affine);
            let p = a.draw(&mut rng, self.out_width, self.out_height);
            inverse = Some(inverse_affine_matrix(&p));
        }
        if let Some(m) = policy_warp {
            inverse = Some(then_warp(inverse, &m));
        }
        if let Some(m) = inverse {
            flags |= AFFINE;
            (affine, affine_frac) = affine_fixed(&m, self.out_width, self.out_height);
        }
        let mut erase = [0; 2];
        if let Some(e) = self.erasing {
            let mut rng = Rng::new(seed, epoch, id, Stream::Erase);
            if rng.bernoulli(e.p) {
                if let Some([x, y, w, h]) =
                    erase_box(&mut rng, self.out_width, self.out_height, e.scale, e.ratio)
                {
                    flags |= ERASE;
                    erase = [x | (x + w) << 16, y | (y + h) << 16];
                }
            }
        }
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

/// torchvision's `RandomErasing.get_params` on a `width x height` output, on our
/// generator: `[x, y, w, h]`, or `None` when 10 tries find no rectangle inside it.
fn erase_box(
    rng: &mut Rng,
    width: u32,
    height: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
) -> Option<[u32; 4]> {
    let area = f64::from(width) * f64::from(height);
    let (log_lo, log_hi) = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let erase_area = area * rng.uniform(scale.0, scale.1);
        let aspect = rng.uniform(log_lo, log_hi).exp();
        // Python's round(): half to even.
        let h = (erase_area * aspect).sqrt().round_ties_even();
        let w = (erase_area / aspect).sqrt().round_ties_even();
        if !(h < f64::from(height) && w < f64::from(width)) {
            continue;
        }
        let (w, h) = (w as u32, h as u32);
        let y = rng.below(u64::from(height - h) + 1) as u32;
        let x = rng.below(u64::from(width - w) + 1) as u32;
        return Some([x, y, w, h]);
    }
    None
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

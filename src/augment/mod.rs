//! Augmentation: a pure, backend-independent plan per sample, then its execution.
//!
//! [`Augment`] is the configuration. [`Augment::plan`] turns `(seed, epoch, sample id,
//! source size)` into a [`SamplePlan`] using Philox streams keyed by exactly those inputs
//! (see [`crate::rng`]), so the plan for a sample is the same on every backend, for every thread
//! count and batch size, and differs across samples and epochs. The CPU reference
//! execution (internal) defines the pixels a plan produces; GPU backends are tested
//! against it.

pub mod geometry;
pub mod mix;
pub mod plan;
pub mod policy;
pub mod reference;

mod bucket;
mod builder;
mod planner;
mod validate;

pub use geometry::BoxRule;
pub use plan::{DType, Element, Layout, SamplePlan};
#[doc(hidden)]
pub use planner::{decode_scale, padded_crop};
pub use policy::{Policy, PolicyKind, PolicyOp};

use crate::error::{Error, Result};
use crate::rng::{Rng, Stream};
use plan::{AFFINE, AFFINE_FRAC_BITS, ANTIALIAS, ERASE, FLIP_H, FLIP_V, JITTER, NORMALIZE};

/// How the crop box is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
#[doc(hidden)]
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
    /// Aspect-ratio buckets' resize and centre crop: the largest centred box of the
    /// output's aspect ratio, shrunk by `zoom` (at least 1) on each side, resized to the
    /// output (resize to cover, then centre crop).
    CenterCover {
        /// The box's sides are the covering box's divided by this.
        zoom: f64,
    },
}

/// Colour jitter strengths, as torchvision's `ColorJitter(b, c, s, h)`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[doc(hidden)]
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
#[doc(hidden)]
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

    setters! {
        /// Rotation angle drawn from `[lo, hi]` degrees, clockwise (torchvision's `affine`
        /// convention; its `RandomAffine(degrees=d)` is `(-d, d)`).
        pub fn degrees(lo: f64, hi: f64) => self.degrees = (lo, hi);

        /// Translation by up to `fx` of the output width and `fy` of its height either way,
        /// rounded to whole pixels (fractions in `[0, 1]`).
        pub fn translate(fx: f64, fy: f64) => self.translate = (fx, fy);

        /// Scale factor drawn from `[lo, hi]` (within `[1/64, 64]`).
        pub fn scale(lo: f64, hi: f64) => self.scale = (lo, hi);

        /// Shear along x drawn from `[lo, hi]` degrees (within `(-80, 80)`).
        pub fn shear(lo: f64, hi: f64) => self.shear_x = (lo, hi);

        /// Shear along y drawn from `[lo, hi]` degrees (within `(-80, 80)`).
        pub fn shear_y(lo: f64, hi: f64) => self.shear_y = (lo, hi);
    }

    /// One sample's parameters for an output of `width x height`, drawn as torchvision's
    /// `RandomAffine` draws them (angle, translation, scale, shear x, shear y; a draw is
    /// taken for each even when its range is a point).
    #[doc(hidden)]
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
#[doc(hidden)]
pub fn inverse_affine_matrix(p: &AffineParams) -> [f64; 6] {
    inverse_affine_matrix_about(p, (0.0, 0.0))
}

/// [`inverse_affine_matrix`] about `centre` (pixels from the image's centre, as
/// torchvision's `center_f`; the top-left corner is `(-w / 2, -h / 2)`).
#[doc(hidden)]
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
#[doc(hidden)]
pub fn then_warp(first: Option<[f64; 6]>, second: &[f64; 6]) -> [f64; 6] {
    match first {
        Some(first) => compose_inverse(&first, second),
        None => *second,
    }
}

/// The inverse map of warping by `second` after `first`, given their inverse maps: an
/// output point goes through `second`'s inverse, then `first`'s.
#[doc(hidden)]
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
#[doc(hidden)]
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

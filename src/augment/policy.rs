//! Augmentation policies as plan generators: torchvision.transforms.v2's `RandAugment`
//! and `TrivialAugmentWide`.
//!
//! A policy draws, per sample from its own stream of `(seed, epoch, id)`, which ops apply
//! and their magnitudes, exactly as torchvision's tables give them (the magnitudes are
//! torchvision's `float32` `linspace` values). Each drawn op becomes part of the one plan
//! the fused pass runs:
//!
//! - The colour ops (brightness, colour, contrast, sharpness, posterize, solarize,
//!   auto-contrast, equalize) join the plan's list of colour ops after the configured
//!   ones, each with its own parameter ([`SamplePlan::op_params`](super::SamplePlan::op_params)), in the order drawn.
//! - The geometric ops (shear, translate, rotate) are composed into the plan's one affine
//!   warp, after [`Augment::random_affine`](super::Augment::random_affine)'s if there is
//!   one: bilinear for images (torchvision's policies default to nearest; pass
//!   `interpolation=InterpolationMode.BILINEAR` there for the same result), nearest for
//!   label planes, [`Augment::fill`](super::Augment::fill) outside.
//!
//! Where this differs from applying the ops one after the other as torchvision does: the
//! warp runs after every colour op of the plan (a colour op that torchvision applies after
//! a rotation also sees the rotation's fill; here the fill keeps its colour), two warps are
//! resampled once rather than twice, and flips apply last (torchvision's recipes flip
//! before the policy; the policy's draws are symmetric, so only the shears about the
//! top-left corner differ in distribution).
#![doc(hidden)]

use super::plan::{
    factor_word, OP_AUTOCONTRAST, OP_BRIGHTNESS, OP_CONTRAST, OP_EQUALIZE, OP_POSTERIZE,
    OP_SATURATION, OP_SHARPNESS, OP_SOLARIZE, PARAM_INT,
};
use super::AffineParams;
use crate::rng::Rng;

/// Which policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// `RandAugment(num_ops, magnitude, num_magnitude_bins)`: `num_ops` ops drawn with
    /// replacement, all at bin `magnitude`.
    RandAugment {
        /// Ops per sample.
        num_ops: u32,
        /// The magnitude bin, `0..bins`.
        magnitude: u32,
    },
    /// `TrivialAugmentWide(num_magnitude_bins)`: one op, at a uniformly drawn bin.
    TrivialAugmentWide,
}

/// An augmentation policy: its kind and `num_magnitude_bins` (torchvision's default 31).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Which policy.
    pub kind: PolicyKind,
    /// Magnitude bins (at least 2).
    pub bins: u32,
}

/// An op of the policies' augmentation space, in torchvision's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyOp {
    /// Nothing.
    Identity,
    /// Shear along x about the top-left corner, by `atan(magnitude)`.
    ShearX,
    /// Shear along y about the top-left corner.
    ShearY,
    /// Translation along x by `int(magnitude)` pixels.
    TranslateX,
    /// Translation along y.
    TranslateY,
    /// Rotation by `magnitude` degrees, counter-clockwise, about the centre.
    Rotate,
    /// Brightness factor `1 + magnitude`.
    Brightness,
    /// Saturation factor `1 + magnitude`.
    Color,
    /// Contrast factor `1 + magnitude`.
    Contrast,
    /// Sharpness factor `1 + magnitude`.
    Sharpness,
    /// Posterize to `int(magnitude)` bits.
    Posterize,
    /// Solarize at `255 * magnitude`.
    Solarize,
    /// Auto-contrast.
    AutoContrast,
    /// Equalize.
    Equalize,
}

impl PolicyOp {
    /// The augmentation space, in torchvision's dictionary order (the draws index it).
    pub const ALL: [PolicyOp; 14] = [
        PolicyOp::Identity,
        PolicyOp::ShearX,
        PolicyOp::ShearY,
        PolicyOp::TranslateX,
        PolicyOp::TranslateY,
        PolicyOp::Rotate,
        PolicyOp::Brightness,
        PolicyOp::Color,
        PolicyOp::Contrast,
        PolicyOp::Sharpness,
        PolicyOp::Posterize,
        PolicyOp::Solarize,
        PolicyOp::AutoContrast,
        PolicyOp::Equalize,
    ];

    /// torchvision's name of the op.
    pub fn name(self) -> &'static str {
        match self {
            PolicyOp::Identity => "Identity",
            PolicyOp::ShearX => "ShearX",
            PolicyOp::ShearY => "ShearY",
            PolicyOp::TranslateX => "TranslateX",
            PolicyOp::TranslateY => "TranslateY",
            PolicyOp::Rotate => "Rotate",
            PolicyOp::Brightness => "Brightness",
            PolicyOp::Color => "Color",
            PolicyOp::Contrast => "Contrast",
            PolicyOp::Sharpness => "Sharpness",
            PolicyOp::Posterize => "Posterize",
            PolicyOp::Solarize => "Solarize",
            PolicyOp::AutoContrast => "AutoContrast",
            PolicyOp::Equalize => "Equalize",
        }
    }

    /// Whether the magnitude takes a random sign.
    pub fn signed(self) -> bool {
        !matches!(
            self,
            PolicyOp::Identity
                | PolicyOp::Posterize
                | PolicyOp::Solarize
                | PolicyOp::AutoContrast
                | PolicyOp::Equalize
        )
    }
}

/// torch's `linspace(start, end, steps)` in f32, element `i`: the step in f32, the first
/// half counted from `start`, the second from `end`, each one fused multiply-add, as
/// ATen's vectorised CPU kernel computes it (the reference cases check every table).
pub fn linspace_f32(start: f32, end: f32, steps: u32, i: u32) -> f32 {
    if steps <= 1 {
        return start;
    }
    let step = (end - start) / (steps - 1) as f32;
    if i < steps / 2 {
        step.mul_add(i as f32, start)
    } else {
        (-step).mul_add((steps - i - 1) as f32, end)
    }
}

impl Policy {
    /// The magnitude of `op` at `bin` for an image of `width x height`, before its sign:
    /// the value of torchvision's table for this policy (`None`: the op takes none).
    pub fn magnitude(&self, op: PolicyOp, bin: u32, width: u32, height: u32) -> Option<f32> {
        let wide = self.kind == PolicyKind::TrivialAugmentWide;
        let lin = |end: f32| Some(linspace_f32(0.0, end, self.bins, bin));
        match op {
            PolicyOp::Identity | PolicyOp::AutoContrast | PolicyOp::Equalize => None,
            PolicyOp::ShearX | PolicyOp::ShearY => lin(if wide { 0.99 } else { 0.3 }),
            PolicyOp::TranslateX | PolicyOp::TranslateY => {
                let side = if op == PolicyOp::TranslateX {
                    width
                } else {
                    height
                };
                lin(if wide {
                    32.0
                } else {
                    (150.0 / 331.0 * f64::from(side)) as f32
                })
            }
            PolicyOp::Rotate => lin(if wide { 135.0 } else { 30.0 }),
            PolicyOp::Brightness | PolicyOp::Color | PolicyOp::Contrast | PolicyOp::Sharpness => {
                lin(if wide { 0.99 } else { 0.9 })
            }
            PolicyOp::Posterize => {
                // (8 - arange(bins) / ((bins - 1) / q)).round().int(), in f32.
                let q = if wide { 6.0 } else { 4.0 };
                let d = ((f64::from(self.bins) - 1.0) / q) as f32;
                Some((8.0 - bin as f32 / d).round_ties_even())
            }
            PolicyOp::Solarize => Some(linspace_f32(1.0, 0.0, self.bins, bin)),
        }
    }

    /// The ops and signed magnitudes drawn for one sample from `rng` (its policy stream),
    /// for an output of `width x height`.
    pub fn draw(&self, rng: &mut Rng, width: u32, height: u32) -> Vec<(PolicyOp, f64)> {
        let ops = match self.kind {
            PolicyKind::RandAugment { num_ops, .. } => num_ops,
            PolicyKind::TrivialAugmentWide => 1,
        };
        (0..ops)
            .map(|_| {
                let op = PolicyOp::ALL[rng.below(PolicyOp::ALL.len() as u64) as usize];
                let bin = match self.kind {
                    PolicyKind::RandAugment { magnitude, .. } => magnitude,
                    PolicyKind::TrivialAugmentWide => rng.below(u64::from(self.bins)) as u32,
                };
                let m = match self.magnitude(op, bin, width, height) {
                    Some(m) => {
                        let m = f64::from(m);
                        // torchvision: `if signed and torch.rand(()) <= 0.5: magnitude *= -1`.
                        if op.signed() && rng.next_f64() <= 0.5 {
                            -m
                        } else {
                            m
                        }
                    }
                    None => 0.0,
                };
                (op, m)
            })
            .collect()
    }
}

/// What one drawn op does to a plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Nothing.
    None,
    /// A colour op and its parameter word ([`SamplePlan::op_params`](super::SamplePlan::op_params)).
    Colour(u32, u32),
    /// A warp: torchvision's affine parameters and the centre it turns about, in pixels
    /// from the image's centre (`(-w / 2, -h / 2)` for the top-left corner).
    Warp(AffineParams, (f64, f64)),
}

/// The plan step of `op` at signed magnitude `m` on an output of `width x height`, as
/// torchvision's `_apply_image_or_video_transform` applies it.
pub fn step(op: PolicyOp, m: f64, width: u32, height: u32) -> Step {
    let corner = (-f64::from(width) / 2.0, -f64::from(height) / 2.0);
    let warp = |angle: f64, translate: (f64, f64), shear: (f64, f64), centre| {
        Step::Warp(
            AffineParams {
                angle,
                translate,
                scale: 1.0,
                shear,
            },
            centre,
        )
    };
    let factor = |code: u32| Step::Colour(code, factor_word((1.0 + m) as f32));
    match op {
        PolicyOp::Identity => Step::None,
        PolicyOp::ShearX => warp(0.0, (0.0, 0.0), (m.atan().to_degrees(), 0.0), corner),
        PolicyOp::ShearY => warp(0.0, (0.0, 0.0), (0.0, m.atan().to_degrees()), corner),
        PolicyOp::TranslateX => warp(0.0, (m.trunc(), 0.0), (0.0, 0.0), (0.0, 0.0)),
        PolicyOp::TranslateY => warp(0.0, (0.0, m.trunc()), (0.0, 0.0), (0.0, 0.0)),
        // `rotate` turns counter-clockwise; `affine`'s angle is clockwise.
        PolicyOp::Rotate => warp(-m, (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
        PolicyOp::Brightness => factor(OP_BRIGHTNESS),
        PolicyOp::Color => factor(OP_SATURATION),
        PolicyOp::Contrast => factor(OP_CONTRAST),
        PolicyOp::Sharpness => factor(OP_SHARPNESS),
        PolicyOp::Posterize => Step::Colour(OP_POSTERIZE, PARAM_INT | (m.trunc() as u32).min(8)),
        PolicyOp::Solarize => Step::Colour(OP_SOLARIZE, PARAM_INT | solarize_threshold(255.0 * m)),
        PolicyOp::AutoContrast => Step::Colour(OP_AUTOCONTRAST, 0),
        PolicyOp::Equalize => Step::Colour(OP_EQUALIZE, 0),
    }
}

/// The plan's integer solarize threshold for torchvision's `threshold`: `v >= threshold`
/// on a u8 tensor compares in f32, so the smallest integer at or above `f32(threshold)`
/// (clamped to 0-255; a threshold past 255 inverts nothing, which 256 would say but a
/// byte cannot: 255 is the most a plan holds).
pub fn solarize_threshold(threshold: f64) -> u32 {
    (threshold as f32).ceil().clamp(0.0, 255.0) as u32
}

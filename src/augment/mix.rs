//! Batch-level mixing after the per-sample pass: torchvision.transforms.v2's `MixUp` and
//! `CutMix`, and the two as `RandomChoice([CutMix, MixUp])`, with the mixed class labels
//! as soft targets.
//!
//! Every slot `i` of a batch of `len` takes slot `(i - 1) mod len` as its partner
//! (torchvision's `roll(1, 0)`). One draw per batch ([`Mixing::draw`]), keyed by `(seed,
//! epoch, the id of the batch's first sample)` on its own stream: which of the two, the
//! weight `lambda` from `Beta(alpha, alpha)`, and for CutMix the box, as torchvision
//! draws them. So a batch mixes the same way on every backend and thread count, and in
//! every run; mixing depends on which samples share a batch, which the epoch's
//! permutation and the batch size fix.
//!
//! - MixUp: every element becomes `partner * (1 - lambda) + own * lambda`, each product
//!   and the sum rounded to the batch's element type as PyTorch rounds them (the weights
//!   as f32; f16 values through f32 arithmetic). Float batches only: torchvision's MixUp
//!   takes float tensors.
//! - CutMix: inside the box `[x0, x1) x [y0, y1)` every channel takes the partner's
//!   value; `lambda` is then 1 minus the box's share of the image (torchvision's
//!   `lam_adjusted`). Any element type.
//!
//! [`apply`] is the definition on a host buffer; the device backends run the same per
//! element and are tested against it. [`soft_labels`] is torchvision's `_mixup_label`.
#![doc(hidden)]

use half::f16;

use super::plan::{DType, Layout};
use crate::rng::{Rng, Stream};

/// Which mixing a batch got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MixKind {
    /// torchvision's `MixUp`: the whole images blended.
    MixUp,
    /// torchvision's `CutMix`: a box pasted from the partner.
    CutMix,
}

/// How one batch was mixed ([`crate::Batch::mix`]): every slot `i` with slot
/// `(i - 1) mod len`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BatchMix {
    /// MixUp or CutMix.
    pub kind: MixKind,
    /// The weight of each slot's own sample (for CutMix, 1 minus the box's share of the
    /// image): its label's weight in the soft targets.
    pub lambda: f64,
    /// CutMix's box `[x0, y0, x1, y1]` in output pixels, `x1` and `y1` exclusive (it may
    /// be empty); zeros for MixUp.
    pub rect: [u32; 4],
}

impl BatchMix {
    /// The weights as the arithmetic uses them: `(own, partner)`, `lambda` and
    /// `1 - lambda` (computed in f64) rounded to f32, as PyTorch turns a Python float
    /// into the scalar of an f32 (and f16) multiplication.
    pub fn weights(&self) -> (f32, f32) {
        (self.lambda as f32, (1.0 - self.lambda) as f32)
    }

    /// The element positions within one image (`3 * width * height` of them, in
    /// `layout`) that the mixing changes, in increasing order.
    pub fn positions(
        &self,
        layout: Layout,
        width: usize,
        height: usize,
    ) -> impl Iterator<Item = usize> + '_ {
        let plane = width * height;
        let all = self.kind == MixKind::MixUp;
        let [x0, y0, x1, y1] = self.rect.map(|v| v as usize);
        let (x0, y0) = if all { (0, 0) } else { (x0, y0) };
        let (x1, y1) = if all {
            (width, height)
        } else {
            (x1.min(width), y1.min(height))
        };
        let rows = move |c: usize| {
            (y0..y1).flat_map(move |y| (x0..x1).map(move |x| c * plane + y * width + x))
        };
        // NCHW: channel-major; NHWC: pixel-major (each pixel's three in turn).
        let nchw = (layout == Layout::Nchw).then(|| (0..3).flat_map(rows));
        let nhwc = (layout == Layout::Nhwc).then(|| {
            (y0..y1).flat_map(move |y| {
                (x0..x1).flat_map(move |x| (0..3).map(move |c| (y * width + x) * 3 + c))
            })
        });
        nchw.into_iter().flatten().chain(nhwc.into_iter().flatten())
    }
}

/// MixUp and CutMix as configured ([`crate::Augment::mixup`], [`crate::Augment::cutmix`]):
/// their `alpha`s.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Mixing {
    /// MixUp's `alpha`, when on.
    pub mixup: Option<f64>,
    /// CutMix's `alpha`, when on.
    pub cutmix: Option<f64>,
}

impl Mixing {
    /// Whether either is on.
    pub fn any(&self) -> bool {
        self.mixup.is_some() || self.cutmix.is_some()
    }

    /// The mixing of the batch whose first sample is `first` in `epoch`, for images of
    /// `width x height`; `None` when neither is on. With both on, CutMix or MixUp with
    /// even odds (torchvision's `RandomChoice`). The weight is drawn as an f32 (as
    /// torchvision's `Beta` samples); the box centre uniform over the pixels, its half
    /// sides `int(0.5 * sqrt(1 - lambda) * side)`, clipped to the image.
    pub fn draw(
        &self,
        seed: u64,
        epoch: u64,
        first: u64,
        width: u32,
        height: u32,
    ) -> Option<BatchMix> {
        let mut rng = Rng::new(seed, epoch, first, Stream::Mix);
        let (cut, alpha) = match (self.mixup, self.cutmix) {
            (None, None) => return None,
            (Some(a), None) => (false, a),
            (None, Some(a)) => (true, a),
            (Some(m), Some(c)) => {
                if rng.bernoulli(0.5) {
                    (true, c)
                } else {
                    (false, m)
                }
            }
        };
        let lam = f64::from(beta(&mut rng, alpha) as f32);
        if !cut {
            return Some(BatchMix {
                kind: MixKind::MixUp,
                lambda: lam,
                rect: [0; 4],
            });
        }
        let rx = rng.below(u64::from(width)) as u32;
        let ry = rng.below(u64::from(height)) as u32;
        Some(cutmix_box(lam, rx, ry, width, height))
    }
}

/// CutMix's box and weight for a weight `lam` drawn and a centre `(rx, ry)`, in an image
/// of `width x height`: as torchvision's `CutMix.make_params`, half sides `int(0.5 *
/// sqrt(1 - lam) * side)`, the box clipped to the image, and `lambda` 1 minus its share
/// of the image (`lam_adjusted`). A centre outside the image is taken as its last pixel.
pub fn cutmix_box(lam: f64, rx: u32, ry: u32, width: u32, height: u32) -> BatchMix {
    let (w, h) = (i64::from(width), i64::from(height));
    // A centre inside the image (as drawn), so that x0 <= rx <= x1: never inverted.
    let (rx, ry) = (
        i64::from(rx.min(width.saturating_sub(1))),
        i64::from(ry.min(height.saturating_sub(1))),
    );
    let r = 0.5 * (1.0 - lam).max(0.0).sqrt();
    let (rw, rh) = ((r * w as f64) as i64, (r * h as f64) as i64);
    let x0 = (rx - rw).max(0);
    let y0 = (ry - rh).max(0);
    let x1 = (rx + rw).min(w);
    let y1 = (ry + rh).min(h);
    let area = ((x1 - x0) * (y1 - y0)) as f64;
    BatchMix {
        kind: MixKind::CutMix,
        lambda: 1.0 - area / (w * h).max(1) as f64,
        rect: [x0 as u32, y0 as u32, x1 as u32, y1 as u32],
    }
}

/// A draw from `Beta(alpha, alpha)`: `X / (X + Y)` of two Gamma draws.
pub fn beta(rng: &mut Rng, alpha: f64) -> f64 {
    let x = gamma(rng, alpha);
    let y = gamma(rng, alpha);
    if x + y > 0.0 {
        x / (x + y)
    } else {
        // Both underflowed (a tiny alpha): the distribution is then all but two points.
        if rng.bernoulli(0.5) {
            1.0
        } else {
            0.0
        }
    }
}

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut Rng) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A `Gamma(shape, 1)` draw: Marsaglia and Tsang's method ("A simple method for
/// generating gamma variables", 2000), with `U^(1 / shape)` for shapes below 1. Written
/// here rather than taken from a crate: its draws come from the counter-based stream, so
/// a batch's mixing depends on nothing but its key. The rejection loop accepts more than
/// 95 % of tries; it is bounded all the same, and ends at the mean.
fn gamma(rng: &mut Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u = rng.next_f64();
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    for _ in 0..1000 {
        let x = normal(rng);
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = rng.next_f64();
        let x2 = x * x;
        if u < 1.0 - 0.0331 * x2 * x2 || u.ln() < 0.5 * x2 + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
    shape
}

/// What [`apply`] cannot mix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MixError {
    /// MixUp of a u8 batch: torchvision's MixUp takes float batches.
    #[error("MixUp blends values: it needs an f16 or f32 batch")]
    MixUpU8,
    /// The buffer is not aligned for the batch's element type.
    #[error("buffer not aligned for the batch's element type")]
    Misaligned,
    /// The buffer is shorter than `len` images.
    #[error("buffer of {len} bytes, shorter than the batch's {need}")]
    Short {
        /// Its length.
        len: usize,
        /// What the batch needs.
        need: usize,
    },
}

/// Mixes the first `len` images of `bytes` in place: `3 * width * height` elements of
/// `dtype` each, little-endian, in `layout`, slot after slot. The definition of mixing;
/// the device backends compute the same per element.
pub fn apply(
    mix: &BatchMix,
    bytes: &mut [u8],
    dtype: DType,
    layout: Layout,
    len: usize,
    width: usize,
    height: usize,
) -> Result<(), MixError> {
    let e = 3 * width * height;
    let need = len * e * dtype.size();
    if bytes.len() < need {
        return Err(MixError::Short {
            len: bytes.len(),
            need,
        });
    }
    if len < 2 {
        // A slot that is its own partner is left as it is.
        return Ok(());
    }
    let (l, m) = mix.weights();
    let positions: Vec<usize> = mix.positions(layout, width, height).collect();
    let bytes = &mut bytes[..need];
    match (mix.kind, dtype) {
        (MixKind::MixUp, DType::U8) => Err(MixError::MixUpU8),
        (MixKind::MixUp, DType::F32) => {
            columns(elements::<f32>(bytes)?, e, &positions, |own, partner| {
                own_partner_f32(own, partner, l, m)
            });
            Ok(())
        }
        (MixKind::MixUp, DType::F16) => {
            columns(elements::<f16>(bytes)?, e, &positions, |own, partner| {
                own_partner_f16(own, partner, l, m)
            });
            Ok(())
        }
        (MixKind::CutMix, DType::U8) => {
            columns(bytes, e, &positions, |_, partner| partner);
            Ok(())
        }
        (MixKind::CutMix, DType::F16) => {
            columns(elements::<u16>(bytes)?, e, &positions, |_, partner| partner);
            Ok(())
        }
        (MixKind::CutMix, DType::F32) => {
            columns(elements::<u32>(bytes)?, e, &positions, |_, partner| partner);
            Ok(())
        }
    }
}

/// MixUp of one f32 element: `partner * m + own * l`, each operation rounded to f32.
pub fn own_partner_f32(own: f32, partner: f32, l: f32, m: f32) -> f32 {
    partner * m + own * l
}

/// MixUp of one f16 element: each product and the sum computed in f32 and rounded to f16
/// (to nearest, ties to even), as PyTorch computes half tensors.
pub fn own_partner_f16(own: f16, partner: f16, l: f32, m: f32) -> f16 {
    let a = f16::from_f32(partner.to_f32() * m);
    let b = f16::from_f32(own.to_f32() * l);
    f16::from_f32(a.to_f32() + b.to_f32())
}

/// The buffer (a whole number of elements) as elements of `T`.
fn elements<T: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut [T], MixError> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| MixError::Misaligned)
}

/// Slot `i`'s element at each of `positions` becomes `f(own, partner's)`, the partner
/// being slot `i - 1` (slot 0's, the last slot), all from the values before mixing: slots
/// are done from the last down, so a slot's partner is still unmixed when it is read, and
/// the last slot's values are kept for slot 0.
fn columns<T: Copy>(data: &mut [T], e: usize, positions: &[usize], f: impl Fn(T, T) -> T) {
    let len = data.len() / e.max(1);
    if len < 2 {
        return;
    }
    let last: Vec<T> = positions.iter().map(|&p| data[(len - 1) * e + p]).collect();
    for i in (1..len).rev() {
        let (before, from) = data.split_at_mut(i * e);
        let partner = &before[(i - 1) * e..];
        for &p in positions {
            from[p] = f(from[p], partner[p]);
        }
    }
    for (&p, &q) in positions.iter().zip(&last) {
        data[p] = f(data[p], q);
    }
}

/// Why a batch's labels have no soft targets ([`soft_labels`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SoftLabelError {
    /// A slot's label is `classes` or more.
    #[error("slot {slot}: label {label} is not below {classes}")]
    OutOfRange {
        /// The slot in the batch.
        slot: usize,
        /// Its label.
        label: u32,
        /// The number of classes asked for.
        classes: usize,
    },
    /// A slot has no label.
    #[error("slot {slot} has no label")]
    Unlabelled {
        /// The slot in the batch.
        slot: usize,
    },
}

/// The soft targets of a batch's labels, `[len, classes]` f32: one-hot rows, mixed as
/// torchvision's `_mixup_label` mixes them (`partner * (1 - lambda) + own * lambda`, in
/// f32) when the batch was mixed. `Err` names a slot without a label or with one of
/// `classes` or more.
pub fn soft_labels(
    labels: &[Option<u32>],
    classes: usize,
    mix: Option<&BatchMix>,
) -> Result<Vec<f32>, SoftLabelError> {
    let mut ids = Vec::with_capacity(labels.len());
    for (slot, l) in labels.iter().enumerate() {
        match l {
            Some(c) if (*c as usize) < classes => ids.push(*c as usize),
            Some(c) => {
                return Err(SoftLabelError::OutOfRange {
                    slot,
                    label: *c,
                    classes,
                })
            }
            None => return Err(SoftLabelError::Unlabelled { slot }),
        }
    }
    let n = ids.len();
    let mut out = vec![0f32; n * classes];
    for (i, &own) in ids.iter().enumerate() {
        let row = &mut out[i * classes..(i + 1) * classes];
        match mix {
            Some(mix) if n > 1 => {
                let (l, m) = mix.weights();
                let partner = ids[(i + n - 1) % n];
                for (c, v) in row.iter_mut().enumerate() {
                    let p = if c == partner { 1.0f32 } else { 0.0 };
                    let o = if c == own { 1.0f32 } else { 0.0 };
                    *v = own_partner_f32(o, p, l, m);
                }
            }
            _ => row[own] = 1.0,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(alpha: f64, n: usize) -> (f64, f64) {
        let mut rng = Rng::new(3, 0, 0, Stream::Mix);
        let xs: Vec<f64> = (0..n).map(|_| beta(&mut rng, alpha)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        (mean, var)
    }

    #[test]
    fn beta_draws_have_the_distributions_moments() {
        // Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)).
        for alpha in [0.1, 0.2, 0.8, 1.0, 2.0, 5.0] {
            let n = 40_000;
            let (mean, var) = moments(alpha, n);
            let want = 1.0 / (4.0 * (2.0 * alpha + 1.0));
            // Four standard errors.
            let se_mean = (want / n as f64).sqrt();
            assert!(
                (mean - 0.5).abs() < 4.0 * se_mean,
                "alpha {alpha}: mean {mean}"
            );
            assert!(
                (var - want).abs() < 0.05 * want,
                "alpha {alpha}: variance {var}, want {want}"
            );
        }
    }

    #[test]
    fn beta_one_is_uniform() {
        // Kolmogorov-Smirnov against U(0, 1).
        let mut rng = Rng::new(11, 2, 5, Stream::Mix);
        let n = 20_000;
        let mut xs: Vec<f64> = (0..n).map(|_| beta(&mut rng, 1.0)).collect();
        xs.sort_by(f64::total_cmp);
        let d = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                ((i + 1) as f64 / n as f64 - x)
                    .abs()
                    .max((x - i as f64 / n as f64).abs())
            })
            .fold(0.0, f64::max);
        // The 0.1 % critical value is 1.95 / sqrt(n).
        assert!(d < 1.95 / (n as f64).sqrt(), "D = {d}");
    }
}

//! [`Augment::validate`]: every value in range, and the options agreeing with each other.
//! The checks run in a fixed order, so a configuration with several faults is refused
//! for the first of them.

use super::*;

impl Augment {
    /// Checks every value is in range and the options agree with each other.
    pub fn validate(&self) -> Result<()> {
        self.check_geometry()?;
        self.check_jitter_and_affine()?;
        self.check_color_ops()?;
        self.check_filters()?;
        self.check_policy()?;
        self.check_erasing()?;
        self.check_output()
    }

    /// The output size, the flips' probabilities and the crop.
    fn check_geometry(&self) -> Result<()> {
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
            Crop::RandomPadded { padding } => {
                if padding >= self.out_width.min(self.out_height) {
                    return bad(
                        "random_crop_padded",
                        format!(
                            "padding {padding} must be smaller than the output {}x{} (or a crop \
                             could show no image)",
                            self.out_width, self.out_height
                        ),
                    );
                }
            }
            Crop::CenterCover { zoom } => {
                if !(zoom.is_finite() && zoom >= 1.0) {
                    return bad("buckets", format!("centre-crop zoom {zoom} must be >= 1"));
                }
            }
            Crop::Full | Crop::Letterbox => {}
        }
        Ok(())
    }

    /// The colour jitter's strengths and the affine warp's ranges.
    fn check_jitter_and_affine(&self) -> Result<()> {
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
        if let Some(a) = &self.affine {
            a.validate()?;
        }
        Ok(())
    }

    /// Grayscale, posterize and solarize.
    fn check_color_ops(&self) -> Result<()> {
        let ColorOps {
            grayscale,
            posterize,
            solarize,
        } = self.color;
        probability("random_grayscale", grayscale)?;
        drawn_op(
            "random_posterize",
            posterize,
            ("bits", "must be within 0..=8"),
            |bits| bits <= 8,
        )?;
        drawn_op(
            "random_solarize",
            solarize,
            ("threshold", "must be within [0, 255]"),
            |threshold| (0.0..=255.0).contains(&threshold),
        )
    }

    /// Auto-contrast, equalize, Gaussian blur and sharpness.
    fn check_filters(&self) -> Result<()> {
        let Filters {
            blur,
            sharpness,
            autocontrast,
            equalize,
        } = self.filters;
        probability("random_autocontrast", autocontrast)?;
        probability("random_equalize", equalize)?;
        if let Some(Blur {
            kernel: (kx, ky),
            sigma: (lo, hi),
            p,
        }) = blur
        {
            probability("gaussian_blur", p)?;
            if [kx, ky]
                .iter()
                .any(|&k| k % 2 == 0 || k > plan::MAX_BLUR_KERNEL)
            {
                return bad(
                    "gaussian_blur",
                    format!(
                        "kernel sizes {kx}x{ky} must be odd and at most {}",
                        plan::MAX_BLUR_KERNEL
                    ),
                );
            }
            if !(lo > 0.0 && lo <= hi && hi.is_finite()) {
                return bad(
                    "gaussian_blur",
                    format!("sigma ({lo}, {hi}) must satisfy 0 < lo <= hi"),
                );
            }
        }
        drawn_op(
            "random_adjust_sharpness",
            sharpness,
            ("factor", "must be finite and >= 0"),
            |factor| factor >= 0.0 && factor.is_finite(),
        )
    }

    /// The augmentation policy: its bins, magnitude and room for its ops in a plan.
    fn check_policy(&self) -> Result<()> {
        if let Some(policy) = self.policy {
            let name = match policy.kind {
                PolicyKind::RandAugment { .. } => "rand_augment",
                PolicyKind::TrivialAugmentWide => "trivial_augment_wide",
            };
            if !(2..=1024).contains(&policy.bins) {
                return bad(
                    name,
                    format!("{} magnitude bins must be within 2..=1024", policy.bins),
                );
            }
            if let PolicyKind::RandAugment { num_ops, magnitude } = policy.kind {
                if magnitude >= policy.bins {
                    return bad(
                        name,
                        format!(
                            "magnitude {magnitude} must be below the bin count {}",
                            policy.bins
                        ),
                    );
                }
                let jitter = self.jitter.map_or(0, |_| 4);
                let room = plan::MAX_OPS - jitter - self.color.count() - self.filters.count();
                if num_ops as usize > room {
                    return bad(
                        name,
                        format!(
                            "{num_ops} ops per sample: a plan holds {} colour ops, and the \
                             other colour ops configured leave room for {room}",
                            plan::MAX_OPS
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// Random erasing: its probability, box ranges and value for the dtype.
    fn check_erasing(&self) -> Result<()> {
        if let Some(e) = self.erasing {
            probability("random_erasing", e.p)?;
            if !(e.scale.0 >= 0.0 && e.scale.0 <= e.scale.1 && e.scale.1 <= 1.0) {
                return bad(
                    "random_erasing",
                    format!("scale {:?} must satisfy 0 <= lo <= hi <= 1", e.scale),
                );
            }
            if !(e.ratio.0 > 0.0 && e.ratio.0 <= e.ratio.1 && e.ratio.1.is_finite()) {
                return bad(
                    "random_erasing",
                    format!("ratio {:?} must satisfy 0 < lo <= hi", e.ratio),
                );
            }
            let whole = |v: f32| v.fract() == 0.0 && (0.0..=255.0).contains(&v);
            if e.value.iter().any(|v| !v.is_finite())
                || (self.dtype == DType::U8 && !e.value.iter().all(|&v| whole(v)))
            {
                return bad(
                    "random_erasing",
                    format!(
                        "value {:?} must be finite, and whole numbers within 0..=255 for a u8 \
                         batch",
                        e.value
                    ),
                );
            }
        }
        Ok(())
    }

    /// Batch mixing, the box rule and normalisation, against the dtype.
    fn check_output(&self) -> Result<()> {
        for (name, alpha) in [("mixup", self.mixing.mixup), ("cutmix", self.mixing.cutmix)] {
            if let Some(a) = alpha {
                if !(a > 0.0 && a.is_finite()) {
                    return bad(name, format!("alpha {a} must be positive and finite"));
                }
            }
        }
        if self.mixing.mixup.is_some() && self.dtype == DType::U8 {
            return bad(
                "mixup",
                "MixUp blends values: it needs an f16 or f32 dtype (as torchvision's MixUp \
                 takes float batches)"
                    .into(),
            );
        }
        let r = self.box_rule;
        if !(r.min_size >= 0.0 && r.min_size.is_finite() && (0.0..=1.0).contains(&r.min_visible)) {
            return bad(
                "box_rule",
                format!(
                    "min_size {} must be >= 0 and min_visible {} within [0, 1]",
                    r.min_size, r.min_visible
                ),
            );
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
}

/// A refused setting.
fn bad(setting: &str, m: String) -> Result<()> {
    Err(Error::config(setting, m))
}

/// An op drawn with probability `p` (`op` is `(value, p)`, `None` when off): a probability
/// outside `[0, 1]` refused, then a value that is not `ok`, naming it and the rule it
/// breaks (`what`: its name and the rule).
fn drawn_op<T: Copy + std::fmt::Display>(
    name: &str,
    op: Option<(T, f64)>,
    what: (&str, &str),
    ok: impl FnOnce(T) -> bool,
) -> Result<()> {
    let Some((value, p)) = op else {
        return Ok(());
    };
    probability(name, p)?;
    if ok(value) {
        Ok(())
    } else {
        bad(name, format!("{} {value} {}", what.0, what.1))
    }
}

/// A probability outside `[0, 1]` refused.
fn probability(name: &str, p: f64) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        bad(name, format!("probability {p} is not in [0, 1]"))
    }
}

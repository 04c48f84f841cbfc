//! The augmentation configuration, as an immutable builder: each method returns a new
//! `Augment`.

use pyo3::prelude::*;

use crate::errors::{config_err, IntoPy};

/// What each sample goes through: geometry (crop, resize, flip, affine), colour,
/// filters, policies, erasing, mixing, normalisation, output type and layout. Every
/// random choice is keyed by `(seed, epoch, sample id)`: the same on every backend,
/// thread count and batch size. Label masks follow the geometry only, nearest-neighbour.
///
/// Methods return a new `Augment`, so they chain:
/// `Augment().random_resized_crop(224).flip_horizontal(0.5).normalize(MEAN, STD)`.
#[pyclass(module = "stoker", frozen)]
#[derive(Clone)]
pub struct Augment {
    pub(crate) inner: stoker::Augment,
}

impl Augment {
    fn with(&self, f: impl FnOnce(stoker::Augment) -> stoker::Augment) -> Augment {
        Augment {
            inner: f(self.inner.clone()),
        }
    }
}

#[pymethods]
impl Augment {
    /// No operation: the decoded image at its own size (set a size before building a
    /// pipeline: batches need one).
    #[new]
    fn new() -> Self {
        Augment {
            inner: stoker::Augment::new(),
        }
    }

    /// The usual evaluation transform: the shorter side resized to `size * 256 / 224`, a
    /// centre crop of `size`.
    #[staticmethod]
    fn validation(size: u32) -> Self {
        Augment {
            inner: stoker::Augment::validation(size),
        }
    }

    /// torchvision's `RandomResizedCrop(size, scale, ratio)`.
    #[pyo3(signature = (size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0)))]
    fn random_resized_crop(&self, size: u32, scale: (f64, f64), ratio: (f64, f64)) -> Self {
        self.with(|a| a.random_resized_crop(size, scale, ratio))
    }

    /// Resize the shorter side to `resize`, then centre-crop `size`.
    fn resize_center_crop(&self, resize: u32, size: u32) -> Self {
        self.with(|a| a.resize_center_crop(resize, size))
    }

    /// Fit into `width` x `height` keeping the aspect ratio, padded with the fill.
    fn letterbox(&self, width: u32, height: u32) -> Self {
        self.with(|a| a.letterbox(width, height))
    }

    /// torchvision's `RandomCrop((height, width), padding)`.
    fn random_crop_padded(&self, width: u32, height: u32, padding: u32) -> Self {
        self.with(|a| a.random_crop_padded(width, height, padding))
    }

    /// Resize to exactly `width` x `height`.
    fn resize(&self, width: u32, height: u32) -> Self {
        self.with(|a| a.resize(width, height))
    }

    /// Set the output size without changing the geometry.
    fn output_size(&self, width: u32, height: u32) -> Self {
        self.with(|a| a.output_size(width, height))
    }

    /// Mirror left-right with probability `p`.
    #[pyo3(signature = (p=0.5))]
    fn flip_horizontal(&self, p: f64) -> Self {
        self.with(|a| a.flip_horizontal(p))
    }

    /// Mirror top-bottom with probability `p`.
    #[pyo3(signature = (p=0.5))]
    fn flip_vertical(&self, p: f64) -> Self {
        self.with(|a| a.flip_vertical(p))
    }

    /// torchvision's `RandomAffine`: ranges for the rotation (degrees), translation
    /// (fractions of the size), scale and shears (degrees).
    #[pyo3(signature = (*, degrees=(0.0, 0.0), translate=(0.0, 0.0), scale=(1.0, 1.0), shear=(0.0, 0.0), shear_y=(0.0, 0.0)))]
    fn random_affine(
        &self,
        degrees: (f64, f64),
        translate: (f64, f64),
        scale: (f64, f64),
        shear: (f64, f64),
        shear_y: (f64, f64),
    ) -> Self {
        let affine = stoker::Affine::new()
            .degrees(degrees.0, degrees.1)
            .translate(translate.0, translate.1)
            .scale(scale.0, scale.1)
            .shear(shear.0, shear.1)
            .shear_y(shear_y.0, shear_y.1);
        self.with(|a| a.random_affine(affine))
    }

    /// torchvision's `RandomRotation(degrees)`: a rotation in `[-degrees, degrees]`.
    fn random_rotation(&self, degrees: f64) -> Self {
        self.with(|a| a.random_rotation(degrees))
    }

    /// The colour of pixels the geometry leaves uncovered.
    fn fill(&self, rgb: [u8; 3]) -> Self {
        self.with(|a| a.fill(rgb))
    }

    /// The mask class of pixels the geometry leaves uncovered.
    fn mask_fill(&self, class_id: u16) -> Self {
        self.with(|a| a.mask_fill(class_id))
    }

    /// torchvision's `ColorJitter(brightness, contrast, saturation, hue)`.
    #[pyo3(signature = (brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0))]
    fn color_jitter(&self, brightness: f64, contrast: f64, saturation: f64, hue: f64) -> Self {
        self.with(|a| {
            let a = a.color_jitter(brightness, contrast, saturation);
            if hue != 0.0 {
                a.hue(hue)
            } else {
                a
            }
        })
    }

    /// `RandomGrayscale(p)`.
    #[pyo3(signature = (p=0.1))]
    fn random_grayscale(&self, p: f64) -> Self {
        self.with(|a| a.random_grayscale(p))
    }

    /// `RandomPosterize(bits, p)`.
    #[pyo3(signature = (bits, p=0.5))]
    fn random_posterize(&self, bits: u32, p: f64) -> Self {
        self.with(|a| a.random_posterize(bits, p))
    }

    /// `RandomSolarize(threshold, p)`, threshold in 0..=1.
    #[pyo3(signature = (threshold, p=0.5))]
    fn random_solarize(&self, threshold: f64, p: f64) -> Self {
        self.with(|a| a.random_solarize(threshold, p))
    }

    /// `GaussianBlur(kernel, sigma)` applied with probability `p`.
    #[pyo3(signature = (kernel, sigma=(0.1, 2.0), p=1.0))]
    fn gaussian_blur(&self, kernel: (u32, u32), sigma: (f64, f64), p: f64) -> Self {
        self.with(|a| a.gaussian_blur(kernel, sigma, p))
    }

    /// `RandomAdjustSharpness(factor, p)`.
    #[pyo3(signature = (factor, p=0.5))]
    fn random_adjust_sharpness(&self, factor: f64, p: f64) -> Self {
        self.with(|a| a.random_adjust_sharpness(factor, p))
    }

    /// `RandomAutocontrast(p)`.
    #[pyo3(signature = (p=0.5))]
    fn random_autocontrast(&self, p: f64) -> Self {
        self.with(|a| a.random_autocontrast(p))
    }

    /// `RandomEqualize(p)`.
    #[pyo3(signature = (p=0.5))]
    fn random_equalize(&self, p: f64) -> Self {
        self.with(|a| a.random_equalize(p))
    }

    /// torchvision's `RandAugment(num_ops, magnitude, num_magnitude_bins)`.
    #[pyo3(signature = (num_ops=2, magnitude=9, bins=31))]
    fn rand_augment(&self, num_ops: u32, magnitude: u32, bins: u32) -> Self {
        self.with(|a| a.rand_augment(num_ops, magnitude, bins))
    }

    /// torchvision's `TrivialAugmentWide(num_magnitude_bins)`.
    #[pyo3(signature = (bins=31))]
    fn trivial_augment_wide(&self, bins: u32) -> Self {
        self.with(|a| a.trivial_augment_wide(bins))
    }

    /// torchvision's `RandomErasing(p, scale, ratio, value)` (value per channel, in the
    /// output's units).
    #[pyo3(signature = (p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=[0.0, 0.0, 0.0]))]
    fn random_erasing(
        &self,
        p: f64,
        scale: (f64, f64),
        ratio: (f64, f64),
        value: [f32; 3],
    ) -> Self {
        self.with(|a| a.random_erasing(p, scale, ratio, value))
    }

    /// MixUp over each batch with Beta(alpha, alpha) (see `Batch.soft_labels`).
    fn mixup(&self, alpha: f64) -> Self {
        self.with(|a| a.mixup(alpha))
    }

    /// CutMix over each batch with Beta(alpha, alpha) (see `Batch.soft_labels`).
    fn cutmix(&self, alpha: f64) -> Self {
        self.with(|a| a.cutmix(alpha))
    }

    /// Normalise each channel: `(x / 255 - mean) / std` (makes the output float32 if it
    /// was uint8).
    fn normalize(&self, mean: [f32; 3], std: [f32; 3]) -> Self {
        self.with(|a| a.normalize(mean, std))
    }

    /// `"nchw"` (default) or `"nhwc"`.
    fn layout(&self, layout: &str) -> PyResult<Self> {
        let l = match layout.to_ascii_lowercase().as_str() {
            "nchw" => stoker::Layout::Nchw,
            "nhwc" => stoker::Layout::Nhwc,
            other => {
                return Err(config_err(
                    "layout",
                    format!("{other:?}: expected \"nchw\" or \"nhwc\""),
                ))
            }
        };
        Ok(self.with(|a| a.layout(l)))
    }

    /// The element type: `"u8"` (default), `"f16"` or `"f32"`.
    fn dtype(&self, dtype: &str) -> PyResult<Self> {
        let d: stoker::DType = dtype.parse().py_err()?;
        Ok(self.with(|a| a.dtype(d)))
    }

    /// Antialiased downscaling, as torchvision's `antialias=True` (default on).
    fn antialias(&self, on: bool) -> Self {
        self.with(|a| a.antialias(on))
    }

    /// Decode only what the crop reads, at a reduced IDCT scale where the output allows.
    fn crop_aware(&self, on: bool) -> Self {
        self.with(|a| a.crop_aware(on))
    }

    /// The output `(width, height)`.
    #[getter]
    fn size(&self) -> (u32, u32) {
        self.inner.get_output_size()
    }

    /// Whether any choice is random (a validation pipeline should have none).
    #[getter]
    fn is_random(&self) -> bool {
        self.inner.is_random()
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

//! The augmentation configuration, as an immutable builder: each method returns a new
//! `Augment`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::errors::{config_err, IntoPy};
use crate::recipe::{kwargs, reduce, replay, Recipe};

/// What each sample goes through: geometry (crop, resize, flip, affine), colour,
/// filters, policies, erasing, mixing, normalisation, output type and layout. Every
/// random choice is keyed by `(seed, epoch, sample id)`: the same on every backend,
/// thread count and batch size. Label masks follow the geometry only, nearest-neighbour.
///
/// Methods return a new `Augment`, so they chain:
/// `Augment().random_resized_crop(224).flip_horizontal(0.5).normalize(MEAN, STD)`.
///
/// It pickles (for `spawn`ed workers): the pickle carries the chain of calls that made it.
#[pyclass(module = "stoker", frozen)]
pub struct Augment {
    pub(crate) inner: stoker::Augment,
    /// The calls that made it, for pickling.
    recipe: Recipe,
}

/// The `#[pymethods]` of `Augment`: each chained operation written once, as
/// `fn name(args) => |a| new_augment;`, into a method that also records the call (its
/// name and its arguments, by keyword) in the new object's recipe; then the class's
/// other methods.
macro_rules! augment_pymethods {
    (
        $(
            $(#[$m:meta])*
            fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => |$a:ident| $body:expr;
        )*
        others { $($own:tt)* }
    ) => {
        #[pymethods]
        impl Augment {
            $(
                $(#[$m])*
                fn $name(&self, py: Python<'_>, $($arg: $ty),*) -> PyResult<Self> {
                    let recipe = self.recipe.then(stringify!($name), kwargs!(py, $($arg = $arg),*));
                    let $a = self.inner.clone();
                    Ok(Augment { inner: $body, recipe })
                }
            )*
            $($own)*
        }
    };
}

/// `"nchw"` or `"nhwc"`, any case.
fn parse_layout(layout: &str) -> PyResult<stoker::Layout> {
    match layout.to_ascii_lowercase().as_str() {
        "nchw" => Ok(stoker::Layout::Nchw),
        "nhwc" => Ok(stoker::Layout::Nhwc),
        other => Err(config_err(
            "layout",
            format!("{other:?}: expected \"nchw\" or \"nhwc\""),
        )),
    }
}

augment_pymethods! {
    /// torchvision's `RandomResizedCrop(size, scale, ratio)`.
    #[pyo3(signature = (size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0)))]
    fn random_resized_crop(size: u32, scale: (f64, f64), ratio: (f64, f64)) =>
        |a| a.random_resized_crop(size, scale, ratio);

    /// Resize the shorter side to `resize`, then centre-crop `size`.
    fn resize_center_crop(resize: u32, size: u32) => |a| a.resize_center_crop(resize, size);

    /// Fit into `width` x `height` keeping the aspect ratio, padded with the fill.
    fn letterbox(width: u32, height: u32) => |a| a.letterbox(width, height);

    /// torchvision's `RandomCrop((height, width), padding)`.
    fn random_crop_padded(width: u32, height: u32, padding: u32) =>
        |a| a.random_crop_padded(width, height, padding);

    /// Resize to exactly `width` x `height`.
    fn resize(width: u32, height: u32) => |a| a.resize(width, height);

    /// Set the output size without changing the geometry.
    fn output_size(width: u32, height: u32) => |a| a.output_size(width, height);

    /// Mirror left-right with probability `p`.
    #[pyo3(signature = (p=0.5))]
    fn flip_horizontal(p: f64) => |a| a.flip_horizontal(p);

    /// Mirror top-bottom with probability `p`.
    #[pyo3(signature = (p=0.5))]
    fn flip_vertical(p: f64) => |a| a.flip_vertical(p);

    /// torchvision's `RandomAffine`: ranges for the rotation (degrees), translation
    /// (fractions of the size), scale and shears (degrees).
    #[pyo3(signature = (*, degrees=(0.0, 0.0), translate=(0.0, 0.0), scale=(1.0, 1.0), shear=(0.0, 0.0), shear_y=(0.0, 0.0)))]
    fn random_affine(
        degrees: (f64, f64),
        translate: (f64, f64),
        scale: (f64, f64),
        shear: (f64, f64),
        shear_y: (f64, f64),
    ) => |a| a.random_affine(
        stoker::Affine::new()
            .degrees(degrees.0, degrees.1)
            .translate(translate.0, translate.1)
            .scale(scale.0, scale.1)
            .shear(shear.0, shear.1)
            .shear_y(shear_y.0, shear_y.1),
    );

    /// torchvision's `RandomRotation(degrees)`: a rotation in `[-degrees, degrees]`.
    fn random_rotation(degrees: f64) => |a| a.random_rotation(degrees);

    /// The colour of pixels the geometry leaves uncovered.
    fn fill(rgb: [u8; 3]) => |a| a.fill(rgb);

    /// The mask class of pixels the geometry leaves uncovered.
    fn mask_fill(class_id: u16) => |a| a.mask_fill(class_id);

    /// torchvision's `ColorJitter(brightness, contrast, saturation, hue)`.
    #[pyo3(signature = (brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0))]
    fn color_jitter(brightness: f64, contrast: f64, saturation: f64, hue: f64) => |a| {
        let a = a.color_jitter(brightness, contrast, saturation);
        if hue != 0.0 {
            a.hue(hue)
        } else {
            a
        }
    };

    /// `RandomGrayscale(p)`.
    #[pyo3(signature = (p=0.1))]
    fn random_grayscale(p: f64) => |a| a.random_grayscale(p);

    /// `RandomPosterize(bits, p)`.
    #[pyo3(signature = (bits, p=0.5))]
    fn random_posterize(bits: u32, p: f64) => |a| a.random_posterize(bits, p);

    /// `RandomSolarize(threshold, p)`, threshold in 0..=1.
    #[pyo3(signature = (threshold, p=0.5))]
    fn random_solarize(threshold: f64, p: f64) => |a| a.random_solarize(threshold, p);

    /// `GaussianBlur(kernel, sigma)` applied with probability `p`.
    #[pyo3(signature = (kernel, sigma=(0.1, 2.0), p=1.0))]
    fn gaussian_blur(kernel: (u32, u32), sigma: (f64, f64), p: f64) =>
        |a| a.gaussian_blur(kernel, sigma, p);

    /// `RandomAdjustSharpness(factor, p)`.
    #[pyo3(signature = (factor, p=0.5))]
    fn random_adjust_sharpness(factor: f64, p: f64) =>
        |a| a.random_adjust_sharpness(factor, p);

    /// `RandomAutocontrast(p)`.
    #[pyo3(signature = (p=0.5))]
    fn random_autocontrast(p: f64) => |a| a.random_autocontrast(p);

    /// `RandomEqualize(p)`.
    #[pyo3(signature = (p=0.5))]
    fn random_equalize(p: f64) => |a| a.random_equalize(p);

    /// torchvision's `RandAugment(num_ops, magnitude, num_magnitude_bins)`.
    #[pyo3(signature = (num_ops=2, magnitude=9, bins=31))]
    fn rand_augment(num_ops: u32, magnitude: u32, bins: u32) =>
        |a| a.rand_augment(num_ops, magnitude, bins);

    /// torchvision's `TrivialAugmentWide(num_magnitude_bins)`.
    #[pyo3(signature = (bins=31))]
    fn trivial_augment_wide(bins: u32) => |a| a.trivial_augment_wide(bins);

    /// torchvision's `RandomErasing(p, scale, ratio, value)` (value per channel, in the
    /// output's units).
    #[pyo3(signature = (p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=[0.0, 0.0, 0.0]))]
    fn random_erasing(p: f64, scale: (f64, f64), ratio: (f64, f64), value: [f32; 3]) =>
        |a| a.random_erasing(p, scale, ratio, value);

    /// MixUp over each batch with Beta(alpha, alpha) (see `Batch.soft_labels`).
    fn mixup(alpha: f64) => |a| a.mixup(alpha);

    /// CutMix over each batch with Beta(alpha, alpha) (see `Batch.soft_labels`).
    fn cutmix(alpha: f64) => |a| a.cutmix(alpha);

    /// Normalise each channel: `(x / 255 - mean) / std` (makes the output float32 if it
    /// was uint8).
    fn normalize(mean: [f32; 3], std: [f32; 3]) => |a| a.normalize(mean, std);

    /// `"nchw"` (default) or `"nhwc"`.
    fn layout(layout: &str) => |a| a.layout(parse_layout(layout)?);

    /// The element type: `"u8"` (default), `"f16"` or `"f32"`.
    fn dtype(dtype: &str) => |a| a.dtype(dtype.parse::<stoker::DType>().py_err()?);

    /// Antialiased downscaling, as torchvision's `antialias=True` (default on).
    fn antialias(on: bool) => |a| a.antialias(on);

    /// Decode only what the crop reads, at a reduced IDCT scale where the output allows.
    fn crop_aware(on: bool) => |a| a.crop_aware(on);

    others {
        /// No operation: the decoded image at its own size (set a size before building a
        /// pipeline: batches need one).
        #[new]
        fn new(py: Python<'_>) -> Self {
            Augment {
                inner: stoker::Augment::new(),
                recipe: Recipe::start("", PyDict::new(py)),
            }
        }

        /// The usual evaluation transform: the shorter side resized to `size * 256 / 224`,
        /// a centre crop of `size`.
        #[staticmethod]
        fn validation(py: Python<'_>, size: u32) -> PyResult<Self> {
            Ok(Augment {
                inner: stoker::Augment::validation(size),
                recipe: Recipe::start("validation", kwargs!(py, size = size)),
            })
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

        /// Whether batches are mixed (MixUp or CutMix): their `soft_labels` are the
        /// targets then.
        #[getter]
        fn mixes(&self) -> bool {
            self.inner.get_mixing().any()
        }

        /// Pickling: the calls that made it.
        fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
            reduce(slf.as_any(), (slf.get().recipe.steps(slf.py())?,))
        }

        /// Unpickling (`pickle.loads` calls it): the augmentation made again by `steps`.
        #[classmethod]
        fn _restore(cls: &Bound<'_, PyType>, steps: &Bound<'_, PyAny>) -> PyResult<Py<Self>> {
            Ok(replay(cls, steps)?.cast_into::<Self>()?.unbind())
        }

        fn __repr__(&self) -> String {
            format!("{:?}", self.inner)
        }
    }
}

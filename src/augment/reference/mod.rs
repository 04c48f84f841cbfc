//! The CPU definition of every pixel a [`SamplePlan`](super::SamplePlan) produces. GPU shaders and kernels
//! are tested against these functions.
//!
//! - Image resize: Pillow's `Image.resize(size, BILINEAR, box)`: separable triangle filter,
//!   support widened by the scale factor when downscaling (antialias), half-pixel centres,
//!   horizontal pass then vertical, 22-bit fixed-point coefficients, u8 between passes.
//!   Without [`ANTIALIAS`](super::plan::ANTIALIAS) the support stays 1 (plain bilinear).
//! - Label resize: Pillow's NEAREST over the same box: `src = floor(x0 + (i + 0.5) * scale)`.
//! - Jitter (image planes only), in the plan's order, as torchvision.transforms.v2 does on
//!   u8 tensors: brightness blends with black, contrast with the mean of the (floored)
//!   grayscale, saturation with the (floored) grayscale, each result clamped and truncated
//!   to u8; hue through HSV, scaled back by 255.999 and truncated. The colour ops after
//!   it, likewise on u8 in the plan's order: grayscale, posterize, solarize (integer);
//!   auto-contrast and equalize (torchvision's f32 and integer steps from each channel's
//!   extremes and histogram); sharpness (the 3x3 smoothing exactly, the blend in f32);
//!   Gaussian blur (separable, integer weights, exact sums, [`gaussian_blur`]).
//! - Affine warp ([`AFFINE`](super::plan::AFFINE)), in the output frame after the jitter, as
//!   torchvision.transforms.v2's `affine` does on u8 tensors (`grid_sample`, zero
//!   padding, the fill blended by the interpolated coverage, rounded): the position each
//!   output pixel reads is exact fixed point ([`SamplePlan::affine_source`](super::SamplePlan::affine_source)), bilinear
//!   weights have [`AFFINE_WEIGHT_BITS`](super::plan::AFFINE_WEIGHT_BITS) bits and the arithmetic is integer, so every
//!   backend computes the same value. Label planes: the nearest pixel of the resized
//!   plane (ties to even, as `grid_sample`'s nearest mode), the mask fill outside.
//! - Flips, then `(x / 255 - mean) / std` for float outputs, layout and dtype.
//!
//! One file per stage: `resize` (the image resize and its tables),
//! `warp` (the affine warp and the label planes' nearest resize),
//! `photometric` (the colour jitter and the whole-image colour ops),
//! `slot` (flips, normalisation, layout, dtype, erasing, and
//! [`execute_image`], which runs the stages in order).
#![doc(hidden)]

mod photometric;
mod resize;
mod simd;
mod slot;
mod warp;

pub use photometric::{
    autocontrast_value, blur_round, blur_weights, channel_extremes, channel_histograms,
    equalize_luts, gaussian_blur, hsv_sector, jitter_rgb, needs_whole_image, posterize_mask,
    reflect, sharpen, sharpen_value,
};
pub use resize::{needed_window, resize_coeffs, resize_only, Coeffs};
pub use slot::{erase_slot, execute_image, write_slot};
pub use warp::{blend_fill, execute_mask, mask_tables, nearest_table, warp_rgb};

/// Reusable buffers for [`execute_image`]; one per worker thread.
#[derive(Debug, Default)]
pub struct Scratch {
    resized: Vec<u8>,
    warped: Vec<u8>,
    horizontal: Vec<u8>,
    kx: Coeffs,
    ky: Coeffs,
}

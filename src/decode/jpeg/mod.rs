//! JPEG: a typed header scan of our own ([`markers`]) and libjpeg-turbo's decoder behind a
//! safe wrapper (`turbo`, private) with scaled, cropped and row-skipping decode; for the GPU
//! paths, host entropy decoding to DCT coefficients and their upload layout ([`coeffs`]),
//! with scalar oracles of the device stages ([`idct`], [`color`]).

pub mod coeffs;
pub mod color;
pub mod idct;
pub mod markers;
pub(crate) mod turbo;

pub use turbo::read_coefficients;

//! JPEG: a typed header scan of our own ([`markers`]) and libjpeg-turbo's decoder behind a
//! safe wrapper (`turbo`, private) with scaled, cropped and row-skipping decode.

pub mod markers;
pub(crate) mod turbo;

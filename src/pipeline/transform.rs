//! User transforms: the caller's own code run on each decoded sample, on the pipeline's
//! worker threads, between the decode (and the decoded-sample cache) and the fused
//! augment pass.
//!
//! A transform receives the whole decoded image (upright, full size: crop-aware decoding
//! is off for a pipeline with a transform, since the transform may read any pixel), the
//! sample's label plane and targets, and a random stream of its own keyed by
//! `(seed, epoch, sample id)`, so what it draws is the same whatever the backend, the
//! number of threads or the batch size, and differs between samples and epochs. It may
//! change the pixels in place or replace the image (and the mask) with one of another
//! size; the sample's plan (crop, resize, flips, jitter, ...) is then made for the image
//! it returns, and its boxes and keypoints are moved by that plan from where the
//! transform left them.
//!
//! On the wgpu and CUDA backends a pipeline with a transform decodes every sample on the
//! CPU (the transform needs pixels on the host), uploads the result and runs the rest of
//! the plan on the device; the samples count as [`crate::Stats::cpu_fallbacks`].
//!
//! A transform that returns an error (or panics) fails its sample with
//! [`SampleErrorKind::Transform`] and the error's text, reported under the pipeline's
//! [`OnError`](crate::OnError) policy like a file that does not decode.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::decode::{Image8, LabelPlane, Limits};
use crate::error::{SampleError, SampleErrorKind};
use crate::rng::{Rng, Stream};
use crate::source::{Sample, Targets};

/// What a user transform returns: `Err` fails the sample (see the [module docs](self)).
pub type TransformResult = std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The function type of a user transform.
pub(crate) type TransformFn = dyn Fn(&mut UserSample<'_>) -> TransformResult + Send + Sync;

/// A user transform as the pipeline keeps it.
#[derive(Clone)]
pub(crate) struct UserTransform(pub(crate) Arc<TransformFn>);

impl fmt::Debug for UserTransform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UserTransform(..)")
    }
}

/// One decoded sample, as a user transform sees and changes it.
pub struct UserSample<'a> {
    sample: &'a Sample,
    image: &'a mut Image8,
    mask: Option<&'a mut LabelPlane>,
    targets: Option<&'a mut Targets>,
    rng: Rng,
}

/// Why an image or mask handed back by a transform is refused.
fn refuse(reason: String) -> TransformResult {
    Err(reason.into())
}

impl UserSample<'_> {
    /// The sample's stable id.
    pub fn id(&self) -> u64 {
        self.sample.id
    }

    /// The sample's path (relative to the dataset root) or other location.
    pub fn path(&self) -> &str {
        &self.sample.path
    }

    /// The sample's class id, when it has one.
    pub fn label(&self) -> Option<u32> {
        self.sample.label
    }

    /// Width of the image, pixels.
    pub fn width(&self) -> u32 {
        self.image.width
    }

    /// Height of the image, pixels.
    pub fn height(&self) -> u32 {
        self.image.height
    }

    /// The image: `width * height` RGB pixels, row by row, 3 bytes each.
    pub fn pixels(&self) -> &[u8] {
        &self.image.data
    }

    /// The image's pixels, to change in place (see [`UserSample::pixels`]).
    pub fn pixels_mut(&mut self) -> &mut [u8] {
        &mut self.image.data
    }

    /// Replaces the image by one of `width x height` RGB pixels (`rgb` holds
    /// `3 * width * height` bytes). A sample with a mask must get a mask of the same
    /// size too ([`UserSample::set_mask`]), or it fails when the transform returns.
    pub fn set_image(&mut self, width: u32, height: u32, rgb: Vec<u8>) -> TransformResult {
        let want = 3 * u64::from(width) * u64::from(height);
        if width == 0 || height == 0 || rgb.len() as u64 != want {
            return refuse(format!(
                "set_image: {} bytes for a {width}x{height} RGB image (needs {want}, and a \
                 non-empty size)",
                rgb.len()
            ));
        }
        *self.image = Image8::new(width, height, rgb);
        Ok(())
    }

    /// The label plane, for a sample with a mask.
    pub fn mask(&self) -> Option<&LabelPlane> {
        self.mask.as_deref()
    }

    /// The label plane, to change in place.
    pub fn mask_mut(&mut self) -> Option<&mut LabelPlane> {
        self.mask.as_deref_mut()
    }

    /// Replaces the label plane by one of `width x height` class ids. Only a sample that
    /// has a mask can be given one (every sample of a pipeline has one, or none does).
    pub fn set_mask(&mut self, width: u32, height: u32, ids: Vec<u16>) -> TransformResult {
        let Some(mask) = self.mask.as_deref_mut() else {
            return refuse("set_mask: the sample has no mask".into());
        };
        let want = u64::from(width) * u64::from(height);
        if width == 0 || height == 0 || ids.len() as u64 != want {
            return refuse(format!(
                "set_mask: {} class ids for a {width}x{height} mask",
                ids.len()
            ));
        }
        *mask = LabelPlane {
            width,
            height,
            data: ids,
        };
        Ok(())
    }

    /// The sample's targets (several class ids, a vector, boxes, keypoints), when it has
    /// any, in the pixels of the image as the transform got it.
    pub fn targets(&self) -> Option<&Targets> {
        self.targets.as_deref()
    }

    /// The sample's targets, to change: a transform that moves the image's content moves
    /// its boxes and keypoints too. The pipeline then moves them by the sample's plan.
    pub fn targets_mut(&mut self) -> Option<&mut Targets> {
        self.targets.as_deref_mut()
    }

    /// The sample's own random stream, keyed by `(seed, epoch, sample id)`: the same
    /// draws on every backend, thread count and batch size; other draws in another epoch
    /// or for another sample.
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }
}

/// Runs `t` on the decoded `image` (and `mask`) of sample `s` in `epoch`, then checks
/// what it left: a whole image within `limits`, a mask of the image's size. The sample's
/// targets, when it has any, are handed over as a copy, returned when the transform
/// succeeds (for the batch, in place of the sample's own).
pub(crate) fn apply(
    t: &UserTransform,
    (seed, epoch): (u64, u64),
    limits: &Limits,
    s: &Sample,
    image: &mut Image8,
    mask: Option<&mut LabelPlane>,
) -> Result<Option<Arc<Targets>>, SampleError> {
    let fail = |reason: String| SampleError::new(s, SampleErrorKind::Transform, reason);
    let mut targets = s.targets.as_deref().cloned();
    let mut user = UserSample {
        sample: s,
        image,
        mask,
        targets: targets.as_mut(),
        rng: Rng::new(seed, epoch, s.id, Stream::User),
    };
    let r = catch_unwind(AssertUnwindSafe(|| (t.0)(&mut user)));
    let UserSample { image, mask, .. } = user;
    match r {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(fail(format!("user transform: {e}"))),
        Err(p) => {
            return Err(fail(format!(
                "user transform panicked: {}",
                crate::error::panic_message(p.as_ref())
            )))
        }
    }
    // `pixels_mut` cannot change the length, `set_image` checks it; the image is whole
    // from here on (the plan is made for it).
    let (w, h) = (image.width, image.height);
    if image.data.len() as u64 != 3 * u64::from(w) * u64::from(h) || w == 0 || h == 0 {
        return Err(fail(format!(
            "user transform left {} bytes for a {w}x{h} image",
            image.data.len()
        )));
    }
    if u64::from(w) * u64::from(h) > limits.max_pixels {
        return Err(SampleError::new(
            s,
            SampleErrorKind::Limit,
            format!(
                "user transform made a {w}x{h} image, over the limit of {} pixels",
                limits.max_pixels
            ),
        ));
    }
    image.origin = (0, 0);
    image.full = (w, h);
    image.scale = 1;
    if let Some(m) = mask {
        if (m.width, m.height) != (w, h) || m.data.len() as u64 != u64::from(w) * u64::from(h) {
            return Err(SampleError::new(
                s,
                SampleErrorKind::Mask,
                format!(
                    "after the user transform the mask is {}x{} but the image is {w}x{h}",
                    m.width, m.height
                ),
            ));
        }
    }
    Ok(targets.map(Arc::new))
}

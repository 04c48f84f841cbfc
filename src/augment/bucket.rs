//! An augmentation moved onto an aspect-ratio bucket's output size
//! ([`Augment::for_bucket`]).

use super::{Augment, Crop};

impl Augment {
    /// This augmentation with the output `width x height` of an aspect-ratio bucket
    /// (`PipelineBuilder::buckets`), its crop mapped so that the bucket's aspect ratio is
    /// kept rather than stretched:
    ///
    /// - the whole image ([`Augment::resize`], [`Augment::output_size`] alone, or no
    ///   geometry chosen): resized to cover the bucket, then centre-cropped to it (the
    ///   largest centred box of the bucket's aspect ratio, resized to its size);
    /// - [`Augment::resize_center_crop`]`(resize, size)`: the same centred box, shrunk by
    ///   `resize / size` on each side (the margin a validation crop leaves; a `resize`
    ///   below `size` counts as equal);
    /// - [`Augment::random_resized_crop`]: the same area fractions, with the aspect-ratio
    ///   range multiplied by the bucket's (a range around 1 gives crops around the
    ///   bucket's shape), resized to the bucket's size;
    /// - [`Augment::letterbox`] and [`Augment::random_crop_padded`]: as they are, with the
    ///   bucket's size as output.
    ///
    /// Everything else (flips, colour, affine, erasing, dtype, layout) is kept. Boxes,
    /// keypoints and masks follow each sample's plan as with any crop.
    pub fn for_bucket(&self, width: u32, height: u32) -> Augment {
        let mut a = self.clone();
        let ratio = f64::from(width.max(1)) / f64::from(height.max(1));
        a.crop = match self.crop {
            Crop::Full => Crop::CenterCover { zoom: 1.0 },
            Crop::ResizeCenterCrop { resize } => {
                let side = self.out_width.min(self.out_height).max(1);
                Crop::CenterCover {
                    zoom: (f64::from(resize) / f64::from(side)).max(1.0),
                }
            }
            Crop::RandomResized { scale, ratio: r } => Crop::RandomResized {
                scale,
                ratio: (r.0 * ratio, r.1 * ratio),
            },
            c @ (Crop::Letterbox | Crop::RandomPadded { .. } | Crop::CenterCover { .. }) => c,
        };
        a.out_width = width;
        a.out_height = height;
        a
    }
}

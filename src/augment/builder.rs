//! The builder methods and getters of [`Augment`]: each setter takes and returns the
//! configuration, which [`Augment::validate`] checks as a whole.

use super::*;

impl Augment {
    /// An augmentation with nothing chosen yet: u8, NCHW, no randomness, and no output
    /// size. Choose the geometry with [`Augment::resize`], [`Augment::random_resized_crop`],
    /// [`Augment::resize_center_crop`] or [`Augment::output_size`]; a pipeline refuses an
    /// augmentation without one ([`Augment::validate`]) rather than pick a size silently.
    pub fn new() -> Self {
        Augment {
            crop: Crop::Full,
            out_width: 0,
            out_height: 0,
            flip_h: 0.0,
            flip_v: 0.0,
            jitter: None,
            normalize: None,
            layout: Layout::Nchw,
            dtype: DType::U8,
            antialias: true,
            crop_aware: true,
            affine: None,
            fill: [0; 3],
            mask_fill: 0,
            box_rule: BoxRule::default(),
            color: ColorOps::default(),
            filters: Filters::default(),
            policy: None,
            erasing: None,
            mixing: mix::Mixing::default(),
        }
    }

    /// The usual validation transform: shorter side to `size * 256 / 224`, centre crop `size`.
    pub fn validation(size: u32) -> Self {
        let resize = ((f64::from(size) * 256.0 / 224.0).round()) as u32;
        Augment::new().resize_center_crop(resize, size)
    }

    /// torchvision's `RandomResizedCrop(size, scale, ratio)`, square output.
    pub fn random_resized_crop(self, size: u32, scale: (f64, f64), ratio: (f64, f64)) -> Self {
        self.crop_to(Crop::RandomResized { scale, ratio }, size, size)
    }

    /// Shorter side to `resize`, then the centre `size x size`.
    pub fn resize_center_crop(self, resize: u32, size: u32) -> Self {
        self.crop_to(Crop::ResizeCenterCrop { resize }, size, size)
    }

    /// The whole image resized to fit `width x height` with its aspect ratio kept,
    /// centred, the rest [`Augment::fill`] (label planes [`Augment::mask_fill`]): the
    /// detection letterbox (`Crop::Letterbox`).
    pub fn letterbox(self, width: u32, height: u32) -> Self {
        self.crop_to(Crop::Letterbox, width, height)
    }

    /// torchvision's `RandomCrop(size, padding)` (`Crop::RandomPadded`): pad by
    /// `padding` pixels of fill, then a random `width x height` crop, no resampling.
    pub fn random_crop_padded(self, width: u32, height: u32, padding: u32) -> Self {
        self.crop_to(Crop::RandomPadded { padding }, width, height)
    }

    /// The whole image resized to `width x height`.
    pub fn resize(self, width: u32, height: u32) -> Self {
        self.crop_to(Crop::Full, width, height)
    }

    setters! {
        /// Output size (width, height), keeping the crop mode.
        pub fn output_size(width: u32, height: u32) =>
            self.out_width = width, self.out_height = height;
    }

    /// The crop mode `crop` with a `width x height` output.
    fn crop_to(mut self, crop: Crop, width: u32, height: u32) -> Self {
        self.crop = crop;
        self.output_size(width, height)
    }

    setters! {
        /// Mirror left-right with probability `p`.
        pub fn flip_horizontal(p: f64) => self.flip_h = p;

        /// Mirror top-bottom with probability `p`.
        pub fn flip_vertical(p: f64) => self.flip_v = p;

        /// A random affine warp of the resized image ([`Affine`]: rotation, translation, scale
        /// and shear), after the colour jitter and before the flips. Image planes are sampled
        /// bilinearly and label planes by nearest neighbour, with the same map; where the map
        /// reads outside, images get [`Augment::fill`] and label planes [`Augment::mask_fill`].
        pub fn random_affine(affine: Affine) => self.affine = Some(affine);
    }

    /// torchvision's `RandomRotation(degrees)`: a rotation by an angle drawn from
    /// `[-degrees, degrees]` about the centre, without expanding the image.
    pub fn random_rotation(self, degrees: f64) -> Self {
        self.random_affine(Affine::new().degrees(-degrees, degrees))
    }

    setters! {
        /// The RGB value of image pixels the affine warp takes from outside the image
        /// (default black).
        pub fn fill(rgb: [u8; 3]) => self.fill = rgb;

        /// The label id of mask pixels the affine warp takes from outside the plane (default
        /// 0; segmentation recipes often use an ignore id such as 255).
        pub fn mask_fill(id: u16) => self.mask_fill = id;

        /// Which boxes survive each sample's geometry (default: at least 1 output pixel wide
        /// and high after clipping, as torchvision's `SanitizeBoundingBoxes`).
        pub fn box_rule(rule: BoxRule) => self.box_rule = rule;
    }

    /// The box rule, as set by [`Augment::box_rule`].
    pub fn get_box_rule(&self) -> BoxRule {
        self.box_rule
    }

    /// Brightness, contrast and saturation jitter, applied in a random order per sample.
    pub fn color_jitter(mut self, brightness: f64, contrast: f64, saturation: f64) -> Self {
        let hue = self.jitter.map_or(0.0, |j| j.hue);
        self.jitter = Some(Jitter {
            brightness,
            contrast,
            saturation,
            hue,
        });
        self
    }

    /// Hue jitter (a shift in turns drawn from `[-h, h]`, `h <= 0.5`).
    pub fn hue(mut self, h: f64) -> Self {
        let mut j = self.jitter.unwrap_or(Jitter {
            brightness: 0.0,
            contrast: 0.0,
            saturation: 0.0,
            hue: 0.0,
        });
        j.hue = h;
        self.jitter = Some(j);
        self
    }

    setters! {
        /// torchvision's `RandomGrayscale(p)`: with probability `p` a sample's image becomes
        /// gray in all three channels (`0.2989 R + 0.587 G + 0.114 B`, truncated). The colour
        /// ops run in a fixed order after the colour jitter: grayscale, posterize, solarize;
        /// like the jitter, before the affine warp (so [`Augment::fill`] keeps its colour).
        pub fn random_grayscale(p: f64) => self.color.grayscale = p;

        /// torchvision's `RandomPosterize(bits, p)`: with probability `p`, keep the high `bits`
        /// bits (0 to 8) of every value.
        pub fn random_posterize(bits: u32, p: f64) => self.color.posterize = Some((bits, p));

        /// torchvision's `RandomSolarize(threshold, p)`: with probability `p`, invert
        /// (`255 - v`) every value at or above `threshold` (0 to 255, on the 0-255 scale).
        pub fn random_solarize(threshold: f64, p: f64) =>
            self.color.solarize = Some((threshold, p));

        /// torchvision's `GaussianBlur(kernel_size, sigma)` applied with probability `p`
        /// (`RandomApply([GaussianBlur(..)], p)`; 1 always): a sigma drawn uniformly from
        /// `sigma` per sample, the same along both axes, kernel sizes `(kx, ky)` (odd, at
        /// most 255), reflecting at the edges, on the resized image. Computed separably in
        /// fixed point on every backend (see the reference execution); it matches
        /// torchvision's f32 convolution but for values the weights' rounding moves across a
        /// half (one level). The whole-image ops run after grayscale, in this order: blur,
        /// sharpness, posterize, solarize, auto-contrast, equalize; then an augmentation
        /// policy's ops.
        pub fn gaussian_blur(kernel: (u32, u32), sigma: (f64, f64), p: f64) =>
            self.filters.blur = Some(Blur { kernel, sigma, p });

        /// torchvision's `RandomAdjustSharpness(factor, p)`: with probability `p`, a blend
        /// with the image smoothed by `[1 1 1; 1 5 1; 1 1 1] / 13` (factor 0: the smoothed
        /// image, 1: unchanged, 2: sharpened), the one-pixel border unchanged.
        pub fn random_adjust_sharpness(factor: f64, p: f64) =>
            self.filters.sharpness = Some((factor, p));

        /// torchvision's `RandomAutocontrast(p)`: with probability `p`, each channel
        /// stretched from its minimum and maximum over the image to 0-255.
        pub fn random_autocontrast(p: f64) => self.filters.autocontrast = p;

        /// torchvision's `RandomEqualize(p)`: with probability `p`, each channel's histogram
        /// equalized (Pillow's look-up table, as torchvision's `equalize`).
        pub fn random_equalize(p: f64) => self.filters.equalize = p;
    }

    /// torchvision's `RandAugment(num_ops, magnitude, num_magnitude_bins)` as a plan
    /// generator (its usual settings: `rand_augment(2, 9, 31)`); see
    /// [`policy`](mod@policy) for how its ops join the fused pass. Replaces
    /// [`Augment::trivial_augment_wide`].
    pub fn rand_augment(mut self, num_ops: u32, magnitude: u32, bins: u32) -> Self {
        self.policy = Some(Policy {
            kind: PolicyKind::RandAugment { num_ops, magnitude },
            bins,
        });
        self
    }

    /// torchvision's `TrivialAugmentWide(num_magnitude_bins)` (usually 31) as a plan
    /// generator: one op per sample at a random magnitude. Replaces
    /// [`Augment::rand_augment`].
    pub fn trivial_augment_wide(mut self, bins: u32) -> Self {
        self.policy = Some(Policy {
            kind: PolicyKind::TrivialAugmentWide,
            bins,
        });
        self
    }

    /// The augmentation policy configured, if any.
    pub fn get_policy(&self) -> Option<Policy> {
        self.policy
    }

    /// torchvision's `RandomErasing(p, scale, ratio, value)`, the last step (after
    /// normalisation, on the batch's values, image planes only): with probability `p` a
    /// rectangle of `scale` (a fraction of the output's area) and aspect ratio (height /
    /// width) within `ratio`, drawn as torchvision draws it (10 tries, else nothing), takes
    /// `value` per channel, in the batch's units: normalised values for float dtypes
    /// (torchvision's default is 0, the mean), whole 0-255 values for u8. Its usual
    /// settings: `random_erasing(0.25, (0.02, 0.33), (0.3, 3.3), [0.0; 3])`.
    pub fn random_erasing(
        mut self,
        p: f64,
        scale: (f64, f64),
        ratio: (f64, f64),
        value: [f32; 3],
    ) -> Self {
        self.erasing = Some(Erasing {
            p,
            scale,
            ratio,
            value,
        });
        self
    }

    setters! {
        /// torchvision's `MixUp(alpha)`, on whole batches after the per-sample pass: every
        /// slot blended with the slot before it (the first with the last), with one weight
        /// per batch from `Beta(alpha, alpha)` ([`mix`](mod@mix) says how it is drawn and
        /// computed). Float dtypes only (f16, f32), as torchvision's; with
        /// [`Augment::cutmix`] too, each batch gets one of the two with even odds
        /// (`RandomChoice([CutMix, MixUp])`). [`crate::Batch::soft_labels`] gives the mixed
        /// labels. Image planes only: a dataset with masks or targets (boxes, keypoints) is
        /// refused, as they cannot be mixed. The usual `alpha` is 0.2 to 0.8.
        pub fn mixup(alpha: f64) => self.mixing.mixup = Some(alpha);

        /// torchvision's `CutMix(alpha)`: as [`Augment::mixup`], but a box of every slot takes
        /// the slot before it's pixels, its size drawn from `Beta(alpha, alpha)` and its
        /// centre uniform over the image (one box per batch); any dtype. The usual `alpha`
        /// is 1.
        pub fn cutmix(alpha: f64) => self.mixing.cutmix = Some(alpha);
    }

    /// The batch-level mixing configured ([`Augment::mixup`], [`Augment::cutmix`]).
    pub fn get_mixing(&self) -> mix::Mixing {
        self.mixing
    }

    /// `(x / 255 - mean) / std` per channel (needs a float dtype; sets f32 if u8).
    pub fn normalize(mut self, mean: [f32; 3], std: [f32; 3]) -> Self {
        self.normalize = Some((mean, std));
        if self.dtype == DType::U8 {
            self.dtype = DType::F32;
        }
        self
    }

    setters! {
        /// Batch layout.
        pub fn layout(layout: Layout) => self.layout = layout;

        /// Batch element type.
        pub fn dtype(dtype: DType) => self.dtype = dtype;

        /// Antialias when downscaling (default on, as Pillow does); off gives plain bilinear.
        pub fn antialias(on: bool) => self.antialias = on;

        /// Crop-aware JPEG decode (default on): when the crop is downscaled by 2x, 4x or 8x
        /// or more in both directions, the plan asks for a JPEG decode at 1/2, 1/4 or 1/8 of
        /// the size (libjpeg-turbo's scaled IDCT) and the resize starts from that. Only the
        /// rows and iMCU columns the resize reads are decoded either way. The scale is part of
        /// the plan ([`SamplePlan::decode_scale`]), so every backend makes the same picture.
        /// Off: every JPEG is decoded at full size.
        pub fn crop_aware(on: bool) => self.crop_aware = on;
    }

    /// Whether crop-aware decode is on.
    pub fn is_crop_aware(&self) -> bool {
        self.crop_aware
    }

    /// Output width and height, as set by [`Augment::output_size`] or the crop methods
    /// (`(0, 0)` before any sets it). Getters are `get_*`, as `std::process::Command`'s
    /// are, since the setters of the builder take the plain names.
    pub fn get_output_size(&self) -> (u32, u32) {
        (self.out_width, self.out_height)
    }

    /// The batch element type, as set by [`Augment::dtype`] (or [`Augment::normalize`]).
    pub fn get_dtype(&self) -> DType {
        self.dtype
    }

    /// The batch layout, as set by [`Augment::layout`].
    pub fn get_layout(&self) -> Layout {
        self.layout
    }

    /// Output width and height.
    #[deprecated(note = "use `get_output_size()`; `output_size(w, h)` is the setter")]
    pub fn out_size(&self) -> (u32, u32) {
        self.get_output_size()
    }

    /// The batch element type.
    #[deprecated(note = "use `get_dtype()`")]
    pub fn out_dtype(&self) -> DType {
        self.dtype
    }

    /// The batch layout.
    #[deprecated(note = "use `get_layout()`")]
    pub fn out_layout(&self) -> Layout {
        self.layout
    }

    /// Whether any parameter is random (crop, flips or jitter).
    pub fn is_random(&self) -> bool {
        matches!(
            self.crop,
            Crop::RandomResized { .. } | Crop::RandomPadded { .. }
        ) || self.flip_h > 0.0
            || self.flip_v > 0.0
            || self.jitter.is_some()
            || self.affine.is_some()
            || self.color.any()
            || self.filters.any()
            || self.policy.is_some()
            || self.erasing.is_some()
    }

    /// Bytes of one image of a batch: `3 * width * height * dtype size` (a whole batch's
    /// are [`Batch::images_len_bytes`](crate::Batch::images_len_bytes)).
    pub fn bytes_per_image(&self) -> usize {
        3 * self.out_width as usize * self.out_height as usize * self.dtype.size()
    }

    /// Bytes of one image in the batch.
    #[deprecated(note = "use `bytes_per_image()`")]
    pub fn image_bytes(&self) -> usize {
        self.bytes_per_image()
    }
}

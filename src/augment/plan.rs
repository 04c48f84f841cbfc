//! The per-sample plan: a `#[repr(C)]` struct that every backend executes unchanged.
//!
//! The layout is shared byte for byte with the GPU code (`shaders/*.wgsl`,
//! `kernels/*.cu`): 64 four-byte words, 256 bytes, a multiple of 16 so arrays of plans can
//! be uploaded as storage buffers. Change it only together with every consumer.
#![doc(hidden)]

/// Flag: mirror left-right.
pub const FLIP_H: u32 = 1;
/// Flag: mirror top-bottom.
pub const FLIP_V: u32 = 2;
/// Flag: apply colour jitter (image planes only).
pub const JITTER: u32 = 4;
/// Flag: normalise `(x / 255 - mean) / std` (float dtypes only).
pub const NORMALIZE: u32 = 8;
/// Flag: antialias when downscaling (triangle filter widened by the scale factor).
pub const ANTIALIAS: u32 = 16;
/// Flag: warp the resized image by the plan's inverse affine map ([`SamplePlan::affine`]),
/// bilinear for image planes and nearest for label planes, with the plan's fill values
/// where the map reads outside.
pub const AFFINE: u32 = 32;
/// Flag: random erasing, after everything else ([`SamplePlan::erase`]): the output
/// elements of a rectangle take [`SamplePlan::erase_value`] (image planes only).
pub const ERASE: u32 = 64;

/// Fractional bits of the affine map's fixed-point numbers.
pub const AFFINE_FRAC_BITS: u32 = 16;
/// Fractional bits of the bilinear weights the affine warp derives from a position.
pub const AFFINE_WEIGHT_BITS: u32 = 11;

/// Jitter op code: brightness.
pub const OP_BRIGHTNESS: u32 = 1;
/// Jitter op code: contrast.
pub const OP_CONTRAST: u32 = 2;
/// Jitter op code: saturation.
pub const OP_SATURATION: u32 = 3;
/// Jitter op code: hue.
pub const OP_HUE: u32 = 4;
/// Colour op code: grayscale, torchvision's `rgb_to_grayscale` with three output
/// channels (the weighted sum truncated, in every channel).
pub const OP_GRAYSCALE: u32 = 5;
/// Colour op code: posterize, keep the high [`SamplePlan::posterize_bits`] bits.
pub const OP_POSTERIZE: u32 = 6;
/// Colour op code: solarize, invert every value at or above
/// [`SamplePlan::solarize_threshold`].
pub const OP_SOLARIZE: u32 = 7;
/// Colour op code: auto-contrast, torchvision's `autocontrast`: each channel stretched
/// from its minimum and maximum over the image to 0-255 (unchanged where they are equal).
pub const OP_AUTOCONTRAST: u32 = 8;
/// Colour op code: equalize, torchvision's `equalize` (Pillow's look-up table from each
/// channel's histogram over the image).
pub const OP_EQUALIZE: u32 = 9;
/// Colour op code: sharpness, torchvision's `adjust_sharpness` with the factor in the op's
/// [`SamplePlan::op_params`] word (f32 bits): a blend with the image smoothed by the
/// 3x3 kernel `[1 1 1; 1 5 1; 1 1 1] / 13`, the one-pixel border unchanged.
pub const OP_SHARPNESS: u32 = 10;
/// Colour op code: Gaussian blur, torchvision's `gaussian_blur` with the kernel sizes of
/// [`SamplePlan::blur_size`] and the sigma in the op's [`SamplePlan::op_params`] word
/// (f32 bits), reflecting at the edges; separable, in fixed point
/// ([`BLUR_WEIGHT_BITS`]).
pub const OP_BLUR: u32 = 11;

/// Most colour ops a plan holds.
pub const MAX_OPS: usize = 16;
/// Fractional bits of the Gaussian blur's integer weights: each axis' weights sum to
/// exactly `2^BLUR_WEIGHT_BITS`.
pub const BLUR_WEIGHT_BITS: u32 = 15;
/// Largest Gaussian blur kernel size (odd) along an axis.
pub const MAX_BLUR_KERNEL: u32 = 255;
/// Marks an integer parameter in [`SamplePlan::op_params`] (posterize bits, solarize
/// threshold): the parameter is the low byte.
pub const PARAM_INT: u32 = 0x100;

/// The [`SamplePlan::op_params`] word of a factor or sigma: its f32 bits, with 0.0 as
/// -0.0 (the same in every product) since a word of 0 says the op has no parameter of its
/// own.
pub fn factor_word(f: f32) -> u32 {
    if f == 0.0 {
        (-0.0f32).to_bits()
    } else {
        f.to_bits()
    }
}

/// Memory layout of the image batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u32)]
pub enum Layout {
    /// `[N, C, H, W]`, as PyTorch expects.
    Nchw = 0,
    /// `[N, H, W, C]`, as TensorFlow and JAX expect.
    Nhwc = 1,
}

impl Layout {
    /// The layout of a plan's or kernel's code (`Layout as u32`); any other code is
    /// NCHW.
    pub fn from_code(code: u32) -> Layout {
        if code == Layout::Nhwc as u32 {
            Layout::Nhwc
        } else {
            Layout::Nchw
        }
    }
}

/// Element type of the image batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u32)]
pub enum DType {
    /// Raw 0-255 values.
    U8 = 0,
    /// IEEE half precision.
    F16 = 1,
    /// IEEE single precision.
    F32 = 2,
}

impl DType {
    /// The element type of a plan's or kernel's code (`DType as u32`); any other code
    /// is u8.
    pub fn from_code(code: u32) -> DType {
        match code {
            1 => DType::F16,
            2 => DType::F32,
            _ => DType::U8,
        }
    }
}

/// An element type a batch can hold: `u8`, [`half::f16`] or `f32`, for
/// [`Batch::images`](crate::Batch::images). Sealed: stoker writes only these.
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// The [`DType`] of this element type.
    const DTYPE: DType;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for half::f16 {}
    impl Sealed for f32 {}
}

impl Element for u8 {
    const DTYPE: DType = DType::U8;
}
impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}

impl DType {
    /// The name used in settings and messages: `u8`, `f16`, `f32`.
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::F16 => "f16",
            DType::F32 => "f32",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F16 => 2,
            DType::F32 => 4,
        }
    }
}

/// Everything a backend needs to turn one decoded sample into its batch slot.
///
/// Geometry is in source pixels with Pillow's conventions: the crop box
/// `[crop_x, crop_x + crop_w) x [crop_y, crop_y + crop_h)` is resampled onto the part of
/// the `out_width x out_height` frame that [`SamplePlan::valid`] names (the whole frame
/// but for letterboxes and padded crops, whose other pixels are fill) with pixel centres
/// at half-integers. The same box and flips
/// apply to every plane of the sample; jitter and normalisation to image planes only.
///
/// With `AFFINE`, the resized (and jittered) image is then warped in the output frame:
/// output pixel `(x, y)` (before flips) reads the resized image at the position
/// [`SamplePlan::affine_source`] gives, in fixed point so every backend reads exactly the
/// same place.
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct SamplePlan {
    /// Low 32 bits of the sample id.
    pub id_lo: u32,
    /// High 32 bits of the sample id.
    pub id_hi: u32,
    /// Source width the plan was made for.
    pub src_width: u32,
    /// Source height the plan was made for.
    pub src_height: u32,
    /// Crop box left edge, source pixels.
    pub crop_x: f32,
    /// Crop box top edge, source pixels.
    pub crop_y: f32,
    /// Crop box width, source pixels.
    pub crop_w: f32,
    /// Crop box height, source pixels.
    pub crop_h: f32,
    /// Output width.
    pub out_width: u32,
    /// Output height.
    pub out_height: u32,
    /// `FLIP_H | FLIP_V | JITTER | NORMALIZE | ANTIALIAS | AFFINE | ERASE`.
    pub flags: u32,
    /// The colour ops, in order: op codes one per byte, low byte first, the list going on
    /// in [`SamplePlan::jitter_order_hi`]; 0 ends it. Run with `JITTER`.
    pub jitter_order: u32,
    /// Brightness factor (1 = unchanged).
    pub brightness: f32,
    /// Contrast factor (1 = unchanged).
    pub contrast: f32,
    /// Saturation factor (1 = unchanged).
    pub saturation: f32,
    /// Hue shift in turns, in `[-0.5, 0.5]` (0 = unchanged).
    pub hue: f32,
    /// Per-channel mean, on the 0-1 scale.
    pub mean: [f32; 3],
    /// [`Layout`] as `u32`.
    pub layout: u32,
    /// Per-channel standard deviation, on the 0-1 scale.
    pub std: [f32; 3],
    /// [`DType`] as `u32`.
    pub dtype: u32,
    /// JPEG IDCT scale denominator (1 = full size; 2, 4, 8 reduced): a JPEG source is
    /// decoded at `1/decode_scale` of its size (libjpeg-turbo's scaled IDCT) and the crop
    /// box divided by it. Other formats are decoded at full size.
    pub decode_scale: u32,
    /// The inverse affine map (with `AFFINE`) from an output pixel `(x, y)` to the
    /// position it reads in the resized image, in pixel-index coordinates (pixel `i`'s
    /// centre at `i`): `u = a x + b y + c`, `v = d x + e y + f`. Stored as
    /// `[a, b, c_int, d, e, f_int]`: `a, b, d, e` with `AFFINE_FRAC_BITS` fractional
    /// bits, `c_int` and `f_int` the integer parts (floors) of `c` and `f`.
    pub affine: [i32; 6],
    /// The fractional parts of `c` and `f` (`AFFINE_FRAC_BITS` bits).
    pub affine_frac: [u32; 2],
    /// Image value where the affine map reads outside the image: RGB, R in the low byte.
    pub fill: u32,
    /// Label id where the affine map reads outside the label plane.
    pub mask_fill: u32,
    /// The part of the resized frame that holds the image, `[x0, x1)` and `[y0, y1)` as
    /// `x0 | x1 << 16` and `y0 | y1 << 16`: the crop box is resized onto it. The whole
    /// frame unless the image is letterboxed or padded, which sets `AFFINE` (the
    /// identity map if no warp was asked for) so that the rest reads the fill.
    pub valid: [u32; 2],
    /// Colour ops 4 to 7 of the list [`SamplePlan::jitter_order`] starts.
    pub jitter_order_hi: u32,
    /// The colour ops' parameters: the solarize threshold (0 to 255) in the low byte,
    /// the posterize bits kept (0 to 8) in the next.
    pub color_params: u32,
    /// The erased rectangle (with `ERASE`) in the output as the batch holds it (after
    /// flips), `[x0, x1)` and `[y0, y1)` as `x0 | x1 << 16` and `y0 | y1 << 16`.
    pub erase: [u32; 2],
    /// The erased elements' value per channel, in the batch's units: after
    /// normalisation for float dtypes (torchvision erases the normalised tensor), a
    /// whole 0-255 value for u8.
    pub erase_value: [f32; 3],
    /// Colour ops 8 to 15 of the list [`SamplePlan::jitter_order`] starts.
    pub order_ext: [u32; 2],
    /// Per colour op (by its position in the list): its own parameter, or 0 for the
    /// plan's shared one. Sharpness: its factor (f32 bits); blur: its sigma (f32 bits);
    /// brightness, contrast, saturation: a factor (f32 bits) in place of
    /// [`SamplePlan::brightness`] and the others (a policy may apply one op twice with
    /// two factors); posterize and solarize: `PARAM_INT` `|` the bits kept or the
    /// threshold, in place of [`SamplePlan::color_params`].
    pub op_params: [u32; MAX_OPS],
    /// The Gaussian blur's kernel sizes: `kx | ky << 16`, each odd, at most
    /// `MAX_BLUR_KERNEL`.
    pub blur_size: u32,
    /// Padding to 256 bytes.
    pub _pad: u32,
}

const _: () = assert!(std::mem::size_of::<SamplePlan>() == 256);
const _: () = assert!(std::mem::align_of::<SamplePlan>() == 4);

impl SamplePlan {
    /// The sample id.
    pub fn id(&self) -> u64 {
        (u64::from(self.id_hi) << 32) | u64::from(self.id_lo)
    }

    /// Where output pixel `(x, y)` (before flips) reads in the resized image under the
    /// plan's affine map: `(u, v)` times `2^AFFINE_FRAC_BITS`, exactly (the GPU code
    /// computes the same sums in 32-bit pieces).
    pub fn affine_source(&self, x: u32, y: u32) -> (i64, i64) {
        let [a, b, ci, d, e, fi] = self.affine.map(i64::from);
        let (x, y) = (i64::from(x), i64::from(y));
        let u = (ci << AFFINE_FRAC_BITS) + i64::from(self.affine_frac[0]) + a * x + b * y;
        let v = (fi << AFFINE_FRAC_BITS) + i64::from(self.affine_frac[1]) + d * x + e * y;
        (u, v)
    }

    /// The part of the resized frame that holds the image: `([x0, x1), [y0, y1))`.
    /// Clamped to the frame, so a hand-made plan cannot name pixels outside it.
    pub fn valid_rect(&self) -> ((u32, u32), (u32, u32)) {
        self.rect(self.valid)
    }

    /// A rectangle packed as `x0 | x1 << 16`, `y0 | y1 << 16`, clamped to the frame.
    fn rect(&self, [x, y]: [u32; 2]) -> ((u32, u32), (u32, u32)) {
        let axis = |w: u32, n: u32| {
            let hi = (w >> 16).min(n);
            ((w & 0xFFFF).min(hi), hi)
        };
        (axis(x, self.out_width), axis(y, self.out_height))
    }

    /// The erased rectangle, `([x0, x1), [y0, y1))`, clamped to the frame; empty
    /// without `ERASE`.
    pub fn erase_rect(&self) -> ((u32, u32), (u32, u32)) {
        if !self.has(ERASE) {
            return ((0, 0), (0, 0));
        }
        self.rect(self.erase)
    }

    /// Whether a flag is set.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The colour ops in order (at most `MAX_OPS`: [`SamplePlan::jitter_order`],
    /// [`SamplePlan::jitter_order_hi`], then [`SamplePlan::order_ext`]), up to the first 0.
    pub fn jitter_ops(&self) -> impl Iterator<Item = u32> + '_ {
        (0..MAX_OPS)
            .map(|k| self.op_at(k))
            .take_while(|&op| op != 0)
    }

    /// The op code at position `k` of the list (0 past its end).
    pub fn op_at(&self, k: usize) -> u32 {
        let word = match k / 4 {
            0 => self.jitter_order,
            1 => self.jitter_order_hi,
            2 => self.order_ext[0],
            3 => self.order_ext[1],
            _ => return 0,
        };
        (word >> (8 * (k % 4))) & 0xFF
    }

    fn set_op(&mut self, k: usize, op: u32) {
        let shift = 8 * (k % 4);
        let word = match k / 4 {
            0 => &mut self.jitter_order,
            1 => &mut self.jitter_order_hi,
            2 => &mut self.order_ext[0],
            3 => &mut self.order_ext[1],
            _ => return,
        };
        *word = (*word & !(0xFF << shift)) | (op & 0xFF) << shift;
    }

    /// Appends colour ops to the plan's list, after those it holds; false (and the list
    /// unchanged) if they do not fit in its `MAX_OPS` places.
    pub fn push_ops(&mut self, ops: &[u32]) -> bool {
        self.push_ops_with(&ops.iter().map(|&op| (op, 0)).collect::<Vec<_>>())
    }

    /// [`SamplePlan::push_ops`] with each op's own parameter word
    /// ([`SamplePlan::op_params`]; 0 for the plan's shared one).
    pub fn push_ops_with(&mut self, ops: &[(u32, u32)]) -> bool {
        let held = self.jitter_ops().count();
        if held + ops.len() > MAX_OPS || ops.iter().any(|&(op, _)| op == 0 || op > 0xFF) {
            return false;
        }
        for (i, &(op, param)) in ops.iter().enumerate() {
            self.set_op(held + i, op);
            self.op_params[held + i] = param;
        }
        true
    }

    /// The factor of the op at position `k` whose shared factor is `shared`: its own
    /// ([`SamplePlan::op_params`]) if it has one.
    pub fn op_factor(&self, k: usize, shared: f32) -> f32 {
        match self.op_params.get(k) {
            Some(&w) if w != 0 => f32::from_bits(w),
            _ => shared,
        }
    }

    /// The integer parameter of the op at position `k` whose shared value is `shared`.
    fn op_int(&self, k: usize, shared: u32) -> u32 {
        match self.op_params.get(k) {
            Some(&w) if w & PARAM_INT != 0 => w & 0xFF,
            _ => shared,
        }
    }

    /// The solarize threshold of the op at position `k`: values at or above it are
    /// inverted (`255 - v`).
    pub fn solarize_threshold_at(&self, k: usize) -> u32 {
        self.op_int(k, self.solarize_threshold())
    }

    /// The posterize bits kept by the op at position `k` (0 to 8).
    pub fn posterize_bits_at(&self, k: usize) -> u32 {
        self.op_int(k, self.posterize_bits()).min(8)
    }

    /// The Gaussian blur's kernel sizes `(kx, ky)`, each made odd and at most
    /// `MAX_BLUR_KERNEL` (1: no blur along the axis).
    pub fn blur_kernel(&self) -> (u32, u32) {
        let odd = |k: u32| (k.clamp(1, MAX_BLUR_KERNEL)) | 1;
        (odd(self.blur_size & 0xFFFF), odd(self.blur_size >> 16))
    }

    /// Solarize threshold: values at or above it are inverted (`255 - v`).
    pub fn solarize_threshold(&self) -> u32 {
        self.color_params & 0xFF
    }

    /// Posterize: the number of high bits kept (0 to 8).
    pub fn posterize_bits(&self) -> u32 {
        ((self.color_params >> 8) & 0xFF).min(8)
    }

    /// The output layout.
    pub fn layout(&self) -> Layout {
        Layout::from_code(self.layout)
    }

    /// The output dtype.
    pub fn dtype(&self) -> DType {
        DType::from_code(self.dtype)
    }

    /// Bytes of one image slot: `3 * out_width * out_height * dtype size`.
    pub fn image_bytes(&self) -> usize {
        3 * self.out_width as usize * self.out_height as usize * self.dtype().size()
    }
}

crate::error::from_str_by_name! {
    /// `u8`, `f16` or `f32`, any case: the names [`DType`] serialises to.
    DType, "dtype", "dtype", { "u8" => U8, "f16" => F16, "f32" => F32 }
}

//! DCT coefficients of a JPEG (host entropy decoding, [`read_coefficients`](super::read_coefficients)) and the
//! `#[repr(C)]` word layout they are uploaded in: the contract between the packer
//! ([`pack`]), the scalar oracles ([`super::idct`], [`super::color`]), the WGSL shaders
//! (`shaders/idct.wgsl`, `shaders/color.wgsl`) and the CUDA kernels (`kernels/idct.cu`,
//! `kernels/color.cu`).
//!
//! # Geometry (libjpeg-turbo's, `jdmaster.c`)
//!
//! At IDCT scale `1/scale` the smallest DCT output size is `m = 8 / scale`. Each component
//! gets its own DCT output size `s` ([`ComponentGeometry::dct_size`]): libjpeg starts at
//! `m` and doubles it while `s < 8` and both `max_h * m` and `max_v * m` are divisible by
//! `2 * s` times the component's own factor, so subsampled chroma is enlarged by the IDCT
//! rather than by upsampling (4:2:0 at 1/2 decodes chroma with the full 8x8 IDCT). The
//! component's plane is then `downsampled_width x downsampled_height` samples,
//! `ceil(width * h * s / (max_h * 8))` by `ceil(height * v * s / (max_v * 8))`, and each
//! sample stands for `eh x ev` output pixels, `eh = max_h * m / (h * s)`. The scaled image is
//! `ceil(width / scale) x ceil(height / scale)`. [`Upsample`] says how a plane is enlarged.
//!
//! # Words
//!
//! Everything is little-endian `u32` words (WGSL has no 16-bit integers):
//!
//! - **Block**: the coefficients of one 8x8 block that an IDCT of output size `s` reads,
//!   in *the layout of size `s`* ([`kept_rows`], [`block_slot`], [`block_words`]). libjpeg's
//!   IDCTs read only some coefficients: `jpeg_idct_islow` (s = 8) all 64, `jpeg_idct_4x4`
//!   rows and columns 0-3 and 5-7 (49), `jpeg_idct_2x2` rows and columns 0, 1, 3, 5, 7
//!   (25), `jpeg_idct_1x1` the DC alone. The layout of size `s` keeps those: the kept rows
//!   by the kept columns (`n` of each: 8, 7, 5, 1), row-major, the natural-order
//!   coefficient at row `r`, column `c` in slot `rank(r) * n + rank(c)`, where `rank(x)` is
//!   `x` at size 8, `x - (x > 4)` at 4, `(x + 1) / 2` at 2 and 0 at 1. Slot `k` is half
//!   `k % 2` of word `k / 2` (low half for even `k`), an `i16` in two's complement; a block
//!   is `ceil(n * n / 2)` words: 32, 25, 13, 1 (the last word's high half zero when `n * n`
//!   is odd). The layout of size 8 is the whole block in natural order. A reader
//!   sign-extends with arithmetic shifts: `low = (w << 16) as i32 >> 16`,
//!   `high = w as i32 >> 16`. [`pack`] stores each component's blocks in the layout of its
//!   own DCT output size ([`ComponentDesc::dct_size`]); the blocks the device decodes
//!   ([`super::huffman`], into a coefficient buffer) are in the layout of size 8 whatever
//!   the component's size, and a chunk's header says which of the two its blocks are in
//!   (`backend::device::decode`).
//! - **Quantisation table**: 32 words, entries `2k` (low) and `2k + 1` (high), natural order,
//!   as the `u16` stored in the file. The IDCT uses them as libjpeg's SIMD build does
//!   (`ISLOW_MULT_TYPE` is `short`): sign-extended from 16 bits.
//! - **Plane** (written by the IDCT, read by colour conversion; lives in a scratch buffer,
//!   not in the upload): `u8` samples packed four per word, sample `x` of a row in byte
//!   `x % 4` (bits `8 * (x % 4)`) of word `x / 4`; rows `stride` words apart.
//! - **Output pixel**: one word, `R | G << 8 | B << 16 | 255 << 24`, windows row-major.
//!
//! # Records
//!
//! [`ImageDesc`] (16 words) per image and [`ComponentDesc`] (16 words) per component, field
//! by field as documented on each. Offsets named "data" are word offsets from the start of
//! [`PackedJpeg::data`]; once uploaded (`backend::device::decode`) they are rebased to word
//! offsets from the start of the chunk the record is in. Plane offsets are word offsets into
//! the plane scratch buffer (from 0 for one image; rebased per chunk when uploaded).
#![doc(hidden)]

use bytemuck::{Pod, Zeroable};

use crate::decode::DecodeError;

/// The colour model of the coded components (libjpeg's `jpeg_color_space`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorModel {
    /// One component.
    Gray,
    /// Y, Cb, Cr (JFIF).
    #[default]
    YCbCr,
    /// R, G, B coded without a colour transform.
    Rgb,
    /// C, M, Y, K as stored.
    Cmyk,
    /// Y, Cb, Cr, K (Adobe transform 2): CMYK after a YCbCr-to-RGB step on the first three.
    Ycck,
}

impl ColorModel {
    /// The code used in [`ImageDesc::kind`] and by the shaders.
    pub fn code(self) -> u32 {
        match self {
            ColorModel::Gray => KIND_GRAY,
            ColorModel::YCbCr => KIND_YCBCR,
            ColorModel::Rgb => KIND_RGB,
            ColorModel::Cmyk => KIND_CMYK,
            ColorModel::Ycck => KIND_YCCK,
        }
    }

    /// How many components this model has.
    pub fn components(self) -> usize {
        match self {
            ColorModel::Gray => 1,
            ColorModel::YCbCr | ColorModel::Rgb => 3,
            ColorModel::Cmyk | ColorModel::Ycck => 4,
        }
    }
}

/// [`ImageDesc::kind`]: gray, expanded to R = G = B.
pub const KIND_GRAY: u32 = 0;
/// [`ImageDesc::kind`]: YCbCr to RGB (`jdcolor.c`, 16-bit fixed point tables).
pub const KIND_YCBCR: u32 = 1;
/// [`ImageDesc::kind`]: RGB copied.
pub const KIND_RGB: u32 = 2;
/// [`ImageDesc::kind`]: CMYK to RGB as `decode::cpu` does.
pub const KIND_CMYK: u32 = 3;
/// [`ImageDesc::kind`]: YCCK to CMYK (`jdcolor.c`), then CMYK to RGB.
pub const KIND_YCCK: u32 = 4;
/// [`ImageDesc::kind`]: pixels decoded elsewhere (the CPU fallback), stored as output
/// words at [`ImageDesc::src_offset`] and copied.
pub const KIND_PASSTHROUGH: u32 = 5;

/// One colour component's coefficients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// Horizontal sampling factor (1-4).
    pub h_samp: u32,
    /// Vertical sampling factor (1-4).
    pub v_samp: u32,
    /// Blocks per row with real samples (libjpeg's `width_in_blocks`).
    pub width_in_blocks: u32,
    /// Block rows with real samples (`height_in_blocks`).
    pub height_in_blocks: u32,
    /// The quantisation table, natural order.
    pub quant: [u16; 64],
    /// `width_in_blocks * height_in_blocks` blocks, row-major, coefficients in natural order.
    pub blocks: Vec<[i16; 64]>,
}

impl Default for Component {
    fn default() -> Self {
        Component {
            h_samp: 1,
            v_samp: 1,
            width_in_blocks: 0,
            height_in_blocks: 0,
            quant: [0; 64],
            blocks: Vec::new(),
        }
    }
}

/// A JPEG's quantised DCT coefficients and what is needed to turn them into pixels.
/// Reused across images: [`read_coefficients`](super::read_coefficients) refills it, keeping its allocations.
#[derive(Debug, Clone, Default)]
pub struct Coefficients {
    /// Image width in pixels.
    pub width: u32,
    /// Image height in pixels.
    pub height: u32,
    /// The colour model of the components.
    pub color: ColorModel,
    /// An Adobe APP14 marker is present: CMYK inks are stored inverted (as `decode::cpu`
    /// treats `ImageInfo::adobe_transform.is_some()`).
    pub adobe_inverted: bool,
    /// Largest horizontal sampling factor.
    pub max_h: u32,
    /// Largest vertical sampling factor.
    pub max_v: u32,
    /// The components, in frame order.
    pub components: Vec<Component>,
    /// What libjpeg tolerated reading them (`None` for a clean file): the pipeline
    /// reports it with the sample, as it does the CPU decoder's.
    pub warning: Option<crate::decode::DecodeWarning>,
    /// Components of earlier images kept for their allocations.
    spare: Vec<Component>,
}

impl Coefficients {
    /// The bytes its block buffers hold allocated (what keeping it for reuse keeps).
    pub fn heap_bytes(&self) -> usize {
        self.components
            .iter()
            .chain(&self.spare)
            .map(|c| c.blocks.capacity() * std::mem::size_of::<[i16; 64]>())
            .sum()
    }

    /// The bytes of blocks it holds now (what the last image needed).
    pub fn used_bytes(&self) -> usize {
        self.components
            .iter()
            .map(|c| c.blocks.len() * std::mem::size_of::<[i16; 64]>())
            .sum()
    }

    /// Empties it, keeping the allocations.
    pub fn clear(&mut self) {
        self.width = 0;
        self.height = 0;
        self.max_h = 1;
        self.max_v = 1;
        self.adobe_inverted = false;
        self.warning = None;
        for mut c in self.components.drain(..) {
            c.blocks.clear();
            self.spare.push(c);
        }
    }

    /// Appends a component, reusing the allocation of one held before [`Self::clear`].
    pub fn push_component(
        &mut self,
        h_samp: u32,
        v_samp: u32,
        width_in_blocks: u32,
        height_in_blocks: u32,
        quant: [u16; 64],
    ) -> &mut Component {
        let mut c = self.spare.pop().unwrap_or_default();
        c.blocks.clear();
        c.h_samp = h_samp;
        c.v_samp = v_samp;
        c.width_in_blocks = width_in_blocks;
        c.height_in_blocks = height_in_blocks;
        c.quant = quant;
        self.components.push(c);
        let last = self.components.len() - 1;
        &mut self.components[last]
    }

    /// The scaled image size at IDCT scale `1/scale`: `ceil(width / scale)` by
    /// `ceil(height / scale)`.
    pub fn scaled_size(&self, scale: u32) -> (u32, u32) {
        let s = scale.max(1);
        (self.width.div_ceil(s), self.height.div_ceil(s))
    }

    /// Whether the GPU path can reproduce libjpeg's decode of these components: 1, 3 or 4
    /// components whose sampling factors are 1-4 and divide the largest ones. `Err` says why.
    pub fn check_supported(&self) -> Result<(), LayoutError> {
        self.check_layout()?;
        for (i, c) in self.components.iter().enumerate() {
            let blocks = c.width_in_blocks as usize * c.height_in_blocks as usize;
            if c.blocks.len() != blocks {
                return Err(LayoutError::Blocks {
                    component: i,
                    blocks: c.blocks.len(),
                    width: c.width_in_blocks,
                    height: c.height_in_blocks,
                });
            }
        }
        Ok(())
    }

    /// [`Self::check_supported`] without the blocks: for a header whose blocks are
    /// decoded on the device ([`super::huffman`]).
    pub fn check_layout(&self) -> Result<(), LayoutError> {
        let n = self.components.len();
        if n != self.color.components() {
            return Err(LayoutError::Components {
                found: n,
                color: self.color,
            });
        }
        for (i, c) in self.components.iter().enumerate() {
            let (h, v) = (c.h_samp, c.v_samp);
            if !(1..=4).contains(&h) || !(1..=4).contains(&v) {
                return Err(LayoutError::Sampling { component: i, h, v });
            }
            if !self.max_h.is_multiple_of(h) || !self.max_v.is_multiple_of(v) {
                return Err(LayoutError::NotDividing {
                    component: i,
                    h,
                    v,
                    max_h: self.max_h,
                    max_v: self.max_v,
                });
            }
            if c.width_in_blocks == 0 || c.height_in_blocks == 0 {
                return Err(LayoutError::Blocks {
                    component: i,
                    blocks: c.blocks.len(),
                    width: c.width_in_blocks,
                    height: c.height_in_blocks,
                });
            }
        }
        if self.width == 0 || self.height == 0 {
            return Err(LayoutError::ZeroSize);
        }
        Ok(())
    }
}

/// Why the GPU path cannot reproduce libjpeg's decode of a component layout
/// ([`Coefficients::check_supported`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The component count does not match the colour model.
    #[error("{found} components for {color:?}")]
    Components {
        /// Components in the frame.
        found: usize,
        /// The colour model.
        color: ColorModel,
    },
    /// A sampling factor outside 1-4.
    #[error("component {component} has sampling factors {h}x{v}")]
    Sampling {
        /// The component's index.
        component: usize,
        /// Horizontal factor.
        h: u32,
        /// Vertical factor.
        v: u32,
    },
    /// A sampling factor that does not divide the largest one.
    #[error("component {component} sampling {h}x{v} does not divide {max_h}x{max_v}")]
    NotDividing {
        /// The component's index.
        component: usize,
        /// Horizontal factor.
        h: u32,
        /// Vertical factor.
        v: u32,
        /// Largest horizontal factor.
        max_h: u32,
        /// Largest vertical factor.
        max_v: u32,
    },
    /// The coefficient blocks do not fill the component's block grid.
    #[error("component {component} holds {blocks} blocks, not {width}x{height}")]
    Blocks {
        /// The component's index.
        component: usize,
        /// Blocks held.
        blocks: usize,
        /// Blocks per row.
        width: u32,
        /// Block rows.
        height: u32,
    },
    /// Width or height is zero.
    #[error("image has zero size")]
    ZeroSize,
}

/// What [`read_coefficients`](super::read_coefficients) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoeffStatus {
    /// The coefficients are complete and the GPU path reproduces libjpeg's decode.
    Ready,
    /// The file decodes, but only the CPU decoder reproduces it (the reason says why):
    /// incomplete progressive refinement (libjpeg smooths blocks), damaged data in lenient
    /// mode, or a sampling layout the shaders do not take. The coefficients may be partial.
    CpuOnly(String),
}

/// How a component plane is enlarged to the output grid (`jdsample.c`'s methods).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsample {
    /// One sample per output pixel.
    Full,
    /// Each sample repeated `eh x ev` times (`int_upsample`, `h2v1_upsample`, `h2v2_upsample`).
    Box,
    /// Horizontal triangle filter, 2x1 (`h2v1_fancy_upsample`).
    H2V1Fancy,
    /// Vertical triangle filter, 1x2 (`h1v2_fancy_upsample`).
    H1V2Fancy,
    /// Triangle filter in both directions, 2x2 (`h2v2_fancy_upsample`).
    H2V2Fancy,
}

impl Upsample {
    /// The code in [`ComponentDesc::method`].
    pub fn code(self) -> u32 {
        match self {
            Upsample::Full => 0,
            Upsample::Box => 1,
            Upsample::H2V1Fancy => 2,
            Upsample::H1V2Fancy => 3,
            Upsample::H2V2Fancy => 4,
        }
    }

    /// The method for a code (unknown codes are `Box`).
    pub fn from_code(code: u32) -> Upsample {
        match code {
            0 => Upsample::Full,
            2 => Upsample::H2V1Fancy,
            3 => Upsample::H1V2Fancy,
            4 => Upsample::H2V2Fancy,
            _ => Upsample::Box,
        }
    }
}

/// One component's geometry at an IDCT scale (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentGeometry {
    /// Output size of this component's IDCT: 1, 2, 4 or 8 samples per block side.
    pub dct_size: u32,
    /// Samples per row of the whole component at this scale (libjpeg's `downsampled_width`).
    pub downsampled_width: u32,
    /// Rows of the whole component at this scale (`downsampled_height`).
    pub downsampled_height: u32,
    /// The upsampling method.
    pub method: Upsample,
    /// Output pixels per sample, horizontally.
    pub eh: u32,
    /// Output pixels per sample, vertically.
    pub ev: u32,
}

/// libjpeg's geometry for component `c` of `coeffs` at IDCT scale `1/scale` (1, 2, 4, 8).
/// Call [`Coefficients::check_supported`] first.
pub fn geometry(coeffs: &Coefficients, c: &Component, scale: u32) -> ComponentGeometry {
    sampled_geometry(
        (coeffs.width, coeffs.height),
        (coeffs.max_h, coeffs.max_v),
        (c.h_samp, c.v_samp),
        scale,
    )
}

/// libjpeg's geometry of a component with sampling factors `(h, v)` in an image of
/// `(width, height)` pixels whose largest factors are `(max_h, max_v)`, at IDCT scale
/// `1/scale`: [`geometry`] from the frame header alone.
pub fn sampled_geometry(
    (width, height): (u32, u32),
    (max_h, max_v): (u32, u32),
    (h, v): (u32, u32),
    scale: u32,
) -> ComponentGeometry {
    let m = 8 / scale.clamp(1, 8);
    let (max_h, max_v) = (max_h.max(1), max_v.max(1));
    let (h, v) = (h.max(1), v.max(1));
    let mut s = m;
    while s < 8 && (max_h * m).is_multiple_of(h * s * 2) && (max_v * m).is_multiple_of(v * s * 2) {
        s *= 2;
    }
    let dw = (u64::from(width) * u64::from(h * s)).div_ceil(u64::from(max_h * 8)) as u32;
    let dh = (u64::from(height) * u64::from(v * s)).div_ceil(u64::from(max_v * 8)) as u32;
    let (h_in, v_in) = ((h * s / m).max(1), (v * s / m).max(1));
    let fancy = m > 1;
    let (eh, ev) = (max_h / h_in, max_v / v_in);
    let method = if h_in == max_h && v_in == max_v {
        Upsample::Full
    } else if h_in * 2 == max_h && v_in == max_v {
        if fancy && dw > 2 {
            Upsample::H2V1Fancy
        } else {
            Upsample::Box
        }
    } else if h_in == max_h && v_in * 2 == max_v && fancy {
        Upsample::H1V2Fancy
    } else if h_in * 2 == max_h && v_in * 2 == max_v && fancy && dw > 2 {
        Upsample::H2V2Fancy
    } else {
        Upsample::Box
    };
    ComponentGeometry {
        dct_size: s,
        downsampled_width: dw,
        downsampled_height: dh,
        method,
        eh: eh.max(1),
        ev: ev.max(1),
    }
}

/// One image (a window of it) in the upload: 16 words.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ImageDesc {
    /// Word 0: what to do with the components: `KIND_GRAY` .. `KIND_PASSTHROUGH`.
    pub kind: u32,
    /// Word 1: bit 0: CMYK inks stored inverted (Adobe marker present).
    pub flags: u32,
    /// Word 2: number of components (0 for passthrough).
    pub num_components: u32,
    /// Word 3: index of its first [`ComponentDesc`] in the component table.
    pub first_component: u32,
    /// Word 4: first word of the window in the output (windows) buffer.
    pub out_offset: u32,
    /// Word 5: window origin x in the scaled image.
    pub x0: u32,
    /// Word 6: window origin y.
    pub y0: u32,
    /// Word 7: window width.
    pub width: u32,
    /// Word 8: window height.
    pub height: u32,
    /// Word 9: scaled image width.
    pub full_width: u32,
    /// Word 10: scaled image height.
    pub full_height: u32,
    /// Word 11: IDCT scale denominator.
    pub scale: u32,
    /// Word 12: index of its first pixel in the colour dispatch (`width * height` pixels).
    pub pixel_start: u32,
    /// Word 13: passthrough only: data offset of its `width * height` output words.
    pub src_offset: u32,
    /// Words 14-15: zero.
    pub reserved: [u32; 2],
}

impl ImageDesc {
    /// The description of window `[x0, y0, x1, y1)` of `coeffs` (already clamped) in its
    /// image of `full` pixels at IDCT scale `1/scale`: kind, flags and components from
    /// the coefficients, offsets zero (the upload sets them).
    pub fn window_of(
        coeffs: &Coefficients,
        scale: u32,
        window: [u32; 4],
        full: (u32, u32),
    ) -> ImageDesc {
        let [x0, y0, x1, y1] = window;
        ImageDesc {
            kind: coeffs.color.code(),
            flags: u32::from(coeffs.adobe_inverted),
            num_components: coeffs.components.len() as u32,
            x0,
            y0,
            width: x1 - x0,
            height: y1 - y0,
            full_width: full.0,
            full_height: full.1,
            scale,
            ..ImageDesc::default()
        }
    }
}

/// One component of one image in the upload: 16 words. Its region is the block rectangle
/// uploaded (whole iMCUs covering the window and one iMCU around it, clamped).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ComponentDesc {
    /// Word 0: data offset of the region's first block, row-major: [`block_words`]`(dct_size)`
    /// words a block in the upload ([`pack`]), 32 in the coefficient buffer
    /// ([`pack_header`]).
    pub coef_offset: u32,
    /// Word 1: data offset of the quantisation table (32 words).
    pub quant_offset: u32,
    /// Word 2: first block column of the region in the component.
    pub bx0: u32,
    /// Word 3: first block row of the region.
    pub by0: u32,
    /// Word 4: region width in blocks.
    pub bw: u32,
    /// Word 5: region height in blocks.
    pub bh: u32,
    /// Word 6: IDCT output size per block side (1, 2, 4, 8).
    pub dct_size: u32,
    /// Word 7: word offset of the region's plane in the plane buffer; the plane is
    /// `bw * dct_size` samples by `bh * dct_size` rows, sample (0, 0) being component sample
    /// `(bx0 * dct_size, by0 * dct_size)`.
    pub plane_offset: u32,
    /// Word 8: plane row stride in words: `ceil(bw * dct_size / 4)`.
    pub plane_stride: u32,
    /// Word 9: libjpeg's `downsampled_width` (the whole component): upsampling clamps
    /// column reads to `downsampled_width - 1`.
    pub downsampled_width: u32,
    /// Word 10: `downsampled_height`: row reads clamp to `downsampled_height - 1`.
    pub downsampled_height: u32,
    /// Word 11: [`Upsample::code`].
    pub method: u32,
    /// Word 12: output pixels per sample horizontally.
    pub eh: u32,
    /// Word 13: output pixels per sample vertically.
    pub ev: u32,
    /// Word 14: index of its first IDCT invocation in the IDCT dispatch.
    pub group_start: u32,
    /// Word 15: number of IDCT invocations: [`idct_groups`]`(bw, dct_size) * bh`.
    pub groups: u32,
}

/// Blocks side by side one IDCT invocation handles, so it writes whole plane words: 1 for
/// 8x8 and 4x4 outputs, 2 for 2x2, 4 for 1x1.
pub fn blocks_per_group(dct_size: u32) -> u32 {
    (4 / dct_size.max(1)).max(1)
}

/// IDCT invocations per block row of a region `bw` blocks wide.
pub fn idct_groups(bw: u32, dct_size: u32) -> u32 {
    bw.div_ceil(blocks_per_group(dct_size))
}

/// The rows (and, the same, the columns) of a block, in natural order, that the IDCT of
/// output size `dct_size` reads, and that a block stored in the layout of that size keeps
/// (see the module docs): 0-7 at 8 (and for sizes other than 1, 2, 4, as
/// [`super::idct::idct_block`] takes them), 0-3 and 5-7 at 4, 0, 1, 3, 5, 7 at 2, 0 at 1.
pub fn kept_rows(dct_size: u32) -> &'static [usize] {
    match dct_size {
        1 => &[0],
        2 => &[0, 1, 3, 5, 7],
        4 => &[0, 1, 2, 3, 5, 6, 7],
        _ => &[0, 1, 2, 3, 4, 5, 6, 7],
    }
}

/// Words of one block stored in the layout of output size `dct_size`: `ceil(n * n / 2)` for
/// `n` [`kept_rows`]: 32 at 8, 25 at 4, 13 at 2, 1 at 1.
pub fn block_words(dct_size: u32) -> u32 {
    let n = kept_rows(dct_size).len() as u32;
    (n * n).div_ceil(2)
}

/// The slot of natural-order coefficient `i` (0-63) in a block stored in the layout of
/// output size `dct_size`: `rank(row) * n + rank(column)` (see the module docs), `None`
/// for a coefficient that layout drops (the IDCT of that size never reads it).
pub fn block_slot(dct_size: u32, i: usize) -> Option<usize> {
    let kept = kept_rows(dct_size);
    let rank = |x: usize| kept.iter().position(|&k| k == x);
    Some(rank(i / 8)? * kept.len() + rank(i % 8)?)
}

/// Appends `block` (natural order) to `out` in the layout of output size `dct_size`.
fn push_block(out: &mut Vec<u32>, block: &[i16; 64], dct_size: u32) {
    let kept = kept_rows(dct_size);
    if kept.len() == 8 {
        out.extend(
            block
                .chunks_exact(2)
                .map(|c| pack_pair(c[0] as u16, c[1] as u16)),
        );
        return;
    }
    let mut slots = kept
        .iter()
        .flat_map(|&r| kept.iter().map(move |&c| block[r * 8 + c] as u16));
    while let Some(low) = slots.next() {
        out.push(pack_pair(low, slots.next().unwrap_or(0)));
    }
}

/// One image packed for upload: descriptors and the words they point into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedJpeg {
    /// The image record (`out_offset`, `pixel_start` zero until placed in a batch).
    pub image: ImageDesc,
    /// One record per component (`group_start` zero until placed in a batch).
    pub components: Vec<ComponentDesc>,
    /// Quantisation tables and blocks; descriptor data offsets point here.
    pub data: Vec<u32>,
    /// Plane words the components need (their plane offsets start at 0).
    pub plane_words: u32,
}

impl PackedJpeg {
    /// The bytes its buffers hold allocated (what keeping it for reuse keeps).
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity() * 4 + self.components.capacity() * std::mem::size_of::<ComponentDesc>()
    }

    /// The bytes it holds now (what the last image needed).
    pub fn used_bytes(&self) -> usize {
        self.data.len() * 4 + self.components.len() * std::mem::size_of::<ComponentDesc>()
    }

    /// The plane geometry of component `c`: (samples per row, rows).
    pub fn plane_size(&self, c: usize) -> (u32, u32) {
        let d = &self.components[c];
        (d.bw * d.dct_size, d.bh * d.dct_size)
    }
}

/// Clamps a window to a `full_w x full_h` image; `Err` when it is empty.
pub fn clamp_window(window: [u32; 4], full: (u32, u32)) -> Result<[u32; 4], DecodeError> {
    let [x0, y0, x1, y1] = window;
    let (x1, y1) = (x1.min(full.0), y1.min(full.1));
    if x0 >= x1 || y0 >= y1 {
        return Err(DecodeError::BadHeader(format!(
            "empty decode window {window:?} in a {}x{} image",
            full.0, full.1
        )));
    }
    Ok([x0, y0, x1, y1])
}

fn pack_pair(a: u16, b: u16) -> u32 {
    u32::from(a) | u32::from(b) << 16
}

/// The iMCU span a window needs (see [`pack`]): the clamped window, the scaled image
/// size, and the first and last iMCU column and row, widened by one each side.
#[derive(Debug, Clone, Copy)]
struct Span {
    window: [u32; 4],
    full: (u32, u32),
    cols: (u32, u32),
    rows: (u32, u32),
}

impl Span {
    /// The span of `window` in `coeffs` at IDCT scale `1/scale`, after the checks [`pack`]
    /// makes.
    fn of(
        coeffs: &Coefficients,
        scale: u32,
        window: [u32; 4],
        with_blocks: bool,
    ) -> Result<Span, DecodeError> {
        if !matches!(scale, 1 | 2 | 4 | 8) {
            return Err(DecodeError::Unsupported(format!("IDCT scale 1/{scale}")));
        }
        if with_blocks {
            coeffs.check_supported()
        } else {
            coeffs.check_layout()
        }
        .map_err(|e| DecodeError::Unsupported(e.to_string()))?;
        let full = coeffs.scaled_size(scale);
        let window = clamp_window(window, full)?;
        let [x0, y0, x1, y1] = window;
        let m = 8 / scale;
        // iMCU size in output pixels, and the iMCU columns/rows the window needs, widened.
        let (iw, ih) = (coeffs.max_h * m, coeffs.max_v * m);
        let (cols, rows) = (full.0.div_ceil(iw), full.1.div_ceil(ih));
        Ok(Span {
            window,
            full,
            cols: (
                (x0 / iw).saturating_sub(1),
                ((x1 - 1) / iw + 1).min(cols - 1),
            ),
            rows: (
                (y0 / ih).saturating_sub(1),
                ((y1 - 1) / ih + 1).min(rows - 1),
            ),
        })
    }

    /// The block rectangle `[bx0, by0, bx1, by1)` of component `comp` under the span;
    /// `Err` when it is empty.
    fn blocks(&self, comp: &Component) -> Result<[u32; 4], DecodeError> {
        let bx0 = self.cols.0 * comp.h_samp;
        let bx1 = ((self.cols.1 + 1) * comp.h_samp).min(comp.width_in_blocks);
        let by0 = self.rows.0 * comp.v_samp;
        let by1 = ((self.rows.1 + 1) * comp.v_samp).min(comp.height_in_blocks);
        if bx1 <= bx0 || by1 <= by0 {
            return Err(DecodeError::BadHeader(format!(
                "component of {}x{} blocks has no blocks under the window",
                comp.width_in_blocks, comp.height_in_blocks
            )));
        }
        Ok([bx0, by0, bx1, by1])
    }
}

/// What [`pack`] makes of a window, computed without packing it: to decide, before
/// anything is copied, whether it fits the device's bindings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PackedSize {
    /// The window, clamped to the scaled image: `[x0, y0, x1, y1)`.
    pub window: [u32; 4],
    /// The IDCT scale denominator.
    pub scale: u32,
    /// Coefficient blocks uploaded, over every component.
    pub blocks: u64,
    /// Words of [`PackedJpeg::data`]: quantisation tables (32 words each) and blocks
    /// ([`block_words`] of each component's DCT output size).
    pub data_words: u64,
    /// [`PackedJpeg::plane_words`].
    pub plane_words: u64,
    /// Output pixels: the window's area.
    pub pixels: u64,
}

/// The sizes [`pack`] gives the window `[x0, y0, x1, y1)` of `coeffs` at IDCT scale
/// `1/scale`; it refuses what [`pack`] refuses.
pub fn packed_size(
    coeffs: &Coefficients,
    scale: u32,
    window: [u32; 4],
) -> Result<PackedSize, DecodeError> {
    let span = Span::of(coeffs, scale, window, false)?;
    let [x0, y0, x1, y1] = span.window;
    let mut size = PackedSize {
        window: span.window,
        scale,
        pixels: u64::from(x1 - x0) * u64::from(y1 - y0),
        ..PackedSize::default()
    };
    for comp in &coeffs.components {
        let g = geometry(coeffs, comp, scale);
        let [bx0, by0, bx1, by1] = span.blocks(comp)?;
        let (bw, bh) = (bx1 - bx0, by1 - by0);
        let blocks = u64::from(bw) * u64::from(bh);
        size.blocks += blocks;
        size.data_words += 32 + u64::from(block_words(g.dct_size)) * blocks;
        size.plane_words += u64::from((bw * g.dct_size).div_ceil(4)) * u64::from(bh * g.dct_size);
    }
    Ok(size)
}

/// Packs the blocks of `coeffs` that the window `[x0, y0, x1, y1)` of the image scaled by
/// `1/scale` needs into `out` (reusing its allocations): per component, the whole iMCU
/// columns and rows covering the window and one iMCU more on each side (clamped to the
/// image), so upsampling at the window's edges sees the neighbours a whole-image decode
/// sees. The window is clamped to the scaled image; an empty one is an error, as are
/// scales other than 1, 2, 4, 8 and components [`Coefficients::check_supported`] refuses.
/// [`packed_size`] says how large the result is without making it.
pub fn pack(
    coeffs: &Coefficients,
    scale: u32,
    window: [u32; 4],
    out: &mut PackedJpeg,
) -> Result<(), DecodeError> {
    pack_into(coeffs, scale, window, out, true).map(|_| ())
}

/// [`pack`] without the blocks, for a header whose blocks the device decodes
/// ([`super::huffman`]): `out.data` holds the quantisation tables only, and each
/// component's `coef_offset` is the word offset of its region in a separate coefficient
/// area (32 words a block, the layout of size 8 whatever the component's DCT output size;
/// regions one after another from 0). Returns the words of that area. The blocks of
/// `coeffs` are not read (they may be empty).
pub fn pack_header(
    coeffs: &Coefficients,
    scale: u32,
    window: [u32; 4],
    out: &mut PackedJpeg,
) -> Result<u64, DecodeError> {
    pack_into(coeffs, scale, window, out, false)
}

fn pack_into(
    coeffs: &Coefficients,
    scale: u32,
    window: [u32; 4],
    out: &mut PackedJpeg,
    with_blocks: bool,
) -> Result<u64, DecodeError> {
    let span = Span::of(coeffs, scale, window, with_blocks)?;
    let full = span.full;
    let mut coef_area = 0u64;

    out.components.clear();
    out.data.clear();
    out.plane_words = 0;
    out.image = ImageDesc::window_of(coeffs, scale, span.window, full);
    let mut plane = 0u64;
    for comp in &coeffs.components {
        let g = geometry(coeffs, comp, scale);
        let [bx0, by0, bx1, by1] = span.blocks(comp)?;
        let (bw, bh) = (bx1 - bx0, by1 - by0);
        let quant_offset = out.data.len() as u32;
        out.data
            .extend(comp.quant.chunks_exact(2).map(|q| pack_pair(q[0], q[1])));
        let coef_offset = if with_blocks {
            out.data.len() as u32
        } else {
            let at = coef_area;
            coef_area += u64::from(bw) * u64::from(bh) * 32;
            if coef_area > u64::from(u32::MAX / 4) {
                return Err(DecodeError::Unsupported(
                    "window too large for 32-bit coefficient offsets".into(),
                ));
            }
            at as u32
        };
        if with_blocks {
            out.data
                .reserve(bw as usize * bh as usize * block_words(g.dct_size) as usize);
        }
        for by in (by0..by1).filter(|_| with_blocks) {
            let start = by as usize * comp.width_in_blocks as usize;
            let row = &comp.blocks[start + bx0 as usize..start + bx1 as usize];
            for block in row {
                push_block(&mut out.data, block, g.dct_size);
            }
        }
        let stride = (bw * g.dct_size).div_ceil(4);
        let words = u64::from(stride) * u64::from(bh * g.dct_size);
        out.components.push(ComponentDesc {
            coef_offset,
            quant_offset,
            bx0,
            by0,
            bw,
            bh,
            dct_size: g.dct_size,
            plane_offset: plane as u32,
            plane_stride: stride,
            downsampled_width: g.downsampled_width,
            downsampled_height: g.downsampled_height,
            method: g.method.code(),
            eh: g.eh,
            ev: g.ev,
            group_start: 0,
            groups: idct_groups(bw, g.dct_size) * bh,
        });
        plane += words;
        if plane > u64::from(u32::MAX / 4) {
            return Err(DecodeError::Unsupported(
                "window too large for 32-bit plane offsets".into(),
            ));
        }
    }
    out.plane_words = plane as u32;
    Ok(coef_area)
}

/// Reads coefficient `i` (natural order) of the block at data offset `block`, stored in
/// the layout of output size `dct_size`; 0 for a coefficient that layout drops.
pub fn coef_at(data: &[u32], block: usize, dct_size: u32, i: usize) -> i16 {
    let Some(k) = block_slot(dct_size, i) else {
        return 0;
    };
    let w = data[block + k / 2];
    if k.is_multiple_of(2) {
        w as u16 as i16
    } else {
        (w >> 16) as u16 as i16
    }
}

/// Reads quantisation entry `i` (natural order) of the table at data offset `table`.
pub fn quant_at(data: &[u32], table: usize, i: usize) -> u16 {
    let w = data[table + i / 2];
    if i.is_multiple_of(2) {
        w as u16
    } else {
        (w >> 16) as u16
    }
}

/// A `w x h` image with sampling factors `samp` (one component: gray, three: YCbCr),
/// every block zero: what tests plan uploads from.
#[cfg(test)]
pub(crate) fn zero_coefficients(w: u32, h: u32, samp: &[(u32, u32)]) -> Box<Coefficients> {
    let mut c = Box::<Coefficients>::default();
    c.clear();
    (c.width, c.height) = (w, h);
    c.color = if samp.len() == 1 {
        ColorModel::Gray
    } else {
        ColorModel::YCbCr
    };
    c.max_h = samp.iter().map(|s| s.0).max().unwrap_or(1);
    c.max_v = samp.iter().map(|s| s.1).max().unwrap_or(1);
    let (max_h, max_v) = (c.max_h, c.max_v);
    for &(hs, vs) in samp {
        let wib = (w * hs).div_ceil(max_h * 8);
        let hib = (h * vs).div_ceil(max_v * 8);
        let comp = c.push_component(hs, vs, wib, hib, [1; 64]);
        comp.blocks = vec![[0; 64]; (wib * hib) as usize];
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coeffs(w: u32, h: u32, samp: &[(u32, u32)]) -> Coefficients {
        let max_h = samp.iter().map(|s| s.0).max().unwrap_or(1);
        let max_v = samp.iter().map(|s| s.1).max().unwrap_or(1);
        let components = samp
            .iter()
            .map(|&(hs, vs)| {
                let wib = (w * hs).div_ceil(max_h * 8);
                let hib = (h * vs).div_ceil(max_v * 8);
                Component {
                    h_samp: hs,
                    v_samp: vs,
                    width_in_blocks: wib,
                    height_in_blocks: hib,
                    quant: [1; 64],
                    blocks: vec![[0; 64]; (wib * hib) as usize],
                }
            })
            .collect();
        Coefficients {
            width: w,
            height: h,
            color: if samp.len() == 1 {
                ColorModel::Gray
            } else {
                ColorModel::YCbCr
            },
            adobe_inverted: false,
            max_h,
            max_v,
            components,
            warning: None,
            spare: Vec::new(),
        }
    }

    #[test]
    fn chroma_is_scaled_by_the_idct_when_it_can_be() {
        let c = coeffs(101, 67, &[(2, 2), (1, 1), (1, 1)]);
        let g = |s| geometry(&c, &c.components[1], s);
        assert_eq!((g(1).dct_size, g(1).method), (8, Upsample::H2V2Fancy));
        assert_eq!((g(2).dct_size, g(2).method), (8, Upsample::Full));
        assert_eq!((g(4).dct_size, g(4).method), (4, Upsample::Full));
        assert_eq!((g(8).dct_size, g(8).method), (2, Upsample::Full));
        assert_eq!(g(1).downsampled_width, 51);
        let y = geometry(&c, &c.components[0], 8);
        assert_eq!(
            (y.dct_size, y.method, y.downsampled_width),
            (1, Upsample::Full, 13)
        );
        // 4:2:2 keeps its vertical factor at 1/2: chroma stays 4x4 and is upsampled 2x1.
        let c = coeffs(64, 64, &[(2, 1), (1, 1), (1, 1)]);
        let g = geometry(&c, &c.components[1], 2);
        assert_eq!(
            (g.dct_size, g.method, g.eh, g.ev),
            (4, Upsample::H2V1Fancy, 2, 1)
        );
    }

    #[test]
    fn packed_size_is_what_pack_makes() {
        let mut p = PackedJpeg::default();
        for samp in [
            &[(1, 1)][..],
            &[(2, 2), (1, 1), (1, 1)],
            &[(4, 1), (1, 1), (1, 1)],
        ] {
            let c = coeffs(301, 203, samp);
            for scale in [1, 2, 4, 8] {
                let (fw, fh) = c.scaled_size(scale);
                for window in [
                    [0, 0, fw, fh],
                    [fw / 3, fh / 2, fw / 2 + 1, fh],
                    [5, 7, 9, 12],
                ] {
                    pack(&c, scale, window, &mut p).unwrap();
                    let size = packed_size(&c, scale, window).unwrap();
                    assert_eq!(size.data_words, p.data.len() as u64, "{samp:?} 1/{scale}");
                    assert_eq!(size.plane_words, u64::from(p.plane_words));
                    let pixels = u64::from(p.image.width) * u64::from(p.image.height);
                    assert_eq!(size.pixels, pixels);
                    let blocks: u64 = p
                        .components
                        .iter()
                        .map(|d| u64::from(d.bw) * u64::from(d.bh))
                        .sum();
                    assert_eq!(size.blocks, blocks);
                }
            }
        }
        // A small window at 1/8 of a large image reads a block per output pixel, and
        // uploads its DC alone: one word.
        let c = coeffs(2048, 2048, &[(1, 1)]);
        let size = packed_size(&c, 8, [0, 0, 256, 256]).unwrap();
        assert_eq!(size.pixels, 256 * 256);
        assert_eq!(size.blocks, 256 * 256);
        assert_eq!(size.data_words, 32 + 256 * 256);
        assert!(packed_size(&c, 3, [0, 0, 8, 8]).is_err());
        assert!(packed_size(&c, 8, [256, 0, 300, 8]).is_err());
    }

    #[test]
    fn packs_signed_pairs_and_a_widened_region() {
        let mut c = coeffs(64, 48, &[(1, 1)]);
        c.components[0].blocks[9][0] = -3;
        c.components[0].blocks[9][1] = 1234;
        c.components[0].blocks[9][63] = -32768;
        let mut p = PackedJpeg::default();
        pack(&c, 1, [20, 12, 30, 20], &mut p).unwrap();
        let d = p.components[0];
        // Window columns 2-3 (8-pixel iMCUs), one more each side: 1-4; rows 1-2: 0-3.
        assert_eq!((d.bx0, d.by0, d.bw, d.bh), (1, 0, 4, 4));
        // Block (1, 1) of the image is block (0, 1) of the region.
        let region_block = d.coef_offset as usize + 32 * 4;
        assert_eq!(coef_at(&p.data, region_block, 8, 0), -3);
        assert_eq!(coef_at(&p.data, region_block, 8, 1), 1234);
        assert_eq!(coef_at(&p.data, region_block, 8, 63), -32768);
        assert!(pack(&c, 1, [64, 0, 70, 8], &mut p).is_err());
        assert!(pack(&c, 3, [0, 0, 8, 8], &mut p).is_err());
    }

    /// The layout's slots are the kept rows by the kept columns, row-major, as the
    /// shaders compute them (`rank` in `shaders/idct.wgsl`), and fill the block's words.
    #[test]
    fn block_layouts_keep_what_each_idct_reads() {
        for (size, n, words) in [(8u32, 8usize, 32u32), (4, 7, 25), (2, 5, 13), (1, 1, 1)] {
            assert_eq!(kept_rows(size).len(), n);
            assert_eq!(block_words(size), words);
            let rank = |x: usize| match size {
                8 => x,
                4 => x - usize::from(x > 4),
                2 => x.div_ceil(2),
                _ => 0,
            };
            let mut seen = vec![false; n * n];
            for i in 0..64 {
                let (r, c) = (i / 8, i % 8);
                let kept = kept_rows(size).contains(&r) && kept_rows(size).contains(&c);
                let slot = block_slot(size, i);
                assert_eq!(slot.is_some(), kept, "size {size}, coefficient {i}");
                if let Some(k) = slot {
                    assert_eq!(k, rank(r) * n + rank(c), "size {size}, coefficient {i}");
                    assert!(!seen[k]);
                    seen[k] = true;
                }
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn reduced_sizes_pack_the_kept_coefficients() {
        let mut c = coeffs(64, 64, &[(1, 1)]);
        for (i, v) in c.components[0].blocks[0].iter_mut().enumerate() {
            *v = i as i16 * if i % 3 == 0 { -1 } else { 1 } - 100;
        }
        c.components[0].blocks[1][0] = 777;
        let block = c.components[0].blocks[0];
        let mut p = PackedJpeg::default();
        for scale in [1, 2, 4, 8] {
            pack(&c, scale, [0, 0, 1, 1], &mut p).unwrap();
            let d = p.components[0];
            let words = block_words(d.dct_size) as usize;
            assert_eq!(d.dct_size, 8 / scale);
            assert_eq!(p.data.len(), 32 + words * (d.bw * d.bh) as usize);
            for (i, &v) in block.iter().enumerate() {
                let want = if block_slot(d.dct_size, i).is_some() {
                    v
                } else {
                    0
                };
                let at = d.coef_offset as usize;
                assert_eq!(coef_at(&p.data, at, d.dct_size, i), want, "1/{scale} {i}");
            }
            // The next block starts `words` on, and an odd slot count leaves the last
            // word's high half zero.
            let at = d.coef_offset as usize + words;
            assert_eq!(coef_at(&p.data, at, d.dct_size, 0), 777);
            if d.dct_size < 8 {
                assert_eq!(p.data[d.coef_offset as usize + words - 1] >> 16, 0);
            }
        }
    }
}

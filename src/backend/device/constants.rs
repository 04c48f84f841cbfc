//! The constants the CUDA kernels (`kernels/*.cu`) and the WGSL shaders (`shaders/*.wgsl`)
//! read, held once: word indices of the records the host writes, flags, codes and the
//! IDCT's fixed-point constants. Where the host has the definition (a `#[repr(C)]` record's
//! field, a flag, a status bit, a colour kind), the value is taken from it; the words the
//! host writes by position (the chunk and batch headers, the augment descriptors, the mix
//! parameters) are defined here.
//!
//! [`cuda`] writes the constants of a source as one `enum : u32 { ... };` (enumerators, not
//! variables: NVRTC would emit every namespace-scope constant as a global), [`wgsl`] as
//! `const NAME: T = V;` lines. The CUDA host prepends the text to each kernel source (and
//! to the headers `decode_common.cuh` and `idct_common.cuh`), the wgpu backend joins it to
//! each shader (and to `decode_common.wgsl` and `idct_common.wgsl`), and the tests'
//! kernel emulator includes the same text.

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};

use super::augment::{Params, DESC_WORDS, STATS_WORDS, TEMP_WORDS};
use super::decode::H_FULL_BLOCKS;
use super::launch::Kernel;
use crate::augment::plan::{self, SamplePlan};
use crate::decode::jpeg::coeffs::{self, ComponentDesc, ImageDesc, Upsample};
use crate::decode::jpeg::huffman::{self, IntervalDesc, ScanDesc};
use crate::decode::jpeg::idct;

/// The WGSL type of a constant (in CUDA every constant is a `u32` enumerator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// `u32`.
    U32,
    /// `i32`.
    I32,
}

/// One named constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Constant {
    /// Its name in the kernels and shaders.
    pub name: &'static str,
    /// Its value.
    pub value: u32,
    /// Its WGSL type.
    pub ty: Ty,
}

/// A value as the u32 word the kernels hold it in (an `i32` by its bits; the indices and
/// sizes are far below 2^32).
trait Word {
    fn word(self) -> u32;
}

impl Word for u32 {
    fn word(self) -> u32 {
        self
    }
}

impl Word for i32 {
    fn word(self) -> u32 {
        self as u32
    }
}

impl Word for usize {
    fn word(self) -> u32 {
        self as u32
    }
}

impl Word for u64 {
    fn word(self) -> u32 {
        self as u32
    }
}

/// `[Constant]` from `NAME = value` (a `u32`) or `NAME: i32 = value` entries.
macro_rules! constants {
    (@ty) => { Ty::U32 };
    (@ty i32) => { Ty::I32 };
    ($($name:ident $(: $ty:ident)? = $value:expr),* $(,)?) => {
        vec![$(Constant {
            name: stringify!($name),
            value: Word::word($value),
            ty: constants!(@ty $($ty)?),
        }),*]
    };
}

/// The word of `$record` at which its field `$field` starts.
macro_rules! word {
    ($record:ty, $field:ident) => {
        offset_of!($record, $field) / 4
    };
}

/// The constants of one source, by its file stem (`huffman`, `idct_common`, ...), that
/// both the CUDA and the WGSL versions read.
fn shared(stem: &str) -> Vec<Constant> {
    match stem {
        "decode_common" => decode_common(),
        "idct_common" => idct_common(),
        "huffman" => huffman(),
        "color" => color(),
        "augment" => augment(),
        _ => Vec::new(),
    }
}

/// The constants only the CUDA version of a source reads: the launch parameters, which
/// the WGSL versions read as the members of a uniform struct.
fn cuda_only(stem: &str) -> Vec<Constant> {
    match stem {
        "augment" => constants![
            S0 = word!(Params, s0),
            S1 = word!(Params, s1),
            ITEM0 = word!(Params, item0),
            ITEMS = word!(Params, items),
            WIN_BASE = word!(Params, win_base),
            DATA_BASE = word!(Params, data_base),
            R_BASE = word!(Params, r_base),
            H_BASE = word!(Params, h_base),
            BYTE0 = word!(Params, byte0),
            WORDS = word!(Params, words),
            PHASE = word!(Params, phase),
            CONTRAST = word!(Params, contrast),
        ],
        // The mix launch's parameter words (src/backend/device/mix.rs writes them).
        "mix" => constants![
            MIX_WG = Kernel::Mix.workgroup(),
            M_WORDS = 0,
            M_PER = 1,
            M_LEN = 2,
            M_DTYPE = 3,
            M_KIND = 4,
            M_LAYOUT = 5,
            M_WIDTH = 6,
            M_HEIGHT = 7,
            M_X0 = 8,
            M_Y0 = 9,
            M_X1 = 10,
            M_Y1 = 11,
            M_L = 12,
            M_M = 13,
        ],
        _ => Vec::new(),
    }
}

/// The chunk header and `ComponentDesc` words the three decode passes read.
fn decode_common() -> Vec<Constant> {
    constants![
        // Chunk header words.
        H_IMAGES = 0,          // number of image records
        H_COMPONENTS = 1,      // number of component records
        H_IMAGE_TABLE = 2,     // word of the image table
        H_COMPONENT_TABLE = 3, // word of the component table
        H_IDCT = 4,            // IDCT invocations in this chunk
        H_PIXELS = 5,          // output pixels in this chunk
        H_INTERVALS = 8,       // intervals in this chunk
        H_INTERVAL_TABLE = 9,  // word of the interval table
        H_FULL_BLOCKS = H_FULL_BLOCKS,
        H_MAX_BLOCKS = 12, // the most blocks an interval of the chunk holds
        // ComponentDesc words.
        C_COEF = word!(ComponentDesc, coef_offset),
        C_QUANT = word!(ComponentDesc, quant_offset),
        C_BX0 = word!(ComponentDesc, bx0),
        C_BY0 = word!(ComponentDesc, by0),
        C_BW = word!(ComponentDesc, bw),
        C_BH = word!(ComponentDesc, bh),
        C_DCT = word!(ComponentDesc, dct_size),
        C_PLANE = word!(ComponentDesc, plane_offset),
        C_STRIDE = word!(ComponentDesc, plane_stride),
        C_DW = word!(ComponentDesc, downsampled_width),
        C_DH = word!(ComponentDesc, downsampled_height),
        C_METHOD = word!(ComponentDesc, method),
        C_EH = word!(ComponentDesc, eh),
        C_EV = word!(ComponentDesc, ev),
        C_GROUP_START = word!(ComponentDesc, group_start),
    ]
}

/// The fixed-point constants of the islow IDCT (`src/decode/jpeg/idct.rs`).
fn idct_common() -> Vec<Constant> {
    constants![
        CONST_BITS = idct::CONST_BITS,
        PASS1_BITS = idct::PASS1_BITS,
        FIX_0_298631336: i32 = idct::FIX_0_298631336,
        FIX_0_390180644: i32 = idct::FIX_0_390180644,
        FIX_0_541196100: i32 = idct::FIX_0_541196100,
        FIX_0_765366865: i32 = idct::FIX_0_765366865,
        FIX_0_899976223: i32 = idct::FIX_0_899976223,
        FIX_1_175875602: i32 = idct::FIX_1_175875602,
        FIX_1_501321110: i32 = idct::FIX_1_501321110,
        FIX_1_847759065: i32 = idct::FIX_1_847759065,
        FIX_1_961570560: i32 = idct::FIX_1_961570560,
        FIX_2_053119869: i32 = idct::FIX_2_053119869,
        FIX_2_562915447: i32 = idct::FIX_2_562915447,
        FIX_3_072711026: i32 = idct::FIX_3_072711026,
        FIX_0_211164243: i32 = idct::FIX_0_211164243,
        FIX_0_509795579: i32 = idct::FIX_0_509795579,
        FIX_0_601344887: i32 = idct::FIX_0_601344887,
        FIX_0_720959822: i32 = idct::FIX_0_720959822,
        FIX_0_850430095: i32 = idct::FIX_0_850430095,
        FIX_1_061594337: i32 = idct::FIX_1_061594337,
        FIX_1_272758580: i32 = idct::FIX_1_272758580,
        FIX_1_451774981: i32 = idct::FIX_1_451774981,
        FIX_2_172734803: i32 = idct::FIX_2_172734803,
        FIX_3_624509785: i32 = idct::FIX_3_624509785,
    ]
}

/// The entropy records (`src/decode/jpeg/huffman/pack.rs`) and status bits the Huffman
/// pass reads and writes.
fn huffman() -> Vec<Constant> {
    constants![
        // IntervalDesc words.
        V_SCAN = word!(IntervalDesc, scan),
        V_FIRST_MCU = word!(IntervalDesc, first_mcu),
        V_MCUS = word!(IntervalDesc, mcus),
        V_START = word!(IntervalDesc, start),
        V_END = word!(IntervalDesc, end),
        V_STATUS = word!(IntervalDesc, status),
        // ScanDesc words.
        S_COMPONENTS = word!(ScanDesc, components),
        S_MCUS_PER_ROW = word!(ScanDesc, mcus_per_row),
        S_FIRST_COMPONENT = word!(ScanDesc, first_component),
        S_FLAGS = word!(ScanDesc, flags),
        S_COMP = word!(ScanDesc, comp),
        S_DC_TABLE = word!(ScanDesc, dc_table),
        S_AC_TABLE = word!(ScanDesc, ac_table),
        // Decode table words (after the 128 lookahead words).
        T_MAXCODE = huffman::MAXCODE,
        T_VALOFFSET = huffman::VALOFFSET,
        T_HUFFVAL = huffman::HUFFVAL,
        STATUS_OUT_OF_DATA = huffman::STATUS_OUT_OF_DATA,
        STATUS_BAD_CODE = huffman::STATUS_BAD_CODE,
        STATUS_LEFTOVER = huffman::STATUS_LEFTOVER,
        STATUS_OVERFLOW = huffman::STATUS_OVERFLOW,
        STATUS_SIMD_RANGE = huffman::STATUS_SIMD_RANGE,
        // What decode() returns for 16 bits that match no code (the oracle's None).
        BAD_CODE = u32::MAX,
        // agrees_with_simd's bound.
        QUICK_BOUND = idct::QUICK_BOUND,
    ]
}

/// The `ImageDesc` words, colour kinds and upsampling methods the colour pass reads.
fn color() -> Vec<Constant> {
    constants![
        I_KIND = word!(ImageDesc, kind),
        I_FLAGS = word!(ImageDesc, flags),
        I_COMPONENTS = word!(ImageDesc, num_components),
        I_FIRST_COMPONENT = word!(ImageDesc, first_component),
        I_OUT = word!(ImageDesc, out_offset),
        I_X0 = word!(ImageDesc, x0),
        I_Y0 = word!(ImageDesc, y0),
        I_WIDTH = word!(ImageDesc, width),
        I_PIXEL_START = word!(ImageDesc, pixel_start),
        I_SRC = word!(ImageDesc, src_offset),
        KIND_GRAY = coeffs::KIND_GRAY,
        KIND_YCBCR = coeffs::KIND_YCBCR,
        KIND_RGB = coeffs::KIND_RGB,
        KIND_CMYK = coeffs::KIND_CMYK,
        KIND_YCCK = coeffs::KIND_YCCK,
        KIND_PASSTHROUGH = coeffs::KIND_PASSTHROUGH,
        UP_FULL = Upsample::Full.code(),
        UP_BOX = Upsample::Box.code(),
        UP_H2V1 = Upsample::H2V1Fancy.code(),
        UP_H1V2 = Upsample::H1V2Fancy.code(),
        UP_H2V2 = Upsample::H2V2Fancy.code(),
    ]
}

/// The batch header, per-sample descriptor and [`SamplePlan`] words, the plan's flags and
/// colour op codes, and the layout of the scratch buffers, that the augment passes read
/// (`src/backend/device/augment.rs` writes them).
fn augment() -> Vec<Constant> {
    constants![
        WG = Kernel::Horizontal.workgroup(),
        // Header words.
        H_N = 0,
        H_OUT_W = 1,
        H_OUT_H = 2,
        H_DTYPE = 3,
        H_LAYOUT = 4,
        H_IMAGE_BYTES = 5,
        H_DESCS = 6,
        H_PLANS = 7,
        H_DATA = 8,
        // Descriptor words. Table offsets are relative to the data section.
        DESC_WORDS = DESC_WORDS,
        D_WIN = 0,     // first word of the window in `windows`
        D_WIN_W = 1,   // window width (row stride in words)
        D_ROW0 = 3,    // first window row the horizontal pass reads
        D_ROWS = 4,    // rows it reads
        D_ITEM = 5,    // first horizontal item (= first word in the horizontal buffer)
        D_XB = 6,      // x bounds: (first window column, taps) per output column
        D_XW = 7,      // x weights: KX per output column
        D_KX = 8,      // taps per output column
        D_YB = 9,      // y bounds: (first horizontal-buffer row, taps) per output row
        D_YW = 10,     // y weights: KY per output row
        D_KY = 11,     // taps per output row
        D_MASK = 12,   // mask pixels, two u16 per word, low half first
        D_MASK_W = 13, // mask width (0: no mask, the output is 0)
        D_NEAREST = 15, // source column per output column, then source row per row
        D_BLUR = 16,   // Gaussian blur: kx, ky, then kx and ky integer weights
        // SamplePlan words.
        PLAN_WORDS = size_of::<SamplePlan>() / 4,
        P_FLAGS = word!(SamplePlan, flags),
        P_ORDER = word!(SamplePlan, jitter_order),
        P_BRIGHTNESS = word!(SamplePlan, brightness),
        P_CONTRAST = word!(SamplePlan, contrast),
        P_SATURATION = word!(SamplePlan, saturation),
        P_HUE = word!(SamplePlan, hue),
        P_MEAN = word!(SamplePlan, mean),
        P_STD = word!(SamplePlan, std),
        P_AFFINE = word!(SamplePlan, affine), // a, b, c_int, d, e, f_int
        P_AFFINE_FRAC = word!(SamplePlan, affine_frac), // fractions of c and f
        P_FILL = word!(SamplePlan, fill),
        P_MASK_FILL = word!(SamplePlan, mask_fill),
        P_VALID = word!(SamplePlan, valid), // x0 | x1 << 16, y0 | y1 << 16
        P_ORDER_HI = word!(SamplePlan, jitter_order_hi), // colour ops 4 to 7
        P_COLOR_PARAMS = word!(SamplePlan, color_params), // solarize threshold | posterize bits << 8
        P_ERASE = word!(SamplePlan, erase), // x0 | x1 << 16, y0 | y1 << 16 (after flips)
        P_ERASE_VALUE = word!(SamplePlan, erase_value), // f32 per channel, in the batch's units
        P_ORDER_EXT = word!(SamplePlan, order_ext), // colour ops 8 to 15 (two words)
        P_OP_PARAMS = word!(SamplePlan, op_params), // one word per colour op: its parameter, or 0
        FLIP_H = plan::FLIP_H,
        FLIP_V = plan::FLIP_V,
        JITTER = plan::JITTER,
        NORMALIZE = plan::NORMALIZE,
        AFFINE = plan::AFFINE,
        ERASE = plan::ERASE,
        AFFINE_FRAC_BITS = plan::AFFINE_FRAC_BITS,
        AFFINE_WEIGHT_BITS = plan::AFFINE_WEIGHT_BITS,
        OP_BRIGHTNESS = plan::OP_BRIGHTNESS,
        OP_CONTRAST = plan::OP_CONTRAST,
        OP_SATURATION = plan::OP_SATURATION,
        OP_HUE = plan::OP_HUE,
        OP_GRAYSCALE = plan::OP_GRAYSCALE,
        OP_POSTERIZE = plan::OP_POSTERIZE,
        OP_SOLARIZE = plan::OP_SOLARIZE,
        OP_AUTOCONTRAST = plan::OP_AUTOCONTRAST,
        OP_EQUALIZE = plan::OP_EQUALIZE,
        OP_SHARPNESS = plan::OP_SHARPNESS,
        OP_BLUR = plan::OP_BLUR,
        MAX_OPS = plan::MAX_OPS,
        PARAM_INT = plan::PARAM_INT,
        // Words per sample of the statistics after a group's horizontal items, and per
        // pixel of the copy a neighbourhood op reads (after the statistics).
        STATS_WORDS = STATS_WORDS,
        TEMP_WORDS = TEMP_WORDS,
        // The resize's fixed point (src/augment/reference/resize.rs): 22 fractional bits,
        // rounded by adding half a unit.
        ROUND: i32 = 1 << 21,
        PRECISION = 22,
    ]
}

/// The constants the CUDA version of `stem` (a file of `kernels/` without its extension:
/// `huffman`, `decode_common`, ...) reads, as one `enum : u32 { ... };`; empty when it
/// reads none.
pub fn cuda(stem: &str) -> String {
    let all: Vec<Constant> = shared(stem).into_iter().chain(cuda_only(stem)).collect();
    if all.is_empty() {
        return String::new();
    }
    let mut out = String::from("enum : u32 {\n");
    for c in all {
        let _ = writeln!(out, "    {} = {}u,", c.name, c.value);
    }
    out + "};\n"
}

/// The constants the WGSL version of `stem` (a file of `shaders/` without its extension)
/// reads, as `const` declarations; empty when it reads none.
pub fn wgsl(stem: &str) -> String {
    let mut out = String::new();
    for c in shared(stem) {
        let _ = match c.ty {
            Ty::U32 => writeln!(out, "const {}: u32 = {}u;", c.name, c.value),
            Ty::I32 => writeln!(out, "const {}: i32 = {};", c.name, c.value as i32),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEMS: [&str; 8] = [
        "decode_common",
        "idct_common",
        "huffman",
        "idct",
        "color",
        "orient",
        "augment",
        "mix",
    ];

    /// No source sees a name twice: each file's constants, and those of the headers
    /// joined to it, are distinct.
    #[test]
    fn no_source_defines_a_name_twice() {
        for group in [
            &["decode_common", "idct_common", "huffman"][..],
            &["decode_common", "idct_common", "idct"],
            &["decode_common", "color"],
            &["augment"],
            &["mix"],
        ] {
            let mut names: Vec<&str> = group
                .iter()
                .flat_map(|s| shared(s).into_iter().chain(cuda_only(s)))
                .map(|c| c.name)
                .collect();
            let n = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), n, "{group:?}");
        }
    }

    /// The i32 constants are non-negative, so the CUDA `u32` enumerator holds the same
    /// value.
    #[test]
    fn signed_constants_are_non_negative() {
        for stem in STEMS {
            for c in shared(stem) {
                assert!(c.ty == Ty::U32 || (c.value as i32) >= 0, "{}", c.name);
            }
        }
    }
}

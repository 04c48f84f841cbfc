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
//! to the headers `decode_common.cuh`, `idct_common.cuh` and `huffman_common.cuh`), the wgpu backend joins it to
//! each shader (and to `decode_common.wgsl` and `idct_common.wgsl`), and the tests'
//! kernel emulator includes the same text.
#![doc(hidden)]

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};

use super::augment::{Params, DESC_WORDS, STATS_WORDS, TEMP_WORDS};
use super::decode::H_FULL_BLOCKS;
use super::launch::Kernel;
use crate::augment::plan::{self, SamplePlan};
use crate::decode::jpeg::coeffs::{self, ComponentDesc, ImageDesc, Upsample};
use crate::decode::jpeg::huffman::sync;
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

/// `[Constant]` from `NAME = field` entries: the word of `$record` at which `field` starts.
macro_rules! words {
    ($record:ident { $($name:ident = $field:ident),* $(,)? }) => {
        constants![$($name = offset_of!($record, $field) / 4),*]
    };
}

/// `[Constant]` numbering the names 0, 1, 2, ...: consecutive words of a record.
macro_rules! sequence {
    ($($name:ident),* $(,)?) => {
        [$(stringify!($name)),*]
            .into_iter()
            .zip(0..)
            .map(|(name, value)| Constant { name, value, ty: Ty::U32 })
            .collect::<Vec<Constant>>()
    };
}

/// `[Constant]` from constants of the Rust module `$module`, under their own names.
macro_rules! same {
    ($module:ident: $($name:ident $(: $ty:ident)?),* $(,)?) => {
        constants![$($name $(: $ty)? = $module::$name),*]
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
        "sync_huffman" => sync_huffman(),
        _ => Vec::new(),
    }
}

/// The constants only the CUDA version of a source reads: the launch parameters, which
/// the WGSL versions read as the members of a uniform struct; and those of the header
/// `huffman_common.cuh`, which the WGSL shaders have no twin of (each declares them
/// itself).
fn cuda_only(stem: &str) -> Vec<Constant> {
    match stem {
        "huffman_common" => entropy_common(),
        "augment" => words!(Params {
            S0 = s0, S1 = s1, ITEM0 = item0, ITEMS = items, WIN_BASE = win_base,
            DATA_BASE = data_base, R_BASE = r_base, H_BASE = h_base, BYTE0 = byte0,
            WORDS = words, PHASE = phase, CONTRAST = contrast,
        }),
        // The mix launch's parameter words (src/backend/device/mix.rs writes them).
        "mix" => [
            constants![MIX_WG = Kernel::Mix.workgroup()],
            sequence![
                M_WORDS, M_PER, M_LEN, M_DTYPE, M_KIND, M_LAYOUT, M_WIDTH, M_HEIGHT, M_X0, M_Y0,
                M_X1, M_Y1, M_L, M_M,
            ],
        ]
        .concat(),
        _ => Vec::new(),
    }
}

/// The chunk header and `ComponentDesc` words the three decode passes read.
fn decode_common() -> Vec<Constant> {
    let header = constants![
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
    ];
    let component = words!(ComponentDesc {
        C_COEF = coef_offset, C_QUANT = quant_offset, C_BX0 = bx0, C_BY0 = by0, C_BW = bw,
        C_BH = bh, C_DCT = dct_size, C_PLANE = plane_offset, C_STRIDE = plane_stride,
        C_DW = downsampled_width, C_DH = downsampled_height, C_METHOD = method, C_EH = eh,
        C_EV = ev, C_GROUP_START = group_start,
    });
    [header, component].concat()
}

/// The fixed-point constants of the islow IDCT (`src/decode/jpeg/idct.rs`).
fn idct_common() -> Vec<Constant> {
    same!(idct:
        CONST_BITS, PASS1_BITS,
        FIX_0_298631336: i32, FIX_0_390180644: i32, FIX_0_541196100: i32, FIX_0_765366865: i32,
        FIX_0_899976223: i32, FIX_1_175875602: i32, FIX_1_501321110: i32, FIX_1_847759065: i32,
        FIX_1_961570560: i32, FIX_2_053119869: i32, FIX_2_562915447: i32, FIX_3_072711026: i32,
        FIX_0_211164243: i32, FIX_0_509795579: i32, FIX_0_601344887: i32, FIX_0_720959822: i32,
        FIX_0_850430095: i32, FIX_1_061594337: i32, FIX_1_272758580: i32, FIX_1_451774981: i32,
        FIX_2_172734803: i32, FIX_3_624509785: i32,
    )
}

/// The entropy records (`src/decode/jpeg/huffman/pack.rs`) and status bits the Huffman
/// pass reads and writes.
fn huffman() -> Vec<Constant> {
    let interval = words!(IntervalDesc {
        V_SCAN = scan, V_FIRST_MCU = first_mcu, V_MCUS = mcus, V_START = start, V_END = end,
        V_STATUS = status,
    });
    let other = constants![
        // What decode() returns for 16 bits that match no code (the oracle's None).
        BAD_CODE = u32::MAX,
    ];
    [interval, entropy_common(), other].concat()
}

/// What both Huffman passes read: the `ScanDesc` words, the status bits, the decode
/// table words and the SIMD-agreement bound.
fn entropy_common() -> Vec<Constant> {
    let scan = words!(ScanDesc {
        S_COMPONENTS = components, S_MCUS_PER_ROW = mcus_per_row,
        S_FIRST_COMPONENT = first_component, S_FLAGS = flags, S_COMP = comp,
        S_DC_TABLE = dc_table, S_AC_TABLE = ac_table,
    });
    let status = same!(huffman:
        STATUS_OUT_OF_DATA, STATUS_BAD_CODE, STATUS_LEFTOVER, STATUS_OVERFLOW, STATUS_SIMD_RANGE,
    );
    let other = constants![
        // Decode table words (after the 128 lookahead words).
        T_MAXCODE = huffman::MAXCODE,
        T_VALOFFSET = huffman::VALOFFSET,
        T_HUFFVAL = huffman::HUFFVAL,
        // agrees_with_simd's bound.
        QUICK_BOUND = idct::QUICK_BOUND,
    ];
    [scan, status, other].concat()
}

/// Word of a sample's status words on the sync decode (from its batch table word 5) that
/// holds the OR of its scan's and write pass's status words (`shaders/sync_huffman.wgsl`,
/// `kernels/sync_huffman.cu`).
pub const SYNC_STATUS_WORD: usize = 0;
/// Word of those that round 0 of the sync decode ORs 1 into when it changed an exit of
/// the sample; round `r` uses the word `r` after it.
pub const SYNC_CHANGED_WORD: usize = 1;

/// The chunk of the synchronising decode (`src/decode/jpeg/huffman/sync.rs`, whose module
/// docs give the layout `pack_sync` writes), its records and status words, as the passes
/// of `shaders/sync_huffman.wgsl` and `kernels/sync_huffman.cu` read them.
fn sync_huffman() -> Vec<Constant> {
    // The chunk header, in the order `pack_sync` writes it.
    let header = sequence![
        SH_SEGMENTS,
        SH_SUBSEQUENCES,
        SH_BITS,
        SH_BLOCKS_PER_MCU,
        SH_SCAN,
        SH_COMPONENT_TABLE,
        SH_BLOCK_MAP,
        SH_SEGMENT_TABLE,
        SH_SUBSEQUENCE_TABLE,
        SH_DATA,
        SH_COEF_WORDS,
        SH_BLOCKS,
        SH_MAX_ROUNDS,
        SH_CYCLE,
        SH_REGIONS,
        SH_LIMIT,
    ];
    let segment = sequence![
        SG_START,
        SG_END,
        SG_FIRST_BLOCK,
        SG_BLOCKS,
        SG_FIRST_SUBSEQUENCE,
        SG_SUBSEQUENCES,
    ];
    let subsequence = sequence![SB_SEGMENT, SB_START, SB_END, SB_FLAGS];
    let component = sequence![SC_COEF, SC_WIDTH, SC_HEIGHT, SC_QUANT];
    // The batch table (`sync::BatchEntry`), in the order of its words.
    let batch = sequence![
        BT_CHUNK,
        BT_FIRST_SUBSEQUENCE,
        BT_FIRST_SEGMENT,
        BT_RECORDS,
        BT_COEFFICIENTS,
        BT_STATUS,
        BT_SUBSEQUENCES,
        BT_SEGMENTS,
    ];
    let sizes = constants![
        SYNC_COMPONENT_WORDS = 4u32,
        SYNC_REGION_WORDS = 4u32,
        SYNC_BATCH_WORDS = sync::BATCH_WORDS,
        SYNC_SEGMENT_WORDS = sync::SEGMENT_WORDS,
        SYNC_SUBSEQUENCE_WORDS = sync::SUBSEQUENCE_WORDS,
        SYNC_RECORD_WORDS = sync::RECORD_WORDS,
        SYNC_MAX_MCU_BLOCKS = sync::MAX_MCU_BLOCKS,
        SYNC_STATUS = SYNC_STATUS_WORD,
        SYNC_CHANGED = SYNC_CHANGED_WORD,
    ];
    let no_sync = same!(huffman: STATUS_NO_SYNC);
    [
        header,
        segment,
        subsequence,
        component,
        batch,
        sizes,
        no_sync,
        entropy_common(),
    ]
    .concat()
}

/// The `ImageDesc` words, colour kinds and upsampling methods the colour pass reads.
fn color() -> Vec<Constant> {
    let image = words!(ImageDesc {
        I_KIND = kind, I_FLAGS = flags, I_COMPONENTS = num_components,
        I_FIRST_COMPONENT = first_component, I_OUT = out_offset, I_X0 = x0, I_Y0 = y0,
        I_WIDTH = width, I_PIXEL_START = pixel_start, I_SRC = src_offset,
    });
    let kinds = same!(coeffs:
        KIND_GRAY, KIND_YCBCR, KIND_RGB, KIND_CMYK, KIND_YCCK, KIND_PASSTHROUGH,
    );
    let methods = constants![
        UP_FULL = Upsample::Full.code(),
        UP_BOX = Upsample::Box.code(),
        UP_H2V1 = Upsample::H2V1Fancy.code(),
        UP_H1V2 = Upsample::H1V2Fancy.code(),
        UP_H2V2 = Upsample::H2V2Fancy.code(),
    ];
    [image, kinds, methods].concat()
}

/// The batch header, per-sample descriptor and [`SamplePlan`] words, the plan's flags and
/// colour op codes, and the layout of the scratch buffers, that the augment passes read
/// (`src/backend/device/augment.rs` writes them).
fn augment() -> Vec<Constant> {
    let header = sequence![
        H_N,
        H_OUT_W,
        H_OUT_H,
        H_DTYPE,
        H_LAYOUT,
        H_IMAGE_BYTES,
        H_DESCS,
        H_PLANS,
        H_DATA,
    ];
    let layout = constants![
        WG = Kernel::Horizontal.workgroup(),
        // Descriptor words. Table offsets are relative to the data section.
        DESC_WORDS = DESC_WORDS,
        D_WIN = 0,      // first word of the window in `windows`
        D_WIN_W = 1,    // window width (row stride in words)
        D_ROW0 = 3,     // first window row the horizontal pass reads
        D_ROWS = 4,     // rows it reads
        D_ITEM = 5,     // first horizontal item (= first word in the horizontal buffer)
        D_XB = 6,       // x bounds: (first window column, taps) per output column
        D_XW = 7,       // x weights: KX per output column
        D_KX = 8,       // taps per output column
        D_YB = 9,       // y bounds: (first horizontal-buffer row, taps) per output row
        D_YW = 10,      // y weights: KY per output row
        D_KY = 11,      // taps per output row
        D_MASK = 12,    // mask pixels, two u16 per word, low half first
        D_MASK_W = 13,  // mask width (0: no mask, the output is 0)
        D_NEAREST = 15, // source column per output column, then source row per row
        D_BLUR = 16,    // Gaussian blur: kx, ky, then kx and ky integer weights
        PLAN_WORDS = size_of::<SamplePlan>() / 4,
        // Words per sample of the statistics after a group's horizontal items, and per
        // pixel of the copy a neighbourhood op reads (after the statistics).
        STATS_WORDS = STATS_WORDS,
        TEMP_WORDS = TEMP_WORDS,
        // The resize's fixed point (src/augment/reference/resize.rs): 22 fractional bits,
        // rounded by adding half a unit.
        ROUND: i32 = 1 << 21,
        PRECISION = 22,
    ];
    // SamplePlan words. P_AFFINE: a, b, c_int, d, e, f_int; P_AFFINE_FRAC: the fractions
    // of c and f; P_VALID and P_ERASE (after flips): x0 | x1 << 16, y0 | y1 << 16;
    // P_ORDER_HI: colour ops 4 to 7, P_ORDER_EXT: 8 to 15 (two words); P_COLOR_PARAMS:
    // solarize threshold | posterize bits << 8; P_ERASE_VALUE: f32 per channel, in the
    // batch's units; P_OP_PARAMS: one word per colour op, its parameter or 0.
    let plan_words = words!(SamplePlan {
        P_FLAGS = flags, P_ORDER = jitter_order, P_BRIGHTNESS = brightness,
        P_CONTRAST = contrast, P_SATURATION = saturation, P_HUE = hue, P_MEAN = mean,
        P_STD = std, P_AFFINE = affine, P_AFFINE_FRAC = affine_frac, P_FILL = fill,
        P_MASK_FILL = mask_fill, P_VALID = valid, P_ORDER_HI = jitter_order_hi,
        P_COLOR_PARAMS = color_params, P_ERASE = erase, P_ERASE_VALUE = erase_value,
        P_ORDER_EXT = order_ext, P_OP_PARAMS = op_params,
    });
    let codes = same!(plan:
        FLIP_H, FLIP_V, JITTER, NORMALIZE, AFFINE, ERASE, AFFINE_FRAC_BITS, AFFINE_WEIGHT_BITS,
        OP_BRIGHTNESS, OP_CONTRAST, OP_SATURATION, OP_HUE, OP_GRAYSCALE, OP_POSTERIZE,
        OP_SOLARIZE, OP_AUTOCONTRAST, OP_EQUALIZE, OP_SHARPNESS, OP_BLUR, MAX_OPS, PARAM_INT,
    );
    [header, layout, plan_words, codes].concat()
}

/// The constants the CUDA version of `stem` (a file of `kernels/` without its extension:
/// `huffman`, `decode_common`, ...) reads, as one `enum : u32 { ... };`; empty when it
/// reads none.
pub fn cuda(stem: &str) -> String {
    let all = cuda_constants(stem);
    if all.is_empty() {
        return String::new();
    }
    let mut out = String::from("enum : u32 {\n");
    for c in all {
        let _ = writeln!(out, "    {} = {}u,", c.name, c.value);
    }
    out + "};\n"
}

/// The constants of the CUDA version of `stem`: its own, less those of the headers joined
/// in front of it (`huffman_common.cuh`'s, for the two Huffman kernels), which a C++ enum
/// may not define twice.
fn cuda_constants(stem: &str) -> Vec<Constant> {
    let joined = match stem {
        "huffman" | "sync_huffman" => cuda_only("huffman_common"),
        _ => Vec::new(),
    };
    shared(stem)
        .into_iter()
        .chain(cuda_only(stem))
        .filter(|c| !joined.contains(c))
        .collect()
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

    const STEMS: [&str; 9] = [
        "decode_common",
        "sync_huffman",
        "idct_common",
        "huffman",
        "idct",
        "color",
        "orient",
        "augment",
        "mix",
    ];

    /// No source sees a name twice: each file's constants, and those of the headers
    /// joined to it, are distinct, in CUDA (`kernels.rs` joins the headers) and in WGSL.
    #[test]
    fn no_source_defines_a_name_twice() {
        let cuda = [
            &["decode_common", "idct_common", "huffman_common", "huffman"][..],
            &[
                "decode_common",
                "idct_common",
                "huffman_common",
                "sync_huffman",
            ],
            &["decode_common", "idct_common", "idct"],
            &["decode_common", "color"],
            &["augment"],
            &["mix"],
        ];
        let wgsl = [
            &["decode_common", "idct_common", "huffman"][..],
            &["idct_common", "sync_huffman"],
        ];
        let groups = cuda.iter().map(|g| (*g, true));
        for (group, is_cuda) in groups.chain(wgsl.iter().map(|g| (*g, false))) {
            let mut names: Vec<&str> = group
                .iter()
                .flat_map(|s| {
                    if is_cuda {
                        cuda_constants(s)
                    } else {
                        shared(s)
                    }
                })
                .map(|c| c.name)
                .collect();
            let n = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), n, "{group:?} (CUDA: {is_cuda})");
        }
    }

    /// The CUDA Huffman kernels read the constants their WGSL twins declare, the shared
    /// ones from `huffman_common.cuh`'s.
    #[test]
    fn the_cuda_huffman_kernels_see_every_constant_of_their_wgsl_twins() {
        for stem in ["huffman", "sync_huffman"] {
            let mut cuda = cuda_constants("huffman_common");
            cuda.extend(cuda_constants(stem));
            for c in shared(stem) {
                assert!(cuda.contains(&c), "{stem}: {}", c.name);
            }
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

//! The WGSL sources, compiled into the binary and turned into pipelines at run time.

/// The IDCT arithmetic (constants and pure functions, no bindings) joined in front of
/// [`HUFFMAN`] and [`IDCT`].
pub const IDCT_COMMON: &str = include_str!("../../../shaders/idct_common.wgsl");

/// What the three decode passes ([`HUFFMAN`], [`IDCT`], [`COLOR`]) share, joined after
/// each: the chunk's binding, the invocation index and the lookups into the chunk's tables.
pub const DECODE_COMMON: &str = include_str!("../../../shaders/decode_common.wgsl");

/// Huffman decoding of restart intervals into coefficient blocks (with the IDCT arithmetic
/// of `idct_common.wgsl` in front, for its range check, and `decode_common.wgsl` after:
/// WGSL has no includes).
pub const HUFFMAN: &str = concat!(
    include_str!("../../../shaders/idct_common.wgsl"),
    include_str!("../../../shaders/huffman.wgsl"),
    include_str!("../../../shaders/decode_common.wgsl")
);
/// Dequantisation and IDCT of JPEG blocks (8x8, 4x4, 2x2 or 1x1 outputs), with the IDCT
/// arithmetic of `idct_common.wgsl` in front and `decode_common.wgsl` after.
pub const IDCT: &str = concat!(
    include_str!("../../../shaders/idct_common.wgsl"),
    include_str!("../../../shaders/idct.wgsl"),
    include_str!("../../../shaders/decode_common.wgsl")
);
/// Chroma upsampling and colour conversion to RGB, with `decode_common.wgsl` after.
pub const COLOR: &str = concat!(
    include_str!("../../../shaders/color.wgsl"),
    include_str!("../../../shaders/decode_common.wgsl")
);
/// The fused per-plane pass: crop, resize, flip, jitter, normalise, layout, dtype (with
/// the f16 conversions appended: WGSL has no includes).
pub const AUGMENT: &str = concat!(
    include_str!("../../../shaders/augment.wgsl"),
    include_str!("../../../shaders/f16.wgsl")
);

/// Batch-level mixing (MixUp, CutMix) after the per-sample pass, with the f16
/// conversions appended.
pub const MIX: &str = concat!(
    include_str!("../../../shaders/mix.wgsl"),
    include_str!("../../../shaders/f16.wgsl")
);

/// EXIF orientation of a decoded window.
pub const ORIENT: &str = include_str!("../../../shaders/orient.wgsl");

/// Every shader, by file name.
pub const ALL: [(&str, &str); 6] = [
    ("huffman.wgsl", HUFFMAN),
    ("idct.wgsl", IDCT),
    ("color.wgsl", COLOR),
    ("augment.wgsl", AUGMENT),
    ("orient.wgsl", ORIENT),
    ("mix.wgsl", MIX),
];

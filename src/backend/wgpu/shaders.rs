//! The WGSL sources, compiled into the binary and joined at first use (WGSL has no
//! includes) with the constants they read ([`constants::wgsl`]), then turned into
//! pipelines at run time.
#![doc(hidden)]

use std::sync::LazyLock;

use crate::backend::device::constants;

/// The constants `shaders/{stem}.wgsl` reads, then the file.
fn with_constants(stem: &str, file: &str) -> String {
    constants::wgsl(stem) + file
}

/// The IDCT arithmetic (constants and pure functions, no bindings) joined in front of
/// [`HUFFMAN`] and [`IDCT`].
pub static IDCT_COMMON: LazyLock<String> = LazyLock::new(|| {
    with_constants(
        "idct_common",
        include_str!("../../../shaders/idct_common.wgsl"),
    )
});

/// What the three decode passes ([`HUFFMAN`], [`IDCT`], [`COLOR`]) share, joined after
/// each: the chunk's binding, the invocation index and the lookups into the chunk's tables.
pub static DECODE_COMMON: LazyLock<String> = LazyLock::new(|| {
    with_constants(
        "decode_common",
        include_str!("../../../shaders/decode_common.wgsl"),
    )
});

/// The range check of a decoded block against libjpeg's SIMD IDCT, joined after the two
/// Huffman decoders ([`HUFFMAN`], [`SYNC_HUFFMAN`]), which declare the block it reads.
pub static SIMD_RANGE: &str = include_str!("../../../shaders/simd_range.wgsl");

/// What the two Huffman decoders ([`HUFFMAN`], [`SYNC_HUFFMAN`]) share, joined after
/// each: the zigzag order, the codes of 9-16 bits, HUFF_EXTEND (the constants it reads
/// come with each decoder's).
pub static HUFFMAN_COMMON: &str = include_str!("../../../shaders/huffman_common.wgsl");

/// Huffman decoding of restart intervals into coefficient blocks (with the IDCT arithmetic
/// of [`IDCT_COMMON`] in front, [`HUFFMAN_COMMON`] and [`SIMD_RANGE`] after, for its
/// lookups and range check, and [`DECODE_COMMON`] last).
pub static HUFFMAN: LazyLock<String> = LazyLock::new(|| {
    let file = with_constants("huffman", include_str!("../../../shaders/huffman.wgsl"));
    [
        IDCT_COMMON.as_str(),
        &file,
        HUFFMAN_COMMON,
        SIMD_RANGE,
        &DECODE_COMMON,
    ]
    .concat()
});

/// The passes of the self-synchronising Huffman decode (with the IDCT arithmetic of
/// [`IDCT_COMMON`] in front, [`HUFFMAN_COMMON`] and [`SIMD_RANGE`] after, for its
/// lookups and range check).
pub static SYNC_HUFFMAN: LazyLock<String> = LazyLock::new(|| {
    let file = with_constants(
        "sync_huffman",
        include_str!("../../../shaders/sync_huffman.wgsl"),
    );
    [IDCT_COMMON.as_str(), &file, HUFFMAN_COMMON, SIMD_RANGE].concat()
});

/// Dequantisation and IDCT of JPEG blocks (8x8, 4x4, 2x2 or 1x1 outputs), with the IDCT
/// arithmetic of [`IDCT_COMMON`] in front and [`DECODE_COMMON`] after.
pub static IDCT: LazyLock<String> = LazyLock::new(|| {
    let file = with_constants("idct", include_str!("../../../shaders/idct.wgsl"));
    [IDCT_COMMON.as_str(), &file, &DECODE_COMMON].concat()
});

/// Chroma upsampling and colour conversion to RGB, with [`DECODE_COMMON`] after.
pub static COLOR: LazyLock<String> = LazyLock::new(|| {
    let file = with_constants("color", include_str!("../../../shaders/color.wgsl"));
    file + &DECODE_COMMON
});

/// The fused per-plane pass: crop, resize, flip, jitter, normalise, layout, dtype (with
/// the f16 conversions appended).
pub static AUGMENT: LazyLock<String> = LazyLock::new(|| {
    with_constants(
        "augment",
        concat!(
            include_str!("../../../shaders/augment.wgsl"),
            include_str!("../../../shaders/f16.wgsl")
        ),
    )
});

/// Batch-level mixing (MixUp, CutMix) after the per-sample pass, with the f16
/// conversions appended.
pub static MIX: LazyLock<String> = LazyLock::new(|| {
    with_constants(
        "mix",
        concat!(
            include_str!("../../../shaders/mix.wgsl"),
            include_str!("../../../shaders/f16.wgsl")
        ),
    )
});

/// EXIF orientation of a decoded window.
pub static ORIENT: LazyLock<String> =
    LazyLock::new(|| with_constants("orient", include_str!("../../../shaders/orient.wgsl")));

/// Every shader, by file name.
pub static ALL: LazyLock<[(&str, &str); 7]> = LazyLock::new(|| {
    [
        ("huffman.wgsl", HUFFMAN.as_str()),
        ("sync_huffman.wgsl", SYNC_HUFFMAN.as_str()),
        ("idct.wgsl", IDCT.as_str()),
        ("color.wgsl", COLOR.as_str()),
        ("augment.wgsl", AUGMENT.as_str()),
        ("orient.wgsl", ORIENT.as_str()),
        ("mix.wgsl", MIX.as_str()),
    ]
});

//! Huffman decoding of JPEGs with restart markers, one restart interval at a time (and,
//! in [`sync`], of any baseline JPEG by self-synchronising subsequences): the
//! host half (the header parse, the interval scan, the decode tables in the lookup form
//! the device reads, the upload layout) and the scalar oracle of the device pass that
//! `shaders/huffman.wgsl` and `kernels/huffman.cu` port line by line.
//!
//! Restart markers split a scan's entropy-coded data into intervals that decode
//! independently (the DC predictions restart at zero), so every interval is one device
//! invocation. The host reads only the headers and finds the markers ([`RestartScan::parse`]);
//! it never decodes a Huffman code. What the device decodes is exactly what libjpeg's
//! `jpeg_read_coefficients` gives for a clean file; whatever is not clean is flagged in
//! the interval's status word ([`STATUS_OUT_OF_DATA`] and the others), and the sample is
//! then decoded on the host path, where libjpeg gives its verdict, so a damaged file is
//! judged the same on every backend.
//!
//! Written here rather than taken from a crate: the decode must run as WGSL and CUDA on
//! the device, bit for bit as this oracle does, and the scan must borrow the bytes and
//! never allocate on what a header claims.
//!
//! # What takes this path ([`RestartScan::parse`])
//! A baseline or extended sequential Huffman-coded 8-bit JPEG with a restart interval,
//! one scan holding every component (interleaved, or a single-component image), the
//! restart markers in sequence and as many intervals as the interval length implies,
//! then the end-of-image marker, and no header that libjpeg would warn about (extraneous
//! bytes, an unknown Adobe transform, a JFIF version other than 1). Anything else is
//! [`Ineligible`] and takes the host entropy decode.
//!
//! # Words (little-endian `u32`, as in [`super::coeffs`])
//! Offsets are word offsets from the start of the chunk the records are in, except byte
//! offsets, which are byte offsets from the same start. A chunk's header (see
//! `backend::device::decode`) gives in word 3 the component table offset, in word 8 the
//! number of intervals, in word 9 the interval table's word offset and in word 12 the most
//! blocks any of its intervals holds: the bound of the shader's block loop, the same for
//! every invocation (llvmpipe mis-masks the lanes of a loop whose bound differs from lane
//! to lane; each invocation skips the iterations past its own interval).
//!
//! - **Decode table** ([`TABLE_WORDS`] words, built by [`table_words`]): words 0-127 the
//!   8-bit lookahead, entry `e` in half `e % 2` (low half for even `e`) of word `e / 2`, a
//!   `u16` holding `length << 8 | symbol` for codes of at most 8 bits and 0 otherwise;
//!   words 128-145 `maxcode[l]` (`i32`, the largest code of length `l`, -1 when there is
//!   none; `l` = 0..17, 17 a sentinel); words 146-163 `valoffset[l]` (`i32`: a code `c` of
//!   length `l` is symbol `c + valoffset[l]` of the value list); words 164-227 the value
//!   list, four bytes a word, byte `i` in bits `8 * (i % 4)` of word `164 + i / 4`.
//! - **Scan record** ([`ScanDesc`], 16 words) per image.
//! - **Interval record** ([`IntervalDesc`], 8 words) per interval uploaded.
//! - **Entropy-coded bytes**: the intervals' bytes as in the file (byte stuffing kept,
//!   the markers left out), byte `b` of the chunk in bits `8 * (b % 4)` of word `b / 4`.
//!
//! Blocks are written to the coefficient buffer at the component record's `coef_offset`,
//! row-major over its region, 32 words a block: the layout of size 8 of
//! [`super::coeffs`] (the whole block), whatever the component's DCT output size, which
//! an entropy chunk's header word 11 (1) tells the IDCT. Blocks outside the region are
//! decoded (the bits must be read) and dropped.
#![doc(hidden)]

mod bits;
mod interval;
mod pack;
mod scan;
mod splice;
pub mod sync;
mod table;

use bits::Bits;
pub use interval::{decode_coefficients, huffman_interval};
pub use pack::{
    pack_entropy, pack_intervals, standalone_chunk, IntervalDesc, PackedEntropy, ScanDesc,
};
pub use scan::{RestartScan, ScanComponent};
pub use splice::splice_rows;
pub use sync::{decode_coefficients_sync, decode_sync_with};
pub use table::table_words;
use table::HuffSpec;

/// Words of one decode table.
pub const TABLE_WORDS: usize = 256;
/// Word of a decode table where `maxcode[0..18]` starts.
pub const MAXCODE: usize = 128;
/// Word of a decode table where `valoffset[0..18]` starts.
pub const VALOFFSET: usize = 146;
/// Word of a decode table where the value list starts.
pub const HUFFVAL: usize = 164;

/// Status bit: the interval's MCUs needed bits past the end of its data (libjpeg's
/// `JWRN_HIT_MARKER`).
pub const STATUS_OUT_OF_DATA: u32 = 1;
/// Status bit: 16 bits matched no code (`JWRN_HUFF_BAD_CODE`).
pub const STATUS_BAD_CODE: u32 = 2;
/// Status bit: whole bytes were left after the interval's last MCU (libjpeg counts them
/// as extraneous data before the next marker).
pub const STATUS_LEFTOVER: u32 = 4;
/// Status bit: a run of zeros went past coefficient 63.
pub const STATUS_OVERFLOW: u32 = 8;
/// Status bit: a block for which libjpeg's SIMD IDCT (the CPU decoder's) and the C code
/// the device ports may differ ([`super::idct::agrees_with_simd`]): only the CPU decoder
/// reproduces it.
pub const STATUS_SIMD_RANGE: u32 = 16;

/// Status bit: the synchronising decode ([`sync`]) did not synchronise within its
/// rounds (or ran out of its loop bound), so its decode cannot be trusted.
pub const STATUS_NO_SYNC: u32 = 32;

/// Why a JPEG does not take the device entropy path (it takes the host's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Ineligible(pub String);

fn no(why: impl Into<String>) -> Ineligible {
    Ineligible(why.into())
}

/// libjpeg's `jpeg_natural_order`: zigzag index to natural (row-major) index.
pub const NATURAL: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

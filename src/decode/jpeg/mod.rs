//! JPEG: a typed header scan of our own (`markers`) and libjpeg-turbo's decoder behind a
//! safe wrapper (`turbo`, private) with scaled, cropped and row-skipping decode; for the GPU
//! paths, host entropy decoding to DCT coefficients and their upload layout (`coeffs`),
//! with scalar oracles of the device stages (`idct`, `color`); lossless transcoding
//! to baseline with restart markers ([`add_restarts`]: what `stoker convert` writes).
//!
//! # Damaged files: what is refused, what is delivered with a warning
//!
//! libjpeg does not stop at most faults: it warns and goes on (filling what it cannot
//! decode with zero coefficients, which shows as grey). Every decode path (the CPU
//! decoder, and `read_coefficients` for the device paths) collects libjpeg's warnings
//! and, once the file is read, gives one verdict, a [`DecodeWarning`](crate::decode::DecodeWarning)
//! whose [`WarningKind`](crate::decode::WarningKind) says whether the pixels are affected:
//!
//! | libjpeg says | and | kind | strict | lenient |
//! | --- | --- | --- | --- | --- |
//! | `JWRN_HUFF_BAD_CODE`, `JWRN_ARITH_BAD_CODE`, `JWRN_MUST_RESYNC` (lost restart marker), `JWRN_BOGUS_PROGRESSION`, any other corrupt-data warning | | `Damaged` | refused | delivered, marked |
//! | `JWRN_HIT_MARKER` (the entropy decoder needed more data than its scan holds: a marker, or the end of the file, inside a scan's entropy-coded data) | | `Damaged` | refused | delivered, marked |
//! | `JWRN_JPEG_EOF` (the data ends without an end-of-image marker) | no `JWRN_HIT_MARKER`: every scan read was complete; Huffman-coded; progressive with the DC of every component received, or sequential with one scan of every component | `Incomplete` | delivered, marked | delivered, marked |
//! | `JWRN_JPEG_EOF` | otherwise (an arithmetic decoder fills missing data without a warning, so where its data ended is unknown; a sequential file that lacks a component's scan) | `Damaged` | refused | delivered, marked |
//! | `JWRN_EXTRANEOUS_DATA` (bytes skipped before a marker) | between two marker segments (outside entropy-coded data: our marker scan finds the same run), or at most 4 bytes after a scan's entropy-coded data (the padding some Motion-JPEG encoders write) | `Extraneous` | delivered, marked | delivered, marked |
//! | `JWRN_EXTRANEOUS_DATA` | more than 4 bytes after a scan's entropy-coded data: the unread tail of a scan whose corrupt data made the Huffman decoder finish early (libjpeg-turbo's fast Huffman path does not report bad codes, so this, or `JWRN_HIT_MARKER`, is how corrupt data shows) | `Damaged` | refused | delivered, marked |
//! | nothing | a progressive file whose coefficients are not all refined to their last bit (final scans missing, end marker present) | `Incomplete` | delivered, marked | delivered, marked |
//!
//! Strict decoding stops at the first warning that settles the verdict as `Damaged` (a
//! damage warning, or the end of an arithmetic-coded file's data) rather than reading
//! on: what a damaged file costs is what it decoded until then, not what its header
//! claims (a 44 KB file claiming 13370x13370 pixels would otherwise fill 536 MB of grey
//! rows, or coefficient blocks, before it is refused). The output buffer of a decode
//! grows as rows arrive for the same reason. Lenient decoding reads on and delivers the
//! grey: a damaged file then costs the full size its header claims, within the
//! [`Limits`](crate::decode::Limits) by design.
//!
//! When several apply, the most severe wins (`Damaged`, then an end of file, then
//! extraneous bytes). "Where the decoder stopped" comes from the Huffman decoder itself:
//! it raises `JWRN_HIT_MARKER` exactly when a scan's data ends before its last block,
//! so an end of data without it came at a scan boundary. A decode that stops before
//! the end of the data (a crop above the last row) judges only what it read; a file
//! that does not end with its end marker is therefore always decoded whole on the CPU
//! and never handed to a hardware decoder, so a file cut short is judged the same
//! whatever the crop and the backend.
//!
//! Limits: libjpeg cannot tell bytes appended after a scan's data from the tail of a
//! scan that a corruption made the decoder finish early (both are "extraneous bytes
//! before marker"): a corruption that ends a scan at most 4 bytes early is delivered as
//! `Extraneous` (marked, never silent), and appended garbage longer than that is
//! refused in strict mode. A corruption that decodes to valid codes of the right length
//! is invisible to every decoder. A crop that ends above the damage of a file that does
//! end with its end marker does not read, so does not see, it.

pub mod coeffs;
pub mod color;
pub mod huffman;
pub mod idct;
pub mod markers;
pub mod transcode;
pub(crate) mod turbo;

pub use transcode::{
    add_restarts, KeptReason, Restart, TranscodeCounts, TranscodeOptions, Transcoded,
};
#[doc(hidden)]
pub use turbo::read_coefficients;

//! Self-synchronising parallel Huffman decoding (after Weissenberger and Schmidt,
//! "Accelerating JPEG Decompression on GPUs"): the scalar oracle of a device decode that
//! needs no restart markers, which most JPEGs lack. [`huffman_interval`] decodes one
//! restart interval per invocation; here the entropy-coded data is cut into subsequences
//! of a fixed number of bits ([`SUBSEQUENCE_BITS`]), one thread each, whether or not the
//! file has restart markers.
//!
//! Written here rather than taken from a crate for the same reason as the rest of
//! [`super`]: the WGSL and CUDA ports must run it bit for bit as this oracle does, so
//! every pass is a function of one thread's index over `u32` word buffers (no 64-bit
//! integers, no recursion, loop bounds from the chunk header), and the driver
//! ([`decode_sync_with`]) runs the threads of each pass, and the rounds, exactly in the
//! order the device's dispatches would, sequential loops standing for the threads.
//! The ports are `shaders/sync_huffman.wgsl` and `kernels/sync_huffman.cu` (an entry
//! point per pass, the kernels `backend::device::Kernel::SYNC`, which run the batched
//! passes of [`batch_start`] and the others; the wgpu batch path plans them, the CUDA one
//! not yet). The CUDA port shares the table lookup, `extend` and the SIMD-range check with
//! the restart-interval kernel (`kernels/huffman_common.cuh`), and keeps each pass a
//! function of one thread's index over the chunk's buffers, as here, apart from the entry
//! point that finds the thread's sample in the batch table. The tests hold both to these
//! passes word for word, after every pass (`tests/common/executor/sync_huffman.rs`: on
//! lavapipe, on the CPU through the CUDA emulation, and on a CUDA device where there is
//! one).
//!
//! # Segments and subsequences
//! A *segment* is a restart interval (the whole scan for a file without restart markers:
//! [`RestartScan::parse_sync`]). Its bytes are un-stuffed on the host (every `FF 00`
//! becomes `FF`; the markers are left out), so a position in the data is a plain bit
//! index. Each segment is cut into subsequences of `S` bits (the last one of a segment
//! shorter; a segment of no bytes still has one); a subsequence never spans two segments.
//! Past the end of its segment the reader reads zero bits, as libjpeg fills zeros at a
//! marker.
//!
//! # The state
//! Between two symbols (a Huffman code and its extra bits) the decoder's state is a
//! *cursor*: `pos` (the bit of the next code), `b` (the block within the MCU, which
//! picks the component and so the tables) and `k` (the zigzag index of the next
//! coefficient in the block, 0 for the DC). The decode from a cursor depends on nothing
//! else, so two decodes that reach the same cursor agree from there on. A block belongs
//! to the subsequence in which its DC code starts.
//!
//! When every block of an MCU is decoded with the same tables (a one-component scan, or
//! components sharing their tables, header word 13 is then 1), `b` changes nothing in
//! the decode and the cursor holds it as 0: otherwise a decode that started with the
//! wrong `b` would find every code boundary of the true one with its `b` shifted, never
//! meet it, and the rounds would fix one subsequence at a time. So the records never
//! name a component: a subsequence's DC differences are summed by *phase* (its `i`-th
//! block into sum `i % bpm`), and only the scan, which knows each subsequence's first
//! block within the segment, and so each block's place in its MCU, turns them into
//! components.
//!
//! # Passes
//! 1. **Start** ([`sync_start`], a thread per subsequence): decode from the subsequence's
//!    first bit with the guess `b = 0, k = 0` (the truth for the first subsequence of a
//!    segment), symbol by symbol while the cursor is before the subsequence's end; record
//!    the start cursor, the exit cursor (the first at or past the end: it may lie in the
//!    next subsequence), the blocks whose DC it decoded and, by phase, the sums of their
//!    DC differences.
//! 2. **Sync rounds** ([`sync_round`], a thread per subsequence a round, the records
//!    double-buffered: a round reads one copy and writes the other). A thread whose
//!    start differs from its predecessor's exit (in the copy read) decodes its
//!    subsequence again from that exit and records the new decode. Once the
//!    predecessor's exit is true, so is the decode; in practice a wrong start
//!    synchronises within a few dozen bits, so the first round fixes nearly every record.
//!    The rounds stop after one in which no exit changed: then every start equals its
//!    predecessor's exit, and by induction from the segments' first subsequences every
//!    record is true. A record still changing after `max_rounds` rounds
//!    ([`MAX_SYNC_ROUNDS`]) sets [`STATUS_NO_SYNC`]: the sample takes the host path.
//! 3. **Scan** ([`sync_scan`], a thread per segment here; a parallel scan on the device
//!    gives the same integers): the exclusive prefix sums over the segment's
//!    subsequences of the block counts (each subsequence's first block within the
//!    segment) and of the DC differences per scan component (the DC predictions at its
//!    first block; they restart at each segment, as at a restart marker).
//! 4. **Write** ([`sync_write`], a thread per subsequence): decode again from the true
//!    start, skip the end of the predecessor's last block, and write every block whose
//!    DC starts before the subsequence's end, finishing the last one past it, with the
//!    DC predictions running on from the scanned ones, to the coefficient buffer (32
//!    words a block, as in [`super`]; blocks outside their component's block grid are
//!    dropped).
//!
//! # Crops: the write limit
//! A crop needs the scan's blocks up to its last MCU (MCU order), no more. Header word
//! 15 ([`set_sync_limit`]) says how many blocks of the scan the write pass decodes: a
//! subsequence whose first block (known after the scan) lies at or past it returns at
//! once ([`sync_skips`]; [`run_sync_chunk`] counts them), and the one holding the last
//! needed block stops after it. The start, the rounds and the scan still run over every
//! subsequence: a subsequence's first block is only known once the scan has summed
//! every block before it, and the rounds must synchronise the subsequences above the
//! limit, whose decode starts from wherever the one before it ended. What is skipped is
//! not judged either (no status from it): the device path sets a limit only for a file
//! whose whole verdict is already known clean (`pack_sync_window` with `all` false),
//! so damage below a crop is reported exactly as the CPU path reports it (the whole
//! file's verdict, found by a whole decode before its first crop).
//!
//! The decode past the segment's last block (its padding bits, then zeros) makes blocks
//! that do not exist; they come after every real block, so they change neither the
//! offsets nor the DC predictions of real ones, and pass 4 writes only the segment's
//! first `blocks` blocks.
//!
//! # Status ([`super::STATUS_OUT_OF_DATA`] and the others)
//! Judged as [`huffman_interval`] judges an interval: pass 4 flags a code not in the
//! table, a run past coefficient 63 and a block the SIMD IDCT may treat differently,
//! for real blocks only; the thread that writes a segment's last block flags data
//! read past the segment's end ([`STATUS_OUT_OF_DATA`]) or a whole byte left after
//! it ([`STATUS_LEFTOVER`]: more blocks in the data than the frame has); the scan flags
//! a segment whose data holds fewer blocks than the frame ([`STATUS_OUT_OF_DATA`]); the
//! driver flags rounds that did not converge ([`STATUS_NO_SYNC`]). A flagged sample
//! takes the host path, where libjpeg judges it.
//!
//! # Words
//! One chunk of `u32` words ([`pack_sync`]), offsets in words from its start:
//! - **Header** ([`SYNC_HEADER`] words): 0 segments, 1 subsequences, 2 `S` (bits, a
//!   multiple of 32), 3 blocks per MCU, 4 the scan record, 5 the component table, 6 the
//!   MCU block map, 7 the segment table, 8 the subsequence table, 9 the data, 10 the
//!   coefficient buffer's words, 11 the scan's blocks (MCUs times blocks per MCU), 12
//!   the most sync rounds, 13 the cycle of the cursor's `b` (1 when every block of an
//!   MCU has the same tables, else the blocks per MCU), 14 the region table, 15 the
//!   write limit: the scan's first blocks (MCU order) the write pass decodes (word 11 as
//!   packed; [`set_sync_limit`]).
//! - **Scan record**: a [`ScanDesc`] (its table offsets into this chunk).
//! - **Component table**: per frame component, 4 words: its first word in the
//!   coefficient buffer, its width and height in blocks, its quantisation table.
//! - **MCU block map**: 10 words, block `b` of an MCU: its scan component `j` |
//!   `x << 8` | `y << 16` (its place in the component's `h x v` blocks of the MCU).
//! - **Quantisation tables** (32 words, natural order, two `u16` a word, low half
//!   first) and **decode tables** ([`super::TABLE_WORDS`] words each, [`table_words`]).
//! - **Segment table** ([`SEGMENT_WORDS`] each): first bit, end bit, first block of the
//!   scan (MCU order), blocks, first subsequence, subsequences.
//! - **Subsequence table** ([`SUBSEQUENCE_WORDS`] each): segment, first bit, end bit,
//!   bit 0: the first of its segment.
//! - **Region table** (4 words per frame component): `bx0, by0, bw, bh`, the blocks the
//!   write pass stores, row by row from the component's first word (the whole block
//!   grid as packed; [`set_sync_regions`] narrows it to a window's, as the device entropy
//!   path stores them, [`pack_sync_window`]).
//! - **Data**: the un-stuffed bytes of every segment in a row, big-endian in the words
//!   (byte `i` in bits `24 - 8 * (i % 4)` of word `i / 4`, so bit `p` is bit
//!   `31 - p % 32` of word `p / 32`), then a zero word.
//!
//! The records ([`RECORD_WORDS`] per subsequence, two copies for the rounds): 0-1 the
//! start cursor (`pos`, `b | k << 8`), 2-3 the exit cursor, 4 the blocks, 5-14 the DC
//! difference sums by phase; the scan adds 15 the first block within the segment and
//! 16-19 the DC predictions per scan component at it.
//!
//! # Batches
//! On the device one dispatch per pass serves every sample of a batch ([`batch_start`],
//! [`batch_round`], [`batch_scan`], [`batch_write`]; [`decode_batch`] runs them as the
//! device does): the chunks lie anywhere in the batch's words, and a *batch table*
//! ([`BATCH_WORDS`] words a sample, [`BatchEntry`]) gives each sample's chunk, its first
//! subsequence and segment in the batch's numbering (a thread finds its sample by a
//! binary search over them), and where its records, coefficients and status words are.
//! Every chunk is read relative to its first word, so the per-chunk passes run
//! unchanged. The host enqueues a fixed number of round dispatches
//! ([`BatchParams::rounds`]) without reading anything back: each sample keeps a changed
//! word per round, and a round after one that changed none of its exits only copies its
//! records; the scan sets [`STATUS_NO_SYNC`] for a sample whose last round still changed
//! one, in the status word read back with the restart-interval decode's.
#![doc(hidden)]

mod batch;
mod pack;
mod pass;
mod window;

pub use batch::{
    batch_round, batch_scan, batch_start, batch_write, decode_batch, pack_batch, BatchEntry,
    BatchParams, BATCH_WORDS,
};
pub use pack::{pack_sync, set_sync_limit, set_sync_regions};
pub use pass::{sync_round, sync_scan, sync_skips, sync_start, sync_write};
pub use window::pack_sync_window;

use super::*;
use crate::decode::jpeg::coeffs::Coefficients;
use crate::decode::DecodeError;

/// Bits of entropy-coded data per subsequence (the default `S`).
pub const SUBSEQUENCE_BITS: u32 = 1024;
/// The most sync rounds before a decode is given up ([`STATUS_NO_SYNC`]).
pub const MAX_SYNC_ROUNDS: u32 = 64;
/// Words of the chunk header.
pub const SYNC_HEADER: usize = 16;
/// Words of a segment record.
pub const SEGMENT_WORDS: usize = 8;
/// Words of a subsequence record.
pub const SUBSEQUENCE_WORDS: usize = 4;
/// Words of a subsequence's decode record.
pub const RECORD_WORDS: usize = 24;
/// Most blocks in an MCU (the MCU block map's words).
pub const MAX_MCU_BLOCKS: usize = 10;

/// The whole image's coefficients decoded by the synchronising decode with subsequences
/// of [`SUBSEQUENCE_BITS`] bits, as `jpeg_read_coefficients` gives them for a clean
/// file, into `out`. Returns the OR of the status words (0: clean). `scan` comes from
/// [`RestartScan::parse_sync`] (or [`RestartScan::parse`]); check the pixel limits
/// first: this allocates the image's blocks.
pub fn decode_coefficients_sync(
    scan: &RestartScan,
    bytes: &[u8],
    out: &mut Coefficients,
) -> Result<u32, DecodeError> {
    decode_sync_with(scan, bytes, SUBSEQUENCE_BITS, MAX_SYNC_ROUNDS, out)
}

/// [`decode_coefficients_sync`] with subsequences of `subsequence_bits` bits (a
/// positive multiple of 32) and at most `max_rounds` sync rounds: the passes run as the
/// device runs them, a loop over the threads for each.
pub fn decode_sync_with(
    scan: &RestartScan,
    bytes: &[u8],
    subsequence_bits: u32,
    max_rounds: u32,
    out: &mut Coefficients,
) -> Result<u32, DecodeError> {
    let mut chunk = Vec::new();
    pack_sync(scan, bytes, subsequence_bits, max_rounds, &mut chunk)?;
    let run = run_sync_chunk(&chunk);
    let comp_table = chunk[5] as usize;
    let first: Vec<usize> = (0..scan.header.components.len())
        .map(|ci| chunk[comp_table + 4 * ci] as usize)
        .collect();
    super::interval::unpack_blocks(scan, &run.coefs, &first, out)?;
    Ok(run.status)
}

/// What [`run_sync_chunk`] gives: the OR of the status words, the coefficient buffer
/// (header word 10's words), and the subsequences the write pass decoded and skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncRun {
    /// The OR of the status words (0: clean).
    pub status: u32,
    /// The coefficient buffer.
    pub coefs: Vec<u32>,
    /// Subsequences the write limit did not skip (those that start in a segment's
    /// padding among them: they write nothing, limit or not).
    pub written: u32,
    /// Subsequences the write limit skipped: their first block is one of their
    /// segment's but past the limit ([`set_sync_limit`], [`sync_skips`]).
    pub skipped: u32,
}

/// Runs the passes on a chunk of [`pack_sync`] (its regions and write limit as set) as
/// the device runs them, a loop over the threads for each: the start, the rounds until
/// one changes nothing (at most header word 12; else [`STATUS_NO_SYNC`]), the scan, the
/// write.
pub fn run_sync_chunk(chunk: &[u32]) -> SyncRun {
    let (segments, subs) = (chunk[0], chunk[1] as usize);
    let mut records = vec![0u32; 2 * subs * RECORD_WORDS];
    let (a, b) = records.split_at_mut(subs * RECORD_WORDS);
    for s in 0..subs as u32 {
        sync_start(chunk, a, s);
    }
    let mut status = STATUS_NO_SYNC;
    let mut last_in_a = true;
    for round in 0..chunk[12] {
        let (prev, next) = if round % 2 == 0 {
            (&*a, &mut *b)
        } else {
            (&*b, &mut *a)
        };
        let mut changed = 0;
        for s in 0..subs as u32 {
            changed |= sync_round(chunk, prev, next, s);
        }
        last_in_a = round % 2 == 1;
        if changed == 0 {
            status = 0;
            break;
        }
    }
    let rec = if last_in_a { a } else { b };
    for g in 0..segments {
        status |= sync_scan(chunk, rec, g);
    }
    let mut run = SyncRun {
        coefs: vec![0u32; chunk[10] as usize],
        ..SyncRun::default()
    };
    for s in 0..subs as u32 {
        if sync_skips(chunk, rec, s) {
            run.skipped += 1;
        } else {
            run.written += 1;
        }
        status |= sync_write(chunk, rec, &mut run.coefs, s);
    }
    run.status = status;
    run
}

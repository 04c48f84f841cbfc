//! Huffman decoding of restart intervals (`huffman`) against its scalar oracle
//! (`decode::jpeg::huffman::huffman_interval`), word for word: every coefficient word of
//! the buffer (those of the regions and the garbage around them) and every status word,
//! for random JPEGs with restart markers (every sampling, random sizes, interval lengths,
//! windows and IDCT scales; several images a chunk), damaged ones (flipped bits, bytes cut
//! or added inside an interval or at the end of each, intervals cut short in the chunk),
//! ones requantised so that their blocks fall on both sides of the SIMD-agreement check,
//! and hand-encoded ones whose blocks sit at its edges (samples of 511 and 512).

use stoker::backend::device::launch::{grid, PARAM_WORDS};
use stoker::backend::device::{Binding, Buffer, Kernel, Launch, Step};
use stoker::decode::jpeg::huffman::{
    huffman_interval, pack_entropy, PackedEntropy, RestartScan, STATUS_BAD_CODE, STATUS_LEFTOVER,
    STATUS_OUT_OF_DATA, STATUS_SIMD_RANGE,
};
use stoker::decode::jpeg::idct::agrees_with_simd;
use stoker::decode::jpeg::{color, read_coefficients};

use super::{bytes_to_words, garbage, words_to_bytes, Buffers, Executor};
use crate::common::{mutant, restart_jpeg, scan_start, TestRng};

use crate::common::RESTART_SAMPLINGS as SAMPLINGS;

/// Words of a chunk header.
const CHUNK_HEADER: usize = 64;

/// Garbage words after the coefficient area and the status words, which nothing may
/// write.
const SLACK: usize = 67;

/// A component record's region in a chunk: `(coef_offset, quant_offset, blocks)`.
type Region = (usize, usize, usize);

/// A chunk of several images as the device pass reads it, and the buffers it writes.
struct Chunk {
    words: Vec<u32>,
    coef_words: usize,
    intervals: usize,
    /// Per image: its label and its components' regions.
    regions: Vec<(String, Vec<Region>)>,
}

/// Lays `images` out in one chunk (header words 3, 8, 9 and 10; the component table, the
/// scan records, the interval table, the data), each image's coefficient area and status
/// words after the previous one's. The interval records are in reverse order, so that an
/// invocation's status word is its record's, not its own index.
fn chunk_of(images: &[(String, PackedEntropy)]) -> Chunk {
    let ncomp: usize = images.iter().map(|(_, p)| p.packed.components.len()).sum();
    let nint: usize = images.iter().map(|(_, p)| p.intervals.len()).sum();
    let comp_table = CHUNK_HEADER;
    let scans = comp_table + 16 * ncomp;
    let iv_table = scans + 16 * images.len();
    let mut data_at = iv_table + 8 * nint;
    let mut words = vec![0u32; data_at];
    words[0] = images.len() as u32;
    words[1] = ncomp as u32;
    words[3] = comp_table as u32;
    words[8] = nint as u32;
    words[9] = iv_table as u32;
    let (mut comp, mut status, mut coef) = (0usize, 0usize, 0usize);
    let mut regions = Vec::new();
    for (n, (label, p)) in images.iter().enumerate() {
        let scan_at = scans + 16 * n;
        let (scan, ivs, comps) = p.placed(
            data_at as u32,
            scan_at as u32,
            comp as u32,
            status as u32,
            coef as u32,
        );
        let mut r = Vec::new();
        for (i, c) in comps.iter().enumerate() {
            let at = comp_table + 16 * (comp + i);
            words[at..at + 16].copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(c)));
            r.push((
                c.coef_offset as usize,
                c.quant_offset as usize,
                (c.bw * c.bh) as usize,
            ));
        }
        regions.push((label.clone(), r));
        words[scan_at..scan_at + 16]
            .copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(&scan)));
        for (i, iv) in ivs.iter().enumerate() {
            let at = iv_table + 8 * (nint - 1 - (status + i));
            words[at..at + 8].copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(iv)));
        }
        words.extend_from_slice(&p.packed.data);
        data_at += p.packed.data.len();
        comp += comps.len();
        status += ivs.len();
        coef += p.coef_words as usize;
    }
    words[10] = coef as u32;
    words[12] = images
        .iter()
        .map(|(_, p)| p.max_interval_blocks())
        .max()
        .unwrap_or(0);
    Chunk {
        words,
        coef_words: coef,
        intervals: nint,
        regions,
    }
}

/// What the oracle writes over garbage buffers: the coefficient buffer and the status
/// words.
fn oracle(c: &Chunk) -> (Vec<u32>, Vec<u32>) {
    let mut coefs = bytes_to_words(&garbage(4 * (c.coef_words + SLACK) as u64));
    let mut status = bytes_to_words(&garbage(4 * (c.intervals + SLACK) as u64));
    let iv_table = c.words[9] as usize;
    for i in 0..c.intervals as u32 {
        let s = huffman_interval(&c.words, &mut coefs, i);
        status[c.words[iv_table + 8 * i as usize + 5] as usize] = s;
    }
    (coefs, status)
}

/// Runs the `huffman` launch over `c` on garbage buffers: the coefficient buffer and the
/// status words. A `square` grid has as few workgroups along x as along y (so some along
/// y, and some invocations past the last interval).
fn run(e: &dyn Executor, c: &Chunk, square: bool) -> (Vec<u32>, Vec<u32>) {
    let chunk = words_to_bytes(&c.words);
    let coef_bytes = 4 * (c.coef_words + SLACK) as u64;
    let status_bytes = 4 * (c.intervals + SLACK) as u64;
    let groups = (c.intervals as u64).div_ceil(u64::from(Kernel::Huffman.workgroup()));
    let per_dim = if square {
        (1..).find(|n| n * n >= groups).expect("a side")
    } else {
        e.limits().per_dim
    };
    let launch = Launch {
        kernel: Kernel::Huffman,
        grid: grid(c.intervals as u64, Kernel::Huffman.workgroup(), per_dim).expect("grid"),
        bindings: vec![
            Binding {
                buffer: Buffer::DecodeInput,
                offset: 0,
                size: chunk.len() as u64,
            },
            Binding {
                buffer: Buffer::Coefficients,
                offset: 0,
                size: coef_bytes,
            },
            Binding {
                buffer: Buffer::EntropyStatus,
                offset: 0,
                size: status_bytes,
            },
        ],
        params: [0; PARAM_WORDS],
    };
    let mut buffers = Buffers::default()
        .with(Buffer::DecodeInput, chunk)
        .with(Buffer::Coefficients, garbage(coef_bytes))
        .with(Buffer::EntropyStatus, garbage(status_bytes));
    e.run(&[Step::Launch(launch)], &mut buffers);
    (
        bytes_to_words(buffers.get(Buffer::Coefficients)),
        bytes_to_words(buffers.get(Buffer::EntropyStatus)),
    )
}

/// Runs `c` on `e` and compares both buffers with the oracle's, word for word; returns the
/// oracle's (the same) buffers.
fn check(e: &dyn Executor, c: &Chunk, square: bool, what: &str) -> (Vec<u32>, Vec<u32>) {
    let (coefs, status) = oracle(c);
    let (got_coefs, got_status) = run(e, c, square);
    let iv_table = c.words[9] as usize;
    for i in 0..c.intervals {
        let s = c.words[iv_table + 8 * i + 5] as usize;
        assert_eq!(
            got_status[s],
            status[s],
            "{what}: {}: status of the interval at record {i} (first MCU {}, {} MCUs)",
            e.name(),
            c.words[iv_table + 8 * i + 1],
            c.words[iv_table + 8 * i + 2],
        );
    }
    assert_eq!(got_status, status, "{what}: {}: status words", e.name());
    if got_coefs != coefs {
        let at = got_coefs
            .iter()
            .zip(&coefs)
            .position(|(a, b)| a != b)
            .expect("a difference");
        let place = c
            .regions
            .iter()
            .flat_map(|(label, r)| r.iter().enumerate().map(move |(ci, x)| (label, ci, x)))
            .find(|(_, _, r)| at >= r.0 && at < r.0 + 32 * r.2)
            .map(|(label, ci, r)| format!("{label}: component {ci} block {}", (at - r.0) / 32))
            .unwrap_or_else(|| "outside every region".into());
        panic!(
            "{what}: {}: coefficient word {at} ({place}) is {:#010x}, the oracle's {:#010x}",
            e.name(),
            got_coefs[at],
            coefs[at]
        );
    }
    (coefs, status)
}

/// A random restart JPEG for case `case` (its sampling), and its label.
fn random_restart_jpeg(
    rng: &mut TestRng,
    case: usize,
    max_w: u64,
    max_h: u64,
) -> (Vec<u8>, String) {
    let (samp, gray) = SAMPLINGS[case % SAMPLINGS.len()];
    let (w, h) = (1 + rng.below(max_w) as u32, 1 + rng.below(max_h) as u32);
    let (mcus, rows) = if rng.below(2) == 0 {
        (1 + rng.below(40) as u32, 0)
    } else {
        (0, 1 + rng.below(3) as i32)
    };
    let jpeg = restart_jpeg(rng, w, h, samp, gray, mcus, rows);
    let label = format!(
        "image {case}: {w}x{h} sampling {samp:?} gray {gray}, restart {mcus} MCUs / {rows} rows"
    );
    (jpeg, label)
}

/// A random non-empty window `[x0, y0, x1, y1)` of a `w x h` image, or all of it.
fn random_window(rng: &mut TestRng, (w, h): (u32, u32)) -> [u32; 4] {
    if rng.below(3) == 0 {
        return [0, 0, w, h];
    }
    let x0 = rng.below(u64::from(w)) as u32;
    let y0 = rng.below(u64::from(h)) as u32;
    let x1 = x0 + 1 + rng.below(u64::from(w - x0)) as u32;
    let y1 = y0 + 1 + rng.below(u64::from(h - y0)) as u32;
    [x0, y0, x1, y1]
}

/// `jpeg` packed at a random scale and window, labelled.
fn packed(
    rng: &mut TestRng,
    jpeg: &[u8],
    scan: &RestartScan,
    label: &str,
) -> (String, PackedEntropy) {
    let scale = [1u32, 2, 4, 8][rng.below(4) as usize];
    let window = random_window(rng, scan.header.scaled_size(scale));
    let mut p = PackedEntropy::default();
    pack_entropy(scan, jpeg, scale, window, &mut p).expect("pack_entropy");
    (format!("{label}, 1/{scale} {window:?}"), p)
}

pub fn huffman_matches_the_oracle_on_random_restart_jpegs(e: &dyn Executor) {
    let mut rng = TestRng(0x4AFF_0001);
    let mut images = 0;
    for chunk in 0..6 {
        let mut batch = Vec::new();
        for k in 0..6 {
            let case = chunk * 6 + k;
            let (jpeg, label) = random_restart_jpeg(&mut rng, case, 400, 400);
            let scan = RestartScan::parse(&jpeg).unwrap_or_else(|e| panic!("{label}: {e}"));
            for _ in 0..2 {
                batch.push(packed(&mut rng, &jpeg, &scan, &label));
            }
            images += 1;
        }
        let c = chunk_of(&batch);
        let (_, status) = check(e, &c, chunk % 2 == 0, &format!("chunk {chunk}"));
        // Clean files: the oracle flags nothing (its own test holds it to libjpeg).
        assert!(
            status[..c.intervals].iter().all(|&s| s == 0),
            "chunk {chunk}: a clean interval flagged: {:?}",
            &status[..c.intervals]
        );
    }
    eprintln!("{}: {images} restart JPEGs, every interval equal", e.name());
}

/// `jpeg` with `n` bytes from `at` removed, or `insert` put there.
fn spliced(jpeg: &[u8], at: usize, n: usize, insert: &[u8]) -> Vec<u8> {
    let mut b = jpeg[..at].to_vec();
    b.extend_from_slice(insert);
    b.extend_from_slice(&jpeg[at + n..]);
    b
}

pub fn huffman_matches_the_oracle_on_damaged_intervals(e: &dyn Executor) {
    let mut rng = TestRng(0x4AFF_0002);
    let mut seen = 0u32;
    let (mut flagged, mut total, mut refused) = (0, 0, 0);
    for chunk in 0..8 {
        let mut batch = Vec::new();
        for k in 0..10 {
            let case = chunk * 10 + k;
            let (src, label) = random_restart_jpeg(&mut rng, case, 160, 120);
            let clean = RestartScan::parse(&src).expect("parse");
            let bad = match rng.below(6) {
                0 | 1 => mutant(&src, &mut rng),
                kind @ (2 | 3) => {
                    // At the end of every interval, one byte more (whole bytes left over,
                    // or just 8 bits where the last MCU ended on a byte boundary), or one
                    // fewer (the MCUs run out of data, or just reach its end).
                    let mut b = src.clone();
                    for iv in clean.intervals.iter().rev() {
                        b = if kind == 2 {
                            spliced(&b, iv.end, 0, &[rng.below(255) as u8])
                        } else if !iv.is_empty() {
                            spliced(&b, iv.end - 1, 1, &[])
                        } else {
                            b
                        };
                    }
                    b
                }
                kind => {
                    // Bytes cut from, or added to, one interval.
                    let iv = &clean.intervals[rng.below(clean.intervals.len() as u64) as usize];
                    let at = iv.start + rng.below((iv.len() + 1) as u64) as usize;
                    if kind == 4 {
                        let n = rng.below((iv.end - at + 1) as u64) as usize;
                        spliced(&src, at, n, &[])
                    } else {
                        let add: Vec<u8> = (0..1 + rng.below(6))
                            .map(|_| rng.below(255) as u8)
                            .collect();
                        spliced(&src, at, 0, &add)
                    }
                }
            };
            let Ok(scan) = RestartScan::parse(&bad) else {
                refused += 1;
                continue;
            };
            let (label, mut p) = packed(&mut rng, &bad, &scan, &label);
            // And some intervals cut short in the chunk itself (the bytes after their end
            // are there, and must not be read).
            for iv in p.intervals.iter_mut() {
                if rng.below(6) == 0 {
                    iv.end = iv.start + rng.below(u64::from(iv.end - iv.start) + 1) as u32;
                }
            }
            batch.push((label, p));
        }
        let c = chunk_of(&batch);
        let (_, status) = check(e, &c, false, &format!("damaged chunk {chunk}"));
        for &s in &status[..c.intervals] {
            seen |= s;
            flagged += usize::from(s != 0);
        }
        total += c.intervals;
    }
    eprintln!(
        "{}: {total} damaged intervals, {flagged} flagged (bits {seen:#x}), {refused} files \
         refused by the scan",
        e.name()
    );
    for bit in [STATUS_OUT_OF_DATA, STATUS_BAD_CODE, STATUS_LEFTOVER] {
        assert!(
            seen & bit != 0,
            "no interval flagged {bit:#x} (seen {seen:#x})"
        );
    }
}

/// `jpeg` with every quantisation table replaced: entry `k` (zigzag order) by
/// `value(k)`, written with 16-bit precision when `wide`. The entropy-coded data is kept,
/// so the coefficients dequantise to other (larger) values.
fn requantised(jpeg: &[u8], wide: bool, mut value: impl FnMut(usize) -> u16) -> Vec<u8> {
    let end = scan_start(jpeg).expect("a scan");
    let mut out = jpeg[..2].to_vec();
    let mut i = 2;
    while i < end {
        assert_eq!(jpeg[i], 0xFF, "a marker");
        let marker = jpeg[i + 1];
        let len = usize::from(u16::from_be_bytes([jpeg[i + 2], jpeg[i + 3]]));
        let body = &jpeg[i + 4..i + 2 + len];
        if marker == 0xDB {
            let mut b = body;
            let mut new = Vec::new();
            while !b.is_empty() {
                let size = if b[0] >> 4 == 0 { 64 } else { 128 };
                new.push(u8::from(wide) << 4 | (b[0] & 15));
                for k in 0..64 {
                    let v = value(k).max(1);
                    if wide {
                        new.extend_from_slice(&v.to_be_bytes());
                    } else {
                        new.push(v.min(255) as u8);
                    }
                }
                b = &b[1 + size..];
            }
            out.extend_from_slice(&[0xFF, 0xDB]);
            out.extend_from_slice(&((new.len() + 2) as u16).to_be_bytes());
            out.extend_from_slice(&new);
        } else {
            out.extend_from_slice(&jpeg[i..i + 2 + len]);
        }
        i += 2 + len;
    }
    out.extend_from_slice(&jpeg[end..]);
    out
}

pub fn huffman_flags_blocks_past_the_simd_range_as_the_oracle_does(e: &dyn Executor) {
    let mut rng = TestRng(0x4AFF_0003);
    let mut batch = Vec::new();
    for case in 0..16 {
        let (src, label) = random_restart_jpeg(&mut rng, case, 120, 90);
        let (wide, q) = match case % 4 {
            0 => (false, 255),
            1 => (false, [4u16, 8, 16, 32, 64][rng.below(5) as usize]),
            2 => (false, 0),
            _ => (true, 0),
        };
        let jpeg = requantised(&src, wide, |_| match (wide, q) {
            (false, 0) => 1 + rng.below(255) as u16,
            (true, _) => {
                // Some entries negative as a short, some far above 255.
                [1u16, 300, 2000, 0x8001, 0xFFFF][rng.below(5) as usize]
            }
            _ => q,
        });
        let scan = RestartScan::parse(&jpeg).unwrap_or_else(|e| panic!("{label}: {e}"));
        let label = format!("{label}, quantiser {q} (16-bit {wide})");
        batch.push(packed(&mut rng, &jpeg, &scan, &label));
    }
    let c = chunk_of(&batch);
    let (coefs, status) = check(e, &c, true, "requantised");
    // Both sides of the check: blocks under the quick bound, past it and in range, and
    // out of range; and intervals flagged and not.
    let (mut quick, mut agree, mut disagree) = (0, 0, 0);
    for (_, r) in &c.regions {
        for &(off, quant, blocks) in r {
            let mut q = [0u16; 64];
            for (z, v) in q.iter_mut().enumerate() {
                *v = (c.words[quant + z / 2] >> (16 * (z % 2))) as u16;
            }
            for b in 0..blocks {
                let mut block = [0i16; 64];
                for (z, v) in block.iter_mut().enumerate() {
                    *v = (coefs[off + 32 * b + z / 2] >> (16 * (z % 2))) as u16 as i16;
                }
                let sum: u64 = (0..64)
                    .map(|z| (i32::from(block[z]) * i32::from(q[z] as i16)).unsigned_abs() as u64)
                    .sum();
                match (agrees_with_simd(&block, &q), sum <= 2000) {
                    (true, true) => quick += 1,
                    (true, false) => agree += 1,
                    (false, _) => disagree += 1,
                }
            }
        }
    }
    let flagged = status[..c.intervals]
        .iter()
        .filter(|&&s| s & STATUS_SIMD_RANGE != 0)
        .count();
    eprintln!(
        "{}: blocks {quick} under the quick bound, {agree} past it in range, {disagree} out \
         of range; {flagged} of {} intervals flagged",
        e.name(),
        c.intervals
    );
    assert!(
        quick > 0 && agree > 0 && disagree > 0,
        "both sides of the check"
    );
    assert!(
        flagged > 0 && flagged < c.intervals,
        "intervals flagged and not"
    );
}

/// Bits into bytes, MSB first, with JPEG's byte stuffing (FF 00).
#[derive(Default)]
struct BitWriter {
    out: Vec<u8>,
    acc: u32,
    n: u32,
}

impl BitWriter {
    fn put(&mut self, v: u32, bits: u32) {
        for i in (0..bits).rev() {
            self.acc = self.acc << 1 | (v >> i) & 1;
            self.n += 1;
            if self.n == 8 {
                self.out.push(self.acc as u8);
                if self.acc == 0xFF {
                    self.out.push(0);
                }
                (self.acc, self.n) = (0, 0);
            }
        }
    }

    /// To the byte boundary with one bits, as encoders pad.
    fn pad(&mut self) {
        while self.n != 0 {
            self.put(1, 1);
        }
    }
}

/// The size category of `v` and its `s` bits (negative values as `v + 2^s - 1`).
fn category(v: i32) -> (u32, u32) {
    let s = 32 - v.unsigned_abs().leading_zeros();
    let bits = if v < 0 {
        (v + (1 << s) - 1) as u32
    } else {
        v as u32
    };
    (s, bits)
}

/// A baseline gray JPEG of `bw x bh` given blocks (natural order, row-major), the 16-bit
/// quantisation table `quant` (natural order) and a restart marker every `restart` blocks,
/// with tables of its own: the DC symbols 0-15 as 5-bit codes, every AC symbol (EOB, ZRL,
/// run/size 0-15/1-15) as an 8-bit code. Coefficients must be within 15 bits, and DC
/// differences too.
fn encode_gray(bw: u32, bh: u32, blocks: &[[i16; 64]], quant: &[u16; 64], restart: u32) -> Vec<u8> {
    use stoker::decode::jpeg::huffman::NATURAL;
    let ac_symbols: Vec<u8> = std::iter::once(0x00)
        .chain(std::iter::once(0xF0))
        .chain((0..16u8).flat_map(|r| (1..16u8).map(move |s| r << 4 | s)))
        .collect();
    let ac_code = |sym: u8| ac_symbols.iter().position(|&v| v == sym).expect("symbol") as u32;
    let segment = |out: &mut Vec<u8>, marker: u8, body: &[u8]| {
        out.extend_from_slice(&[0xFF, marker]);
        out.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
        out.extend_from_slice(body);
    };
    let mut out = vec![0xFF, 0xD8];
    let mut dqt = vec![0x10];
    for k in 0..64 {
        dqt.extend_from_slice(&quant[usize::from(NATURAL[k])].to_be_bytes());
    }
    segment(&mut out, 0xDB, &dqt);
    let (w, h) = ((8 * bw) as u16, (8 * bh) as u16);
    let mut sof = vec![8];
    sof.extend_from_slice(&h.to_be_bytes());
    sof.extend_from_slice(&w.to_be_bytes());
    sof.extend_from_slice(&[1, 1, 0x11, 0]);
    segment(&mut out, 0xC0, &sof);
    let mut dht = vec![0x00];
    let mut counts = [0u8; 16];
    counts[4] = 16;
    dht.extend_from_slice(&counts);
    dht.extend(0..16u8);
    dht.push(0x10);
    let mut counts = [0u8; 16];
    counts[7] = ac_symbols.len() as u8;
    dht.extend_from_slice(&counts);
    dht.extend_from_slice(&ac_symbols);
    segment(&mut out, 0xC4, &dht);
    segment(&mut out, 0xDD, &(restart as u16).to_be_bytes());
    segment(&mut out, 0xDA, &[1, 1, 0x00, 0, 63, 0]);
    let mut bits = BitWriter::default();
    let mut pred = 0i32;
    for (n, block) in blocks.iter().enumerate() {
        if n > 0 && (n as u32).is_multiple_of(restart) {
            bits.pad();
            let k = (n as u32 / restart - 1) % 8;
            bits.out.extend_from_slice(&[0xFF, 0xD0 + k as u8]);
            pred = 0;
        }
        let (s, v) = category(i32::from(block[0]) - pred);
        pred = i32::from(block[0]);
        bits.put(s, 5);
        bits.put(v, s);
        let mut run = 0;
        for k in 1..64 {
            let c = i32::from(block[usize::from(NATURAL[k])]);
            if c == 0 {
                run += 1;
                continue;
            }
            while run >= 16 {
                bits.put(ac_code(0xF0), 8);
                run -= 16;
            }
            let (s, v) = category(c);
            bits.put(ac_code((run << 4 | s) as u8), 8);
            bits.put(v, s);
            run = 0;
        }
        if run > 0 {
            bits.put(ac_code(0x00), 8);
        }
    }
    bits.pad();
    out.extend_from_slice(&bits.out);
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

/// Blocks at the edges of the SIMD-agreement check, encoded by hand: flat blocks whose
/// samples are 511 or 512 (-512 or -513) at every IDCT size, and flat ones with a few large
/// coefficients more, past the quick bound, in range at some sizes and not at others.
pub fn huffman_checks_blocks_at_the_edges_of_the_simd_range_as_the_oracle_does(e: &dyn Executor) {
    let mut rng = TestRng(0x4AFF_0004);
    let (mut batch, mut written) = (Vec::new(), Vec::new());
    for case in 0..10 {
        let (bw, bh) = (1 + rng.below(24) as u32, 1 + rng.below(12) as u32);
        let mut quant = [1u16; 64];
        if case % 3 == 2 {
            for q in quant.iter_mut().skip(1) {
                *q = 1 + rng.below(4) as u16;
            }
        }
        let blocks: Vec<[i16; 64]> = (0..bw * bh)
            .map(|_| {
                let mut b = [0i16; 64];
                // DC near +-4092: samples of 511 / 512 at -4084 / +4092 (and -4101 gives
                // -513).
                let dc = 4060 + rng.below(50) as i16;
                b[0] = if rng.below(2) == 0 { dc } else { -dc - 12 };
                for _ in 0..rng.below(3) {
                    let at = 1 + rng.below(63) as usize;
                    b[at] = (rng.below(200) as i16 - 100) / (1 + rng.below(8) as i16);
                }
                b
            })
            .collect();
        // Mostly a block an interval, so that each block's verdict is seen in a status
        // word of its own.
        let restart = if case < 8 {
            1 + rng.below(2) as u32
        } else {
            1 + rng.below(u64::from(bw * bh)) as u32
        };
        let jpeg = encode_gray(bw, bh, &blocks, &quant, restart);
        let label = format!("hand-encoded {bw}x{bh} blocks, restart {restart}");
        let scan = RestartScan::parse(&jpeg).unwrap_or_else(|e| panic!("{label}: {e}"));
        // The whole image (whose blocks are checked below), and a window.
        let mut p = PackedEntropy::default();
        pack_entropy(&scan, &jpeg, 1, [0, 0, 8 * bw, 8 * bh], &mut p).expect("pack");
        batch.push((label.clone(), p));
        batch.push(packed(&mut rng, &jpeg, &scan, &label));
        written.push(blocks);
    }
    let c = chunk_of(&batch);
    let (coefs, status) = check(e, &c, false, "hand-encoded");
    let (mut agree, mut disagree) = (0, 0);
    for ((label, r), blocks) in c.regions.iter().step_by(2).zip(&written) {
        let &(off, quant, n) = &r[0];
        assert_eq!(n, blocks.len(), "{label}: the whole image's region");
        let mut q = [0u16; 64];
        for (z, v) in q.iter_mut().enumerate() {
            *v = (c.words[quant + z / 2] >> (16 * (z % 2))) as u16;
        }
        for (b, written) in blocks.iter().enumerate() {
            let mut block = [0i16; 64];
            for (z, v) in block.iter_mut().enumerate() {
                *v = (coefs[off + 32 * b + z / 2] >> (16 * (z % 2))) as u16 as i16;
            }
            assert_eq!(&block, written, "{label}: block {b} read back");
            if agrees_with_simd(&block, &q) {
                agree += 1;
            } else {
                disagree += 1;
            }
        }
    }
    let flagged = status[..c.intervals]
        .iter()
        .filter(|&&s| s & STATUS_SIMD_RANGE != 0)
        .count();
    assert!(
        status[..c.intervals]
            .iter()
            .all(|&s| s & !STATUS_SIMD_RANGE == 0),
        "hand-encoded intervals decode cleanly: {:?}",
        &status[..c.intervals]
    );
    eprintln!(
        "{}: hand-encoded blocks {agree} in range, {disagree} not; {flagged} of {} intervals \
         flagged",
        e.name(),
        c.intervals
    );
    assert!(agree > 0 && disagree > 0, "both sides of the check");
}

/// The test JPEGs (and the shared corpus's, where present) transcoded with restart
/// markers: real photographs, optimised tables with codes up to 16 bits. Each decodes
/// word for word as the oracle does, a few to a chunk, and, through a batch plan (entropy
/// chunks as the batcher lays them out) at IDCT scales 1/1 to 1/8, with every status word
/// clean and the windows the host coefficients' (`color::decode_coefficients` of
/// libjpeg's).
pub fn transcoded_files_match_the_oracle_and_the_host_coefficients(e: &dyn Executor) {
    use stoker::backend::device::job::{prepare_device, EntropyPaths, HardwareDecode};
    use stoker::backend::device::{BatchPlan, CoeffPool, DeviceSample};
    use stoker::decode::jpeg::coeffs::{CoeffStatus, Coefficients};
    use stoker::decode::jpeg::transcode::{add_restarts, TranscodeOptions, Transcoded};
    use stoker::decode::DecodeOptions;
    let mut files = Vec::new();
    for p in crate::common::decode_test_jpegs() {
        let Ok(b) = std::fs::read(&p) else { continue };
        if let Transcoded::Written { bytes, .. } = add_restarts(&b, &TranscodeOptions::default()) {
            files.push((p.display().to_string(), bytes));
        }
    }
    // The bundled JPEGs alone give 18; the corpus beside the checkout, where present,
    // adds its own.
    let corpus = crate::common::corpus_dir();
    let bundled = files
        .iter()
        .filter(|(p, _)| {
            corpus
                .as_ref()
                .is_none_or(|c| !p.starts_with(&*c.to_string_lossy()))
        })
        .count();
    assert!(bundled >= 15, "{bundled} transcoded bundled test files");
    assert!(
        corpus.is_none() || files.len() >= 20,
        "{} transcoded test files with the corpus",
        files.len()
    );
    let mut rng = TestRng(0x7A4E_5C0D);
    for group in files.chunks(3) {
        let images: Vec<(String, PackedEntropy)> = group
            .iter()
            .filter_map(|(label, b)| {
                let scan = RestartScan::parse(b).ok()?;
                Some(packed(&mut rng, b, &scan, label))
            })
            .collect();
        if !images.is_empty() {
            check(e, &chunk_of(&images), false, "transcoded");
        }
    }
    // Through a batch plan, whole images at IDCT scales 1/1, 1/2, 1/4, 1/8 in turn: the
    // IDCT reads the huffman pass's blocks (the layout of size 8) at every DCT size.
    let pool = CoeffPool::default();
    let mut samples = Vec::new();
    let mut expected = Vec::new();
    let mut c = Coefficients::default();
    for (k, (label, b)) in files.iter().take(24).enumerate() {
        let scale = [1, 2, 4, 8][k % 4];
        // Stored orientation: the oracle below decodes the coefficients as stored (the
        // upright turn has its own check, `rotated_jpegs_through_a_batch_plan_...`).
        let opts = DecodeOptions {
            scale,
            orientation: false,
            ..DecodeOptions::default()
        };
        let label = &format!("{label} at 1/{scale}");
        let info = stoker::decode::peek_info(b).expect("headers");
        let p = prepare_device(
            b,
            info,
            &opts,
            &pool,
            HardwareDecode::Off,
            EntropyPaths::RESTART,
            128 << 20,
        )
        .expect("prepare");
        if !matches!(p.image, DeviceSample::Entropy { .. }) {
            continue;
        }
        assert_eq!(
            read_coefficients(b, true, &mut c).expect("libjpeg"),
            CoeffStatus::Ready,
            "{label}"
        );
        let (w, h) = c.scaled_size(scale);
        expected.push((
            label.clone(),
            color::decode_coefficients(&c, scale, [0, 0, w, h]).expect("oracle"),
        ));
        samples.push(p.image);
    }
    assert!(
        samples.len() >= 10,
        "{} samples on the entropy path",
        samples.len()
    );
    let mut plan = BatchPlan::new(e.limits());
    plan.plan_decode(samples.iter()).expect("plan");
    let mut buffers = Buffers::for_plan(&plan, &samples);
    let steps: Vec<Step> = plan
        .steps()
        .iter()
        .filter(|s| !matches!(s, Step::EntropyCheck { .. }))
        .cloned()
        .collect();
    e.run(&steps, &mut buffers);
    assert_eq!(
        plan.flagged(buffers.get(Buffer::EntropyStatus)),
        Vec::new(),
        "{}: flagged transcoded files",
        e.name()
    );
    let got = plan
        .windows_to_host(buffers.get(Buffer::Windows))
        .expect("windows");
    for ((label, want), img) in expected.iter().zip(&got) {
        assert_eq!(
            (img.width, img.height),
            (want.width, want.height),
            "{label}"
        );
        assert!(
            img.data == want.data,
            "{}: {label}: the windows differ from the host coefficients' decode",
            e.name()
        );
    }
}

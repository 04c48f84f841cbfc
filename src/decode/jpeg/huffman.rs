//! Huffman decoding of JPEGs with restart markers, one restart interval at a time: the
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

use std::ops::Range;

use bytemuck::{Pod, Zeroable};

use super::coeffs::{pack_header, Coefficients, ColorModel, ComponentDesc, PackedJpeg};
use crate::decode::DecodeError;

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

/// One Huffman table as a file defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HuffSpec {
    counts: [u8; 16],
    values: [u8; 256],
    len: usize,
}

/// The decode table of `counts` (codes of each length 1-16) and `values`, in the layout
/// of the module docs; `None` for a table libjpeg refuses (`JERR_BAD_HUFF_TABLE`: more
/// than 256 codes, codes that overflow their length, a DC symbol above 15).
pub fn table_words(counts: &[u8; 16], values: &[u8], dc: bool) -> Option<[u32; TABLE_WORDS]> {
    let total: usize = counts.iter().map(|&c| usize::from(c)).sum();
    if total > 256 || values.len() < total || (dc && values[..total].iter().any(|&v| v > 15)) {
        return None;
    }
    let mut w = [0u32; TABLE_WORDS];
    let mut maxcode = [-1i32; 18];
    let mut valoffset = [0i32; 18];
    // Canonical codes, as jpeg_make_d_derived_tbl assigns them.
    let mut code: u32 = 0;
    let mut k = 0usize;
    for l in 1..=16usize {
        let n = usize::from(counts[l - 1]);
        if n > 0 {
            valoffset[l] = k as i32 - code as i32;
            for _ in 0..n {
                if l <= 8 {
                    let sym = u32::from(values[k]);
                    let shift = 8 - l;
                    for e in (code << shift)..((code + 1) << shift) {
                        let e = e as usize;
                        w[e / 2] |= ((l as u32) << 8 | sym) << (16 * (e % 2));
                    }
                }
                code += 1;
                k += 1;
            }
            maxcode[l] = code as i32 - 1;
        }
        // libjpeg: the next code must still fit in l bits (no code is all ones).
        if code >= 1 << l {
            return None;
        }
        code <<= 1;
    }
    maxcode[17] = 0x7FFF_FFFF;
    for l in 0..18 {
        w[MAXCODE + l] = maxcode[l] as u32;
        w[VALOFFSET + l] = valoffset[l] as u32;
    }
    for (i, &v) in values[..total].iter().enumerate() {
        w[HUFFVAL + i / 4] |= u32::from(v) << (8 * (i % 4));
    }
    Some(w)
}

/// One component of the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanComponent {
    /// Index of the component in the frame (and in [`RestartScan::header`]).
    pub frame_index: usize,
    /// DC table slot (0-3).
    pub dc: usize,
    /// AC table slot (0-3).
    pub ac: usize,
}

/// What the host reads of a JPEG with restart markers: the frame as [`Coefficients`]
/// without blocks, the scan, the decode tables and where each interval's bytes are.
#[derive(Debug, Clone)]
pub struct RestartScan {
    /// Size, colour model, sampling factors and quantisation tables; `blocks` empty.
    pub header: Coefficients,
    /// The scan's components, in scan order.
    pub scan: Vec<ScanComponent>,
    /// DC decode tables by slot.
    pub dc_tables: [Option<Box<[u32; TABLE_WORDS]>>; 4],
    /// AC decode tables by slot.
    pub ac_tables: [Option<Box<[u32; TABLE_WORDS]>>; 4],
    /// MCUs per restart interval.
    pub restart_interval: u32,
    /// MCUs per MCU row.
    pub mcus_per_row: u32,
    /// MCU rows.
    pub mcu_rows: u32,
    /// Each interval's entropy-coded bytes in the file (markers and fill bytes excluded).
    pub intervals: Vec<Range<usize>>,
    /// Byte offset of the frame header's height field.
    pub sof_height_at: usize,
    /// Byte offset of the first entropy-coded byte (just after the scan header).
    pub data_start: usize,
}

/// A segment body, bounds-checked.
fn seg(bytes: &[u8], i: usize, len: usize) -> Result<&[u8], Ineligible> {
    bytes
        .get(i + 2..i + len)
        .ok_or_else(|| no("segment runs past the end of the file"))
}

impl RestartScan {
    /// Reads the headers and finds the intervals, or says why the file does not take
    /// the device entropy path.
    pub fn parse(bytes: &[u8]) -> Result<RestartScan, Ineligible> {
        Self::parse_into(bytes, Vec::new())
    }

    /// [`Self::parse`], reusing `intervals`' allocation.
    pub fn parse_into(
        bytes: &[u8],
        mut intervals: Vec<Range<usize>>,
    ) -> Result<RestartScan, Ineligible> {
        if !bytes.starts_with(&[0xFF, 0xD8]) {
            return Err(no("not a JPEG"));
        }
        if !super::markers::segment_gaps(bytes).is_empty() {
            return Err(no("extraneous bytes between marker segments"));
        }
        let mut quant: [Option<[u16; 64]>; 4] = [None; 4];
        let mut dc: [Option<HuffSpec>; 4] = [None; 4];
        let mut ac: [Option<HuffSpec>; 4] = [None; 4];
        let mut restart_interval = 0u32;
        let mut frame: Option<(u32, u32, Vec<FrameComp>)> = None;
        let (mut jfif, mut adobe) = (0u32, None::<u8>);
        let mut adobe_count = 0u32;
        let mut sof_height_at = 0usize;
        let mut i = 2usize;
        loop {
            // At a marker: FF, fill bytes, the code.
            if bytes.get(i) != Some(&0xFF) {
                return Err(no("no marker where a segment should start"));
            }
            while bytes.get(i) == Some(&0xFF) {
                i += 1;
            }
            let marker = *bytes.get(i).ok_or_else(|| no("file ends in the headers"))?;
            i += 1;
            let len = bytes
                .get(i..i + 2)
                .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                .ok_or_else(|| no("segment length cut off"))?;
            if len < 2 {
                return Err(no("segment shorter than its length field"));
            }
            let body = seg(bytes, i, len)?;
            match marker {
                0xC0 | 0xC1 => {
                    if frame.is_some() {
                        return Err(no("two frame headers"));
                    }
                    if body.len() < 6 || body[0] != 8 {
                        return Err(no("not an 8-bit frame"));
                    }
                    let height = u32::from(u16::from_be_bytes([body[1], body[2]]));
                    let width = u32::from(u16::from_be_bytes([body[3], body[4]]));
                    let n = usize::from(body[5]);
                    if width == 0 || height == 0 {
                        return Err(no("zero width or height (a DNL marker)"));
                    }
                    if !matches!(n, 1 | 3 | 4) || body.len() < 6 + 3 * n {
                        return Err(no(format!("{n} components")));
                    }
                    let comps = body[6..6 + 3 * n]
                        .chunks_exact(3)
                        .map(|c| {
                            (
                                c[0],
                                u32::from(c[1] >> 4),
                                u32::from(c[1] & 15),
                                usize::from(c[2]),
                            )
                        })
                        .collect::<Vec<_>>();
                    frame = Some((width, height, comps));
                    sof_height_at = i + 3;
                }
                0xC2 | 0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                    return Err(no("not a sequential Huffman-coded frame"));
                }
                0xC4 => {
                    let mut b = body;
                    while !b.is_empty() {
                        let tc = b[0];
                        let (class, slot) = (tc >> 4, usize::from(tc & 15));
                        if class > 1 || slot > 3 || b.len() < 17 {
                            return Err(no("malformed Huffman table segment"));
                        }
                        let mut counts = [0u8; 16];
                        counts.copy_from_slice(&b[1..17]);
                        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
                        if n > 256 || b.len() < 17 + n {
                            return Err(no("malformed Huffman table segment"));
                        }
                        let mut values = [0u8; 256];
                        values[..n].copy_from_slice(&b[17..17 + n]);
                        let spec = HuffSpec {
                            counts,
                            values,
                            len: n,
                        };
                        if class == 0 {
                            dc[slot] = Some(spec);
                        } else {
                            ac[slot] = Some(spec);
                        }
                        b = &b[17 + n..];
                    }
                }
                0xDB => {
                    let mut b = body;
                    while !b.is_empty() {
                        let (pq, slot) = (b[0] >> 4, usize::from(b[0] & 15));
                        let size = if pq == 0 { 64 } else { 128 };
                        if pq > 1 || slot > 3 || b.len() < 1 + size {
                            return Err(no("malformed quantisation table segment"));
                        }
                        let mut q = [0u16; 64];
                        for k in 0..64 {
                            let v = if pq == 0 {
                                u16::from(b[1 + k])
                            } else {
                                u16::from_be_bytes([b[1 + 2 * k], b[2 + 2 * k]])
                            };
                            q[usize::from(NATURAL[k])] = v;
                        }
                        quant[slot] = Some(q);
                        b = &b[1 + size..];
                    }
                }
                0xDD => {
                    if body.len() < 2 {
                        return Err(no("malformed restart interval segment"));
                    }
                    restart_interval = u32::from(u16::from_be_bytes([body[0], body[1]]));
                }
                0xE0 if body.len() >= 14 && body.starts_with(b"JFIF\0") => {
                    if body[5] != 1 {
                        return Err(no("JFIF version other than 1 (libjpeg warns)"));
                    }
                    jfif += 1;
                }
                0xEE if body.len() >= 12 && body.starts_with(b"Adobe") => {
                    adobe = Some(body[11]);
                    adobe_count += 1;
                }
                0xD8 | 0xD9 | 0xD0..=0xD7 | 0x01 => {
                    return Err(no(format!("marker {marker:02X} in the headers")));
                }
                0xDC | 0xDE | 0xDF => return Err(no(format!("marker {marker:02X}"))),
                0xDA => {
                    let (width, height, comps) =
                        frame.ok_or_else(|| no("scan before any frame"))?;
                    if restart_interval == 0 {
                        return Err(no("no restart markers"));
                    }
                    if jfif > 1 || adobe_count > 1 {
                        return Err(no("more than one JFIF or Adobe marker"));
                    }
                    let ns = usize::from(*body.first().ok_or_else(|| no("empty scan header"))?);
                    if body.len() < 1 + 2 * ns + 3 {
                        return Err(no("scan header cut off"));
                    }
                    if ns != comps.len() {
                        return Err(no("more than one scan"));
                    }
                    let tail = &body[1 + 2 * ns..];
                    if tail[0] != 0 || tail[1] != 63 || tail[2] != 0 {
                        return Err(no("not a sequential scan"));
                    }
                    let mut scan = Vec::with_capacity(ns);
                    for s in body[1..1 + 2 * ns].chunks_exact(2) {
                        let frame_index = comps
                            .iter()
                            .position(|c| c.0 == s[0])
                            .ok_or_else(|| no("scan names a component the frame lacks"))?;
                        if scan
                            .iter()
                            .any(|c: &ScanComponent| c.frame_index == frame_index)
                        {
                            return Err(no("scan names a component twice"));
                        }
                        scan.push(ScanComponent {
                            frame_index,
                            dc: usize::from(s[1] >> 4),
                            ac: usize::from(s[1] & 15),
                        });
                    }
                    let color = color_model(&comps, jfif > 0, adobe)?;
                    return finish(
                        bytes,
                        i + len,
                        Parsed {
                            width,
                            height,
                            comps,
                            color,
                            adobe: adobe.is_some(),
                            quant,
                            dc,
                            ac,
                            scan,
                            restart_interval,
                            sof_height_at,
                        },
                        std::mem::take(&mut intervals),
                    );
                }
                _ => {}
            }
            i += len;
        }
    }

    /// MCUs in the scan.
    pub fn total_mcus(&self) -> u64 {
        u64::from(self.mcus_per_row) * u64::from(self.mcu_rows)
    }

    /// Whether the scan is non-interleaved: a one-component image, one block an MCU.
    pub fn single(&self) -> bool {
        self.scan.len() == 1
    }

    /// The MCUs of interval `k`: `(first, count)`.
    pub fn interval_mcus(&self, k: usize) -> (u64, u32) {
        let first = k as u64 * u64::from(self.restart_interval);
        let count = (self.total_mcus() - first.min(self.total_mcus()))
            .min(u64::from(self.restart_interval));
        (first, count as u32)
    }
}

/// A frame component: its id, sampling factors and quantisation table slot.
type FrameComp = (u8, u32, u32, usize);

struct Parsed {
    width: u32,
    height: u32,
    comps: Vec<FrameComp>,
    color: ColorModel,
    adobe: bool,
    quant: [Option<[u16; 64]>; 4],
    dc: [Option<HuffSpec>; 4],
    ac: [Option<HuffSpec>; 4],
    scan: Vec<ScanComponent>,
    restart_interval: u32,
    sof_height_at: usize,
}

/// libjpeg's guess of the colour space (`default_decompress_parms`), refusing what it
/// would warn about.
fn color_model(
    comps: &[FrameComp],
    jfif: bool,
    adobe: Option<u8>,
) -> Result<ColorModel, Ineligible> {
    Ok(match comps.len() {
        1 => ColorModel::Gray,
        3 => {
            if jfif {
                ColorModel::YCbCr
            } else if let Some(t) = adobe {
                match t {
                    0 => ColorModel::Rgb,
                    1 => ColorModel::YCbCr,
                    _ => return Err(no("unknown Adobe transform (libjpeg warns)")),
                }
            } else if comps[0].0 == 82 && comps[1].0 == 71 && comps[2].0 == 66 {
                ColorModel::Rgb
            } else {
                ColorModel::YCbCr
            }
        }
        _ => match adobe {
            None | Some(0) => ColorModel::Cmyk,
            Some(2) => ColorModel::Ycck,
            Some(_) => return Err(no("unknown Adobe transform (libjpeg warns)")),
        },
    })
}

/// Builds the scan from the parsed headers and finds the intervals from `start`, the
/// first byte of entropy-coded data.
fn finish(
    bytes: &[u8],
    start: usize,
    p: Parsed,
    mut intervals: Vec<Range<usize>>,
) -> Result<RestartScan, Ineligible> {
    let max_h = p.comps.iter().map(|c| c.1).max().unwrap_or(1);
    let max_v = p.comps.iter().map(|c| c.2).max().unwrap_or(1);
    let mut header = Coefficients::default();
    header.clear();
    (header.width, header.height, header.color) = (p.width, p.height, p.color);
    (header.adobe_inverted, header.max_h, header.max_v) = (p.adobe, max_h, max_v);
    let mut blocks_in_mcu = 0;
    for &(_, h, v, tq) in &p.comps {
        let q = p
            .quant
            .get(tq)
            .copied()
            .flatten()
            .ok_or_else(|| no("a component's quantisation table is not defined"))?;
        let wib = (u64::from(p.width) * u64::from(h)).div_ceil(u64::from(max_h) * 8) as u32;
        let hib = (u64::from(p.height) * u64::from(v)).div_ceil(u64::from(max_v) * 8) as u32;
        header.push_component(h, v, wib, hib, q);
        blocks_in_mcu += h * v;
    }
    header
        .check_layout()
        .map_err(|e| no(format!("layout the device does not take: {e}")))?;
    let single = p.scan.len() == 1;
    if !single && blocks_in_mcu > 10 {
        return Err(no("more than 10 blocks in an MCU"));
    }
    let (mcus_per_row, mcu_rows) = if single {
        let c = &header.components[p.scan[0].frame_index];
        (c.width_in_blocks, c.height_in_blocks)
    } else {
        (p.width.div_ceil(8 * max_h), p.height.div_ceil(8 * max_v))
    };
    let table = |specs: &[Option<HuffSpec>; 4], slot: usize, dc: bool| {
        specs
            .get(slot)
            .copied()
            .flatten()
            .and_then(|s| table_words(&s.counts, &s.values[..s.len], dc))
            .map(Box::new)
    };
    let mut dc_tables: [Option<Box<[u32; TABLE_WORDS]>>; 4] = Default::default();
    let mut ac_tables: [Option<Box<[u32; TABLE_WORDS]>>; 4] = Default::default();
    for c in &p.scan {
        if dc_tables[c.dc].is_none() {
            dc_tables[c.dc] = Some(
                table(&p.dc, c.dc, true).ok_or_else(|| no("a DC table is missing or invalid"))?,
            );
        }
        if ac_tables[c.ac].is_none() {
            ac_tables[c.ac] = Some(
                table(&p.ac, c.ac, false).ok_or_else(|| no("an AC table is missing or invalid"))?,
            );
        }
    }
    let total = u64::from(mcus_per_row) * u64::from(mcu_rows);
    let expected = total.div_ceil(u64::from(p.restart_interval));
    // The scan: each FF is stuffing (FF 00), fill before a marker (FF FF), a restart
    // marker in sequence, or the end of image; anything else leaves this path.
    intervals.clear();
    let mut from = start;
    let mut i = start;
    loop {
        let Some(at) = memchr::memchr(0xFF, &bytes[i.min(bytes.len())..]).map(|k| k + i) else {
            return Err(no("the data ends without an end-of-image marker"));
        };
        let mut j = at + 1;
        while bytes.get(j) == Some(&0xFF) {
            j += 1;
        }
        let Some(&m) = bytes.get(j) else {
            return Err(no("the data ends without an end-of-image marker"));
        };
        match m {
            0x00 if j == at + 1 => i = j + 1,
            0xD0..=0xD7 => {
                if u32::from(m - 0xD0) != (intervals.len() % 8) as u32 {
                    return Err(no("restart markers out of sequence"));
                }
                intervals.push(from..at);
                if intervals.len() as u64 >= expected {
                    return Err(no("more restart markers than intervals"));
                }
                from = j + 1;
                i = from;
            }
            0xD9 => {
                intervals.push(from..at);
                break;
            }
            _ => return Err(no(format!("marker {m:02X} in the entropy-coded data"))),
        }
    }
    if intervals.len() as u64 != expected {
        return Err(no("fewer restart intervals than the image has"));
    }
    Ok(RestartScan {
        header,
        scan: p.scan,
        dc_tables,
        ac_tables,
        restart_interval: p.restart_interval,
        mcus_per_row,
        mcu_rows,
        intervals,
        sof_height_at: p.sof_height_at,
        data_start: start,
    })
}

/// A JPEG made of the MCU rows `rows` of `bytes` alone (their intervals copied, the
/// restart markers renumbered, the frame height cut), for a decoder that need not
/// entropy-decode the rows above a crop: libjpeg decodes the rows of the result exactly as
/// the same rows of the whole file, but for the first and last row of samples, which the
/// upsampling of a cut image takes from the image's edge rather than the neighbouring row
/// (so a caller keeps an MCU row of margin around what it needs). Returns the JPEG and the
/// first pixel row it holds; `None` where intervals do not start on MCU rows there (an
/// interval of a fraction of a row that does not divide it, or of rows that `rows` does
/// not start on), or when `rows` is empty or past the image.
pub fn splice_rows(
    bytes: &[u8],
    scan: &RestartScan,
    rows: Range<u32>,
    out: &mut Vec<u8>,
) -> Option<u32> {
    let (mpr, ri) = (scan.mcus_per_row.max(1), scan.restart_interval.max(1));
    let rows = rows.start..rows.end.min(scan.mcu_rows);
    if rows.is_empty() {
        return None;
    }
    // Intervals of the row range, as indices.
    let (first, last) = if mpr.is_multiple_of(ri) {
        let per_row = mpr / ri;
        (rows.start * per_row, rows.end * per_row)
    } else if ri.is_multiple_of(mpr) {
        let k = ri / mpr;
        if !rows.start.is_multiple_of(k) {
            return None;
        }
        (rows.start / k, rows.end.div_ceil(k))
    } else {
        return None;
    };
    let last = (last as usize).min(scan.intervals.len());
    let first = first as usize;
    if first >= last {
        return None;
    }
    let row_px = if scan.single() {
        8
    } else {
        8 * scan.header.max_v
    };
    let top = rows.start * row_px;
    let bottom = (rows.end * row_px).min(scan.header.height);
    // Whole intervals: the last one may reach further down than `rows`.
    let bottom = if ri.is_multiple_of(mpr) {
        ((last as u32) * (ri / mpr) * row_px).min(scan.header.height)
    } else {
        bottom
    };
    let height = u16::try_from(bottom.checked_sub(top)?)
        .ok()
        .filter(|&h| h > 0)?;
    out.clear();
    out.extend_from_slice(bytes.get(..scan.data_start)?);
    out.get_mut(scan.sof_height_at..scan.sof_height_at + 2)?
        .copy_from_slice(&height.to_be_bytes());
    for (n, k) in (first..last).enumerate() {
        if n > 0 {
            out.extend_from_slice(&[0xFF, 0xD0 + ((n - 1) % 8) as u8]);
        }
        out.extend_from_slice(bytes.get(scan.intervals[k].clone())?);
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    Some(top)
}

/// The scan record of one image: 16 words.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ScanDesc {
    /// Word 0: components in the scan (1-4).
    pub components: u32,
    /// Word 1: MCUs per MCU row.
    pub mcus_per_row: u32,
    /// Word 2: index of the image's first component record in the chunk's component
    /// table (the records are in frame order).
    pub first_component: u32,
    /// Word 3: bit 0: a non-interleaved scan (one component, one block an MCU).
    pub flags: u32,
    /// Words 4-7: per scan component: its frame index | `h << 8` | `v << 16`.
    pub comp: [u32; 4],
    /// Words 8-11: per scan component: its DC table's word offset.
    pub dc_table: [u32; 4],
    /// Words 12-15: per scan component: its AC table's word offset.
    pub ac_table: [u32; 4],
}

/// One interval of one image: 8 words.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct IntervalDesc {
    /// Word 0: word offset of the image's [`ScanDesc`].
    pub scan: u32,
    /// Word 1: index of its first MCU in the scan.
    pub first_mcu: u32,
    /// Word 2: its MCUs.
    pub mcus: u32,
    /// Word 3: byte offset of its first entropy-coded byte.
    pub start: u32,
    /// Word 4: byte offset just past its last.
    pub end: u32,
    /// Word 5: index of its word in the status buffer.
    pub status: u32,
    /// Words 6-7: zero.
    pub reserved: [u32; 2],
}

/// One image packed for the device entropy path: the IDCT and colour records of
/// [`super::coeffs::pack_header`] (each component's `coef_offset` in the coefficient
/// area), the scan record, the interval records, and the data words (quantisation tables,
/// decode tables, entropy-coded bytes) that offsets point into. Offsets are relative to
/// the start of `packed.data` (in words; byte offsets in bytes) until placed in a chunk;
/// `ScanDesc::first_component` is 0 and interval status indices count from 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedEntropy {
    /// The image and component records, and the data (quantisation tables, then decode
    /// tables, then bytes).
    pub packed: PackedJpeg,
    /// The scan record.
    pub scan: ScanDesc,
    /// The intervals uploaded (those under the window).
    pub intervals: Vec<IntervalDesc>,
    /// Words of the coefficient area the regions take.
    pub coef_words: u64,
    /// Entropy-coded bytes uploaded.
    pub entropy_bytes: u64,
    /// Every interval of the file is uploaded ([`pack_intervals`] with `all`).
    pub whole: bool,
}

/// Packs window `window` of the image scaled by `1/scale` for the device entropy path:
/// the records, and the bytes of only those intervals holding MCUs of the window's
/// region (the blocks the IDCT reads).
pub fn pack_entropy(
    scan: &RestartScan,
    bytes: &[u8],
    scale: u32,
    window: [u32; 4],
    out: &mut PackedEntropy,
) -> Result<(), DecodeError> {
    pack_intervals(scan, bytes, scale, window, false, out)
}

/// [`pack_entropy`], uploading every interval of the file when `all` (each decoded, the
/// blocks outside the window dropped): the device then judges the whole file, as a host
/// decode of it would.
pub fn pack_intervals(
    scan: &RestartScan,
    bytes: &[u8],
    scale: u32,
    window: [u32; 4],
    all: bool,
    out: &mut PackedEntropy,
) -> Result<(), DecodeError> {
    out.coef_words = pack_header(&scan.header, scale, window, &mut out.packed)?;
    out.intervals.clear();
    out.entropy_bytes = 0;
    let data = &mut out.packed.data;
    // The decode tables the scan uses, once each.
    let mut dc_at = [u32::MAX; 4];
    let mut ac_at = [u32::MAX; 4];
    let mut desc = ScanDesc {
        components: scan.scan.len() as u32,
        mcus_per_row: scan.mcus_per_row,
        flags: u32::from(scan.single()),
        ..ScanDesc::default()
    };
    for (j, c) in scan.scan.iter().enumerate() {
        for (slot, at, tables) in [
            (c.dc, &mut dc_at, &scan.dc_tables),
            (c.ac, &mut ac_at, &scan.ac_tables),
        ] {
            if at[slot] == u32::MAX {
                let t = tables[slot]
                    .as_ref()
                    .ok_or_else(|| DecodeError::BadHeader("decode table missing".into()))?;
                at[slot] = data.len() as u32;
                data.extend_from_slice(&t[..]);
            }
        }
        let comp = &scan.header.components[c.frame_index];
        desc.comp[j] = c.frame_index as u32 | comp.h_samp << 8 | comp.v_samp << 16;
        desc.dc_table[j] = dc_at[c.dc];
        desc.ac_table[j] = ac_at[c.ac];
    }
    // The MCU rectangle of the regions: an MCU is needed when any block of it is in its
    // component's region.
    let (mut mx0, mut my0, mut mx1, mut my1) = (u32::MAX, u32::MAX, 0u32, 0u32);
    for (ci, d) in out.packed.components.iter().enumerate() {
        let comp = &scan.header.components[ci];
        let (h, v) = if scan.single() {
            (1, 1)
        } else {
            (comp.h_samp, comp.v_samp)
        };
        mx0 = mx0.min(d.bx0 / h);
        my0 = my0.min(d.by0 / v);
        mx1 = mx1.max((d.bx0 + d.bw).div_ceil(h));
        my1 = my1.max((d.by0 + d.bh).div_ceil(v));
    }
    let (mx1, my1) = (mx1.min(scan.mcus_per_row), my1.min(scan.mcu_rows));
    let per_row = u64::from(scan.mcus_per_row);
    let ri = u64::from(scan.restart_interval);
    let mut last = None;
    let mut byte = data.len() * 4;
    let mut wanted: Vec<usize> = Vec::new();
    if all {
        wanted.extend(0..scan.intervals.len());
    }
    for my in (my0..my1).filter(|_| !all) {
        let a = (u64::from(my) * per_row + u64::from(mx0)) / ri;
        let b = (u64::from(my) * per_row + u64::from(mx1.max(mx0 + 1)) - 1) / ri;
        for k in a..=b {
            let k = k as usize;
            if last.is_none_or(|l| k > l) && k < scan.intervals.len() {
                wanted.push(k);
                last = Some(k);
            }
        }
    }
    out.whole = wanted.len() == scan.intervals.len();
    let mut blob: Vec<u8> = Vec::new();
    for (n, &k) in wanted.iter().enumerate() {
        let r = scan.intervals[k].clone();
        let src = bytes
            .get(r.clone())
            .ok_or_else(|| DecodeError::BadHeader("interval outside the file".into()))?;
        let (first, mcus) = scan.interval_mcus(k);
        out.intervals.push(IntervalDesc {
            scan: 0,
            first_mcu: first as u32,
            mcus,
            start: byte as u32,
            end: (byte + src.len()) as u32,
            status: n as u32,
            reserved: [0; 2],
        });
        byte += src.len();
        blob.extend_from_slice(src);
        out.entropy_bytes += src.len() as u64;
    }
    if byte > u32::MAX as usize / 2 {
        return Err(DecodeError::Unsupported(
            "entropy-coded data too large for 32-bit offsets".into(),
        ));
    }
    let words = blob.len().div_ceil(4);
    blob.resize(words * 4, 0);
    data.extend(
        blob.chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    );
    out.scan = desc;
    Ok(())
}

impl PackedEntropy {
    /// Blocks in one MCU of its scan.
    pub fn blocks_per_mcu(&self) -> u32 {
        let n = (self.scan.components as usize).min(4);
        if self.scan.flags & 1 == 1 {
            return 1;
        }
        self.scan.comp[..n]
            .iter()
            .map(|c| ((c >> 8) & 0xFF) * ((c >> 16) & 0xFF))
            .sum::<u32>()
            .max(1)
    }

    /// The most blocks one of its intervals holds (chunk header word 12 is the most over
    /// a chunk's images).
    pub fn max_interval_blocks(&self) -> u32 {
        let per = self.blocks_per_mcu();
        self.intervals
            .iter()
            .map(|iv| iv.mcus.saturating_mul(per))
            .max()
            .unwrap_or(0)
    }

    /// The records placed in a chunk: the data at word `data_at`, the scan record at word
    /// `scan_at`, the component records from index `first_component` of the chunk's
    /// component table, the interval status words from `first_status`, the regions from
    /// word `coef_at` of the coefficient buffer. Returns the scan record, the interval
    /// records and the component records so rebased (`group_start` and the plane and
    /// output offsets are left to the caller, as for [`super::coeffs::pack`]).
    pub fn placed(
        &self,
        data_at: u32,
        scan_at: u32,
        first_component: u32,
        first_status: u32,
        coef_at: u32,
    ) -> (ScanDesc, Vec<IntervalDesc>, Vec<ComponentDesc>) {
        let mut scan = self.scan;
        scan.first_component = first_component;
        for j in 0..scan.components as usize {
            scan.dc_table[j] += data_at;
            scan.ac_table[j] += data_at;
        }
        let intervals = self
            .intervals
            .iter()
            .map(|iv| IntervalDesc {
                scan: scan_at,
                start: iv.start + 4 * data_at,
                end: iv.end + 4 * data_at,
                status: iv.status + first_status,
                ..*iv
            })
            .collect();
        let components = self
            .packed
            .components
            .iter()
            .map(|c| ComponentDesc {
                coef_offset: c.coef_offset + coef_at,
                quant_offset: c.quant_offset + data_at,
                ..*c
            })
            .collect();
        (scan, intervals, components)
    }
}

/// Words of a chunk header (as `backend::device::decode` lays chunks out).
const CHUNK_HEADER: usize = 64;

/// One image alone in a chunk, laid out as the device pass reads it (header words 3, 8,
/// 9, 10 and 12, and 11 for the IDCT; the component table, the scan record, the interval
/// table, the data): for the oracle's whole-image decode and the tests of the shader and
/// the kernel. Returns the chunk and the words of coefficient buffer it needs.
pub fn standalone_chunk(p: &PackedEntropy) -> (Vec<u32>, usize) {
    let ncomp = p.packed.components.len();
    let comp_table = CHUNK_HEADER;
    let scan_at = comp_table + 16 * ncomp;
    let iv_table = scan_at + 16;
    let data_at = iv_table + 8 * p.intervals.len();
    let (scan, intervals, comps) = p.placed(data_at as u32, scan_at as u32, 0, 0, 0);
    let mut chunk = vec![0u32; data_at];
    chunk[0] = 1;
    chunk[1] = ncomp as u32;
    chunk[3] = comp_table as u32;
    chunk[8] = intervals.len() as u32;
    chunk[9] = iv_table as u32;
    chunk[10] = p.coef_words as u32;
    chunk[11] = 1;
    chunk[12] = p.max_interval_blocks();
    for (i, c) in comps.iter().enumerate() {
        chunk[comp_table + 16 * i..comp_table + 16 * (i + 1)]
            .copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(c)));
    }
    chunk[scan_at..scan_at + 16].copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(&scan)));
    for (i, iv) in intervals.iter().enumerate() {
        chunk[iv_table + 8 * i..iv_table + 8 * (i + 1)]
            .copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(iv)));
    }
    chunk.extend_from_slice(&p.packed.data);
    (chunk, p.coef_words as usize)
}

/// The whole image's coefficients decoded by the oracle, interval by interval, as
/// `jpeg_read_coefficients` gives them for a clean file, into `out` (blocks of every
/// component, row-major). Returns the OR of the intervals' status words (0: clean).
pub fn decode_coefficients(
    scan: &RestartScan,
    bytes: &[u8],
    out: &mut Coefficients,
) -> Result<u32, DecodeError> {
    let (w, h) = (scan.header.width, scan.header.height);
    let mut p = PackedEntropy::default();
    pack_entropy(scan, bytes, 1, [0, 0, w, h], &mut p)?;
    let (chunk, coef_words) = standalone_chunk(&p);
    let mut coefs = vec![0u32; coef_words];
    let mut status = 0;
    for i in 0..p.intervals.len() as u32 {
        status |= huffman_interval(&chunk, &mut coefs, i);
    }
    out.clear();
    let hdr = &scan.header;
    (out.width, out.height, out.color) = (hdr.width, hdr.height, hdr.color);
    (out.adobe_inverted, out.max_h, out.max_v) = (hdr.adobe_inverted, hdr.max_h, hdr.max_v);
    for (ci, c) in hdr.components.iter().enumerate() {
        let d = &p.packed.components[ci];
        let dst = out.push_component(
            c.h_samp,
            c.v_samp,
            c.width_in_blocks,
            c.height_in_blocks,
            c.quant,
        );
        // The whole image's region is every block (pack_header clamps to the grid).
        if (d.bx0, d.by0, d.bw, d.bh) != (0, 0, c.width_in_blocks, c.height_in_blocks) {
            return Err(DecodeError::BadHeader(
                "whole-image region is not the block grid".into(),
            ));
        }
        for b in 0..(d.bw * d.bh) as usize {
            let at = d.coef_offset as usize + 32 * b;
            let mut block = [0i16; 64];
            for (z, v) in block.iter_mut().enumerate() {
                *v = (coefs[at + z / 2] >> (16 * (z % 2))) as u16 as i16;
            }
            dst.blocks.push(block);
        }
    }
    Ok(status)
}

/// Byte `b` of the chunk.
fn byte_at(chunk: &[u32], b: u32) -> u32 {
    (chunk[(b / 4) as usize] >> (8 * (b % 4))) & 0xFF
}

/// The bit reader of one interval: `acc` holds `n` bits, left-aligned; past the end of
/// the data it is fed zero bytes, counted in `virt` (bits), as libjpeg fills zeros.
struct Bits {
    pos: u32,
    end: u32,
    acc: u32,
    n: u32,
    virt: u32,
}

impl Bits {
    fn fill(&mut self, chunk: &[u32]) {
        while self.n <= 24 {
            let mut b = 0;
            if self.pos < self.end {
                b = byte_at(chunk, self.pos);
                self.pos += 1;
                if b == 0xFF && self.pos < self.end && byte_at(chunk, self.pos) == 0 {
                    self.pos += 1;
                }
            } else {
                self.virt += 8;
            }
            self.acc |= b << (24 - self.n);
            self.n += 8;
        }
    }

    fn skip(&mut self, k: u32) {
        self.acc <<= k;
        self.n -= k;
    }

    fn get(&mut self, chunk: &[u32], k: u32) -> u32 {
        if k == 0 {
            return 0;
        }
        self.fill(chunk);
        let v = self.acc >> (32 - k);
        self.skip(k);
        v
    }

    /// Decodes one symbol with the table at `t`: the 8-bit lookahead, then codes of 9-16
    /// bits (`jpeg_huff_decode`); `None` for 16 bits that match no code, which are
    /// consumed (libjpeg reads a 17th bit before it warns and returns 0: the interval is
    /// flagged, so the difference never shows).
    fn decode(&mut self, chunk: &[u32], t: usize) -> Option<u32> {
        self.fill(chunk);
        let peek = self.acc >> 24;
        let e = (chunk[t + (peek / 2) as usize] >> (16 * (peek % 2))) & 0xFFFF;
        if e != 0 {
            self.skip(e >> 8);
            return Some(e & 0xFF);
        }
        let p16 = self.acc >> 16;
        for l in 9..=16u32 {
            let code = (p16 >> (16 - l)) as i32;
            if code <= chunk[t + MAXCODE + l as usize] as i32 {
                self.skip(l);
                let idx =
                    (code.wrapping_add(chunk[t + VALOFFSET + l as usize] as i32) as u32) & 0xFF;
                return Some((chunk[t + HUFFVAL + (idx / 4) as usize] >> (8 * (idx % 4))) & 0xFF);
            }
        }
        self.skip(16);
        None
    }
}

/// [`super::idct::agrees_with_simd`] for the block words `blk` and the quantisation
/// table at word `quant` of `chunk`: the device pass checks every block it writes so.
fn simd_agrees(chunk: &[u32], quant: usize, blk: &[u32; 32]) -> bool {
    let mut block = [0i16; 64];
    let mut q = [0u16; 64];
    for z in 0..64 {
        block[z] = (blk[z / 2] >> (16 * (z % 2))) as u16 as i16;
        q[z] = (chunk[quant + z / 2] >> (16 * (z % 2))) as u16;
    }
    super::idct::agrees_with_simd(&block, &q)
}

/// JPEG's sign extension of an `s`-bit magnitude `r`.
fn extend(r: u32, s: u32) -> i32 {
    if s == 0 {
        0
    } else if r < 1 << (s - 1) {
        r as i32 - (1 << s) + 1
    } else {
        r as i32
    }
}

/// The device pass for interval `i` of `chunk` (the oracle of `huffman` in
/// `shaders/huffman.wgsl` and `kernels/huffman.cu`): decodes its MCUs, writes the blocks
/// that lie in their components' regions into `coefs`, and returns its status word (0:
/// clean; otherwise `STATUS_*` bits), which the pass writes to `status[desc.status]`.
pub fn huffman_interval(chunk: &[u32], coefs: &mut [u32], i: u32) -> u32 {
    let table = chunk[9] as usize;
    let comp_table = chunk[3] as usize;
    let iv = table + 8 * i as usize;
    let scan = chunk[iv] as usize;
    let first_mcu = chunk[iv + 1];
    let mcus = chunk[iv + 2];
    let mut bits = Bits {
        pos: chunk[iv + 3],
        end: chunk[iv + 4],
        acc: 0,
        n: 0,
        virt: 0,
    };
    let ncomp = chunk[scan] as usize;
    let per_row = chunk[scan + 1].max(1);
    let first_component = chunk[scan + 2] as usize;
    let single = chunk[scan + 3] & 1 == 1;
    let mut status = 0u32;
    let mut pred = [0i32; 4];
    for m in 0..mcus {
        let mcu = first_mcu + m;
        let (mx, my) = (mcu % per_row, mcu / per_row);
        for j in 0..ncomp.min(4) {
            let cw = chunk[scan + 4 + j];
            let fi = (cw & 0xFF) as usize;
            let (h, v) = if single {
                (1, 1)
            } else {
                ((cw >> 8) & 0xFF, (cw >> 16) & 0xFF)
            };
            let dct = chunk[scan + 8 + j] as usize;
            let act = chunk[scan + 12 + j] as usize;
            let cd = comp_table + 16 * (first_component + fi);
            let (coef_offset, quant) = (chunk[cd] as usize, chunk[cd + 1] as usize);
            let (bx0, by0, bw, bh) = (chunk[cd + 2], chunk[cd + 3], chunk[cd + 4], chunk[cd + 5]);
            for y in 0..v {
                for x in 0..h {
                    let mut blk = [0u32; 32];
                    // DC.
                    let s = match bits.decode(chunk, dct) {
                        Some(s) => s,
                        None => {
                            status |= STATUS_BAD_CODE;
                            0
                        }
                    };
                    let r = bits.get(chunk, s);
                    pred[j] = pred[j].wrapping_add(extend(r, s));
                    blk[0] = pred[j] as u32 & 0xFFFF;
                    // AC.
                    let mut k = 1u32;
                    while k < 64 {
                        let rs = match bits.decode(chunk, act) {
                            Some(rs) => rs,
                            None => {
                                status |= STATUS_BAD_CODE;
                                0
                            }
                        };
                        let (run, s) = (rs >> 4, rs & 15);
                        if s != 0 {
                            k += run;
                            let r = bits.get(chunk, s);
                            let val = extend(r, s) as u32 & 0xFFFF;
                            if k > 63 {
                                status |= STATUS_OVERFLOW;
                                k = 63;
                            }
                            let z = u32::from(NATURAL[k as usize]);
                            blk[(z / 2) as usize] |= val << (16 * (z % 2));
                        } else {
                            if run != 15 {
                                break;
                            }
                            k += 15;
                        }
                        k += 1;
                    }
                    let (bx, by) = (mx * h + x, my * v + y);
                    if bx >= bx0 && bx < bx0 + bw && by >= by0 && by < by0 + bh {
                        if !simd_agrees(chunk, quant, &blk) {
                            status |= STATUS_SIMD_RANGE;
                        }
                        let at = coef_offset + 32 * ((by - by0) * bw + (bx - bx0)) as usize;
                        coefs[at..at + 32].copy_from_slice(&blk);
                    }
                }
            }
        }
    }
    if bits.virt > bits.n {
        status |= STATUS_OUT_OF_DATA;
    } else if bits.pos < bits.end || bits.n - bits.virt >= 8 {
        status |= STATUS_LEFTOVER;
    }
    status
}

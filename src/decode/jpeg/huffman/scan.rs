//! The host's read of a JPEG with restart markers: the headers, and where each restart
//! interval's bytes are ([`RestartScan::parse`]); it never decodes a Huffman code.

use std::ops::Range;

use super::*;
use crate::decode::jpeg::coeffs::{Coefficients, ColorModel};

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
    /// MCUs per restart interval (every MCU of the scan for a file without restart
    /// markers, which only [`RestartScan::parse_sync`] takes: one interval).
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
        intervals: Vec<Range<usize>>,
    ) -> Result<RestartScan, Ineligible> {
        Self::parse_mode(bytes, intervals, false)
    }

    /// [`Self::parse`] for the synchronising decode ([`super::decode_coefficients_sync`]),
    /// which needs no restart markers: a file without them is one interval of every MCU
    /// ([`RestartScan::restart_interval`] is then the scan's MCU count). Everything else
    /// [`Self::parse`] refuses, this refuses too.
    pub fn parse_sync(bytes: &[u8]) -> Result<RestartScan, Ineligible> {
        Self::parse_mode(bytes, Vec::new(), true)
    }

    /// The parse; `sync`: a file without restart markers is taken, as one interval (the
    /// interval-per-invocation decode has nothing to run in parallel in such a file).
    fn parse_mode(
        bytes: &[u8],
        mut intervals: Vec<Range<usize>>,
        sync: bool,
    ) -> Result<RestartScan, Ineligible> {
        if !bytes.starts_with(&[0xFF, 0xD8]) {
            return Err(no("not a JPEG"));
        }
        if !crate::decode::jpeg::markers::segment_gaps(bytes).is_empty() {
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
                    frame = Some(frame_header(body)?);
                    sof_height_at = i + 3;
                }
                0xC2 | 0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                    return Err(no("not a sequential Huffman-coded frame"));
                }
                0xC4 => huffman_tables(body, &mut dc, &mut ac)?,
                0xDB => quant_tables(body, &mut quant)?,
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
                    if restart_interval == 0 && !sync {
                        return Err(no("no restart markers"));
                    }
                    if jfif > 1 || adobe_count > 1 {
                        return Err(no("more than one JFIF or Adobe marker"));
                    }
                    let scan = scan_header(body, &comps)?;
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

/// A frame header's body (SOF0, SOF1): the width, the height and the components.
fn frame_header(body: &[u8]) -> Result<(u32, u32, Vec<FrameComp>), Ineligible> {
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
    Ok((width, height, comps))
}

/// A DHT segment's body: its tables into their slots of `dc` and `ac`.
fn huffman_tables(
    body: &[u8],
    dc: &mut [Option<HuffSpec>; 4],
    ac: &mut [Option<HuffSpec>; 4],
) -> Result<(), Ineligible> {
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
    Ok(())
}

/// A DQT segment's body: its tables (in natural order) into their slots of `quant`.
fn quant_tables(body: &[u8], quant: &mut [Option<[u16; 64]>; 4]) -> Result<(), Ineligible> {
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
    Ok(())
}

/// A scan header's body: its components, in scan order, for the frame's `comps`; only a
/// sequential scan of every component takes this path.
fn scan_header(body: &[u8], comps: &[FrameComp]) -> Result<Vec<ScanComponent>, Ineligible> {
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
    Ok(scan)
}

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
    // No restart markers (parse_sync only): one interval of every MCU.
    let restart_interval = match p.restart_interval {
        0 => u32::try_from(total).map_err(|_| no("too many MCUs"))?,
        r => r,
    };
    let expected = total.div_ceil(u64::from(restart_interval));
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
        restart_interval,
        mcus_per_row,
        mcu_rows,
        intervals,
        sof_height_at: p.sof_height_at,
        data_start: start,
    })
}

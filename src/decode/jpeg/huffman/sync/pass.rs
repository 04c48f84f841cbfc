//! The device passes of the synchronising decode, each a function of one thread's index
//! over the chunk and the record buffers (see the module docs of [`super`]).

use super::super::interval::{extend, simd_agrees};
use super::*;

/// The chunk header's offsets, as a kernel reads them once.
#[derive(Debug, Clone, Copy)]
struct Layout {
    bits: u32,
    bpm: u32,
    cycle: u32,
    scan: usize,
    comps: usize,
    map: usize,
    segs: usize,
    subs: usize,
    data: usize,
    regions: usize,
}

impl Layout {
    fn of(chunk: &[u32]) -> Layout {
        Layout {
            bits: chunk[2],
            bpm: chunk[3].max(1),
            cycle: chunk[13].max(1),
            scan: chunk[4] as usize,
            comps: chunk[5] as usize,
            map: chunk[6] as usize,
            segs: chunk[7] as usize,
            subs: chunk[8] as usize,
            data: chunk[9] as usize,
            regions: chunk[14] as usize,
        }
    }

    /// Subsequence `s`: its segment, first bit, end bit, whether it is the segment's
    /// first.
    fn sub(&self, chunk: &[u32], s: u32) -> (usize, u32, u32, bool) {
        let at = self.subs + SUBSEQUENCE_WORDS * s as usize;
        (
            chunk[at] as usize,
            chunk[at + 1],
            chunk[at + 2],
            chunk[at + 3] & 1 == 1,
        )
    }
}

/// The decoder's state between two symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    /// Bit of the next code.
    pos: u32,
    /// Block within the MCU (0 when every block of an MCU has the same tables).
    b: u32,
    /// Zigzag index of the next coefficient (0: the DC).
    k: u32,
}

impl Cursor {
    fn read(rec: &[u32], at: usize) -> Cursor {
        Cursor {
            pos: rec[at],
            b: rec[at + 1] & 0xFF,
            k: rec[at + 1] >> 8,
        }
    }

    fn bk(&self) -> u32 {
        self.b | self.k << 8
    }
}

/// The 32 bits from bit `pos` of the data, the bits at and past `end` zero.
fn peek(chunk: &[u32], data: usize, pos: u32, end: u32) -> u32 {
    if pos >= end {
        return 0;
    }
    let w = data + (pos / 32) as usize;
    let off = pos % 32;
    let mut v = chunk[w] << off;
    if off != 0 {
        v |= chunk[w + 1] >> (32 - off);
    }
    let left = end - pos;
    if left < 32 {
        v &= !(u32::MAX >> left);
    }
    v
}

/// The code at the top of `v` in the decode table at `t`: `(length, symbol, status)`;
/// 16 bits that match no code are consumed as symbol 0 ([`STATUS_BAD_CODE`]), as
/// [`huffman_interval`]'s reader does.
fn lookup(chunk: &[u32], t: usize, v: u32) -> (u32, u32, u32) {
    let peek = v >> 24;
    let e = (chunk[t + (peek / 2) as usize] >> (16 * (peek % 2))) & 0xFFFF;
    if e != 0 {
        return (e >> 8, e & 0xFF, 0);
    }
    let p16 = v >> 16;
    for l in 9..=16u32 {
        let code = (p16 >> (16 - l)) as i32;
        if code <= chunk[t + MAXCODE + l as usize] as i32 {
            let idx = (code.wrapping_add(chunk[t + VALOFFSET + l as usize] as i32) as u32) & 0xFF;
            let sym = (chunk[t + HUFFVAL + (idx / 4) as usize] >> (8 * (idx % 4))) & 0xFF;
            return (l, sym, 0);
        }
    }
    (16, 0, STATUS_BAD_CODE)
}

/// What one symbol did.
struct Symbol {
    /// It was a block's DC.
    dc: bool,
    /// The DC difference.
    diff: i32,
    /// The natural index of the AC coefficient it set (64: none).
    z: u32,
    /// That coefficient (16 bits).
    val: u32,
    /// [`STATUS_BAD_CODE`], [`STATUS_OVERFLOW`].
    status: u32,
}

/// Decodes the symbol at `c` (the reader's data ending at bit `end`) and moves `c` past
/// it: libjpeg's `decode_mcu` one symbol at a time, as [`huffman_interval`] runs it.
fn step(chunk: &[u32], l: &Layout, end: u32, c: &mut Cursor) -> Symbol {
    let j = (chunk[l.map + c.b as usize] & 0xFF) as usize;
    let v = peek(chunk, l.data, c.pos, end);
    let dc = c.k == 0;
    let t = chunk[l.scan + if dc { 8 } else { 12 } + j] as usize;
    let (len, sym, status) = lookup(chunk, t, v);
    // `sym & 15` extra bits follow the code: at most 16 + 15 bits in all.
    let s = sym & 15;
    let extra = if s == 0 { 0 } else { (v << len) >> (32 - s) };
    let mut out = Symbol {
        dc,
        diff: 0,
        z: 64,
        val: 0,
        status,
    };
    c.pos += len + s;
    if dc {
        // A DC symbol is at most 15 (`table_words` refuses a table with more).
        out.diff = extend(extra, s);
        c.k = 1;
        return out;
    }
    let run = sym >> 4;
    if s != 0 {
        let mut k = c.k + run;
        if k > 63 {
            out.status |= STATUS_OVERFLOW;
            k = 63;
        }
        out.z = u32::from(NATURAL[k as usize]);
        out.val = extend(extra, s) as u32 & 0xFFFF;
        c.k = k + 1;
    } else if run == 15 {
        c.k += 16;
    } else {
        c.k = 64;
    }
    if c.k >= 64 {
        c.k = 0;
        c.b = (c.b + 1) % l.cycle;
    }
    out
}

/// The decode of one subsequence from `c` while the cursor is before `sub_end` (in a
/// segment whose data ends at `seg_end`) into record words 2-14 at `out`: the exit
/// cursor, the blocks whose DC it decoded, and the sums of their DC differences by
/// phase (block `i` of the decode in sum `i % bpm`: which component that is, only the
/// scan knows). Every symbol takes at least one bit, so `l.bits` steps always reach the
/// end.
fn span(chunk: &[u32], l: &Layout, mut c: Cursor, sub_end: u32, seg_end: u32, out: &mut [u32]) {
    let mut blocks = 0u32;
    let mut phase = 0usize;
    let mut sums = [0u32; MAX_MCU_BLOCKS];
    for _ in 0..l.bits {
        if c.pos >= sub_end {
            break;
        }
        let sym = step(chunk, l, seg_end, &mut c);
        if sym.dc {
            blocks += 1;
            sums[phase] = sums[phase].wrapping_add(sym.diff as u32);
            phase = (phase + 1) % l.bpm as usize;
        }
    }
    out[0] = c.pos;
    out[1] = c.bk();
    out[2] = blocks;
    out[3..3 + MAX_MCU_BLOCKS].copy_from_slice(&sums);
}

/// Record words 0-14 of a decode of subsequence `s` from `c`.
fn record(chunk: &[u32], l: &Layout, s: u32, c: Cursor, out: &mut [u32]) {
    let (seg, _, end, _) = l.sub(chunk, s);
    let seg_end = chunk[l.segs + SEGMENT_WORDS * seg + 1];
    let r = RECORD_WORDS * s as usize;
    out[r] = c.pos;
    out[r + 1] = c.bk();
    span(chunk, l, c, end, seg_end, &mut out[r + 2..r + 15]);
}

/// Pass 1, thread `s`: decodes subsequence `s` from its first bit with block 0 of an
/// MCU at its DC, into record `s` of `rec`.
pub fn sync_start(chunk: &[u32], rec: &mut [u32], s: u32) {
    let l = Layout::of(chunk);
    let (_, start, _, _) = l.sub(chunk, s);
    let c = Cursor {
        pos: start,
        b: 0,
        k: 0,
    };
    record(chunk, &l, s, c, rec);
}

/// A sync round, thread `s`: record `s` of `prev` into `next`, decoded again from the
/// exit of record `s - 1` of `prev` when that is not its start (never for the first
/// subsequence of a segment). Returns 1 when its exit changed, else 0: a round in which
/// no thread returns 1 leaves every record true.
pub fn sync_round(chunk: &[u32], prev: &[u32], next: &mut [u32], s: u32) -> u32 {
    let l = Layout::of(chunk);
    let r = RECORD_WORDS * s as usize;
    next[r..r + RECORD_WORDS].copy_from_slice(&prev[r..r + RECORD_WORDS]);
    let (_, _, _, first) = l.sub(chunk, s);
    if first {
        return 0;
    }
    let p = r - RECORD_WORDS;
    if prev[p + 2] == prev[r] && prev[p + 3] == prev[r + 1] {
        return 0;
    }
    record(chunk, &l, s, Cursor::read(prev, p + 2), next);
    u32::from(next[r + 2] != prev[r + 2] || next[r + 3] != prev[r + 3])
}

/// The scan, thread `g`: the exclusive prefix sums over segment `g`'s subsequences of
/// their blocks and, per scan component, of their DC differences (phase `p` of a
/// subsequence whose first block is block `at` of the segment is block map entry
/// `(at + p) % bpm`) into record words 15-19. Returns
/// [`STATUS_OUT_OF_DATA`] when the segment's data holds fewer blocks than its MCUs,
/// else 0.
pub fn sync_scan(chunk: &[u32], rec: &mut [u32], g: u32) -> u32 {
    let l = Layout::of(chunk);
    let seg = l.segs + SEGMENT_WORDS * g as usize;
    let (blocks, first, n) = (chunk[seg + 3], chunk[seg + 4], chunk[seg + 5]);
    let mut at = 0u32;
    let mut dc = [0u32; 4];
    for s in first..first + n {
        let r = RECORD_WORDS * s as usize;
        rec[r + 15] = at;
        rec[r + 16..r + 20].copy_from_slice(&dc);
        for p in 0..l.bpm {
            let j = (chunk[l.map + ((at + p) % l.bpm) as usize] & 3) as usize;
            dc[j] = dc[j].wrapping_add(rec[r + 5 + p as usize]);
        }
        at = at.saturating_add(rec[r + 4]);
    }
    if at < blocks {
        STATUS_OUT_OF_DATA
    } else {
        0
    }
}

/// Writes block `g` of the scan (MCU order; `bj` its block map word) to `coefs`, when
/// it lies in its component's block grid and region. Returns [`STATUS_SIMD_RANGE`] or 0.
fn put(chunk: &[u32], l: &Layout, coefs: &mut [u32], g: u32, bj: u32, blk: &[u32; 32]) -> u32 {
    let j = (bj & 0xFF) as usize;
    let cw = chunk[l.scan + 4 + j];
    let (h, v) = if chunk[l.scan + 3] & 1 == 1 {
        (1, 1)
    } else {
        ((cw >> 8) & 0xFF, (cw >> 16) & 0xFF)
    };
    let per_row = chunk[l.scan + 1].max(1);
    let mcu = g / l.bpm;
    let bx = (mcu % per_row) * h + ((bj >> 8) & 0xFF);
    let by = (mcu / per_row) * v + ((bj >> 16) & 0xFF);
    let cd = l.comps + 4 * (cw & 0xFF) as usize;
    let (coef_offset, wib, hib, quant) = (chunk[cd], chunk[cd + 1], chunk[cd + 2], chunk[cd + 3]);
    let rg = l.regions + 4 * (cw & 0xFF) as usize;
    let (bx0, by0, bw, bh) = (chunk[rg], chunk[rg + 1], chunk[rg + 2], chunk[rg + 3]);
    if bx >= wib || by >= hib || bx < bx0 || by < by0 || bx - bx0 >= bw || by - by0 >= bh {
        return 0;
    }
    let at = coef_offset as usize + 32 * ((by - by0) * bw + (bx - bx0)) as usize;
    coefs[at..at + 32].copy_from_slice(blk);
    if simd_agrees(chunk, quant as usize, blk) {
        0
    } else {
        STATUS_SIMD_RANGE
    }
}

/// Whether the write limit (header word 15, [`super::set_sync_limit`]) saves the write
/// pass subsequence `s` (record `s` of `rec`, after the scan): its first block is one of
/// its segment's blocks but lies at or past the limit. (A subsequence whose first block
/// lies past its segment's last, in the padding, writes nothing with or without a
/// limit, and is not counted.)
pub fn sync_skips(chunk: &[u32], rec: &[u32], s: u32) -> bool {
    let l = Layout::of(chunk);
    let (seg, _, _, _) = l.sub(chunk, s);
    let sd = l.segs + SEGMENT_WORDS * seg;
    let (first_block, blocks) = (chunk[sd + 2], chunk[sd + 3]);
    let at = rec[RECORD_WORDS * s as usize + 15];
    at >= chunk[15].saturating_sub(first_block) && at < blocks
}

/// Pass 4, thread `s`: decodes subsequence `s` again from its true start (record `s`
/// of `rec`, after the rounds and the scan) and writes the blocks whose DC starts in it
/// to `coefs` (those of its segment's first `blocks` only, and of the scan's first
/// header word 15: a subsequence whose first block lies past them returns at once
/// ([`sync_skips`]), the one holding the last stops after it). Returns its status word.
pub fn sync_write(chunk: &[u32], rec: &[u32], coefs: &mut [u32], s: u32) -> u32 {
    let l = Layout::of(chunk);
    let (seg, _, end, _) = l.sub(chunk, s);
    let sd = l.segs + SEGMENT_WORDS * seg;
    let (seg_end, first_block, blocks) = (chunk[sd + 1], chunk[sd + 2], chunk[sd + 3]);
    let r = RECORD_WORDS * s as usize;
    // The segment's blocks before the write limit.
    let room = chunk[15].saturating_sub(first_block);
    if rec[r + 15] >= room {
        return 0;
    }
    let mut c = Cursor::read(rec, r);
    let mut next = rec[r + 15];
    let mut pred = [rec[r + 16], rec[r + 17], rec[r + 18], rec[r + 19]];
    let mut status = 0u32;
    // In a block of its own (not the end of the predecessor's), and that block's index
    // in the segment and block map word.
    let (mut mine, mut at, mut bj) = (false, 0u32, 0u32);
    let mut blk = [0u32; 32];
    let mut done = false;
    // Every symbol starting before `end` takes a bit, and the last block at most 63
    // more symbols.
    for _ in 0..l.bits + 64 {
        if c.k == 0 {
            if c.pos >= end || next >= room {
                done = true;
                break;
            }
            // The segment's first block starts an MCU.
            (mine, at, bj) = (true, next, chunk[l.map + (next % l.bpm) as usize]);
            next = next.saturating_add(1);
            blk = [0; 32];
        } else if !mine && c.pos >= end {
            done = true;
            break;
        }
        let sym = step(chunk, &l, seg_end, &mut c);
        if !mine || at >= blocks {
            continue;
        }
        status |= sym.status;
        if sym.dc {
            let j = (bj & 3) as usize;
            pred[j] = pred[j].wrapping_add(sym.diff as u32);
            blk[0] = pred[j] & 0xFFFF;
        } else if sym.z < 64 {
            blk[(sym.z / 2) as usize] |= sym.val << (16 * (sym.z % 2));
        }
        if c.k == 0 {
            status |= put(chunk, &l, coefs, first_block + at, bj, &blk);
            if at + 1 == blocks {
                if c.pos > seg_end {
                    status |= STATUS_OUT_OF_DATA;
                } else if seg_end - c.pos >= 8 {
                    status |= STATUS_LEFTOVER;
                }
            }
        }
    }
    if !done {
        // Unreachable by the bound above; never a silent short decode.
        status |= STATUS_NO_SYNC;
    }
    status
}

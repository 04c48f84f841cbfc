//! The bit reader of one interval, as the device pass reads the entropy-coded bytes.

use super::*;

/// Byte `b` of the chunk.
fn byte_at(chunk: &[u32], b: u32) -> u32 {
    (chunk[(b / 4) as usize] >> (8 * (b % 4))) & 0xFF
}

/// The bit reader of one interval: `acc` holds `n` bits, left-aligned; past the end of
/// the data it is fed zero bytes, counted in `virt` (bits), as libjpeg fills zeros.
pub(super) struct Bits {
    pub(super) pos: u32,
    pub(super) end: u32,
    pub(super) acc: u32,
    pub(super) n: u32,
    pub(super) virt: u32,
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

    pub(super) fn get(&mut self, chunk: &[u32], k: u32) -> u32 {
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
    pub(super) fn decode(&mut self, chunk: &[u32], t: usize) -> Option<u32> {
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

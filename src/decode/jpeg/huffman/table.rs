//! The decode tables: a Huffman table as a file defines it, and the lookup form the
//! device reads ([`table_words`]).

use super::*;

/// One Huffman table as a file defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HuffSpec {
    pub(super) counts: [u8; 16],
    pub(super) values: [u8; 256],
    pub(super) len: usize,
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

//! The scalar oracle of the device pass: one interval's MCUs decoded into blocks
//! ([`huffman_interval`]), and a whole image so decoded ([`decode_coefficients`]).

use super::*;
use crate::decode::jpeg::coeffs::Coefficients;
use crate::decode::DecodeError;

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
    let mut first = Vec::with_capacity(scan.header.components.len());
    for (c, d) in scan.header.components.iter().zip(&p.packed.components) {
        // The whole image's region is every block (pack_header clamps to the grid).
        if (d.bx0, d.by0, d.bw, d.bh) != (0, 0, c.width_in_blocks, c.height_in_blocks) {
            return Err(DecodeError::BadHeader(
                "whole-image region is not the block grid".into(),
            ));
        }
        first.push(d.coef_offset as usize);
    }
    unpack_blocks(scan, &coefs, &first, out)?;
    Ok(status)
}

/// `out` refilled with `scan`'s frame and every block of each frame component `ci`'s
/// grid, row-major, from the words of `coefs` at `first[ci]` on (32 words a block, two
/// coefficients a word, low half first): what both oracles decoded, as
/// `jpeg_read_coefficients` gives it.
pub(super) fn unpack_blocks(
    scan: &RestartScan,
    coefs: &[u32],
    first: &[usize],
    out: &mut Coefficients,
) -> Result<(), DecodeError> {
    out.clear();
    let hdr = &scan.header;
    (out.width, out.height, out.color) = (hdr.width, hdr.height, hdr.color);
    (out.adobe_inverted, out.max_h, out.max_v) = (hdr.adobe_inverted, hdr.max_h, hdr.max_v);
    for (c, &at) in hdr.components.iter().zip(first) {
        let n = c.width_in_blocks as usize * c.height_in_blocks as usize;
        let words = coefs
            .get(at..at + 32 * n)
            .ok_or_else(|| DecodeError::BadHeader("blocks outside the coefficients".into()))?;
        let dst = out.push_component(
            c.h_samp,
            c.v_samp,
            c.width_in_blocks,
            c.height_in_blocks,
            c.quant,
        );
        for words in words.chunks_exact(32) {
            let mut block = [0i16; 64];
            for (z, v) in block.iter_mut().enumerate() {
                *v = (words[z / 2] >> (16 * (z % 2))) as u16 as i16;
            }
            dst.blocks.push(block);
        }
    }
    Ok(())
}

/// [`crate::decode::jpeg::idct::agrees_with_simd`] for the block words `blk` and the quantisation
/// table at word `quant` of `chunk`: the device pass checks every block it writes so.
pub(super) fn simd_agrees(chunk: &[u32], quant: usize, blk: &[u32; 32]) -> bool {
    let mut block = [0i16; 64];
    let mut q = [0u16; 64];
    for z in 0..64 {
        block[z] = (blk[z / 2] >> (16 * (z % 2))) as u16 as i16;
        q[z] = (chunk[quant + z / 2] >> (16 * (z % 2))) as u16;
    }
    crate::decode::jpeg::idct::agrees_with_simd(&block, &q)
}

/// JPEG's sign extension of an `s`-bit magnitude `r`.
pub(super) fn extend(r: u32, s: u32) -> i32 {
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

// Huffman decoding of restart intervals: a line-by-line port of the scalar oracle
// `huffman_interval` in src/decode/jpeg/huffman.rs (libjpeg's jdhuff.c: the bit buffer of
// jpeg_fill_bit_buffer, HUFF_DECODE's 8-bit lookahead and jpeg_huff_decode's slow path,
// decode_mcu_slow's coefficient loop), over the layout documented there, and of the check
// `agrees_with_simd` in src/decode/jpeg/idct.rs (its IDCT passes as shaders/idct.wgsl
// computes them).
//
// One invocation per restart interval of the chunk: it decodes the interval's MCUs, each
// block into private memory, writes the blocks that lie in their component's region to
// `coefs` whole, and its status word (0: clean, otherwise STATUS_* bits) to
// `status[desc.status]`. Bytes are read only below the interval's end (past it the bit
// buffer is fed zeros, as libjpeg does). All integer arithmetic is 32-bit and wraps, as in
// the oracle.

// Binding 0, `blob` (the chunk), its header and ComponentDesc words, the invocation index
// and the lookups into the chunk are in shaders/decode_common.wgsl, joined after this file.
// The IntervalDesc, ScanDesc and decode table words and the status bits are those of
// src/backend/device/constants.rs, joined in front of it.
@group(0) @binding(1) var<storage, read_write> coefs: array<u32>;
@group(0) @binding(2) var<storage, read_write> status: array<u32>;

// NATURAL, long_code and extend are shaders/huffman_common.wgsl's, joined after this file.

// The bit reader (the oracle's Bits): the next byte, the interval's end, `nbits` bits
// left-aligned in `acc`, and the zero bits fed past the end.
var<private> pos: u32;
var<private> stop: u32;
var<private> acc: u32;
var<private> nbits: u32;
var<private> virt: u32;

// The block being decoded (32 words: coefficient z in half z % 2 of word z / 2). The
// pass-1 workspace of the SIMD check, `ws`, is idct_common.wgsl's.
var<private> blk: array<u32, 32>;

// Byte `b` of the chunk.
fn byte_at(b: u32) -> u32 {
    return (blob[b / 4u] >> (8u * (b % 4u))) & 0xFFu;
}

// jpeg_fill_bit_buffer: at least 25 bits in the buffer; FF 00 is one FF; past the end,
// zero bytes.
fn fill() {
    // Straight-line (at most four bytes), not a loop: llvmpipe gives an invocation a
    // budget of loop iterations (its loop limiter), which a loop here would spend.
    fill_byte();
    fill_byte();
    fill_byte();
    fill_byte();
}

fn fill_byte() {
    if (nbits <= 24u) {
        var b = 0u;
        if (pos < stop) {
            b = byte_at(pos);
            pos += 1u;
            if (b == 0xFFu && pos < stop && byte_at(pos) == 0u) {
                pos += 1u;
            }
        } else {
            virt += 8u;
        }
        acc = acc | (b << (24u - nbits));
        nbits += 8u;
    }
}

fn skip(k: u32) {
    acc = acc << k;
    nbits -= k;
}

// GET_BITS.
fn get_bits(k: u32) -> u32 {
    if (k == 0u) {
        return 0u;
    }
    fill();
    let v = acc >> (32u - k);
    skip(k);
    return v;
}

// HUFF_DECODE with the table at word `t`: the 8-bit lookahead, then jpeg_huff_decode's
// codes of 9-16 bits (`long_code`); BAD_CODE (16 bits consumed) when none matches.
fn decode(t: u32) -> u32 {
    fill();
    let peek = acc >> 24u;
    let e = (blob[t + peek / 2u] >> (16u * (peek % 2u))) & 0xFFFFu;
    var len = e >> 8u;
    var sym = e & 0xFFu;
    if (e == 0u) {
        let lc = long_code(t, acc >> 16u);
        len = lc.x;
        sym = lc.y;
    }
    if (len > 16u) {
        skip(16u);
        return BAD_CODE;
    }
    skip(len);
    return sym;
}

// ---------------------------------------------------------------------------------------
// agrees_with_simd (idct.rs) on `blk`: shaders/simd_range.wgsl, joined after this file.

@compute @workgroup_size(32)
fn huffman(inv: Invocation) {
    let i = flat_id(inv, 32u);
    if (i < blob[H_INTERVALS]) {
        decode_interval(i);
    }
}

// One interval (`huffman_interval`).
fn decode_interval(i: u32) {
    let comp_table = blob[H_COMPONENT_TABLE];
    let iv = blob[H_INTERVAL_TABLE] + 8u * i;
    let scan = blob[iv + V_SCAN];
    let first_mcu = blob[iv + V_FIRST_MCU];
    let mcus = blob[iv + V_MCUS];
    pos = blob[iv + V_START];
    stop = blob[iv + V_END];
    acc = 0u;
    nbits = 0u;
    virt = 0u;
    let ncomp = min(blob[scan + S_COMPONENTS], 4u);
    let per_row = max(blob[scan + S_MCUS_PER_ROW], 1u);
    let first_component = blob[scan + S_FIRST_COMPONENT];
    let single = (blob[scan + S_FLAGS] & 1u) == 1u;
    var st = 0u;
    var pred = array<i32, 4>(0, 0, 0, 0);
    // The blocks of an MCU, per scan component: its first block and its h x v.
    var firsts = array<u32, 5>(0u, 0u, 0u, 0u, 0u);
    for (var j = 0u; j < ncomp; j++) {
        let cw = blob[scan + S_COMP + j];
        var hv = 1u;
        if (!single) {
            hv = ((cw >> 8u) & 0xFFu) * ((cw >> 16u) & 0xFFu);
        }
        firsts[j + 1u] = firsts[j] + hv;
    }
    let per_mcu = max(firsts[ncomp], 1u);
    // One loop over the interval's blocks, in MCU order (each MCU: each scan component's
    // v rows of h blocks), rather than four nested loops: llvmpipe skipped the last
    // block of an interval when every lane of a group ran the nested loops in step.
    // The same bound for every invocation of the chunk, each skipping what is past its
    // own interval: llvmpipe mis-masks the lanes of a loop whose bound differs from lane
    // to lane (it ran some past their end and stopped others early).
    let total = mcus * per_mcu;
    let bound = max(blob[H_MAX_BLOCKS], total);
    for (var b = 0u; b < bound; b++) {
      if (b < total) {
        let m = b / per_mcu;
        let rb = b % per_mcu;
        var j = 0u;
        for (var c = 1u; c < ncomp; c++) {
            if (rb >= firsts[c]) {
                j = c;
            }
        }
        let mcu = first_mcu + m;
        let mx = mcu % per_row;
        let my = mcu / per_row;
        let cw = blob[scan + S_COMP + j];
        let fi = cw & 0xFFu;
        var h = 1u;
        if (!single) {
            h = (cw >> 8u) & 0xFFu;
        }
        let y = (rb - firsts[j]) / max(h, 1u);
        let x = (rb - firsts[j]) % max(h, 1u);
        var v = 1u;
        if (!single) {
            v = (cw >> 16u) & 0xFFu;
        }
        let dct = blob[scan + S_DC_TABLE + j];
        let act = blob[scan + S_AC_TABLE + j];
        let cd = comp_table + 16u * (first_component + fi);
        let coef_offset = blob[cd + C_COEF];
        let quant = blob[cd + C_QUANT];
        let bx0 = blob[cd + C_BX0];
        let by0 = blob[cd + C_BY0];
        let bw = blob[cd + C_BW];
        let bh = blob[cd + C_BH];
        blk = array<u32, 32>();
        // DC.
        var s = decode(dct);
        if (s == BAD_CODE) {
            st |= STATUS_BAD_CODE;
            s = 0u;
        }
        let r = get_bits(s);
        pred[j] = pred[j] + extend(r, s);
        blk[0] = u32(pred[j]) & 0xFFFFu;
        // AC.
        var k = 1u;
        while (k < 64u) {
            var rs = decode(act);
            if (rs == BAD_CODE) {
                st |= STATUS_BAD_CODE;
                rs = 0u;
            }
            let run = rs >> 4u;
            let sz = rs & 15u;
            if (sz != 0u) {
                k += run;
                let bits = get_bits(sz);
                let val = u32(extend(bits, sz)) & 0xFFFFu;
                if (k > 63u) {
                    st |= STATUS_OVERFLOW;
                    k = 63u;
                }
                let z = NATURAL[k];
                blk[z / 2u] = blk[z / 2u] | (val << (16u * (z % 2u)));
                k += 1u;
            } else if (run == 15u) {
                k += 16u;
            } else {
                // End of block. (No `break`: llvmpipe skipped the code after
                // this loop when every lane of a group left it so at once.)
                k = 64u;
            }
        }
        let bx = mx * h + x;
        let by = my * v + y;
        if (bx >= bx0 && bx < bx0 + bw && by >= by0 && by < by0 + bh) {
            if (!simd_agrees(quant)) {
                st |= STATUS_SIMD_RANGE;
            }
            let at = coef_offset + 32u * ((by - by0) * bw + (bx - bx0));
            store_block(at);
        }

    }
    }
    if (virt > nbits) {
        st |= STATUS_OUT_OF_DATA;
    } else if (pos < stop || nbits - virt >= 8u) {
        st |= STATUS_LEFTOVER;
    }
    status[blob[iv + V_STATUS]] = st;
}

// Huffman decoding of restart intervals: a line-by-line port of shaders/huffman.wgsl
// (itself a port of the scalar oracle `huffman_interval` in src/decode/jpeg/huffman.rs:
// libjpeg's jdhuff.c, the bit buffer of jpeg_fill_bit_buffer, HUFF_DECODE's 8-bit
// lookahead and jpeg_huff_decode's slow path, decode_mcu_slow's coefficient loop; and of
// `agrees_with_simd` in src/decode/jpeg/idct.rs, its IDCT passes as kernels/idct.cu
// computes them), over the layout documented in huffman.rs.
//
// Entry point `huffman`, 32 threads per block (a warp), one thread per restart interval of the
// chunk: it decodes the interval's MCUs, each block into its own frame, writes the blocks
// that lie in their component's region to `coefs` whole, and its status word (0: clean,
// otherwise STATUS_* bits) to `status[desc.status]`. Bytes are read only below the
// interval's end (past it the bit buffer is fed zeros, as libjpeg does).
// Bindings: 0 `blob` (the decode chunk; read), 1 `coefs` (the coefficient buffer;
// written), 2 `status` (the interval status words; written). No params.
//
// The oracle's i32 arithmetic wraps; here every such value is carried in a u32 (same bits,
// defined wrapping) and shifted right arithmetically with sra(). The zigzag order, the
// decode table lookup, extend and the SIMD check (simd_agrees) are
// kernels/huffman_common.cuh's, prepended to this file; the IDCT passes it runs those of
// kernels/idct_common.cuh, prepended before it; the chunk's header and ComponentDesc words
// and the invocation index those of kernels/decode_common.cuh, prepended before that. The
// IntervalDesc words and BAD_CODE are src/backend/device/constants.rs's, prepended to this
// file (and the ScanDesc and decode table words, the status bits and the IDCT and chunk
// constants to those headers).

// WGSL's module-scope private variables: the bit reader (the oracle's Bits: the next byte,
// the interval's end, `nbits` bits left-aligned in `acc`, the zero bits fed past the end),
// kept in registers; the block being decoded is a Block (kernels/huffman_common.cuh).
struct Bits {
    u32 pos;
    u32 stop;
    u32 acc;
    u32 nbits;
    u32 virt;
};

// Byte `b` of the chunk.
static __device__ __forceinline__ u32 byte_at(const u32* blob, u32 b) {
    return (blob[b / 4u] >> (8u * (b % 4u))) & 0xFFu;
}

// jpeg_fill_bit_buffer: at least 25 bits in the buffer; FF 00 is one FF; past the end,
// zero bytes.
static __device__ __forceinline__ void fill(const u32* blob, Bits& st) {
    while (st.nbits <= 24u) {
        u32 b = 0u;
        if (st.pos < st.stop) {
            b = byte_at(blob, st.pos);
            st.pos += 1u;
            if (b == 0xFFu && st.pos < st.stop && byte_at(blob, st.pos) == 0u) {
                st.pos += 1u;
            }
        } else {
            st.virt += 8u;
        }
        st.acc = st.acc | (b << (24u - st.nbits));
        st.nbits += 8u;
    }
}

static __device__ __forceinline__ void skip(Bits& st, u32 k) {
    st.acc = st.acc << k;
    st.nbits -= k;
}

// GET_BITS.
static __device__ __forceinline__ u32 get_bits(const u32* blob, Bits& st, u32 k) {
    if (k == 0u) {
        return 0u;
    }
    fill(blob, st);
    const u32 v = st.acc >> (32u - k);
    skip(st, k);
    return v;
}

// HUFF_DECODE with the table at word `t` (lookup, kernels/huffman_common.cuh); BAD_CODE
// (16 bits consumed) when no code matches.
static __device__ __forceinline__ u32 decode(const u32* blob, Bits& st, u32 t) {
    fill(blob, st);
    const Code c = lookup(blob, t, st.acc);
    skip(st, c.len);
    return c.status != 0u ? BAD_CODE : c.sym;
}

// ---------------------------------------------------------------------------------------

extern "C" __global__ void huffman(const KernelArgs a) {
    const u32* blob = (const u32*)a.ptr[0];
    u32* coefs = (u32*)a.ptr[1];
    u32* status = (u32*)a.ptr[2];
    const u32 i = flat_id(32u);
    if (i >= blob[H_INTERVALS]) {
        return;
    }
    const u32 comp_table = blob[H_COMPONENT_TABLE];
    const u32 iv = blob[H_INTERVAL_TABLE] + 8u * i;
    const u32 scan = blob[iv + V_SCAN];
    const u32 first_mcu = blob[iv + V_FIRST_MCU];
    const u32 mcus = blob[iv + V_MCUS];
    Bits st;
    st.pos = blob[iv + V_START];
    st.stop = blob[iv + V_END];
    st.acc = 0u;
    st.nbits = 0u;
    st.virt = 0u;
    const u32 ncomp = umin(blob[scan + S_COMPONENTS], 4u);
    const u32 per_row = umax(blob[scan + S_MCUS_PER_ROW], 1u);
    const u32 first_component = blob[scan + S_FIRST_COMPONENT];
    const bool single = (blob[scan + S_FLAGS] & 1u) == 1u;
    Block b;
    u32 stat = 0u;
    u32 pred[4] = {0u, 0u, 0u, 0u};
#pragma unroll 1
    for (u32 m = 0u; m < mcus; m++) {
        const u32 mcu = first_mcu + m;
        const u32 mx = mcu % per_row;
        const u32 my = mcu / per_row;
#pragma unroll 1
        for (u32 j = 0u; j < ncomp; j++) {
            const u32 cw = blob[scan + S_COMP + j];
            const u32 fi = cw & 0xFFu;
            u32 h = 1u;
            u32 v = 1u;
            if (!single) {
                h = (cw >> 8u) & 0xFFu;
                v = (cw >> 16u) & 0xFFu;
            }
            const u32 dct = blob[scan + S_DC_TABLE + j];
            const u32 act = blob[scan + S_AC_TABLE + j];
            const u32 cd = comp_table + 16u * (first_component + fi);
            const u32 coef_offset = blob[cd + C_COEF];
            const u32 quant = blob[cd + C_QUANT];
            const u32 bx0 = blob[cd + C_BX0];
            const u32 by0 = blob[cd + C_BY0];
            const u32 bw = blob[cd + C_BW];
            const u32 bh = blob[cd + C_BH];
#pragma unroll 1
            for (u32 y = 0u; y < v; y++) {
#pragma unroll 1
                for (u32 x = 0u; x < h; x++) {
#pragma unroll
                    for (u32 w = 0u; w < 32u; w++) {
                        b.blk[w] = 0u;
                    }
                    // DC.
                    u32 s = decode(blob, st, dct);
                    if (s == BAD_CODE) {
                        stat |= STATUS_BAD_CODE;
                        s = 0u;
                    }
                    const u32 r = get_bits(blob, st, s);
                    pred[j] = pred[j] + extend(r, s);
                    b.blk[0] = pred[j] & 0xFFFFu;
                    // AC.
                    u32 k = 1u;
#pragma unroll 1
                    while (k < 64u) {
                        u32 rs = decode(blob, st, act);
                        if (rs == BAD_CODE) {
                            stat |= STATUS_BAD_CODE;
                            rs = 0u;
                        }
                        const u32 run = rs >> 4u;
                        const u32 sz = rs & 15u;
                        if (sz != 0u) {
                            k += run;
                            const u32 bits = get_bits(blob, st, sz);
                            const u32 val = extend(bits, sz) & 0xFFFFu;
                            if (k > 63u) {
                                stat |= STATUS_OVERFLOW;
                                k = 63u;
                            }
                            const u32 z = NATURAL[k];
                            b.blk[z / 2u] = b.blk[z / 2u] | (val << (16u * (z % 2u)));
                        } else {
                            if (run != 15u) {
                                break;
                            }
                            k += 15u;
                        }
                        k += 1u;
                    }
                    const u32 bx = mx * h + x;
                    const u32 by = my * v + y;
                    if (bx >= bx0 && bx < bx0 + bw && by >= by0 && by < by0 + bh) {
                        if (!simd_agrees(blob, b, quant)) {
                            stat |= STATUS_SIMD_RANGE;
                        }
                        const u32 at = coef_offset + 32u * ((by - by0) * bw + (bx - bx0));
#pragma unroll
                        for (u32 w = 0u; w < 32u; w++) {
                            coefs[at + w] = b.blk[w];
                        }
                    }
                }
            }
        }
    }
    if (st.virt > st.nbits) {
        stat |= STATUS_OUT_OF_DATA;
    } else if (st.pos < st.stop || st.nbits - st.virt >= 8u) {
        stat |= STATUS_LEFTOVER;
    }
    status[blob[iv + V_STATUS]] = stat;
}

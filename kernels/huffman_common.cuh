// What the two Huffman kernels share: the restart-interval decode (kernels/huffman.cu)
// and the self-synchronising decode (kernels/sync_huffman.cu), ports of the scalar
// oracles in src/decode/jpeg/huffman/ (interval.rs, sync/pass.rs): the zigzag order,
// the decode table lookup, HUFF_EXTEND and the check `agrees_with_simd` of a decoded
// block. The host prepends it to those two sources only, after common.cuh,
// decode_common.cuh (column_words) and idct_common.cuh (the IDCT passes the check runs)
// (src/backend/cuda/kernels.rs); tests/kernel_host/emulator.cpp includes it in the
// namespace of each, so it has no include guard. Its constants (the ScanDesc and decode
// table words, the status bits, the check's quick bound) are
// src/backend/device/constants.rs's, prepended to this file.

// jpeg_natural_order: zigzag index to natural (row-major) index.
__constant__ const unsigned char NATURAL[64] = {
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
    12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
    35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
    58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
};

// A decoded block (32 words: coefficient z in half z % 2 of word z / 2) and the pass-1
// workspace of the SIMD check (row * 8 + column), indexed by data and so in the thread's
// local memory. The check's loops are left rolled (it runs only for blocks past the
// quick bound), so the workspace does not take 64 registers from every thread.
struct Block {
    u32 blk[32];
    u32 ws[64];
};

// One Huffman code: its length in bits, its symbol, and STATUS_BAD_CODE where none
// matched (then 16 bits and symbol 0).
struct Code {
    u32 len;
    u32 sym;
    u32 status;
};

// The code at the top of `v` (at least its 16 high bits valid) in the decode table at
// word `t`: HUFF_DECODE's 8-bit lookahead, then jpeg_huff_decode's codes of 9-16 bits,
// the shortest that fits; 16 bits that match no code are consumed as symbol 0.
static __device__ __forceinline__ Code lookup(const u32* blob, u32 t, u32 v) {
    const u32 peek = v >> 24u;
    const u32 e = (blob[t + peek / 2u] >> (16u * (peek % 2u))) & 0xFFFFu;
    if (e != 0u) {
        return Code{e >> 8u, e & 0xFFu, 0u};
    }
    const u32 p16 = v >> 16u;
#pragma unroll 1
    for (u32 l = 9u; l <= 16u; l++) {
        const u32 code = p16 >> (16u - l);
        if ((i32)code <= (i32)blob[t + T_MAXCODE + l]) {
            const u32 idx = (code + blob[t + T_VALOFFSET + l]) & 0xFFu;
            return Code{l, (blob[t + T_HUFFVAL + idx / 4u] >> (8u * (idx % 4u))) & 0xFFu, 0u};
        }
    }
    return Code{16u, 0u, STATUS_BAD_CODE};
}

// HUFF_EXTEND: the sign extension of an `s`-bit magnitude `r`.
static __device__ __forceinline__ u32 extend(u32 r, u32 s) {
    if (s == 0u) {
        return 0u;
    }
    if (r < (1u << (s - 1u))) {
        return r - (1u << s) + 1u;
    }
    return r;
}

// ---------------------------------------------------------------------------------------
// agrees_with_simd (idct.rs) on the block: the IDCT passes of kernels/idct.cu, each pass-1
// value checked to fit in 16 bits and each sample (before the range limit) to lie within
// -512..=511.

static __device__ __forceinline__ u32 coef(const Block& bk, u32 i) {
    return half16(bk.blk[i / 2u], i);
}

// DEQUANTIZE: coefficient times the quantiser, taken as a short.
static __device__ __forceinline__ u32 deq(const u32* blob, const Block& bk, u32 qt, u32 i) {
    return coef(bk, i) * half16(blob[qt + i / 2u], i);
}

static __device__ __forceinline__ bool in_range(u32 x) {
    return (i32)x >= -512 && (i32)x <= 511;
}

// Column `col` of the block, by row: the coefficients the IDCT of output size `size`
// reads, zero for the rows it does not.
static __device__ __forceinline__ void column(const Block& bk, u32 size, u32 col, u32 c[8]) {
#pragma unroll
    for (u32 r = 0u; r < 8u; r++) {
        c[r] = idct_reads(size, r) ? coef(bk, r * 8u + col) : 0u;
    }
}

// islow_8x8, islow_4x4 or islow_2x2 (the passes of jpeg_idct_islow, jpeg_idct_4x4 or
// jpeg_idct_2x2, by `size`) within range: idct_pass1 and idct_pass2 of
// kernels/idct_common.cuh.
static __device__ __forceinline__ bool islow_agrees(const u32* blob, Block& bk, u32 qt, u32 size) {
    bool ok = true;
#pragma unroll 1
    for (u32 col = 0u; col < 8u; col++) {
        if (idct_reads(size, col)) {
            u32 c[8];
            u32 qw[8];
            column(bk, size, col, c);
            column_words(blob, qt, col, qw);
            ok = idct_pass1(bk.ws, col, c, qw, size) && ok;
        }
    }
#pragma unroll 1
    for (u32 row = 0u; row < size; row++) {
        u32 o[8];
        idct_pass2(bk.ws, row, size, o);
#pragma unroll 1
        for (u32 i = 0u; i < size; i++) {
            ok = ok && in_range(o[i]);
        }
    }
    return ok;
}

// agrees_with_simd: every dequantised coefficient within 16 bits; then the quick bound on
// their magnitudes, or every IDCT size's passes within range.
static __device__ __forceinline__ bool simd_agrees(const u32* blob, Block& bk, u32 qt) {
    u32 sum = 0u;
#pragma unroll 1
    for (u32 i = 0u; i < 64u; i++) {
        const u32 d = deq(blob, bk, qt, i);
        const u32 m = (i32)d < 0 ? 0u - d : d;
        if (m > 32767u) {
            return false;
        }
        sum += m;
    }
    if (sum <= QUICK_BOUND) {
        return true;
    }
    return islow_agrees(blob, bk, qt, 8u) && islow_agrees(blob, bk, qt, 4u) && islow_agrees(blob, bk, qt, 2u);
}

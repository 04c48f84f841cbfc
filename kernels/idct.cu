// Dequantisation and inverse DCT of JPEG blocks: a line-by-line port of shaders/idct.wgsl
// (itself a port of the scalar oracle src/decode/jpeg/idct.rs: libjpeg-turbo's
// jpeg_idct_islow and jidctred.c's 4x4, 2x2, 1x1), over the packed layout documented in
// src/decode/jpeg/coeffs.rs.
//
// Entry point `idct`, 64 threads per block, one thread per group of blocks side by side
// (1 block for 8x8 and 4x4 outputs, 2 for 2x2, 4 for 1x1), so it writes whole plane words
// and no two threads write the same word.
// Bindings: 0 `blob` (the decode chunk: header, image and component tables, data; read),
// 1 `planes` (component planes; written), 2 the blocks (the chunk again, or the
// coefficient buffer the `huffman` pass wrote; read). No params.
//
// The oracle's i32 arithmetic wraps; here every such value is carried in a u32 (same bits,
// defined wrapping) and shifted right arithmetically with sra(). The IDCT constants,
// half16, descale and the passes are in kernels/idct_common.cuh, prepended to this file
// (the `huffman` kernel's range check runs the same ones); the chunk's header and
// ComponentDesc words, the invocation index and the lookups into the chunk in
// kernels/decode_common.cuh, prepended before it.

// WGSL's module-scope private arrays (pass-1 results and output samples, row * 8 +
// column) live in the kernel's frame; every index is constant once the loops are unrolled,
// so they stay in registers.
struct IdctState {
    u32 ws[64];
    u32 samples[64];
};

// A block stored in the layout of output size `stored` (coeffs.rs): the kept rows by the
// kept columns, row-major; `side` of each, natural row or column x at `rank`.
static __device__ __forceinline__ u32 side(u32 stored) {
    if (stored == 8u) {
        return 8u;
    }
    if (stored == 4u) {
        return 7u;
    }
    if (stored == 2u) {
        return 5u;
    }
    return 1u;
}

static __device__ __forceinline__ u32 rank(u32 stored, u32 x) {
    if (stored == 8u) {
        return x;
    }
    if (stored == 4u) {
        return x - (x > 4u ? 1u : 0u);
    }
    if (stored == 2u) {
        return (x + 1u) / 2u;
    }
    return 0u;
}

// Words of one block in the layout of size `stored`.
static __device__ __forceinline__ u32 block_words(u32 stored) {
    const u32 n = side(stored);
    return (n * n + 1u) / 2u;
}

// Natural-order coefficient i of the block at `at`, stored in the layout of size `stored`.
static __device__ __forceinline__ u32 coef(const u32* blob, const u32* blocks, u32 at, u32 stored, u32 i) {
    const u32 k = rank(stored, i / 8u) * side(stored) + rank(stored, i % 8u);
    return half16(blocks[at + k / 2u], k);
}

// DEQUANTIZE: coefficient times the quantiser, taken as a short.
static __device__ __forceinline__ u32 deq(const u32* blob, const u32* blocks, u32 at, u32 stored, u32 qt, u32 i) {
    return coef(blob, blocks, at, stored, i) * half16(blob[qt + i / 2u], i);
}

// libjpeg's post-IDCT range limit (see range_limit in idct.rs).
static __device__ __forceinline__ u32 range_limit(u32 x) {
    const u32 i = x & 1023u;
    if (i < 128u) {
        return i + 128u;
    }
    if (i < 512u) {
        return 255u;
    }
    if (i < 896u) {
        return 0u;
    }
    return i - 896u;
}

// Column `col` of the block at `at` (in the layout of size `stored`), by row: the
// coefficients the IDCT of output size `size` reads, zero for the rows it does not.
static __device__ __forceinline__ void column(const u32* blob, const u32* blocks, u32 at, u32 stored, u32 size, u32 col, u32 c[8]) {
#pragma unroll
    for (u32 r = 0u; r < 8u; r++) {
        c[r] = idct_reads(size, r) ? coef(blob, blocks, at, stored, r * 8u + col) : 0u;
    }
}

// jpeg_idct_islow (size 8), jpeg_idct_4x4 (4) or jpeg_idct_2x2 (2): block at `at` (in the
// layout of size `stored`), quantisation table at `qt`, into st.samples (rows and columns
// 0..size). The passes are idct_pass1 and idct_pass2 of kernels/idct_common.cuh.
static __device__ __forceinline__ void idct_block(const u32* blob, const u32* blocks, u32 at, u32 stored, u32 qt, u32 size, IdctState& st) {
#pragma unroll
    for (u32 col = 0u; col < 8u; col++) {
        if (idct_reads(size, col)) {
            u32 c[8];
            u32 qw[8];
            column(blob, blocks, at, stored, size, col, c);
            column_words(blob, qt, col, qw);
            idct_pass1(st.ws, col, c, qw, size);
        }
    }
#pragma unroll
    for (u32 row = 0u; row < size; row++) {
        u32 o[8];
        idct_pass2(st.ws, row, size, o);
#pragma unroll
        for (u32 i = 0u; i < size; i++) {
            st.samples[row * 8u + i] = range_limit(o[i]);
        }
    }
}

// jpeg_idct_1x1.
static __device__ __forceinline__ u32 idct_1x1(const u32* blob, const u32* blocks, u32 at, u32 stored, u32 qt) {
    return range_limit(descale(deq(blob, blocks, at, stored, qt, 0u), 3u));
}

extern "C" __global__ void idct(const KernelArgs a) {
    const u32* blob = (const u32*)a.ptr[0];
    u32* planes = (u32*)a.ptr[1];
    // The blocks: the chunk itself for host-decoded coefficients, the coefficient buffer
    // for blocks the `huffman` pass decoded (`coef_offset` counts from its start).
    const u32* blocks = (const u32*)a.ptr[2];
    const u32 gid = flat_id(64u);
    if (gid >= blob[H_IDCT]) {
        return;
    }
    // The component whose invocations contain gid.
    const u32 c = record_of(blob, H_COMPONENT_TABLE, blob[H_COMPONENTS], C_GROUP_START, gid);
    const u32 size = comp_word(blob, c, C_DCT);
    const u32 bw = comp_word(blob, c, C_BW);
    const u32 bh = comp_word(blob, c, C_BH);
    const u32 per = umax(udiv(4u, size), 1u);
    const u32 gw = (bw + per - 1u) / per;
    const u32 local = gid - comp_word(blob, c, C_GROUP_START);
    const u32 gy = udiv(local, gw);
    const u32 gx = urem(local, gw);
    if (gy >= bh) {
        return;
    }
    const u32 qt = comp_word(blob, c, C_QUANT);
    const u32 coefs = comp_word(blob, c, C_COEF);
    const u32 plane = comp_word(blob, c, C_PLANE);
    const u32 stride = comp_word(blob, c, C_STRIDE);
    const u32 block0 = gy * bw + gx * per;
    // Host-decoded blocks are in the layout of the component's size, the huffman pass's
    // in that of size 8.
    const u32 stored = blob[H_FULL_BLOCKS] == 1u ? 8u : size;
    const u32 per_block = block_words(stored);
    IdctState st;
    if (size == 8u) {
        idct_block(blob, blocks, coefs + per_block * block0, stored, qt, 8u, st);
#pragma unroll
        for (u32 r = 0u; r < 8u; r++) {
            const u32 row = plane + (gy * 8u + r) * stride + gx * 2u;
            const u32 s = r * 8u;
            planes[row] = st.samples[s] | (st.samples[s + 1u] << 8u)
                | (st.samples[s + 2u] << 16u) | (st.samples[s + 3u] << 24u);
            planes[row + 1u] = st.samples[s + 4u] | (st.samples[s + 5u] << 8u)
                | (st.samples[s + 6u] << 16u) | (st.samples[s + 7u] << 24u);
        }
    } else if (size == 4u) {
        idct_block(blob, blocks, coefs + per_block * block0, stored, qt, 4u, st);
#pragma unroll
        for (u32 r = 0u; r < 4u; r++) {
            const u32 s = r * 8u;
            planes[plane + (gy * 4u + r) * stride + gx] = st.samples[s]
                | (st.samples[s + 1u] << 8u) | (st.samples[s + 2u] << 16u)
                | (st.samples[s + 3u] << 24u);
        }
    } else if (size == 2u) {
        u32 words[2] = {0u, 0u};
#pragma unroll
        for (u32 k = 0u; k < 2u; k++) {
            if (gx * 2u + k < bw) {
                idct_block(blob, blocks, coefs + per_block * (block0 + k), stored, qt, 2u, st);
#pragma unroll
                for (u32 r = 0u; r < 2u; r++) {
                    words[r] = words[r]
                        | ((st.samples[r * 8u] | (st.samples[r * 8u + 1u] << 8u)) << (16u * k));
                }
            }
        }
#pragma unroll
        for (u32 r = 0u; r < 2u; r++) {
            planes[plane + (gy * 2u + r) * stride + gx] = words[r];
        }
    } else {
        u32 word = 0u;
#pragma unroll
        for (u32 k = 0u; k < 4u; k++) {
            if (gx * 4u + k < bw) {
                word = word
                    | (idct_1x1(blob, blocks, coefs + per_block * (block0 + k), stored, qt) << (8u * k));
            }
        }
        planes[plane + gy * stride + gx] = word;
    }
}

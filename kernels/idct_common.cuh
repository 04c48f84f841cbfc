// The islow IDCT arithmetic of libjpeg-turbo (jpeg_idct_islow and jidctred.c's 4x4 and
// 2x2, as the scalar oracle src/decode/jpeg/idct.rs computes them), shared by the `idct`
// kernel (kernels/idct.cu) and the `huffman` kernel's SIMD range check
// (kernels/huffman.cu): a line-by-line port of shaders/idct_common.wgsl. Pure functions
// and constants. The host prepends it, after common.cuh, to those two sources only
// (src/backend/cuda/kernels.rs); tests/kernel_host/emulator.cpp includes it in the
// namespace of each, so it has no include guard.
//
// The oracle's i32 arithmetic wraps; here every such value is carried in a u32 (same bits,
// defined wrapping) and shifted right arithmetically with sra(). The constants (CONST_BITS,
// PASS1_BITS, FIX_*) are src/decode/jpeg/idct.rs's, prepended to this file by the host
// (src/backend/device/constants.rs).

// Low or high signed 16-bit half of a word, by index parity.
static __device__ __forceinline__ u32 half16(u32 word, u32 i) {
    if ((i & 1u) == 0u) {
        return sra(word << 16u, 16u);
    }
    return sra(word, 16u);
}

// DESCALE: x shifted right by n, rounded (arithmetic shift).
static __device__ __forceinline__ u32 descale(u32 x, u32 n) {
    return sra(x + (1u << (n - 1u)), n);
}

// One pass of jpeg_idct_islow over x (a column or a row), descaled by `shift`.
static __device__ __forceinline__ void idct8_1d(const u32 x[8], u32 shift, u32 out[8]) {
    const u32 z2 = x[2];
    const u32 z3 = x[6];
    const u32 z1 = (z2 + z3) * FIX_0_541196100;
    const u32 tmp2 = z1 + z3 * (0u - FIX_1_847759065);
    const u32 tmp3 = z1 + z2 * FIX_0_765366865;
    const u32 tmp0 = (x[0] + x[4]) << CONST_BITS;
    const u32 tmp1 = (x[0] - x[4]) << CONST_BITS;
    const u32 tmp10 = tmp0 + tmp3;
    const u32 tmp13 = tmp0 - tmp3;
    const u32 tmp11 = tmp1 + tmp2;
    const u32 tmp12 = tmp1 - tmp2;
    u32 t0 = x[7];
    u32 t1 = x[5];
    u32 t2 = x[3];
    u32 t3 = x[1];
    const u32 o1 = t0 + t3;
    const u32 o2 = t1 + t2;
    const u32 o3 = t0 + t2;
    const u32 o4 = t1 + t3;
    const u32 z5 = (o3 + o4) * FIX_1_175875602;
    t0 = t0 * FIX_0_298631336;
    t1 = t1 * FIX_2_053119869;
    t2 = t2 * FIX_3_072711026;
    t3 = t3 * FIX_1_501321110;
    const u32 m1 = o1 * (0u - FIX_0_899976223);
    const u32 m2 = o2 * (0u - FIX_2_562915447);
    const u32 m3 = o3 * (0u - FIX_1_961570560) + z5;
    const u32 m4 = o4 * (0u - FIX_0_390180644) + z5;
    t0 = t0 + m1 + m3;
    t1 = t1 + m2 + m4;
    t2 = t2 + m2 + m3;
    t3 = t3 + m1 + m4;
    out[0] = descale(tmp10 + t3, shift);
    out[1] = descale(tmp11 + t2, shift);
    out[2] = descale(tmp12 + t1, shift);
    out[3] = descale(tmp13 + t0, shift);
    out[4] = descale(tmp13 - t0, shift);
    out[5] = descale(tmp12 - t1, shift);
    out[6] = descale(tmp11 - t2, shift);
    out[7] = descale(tmp10 - t3, shift);
}

// The odd inputs x[7], x[5], x[3], x[1] weighted by c7, c5, c3 and c1: each odd part of
// jidctred.c's jpeg_idct_4x4 and jpeg_idct_2x2.
static __device__ __forceinline__ u32 odd_part(const u32 x[8], u32 c7, u32 c5, u32 c3, u32 c1) {
    return x[7] * c7 + x[5] * c5 + x[3] * c3 + x[1] * c1;
}

// One pass of jpeg_idct_4x4 (x[4] unused), descaled by `shift`.
static __device__ __forceinline__ void idct4_1d(const u32 x[8], u32 shift, u32 out[4]) {
    const u32 tmp0 = x[0] << (CONST_BITS + 1u);
    const u32 tmp2 = x[2] * FIX_1_847759065 + x[6] * (0u - FIX_0_765366865);
    const u32 tmp10 = tmp0 + tmp2;
    const u32 tmp12 = tmp0 - tmp2;
    const u32 t0 = odd_part(
        x, 0u - FIX_0_211164243, FIX_1_451774981, 0u - FIX_2_172734803, FIX_1_061594337);
    const u32 t2 = odd_part(
        x, 0u - FIX_0_509795579, 0u - FIX_0_601344887, FIX_0_899976223, FIX_2_562915447);
    out[0] = descale(tmp10 + t2, shift);
    out[1] = descale(tmp12 + t0, shift);
    out[2] = descale(tmp12 - t0, shift);
    out[3] = descale(tmp10 - t2, shift);
}

// One pass of jpeg_idct_2x2 (x[0] and the odd x), descaled by `shift`.
static __device__ __forceinline__ void idct2_1d(const u32 x[8], u32 shift, u32 out[2]) {
    const u32 tmp10 = x[0] << (CONST_BITS + 2u);
    const u32 tmp0 = odd_part(
        x, 0u - FIX_0_720959822, FIX_0_850430095, 0u - FIX_1_272758580, FIX_3_624509785);
    out[0] = descale(tmp10 + tmp0, shift);
    out[1] = descale(tmp10 - tmp0, shift);
}

// Whether the IDCT of output size `size` (8, 4 or 2) reads row or column r of a block:
// jpeg_idct_4x4 skips 4, jpeg_idct_2x2 2, 4 and 6.
static __device__ __forceinline__ bool idct_reads(u32 size, u32 r) {
    if (size == 8u) {
        return true;
    }
    if (size == 4u) {
        return r != 4u;
    }
    return r == 0u || (r & 1u) == 1u;
}

// The 1-D pass of the IDCT of output size `size` (8, 4 or 2) over x, descaled by `shift`
// plus the size's extra bits; out[0..size].
static __device__ __forceinline__ void idct_1d(const u32 x[8], u32 size, u32 shift, u32 out[8]) {
    if (size == 8u) {
        idct8_1d(x, shift, out);
    } else if (size == 4u) {
        idct4_1d(x, shift + 1u, out);
    } else {
        idct2_1d(x, shift + 2u, out);
    }
}

static __device__ __forceinline__ bool fits16(u32 x) {
    return (i32)x >= -32768 && (i32)x <= 32767;
}

// Pass 1 of the IDCT of output size `size` on column `col`: c its coefficients, by row
// (the rows the size does not read zero), and qw the words of the quantisation table that
// hold the column (column_words); out[0..size] the pass-1 values (the DC alone where
// every AC coefficient is zero, as the oracle tests it: before dequantisation).
static __device__ __forceinline__ void idct_column(const u32 c[8], const u32 qw[8], u32 col, u32 size, u32 out[8]) {
    if (c[1] == 0u && c[2] == 0u && c[3] == 0u && c[4] == 0u && c[5] == 0u && c[6] == 0u
        && c[7] == 0u) {
        const u32 dc = (c[0] * half16(qw[0], col)) << PASS1_BITS;
#pragma unroll
        for (u32 r = 0u; r < 8u; r++) {
            out[r] = dc;
        }
        return;
    }
    u32 x[8];
#pragma unroll
    for (u32 r = 0u; r < 8u; r++) {
        x[r] = c[r] * half16(qw[r], r * 8u + col);
    }
    idct_1d(x, size, CONST_BITS - PASS1_BITS, out);
}

// idct_column into ws (rows 0..size of column `col`, row * 8 + column); whether every
// value fits in 16 bits (the huffman kernel's range check).
static __device__ __forceinline__ bool idct_pass1(u32 ws[64], u32 col, const u32 c[8], const u32 qw[8], u32 size) {
    u32 o[8];
    idct_column(c, qw, col, size, o);
    bool fits = true;
#pragma unroll
    for (u32 r = 0u; r < size; r++) {
        fits = fits && fits16(o[r]);
        ws[r * 8u + col] = o[r];
    }
    return fits;
}

// Pass 2 of the IDCT of output size `size` on one row x of pass-1 values (the columns the
// size does not read zero): out[0..size] the samples before the range limit.
static __device__ __forceinline__ void idct_row(const u32 x[8], u32 size, u32 out[8]) {
    if (x[1] == 0u && x[2] == 0u && x[3] == 0u && x[4] == 0u && x[5] == 0u && x[6] == 0u
        && x[7] == 0u) {
        const u32 v = descale(x[0], PASS1_BITS + 3u);
#pragma unroll
        for (u32 i = 0u; i < 8u; i++) {
            out[i] = v;
        }
        return;
    }
    idct_1d(x, size, CONST_BITS + PASS1_BITS + 3u, out);
}

// idct_row on row `row` of ws: out[0..size] the samples before the range limit.
static __device__ __forceinline__ void idct_pass2(const u32 ws[64], u32 row, u32 size, u32 out[8]) {
    u32 x[8];
#pragma unroll
    for (u32 i = 0u; i < 8u; i++) {
        x[i] = idct_reads(size, i) ? ws[row * 8u + i] : 0u;
    }
    idct_row(x, size, out);
}

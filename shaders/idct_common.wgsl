// The islow IDCT arithmetic of libjpeg-turbo (jpeg_idct_islow and jidctred.c's 4x4 and
// 2x2, as the scalar oracle src/decode/jpeg/idct.rs computes them), shared by the `idct`
// pass (shaders/idct.wgsl) and the `huffman` pass's SIMD range check
// (shaders/huffman.wgsl): constants, the invocation's pass-1 workspace and functions, no
// bindings. WGSL has no includes: src/backend/wgpu/shaders.rs joins this file in front of
// each of those two. All integer arithmetic is 32-bit and wraps, as in the oracle. The
// constants (CONST_BITS, PASS1_BITS, FIX_*) are the oracle's, joined in front of this file
// (src/backend/device/constants.rs).

// The IDCT's pass-1 results (row * 8 + column).
var<private> ws: array<i32, 64>;

// Low or high signed 16-bit half of a word, by index parity.
fn half16(word: u32, i: u32) -> i32 {
    if ((i & 1u) == 0u) {
        return i32(word << 16u) >> 16u;
    }
    return i32(word) >> 16u;
}

// DESCALE: x shifted right by n, rounded (arithmetic shift).
fn descale(x: i32, n: u32) -> i32 {
    return (x + (1i << (n - 1u))) >> n;
}

// One pass of jpeg_idct_islow over x (a column or a row), descaled by `shift`.
fn idct8_1d(x: array<i32, 8>, shift: u32) -> array<i32, 8> {
    let z2 = x[2];
    let z3 = x[6];
    let z1 = (z2 + z3) * FIX_0_541196100;
    let tmp2 = z1 + z3 * (-FIX_1_847759065);
    let tmp3 = z1 + z2 * FIX_0_765366865;
    let tmp0 = (x[0] + x[4]) << CONST_BITS;
    let tmp1 = (x[0] - x[4]) << CONST_BITS;
    let tmp10 = tmp0 + tmp3;
    let tmp13 = tmp0 - tmp3;
    let tmp11 = tmp1 + tmp2;
    let tmp12 = tmp1 - tmp2;
    var t0 = x[7];
    var t1 = x[5];
    var t2 = x[3];
    var t3 = x[1];
    let o1 = t0 + t3;
    let o2 = t1 + t2;
    let o3 = t0 + t2;
    let o4 = t1 + t3;
    let z5 = (o3 + o4) * FIX_1_175875602;
    t0 = t0 * FIX_0_298631336;
    t1 = t1 * FIX_2_053119869;
    t2 = t2 * FIX_3_072711026;
    t3 = t3 * FIX_1_501321110;
    let m1 = o1 * (-FIX_0_899976223);
    let m2 = o2 * (-FIX_2_562915447);
    let m3 = o3 * (-FIX_1_961570560) + z5;
    let m4 = o4 * (-FIX_0_390180644) + z5;
    t0 = t0 + m1 + m3;
    t1 = t1 + m2 + m4;
    t2 = t2 + m2 + m3;
    t3 = t3 + m1 + m4;
    return array<i32, 8>(
        descale(tmp10 + t3, shift),
        descale(tmp11 + t2, shift),
        descale(tmp12 + t1, shift),
        descale(tmp13 + t0, shift),
        descale(tmp13 - t0, shift),
        descale(tmp12 - t1, shift),
        descale(tmp11 - t2, shift),
        descale(tmp10 - t3, shift),
    );
}

// The odd inputs x[7], x[5], x[3], x[1] weighted by c7, c5, c3 and c1: each odd part of
// jidctred.c's jpeg_idct_4x4 and jpeg_idct_2x2.
fn odd_part(x: array<i32, 8>, c7: i32, c5: i32, c3: i32, c1: i32) -> i32 {
    return x[7] * c7 + x[5] * c5 + x[3] * c3 + x[1] * c1;
}

// One pass of jpeg_idct_4x4 (x[4] unused), descaled by `shift`.
fn idct4_1d(x: array<i32, 8>, shift: u32) -> array<i32, 4> {
    let tmp0 = x[0] << (CONST_BITS + 1u);
    let tmp2 = x[2] * FIX_1_847759065 + x[6] * (-FIX_0_765366865);
    let tmp10 = tmp0 + tmp2;
    let tmp12 = tmp0 - tmp2;
    let t0 = odd_part(x, -FIX_0_211164243, FIX_1_451774981, -FIX_2_172734803, FIX_1_061594337);
    let t2 = odd_part(x, -FIX_0_509795579, -FIX_0_601344887, FIX_0_899976223, FIX_2_562915447);
    return array<i32, 4>(
        descale(tmp10 + t2, shift),
        descale(tmp12 + t0, shift),
        descale(tmp12 - t0, shift),
        descale(tmp10 - t2, shift),
    );
}

// One pass of jpeg_idct_2x2 (x[0] and the odd x), descaled by `shift`.
fn idct2_1d(x: array<i32, 8>, shift: u32) -> array<i32, 2> {
    let tmp10 = x[0] << (CONST_BITS + 2u);
    let tmp0 = odd_part(x, -FIX_0_720959822, FIX_0_850430095, -FIX_1_272758580, FIX_3_624509785);
    return array<i32, 2>(descale(tmp10 + tmp0, shift), descale(tmp10 - tmp0, shift));
}

// Whether the IDCT of output size `size` (8, 4 or 2) reads row or column r of a block:
// jpeg_idct_4x4 skips 4, jpeg_idct_2x2 2, 4 and 6.
fn idct_reads(size: u32, r: u32) -> bool {
    if (size == 8u) {
        return true;
    }
    if (size == 4u) {
        return r != 4u;
    }
    return r == 0u || (r & 1u) == 1u;
}

// The 1-D pass of the IDCT of output size `size` (8, 4 or 2) over x, descaled by `shift`
// plus the size's extra bits; the first `size` values count.
fn idct_1d(x: array<i32, 8>, size: u32, shift: u32) -> array<i32, 8> {
    if (size == 8u) {
        return idct8_1d(x, shift);
    }
    if (size == 4u) {
        let o = idct4_1d(x, shift + 1u);
        return array<i32, 8>(o[0], o[1], o[2], o[3], 0, 0, 0, 0);
    }
    let o = idct2_1d(x, shift + 2u);
    return array<i32, 8>(o[0], o[1], 0, 0, 0, 0, 0, 0);
}

fn fits16(x: i32) -> bool {
    return x >= -32768 && x <= 32767;
}

// Pass 1 of the IDCT of output size `size` on column `col`: c its coefficients, by row
// (the rows the size does not read zero), and qw the words of the quantisation table that
// hold the column (column_words); the first `size` values of the result count (the DC
// alone where every AC coefficient is zero, as the oracle tests it: before
// dequantisation).
fn idct_column(c: array<i32, 8>, qw: array<u32, 8>, col: u32, size: u32) -> array<i32, 8> {
    if (c[1] == 0 && c[2] == 0 && c[3] == 0 && c[4] == 0 && c[5] == 0 && c[6] == 0
        && c[7] == 0) {
        let dc = (c[0] * half16(qw[0], col)) << PASS1_BITS;
        return array<i32, 8>(dc, dc, dc, dc, dc, dc, dc, dc);
    }
    var x: array<i32, 8>;
    for (var r = 0u; r < 8u; r++) {
        x[r] = c[r] * half16(qw[r], r * 8u + col);
    }
    return idct_1d(x, size, CONST_BITS - PASS1_BITS);
}

// idct_column into ws (rows 0..size of column `col`); whether every value fits in 16 bits
// (the huffman pass's range check).
fn idct_pass1(col: u32, c: array<i32, 8>, qw: array<u32, 8>, size: u32) -> bool {
    var o = idct_column(c, qw, col, size);
    var fits = true;
    for (var r = 0u; r < size; r++) {
        fits = fits && fits16(o[r]);
        ws[r * 8u + col] = o[r];
    }
    return fits;
}

// Pass 2 of the IDCT of output size `size` on one row x of pass-1 values (the columns the
// size does not read zero): the samples before the range limit, the first `size` count.
fn idct_row(x: array<i32, 8>, size: u32) -> array<i32, 8> {
    if (x[1] == 0 && x[2] == 0 && x[3] == 0 && x[4] == 0 && x[5] == 0 && x[6] == 0
        && x[7] == 0) {
        let v = descale(x[0], PASS1_BITS + 3u);
        return array<i32, 8>(v, v, v, v, v, v, v, v);
    }
    return idct_1d(x, size, CONST_BITS + PASS1_BITS + 3u);
}

// idct_row on row `row` of ws: the samples before the range limit, the first `size` count.
fn idct_pass2(row: u32, size: u32) -> array<i32, 8> {
    var x: array<i32, 8>;
    for (var i = 0u; i < 8u; i++) {
        x[i] = select(0, ws[row * 8u + i], idct_reads(size, i));
    }
    return idct_row(x, size);
}

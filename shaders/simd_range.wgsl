// agrees_with_simd (idct.rs) on the block `blk`, joined after the shaders that decode
// Huffman codes (shaders/huffman.wgsl, shaders/sync_huffman.wgsl): the IDCT passes of
// shaders/idct.wgsl, each pass-1 value checked to fit in 16 bits and each sample (before
// the range limit) to lie within -512..=511. The constants, half16, descale, the passes
// and fits16 are those of shaders/idct_common.wgsl, joined in front; the shader that
// joins this file declares the block `blk` (private, 32 words), the chunk `blob` and
// `column_words` (the quantisation table's words of a column), and the constant
// QUICK_BOUND.

fn coef(i: u32) -> i32 {
    return half16(blk[i / 2u], i);
}

// DEQUANTIZE: coefficient times the quantiser, taken as a short.
fn deq(qt: u32, i: u32) -> i32 {
    return coef(i) * half16(blob[qt + i / 2u], i);
}

fn in_range(x: i32) -> bool {
    return x >= -512 && x <= 511;
}

// Column `col` of `blk`, by row: the coefficients the IDCT of output size `size` reads,
// zero for the rows it does not.
fn column(size: u32, col: u32) -> array<i32, 8> {
    var c: array<i32, 8>;
    for (var r = 0u; r < 8u; r++) {
        c[r] = select(0, coef(r * 8u + col), idct_reads(size, r));
    }
    return c;
}

// islow_8x8, islow_4x4 or islow_2x2 (the passes of jpeg_idct_islow, jpeg_idct_4x4 or
// jpeg_idct_2x2, by `size`) within range: idct_pass1 and idct_pass2 of
// shaders/idct_common.wgsl.
fn islow_agrees(qt: u32, size: u32) -> bool {
    var ok = true;
    for (var col = 0u; col < 8u; col++) {
        if (idct_reads(size, col)) {
            ok = idct_pass1(col, column(size, col), column_words(qt, col), size) && ok;
        }
    }
    for (var row = 0u; row < size; row++) {
        var o = idct_pass2(row, size);
        for (var i = 0u; i < size; i++) {
            ok = ok && in_range(o[i]);
        }
    }
    return ok;
}

// agrees_with_simd: every dequantised coefficient within 16 bits; then the quick bound on
// their magnitudes, or every IDCT size's passes within range.
// |coefficient i dequantised|.
fn mag(qt: u32, i: u32) -> u32 {
    let d = deq(qt, i);
    return u32(select(d, -d, d < 0));
}

fn simd_agrees(qt: u32) -> bool {
    // (No `return` or `continue` inside loops in this file: llvmpipe mis-runs lanes that
    // leave a loop so while others go on.)
    var sum = 0u;
    var wide = false;
    // Eight coefficients an iteration (the loop budget, see `fill`).
    for (var i = 0u; i < 64u; i += 8u) {
        let m = array<u32, 8>(
            mag(qt, i), mag(qt, i + 1u), mag(qt, i + 2u), mag(qt, i + 3u),
            mag(qt, i + 4u), mag(qt, i + 5u), mag(qt, i + 6u), mag(qt, i + 7u),
        );
        wide = wide || max(max(max(m[0], m[1]), max(m[2], m[3])),
            max(max(m[4], m[5]), max(m[6], m[7]))) > 32767u;
        sum += m[0] + m[1] + m[2] + m[3] + m[4] + m[5] + m[6] + m[7];
    }
    if (wide) {
        return false;
    }
    if (sum <= QUICK_BOUND) {
        return true;
    }
    return islow_agrees(qt, 8u) && islow_agrees(qt, 4u) && islow_agrees(qt, 2u);
}

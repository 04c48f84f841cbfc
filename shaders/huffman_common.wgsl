// What both Huffman decoders (shaders/huffman.wgsl, the restart-interval decode, and
// shaders/sync_huffman.wgsl, the self-synchronising one) share: the zigzag order, the
// slow path of a code lookup (codes of 9-16 bits) and HUFF_EXTEND. Joined after each by
// src/backend/wgpu/shaders.rs; the shader that joins it declares the chunk `blob`, the
// block `blk` (private, 32 words) and the coefficient buffer `coefs`, and the decode table
// words (T_MAXCODE, T_VALOFFSET, T_HUFFVAL) come with its constants.

// jpeg_natural_order: zigzag index to natural (row-major) index.
const NATURAL = array<u32, 64>(
    0u, 1u, 8u, 16u, 9u, 2u, 3u, 10u, 17u, 24u, 32u, 25u, 18u, 11u, 4u, 5u,
    12u, 19u, 26u, 33u, 40u, 48u, 41u, 34u, 27u, 20u, 13u, 6u, 7u, 14u, 21u, 28u,
    35u, 42u, 49u, 56u, 57u, 50u, 43u, 36u, 29u, 22u, 15u, 23u, 30u, 37u, 44u, 51u,
    58u, 59u, 52u, 45u, 38u, 31u, 39u, 46u, 53u, 60u, 61u, 54u, 47u, 55u, 62u, 63u,
);

// Whether the code of length `l` at the top of `p16` is one of table `t`'s (at most
// maxcode[l]).
fn long_code_fits(t: u32, p16: u32, l: u32) -> bool {
    return i32(p16 >> (16u - l)) <= i32(blob[t + T_MAXCODE + l]);
}

// jpeg_huff_decode's codes of 9-16 bits at the top of `p16` in the decode table at word
// `t`: the length in `.x` (17 when none matches) and the symbol in `.y`. The shortest
// length that fits, tried longest first and unrolled (no loop: llvmpipe gives an
// invocation a budget of loop iterations, its loop limiter).
fn long_code(t: u32, p16: u32) -> vec2<u32> {
    var len = 17u;
    len = select(len, 16u, long_code_fits(t, p16, 16u));
    len = select(len, 15u, long_code_fits(t, p16, 15u));
    len = select(len, 14u, long_code_fits(t, p16, 14u));
    len = select(len, 13u, long_code_fits(t, p16, 13u));
    len = select(len, 12u, long_code_fits(t, p16, 12u));
    len = select(len, 11u, long_code_fits(t, p16, 11u));
    len = select(len, 10u, long_code_fits(t, p16, 10u));
    len = select(len, 9u, long_code_fits(t, p16, 9u));
    var sym = 0u;
    if (len <= 16u) {
        let code = i32(p16 >> (16u - len));
        let idx = u32(code + i32(blob[t + T_VALOFFSET + len])) & 0xFFu;
        sym = (blob[t + T_HUFFVAL + idx / 4u] >> (8u * (idx % 4u))) & 0xFFu;
    }
    return vec2<u32>(len, sym);
}

// HUFF_EXTEND: the sign extension of an `s`-bit magnitude `r`.
fn extend(r: u32, s: u32) -> i32 {
    if (s == 0u) {
        return 0;
    }
    if (r < (1u << (s - 1u))) {
        return i32(r) - (1i << s) + 1;
    }
    return i32(r);
}

// The block `blk` stored at word `at` of `coefs` (32 words). Eight words an iteration:
// llvmpipe's loop budget.
fn store_block(at: u32) {
    for (var w = 0u; w < 32u; w += 8u) {
        coefs[at + w] = blk[w];
        coefs[at + w + 1u] = blk[w + 1u];
        coefs[at + w + 2u] = blk[w + 2u];
        coefs[at + w + 3u] = blk[w + 3u];
        coefs[at + w + 4u] = blk[w + 4u];
        coefs[at + w + 5u] = blk[w + 5u];
        coefs[at + w + 6u] = blk[w + 6u];
        coefs[at + w + 7u] = blk[w + 7u];
    }
}

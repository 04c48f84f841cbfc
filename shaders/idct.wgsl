// Dequantisation and inverse DCT of JPEG blocks: a line-by-line port of the scalar oracle
// src/decode/jpeg/idct.rs (libjpeg-turbo's jpeg_idct_islow and jidctred.c's 4x4, 2x2, 1x1),
// over the packed layout documented in src/decode/jpeg/coeffs.rs.
//
// One dispatch covers a chunk: `blob` is the chunk (header, image and component tables,
// data); one invocation handles one group of blocks side by side (1 block for 8x8 and 4x4
// outputs, 2 for 2x2, 4 for 1x1), so it writes whole plane words and no two invocations
// write the same word. All integer arithmetic is 32-bit and wraps, as in the oracle. The
// constants, half16, descale, the passes and their workspace `ws` are in
// shaders/idct_common.wgsl, joined in front of this file (the `huffman` pass's range check
// runs the same ones); binding 0, `blob` (the chunk), its header and ComponentDesc words,
// the invocation index and the lookups into the chunk are in shaders/decode_common.wgsl,
// joined after it.

@group(0) @binding(1) var<storage, read_write> planes: array<u32>;
// The blocks: the chunk itself for host-decoded coefficients, the coefficient buffer
// for blocks the `huffman` pass decoded (`coef_offset` counts from its start).
@group(0) @binding(2) var<storage, read> coefs: array<u32>;

// Output samples (row * 8 + column).
var<private> samples: array<u32, 64>;

// A block stored in the layout of output size `stored` (coeffs.rs): the kept rows by the
// kept columns, row-major; `side` of each, natural row or column x at `rank`.
fn side(stored: u32) -> u32 {
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

fn rank(stored: u32, x: u32) -> u32 {
    if (stored == 8u) {
        return x;
    }
    if (stored == 4u) {
        return x - select(0u, 1u, x > 4u);
    }
    if (stored == 2u) {
        return (x + 1u) / 2u;
    }
    return 0u;
}

// Words of one block in the layout of size `stored`.
fn block_words(stored: u32) -> u32 {
    let n = side(stored);
    return (n * n + 1u) / 2u;
}

// Natural-order coefficient i of the block at `at`, stored in the layout of size `stored`.
fn coef(at: u32, stored: u32, i: u32) -> i32 {
    let k = rank(stored, i / 8u) * side(stored) + rank(stored, i % 8u);
    return half16(coefs[at + k / 2u], k);
}

// DEQUANTIZE: coefficient times the quantiser, taken as a short.
fn deq(at: u32, stored: u32, qt: u32, i: u32) -> i32 {
    return coef(at, stored, i) * half16(blob[qt + i / 2u], i);
}

// libjpeg's post-IDCT range limit (see range_limit in idct.rs).
fn range_limit(x: i32) -> u32 {
    let i = u32(x & 1023);
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
fn column(at: u32, stored: u32, size: u32, col: u32) -> array<i32, 8> {
    var c: array<i32, 8>;
    for (var r = 0u; r < 8u; r++) {
        c[r] = select(0, coef(at, stored, r * 8u + col), idct_reads(size, r));
    }
    return c;
}

// jpeg_idct_islow (size 8), jpeg_idct_4x4 (4) or jpeg_idct_2x2 (2): block at `at` (in the
// layout of size `stored`), quantisation table at `qt`, into samples[] (rows and columns
// 0..size). The passes are idct_pass1 and idct_pass2 of shaders/idct_common.wgsl.
fn idct_block(at: u32, stored: u32, qt: u32, size: u32) {
    for (var col = 0u; col < 8u; col++) {
        if (idct_reads(size, col)) {
            _ = idct_pass1(col, column(at, stored, size, col), column_words(qt, col), size);
        }
    }
    for (var row = 0u; row < size; row++) {
        var o = idct_pass2(row, size);
        for (var i = 0u; i < size; i++) {
            samples[row * 8u + i] = range_limit(o[i]);
        }
    }
}

// jpeg_idct_1x1.
fn idct_1x1(at: u32, stored: u32, qt: u32) -> u32 {
    return range_limit(descale(deq(at, stored, qt, 0u), 3u));
}

@compute @workgroup_size(64)
fn idct(inv: Invocation) {
    let gid = flat_id(inv, 64u);
    if (gid >= blob[H_IDCT]) {
        return;
    }
    // The component whose invocations contain gid.
    let c = record_of(H_COMPONENT_TABLE, blob[H_COMPONENTS], C_GROUP_START, gid);
    let size = comp_word(c, C_DCT);
    let bw = comp_word(c, C_BW);
    let bh = comp_word(c, C_BH);
    let per = max(4u / size, 1u);
    let gw = (bw + per - 1u) / per;
    let local = gid - comp_word(c, C_GROUP_START);
    let gy = local / gw;
    let gx = local % gw;
    if (gy >= bh) {
        return;
    }
    let qt = comp_word(c, C_QUANT);
    let coefs = comp_word(c, C_COEF);
    let plane = comp_word(c, C_PLANE);
    let stride = comp_word(c, C_STRIDE);
    let block0 = gy * bw + gx * per;
    // Host-decoded blocks are in the layout of the component's size, the huffman pass's
    // in that of size 8.
    let stored = select(size, 8u, blob[H_FULL_BLOCKS] == 1u);
    let per_block = block_words(stored);
    if (size == 8u) {
        idct_block(coefs + per_block * block0, stored, qt, 8u);
        for (var r = 0u; r < 8u; r++) {
            let row = plane + (gy * 8u + r) * stride + gx * 2u;
            let s = r * 8u;
            planes[row] = samples[s] | (samples[s + 1u] << 8u) | (samples[s + 2u] << 16u)
                | (samples[s + 3u] << 24u);
            planes[row + 1u] = samples[s + 4u] | (samples[s + 5u] << 8u)
                | (samples[s + 6u] << 16u) | (samples[s + 7u] << 24u);
        }
    } else if (size == 4u) {
        idct_block(coefs + per_block * block0, stored, qt, 4u);
        for (var r = 0u; r < 4u; r++) {
            let s = r * 8u;
            planes[plane + (gy * 4u + r) * stride + gx] = samples[s] | (samples[s + 1u] << 8u)
                | (samples[s + 2u] << 16u) | (samples[s + 3u] << 24u);
        }
    } else if (size == 2u) {
        var words = array<u32, 2>(0u, 0u);
        for (var k = 0u; k < 2u; k++) {
            if (gx * 2u + k < bw) {
                idct_block(coefs + per_block * (block0 + k), stored, qt, 2u);
                for (var r = 0u; r < 2u; r++) {
                    words[r] = words[r] | ((samples[r * 8u] | (samples[r * 8u + 1u] << 8u))
                        << (16u * k));
                }
            }
        }
        for (var r = 0u; r < 2u; r++) {
            planes[plane + (gy * 2u + r) * stride + gx] = words[r];
        }
    } else {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            if (gx * 4u + k < bw) {
                word = word
                    | (idct_1x1(coefs + per_block * (block0 + k), stored, qt) << (8u * k));
            }
        }
        planes[plane + gy * stride + gx] = word;
    }
}

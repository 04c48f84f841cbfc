// What the three decode passes (shaders/huffman.wgsl, shaders/idct.wgsl,
// shaders/color.wgsl) share: the chunk they read, binding 0 (header, image and component
// tables, data: the layout of src/decode/jpeg/coeffs.rs), its header and ComponentDesc
// words, the invocation index, and the lookups into the chunk. WGSL has no includes:
// src/backend/wgpu/shaders.rs joins this file after each of those three, with the header
// and ComponentDesc word constants of src/backend/device/constants.rs in front of it.

@group(0) @binding(0) var<storage, read> blob: array<u32>;

// The builtins of the decode passes' entry points, which take nothing else.
struct Invocation {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
}

// The invocation's index over the dispatch: workgroups of `size` invocations, laid out
// row by row.
fn flat_id(inv: Invocation, size: u32) -> u32 {
    return (inv.wid.y * inv.nwg.x + inv.wid.x) * size + inv.lid;
}

// Word w of record i of the table that header word `table` points to (16 words a record:
// the image and component tables).
fn record_word(table: u32, i: u32, w: u32) -> u32 {
    return blob[blob[table] + i * 16u + w];
}

// Word w of component c's record.
fn comp_word(c: u32, w: u32) -> u32 {
    return record_word(H_COMPONENT_TABLE, c, w);
}

// The words of the 8x8 table of 16-bit values at word `at` (a quantisation table) that
// hold its column `col`, by row: value r * 8 + col is half (r * 8 + col) % 2 of word r.
fn column_words(at: u32, col: u32) -> array<u32, 8> {
    var w: array<u32, 8>;
    for (var r = 0u; r < 8u; r++) {
        w[r] = blob[at + (r * 8u + col) / 2u];
    }
    return w;
}

// The record of `table` whose invocations contain `id`: the last of the first `count`
// records (in increasing order of their word `start`) whose word `start` is at most id.
fn record_of(table: u32, count: u32, start: u32, id: u32) -> u32 {
    var lo = 0u;
    var hi = count;
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (record_word(table, mid, start) <= id) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// What the three decode passes (shaders/huffman.wgsl, shaders/idct.wgsl,
// shaders/color.wgsl) share: the chunk they read, binding 0 (header, image and component
// tables, data: the layout of src/decode/jpeg/coeffs.rs), the invocation index, and the
// lookups into the chunk's tables. WGSL has no includes: src/backend/wgpu/shaders.rs
// joins this file after each of those three.

@group(0) @binding(0) var<storage, read> blob: array<u32>;

// The invocation's index over the dispatch: workgroups of `size` invocations, laid out
// row by row.
fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, size: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * size + lid;
}

// Word w of record i of the table that header word `table` points to (16 words a record:
// the image and component tables).
fn record_word(table: u32, i: u32, w: u32) -> u32 {
    return blob[blob[table] + i * 16u + w];
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

// Huffman decoding of restart intervals: a line-by-line port of `huffman_interval` in
// src/decode/jpeg/huffman.rs (the layout is documented there). One invocation per
// interval of the chunk. PLACEHOLDER: the decode is not written yet.

@group(0) @binding(0) var<storage, read> blob: array<u32>;
@group(0) @binding(1) var<storage, read_write> coefs: array<u32>;
@group(0) @binding(2) var<storage, read_write> status: array<u32>;

@compute @workgroup_size(64)
fn huffman(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
    let i = id.y * n.x * 64u + id.x;
    if (i >= blob[8]) {
        return;
    }
    status[blob[blob[9] + 8u * i + 5u]] = 0xFFFFFFFFu;
    coefs[0] = coefs[0];
}

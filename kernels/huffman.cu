// Huffman decoding of restart intervals: a line-by-line port of `huffman_interval` in
// src/decode/jpeg/huffman.rs (the layout is documented there). One invocation per
// interval of the chunk. PLACEHOLDER: the decode is not written yet.

extern "C" __global__ void huffman(const KernelArgs a) {
    const u32* blob = (const u32*)a.ptr[0];
    u32* status = (u32*)a.ptr[2];
    const u32 gid =
        (workgroup_id_y() * num_workgroups_x() + workgroup_id_x()) * 64u + local_invocation_index();
    if (gid >= blob[8]) {
        return;
    }
    status[blob[blob[9] + 8u * gid + 5u]] = 0xFFFFFFFFu;
}

// What the three decode kernels (kernels/huffman.cu, kernels/idct.cu, kernels/color.cu)
// share: the chunk's header and ComponentDesc words, the invocation index and the lookups
// into the chunk (binding 0 of each: header, image and component tables, data, the layout
// of src/decode/jpeg/coeffs.rs): a line-by-line port of shaders/decode_common.wgsl. The
// host prepends it, after common.cuh, to those three sources only
// (src/backend/cuda/kernels.rs); tests/kernel_host/emulator.cpp includes it in the
// namespace of each, so it has no include guard. The header and ComponentDesc word
// constants are src/backend/device/constants.rs's, prepended to this file.

// The invocation's index over the launch: blocks of `size` threads, laid out row by row.
static __device__ __forceinline__ u32 flat_id(u32 size) {
    return (workgroup_id_y() * num_workgroups_x() + workgroup_id_x()) * size
        + local_invocation_index();
}

// Word w of record i of the table that header word `table` points to (16 words a record:
// the image and component tables).
static __device__ __forceinline__ u32 record_word(const u32* blob, u32 table, u32 i, u32 w) {
    return blob[blob[table] + i * 16u + w];
}

// Word w of component c's record.
static __device__ __forceinline__ u32 comp_word(const u32* blob, u32 c, u32 w) {
    return record_word(blob, H_COMPONENT_TABLE, c, w);
}

// The words of the 8x8 table of 16-bit values at word `at` (a quantisation table) that
// hold its column `col`, by row: value r * 8 + col is half (r * 8 + col) % 2 of word r.
static __device__ __forceinline__ void column_words(const u32* blob, u32 at, u32 col, u32 w[8]) {
#pragma unroll
    for (u32 r = 0u; r < 8u; r++) {
        w[r] = blob[at + (r * 8u + col) / 2u];
    }
}

// The record of `table` whose invocations contain `id`: the last of the first `count`
// records (in increasing order of their word `start`) whose word `start` is at most id.
static __device__ __forceinline__ u32 record_of(const u32* blob, u32 table, u32 count, u32 start, u32 id) {
    u32 lo = 0u;
    u32 hi = count;
    while (hi - lo > 1u) {
        const u32 mid = (lo + hi) / 2u;
        if (record_word(blob, table, mid, start) <= id) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

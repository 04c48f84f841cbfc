// What the three decode kernels (kernels/huffman.cu, kernels/idct.cu, kernels/color.cu)
// share: the chunk's header and ComponentDesc words, the invocation index and the lookups
// into the chunk (binding 0 of each: header, image and component tables, data, the layout
// of src/decode/jpeg/coeffs.rs): a line-by-line port of shaders/decode_common.wgsl. The
// host prepends it, after common.cuh, to those three sources only
// (src/backend/cuda/kernels.rs); tests/kernel_host/emulator.cpp includes it in the
// namespace of each, so it has no include guard.

// Constants as enumerators, not variables: NVRTC would emit every namespace-scope
// constant as a global.
enum : u32 {
    // Chunk header words.
    H_IMAGES = 0u, // number of image records
    H_COMPONENTS = 1u, // number of component records
    H_IMAGE_TABLE = 2u,
    H_COMPONENT_TABLE = 3u,
    H_IDCT = 4u, // IDCT invocations in this chunk
    H_PIXELS = 5u, // output pixels in this chunk
    H_INTERVALS = 8u, // intervals in this chunk
    H_INTERVAL_TABLE = 9u,
    H_FULL_BLOCKS = 11u, // 1: blocks in the layout of size 8; 0: of each dct_size
    H_MAX_BLOCKS = 12u, // the most blocks an interval of the chunk holds

    // ComponentDesc words.
    C_COEF = 0u,
    C_QUANT = 1u,
    C_BX0 = 2u,
    C_BY0 = 3u,
    C_BW = 4u,
    C_BH = 5u,
    C_DCT = 6u,
    C_PLANE = 7u,
    C_STRIDE = 8u,
    C_DW = 9u,
    C_DH = 10u,
    C_METHOD = 11u,
    C_EH = 12u,
    C_EV = 13u,
    C_GROUP_START = 14u,
};

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

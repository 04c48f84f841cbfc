// Batch-level mixing after the per-sample pass, MixUp or CutMix of a batch's images: a
// line-by-line port of shaders/mix.wgsl (which says what each element becomes); the
// definition is src/augment/mix.rs (`apply`).
//
// Entry point `mix_batch`, 256 threads per block, one thread per u32 word of the images.
// Bindings: 0 `src` (a copy of the images made before the pass; read), 1 `dst` (the
// images; written, each word once).
// Params (the WGSL uniform `P`; src/backend/device/mix.rs): 0 words, 1 per (3 * width *
// height), 2 len, 3 dtype (0 u8, 1 f16, 2 f32), 4 kind (0 MixUp, 1 CutMix), 5 layout (0
// NCHW, 1 NHWC), 6 width, 7 height, 8-11 the box x0, y0, x1, y1 (x1, y1 exclusive), 12 l
// and 13 m (f32 bits): the `M_*` constants of src/backend/device/constants.rs, which the
// host prepends to this file.

// Whether position p of an image is mixed.
static __device__ __forceinline__ bool mix_inside(const u32* P, u32 p) {
    if (P[M_KIND] == 0u) {
        return true;
    }
    const u32 plane = P[M_WIDTH] * P[M_HEIGHT];
    const u32 q = P[M_LAYOUT] == 0u ? urem(p, plane) : p / 3u;
    const u32 x = urem(q, P[M_WIDTH]);
    const u32 y = udiv(q, P[M_WIDTH]);
    return x >= P[M_X0] && x < P[M_X1] && y >= P[M_Y0] && y < P[M_Y1];
}

// The element index of g's partner.
static __device__ __forceinline__ u32 mix_partner(const u32* P, u32 g) {
    if (g < P[M_PER]) {
        return g + (P[M_LEN] - 1u) * P[M_PER];
    }
    return g - P[M_PER];
}

// Bits of element e of `src`, `bits` wide (8, 16 or 32).
static __device__ __forceinline__ u32 mix_element(const u32* src, u32 e, u32 bits) {
    if (bits == 32u) {
        return src[e];
    }
    const u32 per_word = 32u / bits;
    const u32 shift = (e % per_word) * bits;
    return (src[e / per_word] >> shift) & ((1u << bits) - 1u);
}

// The mixed bits of element g (own bits `own`), `bits` wide.
static __device__ __forceinline__ u32 mix_mixed(
    const u32* P, const u32* src, u32 g, u32 own, u32 bits) {
    if (g >= P[M_LEN] * P[M_PER] || !mix_inside(P, urem(g, P[M_PER]))) {
        return own;
    }
    const u32 other = mix_element(src, mix_partner(P, g), bits);
    if (P[M_KIND] == 1u) {
        return other;
    }
    const float l = as_f32(P[M_L]);
    const float m = as_f32(P[M_M]);
    if (bits == 32u) {
        const float a = as_f32(other) * m;
        const float b = as_f32(own) * l;
        return as_u32(a + b);
    }
    const float a = f16_value(f16_bits(f16_value(other) * m));
    const float b = f16_value(f16_bits(f16_value(own) * l));
    return f16_bits(a + b);
}

extern "C" __global__ void mix_batch(const KernelArgs a) {
    const u32* src = (const u32*)a.ptr[0];
    u32* dst = (u32*)a.ptr[1];
    const u32* P = a.params;
    const u32 t = (workgroup_id_y() * num_workgroups_x() + workgroup_id_x()) * MIX_WG
        + local_invocation_index();
    if (t >= P[M_WORDS]) {
        return;
    }
    const u32 bits = 8u << P[M_DTYPE];
    const u32 word = src[t];
    if (bits == 32u) {
        dst[t] = mix_mixed(P, src, t, word, 32u);
        return;
    }
    const u32 per_word = 32u / bits;
    const u32 mask = (1u << bits) - 1u;
    u32 out = 0u;
    for (u32 k = 0u; k < per_word; k++) {
        const u32 own = (word >> (k * bits)) & mask;
        out |= mix_mixed(P, src, t * per_word + k, own, bits) << (k * bits);
    }
    dst[t] = out;
}

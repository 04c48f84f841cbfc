// The fused augmentation of a batch: a line-by-line port of shaders/augment.wgsl, the GPU
// side of src/augment/reference/. See the WGSL file for the passes and the blob layout
// (`AugmentInput`: header, per-sample descriptors, plans, data section).
//
// Entry points, 256 threads per block:
// - `horizontal`: one thread per (sample, window row read, output column): the
//   horizontal resize, u8 RGB into `hbuf` (one word per pixel).
// - `vertical_jitter`, one thread per output pixel (blocks within one sample): phase 0,
//   the vertical resize into `rbuf` and the colour ops before the first whole-image op;
//   per whole-image op, phase 1 gathers what it needs after the group's items in `hbuf`
//   (a statistic by the sample's first block, or a copy of the pixels a neighbourhood op
//   reads), phase 2 (per pixel) applies it and runs the ops up to the next one.
// - `write_image`: one thread per u32 word of the batch's image output (the affine warp,
//   flips, normalise, layout, dtype).
// - `write_mask`: one thread per u32 word of the mask output (two u16 labels; nearest
//   through the host tables and the affine warp, flips).
// Bindings, the same for every entry point (the WGSL storage bindings 1-6): 0 `hdr` (the
// blob's header, descriptors and plans; read), 1 `data` (a range of the data section;
// read), 2 `windows` (decoded RGBA windows; read), 3 `hbuf` (horizontal pass output),
// 4 `rbuf` (resized pixels), 5 `outw` (images or masks).
// Params (the WGSL uniform `P`): 0 s0, 1 s1 (samples [s0, s1)), 2 item0, 3 items
// (horizontal items [item0, item0 + items)), 4 win_base, 5 data_base, 6 r_base (word of
// `windows`, of the blob and of the resized buffer where the bindings start), 7 h_base
// (first item held by `hbuf`), 8 byte0 (byte of sample s0's slot where a write chunk
// starts), 9 words (its word count), 10 phase and 11 contrast (`vertical_jitter`'s phase,
// 0-2, and whole-image op, from 1), 12-15 unused.
//
// Integer resize math is the CPU's: acc = (1 << 21) + sum(pixel * weight), then
// clamp(acc >> 22, 0, 255), wrapping as WGSL's i32 does (carried in u32 here). Jitter uses
// the CPU's f32 operations in the same order.
//
// The constants (header, descriptor, SamplePlan and Params words, flags, op codes) are
// those of src/backend/device/constants.rs, which the host prepends to this file.

// The WGSL module's bindings and uniform.
struct Aug {
    const u32* hdr;
    const u32* data;
    const u32* windows;
    u32* hbuf;
    u32* rbuf;
    u32* outw;
    const u32* P;
};

struct U3 {
    u32 x, y, z;
};
struct F3 {
    float x, y, z;
};

static __device__ __forceinline__ Aug bindings(const KernelArgs& a) {
    return Aug{(const u32*)a.ptr[0], (const u32*)a.ptr[1], (const u32*)a.ptr[2], (u32*)a.ptr[3],
        (u32*)a.ptr[4], (u32*)a.ptr[5], a.params};
}

static __device__ __forceinline__ u32 desc(const Aug& g, u32 s, u32 k) {
    return g.hdr[g.hdr[H_DESCS] + s * DESC_WORDS + k];
}

static __device__ __forceinline__ u32 plan_u(const Aug& g, u32 s, u32 k) {
    return g.hdr[g.hdr[H_PLANS] + s * PLAN_WORDS + k];
}

static __device__ __forceinline__ float plan_f(const Aug& g, u32 s, u32 k) {
    return as_f32(plan_u(g, s, k));
}

// A word of the data section, by its offset relative to the section.
static __device__ __forceinline__ u32 table(const Aug& g, u32 rel) {
    return g.data[g.hdr[H_DATA] + rel - g.P[DATA_BASE]];
}

static __device__ __forceinline__ U3 unpack_rgb(u32 p) {
    return U3{p & 255u, (p >> 8u) & 255u, (p >> 16u) & 255u};
}

static __device__ __forceinline__ u32 pack_rgb(U3 v) {
    return v.x | (v.y << 8u) | (v.z << 16u);
}

// Wrapping i32 accumulators (carried in u32) to bytes.
static __device__ __forceinline__ U3 clip8(U3 acc) {
    return U3{(u32)iclamp(as_i32(sra(acc.x, PRECISION)), 0, 255),
        (u32)iclamp(as_i32(sra(acc.y, PRECISION)), 0, 255),
        (u32)iclamp(as_i32(sra(acc.z, PRECISION)), 0, 255)};
}

// The thread's index in a 2D grid of 1D blocks.
static __device__ __forceinline__ u32 linear_id() {
    return (workgroup_id_y() * num_workgroups_x() + workgroup_id_x()) * WG
        + local_invocation_index();
}

extern "C" __global__ void horizontal(const KernelArgs a) {
    const Aug g = bindings(a);
    const u32 t = linear_id();
    if (t >= g.P[ITEMS]) {
        return;
    }
    const u32 item = g.P[ITEM0] + t;
    // The sample holding this item: the last with D_ITEM <= item.
    u32 lo = g.P[S0];
    u32 hi = g.P[S1];
    while (hi - lo > 1u) {
        const u32 mid = (lo + hi) / 2u;
        if (desc(g, mid, D_ITEM) <= item) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    const u32 s = lo;
    const u32 ow = g.hdr[H_OUT_W];
    const u32 local = item - desc(g, s, D_ITEM);
    const u32 r = udiv(local, ow);
    const u32 xx = urem(local, ow);
    const u32 row = desc(g, s, D_WIN) + (desc(g, s, D_ROW0) + r) * desc(g, s, D_WIN_W)
        - g.P[WIN_BASE];
    const u32 start = table(g, desc(g, s, D_XB) + 2u * xx);
    const u32 n = table(g, desc(g, s, D_XB) + 2u * xx + 1u);
    const u32 wbase = desc(g, s, D_XW) + xx * desc(g, s, D_KX);
    U3 acc = {ROUND, ROUND, ROUND};
    for (u32 k = 0u; k < n; k++) {
        const u32 w = table(g, wbase + k);
        const U3 p = unpack_rgb(g.windows[row + start + k]);
        acc.x += p.x * w;
        acc.y += p.y * w;
        acc.z += p.z * w;
    }
    g.hbuf[item - g.P[H_BASE]] = pack_rgb(clip8(acc));
}

static __device__ __forceinline__ float gray(U3 v) {
    const F3 f = {(float)v.x, (float)v.y, (float)v.z};
    return 0.2989f * f.x + 0.587f * f.y + 0.114f * f.z;
}

// torchvision's _blend on u8: clamp(a * r + b * (1 - r), 0, 255), truncated.
static __device__ __forceinline__ U3 blend(U3 a, float b, float r) {
    return U3{f32_to_u32(fclamp((float)a.x * r + b * (1.0f - r), 0.0f, 255.0f)),
        f32_to_u32(fclamp((float)a.y * r + b * (1.0f - r), 0.0f, 255.0f)),
        f32_to_u32(fclamp((float)a.z * r + b * (1.0f - r), 0.0f, 255.0f))};
}

// Rust's f32 `rem_euclid(1.0)` for |x| < 2^23.
static __device__ __forceinline__ float rem1(float x) {
    const float r = x - truncf(x);
    return r < 0.0f ? r + 1.0f : r;
}

static __device__ __forceinline__ U3 hue_shift(U3 p, float shift) {
    const float r = (float)p.x / 255.0f;
    const float g = (float)p.y / 255.0f;
    const float b = (float)p.z / 255.0f;
    const float maxc = fmaxf(fmaxf(r, g), b);
    const float minc = fminf(fminf(r, g), b);
    const bool eqc = maxc == minc;
    const float range = maxc - minc;
    const float s = range / (eqc ? 1.0f : maxc);
    const float div = eqc ? 1.0f : range;
    const float rc = (maxc - r) / div;
    const float gc = (maxc - g) / div;
    const float bc = (maxc - b) / div;
    float h;
    if (maxc == r) {
        h = bc - gc;
    } else if (maxc == g) {
        h = 2.0f + rc - bc;
    } else {
        h = 4.0f + gc - rc;
    }
    h = rem1(h / 6.0f + 1.0f);
    h = rem1(h + shift);
    const float v = maxc;
    const float h6 = h * 6.0f;
    const float fi = floorf(h6);
    const float f = h6 - fi;
    const i32 i = ((f32_to_i32(fi) % 6) + 6) % 6;
    const float q = fclamp((1.0f - s * f) * v, 0.0f, 1.0f);
    const float t = fclamp((s * f + (1.0f - s)) * v, 0.0f, 1.0f);
    const float pp = fclamp((1.0f - s) * v, 0.0f, 1.0f);
    F3 o;
    switch (i) {
        case 0: o = F3{v, t, pp}; break;
        case 1: o = F3{q, v, pp}; break;
        case 2: o = F3{pp, v, t}; break;
        case 3: o = F3{pp, q, v}; break;
        case 4: o = F3{t, pp, v}; break;
        default: o = F3{v, pp, q}; break;
    }
    // WGSL's `256.0 - 1e-3` is an abstract-float constant; as f32 it is 255.999f (0x437fffbe),
    // the value the CPU oracle's f32 `255.0 + 1.0 - 1e-3` also gives.
    const float scale = 255.999f;
    return U3{f32_to_u32(fclamp(o.x * scale, 0.0f, 255.0f)),
        f32_to_u32(fclamp(o.y * scale, 0.0f, 255.0f)),
        f32_to_u32(fclamp(o.z * scale, 0.0f, 255.0f))};
}

// The colour op at position k of the plan's order (0 when none or jitter is off): four
// per word, in the order word, the next, then the two extension words.
static __device__ __forceinline__ u32 op_at(const Aug& g, u32 s, u32 k) {
    if ((plan_u(g, s, P_FLAGS) & JITTER) == 0u || k >= MAX_OPS) {
        return 0u;
    }
    u32 w = P_ORDER;
    if (k >= 12u) {
        w = P_ORDER_EXT + 1u;
    } else if (k >= 8u) {
        w = P_ORDER_EXT;
    } else if (k >= 4u) {
        w = P_ORDER_HI;
    }
    return (plan_u(g, s, w) >> (8u * (k % 4u))) & 255u;
}

// Number of ops in the plan's order.
static __device__ __forceinline__ u32 op_count(const Aug& g, u32 s) {
    u32 k = 0u;
    while (k < MAX_OPS && op_at(g, s, k) != 0u) {
        k++;
    }
    return k;
}

// The factor of op k: its own parameter word, else `otherwise`.
static __device__ __forceinline__ float own_factor(const Aug& g, u32 s, u32 k, float otherwise) {
    const u32 w = plan_u(g, s, P_OP_PARAMS + k);
    return w != 0u ? as_f32(w) : otherwise;
}

// The factor of op k: its own parameter word, else the plan word `fallback`.
static __device__ __forceinline__ float op_factor(const Aug& g, u32 s, u32 k, u32 fallback) {
    return own_factor(g, s, k, plan_f(g, s, fallback));
}

// The integer parameter of op k (posterize bits, solarize threshold), else `fallback`.
static __device__ __forceinline__ u32 op_int(const Aug& g, u32 s, u32 k, u32 fallback) {
    const u32 w = plan_u(g, s, P_OP_PARAMS + k);
    return (w & PARAM_INT) != 0u ? (w & 255u) : fallback;
}

// Whether op k needs more than its own pixel (the reference's `needs_whole_image`).
static __device__ __forceinline__ bool is_barrier(const Aug& g, u32 s, u32 k) {
    const u32 op = op_at(g, s, k);
    if (op == OP_CONTRAST) {
        return op_factor(g, s, k, P_CONTRAST) != 1.0f;
    }
    if (op == OP_SHARPNESS) {
        return g.hdr[H_OUT_W] > 2u && g.hdr[H_OUT_H] > 2u;
    }
    return op == OP_AUTOCONTRAST || op == OP_EQUALIZE || op == OP_BLUR;
}

// The first whole-image op at or after k, or the op count.
static __device__ __forceinline__ u32 next_barrier(const Aug& g, u32 s, u32 k, u32 count) {
    u32 j = k;
    while (j < count && !is_barrier(g, s, j)) {
        j++;
    }
    return j;
}

// Applies the per-pixel ops [first, end) (no whole-image op among them) to one pixel.
static __device__ __forceinline__ U3 pixel_ops(const Aug& g, u32 s, U3 v0, u32 first, u32 end) {
    U3 v = v0;
    for (u32 k = first; k < end; k++) {
        const u32 op = op_at(g, s, k);
        if (op == OP_BRIGHTNESS) {
            const float f = op_factor(g, s, k, P_BRIGHTNESS);
            if (f != 1.0f) {
                v = U3{f32_to_u32(fclamp((float)v.x * f, 0.0f, 255.0f)),
                    f32_to_u32(fclamp((float)v.y * f, 0.0f, 255.0f)),
                    f32_to_u32(fclamp((float)v.z * f, 0.0f, 255.0f))};
            }
        } else if (op == OP_SATURATION) {
            const float f = op_factor(g, s, k, P_SATURATION);
            if (f != 1.0f) {
                v = blend(v, floorf(gray(v)), f);
            }
        } else if (op == OP_HUE) {
            const float f = plan_f(g, s, P_HUE);
            if (f != 0.0f) {
                v = hue_shift(v, f);
            }
        } else if (op == OP_GRAYSCALE) {
            const u32 l = f32_to_u32(gray(v));
            v = U3{l, l, l};
        } else if (op == OP_POSTERIZE) {
            const u32 bits = umin(op_int(g, s, k, (plan_u(g, s, P_COLOR_PARAMS) >> 8u) & 255u), 8u);
            const u32 keep = (0xFF00u >> bits) & 255u;
            v = U3{v.x & keep, v.y & keep, v.z & keep};
        } else if (op == OP_SOLARIZE) {
            const u32 t = op_int(g, s, k, plan_u(g, s, P_COLOR_PARAMS) & 255u);
            v = U3{v.x >= t ? 255u - v.x : v.x, v.y >= t ? 255u - v.y : v.y,
                v.z >= t ? 255u - v.z : v.z};
        }
    }
    return v;
}

// The op index of whole-image op `r` (from 1) in the plan's order, or the op count.
static __device__ __forceinline__ u32 nth_barrier(const Aug& g, u32 s, u32 r, u32 count) {
    u32 k = next_barrier(g, s, 0u, count);
    for (u32 i = 1u; i < r && k < count; i++) {
        k = next_barrier(g, s, k + 1u, count);
    }
    return k;
}

// torch's reflect padding: the index tap `i` reads in [0, n), reflected as often as needed.
static __device__ __forceinline__ u32 reflect_index(i32 i, u32 n) {
    if (n <= 1u) {
        return 0u;
    }
    const i32 period = 2 * ((i32)n - 1);
    i32 m = i % period;
    if (m < 0) {
        m += period;
    }
    return (u32)(m < (i32)n ? m : period - m);
}

// The reference's `autocontrast_value`.
static __device__ __forceinline__ u32 autocontrast_value(u32 v, u32 lo, u32 hi) {
    if (lo >= hi) {
        return v;
    }
    const float inv_scale = (float)(hi - lo) * (1.0f / 255.0f);
    return f32_to_u32(fclamp(((float)v - (float)lo) / inv_scale, 0.0f, 255.0f));
}

// The reference's `sharpen_value`.
static __device__ __forceinline__ u32 sharpen_value(u32 centre, u32 sum13, float alpha) {
    const float soft = (float)((2u * sum13 + 13u) / 26u);
    const float x = (float)centre;
    return f32_to_u32(fclamp(fmaf(alpha, soft - x, x), 0.0f, 255.0f));
}

static __device__ __forceinline__ U3 u3_min(U3 a, U3 b) {
    return U3{umin(a.x, b.x), umin(a.y, b.y), umin(a.z, b.z)};
}

static __device__ __forceinline__ U3 u3_max(U3 a, U3 b) {
    return U3{umax(a.x, b.x), umax(a.y, b.y), umax(a.z, b.z)};
}

// Phase 1 of a whole-image op, by one block for the sample (`b == 0`): the contrast mean,
// the auto-contrast extremes or the equalize tables into hbuf[stats..]. Every thread of
// the block calls it: it holds barriers.
static __device__ __forceinline__ void whole_image_stats(const Aug& g, u32* red_lo, u32* red_hi,
    u32* hist, u32 li, u32 op, u32 rb, u32 npx, u32 stats) {
    if (op == OP_CONTRAST) {
        // The exact sum of the floored grayscale (a carry word above), then the mean.
        u32 lo = 0u;
        u32 hi = 0u;
        for (u32 j = li; j < npx; j += WG) {
            const u32 a0 = lo;
            lo = lo + f32_to_u32(floorf(gray(unpack_rgb(g.rbuf[rb + j]))));
            hi = hi + (lo < a0 ? 1u : 0u);
        }
        red_lo[li] = lo;
        red_hi[li] = hi;
        __syncthreads();
        for (u32 stride = WG / 2u; stride > 0u; stride >>= 1u) {
            if (li < stride) {
                const u32 a0 = red_lo[li];
                const u32 l = a0 + red_lo[li + stride];
                red_lo[li] = l;
                red_hi[li] = red_hi[li] + red_hi[li + stride] + (l < a0 ? 1u : 0u);
            }
            __syncthreads();
        }
        if (li == 0u) {
            const u32 l = red_lo[0];
            const u32 h = red_hi[0];
            const u32 n = umax(npx, 1u);
            float mean;
            if (h == 0u && l < 16777216u) {
                mean = (float)l / (float)n;
            } else {
                mean = ((float)h * 4294967296.0f + (float)l) / (float)n;
            }
            g.hbuf[stats] = as_u32(mean);
        }
    } else if (op == OP_AUTOCONTRAST) {
        // Per channel minimum (packed in red_lo) and maximum (red_hi).
        U3 mn = {255u, 255u, 255u};
        U3 mx = {0u, 0u, 0u};
        for (u32 j = li; j < npx; j += WG) {
            const U3 v = unpack_rgb(g.rbuf[rb + j]);
            mn = u3_min(mn, v);
            mx = u3_max(mx, v);
        }
        red_lo[li] = pack_rgb(mn);
        red_hi[li] = pack_rgb(mx);
        __syncthreads();
        for (u32 stride = WG / 2u; stride > 0u; stride >>= 1u) {
            if (li < stride) {
                red_lo[li] = pack_rgb(u3_min(unpack_rgb(red_lo[li]), unpack_rgb(red_lo[li + stride])));
                red_hi[li] = pack_rgb(u3_max(unpack_rgb(red_hi[li]), unpack_rgb(red_hi[li + stride])));
            }
            __syncthreads();
        }
        if (li == 0u) {
            g.hbuf[stats] = red_lo[0];
            g.hbuf[stats + 1u] = red_hi[0];
        }
    } else {
        // Equalize: the three histograms, then each channel's table (the reference's
        // `equalize_luts`), one thread per channel.
        for (u32 i = li; i < 768u; i += WG) {
            hist[i] = 0u;
        }
        __syncthreads();
        for (u32 j = li; j < npx; j += WG) {
            const U3 v = unpack_rgb(g.rbuf[rb + j]);
            atomicAdd(&hist[v.x], 1u);
            atomicAdd(&hist[256u + v.y], 1u);
            atomicAdd(&hist[512u + v.z], 1u);
        }
        __syncthreads();
        if (li < 3u) {
            const u32 base = li * 256u;
            u32 last = 0u;
            for (u32 v = 0u; v < 256u; v++) {
                if (hist[base + v] != 0u) {
                    last = v;
                }
            }
            const u32 step = (npx - hist[base + last]) / 255u;
            u32 cum = 0u;
            g.hbuf[stats + base] = 0u;
            for (u32 v = 1u; v < 256u; v++) {
                cum += hist[base + v - 1u];
                u32 l = v;
                if (step != 0u) {
                    l = umin((cum + step / 2u) / step, 255u);
                }
                g.hbuf[stats + base + v] = l;
            }
        }
    }
}

extern "C" __global__ void vertical_jitter(const KernelArgs a) {
    __shared__ u32 red_lo[WG];
    __shared__ u32 red_hi[WG];
    __shared__ u32 hist[768];
    const Aug g = bindings(a);
    const u32 li = local_invocation_index();
    const u32 ow = g.hdr[H_OUT_W];
    const u32 oh = g.hdr[H_OUT_H];
    const u32 npx = ow * oh;
    // `per` blocks per sample, block `b` of WG pixels each. Everything below that depends
    // on `s` or `b` is uniform in the block, so every thread of the block returns here or
    // reaches every barrier.
    const u32 per = udiv(npx + WG - 1u, WG);
    const u32 id = workgroup_id_y() * num_workgroups_x() + workgroup_id_x();
    const u32 s = g.P[S0] + udiv(id, per);
    const u32 b = urem(id, per);
    if (s >= g.P[S1]) {
        return;
    }
    const u32 rb = s * npx - g.P[R_BASE];
    // The sample's statistics and the copy its neighbourhood ops read, after the group's
    // items.
    const u32 stats = g.P[ITEMS] + (s - g.P[S0]) * STATS_WORDS;
    const u32 temp = g.P[ITEMS] + (g.P[S1] - g.P[S0]) * STATS_WORDS + (s - g.P[S0]) * TEMP_WORDS * npx;
    const u32 count = op_count(g, s);
    const u32 p = b * WG + li;
    const u32 xx = urem(p, ow);
    const u32 yy = udiv(p, ow);
    if (g.P[PHASE] == 0u) {
        // Vertical resize and the ops before the first whole-image op.
        if (p < npx) {
            const u32 hb = desc(g, s, D_ITEM) - g.P[H_BASE];
            const u32 yb = desc(g, s, D_YB);
            const u32 start = table(g, yb + 2u * yy);
            const u32 n = table(g, yb + 2u * yy + 1u);
            const u32 wbase = desc(g, s, D_YW) + yy * desc(g, s, D_KY);
            U3 acc = {ROUND, ROUND, ROUND};
            for (u32 t = 0u; t < n; t++) {
                const u32 w = table(g, wbase + t);
                const U3 px = unpack_rgb(g.hbuf[hb + (start + t) * ow + xx]);
                acc.x += px.x * w;
                acc.y += px.y * w;
                acc.z += px.z * w;
            }
            const U3 v = pixel_ops(g, s, clip8(acc), 0u, next_barrier(g, s, 0u, count));
            g.rbuf[rb + p] = pack_rgb(v);
        }
        return;
    }
    const u32 k = nth_barrier(g, s, g.P[CONTRAST], count);
    if (k >= count) {
        return;
    }
    const u32 op = op_at(g, s, k);
    const u32 blur = desc(g, s, D_BLUR);
    if (g.P[PHASE] == 1u) {
        if (op == OP_SHARPNESS) {
            if (p < npx) {
                g.hbuf[temp + p] = g.rbuf[rb + p];
            }
        } else if (op == OP_BLUR) {
            // The horizontal pass, exact sums (under 2^23) per channel.
            if (p < npx) {
                const u32 kx = table(g, blur);
                const i32 rx = (i32)(kx / 2u);
                U3 acc = {0u, 0u, 0u};
                for (u32 t = 0u; t < kx; t++) {
                    const u32 sx = reflect_index((i32)xx + (i32)t - rx, ow);
                    const U3 px = unpack_rgb(g.rbuf[rb + yy * ow + sx]);
                    const u32 w = table(g, blur + 2u + t);
                    acc.x += px.x * w;
                    acc.y += px.y * w;
                    acc.z += px.z * w;
                }
                g.hbuf[temp + 3u * p] = acc.x;
                g.hbuf[temp + 3u * p + 1u] = acc.y;
                g.hbuf[temp + 3u * p + 2u] = acc.z;
            }
        } else if (b == 0u) {
            whole_image_stats(g, red_lo, red_hi, hist, li, op, rb, npx, stats);
        }
        return;
    }
    // Phase 2: the whole-image op, then the per-pixel ops up to the next one.
    if (p >= npx) {
        return;
    }
    U3 v = unpack_rgb(g.rbuf[rb + p]);
    if (op == OP_CONTRAST) {
        v = blend(v, as_f32(g.hbuf[stats]), op_factor(g, s, k, P_CONTRAST));
    } else if (op == OP_AUTOCONTRAST) {
        const U3 lo = unpack_rgb(g.hbuf[stats]);
        const U3 hi = unpack_rgb(g.hbuf[stats + 1u]);
        v = U3{autocontrast_value(v.x, lo.x, hi.x), autocontrast_value(v.y, lo.y, hi.y),
            autocontrast_value(v.z, lo.z, hi.z)};
    } else if (op == OP_EQUALIZE) {
        v = U3{g.hbuf[stats + v.x], g.hbuf[stats + 256u + v.y], g.hbuf[stats + 512u + v.z]};
    } else if (op == OP_SHARPNESS) {
        if (xx > 0u && yy > 0u && xx + 1u < ow && yy + 1u < oh) {
            U3 sum = {0u, 0u, 0u};
            for (u32 dy = 0u; dy < 3u; dy++) {
                for (u32 dx = 0u; dx < 3u; dx++) {
                    const U3 q = unpack_rgb(g.hbuf[temp + (yy + dy - 1u) * ow + xx + dx - 1u]);
                    sum.x += q.x;
                    sum.y += q.y;
                    sum.z += q.z;
                }
            }
            const U3 c = unpack_rgb(g.hbuf[temp + p]);
            const float alpha = 1.0f - own_factor(g, s, k, 1.0f);
            v = U3{sharpen_value(c.x, sum.x + 4u * c.x, alpha),
                sharpen_value(c.y, sum.y + 4u * c.y, alpha),
                sharpen_value(c.z, sum.z + 4u * c.z, alpha)};
        }
    } else {
        // Blur's vertical pass: sum(w * h) is up to 38 bits, taken as the high and low 12
        // bits of h apart, then rounded half up at 30 bits, as the reference's u64 sum.
        const u32 kx = table(g, blur);
        const u32 ky = table(g, blur + 1u);
        const i32 ry = (i32)(ky / 2u);
        U3 hi = {0u, 0u, 0u};
        U3 lo = {0u, 0u, 0u};
        for (u32 t = 0u; t < ky; t++) {
            const u32 sy = reflect_index((i32)yy + (i32)t - ry, oh);
            const u32 w = table(g, blur + 2u + kx + t);
            const u32 q = temp + 3u * (sy * ow + xx);
            const U3 h = {g.hbuf[q], g.hbuf[q + 1u], g.hbuf[q + 2u]};
            hi.x += (h.x >> 12u) * w;
            hi.y += (h.y >> 12u) * w;
            hi.z += (h.z >> 12u) * w;
            lo.x += (h.x & 4095u) * w;
            lo.y += (h.y & 4095u) * w;
            lo.z += (h.z & 4095u) * w;
        }
        v = U3{umin((hi.x + ((lo.x + 536870912u) >> 12u)) >> 18u, 255u),
            umin((hi.y + ((lo.y + 536870912u) >> 12u)) >> 18u, 255u),
            umin((hi.z + ((lo.z + 536870912u) >> 12u)) >> 18u, 255u)};
    }
    v = pixel_ops(g, s, v, k + 1u, next_barrier(g, s, k + 1u, count));
    g.rbuf[rb + p] = pack_rgb(v);
}

struct Elem {
    u32 v;
    u32 c;
};

struct I2 {
    i32 x, y;
};

struct U2 {
    u32 x, y;
};

// One axis (k = 0: u, 1: v) of the affine map of sample s at output pixel (x, y):
// `a x + b y + c` as (integer part, 16-bit fraction), summed from 32-bit pieces so it is
// the CPU's exact 64-bit sum (x, y < 2^14, so each partial product fits).
static __device__ __forceinline__ I2 affine_axis(const Aug& g, u32 s, u32 k, u32 x, u32 y) {
    const i32 a = as_i32(plan_u(g, s, P_AFFINE + 3u * k));
    const i32 b = as_i32(plan_u(g, s, P_AFFINE + 3u * k + 1u));
    const i32 ci = as_i32(plan_u(g, s, P_AFFINE + 3u * k + 2u));
    const u32 cf = plan_u(g, s, P_AFFINE_FRAC + k);
    const u32 pa = ((u32)a & 0xffffu) * x;
    const u32 pb = ((u32)b & 0xffffu) * y;
    const u32 f = cf + (pa & 0xffffu) + (pb & 0xffffu);
    const i32 i = ci + (a >> AFFINE_FRAC_BITS) * (i32)x + (b >> AFFINE_FRAC_BITS) * (i32)y
        + (i32)(pa >> AFFINE_FRAC_BITS) + (i32)(pb >> AFFINE_FRAC_BITS)
        + (i32)(f >> AFFINE_FRAC_BITS);
    return I2{i, (i32)(f & 0xffffu)};
}

// The part of axis k (0: x, 1: y) of sample s's resized frame that holds the image.
static __device__ __forceinline__ I2 valid_range(const Aug& g, u32 s, u32 k) {
    const u32 w = plan_u(g, s, P_VALID + k);
    return I2{(i32)(w & 0xffffu), (i32)(w >> 16u)};
}

// The bilinear weight of the next pixel along one axis, from a position's fraction.
static __device__ __forceinline__ i32 affine_weight(i32 frac) {
    const u32 sh = AFFINE_FRAC_BITS - AFFINE_WEIGHT_BITS;
    return (frac + (1 << (sh - 1u))) >> sh;
}

// x / 2^bits rounded to the nearest integer, ties to even.
static __device__ __forceinline__ i32 round_even(i32 x, u32 bits) {
    const i32 q = x >> bits;
    const i32 r = x - (q << bits);
    const i32 half = 1 << (bits - 1u);
    return q + ((r > half || (r == half && (q & 1) != 0)) ? 1 : 0);
}

// f + round(m * (t - f)) in fixed point: the reference's `blend_fill`.
static __device__ __forceinline__ u32 blend_fill(i32 acc, i32 m, i32 fill) {
    const u32 wb = AFFINE_WEIGHT_BITS;
    if (m == (1 << (2u * wb))) {
        return (u32)iclamp(round_even(acc, 2u * wb), 0, 255);
    }
    const i32 t = (acc + (1 << (wb - 1u))) >> wb;
    const i32 mm = (m + (1 << (wb - 1u))) >> wb;
    return (u32)iclamp(fill + round_even(mm * (t - (fill << wb)), 2u * wb), 0, 255);
}

// Channel c of the warped image of sample s at output pixel (x, y) (before flips): the
// bilinear taps of `rbuf` inside the image, blended with the fill by their coverage.
static __device__ __forceinline__ u32 warped(const Aug& g, u32 s, u32 x, u32 y, u32 c) {
    const u32 ow = g.hdr[H_OUT_W];
    const u32 oh = g.hdr[H_OUT_H];
    const I2 u = affine_axis(g, s, 0u, x, y);
    const I2 v = affine_axis(g, s, 1u, x, y);
    const i32 wx = affine_weight(u.y);
    const i32 wy = affine_weight(v.y);
    const i32 one = 1 << AFFINE_WEIGHT_BITS;
    const u32 base = s * ow * oh - g.P[R_BASE];
    const I2 vx = valid_range(g, s, 0u);
    const I2 vy = valid_range(g, s, 1u);
    i32 acc = 0;
    i32 m = 0;
    for (i32 dy = 0; dy < 2; dy++) {
        const i32 r = v.x + dy;
        const i32 wr = dy == 1 ? wy : one - wy;
        if (r < vy.x || r >= vy.y) {
            continue;
        }
        for (i32 dx = 0; dx < 2; dx++) {
            const i32 col = u.x + dx;
            if (col < vx.x || col >= vx.y) {
                continue;
            }
            const i32 w = wr * (dx == 1 ? wx : one - wx);
            m += w;
            acc += w * (i32)((g.rbuf[base + (u32)r * ow + (u32)col] >> (8u * c)) & 255u);
        }
    }
    return blend_fill(acc, m, (i32)((plan_u(g, s, P_FILL) >> (8u * c)) & 255u));
}

// The pixel nearest a position (ties to even), or -1 outside the range [r.x, r.y).
static __device__ __forceinline__ i32 nearest_index(I2 p, I2 r) {
    const i32 half = 1 << (AFFINE_FRAC_BITS - 1u);
    const i32 i = p.x + ((p.y > half || (p.y == half && (p.x & 1) != 0)) ? 1 : 0);
    return (i >= r.x && i < r.y) ? i : -1;
}

// Output pixel q (row-major, ow by oh) as the column and row it reads from before any
// warp: flipped as the plan's `flags` say.
static __device__ __forceinline__ U2 flipped_xy(u32 flags, u32 q, u32 ow, u32 oh) {
    u32 x = urem(q, ow);
    u32 y = udiv(q, ow);
    if ((flags & FLIP_H) != 0u) {
        x = ow - 1u - x;
    }
    if ((flags & FLIP_V) != 0u) {
        y = oh - 1u - y;
    }
    return U2{x, y};
}

// One element of a sample's slot: channel value (0-255) after the warp and flips, and
// its channel.
static __device__ __forceinline__ Elem element(const Aug& g, u32 s, u32 l) {
    const u32 ow = g.hdr[H_OUT_W];
    const u32 oh = g.hdr[H_OUT_H];
    const u32 npx = ow * oh;
    u32 c;
    u32 q;
    if (g.hdr[H_LAYOUT] == 1u) {
        c = l % 3u;
        q = l / 3u;
    } else {
        c = udiv(l, npx);
        q = urem(l, npx);
    }
    const u32 flags = plan_u(g, s, P_FLAGS);
    const U2 p = flipped_xy(flags, q, ow, oh);
    if ((flags & AFFINE) != 0u) {
        return Elem{warped(g, s, p.x, p.y, c), c};
    }
    const u32 v = (g.rbuf[s * npx - g.P[R_BASE] + p.y * ow + p.x] >> (8u * c)) & 255u;
    return Elem{v, c};
}

// Whether element l of sample s lies in the plan's erased rectangle (output
// coordinates, after flips).
static __device__ __forceinline__ bool erased(const Aug& g, u32 s, u32 l) {
    if ((plan_u(g, s, P_FLAGS) & ERASE) == 0u) {
        return false;
    }
    const u32 ow = g.hdr[H_OUT_W];
    const u32 npx = ow * g.hdr[H_OUT_H];
    const u32 q = g.hdr[H_LAYOUT] == 1u ? udiv(l, 3u) : urem(l, npx);
    const u32 x = urem(q, ow);
    const u32 y = udiv(q, ow);
    const u32 rx = plan_u(g, s, P_ERASE);
    const u32 ry = plan_u(g, s, P_ERASE + 1u);
    return x >= (rx & 0xFFFFu) && x < (rx >> 16u) && y >= (ry & 0xFFFFu) && y < (ry >> 16u);
}

// The erased value of element l's channel.
static __device__ __forceinline__ float erase_value(const Aug& g, u32 s, u32 l) {
    const u32 npx = g.hdr[H_OUT_W] * g.hdr[H_OUT_H];
    const u32 c = g.hdr[H_LAYOUT] == 1u ? urem(l, 3u) : udiv(l, npx);
    return plan_f(g, s, P_ERASE_VALUE + c);
}

// A u8 batch's element: the erased value (truncated into 0-255) or the image's.
static __device__ __forceinline__ u32 element_u8(const Aug& g, u32 s, u32 l) {
    if (erased(g, s, l)) {
        return f32_to_u32(fclamp(erase_value(g, s, l), 0.0f, 255.0f));
    }
    return element(g, s, l).v;
}

static __device__ __forceinline__ float element_f(const Aug& g, u32 s, u32 l) {
    if (erased(g, s, l)) {
        return erase_value(g, s, l);
    }
    const Elem e = element(g, s, l);
    const float x = (float)e.v / 255.0f;
    if ((plan_u(g, s, P_FLAGS) & NORMALIZE) != 0u) {
        return (x - plan_f(g, s, P_MEAN + e.c)) / plan_f(g, s, P_STD + e.c);
    }
    return x;
}

// f16_bits: common.cuh.

// Word t of the write chunk of the images.
static __device__ __forceinline__ u32 image_word(const Aug& g, u32 t) {
    const u32 n = g.hdr[H_N];
    const u32 dtype = g.hdr[H_DTYPE];
    const u32 per = 3u * g.hdr[H_OUT_W] * g.hdr[H_OUT_H];
    const u32 b = g.P[BYTE0] + 4u * t;
    u32 word = 0u;
    if (dtype == 0u) {
#pragma unroll
        for (u32 k = 0u; k < 4u; k++) {
            const u32 e = b + k;
            const u32 s = g.P[S0] + udiv(e, per);
            if (s < n) {
                word |= element_u8(g, s, urem(e, per)) << (8u * k);
            }
        }
    } else if (dtype == 1u) {
#pragma unroll
        for (u32 k = 0u; k < 2u; k++) {
            const u32 e = b / 2u + k;
            const u32 s = g.P[S0] + udiv(e, per);
            if (s < n) {
                word |= f16_bits(element_f(g, s, urem(e, per))) << (16u * k);
            }
        }
    } else {
        const u32 e = b / 4u;
        const u32 s = g.P[S0] + udiv(e, per);
        if (s < n) {
            word = as_u32(element_f(g, s, urem(e, per)));
        }
    }
    return word;
}

// Word t of the write chunk of the masks.
static __device__ __forceinline__ u32 mask_word(const Aug& g, u32 t) {
    const u32 n = g.hdr[H_N];
    const u32 ow = g.hdr[H_OUT_W];
    const u32 oh = g.hdr[H_OUT_H];
    const u32 npx = ow * oh;
    const u32 e0 = (g.P[BYTE0] + 4u * t) / 2u;
    u32 word = 0u;
#pragma unroll
    for (u32 k = 0u; k < 2u; k++) {
        const u32 e = e0 + k;
        const u32 s = g.P[S0] + udiv(e, npx);
        u32 mw = 0u;
        if (s < n) {
            mw = desc(g, s, D_MASK_W);
        }
        if (mw != 0u) {
            const u32 flags = plan_u(g, s, P_FLAGS);
            const U2 p = flipped_xy(flags, urem(e, npx), ow, oh);
            u32 x = p.x;
            u32 y = p.y;
            u32 v = plan_u(g, s, P_MASK_FILL);
            bool inside = true;
            if ((flags & AFFINE) != 0u) {
                const i32 cx = nearest_index(affine_axis(g, s, 0u, x, y), valid_range(g, s, 0u));
                const i32 cy = nearest_index(affine_axis(g, s, 1u, x, y), valid_range(g, s, 1u));
                inside = cx >= 0 && cy >= 0;
                x = (u32)(cx > 0 ? cx : 0);
                y = (u32)(cy > 0 ? cy : 0);
            }
            if (inside) {
                const u32 nt = desc(g, s, D_NEAREST);
                const u32 idx = table(g, nt + ow + y) * mw + table(g, nt + x);
                v = (table(g, desc(g, s, D_MASK) + idx / 2u) >> (16u * (idx & 1u))) & 65535u;
            }
            word |= v << (16u * k);
        }
    }
    return word;
}

extern "C" __global__ void write_image(const KernelArgs a) {
    const Aug g = bindings(a);
    const u32 t = linear_id();
    if (t < g.P[WORDS]) {
        g.outw[t] = image_word(g, t);
    }
}

extern "C" __global__ void write_mask(const KernelArgs a) {
    const Aug g = bindings(a);
    const u32 t = linear_id();
    if (t < g.P[WORDS]) {
        g.outw[t] = mask_word(g, t);
    }
}

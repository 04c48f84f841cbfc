// Chroma upsampling and colour conversion: a line-by-line port of shaders/color.wgsl
// (itself a port of the scalar oracle src/decode/jpeg/color.rs: libjpeg-turbo's jdsample.c
// with fancy upsampling, jdcolor.c), over the packed layout documented in
// src/decode/jpeg/coeffs.rs.
//
// Entry point `color`, 64 threads per block, one thread per output pixel of every window
// in the chunk.
// Bindings: 0 `blob` (the decode chunk; read), 1 `planes` (what `idct` wrote; read),
// 2 `windows` (bound at the chunk's first output word; written: one RGBA word per pixel,
// R in the low byte, A = 255). No params.
//
// The chunk's header and ComponentDesc words, the invocation index and the lookups into
// the chunk are in kernels/decode_common.cuh, prepended to this file; the ImageDesc words,
// colour kinds and upsampling codes in src/backend/device/constants.rs, prepended before it.

struct ColorU3 {
    u32 x, y, z;
};
struct ColorI3 {
    i32 x, y, z;
};

static __device__ __forceinline__ u32 image_word(const u32* blob, u32 i, u32 w) {
    return record_word(blob, H_IMAGE_TABLE, i, w);
}

// Plane sample (sx, sy) in whole-component coordinates.
static __device__ __forceinline__ u32 plane_sample(
    const u32* blob, const u32* planes, u32 c, u32 sx, u32 sy) {
    const u32 size = comp_word(blob, c, C_DCT);
    const u32 x = sx - comp_word(blob, c, C_BX0) * size;
    const u32 y = sy - comp_word(blob, c, C_BY0) * size;
    const u32 word = planes[comp_word(blob, c, C_PLANE)
        + y * comp_word(blob, c, C_STRIDE) + x / 4u];
    return (word >> (8u * (x % 4u))) & 255u;
}

// i - 1 (up) or i + 1, clamped to 0..n.
static __device__ __forceinline__ u32 neighbour(u32 i, bool up, u32 n) {
    if (up) {
        return i == 0u ? 0u : i - 1u;
    }
    return umin(i + 1u, umax(n, 1u) - 1u);
}

// One axis of the triangle filter (jdsample.c's h2v1, h1v2 and h2v2 fancy upsampling)
// at full-resolution coordinate x of a component `count` samples long: the nearer
// sample x / 2, the other one beside x, and whether x is the first of its pair.
struct Tap {
    u32 near;
    u32 far;
    bool first;
};
static __device__ __forceinline__ Tap tap(u32 x, u32 count) {
    Tap t;
    t.near = x / 2u;
    t.first = x % 2u == 0u;
    t.far = neighbour(t.near, t.first, count);
    return t;
}

// The one-axis triangle filter: 3/4 of the nearer sample and 1/4 of the other, rounded
// up on the first of a pair and down on the second.
static __device__ __forceinline__ u32 triangle(u32 near, u32 far, bool first) {
    return (3u * near + far + (first ? 1u : 2u)) >> 2u;
}

// Component c's upsampled value at pixel (x, y) of the scaled image.
static __device__ __forceinline__ u32 component_value(
    const u32* blob, const u32* planes, u32 c, u32 x, u32 y) {
    const u32 method = comp_word(blob, c, C_METHOD);
    if (method == UP_FULL) {
        return plane_sample(blob, planes, c, x, y);
    }
    if (method == UP_H2V1) {
        const Tap h = tap(x, comp_word(blob, c, C_DW));
        return triangle(plane_sample(blob, planes, c, h.near, y),
            plane_sample(blob, planes, c, h.far, y), h.first);
    }
    if (method == UP_H1V2) {
        const Tap v = tap(y, comp_word(blob, c, C_DH));
        return triangle(plane_sample(blob, planes, c, x, v.near),
            plane_sample(blob, planes, c, x, v.far), v.first);
    }
    if (method == UP_H2V2) {
        const Tap v = tap(y, comp_word(blob, c, C_DH));
        const Tap h = tap(x, comp_word(blob, c, C_DW));
        const u32 here = 3u * plane_sample(blob, planes, c, h.near, v.near)
            + plane_sample(blob, planes, c, h.near, v.far);
        const u32 there = 3u * plane_sample(blob, planes, c, h.far, v.near)
            + plane_sample(blob, planes, c, h.far, v.far);
        return (3u * here + there + (h.first ? 8u : 7u)) >> 4u;
    }
    // UP_BOX
    return plane_sample(blob, planes, c, x / umax(comp_word(blob, c, C_EH), 1u),
        y / umax(comp_word(blob, c, C_EV), 1u));
}

// jdcolor.c's table entries for one Cb/Cr pair: offsets to add to Y for R, G, B. The
// inputs are bytes, so nothing here overflows.
static __device__ __forceinline__ ColorI3 ycc_offsets(u32 cb_in, u32 cr_in) {
    const i32 cb = (i32)cb_in - 128;
    const i32 cr = (i32)cr_in - 128;
    const i32 r = (91881 * cr + 32768) >> 16;
    const i32 b = (116130 * cb + 32768) >> 16;
    const i32 g = (-46802 * cr + (-22554 * cb + 32768)) >> 16;
    return ColorI3{r, g, b};
}

static __device__ __forceinline__ u32 clamp255(i32 v) { return (u32)iclamp(v, 0, 255); }

static __device__ __forceinline__ u32 ink(u32 v, bool inverted) {
    return inverted ? v : 255u - v;
}

// CMYK (as stored) to RGB, as decode::cpu's cmyk_to_rgb.
static __device__ __forceinline__ ColorU3 cmyk_to_rgb(u32 c, u32 m, u32 y, u32 k, bool inverted) {
    const u32 kk = ink(k, inverted);
    return ColorU3{
        (ink(c, inverted) * kk + 127u) / 255u,
        (ink(m, inverted) * kk + 127u) / 255u,
        (ink(y, inverted) * kk + 127u) / 255u,
    };
}

extern "C" __global__ void color(const KernelArgs a) {
    const u32* blob = (const u32*)a.ptr[0];
    const u32* planes = (const u32*)a.ptr[1];
    u32* windows = (u32*)a.ptr[2];
    const u32 gid = flat_id(64u);
    if (gid >= blob[H_PIXELS]) {
        return;
    }
    const u32 img = record_of(blob, H_IMAGE_TABLE, blob[H_IMAGES], I_PIXEL_START, gid);
    const u32 local = gid - image_word(blob, img, I_PIXEL_START);
    const u32 out = image_word(blob, img, I_OUT) + local;
    const u32 kind = image_word(blob, img, I_KIND);
    if (kind == KIND_PASSTHROUGH) {
        windows[out] = blob[image_word(blob, img, I_SRC) + local];
        return;
    }
    const u32 width = image_word(blob, img, I_WIDTH);
    const u32 x = image_word(blob, img, I_X0) + urem(local, width);
    const u32 y = image_word(blob, img, I_Y0) + udiv(local, width);
    const u32 first = image_word(blob, img, I_FIRST_COMPONENT);
    const u32 n = umin(image_word(blob, img, I_COMPONENTS), 4u);
    u32 v[4] = {0u, 0u, 0u, 0u};
    // WGSL's `c < n` loop, bounded by 4 so that v's indices stay constant.
#pragma unroll
    for (u32 c = 0u; c < 4u; c++) {
        if (c < n) {
            v[c] = component_value(blob, planes, first + c, x, y);
        }
    }
    const bool inverted = (image_word(blob, img, I_FLAGS) & 1u) != 0u;
    ColorU3 rgb = {0u, 0u, 0u};
    if (kind == KIND_GRAY) {
        rgb = ColorU3{v[0], v[0], v[0]};
    } else if (kind == KIND_YCBCR) {
        const ColorI3 o = ycc_offsets(v[1], v[2]);
        const i32 yy = (i32)v[0];
        rgb = ColorU3{clamp255(yy + o.x), clamp255(yy + o.y), clamp255(yy + o.z)};
    } else if (kind == KIND_RGB) {
        rgb = ColorU3{v[0], v[1], v[2]};
    } else if (kind == KIND_CMYK) {
        rgb = cmyk_to_rgb(v[0], v[1], v[2], v[3], inverted);
    } else if (kind == KIND_YCCK) {
        const ColorI3 o = ycc_offsets(v[1], v[2]);
        const i32 yy = (i32)v[0];
        rgb = cmyk_to_rgb(clamp255(255 - (yy + o.x)), clamp255(255 - (yy + o.y)),
            clamp255(255 - (yy + o.z)), v[3], inverted);
    }
    windows[out] = rgb.x | (rgb.y << 8u) | (rgb.z << 16u) | (255u << 24u);
}

// The hand-over from nvJPEG (CUDA only; the wgpu backend has no hardware decoder): one
// window of an image nvJPEG decoded to planes at their stored resolution
// (NVJPEG_OUTPUT_UNCHANGED), upsampled and converted here exactly as `color` does for the
// hybrid path (libjpeg's fancy upsampling), or of an image the CPU decoder wrote as
// interleaved RGB where nvJPEG refused it; into RGBA words of the windows buffer.
//
// Entry point `pack_planar`, 64 threads per block, one thread per window pixel.
// Bindings: 0 `header` (64 words, written by the host: word 0 mode, 0 planes or 1
// interleaved RGB; 1 kind, KIND_GRAY or KIND_YCBCR; 2 components; 3 the component table's
// first word, 16; 4 the RGB rows' pitch in bytes; from word 16, one 16-word component
// record per component in the layout `color` reads, its plane offset and stride in words
// of the `image` binding; read), 1 `image` (the planes, or the RGB rows; read), 2 `dst`
// (the window, w * h words; written).
// Params: 0 x0, 1 y0 (window origin in the image), 2 w, 3 h (window size), 4 grid_x
// (threads per row of the launch grid).
extern "C" __global__ void pack_planar(const KernelArgs a) {
    const u32* header = (const u32*)a.ptr[0];
    const u32* image = (const u32*)a.ptr[1];
    u32* dst = (u32*)a.ptr[2];
    const u32 w = a.params[2];
    const u32 i = global_invocation_id_x() + global_invocation_id_y() * a.params[4];
    if (i >= w * a.params[3]) {
        return;
    }
    const u32 x = a.params[0] + i % w;
    const u32 y = a.params[1] + i / w;
    if (header[0] == 1u) {
        const unsigned char* p =
            (const unsigned char*)image + (u64)y * header[4] + (u64)x * 3u;
        dst[i] = (u32)p[0] | ((u32)p[1] << 8u) | ((u32)p[2] << 16u) | 0xff000000u;
        return;
    }
    const u32 n = umin(header[2], 3u);
    u32 v[3] = {0u, 0u, 0u};
#pragma unroll
    for (u32 c = 0u; c < 3u; c++) {
        if (c < n) {
            v[c] = component_value(header, image, c, x, y);
        }
    }
    ColorU3 rgb = ColorU3{v[0], v[0], v[0]};
    if (header[1] == KIND_YCBCR) {
        const ColorI3 o = ycc_offsets(v[1], v[2]);
        const i32 yy = (i32)v[0];
        rgb = ColorU3{clamp255(yy + o.x), clamp255(yy + o.y), clamp255(yy + o.z)};
    }
    dst[i] = rgb.x | (rgb.y << 8u) | (rgb.z << 16u) | (255u << 24u);
}

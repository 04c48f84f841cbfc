// Chroma upsampling and colour conversion: a port of the scalar oracle
// src/decode/jpeg/color.rs (libjpeg-turbo's jdsample.c with fancy upsampling, jdcolor.c),
// over the packed layout documented in src/decode/jpeg/coeffs.rs.
//
// One dispatch covers a chunk: one invocation per output pixel of every window in it. It
// reads the component planes idct.wgsl wrote and writes one RGBA word (R in the low byte,
// A = 255) into `windows`, which is bound at the chunk's first output word.

// Binding 0, `blob` (the chunk), its header and ComponentDesc words, the invocation index
// and the lookups into the chunk are in shaders/decode_common.wgsl, joined after this file.
// The ImageDesc words, colour kinds and upsampling codes are those of
// src/backend/device/constants.rs, joined in front of it.
@group(0) @binding(1) var<storage, read> planes: array<u32>;
@group(0) @binding(2) var<storage, read_write> windows: array<u32>;

fn image_word(i: u32, w: u32) -> u32 {
    return record_word(H_IMAGE_TABLE, i, w);
}

// Plane sample (sx, sy) in whole-component coordinates.
fn plane_sample(c: u32, sx: u32, sy: u32) -> u32 {
    let size = comp_word(c, C_DCT);
    let x = sx - comp_word(c, C_BX0) * size;
    let y = sy - comp_word(c, C_BY0) * size;
    let word = planes[comp_word(c, C_PLANE) + y * comp_word(c, C_STRIDE) + x / 4u];
    return (word >> (8u * (x % 4u))) & 255u;
}

// i - 1 (up) or i + 1, clamped to 0..n.
fn neighbour(i: u32, up: bool, n: u32) -> u32 {
    if (up) {
        return select(i - 1u, 0u, i == 0u);
    }
    return min(i + 1u, max(n, 1u) - 1u);
}

// One axis of the triangle filter (jdsample.c's h2v1, h1v2 and h2v2 fancy upsampling)
// at full-resolution coordinate x of a component `count` samples long: the nearer
// sample x / 2, the other one beside x, and whether x is the first of its pair.
struct Tap {
    near: u32,
    far: u32,
    first: bool,
}

fn tap(x: u32, count: u32) -> Tap {
    let near = x / 2u;
    let first = x % 2u == 0u;
    return Tap(near, neighbour(near, first, count), first);
}

// The one-axis triangle filter: 3/4 of the nearer sample and 1/4 of the other, rounded
// up on the first of a pair and down on the second.
fn triangle(near: u32, far: u32, first: bool) -> u32 {
    return (3u * near + far + select(2u, 1u, first)) >> 2u;
}

// Component c's upsampled value at pixel (x, y) of the scaled image.
fn component_value(c: u32, x: u32, y: u32) -> u32 {
    let method = comp_word(c, C_METHOD);
    if (method == UP_FULL) {
        return plane_sample(c, x, y);
    }
    if (method == UP_H2V1) {
        let h = tap(x, comp_word(c, C_DW));
        return triangle(plane_sample(c, h.near, y), plane_sample(c, h.far, y), h.first);
    }
    if (method == UP_H1V2) {
        let v = tap(y, comp_word(c, C_DH));
        return triangle(plane_sample(c, x, v.near), plane_sample(c, x, v.far), v.first);
    }
    if (method == UP_H2V2) {
        let v = tap(y, comp_word(c, C_DH));
        let h = tap(x, comp_word(c, C_DW));
        let here = 3u * plane_sample(c, h.near, v.near) + plane_sample(c, h.near, v.far);
        let there = 3u * plane_sample(c, h.far, v.near) + plane_sample(c, h.far, v.far);
        return (3u * here + there + select(7u, 8u, h.first)) >> 4u;
    }
    // UP_BOX
    return plane_sample(c, x / max(comp_word(c, C_EH), 1u), y / max(comp_word(c, C_EV), 1u));
}

// jdcolor.c's table entries for one Cb/Cr pair: offsets to add to Y for R, G, B.
fn ycc_offsets(cb_in: u32, cr_in: u32) -> vec3<i32> {
    let cb = i32(cb_in) - 128;
    let cr = i32(cr_in) - 128;
    let r = (91881 * cr + 32768) >> 16u;
    let b = (116130 * cb + 32768) >> 16u;
    let g = (-46802 * cr + (-22554 * cb + 32768)) >> 16u;
    return vec3<i32>(r, g, b);
}

fn clamp255(v: i32) -> u32 {
    return u32(clamp(v, 0, 255));
}

fn ink(v: u32, inverted: bool) -> u32 {
    return select(255u - v, v, inverted);
}

// CMYK (as stored) to RGB, as decode::cpu's cmyk_to_rgb.
fn cmyk_to_rgb(c: u32, m: u32, y: u32, k: u32, inverted: bool) -> vec3<u32> {
    let kk = ink(k, inverted);
    return vec3<u32>(
        (ink(c, inverted) * kk + 127u) / 255u,
        (ink(m, inverted) * kk + 127u) / 255u,
        (ink(y, inverted) * kk + 127u) / 255u,
    );
}

@compute @workgroup_size(64)
fn color(inv: Invocation) {
    color_pixel(flat_id(inv, 64u));
}

// Pixel `gid` of the batch's windows: its image's components sampled and converted.
fn color_pixel(gid: u32) {
    if (gid >= blob[H_PIXELS]) {
        return;
    }
    let img = record_of(H_IMAGE_TABLE, blob[H_IMAGES], I_PIXEL_START, gid);
    let local = gid - image_word(img, I_PIXEL_START);
    let out = image_word(img, I_OUT) + local;
    let kind = image_word(img, I_KIND);
    if (kind == KIND_PASSTHROUGH) {
        windows[out] = blob[image_word(img, I_SRC) + local];
        return;
    }
    let width = image_word(img, I_WIDTH);
    let x = image_word(img, I_X0) + local % width;
    let y = image_word(img, I_Y0) + local / width;
    let first = image_word(img, I_FIRST_COMPONENT);
    let n = min(image_word(img, I_COMPONENTS), 4u);
    var v = array<u32, 4>(0u, 0u, 0u, 0u);
    for (var c = 0u; c < n; c++) {
        v[c] = component_value(first + c, x, y);
    }
    let inverted = (image_word(img, I_FLAGS) & 1u) != 0u;
    var rgb = vec3<u32>(0u, 0u, 0u);
    if (kind == KIND_GRAY) {
        rgb = vec3<u32>(v[0], v[0], v[0]);
    } else if (kind == KIND_YCBCR) {
        let o = ycc_offsets(v[1], v[2]);
        let yy = i32(v[0]);
        rgb = vec3<u32>(clamp255(yy + o.x), clamp255(yy + o.y), clamp255(yy + o.z));
    } else if (kind == KIND_RGB) {
        rgb = vec3<u32>(v[0], v[1], v[2]);
    } else if (kind == KIND_CMYK) {
        rgb = cmyk_to_rgb(v[0], v[1], v[2], v[3], inverted);
    } else if (kind == KIND_YCCK) {
        let o = ycc_offsets(v[1], v[2]);
        let yy = i32(v[0]);
        rgb = cmyk_to_rgb(
            clamp255(255 - (yy + o.x)),
            clamp255(255 - (yy + o.y)),
            clamp255(255 - (yy + o.z)),
            v[3],
            inverted,
        );
    }
    windows[out] = rgb.x | (rgb.y << 8u) | (rgb.z << 16u) | (255u << 24u);
}

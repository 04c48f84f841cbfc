// EXIF orientation on the device: a line-by-line port of shaders/orient.wgsl. Turns one
// decoded window (RGBA words, as `color` writes them) upright, exactly as the CPU
// decoder's `reorient` does (Pillow's exif_transpose).
//
// Entry point `orient`, 64 threads per block, one thread per output pixel.
// Bindings: 0 `src` (the windows buffer around the source window; read), 1 `dst` (the
// upright window, ow * oh words; written).
// Params (the WGSL `params` array): 0 src (first word of the source window within the
// `src` binding), 1 w, 2 h (source size), 3 orientation (2-8), 4 ow, 5 oh (output size),
// 6 grid_x (threads per row of the launch grid), 7 unused.

extern "C" __global__ void orient(const KernelArgs a) {
    const u32* src = (const u32*)a.ptr[0];
    u32* dst = (u32*)a.ptr[1];
    const u32* params = a.params;
    const u32 w = params[1];
    const u32 h = params[2];
    const u32 o = params[3];
    const u32 ow = params[4];
    const u32 oh = params[5];
    const u32 i = global_invocation_id_x() + global_invocation_id_y() * params[6];
    if (i >= ow * oh) {
        return;
    }
    const u32 x = i % ow;
    const u32 y = i / ow;
    u32 sx = x;
    u32 sy = y;
    switch (o) {
        case 2u: sx = w - 1u - x; sy = y; break;
        case 3u: sx = w - 1u - x; sy = h - 1u - y; break;
        case 4u: sx = x; sy = h - 1u - y; break;
        case 5u: sx = y; sy = x; break;
        case 6u: sx = y; sy = h - 1u - x; break;
        case 7u: sx = w - 1u - y; sy = h - 1u - x; break;
        case 8u: sx = w - 1u - y; sy = x; break;
        default: break;
    }
    dst[i] = src[params[0] + sy * w + sx];
}

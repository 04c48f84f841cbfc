// EXIF orientation on the device: a line-by-line port of shaders/orient.wgsl. Turns a
// group of decoded windows (RGBA words, as `color` writes them) upright, exactly as the
// CPU decoder's `reorient` does (Pillow's exif_transpose).
//
// Entry point `orient`, 64 threads per block, one thread per output pixel of every window
// of the group, the windows flattened; a binary search over the job table finds a
// thread's window.
// Bindings: 0 `src` (the windows buffer around the source windows; read), 1 `jobs` (the
// job table, 8 words a window; read), 2 `dst` (the upright windows; written).
// Jobs: 0 src (first word of the source window within the `src` binding), 1 w, 2 h
// (source size), 3 orientation (2-8), 4 ow, 5 oh (output size), 6 out (first word of the
// upright window within the `dst` binding), 7 first (the window's first thread: ow * oh
// summed over the windows before it).
// Params (the WGSL `params` array): 0 jobs, 1 invocations (ow * oh summed over every
// window), 2 grid_x (threads per row of the launch grid), 3-7 unused.

// Constants as enumerators, not variables (see augment.cu).
enum : u32 {
    JOB_WORDS = 8u,
};

extern "C" __global__ void orient(const KernelArgs a) {
    const u32* src = (const u32*)a.ptr[0];
    const u32* jobs = (const u32*)a.ptr[1];
    u32* dst = (u32*)a.ptr[2];
    const u32* params = a.params;
    const u32 i = global_invocation_id_x() + global_invocation_id_y() * params[2];
    if (i >= params[1]) {
        return;
    }
    // The window holding this thread: the last with first <= i.
    u32 lo = 0u;
    u32 hi = params[0];
    while (hi - lo > 1u) {
        const u32 mid = (lo + hi) / 2u;
        if (jobs[mid * JOB_WORDS + 7u] <= i) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    const u32 j = lo * JOB_WORDS;
    const u32 w = jobs[j + 1u];
    const u32 h = jobs[j + 2u];
    const u32 o = jobs[j + 3u];
    const u32 ow = jobs[j + 4u];
    const u32 local = i - jobs[j + 7u];
    const u32 x = local % ow;
    const u32 y = local / ow;
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
    dst[jobs[j + 6u] + local] = src[jobs[j] + sy * w + sx];
}

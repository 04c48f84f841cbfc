// The hand-over from nvJPEG's hardware decoder to the augment pass (CUDA only; the wgpu
// backend has no hardware decoder): copies the plan's window of an interleaved RGB image
// (NVJPEG_OUTPUT_RGBI) into RGBA words of the windows buffer, the layout `color` writes.
//
// Entry point `pack_rgbi`, 64 threads per block, one thread per window pixel.
// Bindings: 0 `src` (the RGBI image, rows `pitch` bytes apart; read), 1 `dst` (the
// window, w * h words; written).
// Params: 0 pitch (bytes), 1 x0, 2 y0 (window origin in the image), 3 w, 4 h (window
// size), 5 grid_x (threads per row of the launch grid).

extern "C" __global__ void pack_rgbi(const KernelArgs a) {
    const unsigned char* src = (const unsigned char*)a.ptr[0];
    u32* dst = (u32*)a.ptr[1];
    const u32 pitch = a.params[0];
    const u32 x0 = a.params[1];
    const u32 y0 = a.params[2];
    const u32 w = a.params[3];
    const u32 h = a.params[4];
    const u32 i = global_invocation_id_x() + global_invocation_id_y() * a.params[5];
    if (i >= w * h) {
        return;
    }
    const u32 x = i % w;
    const u32 y = i / w;
    const unsigned char* p = src + (u64)(y0 + y) * pitch + (u64)(x0 + x) * 3u;
    dst[i] = (u32)p[0] | ((u32)p[1] << 8u) | ((u32)p[2] << 16u) | 0xff000000u;
}

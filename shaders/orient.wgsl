// EXIF orientation on the device: turns one decoded window (RGBA words, as color.wgsl
// writes them) upright, exactly as the CPU decoder's `reorient` does (Pillow's
// exif_transpose). One invocation per output pixel.
//
// params (8 words): src (first word of the source window within the `src` binding),
// w, h (source size), orientation (2-8), ow, oh (output size), grid_x (invocations per
// row of the dispatch grid), unused.

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> params: array<u32, 8>;

@compute @workgroup_size(64)
fn orient(@builtin(global_invocation_id) gid: vec3<u32>) {
    let w = params[1];
    let h = params[2];
    let o = params[3];
    let ow = params[4];
    let oh = params[5];
    let i = gid.x + gid.y * params[6];
    if i >= ow * oh {
        return;
    }
    let x = i % ow;
    let y = i / ow;
    var sx = x;
    var sy = y;
    switch o {
        case 2u: { sx = w - 1u - x; sy = y; }
        case 3u: { sx = w - 1u - x; sy = h - 1u - y; }
        case 4u: { sx = x; sy = h - 1u - y; }
        case 5u: { sx = y; sy = x; }
        case 6u: { sx = y; sy = h - 1u - x; }
        case 7u: { sx = w - 1u - y; sy = h - 1u - x; }
        case 8u: { sx = w - 1u - y; sy = x; }
        default: {}
    }
    dst[i] = src[params[0] + sy * w + sx];
}

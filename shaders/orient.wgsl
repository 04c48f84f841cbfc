// EXIF orientation on the device: turns a group of decoded windows (RGBA words, as
// color.wgsl writes them) upright, exactly as the CPU decoder's `reorient` does (Pillow's
// exif_transpose). One invocation per output pixel of every window of the group, the
// windows flattened; a binary search over the job table finds an invocation's window.
//
// jobs (8 words a window): 0 src (first word of the source window within the `src`
// binding), 1 w, 2 h (source size), 3 orientation (2-8), 4 ow, 5 oh (output size), 6 out
// (first word of the upright window within the `dst` binding), 7 first (the window's
// first invocation: ow * oh summed over the windows before it).
// params (8 words): 0 jobs, 1 invocations (ow * oh summed over every window), 2 grid_x
// (invocations per row of the dispatch grid), 3-7 unused.

const JOB_WORDS: u32 = 8u;

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read> jobs: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
@group(0) @binding(3) var<storage, read> params: array<u32, 8>;

@compute @workgroup_size(64)
fn orient(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params[2];
    if i >= params[1] {
        return;
    }
    // The window holding this invocation: the last with first <= i.
    var lo = 0u;
    var hi = params[0];
    while hi - lo > 1u {
        let mid = (lo + hi) / 2u;
        if jobs[mid * JOB_WORDS + 7u] <= i {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let j = lo * JOB_WORDS;
    let w = jobs[j + 1u];
    let h = jobs[j + 2u];
    let o = jobs[j + 3u];
    let ow = jobs[j + 4u];
    let local = i - jobs[j + 7u];
    let x = local % ow;
    let y = local / ow;
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
    dst[jobs[j + 6u] + local] = src[jobs[j] + sy * w + sx];
}

// The fused augmentation of a batch: the GPU side of src/augment/reference/.
//
// Input: one blob of u32 words built on the host by src/backend/device/augment.rs
// (`AugmentInput`), bound twice: `hdr` holds the header, the per-sample descriptors and the
// plans (`SamplePlan`, 48 words each, byte for byte); `data` a range of the per-sample
// tables (resize coefficients, nearest tables, mask pixels). Decoded windows are RGBA
// words (R in the low byte) in `windows`.
//
// Passes, each dispatched over groups of samples or chunks of output words, so that no
// binding exceeds the device's storage binding limit (`P` says which part is bound):
// 1. `horizontal`: one invocation per (sample, window row read, output column): the
//    horizontal resize, u8 RGB into `hbuf` (one word per pixel).
// 2. `vertical_jitter`, one invocation per output pixel (workgroups within one sample):
//    phase 0, the vertical resize into `rbuf` (one word per output pixel) and the colour
//    ops before the plan's first whole-image op (contrast, auto-contrast, equalize,
//    sharpness, blur). Per whole-image op, phase 1 gathers what it needs into `hbuf`
//    after the group's items: the first workgroup of the sample computes a statistic
//    (contrast's mean as an exact integer sum, auto-contrast's extremes, equalize's
//    tables from workgroup histograms) into STATS_WORDS per sample; for a neighbourhood
//    op every invocation writes its pixel into a copy after the statistics (sharpness:
//    the pixel; blur: its horizontal pass, exact sums). Phase 2 (per pixel) applies the
//    op from there and runs the ops up to the next one. Launches order the phases.
// 3. `write_image`: one invocation per u32 word of the batch output: the affine warp
//    (bilinear, four taps of `rbuf`), flips, normalise, layout and dtype. A word may hold
//    elements of two samples; each word is written once.
// 4. `write_mask`: one invocation per u32 word of the mask output (two u16 labels):
//    Pillow's NEAREST through host tables, the affine warp (nearest), flips.
//
// The affine warp's positions are 32.16 fixed point built from 32-bit pieces
// (`affine_axis`), the exact sums the CPU takes in 64 bits, and its blend is integer, so
// warped pixels and labels are the CPU's bit for bit.
//
// Integer resize math is the CPU's: acc = (1 << 21) + sum(pixel * weight), then
// clamp(acc >> 22, 0, 255). Jitter uses the CPU's f32 operations in the same order.
//
// The constants (header, descriptor and SamplePlan words, flags, op codes) are those of
// src/backend/device/constants.rs, which src/backend/wgpu/shaders.rs joins in front.

// What one dispatch works on.
struct Params {
    // Samples [s0, s1).
    s0: u32,
    s1: u32,
    // Horizontal pass: items [item0, item0 + items).
    item0: u32,
    items: u32,
    // Word of `windows`, of the blob and of the result buffer where the bindings start.
    win_base: u32,
    data_base: u32,
    r_base: u32,
    // First item held by the bound horizontal buffer.
    h_base: u32,
    // Write passes: byte of sample s0's slot where the chunk starts, and its word count.
    byte0: u32,
    words: u32,
    // vertical_jitter: phase 0 (resize and the ops before the first contrast change),
    // 1 (the mean for contrast change `contrast`, from 1), 2 (its blend and the ops up to
    // the next).
    phase: u32,
    contrast: u32,
    _pad: vec4<u32>,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> hdr: array<u32>;
@group(0) @binding(2) var<storage, read> data: array<u32>;
@group(0) @binding(3) var<storage, read> windows: array<u32>;
@group(0) @binding(4) var<storage, read_write> hbuf: array<u32>;
@group(0) @binding(5) var<storage, read_write> rbuf: array<u32>;
@group(0) @binding(6) var<storage, read_write> outw: array<u32>;

var<workgroup> red_lo: array<u32, WG>;
var<workgroup> red_hi: array<u32, WG>;
var<workgroup> hist: array<atomic<u32>, 768>;

fn desc(s: u32, k: u32) -> u32 {
    return hdr[hdr[H_DESCS] + s * DESC_WORDS + k];
}

fn plan_u(s: u32, k: u32) -> u32 {
    return hdr[hdr[H_PLANS] + s * PLAN_WORDS + k];
}

fn plan_f(s: u32, k: u32) -> f32 {
    return bitcast<f32>(plan_u(s, k));
}

// A word of the data section, by its offset relative to the section.
fn table(rel: u32) -> u32 {
    return data[hdr[H_DATA] + rel - P.data_base];
}

fn unpack_rgb(p: u32) -> vec3<u32> {
    return vec3<u32>(p & 255u, (p >> 8u) & 255u, (p >> 16u) & 255u);
}

fn pack_rgb(v: vec3<u32>) -> u32 {
    return v.x | (v.y << 8u) | (v.z << 16u);
}

fn clip8(acc: vec3<i32>) -> vec3<u32> {
    return vec3<u32>(clamp(acc >> vec3<u32>(PRECISION), vec3<i32>(0), vec3<i32>(255)));
}

// The invocation's index in a 2D dispatch of 1D workgroups.
fn linear_id(wg: vec3<u32>, nw: vec3<u32>, li: u32) -> u32 {
    return (wg.y * nw.x + wg.x) * WG + li;
}

@compute @workgroup_size(256)
fn horizontal(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nw: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let t = linear_id(wg, nw, li);
    if t >= P.items {
        return;
    }
    let item = P.item0 + t;
    // The sample holding this item: the last with D_ITEM <= item.
    var lo = P.s0;
    var hi = P.s1;
    while hi - lo > 1u {
        let mid = (lo + hi) / 2u;
        if desc(mid, D_ITEM) <= item {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let s = lo;
    let ow = hdr[H_OUT_W];
    let local = item - desc(s, D_ITEM);
    let r = local / ow;
    let xx = local % ow;
    let row = desc(s, D_WIN) + (desc(s, D_ROW0) + r) * desc(s, D_WIN_W) - P.win_base;
    let start = table(desc(s, D_XB) + 2u * xx);
    let n = table(desc(s, D_XB) + 2u * xx + 1u);
    let wbase = desc(s, D_XW) + xx * desc(s, D_KX);
    var acc = vec3<i32>(ROUND);
    for (var k = 0u; k < n; k++) {
        let w = bitcast<i32>(table(wbase + k));
        acc += vec3<i32>(unpack_rgb(windows[row + start + k])) * w;
    }
    hbuf[item - P.h_base] = pack_rgb(clip8(acc));
}

fn gray(v: vec3<u32>) -> f32 {
    let f = vec3<f32>(v);
    return 0.2989 * f.x + 0.587 * f.y + 0.114 * f.z;
}

// torchvision's _blend on u8: clamp(a * r + b * (1 - r), 0, 255), truncated.
fn blend(a: vec3<u32>, b: f32, r: f32) -> vec3<u32> {
    return vec3<u32>(clamp(vec3<f32>(a) * r + b * (1.0 - r), vec3<f32>(0.0), vec3<f32>(255.0)));
}

// Rust's f32 `rem_euclid(1.0)` for |x| < 2^23.
fn rem1(x: f32) -> f32 {
    let r = x - trunc(x);
    return select(r, r + 1.0, r < 0.0);
}

fn hue_shift(p: vec3<u32>, shift: f32) -> vec3<u32> {
    let r = f32(p.x) / 255.0;
    let g = f32(p.y) / 255.0;
    let b = f32(p.z) / 255.0;
    let maxc = max(max(r, g), b);
    let minc = min(min(r, g), b);
    let eqc = maxc == minc;
    let range = maxc - minc;
    let s = range / select(maxc, 1.0, eqc);
    let div = select(range, 1.0, eqc);
    let rc = (maxc - r) / div;
    let gc = (maxc - g) / div;
    let bc = (maxc - b) / div;
    var h: f32;
    if maxc == r {
        h = bc - gc;
    } else if maxc == g {
        h = 2.0 + rc - bc;
    } else {
        h = 4.0 + gc - rc;
    }
    h = rem1(h / 6.0 + 1.0);
    h = rem1(h + shift);
    let v = maxc;
    let h6 = h * 6.0;
    let fi = floor(h6);
    let f = h6 - fi;
    let i = ((i32(fi) % 6) + 6) % 6;
    let q = clamp((1.0 - s * f) * v, 0.0, 1.0);
    let t = clamp((s * f + (1.0 - s)) * v, 0.0, 1.0);
    let pp = clamp((1.0 - s) * v, 0.0, 1.0);
    var o: vec3<f32>;
    switch i {
        case 0: { o = vec3<f32>(v, t, pp); }
        case 1: { o = vec3<f32>(q, v, pp); }
        case 2: { o = vec3<f32>(pp, v, t); }
        case 3: { o = vec3<f32>(pp, q, v); }
        case 4: { o = vec3<f32>(t, pp, v); }
        default: { o = vec3<f32>(v, pp, q); }
    }
    return vec3<u32>(clamp(o * (256.0 - 1e-3), vec3<f32>(0.0), vec3<f32>(255.0)));
}

// The colour op at position k of the plan's order (0 when none or jitter is off): four
// per word, in the order word, the next, then the two extension words.
fn op_at(s: u32, k: u32) -> u32 {
    if (plan_u(s, P_FLAGS) & JITTER) == 0u || k >= MAX_OPS {
        return 0u;
    }
    var w = P_ORDER;
    if k >= 12u {
        w = P_ORDER_EXT + 1u;
    } else if k >= 8u {
        w = P_ORDER_EXT;
    } else if k >= 4u {
        w = P_ORDER_HI;
    }
    return (plan_u(s, w) >> (8u * (k % 4u))) & 255u;
}

// Number of ops in the plan's order.
fn op_count(s: u32) -> u32 {
    var k = 0u;
    while k < MAX_OPS && op_at(s, k) != 0u {
        k++;
    }
    return k;
}

// The factor of op k: its own parameter word, else `otherwise`.
fn own_factor(s: u32, k: u32, otherwise: f32) -> f32 {
    let w = plan_u(s, P_OP_PARAMS + k);
    return select(otherwise, bitcast<f32>(w), w != 0u);
}

// The factor of op k: its own parameter word, else the plan word `fallback`.
fn op_factor(s: u32, k: u32, fallback: u32) -> f32 {
    return own_factor(s, k, plan_f(s, fallback));
}

// The integer parameter of op k (posterize bits, solarize threshold), else `fallback`.
fn op_int(s: u32, k: u32, fallback: u32) -> u32 {
    let w = plan_u(s, P_OP_PARAMS + k);
    if (w & PARAM_INT) != 0u {
        return w & 255u;
    }
    return fallback;
}

// Whether op k needs more than its own pixel (the reference's `needs_whole_image`).
fn is_barrier(s: u32, k: u32) -> bool {
    let op = op_at(s, k);
    if op == OP_CONTRAST {
        return op_factor(s, k, P_CONTRAST) != 1.0;
    }
    if op == OP_SHARPNESS {
        return hdr[H_OUT_W] > 2u && hdr[H_OUT_H] > 2u;
    }
    return op == OP_AUTOCONTRAST || op == OP_EQUALIZE || op == OP_BLUR;
}

// The first whole-image op at or after k, or the op count.
fn next_barrier(s: u32, k: u32, count: u32) -> u32 {
    var j = k;
    while j < count && !is_barrier(s, j) {
        j++;
    }
    return j;
}

// Applies the per-pixel ops [first, end) (no whole-image op among them) to one pixel.
fn pixel_ops(s: u32, v0: vec3<u32>, first: u32, end: u32) -> vec3<u32> {
    var v = v0;
    for (var k = first; k < end; k++) {
        let op = op_at(s, k);
        if op == OP_BRIGHTNESS {
            let f = op_factor(s, k, P_BRIGHTNESS);
            if f != 1.0 {
                v = vec3<u32>(clamp(vec3<f32>(v) * f, vec3<f32>(0.0), vec3<f32>(255.0)));
            }
        } else if op == OP_SATURATION {
            let f = op_factor(s, k, P_SATURATION);
            if f != 1.0 {
                v = blend(v, floor(gray(v)), f);
            }
        } else if op == OP_HUE {
            let f = plan_f(s, P_HUE);
            if f != 0.0 {
                v = hue_shift(v, f);
            }
        } else if op == OP_GRAYSCALE {
            v = vec3<u32>(u32(gray(v)));
        } else if op == OP_POSTERIZE {
            let bits = min(op_int(s, k, (plan_u(s, P_COLOR_PARAMS) >> 8u) & 255u), 8u);
            v = v & vec3<u32>((0xFF00u >> bits) & 255u);
        } else if op == OP_SOLARIZE {
            let t = op_int(s, k, plan_u(s, P_COLOR_PARAMS) & 255u);
            v = select(v, vec3<u32>(255u) - v, v >= vec3<u32>(t));
        }
    }
    return v;
}

// The op index of whole-image op `r` (from 1) in the plan's order, or the op count.
fn nth_barrier(s: u32, r: u32, count: u32) -> u32 {
    var k = next_barrier(s, 0u, count);
    for (var i = 1u; i < r && k < count; i++) {
        k = next_barrier(s, k + 1u, count);
    }
    return k;
}

// torch's reflect padding: the index tap `i` reads in [0, n), reflected as often as needed.
fn reflect(i: i32, n: u32) -> u32 {
    if n <= 1u {
        return 0u;
    }
    let period = 2 * (i32(n) - 1);
    var m = i % period;
    if m < 0 {
        m += period;
    }
    return u32(select(period - m, m, m < i32(n)));
}

// The reference's `autocontrast_value`.
fn autocontrast_value(v: u32, lo: u32, hi: u32) -> u32 {
    if lo >= hi {
        return v;
    }
    let inv_scale = f32(hi - lo) * (1.0 / 255.0);
    return u32(clamp((f32(v) - f32(lo)) / inv_scale, 0.0, 255.0));
}

// The reference's `sharpen_value` per channel.
fn sharpen_value(centre: vec3<u32>, sum13: vec3<u32>, alpha: f32) -> vec3<u32> {
    let soft = vec3<f32>((2u * sum13 + vec3<u32>(13u)) / vec3<u32>(26u));
    let x = vec3<f32>(centre);
    return vec3<u32>(clamp(fma(vec3<f32>(alpha), soft - x, x), vec3<f32>(0.0), vec3<f32>(255.0)));
}

// Phase 1 of a whole-image op, by one workgroup for the sample (`b == 0`): the contrast
// mean, the auto-contrast extremes or the equalize tables into hbuf[stats..]. Called in
// uniform control flow: it holds barriers.
fn whole_image_stats(li: u32, s: u32, op: u32, rb: u32, npx: u32, stats: u32) {
    if op == OP_CONTRAST {
        // The exact sum of the floored grayscale (a carry word above), then the mean.
        var lo = 0u;
        var hi = 0u;
        for (var j = li; j < npx; j += WG) {
            let a = lo;
            lo = lo + u32(floor(gray(unpack_rgb(rbuf[rb + j]))));
            hi = hi + select(0u, 1u, lo < a);
        }
        red_lo[li] = lo;
        red_hi[li] = hi;
        workgroupBarrier();
        for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
            if li < stride {
                let a = red_lo[li];
                let l = a + red_lo[li + stride];
                red_lo[li] = l;
                red_hi[li] = red_hi[li] + red_hi[li + stride] + select(0u, 1u, l < a);
            }
            workgroupBarrier();
        }
        if li == 0u {
            let l = red_lo[0];
            let h = red_hi[0];
            let n = max(npx, 1u);
            var mean: f32;
            if h == 0u && l < 16777216u {
                mean = f32(l) / f32(n);
            } else {
                mean = (f32(h) * 4294967296.0 + f32(l)) / f32(n);
            }
            hbuf[stats] = bitcast<u32>(mean);
        }
    } else if op == OP_AUTOCONTRAST {
        // Per channel minimum (packed in red_lo) and maximum (red_hi).
        var mn = vec3<u32>(255u);
        var mx = vec3<u32>(0u);
        for (var j = li; j < npx; j += WG) {
            let v = unpack_rgb(rbuf[rb + j]);
            mn = min(mn, v);
            mx = max(mx, v);
        }
        red_lo[li] = pack_rgb(mn);
        red_hi[li] = pack_rgb(mx);
        workgroupBarrier();
        for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
            if li < stride {
                red_lo[li] = pack_rgb(min(unpack_rgb(red_lo[li]), unpack_rgb(red_lo[li + stride])));
                red_hi[li] = pack_rgb(max(unpack_rgb(red_hi[li]), unpack_rgb(red_hi[li + stride])));
            }
            workgroupBarrier();
        }
        if li == 0u {
            hbuf[stats] = red_lo[0];
            hbuf[stats + 1u] = red_hi[0];
        }
    } else {
        // Equalize: the three histograms, then each channel's table (the reference's
        // `equalize_luts`), one invocation per channel.
        for (var i = li; i < 768u; i += WG) {
            atomicStore(&hist[i], 0u);
        }
        workgroupBarrier();
        for (var j = li; j < npx; j += WG) {
            let v = unpack_rgb(rbuf[rb + j]);
            atomicAdd(&hist[v.x], 1u);
            atomicAdd(&hist[256u + v.y], 1u);
            atomicAdd(&hist[512u + v.z], 1u);
        }
        workgroupBarrier();
        if li < 3u {
            let base = li * 256u;
            var last = 0u;
            for (var v = 0u; v < 256u; v++) {
                if atomicLoad(&hist[base + v]) != 0u {
                    last = v;
                }
            }
            let step = (npx - atomicLoad(&hist[base + last])) / 255u;
            var cum = 0u;
            hbuf[stats + base] = 0u;
            for (var v = 1u; v < 256u; v++) {
                cum += atomicLoad(&hist[base + v - 1u]);
                var l = v;
                if step != 0u {
                    l = min((cum + step / 2u) / step, 255u);
                }
                hbuf[stats + base + v] = l;
            }
        }
    }
}

@compute @workgroup_size(256)
fn vertical_jitter(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nw: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let ow = hdr[H_OUT_W];
    let oh = hdr[H_OUT_H];
    let npx = ow * oh;
    // `per` workgroups per sample, block `b` of WG pixels each. Everything below that
    // depends on `s` or `b` is uniform in the workgroup.
    let per = (npx + WG - 1u) / WG;
    let id = wg.y * nw.x + wg.x;
    let s = P.s0 + id / per;
    let b = id % per;
    if s >= P.s1 {
        return;
    }
    let rb = s * npx - P.r_base;
    // The sample's statistics and the copy its neighbourhood ops read, after the group's
    // items.
    let stats = P.items + (s - P.s0) * STATS_WORDS;
    let temp = P.items + (P.s1 - P.s0) * STATS_WORDS + (s - P.s0) * TEMP_WORDS * npx;
    let count = op_count(s);
    let p = b * WG + li;
    let xx = p % ow;
    let yy = p / ow;
    if P.phase == 0u {
        // Vertical resize and the ops before the first whole-image op.
        if p < npx {
            let hb = desc(s, D_ITEM) - P.h_base;
            let yb = desc(s, D_YB);
            let start = table(yb + 2u * yy);
            let n = table(yb + 2u * yy + 1u);
            let wbase = desc(s, D_YW) + yy * desc(s, D_KY);
            var acc = vec3<i32>(ROUND);
            for (var t = 0u; t < n; t++) {
                let w = bitcast<i32>(table(wbase + t));
                acc += vec3<i32>(unpack_rgb(hbuf[hb + (start + t) * ow + xx])) * w;
            }
            let v = pixel_ops(s, clip8(acc), 0u, next_barrier(s, 0u, count));
            rbuf[rb + p] = pack_rgb(v);
        }
        return;
    }
    let k = nth_barrier(s, P.contrast, count);
    if k >= count {
        return;
    }
    let op = op_at(s, k);
    let blur = desc(s, D_BLUR);
    if P.phase == 1u {
        if op == OP_SHARPNESS {
            if p < npx {
                hbuf[temp + p] = rbuf[rb + p];
            }
        } else if op == OP_BLUR {
            // The horizontal pass, exact sums (under 2^23) per channel.
            if p < npx {
                let kx = table(blur);
                let rx = i32(kx / 2u);
                var acc = vec3<u32>(0u);
                for (var t = 0u; t < kx; t++) {
                    let sx = reflect(i32(xx) + i32(t) - rx, ow);
                    acc += unpack_rgb(rbuf[rb + yy * ow + sx]) * table(blur + 2u + t);
                }
                hbuf[temp + 3u * p] = acc.x;
                hbuf[temp + 3u * p + 1u] = acc.y;
                hbuf[temp + 3u * p + 2u] = acc.z;
            }
        } else if b == 0u {
            whole_image_stats(li, s, op, rb, npx, stats);
        }
        return;
    }
    // Phase 2: the whole-image op, then the per-pixel ops up to the next one.
    if p >= npx {
        return;
    }
    var v = unpack_rgb(rbuf[rb + p]);
    if op == OP_CONTRAST {
        v = blend(v, bitcast<f32>(hbuf[stats]), op_factor(s, k, P_CONTRAST));
    } else if op == OP_AUTOCONTRAST {
        let lo = unpack_rgb(hbuf[stats]);
        let hi = unpack_rgb(hbuf[stats + 1u]);
        v = vec3<u32>(
            autocontrast_value(v.x, lo.x, hi.x),
            autocontrast_value(v.y, lo.y, hi.y),
            autocontrast_value(v.z, lo.z, hi.z),
        );
    } else if op == OP_EQUALIZE {
        v = vec3<u32>(hbuf[stats + v.x], hbuf[stats + 256u + v.y], hbuf[stats + 512u + v.z]);
    } else if op == OP_SHARPNESS {
        if xx > 0u && yy > 0u && xx + 1u < ow && yy + 1u < oh {
            var sum = vec3<u32>(0u);
            for (var dy = 0u; dy < 3u; dy++) {
                for (var dx = 0u; dx < 3u; dx++) {
                    sum += unpack_rgb(hbuf[temp + (yy + dy - 1u) * ow + xx + dx - 1u]);
                }
            }
            let c = unpack_rgb(hbuf[temp + p]);
            v = sharpen_value(c, sum + 4u * c, 1.0 - own_factor(s, k, 1.0));
        }
    } else {
        // Blur's vertical pass: sum(w * h) is up to 38 bits, taken as the high and low
        // 12 bits of h apart, then rounded half up at 30 bits, as the reference's u64 sum.
        let kx = table(blur);
        let ky = table(blur + 1u);
        let ry = i32(ky / 2u);
        var hi_acc = vec3<u32>(0u);
        var lo_acc = vec3<u32>(0u);
        for (var t = 0u; t < ky; t++) {
            let sy = reflect(i32(yy) + i32(t) - ry, oh);
            let w = table(blur + 2u + kx + t);
            let q = temp + 3u * (sy * ow + xx);
            let h = vec3<u32>(hbuf[q], hbuf[q + 1u], hbuf[q + 2u]);
            hi_acc += (h >> vec3<u32>(12u)) * w;
            lo_acc += (h & vec3<u32>(4095u)) * w;
        }
        let r = (hi_acc + ((lo_acc + vec3<u32>(536870912u)) >> vec3<u32>(12u))) >> vec3<u32>(18u);
        v = min(r, vec3<u32>(255u));
    }
    v = pixel_ops(s, v, k + 1u, next_barrier(s, k + 1u, count));
    rbuf[rb + p] = pack_rgb(v);
}

// One axis (k = 0: u, 1: v) of the affine map of sample s at output pixel (x, y):
// `a x + b y + c` as (integer part, 16-bit fraction), summed from 32-bit pieces so it is
// the CPU's exact 64-bit sum (x, y < 2^14, so each partial product fits).
fn affine_axis(s: u32, k: u32, x: u32, y: u32) -> vec2<i32> {
    let a = bitcast<i32>(plan_u(s, P_AFFINE + 3u * k));
    let b = bitcast<i32>(plan_u(s, P_AFFINE + 3u * k + 1u));
    let ci = bitcast<i32>(plan_u(s, P_AFFINE + 3u * k + 2u));
    let cf = plan_u(s, P_AFFINE_FRAC + k);
    let pa = u32(a & 0xffff) * x;
    let pb = u32(b & 0xffff) * y;
    let f = cf + (pa & 0xffffu) + (pb & 0xffffu);
    let i = ci + (a >> AFFINE_FRAC_BITS) * i32(x) + (b >> AFFINE_FRAC_BITS) * i32(y)
        + i32(pa >> AFFINE_FRAC_BITS) + i32(pb >> AFFINE_FRAC_BITS) + i32(f >> AFFINE_FRAC_BITS);
    return vec2<i32>(i, i32(f & 0xffffu));
}

// The bilinear weight of the next pixel along one axis, from a position's fraction.
fn affine_weight(frac: i32) -> i32 {
    let sh = AFFINE_FRAC_BITS - AFFINE_WEIGHT_BITS;
    return (frac + (1 << (sh - 1u))) >> sh;
}

// x / 2^bits rounded to the nearest integer, ties to even.
fn round_even(x: i32, bits: u32) -> i32 {
    let q = x >> bits;
    let r = x - (q << bits);
    let half = 1 << (bits - 1u);
    return q + select(0, 1, r > half || (r == half && (q & 1) != 0));
}

// f + round(m * (t - f)) in fixed point: the reference's `blend_fill`.
fn blend_fill(acc: i32, m: i32, fill: i32) -> u32 {
    let wb = AFFINE_WEIGHT_BITS;
    if m == (1 << (2u * wb)) {
        return u32(clamp(round_even(acc, 2u * wb), 0, 255));
    }
    let t = (acc + (1 << (wb - 1u))) >> wb;
    let mm = (m + (1 << (wb - 1u))) >> wb;
    return u32(clamp(fill + round_even(mm * (t - (fill << wb)), 2u * wb), 0, 255));
}

// Channel c of the warped image of sample s at output pixel (x, y) (before flips): the
// bilinear taps of `rbuf` inside the image, blended with the fill by their coverage.
fn warped(s: u32, x: u32, y: u32, c: u32) -> u32 {
    let ow = hdr[H_OUT_W];
    let oh = hdr[H_OUT_H];
    let u = affine_axis(s, 0u, x, y);
    let v = affine_axis(s, 1u, x, y);
    let wx = affine_weight(u.y);
    let wy = affine_weight(v.y);
    let one = 1 << AFFINE_WEIGHT_BITS;
    let base = s * ow * oh - P.r_base;
    let vx = valid_range(s, 0u);
    let vy = valid_range(s, 1u);
    var acc = 0;
    var m = 0;
    for (var dy = 0; dy < 2; dy++) {
        let r = v.x + dy;
        let wr = select(one - wy, wy, dy == 1);
        if r < vy.x || r >= vy.y {
            continue;
        }
        for (var dx = 0; dx < 2; dx++) {
            let col = u.x + dx;
            if col < vx.x || col >= vx.y {
                continue;
            }
            let w = wr * select(one - wx, wx, dx == 1);
            m += w;
            acc += w * i32((rbuf[base + u32(r) * ow + u32(col)] >> (8u * c)) & 255u);
        }
    }
    return blend_fill(acc, m, i32((plan_u(s, P_FILL) >> (8u * c)) & 255u));
}

// The part of axis k (0: x, 1: y) of sample s's resized frame that holds the image.
fn valid_range(s: u32, k: u32) -> vec2<i32> {
    let w = plan_u(s, P_VALID + k);
    return vec2<i32>(i32(w & 0xffffu), i32(w >> 16u));
}

// The pixel nearest a position (ties to even), or -1 outside the range [r.x, r.y).
fn nearest_index(p: vec2<i32>, r: vec2<i32>) -> i32 {
    let half = 1 << (AFFINE_FRAC_BITS - 1u);
    let i = p.x + select(0, 1, p.y > half || (p.y == half && (p.x & 1) != 0));
    return select(-1, i, i >= r.x && i < r.y);
}

// Output pixel q (row-major, ow by oh) as the column and row it reads from before any
// warp: flipped as the plan's `flags` say.
fn flipped_xy(flags: u32, q: u32, ow: u32, oh: u32) -> vec2<u32> {
    var x = q % ow;
    var y = q / ow;
    if (flags & FLIP_H) != 0u {
        x = ow - 1u - x;
    }
    if (flags & FLIP_V) != 0u {
        y = oh - 1u - y;
    }
    return vec2<u32>(x, y);
}

// One element of a sample's slot: channel value (0-255) after the warp and flips.
fn element(s: u32, l: u32) -> vec2<u32> {
    let ow = hdr[H_OUT_W];
    let oh = hdr[H_OUT_H];
    let npx = ow * oh;
    var c: u32;
    var q: u32;
    if hdr[H_LAYOUT] == 1u {
        c = l % 3u;
        q = l / 3u;
    } else {
        c = l / npx;
        q = l % npx;
    }
    let flags = plan_u(s, P_FLAGS);
    let p = flipped_xy(flags, q, ow, oh);
    if (flags & AFFINE) != 0u {
        return vec2<u32>(warped(s, p.x, p.y, c), c);
    }
    let v = (rbuf[s * npx - P.r_base + p.y * ow + p.x] >> (8u * c)) & 255u;
    return vec2<u32>(v, c);
}

// Whether element l of sample s lies in the plan's erased rectangle (output
// coordinates, after flips).
fn erased(s: u32, l: u32) -> bool {
    if (plan_u(s, P_FLAGS) & ERASE) == 0u {
        return false;
    }
    let ow = hdr[H_OUT_W];
    let npx = ow * hdr[H_OUT_H];
    let q = select(l % npx, l / 3u, hdr[H_LAYOUT] == 1u);
    let x = q % ow;
    let y = q / ow;
    let rx = plan_u(s, P_ERASE);
    let ry = plan_u(s, P_ERASE + 1u);
    return x >= (rx & 0xFFFFu) && x < (rx >> 16u) && y >= (ry & 0xFFFFu) && y < (ry >> 16u);
}

// The erased value of element l's channel.
fn erase_value(s: u32, l: u32) -> f32 {
    let npx = hdr[H_OUT_W] * hdr[H_OUT_H];
    let c = select(l / npx, l % 3u, hdr[H_LAYOUT] == 1u);
    return plan_f(s, P_ERASE_VALUE + c);
}

// A u8 batch's element: the erased value (truncated into 0-255) or the image's.
fn element_u8(s: u32, l: u32) -> u32 {
    if erased(s, l) {
        return u32(clamp(erase_value(s, l), 0.0, 255.0));
    }
    return element(s, l).x;
}

fn element_f(s: u32, l: u32) -> f32 {
    if erased(s, l) {
        return erase_value(s, l);
    }
    let e = element(s, l);
    let x = f32(e.x) / 255.0;
    if (plan_u(s, P_FLAGS) & NORMALIZE) != 0u {
        return (x - plan_f(s, P_MEAN + e.y)) / plan_f(s, P_STD + e.y);
    }
    return x;
}

// f16_bits: shaders/f16.wgsl, appended to this file when it is compiled.

// The builtins of the two write passes, which take nothing else.
struct Invocation {
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nw: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
}

// Word t of the write chunk of the images.
fn image_word(t: u32) -> u32 {
    let n = hdr[H_N];
    let dtype = hdr[H_DTYPE];
    let per = 3u * hdr[H_OUT_W] * hdr[H_OUT_H];
    let b = P.byte0 + 4u * t;
    var word = 0u;
    if dtype == 0u {
        for (var k = 0u; k < 4u; k++) {
            let e = b + k;
            let s = P.s0 + e / per;
            if s < n {
                word |= element_u8(s, e % per) << (8u * k);
            }
        }
    } else if dtype == 1u {
        for (var k = 0u; k < 2u; k++) {
            let e = b / 2u + k;
            let s = P.s0 + e / per;
            if s < n {
                word |= f16_bits(element_f(s, e % per)) << (16u * k);
            }
        }
    } else {
        let e = b / 4u;
        let s = P.s0 + e / per;
        if s < n {
            word = bitcast<u32>(element_f(s, e % per));
        }
    }
    return word;
}

// Word t of the write chunk of the masks.
fn mask_word(t: u32) -> u32 {
    let n = hdr[H_N];
    let ow = hdr[H_OUT_W];
    let oh = hdr[H_OUT_H];
    let npx = ow * oh;
    let e0 = (P.byte0 + 4u * t) / 2u;
    var word = 0u;
    for (var k = 0u; k < 2u; k++) {
        let e = e0 + k;
        let s = P.s0 + e / npx;
        var mw = 0u;
        if s < n {
            mw = desc(s, D_MASK_W);
        }
        if mw != 0u {
            let flags = plan_u(s, P_FLAGS);
            let p = flipped_xy(flags, e % npx, ow, oh);
            var x = p.x;
            var y = p.y;
            var v = plan_u(s, P_MASK_FILL);
            var inside = true;
            if (flags & AFFINE) != 0u {
                let cx = nearest_index(affine_axis(s, 0u, x, y), valid_range(s, 0u));
                let cy = nearest_index(affine_axis(s, 1u, x, y), valid_range(s, 1u));
                inside = cx >= 0 && cy >= 0;
                x = u32(max(cx, 0));
                y = u32(max(cy, 0));
            }
            if inside {
                let nt = desc(s, D_NEAREST);
                let idx = table(nt + ow + y) * mw + table(nt + x);
                v = (table(desc(s, D_MASK) + idx / 2u) >> (16u * (idx & 1u))) & 65535u;
            }
            word |= v << (16u * k);
        }
    }
    return word;
}

@compute @workgroup_size(256)
fn write_image(inv: Invocation) {
    let t = linear_id(inv.wg, inv.nw, inv.li);
    if t < P.words {
        outw[t] = image_word(t);
    }
}

@compute @workgroup_size(256)
fn write_mask(inv: Invocation) {
    let t = linear_id(inv.wg, inv.nw, inv.li);
    if t < P.words {
        outw[t] = mask_word(t);
    }
}

// Batch-level mixing after the per-sample pass: MixUp or CutMix of a batch's images, the
// GPU side of src/augment/mix.rs (`apply`). f16_bits and f16_value: shaders/f16.wgsl,
// appended to this file when it is compiled.
//
// One invocation per u32 word of the images. Each element of the word (4 u8, 2 f16 or 1
// f32) at global element index g is slot s = g / per, position p = g % per of its image;
// its partner is the same position of slot s - 1 (slot 0's: the last slot). Both are read
// from `src`, a copy of the images made before the pass, so the result is what every
// element was before mixing, whatever order invocations run in; each word of `dst` is
// written once.
//
// MixUp: partner * m + own * l, each product and the sum rounded to the element type
// (f16: computed in f32, rounded to f16). CutMix: inside the box every element takes the
// partner's bits. Elements outside the box, or past the last slot, keep their bits.
//
// params (src/backend/device/mix.rs): 0 words, 1 per (3 * width * height), 2 len, 3 dtype
// (0 u8, 1 f16, 2 f32), 4 kind (0 MixUp, 1 CutMix), 5 layout (0 NCHW, 1 NHWC), 6 width,
// 7 height, 8-11 the box x0, y0, x1, y1 (x1, y1 exclusive), 12 l and 13 m (f32 bits).

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

struct Params {
    words: u32,
    per: u32,
    len: u32,
    dtype: u32,
    kind: u32,
    nhwc: u32,
    width: u32,
    height: u32,
    x0: u32,
    y0: u32,
    x1: u32,
    y1: u32,
    l: u32,
    m: u32,
    _pad: vec2<u32>,
}

// Whether position p of an image is mixed.
fn inside(p: u32) -> bool {
    if P.kind == 0u {
        return true;
    }
    let plane = P.width * P.height;
    var q = p / 3u;
    if P.nhwc == 0u {
        q = p % plane;
    }
    let x = q % P.width;
    let y = q / P.width;
    return x >= P.x0 && x < P.x1 && y >= P.y0 && y < P.y1;
}

// The element index of g's partner.
fn partner(g: u32) -> u32 {
    if g < P.per {
        return g + (P.len - 1u) * P.per;
    }
    return g - P.per;
}

// Bits of element e of `src`, `bits` wide (8, 16 or 32).
fn element(e: u32, bits: u32) -> u32 {
    if bits == 32u {
        return src[e];
    }
    let per_word = 32u / bits;
    let shift = (e % per_word) * bits;
    return (src[e / per_word] >> shift) & ((1u << bits) - 1u);
}

// The mixed bits of element g (own bits `own`), `bits` wide.
fn mixed(g: u32, own: u32, bits: u32) -> u32 {
    if g >= P.len * P.per || !inside(g % P.per) {
        return own;
    }
    let other = element(partner(g), bits);
    if P.kind == 1u {
        return other;
    }
    let l = bitcast<f32>(P.l);
    let m = bitcast<f32>(P.m);
    if bits == 32u {
        let a = bitcast<f32>(other) * m;
        let b = bitcast<f32>(own) * l;
        return bitcast<u32>(a + b);
    }
    let a = f16_value(f16_bits(f16_value(other) * m));
    let b = f16_value(f16_bits(f16_value(own) * l));
    return f16_bits(a + b);
}

@compute @workgroup_size(256)
fn mix_batch(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nw: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let t = (wg.y * nw.x + wg.x) * WG + li;
    if t >= P.words {
        return;
    }
    let bits = 8u << P.dtype;
    let per_word = 32u / bits;
    let word = src[t];
    if bits == 32u {
        dst[t] = mixed(t, word, 32u);
        return;
    }
    var out = 0u;
    let mask = (1u << bits) - 1u;
    for (var k = 0u; k < per_word; k++) {
        let own = (word >> (k * bits)) & mask;
        out |= mixed(t * per_word + k, own, bits) << (k * bits);
    }
    dst[t] = out;
}

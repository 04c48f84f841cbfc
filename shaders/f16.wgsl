// IEEE binary16 conversions, appended to the shaders that write or read f16 elements
// (augment.wgsl, mix.wgsl) when they are compiled: WGSL has no includes, and the two must
// round alike.

// IEEE binary16 bits of `x`, rounded to nearest even (as the CPU's `half::f16::from_f32`).
// Integer code rather than pack2x16float, whose rounding is left to the driver and which
// some downlevel adapters lack.
fn f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    let e = i32((b >> 23u) & 255u);
    let m = b & 0x7fffffu;
    if e == 255 {
        return sign | 0x7c00u | select(0u, 0x200u | (m >> 13u), m != 0u);
    }
    let he = e - 112;
    if he >= 31 {
        return sign | 0x7c00u;
    }
    if he <= 0 {
        if he < -10 {
            return sign;
        }
        let m24 = m | 0x800000u;
        let shift = u32(14 - he);
        var r = m24 >> shift;
        let rem = m24 & ((1u << shift) - 1u);
        let halfway = 1u << (shift - 1u);
        if rem > halfway || (rem == halfway && (r & 1u) != 0u) {
            r += 1u;
        }
        return sign | r;
    }
    var r = (u32(he) << 10u) | (m >> 13u);
    let rem = m & 0x1fffu;
    if rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u) {
        r += 1u;
    }
    return sign | r;
}

// The f32 value of IEEE binary16 bits `h` (the low 16 bits), exactly: integer code rather
// than unpack2x16float, which may flush subnormals.
fn f16_value(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 31u;
    let m = h & 0x3ffu;
    if e == 31u {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u));
    }
    if e == 0u {
        // Subnormal (or zero): m * 2^-24, exact in f32.
        let v = f32(m) * 5.9604644775390625e-8;
        return select(v, -v, sign != 0u);
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

// Shared prelude of the CUDA kernels: the host prepends this file to every kernels/*.cu
// source before NVRTC compiles it (NVRTC has no include path for libc, so nothing here
// includes anything), and tests/kernel_host/emulator.cpp includes it once before all the
// sources to run them on the CPU.
//
// The launch contract is src/backend/device/launch.rs: every kernel is
// `extern "C" __global__ void NAME(const KernelArgs a)`, its WGSL storage binding i is
// `a.ptr[i]` (a.words[i] u32 words long), its WGSL parameter record is `a.params`.
//
// The kernels are line-by-line ports of shaders/*.wgsl and must give the same bits:
// compile with --fmad=false, write plain f32 expressions (no fused or fast-math
// intrinsics), and do wrapping i32 arithmetic in u32 (signed overflow is UB in C++).

typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef unsigned short u16;

// 64 + 32 + 64 = 160 bytes, no padding: the host writes it field by field.
struct KernelArgs {
    u64 ptr[8];
    u32 words[8];
    u32 params[16];
};

// WGSL builtins. Workgroups are 1D (blockDim.y == 1), as every entry point declares.
__device__ __forceinline__ u32 local_invocation_index() { return threadIdx.x; }
__device__ __forceinline__ u32 workgroup_id_x() { return blockIdx.x; }
__device__ __forceinline__ u32 workgroup_id_y() { return blockIdx.y; }
__device__ __forceinline__ u32 num_workgroups_x() { return gridDim.x; }
__device__ __forceinline__ u32 global_invocation_id_x() {
    return blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ u32 global_invocation_id_y() {
    return blockIdx.y * blockDim.y + threadIdx.y;
}

// bitcast<f32>, bitcast<u32>, bitcast<i32>.
__device__ __forceinline__ float as_f32(u32 x) { return __uint_as_float(x); }
__device__ __forceinline__ u32 as_u32(float x) { return __float_as_uint(x); }
__device__ __forceinline__ i32 as_i32(u32 x) { return (i32)x; }

// WGSL's `i32(x) >> n` on a wrapping i32 kept in u32: an arithmetic shift.
__device__ __forceinline__ u32 sra(u32 x, u32 n) { return (u32)((i32)x >> n); }

__device__ __forceinline__ u32 umin(u32 a, u32 b) { return a < b ? a : b; }
__device__ __forceinline__ u32 umax(u32 a, u32 b) { return a > b ? a : b; }
__device__ __forceinline__ i32 iclamp(i32 x, i32 lo, i32 hi) {
    return x < lo ? lo : (x > hi ? hi : x);
}
// min(max(x, lo), hi); a NaN gives lo (fmaxf drops it), which the saturating conversions
// below would turn into 0 anyway, as Rust's `as` does in the CPU oracle.
__device__ __forceinline__ float fclamp(float x, float lo, float hi) {
    return fminf(fmaxf(x, lo), hi);
}

// u32(f32) and i32(f32): truncation, saturating at the type's range, NaN to 0 (as WGSL
// and Rust's `as`; the plain C++ conversion is UB out of range).
__device__ __forceinline__ u32 f32_to_u32(float x) {
    if (!(x > 0.0f)) {
        return 0u;
    }
    if (x >= 4294967296.0f) {
        return 0xffffffffu;
    }
    return (u32)x;
}
__device__ __forceinline__ i32 f32_to_i32(float x) {
    if (x != x) {
        return 0;
    }
    if (x <= -2147483648.0f) {
        return (i32)0x80000000u;
    }
    if (x >= 2147483648.0f) {
        return 0x7fffffff;
    }
    return (i32)x;
}

// u32 `/` and `%` with a divisor from the data: WGSL defines x / 0 = x and x % 0 = 0 where
// C++ has UB (and the CPU emulator would trap).
__device__ __forceinline__ u32 udiv(u32 a, u32 b) { return b == 0u ? a : a / b; }
__device__ __forceinline__ u32 urem(u32 a, u32 b) { return b == 0u ? 0u : a % b; }

// IEEE binary16 conversions, shared by augment.cu and mix.cu (shaders/f16.wgsl in WGSL).
// IEEE binary16 bits of `x`, rounded to nearest even (as the CPU's `half::f16::from_f32`).
__device__ __forceinline__ u32 f16_bits(float x) {
    const u32 b = as_u32(x);
    const u32 sign = (b >> 16u) & 0x8000u;
    const i32 e = (i32)((b >> 23u) & 255u);
    const u32 m = b & 0x7fffffu;
    if (e == 255) {
        return sign | 0x7c00u | (m != 0u ? 0x200u | (m >> 13u) : 0u);
    }
    const i32 he = e - 112;
    if (he >= 31) {
        return sign | 0x7c00u;
    }
    if (he <= 0) {
        if (he < -10) {
            return sign;
        }
        const u32 m24 = m | 0x800000u;
        const u32 shift = (u32)(14 - he);
        u32 r = m24 >> shift;
        const u32 rem = m24 & ((1u << shift) - 1u);
        const u32 halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (r & 1u) != 0u)) {
            r += 1u;
        }
        return sign | r;
    }
    u32 r = ((u32)he << 10u) | (m >> 13u);
    const u32 rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) {
        r += 1u;
    }
    return sign | r;
}

// The f32 value of IEEE binary16 bits `h` (the low 16 bits), exactly (shaders/f16.wgsl).
__device__ __forceinline__ float f16_value(u32 h) {
    const u32 sign = (h & 0x8000u) << 16u;
    const u32 e = (h >> 10u) & 31u;
    const u32 m = h & 0x3ffu;
    if (e == 31u) {
        return as_f32(sign | 0x7f800000u | (m << 13u));
    }
    if (e == 0u) {
        // Subnormal (or zero): m * 2^-24, exact in f32.
        const float v = (float)m * 5.9604644775390625e-8f;
        return sign != 0u ? -v : v;
    }
    return as_f32(sign | ((e + 112u) << 23u) | (m << 13u));
}

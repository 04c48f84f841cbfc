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

// Just enough of CUDA for kernels/common.cuh and kernels/*.cu to compile as C++20 with a
// host compiler and run on the CPU (tests/kernel_host/emulator.cpp).
//
// - Execution-space qualifiers vanish, and so does `__constant__` (a constant table is
//   an ordinary namespace-scope array); `__shared__` becomes `static`, which is right as
//   long as one block of a kernel that uses shared memory runs at a time (the emulator
//   runs such "cooperative" kernels block by block).
// - threadIdx, blockIdx, blockDim, gridDim are per-thread: the emulator sets them before it
//   calls a kernel on a thread.
// - __syncthreads() waits on the block's std::barrier. A kernel the emulator runs without
//   one (its threads one after the other) has no business calling it: that is an error.
// - The math is <cmath>'s IEEE float functions; build with -ffp-contract=off (no FMA
//   contraction, like NVRTC's --fmad=false) and without -ffast-math.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __constant__

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

// The barrier of the block the calling thread belongs to, or null when the kernel runs its
// threads sequentially.
inline thread_local std::barrier<>* kernel_host_block_barrier = nullptr;

inline void __syncthreads() {
    if (kernel_host_block_barrier == nullptr) {
        std::fputs("emulator: __syncthreads() in a kernel not marked cooperative in the "
                   "emulator's kernel table\n",
            stderr);
        std::_Exit(4);
    }
    kernel_host_block_barrier->arrive_and_wait();
}

inline float __uint_as_float(unsigned x) {
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

inline unsigned __float_as_uint(float f) {
    unsigned x;
    std::memcpy(&x, &f, sizeof x);
    return x;
}

// Just enough of CUDA for kernels/common.cuh and kernels/*.cu to compile as C++20 with a
// host compiler and run on the CPU (tests/kernel_host/emulator.cpp).
//
// - Execution-space qualifiers vanish, and so does `__constant__` (a constant table is
//   an ordinary namespace-scope array); `__shared__` becomes `static thread_local`, which
//   is right as long as the threads of one block share an OS thread and it runs one block
//   at a time (the emulator runs the threads of "cooperative" kernels, those with
//   barriers, as fibers on one OS thread, block after block on each).
// - threadIdx, blockIdx, blockDim, gridDim are per-thread: the emulator sets them before it
//   calls a kernel on a thread.
// - __syncthreads() switches to the next fiber of the block (the emulator's scheduler
//   runs every live fiber of the block to its next barrier, or its end, before any goes
//   on). A kernel the emulator runs without fibers (its threads one after the other) has
//   no business calling it: that is an error.
// - atomicAdd is a plain add: the threads of a block switch only at barriers. atomicOr
//   is a real atomic: the sync Huffman passes OR into a status word from every block,
//   and blocks run in parallel on several OS threads.
// - The math is <cmath>'s IEEE float functions; build with -ffp-contract=off (no FMA
//   contraction, like NVRTC's --fmad=false) and without -ffast-math.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __constant__

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

// What __syncthreads() does on this OS thread: yield to the block's fiber scheduler, or
// null when the kernel runs its threads one after the other.
inline thread_local void (*kernel_host_sync)() = nullptr;

inline void __syncthreads() {
    if (kernel_host_sync == nullptr) {
        std::fputs("emulator: __syncthreads() in a kernel not marked cooperative in the "
                   "emulator's kernel table\n",
            stderr);
        std::_Exit(4);
    }
    kernel_host_sync();
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

// The threads of a block share an OS thread and switch only at barriers, so a plain
// read-modify-write is atomic among them.
inline unsigned atomicAdd(unsigned* address, unsigned value) {
    const unsigned old = *address;
    *address = old + value;
    return old;
}

// Every block's threads may OR into the same word, from several OS threads at once.
inline unsigned atomicOr(unsigned* address, unsigned value) {
    return __atomic_fetch_or(address, value, __ATOMIC_RELAXED);
}

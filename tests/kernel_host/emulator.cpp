// Runs the CUDA kernels of kernels/*.cu on the CPU, for tests on machines without a GPU.
//
// The same sources NVRTC compiles are compiled here as C++20 through cuda_host.h: each
// kernels/*.cu in its own namespace (their helpers and constants share names), the
// extern "C" entry points keeping their names. Build, with DIR holding the constants
// (below):
//   c++ -std=c++20 -O2 -ffp-contract=off -pthread -I DIR tests/kernel_host/emulator.cpp -o emulator
//
// Protocol (all integers little-endian). Request on stdin:
//   "SKH1", u32 buffer count, per buffer: u64 bytes, the bytes;
//   u32 step count, per step: u32 kind, then
//     kind 0 (launch): u32 name length, the name, u32 grid x, u32 grid y,
//       u32 binding count, per binding: u32 buffer, u64 byte offset, u64 bytes;
//       16 u32 params;
//     kind 1 (copy): src (u32 buffer, u64 offset, u64 bytes), dst (the same).
// Reply on stdout: "SKH1", u32 buffer count, per buffer: u64 bytes, the bytes (every
// buffer after all steps). Anything malformed, or a launch that breaks the kernel contract
// (src/backend/device/launch.rs), is a message on stderr and exit status 2; a kernel that
// reads or writes outside its bindings, or writes a read-only one, is exit status 3; one
// that calls __syncthreads() without being marked cooperative below, exit status 4.
//
// How a launch runs: each binding is copied into its own allocation that ends at an
// inaccessible guard page (read-only bindings are made read-only), so an access past the
// end of a binding faults instead of landing in a neighbour; written bindings are copied
// back afterwards. Blocks run in parallel over the CPUs. A block of a kernel without
// barriers runs its threads one after the other; a cooperative kernel's (shared memory
// and __syncthreads) runs its threads as fibers on one OS thread, each to its next barrier
// in turn.

#include "cuda_host.h"

#include "../../kernels/common.cuh"

// decode_common.cuh, idct_common.cuh and huffman_common.cuh go before the sources the
// host prepends them to (kernels.rs), and each header and source after the constants it
// reads: the files STEM.constants.h, which the test harness writes from
// src/backend/device/constants.rs (the text the host prepends) into a directory on the
// include path.
namespace k_huffman {
#include "decode_common.constants.h"
#include "../../kernels/decode_common.cuh"
#include "idct_common.constants.h"
#include "../../kernels/idct_common.cuh"
#include "huffman_common.constants.h"
#include "../../kernels/huffman_common.cuh"
#include "huffman.constants.h"
#include "../../kernels/huffman.cu"
}
namespace k_sync {
#include "decode_common.constants.h"
#include "../../kernels/decode_common.cuh"
#include "idct_common.constants.h"
#include "../../kernels/idct_common.cuh"
#include "huffman_common.constants.h"
#include "../../kernels/huffman_common.cuh"
#include "sync_huffman.constants.h"
#include "../../kernels/sync_huffman.cu"
}
namespace k_idct {
#include "decode_common.constants.h"
#include "../../kernels/decode_common.cuh"
#include "idct_common.constants.h"
#include "../../kernels/idct_common.cuh"
#include "../../kernels/idct.cu"
}
namespace k_color {
#include "decode_common.constants.h"
#include "../../kernels/decode_common.cuh"
#include "color.constants.h"
#include "../../kernels/color.cu"
}
namespace k_orient {
#include "../../kernels/orient.cu"
}
namespace k_augment {
#include "augment.constants.h"
#include "../../kernels/augment.cu"
}
namespace k_mix {
#include "mix.constants.h"
#include "../../kernels/mix.cu"
}

#include <signal.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Kernel = void (*)(const KernelArgs);

struct KernelInfo {
    const char* name;
    Kernel fn;
    unsigned block;    // threads per block: the WGSL @workgroup_size
    unsigned bindings; // storage bindings, exactly
    unsigned writable; // bit i: binding i is read_write in the WGSL
    bool cooperative;  // uses shared memory and __syncthreads
};

constexpr unsigned AUGMENT_WRITABLE = (1u << 3) | (1u << 4) | (1u << 5);
// The sync Huffman passes: the records, the coefficients and the status words.
constexpr unsigned SYNC_WRITABLE = (1u << 1) | (1u << 2) | (1u << 3);

const KernelInfo KERNELS[] = {
    {"huffman", k_huffman::huffman, 32, 3, (1u << 1) | (1u << 2), false},
    {"idct", k_idct::idct, 64, 3, 1u << 1, false},
    {"color", k_color::color, 64, 3, 1u << 2, false},
    {"orient", k_orient::orient, 64, 3, 1u << 2, false},
    {"horizontal", k_augment::horizontal, 256, 6, AUGMENT_WRITABLE, false},
    {"vertical_jitter", k_augment::vertical_jitter, 256, 6, AUGMENT_WRITABLE, true},
    {"write_image", k_augment::write_image, 256, 6, AUGMENT_WRITABLE, false},
    {"write_mask", k_augment::write_mask, 256, 6, AUGMENT_WRITABLE, false},
    {"mix_batch", k_mix::mix_batch, 256, 2, 1u << 1, false},
    {"pack_planar", k_color::pack_planar, 64, 3, 1u << 2, false},
    {"sync_start", k_sync::sync_start, 32, 4, SYNC_WRITABLE, false},
    {"sync_round", k_sync::sync_round, 32, 4, SYNC_WRITABLE, false},
    {"sync_scan", k_sync::sync_scan, 32, 4, SYNC_WRITABLE, false},
    {"sync_write", k_sync::sync_write, 32, 4, SYNC_WRITABLE, false},
};

static_assert(sizeof(KernelArgs) == 160, "KernelArgs is 64 + 32 + 64 bytes");

constexpr unsigned MAX_BINDINGS = 8;
constexpr unsigned PARAM_WORDS = 16;
constexpr uint64_t BIND_ALIGN = 256;
constexpr unsigned MAX_GRID_Y = 65535; // CUDA's limit; x allows 2^31 - 1

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "emulator: %s\n", what.c_str());
    std::exit(2);
}

struct Reader {
    const std::vector<unsigned char>& buf;
    size_t at = 0;

    const unsigned char* take(uint64_t n, const char* what) {
        if (n > buf.size() - at) {
            fail(std::string("request truncated reading ") + what);
        }
        const unsigned char* p = buf.data() + at;
        at += n;
        return p;
    }
    uint32_t u32(const char* what) {
        uint32_t v;
        std::memcpy(&v, take(4, what), 4);
        return v;
    }
    uint64_t u64(const char* what) {
        uint64_t v;
        std::memcpy(&v, take(8, what), 8);
        return v;
    }
};

struct Range {
    uint32_t buffer;
    uint64_t offset;
    uint64_t size;
};

Range read_range(Reader& r, const std::vector<std::vector<unsigned char>>& buffers) {
    Range b;
    b.buffer = r.u32("binding buffer");
    b.offset = r.u64("binding offset");
    b.size = r.u64("binding size");
    if (b.buffer >= buffers.size()) {
        fail("range names buffer " + std::to_string(b.buffer) + " of " +
             std::to_string(buffers.size()));
    }
    const uint64_t len = buffers[b.buffer].size();
    if (b.offset > len || b.size > len - b.offset) {
        fail("range " + std::to_string(b.offset) + "+" + std::to_string(b.size) +
             " lies outside buffer " + std::to_string(b.buffer) + " (" + std::to_string(len) +
             " bytes)");
    }
    return b;
}

bool overlap(const Range& a, const Range& b) {
    return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

// One binding's private copy, followed by a guard page.
struct Guarded {
    unsigned char* map = nullptr;
    size_t map_len = 0;
    unsigned char* data = nullptr;
    size_t size = 0;

    Guarded(const Guarded&) = delete;
    Guarded& operator=(const Guarded&) = delete;
    Guarded(const unsigned char* src, size_t n, bool read_only) : size(n) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        const size_t body = (n + page - 1) / page * page;
        map_len = body + page;
        void* m = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            fail("mmap of " + std::to_string(map_len) + " bytes failed");
        }
        map = (unsigned char*)m;
        data = map + body - n;
        std::memcpy(data, src, n);
        if (mprotect(map + body, page, PROT_NONE) != 0 ||
            (read_only && mprotect(map, body, PROT_READ) != 0)) {
            fail("mprotect failed");
        }
    }
    ~Guarded() { munmap(map, map_len); }
};

// What the fault handler reports about.
std::atomic<const char*> g_kernel{""};
std::atomic<unsigned> g_step{0};
struct FaultBinding {
    const unsigned char* data;
    size_t size;
    bool writable;
};
FaultBinding g_bindings[MAX_BINDINGS];
std::atomic<unsigned> g_binding_count{0};
long g_page = 4096;

void on_fault(int sig, siginfo_t* si, void*) {
    char msg[512];
    const uintptr_t addr = (uintptr_t)si->si_addr;
    int n = std::snprintf(msg, sizeof msg, "emulator: %s at %p in step %u (kernel %s)",
        sig == SIGFPE ? "arithmetic fault" : "memory fault", si->si_addr, g_step.load(),
        g_kernel.load());
    const size_t page = (size_t)g_page;
    for (unsigned i = 0; i < g_binding_count.load() && n > 0 && n < (int)sizeof msg; i++) {
        const uintptr_t lo = (uintptr_t)g_bindings[i].data;
        const uintptr_t hi = lo + g_bindings[i].size;
        if (addr >= lo && addr < hi) {
            n += std::snprintf(msg + n, sizeof msg - n, ": write to read-only binding %u", i);
        } else if (addr >= hi && addr < hi + page) {
            n += std::snprintf(msg + n, sizeof msg - n,
                ": access %zu bytes past the end of binding %u (%zu bytes)",
                (size_t)(addr - hi), i, g_bindings[i].size);
        }
    }
    if (n > 0 && n < (int)sizeof msg - 1) {
        msg[n++] = '\n';
        ssize_t ignored = write(2, msg, (size_t)n);
        (void)ignored;
    }
    _exit(3);
}

void install_fault_handlers() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE}) {
        sigaction(sig, &sa, nullptr);
    }
}

// Runs `work` (which takes blocks until none is left) on up to one OS thread per CPU, the
// calling thread among them, and fewer where there are fewer than `per` blocks for each.
template <class F>
void on_workers(uint64_t total, uint64_t per, F& work) {
    const uint64_t cpus = std::max(1u, std::thread::hardware_concurrency());
    const unsigned workers = (unsigned)std::min<uint64_t>(cpus, (total + per - 1) / per);
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < workers; i++) {
        pool.emplace_back(work);
    }
    work();
    for (auto& t : pool) {
        t.join();
    }
}

// Blocks spread over the CPUs; a block's threads run one after the other.
void run_parallel(const KernelInfo& k, const KernelArgs& args, unsigned gx, unsigned gy) {
    const uint64_t total = (uint64_t)gx * gy;
    const uint64_t per = 16;
    std::atomic<uint64_t> next{0};
    auto work = [&] {
        blockDim = dim3{k.block, 1, 1};
        gridDim = dim3{gx, gy, 1};
        kernel_host_sync = nullptr;
        for (uint64_t b; (b = next.fetch_add(1)) < total;) {
            blockIdx = dim3{(unsigned)(b % gx), (unsigned)(b / gx), 0};
            for (unsigned t = 0; t < k.block; t++) {
                threadIdx = dim3{t, 0, 0};
                k.fn(args);
            }
        }
    };
    on_workers(total, per, work);
}

// The CUDA threads of one block as fibers on the calling OS thread (each with its own
// stack, reused from block to block), and the scheduler's context they yield to.
constexpr size_t FIBER_STACK = 256 << 10;

struct Fibers {
    std::vector<ucontext_t> ctx;
    std::vector<void*> stacks;
    std::vector<char> done;
    ucontext_t scheduler;
    unsigned current = 0;
    const KernelInfo* kernel = nullptr;
    const KernelArgs* args = nullptr;

    explicit Fibers(unsigned n) : ctx(n), stacks(n, nullptr), done(n, 1) {
        for (void*& s : stacks) {
            s = mmap(nullptr, FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                -1, 0);
            if (s == MAP_FAILED) {
                fail("mmap of a fiber stack failed");
            }
        }
    }
    ~Fibers() {
        for (void* s : stacks) {
            munmap(s, FIBER_STACK);
        }
    }
    Fibers(const Fibers&) = delete;
    Fibers& operator=(const Fibers&) = delete;
};

thread_local Fibers* t_fibers = nullptr;

void fiber_yield() {
    Fibers& f = *t_fibers;
    swapcontext(&f.ctx[f.current], &f.scheduler);
}

void fiber_main() {
    Fibers& f = *t_fibers;
    f.kernel->fn(*f.args);
    // An exited thread no longer counts at __syncthreads: it is not resumed.
    t_fibers->done[t_fibers->current] = 1;
}

// Runs block `blockIdx` on this OS thread: every live fiber to its next barrier or its end,
// in thread order, round after round, until all have ended.
void run_block_fibers(Fibers& f) {
    const unsigned n = (unsigned)f.ctx.size();
    for (unsigned t = 0; t < n; t++) {
        getcontext(&f.ctx[t]);
        f.ctx[t].uc_stack.ss_sp = f.stacks[t];
        f.ctx[t].uc_stack.ss_size = FIBER_STACK;
        f.ctx[t].uc_link = &f.scheduler;
        makecontext(&f.ctx[t], fiber_main, 0);
        f.done[t] = 0;
    }
    for (unsigned live = n; live > 0;) {
        for (unsigned t = 0; t < n; t++) {
            if (f.done[t]) {
                continue;
            }
            f.current = t;
            threadIdx = dim3{t, 0, 0};
            swapcontext(&f.scheduler, &f.ctx[t]);
            live -= f.done[t] ? 1 : 0;
        }
    }
}

// Blocks spread over the CPUs as run_parallel does; each block's threads as fibers.
void run_cooperative(const KernelInfo& k, const KernelArgs& args, unsigned gx, unsigned gy) {
    const uint64_t total = (uint64_t)gx * gy;
    const uint64_t per = 4;
    std::atomic<uint64_t> next{0};
    auto work = [&] {
        Fibers f(k.block);
        f.kernel = &k;
        f.args = &args;
        t_fibers = &f;
        kernel_host_sync = fiber_yield;
        blockDim = dim3{k.block, 1, 1};
        gridDim = dim3{gx, gy, 1};
        for (uint64_t b; (b = next.fetch_add(1)) < total;) {
            blockIdx = dim3{(unsigned)(b % gx), (unsigned)(b / gx), 0};
            run_block_fibers(f);
        }
        kernel_host_sync = nullptr;
        t_fibers = nullptr;
    };
    on_workers(total, per, work);
}

void launch(Reader& r, std::vector<std::vector<unsigned char>>& buffers, unsigned step,
    bool verbose) {
    const uint32_t name_len = r.u32("kernel name length");
    if (name_len > 64) {
        fail("kernel name of " + std::to_string(name_len) + " bytes");
    }
    const std::string name((const char*)r.take(name_len, "kernel name"), name_len);
    const KernelInfo* k = nullptr;
    for (const KernelInfo& c : KERNELS) {
        if (name == c.name) {
            k = &c;
        }
    }
    if (k == nullptr) {
        fail("step " + std::to_string(step) + ": unknown kernel '" + name + "'");
    }
    const std::string where = "step " + std::to_string(step) + " (" + name + ")";
    const uint32_t gx = r.u32("grid x");
    const uint32_t gy = r.u32("grid y");
    if (gx == 0 || gy == 0 || gx > 0x7fffffffu || gy > MAX_GRID_Y) {
        fail(where + ": grid " + std::to_string(gx) + "x" + std::to_string(gy) +
             " is not a valid CUDA grid");
    }
    const uint32_t nb = r.u32("binding count");
    if (nb != k->bindings) {
        fail(where + ": " + std::to_string(nb) + " bindings, the kernel has " +
             std::to_string(k->bindings));
    }
    std::vector<Range> ranges;
    for (uint32_t i = 0; i < nb; i++) {
        const Range b = read_range(r, buffers);
        if (b.offset % BIND_ALIGN != 0 || b.size % 4 != 0 || b.size < 4) {
            fail(where + ": binding " + std::to_string(i) + " at " + std::to_string(b.offset) +
                 "+" + std::to_string(b.size) +
                 " (offsets are multiples of 256, sizes multiples of 4 and at least 4)");
        }
        ranges.push_back(b);
    }
    for (uint32_t i = 0; i < nb; i++) {
        for (uint32_t j = 0; j < nb; j++) {
            if (i != j && (k->writable >> i & 1) && overlap(ranges[i], ranges[j])) {
                fail(where + ": written binding " + std::to_string(i) + " overlaps binding " +
                     std::to_string(j));
            }
        }
    }
    KernelArgs args;
    std::memset(&args, 0, sizeof args);
    for (unsigned i = 0; i < PARAM_WORDS; i++) {
        args.params[i] = r.u32("params");
    }
    std::vector<std::unique_ptr<Guarded>> mem;
    for (uint32_t i = 0; i < nb; i++) {
        const Range& b = ranges[i];
        const bool writable = k->writable >> i & 1;
        mem.push_back(std::make_unique<Guarded>(
            buffers[b.buffer].data() + b.offset, (size_t)b.size, !writable));
        args.ptr[i] = (unsigned long long)(uintptr_t)mem[i]->data;
        args.words[i] = (u32)std::min<uint64_t>(b.size / 4, 0xffffffffu);
        g_bindings[i] = FaultBinding{mem[i]->data, mem[i]->size, writable};
    }
    g_binding_count = nb;
    g_kernel = k->name;
    g_step = step;
    const auto t0 = std::chrono::steady_clock::now();
    if (k->cooperative) {
        run_cooperative(*k, args, gx, gy);
    } else {
        run_parallel(*k, args, gx, gy);
    }
    g_binding_count = 0;
    for (uint32_t i = 0; i < nb; i++) {
        if (k->writable >> i & 1) {
            std::memcpy(buffers[ranges[i].buffer].data() + ranges[i].offset, mem[i]->data,
                (size_t)ranges[i].size);
        }
    }
    if (verbose) {
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        std::fprintf(stderr, "emulator: %s grid %ux%u: %.2f ms\n", where.c_str(), gx, gy, ms);
    }
}

void copy(Reader& r, std::vector<std::vector<unsigned char>>& buffers, unsigned step) {
    const Range src = read_range(r, buffers);
    const Range dst = read_range(r, buffers);
    const std::string where = "step " + std::to_string(step) + " (copy)";
    if (src.size != dst.size || src.offset % 4 != 0 || dst.offset % 4 != 0 || src.size % 4 != 0) {
        fail(where + ": sizes differ or are not whole words");
    }
    if (overlap(src, dst)) {
        fail(where + ": source and destination overlap");
    }
    std::memcpy(buffers[dst.buffer].data() + dst.offset, buffers[src.buffer].data() + src.offset,
        (size_t)src.size);
}

} // namespace

int main() {
    g_page = sysconf(_SC_PAGESIZE);
    install_fault_handlers();
    const bool verbose = std::getenv("STOKER_KERNEL_HOST_VERBOSE") != nullptr;
    std::vector<unsigned char> in;
    {
        unsigned char chunk[1 << 16];
        size_t n;
        while ((n = std::fread(chunk, 1, sizeof chunk, stdin)) > 0) {
            in.insert(in.end(), chunk, chunk + n);
        }
        if (std::ferror(stdin)) {
            fail("reading stdin failed");
        }
    }
    Reader r{in};
    if (std::memcmp(r.take(4, "magic"), "SKH1", 4) != 0) {
        fail("bad magic");
    }
    const uint32_t nbuf = r.u32("buffer count");
    if (nbuf > (in.size() - r.at) / 8) {
        fail(std::to_string(nbuf) + " buffers cannot fit the request");
    }
    std::vector<std::vector<unsigned char>> buffers(nbuf);
    for (auto& b : buffers) {
        const uint64_t n = r.u64("buffer size");
        const unsigned char* p = r.take(n, "buffer bytes");
        b.assign(p, p + n);
    }
    const uint32_t steps = r.u32("step count");
    for (uint32_t s = 0; s < steps; s++) {
        const uint32_t kind = r.u32("step kind");
        if (kind == 0) {
            launch(r, buffers, s, verbose);
        } else if (kind == 1) {
            copy(r, buffers, s);
        } else {
            fail("step " + std::to_string(s) + " of unknown kind " + std::to_string(kind));
        }
    }
    if (r.at != in.size()) {
        fail(std::to_string(in.size() - r.at) + " trailing bytes in the request");
    }
    std::fwrite("SKH1", 1, 4, stdout);
    const uint32_t count = (uint32_t)buffers.size();
    std::fwrite(&count, 4, 1, stdout);
    for (const auto& b : buffers) {
        const uint64_t n = b.size();
        std::fwrite(&n, 8, 1, stdout);
        std::fwrite(b.data(), 1, b.size(), stdout);
    }
    if (std::fflush(stdout) != 0) {
        fail("writing stdout failed");
    }
    return 0;
}

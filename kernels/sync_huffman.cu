// Self-synchronising parallel Huffman decoding: a line-by-line port of the scalar oracle's
// passes in src/decode/jpeg/huffman/sync/pass.rs (`sync_start`, `sync_round`, `sync_scan`,
// `sync_write`), over the chunk of `pack_sync` and the record layout documented in
// src/decode/jpeg/huffman/sync.rs; the CUDA twin of shaders/sync_huffman.wgsl.
//
// Each pass is a device function of one thread's index over base pointers, as the oracle's
// pass is a function of it over slices: the chunk, the records (the copy it reads and,
// for a round, the copy it writes), the coefficient buffer; it returns the status word the
// thread contributes. Only the `extern "C" __global__` entry points, at the end, map a
// CUDA thread to its subsequence (or segment) and a chunk to its buffers, and OR the
// returned words into the status buffer: a launch over several chunks needs only entry
// points of its own.
//
// The entry points, 32 threads per block, one thread per subsequence (per segment for
// the scan) of every sample of a batch: see "The entry points" below for the batch table
// and the parameters. The host queues the start pass, every sync round (a sample's round
// after one that changed none of its exits only copies), the scan and the write, reading
// nothing back in between. Bindings: 0 the batch table and the chunks (`pack_sync`,
// `pack_batch`; read); 1 the records, two copies of `subsequences * SYNC_RECORD_WORDS`
// words a sample (written); 2 the coefficient buffer, 32 words a block (written); 3 the
// status words (written): a sample's word SYNC_STATUS the OR of its scan's and write's
// status words, word SYNC_CHANGED + r whether round r changed one of its exits.
//
// All integer arithmetic is 32-bit and wraps, as in the oracle (its i32 values carried in
// u32). The zigzag order, the decode table lookup, extend and the SIMD check are
// kernels/huffman_common.cuh's (shared with kernels/huffman.cu), prepended to this file
// after kernels/idct_common.cuh and kernels/decode_common.cuh; the chunk header, segment,
// subsequence, component and record words and sizes, and STATUS_NO_SYNC, are
// src/backend/device/constants.rs's, prepended to this file.

// The chunk header's offsets (the oracle's Layout), read once per thread.
struct Layout {
    u32 bits;
    u32 bpm;
    u32 cycle;
    u32 scan;
    u32 comps;
    u32 map;
    u32 segs;
    u32 subs;
    u32 data;
    u32 regions;
};

static __device__ __forceinline__ Layout layout_of(const u32* chunk) {
    Layout l;
    l.bits = chunk[SH_BITS];
    l.bpm = umax(chunk[SH_BLOCKS_PER_MCU], 1u);
    l.cycle = umax(chunk[SH_CYCLE], 1u);
    l.scan = chunk[SH_SCAN];
    l.comps = chunk[SH_COMPONENT_TABLE];
    l.map = chunk[SH_BLOCK_MAP];
    l.segs = chunk[SH_SEGMENT_TABLE];
    l.subs = chunk[SH_SUBSEQUENCE_TABLE];
    l.data = chunk[SH_DATA];
    l.regions = chunk[SH_REGIONS];
    return l;
}

// Word w of subsequence s's record in the subsequence table.
static __device__ __forceinline__ u32 sub_word(const u32* chunk, const Layout& l, u32 s, u32 w) {
    return chunk[l.subs + SYNC_SUBSEQUENCE_WORDS * s + w];
}

// Word w of segment g's record in the segment table.
static __device__ __forceinline__ u32 seg_word(const u32* chunk, const Layout& l, u32 g, u32 w) {
    return chunk[l.segs + SYNC_SEGMENT_WORDS * g + w];
}

// The decoder's state between two symbols (the oracle's Cursor).
struct Cursor {
    u32 pos; // bit of the next code
    u32 b;   // block within the MCU (0 when every block of an MCU has the same tables)
    u32 k;   // zigzag index of the next coefficient (0: the DC)
};

// The cursor of record words `at`, `at + 1`.
static __device__ __forceinline__ Cursor cursor_read(const u32* rec, u32 at) {
    return Cursor{rec[at], rec[at + 1u] & 0xFFu, rec[at + 1u] >> 8u};
}

static __device__ __forceinline__ u32 cursor_bk(const Cursor& c) {
    return c.b | (c.k << 8u);
}

// The 32 bits from bit `pos` of the data, the bits at and past `end` zero.
static __device__ __forceinline__ u32 peek(const u32* chunk, u32 data, u32 pos, u32 end) {
    if (pos >= end) {
        return 0u;
    }
    const u32 w = data + pos / 32u;
    const u32 off = pos % 32u;
    u32 v = chunk[w] << off;
    if (off != 0u) {
        v |= chunk[w + 1u] >> (32u - off);
    }
    const u32 left = end - pos;
    if (left < 32u) {
        v &= ~(0xFFFFFFFFu >> left);
    }
    return v;
}

// What one symbol did (the oracle's Symbol).
struct Symbol {
    bool dc;    // it was a block's DC
    u32 diff;   // the DC difference
    u32 z;      // the natural index of the AC coefficient it set (64: none)
    u32 val;    // that coefficient (16 bits)
    u32 status; // STATUS_BAD_CODE, STATUS_OVERFLOW
};

// Decodes the symbol at `c` (the reader's data ending at bit `end`) and moves `c` past it
// (the oracle's `step`).
static __device__ __forceinline__ Symbol step(const u32* chunk, const Layout& l, u32 end, Cursor& c) {
    const u32 j = chunk[l.map + c.b] & 0xFFu;
    const u32 v = peek(chunk, l.data, c.pos, end);
    const bool dc = c.k == 0u;
    const u32 t = chunk[l.scan + (dc ? S_DC_TABLE : S_AC_TABLE) + j];
    const Code code = lookup(chunk, t, v);
    // `sym & 15` extra bits follow the code: at most 16 + 15 bits in all.
    const u32 s = code.sym & 15u;
    const u32 extra = s == 0u ? 0u : (v << code.len) >> (32u - s);
    Symbol out{dc, 0u, 64u, 0u, code.status};
    c.pos += code.len + s;
    if (dc) {
        // A DC symbol is at most 15 (`table_words` refuses a table with more).
        out.diff = extend(extra, s);
        c.k = 1u;
        return out;
    }
    const u32 run = code.sym >> 4u;
    if (s != 0u) {
        u32 k = c.k + run;
        if (k > 63u) {
            out.status |= STATUS_OVERFLOW;
            k = 63u;
        }
        out.z = NATURAL[k];
        out.val = extend(extra, s) & 0xFFFFu;
        c.k = k + 1u;
    } else if (run == 15u) {
        c.k += 16u;
    } else {
        c.k = 64u;
    }
    if (c.k >= 64u) {
        c.k = 0u;
        c.b = (c.b + 1u) % l.cycle;
    }
    return out;
}

// The decode of one subsequence from `c` while the cursor is before `sub_end` (in a
// segment whose data ends at `seg_end`) into record words 2-14 at `out` (the oracle's
// `span`). Every symbol takes at least one bit, so `l.bits` steps always reach the end.
static __device__ __forceinline__ void span(const u32* chunk, const Layout& l, Cursor c, u32 sub_end, u32 seg_end, u32* out) {
    u32 blocks = 0u;
    u32 phase = 0u;
    u32 sums[SYNC_MAX_MCU_BLOCKS];
#pragma unroll
    for (u32 p = 0u; p < SYNC_MAX_MCU_BLOCKS; p++) {
        sums[p] = 0u;
    }
#pragma unroll 1
    for (u32 i = 0u; i < l.bits; i++) {
        if (c.pos >= sub_end) {
            break;
        }
        const Symbol sym = step(chunk, l, seg_end, c);
        if (sym.dc) {
            blocks += 1u;
            sums[phase] += sym.diff;
            phase = (phase + 1u) % l.bpm;
        }
    }
    out[0] = c.pos;
    out[1] = cursor_bk(c);
    out[2] = blocks;
#pragma unroll
    for (u32 p = 0u; p < SYNC_MAX_MCU_BLOCKS; p++) {
        out[3u + p] = sums[p];
    }
}

// Record words 0-14 of a decode of subsequence `s` from `c`, into record s of `rec` (the
// oracle's `record`).
static __device__ __forceinline__ void record(const u32* chunk, const Layout& l, u32 s, Cursor c, u32* rec) {
    const u32 seg = sub_word(chunk, l, s, SB_SEGMENT);
    const u32 end = sub_word(chunk, l, s, SB_END);
    const u32 seg_end = seg_word(chunk, l, seg, SG_END);
    const u32 r = SYNC_RECORD_WORDS * s;
    rec[r] = c.pos;
    rec[r + 1u] = cursor_bk(c);
    span(chunk, l, c, end, seg_end, rec + r + 2u);
}

// ---------------------------------------------------------------------------------------
// The passes, each for one thread of one chunk.

// Pass 1 (`sync_start`), thread s: subsequence s decoded from its first bit with block 0
// of an MCU at its DC, into record s of `rec`.
static __device__ __forceinline__ void start_pass(const u32* chunk, u32* rec, u32 s) {
    const Layout l = layout_of(chunk);
    const Cursor c{sub_word(chunk, l, s, SB_START), 0u, 0u};
    record(chunk, l, s, c, rec);
}

// A sync round (`sync_round`), thread s: record s of `prev` into `next`, decoded again
// from the exit of record s - 1 of `prev` when that is not its start (never for the first
// subsequence of a segment). Returns 1 when its exit changed, else 0.
static __device__ __forceinline__ u32 round_pass(const u32* chunk, const u32* prev, u32* next, u32 s) {
    const Layout l = layout_of(chunk);
    const u32 r = SYNC_RECORD_WORDS * s;
#pragma unroll 1
    for (u32 w = 0u; w < SYNC_RECORD_WORDS; w++) {
        next[r + w] = prev[r + w];
    }
    if ((sub_word(chunk, l, s, SB_FLAGS) & 1u) == 1u) {
        return 0u;
    }
    const u32 p = r - SYNC_RECORD_WORDS;
    if (prev[p + 2u] == prev[r] && prev[p + 3u] == prev[r + 1u]) {
        return 0u;
    }
    record(chunk, l, s, cursor_read(prev, p + 2u), next);
    return (next[r + 2u] != prev[r + 2u] || next[r + 3u] != prev[r + 3u]) ? 1u : 0u;
}

// The scan (`sync_scan`), thread g: the exclusive prefix sums over segment g's
// subsequences of their blocks and, per scan component, of their DC differences (phase p
// of a subsequence whose first block is block `at` of the segment is block map entry
// (at + p) % bpm) into record words 15-19 of `rec`. Returns STATUS_OUT_OF_DATA when the
// segment's data holds fewer blocks than its MCUs, else 0. Sequential within a segment,
// as the oracle (a parallel scan gives the same integers).
static __device__ __forceinline__ u32 scan_pass(const u32* chunk, u32* rec, u32 g) {
    const Layout l = layout_of(chunk);
    const u32 blocks = seg_word(chunk, l, g, SG_BLOCKS);
    const u32 first = seg_word(chunk, l, g, SG_FIRST_SUBSEQUENCE);
    const u32 n = seg_word(chunk, l, g, SG_SUBSEQUENCES);
    u32 at = 0u;
    u32 dc[4] = {0u, 0u, 0u, 0u};
#pragma unroll 1
    for (u32 s = first; s < first + n; s++) {
        const u32 r = SYNC_RECORD_WORDS * s;
        rec[r + 15u] = at;
#pragma unroll
        for (u32 j = 0u; j < 4u; j++) {
            rec[r + 16u + j] = dc[j];
        }
#pragma unroll 1
        for (u32 p = 0u; p < l.bpm; p++) {
            const u32 j = chunk[l.map + (at + p) % l.bpm] & 3u;
            dc[j] += rec[r + 5u + p];
        }
        // saturating_add
        const u32 sum = at + rec[r + 4u];
        at = sum < at ? 0xFFFFFFFFu : sum;
    }
    return at < blocks ? STATUS_OUT_OF_DATA : 0u;
}

// Writes block `g` of the scan (MCU order; `bj` its block map word) from `bk` to `coefs`,
// when it lies in its component's block grid and region, at its place in the region (the
// oracle's `put`). Returns STATUS_SIMD_RANGE or 0.
static __device__ __forceinline__ u32 put(const u32* chunk, const Layout& l, u32* coefs, u32 g, u32 bj, Block& bk) {
    const u32 j = bj & 0xFFu;
    const u32 cw = chunk[l.scan + S_COMP + j];
    u32 h = 1u;
    u32 v = 1u;
    if ((chunk[l.scan + S_FLAGS] & 1u) != 1u) {
        h = (cw >> 8u) & 0xFFu;
        v = (cw >> 16u) & 0xFFu;
    }
    const u32 per_row = umax(chunk[l.scan + S_MCUS_PER_ROW], 1u);
    const u32 mcu = g / l.bpm;
    const u32 bx = (mcu % per_row) * h + ((bj >> 8u) & 0xFFu);
    const u32 by = (mcu / per_row) * v + ((bj >> 16u) & 0xFFu);
    const u32 cd = l.comps + SYNC_COMPONENT_WORDS * (cw & 0xFFu);
    const u32 coef_offset = chunk[cd + SC_COEF];
    const u32 wib = chunk[cd + SC_WIDTH];
    const u32 hib = chunk[cd + SC_HEIGHT];
    const u32 quant = chunk[cd + SC_QUANT];
    const u32 rg = l.regions + SYNC_REGION_WORDS * (cw & 0xFFu);
    const u32 bx0 = chunk[rg];
    const u32 by0 = chunk[rg + 1u];
    const u32 bw = chunk[rg + 2u];
    const u32 bh = chunk[rg + 3u];
    if (bx >= wib || by >= hib || bx < bx0 || by < by0 || bx - bx0 >= bw || by - by0 >= bh) {
        return 0u;
    }
    const u32 at = coef_offset + 32u * ((by - by0) * bw + (bx - bx0));
#pragma unroll
    for (u32 w = 0u; w < 32u; w++) {
        coefs[at + w] = bk.blk[w];
    }
    return simd_agrees(chunk, bk, quant) ? 0u : STATUS_SIMD_RANGE;
}

// Pass 4 (`sync_write`), thread s: subsequence s decoded again from its true start
// (record s of `rec`, after the rounds and the scan), the blocks whose DC starts in it
// written to `coefs` (those of its segment's first `blocks` only, and of the scan's
// first SH_LIMIT: one whose first block lies past them returns at once, the one holding
// the last stops after it). Returns its status word.
static __device__ __forceinline__ u32 write_pass(const u32* chunk, const u32* rec, u32* coefs, u32 s) {
    const Layout l = layout_of(chunk);
    const u32 seg = sub_word(chunk, l, s, SB_SEGMENT);
    const u32 end = sub_word(chunk, l, s, SB_END);
    const u32 seg_end = seg_word(chunk, l, seg, SG_END);
    const u32 first_block = seg_word(chunk, l, seg, SG_FIRST_BLOCK);
    const u32 blocks = seg_word(chunk, l, seg, SG_BLOCKS);
    const u32 r = SYNC_RECORD_WORDS * s;
    // The segment's blocks before the write limit; a subsequence whose first block lies
    // past them writes nothing (`sync_skips`).
    const u32 limit = chunk[SH_LIMIT];
    const u32 room = limit > first_block ? limit - first_block : 0u;
    if (rec[r + 15u] >= room) {
        return 0u;
    }
    Cursor c = cursor_read(rec, r);
    u32 next = rec[r + 15u];
    u32 pred[4] = {rec[r + 16u], rec[r + 17u], rec[r + 18u], rec[r + 19u]};
    u32 status = 0u;
    // In a block of its own (not the end of the predecessor's), and that block's index in
    // the segment and block map word.
    bool mine = false;
    u32 at = 0u;
    u32 bj = 0u;
    Block bk;
#pragma unroll
    for (u32 w = 0u; w < 32u; w++) {
        bk.blk[w] = 0u;
    }
    bool done = false;
    // Every symbol starting before `end` takes a bit, and the last block at most 63 more
    // symbols.
#pragma unroll 1
    for (u32 i = 0u; i < l.bits + 64u; i++) {
        if (c.k == 0u) {
            if (c.pos >= end || next >= room) {
                done = true;
                break;
            }
            // The segment's first block starts an MCU.
            mine = true;
            at = next;
            bj = chunk[l.map + next % l.bpm];
            next = next == 0xFFFFFFFFu ? next : next + 1u;
#pragma unroll
            for (u32 w = 0u; w < 32u; w++) {
                bk.blk[w] = 0u;
            }
        } else if (!mine && c.pos >= end) {
            done = true;
            break;
        }
        const Symbol sym = step(chunk, l, seg_end, c);
        if (!mine || at >= blocks) {
            continue;
        }
        status |= sym.status;
        if (sym.dc) {
            const u32 j = bj & 3u;
            pred[j] += sym.diff;
            bk.blk[0] = pred[j] & 0xFFFFu;
        } else if (sym.z < 64u) {
            bk.blk[sym.z / 2u] |= sym.val << (16u * (sym.z % 2u));
        }
        if (c.k == 0u) {
            status |= put(chunk, l, coefs, first_block + at, bj, bk);
            if (at + 1u == blocks) {
                if (c.pos > seg_end) {
                    status |= STATUS_OUT_OF_DATA;
                } else if (seg_end - c.pos >= 8u) {
                    status |= STATUS_LEFTOVER;
                }
            }
        }
    }
    if (!done) {
        // Unreachable by the bound above; never a silent short decode.
        status |= STATUS_NO_SYNC;
    }
    return status;
}

// ---------------------------------------------------------------------------------------
// The entry points, over a batch (the oracle's `batch_start` and the others): the batch
// table at word params[1] of binding 0 holds, per sample (params[2] of them),
// SYNC_BATCH_WORDS words: its chunk's first word in binding 0, its first subsequence and
// first segment in the batch's numbering, the first word of its two record copies in
// binding 1, the word of binding 2 its coefficient offsets count from, its status word in
// binding 3 (then a changed word per round), its subsequences and segments. params[0] is
// the round (`sync_round`) or the record copy the last round wrote (`sync_scan`,
// `sync_write`); params[3] the batch's rounds, params[4] and params[5] its subsequences
// and segments.

// A thread's sample: its batch table record and its subsequence (or segment) in it.
struct Located {
    const u32* chunk;
    u32 records;
    u32 coefficients;
    u32 status;
    u32 subs;
    u32 local;
};

// The sample whose range of table word `word` (BT_FIRST_SUBSEQUENCE or BT_FIRST_SEGMENT)
// holds `id`; false for a thread past the last (the oracle's `locate`).
static __device__ __forceinline__ bool locate(const KernelArgs& a, u32 word, u32 id, Located& out) {
    const u32* blob = (const u32*)a.ptr[0];
    const u32 table = a.params[1];
    const u32 n = a.params[2];
    if (n == 0u) {
        return false;
    }
    u32 lo = 0u;
    u32 hi = n;
    while (hi - lo > 1u) {
        const u32 mid = (lo + hi) / 2u;
        if (blob[table + SYNC_BATCH_WORDS * mid + word] <= id) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    const u32* t = blob + table + SYNC_BATCH_WORDS * lo;
    if (id < t[word]) {
        return false;
    }
    out.local = id - t[word];
    const u32 count = word == BT_FIRST_SUBSEQUENCE ? t[BT_SUBSEQUENCES] : t[BT_SEGMENTS];
    out.chunk = blob + t[BT_CHUNK];
    out.records = t[BT_RECORDS];
    out.coefficients = t[BT_COEFFICIENTS];
    out.status = t[BT_STATUS];
    out.subs = t[BT_SUBSEQUENCES];
    return out.local < count;
}

// The sample's record copy `copy % 2`.
static __device__ __forceinline__ u32* record_copy(const KernelArgs& a, const Located& x, u32 copy) {
    return (u32*)a.ptr[1] + x.records + (copy % 2u) * x.subs * SYNC_RECORD_WORDS;
}

// The rounds the sample runs: the batch's, at most its chunk's.
static __device__ __forceinline__ u32 rounds_of(const KernelArgs& a, const Located& x) {
    return umin(a.params[3], x.chunk[SH_MAX_ROUNDS]);
}

// Pass 1; the thread of a sample's first subsequence zeroes its status words (an earlier
// batch's are there: every later pass ORs into them).
extern "C" __global__ void sync_start(const KernelArgs a) {
    Located x;
    if (!locate(a, BT_FIRST_SUBSEQUENCE, flat_id(32u), x)) {
        return;
    }
    if (x.local == 0u) {
        u32* status = (u32*)a.ptr[3] + x.status;
        for (u32 w = 0u; w <= a.params[3]; w++) {
            status[w] = 0u;
        }
    }
    start_pass(x.chunk, record_copy(a, x, 0u), x.local);
}

// A sync round: a round after one that changed no exit of the sample, or past its chunk's
// most rounds, only copies the record (the copies stay equal from then on).
extern "C" __global__ void sync_round(const KernelArgs a) {
    Located x;
    if (!locate(a, BT_FIRST_SUBSEQUENCE, flat_id(32u), x)) {
        return;
    }
    const u32 round_no = a.params[0];
    u32* status = (u32*)a.ptr[3] + x.status;
    const u32* prev = record_copy(a, x, round_no);
    u32* next = record_copy(a, x, round_no + 1u);
    const bool settled = round_no > 0u && status[SYNC_CHANGED + round_no - 1u] == 0u;
    if (round_no >= rounds_of(a, x) || settled) {
        const u32 w = SYNC_RECORD_WORDS * x.local;
        for (u32 i = 0u; i < SYNC_RECORD_WORDS; i++) {
            next[w + i] = prev[w + i];
        }
        return;
    }
    if (round_pass(x.chunk, prev, next, x.local) != 0u) {
        atomicOr(&status[SYNC_CHANGED + round_no], 1u);
    }
}

// The scan; the thread of a sample's first segment also flags STATUS_NO_SYNC where its
// last round still changed an exit.
extern "C" __global__ void sync_scan(const KernelArgs a) {
    Located x;
    if (!locate(a, BT_FIRST_SEGMENT, flat_id(32u), x)) {
        return;
    }
    u32* status = (u32*)a.ptr[3] + x.status;
    u32 st = 0u;
    const u32 n = rounds_of(a, x);
    if (x.local == 0u && (n == 0u || status[SYNC_CHANGED + n - 1u] != 0u)) {
        st |= STATUS_NO_SYNC;
    }
    st |= scan_pass(x.chunk, record_copy(a, x, a.params[0]), x.local);
    if (st != 0u) {
        atomicOr(&status[SYNC_STATUS], st);
    }
}

extern "C" __global__ void sync_write(const KernelArgs a) {
    Located x;
    if (!locate(a, BT_FIRST_SUBSEQUENCE, flat_id(32u), x)) {
        return;
    }
    u32* coefs = (u32*)a.ptr[2] + x.coefficients;
    const u32 st = write_pass(x.chunk, record_copy(a, x, a.params[0]), coefs, x.local);
    if (st != 0u) {
        atomicOr((u32*)a.ptr[3] + x.status + SYNC_STATUS, st);
    }
}

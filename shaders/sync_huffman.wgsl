// Self-synchronising parallel Huffman decoding: a line-by-line port of the scalar oracle's
// batched passes in src/decode/jpeg/huffman/sync/batch.rs (`batch_start`, `batch_round`,
// `batch_scan`, `batch_write`), each running a per-chunk pass of
// src/decode/jpeg/huffman/sync/pass.rs (`sync_start`, `sync_round`, `sync_scan`,
// `sync_write`) on one sample of the batch, over the chunks of `pack_sync` and the batch
// table and record layout documented in src/decode/jpeg/huffman/sync.rs, and of the check
// `agrees_with_simd` (as shaders/huffman.wgsl ports it).
//
// Four entry points, one per pass, each an invocation per thread of the oracle's pass
// (a subsequence of the batch; a segment for the scan). Each finds its sample in the
// batch table (a binary search over the samples' first subsequences, or segments) and
// reads that sample's chunk relative to its first word. The host enqueues the start
// pass, a fixed number of rounds (nothing read back in between: a round after one that
// changed none of a sample's exits only copies its records), the scan, the write, as the
// oracle's `decode_batch` runs them. All integer arithmetic is 32-bit and wraps, as in
// the oracle. The constants (chunk header words, record sizes, scan record and decode
// table words, status bits) are those of src/backend/device/constants.rs, joined in
// front of this file; the IDCT arithmetic of shaders/idct_common.wgsl is joined in front
// of them, shaders/huffman_common.wgsl (the zigzag order, the long codes, HUFF_EXTEND)
// and shaders/simd_range.wgsl after it.

// P[0]: x the round (`sync_round`: it reads record copy `round % 2` and writes the other)
// or the copy the scan and the write read; y the batch table's first word in `blob`;
// z the samples; w the rounds enqueued. P[1]: x the batch's subsequences, y its
// segments, z the most subsequences of one sample (the oracle's BatchParams).
@group(0) @binding(0) var<uniform> P: array<vec4<u32>, 4>;
// The batch's words: the table and the chunks (`pack_sync`).
@group(0) @binding(1) var<storage, read> blob: array<u32>;
// Two copies of each sample's records, `subsequences * SYNC_RECORD_WORDS` words each.
@group(0) @binding(2) var<storage, read_write> rec: array<u32>;
// The coefficient buffer (32 words a block).
@group(0) @binding(3) var<storage, read_write> coefs: array<u32>;
// Per sample, from its table word 5: the OR of its scan's and write's status words (with
// STATUS_NO_SYNC), then round r's changed word at 1 + r.
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;

// The builtins of the entry points.
struct Invocation {
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
}

// The invocation's index over the dispatch, workgroups laid out row by row.
fn flat_id(inv: Invocation) -> u32 {
    return (inv.wid.y * inv.nwg.x + inv.wid.x) * 32u + inv.lid;
}

// ---------------------------------------------------------------------------------------
// The sample's place in the batch (its batch table record) and its chunk header's
// offsets (the oracle's Layout), made absolute (words of `blob`), read once per
// invocation.

var<private> b_chunk: u32;
var<private> b_records: u32;
var<private> b_coefs: u32;
var<private> b_status: u32;
var<private> b_subs: u32;
var<private> b_segs: u32;

var<private> l_bits: u32;
var<private> l_bpm: u32;
var<private> l_cycle: u32;
var<private> l_scan: u32;
var<private> l_comps: u32;
var<private> l_map: u32;
var<private> l_segs: u32;
var<private> l_subs: u32;
var<private> l_data: u32;
var<private> l_regions: u32;

// Word w of the sample's chunk.
fn cw(w: u32) -> u32 {
    return blob[b_chunk + w];
}

// The batch table's record `i`, word `w`.
fn table_word(i: u32, w: u32) -> u32 {
    return blob[P[0].y + SYNC_BATCH_WORDS * i + w];
}

// The sample whose range of table word `word` (BT_FIRST_SUBSEQUENCE or
// BT_FIRST_SEGMENT) holds `id`, its record read into the b_ and l_ variables; returns `id`
// within the sample, or 0xFFFFFFFF past the last (the oracle's `locate`).
fn locate(word: u32, id: u32) -> u32 {
    var lo = 0u;
    var hi = P[0].z;
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (table_word(mid, word) <= id) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    b_chunk = table_word(lo, BT_CHUNK);
    b_records = table_word(lo, BT_RECORDS);
    b_coefs = table_word(lo, BT_COEFFICIENTS);
    b_status = table_word(lo, BT_STATUS);
    b_subs = table_word(lo, BT_SUBSEQUENCES);
    b_segs = table_word(lo, BT_SEGMENTS);
    let local = id - table_word(lo, word);
    let count = select(b_segs, b_subs, word == BT_FIRST_SUBSEQUENCE);
    if (id < table_word(lo, word) || local >= count) {
        return 0xFFFFFFFFu;
    }
    l_bits = cw(SH_BITS);
    l_bpm = max(cw(SH_BLOCKS_PER_MCU), 1u);
    l_cycle = max(cw(SH_CYCLE), 1u);
    l_scan = b_chunk + cw(SH_SCAN);
    l_comps = b_chunk + cw(SH_COMPONENT_TABLE);
    l_map = b_chunk + cw(SH_BLOCK_MAP);
    l_segs = b_chunk + cw(SH_SEGMENT_TABLE);
    l_subs = b_chunk + cw(SH_SUBSEQUENCE_TABLE);
    l_data = b_chunk + cw(SH_DATA);
    l_regions = b_chunk + cw(SH_REGIONS);
    return local;
}

// Thread `inv`'s subsequence (`word` BT_FIRST_SUBSEQUENCE, P[1].x of them in the batch) or
// segment (BT_FIRST_SEGMENT, P[1].y of them) within its sample, located as `locate` does:
// 0xFFFFFFFF for a thread past them.
fn locate_thread(inv: Invocation, word: u32) -> u32 {
    let g = flat_id(inv);
    let count = select(P[1].y, P[1].x, word == BT_FIRST_SUBSEQUENCE);
    if (g >= count) {
        return 0xFFFFFFFFu;
    }
    return locate(word, g);
}

// The rounds the sample runs: those enqueued, at most its chunk's.
fn sample_rounds() -> u32 {
    return min(P[0].w, cw(SH_MAX_ROUNDS));
}

// Word w of subsequence s's record in the subsequence table.
fn sub_word(s: u32, w: u32) -> u32 {
    return blob[l_subs + SYNC_SUBSEQUENCE_WORDS * s + w];
}

// Word w of segment g's record in the segment table.
fn seg_word(g: u32, w: u32) -> u32 {
    return blob[l_segs + SYNC_SEGMENT_WORDS * g + w];
}

// ---------------------------------------------------------------------------------------
// The decoder's state between two symbols (the oracle's Cursor), and what one symbol did
// (its Symbol).

var<private> c_pos: u32;
var<private> c_b: u32;
var<private> c_k: u32;

var<private> y_dc: bool;
var<private> y_diff: i32;
var<private> y_z: u32;
var<private> y_val: u32;
var<private> y_status: u32;

// The cursor of record words `at`, `at + 1` of the records.
fn cursor_read(at: u32) {
    c_pos = rec[at];
    c_b = rec[at + 1u] & 0xFFu;
    c_k = rec[at + 1u] >> 8u;
}

fn cursor_bk() -> u32 {
    return c_b | (c_k << 8u);
}

// The 32 bits from bit `pos` of the data, the bits at and past `end` zero.
fn peek(pos: u32, end: u32) -> u32 {
    if (pos >= end) {
        return 0u;
    }
    let w = l_data + pos / 32u;
    let off = pos % 32u;
    var v = blob[w] << off;
    if (off != 0u) {
        v = v | (blob[w + 1u] >> (32u - off));
    }
    let left = end - pos;
    if (left < 32u) {
        v = v & ~(0xFFFFFFFFu >> left);
    }
    return v;
}

// The code at the top of `v` in the decode table at `t`: its length in `.x`, its symbol in
// `.y`, its status in `.z`; 16 bits that match no code are consumed as symbol 0
// (STATUS_BAD_CODE).
fn lookup(t: u32, v: u32) -> vec3<u32> {
    let peek8 = v >> 24u;
    let e = (blob[t + peek8 / 2u] >> (16u * (peek8 % 2u))) & 0xFFFFu;
    if (e != 0u) {
        return vec3<u32>(e >> 8u, e & 0xFFu, 0u);
    }
    let lc = long_code(t, v >> 16u);
    if (lc.x > 16u) {
        return vec3<u32>(16u, 0u, STATUS_BAD_CODE);
    }
    return vec3<u32>(lc.x, lc.y, 0u);
}

// Decodes the symbol at the cursor (the reader's data ending at bit `end`) into the
// symbol's variables and moves the cursor past it (the oracle's `step`).
fn step_symbol(end: u32) {
    let j = blob[l_map + c_b] & 0xFFu;
    let v = peek(c_pos, end);
    let dc = c_k == 0u;
    let t = b_chunk + blob[l_scan + select(S_AC_TABLE, S_DC_TABLE, dc) + j];
    let code = lookup(t, v);
    let len = code.x;
    let sym = code.y;
    // `sym & 15` extra bits follow the code: at most 16 + 15 bits in all.
    let s = sym & 15u;
    var extra = 0u;
    if (s != 0u) {
        extra = (v << len) >> (32u - s);
    }
    y_dc = dc;
    y_diff = 0;
    y_z = 64u;
    y_val = 0u;
    y_status = code.z;
    c_pos += len + s;
    if (dc) {
        y_diff = extend(extra, s);
        c_k = 1u;
    } else {
        let run = sym >> 4u;
        if (s != 0u) {
            var k = c_k + run;
            if (k > 63u) {
                y_status |= STATUS_OVERFLOW;
                k = 63u;
            }
            y_z = NATURAL[k];
            y_val = u32(extend(extra, s)) & 0xFFFFu;
            c_k = k + 1u;
        } else if (run == 15u) {
            c_k += 16u;
        } else {
            c_k = 64u;
        }
        if (c_k >= 64u) {
            c_k = 0u;
            c_b = (c_b + 1u) % l_cycle;
        }
    }
}

// The decode of one subsequence from the cursor while it is before `sub_end` (in a
// segment whose data ends at `seg_end`) into record words 2-14 at `out` (the oracle's
// `span`). Every symbol takes at least one bit, so `l_bits` steps always reach the end;
// the bound is the chunk's, the same for every invocation, each skipping the steps past
// its end (llvmpipe mis-masks loops whose bound differs between lanes).
fn span(sub_end: u32, seg_end: u32, out: u32) {
    var blocks = 0u;
    var phase = 0u;
    var sums = array<u32, SYNC_MAX_MCU_BLOCKS>();
    for (var i = 0u; i < l_bits; i++) {
        if (c_pos < sub_end) {
            step_symbol(seg_end);
            if (y_dc) {
                blocks += 1u;
                sums[phase] = sums[phase] + u32(y_diff);
                phase = (phase + 1u) % l_bpm;
            }
        }
    }
    rec[out] = c_pos;
    rec[out + 1u] = cursor_bk();
    rec[out + 2u] = blocks;
    for (var p = 0u; p < SYNC_MAX_MCU_BLOCKS; p++) {
        rec[out + 3u + p] = sums[p];
    }
}

// Record words 0-14 at `r` of a decode of subsequence `s` from the cursor (the oracle's
// `record`).
fn record(s: u32, r: u32) {
    let seg = sub_word(s, SB_SEGMENT);
    let end = sub_word(s, SB_END);
    let seg_end = seg_word(seg, SG_END);
    rec[r] = c_pos;
    rec[r + 1u] = cursor_bk();
    span(end, seg_end, r + 2u);
}

// ---------------------------------------------------------------------------------------
// agrees_with_simd (idct.rs) on `blk`, as shaders/huffman.wgsl checks it:
// shaders/simd_range.wgsl, joined after this file, reads the block and the quantisation
// table's columns declared here (the table's absolute word).

var<private> blk: array<u32, 32>;

// The words of the quantisation table at `at` that hold its column `col`, by row.
fn column_words(at: u32, col: u32) -> array<u32, 8> {
    var w: array<u32, 8>;
    for (var r = 0u; r < 8u; r++) {
        w[r] = blob[at + (r * 8u + col) / 2u];
    }
    return w;
}

// ---------------------------------------------------------------------------------------
// The passes.

// Pass 1 (`batch_start`), thread g of the batch's subsequences: subsequence s of its
// sample decoded from its first bit with block 0 of an MCU at its DC, into record s of
// the sample's copy 0; the thread of its first subsequence zeroes its status words (the
// later passes OR into them).
@compute @workgroup_size(32)
fn sync_start(inv: Invocation) {
    let s = locate_thread(inv, BT_FIRST_SUBSEQUENCE);
    if (s != 0xFFFFFFFFu) {
        if (s == 0u) {
            for (var w = 0u; w <= P[0].w; w++) {
                atomicStore(&status[b_status + w], 0u);
            }
        }
        c_pos = sub_word(s, SB_START);
        c_b = 0u;
        c_k = 0u;
        record(s, b_records + SYNC_RECORD_WORDS * s);
    }
}

// A sync round (`batch_round`), thread g: record s of its sample's copy `round % 2` into
// the other copy, decoded again from the exit of record s - 1 when that is not its start
// (never for the first subsequence of a segment); ORs 1 into the sample's changed word
// of the round when its exit changed. After a round that changed none of the sample's
// exits, or past its chunk's most rounds, it only copies the record.
@compute @workgroup_size(32)
fn sync_round(inv: Invocation) {
    let s = locate_thread(inv, BT_FIRST_SUBSEQUENCE);
    if (s != 0xFFFFFFFFu) {
        let round_no = P[0].x;
        let half = b_subs * SYNC_RECORD_WORDS;
        let prev = b_records + (round_no % 2u) * half;
        let next = b_records + ((round_no + 1u) % 2u) * half;
        let r = SYNC_RECORD_WORDS * s;
        for (var w = 0u; w < SYNC_RECORD_WORDS; w++) {
            rec[next + r + w] = rec[prev + r + w];
        }
        let settled = round_no > 0u && atomicLoad(&status[b_status + round_no]) == 0u;
        let first = (sub_word(s, SB_FLAGS) & 1u) == 1u;
        if (round_no < sample_rounds() && !settled && !first) {
            let p = r - SYNC_RECORD_WORDS;
            let same = rec[prev + p + 2u] == rec[prev + r] && rec[prev + p + 3u] == rec[prev + r + 1u];
            if (!same) {
                cursor_read(prev + p + 2u);
                record(s, next + r);
                if (rec[next + r + 2u] != rec[prev + r + 2u] || rec[next + r + 3u] != rec[prev + r + 3u]) {
                    atomicOr(&status[b_status + 1u + round_no], 1u);
                }
            }
        }
    }
}

// The scan's running sums: the first block of the next subsequence within the segment,
// and the DC predictions per scan component at it.
var<private> scan_at: u32;
var<private> scan_dc: array<u32, 4>;

// Phase `p` of the subsequence whose record starts at `r` added to its scan component's
// running sum, when the MCU has that many blocks.
fn scan_phase(r: u32, p: u32) {
    if (p < l_bpm) {
        let j = blob[l_map + (scan_at + p) % l_bpm] & 3u;
        scan_dc[j] = scan_dc[j] + rec[r + 5u + p];
    }
}

// The scan's step over the subsequence whose record starts at `r`: its words 15-19 from
// the running sums, then its blocks and DC differences added to them. Straight-line (the
// phases unrolled): llvmpipe gives an invocation a budget of loop iterations.
fn scan_one(r: u32) {
    rec[r + 15u] = scan_at;
    rec[r + 16u] = scan_dc[0];
    rec[r + 17u] = scan_dc[1];
    rec[r + 18u] = scan_dc[2];
    rec[r + 19u] = scan_dc[3];
    scan_phase(r, 0u);
    scan_phase(r, 1u);
    scan_phase(r, 2u);
    scan_phase(r, 3u);
    scan_phase(r, 4u);
    scan_phase(r, 5u);
    scan_phase(r, 6u);
    scan_phase(r, 7u);
    scan_phase(r, 8u);
    scan_phase(r, 9u);
    // saturating_add
    let sum = scan_at + rec[r + 4u];
    scan_at = select(sum, 0xFFFFFFFFu, sum < scan_at);
}

// `scan_one` over subsequence `i` of a segment whose first record starts at `r`, when the
// segment has more than `i` (`n`).
fn scan_nth(r: u32, i: u32, n: u32) {
    if (i < n) {
        scan_one(r + SYNC_RECORD_WORDS * i);
    }
}

// The scan (`batch_scan`), thread g of the batch's segments: the exclusive prefix sums
// over segment g of its sample of its subsequences' blocks and, per scan component, DC
// differences into words 15-19 of their records in the sample's copy P[0].x; ORs
// STATUS_OUT_OF_DATA into the sample's status word when the segment's data holds fewer
// blocks than its MCUs, and (the thread of its first segment) STATUS_NO_SYNC when its
// last round still changed an exit. Sequential within a segment, as the oracle (a
// parallel scan gives the same integers, where segments hold more subsequences than
// llvmpipe's loop budget allows: about 500 000 here, eight subsequences an iteration).
// The loop's bound is the batch's most subsequences of a sample, the same for every
// invocation.
@compute @workgroup_size(32)
fn sync_scan(inv: Invocation) {
    let seg = locate_thread(inv, BT_FIRST_SEGMENT);
    if (seg != 0xFFFFFFFFu) {
        var out = 0u;
        let n_rounds = sample_rounds();
        if (seg == 0u && (n_rounds == 0u || atomicLoad(&status[b_status + n_rounds]) != 0u)) {
            out |= STATUS_NO_SYNC;
        }
        let base = b_records + P[0].x * b_subs * SYNC_RECORD_WORDS;
        let blocks = seg_word(seg, SG_BLOCKS);
        let first = seg_word(seg, SG_FIRST_SUBSEQUENCE);
        let n = seg_word(seg, SG_SUBSEQUENCES);
        scan_at = 0u;
        scan_dc = array<u32, 4>(0u, 0u, 0u, 0u);
        let r = base + SYNC_RECORD_WORDS * first;
        for (var i = 0u; i < P[1].z; i += 8u) {
            scan_nth(r, i, n);
            scan_nth(r, i + 1u, n);
            scan_nth(r, i + 2u, n);
            scan_nth(r, i + 3u, n);
            scan_nth(r, i + 4u, n);
            scan_nth(r, i + 5u, n);
            scan_nth(r, i + 6u, n);
            scan_nth(r, i + 7u, n);
        }
        if (scan_at < blocks) {
            out |= STATUS_OUT_OF_DATA;
        }
        if (out != 0u) {
            atomicOr(&status[b_status], out);
        }
    }
}

// Writes block `g` of the scan (MCU order; `bj` its block map word) from `blk` to
// `coefs`, when it lies in its component's block grid and region (the oracle's `put`).
// Returns STATUS_SIMD_RANGE or 0.
fn put(g: u32, bj: u32) -> u32 {
    let j = bj & 0xFFu;
    let cword = blob[l_scan + S_COMP + j];
    var h = 1u;
    var v = 1u;
    if ((blob[l_scan + S_FLAGS] & 1u) != 1u) {
        h = (cword >> 8u) & 0xFFu;
        v = (cword >> 16u) & 0xFFu;
    }
    let per_row = max(blob[l_scan + S_MCUS_PER_ROW], 1u);
    let mcu = g / l_bpm;
    let bx = (mcu % per_row) * h + ((bj >> 8u) & 0xFFu);
    let by = (mcu / per_row) * v + ((bj >> 16u) & 0xFFu);
    let cd = l_comps + SYNC_COMPONENT_WORDS * (cword & 0xFFu);
    let coef_offset = blob[cd + SC_COEF];
    let wib = blob[cd + SC_WIDTH];
    let hib = blob[cd + SC_HEIGHT];
    let quant = b_chunk + blob[cd + SC_QUANT];
    let rg = l_regions + SYNC_REGION_WORDS * (cword & 0xFFu);
    let bx0 = blob[rg];
    let by0 = blob[rg + 1u];
    let bw = blob[rg + 2u];
    let bh = blob[rg + 3u];
    if (bx >= wib || by >= hib || bx < bx0 || by < by0 || bx - bx0 >= bw || by - by0 >= bh) {
        return 0u;
    }
    let at = b_coefs + coef_offset + 32u * ((by - by0) * bw + (bx - bx0));
    store_block(at);
    if (simd_agrees(quant)) {
        return 0u;
    }
    return STATUS_SIMD_RANGE;
}

// Pass 4 (`batch_write`), thread g of the batch's subsequences: subsequence s of its
// sample decoded again from its true start (record s of the sample's copy P[0].x, after
// the rounds and the scan), the blocks whose DC starts in it written to `coefs` (those of
// its segment's first `blocks` only, and of the scan's first SH_LIMIT: one whose first
// block lies past them returns at once, the one holding the last stops after it); its
// status word ORed into the sample's. (No
// `break`, `continue` or `return` in the loop: llvmpipe mis-runs lanes that leave a loop
// while others go on; a lane that is done skips the rest of the chunk's bound.)
@compute @workgroup_size(32)
fn sync_write(inv: Invocation) {
    let s = locate_thread(inv, BT_FIRST_SUBSEQUENCE);
    if (s != 0xFFFFFFFFu && !write_skips(s)) {
        write_subsequence(s);
    }
}

// The blocks of a segment whose first block is `first_block` before the located
// sample's write limit.
fn write_room(first_block: u32) -> u32 {
    let limit = cw(SH_LIMIT);
    return select(0u, limit - first_block, limit > first_block);
}

// Whether subsequence s of the located sample lies past its write limit, and so writes
// nothing (`sync_skips`).
fn write_skips(s: u32) -> bool {
    let first_block = seg_word(sub_word(s, SB_SEGMENT), SG_FIRST_BLOCK);
    let r = b_records + P[0].x * b_subs * SYNC_RECORD_WORDS + SYNC_RECORD_WORDS * s;
    return rec[r + 15u] >= write_room(first_block);
}

// The body of `sync_write` for subsequence s of the located sample (`sync_write`).
fn write_subsequence(s: u32) {
    let seg = sub_word(s, SB_SEGMENT);
    let end = sub_word(s, SB_END);
    let seg_end = seg_word(seg, SG_END);
    let first_block = seg_word(seg, SG_FIRST_BLOCK);
    let blocks = seg_word(seg, SG_BLOCKS);
    let r = b_records + P[0].x * b_subs * SYNC_RECORD_WORDS + SYNC_RECORD_WORDS * s;
    let room = write_room(first_block);
    cursor_read(r);
    var next = rec[r + 15u];
    var pred = array<u32, 4>(rec[r + 16u], rec[r + 17u], rec[r + 18u], rec[r + 19u]);
    var st = 0u;
    var mine = false;
    var at = 0u;
    var bj = 0u;
    var done = false;
    // Every symbol starting before `end` takes a bit, and the last block at most 63
    // more symbols.
    for (var i = 0u; i < l_bits + 64u; i++) {
        if (!done) {
            if (c_k == 0u) {
                if (c_pos >= end || next >= room) {
                    done = true;
                } else {
                    // The segment's first block starts an MCU.
                    mine = true;
                    at = next;
                    bj = blob[l_map + next % l_bpm];
                    next = select(next + 1u, next, next == 0xFFFFFFFFu);
                    blk = array<u32, 32>();
                }
            } else if (!mine && c_pos >= end) {
                done = true;
            }
        }
        if (!done) {
            step_symbol(seg_end);
            if (mine && at < blocks) {
                st |= y_status;
                if (y_dc) {
                    let j = bj & 3u;
                    pred[j] = pred[j] + u32(y_diff);
                    blk[0] = pred[j] & 0xFFFFu;
                } else if (y_z < 64u) {
                    blk[y_z / 2u] = blk[y_z / 2u] | (y_val << (16u * (y_z % 2u)));
                }
                if (c_k == 0u) {
                    st |= put(first_block + at, bj);
                    if (at + 1u == blocks) {
                        if (c_pos > seg_end) {
                            st |= STATUS_OUT_OF_DATA;
                        } else if (seg_end - c_pos >= 8u) {
                            st |= STATUS_LEFTOVER;
                        }
                    }
                }
            }
        }
    }
    if (!done) {
        // Unreachable by the bound above; never a silent short decode.
        st |= STATUS_NO_SYNC;
    }
    if (st != 0u) {
        atomicOr(&status[b_status], st);
    }
}

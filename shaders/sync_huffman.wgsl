// Self-synchronising parallel Huffman decoding: a line-by-line port of the scalar oracle's
// passes in src/decode/jpeg/huffman/sync/pass.rs (`sync_start`, `sync_round`, `sync_scan`,
// `sync_write`), over the chunk of `pack_sync` and the record layout documented in
// src/decode/jpeg/huffman/sync.rs, and of the check `agrees_with_simd` (as
// shaders/huffman.wgsl ports it).
//
// Four entry points, one per pass, each an invocation per thread of the oracle's pass
// (a subsequence; a segment for the scan). The host runs them as the oracle's driver
// `decode_sync_with` does: the start pass, sync rounds until one changed no exit (it
// reads the round's changed word back) or the chunk's most rounds, the scan, the write.
// All integer arithmetic is 32-bit and wraps, as in the oracle. The constants (chunk
// header words, record sizes, scan record and decode table words, status bits) are those
// of src/backend/device/constants.rs, joined in front of this file; the IDCT arithmetic of
// shaders/idct_common.wgsl is joined in front of them, for the SIMD-agreement check.

// P[0].x: the round (`sync_round`: it reads record copy `round % 2` and writes the
// other, and ORs whether an exit changed into `status[SYNC_CHANGED + round_no]`); the copy
// of the records the scan and the write read (`sync_scan`, `sync_write`).
@group(0) @binding(0) var<uniform> P: array<vec4<u32>, 4>;
// The chunk (`pack_sync`).
@group(0) @binding(1) var<storage, read> blob: array<u32>;
// Two copies of the records, `subsequences * SYNC_RECORD_WORDS` words each.
@group(0) @binding(2) var<storage, read_write> rec: array<u32>;
// The coefficient buffer (32 words a block).
@group(0) @binding(3) var<storage, read_write> coefs: array<u32>;
// Word SYNC_STATUS: the OR of the scan's and the write's status words; word
// SYNC_CHANGED + r: whether round r changed an exit.
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;

// jpeg_natural_order: zigzag index to natural (row-major) index.
const NATURAL = array<u32, 64>(
    0u, 1u, 8u, 16u, 9u, 2u, 3u, 10u, 17u, 24u, 32u, 25u, 18u, 11u, 4u, 5u,
    12u, 19u, 26u, 33u, 40u, 48u, 41u, 34u, 27u, 20u, 13u, 6u, 7u, 14u, 21u, 28u,
    35u, 42u, 49u, 56u, 57u, 50u, 43u, 36u, 29u, 22u, 15u, 23u, 30u, 37u, 44u, 51u,
    58u, 59u, 52u, 45u, 38u, 31u, 39u, 46u, 53u, 60u, 61u, 54u, 47u, 55u, 62u, 63u,
);

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
// The chunk header's offsets (the oracle's Layout), read once per invocation.

var<private> l_bits: u32;
var<private> l_bpm: u32;
var<private> l_cycle: u32;
var<private> l_scan: u32;
var<private> l_comps: u32;
var<private> l_map: u32;
var<private> l_segs: u32;
var<private> l_subs: u32;
var<private> l_data: u32;

fn read_layout() {
    l_bits = blob[SH_BITS];
    l_bpm = max(blob[SH_BLOCKS_PER_MCU], 1u);
    l_cycle = max(blob[SH_CYCLE], 1u);
    l_scan = blob[SH_SCAN];
    l_comps = blob[SH_COMPONENT_TABLE];
    l_map = blob[SH_BLOCK_MAP];
    l_segs = blob[SH_SEGMENT_TABLE];
    l_subs = blob[SH_SUBSEQUENCE_TABLE];
    l_data = blob[SH_DATA];
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

// Whether the code of length `l` at the top of `p16` is one of table `t`'s (at most
// maxcode[l]).
fn long_code_fits(t: u32, p16: u32, l: u32) -> bool {
    return i32(p16 >> (16u - l)) <= i32(blob[t + T_MAXCODE + l]);
}

// The code at the top of `v` in the decode table at `t`: its length in `.x`, its symbol in
// `.y`, its status in `.z`; 16 bits that match no code are consumed as symbol 0
// (STATUS_BAD_CODE). The codes of 9-16 bits: the shortest length that fits, tried
// longest first and unrolled (no loop: llvmpipe's loop budget, see shaders/huffman.wgsl).
fn lookup(t: u32, v: u32) -> vec3<u32> {
    let peek8 = v >> 24u;
    let e = (blob[t + peek8 / 2u] >> (16u * (peek8 % 2u))) & 0xFFFFu;
    if (e != 0u) {
        return vec3<u32>(e >> 8u, e & 0xFFu, 0u);
    }
    let p16 = v >> 16u;
    var len = 17u;
    len = select(len, 16u, long_code_fits(t, p16, 16u));
    len = select(len, 15u, long_code_fits(t, p16, 15u));
    len = select(len, 14u, long_code_fits(t, p16, 14u));
    len = select(len, 13u, long_code_fits(t, p16, 13u));
    len = select(len, 12u, long_code_fits(t, p16, 12u));
    len = select(len, 11u, long_code_fits(t, p16, 11u));
    len = select(len, 10u, long_code_fits(t, p16, 10u));
    len = select(len, 9u, long_code_fits(t, p16, 9u));
    if (len > 16u) {
        return vec3<u32>(16u, 0u, STATUS_BAD_CODE);
    }
    let code = i32(p16 >> (16u - len));
    let idx = u32(code + i32(blob[t + T_VALOFFSET + len])) & 0xFFu;
    let sym = (blob[t + T_HUFFVAL + idx / 4u] >> (8u * (idx % 4u))) & 0xFFu;
    return vec3<u32>(len, sym, 0u);
}

// HUFF_EXTEND: the sign extension of an `s`-bit magnitude `r`.
fn extend(r: u32, s: u32) -> i32 {
    if (s == 0u) {
        return 0;
    }
    if (r < (1u << (s - 1u))) {
        return i32(r) - (1i << s) + 1;
    }
    return i32(r);
}

// Decodes the symbol at the cursor (the reader's data ending at bit `end`) into the
// symbol's variables and moves the cursor past it (the oracle's `step`).
fn step_symbol(end: u32) {
    let j = blob[l_map + c_b] & 0xFFu;
    let v = peek(c_pos, end);
    let dc = c_k == 0u;
    let t = blob[l_scan + select(S_AC_TABLE, S_DC_TABLE, dc) + j];
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
// table's columns declared here.

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

// Pass 1 (`sync_start`), thread s: subsequence s decoded from its first bit with block 0
// of an MCU at its DC, into record s of copy 0.
@compute @workgroup_size(32)
fn sync_start(inv: Invocation) {
    let s = flat_id(inv);
    if (s < blob[SH_SUBSEQUENCES]) {
        read_layout();
        c_pos = sub_word(s, SB_START);
        c_b = 0u;
        c_k = 0u;
        record(s, SYNC_RECORD_WORDS * s);
    }
}

// A sync round (`sync_round`), thread s: record s of copy `round % 2` into the other
// copy, decoded again from the exit of record s - 1 when that is not its start (never
// for the first subsequence of a segment); ORs 1 into the round's changed word when its
// exit changed.
@compute @workgroup_size(32)
fn sync_round(inv: Invocation) {
    let s = flat_id(inv);
    let subs = blob[SH_SUBSEQUENCES];
    if (s < subs) {
        read_layout();
        let round_no = P[0].x;
        let prev = (round_no % 2u) * subs * SYNC_RECORD_WORDS;
        let next = ((round_no + 1u) % 2u) * subs * SYNC_RECORD_WORDS;
        let r = SYNC_RECORD_WORDS * s;
        for (var w = 0u; w < SYNC_RECORD_WORDS; w++) {
            rec[next + r + w] = rec[prev + r + w];
        }
        let first = (sub_word(s, SB_FLAGS) & 1u) == 1u;
        if (!first) {
            let p = r - SYNC_RECORD_WORDS;
            let same = rec[prev + p + 2u] == rec[prev + r] && rec[prev + p + 3u] == rec[prev + r + 1u];
            if (!same) {
                cursor_read(prev + p + 2u);
                record(s, next + r);
                if (rec[next + r + 2u] != rec[prev + r + 2u] || rec[next + r + 3u] != rec[prev + r + 3u]) {
                    atomicOr(&status[SYNC_CHANGED + round_no], 1u);
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

// The scan (`sync_scan`), thread g: the exclusive prefix sums over segment g's
// subsequences of their blocks and, per scan component, of their DC differences into
// words 15-19 of their records in copy P[0].x; ORs STATUS_OUT_OF_DATA into the status
// word when the segment's data holds fewer blocks than its MCUs. Sequential within a
// segment, as the oracle (a parallel scan gives the same integers, where segments hold
// more subsequences than llvmpipe's loop budget allows: about 500 000 here, eight
// subsequences an iteration). The loop's bound is the chunk's subsequences, the same for
// every invocation.
@compute @workgroup_size(32)
fn sync_scan(inv: Invocation) {
    let g = flat_id(inv);
    let subs = blob[SH_SUBSEQUENCES];
    if (g < blob[SH_SEGMENTS]) {
        read_layout();
        let base = P[0].x * subs * SYNC_RECORD_WORDS;
        let blocks = seg_word(g, SG_BLOCKS);
        let first = seg_word(g, SG_FIRST_SUBSEQUENCE);
        let n = seg_word(g, SG_SUBSEQUENCES);
        scan_at = 0u;
        scan_dc = array<u32, 4>(0u, 0u, 0u, 0u);
        let r = base + SYNC_RECORD_WORDS * first;
        for (var i = 0u; i < subs; i += 8u) {
            if (i < n) {
                scan_one(r + SYNC_RECORD_WORDS * i);
            }
            if (i + 1u < n) {
                scan_one(r + SYNC_RECORD_WORDS * (i + 1u));
            }
            if (i + 2u < n) {
                scan_one(r + SYNC_RECORD_WORDS * (i + 2u));
            }
            if (i + 3u < n) {
                scan_one(r + SYNC_RECORD_WORDS * (i + 3u));
            }
            if (i + 4u < n) {
                scan_one(r + SYNC_RECORD_WORDS * (i + 4u));
            }
            if (i + 5u < n) {
                scan_one(r + SYNC_RECORD_WORDS * (i + 5u));
            }
            if (i + 6u < n) {
                scan_one(r + SYNC_RECORD_WORDS * (i + 6u));
            }
            if (i + 7u < n) {
                scan_one(r + SYNC_RECORD_WORDS * (i + 7u));
            }
        }
        if (scan_at < blocks) {
            atomicOr(&status[SYNC_STATUS], STATUS_OUT_OF_DATA);
        }
    }
}

// Writes block `g` of the scan (MCU order; `bj` its block map word) from `blk` to
// `coefs`, when it lies in its component's block grid (the oracle's `put`). Returns
// STATUS_SIMD_RANGE or 0.
fn put(g: u32, bj: u32) -> u32 {
    let j = bj & 0xFFu;
    let cw = blob[l_scan + S_COMP + j];
    var h = 1u;
    var v = 1u;
    if ((blob[l_scan + S_FLAGS] & 1u) != 1u) {
        h = (cw >> 8u) & 0xFFu;
        v = (cw >> 16u) & 0xFFu;
    }
    let per_row = max(blob[l_scan + S_MCUS_PER_ROW], 1u);
    let mcu = g / l_bpm;
    let bx = (mcu % per_row) * h + ((bj >> 8u) & 0xFFu);
    let by = (mcu / per_row) * v + ((bj >> 16u) & 0xFFu);
    let cd = l_comps + SYNC_COMPONENT_WORDS * (cw & 0xFFu);
    let coef_offset = blob[cd + SC_COEF];
    let wib = blob[cd + SC_WIDTH];
    let hib = blob[cd + SC_HEIGHT];
    let quant = blob[cd + SC_QUANT];
    if (bx >= wib || by >= hib) {
        return 0u;
    }
    let at = coef_offset + 32u * (by * wib + bx);
    for (var w = 0u; w < 32u; w += 8u) {
        coefs[at + w] = blk[w];
        coefs[at + w + 1u] = blk[w + 1u];
        coefs[at + w + 2u] = blk[w + 2u];
        coefs[at + w + 3u] = blk[w + 3u];
        coefs[at + w + 4u] = blk[w + 4u];
        coefs[at + w + 5u] = blk[w + 5u];
        coefs[at + w + 6u] = blk[w + 6u];
        coefs[at + w + 7u] = blk[w + 7u];
    }
    if (simd_agrees(quant)) {
        return 0u;
    }
    return STATUS_SIMD_RANGE;
}

// Pass 4 (`sync_write`), thread s: subsequence s decoded again from its true start
// (record s of copy P[0].x, after the rounds and the scan), the blocks whose DC starts in
// it written to `coefs` (those of its segment's first `blocks` only); its status word
// ORed into the status word. (No `break`, `continue` or `return` in the loop: llvmpipe
// mis-runs lanes that leave a loop while others go on; a lane that is done skips the
// rest of the chunk's bound.)
@compute @workgroup_size(32)
fn sync_write(inv: Invocation) {
    let s = flat_id(inv);
    let subs = blob[SH_SUBSEQUENCES];
    if (s < subs) {
        read_layout();
        let seg = sub_word(s, SB_SEGMENT);
        let end = sub_word(s, SB_END);
        let seg_end = seg_word(seg, SG_END);
        let first_block = seg_word(seg, SG_FIRST_BLOCK);
        let blocks = seg_word(seg, SG_BLOCKS);
        let r = P[0].x * subs * SYNC_RECORD_WORDS + SYNC_RECORD_WORDS * s;
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
                    if (c_pos >= end) {
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
            atomicOr(&status[SYNC_STATUS], st);
        }
    }
}

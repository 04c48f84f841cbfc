//! The chunk of the synchronising decode: the headers' records, the segments and
//! subsequences, the un-stuffed data ([`pack_sync`]).

use super::*;

/// The most entropy-coded bytes a chunk takes: bit positions, and a block's run past
/// the end, stay below 2^31.
const MAX_DATA_BYTES: usize = 1 << 27;

fn unsupported(why: &str) -> DecodeError {
    DecodeError::Unsupported(why.into())
}

/// Packs `scan` (its intervals' bytes in `bytes`) into `chunk` in the layout of the
/// module docs, for subsequences of `subsequence_bits` bits (a positive multiple of 32)
/// and at most `max_rounds` sync rounds.
pub fn pack_sync(
    scan: &RestartScan,
    bytes: &[u8],
    subsequence_bits: u32,
    max_rounds: u32,
    chunk: &mut Vec<u32>,
) -> Result<(), DecodeError> {
    if subsequence_bits == 0 || !subsequence_bits.is_multiple_of(32) {
        return Err(unsupported(
            "subsequence size not a positive multiple of 32 bits",
        ));
    }
    let [bpm, cycle, scan_at, comp_at, map_at, coef_words, regions_at] = pack_records(scan, chunk)?;
    // The data, un-stuffed, and the segments' bit ranges.
    let mut data: Vec<u8> = Vec::new();
    let mut ranges = Vec::with_capacity(scan.intervals.len());
    for r in &scan.intervals {
        let src = bytes
            .get(r.clone())
            .ok_or_else(|| DecodeError::BadHeader("interval outside the file".into()))?;
        if data.len() + src.len() > MAX_DATA_BYTES {
            return Err(unsupported(
                "entropy-coded data too large for 32-bit bit offsets",
            ));
        }
        let from = data.len();
        unstuff(src, &mut data);
        ranges.push((8 * from as u32, 8 * data.len() as u32));
    }
    // The segment and subsequence tables.
    let segments = ranges.len();
    let subs: usize = ranges
        .iter()
        .map(|&(a, b)| ((b - a).div_ceil(subsequence_bits) as usize).max(1))
        .sum();
    let seg_at = chunk.len();
    chunk.resize(seg_at + SEGMENT_WORDS * segments, 0);
    let sub_at = chunk.len();
    chunk.resize(sub_at + SUBSEQUENCE_WORDS * subs, 0);
    let mut sub = 0usize;
    for (k, &(a, b)) in ranges.iter().enumerate() {
        let (first_mcu, mcus) = scan.interval_mcus(k);
        let n = ((b - a).div_ceil(subsequence_bits) as usize).max(1);
        let first_block = u32::try_from(first_mcu * u64::from(bpm))
            .map_err(|_| unsupported("too many blocks for 32-bit offsets"))?;
        let blocks = mcus
            .checked_mul(bpm)
            .ok_or_else(|| unsupported("too many blocks for 32-bit offsets"))?;
        let rec = [a, b, first_block, blocks, sub as u32, n as u32];
        chunk[seg_at + SEGMENT_WORDS * k..seg_at + SEGMENT_WORDS * k + 6].copy_from_slice(&rec);
        for i in 0..n {
            let start = a + i as u32 * subsequence_bits;
            let end = (start + subsequence_bits).min(b);
            let at = sub_at + SUBSEQUENCE_WORDS * sub;
            chunk[at..at + 4].copy_from_slice(&[k as u32, start, end, u32::from(i == 0)]);
            sub += 1;
        }
    }
    let data_at = chunk.len();
    let words = data.chunks_exact(4);
    let tail = words.remainder();
    chunk.extend(words.map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])));
    if !tail.is_empty() {
        let mut w = [0u8; 4];
        w[..tail.len()].copy_from_slice(tail);
        chunk.push(u32::from_be_bytes(w));
    }
    chunk.push(0);
    let total_blocks = u32::try_from(scan.total_mcus() * u64::from(bpm))
        .map_err(|_| unsupported("too many blocks for 32-bit offsets"))?;
    let header = [
        segments as u32,
        subs as u32,
        subsequence_bits,
        bpm,
        scan_at,
        comp_at,
        map_at,
        seg_at as u32,
        sub_at as u32,
        data_at as u32,
        coef_words,
        total_blocks,
        max_rounds,
        cycle,
        regions_at,
        total_blocks,
    ];
    chunk[..header.len()].copy_from_slice(&header);
    if chunk.len() > u32::MAX as usize {
        return Err(unsupported("chunk too large for 32-bit offsets"));
    }
    Ok(())
}

/// The chunk's records before the segments: the header (left zero), the scan record,
/// the component table, the MCU block map, the quantisation and decode tables. Returns
/// the blocks per MCU, the cursor's cycle, the offsets of the scan record, the
/// component table and the block map, the coefficient buffer's words, and the offset of
/// the region table (every component's whole block grid).
fn pack_records(scan: &RestartScan, chunk: &mut Vec<u32>) -> Result<[u32; 7], DecodeError> {
    chunk.clear();
    chunk.resize(SYNC_HEADER, 0);
    let hdr = &scan.header;
    // The MCU block map.
    let mut map = Vec::with_capacity(MAX_MCU_BLOCKS);
    for (j, c) in scan.scan.iter().enumerate() {
        let comp = &hdr.components[c.frame_index];
        let (h, v) = if scan.single() {
            (1, 1)
        } else {
            (comp.h_samp, comp.v_samp)
        };
        for y in 0..v {
            for x in 0..h {
                map.push(j as u32 | x << 8 | y << 16);
            }
        }
    }
    if map.is_empty() || map.len() > MAX_MCU_BLOCKS || scan.scan.len() > 4 {
        return Err(unsupported("MCU layout the decode does not take"));
    }
    let bpm = map.len() as u32;
    // The scan record, its table offsets filled below.
    let scan_at = chunk.len();
    chunk.resize(scan_at + 16, 0);
    // The component table and the quantisation tables.
    let comp_at = chunk.len();
    chunk.resize(comp_at + 4 * hdr.components.len(), 0);
    let mut coef_words = 0u64;
    for (ci, c) in hdr.components.iter().enumerate() {
        let quant = chunk.len() as u32;
        chunk.extend(
            c.quant
                .chunks_exact(2)
                .map(|q| u32::from(q[0]) | u32::from(q[1]) << 16),
        );
        let rec = [
            coef_words as u32,
            c.width_in_blocks,
            c.height_in_blocks,
            quant,
        ];
        chunk[comp_at + 4 * ci..comp_at + 4 * ci + 4].copy_from_slice(&rec);
        coef_words += 32 * u64::from(c.width_in_blocks) * u64::from(c.height_in_blocks);
        if coef_words > u64::from(u32::MAX) {
            return Err(unsupported("too many blocks for 32-bit offsets"));
        }
    }
    let map_at = chunk.len();
    chunk.extend_from_slice(&map);
    chunk.resize(map_at + MAX_MCU_BLOCKS, 0);
    // The decode tables the scan uses, once each.
    let desc = super::super::pack::scan_desc(scan, chunk)?;
    chunk[scan_at..scan_at + 16].copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(&desc)));
    // Every block of an MCU decoded with the same tables: the decode does not depend on
    // the block within the MCU, which the cursor then holds as 0 (it cycles over 1).
    let n = scan.scan.len();
    let uniform = desc.dc_table[..n].iter().all(|&t| t == desc.dc_table[0])
        && desc.ac_table[..n].iter().all(|&t| t == desc.ac_table[0]);
    let cycle = if uniform { 1 } else { bpm };
    let regions_at = chunk.len();
    for c in &hdr.components {
        chunk.extend_from_slice(&[0, 0, c.width_in_blocks, c.height_in_blocks]);
    }
    Ok([
        bpm,
        cycle,
        scan_at as u32,
        comp_at as u32,
        map_at as u32,
        coef_words as u32,
        regions_at as u32,
    ])
}

/// Points the coefficient writes of a chunk packed by [`pack_sync`] at regions:
/// `regions[i]` is component `i`'s (frame order) `[first word, bx0, by0, bw, bh]`, its
/// blocks `bx0..bx0 + bw` by `by0..by0 + bh` stored row by row (32 words a block) from
/// that word of the coefficient buffer, the blocks outside it dropped, as the device
/// entropy path lays out a window's blocks (`coeffs::pack_header`). Errors: a region
/// per component not given, or one outside the component's block grid.
pub fn set_sync_regions(chunk: &mut [u32], regions: &[[u32; 5]]) -> Result<(), DecodeError> {
    let (comps, table) = (chunk[5] as usize, chunk[14] as usize);
    // The first quantisation table follows the component table.
    let n = (chunk[comps + 3] as usize).saturating_sub(comps) / 4;
    if regions.len() != n || chunk.len() < table + 4 * n {
        return Err(DecodeError::BadHeader(
            "a region per component expected".into(),
        ));
    }
    for (i, &[at, bx0, by0, bw, bh]) in regions.iter().enumerate() {
        let (wib, hib) = (chunk[comps + 4 * i + 1], chunk[comps + 4 * i + 2]);
        if u64::from(bx0) + u64::from(bw) > u64::from(wib)
            || u64::from(by0) + u64::from(bh) > u64::from(hib)
        {
            return Err(DecodeError::BadHeader(
                "region outside its component".into(),
            ));
        }
        chunk[comps + 4 * i] = at;
        chunk[table + 4 * i..table + 4 * i + 4].copy_from_slice(&[bx0, by0, bw, bh]);
    }
    Ok(())
}

/// Limits the write pass of a chunk packed by [`pack_sync`] to the scan's first `blocks`
/// blocks (MCU order; at most the scan's): a subsequence whose first block lies past
/// them writes nothing and is not decoded again ([`super::sync_skips`]), and the one
/// holding the last of them stops after it. The blocks past the limit are then neither
/// written nor judged: for a file whose verdict is known, a window above its last MCU.
pub fn set_sync_limit(chunk: &mut [u32], blocks: u32) {
    chunk[15] = blocks.min(chunk[11]);
}

/// Appends the entropy-coded bytes `src` to `out` with the stuffed zero after each `FF`
/// left out (the scan found every `FF` of an interval followed by one).
fn unstuff(src: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while let Some(k) = memchr::memchr(0xFF, &src[i..]) {
        out.extend_from_slice(&src[i..=i + k]);
        i += k + 1;
        if src.get(i) == Some(&0) {
            i += 1;
        }
    }
    out.extend_from_slice(&src[i..]);
}

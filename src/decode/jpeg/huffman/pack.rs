//! The upload layout of the device entropy path: the scan and interval records and the
//! data they point into ([`pack_entropy`]), and one image alone in a chunk
//! ([`standalone_chunk`]).

use bytemuck::{Pod, Zeroable};

use super::*;
use crate::decode::jpeg::coeffs::{pack_header, ComponentDesc, PackedJpeg};
use crate::decode::DecodeError;

/// The scan record of one image: 16 words.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ScanDesc {
    /// Word 0: components in the scan (1-4).
    pub components: u32,
    /// Word 1: MCUs per MCU row.
    pub mcus_per_row: u32,
    /// Word 2: index of the image's first component record in the chunk's component
    /// table (the records are in frame order).
    pub first_component: u32,
    /// Word 3: bit 0: a non-interleaved scan (one component, one block an MCU).
    pub flags: u32,
    /// Words 4-7: per scan component: its frame index | `h << 8` | `v << 16`.
    pub comp: [u32; 4],
    /// Words 8-11: per scan component: its DC table's word offset.
    pub dc_table: [u32; 4],
    /// Words 12-15: per scan component: its AC table's word offset.
    pub ac_table: [u32; 4],
}

/// One interval of one image: 8 words.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct IntervalDesc {
    /// Word 0: word offset of the image's [`ScanDesc`].
    pub scan: u32,
    /// Word 1: index of its first MCU in the scan.
    pub first_mcu: u32,
    /// Word 2: its MCUs.
    pub mcus: u32,
    /// Word 3: byte offset of its first entropy-coded byte.
    pub start: u32,
    /// Word 4: byte offset just past its last.
    pub end: u32,
    /// Word 5: index of its word in the status buffer.
    pub status: u32,
    /// Words 6-7: zero.
    pub reserved: [u32; 2],
}

/// One image packed for the device entropy path: the IDCT and colour records of
/// [`crate::decode::jpeg::coeffs::pack_header`] (each component's `coef_offset` in the coefficient
/// area), the scan record, the interval records, and the data words (quantisation tables,
/// decode tables, entropy-coded bytes) that offsets point into. Offsets are relative to
/// the start of `packed.data` (in words; byte offsets in bytes) until placed in a chunk;
/// `ScanDesc::first_component` is 0 and interval status indices count from 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedEntropy {
    /// The image and component records, and the data (quantisation tables, then decode
    /// tables, then bytes).
    pub packed: PackedJpeg,
    /// The scan record.
    pub scan: ScanDesc,
    /// The intervals uploaded (those under the window).
    pub intervals: Vec<IntervalDesc>,
    /// Words of the coefficient area the regions take.
    pub coef_words: u64,
    /// Entropy-coded bytes uploaded.
    pub entropy_bytes: u64,
    /// Every interval of the file is uploaded ([`pack_intervals`] with `all`).
    pub whole: bool,
    /// For the synchronising decode ([`super::sync::pack_sync_window`]): the word of
    /// `packed.data` where its chunk starts (no intervals then); `None` for the
    /// restart-interval decode.
    pub sync: Option<u32>,
}

/// The scan record of `scan`, its decode tables appended to `out` once each (the record
/// holds their word offsets in `out`).
pub(super) fn scan_desc(scan: &RestartScan, out: &mut Vec<u32>) -> Result<ScanDesc, DecodeError> {
    let mut dc_at = [u32::MAX; 4];
    let mut ac_at = [u32::MAX; 4];
    let mut desc = ScanDesc {
        components: scan.scan.len() as u32,
        mcus_per_row: scan.mcus_per_row,
        flags: u32::from(scan.single()),
        ..ScanDesc::default()
    };
    for (j, c) in scan.scan.iter().enumerate() {
        for (slot, at, tables) in [
            (c.dc, &mut dc_at, &scan.dc_tables),
            (c.ac, &mut ac_at, &scan.ac_tables),
        ] {
            if at[slot] == u32::MAX {
                let t = tables[slot]
                    .as_ref()
                    .ok_or_else(|| DecodeError::BadHeader("decode table missing".into()))?;
                at[slot] = out.len() as u32;
                out.extend_from_slice(&t[..]);
            }
        }
        let comp = &scan.header.components[c.frame_index];
        desc.comp[j] = c.frame_index as u32 | comp.h_samp << 8 | comp.v_samp << 16;
        desc.dc_table[j] = dc_at[c.dc];
        desc.ac_table[j] = ac_at[c.ac];
    }
    Ok(desc)
}

/// Packs window `window` of the image scaled by `1/scale` for the device entropy path:
/// the records, and the bytes of only those intervals holding MCUs of the window's
/// region (the blocks the IDCT reads).
pub fn pack_entropy(
    scan: &RestartScan,
    bytes: &[u8],
    scale: u32,
    window: [u32; 4],
    out: &mut PackedEntropy,
) -> Result<(), DecodeError> {
    pack_intervals(scan, bytes, scale, window, false, out)
}

/// The MCU rectangle `[mx0, my0, mx1, my1]` (ends exclusive, within the scan's MCUs) of
/// the regions of `comps` (frame order): an MCU is needed when any block of it is in its
/// component's region.
pub(super) fn region_mcus(scan: &RestartScan, comps: &[ComponentDesc]) -> [u32; 4] {
    let (mut mx0, mut my0, mut mx1, mut my1) = (u32::MAX, u32::MAX, 0u32, 0u32);
    for (ci, d) in comps.iter().enumerate() {
        let comp = &scan.header.components[ci];
        let (h, v) = if scan.single() {
            (1, 1)
        } else {
            (comp.h_samp, comp.v_samp)
        };
        mx0 = mx0.min(d.bx0 / h);
        my0 = my0.min(d.by0 / v);
        mx1 = mx1.max((d.bx0 + d.bw).div_ceil(h));
        my1 = my1.max((d.by0 + d.bh).div_ceil(v));
    }
    [mx0, my0, mx1.min(scan.mcus_per_row), my1.min(scan.mcu_rows)]
}

/// [`pack_entropy`], uploading every interval of the file when `all` (each decoded, the
/// blocks outside the window dropped): the device then judges the whole file, as a host
/// decode of it would.
pub fn pack_intervals(
    scan: &RestartScan,
    bytes: &[u8],
    scale: u32,
    window: [u32; 4],
    all: bool,
    out: &mut PackedEntropy,
) -> Result<(), DecodeError> {
    out.coef_words = pack_header(&scan.header, scale, window, &mut out.packed)?;
    out.intervals.clear();
    out.entropy_bytes = 0;
    out.sync = None;
    let data = &mut out.packed.data;
    let desc = scan_desc(scan, data)?;
    let [mx0, my0, mx1, my1] = region_mcus(scan, &out.packed.components);
    let per_row = u64::from(scan.mcus_per_row);
    let ri = u64::from(scan.restart_interval);
    let mut last = None;
    let mut byte = data.len() * 4;
    let mut wanted: Vec<usize> = Vec::new();
    if all {
        wanted.extend(0..scan.intervals.len());
    }
    for my in (my0..my1).filter(|_| !all) {
        let a = (u64::from(my) * per_row + u64::from(mx0)) / ri;
        let b = (u64::from(my) * per_row + u64::from(mx1.max(mx0 + 1)) - 1) / ri;
        for k in a..=b {
            let k = k as usize;
            if last.is_none_or(|l| k > l) && k < scan.intervals.len() {
                wanted.push(k);
                last = Some(k);
            }
        }
    }
    out.whole = wanted.len() == scan.intervals.len();
    let mut blob: Vec<u8> = Vec::new();
    for (n, &k) in wanted.iter().enumerate() {
        let r = scan.intervals[k].clone();
        let src = bytes
            .get(r.clone())
            .ok_or_else(|| DecodeError::BadHeader("interval outside the file".into()))?;
        let (first, mcus) = scan.interval_mcus(k);
        out.intervals.push(IntervalDesc {
            scan: 0,
            first_mcu: first as u32,
            mcus,
            start: byte as u32,
            end: (byte + src.len()) as u32,
            status: n as u32,
            reserved: [0; 2],
        });
        byte += src.len();
        blob.extend_from_slice(src);
        out.entropy_bytes += src.len() as u64;
    }
    if byte > u32::MAX as usize / 2 {
        return Err(DecodeError::Unsupported(
            "entropy-coded data too large for 32-bit offsets".into(),
        ));
    }
    let words = blob.len().div_ceil(4);
    blob.resize(words * 4, 0);
    data.extend(
        blob.chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    );
    out.scan = desc;
    Ok(())
}

impl PackedEntropy {
    /// Blocks in one MCU of its scan.
    pub fn blocks_per_mcu(&self) -> u32 {
        let n = (self.scan.components as usize).min(4);
        if self.scan.flags & 1 == 1 {
            return 1;
        }
        self.scan.comp[..n]
            .iter()
            .map(|c| ((c >> 8) & 0xFF) * ((c >> 16) & 0xFF))
            .sum::<u32>()
            .max(1)
    }

    /// The most blocks one of its intervals holds (chunk header word 12 is the most over
    /// a chunk's images).
    pub fn max_interval_blocks(&self) -> u32 {
        let per = self.blocks_per_mcu();
        self.intervals
            .iter()
            .map(|iv| iv.mcus.saturating_mul(per))
            .max()
            .unwrap_or(0)
    }

    /// The records placed in a chunk: the data at word `data_at`, the scan record at word
    /// `scan_at`, the component records from index `first_component` of the chunk's
    /// component table, the interval status words from `first_status`, the regions from
    /// word `coef_at` of the coefficient buffer. Returns the scan record, the interval
    /// records and the component records so rebased (`group_start` and the plane and
    /// output offsets are left to the caller, as for [`crate::decode::jpeg::coeffs::pack`]).
    pub fn placed(
        &self,
        data_at: u32,
        scan_at: u32,
        first_component: u32,
        first_status: u32,
        coef_at: u32,
    ) -> (ScanDesc, Vec<IntervalDesc>, Vec<ComponentDesc>) {
        let mut scan = self.scan;
        scan.first_component = first_component;
        for j in 0..scan.components as usize {
            scan.dc_table[j] += data_at;
            scan.ac_table[j] += data_at;
        }
        let intervals = self
            .intervals
            .iter()
            .map(|iv| IntervalDesc {
                scan: scan_at,
                start: iv.start + 4 * data_at,
                end: iv.end + 4 * data_at,
                status: iv.status + first_status,
                ..*iv
            })
            .collect();
        let components = self
            .packed
            .components
            .iter()
            .map(|c| ComponentDesc {
                coef_offset: c.coef_offset + coef_at,
                quant_offset: c.quant_offset + data_at,
                ..*c
            })
            .collect();
        (scan, intervals, components)
    }
}

/// Words of a chunk header (as `backend::device::decode` lays chunks out).
const CHUNK_HEADER: usize = 64;

/// One image alone in a chunk, laid out as the device pass reads it (header words 3, 8,
/// 9, 10 and 12, and 11 for the IDCT; the component table, the scan record, the interval
/// table, the data): for the oracle's whole-image decode and the tests of the shader and
/// the kernel. Returns the chunk and the words of coefficient buffer it needs.
pub fn standalone_chunk(p: &PackedEntropy) -> (Vec<u32>, usize) {
    let ncomp = p.packed.components.len();
    let comp_table = CHUNK_HEADER;
    let scan_at = comp_table + 16 * ncomp;
    let iv_table = scan_at + 16;
    let data_at = iv_table + 8 * p.intervals.len();
    let (scan, intervals, comps) = p.placed(data_at as u32, scan_at as u32, 0, 0, 0);
    let mut chunk = vec![0u32; data_at];
    chunk[0] = 1;
    chunk[1] = ncomp as u32;
    chunk[3] = comp_table as u32;
    chunk[8] = intervals.len() as u32;
    chunk[9] = iv_table as u32;
    chunk[10] = p.coef_words as u32;
    chunk[11] = 1;
    chunk[12] = p.max_interval_blocks();
    for (i, c) in comps.iter().enumerate() {
        chunk[comp_table + 16 * i..comp_table + 16 * (i + 1)]
            .copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(c)));
    }
    chunk[scan_at..scan_at + 16].copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(&scan)));
    for (i, iv) in intervals.iter().enumerate() {
        chunk[iv_table + 8 * i..iv_table + 8 * (i + 1)]
            .copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(iv)));
    }
    chunk.extend_from_slice(&p.packed.data);
    (chunk, p.coef_words as usize)
}

//! A window of an image packed for the device's synchronising decode
//! ([`pack_sync_window`]): the IDCT and colour records of the window, as the restart
//! interval path packs them, and the chunk of [`pack_sync`] with its writes pointed at
//! the window's regions.

use super::super::pack::region_mcus;
use super::*;
use crate::decode::jpeg::coeffs::{pack_header, ComponentDesc};

/// Packs window `window` of the image scaled by `1/scale` for the device's
/// synchronising decode into `out`: the records of [`super::super::pack_intervals`]
/// (no intervals: `out.sync` says where the chunk is), the quantisation tables, then the
/// chunk of [`pack_sync`] (subsequences of [`SUBSEQUENCE_BITS`], at most `max_rounds`
/// rounds) at word `out.sync` of `out.packed.data`, whose write pass stores the blocks of
/// the window's regions where the IDCT reads them (`coef_offset` of each component, from
/// 0). With `all` the write pass decodes every block of the file, so the device judges
/// the whole file (`out.whole`); else only the blocks up to the window's last MCU
/// ([`set_sync_limit`]; `out.whole` when that is the last of the scan), for a file
/// whose verdict is known. The sync passes need every subsequence before the limit, so
/// the data is uploaded whole either way.
pub fn pack_sync_window(
    scan: &RestartScan,
    bytes: &[u8],
    scale: u32,
    window: [u32; 4],
    max_rounds: u32,
    all: bool,
    out: &mut PackedEntropy,
) -> Result<(), DecodeError> {
    out.coef_words = pack_header(&scan.header, scale, window, &mut out.packed)?;
    out.intervals.clear();
    out.scan = ScanDesc::default();
    let mut chunk = Vec::new();
    pack_sync(scan, bytes, SUBSEQUENCE_BITS, max_rounds, &mut chunk)?;
    let regions: Vec<[u32; 5]> = out
        .packed
        .components
        .iter()
        .map(|c| [c.coef_offset, c.bx0, c.by0, c.bw, c.bh])
        .collect();
    set_sync_regions(&mut chunk, &regions)?;
    if !all {
        let blocks = window_blocks(scan, &out.packed.components, chunk[3]);
        set_sync_limit(&mut chunk, blocks);
    }
    out.entropy_bytes = scan.intervals.iter().map(|r| r.len() as u64).sum();
    out.whole = chunk[15] == chunk[11];
    let at = u32::try_from(out.packed.data.len())
        .map_err(|_| DecodeError::Unsupported("chunk too large for 32-bit offsets".into()))?;
    out.packed.data.extend_from_slice(&chunk);
    out.sync = Some(at);
    Ok(())
}

/// The scan's blocks (MCU order, `bpm` an MCU) up to the last MCU the regions of
/// `comps` need, saturated to `u32`.
fn window_blocks(scan: &RestartScan, comps: &[ComponentDesc], bpm: u32) -> u32 {
    let [_, _, mx1, my1] = region_mcus(scan, comps);
    if mx1 == 0 || my1 == 0 {
        return 0;
    }
    let mcus = u64::from(my1 - 1) * u64::from(scan.mcus_per_row) + u64::from(mx1);
    u32::try_from(mcus * u64::from(bpm)).unwrap_or(u32::MAX)
}

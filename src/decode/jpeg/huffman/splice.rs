//! A JPEG cut to some of its MCU rows ([`splice_rows`]), for a decoder that need not
//! entropy-decode the rows above a crop.

use std::ops::Range;

use super::*;

/// A JPEG made of the MCU rows `rows` of `bytes` alone (their intervals copied, the
/// restart markers renumbered, the frame height cut), for a decoder that need not
/// entropy-decode the rows above a crop: libjpeg decodes the rows of the result exactly as
/// the same rows of the whole file, but for the first and last row of samples, which the
/// upsampling of a cut image takes from the image's edge rather than the neighbouring row
/// (so a caller keeps an MCU row of margin around what it needs). Returns the JPEG and the
/// first pixel row it holds; `None` where intervals do not start on MCU rows there (an
/// interval of a fraction of a row that does not divide it, or of rows that `rows` does
/// not start on), or when `rows` is empty or past the image.
pub fn splice_rows(
    bytes: &[u8],
    scan: &RestartScan,
    rows: Range<u32>,
    out: &mut Vec<u8>,
) -> Option<u32> {
    let (mpr, ri) = (scan.mcus_per_row.max(1), scan.restart_interval.max(1));
    let rows = rows.start..rows.end.min(scan.mcu_rows);
    if rows.is_empty() {
        return None;
    }
    // Intervals of the row range, as indices.
    let (first, last) = if mpr.is_multiple_of(ri) {
        let per_row = mpr / ri;
        (rows.start * per_row, rows.end * per_row)
    } else if ri.is_multiple_of(mpr) {
        let k = ri / mpr;
        if !rows.start.is_multiple_of(k) {
            return None;
        }
        (rows.start / k, rows.end.div_ceil(k))
    } else {
        return None;
    };
    let last = (last as usize).min(scan.intervals.len());
    let first = first as usize;
    if first >= last {
        return None;
    }
    let row_px = if scan.single() {
        8
    } else {
        8 * scan.header.max_v
    };
    let top = rows.start * row_px;
    let bottom = (rows.end * row_px).min(scan.header.height);
    // Whole intervals: the last one may reach further down than `rows`.
    let bottom = if ri.is_multiple_of(mpr) {
        ((last as u32) * (ri / mpr) * row_px).min(scan.header.height)
    } else {
        bottom
    };
    let height = u16::try_from(bottom.checked_sub(top)?)
        .ok()
        .filter(|&h| h > 0)?;
    out.clear();
    out.extend_from_slice(bytes.get(..scan.data_start)?);
    out.get_mut(scan.sof_height_at..scan.sof_height_at + 2)?
        .copy_from_slice(&height.to_be_bytes());
    for (n, k) in (first..last).enumerate() {
        if n > 0 {
            out.extend_from_slice(&[0xFF, 0xD0 + ((n - 1) % 8) as u8]);
        }
        out.extend_from_slice(bytes.get(scan.intervals[k].clone())?);
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    Some(top)
}

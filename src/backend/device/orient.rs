//! EXIF orientation on the device: a decoded window (stored frame) is turned upright
//! into the [`Buffer::Oriented`] scratch buffer by the `orient` kernel, then copied back
//! into the windows buffer where the augment pass reads it. The pixels are those of the
//! CPU decoder's `reorient` (Pillow's `exif_transpose`).
//!
//! Parameter words of an `orient` launch: source offset in words relative to the bound
//! source range, source width, height, orientation, upright width, height, and the
//! invocations per grid row (`grid[0] * 64`).

use super::decode::DeviceImage;
use super::error::DeviceError;
use super::launch::{Binding, Buffer, Kernel, Launch, Step};
use crate::error::Result;

/// Binding offsets are multiples of this.
const ALIGN: u64 = 256;

/// One window to turn: `src` as decoded, `orientation` (2-8), written at word `dst`.
#[derive(Debug, Clone, Copy)]
pub struct OrientJob {
    /// The decoded (stored-frame) window.
    pub src: DeviceImage,
    /// EXIF orientation, 2-8.
    pub orientation: u8,
    /// First word of the upright window in the windows buffer.
    pub dst: u64,
}

impl OrientJob {
    /// Width and height of the upright window.
    pub fn size(&self) -> (u32, u32) {
        if self.orientation >= 5 {
            (self.src.height, self.src.width)
        } else {
            (self.src.width, self.src.height)
        }
    }
}

/// The steps that turn every job's window upright: per job a launch into
/// [`Buffer::Oriented`] and a copy from there to its destination in [`Buffer::Windows`]
/// (`windows_bytes` long). Returns the steps and the bytes [`Buffer::Oriented`] needs. A
/// malformed job, or a window beyond `max_binding` bytes or `per_dim` workgroups per
/// dimension, is [`crate::Error::Device`].
pub fn launches(
    jobs: &[OrientJob],
    windows_bytes: u64,
    max_binding: u64,
    per_dim: u64,
) -> Result<(Vec<Step>, u64)> {
    // Word indices in the kernels are u32: bindings stay below 2 GiB.
    let max = max_binding.min(1 << 31);
    let mut steps = Vec::with_capacity(jobs.len() * 2);
    let mut largest = 0u64;
    for (k, j) in jobs.iter().enumerate() {
        let (ow, oh) = j.size();
        let px = u64::from(ow) * u64::from(oh);
        let src = u64::from(j.src.offset);
        let base = (src * 4) / ALIGN * ALIGN;
        let rel = src - base / 4;
        let span = (rel + px) * 4;
        let src_end = src + u64::from(j.src.width) * u64::from(j.src.height);
        let dst_overlaps = j.dst < src_end && src < j.dst + px;
        if !(2..=8).contains(&j.orientation)
            || (j.dst + px) * 4 > windows_bytes
            || dst_overlaps
            || px != u64::from(j.src.width) * u64::from(j.src.height)
        {
            return Err(DeviceError::OrientJob {
                job: k,
                orientation: j.orientation,
                src,
                dst: j.dst,
            }
            .into());
        }
        let wg = u64::from(Kernel::Orient.workgroup());
        let groups = px.div_ceil(wg).max(1);
        let gx = groups.min(per_dim);
        let gy = groups.div_ceil(gx);
        if span > max || px * 4 > max || gy > per_dim || base + span > windows_bytes {
            return Err(DeviceError::OrientedWindow {
                width: ow,
                height: oh,
            }
            .into());
        }
        let rel = u32::try_from(rel).map_err(|_| DeviceError::TooLarge {
            what: "an oriented window's offset in its binding, in words",
            value: rel,
            max: u32::MAX.into(),
        })?;
        let mut params = [0u32; super::launch::PARAM_WORDS];
        params[..7].copy_from_slice(&[
            rel,
            j.src.width,
            j.src.height,
            u32::from(j.orientation),
            ow,
            oh,
            (gx * wg) as u32,
        ]);
        let oriented = Binding {
            buffer: Buffer::Oriented,
            offset: 0,
            size: px * 4,
        };
        steps.push(Step::Launch(Launch {
            kernel: Kernel::Orient,
            grid: [gx as u32, gy as u32],
            bindings: vec![
                Binding {
                    buffer: Buffer::Windows,
                    offset: base,
                    size: span,
                },
                oriented,
            ],
            params,
        }));
        steps.push(Step::Copy {
            src: oriented,
            dst: Binding {
                buffer: Buffer::Windows,
                offset: j.dst * 4,
                size: px * 4,
            },
        });
        largest = largest.max(px * 4);
    }
    Ok((steps, largest))
}

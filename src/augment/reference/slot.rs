//! Writing a batch slot: flips, normalisation, layout and dtype, random erasing, and
//! [`execute_image`], which runs every stage of an image plane in order.

use std::cell::RefCell;
use std::sync::Arc;

use half::f16;

use super::resize::resize_rgb_impl;
use super::simd::{plane_rows, planes_f32_image, planes_lut, src_index, Normalisation};
use super::{jitter_rgb, warp_rgb, Scratch};
use crate::augment::plan::{SamplePlan, AFFINE, ERASE, FLIP_H, FLIP_V, JITTER, NORMALIZE};
use crate::augment::{DType, Layout};
use crate::decode::Image8;

/// Writes an RGB u8 image (already resized and jittered) into a batch slot with the
/// plan's flips, normalisation, layout and dtype. Element values are little-endian.
pub fn write_slot(plan: &SamplePlan, rgb: &[u8], out: &mut [u8]) {
    let norm = plan.has(NORMALIZE);
    let value = |c: usize, v: usize| -> f32 {
        let x = v as f32 / 255.0;
        if norm {
            (x - plan.mean[c]) / plan.std[c]
        } else {
            x
        }
    };
    match plan.dtype() {
        DType::U8 => {
            let lut: [[u8; 256]; 3] = [std::array::from_fn(|v| v as u8); 3];
            write_typed(plan, rgb, out, &lut);
        }
        DType::F16 => {
            let lut: [[u16; 256]; 3] = std::array::from_fn(|c| {
                std::array::from_fn(|v| f16::from_f32(value(c, v)).to_bits())
            });
            match bytemuck::try_cast_slice_mut::<u8, u16>(out) {
                Ok(o) if cfg!(target_endian = "little") => write_typed(plan, rgb, o, &lut),
                _ => write_bytes(plan, rgb, out, &lut, |v| v.to_le_bytes()),
            }
        }
        DType::F32 => {
            let (mean, std) = match norm {
                true => (plan.mean, plan.std),
                false => ([0.0; 3], [1.0; 3]),
            };
            let (lut, norm) = f32_tables(mean, std);
            let (lut, norm) = (&*lut, &norm);
            match bytemuck::try_cast_slice_mut::<u8, f32>(out) {
                // Vectorised where the CPU allows, bit-identical to the table.
                Ok(o) if cfg!(target_endian = "little") && plan.layout() == Layout::Nchw => {
                    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
                    let flips = (plan.has(FLIP_H), plan.has(FLIP_V));
                    planes_f32_image(rgb, (w, h, flips.0, flips.1), lut, norm, o)
                }
                Ok(o) if cfg!(target_endian = "little") => write_typed(plan, rgb, o, lut),
                _ => write_bytes(plan, rgb, out, lut, |v| v.to_le_bytes()),
            }
        }
    }
}

/// The f32 table `(v / 255 - mean[c]) / std[c]` per channel `c` and byte `v` (`(0, 1)`
/// when not normalising: the table is then `v / 255`, the same floats as `write_slot`'s
/// `value`) with its [`Normalisation`], made once per thread for each normalisation in
/// turn, keyed by the bits of `mean` and `std`, which are all it depends on: the 1,536
/// divisions and the reciprocals' check cost about as much as writing 6,000 values.
fn f32_tables(mean: [f32; 3], std: [f32; 3]) -> (Arc<[[f32; 256]; 3]>, Normalisation) {
    type Tables = ([u32; 6], Arc<[[f32; 256]; 3]>, Normalisation);
    thread_local! {
        static LAST: RefCell<Option<Tables>> = const { RefCell::new(None) };
    }
    let key: [u32; 6] = std::array::from_fn(|i| match i {
        0..3 => mean[i].to_bits(),
        _ => std[i - 3].to_bits(),
    });
    LAST.with_borrow_mut(|last| match last {
        Some((k, lut, norm)) if *k == key => (lut.clone(), *norm),
        _ => {
            let lut: Arc<[[f32; 256]; 3]> = Arc::new(std::array::from_fn(|c| {
                std::array::from_fn(|v| (v as f32 / 255.0 - mean[c]) / std[c])
            }));
            let norm = Normalisation::new(mean, std, &lut);
            *last = Some((key, lut.clone(), norm));
            (lut, norm)
        }
    })
}

/// `write_slot` for an output already viewed as elements: one table lookup per value.
fn write_typed<T: Copy>(plan: &SamplePlan, rgb: &[u8], out: &mut [T], lut: &[[T; 256]; 3]) {
    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
    let (fh, fv) = (plan.has(FLIP_H), plan.has(FLIP_V));
    match plan.layout() {
        Layout::Nchw => {
            // One pass over each source row, writing its three planes' rows.
            for (y, planes) in plane_rows(out, w, h).enumerate() {
                planes_lut(
                    &rgb[src_index(fv, h, y) * w * 3..][..w * 3],
                    lut,
                    fh,
                    planes,
                    0,
                );
            }
        }
        Layout::Nhwc => {
            for (y, orow) in out[..w * h * 3].chunks_exact_mut(w * 3).enumerate() {
                let srow = &rgb[src_index(fv, h, y) * w * 3..][..w * 3];
                for (x, o) in orow.chunks_exact_mut(3).enumerate() {
                    let sx = src_index(fh, w, x) * 3;
                    o[0] = lut[0][usize::from(srow[sx])];
                    o[1] = lut[1][usize::from(srow[sx + 1])];
                    o[2] = lut[2][usize::from(srow[sx + 2])];
                }
            }
        }
    }
}

/// `write_slot` for an unaligned byte output: element by element, little-endian.
fn write_bytes<T: Copy, const N: usize>(
    plan: &SamplePlan,
    rgb: &[u8],
    out: &mut [u8],
    lut: &[[T; 256]; 3],
    bytes: impl Fn(T) -> [u8; N],
) {
    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
    let (fh, fv) = (plan.has(FLIP_H), plan.has(FLIP_V));
    for y in 0..h {
        let sy = src_index(fv, h, y);
        for x in 0..w {
            let s = (sy * w + src_index(fh, w, x)) * 3;
            for c in 0..3 {
                let idx = match plan.layout() {
                    Layout::Nchw => c * w * h + y * w + x,
                    Layout::Nhwc => (y * w + x) * 3 + c,
                };
                out[idx * N..(idx + 1) * N]
                    .copy_from_slice(&bytes(lut[c][usize::from(rgb[s + c])]));
            }
        }
    }
}

/// Executes a plan on an image plane: resize, jitter, affine warp, flip, normalise, layout,
/// dtype, written into `out` (exactly [`SamplePlan::image_bytes`] long).
pub fn execute_image(plan: &SamplePlan, src: &Image8, out: &mut [u8], scratch: &mut Scratch) {
    resize_rgb_impl(
        plan,
        src,
        &mut scratch.resized,
        &mut scratch.horizontal,
        &mut scratch.kx,
        &mut scratch.ky,
    );
    if plan.has(JITTER) {
        jitter_rgb(plan, &mut scratch.resized, plan.out_width as usize);
    }
    if plan.has(AFFINE) {
        warp_rgb(plan, &scratch.resized, &mut scratch.warped);
        write_slot(plan, &scratch.warped, out);
    } else {
        write_slot(plan, &scratch.resized, out);
    }
    if plan.has(ERASE) {
        erase_slot(plan, out);
    }
}

/// Random erasing on a written slot: the elements of the plan's erased rectangle (output
/// coordinates, after flips) take its value per channel, as the batch's dtype holds it
/// (u8: the value truncated into 0-255; f16: rounded to nearest even).
pub fn erase_slot(plan: &SamplePlan, out: &mut [u8]) {
    let ((x0, x1), (y0, y1)) = plan.erase_rect();
    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
    let size = plan.dtype().size();
    for c in 0..3 {
        let v = plan.erase_value[c];
        let bytes: [u8; 4] = match plan.dtype() {
            DType::U8 => [v.clamp(0.0, 255.0) as u8, 0, 0, 0],
            DType::F16 => {
                let b = f16::from_f32(v).to_le_bytes();
                [b[0], b[1], 0, 0]
            }
            DType::F32 => v.to_le_bytes(),
        };
        for y in y0 as usize..y1 as usize {
            for x in x0 as usize..x1 as usize {
                let idx = match plan.layout() {
                    Layout::Nchw => c * w * h + y * w + x,
                    Layout::Nhwc => (y * w + x) * 3 + c,
                };
                if let Some(o) = out.get_mut(idx * size..(idx + 1) * size) {
                    o.copy_from_slice(&bytes[..size]);
                }
            }
        }
    }
}

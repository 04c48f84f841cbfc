//! Scalar oracle of chroma upsampling and colour conversion, and the whole hybrid decode
//! of a window ([`decode_window`]): what `shaders/color.wgsl` computes, pixel by pixel.
//!
//! Upsampling follows `jdsample.c` with `do_fancy_upsampling` on: the method per component
//! is chosen as `jinit_upsampler` does ([`super::coeffs::geometry`]), and the triangle
//! filters are evaluated per output pixel with the exact integer rounding of
//! `h2v1_fancy_upsample`, `h1v2_fancy_upsample` and `h2v2_fancy_upsample`. Their first and
//! last column special cases, and the context rows `jdmainct.c` supplies at the top and
//! bottom of the image, are the same as reading the neighbouring sample with its index
//! clamped to the component's real samples (`downsampled_width/height`). Colour conversion
//! follows `jdcolor.c` (YCbCr to RGB with 16-bit fixed-point tables, YCCK to CMYK, gray and
//! RGB copies), then CMYK to RGB as `decode::cpu` does.
#![doc(hidden)]

use super::coeffs::{
    pack, Coefficients, ComponentDesc, PackedJpeg, Upsample, KIND_CMYK, KIND_GRAY, KIND_RGB,
    KIND_YCBCR, KIND_YCCK,
};
use super::idct::idct_component;
use crate::decode::{DecodeError, Image8};

/// Reads plane sample `(sx, sy)` in whole-component coordinates.
fn read(plane: &[u8], d: &ComponentDesc, sx: u32, sy: u32) -> u32 {
    let x = sx - d.bx0 * d.dct_size;
    let y = sy - d.by0 * d.dct_size;
    u32::from(plane[y as usize * d.plane_stride as usize * 4 + x as usize])
}

/// The neighbour index `i - 1` (`up`) or `i + 1`, clamped to `0..n`.
fn neighbour(i: u32, up: bool, n: u32) -> u32 {
    if up {
        i.saturating_sub(1)
    } else {
        (i + 1).min(n.max(1) - 1)
    }
}

/// Component `d`'s upsampled value at pixel `(x, y)` of the scaled image, from its plane
/// (laid out as [`idct_component`] writes it).
pub fn component_value(plane: &[u8], d: &ComponentDesc, x: u32, y: u32) -> u8 {
    let (dw, dh) = (d.downsampled_width, d.downsampled_height);
    let v = match Upsample::from_code(d.method) {
        Upsample::Full => read(plane, d, x, y),
        Upsample::Box => read(plane, d, x / d.eh.max(1), y / d.ev.max(1)),
        Upsample::H2V1Fancy => {
            let (i, left) = (x / 2, x.is_multiple_of(2));
            let n = neighbour(i, left, dw);
            (3 * read(plane, d, i, y) + read(plane, d, n, y) + if left { 1 } else { 2 }) >> 2
        }
        Upsample::H1V2Fancy => {
            let (j, above) = (y / 2, y.is_multiple_of(2));
            let n = neighbour(j, above, dh);
            (3 * read(plane, d, x, j) + read(plane, d, x, n) + if above { 1 } else { 2 }) >> 2
        }
        Upsample::H2V2Fancy => {
            let (j, above) = (y / 2, y.is_multiple_of(2));
            let nj = neighbour(j, above, dh);
            let colsum = |i: u32| 3 * read(plane, d, i, j) + read(plane, d, i, nj);
            let (i, left) = (x / 2, x.is_multiple_of(2));
            let ni = neighbour(i, left, dw);
            (3 * colsum(i) + colsum(ni) + if left { 8 } else { 7 }) >> 4
        }
    };
    v as u8
}

const ONE_HALF: i32 = 1 << 15;

/// `jdcolor.c`'s `Cr_r_tab`, `Cb_b_tab` and the green sum, for one Cb/Cr pair:
/// `(red, green, blue)` offsets to add to Y.
fn ycc_offsets(cb: u8, cr: u8) -> (i32, i32, i32) {
    let (cb, cr) = (i32::from(cb) - 128, i32::from(cr) - 128);
    let r = (91881 * cr + ONE_HALF) >> 16;
    let b = (116130 * cb + ONE_HALF) >> 16;
    let g = (-46802 * cr + (-22554 * cb + ONE_HALF)) >> 16;
    (r, g, b)
}

fn clamp(v: i32) -> u8 {
    v.clamp(0, 255) as u8
}

/// YCbCr to RGB (`ycc_rgb_convert`).
pub fn ycc_to_rgb(y: u8, cb: u8, cr: u8) -> [u8; 3] {
    let (r, g, b) = ycc_offsets(cb, cr);
    let y = i32::from(y);
    [clamp(y + r), clamp(y + g), clamp(y + b)]
}

/// YCCK to CMYK (`ycck_cmyk_convert`).
pub fn ycck_to_cmyk(y: u8, cb: u8, cr: u8, k: u8) -> [u8; 4] {
    let (r, g, b) = ycc_offsets(cb, cr);
    let y = i32::from(y);
    [
        clamp(255 - (y + r)),
        clamp(255 - (y + g)),
        clamp(255 - (y + b)),
        k,
    ]
}

/// CMYK (as stored) to RGB, as `decode::cpu` does: Adobe files (`inverted`) store inks
/// inverted, `R = C * K / 255`; others `(255 - C)(255 - K) / 255`, rounded.
pub fn cmyk_to_rgb(cmyk: [u8; 4], inverted: bool) -> [u8; 3] {
    let inv = |v: u8| {
        if inverted {
            u32::from(v)
        } else {
            255 - u32::from(v)
        }
    };
    let k = inv(cmyk[3]);
    let f = |c: u8| ((inv(c) * k + 127) / 255) as u8;
    [f(cmyk[0]), f(cmyk[1]), f(cmyk[2])]
}

/// Converts one pixel's component values `v` of an image of kind `kind`
/// ([`super::coeffs::KIND_GRAY`] ...) to RGB; `flags` as in [`super::coeffs::ImageDesc`].
pub fn convert(kind: u32, flags: u32, v: [u8; 4]) -> [u8; 3] {
    let inverted = flags & 1 != 0;
    match kind {
        KIND_GRAY => [v[0], v[0], v[0]],
        KIND_YCBCR => ycc_to_rgb(v[0], v[1], v[2]),
        KIND_RGB => [v[0], v[1], v[2]],
        KIND_CMYK => cmyk_to_rgb(v, inverted),
        KIND_YCCK => cmyk_to_rgb(ycck_to_cmyk(v[0], v[1], v[2], v[3]), inverted),
        _ => [0, 0, 0],
    }
}

/// Decodes the window of a packed image into RGB: the IDCT of every component region
/// ([`idct_component`]), then upsampling and colour conversion per pixel. The result's
/// `origin`, `full` and `scale` describe the window as `decode::cpu` does.
pub fn decode_window(packed: &PackedJpeg) -> Image8 {
    let img = &packed.image;
    let planes: Vec<Vec<u8>> = (0..packed.components.len())
        .map(|c| {
            let mut p = Vec::new();
            idct_component(packed, c, &mut p);
            p
        })
        .collect();
    let mut data = Vec::with_capacity(img.width as usize * img.height as usize * 3);
    for y in img.y0..img.y0 + img.height {
        for x in img.x0..img.x0 + img.width {
            let mut v = [0u8; 4];
            for (c, (d, plane)) in packed.components.iter().zip(&planes).enumerate().take(4) {
                v[c] = component_value(plane, d, x, y);
            }
            data.extend_from_slice(&convert(img.kind, img.flags, v));
        }
    }
    Image8 {
        width: img.width,
        height: img.height,
        data,
        origin: (img.x0, img.y0),
        full: (img.full_width, img.full_height),
        scale: img.scale,
    }
}

/// Packs and decodes a window `[x0, y0, x1, y1)` of `coeffs` scaled by `1/scale`
/// ([`pack`] then [`decode_window`]).
pub fn decode_coefficients(
    coeffs: &Coefficients,
    scale: u32,
    window: [u32; 4],
) -> Result<Image8, DecodeError> {
    let mut packed = PackedJpeg::default();
    pack(coeffs, scale, window, &mut packed)?;
    Ok(decode_window(&packed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_tables_match_jdcolor() {
        assert_eq!(ycc_to_rgb(128, 128, 128), [128, 128, 128]);
        assert_eq!(ycc_to_rgb(255, 0, 255), [255, 208, 28]);
        assert_eq!(ycc_to_rgb(0, 255, 0), [0, 48, 225]);
        assert_eq!(cmyk_to_rgb([0, 0, 0, 0], false), [255, 255, 255]);
        assert_eq!(cmyk_to_rgb([255, 255, 255, 255], true), [255, 255, 255]);
    }
}

//! Host pixels made to fit one storage binding of the device.
//!
//! The device reads a sample's decoded pixels through one storage binding (128 MiB on most
//! adapters, a word per pixel: 33.5 Mpx). A JPEG too large for it is decoded by the CPU
//! with the plan's window and IDCT scale, but formats the CPU decodes whole (PNG, WebP,
//! TIFF, ...), and a window that is itself larger than a binding, come to the device as
//! they are. Rather than refuse what the CPU backend delivers, such an image is made to
//! fit here, on the host:
//!
//! 1. cropped to the window the plan's resize reads (`DecodeOptions::window`, what a
//!    crop-aware decode produces): the device then samples exactly the pixels the CPU
//!    backend samples;
//! 2. where that window is still too large, reduced by the smallest power of two that
//!    makes it fit, each pixel the mean of a `k x k` box, and handed on at `scale * k`, as
//!    libjpeg's scaled decode hands on a JPEG decoded at `1/k`: the resize coefficients
//!    follow the scale ([`crate::augment::reference::resize_coeffs`]), so the plan's
//!    crop is the same, read from fewer pixels. An image that large is resized down by
//!    far more than `k` to any training size, and the box average is then within a level
//!    or two of resampling the full image (`tests/suite/formats.rs`).
//!
//! The box average is written here rather than taken from a resize crate: it must cover
//! exactly the pixels of each scaled pixel as the scale is defined (pixel `i` at `1/k` is
//! pixels `[i k, (i + 1) k)`), which a general resampler does not promise.

use crate::decode::{DecodeOptions, Image8};

/// The largest box side tried: a window larger than a binding at `1/64` is refused.
const MAX_REDUCTION: u32 = 64;

/// `img` cropped, and where needed reduced, so that [`super::decode::rgb_binding_refusal`]
/// accepts it with bindings of `max_binding` bytes (see the module docs); `None` when no
/// reduction up to [`MAX_REDUCTION`] fits. `opts` are the options the image was decoded
/// with: its window is used where it is in the image's own scale.
pub(super) fn fit_host_pixels(
    img: &Image8,
    opts: &DecodeOptions,
    max_binding: u64,
) -> Option<Image8> {
    let (ox, oy) = img.origin;
    let held = [ox, oy, ox + img.width, oy + img.height];
    // The window the plan reads, within what is held, in the image's frame.
    let want = match opts.window {
        Some(w) if opts.scale.max(1) == img.scale.max(1) => [
            w[0].clamp(held[0], held[2]),
            w[1].clamp(held[1], held[3]),
            w[2].clamp(held[0], held[2]),
            w[3].clamp(held[1], held[3]),
        ],
        _ => held,
    };
    let want = if want[2] > want[0] && want[3] > want[1] {
        want
    } else {
        held
    };
    let mut k = 1;
    while k <= MAX_REDUCTION {
        let (x0, y0) = (want[0] / k, want[1] / k);
        let (x1, y1) = (want[2].div_ceil(k), want[3].div_ceil(k));
        let probe = Image8 {
            width: x1 - x0,
            height: y1 - y0,
            ..Image8::default()
        };
        if super::decode::rgb_binding_refusal(&probe, max_binding).is_none() {
            return Some(reduce(img, [x0, y0, x1, y1], k));
        }
        k *= 2;
    }
    None
}

/// The pixels `[x0, y0, x1, y1)` of `img` at `1/k` of its scale: each the rounded mean of
/// the pixels of its `k x k` box that `img` holds.
fn reduce(img: &Image8, area: [u32; 4], k: u32) -> Image8 {
    let [x0, y0, x1, y1] = area;
    let (ox, oy) = (img.origin.0 as usize, img.origin.1 as usize);
    let (w, h) = ((x1 - x0) as usize, (y1 - y0) as usize);
    let k = k as usize;
    let stride = img.width as usize * 3;
    let mut data = Vec::with_capacity(w * h * 3);
    let mut sums = vec![0u32; w * 3];
    let mut counts = vec![0u32; w];
    for y in y0 as usize..y1 as usize {
        sums.fill(0);
        counts.fill(0);
        // The rows of the box, within what is held.
        let rows = (y * k).max(oy)..((y + 1) * k).min(oy + img.height as usize);
        for row in rows {
            let line = &img.data[(row - oy) * stride..(row - oy + 1) * stride];
            for (i, x) in (x0 as usize..x1 as usize).enumerate() {
                let cols = (x * k).max(ox)..((x + 1) * k).min(ox + img.width as usize);
                counts[i] += cols.len() as u32;
                for col in cols {
                    let p = &line[(col - ox) * 3..(col - ox) * 3 + 3];
                    for c in 0..3 {
                        sums[i * 3 + c] += u32::from(p[c]);
                    }
                }
            }
        }
        for (i, &n) in counts.iter().enumerate() {
            let n = n.max(1);
            for c in 0..3 {
                data.push(((sums[i * 3 + c] + n / 2) / n) as u8);
            }
        }
    }
    let k32 = k as u32;
    Image8 {
        width: w as u32,
        height: h as u32,
        data,
        origin: (x0, y0),
        full: (img.full.0.div_ceil(k32), img.full.1.div_ceil(k32)),
        scale: img.scale.max(1) * k32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(w: u32, h: u32, origin: (u32, u32), full: (u32, u32)) -> Image8 {
        let data = (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect();
        Image8 {
            width: w,
            height: h,
            data,
            origin,
            full,
            scale: 1,
        }
    }

    /// What fits is cropped to the window, its pixels unchanged; what does not is reduced
    /// by the smallest power of two, each pixel its box's mean.
    #[test]
    fn crops_to_the_window_then_reduces_by_powers_of_two() {
        // The smallest binding taken is 64 KiB: 16,384 words, less the chunk's tables.
        let binding = 64 << 10;
        let img = image(300, 200, (0, 0), (300, 200));
        let window = |w| DecodeOptions {
            window: Some(w),
            ..DecodeOptions::default()
        };
        let cropped =
            fit_host_pixels(&img, &window([10, 20, 110, 120]), binding).expect("fits cropped");
        assert_eq!((cropped.width, cropped.height), (100, 100));
        assert_eq!(
            (cropped.origin, cropped.scale, cropped.full),
            ((10, 20), 1, (300, 200))
        );
        for y in 0..100 {
            let (a, b) = (y * 100 * 3, ((y + 20) * 300 + 10) * 3);
            assert_eq!(cropped.data[a..a + 300], img.data[b..b + 300], "row {y}");
        }
        // Too large a window (30,000 pixels): halved, origin and size in the half scale.
        let half = fit_host_pixels(&img, &window([1, 3, 201, 153]), binding).expect("halved");
        assert_eq!((half.width, half.height), (101, 76));
        assert_eq!(
            (half.origin, half.scale, half.full),
            ((0, 1), 2, (150, 100))
        );
        let px = |im: &Image8, x: usize, y: usize, c: usize| {
            let (x, y) = (x - im.origin.0 as usize, y - im.origin.1 as usize);
            u32::from(im.data[(y * im.width as usize + x) * 3 + c])
        };
        for (x, y) in [(0, 1), (7, 3), (100, 76)] {
            for c in 0..3 {
                let sum: u32 = (0..2)
                    .flat_map(|dy| (0..2).map(move |dx| (dx, dy)))
                    .map(|(dx, dy)| px(&img, 2 * x + dx, 2 * y + dy, c))
                    .sum();
                assert_eq!(px(&half, x, y, c), (sum + 2) / 4, "({x}, {y}) {c}");
            }
        }
        // No window: the whole image (60,000 pixels), reduced.
        let whole = fit_host_pixels(&img, &DecodeOptions::default(), binding).expect("whole");
        assert!(
            whole.scale >= 2 && whole.origin == (0, 0),
            "{:?}",
            whole.scale
        );
        assert_eq!(whole.full, (300 / whole.scale, 200 / whole.scale));
        assert_eq!((whole.width, whole.height), whole.full);
    }

    /// An image held from an origin: boxes at its edge average the pixels it holds.
    #[test]
    fn boxes_at_the_edge_of_a_held_window_average_what_is_held() {
        let img = image(7, 5, (3, 1), (20, 20));
        let r = reduce(&img, [1, 0, 5, 3], 2);
        assert_eq!(
            (r.width, r.height, r.origin, r.full),
            (4, 3, (1, 0), (10, 10))
        );
        // Scaled pixel (1, 0) covers held pixels x 3, y 1 only.
        assert_eq!(r.data[..3], img.data[..3]);
    }
}

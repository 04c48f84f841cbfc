//! The mixing pass on the device: MixUp or CutMix of a batch's images after the
//! per-sample pass ([`crate::augment::mix`] is the definition).
//!
//! Two steps, run after the batch's own on the same queue or stream: a copy of the
//! images into [`Buffer::MixScratch`], then [`Kernel::Mix`], one invocation per word of
//! the images, which reads each element's own value and its partner's (the slot before,
//! the first slot's the last) from the copy and writes the word once. Every word is
//! written by one invocation, whatever the element type and wherever a slot starts
//! within a word, so no invocation races another.
//!
//! The kernel's parameters: 0 words (of the images), 1 per (elements of one image, `3 *
//! width * height`), 2 len (slots), 3 dtype (0 u8, 1 f16, 2 f32), 4 kind (0 MixUp, 1
//! CutMix), 5 layout (0 NCHW, 1 NHWC), 6 width, 7 height, 8-11 CutMix's box `x0, y0, x1,
//! y1` (`x1`, `y1` exclusive), 12 and 13 the f32 bits of the weights `(own, partner)`
//! ([`BatchMix::weights`]), 14-15 unused.
#![doc(hidden)]

use super::error::DeviceError;
use super::launch::{grid, Binding, Buffer, Kernel, Launch, Step, PARAM_WORDS};
use crate::augment::mix::{BatchMix, MixKind};
use crate::augment::{DType, Layout};
use crate::error::Result;

/// The batch a mixing pass runs over: `len` images of `3 * width * height` elements of
/// `dtype` in `layout`, slot after slot from byte 0 of the images buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixShape {
    /// Element type.
    pub dtype: DType,
    /// Layout of each image.
    pub layout: Layout,
    /// Slots in the batch.
    pub len: usize,
    /// Output width.
    pub width: u32,
    /// Output height.
    pub height: u32,
}

impl MixShape {
    /// Bytes of the images the pass reads and writes (rounded up to a word): also the
    /// size of [`Buffer::MixScratch`] it needs.
    pub fn bytes(&self) -> u64 {
        let per = 3 * u64::from(self.width) * u64::from(self.height);
        (self.len as u64 * per * self.dtype.size() as u64).div_ceil(4) * 4
    }
}

/// The steps of the mixing pass over `shape`'s images: the copy into
/// [`Buffer::MixScratch`] and the [`Kernel::Mix`] launch. Empty where there is nothing to
/// mix (fewer than two slots). Errors where the images exceed `max_binding` (they are
/// bound whole), the grid exceeds `per_dim` workgroups per dimension, or MixUp is asked
/// of u8 images.
pub fn steps(mix: &BatchMix, shape: MixShape, max_binding: u64, per_dim: u64) -> Result<Vec<Step>> {
    if shape.len < 2 || shape.width == 0 || shape.height == 0 {
        return Ok(Vec::new());
    }
    if mix.kind == MixKind::MixUp && shape.dtype == DType::U8 {
        return Err(crate::Error::config(
            "mixup",
            "MixUp blends values: it needs an f16 or f32 batch",
        ));
    }
    let bytes = shape.bytes();
    // Word and element indices in the kernel are u32.
    let max = max_binding.min(1 << 31);
    if bytes > max {
        return Err(DeviceError::Binding {
            what: "the batch's images, mixed",
            bytes,
            max,
        }
        .into());
    }
    let words = bytes / 4;
    let g = grid(words, Kernel::Mix.workgroup(), per_dim).ok_or(DeviceError::Grid {
        what: "the mixing pass",
        workgroups: words.div_ceil(u64::from(Kernel::Mix.workgroup())),
        per_dim,
    })?;
    let whole = |buffer| Binding {
        buffer,
        offset: 0,
        size: bytes,
    };
    let (l, m) = mix.weights();
    let cut = mix.kind == MixKind::CutMix;
    let [x0, y0, x1, y1] = if cut {
        mix.rect
    } else {
        [0, 0, shape.width, shape.height]
    };
    let mut params = [0u32; PARAM_WORDS];
    params[..14].copy_from_slice(&[
        words as u32,
        3 * shape.width * shape.height,
        shape.len as u32,
        shape.dtype as u32,
        u32::from(cut),
        shape.layout as u32,
        shape.width,
        shape.height,
        x0.min(shape.width),
        y0.min(shape.height),
        x1.min(shape.width),
        y1.min(shape.height),
        l.to_bits(),
        m.to_bits(),
    ]);
    Ok(vec![
        Step::Copy {
            src: whole(Buffer::Images),
            dst: whole(Buffer::MixScratch),
        },
        Step::Launch(Launch {
            kernel: Kernel::Mix,
            grid: g,
            bindings: vec![whole(Buffer::MixScratch), whole(Buffer::Images)],
            params,
        }),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(len: usize, dtype: DType) -> MixShape {
        MixShape {
            dtype,
            layout: Layout::Nchw,
            len,
            width: 5,
            height: 3,
        }
    }

    const CUT: BatchMix = BatchMix {
        kind: MixKind::CutMix,
        lambda: 0.75,
        rect: [1, 0, 3, 2],
    };

    #[test]
    fn the_pass_copies_then_launches_over_every_word() {
        let s = steps(&CUT, shape(3, DType::U8), 1 << 20, 1 << 16).expect("steps");
        // 3 * 45 bytes, rounded up to words.
        assert!(matches!(&s[0], Step::Copy { src, dst }
            if src.buffer == Buffer::Images && dst.buffer == Buffer::MixScratch && src.size == 136));
        let Step::Launch(l) = &s[1] else {
            panic!("no launch: {s:?}")
        };
        assert_eq!(l.kernel, Kernel::Mix);
        assert_eq!(l.params[..12], [34, 45, 3, 0, 1, 0, 5, 3, 1, 0, 3, 2]);
        assert_eq!(l.grid, [1, 1]);
    }

    #[test]
    fn what_the_pass_cannot_do_is_refused() {
        let up = BatchMix {
            kind: MixKind::MixUp,
            ..CUT
        };
        assert!(steps(&up, shape(3, DType::U8), 1 << 20, 1 << 16).is_err());
        assert!(steps(&up, shape(3, DType::F32), 64, 1 << 16).is_err());
        assert!(steps(&up, shape(1, DType::F32), 1 << 20, 1 << 16)
            .expect("one slot")
            .is_empty());
    }
}

//! Random augmentation cases shared by the GPU augment tests (wgpu on lavapipe, the
//! CUDA kernels on the host emulator): plans, decoded windows and label planes.

use stoker::augment::reference::needed_window;
use stoker::augment::SamplePlan;
use stoker::decode::{Image8, LabelPlane};
use stoker::{Augment, DType, Layout};

use super::TestRng;

pub const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// One sample of a case: its plan, its decoded window, its label plane.
pub struct Sample {
    /// The plan.
    pub plan: SamplePlan,
    /// The decoded window.
    pub image: Image8,
    /// The label plane.
    pub mask: Option<LabelPlane>,
}

/// A random augmentation for one batch.
pub fn random_augment(rng: &mut TestRng, dtype: DType, layout: Layout) -> Augment {
    const SIZES: [(u32, u32); 7] = [
        (7, 5),
        (33, 17),
        (16, 16),
        (1, 1),
        (64, 40),
        (5, 48),
        (3, 2),
    ];
    let (w, h) = SIZES[rng.below(SIZES.len() as u64) as usize];
    let mut aug = match rng.below(3) {
        0 => Augment::new().random_resized_crop(w, (0.08, 1.0), (0.75, 4.0 / 3.0)),
        1 => Augment::new().resize_center_crop(w + rng.below(20) as u32, w),
        _ => Augment::new(),
    }
    .output_size(w, h)
    .flip_horizontal(0.5)
    .flip_vertical(0.3)
    .antialias(rng.below(3) != 0)
    .crop_aware(false);
    if rng.below(4) != 0 {
        aug = aug.color_jitter(0.5, 0.6, 0.7);
        if rng.below(3) != 0 {
            aug = aug.hue(0.3);
        }
    }
    if dtype != DType::U8 && rng.below(3) != 0 {
        let std = if rng.below(2) == 0 {
            STD
        } else {
            [0.5, 1.0, 0.05]
        };
        aug = aug.normalize(MEAN, std);
    }
    aug.dtype(dtype).layout(layout)
}

/// A random label plane of `width x height` with a few classes.
pub fn random_mask(rng: &mut TestRng, width: u32, height: u32) -> LabelPlane {
    let pool = [0u16, 1, 3, 7, 42, 255, 1000, 65535];
    let k = 2 + rng.below(3) as usize;
    let classes: Vec<u16> = (0..k)
        .map(|_| pool[rng.below(pool.len() as u64) as usize])
        .collect();
    let (bx, by) = (1 + rng.below(9) as u32, 1 + rng.below(9) as u32);
    let data = (0..width * height)
        .map(|i| {
            let (x, y) = (i % width, i / width);
            let j = (x / bx + (y / by) * 3 + (rng.below(8) == 0) as u32) as usize;
            classes[j % k]
        })
        .collect();
    LabelPlane {
        width,
        height,
        data,
    }
}

/// A sample: a random source size, a plan for it, a decoded window at a random scale
/// (the window the plan reads, with random margins; now and then a smaller one, whose taps
/// are clamped to it) with random pixels, and a mask when asked.
pub fn random_sample(rng: &mut TestRng, aug: &Augment, id: u64, mask: bool) -> Sample {
    let small = rng.below(4) == 0;
    let limit = if small { 20 } else { 300 };
    let (w, h) = (1 + rng.below(limit) as u32, 1 + rng.below(limit) as u32);
    let plan = aug.plan(7, 3, id, w, h);
    let scale = [1u32, 2, 4][rng.below(3) as usize];
    let full = (w.div_ceil(scale), h.div_ceil(scale));
    let [mut x0, mut y0, mut x1, mut y1] = needed_window(&plan, full, scale);
    if rng.below(8) == 0 {
        // A window that misses a little of what the resize reads.
        x0 = (x0 + 1).min(x1 - 1);
        y1 = (y1 - 1).max(y0 + 1);
    } else {
        x0 = x0.saturating_sub(rng.below(5) as u32);
        y0 = y0.saturating_sub(rng.below(5) as u32);
        x1 = (x1 + rng.below(5) as u32).min(full.0);
        y1 = (y1 + rng.below(5) as u32).min(full.1);
    }
    let (ww, wh) = (x1 - x0, y1 - y0);
    let data = if rng.below(2) == 0 {
        super::random_rgb(rng, ww, wh)
    } else {
        (0..ww * wh * 3).map(|_| rng.below(256) as u8).collect()
    };
    let image = Image8 {
        width: ww,
        height: wh,
        data,
        origin: (x0, y0),
        full,
        scale,
    };
    let mask = mask.then(|| random_mask(rng, w, h));
    Sample { plan, image, mask }
}

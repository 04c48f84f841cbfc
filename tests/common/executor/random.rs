//! Random augmentation inputs for the augment cases (plans, decoded windows and label
//! planes), and their check against the CPU reference.

use half::f16;
use stoker::augment::plan::AFFINE;
use stoker::augment::reference::{execute_image, execute_mask, needed_window, Scratch};
use stoker::augment::{Affine, SamplePlan};
use stoker::decode::{Image8, LabelPlane};
use stoker::{Augment, DType, Layout};

use crate::common::TestRng;

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
    let mut aug = match rng.below(5) {
        0 => Augment::new().random_resized_crop(w, (0.08, 1.0), (0.75, 4.0 / 3.0)),
        1 => Augment::new().resize_center_crop(w + rng.below(20) as u32, w),
        2 => Augment::new().letterbox(w, h),
        3 => Augment::new().random_crop_padded(w, h, rng.below(u64::from(w.min(h))) as u32),
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
    if rng.below(3) == 0 {
        aug = aug
            .random_grayscale(0.3)
            .random_posterize(rng.below(9) as u32, 0.5)
            .random_solarize(rng.below(256) as f64, 0.5);
    }
    // Fills that show where they apply (letterbox and padding borders, the warp).
    aug = aug
        .fill([rng.below(256) as u8, 7, 200])
        .mask_fill(if rng.below(2) == 0 { 255 } else { 0 });
    if rng.below(2) == 0 {
        // Rotation, translation, scale and shear.
        let affine = Affine::new()
            .degrees(-40.0, 40.0)
            .translate(0.2, 0.1)
            .scale(0.6, 1.5)
            .shear(-15.0, 15.0)
            .shear_y(-10.0 * rng.below(2) as f64, 5.0);
        aug = aug.random_affine(affine);
    }
    if rng.below(2) == 0 {
        let value = if dtype == DType::U8 {
            [rng.below(256) as f32, 0.0, 255.0]
        } else {
            [0.0, -1.5, rng.below(9) as f32 * 0.75]
        };
        aug = aug.random_erasing(0.7, (0.02, 0.6), (0.3, 3.3), value);
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
        crate::common::random_rgb(rng, ww, wh)
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

/// Worst difference seen, in 0-255 levels, per dtype.
#[derive(Default, Debug)]
pub struct Worst {
    /// Largest difference, in levels.
    pub levels: f64,
    /// Elements compared.
    pub elements: usize,
    /// Elements that differ at all.
    pub off: usize,
    /// Elements more than the tolerance apart in a plan with posterize or solarize:
    /// steps of those ops, where a value one level off before them lands on the other
    /// side of a threshold. Allowed, but rare ([`Worst::check_jumps`]).
    pub jumps: usize,
}

impl Worst {
    /// Steps (posterize, solarize, equalize, auto-contrast, sharpness) stay rare: at most
    /// 0.1 % of the elements.
    pub fn check_jumps(&self, what: &str) {
        assert!(
            self.jumps * 1000 <= self.elements,
            "{what}: {} of {} elements are past the tolerance",
            self.jumps,
            self.elements
        );
    }
}

/// Compares one slot with the reference: u8 within one level, f16 and f32 within one
/// level after normalisation (plus the f16 rounding step).
pub fn compare(plan: &SamplePlan, gpu: &[u8], cpu: &[u8], what: &str, worst: &mut Worst) {
    assert_eq!(gpu.len(), cpu.len());
    let (w, h) = (plan.out_width as usize, plan.out_height as usize);
    let channel = |i: usize| match plan.layout() {
        Layout::Nchw => i / (w * h),
        Layout::Nhwc => i % 3,
    };
    let level = |c: usize| {
        if plan.has(stoker::augment::plan::NORMALIZE) {
            1.0 / 255.0 / f64::from(plan.std[c])
        } else {
            1.0 / 255.0
        }
    };
    // Ops that turn a one-level difference before them into a larger one: solarize and
    // posterize (a threshold), equalize and auto-contrast (a table, a stretch), sharpness
    // (a factor past 1 amplifies).
    let steps = plan.jitter_ops().enumerate().any(|(k, op)| {
        use stoker::augment::plan::{
            OP_AUTOCONTRAST, OP_EQUALIZE, OP_POSTERIZE, OP_SHARPNESS, OP_SOLARIZE,
        };
        op == OP_SOLARIZE
            || (op == OP_POSTERIZE && plan.posterize_bits_at(k) < 8)
            || op == OP_EQUALIZE
            || op == OP_AUTOCONTRAST
            || op == OP_SHARPNESS
    });
    let mut check = |i: usize, g: f64, c: f64, step: f64| {
        let lv = level(channel(i));
        let d = (g - c).abs();
        let levels = if plan.dtype() == DType::U8 { d } else { d / lv };
        worst.elements += 1;
        if d > 0.0 {
            worst.off += 1;
        }
        worst.levels = worst.levels.max(levels);
        let tol = if plan.dtype() == DType::U8 {
            1.0
        } else {
            lv * 1.0001 + step
        };
        if d > tol && steps {
            worst.jumps += 1;
            return;
        }
        assert!(
            d <= tol,
            "{what}: element {i} (channel {}): device {g} cpu {c} ({levels:.3} levels); plan {plan:?}",
            channel(i)
        );
    };
    match plan.dtype() {
        DType::U8 => {
            for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
                check(i, f64::from(*g), f64::from(*c), 0.0);
            }
        }
        DType::F16 => {
            for (i, (g, c)) in gpu.chunks_exact(2).zip(cpu.chunks_exact(2)).enumerate() {
                let g = f16::from_le_bytes([g[0], g[1]]).to_f64();
                let c = f16::from_le_bytes([c[0], c[1]]).to_f64();
                // One f16 rounding step at this magnitude.
                let step = (c.abs().max(6.1e-5)).log2().floor().exp2() / 1024.0;
                check(i, g, c, step);
            }
        }
        DType::F32 => {
            for (i, (g, c)) in gpu.chunks_exact(4).zip(cpu.chunks_exact(4)).enumerate() {
                let g = f64::from(f32::from_le_bytes([g[0], g[1], g[2], g[3]]));
                let c = f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                check(i, g, c, 1e-6 * (1.0 + c.abs()));
            }
        }
    }
}

/// Checks a batch's image output (and masks) against the reference, slot by slot.
pub fn check_batch(
    samples: &[Sample],
    images: &[u8],
    masks: Option<&[u8]>,
    worst: &mut Worst,
    what: &str,
) {
    let mut scratch = Scratch::default();
    let ib = samples[0].plan.image_bytes();
    for (i, s) in samples.iter().enumerate() {
        let mut cpu = vec![0u8; ib];
        execute_image(&s.plan, &s.image, &mut cpu, &mut scratch);
        compare(
            &s.plan,
            &images[i * ib..(i + 1) * ib],
            &cpu,
            &format!("{what} sample {i}"),
            worst,
        );
    }
    let tail = &images[samples.len() * ib..];
    assert!(tail.iter().all(|&b| b == 0), "{what}: padding {tail:?}");
    if let Some(masks) = masks {
        let npx = (samples[0].plan.out_width * samples[0].plan.out_height) as usize;
        let ids: Vec<u16> = masks
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        for (i, s) in samples.iter().enumerate() {
            let got = &ids[i * npx..(i + 1) * npx];
            match &s.mask {
                Some(m) => {
                    let mut cpu = vec![0u16; npx];
                    execute_mask(&s.plan, m, &mut cpu);
                    assert_eq!(
                        got,
                        &cpu[..],
                        "{what}: mask of sample {i}, plan {:?}",
                        s.plan
                    );
                    let fill = s.plan.mask_fill as u16;
                    assert!(got
                        .iter()
                        .all(|v| m.data.contains(v) || (s.plan.has(AFFINE) && *v == fill)));
                }
                None => assert!(got.iter().all(|&v| v == 0)),
            }
        }
        assert!(ids[samples.len() * npx..].iter().all(|&v| v == 0));
    }
}

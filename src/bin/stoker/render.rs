//! `stoker render`: a contact sheet for a person to look at. One row per sample: the
//! whole original (aspect kept), the augmented image exactly as a training batch holds
//! it (taken from a real pipeline), and, for segmentation sets, the augmented label mask
//! blended over the augmented image.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use stoker::augment::plan::FLIP_H;
use stoker::augment::{reference, Layout};
use stoker::decode::{DecodeOptions, Image8};
use stoker::source::Sample;
use stoker::{Augment, BackendKind, DType, Dataset, OnError, Pipeline, SamplePlan};

use crate::common::{
    self, fail, Cause, Ctx, Failure, Report, Res, Table, MASK_IMAGES_DIR, MASK_LABELS_DIR,
};

const GAP: usize = 4;
const BACKGROUND: u8 = 40;

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Image folder (class sub-folders or flat). Default: the bundled segmentation sample,
    /// one row per epoch (--epoch, --epoch + 1, ...) to show different augmentations.
    #[arg(long)]
    images: Option<PathBuf>,
    /// Label masks paired with the images by file stem (PNG class maps).
    #[arg(long, requires = "images")]
    masks: Option<PathBuf>,
    /// Backend (auto, cpu, wgpu, cuda).
    #[arg(long, default_value = "auto", value_parser = clap::value_parser!(BackendKind))]
    backend: BackendKind,
    /// Training seed.
    #[arg(long, default_value = "0")]
    seed: u64,
    /// Epoch whose first batch is shown.
    #[arg(long, default_value = "0")]
    epoch: u64,
    /// Rows (samples) on the sheet.
    #[arg(long, default_value = "6", value_parser = crate::bench::positive)]
    n: usize,
    /// Cell size in pixels (the augmentation's output size).
    #[arg(long, default_value = "224", value_parser = clap::value_parser!(u32).range(8..=2048))]
    size: u32,
    /// The PNG to write.
    #[arg(long)]
    out: PathBuf,
}

/// One row of the sheet.
struct Row {
    id: u64,
    epoch: u64,
    plan: SamplePlan,
    /// `size * size * 3` RGB bytes.
    augmented: Vec<u8>,
    /// `size * size` class ids.
    mask: Option<Vec<u16>>,
}

/// The JSON object of `stoker render`.
#[derive(Debug, Serialize)]
struct RenderReport {
    /// The PNG written.
    out: String,
    /// Rows on the sheet.
    samples: usize,
    width: usize,
    height: usize,
    /// Whether the sheet has the mask-overlay column.
    masks: bool,
    backend: String,
    device: String,
    seed: u64,
    size: u32,
    rows: Vec<RowReport>,
    /// Samples the pipeline skipped.
    errors: Vec<Failure>,
}

/// One row's sample and its augmentation.
#[derive(Debug, Serialize)]
struct RowReport {
    /// The sample id, 16 hex digits.
    id: String,
    path: String,
    epoch: u64,
    /// x, y, width, height in source pixels.
    crop: [f32; 4],
    flip: bool,
    brightness: f32,
    contrast: f32,
    saturation: f32,
}

impl RenderReport {
    fn text(&self) -> String {
        let mut t = Table::new(&["sample", "epoch", "crop (x, y, w, h)", "flip", "b / c / s"]);
        for r in &self.rows {
            let [x, y, w, h] = r.crop;
            t.row(vec![
                r.path.clone(),
                r.epoch.to_string(),
                format!("{x:.0}, {y:.0}, {w:.0}, {h:.0}"),
                if r.flip { "yes" } else { "no" }.into(),
                format!(
                    "{:.2} / {:.2} / {:.2}",
                    r.brightness, r.contrast, r.saturation
                ),
            ]);
        }
        let columns = if self.masks {
            "original | augmented | mask overlay"
        } else {
            "original | augmented"
        };
        let mut text = format!(
            "wrote {} ({}x{}): {} row(s), {columns}, on {}\n\n{}",
            self.out,
            self.width,
            self.height,
            self.samples,
            self.device,
            t.render()
        );
        for e in &self.errors {
            text.push_str(&format!("skipped {}: {}\n", e.path, e.reason));
        }
        text
    }
}

/// A saturated colour per class id, hue from a hash of the id.
fn class_colour(id: u16) -> [u8; 3] {
    let h = (stoker::rng::mix64(u64::from(id)) >> 40) as f64 / (1u64 << 24) as f64 * 6.0;
    let (s, v) = (0.85, 1.0);
    let i = h.floor();
    let f = h - i;
    let (p, q, t) = (v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f)));
    let (r, g, b) = match i as u32 % 6 {
        0 => (v, t, p),
        1 => (q, v, p),
        2 => (p, v, t),
        3 => (p, q, v),
        4 => (t, p, v),
        _ => (v, p, q),
    };
    let c = |x: f64| (x * 255.0).round().clamp(0.0, 255.0) as u8;
    [c(r), c(g), c(b)]
}

/// The augmented image with every non-background class blended in at 50%.
fn overlay(rgb: &[u8], mask: &[u16]) -> Vec<u8> {
    let mut out = rgb.to_vec();
    for (px, &id) in out.chunks_exact_mut(3).zip(mask) {
        if id == 0 {
            continue;
        }
        let c = class_colour(id);
        for (v, c) in px.iter_mut().zip(c) {
            *v = ((u16::from(*v) + u16::from(c)) / 2) as u8;
        }
    }
    out
}

/// Copies a `w x h` RGB image into the sheet at `(x0, y0)`.
fn blit(sheet: &mut [u8], sheet_w: usize, x0: usize, y0: usize, rgb: &[u8], w: usize, h: usize) {
    for y in 0..h {
        let dst = ((y0 + y) * sheet_w + x0) * 3;
        sheet[dst..dst + w * 3].copy_from_slice(&rgb[y * w * 3..(y + 1) * w * 3]);
    }
}

/// The whole image resized to fit `size x size`, aspect kept: (rgb, width, height).
fn fit(img: &Image8, id: u64, size: u32) -> (Vec<u8>, u32, u32) {
    let scale = f64::from(size) / f64::from(img.width.max(img.height));
    let w = ((f64::from(img.width) * scale).round() as u32).clamp(1, size);
    let h = ((f64::from(img.height) * scale).round() as u32).clamp(1, size);
    let plan = Augment::new()
        .resize(w, h)
        .plan(0, 0, id, img.width, img.height);
    (reference::resize_only(&plan, img), w, h)
}

pub fn render(_ctx: Ctx, a: &RenderArgs) -> Res<Report> {
    // Before the work: a sheet with nowhere to go is an error now, not after rendering.
    crate::ensure_parent(&a.out)?;
    let repeat = a.images.is_none();
    let data = match &a.images {
        Some(dir) => {
            let d = common::open_dataset(dir)?;
            match &a.masks {
                Some(m) => d.with_masks(m)?,
                None => d,
            }
        }
        None => {
            let images = common::resolve_dir(None, MASK_IMAGES_DIR, "--images")?;
            let labels = common::resolve_dir(None, MASK_LABELS_DIR, "--images")?;
            Dataset::flat(images)?.with_masks(labels)?
        }
    };
    if data.is_empty() {
        return Err(fail(Cause::NoInput, "no images to render"));
    }
    let has_masks = data.samples().iter().any(|s| s.mask.is_some());
    let by_id: HashMap<u64, Sample> = data.samples().iter().map(|s| (s.id, s.clone())).collect();
    let size = a.size as usize;
    let aug = Augment::new()
        .random_resized_crop(a.size, (0.25, 1.0), (3.0 / 4.0, 4.0 / 3.0))
        .flip_horizontal(0.5)
        .color_jitter(0.4, 0.4, 0.4)
        .dtype(DType::U8)
        .layout(Layout::Nhwc);
    let pipe = Pipeline::builder(data.all())
        .backend(a.backend)
        .augment(aug)
        .batch_size(if repeat { 1 } else { a.n })
        .seed(a.seed)
        .on_error(OnError::Skip)
        .build()?;

    // The rows: the first batch of one epoch, or in repeat mode the first sample of
    // `n` consecutive epochs.
    let epochs: Vec<u64> = if repeat {
        (0..a.n as u64).map(|r| a.epoch.saturating_add(r)).collect()
    } else {
        vec![a.epoch]
    };
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for &e in &epochs {
        let mut epoch = pipe.epoch(e)?;
        let Some(batch) = epoch.next() else { continue };
        let batch = batch?;
        for err in batch.errors() {
            errors.push(Failure::new(err.path.as_str(), err.reason.as_str()));
        }
        let images = batch.images::<u8>()?;
        let [_, h, w, _] = batch.shape();
        if (w, h) != (size, size) {
            return Err(
                format!("internal: batch images are {w}x{h}, expected {size}x{size}").into(),
            );
        }
        let cell = size * size;
        for (slot, (&id, plan)) in batch.ids().iter().zip(batch.plans()).enumerate() {
            let Some(augmented) = images.get(slot * cell * 3..(slot + 1) * cell * 3) else {
                break;
            };
            let mask = batch
                .masks()
                .and_then(|m| m.get(slot * cell..(slot + 1) * cell))
                .map(<[u16]>::to_vec);
            rows.push(Row {
                id,
                epoch: e,
                plan: *plan,
                augmented: augmented.to_vec(),
                mask,
            });
            if rows.len() >= a.n {
                break;
            }
        }
    }
    if rows.is_empty() {
        let why: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.path, e.reason))
            .collect();
        return Err(fail(
            Cause::NoInput,
            format!("no sample could be rendered ({})", why.join("; ")),
        ));
    }

    // Originals, decoded once per sample on the CPU.
    let be = pipe.backend();
    let limits = stoker::Limits::default();
    let mut originals: HashMap<u64, (Vec<u8>, u32, u32)> = HashMap::new();
    for r in &rows {
        if originals.contains_key(&r.id) {
            continue;
        }
        let s = by_id
            .get(&r.id)
            .ok_or("internal: batch holds an unknown sample id")?;
        let bytes = s
            .location
            .read(limits.max_bytes)
            .map_err(|e| format!("{}: {e}", s.path))?;
        let mut img = Image8::default();
        stoker::decode::cpu::decode_image(
            &bytes,
            &DecodeOptions {
                limits,
                ..Default::default()
            },
            &mut img,
        )
        .map_err(|e| format!("{}: {e}", s.path))?;
        originals.insert(r.id, fit(&img, r.id, a.size));
    }

    let cols = if has_masks { 3 } else { 2 };
    let sheet_w = cols * size + (cols + 1) * GAP;
    let sheet_h = rows.len() * size + (rows.len() + 1) * GAP;
    let mut sheet = vec![BACKGROUND; sheet_w * sheet_h * 3];
    for (i, r) in rows.iter().enumerate() {
        let y0 = GAP + i * (size + GAP);
        if let Some((rgb, w, h)) = originals.get(&r.id) {
            let (w, h) = (*w as usize, *h as usize);
            blit(
                &mut sheet,
                sheet_w,
                GAP + (size - w) / 2,
                y0 + (size - h) / 2,
                rgb,
                w,
                h,
            );
        }
        let x1 = 2 * GAP + size;
        blit(&mut sheet, sheet_w, x1, y0, &r.augmented, size, size);
        if let Some(m) = &r.mask {
            let x2 = 3 * GAP + 2 * size;
            blit(
                &mut sheet,
                sheet_w,
                x2,
                y0,
                &overlay(&r.augmented, m),
                size,
                size,
            );
        }
    }
    crate::files::write_png_rgb(&a.out, sheet_w as u32, sheet_h as u32, &sheet)?;

    let rows: Vec<RowReport> = rows
        .iter()
        .map(|r| {
            let p = &r.plan;
            RowReport {
                id: format!("{:016x}", r.id),
                path: by_id.get(&r.id).map_or("?", |s| s.path.as_str()).into(),
                epoch: r.epoch,
                crop: [p.crop_x, p.crop_y, p.crop_w, p.crop_h],
                flip: p.has(FLIP_H),
                brightness: p.brightness,
                contrast: p.contrast,
                saturation: p.saturation,
            }
        })
        .collect();
    let r = RenderReport {
        out: a.out.display().to_string(),
        samples: rows.len(),
        width: sheet_w,
        height: sheet_h,
        masks: has_masks,
        backend: be.kind().to_string(),
        device: be.device(),
        seed: a.seed,
        size: a.size,
        rows,
        errors,
    };
    let report = Report::new(&r, r.text())?;
    Ok(match r.errors.len() {
        0 => report,
        n => report.failed(
            Cause::Partial,
            format!("{n} sample(s) skipped (the sheet shows the others)"),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_is_left_alone_and_classes_differ() {
        let rgb = vec![100u8; 3 * 3];
        let out = overlay(&rgb, &[0, 1, 2]);
        assert_eq!(&out[0..3], &[100, 100, 100]);
        assert_ne!(&out[3..6], &out[6..9]);
        assert_ne!(class_colour(1), class_colour(2));
    }
}

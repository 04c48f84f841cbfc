//! `stoker render`: a contact sheet for a person to look at. One row per sample: the
//! whole original (aspect kept), the augmented image exactly as a training batch holds
//! it (taken from a real pipeline), and, for segmentation sets, the augmented label mask
//! blended over the augmented image. Boxes and keypoints (from a manifest or a COCO
//! file) are drawn on the original where the sample has them and on the augmented image
//! where the batch moved them; a legend under the rows gives each class's colour.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use stoker::augment::plan::FLIP_H;
use stoker::augment::{reference, Layout};
use stoker::decode::{DecodeOptions, Image8};
use stoker::source::Sample;
use stoker::{Augment, BackendKind, DType, Dataset, OnError, Pipeline, SamplePlan, Targets};

use crate::common::{
    self, fail, Cause, Ctx, Failure, Report, Res, Table, MASK_IMAGES_DIR, MASK_LABELS_DIR,
};

const GAP: usize = 4;
const BACKGROUND: u8 = 40;

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Image folder (class sub-folders or flat), shards, a file list or one image.
    /// Default: the bundled segmentation sample, one row per epoch (--epoch, --epoch + 1,
    /// ...) to show different augmentations.
    #[arg(long)]
    images: Option<PathBuf>,
    /// Label masks paired with the images by file stem (PNG class maps).
    #[arg(long, requires = "images", conflicts_with = "coco")]
    masks: Option<PathBuf>,
    /// A manifest (CSV or JSON Lines: path, label, boxes, keypoints, mask, ...) instead of
    /// --images: its boxes and keypoints are drawn.
    #[arg(long, conflicts_with_all = ["images", "coco"])]
    manifest: Option<PathBuf>,
    /// COCO annotations (instances or person keypoints) for the images of --images: the
    /// boxes and keypoints are drawn, labelled with the categories' names.
    #[arg(long, requires = "images")]
    coco: Option<PathBuf>,
    /// Let the paths of --manifest or --coco point outside the manifest's folder or the
    /// image folder (absolute paths, `..`); refused by default.
    #[arg(long)]
    allow_outside_root: bool,
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

/// A sample's whole image as the first column shows it.
struct Original {
    /// `width * height * 3` RGB bytes.
    rgb: Vec<u8>,
    width: u32,
    height: u32,
    /// From the image's pixels to these (the boxes' and keypoints' scale).
    scale: (f32, f32),
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
    /// The sample's boxes and keypoints as the batch moved them (output pixels).
    targets: Option<Targets>,
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
    /// The classes drawn (mask ids and box classes), as the legend shows them.
    legend: Vec<LegendEntry>,
}

/// One entry of the legend.
#[derive(Debug, Serialize)]
struct LegendEntry {
    /// The class id.
    id: u32,
    /// Its name, where the dataset has one.
    name: String,
    /// Its colour on the sheet, `#rrggbb`.
    colour: String,
    /// Where its 8x8 swatch is on the sheet (left, top); `None` past what the legend
    /// shows (it then says how many more there are).
    at: Option<[usize; 2]>,
}

impl LegendEntry {
    /// The text beside the swatch: the id, and the name where it says more.
    fn label(&self) -> String {
        // (A dataset without class names numbers its classes: the id alone then.)
        if self.name.is_empty() || self.name == self.id.to_string() {
            self.id.to_string()
        } else {
            format!("{} {}", self.id, self.name)
        }
    }
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
    /// The boxes on the augmented image, `[x0, y0, x1, y1, class]` in its pixels.
    boxes: Vec<[f32; 5]>,
    /// The keypoints on the augmented image that are still visible, `[x, y]`.
    keypoints: Vec<[f32; 2]>,
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

/// A saturated colour per class id (the same for a mask's id and a box's class): hues a
/// golden-ratio turn apart, so that neighbouring ids (the classes of one dataset) differ
/// most, and every third id a little darker.
fn class_colour(id: u32) -> [u8; 3] {
    let h = (f64::from(id) * 0.618_033_988_749_895).fract() * 6.0;
    let (s, v) = (0.85, if id % 3 == 2 { 0.8 } else { 1.0 });
    let i = h.floor();
    let f = h - i;
    let (p, q, t) = (v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f)));
    let (r, g, b) = stoker::augment::reference::hsv_sector(i as u32 % 6, v, p, q, t);
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
        let c = class_colour(u32::from(id));
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

/// Where one cell of the sheet is, to draw into it (everything clipped to the cell).
#[derive(Clone, Copy)]
struct Cell {
    x0: usize,
    y0: usize,
    w: usize,
    h: usize,
}

impl Cell {
    /// Sets pixel `(x, y)` of the cell (cell coordinates) when it is inside.
    fn put(&self, sheet: &mut [u8], sheet_w: usize, (x, y): (i64, i64), c: [u8; 3]) {
        if x < 0 || y < 0 || x as usize >= self.w || y as usize >= self.h {
            return;
        }
        let at = 3 * ((self.y0 + y as usize) * sheet_w + self.x0 + x as usize);
        if let Some(px) = sheet.get_mut(at..at + 3) {
            px.copy_from_slice(&c);
        }
    }

    /// The outline of the box `[x0, y0, x1, y1]` (cell pixels, corner coordinates), two
    /// pixels wide, inside the box.
    fn outline(&self, sheet: &mut [u8], sheet_w: usize, b: [f32; 4], c: [u8; 3]) {
        let [x0, y0, x1, y1] = b.map(|v| v.round() as i64);
        for t in 0..2 {
            for x in x0..x1 {
                self.put(sheet, sheet_w, (x, y0 + t), c);
                self.put(sheet, sheet_w, (x, y1 - 1 - t), c);
            }
            for y in y0..y1 {
                self.put(sheet, sheet_w, (x0 + t, y), c);
                self.put(sheet, sheet_w, (x1 - 1 - t, y), c);
            }
        }
    }

    /// A keypoint: a 5x5 black square with a 3x3 centre of colour `c`.
    fn keypoint(&self, sheet: &mut [u8], sheet_w: usize, (x, y): (f32, f32), c: [u8; 3]) {
        let (x, y) = (x.floor() as i64, y.floor() as i64);
        for dy in -2..=2i64 {
            for dx in -2..=2i64 {
                let inner = dx.abs() <= 1 && dy.abs() <= 1;
                self.put(
                    sheet,
                    sheet_w,
                    (x + dx, y + dy),
                    if inner { c } else { [0; 3] },
                );
            }
        }
    }

    /// `text` in the 8x8 bitmap font from `(x, y)`, cut at the cell's edge.
    fn text(&self, sheet: &mut [u8], sheet_w: usize, (x, y): (i64, i64), text: &str, c: [u8; 3]) {
        use font8x8::UnicodeFonts;
        for (i, ch) in text.chars().enumerate() {
            let glyph = font8x8::BASIC_FONTS
                .get(ch)
                .or_else(|| font8x8::BASIC_FONTS.get('?'))
                .unwrap_or([0; 8]);
            let gx = x + 8 * i as i64;
            for (gy, row) in glyph.iter().enumerate() {
                for bit in 0..8 {
                    // The font's rows are read from the low bit: bit 0 is the left pixel.
                    if row >> bit & 1 == 1 {
                        self.put(sheet, sheet_w, (gx + bit, y + gy as i64), c);
                    }
                }
            }
        }
    }
}

/// Draws a sample's boxes (in their class's colour) and visible keypoints (in their
/// object's box colour, white without one) into `cell`, scaled by `scale` from the
/// targets' pixels.
fn draw_targets(sheet: &mut [u8], sheet_w: usize, cell: Cell, t: &Targets, scale: (f32, f32)) {
    let (sx, sy) = scale;
    for b in &t.boxes {
        let c = class_colour(b.class);
        cell.outline(
            sheet,
            sheet_w,
            [b.x0 * sx, b.y0 * sy, b.x1 * sx, b.y1 * sy],
            c,
        );
    }
    for k in t.keypoints.iter().filter(|k| k.visibility > 0) {
        let c = t
            .boxes
            .get(k.object as usize)
            .map_or([255; 3], |b| class_colour(b.class));
        cell.keypoint(sheet, sheet_w, (k.x * sx, k.y * sy), c);
    }
}

/// Height of one legend line.
const LEGEND_LINE: usize = 12;
/// Most lines of entries the legend has (then a line says how many more).
const LEGEND_LINES: usize = 8;
/// Longest label drawn, in characters (longer ones are cut).
const LEGEND_CHARS: usize = 16;

/// Lays the legend out in columns across `width` pixels from sheet row `top`: sets each
/// shown entry's swatch position and returns the legend's height.
fn lay_out_legend(legend: &mut [LegendEntry], width: usize, top: usize) -> usize {
    if legend.is_empty() {
        return 0;
    }
    let chars = legend
        .iter()
        .map(|e| e.label().chars().count().min(LEGEND_CHARS))
        .max()
        .unwrap_or(1);
    // Swatch, gap, label, gap.
    let column = 12 + 8 * chars + 12;
    let columns = (width / column).max(1);
    let shown = legend.len().min(columns * LEGEND_LINES);
    for (i, e) in legend.iter_mut().enumerate() {
        e.at = (i < shown).then(|| {
            [
                GAP + (i % columns) * column,
                top + (i / columns) * LEGEND_LINE,
            ]
        });
    }
    let lines = shown.div_ceil(columns) + usize::from(shown < legend.len());
    lines * LEGEND_LINE + GAP
}

/// The legend's lines: each class drawn (mask ids, box classes), its name where the
/// dataset has one.
fn legend(rows: &[Row], names: &[String]) -> Vec<LegendEntry> {
    let mut ids = std::collections::BTreeSet::new();
    for r in rows {
        if let Some(m) = &r.mask {
            ids.extend(m.iter().filter(|&&id| id != 0).map(|&id| u32::from(id)));
        }
        if let Some(t) = &r.targets {
            ids.extend(t.boxes.iter().map(|b| b.class));
        }
    }
    ids.into_iter()
        .map(|id| {
            let [r, g, b] = class_colour(id);
            LegendEntry {
                id,
                name: names.get(id as usize).cloned().unwrap_or_default(),
                colour: format!("#{r:02x}{g:02x}{b:02x}"),
                at: None,
            }
        })
        .collect()
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

/// The originals of `rows`' samples, decoded once per sample on the CPU and fitted to
/// `size`.
fn originals(rows: &[Row], by_id: &HashMap<u64, Sample>, size: u32) -> Res<HashMap<u64, Original>> {
    let limits = stoker::Limits::default();
    let mut originals: HashMap<u64, Original> = HashMap::new();
    for r in rows {
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
        let (rgb, w, h) = fit(&img, r.id, size);
        let scale = (
            w as f32 / img.width.max(1) as f32,
            h as f32 / img.height.max(1) as f32,
        );
        originals.insert(
            r.id,
            Original {
                rgb,
                width: w,
                height: h,
                scale,
            },
        );
    }
    Ok(originals)
}

/// Draws each of `rows` on the sheet: the original (with its targets), the augmented
/// sample (with its targets) and, where it has one, its mask over it; cells of `size`.
fn draw_rows(
    sheet: &mut [u8],
    sheet_w: usize,
    rows: &[Row],
    originals: &HashMap<u64, Original>,
    by_id: &HashMap<u64, Sample>,
    size: usize,
) {
    for (i, r) in rows.iter().enumerate() {
        let y0 = GAP + i * (size + GAP);
        if let Some(o) = originals.get(&r.id) {
            let (rgb, scale) = (&o.rgb, &o.scale);
            let (w, h) = (o.width as usize, o.height as usize);
            let cell = Cell {
                x0: GAP + (size - w) / 2,
                y0: y0 + (size - h) / 2,
                w,
                h,
            };
            blit(sheet, sheet_w, cell.x0, cell.y0, rgb, w, h);
            if let Some(t) = by_id.get(&r.id).and_then(|s| s.targets.as_deref()) {
                draw_targets(sheet, sheet_w, cell, t, *scale);
            }
        }
        let x1 = 2 * GAP + size;
        blit(sheet, sheet_w, x1, y0, &r.augmented, size, size);
        if let Some(t) = &r.targets {
            let cell = Cell {
                x0: x1,
                y0,
                w: size,
                h: size,
            };
            draw_targets(sheet, sheet_w, cell, t, (1.0, 1.0));
        }
        if let Some(m) = &r.mask {
            let x2 = 3 * GAP + 2 * size;
            blit(
                sheet,
                sheet_w,
                x2,
                y0,
                &overlay(&r.augmented, m),
                size,
                size,
            );
        }
    }
}

/// Draws the legend laid out below the rows (which end at `rows_h`): a swatch of each
/// class's colour, its id and name, and how many did not fit.
fn draw_legend(
    sheet: &mut [u8],
    (sheet_w, sheet_h): (usize, usize),
    legend: &[LegendEntry],
    rows_h: usize,
) {
    // The legend: a swatch of each class's colour, its id and name.
    let whole = Cell {
        x0: 0,
        y0: 0,
        w: sheet_w,
        h: sheet_h,
    };
    let mut last_line = rows_h;
    for e in legend {
        let Some([x, y]) = e.at else { continue };
        last_line = last_line.max(y);
        let (x, y) = (x as i64, y as i64);
        let c = class_colour(e.id);
        for dy in 0..8 {
            for dx in 0..8 {
                whole.put(sheet, sheet_w, (x + dx, y + dy), c);
            }
        }
        let label: String = e.label().chars().take(LEGEND_CHARS).collect();
        whole.text(sheet, sheet_w, (x + 12, y), &label, [235; 3]);
    }
    let hidden = legend.iter().filter(|e| e.at.is_none()).count();
    if hidden > 0 {
        let more = format!("... {hidden} more");
        let y = (last_line + LEGEND_LINE) as i64;
        whole.text(sheet, sheet_w, (GAP as i64, y), &more, [235; 3]);
    }
}

/// What the report says of each row: its sample, epoch, plan and targets.
fn row_reports(rows: &[Row], by_id: &HashMap<u64, Sample>) -> Vec<RowReport> {
    rows.iter()
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
                boxes: r.targets.as_ref().map_or_else(Vec::new, |t| {
                    t.boxes
                        .iter()
                        .map(|b| [b.x0, b.y0, b.x1, b.y1, b.class as f32])
                        .collect()
                }),
                keypoints: r.targets.as_ref().map_or_else(Vec::new, |t| {
                    t.keypoints
                        .iter()
                        .filter(|k| k.visibility > 0)
                        .map(|k| [k.x, k.y])
                        .collect()
                }),
            }
        })
        .collect()
}

pub fn render(_ctx: Ctx, a: &RenderArgs) -> Res<Report> {
    // Before the work: a sheet with nowhere to go is an error now, not after rendering.
    crate::ensure_parent(&a.out)?;
    let repeat = a.images.is_none() && a.manifest.is_none();
    let listing = stoker::ListingOptions::new().allow_outside_root(a.allow_outside_root);
    let data = match (&a.images, &a.manifest, &a.coco) {
        (_, Some(m), _) => Dataset::from_manifest_with(m, &listing)?,
        (Some(dir), None, Some(ann)) => Dataset::coco_with(ann, dir, &listing)?,
        (Some(dir), None, None) => {
            let d = common::open_dataset(dir)?;
            match &a.masks {
                Some(m) => d.with_masks(m)?,
                None => d,
            }
        }
        (None, None, _) => {
            let images = common::resolve_dir(None, MASK_IMAGES_DIR, "--images")?;
            let labels = common::resolve_dir(None, MASK_LABELS_DIR, "--images")?;
            Dataset::flat(images)?.with_masks(labels)?
        }
    };
    if data.is_empty() {
        return Err(fail(Cause::NoInput, "no images to render"));
    }
    let has_masks = data.samples().iter().any(|s| s.mask.is_some());
    let names = data.classes().to_vec();
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
                targets: batch.targets().get(slot).cloned().flatten(),
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
    let originals = originals(&rows, &by_id, a.size)?;

    let cols = if has_masks { 3 } else { 2 };
    let sheet_w = cols * size + (cols + 1) * GAP;
    let rows_h = rows.len() * size + (rows.len() + 1) * GAP;
    let mut legend = legend(&rows, &names);
    let sheet_h = rows_h + lay_out_legend(&mut legend, sheet_w - 2 * GAP, rows_h);
    let mut sheet = vec![BACKGROUND; sheet_w * sheet_h * 3];
    draw_rows(&mut sheet, sheet_w, &rows, &originals, &by_id, size);
    draw_legend(&mut sheet, (sheet_w, sheet_h), &legend, rows_h);
    crate::files::write_png_rgb(&a.out, sheet_w as u32, sheet_h as u32, &sheet)?;

    let rows = row_reports(&rows, &by_id);
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
        legend,
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

    #[test]
    fn outlines_and_text_stay_inside_their_cell() {
        let (w, h) = (20usize, 12usize);
        let mut sheet = vec![0u8; w * h * 3];
        let cell = Cell {
            x0: 2,
            y0: 1,
            w: 10,
            h: 8,
        };
        // A box running past the cell, text running past it.
        cell.outline(&mut sheet, w, [-3.0, 2.0, 40.0, 6.0], [9, 9, 9]);
        // The box's top edge (cell row 2) is drawn across the cell.
        assert!((2..12).all(|x| sheet[3 * (3 * w + x)] == 9));
        cell.text(&mut sheet, w, (4, 0), "WW", [7, 7, 7]);
        for y in 0..h {
            for x in 0..w {
                let inside = (2..12).contains(&x) && (1..9).contains(&y);
                if !inside {
                    assert_eq!(&sheet[3 * (y * w + x)..3 * (y * w + x) + 3], &[0; 3]);
                }
            }
        }
        // The text left pixels in the cell.
        assert!(sheet.chunks(3).any(|p| p == [7, 7, 7]));
    }
}

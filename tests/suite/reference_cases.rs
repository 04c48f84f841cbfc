//! The CPU reference against Pillow and torchvision: cases generated once by
//! `scripts/make_refs.py` (Pillow 13, torchvision 0.29) and committed under
//! `tests/data/refs/`. Every image pixel within +-1; label planes exact; normalised
//! values within 1e-5 (a few units in the last place). The affine warp: image pixels
//! within +-1 of torchvision's float32 `grid_sample`, at most 2 % of them off at all (the
//! 11-bit bilinear weights round differently on noise);
//! label planes exact but for at most 0.5 % of pixels (positions within rounding of a
//! pixel boundary, where torchvision's float32 grid and the exact fixed-point one may
//! round apart). Letterboxes (Pillow's resize pasted on a fill canvas): image pixels
//! within +-1, label planes exact; padded crops (torchvision's pad then crop): exact.
//! Grayscale, posterize, solarize, auto-contrast and equalize: exact; sharpness within
//! +-1; Gaussian blur within +-1 with at most 1 % of the values off (and a sequence
//! where an exact op follows a blur or sharpness: at most 1 % off). RandAugment's and
//! TrivialAugmentWide's magnitude tables: torchvision's float32 values bit for bit; their
//! ops applied one at a time through `policy::step`: colour ops as above, the warps as
//! the affine cases.

use crate::common::{self, max_diff};

use serde_json::Value;
use stoker::augment::plan::{
    factor_word, SamplePlan, AFFINE, ANTIALIAS, ERASE, JITTER, NORMALIZE, OP_AUTOCONTRAST, OP_BLUR,
    OP_BRIGHTNESS, OP_CONTRAST, OP_EQUALIZE, OP_GRAYSCALE, OP_HUE, OP_POSTERIZE, OP_SATURATION,
    OP_SHARPNESS, OP_SOLARIZE,
};
use stoker::augment::policy::{self, Policy, PolicyKind, PolicyOp, Step};
use stoker::augment::reference::{
    erase_slot, execute_image, execute_mask, jitter_rgb, resize_only, warp_rgb, write_slot, Scratch,
};
use stoker::augment::{
    affine_fixed, inverse_affine_matrix, inverse_affine_matrix_about, padded_crop, AffineParams,
};
use stoker::decode::{cpu, DecodeOptions, Image8, LabelPlane};
use stoker::{Augment, DType, Layout};

fn refs() -> std::path::PathBuf {
    common::data_dir().join("refs")
}

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(refs().join("cases.json")).expect("cases.json");
    let v: Value = serde_json::from_str(&text).expect("json");
    v["cases"].as_array().expect("cases").clone()
}

fn image(name: &str) -> Image8 {
    let bytes = std::fs::read(refs().join(name)).expect("png");
    let mut img = Image8::default();
    cpu::decode_image(&bytes, &DecodeOptions::default(), &mut img).expect("decode png");
    img
}

fn labels(name: &str) -> LabelPlane {
    let bytes = std::fs::read(refs().join(name)).expect("png");
    let mut p = LabelPlane::default();
    cpu::decode_mask(&bytes, &DecodeOptions::default(), &mut p).expect("decode labels");
    p
}

/// A plan with only geometry set: box, output size, antialias.
fn geometry(src: (u32, u32), b: [f64; 4], size: (u32, u32), antialias: bool) -> SamplePlan {
    let mut p = Augment::new()
        .resize(size.0, size.1)
        .plan(0, 0, 0, src.0, src.1);
    p.crop_x = b[0] as f32;
    p.crop_y = b[1] as f32;
    p.crop_w = (b[2] - b[0]) as f32;
    p.crop_h = (b[3] - b[1]) as f32;
    p.flags = if antialias { ANTIALIAS } else { 0 };
    p
}

/// The numbers of the array `v`, each read by `get` (which must take every one).
fn numbers<T>(v: &Value, get: fn(&Value) -> Option<T>) -> Vec<T> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| get(x).unwrap_or_else(|| panic!("not the number wanted: {x}")))
        .collect()
}

fn f64s(v: &Value) -> Vec<f64> {
    numbers(v, Value::as_f64)
}

/// The first three numbers of `v`, as f32s.
fn f32x3(v: &Value) -> [f32; 3] {
    let v = f64s(v);
    [v[0] as f32, v[1] as f32, v[2] as f32]
}

/// Little-endian f32s.
fn f32s(raw: &[u8]) -> Vec<f32> {
    raw.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn crop(img: &Image8, b: [f64; 4]) -> Image8 {
    let (x0, y0, x1, y1) = (b[0] as usize, b[1] as usize, b[2] as usize, b[3] as usize);
    let w = img.width as usize;
    let mut data = Vec::new();
    for y in y0..y1 {
        data.extend_from_slice(&img.data[(y * w + x0) * 3..(y * w + x1) * 3]);
    }
    Image8::new((x1 - x0) as u32, (y1 - y0) as u32, data)
}

/// Keeps, per `key`, the case with the largest difference (then share of values off).
fn note(
    worst: &mut std::collections::BTreeMap<String, (u8, f64, String)>,
    key: String,
    d: u8,
    off: usize,
    len: usize,
    case: &str,
) {
    let w = worst.entry(key).or_insert((0, 0.0, String::new()));
    let frac = off as f64 / len.max(1) as f64;
    if (d, frac) > (w.0, w.1) || w.2.is_empty() {
        *w = (d, frac, case.to_string());
    }
}

/// `plan` run over `src` whole: the output image.
fn executed(plan: &SamplePlan, src: &Image8) -> Vec<u8> {
    let mut got = vec![0u8; plan.image_bytes()];
    execute_image(plan, src, &mut got, &mut Scratch::default());
    got
}

/// Records a failure of case `name` unless `got` has `want`'s length and every value
/// within `tol` levels of it.
fn check_within(failures: &mut Vec<String>, name: &str, got: &[u8], want: &[u8], tol: u8) {
    let d = max_diff(got, want);
    if d > tol || got.len() != want.len() {
        failures.push(format!("{name}: max difference {d}"));
    }
}

/// Records a failure of case `name` unless `aug`, as NHWC bytes, turns all of `src` into
/// `want` within `tol` levels, its plan changed by `adjust` first.
fn check_executed(
    failures: &mut Vec<String>,
    name: &str,
    aug: Augment,
    (src, want): (&Image8, &Image8),
    tol: u8,
    adjust: impl FnOnce(&mut SamplePlan),
) {
    let mut plan = aug
        .dtype(DType::U8)
        .layout(Layout::Nhwc)
        .plan(0, 0, 0, src.width, src.height);
    adjust(&mut plan);
    check_within(failures, name, &executed(&plan, src), &want.data, tol);
}

/// Records a failure of case `name` unless `got` has `want`'s length and every value
/// within 1e-5 of it.
fn check_f32_within(failures: &mut Vec<String>, name: &str, got: &[f32], want: &[f32]) {
    let worst = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    if worst > 1e-5 || got.len() != want.len() {
        failures.push(format!("{name}: worst difference {worst:e}"));
    }
}

/// Records a failure of case `name` unless `plan` maps the labels `src` to `want` exactly.
fn check_labels_exact(
    failures: &mut Vec<String>,
    name: &str,
    plan: &SamplePlan,
    src: &LabelPlane,
    want: &LabelPlane,
) {
    let mut got = vec![0u16; want.data.len()];
    execute_mask(plan, src, &mut got);
    let wrong = got.iter().zip(&want.data).filter(|(a, b)| a != b).count();
    if wrong > 0 {
        failures.push(format!("{name}: {wrong} label pixels differ"));
    }
}

#[test]
fn reference_matches_pillow_and_torchvision() {
    let mut failures = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    // Per new op: the largest difference, the largest share of values off and where.
    let mut worst = std::collections::BTreeMap::new();
    for c in cases() {
        let name = c["name"].as_str().expect("name").to_string();
        let op = c["op"].as_str().expect("op");
        // Null for the cases without images (the policies' magnitude tables).
        let input = c["input"].as_str().unwrap_or_default();
        let output = c["output"].as_str().unwrap_or_default();
        let kind = match (op, c["filter"].as_str(), c["antialias"].as_bool()) {
            ("resize", Some("nearest"), _) => {
                let src = labels(input);
                let want = labels(output);
                let b = f64s(&c["box"]);
                let size = f64s(&c["size"]);
                let plan = geometry(
                    (src.width, src.height),
                    [b[0], b[1], b[2], b[3]],
                    (size[0] as u32, size[1] as u32),
                    false,
                );
                check_labels_exact(&mut failures, &name, &plan, &src, &want);
                "nearest"
            }
            ("resize", _, Some(antialias)) => {
                let mut src = image(input);
                let want = image(output);
                let b = f64s(&c["box"]);
                let mut b = [b[0], b[1], b[2], b[3]];
                if !antialias {
                    // torchvision crops first, then resizes the crop alone.
                    src = crop(&src, b);
                    b = [0.0, 0.0, f64::from(src.width), f64::from(src.height)];
                }
                let plan = geometry(
                    (src.width, src.height),
                    b,
                    (want.width, want.height),
                    antialias,
                );
                let got = resize_only(&plan, &src);
                check_within(&mut failures, &name, &got, &want.data, 1);
                if antialias {
                    "bilinear (Pillow)"
                } else {
                    "bilinear, no antialias (torchvision)"
                }
            }
            ("jitter", _, _) => {
                let src = image(input);
                let want = image(output);
                let mut plan = Augment::new().plan(0, 0, 0, src.width, src.height);
                plan.flags = JITTER;
                plan.jitter_order = 0;
                plan.jitter_order_hi = 0;
                plan.order_ext = [0; 2];
                for step in c["ops"].as_array().expect("ops") {
                    let f = || step[1].as_f64().expect("factor") as f32;
                    let (code, param) = match step[0].as_str().expect("op name") {
                        "grayscale" => (OP_GRAYSCALE, 0),
                        "posterize" => {
                            plan.color_params |= (f() as u32) << 8;
                            (OP_POSTERIZE, 0)
                        }
                        "solarize" => {
                            // The plan's threshold for integer values: the ceiling.
                            plan.color_params |= step[1].as_f64().expect("threshold").ceil() as u32;
                            (OP_SOLARIZE, 0)
                        }
                        // The jitter ops: each factor in a field of its own.
                        op @ ("brightness" | "contrast" | "saturation" | "hue") => {
                            let (field, code) = match op {
                                "brightness" => (&mut plan.brightness, OP_BRIGHTNESS),
                                "contrast" => (&mut plan.contrast, OP_CONTRAST),
                                "saturation" => (&mut plan.saturation, OP_SATURATION),
                                _ => (&mut plan.hue, OP_HUE),
                            };
                            *field = f();
                            (code, 0)
                        }
                        "autocontrast" => (OP_AUTOCONTRAST, 0),
                        "equalize" => (OP_EQUALIZE, 0),
                        "sharpness" => (OP_SHARPNESS, factor_word(f())),
                        "blur" => {
                            // [kx, ky, sigma], the same sigma along both axes.
                            let p = f64s(&step[1]);
                            plan.blur_size = p[0] as u32 | (p[1] as u32) << 16;
                            (OP_BLUR, factor_word(p[2] as f32))
                        }
                        other => panic!("{name}: unknown colour op {other:?}"),
                    };
                    assert!(plan.push_ops_with(&[(code, param)]), "{name}: too many ops");
                }
                let mut got = src.data.clone();
                jitter_rgb(&plan, &mut got, src.width as usize);
                let d = max_diff(&got, &want.data);
                let off = got.iter().zip(&want.data).filter(|(a, b)| a != b).count();
                let ops: Vec<u32> = plan.jitter_ops().collect();
                // Grayscale, posterize, solarize, auto-contrast and equalize are exact: a
                // case of them alone must match to the value, and so must a jitter before
                // them (a value one level off would pass a threshold unseen otherwise).
                // Sharpness is within one level, blur within one level for at most 1 % of
                // the values (torchvision's f32 convolutions against exact integer sums:
                // a value near a half may round the other way). After one of those, the
                // exact ops may carry a one-level difference further (a threshold, a
                // stretch, a histogram bin): such a sequence keeps the 1 % of values off,
                // without a bound on how far.
                let exact_op = |op: &u32| {
                    matches!(
                        *op,
                        OP_GRAYSCALE | OP_POSTERIZE | OP_SOLARIZE | OP_AUTOCONTRAST | OP_EQUALIZE
                    )
                };
                let filter_op = |op: &u32| *op == OP_SHARPNESS || *op == OP_BLUR;
                let first_filter = ops.iter().position(filter_op);
                let exact = ops.iter().any(exact_op);
                let ok = match first_filter {
                    None => d == 0 || (d == 1 && !exact),
                    Some(k) => {
                        let carried = ops[k..].iter().any(exact_op);
                        let blur = ops.contains(&OP_BLUR);
                        (d <= 1 || carried) && (!(blur || carried) || off * 100 <= got.len())
                    }
                };
                if !ok || got.len() != want.data.len() {
                    failures.push(format!(
                        "{name}: max difference {d}, {off} of {} values off",
                        got.len()
                    ));
                }
                if exact && first_filter.is_none() {
                    *counts.entry("colour ops, exact (torchvision)").or_default() += 1;
                }
                for (op, key, kind) in [
                    (
                        OP_AUTOCONTRAST,
                        "auto-contrast",
                        "auto-contrast (torchvision)",
                    ),
                    (OP_EQUALIZE, "equalize", "equalize (torchvision)"),
                    (OP_SHARPNESS, "sharpness", "sharpness (torchvision)"),
                    (OP_BLUR, "blur", "blur (torchvision)"),
                ] {
                    if ops.contains(&op) {
                        let key = if ops.len() == 1 {
                            key.to_string()
                        } else {
                            format!("{key}, in sequences")
                        };
                        note(&mut worst, key, d, off, got.len(), &name);
                        *counts.entry(kind).or_default() += 1;
                    }
                }
                "jitter (torchvision)"
            }
            ("normalize", _, _) => {
                let src = image(input);
                let raw = std::fs::read(refs().join(output)).expect("f32");
                let want = f32s(&raw);
                let plan = Augment::new()
                    .resize(src.width, src.height)
                    .normalize(f32x3(&c["mean"]), f32x3(&c["std"]))
                    .dtype(DType::F32)
                    .layout(Layout::Nchw)
                    .plan(0, 0, 0, src.width, src.height);
                assert!(plan.has(NORMALIZE));
                let mut out = vec![0u8; plan.image_bytes()];
                write_slot(&plan, &src.data, &mut out);
                check_f32_within(&mut failures, &name, &f32s(&out), &want);
                "normalize (torchvision)"
            }
            ("erase", _, _) => {
                let src = image(input);
                let b = f64s(&c["box"]);
                let value = f32x3(&c["value"]);
                let float = c.get("mean").is_some();
                let mut aug = Augment::new().resize(src.width, src.height);
                if float {
                    aug = aug.normalize(f32x3(&c["mean"]), f32x3(&c["std"]));
                }
                let mut plan = aug.plan(0, 0, 0, src.width, src.height);
                let [x, y, w, h] = [b[0], b[1], b[2], b[3]].map(|v| v as u32);
                plan.flags |= ERASE;
                plan.erase = [x | (x + w) << 16, y | (y + h) << 16];
                plan.erase_value = value;
                let mut out = vec![0u8; plan.image_bytes()];
                write_slot(&plan, &src.data, &mut out);
                erase_slot(&plan, &mut out);
                if float {
                    let raw = std::fs::read(refs().join(output)).expect("f32");
                    check_f32_within(&mut failures, &name, &f32s(&out), &f32s(&raw));
                } else {
                    // CHW in the batch, HWC in the PNG.
                    let want = image(output);
                    let npx = (src.width * src.height) as usize;
                    let hwc: Vec<u8> = (0..3 * npx).map(|i| out[(i % 3) * npx + i / 3]).collect();
                    if hwc != want.data {
                        failures.push(format!("{name}: differs"));
                    }
                }
                "erase (torchvision)"
            }
            ("affine", filter, _) => {
                let v = f64s(&c["translate"]);
                let sh = f64s(&c["shear"]);
                let fill = f64s(&c["fill"]);
                let params = AffineParams {
                    angle: c["angle"].as_f64().expect("angle"),
                    translate: (v[0], v[1]),
                    scale: c["scale"].as_f64().expect("scale"),
                    shear: (sh[0], sh[1]),
                };
                let affine_plan = |w: u32, h: u32| {
                    let mut plan = geometry((w, h), [0.0, 0.0, w.into(), h.into()], (w, h), false);
                    plan.flags |= AFFINE;
                    (plan.affine, plan.affine_frac) =
                        affine_fixed(&inverse_affine_matrix(&params), w, h);
                    plan
                };
                if filter == Some("nearest") {
                    let src = labels(input);
                    let want = labels(output);
                    let mut plan = affine_plan(src.width, src.height);
                    plan.mask_fill = fill[0] as u32;
                    let mut got = vec![0u16; want.data.len()];
                    execute_mask(&plan, &src, &mut got);
                    let wrong = got.iter().zip(&want.data).filter(|(a, b)| a != b).count();
                    if wrong * 200 > got.len() {
                        failures.push(format!(
                            "{name}: {wrong} of {} label pixels differ",
                            got.len()
                        ));
                    }
                    "affine nearest (torchvision)"
                } else {
                    let src = image(input);
                    let want = image(output);
                    let mut plan = affine_plan(src.width, src.height);
                    plan.fill =
                        u32::from_le_bytes([fill[0] as u8, fill[1] as u8, fill[2] as u8, 0]);
                    let mut got = Vec::new();
                    warp_rgb(&plan, &src.data, &mut got);
                    let d = max_diff(&got, &want.data);
                    let off = got.iter().zip(&want.data).filter(|(a, b)| a != b).count();
                    if d > 1 || off * 50 > got.len() || got.len() != want.data.len() {
                        failures.push(format!(
                            "{name}: max difference {d}, {off} of {} values off",
                            got.len()
                        ));
                    }
                    "affine bilinear (torchvision)"
                }
            }
            ("letterbox", filter, _) => {
                let size = f64s(&c["size"]);
                let fill = f64s(&c["fill"]);
                let (w, h) = (size[0] as u32, size[1] as u32);
                let aug = Augment::new()
                    .letterbox(w, h)
                    .fill([
                        fill[0] as u8,
                        fill[fill.len() / 2] as u8,
                        fill[fill.len() - 1] as u8,
                    ])
                    .mask_fill(fill[0] as u16);
                if filter == Some("nearest") {
                    let src = labels(input);
                    let want = labels(output);
                    let plan = aug
                        .dtype(DType::U8)
                        .layout(Layout::Nhwc)
                        .plan(0, 0, 0, src.width, src.height);
                    check_labels_exact(&mut failures, &name, &plan, &src, &want);
                    "letterbox nearest (Pillow)"
                } else {
                    let pair = (&image(input), &image(output));
                    check_executed(&mut failures, &name, aug, pair, 1, |_| {});
                    "letterbox bilinear (Pillow)"
                }
            }
            ("resize_center_crop", _, _) => {
                let size = f64s(&c["size"]);
                let r = c["resize"].as_u64().expect("resize") as u32;
                let aug = Augment::new()
                    .resize_center_crop(r, size[0] as u32)
                    .output_size(size[0] as u32, size[1] as u32);
                let pair = (&image(input), &image(output));
                check_executed(&mut failures, &name, aug, pair, 1, |_| {});
                "resize and centre crop (torchvision on Pillow)"
            }
            ("pad_crop", _, _) => {
                let src = image(input);
                let size = f64s(&c["size"]);
                let fill = f64s(&c["fill"]);
                let off = f64s(&c["offset"]);
                let p = c["padding"].as_u64().expect("padding") as u32;
                let (w, h) = (size[0] as u32, size[1] as u32);
                let aug = Augment::new().random_crop_padded(w, h, p).fill([
                    fill[0] as u8,
                    fill[1] as u8,
                    fill[2] as u8,
                ]);
                let (b, valid) = padded_crop(
                    (src.width, src.height),
                    (w, h),
                    p,
                    (off[0] as u64, off[1] as u64),
                );
                let pair = (&src, &image(output));
                check_executed(&mut failures, &name, aug, pair, 0, |plan| {
                    (plan.crop_x, plan.crop_y, plan.crop_w, plan.crop_h) =
                        (b[0] as f32, b[1] as f32, b[2] as f32, b[3] as f32);
                    plan.valid = valid;
                    plan.flags |= AFFINE;
                    (plan.affine, plan.affine_frac) = ([1 << 16, 0, 0, 0, 1 << 16, 0], [0; 2]);
                });
                "pad and crop (torchvision)"
            }
            ("policy_magnitudes", _, _) => {
                let bins = c["bins"].as_u64().expect("bins") as u32;
                let kind = match c["policy"].as_str().expect("policy") {
                    "RandAugment" => PolicyKind::RandAugment {
                        num_ops: 2,
                        magnitude: 0,
                    },
                    "TrivialAugmentWide" => PolicyKind::TrivialAugmentWide,
                    other => panic!("{name}: unknown policy {other:?}"),
                };
                let p = Policy { kind, bins };
                let size = f64s(&c["size"]);
                let (w, h) = (size[0] as u32, size[1] as u32);
                let table = c["magnitudes"].as_object().expect("magnitudes");
                let names: Vec<&str> = PolicyOp::ALL.iter().map(|op| op.name()).collect();
                // The same ops (serde_json's map may or may not keep the file's order).
                let mut keys: Vec<&str> = table.keys().map(String::as_str).collect();
                let mut sorted = names.clone();
                keys.sort_unstable();
                sorted.sort_unstable();
                if keys != sorted {
                    failures.push(format!("{name}: ops {keys:?}, stoker's {names:?}"));
                }
                let mut wrong = Vec::new();
                for op in PolicyOp::ALL {
                    let Some(want) = table.get(op.name()) else {
                        continue;
                    };
                    let got: Vec<Option<u32>> = (0..bins)
                        .map(|b| p.magnitude(op, b, w, h).map(f32::to_bits))
                        .collect();
                    let want: Vec<Option<u32>> = match want.as_array() {
                        None => {
                            assert!(want.is_null(), "{name}: {} table", op.name());
                            vec![None; bins as usize]
                        }
                        Some(v) => v
                            .iter()
                            .map(|x| {
                                let s = x.as_str().expect("f32 bits");
                                Some(u32::from_str_radix(s, 16).expect("hex"))
                            })
                            .collect(),
                    };
                    for (b, (g, t)) in got.iter().zip(&want).enumerate() {
                        if g != t {
                            let show = |v: &Option<u32>| {
                                v.map_or("None".into(), |v| {
                                    format!("{v:08x} ({:?})", f32::from_bits(v))
                                })
                            };
                            wrong.push(format!(
                                "{} bin {b}: {} not {}",
                                op.name(),
                                show(g),
                                show(t)
                            ));
                        }
                    }
                    if got.len() != want.len() {
                        wrong.push(format!("{}: {} magnitudes", op.name(), want.len()));
                    }
                }
                if !wrong.is_empty() {
                    failures.push(format!(
                        "{name}: {} magnitudes differ: {}",
                        wrong.len(),
                        wrong.join("; ")
                    ));
                }
                "policy magnitudes (torchvision)"
            }
            ("policy_op", _, _) => {
                let src = image(input);
                let want = image(output);
                let transform = c["transform"].as_str().expect("transform");
                let op = *PolicyOp::ALL
                    .iter()
                    .find(|op| op.name() == transform)
                    .unwrap_or_else(|| panic!("{name}: unknown op {transform:?}"));
                // The f64 torchvision was given: a float32 value, its sign included.
                let bits = c["magnitude_bits"].as_str().expect("magnitude_bits");
                let m = f64::from(f32::from_bits(u32::from_str_radix(bits, 16).expect("hex")));
                let fill = f64s(&c["fill"]);
                let (w, h) = (src.width, src.height);
                let mut plan = geometry((w, h), [0.0, 0.0, w.into(), h.into()], (w, h), false);
                let mut got = src.data.clone();
                let (exact, geometric) = match policy::step(op, m, w, h) {
                    Step::None => (true, false),
                    Step::Colour(code, param) => {
                        plan.flags = JITTER;
                        plan.jitter_order = 0;
                        plan.jitter_order_hi = 0;
                        plan.order_ext = [0; 2];
                        assert!(plan.push_ops_with(&[(code, param)]), "{name}");
                        jitter_rgb(&plan, &mut got, w as usize);
                        let exact = matches!(
                            code,
                            OP_POSTERIZE | OP_SOLARIZE | OP_AUTOCONTRAST | OP_EQUALIZE
                        );
                        (exact, false)
                    }
                    Step::Warp(params, centre) => {
                        plan.flags |= AFFINE;
                        (plan.affine, plan.affine_frac) =
                            affine_fixed(&inverse_affine_matrix_about(&params, centre), w, h);
                        plan.fill =
                            u32::from_le_bytes([fill[0] as u8, fill[1] as u8, fill[2] as u8, 0]);
                        warp_rgb(&plan, &src.data, &mut got);
                        (false, true)
                    }
                };
                let d = max_diff(&got, &want.data);
                let off = got.iter().zip(&want.data).filter(|(a, b)| a != b).count();
                // Colour ops as in the jitter cases; the warps as the affine cases.
                let ok = if geometric {
                    d <= 1 && off * 50 <= got.len()
                } else {
                    d == 0 || (d == 1 && !exact)
                };
                if !ok || got.len() != want.data.len() {
                    failures.push(format!(
                        "{name}: max difference {d}, {off} of {} values off (magnitude {m})",
                        got.len()
                    ));
                }
                note(
                    &mut worst,
                    format!("policy {transform}"),
                    d,
                    off,
                    got.len(),
                    &name,
                );
                "policy ops (torchvision)"
            }
            other => panic!("unknown case kind {other:?} in {name}"),
        };
        *counts.entry(kind).or_insert(0) += 1;
    }
    println!("{counts:?}");
    for (key, (d, frac, case)) in &worst {
        println!(
            "{key}: worst difference {d}, at most {:.2} % of values off ({case})",
            100.0 * frac
        );
    }
    let at_least = [
        ("colour ops, exact (torchvision)", 30),
        ("auto-contrast (torchvision)", 10),
        ("equalize (torchvision)", 10),
        ("sharpness (torchvision)", 10),
        ("blur (torchvision)", 16),
        ("policy magnitudes (torchvision)", 16),
        ("policy ops (torchvision)", 40),
    ];
    assert!(
        counts.values().sum::<usize>() >= 100
            && at_least
                .iter()
                .all(|(k, n)| counts.get(k).copied().unwrap_or(0) >= *n),
        "too few cases: {counts:?}"
    );
    assert!(
        failures.is_empty(),
        "{} of the cases fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn arb_image() -> impl Strategy<Value = Image8> {
        (1u32..48, 1u32..48).prop_flat_map(|(w, h)| {
            prop::collection::vec(any::<u8>(), (w * h * 3) as usize)
                .prop_map(move |d| Image8::new(w, h, d))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The identity box and size give back the input, with and without antialias.
        #[test]
        fn identity_resize_is_identity(img in arb_image(), aa in any::<bool>()) {
            let b = [0.0, 0.0, f64::from(img.width), f64::from(img.height)];
            let plan = geometry((img.width, img.height), b, (img.width, img.height), aa);
            prop_assert_eq!(resize_only(&plan, &img), img.data.clone());
        }

        /// A flat image stays flat whatever the box and size (weights sum to one).
        #[test]
        fn flat_images_stay_flat(
            w in 1u32..64, h in 1u32..64, v in any::<[u8; 3]>(), ow in 1u32..80, oh in 1u32..80,
            bx in 0.0f64..1.0, by in 0.0f64..1.0, bw in 0.05f64..1.0, bh in 0.05f64..1.0, aa in any::<bool>(),
        ) {
            let img = Image8::new(w, h, v.iter().copied().cycle().take((w * h * 3) as usize).collect());
            let (fw, fh) = (f64::from(w), f64::from(h));
            let x0 = bx * fw * (1.0 - bw);
            let y0 = by * fh * (1.0 - bh);
            let plan = geometry((w, h), [x0, y0, x0 + bw * fw, y0 + bh * fh], (ow, oh), aa);
            let out = resize_only(&plan, &img);
            prop_assert_eq!(out.len(), (ow * oh * 3) as usize);
            for px in out.chunks_exact(3) {
                prop_assert_eq!(px, &v[..]);
            }
        }

        /// Jitter with neutral factors changes nothing, in any order.
        #[test]
        fn neutral_jitter_is_identity(img in arb_image(), order in 0u32..24) {
            let mut plan = Augment::new().plan(0, 0, 0, img.width, img.height);
            plan.flags = JITTER;
            let mut ops = vec![OP_BRIGHTNESS, OP_CONTRAST, OP_SATURATION, OP_HUE];
            let mut k = order;
            plan.jitter_order = 0;
            for i in 0..4 {
                let j = (k % (4 - i)) as usize;
                k /= 4 - i;
                plan.jitter_order |= ops.remove(j) << (8 * i);
            }
            let mut got = img.data.clone();
            jitter_rgb(&plan, &mut got, img.width as usize);
            prop_assert_eq!(got, img.data.clone());
        }
    }
}

fn hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().expect("hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// MixUp and CutMix against torchvision.transforms.v2's (`scripts/make_mix_refs.py`,
/// `tests/data/mix/`): with torchvision's weight and box centre, CutMix's box and
/// weight, the mixed batch (f32, f16, u8) and the soft labels are torchvision's bit for
/// bit. The cases are NCHW; each is also run as NHWC, which must mix the same elements.
#[test]
fn mixup_and_cutmix_match_torchvision() {
    use stoker::augment::mix::{apply, cutmix_box, soft_labels, BatchMix, MixKind};
    let text =
        std::fs::read_to_string(common::data_dir().join("mix/cases.json")).expect("cases.json");
    let doc: Value = serde_json::from_str(&text).expect("json");
    let classes = doc["classes"].as_u64().expect("classes") as usize;
    let cases = doc["cases"].as_array().expect("cases");
    let mut seen = std::collections::BTreeSet::new();
    for (k, c) in cases.iter().enumerate() {
        let shape: Vec<usize> = numbers(&c["shape"], Value::as_u64)
            .iter()
            .map(|&d| d as usize)
            .collect();
        let (n, h, w) = (shape[0], shape[2], shape[3]);
        let dtype = match c["dtype"].as_str().expect("dtype") {
            "uint8" => DType::U8,
            "float16" => DType::F16,
            _ => DType::F32,
        };
        let bits = |key: &str| {
            let b = hex(&c[key]);
            f64::from_le_bytes(b.try_into().expect("8 bytes"))
        };
        let lam = bits("lam_bits");
        let mix = if c["op"] == "mixup" {
            BatchMix {
                kind: MixKind::MixUp,
                lambda: lam,
                rect: [0; 4],
            }
        } else {
            let (rx, ry) = (
                c["r_x"].as_u64().expect("r_x"),
                c["r_y"].as_u64().expect("r_y"),
            );
            let m = cutmix_box(lam, rx as u32, ry as u32, w as u32, h as u32);
            let want: Vec<u32> = numbers(&c["box"], Value::as_u64)
                .iter()
                .map(|&v| v as u32)
                .collect();
            assert_eq!(m.rect.to_vec(), want, "case {k}: box");
            assert_eq!(m.lambda, bits("lam_adjusted_bits"), "case {k}");
            m
        };
        seen.insert(format!("{:?} {dtype:?}", mix.kind));
        let input = hex(&c["input"]);
        let want = hex(&c["output"]);
        let mut got = input.clone();
        apply(&mix, &mut got, dtype, Layout::Nchw, n, w, h).expect("apply");
        assert!(
            got == want,
            "case {k} ({} {dtype:?}): differs from torchvision",
            c["op"]
        );
        // NHWC: the same elements, permuted.
        let size = dtype.size();
        let nhwc = |nchw: &[u8]| {
            let mut out = vec![0u8; nchw.len()];
            for s in 0..n {
                for ch in 0..3 {
                    for p in 0..h * w {
                        let from = ((s * 3 + ch) * h * w + p) * size;
                        let to = ((s * h * w + p) * 3 + ch) * size;
                        out[to..to + size].copy_from_slice(&nchw[from..from + size]);
                    }
                }
            }
            out
        };
        let mut got = nhwc(&input);
        apply(&mix, &mut got, dtype, Layout::Nhwc, n, w, h).expect("apply");
        assert!(got == nhwc(&want), "case {k}: NHWC differs");
        let labels: Vec<Option<u32>> = c["labels"]
            .as_array()
            .expect("labels")
            .iter()
            .map(|v| Some(v.as_u64().expect("label") as u32))
            .collect();
        let soft = soft_labels(&labels, classes, Some(&mix)).expect("soft labels");
        assert_eq!(soft, f32s(&hex(&c["soft_labels"])), "case {k}: soft labels");
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
}

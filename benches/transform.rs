//! The training transform, per core and on all cores, without pipeline threads:
//! decode + random resized crop 224 + horizontal flip + normalise to f32 NCHW, crop-aware
//! decode on and off, and crop-aware with each file's crop index (made by an untimed
//! first decode, as the pipeline's first epoch makes it), also writing a batch's
//! worth of outputs in turn rather than one, and the augment alone (the crops decoded
//! beforehand), on the same files: `cargo bench --bench transform`.

mod common;

use stoker::augment::reference::{execute_image, Scratch};
use stoker::decode::crop_index::{self, CropAid};
use stoker::decode::{cpu, peek_info, DecodeOptions, Image8};
use stoker::{Augment, DType, Layout};

/// The rows: name, crop-aware, with the crop index, output buffers written in turn (one
/// reused, which stays in the cache; or a batch of 32, 19 MB of 224x224 f32 images, which
/// goes to memory as the pipeline's batches do).
const VARIANTS: [(&str, bool, bool, usize); 4] = [
    ("crop-aware decode + augment, crop index", true, true, 1),
    (
        "crop-aware decode + augment, crop index, batch",
        true,
        true,
        32,
    ),
    ("crop-aware decode + augment", true, false, 1),
    ("whole decode + augment", false, false, 1),
];

fn main() {
    let (dir, files) = common::images();
    let n = files.len();
    println!("transform: {n} JPEGs from {}\n", dir.display());
    let min = common::min_duration();
    let aug = |crop_aware: bool| {
        Augment::new()
            .random_resized_crop(224, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
            .flip_horizontal(0.5)
            .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
            .dtype(DType::F32)
            .layout(Layout::Nchw)
            .crop_aware(crop_aware)
    };
    let aids = crop_aids(&files, &aug(true));
    // The augment-alone row's inputs, decoded once for every thread count.
    let crops = decoded_crops(&files, &aug(true));
    println!("{:<52} {:>7} {:>10}", "transform", "threads", "images/s");
    for threads in common::thread_counts() {
        for (name, crop_aware, indexed, ring) in VARIANTS {
            let a = aug(crop_aware);
            let epoch = std::sync::atomic::AtomicU64::new(0);
            let rate = common::throughput(
                n,
                threads,
                min,
                || {
                    (
                        Image8::default(),
                        Scratch::default(),
                        vec![vec![0u8; a.bytes_per_image()]; ring],
                        0usize,
                    )
                },
                |(img, scratch, outs, next), i| {
                    *next = (*next + 1) % outs.len();
                    let out = &mut outs[*next];
                    let e = epoch.fetch_add(1, std::sync::atomic::Ordering::Relaxed) / n as u64;
                    let Ok(info) = peek_info(&files[i]) else {
                        return;
                    };
                    let (w, h) = info.oriented_size();
                    let plan = a.plan(1, e, i as u64, w, h);
                    let opts = if crop_aware {
                        plan.decode_options(DecodeOptions::default(), &info)
                    } else {
                        DecodeOptions::default()
                    };
                    let decoded =
                        indexed && crop_index::decode_with(&files[i], &opts, img, &aids[i]);
                    if decoded || cpu::decode_image(&files[i], &opts, img).is_ok() {
                        execute_image(&plan, img, out, scratch);
                    }
                },
            );
            println!("{name:<52} {threads:>7} {rate:>10.1}");
        }
        // The augment alone: each file's epoch-0 crop decoded beforehand (crop-aware), so
        // only the resize, flip, normalise and write are timed, into a batch's worth of
        // outputs in turn.
        let a = aug(true);
        let rate = common::throughput(
            crops.len(),
            threads,
            min,
            || {
                (
                    Scratch::default(),
                    vec![vec![0u8; a.bytes_per_image()]; 32],
                    0usize,
                )
            },
            |(scratch, outs, next), i| {
                *next = (*next + 1) % outs.len();
                let (plan, img) = &crops[i];
                execute_image(plan, img, &mut outs[*next], scratch);
            },
        );
        let name = "augment alone (crops decoded beforehand), batch";
        println!("{name:<52} {threads:>7} {rate:>10.1}");
    }
}

/// File `i`'s epoch-0 plan (seed 1) and the decode options it gives (crop-aware when `a`
/// is); `None` where its header does not read.
fn epoch0(a: &Augment, i: usize, bytes: &[u8]) -> Option<(stoker::SamplePlan, DecodeOptions)> {
    let info = peek_info(bytes).ok()?;
    let (w, h) = info.oriented_size();
    let plan = a.plan(1, 0, i as u64, w, h);
    let opts = plan.decode_options(DecodeOptions::default(), &info);
    Some((plan, opts))
}

/// Each file's epoch-0 plan and its crop, decoded crop-aware.
fn decoded_crops(files: &[Vec<u8>], a: &Augment) -> Vec<(stoker::SamplePlan, Image8)> {
    files
        .iter()
        .enumerate()
        .filter_map(|(i, bytes)| {
            let (plan, opts) = epoch0(a, i, bytes)?;
            let mut img = Image8::default();
            cpu::decode_image(bytes, &opts, &mut img).ok()?;
            Some((plan, img))
        })
        .collect()
}

/// Each file's crop index, as the pipeline makes it: by its first decode (judging the
/// file whole, recording a row index or making a progressive file's copy), for the crop
/// of epoch 0.
fn crop_aids(files: &[Vec<u8>], a: &Augment) -> Vec<CropAid> {
    files
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let Some((_, opts)) = epoch0(a, i, bytes) else {
                return CropAid::default();
            };
            let mut img = Image8::default();
            crop_index::decode_first(bytes, &opts, &mut img, true)
                .map(|(_, aid)| aid)
                .unwrap_or_default()
        })
        .collect()
}

//! The training transform, per core and on all cores, without pipeline threads:
//! decode + random resized crop 224 + horizontal flip + normalise to f32 NCHW, crop-aware
//! decode on and off, on the same files: `cargo bench --bench transform`.

mod common;

use stoker::augment::reference::{execute_image, Scratch};
use stoker::decode::{cpu, peek_info, DecodeOptions, Image8};
use stoker::{Augment, DType, Layout};

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
    println!("{:<34} {:>7} {:>10}", "transform", "threads", "images/s");
    for threads in common::thread_counts() {
        for crop_aware in [true, false] {
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
                        vec![0u8; a.bytes_per_image()],
                    )
                },
                |(img, scratch, out), i| {
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
                    if cpu::decode_image(&files[i], &opts, img).is_ok() {
                        execute_image(&plan, img, out, scratch);
                    }
                },
            );
            let name = if crop_aware {
                "crop-aware decode + augment"
            } else {
                "whole decode + augment"
            };
            println!("{name:<34} {threads:>7} {rate:>10.1}");
        }
    }
}

//! What the one thread that plans device batches spends on each: `cargo bench --bench
//! upload`. The images are entropy-decoded to coefficients first (not timed), then cut
//! into batches of 64; each batch is planned ([`BatchPlan::plan_decode`]) and its upload
//! written into a reused host buffer ([`BatchPlan::write_upload`]), two ways, alternated
//! over several rounds in one run:
//!
//! - *planner packs*: the samples hold coefficients ([`DeviceSample::Jpeg`]); the planning
//!   thread packs each window's blocks into the batch's blob, which is then written into
//!   staging (what the device path did before its workers packed, but for the staging
//!   write, which it did on one thread);
//! - *workers packed*: the samples were packed by the threads that prepared them
//!   ([`DeviceSample::packed`], timed separately below as the workers' share); the
//!   planning thread writes the records and the payloads go into staging once, straight
//!   from the samples.
//!
//! Both write staging the same way: in ranges, several threads at once on a large batch.
//!
//! Prints microseconds of the planning thread per image both ways and their ratio, what
//! packing costs a worker per image, and, for files with restart markers, the planning
//! thread's time per image on the device entropy path.

mod common;

use std::time::Instant;

use stoker::backend::device::job::{prepare_device, EntropyPaths, HardwareDecode};
use stoker::backend::device::{BatchPlan, CoeffPool, DeviceLimits, DeviceSample};
use stoker::decode::jpeg::coeffs::{pack, PackedJpeg};
use stoker::decode::DecodeOptions;

const BATCH: usize = 64;

fn main() {
    let (dir, files) = common::images();
    let pool = CoeffPool::default();
    let opts = DecodeOptions::default();
    let jpegs: Vec<DeviceSample> = files
        .iter()
        .filter_map(|b| stoker::backend::device::prepare_reusing(b, &opts, &pool).ok())
        .filter(|p| p.cpu_reason.is_none())
        .map(|p| p.image)
        .filter(|s| matches!(s, DeviceSample::Jpeg { .. }))
        .collect();
    let n = jpegs.len();
    println!(
        "upload: {n} JPEGs on the device path from {} (of {}), batches of {BATCH}\n",
        dir.display(),
        files.len()
    );
    if n == 0 {
        return;
    }
    let packed: Vec<DeviceSample> = jpegs
        .iter()
        .filter_map(|s| match s {
            DeviceSample::Jpeg {
                coeffs,
                scale,
                window,
                orientation,
            } => DeviceSample::Jpeg {
                coeffs: coeffs.clone(),
                scale: *scale,
                window: *window,
                orientation: *orientation,
            }
            .packed(&pool)
            .ok(),
            _ => None,
        })
        .collect();
    // The workers' share: packing a sample into a reused buffer (the pool's, in the
    // pipeline), per image.
    let mut buf = PackedJpeg::default();
    let mut pack_round = || {
        let t = Instant::now();
        for s in &jpegs {
            if let DeviceSample::Jpeg {
                coeffs,
                scale,
                window,
                ..
            } = s
            {
                let _ = pack(coeffs, *scale, *window, &mut buf);
            }
        }
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    };
    // Files with restart markers (`stoker convert` writes them): the device entropy path,
    // whose entropy-coded bytes go into staging as the packed blocks do.
    let entropy: Vec<DeviceSample> = files
        .iter()
        .filter_map(|b| {
            let info = stoker::decode::peek_info(b).ok()?;
            prepare_device(
                b,
                info,
                &opts,
                &pool,
                HardwareDecode::Off,
                EntropyPaths::RESTART,
                1 << 31,
            )
            .ok()
        })
        .map(|p| p.image)
        .filter(|s| matches!(s, DeviceSample::Entropy { .. }))
        .collect();
    let mut plan = BatchPlan::new(DeviceLimits::UNBOUNDED);
    let mut staging: Vec<u8> = Vec::new();
    let mut round = |samples: &[DeviceSample]| -> f64 {
        let t = Instant::now();
        for batch in samples.chunks(BATCH) {
            if plan.plan_decode(batch.iter()).is_err() {
                continue;
            }
            staging.resize(plan.sizes().upload as usize, 0);
            let _ = plan.write_upload(&mut staging.as_mut_slice(), &|k| batch.get(k));
        }
        t.elapsed().as_secs_f64() * 1e6 / samples.len() as f64
    };
    let rounds = if common::min_duration().is_zero() {
        1
    } else {
        5
    };
    let (mut a, mut b, mut w, mut e) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(round(&jpegs));
        b.push(round(&packed));
        w.push(pack_round());
        if !entropy.is_empty() {
            e.push(round(&entropy));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (a, b, pack_us) = (median(&mut a), median(&mut b), median(&mut w));
    let counts = plan.counts();
    println!(
        "{:<58} {:>12}",
        "planning thread, per image (median of rounds)", "us/image"
    );
    println!(
        "{:<58} {a:>12.1}",
        "planner packs (pack, blob, copy into staging)"
    );
    println!(
        "{:<58} {b:>12.1}",
        "workers packed (records; payloads copied once, spread)"
    );
    println!(
        "ratio: {:.2}x less planning-thread time per image",
        a / b.max(1e-9)
    );
    println!("workers' share: packing into a reused buffer, {pack_us:.1} us per image");
    println!(
        "payload bytes of the last rounds: {} of {} uploaded",
        counts.payload_bytes, counts.upload_bytes
    );
    if !entropy.is_empty() {
        println!(
            "{:<58} {:>12.1}",
            format!(
                "device entropy path ({} files with restart markers)",
                entropy.len()
            ),
            median(&mut e)
        );
    }
}

//! nvJPEG's hardware decoder on a GPU, against the CPU decoder:
//!
//! - each decode path (the engines through `pack_planar`, the hybrid path) on every test
//!   JPEG, by sampling (4:4:4, 4:2:2, 4:2:0, greyscale): the largest and mean difference
//!   from the CPU decoder, and which decoder took the files;
//! - ordering: a slow kernel on the consumer's stream holds back each batch's kernels
//!   while the engines decode the next batches, over 50 rounds; every batch must equal the
//!   CPU backend's.
//!
//! - nvJPEG on the card: its version, whether the hardware backend was created, and its
//!   engine and core counts.
//!
//! With `STOKER_CHECK_OUT` set (the GPU check sets it), the figures go to `nvjpeg.json`,
//! `decode_paths.json` and `ordering.json` there. Skipped where there is no CUDA device;
//! `STOKER_REQUIRE_CUDA=1` makes that a failure.
#![cfg(feature = "cuda")]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use stoker::backend::cuda::batch::CudaBatcher;
use stoker::backend::cuda::cudarc::driver::{LaunchConfig, PushKernelArg};
use stoker::backend::cuda::cudarc::nvrtc::compile_ptx;
use stoker::backend::cuda::nvjpeg;
use stoker::backend::cuda::CudaDevice;
use stoker::backend::device::job::{prepare_with, HardwareDecode};
use stoker::backend::device::{CoeffPool, DeviceSample};
use stoker::decode::jpeg::markers::sampling_factors;
use stoker::decode::{cpu, peek_info, DecodeOptions, Image8};
use stoker::{Augment, BackendKind, DType, Dataset, Pipeline};

/// Largest per-channel difference from the CPU decoder on the hybrid path.
const HYBRID_TOLERANCE: u8 = 2;
/// On the engines: their IDCT is not libjpeg's; subsampled chroma, converted to RGB,
/// carries that difference into up to two channels.
const HARDWARE_TOLERANCE: u8 = 4;

/// The tolerance of a decode path for a sampling class.
fn tolerance(path: &str, class: &str) -> u8 {
    if path == "hardware" && !matches!(class, "444" | "gray") {
        HARDWARE_TOLERANCE
    } else {
        HYBRID_TOLERANCE
    }
}

fn write_figures(name: &str, value: &serde_json::Value) {
    if let Some(dir) = std::env::var_os("STOKER_CHECK_OUT") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("figures folder");
        let text = serde_json::to_string_pretty(value).expect("json");
        std::fs::write(dir.join(format!("{name}.json")), text).expect("write figures");
    }
}

/// A batcher that asks for the decode engines in batches of `engine_batch`, and whether
/// they opened.
fn engine_batcher(device: &CudaDevice, engine_batch: usize) -> (CudaBatcher, bool) {
    let batcher = CudaBatcher::new(device, 2)
        .expect("batcher")
        .with_hardware_decode(HardwareDecode::Exact, engine_batch);
    let engines = batcher.hardware_decode() != HardwareDecode::Off;
    (batcher, engines)
}

/// Writes `figures`, with the device, whether the engines opened, the decode paths taken
/// and the failures added, as `name`; then fails on any failure, or when the engines
/// opened and took nothing.
fn report(
    name: &str,
    device: &CudaDevice,
    batcher: &CudaBatcher,
    mut figures: serde_json::Value,
    failures: &[String],
) {
    let engines = batcher.hardware_decode() != HardwareDecode::Off;
    let paths = batcher.decode_paths();
    let fields = figures.as_object_mut().expect("figures are an object");
    fields.insert("device".into(), device.name().into());
    fields.insert("engines".into(), engines.into());
    fields.insert("paths".into(), serde_json::json!(paths));
    fields.insert("failures".into(), serde_json::json!(failures));
    write_figures(name, &figures);
    assert!(failures.is_empty(), "{failures:#?}");
    if engines {
        assert!(paths.hardware > 0, "nothing took the engines: {paths:?}");
    }
}

fn sampling_name(bytes: &[u8]) -> &'static str {
    match sampling_factors(bytes).as_deref() {
        Some([_]) => "gray",
        Some([(1, 1), (1, 1), (1, 1)]) => "444",
        Some([(2, 1), (1, 1), (1, 1)]) => "422",
        Some([(2, 2), (1, 1), (1, 1)]) => "420",
        Some([(1, 2), (1, 1), (1, 1)]) => "440",
        _ => "other",
    }
}

fn jpegs() -> Vec<PathBuf> {
    let mut files = common::decode_test_jpegs();
    common::files_below(&common::data_dir().join("samples"), &mut files);
    if let Some(c) = common::corpus_dir() {
        common::files_below(&c.join("photos"), &mut files);
    }
    files.retain(|f| f.extension().is_some_and(|e| e.eq_ignore_ascii_case("jpg")));
    files.sort();
    files.dedup();
    files
}

#[derive(Default)]
struct Diff {
    files: usize,
    max: u8,
    sum: f64,
    values: f64,
}

impl Diff {
    fn add(&mut self, a: &Image8, b: &Image8) {
        self.files += 1;
        for (x, y) in a.data.iter().zip(&b.data) {
            let d = x.abs_diff(*y);
            self.max = self.max.max(d);
            self.sum += f64::from(d);
        }
        self.values += a.data.len() as f64;
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "files": self.files,
            "max": self.max,
            "mean": self.sum / self.values.max(1.0),
        })
    }
}

#[test]
fn each_decode_path_against_the_cpu_decoder() {
    let Some(device) = common::cuda_device() else {
        return;
    };
    let (mut batcher, engines) = engine_batcher(&device, 16);
    let pool = CoeffPool::default();
    let opts = DecodeOptions::default();
    let mut diffs: BTreeMap<(String, &str), Diff> = BTreeMap::new();
    // Collected, not asserted at once: the figures are written first.
    let mut failures: Vec<String> = Vec::new();
    for f in jpegs() {
        let bytes = std::fs::read(&f).expect("read");
        if peek_info(&bytes).is_err() {
            continue;
        }
        let mut want = Image8::default();
        if cpu::decode_image(&bytes, &opts, &mut want).is_err() {
            continue;
        }
        let class = sampling_name(&bytes);
        for (path, policy) in [
            ("hardware", HardwareDecode::Exact),
            ("hybrid", HardwareDecode::Off),
        ] {
            if path == "hardware" && !engines {
                continue;
            }
            let p = prepare_with(&bytes, &opts, &pool, policy).expect("prepares");
            let encoded = matches!(p.image, DeviceSample::Encoded { .. });
            if (path == "hardware") != encoded {
                continue;
            }
            let got = match batcher.decode_to_host(std::slice::from_ref(&p.image)) {
                Ok(mut got) if got.len() == 1 => got.pop().expect("one image"),
                Ok(got) => {
                    failures.push(format!("{}: {} images back", f.display(), got.len()));
                    continue;
                }
                Err(e) => {
                    failures.push(format!("{} ({class}, {path}): {e}", f.display()));
                    continue;
                }
            };
            if (got.width, got.height) != (want.width, want.height) {
                failures.push(format!("{}: size differs", f.display()));
                continue;
            }
            let d = diffs.entry((path.to_string(), class)).or_default();
            d.add(&got, &want);
            let worst = d.max;
            if worst > tolerance(path, class) {
                failures.push(format!(
                    "{} ({class}, {path}): {worst} levels from the CPU decoder",
                    f.display()
                ));
            }
        }
    }
    let paths = batcher.decode_paths();
    let mut table = serde_json::Map::new();
    for ((path, class), d) in &diffs {
        println!(
            "{path:>8} {class:>5}: {:>4} files, max {:>2}, mean {:.4}",
            d.files,
            d.max,
            d.sum / d.values.max(1.0)
        );
        table.insert(format!("{path}/{class}"), d.json());
    }
    println!("decode paths: {paths:?}");
    let figures = serde_json::json!({ "differences": table });
    report("decode_paths", &device, &batcher, figures, &failures);
    if engines {
        assert!(
            diffs.keys().any(|(p, c)| p == "hardware" && *c == "420"),
            "no 4:2:0 file took the engines"
        );
    }
}

/// Images per engine batch in [`many_sizes_in_one_engine_batch`].
const ENGINE_BATCH: usize = 16;

/// Many images of different sizes and samplings in each engine batch, each compared
/// with the CPU decoder: a decoder writing past one image's planes (rows padded to whole
/// MCUs) would corrupt a neighbour, or trip the guard bytes after each plane.
#[test]
fn many_sizes_in_one_engine_batch() {
    let Some(device) = common::cuda_device() else {
        return;
    };
    let (mut batcher, engines) = engine_batcher(&device, ENGINE_BATCH);
    let pool = CoeffPool::default();
    let opts = DecodeOptions::default();
    // Every file the engines would take, with its CPU decode.
    let (mut cases, mut samples) = (Vec::new(), Vec::new());
    for f in jpegs() {
        let bytes = std::fs::read(&f).expect("read");
        let mut want = Image8::default();
        if peek_info(&bytes).is_err() || cpu::decode_image(&bytes, &opts, &mut want).is_err() {
            continue;
        }
        let Ok(p) = prepare_with(&bytes, &opts, &pool, HardwareDecode::Exact) else {
            continue;
        };
        if matches!(p.image, DeviceSample::Encoded { .. }) {
            cases.push((f, sampling_name(&bytes), want));
            samples.push(p.image);
        }
    }
    let mut failures: Vec<String> = Vec::new();
    let (mut batches, mut images, mut most_sizes, mut worst) = (0, 0, 0, 0u8);
    for (chunk, samples) in cases.chunks(ENGINE_BATCH).zip(samples.chunks(ENGINE_BATCH)) {
        let sizes: std::collections::BTreeSet<_> =
            chunk.iter().map(|c| (c.2.width, c.2.height)).collect();
        most_sizes = most_sizes.max(sizes.len());
        batches += 1;
        let got = match batcher.decode_to_host(samples) {
            Ok(got) => got,
            Err(e) => {
                failures.push(format!("batch {batches}: {e}"));
                continue;
            }
        };
        if got.len() != chunk.len() {
            failures.push(format!(
                "batch {batches}: {} of {} back",
                got.len(),
                chunk.len()
            ));
            continue;
        }
        for ((f, class, want), got) in chunk.iter().zip(&got) {
            images += 1;
            if (got.width, got.height) != (want.width, want.height) {
                failures.push(format!("{}: {}x{}", f.display(), got.width, got.height));
                continue;
            }
            let d = got.data.iter().zip(&want.data).map(|(a, b)| a.abs_diff(*b));
            let max = d.max().unwrap_or(0);
            worst = worst.max(max);
            if max > tolerance("hardware", class) {
                failures.push(format!("{} ({class}): {max} levels off", f.display()));
            }
        }
    }
    let paths = batcher.decode_paths();
    println!("{images} images in {batches} batches (up to {most_sizes} sizes in one); {paths:?}");
    let figures = serde_json::json!({
        "images": images,
        "batches": batches,
        "most_sizes_in_a_batch": most_sizes,
        "max_difference": worst,
    });
    report("engine_batches", &device, &batcher, figures, &failures);
    if engines {
        assert!(most_sizes > 1, "no batch held images of different sizes");
    }
}

#[test]
fn nvjpeg_on_the_card() {
    let Some(device) = common::cuda_device() else {
        return;
    };
    let lib = nvjpeg::Library::load().expect("libnvjpeg");
    let version = lib.version().expect("version");
    device.context().bind_to_thread().expect("bind");
    let figures = match nvjpeg::Decoder::new(&lib, 16) {
        Ok(d) => serde_json::json!({
            "library": lib.path(),
            "version": format!("{}.{}.{}", version.0, version.1, version.2),
            "hardware_backend": d.hardware(),
            "engines": d.engines().0,
            "cores_per_engine": d.engines().1,
        }),
        Err(e) => serde_json::json!({
            "library": lib.path(),
            "version": format!("{}.{}.{}", version.0, version.1, version.2),
            "error": e.to_string(),
        }),
    };
    println!("{figures}");
    write_figures("nvjpeg", &figures);
    assert!(figures.get("error").is_none(), "{figures}");
}

/// A kernel that spins for `cycles` clock ticks on one thread.
const SPIN: &str = r#"extern "C" __global__ void spin(unsigned long long cycles) {
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {}
}"#;

#[test]
fn batches_stay_intact_while_the_consumer_holds_the_stream() {
    let Some(device) = common::cuda_device() else {
        return;
    };
    let ctx = device.context().clone();
    let stream = ctx.new_stream().expect("stream");
    let ptx = compile_ptx(SPIN).expect("spin kernel");
    let module = ctx.load_module(ptx).expect("module");
    let spin = module.load_function("spin").expect("spin");
    let subset = Dataset::image_folder(common::data_dir().join("samples"))
        .expect("samples")
        .all();
    let aug = Augment::new()
        .random_resized_crop(48, (0.3, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .dtype(DType::U8);
    let build = |kind: Option<BackendKind>| {
        let b = Pipeline::builder(subset.clone())
            .augment(aug.clone())
            .batch_size(4)
            .prefetch(2)
            .seed(11);
        match kind {
            Some(k) => b.backend(k),
            None => b.cuda_stream(ctx.clone(), stream.clone()),
        }
        .build()
        .expect("pipeline")
    };
    let gpu = build(None);
    let cpu = build(Some(BackendKind::Cpu));
    let (mut rounds, mut batches, mut corrupted) = (0, 0, 0);
    let mut epoch = 0;
    while rounds < 50 {
        let mut host = cpu.epoch(epoch).expect("cpu epoch");
        for b in gpu.epoch(epoch).expect("epoch") {
            let b = b.expect("batch");
            // Hold the consumer's stream (and so the next batches' kernels, which wait
            // for its release) for about a millisecond while the engines go on.
            let mut launch = stream.launch_builder(&spin);
            let cycles: u64 = 2_000_000;
            launch.arg(&cycles);
            // SAFETY: `spin` takes one u64 and touches no memory.
            unsafe { launch.launch(LaunchConfig::for_num_elems(1)) }.expect("spin");
            let c = host.next().expect("same count").expect("cpu batch");
            assert_eq!(b.ids(), c.ids());
            let (g, h) = (
                b.images::<u8>().expect("gpu"),
                c.images::<u8>().expect("cpu"),
            );
            let worst = g.iter().zip(h.iter()).map(|(x, y)| x.abs_diff(*y)).max();
            batches += 1;
            if worst.unwrap_or(0) > HARDWARE_TOLERANCE + 1 {
                corrupted += 1;
            }
            rounds += 1;
        }
        epoch += 1;
    }
    let paths = gpu.decode_paths();
    println!("{batches} batches, {corrupted} corrupted; decode paths {paths:?}");
    write_figures(
        "ordering",
        &serde_json::json!({
            "rounds": rounds,
            "batches": batches,
            "corrupted": corrupted,
            "paths": paths,
        }),
    );
    assert_eq!(corrupted, 0, "{corrupted} of {batches} batches corrupted");
}

//! The device backends (wgpu, CUDA) against the CPU backend through the whole pipeline:
//! the same batches of the same epochs hold the same samples, in the same order, with the
//! same plans; the pixels agree within the decode and augment tolerances; masks are equal.
//!
//! wgpu runs on lavapipe in CI (`STOKER_REQUIRE_WGPU=1` makes a missing adapter a
//! failure); CUDA where there is a GPU (`STOKER_REQUIRE_CUDA=1` makes its absence one).

mod common;

use std::path::Path;

use stoker::{
    Affine, Augment, BackendKind, DType, Dataset, Layout, Pipeline, PipelineBuilder, Subset,
};

/// Largest difference allowed, in 0-255 levels: the device decode is within 2 levels of
/// the CPU decode (a resize averages, it does not amplify) and the augment pass within 1.
const LEVELS: f64 = 3.0;

#[derive(Default)]
struct Epoch {
    ids: Vec<u64>,
    labels: Vec<i64>,
    plans: Vec<stoker::SamplePlan>,
    images: Vec<u8>,
    masks: Option<Vec<u16>>,
    fallbacks: u64,
    gpu: u64,
}

impl Epoch {
    /// Appends the ids, plans and pixels of `b`.
    fn push(&mut self, b: &stoker::Batch) {
        self.ids.extend_from_slice(b.ids());
        self.plans.extend_from_slice(b.plans());
        self.images.extend(b.read_images().expect("images"));
    }

    /// Takes the epoch's CPU fallbacks and device decodes from its stats.
    fn count(&mut self, st: &stoker::Stats) {
        self.fallbacks = st.cpu_fallbacks;
        self.gpu = st.gpu_decoded;
    }
}

fn run(subset: &Subset, aug: &Augment, backend: BackendKind, epochs: u64) -> Vec<Epoch> {
    run_cached(subset, aug, backend, epochs, 0)
}

fn run_cached(
    subset: &Subset,
    aug: &Augment,
    backend: BackendKind,
    epochs: u64,
    cache_bytes: u64,
) -> Vec<Epoch> {
    run_on(subset, aug, backend, epochs, |b| b.cache_bytes(cache_bytes))
}

/// [`run`] with the builder changed by `configure` (after the defaults here).
fn run_on(
    subset: &Subset,
    aug: &Augment,
    backend: BackendKind,
    epochs: u64,
    configure: impl FnOnce(PipelineBuilder) -> PipelineBuilder,
) -> Vec<Epoch> {
    let pipe = configure(common::small_pipeline(subset, aug, backend, 11))
        .build()
        .expect("pipeline");
    assert_eq!(pipe.backend().kind(), backend);
    (0..epochs)
        .map(|e| {
            let mut out = Epoch::default();
            let mut ep = pipe.epoch(e).expect("epoch");
            for b in ep.by_ref() {
                let b = b.expect("batch");
                assert!(b.errors().is_empty(), "{:?}", b.errors());
                assert_eq!(b.on_device(), backend != BackendKind::Cpu);
                out.push(&b);
                out.labels.extend(b.labels_i64(-1));
                if let Some(m) = b.read_masks().expect("masks") {
                    out.masks.get_or_insert_with(Vec::new).extend(m);
                }
            }
            out.count(&ep.stats());
            out
        })
        .collect()
}

/// Element values as 0-255 levels, whatever the dtype (normalised floats scaled back).
fn levels(bytes: &[u8], aug: &Augment, std: [f32; 3]) -> Vec<f64> {
    let (w, h) = aug.get_output_size();
    let plane = (w * h) as usize;
    let chan = |i: usize| match aug.get_layout() {
        Layout::Nchw => (i / plane) % 3,
        Layout::Nhwc => i % 3,
    };
    match aug.get_dtype() {
        DType::U8 => bytes.iter().map(|&b| f64::from(b)).collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .enumerate()
            .map(|(i, c)| {
                f64::from(half::f16::from_le_bytes([c[0], c[1]]).to_f32() * std[chan(i)] * 255.0)
            })
            .collect(),
        DType::F32 => bytes
            .chunks_exact(4)
            .enumerate()
            .map(|(i, c)| {
                f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * std[chan(i)] * 255.0)
            })
            .collect(),
    }
}

/// Every device backend this machine has against the CPU backend.
fn compare(subset: &Subset, aug: &Augment, std: [f32; 3], expect_gpu: bool) {
    let cpu = run(subset, aug, BackendKind::Cpu, 2);
    for backend in devices() {
        println!("{backend}:");
        let gpu = run(subset, aug, backend, 2);
        check(&cpu, &gpu, aug, std, expect_gpu);
    }
}

/// The device backends present (each test is a no-op where there is none).
fn devices() -> Vec<BackendKind> {
    common::backends()
        .into_iter()
        .filter(|b| *b != BackendKind::Cpu)
        .collect()
}

fn check(cpu: &[Epoch], gpu: &[Epoch], aug: &Augment, std: [f32; 3], expect_gpu: bool) {
    for (e, (c, g)) in cpu.iter().zip(gpu).enumerate() {
        assert_eq!(c.ids, g.ids, "epoch {e}: samples or order differ");
        assert_eq!(c.labels, g.labels);
        assert_eq!(c.plans, g.plans, "epoch {e}: plans differ");
        assert_eq!(c.images.len(), g.images.len());
        let (a, b) = (levels(&c.images, aug, std), levels(&g.images, aug, std));
        let mut worst = 0.0f64;
        let mut sum = 0.0;
        for (x, y) in a.iter().zip(&b) {
            let d = (x - y).abs();
            worst = worst.max(d);
            sum += d;
        }
        let mean = sum / a.len().max(1) as f64;
        println!(
            "{:?} {:?}: epoch {e}: worst {worst:.3} levels, mean {mean:.4}; device decoded {}, CPU fallbacks {}",
            aug.get_dtype(),
            aug.get_layout(),
            g.gpu,
            g.fallbacks
        );
        assert!(
            worst <= LEVELS + 1e-3,
            "epoch {e}: worst difference {worst} levels"
        );
        assert!(mean < 0.25, "epoch {e}: mean difference {mean} levels");
        assert_eq!(c.masks, g.masks, "epoch {e}: masks differ");
        if expect_gpu {
            assert_eq!(
                g.gpu as usize,
                g.ids.len(),
                "every JPEG decoded on the device"
            );
            assert_eq!(g.fallbacks, 0);
        }
    }
}

fn photos() -> Subset {
    Dataset::image_folder(common::data_dir().join("samples"))
        .expect("samples")
        .all()
}

const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

#[test]
fn same_batches_and_pixels_as_the_cpu_backend() {
    let base = Augment::new()
        .random_resized_crop(40, (0.08, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .flip_vertical(0.3)
        .color_jitter(0.4, 0.4, 0.4)
        .hue(0.1);
    compare(
        &photos(),
        &base.clone().dtype(DType::U8),
        [1.0 / 255.0; 3],
        true,
    );
    compare(
        &photos(),
        &base.clone().normalize(MEAN, STD).dtype(DType::F32),
        STD,
        true,
    );
    compare(
        &photos(),
        &base
            .normalize(MEAN, STD)
            .dtype(DType::F16)
            .layout(Layout::Nhwc),
        STD,
        true,
    );
    // Validation transform: resize + centre crop, full-size decode of large crops.
    compare(
        &photos(),
        &Augment::validation(36)
            .normalize(MEAN, STD)
            .dtype(DType::F32),
        STD,
        true,
    );
}

/// JPEG images with random label masks of the same size.
fn jpegs_with_masks(dir: &Path) -> Subset {
    common::jpegs_with_masks(dir, &walk(&common::data_dir().join("samples")), 3)
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn masks_follow_the_image_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let subset = jpegs_with_masks(dir.path());
    let aug = Augment::new()
        .random_resized_crop(33, (0.1, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .color_jitter(0.3, 0.3, 0.3)
        .normalize(MEAN, STD)
        .dtype(DType::F32);
    compare(&subset, &aug, STD, true);
    // The affine warp moves the mask with the image: the same labels on every backend,
    // the ignore id where the warp reads outside.
    let warped = aug
        .random_affine(
            Affine::new()
                .degrees(-30.0, 30.0)
                .translate(0.1, 0.1)
                .scale(0.8, 1.2)
                .shear(-10.0, 10.0),
        )
        .fill([128, 128, 128])
        .mask_fill(255);
    compare(&subset, &warped, STD, true);
}

#[test]
fn the_decoded_sample_cache_gives_the_same_batches() {
    // With the cache on, images are decoded whole on the CPU (then cached) and augmented
    // on the device; the second epoch is served from the cache.
    let aug = Augment::new()
        .random_resized_crop(24, (0.2, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .color_jitter(0.2, 0.2, 0.2)
        .dtype(DType::U8);
    let cpu = run_cached(&photos(), &aug, BackendKind::Cpu, 2, 64 << 20);
    for backend in devices() {
        let gpu = run_cached(&photos(), &aug, backend, 2, 64 << 20);
        check(&cpu, &gpu, &aug, [1.0 / 255.0; 3], false);
        assert_eq!(gpu[0].fallbacks, 6, "the cache keeps CPU decodes");
        assert_eq!(gpu[1].fallbacks, 0, "epoch 1 is served from the cache");
    }
}

#[test]
fn exif_rotated_jpegs_take_the_device_path_with_the_same_pixels() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = common::exif_rotated_jpegs();
    // Each also with restart markers (its EXIF kept): the device entropy path turns it
    // upright as the hybrid path does.
    let mut restarts = 0;
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).expect("name");
        let bytes = std::fs::read(f).expect("jpeg");
        common::write(dir.path(), name, &bytes);
        use stoker::decode::jpeg::transcode::{add_restarts, TranscodeOptions, Transcoded};
        if let Transcoded::Written { bytes, .. } =
            add_restarts(&bytes, &TranscodeOptions::default())
        {
            assert_eq!(
                stoker::decode::peek_info(&bytes)
                    .expect("headers")
                    .orientation,
                stoker::decode::peek_info(&std::fs::read(f).expect("jpeg"))
                    .expect("headers")
                    .orientation
            );
            common::write(dir.path(), &format!("rst_{name}"), &bytes);
            restarts += 1;
        }
    }
    assert!(restarts >= 1, "no rotated file took restart markers");
    let subset = Dataset::flat(dir.path()).expect("folder").all();
    let aug = Augment::new()
        .random_resized_crop(40, (0.08, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .normalize(MEAN, STD)
        .dtype(DType::F32);
    compare(&subset, &aug, STD, true);
    // The restart-marked ones on the device entropy path.
    for backend in devices() {
        let (_, _, _, st) = epoch_with_reports(&subset, &aug, backend, true);
        assert_eq!(st.gpu_entropy, restarts, "{backend}");
    }
}

/// Random crops (`smallest` of the area or more) to `size` pixels, flipped half the time,
/// as bytes.
fn random_crops(size: u32, smallest: f64) -> Augment {
    Augment::new()
        .random_resized_crop(size, (smallest, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .dtype(DType::U8)
}

/// The devices with small storage bindings (wgpu only): what a binding cannot hold is
/// decoded or reduced on the host, and the device delivers what the CPU backend does.
#[cfg(feature = "wgpu")]
mod small_bindings {
    use super::*;

    /// Bindings of 768 KiB: the 640x427 4:4:4 photos hold 12960 blocks (1.66 MB of
    /// coefficients at full size), more than one binding; the other files fit whole (the
    /// 600x400 4:2:0 one holds 5650 blocks, 723 KB).
    const BINDING_768K: u64 = 768 << 10;
    /// Bindings of 512 KiB: 131,072 words, less than the photo's 273,280 pixels.
    const BINDING_512K: u64 = 512 << 10;

    /// A wgpu device of this machine's adapter whose storage bindings hold at most `bytes`
    /// (a device with small bindings, or a large image on any device, in miniature); `None`
    /// where there is no adapter (as [`common::wgpu_context`] decides).
    fn small_binding_device(bytes: u64) -> Option<(wgpu::Device, wgpu::Queue)> {
        common::wgpu_context()?;
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter =
            pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
                .expect("adapter");
        let limits = wgpu::Limits {
            max_storage_buffer_binding_size: bytes,
            ..adapter.limits()
        };
        let desc = wgpu::DeviceDescriptor {
            required_limits: limits,
            ..Default::default()
        };
        Some(pollster::block_on(adapter.request_device(&desc)).expect("device"))
    }

    /// Coefficient blocks a JPEG's components hold (from its frame header): what the device
    /// path uploads, 128 bytes each, for a window that covers the whole image at full size.
    fn blocks(bytes: &[u8]) -> u64 {
        let mut i = 2;
        while i + 4 < bytes.len() {
            let marker = bytes[i + 1];
            let len = usize::from(u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]));
            if (0xC0..=0xC2).contains(&marker) {
                let s = &bytes[i + 4..i + 2 + len];
                let (h, w) = (
                    u64::from(u16::from_be_bytes([s[1], s[2]])),
                    u64::from(u16::from_be_bytes([s[3], s[4]])),
                );
                let n = usize::from(s[5]);
                let f: Vec<(u64, u64)> = (0..n)
                    .map(|k| (u64::from(s[7 + 3 * k] >> 4), u64::from(s[7 + 3 * k] & 15)))
                    .collect();
                let max_h = f.iter().map(|x| x.0).max().unwrap_or(1);
                let max_v = f.iter().map(|x| x.1).max().unwrap_or(1);
                return f
                    .iter()
                    .map(|&(fh, fv)| (w * fh).div_ceil(8 * max_h) * (h * fv).div_ceil(8 * max_v))
                    .sum();
            }
            i += 2 + len;
        }
        panic!("no frame header");
    }

    /// Two epochs of `aug` over `subset` with `seed`, on the CPU and on wgpu's `device`: every
    /// sample delivered ([`run_on`] fails on any error), the device's pixels the CPU's within
    /// the tolerance of the device path. Returns the device's epochs.
    fn as_on_the_cpu(
        subset: &Subset,
        aug: &Augment,
        seed: u64,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
    ) -> Vec<Epoch> {
        let cpu = run_on(subset, aug, BackendKind::Cpu, 2, |b| b.seed(seed));
        let (d, q) = (device.clone(), queue.clone());
        let gpu = run_on(subset, aug, BackendKind::Wgpu, 2, |b| {
            b.seed(seed).wgpu_device(d, q)
        });
        check(&cpu, &gpu, aug, [1.0 / 255.0; 3], false);
        gpu
    }

    #[test]
    fn what_one_binding_cannot_hold_is_decoded_on_the_cpu() {
        let Some((device, queue)) = small_binding_device(BINDING_768K) else {
            return;
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let files = [
            "samples/photo/sklearn_china.jpg",
            "samples/photo/sklearn_flower.jpg",
            "samples/photo/skimage_coffee.jpg",
            "jpeg/ljt_testorig.jpg",
            "jpeg/go_video-001_q50_444.jpg",
            "jpeg/go_video-001_221212.jpg",
            "jpeg/jd_moz_jpg-gray.jpg",
        ];
        let mut too_big = 0;
        for f in files {
            let bytes = std::fs::read(common::data_dir().join(f)).expect("jpeg");
            too_big += usize::from(blocks(&bytes) * 128 > BINDING_768K);
            let name = f.replace('/', "_");
            common::write(dir.path(), &format!("c/{name}"), &bytes);
        }
        assert_eq!(
            too_big, 2,
            "the two 4:4:4 photos need more than a binding at full size"
        );
        let subset = Dataset::image_folder(dir.path()).expect("folder").all();
        // Random crops to 40 pixels, crop-aware: a crop of 320 pixels or more is decoded at
        // 1/8, and its upload holds only what the 1x1 IDCT reads, a block's DC (4 bytes:
        // 52 KB for the whole photo); one of 160-320 pixels at 1/4, 13 words a block (at
        // most about 7000 blocks, 360 KB); smaller ones at 1/2 or 1/1 read few blocks. Every
        // sample fits.
        let random = random_crops(40, 0.08);
        // A centre crop (about 375 of their 427 rows and 640 columns) decoded at full size
        // (crop-aware decode off) still reads about 50x50 of their 80x54 block grid, three
        // components: 7500 blocks, 0.96 MB, more than the binding.
        let centre = Augment::validation(36).crop_aware(false).dtype(DType::U8);
        for seed in [1, 2, 3, 4] {
            for (aug, whole) in [(&random, false), (&centre, true)] {
                let gpu = as_on_the_cpu(&subset, aug, seed, &device, &queue);
                for e in &gpu {
                    assert_eq!(
                        e.ids.len(),
                        files.len(),
                        "seed {seed}: every sample delivered"
                    );
                    assert_eq!(e.gpu + e.fallbacks, files.len() as u64);
                    let want = if whole { 2 } else { 0 };
                    assert_eq!(e.fallbacks, want, "seed {seed}, centre crop: {whole}");
                }
            }
        }
    }

    /// PNG and WebP images that the CPU decodes whole, larger than one device binding: cropped
    /// to the window the plan reads, and reduced on the host where that window is still too
    /// large, so that the device delivers what the CPU backend delivers (before, each was
    /// reported: "a 640x427 window decoded on the host needs ... a binding holds ...").
    #[test]
    fn png_and_webp_larger_than_a_binding_are_delivered() {
        let Some((device, queue)) = small_binding_device(BINDING_512K) else {
            return;
        };
        let jpeg = std::fs::read(common::data_dir().join("samples/photo/sklearn_china.jpg"))
            .expect("photo");
        let mut img = stoker::decode::Image8::default();
        stoker::decode::cpu::decode_image(&jpeg, &Default::default(), &mut img).expect("decode");
        let (w, h) = (img.width, img.height);
        let dir = tempfile::tempdir().expect("tempdir");
        common::write(dir.path(), "c/china.png", &common::png_rgb(w, h, &img.data));
        let mut webp = Vec::new();
        image::codecs::webp::WebPEncoder::new_lossless(&mut webp)
            .encode(&img.data, w, h, image::ExtendedColorType::Rgb8)
            .expect("webp");
        common::write(dir.path(), "c/china.webp", &webp);
        // Its mirror image, so that the two crops of a batch differ.
        let mirrored: Vec<u8> = img
            .data
            .chunks_exact(3 * w as usize)
            .flat_map(|row| {
                row.chunks_exact(3)
                    .rev()
                    .flatten()
                    .copied()
                    .collect::<Vec<u8>>()
            })
            .collect();
        common::write(
            dir.path(),
            "c/mirror.png",
            &common::png_rgb(w, h, &mirrored),
        );
        let subset = Dataset::image_folder(dir.path()).expect("folder").all();
        let random = random_crops(40, 0.08);
        // Nearly the whole photo, resized to 41 rows: reduced to 1/2 on the host first.
        let centre = Augment::validation(36).dtype(DType::U8);
        for seed in [1, 2, 3] {
            for aug in [&random, &centre] {
                let gpu = as_on_the_cpu(&subset, aug, seed, &device, &queue);
                for e in &gpu {
                    assert_eq!(e.ids.len(), 3, "seed {seed}: every sample delivered");
                    assert_eq!(e.fallbacks, 3, "decoded on the host");
                }
            }
        }
    }
}

/// The folder's samples with random 48-pixel crops, and the CPU backend's epoch of them
/// with its reports and warnings: what every device backend must deliver.
fn on_the_cpu(dir: &Path) -> (Subset, Augment, Epoch, Vec<String>, Vec<String>) {
    let subset = Dataset::image_folder(dir).expect("folder").all();
    let aug = random_crops(48, 0.1);
    let (cpu, errors, warnings, _) = epoch_with_reports(&subset, &aug, BackendKind::Cpu, true);
    (subset, aug, cpu, errors, warnings)
}

/// `got` equals the CPU backend's epoch `cpu` within a level.
fn like(cpu: &Epoch, got: &Epoch, aug: &Augment) {
    let (want, got) = (std::slice::from_ref(cpu), std::slice::from_ref(got));
    check(want, got, aug, [1.0 / 255.0; 3], false);
}

/// One epoch of `subset` on `backend`: ids, images, the paths of the samples reported,
/// warnings, and the stats.
fn epoch_with_reports(
    subset: &Subset,
    aug: &Augment,
    backend: BackendKind,
    entropy: bool,
) -> (Epoch, Vec<String>, Vec<String>, stoker::Stats) {
    let mut all = epochs_with_reports(subset, aug, backend, entropy, 1);
    all.pop().expect("one epoch")
}

/// [`epoch_with_reports`] for epochs `0..epochs` of one pipeline (which keeps what it
/// learnt of each file, its verdict, from one epoch to the next).
fn epochs_with_reports(
    subset: &Subset,
    aug: &Augment,
    backend: BackendKind,
    entropy: bool,
    epochs: u64,
) -> Vec<(Epoch, Vec<String>, Vec<String>, stoker::Stats)> {
    let pipe = Pipeline::builder(subset.clone())
        .backend(backend)
        .augment(aug.clone())
        .batch_size(4)
        .workers(2)
        .readers(2)
        .seed(5)
        .device_entropy(entropy)
        // The device's own entropy paths, also on a card with JPEG engines.
        .hardware_decode(stoker::HardwareDecode::Off)
        .build()
        .expect("pipeline");
    (0..epochs)
        .map(|e| {
            let mut out = Epoch::default();
            let (mut errors, mut warnings) = (Vec::new(), Vec::new());
            let mut ep = pipe.epoch(e).expect("epoch");
            for b in ep.by_ref() {
                let b = b.expect("batch");
                errors.extend(b.errors().iter().map(|e| e.path.clone()));
                warnings.extend(b.warnings().iter().map(|w| w.path.clone()));
                out.push(&b);
            }
            let st = ep.stats();
            out.count(&st);
            errors.sort();
            warnings.sort();
            (out, errors, warnings, st)
        })
        .collect()
}

#[test]
fn jpegs_with_restart_markers_are_huffman_decoded_on_the_device() {
    // Restart JPEGs of every sampling, and bit-flipped copies (their markers kept): the
    // device decodes the clean ones whole, flags what libjpeg may read otherwise and
    // hands it to the host path, so batches, reports and pixels are the CPU backend's.
    let dir = tempfile::tempdir().expect("tmp");
    let mut rng = common::TestRng(0x0e57_a7e5);
    let samplings = common::RESTART_SAMPLINGS;
    let mut clean = 0u64;
    for i in 0..18 {
        let (samp, gray) = samplings[i % samplings.len()];
        let (w, h) = (33 + rng.below(200) as u32, 29 + rng.below(150) as u32);
        let (mcus, rows) = if i % 3 == 0 {
            (0, 1)
        } else {
            (1 + rng.below(12) as u32, 0)
        };
        let mut jpeg = common::restart_jpeg(&mut rng, w, h, samp, gray, mcus, rows);
        if i % 4 == 3 {
            // Damage the bottom third: crops above it still see it, as on the CPU backend.
            common::flip_in_bottom_third(&mut jpeg, &mut rng);
        } else {
            clean += 1;
        }
        common::write(dir.path(), &format!("c{}/{i:02}.jpg", i % 2), &jpeg);
    }
    on_every_device_like_the_cpu(dir.path(), "", |backend, st| {
        // The damaged files were flagged on the device, and their batches, whose later
        // passes had already written the outputs, ran again: the pixels are the second
        // run's.
        assert!(st.entropy_flagged >= 1, "{backend}: nothing flagged");
        assert!(
            st.gpu_entropy >= clean,
            "{backend}: {} of {clean} clean files Huffman-decoded on the device",
            st.gpu_entropy
        );
    });
}

/// Runs the JPEGs below `dir` on every device backend, with the device's entropy
/// decoding on and off, and holds both to the CPU backend's epoch: the same reports,
/// warnings and pixels, every device-decoded sample counted on one path, and nothing
/// entropy-decoded on the device when that is off. `check` looks at the stats with it on.
fn on_every_device_like_the_cpu(
    dir: &Path,
    what: &str,
    check: impl Fn(BackendKind, &stoker::Stats),
) {
    let (subset, aug, cpu, cpu_errors, cpu_warnings) = on_the_cpu(dir);
    for backend in devices() {
        let (dev, errors, warnings, st) = epoch_with_reports(&subset, &aug, backend, true);
        println!(
            "{what}{backend}: {} delivered, {} reported; gpu entropy {}, gpu sync entropy {}, flagged {}, host entropy {}, cpu {}",
            dev.ids.len(),
            errors.len(),
            st.gpu_entropy,
            st.gpu_sync_entropy,
            st.entropy_flagged,
            st.host_entropy,
            st.cpu_fallbacks
        );
        assert_eq!(errors, cpu_errors, "{what}{backend}: reports");
        assert_eq!(warnings, cpu_warnings, "{what}{backend}: warnings");
        like(&cpu, &dev, &aug);
        assert_eq!(
            st.gpu_decoded,
            st.gpu_entropy + st.gpu_sync_entropy + st.host_entropy + st.hardware
        );
        check(backend, &st);
        // Off: the host entropy path, the same batches.
        let (host, errors, _, st) = epoch_with_reports(&subset, &aug, backend, false);
        assert_eq!(st.gpu_entropy + st.gpu_sync_entropy, 0, "{what}{backend}");
        assert_eq!(errors, cpu_errors);
        like(&cpu, &host, &aug);
    }
}

/// 1 when the synchronising decode's oracle decodes `jpeg` cleanly within the rounds the
/// device runs, else 0 (a file the device flags too: blocks libjpeg's SIMD IDCT may
/// treat otherwise, or rounds that did not settle).
fn sync_clean(jpeg: &[u8], what: &str) -> u64 {
    use stoker::decode::jpeg::huffman::sync::SUBSEQUENCE_BITS;
    use stoker::decode::jpeg::huffman::{decode_sync_with, RestartScan};
    let scan = RestartScan::parse_sync(jpeg).expect("parse_sync");
    let mut out = stoker::decode::jpeg::coeffs::Coefficients::default();
    let rounds = stoker::backend::device::sync_decode::SYNC_ROUNDS;
    let status = decode_sync_with(&scan, jpeg, SUBSEQUENCE_BITS, rounds, &mut out).expect("decode");
    println!("{what}: the oracle's status {status:#x}");
    u64::from(status == 0)
}

/// `n` fresh random encodes without restart markers (every sampling, sized by `size`)
/// written below `dir`, every fourth damaged in its bottom third (crops above it still
/// see it, as on the CPU backend) until the damage shows: a flipped bit may leave a scan
/// that still decodes, which neither the oracle nor libjpeg can tell from a clean one.
/// Returns the clean files the oracle decodes within the device's rounds.
fn sync_files(
    dir: &Path,
    rng: &mut common::TestRng,
    n: usize,
    size: impl Fn(&mut common::TestRng, usize) -> (u32, u32),
) -> u64 {
    use stoker::decode::jpeg::huffman::RestartScan;
    let samplings = common::RESTART_SAMPLINGS;
    let mut clean = 0u64;
    for i in 0..n {
        let (samp, gray) = samplings[i % samplings.len()];
        let (w, h) = size(rng, i);
        let mut jpeg = common::restart_jpeg(rng, w, h, samp, gray, 0, 0);
        assert!(
            RestartScan::parse(&jpeg).is_err(),
            "case {i}: restart markers"
        );
        if i % 4 == 3 {
            let original = jpeg.clone();
            let shows = (0..64).any(|_| {
                jpeg.clone_from(&original);
                common::flip_in_bottom_third(&mut jpeg, rng);
                sync_clean(&jpeg, &format!("case {i}: damaged")) == 0
            });
            assert!(shows, "case {i}: no damage the oracle flags in 64 tries");
        } else {
            clean += sync_clean(&jpeg, &format!("case {i}: {w}x{h} {samp:?} gray {gray}"));
        }
        common::write(dir, &format!("c{}/{i:02}.jpg", i % 2), &jpeg);
    }
    clean
}

#[test]
fn baseline_jpegs_without_restart_markers_are_huffman_decoded_on_the_device_by_sync() {
    // Fresh random encodes without restart markers (every sampling, sizes from a few
    // pixels to a few hundred), the bundled small baseline files, and bit-flipped copies:
    // on every device backend the self-synchronising decode takes every clean one (one
    // dispatch per pass for the batch), flags what libjpeg may read otherwise and hands
    // it to the host path, so batches, reports and pixels are the CPU backend's.
    use stoker::decode::jpeg::huffman::RestartScan;
    let dir = tempfile::tempdir().expect("tmp");
    let seed = common::fresh_seed("sync device pipeline");
    let mut rng = common::TestRng(seed);
    let mut clean = sync_files(dir.path(), &mut rng, 16, |rng, i| match i % 4 {
        0 => (1 + rng.below(12) as u32, 1 + rng.below(12) as u32),
        _ => (33 + rng.below(260) as u32, 29 + rng.below(200) as u32),
    });
    // Bundled baseline files without restart markers.
    let bundled = [
        "jpeg/go_video-001_q50_411.jpg",
        "jpeg/go_video-001_q50_444.jpg",
        "jpeg/jd_moz_jpg-gray.jpg",
        "jpeg/jd_moz_jpg-size-33x33.jpg",
        "jpeg/ljt_testorig.jpg",
    ];
    for (k, f) in bundled.iter().enumerate() {
        let bytes = std::fs::read(common::data_dir().join(f)).expect("bundled");
        assert!(RestartScan::parse(&bytes).is_err(), "{f}: restart markers");
        assert!(
            RestartScan::parse_sync(&bytes).is_ok(),
            "{f}: not for the sync decode"
        );
        common::write(dir.path(), &format!("c{}/b{k}.jpg", k % 2), &bytes);
        clean += sync_clean(&bytes, f);
    }
    on_every_device_like_the_cpu(dir.path(), &format!("seed {seed}: "), |backend, st| {
        assert_eq!(st.gpu_entropy, 0, "{backend}: no file has restart markers");
        // The damaged files were flagged on the device and their batches ran again.
        assert!(
            st.entropy_flagged >= 1,
            "seed {seed}: {backend}: nothing flagged"
        );
        assert!(
            st.gpu_sync_entropy >= clean,
            "seed {seed}: {backend}: {} of {clean} clean files Huffman-decoded on the device",
            st.gpu_sync_entropy
        );
    });
}

#[test]
fn crops_of_tall_jpegs_by_sync_report_damage_below_them_in_every_epoch() {
    // Tall random encodes without restart markers, a quarter of them damaged in their
    // bottom third, small random crops over two epochs of one pipeline: a file's first
    // crop decodes it whole on the device (its verdict), later crops of a clean file
    // write only up to the crop's last MCU (the subsequences below it skipped), and a
    // damaged file is decoded whole again, flagged and reported, in every epoch, as the
    // CPU backend reports it whatever the crop: reports, warnings and pixels are the CPU
    // backend's in each epoch.
    let dir = tempfile::tempdir().expect("tmp");
    let seed = common::fresh_seed("sync crops over epochs");
    let mut rng = common::TestRng(seed);
    let clean = sync_files(dir.path(), &mut rng, 12, |rng, _| {
        (33 + rng.below(120) as u32, 240 + rng.below(300) as u32)
    });
    let subset = Dataset::image_folder(dir.path()).expect("folder").all();
    let aug = random_crops(32, 0.02);
    let cpu = epochs_with_reports(&subset, &aug, BackendKind::Cpu, true, 2);
    assert!(
        cpu.iter()
            .all(|(_, errors, warnings, _)| !errors.is_empty() || !warnings.is_empty()),
        "seed {seed}: the CPU backend reports the damaged files in every epoch"
    );
    for backend in devices() {
        let dev = epochs_with_reports(&subset, &aug, backend, true, 2);
        for (e, (want, got)) in cpu.iter().zip(&dev).enumerate() {
            let what = format!("seed {seed}: {backend} epoch {e}");
            let st = &got.3;
            println!(
                "{what}: {} delivered, {} reported; gpu sync entropy {}, flagged {}",
                got.0.ids.len(),
                got.1.len(),
                st.gpu_sync_entropy,
                st.entropy_flagged
            );
            assert_eq!(got.1, want.1, "{what}: reports");
            assert_eq!(got.2, want.2, "{what}: warnings");
            like(&want.0, &got.0, &aug);
            assert!(st.entropy_flagged >= 1, "{what}: nothing flagged");
            assert!(
                st.gpu_sync_entropy >= clean,
                "{what}: {} of {clean} clean files on the sync path",
                st.gpu_sync_entropy
            );
        }
    }
}

/// A batch whose upload is written into the staging buffer by several threads at once (the
/// six sample photos' packed coefficients, twice: more than 4 MiB) decodes exactly as the
/// oracle decodes each sample's packed blocks, on every device backend.
#[test]
fn a_batch_written_into_staging_by_several_threads_decodes_as_the_oracle_does() {
    use stoker::backend::device::{prepare_reusing, CoeffPool, DeviceSample};
    let mut files = Vec::new();
    common::files_below(&common::data_dir().join("samples"), &mut files);
    files.sort();
    let pool = CoeffPool::default();
    let mut samples = Vec::new();
    for f in files.iter().chain(&files) {
        let bytes = std::fs::read(f).expect("sample");
        let p = prepare_reusing(&bytes, &Default::default(), &pool).expect("prepares");
        let image = p.image.packed(&pool).expect("packs");
        assert!(
            matches!(image, DeviceSample::Packed { .. }),
            "{}",
            f.display()
        );
        samples.push(image);
    }
    let payload: usize = samples
        .iter()
        .map(|s| match s {
            DeviceSample::Packed { packed, .. } => 4 * packed.data.len(),
            _ => 0,
        })
        .sum();
    assert!(payload > 4 << 20, "{payload} bytes");
    for (kind, mut batcher) in common::device_batchers() {
        let got = batcher.decode_to_host(&samples).expect("decodes");
        assert_eq!(got.len(), samples.len());
        for (k, (s, img)) in samples.iter().zip(&got).enumerate() {
            let DeviceSample::Packed { packed, .. } = s else {
                unreachable!()
            };
            let want = stoker::decode::jpeg::color::decode_window(packed);
            assert!(
                want.data == img.data && (want.width, want.height) == (img.width, img.height),
                "{kind}: sample {k} differs from the oracle"
            );
        }
    }
}

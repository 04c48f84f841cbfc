//! The device cache of decoded samples (`PipelineBuilder::device_cache_bytes`) against the
//! CPU backend with the host cache: over several epochs the same batches (samples, order,
//! plans, reports, warnings), the pixels within the decode and augment tolerances, masks
//! equal; epochs after the first read no file and decode nothing, and count their hits;
//! a budget smaller than the dataset serves the rest from the host cache or a fresh decode.
//!
//! wgpu runs on lavapipe in CI (`STOKER_REQUIRE_WGPU=1` makes a missing adapter a
//! failure); CUDA where there is a GPU.

use crate::common;

use std::path::Path;

use stoker::{Augment, BackendKind, DType, Dataset, PipelineBuilder, Stats, Subset};

/// Largest difference allowed, in 0-255 levels (as in `device_pipeline.rs`).
const LEVELS: f64 = 3.0;

#[derive(Debug)]
struct Epoch {
    ids: Vec<u64>,
    plans: Vec<stoker::SamplePlan>,
    images: Vec<u8>,
    masks: Option<Vec<u16>>,
    errors: Vec<String>,
    warnings: Vec<(u64, String)>,
    stats: Stats,
}

/// `epochs` epochs of `subset` on `backend`, the builder changed by `configure`; and the
/// device-cache bytes the pipeline holds at the end.
fn run(
    subset: &Subset,
    aug: &Augment,
    backend: BackendKind,
    epochs: u64,
    configure: impl FnOnce(PipelineBuilder) -> PipelineBuilder,
) -> (Vec<Epoch>, u64) {
    let pipe = configure(common::small_pipeline(subset, aug, backend, 23))
        .build()
        .expect("pipeline");
    assert_eq!(pipe.backend().kind(), backend);
    let out = (0..epochs)
        .map(|e| {
            let mut out = Epoch {
                ids: Vec::new(),
                plans: Vec::new(),
                images: Vec::new(),
                masks: None,
                errors: Vec::new(),
                warnings: Vec::new(),
                stats: Stats::default(),
            };
            let mut ep = pipe.epoch(e).expect("epoch");
            for b in ep.by_ref() {
                let b = b.expect("batch");
                out.errors.extend(b.errors().iter().map(|e| e.path.clone()));
                out.warnings
                    .extend(b.warnings().iter().map(|w| (w.id, w.message.clone())));
                out.ids.extend_from_slice(b.ids());
                out.plans.extend_from_slice(b.plans());
                out.images.extend(b.read_images().expect("images"));
                if let Some(m) = b.read_masks().expect("masks") {
                    out.masks.get_or_insert_with(Vec::new).extend(m);
                }
            }
            out.errors.sort();
            out.warnings.sort();
            out.stats = ep.stats();
            out
        })
        .collect();
    (out, pipe.device_cache_bytes_used())
}

/// The device backends present (each test is a no-op where there is none).
fn devices() -> Vec<BackendKind> {
    common::backends()
        .into_iter()
        .filter(|b| *b != BackendKind::Cpu)
        .collect()
}

/// Same samples, plans, reports, warnings and masks in every epoch; pixels (u8) within
/// [`LEVELS`].
fn check(cpu: &[Epoch], dev: &[Epoch]) {
    assert_eq!(cpu.len(), dev.len());
    for (e, (c, g)) in cpu.iter().zip(dev).enumerate() {
        assert_eq!(c.ids, g.ids, "epoch {e}: samples or order differ");
        assert_eq!(c.plans, g.plans, "epoch {e}: plans differ");
        assert_eq!(c.errors, g.errors, "epoch {e}: reports differ");
        assert_eq!(c.warnings, g.warnings, "epoch {e}: warnings differ");
        assert_eq!(c.masks, g.masks, "epoch {e}: masks differ");
        assert_eq!(c.images.len(), g.images.len());
        let mut worst = 0u8;
        let mut sum = 0u64;
        for (x, y) in c.images.iter().zip(&g.images) {
            let d = x.abs_diff(*y);
            worst = worst.max(d);
            sum += u64::from(d);
        }
        let mean = sum as f64 / c.images.len().max(1) as f64;
        println!(
            "epoch {e}: worst {worst} levels, mean {mean:.4}; device-cache hits {}, host-cache hits {}, \
             device decoded {}, CPU fallbacks {}, bytes read {}; wall {:.3} s (CPU backend {:.3} s)",
            g.stats.device_cache_hits,
            g.stats.cache_hits,
            g.stats.gpu_decoded,
            g.stats.cpu_fallbacks,
            g.stats.bytes_read,
            g.stats.wall_seconds,
            c.stats.wall_seconds
        );
        assert!(
            f64::from(worst) <= LEVELS,
            "epoch {e}: worst difference {worst} levels"
        );
        assert!(mean < 0.25, "epoch {e}: mean difference {mean} levels");
    }
}

fn photos() -> Subset {
    Dataset::image_folder(common::data_dir().join("samples"))
        .expect("samples")
        .all()
}

fn augment() -> Augment {
    Augment::new()
        .random_resized_crop(32, (0.08, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .color_jitter(0.3, 0.3, 0.3)
        .dtype(DType::U8)
}

const HOST: u64 = 64 << 20;

#[test]
fn cached_epochs_run_on_the_device_with_the_cpu_backends_batches() {
    let subset = photos();
    let n = subset.len() as u64;
    let aug = augment();
    let (cpu, _) = run(&subset, &aug, BackendKind::Cpu, 3, |b| b.cache_bytes(HOST));
    // Augmentation is not cached: each epoch has its own plans and pixels.
    assert_ne!(cpu[1].plans, cpu[2].plans);
    assert_ne!(cpu[1].images, cpu[2].images);
    for backend in devices() {
        println!("{backend}:");
        let (dev, held) = run(&subset, &aug, backend, 3, |b| {
            b.device_cache_bytes(64 << 20)
        });
        check(&cpu, &dev);
        // The first epoch decodes every JPEG whole on the device and keeps it.
        let first = &dev[0].stats;
        assert_eq!(first.device_cache_hits, 0);
        assert_eq!(first.gpu_decoded, n, "every JPEG decoded on the device");
        assert_eq!(first.cpu_fallbacks, 0);
        // Later epochs read no file and decode nothing.
        for (e, ep) in dev.iter().enumerate().skip(1) {
            let st = &ep.stats;
            assert_eq!(st.device_cache_hits, n, "epoch {e}");
            assert_eq!(st.bytes_read, 0, "epoch {e}: no file read");
            assert_eq!(st.gpu_decoded, 0, "epoch {e}: nothing decoded");
            assert_eq!(st.cpu_fallbacks, 0, "epoch {e}: nothing decoded on the CPU");
            assert_eq!(st.cache_hits, 0, "epoch {e}: no host cache");
        }
        // Every image's place: its RGBA words, on 256-byte boundaries.
        assert!(held > 0);
        assert_eq!(dev[2].stats.device_cache_bytes, held);
        assert_eq!(held % 256, 0);
    }
}

/// Bytes the device cache takes for every image of `subset`.
fn places(subset: &Subset) -> Vec<u64> {
    subset
        .samples()
        .iter()
        .map(|s| {
            let stoker::source::Location::File(p) = &s.location else {
                panic!("a file")
            };
            let info = stoker::decode::peek_info(&std::fs::read(p).expect("read")).expect("info");
            let (w, h) = info.oriented_size();
            (4 * u64::from(w) * u64::from(h)).next_multiple_of(256)
        })
        .collect()
}

#[test]
fn a_budget_smaller_than_the_dataset_serves_the_rest_from_the_host_cache_or_a_fresh_decode() {
    let subset = photos();
    let n = subset.len() as u64;
    let aug = augment();
    let mut sizes = places(&subset);
    sizes.sort_unstable();
    // Room for the three smallest images, so for two at least whichever come first, and
    // never for all of them.
    let budget = sizes[0] + sizes[1] + sizes[2];
    assert!(budget < sizes.iter().sum::<u64>());
    let (cpu, _) = run(&subset, &aug, BackendKind::Cpu, 3, |b| b.cache_bytes(HOST));
    for backend in devices() {
        println!("{backend}, with the host cache:");
        let (dev, held) = run(&subset, &aug, backend, 3, |b| {
            b.device_cache_bytes(budget).cache_bytes(HOST)
        });
        check(&cpu, &dev);
        assert!(held <= budget && held > 0, "{held} of {budget}");
        partly_cached(&dev, n, |e, st| {
            assert_eq!(st.device_cache_hits + st.cache_hits, n, "epoch {e}");
            assert_eq!(st.bytes_read, 0, "epoch {e}: no file read");
            assert_eq!(st.gpu_decoded, 0, "epoch {e}");
        });
        println!("{backend}, without:");
        let (dev, _) = run(&subset, &aug, backend, 3, |b| b.device_cache_bytes(budget));
        check(&cpu, &dev);
        partly_cached(&dev, n, |e, st| {
            // The rest read and decoded again, on the device.
            assert_eq!(st.device_cache_hits + st.gpu_decoded, n, "epoch {e}");
            assert_eq!(st.cpu_fallbacks, 0, "epoch {e}");
        });
    }
}

/// Every epoch of `dev` after the first: some of its `n` samples came from the device
/// cache (two at least, never all), and `more` holds of its stats (given the epoch).
fn partly_cached(dev: &[Epoch], n: u64, more: impl Fn(usize, &Stats)) {
    for (e, ep) in dev.iter().enumerate().skip(1) {
        let st = &ep.stats;
        assert!(
            st.device_cache_hits >= 2 && st.device_cache_hits < n,
            "epoch {e}"
        );
        more(e, st);
    }
}

/// JPEG images with random label masks of the same size.
fn jpegs_with_masks(dir: &Path) -> Subset {
    let mut files: Vec<_> = std::fs::read_dir(common::data_dir().join("samples/photo"))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    common::jpegs_with_masks(dir, &files, 17)
}

#[test]
fn masks_of_cached_samples_follow_the_image() {
    let dir = tempfile::tempdir().expect("tempdir");
    let subset = jpegs_with_masks(dir.path());
    let n = subset.len() as u64;
    let aug = augment();
    let (cpu, _) = run(&subset, &aug, BackendKind::Cpu, 3, |b| b.cache_bytes(HOST));
    assert!(cpu[0].masks.is_some());
    for backend in devices() {
        let (dev, _) = run(&subset, &aug, backend, 3, |b| b.device_cache_bytes(HOST));
        check(&cpu, &dev);
        assert_eq!(dev[2].stats.device_cache_hits, n);
        assert_eq!(dev[2].stats.bytes_read, 0, "masks are kept too");
    }
}

#[test]
fn exif_rotated_jpegs_are_kept_upright() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = common::exif_rotated_jpegs();
    for f in files.iter().filter(|f| f.exists()) {
        let name = f.file_name().and_then(|n| n.to_str()).expect("name");
        let bytes = std::fs::read(f).expect("jpeg");
        common::write(dir.path(), name, &bytes);
        // With restart markers too (the device entropy path), its EXIF kept.
        use stoker::decode::jpeg::transcode::{add_restarts, TranscodeOptions, Transcoded};
        if let Transcoded::Written { bytes, .. } =
            add_restarts(&bytes, &TranscodeOptions::default())
        {
            common::write(dir.path(), &format!("rst_{name}"), &bytes);
        }
    }
    let subset = Dataset::flat(dir.path()).expect("folder").all();
    let n = subset.len() as u64;
    assert!(n >= 2);
    let aug = Augment::new()
        .random_resized_crop(40, (0.08, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .dtype(DType::U8);
    // Room for every image (the corpus's photos are large).
    let budget: u64 = places(&subset).iter().sum();
    let (cpu, _) = run(&subset, &aug, BackendKind::Cpu, 2, |b| {
        b.cache_bytes(budget)
    });
    for backend in devices() {
        let (dev, _) = run(&subset, &aug, backend, 2, |b| b.device_cache_bytes(budget));
        check(&cpu, &dev);
        assert_eq!(dev[0].stats.gpu_decoded, n);
        assert!(dev[0].stats.gpu_entropy >= 1, "a restart-marked file");
        assert_eq!(dev[1].stats.device_cache_hits, n);
    }
}

#[test]
fn reports_and_warnings_are_the_same_in_every_epoch() {
    // Clean JPEGs, a JPEG with extraneous bytes (a warning, kept with the entry), a PNG
    // (decoded on the CPU and uploaded once, then kept), a damaged and an unreadable file
    // (reported in every epoch, never kept).
    let dir = tempfile::tempdir().expect("tempdir");
    let data = common::data_dir();
    for (from, to) in [
        ("samples/photo/skimage_coffee.jpg", "a.jpg"),
        ("samples/science/skimage_camera.jpg", "b.jpg"),
        ("jpeg/jd_extraneous-data.jpg", "c.jpg"),
        ("formats/coffee.png", "d.png"),
        ("jpeg/go_video-001_progressive_truncated.jpg", "e.jpg"),
        ("jpeg/jd_crash_missing-sof.jpg", "f.jpg"),
    ] {
        let bytes = std::fs::read(data.join(from)).expect("read");
        common::write(dir.path(), to, &bytes);
    }
    let subset = Dataset::flat(dir.path()).expect("folder").all();
    let aug = augment();
    for policy in [stoker::OnError::Skip, stoker::OnError::Replace] {
        let (cpu, _) = run(&subset, &aug, BackendKind::Cpu, 3, |b| {
            b.cache_bytes(HOST).on_error(policy)
        });
        assert!(!cpu[0].errors.is_empty(), "a file is reported");
        assert!(
            !cpu[0].warnings.is_empty(),
            "a file is delivered with a warning"
        );
        if policy == stoker::OnError::Skip {
            // (Under `Replace` each epoch draws its own replacements.)
            for e in &cpu[1..] {
                assert_eq!(e.errors, cpu[0].errors);
                assert_eq!(e.warnings, cpu[0].warnings);
            }
        }
        for backend in devices() {
            println!("{backend}, {policy:?}:");
            let (dev, _) = run(&subset, &aug, backend, 3, |b| {
                b.device_cache_bytes(HOST).on_error(policy)
            });
            check(&cpu, &dev);
            let kept = dev[2].stats.device_cache_hits;
            assert!(kept >= 4, "{kept} kept: the decodable files");
            if policy == stoker::OnError::Skip {
                // (A replacement is read and decoded afresh, as on the CPU backend.)
                assert_eq!(dev[2].stats.cpu_fallbacks, 0, "the PNG is kept too");
                assert_eq!(dev[2].stats.bytes_read, dev[1].stats.bytes_read);
            }
        }
    }
}

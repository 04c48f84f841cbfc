//! Pipeline invariants: exactly-once delivery or a report, under every error policy, with
//! corrupt, truncated, empty, missing and non-image files mixed in; fixed validation order;
//! disjoint covering shards; statistics.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use stoker::{
    Augment, BackendKind, DType, Dataset, Error, OnError, Pipeline, SampleErrorKind, SplitSpec,
    Subset,
};

/// Writes a file list with good and bad samples; returns (list path, bad relative paths).
fn mixed_list(dir: &Path) -> Mixed {
    let mut rng = common::TestRng(42);
    let mut lines = Vec::new();
    for i in 0..30 {
        let (w, h) = (20 + rng.below(30) as u32, 20 + rng.below(30) as u32);
        let name = format!("good/{i:02}.png");
        common::write(
            dir,
            &name,
            &common::png_rgb(w, h, &common::random_rgb(&mut rng, w, h)),
        );
        lines.push(format!("{name} {}", i % 3));
    }
    let data = common::data_dir().join("jpeg");
    for real in [
        "ljt_testorig.jpg",
        "go_video-001_q50_444.jpg",
        "jd_moz_jpg-gray.jpg",
    ] {
        let bytes = std::fs::read(data.join(real)).expect("bundled jpeg");
        common::write(dir, &format!("good/{real}"), &bytes);
        lines.push(format!("good/{real} 1"));
    }
    let jpeg = std::fs::read(data.join("ljt_testorig.jpg")).expect("bundled jpeg");
    let mut bad = BTreeMap::new();
    let mut add = |name: &str, bytes: Option<Vec<u8>>, kind: SampleErrorKind| {
        if let Some(b) = bytes {
            common::write(dir, name, &b);
        }
        lines.push(format!("{name} 0"));
        bad.insert(name.to_string(), kind);
    };
    add(
        "bad/truncated.jpg",
        Some(jpeg[..jpeg.len() / 3].to_vec()),
        SampleErrorKind::Decode,
    );
    add("bad/empty.jpg", Some(Vec::new()), SampleErrorKind::Decode);
    add("bad/missing.jpg", None, SampleErrorKind::Io);
    add(
        "bad/notes.jpg",
        Some(b"these are not the pixels you are looking for".to_vec()),
        SampleErrorKind::Decode,
    );
    let mut corrupt = jpeg.clone();
    for b in corrupt.iter_mut().skip(700).step_by(3) {
        *b = 0xFF;
    }
    add("bad/corrupt.jpg", Some(corrupt), SampleErrorKind::Decode);
    let bomb = std::fs::read(data.join("jd_crash_max_size.jpg")).expect("bomb");
    add("bad/bomb.jpg", Some(bomb), SampleErrorKind::Limit);
    add(
        "bad/zero_height.jpg",
        Some(std::fs::read(data.join("jd_crash_null_height.jpg")).expect("file")),
        SampleErrorKind::Decode,
    );
    add(
        "bad/png_as_jpg.jpg",
        Some(std::fs::read(data.join("jd_moz_jpg-size-6x6.jpg")).expect("file")),
        SampleErrorKind::Decode,
    );
    let list = dir.join("list.txt");
    std::fs::write(&list, lines.join("\n")).expect("list");
    (list, bad)
}

/// What a file list of [`mixed_list`] holds: the list, and the bad files with their kinds.
type Mixed = (std::path::PathBuf, BTreeMap<String, SampleErrorKind>);

/// Runs `check` on a fresh [`mixed_list`] for every backend of this build and machine.
fn on_every_backend(check: fn(BackendKind, Mixed)) {
    for backend in common::backends() {
        let dir = tempfile::tempdir().expect("tempdir");
        check(backend, mixed_list(dir.path()));
    }
}

fn pipeline(subset: Subset, policy: OnError, batch: usize, backend: BackendKind) -> Pipeline {
    Pipeline::builder(subset)
        .backend(backend)
        .augment(
            Augment::new()
                .random_resized_crop(16, (0.2, 1.0), (0.75, 1.33))
                .flip_horizontal(0.5),
        )
        .batch_size(batch)
        .readers(3)
        .workers(2)
        .on_error(policy)
        .seed(5)
        .build()
        .expect("pipeline")
}

#[test]
fn skip_delivers_every_good_sample_once_and_reports_every_bad_one() {
    on_every_backend(skip_on);
}

fn skip_on(backend: BackendKind, mixed: Mixed) {
    let (list, bad) = mixed;
    let data = Dataset::files(&list).expect("list");
    let all: BTreeMap<u64, String> = data
        .samples()
        .iter()
        .map(|s| (s.id, s.path.clone()))
        .collect();
    // "The PNG named .jpg" is a real PNG: it decodes. Only truly bad files are bad.
    let mut bad = bad;
    bad.remove("bad/png_as_jpg.jpg");
    let pipe = pipeline(data.all(), OnError::Skip, 7, backend);
    for epoch in 0..3 {
        let mut delivered = Vec::new();
        let mut reported = BTreeMap::new();
        let mut ep = pipe.epoch(epoch).expect("epoch");
        for b in ep.by_ref() {
            let b = b.expect("skip never fails the epoch");
            assert!(b.len() <= 7);
            assert_eq!(b.labels().len(), b.len());
            delivered.extend_from_slice(b.ids());
            for e in b.errors() {
                assert!(
                    reported.insert(e.path.clone(), e.kind).is_none(),
                    "reported twice: {}",
                    e.path
                );
                assert_eq!(all.get(&e.id), Some(&e.path));
                assert!(!e.reason.is_empty());
            }
        }
        let set: BTreeSet<u64> = delivered.iter().copied().collect();
        assert_eq!(set.len(), delivered.len(), "a sample was delivered twice");
        let reported_ids: BTreeSet<u64> = all
            .iter()
            .filter(|(_, p)| reported.contains_key(*p))
            .map(|(i, _)| *i)
            .collect();
        assert!(set.is_disjoint(&reported_ids));
        assert_eq!(
            set.len() + reported_ids.len(),
            all.len(),
            "a sample vanished"
        );
        assert_eq!(reported, bad, "reported the wrong files or kinds");
        let st = ep.stats();
        assert_eq!(st.samples_reported as usize, bad.len());
        assert_eq!(st.samples_delivered as usize, all.len() - bad.len());
        assert_eq!(st.errors.len(), bad.len());
        assert!((0.0..=1.0).contains(&st.input_wait_fraction));
        assert!(st.decode_seconds > 0.0 && st.read_seconds > 0.0);
        match backend {
            BackendKind::Wgpu => {
                assert!(st.device_submit_seconds > 0.0);
                // The 30 PNGs (and the PNG named .jpg) are decoded by the CPU; the JPEGs
                // on the device.
                assert_eq!(st.cpu_fallbacks, 31, "{st:?}");
                assert_eq!(st.gpu_decoded, 3, "{st:?}");
            }
            _ => assert!(st.augment_seconds > 0.0),
        }
    }
    let total = pipe.stats();
    assert_eq!(total.samples_reported as usize, 3 * bad.len());
}

#[test]
fn replace_fills_every_slot_and_reports_the_failure() {
    on_every_backend(replace_on);
}

fn replace_on(backend: BackendKind, mixed: Mixed) {
    let (list, mut bad) = mixed;
    bad.remove("bad/png_as_jpg.jpg");
    let data = Dataset::files(&list).expect("list");
    let n = data.len();
    let ids: BTreeSet<u64> = data.samples().iter().map(|s| s.id).collect();
    let pipe = pipeline(data.all(), OnError::Replace, 8, backend);
    let mut first = Vec::new();
    for epoch in 0..2 {
        let mut own = BTreeSet::new();
        let mut failed = BTreeSet::new();
        let mut sizes = Vec::new();
        let mut order = Vec::new();
        for b in pipe.epoch(epoch).expect("epoch") {
            let b = b.expect("replace never fails the epoch");
            sizes.push(b.len());
            order.extend_from_slice(b.ids());
            let replaced: BTreeSet<usize> = b.replacements().iter().map(|r| r.slot).collect();
            for r in b.replacements() {
                assert_eq!(b.ids()[r.slot], r.by_id);
                assert!(b.errors().iter().any(|e| e.id == r.failed_id));
                failed.insert(r.failed_id);
            }
            for (k, id) in b.ids().iter().enumerate() {
                if !replaced.contains(&k) {
                    assert!(own.insert(*id), "delivered twice");
                }
            }
        }
        assert_eq!(
            sizes.iter().sum::<usize>(),
            n,
            "replace keeps every slot filled"
        );
        assert!(sizes[..sizes.len() - 1].iter().all(|&s| s == 8));
        assert_eq!(failed.len(), bad.len());
        assert!(own.is_disjoint(&failed));
        let union: BTreeSet<u64> = own.union(&failed).copied().collect();
        assert_eq!(union, ids);
        if epoch == 0 {
            first = order;
        } else {
            assert_ne!(first, order, "two epochs in the same order");
        }
    }
    // Deterministic: the same epoch again gives the same replacements.
    let again: Vec<u64> = pipe
        .epoch(0)
        .expect("epoch")
        .flat_map(|b| b.expect("ok").ids().to_vec())
        .collect();
    assert_eq!(again, first);
}

#[test]
fn fail_stops_the_epoch_with_the_sample_error() {
    on_every_backend(fail_on);
}

fn fail_on(backend: BackendKind, mixed: Mixed) {
    let (list, bad) = mixed;
    let pipe = pipeline(
        Dataset::files(&list).expect("list").all(),
        OnError::Fail,
        4,
        backend,
    );
    let mut ep = pipe.epoch(0).expect("epoch");
    let mut err = None;
    for b in ep.by_ref() {
        if let Err(e) = b {
            err = Some(e);
            break;
        }
    }
    match err {
        Some(Error::Sample(e)) => assert!(bad.contains_key(&e.path), "{e}"),
        other => panic!("expected a sample error, got {other:?}"),
    }
    assert!(ep.next().is_none(), "the epoch goes on after a failure");
}

#[test]
fn validation_order_is_fixed_and_shards_cover_the_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 4, 10, 3);
    let split = Dataset::image_folder(dir.path())
        .expect("folder")
        .split(SplitSpec::fraction(0.25).seed(1))
        .expect("split");
    let val = Pipeline::builder(split.val())
        .augment(Augment::validation(16))
        .batch_size(3)
        .build()
        .expect("pipeline");
    let expected: Vec<u64> = split.val().samples().iter().map(|s| s.id).collect();
    for epoch in 0..3 {
        let got: Vec<u64> = val
            .epoch(epoch)
            .expect("epoch")
            .flat_map(|b| b.expect("ok").ids().to_vec())
            .collect();
        assert_eq!(got, expected, "validation order changed in epoch {epoch}");
    }
    let train_ids: BTreeSet<u64> = split.train().samples().iter().map(|s| s.id).collect();
    assert!(train_ids.is_disjoint(&expected.iter().copied().collect()));
    for world in [1, 2, 3] {
        let mut seen = Vec::new();
        for rank in 0..world {
            let p = Pipeline::builder(split.train())
                .augment(Augment::new().resize(8, 8))
                .batch_size(4)
                .shard(rank, world)
                .seed(9)
                .build()
                .expect("pipeline");
            let mut ids = Vec::new();
            let mut delivered = 0;
            for b in p.epoch(2).expect("epoch") {
                let b = b.expect("ok");
                delivered += b.len();
                // Padding (repeats that even out the ranks) is marked; leave it out.
                ids.extend(
                    b.ids()
                        .iter()
                        .zip(b.repeated())
                        .filter(|(_, &r)| !r)
                        .map(|(id, _)| *id),
                );
            }
            assert_eq!(delivered, p.sampler().epoch_order(2).len());
            assert_eq!(ids.len(), delivered - p.sampler().padding());
            seen.extend(ids);
        }
        let set: BTreeSet<u64> = seen.iter().copied().collect();
        assert_eq!(set.len(), seen.len(), "shards overlap (world {world})");
        assert_eq!(
            set, train_ids,
            "shards do not cover the epoch (world {world})"
        );
    }
    // drop_last: only whole batches.
    let p = Pipeline::builder(split.train())
        .augment(Augment::new().resize(8, 8))
        .batch_size(7)
        .drop_last(true)
        .build()
        .expect("pipeline");
    let sizes: Vec<usize> = p
        .epoch(0)
        .expect("epoch")
        .map(|b| b.expect("ok").len())
        .collect();
    assert_eq!(sizes, vec![7; split.train().len() / 7]);
}

#[test]
fn holding_every_batch_does_not_deadlock() {
    for backend in common::backends() {
        hold_on(backend);
    }
}

fn hold_on(backend: BackendKind) {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 2, 10, 6);
    let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .backend(backend)
        .augment(Augment::new().resize(8, 8))
        .batch_size(2)
        .prefetch(2)
        .build()
        .expect("pipeline");
    let kept: Vec<_> = pipe
        .epoch(0)
        .expect("epoch")
        .collect::<Result<Vec<_>, _>>()
        .expect("ok");
    assert_eq!(kept.len(), 10);
    assert!(pipe.memory_in_flight() > 0);
}

#[test]
fn bad_configurations_are_errors_not_panics() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 1, 2, 6);
    let sub = || Dataset::image_folder(dir.path()).expect("folder").all();
    // No output size chosen: an error that says how to choose one, not a silent 224 x 224.
    match Pipeline::builder(sub()).build() {
        Err(Error::Config { setting, reason }) => {
            assert_eq!(setting, "augment");
            assert!(reason.contains("output size"), "{reason}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    let b = || Pipeline::builder(sub()).augment(Augment::new().resize(8, 8));
    assert!(b().build().is_ok());
    assert!(b().batch_size(0).build().is_err());
    assert!(b().workers(0).build().is_err());
    assert!(b().shard(2, 2).build().is_err());
    assert!(Pipeline::builder(sub())
        .augment(Augment::new().flip_horizontal(1.5))
        .build()
        .is_err());
    assert!(Pipeline::builder(sub())
        .augment(Augment::new().random_resized_crop(8, (0.5, 0.2), (1.0, 1.0)))
        .build()
        .is_err());
    assert!(Pipeline::builder(sub())
        .augment(Augment::new().normalize([0.5; 3], [0.0, 1.0, 1.0]))
        .build()
        .is_err());
    // CUDA by name is an error where there is no GPU (and fine where there is one).
    let cuda = b().backend(stoker::BackendKind::Cuda).build();
    if !common::cuda_present() {
        assert!(cuda.is_err());
    }
    assert!(b().backend(stoker::BackendKind::Auto).build().is_ok());
    assert!(Dataset::image_folder(dir.path().join("nope")).is_err());
}

/// A configuration whose batches cannot fit in memory (`--size 16384 --batch 64` aborted
/// allocating 206 GB) is a `Config` error of setting `memory` at `build`, naming the
/// figure; `memory_limit` moves the bound, exactly at the need.
#[test]
fn a_configuration_that_cannot_fit_is_refused_at_build_naming_the_figure() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 1, 2, 6);
    let sub = || Dataset::image_folder(dir.path()).expect("folder").all();
    let huge = Pipeline::builder(sub())
        .backend(BackendKind::Cpu)
        .augment(Augment::new().resize(16384, 16384).dtype(DType::F32))
        .batch_size(64)
        .build();
    // 16384 * 16384 * 3 * 4 bytes * 64 samples, two batch buffers in the ring.
    let batch: u64 = 16384 * 16384 * 3 * 4 * 64;
    match huge {
        Err(Error::Config { setting, reason }) => {
            assert_eq!(setting, "memory");
            assert!(
                reason.contains(&format!("({} bytes)", 2 * batch)),
                "{reason}"
            );
            assert!(reason.contains(&format!("({batch} bytes)")), "{reason}");
            assert!(reason.contains("16384x16384 f32"), "{reason}");
        }
        other => panic!("expected a memory error, got {other:?}"),
    }
    // 8 x 8 RGB u8, 4 per batch, 3 in the ring, a 1000-byte cache: 3 * 768 + 1000.
    let need = 3 * 8 * 8 * 3 * 4 + 1000;
    let small = |limit: u64| {
        Pipeline::builder(sub())
            .backend(BackendKind::Cpu)
            .augment(Augment::new().resize(8, 8))
            .batch_size(4)
            .prefetch(3)
            .cache_bytes(1000)
            .memory_limit(limit)
            .build()
    };
    assert!(small(need).is_ok());
    match small(need - 1) {
        Err(Error::Config { setting, reason }) => {
            assert_eq!(setting, "memory");
            assert!(reason.contains(&format!("{need} bytes")), "{reason}");
            assert!(reason.contains("cache"), "{reason}");
        }
        other => panic!("expected a memory error, got {other:?}"),
    }
}

#[test]
fn lenient_decoding_delivers_damaged_files_strict_reports_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jpeg = std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("jpeg");
    common::write(dir.path(), "a/cut.jpg", &jpeg[..jpeg.len() * 2 / 3]);
    common::write(dir.path(), "a/whole.jpg", &jpeg);
    let run = |strict: bool| {
        let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
            .augment(Augment::new().resize(8, 8))
            .batch_size(2)
            .strict_decode(strict)
            .build()
            .expect("pipeline");
        let b = common::first_batch(&pipe);
        (b.len(), b.errors().len())
    };
    assert_eq!(run(true), (1, 1));
    assert_eq!(run(false), (2, 0));
}

#[test]
fn file_size_limit_is_checked_before_reading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("jpeg");
    common::write(dir.path(), "a/big.jpg", &big);
    common::write(dir.path(), "a/small.png", &common::png_rgb(2, 2, &[9; 12]));
    let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .augment(Augment::new().resize(4, 4))
        .batch_size(2)
        .limits(stoker::Limits {
            max_bytes: 1000,
            ..stoker::Limits::default()
        })
        .build()
        .expect("pipeline");
    let b = common::first_batch(&pipe);
    assert_eq!(b.len(), 1);
    assert_eq!(b.errors().len(), 1);
    let e = &b.errors()[0];
    assert_eq!(
        (e.path.as_str(), e.kind),
        ("a/big.jpg", SampleErrorKind::Limit)
    );
    assert!(e.reason.contains("exceeds the limit"), "{}", e.reason);
}

#[test]
fn typed_image_accessors_say_which_dtype_the_batch_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 2, 3, 4);
    for backend in common::backends() {
        let data = Dataset::image_folder(dir.path()).expect("folder");
        let p = Pipeline::builder(data.all())
            .backend(backend)
            .augment(Augment::new().resize(8, 6))
            .batch_size(4)
            .build()
            .expect("pipeline");
        let b = common::first_batch(&p);
        // The default dtype is u8: asking for f32 is an error naming both, not an empty slice.
        match b.images::<f32>() {
            Err(Error::DType { asked, found }) => assert_eq!((asked, found), ("f32", "u8")),
            other => panic!("{backend:?}: expected a dtype error, got {other:?}"),
        }
        assert!(b.images::<half::f16>().is_err());
        let px = b.images::<u8>().expect("u8 images");
        assert_eq!(px.len(), 4 * 3 * 8 * 6);
        assert_eq!(px, b.raw_images().expect("raw"));
        let f = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
            .backend(backend)
            .augment(Augment::new().resize(8, 6).normalize([0.5; 3], [0.25; 3]))
            .batch_size(4)
            .build()
            .expect("pipeline");
        let b = common::first_batch(&f);
        let vals = b.images::<f32>().expect("normalize gives f32");
        assert_eq!(vals.len(), 4 * 3 * 8 * 6);
        assert!(matches!(
            b.images::<u8>(),
            Err(Error::DType { found: "f32", .. })
        ));
    }
}

/// The batches of `pipe`'s epoch `epoch`: (ids, labels, images' bytes, mix).
type Drawn = Vec<(
    Vec<u64>,
    Vec<Option<u32>>,
    Vec<u8>,
    Option<stoker::augment::mix::BatchMix>,
)>;

fn batches_of(pipe: &Pipeline, epoch: u64, classes: usize) -> Drawn {
    pipe.epoch(epoch)
        .expect("epoch")
        .map(|b| {
            let b = b.expect("batch");
            // Soft labels are the labels mixed as the images: each row sums to 1.
            let soft = b.soft_labels(classes).expect("soft labels");
            assert_eq!(
                soft,
                stoker::augment::mix::soft_labels(b.labels(), classes, b.mix()).expect("labels")
            );
            for row in soft.chunks(classes) {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6, "{row:?}");
            }
            (
                b.ids().to_vec(),
                b.labels().to_vec(),
                b.read_images().expect("images"),
                b.mix().copied(),
            )
        })
        .collect()
}

/// MixUp and CutMix on whole batches: every mixed batch is the same batch unmixed, mixed
/// by the reference (`stoker::augment::mix::apply`) with the draw the batch reports, for
/// f32 NCHW, f16 NHWC and u8 (CutMix) batches; the draws are the same for any number of
/// workers, differ between epochs, and with both on each batch gets one of the two.
#[test]
fn mixed_batches_are_the_unmixed_batches_mixed_as_drawn() {
    use stoker::augment::mix::{apply, MixKind};
    use stoker::Layout;
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 3, 9, 21);
    let data = Dataset::image_folder(dir.path()).expect("folder");
    let base = |dtype: DType, layout: Layout| {
        let a = Augment::new()
            .random_resized_crop(20, (0.3, 1.0), (0.75, 1.33))
            .flip_horizontal(0.5)
            .layout(layout);
        match dtype {
            DType::U8 => a,
            _ => a
                .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
                .dtype(dtype),
        }
    };
    let build = |aug: Augment, backend: BackendKind, workers: usize| {
        Pipeline::builder(data.clone().all())
            .backend(backend)
            .augment(aug)
            .batch_size(5)
            .workers(workers)
            .seed(77)
            .build()
            .expect("pipeline")
    };
    let cases = [
        (DType::F32, Layout::Nchw, Some(0.4), None),
        (DType::F16, Layout::Nhwc, None, Some(1.0)),
        (DType::U8, Layout::Nchw, None, Some(0.5)),
        (DType::F32, Layout::Nhwc, Some(0.2), Some(1.0)),
    ];
    for backend in common::backends() {
        for (dtype, layout, mixup, cutmix) in cases {
            let at = format!("{backend:?} {dtype:?} {layout:?} mixup {mixup:?} cutmix {cutmix:?}");
            let plain_aug = base(dtype, layout);
            let mut aug = plain_aug.clone();
            if let Some(a) = mixup {
                aug = aug.mixup(a);
            }
            if let Some(a) = cutmix {
                aug = aug.cutmix(a);
            }
            let plain = build(plain_aug, backend, 2);
            let mixed = build(aug.clone(), backend, 2);
            let mut kinds = BTreeSet::new();
            let mut draws = Vec::new();
            for epoch in 0..2 {
                let want = batches_of(&plain, epoch, 3);
                let got = batches_of(&mixed, epoch, 3);
                assert_eq!(want.len(), got.len(), "{at}");
                for ((ids, labels, mut images, none), (ids2, labels2, mixed_images, mix)) in
                    want.into_iter().zip(got)
                {
                    assert!(none.is_none());
                    assert_eq!((&ids, &labels), (&ids2, &labels2), "{at}");
                    let mix = mix.unwrap_or_else(|| panic!("{at}: a batch not mixed"));
                    kinds.insert(format!("{:?}", mix.kind));
                    if mix.kind == MixKind::CutMix {
                        let [x0, y0, x1, y1] = mix.rect;
                        assert!(
                            x0 <= x1 && x1 <= 20 && y0 <= y1 && y1 <= 20,
                            "{at}: {mix:?}"
                        );
                        let share = f64::from((x1 - x0) * (y1 - y0)) / 400.0;
                        assert_eq!(mix.lambda, 1.0 - share, "{at}");
                    } else {
                        assert!((0.0..=1.0).contains(&mix.lambda), "{at}: {mix:?}");
                    }
                    let (w, h) = (20, 20);
                    apply(&mix, &mut images, dtype, layout, ids.len(), w, h).expect("apply");
                    assert!(
                        images == mixed_images,
                        "{at}: batch {ids:?} differs from the reference"
                    );
                    draws.push((epoch, mix));
                }
            }
            // Both on: each batch one of the two (6 batches an epoch, 12 in all).
            if mixup.is_some() && cutmix.is_some() {
                assert_eq!(kinds.len(), 2, "{at}: {kinds:?}");
            }
            // The epochs draw differently; one worker draws as two.
            let by_epoch = |e: u64| {
                draws
                    .iter()
                    .filter(|d| d.0 == e)
                    .map(|d| d.1)
                    .collect::<Vec<_>>()
            };
            assert_ne!(by_epoch(0), by_epoch(1), "{at}");
            let one = build(aug, backend, 1);
            let again: Vec<_> = batches_of(&one, 1, 3)
                .into_iter()
                .map(|b| b.3.expect("mixed"))
                .collect();
            assert_eq!(again, by_epoch(1), "{at}");
        }
    }
}

/// What mixing cannot do is refused when the pipeline is built: MixUp of u8 batches, an
/// alpha that is not positive, a dataset with masks or with targets.
#[test]
fn mixing_refuses_what_it_cannot_mix() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 2, 2, 3);
    let sub = || Dataset::image_folder(dir.path()).expect("folder").all();
    let refused =
        |aug: Augment, sub: Subset, says: &str| match Pipeline::builder(sub).augment(aug).build() {
            Err(Error::Config { reason, .. }) => assert!(reason.contains(says), "{reason}"),
            other => panic!("expected a config error saying {says:?}, got {other:?}"),
        };
    let a = || Augment::new().resize(8, 8);
    refused(a().mixup(0.2), sub(), "f16 or f32");
    refused(a().dtype(DType::F32).mixup(0.0), sub(), "positive");
    refused(a().cutmix(f64::NAN), sub(), "positive");
    assert!(Pipeline::builder(sub())
        .augment(a().cutmix(1.0))
        .build()
        .is_ok());
    let with_targets = Dataset::from_samples(
        None,
        sub()
            .samples()
            .iter()
            .map(|s| {
                s.clone().with_targets(stoker::Targets {
                    classes: vec![1],
                    ..Default::default()
                })
            })
            .collect(),
        vec!["a".into(), "b".into()],
    )
    .expect("dataset")
    .all();
    refused(a().cutmix(1.0), with_targets, "targets");
    let masks = tempfile::tempdir().expect("tempdir");
    let files = common::decode_test_jpegs();
    let with_masks = common::jpegs_with_masks(masks.path(), &files[..2], 4);
    refused(a().cutmix(1.0), with_masks, "masks");
}

//! Helpers shared by the integration tests: generated images and temporary datasets.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod outcomes;
pub mod peak_alloc;

/// The repository's bundled test data (`STOKER_TEST_DATA` overrides it: test binaries
/// built here and run on another machine, as `scripts/device-check.sh` does).
pub fn data_dir() -> PathBuf {
    match std::env::var_os("STOKER_TEST_DATA") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data"),
    }
}

/// The shared corpus beside the checkout, when present (`STOKER_CORPUS` overrides it).
pub fn corpus_dir() -> Option<PathBuf> {
    let p = match std::env::var_os("STOKER_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
    };
    p.is_dir().then_some(p)
}

/// [`corpus_dir`], or `None` said on stderr: the test skips.
pub fn corpus_or_skip() -> Option<PathBuf> {
    let corpus = corpus_dir();
    if corpus.is_none() {
        eprintln!("skipped: the shared corpus is not present (set STOKER_CORPUS to run it)");
    }
    corpus
}

/// One bundled file of each decodable format under `data_dir()/formats`, in the order
/// jpg, png, webp, bmp, tiff, gif.
pub const FORMAT_FILES: [&str; 6] = [
    "coffee.jpg",
    "coffee.png",
    "coffee_lossless.webp",
    "coffee.bmp",
    "coffee_lzw.tiff",
    "coffee_2frames.gif",
];

/// The CRC-32 of PNG chunks (ISO 3309), bit by bit.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// Makes a FIFO (named pipe) at `p`.
pub fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .expect("mkfifo");
    assert!(ok.success(), "mkfifo {}", p.display());
}

/// Appends a PNG chunk: its length, `kind`, `data` and the CRC of the last two.
pub fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// The JSON report on stdout of a finished `stoker ... --json` run (`what`, for the
/// message), which must have succeeded (else the run's stderr is shown).
pub fn json_report(out: &std::process::Output, what: &str) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// A fresh seed each run (`STOKER_TEST_SEED` repeats one), said on stderr with `what` so
/// that a failure can be replayed.
pub fn fresh_seed(what: &str) -> u64 {
    let seed = match std::env::var("STOKER_TEST_SEED") {
        Ok(s) => s.parse().unwrap_or(1),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    };
    eprintln!("{what}: seed {seed} (STOKER_TEST_SEED={seed} repeats it)");
    seed
}

/// A small deterministic generator for test inputs (SplitMix64).
pub struct TestRng(pub u64);

impl TestRng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Encodes an 8-bit RGB image as PNG.
pub fn png_rgb(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().expect("png header");
        w.write_image_data(rgb).expect("png data");
    }
    out
}

/// A dataset of `n` in-memory samples `s/0000.EXT`, `s/0001.EXT`, ... of class 0, each
/// holding `bytes`.
pub fn in_memory_dataset(bytes: Vec<u8>, n: usize, ext: &str) -> stoker::Dataset {
    let bytes: std::sync::Arc<[u8]> = bytes.into();
    let samples = (0..n)
        .map(|i| {
            let path = format!("s/{i:04}.{ext}");
            stoker::Sample::in_memory(path, std::sync::Arc::clone(&bytes), Some(0))
        })
        .collect();
    stoker::Dataset::from_samples(None, samples, vec![]).expect("dataset")
}

/// Encodes a label plane as an 8-bit (ids < 256) or 16-bit gray PNG.
pub fn png_labels(width: u32, height: u32, ids: &[u16], sixteen: bool) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(png::ColorType::Grayscale);
        if sixteen {
            enc.set_depth(png::BitDepth::Sixteen);
        } else {
            enc.set_depth(png::BitDepth::Eight);
        }
        let mut w = enc.write_header().expect("png header");
        let bytes: Vec<u8> = if sixteen {
            ids.iter().flat_map(|v| v.to_be_bytes()).collect()
        } else {
            ids.iter().map(|&v| v as u8).collect()
        };
        w.write_image_data(&bytes).expect("png data");
    }
    out
}

/// A random RGB image with smooth-ish content.
pub fn random_rgb(rng: &mut TestRng, width: u32, height: u32) -> Vec<u8> {
    let (a, b, c) = (rng.below(7) + 1, rng.below(5) + 1, rng.below(255));
    (0..width * height)
        .flat_map(|i| {
            let (x, y) = ((i % width) as u64, (i / width) as u64);
            [
                ((x * a + c) % 256) as u8,
                ((y * b + c) % 256) as u8,
                ((x + y + rng.below(16)) % 256) as u8,
            ]
        })
        .collect()
}

/// Writes `bytes` to `dir/rel`, creating folders.
pub fn write(dir: &Path, rel: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&p, bytes).expect("write");
    p
}

/// An image-folder tree of `per_class` random PNGs in each of `classes` classes.
pub fn png_folder(dir: &Path, classes: usize, per_class: usize, seed: u64) {
    let mut rng = TestRng(seed);
    for c in 0..classes {
        for i in 0..per_class {
            let (w, h) = (24 + rng.below(40) as u32, 24 + rng.below(40) as u32);
            let img = random_rgb(&mut rng, w, h);
            write(
                dir,
                &format!("class{c}/img{i:03}.png"),
                &png_rgb(w, h, &img),
            );
        }
    }
}

/// The first batch of epoch 0 (panics with a message if there is none or it failed).
pub fn first_batch(pipe: &stoker::Pipeline) -> stoker::Batch {
    pipe.epoch(0)
        .expect("epoch")
        .next()
        .expect("a batch")
        .expect("batch ok")
}

/// `Some` of what was `found`; where it is missing, `None`, said on stderr (the test
/// skips), unless the environment variable `require` is `1`, which makes that a failure.
pub fn require_or_skip<T>(
    found: Result<T, impl std::fmt::Display>,
    require: &str,
    what: &str,
) -> Option<T> {
    match found {
        Ok(v) => Some(v),
        Err(e) => {
            assert!(
                std::env::var(require).as_deref() != Ok("1"),
                "{require}=1 but no {what}: {e}"
            );
            eprintln!("skipped: no {what} ({e})");
            None
        }
    }
}

/// A wgpu context on this machine's adapter, software adapters allowed. `None` (the test
/// skips, saying so) when there is none, unless `STOKER_REQUIRE_WGPU=1`, which makes a
/// missing adapter a failure. In a build without the `wgpu` feature the stand-in says so
/// (no `cfg` here: the names exist in every build).
#[allow(dead_code)]
pub fn wgpu_context() -> Option<stoker::backend::wgpu::WgpuContext> {
    static CTX: std::sync::OnceLock<Result<stoker::backend::wgpu::WgpuContext, String>> =
        std::sync::OnceLock::new();
    let ctx = CTX
        .get_or_init(|| stoker::backend::wgpu::WgpuContext::new(true).map_err(|e| e.to_string()));
    require_or_skip(ctx.as_ref(), "STOKER_REQUIRE_WGPU", "wgpu adapter").cloned()
}

/// The JPEGs the decode-path tests run over: every `.jpg` in `tests/data/jpeg` and
/// `tests/data/samples` (recursively), and every corpus `.jpg` that has a reference `.png`
/// beside it. Sorted, so runs are repeatable.
pub fn decode_test_jpegs() -> Vec<PathBuf> {
    fn walk(dir: &Path, with_png_only: bool, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, with_png_only, out);
            } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("jpg"))
                && (!with_png_only || p.with_extension("png").is_file())
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&data_dir().join("jpeg"), false, &mut out);
    walk(&data_dir().join("samples"), false, &mut out);
    if let Some(corpus) = corpus_dir() {
        walk(&corpus, true, &mut out);
    }
    out.sort();
    out
}

/// The backends tests run on: the CPU, and wgpu when an adapter exists (software allowed;
/// with `STOKER_REQUIRE_WGPU=1` a missing adapter fails the test instead).
#[allow(dead_code)]
pub fn backends() -> Vec<stoker::BackendKind> {
    let mut v = vec![stoker::BackendKind::Cpu];
    if wgpu_context().is_some() {
        v.push(stoker::BackendKind::Wgpu);
    }
    if cuda_present() {
        v.push(stoker::BackendKind::Cuda);
    }
    v
}

/// The batcher of every device backend present ([`backends`] less the CPU's), reached
/// through `Backend::batcher` as the pipeline reaches it (a software adapter allowed).
#[allow(dead_code)]
pub fn device_batchers() -> Vec<(
    stoker::BackendKind,
    Box<dyn stoker::backend::device::DeviceBatcher>,
)> {
    use stoker::backend::device::BatcherConfig;
    use stoker::backend::{select_with, BackendOptions};
    let opts = BackendOptions {
        allow_software_gpu: true,
        ..Default::default()
    };
    backends()
        .into_iter()
        .filter_map(|kind| {
            let selected = select_with(kind, 1, &opts).expect("a backend backends() found");
            let batcher = selected
                .backend
                .batcher(&BatcherConfig::default())
                .expect("the backend's batcher")?;
            Some((kind, batcher))
        })
        .collect()
}

/// A JPEG (quality 85, chroma `subsamp`) of `w` x `h` random pixels from
/// [`random_rgb`].
#[allow(dead_code)]
pub fn random_jpeg(rng: &mut TestRng, w: u32, h: u32, subsamp: turbojpeg::Subsamp) -> Vec<u8> {
    rgb_jpeg(&random_rgb(rng, w, h), w, h, 85, subsamp)
}

/// A random JPEG of `min` to `min + span - 1` pixels a side (the width drawn first),
/// 4:4:4 when `full_chroma`, else 4:2:0.
pub fn random_jpeg_between(rng: &mut TestRng, min: u32, span: u64, full_chroma: bool) -> Vec<u8> {
    let (w, h) = (min + rng.below(span) as u32, min + rng.below(span) as u32);
    let sub = if full_chroma {
        turbojpeg::Subsamp::None
    } else {
        turbojpeg::Subsamp::Sub2x2
    };
    random_jpeg(rng, w, h, sub)
}

/// `rgb` (`w` x `h`, RGB) encoded by libjpeg-turbo at `quality` with chroma `subsamp`.
#[allow(dead_code)]
pub fn rgb_jpeg(rgb: &[u8], w: u32, h: u32, quality: i32, subsamp: turbojpeg::Subsamp) -> Vec<u8> {
    let image = turbojpeg::Image {
        pixels: rgb,
        width: w as usize,
        pitch: 3 * w as usize,
        height: h as usize,
        format: turbojpeg::PixelFormat::RGB,
    };
    turbojpeg::compress(image, quality, subsamp)
        .expect("encode")
        .to_vec()
}

/// Where the first scan's entropy-coded data of the JPEG `b` starts.
#[allow(dead_code)]
pub fn scan_start(b: &[u8]) -> Option<usize> {
    let i = b.windows(2).position(|w| w == [0xFF, 0xDA])?;
    let len = usize::from(*b.get(i + 2)?) << 8 | usize::from(*b.get(i + 3)?);
    Some(i + 2 + len)
}

/// The JPEG `src` with one to three bits flipped between its first scan and its last two
/// bytes (its size and end marker kept).
#[allow(dead_code)]
pub fn mutant(src: &[u8], rng: &mut TestRng) -> Vec<u8> {
    let mut b = src.to_vec();
    let start = scan_start(&b).expect("a scan");
    let end = b.len() - 2;
    for _ in 0..1 + rng.below(3) {
        let at = start + rng.below((end - start) as u64) as usize;
        b[at] ^= 1 << rng.below(8);
    }
    b
}

/// Flips one to three bits of `jpeg`'s entropy-coded bytes in the bottom third of its
/// first scan, never making or breaking an FF (so the marker structure stays): crops
/// above the damage still see it through the whole file's verdict.
#[allow(dead_code)]
pub fn flip_in_bottom_third(jpeg: &mut [u8], rng: &mut TestRng) {
    let start = scan_start(jpeg).expect("scan");
    let start = start + (jpeg.len() - start) * 2 / 3;
    for _ in 0..1 + rng.below(3) {
        let at = start + rng.below((jpeg.len() - start - 2) as u64) as usize;
        let flipped = jpeg[at] ^ (1 << rng.below(8));
        if jpeg[at] != 0xFF && jpeg[at - 1] != 0xFF && flipped != 0xFF {
            jpeg[at] = flipped;
        }
    }
}

/// `jpeg` damaged one way or another between its first scan and its last two bytes (its
/// end-of-image marker kept): bits flipped ([`mutant`]), the data cut short by an
/// end-of-image marker, a byte taken out or a byte put in; with what was done, in words.
#[allow(dead_code)]
pub fn damaged(jpeg: &[u8], rng: &mut TestRng) -> (Vec<u8>, &'static str) {
    let start = scan_start(jpeg).expect("a scan");
    let end = jpeg.len() - 2;
    let at = start + rng.below((end - start) as u64) as usize;
    match rng.below(4) {
        0 => (mutant(jpeg, rng), "bits flipped"),
        1 => ([&jpeg[..at], &[0xFF, 0xD9][..]].concat(), "cut short"),
        2 => ([&jpeg[..at], &jpeg[at + 1..]].concat(), "a byte taken out"),
        _ => {
            let mut b = jpeg.to_vec();
            b.insert(at, rng.below(256) as u8);
            (b, "a byte put in")
        }
    }
}

/// Whether a CUDA device can be opened (driver, GPU and NVRTC). With
/// `STOKER_REQUIRE_CUDA=1` (set on GPU machines) its absence fails the test instead.
#[allow(dead_code)]
pub fn cuda_present() -> bool {
    cuda_device().is_some()
}

/// The CUDA device for tests, or `None` (with the reason printed) where there is none;
/// with `STOKER_REQUIRE_CUDA=1` a missing device fails the test.
#[allow(dead_code)]
pub fn cuda_device() -> Option<stoker::backend::cuda::CudaDevice> {
    require_or_skip(
        stoker::backend::cuda::CudaDevice::new(0),
        "STOKER_REQUIRE_CUDA",
        "CUDA device",
    )
}

/// The regular files below `dir`, recursively, sorted (none where it cannot be read).
#[allow(dead_code)]
pub fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_below(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

/// Luma sampling factors (chroma 1x1) and gray, for [`restart_jpeg`]: every layout the
/// device entropy path takes, odd ones (4x1, 1x4, 3x1) included.
pub const RESTART_SAMPLINGS: [((i32, i32), bool); 8] = [
    ((1, 1), false),
    ((2, 1), false),
    ((2, 2), false),
    ((1, 1), true),
    ((1, 2), false),
    ((4, 1), false),
    ((1, 4), false),
    ((3, 1), false),
];

/// A random JPEG of `w x h` with restart markers, one every `mcus` MCUs (or, when `mcus`
/// is 0, every `rows` MCU rows; none when both are 0), with luma sampling `(h, v)` (chroma 1x1) or one
/// component (`gray`). Encoded by the libjpeg the crate links (mozjpeg's build of
/// libjpeg-turbo, set to one sequential scan), which exposes
/// the restart parameters the TurboJPEG wrapper does not. A test binary must not also
/// encode with the TurboJPEG wrapper ([`random_jpeg`]): the two libjpeg builds define
/// the same compression symbols, and the linker mixes them.
pub fn restart_jpeg(
    rng: &mut TestRng,
    w: u32,
    h: u32,
    samp: (i32, i32),
    gray: bool,
    mcus: u32,
    rows: i32,
) -> Vec<u8> {
    use mozjpeg_sys as ffi;
    let channels = if gray { 1 } else { 3 };
    let pixels: Vec<u8> = if gray {
        random_rgb(rng, w, h)
            .chunks_exact(3)
            .map(|p| p[1])
            .collect()
    } else {
        random_rgb(rng, w, h)
    };
    let quality = 50 + rng.below(50) as i32;
    // SAFETY: libjpeg's documented compression sequence on a zeroed, created compressor
    // with the default error manager (errors abort the test: `error_exit` exits); rows
    // point into `pixels`, `w * channels` bytes each; the output buffer libjpeg allocates
    // is copied, then freed.
    unsafe {
        let mut err: ffi::jpeg_error_mgr = std::mem::zeroed();
        let mut c: ffi::jpeg_compress_struct = std::mem::zeroed();
        c.common.err = ffi::jpeg_std_error(&mut err);
        ffi::jpeg_create_compress(&mut c);
        let mut out: *mut u8 = std::ptr::null_mut();
        let mut size: std::ffi::c_ulong = 0;
        ffi::jpeg_mem_dest(&mut c, &mut out, &mut size);
        c.image_width = w;
        c.image_height = h;
        c.input_components = channels as i32;
        c.in_color_space = if gray {
            ffi::J_COLOR_SPACE::JCS_GRAYSCALE
        } else {
            ffi::J_COLOR_SPACE::JCS_RGB
        };
        ffi::jpeg_set_defaults(&mut c);
        // mozjpeg's defaults are progressive: one sequential scan instead. (Its
        // `jpeg_c_set_int_param` writes out of bounds in this build: valgrind.)
        c.num_scans = 0;
        c.scan_info = std::ptr::null();
        ffi::jpeg_set_quality(&mut c, quality, 1);
        if !gray {
            (*c.comp_info).h_samp_factor = samp.0;
            (*c.comp_info).v_samp_factor = samp.1;
        }
        if mcus > 0 {
            c.restart_interval = mcus;
        } else {
            c.restart_in_rows = rows;
        }
        c.optimize_coding = i32::from(rng.below(2) == 0);
        ffi::jpeg_start_compress(&mut c, 1);
        let stride = (w * channels) as usize;
        while c.next_scanline < h {
            let row = pixels[c.next_scanline as usize * stride..].as_ptr();
            ffi::jpeg_write_scanlines(&mut c, &row, 1);
        }
        ffi::jpeg_finish_compress(&mut c);
        let v = std::slice::from_raw_parts(out, size as usize).to_vec();
        ffi::jpeg_destroy_compress(&mut c);
        libc::free(out.cast());
        v
    }
}

/// The JPEGs `files` copied into `dir/img` with random blocky label masks of their
/// (upright) size in `dir/masks` (8x8 cells of 5 classes, so nearest sampling shows), as
/// one subset.
#[allow(dead_code)]
pub fn jpegs_with_masks(dir: &Path, files: &[PathBuf], seed: u64) -> stoker::Subset {
    let mut rng = TestRng(seed);
    for entry in files {
        let bytes = std::fs::read(entry).expect("read");
        let info = stoker::decode::peek_info(&bytes).expect("headers");
        let (w, h) = info.oriented_size();
        let stem = entry.file_stem().and_then(|s| s.to_str()).expect("stem");
        write(dir, &format!("img/{stem}.jpg"), &bytes);
        let cells: Vec<u16> = (0..(w.div_ceil(8) * h.div_ceil(8)))
            .map(|_| rng.below(5) as u16 * 7)
            .collect();
        let ids: Vec<u16> = (0..h)
            .flat_map(|y| {
                let cells = &cells;
                (0..w).map(move |x| cells[((y / 8) * w.div_ceil(8) + x / 8) as usize])
            })
            .collect();
        write(
            dir,
            &format!("masks/{stem}.png"),
            &png_labels(w, h, &ids, false),
        );
    }
    stoker::Dataset::flat(dir.join("img"))
        .expect("images")
        .with_masks(dir.join("masks"))
        .expect("masks")
        .all()
}

/// EXIF-rotated JPEGs: one of `tests/data`, and five orientations of the shared corpus
/// where it is present.
#[allow(dead_code)]
pub fn exif_rotated_jpegs() -> Vec<PathBuf> {
    let mut files = vec![data_dir().join("jpeg/pil_hopper_orientation_6.jpg")];
    if let Some(corpus) = corpus_dir() {
        for o in [
            "landscape_2",
            "landscape_3",
            "landscape_5",
            "portrait_6",
            "portrait_8",
        ] {
            files.push(corpus.join(format!("jpeg/exif_{o}.jpg")));
        }
    }
    files
}

/// The largest difference between two images' values, in levels, over the shorter one's
/// length.
pub fn max_diff(a: &[u8], b: &[u8]) -> u8 {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap_or(0)
}

/// A pipeline over `subset` on `backend` with `aug`: batches of 4, two workers and two
/// readers, seeded with `seed`.
pub fn small_pipeline(
    subset: &stoker::Subset,
    aug: &stoker::Augment,
    backend: stoker::BackendKind,
    seed: u64,
) -> stoker::PipelineBuilder {
    stoker::Pipeline::builder(subset.clone())
        .backend(backend)
        .augment(aug.clone())
        .batch_size(4)
        .workers(2)
        .readers(2)
        .seed(seed)
}

/// A pipeline over all of `data`, resized to 16x16 in batches of `batch`, skipping the
/// samples that fail.
pub fn skipping_pipeline(data: &stoker::Dataset, batch: usize) -> stoker::Pipeline {
    stoker::Pipeline::builder(data.clone().all())
        .augment(stoker::Augment::new().resize(16, 16))
        .batch_size(batch)
        .on_error(stoker::OnError::Skip)
        .build()
        .expect("pipeline")
}

/// One delivered sample: its path in `data`, its label and its number of boxes.
pub type DeliveredSample = (String, Option<u32>, usize);

/// Epoch `epoch` of `pipe` over `data`: each delivered sample, sorted, and each sample
/// error reported, in order.
pub fn delivered_and_reported(
    pipe: &stoker::Pipeline,
    data: &stoker::Dataset,
    epoch: u64,
) -> (Vec<DeliveredSample>, Vec<stoker::SampleError>) {
    let mut delivered = Vec::new();
    let reported = walk_epoch(pipe, epoch, |b| {
        for (slot, id) in b.ids().iter().enumerate() {
            let s = data.samples().iter().find(|s| s.id == *id).expect("id");
            let targets = b.targets().get(slot).and_then(Option::as_ref);
            let boxes = targets.map_or(0, |t| t.boxes.len());
            delivered.push((s.path.clone(), b.labels()[slot], boxes));
        }
    });
    delivered.sort();
    (delivered, reported)
}

/// Hands each batch of epoch `epoch` of `pipe` (none may fail) to `each`; returns every
/// sample error the batches reported, in order.
pub fn walk_epoch(
    pipe: &stoker::Pipeline,
    epoch: u64,
    mut each: impl FnMut(&stoker::Batch),
) -> Vec<stoker::SampleError> {
    let mut reported = Vec::new();
    for b in pipe.epoch(epoch).expect("epoch") {
        let b = b.expect("batch");
        each(&b);
        reported.extend(b.errors().iter().cloned());
    }
    reported
}

/// Epoch 0 of `pipe`: the samples delivered, and each error reported, as text.
pub fn first_epoch(pipe: &stoker::Pipeline) -> (usize, Vec<String>) {
    let (mut delivered, mut errors) = (0, Vec::new());
    for b in pipe.epoch(0).expect("epoch") {
        let b = b.expect("batch");
        delivered += b.len();
        errors.extend(b.errors().iter().map(|e| e.to_string()));
    }
    (delivered, errors)
}

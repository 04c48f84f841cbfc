//! Decode (`idct`, `color`, `orient`, `pack_planar`): every test JPEG at IDCT scales 1/1,
//! 1/2, 1/4, 1/8, whole and in random windows, equal bit for bit to the scalar oracle
//! (`decode::jpeg::{idct, color}`) and within 2 levels of the CPU decoder; CPU-decoded
//! files through the passthrough path; small bindings split into chunks; EXIF-rotated
//! JPEGs through a whole [`BatchPlan`], equal to the oracle turned upright, and through the
//! backend's own decode, within 2 levels of the CPU decoder's upright image; the hardware
//! decoder's output (planes, or the CPU's RGB rows) placed by `pack_planar`.

use std::path::{Path, PathBuf};

use stoker::backend::device::job::{prepare_with, HardwareDecode};
use stoker::backend::device::{
    prepare, BatchPlan, Buffer, CoeffPool, DecodeInput, DeviceImage, DeviceSample, Kernel,
    Prepared, Step,
};
use stoker::decode::jpeg::coeffs::{pack, CoeffStatus, Coefficients, PackedJpeg};
use stoker::decode::jpeg::color::decode_window;
use stoker::decode::jpeg::idct::idct_component;
use stoker::decode::jpeg::read_coefficients;
use stoker::decode::{check_limits, cpu, peek_info, DecodeOptions, Format, Image8};

use super::orient::upright;
use super::{bytes_to_words, garbage, Buffers, Executor};
use crate::common::{corpus_dir, data_dir, decode_test_jpegs, TestRng};

/// Decoded pixels may differ from the CPU decoder's by this many levels (the hybrid path
/// is exact by construction; the bound is the contract).
const DECODE_LEVELS: u8 = 2;

/// Runs `input`'s launches, at most `per_dim` workgroups along a grid dimension; returns
/// the windows buffer as words.
fn run_decode(e: &dyn Executor, input: &DecodeInput, per_dim: u64) -> Vec<u32> {
    let limits = e.limits();
    let launches = input
        .launches(limits.max_binding, per_dim.min(limits.per_dim))
        .expect("decode plan");
    let steps: Vec<Step> = launches.into_iter().map(Step::Launch).collect();
    let mut buffers = Buffers::default()
        .with(Buffer::DecodeInput, input.bytes().to_vec())
        .with(Buffer::Planes, garbage((input.plane_words() * 4).max(4)))
        .with(Buffer::Windows, garbage((input.window_words() * 4).max(4)));
    e.run(&steps, &mut buffers);
    bytes_to_words(buffers.get(Buffer::Windows))
}

/// The RGB of window `g` in the windows buffer (alpha must be 255).
fn window_rgb(words: &[u32], g: &DeviceImage) -> Vec<u8> {
    let n = (g.width * g.height) as usize;
    words[g.offset as usize..g.offset as usize + n]
        .iter()
        .flat_map(|w| {
            let b = w.to_le_bytes();
            assert_eq!(b[3], 255, "alpha");
            [b[0], b[1], b[2]]
        })
        .collect()
}

/// Largest channel difference between two images of the same size.
fn max_diff(a: &[u8], b: &[u8]) -> u8 {
    a.iter().zip(b).fold(0, |m, (a, b)| m.max(a.abs_diff(*b)))
}

/// Largest channel difference between a window and a CPU decode, on their overlap.
fn max_diff_vs_cpu(rgb: &[u8], g: &DeviceImage, cpu: &Image8) -> u8 {
    // The overlap, in the coordinates of the scaled full image.
    let (x0, y0) = (g.origin_x.max(cpu.origin.0), g.origin_y.max(cpu.origin.1));
    let x1 = (g.origin_x + g.width).min(cpu.origin.0 + cpu.width);
    let y1 = (g.origin_y + g.height).min(cpu.origin.1 + cpu.height);
    if x1 <= x0 {
        return 0;
    }
    let n = 3 * (x1 - x0) as usize;
    let at = |y: u32, (ox, oy): (u32, u32), width: u32| 3 * ((y - oy) * width + x0 - ox) as usize;
    (y0..y1)
        .map(|y| {
            let a = at(y, (g.origin_x, g.origin_y), g.width);
            let b = at(y, cpu.origin, cpu.width);
            max_diff(&rgb[a..a + n], &cpu.data[b..b + n])
        })
        .max()
        .unwrap_or(0)
}

/// A random non-empty window `[x0, y0, x1, y1)` of a `w x h` image.
fn random_window(rng: &mut TestRng, (w, h): (u32, u32)) -> [u32; 4] {
    let x0 = rng.below(u64::from(w)) as u32;
    let y0 = rng.below(u64::from(h)) as u32;
    let x1 = x0 + 1 + rng.below(u64::from(w - x0)) as u32;
    let y1 = y0 + 1 + rng.below(u64::from(h - y0)) as u32;
    [x0, y0, x1, y1]
}

/// Checks that a decoded window holds the `[x0, y0, x1, y1)` asked for.
fn assert_covers(img: &Image8, [x0, y0, x1, y1]: [u32; 4], what: &str) {
    let (ox, oy) = img.origin;
    assert!(
        ox <= x0 && oy <= y0 && ox + img.width >= x1 && oy + img.height >= y1,
        "{what}: got {}x{} at {ox},{oy}",
        img.width,
        img.height
    );
}

fn lenient(scale: u32, window: Option<[u32; 4]>) -> DecodeOptions {
    DecodeOptions {
        strict: false,
        orientation: false,
        scale,
        window,
        ..DecodeOptions::default()
    }
}

/// One pushed window: a label, its record, the oracle's pixels, the CPU decode.
struct Case {
    label: String,
    record: DeviceImage,
    oracle: Vec<u8>,
    cpu: Image8,
}

pub fn decode_matches_the_oracle_and_the_cpu(e: &dyn Executor) {
    let mut rng = TestRng(0xD1CE);
    let mut coeffs = Coefficients::default();
    let mut packed = PackedJpeg::default();
    // Per scale: the batch and its windows.
    let mut batches: Vec<(DecodeInput, Vec<Case>)> =
        (0..4).map(|_| (DecodeInput::new(), Vec::new())).collect();
    let (mut ready, mut fallback) = (0, 0);
    for path in decode_test_jpegs() {
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = std::fs::read(&path).expect("read");
        let Ok(info) = peek_info(&bytes) else {
            continue;
        };
        if info.format != Format::Jpeg
            || check_limits(&info, &DecodeOptions::default().limits).is_err()
        {
            continue;
        }
        let status = read_coefficients(&bytes, false, &mut coeffs);
        for (k, scale) in [1u32, 2, 4, 8].into_iter().enumerate() {
            let (input, cases) = &mut batches[k];
            match &status {
                Ok(CoeffStatus::Ready) => {
                    let full = coeffs.scaled_size(scale);
                    let mut windows = vec![None];
                    for _ in 0..2 {
                        windows.push(Some(random_window(&mut rng, full)));
                    }
                    for window in windows {
                        let w = window.unwrap_or([0, 0, full.0, full.1]);
                        let record = input.push_jpeg(&coeffs, scale, w).expect("push");
                        pack(&coeffs, scale, w, &mut packed).expect("pack");
                        let oracle = decode_window(&packed);
                        assert_eq!(
                            (
                                record.width,
                                record.height,
                                record.origin_x,
                                record.origin_y
                            ),
                            (
                                oracle.width,
                                oracle.height,
                                oracle.origin.0,
                                oracle.origin.1
                            )
                        );
                        let mut cpu_img = Image8::default();
                        cpu::decode_image(&bytes, &lenient(scale, window), &mut cpu_img)
                            .expect("cpu decode");
                        cases.push(Case {
                            label: format!("{file} 1/{scale} {w:?}"),
                            record,
                            oracle: oracle.data,
                            cpu: cpu_img,
                        });
                    }
                    ready += usize::from(k == 0);
                }
                Ok(CoeffStatus::CpuOnly(_)) => {
                    // The fallback: decoded on the CPU, copied into the windows.
                    let mut cpu_img = Image8::default();
                    cpu::decode_image(&bytes, &lenient(scale, None), &mut cpu_img)
                        .expect("cpu decode");
                    let record = input.push_rgb(&cpu_img).expect("push rgb");
                    assert_eq!((record.full_width, record.full_height), cpu_img.full);
                    cases.push(Case {
                        label: format!("{file} 1/{scale} (CPU fallback)"),
                        record,
                        oracle: cpu_img.data.clone(),
                        cpu: cpu_img,
                    });
                    fallback += usize::from(k == 0);
                }
                Err(_) => {}
            }
        }
    }
    let least = if corpus_dir().is_some() { 50 } else { 15 };
    assert!(ready >= least, "only {ready} files on the device path");
    assert!(fallback >= 1, "no file took the CPU fallback");
    let mut failures = Vec::new();
    for (k, (input, cases)) in batches.iter().enumerate() {
        let start = std::time::Instant::now();
        // A per-dimension limit that makes the larger grids two-dimensional.
        let words = run_decode(e, input, 512);
        let mut max_cpu = 0;
        let mut pixels = 0u64;
        for case in cases {
            let rgb = window_rgb(&words, &case.record);
            pixels += u64::from(case.record.width * case.record.height);
            if rgb != case.oracle {
                let n = rgb.iter().zip(&case.oracle).filter(|(a, b)| a != b).count();
                failures.push(format!(
                    "{}: {n} channel values differ from the oracle",
                    case.label
                ));
            }
            let d = max_diff_vs_cpu(&rgb, &case.record, &case.cpu);
            max_cpu = max_cpu.max(d);
            if d > DECODE_LEVELS {
                failures.push(format!("{}: max diff {d} from the CPU decode", case.label));
            }
        }
        println!(
            "scale 1/{}: {} windows, {pixels} pixels, {} upload bytes, max diff vs CPU {max_cpu}, {:.2?} on {}",
            1 << k,
            cases.len(),
            input.bytes().len(),
            start.elapsed(),
            e.name()
        );
    }
    println!("{ready} files on the device path, {fallback} through the CPU fallback");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub fn small_bindings_split_a_decode_into_chunks(e: &dyn Executor) {
    let dir = data_dir().join("jpeg");
    let mut input = DecodeInput::new().with_max_binding(1 << 20);
    let mut expected = Vec::new();
    let mut coeffs = Coefficients::default();
    let mut packed = PackedJpeg::default();
    for (i, file) in [
        "go_video-001_q50_411.jpg",
        "ljt_testorig.jpg",
        "jd_moz_jpg-gray.jpg",
        "go_video-001_cmyk.jpg",
        "jd_ycck.jpg",
    ]
    .iter()
    .cycle()
    .take(30)
    .enumerate()
    {
        let bytes = std::fs::read(dir.join(file)).expect("file");
        assert_eq!(
            read_coefficients(&bytes, true, &mut coeffs),
            Ok(CoeffStatus::Ready),
            "{file}"
        );
        let scale = [4, 8, 2][i % 3];
        let (w, h) = coeffs.scaled_size(scale);
        let window = [w / 5, h / 7, w - w / 6, h];
        let g = input.push_jpeg(&coeffs, scale, window).expect("push");
        pack(&coeffs, scale, window, &mut packed).expect("pack");
        expected.push((file, g, decode_window(&packed).data));
    }
    assert!(
        input.bytes().len() > 2 << 20,
        "the batch should need several chunks"
    );
    let launches = input.launches(1 << 20, 40).expect("plan");
    assert!(launches.len() >= 6, "{} launches", launches.len());
    assert!(launches.iter().any(|l| l.grid[1] > 1), "no 2D grid");
    let words = run_decode(e, &input, 40);
    for (file, g, oracle) in &expected {
        assert_eq!(&window_rgb(&words, g), oracle, "{file} {g:?}");
    }
    // An empty or out-of-image window is refused, not decoded.
    assert!(input.push_jpeg(&coeffs, 1, [5, 5, 5, 9]).is_err());
    assert!(input.push_rgb(&Image8::default()).is_err());
}

/// The test data's rotated JPEG and, with the corpus, its EXIF files of `orientations`
/// (`exif_landscape_0.jpg` to `exif_landscape_5.jpg`, `exif_portrait_6.jpg` to
/// `exif_portrait_8.jpg`; 0 and 1 are upright).
fn rotated_files(orientations: std::ops::RangeInclusive<u8>) -> Vec<PathBuf> {
    let mut files = vec![data_dir().join("jpeg/pil_hopper_orientation_6.jpg")];
    if let Some(corpus) = corpus_dir() {
        for o in orientations {
            let kind = if o >= 6 { "portrait" } else { "landscape" };
            files.push(corpus.join(format!("jpeg/exif_{kind}_{o}.jpg")));
        }
    }
    files
}

/// EXIF-rotated JPEGs through a whole [`BatchPlan`] (decode, orient, copy back), whole
/// and in windows of the upright frame: each equal to the oracle's decode of the stored
/// rectangle [`prepare`] chose, turned upright, and covering the window asked for; every
/// other sample packed by its "worker" ([`DeviceSample::packed`]), as in the pipeline.
pub fn rotated_jpegs_through_a_batch_plan_match_the_oracle_upright(e: &dyn Executor) {
    let files = rotated_files(2..=8);
    let mut rng = TestRng(0x0E1F);
    let mut packed = PackedJpeg::default();
    let mut orientations = std::collections::BTreeSet::new();
    for scale in [1, 2, 4, 8] {
        let mut samples = Vec::new();
        let mut want = Vec::new();
        for f in &files {
            let bytes = std::fs::read(f).expect("jpeg");
            let info = peek_info(&bytes).expect("info");
            let full = (info.width.div_ceil(scale), info.height.div_ceil(scale));
            let upright_size = if info.orientation >= 5 {
                (full.1, full.0)
            } else {
                full
            };
            let mut windows = vec![None];
            for _ in 0..2 {
                windows.push(Some(random_window(&mut rng, upright_size)));
            }
            for window in windows {
                let opts = DecodeOptions {
                    scale,
                    window,
                    ..DecodeOptions::default()
                };
                let p = prepare(&bytes, &opts).expect("prepares");
                assert!(
                    p.cpu_reason.is_none(),
                    "{}: {:?}",
                    f.display(),
                    p.cpu_reason
                );
                let DeviceSample::Jpeg {
                    coeffs,
                    scale: s,
                    window: stored,
                    orientation,
                } = &p.image
                else {
                    panic!("{}: not on the device path", f.display());
                };
                assert_eq!(*orientation, info.orientation, "{}", f.display());
                orientations.insert(*orientation);
                pack(coeffs, *s, *stored, &mut packed).expect("pack");
                let oracle = decode_window(&packed);
                let px: Vec<u32> = oracle
                    .data
                    .chunks_exact(3)
                    .map(|p| u32::from_le_bytes([p[0], p[1], p[2], 255]))
                    .collect();
                let up = upright(
                    &px,
                    oracle.width as usize,
                    oracle.height as usize,
                    *orientation,
                );
                // Every other sample packed beforehand, as the pipeline's workers do: its
                // payload goes into the upload straight from the sample.
                samples.push(if samples.len() % 2 == 1 {
                    p.image.packed(&CoeffPool::default()).expect("packs")
                } else {
                    p.image
                });
                want.push((f.clone(), window, up, upright_size));
            }
        }
        let mut plan = BatchPlan::new(e.limits());
        plan.plan_decode(samples.iter()).expect("plan");
        let mut buffers = Buffers::for_plan(&plan, &samples);
        e.run(plan.steps(), &mut buffers);
        let got = plan
            .windows_to_host(buffers.get(Buffer::Windows))
            .expect("windows");
        assert_eq!(got.len(), want.len());
        for (img, (f, window, (up, w, h), full)) in got.iter().zip(&want) {
            let what = format!("{} at 1/{scale}, window {window:?}", f.display());
            assert_eq!(img.full, *full, "{what}");
            assert_eq!(
                (img.width as usize, img.height as usize),
                (*w, *h),
                "{what}"
            );
            assert_covers(img, window.unwrap_or([0, 0, full.0, full.1]), &what);
            let rgb: Vec<u8> = up
                .iter()
                .flat_map(|p| p.to_le_bytes()[..3].to_vec())
                .collect();
            assert!(img.data == rgb, "{what}: pixels differ from the oracle");
        }
    }
    println!("orientations checked: {orientations:?}");
    assert!(orientations.iter().any(|&o| o >= 5));
    if corpus_dir().is_some() {
        assert_eq!(orientations.len(), 7, "{orientations:?}");
    }
}

/// EXIF-rotated JPEGs through the backend's own decode ([`Executor::decode_to_host`]):
/// decoded whole at the IDCT scale, then turned upright; the same pixels as the CPU
/// decoder's (decode whole, then `exif_transpose`) within [`DECODE_LEVELS`], at every
/// scale, for every orientation the corpus holds. Then windows of the upright image: the
/// device decodes only the stored rectangle that turns into them, and the result is that
/// part of the CPU's upright decode.
pub fn exif_orientation_matches_the_cpu_decoder(e: &dyn Executor) {
    let files = rotated_files(0..=8);
    let mut orientations = std::collections::BTreeSet::new();
    let compared = whole_images_match_the_cpu(e, &files, |f, p| {
        assert!(
            p.cpu_reason.is_none(),
            "{}: {:?}",
            f.display(),
            p.cpu_reason
        );
        if let DeviceSample::Jpeg { orientation, .. } = &p.image {
            orientations.insert(*orientation);
        }
    });
    assert_eq!(compared, 4 * files.len(), "the CPU refused a rotated file");
    let mut rng = TestRng(0x0E1F);
    let mut checked = 0;
    for scale in [1, 2, 4] {
        let mut samples = Vec::new();
        let mut want = Vec::new();
        for f in &files {
            let bytes = std::fs::read(f).expect("jpeg");
            let whole = DecodeOptions {
                scale,
                ..DecodeOptions::default()
            };
            let mut cpu = Image8::default();
            cpu::decode_image(&bytes, &whole, &mut cpu).expect("cpu decode");
            for _ in 0..3 {
                let window = random_window(&mut rng, (cpu.width, cpu.height));
                let opts = DecodeOptions {
                    window: Some(window),
                    ..whole
                };
                samples.push(prepare(&bytes, &opts).expect("prepares").image);
                want.push((f.clone(), window, cpu.clone()));
            }
        }
        let got = e.decode_to_host(&samples);
        assert_eq!(got.len(), want.len());
        for (img, (f, window, cpu)) in got.iter().zip(&want) {
            let what = format!("{} at 1/{scale}, window {window:?}", f.display());
            let (ox, oy) = (img.origin.0 as usize, img.origin.1 as usize);
            assert_eq!(img.full, (cpu.width, cpu.height), "{what}");
            assert_covers(img, *window, &what);
            let row = 3 * img.width as usize;
            let mut max = 0;
            for (y, got_row) in img.data.chunks_exact(row).enumerate() {
                let at = ((oy + y) * cpu.width as usize + ox) * 3;
                max = max.max(max_diff(got_row, &cpu.data[at..at + row]));
            }
            assert!(max <= DECODE_LEVELS, "{what}: max diff {max}");
            checked += 1;
        }
    }
    println!("orientations checked: {orientations:?}; {checked} upright windows");
    if corpus_dir().is_some() {
        assert_eq!(orientations.len(), 8, "{orientations:?}");
    }
}

/// Every test JPEG the CPU decodes, through the backend's own decode at every IDCT scale:
/// the same size and place as the CPU decoder's, within [`DECODE_LEVELS`].
pub fn hybrid_decode_matches_the_cpu_decoder_at_every_scale(e: &dyn Executor) {
    let checked = whole_images_match_the_cpu(e, &decode_test_jpegs(), |_, _| {});
    assert!(checked > 20, "only {checked} images decoded");
}

/// `files` decoded whole at every IDCT scale, one batch per scale, by the backend's own
/// decode ([`Executor::decode_to_host`]) and by the CPU decoder: the same size and place,
/// within [`DECODE_LEVELS`]. Files the CPU refuses (corrupt ones) are left out; every other
/// must prepare, and `check` sees what it prepared. Returns how many images were compared.
fn whole_images_match_the_cpu(
    e: &dyn Executor,
    files: &[PathBuf],
    mut check: impl FnMut(&Path, &Prepared),
) -> usize {
    let mut compared = 0;
    for scale in [1, 2, 4, 8] {
        let opts = DecodeOptions {
            scale,
            ..DecodeOptions::default()
        };
        let mut samples = Vec::new();
        let mut want = Vec::new();
        for f in files {
            let bytes = std::fs::read(f).expect("jpeg");
            let mut cpu = Image8::default();
            if cpu::decode_image(&bytes, &opts, &mut cpu).is_err() {
                continue; // corrupt files: the CPU reports them, and so does the device path
            }
            let Ok(p) = prepare(&bytes, &opts) else {
                panic!("{}: the CPU decodes it, prepare refuses", f.display());
            };
            check(f, &p);
            samples.push(p.image);
            want.push((f, cpu));
        }
        let got = e.decode_to_host(&samples);
        assert_eq!(got.len(), want.len());
        let mut exact = 0;
        for (img, (f, cpu)) in got.iter().zip(&want) {
            let what = format!("{} at 1/{scale}", f.display());
            assert_eq!(
                (img.width, img.height, img.origin, img.full),
                (cpu.width, cpu.height, cpu.origin, cpu.full),
                "{what}"
            );
            // Bit-exact on lavapipe and the emulator; real GPUs get the decode tolerance.
            let worst = max_diff(&img.data, &cpu.data);
            assert!(
                worst <= DECODE_LEVELS,
                "{what}: {worst} levels from the CPU decode"
            );
            exact += usize::from(worst == 0);
        }
        println!(
            "scale 1/{scale}: {exact} of {} images bit-exact on {}",
            got.len(),
            e.name()
        );
        compared += got.len();
    }
    compared
}

/// JPEGs for the hardware decoder (nvJPEG on CUDA): the plan decodes them whole into the
/// hardware buffer (here the oracle IDCT's planes stand in for nvJPEG's planar output, and
/// for every third image the CPU decoder's RGB rows, as the CUDA backend writes what
/// nvJPEG refuses), then `pack_planar` upsamples, converts and places each window, turned
/// upright where EXIF says so, beside hybrid-decoded samples of the same batch. The
/// windows are the CPU decoder's pixels, exactly. (wgpu has no `pack_planar`: skipped.)
pub fn hardware_decoded_jpegs_through_a_batch_plan_match_the_cpu_decoder(e: &dyn Executor) {
    if !e.runs(Kernel::PackPlanar) {
        eprintln!("skipped: {} has no pack_planar", e.name());
        return;
    }
    let mut files: Vec<PathBuf> = decode_test_jpegs();
    files.push(data_dir().join("jpeg/pil_hopper_orientation_6.jpg"));
    let pool = CoeffPool::default();
    let mut rng = TestRng(0x4A7D);
    let mut samples = Vec::new();
    let mut want = Vec::new();
    let mut encoded = 0;
    for f in &files {
        let bytes = std::fs::read(f).expect("jpeg");
        let Ok(info) = peek_info(&bytes) else {
            continue;
        };
        let full_opts = DecodeOptions::default();
        if !HardwareDecode::All.takes(&bytes, &info, &full_opts) {
            continue;
        }
        let mut upright = Image8::default();
        if cpu::decode_image(&bytes, &full_opts, &mut upright).is_err() {
            continue;
        }
        for k in 0..2 {
            let window = (k == 1).then(|| random_window(&mut rng, (upright.width, upright.height)));
            let opts = DecodeOptions {
                window,
                ..DecodeOptions::default()
            };
            // Every other sample through the hybrid path, in the same batch.
            let hw = if samples.len() % 3 == 2 {
                HardwareDecode::Off
            } else {
                HardwareDecode::All
            };
            let p = prepare_with(&bytes, &opts, &pool, hw).expect("prepares");
            if matches!(p.image, DeviceSample::Encoded { .. }) {
                encoded += 1;
            }
            samples.push(p.image);
            want.push((f.clone(), window, upright.clone()));
        }
    }
    assert!(
        encoded >= 10,
        "only {encoded} samples for the hardware decoder"
    );
    let mut plan = BatchPlan::new(e.limits());
    plan.plan_decode(samples.iter()).expect("plan");
    let sizes = plan.sizes();
    assert!(sizes.rgbi > 0);
    // What the hardware step writes: for most images, what nvJPEG's planar output holds
    // (each component at its stored resolution, here from the oracle IDCT of the
    // coefficients, which is libjpeg's); for every third, the CPU decoder's interleaved
    // RGB rows, as the chain writes what nvJPEG refuses; and each image's header.
    let mut rgbi = garbage(sizes.rgbi);
    let mut planar = 0;
    for (n, j) in plan.encoded().iter().enumerate() {
        let DeviceSample::Encoded { bytes, .. } = &samples[j.sample] else {
            panic!("sample {} is not encoded", j.sample);
        };
        let rgb = n % 3 == 1;
        if rgb {
            let mut img = Image8::default();
            let opts = DecodeOptions {
                orientation: false,
                ..DecodeOptions::default()
            };
            cpu::decode_image(bytes, &opts, &mut img).expect("cpu decode");
            assert_eq!((img.width, img.height), (j.full[0], j.full[1]));
            let row = 3 * img.width as usize;
            for (y, src) in img.data.chunks_exact(row).enumerate() {
                let at = (j.rgbi.0 + y as u64 * j.rgbi.1) as usize;
                rgbi[at..at + row].copy_from_slice(src);
            }
        } else {
            planar += 1;
            let mut coeffs = Default::default();
            let status = read_coefficients(bytes, true, &mut coeffs).expect("coefficients");
            assert!(matches!(status, CoeffStatus::Ready), "{status:?}");
            let mut packed = PackedJpeg::default();
            pack(&coeffs, 1, [0, 0, j.full[0], j.full[1]], &mut packed).expect("pack");
            assert_eq!(packed.components.len(), j.components as usize);
            let mut plane = Vec::new();
            for (c, p) in j.planes[..j.components as usize].iter().enumerate() {
                idct_component(&packed, c, &mut plane);
                let stride = packed.components[c].plane_stride as usize * 4;
                assert_eq!(
                    (p.width, p.height),
                    (
                        packed.components[c].downsampled_width,
                        packed.components[c].downsampled_height
                    ),
                    "plane {c} of sample {}",
                    j.sample
                );
                for y in 0..p.height as usize {
                    let at = (j.rgbi.0 + p.offset + y as u64 * p.pitch) as usize;
                    let w = p.width as usize;
                    rgbi[at..at + w].copy_from_slice(&plane[y * stride..y * stride + w]);
                }
            }
        }
        let header: Vec<u8> = j
            .header_words(rgb)
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        rgbi[j.header as usize..j.header as usize + header.len()].copy_from_slice(&header);
    }
    assert!(planar >= 6, "only {planar} planar samples");
    let mut buffers = Buffers::for_plan(&plan, &samples).with(Buffer::Rgbi, rgbi);
    let steps: Vec<Step> = plan
        .steps()
        .iter()
        .filter(|s| **s != Step::Hardware)
        .cloned()
        .collect();
    assert!(steps
        .iter()
        .any(|s| matches!(s, Step::Launch(l) if l.kernel == Kernel::PackPlanar)));
    e.run(&steps, &mut buffers);
    let got = plan
        .windows_to_host(buffers.get(Buffer::Windows))
        .expect("windows");
    for (img, (f, window, full)) in got.iter().zip(&want) {
        let what = format!("{}, window {window:?}", f.display());
        assert_eq!(img.full, (full.width, full.height), "{what}");
        if let Some(window) = window {
            assert_covers(img, *window, &what);
        }
        let (ox, oy) = (img.origin.0 as usize, img.origin.1 as usize);
        let fw = full.width as usize;
        let want: Vec<u8> = (0..img.height as usize)
            .flat_map(|y| {
                let at = ((oy + y) * fw + ox) * 3;
                full.data[at..at + 3 * img.width as usize].to_vec()
            })
            .collect();
        assert!(
            img.data == want,
            "{what}: pixels differ from the CPU decoder"
        );
    }
}

//! The wgpu hybrid JPEG decode (`shaders/idct.wgsl`, `shaders/color.wgsl`) against its
//! scalar oracle (equal, bit for bit) and the CPU decoder (within +-2), on every test JPEG
//! at IDCT scales 1/1, 1/2, 1/4, 1/8, whole images and random windows, batched. Files only
//! the CPU decodes go through the passthrough path. Skips without an adapter unless
//! `STOKER_REQUIRE_WGPU=1`.
#![cfg(feature = "wgpu")]

mod common;

use stoker::backend::wgpu::decode::{DecodeInput, DecodeKernels, DecodeScratch, DeviceImage};
use stoker::backend::wgpu::WgpuContext;
use stoker::decode::jpeg::coeffs::{pack, CoeffStatus, Coefficients, PackedJpeg};
use stoker::decode::jpeg::color::decode_window;
use stoker::decode::jpeg::read_coefficients;
use stoker::decode::{check_limits, cpu, peek_info, DecodeOptions, Format, Image8, Limits};

/// Runs the decode of `input` and returns the windows buffer.
fn run(ctx: &WgpuContext, kernels: &DecodeKernels, input: &DecodeInput) -> Vec<u32> {
    let device = ctx.device();
    let bytes = input.bytes();
    let input_buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("decode input"),
        size: (bytes.len() as u64).max(4),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    ctx.queue().write_buffer(&input_buffer, 0, bytes);
    let out_bytes = (input.window_words() * 4).max(4);
    let windows = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("windows"),
        size: out_bytes,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    let mut scratch = DecodeScratch::new();
    kernels
        .encode(
            ctx,
            &mut encoder,
            input,
            &input_buffer,
            &windows,
            &mut scratch,
        )
        .expect("encode");
    ctx.queue().submit([encoder.finish()]);
    let raw = ctx.read_buffer(&windows, 0, out_bytes).expect("readback");
    bytemuck::cast_slice(&raw).to_vec()
}

/// The RGB of window `g` in the windows buffer.
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

/// Largest channel difference between a window and a CPU decode, on their overlap.
fn max_diff_vs_cpu(rgb: &[u8], g: &DeviceImage, cpu: &Image8) -> u8 {
    let mut max = 0;
    for y in 0..g.height {
        let Some(cy) = (g.origin_y + y)
            .checked_sub(cpu.origin.1)
            .filter(|&v| v < cpu.height)
        else {
            continue;
        };
        for x in 0..g.width {
            let Some(cx) = (g.origin_x + x)
                .checked_sub(cpu.origin.0)
                .filter(|&v| v < cpu.width)
            else {
                continue;
            };
            let a = ((y * g.width + x) * 3) as usize;
            let b = ((cy * cpu.width + cx) * 3) as usize;
            for c in 0..3 {
                max = max.max(rgb[a + c].abs_diff(cpu.data[b + c]));
            }
        }
    }
    max
}

/// One pushed case: the GPU record, the oracle's pixels, the CPU decode.
struct Case {
    label: String,
    gpu: DeviceImage,
    oracle: Vec<u8>,
    cpu: Image8,
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

#[test]
fn gpu_decode_matches_the_oracle_and_the_cpu() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let kernels = DecodeKernels::new(&ctx).expect("kernels");
    let mut rng = common::TestRng(0xD1CE);
    let mut coeffs = Coefficients::default();
    let mut packed = PackedJpeg::default();
    let mut batches: Vec<(DecodeInput, Vec<Case>)> =
        (0..4).map(|_| (DecodeInput::new(), Vec::new())).collect();
    let (mut ready, mut fallback) = (0, 0);
    for path in common::decode_test_jpegs() {
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = std::fs::read(&path).expect("read");
        let Ok(info) = peek_info(&bytes) else {
            continue;
        };
        if info.format != Format::Jpeg || check_limits(&info, &Limits::default()).is_err() {
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
                        let x0 = rng.below(u64::from(full.0)) as u32;
                        let y0 = rng.below(u64::from(full.1)) as u32;
                        let x1 = x0 + 1 + rng.below(u64::from(full.0 - x0)) as u32;
                        let y1 = y0 + 1 + rng.below(u64::from(full.1 - y0)) as u32;
                        windows.push(Some([x0, y0, x1, y1]));
                    }
                    for window in windows {
                        let w = window.unwrap_or([0, 0, full.0, full.1]);
                        let gpu = input.push_jpeg(&coeffs, scale, w).expect("push");
                        pack(&coeffs, scale, w, &mut packed).expect("pack");
                        let oracle = decode_window(&packed);
                        assert_eq!(
                            (gpu.width, gpu.height, gpu.origin_x, gpu.origin_y),
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
                            gpu,
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
                    let gpu = input.push_rgb(&cpu_img).expect("push rgb");
                    assert_eq!((gpu.full_width, gpu.full_height), cpu_img.full);
                    cases.push(Case {
                        label: format!("{file} 1/{scale} (CPU fallback)"),
                        gpu,
                        oracle: cpu_img.data.clone(),
                        cpu: cpu_img,
                    });
                    fallback += usize::from(k == 0);
                }
                Err(_) => {}
            }
        }
    }
    assert!(
        ready
            >= if common::corpus_dir().is_some() {
                50
            } else {
                15
            },
        "only {ready} files decoded on the GPU path"
    );
    let mut failures = Vec::new();
    for (k, (input, cases)) in batches.iter().enumerate() {
        let start = std::time::Instant::now();
        let words = run(&ctx, &kernels, input);
        let mut max_cpu = 0;
        let mut pixels = 0u64;
        for case in cases {
            let rgb = window_rgb(&words, &case.gpu);
            pixels += u64::from(case.gpu.width * case.gpu.height);
            if rgb != case.oracle {
                let n = rgb.iter().zip(&case.oracle).filter(|(a, b)| a != b).count();
                failures.push(format!(
                    "{}: {n} channel values differ from the oracle",
                    case.label
                ));
            }
            let d = max_diff_vs_cpu(&rgb, &case.gpu, &case.cpu);
            max_cpu = max_cpu.max(d);
            if d > 2 {
                failures.push(format!("{}: max diff {d} from the CPU decode", case.label));
            }
        }
        println!(
            "scale 1/{}: {} windows, {pixels} pixels, {} upload bytes, max diff vs CPU {max_cpu}, {:.2?} on {}",
            1 << k,
            cases.len(),
            input.bytes().len(),
            start.elapsed(),
            ctx.name()
        );
    }
    println!("{ready} files on the GPU path, {fallback} through the CPU fallback");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn small_bindings_split_a_batch_into_chunks() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let kernels = DecodeKernels::new(&ctx).expect("kernels");
    let dir = common::data_dir().join("jpeg");
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
    let words = run(&ctx, &kernels, &input);
    for (file, g, oracle) in &expected {
        assert_eq!(&window_rgb(&words, g), oracle, "{file} {g:?}");
    }
    // An empty or out-of-image window is refused, not decoded.
    assert!(input.push_jpeg(&coeffs, 1, [5, 5, 5, 9]).is_err());
    assert!(input.push_rgb(&Image8::default()).is_err());
}

/// EXIF-rotated JPEGs on the device path: decoded whole at the IDCT scale, then turned
/// upright by `shaders/orient.wgsl`; the same pixels as the CPU decoder's (decode whole,
/// then `exif_transpose`), at every scale, for every orientation the corpus holds.
#[test]
fn exif_orientation_on_the_device_matches_the_cpu() {
    use stoker::backend::wgpu::batch::{prepare, DeviceSample, WgpuBatcher};
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let mut files = vec![common::data_dir().join("jpeg/pil_hopper_orientation_6.jpg")];
    if let Some(corpus) = common::corpus_dir() {
        for name in [
            "landscape_0",
            "landscape_1",
            "landscape_2",
            "landscape_3",
            "landscape_4",
            "landscape_5",
            "portrait_6",
            "portrait_7",
            "portrait_8",
        ] {
            files.push(corpus.join(format!("jpeg/exif_{name}.jpg")));
        }
    }
    let mut batcher = WgpuBatcher::new(&ctx, 2).expect("pipelines");
    let mut orientations = std::collections::BTreeSet::new();
    for scale in [1, 2, 4, 8] {
        let opts = DecodeOptions {
            scale,
            ..DecodeOptions::default()
        };
        // One batch per scale, every file in it: windows and upright copies side by side.
        let mut samples = Vec::new();
        let mut want = Vec::new();
        for f in &files {
            let bytes = std::fs::read(f).expect("jpeg");
            let p = prepare(&bytes, &opts).expect("prepares");
            assert!(
                p.cpu_reason.is_none(),
                "{}: {:?}",
                f.display(),
                p.cpu_reason
            );
            if let DeviceSample::Jpeg { orientation, .. } = &p.image {
                orientations.insert(*orientation);
            }
            let mut cpu = Image8::default();
            stoker::decode::cpu::decode_image(&bytes, &opts, &mut cpu).expect("cpu decode");
            samples.push(p.image);
            want.push((f.clone(), cpu));
        }
        let got = batcher.decode_to_host(&samples).expect("device decode");
        assert_eq!(got.len(), want.len());
        let mut exact = 0;
        for (img, (f, cpu)) in got.iter().zip(&want) {
            assert_eq!(
                (img.width, img.height, img.full, img.origin),
                (cpu.width, cpu.height, cpu.full, cpu.origin),
                "{} at 1/{scale}",
                f.display()
            );
            let max = img
                .data
                .iter()
                .zip(&cpu.data)
                .map(|(a, b)| a.abs_diff(*b))
                .max()
                .unwrap_or(0);
            // Bit-exact on lavapipe; real GPUs get the decode tolerance.
            assert!(max <= 2, "{} at 1/{scale}: max diff {max}", f.display());
            exact += usize::from(max == 0);
        }
        println!(
            "scale 1/{scale}: {exact} of {} rotated images bit-exact",
            got.len()
        );
    }
    // Windows of the upright image: the device decodes only the stored rectangle that
    // turns into them, and the result is that part of the CPU's upright decode.
    let mut rng = common::TestRng(0x0E1F);
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
            stoker::decode::cpu::decode_image(&bytes, &whole, &mut cpu).expect("cpu decode");
            for _ in 0..3 {
                let (w, h) = (cpu.width, cpu.height);
                let x0 = rng.below(u64::from(w)) as u32;
                let y0 = rng.below(u64::from(h)) as u32;
                let x1 = x0 + 1 + rng.below(u64::from(w - x0)) as u32;
                let y1 = y0 + 1 + rng.below(u64::from(h - y0)) as u32;
                let opts = DecodeOptions {
                    window: Some([x0, y0, x1, y1]),
                    ..whole
                };
                samples.push(prepare(&bytes, &opts).expect("prepares").image);
                want.push((f.clone(), [x0, y0, x1, y1], cpu.clone()));
            }
        }
        let got = batcher.decode_to_host(&samples).expect("device decode");
        assert_eq!(got.len(), want.len());
        for (img, (f, [x0, y0, x1, y1], cpu)) in got.iter().zip(&want) {
            let what = format!("{} at 1/{scale}, window {x0},{y0}-{x1},{y1}", f.display());
            let (ox, oy) = img.origin;
            assert_eq!(img.full, (cpu.width, cpu.height), "{what}");
            assert!(
                ox <= *x0 && oy <= *y0 && ox + img.width >= *x1 && oy + img.height >= *y1,
                "{what}: got {}x{} at {ox},{oy}",
                img.width,
                img.height
            );
            let mut max = 0;
            for y in 0..img.height as usize {
                for x in 0..img.width as usize {
                    for c in 0..3 {
                        let a = img.data[(y * img.width as usize + x) * 3 + c];
                        let b = cpu.data
                            [((oy as usize + y) * cpu.width as usize + ox as usize + x) * 3 + c];
                        max = max.max(a.abs_diff(b));
                    }
                }
            }
            assert!(max <= 2, "{what}: max diff {max}");
            checked += 1;
        }
    }
    println!("orientations checked: {orientations:?}; {checked} upright windows");
    if common::corpus_dir().is_some() {
        assert_eq!(orientations.len(), 8, "{orientations:?}");
    }
}

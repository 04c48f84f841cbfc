//! The CUDA kernels (`kernels/*.cu`) on the CPU, against the same oracles as the wgpu
//! tests. `tests/kernel_host/emulator.cpp` compiles the very sources NVRTC compiles, as
//! C++ with a host compiler (no FMA contraction, like `--fmad=false`), and runs planned
//! [`Step`]s over buffers: each binding in its own allocation ending at a guard page, so a
//! kernel that reads or writes past a binding fails the test instead of passing by luck.
//!
//! - Orientation: hand-built `orient` launches (2D grids with idle invocations) and the
//!   planner's, equal to an independent reorientation of random windows.
//! - Decode (`idct`, `color`): every test JPEG at IDCT scales 1/1, 1/2, 1/4, 1/8, whole and
//!   random windows, equal bit for bit to the scalar oracle (`decode::jpeg::{idct, color}`);
//!   CPU-decoded files through the passthrough path; small bindings split into chunks; a
//!   whole [`BatchPlan`] of EXIF-rotated JPEGs equal to the oracle turned upright.
//! - Augment (`horizontal`, `vertical_jitter`, `write_image`, `write_mask`): random plans and
//!   windows as in `tests/wgpu_augment.rs`, within one level of `augment::reference` for
//!   u8, f16 and f32 in both layouts with at most 0.1% of elements off at all, label planes
//!   exactly; f16 rounding ties and overflow bit for bit; a whole batch (decode, then
//!   augment) planned by [`BatchPlan`].
//! - The emulator itself: an access past a binding and a malformed launch are reported.
//!
//! Without a C++ compiler (`CXX`, `c++`, `g++`, `clang++`) the tests say so and pass, unless
//! `STOKER_REQUIRE_KERNEL_HOST=1`, which makes that a failure. `STOKER_KERNEL_HOST_VERBOSE=1`
//! makes the emulator time every launch; `STOKER_KERNEL_HOST_CXXFLAGS` adds compiler flags
//! (`-fsanitize=undefined` finds UB in the kernels on the test data).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::cases::{
    check_batch, random_augment, random_mask, random_sample, Sample, Worst, MEAN, STD,
};
use common::TestRng;
use stoker::augment::reference::{execute_image, needed_window, Scratch};
use stoker::backend::device::launch::{grid, Binding, Buffer, Kernel, Launch, Step, PARAM_WORDS};
use stoker::backend::device::orient::{self, OrientJob};
use stoker::backend::device::{
    prepare, AugmentInput, BatchPlan, DecodeInput, DeviceImage, DeviceJob, DeviceLimits,
    DeviceSample,
};
use stoker::decode::jpeg::coeffs::{pack, CoeffStatus, Coefficients, PackedJpeg};
use stoker::decode::jpeg::color::decode_window;
use stoker::decode::jpeg::read_coefficients;
use stoker::decode::{check_limits, cpu, peek_info, DecodeOptions, Format, Image8};
use stoker::{Augment, DType, Layout};

// ---------------------------------------------------------------------------------------
// The emulator.

/// Buffers of one run, by [`Buffer`].
#[derive(Default)]
struct Buffers(Vec<(Buffer, Vec<u8>)>);

impl Buffers {
    fn with(mut self, buffer: Buffer, bytes: Vec<u8>) -> Self {
        self.0.retain(|(b, _)| *b != buffer);
        self.0.push((buffer, bytes));
        self
    }

    fn get(&self, buffer: Buffer) -> &[u8] {
        &self.0.iter().find(|(b, _)| *b == buffer).expect("buffer").1
    }

    fn index(&self, buffer: Buffer) -> u32 {
        self.0
            .iter()
            .position(|(b, _)| *b == buffer)
            .unwrap_or_else(|| panic!("the steps bind {buffer:?}, which the run lacks"))
            as u32
    }
}

struct Emulator {
    exe: PathBuf,
}

/// The emulator, built once per test binary (and cached across runs by a hash of its
/// sources); `None`, said on stderr, when there is no C++ compiler, unless
/// `STOKER_REQUIRE_KERNEL_HOST=1`.
fn emulator() -> Option<&'static Emulator> {
    static EMU: OnceLock<Result<Emulator, String>> = OnceLock::new();
    match EMU.get_or_init(build_emulator) {
        Ok(e) => Some(e),
        Err(why) if std::env::var("STOKER_REQUIRE_KERNEL_HOST").is_ok_and(|v| v == "1") => {
            panic!("STOKER_REQUIRE_KERNEL_HOST=1 but {why}")
        }
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

const CXX_FLAGS: &[&str] = &[
    "-std=c++20",
    "-O2",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-pthread",
    "-Wall",
    "-Wextra",
    "-Wno-unknown-pragmas",
];

/// Builds the emulator; `Err` only when no compiler is found (a build error panics).
fn build_emulator() -> Result<Emulator, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut candidates: Vec<String> = std::env::var("CXX").into_iter().collect();
    candidates.extend(["c++", "g++", "clang++"].map(String::from));
    let cxx = candidates
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .ok_or_else(|| "no C++ compiler (CXX, c++, g++, clang++)".to_string())?;
    let mut sources = vec![
        root.join("tests/kernel_host/emulator.cpp"),
        root.join("tests/kernel_host/cuda_host.h"),
    ];
    let mut kernels: Vec<PathBuf> = std::fs::read_dir(root.join("kernels"))
        .expect("kernels/")
        .map(|e| e.expect("kernels/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu" || x == "cuh"))
        .collect();
    kernels.sort();
    sources.extend(kernels);
    let mut h = std::hash::DefaultHasher::new();
    for p in &sources {
        std::hash::Hash::hash(&std::fs::read(p).expect("source"), &mut h);
    }
    // Extra flags, e.g. `-fsanitize=undefined` to look for UB in the kernels.
    let extra: Vec<String> = std::env::var("STOKER_KERNEL_HOST_CXXFLAGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    std::hash::Hash::hash(&(&cxx, CXX_FLAGS, &extra), &mut h);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_host");
    std::fs::create_dir_all(&dir).expect("emulator dir");
    let exe = dir.join(format!("emulator-{:016x}", std::hash::Hasher::finish(&h)));
    if !exe.is_file() {
        let tmp = dir.join(format!("emulator-{}.tmp", std::process::id()));
        let out = Command::new(&cxx)
            .args(CXX_FLAGS)
            .args(&extra)
            .arg(&sources[0])
            .arg("-o")
            .arg(&tmp)
            .output()
            .expect("run the C++ compiler");
        assert!(
            out.status.success(),
            "{cxx} failed to build the kernel emulator:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.stderr.is_empty() {
            eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        }
        std::fs::rename(&tmp, &exe).expect("place the emulator");
    }
    Ok(Emulator { exe })
}

fn put_range(req: &mut Vec<u8>, buffers: &Buffers, b: &Binding) {
    req.extend(buffers.index(b.buffer).to_le_bytes());
    req.extend(b.offset.to_le_bytes());
    req.extend(b.size.to_le_bytes());
}

impl Emulator {
    /// Runs `steps` over `buffers`; `Err` carries the emulator's message.
    fn try_run(&self, steps: &[Step], buffers: &mut Buffers) -> Result<(), String> {
        let mut req = b"SKH1".to_vec();
        req.extend((buffers.0.len() as u32).to_le_bytes());
        for (_, bytes) in &buffers.0 {
            req.extend((bytes.len() as u64).to_le_bytes());
            req.extend_from_slice(bytes);
        }
        req.extend((steps.len() as u32).to_le_bytes());
        for step in steps {
            match step {
                Step::Launch(l) => {
                    req.extend(0u32.to_le_bytes());
                    let name = l.kernel.name().as_bytes();
                    req.extend((name.len() as u32).to_le_bytes());
                    req.extend_from_slice(name);
                    req.extend(l.grid[0].to_le_bytes());
                    req.extend(l.grid[1].to_le_bytes());
                    req.extend((l.bindings.len() as u32).to_le_bytes());
                    for b in &l.bindings {
                        put_range(&mut req, buffers, b);
                    }
                    for p in l.params {
                        req.extend(p.to_le_bytes());
                    }
                }
                Step::Copy { src, dst } => {
                    req.extend(1u32.to_le_bytes());
                    put_range(&mut req, buffers, src);
                    put_range(&mut req, buffers, dst);
                }
                // The hardware decoder's step (nvJPEG): no kernel of ours to emulate.
                other => return Err(format!("the emulator cannot run {other:?}")),
            }
        }
        let mut child = Command::new(&self.exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the emulator");
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &req));
        let out = child.wait_with_output().expect("emulator output");
        let written = writer.join().expect("writer thread");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(format!("emulator {}: {stderr}", out.status));
        }
        written.map_err(|e| format!("writing the request: {e}"))?;
        if !stderr.is_empty() {
            eprint!("{stderr}");
        }
        let mut r = &out.stdout[..];
        let mut take = |n: usize| {
            let (a, b) = r.split_at(n);
            r = b;
            a.to_vec()
        };
        assert_eq!(take(4), b"SKH1");
        let count = u32::from_le_bytes(take(4).try_into().expect("u32")) as usize;
        assert_eq!(count, buffers.0.len());
        for (_, bytes) in &mut buffers.0 {
            let n = u64::from_le_bytes(take(8).try_into().expect("u64")) as usize;
            *bytes = take(n);
        }
        assert!(r.is_empty(), "trailing bytes in the reply");
        Ok(())
    }

    fn run(&self, steps: &[Step], buffers: &mut Buffers) {
        if let Err(e) = self.try_run(steps, buffers) {
            panic!("{e}");
        }
    }
}

/// `n` bytes of a recognisable pattern, so that anything a run should have written and
/// did not shows.
fn garbage(n: u64) -> Vec<u8> {
    vec![0xA5; n as usize]
}

fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn bytes_to_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Orientation.

/// A `w x h` window of words turned upright for EXIF `orientation`, built from three
/// primitives (Pillow's methods are compositions of them): mirror left-right, mirror
/// top-bottom, transpose.
fn upright(px: &[u32], w: usize, h: usize, orientation: u8) -> (Vec<u32>, usize, usize) {
    let flip_lr = |(p, w, h): (Vec<u32>, usize, usize)| {
        let out = (0..w * h).map(|i| p[(i / w) * w + w - 1 - i % w]).collect();
        (out, w, h)
    };
    let flip_tb = |(p, w, h): (Vec<u32>, usize, usize)| {
        let out = (0..w * h).map(|i| p[(h - 1 - i / w) * w + i % w]).collect();
        (out, w, h)
    };
    let transpose = |(p, w, h): (Vec<u32>, usize, usize)| {
        let out = (0..w * h).map(|i| p[(i % h) * w + i / h]).collect();
        (out, h, w)
    };
    let img = (px.to_vec(), w, h);
    match orientation {
        2 => flip_lr(img),
        3 => flip_tb(flip_lr(img)),
        4 => flip_tb(img),
        5 => transpose(img),
        6 => flip_lr(transpose(img)),
        7 => flip_lr(flip_tb(transpose(img))),
        8 => flip_tb(transpose(img)),
        _ => img,
    }
}

#[test]
fn orient_launches_match_an_independent_reorientation() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(0x0E1E);
    // Random windows at random word offsets, each turned by a hand-built launch (2D grids,
    // idle invocations past the end) and copied after the windows.
    let mut words: Vec<u32> = Vec::new();
    let mut jobs = Vec::new();
    for k in 0..21 {
        words.extend((0..rng.below(300)).map(|_| rng.next_u64() as u32));
        let (w, h) = (1 + rng.below(40) as u32, 1 + rng.below(40) as u32);
        let offset = words.len() as u32;
        words.extend((0..w * h).map(|_| rng.next_u64() as u32));
        jobs.push((offset, w, h, 2 + (k % 7) as u8));
    }
    let windows_words = words.len() as u64;
    let mut dst = windows_words.next_multiple_of(64);
    let mut steps = Vec::new();
    let mut want = Vec::new();
    let mut planner_jobs = Vec::new();
    for &(offset, w, h, o) in &jobs {
        let px = u64::from(w * h);
        let (ow, oh) = if o >= 5 { (h, w) } else { (w, h) };
        let base = u64::from(offset) * 4 / 256 * 256;
        let rel = u64::from(offset) - base / 4;
        let groups = px.div_ceil(64);
        // The smallest square-ish grid that holds the window, sometimes one larger.
        let per_dim = ((groups as f64).sqrt().ceil() as u64).max(1) + rng.below(2);
        let g = grid(px, Kernel::Orient.workgroup(), per_dim).expect("grid");
        let mut params = [0u32; PARAM_WORDS];
        params[..7].copy_from_slice(&[rel as u32, w, h, u32::from(o), ow, oh, g[0] * 64]);
        let oriented = Binding {
            buffer: Buffer::Oriented,
            offset: 0,
            size: px * 4,
        };
        steps.push(Step::Launch(Launch {
            kernel: Kernel::Orient,
            grid: g,
            bindings: vec![
                Binding {
                    buffer: Buffer::Windows,
                    offset: base,
                    size: (rel + px) * 4,
                },
                oriented,
            ],
            params,
        }));
        steps.push(Step::Copy {
            src: oriented,
            dst: Binding {
                buffer: Buffer::Windows,
                offset: dst * 4,
                size: px * 4,
            },
        });
        let src = &words[offset as usize..][..px as usize];
        let (up, uw, uh) = upright(src, w as usize, h as usize, o);
        assert_eq!((uw, uh), (ow as usize, oh as usize));
        want.push((dst, up));
        planner_jobs.push(OrientJob {
            src: DeviceImage {
                offset,
                width: w,
                height: h,
                ..DeviceImage::default()
            },
            orientation: o,
            dst,
        });
        dst += px;
    }
    let total = dst * 4;
    let mut input = words.clone();
    input.resize(dst as usize, 0xDEAD_BEEF);
    let input = words_to_bytes(&input);
    let largest = jobs
        .iter()
        .map(|j| u64::from(j.1 * j.2) * 4)
        .max()
        .unwrap_or(4);
    let check = |buffers: &Buffers, what: &str| {
        let out = bytes_to_words(buffers.get(Buffer::Windows));
        assert_eq!(
            &out[..words.len()],
            &words[..],
            "{what}: the sources changed"
        );
        for (k, (at, up)) in want.iter().enumerate() {
            assert_eq!(
                &out[*at as usize..][..up.len()],
                &up[..],
                "{what}: job {k} (orientation {})",
                jobs[k].3
            );
        }
    };
    let mut buffers = Buffers::default()
        .with(Buffer::Windows, input.clone())
        .with(Buffer::Oriented, garbage(largest));
    emu.run(&steps, &mut buffers);
    check(&buffers, "hand-built launches");

    // The planner's launches for the same jobs.
    let (planned, oriented) =
        orient::launches(&planner_jobs, total, 1 << 31, 65535).expect("orient plan");
    assert!(oriented >= largest);
    let mut buffers = Buffers::default()
        .with(Buffer::Windows, input)
        .with(Buffer::Oriented, garbage(oriented));
    emu.run(&planned, &mut buffers);
    check(&buffers, "planned launches");
}

/// The emulator's own checks: a kernel writing past its binding, and a launch that breaks
/// the contract, fail with a message that says so.
#[test]
fn the_emulator_reports_out_of_bounds_accesses_and_bad_launches() {
    let Some(emu) = emulator() else {
        return;
    };
    let launch = |dst_bytes: u64, bindings: usize| {
        let mut params = [0u32; PARAM_WORDS];
        params[..7].copy_from_slice(&[0, 16, 16, 3, 16, 16, 256]);
        let mut b = vec![
            Binding {
                buffer: Buffer::Windows,
                offset: 0,
                size: 1024,
            },
            Binding {
                buffer: Buffer::Oriented,
                offset: 0,
                size: dst_bytes,
            },
        ];
        b.truncate(bindings);
        vec![Step::Launch(Launch {
            kernel: Kernel::Orient,
            grid: [4, 1],
            bindings: b,
            params,
        })]
    };
    let fresh = || {
        Buffers::default()
            .with(Buffer::Windows, garbage(1024))
            .with(Buffer::Oriented, garbage(1024))
    };
    emu.run(&launch(1024, 2), &mut fresh());
    let e = emu
        .try_run(&launch(512, 2), &mut fresh())
        .expect_err("a 512-byte destination for 1024 bytes");
    assert!(e.contains("past the end of binding 1"), "{e}");
    let e = emu
        .try_run(&launch(1024, 1), &mut fresh())
        .expect_err("one binding");
    assert!(e.contains("1 bindings, the kernel has 2"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Decode.

/// Runs `input`'s launches; returns the windows buffer as words.
fn run_decode(emu: &Emulator, input: &DecodeInput, per_dim: u64) -> Vec<u32> {
    let launches = input.launches(1 << 31, per_dim).expect("decode plan");
    let steps: Vec<Step> = launches.into_iter().map(Step::Launch).collect();
    let mut buffers = Buffers::default()
        .with(Buffer::DecodeInput, input.bytes().to_vec())
        .with(Buffer::Planes, garbage((input.plane_words() * 4).max(4)))
        .with(Buffer::Windows, garbage((input.window_words() * 4).max(4)));
    emu.run(&steps, &mut buffers);
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

fn lenient(scale: u32, window: Option<[u32; 4]>) -> DecodeOptions {
    DecodeOptions {
        strict: false,
        orientation: false,
        scale,
        window,
        ..DecodeOptions::default()
    }
}

/// One decoded window: a label, its record, the oracle's pixels.
type Case = (String, DeviceImage, Vec<u8>);

#[test]
fn decode_matches_the_oracle_bit_for_bit() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(0xD1CE);
    let mut coeffs = Coefficients::default();
    let mut packed = PackedJpeg::default();
    // Per scale: the batch and its windows.
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
                    let mut windows = vec![[0, 0, full.0, full.1]];
                    for _ in 0..2 {
                        let x0 = rng.below(u64::from(full.0)) as u32;
                        let y0 = rng.below(u64::from(full.1)) as u32;
                        let x1 = x0 + 1 + rng.below(u64::from(full.0 - x0)) as u32;
                        let y1 = y0 + 1 + rng.below(u64::from(full.1 - y0)) as u32;
                        windows.push([x0, y0, x1, y1]);
                    }
                    for w in windows {
                        let g = input.push_jpeg(&coeffs, scale, w).expect("push");
                        pack(&coeffs, scale, w, &mut packed).expect("pack");
                        let oracle = decode_window(&packed);
                        assert_eq!(
                            (g.width, g.height, g.origin_x, g.origin_y),
                            (
                                oracle.width,
                                oracle.height,
                                oracle.origin.0,
                                oracle.origin.1
                            )
                        );
                        cases.push((format!("{file} 1/{scale} {w:?}"), g, oracle.data));
                    }
                    ready += usize::from(k == 0);
                }
                Ok(CoeffStatus::CpuOnly(_)) => {
                    let mut img = Image8::default();
                    cpu::decode_image(&bytes, &lenient(scale, None), &mut img).expect("cpu decode");
                    let g = input.push_rgb(&img).expect("push rgb");
                    cases.push((format!("{file} 1/{scale} (CPU fallback)"), g, img.data));
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
        "only {ready} files on the device path"
    );
    assert!(fallback >= 1, "no file took the CPU fallback");
    let mut failures = Vec::new();
    for (k, (input, cases)) in batches.iter().enumerate() {
        let start = std::time::Instant::now();
        // A per-dimension limit that makes the larger grids two-dimensional.
        let words = run_decode(emu, input, 512);
        let mut pixels = 0u64;
        for (label, g, oracle) in cases {
            pixels += u64::from(g.width * g.height);
            let rgb = window_rgb(&words, g);
            if &rgb != oracle {
                let n = rgb.iter().zip(oracle).filter(|(a, b)| a != b).count();
                failures.push(format!(
                    "{label}: {n} channel values differ from the oracle"
                ));
            }
        }
        println!(
            "scale 1/{}: {} windows, {pixels} pixels, {:.2?}",
            1 << k,
            cases.len(),
            start.elapsed()
        );
    }
    println!("{ready} files on the device path, {fallback} through the CPU fallback");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn small_bindings_split_a_decode_into_chunks() {
    let Some(emu) = emulator() else {
        return;
    };
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
    let launches = input.launches(1 << 20, 40).expect("plan");
    assert!(launches.len() >= 6, "{} launches", launches.len());
    assert!(launches.iter().any(|l| l.grid[1] > 1), "no 2D grid");
    let words = run_decode(emu, &input, 40);
    for (file, g, oracle) in &expected {
        assert_eq!(&window_rgb(&words, g), oracle, "{file} {g:?}");
    }
}

/// EXIF-rotated JPEGs through a whole [`BatchPlan`] (decode, orient, copy back), whole
/// and in windows of the upright frame: each equal to the oracle's decode of the stored
/// rectangle [`prepare`] chose, turned upright, and covering the window asked for.
#[test]
fn rotated_jpegs_through_a_batch_plan_match_the_oracle_upright() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut files = vec![common::data_dir().join("jpeg/pil_hopper_orientation_6.jpg")];
    if let Some(corpus) = common::corpus_dir() {
        for name in [
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
            let (uw, uh) = if info.orientation >= 5 {
                (full.1, full.0)
            } else {
                full
            };
            let mut windows = vec![None];
            for _ in 0..2 {
                let x0 = rng.below(u64::from(uw)) as u32;
                let y0 = rng.below(u64::from(uh)) as u32;
                let x1 = x0 + 1 + rng.below(u64::from(uw - x0)) as u32;
                let y1 = y0 + 1 + rng.below(u64::from(uh - y0)) as u32;
                windows.push(Some([x0, y0, x1, y1]));
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
                samples.push(p.image);
                want.push((f.clone(), window, up, (uw, uh)));
            }
        }
        let mut plan = BatchPlan::new(DeviceLimits::UNBOUNDED);
        plan.plan_decode(samples.iter()).expect("plan");
        let sizes = plan.sizes();
        let mut upload = vec![0u8; sizes.upload as usize];
        plan.write_upload(&mut upload).expect("upload");
        let a = sizes.augment_offset as usize;
        let mut buffers = Buffers::default()
            .with(
                Buffer::DecodeInput,
                upload[..sizes.decode_input as usize].to_vec(),
            )
            .with(
                Buffer::AugmentInput,
                upload[a..a + sizes.augment_input as usize].to_vec(),
            )
            .with(Buffer::Planes, garbage(sizes.planes.max(4)))
            .with(Buffer::Windows, garbage(sizes.windows.max(4)))
            .with(Buffer::Oriented, garbage(sizes.oriented.max(4)));
        emu.run(plan.steps(), &mut buffers);
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
            let [x0, y0, x1, y1] = window.unwrap_or([0, 0, full.0, full.1]);
            let (ox, oy) = img.origin;
            assert!(
                ox <= x0 && oy <= y0 && ox + img.width >= x1 && oy + img.height >= y1,
                "{what}: got {}x{} at {ox},{oy}",
                img.width,
                img.height
            );
            let rgb: Vec<u8> = up
                .iter()
                .flat_map(|p| p.to_le_bytes()[..3].to_vec())
                .collect();
            assert!(img.data == rgb, "{what}: pixels differ from the oracle");
        }
    }
    println!("orientations checked: {orientations:?}");
    assert!(orientations.iter().any(|&o| o >= 5));
    if common::corpus_dir().is_some() {
        assert_eq!(orientations.len(), 7, "{orientations:?}");
    }
}

/// JPEGs for the hardware decoder (nvJPEG on CUDA): the plan decodes them whole into the
/// RGB buffer (here the CPU decoder stands in for nvJPEG, as the CUDA backend itself does
/// for what nvJPEG refuses), then `pack_rgbi` places each window, turned upright where
/// EXIF says so, beside hybrid-decoded samples of the same batch. The windows are the
/// CPU decoder's pixels.
#[test]
fn hardware_decoded_jpegs_through_a_batch_plan_match_the_cpu_decoder() {
    use stoker::backend::device::job::{prepare_with, HardwareDecode};
    let Some(emu) = emulator() else {
        return;
    };
    let mut files: Vec<PathBuf> = common::decode_test_jpegs();
    files.push(common::data_dir().join("jpeg/pil_hopper_orientation_6.jpg"));
    let pool = stoker::backend::device::CoeffPool::default();
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
        let (uw, uh) = (upright.width, upright.height);
        for k in 0..2 {
            let window = (k == 1).then(|| {
                let x0 = rng.below(u64::from(uw)) as u32;
                let y0 = rng.below(u64::from(uh)) as u32;
                [
                    x0,
                    y0,
                    x0 + 1 + rng.below(u64::from(uw - x0)) as u32,
                    y0 + 1 + rng.below(u64::from(uh - y0)) as u32,
                ]
            });
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
            want.push((f.clone(), window, bytes.clone()));
        }
    }
    assert!(
        encoded >= 10,
        "only {encoded} samples for the hardware decoder"
    );
    let mut plan = BatchPlan::new(DeviceLimits::UNBOUNDED);
    plan.plan_decode(samples.iter()).expect("plan");
    let sizes = plan.sizes();
    assert!(sizes.rgbi > 0);
    // What nvJPEG writes: each whole image, as stored, rows `pitch` bytes apart.
    let mut rgbi = garbage(sizes.rgbi);
    for j in plan.encoded() {
        let DeviceSample::Encoded { bytes, .. } = &samples[j.sample] else {
            panic!("sample {} is not encoded", j.sample);
        };
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
    }
    let mut upload = vec![0u8; sizes.upload as usize];
    plan.write_upload(&mut upload).expect("upload");
    let a = sizes.augment_offset as usize;
    let mut buffers = Buffers::default()
        .with(
            Buffer::DecodeInput,
            upload[..sizes.decode_input as usize].to_vec(),
        )
        .with(
            Buffer::AugmentInput,
            upload[a..a + sizes.augment_input as usize].to_vec(),
        )
        .with(Buffer::Planes, garbage(sizes.planes.max(4)))
        .with(Buffer::Windows, garbage(sizes.windows.max(4)))
        .with(Buffer::Oriented, garbage(sizes.oriented.max(4)))
        .with(Buffer::Rgbi, rgbi);
    let steps: Vec<Step> = plan
        .steps()
        .iter()
        .filter(|s| **s != Step::Hardware)
        .cloned()
        .collect();
    assert!(steps
        .iter()
        .any(|s| matches!(s, Step::Launch(l) if l.kernel == Kernel::PackRgbi)));
    emu.run(&steps, &mut buffers);
    let got = plan
        .windows_to_host(buffers.get(Buffer::Windows))
        .expect("windows");
    for (img, (f, window, bytes)) in got.iter().zip(&want) {
        let what = format!("{}, window {window:?}", f.display());
        let mut full = Image8::default();
        cpu::decode_image(bytes, &DecodeOptions::default(), &mut full).expect("cpu");
        assert_eq!(img.full, (full.width, full.height), "{what}");
        if let Some([x0, y0, x1, y1]) = window {
            let (ox, oy) = img.origin;
            assert!(
                ox <= *x0 && oy <= *y0 && ox + img.width >= *x1 && oy + img.height >= *y1,
                "{what}: got {}x{} at {ox},{oy}",
                img.width,
                img.height
            );
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

// ---------------------------------------------------------------------------------------
// Augment (the cases of tests/wgpu_augment.rs).

struct AugmentOut {
    images: Vec<u8>,
    masks: Option<Vec<u8>>,
    launches: usize,
}

/// Runs a batch through the augment launches: windows packed as RGBA words at scattered
/// offsets, outputs and scratch pre-filled with garbage so unwritten bytes show.
fn run_augment(
    emu: &Emulator,
    samples: &[Sample],
    masks: bool,
    max_binding: u64,
    rng: &mut TestRng,
) -> AugmentOut {
    let mut words: Vec<u32> = Vec::new();
    let mut input = AugmentInput::new();
    for s in samples {
        words.extend((0..rng.below(70)).map(|_| 0xDEAD_BEEF));
        let offset = words.len() as u32;
        words.extend(
            s.image
                .data
                .chunks_exact(3)
                .map(|p| u32::from_le_bytes([p[0], p[1], p[2], 255])),
        );
        let image = DeviceImage {
            offset,
            width: s.image.width,
            height: s.image.height,
            origin_x: s.image.origin.0,
            origin_y: s.image.origin.1,
            full_width: s.image.full.0,
            full_height: s.image.full.1,
            scale: s.image.scale,
        };
        input
            .push(&s.plan, image, s.mask.as_ref().filter(|_| masks))
            .expect("push");
    }
    words.push(0);
    let windows = words_to_bytes(&words);
    let (launches, scratch) = input
        .launches(windows.len() as u64, masks, max_binding, 65535)
        .expect("augment plan");
    let steps: Vec<Step> = launches.into_iter().map(Step::Launch).collect();
    let launches = steps.len();
    let mut buffers = Buffers::default()
        .with(Buffer::AugmentInput, input.bytes().to_vec())
        .with(Buffer::Windows, windows)
        .with(Buffer::Horizontal, garbage(scratch.horizontal.max(4)))
        .with(Buffer::Resized, garbage(scratch.resized.max(4)))
        .with(Buffer::Images, garbage(input.images_bytes()));
    if masks {
        buffers = buffers.with(Buffer::Masks, garbage(input.masks_bytes()));
    }
    emu.run(&steps, &mut buffers);
    AugmentOut {
        images: buffers.get(Buffer::Images).to_vec(),
        masks: masks.then(|| buffers.get(Buffer::Masks).to_vec()),
        launches,
    }
}

impl Worst {
    /// Prints the worst difference, and checks that differing elements stay rare: the
    /// kernels do the reference's f32 operations in its order, so a difference is a
    /// rounding accident (the f32 wide contrast sum), never a pattern a one-level
    /// tolerance would hide.
    fn report(&self, what: &str) {
        eprintln!(
            "{what}: worst difference {:.3} levels; {} of {} elements differ",
            self.levels, self.off, self.elements
        );
        assert!(
            self.off * 1000 <= self.elements,
            "{what}: {} of {} elements differ from the reference",
            self.off,
            self.elements
        );
    }
}

#[test]
fn augment_matches_the_reference_for_every_dtype_and_layout() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(0x5EED_0A07);
    let mut id = 0;
    for dtype in [DType::U8, DType::F16, DType::F32] {
        let mut worst = Worst::default();
        for layout in [Layout::Nchw, Layout::Nhwc] {
            for batch in 0..3 {
                let aug = random_augment(&mut rng, dtype, layout);
                let n = 1 + rng.below(7) as usize;
                let samples: Vec<Sample> = (0..n)
                    .map(|_| {
                        id += 1;
                        random_sample(&mut rng, &aug, id, false)
                    })
                    .collect();
                let out = run_augment(emu, &samples, false, 1 << 31, &mut rng);
                check_batch(
                    &samples,
                    &out.images,
                    out.masks.as_deref(),
                    &mut worst,
                    &format!("{dtype:?} {layout:?} batch {batch}"),
                );
            }
        }
        worst.report(&format!("{dtype:?}"));
    }
}

#[test]
fn every_jitter_order_matches_the_reference() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(78);
    let mut worst = Worst::default();
    // Strong jitter: many orders, contrast anywhere in the order (the shared-memory
    // reduction of `vertical_jitter`, once or twice per sample).
    let aug = Augment::new()
        .random_resized_crop(40, (0.2, 1.0), (0.75, 4.0 / 3.0))
        .output_size(41, 23)
        .color_jitter(0.8, 0.9, 0.9)
        .hue(0.5)
        .flip_horizontal(0.5)
        .crop_aware(false);
    let samples: Vec<Sample> = (0..24)
        .map(|id| random_sample(&mut rng, &aug, 1000 + id, false))
        .collect();
    let orders: std::collections::BTreeSet<u32> =
        samples.iter().map(|s| s.plan.jitter_order).collect();
    assert!(orders.len() >= 8, "only {} orders", orders.len());
    let out = run_augment(emu, &samples, false, 1 << 31, &mut rng);
    check_batch(
        &samples,
        &out.images,
        out.masks.as_deref(),
        &mut worst,
        "jitter",
    );
    worst.report("jitter u8");
}

#[test]
fn large_outputs_take_the_wide_contrast_sum() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(31338);
    let mut worst = Worst::default();
    // 240 000 pixels: the contrast sum passes 2^24, so the mean takes the wide path.
    let aug = Augment::new()
        .resize(600, 400)
        .color_jitter(0.3, 0.5, 0.3)
        .hue(0.2)
        .dtype(DType::F16)
        .layout(Layout::Nhwc)
        .normalize(MEAN, STD);
    let samples: Vec<Sample> = (0..2)
        .map(|id| random_sample(&mut rng, &aug, 3000 + id, false))
        .collect();
    let out = run_augment(emu, &samples, false, 1 << 31, &mut rng);
    check_batch(
        &samples,
        &out.images,
        out.masks.as_deref(),
        &mut worst,
        "large",
    );
    worst.report("large f16");
}

#[test]
fn masks_match_the_reference_exactly() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(98);
    let mut worst = Worst::default();
    for (i, dtype) in [DType::U8, DType::F16, DType::F32].into_iter().enumerate() {
        let aug = random_augment(&mut rng, dtype, Layout::Nchw);
        let mut samples: Vec<Sample> = (0..5)
            .map(|id| random_sample(&mut rng, &aug, 500 + 10 * i as u64 + id, true))
            .collect();
        // A sample without a mask in a batch with masks gets zeros.
        samples[2].mask = None;
        let out = run_augment(emu, &samples, true, 1 << 31, &mut rng);
        check_batch(
            &samples,
            &out.images,
            out.masks.as_deref(),
            &mut worst,
            &format!("masks {dtype:?}"),
        );
    }
    worst.report("masks");
}

#[test]
fn small_bindings_split_the_augment_and_give_the_same_result() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(4243);
    for (dtype, layout) in [(DType::F32, Layout::Nhwc), (DType::U8, Layout::Nchw)] {
        let aug = Augment::new()
            .random_resized_crop(9, (0.3, 1.0), (0.75, 4.0 / 3.0))
            .output_size(9, 7)
            .color_jitter(0.4, 0.4, 0.4)
            .flip_horizontal(0.5)
            .dtype(dtype)
            .layout(layout)
            .crop_aware(false);
        let samples: Vec<Sample> = (0..30)
            .map(|id| {
                let mut s = random_sample(&mut rng, &aug, 2000 + id, true);
                // Keep every sample, and any two neighbours (a chunk of mask words may
                // straddle two samples and bind both label planes), within 8 KiB.
                while s.image.data.len() > 1200 * 3
                    || s.mask.as_ref().is_some_and(|m| m.data.len() > 1200)
                {
                    s = random_sample(&mut rng, &aug, 2000 + id, true);
                }
                s
            })
            .collect();
        let a = run_augment(emu, &samples, true, 8192, &mut rng);
        let b = run_augment(emu, &samples, true, 1 << 31, &mut rng);
        assert!(
            a.launches > b.launches + 4,
            "{dtype:?}: {} launches split, {} whole",
            a.launches,
            b.launches
        );
        assert_eq!(a.images, b.images, "{dtype:?}: split and whole differ");
        assert_eq!(a.masks, b.masks);
        let mut worst = Worst::default();
        check_batch(&samples, &a.images, a.masks.as_deref(), &mut worst, "split");
        worst.report(&format!("split {dtype:?}"));
    }
}

/// The f16 conversion at its edges, where a one-step tolerance would hide a wrong rounding:
/// black pixels of an identity resize normalised to exact halfway cases (subnormal ties,
/// the tie at 65520 that rounds to infinity). The slots equal the reference bit for bit.
#[test]
fn f16_rounding_ties_and_overflow_match_half() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(0xF16);
    let q = 2f32.powi(-24); // the smallest f16 subnormal
    let cases: [([f32; 3], [u16; 3]); 2] = [
        // 0.5q, 1.5q, 2.5q: ties to even give 0, 2q, 2q.
        ([-0.5 * q, -1.5 * q, -2.5 * q], [0x0000, 0x0002, 0x0002]),
        // 65504 (the largest f16), the tie at 65520 (to infinity), just below the tie.
        ([-65504.0, -65520.0, -65519.99], [0x7bff, 0x7c00, 0x7bff]),
    ];
    for (id, (mean, want)) in cases.into_iter().enumerate() {
        let aug = Augment::new()
            .output_size(8, 8)
            .normalize(mean, [1.0; 3])
            .dtype(DType::F16)
            .layout(Layout::Nhwc);
        let plan = aug.plan(1, 0, id as u64, 8, 8);
        let data: Vec<u8> = (0..8 * 8)
            .flat_map(|i| {
                let v = if i % 3 == 0 { 0 } else { rng.below(256) as u8 };
                [v; 3]
            })
            .collect();
        let image = Image8 {
            width: 8,
            height: 8,
            data,
            origin: (0, 0),
            full: (8, 8),
            scale: 1,
        };
        let sample = Sample {
            plan,
            image,
            mask: None,
        };
        let out = run_augment(emu, std::slice::from_ref(&sample), false, 1 << 31, &mut rng);
        let mut cpu = vec![0u8; sample.plan.image_bytes()];
        execute_image(
            &sample.plan,
            &sample.image,
            &mut cpu,
            &mut Scratch::default(),
        );
        assert_eq!(&out.images[..cpu.len()], &cpu[..], "case {id}: f16 bits");
        let bits: Vec<u16> = cpu
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert!(
            bits.chunks_exact(3).any(|p| p == want),
            "case {id}: no black pixel gave {want:04x?}"
        );
    }
}

/// A whole batch as the backends run it: JPEGs (some rotated) and CPU-decoded images,
/// planned by [`BatchPlan::plan`] with masks, every step on the emulator. The decoded
/// windows equal the oracle's, and the slots equal the reference augmentation of those
/// windows (within one level; masks exactly).
#[test]
fn a_batch_plan_decodes_and_augments_like_the_reference() {
    let Some(emu) = emulator() else {
        return;
    };
    let mut rng = TestRng(0xBA7C);
    let dir = common::data_dir().join("jpeg");
    let files = [
        "go_video-001_q50_411.jpg",
        "pil_hopper_orientation_6.jpg",
        "jd_moz_jpg-gray.jpg",
        "go_video-001_cmyk.jpg",
        "ljt_testorig.jpg",
        "go_video-001_221212.jpg",
    ];
    for (dtype, layout) in [(DType::F16, Layout::Nchw), (DType::U8, Layout::Nhwc)] {
        let aug = Augment::new()
            .random_resized_crop(24, (0.2, 1.0), (0.75, 4.0 / 3.0))
            .output_size(24, 19)
            .color_jitter(0.4, 0.4, 0.4)
            .hue(0.1)
            .flip_horizontal(0.5)
            .flip_vertical(0.5)
            .normalize(MEAN, STD)
            .dtype(dtype)
            .layout(layout)
            .crop_aware(false);
        let mut jobs = Vec::new();
        let mut oracles = Vec::new();
        for (id, file) in files.iter().enumerate() {
            let bytes = std::fs::read(dir.join(file)).expect("jpeg");
            let info = peek_info(&bytes).expect("info");
            let (w, h) = if info.orientation >= 5 {
                (info.height, info.width)
            } else {
                (info.width, info.height)
            };
            let plan = aug.plan(11, 0, id as u64, w, h);
            let scale = [1u32, 2, 4][rng.below(3) as usize];
            let full = (w.div_ceil(scale), h.div_ceil(scale));
            let window = needed_window(&plan, full, scale);
            let opts = DecodeOptions {
                scale,
                window: Some(window),
                ..DecodeOptions::default()
            };
            // Every other sample the CPU decodes, as a fallback would.
            let image = if id % 3 == 2 {
                let mut img = Image8::default();
                cpu::decode_image(&bytes, &opts, &mut img).expect("cpu decode");
                DeviceSample::Rgb(img)
            } else {
                let p = prepare(&bytes, &opts).expect("prepare");
                assert!(p.cpu_reason.is_none(), "{file}: {:?}", p.cpu_reason);
                p.image
            };
            let oracle = match &image {
                DeviceSample::Jpeg {
                    coeffs,
                    scale,
                    window,
                    orientation: 1,
                } => {
                    let mut packed = PackedJpeg::default();
                    pack(coeffs, *scale, *window, &mut packed).expect("pack");
                    Some(decode_window(&packed))
                }
                DeviceSample::Rgb(img) => Some(img.clone()),
                // Rotated windows are covered by the test above.
                DeviceSample::Jpeg { .. } => None,
                other => panic!("{file}: prepare gave {other:?}"),
            };
            oracles.push(oracle);
            let mask = (id % 2 == 0).then(|| random_mask(&mut rng, w, h));
            jobs.push(DeviceJob { plan, image, mask });
        }
        let mut plan = BatchPlan::new(DeviceLimits::UNBOUNDED);
        plan.plan(&jobs, true).expect("plan");
        let sizes = plan.sizes();
        let mut upload = vec![0u8; sizes.upload as usize];
        plan.write_upload(&mut upload).expect("upload");
        let a = sizes.augment_offset as usize;
        let mut buffers = Buffers::default()
            .with(
                Buffer::DecodeInput,
                upload[..sizes.decode_input as usize].to_vec(),
            )
            .with(
                Buffer::AugmentInput,
                upload[a..a + sizes.augment_input as usize].to_vec(),
            );
        for b in [
            Buffer::Planes,
            Buffer::Windows,
            Buffer::Oriented,
            Buffer::Horizontal,
            Buffer::Resized,
            Buffer::Images,
            Buffer::Masks,
        ] {
            buffers = buffers.with(b, garbage(sizes.of(b).max(4)));
        }
        emu.run(plan.steps(), &mut buffers);
        let windows = plan
            .windows_to_host(buffers.get(Buffer::Windows))
            .expect("windows");
        for (i, (img, oracle)) in windows.iter().zip(&oracles).enumerate() {
            if let Some(o) = oracle {
                assert_eq!(
                    (img.width, img.height, img.origin, &img.data),
                    (o.width, o.height, o.origin, &o.data),
                    "{}: decoded window",
                    files[i]
                );
            }
        }
        let samples: Vec<Sample> = jobs
            .into_iter()
            .zip(windows)
            .map(|(j, image)| Sample {
                plan: j.plan,
                image,
                mask: j.mask,
            })
            .collect();
        let out = AugmentOut {
            images: buffers.get(Buffer::Images).to_vec(),
            masks: Some(buffers.get(Buffer::Masks).to_vec()),
            launches: plan.steps().len(),
        };
        let what = format!("batch plan {dtype:?} {layout:?}");
        let mut worst = Worst::default();
        check_batch(
            &samples,
            &out.images,
            out.masks.as_deref(),
            &mut worst,
            &what,
        );
        worst.report(&what);
    }
}

//! nvJPEG through `backend::cuda::nvjpeg`: loading at run time, with or without the library.
//!
//! - No libnvjpeg: prints `skipped: libnvjpeg.so.13 not found` and passes, unless
//!   `STOKER_REQUIRE_NVJPEG=1`.
//! - libnvjpeg but no GPU (run with `LD_LIBRARY_PATH=<wheel>/nvidia/cu13/lib`): the version is
//!   13.x and creating a decoder is an `Err` naming an nvJPEG status, not a panic.
//! - `STOKER_REQUIRE_CUDA=1` (a GPU machine): decodes the baseline 4:4:4 JPEGs of
//!   `tests/data` (and of the corpus, where it is beside the checkout) into device memory on both backends and compares them with the CPU
//!   decoder, within +-2 per channel.
#![cfg(feature = "cuda")]

mod common;

use std::path::PathBuf;

use common::data_dir;

use stoker::backend::cuda::nvjpeg::{self, Decoder, DeviceImage, ImageInfo, Library, Subsampling};
use stoker::decode::{cpu, peek_info, DecodeOptions, Format, Image8, JpegProcess};

fn env_on(name: &str) -> bool {
    std::env::var(name).as_deref() == Ok("1")
}

/// The library, or `None` (after printing why) when it is absent and not required.
fn library(required: bool) -> Option<Library> {
    match Library::load() {
        Ok(lib) => Some(lib),
        Err(e) if required || env_on("STOKER_REQUIRE_NVJPEG") => {
            panic!("libnvjpeg is required here but could not be loaded: {e}")
        }
        Err(e) => {
            println!("skipped: libnvjpeg.so.13 not found ({e})");
            None
        }
    }
}

/// Whether CUDA device 0 can be used. Checks for libcuda first: cudarc panics without it.
fn gpu_usable() -> bool {
    if !stoker::backend::cuda::driver_present() {
        return false;
    }
    cudarc::driver::CudaContext::new(0).is_ok()
}

#[test]
fn loads_reports_version_and_fails_cleanly_without_gpu() {
    let Some(lib) = library(false) else { return };
    println!("loaded {}", lib.path());
    let (major, minor, patch) = lib.version().expect("nvjpegGetProperty needs no GPU");
    println!("nvJPEG {major}.{minor}.{patch}");
    assert_eq!(major, 13, "expected nvJPEG 13, got {major}.{minor}.{patch}");
    assert_eq!(nvjpeg::version().expect("version()"), (major, minor, patch));

    // A zero batch is refused before nvJPEG is asked for anything.
    let err = Decoder::new(&lib, 0).expect_err("batch size 0");
    assert!(matches!(err, stoker::Error::Config { .. }), "{err}");

    if env_on("STOKER_REQUIRE_CUDA") {
        return; // `decodes_like_the_cpu_decoder` covers the GPU case.
    }
    match Decoder::new(&lib, 4) {
        Err(e) => {
            let msg = e.to_string();
            println!("Decoder::new without a usable GPU: {msg}");
            assert!(
                msg.contains("NVJPEG_STATUS_"),
                "the error should name an nvJPEG status: {msg}"
            );
            assert!(
                matches!(e, stoker::Error::BackendUnavailable { .. }),
                "{msg}"
            );
        }
        Ok(dec) => {
            assert!(
                gpu_usable(),
                "nvJPEG created a decoder ({dec:?}) but CUDA has no device"
            );
            println!("a GPU is present ({dec:?}): set STOKER_REQUIRE_CUDA=1 to check decoding");
        }
    }
}

/// The CPU decoder's RGB, without the EXIF rotation (nvJPEG does not apply it).
fn cpu_rgb(bytes: &[u8]) -> Option<Image8> {
    let opts = DecodeOptions {
        orientation: false,
        ..DecodeOptions::default()
    };
    let mut img = Image8::default();
    cpu::decode_image(bytes, &opts, &mut img).ok().map(|_| img)
}

/// Largest and mean absolute difference between the GPU rows (`pitch` apart) and `cpu`.
fn diff(gpu: &[u8], pitch: usize, cpu: &Image8) -> (u8, f64) {
    let row = cpu.width as usize * 3;
    let (mut max, mut sum) = (0u8, 0u64);
    for y in 0..cpu.height as usize {
        let g = &gpu[y * pitch..y * pitch + row];
        let c = &cpu.data[y * row..(y + 1) * row];
        for (a, b) in g.iter().zip(c) {
            let d = a.abs_diff(*b);
            max = max.max(d);
            sum += u64::from(d);
        }
    }
    let n = (row * cpu.height as usize).max(1);
    (max, sum as f64 / n as f64)
}

/// A baseline, 3-component, YCbCr JPEG (not Adobe-RGB coded) per the crate's own parser.
fn baseline_ycc(bytes: &[u8]) -> bool {
    peek_info(bytes).is_ok_and(|i| {
        i.format == Format::Jpeg
            && i.process == Some(JpegProcess::Baseline)
            && i.components == 3
            && i.adobe_transform != Some(0)
    })
}

/// Output rows padded to 256 bytes, as a pitched allocation would be.
fn pitch_for(info: &ImageInfo) -> usize {
    info.rgb_row_bytes().div_ceil(256) * 256
}

/// Per-image results of one batch, and each output copied back (rows `pitch` apart).
type Decoded = (Vec<Result<(), nvjpeg::Refusal>>, Vec<Vec<u8>>);

/// Decodes `inputs` in one batch into fresh device buffers and copies them back.
fn decode_on_gpu(
    dec: &mut Decoder,
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    inputs: &[(&[u8], DeviceImage)],
) -> stoker::Result<Decoded> {
    use cudarc::driver::DevicePtrMut;

    let mut bufs: Vec<cudarc::driver::CudaSlice<u8>> = inputs
        .iter()
        .map(|(_, out)| {
            stream
                .alloc_zeros::<u8>(out.min_bytes().max(1))
                .expect("alloc")
        })
        .collect();
    let results = {
        // Hold the write guards until the decode is queued, so cudarc orders later reads.
        let ptrs: Vec<_> = bufs.iter_mut().map(|b| b.device_ptr_mut(stream)).collect();
        let outputs: Vec<DeviceImage> = inputs
            .iter()
            .zip(&ptrs)
            .map(|((_, out), (ptr, _))| DeviceImage { ptr: *ptr, ..*out })
            .collect();
        let images: Vec<&[u8]> = inputs.iter().map(|(b, _)| *b).collect();
        // SAFETY: `stream` belongs to the context current on this thread, the one `dec` was
        // created in; each output points at a buffer of `min_bytes()` allocated above that
        // nothing else touches and that is freed only after the synchronize below; `images`
        // borrows `inputs`, which outlives the synchronize.
        unsafe { dec.decode_batch(stream.cu_stream(), &images, &outputs) }
    };
    stream.synchronize().expect("stream synchronize");
    let host = bufs
        .iter()
        .map(|b| stream.clone_dtoh(b).expect("copy back"))
        .collect();
    results.map(|r| (r, host))
}

#[test]
fn decodes_like_the_cpu_decoder() {
    if !env_on("STOKER_REQUIRE_CUDA") {
        println!("skipped: set STOKER_REQUIRE_CUDA=1 on a GPU machine");
        return;
    }
    let Some(lib) = library(true) else { return };
    let culib = stoker::backend::cuda::driver_present();
    assert!(culib, "STOKER_REQUIRE_CUDA=1 but libcuda is not present");
    let ctx = cudarc::driver::CudaContext::new(0).expect("CUDA device 0");
    let stream = ctx.new_stream().expect("CUDA stream");
    let files = common::decode_test_jpegs();
    let malformed =
        std::fs::read(data_dir().join("jpeg/jd_crash_missing-sof.jpg")).expect("malformed sample");

    for allow_hardware in [true, false] {
        ctx.bind_to_thread().expect("bind context");
        let mut dec = Decoder::with_hardware(&lib, 4, allow_hardware).expect("decoder on a GPU");
        println!(
            "--- allow_hardware={allow_hardware}: hardware={} engines={:?}",
            dec.hardware(),
            dec.engines()
        );
        if !allow_hardware {
            assert!(!dec.hardware());
        }

        // 1. Baseline 4:4:4 files in one batch, plus a malformed file and an undersized
        //    output, which must be refused per image without failing the batch.
        let mut chosen: Vec<(PathBuf, Vec<u8>, ImageInfo)> = Vec::new();
        for path in &files {
            let bytes = std::fs::read(path).expect("read test file");
            if !baseline_ycc(&bytes) {
                continue;
            }
            let Ok(info) = dec.image_info(&bytes) else {
                continue;
            };
            if info.subsampling != Subsampling::Css444 {
                continue;
            }
            if dec.hardware() && !dec.hardware_supports(&bytes) {
                println!("{}: not supported by the hardware decoder", path.display());
                continue;
            }
            chosen.push((path.clone(), bytes, info));
        }
        assert!(!chosen.is_empty(), "no baseline 4:4:4 JPEG was decodable");
        let mut inputs: Vec<(&[u8], DeviceImage)> = chosen
            .iter()
            .map(|(_, bytes, info)| {
                let out = DeviceImage {
                    ptr: 0,
                    pitch: pitch_for(info),
                    width: info.width,
                    height: info.height,
                };
                (bytes.as_slice(), out)
            })
            .collect();
        let (first_bytes, first_info) = (&chosen[0].1, chosen[0].2);
        inputs.push((malformed.as_slice(), DeviceImage::packed(0, 16, 16)));
        let small = DeviceImage::packed(0, first_info.width - 1, first_info.height);
        inputs.push((first_bytes.as_slice(), small));

        let (results, host) = decode_on_gpu(&mut dec, &stream, &inputs).expect("batched decode");
        assert_eq!(results.len(), inputs.len());
        assert!(results[chosen.len()].is_err(), "malformed file accepted");
        assert!(
            results[chosen.len() + 1].is_err(),
            "undersized output accepted"
        );
        println!("refused: {:?}", &results[chosen.len()..]);
        for (i, (path, bytes, info)) in chosen.iter().enumerate() {
            assert!(results[i].is_ok(), "{}: {:?}", path.display(), results[i]);
            let cpu = cpu_rgb(bytes).expect("CPU decode");
            assert_eq!((cpu.width, cpu.height), (info.width, info.height));
            let (max, mean) = diff(&host[i], pitch_for(info), &cpu);
            println!(
                "{} {}x{} 4:4:4: max diff {max}, mean {mean:.3}",
                path.display(),
                info.width,
                info.height
            );
            assert!(max <= 2, "{}: max diff {max} > 2", path.display());
        }
        assert_eq!(dec.batch_size(), Some(chosen.len()));

        // 2. Every other file alone, reported but not compared strictly (chroma upsampling
        //    and colour conversion differ from libjpeg-turbo's).
        for path in &files {
            if chosen.iter().any(|(p, _, _)| p == path) {
                continue;
            }
            let bytes = std::fs::read(path).expect("read test file");
            // Only files the CPU decoder accepts: hostile files are not nvJPEG's test here.
            let Some(cpu) = cpu_rgb(&bytes) else {
                println!("{}: refused by the CPU decoder, not sent", path.display());
                continue;
            };
            let info = match dec.image_info(&bytes) {
                Ok(info) if matches!(info.components, 1 | 3) => info,
                r => {
                    println!("{}: {r:?}, not sent", path.display());
                    continue;
                }
            };
            if info.subsampling == Subsampling::Unknown
                || (dec.hardware() && !dec.hardware_supports(&bytes))
            {
                println!("{}: {:?}, not sent", path.display(), info.subsampling);
                continue;
            }
            let out = DeviceImage::packed(0, info.width, info.height);
            let decoded = decode_on_gpu(&mut dec, &stream, &[(bytes.as_slice(), out)]);
            let (results, host) = match decoded {
                Ok(d) => d,
                Err(e) => {
                    println!(
                        "{} {:?}: batch failed: {e}",
                        path.display(),
                        info.subsampling
                    );
                    continue;
                }
            };
            match &results[0] {
                Ok(()) if (cpu.width, cpu.height) == (info.width, info.height) => {
                    let (max, mean) = diff(&host[0], out.pitch, &cpu);
                    println!(
                        "{} {:?}: max diff {max}, mean {mean:.3}",
                        path.display(),
                        info.subsampling
                    );
                }
                r => println!("{} {:?}: {r:?}", path.display(), info.subsampling),
            }
        }
    }
}

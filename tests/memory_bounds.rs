//! What a hostile header costs before the file is refused: a small JPEG whose frame header
//! claims 13370x13370 pixels (under the default 178.9 Mpx limit) must be reported without
//! holding memory for the pixels or coefficients it claims, on every path: the CPU whole
//! decode (`stoker decode`, `stoker inspect --decode`), the host entropy decode of the
//! device path, the CPU pipeline and the wgpu pipeline. (Its own test binary: it installs
//! a peak-tracking allocator.)
//!
//! Two measures: the peak of the heap this process allocates through Rust (exact), and
//! the peak resident set (Linux's `VmHWM`, reset through `/proc/self/clear_refs`), which
//! also sees libjpeg's own allocations as they are touched; the second is skipped where
//! the reset is not allowed.

mod common;

use common::peak_alloc::measure;

use std::sync::Mutex;

use stoker::decode::{cpu, DecodeOptions, Image8};
use stoker::{Augment, BackendKind, Dataset, Pipeline};

#[global_allocator]
static ALLOC: common::peak_alloc::Peak = common::peak_alloc::Peak;

/// One measurement at a time (the counters are process-wide).
static SERIAL: Mutex<()> = Mutex::new(());

/// The claimed size: 178.76 Mpx, under the default limit of 178,956,970.
const CLAIM: u16 = 13370;

/// At most this many bytes above what was held before may be allocated or resident while
/// such a file is refused (its pixels would be 536 MB).
const BOUND: usize = 48 << 20;

/// `file` (under `tests/data`) with the width and height of its frame header replaced.
fn claiming(file: &str, width: u16, height: u16) -> Vec<u8> {
    let mut b = std::fs::read(common::data_dir().join(file)).expect("test JPEG");
    let mut i = 2;
    while i + 9 < b.len() {
        assert_eq!(b[i], 0xFF, "{file}: segment expected at {i}");
        let marker = b[i + 1];
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
            b[i + 5..i + 7].copy_from_slice(&height.to_be_bytes());
            b[i + 7..i + 9].copy_from_slice(&width.to_be_bytes());
            return b;
        }
        i += 2 + len;
    }
    panic!("{file}: no frame header");
}

/// The crafted files: Huffman-coded, sequential (baseline 4:2:0, 72 KB of real data)
/// and progressive (17 KB). An arithmetic-coded file is not among them: its decoder
/// reads zeros past the end of a scan's data without a warning, so libjpeg cannot tell
/// such a file from one that codes a flat image in few bytes, and decodes it whole.
fn crafted() -> Vec<(&'static str, Vec<u8>)> {
    [
        "samples/photo/skimage_coffee.jpg",
        "jpeg/go_video-001_221212.jpg",
    ]
    .into_iter()
    .map(|f| (f, claiming(f, CLAIM, CLAIM)))
    .collect()
}

fn check(what: &str, heap: usize, rss: Option<usize>) {
    println!(
        "{what}: peak heap +{:.1} MB, peak resident +{}",
        heap as f64 / 1e6,
        rss.map_or("(not measurable here)".into(), |r| format!(
            "{:.1} MB",
            r as f64 / 1e6
        ))
    );
    assert!(heap < BOUND, "{what}: {heap} bytes of heap");
    if let Some(r) = rss {
        assert!(r < BOUND, "{what}: {r} bytes resident");
    }
}

#[test]
fn a_whole_cpu_decode_of_a_false_header_is_refused_without_its_pixels() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (file, bytes) in crafted() {
        let info = stoker::decode::peek_info(&bytes).expect("headers");
        assert_eq!((info.width, info.height), (13370, 13370));
        let mut img = Image8::default();
        let (r, heap, rss) =
            measure(|| cpu::decode_image(&bytes, &DecodeOptions::default(), &mut img));
        let e = r.expect_err("strict decoding refuses the file");
        assert!(e.to_string().contains("corrupt data"), "{file}: {e}");
        check(&format!("CPU decode of {file}"), heap, rss);
    }
}

#[test]
fn the_host_entropy_decode_refuses_a_false_header_without_its_coefficients() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (file, bytes) in crafted() {
        let (r, heap, rss) =
            measure(|| stoker::backend::device::prepare(&bytes, &DecodeOptions::default()));
        let e = r.expect_err("strict decoding refuses the file");
        assert!(e.to_string().contains("corrupt data"), "{file}: {e}");
        check(&format!("device preparation of {file}"), heap, rss);
    }
}

/// One epoch of a pipeline over the crafted files and one good file: the good one is
/// delivered, each crafted one reported.
fn pipeline_epoch(backend: BackendKind) {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = crafted();
    for (i, (_, bytes)) in files.iter().enumerate() {
        common::write(dir.path(), &format!("a/bad{i}.jpg"), bytes);
    }
    let good = std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("good");
    common::write(dir.path(), "a/good.jpg", &good);
    let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .backend(backend)
        .augment(Augment::new().random_resized_crop(32, (0.08, 1.0), (0.75, 1.33)))
        .batch_size(files.len() + 1)
        .workers(2)
        .readers(2)
        .build()
        .expect("pipeline");
    let ((delivered, errors), heap, rss) = measure(|| common::first_epoch(&pipe));
    assert_eq!(delivered, 1, "{errors:?}");
    assert_eq!(errors.len(), files.len(), "{errors:?}");
    for e in &errors {
        assert!(e.contains("corrupt data"), "{e}");
    }
    check(&format!("{backend} pipeline epoch"), heap, rss);
}

#[test]
fn the_cpu_pipeline_reports_a_false_header_cheaply() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    pipeline_epoch(BackendKind::Cpu);
}

#[test]
fn the_wgpu_pipeline_reports_a_false_header_cheaply() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if common::wgpu_context().is_none() {
        return;
    }
    pipeline_epoch(BackendKind::Wgpu);
}

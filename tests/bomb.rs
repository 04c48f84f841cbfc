//! A decompression bomb is refused before anything large is allocated: a header claiming
//! a huge image (over the limits), and a small file of every format whose headers claim
//! 13000 x 13000 pixels (169 Mpx, under the default limit of 178,956,970: its pixels would
//! be 507 MB) with no pixel data to back them. (Its own test binary: it installs a
//! counting allocator.)

mod common;

use common::peak_alloc::measure;

use std::sync::Mutex;

use stoker::decode::{cpu, DecodeError, DecodeOptions, Image8, LabelPlane};
use stoker::{Augment, BackendKind, Dataset, Pipeline};

#[global_allocator]
static ALLOC: common::peak_alloc::Peak = common::peak_alloc::Peak;

/// One measurement at a time (the counters are process-wide).
static SERIAL: Mutex<()> = Mutex::new(());

/// The claimed size of the crafted files.
const CLAIM: u32 = 13000;

/// At most this many bytes above what was held before may be allocated while one such
/// file is refused: a tenth of its pixels' 507 MB.
const BOUND: usize = 48 << 20;

#[test]
fn bomb_headers_are_refused_without_allocating() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let jpeg = std::fs::read(common::data_dir().join("jpeg/jd_crash_max_size.jpg")).expect("bomb");
    // A PNG header claiming 60000 x 60000 pixels, followed by nothing.
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
    png.extend_from_slice(b"IHDR");
    png.extend_from_slice(&60000u32.to_be_bytes());
    png.extend_from_slice(&60000u32.to_be_bytes());
    png.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    common::peak_alloc::reset();
    let opts = DecodeOptions::default();
    let mut img = Image8::default();
    let r = cpu::decode_image(&jpeg, &opts, &mut img);
    assert!(
        matches!(
            r,
            Err(DecodeError::TooManyPixels {
                width: 65535,
                height: 65535,
                ..
            })
        ),
        "{r:?}"
    );
    let r = cpu::decode_image(&png, &opts, &mut img);
    assert!(matches!(r, Err(DecodeError::TooManyPixels { .. })), "{r:?}");
    let mut plane = LabelPlane::default();
    assert!(cpu::decode_mask(&png, &opts, &mut plane).is_err());
    let largest = common::peak_alloc::largest();
    assert!(
        largest < 1 << 20,
        "allocated {largest} bytes for a refused header"
    );
    assert!(img.data.capacity() == 0 && plane.data.capacity() == 0);
}

/// A PNG (8-bit RGB, `interlace` 0 or 1) whose IDAT holds the start of a zlib stream.
fn png_bomb(interlace: u8) -> Vec<u8> {
    let mut b = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&CLAIM.to_be_bytes());
    ihdr.extend_from_slice(&CLAIM.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, interlace]);
    common::png_chunk(&mut b, b"IHDR", &ihdr);
    // A stored (uncompressed) deflate block of 16 bytes of a first row, then nothing.
    let mut idat = vec![0x78, 0x01, 0x00, 0x10, 0x00, 0xEF, 0xFF];
    idat.extend_from_slice(&[0; 16]);
    common::png_chunk(&mut b, b"IDAT", &idat);
    b
}

/// A JPEG whose frame header claims the size: the test file `file` with its SOF patched.
fn jpeg_bomb(file: &str) -> Vec<u8> {
    let mut b = std::fs::read(common::data_dir().join(file)).expect("test JPEG");
    let mut i = 2;
    while i + 9 < b.len() {
        let marker = b[i + 1];
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
            let side = (CLAIM as u16).to_be_bytes();
            b[i + 5..i + 7].copy_from_slice(&side);
            b[i + 7..i + 9].copy_from_slice(&side);
            return b;
        }
        i += 2 + len;
    }
    panic!("{file}: no frame header");
}

/// A RIFF WebP of `chunks` (fourcc, payload), padded as RIFF requires.
fn riff(chunks: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
    let mut body = b"WEBP".to_vec();
    for (kind, data) in chunks {
        body.extend_from_slice(*kind);
        body.extend_from_slice(&(data.len() as u32).to_le_bytes());
        body.extend_from_slice(data);
        if data.len() % 2 == 1 {
            body.push(0);
        }
    }
    let mut b = b"RIFF".to_vec();
    b.extend_from_slice(&(body.len() as u32).to_le_bytes());
    b.extend_from_slice(&body);
    b
}

/// A lossless bitstream: the VP8L header for the claimed size, then 16 bytes of 0xA5.
fn vp8l_payload(alpha: bool) -> Vec<u8> {
    let bits = (CLAIM - 1) | ((CLAIM - 1) << 14) | (u32::from(alpha) << 28);
    let mut p = vec![0x2F];
    p.extend_from_slice(&bits.to_le_bytes());
    p.extend_from_slice(&[0xA5; 16]);
    p
}

/// A lossy key frame: the frame header for the claimed size, a first partition said to be
/// 4000 bytes long, and 16 bytes of it.
fn vp8_payload() -> Vec<u8> {
    let tag: u32 = (4000 << 5) | (1 << 4); // key frame, version 0, shown
    let mut p = tag.to_le_bytes()[..3].to_vec();
    p.extend_from_slice(&[0x9D, 0x01, 0x2A]);
    p.extend_from_slice(&(CLAIM as u16).to_le_bytes());
    p.extend_from_slice(&(CLAIM as u16).to_le_bytes());
    p.extend_from_slice(&[0xA5; 16]);
    p
}

/// The VP8X header: `flags`, and a canvas of `side` x `side`.
fn vp8x(flags: u8, side: u32) -> Vec<u8> {
    let mut p = vec![flags, 0, 0, 0];
    p.extend_from_slice(&(side - 1).to_le_bytes()[..3]);
    p.extend_from_slice(&(side - 1).to_le_bytes()[..3]);
    p
}

/// A BMP (BITMAPINFOHEADER) of the claimed size: `bpp` bits per pixel, `compression`
/// (0 none, 1 RLE8, 2 RLE4), a grey palette for 8 bits and fewer, then `data`.
fn bmp_bomb(bpp: u16, compression: u32, data: &[u8]) -> Vec<u8> {
    let colours: u32 = if bpp <= 8 { 1 << bpp } else { 0 };
    let offset = 14 + 40 + 4 * colours;
    let mut b = b"BM".to_vec();
    b.extend_from_slice(&(offset + data.len() as u32).to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&40u32.to_le_bytes());
    b.extend_from_slice(&(CLAIM as i32).to_le_bytes());
    b.extend_from_slice(&(CLAIM as i32).to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&bpp.to_le_bytes());
    b.extend_from_slice(&compression.to_le_bytes());
    b.extend_from_slice(&(data.len() as u32).to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&colours.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    for i in 0..colours {
        let v = (i * 255 / (colours - 1).max(1)) as u8;
        b.extend_from_slice(&[v, v, v, 0]);
    }
    b.extend_from_slice(data);
    b
}

/// A little-endian TIFF, 8-bit grey, one strip of `compression` (1 none, 5 LZW,
/// 8 deflate) said to hold `count` bytes, of which 16 are present.
fn tiff_bomb(compression: u16, count: u32) -> Vec<u8> {
    let entries: [(u16, u16, u32); 9] = [
        (256, 4, CLAIM), // ImageWidth
        (257, 4, CLAIM), // ImageLength
        (258, 3, 8),     // BitsPerSample
        (259, 3, u32::from(compression)),
        (262, 3, 1),     // PhotometricInterpretation: black is zero
        (273, 4, 0),     // StripOffsets: patched below
        (277, 3, 1),     // SamplesPerPixel
        (278, 4, CLAIM), // RowsPerStrip
        (279, 4, count), // StripByteCounts
    ];
    let mut b = b"II*\0".to_vec();
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    let data_at = 8 + 2 + 12 * entries.len() as u32 + 4;
    for (tag, kind, value) in entries {
        let value = if tag == 273 { data_at } else { value };
        b.extend_from_slice(&tag.to_le_bytes());
        b.extend_from_slice(&kind.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        if kind == 3 {
            b.extend_from_slice(&(value as u16).to_le_bytes());
            b.extend_from_slice(&[0, 0]);
        } else {
            b.extend_from_slice(&value.to_le_bytes());
        }
    }
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&[
        0x78, 0x01, 0, 0x10, 0, 0xEF, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8, 9,
    ]);
    b
}

/// A GIF89a whose screen and first frame have the claimed size, with a 2-colour table
/// and the start of its LZW data.
fn gif_bomb() -> Vec<u8> {
    let side = (CLAIM as u16).to_le_bytes();
    let mut b = b"GIF89a".to_vec();
    b.extend_from_slice(&side);
    b.extend_from_slice(&side);
    b.extend_from_slice(&[0x80, 0, 0, 0, 0, 0, 255, 255, 255]);
    b.push(0x2C);
    b.extend_from_slice(&[0, 0, 0, 0]);
    b.extend_from_slice(&side);
    b.extend_from_slice(&side);
    b.push(0);
    b.extend_from_slice(&[2, 4, 0x84, 0x8F, 0xA9, 0xCB]);
    b
}

/// The crafted files, one or more of each format and coding.
fn crafted() -> Vec<(&'static str, Vec<u8>)> {
    let vp8l = |alpha| (b"VP8L", vp8l_payload(alpha));
    vec![
        ("jpeg", jpeg_bomb("samples/photo/skimage_coffee.jpg")),
        ("png", png_bomb(0)),
        ("png interlaced", png_bomb(1)),
        ("webp lossless", riff(&[vp8l(false)])),
        ("webp lossless alpha", riff(&[vp8l(true)])),
        ("webp lossy", riff(&[(b"VP8 ", vp8_payload())])),
        (
            "webp extended lossless",
            riff(&[(b"VP8X", vp8x(0, CLAIM)), vp8l(false)]),
        ),
        // A small canvas, whose lossy frame claims the large size.
        (
            "webp extended small canvas",
            riff(&[(b"VP8X", vp8x(0, 16)), (b"VP8 ", vp8_payload())]),
        ),
        (
            "webp extended lossy alpha",
            riff(&[
                (b"VP8X", vp8x(0x10, CLAIM)),
                (b"ALPH", vec![0, 0xA5, 0xA5]),
                (b"VP8 ", vp8_payload()),
            ]),
        ),
        ("bmp 24-bit", bmp_bomb(24, 0, &[0x7F; 16])),
        ("bmp 4-bit palette", bmp_bomb(4, 0, &[])),
        ("bmp 8-bit palette", bmp_bomb(8, 0, &[1; 16])),
        // RLE: runs of 200 pixels, then the data ends without an end-of-bitmap.
        ("bmp rle8", bmp_bomb(8, 1, &[200, 7, 200, 9, 200, 3])),
        ("bmp rle4", bmp_bomb(4, 2, &[200, 0x17, 200, 0x23])),
        ("tiff", tiff_bomb(1, CLAIM * CLAIM)),
        ("tiff deflate", tiff_bomb(8, 16)),
        ("tiff lzw", tiff_bomb(5, 16)),
        ("gif", gif_bomb()),
    ]
}

/// What bounds the memory a crafted file costs before it is refused. Every file whose
/// data can be bounded from its headers is refused before its pixels are allocated: the
/// heap stays under [`BOUND`]. Lossless WebP, and TIFF strips, can code a large image in a
/// few bytes (a flat one): their decoders are given buffers of the declared size (within
/// the limits) before the data is read; those come zeroed from the allocator and are not
/// written before the data is found wanting, so they are counted on the heap but never
/// resident: (heap bounded, resident bounded).
fn bounds(name: &str) -> (bool, bool) {
    (
        !(name.contains("lossless") || name.starts_with("tiff")),
        true,
    )
}

fn mb(bytes: Option<usize>) -> String {
    bytes.map_or("(not measurable here)".into(), |b| {
        format!("{:.1} MB", b as f64 / 1e6)
    })
}

#[test]
fn a_false_header_of_every_format_is_refused_without_its_pixels() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut over = Vec::new();
    for (name, bytes) in crafted() {
        let info = stoker::decode::peek_info(&bytes);
        let mut img = Image8::default();
        let (r, heap, rss) =
            measure(|| cpu::decode_image(&bytes, &DecodeOptions::default(), &mut img));
        println!(
            "{name} ({} bytes): peak heap +{}, resident +{}; {info:?}: {r:?}",
            bytes.len(),
            mb(Some(heap)),
            mb(rss)
        );
        assert!(r.is_err(), "{name}: decoded");
        let (heap_bounded, rss_bounded) = bounds(name);
        if (heap_bounded && heap >= BOUND) || (rss_bounded && rss.is_some_and(|r| r >= BOUND)) {
            over.push(format!("{name}: heap {heap}, resident {rss:?}"));
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}

/// Two of each crafted WebP and BMP (22 files) through the CPU pipeline with 8 workers:
/// each reported, and the peak resident memory bounded as for one, not 8 times their
/// pixels.
#[test]
fn webp_and_bmp_bombs_through_eight_workers_cost_little() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let files = crafted();
    let mut n = 0;
    for (i, (name, bytes)) in files.iter().enumerate() {
        if !name.starts_with("webp") && !name.starts_with("bmp") {
            continue;
        }
        let ext = &name[..name.find(' ').unwrap_or(name.len())];
        for k in 0..2 {
            common::write(dir.path(), &format!("a/bomb{i}_{k}.{ext}"), bytes);
            n += 1;
        }
    }
    let good = std::fs::read(common::data_dir().join("jpeg/ljt_testorig.jpg")).expect("good");
    common::write(dir.path(), "a/good.jpg", &good);
    let pipe = Pipeline::builder(Dataset::image_folder(dir.path()).expect("folder").all())
        .backend(BackendKind::Cpu)
        .augment(Augment::new().random_resized_crop(32, (0.08, 1.0), (0.75, 1.33)))
        .batch_size(4)
        .workers(8)
        .readers(2)
        .build()
        .expect("pipeline");
    let ((delivered, errors), heap, rss) = measure(|| common::first_epoch(&pipe));
    println!(
        "{n} bombs through 8 workers: peak heap +{}, resident +{}",
        mb(Some(heap)),
        mb(rss)
    );
    assert_eq!(delivered, 1, "{errors:?}");
    assert_eq!(errors.len(), n, "{errors:?}");
    if let Some(rss) = rss {
        assert!(rss < 2 * BOUND, "{rss} bytes resident for {n} bombs");
    }
}

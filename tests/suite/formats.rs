//! WebP, BMP, TIFF and GIF: decoded against Pillow's decodes of the same files
//! (`tests/data/formats/`, made by `scripts/make_format_refs.py`), refused past the limits
//! before allocating, and delivered by the pipeline next to JPEG and PNG on every backend.

use crate::common;

use std::path::{Path, PathBuf};

use stoker::decode::{self, cpu, DecodeError, DecodeOptions, Format, Image8, Limits};
use stoker::{Augment, BackendKind, DType, Dataset, Pipeline};

fn formats_dir() -> PathBuf {
    common::data_dir().join("formats")
}

fn read(name: &str) -> Vec<u8> {
    let p = formats_dir().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A reference PNG (8-bit RGB, written by Pillow) read with the `png` crate directly.
fn reference(name: &str) -> (u32, u32, Vec<u8>) {
    let bytes = read(&format!("{name}.ref.png"));
    let mut dec = png::Decoder::new(std::io::Cursor::new(bytes));
    dec.set_transformations(png::Transformations::IDENTITY);
    let mut r = dec.read_info().expect("reference header");
    let mut buf = vec![0u8; r.output_buffer_size().expect("size")];
    let f = r.next_frame(&mut buf).expect("reference pixels");
    assert_eq!(
        (f.color_type, f.bit_depth),
        (png::ColorType::Rgb, png::BitDepth::Eight),
        "{name}: the references are 8-bit RGB"
    );
    buf.truncate(f.buffer_size());
    (f.width, f.height, buf)
}

fn decode(bytes: &[u8]) -> Result<(decode::ImageInfo, Image8), DecodeError> {
    let mut img = Image8::default();
    let info = cpu::decode_image(bytes, &DecodeOptions::default(), &mut img)?;
    Ok((info, img))
}

/// The largest difference between two images of the same size, in levels.
fn worst(a: &[u8], b: &[u8]) -> u8 {
    assert_eq!(a.len(), b.len());
    common::max_diff(a, b)
}

/// Every lossless file against its reference, exactly; the kind names the format.
#[test]
fn lossless_files_decode_exactly_as_pillow_does() {
    let cases = [
        ("coffee_lossless.webp", Format::Webp, "webp/3c/8bit"),
        ("coffee_alpha_lossless.webp", Format::Webp, "webp/4c/8bit"),
        ("coffee.bmp", Format::Bmp, "bmp/3c/8bit"),
        ("coffee_palette.bmp", Format::Bmp, "bmp/"),
        ("coffee_raw.tiff", Format::Tiff, "tiff/3c/8bit"),
        ("coffee_lzw.tiff", Format::Tiff, "tiff/3c/8bit"),
        ("coffee_gray_lzw.tiff", Format::Tiff, "tiff/1c/8bit"),
        ("coffee_gray16.tiff", Format::Tiff, "tiff/1c/16bit"),
        ("coffee_2frames.gif", Format::Gif, "gif/"),
    ];
    for (name, format, kind) in cases {
        let bytes = read(name);
        let peeked = decode::peek_info(&bytes).expect(name);
        let (info, img) = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(info, peeked, "{name}: decode and peek agree");
        assert_eq!(info.format, format, "{name}");
        assert!(
            info.kind().starts_with(kind),
            "{name}: kind {} should start with {kind}",
            info.kind()
        );
        let (w, h, want) = reference(name);
        assert_eq!((img.width, img.height), (w, h), "{name}: size");
        assert_eq!((img.full, img.origin, img.scale), ((w, h), (0, 0), 1));
        assert_eq!(img.data.len(), want.len(), "{name}: bytes");
        let diff = worst(&img.data, &want);
        println!("{name}: {} {w}x{h}, worst difference {diff}", info.kind());
        assert_eq!(diff, 0, "{name}: pixels differ from Pillow's decode");
    }
}

/// Lossy WebP: a VP8 decoder other than libwebp (Pillow's) may round differently.
/// Measured: identical to libwebp on this file; allowed: 2 levels, a mean below 0.5.
#[test]
fn lossy_webp_is_within_a_stated_tolerance_of_libwebp() {
    let (_, img) = decode(&read("coffee_lossy.webp")).expect("decode");
    let (w, h, want) = reference("coffee_lossy.webp");
    assert_eq!((img.width, img.height), (w, h));
    let diff = worst(&img.data, &want);
    let mean = img
        .data
        .iter()
        .zip(&want)
        .map(|(a, b)| f64::from(a.abs_diff(*b)))
        .sum::<f64>()
        / want.len() as f64;
    println!("lossy webp: worst {diff}, mean {mean:.3}");
    assert!(diff <= 2, "worst difference {diff}");
    assert!(mean < 0.5, "mean difference {mean}");
}

/// 16-bit samples keep their high byte, as the PNG path does: the 16-bit gray TIFF gives
/// the same pixels as the 16-bit gray PNG of the same samples.
#[test]
fn sixteen_bit_tiff_follows_the_png_convention() {
    let (_, tiff) = decode(&read("coffee_gray16.tiff")).expect("tiff");
    let (info, png) = decode(&read("coffee_gray16.png")).expect("png");
    assert_eq!((info.format, info.bit_depth), (Format::Png, 16));
    assert_eq!(tiff, png);
}

/// A GIF gives its first frame, not the second (a rotated copy of the first).
#[test]
fn gif_gives_the_first_frame() {
    let (_, img) = decode(&read("coffee_2frames.gif")).expect("gif");
    let (_, _, first) = reference("coffee_2frames.gif");
    assert_eq!(img.data, first);
    let mut rotated = first.clone();
    rotated.reverse(); // pixel order reversed, and each pixel's channels too
    for px in rotated.chunks_exact_mut(3) {
        px.reverse();
    }
    assert_ne!(img.data, rotated);
}

fn every_file() -> Vec<&'static str> {
    vec![
        "coffee_lossless.webp",
        "coffee_alpha_lossless.webp",
        "coffee_lossy.webp",
        "coffee.bmp",
        "coffee_palette.bmp",
        "coffee_raw.tiff",
        "coffee_lzw.tiff",
        "coffee_gray_lzw.tiff",
        "coffee_gray16.tiff",
        "coffee_2frames.gif",
    ]
}

/// The pixel limit is checked on the headers, for each format, before decoding.
#[test]
fn limits_refuse_before_decoding() {
    for name in every_file() {
        let bytes = read(name);
        let info = decode::peek_info(&bytes).expect(name);
        let opts = DecodeOptions {
            limits: Limits {
                max_pixels: info.pixels() - 1,
                ..Limits::default()
            },
            ..DecodeOptions::default()
        };
        let mut img = Image8::default();
        let r = cpu::decode_image(&bytes, &opts, &mut img);
        assert!(
            matches!(r, Err(DecodeError::TooManyPixels { .. })),
            "{name}: {r:?}"
        );
        assert!(img.data.is_empty(), "{name}: nothing decoded");
        let opts = DecodeOptions {
            limits: Limits {
                max_bytes: bytes.len() as u64 - 1,
                ..Limits::default()
            },
            ..DecodeOptions::default()
        };
        let r = cpu::decode_image(&bytes, &opts, &mut img);
        assert!(
            matches!(r, Err(DecodeError::TooManyBytes { .. })),
            "{name}: {r:?}"
        );
    }
}

/// Headers that declare a huge image in a small file (a BMP of 40000 x 40000, a GIF
/// screen of 65535 x 65535) are refused by the default limit, from the headers alone.
#[test]
fn bombs_are_refused_from_their_headers() {
    let mut bmp = read("coffee.bmp");
    bmp[18..22].copy_from_slice(&40_000i32.to_le_bytes());
    bmp[22..26].copy_from_slice(&40_000i32.to_le_bytes());
    let mut gif = read("coffee_2frames.gif");
    gif[6..10].copy_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF]);
    for (name, bytes) in [("bmp", bmp), ("gif", gif)] {
        let info = decode::peek_info(&bytes).expect(name);
        assert!(info.pixels() > Limits::default().max_pixels, "{name}");
        let r = decode(&bytes);
        assert!(
            matches!(r, Err(DecodeError::TooManyPixels { .. })),
            "{name}: {r:?}"
        );
    }
}

/// Cut-off and damaged files are errors, never panics (fresh random cuts and flips).
#[test]
fn damaged_files_are_errors_not_panics() {
    let seed = common::fresh_seed("cuts and flips");
    let mut rng = common::TestRng(seed);
    for name in every_file() {
        let bytes = read(name);
        for _ in 0..20 {
            let cut = 1 + rng.below(bytes.len() as u64 - 1) as usize;
            let r = decode(&bytes[..cut]);
            assert!(
                !matches!(r, Err(DecodeError::Panicked(_))),
                "{name} cut at {cut}: {r:?}"
            );
            let mut bad = bytes.clone();
            for _ in 0..4 {
                let i = rng.below(bad.len() as u64) as usize;
                bad[i] ^= 1 << rng.below(8);
            }
            let r = decode(&bad);
            assert!(
                !matches!(r, Err(DecodeError::Panicked(_))),
                "{name} with flipped bits: {r:?}"
            );
        }
        // A cut just past the signature is an error.
        assert!(decode(&bytes[..12.min(bytes.len())]).is_err(), "{name}");
    }
}

/// A folder with one file of each format: jpg, png, webp, bmp, tiff, gif.
fn mixed_folder(dir: &Path) {
    let names = ["a.jpg", "b.png", "c.webp", "d.bmp", "e.tiff", "f.gif"];
    for (from, to) in common::FORMAT_FILES.into_iter().zip(names) {
        std::fs::copy(formats_dir().join(from), dir.join(to)).expect("copy");
    }
}

struct Delivered {
    /// (sample id, its image), sorted by id.
    images: Vec<(u64, Vec<u8>)>,
    cpu_fallbacks: u64,
    gpu_decoded: u64,
}

fn deliver(dir: &Path, backend: BackendKind) -> Delivered {
    let data = Dataset::flat(dir).expect("list");
    assert!(data.skipped().is_empty(), "{:?}", data.skipped());
    let pipe = Pipeline::builder(data.all())
        .backend(backend)
        .augment(Augment::validation(32).dtype(DType::U8))
        .batch_size(4)
        .workers(2)
        .readers(1)
        .seed(5)
        .build()
        .expect("pipeline");
    let mut images = Vec::new();
    let mut ep = pipe.epoch(0).expect("epoch");
    for b in ep.by_ref() {
        let b = b.expect("batch");
        assert!(b.errors().is_empty(), "{backend}: {:?}", b.errors());
        let px = b.read_images().expect("images");
        let per = px.len() / b.ids().len();
        for (i, id) in b.ids().iter().enumerate() {
            images.push((*id, px[i * per..(i + 1) * per].to_vec()));
        }
    }
    let st = ep.stats();
    images.sort_by_key(|(id, _)| *id);
    Delivered {
        images,
        cpu_fallbacks: st.cpu_fallbacks,
        gpu_decoded: st.gpu_decoded,
    }
}

/// Six files of six formats give six samples on the CPU backend; on each device backend
/// the same samples with the same pixels, the five non-JPEGs decoded on the CPU.
#[test]
fn a_mixed_folder_delivers_every_format_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    mixed_folder(dir.path());
    let cpu = deliver(dir.path(), BackendKind::Cpu);
    assert_eq!(cpu.images.len(), 6, "six samples delivered");
    for backend in common::backends() {
        if backend == BackendKind::Cpu {
            continue;
        }
        let dev = deliver(dir.path(), backend);
        assert_eq!(dev.images.len(), 6, "{backend}");
        println!(
            "{backend}: {} decoded on the device, {} on the CPU",
            dev.gpu_decoded, dev.cpu_fallbacks
        );
        assert_eq!(
            dev.cpu_fallbacks, 5,
            "{backend}: the non-JPEGs take the CPU path"
        );
        let jpeg = stoker::source::sample_id("a.jpg");
        for ((id, a), (id2, b)) in cpu.images.iter().zip(&dev.images) {
            assert_eq!(id, id2);
            let d = worst(a, b);
            println!("{backend}: sample {id:016x}: worst difference {d}");
            // The CPU-decoded formats go through the same resize on the device: within
            // 1 level; the JPEG is decoded on the device: within the decode tolerance.
            let allowed = if *id == jpeg { 3 } else { 1 };
            assert!(d <= allowed, "{backend}: sample {id:016x} differs by {d}");
        }
    }
}

/// The files whose data is checked against their headers before decoding (RLE bitmaps,
/// extended WebPs, raw alpha) are delivered whole: the same pixels as the plain files they
/// were made from (`coffee_rle8.bmp` codes the indices of `coffee_palette.bmp` in runs;
/// the extended WebPs wrap the bitstreams of `coffee_lossless.webp` and
/// `coffee_lossy.webp` in a `VP8X` header, the second with raw alpha, which is dropped).
#[test]
fn run_length_bitmaps_and_extended_webps_are_not_refused() {
    for (file, same_as) in [
        ("coffee_rle8.bmp", "coffee_palette.bmp"),
        ("coffee_extended_lossless.webp", "coffee_lossless.webp"),
        ("coffee_alpha_lossy.webp", "coffee_lossy.webp"),
    ] {
        let (_, got) = decode(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let (_, want) = decode(&read(same_as)).expect(same_as);
        assert_eq!((got.width, got.height), (97, 61), "{file}");
        assert!(got.data == want.data, "{file} differs from {same_as}");
    }
    // RLE4: the same indices divided by 4, over every fourth colour of the palette.
    let (_, got) = decode(&read("coffee_rle4.bmp")).expect("rle4");
    let palette = read("coffee_palette.bmp");
    let (_, full) = decode(&palette).expect("palette");
    assert_eq!((got.width, got.height), (97, 61));
    let colour = |i: usize| {
        [
            palette[54 + 4 * i + 2],
            palette[54 + 4 * i + 1],
            palette[54 + 4 * i],
        ]
    };
    let stride = 100;
    for y in 0..61usize {
        for x in 0..97usize {
            // Rows are stored bottom-up.
            let index = usize::from(palette[310 + (60 - y) * stride + x]);
            let at = 3 * (y * 97 + x);
            assert_eq!(
                full.data[at..at + 3],
                colour(index),
                "palette file at {x},{y}"
            );
            assert_eq!(
                got.data[at..at + 3],
                colour(index / 4 * 4),
                "rle4 at {x},{y}"
            );
        }
    }
}

/// A zlib stream of stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut z = vec![0x78, 0x01];
    let mut blocks = data.chunks(65535).peekable();
    if blocks.peek().is_none() {
        z.extend_from_slice(&[1, 0, 0, 0xFF, 0xFF]);
    }
    while let Some(b) = blocks.next() {
        z.push(u8::from(blocks.peek().is_none()));
        let n = b.len() as u16;
        z.extend_from_slice(&n.to_le_bytes());
        z.extend_from_slice(&(!n).to_le_bytes());
        z.extend_from_slice(b);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    z
}

/// An Adam7-interlaced PNG of `w` x `h` pixels of `bits` bits (`colour` 0 gray, 2 RGB),
/// whose sample at (x, y) channel c is `sample(x, y, c)`, written here pass by pass.
fn interlaced_png(
    w: u32,
    h: u32,
    bits: u8,
    colour: u8,
    sample: impl Fn(u32, u32, u32) -> u8,
) -> Vec<u8> {
    let channels = if colour == 2 { 3 } else { 1 };
    let mut raw = Vec::new();
    for (x0, y0, dx, dy) in [
        (0, 0, 8, 8),
        (4, 0, 8, 8),
        (0, 4, 4, 8),
        (2, 0, 4, 4),
        (0, 2, 2, 4),
        (1, 0, 2, 2),
        (0, 1, 1, 2),
    ] {
        let xs: Vec<u32> = (x0..w).step_by(dx).collect();
        if xs.is_empty() || y0 >= h {
            continue;
        }
        for y in (y0..h).step_by(dy as usize) {
            raw.push(0); // filter: none
            let mut acc = 0u16;
            let mut n = 0;
            for &x in &xs {
                for c in 0..channels {
                    acc = (acc << bits) | u16::from(sample(x, y, c));
                    n += u32::from(bits);
                    if n == 8 {
                        raw.push(acc as u8);
                        (acc, n) = (0, 0);
                    }
                }
            }
            if n > 0 {
                raw.push((acc << (8 - n)) as u8);
            }
        }
    }
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[bits, colour, 0, 0, 1]);
    for (kind, data) in [
        (b"IHDR", ihdr),
        (b"IDAT", zlib_stored(&raw)),
        (b"IEND", Vec::new()),
    ] {
        common::png_chunk(&mut png, kind, &data);
    }
    png
}

/// Interlaced PNGs, read row by row as their passes arrive, are put together whole: an
/// RGB image and a 2-bit mask of odd sizes, against the samples they were written from.
#[test]
fn interlaced_pngs_are_put_together_from_their_passes() {
    let (w, h) = (13u32, 11u32);
    let rgb = |x: u32, y: u32, c: u32| ((x * 19 + y * 7 + c * 80) % 256) as u8;
    let (_, img) = decode(&interlaced_png(w, h, 8, 2, rgb)).expect("interlaced RGB");
    assert_eq!((img.width, img.height), (w, h));
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let at = (3 * (y * w + x) + c) as usize;
                assert_eq!(img.data[at], rgb(x, y, c), "({x}, {y}) channel {c}");
            }
        }
    }
    let ids = |x: u32, y: u32, _: u32| ((x + 2 * y) % 4) as u8;
    let mut plane = decode::LabelPlane::default();
    cpu::decode_mask(
        &interlaced_png(w, h, 2, 0, ids),
        &DecodeOptions::default(),
        &mut plane,
    )
    .expect("interlaced mask");
    assert_eq!((plane.width, plane.height), (w, h));
    for y in 0..h {
        for x in 0..w {
            assert_eq!(
                plane.data[(y * w + x) as usize],
                u16::from(ids(x, y, 0)),
                "({x}, {y})"
            );
        }
    }
}

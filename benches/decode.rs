//! Full-decode throughput of the CPU decoder next to libjpeg-turbo's own TurboJPEG API (the
//! libjpeg-turbo 3, built by the `turbojpeg` crate) and zune-jpeg, on the same files in the
//! same run: `cargo bench --bench decode`. Prints a table and the ratios to libjpeg-turbo.
//! All decoders produce 8-bit RGB into a reused buffer; the last row is the host side of
//! the GPU decode path: entropy decoding to DCT coefficients only, and, for files with
//! restart markers, the device entropy path's headers, marker scan and packing, and, for
//! any baseline file, the self-synchronising path's headers, un-stuffing and packing; the
//! most the host threads can feed a device.

mod common;

use stoker::decode::{cpu, DecodeOptions, Image8};

fn main() {
    let (dir, files) = common::images();
    let n = files.len();
    let pixels: u64 = files
        .iter()
        .filter_map(|b| stoker::decode::peek_info(b).ok())
        .map(|i| i.pixels())
        .sum();
    println!(
        "decode: {n} JPEGs from {} ({:.3} Mpx on average)\n",
        dir.display(),
        pixels as f64 / n.max(1) as f64 / 1e6
    );
    let min = common::min_duration();
    // Files the device path would hand to the CPU instead (counted once, not timed).
    {
        let mut c = stoker::decode::jpeg::coeffs::Coefficients::default();
        let not_ready = files
            .iter()
            .filter(|f| {
                !matches!(
                    stoker::decode::jpeg::read_coefficients(f, true, &mut c),
                    Ok(stoker::decode::jpeg::coeffs::CoeffStatus::Ready)
                )
            })
            .count();
        println!("({not_ready} of {n} files would not take the device path)");
        let restarts = files
            .iter()
            .filter(|f| stoker::decode::jpeg::huffman::RestartScan::parse(f).is_ok())
            .count();
        println!(
            "({restarts} of {n} files have restart markers: the device entropy path; \
             `stoker convert --to folder` writes a set that has)\n"
        );
    }
    println!(
        "{:<48} {:>7} {:>10} {:>16}",
        "decoder", "threads", "images/s", "vs libjpeg-turbo"
    );
    for threads in common::thread_counts() {
        let turbo = common::throughput(
            n,
            threads,
            min,
            || (turbojpeg::Decompressor::new().ok(), Vec::<u8>::new()),
            |(d, buf), i| {
                let Some(d) = d.as_mut() else { return };
                let Ok(h) = d.read_header(&files[i]) else {
                    return;
                };
                buf.resize(h.width * h.height * 3, 0);
                let img = turbojpeg::Image {
                    pixels: &mut buf[..],
                    width: h.width,
                    pitch: h.width * 3,
                    height: h.height,
                    format: turbojpeg::PixelFormat::RGB,
                };
                let _ = d.decompress(&files[i], img);
            },
        );
        let ours = common::throughput(n, threads, min, Image8::default, |img, i| {
            let _ = cpu::decode_image(&files[i], &DecodeOptions::default(), img);
        });
        let zune = common::throughput(n, threads, min, Vec::<u8>::new, |buf, i| {
            let opts = zune_core::options::DecoderOptions::default()
                .jpeg_set_out_colorspace(zune_core::colorspace::ColorSpace::RGB);
            let mut d = zune_jpeg::JpegDecoder::new_with_options(
                zune_core::bytestream::ZCursor::new(&files[i]),
                opts,
            );
            if d.decode_headers().is_ok() {
                if let Some(size) = d.output_buffer_size() {
                    buf.resize(size, 0);
                    let _ = d.decode_into(buf);
                }
            }
        });
        // The host side of the GPU decode path: entropy decoding to DCT coefficients
        // only (what the host threads do for the device), reusing one buffer per thread.
        let coeffs = common::throughput(
            n,
            threads,
            min,
            stoker::decode::jpeg::coeffs::Coefficients::default,
            |c, i| {
                let _ = stoker::decode::jpeg::read_coefficients(&files[i], true, c);
            },
        );
        // The host side of the device entropy path: headers, the restart-marker scan and
        // the packing of the intervals (no Huffman decoding), for files with restart
        // markers; a file without them costs its failed parse here.
        let entropy = common::throughput(
            n,
            threads,
            min,
            stoker::decode::jpeg::huffman::PackedEntropy::default,
            |p, i| {
                use stoker::decode::jpeg::huffman::{pack_entropy, RestartScan};
                if let Ok(scan) = RestartScan::parse(&files[i]) {
                    let (w, h) = (scan.header.width, scan.header.height);
                    let _ = pack_entropy(&scan, &files[i], 1, [0, 0, w, h], p);
                }
            },
        );
        // The host side of the self-synchronising device path (any baseline file, restart
        // markers or not): headers, un-stuffing and packing, no Huffman decoding.
        let sync = common::throughput(n, threads, min, Vec::<u32>::new, |chunk, i| {
            use stoker::decode::jpeg::huffman::sync::{MAX_SYNC_ROUNDS, SUBSEQUENCE_BITS};
            use stoker::decode::jpeg::huffman::{sync::pack_sync, RestartScan};
            if let Ok(scan) = RestartScan::parse_sync(&files[i]) {
                let _ = pack_sync(&scan, &files[i], SUBSEQUENCE_BITS, MAX_SYNC_ROUNDS, chunk);
            }
        });
        for (name, v) in [
            ("libjpeg-turbo 3 (TurboJPEG API, turbojpeg crate)", turbo),
            ("stoker cpu (libjpeg-turbo via mozjpeg-sys)", ours),
            ("zune-jpeg", zune),
            ("stoker gpu path, host side (coefficients only)", coeffs),
            ("stoker gpu path, host side (restart intervals)", entropy),
            ("stoker gpu path, host side (self-synchronising)", sync),
        ] {
            println!("{name:<48} {threads:>7} {v:>10.1} {:>16.3}", v / turbo);
        }
    }
}

//! Orientation: hand-built `orient` launches (2D grids with idle invocations) and the
//! planner's, equal to an independent reorientation of random windows.

use stoker::backend::device::launch::{grid, PARAM_WORDS};
use stoker::backend::device::orient::{self, OrientJob};
use stoker::backend::device::{Binding, Buffer, DeviceImage, Kernel, Launch, Step};

use super::{bytes_to_words, garbage, words_to_bytes, Buffers, Executor};
use crate::common::TestRng;

/// A `w x h` window of words turned upright for EXIF `orientation`, built from three
/// primitives (Pillow's methods are compositions of them): mirror left-right, mirror
/// top-bottom, transpose.
pub fn upright(px: &[u32], w: usize, h: usize, orientation: u8) -> (Vec<u32>, usize, usize) {
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

pub fn orient_launches_match_an_independent_reorientation(e: &dyn Executor) {
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
        let bind = |buffer, offset, size| Binding {
            buffer,
            offset,
            size,
        };
        let oriented = bind(Buffer::Oriented, 0, px * 4);
        let source = bind(Buffer::Windows, base, (rel + px) * 4);
        steps.push(Step::Launch(Launch {
            kernel: Kernel::Orient,
            grid: g,
            bindings: vec![source, oriented],
            params,
        }));
        let upright_at = bind(Buffer::Windows, dst * 4, px * 4);
        steps.push(Step::Copy {
            src: oriented,
            dst: upright_at,
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
    e.run(&steps, &mut buffers);
    check(&buffers, "hand-built launches");

    // The planner's launches for the same jobs.
    let limits = e.limits();
    let (planned, oriented) =
        orient::launches(&planner_jobs, total, limits.max_binding, limits.per_dim)
            .expect("orient plan");
    assert!(oriented >= largest);
    let mut buffers = Buffers::default()
        .with(Buffer::Windows, input)
        .with(Buffer::Oriented, garbage(oriented));
    e.run(&planned, &mut buffers);
    check(&buffers, "planned launches");
}

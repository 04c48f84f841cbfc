//! Orientation: hand-built `orient` launches (one over every window, several over groups
//! of them; 2D grids with idle invocations) and the planner's (for the executor's limits
//! and for small ones that split the windows into groups), equal to an independent
//! reorientation of random windows at random offsets, every orientation in one batch.

use stoker::backend::device::launch::{grid, PARAM_WORDS};
use stoker::backend::device::orient::{self, OrientJob, JOB_WORDS};
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

/// A window to turn: source word, width, height, orientation, upright window's word.
#[derive(Clone, Copy)]
struct Job {
    offset: u32,
    w: u32,
    h: u32,
    o: u8,
    dst: u64,
}

impl Job {
    fn pixels(&self) -> u64 {
        u64::from(self.w * self.h)
    }
}

/// The bytes from the 256-byte boundary at or below word `start` to word `end`, and that
/// boundary.
fn span(start: u64, end: u64) -> (u64, u64) {
    let base = start * 4 / 256 * 256;
    (base, end * 4 - base)
}

/// A hand-built `orient` launch over `jobs`, their upright windows written to
/// [`Buffer::Oriented`] at word `dst - first`: the sources bound from the 256-byte
/// boundary at or below the first, the records appended to `table` (from a 64-word
/// boundary; the table sits at byte `table_at` of [`Buffer::DecodeInput`]), a grid of at
/// most `per_dim` workgroups a side.
fn hand_launch(
    jobs: &[Job],
    first: u64,
    table: &mut Vec<u32>,
    table_at: u64,
    per_dim: u64,
) -> Step {
    let src_lo = jobs
        .iter()
        .map(|j| u64::from(j.offset))
        .min()
        .expect("jobs");
    let src_hi = jobs
        .iter()
        .map(|j| u64::from(j.offset) + j.pixels())
        .max()
        .expect("jobs");
    let out_lo = jobs.iter().map(|j| j.dst - first).min().expect("jobs");
    let out_hi = jobs
        .iter()
        .map(|j| j.dst - first + j.pixels())
        .max()
        .expect("jobs");
    let (src_base, src_size) = span(src_lo, src_hi);
    let (out_base, out_size) = span(out_lo, out_hi);
    table.resize(table.len().next_multiple_of(64), 0);
    let at = table.len() as u64 * 4;
    let mut invocations = 0u32;
    for j in jobs {
        let (ow, oh) = if j.o >= 5 { (j.h, j.w) } else { (j.w, j.h) };
        table.extend_from_slice(&[
            j.offset - (src_base / 4) as u32,
            j.w,
            j.h,
            u32::from(j.o),
            ow,
            oh,
            (j.dst - first - out_base / 4) as u32,
            invocations,
        ]);
        invocations += j.w * j.h;
    }
    let g = grid(u64::from(invocations), Kernel::Orient.workgroup(), per_dim).expect("grid");
    let mut params = [0u32; PARAM_WORDS];
    params[..3].copy_from_slice(&[jobs.len() as u32, invocations, g[0] * 64]);
    let bind = |buffer, offset, size| Binding {
        buffer,
        offset,
        size,
    };
    Step::Launch(Launch {
        kernel: Kernel::Orient,
        grid: g,
        bindings: vec![
            bind(Buffer::Windows, src_base, src_size),
            bind(
                Buffer::DecodeInput,
                table_at + at,
                (jobs.len() * JOB_WORDS * 4) as u64,
            ),
            bind(Buffer::Oriented, out_base, out_size),
        ],
        params,
    })
}

/// The smallest square-ish grid side that holds `invocations`, sometimes one larger: a
/// 2D grid with idle invocations past the end.
fn square_ish(rng: &mut TestRng, invocations: u64) -> u64 {
    let groups = invocations.div_ceil(64);
    ((groups as f64).sqrt().ceil() as u64).max(1) + rng.below(2)
}

pub fn orient_launches_match_an_independent_reorientation(e: &dyn Executor) {
    let mut rng = TestRng(0x0E1E);
    // Random windows at random word offsets, every orientation, their upright windows
    // one after another after the windows.
    let mut words: Vec<u32> = Vec::new();
    let mut jobs = Vec::new();
    for k in 0..21 {
        words.extend((0..rng.below(300)).map(|_| rng.next_u64() as u32));
        let (w, h) = (1 + rng.below(40) as u32, 1 + rng.below(40) as u32);
        let offset = words.len() as u32;
        words.extend((0..w * h).map(|_| rng.next_u64() as u32));
        jobs.push(Job {
            offset,
            w,
            h,
            o: 2 + (k % 7) as u8,
            dst: 0,
        });
    }
    let first = words.len() as u64 + rng.below(64);
    let mut dst = first;
    let mut want = Vec::new();
    for j in &mut jobs {
        j.dst = dst;
        let src = &words[j.offset as usize..][..j.pixels() as usize];
        want.push((dst, upright(src, j.w as usize, j.h as usize, j.o).0));
        dst += j.pixels();
    }
    let total = dst;
    let upright_bytes = (total - first) * 4;
    let mut input = words.clone();
    input.resize(total as usize, 0xDEAD_BEEF);
    let input = words_to_bytes(&input);
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
                jobs[k].o
            );
        }
    };
    // The table after some bytes of something else in the decode input.
    let table_at = 512;
    let run = |steps: &[Step], table: &[u32], oriented: u64, what: &str| {
        let mut decode_input = garbage(table_at);
        decode_input.extend(words_to_bytes(table));
        let mut buffers = Buffers::default()
            .with(Buffer::Windows, input.clone())
            .with(Buffer::DecodeInput, decode_input)
            .with(Buffer::Oriented, garbage(oriented));
        e.run(steps, &mut buffers);
        check(&buffers, what);
    };
    let copy_back = Step::Copy {
        src: Binding {
            buffer: Buffer::Oriented,
            offset: 0,
            size: upright_bytes,
        },
        dst: Binding {
            buffer: Buffer::Windows,
            offset: first * 4,
            size: upright_bytes,
        },
    };

    // One hand-built launch over every window, then one copy.
    let mut table = Vec::new();
    let per_dim = square_ish(&mut rng, total - first);
    let steps = vec![
        hand_launch(&jobs, first, &mut table, table_at, per_dim),
        copy_back.clone(),
    ];
    run(&steps, &table, upright_bytes, "one hand-built launch");

    // Hand-built launches over random groups, each with its own grid.
    let mut table = Vec::new();
    let mut steps = Vec::new();
    let mut at = 0;
    while at < jobs.len() {
        let n = (1 + rng.below(8) as usize).min(jobs.len() - at);
        let group = &jobs[at..at + n];
        let per_dim = square_ish(&mut rng, group.iter().map(Job::pixels).sum());
        steps.push(hand_launch(group, first, &mut table, table_at, per_dim));
        at += n;
    }
    assert!(steps.len() > 2);
    steps.push(copy_back);
    run(
        &steps,
        &table,
        upright_bytes,
        "hand-built launches over groups",
    );

    // The planner's launches for the same jobs: for the executor's limits one launch, for
    // small ones several; one copy either way.
    let planner_jobs: Vec<OrientJob> = jobs
        .iter()
        .map(|j| OrientJob {
            src: DeviceImage {
                offset: j.offset,
                width: j.w,
                height: j.h,
                ..DeviceImage::default()
            },
            orientation: j.o,
            dst: j.dst,
        })
        .collect();
    let limits = e.limits();
    let small = (8 << 10, 6);
    for (max_binding, per_dim) in [(limits.max_binding, limits.per_dim), small] {
        let pass = orient::launches(&planner_jobs, total * 4, table_at, max_binding, per_dim)
            .expect("orient plan");
        assert_eq!(pass.oriented, upright_bytes);
        let launches: Vec<&Launch> = pass
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Launch(l) => Some(l),
                _ => None,
            })
            .collect();
        assert_eq!(pass.steps.len() - launches.len(), 1, "one copy");
        if (max_binding, per_dim) == small {
            assert!(launches.len() > 3, "{} groups", launches.len());
        } else {
            assert_eq!(launches.len(), 1);
        }
        for l in &launches {
            assert!(
                u64::from(l.grid[0].max(l.grid[1])) <= per_dim,
                "{:?}",
                l.grid
            );
            assert!(l
                .bindings
                .iter()
                .all(|b| b.size <= max_binding && b.offset % 256 == 0));
        }
        let what = format!("planned launches, {max_binding}-byte bindings, {per_dim} per side");
        run(&pass.steps, &pass.table, pass.oriented, &what);
    }
}

//! The self-synchronising Huffman decode's passes ([`Kernel::SYNC`]: `sync_start`,
//! `sync_round`, `sync_scan`, `sync_write`, over a batch table) against their batched
//! scalar oracles (`decode::jpeg::huffman::sync::batch_start` and the others), word for
//! word: the records of every sample (over garbage) after the start, after all the
//! rounds (queued together, nothing read back between them, as the batch path runs them),
//! after the scan and the write, every status and changed word (over garbage: the start
//! zeroes them), and the coefficient buffer (with garbage past it); each sample's status
//! is the per-chunk driver's (`decode_sync_with`), and its coefficients libjpeg's for a
//! clean file. For random JPEGs with and without restart markers, alone and all in one
//! batch, damaged ones, and the bundled files, with subsequences of the default size and of 64 bits
//! (many rounds), and with one round fewer than a decode needed (flagged as not
//! synchronised). The rounds each file needs are printed.

use stoker::backend::device::launch::{grid, PARAM_WORDS};
use stoker::backend::device::{Binding, Buffer, Kernel, Launch, Step};
use stoker::decode::jpeg::coeffs::{CoeffStatus, Coefficients};
use stoker::decode::jpeg::huffman::sync::{
    batch_round, batch_scan, batch_start, batch_write, pack_batch, pack_sync, sync_skips,
    BatchParams, BATCH_WORDS, RECORD_WORDS, SUBSEQUENCE_BITS,
};
use stoker::decode::jpeg::huffman::{
    decode_sync_with, RestartScan, STATUS_NO_SYNC, STATUS_SIMD_RANGE,
};
use stoker::decode::jpeg::read_coefficients;

use super::{bytes_to_words, garbage, words_to_bytes, Buffers, Executor};
use crate::common::{self, restart_jpeg, TestRng, RESTART_SAMPLINGS};

/// Garbage words after the coefficient area, which nothing may write.
const SLACK: usize = 67;

/// Rounds enough for every case here (the default size needs a few, 64 bits a few
/// dozen at most); a decode that needs more is flagged by both and fails the clean check.
pub(super) const ROUNDS: u32 = 128;

/// One launch of `kernel` over `threads` invocations with parameter words 0 (`param`)
/// and the batch's (`p`).
fn launch(
    e: &dyn Executor,
    kernel: Kernel,
    threads: u32,
    param: u32,
    p: &BatchParams,
    sizes: [u64; 4],
) -> Step {
    let bind = |buffer, size| Binding {
        buffer,
        offset: 0,
        size,
    };
    let mut params = [0u32; PARAM_WORDS];
    params[..7].copy_from_slice(&p.words(param));
    Step::Launch(Launch {
        kernel,
        grid: grid(u64::from(threads), kernel.workgroup(), e.limits().per_dim).expect("grid"),
        bindings: vec![
            bind(Buffer::DecodeInput, sizes[0]),
            bind(Buffer::SyncRecords, sizes[1]),
            bind(Buffer::Coefficients, sizes[2]),
            bind(Buffer::EntropyStatus, sizes[3]),
        ],
        params,
    })
}

/// What a sample's run ends with: its status, the rounds that changed an exit, its
/// chunk, its coefficient words (of the device).
pub(super) struct Outcome {
    pub status: u32,
    pub changing: u32,
    /// Subsequences the write pass skipped (past the chunk's write limit).
    pub skipped: u32,
    pub chunk: Vec<u32>,
    pub coefs: Vec<u32>,
}

/// Packs each of `files` with `bits`-bit subsequences and at most `rounds` rounds into
/// one batch, runs the batched passes on `e` and the batched oracle side by side, and
/// asserts every buffer equal after each pass (the rounds all at once); then each
/// sample's status equals the per-chunk driver's (`decode_sync_with`).
fn check_batch(
    e: &dyn Executor,
    files: &[(&RestartScan, &[u8])],
    bits: u32,
    rounds: u32,
    what: &str,
) -> Vec<Outcome> {
    let chunks: Vec<Vec<u32>> = files
        .iter()
        .map(|(scan, jpeg)| {
            let mut chunk = Vec::new();
            pack_sync(scan, jpeg, bits, rounds, &mut chunk).expect("pack");
            chunk
        })
        .collect();
    let out = check_chunks(e, chunks, rounds, what);
    for (i, ((scan, jpeg), o)) in files.iter().zip(&out).enumerate() {
        // The oracle's per-chunk driver gives the same status.
        let mut driver_out = Coefficients::default();
        let driver = decode_sync_with(scan, jpeg, bits, rounds, &mut driver_out).expect("driver");
        assert_eq!(o.status, driver, "{what}: sample {i}: the driver's status");
    }
    out
}

/// [`check_batch`] on chunks already packed (of `pack_sync`, their regions and write
/// limits as set), all in one batch; without the driver's check.
pub(super) fn check_chunks(
    e: &dyn Executor,
    chunks: Vec<Vec<u32>>,
    rounds: u32,
    what: &str,
) -> Vec<Outcome> {
    let refs: Vec<&[u32]> = chunks.iter().map(|c| c.as_slice()).collect();
    let (blob, p, [rec_words, coef_words, status_words]) = pack_batch(&refs, rounds);
    let sizes = [
        4 * blob.len() as u64,
        4 * rec_words as u64,
        4 * (coef_words + SLACK) as u64,
        4 * status_words as u64,
    ];
    let mut buffers = Buffers::default()
        .with(Buffer::DecodeInput, words_to_bytes(&blob))
        .with(Buffer::SyncRecords, garbage(sizes[1]))
        .with(Buffer::Coefficients, garbage(sizes[2]))
        .with(Buffer::EntropyStatus, garbage(sizes[3]));
    let mut rec = bytes_to_words(&garbage(sizes[1]));
    let mut coefs = bytes_to_words(&garbage(sizes[2]));
    let mut status = bytes_to_words(&garbage(sizes[3]));
    let compare = |buffers: &Buffers, rec: &[u32], status: &[u32], pass: &str| {
        let got = bytes_to_words(buffers.get(Buffer::SyncRecords));
        if let Some(at) = got.iter().zip(rec).position(|(a, b)| a != b) {
            panic!(
                "{what}: {}: after {pass}: record word {at} (word {} of its record) is {:#x}, the oracle's {:#x}",
                e.name(),
                at % RECORD_WORDS,
                got[at],
                rec[at]
            );
        }
        let got = bytes_to_words(buffers.get(Buffer::EntropyStatus));
        assert_eq!(
            got,
            status,
            "{what}: {}: after {pass}: status words",
            e.name()
        );
    };
    let subs = p.subsequences;
    e.run(
        &[launch(e, Kernel::SyncStart, subs, 0, &p, sizes)],
        &mut buffers,
    );
    for g in 0..subs {
        batch_start(&blob, &p, &mut rec, &mut status, g);
    }
    compare(&buffers, &rec, &status, "the start");
    let steps: Vec<Step> = (0..rounds)
        .map(|r| launch(e, Kernel::SyncRound, subs, r, &p, sizes))
        .collect();
    e.run(&steps, &mut buffers);
    for round in 0..rounds {
        for g in 0..subs {
            batch_round(&blob, &p, &mut rec, &mut status, round, g);
        }
    }
    compare(&buffers, &rec, &status, "the rounds");
    let copy = rounds % 2;
    e.run(
        &[launch(e, Kernel::SyncScan, p.segments, copy, &p, sizes)],
        &mut buffers,
    );
    for g in 0..p.segments {
        batch_scan(&blob, &p, &mut rec, &mut status, g);
    }
    compare(&buffers, &rec, &status, "the scan");
    e.run(
        &[launch(e, Kernel::SyncWrite, subs, copy, &p, sizes)],
        &mut buffers,
    );
    for g in 0..subs {
        batch_write(&blob, &p, &rec, &mut coefs, &mut status, g);
    }
    compare(&buffers, &rec, &status, "the write");
    let got = bytes_to_words(buffers.get(Buffer::Coefficients));
    if let Some(w) = got.iter().zip(&coefs).position(|(a, b)| a != b) {
        panic!(
            "{what}: {}: coefficient word {w} of {coef_words} is {:#010x}, the oracle's {:#010x}",
            e.name(),
            got[w],
            coefs[w]
        );
    }
    let mut out = Vec::new();
    for (i, chunk) in chunks.into_iter().enumerate() {
        let t = BATCH_WORDS * i;
        let (cf, st) = (blob[t + 4] as usize, blob[t + 5] as usize);
        let changing = status[st + 1..st + 1 + rounds as usize]
            .iter()
            .filter(|&&c| c != 0)
            .count() as u32;
        // The subsequences the write skipped, from the oracle's records of the last round.
        let half = RECORD_WORDS * chunk[1] as usize;
        let r = blob[t + 3] as usize + copy as usize * half;
        let skipped = (0..chunk[1])
            .filter(|&s| sync_skips(&chunk, &rec[r..r + half], s))
            .count() as u32;
        out.push(Outcome {
            status: status[st],
            changing,
            skipped,
            coefs: got[cf..cf + chunk[10] as usize].to_vec(),
            chunk,
        });
    }
    out
}

/// [`check_batch`] on one file.
fn check(
    e: &dyn Executor,
    scan: &RestartScan,
    jpeg: &[u8],
    bits: u32,
    rounds: u32,
    what: &str,
) -> Outcome {
    let mut out = check_batch(e, &[(scan, jpeg)], bits, rounds, what);
    out.pop().expect("one outcome")
}

/// Whether libjpeg reads `jpeg` cleanly (into `theirs`).
fn libjpeg_clean(jpeg: &[u8], theirs: &mut Coefficients) -> bool {
    let read = match read_coefficients(jpeg, true, theirs) {
        Ok(CoeffStatus::Ready) => true,
        Ok(CoeffStatus::CpuOnly(why)) => !why.starts_with("corrupt"),
        _ => false,
    };
    read && theirs.warning.is_none()
}

/// The device's coefficient words equal libjpeg's blocks, component by component.
fn assert_libjpeg(o: &Outcome, theirs: &Coefficients, what: &str) {
    assert_eq!(
        o.status & !STATUS_SIMD_RANGE,
        0,
        "{what}: status {:#x}",
        o.status
    );
    let comp_table = o.chunk[5] as usize;
    for (ci, c) in theirs.components.iter().enumerate() {
        let at = o.chunk[comp_table + 4 * ci] as usize;
        for (i, block) in c.blocks.iter().enumerate() {
            let words = &o.coefs[at + 32 * i..at + 32 * i + 32];
            for (z, &v) in block.iter().enumerate() {
                let got = (words[z / 2] >> (16 * (z % 2))) as u16 as i16;
                assert_eq!(got, v, "{what}: component {ci} block {i} coefficient {z}");
            }
        }
    }
}

/// Files whose data has more subsequences than this at the default size take only the
/// default size (64-bit subsequences and their rounds on lavapipe would take seconds).
const SMALL: u32 = 128;

/// The default subsequence size and (for a file of at most [`SMALL`] subsequences at
/// it) 64 bits on one file, and (where the rounds changed an exit) one round fewer than
/// it took: flagged. Returns the rounds that changed an exit at the smallest size run,
/// and whether both sizes ran.
fn check_file(
    e: &dyn Executor,
    jpeg: &[u8],
    theirs: Option<&Coefficients>,
    what: &str,
) -> (u32, bool) {
    let scan = RestartScan::parse_sync(jpeg).expect("parse_sync");
    let mut rounds = 0;
    for bits in [SUBSEQUENCE_BITS, 64] {
        let what = format!("{what}, {bits}-bit subsequences");
        let o = check(e, &scan, jpeg, bits, ROUNDS, &what);
        eprintln!(
            "{what}: {} subsequences, {} rounds changing",
            o.chunk[1], o.changing
        );
        if let Some(theirs) = theirs {
            assert_libjpeg(&o, theirs, &what);
        }
        if o.changing > 0 {
            let short = check(e, &scan, jpeg, bits, o.changing, &what);
            assert_ne!(
                short.status & STATUS_NO_SYNC,
                0,
                "{what}: {} rounds",
                o.changing
            );
        }
        rounds = o.changing;
        if bits == SUBSEQUENCE_BITS && o.chunk[1] > SMALL {
            return (rounds, false);
        }
    }
    (rounds, true)
}

/// A random JPEG of 16 to 175 by 16 to 135 pixels: every sampling (by `case`); no
/// restart markers, or every few MCUs, or every few rows (by `case`); with its
/// description.
fn random_jpeg(rng: &mut TestRng, case: usize) -> (Vec<u8>, String) {
    let (samp, gray) = RESTART_SAMPLINGS[case % RESTART_SAMPLINGS.len()];
    let (w, h) = (16 + rng.below(160) as u32, 16 + rng.below(120) as u32);
    let (mcus, rows) = match case % 3 {
        0 => (0, 0),
        1 => (1 + rng.below(20) as u32, 0),
        _ => (0, 1 + rng.below(2) as i32),
    };
    let jpeg = restart_jpeg(rng, w, h, samp, gray, mcus, rows);
    let what =
        format!("case {case}: {w}x{h} {samp:?} gray {gray}, restart {mcus} MCUs / {rows} rows");
    (jpeg, what)
}

/// Random JPEGs ([`random_jpeg`]), each a clean file libjpeg reads.
pub fn sync_huffman_matches_the_oracle_on_random_jpegs(e: &dyn Executor) {
    if !e.runs(Kernel::SyncStart) {
        eprintln!("{}: no sync_huffman kernels", e.name());
        return;
    }
    let mut rng = TestRng(0x5EED_0036);
    let mut most_rounds = 0;
    let mut cases = Vec::new();
    for case in 0..9 {
        let (jpeg, what) = random_jpeg(&mut rng, case);
        let mut theirs = Coefficients::default();
        assert!(libjpeg_clean(&jpeg, &mut theirs), "{what}: libjpeg");
        let (rounds, both) = check_file(e, &jpeg, Some(&theirs), &what);
        assert!(both, "{what}: small enough for 64-bit subsequences");
        most_rounds = most_rounds.max(rounds);
        cases.push((jpeg, theirs, what));
    }
    assert!(most_rounds >= 1, "no case needed a round");
    // Every case in one batch: one dispatch per pass, each sample's coefficients
    // libjpeg's.
    let scans: Vec<RestartScan> = cases
        .iter()
        .map(|(jpeg, _, _)| RestartScan::parse_sync(jpeg).expect("parse_sync"))
        .collect();
    let files: Vec<(&RestartScan, &[u8])> = scans
        .iter()
        .zip(&cases)
        .map(|(s, (jpeg, _, _))| (s, jpeg.as_slice()))
        .collect();
    for bits in [SUBSEQUENCE_BITS, 64] {
        let outs = check_batch(e, &files, bits, ROUNDS, &format!("the batch, {bits} bits"));
        for (o, (_, theirs, what)) in outs.iter().zip(&cases) {
            assert_libjpeg(o, theirs, &format!("{what} in the batch"));
        }
    }
}

/// Random JPEGs damaged one way or another (bits flipped, the data cut short by an
/// end-of-image marker, a byte taken out or put in; the end-of-image marker kept): every
/// pass equals its oracle, flags and all, at the default subsequence size and at 64 bits;
/// and at least some are flagged.
pub fn sync_huffman_matches_the_oracle_on_damaged_jpegs(e: &dyn Executor) {
    if !e.runs(Kernel::SyncStart) {
        eprintln!("{}: no sync_huffman kernels", e.name());
        return;
    }
    let mut rng = TestRng(0xDA3A_0036);
    let (mut flagged, mut refused) = (0, 0);
    for case in 0..16 {
        let (jpeg, what) = random_jpeg(&mut rng, case);
        let (bad, how) = common::damaged(&jpeg, &mut rng);
        let Ok(scan) = RestartScan::parse_sync(&bad) else {
            refused += 1;
            continue;
        };
        let what = format!("damaged {what}: {how}");
        for bits in [SUBSEQUENCE_BITS, 64] {
            let o = check(
                e,
                &scan,
                &bad,
                bits,
                ROUNDS,
                &format!("{what}, {bits} bits"),
            );
            flagged += usize::from(o.status & !STATUS_SIMD_RANGE != 0);
        }
    }
    assert!(
        flagged >= 8 && refused <= 8,
        "{flagged} decodes flagged, {refused} files refused by the parse"
    );
}

/// The bundled JPEGs whose scan the sync decode takes (baseline, sequential), of at
/// most a megapixel: clean ones equal libjpeg's coefficients, the others the oracle's
/// flags.
pub fn sync_huffman_matches_the_oracle_on_the_bundled_jpegs(e: &dyn Executor) {
    if !e.runs(Kernel::SyncStart) {
        eprintln!("{}: no sync_huffman kernels", e.name());
        return;
    }
    let mut files = Vec::new();
    common::files_below(&common::data_dir(), &mut files);
    let limits = stoker::decode::Limits {
        max_pixels: 1 << 20,
        ..Default::default()
    };
    let (mut checked, mut small) = (0, 0);
    for f in &files {
        let bytes = std::fs::read(f).expect("read");
        let fits = stoker::decode::peek_info(&bytes)
            .is_ok_and(|info| stoker::decode::check_limits(&info, &limits).is_ok());
        if !bytes.starts_with(&[0xFF, 0xD8]) || !fits || RestartScan::parse_sync(&bytes).is_err() {
            continue;
        }
        let mut theirs = Coefficients::default();
        let clean = libjpeg_clean(&bytes, &mut theirs);
        let what = f.display().to_string();
        let (_, both) = check_file(e, &bytes, clean.then_some(&theirs), &what);
        checked += 1;
        small += usize::from(both);
    }
    assert!(
        checked >= 10 && small >= 5,
        "{checked} bundled files checked, {small} at both sizes"
    );
}

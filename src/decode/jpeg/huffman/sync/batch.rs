//! The batched passes: one dispatch per pass for every chunk of a batch (see the module
//! docs of [`super`], "Batches"). Each is a function of one thread's index over the
//! batch's words, which finds its sample in the batch table and runs the per-chunk
//! pass of [`super::pass`] on that sample's chunk, records, coefficients and status.

use super::*;

/// Words of a sample's record in the batch table.
pub const BATCH_WORDS: usize = 8;

/// A sample's record in the batch table (words in this order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchEntry {
    /// Word 0: the chunk's first word in the batch's words.
    pub chunk: u32,
    /// Word 1: its first subsequence in the batch's numbering.
    pub first_subsequence: u32,
    /// Word 2: its first segment in the batch's numbering.
    pub first_segment: u32,
    /// Word 3: the first word of its two copies of the records in the record buffer
    /// (copy 1 follows copy 0, `subsequences * RECORD_WORDS` words each).
    pub records: u32,
    /// Word 4: the word of the coefficient buffer its chunk's coefficient offsets count
    /// from.
    pub coefficients: u32,
    /// Word 5: its status word in the status buffer; round `r`'s changed word is the
    /// `1 + r`-th after it.
    pub status: u32,
    /// Word 6: its subsequences.
    pub subsequences: u32,
    /// Word 7: its segments.
    pub segments: u32,
}

impl BatchEntry {
    /// The record's words.
    pub fn words(&self) -> [u32; BATCH_WORDS] {
        [
            self.chunk,
            self.first_subsequence,
            self.first_segment,
            self.records,
            self.coefficients,
            self.status,
            self.subsequences,
            self.segments,
        ]
    }

    fn read(words: &[u32]) -> BatchEntry {
        BatchEntry {
            chunk: words[0],
            first_subsequence: words[1],
            first_segment: words[2],
            records: words[3],
            coefficients: words[4],
            status: words[5],
            subsequences: words[6],
            segments: words[7],
        }
    }

    /// Words of its two copies of the records.
    pub fn record_words(&self) -> usize {
        2 * self.subsequences as usize * RECORD_WORDS
    }
}

/// What every dispatch of a batch is told (the WGSL port's parameter words).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchParams {
    /// The batch table's first word in the batch's words.
    pub table: u32,
    /// Samples (records of the table).
    pub samples: u32,
    /// Sync round dispatches (a sample rounds at most its chunk's header word 12 of them).
    pub rounds: u32,
    /// Subsequences over every sample.
    pub subsequences: u32,
    /// Segments over every sample.
    pub segments: u32,
    /// The most subsequences of one sample.
    pub most_subsequences: u32,
}

impl BatchParams {
    /// The parameter words of a dispatch (the WGSL port's `P[0]`, `P[1]`): `first` (the
    /// round, or the copy the scan and the write read), then these.
    pub fn words(&self, first: u32) -> [u32; 7] {
        [
            first,
            self.table,
            self.samples,
            self.rounds,
            self.subsequences,
            self.segments,
            self.most_subsequences,
        ]
    }

    /// The status words a sample takes (its status word and a changed word per round).
    pub fn status_words(&self) -> u32 {
        1 + self.rounds
    }
}

/// The sample of the batch whose `word` (1: first subsequence, 2: first segment) range
/// holds `id`, and `id` within it; `None` for a thread past the last.
fn locate(blob: &[u32], p: &BatchParams, word: usize, id: u32) -> Option<(BatchEntry, u32)> {
    let at = |i: u32| blob[p.table as usize + BATCH_WORDS * i as usize + word];
    let (mut lo, mut hi) = (0u32, p.samples);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if at(mid) <= id {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if p.samples == 0 {
        return None;
    }
    let t = p.table as usize + BATCH_WORDS * lo as usize;
    let e = BatchEntry::read(&blob[t..t + BATCH_WORDS]);
    let local = id.checked_sub(at(lo))?;
    let count = if word == 1 {
        e.subsequences
    } else {
        e.segments
    };
    (local < count).then_some((e, local))
}

/// The rounds sample `e` runs: the batch's, at most its chunk's.
fn rounds_of(blob: &[u32], p: &BatchParams, e: &BatchEntry) -> u32 {
    p.rounds.min(blob[e.chunk as usize + 12])
}

/// Pass 1, thread `g` of the batch's subsequences ([`sync_start`] on its sample); the
/// thread of a sample's first subsequence zeroes its status words (the buffer holds
/// whatever an earlier batch left: every later pass ORs into them).
pub fn batch_start(blob: &[u32], p: &BatchParams, rec: &mut [u32], status: &mut [u32], g: u32) {
    let Some((e, s)) = locate(blob, p, 1, g) else {
        return;
    };
    if s == 0 {
        let st = e.status as usize;
        status[st..st + p.status_words() as usize].fill(0);
    }
    let r = e.records as usize;
    sync_start(
        &blob[e.chunk as usize..],
        &mut rec[r..r + e.record_words()],
        s,
    );
}

/// Sync round `round`, thread `g` ([`sync_round`] on its sample, reading copy
/// `round % 2` and writing the other; its changed word ORed into the sample's changed
/// word of the round). A round after one that changed no exit of the sample, or past its
/// chunk's most rounds, only copies the record: the copies stay equal from then on.
pub fn batch_round(
    blob: &[u32],
    p: &BatchParams,
    rec: &mut [u32],
    status: &mut [u32],
    round: u32,
    g: u32,
) {
    let Some((e, s)) = locate(blob, p, 1, g) else {
        return;
    };
    let r = e.records as usize;
    let half = e.record_words() / 2;
    let (a, b) = rec[r..r + 2 * half].split_at_mut(half);
    let (prev, next) = if round.is_multiple_of(2) {
        (&*a, b)
    } else {
        (&*b, a)
    };
    let st = e.status as usize;
    let settled = round > 0 && status[st + round as usize] == 0;
    if round >= rounds_of(blob, p, &e) || settled {
        let w = RECORD_WORDS * s as usize;
        next[w..w + RECORD_WORDS].copy_from_slice(&prev[w..w + RECORD_WORDS]);
        return;
    }
    status[st + 1 + round as usize] |= sync_round(&blob[e.chunk as usize..], prev, next, s);
}

/// The scan, thread `g` of the batch's segments ([`sync_scan`] on its sample, over the
/// copy the last round wrote, `rounds % 2`): the thread of a sample's first segment
/// also sets [`STATUS_NO_SYNC`] where its last round still changed an exit.
pub fn batch_scan(blob: &[u32], p: &BatchParams, rec: &mut [u32], status: &mut [u32], g: u32) {
    let Some((e, seg)) = locate(blob, p, 2, g) else {
        return;
    };
    let st = e.status as usize;
    let n = rounds_of(blob, p, &e);
    let mut out = 0;
    if seg == 0 && (n == 0 || status[st + n as usize] != 0) {
        out |= STATUS_NO_SYNC;
    }
    let half = e.record_words() / 2;
    let r = e.records as usize + (p.rounds % 2) as usize * half;
    out |= sync_scan(&blob[e.chunk as usize..], &mut rec[r..r + half], seg);
    status[st] |= out;
}

/// The write, thread `g` of the batch's subsequences ([`sync_write`] on its sample).
pub fn batch_write(
    blob: &[u32],
    p: &BatchParams,
    rec: &[u32],
    coefs: &mut [u32],
    status: &mut [u32],
    g: u32,
) {
    let Some((e, s)) = locate(blob, p, 1, g) else {
        return;
    };
    let half = e.record_words() / 2;
    let r = e.records as usize + (p.rounds % 2) as usize * half;
    let st = sync_write(
        &blob[e.chunk as usize..],
        &rec[r..r + half],
        &mut coefs[e.coefficients as usize..],
        s,
    );
    status[e.status as usize] |= st;
}

/// The batch's words for `chunks` ([`pack_sync`]'s): the table at word 0, then the
/// chunks, the records, coefficients (each chunk's `chunk[10]` words) and status words
/// one sample after another. Returns the words, the parameters, the record, coefficient
/// and status buffers' words. The layout the device plan uses places the chunks among
/// other data, which changes nothing in the passes.
pub fn pack_batch(chunks: &[&[u32]], rounds: u32) -> (Vec<u32>, BatchParams, [usize; 3]) {
    let mut p = BatchParams {
        samples: chunks.len() as u32,
        rounds,
        ..BatchParams::default()
    };
    let mut blob = vec![0u32; BATCH_WORDS * chunks.len()];
    let (mut rec, mut coef, mut status) = (0usize, 0usize, 0usize);
    for (i, c) in chunks.iter().enumerate() {
        let e = BatchEntry {
            chunk: blob.len() as u32,
            first_subsequence: p.subsequences,
            first_segment: p.segments,
            records: rec as u32,
            coefficients: coef as u32,
            status: status as u32,
            subsequences: c[1],
            segments: c[0],
        };
        blob[BATCH_WORDS * i..BATCH_WORDS * (i + 1)].copy_from_slice(&e.words());
        blob.extend_from_slice(c);
        p.subsequences += c[1];
        p.segments += c[0];
        p.most_subsequences = p.most_subsequences.max(c[1]);
        rec += e.record_words();
        coef += c[10] as usize;
        status += p.status_words() as usize;
    }
    (blob, p, [rec, coef, status])
}

/// Runs the batched passes as the device does, a loop over the threads for each: the
/// start, `p.rounds` rounds, the scan, the write.
pub fn decode_batch(
    blob: &[u32],
    p: &BatchParams,
    rec: &mut [u32],
    coefs: &mut [u32],
    status: &mut [u32],
) {
    for g in 0..p.subsequences {
        batch_start(blob, p, rec, status, g);
    }
    for round in 0..p.rounds {
        for g in 0..p.subsequences {
            batch_round(blob, p, rec, status, round, g);
        }
    }
    for g in 0..p.segments {
        batch_scan(blob, p, rec, status, g);
    }
    for g in 0..p.subsequences {
        batch_write(blob, p, rec, coefs, status, g);
    }
}

//! The self-synchronising Huffman decode on the batch path: the samples of a decode
//! chunk that have no restart markers (`crate::decode::jpeg::huffman::sync`, packed by
//! `pack_sync_window`) are decoded by one dispatch per pass for the whole chunk
//! (`launches`): the start, [`SYNC_ROUNDS`] rounds enqueued without a read back in
//! between, the scan, the write, over the chunk's batch table (`SyncBatch`). Their
//! blocks land in [`Buffer::Coefficients`] where the IDCT of the chunk reads them, as the
//! restart-interval decode's do, and each sample's status word (with
//! `STATUS_NO_SYNC` where its rounds did not settle) is read back at
//! [`super::Step::EntropyCheck`] with theirs: a flagged sample takes the host path.
#![doc(hidden)]

use super::error::DeviceError;
use super::launch::{grid, Binding, Buffer, Kernel, Launch, PARAM_WORDS};
use crate::decode::jpeg::huffman::sync::{BatchEntry, BatchParams, BATCH_WORDS, RECORD_WORDS};

/// Sync rounds enqueued per chunk: the most a sample may need before it is flagged
/// (`STATUS_NO_SYNC`, then decoded on the host path). At the default subsequence size
/// (1024 bits) the bundled and random test files need at most 7 rounds that change an
/// exit (the photo `skimage_coffee.jpg`; most files 0 to 2), the next changing none:
/// twice that leaves room, and a round after a sample settled only copies its records.
pub const SYNC_ROUNDS: u32 = 16;

/// Status words a sample on the sync path takes: its status word, then a changed word
/// per round.
pub const SYNC_STATUS_WORDS: u64 = 1 + SYNC_ROUNDS as u64;

/// The sync decode's bookkeeping of one decode chunk: its batch table (written after the
/// chunk's data when the chunk closes) and the counts the launches take.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SyncBatch {
    /// Samples.
    pub samples: u32,
    /// Subsequences over its samples.
    pub subsequences: u32,
    /// Segments over its samples.
    pub segments: u32,
    /// The most subsequences of one sample.
    pub most: u32,
    /// First word of the chunk's records in [`Buffer::SyncRecords`] (a multiple of 64).
    pub record_base: u64,
    /// Words of its records.
    pub record_words: u64,
    /// The batch table's first word in the chunk.
    pub table: u32,
}

impl SyncBatch {
    /// The table record of a sample whose chunk (of `pack_sync`, header words 0 and 1:
    /// its segments and subsequences) starts at word `chunk` of the decode chunk, its
    /// coefficients at word `coefficients` of the chunk's coefficient area and its
    /// status words at word `status` of the chunk's; counts it.
    pub fn add(
        &mut self,
        header: &[u32],
        chunk: u32,
        coefficients: u32,
        status: u32,
    ) -> BatchEntry {
        let e = BatchEntry {
            chunk,
            first_subsequence: self.subsequences,
            first_segment: self.segments,
            records: self.record_words as u32,
            coefficients,
            status,
            subsequences: header[1],
            segments: header[0],
        };
        self.samples += 1;
        self.subsequences = self.subsequences.saturating_add(header[1]);
        self.segments = self.segments.saturating_add(header[0]);
        self.most = self.most.max(header[1]);
        self.record_words += e.record_words() as u64;
        e
    }

    /// Words the sample of a `pack_sync` chunk with `header` adds to the records and to
    /// the chunk (its table record).
    pub fn need(header: &[u32]) -> (u64, u64) {
        (
            2 * u64::from(header[1]) * RECORD_WORDS as u64,
            BATCH_WORDS as u64,
        )
    }

    fn params(&self) -> BatchParams {
        BatchParams {
            table: self.table,
            samples: self.samples,
            rounds: SYNC_ROUNDS,
            subsequences: self.subsequences,
            segments: self.segments,
            most_subsequences: self.most,
        }
    }
}

/// The launches that decode the sync samples of one decode chunk, bound to its `blob`,
/// its records (`records`, in [`Buffer::SyncRecords`]), its coefficient area `coefs`
/// and its status words `status`: the start, [`SYNC_ROUNDS`] rounds, the scan, the write.
pub(super) fn launches(
    s: &SyncBatch,
    [blob, coefs, status]: [Binding; 3],
    per_dim: u64,
) -> Result<Vec<Launch>, DeviceError> {
    if s.samples == 0 {
        return Ok(Vec::new());
    }
    let records = Binding {
        buffer: Buffer::SyncRecords,
        offset: s.record_base * 4,
        size: (s.record_words * 4).max(4),
    };
    let p = s.params();
    let launch = |kernel: Kernel, items: u32, param: u32| {
        let groups =
            grid(u64::from(items), kernel.workgroup(), per_dim).ok_or(DeviceError::Grid {
                what: "the sync decode of a chunk",
                workgroups: u64::from(items).div_ceil(u64::from(kernel.workgroup())),
                per_dim,
            })?;
        let mut params = [0u32; PARAM_WORDS];
        params[..7].copy_from_slice(&p.words(param));
        Ok::<_, DeviceError>(Launch {
            kernel,
            grid: groups,
            bindings: vec![blob, records, coefs, status],
            params,
        })
    };
    let mut out = vec![launch(Kernel::SyncStart, p.subsequences, 0)?];
    for round in 0..SYNC_ROUNDS {
        out.push(launch(Kernel::SyncRound, p.subsequences, round)?);
    }
    out.push(launch(Kernel::SyncScan, p.segments, SYNC_ROUNDS % 2)?);
    out.push(launch(Kernel::SyncWrite, p.subsequences, SYNC_ROUNDS % 2)?);
    Ok(out)
}

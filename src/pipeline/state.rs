//! A pipeline's position in its sequence of global batches, small enough for any
//! checkpoint: [`ResumeState`].

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::ResumeError;
use crate::source::{Sampler, Subset};

/// Where a training job stands in its epochs: after which samples of which epoch's
/// sequence of global batches, as [`Batch::state`](super::Batch::state) and
/// [`Pipeline::state`](super::Pipeline::state) give it. Save it with the model's
/// checkpoint (it serialises with serde, to a few dozen bytes of JSON), and continue
/// with [`Pipeline::resume`](super::Pipeline::resume): on any number of ranks whose
/// `batch_size * world_size` is the same global batch size, the rest of the epoch is the
/// same global batches, no sample twice or left out.
///
/// ```json
/// {"version":1,"seed":11,"epoch":3,"samples_consumed":96,"global_batch_size":32,"order":1234567890123}
/// ```
///
/// It names the epoch's order, not the augmentation: each sample's randomness is keyed by
/// `(seed, epoch, sample id)`, so the same augmentation settings give the same pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResumeState {
    /// The format version ([`ResumeState::VERSION`] when this stoker wrote it).
    pub version: u32,
    /// The pipeline's seed.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// Positions of the epoch's global order consumed by all ranks together, padding
    /// left out: `global_batch_size` per global batch, the epoch's total after its last.
    pub samples_consumed: u64,
    /// Samples per global batch: batch size per rank times the world size.
    pub global_batch_size: u64,
    /// A fingerprint (FNV-1a, 64 bits) of the dataset (its sample ids, in order) and the
    /// definition of its order ([`Sampler`]'s length, kind, weights, blocks, `drop_last`;
    /// under [`Sharding::PerRank`](crate::source::sampler::Sharding::PerRank) the world
    /// size).
    pub order: u64,
}

impl ResumeState {
    /// The format version this stoker writes and reads.
    pub const VERSION: u32 = 1;
}

/// What every state of a pipeline shares, and the last one handed out.
#[derive(Debug)]
pub(crate) struct Progress {
    seed: u64,
    order: u64,
    global_batch_size: u64,
    /// Positions of each epoch's global order delivered (padding left out).
    total: u64,
    /// The last state handed out. (Under per-rank sharding the states resume on the
    /// same world size only: the order's fingerprint says so.)
    last: Mutex<ResumeState>,
}

impl Progress {
    pub(crate) fn new(seed: u64, subset: &Subset, sampler: &Sampler) -> Self {
        let mut h = Fnv::default();
        for s in subset.samples() {
            h.write(s.id);
        }
        for k in sampler.order_key() {
            h.write(k);
        }
        let global_batch_size = sampler.global_batch_size() as u64;
        Progress {
            seed,
            order: h.0,
            global_batch_size,
            total: sampler.epoch_total() as u64,
            last: Mutex::new(ResumeState {
                version: ResumeState::VERSION,
                seed,
                epoch: 0,
                samples_consumed: 0,
                global_batch_size,
                order: h.0,
            }),
        }
    }

    /// The state before batch `first` of `epoch` (after batch `first - 1`).
    pub(crate) fn at(&self, epoch: u64, first: usize) -> ResumeState {
        ResumeState {
            version: ResumeState::VERSION,
            seed: self.seed,
            epoch,
            samples_consumed: (first as u64)
                .saturating_mul(self.global_batch_size)
                .min(self.total),
            global_batch_size: self.global_batch_size,
            order: self.order,
        }
    }

    /// Records `state` as the last one handed out.
    pub(crate) fn set(&self, state: ResumeState) {
        if let Ok(mut last) = self.last.lock() {
            *last = state;
        }
    }

    /// The last state handed out.
    pub(crate) fn last(&self) -> ResumeState {
        match self.last.lock() {
            Ok(s) => *s,
            Err(p) => *p.into_inner(),
        }
    }

    /// The batch of its epoch that `state` resumes at, if this pipeline can resume it.
    pub(crate) fn check(&self, state: &ResumeState) -> Result<usize, ResumeError> {
        if state.version != ResumeState::VERSION {
            return Err(ResumeError::Version {
                found: state.version,
                expected: ResumeState::VERSION,
            });
        }
        if state.seed != self.seed {
            return Err(ResumeError::Seed {
                state: state.seed,
                pipeline: self.seed,
            });
        }
        if state.order != self.order {
            return Err(ResumeError::Order {
                state: state.order,
                pipeline: self.order,
            });
        }
        if state.global_batch_size != self.global_batch_size {
            return Err(ResumeError::GlobalBatchSize {
                state: state.global_batch_size,
                pipeline: self.global_batch_size,
            });
        }
        let (consumed, g) = (state.samples_consumed, self.global_batch_size.max(1));
        if consumed > self.total || (!consumed.is_multiple_of(g) && consumed != self.total) {
            return Err(ResumeError::Position {
                consumed,
                global_batch_size: g,
                total: self.total,
            });
        }
        Ok(consumed.div_ceil(g) as usize)
    }
}

/// FNV-1a, 64 bits, over little-endian words, written as they come.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, word: u64) {
        for b in word.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

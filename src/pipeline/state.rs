//! A pipeline's position in its sequence of global batches, small enough for any
//! checkpoint: [`ResumeState`].

use std::sync::{Arc, Mutex};

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
/// {"version":2,"seed":11,"epoch":3,"samples_consumed":96,"global_batch_size":32,"order":1234567890123,"sources":[]}
/// ```
///
/// Over a [`Mixture`](crate::Mixture) it also says where each mixed source stands:
/// `sources[k]` samples of source `k` among the `samples_consumed` (`"sources":[70,26]`).
/// They follow from `samples_consumed`, the order being a pure function of the seed and
/// the epoch; a state whose `sources` disagree with it is refused. The fingerprint
/// `order` covers the mixture (its sources' samples, weights, epoch size and
/// [`Exhausted`](crate::source::sampler::Exhausted) policy), so a state resumes only the
/// same mixture.
///
/// Version 1 (before `sources`) is read too: it resumes a pipeline over one subset as
/// it did, and over a mixture from its `samples_consumed`.
///
/// It names the epoch's order, not the augmentation: each sample's randomness is keyed by
/// `(seed, epoch, sample id)`, so the same augmentation settings give the same pixels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// size; a [`Mixture`](crate::Mixture)'s sources, weights, epoch size and policy).
    pub order: u64,
    /// Over a [`Mixture`](crate::Mixture): for each of its sources, how many of the
    /// `samples_consumed` positions were its samples. Empty for a pipeline over one
    /// subset (and in a version 1 state).
    #[serde(default)]
    pub sources: Vec<u64>,
}

impl ResumeState {
    /// The format version this stoker writes.
    pub const VERSION: u32 = 2;
    /// The format versions this stoker reads: 1 (without `sources`) and 2.
    pub const READS: [u32; 2] = [1, 2];
}

/// Each source's count after each global batch of an epoch (the first row: none yet).
type Table = Arc<Vec<Vec<u64>>>;

/// A mixture's per-source counts at each global batch's end of the epoch last asked for.
#[derive(Debug)]
struct SourceCounts {
    /// The order (to compute the epoch's sources) and the global batch size.
    sampler: Sampler,
    /// The epoch counted, and its counts after each global batch (and at its end).
    cached: Mutex<Option<(u64, Table)>>,
}

impl SourceCounts {
    /// Each source's count among the first `consumed` positions of `epoch`'s order
    /// (`consumed` the end of a global batch, or the epoch's total).
    fn at(&self, epoch: u64, consumed: u64) -> Vec<u64> {
        let g = self.sampler.global_batch_size().max(1) as u64;
        let table = self.table(epoch);
        let step = consumed.div_ceil(g) as usize;
        table.get(step).cloned().unwrap_or_default()
    }

    fn table(&self, epoch: u64) -> Table {
        let mut guard = match self.cached.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some((e, t)) = guard.as_ref() {
            if *e == epoch {
                return Arc::clone(t);
            }
        }
        let Some(m) = self.sampler.mixing() else {
            return Arc::new(Vec::new());
        };
        let g = self.sampler.global_batch_size().max(1);
        let order = self.sampler.global_order(epoch);
        let mut counts = vec![0u64; m.sources()];
        let mut table = vec![counts.clone()];
        for chunk in order.chunks(g) {
            for &i in chunk {
                counts[m.source_of(i)] += 1;
            }
            table.push(counts.clone());
        }
        let t = Arc::new(table);
        *guard = Some((epoch, Arc::clone(&t)));
        t
    }
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
    /// Over a mixture: its sources' counts.
    sources: Option<SourceCounts>,
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
                sources: sampler
                    .mixing()
                    .map_or_else(Vec::new, |m| vec![0; m.sources()]),
            }),
            sources: sampler.mixing().is_some().then(|| SourceCounts {
                sampler: sampler.clone(),
                cached: Mutex::new(None),
            }),
        }
    }

    /// The state before batch `first` of `epoch` (after batch `first - 1`).
    pub(crate) fn at(&self, epoch: u64, first: usize) -> ResumeState {
        let consumed = (first as u64)
            .saturating_mul(self.global_batch_size)
            .min(self.total);
        ResumeState {
            version: ResumeState::VERSION,
            seed: self.seed,
            epoch,
            samples_consumed: consumed,
            global_batch_size: self.global_batch_size,
            order: self.order,
            sources: self
                .sources
                .as_ref()
                .map_or_else(Vec::new, |c| c.at(epoch, consumed)),
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
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The batch of its epoch that `state` resumes at, if this pipeline can resume it.
    pub(crate) fn check(&self, state: &ResumeState) -> Result<usize, ResumeError> {
        if !ResumeState::READS.contains(&state.version) {
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
        if !state.sources.is_empty() || state.version >= 2 {
            let want = self
                .sources
                .as_ref()
                .map_or_else(Vec::new, |c| c.at(state.epoch, consumed));
            if state.sources != want {
                return Err(ResumeError::Sources {
                    state: state.sources.clone(),
                    pipeline: want,
                });
            }
        }
        Ok(consumed.div_ceil(g) as usize)
    }
}

/// FNV-1a, 64 bits, over little-endian words, written as they come (the fingerprints
/// of the orders, here and in `buckets`).
pub(super) struct Fnv(pub(super) u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub(super) fn write(&mut self, word: u64) {
        for b in word.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

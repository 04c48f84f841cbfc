//! The order of one epoch: a full permutation from `(seed, epoch)`, split into global
//! batches (or sharded) for data-parallel training, cut into batches.
//!
//! Training order is a Fisher-Yates shuffle of the whole subset driven by Philox keyed by
//! `(seed, epoch)`: every epoch is a permutation of every sample, not a mix of a buffer.
//! Validation order is the subset's sorted order, every epoch.
//!
//! # Global batches: the same batches on any number of GPUs
//!
//! By default ([`Sharding::Global`]) the epoch's order is cut into **global batches** of
//! `G = b * w` samples (batch size `b` per rank, world size `w`), fixed by
//! `(seed, epoch, G)` alone; rank `r` takes the `r`-th contiguous slice of `b` samples of
//! each. Contiguous rather than strided so that the ranks' batches, concatenated in rank
//! order (an all-gather), are the global batch in the order's order: a run on 8 GPUs of
//! 32 and a run on 4 GPUs of 64 train on the same global batches, and a job's
//! [`ResumeState`](crate::pipeline::ResumeState) resumes on either. The last global batch
//! of an epoch (`n mod G` samples, when `G` does not divide `n`) is split into slices as
//! even as they go, `ceil(rem / w)` long, the short ones padded with one repeat each.
//!
//! [`Sharding::PerRank`] is the split stoker made before (and PyTorch's
//! `DistributedSampler` makes): rank `r` takes positions `r, r + w, r + 2w, ...` of the
//! whole epoch (with block order, a contiguous run), then cuts them into batches; its
//! batches depend on the world size.
//!
//! # Every rank runs the same number of steps
//!
//! In data-parallel training every rank must run the same number of steps, or the rank
//! with fewer batches leaves the all-reduce early and the others hang at the last step.
//! So every rank of `world_size` gets the same number of samples per epoch, as PyTorch's
//! `DistributedSampler` gives them (for `n` samples, world size `w`, batch size `b`),
//! under either [`Sharding`]:
//!
//! - **Padding** (the default, `drop_last` false): the order is extended to
//!   `w * ceil(n / w)` positions by repeating its first samples (cyclically, if `w > n`):
//!   `ceil(n / w)` samples and `ceil(ceil(n / w) / b)` batches on every rank, the last
//!   one partial on all of them alike. The ranks' samples are disjoint apart from the
//!   padding and together cover every sample. The padded positions are the last
//!   [`Sampler::padding`] of a rank's order (at most one, unless the world is larger than
//!   the dataset); the pipeline marks them in [`Batch::repeated`](crate::Batch::repeated)
//!   so metrics can exclude them.
//! - **Dropping the tail** (`drop_last` true): every rank takes `b * floor(n / (w * b))`
//!   samples, whole batches only; the rest of the permutation (a different tail every
//!   epoch) is not read that epoch. No sample repeats.
//!
//! Both are deterministic for `(seed, epoch)`, whatever the thread count or backend.
//!
//! # Weighted sampling
//!
//! With [`Weighting`] an epoch is not a permutation but `num_samples` draws, sample `i`
//! drawn with probability `w_i / sum(w)` (PyTorch's `WeightedRandomSampler`): with
//! replacement by inverse transform sampling of one uniform per position, without it by
//! Efraimidis and Spirakis' keys `u^(1 / w_i)` (the `num_samples` largest, in decreasing
//! order of key). The draws are keyed by `(seed, epoch, position)`, so they are the same
//! for every thread count, backend and batch size, and different every epoch; the ranks
//! of a data-parallel run split the one global order exactly as they split a permutation
//! (the same padding and `drop_last` rules), so every rank runs the same number of steps.
//! A sample of weight 0 is never drawn; with replacement a sample may come more than once
//! an epoch, by design (not flagged as [`repeated`](crate::Batch::repeated)).
//!
//! # Block order (shards held in memory)
//!
//! Where each read costs a request of tens of milliseconds (object storage), a full
//! permutation reads every sample by its own ranged request. [`Sampler::blocks`] gives an
//! order that reads whole shards instead, and is **not a full permutation** of the subset:
//! the shards (blocks) are permuted each epoch, cut into windows of `window` shards, and
//! the samples of each window are permuted among themselves; a window's shards are held
//! in memory while it is read. A sample can only move within its window, so the order
//! mixes less than a permutation does (two samples of one shard are never more than a
//! window apart). It is deterministic for `(seed, epoch)`. With global batches the ranks
//! take their slices of each global batch as above (all of them read from the same
//! windows); with [`Sharding::PerRank`] they split it into contiguous runs of the same
//! length (`ceil(n / w)`, or with `drop_last` `b * floor(n / (w * b))`), so each rank
//! reads its own windows' shards. Either way every rank runs the same number of steps;
//! padding repeats the order's first samples.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::rng::{Rng, Stream};

mod mixing;
mod sharding;

pub(crate) use mixing::Mixing;
pub use mixing::{Exhausted, ROUND as MIXTURE_ROUND};
pub use sharding::Sharding;

/// Weighted sampling of a subset's epochs (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct Weighting {
    /// Cumulative weights, one per sample of the subset, in its order.
    cumulative: Arc<[f64]>,
    /// The weights themselves.
    weights: Arc<[f64]>,
    replacement: bool,
    num_samples: usize,
}

/// The first weight that is not a finite number >= 0, with its index.
fn first_bad_weight(weights: &[f64]) -> Option<(usize, f64)> {
    weights
        .iter()
        .copied()
        .enumerate()
        .find(|&(_, w)| !(w.is_finite() && w >= 0.0))
}

impl Weighting {
    /// Weights `weights[i]` for sample `i` of the subset (in its order): finite, not
    /// negative, not all zero; `num_samples` draws an epoch, with or without replacement
    /// (without: at most as many as there are samples of positive weight).
    pub fn new(weights: Vec<f64>, num_samples: usize, replacement: bool) -> Result<Self> {
        let bad = |m: String| Err(Error::config("weighted", m));
        if let Some((i, w)) = first_bad_weight(&weights) {
            return bad(format!(
                "weight {w} of sample {i} is not a finite number >= 0"
            ));
        }
        let positive = weights.iter().filter(|w| **w > 0.0).count();
        if positive == 0 {
            return bad("every weight is 0: nothing could be drawn".into());
        }
        if num_samples == 0 {
            return bad("num_samples must be at least 1".into());
        }
        if !replacement && num_samples > positive {
            return bad(format!(
                "{num_samples} draws without replacement from {positive} samples of positive weight"
            ));
        }
        let mut acc = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                acc += w;
                acc
            })
            .collect();
        Ok(Weighting {
            cumulative,
            weights: weights.into(),
            replacement,
            num_samples,
        })
    }

    /// Draws an epoch has.
    pub fn num_samples(&self) -> usize {
        self.num_samples
    }

    /// Samples weighted (the subset's length).
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Whether it weights no samples.
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// The order of `epoch`: `num_samples` indices into the subset.
    fn draw(&self, seed: u64, epoch: u64) -> Vec<usize> {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        if self.replacement {
            return (0..self.num_samples as u64)
                .map(|pos| {
                    let u = Rng::new(seed, epoch, pos, Stream::Weighted).next_f64() * total;
                    // The first sample whose cumulative weight passes u (weight 0 never).
                    let i = self.cumulative.partition_point(|&c| c <= u);
                    i.min(self.weights.len() - 1)
                })
                .collect();
        }
        // Efraimidis-Spirakis: key ln(u) / w (the log of u^(1/w)), largest first.
        let mut keys: Vec<(f64, usize)> = self
            .weights
            .iter()
            .enumerate()
            .filter(|(_, w)| **w > 0.0)
            .map(|(i, &w)| {
                let u = Rng::new(seed, epoch, i as u64, Stream::Weighted).next_f64();
                (u.max(f64::MIN_POSITIVE).ln() / w, i)
            })
            .collect();
        keys.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        keys.truncate(self.num_samples);
        keys.into_iter().map(|(_, i)| i).collect()
    }
}

/// Plans epochs for a subset of `len` samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampler {
    len: usize,
    seed: u64,
    shuffle: bool,
    rank: usize,
    world_size: usize,
    batch_size: usize,
    drop_last: bool,
    sharding: Sharding,
    weighting: Option<Weighting>,
    blocks: Option<Blocks>,
    /// A mixture of datasets' order ([`crate::source::mixture`]).
    mixing: Option<Mixing>,
}

/// Block order: the block (shard) of every sample, and the shards a window holds.
#[derive(Debug, Clone, PartialEq)]
struct Blocks {
    group: Arc<[u32]>,
    window: usize,
}

impl Sampler {
    /// A sampler over `len` samples; `shuffle` false gives the fixed validation order.
    pub fn new(len: usize, seed: u64, shuffle: bool) -> Self {
        Sampler {
            len,
            seed,
            shuffle,
            rank: 0,
            world_size: 1,
            batch_size: 1,
            drop_last: false,
            sharding: Sharding::Global,
            weighting: None,
            blocks: None,
            mixing: None,
        }
    }

    /// How the ranks split the epoch (default [`Sharding::Global`]; see the
    /// [module docs](self)). With one rank both give the same order.
    pub fn sharding(mut self, sharding: Sharding) -> Self {
        self.sharding = sharding;
        self
    }

    /// The [`Sharding`] in use.
    pub fn sharding_mode(&self) -> Sharding {
        self.sharding
    }

    /// The global batch: `batch_size * world_size` samples, the epoch's step across all
    /// ranks.
    pub fn global_batch_size(&self) -> usize {
        self.batch_size.saturating_mul(self.world_size)
    }

    /// Positions of the epoch's global order that some rank delivers, padding left out:
    /// the order's length, or with `drop_last` its whole global batches. Together the
    /// ranks deliver each of these positions once per epoch.
    pub fn epoch_total(&self) -> usize {
        let len = self.epoch_len();
        match self.drop_last {
            true => len / self.global_batch_size().max(1) * self.global_batch_size(),
            false => len,
        }
    }

    /// The positions of the epoch's global order every rank delivers, padding left out
    /// (the first [`Sampler::epoch_total`] of [`Sampler::permutation`]), as indices into
    /// the subset: where [`Sharding::Global`] draws replacements from, so that they do not
    /// depend on the world size.
    pub fn global_order(&self, epoch: u64) -> Vec<usize> {
        let mut perm = self.permutation(epoch);
        perm.truncate(self.epoch_total());
        perm
    }

    /// Bytes that identify the epochs' orders apart from the seed: the subset's length,
    /// the order's kind (training or validation, weights, blocks), `drop_last`, and under
    /// [`Sharding::PerRank`] the world size (whose shards depend on it). Not the rank, the
    /// batch size, or (under global batches) the world size.
    pub(crate) fn order_key(&self) -> Vec<u64> {
        let mut key = vec![
            self.len as u64,
            u64::from(self.shuffle),
            u64::from(self.drop_last),
        ];
        if self.sharding == Sharding::PerRank {
            key.extend([1, self.world_size as u64]);
        }
        if let Some(w) = &self.weighting {
            key.extend([2, w.num_samples as u64, u64::from(w.replacement)]);
            key.extend(w.weights.iter().map(|x| x.to_bits()));
        }
        if let Some(b) = &self.blocks {
            key.extend([3, b.window as u64]);
            key.extend(b.group.iter().map(|&g| u64::from(g)));
        }
        if let Some(m) = &self.mixing {
            key.extend(m.order_key());
        }
        key
    }

    /// Block order (see the [module docs](self)): `group[i]` is the block (shard) of
    /// sample `i`, and the samples of `window` blocks at a time are permuted together.
    /// Training order only (a validation subset keeps its fixed order); not with
    /// [`Sampler::weighted`].
    pub fn blocks(mut self, group: Vec<u32>, window: usize) -> Result<Self> {
        if group.len() != self.len {
            return Err(Error::config(
                "block_order",
                format!("{} blocks given for {} samples", group.len(), self.len),
            ));
        }
        if window == 0 {
            return Err(Error::config(
                "block_order",
                "the window must hold a shard or more",
            ));
        }
        if self.weighting.is_some() {
            return Err(Error::config(
                "block_order",
                "weighted sampling draws samples one by one: not with block order",
            ));
        }
        if self.shuffle {
            self.blocks = Some(Blocks {
                group: group.into(),
                window,
            });
        }
        Ok(self)
    }

    /// Block order's permutation of `epoch` and, for each position, the index of its
    /// window. (A window is the samples of `window` shards in the shards' order.)
    fn block_permutation(&self, b: &Blocks, epoch: u64) -> (Vec<usize>, Vec<u32>) {
        let mut by_group: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (i, g) in b.group.iter().enumerate() {
            by_group.entry(*g).or_default().push(i);
        }
        let mut groups: Vec<Vec<usize>> = by_group.into_values().collect();
        shuffle(
            &mut groups,
            &mut Rng::new(self.seed, epoch, 0, Stream::Blocks),
        );
        let mut order = Vec::with_capacity(self.len);
        let mut windows = Vec::with_capacity(self.len);
        for (w, chunk) in groups.chunks(b.window).enumerate() {
            let mut samples: Vec<usize> = chunk.iter().flatten().copied().collect();
            let id = 1 + w as u64;
            shuffle(
                &mut samples,
                &mut Rng::new(self.seed, epoch, id, Stream::Blocks),
            );
            windows.extend(std::iter::repeat_n(w as u32, samples.len()));
            order.extend(samples);
        }
        (order, windows)
    }

    /// For each position of this rank's [`Sampler::epoch_order`], the block-order window
    /// it is in; `None` without block order.
    pub fn epoch_windows(&self, epoch: u64) -> Option<Vec<u32>> {
        let b = self.blocks.as_ref()?;
        let (_, windows) = self.block_permutation(b, epoch);
        Some(
            self.rank_positions()
                .into_iter()
                .map(|p| windows[p % windows.len().max(1)])
                .collect(),
        )
    }

    /// Whether the order is block order.
    pub fn is_block_order(&self) -> bool {
        self.blocks.is_some()
    }

    /// The positions of the epoch's order this rank takes, in its order: its slice of
    /// each global batch, or (per-rank sharding) every `world_size`-th from `rank`, or
    /// with block order a contiguous run; wrapping around for padding.
    fn rank_positions(&self) -> Vec<usize> {
        if self.sharding == Sharding::Global {
            return sharding::global_positions(
                self.epoch_len(),
                self.rank,
                self.world_size,
                self.batch_size,
                self.drop_last,
            );
        }
        let per_rank = self.samples_per_epoch();
        let contiguous = self.blocks.is_some();
        (0..per_rank)
            .map(move |k| {
                if contiguous {
                    self.rank * per_rank + k
                } else {
                    self.rank + k * self.world_size
                }
            })
            .collect()
    }

    /// Epochs of weighted draws instead of permutations (training order only; a
    /// validation subset keeps its fixed order). The weighting must cover the subset.
    pub fn weighted(mut self, weighting: Weighting) -> Result<Self> {
        if self.blocks.is_some() {
            return Err(Error::config(
                "weighted",
                "weighted sampling draws samples one by one: not with block order",
            ));
        }
        if weighting.len() != self.len {
            return Err(Error::config(
                "weighted",
                format!(
                    "{} weights for a subset of {} samples",
                    weighting.len(),
                    self.len
                ),
            ));
        }
        if self.shuffle {
            self.weighting = Some(weighting);
        }
        Ok(self)
    }

    /// Positions of an epoch before sharding: the subset's length, or the weighted draws.
    fn epoch_len(&self) -> usize {
        if let Some(m) = &self.mixing {
            return m.epoch_len();
        }
        self.weighting
            .as_ref()
            .map_or(self.len, Weighting::num_samples)
    }

    /// A mixture's order (see [`mixing`]): its sources are ranges of the subset, drawn in
    /// turn by their weights. Not with weighted sampling or block order.
    pub(crate) fn mixed(mut self, mixing: Mixing) -> Result<Self> {
        if self.weighting.is_some() || self.blocks.is_some() {
            return Err(Error::config(
                "mixture",
                "a mixture draws its sources by their weights: not with weighted sampling or block order",
            ));
        }
        self.mixing = Some(mixing);
        Ok(self)
    }

    /// The mixture's order, if the subset is a mixture.
    pub(crate) fn mixing(&self) -> Option<&Mixing> {
        self.mixing.as_ref()
    }

    /// This process's shard: `rank` of `world_size`.
    pub fn shard(mut self, rank: usize, world_size: usize) -> Result<Self> {
        if world_size == 0 || rank >= world_size {
            return Err(Error::config(
                "shard",
                format!("rank {rank} is not in 0..world_size ({world_size})"),
            ));
        }
        self.rank = rank;
        self.world_size = world_size;
        Ok(self)
    }

    /// Batch size and whether to drop the last partial batch.
    pub fn batches_of(mut self, batch_size: usize, drop_last: bool) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::config("batch_size", "must be at least 1"));
        }
        self.batch_size = batch_size;
        self.drop_last = drop_last;
        Ok(self)
    }

    /// The full order of `epoch` before sharding: indices into the subset (a permutation,
    /// or with [`Sampler::weighted`] the weighted draws).
    pub fn permutation(&self, epoch: u64) -> Vec<usize> {
        if let Some(m) = &self.mixing {
            return m.draw(self.seed, epoch);
        }
        if let Some(w) = &self.weighting {
            return w.draw(self.seed, epoch);
        }
        if let Some(b) = &self.blocks {
            return self.block_permutation(b, epoch).0;
        }
        let mut order: Vec<usize> = (0..self.len).collect();
        if self.shuffle && self.len > 1 {
            shuffle(
                &mut order,
                &mut Rng::new(self.seed, epoch, 0, Stream::Sampler),
            );
        }
        order
    }

    /// Samples this rank gets per epoch, padding included: `ceil(n / w)`, or with
    /// `drop_last` `b * floor(n / (w * b))`. The same on every rank.
    pub fn samples_per_epoch(&self) -> usize {
        let len = self.epoch_len();
        if self.drop_last {
            len / (self.world_size * self.batch_size) * self.batch_size
        } else {
            len.div_ceil(self.world_size)
        }
    }

    /// How many of this rank's [`Sampler::samples_per_epoch`] are padding (samples that
    /// another position of the epoch also delivers): the last ones of its order. At most
    /// one, unless the world is larger than the dataset; none with `drop_last`.
    pub fn padding(&self) -> usize {
        let per_rank = self.samples_per_epoch();
        let len = self.epoch_len();
        if self.sharding == Sharding::Global {
            let (r, w, b) = (self.rank, self.world_size, self.batch_size);
            return sharding::global_padding(len, r, w, b, self.drop_last);
        }
        // Positions rank + k * world_size < len are the real ones.
        let real = if self.blocks.is_some() {
            len.saturating_sub(self.rank * per_rank).min(per_rank)
        } else if len > self.rank {
            (len - self.rank).div_ceil(self.world_size)
        } else {
            0
        };
        per_rank.saturating_sub(real)
    }

    /// This shard's order for `epoch`: its [`Sampler::samples_per_epoch`] indices into the
    /// subset, the last [`Sampler::padding`] of them repeats.
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        let perm = self.permutation(epoch);
        if perm.is_empty() {
            return Vec::new();
        }
        self.rank_positions()
            .into_iter()
            .map(|p| perm[p % perm.len()])
            .collect()
    }

    /// This shard's batches for `epoch`.
    pub fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        self.epoch_order(epoch)
            .chunks(self.batch_size)
            .map(<[usize]>::to_vec)
            .collect()
    }

    /// The batch size.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Number of batches per epoch for this shard: the same on every rank.
    pub fn num_batches(&self) -> usize {
        self.samples_per_epoch().div_ceil(self.batch_size)
    }
}

/// Fisher-Yates: the same swaps as the sampler has always made.
fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// Where a process sits in a data-parallel launch, as its launcher says in the
/// environment ([`launch_from_env`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// This process's rank among all of them.
    pub rank: usize,
    /// How many processes there are.
    pub world_size: usize,
    /// This process's rank on its node (which GPU it takes), when the launcher says.
    pub local_rank: Option<usize>,
    /// Who said: `"torchrun"`, `"slurm"`, or `"none"` for a single process.
    pub launcher: &'static str,
}

/// The launch from the environment: torchrun's `RANK`, `WORLD_SIZE` and `LOCAL_RANK`
/// (also set by `torch.distributed.launch`, DeepSpeed and Accelerate), else SLURM's
/// `SLURM_PROCID`, `SLURM_NTASKS` and `SLURM_LOCALID` (`srun`, one task per GPU), else a
/// single process. torchrun's come first: under `srun torchrun ...` SLURM's name the
/// launcher processes, one per node, and torchrun's the workers. A malformed or
/// inconsistent value (a rank without a world size, a rank past it) is an error, not a
/// silent single-process run.
pub fn launch_from_env() -> Result<Launch> {
    launch_from(|name| match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e) => Err(Error::config(name, e.to_string())),
    })
}

/// [`launch_from_env`] over any source of variables.
fn launch_from(var: impl Fn(&str) -> Result<Option<String>>) -> Result<Launch> {
    let read =
        |name: &str| -> Result<Option<usize>> {
            match var(name)? {
                Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                    Error::config(name, format!("{v:?} is not a non-negative integer"))
                }),
                None => Ok(None),
            }
        };
    let schemes: [(&'static str, [&str; 3]); 2] = [
        ("torchrun", ["RANK", "WORLD_SIZE", "LOCAL_RANK"]),
        ("slurm", ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"]),
    ];
    for (launcher, [rank, world, local]) in schemes {
        match (read(rank)?, read(world)?) {
            (None, None) => continue,
            (Some(r), Some(w)) if w > 0 && r < w => {
                let local_rank = read(local)?;
                if let Some(l) = local_rank {
                    if l >= w {
                        return Err(Error::config(
                            local,
                            format!("{local}={l} is not below {world}={w}"),
                        ));
                    }
                }
                return Ok(Launch {
                    rank: r,
                    world_size: w,
                    local_rank,
                    launcher,
                });
            }
            (r, w) => {
                return Err(Error::config(
                    rank,
                    format!(
                        "{rank}={r:?} and {world}={w:?} do not name a shard (both must be \
                         set, {rank} < {world})"
                    ),
                ))
            }
        }
    }
    Ok(Launch {
        rank: 0,
        world_size: 1,
        local_rank: None,
        launcher: "none",
    })
}

/// `(rank, world_size)` from the launcher's environment ([`launch_from_env`]: torchrun's
/// `RANK` and `WORLD_SIZE`, else SLURM's `SLURM_PROCID` and `SLURM_NTASKS`); `(0, 1)`
/// when none is set. A malformed or inconsistent value is an error, not a silent
/// single-process run.
pub fn shard_from_env() -> Result<(usize, usize)> {
    launch_from_env().map(|l| (l.rank, l.world_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(vars: &[(&str, &str)]) -> Result<Launch> {
        launch_from(|name| {
            Ok(vars
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string()))
        })
    }

    #[test]
    fn launches_come_from_torchrun_then_slurm() {
        let none = launch(&[]).expect("nothing set");
        assert_eq!((none.rank, none.world_size, none.launcher), (0, 1, "none"));
        let t = launch(&[("RANK", "5"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "1")]).expect("t");
        assert_eq!(
            t,
            Launch {
                rank: 5,
                world_size: 8,
                local_rank: Some(1),
                launcher: "torchrun"
            }
        );
        let s = launch(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "3"),
        ])
        .expect("slurm");
        assert_eq!((s.rank, s.world_size, s.local_rank), (3, 4, Some(3)));
        assert_eq!(s.launcher, "slurm");
        // `srun torchrun`: torchrun's workers, not SLURM's launcher processes.
        let both = launch(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("RANK", "6"),
            ("WORLD_SIZE", "8"),
        ])
        .expect("both");
        assert_eq!(
            (both.rank, both.world_size, both.launcher),
            (6, 8, "torchrun")
        );
        // No local rank: none said.
        assert_eq!(
            launch(&[("RANK", "0"), ("WORLD_SIZE", "1")])
                .expect("no local")
                .local_rank,
            None
        );
        for bad in [
            &[("SLURM_PROCID", "2")][..],
            &[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4")],
            &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "0")],
            &[("RANK", "x"), ("WORLD_SIZE", "2")],
            &[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "2")],
            &[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "-1")],
            // A broken torchrun setting is not covered up by SLURM's.
            &[("RANK", "1"), ("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")],
        ] {
            assert!(launch(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn epochs_are_permutations_and_differ() {
        let s = Sampler::new(1000, 3, true);
        let a = s.permutation(0);
        let b = s.permutation(1);
        let mut sa = a.clone();
        sa.sort_unstable();
        assert_eq!(sa, (0..1000).collect::<Vec<_>>());
        assert_ne!(a, b);
        assert_eq!(a, s.permutation(0));
    }

    #[test]
    fn validation_order_is_fixed() {
        let s = Sampler::new(10, 3, false);
        assert_eq!(s.permutation(0), (0..10).collect::<Vec<_>>());
        assert_eq!(s.permutation(5), (0..10).collect::<Vec<_>>());
    }

    fn shard(len: usize, rank: usize, world: usize, batch: usize, drop_last: bool) -> Sampler {
        Sampler::new(len, 9, true)
            .shard(rank, world)
            .and_then(|s| s.batches_of(batch, drop_last))
            .expect("valid shard")
    }

    /// Batches per rank for `len` samples: the cases gave `[3,3,3,3,2,2,2]` and
    /// `[3,2,2]` before, so the ranks with fewer batches left the all-reduce early.
    fn batches_per_rank(len: usize, world: usize, batch: usize, drop_last: bool) -> Vec<usize> {
        (0..world)
            .map(|r| shard(len, r, world, batch, drop_last).batches(0).len())
            .collect()
    }

    #[test]
    fn every_rank_gets_the_same_number_of_batches() {
        assert_eq!(batches_per_rank(60, 7, 4, false), vec![3; 7]);
        assert_eq!(batches_per_rank(25, 3, 3, true), vec![2; 3]);
        for len in 0..40 {
            for world in 1..9 {
                for batch in 1..6 {
                    for drop_last in [false, true] {
                        let counts: Vec<(usize, usize)> = (0..world)
                            .map(|r| {
                                let s = shard(len, r, world, batch, drop_last);
                                let b = s.batches(3);
                                assert_eq!(b.len(), s.num_batches());
                                (b.len(), b.iter().map(Vec::len).sum())
                            })
                            .collect();
                        assert!(
                            counts.windows(2).all(|w| w[0] == w[1]),
                            "len {len} world {world} batch {batch} drop_last {drop_last}: {counts:?}"
                        );
                        if drop_last {
                            // Whole batches only, and as many as fit on every rank.
                            let per = counts[0].1;
                            assert_eq!(per % batch, 0);
                            assert!(len < (per + batch) * world);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn shards_are_disjoint_apart_from_padding_and_cover() {
        for (len, world) in [(103, 1), (103, 4), (60, 7), (5, 8), (1, 3), (16, 4)] {
            let mut real = Vec::new();
            let mut padded = Vec::new();
            for rank in 0..world {
                let s = shard(len, rank, world, 4, false);
                let order = s.epoch_order(2);
                assert_eq!(order.len(), len.div_ceil(world));
                let cut = order.len() - s.padding();
                real.extend_from_slice(&order[..cut]);
                padded.extend_from_slice(&order[cut..]);
                assert_eq!(order, s.epoch_order(2), "deterministic");
            }
            real.sort_unstable();
            assert_eq!(
                real,
                (0..len).collect::<Vec<_>>(),
                "len {len} world {world}"
            );
            assert_eq!(padded.len(), len.div_ceil(world) * world - len);
            // Padding repeats the start of the permutation, as DistributedSampler does.
            let perm = Sampler::new(len, 9, true).permutation(2);
            let mut want: Vec<usize> = (0..padded.len()).map(|i| perm[i % len]).collect();
            want.sort_unstable();
            padded.sort_unstable();
            assert_eq!(padded, want);
        }
    }

    #[test]
    fn drop_last_shards_are_disjoint() {
        let mut all = Vec::new();
        for rank in 0..3 {
            let s = shard(25, rank, 3, 3, true);
            assert_eq!(s.padding(), 0);
            all.extend(s.epoch_order(1));
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!((n, all.len()), (18, 18));
    }

    #[test]
    fn drop_last_keeps_whole_batches() {
        let s = Sampler::new(10, 1, true)
            .batches_of(4, true)
            .expect("valid");
        let b = s.batches(0);
        assert_eq!(b.len(), 2);
        assert!(b.iter().all(|x| x.len() == 4));
        assert_eq!(s.num_batches(), 2);
        let k = Sampler::new(10, 1, true)
            .batches_of(4, false)
            .expect("valid");
        assert_eq!(k.batches(0).last().map(Vec::len), Some(2));
    }
}

//! The order of one epoch: a full permutation from `(seed, epoch)`, sharded for
//! data-parallel training, cut into batches.
//!
//! Training order is a Fisher-Yates shuffle of the whole subset driven by Philox keyed by
//! `(seed, epoch)`: every epoch is a permutation of every sample, not a mix of a buffer.
//! Shard `rank` of `world_size` takes positions `rank, rank + world_size, ...` of that
//! permutation, so the shards are disjoint and together cover the epoch; they differ in
//! length by at most one. Validation order is the subset's sorted order, every epoch.

use crate::error::{Error, Result};
use crate::rng::{Rng, Stream};

/// Plans epochs for a subset of `len` samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampler {
    len: usize,
    seed: u64,
    shuffle: bool,
    rank: usize,
    world_size: usize,
    batch_size: usize,
    drop_last: bool,
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
        }
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

    /// The full order of `epoch` before sharding: indices into the subset.
    pub fn permutation(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.len).collect();
        if self.shuffle && self.len > 1 {
            let mut rng = Rng::new(self.seed, epoch, 0, Stream::Sampler);
            for i in (1..self.len).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                order.swap(i, j);
            }
        }
        order
    }

    /// This shard's order for `epoch`, after dropping a last partial batch if asked.
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        let mut mine: Vec<usize> = self
            .permutation(epoch)
            .into_iter()
            .skip(self.rank)
            .step_by(self.world_size)
            .collect();
        if self.drop_last {
            let keep = mine.len() / self.batch_size * self.batch_size;
            mine.truncate(keep);
        }
        mine
    }

    /// This shard's batches for `epoch`.
    pub fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        self.epoch_order(epoch)
            .chunks(self.batch_size)
            .map(<[usize]>::to_vec)
            .collect()
    }

    /// Number of batches per epoch for this shard.
    pub fn num_batches(&self) -> usize {
        let mine = self.len / self.world_size + usize::from(self.rank < self.len % self.world_size);
        if self.drop_last {
            mine / self.batch_size
        } else {
            mine.div_ceil(self.batch_size)
        }
    }
}

/// `(rank, world_size)` from the `RANK` and `WORLD_SIZE` environment variables, as
/// `torchrun` sets them; `(0, 1)` when neither is set. A malformed or inconsistent value
/// is an error, not a silent single-process run.
pub fn shard_from_env() -> Result<(usize, usize)> {
    let read =
        |name: &str| -> Result<Option<usize>> {
            match std::env::var(name) {
                Ok(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                    Error::config(name, format!("{v:?} is not a non-negative integer"))
                }),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(e) => Err(Error::config(name, e.to_string())),
            }
        };
    match (read("RANK")?, read("WORLD_SIZE")?) {
        (None, None) => Ok((0, 1)),
        (Some(r), Some(w)) if w > 0 && r < w => Ok((r, w)),
        (r, w) => Err(Error::config(
            "RANK",
            format!(
                "RANK={r:?} and WORLD_SIZE={w:?} do not name a shard (both must be set, RANK < WORLD_SIZE)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn shards_are_disjoint_and_cover() {
        for world in 1..6 {
            let mut all = Vec::new();
            for rank in 0..world {
                let s = Sampler::new(103, 9, true)
                    .shard(rank, world)
                    .and_then(|s| s.batches_of(4, false))
                    .expect("valid shard");
                let order = s.epoch_order(2);
                assert_eq!(s.batches(2).len(), s.num_batches());
                all.extend(order);
            }
            all.sort_unstable();
            assert_eq!(all, (0..103).collect::<Vec<_>>(), "world {world}");
        }
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

//! How the ranks of a data-parallel run split an epoch's order: into global batches
//! (the default, the same whatever the world size) or into per-rank shards.

use serde::{Deserialize, Serialize};

/// How the ranks of a data-parallel run split the epoch's order (see the
/// [sampler's docs](super)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Sharding {
    /// The default. The epoch's order is cut into global batches of `batch_size *
    /// world_size` samples, fixed by `(seed, epoch, global batch size)` alone; rank `r`
    /// takes the `r`-th contiguous slice of each (`batch_size` samples). Concatenating
    /// the ranks' batches in rank order gives the global batch, so the batches a job
    /// trains on do not depend on how many GPUs share them, and a job can be resumed on
    /// another number of GPUs with the same global batch size
    /// ([`ResumeState`](crate::pipeline::ResumeState)). The epoch's last, partial global
    /// batch is split as evenly as it goes (slices differing by at most one sample) and
    /// the short slices padded with one repeat each.
    #[default]
    Global,
    /// Each rank takes its own shard of the whole epoch's order: every `world_size`-th
    /// position from `rank` (or, with block order, a contiguous run of `ceil(n / w)`
    /// positions), cut into batches. The batches depend on the world size, so a job's
    /// state resumes only on the same world size. PyTorch's `DistributedSampler` order,
    /// and stoker's before global batches.
    PerRank,
}

/// The positions of an epoch's order of `len` that rank `rank` of `world` takes under
/// [`Sharding::Global`], in its order, with global batches of `batch * world`: whole
/// global batches, then (unless `drop_last`) its slice of the last, partial one. A
/// position `>= len` is padding (read as `len`-periodic: the order's start repeated).
pub(super) fn global_positions(
    len: usize,
    rank: usize,
    world: usize,
    batch: usize,
    drop_last: bool,
) -> Vec<usize> {
    let global = batch.saturating_mul(world).max(1);
    let whole = len / global;
    let rem = len - whole * global;
    let mut out = Vec::with_capacity(whole * batch + batch);
    for k in 0..whole {
        let start = k * global + rank * batch;
        out.extend(start..start + batch);
    }
    if drop_last || rem == 0 {
        return out;
    }
    let (q, m) = (rem / world, rem % world);
    let start = whole * global + rank * q + rank.min(m);
    out.extend(start..start + q + usize::from(rank < m));
    if m > 0 && rank >= m {
        out.push(len + (rank - m));
    }
    out
}

/// How many of [`global_positions`] are padding: one for a rank past the remainder of
/// the last, partial global batch, else none.
pub(super) fn global_padding(
    len: usize,
    rank: usize,
    world: usize,
    batch: usize,
    drop_last: bool,
) -> usize {
    let global = batch.saturating_mul(world).max(1);
    let rem = len % global;
    usize::from(!drop_last && !rem.is_multiple_of(world) && rank >= rem % world)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_slices_concatenate_to_the_global_order() {
        for len in 0..60 {
            for world in 1..7 {
                for batch in 1..5 {
                    for drop_last in [false, true] {
                        let ranks: Vec<Vec<usize>> = (0..world)
                            .map(|r| global_positions(len, r, world, batch, drop_last))
                            .collect();
                        let steps = ranks[0].len().div_ceil(batch);
                        let mut real: Vec<usize> = Vec::new();
                        for s in 0..steps {
                            for (r, p) in ranks.iter().enumerate() {
                                let chunk =
                                    &p[(s * batch).min(p.len())..((s + 1) * batch).min(p.len())];
                                real.extend(chunk.iter().filter(|&&x| x < len));
                                let pad = chunk.iter().filter(|&&x| x >= len).count();
                                assert_eq!(
                                    pad,
                                    if s + 1 == steps {
                                        global_padding(len, r, world, batch, drop_last)
                                    } else {
                                        0
                                    }
                                );
                            }
                        }
                        let want = if drop_last {
                            len / (batch * world) * batch * world
                        } else {
                            len
                        };
                        assert_eq!(
                            real,
                            (0..want).collect::<Vec<_>>(),
                            "{len} {world} {batch} {drop_last}"
                        );
                        assert!(ranks.iter().all(|p| p.len() == ranks[0].len()));
                    }
                }
            }
        }
    }
}

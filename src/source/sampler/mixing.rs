//! The epoch order of a mixture of datasets ([`crate::source::mixture::Mixture`]): which
//! source each position of the epoch takes, and which of its samples.
//!
//! # Which source
//!
//! The sources' **schedule** is a smooth weighted round robin over the normalised
//! weights `w_k` (nginx's): at each position every source's credit grows by its weight,
//! the source with the largest credit (the first on ties) takes the position and its
//! credit drops by 1. After `T` positions source `k` has taken `c_k` with
//! `T * w_k - (K - 1) < c_k < T * w_k + 1` (`K` sources), at every `T`: the shares of
//! every prefix are exact to within a sample or a few. The schedule is the same every
//! epoch; the randomness is in the order within **rounds** of [`ROUND`] positions: the
//! positions `[r * ROUND, (r + 1) * ROUND)` (the last round of the epoch shorter) are
//! shuffled among themselves by Philox keyed by `(seed, epoch, r)`. So which source a
//! position takes is a pure function of `(seed, epoch, position)`, and the counts of
//! every source at a round's end are the schedule's.
//!
//! # Which sample of it
//!
//! The `j`-th draw of an epoch from source `k` (in the order's order) takes, under
//! [`Exhausted::Stop`] and [`Exhausted::Restart`], the `j mod n_k`-th sample of pass
//! `j / n_k` over the source: a fresh permutation of the source keyed by
//! `(seed, epoch, k, pass)` (a source whose subset is a validation subset keeps its
//! sorted order in every pass). Under [`Exhausted::Replacement`] it is a sample drawn
//! uniformly, keyed by `(seed, epoch, k, j)`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{first_bad_weight, shuffle};
use crate::error::{Error, Result};
use crate::rng::{mix64, Rng, Stream};

/// Positions of a round, shuffled among themselves each epoch (see the module docs).
pub const ROUND: usize = 256;

/// What a mixture does when a source has given every one of its samples in an epoch
/// (see `docs/sources.md`, "Mixing datasets").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Exhausted {
    /// The default. A source that has given all its samples starts a new pass over a
    /// fresh permutation of itself (keyed by seed, epoch, source and pass), so every
    /// sample of a source comes once per pass, and the epoch has its full size whatever
    /// the weights.
    #[default]
    Restart,
    /// The epoch ends at the position where the first source of positive weight would
    /// have to give a sample a second time: no sample comes twice in an epoch, and the
    /// shares stay the weights to the end (rather than dropping the source and drawing
    /// the rest from the others, which would skew the end of every epoch towards them).
    /// The epoch is then shorter than the epoch size unless the weights are in
    /// proportion to the sources' lengths (with those weights and the default epoch
    /// size, the sum of the lengths, an epoch is exactly one pass over every source).
    Stop,
    /// Each draw from a source takes one of its samples uniformly at random, with
    /// replacement: a sample may come more than once in an epoch, and one may not come.
    Replacement,
}

impl Exhausted {
    /// Its number in the order's fingerprint.
    fn code(self) -> u64 {
        match self {
            Exhausted::Restart => 0,
            Exhausted::Stop => 1,
            Exhausted::Replacement => 2,
        }
    }
}

crate::error::from_str_by_name! {
    Exhausted, "when_exhausted", "exhaustion policy",
    { "restart" => Restart, "stop" => Stop, "replacement" => Replacement }
}

/// A mixture's order: its sources as ranges of the combined subset, their weights and
/// the policy. Checked when made.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mixing {
    /// Where each source starts in the combined subset, and the end of the last.
    offsets: Arc<[usize]>,
    /// The weights, normalised to sum to 1.
    weights: Arc<[f64]>,
    /// Whether each source's passes are shuffled (training) or in its order.
    shuffle: Arc<[bool]>,
    exhausted: Exhausted,
    /// The epoch size asked for.
    size: usize,
    /// Positions an epoch has: `size`, or under `Stop` fewer.
    len: usize,
}

impl Mixing {
    /// Sources of `lens` samples with `weights` (finite, not negative, not all 0; every
    /// source of positive weight not empty), `size` positions an epoch.
    pub(crate) fn new(
        lens: &[usize],
        weights: &[f64],
        shuffle: &[bool],
        size: usize,
        exhausted: Exhausted,
    ) -> Result<Self> {
        let bad = |m: String| Err(Error::config("mixture", m));
        if lens.is_empty() || lens.len() != weights.len() || lens.len() != shuffle.len() {
            return bad(format!(
                "{} sources with {} weights: give one weight per source, and a source or more",
                lens.len(),
                weights.len()
            ));
        }
        if lens.len() > u32::MAX as usize {
            return bad(format!("{} sources is too many", lens.len()));
        }
        if let Some((k, w)) = first_bad_weight(weights) {
            return bad(format!(
                "weight {w} of source {k} is not a finite number >= 0"
            ));
        }
        let total: f64 = weights.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return bad("every weight is 0: nothing could be drawn".into());
        }
        if let Some(k) = (0..lens.len()).find(|&k| weights[k] > 0.0 && lens[k] == 0) {
            return bad(format!(
                "source {k} has weight {} and no samples",
                weights[k]
            ));
        }
        if size == 0 {
            return bad("the epoch size must be at least 1".into());
        }
        let mut offsets = Vec::with_capacity(lens.len() + 1);
        let mut at = 0usize;
        offsets.push(0);
        for &n in lens {
            at = at.saturating_add(n);
            offsets.push(at);
        }
        let mut m = Mixing {
            offsets: offsets.into(),
            weights: weights.iter().map(|w| w / total).collect(),
            shuffle: shuffle.into(),
            exhausted,
            size,
            len: size,
        };
        if exhausted == Exhausted::Stop {
            m.len = m.schedule(size, true).len();
        }
        Ok(m)
    }

    /// Positions an epoch has.
    pub(crate) fn epoch_len(&self) -> usize {
        self.len
    }

    /// The source of sample `index` of the combined subset.
    pub(crate) fn source_of(&self, index: usize) -> usize {
        self.offsets
            .partition_point(|&o| o <= index)
            .saturating_sub(1)
            .min(self.sources().saturating_sub(1))
    }

    /// How many sources.
    pub(crate) fn sources(&self) -> usize {
        self.weights.len()
    }

    /// Source `k`'s length.
    fn source_len(&self, k: usize) -> usize {
        self.offsets[k + 1] - self.offsets[k]
    }

    /// Words identifying the order (for the resume fingerprint): the policy, the epoch
    /// size, the round, and each source's length and weight.
    pub(crate) fn order_key(&self) -> Vec<u64> {
        let mut key = vec![
            4,
            self.exhausted.code(),
            self.size as u64,
            ROUND as u64,
            self.sources() as u64,
        ];
        for k in 0..self.sources() {
            key.extend([
                self.source_len(k) as u64,
                self.weights[k].to_bits(),
                u64::from(self.shuffle[k]),
            ]);
        }
        key
    }

    /// The smooth weighted round robin's first `n` sources; with `stop`, ending before
    /// the first draw a source could not give without repeating a sample.
    fn schedule(&self, n: usize, stop: bool) -> Vec<u32> {
        let k = self.sources();
        let mut credit = vec![0.0f64; k];
        let mut taken = vec![0usize; k];
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let mut best = 0;
            for s in 0..k {
                credit[s] += self.weights[s];
                if credit[s] > credit[best] {
                    best = s;
                }
            }
            if stop && taken[best] >= self.source_len(best) {
                break;
            }
            credit[best] -= 1.0;
            taken[best] += 1;
            out.push(best as u32);
        }
        out
    }

    /// The source of each position of `epoch`.
    pub(crate) fn epoch_sources(&self, seed: u64, epoch: u64) -> Vec<u32> {
        let mut order = self.schedule(self.len, false);
        for (r, round) in order.chunks_mut(ROUND).enumerate() {
            shuffle(round, &mut Rng::new(seed, epoch, r as u64, Stream::Mixture));
        }
        order
    }

    /// The order of `epoch`: indices into the combined subset.
    pub(crate) fn draw(&self, seed: u64, epoch: u64) -> Vec<usize> {
        let sources = self.epoch_sources(seed, epoch);
        let mut taken = vec![0u64; self.sources()];
        // Each source's pass in progress, and its order.
        let mut passes: Vec<Option<(u64, Vec<usize>)>> = vec![None; self.sources()];
        sources
            .into_iter()
            .map(|k| {
                let k = k as usize;
                let n = self.source_len(k);
                let j = taken[k];
                taken[k] += 1;
                let i = match self.exhausted {
                    Exhausted::Replacement => {
                        let key = source_key(seed, k, u64::MAX);
                        Rng::new(key, epoch, j, Stream::Mixture).below(n as u64) as usize
                    }
                    Exhausted::Stop | Exhausted::Restart => {
                        let (pass, i) = (j / n as u64, (j % n as u64) as usize);
                        let current = passes[k].as_ref().is_some_and(|p| p.0 == pass);
                        if !current {
                            passes[k] = Some((pass, self.pass(seed, epoch, k, pass)));
                        }
                        passes[k].as_ref().map_or(i, |p| p.1[i])
                    }
                };
                self.offsets[k] + i
            })
            .collect()
    }

    /// Source `k`'s order in pass `pass` of `epoch`: its own indices.
    fn pass(&self, seed: u64, epoch: u64, k: usize, pass: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.source_len(k)).collect();
        if self.shuffle[k] {
            let key = source_key(seed, k, pass);
            shuffle(&mut order, &mut Rng::new(key, epoch, 0, Stream::Mixture));
        }
        order
    }
}

/// The Philox key of source `k`'s stream `which` (a pass, or `u64::MAX` for draws with
/// replacement): the seed mixed with both.
fn source_key(seed: u64, k: usize, which: u64) -> u64 {
    mix64(seed ^ mix64((k as u64 + 1) ^ mix64(which)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(lens: &[usize], w: &[f64], size: usize, e: Exhausted) -> Mixing {
        Mixing::new(lens, w, &vec![true; lens.len()], size, e).expect("valid")
    }

    #[test]
    fn every_prefix_has_the_weights_shares_within_the_bound() {
        let m = mix(&[50, 50, 50], &[0.5, 0.3, 0.2], 1000, Exhausted::Restart);
        let s = m.schedule(1000, false);
        let mut c = [0f64; 3];
        for (t, &k) in s.iter().enumerate() {
            c[k as usize] += 1.0;
            let t = (t + 1) as f64;
            for (k, (c, w)) in c.iter().zip(m.weights.iter()).enumerate() {
                let d = c - t * w;
                assert!(d < 1.0 && d > -2.0, "prefix {t} source {k}: {d}");
            }
        }
    }

    #[test]
    fn stop_ends_where_the_first_source_runs_out() {
        // Weights 1:1 over 10 and 30 samples: the small one runs out after 20.
        let m = mix(&[10, 30], &[1.0, 1.0], 40, Exhausted::Stop);
        assert_eq!(m.epoch_len(), 20);
        // In proportion to the lengths: one whole pass over each.
        let m = mix(&[10, 30], &[1.0, 3.0], 40, Exhausted::Stop);
        assert_eq!(m.epoch_len(), 40);
        let mut d = m.draw(3, 1);
        d.sort_unstable();
        assert_eq!(d, (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn bad_mixtures_are_refused() {
        let t = [true, true];
        for (lens, w, size) in [
            (&[1usize, 1][..], &[0.0, 0.0][..], 2),
            (&[1, 1], &[1.0, f64::NAN], 2),
            (&[1, 1], &[1.0, -1.0], 2),
            (&[1, 0], &[1.0, 1.0], 2),
            (&[1, 1], &[1.0, 1.0], 0),
            (&[1, 1], &[1.0], 2),
        ] {
            let t = &t[..lens.len()];
            assert!(Mixing::new(lens, w, t, size, Exhausted::Restart).is_err());
        }
        // An empty source of weight 0 is never drawn from.
        assert!(Mixing::new(&[1, 0], &[1.0, 0.0], &t, 2, Exhausted::Restart).is_ok());
    }

    #[test]
    fn source_of_finds_the_range() {
        let m = mix(&[3, 0, 2], &[1.0, 0.0, 1.0], 5, Exhausted::Restart);
        let got: Vec<usize> = (0..5).map(|i| m.source_of(i)).collect();
        assert_eq!(got, vec![0, 0, 0, 2, 2]);
    }
}

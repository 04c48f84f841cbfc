//! Aspect-ratio buckets: a list of output sizes, which bucket each image goes to, the
//! batch size of each, and the order of an epoch's bucket batches.
//!
//! A sample goes to the bucket whose aspect ratio is closest to its image's stored
//! (upright) aspect ratio, read from its headers ([`crate::source::aspect`]): the bucket
//! `(bw, bh)` with the smallest `|ln(w / h) - ln(bw / bh)|`, ties to the first of the
//! list. The distance in log space treats `2:1` and `1:2` alike, as the same distance
//! from square.
//!
//! An epoch's steps are the buckets' batches in an order shuffled by `(seed, epoch)` (a
//! Fisher-Yates shuffle of the bucket labels, one label per batch): every rank computes
//! the same order, so at each step every rank reads a batch of the same bucket, of the
//! same shape. A validation subset takes the buckets in their list order, each bucket's
//! batches in a run.

use std::sync::Arc;

use super::{Location, Sample, Subset, SubsetInner};
use crate::error::{Error, Result};
use crate::rng::{Rng, Stream};

/// The most buckets a list may have.
pub const MAX_BUCKETS: usize = 1024;

/// The largest side of a bucket, in pixels.
pub const MAX_BUCKET_SIDE: u32 = 1 << 15;

/// Aspect-ratio buckets: output sizes `(width, height)` and each one's batch size (see
/// the [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    sizes: Vec<(u32, u32)>,
    batch: BatchRule,
}

/// How many samples a bucket's batch holds on each rank.
#[derive(Debug, Clone, PartialEq)]
enum BatchRule {
    /// The pipeline's batch size, for every bucket.
    Pipeline,
    /// One per bucket.
    PerBucket(Vec<usize>),
    /// `max(1, floor(pixels / (width * height)))`.
    Pixels(u64),
}

impl Buckets {
    /// Buckets of the output sizes `sizes`, `(width, height)` each (for example SDXL's
    /// `(1024, 1024), (1152, 896), (896, 1152), ...`): at least one, at most
    /// [`MAX_BUCKETS`], each side from 1 to [`MAX_BUCKET_SIDE`], no size twice. Every
    /// bucket's batch has the pipeline's batch size until [`Buckets::batch_sizes`] or
    /// [`Buckets::pixels_per_batch`] says otherwise.
    pub fn sizes(sizes: &[(u32, u32)]) -> Result<Self> {
        let bad = |m: String| Err(Error::config("buckets", m));
        if sizes.is_empty() || sizes.len() > MAX_BUCKETS {
            return bad(format!(
                "{} sizes given: from 1 to {MAX_BUCKETS} buckets",
                sizes.len()
            ));
        }
        for (i, &(w, h)) in sizes.iter().enumerate() {
            if !(1..=MAX_BUCKET_SIDE).contains(&w) || !(1..=MAX_BUCKET_SIDE).contains(&h) {
                return bad(format!(
                    "bucket {i} is {w}x{h}: each side from 1 to {MAX_BUCKET_SIDE}"
                ));
            }
            if sizes[..i].contains(&(w, h)) {
                return bad(format!("bucket {i} ({w}x{h}) is given twice"));
            }
        }
        Ok(Buckets {
            sizes: sizes.to_vec(),
            batch: BatchRule::Pipeline,
        })
    }

    /// Buckets of about `pixels` pixels each, both sides multiples of `multiple_of`, with
    /// aspect ratios up to `max_ratio` (and down to `1 / max_ratio`): for every width
    /// `w` that is a multiple of `multiple_of`, the height
    /// `floor(pixels / w / multiple_of) * multiple_of` (the tallest that keeps
    /// `w * h <= pixels`), kept when the ratio is in range; in order of increasing
    /// aspect ratio (width / height). For example `(1024 * 1024, 64, 4.0)` gives 25
    /// buckets from 512x2048 to 2048x512, 1024x1024 among them.
    pub fn from_pixel_budget(pixels: u64, multiple_of: u32, max_ratio: f64) -> Result<Self> {
        let bad = |m: String| Err(Error::config("buckets", m));
        let m = u64::from(multiple_of);
        if m == 0 || pixels < m * m || pixels > u64::from(MAX_BUCKET_SIDE).pow(2) {
            return bad(format!(
                "a budget of {pixels} pixels in multiples of {multiple_of}: the budget must \
                 hold one {multiple_of}x{multiple_of} block and be at most {MAX_BUCKET_SIDE}^2"
            ));
        }
        if !(max_ratio.is_finite() && max_ratio >= 1.0) {
            return bad(format!("max_ratio {max_ratio} must be a number >= 1"));
        }
        let mut sizes = Vec::new();
        // The narrowest width in range: sqrt(pixels / max_ratio), down to a multiple.
        let start = ((pixels as f64 / max_ratio).sqrt() as u64 / m).saturating_sub(1) * m;
        let mut w = start.max(m);
        loop {
            let h = pixels / w / m * m;
            if h == 0 || w as f64 / h as f64 > max_ratio {
                break;
            }
            if h as f64 / w as f64 <= max_ratio {
                if sizes.len() == MAX_BUCKETS {
                    return bad(format!(
                        "more than {MAX_BUCKETS} buckets: raise multiple_of ({multiple_of})"
                    ));
                }
                let side = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
                sizes.push((side(w), side(h)));
            }
            w += m;
        }
        Buckets::sizes(&sizes)
    }

    /// A batch size (per rank) for each bucket, in the list's order: as many as there
    /// are buckets, each at least 1.
    pub fn batch_sizes(mut self, sizes: &[usize]) -> Result<Self> {
        if sizes.len() != self.sizes.len() || sizes.contains(&0) {
            return Err(Error::config(
                "buckets",
                format!(
                    "batch sizes {sizes:?} for {} buckets: one each, each at least 1",
                    self.sizes.len()
                ),
            ));
        }
        self.batch = BatchRule::PerBucket(sizes.to_vec());
        Ok(self)
    }

    /// Batch sizes from a pixel budget per batch (per rank): a bucket of `w x h` takes
    /// `max(1, floor(pixels / (w * h)))` samples, so that smaller outputs come in larger
    /// batches.
    pub fn pixels_per_batch(mut self, pixels: u64) -> Result<Self> {
        if pixels == 0 {
            return Err(Error::config(
                "buckets",
                "a pixel budget per batch must be at least 1",
            ));
        }
        self.batch = BatchRule::Pixels(pixels);
        Ok(self)
    }

    /// The buckets' output sizes `(width, height)`, in order.
    pub fn get_sizes(&self) -> &[(u32, u32)] {
        &self.sizes
    }

    /// How many buckets there are (at least one).
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Whether there are none (never: a list has at least one).
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    /// The bucket of an image of `width x height`: the smallest
    /// `|ln(width / height) - ln(bw / bh)|`, ties to the first. A zero side counts as 1.
    pub fn bucket_of(&self, width: u32, height: u32) -> usize {
        let log_ratio = |w: u32, h: u32| f64::from(w.max(1)).ln() - f64::from(h.max(1)).ln();
        let r = log_ratio(width, height);
        let mut best = (0, f64::INFINITY);
        for (i, &(bw, bh)) in self.sizes.iter().enumerate() {
            let d = (r - log_ratio(bw, bh)).abs();
            if d < best.1 {
                best = (i, d);
            }
        }
        best.0
    }

    /// The batch size (per rank) of bucket `bucket`, where the pipeline's own is
    /// `default`.
    pub fn batch_size(&self, bucket: usize, default: usize) -> usize {
        match &self.batch {
            BatchRule::Pipeline => default,
            BatchRule::PerBucket(b) => b.get(bucket).copied().unwrap_or(default),
            BatchRule::Pixels(p) => {
                let (w, h) = self.sizes.get(bucket).copied().unwrap_or((1, 1));
                let n = p / (u64::from(w) * u64::from(h)).max(1);
                usize::try_from(n).unwrap_or(usize::MAX).max(1)
            }
        }
    }

    /// The batch size bucket `bucket` sets itself, if the buckets set one.
    pub(crate) fn own_batch_size(&self, bucket: usize) -> Option<usize> {
        match self.batch {
            BatchRule::Pipeline => None,
            _ => Some(self.batch_size(bucket, 1)),
        }
    }

    /// Words that identify the buckets' sizes.
    pub(crate) fn key(&self) -> Vec<u64> {
        let mut key = vec![self.sizes.len() as u64];
        key.extend(
            self.sizes
                .iter()
                .map(|&(w, h)| u64::from(w) << 32 | u64::from(h)),
        );
        key
    }
}

/// The bucket of each step of an epoch: bucket `b` `batches[b]` times, shuffled by
/// `(seed, epoch)` when `shuffle`, else in the buckets' order.
pub fn schedule(batches: &[usize], seed: u64, epoch: u64, shuffle: bool) -> Vec<usize> {
    let mut order: Vec<usize> = batches
        .iter()
        .enumerate()
        .flat_map(|(b, &n)| std::iter::repeat_n(b, n))
        .collect();
    if shuffle {
        let mut rng = Rng::new(seed, epoch, 0, Stream::Buckets);
        for i in (1..order.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
    }
    order
}

/// The samples `keep` (indices into `subset`) as a subset of their own, with the same
/// classes, role and root; the samples in `refused` (indices, with a reason each) get a
/// [`Location::Refused`] in place of theirs, so that every epoch reports them.
pub(crate) fn part_of(
    subset: &Subset,
    keep: &[usize],
    refused: &std::collections::HashMap<usize, crate::error::SampleError>,
) -> Subset {
    let s = &subset.inner;
    let samples: Vec<Sample> = keep
        .iter()
        .filter_map(|&i| {
            let mut sample = s.samples.get(i)?.clone();
            if let Some(e) = refused.get(&i) {
                sample.location = Location::Refused {
                    kind: e.kind,
                    reason: Arc::from(e.reason.as_str()),
                };
            }
            Some(sample)
        })
        .collect();
    Subset {
        inner: Arc::new(SubsetInner {
            samples,
            classes: s.classes.clone(),
            role: s.role,
            root: s.root.clone(),
            read_latency: s.read_latency,
            mixing: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_in_log_ratio_ties_to_the_first() {
        let b = Buckets::sizes(&[(100, 100), (200, 100), (100, 200)]).expect("sizes");
        assert_eq!(b.bucket_of(640, 480), 0);
        assert_eq!(b.bucket_of(300, 100), 1);
        assert_eq!(b.bucket_of(100, 170), 2);
        // 1:1 is as far from 2:1 as from 1:2 in log space: the first wins.
        let t = Buckets::sizes(&[(200, 100), (100, 200)]).expect("sizes");
        assert_eq!(t.bucket_of(4, 4), 0);
        let t = Buckets::sizes(&[(100, 200), (200, 100)]).expect("sizes");
        assert_eq!(t.bucket_of(4, 4), 0);
        assert!(Buckets::sizes(&[]).is_err());
        assert!(Buckets::sizes(&[(1, 1), (1, 1)]).is_err());
        assert!(Buckets::sizes(&[(0, 1)]).is_err());
    }

    #[test]
    fn pixel_budgets_give_sizes_in_range() {
        let b = Buckets::from_pixel_budget(1024 * 1024, 64, 4.0).expect("budget");
        assert!(b.get_sizes().contains(&(1024, 1024)));
        assert_eq!(b.get_sizes().first(), Some(&(512, 2048)));
        assert_eq!(b.get_sizes().last(), Some(&(2048, 512)));
        for &(w, h) in b.get_sizes() {
            assert!(
                w % 64 == 0 && h % 64 == 0 && w * h <= 1024 * 1024,
                "{w}x{h}"
            );
            let r = f64::from(w) / f64::from(h);
            assert!((0.25..=4.0).contains(&r), "{w}x{h}");
        }
        let pb = b.clone().pixels_per_batch(4 * 1024 * 1024).expect("budget");
        assert_eq!(pb.batch_size(0, 7), 4);
        assert_eq!(b.batch_size(0, 7), 7);
        assert!(Buckets::from_pixel_budget(1 << 20, 1, 1e9).is_err());
    }

    #[test]
    fn schedules_hold_every_batch_and_follow_the_seed() {
        let counts = [3, 0, 5, 1];
        let a = schedule(&counts, 7, 0, true);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 0, 0, 2, 2, 2, 2, 2, 3]);
        assert_eq!(a, schedule(&counts, 7, 0, true));
        assert_eq!(schedule(&counts, 7, 0, false), sorted);
    }
}

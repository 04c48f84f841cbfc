//! Aspect-ratio buckets: batches of one bucket each, at that bucket's output size
//! ([`PipelineBuilder::buckets`], [`BucketPipeline`]).
//!
//! When it is built, the pipeline reads every sample's image size from its headers (one
//! header read per sample, see [`crate::source::aspect`]; never a decode) and puts the
//! sample in the bucket of the closest aspect ratio ([`Buckets::bucket_of`]). Each
//! non-empty bucket is then a [`Pipeline`] of its own over its samples, with the
//! augmentation moved onto the bucket's size ([`Augment::for_bucket`]) and the bucket's
//! batch size: its own epoch order, sharding over the ranks (global batches, padding
//! marked in [`Batch::repeated`] or dropped under `drop_last`, as any pipeline does),
//! threads and batch ring. An epoch takes the buckets' batches in the order
//! [`crate::source::buckets::schedule`] gives for `(seed, epoch)`: the same on every rank,
//! so every rank runs the same number of steps, and at each step a batch of the same
//! bucket.
//!
//! A sample whose headers cannot be read is listed by [`BucketPipeline::unreadable`] (path
//! and reason) and goes, with its location refused, to the bucket nearest to 1:1: every
//! epoch reports it there as a failed sample, under the pipeline's [`OnError`](super::OnError).
//!
//! [`Augment::for_bucket`]: crate::Augment::for_bucket

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::state::Fnv;
use super::{Batch, Epoch, Pipeline, PipelineBuilder, ResumeState};
use crate::error::{Error, Result, ResumeError, SampleError};
use crate::source::buckets::{self, Buckets};
use crate::source::{aspect, Role, Subset};

impl PipelineBuilder {
    /// Aspect-ratio buckets (see [`BucketPipeline`]): every batch comes from one bucket,
    /// at its output size; the augmentation set with [`PipelineBuilder::augment`] is moved
    /// onto each bucket's size ([`Augment::for_bucket`](crate::Augment::for_bucket) says
    /// how its crop maps), and the batch size is the bucket's
    /// ([`Buckets::batch_sizes`], [`Buckets::pixels_per_batch`]) or else this builder's.
    /// Every other setting applies to every bucket. Not with [`PipelineBuilder::weighted_by`].
    pub fn buckets(self, buckets: Buckets) -> BucketBuilder {
        BucketBuilder {
            base: self,
            buckets,
        }
    }
}

/// A [`PipelineBuilder`] with aspect-ratio buckets: [`BucketBuilder::build`] reads the
/// image sizes and builds a [`BucketPipeline`].
#[derive(Debug, Clone)]
pub struct BucketBuilder {
    base: PipelineBuilder,
    buckets: Buckets,
}

/// Threads reading headers at build time.
const HEADER_THREADS: usize = 16;

impl BucketBuilder {
    /// Reads every sample's image size from its headers, puts each sample in its bucket
    /// and builds a pipeline per non-empty bucket.
    pub fn build(self) -> Result<BucketPipeline> {
        let base = self.base;
        if base.weighting.is_some() {
            return Err(Error::config(
                "buckets",
                "weighted sampling weights the whole subset: not with aspect-ratio buckets",
            ));
        }
        if base.subset.inner.mixing.is_some() {
            return Err(Error::config(
                "buckets",
                "a mixture draws its sources by weight over the whole epoch: not with aspect-ratio buckets",
            ));
        }
        let subset = base.subset.clone();
        let sizes = read_sizes(subset.samples(), &base.limits);
        let n = self.buckets.len();
        let fallback = self.buckets.bucket_of(1, 1);
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut assignment = Vec::with_capacity(sizes.len());
        let mut unreadable = Vec::new();
        let mut refused = HashMap::new();
        for (i, size) in sizes.into_iter().enumerate() {
            let b = match size {
                Ok((w, h)) => self.buckets.bucket_of(w, h),
                Err(e) => {
                    log::warn!("aspect-ratio buckets: {e}");
                    unreadable.push(e.clone());
                    refused.insert(i, e);
                    fallback
                }
            };
            members[b].push(i);
            assignment.push(b);
        }
        let mut pipelines = Vec::with_capacity(n);
        for (b, keep) in members.iter().enumerate() {
            if keep.is_empty() {
                pipelines.push(None);
                continue;
            }
            let (w, h) = self.buckets.get_sizes()[b];
            let mut builder = base.clone();
            builder.subset = buckets::part_of(&subset, keep, &refused);
            builder.augment = base.augment.for_bucket(w, h);
            if let Some(size) = self.buckets.own_batch_size(b) {
                builder = builder.batch_size(size);
            }
            pipelines.push(Some(builder.build()?));
        }
        let mut fnv = Fnv::default();
        for k in self.buckets.key() {
            fnv.write(k);
        }
        let mut global_batch_size = 0;
        for p in &pipelines {
            let (order, g) = p.as_ref().map_or((0, 0), |p| {
                let s = p.state();
                (s.order, s.global_batch_size)
            });
            fnv.write(order);
            fnv.write(g);
            global_batch_size = global_batch_size.max(g);
        }
        let seed = base.seed;
        let order = fnv.0;
        Ok(BucketPipeline {
            shuffle: subset.role() == Role::Train,
            buckets: self.buckets,
            pipelines,
            assignment,
            unreadable,
            subset,
            seed,
            order,
            global_batch_size,
            last: Arc::new(Mutex::new(state(seed, 0, 0, global_batch_size, order))),
        })
    }
}

/// Every sample's upright size from its headers, read by a few threads (in object
/// storage each read is a request).
fn read_sizes(
    samples: &[crate::source::Sample],
    limits: &crate::decode::Limits,
) -> Vec<std::result::Result<(u32, u32), SampleError>> {
    let chunk = samples.len().div_ceil(HEADER_THREADS).max(64);
    std::thread::scope(|scope| {
        let parts: Vec<_> = samples
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|s| aspect::stored_size(s, limits))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .zip(samples.chunks(chunk))
            .flat_map(|(h, part)| {
                h.join().unwrap_or_else(|_| {
                    part.iter()
                        .map(|s| {
                            Err(SampleError::new(
                                s,
                                crate::error::SampleErrorKind::Internal,
                                "header read panicked".into(),
                            ))
                        })
                        .collect()
                })
            })
            .collect()
    })
}

fn state(seed: u64, epoch: u64, consumed: u64, g: u64, order: u64) -> ResumeState {
    ResumeState {
        version: ResumeState::VERSION,
        seed,
        epoch,
        samples_consumed: consumed,
        global_batch_size: g,
        order,
        sources: Vec::new(),
    }
}

/// A pipeline with aspect-ratio buckets: every batch holds samples of one bucket, at
/// that bucket's output size. Built by [`PipelineBuilder::buckets`].
///
/// When it is built, it reads every sample's image size from its headers (one header
/// read per sample, see [`crate::source::aspect`]; never a decode) and puts the sample in
/// the bucket of the closest aspect ratio ([`Buckets::bucket_of`]). Each non-empty bucket
/// is a [`Pipeline`] of its own over its samples ([`BucketPipeline::pipeline`]), with the
/// augmentation moved onto the bucket's size
/// ([`Augment::for_bucket`](crate::Augment::for_bucket)) and the bucket's batch size: its
/// own epoch order, sharding over the ranks (global batches; a short last global batch
/// padded with repeats marked in [`Batch::repeated`], or not read under `drop_last`),
/// threads and ring of batches. An epoch takes the buckets' batches in the order
/// [`BucketPipeline::schedule`] gives for `(seed, epoch)`: the same on every rank, so
/// every rank runs the same number of steps, with a batch of the same bucket at each.
///
/// A sample whose headers cannot be read is listed by [`BucketPipeline::unreadable`]
/// (path and reason) and goes, with its location refused, to the bucket nearest to 1:1:
/// every epoch reports it there as a failed sample, under the pipeline's
/// [`OnError`](super::OnError).
#[derive(Debug)]
pub struct BucketPipeline {
    buckets: Buckets,
    /// The pipeline of each bucket; `None` for a bucket no sample went to.
    pipelines: Vec<Option<Pipeline>>,
    assignment: Vec<usize>,
    unreadable: Vec<SampleError>,
    subset: Subset,
    seed: u64,
    shuffle: bool,
    order: u64,
    global_batch_size: u64,
    last: Arc<Mutex<ResumeState>>,
}

impl BucketPipeline {
    /// The buckets.
    pub fn buckets(&self) -> &Buckets {
        &self.buckets
    }

    /// The bucket of each sample of the subset, in the subset's order.
    pub fn assignment(&self) -> &[usize] {
        &self.assignment
    }

    /// The samples whose headers could not be read (path and reason), in the subset's
    /// order: each is reported by every epoch as a failed sample of the bucket nearest to
    /// 1:1, never dropped silently.
    pub fn unreadable(&self) -> &[SampleError] {
        &self.unreadable
    }

    /// The pipeline of bucket `bucket` (its samples, sampler, stats); `None` for a bucket
    /// no sample went to.
    pub fn pipeline(&self, bucket: usize) -> Option<&Pipeline> {
        self.pipelines.get(bucket).and_then(Option::as_ref)
    }

    /// The subset read.
    pub fn subset(&self) -> &Subset {
        &self.subset
    }

    /// Batches per epoch on this rank: the buckets' together, the same on every rank.
    pub fn num_batches(&self) -> usize {
        self.counts().iter().sum()
    }

    fn counts(&self) -> Vec<usize> {
        self.pipelines
            .iter()
            .map(|p| p.as_ref().map_or(0, Pipeline::num_batches))
            .collect()
    }

    /// The bucket of each batch of `epoch`, in order: shuffled by `(seed, epoch)` for a
    /// training subset, the buckets in their order for a validation one. The same on
    /// every rank.
    pub fn schedule(&self, epoch: u64) -> Vec<usize> {
        buckets::schedule(&self.counts(), self.seed, epoch, self.shuffle)
    }

    /// The batches of `epoch`.
    pub fn epoch(&self, epoch: u64) -> Result<BucketEpoch> {
        self.epoch_from(epoch, 0)
    }

    /// The batches of `epoch` from batch `first_batch` on: exactly those a full epoch
    /// gives from there. `first_batch == num_batches()` gives an empty epoch; beyond it is
    /// an error.
    pub fn epoch_from(&self, epoch: u64, first_batch: usize) -> Result<BucketEpoch> {
        let steps = self.schedule(epoch);
        if first_batch > steps.len() {
            return Err(Error::config(
                "first_batch",
                format!(
                    "batch {first_batch} is past the end of an epoch of {} batches",
                    steps.len()
                ),
            ));
        }
        let mut done = vec![0usize; self.pipelines.len()];
        for &b in &steps[..first_batch] {
            done[b] += 1;
        }
        let mut epochs = Vec::with_capacity(self.pipelines.len());
        for (p, &d) in self.pipelines.iter().zip(&done) {
            epochs.push(match p {
                Some(p) => Some(p.epoch_from(epoch, d)?),
                None => None,
            });
        }
        let progress = Progress {
            seed: self.seed,
            epoch,
            order: self.order,
            global_batch_size: self.global_batch_size,
            sizes: self.progress_sizes(),
        };
        let start = progress.state(&done);
        if let Ok(mut last) = self.last.lock() {
            *last = start;
        }
        Ok(BucketEpoch {
            steps,
            next: first_batch,
            first_batch,
            epochs,
            done,
            progress,
            last: Arc::clone(&self.last),
            finished: false,
        })
    }

    /// Each bucket's global batch size and positions delivered per epoch.
    fn progress_sizes(&self) -> Vec<(u64, u64)> {
        self.pipelines
            .iter()
            .map(|p| {
                p.as_ref().map_or((0, 0), |p| {
                    let s = p.sampler();
                    (s.global_batch_size() as u64, s.epoch_total() as u64)
                })
            })
            .collect()
    }

    /// The state after the last batch handed out (see [`Pipeline::state`]).
    pub fn state(&self) -> ResumeState {
        match self.last.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The rest of the epoch `state` was taken in ([`Batch::state`] of a batch of this
    /// pipeline). Its `samples_consumed` counts the positions of every bucket's order
    /// consumed by all ranks together (padding left out), its `global_batch_size` is the
    /// largest of the buckets', and its `order` fingerprints the bucket sizes and each
    /// bucket's samples, order and global batch size: a state resumes a pipeline with
    /// the same buckets, the same samples in each, and the same global batch sizes.
    pub fn resume(&self, state: &ResumeState) -> Result<BucketEpoch> {
        let checks = [
            (state.version != ResumeState::VERSION).then_some(ResumeError::Version {
                found: state.version,
                expected: ResumeState::VERSION,
            }),
            (state.seed != self.seed).then_some(ResumeError::Seed {
                state: state.seed,
                pipeline: self.seed,
            }),
            (state.order != self.order).then_some(ResumeError::Order {
                state: state.order,
                pipeline: self.order,
            }),
            (state.global_batch_size != self.global_batch_size).then_some(
                ResumeError::GlobalBatchSize {
                    state: state.global_batch_size,
                    pipeline: self.global_batch_size,
                },
            ),
        ];
        if let Some(e) = checks.into_iter().flatten().next() {
            return Err(e.into());
        }
        let steps = self.schedule(state.epoch);
        let sizes = self.progress_sizes();
        let mut done = vec![0usize; sizes.len()];
        let mut consumed = 0u64;
        for k in 0..=steps.len() {
            if consumed == state.samples_consumed {
                return self.epoch_from(state.epoch, k);
            }
            let Some(&b) = steps.get(k) else { break };
            let (g, total) = sizes[b];
            let before = (done[b] as u64).saturating_mul(g).min(total);
            done[b] += 1;
            consumed += (done[b] as u64).saturating_mul(g).min(total) - before;
        }
        Err(ResumeError::Position {
            consumed: state.samples_consumed,
            global_batch_size: self.global_batch_size,
            total: consumed,
        }
        .into())
    }
}

/// What an epoch's states are made of.
#[derive(Debug)]
struct Progress {
    seed: u64,
    epoch: u64,
    order: u64,
    global_batch_size: u64,
    /// Each bucket's global batch size and positions per epoch.
    sizes: Vec<(u64, u64)>,
}

impl Progress {
    /// The state after `done[b]` batches of each bucket `b`.
    fn state(&self, done: &[usize]) -> ResumeState {
        let consumed = self
            .sizes
            .iter()
            .zip(done)
            .map(|(&(g, total), &d)| (d as u64).saturating_mul(g).min(total))
            .sum();
        state(
            self.seed,
            self.epoch,
            consumed,
            self.global_batch_size,
            self.order,
        )
    }
}

/// One epoch of a [`BucketPipeline`]: an iterator of [`Batch`]es, each of one bucket, at
/// its output size ([`Batch::shape`]). A batch's [`Batch::index`] is its step in the
/// epoch, its [`Batch::state`] the state after it. Each bucket's pipeline prepares its
/// batches ahead in the background; dropping the epoch stops them all.
#[derive(Debug)]
pub struct BucketEpoch {
    steps: Vec<usize>,
    next: usize,
    first_batch: usize,
    epochs: Vec<Option<Epoch>>,
    done: Vec<usize>,
    progress: Progress,
    last: Arc<Mutex<ResumeState>>,
    finished: bool,
}

impl BucketEpoch {
    /// Batches in the whole epoch (from its start, not from the first one handed out).
    pub fn num_batches(&self) -> usize {
        self.steps.len()
    }

    /// The first batch this epoch hands out (0 unless it resumed).
    pub fn first_batch(&self) -> usize {
        self.first_batch
    }

    /// The bucket of each batch of the whole epoch.
    pub fn schedule(&self) -> &[usize] {
        &self.steps
    }
}

impl Iterator for BucketEpoch {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.finished {
            return None;
        }
        let Some(&b) = self.steps.get(self.next) else {
            self.finished = true;
            return None;
        };
        let got = self
            .epochs
            .get_mut(b)
            .and_then(Option::as_mut)
            .and_then(Iterator::next);
        match got {
            Some(Ok(mut batch)) => {
                self.done[b] += 1;
                batch.index = self.next;
                batch.state = self.progress.state(&self.done);
                self.next += 1;
                if let Ok(mut last) = self.last.lock() {
                    *last = batch.state.clone();
                }
                Some(Ok(batch))
            }
            Some(Err(e)) => {
                self.finished = true;
                Some(Err(e))
            }
            None => {
                self.finished = true;
                Some(Err(Error::internal(format!(
                    "bucket {b} ran out of batches at step {}",
                    self.next
                ))))
            }
        }
    }
}

//! One epoch: its threads (the planner and the collector here, readers and workers in
//! `worker.rs`) and the consumer's iterator; the `Batch` handle is in `batch.rs`.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, RecvTimeoutError, Sender};

use super::batch::{Batch, BatchBuffers, Replacement, SampleWarning};
use super::cache::Cache;
use super::memory::SlotMemory;
use super::staging::{Staged, StagingRing};
use super::stats::Counters;
use super::worker::{device_replacement, reader, worker, Delivered, Job, Loaded, Msg, Outcome};
use super::worker::{Shared, StandsIn, WorkerState};
use super::{Config, OnError};
use crate::augment::{geometry, mix, SamplePlan};
use crate::backend::device::cache::Reservation;
use crate::backend::device::job::DeviceJob;
use crate::backend::device::sample_work::SampleWork;
use crate::backend::device::{DeviceBatcher, DeviceBuffers, DeviceError};
use crate::error::{Error, PipelineError, Result, SampleError, SampleErrorKind};
use crate::source::{Subset, Targets};

mod collector;

struct Pending {
    images: Option<Arc<SlotMemory>>,
    masks: Option<Arc<SlotMemory>>,
    gpu: Option<Box<dyn DeviceBuffers>>,
    outcomes: Vec<Option<Outcome>>,
    remaining: usize,
}

/// The batches of one epoch, in order. Dropping it mid-epoch stops and joins every
/// thread of the epoch (see the module docs of [`crate::pipeline`]).
pub struct Epoch {
    epoch: u64,
    cfg: Arc<Config>,
    num_batches: usize,
    /// The index of the first batch this iterator yields.
    first_batch: usize,
    /// Batches yielded so far.
    yielded: usize,
    finished: bool,
    free_rx: Receiver<BatchBuffers>,
    cancel: Option<Sender<()>>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<Counters>,
    total: Arc<Counters>,
    pool: Arc<Mutex<Vec<BatchBuffers>>>,
    staging: StagingRing,
    kept_staging: Arc<Mutex<Vec<Staged>>>,
    started: Instant,
    source: Source,
    /// The backend's host work (what it keeps on the device, for the stats).
    work: Arc<dyn SampleWork>,
    /// Under autotune: the window measured since the last decision.
    tuner: Option<super::autotune::Tuner>,
    /// What the epoch's threads share (the readers autotune added are joined from it).
    shared: Arc<Shared>,
}

/// Where the consumer's batches come from.
enum Source {
    /// Host batches: the consumer collects the workers' outcomes itself.
    Inline(Box<Collector>),
    /// Device batches: a collector thread packs, uploads and submits each batch as soon
    /// as its samples are ready, so batch `b + 1` goes to the device while the caller
    /// works on batch `b`; it hands finished batches over this channel.
    Thread {
        rx: Receiver<Result<Batch>>,
        handle: Option<JoinHandle<()>>,
    },
    /// Dropped.
    Gone,
}

/// Turns the workers' outcomes into batches, in order: reorders them, packs the slots of
/// skipped samples out, and (on a device backend) records the batch's device work.
struct Collector {
    epoch: u64,
    cfg: Arc<Config>,
    /// Batches this collector hands out; its batch `i` is the epoch's `first + i`.
    num_batches: usize,
    first: usize,
    /// Positions of the rank's epoch order from here on are padding (repeats).
    repeat_from: usize,
    next: usize,
    /// No batch is left to hand out (all done, or the epoch failed).
    done: bool,
    /// Whether time spent waiting for outcomes is the consumer's input wait.
    counts_wait: bool,
    done_rx: Receiver<Msg>,
    free_tx: Sender<BatchBuffers>,
    pending: HashMap<usize, Pending>,
    stats: Arc<Counters>,
    held: Arc<AtomicUsize>,
    allocated: usize,
    /// What the epoch's threads share: the collector draws replacements for samples the
    /// device rejects from it.
    shared: Arc<Shared>,
    /// Scratch for making those replacements.
    ws: WorkerState,
}

impl std::fmt::Debug for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epoch")
            .field("epoch", &self.epoch)
            .field("num_batches", &self.num_batches)
            .field("finished", &self.finished)
            .finish()
    }
}

pub(crate) struct EpochParts {
    pub staging: Arc<Mutex<Vec<Staged>>>,
    pub workers: Arc<Mutex<Vec<WorkerState>>>,
    pub cfg: Arc<Config>,
    pub subset: Subset,
    pub cache: Option<Arc<Cache>>,
    pub total: Arc<Counters>,
    pub pool: Arc<Mutex<Vec<BatchBuffers>>>,
    /// The batches to make: the epoch's from `first_batch` on.
    pub batches: Vec<Vec<usize>>,
    pub first_batch: usize,
    /// Batches in the whole epoch.
    pub num_batches: usize,
    /// Positions of the rank's order from here on are padding.
    pub repeat_from: usize,
    /// The rank's own samples this epoch (no padding): where replacements come from.
    pub replace_pool: Arc<[usize]>,
    /// Block order: before batch `.0` (of `batches`), the shards in object storage to
    /// hold in memory.
    pub holds: Vec<(usize, Vec<String>)>,
    pub epoch: u64,
}

impl Epoch {
    pub(crate) fn start(p: EpochParts) -> Result<Epoch> {
        let cfg = p.cfg;
        let to_make = p.batches.len();
        let stats = Arc::new(Counters::traced(cfg.trace.clone(), p.epoch));
        let (free_tx, free_rx) = unbounded::<BatchBuffers>();
        let ring = cfg.tune.prefetch().max(1);
        let slots = cfg.tune.staging_slots();
        {
            let mut pool = p.pool.lock().map_err(|_| Error::poisoned("buffer pool"))?;
            for _ in 0..ring {
                let b = match pool.pop() {
                    Some(b) => b,
                    None => BatchBuffers::new(&cfg)?,
                };
                let _ = free_tx.send(b);
            }
        }
        let (cancel_tx, cancel_rx) = bounded::<()>(0);
        let (read_tx, read_rx) = bounded::<Job>(slots);
        let (load_tx, load_rx) = bounded::<Loaded>(slots);
        let (done_tx, done_rx) = unbounded::<Msg>();
        let shared = Arc::new(Shared {
            cfg: Arc::clone(&cfg),
            subset: p.subset,
            cache: p.cache,
            stats: Arc::clone(&stats),
            epoch: p.epoch,
            replace_pool: p.replace_pool,
            staging: {
                let mut kept = p
                    .staging
                    .lock()
                    .map(|mut k| std::mem::take(&mut *k))
                    .unwrap_or_default();
                StagingRing::new(slots, cfg.tune.staging_cap, &mut kept)
            },
            workers_kept: Arc::clone(&p.workers),
            readers_started: AtomicUsize::new(cfg.tune.readers()),
            added: Mutex::new(Vec::new()),
        });
        let mut threads = Vec::new();
        {
            let (cfg, free_rx, cancel_rx, done_tx) = (
                Arc::clone(&cfg),
                free_rx.clone(),
                cancel_rx.clone(),
                done_tx.clone(),
            );
            let batches = p.batches;
            let holds = p.holds;
            threads.push(spawn("stoker-planner".into(), move || {
                planner(
                    &cfg, batches, &holds, &free_rx, &read_tx, &done_tx, &cancel_rx,
                )
            })?);
        }
        let (sh, cancel) = (&shared, &cancel_rx);
        threads.extend(spawn_stage(
            "reader",
            cfg.tune.readers(),
            reader,
            sh,
            &read_rx,
            &load_tx,
            cancel,
        )?);
        drop(load_tx);
        threads.extend(spawn_stage(
            "worker",
            cfg.tune.workers(),
            worker,
            sh,
            &load_rx,
            &done_tx,
            cancel,
        )?);
        drop(done_tx);
        let mut collector = Collector {
            epoch: p.epoch,
            cfg: Arc::clone(&cfg),
            num_batches: to_make,
            first: p.first_batch,
            repeat_from: p.repeat_from,
            next: 0,
            done: to_make == 0,
            counts_wait: true,
            done_rx,
            free_tx,
            pending: HashMap::new(),
            stats: Arc::clone(&stats),
            held: Arc::new(AtomicUsize::new(0)),
            allocated: ring,
            shared: Arc::clone(&shared),
            ws: WorkerState::default(),
        };
        // Where the backend hands out a device batcher, the collector drives it on its
        // own thread.
        let source = if cfg.batcher.is_some() {
            // One batch ready ahead of the caller, the next one being packed.
            let (tx, rx) = bounded::<Result<Batch>>(1);
            collector.counts_wait = false;
            let handle = spawn("stoker-collector".into(), move || loop {
                // A panic here would end the epoch early without a word: it is the epoch's
                // last item instead.
                let r = catch_unwind(AssertUnwindSafe(|| collector.next_batch()));
                let r = match r {
                    Ok(Some(r)) => r,
                    Ok(None) => return,
                    Err(p) => Err(Error::internal(format!(
                        "the collector panicked: {}",
                        crate::error::panic_message(p.as_ref())
                    ))),
                };
                let last = r.is_err();
                if tx.send(r).is_err() || last {
                    return;
                }
            })?;
            Source::Thread {
                rx,
                handle: Some(handle),
            }
        } else {
            Source::Inline(Box::new(collector))
        };
        let tuner = cfg
            .tune
            .auto
            .on
            .then(|| super::autotune::Tuner::new(&stats));
        Ok(Epoch {
            epoch: p.epoch,
            cfg,
            num_batches: p.num_batches,
            first_batch: p.first_batch,
            yielded: 0,
            finished: to_make == 0,
            free_rx,
            cancel: Some(cancel_tx),
            threads,
            stats,
            total: p.total,
            pool: p.pool,
            staging: shared.staging.clone(),
            kept_staging: p.staging,
            started: Instant::now(),
            source,
            work: Arc::clone(&shared.cfg.work),
            tuner,
            shared,
        })
    }

    /// Number of batches in the whole epoch (the same on every rank). An epoch started
    /// with [`Pipeline::epoch_from`](super::Pipeline::epoch_from) yields those from
    /// [`Epoch::first_batch`] on; [`ExactSizeIterator::len`] says how many are left.
    pub fn num_batches(&self) -> usize {
        self.num_batches
    }

    /// The index of the first batch this iterator yields (0 unless resumed).
    pub fn first_batch(&self) -> usize {
        self.first_batch
    }

    /// Statistics of this epoch so far.
    pub fn stats(&self) -> super::Stats {
        let running = (!self.finished).then(|| self.started.elapsed().as_secs_f64());
        let mut s = self.cfg.describe(self.stats.snapshot_at(running));
        s.device_cache_bytes = self.work.kept_bytes();
        s
    }

    /// Under autotune, after a batch: applies the policy to the window since the last
    /// decision (`autotune`): more readers start on their own (`more_readers`), the
    /// staging ring and the batch ring grow here.
    fn autotune(&mut self) {
        let Some(t) = self.tuner.as_mut() else {
            return;
        };
        if self.finished {
            return;
        }
        let moves = t.step(&self.cfg.tune, &self.stats);
        self.staging.grow(moves.staging);
        if moves.prefetch {
            if let Source::Inline(c) = &mut self.source {
                c.lend_buffer();
            }
        }
    }

    fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.stats
                .wall_ns
                .store(self.started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        self.cancel = None;
    }
}

impl Iterator for Epoch {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.finished {
            return None;
        }
        let r = match &mut self.source {
            Source::Inline(c) => {
                let r = c.next_batch();
                if c.done {
                    self.finish();
                }
                r
            }
            Source::Thread { rx, .. } => {
                let t = Instant::now();
                let r = rx.recv().ok();
                let batch = match &r {
                    Some(Ok(b)) => b.index() as u64,
                    _ => self.num_batches as u64,
                };
                self.stats
                    .spent(&self.stats.wait_ns, "wait for batch", t.elapsed(), batch);
                match &r {
                    Some(Ok(b)) if b.index() + 1 < self.num_batches => {}
                    // The last batch, an error, or the collector gone: the epoch is over.
                    _ => self.finish(),
                }
                r
            }
            Source::Gone => None,
        };
        match &r {
            None => self.finish(),
            Some(b) => {
                self.yielded += 1;
                if let Ok(b) = b {
                    self.cfg.progress.set(b.state());
                }
                self.autotune();
            }
        }
        r
    }

    /// Exact while the epoch runs: the batches left. An epoch that fails (an error under
    /// [`OnError::Fail`], a device error) yields that error as its last item and ends early.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.finished {
            0
        } else {
            (self.num_batches - self.first_batch).saturating_sub(self.yielded)
        };
        (left, Some(left))
    }
}

impl ExactSizeIterator for Epoch {}

impl Drop for Epoch {
    fn drop(&mut self) {
        self.finish();
        // Pending batches hold buffers that threads may still write; drop our handles
        // first, then join: every blocking call in the threads also waits on `cancel`.
        // A collector thread stops once its channel is gone or the workers have stopped.
        match std::mem::replace(&mut self.source, Source::Gone) {
            Source::Inline(mut c) => c.pending.clear(),
            Source::Thread { rx, handle } => {
                drop(rx);
                if let Some(h) = handle {
                    if h.join().is_err() {
                        log::error!("the collector thread panicked");
                    }
                }
            }
            Source::Gone => {}
        }
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                log::error!("a pipeline thread panicked");
            }
        }
        // The readers autotune added (a reader may add one until it sees the cancel).
        loop {
            let added: Vec<JoinHandle<()>> = match self.shared.added.lock() {
                Ok(mut v) => v.drain(..).collect(),
                Err(_) => Vec::new(),
            };
            if added.is_empty() {
                break;
            }
            for t in added {
                if t.join().is_err() {
                    log::error!("a pipeline thread panicked");
                }
            }
        }
        // Keep the staging buffers (and their capacity) for the next epoch. Those still in
        // flight when an epoch is cut short are freed; the next ring makes new ones.
        if let Ok(mut kept) = self.kept_staging.lock() {
            kept.extend(self.staging.drain());
        }
        if let Ok(mut pool) = self.pool.lock() {
            for b in self.free_rx.try_iter() {
                if pool.len() < self.cfg.tune.prefetch().max(1) {
                    pool.push(b);
                }
            }
        }
        self.stats.merge_into(&self.total);
        if let Some(t) = &self.cfg.trace {
            if let Err(e) = t.write() {
                log::warn!("{e}");
            }
        }
        // What the epoch's threads freed goes back to the system (where stoker tunes the
        // allocator): memory stays flat over epochs on images of mixed sizes.
        super::heap::release();
    }
}

/// Starts a thread named `name` running `f`.
fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|source| Error::Pipeline(PipelineError::Spawn { name, source }))
}

/// A stage's thread: its shared state, its input, its output, the cancel channel.
type StageFn<I, O> = fn(&Arc<Shared>, &Receiver<I>, &Sender<O>, &Receiver<()>);

/// Starts the `n` threads `stoker-{name}-{i}` of a stage between two channels: each runs
/// `run` on its own handles on `shared`, `rx`, `tx` and `cancel`.
fn spawn_stage<I: Send + 'static, O: Send + 'static>(
    name: &str,
    n: usize,
    run: StageFn<I, O>,
    shared: &Arc<Shared>,
    rx: &Receiver<I>,
    tx: &Sender<O>,
    cancel: &Receiver<()>,
) -> Result<Vec<JoinHandle<()>>> {
    (0..n)
        .map(|i| {
            let (sh, rx, tx, cancel) = (Arc::clone(shared), rx.clone(), tx.clone(), cancel.clone());
            spawn(format!("stoker-{name}-{i}"), move || {
                run(&sh, &rx, &tx, &cancel)
            })
        })
        .collect()
}

fn planner(
    cfg: &Config,
    batches: Vec<Vec<usize>>,
    holds: &[(usize, Vec<String>)],
    free_rx: &Receiver<BatchBuffers>,
    read_tx: &Sender<Job>,
    done_tx: &Sender<Msg>,
    cancel: &Receiver<()>,
) {
    for (b, indices) in batches.into_iter().enumerate() {
        // Block order: the shards this batch reads (and the next window's) held in
        // memory, fetched in the background; a shard that cannot be held is read by range.
        if let Some((_, urls)) = holds.iter().find(|h| h.0 == b) {
            if let Err(e) = crate::source::remote::hold(urls) {
                log::warn!("block order: shards not held in memory ({e}); read by range");
            }
        }
        let bufs = select! {
            recv(free_rx) -> m => match m { Ok(x) => x, Err(_) => return },
            recv(cancel) -> _ => return,
        };
        let n = indices.len();
        let Ok(images) = SlotMemory::share(bufs.images, n, cfg.host_image_bytes()) else {
            log::error!("internal: batch buffer too small");
            return;
        };
        let masks = match bufs.masks {
            Some(m) => match SlotMemory::share(m, n, cfg.host_mask_bytes()) {
                Ok(m) => Some(m),
                Err(_) => {
                    log::error!("internal: mask buffer too small");
                    return;
                }
            },
            None => None,
        };
        let jobs: Vec<Job> = indices
            .into_iter()
            .enumerate()
            .map(|(slot, sample)| Job {
                batch: b,
                slot,
                sample,
                images: Arc::clone(&images),
                masks: masks.as_ref().map(Arc::clone),
            })
            .collect();
        if done_tx
            .send(Msg::Start {
                batch: b,
                images,
                masks,
                gpu: bufs.gpu,
                len: n,
            })
            .is_err()
        {
            return;
        }
        for job in jobs {
            select! {
                send(read_tx, job) -> r => if r.is_err() { return },
                recv(cancel) -> _ => return,
            }
        }
    }
}

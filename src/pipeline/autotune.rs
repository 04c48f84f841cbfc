//! Autotune: the pipeline's readers, workers and prefetch chosen when it is built and
//! adjusted while it runs, from the stages' measured rates and waits, within a memory
//! budget ([`PipelineBuilder::autotune`](super::PipelineBuilder::autotune)).
//!
//! Only the speed changes: what an epoch delivers (which samples, in which order, their
//! pixels, their errors) is keyed by `(seed, epoch, sample id)` and reassembled in order
//! by the collector, whatever the threads.
//!
//! # Policy
//!
//! - **Start**: readers 2 (at most the cores) for files on a local file
//!   system, 32 for object storage; workers the available cores; prefetch
//!   2, or 1 where two batch buffers do not fit the budget.
//! - **After each batch** (a window of at least [`MIN_WINDOW`] and a batch of samples),
//!   from the window's measurements: the workers' time waiting for bytes (starved), the
//!   readers' busy time (reading, waiting on storage included), the mean time of a read
//!   (its latency) and of a worker's sample, and the consumer's wait.
//!   - *Readers*: when the workers wait for bytes more than [`STARVED`] of their time and
//!     the readers are busy more than [`READERS_BUSY`] of theirs, readers rise to the
//!     requests in flight that keep the workers fed (Little's law: the workers' rate
//!     times the read latency, with a quarter to spare), at least one more, at most the
//!     cap: the cores while a read takes under [`LATENT_READ`] (files in the page cache or
//!     on a local disk: more threads than cores only contend), [`MAX_READERS`] when reads
//!     wait on storage (object storage, a network file system), and never more than the
//!     samples the ring of batches can have in flight (`prefetch x batch size`). Reader
//!     threads are added at once, mid-epoch, on the same queue; they are never taken
//!     away.
//!   - *Prefetch*: when the consumer waited more than [`CONSUMER_WAITS`] of the window
//!     while the workers were not saturated (they waited for bytes too), one more batch
//!     buffer, mid-epoch, while `prefetch x batch bytes` plus the staging buffers stay
//!     within the budget, up to [`MAX_PREFETCH`]. On a device backend the ring of batch
//!     buffers is on the device, fixed when the pipeline is built: prefetch stays.
//!   - *Workers*: the available cores from the start (more would only contend); they do
//!     not change.
//!   - *Did it help*: the window after a move measures the workers' rate again; when
//!     it did not rise by [`MIN_GAIN`], what moved has settled and does not move again
//!     (for the rest of the pipeline's life: later epochs start from it). Reads that
//!     slow down as more of them are in flight (a store that is itself the bottleneck: a
//!     server short of CPU, a throttled bucket) lengthen the measured latency, and
//!     Little's law alone would then ask for ever more readers; a raise that brings
//!     nothing stops them.
//! - The staging ring grows with the readers (each reader in flight holds a buffer):
//!   `readers + 2 x workers` slots, within the budget.
//! - What an epoch settled on is where the next one starts.
//!
//! A value the caller set ([`readers`](super::PipelineBuilder::readers),
//! [`workers`](super::PipelineBuilder::workers), [`prefetch`](super::PipelineBuilder::prefetch))
//! is kept as given.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::stats::Counters;

/// Readers to start with for files on a local file system (at most the cores).
pub(crate) const LOCAL_READERS: usize = 2;
/// Readers for a subset in object storage, where each read waits tens of milliseconds on a
/// request (the threads wait, they do not compute): 32 requests of 20 ms, 1600 samples/s.
pub(crate) const REMOTE_READERS: usize = 32;
/// The most reader threads autotune starts, when reads wait on storage.
pub const MAX_READERS: usize = 256;
/// The most batches autotune prepares ahead.
pub const MAX_PREFETCH: usize = 8;
/// A mean read longer than this waits on storage rather than copying from memory.
pub const LATENT_READ: Duration = Duration::from_millis(2);
/// The share of their time the workers wait for bytes above which readers are added.
pub const STARVED: f64 = 0.2;
/// The share of their time the readers must be busy for more of them to help.
pub const READERS_BUSY: f64 = 0.5;
/// The share of the window the consumer waits above which prefetch may grow.
pub const CONSUMER_WAITS: f64 = 0.05;
/// The shortest window measured before a decision.
pub const MIN_WINDOW: Duration = Duration::from_millis(50);
/// The least rise of the workers' rate a move must bring for the same setting to move
/// again.
pub const MIN_GAIN: f64 = 0.05;

/// Which settings autotune moves (those the caller left unset).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Auto {
    pub on: bool,
    pub readers: bool,
    pub workers: bool,
    pub prefetch: bool,
}

/// The pipeline's thread counts and prefetch: fixed, or autotuned and then moved while
/// the pipeline runs (shared by every thread of every epoch).
#[derive(Debug)]
pub(crate) struct Tuned {
    readers: AtomicUsize,
    workers: usize,
    prefetch: AtomicUsize,
    staging: AtomicUsize,
    /// Whether a raise of the readers brought no gain (they stay).
    readers_settled: AtomicBool,
    /// Whether a raise of the prefetch brought no gain (it stays).
    prefetch_settled: AtomicBool,
    /// Readers, workers and prefetch when the pipeline was built.
    pub initial: (usize, usize, usize),
    pub auto: Auto,
    /// The most bytes the batch ring and the staging buffers may hold, for autotune.
    pub budget: u64,
    /// Host bytes of one batch buffer (images and masks; 0 when batches live on a device).
    pub batch_bytes: u64,
    /// Whether the batch ring may grow mid-epoch (host batches).
    pub host_ring: bool,
    pub batch_size: usize,
    pub cores: usize,
    /// The most staging slots any epoch may have (the capacity of its ring).
    pub staging_cap: usize,
}

/// What [`Tuned::new`] needs.
pub(crate) struct Start {
    pub readers: usize,
    pub workers: usize,
    pub prefetch: usize,
    pub staging: usize,
    /// Whether the caller set the staging slots (kept as given).
    pub staging_fixed: bool,
    pub auto: Auto,
    pub budget: u64,
    pub batch_bytes: u64,
    pub host_ring: bool,
    pub batch_size: usize,
}

impl Tuned {
    pub(crate) fn new(s: Start) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let staging_cap = match s.auto.readers && !s.staging_fixed {
            true => s.staging.max(MAX_READERS + 2 * s.workers),
            false => s.staging,
        };
        Tuned {
            readers: AtomicUsize::new(s.readers),
            workers: s.workers,
            prefetch: AtomicUsize::new(s.prefetch),
            staging: AtomicUsize::new(s.staging),
            readers_settled: AtomicBool::new(false),
            prefetch_settled: AtomicBool::new(false),
            initial: (s.readers, s.workers, s.prefetch),
            auto: s.auto,
            budget: s.budget,
            batch_bytes: s.batch_bytes,
            host_ring: s.host_ring,
            batch_size: s.batch_size,
            cores,
            staging_cap,
        }
    }

    pub(crate) fn readers(&self) -> usize {
        self.readers.load(Ordering::Acquire)
    }

    /// Sets the readers (after a thread could not be started: those there are).
    pub(crate) fn set_readers(&self, n: usize) {
        self.readers.store(n.max(1), Ordering::Release);
    }

    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    pub(crate) fn prefetch(&self) -> usize {
        self.prefetch.load(Ordering::Acquire)
    }

    pub(crate) fn staging_slots(&self) -> usize {
        self.staging.load(Ordering::Acquire)
    }

    /// The names of the settings autotune chose, for the stats.
    pub(crate) fn autotuned(&self) -> Vec<String> {
        let a = self.auto;
        [
            ("readers", a.readers),
            ("workers", a.workers),
            ("prefetch", a.prefetch),
        ]
        .into_iter()
        .filter(|&(_, on)| a.on && on)
        .map(|(n, _)| n.to_string())
        .collect()
    }

    /// Bytes the ring of `prefetch` batch buffers and `staging` buffers of `file` bytes
    /// hold.
    fn in_flight(&self, prefetch: usize, staging: usize, file: u64) -> u64 {
        (prefetch as u64)
            .saturating_mul(self.batch_bytes)
            .saturating_add((staging as u64).saturating_mul(file))
    }
}

/// The prefetch autotune starts with: 2, or 1 where two batch buffers exceed the budget.
pub(crate) fn initial_prefetch(budget: u64, batch_bytes: u64) -> usize {
    match batch_bytes.saturating_mul(2) > budget {
        true => 1,
        false => 2,
    }
}

/// The readers autotune starts with: [`REMOTE_READERS`] for object storage, else
/// [`LOCAL_READERS`] (at most the cores).
pub(crate) fn initial_readers(remote: bool, cores: usize) -> usize {
    match remote {
        true => REMOTE_READERS,
        false => LOCAL_READERS.min(cores).max(1),
    }
}

/// The counters a decision reads, at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    read_ns: u64,
    reads: u64,
    work_ns: u64,
    worked: u64,
    starved_ns: u64,
    wait_ns: u64,
}

impl Mark {
    fn of(c: &Counters) -> Self {
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        Mark {
            read_ns: l(&c.read_ns),
            reads: l(&c.reads),
            work_ns: l(&c.decode_ns) + l(&c.augment_ns),
            worked: l(&c.worked),
            starved_ns: l(&c.starved_ns),
            wait_ns: l(&c.wait_ns),
        }
    }
}

/// One window's measurements.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    /// The workers' share of their time spent waiting for bytes.
    pub starved: f64,
    /// The readers' share of their time spent reading.
    pub readers_busy: f64,
    /// Mean seconds of a read.
    pub latency: f64,
    /// Mean seconds of a worker's sample.
    pub work: f64,
    /// The consumer's share of the window spent waiting.
    pub consumer_wait: f64,
}

/// What a decision changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Moves {
    /// The new reader count.
    pub readers: Option<usize>,
    /// One more batch buffer.
    pub prefetch: bool,
    /// Staging slots to add.
    pub staging: usize,
}

/// The policy (see the module docs): what to change after a window with `m`, given the
/// settings now and the largest file read so far.
pub(crate) fn decide(t: &Tuned, m: &Measured, largest_file: u64) -> Moves {
    let mut out = Moves::default();
    let (readers, workers, prefetch) = (t.readers(), t.workers(), t.prefetch());
    let staging = t.staging_slots();
    let fits = |p: usize, s: usize| t.in_flight(p, s, largest_file) <= t.budget;
    let settled = |b: &AtomicBool| b.load(Ordering::Acquire);
    if t.auto.readers
        && !settled(&t.readers_settled)
        && m.starved > STARVED
        && m.readers_busy > READERS_BUSY
    {
        let cap = match m.latency >= LATENT_READ.as_secs_f64() {
            true => MAX_READERS,
            false => t.cores,
        };
        // No more readers than samples can be in flight (the batches of the ring).
        let cap = cap.min(prefetch.saturating_mul(t.batch_size).max(1));
        let rate = workers as f64 / m.work.max(1e-6);
        let want = (1.25 * rate * m.latency).ceil().min(MAX_READERS as f64) as usize;
        let mut next = want.max(readers + 1).min(cap);
        // Each reader in flight holds a staging buffer: the ring grows with them, within
        // the budget and its capacity.
        let mut slots = staging.max(next + 2 * workers).min(t.staging_cap);
        while next > readers && slots > staging && !fits(prefetch, slots) {
            next -= 1;
            slots = staging.max(next + 2 * workers).min(t.staging_cap);
        }
        if next > readers {
            out.readers = Some(next);
            out.staging = slots - staging;
        }
    }
    let slots = staging + out.staging;
    if t.auto.prefetch
        && !settled(&t.prefetch_settled)
        && t.host_ring
        && m.consumer_wait > CONSUMER_WAITS
        && m.starved > STARVED
        && prefetch < MAX_PREFETCH
        && fits(prefetch + 1, slots)
    {
        out.prefetch = true;
    }
    out
}

/// An epoch's autotuner: measures windows between batches and applies the policy.
#[derive(Debug)]
pub(crate) struct Tuner {
    at: Instant,
    mark: Mark,
    /// The last move and the workers' rate (samples/s) in the window that asked for it.
    probe: Option<(Moves, f64)>,
}

impl Tuner {
    pub(crate) fn new(c: &Counters) -> Self {
        Tuner {
            at: Instant::now(),
            mark: Mark::of(c),
            probe: None,
        }
    }

    /// After a batch: the moves the window since the last decision asks for (and a new
    /// window), or none while the window is short.
    pub(crate) fn step(&mut self, t: &Tuned, c: &Counters) -> Moves {
        let dt = self.at.elapsed();
        let now = Mark::of(c);
        let worked = now.worked.saturating_sub(self.mark.worked);
        if dt < MIN_WINDOW || worked < t.batch_size.max(1) as u64 {
            return Moves::default();
        }
        let secs = dt.as_secs_f64();
        let d = |a: u64, b: u64| a.saturating_sub(b) as f64 / 1e9;
        let reads = now.reads.saturating_sub(self.mark.reads);
        let m = Measured {
            starved: d(now.starved_ns, self.mark.starved_ns) / (secs * t.workers() as f64),
            readers_busy: d(now.read_ns, self.mark.read_ns) / (secs * t.readers() as f64),
            latency: match reads {
                0 => 0.0,
                n => d(now.read_ns, self.mark.read_ns) / n as f64,
            },
            work: d(now.work_ns, self.mark.work_ns) / worked as f64,
            consumer_wait: d(now.wait_ns, self.mark.wait_ns) / secs,
        };
        self.at = Instant::now();
        self.mark = now;
        // The window after a move: a setting whose move brought no gain settles.
        let rate = worked as f64 / secs;
        if let Some((moved, before)) = self.probe.take() {
            if rate < before * (1.0 + MIN_GAIN) {
                log::debug!("autotune: {moved:?} took {before:.0} to {rate:.0} samples/s: settled");
                if moved.readers.is_some() {
                    t.readers_settled.store(true, Ordering::Release);
                }
                if moved.prefetch {
                    t.prefetch_settled.store(true, Ordering::Release);
                }
            }
        }
        let largest = c.largest_file.load(Ordering::Relaxed) as u64;
        let moves = decide(t, &m, largest);
        if moves != Moves::default() {
            log::debug!("autotune: {m:?} -> {moves:?}");
            self.probe = Some((moves, rate));
        }
        if let Some(r) = moves.readers {
            t.readers.store(r, Ordering::Release);
        }
        if moves.staging > 0 {
            t.staging.fetch_add(moves.staging, Ordering::AcqRel);
        }
        if moves.prefetch {
            t.prefetch.fetch_add(1, Ordering::AcqRel);
        }
        moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn tuned(readers: usize, workers: usize, batch_size: usize) -> Tuned {
        Tuned::new(Start {
            readers,
            workers,
            prefetch: 2,
            staging: readers + 2 * workers,
            staging_fixed: false,
            auto: Auto {
                on: true,
                readers: true,
                workers: true,
                prefetch: true,
            },
            budget: u64::MAX,
            batch_bytes: 1 << 20,
            host_ring: true,
            batch_size,
        })
    }

    /// One window of a store that serves `rate` samples/s whatever the readers: each
    /// read takes `readers / rate` seconds, the workers wait for bytes most of the time,
    /// the readers are always busy and the consumer waits.
    fn window(t: &Tuned, c: &Counters, tuner: &mut Tuner, rate: f64) -> Moves {
        std::thread::sleep(MIN_WINDOW);
        let secs = tuner.at.elapsed().as_secs_f64();
        let n = (rate * secs) as u64;
        let add = |a: &AtomicU64, v: f64| a.fetch_add(v as u64, Ordering::Relaxed);
        add(&c.reads, n as f64);
        add(&c.read_ns, 1e9 * secs * t.readers() as f64);
        c.worked.fetch_add(n, Ordering::Relaxed);
        add(&c.decode_ns, 1e9 * secs * t.workers() as f64 * 0.1);
        add(&c.starved_ns, 1e9 * secs * t.workers() as f64 * 0.9);
        add(&c.wait_ns, 1e9 * secs * 0.5);
        tuner.step(t, c)
    }

    #[test]
    fn a_raise_that_brings_nothing_settles() {
        // Batches of 16: a window of 50 ms at 1000 samples/s is long enough to decide.
        let (t, c) = (tuned(8, 2, 16), Counters::default());
        let mut tuner = Tuner::new(&c);
        // A store that serves 1000 samples/s at most: the latency grows with the readers.
        let first = window(&t, &c, &mut tuner, 1000.0);
        let raised = first
            .readers
            .expect("starved workers and busy readers raise");
        assert!(raised > 8, "{first:?}");
        assert!(first.prefetch, "{first:?}");
        // The same rate after the raise: neither moves again, however long it starves.
        for _ in 0..3 {
            assert_eq!(window(&t, &c, &mut tuner, 1000.0), Moves::default());
        }
        assert_eq!(t.readers(), raised);
        assert_eq!(t.prefetch(), 3);
        // A fresh tuner (the next epoch) keeps what settled.
        let mut next = Tuner::new(&c);
        assert_eq!(window(&t, &c, &mut next, 1000.0), Moves::default());
    }

    #[test]
    fn a_raise_that_helps_is_followed_by_another() {
        let (t, c) = (tuned(8, 2, 16), Counters::default());
        let mut tuner = Tuner::new(&c);
        // A store whose reads take 20 ms whatever the readers: the rate follows them.
        let mut moves = 0;
        for _ in 0..4 {
            let rate = t.readers() as f64 / 0.02;
            if window(&t, &c, &mut tuner, rate).readers.is_some() {
                moves += 1;
            }
        }
        assert!(
            moves >= 2,
            "readers moved {moves} times, now {}",
            t.readers()
        );
    }
}

//! `Pipeline`, `Epoch` and `Stats`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::augment::Augment;
use crate::batch::Batch;
use crate::data::{Dataset, Subset};
use crate::errors::{config_err, sample_error_object, IntoPy};
use crate::owner::BatchOwner;
use stoker::source::Role;

/// How often a wait for a batch looks for a signal (Ctrl-C) to deliver.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// A configured pipeline over one subset: reads, decodes and augments batches in
/// background threads (never forked processes) while the caller trains. Call
/// `epoch(e)` once per epoch and iterate it.
///
/// `Pipeline(data, *, ...)` builds one over `data` (a `Subset` from a split, or a
/// `Dataset`, taken whole), with the GIL released while it builds (a GPU backend
/// compiles its kernels). The keyword arguments:
///
/// - `augment`: an `Augment` (none: the decoded image as it is).
/// - `batch_size` (32), `seed` (0): the shuffle, the weighted draws and every random
///   choice of the augmentation are keyed by `seed`, the epoch and the sample's id.
/// - `backend`: `"auto"` (CUDA, else wgpu, else CPU, logged), `"cpu"`, `"cuda"`,
///   `"wgpu"`; `device`: the CUDA device ordinal (default 0).
/// - `prefetch`, `readers`, `workers`: batches in flight, reader and worker threads.
/// - `on_error`: what a sample that cannot be delivered does: `"skip"` (default: its slot
///   is left out of the batch and reported in `batch.errors`), `"replace"` (reported, and
///   another sample delivered in its slot), `"fail"` (raises `SampleError`).
/// - `rank`, `world_size`: this process's shard for data-parallel training (every rank
///   the same number of batches); `None` reads `RANK`/`WORLD_SIZE` (torchrun) or SLURM's
///   variables when set. `drop_last`: drop the last partial batch of each epoch.
/// - `shuffle`: `None` (default) shuffles a training subset (and a `Dataset`) each epoch
///   and reads a validation subset in its fixed order; `False` reads any data in its
///   fixed order, `data.ids`, every epoch the same; `True` shuffles any data each epoch.
/// - `weights`: weighted sampling, one weight per sample of `data`, in the order of
///   `data.ids` (finite, >= 0, not all 0): each epoch is `num_samples` draws (default
///   `len(data)`), sample `i` drawn with probability `weights[i] / sum(weights)`, with or
///   without `replacement` (default with), as PyTorch's `WeightedRandomSampler`; a weight
///   of 0 is never drawn. `class_balanced=True`: the same with each sample weighted by
///   one over its class's count, so each class is drawn equally often (a sample without
///   a label never). Both draw training epochs: not with `shuffle=False` or a validation
///   subset (give `shuffle=True` to draw from one).
/// - `block_order`, `cache_bytes`, `memory_limit`, `strict_decode`, `max_pixels`,
///   `max_bytes`, `allow_software_gpu`, `hardware_decode`, `hardware_share`: as the
///   Rust `PipelineBuilder`'s settings of those names.
/// - `trace`: a path for a Chrome trace of the stages (Perfetto opens it), rewritten at
///   the end of every epoch; off by default.
#[pyclass(module = "stoker", frozen)]
pub struct Pipeline {
    inner: Arc<stoker::Pipeline>,
    /// Batches handed out and not yet freed (by the batch and every tensor made from it).
    live: Arc<AtomicUsize>,
    /// The epochs started, to close with the pipeline.
    epochs: Mutex<Vec<Weak<Shared>>>,
}

fn parse<T: std::str::FromStr<Err = stoker::Error>>(s: &str) -> PyResult<T> {
    s.parse::<T>().py_err()
}

/// The `#[pymethods]` of a class that is its own context manager, whose exit calls its
/// `close`: `__enter__` and `__exit__`, then the class's own methods.
macro_rules! closing_pymethods {
    ($ty:ident { $($own:tt)* }) => {
        #[pymethods]
        impl $ty {
            fn __enter__(slf: Py<Self>) -> Py<Self> {
                slf
            }

            #[pyo3(signature = (*_args))]
            fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
                self.close(py);
                false
            }

            $($own)*
        }
    };
}

closing_pymethods!(Pipeline {
    /// Builds a pipeline over `data` (see the class's documentation).
    #[new]
    #[pyo3(signature = (
        data, *, augment=None, batch_size=32, seed=0, backend="auto", device=None,
        prefetch=None, readers=None, workers=None, on_error="skip", rank=None,
        world_size=None, drop_last=false, block_order=None, cache_bytes=None,
        memory_limit=None, strict_decode=None, max_pixels=None, max_bytes=None,
        allow_software_gpu=false, hardware_decode=None, hardware_share=None,
        shuffle=None, weights=None, class_balanced=false, num_samples=None,
        replacement=true, trace=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        augment: Option<PyRef<'_, Augment>>,
        batch_size: usize,
        seed: u64,
        backend: &str,
        device: Option<usize>,
        prefetch: Option<usize>,
        readers: Option<usize>,
        workers: Option<usize>,
        on_error: &str,
        rank: Option<usize>,
        world_size: Option<usize>,
        drop_last: bool,
        block_order: Option<usize>,
        cache_bytes: Option<u64>,
        memory_limit: Option<u64>,
        strict_decode: Option<bool>,
        max_pixels: Option<u64>,
        max_bytes: Option<u64>,
        allow_software_gpu: bool,
        hardware_decode: Option<&str>,
        hardware_share: Option<f32>,
        shuffle: Option<bool>,
        weights: Option<Vec<f64>>,
        class_balanced: bool,
        num_samples: Option<usize>,
        replacement: bool,
        trace: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let subset = if let Ok(s) = data.cast::<Subset>() {
            s.get().inner.clone()
        } else if let Ok(d) = data.cast::<Dataset>() {
            d.get().inner.clone().all()
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "Pipeline takes a stoker.Subset (split.train, split.val) or a stoker.Dataset, not {}",
                data.get_type().name()?
            )));
        };
        let subset = match shuffle {
            Some(true) => subset.with_role(Role::Train),
            Some(false) => subset.with_role(Role::Validation),
            None => subset,
        };
        let draws = Draws {
            weights,
            class_balanced,
            num_samples,
            replacement,
        };
        let kind: stoker::BackendKind = parse(backend)?;
        let mut b = draws.apply(stoker::Pipeline::builder(subset.clone()), &subset)?
            .batch_size(batch_size)
            .seed(seed)
            .on_error(parse(on_error)?)
            .drop_last(drop_last)
            .allow_software_gpu(allow_software_gpu)
            .backend(kind);
        if let Some(a) = augment {
            b = b.augment(a.inner.clone());
        }
        b = opt(b, prefetch, stoker::PipelineBuilder::prefetch);
        b = opt(b, readers, stoker::PipelineBuilder::readers);
        b = opt(b, workers, stoker::PipelineBuilder::workers);
        match (rank, world_size) {
            (Some(r), Some(w)) => b = b.shard(r, w),
            (None, None) => {
                let env = |k: &str| std::env::var_os(k).is_some();
                if (env("RANK") && env("WORLD_SIZE"))
                    || (env("SLURM_PROCID") && env("SLURM_NTASKS"))
                {
                    b = b.shard_from_env();
                }
            }
            _ => {
                return Err(config_err(
                    "rank",
                    "give rank and world_size together (or neither, to read the launcher's environment)",
                ))
            }
        }
        b = opt(b, block_order, stoker::PipelineBuilder::block_order);
        if let Some(path) = trace {
            b = b.trace(path);
        }
        b = opt(b, cache_bytes, stoker::PipelineBuilder::cache_bytes);
        b = opt(b, memory_limit, stoker::PipelineBuilder::memory_limit);
        b = opt(b, strict_decode, stoker::PipelineBuilder::strict_decode);
        if max_pixels.is_some() || max_bytes.is_some() {
            let mut l = stoker::Limits::default();
            if let Some(v) = max_pixels {
                l.max_pixels = v;
            }
            if let Some(v) = max_bytes {
                l.max_bytes = v;
            }
            b = b.limits(l);
        }
        if let Some(h) = hardware_decode {
            b = b.hardware_decode(parse(h)?);
        }
        b = opt(b, hardware_share, stoker::PipelineBuilder::hardware_share);
        if let Some(ordinal) = device {
            b = with_device(b, kind, ordinal)?;
        }
        let inner = py.detach(move || b.build()).py_err()?;
        Ok(Pipeline {
            inner: Arc::new(inner),
            live: Arc::new(AtomicUsize::new(0)),
            epochs: Mutex::new(Vec::new()),
        })
    }

    /// The batches of `epoch`: an iterator (and a context manager that stops the epoch's
    /// threads on exit). Each epoch is a full permutation from `(seed, epoch)`.
    fn epoch(&self, epoch: u64) -> PyResult<Epoch> {
        self.epoch_from(epoch, 0)
    }

    /// The batches of `epoch` from batch `first_batch` on: exactly those a full epoch
    /// gives from there, without reading the ones before (resume a checkpoint after batch
    /// `i` with `epoch_from(e, i + 1)`).
    fn epoch_from(&self, epoch: u64, first_batch: usize) -> PyResult<Epoch> {
        self.wrap(self.inner.epoch_from(epoch, first_batch).py_err()?)
    }

    /// Where the job stands, a small dict: the state after the last batch any epoch of
    /// this pipeline handed out (or the start of the epoch last started, before it hands
    /// one out). Batches are prepared ahead, so for a checkpoint prefer `batch.state()`
    /// of the last batch trained on.
    fn state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::state::to_dict(py, &self.inner.state())
    }

    /// The rest of the epoch a saved `state` (`batch.state()`, `pipeline.state()`) was
    /// taken in: the batches after it, every rank taking its share, on any world size
    /// with the same `batch_size * world_size`. A state taken after an epoch's last
    /// batch gives an empty epoch (go on with `epoch(e + 1)`). Raises `ResumeError`
    /// (its `reason` says which) for a state of another seed, dataset, order, global
    /// batch size or format version, or something that is not a state.
    fn resume(&self, state: &Bound<'_, PyAny>) -> PyResult<Epoch> {
        let state = crate::state::from_dict(state)?;
        self.wrap(self.inner.resume(&state).py_err()?)
    }

    /// Batches per epoch (this rank's).
    fn __len__(&self) -> usize {
        self.inner.num_batches()
    }

    /// Batches per epoch (this rank's).
    #[getter]
    fn num_batches(&self) -> usize {
        self.inner.num_batches()
    }

    /// The backend running the batches: `"cpu"`, `"cuda"` or `"wgpu"`.
    #[getter]
    fn backend(&self) -> String {
        self.inner.backend().kind().to_string()
    }

    /// Why that backend was chosen (and the others passed over).
    #[getter]
    fn backend_reason(&self) -> String {
        self.inner.backend_reason().to_string()
    }

    /// Reader threads.
    #[getter]
    fn readers(&self) -> usize {
        self.inner.readers()
    }

    /// Batches handed out and not yet returned to the ring: a `Batch` or any tensor made
    /// from it keeps its batch out.
    #[getter]
    fn batches_held(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Bytes of the batch ring (`prefetch` batches), fixed by the configuration.
    #[getter]
    fn memory_in_flight(&self) -> usize {
        self.inner.memory_in_flight()
    }

    /// Statistics over every finished epoch.
    fn stats(&self) -> Stats {
        Stats::from(self.inner.stats())
    }

    /// Waits until the device has finished every batch handed out (no-op on the CPU).
    fn wait_device(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.wait_device()).py_err()
    }

    /// Stops the threads of every epoch this pipeline started.
    fn close(&self, py: Python<'_>) {
        let epochs: Vec<_> = match self.epochs.lock() {
            Ok(mut v) => v.drain(..).filter_map(|w| w.upgrade()).collect(),
            Err(_) => Vec::new(),
        };
        for e in epochs {
            close_state(py, &e);
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "stoker.Pipeline({} batches, backend={})",
            self.inner.num_batches(),
            self.backend()
        )
    }
});

impl Pipeline {
    /// The Python iterator over a started epoch, closed with the pipeline.
    fn wrap(&self, e: stoker::Epoch) -> PyResult<Epoch> {
        let len = e.num_batches().saturating_sub(e.first_batch());
        let shared = Arc::new(Shared {
            state: Mutex::new(Some(Running::start(e)?)),
            closing: AtomicBool::new(false),
        });
        if let Ok(mut v) = self.epochs.lock() {
            v.retain(|w| w.strong_count() > 0);
            v.push(Arc::downgrade(&shared));
        }
        Ok(Epoch {
            shared,
            live: Arc::clone(&self.live),
            len,
            stats: Mutex::new(None),
            ended: AtomicBool::new(false),
        })
    }
}

/// Weighted sampling as `Pipeline(...)` was given it.
struct Draws {
    weights: Option<Vec<f64>>,
    class_balanced: bool,
    num_samples: Option<usize>,
    replacement: bool,
}

impl Draws {
    /// The builder set to draw each epoch as asked, `subset` being the data it reads.
    fn apply(
        self,
        b: stoker::PipelineBuilder,
        subset: &stoker::Subset,
    ) -> PyResult<stoker::PipelineBuilder> {
        let weighted = self.weights.is_some() || self.class_balanced;
        if !weighted {
            if self.num_samples.is_some() || !self.replacement {
                return Err(config_err(
                    "num_samples",
                    "num_samples and replacement are settings of weighted sampling: give \
                     weights or class_balanced=True",
                ));
            }
            return Ok(b);
        }
        if subset.role() != Role::Train {
            return Err(config_err(
                "weights",
                "weighted sampling draws a shuffled training epoch: not with shuffle=False \
                 or a validation subset (give shuffle=True to draw from one)",
            ));
        }
        match self.weights {
            Some(_) if self.class_balanced => Err(config_err(
                "weights",
                "give weights or class_balanced=True, not both",
            )),
            Some(w) if w.len() != subset.len() => Err(config_err(
                "weights",
                format!(
                    "{} weights for {} samples: give one per sample, in the order of data.ids",
                    w.len(),
                    subset.len()
                ),
            )),
            Some(w) => {
                let by_id: HashMap<u64, f64> =
                    subset.samples().iter().map(|s| s.id).zip(w).collect();
                Ok(b.weighted_by(
                    move |s| by_id.get(&s.id).copied().unwrap_or(0.0),
                    self.num_samples,
                    self.replacement,
                ))
            }
            None => Ok(b.class_balanced(self.num_samples, self.replacement)),
        }
    }
}

/// `set(b, v)` when a value was given, `b` as it is otherwise.
fn opt<T>(
    b: stoker::PipelineBuilder,
    value: Option<T>,
    set: impl FnOnce(stoker::PipelineBuilder, T) -> stoker::PipelineBuilder,
) -> stoker::PipelineBuilder {
    match value {
        Some(v) => set(b, v),
        None => b,
    }
}

/// The builder set to run on CUDA device `ordinal`.
#[cfg(feature = "cuda")]
fn with_device(
    b: stoker::PipelineBuilder,
    kind: stoker::BackendKind,
    ordinal: usize,
) -> PyResult<stoker::PipelineBuilder> {
    if !matches!(kind, stoker::BackendKind::Cuda | stoker::BackendKind::Auto) {
        return Err(config_err(
            "device",
            "a device ordinal is for the CUDA backend",
        ));
    }
    let unavailable = |e: cudarc::driver::DriverError| {
        crate::errors::to_py(stoker::Error::BackendUnavailable {
            backend: "cuda".into(),
            reason: format!("device {ordinal}: {e}"),
        })
    };
    let ctx = std::panic::catch_unwind(|| cudarc::driver::CudaContext::new(ordinal))
        .map_err(|_| {
            crate::errors::to_py(stoker::Error::BackendUnavailable {
                backend: "cuda".into(),
                reason: "the CUDA driver could not be loaded".into(),
            })
        })?
        .map_err(unavailable)?;
    let stream = ctx.new_stream().map_err(unavailable)?;
    Ok(b.cuda_stream(ctx, stream))
}

#[cfg(not(feature = "cuda"))]
fn with_device(
    _b: stoker::PipelineBuilder,
    _kind: stoker::BackendKind,
    _ordinal: usize,
) -> PyResult<stoker::PipelineBuilder> {
    Err(crate::errors::to_py(stoker::Error::BackendUnavailable {
        backend: "cuda".into(),
        reason: "this build of stoker has no CUDA support".into(),
    }))
}

type Item = (Option<stoker::Result<stoker::Batch>>, stoker::Stats);

/// An epoch running on its own thread, which takes a batch from the Rust iterator only
/// when the caller asks for one (so the epoch's wait statistics stay the caller's), while
/// the caller waits without the GIL and looks for signals.
struct Running {
    ask: Option<Sender<()>>,
    answers: Receiver<Item>,
    thread: Option<JoinHandle<()>>,
    /// A batch was asked for and has not been received (an interrupted wait).
    asked: bool,
}

impl Running {
    fn start(mut epoch: stoker::Epoch) -> PyResult<Self> {
        let (ask, asks) = bounded::<()>(1);
        let (answer, answers) = bounded::<Item>(1);
        let thread = std::thread::Builder::new()
            .name("stoker-py-epoch".into())
            .spawn(move || {
                while asks.recv().is_ok() {
                    let item = epoch.next();
                    let end = item.is_none();
                    let stats = epoch.stats();
                    if answer.send((item, stats)).is_err() || end {
                        break;
                    }
                }
                // Dropping the epoch stops and joins its threads.
                drop(epoch);
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
        Ok(Running {
            ask: Some(ask),
            answers,
            thread: Some(thread),
            asked: false,
        })
    }

    /// Stops the epoch: no more asks; waits for its thread (which finishes the batch in
    /// hand, if any, then drops the epoch).
    fn stop(mut self) {
        self.ask = None;
        // Unblock a thread waiting to hand over a batch.
        while self.answers.try_recv().is_ok() {}
        drop(self.answers);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An epoch's state, shared by its Python object and its pipeline (which closes it).
struct Shared {
    state: Mutex<Option<Running>>,
    /// Set by `close`: a wait under way gives up at its next poll, and the iterator ends.
    closing: AtomicBool,
}

fn close_state(py: Python<'_>, shared: &Shared) {
    shared.closing.store(true, Ordering::Release);
    // Another thread may be waiting for a batch with the lock held and the GIL released:
    // wait for it (it sees `closing` within a poll) without holding the GIL, which it
    // needs back to return.
    let running = loop {
        match shared.state.try_lock() {
            Ok(mut g) => break g.take(),
            Err(std::sync::TryLockError::Poisoned(_)) => break None,
            Err(std::sync::TryLockError::WouldBlock) => {
                py.detach(|| std::thread::sleep(Duration::from_millis(5)))
            }
        }
    };
    if let Some(r) = running {
        py.detach(move || r.stop());
    }
}

/// The batches of one epoch, in order: iterate it (`for batch in pipe.epoch(e)`). The
/// wait for each batch releases the GIL and answers Ctrl-C within 50 ms. Use it as a
/// context manager (or call `close()`) to stop the epoch's threads early; an epoch
/// dropped mid-way stops them too. One pass: iterated again after its end it raises
/// `RuntimeError` (call `pipeline.epoch(e)` for each pass); closed, it just ends.
#[pyclass(module = "stoker", frozen)]
pub struct Epoch {
    shared: Arc<Shared>,
    live: Arc<AtomicUsize>,
    len: usize,
    stats: Mutex<Option<stoker::Stats>>,
    /// The last batch was handed out and the end said once (`StopIteration`): iterating
    /// again is a mistake, said as one, not an empty loop.
    ended: AtomicBool,
}

/// What iterating a finished epoch again says.
const ENDED: &str = "this epoch was iterated to its end and yields nothing more: call \
    pipeline.epoch(e) for each pass over the data (a new epoch number for a new shuffle)";

closing_pymethods!(Epoch {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Batch>> {
        if self.shared.closing.load(Ordering::Acquire) {
            return Ok(None);
        }
        let Ok(mut guard) = self.shared.state.try_lock() else {
            return Err(PyRuntimeError::new_err(
                "this epoch is being iterated on another thread",
            ));
        };
        let Some(run) = guard.as_mut() else {
            if self.ended.load(Ordering::Acquire) {
                return Err(PyRuntimeError::new_err(ENDED));
            }
            return Ok(None);
        };
        if !run.asked {
            let sent = run.ask.as_ref().is_some_and(|a| a.send(()).is_ok());
            if !sent {
                *guard = None;
                return Ok(None);
            }
            run.asked = true;
        }
        loop {
            let answers = run.answers.clone();
            match py.detach(move || answers.recv_timeout(SIGNAL_POLL)) {
                Ok((item, stats)) => {
                    run.asked = false;
                    if let Ok(mut s) = self.stats.lock() {
                        *s = Some(stats);
                    }
                    return match item {
                        Some(Ok(b)) => {
                            Ok(Some(Batch::new(BatchOwner::new(b, Arc::clone(&self.live)))))
                        }
                        Some(Err(e)) => Err(e).py_err(),
                        None => {
                            if let Some(r) = guard.take() {
                                py.detach(move || r.stop());
                            }
                            self.ended.store(true, Ordering::Release);
                            Ok(None)
                        }
                    };
                }
                Err(RecvTimeoutError::Timeout) => {
                    py.check_signals()?;
                    if self.shared.closing.load(Ordering::Acquire) {
                        return Ok(None);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    *guard = None;
                    return Err(PyRuntimeError::new_err(
                        "the epoch's thread stopped unexpectedly",
                    ));
                }
            }
        }
    }

    /// Batches this iterator yields in all.
    fn __len__(&self) -> usize {
        self.len
    }

    /// Statistics of this epoch so far (its batches delivered, waits, errors).
    fn stats(&self) -> Stats {
        let s = self.stats.lock().ok().and_then(|s| s.clone());
        Stats::from(s.unwrap_or_default())
    }

    /// The verdict on this epoch so far: whether the training waited for input, each
    /// stage's load, the bottleneck and what to try next (`print(epoch.report())`).
    fn report(&self) -> crate::report::Report {
        let s = self.stats.lock().ok().and_then(|s| s.clone());
        s.unwrap_or_default().report().into()
    }

    /// Stops the epoch's threads (the batch in hand is finished first).
    fn close(&self, py: Python<'_>) {
        close_state(py, &self.shared);
    }
});

/// Pipeline statistics. Stage times are summed over threads (CPU-seconds); `wait` and
/// `wall` are the caller's.
#[pyclass(module = "stoker", frozen, get_all)]
pub struct Stats {
    /// Time readers spent reading bytes.
    read_seconds: f64,
    /// Time workers spent decoding.
    decode_seconds: f64,
    /// Time workers spent executing plans.
    augment_seconds: f64,
    /// Time the caller waited for a batch.
    wait_seconds: f64,
    /// Time from the start of the epoch(s) to the last batch handed out.
    wall_seconds: f64,
    /// `wait_seconds / wall_seconds`: 0 means the caller never waited for input.
    input_wait_fraction: f64,
    /// Compressed bytes read.
    bytes_read: u64,
    /// Samples delivered (replacements included).
    samples_delivered: u64,
    /// Samples reported as failed.
    samples_reported: u64,
    /// Slots filled by a replacement.
    replacements: u64,
    /// Samples served from the decoded-sample cache.
    cache_hits: u64,
    /// Batches delivered.
    batches: u64,
    /// GPU backends: images decoded on the device.
    gpu_decoded: u64,
    /// GPU backends: images the CPU decoded instead.
    cpu_fallbacks: u64,
    /// Samples delivered from files the decoder had to tolerate something in.
    samples_with_warnings: u64,
    /// The reported samples (the first ones kept), as SampleErrors.
    errors: Vec<Py<PyAny>>,
}

impl From<stoker::Stats> for Stats {
    fn from(s: stoker::Stats) -> Self {
        let errors = Python::attach(|py| {
            s.errors
                .iter()
                .map(|e| sample_error_object(py, e))
                .collect()
        });
        Stats {
            read_seconds: s.read_seconds,
            decode_seconds: s.decode_seconds,
            augment_seconds: s.augment_seconds,
            wait_seconds: s.wait_seconds,
            wall_seconds: s.wall_seconds,
            input_wait_fraction: s.input_wait_fraction,
            bytes_read: s.bytes_read,
            samples_delivered: s.samples_delivered,
            samples_reported: s.samples_reported,
            replacements: s.replacements,
            cache_hits: s.cache_hits,
            batches: s.batches,
            gpu_decoded: s.gpu_decoded,
            cpu_fallbacks: s.cpu_fallbacks,
            samples_with_warnings: s.samples_with_warnings,
            errors,
        }
    }
}

#[pymethods]
impl Stats {
    fn __repr__(&self) -> String {
        format!(
            "stoker.Stats(batches={}, delivered={}, reported={}, wait={:.3}s, wall={:.3}s)",
            self.batches,
            self.samples_delivered,
            self.samples_reported,
            self.wait_seconds,
            self.wall_seconds
        )
    }
}

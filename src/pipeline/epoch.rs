//! One epoch: its threads (the planner here, readers and workers in `worker.rs`), the
//! consumer's iterator and the `Batch` handle.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, RecvTimeoutError, Sender};
use half::f16;

use super::cache::{Cache, Decoded};
use super::device::{DeviceBuffers, DeviceHandle};
use super::staging::{Staged, StagingRing};
use super::stats::Counters;
use super::worker::{reader, worker, WorkerState};
use super::{Config, OnError};
use crate::augment::{DType, Layout, SamplePlan};
use crate::backend::cpu::memory::{HostBuffer, SlotMemory};
use crate::backend::device::job::DeviceJob;
use crate::error::{Error, Result, SampleError};
use crate::source::Subset;

/// Output buffers for one batch: images, and masks for segmentation sets.
#[derive(Debug)]
pub(crate) struct BatchBuffers {
    pub images: HostBuffer,
    pub masks: Option<HostBuffer>,
    /// The device buffers, when batches are made on a device (the host ones are then
    /// empty).
    pub gpu: Option<DeviceBuffers>,
}

impl BatchBuffers {
    pub(crate) fn new(cfg: &Config) -> Result<Self> {
        Ok(BatchBuffers {
            images: HostBuffer::new(cfg.batch_size * cfg.host_image_bytes()),
            masks: cfg
                .has_masks
                .then(|| HostBuffer::new(cfg.batch_size * cfg.host_mask_bytes())),
            gpu: match &cfg.gpu {
                Some(g) => Some(
                    g.lock()
                        .map_err(|_| Error::Pipeline("device batcher poisoned".into()))?
                        .buffers(cfg.batch_size, cfg.image_bytes(), cfg.mask_bytes())?,
                ),
                None => None,
            },
        })
    }
}

pub(super) struct Job {
    pub(super) batch: usize,
    pub(super) slot: usize,
    pub(super) sample: usize,
    pub(super) images: Arc<SlotMemory>,
    pub(super) masks: Option<Arc<SlotMemory>>,
}

pub(super) enum Payload {
    Staged(Staged),
    Cached(Arc<Decoded>),
    Failed(SampleError, Staged),
}

pub(super) struct Loaded {
    pub(super) job: Job,
    pub(super) payload: Payload,
}

pub(super) struct Delivered {
    pub(super) id: u64,
    pub(super) label: i64,
    pub(super) replaced: Option<u64>,
    pub(super) plan: SamplePlan,
    /// What the device needs for this sample, when batches are made on one.
    pub(super) gpu: Option<Box<DeviceJob>>,
}

pub(super) struct Outcome {
    pub(super) delivered: Option<Delivered>,
    pub(super) error: Option<SampleError>,
}

pub(super) enum Msg {
    Start {
        batch: usize,
        images: Arc<SlotMemory>,
        masks: Option<Arc<SlotMemory>>,
        gpu: Option<DeviceBuffers>,
        len: usize,
    },
    Done {
        batch: usize,
        slot: usize,
        outcome: Outcome,
    },
}

/// What every thread of an epoch shares.
pub(super) struct Shared {
    pub(super) cfg: Arc<Config>,
    pub(super) subset: Subset,
    pub(super) cache: Option<Arc<Cache>>,
    pub(super) stats: Arc<Counters>,
    pub(super) epoch: u64,
    pub(super) staging: StagingRing,
    pub(super) workers_kept: Arc<Mutex<Vec<WorkerState>>>,
}

/// A sample that was delivered by a replacement (`OnError::Replace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replacement {
    /// Slot in the batch.
    pub slot: usize,
    /// The sample that failed.
    pub failed_id: u64,
    /// The sample delivered in its place.
    pub by_id: u64,
}

/// A batch: images (and masks) in one contiguous host buffer, with labels and ids.
/// Dropping it returns its buffers to the pipeline's ring.
#[derive(Debug)]
pub struct Batch {
    index: usize,
    epoch: u64,
    len: usize,
    width: usize,
    height: usize,
    dtype: DType,
    layout: Layout,
    buffers: Option<BatchBuffers>,
    labels: Vec<i64>,
    ids: Vec<u64>,
    plans: Vec<SamplePlan>,
    errors: Vec<SampleError>,
    replacements: Vec<Replacement>,
    return_tx: Sender<BatchBuffers>,
    held: Arc<AtomicUsize>,
    device: Option<DeviceHandle>,
    /// Host copies of a device batch, read back on first use of a host accessor.
    host_images: std::sync::OnceLock<HostBuffer>,
    host_masks: std::sync::OnceLock<HostBuffer>,
}

impl Batch {
    /// Position of this batch in its epoch.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The epoch it belongs to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Samples in the batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no sample of the batch could be delivered (all were reported).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `[N, C, H, W]` or `[N, H, W, C]`, following the layout.
    pub fn shape(&self) -> [usize; 4] {
        match self.layout {
            Layout::Nchw => [self.len, 3, self.height, self.width],
            Layout::Nhwc => [self.len, self.height, self.width, 3],
        }
    }

    /// Element type of the images.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Layout of the images.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Whether the batch lives in device memory (wgpu backend). Its host accessors
    /// ([`Batch::image_bytes`], [`Batch::images_f32`], [`Batch::masks`], ...) then copy it
    /// to the host once, on first use, and block for that; a device consumer uses
    /// [`Batch::wgpu_images`] instead, with no copy.
    pub fn on_device(&self) -> bool {
        if self.device.is_some() {
            return true;
        }
        false
    }

    /// Bytes of the images of this batch: `len * 3 * width * height * dtype size`.
    pub fn images_len_bytes(&self) -> usize {
        self.len * 3 * self.width * self.height * self.dtype.size()
    }

    /// The images as raw bytes (little-endian elements). For a device batch, a host copy
    /// read back on first use (empty, with the error logged, if the device fails).
    pub fn image_bytes(&self) -> &[u8] {
        if self.device.is_some() {
            return self.logged(self.host_copy(false));
        }
        let n = self.images_len_bytes();
        self.buffers
            .as_ref()
            .and_then(|b| b.images.bytes().get(..n))
            .unwrap_or_default()
    }

    /// The host copy of a device batch's images (or masks), read back once on first use;
    /// `None` when it has none.
    fn host_copy(&self, masks: bool) -> Result<Option<&[u8]>> {
        let (cell, n) = if masks {
            (&self.host_masks, 2 * self.len * self.width * self.height)
        } else {
            (&self.host_images, self.images_len_bytes())
        };
        let (Some(device), Some(bufs)) = (
            &self.device,
            self.buffers.as_ref().and_then(|b| b.gpu.as_ref()),
        ) else {
            return Ok(None);
        };
        if let Some(h) = cell.get() {
            return Ok(Some(h.bytes()));
        }
        let Some(data) = device.read(bufs, masks, n)? else {
            return Ok(None);
        };
        let mut copy = HostBuffer::new(n);
        match data.get(..n) {
            Some(d) => copy.bytes_mut().copy_from_slice(d),
            None => {
                return Err(crate::backend::device::DeviceError::ShortRead {
                    len: data.len(),
                    requested: n,
                }
                .into())
            }
        }
        Ok(Some(cell.get_or_init(|| copy).bytes()))
    }

    /// A host copy's bytes, or none with the error logged (for the infallible accessors).
    fn logged<'a>(&self, r: Result<Option<&'a [u8]>>) -> &'a [u8] {
        r.unwrap_or_else(|e| {
            log::error!("cannot read batch {} back from the device: {e}", self.index);
            None
        })
        .unwrap_or_default()
    }

    /// The images on the host, wherever the batch lives: copied for a host batch, read
    /// back (blocking, once) for a device batch.
    pub fn read_images(&self) -> Result<Vec<u8>> {
        if self.device.is_some() {
            return Ok(self.host_copy(false)?.unwrap_or_default().to_vec());
        }
        Ok(self.image_bytes().to_vec())
    }

    /// The label masks on the host, wherever the batch lives (see [`Batch::read_images`]).
    pub fn read_masks(&self) -> Result<Option<Vec<u16>>> {
        if self.device.is_some() {
            let bytes = self.host_copy(true)?;
            return Ok(bytes.and_then(|b| bytemuck::try_cast_slice(b).ok().map(<[u16]>::to_vec)));
        }
        Ok(self.masks().map(<[u16]>::to_vec))
    }

    /// The images as a buffer on the wgpu device (`STORAGE | COPY_SRC | COPY_DST`): slot
    /// `i` at byte `i * 3 * width * height * dtype size`, in the batch's layout and dtype.
    /// `None` for other batches. Valid until the batch is dropped; work submitted on the
    /// same queue before the drop is ordered before the buffer is written again.
    #[cfg(feature = "wgpu")]
    pub fn wgpu_images(&self) -> Option<&::wgpu::Buffer> {
        match self.buffers.as_ref()?.gpu.as_ref()? {
            DeviceBuffers::Wgpu(b) => Some(&b.images),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The label masks as a buffer on the wgpu device: `u16` class ids, `[N, H, W]`.
    #[cfg(feature = "wgpu")]
    pub fn wgpu_masks(&self) -> Option<&::wgpu::Buffer> {
        match self.buffers.as_ref()?.gpu.as_ref()? {
            DeviceBuffers::Wgpu(b) => b.masks.as_ref(),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The images in CUDA device memory: slot `i` at byte
    /// `i * 3 * width * height * dtype size`, in the batch's layout and dtype. `None` for
    /// other batches. The pipeline's consumer stream already waits for the batch
    /// ([`Batch::cuda_event`] is the event, for other streams). Valid until the batch is
    /// dropped: work the consumer stream has been given by then is ordered before the
    /// buffer is written again.
    #[cfg(feature = "cuda")]
    pub fn cuda_images(&self) -> Option<&cudarc::driver::CudaSlice<u8>> {
        match self.buffers.as_ref()?.gpu.as_ref()? {
            DeviceBuffers::Cuda(b) => Some(&b.images),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The label masks in CUDA device memory: `u16` class ids, `[N, H, W]`.
    #[cfg(feature = "cuda")]
    pub fn cuda_masks(&self) -> Option<&cudarc::driver::CudaSlice<u8>> {
        match self.buffers.as_ref()?.gpu.as_ref()? {
            DeviceBuffers::Cuda(b) => b.masks.as_ref(),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The event that completes when this CUDA batch is ready: a stream other than the
    /// pipeline's consumer stream waits on it before reading the batch.
    #[cfg(feature = "cuda")]
    pub fn cuda_event(&self) -> Option<&cudarc::driver::CudaEvent> {
        match self.device.as_ref()? {
            DeviceHandle::Cuda { ready, .. } => Some(ready),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Whether the device batch has label masks.
    fn device_masks_present(&self) -> bool {
        match self.buffers.as_ref().and_then(|b| b.gpu.as_ref()) {
            #[cfg(feature = "wgpu")]
            Some(DeviceBuffers::Wgpu(b)) => b.masks.is_some(),
            #[cfg(feature = "cuda")]
            Some(DeviceBuffers::Cuda(b)) => b.masks.is_some(),
            _ => false,
        }
    }

    /// The images, if the dtype is u8.
    pub fn images_u8(&self) -> Option<&[u8]> {
        (self.dtype == DType::U8).then(|| self.image_bytes())
    }

    /// The images, if the dtype is f16.
    pub fn images_f16(&self) -> Option<&[f16]> {
        if self.dtype != DType::F16 {
            return None;
        }
        bytemuck::try_cast_slice(self.image_bytes()).ok()
    }

    /// The images, if the dtype is f32.
    pub fn images_f32(&self) -> Option<&[f32]> {
        if self.dtype != DType::F32 {
            return None;
        }
        bytemuck::try_cast_slice(self.image_bytes()).ok()
    }

    /// Label masks `[N, H, W]`, for segmentation sets (read back on first use for a
    /// device batch, as [`Batch::image_bytes`]).
    pub fn masks(&self) -> Option<&[u16]> {
        let n = self.len * self.width * self.height;
        if self.device.is_some() {
            if !self.device_masks_present() {
                return None;
            }
            return bytemuck::try_cast_slice::<u8, u16>(self.logged(self.host_copy(true))).ok();
        }
        let m = self.buffers.as_ref()?.masks.as_ref()?;
        bytemuck::try_cast_slice::<u8, u16>(m.bytes().get(..n * 2)?).ok()
    }

    /// Class labels, `-1` where the source has none.
    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// Stable sample ids, in slot order.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// The plan each slot was made with.
    pub fn plans(&self) -> &[SamplePlan] {
        &self.plans
    }

    /// Samples of this batch that could not be delivered, with the reason.
    pub fn errors(&self) -> &[SampleError] {
        &self.errors
    }

    /// Slots filled by a replacement sample.
    pub fn replacements(&self) -> &[Replacement] {
        &self.replacements
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
        if let Some(mut b) = self.buffers.take() {
            if let (Some(d), Some(g)) = (&self.device, b.gpu.as_mut()) {
                d.release(g);
            }
            // Fails only when the epoch is gone; the buffers are then simply freed.
            let _ = self.return_tx.send(b);
        }
    }
}

struct Pending {
    images: Option<Arc<SlotMemory>>,
    masks: Option<Arc<SlotMemory>>,
    gpu: Option<DeviceBuffers>,
    outcomes: Vec<Option<Outcome>>,
    remaining: usize,
}

/// The batches of one epoch, in order. Dropping it mid-epoch stops and joins every
/// thread of the epoch (see the module docs of [`crate::pipeline`]).
pub struct Epoch {
    epoch: u64,
    cfg: Arc<Config>,
    num_batches: usize,
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
    num_batches: usize,
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
    pub batches: Vec<Vec<usize>>,
    pub epoch: u64,
}

impl Epoch {
    pub(crate) fn start(p: EpochParts) -> Result<Epoch> {
        let cfg = p.cfg;
        let num_batches = p.batches.len();
        let stats = Arc::new(Counters::default());
        let (free_tx, free_rx) = unbounded::<BatchBuffers>();
        let ring = cfg.prefetch.max(1);
        {
            let mut pool = p
                .pool
                .lock()
                .map_err(|_| Error::Pipeline("buffer pool poisoned".into()))?;
            for _ in 0..ring {
                let b = match pool.pop() {
                    Some(b) => b,
                    None => BatchBuffers::new(&cfg)?,
                };
                let _ = free_tx.send(b);
            }
        }
        let (cancel_tx, cancel_rx) = bounded::<()>(0);
        let (read_tx, read_rx) = bounded::<Job>(cfg.staging_slots);
        let (load_tx, load_rx) = bounded::<Loaded>(cfg.staging_slots);
        let (done_tx, done_rx) = unbounded::<Msg>();
        let shared = Arc::new(Shared {
            cfg: Arc::clone(&cfg),
            subset: p.subset,
            cache: p.cache,
            stats: Arc::clone(&stats),
            epoch: p.epoch,
            staging: {
                let mut kept = p
                    .staging
                    .lock()
                    .map(|mut k| std::mem::take(&mut *k))
                    .unwrap_or_default();
                StagingRing::new(cfg.staging_slots, &mut kept)
            },
            workers_kept: Arc::clone(&p.workers),
        });
        let mut threads = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|e| Error::Pipeline(format!("cannot start a thread: {e}")))
        };
        {
            let (cfg, free_rx, cancel_rx, done_tx) = (
                Arc::clone(&cfg),
                free_rx.clone(),
                cancel_rx.clone(),
                done_tx.clone(),
            );
            let batches = p.batches;
            threads.push(spawn(
                "stoker-planner".into(),
                Box::new(move || planner(&cfg, batches, &free_rx, &read_tx, &done_tx, &cancel_rx)),
            )?);
        }
        for i in 0..cfg.readers {
            let (sh, read_rx, load_tx, cancel_rx) = (
                Arc::clone(&shared),
                read_rx.clone(),
                load_tx.clone(),
                cancel_rx.clone(),
            );
            threads.push(spawn(
                format!("stoker-reader-{i}"),
                Box::new(move || reader(&sh, &read_rx, &load_tx, &cancel_rx)),
            )?);
        }
        drop(load_tx);
        for i in 0..cfg.workers {
            let (sh, load_rx, done_tx, cancel_rx) = (
                Arc::clone(&shared),
                load_rx.clone(),
                done_tx.clone(),
                cancel_rx.clone(),
            );
            threads.push(spawn(
                format!("stoker-worker-{i}"),
                Box::new(move || worker(&sh, &load_rx, &done_tx, &cancel_rx)),
            )?);
        }
        drop(done_tx);
        let mut collector = Collector {
            epoch: p.epoch,
            cfg: Arc::clone(&cfg),
            num_batches,
            next: 0,
            done: num_batches == 0,
            counts_wait: true,
            done_rx,
            free_tx,
            pending: HashMap::new(),
            stats: Arc::clone(&stats),
            held: Arc::new(AtomicUsize::new(0)),
            allocated: ring,
        };
        let source = if cfg.on_device() {
            // One batch ready ahead of the caller, the next one being packed.
            let (tx, rx) = bounded::<Result<Batch>>(1);
            collector.counts_wait = false;
            let handle = spawn(
                "stoker-collector".into(),
                Box::new(move || {
                    while let Some(r) = collector.next_batch() {
                        if tx.send(r).is_err() {
                            return;
                        }
                    }
                }),
            )?;
            Source::Thread {
                rx,
                handle: Some(handle),
            }
        } else {
            Source::Inline(Box::new(collector))
        };
        Ok(Epoch {
            epoch: p.epoch,
            cfg,
            num_batches,
            finished: num_batches == 0,
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
        })
    }

    /// Number of batches in this epoch.
    pub fn num_batches(&self) -> usize {
        self.num_batches
    }

    /// Statistics of this epoch so far.
    pub fn stats(&self) -> super::Stats {
        let running = (!self.finished).then(|| self.started.elapsed().as_secs_f64());
        self.stats.snapshot_at(running)
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

impl Collector {
    fn assemble(&mut self, index: usize, p: Pending) -> Result<Batch> {
        let cfg = &self.cfg;
        let internal = || Error::Pipeline("internal: a batch buffer is still shared".into());
        let mut images = p
            .images
            .map(SlotMemory::reclaim)
            .ok_or_else(internal)?
            .map_err(|_| internal())?;
        let mut masks = match p.masks {
            Some(m) => Some(SlotMemory::reclaim(m).map_err(|_| internal())?),
            None => None,
        };
        let n = p.outcomes.len();
        let mut labels = Vec::with_capacity(n);
        let mut ids = Vec::with_capacity(n);
        let mut plans = Vec::with_capacity(n);
        let mut errors = Vec::new();
        let mut replacements = Vec::new();
        let (ib, mb) = (cfg.host_image_bytes(), cfg.host_mask_bytes());
        let mut jobs: Vec<DeviceJob> = Vec::new();
        for (slot, o) in p.outcomes.into_iter().enumerate() {
            let Some(o) = o else {
                return Err(Error::Pipeline(format!(
                    "internal: slot {slot} of batch {index} never finished"
                )));
            };
            if let Some(e) = o.error {
                errors.push(e);
            }
            if let Some(d) = o.delivered {
                let k = ids.len();
                if cfg.on_device() {
                    let job = d.gpu.ok_or_else(|| {
                        Error::Pipeline(format!("internal: slot {slot} has no device input"))
                    })?;
                    jobs.push(*job);
                }
                if k != slot && ib + mb > 0 {
                    images
                        .bytes_mut()
                        .copy_within(slot * ib..(slot + 1) * ib, k * ib);
                    if let Some(m) = masks.as_mut() {
                        m.bytes_mut()
                            .copy_within(slot * mb..(slot + 1) * mb, k * mb);
                    }
                }
                if let Some(failed) = d.replaced {
                    replacements.push(Replacement {
                        slot: k,
                        failed_id: failed,
                        by_id: d.id,
                    });
                }
                ids.push(d.id);
                labels.push(d.label);
                plans.push(d.plan);
            }
        }
        let (gpu, device) = match (&cfg.gpu, p.gpu) {
            (Some(batcher), Some(mut bufs)) => {
                let t = Instant::now();
                let mut b = batcher
                    .lock()
                    .map_err(|_| Error::Pipeline("device batcher poisoned".into()))?;
                let handle = b.run(&jobs, &mut bufs)?;
                cfg.coeff_pool.recycle(jobs.into_iter().map(|j| j.image));
                Counters::add(&self.stats.device_ns, t.elapsed());
                (Some(bufs), Some(handle))
            }
            (None, None) => (None, None),
            _ => return Err(Error::Pipeline("internal: device buffers missing".into())),
        };
        self.stats
            .samples_delivered
            .fetch_add(ids.len() as u64, Ordering::Relaxed);
        self.stats
            .replacements
            .fetch_add(replacements.len() as u64, Ordering::Relaxed);
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.held.fetch_add(1, Ordering::AcqRel);
        let (w, h) = cfg.augment.out_size();
        Ok(Batch {
            index,
            epoch: self.epoch,
            len: ids.len(),
            width: w as usize,
            height: h as usize,
            dtype: cfg.augment.out_dtype(),
            layout: cfg.augment.out_layout(),
            buffers: Some(BatchBuffers { images, masks, gpu }),
            device,
            host_images: std::sync::OnceLock::new(),
            host_masks: std::sync::OnceLock::new(),
            labels,
            ids,
            plans,
            errors,
            replacements,
            return_tx: self.free_tx.clone(),
            held: Arc::clone(&self.held),
        })
    }

    fn handle(&mut self, msg: Msg) -> Option<Result<Batch>> {
        match msg {
            Msg::Start {
                batch,
                images,
                masks,
                gpu,
                len,
            } => {
                let p = self.pending.entry(batch).or_insert_with(|| Pending {
                    images: None,
                    masks: None,
                    gpu: None,
                    outcomes: (0..len).map(|_| None).collect(),
                    remaining: len,
                });
                p.images = Some(images);
                p.masks = masks;
                {
                    p.gpu = gpu;
                }
                None
            }
            Msg::Done {
                batch,
                slot,
                outcome,
            } => {
                if let Some(e) = &outcome.error {
                    self.stats.report(e);
                    if self.cfg.on_error == OnError::Fail {
                        self.done = true;
                        return Some(Err(Error::Sample(e.clone())));
                    }
                }
                let Some(p) = self.pending.get_mut(&batch) else {
                    self.done = true;
                    return Some(Err(Error::Pipeline(format!(
                        "internal: result for unknown batch {batch}"
                    ))));
                };
                if let Some(o) = p.outcomes.get_mut(slot) {
                    if o.is_none() {
                        p.remaining -= 1;
                    }
                    *o = Some(outcome);
                }
                None
            }
        }
    }

    /// The next batch, waiting for its samples; `None` once none is left.
    fn next_batch(&mut self) -> Option<Result<Batch>> {
        loop {
            if self.done {
                return None;
            }
            if self
                .pending
                .get(&self.next)
                .is_some_and(|p| p.remaining == 0)
            {
                let index = self.next;
                let p = self.pending.remove(&index)?;
                self.next += 1;
                if self.next == self.num_batches {
                    self.done = true;
                }
                let r = self.assemble(index, p);
                if r.is_err() {
                    self.done = true;
                }
                return Some(r);
            }
            // The caller holds every buffer of the ring: lend one more rather than
            // deadlock. Memory then grows only with what the caller keeps.
            if self.held.load(Ordering::Acquire) >= self.allocated {
                log::debug!(
                    "caller holds {} batches; adding a batch buffer",
                    self.allocated
                );
                match BatchBuffers::new(&self.cfg) {
                    Ok(b) => {
                        let _ = self.free_tx.send(b);
                        self.allocated += 1;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            }
            let t = Instant::now();
            let msg = self.done_rx.recv_timeout(Duration::from_millis(100));
            if self.counts_wait {
                Counters::add(&self.stats.wait_ns, t.elapsed());
            }
            match msg {
                Ok(m) => {
                    if let Some(r) = self.handle(m) {
                        return Some(r);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.done = true;
                    return Some(Err(Error::Pipeline(
                        "pipeline threads stopped before the epoch was complete".into(),
                    )));
                }
            }
        }
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
                Counters::add(&self.stats.wait_ns, t.elapsed());
                match &r {
                    Some(Ok(b)) if b.index() + 1 < self.num_batches => {}
                    // The last batch, an error, or the collector gone: the epoch is over.
                    _ => self.finish(),
                }
                r
            }
            Source::Gone => None,
        };
        if r.is_none() {
            self.finish();
        }
        r
    }
}

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
        // Keep the staging buffers (and their capacity) for the next epoch. Those still in
        // flight when an epoch is cut short are freed; the next ring makes new ones.
        if let Ok(mut kept) = self.kept_staging.lock() {
            kept.extend(self.staging.drain());
        }
        if let Ok(mut pool) = self.pool.lock() {
            for b in self.free_rx.try_iter() {
                if pool.len() < self.cfg.prefetch.max(1) {
                    pool.push(b);
                }
            }
        }
        self.stats.merge_into(&self.total);
    }
}

fn planner(
    cfg: &Config,
    batches: Vec<Vec<usize>>,
    free_rx: &Receiver<BatchBuffers>,
    read_tx: &Sender<Job>,
    done_tx: &Sender<Msg>,
    cancel: &Receiver<()>,
) {
    for (b, indices) in batches.into_iter().enumerate() {
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

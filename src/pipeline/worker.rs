//! The reader and worker threads of an epoch: read bytes, decode what the plan needs,
//! execute the plan into the sample's batch slot, report the outcome.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{select, Receiver, RecvTimeoutError, Sender};

use std::sync::{Arc, Mutex};

use super::batch::SampleWarning;
use super::cache::{Cache, Decoded};
use super::device_cache::{DeviceCache, DeviceEntry, Reservation};
use super::memory::{SlotMemory, SlotWriter};
use super::readers::read_sample;
use super::staging::{Staged, StagingRing};
use super::stats::Counters;
use super::{Config, OnError};
use crate::augment::reference::Scratch;
use crate::augment::SamplePlan;
use crate::backend::device::job::{
    self, DeviceJob, DeviceSample, HardwareDecode, Prepared, SharedImage,
};
use crate::backend::device::DeviceBuffers;
use crate::decode::{check_limits, peek_info, DecodeError, DecodeOptions};
use crate::decode::{DecodeWarning, LabelPlane};
use crate::error::{SampleError, SampleErrorKind};
use crate::rng::{Rng, Stream};
use crate::source::Subset;
use crate::source::{Sample, Targets};

/// One sample to read: where it goes in its batch.
pub(super) struct Job {
    pub(super) batch: usize,
    pub(super) slot: usize,
    pub(super) sample: usize,
    pub(super) images: Arc<SlotMemory>,
    pub(super) masks: Option<Arc<SlotMemory>>,
}

/// What a reader hands a worker for one sample.
pub(super) enum Payload {
    Staged(Staged),
    Cached(Arc<Decoded>),
    /// Kept in the device cache: nothing was read.
    DeviceCached(Arc<DeviceEntry>),
    Failed(SampleError, Staged),
}

/// A sample read, with its job.
pub(super) struct Loaded {
    pub(super) job: Job,
    pub(super) payload: Payload,
}

/// A sample made into its slot.
pub(super) struct Delivered {
    pub(super) id: u64,
    /// Its index in the subset.
    pub(super) sample: usize,
    pub(super) label: Option<u32>,
    /// Under `OnError::Replace`: the failed sample it stands in for (boxed: rare).
    pub(super) replaced: Option<Box<StandsIn>>,
    pub(super) plan: SamplePlan,
    /// What the device needs for this sample, when batches are made on one (not boxed:
    /// a box would be an allocation per sample; the message is moved, not copied, twice).
    pub(super) gpu: Option<DeviceJob>,
    /// What its decoder tolerated, when anything (boxed: rare, and messages stay small).
    pub(super) warning: Option<Box<SampleWarning>>,
    /// Its place in the device cache, when its batch is to keep its decoded image there
    /// (boxed: messages stay small).
    pub(super) reservation: Option<Box<Reservation>>,
    /// Its targets as the user transform left them, in place of the sample's own.
    pub(super) targets: Option<Arc<Targets>>,
}

/// The failed sample a replacement stands in for, and where the replacement is in the
/// failed sample's list of candidates (a later attempt goes on after it).
#[derive(Debug, Clone, Copy)]
pub(super) struct StandsIn {
    /// The failed sample's index in the subset.
    pub(super) failed: usize,
    /// Its id.
    pub(super) failed_id: u64,
    /// The replacement's position in the list.
    pub(super) position: usize,
}

/// What became of one sample.
pub(super) struct Outcome {
    pub(super) delivered: Option<Delivered>,
    pub(super) error: Option<SampleError>,
    /// Under `OnError::Replace`: the sample failed and so did every replacement candidate.
    pub(super) exhausted: bool,
}

/// What the planner and the workers tell the collector.
// `Done` is much larger than `Start`; boxing it would allocate once per sample, which the
// steady state must not (tests/alloc.rs). One message is sent per sample and per batch.
#[allow(clippy::large_enum_variant)]
pub(super) enum Msg {
    Start {
        batch: usize,
        images: Arc<SlotMemory>,
        masks: Option<Arc<SlotMemory>>,
        gpu: Option<Box<dyn DeviceBuffers>>,
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
    /// The device cache of decoded samples (device backends only).
    pub(super) device_cache: Option<Arc<DeviceCache>>,
    pub(super) stats: Arc<Counters>,
    pub(super) epoch: u64,
    /// The rank's own samples this epoch: replacements come from here, so a replacement
    /// never appears on another rank.
    pub(super) replace_pool: Arc<[usize]>,
    pub(super) staging: StagingRing,
    pub(super) workers_kept: Arc<Mutex<Vec<WorkerState>>>,
}

pub(super) fn reader(
    sh: &Shared,
    read_rx: &Receiver<Job>,
    load_tx: &Sender<Loaded>,
    cancel: &Receiver<()>,
) {
    let limits = sh.cfg.limits;
    loop {
        let job = select! {
            recv(read_rx) -> j => match j { Ok(j) => j, Err(_) => return },
            recv(cancel) -> _ => return,
        };
        let sample = &sh.subset.samples()[job.sample];
        let on_device = sh.device_cache.as_ref().and_then(|c| c.get(sample.id));
        let cached = match on_device {
            Some(_) => None,
            None => sh.cache.as_ref().and_then(|c| c.get(sample.id)),
        };
        let payload = match (on_device, cached) {
            (Some(e), _) => {
                sh.stats.device_cache_hits.fetch_add(1, Ordering::Relaxed);
                Payload::DeviceCached(e)
            }
            (None, Some(d)) => {
                sh.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                Payload::Cached(d)
            }
            (None, None) => {
                let mut st = select! {
                    recv(sh.staging.free_rx) -> s => match s { Ok(s) => s, Err(_) => return },
                    recv(cancel) -> _ => return,
                };
                if let Some(lat) = sh.subset.inner.read_latency {
                    if let Err(RecvTimeoutError::Disconnected) = cancel.recv_timeout(lat) {
                        return;
                    }
                }
                match read_sample(sample, &limits, &mut st.image, &mut st.mask, &sh.stats) {
                    Ok(()) => Payload::Staged(st),
                    Err(e) => Payload::Failed(e, st),
                }
            }
        };
        select! {
            send(load_tx, Loaded { job, payload }) -> r => if r.is_err() { return },
            recv(cancel) -> _ => return,
        }
    }
}

/// Per-worker reusable state, kept by the pipeline across epochs.
#[derive(Default, Debug)]
pub(crate) struct WorkerState {
    scratch: Scratch,
    decoded: Decoded,
    replace: Staged,
    /// What the decoder tolerated in the sample last made (set by `attempt`).
    warning: Option<DecodeWarning>,
    /// The device-cache place of the sample last made, if it got one (set by
    /// `prepare_device`).
    reservation: Option<Box<Reservation>>,
    /// The targets the user transform left for the sample last made (set by
    /// `transformed`).
    targets: Option<Arc<Targets>>,
}

pub(super) fn worker(
    sh: &Shared,
    load_rx: &Receiver<Loaded>,
    done_tx: &Sender<Msg>,
    cancel: &Receiver<()>,
) {
    let mut ws = sh
        .workers_kept
        .lock()
        .ok()
        .and_then(|mut v| v.pop())
        .unwrap_or_default();
    work(sh, &mut ws, load_rx, done_tx, cancel);
    if let Ok(mut v) = sh.workers_kept.lock() {
        v.push(ws);
    }
}

fn work(
    sh: &Shared,
    ws: &mut WorkerState,
    load_rx: &Receiver<Loaded>,
    done_tx: &Sender<Msg>,
    cancel: &Receiver<()>,
) {
    loop {
        let Loaded { job, payload } = select! {
            recv(load_rx) -> m => match m { Ok(m) => m, Err(_) => return },
            recv(cancel) -> _ => return,
        };
        let (batch, slot) = (job.batch, job.slot);
        let sample = &sh.subset.samples()[job.sample];
        let result = catch_unwind(AssertUnwindSafe(|| process(sh, &job, sample, &payload, ws)));
        let outcome = result.unwrap_or_else(|p| {
            let reason = crate::error::panic_message(p.as_ref());
            *ws = WorkerState::default();
            Outcome {
                delivered: None,
                error: Some(SampleError::new(
                    sample,
                    SampleErrorKind::Internal,
                    format!("internal panic: {reason}"),
                )),
                exhausted: false,
            }
        });
        match payload {
            Payload::Staged(st) | Payload::Failed(_, st) => sh.staging.give_back(st),
            Payload::Cached(_) | Payload::DeviceCached(_) => {}
        }
        // Release this job's hold on the batch buffers before reporting completion.
        drop(job);
        if done_tx
            .send(Msg::Done {
                batch,
                slot,
                outcome,
            })
            .is_err()
        {
            return;
        }
    }
}

fn decode_error(s: &Sample, what: &str, e: &DecodeError) -> SampleError {
    let kind = match (what, e.kind()) {
        ("mask", SampleErrorKind::Decode) => SampleErrorKind::Mask,
        (_, k) => k,
    };
    SampleError::new(s, kind, format!("{what}: {e}"))
}

fn process(
    sh: &Shared,
    job: &Job,
    sample: &Sample,
    payload: &Payload,
    ws: &mut WorkerState,
) -> Outcome {
    let mut writer = job.images.claim(job.slot);
    let mut mask_writer = job.masks.as_ref().and_then(|m| m.claim(job.slot));
    let Some(w) = writer.as_mut() else {
        return Outcome {
            delivered: None,
            error: Some(SampleError::new(
                sample,
                SampleErrorKind::Internal,
                "batch slot claimed twice".into(),
            )),
            exhausted: false,
        };
    };
    ws.warning = None;
    ws.reservation = None;
    ws.targets = None;
    let first = match payload {
        Payload::DeviceCached(e) => {
            ws.warning = e.warning.clone();
            Ok(device_job_kept(sh, sample, e))
        }
        Payload::Cached(d) if sh.cfg.transform.is_some() => {
            ws.warning = d.warning.clone();
            // The cache keeps samples as decoded: the transform changes a copy.
            ws.decoded.clone_from(&**d);
            transformed(sh, sample, ws)
                .and_then(|plan| finish_decoded(sh, sample, plan, w, mask_writer.as_mut(), ws))
        }
        Payload::Cached(d) => {
            ws.warning = d.warning.clone();
            let plan = cached_plan(sh, sample, d);
            if sh.cfg.on_device() {
                Ok((plan, device_job_cached(&plan, d)))
            } else {
                run(
                    sh,
                    sample,
                    d,
                    &plan,
                    w,
                    mask_writer.as_mut(),
                    &mut ws.scratch,
                )
                .map(|p| (p, None))
            }
        }
        Payload::Staged(st) => {
            attempt(sh, sample, &st.image, &st.mask, w, mask_writer.as_mut(), ws)
        }
        Payload::Failed(e, _) => Err(e.clone()),
    };
    let error = match first {
        Ok((plan, gpu)) => {
            return Outcome {
                delivered: Some(Delivered {
                    id: sample.id,
                    sample: job.sample,
                    label: sample.label,
                    replaced: None,
                    plan,
                    gpu,
                    warning: ws
                        .warning
                        .take()
                        .map(|w| Box::new(SampleWarning::new(sample, w))),
                    reservation: ws.reservation.take(),
                    targets: ws.targets.take(),
                }),
                error: None,
                exhausted: false,
            };
        }
        Err(e) => e,
    };
    if sh.cfg.on_error != OnError::Replace {
        return Outcome {
            delivered: None,
            error: Some(error),
            exhausted: false,
        };
    }
    let delivered = replacement(sh, ws, job.sample, 0, |cand, st, ws| {
        attempt(sh, cand, &st.image, &st.mask, w, mask_writer.as_mut(), ws)
    });
    Outcome {
        exhausted: delivered.is_none(),
        delivered,
        error: Some(error),
    }
}

/// Under `OnError::Replace`: the first replacement candidate for the sample at index
/// `failed` of the subset, from position `from` of its list on, that is read and that
/// `make` makes, or `None` when none of the `replace_attempts` positions gives one.
///
/// The list is the same wherever the failure is found (a worker, or the collector for a
/// sample the device rejected): deterministic, keyed by (seed, epoch, failed id), drawn
/// from the rank's own shard; the failed sample itself is passed over.
fn replacement(
    sh: &Shared,
    ws: &mut WorkerState,
    failed: usize,
    from: usize,
    mut make: impl FnMut(
        &Sample,
        &Staged,
        &mut WorkerState,
    ) -> Result<(SamplePlan, MaybeJob), SampleError>,
) -> Option<Delivered> {
    let samples = sh.subset.samples();
    let failed_id = samples.get(failed)?.id;
    let pool = &sh.replace_pool;
    let mut rng = Rng::new(sh.cfg.seed, sh.epoch, failed_id, Stream::Replace);
    for position in 0..sh.cfg.replace_attempts {
        let Some((index, cand)) = pool
            .get(rng.below(pool.len() as u64) as usize)
            .and_then(|&i| Some((i, samples.get(i)?)))
        else {
            break;
        };
        if position < from || cand.id == failed_id {
            continue;
        }
        let mut st = std::mem::take(&mut ws.replace);
        ws.warning = None;
        ws.targets = None;
        let r = read_sample(cand, &sh.cfg.limits, &mut st.image, &mut st.mask, &sh.stats)
            .and_then(|()| make(cand, &st, ws));
        ws.replace = st;
        match r {
            Ok((plan, gpu)) => {
                return Some(Delivered {
                    id: cand.id,
                    sample: index,
                    label: cand.label,
                    replaced: Some(Box::new(StandsIn {
                        failed,
                        failed_id,
                        position,
                    })),
                    plan,
                    gpu,
                    warning: ws
                        .warning
                        .take()
                        .map(|w| Box::new(SampleWarning::new(cand, w))),
                    reservation: ws.reservation.take(),
                    targets: ws.targets.take(),
                });
            }
            Err(e) => log::debug!("replacement candidate failed too: {e}"),
        }
    }
    None
}

/// [`replacement`] on a device backend, for the collector: the next candidate for the
/// sample at index `failed` of the subset, from position `from` of its list on, prepared
/// for the device as a worker prepares it. A candidate whose preparation panics counts
/// as failed.
pub(super) fn device_replacement(
    sh: &Shared,
    ws: &mut WorkerState,
    failed: usize,
    from: usize,
) -> Option<Delivered> {
    replacement(sh, ws, failed, from, |cand, st, ws| {
        let r = catch_unwind(AssertUnwindSafe(|| {
            prepare_device(sh, cand, &st.image, &st.mask, ws)
        }));
        match r {
            Ok(r) => r.map(|(plan, job)| (plan, Some(job))),
            Err(p) => {
                *ws = WorkerState::default();
                Err(SampleError::new(
                    cand,
                    SampleErrorKind::Internal,
                    format!(
                        "internal panic: {}",
                        crate::error::panic_message(p.as_ref())
                    ),
                ))
            }
        }
    })
}

/// What the device needs for one sample, when batches are made on a device.
type MaybeJob = Option<DeviceJob>;

/// Decodes (or, on a device, prepares) one sample from its bytes and fills its slot.
fn attempt(
    sh: &Shared,
    s: &Sample,
    image: &[u8],
    mask: &[u8],
    w: &mut SlotWriter,
    mask_writer: Option<&mut SlotWriter>,
    ws: &mut WorkerState,
) -> Result<(SamplePlan, MaybeJob), SampleError> {
    if sh.cfg.on_device() {
        return prepare_device(sh, s, image, mask, ws).map(|(p, j)| (p, Some(j)));
    }
    if sh.cfg.transform.is_some() {
        let plan = decode_and_transform(sh, s, image, mask, ws)?;
        return finish_decoded(sh, s, plan, w, mask_writer, ws);
    }
    let plan = decode_into(sh, s, image, mask, &mut ws.decoded)?;
    ws.warning = ws.decoded.warning.clone();
    run(sh, s, &ws.decoded, &plan, w, mask_writer, &mut ws.scratch).map(|p| (p, None))
}

/// Decodes a sample whole into the worker's buffers (see `decode_into`) and runs the user
/// transform on it; returns the plan made for the image the transform leaves.
fn decode_and_transform(
    sh: &Shared,
    s: &Sample,
    image: &[u8],
    mask: &[u8],
    ws: &mut WorkerState,
) -> Result<SamplePlan, SampleError> {
    // (The plan `decode_into` makes from the headers is for the image before the
    // transform: not the one used.)
    let _ = decode_into(sh, s, image, mask, &mut ws.decoded)?;
    ws.warning = ws.decoded.warning.clone();
    transformed(sh, s, ws)
}

/// Runs the pipeline's user transform on the worker's decoded sample (whole, upright)
/// and returns the plan made for the image it leaves; the targets it leaves go to
/// `ws.targets`.
fn transformed(sh: &Shared, s: &Sample, ws: &mut WorkerState) -> Result<SamplePlan, SampleError> {
    let cfg = &sh.cfg;
    let Some(t) = &cfg.transform else {
        return Err(SampleError::new(
            s,
            SampleErrorKind::Internal,
            "no user transform to run".into(),
        ));
    };
    let time = Instant::now();
    let d = &mut ws.decoded;
    let r = super::transform::apply(
        t,
        (cfg.seed, sh.epoch),
        &cfg.limits,
        s,
        &mut d.image,
        d.mask.as_mut(),
    );
    Counters::add(&sh.stats.augment_ns, time.elapsed());
    ws.targets = r?;
    let (w, h) = (d.image.width, d.image.height);
    Ok(cfg.augment.plan(cfg.seed, sh.epoch, s.id, w, h))
}

/// A transformed sample (in `ws.decoded`) into its slot: on the CPU, the plan executed
/// into the slot; on a device, the pixels handed over for upload (a CPU decode, counted
/// as a fallback).
fn finish_decoded(
    sh: &Shared,
    s: &Sample,
    plan: SamplePlan,
    w: &mut SlotWriter,
    mask_writer: Option<&mut SlotWriter>,
    ws: &mut WorkerState,
) -> Result<(SamplePlan, MaybeJob), SampleError> {
    if !sh.cfg.on_device() {
        return run(sh, s, &ws.decoded, &plan, w, mask_writer, &mut ws.scratch).map(|p| (p, None));
    }
    Ok((plan, Some(decoded_job(sh, plan, ws))))
}

/// The device input of a sample decoded (and transformed) on the CPU: its pixels, moved
/// out of the worker's buffers, for upload. Counted as a CPU fallback.
fn decoded_job(sh: &Shared, plan: SamplePlan, ws: &mut WorkerState) -> DeviceJob {
    sh.stats.cpu_fallbacks.fetch_add(1, Ordering::Relaxed);
    let d = &mut ws.decoded;
    DeviceJob {
        plan,
        image: DeviceSample::Rgb(std::mem::take(&mut d.image)),
        mask: d.mask.take(),
        cache_to: None,
    }
}

/// The device input of a sample kept in the device cache: its plan (on the whole upright
/// image), the copy of its image out of the cache, its label plane.
fn device_job_kept(sh: &Shared, s: &Sample, e: &DeviceEntry) -> (SamplePlan, MaybeJob) {
    let plan = sh
        .cfg
        .augment
        .plan(sh.cfg.seed, sh.epoch, s.id, e.width, e.height);
    let job = DeviceJob {
        plan,
        image: DeviceSample::Cached {
            offset: e.offset,
            width: e.width,
            height: e.height,
        },
        mask: e.mask.clone(),
        cache_to: None,
    };
    (plan, Some(job))
}

/// A place in the device cache for the whole upright image of `s` (`info` its headers),
/// when there is a device cache with room for it and the image fits one storage binding
/// of the device (as every decoded window must).
fn device_cache_place(
    sh: &Shared,
    s: &Sample,
    info: &crate::decode::ImageInfo,
) -> Option<Reservation> {
    let dc = sh.device_cache.as_ref()?;
    let (w, h) = info.oriented_size();
    let bytes = 4 * u64::from(w) * u64::from(h) + 256;
    if bytes > sh.cfg.device_max_binding {
        return None;
    }
    dc.reserve(s.id, w, h)
}

/// The device input of a sample in the host cache: its image, shared with the cache (no
/// copy), and a copy of its mask.
fn device_job_cached(plan: &SamplePlan, d: &Arc<Decoded>) -> MaybeJob {
    Some(DeviceJob {
        plan: *plan,
        image: DeviceSample::Shared(SharedImage::new(Arc::clone(d) as _)),
        mask: d.mask.clone(),
        cache_to: None,
    })
}

/// The device input of one sample: a JPEG entropy-decoded to coefficients for the
/// device's decode (only the window its plan reads, at the plan's IDCT scale), or, for
/// what that path does not take, the CPU decode, counted as a fallback.
fn prepare_device(
    sh: &Shared,
    s: &Sample,
    image: &[u8],
    mask: &[u8],
    ws: &mut WorkerState,
) -> Result<(SamplePlan, DeviceJob), SampleError> {
    let cfg = &sh.cfg;
    ws.reservation = None;
    if cfg.transform.is_some() {
        // The transform needs the pixels on the host: the CPU decodes the whole image.
        let plan = decode_and_transform(sh, s, image, mask, ws)?;
        return Ok((plan, decoded_job(sh, plan, ws)));
    }
    let t = Instant::now();
    let (info, plan) = plan_from_headers(sh, s, image)?;
    // With the device cache on, a sample that gets a place there is decoded whole on the
    // device and kept; the others go to the host cache when there is one.
    let reservation = device_cache_place(sh, s, &info);
    if reservation.is_none() && sh.cache.is_some() {
        // The cache keeps whole CPU-decoded images so any later crop can be served.
        let plan = decode_into(sh, s, image, mask, &mut ws.decoded)?;
        ws.warning = ws.decoded.warning.clone();
        sh.stats.cpu_fallbacks.fetch_add(1, Ordering::Relaxed);
        // The worker's decode buffers go with the job (the cache has made its copy): no
        // second copy of the image.
        let d = &mut ws.decoded;
        let job = DeviceJob {
            plan,
            image: DeviceSample::Rgb(std::mem::take(&mut d.image)),
            mask: d.mask.take(),
            cache_to: None,
        };
        return Ok((plan, job));
    }
    let opts = match reservation {
        // The whole upright image, at full scale: what any later plan may read.
        Some(_) => base_options(cfg),
        None => plan.decode_options(base_options(cfg), &info),
    };
    if s.mask.is_some() != cfg.has_masks {
        return Err(SampleError::new(
            s,
            SampleErrorKind::Mask,
            "sample and pipeline disagree on having a mask".into(),
        ));
    }
    // A JPEG the CPU decoded for part of its image (the coefficients being left to it)
    // takes the whole file's verdict, as on the CPU backend (see `decode_into`).
    let partial =
        info.format == crate::decode::Format::Jpeg && (opts.window.is_some() || opts.scale != 1);
    // What one device binding cannot hold is decoded by the CPU for this sample.
    let prepare = |hardware| {
        job::prepare_device_verified(
            image,
            info,
            &opts,
            &cfg.coeff_pool,
            hardware,
            cfg.device_entropy,
            cfg.device_max_binding,
            // A file's first crop on the device entropy path decodes it whole.
            !partial || cfg.verdicts.known_clean(s.id, image),
        )
        .and_then(|p| p.fit_bindings(image, &opts, &cfg.coeff_pool, cfg.device_max_binding))
        // Packed here, so that the batch's planner only copies (once, into staging).
        .and_then(|p| p.packed(&cfg.coeff_pool))
        .map_err(|e| decode_error(s, "image", &e))
    };
    let prepared = prepare(cfg.hardware_decode).and_then(|p| match p.image {
        DeviceSample::Encoded { .. } => verify_encoded(sh, s, image, p, prepare),
        _ if partial && p.cpu_reason.is_some() => {
            let mut p = p;
            p.warning = cfg
                .verdicts
                .check(s.id, image, &base_options(cfg))
                .map_err(|e| decode_error(s, "image", &e))?;
            Ok(p)
        }
        _ => Ok(p),
    });
    Counters::add(&sh.stats.decode_ns, t.elapsed());
    let prepared = prepared?;
    // The decoded window must fit one storage binding of the device.
    let (ww, wh) = match &prepared.image {
        DeviceSample::Jpeg { window, .. } | DeviceSample::Encoded { window, .. } => (
            window[2].saturating_sub(window[0]),
            window[3].saturating_sub(window[1]),
        ),
        DeviceSample::Rgb(img) => (img.width, img.height),
        DeviceSample::Shared(img) => (img.image().width, img.image().height),
        DeviceSample::Cached { width, height, .. } => (*width, *height),
        DeviceSample::Entropy { packed, .. } => {
            (packed.packed.image.width, packed.packed.image.height)
        }
        DeviceSample::Packed { packed, .. } => (packed.image.width, packed.image.height),
    };
    // (A binding starts on a 256-byte boundary at or before the window.)
    let bytes = 4 * u64::from(ww) * u64::from(wh) + 256;
    let largest = cfg.device_max_binding;
    if bytes > largest {
        return Err(SampleError::new(
            s,
            SampleErrorKind::Limit,
            format!(
                "image: its decoded window ({ww}x{wh}, {bytes} bytes) exceeds the device's largest storage binding ({largest} bytes)",
            ),
        ));
    }
    match &prepared.cpu_reason {
        Some(reason) => {
            log::debug!("{}: decoded on the CPU ({reason})", s.path);
            sh.stats.cpu_fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        None => {
            sh.stats.gpu_decoded.fetch_add(1, Ordering::Relaxed);
            let path = match &prepared.image {
                DeviceSample::Entropy { .. } => Some(&sh.stats.gpu_entropy),
                DeviceSample::Encoded { .. } => Some(&sh.stats.hardware),
                _ => None,
            };
            if let Some(counter) = path {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    ws.warning = prepared.warning.clone();
    let mask = match s.mask {
        Some(_) => {
            let mut m = LabelPlane::default();
            decode_mask_into(sh, s, mask, &mut m, info.oriented_size())?;
            Some(m)
        }
        None => None,
    };
    let cache_to = reservation.map(|mut r| {
        r.warning = prepared.warning.clone();
        let slot = r.slot();
        ws.reservation = Some(Box::new(r));
        slot
    });
    Ok((
        plan,
        DeviceJob {
            plan,
            image: prepared.image,
            mask,
            cache_to,
        },
    ))
}

/// A JPEG prepared for the hardware decoder (`p`, from `image`), verified as every other
/// JPEG is: the hardware decoder does not say whether or how a file is damaged, so libjpeg
/// reads its entropy-coded data whole, once (the whole file's verdict, see `verdict`: kept
/// for later epochs). A file the verdict refuses fails with its error, as on the CPU
/// backend. A file it delivers with a warning (damaged data in lenient mode, extraneous
/// bytes) carries the whole file's warning, as on the CPU backend, and is prepared again by
/// `prepare` for the hybrid path instead (libjpeg's coefficients), so that its pixels are
/// libjpeg's too rather than what the hardware makes of the damage.
fn verify_encoded(
    sh: &Shared,
    s: &Sample,
    image: &[u8],
    p: Prepared,
    prepare: impl FnOnce(HardwareDecode) -> Result<Prepared, SampleError>,
) -> Result<Prepared, SampleError> {
    match sh.cfg.verdicts.check(s.id, image, &base_options(&sh.cfg)) {
        Err(e) => Err(decode_error(s, "image", &e)),
        Ok(None) => Ok(p),
        Ok(Some(warning)) => {
            let mut again = prepare(HardwareDecode::Off)?;
            again.warning = Some(warning);
            Ok(again)
        }
    }
}

/// The decode options the pipeline's configuration sets: limits and strictness.
fn base_options(cfg: &super::Config) -> DecodeOptions {
    DecodeOptions {
        limits: cfg.limits,
        strict: cfg.strict_decode,
        ..DecodeOptions::default()
    }
}

/// Reads a sample's headers, checks them against the limits and makes its plan (in the
/// upright frame), before anything is decoded.
fn plan_from_headers(
    sh: &Shared,
    s: &Sample,
    image: &[u8],
) -> Result<(crate::decode::ImageInfo, SamplePlan), SampleError> {
    let cfg = &sh.cfg;
    let info = peek_info(image).map_err(|e| decode_error(s, "image", &e))?;
    check_limits(&info, &cfg.limits).map_err(|e| decode_error(s, "image", &e))?;
    let (w, h) = info.oriented_size();
    Ok((info, cfg.augment.plan(cfg.seed, sh.epoch, s.id, w, h)))
}

/// Decodes a sample's label mask into `out` and checks it matches the image's size.
fn decode_mask_into(
    sh: &Shared,
    s: &Sample,
    bytes: &[u8],
    out: &mut crate::decode::LabelPlane,
    size: (u32, u32),
) -> Result<(), SampleError> {
    crate::decode::cpu::decode_mask(bytes, &base_options(&sh.cfg), out)
        .map_err(|e| decode_error(s, "mask", &e))?;
    check_mask(s, out, size)
}

fn check_mask(
    s: &Sample,
    m: &crate::decode::LabelPlane,
    (w, h): (u32, u32),
) -> Result<(), SampleError> {
    if (m.width, m.height) != (w, h) {
        return Err(SampleError::new(
            s,
            SampleErrorKind::Mask,
            format!("mask is {}x{} but the image is {w}x{h}", m.width, m.height),
        ));
    }
    Ok(())
}

/// The plan of a sample served from the cache: cached images are whole, at full scale.
fn cached_plan(sh: &Shared, s: &Sample, d: &Decoded) -> SamplePlan {
    let (w, h) = d.image.full;
    sh.cfg.augment.plan(sh.cfg.seed, sh.epoch, s.id, w, h)
}

/// Reads the headers, makes the sample's plan, and decodes what the plan needs: with the
/// cache off, only the window the resize reads, at the plan's JPEG scale; with the cache
/// on, the whole image (which is then cached). Returns the plan.
fn decode_into(
    sh: &Shared,
    s: &Sample,
    image: &[u8],
    mask: &[u8],
    out: &mut Decoded,
) -> Result<SamplePlan, SampleError> {
    let t = Instant::now();
    let cfg = &sh.cfg;
    let (info, plan) = plan_from_headers(sh, s, image)?;
    let base = base_options(cfg);
    // With the cache on, decode whole images so any later crop can be served; a user
    // transform gets whole images too.
    let opts = if sh.cache.is_some() || cfg.transform.is_some() {
        base
    } else {
        plan.decode_options(base, &info)
    };
    // A crop-aware JPEG decode takes the whole file's verdict (see `verdict`), strict or
    // not: the same in every epoch, whatever the crop, and the same as the device
    // backends', which entropy-decode whole files.
    let partial = opts.window.is_some() || opts.scale != 1;
    let whole_file = (partial && info.format == crate::decode::Format::Jpeg)
        .then(|| cfg.verdicts.check(s.id, image, &base));
    let r = match &whole_file {
        Some(Err(e)) => Err(decode_error(s, "image", e)),
        _ => crate::decode::cpu::decode_image_report(image, &opts, &mut out.image)
            .map_err(|e| decode_error(s, "image", &e)),
    };
    let r = r.and_then(|report| {
        out.warning = match &whole_file {
            Some(Ok(w)) => w.clone(),
            _ => report.warning,
        };
        if s.mask.is_none() {
            out.mask = None;
            return Ok(());
        }
        let m = out.mask.get_or_insert_with(Default::default);
        decode_mask_into(sh, s, mask, m, info.oriented_size())
    });
    Counters::add(&sh.stats.decode_ns, t.elapsed());
    if r.is_ok() {
        if let Some(c) = &sh.cache {
            c.offer(s.id, out);
        }
    }
    r.map(|()| plan)
}

fn run(
    sh: &Shared,
    s: &Sample,
    d: &Decoded,
    plan: &SamplePlan,
    out: &mut SlotWriter,
    mask_out: Option<&mut SlotWriter>,
    scratch: &mut Scratch,
) -> Result<SamplePlan, SampleError> {
    let t = Instant::now();
    let plan = *plan;
    crate::augment::reference::execute_image(&plan, &d.image, out.bytes(), scratch);
    match (mask_out, &d.mask) {
        (Some(mo), Some(m)) => {
            let dst: &mut [u16] = bytemuck::try_cast_slice_mut(mo.bytes()).map_err(|e| {
                SampleError::new(s, SampleErrorKind::Internal, format!("mask slot: {e}"))
            })?;
            crate::augment::reference::execute_mask(&plan, m, dst);
        }
        (None, None) => {}
        _ => {
            return Err(SampleError::new(
                s,
                SampleErrorKind::Mask,
                "sample and pipeline disagree on having a mask".into(),
            ))
        }
    }
    Counters::add(&sh.stats.augment_ns, t.elapsed());
    Ok(plan)
}

//! The reader and worker threads of an epoch: read bytes, decode what the plan needs,
//! execute the plan into the sample's batch slot, report the outcome.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{select, Receiver, RecvTimeoutError, Sender};

use std::sync::{Arc, Mutex};

use super::batch::SampleWarning;
use super::cache::Cache;
use super::memory::{SlotMemory, SlotWriter};
use super::readers::read_sample;
use super::staging::{Staged, StagingRing};
use super::stats::Counters;
use super::verdict::Verdicts;
use super::{Config, OnError};
use crate::augment::SamplePlan;
use crate::backend::device::cache::Reservation;
use crate::backend::device::job::DeviceJob;
use crate::backend::device::sample_work::{
    Count, Cx, Decoded, HostImage, Kept, Made, Masked, Planned, SampleHost, Slot, WorkScratch,
};
use crate::backend::device::DeviceBuffers;
use crate::decode::{check_limits, peek_info, DecodeError, DecodeOptions, DecodeWarning};
use crate::decode::{ImageInfo, LabelPlane};
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
    /// Kept on the device: nothing was read.
    DeviceCached(Kept),
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
    pub(super) stats: Arc<Counters>,
    pub(super) epoch: u64,
    /// The rank's own samples this epoch: replacements come from here, so a replacement
    /// never appears on another rank.
    pub(super) replace_pool: Arc<[usize]>,
    pub(super) staging: StagingRing,
    pub(super) workers_kept: Arc<Mutex<Vec<WorkerState>>>,
    /// Reader threads started so far this epoch.
    pub(super) readers_started: std::sync::atomic::AtomicUsize,
    /// The reader threads autotune added mid-epoch (see `more_readers`).
    pub(super) added: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

pub(super) fn reader(
    sh: &Arc<Shared>,
    read_rx: &Receiver<Job>,
    load_tx: &Sender<Loaded>,
    cancel: &Receiver<()>,
) {
    let limits = sh.cfg.limits;
    loop {
        more_readers(sh, read_rx, load_tx, cancel);
        let job = select! {
            recv(read_rx) -> j => match j { Ok(j) => j, Err(_) => return },
            recv(cancel) -> _ => return,
        };
        let sample = &sh.subset.samples()[job.sample];
        let on_device = sh.cfg.work.kept(sample.id);
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
                    let t = Instant::now();
                    if let Err(RecvTimeoutError::Disconnected) = cancel.recv_timeout(lat) {
                        return;
                    }
                    // The simulated store's latency is reading time, as a real one's is.
                    sh.stats
                        .spent(&sh.stats.read_ns, "read latency", t.elapsed(), sample.id);
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
    /// The backend's host work's: the last decode, what the decoder tolerated in the
    /// sample last made, its device-cache place.
    host: WorkScratch,
    replace: Staged,
    /// The targets the user transform left for the sample last made (set by
    /// `transformed`).
    targets: Option<Arc<Targets>>,
}

/// Starts the reader threads autotune has added since the epoch's were started, on the
/// same queues: each new one is started by a running reader, with its own handles, so
/// the queues close as they would without it. Their handles go to `sh.added`, which the
/// epoch joins.
fn more_readers(
    sh: &Arc<Shared>,
    read_rx: &Receiver<Job>,
    load_tx: &Sender<Loaded>,
    cancel: &Receiver<()>,
) {
    loop {
        let n = sh.readers_started.load(Ordering::Acquire);
        if n >= sh.cfg.tune.readers() {
            return;
        }
        if sh
            .readers_started
            .compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue;
        }
        let (sh2, rx, tx, c) = (
            Arc::clone(sh),
            read_rx.clone(),
            load_tx.clone(),
            cancel.clone(),
        );
        let started = std::thread::Builder::new()
            .name(format!("stoker-reader-{n}"))
            .spawn(move || reader(&sh2, &rx, &tx, &c));
        match (started, sh.added.lock()) {
            (Ok(h), Ok(mut added)) => added.push(h),
            (Ok(h), Err(_)) => drop(h),
            (Err(e), _) => {
                log::warn!("autotune: reader thread {n} not started ({e}); {n} readers");
                sh.cfg.tune.set_readers(n);
                sh.readers_started.store(n, Ordering::Release);
                return;
            }
        }
    }
}

pub(super) fn worker(
    sh: &Arc<Shared>,
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
        let t = Instant::now();
        let Loaded { job, payload } = select! {
            recv(load_rx) -> m => match m { Ok(m) => m, Err(_) => return },
            recv(cancel) -> _ => return,
        };
        // Waiting for bytes: what tells autotune the readers are behind.
        Counters::add(&sh.stats.starved_ns, t.elapsed());
        sh.stats.worked.fetch_add(1, Ordering::Relaxed);
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
    ws.host.warning = None;
    ws.host.reservation = None;
    ws.targets = None;
    let work = &sh.cfg.work;
    let first = match payload {
        Payload::DeviceCached(e) => {
            ws.host.warning = e.warning.clone();
            let plan =
                sh.cfg
                    .augment_of(sample)
                    .plan(sh.cfg.seed, sh.epoch, sample.id, e.width, e.height);
            work.make_kept(plan, e)
        }
        Payload::Cached(d) if sh.cfg.transform.is_some() => {
            ws.host.warning = d.warning.clone();
            // The cache keeps samples as decoded: the transform changes a copy.
            ws.host.decoded.clone_from(&**d);
            transformed(sh, sample, ws).and_then(|plan| {
                let cx = cx(sh, sample, slot_of(w, mask_writer.as_mut()), ws);
                work.make_decoded(cx, plan, HostImage::Worker)
            })
        }
        Payload::Cached(d) => {
            ws.host.warning = d.warning.clone();
            let plan = cached_plan(sh, sample, d);
            let cx = cx(sh, sample, slot_of(w, mask_writer.as_mut()), ws);
            work.make_decoded(cx, plan, HostImage::Shared(d))
        }
        Payload::Staged(st) => {
            let slot = slot_of(w, mask_writer.as_mut());
            attempt(sh, sample, &st.image, &st.mask, slot, ws)
        }
        Payload::Failed(e, _) => Err(e.clone()),
    };
    let error = match first {
        Ok(made) => {
            return Outcome {
                delivered: Some(delivered(ws, sample, job.sample, made, None)),
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
        let slot = slot_of(w, mask_writer.as_mut());
        attempt(sh, cand, &st.image, &st.mask, slot, ws)
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
    mut make: impl FnMut(&Sample, &Staged, &mut WorkerState) -> Made,
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
        ws.host.warning = None;
        ws.targets = None;
        let r = read_sample(cand, &sh.cfg.limits, &mut st.image, &mut st.mask, &sh.stats)
            .and_then(|()| make(cand, &st, ws));
        ws.replace = st;
        match r {
            Ok(made) => {
                let stands_in = StandsIn {
                    failed,
                    failed_id,
                    position,
                };
                return Some(delivered(ws, cand, index, made, Some(stands_in)));
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
            attempt(sh, cand, &st.image, &st.mask, Slot::none(), ws)
        }));
        match r {
            Ok(r) => r,
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

/// The slot of host batch memory a worker's writers hold.
fn slot_of<'a>(w: &'a mut SlotWriter, mask: Option<&'a mut SlotWriter>) -> Slot<'a> {
    Slot {
        image: w.bytes(),
        mask: mask.map(SlotWriter::bytes),
    }
}

/// Makes one sample from its bytes into its slot, as the backend's host work does; a
/// user transform first gets it decoded whole on the host.
fn attempt(
    sh: &Shared,
    s: &Sample,
    image: &[u8],
    mask: &[u8],
    slot: Slot<'_>,
    ws: &mut WorkerState,
) -> Made {
    let work = &sh.cfg.work;
    if sh.cfg.transform.is_some() {
        ws.host.reservation = None;
        let plan = decode_and_transform(sh, s, image, mask, ws)?;
        return work.make_decoded(cx(sh, s, slot, ws), plan, HostImage::Worker);
    }
    work.make(cx(sh, s, slot, ws), (image, mask))
}

/// The context of one sample's host work.
fn cx<'a>(sh: &'a Shared, s: &'a Sample, slot: Slot<'a>, ws: &'a mut WorkerState) -> Cx<'a> {
    Cx {
        host: sh,
        sample: s,
        slot,
        ws: &mut ws.host,
    }
}

/// A sample made (`sample`, at index `index` of the subset), as the collector takes it:
/// with what the worker's state holds of it.
fn delivered(
    ws: &mut WorkerState,
    sample: &Sample,
    index: usize,
    (plan, gpu): (SamplePlan, Option<DeviceJob>),
    replaced: Option<StandsIn>,
) -> Delivered {
    Delivered {
        id: sample.id,
        sample: index,
        label: sample.label,
        replaced: replaced.map(Box::new),
        plan,
        gpu,
        warning: ws
            .host
            .warning
            .take()
            .map(|w| Box::new(SampleWarning::new(sample, w))),
        reservation: ws.host.reservation.take(),
        targets: ws.targets.take(),
    }
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
    let _ = decode_into(sh, s, image, mask, &mut ws.host.decoded)?;
    ws.host.warning = ws.host.decoded.warning.clone();
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
    let d = &mut ws.host.decoded;
    let r = super::transform::apply(
        t,
        (cfg.seed, sh.epoch),
        &cfg.limits,
        s,
        &mut d.image,
        d.mask.as_mut(),
    );
    sh.stats
        .spent(&sh.stats.augment_ns, "transform", time.elapsed(), s.id);
    ws.targets = r?;
    let (w, h) = (d.image.width, d.image.height);
    Ok(cfg.augment_of(s).plan(cfg.seed, sh.epoch, s.id, w, h))
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
    Ok((info, cfg.augment_of(s).plan(cfg.seed, sh.epoch, s.id, w, h)))
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
    sh.cfg.augment_of(s).plan(sh.cfg.seed, sh.epoch, s.id, w, h)
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
    let r = if partial && info.format == crate::decode::Format::Jpeg {
        decode_judged(cfg, s.id, image, (&opts, &base), &mut out.image)
    } else {
        crate::decode::cpu::decode_image_report(image, &opts, &mut out.image).map(|r| r.warning)
    };
    let r = r
        .map_err(|e| decode_error(s, "image", &e))
        .and_then(|warning| {
            out.warning = warning;
            if s.mask.is_none() {
                out.mask = None;
                return Ok(());
            }
            let m = out.mask.get_or_insert_with(Default::default);
            decode_mask_into(sh, s, mask, m, info.oriented_size())
        });
    sh.stats
        .spent(&sh.stats.decode_ns, "decode", t.elapsed(), s.id);
    if r.is_ok() {
        if let Some(c) = &sh.cache {
            c.offer(s.id, out);
        }
    }
    r.map(|()| plan)
}

/// A crop-aware JPEG decode under the whole file's verdict: the decode's error, or the
/// whole file's warning. A file seen before has its verdict kept. A file seen first is
/// judged by its crop's decode read on to the file's end
/// ([`crate::decode::cpu::decode_image_judging_whole`]); when that finds it clean, it is
/// recorded clean and the crop is delivered, for about the cost of one decode instead of
/// two. Anything else (a warning, an error) is judged again by [`Verdicts::check`] and the
/// crop decoded again as in any later epoch, so a damaged file's verdict and pixels are
/// exactly those of every other epoch.
fn decode_judged(
    cfg: &Config,
    id: u64,
    image: &[u8],
    (opts, base): (&DecodeOptions, &DecodeOptions),
    out: &mut crate::decode::Image8,
) -> Result<Option<DecodeWarning>, DecodeError> {
    use crate::decode::{cpu, crop_index};
    let key = Verdicts::key(image);
    let warning = match cfg.verdicts.known_aided(id, key) {
        Some((known, aid)) => {
            let warning = known?;
            // A decode with the aid that fails (a libjpeg the row index does not fit, a
            // copy that does not decode) is answered by a decode of the file itself: a
            // known file decodes as it did.
            if crop_index::decode_with(image, opts, out, &aid) {
                return Ok(warning);
            }
            warning
        }
        None => {
            let copies = cfg.verdicts.keeps_aids();
            if let Ok((r, aid)) = crop_index::decode_first(image, opts, out, copies) {
                if r.warning.is_none() {
                    cfg.verdicts.record_aided(id, key, Ok(None), aid);
                    return Ok(None);
                }
            }
            cfg.verdicts.check_keyed(id, image, key, base)?
        }
    };
    cpu::decode_image_report(image, opts, out)?;
    Ok(warning)
}

impl Shared {
    fn counter(&self, what: Count) -> &std::sync::atomic::AtomicU64 {
        match what {
            Count::CpuFallback => &self.stats.cpu_fallbacks,
            Count::GpuDecoded => &self.stats.gpu_decoded,
            Count::GpuEntropy => &self.stats.gpu_entropy,
            Count::GpuSyncEntropy => &self.stats.gpu_sync_entropy,
            Count::Hardware => &self.stats.hardware,
        }
    }
}

/// What the pipeline offers the backend's host work: the decode every backend shares,
/// the host cache and the verdicts, and the epoch's counters.
impl SampleHost for Shared {
    fn base_options(&self) -> DecodeOptions {
        base_options(&self.cfg)
    }

    fn plan_from_headers(
        &self,
        s: &Sample,
        image: &[u8],
    ) -> Result<(ImageInfo, SamplePlan), SampleError> {
        plan_from_headers(self, s, image)
    }

    fn decode_into(&self, s: &Sample, (image, mask): (&[u8], &[u8]), out: &mut Decoded) -> Planned {
        decode_into(self, s, image, mask, out)
    }

    fn decode_mask(&self, s: &Sample, bytes: &[u8], size: (u32, u32)) -> Masked {
        let mut m = LabelPlane::default();
        decode_mask_into(self, s, bytes, &mut m, size).map(|()| m)
    }

    fn has_host_cache(&self) -> bool {
        self.cache.is_some()
    }

    fn has_masks(&self) -> bool {
        self.cfg.has_masks
    }

    fn verdict(&self, id: u64, image: &[u8]) -> Result<Option<DecodeWarning>, DecodeError> {
        self.cfg.verdicts.check(id, image, &base_options(&self.cfg))
    }

    fn known_clean(&self, id: u64, image: &[u8]) -> bool {
        self.cfg.verdicts.known_clean(id, image)
    }

    fn record_clean(&self, id: u64, image: &[u8]) {
        self.cfg.verdicts.record_clean(id, image);
    }

    fn count(&self, what: Count) {
        self.counter(what).fetch_add(1, Ordering::Relaxed);
    }

    fn uncount(&self, what: Count) {
        self.counter(what).fetch_sub(1, Ordering::Relaxed);
    }

    fn decode_time(&self, d: std::time::Duration, id: u64) {
        self.stats.spent(&self.stats.decode_ns, "decode", d, id);
    }

    fn augment_time(&self, d: std::time::Duration, id: u64) {
        self.stats.spent(&self.stats.augment_ns, "augment", d, id);
    }

    fn decode_error(&self, s: &Sample, what: &str, e: &DecodeError) -> SampleError {
        decode_error(s, what, e)
    }
}

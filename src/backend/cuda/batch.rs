//! Batches on a CUDA device.
//!
//! # Memory and streams
//! - A ring of `K` slots, each a pinned (write-combined) staging buffer, a device input
//!   buffer and two events: `uploaded` (the copy out of the staging buffer is done) and
//!   `consumed` (the kernels that read the input buffer are done).
//! - A copy stream and a compute stream. Batch `b` uses slot `b % K`: the host waits for
//!   the slot's `uploaded` event before writing its staging buffer, the copy stream waits
//!   for its `consumed` event before overwriting its input, and the compute stream waits
//!   for `uploaded` before the kernels. So the upload of batch `b + 1` overlaps the
//!   kernels of batch `b`, and a slot is reused only after its event has completed.
//! - One set of scratch buffers (planes, windows, intermediates) on the compute stream,
//!   where batches run in order; the output buffers belong to the pipeline's batch ring.
//!
//! - The device cache of decoded samples ([`Buffer::DecodedCache`]), when set up
//!   ([`DeviceBatcher::set_decoded_cache`]): one allocation on the compute stream kept
//!   across batches and epochs, grown within its budget by a copy on that stream. Batches
//!   copy images into it after decoding them and out of it into their windows, all on the
//!   compute stream, so a later batch's copy out follows the copy in.
//!
//! Every buffer is grow-only: after the largest batch has been seen, the memory in
//! flight is fixed ([`CudaBatcher::memory_in_flight`]); it never grows with the dataset.
#![doc(hidden)]

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaFunction, CudaSlice, CudaStream};

use super::hardware::{decode_chain, Attempt, BatchDecode, ImageFailure, Path};
use super::memory::{self, address, DeviceBuffer, KeptBuffer, KernelArgs, Pinned, PlainBuffer};
use super::nvjpeg;
use super::{device_err, guard, kernels, CudaDevice, CudaError};
use crate::augment::mix::BatchMix;
use crate::backend::device::batch::{BatchPlan, DeviceLimits, EncodedJob, HARDWARE_HEADER_WORDS};
use crate::backend::device::batcher::{
    downcast_buffers, BatchShape, DeviceBatcher, DeviceBuffers, Plane,
};
use crate::backend::device::job::{DeviceJob, DeviceSample, HardwareDecode};
use crate::backend::device::launch::{Buffer, Kernel, Step, MAX_BINDINGS};
use crate::backend::device::{DecodePaths, DeviceError, Rejected};
use crate::decode::{DecodeOptions, Image8};
use crate::error::{Error, Result};

mod interface;
mod submit;

/// The output buffers of one batch in flight, on the device.
#[derive(Debug)]
pub struct CudaBatchBuffers {
    /// `batch_size * image_bytes` (rounded up to 4 bytes): slot `i` at `i * image_bytes`.
    pub images: CudaSlice<u8>,
    /// `batch_size * w * h` u16 class ids (rounded up to 4 bytes), for segmentation sets.
    pub masks: Option<CudaSlice<u8>>,
    /// Recorded on the consumer's stream when the batch was handed back: the next batch
    /// written here waits for it.
    pub released: Option<CudaEvent>,
    /// The stream that last wrote the buffers: finished before they are freed.
    writer: Option<Arc<CudaStream>>,
    /// The device, whose consumer stream reads the batch and records its release.
    device: CudaDevice,
    /// Completes when the batch written last is ready; the consumer's stream waits on it.
    ready: Option<CudaEvent>,
}

impl Drop for CudaBatchBuffers {
    fn drop(&mut self) {
        // The buffers are freed on the stream they were made on; the kernels writing
        // them run on another, so let those finish first.
        if let Some(w) = &self.writer {
            if let Err(e) = w.synchronize() {
                log::warn!("cuda: finishing a batch before freeing it: {e}");
            }
        }
    }
}

impl CudaBatchBuffers {
    /// The device the buffers live on; its consumer stream waits for each batch.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    /// Output buffers for a batch of `shape`, zeroed.
    pub fn new(device: &CudaDevice, shape: BatchShape) -> Result<Self> {
        let stream = device.stream();
        let make = |bytes: usize| -> Result<CudaSlice<u8>> {
            let size = usize::try_from(shape.bytes("a CUDA batch", bytes)?).map_err(|_| {
                DeviceError::Overflow {
                    what: "a CUDA batch".into(),
                    count: shape.slots as u64,
                    each: bytes as u64,
                }
            })?;
            stream
                .alloc_zeros::<u8>(size.div_ceil(4).max(1) * 4)
                .map_err(device_err)
        };
        Ok(CudaBatchBuffers {
            images: make(shape.image_bytes)?,
            masks: match shape.mask_bytes {
                0 => None,
                m => Some(make(m)?),
            },
            released: None,
            writer: None,
            device: device.clone(),
            ready: None,
        })
    }
}

/// One slot of the staging ring.
struct Slot {
    pinned: Pinned,
    input: DeviceBuffer,
    uploaded: CudaEvent,
    consumed: Arc<CudaEvent>,
    used: bool,
}

/// Records `event` on `stream` when dropped: on every path out of a batch's submission
/// (an error, a panic), so the next user of what the event guards waits for the work
/// queued so far. Without the event it synchronises the stream instead.
struct RecordOnDrop {
    events: Vec<Arc<CudaEvent>>,
    stream: Arc<CudaStream>,
}

impl Drop for RecordOnDrop {
    fn drop(&mut self) {
        for e in &self.events {
            if let Err(err) = e.record(&self.stream) {
                log::warn!("cuda: cannot record an event ({err}); synchronising");
                if let Err(err) = self.stream.synchronize() {
                    log::warn!("cuda: synchronising: {err}");
                }
            }
        }
    }
}

/// The scratch buffers of the batches.
#[derive(Debug, Default)]
struct Scratch {
    planes: DeviceBuffer,
    windows: DeviceBuffer,
    oriented: DeviceBuffer,
    horizontal: DeviceBuffer,
    resized: DeviceBuffer,
    coefficients: DeviceBuffer,
    entropy_status: DeviceBuffer,
    /// The copy of the images the mixing pass reads.
    mix_scratch: DeviceBuffer,
    /// The self-synchronising decode's records ([`Buffer::SyncRecords`]).
    sync_records: DeviceBuffer,
}

/// One of the hardware decoder's two output buffers ([`Buffer::Rgbi`]).
struct HardwareOutput {
    /// Plainly allocated: the engines write it when called, not in stream order.
    buf: Option<PlainBuffer>,
    /// Recorded on the compute stream after the last kernel of the batch that read the
    /// buffer; host-waited before the engines write it again.
    released: Arc<CudaEvent>,
}

/// nvJPEG on the device: the hardware decoder, and nvJPEG's own GPU decoder for what the
/// hardware refuses, on a stream of their own.
///
/// # Ordering
/// The hardware backend writes its output while `nvjpegDecodeBatched` runs, not in stream
/// order, and a device-side event wait does not gate it; only a host wait does. So:
/// - the output is one of two plainly allocated buffers, used by alternate batches;
///   before the engines write one, the host waits for its `released` event, recorded
///   after the kernels of the batch that read it last (two batches back);
/// - the hardware step runs first in a batch, before its upload and kernels are queued,
///   so that wait never covers the batch's own work;
/// - nvJPEG works on its own stream; the host waits for its `decoded` event only (never
///   for the compute stream, which also waits on the consumer's release of the batch's
///   output buffers), and the compute stream waits on `decoded` before the kernels that
///   read the output;
/// - the host bytes nvJPEG reads are staged in pinned memory, reused once `decoded` has
///   completed.
struct Hardware {
    policy: HardwareDecode,
    engine: nvjpeg::Decoder,
    fallback: Option<nvjpeg::Decoder>,
    stream: Arc<CudaStream>,
    decoded: CudaEvent,
    staging: Pinned,
    outputs: [HardwareOutput; 2],
    next: usize,
    paths: DecodePaths,
}

/// Runs batches on one CUDA device. Used by one thread at a time (the pipeline's
/// collector); everything it allocates is reused from batch to batch.
pub struct CudaBatcher {
    device: CudaDevice,
    copy: Arc<CudaStream>,
    compute: Arc<CudaStream>,
    functions: HashMap<Kernel, CudaFunction>,
    plan: BatchPlan,
    slots: Vec<Slot>,
    next: usize,
    scratch: Scratch,
    hardware: Option<Hardware>,
    /// Whether what nvJPEG refuses is decoded strictly by the CPU (as the pipeline's).
    strict: bool,
    /// The device cache of decoded samples (on the compute stream) and its budget in
    /// bytes (0: none).
    decoded_cache: KeptBuffer,
    decoded_cache_budget: u64,
    /// Where the device entropy pass's status words are copied back to (page-locked).
    status: Pinned,
}

impl std::fmt::Debug for CudaBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBatcher")
            .field("device", &self.device.name())
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl CudaBatcher {
    /// Compiles (or takes from the cache) and loads the kernels on `device`; `ring`
    /// staging slots (at least 2).
    pub fn new(device: &CudaDevice, ring: usize) -> Result<Self> {
        let (major, minor) = device.capability();
        let ctx = device.context();
        let loaded = kernels::load(ctx, major, minor)?;
        loaded.report.log();
        let functions = loaded.functions;
        let copy = ctx.new_stream().map_err(device_err)?;
        let compute = ctx.new_stream().map_err(device_err)?;
        let mut slots = Vec::new();
        for _ in 0..ring.max(2) {
            slots.push(Slot {
                pinned: Pinned::default(),
                input: DeviceBuffer::default(),
                uploaded: ctx.new_event(None).map_err(device_err)?,
                consumed: Arc::new(ctx.new_event(None).map_err(device_err)?),
                used: false,
            });
        }
        Ok(CudaBatcher {
            device: device.clone(),
            copy,
            compute,
            functions,
            plan: BatchPlan::new(DeviceLimits::UNBOUNDED),
            slots,
            next: 0,
            scratch: Scratch::default(),
            hardware: None,
            strict: true,
            decoded_cache: KeptBuffer::default(),
            decoded_cache_budget: 0,
            status: Pinned::readable(),
        })
    }

    /// Uses nvJPEG's hardware decoder for the JPEGs `policy` takes, when the device has
    /// one; without one (or without nvJPEG) everything stays on the hybrid path, logged.
    pub fn with_hardware_decode(mut self, policy: HardwareDecode, batch_size: usize) -> Self {
        self.hardware = None;
        if policy == HardwareDecode::Off {
            return self;
        }
        match self.open_hardware(policy, batch_size) {
            Ok(h) => {
                let (engines, cores) = h.engine.engines();
                log::info!(
                    "cuda: nvJPEG hardware decoder ({engines} engines, {cores} cores) for {policy:?} JPEGs"
                );
                self.hardware = Some(h);
            }
            Err(e) => log::info!("cuda: no hardware JPEG decoder ({e}); hybrid decode only"),
        }
        self
    }

    fn open_hardware(&self, policy: HardwareDecode, batch_size: usize) -> Result<Hardware> {
        let lib = nvjpeg::Library::load()?;
        self.device.context().bind_to_thread().map_err(device_err)?;
        let engine = nvjpeg::Decoder::with_hardware(&lib, batch_size.max(1), true)?;
        if !engine.hardware() {
            return Err(Error::BackendUnavailable {
                backend: "nvjpeg".into(),
                reason: "the device has no JPEG decode engines".into(),
            });
        }
        let fallback = nvjpeg::Decoder::with_hardware(&lib, batch_size.max(1), false)
            .map_err(|e| log::info!("cuda: nvJPEG's GPU decoder unavailable ({e})"))
            .ok();
        let ctx = self.device.context();
        let output = || -> Result<HardwareOutput> {
            Ok(HardwareOutput {
                buf: None,
                released: Arc::new(ctx.new_event(None).map_err(device_err)?),
            })
        };
        Ok(Hardware {
            policy,
            engine,
            fallback,
            stream: ctx.new_stream().map_err(device_err)?,
            decoded: ctx
                .new_event(Some(
                    cudarc::driver::sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC,
                ))
                .map_err(device_err)?,
            staging: Pinned::readable(),
            outputs: [output()?, output()?],
            next: 0,
            paths: DecodePaths::default(),
        })
    }

    /// Decodes what the hardware decoder refuses strictly (the default) or leniently, as
    /// the pipeline decodes.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Which JPEGs the workers should hand over whole ([`DeviceSample::Encoded`]): the
    /// policy when a hardware decoder is open, else [`HardwareDecode::Off`].
    pub fn hardware_decode(&self) -> HardwareDecode {
        self.hardware
            .as_ref()
            .map_or(HardwareDecode::Off, |h| h.policy)
    }

    /// The device.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    /// Bytes of pinned and device memory the batcher holds (staging ring, inputs,
    /// scratch; not the pipeline's output ring).
    pub fn memory_in_flight(&self) -> u64 {
        let s = &self.scratch;
        self.slots
            .iter()
            .map(|k| k.pinned.bytes() + k.input.bytes())
            .sum::<u64>()
            + s.planes.bytes()
            + s.windows.bytes()
            + s.oriented.bytes()
            + s.horizontal.bytes()
            + s.resized.bytes()
            + s.coefficients.bytes()
            + s.entropy_status.bytes()
            + s.mix_scratch.bytes()
            + s.sync_records.bytes()
            + self.hardware.as_ref().map_or(0, |h| {
                h.staging.bytes()
                    + h.outputs
                        .iter()
                        .map(|o| o.buf.as_ref().map_or(0, |b| b.len() as u64))
                        .sum::<u64>()
            })
    }

    /// How many encoded JPEGs each decoder took so far.
    pub fn decode_paths(&self) -> DecodePaths {
        self.hardware
            .as_ref()
            .map_or(DecodePaths::default(), |h| h.paths)
    }

    /// Decodes and augments `jobs` into `out` (slot `i` for job `i`). Returns without
    /// waiting, with the event that completes when the batch is ready.
    /// With `mix`, the images are then mixed as it says, on the same stream.
    pub fn run(
        &mut self,
        jobs: &[DeviceJob],
        mix: Option<&BatchMix>,
        out: &mut CudaBatchBuffers,
    ) -> Result<CudaEvent> {
        self.plan.plan_mixed(jobs, out.masks.is_some(), mix)?;
        // The compute stream waits for the consumer's release of `out` (`submit`, before
        // the first launch that writes it); it is forgotten only once that wait is queued,
        // so a batch rejected and run again still waits for it.
        let done = self.submit(Some(out), &|i| jobs.get(i).map(|j| &j.image))?;
        out.released = None;
        out.writer = Some(Arc::clone(&self.compute));
        Ok(done)
    }

    /// Decodes `images` and returns without waiting, with the event that completes when
    /// the windows are decoded (for decode benchmarks).
    pub fn decode(&mut self, images: &[DeviceSample]) -> Result<CudaEvent> {
        self.plan.plan_decode(images.iter())?;
        self.submit(None, &|i| images.get(i))
    }

    /// Decodes `images` and reads the windows back (to compare backends). Blocks.
    pub fn decode_to_host(&mut self, images: &[DeviceSample]) -> Result<Vec<Image8>> {
        let done = self.decode(images)?;
        done.synchronize().map_err(device_err)?;
        let Some(windows) = self.scratch.windows.get() else {
            return Ok(Vec::new());
        };
        let n = self.plan.sizes().windows as usize;
        let bytes = self
            .compute
            .clone_dtoh(&windows.slice(..n.min(windows.len())))
            .map_err(device_err)?;
        self.plan.windows_to_host(&bytes)
    }

    /// Decodes the batch's encoded JPEGs into the next hardware output buffer (see
    /// `Hardware` for the ordering) and makes the compute stream wait for them: the
    /// buffer's address, length and `released` event, or `None` when the batch has none.
    /// Samples nothing decodes are [`DeviceError::Rejected`].
    #[allow(clippy::type_complexity)]
    fn hardware_step<'a>(
        &mut self,
        sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    ) -> Result<Option<(u64, u64, Arc<CudaEvent>)>> {
        let jobs = self.plan.encoded();
        if jobs.is_empty() {
            return Ok(None);
        }
        let Some(h) = self.hardware.as_mut() else {
            return Err(DeviceError::NoHardwareDecoder.into());
        };
        let need = self.plan.sizes().rgbi;
        let which = h.next % h.outputs.len();
        h.next += 1;
        let out = &mut h.outputs[which];
        // The kernels of the batch that read this buffer last have finished: the engines
        // may write it (they do so when called, whatever the streams have queued).
        out.released.synchronize().map_err(device_err)?;
        if out.buf.as_ref().is_none_or(|b| (b.len() as u64) < need) {
            out.buf = None;
            let bytes = usize::try_from(need + need / 2).map_err(|_| DeviceError::TooLarge {
                what: "the hardware decoder's output in bytes",
                value: need,
                max: usize::MAX as u64,
            })?;
            out.buf = Some(PlainBuffer::new(self.device.context(), bytes)?);
        }
        let (base, len) = match &out.buf {
            Some(b) => (b.ptr(), b.len() as u64),
            None => return Err(CudaError::Missing("hardware output buffer").into()),
        };
        let released = Arc::clone(&out.released);
        let rejected = decode_encoded(&self.device, h, jobs, sample, (base, len), self.strict)?;
        if !rejected.is_empty() {
            return Err(DeviceError::Rejected(rejected).into());
        }
        // Only a device-side wait: the host has already waited for `decoded`.
        self.compute.wait(&h.decoded).map_err(device_err)?;
        Ok(Some((base, len, released)))
    }

    /// Blocks until every batch enqueued so far is done.
    pub fn wait(&self) -> Result<()> {
        self.compute.synchronize().map_err(device_err)
    }
}

impl Drop for CudaBatcher {
    fn drop(&mut self) {
        // Staging, inputs and scratch are freed on their streams, but the host may not
        // unpin memory a copy still reads: finish both streams first.
        let hardware = self.hardware.as_ref().map(|h| &h.stream);
        for s in [Some(&self.copy), Some(&self.compute), hardware]
            .into_iter()
            .flatten()
        {
            if let Err(e) = s.synchronize() {
                log::warn!("cuda: finishing the batcher's work: {e}");
            }
        }
    }
}

impl CudaBatchBuffers {
    /// The event that completes when the batch written last is ready.
    pub fn ready(&self) -> Option<&CudaEvent> {
        self.ready.as_ref()
    }
}

/// Decodes the batch's [`EncodedJob`]s whole into [`Buffer::Rgbi`] (`rgbi`: address and
/// length of the hardware output buffer, which no queued kernel reads: see `Hardware`)
/// where the plan puts them, down the chain of [`super::hardware`]: the engines, nvJPEG's
/// GPU decoder, the CPU decoder (uploaded). Works on nvJPEG's own stream and returns once
/// the host has waited for its `decoded` event; the samples nothing decoded, with why.
fn decode_encoded<'a>(
    device: &CudaDevice,
    h: &mut Hardware,
    jobs: &[EncodedJob],
    sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    rgbi: (u64, u64),
    strict: bool,
) -> Result<Vec<Rejected>> {
    let (base, len) = rgbi;
    let mut bytes: Vec<&[u8]> = Vec::with_capacity(jobs.len());
    for j in jobs {
        if j.rgbi.0 + j.rgbi_bytes() > len {
            return Err(DeviceError::Outside {
                sample: j.sample,
                buffer: Buffer::Rgbi,
                start: j.rgbi.0,
                end: j.rgbi.0 + j.rgbi_bytes(),
                len,
            }
            .into());
        }
        match sample(j.sample) {
            Some(DeviceSample::Encoded { bytes: b, .. }) => bytes.push(b.as_slice()),
            _ => return Err(DeviceError::NotEncoded(j.sample).into()),
        }
    }
    // Each image's planes, at their stored resolution, in its region.
    let out = |k: usize| {
        let j = &jobs[k];
        let mut o = nvjpeg::DevicePlanes {
            components: j.components,
            ptr: [0; 3],
            pitch: [0; 3],
            width: [0; 3],
            height: [0; 3],
        };
        for (c, p) in j.planes[..j.components.min(3) as usize].iter().enumerate() {
            o.ptr[c] = base + j.rgbi.0 + p.offset;
            o.pitch[c] = p.pitch as usize;
            o.width[c] = p.width;
            o.height[c] = p.height;
        }
        o
    };
    device.context().bind_to_thread().map_err(device_err)?;
    // Which images the engines claim, parsed from the jobs' own bytes.
    let supported: Vec<bool> = bytes
        .iter()
        .map(|b| h.engine.hardware_supports(b))
        .collect();
    // The bytes nvJPEG reads, staged in pinned memory: nothing reads the staging buffer
    // now (the last batch's nvJPEG work was host-waited before it returned).
    let total: usize = bytes.iter().map(|b| b.len()).sum();
    let staging = h.staging.ensure(device, total as u64)?;
    let mut at = 0;
    let mut spans = Vec::with_capacity(bytes.len());
    for b in &bytes {
        staging[at..at + b.len()].copy_from_slice(b);
        spans.push(at..at + b.len());
        at += b.len();
    }
    let staging: &[u8] = staging;
    let pinned: Vec<&[u8]> = spans.into_iter().map(|r| &staging[r]).collect();
    let stream = &h.stream;
    let guards = guard::guards(jobs);
    // SAFETY: each guard lies in its image's region of the hardware output buffer
    // (checked above), which no queued kernel reads (see `call`), and is freed only after
    // a host wait for nvJPEG's stream.
    unsafe { guard::arm(stream, base, &guards)? };
    // One call on a decoder for some of the images; a call that fails as a whole is
    // followed by a host wait on nvJPEG's stream, so nothing of it is still writing when
    // the images are tried again.
    let call = |decoder: &mut nvjpeg::Decoder, set: &[usize]| -> Attempt<ImageFailure> {
        let imgs: Vec<&[u8]> = set.iter().map(|&k| pinned[k]).collect();
        let outs: Vec<nvjpeg::DevicePlanes> = set.iter().map(|&k| out(k)).collect();
        // SAFETY: the context was bound to this thread above, and the decoder was created
        // in it (`open_hardware`); `stream` is nvJPEG's own stream of that context. Each
        // plane lies within its image's region of the hardware output buffer (the region
        // was checked above against the buffer's length, and holds every plane), plainly allocated and freed only after the host has waited for its
        // `released` event, which the host waited for before this batch: no queued
        // kernel reads it while the engines write it, whenever they do. The inputs are
        // the pinned staging buffer, written above and not again before the host has
        // waited for `decoded`, recorded after this call's work (below).
        let r = unsafe { memory::nvjpeg_decode_planes(decoder, stream, &imgs, &outs) };
        match r {
            Ok(results) => Ok(results
                .into_iter()
                .map(|r| r.map_err(ImageFailure::from))
                .collect()),
            Err(e) => {
                if let Err(w) = stream.synchronize() {
                    log::warn!("cuda: waiting for nvJPEG after a failed call: {w}");
                }
                Err(e.into())
            }
        }
    };
    let mut uploads: Vec<Vec<u8>> = Vec::new();
    // Which images the CPU decoded (their headers say interleaved RGB).
    let mut on_cpu = vec![false; jobs.len()];
    let mut cpu = |k: usize| -> std::result::Result<(), ImageFailure> {
        let j = &jobs[k];
        let opts = DecodeOptions {
            orientation: false,
            strict,
            ..DecodeOptions::default()
        };
        let mut img = Image8::default();
        crate::decode::cpu::decode_image(bytes[k], &opts, &mut img)?;
        if [img.width, img.height] != j.full {
            return Err(ImageFailure::Size {
                decoded: [img.width, img.height],
                header: j.full,
            });
        }
        let pitch = j.rgbi.1 as usize;
        let row = 3 * img.width as usize;
        let mut host = vec![0u8; pitch * img.height as usize];
        for (dst, src) in host.chunks_exact_mut(pitch).zip(img.data.chunks_exact(row)) {
            dst[..row].copy_from_slice(src);
        }
        // SAFETY: `j.rgbi.0 + rgbi_bytes()` lies within the hardware output buffer (checked
        // at the top), which no queued kernel reads and which is freed only after a host
        // wait; `host` is `pitch * height` bytes, at most `rgbi_bytes()`, and is kept in
        // `uploads` until the host has waited for `decoded` below.
        unsafe { memory::upload(stream, base + j.rgbi.0, &host) }?;
        uploads.push(host);
        on_cpu[k] = true;
        Ok(())
    };
    let Hardware {
        engine,
        fallback,
        paths,
        ..
    } = h;
    let mut on_engine = |set: &[usize]| call(engine, set);
    let mut on_gpu = fallback.as_mut().map(|d| move |set: &[usize]| call(d, set));
    let chain = decode_chain(
        &supported,
        Some(&mut on_engine),
        on_gpu
            .as_mut()
            .map(|f| f as &mut BatchDecode<'_, ImageFailure>),
        &mut cpu,
        paths,
    );
    // Every image's header, each at its place, in one copy from offset 0 (the plan puts
    // them first in the buffer).
    let headers = hardware_headers(jobs, &on_cpu, len)?;
    // SAFETY: the headers occupy the first `headers.len()` bytes of the hardware output
    // buffer (checked in `hardware_headers`), which no queued kernel reads (see `call`);
    // `headers` lives until the host has waited for `decoded` below.
    unsafe { memory::upload(&h.stream, base, &headers)? };
    // The host waits for nvJPEG's own stream only: the engines' writes, the GPU decoder's
    // kernels and the CPU uploads are done, and the staging buffer and `uploads` are free.
    h.decoded.record(&h.stream).map_err(device_err)?;
    h.decoded.synchronize().map_err(device_err)?;
    drop(uploads);
    drop(headers);
    let by_nvjpeg = |k: usize| matches!(chain[k], Path::Hardware | Path::GpuDecoder);
    // SAFETY: as for `arm`; nvJPEG's work and the uploads are done (waited for above).
    unsafe { guard::check(&h.stream, base, jobs, &guards, &by_nvjpeg)? };
    Ok(chain
        .into_iter()
        .enumerate()
        .filter_map(|(k, p)| match p {
            Path::Rejected(reason) => Some(Rejected {
                sample: jobs[k].sample,
                reason,
            }),
            _ => None,
        })
        .collect())
}

/// Every image's header (`on_cpu`: which images the CPU decoded), each at its place in
/// the first bytes of the hardware output buffer, `len` bytes long.
fn hardware_headers(jobs: &[EncodedJob], on_cpu: &[bool], len: u64) -> Result<Vec<u8>> {
    let header_bytes = 4 * HARDWARE_HEADER_WORDS;
    let end = jobs
        .iter()
        .map(|j| j.header as usize + header_bytes)
        .max()
        .unwrap_or(0);
    if end as u64 > len {
        return Err(CudaError::Missing("room for the hardware decoder's headers").into());
    }
    let mut headers = vec![0u8; end];
    for (j, &rgb) in jobs.iter().zip(on_cpu) {
        let at = j.header as usize;
        for (dst, w) in headers[at..at + header_bytes]
            .chunks_exact_mut(4)
            .zip(j.header_words(rgb))
        {
            dst.copy_from_slice(&w.to_le_bytes());
        }
    }
    Ok(headers)
}

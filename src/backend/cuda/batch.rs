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
//! Every buffer is grow-only: after the largest batch has been seen, the memory in
//! flight is fixed ([`CudaBatcher::memory_in_flight`]); it never grows with the dataset.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaFunction, CudaSlice, CudaStream};

use super::memory::{self, address, DeviceBuffer, KernelArgs, Pinned};
use super::nvjpeg;
use super::{device_err, kernels, CudaDevice, CudaError};
use crate::backend::device::batch::{BatchPlan, DeviceLimits, EncodedJob};
use crate::backend::device::batcher::{downcast_buffers, DeviceBatcher, DeviceBuffers, Plane};
use crate::backend::device::job::{DeviceJob, DeviceSample, HardwareDecode};
use crate::backend::device::launch::{Buffer, Kernel, Step, MAX_BINDINGS};
use crate::backend::device::DeviceError;
use crate::decode::{DecodeOptions, Image8};
use crate::error::{Error, Result};

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
    /// Output buffers for `batch_size` samples of `image_bytes` (and `mask_bytes` when not
    /// 0), zeroed.
    pub fn new(
        device: &CudaDevice,
        batch_size: usize,
        image_bytes: usize,
        mask_bytes: usize,
    ) -> Result<Self> {
        let stream = device.stream();
        let make = |bytes: usize| -> Result<CudaSlice<u8>> {
            let size = batch_size
                .checked_mul(bytes)
                .ok_or_else(|| DeviceError::Overflow {
                    what: "a CUDA batch".into(),
                    count: batch_size as u64,
                    each: bytes as u64,
                })?;
            stream
                .alloc_zeros::<u8>(size.div_ceil(4).max(1) * 4)
                .map_err(device_err)
        };
        Ok(CudaBatchBuffers {
            images: make(image_bytes)?,
            masks: match mask_bytes {
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
    consumed: CudaEvent,
    used: bool,
}

/// The scratch buffers of the batches.
#[derive(Debug, Default)]
struct Scratch {
    planes: DeviceBuffer,
    windows: DeviceBuffer,
    oriented: DeviceBuffer,
    horizontal: DeviceBuffer,
    resized: DeviceBuffer,
    rgbi: DeviceBuffer,
}

/// nvJPEG on the device: the hardware decoder, and nvJPEG's own GPU decoder for what the
/// hardware refuses.
struct Hardware {
    policy: HardwareDecode,
    engine: nvjpeg::Decoder,
    fallback: Option<nvjpeg::Decoder>,
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
        let ptx = kernels::compile_all(&kernels::arch_for(major, minor))?;
        let ctx = device.context();
        let mut functions = HashMap::new();
        for (file, src) in ptx.iter() {
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(src.clone()))
                .map_err(|source| CudaError::Module { file, source })?;
            for k in Kernel::ALL
                .iter()
                .filter(|k| kernels::file_of(**k) == *file)
            {
                let f = module
                    .load_function(k.name())
                    .map_err(|source| CudaError::Function {
                        file,
                        kernel: k.name(),
                        source,
                    })?;
                functions.insert(*k, f);
            }
        }
        let copy = ctx.new_stream().map_err(device_err)?;
        let compute = ctx.new_stream().map_err(device_err)?;
        let mut slots = Vec::new();
        for _ in 0..ring.max(2) {
            slots.push(Slot {
                pinned: Pinned::default(),
                input: DeviceBuffer::default(),
                uploaded: ctx.new_event(None).map_err(device_err)?,
                consumed: ctx.new_event(None).map_err(device_err)?,
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
        Ok(Hardware {
            policy,
            engine,
            fallback,
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
            + s.rgbi.bytes()
    }

    /// Decodes and augments `jobs` into `out` (slot `i` for job `i`). Returns without
    /// waiting, with the event that completes when the batch is ready.
    pub fn run(&mut self, jobs: &[DeviceJob], out: &mut CudaBatchBuffers) -> Result<CudaEvent> {
        self.plan.plan(jobs, out.masks.is_some())?;
        if let Some(released) = out.released.take() {
            self.compute.wait(&released).map_err(device_err)?;
        }
        if out.writer.is_none() {
            // First use: the buffers were made (and zeroed) on the consumer's stream.
            self.compute
                .join(self.device.stream())
                .map_err(device_err)?;
        }
        out.writer = Some(Arc::clone(&self.compute));
        self.submit(Some(out), &|i| jobs.get(i).map(|j| &j.image))
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

    /// Uploads the plan through the next slot and enqueues its steps.
    fn submit<'a>(
        &mut self,
        out: Option<&CudaBatchBuffers>,
        sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    ) -> Result<CudaEvent> {
        let sizes = self.plan.sizes();
        let k = self.next % self.slots.len();
        self.next += 1;
        let slot = &mut self.slots[k];
        if slot.used {
            // The staging buffer is written again only once the copy out of it is done.
            slot.uploaded.synchronize().map_err(device_err)?;
        }
        let staging = slot.pinned.ensure(&self.device, sizes.upload)?;
        self.plan.write_upload(staging)?;
        // The copy waits for the kernels that still read this slot's input buffer.
        if slot.used {
            self.copy.wait(&slot.consumed).map_err(device_err)?;
        }
        let input = slot.input.ensure(&self.copy, sizes.upload)?;
        // SAFETY: the staging buffer is written or grown again only after `uploaded`,
        // recorded just below, has completed (the `synchronize` above, on the slot's next
        // use), and dropped only after the batcher's drop has finished both streams.
        // `input` is the slot's buffer, allocated (so freed) on the copy stream; the copy
        // is ordered after the kernels of the slot's last batch (the copy stream waited for
        // `consumed` above) and before this batch's (the compute stream waits for
        // `uploaded`).
        unsafe {
            slot.pinned
                .upload(&self.copy, input, sizes.upload as usize)?;
        }
        slot.uploaded.record(&self.copy).map_err(device_err)?;
        slot.used = true;
        self.compute.wait(&slot.uploaded).map_err(device_err)?;
        let input = address(input, &self.compute);

        let c = &self.compute;
        let s = &mut self.scratch;
        s.planes.ensure(c, sizes.planes)?;
        s.windows.ensure(c, sizes.windows)?;
        s.oriented.ensure(c, sizes.oriented)?;
        s.horizontal.ensure(c, sizes.horizontal)?;
        s.resized.ensure(c, sizes.resized)?;
        if sizes.rgbi > 0 {
            s.rgbi.ensure(c, sizes.rgbi)?;
        }
        let scratch = |b: &DeviceBuffer| b.get().map(|x| (address(x, c), x.len() as u64));
        let mut bases: HashMap<Buffer, (u64, u64)> = HashMap::new();
        bases.insert(Buffer::DecodeInput, (input, sizes.decode_input));
        bases.insert(
            Buffer::AugmentInput,
            (input + sizes.augment_offset, sizes.augment_input),
        );
        for (buffer, b) in [
            (Buffer::Planes, &s.planes),
            (Buffer::Windows, &s.windows),
            (Buffer::Oriented, &s.oriented),
            (Buffer::Horizontal, &s.horizontal),
            (Buffer::Resized, &s.resized),
            (Buffer::Rgbi, &s.rgbi),
        ] {
            if let Some(x) = scratch(b) {
                bases.insert(buffer, x);
            }
        }
        if let Some(o) = out {
            bases.insert(
                Buffer::Images,
                (address(&o.images, c), o.images.len() as u64),
            );
            if let Some(m) = &o.masks {
                bases.insert(Buffer::Masks, (address(m, c), m.len() as u64));
            }
        }
        let resolve = |b: &crate::backend::device::Binding| -> Result<u64> {
            let (base, len) = bases
                .get(&b.buffer)
                .copied()
                .ok_or(DeviceError::Unbound(b.buffer))?;
            if b.offset + b.size > len {
                return Err(DeviceError::Bounds {
                    buffer: b.buffer,
                    len,
                    start: b.offset,
                    end: b.offset + b.size,
                }
                .into());
            }
            Ok(base + b.offset)
        };
        // Check every step before enqueueing any.
        for step in self.plan.steps() {
            match step {
                Step::Launch(l) => {
                    if l.bindings.len() > MAX_BINDINGS {
                        return Err(DeviceError::TooManyBindings {
                            kernel: l.kernel.name(),
                            bindings: l.bindings.len(),
                            max: MAX_BINDINGS,
                        }
                        .into());
                    }
                    for b in &l.bindings {
                        resolve(b)?;
                    }
                }
                Step::Copy { src, dst } => {
                    resolve(src)?;
                    resolve(dst)?;
                }
                Step::Hardware => {
                    if self.hardware.is_none() {
                        return Err(DeviceError::NoHardwareDecoder.into());
                    }
                }
            }
        }
        let rgbi = bases.get(&Buffer::Rgbi).copied().unwrap_or((0, 0));
        for step in self.plan.steps() {
            match step {
                Step::Launch(l) => {
                    let mut args = KernelArgs {
                        params: l.params,
                        ..KernelArgs::default()
                    };
                    for (i, b) in l.bindings.iter().enumerate() {
                        args.ptr[i] = resolve(b)?;
                        args.words[i] =
                            u32::try_from(b.size / 4).map_err(|_| DeviceError::TooLarge {
                                what: "a binding's length in words",
                                value: b.size / 4,
                                max: u32::MAX.into(),
                            })?;
                    }
                    let f = self
                        .functions
                        .get(&l.kernel)
                        .ok_or(DeviceError::Kernel(l.kernel.name()))?;
                    // SAFETY: `f` was loaded from `kernels/*.cu`, whose kernels take one
                    // `KernelArgs`; every address in `args` was resolved within its buffer
                    // (`resolve` checks offset + size against the buffer's length). The
                    // buffers are the slot's input, the scratch buffers and the batch's
                    // outputs: scratch is freed on this (compute) stream, the input only
                    // after the copy stream has waited for `consumed` (recorded below,
                    // after these launches), and the outputs after their writer (this
                    // stream) is synchronised. Nothing else writes them meanwhile: the next
                    // upload into the input waits for `consumed`, the consumer for the
                    // batch's event.
                    unsafe { memory::launch(c, f, l, &args)? };
                }
                Step::Copy { src, dst } => {
                    let (to, from) = (resolve(dst)?, resolve(src)?);
                    // SAFETY: both ranges were resolved within their buffers, and the plan
                    // only copies between distinct buffers (`Oriented` to `Windows`); the
                    // buffers stay allocated until this stream has passed the copy, as for
                    // the launches above.
                    unsafe { memory::copy_dtod(c, to, from, src.size as usize)? };
                }
                Step::Hardware => {
                    if let Some(h) = self.hardware.as_mut() {
                        hardware_decode(
                            &self.device,
                            c,
                            h,
                            self.plan.encoded(),
                            sample,
                            rgbi,
                            self.strict,
                        )?;
                    }
                }
            }
        }
        self.slots[k].consumed.record(c).map_err(device_err)?;
        c.record_event(None).map_err(device_err)
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
        for s in [&self.copy, &self.compute] {
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

impl DeviceBuffers for CudaBatchBuffers {
    fn has_masks(&self) -> bool {
        self.masks.is_some()
    }

    fn read(&self, plane: Plane, n: usize) -> Result<Option<Vec<u8>>> {
        match plane.pick(&self.images, self.masks.as_ref()) {
            Some(buf) if n <= buf.len() => {
                // On the consumer's stream, which already waits for the batch.
                let bytes = self
                    .device
                    .stream()
                    .clone_dtoh(&buf.slice(..n))
                    .map_err(device_err)?;
                Ok(Some(bytes))
            }
            Some(buf) => Err(DeviceError::ShortRead {
                len: buf.len(),
                requested: n,
            }
            .into()),
            None => Ok(None),
        }
    }

    fn release(&mut self) {
        let stream = self.device.stream();
        match stream.record_event(None) {
            Ok(e) => self.released = Some(e),
            Err(e) => {
                // Without the event the next batch could overwrite buffers the consumer
                // still reads: wait instead.
                log::warn!("cannot record a release event ({e}); synchronising");
                let _ = stream.synchronize();
            }
        }
    }
}

impl DeviceBatcher for CudaBatcher {
    fn buffers(
        &self,
        batch_size: usize,
        image_bytes: usize,
        mask_bytes: usize,
    ) -> Result<Box<dyn DeviceBuffers>> {
        Ok(Box::new(CudaBatchBuffers::new(
            &self.device,
            batch_size,
            image_bytes,
            mask_bytes,
        )?))
    }

    fn run(&mut self, jobs: &[DeviceJob], out: &mut dyn DeviceBuffers) -> Result<()> {
        let out = downcast_buffers::<CudaBatchBuffers>(out)?;
        let ready = CudaBatcher::run(self, jobs, out)?;
        // The consumer's stream waits for the batch: its work enqueued after it receives
        // the batch sees the finished batch, with no host wait.
        self.device.stream().wait(&ready).map_err(device_err)?;
        out.ready = Some(ready);
        Ok(())
    }

    fn decode(&mut self, images: &[DeviceSample]) -> Result<()> {
        CudaBatcher::decode(self, images).map(|_| ())
    }

    fn decode_to_host(&mut self, images: &[DeviceSample]) -> Result<Vec<Image8>> {
        CudaBatcher::decode_to_host(self, images)
    }

    fn wait(&self) -> Result<()> {
        CudaBatcher::wait(self)?;
        self.device.wait()
    }

    fn memory_in_flight(&self) -> u64 {
        CudaBatcher::memory_in_flight(self)
    }

    fn hardware_decode(&self) -> HardwareDecode {
        CudaBatcher::hardware_decode(self)
    }

    fn max_binding(&self) -> u64 {
        DeviceLimits::UNBOUNDED.max_binding
    }
}

/// Decodes the batch's [`EncodedJob`]s whole into [`Buffer::Rgbi`] (`rgbi`: address and
/// length) where the plan puts them: the hardware decoder; nvJPEG's GPU decoder for what
/// it refuses; the CPU decoder, uploaded, for what neither decodes. Enqueued on `c`;
/// returns once the stream has finished with the input bytes. The plan's `pack_rgbi`
/// launches then place the windows.
fn hardware_decode<'a>(
    device: &CudaDevice,
    c: &Arc<CudaStream>,
    h: &mut Hardware,
    jobs: &[EncodedJob],
    sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    rgbi: (u64, u64),
    strict: bool,
) -> Result<()> {
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
    let out = |k: usize| nvjpeg::DeviceImage {
        ptr: base + jobs[k].rgbi.0,
        pitch: jobs[k].rgbi.1 as usize,
        width: jobs[k].full[0],
        height: jobs[k].full[1],
    };
    device.context().bind_to_thread().map_err(device_err)?;
    // The hardware engines, for what they take; nvJPEG's GPU decoder for the rest.
    let (mut engine, mut other): (Vec<usize>, Vec<usize>) =
        (0..jobs.len()).partition(|&k| h.engine.hardware_supports(bytes[k]));
    let mut failed = Vec::new();
    for (decoder, set) in [
        (Some(&mut h.engine), &mut engine),
        (h.fallback.as_mut(), &mut other),
    ] {
        if set.is_empty() {
            continue;
        }
        let Some(decoder) = decoder else {
            failed.append(set);
            continue;
        };
        let imgs: Vec<&[u8]> = set.iter().map(|&k| bytes[k]).collect();
        let outs: Vec<nvjpeg::DeviceImage> = set.iter().map(|&k| out(k)).collect();
        // SAFETY: the context was bound to this thread above, and `decoder` was created in
        // it (`open_hardware`). Each output lies within the RGB scratch buffer (checked
        // above against its length), which stays allocated until this stream has passed
        // the batch (scratch is freed on this stream). The inputs are the jobs' bytes,
        // borrowed for this call, and this function synchronises the stream before it
        // returns. Not upheld (a known gap in the ordering): the hardware backend may write
        // the outputs while called, not in stream order, when an earlier batch's
        // `pack_rgbi` launches on this stream may still read the RGB buffer, or when the
        // buffer has just grown and its stream-ordered allocation has not run yet. That can
        // give wrong pixels in device memory; host memory is never touched.
        match unsafe { memory::nvjpeg_decode(decoder, c, &imgs, &outs) } {
            Ok(results) => {
                for (&k, r) in set.iter().zip(results) {
                    if let Err(e) = r {
                        log::debug!("nvJPEG refused sample {}: {e}", jobs[k].sample);
                        failed.push(k);
                    }
                }
            }
            Err(e) => {
                log::debug!("nvJPEG batch failed: {e}");
                failed.extend(set.iter().copied());
            }
        }
    }
    // What nvJPEG did not decode: the CPU decoder (as strict as the pipeline), uploaded.
    // The host copies live until the stream is synchronised below.
    let mut uploads = Vec::new();
    for k in failed {
        let j = &jobs[k];
        let opts = DecodeOptions {
            orientation: false,
            strict,
            ..DecodeOptions::default()
        };
        let mut img = Image8::default();
        crate::decode::cpu::decode_image(bytes[k], &opts, &mut img).map_err(|source| {
            DeviceError::Fallback {
                sample: j.sample,
                source,
            }
        })?;
        if (img.width, img.height) != (j.full[0], j.full[1]) {
            return Err(DeviceError::FallbackSize {
                sample: j.sample,
                width: img.width,
                height: img.height,
                expected_width: j.full[0],
                expected_height: j.full[1],
            }
            .into());
        }
        let pitch = j.rgbi.1 as usize;
        let row = 3 * img.width as usize;
        let mut host = vec![0u8; pitch * img.height as usize];
        for (dst, src) in host.chunks_exact_mut(pitch).zip(img.data.chunks_exact(row)) {
            dst[..row].copy_from_slice(src);
        }
        // SAFETY: `j.rgbi.0 + rgbi_bytes()` lies within the RGB scratch buffer (checked at
        // the top), which is freed only on this stream; `host` is `pitch * height` bytes,
        // at most `rgbi_bytes()`, and is kept in `uploads` until the stream is
        // synchronised below.
        unsafe { memory::upload(c, base + j.rgbi.0, &host)? };
        uploads.push(host);
    }
    // nvJPEG may read the host bytes while the stream runs: they belong to the batch's
    // jobs, so finish with them before the batch is handed back.
    c.synchronize().map_err(device_err)?;
    drop(uploads);
    Ok(())
}

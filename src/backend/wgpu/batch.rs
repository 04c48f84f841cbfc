//! One batch on the GPU: the host packs every sample's input (DCT coefficients, or pixels
//! the CPU decoded) into a mapped staging buffer, one copy uploads it, and the decode and
//! augment passes write the batch straight into its output buffers.
//!
//! # Buffers
//! - A ring of `K` staging buffers (`MAP_WRITE | COPY_SRC`). The host writes batch `b + 1`
//!   into one while the GPU still works on batch `b`; a staging buffer is written again
//!   only after its re-mapping has completed, which happens after the GPU finished the
//!   copy out of it.
//! - One set of device-local input and scratch buffers, grow-only. Submissions on one queue
//!   execute in order and wgpu orders each batch's writes after the previous batch's
//!   reads, so one set serves every batch in flight.
//! - A ring of output buffers ([`WgpuBatchBuffers`]), one per batch in flight, owned by
//!   the pipeline's batch ring: a batch's buffers are reused only after the caller dropped
//!   the batch, and any work the caller submitted on them before that is ordered first.
//!
//! - The device cache of decoded samples ([`Buffer::DecodedCache`]), when set up
//!   ([`DeviceBatcher::set_decoded_cache`]): one buffer kept across batches and epochs,
//!   grown within its budget by a copy of what it holds into a larger one. A batch copies
//!   images into it after decoding them and out of it into its windows; submissions on
//!   one queue run in order, so a later batch's copy out follows the copy in.
//!
//! Pipelines and bind group layouts are created once, in [`WgpuBatcher::new`].
#![doc(hidden)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use super::kernels::Pipelines;
use super::WgpuContext;
use super::WgpuError;
use crate::augment::mix::BatchMix;
use crate::backend::device::batch::{BatchPlan, DeviceLimits, UploadPart, UploadTarget};
use crate::backend::device::batcher::{
    downcast_buffers, BatchShape, DeviceBatcher, DeviceBuffers, Plane,
};
use crate::backend::device::job::HardwareDecode;
use crate::backend::device::launch::{Buffer, Kernel, Step};
use crate::backend::device::DeviceError;
use crate::decode::Image8;
use crate::error::Result;

pub use crate::backend::device::job::{
    prepare, prepare_from, prepare_reusing, CoeffPool, DeviceJob, DeviceSample, Prepared,
};

/// The output buffers of one batch in flight.
#[derive(Debug)]
pub struct WgpuBatchBuffers {
    /// `batch_size * image_bytes` (rounded up to 4 bytes): slot `i` at `i * image_bytes`.
    pub images: wgpu::Buffer,
    /// `batch_size * w * h` u16 class ids (rounded up to 4 bytes), for segmentation sets.
    pub masks: Option<wgpu::Buffer>,
    /// The device they live on (reads go through its queue, after the batch's work).
    ctx: WgpuContext,
}

fn round4(n: u64) -> u64 {
    n.div_ceil(4).max(1) * 4
}

impl WgpuBatchBuffers {
    /// The device and queue the buffers live on.
    pub fn context(&self) -> &WgpuContext {
        &self.ctx
    }

    /// Output buffers for a batch of `shape`. Larger than the device allows, or out of
    /// memory: [`crate::Error::Device`].
    pub fn new(ctx: &WgpuContext, shape: BatchShape) -> Result<Self> {
        let make = |label: &str, bytes: usize| {
            let size = shape.bytes(label, bytes)?;
            ctx.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: round4(size),
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        Ok(WgpuBatchBuffers {
            images: make("stoker batch images", shape.image_bytes)?,
            masks: match shape.mask_bytes {
                0 => None,
                m => Some(make("stoker batch masks", m)?),
            },
            ctx: ctx.clone(),
        })
    }
}

const PENDING: u8 = 0;
const MAPPED: u8 = 1;
const FAILED: u8 = 2;

/// The first `len` bytes of a mapped staging buffer, written in ranges, each through its
/// own mapped view (views of disjoint ranges may be written from several threads).
struct Mapped<'a> {
    buffer: &'a wgpu::Buffer,
    len: usize,
}

impl UploadTarget for Mapped<'_> {
    type Part<'p>
        = wgpu::BufferViewMut
    where
        Self: 'p;

    fn len(&self) -> usize {
        self.len
    }

    fn parts(&mut self, bounds: &[usize]) -> Result<Vec<wgpu::BufferViewMut>> {
        bounds
            .windows(2)
            .map(|w| {
                if w[0] >= w[1] || w[1] > self.len || w[0] % 8 != 0 {
                    return Err(crate::Error::internal("a staging range out of order"));
                }
                self.buffer
                    .slice(w[0] as u64..w[1] as u64)
                    .get_mapped_range_mut()
                    .map_err(|source| {
                        WgpuError::View {
                            what: "staging",
                            source,
                        }
                        .into()
                    })
            })
            .collect()
    }
}

impl UploadPart for wgpu::BufferViewMut {
    fn write_at(&mut self, at: usize, src: &[u8]) {
        let n = src.len().min(self.len().saturating_sub(at));
        if n > 0 {
            self.slice(at..at + n).copy_from_slice(&src[..n]);
        }
    }
}

/// A host-visible staging buffer and its mapping state (`PENDING`, `MAPPED`, `FAILED`).
struct Staging {
    buffer: wgpu::Buffer,
    state: Arc<AtomicU8>,
    /// The submission that copies out of it, to wait for that one alone.
    submission: Option<wgpu::SubmissionIndex>,
}

/// The largest storage binding the device takes.
pub fn max_binding(ctx: &WgpuContext) -> u64 {
    ctx.device().limits().max_storage_buffer_binding_size
}

/// Runs batches on one wgpu device. Used by one thread at a time (the pipeline's
/// consumer); everything it allocates is reused from batch to batch.
pub struct WgpuBatcher {
    ctx: WgpuContext,
    pipelines: Pipelines,
    plan: BatchPlan,
    staging: Vec<Staging>,
    ring: usize,
    next: usize,
    scratch: Scratch,
    /// The device cache of decoded samples and its budget in bytes (0: none).
    decoded_cache: Option<wgpu::Buffer>,
    decoded_cache_budget: u64,
    /// The mappable buffer the entropy status is read back through, kept batch to batch.
    status_readback: Option<wgpu::Buffer>,
}

/// The batches' grow-only device buffers, in the order they are grown, with their labels.
/// The other buffers are the output's ([`WgpuBatchBuffers`]), the device cache, or another
/// backend's.
const SCRATCH: [(Buffer, &str); 11] = [
    (Buffer::DecodeInput, "stoker decode input"),
    (Buffer::AugmentInput, "stoker augment input"),
    (Buffer::Planes, "stoker decode planes"),
    (Buffer::Windows, "stoker decoded windows"),
    (Buffer::Oriented, "stoker oriented"),
    (Buffer::Horizontal, "stoker augment horizontal"),
    (Buffer::Resized, "stoker augment resized"),
    (Buffer::Coefficients, "stoker decode coefficients"),
    (Buffer::EntropyStatus, "stoker entropy status"),
    (Buffer::MixScratch, "stoker mix scratch"),
    (Buffer::SyncRecords, "stoker sync decode records"),
];

/// The usages of scratch buffer `buffer`: each is bound to kernels; the uploads, the
/// windows (the upright ones are copied back into them) and the mixing pass's copy of the
/// images are written by copies; the windows, the upright windows and the entropy status
/// are copied out of (read back to the host, or into the windows and the device cache).
fn scratch_usage(buffer: Buffer) -> wgpu::BufferUsages {
    use wgpu::BufferUsages as U;
    let mut usage = U::STORAGE;
    if matches!(
        buffer,
        Buffer::DecodeInput | Buffer::AugmentInput | Buffer::Windows | Buffer::MixScratch
    ) {
        usage |= U::COPY_DST;
    }
    if matches!(
        buffer,
        Buffer::Windows | Buffer::Oriented | Buffer::EntropyStatus
    ) {
        usage |= U::COPY_SRC;
    }
    usage
}

/// Grow-only device buffers of the batches (one set: submissions on one queue run in
/// order).
#[derive(Debug, Default)]
struct Scratch {
    /// The buffers of [`SCRATCH`], at the same places.
    buffers: [Option<wgpu::Buffer>; SCRATCH.len()],
    /// The launches' parameter records.
    params: Option<wgpu::Buffer>,
}

/// The buffer of `buffers` (as [`Scratch::buffers`] holds them) that is `buffer`, if it is
/// one of [`SCRATCH`] and allocated.
fn scratch_buffer(
    buffers: &[Option<wgpu::Buffer>; SCRATCH.len()],
    buffer: Buffer,
) -> Option<&wgpu::Buffer> {
    let k = SCRATCH.iter().position(|&(b, _)| b == buffer)?;
    buffers.get(k)?.as_ref()
}

impl std::fmt::Debug for WgpuBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuBatcher")
            .field("device", &self.ctx.name())
            .field("staging", &self.staging.len())
            .finish()
    }
}

impl WgpuBatcher {
    /// Compiles the pipelines on `ctx`; `ring` staging buffers (at least 2).
    pub fn new(ctx: &WgpuContext, ring: usize) -> Result<Self> {
        let limits = ctx.device().limits();
        Ok(WgpuBatcher {
            // The batch pipeline's kernels and the sync decode's passes.
            pipelines: Pipelines::new(ctx, &[Kernel::wgsl(), &Kernel::SYNC[..]].concat())?,
            plan: BatchPlan::new(DeviceLimits {
                max_binding: limits.max_storage_buffer_binding_size,
                per_dim: u64::from(limits.max_compute_workgroups_per_dimension.max(1)),
            }),
            ctx: ctx.clone(),
            staging: Vec::new(),
            ring: ring.max(2),
            next: 0,
            scratch: Scratch::default(),
            decoded_cache: None,
            decoded_cache_budget: 0,
            status_readback: None,
        })
    }

    /// The context.
    pub fn context(&self) -> &WgpuContext {
        &self.ctx
    }

    /// A mapped staging buffer of at least `bytes`: the next one of the ring, once the
    /// GPU has finished with it (its re-mapping completed).
    fn staging(&mut self, bytes: u64) -> Result<usize> {
        let need = round4(bytes);
        if self.staging.len() < self.ring {
            let st = self.new_staging(need)?;
            self.staging.push(st);
            return Ok(self.staging.len() - 1);
        }
        let i = self.next % self.ring;
        self.next += 1;
        if self.staging[i].state.load(Ordering::Acquire) == PENDING {
            // Waits for the submission that copies out of this buffer (not for the later
            // ones), which also runs the mapping callback.
            let submission_index = self.staging[i].submission.clone();
            self.ctx
                .device()
                .poll(wgpu::PollType::Wait {
                    submission_index,
                    timeout: None,
                })
                .map_err(WgpuError::Poll)?;
            if self.staging[i].state.load(Ordering::Acquire) == PENDING {
                self.ctx.wait()?;
            }
        }
        if self.staging[i].state.load(Ordering::Acquire) != MAPPED {
            log::warn!("a staging buffer could not be mapped again; replacing it");
            self.staging[i] = self.new_staging(need + need / 2)?;
        } else if self.staging[i].buffer.size() < need {
            self.staging[i] = self.new_staging(need + need / 2)?;
        }
        Ok(i)
    }

    /// The device cache of decoded samples, holding at least `bytes` (`None` when the
    /// plan reaches none of it). Grown within the budget by a copy of what it holds into
    /// a larger buffer, submitted at once: queue order puts it after every copy into the
    /// old buffer and before every use of the new one.
    fn decoded_cache(&mut self, bytes: u64) -> Result<Option<wgpu::Buffer>> {
        if bytes == 0 {
            return Ok(self.decoded_cache.clone());
        }
        let budget = self.decoded_cache_budget;
        if bytes > budget {
            return Err(DeviceError::Bounds {
                buffer: Buffer::DecodedCache,
                len: budget,
                start: 0,
                end: bytes,
            }
            .into());
        }
        let held = self.decoded_cache.as_ref().map_or(0, wgpu::Buffer::size);
        if held >= bytes {
            return Ok(self.decoded_cache.clone());
        }
        // Doubling keeps the copies few; the budget is a multiple of 256 bytes.
        let size = bytes
            .max(held.saturating_mul(2))
            .max(1 << 20)
            .next_multiple_of(256)
            .min(budget);
        use wgpu::BufferUsages as U;
        let grown = self.ctx.create_buffer(&wgpu::BufferDescriptor {
            label: Some("stoker decoded cache"),
            size,
            usage: U::COPY_SRC | U::COPY_DST,
            mapped_at_creation: false,
        })?;
        if let Some(old) = &self.decoded_cache {
            let mut enc =
                self.ctx
                    .device()
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("stoker decoded cache growth"),
                    });
            enc.copy_buffer_to_buffer(old, 0, &grown, 0, old.size());
            self.ctx.queue().submit([enc.finish()]);
        }
        self.decoded_cache = Some(grown);
        Ok(self.decoded_cache.clone())
    }

    fn new_staging(&self, bytes: u64) -> Result<Staging> {
        Ok(Staging {
            buffer: self.ctx.create_buffer(&wgpu::BufferDescriptor {
                label: Some("stoker staging"),
                size: round4(bytes),
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            })?,
            state: Arc::new(AtomicU8::new(MAPPED)),
            submission: None,
        })
    }

    /// Writes the planned upload into the next staging buffer and records its copy and
    /// every planned step (into `out` when the plan augments); returns the encoder and the
    /// staging slot.
    fn record<'a>(
        &mut self,
        out: Option<&WgpuBatchBuffers>,
        steps: std::ops::Range<usize>,
        sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    ) -> Result<(wgpu::CommandEncoder, usize)> {
        let sizes = self.plan.sizes();
        let si = self.staging(sizes.upload)?;
        let written = self.plan.write_upload(
            &mut Mapped {
                buffer: &self.staging[si].buffer,
                len: sizes.upload as usize,
            },
            sample,
        );
        self.staging[si].buffer.unmap();
        self.staging[si].state.store(PENDING, Ordering::Release);
        if let Err(e) = written {
            // Nothing submitted: map the staging buffer again so it is not lost.
            self.staging[si].submission = None;
            self.remap(si);
            return Err(e);
        }
        match self.record_steps(Some(si), out, steps) {
            Ok(enc) => Ok((enc, si)),
            Err(e) => {
                // Not submitted: map the staging buffer again so it is not lost.
                self.remap(si);
                Err(e)
            }
        }
    }

    /// Records `steps` of the plan, after the copy of staging buffer `si` into the input
    /// buffers when given.
    fn record_steps(
        &mut self,
        si: Option<usize>,
        out: Option<&WgpuBatchBuffers>,
        steps: std::ops::Range<usize>,
    ) -> Result<wgpu::CommandEncoder> {
        let sizes = self.plan.sizes();
        let decoded_cache = self.decoded_cache(sizes.decoded_cache)?;
        let ctx = &self.ctx;
        let Scratch { buffers, params } = &mut self.scratch;
        for (&(buffer, label), slot) in SCRATCH.iter().zip(buffers.iter_mut()) {
            ctx.grow_buffer(slot, label, sizes.of(buffer), scratch_usage(buffer))?;
        }
        let scratch = |b: Buffer| scratch_buffer(buffers, b);
        let mut enc = ctx
            .device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("stoker batch"),
            });
        if let Some(si) = si {
            let sbuf = &self.staging[si].buffer;
            if let Some(dbuf) = scratch(Buffer::DecodeInput) {
                enc.copy_buffer_to_buffer(sbuf, 0, dbuf, 0, sizes.decode_input);
            }
            if let Some(abuf) = scratch(Buffer::AugmentInput).filter(|_| sizes.augment_input > 4) {
                enc.copy_buffer_to_buffer(sbuf, sizes.augment_offset, abuf, 0, sizes.augment_input);
            }
        }
        let steps = self.plan.steps().get(steps).unwrap_or(&[]);
        self.pipelines
            .record(ctx, &mut enc, steps, si.is_some(), params, |b| match b {
                Buffer::Images => out.map(|o| &o.images),
                Buffer::Masks => out.and_then(|o| o.masks.as_ref()),
                Buffer::Rgbi => None,
                Buffer::DecodedCache => decoded_cache.as_ref(),
                _ => scratch(b),
            })?;
        Ok(enc)
    }

    /// Submits `enc` and maps staging buffer `si` again: the mapping completes once the
    /// copy out of it has run, and only then is it written again.
    fn submit(&mut self, enc: wgpu::CommandEncoder, si: usize) -> Result<wgpu::SubmissionIndex> {
        let submitted = self.submit_commands(enc);
        if let Ok(index) = &submitted {
            self.staging[si].submission = Some(index.clone());
        }
        self.remap(si);
        submitted
    }

    /// Submits `enc`; a command the device rejects is an error here, not a panic in
    /// wgpu's handler.
    fn submit_commands(&self, enc: wgpu::CommandEncoder) -> Result<wgpu::SubmissionIndex> {
        let device = self.ctx.device();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let commands = enc.finish();
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(WgpuError::Rejected {
                what: "batch commands",
                source: e,
            }
            .into());
        }
        Ok(self.ctx.queue().submit([commands]))
    }

    /// Maps staging buffer `si` again (also after a failed batch, so it is not lost).
    fn remap(&mut self, si: usize) {
        let state = Arc::clone(&self.staging[si].state);
        self.staging[si]
            .buffer
            .slice(..)
            .map_async(wgpu::MapMode::Write, move |r| {
                state.store(if r.is_ok() { MAPPED } else { FAILED }, Ordering::Release);
            });
    }

    /// Decodes and augments `jobs` into `out` (slot `i` for job `i`) and submits the work.
    /// Returns without waiting: work the caller submits later on the same queue sees the
    /// finished batch.
    /// With `mix`, the images are then mixed as it says, in the same submission.
    pub fn run(
        &mut self,
        jobs: &[DeviceJob],
        mix: Option<&BatchMix>,
        out: &WgpuBatchBuffers,
    ) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        self.plan.plan_mixed(jobs, out.masks.is_some(), mix)?;
        self.execute(Some(out), &|k| jobs.get(k).map(|j| &j.image))
    }

    /// Records and submits the planned steps. Where the plan checks the device entropy
    /// pass ([`Step::EntropyCheck`]), the steps up to it go in a first submission that
    /// also copies the status words back, and the rest in a second, submitted before the
    /// host waits for the first: the device runs the batch's later passes while the host
    /// reads the status. Samples it flags fail the batch ([`DeviceError::EntropyFlagged`]);
    /// what the later passes wrote into `out` is then written again when the batch runs
    /// again, before anything delivers it.
    fn execute<'a>(
        &mut self,
        out: Option<&WgpuBatchBuffers>,
        sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    ) -> Result<()> {
        let n = self.plan.steps().len();
        let check = self
            .plan
            .steps()
            .iter()
            .position(|s| matches!(s, Step::EntropyCheck { .. }));
        let Some(c) = check else {
            let (enc, si) = self.record(out, 0..n, sample)?;
            return self.submit(enc, si).map(|_| ());
        };
        let (mut enc, si) = self.record(out, 0..c, sample)?;
        let bytes = self.plan.sizes().entropy_status;
        let readback = match scratch_buffer(&self.scratch.buffers, Buffer::EntropyStatus) {
            Some(b) if bytes > 0 => {
                Some(
                    self.ctx
                        .record_readback(&mut enc, b, 0, bytes, &mut self.status_readback),
                )
            }
            _ => None,
        };
        let readback = match readback.transpose() {
            Ok(r) => r,
            Err(e) => {
                // Not submitted: map the staging buffer again so it is not lost.
                self.remap(si);
                return Err(e);
            }
        };
        let first = self.submit(enc, si)?;
        let enc = self.record_steps(None, out, c + 1..n)?;
        self.submit_commands(enc)?;
        let status = match readback {
            Some(r) => r.wait(&self.ctx, first)?,
            None => Vec::new(),
        };
        let flagged = self.plan.flagged(&status);
        if !flagged.is_empty() {
            return Err(DeviceError::EntropyFlagged(flagged).into());
        }
        Ok(())
    }

    /// Decodes `images` on the device and submits the work without waiting (for decode
    /// benchmarks: call [`WgpuContext::wait`] before stopping the clock).
    pub fn decode(&mut self, images: &[DeviceSample]) -> Result<()> {
        if images.is_empty() {
            return Ok(());
        }
        self.plan.plan_decode(images.iter())?;
        self.execute(None, &|k| images.get(k))
    }

    /// Decodes `images` on the device and reads the decoded windows back (to compare
    /// backends and write previews). Blocks until done.
    pub fn decode_to_host(&mut self, images: &[DeviceSample]) -> Result<Vec<Image8>> {
        self.decode(images)?;
        let Some(windows) = scratch_buffer(&self.scratch.buffers, Buffer::Windows).cloned() else {
            return Ok(Vec::new());
        };
        let data = self
            .ctx
            .read_buffer(&windows, 0, self.plan.sizes().windows)?;
        self.plan.windows_to_host(&data)
    }
}

impl DeviceBuffers for WgpuBatchBuffers {
    fn has_masks(&self) -> bool {
        self.masks.is_some()
    }

    fn read(&self, plane: Plane, n: usize) -> Result<Option<Vec<u8>>> {
        match plane.pick(&self.images, self.masks.as_ref()) {
            Some(b) => Ok(Some(self.ctx.read_buffer(b, 0, n as u64)?)),
            None => Ok(None),
        }
    }

    fn release(&mut self) {
        // Submissions on one queue run in order: the caller's work on the batch comes
        // before the next batch written here, with nothing to record.
    }
}

impl DeviceBatcher for WgpuBatcher {
    fn buffers(&self, shape: BatchShape) -> Result<Box<dyn DeviceBuffers>> {
        Ok(Box::new(WgpuBatchBuffers::new(&self.ctx, shape)?))
    }

    fn run(
        &mut self,
        jobs: &[DeviceJob],
        mix: Option<&BatchMix>,
        out: &mut dyn DeviceBuffers,
    ) -> Result<()> {
        let out = downcast_buffers::<WgpuBatchBuffers>(out)?;
        WgpuBatcher::run(self, jobs, mix, out)
    }

    fn decode(&mut self, images: &[DeviceSample]) -> Result<()> {
        WgpuBatcher::decode(self, images)
    }

    fn decode_to_host(&mut self, images: &[DeviceSample]) -> Result<Vec<Image8>> {
        WgpuBatcher::decode_to_host(self, images)
    }

    fn wait(&self) -> Result<()> {
        self.ctx.wait()
    }

    fn memory_in_flight(&self) -> u64 {
        let s = &self.scratch;
        self.staging.iter().map(|st| st.buffer.size()).sum::<u64>()
            + s.buffers
                .iter()
                .chain([&s.params])
                .filter_map(|b| b.as_ref())
                .map(wgpu::Buffer::size)
                .sum::<u64>()
    }

    fn plan_counts(&self) -> crate::backend::device::batch::PlanCounts {
        self.plan.counts()
    }

    fn hardware_decode(&self) -> HardwareDecode {
        HardwareDecode::Off
    }

    fn max_binding(&self) -> u64 {
        max_binding(&self.ctx)
    }

    fn sync_entropy(&self) -> bool {
        true
    }

    fn set_decoded_cache(&mut self, bytes: u64) -> Result<u64> {
        let max = self.ctx.device().limits().max_buffer_size;
        // Whole 256-byte places: the budget is rounded down to them.
        let budget = bytes.min(max) / 256 * 256;
        if self
            .decoded_cache
            .as_ref()
            .is_some_and(|b| b.size() > budget)
        {
            // A smaller budget forgets what the cache held (the caller's map with it).
            self.decoded_cache = None;
        }
        self.decoded_cache_budget = budget;
        Ok(budget)
    }

    fn decoded_cache_bytes(&self) -> u64 {
        self.decoded_cache.as_ref().map_or(0, wgpu::Buffer::size)
    }
}

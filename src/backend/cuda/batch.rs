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
use super::{device_err, kernels, CudaDevice};
use crate::backend::device::batch::{BatchPlan, Limits};
use crate::backend::device::job::{GpuJob, GpuSample};
use crate::backend::device::launch::{Buffer, Kernel, Step};
use crate::decode::Image8;
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
                .ok_or_else(|| Error::Device("batch size overflows".into()))?;
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
                .map_err(|e| Error::Device(format!("cannot load {file}: {e}")))?;
            for k in Kernel::ALL
                .iter()
                .filter(|k| kernels::file_of(**k) == *file)
            {
                let f = module
                    .load_function(k.name())
                    .map_err(|e| Error::Device(format!("{file} has no {}: {e}", k.name())))?;
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
            plan: BatchPlan::new(Limits::UNBOUNDED),
            slots,
            next: 0,
            scratch: Scratch::default(),
        })
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
    }

    /// Decodes and augments `jobs` into `out` (slot `i` for job `i`). Returns without
    /// waiting, with the event that completes when the batch is ready.
    pub fn run(&mut self, jobs: &[GpuJob], out: &mut CudaBatchBuffers) -> Result<CudaEvent> {
        self.plan.plan(jobs, out.masks.is_some())?;
        if let Some(released) = out.released.take() {
            self.compute.wait(&released).map_err(device_err)?;
        }
        self.submit(Some(out))
    }

    /// Decodes `images` and returns without waiting, with the event that completes when
    /// the windows are decoded (for decode benchmarks).
    pub fn decode(&mut self, images: &[GpuSample]) -> Result<CudaEvent> {
        self.plan.plan_decode(images.iter())?;
        self.submit(None)
    }

    /// Decodes `images` and reads the windows back (to compare backends). Blocks.
    pub fn decode_to_host(&mut self, images: &[GpuSample]) -> Result<Vec<Image8>> {
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
    fn submit(&mut self, out: Option<&CudaBatchBuffers>) -> Result<CudaEvent> {
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
        slot.pinned
            .upload(&self.copy, input, sizes.upload as usize)?;
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
                .ok_or_else(|| Error::Device(format!("no {:?} buffer for the batch", b.buffer)))?;
            if b.offset + b.size > len {
                return Err(Error::Device(format!(
                    "the {:?} buffer holds {len} bytes, the batch binds {}..{}",
                    b.buffer,
                    b.offset,
                    b.offset + b.size
                )));
            }
            Ok(base + b.offset)
        };
        // Check every step before enqueueing any.
        for step in self.plan.steps() {
            match step {
                Step::Launch(l) => {
                    for b in &l.bindings {
                        resolve(b)?;
                    }
                }
                Step::Copy { src, dst } => {
                    resolve(src)?;
                    resolve(dst)?;
                }
            }
        }
        for step in self.plan.steps() {
            match step {
                Step::Launch(l) => {
                    let mut args = KernelArgs {
                        params: l.params,
                        ..KernelArgs::default()
                    };
                    for (i, b) in l.bindings.iter().enumerate() {
                        args.ptr[i] = resolve(b)?;
                        args.words[i] = u32::try_from(b.size / 4)
                            .map_err(|_| Error::Device("binding over 16 GiB".into()))?;
                    }
                    let f = self.functions.get(&l.kernel).ok_or_else(|| {
                        Error::Device(format!("kernel {} not loaded", l.kernel.name()))
                    })?;
                    memory::launch(c, f, l, &args)?;
                }
                Step::Copy { src, dst } => {
                    memory::copy_dtod(c, resolve(dst)?, resolve(src)?, src.size as usize)?;
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

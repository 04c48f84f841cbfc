//! Runs planned [`Step`]s on a wgpu device: one compute pipeline per [`Kernel`], a bind
//! group per launch (reused while a later batch binds the same ranges of the same
//! buffers), parameter records in one buffer, copies between passes.
#![doc(hidden)]

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{bind, shaders, storage_entry, WgpuContext, WgpuError};
use crate::backend::device::launch::{Buffer, Kernel, Launch, Step, PARAM_WORDS};
use crate::backend::device::DeviceError;
use crate::error::Result;

/// Bytes between parameter records: the largest offset alignment a device may ask for.
const PARAM_STRIDE: u64 = 256;

/// How a kernel receives its parameter words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Params {
    /// It reads none.
    None,
    /// A uniform record of 16 words at binding 0; storage bindings from 1.
    Uniform,
    /// A read-only storage record of 8 words after the storage bindings.
    Storage,
}

/// The launches' parameter `records` written (through the queue) into the buffer kept in
/// `params_slot`, grown when they need more; `None` when there are none.
fn write_params(
    ctx: &WgpuContext,
    params_slot: &mut Option<wgpu::Buffer>,
    records: &[u32],
) -> Result<Option<wgpu::Buffer>> {
    Ok(if records.is_empty() {
        None
    } else {
        let bytes: &[u8] = bytemuck::cast_slice(records);
        let buf = ctx.grow_buffer(
            params_slot,
            "stoker launch params",
            bytes.len() as u64,
            wgpu::BufferUsages::UNIFORM
                | wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST,
        )?;
        ctx.queue().write_buffer(&buf, 0, bytes);
        Some(buf)
    })
}

/// The WGSL source, storage bindings (read-only or not) and parameter binding of a kernel.
fn spec(kernel: Kernel) -> (&'static str, &'static [bool], Params) {
    const AUGMENT: &[bool] = &[true, true, true, false, false, false];
    match kernel {
        Kernel::Huffman => (
            shaders::HUFFMAN.as_str(),
            &[true, false, false],
            Params::None,
        ),
        Kernel::Idct => (shaders::IDCT.as_str(), &[true, false, true], Params::None),
        Kernel::Color => (shaders::COLOR.as_str(), &[true, true, false], Params::None),
        Kernel::Orient => (
            shaders::ORIENT.as_str(),
            &[true, true, false],
            Params::Storage,
        ),
        Kernel::Horizontal | Kernel::VerticalJitter | Kernel::WriteImage | Kernel::WriteMask => {
            (shaders::AUGMENT.as_str(), AUGMENT, Params::Uniform)
        }
        Kernel::Mix => (shaders::MIX.as_str(), &[true, false], Params::Uniform),
        Kernel::SyncStart | Kernel::SyncRound | Kernel::SyncScan | Kernel::SyncWrite => (
            shaders::SYNC_HUFFMAN.as_str(),
            &[true, false, false, false],
            Params::Uniform,
        ),
        // CUDA only: never asked of wgpu (its batcher compiles Kernel::wgsl()).
        Kernel::PackPlanar => ("", &[true, true, false], Params::Storage),
    }
}

#[derive(Debug)]
struct Pipeline {
    kernel: Kernel,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// Batches a bind group is kept for after its last use: at least the batches a ring of
/// output and staging buffers cycles through, so that a batch written into the same ring
/// slot as one before finds its groups.
const KEPT_BATCHES: u64 = 4;

static GROUPS_CREATED: AtomicU64 = AtomicU64::new(0);

/// Bind groups stoker has created on wgpu devices so far, in this process: a batch that
/// binds what one of the batches just before it bound (the same kernel, buffers and
/// ranges) makes none.
pub fn bind_groups_created() -> u64 {
    GROUPS_CREATED.load(Ordering::Relaxed)
}

/// What a bind group binds: its kernel and, per entry, binding number, buffer and range.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKey {
    kernel: Kernel,
    entries: Vec<(u32, wgpu::Buffer, u64, u64)>,
}

/// The bind groups of the last [`KEPT_BATCHES`] batches, with the batch that last used
/// each. (They keep their buffers alive: one a grow replaced lives on until its groups
/// are dropped, at most that many batches later.)
#[derive(Debug, Default)]
struct GroupCache {
    groups: HashMap<GroupKey, (wgpu::BindGroup, u64)>,
    batch: u64,
}

/// Compiled pipelines for a set of kernels, built once per device.
#[derive(Debug)]
pub struct Pipelines {
    pipelines: Vec<Pipeline>,
    groups: Mutex<GroupCache>,
}

impl Pipelines {
    /// Compiles `kernels` (each source once) with explicit bind group layouts. A shader or
    /// pipeline the device rejects is [`crate::Error::Device`].
    pub fn new(ctx: &WgpuContext, kernels: &[Kernel]) -> Result<Self> {
        let device = ctx.device();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut modules: Vec<(&str, wgpu::ShaderModule)> = Vec::new();
        let mut pipelines = Vec::with_capacity(kernels.len());
        for &kernel in kernels {
            let (source, storages, params) = spec(kernel);
            let module = match modules.iter().find(|(s, _)| std::ptr::eq(*s, source)) {
                Some((_, m)) => m.clone(),
                None => {
                    let m = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(kernel.source()),
                        source: wgpu::ShaderSource::Wgsl(source.into()),
                    });
                    modules.push((source, m.clone()));
                    m
                }
            };
            let first = u32::from(params == Params::Uniform);
            let mut entries: Vec<wgpu::BindGroupLayoutEntry> = storages
                .iter()
                .enumerate()
                .map(|(i, &ro)| storage_entry(first + i as u32, ro))
                .collect();
            match params {
                Params::None => {}
                Params::Uniform => entries.push(wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: NonZeroU64::new((PARAM_WORDS * 4) as u64),
                    },
                    count: None,
                }),
                Params::Storage => {
                    let mut e = storage_entry(storages.len() as u32, true);
                    if let wgpu::BindingType::Buffer {
                        min_binding_size, ..
                    } = &mut e.ty
                    {
                        *min_binding_size = NonZeroU64::new(4 * 8);
                    }
                    entries.push(e);
                }
            }
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(kernel.name()),
                entries: &entries,
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(kernel.name()),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(kernel.name()),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(kernel.name()),
                compilation_options: Default::default(),
                cache: None,
            });
            pipelines.push(Pipeline {
                kernel,
                pipeline,
                layout,
            });
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(WgpuError::Rejected {
                what: "shader",
                source: e,
            }
            .into());
        }
        Ok(Pipelines {
            pipelines,
            groups: Mutex::new(GroupCache::default()),
        })
    }

    fn get(&self, kernel: Kernel) -> Result<&Pipeline> {
        self.pipelines
            .iter()
            .find(|p| p.kernel == kernel)
            .ok_or_else(|| DeviceError::Kernel(kernel.name()).into())
    }

    /// Records `steps` into `encoder`, binding each [`Buffer`] to what `buffer` returns.
    /// A missing buffer, or a binding outside its buffer or without `STORAGE` usage, is
    /// [`crate::Error::Device`], reported before anything is recorded.
    ///
    /// The launches' parameter records go into the buffer kept in `params_slot` (grown
    /// when they need more), written through the queue: the write lands after every
    /// earlier submission and before the next, so the buffer is reused batch after batch.
    /// Submit `encoder` before `params_slot` is recorded into again. `new_batch`: these
    /// are a batch's first steps (a batch with an entropy check is recorded in two parts;
    /// the bind groups are kept for [`KEPT_BATCHES`] batches, not parts).
    #[allow(clippy::too_many_arguments)]
    pub fn record<'b>(
        &self,
        ctx: &WgpuContext,
        encoder: &mut wgpu::CommandEncoder,
        steps: &[Step],
        new_batch: bool,
        params_slot: &mut Option<wgpu::Buffer>,
        buffer: impl Fn(Buffer) -> Option<&'b wgpu::Buffer>,
    ) -> Result<()> {
        let resolve = |b: crate::backend::device::Binding, usage: wgpu::BufferUsages| {
            let buf = buffer(b.buffer).ok_or(DeviceError::Unbound(b.buffer))?;
            if !buf.usage().contains(usage) {
                return Err(WgpuError::Usage {
                    buffer: b.buffer,
                    usage,
                }
                .into());
            }
            if b.offset + b.size.max(4) > buf.size() {
                return Err(DeviceError::Bounds {
                    buffer: b.buffer,
                    len: buf.size(),
                    start: b.offset,
                    end: b.offset + b.size,
                }
                .into());
            }
            Ok(buf)
        };
        // Validate everything and gather the parameter records first.
        let mut records: Vec<u32> = Vec::new();
        let mut record_of = Vec::with_capacity(steps.len());
        for step in steps {
            match step {
                Step::Launch(l) => {
                    let (_, storages, params) = spec(l.kernel);
                    if l.bindings.len() != storages.len() {
                        return Err(DeviceError::BindingCount {
                            kernel: l.kernel.name(),
                            expected: storages.len(),
                            bindings: l.bindings.len(),
                        }
                        .into());
                    }
                    for b in &l.bindings {
                        resolve(*b, wgpu::BufferUsages::STORAGE)?;
                    }
                    if params == Params::None {
                        record_of.push(None);
                    } else {
                        record_of.push(Some(records.len() as u64 * 4));
                        records.extend_from_slice(&l.params);
                        records
                            .resize(records.len() + (PARAM_STRIDE / 4) as usize - PARAM_WORDS, 0);
                    }
                }
                Step::Copy { src, dst } => {
                    if src.size != dst.size || src.size % 4 != 0 || dst.offset % 4 != 0 {
                        return Err(DeviceError::CopyStep {
                            src: *src,
                            dst: *dst,
                        }
                        .into());
                    }
                    resolve(*src, wgpu::BufferUsages::COPY_SRC)?;
                    resolve(*dst, wgpu::BufferUsages::COPY_DST)?;
                    record_of.push(None);
                }
                Step::Hardware => return Err(DeviceError::NoHardwareDecoder.into()),
                // The batcher submits the steps before it and reads the status back.
                Step::EntropyCheck { status } => {
                    resolve(*status, wgpu::BufferUsages::COPY_SRC)?;
                    record_of.push(None);
                }
            }
        }
        let device = ctx.device();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let params = write_params(ctx, params_slot, &records)?;
        let mut cache = self
            .groups
            .lock()
            .map_err(|_| crate::Error::internal("the bind group cache was poisoned"))?;
        cache.batch += u64::from(new_batch);
        let batch = cache.batch;
        cache
            .groups
            .retain(|_, (_, used)| *used + KEPT_BATCHES > batch);
        let mut groups = Vec::with_capacity(steps.len());
        for (step, rec) in steps.iter().zip(&record_of) {
            let Step::Launch(l) = step else {
                groups.push(None);
                continue;
            };
            groups.push(Some(self.bind_group(
                ctx,
                l,
                params.as_ref(),
                *rec,
                &resolve,
                &mut cache,
            )?));
        }
        drop(cache);
        if let Some(e) = pollster::block_on(scope.pop()) {
            // No group made under a validation error is kept.
            if let Ok(mut cache) = self.groups.lock() {
                cache.groups.clear();
            }
            return Err(WgpuError::Rejected {
                what: "bindings",
                source: e,
            }
            .into());
        }
        let mut i = 0;
        while i < steps.len() {
            match &steps[i] {
                Step::Copy { src, dst } => {
                    let (s, d) = (
                        resolve(*src, wgpu::BufferUsages::COPY_SRC)?,
                        resolve(*dst, wgpu::BufferUsages::COPY_DST)?,
                    );
                    encoder.copy_buffer_to_buffer(s, src.offset, d, dst.offset, src.size);
                    i += 1;
                }
                // Refused above; the entropy check is the batcher's (between submissions).
                Step::Hardware | Step::EntropyCheck { .. } => i += 1,
                Step::Launch(_) => {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("stoker batch"),
                        timestamp_writes: None,
                    });
                    while let Some(Step::Launch(l)) = steps.get(i) {
                        pass.set_pipeline(&self.get(l.kernel)?.pipeline);
                        if let Some(Some(g)) = groups.get(i) {
                            pass.set_bind_group(0, g, &[]);
                        }
                        pass.dispatch_workgroups(l.grid[0], l.grid[1], 1);
                        i += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// The bind group of launch `l`: the one a recent batch made for the same bindings
    /// (`cache`), or a new one, kept there.
    #[allow(clippy::too_many_arguments)]
    fn bind_group<'b>(
        &self,
        ctx: &WgpuContext,
        l: &Launch,
        params: Option<&wgpu::Buffer>,
        record: Option<u64>,
        resolve: &impl Fn(
            crate::backend::device::Binding,
            wgpu::BufferUsages,
        ) -> Result<&'b wgpu::Buffer>,
        cache: &mut GroupCache,
    ) -> Result<wgpu::BindGroup> {
        let p = self.get(l.kernel)?;
        let (_, storages, mode) = spec(l.kernel);
        let first = u32::from(mode == Params::Uniform);
        let mut key = GroupKey {
            kernel: l.kernel,
            entries: Vec::with_capacity(storages.len() + 1),
        };
        for (i, b) in l.bindings.iter().enumerate() {
            let buf = resolve(*b, wgpu::BufferUsages::STORAGE)?;
            key.entries
                .push((first + i as u32, buf.clone(), b.offset, b.size));
        }
        if let (Some(params), Some(at)) = (params, record) {
            match mode {
                Params::Uniform => {
                    key.entries
                        .push((0, params.clone(), at, (PARAM_WORDS * 4) as u64))
                }
                Params::Storage => {
                    key.entries
                        .push((storages.len() as u32, params.clone(), at, 32))
                }
                Params::None => {}
            }
        }
        let batch = cache.batch;
        if let Some((group, used)) = cache.groups.get_mut(&key) {
            *used = batch;
            return Ok(group.clone());
        }
        let entries: Vec<wgpu::BindGroupEntry<'_>> = key
            .entries
            .iter()
            .map(|(binding, buf, offset, size)| bind(buf, *binding, *offset, *size))
            .collect();
        GROUPS_CREATED.fetch_add(1, Ordering::Relaxed);
        let group = ctx.device().create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(l.kernel.name()),
            layout: &p.layout,
            entries: &entries,
        });
        drop(entries);
        cache.groups.insert(key, (group.clone(), batch));
        Ok(group)
    }
}

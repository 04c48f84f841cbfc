//! EXIF orientation on the device: a decoded window (stored frame) is turned upright
//! into a scratch buffer by `shaders/orient.wgsl`, then copied back into the windows
//! buffer where the augment pass reads it. The pixels are those of the CPU decoder's
//! `reorient` (Pillow's `exif_transpose`).

use std::num::NonZeroU64;

use super::decode::GpuImage;
use super::{bind, shaders, storage_entry, WgpuContext};
use crate::error::{Error, Result};

/// Binding offsets are multiples of this (the WebGPU default, and the largest any
/// adapter asks for).
const ALIGN: u64 = 256;
/// Words of one parameter record.
const PARAM_WORDS: usize = 8;

/// One window to turn: `src` as decoded, `orientation` (2-8), written at word `dst`.
#[derive(Debug, Clone, Copy)]
pub struct OrientJob {
    /// The decoded (stored-frame) window.
    pub src: GpuImage,
    /// EXIF orientation, 2-8.
    pub orientation: u8,
    /// First word of the upright window in the windows buffer.
    pub dst: u64,
}

impl OrientJob {
    /// Width and height of the upright window.
    pub fn size(&self) -> (u32, u32) {
        if self.orientation >= 5 {
            (self.src.height, self.src.width)
        } else {
            (self.src.width, self.src.height)
        }
    }
}

/// Grow-only buffers of the orientation pass.
#[derive(Debug, Default)]
pub struct OrientScratch {
    out: Option<wgpu::Buffer>,
    params: Option<wgpu::Buffer>,
}

/// The orientation pipeline, built once per device.
#[derive(Debug)]
pub struct OrientKernel {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

impl OrientKernel {
    /// Compiles `shaders/orient.wgsl`; a rejected shader is [`Error::Device`].
    pub fn new(ctx: &WgpuContext) -> Result<Self> {
        let device = ctx.device();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut params = storage_entry(2, true);
        if let wgpu::BindingType::Buffer {
            min_binding_size, ..
        } = &mut params.ty
        {
            *min_binding_size = NonZeroU64::new(4 * PARAM_WORDS as u64);
        }
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("stoker orient"),
            entries: &[storage_entry(0, true), storage_entry(1, false), params],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("stoker orient"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("orient.wgsl"),
            source: wgpu::ShaderSource::Wgsl(shaders::ORIENT.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("stoker orient"),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("orient"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Device(format!("orient pipeline rejected: {e}")));
        }
        Ok(OrientKernel { pipeline, layout })
    }

    /// Records the orientation of every job: one dispatch into the scratch buffer and one
    /// copy into `windows` (which needs `STORAGE | COPY_DST`) per job.
    pub fn encode(
        &self,
        ctx: &WgpuContext,
        encoder: &mut wgpu::CommandEncoder,
        jobs: &[OrientJob],
        windows: &wgpu::Buffer,
        scratch: &mut OrientScratch,
    ) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let device = ctx.device();
        let limits = device.limits();
        // Word indices in the shader are u32: bindings stay below 2 GiB.
        let max = limits.max_storage_buffer_binding_size.min(1 << 31);
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        if !windows.usage().contains(usage) {
            return Err(Error::Device(
                "the windows buffer needs STORAGE | COPY_DST usage".into(),
            ));
        }
        let per_dim = u64::from(limits.max_compute_workgroups_per_dimension.max(1));
        let stride = ALIGN / 4;
        let mut records = vec![0u32; jobs.len() * stride as usize];
        let mut plans = Vec::with_capacity(jobs.len());
        let mut largest = 0u64;
        for (k, j) in jobs.iter().enumerate() {
            let (ow, oh) = j.size();
            let px = u64::from(ow) * u64::from(oh);
            let src = u64::from(j.src.offset);
            let base = (src * 4) / ALIGN * ALIGN;
            let rel = src - base / 4;
            let span = (rel + px) * 4;
            let src_end = src + u64::from(j.src.width) * u64::from(j.src.height);
            let dst_overlaps = j.dst < src_end && src < j.dst + px;
            if !(2..=8).contains(&j.orientation)
                || (j.dst + px) * 4 > windows.size()
                || dst_overlaps
                || px != u64::from(j.src.width) * u64::from(j.src.height)
            {
                return Err(Error::Device(format!(
                    "orientation job {k} is malformed (orientation {}, source at word {src}, destination at word {})",
                    j.orientation, j.dst
                )));
            }
            let groups = px.div_ceil(64).max(1);
            let gx = groups.min(per_dim);
            let gy = groups.div_ceil(gx);
            if span > max || px * 4 > max || gy > per_dim || base + span > windows.size() {
                return Err(Error::Device(format!(
                    "an oriented window of {ow}x{oh} does not fit the device's bindings"
                )));
            }
            let rel = u32::try_from(rel).map_err(|_| Error::Device("window offset".into()))?;
            let r = &mut records[k * stride as usize..][..PARAM_WORDS];
            r.copy_from_slice(&[
                rel,
                j.src.width,
                j.src.height,
                u32::from(j.orientation),
                ow,
                oh,
                (gx * 64) as u32,
                0,
            ]);
            largest = largest.max(px * 4);
            plans.push((base, span, px, gx as u32, gy as u32));
        }
        let params = ctx.grow_buffer(
            &mut scratch.params,
            "stoker orient params",
            records.len() as u64 * 4,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        )?;
        let out = ctx.grow_buffer(
            &mut scratch.out,
            "stoker orient scratch",
            largest,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        )?;
        ctx.queue()
            .write_buffer(&params, 0, bytemuck::cast_slice(&records));
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        for (k, (j, &(base, size, px, gx, gy))) in jobs.iter().zip(&plans).enumerate() {
            let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("stoker orient"),
                layout: &self.layout,
                entries: &[
                    bind(windows, 0, base, size),
                    bind(&out, 1, 0, px * 4),
                    bind(&params, 2, k as u64 * ALIGN, 4 * PARAM_WORDS as u64),
                ],
            });
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("stoker orient"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(gx, gy, 1);
            }
            encoder.copy_buffer_to_buffer(&out, 0, windows, j.dst * 4, px * 4);
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Device(format!("orient bindings rejected: {e}")));
        }
        Ok(())
    }
}

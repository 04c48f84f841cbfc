//! A wgpu training loop's view of stoker: the caller owns the device and queue, stoker
//! decodes and augments each batch on that device, and the caller's own compute pass reads
//! the batch buffer where it lies, with no copy through the host.
//!
//! `cargo run --release --example wgpu_consumer [IMAGE_FOLDER]`. The pass here computes
//! each sample's mean over its `3 x 64 x 64` normalised values and checks it against the
//! batch read back to the host.

#[path = "common/mod.rs"]
mod common;

use common::PER_SAMPLE;
use stoker::WgpuBatch;

const MEAN_PASS: &str = r#"
@group(0) @binding(0) var<storage, read> batch: array<f32>;
@group(0) @binding(1) var<storage, read_write> means: array<f32>;
@group(0) @binding(2) var<uniform> len: vec4<u32>; // x: values per sample, y: samples

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let n = len.x;
    var s = 0.0;
    for (var i = t; i < n; i += 64u) {
        s += batch[wg.x * n + i];
    }
    partial[t] = s;
    workgroupBarrier();
    for (var k = 32u; k > 0u; k >>= 1u) {
        if t < k { partial[t] += partial[t + k]; }
        workgroupBarrier();
    }
    if t == 0u { means[wg.x] = partial[0] / f32(n); }
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The training code's own device (any adapter, a software one included).
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter =
        pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))?;
    println!("adapter: {}", adapter.get_info().name);
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: adapter.limits(),
        ..Default::default()
    }))?;

    let pipe = common::pipeline(|b| b.wgpu_device(device.clone(), queue.clone()))?;

    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("mean"),
        source: wgpu::ShaderSource::Wgsl(MEAN_PASS.into()),
    });
    let pass = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("mean"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    common::check_epoch(&pipe, |batch| {
        let images = batch
            .wgpu_images()
            .ok_or("the batch is not on the device")?;
        let n = batch.len() as u32;
        let means = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("means"),
            size: 4 * u64::from(n.max(1)),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let len = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("len"),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&len, 0, bytemuck::cast_slice(&[PER_SAMPLE, n, 0, 0]));
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pass.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: images.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: means.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: len.as_entire_binding(),
                },
            ],
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: means.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        {
            let mut cp = enc.begin_compute_pass(&Default::default());
            cp.set_pipeline(&pass);
            cp.set_bind_group(0, &bind, &[]);
            cp.dispatch_workgroups(n, 1, 1);
        }
        enc.copy_buffer_to_buffer(&means, 0, &readback, 0, means.size());
        queue.submit([enc.finish()]);
        readback.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        device.poll(wgpu::PollType::wait_indefinitely())?;
        let gpu: Vec<f32> = bytemuck::cast_slice(&readback.slice(..).get_mapped_range()?).to_vec();

        Ok(gpu)
    })
}

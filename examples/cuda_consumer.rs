//! A CUDA training loop's view of stoker: the caller owns the context and stream, stoker
//! decodes and augments each batch on that device, and the caller's own kernel reads the
//! batch where it lies, ordered after it on the caller's stream with no host wait.
//!
//! `cargo run --release --example cuda_consumer [IMAGE_FOLDER]`. The kernel computes each
//! sample's mean over its `3 x 64 x 64` normalised values and checks it against the batch
//! read back to the host. Without a CUDA device it says why and exits.

use std::sync::Arc;

use stoker::backend::cuda::cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use stoker::backend::cuda::cudarc::nvrtc;
use stoker::{Augment, DType, Dataset, Pipeline};

const SIZE: u32 = 64;

/// The "training step": one block per sample, a tree reduction in shared memory.
const MEAN_KERNEL: &str = r#"
extern "C" __global__ void sample_means(const float* batch, float* means, unsigned int n) {
    __shared__ float partial[256];
    const float* x = batch + (unsigned long long)blockIdx.x * n;
    float s = 0.0f;
    for (unsigned int i = threadIdx.x; i < n; i += 256) s += x[i];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (unsigned int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) means[blockIdx.x] = partial[0] / (float)n;
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/samples").to_string());

    // The training code's own context and stream. cudarc panics when the driver library
    // is absent, so ask first.
    if !stoker::backend::cuda::driver_present() {
        println!("no CUDA driver on this machine: nothing to show");
        return Ok(());
    }
    let ctx: Arc<CudaContext> = match CudaContext::new(0) {
        Ok(c) => c,
        Err(e) => {
            println!("no CUDA device: {e}");
            return Ok(());
        }
    };
    let stream = ctx.new_stream()?;
    println!("device: {}", ctx.name()?);

    let pipe = Pipeline::builder(Dataset::image_folder(&root)?.all())
        .cuda_stream(ctx.clone(), stream.clone())
        .augment(
            Augment::new()
                .random_resized_crop(SIZE, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
                .flip_horizontal(0.5)
                .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
                .dtype(DType::F32),
        )
        .batch_size(4)
        .seed(42)
        .build()?;
    println!("backend: {}", pipe.backend().1);

    stoker::backend::cuda::kernels::nvrtc_available()?;
    let ptx = nvrtc::compile_ptx(MEAN_KERNEL)?;
    let kernel = ctx.load_module(ptx)?.load_function("sample_means")?;
    let per_sample = 3 * SIZE * SIZE;
    for batch in pipe.epoch(0)? {
        let batch = batch?;
        let images = batch
            .cuda_images()
            .ok_or("the batch is not on the device")?;
        let n = batch.len() as u32;
        let mut means = stream.alloc_zeros::<f32>(n.max(1) as usize)?;
        // SAFETY: the batch holds `n * per_sample` f32 values (NCHW); the kernel reads
        // exactly those and writes `n` means. The stream already waits for the batch.
        let batch_f32 =
            unsafe { images.transmute::<f32>(images.len() / 4) }.ok_or("batch buffer too small")?;
        let mut launch = stream.launch_builder(&kernel);
        launch.arg(&batch_f32).arg(&mut means).arg(&per_sample);
        // SAFETY: the arguments match the kernel's signature.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (n, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        let gpu = stream.clone_dtoh(&means)?;

        // The same means from the batch copied to the host.
        let host = batch.read_images()?;
        let values: &[f32] = bytemuck::cast_slice(&host);
        for (i, m) in gpu.iter().take(batch.len()).enumerate() {
            let chunk = &values[i * per_sample as usize..(i + 1) * per_sample as usize];
            let want = chunk.iter().sum::<f32>() / per_sample as f32;
            println!(
                "batch {} sample {:016x}: mean {m:+.4} (host {want:+.4})",
                batch.index(),
                batch.ids()[i]
            );
            if (m - want).abs() > 1e-3 {
                return Err(format!("device mean {m} != host mean {want}").into());
            }
        }
    }
    Ok(())
}

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
use stoker::CudaBatch;
#[path = "common/mod.rs"]
mod common;

use common::PER_SAMPLE;

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

    let pipe = common::pipeline(|b| b.cuda_stream(ctx.clone(), stream.clone()))?;

    stoker::backend::cuda::kernels::nvrtc_available()?;
    let ptx = nvrtc::compile_ptx(MEAN_KERNEL)?;
    let kernel = ctx.load_module(ptx)?.load_function("sample_means")?;
    common::check_epoch(&pipe, |batch| {
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
        launch.arg(&batch_f32).arg(&mut means).arg(&PER_SAMPLE);
        // SAFETY: the arguments match the kernel's signature.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (n, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        let gpu = stream.clone_dtoh(&means)?;

        Ok(gpu)
    })
}

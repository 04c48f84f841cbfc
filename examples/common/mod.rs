//! What the device-consumer examples share: the pipeline they build on the caller's device
//! and the check of the means their own pass computes against the batch read back to the
//! host.

use stoker::{Augment, Batch, DType, Dataset, Pipeline, PipelineBuilder};

/// Output side of each sample, in pixels.
pub const SIZE: u32 = 64;

/// Values per sample: `3 x SIZE x SIZE` normalised `f32`s.
pub const PER_SAMPLE: u32 = 3 * SIZE * SIZE;

/// The pipeline of both examples over the image folder given as the first argument (the
/// test samples by default), on the device `device` sets on its builder: batches of 4
/// random resized crops, flipped and normalised to `f32`.
pub fn pipeline(
    device: impl FnOnce(PipelineBuilder) -> PipelineBuilder,
) -> stoker::Result<Pipeline> {
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/samples").to_string());
    let pipe = device(Pipeline::builder(Dataset::image_folder(&root)?.all()))
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
    println!("backend: {}", pipe.backend_reason());
    Ok(pipe)
}

/// Runs epoch 0 of `pipe`, with `means` computing each batch's per-sample means on the
/// device, and checks them by [`check_means`].
pub fn check_epoch(
    pipe: &Pipeline,
    mut means: impl FnMut(&Batch) -> Result<Vec<f32>, Box<dyn std::error::Error>>,
) -> Result<(), Box<dyn std::error::Error>> {
    for batch in pipe.epoch(0)? {
        let batch = batch?;
        let gpu = means(&batch)?;
        check_means(&batch, &gpu)?;
    }
    Ok(())
}

/// Checks the per-sample means computed on the device against the same means from the
/// batch copied to the host, printing each.
fn check_means(batch: &Batch, gpu: &[f32]) -> Result<(), Box<dyn std::error::Error>> {
    let host = batch.read_images()?;
    let values: &[f32] = bytemuck::cast_slice(&host);
    for (i, m) in gpu.iter().take(batch.len()).enumerate() {
        let chunk = &values[i * PER_SAMPLE as usize..(i + 1) * PER_SAMPLE as usize];
        let want = chunk.iter().sum::<f32>() / PER_SAMPLE as f32;
        println!(
            "batch {} sample {:016x}: mean {m:+.4} (host {want:+.4})",
            batch.index(),
            batch.ids()[i]
        );
        if (m - want).abs() > 1e-3 {
            return Err(format!("device mean {m} != host mean {want}").into());
        }
    }
    Ok(())
}

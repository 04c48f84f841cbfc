//! Hand-offs to the Rust deep-learning frameworks: a [`Batch`](crate::Batch) as the
//! framework's own tensors on the framework's own device, and
//! [`PipelineBuilder`](crate::PipelineBuilder) methods that take the framework's device, so
//! a training loop never assembles wgpu or CUDA handles by hand.
//!
//! | feature | framework | devices | hand-off |
//! | --- | --- | --- | --- |
//! | `burn` | burn 0.22 | wgpu (through cubecl), the CPU | one device-to-device copy per plane on the shared queue; a host batch by one copy |
//! | `candle` | candle 0.11 | the CPU | one copy |
//! | `candle-cuda` | candle 0.11 with `cuda` | CUDA (candle's context and stream) | one device-to-device copy per plane on candle's stream, after the batch's event |
//!
//! A batch on one device and a tensor wanted on another is an
//! [`Error::DeviceMismatch`](crate::Error::DeviceMismatch); a host batch goes to any
//! device (that is the CPU fallback: one upload).

#[cfg(feature = "burn")]
pub mod burn;
#[cfg(feature = "candle")]
pub mod candle;

/// Where a batch lives, for the errors.
#[allow(dead_code)] // Unused in a build with neither framework.
pub(crate) fn batch_location(batch: &crate::Batch) -> String {
    #[cfg(feature = "wgpu")]
    if crate::backend::wgpu::WgpuBatch::wgpu_images(batch).is_some() {
        return "a wgpu device".into();
    }
    #[cfg(feature = "cuda")]
    if crate::backend::cuda::CudaBatch::cuda_images(batch).is_some() {
        return "a CUDA device".into();
    }
    match batch.on_device() {
        true => "a device of a custom backend".into(),
        false => "the host".into(),
    }
}

/// The batch's labels, for a label tensor: `None` when no sample has one, an
/// [`Error::Framework`](crate::Error::Framework) of `framework` when only some do (a
/// tensor cannot hold a missing label).
#[allow(dead_code)] // Unused in a build with neither framework.
pub(crate) fn labels(
    batch: &crate::Batch,
    framework: &'static str,
) -> crate::Result<Option<Vec<u32>>> {
    let labels = batch.labels();
    if labels.iter().all(Option::is_none) {
        return Ok(None);
    }
    let values: Option<Vec<u32>> = labels.iter().copied().collect();
    values.map(Some).ok_or_else(|| crate::Error::Framework {
        framework,
        reason: format!(
            "batch {} mixes labelled and unlabelled samples; a label tensor cannot hold a \
             missing label (read batch.labels() instead)",
            batch.index()
        ),
    })
}

/// `[N, H, W]` of the batch's masks, whatever its layout.
#[allow(dead_code)] // Unused in a build with neither framework.
pub(crate) fn mask_shape(batch: &crate::Batch) -> [usize; 3] {
    let [n, a, b, c] = batch.shape();
    match batch.layout() {
        crate::Layout::Nchw => [n, b, c],
        crate::Layout::Nhwc => [n, a, b],
    }
}

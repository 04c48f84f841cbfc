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
    if batch.wgpu_images().is_some() {
        return "a wgpu device".into();
    }
    #[cfg(feature = "cuda")]
    if batch.cuda_images().is_some() {
        return "a CUDA device".into();
    }
    match batch.on_device() {
        true => "a device of a custom backend".into(),
        false => "the host".into(),
    }
}

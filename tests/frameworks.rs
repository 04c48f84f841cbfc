//! The framework hand-offs (features `burn` and `candle`): a batch becomes burn and candle
//! tensors holding exactly the batch's images, labels and masks, on the framework's own
//! device, and burn's wgpu device is the one stoker decoded on.
//!
//! The reference is the batch itself as the host sees it (`Batch::images`, `masks`,
//! `labels`, or `read_images` / `read_masks` for a device batch, read back here only to
//! check). wgpu runs on lavapipe in CI (`STOKER_REQUIRE_WGPU=1` makes a missing adapter a
//! failure).

mod common;

#[path = "../examples/common/synth.rs"]
#[allow(dead_code)]
mod synth;

use stoker::{Augment, DType, Dataset, Error, Pipeline, PipelineBuilder, Subset, WgpuBatch};

const SIZE: u32 = 24;

/// A segmentation set of 13 images (an odd count, so the last batch of 4 is short) with
/// labels and masks, in a fresh folder.
fn dataset() -> (tempfile::TempDir, Subset) {
    let dir = tempfile::tempdir().expect("tempdir");
    let set = synth::ensure(
        dir.path(),
        synth::SynthSpec {
            count: 13,
            size: 40,
            seed: 3,
        },
    )
    .expect("the synthetic set");
    let data = Dataset::image_folder(&set.images)
        .and_then(|d| d.with_masks(&set.masks))
        .expect("the dataset");
    (dir, data.all())
}

fn pipeline(
    subset: Subset,
    dtype: DType,
    on: impl FnOnce(PipelineBuilder) -> PipelineBuilder,
) -> Pipeline {
    let mut aug = Augment::new()
        .random_resized_crop(SIZE, (0.5, 1.0), (0.75, 1.333))
        .flip_horizontal(0.5)
        .color_jitter(0.2, 0.2, 0.2);
    if dtype != DType::U8 {
        aug = aug.normalize([0.5; 3], [0.25; 3]);
    }
    on(Pipeline::builder(subset))
        .augment(aug.dtype(dtype))
        .batch_size(4)
        .seed(11)
        .build()
        .expect("the pipeline")
}

/// The batch's masks as the host sees them, each value widened to `T`.
fn host_masks<T: From<u16>>(batch: &stoker::Batch) -> Vec<T> {
    batch
        .masks()
        .expect("masks")
        .iter()
        .map(|&v| T::from(v))
        .collect()
}

fn host_labels(batch: &stoker::Batch) -> Vec<i64> {
    batch
        .labels()
        .iter()
        .map(|l| i64::from(l.expect("labelled")))
        .collect()
}

mod candle {
    use super::*;
    use candle_core::{DType as C, Device};

    #[test]
    fn a_cpu_batch_becomes_candle_tensors_of_the_same_values() {
        let (_dir, subset) = dataset();
        for dtype in [DType::F32, DType::U8, DType::F16] {
            let pipe = pipeline(subset.clone(), dtype, |b| b.candle_device(&Device::Cpu));
            let mut seen = 0;
            for batch in pipe.epoch(1).expect("epoch") {
                let batch = batch.expect("batch");
                let t = batch.to_candle(&Device::Cpu).expect("to_candle");
                let shape = batch.shape();
                assert_eq!(t.images.dims(), &shape[..]);
                match dtype {
                    DType::F32 => {
                        assert_eq!(t.images.dtype(), C::F32);
                        let got = t.images.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                        assert_eq!(got, batch.images::<f32>().unwrap());
                    }
                    DType::U8 => {
                        assert_eq!(t.images.dtype(), C::U8);
                        let got = t.images.flatten_all().unwrap().to_vec1::<u8>().unwrap();
                        assert_eq!(got, batch.images::<u8>().unwrap());
                    }
                    DType::F16 => {
                        assert_eq!(t.images.dtype(), C::F16);
                        let got = t
                            .images
                            .flatten_all()
                            .unwrap()
                            .to_vec1::<half::f16>()
                            .unwrap();
                        assert_eq!(got, batch.images::<half::f16>().unwrap());
                    }
                }
                let masks = t.masks.expect("masks");
                assert_eq!(masks.dims(), &[batch.len(), SIZE as usize, SIZE as usize]);
                let got = masks.flatten_all().unwrap().to_vec1::<u32>().unwrap();
                let want: Vec<u32> = host_masks(&batch);
                assert_eq!(got, want);
                assert!(
                    want.iter().any(|&v| v > 0),
                    "a batch of masks with no shape"
                );
                let labels = t.labels.expect("labels").to_vec1::<u32>().unwrap();
                let want: Vec<u32> = host_labels(&batch).iter().map(|&l| l as u32).collect();
                assert_eq!(labels, want);
                seen += batch.len();
            }
            assert_eq!(seen, 13, "every sample once");
        }
    }

    #[test]
    fn a_device_batch_wanted_on_the_cpu_is_a_device_mismatch() {
        let Some(ctx) = wgpu_context() else { return };
        let (_dir, subset) = dataset();
        let (_pipe, batch) = first_batch_on(&ctx, subset);
        assert!(batch.on_device());
        match batch.to_candle(&Device::Cpu) {
            Err(Error::DeviceMismatch { .. }) => {}
            other => panic!("expected a device mismatch, got {:?}", other.map(|_| ())),
        }
    }
}

/// The first batch of an `f32` pipeline over `subset` on `ctx` (with its pipeline, which
/// must outlive it).
fn first_batch_on(
    ctx: &stoker::backend::wgpu::WgpuContext,
    subset: Subset,
) -> (Pipeline, stoker::Batch) {
    let pipe = pipeline(subset, DType::F32, |b| {
        b.wgpu_device(ctx.device().clone(), ctx.queue().clone())
    });
    let batch = common::first_batch(&pipe);
    (pipe, batch)
}

/// stoker's own wgpu device (lavapipe in CI), for the mismatch tests.
fn wgpu_context() -> Option<stoker::backend::wgpu::WgpuContext> {
    let found = stoker::backend::wgpu::WgpuContext::new(true);
    common::require_or_skip(found, "STOKER_REQUIRE_WGPU", "wgpu adapter")
}

mod burn {
    use super::*;
    use ::burn::tensor::{Device, Int, Tensor};
    use stoker::frameworks::burn as sb;

    fn floats(t: Tensor<4>) -> Vec<f32> {
        t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
    }

    fn ints<const D: usize>(t: Tensor<D, Int>) -> Vec<i64> {
        t.into_data().convert::<i64>().try_to_vec::<i64>().unwrap()
    }

    fn burn_wgpu() -> Option<Device> {
        common::require_or_skip(
            sb::wgpu_device(),
            "STOKER_REQUIRE_WGPU",
            "wgpu device for burn",
        )
    }

    /// The pipeline runs on burn's own wgpu device: its batches are buffers there, and
    /// they become burn tensors by a copy on that device (a buffer of another device
    /// could not be copied from), holding exactly what the batch holds.
    #[test]
    fn a_wgpu_batch_becomes_burn_tensors_on_the_shared_device() {
        let Some(device) = burn_wgpu() else { return };
        let (_dir, subset) = dataset();
        let pipe = pipeline(subset, DType::F32, |b| b.burn_device(&device));
        assert!(
            pipe.backend_reason().to_lowercase().contains("wgpu"),
            "the pipeline runs on {}",
            pipe.backend_reason()
        );
        let train = device.clone().autodiff();
        let mut seen = 0;
        for batch in pipe.epoch(2).expect("epoch") {
            let batch = batch.expect("batch");
            assert!(
                batch.wgpu_images().is_some(),
                "the batch lives on the device"
            );
            // Twice, onto the plain and the autodiff device: the copy does not consume
            // the batch.
            let t = batch.to_burn(&device).expect("to_burn");
            let t2 = batch
                .to_burn(&train)
                .expect("to_burn on the autodiff device");
            assert_eq!(t.images.dims(), batch.shape());
            let want: Vec<f32> = bytemuck::cast_slice(&batch.read_images().unwrap()).to_vec();
            assert_eq!(floats(t.images), want);
            assert_eq!(floats(t2.images), want);
            let masks = t.masks.expect("masks");
            assert_eq!(masks.dims(), [batch.len(), SIZE as usize, SIZE as usize]);
            let want: Vec<i64> = batch
                .read_masks()
                .unwrap()
                .unwrap()
                .iter()
                .map(|&v| i64::from(v))
                .collect();
            assert!(
                want.iter().any(|&v| v > 0),
                "a batch of masks with no shape"
            );
            assert_eq!(ints(masks), want);
            assert_eq!(ints(t.labels.expect("labels")), host_labels(&batch));
            seen += batch.len();
        }
        assert_eq!(seen, 13, "every sample once");
    }

    #[test]
    fn a_cpu_batch_becomes_burn_tensors_on_the_cpu_backend() {
        #[allow(deprecated)]
        let device = Device::ndarray();
        let (_dir, subset) = dataset();
        let pipe = pipeline(subset, DType::F32, |b| b.burn_device(&device));
        for batch in pipe.epoch(0).expect("epoch") {
            let batch = batch.expect("batch");
            assert!(!batch.on_device());
            let t = batch.to_burn(&device).expect("to_burn");
            assert_eq!(floats(t.images), batch.images::<f32>().unwrap());
            assert_eq!(ints(t.masks.expect("masks")), host_masks::<i64>(&batch));
            assert_eq!(ints(t.labels.expect("labels")), host_labels(&batch));
        }
    }

    /// A batch on stoker's own wgpu device (not burn's) is refused, not copied across
    /// devices; so is a u8 batch on wgpu, and a burn wgpu device stoker was not given.
    #[test]
    fn a_batch_on_another_device_is_a_device_mismatch() {
        let Some(device) = burn_wgpu() else { return };
        let Some(ctx) = wgpu_context() else { return };
        let (_dir, subset) = dataset();
        let (_pipe, batch) = first_batch_on(&ctx, subset.clone());
        match batch.to_burn(&device) {
            Err(Error::DeviceMismatch { .. }) => {}
            other => panic!("expected a device mismatch, got {:?}", other.map(|_| ())),
        }
        let pipe = pipeline(subset, DType::U8, |b| b.burn_device(&device));
        let batch = common::first_batch(&pipe);
        match batch.to_burn(&device) {
            Err(Error::Framework { reason, .. }) => assert!(reason.contains("u8"), "{reason}"),
            other => panic!("expected a dtype refusal, got {:?}", other.map(|_| ())),
        }
    }
}

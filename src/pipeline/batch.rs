//! The [`Batch`] handle the consumer receives, and the buffers it returns to the ring.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;
use half::f16;

use super::memory::HostBuffer;
use super::Config;
use crate::augment::mix::{self, BatchMix};
use crate::augment::{DType, Element, Layout, SamplePlan};
use crate::backend::device::{BatchShape, DeviceBuffers, DeviceError, OnDevice, Plane};
use crate::decode::{DecodeWarning, WarningKind};
use crate::error::{Error, Result, SampleError};
use crate::source::Targets;

/// Output buffers for one batch: images, and masks for segmentation sets.
#[derive(Debug)]
pub(crate) struct BatchBuffers {
    pub images: HostBuffer,
    pub masks: Option<HostBuffer>,
    /// The device buffers, when batches are made on a device (the host ones are then
    /// empty).
    pub gpu: Option<Box<dyn DeviceBuffers>>,
}

impl BatchBuffers {
    pub(crate) fn new(cfg: &Config) -> Result<Self> {
        Ok(BatchBuffers {
            images: HostBuffer::new(cfg.batch_size.saturating_mul(cfg.host_image_bytes()))?,
            masks: match cfg.has_masks {
                true => Some(HostBuffer::new(
                    cfg.batch_size.saturating_mul(cfg.host_mask_bytes()),
                )?),
                false => None,
            },
            gpu: match &cfg.batcher {
                Some(g) => Some(
                    g.lock()
                        .map_err(|_| Error::poisoned("device batcher"))?
                        .buffers(BatchShape {
                            slots: cfg.batch_size,
                            image_bytes: cfg.image_bytes(),
                            mask_bytes: cfg.mask_bytes(),
                        })?,
                ),
                None => None,
            },
        })
    }
}

/// A sample that was delivered by a replacement (`OnError::Replace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replacement {
    /// Slot in the batch.
    pub slot: usize,
    /// The sample that failed.
    pub failed_id: u64,
    /// The sample delivered in its place.
    pub by_id: u64,
}

/// A sample delivered from a file its decoder had to tolerate something in: extraneous
/// bytes, an end at a scan boundary (delivered in strict mode too, the pixels being what
/// the file defines), or damaged data decoded with strict decoding off
/// ([`WarningKind::Damaged`]: libjpeg filled what it could not decode, so the pixels
/// differ from the intended image). Listed by [`Batch::warnings`], counted in
/// [`Stats::samples_with_warnings`](super::Stats::samples_with_warnings).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct SampleWarning {
    /// Slot in the batch.
    pub slot: usize,
    /// The stable id of the sample delivered.
    pub id: u64,
    /// Its path (relative to the dataset root) or other location.
    pub path: String,
    /// What kind of fault, and so whether the pixels are affected.
    pub kind: WarningKind,
    /// The decoder's message (libjpeg's, for JPEGs).
    pub message: String,
}

impl SampleWarning {
    /// The warning `w` about `sample`, in slot 0 until the batch places it.
    pub(crate) fn new(sample: &crate::source::Sample, w: DecodeWarning) -> Self {
        SampleWarning {
            slot: 0,
            id: sample.id,
            path: sample.path.clone(),
            kind: w.kind,
            message: w.message,
        }
    }
}

impl std::fmt::Display for SampleWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sample {:016x} ({}): {}: {}",
            self.id,
            self.path,
            self.kind.name(),
            self.message
        )
    }
}

/// A batch: images (and masks) in one contiguous host buffer, with labels and ids.
/// Dropping it returns its buffers to the pipeline's ring.
#[derive(Debug)]
pub struct Batch {
    pub(super) index: usize,
    pub(super) epoch: u64,
    pub(super) len: usize,
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) dtype: DType,
    pub(super) layout: Layout,
    pub(super) buffers: Option<BatchBuffers>,
    pub(super) labels: Vec<Option<u32>>,
    pub(super) ids: Vec<u64>,
    pub(super) plans: Vec<SamplePlan>,
    /// Each slot's targets moved by its plan (`None` where the sample has none).
    pub(super) targets: Vec<Option<Targets>>,
    /// How the batch was mixed (MixUp, CutMix), if it was.
    pub(super) mix: Option<BatchMix>,
    pub(super) errors: Vec<SampleError>,
    pub(super) replacements: Vec<Replacement>,
    pub(super) repeated: Vec<bool>,
    pub(super) warnings: Vec<SampleWarning>,
    pub(super) return_tx: Sender<BatchBuffers>,
    pub(super) held: Arc<AtomicUsize>,
    /// Host copies of a device batch, read back on first use of a host accessor.
    pub(super) host_images: std::sync::OnceLock<HostBuffer>,
    pub(super) host_masks: std::sync::OnceLock<HostBuffer>,
    /// The job's state right after this batch.
    pub(super) state: super::ResumeState,
    /// Each slot's source in a [`Mixture`](crate::Mixture) (0 for one subset).
    pub(super) sources: Vec<usize>,
}

/// The batch's device buffers, for the backends' typed accessors (`stoker::WgpuBatch`,
/// `stoker::CudaBatch`).
impl OnDevice for Batch {
    fn device_buffers(&self) -> Option<&dyn DeviceBuffers> {
        self.buffers.as_ref()?.gpu.as_deref()
    }
}

impl Batch {
    /// Position of this batch in its epoch.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The epoch it belongs to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The state right after this batch (its global batch consumed by all ranks): save it
    /// with the checkpoint of the model trained on it, and continue with
    /// [`Pipeline::resume`](super::Pipeline::resume), on this world size or another with
    /// the same global batch size.
    pub fn state(&self) -> super::ResumeState {
        self.state.clone()
    }

    /// Each slot's source: its index in the [`Mixture`](crate::Mixture) the pipeline
    /// reads (see [`Subset::source_of`](crate::Subset::source_of)), 0 for every slot of
    /// a pipeline over one subset. A replacement's is its own source's.
    pub fn sources(&self) -> &[usize] {
        &self.sources
    }

    /// Samples in the batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no sample of the batch could be delivered (all were reported).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `[N, C, H, W]` or `[N, H, W, C]`, following the layout.
    pub fn shape(&self) -> [usize; 4] {
        match self.layout {
            Layout::Nchw => [self.len, 3, self.height, self.width],
            Layout::Nhwc => [self.len, self.height, self.width, 3],
        }
    }

    /// Element type of the images.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Layout of the images.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Whether the batch lives in device memory (wgpu or CUDA backend). Its host
    /// accessors ([`Batch::images`], [`Batch::raw_images`], [`Batch::masks`], ...)
    /// then copy it to the host once, on first use, and block for that; a device consumer
    /// uses the backend's accessor instead, with no copy (`WgpuBatch::wgpu_images`,
    /// `CudaBatch::cuda_images`: extension traits of every [`OnDevice`] value).
    pub fn on_device(&self) -> bool {
        self.device_buffers().is_some()
    }

    /// Bytes of all the images of this batch: `len * 3 * width * height * dtype size`.
    pub fn images_len_bytes(&self) -> usize {
        self.len * 3 * self.width * self.height * self.dtype.size()
    }

    /// The images as `T`, `[N, 3, H, W]` or `[N, H, W, 3]` (see [`Batch::shape`]):
    /// `batch.images::<f32>()?`. Fails with [`Error::DType`] naming the element type the
    /// batch holds when it is not `T` (set it with
    /// [`Augment::dtype`](crate::Augment::dtype); the default is `u8`). A device batch is
    /// copied to the host once, on first use (blocking); a device consumer reads
    /// `WgpuBatch::wgpu_images` / `CudaBatch::cuda_images` instead.
    pub fn images<T: Element>(&self) -> Result<&[T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::DType {
                asked: T::DTYPE.name(),
                found: self.dtype.name(),
            });
        }
        bytemuck::try_cast_slice(self.raw_images()?).map_err(|e| {
            Error::internal(format!(
                "batch buffer not aligned for {}: {e}",
                self.dtype.name()
            ))
        })
    }

    /// All the images of the batch as raw bytes (little-endian elements of
    /// [`Batch::dtype`]); [`Batch::images`] gives them typed. A device batch is copied to
    /// the host once, on first use.
    pub fn raw_images(&self) -> Result<&[u8]> {
        if self.on_device() {
            return Ok(self.host_copy(false)?.unwrap_or_default());
        }
        let n = self.images_len_bytes();
        self.buffers
            .as_ref()
            .and_then(|b| b.images.bytes().get(..n))
            .ok_or_else(|| Error::internal("batch buffer shorter than its images"))
    }

    /// The images as raw bytes; empty, with the error logged, if a device batch cannot be
    /// read back.
    #[deprecated(note = "use `raw_images()` (fallible) or `images::<T>()`")]
    pub fn image_bytes(&self) -> &[u8] {
        self.logged(self.raw_images().map(Some))
    }

    /// The host copy of a device batch's images (or masks), read back once on first use;
    /// `None` when it has none.
    fn host_copy(&self, masks: bool) -> Result<Option<&[u8]>> {
        let (cell, n, plane) = if masks {
            (
                &self.host_masks,
                2 * self.len * self.width * self.height,
                Plane::Masks,
            )
        } else {
            (&self.host_images, self.images_len_bytes(), Plane::Images)
        };
        let Some(bufs) = self.device_buffers() else {
            return Ok(None);
        };
        if let Some(h) = cell.get() {
            return Ok(Some(h.bytes()));
        }
        let Some(data) = bufs.read(plane, n)? else {
            return Ok(None);
        };
        let mut copy = HostBuffer::new(n)?;
        match data.get(..n) {
            Some(d) => copy.bytes_mut().copy_from_slice(d),
            None => {
                return Err(DeviceError::ShortRead {
                    len: data.len(),
                    requested: n,
                }
                .into())
            }
        }
        Ok(Some(cell.get_or_init(|| copy).bytes()))
    }

    /// A host copy's bytes, or none with the error logged (for the infallible accessors).
    fn logged<'a>(&self, r: Result<Option<&'a [u8]>>) -> &'a [u8] {
        r.unwrap_or_else(|e| {
            log::error!("cannot read batch {} back from the device: {e}", self.index);
            None
        })
        .unwrap_or_default()
    }

    /// The images on the host, wherever the batch lives: copied for a host batch, read
    /// back (blocking, once) for a device batch.
    pub fn read_images(&self) -> Result<Vec<u8>> {
        Ok(self.raw_images()?.to_vec())
    }

    /// The label masks on the host, wherever the batch lives (see [`Batch::read_images`]).
    pub fn read_masks(&self) -> Result<Option<Vec<u16>>> {
        if self.on_device() {
            let bytes = self.host_copy(true)?;
            return Ok(bytes.and_then(|b| bytemuck::try_cast_slice(b).ok().map(<[u16]>::to_vec)));
        }
        Ok(self.masks().map(<[u16]>::to_vec))
    }

    /// The images, if the dtype is u8.
    #[deprecated(note = "use `images::<u8>()`, which says which dtype the batch holds")]
    pub fn images_u8(&self) -> Option<&[u8]> {
        self.images::<u8>().ok()
    }

    /// The images, if the dtype is f16.
    #[deprecated(note = "use `images::<f16>()`, which says which dtype the batch holds")]
    pub fn images_f16(&self) -> Option<&[f16]> {
        self.images::<f16>().ok()
    }

    /// The images, if the dtype is f32.
    #[deprecated(note = "use `images::<f32>()`, which says which dtype the batch holds")]
    pub fn images_f32(&self) -> Option<&[f32]> {
        self.images::<f32>().ok()
    }

    /// Label masks `[N, H, W]`, for segmentation sets (read back on first use for a
    /// device batch, as [`Batch::images`]).
    pub fn masks(&self) -> Option<&[u16]> {
        let n = self.len * self.width * self.height;
        if let Some(bufs) = self.device_buffers() {
            if !bufs.has_masks() {
                return None;
            }
            return bytemuck::try_cast_slice::<u8, u16>(self.logged(self.host_copy(true))).ok();
        }
        let m = self.buffers.as_ref()?.masks.as_ref()?;
        bytemuck::try_cast_slice::<u8, u16>(m.bytes().get(..n * 2)?).ok()
    }

    /// Class labels in slot order, as [`Sample::label`](crate::Sample::label): `None`
    /// where the source has none.
    pub fn labels(&self) -> &[Option<u32>] {
        &self.labels
    }

    /// The labels as a training target tensor: `i64` class ids, `missing` where the
    /// source has none (PyTorch's `CrossEntropyLoss` skips `-100` by default).
    pub fn labels_i64(&self, missing: i64) -> Vec<i64> {
        self.labels
            .iter()
            .map(|l| l.map_or(missing, i64::from))
            .collect()
    }

    /// How the batch was mixed ([`Augment::mixup`](crate::Augment::mixup),
    /// [`Augment::cutmix`](crate::Augment::cutmix)): every slot `i` with slot
    /// `(i - 1) mod len`, with this weight and box. `None` when mixing is off.
    pub fn mix(&self) -> Option<&BatchMix> {
        self.mix.as_ref()
    }

    /// The labels as soft targets, `[len, classes]` f32: one-hot rows, mixed as the images
    /// were when the batch was mixed (torchvision's `MixUp` and `CutMix` labels: `own *
    /// lambda + partner * (1 - lambda)`). Fails when a slot has no label or one of
    /// `classes` or more.
    pub fn soft_labels(&self, classes: usize) -> Result<Vec<f32>> {
        mix::soft_labels(&self.labels, classes, self.mix.as_ref())
            .map_err(|why| Error::config("soft_labels", why.to_string()))
    }

    /// Each slot's targets beyond the class id ([`Sample::targets`](crate::Sample::targets)),
    /// in output pixels: boxes and keypoints moved by the slot's plan (crop, resize,
    /// affine warp, flips), boxes clipped and sanitised by the augmentation's
    /// [`BoxRule`](crate::BoxRule); `None` where the sample has none.
    pub fn targets(&self) -> &[Option<Targets>] {
        &self.targets
    }

    /// The slots' boxes as padded arrays: `[len, max, 4]` boxes (`x0, y0, x1, y1` in
    /// output pixels), `[len, max]` class ids (`-1` in padding) and the count per slot,
    /// with `max` the most boxes any slot holds (at least 1, so the arrays are never
    /// empty).
    pub fn padded_boxes(&self) -> PaddedBoxes {
        let count = |t: &Option<Targets>| t.as_ref().map_or(0, |t| t.boxes.len());
        let max = self.targets.iter().map(count).max().unwrap_or(0).max(1);
        let mut out = PaddedBoxes {
            max,
            boxes: vec![0.0; self.targets.len() * max * 4],
            classes: vec![-1; self.targets.len() * max],
            counts: Vec::with_capacity(self.targets.len()),
        };
        for (slot, t) in self.targets.iter().enumerate() {
            let boxes = t.as_ref().map_or(&[][..], |t| &t.boxes[..]);
            out.counts.push(boxes.len() as u32);
            for (k, b) in boxes.iter().enumerate() {
                let at = slot * max + k;
                out.boxes[at * 4..at * 4 + 4].copy_from_slice(&[b.x0, b.y0, b.x1, b.y1]);
                out.classes[at] = i64::from(b.class);
            }
        }
        out
    }

    /// Stable sample ids, in slot order.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// The plan each slot was made with.
    pub fn plans(&self) -> &[SamplePlan] {
        &self.plans
    }

    /// Samples of this batch that could not be delivered, with the reason.
    pub fn errors(&self) -> &[SampleError] {
        &self.errors
    }

    /// Slots filled by a replacement sample.
    pub fn replacements(&self) -> &[Replacement] {
        &self.replacements
    }

    /// Per slot, whether its sample is delivered more than once this epoch on purpose:
    /// padding that evens out the ranks of a sharded epoch (see
    /// [`PipelineBuilder::shard`](crate::PipelineBuilder::shard)), or a replacement for a
    /// failed sample ([`Batch::replacements`]). Leave these out of evaluation metrics so
    /// each sample counts once.
    pub fn repeated(&self) -> &[bool] {
        &self.repeated
    }

    /// Samples of this batch delivered from files the decoder had to tolerate something
    /// in, with the decoder's message: every sample decoded leniently is listed here.
    pub fn warnings(&self) -> &[SampleWarning] {
        &self.warnings
    }
}

/// A batch's boxes as padded arrays ([`Batch::padded_boxes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PaddedBoxes {
    /// Boxes per slot in the arrays.
    pub max: usize,
    /// `[len, max, 4]`: `x0, y0, x1, y1` in output pixels, zeros in padding.
    pub boxes: Vec<f32>,
    /// `[len, max]`: class ids, `-1` in padding.
    pub classes: Vec<i64>,
    /// Boxes each slot holds.
    pub counts: Vec<u32>,
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
        if let Some(mut b) = self.buffers.take() {
            if let Some(g) = b.gpu.as_mut() {
                g.release();
            }
            // Fails only when the epoch is gone; the buffers are then simply freed.
            let _ = self.return_tx.send(b);
        }
    }
}

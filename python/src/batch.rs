//! `Batch`: one batch of an epoch, its images, masks and targets as DLPack tensors.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
#[cfg(feature = "cuda")]
use stoker::CudaBatch;

use crate::errors::{sample_error_object, IntoPy};
use crate::owner::BatchOwner;
use crate::tensor::{Elem, Owner, Tensor};

/// One batch. `images` (and `masks`, `labels`, ...) are tensors for
/// `torch.from_dlpack` / `numpy.from_dlpack`, without a copy: a framework's tensor made
/// from them keeps the batch's memory alive, and the memory goes back to the pipeline's
/// ring when the last one is freed. Hold on to tensors as long as needed: a pipeline
/// whose caller holds every buffer of its ring lends another rather than stop (memory
/// then grows with what is held).
#[pyclass(module = "stoker", frozen)]
pub struct Batch {
    owner: Arc<BatchOwner>,
}

fn dims(shape: &[usize]) -> Vec<i64> {
    shape
        .iter()
        .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect()
}

impl Batch {
    pub(crate) fn new(owner: BatchOwner) -> Self {
        Batch {
            owner: Arc::new(owner),
        }
    }

    fn b(&self) -> &stoker::Batch {
        &self.owner.batch
    }

    fn owner(&self) -> Owner {
        Arc::clone(&self.owner) as Owner
    }

    /// The batch's CUDA buffer `slice` as a tensor, when it lives on a CUDA device.
    #[cfg(feature = "cuda")]
    fn cuda_tensor(
        &self,
        slice: &cudarc::driver::CudaSlice<u8>,
        shape: Vec<i64>,
        elem: Elem,
    ) -> PyResult<Tensor> {
        use cudarc::driver::DevicePtr;
        let stream = Arc::clone(slice.stream());
        let ptr = slice.device_ptr(&stream).0;
        let ordinal = stream.context().ordinal();
        let ready = crate::tensor::cuda_sync::CudaReady::new(Arc::clone(&self.owner), stream);
        Tensor::cuda(self.owner(), ptr, ordinal, shape, elem, ready)
    }
}

#[pymethods]
impl Batch {
    /// The images, `[N, 3, H, W]` (or `[N, H, W, 3]` with layout `"nhwc"`), of the
    /// augmentation's dtype. On the CPU backend (and for wgpu batches, read back to the
    /// host once, on first use) a host tensor; on CUDA a device tensor.
    #[getter]
    fn images(&self, py: Python<'_>) -> PyResult<Tensor> {
        let b = self.b();
        let shape = dims(&b.shape());
        let elem = Elem::from_dtype(b.dtype());
        #[cfg(feature = "cuda")]
        if let Some(slice) = b.cuda_images() {
            return self.cuda_tensor(slice, shape, elem);
        }
        // A device batch (wgpu) is read back here: without the GIL.
        let ptr = py
            .detach(|| b.raw_images().map(|s| s.as_ptr() as usize))
            .py_err()?;
        Ok(Tensor::host(self.owner(), ptr as *const u8, shape, elem))
    }

    /// The label masks, `[N, H, W]` uint16 class ids (nearest-neighbour, the images'
    /// geometry), or None when the dataset has none.
    #[getter]
    fn masks(&self, py: Python<'_>) -> PyResult<Option<Tensor>> {
        let b = self.b();
        let [n, h, w] = match (b.layout(), b.shape()) {
            (stoker::Layout::Nhwc, [n, h, w, _]) => [n, h, w],
            (_, [n, _, h, w]) => [n, h, w],
        };
        let shape = dims(&[n, h, w]);
        #[cfg(feature = "cuda")]
        if let Some(slice) = b.cuda_masks() {
            return self.cuda_tensor(slice, shape, Elem::U16).map(Some);
        }
        let ptr = py.detach(|| b.masks().map(|m| m.as_ptr() as usize));
        Ok(ptr.map(|p| Tensor::host(self.owner(), p as *const u8, shape, Elem::U16)))
    }

    /// The class labels, `[N]` int64, `missing` (default -100, what
    /// `torch.nn.CrossEntropyLoss` ignores) where a sample has none. A host tensor.
    #[pyo3(signature = (missing=-100))]
    fn labels_or(&self, missing: i64) -> Tensor {
        let l = self.b().labels_i64(missing);
        let n = dims(&[l.len()]);
        Tensor::from_vec(l, n, Elem::I64)
    }

    /// The class labels, `[N]` int64, -100 where a sample has none (see `labels_or`).
    #[getter]
    fn labels(&self) -> Tensor {
        self.labels_or(-100)
    }

    /// Soft targets `[N, classes]` float32 for MixUp/CutMix batches (one-hot otherwise).
    fn soft_labels(&self, classes: usize) -> PyResult<Tensor> {
        let v = self.b().soft_labels(classes).py_err()?;
        let n = self.b().len();
        Ok(Tensor::from_vec(v, dims(&[n, classes]), Elem::F32))
    }

    /// Detection boxes as padded arrays: `(boxes [N, M, 4] float32 x0 y0 x1 y1 in output
    /// pixels, classes [N, M] int64 with -1 in padding, counts [N] int64)`.
    fn padded_boxes(&self) -> (Tensor, Tensor, Tensor) {
        let p = self.b().padded_boxes();
        let n = p.counts.len();
        let counts: Vec<i64> = p.counts.iter().map(|&c| i64::from(c)).collect();
        (
            Tensor::from_vec(p.boxes, dims(&[n, p.max, 4]), Elem::F32),
            Tensor::from_vec(p.classes, dims(&[n, p.max]), Elem::I64),
            Tensor::from_vec(counts, dims(&[n]), Elem::I64),
        )
    }

    /// Each slot's targets beyond one class id, moved by its plan (None where it has
    /// none): dicts with `classes`, `values`, `boxes` (`[x0, y0, x1, y1, class]`) and
    /// `keypoints` (`[x, y, visibility, object]`).
    #[getter]
    fn targets(&self, py: Python<'_>) -> PyResult<Vec<Option<Py<PyDict>>>> {
        self.b()
            .targets()
            .iter()
            .map(|t| {
                let Some(t) = t else { return Ok(None) };
                let d = PyDict::new(py);
                d.set_item("classes", &t.classes)?;
                d.set_item("values", &t.values)?;
                let boxes: Vec<(f32, f32, f32, f32, u32)> = t
                    .boxes
                    .iter()
                    .map(|b| (b.x0, b.y0, b.x1, b.y1, b.class))
                    .collect();
                d.set_item("boxes", boxes)?;
                let kps: Vec<(f32, f32, u8, u32)> = t
                    .keypoints
                    .iter()
                    .map(|k| (k.x, k.y, k.visibility, k.object))
                    .collect();
                d.set_item("keypoints", kps)?;
                Ok(Some(d.unbind()))
            })
            .collect()
    }

    /// Stable sample ids, one per slot (Python ints: they use all 64 bits, so about half
    /// do not fit an int64; `ids_tensor` holds them as uint64).
    #[getter]
    fn ids(&self) -> Vec<u64> {
        self.b().ids().to_vec()
    }

    /// The sample ids, `[N]` uint64, a host tensor (`numpy.from_dlpack`, or
    /// `torch.from_dlpack` with a torch that has `torch.uint64`).
    #[getter]
    fn ids_tensor(&self) -> Tensor {
        let ids = self.b().ids().to_vec();
        let n = dims(&[ids.len()]);
        Tensor::from_vec(ids, n, Elem::U64)
    }

    /// Per-slot flags: True where the slot repeats a sample to pad a rank's shard (leave
    /// it out of metrics).
    #[getter]
    fn repeated(&self) -> Vec<bool> {
        self.b().repeated().to_vec()
    }

    /// Samples of this batch that could not be delivered, as `SampleError`s (id, path,
    /// kind, reason): under `on_error="skip"` the batch is shorter by them, under
    /// `"replace"` another sample took each one's slot (see `replacements`).
    #[getter]
    fn errors(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        self.b()
            .errors()
            .iter()
            .map(|e| sample_error_object(py, e))
            .collect()
    }

    /// `(slot, failed_id, by_id)` for each slot filled by a replacement.
    #[getter]
    fn replacements(&self) -> Vec<(usize, u64, u64)> {
        self.b()
            .replacements()
            .iter()
            .map(|r| (r.slot, r.failed_id, r.by_id))
            .collect()
    }

    /// Samples delivered from files their decoder had to tolerate something in:
    /// `(slot, id, path, kind, message)`.
    #[getter]
    fn warnings(&self) -> Vec<(usize, u64, String, String, String)> {
        self.b()
            .warnings()
            .iter()
            .map(|w| {
                (
                    w.slot,
                    w.id,
                    w.path.clone(),
                    w.kind.name().to_string(),
                    w.message.clone(),
                )
            })
            .collect()
    }

    /// The job's state right after this batch (its global batch consumed by every
    /// rank), a small dict: save it with the checkpoint of the model trained on it, and
    /// continue with `pipeline.resume(state)` (on this world size, or another with the
    /// same `batch_size * world_size`). Its keys are the library's; keep it as it is.
    fn state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::state::to_dict(py, &self.b().state())
    }

    /// Position of this batch in its epoch.
    #[getter]
    fn index(&self) -> usize {
        self.b().index()
    }

    /// The epoch it belongs to.
    #[getter]
    fn epoch(&self) -> u64 {
        self.b().epoch()
    }

    /// The images' shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.b().shape().to_vec()
    }

    /// The images' element type (`uint8`, `float16`, `float32`).
    #[getter]
    fn dtype(&self) -> &'static str {
        Elem::from_dtype(self.b().dtype()).name()
    }

    /// Whether the batch lives in device memory (wgpu or CUDA).
    #[getter]
    fn on_device(&self) -> bool {
        self.b().on_device()
    }

    fn __len__(&self) -> usize {
        self.b().len()
    }

    fn __repr__(&self) -> String {
        let b = self.b();
        format!(
            "stoker.Batch(epoch={}, index={}, shape={:?}, dtype={}, errors={})",
            b.epoch(),
            b.index(),
            b.shape(),
            self.dtype(),
            b.errors().len()
        )
    }
}

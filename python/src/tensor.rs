//! `Tensor`: a view of batch memory (host or CUDA) that hands itself to any framework
//! through DLPack (`torch.from_dlpack`, `numpy.from_dlpack`, `cupy.from_dlpack`, JAX)
//! without a copy. Each export's capsule owns a reference to the memory, so a framework's
//! tensor keeps the batch alive; the batch's slot returns to the pipeline's ring when the
//! last such reference is gone.
//!
//! The DLPack ABI (structs, capsules, version negotiation) is dlpark's; what is here is
//! where the memory is and, on CUDA, stream ordering (`cuda_sync`).

use std::any::Any;
use std::sync::Arc;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use dlpark::metadata::Dynamic;
#[cfg(feature = "cuda")]
use dlpark::python::CudaStreamRequest;
use dlpark::python::{export_dlpack, DlpackExporter, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase, OpaqueContext};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;

/// Something that keeps a tensor's memory alive (a batch, an owned vector).
pub(crate) type Owner = Arc<dyn Any + Send + Sync>;

/// Element types the tensors hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    U8,
    U16,
    I64,
    U64,
    F16,
    F32,
}

impl Elem {
    fn dl(self) -> DLDataType {
        let (code, bits) = match self {
            Elem::U8 => (DLDataTypeCode::UINT, 8),
            Elem::U16 => (DLDataTypeCode::UINT, 16),
            Elem::I64 => (DLDataTypeCode::INT, 64),
            Elem::U64 => (DLDataTypeCode::UINT, 64),
            Elem::F16 => (DLDataTypeCode::FLOAT, 16),
            Elem::F32 => (DLDataTypeCode::FLOAT, 32),
        };
        DLDataType::scalar(code, bits)
    }

    /// NumPy's name for it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Elem::U8 => "uint8",
            Elem::U16 => "uint16",
            Elem::I64 => "int64",
            Elem::U64 => "uint64",
            Elem::F16 => "float16",
            Elem::F32 => "float32",
        }
    }

    pub(crate) fn from_dtype(d: stoker::DType) -> Elem {
        match d {
            stoker::DType::F16 => Elem::F16,
            stoker::DType::F32 => Elem::F32,
            _ => Elem::U8,
        }
    }
}

/// A tensor of batch memory: images `[N, 3, H, W]` (or NHWC), masks `[N, H, W]`,
/// labels `[N]`, ... Pass it to `torch.from_dlpack`, `numpy.from_dlpack` or any DLPack
/// consumer: no copy is made. The consumer's tensor keeps the batch alive.
///
/// On CUDA, the consumer's stream (the `stream` argument of `__dlpack__`, which
/// `torch.from_dlpack` sets to torch's current stream) waits on the batch's ready event:
/// no host synchronisation. When the last tensor made from a batch is freed, stoker's
/// stream waits on the work the consumer's streams had queued by then before the batch's
/// buffers are written again.
#[pyclass(module = "stoker", frozen)]
pub struct Tensor {
    owner: Owner,
    ptr: usize,
    shape: Vec<i64>,
    elem: Elem,
    device: DLDevice,
    #[cfg(feature = "cuda")]
    cuda: Option<cuda_sync::CudaReady>,
    /// The stream of the export under way, from `prepare_export` to `export_*` (both run
    /// in one `__dlpack__` call, under the GIL).
    #[cfg(feature = "cuda")]
    pending: std::sync::Mutex<Option<CudaStreamRequest>>,
}

impl Tensor {
    /// A host tensor over `ptr`, kept alive by `owner`.
    pub(crate) fn host(owner: Owner, ptr: *const u8, shape: Vec<i64>, elem: Elem) -> Tensor {
        Tensor {
            owner,
            ptr: ptr as usize,
            shape,
            elem,
            device: DLDevice::CPU,
            #[cfg(feature = "cuda")]
            cuda: None,
            #[cfg(feature = "cuda")]
            pending: std::sync::Mutex::new(None),
        }
    }

    /// A host tensor owning `values`.
    pub(crate) fn from_vec<T: Send + Sync + 'static>(
        values: Vec<T>,
        shape: Vec<i64>,
        elem: Elem,
    ) -> Tensor {
        let v = Arc::new(values);
        let ptr = v.as_ptr().cast::<u8>();
        Tensor::host(v, ptr, shape, elem)
    }

    /// A CUDA tensor at device address `ptr` on device `ordinal`.
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda(
        owner: Owner,
        ptr: u64,
        ordinal: usize,
        shape: Vec<i64>,
        elem: Elem,
        ready: cuda_sync::CudaReady,
    ) -> PyResult<Tensor> {
        Ok(Tensor {
            owner,
            ptr: usize::try_from(ptr)
                .map_err(|_| PyValueError::new_err("device address wider than a pointer"))?,
            shape,
            elem,
            device: DLDevice {
                device_type: DLDeviceType::CUDA,
                device_id: i32::try_from(ordinal)
                    .map_err(|_| PyValueError::new_err("CUDA ordinal out of range"))?,
            },
            cuda: Some(ready),
            pending: std::sync::Mutex::new(None),
        })
    }

    /// A fresh managed tensor of the ABI `M` owning a new reference to the memory.
    fn managed<M: ManagedTensorBase>(&self, ctx: ExportContext) -> PyResult<Managed<M>> {
        let mut init = Dynamic::compact(self.shape.clone())
            .initialize_as::<M>(Box::new(ctx))
            .map_err(|e| PyValueError::new_err(format!("DLPack metadata: {e}")))?;
        init.set_data(self.ptr as *mut std::ffi::c_void)
            .set_dtype(self.elem.dl())
            .set_device(self.device);
        // SAFETY: the data pointer stays valid for the managed tensor's life: its context
        // holds `owner`, which owns (or keeps the batch that owns) the memory; the shape
        // and compact strides are dlpark's copies; no flag is set (the memory is
        // writable and not a copy).
        Ok(unsafe { init.finish() })
    }

    /// What each export's capsule holds.
    fn context(&self) -> PyResult<ExportContext> {
        Ok(ExportContext {
            #[cfg(feature = "cuda")]
            _release: match &self.cuda {
                Some(c) => {
                    let req = self
                        .pending
                        .lock()
                        .map_err(|_| PyValueError::new_err("tensor export lock poisoned"))?
                        .take()
                        .unwrap_or(CudaStreamRequest::Omitted);
                    c.release_for(req)?
                }
                None => None,
            },
            _owner: Arc::clone(&self.owner),
        })
    }
}

/// The owner of one exported capsule's reference: dropped by the consumer's deleter, on
/// whatever thread frees the tensor.
struct ExportContext {
    /// CUDA: stoker's stream waits on the consumer's stream when the tensor is freed.
    /// Declared (so dropped) before `_owner`: the wait is queued before the batch can go
    /// back to the ring.
    #[cfg(feature = "cuda")]
    _release: Option<cuda_sync::Release>,
    _owner: Owner,
}

#[pymethods]
impl Tensor {
    /// DLPack export (the Python array API's protocol). `stream` follows it: on CUDA,
    /// None means the legacy default stream, -1 no synchronisation, 1 and 2 the legacy
    /// and per-thread default streams, another integer a `cudaStream_t`.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
        if self.device.device_type == DLDeviceType::CPU {
            // The array API: a CPU producer is given no stream (None, or -1 at most).
            if let Some(s) = request.stream() {
                if !s.is_none() && s.extract::<i64>().ok() != Some(-1) {
                    return Err(PyBufferError::new_err(
                        "a CPU tensor takes no DLPack stream",
                    ));
                }
            }
        }
        export_dlpack(self, py, request)
    }

    /// `(device_type, device_id)`: `(1, 0)` for the CPU, `(2, ordinal)` for CUDA.
    fn __dlpack_device__(&self) -> (u32, i32) {
        (self.device.device_type.0, self.device.device_id)
    }

    /// The shape.
    #[getter]
    fn shape(&self) -> Vec<i64> {
        self.shape.clone()
    }

    /// NumPy's name of the element type (`uint8`, `uint16`, `int64`, `float16`,
    /// `float32`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.elem.name()
    }

    /// `"cpu"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        if self.device.device_type == DLDeviceType::CUDA {
            format!("cuda:{}", self.device.device_id)
        } else {
            "cpu".to_string()
        }
    }

    /// The address of the first element (for tests and interop checks).
    #[getter]
    fn data_ptr(&self) -> usize {
        self.ptr
    }

    fn __len__(&self) -> usize {
        self.shape
            .first()
            .and_then(|&n| usize::try_from(n).ok())
            .unwrap_or(0)
    }

    fn __repr__(&self) -> String {
        format!(
            "stoker.Tensor(shape={:?}, dtype={}, device={})",
            self.shape,
            self.elem.name(),
            self.device()
        )
    }
}

impl DlpackExporter for Tensor {
    fn device(&self) -> DLDevice {
        self.device
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, _py: Python<'_>, _request: &ExportRequest<'_>) -> PyResult<()> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            let req = _request.cuda_stream()?;
            c.wait_on(req)?;
            *self
                .pending
                .lock()
                .map_err(|_| PyValueError::new_err("tensor export lock poisoned"))? = Some(req);
        }
        Ok(())
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<dlpark::ffi::DLManagedTensor>> {
        self.managed(self.context()?)
    }

    fn export_versioned(
        &self,
        _py: Python<'_>,
    ) -> PyResult<Managed<dlpark::ffi::DLManagedTensorVersioned>> {
        self.managed(self.context()?)
    }
}

// `ExportContext` crosses threads inside the capsule (the consumer may free the tensor on
// any thread); everything in it is `Send`.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<ExportContext>();
    fn opaque<T: OpaqueContext>() {}
    opaque::<Box<ExportContext>>();
};

#[cfg(feature = "cuda")]
pub(crate) mod cuda_sync;

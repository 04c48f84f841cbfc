//! Stream ordering for CUDA batches handed out through DLPack: the consumer's stream
//! waits on the batch's ready event at export, and stoker's stream waits on the
//! consumer's stream when the consumer frees its tensor, before the batch's buffers can
//! be written again (what `torch.Tensor.record_stream` does for torch's own allocator).
//! Raw driver calls (cudarc's `result` layer): the consumer's stream is a handle from
//! Python, not a cudarc stream.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaStream};
use dlpark::python::CudaStreamRequest;

use crate::owner::BatchOwner;
use pyo3::prelude::*;
use stoker::CudaBatch;

/// CUDA's legacy default stream handle (`cudaStreamLegacy`).
const LEGACY: usize = 0x1;
/// CUDA's per-thread default stream handle (`cudaStreamPerThread`).
const PER_THREAD: usize = 0x2;

/// The consumer stream a DLPack request names, or None when it asks for no ordering
/// (`stream=-1`). An omitted stream means the legacy default stream (the protocol's
/// rule for CUDA).
fn consumer_stream(req: CudaStreamRequest) -> Option<usize> {
    match req {
        CudaStreamRequest::NoSync => None,
        CudaStreamRequest::Omitted | CudaStreamRequest::LegacyDefault => Some(LEGACY),
        CudaStreamRequest::PerThreadDefault => Some(PER_THREAD),
        CudaStreamRequest::Pointer(p) => Some(p),
    }
}

/// A driver call for stream ordering that failed: which, and the driver's error.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub(crate) struct DriverCallError {
    /// The call, in words.
    what: &'static str,
    /// What the driver said.
    source: result::DriverError,
}

fn driver_err(what: &'static str, source: result::DriverError) -> PyErr {
    crate::errors::to_py(stoker::Error::Device(Box::new(DriverCallError {
        what,
        source,
    })))
}

/// What a CUDA tensor needs for ordering: its batch (whose ready event the consumer's
/// stream waits on), its context, and stoker's stream (which writes the batch).
pub(crate) struct CudaReady {
    batch: Arc<BatchOwner>,
    ctx: Arc<CudaContext>,
    ours: Arc<CudaStream>,
}

impl CudaReady {
    pub(crate) fn new(batch: Arc<BatchOwner>, ours: Arc<CudaStream>) -> Self {
        CudaReady {
            batch,
            ctx: Arc::clone(ours.context()),
            ours,
        }
    }

    /// Makes the consumer's stream wait for the batch (no host synchronisation). A batch
    /// without a ready event is waited for on the host instead.
    pub(crate) fn wait_on(&self, req: CudaStreamRequest) -> PyResult<()> {
        let Some(stream) = consumer_stream(req) else {
            return Ok(());
        };
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_err("bind context", e))?;
        let Some(event) = self.batch.batch.cuda_event() else {
            log::debug!("CUDA batch without a ready event: synchronising its stream");
            return self
                .ours
                .synchronize()
                .map_err(|e| driver_err("synchronise", e));
        };
        // SAFETY: the event is the batch's, which `self.batch` keeps alive; the stream is
        // the consumer's, valid for the call by the DLPack contract.
        unsafe {
            result::stream::wait_event(
                stream as sys::CUstream,
                event.cu_event(),
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| driver_err("consumer stream wait", e))
    }

    /// The release ordering for an export to the stream `req` names (None for `-1`: the
    /// consumer then orders its own work, as the protocol says).
    pub(crate) fn release_for(&self, req: CudaStreamRequest) -> PyResult<Option<Release>> {
        Ok(consumer_stream(req).map(|consumer| Release {
            ctx: Arc::clone(&self.ctx),
            ours: Arc::clone(&self.ours),
            consumer,
        }))
    }
}

/// Dropped when the consumer frees its tensor: stoker's stream waits on everything the
/// consumer's stream had queued by then.
pub(crate) struct Release {
    ctx: Arc<CudaContext>,
    ours: Arc<CudaStream>,
    consumer: usize,
}

impl Release {
    fn order(&self) -> Result<(), result::DriverError> {
        self.ctx.bind_to_thread()?;
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
        // SAFETY: `ev` was just created in this context; the consumer's stream is alive
        // (a stream a tensor was exported to outlives the tensor's use); destroying an
        // event with a wait pending on it is allowed (the driver defers the release).
        unsafe {
            let r = result::event::record(ev, self.consumer as sys::CUstream).and_then(|()| {
                result::stream::wait_event(
                    self.ours.cu_stream(),
                    ev,
                    sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            });
            let _ = result::event::destroy(ev);
            r
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Err(e) = self.order() {
            // Without the ordering the next batch could overwrite memory the consumer's
            // queued work still reads: wait for that work on the host instead.
            log::warn!("cannot order the batch's release after the consumer's stream ({e}); synchronising it");
            // SAFETY: as in `order`.
            let _ = unsafe { result::stream::synchronize(self.consumer as sys::CUstream) };
        }
    }
}

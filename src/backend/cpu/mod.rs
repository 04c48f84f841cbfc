//! The CPU backend: the pipeline's worker threads decode with [`crate::decode::cpu`] and
//! execute plans with `crate::augment::reference` straight into host batch memory
//! (`CpuWork`); it hands out no device batcher.

use std::time::Instant;

use super::device::sample_work::{Cx, Decoded, HostImage, Made, SampleHost, SampleWork, Slot};
use super::{Backend, BackendKind};
use crate::augment::reference::Scratch;
use crate::augment::SamplePlan;
use crate::error::{SampleError, SampleErrorKind};
use crate::source::Sample;

/// Host threads; always available.
#[derive(Debug, Clone)]
pub struct CpuBackend {
    threads: usize,
}

impl CpuBackend {
    /// A CPU backend that the pipeline runs on `threads` worker threads.
    pub fn new(threads: usize) -> Self {
        CpuBackend { threads }
    }
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn device(&self) -> String {
        format!("cpu ({} worker threads)", self.threads)
    }
}

/// The CPU's host work: decode with [`crate::decode::cpu`], execute the plan with
/// [`crate::augment::reference`] into the slot.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuWork;

impl SampleWork for CpuWork {
    fn make(&self, cx: Cx<'_>, (image, mask): (&[u8], &[u8])) -> Made {
        let ws = cx.ws;
        let plan = cx
            .host
            .decode_into(cx.sample, (image, mask), &mut ws.decoded)?;
        ws.warning = ws.decoded.warning.clone();
        execute(
            cx.host,
            cx.sample,
            (&ws.decoded, plan),
            cx.slot,
            &mut ws.scratch,
        )
    }

    fn make_decoded(&self, cx: Cx<'_>, plan: SamplePlan, image: HostImage<'_>) -> Made {
        let d: &Decoded = match image {
            HostImage::Worker => &cx.ws.decoded,
            HostImage::Shared(d) => d,
        };
        execute(cx.host, cx.sample, (d, plan), cx.slot, &mut cx.ws.scratch)
    }

    fn writes_host_slots(&self) -> bool {
        true
    }
}

/// Executes `plan` on the decoded sample `d` into its slot.
fn execute(
    host: &dyn SampleHost,
    s: &Sample,
    (d, plan): (&Decoded, SamplePlan),
    slot: Slot<'_>,
    scratch: &mut Scratch,
) -> Made {
    let t = Instant::now();
    crate::augment::reference::execute_image(&plan, &d.image, slot.image, scratch);
    match (slot.mask, &d.mask) {
        (Some(mo), Some(m)) => {
            let dst: &mut [u16] = bytemuck::try_cast_slice_mut(mo).map_err(|e| {
                SampleError::new(s, SampleErrorKind::Internal, format!("mask slot: {e}"))
            })?;
            crate::augment::reference::execute_mask(&plan, m, dst);
        }
        (None, None) => {}
        _ => {
            return Err(SampleError::new(
                s,
                SampleErrorKind::Mask,
                "sample and pipeline disagree on having a mask".into(),
            ))
        }
    }
    host.augment_time(t.elapsed(), s.id);
    Ok((plan, None))
}

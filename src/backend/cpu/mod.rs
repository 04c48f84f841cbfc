//! The CPU backend: the pipeline's worker threads decode with [`crate::decode::cpu`] and
//! execute plans with `crate::augment::reference` straight into host batch memory
//! (`CpuWork`); it hands out no device batcher.

use std::time::Instant;

use super::device::sample_work::{
    Decoded, HostImage, Made, SampleHost, SampleWork, Slot, WorkScratch,
};
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
    fn make(
        &self,
        host: &dyn SampleHost,
        s: &Sample,
        (image, mask): (&[u8], &[u8]),
        slot: Slot<'_>,
        ws: &mut WorkScratch,
    ) -> Result<Made, SampleError> {
        let plan = host.decode_into(s, image, mask, &mut ws.decoded)?;
        ws.warning = ws.decoded.warning.clone();
        execute(host, s, &ws.decoded, plan, slot, &mut ws.scratch)
    }

    fn make_decoded(
        &self,
        host: &dyn SampleHost,
        s: &Sample,
        plan: SamplePlan,
        image: HostImage<'_>,
        slot: Slot<'_>,
        ws: &mut WorkScratch,
    ) -> Result<Made, SampleError> {
        let d: &Decoded = match image {
            HostImage::Worker => &ws.decoded,
            HostImage::Shared(d) => d,
        };
        execute(host, s, d, plan, slot, &mut ws.scratch)
    }

    fn writes_host_slots(&self) -> bool {
        true
    }
}

/// Executes `plan` on the decoded sample `d` into its slot.
fn execute(
    host: &dyn SampleHost,
    s: &Sample,
    d: &Decoded,
    plan: SamplePlan,
    slot: Slot<'_>,
    scratch: &mut Scratch,
) -> Result<Made, SampleError> {
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
    host.augment_time(t.elapsed());
    Ok((plan, None))
}

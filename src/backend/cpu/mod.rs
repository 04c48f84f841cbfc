//! The CPU backend: decode with [`crate::decode::cpu`], execute plans with
//! [`crate::augment::reference`], on the pipeline's worker threads.

pub(crate) mod memory;

use super::{Backend, BackendKind};
use crate::augment::reference::{self, Scratch};
use crate::augment::SamplePlan;
use crate::decode::{self, DecodeError, DecodeOptions, Image8, ImageInfo, LabelPlane};

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

    fn decode_image(
        &self,
        bytes: &[u8],
        opts: &DecodeOptions,
        out: &mut Image8,
    ) -> Result<ImageInfo, DecodeError> {
        decode::cpu::decode_image(bytes, opts, out)
    }

    fn decode_mask(
        &self,
        bytes: &[u8],
        opts: &DecodeOptions,
        out: &mut LabelPlane,
    ) -> Result<ImageInfo, DecodeError> {
        decode::cpu::decode_mask(bytes, opts, out)
    }

    fn execute_image(
        &self,
        plan: &SamplePlan,
        src: &Image8,
        out: &mut [u8],
        scratch: &mut Scratch,
    ) {
        reference::execute_image(plan, src, out, scratch);
    }

    fn execute_mask(&self, plan: &SamplePlan, src: &LabelPlane, out: &mut [u16]) {
        reference::execute_mask(plan, src, out);
    }
}

//! The CPU backend: the pipeline's worker threads decode with [`crate::decode::cpu`] and
//! execute plans with `crate::augment::reference` straight into host batch memory; it
//! hands out no device batcher.

use super::{Backend, BackendKind};

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

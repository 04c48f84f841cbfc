//! The CPU backend: decode with [`crate::decode::cpu`], execute plans with
//! [`crate::augment::reference`] (the [`Backend`] trait's default methods), on the
//! pipeline's worker threads.

pub(crate) mod memory;

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

//! The WGSL shaders (`shaders/*.wgsl`) on this machine's wgpu adapter (Mesa lavapipe in
//! CI), through the backend's own pipelines and batcher (see
//! `common/executor/wgpu_device.rs`): every case of `common/executor/` (orientation,
//! Huffman decoding, decode, augment) against the CPU oracles, and the passes of the
//! self-synchronising Huffman decode, which only the WGSL shaders have so far. Skips
//! without an adapter unless `STOKER_REQUIRE_WGPU=1`.
#![cfg(feature = "wgpu")]

mod common;
#[path = "common/executor/mod.rs"]
mod executor;

executor::executor_tests!(executor::wgpu_device::get());

/// The sync decode's passes (`shaders/sync_huffman.wgsl`; no CUDA kernel yet, so not
/// among the cases every executor runs).
mod sync {
    use super::executor::{sync_huffman, wgpu_device};

    #[test]
    fn sync_huffman_matches_the_oracle_on_random_jpegs() {
        if let Some(e) = wgpu_device::get() {
            sync_huffman::sync_huffman_matches_the_oracle_on_random_jpegs(e);
        }
    }

    #[test]
    fn sync_huffman_matches_the_oracle_on_the_bundled_jpegs() {
        if let Some(e) = wgpu_device::get() {
            sync_huffman::sync_huffman_matches_the_oracle_on_the_bundled_jpegs(e);
        }
    }
}

//! The WGSL shaders (`shaders/*.wgsl`) on this machine's wgpu adapter (Mesa lavapipe in
//! CI), through the backend's own pipelines and batcher (see
//! `common/executor/wgpu_device.rs`): every case of `common/executor/` (orientation,
//! Huffman decoding, the self-synchronising Huffman decode's passes, decode, augment)
//! against the CPU oracles. Skips without an adapter unless `STOKER_REQUIRE_WGPU=1`.
#![cfg(feature = "wgpu")]

mod common;
#[path = "common/executor/mod.rs"]
mod executor;

executor::executor_tests!(executor::wgpu_device::get());

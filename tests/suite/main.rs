//! The integration tests that can share a process, as one test binary: one build and one
//! link for all of them rather than one each (a debug binary of the crate is tens of MB,
//! linked again for every test file). `cargo test --test suite MODULE::` runs one file's
//! tests. The tests that need a process of their own stay in binaries of their own, beside
//! this folder: a counting global allocator (`alloc`, `bomb`, `memory_bounds`,
//! `fault_injection`), environment variables (`env_shard`, `object_store`), the process's
//! thread count (`shutdown`), the CLI's and the frameworks' features (`cli`, `frameworks`),
//! and the executables the GPU check runs on the card (`scripts/device-check.sh`).

#[path = "../../fuzz/checks.rs"]
mod checks;
#[path = "../common/mod.rs"]
mod common;
/// The cases every kernel executor runs (`kernels_host` here; `wgpu_kernels` on its own):
/// at the crate root, where its macros look for it.
#[path = "../common/executor/mod.rs"]
mod executor;

mod autotune;
mod buckets;
mod coeff_decode;
mod convert;
mod corpus;
mod crop_aware;
mod damaged_backends;
mod data_parallel;
mod decode_reference;
mod device_cache;
mod device_check_dry;
mod device_rejects;
mod first_sight;
mod formats;
mod global_batches;
mod hardware_share;
mod host_device;
mod huffman;
mod kernels_host;
mod labels;
mod lenient;
mod listing;
mod listing_rules;
mod mixing;
mod plan;
mod probe;
mod reexports;
mod reference_cases;
mod regress;
mod report;
mod sampling;
mod settings;
mod shaders_validate;
mod shards;
mod split;
mod sync_crop;
mod sync_huffman;
mod targets;
mod transcode;
mod transform;
mod wgpu_context;

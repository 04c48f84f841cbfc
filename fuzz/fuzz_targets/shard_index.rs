//! Fuzz target: see `checks::shard_index`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::shard_index(data));

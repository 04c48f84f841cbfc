//! Fuzz target: see `checks::sync_huffman`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::sync_huffman(data));

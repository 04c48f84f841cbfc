//! Fuzz target: see `checks::jpeg_decode`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::jpeg_decode(data));

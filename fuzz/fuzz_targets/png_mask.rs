//! Fuzz target: see `checks::png_mask`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::png_mask(data));

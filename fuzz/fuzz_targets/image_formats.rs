//! Fuzz target: see `checks::image_formats`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::image_formats(data));

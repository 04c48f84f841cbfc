//! Fuzz target: see `checks::device_oracle`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::device_oracle(data));

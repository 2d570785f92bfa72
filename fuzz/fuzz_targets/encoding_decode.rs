//! Fuzzes encoding decode; the check is `checks::encoding_decode`.
#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::encoding_decode(data));

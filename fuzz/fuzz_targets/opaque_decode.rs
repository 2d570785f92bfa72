//! Fuzzes opaque decode; the check is `checks::opaque_decode`.
#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::opaque_decode(data));

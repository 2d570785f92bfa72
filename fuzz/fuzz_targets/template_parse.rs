//! Fuzzes template parse; the check is `checks::template_parse`.
#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::template_parse(data));

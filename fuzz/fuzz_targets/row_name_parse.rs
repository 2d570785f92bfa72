//! Fuzzes the row name parser; the check is `checks::row_name_parse`.
#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::row_name_parse(data));

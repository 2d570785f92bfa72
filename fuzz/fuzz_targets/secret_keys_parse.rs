//! Fuzzes the secret key file parser; the check is `checks::secret_keys_parse`.
#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::secret_keys_parse(data));

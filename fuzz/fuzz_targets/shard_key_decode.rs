//! Fuzzes the shard key decoder; the check is `checks::shard_key_decode`.
#![no_main]

#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::shard_key_decode(data));

//! What each fuzz target checks, written once: the cargo-fuzz targets in
//! `fuzz/fuzz_targets/` call these on libFuzzer's inputs (nightly only), and
//! `crates/keysmith/tests/fuzz_inputs.rs` calls them on proptest's inputs in
//! the ordinary test run, so a parser that panics turns CI red on stable.
//! Each includer uses only some of them.
#![allow(dead_code)]

use std::sync::LazyLock;

use keysmith::names::RowName;
use keysmith::sequence::lease::{Lease, LeaseKey};
use keysmith::shard_key::{ShardKey, ShardKeyCodec, ShardKeySecret};

/// The row name parser: any input gets an answer, never a panic, and
/// whatever is accepted prints in a canonical form that parses back to the
/// same name and prints the same again.
pub fn row_name_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(name) = text.parse::<RowName>() else {
        return;
    };
    let canonical = name.to_string();
    let again: RowName = canonical
        .parse()
        .unwrap_or_else(|e| panic!("canonical form {canonical:?} of {text:?} does not parse: {e}"));
    assert_eq!(again, name, "{text:?} -> {canonical:?}");
    assert_eq!(again.to_string(), canonical);
    // The JSON parts describe the same name.
    assert_eq!(name.parts().name, canonical);
}

static CODECS: LazyLock<[ShardKeyCodec; 2]> = LazyLock::new(|| {
    let secret = ShardKeySecret::new(*b"fuzzing secret, 32 bytes long!!!").expect("long enough");
    [ShardKeyCodec::signed(&secret), ShardKeyCodec::unsigned()]
});

fn check_external(codec: &ShardKeyCodec, external: &str) {
    let Ok(key) = codec.decode_any(external) else {
        return;
    };
    let again = codec.encode(&key);
    // Every origin-'0' body means the empty key, so only other keys are
    // held to one string per key.
    if !key.is_empty() {
        assert_eq!(again, external, "decoding accepted a non-canonical string");
    }
    assert_eq!(codec.decode_any(&again).expect("own output decodes"), key);
    let _ = key.to_string();
    let _ = key.describe();
}

/// The shard key decoder must never panic, and whatever it accepts must
/// encode back to the same string.
///
/// The first input byte picks what the rest is:
/// - even: an external string, given to a signed and an unsigned decoder;
/// - odd: the raw bytes of a key, sealed with a valid tag first, so that the
///   body parser sees arbitrary content (a random string almost never passes
///   the tag check).
pub fn shard_key_decode(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    for codec in CODECS.iter() {
        if mode % 2 == 0 {
            check_external(codec, &String::from_utf8_lossy(rest));
        } else {
            check_external(codec, &codec.seal_raw_for_tests(rest));
        }
    }
}

/// The secret key file parser (the lease and shard key secret files): any
/// input gets keys or an error, never a panic; both secrets read a file
/// alike; what is accepted signs a token and a string that its own keys
/// accept again.
pub fn secret_keys_parse(data: &[u8]) {
    let lease = LeaseKey::parse(data);
    let shard = ShardKeySecret::parse(data);
    assert_eq!(lease.is_ok(), shard.is_ok(), "{data:?}");
    let (Ok(lease), Ok(shard)) = (lease, shard) else {
        return;
    };
    assert_eq!(lease.ids(), shard.ids());
    assert!(!lease.ids().is_empty());
    let l = Lease {
        name: "s".into(),
        start: 1,
        end: 11,
        version: 1,
        step: 1,
        incarnation: 1,
    };
    assert_eq!(
        lease.open("s", &lease.seal(&l)).expect("own token opens"),
        l
    );
    let codec = ShardKeyCodec::signed(&shard);
    let key = ShardKey::new('c', 3, 42i64).expect("a valid key");
    assert_eq!(
        codec
            .decode_any(&codec.encode(&key))
            .expect("own string decodes"),
        key
    );
}

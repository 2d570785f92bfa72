//! The shard key decoder must never panic, and whatever it accepts must
//! encode back to the same string.
//!
//! The first input byte picks what the rest is:
//! - even: an external string, given to a signed and an unsigned decoder;
//! - odd: the raw bytes of a key, sealed with a valid tag first, so that the
//!   body parser sees arbitrary content (a random string almost never passes
//!   the tag check).
#![no_main]

use std::sync::LazyLock;

use keysmith::shard_key::{ShardKeyCodec, ShardKeySecret};
use libfuzzer_sys::fuzz_target;

static CODECS: LazyLock<[ShardKeyCodec; 2]> = LazyLock::new(|| {
    let secret = ShardKeySecret::new(*b"fuzzing secret, 32 bytes long!!!").expect("long enough");
    [ShardKeyCodec::signed(&secret), ShardKeyCodec::unsigned()]
});

fn check(codec: &ShardKeyCodec, external: &str) {
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

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    for codec in CODECS.iter() {
        if mode % 2 == 0 {
            check(codec, &String::from_utf8_lossy(rest));
        } else {
            check(codec, &codec.seal_raw_for_tests(rest));
        }
    }
});

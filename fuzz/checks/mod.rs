//! What each fuzz target checks, written once: the cargo-fuzz targets in
//! `fuzz/fuzz_targets/` call these on libFuzzer's inputs (nightly only), and
//! `crates/keysmith/tests/fuzz_inputs.rs` calls them on proptest's inputs in
//! the ordinary test run, so a parser that panics turns CI red on stable.
//! Each includer uses only some of them.
#![allow(dead_code)]

use std::sync::LazyLock;

use keysmith::names::RowName;
use keysmith::numbers::{
    Alphabet, Encoding, KeySecret, MIN_OPAQUE_MAX, Opaque, OpaqueKey, OpaqueMap, Period, Template,
};
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

/// The encodings' decoder, check character included: any input gets a value
/// or an error, never a panic; a decoded value encodes to a string that
/// decodes to it again.
///
/// The first input byte picks the alphabet (base32 with its mod-37 check
/// symbol, base62 with its Luhn mod 62 character), whether there is a
/// prefix, and the maximum; the rest is the string.
pub fn encoding_decode(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let alphabet = if mode & 1 == 0 {
        Alphabet::Base32
    } else {
        Alphabet::Base62
    };
    let prefix = (mode & 2 != 0).then_some("ord_");
    let Ok(mut encoding) = Encoding::new(alphabet, prefix) else {
        return;
    };
    if mode & 4 != 0 {
        encoding = encoding.with_max(999_999);
    }
    let text = String::from_utf8_lossy(rest);
    let _ = encoding.looks_encoded(&text);
    let Ok(v) = encoding.decode(&text) else {
        return;
    };
    let again = encoding
        .encode(v)
        .unwrap_or_else(|e| panic!("{text:?} decodes to {v}, which does not encode: {e}"));
    assert_eq!(
        encoding.decode(&again).expect("own output decodes"),
        v,
        "{text:?}"
    );
}

/// The number template parser and the parser of the numbers it formats:
/// never a panic; a template that parses formats a number it reads back.
///
/// The first byte picks the period (none, day, month, year); the rest is
/// the template, a newline, and a formatted number to read.
pub fn template_parse(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let period = match mode % 4 {
        0 => None,
        1 => Some(Period::Day),
        2 => Some(Period::Month),
        _ => Some(Period::Year),
    };
    let text = String::from_utf8_lossy(rest);
    let (source, number) = text.split_once('\n').unwrap_or((&text, ""));
    let Ok(template) = Template::parse(source, period) else {
        return;
    };
    let _ = template.as_str();
    if let Ok(n) = template.parse_number(number) {
        let _ = template.format(&n);
    }
    let n = keysmith::numbers::Number {
        period: period.map(|p| match p {
            Period::Day => 20261123,
            Period::Month => 202611,
            Period::Year => 2026,
        }),
        n: 42,
    };
    let formatted = template.format(&n);
    assert_eq!(
        template.parse_number(&formatted).ok(),
        Some(n),
        "{source:?} formats {n:?} as {formatted:?}, which does not read back"
    );
}

static OPAQUE: LazyLock<OpaqueMap> = LazyLock::new(|| {
    let secret = KeySecret::from_bytes(*b"fuzzing secret!!");
    let opaque = Opaque {
        value_max: MIN_OPAQUE_MAX.max(1_000_000),
        // Two keys: a rotation at counter 1000.
        keys: vec![
            OpaqueKey::with_secret(0, 0, secret),
            OpaqueKey::with_secret(1, 1000, KeySecret::from_bytes(*b"rotated secret!!")),
        ],
    };
    OpaqueMap::new(&opaque).expect("a valid opaque setting")
});

/// Opaque decode (a value back to its counter): any value gets a counter or
/// an error, never a panic, and a counter maps back to the same value.
/// The input is read as a little-endian `i64`.
pub fn opaque_decode(data: &[u8]) {
    let mut bytes = [0u8; 8];
    let n = data.len().min(8);
    bytes[..n].copy_from_slice(&data[..n]);
    let v = i64::from_le_bytes(bytes);
    let map = &*OPAQUE;
    if let Ok(c) = map.counter_of(v) {
        assert!((0..=map.counter_max()).contains(&c), "{v} -> counter {c}");
        // A value of the newest key's slot is what `value_of` makes of it.
        if (v - 1) / (map.value_max() / keysmith::numbers::KEY_SLOTS) == 1 {
            assert_eq!(map.value_of(c).expect("a counter it made"), v);
        }
    }
    // And the other way for the input as a counter of the newest key
    // (whose first counter is 1000).
    if let Ok(value) = map.value_of(v) {
        if v >= 1000 {
            assert_eq!(map.counter_of(value).expect("a value it made"), v);
        } else {
            assert!(
                map.counter_of(value).is_err(),
                "{v} is before the key's first counter"
            );
        }
    }
}

/// Replays every input in `fuzz/regressions/TARGET/` (crashes found by a
/// fuzz run, kept) through `check`: an ordinary test of each target calls
/// this. Returns how many it replayed.
pub fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    replay_dir(&dir, check)
}

/// [`replay`] of the inputs in `dir` (none if it does not exist).
pub fn replay_dir(dir: &std::path::Path, check: fn(&[u8])) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for entry in entries {
        let path = entry.expect("a regression input").path();
        let data = std::fs::read(&path).expect("a readable regression input");
        eprintln!("replaying {}", path.display());
        check(&data);
        n += 1;
    }
    n
}

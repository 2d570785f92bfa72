use std::sync::Arc;

use proptest::prelude::*;
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, SignedDuration, UtcOffset};
use uuid::Uuid;

use super::*;
use crate::store::Store;
use crate::store::memory::MemoryStore;

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn secret(b: u8) -> ShardKeySecret {
    ShardKeySecret::new(vec![b; 32]).unwrap()
}

fn signed() -> ShardKeyCodec {
    ShardKeyCodec::signed(&secret(7))
}

fn dt(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &Rfc3339).unwrap()
}

/// One key for every id type, with and without children.
fn sample_keys() -> Vec<ShardKey> {
    let ids: Vec<Id> = vec![
        Id::I8(-5),
        Id::I16(-300),
        Id::I32(70_000),
        Id::I64(i64::MIN),
        Id::U8(255),
        Id::U16(65535),
        Id::U32(42),
        Id::U64(u64::MAX),
        Id::Bool(true),
        Id::Char('€'),
        Id::String("a/b?c d".into()),
        Id::String(String::new()),
        Id::Uuid(Uuid::from_u128(0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8)),
        Id::DateTime(dt("2024-05-01T12:00:00.123456789+05:30")),
        Id::Duration(SignedDuration::new(-90, -500_000_000)),
    ];
    let mut keys = vec![ShardKey::EMPTY];
    for (i, id) in ids.iter().enumerate() {
        keys.push(ShardKey::new('c', i as u16 * 4099, id.clone()).unwrap());
    }
    keys.push(
        ShardKey::new('p', 3, 42u32)
            .unwrap()
            .with_child("line")
            .unwrap()
            .with_child(7i64)
            .unwrap()
            .with_child(Uuid::nil())
            .unwrap(),
    );
    keys
}

#[test]
fn origin_rules() {
    for bad in ['-', '_', ' ', 'é', '\0', '/'] {
        let err = ShardKey::new(bad, 1, 1i64).unwrap_err().to_string();
        assert!(err.contains("ASCII letter or digit"), "{bad:?}: {err}");
    }
    let a = ShardKey::new('c', 1, 5i64).unwrap();
    let b = ShardKey::new('p', 1, 5i64).unwrap();
    assert_ne!(a, b, "different origins are never equal");
    assert_eq!(a, ShardKey::new('c', 1, 5i64).unwrap());
    assert_ne!(a, ShardKey::new('c', 2, 5i64).unwrap());
    assert_ne!(a, ShardKey::new('c', 1, 5i32).unwrap(), "types differ");
}

#[test]
fn empty_origin_is_reserved() {
    assert!(ShardKey::EMPTY.is_empty());
    assert_eq!(ShardKey::default(), ShardKey::EMPTY);
    assert_eq!(ShardKey::new('0', 0, 0i64).unwrap(), ShardKey::EMPTY);
    assert_eq!(ShardKey::new('0', 0, "").unwrap(), ShardKey::EMPTY);
    assert_eq!(ShardKey::new('0', 0, Uuid::nil()).unwrap(), ShardKey::EMPTY);
    for (shard, record) in [
        (1, Id::I64(0)),
        (0, Id::I64(1)),
        (0, Id::String("x".into())),
    ] {
        let err = ShardKey::new('0', shard, record).unwrap_err().to_string();
        assert!(err.contains("reserved"), "{err}");
    }
    assert!(ShardKey::EMPTY.with_child(1i64).is_err());
    assert!(!ShardKey::new('c', 0, 0i64).unwrap().is_empty());
    assert!(KeySchema::new('0', IdType::I64).is_err());
}

#[test]
fn children_are_limited_to_three() {
    let k = ShardKey::new('o', 1, 1i64).unwrap();
    let k = k
        .with_child(2i64)
        .unwrap()
        .with_child(3i64)
        .unwrap()
        .with_child(4i64)
        .unwrap();
    assert_eq!(k.children().len(), 3);
    let err = k.clone().with_child(5i64).unwrap_err().to_string();
    assert!(err.contains("at most 3"), "{err}");
    let parent = k.parent().unwrap();
    assert_eq!(parent.children(), &[Id::I64(2), Id::I64(3)]);
    assert!(parent < k, "a parent sorts before its children");
    assert_eq!(ShardKey::new('o', 1, 1i64).unwrap().parent(), None);
}

#[test]
fn display_is_a_json_list() {
    let k = ShardKey::new('c', 3, 42u32)
        .unwrap()
        .with_child("x\"y")
        .unwrap();
    assert_eq!(k.to_string(), r#"["c",3,42,"x\"y"]"#);
    let parsed: serde_json::Value = serde_json::from_str(&k.to_string()).unwrap();
    assert_eq!(parsed, k.to_json());
    for k in sample_keys() {
        let v: serde_json::Value = serde_json::from_str(&k.to_string()).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 3 + k.children().len());
    }
    assert_eq!(
        k.describe()["children"][0],
        serde_json::json!({"type": "string", "value": "x\"y"})
    );
}

#[test]
fn every_sample_round_trips_with_both_codecs() {
    for codec in [ShardKeyCodec::unsigned(), signed()] {
        for key in sample_keys() {
            let s = codec.encode(&key);
            assert!(s.bytes().all(|b| ALPHABET.contains(&b)), "{s}");
            assert_eq!(codec.decode_any(&s).unwrap(), key, "{s}");
            if !key.is_empty() {
                let mut schema = KeySchema::new(key.origin(), key.record().id_type()).unwrap();
                for c in key.children() {
                    schema = schema.with_child(c.id_type()).unwrap();
                }
                assert_eq!(codec.decode(&s, &schema).unwrap(), key);
            }
        }
    }
}

#[test]
fn the_external_string_is_compact() {
    let key = ShardKey::new('c', 3, 42i64).unwrap();
    // 7 bytes of content + 12 of MAC = 19 bytes = 26 characters.
    assert_eq!(signed().encode(&key).len(), 26);
    // 7 + 4 bytes of checksum = 15 characters.
    assert_eq!(ShardKeyCodec::unsigned().encode(&key).len(), 15);
}

#[test]
fn the_longest_key_fits_the_documented_bound() {
    let long = "x".repeat(MAX_STRING_ID_BYTES);
    let mut key = ShardKey::new('c', 1, long.as_str()).unwrap();
    for _ in 0..MAX_CHILDREN {
        key = key.with_child(long.as_str()).unwrap();
    }
    let s = signed().encode(&key);
    assert_eq!(s.len(), 1404);
    assert!(s.len() <= MAX_EXTERNAL_LEN);
    assert_eq!(signed().decode_any(&s).unwrap(), key);
}

/// Every string one edit away from `s`: each character replaced by every
/// other base64 character or a few others, deleted, or a character inserted.
fn single_edits(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let extra = b"=+/.~ %";
    for i in 0..b.len() {
        for &c in ALPHABET.iter().chain(extra) {
            if c != b[i] {
                let mut e = b.to_vec();
                e[i] = c;
                out.push(String::from_utf8(e).unwrap());
            }
        }
        let mut e = b.to_vec();
        e.remove(i);
        out.push(String::from_utf8(e).unwrap());
    }
    for i in 0..=b.len() {
        for &c in ALPHABET {
            let mut e = b.to_vec();
            e.insert(i, c);
            out.push(String::from_utf8(e).unwrap());
        }
    }
    out
}

#[test]
fn every_single_edit_and_truncation_of_a_signed_string_is_rejected() {
    let codec = signed();
    let mut checked = 0;
    for key in sample_keys() {
        let s = codec.encode(&key);
        for edit in single_edits(&s) {
            // An insertion can repeat a neighbour and give `s` back.
            if edit != s {
                assert!(
                    codec.decode_any(&edit).is_err(),
                    "accepted edit {edit} of {s}"
                );
                checked += 1;
            }
        }
        for cut in 0..s.len() {
            assert!(
                codec.decode_any(&s[..cut]).is_err(),
                "accepted {}",
                &s[..cut]
            );
            assert!(
                codec.decode_any(&s[s.len() - cut..]).is_err(),
                "accepted suffix"
            );
            checked += 2;
        }
    }
    assert!(checked > 50_000, "{checked}");
}

#[test]
fn every_single_edit_of_an_unsigned_string_is_caught_too() {
    // The checksum exists for exactly this: typing and copying mistakes.
    let codec = ShardKeyCodec::unsigned();
    for key in sample_keys() {
        let s = codec.encode(&key);
        for edit in single_edits(&s) {
            if edit != s {
                assert!(
                    codec.decode_any(&edit).is_err(),
                    "accepted edit {edit} of {s}"
                );
            }
        }
    }
}

#[test]
fn another_secret_or_mode_is_rejected() {
    let mine = signed();
    let theirs = ShardKeyCodec::signed(&secret(8));
    let plain = ShardKeyCodec::unsigned();
    for key in sample_keys() {
        let err = mine
            .decode_any(&theirs.encode(&key))
            .unwrap_err()
            .to_string();
        assert!(err.contains("signature check"), "{err}");
        let err = mine
            .decode_any(&plain.encode(&key))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not signed"), "{err}");
        let err = plain
            .decode_any(&mine.encode(&key))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is signed"), "{err}");
    }
}

#[test]
fn schema_mismatches_are_named() {
    let codec = signed();
    let key = ShardKey::new('c', 3, 42u32)
        .unwrap()
        .with_child(7i64)
        .unwrap();
    let s = codec.encode(&key);
    let schema = |o, r| KeySchema::new(o, r).unwrap();
    for (schema, needle) in [
        (
            schema('p', IdType::U32).with_child(IdType::I64).unwrap(),
            "origin 'c', expected 'p'",
        ),
        (
            schema('c', IdType::I64).with_child(IdType::I64).unwrap(),
            "record id is a u32, expected a i64",
        ),
        (
            schema('c', IdType::U32).with_child(IdType::String).unwrap(),
            "child id 1 is a i64",
        ),
        (schema('c', IdType::U32), "1 child id(s), expected 0"),
    ] {
        let err = codec.decode(&s, &schema).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
    let err = codec
        .decode(&codec.encode(&ShardKey::EMPTY), &schema('c', IdType::I64))
        .unwrap_err()
        .to_string();
    assert!(err.contains("empty shard key"), "{err}");
    assert!(
        KeySchema::new('c', IdType::I64)
            .unwrap()
            .with_child(IdType::I64)
            .unwrap()
            .with_child(IdType::I64)
            .unwrap()
            .with_child(IdType::I64)
            .unwrap()
            .with_child(IdType::I64)
            .is_err()
    );
}

#[test]
fn garbage_gets_clear_errors() {
    let codec = signed();
    for (input, needle) in [
        ("", "empty string"),
        ("abc!", "URL-safe base64"),
        ("A", "URL-safe base64"),
        ("AAAA", "too short"),
        (&"A".repeat(MAX_EXTERNAL_LEN + 1), "characters long"),
    ] {
        let err = codec.decode_any(input).unwrap_err().to_string();
        assert!(err.contains(needle), "{input:?}: {err}");
    }
}

/// A body: version 1, flags, origin, shard, then `rest`.
fn body(flags: u8, origin: u8, rest: &[u8]) -> Vec<u8> {
    let mut b = vec![FORMAT_VERSION, flags, origin, 0, 3];
    b.extend_from_slice(rest);
    b
}

#[test]
fn malformed_content_with_a_valid_tag_is_rejected() {
    let i64_tag = IdType::I64.tag();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (body(0, b'c', &[i64_tag, 0x80, 0x00]), "shortest form"),
        (
            body(
                0,
                b'c',
                &[
                    i64_tag, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
                ],
            ),
            "overflows",
        ),
        (body(0, b'c', &[i64_tag, 0x80]), "cut short"),
        (body(0, b'c', &[i64_tag, 2, 9]), "after the last id"),
        (body(1, b'c', &[i64_tag, 2]), "cut short"),
        (body(0x10, b'c', &[i64_tag, 2]), "unknown flags"),
        (body(0, b'-', &[i64_tag, 2]), "origin"),
        (body(0, b'c', &[0, 2]), "unknown id type 0"),
        (body(0, b'c', &[15, 2]), "unknown id type 15"),
        (body(0, b'c', &[IdType::Bool.tag(), 2]), "bool"),
        (
            body(0, b'c', &[IdType::U16.tag(), 0x80, 0x80, 0x04]),
            "out of range",
        ),
        (
            body(0, b'c', &[IdType::Char.tag(), 0x80, 0xb0, 0x03]),
            "Unicode scalar",
        ),
        (
            body(0, b'c', &[IdType::String.tag(), 2, 0xff, 0xfe]),
            "UTF-8",
        ),
        (
            body(0, b'c', &[IdType::String.tag(), 0x81, 0x02]),
            "too long",
        ),
        (body(0, b'c', &[IdType::Uuid.tag(), 1, 2, 3]), "cut short"),
        (
            body(0, b'c', &[IdType::Duration.tag(), 2, 1]),
            "nanoseconds",
        ),
        // Found by cargo fuzz: nanoseconds of i64::MIN once overflowed abs().
        (
            body(
                0,
                b'c',
                &[
                    IdType::Duration.tag(),
                    0,
                    0xff,
                    0xff,
                    0xff,
                    0xff,
                    0xff,
                    0xff,
                    0xff,
                    0xff,
                    0xff,
                    0x01,
                ],
            ),
            "nanoseconds",
        ),
        (
            body(0, b'c', &[IdType::DateTime.tag(), 0, 0, 0xc0, 0x3e]),
            "date-time",
        ),
        (body(0, b'0', &[i64_tag, 2]), "reserved"),
    ];
    for codec in [ShardKeyCodec::unsigned(), signed()] {
        for (bytes, needle) in &cases {
            let s = codec.seal_raw_for_tests(bytes);
            let err = codec.decode_any(&s).unwrap_err().to_string();
            assert!(err.contains(needle), "{bytes:?}: {err}");
        }
        let mut future = body(0, b'c', &[i64_tag, 2]);
        future[0] = 2;
        let err = codec
            .decode_any(&codec.seal_raw_for_tests(&future))
            .unwrap_err()
            .to_string();
        assert!(err.contains("format version 2"), "{err}");
    }
}

#[test]
fn secrets_do_not_print() {
    let s = ShardKeySecret::new(*b"supersecretsupersecret").unwrap();
    assert!(!format!("{s:?}").contains("supersecret"));
    assert!(!format!("{:?}", ShardKeyCodec::signed(&s)).contains("supersecret"));
    let err = ShardKeySecret::new(*b"short").unwrap_err().to_string();
    assert!(err.contains("at least 16 bytes"), "{err}");
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Customer {
    key: ShardKey,
    name: String,
}

#[test]
fn serde_writes_the_external_string_of_the_codec_in_scope() {
    let c = Customer {
        key: ShardKey::new('c', 3, 42i64).unwrap(),
        name: "Ada".into(),
    };
    let codec = signed();
    let json = codec.scope(|| serde_json::to_string(&c)).unwrap();
    assert_eq!(
        json,
        format!(r#"{{"key":"{}","name":"Ada"}}"#, codec.encode(&c.key))
    );
    let back: Customer = codec.scope(|| serde_json::from_str(&json)).unwrap();
    assert_eq!(back, c);
    // Another secret in scope: the signed string is refused.
    let other = ShardKeyCodec::signed(&secret(9));
    let err = other
        .scope(|| serde_json::from_str::<Customer>(&json))
        .unwrap_err();
    assert!(err.to_string().contains("signature check"), "{err}");
    // Scopes nest and unwind.
    let inner = codec.scope(|| other.scope(|| serde_json::to_string(&c.key)).unwrap());
    assert_eq!(inner, format!("\"{}\"", other.encode(&c.key)));
    assert!(serde_json::from_str::<ShardKey>("42").is_err());
}

#[test]
fn foreign_shards_skip_own_and_empty() {
    let keys = [
        ShardKey::new('c', 1, 1i64).unwrap(),
        ShardKey::new('c', 4, 2i64).unwrap(),
        ShardKey::new('c', 2, 3i64).unwrap(),
        ShardKey::new('c', 4, 4i64).unwrap(),
        ShardKey::EMPTY,
    ];
    assert_eq!(
        foreign_shards(&keys, 1).into_iter().collect::<Vec<_>>(),
        vec![2, 4]
    );
    assert_eq!(foreign_shards(&keys, 9).len(), 3);
    assert!(foreign_shards([], 0).is_empty());
}

#[test]
fn merge_by_key_interleaves_and_handles_duplicates() {
    let rec = |shard, id: i64, tag: &'static str| (ShardKey::new('c', shard, id).unwrap(), tag);
    let left = vec![rec(1, 1, "L"), rec(1, 3, "L"), rec(1, 5, "L")];
    let right = vec![rec(2, 2, "R"), rec(1, 3, "R"), rec(2, 6, "R")];
    fn key<'a>(r: &'a (ShardKey, &'static str)) -> &'a ShardKey {
        &r.0
    }
    let ids = |v: &[(ShardKey, &str)]| -> Vec<String> {
        v.iter()
            .map(|(k, t)| format!("{}{t}", k.record()))
            .collect()
    };
    let m = merge_by_key(left.clone(), right.clone(), key, Duplicates::KeepRight).unwrap();
    assert_eq!(ids(&m), ["1L", "2R", "3R", "5L", "6R"]);
    let m = merge_by_key(left.clone(), right.clone(), key, Duplicates::KeepLeft).unwrap();
    assert_eq!(ids(&m), ["1L", "2R", "3L", "5L", "6R"]);
    let m = merge_by_key(left.clone(), right.clone(), key, Duplicates::KeepBoth).unwrap();
    assert_eq!(ids(&m), ["1L", "2R", "3L", "3R", "5L", "6R"]);
    let err = merge_by_key(left.clone(), right.clone(), key, Duplicates::Reject).unwrap_err();
    assert!(err.to_string().contains(r#"["c",1,3] is in both"#), "{err}");
    let unsorted = vec![rec(1, 5, "L"), rec(1, 1, "L")];
    let err = merge_by_key(unsorted, right, key, Duplicates::KeepBoth).unwrap_err();
    assert!(
        err.to_string()
            .contains("left record set is not strictly ordered"),
        "{err}"
    );
    assert!(
        merge_by_key(Vec::new(), Vec::new(), key, Duplicates::Reject)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn keys_order_by_origin_record_children_shard() {
    let k = |o, s, r: i64| ShardKey::new(o, s, r).unwrap();
    let mut v = vec![k('p', 0, 1), k('c', 9, 2), k('c', 1, 2), k('c', 5, 1)];
    v.sort();
    assert_eq!(v, [k('c', 5, 1), k('c', 1, 2), k('c', 9, 2), k('p', 0, 1)]);
}

#[test]
fn shard_ranges_map_both_ways_and_check_bounds() {
    let r = ShardRanges::new(1, 1000, 16).unwrap();
    assert_eq!(r.range(0).unwrap(), 1..=1000);
    assert_eq!(r.range(15).unwrap(), 15_001..=16_000);
    assert_eq!(r.global_id(3, 0).unwrap(), 3001);
    assert_eq!(r.locate(3001).unwrap(), (3, 0));
    assert_eq!(r.locate(16_000).unwrap(), (15, 999));
    assert_eq!(
        r.shard_key('c', 3001).unwrap(),
        ShardKey::new('c', 3, 3001i64).unwrap()
    );
    for (res, needle) in [
        (r.global_id(16, 0), "shard 16 is outside"),
        (r.global_id(3, 1000), "local id 1000"),
        (r.global_id(3, -1), "local id -1"),
        (r.locate(0).map(|(_, l)| l), "in no shard"),
        (r.locate(16_001).map(|(_, l)| l), "in no shard"),
        (r.locate(i64::MIN).map(|(_, l)| l), "in no shard"),
    ] {
        let err = res.unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
    // The largest layout that fits, and one more id that does not.
    let max = (crate::store::MAX_VALUE + 1) / 65536;
    let slack = crate::store::MAX_VALUE + 1 - max * 65536;
    let full = ShardRanges::new(slack, max, 65536).unwrap();
    let last = *full.range(65535).unwrap().end();
    assert_eq!(last, crate::store::MAX_VALUE);
    assert_eq!(full.locate(last).unwrap(), (65535, max - 1));
    assert_eq!(full.global_id(65535, max - 1).unwrap(), last);
    let err = ShardRanges::new(slack + 1, max, 65536)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("at most {}", max - 1)), "{err}");
    for bad in [
        ShardRanges::new(-1, 10, 1),
        ShardRanges::new(0, 0, 1),
        ShardRanges::new(0, 10, 0),
        ShardRanges::new(0, 10, 65537),
        ShardRanges::new(0, i64::MAX, 2),
        ShardRanges::new(i64::MAX, 1, 1),
    ] {
        assert!(bad.is_err());
    }
}

#[tokio::test]
async fn per_shard_sequences_never_leave_their_range() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let r = ShardRanges::new(1, 10, 4).unwrap();
    let rows = r
        .create_sequences(store.as_ref(), "orders", 3)
        .await
        .unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[2].name, "orders.shard-2");
    // Running it again is harmless.
    r.create_sequences(store.as_ref(), "orders", 3)
        .await
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for shard in 0..4u16 {
        let name = ShardRanges::sequence_name("orders", shard);
        loop {
            match store.reserve_atomic(&name, 3).await {
                Ok(res) => {
                    for id in res.start..res.end {
                        assert_eq!(r.shard_of(id).unwrap(), shard);
                        assert!(seen.insert(id), "{id} twice");
                    }
                }
                Err(crate::Error::Exhausted { max, .. }) => {
                    assert_eq!(max, *r.range(shard).unwrap().end());
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        (1..=40).collect::<Vec<_>>()
    );
    // Same prefix, other layout: refused with both ranges named.
    let other = ShardRanges::new(1, 20, 4).unwrap();
    let err = other
        .create_sequence(store.as_ref(), "orders", 1, 3)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("11 to 20"), "{err}");
    assert!(
        r.create_sequence(store.as_ref(), "bad name", 0, 3)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_shard_sequence_hands_out_that_shards_ids_until_its_range_ends() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let r = ShardRanges::new(1, 25, 8).unwrap();
    let seq = r.open_sequence(store.clone(), "items", 5, 4).await.unwrap();
    let mut got = Vec::new();
    let err = loop {
        match seq.next().await {
            Ok(id) => got.push(id),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, crate::Error::Exhausted { max: 150, .. }),
        "{err}"
    );
    assert_eq!(got, (126..=150).collect::<Vec<_>>());
    assert!(got.iter().all(|&id| r.shard_of(id).unwrap() == 5));
    // A second handle on the same shard finds it exhausted, not refilled.
    let again = r.open_sequence(store, "items", 5, 4).await.unwrap();
    assert!(matches!(
        again.next().await,
        Err(crate::Error::Exhausted { .. })
    ));
}

fn any_datetime() -> impl Strategy<Value = Id> {
    (
        -62_167_219_200i64..=253_402_300_799,
        0u32..1_000_000_000,
        -1559i32..=1559,
    )
        .prop_filter_map(
            "outside years 0000-9999 at that offset",
            |(secs, nanos, minutes)| {
                let t = OffsetDateTime::from_unix_timestamp(secs)
                    .ok()?
                    .replace_nanosecond(nanos)
                    .ok()?
                    .checked_to_offset(UtcOffset::from_whole_seconds(minutes * 60).ok()?)?;
                let id = Id::DateTime(t);
                id.validate().ok().map(|_| id)
            },
        )
}

fn any_id() -> impl Strategy<Value = Id> {
    prop_oneof![
        any::<i8>().prop_map(Id::I8),
        any::<i16>().prop_map(Id::I16),
        any::<i32>().prop_map(Id::I32),
        any::<i64>().prop_map(Id::I64),
        any::<u8>().prop_map(Id::U8),
        any::<u16>().prop_map(Id::U16),
        any::<u32>().prop_map(Id::U32),
        any::<u64>().prop_map(Id::U64),
        any::<bool>().prop_map(Id::Bool),
        any::<char>().prop_map(Id::Char),
        ".{0,64}".prop_map(Id::String),
        any::<u128>().prop_map(|v| Id::Uuid(Uuid::from_u128(v))),
        any_datetime(),
        (any::<i64>(), -999_999_999i64..=999_999_999).prop_filter_map("overflow", |(s, n)| {
            SignedDuration::seconds(s)
                .checked_add(SignedDuration::nanoseconds(n))
                .map(Id::Duration)
        }),
    ]
}

fn any_key() -> impl Strategy<Value = ShardKey> {
    let origin = proptest::sample::select(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ123456789"
            .chars()
            .collect::<Vec<_>>(),
    );
    (
        origin,
        any::<u16>(),
        any_id(),
        proptest::collection::vec(any_id(), 0..=3),
    )
        .prop_map(|(o, s, r, c)| ShardKey::from_parts(o, s, r, c).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_then_decode_gives_the_same_key(key in any_key()) {
        for codec in [ShardKeyCodec::unsigned(), signed()] {
            let s = codec.encode(&key);
            prop_assert!(s.len() <= MAX_EXTERNAL_LEN);
            let back = codec.decode_any(&s).unwrap();
            prop_assert_eq!(&back, &key);
            prop_assert_eq!(codec.encode(&back), s);
            // The text form of each id reads back too (used by the CLI).
            for id in key.ids() {
                prop_assert_eq!(&Id::parse(id.id_type(), &id.to_string()).unwrap(), id);
            }
        }
    }

    #[test]
    fn decoding_anything_never_panics(s in "[A-Za-z0-9_=-]{0,80}") {
        let _ = signed().decode_any(&s);
        let _ = ShardKeyCodec::unsigned().decode_any(&s);
    }

    #[test]
    fn sealed_random_bodies_never_panic_and_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..60)) {
        let mut bytes = bytes;
        if bytes.len() > 2 {
            bytes[0] = FORMAT_VERSION;
            bytes[2] = b'c';
        }
        let codec = signed();
        let s = codec.seal_raw_for_tests(&bytes);
        if let Ok(key) = codec.decode_any(&s) {
            prop_assert_eq!(codec.encode(&key), s);
        }
    }

    #[test]
    fn ranges_locate_inverts_global_id(size in 1i64..1_000_000_000, shards in 1u32..=65536, base in 0i64..1_000_000, pick in any::<u64>()) {
        let r = ShardRanges::new(base, size, shards).unwrap();
        let shard = (pick % u64::from(shards)) as u16;
        let local = (pick % size as u64) as i64;
        let id = r.global_id(shard, local).unwrap();
        prop_assert_eq!(r.locate(id).unwrap(), (shard, local));
    }
}

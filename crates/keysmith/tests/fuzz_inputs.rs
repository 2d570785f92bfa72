//! The fuzz targets' checks (`fuzz/checks/`) on proptest's inputs, in the
//! ordinary test run: cargo-fuzz needs a nightly toolchain, this does not, so
//! a parser that panics on some input turns CI red on stable too.
//!
//! Inputs are raw bytes (what libFuzzer starts from) and near-valid strings
//! (valid row names and external strings with one character changed), which
//! reach far deeper into the parsers than random bytes do.

#[path = "../../../fuzz/checks/mod.rs"]
mod checks;

use keysmith::shard_key::{ShardKey, ShardKeyCodec};
use proptest::prelude::*;

/// Strings shaped like row names: URLs with paths, ports and fragments
/// (branches, revisions, drafts, suggestions), and user names.
fn row_name_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "(https?|ftp|HTTP)://[a-zA-Z0-9.-]{0,12}(:[0-9]{1,6})?(/[a-zA-Z0-9%._~+-]{0,6}){0,3}(\\?[a-z=&]{0,6})?(#(([a-z]{2}(_[A-Za-z]{2})?/)?(user/[a-z]{1,5}/|suggestion/)?[0-9]{0,3}(\\.[0-9]{0,3})?)?)?",
        "([a-z.]{1,10}/)?user/[a-zA-Z0-9._-]{0,8}",
        "[ -~]{0,40}",
    ]
}

/// Text shaped like a secret key file: lines of ids and secrets, comments,
/// blank lines, stray colons and spaces.
fn secret_file_like() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            "[A-Za-z0-9._-]{1,8}:[ -~]{0,24}",
            "#[ -~]{0,10}",
            "[ \t]{0,2}",
            "[ -~]{0,24}",
        ],
        0..6,
    )
    .prop_map(|lines| lines.join("\n"))
}

/// A valid external string of a random key, with one character replaced.
fn edited_external() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::char::range('a', 'z'),
        any::<u16>(),
        any::<i64>(),
        any::<prop::sample::Index>(),
        any::<u8>(),
    )
        .prop_map(|(origin, shard, record, at, byte)| {
            let key = ShardKey::new(origin, shard, record).expect("a valid key");
            let mut s = ShardKeyCodec::unsigned().encode(&key).into_bytes();
            let i = at.index(s.len());
            s[i] = byte;
            // Mode byte 0: an external string.
            let mut input = vec![0u8];
            input.extend(s);
            input
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn row_name_parse_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        checks::row_name_parse(&data);
    }

    #[test]
    fn row_name_parse_on_row_name_like_strings(s in row_name_like()) {
        checks::row_name_parse(s.as_bytes());
    }

    #[test]
    fn shard_key_decode_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..120)) {
        checks::shard_key_decode(&data);
    }

    #[test]
    fn shard_key_decode_on_edited_external_strings(data in edited_external()) {
        checks::shard_key_decode(&data);
    }

    #[test]
    fn secret_keys_parse_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        checks::secret_keys_parse(&data);
    }

    #[test]
    fn secret_keys_parse_on_secret_file_like_text(s in secret_file_like()) {
        checks::secret_keys_parse(s.as_bytes());
    }

    #[test]
    fn encoding_decode_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..40)) {
        checks::encoding_decode(&data);
    }

    #[test]
    fn encoding_decode_on_encoding_like_text(mode in any::<u8>(), s in "(ord_)?[0-9A-Za-z*~$=]{0,16}") {
        let mut data = vec![mode];
        data.extend(s.as_bytes());
        checks::encoding_decode(&data);
    }

    #[test]
    fn template_parse_on_template_like_text(mode in any::<u8>(), s in "[ -~]{0,4}(\\{[a-z]{0,6}(:[0-9]{0,2})?\\}[ -~]{0,3}){0,3}\n[ -~]{0,16}") {
        let mut data = vec![mode];
        data.extend(s.as_bytes());
        checks::template_parse(&data);
    }

    #[test]
    fn opaque_decode_on_random_values(v in any::<i64>(), small in 0i64..2_000_000) {
        checks::opaque_decode(&v.to_le_bytes());
        checks::opaque_decode(&small.to_le_bytes());
    }
}

//! Secrets that rotate: a list of keys, each with an id. The newest key
//! signs; every listed key verifies, so tokens and strings signed before a
//! rotation keep working while their key stays listed.
//!
//! The lease secret ([`crate::sequence::lease::LeaseKey`]) and the shard key
//! secret ([`crate::shard_key::ShardKeySecret`]) are read from files of this
//! format:
//!
//! ```text
//! # comments and blank lines are ignored
//! 2026-10:c2VjcmV0IG9uZSwgbG9uZyBlbm91Z2g
//! 2026-11:YW5vdGhlciBzZWNyZXQsIGxvbmcgZW5vdWdo
//! ```
//!
//! - one key a line, `KEY_ID:SECRET`: the id is 1 to [`MAX_KEY_ID_BYTES`]
//!   letters, digits, `.`, `_` or `-`; the secret is everything after the
//!   first colon (spaces around either are dropped) and at least as long as
//!   the secret's type demands;
//! - the **last** key is the newest: it signs; every listed key verifies;
//! - ids are unique, no two keys share a secret, at most [`MAX_KEYS`] keys
//!   (each token is checked against every key);
//! - a file that is not UTF-8 text, or whose content (less one trailing
//!   newline) is a single line that is neither a comment nor of the form
//!   `KEY_ID:SECRET`, is one bare secret, the format these files had before
//!   key lists: its bytes as they are, with the id [`SINGLE_KEY_ID`].
//!   A bare secret that itself looks like `KEY_ID:SECRET` is read as a
//!   list; write it as `old:` followed by the secret to keep it.
//!
//! To rotate: append a line with a new id and secret (it signs from the
//! next reload on), and once nothing signed with the old key is still in
//! use, remove the old line. Errors name the file and the line and say what
//! is wrong; they never show a secret.

use std::path::Path;

use crate::{Error, Result};

/// The most keys one list holds.
pub const MAX_KEYS: usize = 16;

/// The longest key id, in bytes.
pub const MAX_KEY_ID_BYTES: usize = 64;

/// The id of a bare secret: one from an environment variable, or a file
/// holding a single secret without an id.
pub const SINGLE_KEY_ID: &str = "default";

/// One key of a list: its id and its secret bytes. Its `Debug` form shows
/// the id only.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SecretKey {
    pub(crate) id: String,
    pub(crate) secret: Vec<u8>,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey({:?}, <hidden>)", self.id)
    }
}

/// What a list of keys is for, in messages: `"lease secret"`, and the
/// shortest secret it accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    pub(crate) what: &'static str,
    pub(crate) min_bytes: usize,
}

/// A list of keys, oldest first; never empty.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct SecretKeys(Vec<SecretKey>);

impl SecretKeys {
    /// One bare secret, id [`SINGLE_KEY_ID`].
    pub(crate) fn single(secret: Vec<u8>, kind: Kind) -> Result<SecretKeys> {
        check_len(&secret, kind).map_err(Error::invalid)?;
        Ok(SecretKeys(vec![SecretKey {
            id: SINGLE_KEY_ID.to_owned(),
            secret,
        }]))
    }

    /// The keys of a file's content (see the module documentation).
    pub(crate) fn parse(text: &[u8], kind: Kind) -> Result<SecretKeys> {
        let Ok(text) = std::str::from_utf8(text) else {
            return Self::single(without_newline(text).to_vec(), kind);
        };
        let body = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(text);
        let one_line = !body.contains('\n');
        if one_line && !body.trim_start().starts_with('#') && split_key(body).is_none() {
            if body.contains(char::is_whitespace) {
                tracing::warn!(
                    "the {} file holds one line that is not KEY_ID:SECRET: it is read as one bare secret, spaces included; \
                     write KEY_ID:SECRET if a key list was meant",
                    kind.what
                );
            }
            return Self::single(body.as_bytes().to_vec(), kind);
        }
        let mut keys: Vec<(usize, SecretKey)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((id, secret)) = split_key(line) else {
                return Err(Error::invalid(format!(
                    "line {n}: expected KEY_ID:SECRET (an id of 1 to {MAX_KEY_ID_BYTES} letters, digits, '.', '_' or '-', a colon, then the {}); \
                     blank lines and lines starting with # are ignored",
                    kind.what
                )));
            };
            check_len(secret.as_bytes(), kind)
                .map_err(|e| Error::invalid(format!("line {n} (key {id:?}): {e}")))?;
            if let Some((m, _)) = keys.iter().find(|(_, k)| k.id == id) {
                return Err(Error::invalid(format!(
                    "line {n}: the key id {id:?} is already used on line {m}; give each key its own id"
                )));
            }
            if let Some((m, k)) = keys.iter().find(|(_, k)| k.secret == secret.as_bytes()) {
                return Err(Error::invalid(format!(
                    "line {n}: key {id:?} has the same secret as key {:?} on line {m}; a new key needs a new secret",
                    k.id
                )));
            }
            keys.push((
                n,
                SecretKey {
                    id: id.to_owned(),
                    secret: secret.as_bytes().to_vec(),
                },
            ));
        }
        if keys.is_empty() {
            return Err(Error::invalid(format!(
                "no keys: every line is blank or a comment; add a line KEY_ID:SECRET with a {} of at least {} bytes",
                kind.what, kind.min_bytes
            )));
        }
        if keys.len() > MAX_KEYS {
            return Err(Error::invalid(format!(
                "{} keys, at most {MAX_KEYS} are accepted (every token is checked against each); \
                 remove the oldest keys nothing signed with is still in use",
                keys.len()
            )));
        }
        Ok(SecretKeys(keys.into_iter().map(|(_, k)| k).collect()))
    }

    /// The keys in the file at `path`; errors name the file.
    pub(crate) fn from_file(path: &Path, kind: Kind) -> Result<SecretKeys> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::invalid(format!(
                "cannot read the {} file {}: {e}",
                kind.what,
                path.display()
            ))
        })?;
        Self::parse(&bytes, kind)
            .map_err(|e| e.context(&format!("{} file {}", kind.what, path.display())))
    }

    /// The keys, oldest first (the last one signs).
    pub(crate) fn keys(&self) -> &[SecretKey] {
        &self.0
    }

    /// The ids, oldest first.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.0.iter().map(|k| k.id.clone()).collect()
    }
}

/// `text` less one trailing `\n` or `\r\n`.
fn without_newline(text: &[u8]) -> &[u8] {
    text.strip_suffix(b"\r\n")
        .or_else(|| text.strip_suffix(b"\n"))
        .unwrap_or(text)
}

/// `ID:SECRET`, trimmed, if `line` has that form (an acceptable id, a
/// non-empty secret).
fn split_key(line: &str) -> Option<(&str, &str)> {
    let (id, secret) = line.split_once(':')?;
    let (id, secret) = (id.trim(), secret.trim());
    let id_ok = (1..=MAX_KEY_ID_BYTES).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    (id_ok && !secret.is_empty()).then_some((id, secret))
}

fn check_len(secret: &[u8], kind: Kind) -> std::result::Result<(), String> {
    if secret.len() < kind.min_bytes {
        return Err(format!(
            "a {} must be at least {} bytes, this one is {}; use 32 random bytes, e.g. from `openssl rand -base64 32`",
            kind.what,
            kind.min_bytes,
            secret.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: Kind = Kind {
        what: "test secret",
        min_bytes: 16,
    };

    fn parse(text: &str) -> Result<SecretKeys> {
        SecretKeys::parse(text.as_bytes(), KIND)
    }

    fn err(text: &str) -> String {
        let e = parse(text).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        e.to_string()
    }

    #[test]
    fn a_list_with_comments_and_blank_lines_keeps_its_order() {
        let k = parse(
            "# rotated monthly\n\n  k1 : aaaaaaaaaaaaaaaaaaaa  \r\n# next\nk-2.b_3:bbbbbbbbbbbbbbbb:with colon\n",
        )
        .unwrap();
        assert_eq!(k.ids(), ["k1", "k-2.b_3"]);
        assert_eq!(k.keys()[0].secret, b"aaaaaaaaaaaaaaaaaaaa");
        assert_eq!(k.keys()[1].secret, b"bbbbbbbbbbbbbbbb:with colon");
        // One key with an id is a list too.
        let one = parse("k9:cccccccccccccccc\n").unwrap();
        assert_eq!(one.ids(), ["k9"]);
        assert_eq!(one.keys()[0].secret, b"cccccccccccccccc");
    }

    #[test]
    fn a_bare_secret_is_one_key_as_before() {
        for (text, secret) in [
            ("0123456789abcdef\n", &b"0123456789abcdef"[..]),
            ("0123456789abcdef\r\n", b"0123456789abcdef"),
            ("0123456789abcdef", b"0123456789abcdef"),
            // Spaces are part of a bare secret, as they were.
            (
                "correct horse battery staple\n",
                b"correct horse battery staple",
            ),
            // A colon after something that is no id.
            (
                "no id here: 0123456789abcdef",
                b"no id here: 0123456789abcdef",
            ),
        ] {
            let k = parse(text).unwrap();
            assert_eq!(k.ids(), [SINGLE_KEY_ID], "{text:?}");
            assert_eq!(k.keys()[0].secret, secret, "{text:?}");
        }
        // Bytes that are not UTF-8: a bare secret, less one trailing newline.
        let raw = [
            0xff_u8, 0xfe, b'\n', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, b'\n',
        ];
        let k = SecretKeys::parse(&raw, KIND).unwrap();
        assert_eq!(k.keys()[0].secret, raw[..raw.len() - 1]);
        assert!(err("short\n").contains("at least 16 bytes, this one is 5"));
        assert!(err("").contains("at least 16 bytes, this one is 0"));
    }

    #[test]
    fn bad_lists_say_which_line_and_never_show_the_secret() {
        let secret = "zzzzzzzzzzzzzzzzzzzzzz";
        for (text, want) in [
            (
                format!("k1:{secret}\nk1:{secret}x\n"),
                "line 2: the key id \"k1\" is already used on line 1",
            ),
            (
                format!("k1:{secret}\n\nk2:{secret}\n"),
                "line 3: key \"k2\" has the same secret as key \"k1\" on line 1",
            ),
            (
                format!("k1:{secret}\nk2:short\n"),
                "line 2 (key \"k2\"): a test secret must be at least 16 bytes, this one is 5",
            ),
            (
                format!("k1:{secret}\nk2 {secret}\n"),
                "line 2: expected KEY_ID:SECRET",
            ),
            (
                format!("# c\nbad id:{secret}\n"),
                "line 2: expected KEY_ID:SECRET",
            ),
            (
                format!("k1:{secret}\nk2:\n"),
                "line 2: expected KEY_ID:SECRET",
            ),
            ("# only a comment\n\n".to_owned(), "no keys"),
            ("# only a comment".to_owned(), "no keys"),
        ] {
            let e = err(&text);
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains(secret), "{e}");
        }
        let many: String = (0..=MAX_KEYS)
            .map(|i| format!("k{i}:{secret}{i}\n"))
            .collect();
        assert!(err(&many).contains("17 keys, at most 16"));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_keys_or_an_error_never_a_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)
        ) {
            if let Ok(k) = SecretKeys::parse(&bytes, KIND) {
                proptest::prop_assert!((1..=MAX_KEYS).contains(&k.keys().len()));
                proptest::prop_assert!(k.keys().iter().all(|k| k.secret.len() >= KIND.min_bytes));
            }
        }

        #[test]
        fn a_written_list_reads_back_and_a_bad_line_shows_no_secret(
            keys in proptest::collection::btree_map("[A-Za-z0-9._-]{1,64}", "[!-~]{16,40}", 1..=MAX_KEYS),
            bad in 0usize..MAX_KEYS,
        ) {
            let secrets: std::collections::HashSet<_> = keys.values().collect();
            proptest::prop_assume!(secrets.len() == keys.len());
            let text: String = keys.iter().map(|(id, s)| format!("{id}:{s}\n")).collect();
            let k = parse(&text).unwrap();
            proptest::prop_assert_eq!(k.ids(), keys.keys().cloned().collect::<Vec<_>>());
            for (key, want) in k.keys().iter().zip(keys.values()) {
                proptest::prop_assert_eq!(&key.secret, want.as_bytes());
            }
            // One line's id broken by a space: refused, naming the line only.
            let bad = bad % keys.len();
            let text: String = keys
                .iter()
                .enumerate()
                .map(|(i, (id, s))| if i == bad { format!("x {id}:{s}\n") } else { format!("{id}:{s}\n") })
                .collect();
            if keys.len() == 1 {
                // One line that is not KEY_ID:SECRET: a bare secret, as before.
                let k = parse(&text).unwrap();
                proptest::prop_assert_eq!(k.ids(), [SINGLE_KEY_ID]);
                proptest::prop_assert_eq!(&k.keys()[0].secret, text.trim_end().as_bytes());
                return Ok(());
            }
            let e = parse(&text).unwrap_err().to_string();
            let want = format!("line {}: expected KEY_ID:SECRET", bad + 1);
            proptest::prop_assert!(e.contains(&want), "{}", e);
            for s in keys.values() {
                proptest::prop_assert!(!e.contains(s.as_str()), "{}", e);
            }
        }
    }

    #[test]
    fn file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(
            &path,
            "k1:aaaaaaaaaaaaaaaaaaaa\nk1:bbbbbbbbbbbbbbbbbbbbbb\n",
        )
        .unwrap();
        let e = SecretKeys::from_file(&path, KIND).unwrap_err().to_string();
        assert!(
            e.contains(&format!("test secret file {}: line 2", path.display())),
            "{e}"
        );
        let e = SecretKeys::from_file(&dir.path().join("missing"), KIND)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read the test secret file"), "{e}");
    }
}

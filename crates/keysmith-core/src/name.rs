//! Names of sequences and pools.

use crate::{Error, Result};

/// The longest name accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 512;

/// Checks that `name` can name a sequence or a pool.
///
/// A name is 1 to [`MAX_NAME_BYTES`] bytes of UTF-8 with no whitespace and no
/// control characters. Anything else printable is allowed, so URL-like names
/// such as `example.com/a#main` are fine.
///
/// # Errors
/// [`Error::InvalidName`] saying what is wrong.
pub fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("a name must not be empty".to_owned())
    } else if name.len() > MAX_NAME_BYTES {
        Some(format!(
            "a name must be at most {MAX_NAME_BYTES} bytes, this one is {}",
            name.len()
        ))
    } else {
        name.chars()
            .find(|c| c.is_whitespace() || c.is_control())
            .map(|c| format!(
                "names may not contain whitespace or control characters (found {c:?}); use '-', '_', '.' or '/' instead"
            ))
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidName {
            name: shorten(name),
            reason,
        }),
    }
}

/// The least string above every string that starts with `prefix`, in
/// byte order (which is code point order for UTF-8): `prefix` with its last
/// character raised by one and what follows dropped, or `None` when no such
/// string exists (`prefix` is empty or all `char::MAX`). So the names that
/// start with `prefix` are exactly those in `prefix..prefix_end(prefix)`: one
/// index range read in a store whose names sort by bytes.
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        // The next scalar value: past the surrogates, none after char::MAX.
        let next = (u32::from(c) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(n) = next {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

pub(crate) fn shorten(name: &str) -> String {
    if name.len() <= 64 {
        return name.to_owned();
    }
    let mut end = 64;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &name[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_end_examples() {
        assert_eq!(prefix_end("team-a/").as_deref(), Some("team-a0"));
        assert_eq!(prefix_end("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("\u{10FFFF}\u{10FFFF}"), None);
    }

    proptest! {
        /// A name starts with the prefix exactly when it is in
        /// `prefix..prefix_end(prefix)`.
        #[test]
        fn prefix_end_bounds_exactly_the_names_with_the_prefix(
            prefix in "[a\u{7f}\u{D7FF}\u{E000}\u{10FFFF}]{0,3}",
            name in "[a\u{7f}\u{80}\u{D7FF}\u{E000}\u{10FFFF}b]{0,5}",
        ) {
            let in_range = name.as_str() >= prefix.as_str()
                && prefix_end(&prefix).is_none_or(|end| name < end);
            prop_assert_eq!(in_range, name.starts_with(&prefix));
        }
    }

    #[test]
    fn accepts_url_like_names() {
        for ok in ["orders", "example.com/a#main", "a", "ü-ß", &"x".repeat(512)] {
            validate_name(ok).unwrap();
        }
    }

    #[test]
    fn rejects_bad_names_with_a_reason() {
        for bad in [
            "",
            " x",
            "a b",
            "tab\there",
            "nl\n",
            "\u{7f}",
            &"x".repeat(513),
        ] {
            let err = validate_name(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidName { .. }), "{bad:?}: {err}");
        }
    }

    proptest! {
        #[test]
        fn never_panics_and_long_names_are_shortened(s in ".{0,700}") {
            if let Err(Error::InvalidName { name, .. }) = validate_name(&s) {
                prop_assert!(name.len() <= 67);
            }
        }
    }
}

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

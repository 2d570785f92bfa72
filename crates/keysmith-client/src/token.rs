//! Bearer tokens: read from a string, a file or the environment, checked
//! once, never shown.

use std::path::Path;

use crate::Error;

/// A bearer token. Its trailing newline (`\n` or `\r\n`, as a file or a
/// `$(cat file)` leaves it) is stripped; any other character outside
/// visible ASCII (`!` to `~`) is refused when it is made, never sent.
/// `Debug` shows `Token(***)`: the token never reaches a message or a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token from its text.
    ///
    /// # Errors
    /// [`Error::Setup`] for an empty token or one with a character that
    /// may not appear in an HTTP header (whitespace, control characters,
    /// non-ASCII), naming the character's position, never the token.
    pub fn new(text: &str) -> Result<Token, Error> {
        let t = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(text);
        if t.is_empty() {
            return Err(Error::Setup(
                "the token is empty; give the token `keysmith access new` printed".into(),
            ));
        }
        if let Some((i, c)) = t.char_indices().find(|(_, c)| !c.is_ascii_graphic()) {
            let what = if c.is_whitespace() {
                "whitespace"
            } else if c.is_control() {
                "a control character"
            } else {
                "a non-ASCII character"
            };
            return Err(Error::Setup(format!(
                "the token holds {what} at byte {i} (of {}); a token is printable ASCII without spaces: \
                 check the token file or variable",
                t.len()
            )));
        }
        Ok(Token(t.to_owned()))
    }

    /// The token a file holds (see [`Token::new`]).
    ///
    /// # Errors
    /// [`Error::Setup`] when the file cannot be read or holds no valid
    /// token.
    pub fn from_file(path: &Path) -> Result<Token, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Setup(format!(
                "cannot read the token file {}: {e}; check the path and that this user may read it",
                path.display()
            ))
        })?;
        Token::new(&text).map_err(|e| match e {
            Error::Setup(m) => Error::Setup(format!("in the token file {}: {m}", path.display())),
            other => other,
        })
    }

    /// The token in environment variable `var`, `None` when it is not set.
    ///
    /// # Errors
    /// [`Error::Setup`] when it is set but not a valid token.
    pub fn from_env(var: &str) -> Result<Option<Token>, Error> {
        match std::env::var(var) {
            Ok(text) => Token::new(&text).map(Some).map_err(|e| match e {
                Error::Setup(m) => Error::Setup(format!("${var}: {m}")),
                other => other,
            }),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::Setup(format!(
                "${var} is not valid UTF-8; a token is printable ASCII"
            ))),
        }
    }

    pub(crate) fn bearer(&self) -> String {
        format!("Bearer {}", self.0)
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_newline_is_stripped_and_other_characters_refused() {
        assert_eq!(Token::new("abc\n").unwrap(), Token::new("abc").unwrap());
        assert_eq!(Token::new("abc\r\n").unwrap(), Token::new("abc").unwrap());
        for bad in ["", "\n", "a b", "ab\n\n", "a\tb", "ä", "a\u{7f}"] {
            let e = Token::new(bad).unwrap_err();
            assert!(matches!(e, Error::Setup(_)), "{bad:?}: {e:?}");
        }
        let e = Token::new("secret-part oops").unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
        assert_eq!(format!("{:?}", Token::new("s3cr3t").unwrap()), "Token(***)");
    }
}

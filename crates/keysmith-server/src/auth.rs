//! Bearer-token authentication.
//!
//! The token comes from `$KEYSMITH_TOKEN` or a file, never from the command
//! line (where `ps` would show it). Requests carry it as
//! `Authorization: Bearer TOKEN`; for browsers, which cannot send a bearer
//! token to a page, HTTP Basic with the token as the password (any user
//! name) is accepted too. Tokens are compared as SHA-256 digests in constant
//! time, so neither the content nor the length of the token leaks through
//! timing.

use std::fmt;
use std::path::Path;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::error::ApiError;

/// The routes that need no token: the probes.
pub const OPEN_PATHS: &[&str] = &["/healthz", "/livez", "/readyz"];

/// The environment variable holding the token.
pub const TOKEN_ENV: &str = "KEYSMITH_TOKEN";

/// A secret bearer token. Its `Debug` output does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A token from a string.
    ///
    /// # Errors
    /// An error message when the token is empty or holds whitespace or
    /// control characters (which an `Authorization` header cannot carry
    /// unchanged).
    pub fn new(token: impl Into<String>) -> Result<Token, String> {
        let t = token.into();
        if t.is_empty() {
            return Err(
                "the token is empty; use a long random string, e.g. `openssl rand -hex 32`".into(),
            );
        }
        if t.chars()
            .any(|c| c.is_whitespace() || c.is_control() || !c.is_ascii())
        {
            return Err(
                "the token must be printable ASCII without spaces; use e.g. `openssl rand -hex 32`"
                    .into(),
            );
        }
        Ok(Token(t))
    }

    /// The token in `$KEYSMITH_TOKEN`, if that is set and not empty.
    ///
    /// # Errors
    /// As [`Token::new`] for a variable that is set to an unusable value.
    pub fn from_env() -> Result<Option<Token>, String> {
        match std::env::var(TOKEN_ENV) {
            Ok(s) if s.is_empty() => Ok(None),
            Ok(s) => Token::new(s)
                .map(Some)
                .map_err(|e| format!("${TOKEN_ENV}: {e}")),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(format!("${TOKEN_ENV} is not valid UTF-8"))
            }
        }
    }

    /// The token in a file: its content, less one trailing newline (`\n` or
    /// `\r\n`).
    ///
    /// # Errors
    /// A message naming the file when it cannot be read or is empty, or as
    /// [`Token::new`].
    pub fn from_file(path: &Path) -> Result<Token, String> {
        let s = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
        let t = s
            .strip_suffix("\r\n")
            .or_else(|| s.strip_suffix('\n'))
            .unwrap_or(&s);
        Token::new(t).map_err(|e| format!("token file {}: {e}", path.display()))
    }

    pub(crate) fn digest(&self) -> [u8; 32] {
        Sha256::digest(self.0.as_bytes()).into()
    }

    /// The token itself, e.g. to put in a request.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Whether `presented` equals the token whose digest is `expected`, in
/// constant time.
pub(crate) fn matches(expected: &[u8; 32], presented: &[u8]) -> bool {
    let d: [u8; 32] = Sha256::digest(presented).into();
    d.ct_eq(expected).into()
}

/// What the `Authorization` header of a request carries.
#[derive(Debug, PartialEq, Eq)]
enum Presented {
    /// No header.
    Nothing,
    /// A header that is not `Bearer TOKEN` or `Basic BASE64`; why.
    Malformed(String),
    /// A bearer token, or the password of HTTP Basic.
    Credential(Vec<u8>),
}

fn malformed(why: &str) -> Presented {
    Presented::Malformed(format!(
        "the Authorization header is malformed: {why}; send `Authorization: Bearer TOKEN`"
    ))
}

fn presented(req: &Request) -> Presented {
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return Presented::Nothing;
    };
    let Ok(value) = value.to_str() else {
        return malformed("it holds bytes that are not visible ASCII");
    };
    let Some((scheme, rest)) = value.trim().split_once(' ') else {
        return malformed("it has no scheme and credential");
    };
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        Presented::Credential(rest.as_bytes().to_vec())
    } else if scheme.eq_ignore_ascii_case("basic") {
        let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(rest) else {
            return malformed("its Basic credential is not base64");
        };
        match raw.iter().position(|&b| b == b':') {
            Some(i) => Presented::Credential(raw[i + 1..].to_vec()),
            None => malformed("its Basic credential has no `user:password`"),
        }
    } else {
        malformed("its scheme is neither Bearer nor Basic")
    }
}

/// Middleware: with a token set, every route but [`OPEN_PATHS`] needs it.
pub(crate) async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let Some(expected) = state.shared().token else {
        return next.run(req).await;
    };
    if OPEN_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    match presented(&req) {
        Presented::Credential(p) if matches(&expected, &p) => next.run(req).await,
        Presented::Credential(_) => ApiError::unauthorized("the token is wrong").into_response(),
        Presented::Malformed(why) => ApiError::unauthorized(why).into_response(),
        Presented::Nothing => {
            let mut res = ApiError::unauthorized(
                "this server needs a token: send `Authorization: Bearer TOKEN`",
            )
            .into_response();
            // Browsers opening the status page get a password prompt.
            if req.uri().path() == "/" {
                res.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static(
                        "Basic realm=\"keysmith (password: the token)\"",
                    ),
                );
            }
            res
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_match() {
        let t = Token::new("s3cret").unwrap();
        let d = t.digest();
        assert!(matches(&d, b"s3cret"));
        assert!(!matches(&d, b"s3cre"));
        assert!(!matches(&d, b"s3cret "));
        assert!(!matches(&d, b""));
    }

    #[test]
    fn token_rules() {
        assert!(Token::new("").is_err());
        assert!(Token::new("a b").is_err());
        assert!(Token::new("ok-token_1").is_ok());
        assert_eq!(
            format!("{:?}", Token::new("abc").unwrap()),
            "Token(<redacted>)"
        );
    }

    #[test]
    fn token_file_trims_one_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "abc\n").unwrap();
        assert_eq!(Token::from_file(&p).unwrap().expose(), "abc");
        std::fs::write(&p, "abc\r\n").unwrap();
        assert_eq!(Token::from_file(&p).unwrap().expose(), "abc");
        std::fs::write(&p, "").unwrap();
        assert!(Token::from_file(&p).unwrap_err().contains("empty"));
        std::fs::write(&p, "\n").unwrap();
        assert!(Token::from_file(&p).unwrap_err().contains("empty"));
        assert!(
            Token::from_file(&dir.path().join("missing"))
                .unwrap_err()
                .contains("cannot read")
        );
    }
}

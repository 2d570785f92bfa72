//! The client's errors, by what the caller can do.

use std::time::Duration;

/// What went wrong. Messages are the server's (`error.message`) or say
/// what to fix; none holds a token or a lease token.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client cannot be used as configured: a bad token, CA file,
    /// certificate or key, a URL that is not `http(s)://`, or a server
    /// certificate refused (or our client certificate refused by it).
    /// Never retried.
    #[error("{0}")]
    Setup(String),
    /// 401: no token, or a token the server does not know. Never retried.
    #[error("unauthorized (401): {0}")]
    Unauthorized(String),
    /// 403: the token's principal lacks the grant the call needs
    /// (`use`, `read` or `admin` on the name). Never retried.
    #[error("forbidden (403): {0}")]
    Forbidden(String),
    /// 404: no such sequence, pool, group or id.
    #[error("{message}")]
    NotFound {
        /// The server's message.
        message: String,
        /// Existing names that look alike.
        similar: Vec<String>,
    },
    /// 409: the object exists already, is exhausted, or is of another
    /// kind (`code` says which).
    #[error("{message}")]
    Conflict {
        /// The server's code (`already_exists`, `exhausted`, `wrong_kind`, ...).
        code: String,
        /// The server's message.
        message: String,
    },
    /// 410: the object was dropped after the lease, ticket or handle was
    /// taken; nothing was written.
    #[error("dropped (410): {0}")]
    Dropped(String),
    /// 429: too many requests; the server's `Retry-After` did not fit in
    /// the call's deadline.
    #[error("rate limited (429): {message}")]
    RateLimited {
        /// The server's message.
        message: String,
        /// How long the server asked to wait.
        retry_after: Option<Duration>,
    },
    /// No server answered within the call's deadline (connection refused,
    /// timeouts, 503s): the last reason.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The handle was closed; open another.
    #[error("the sequence handle for {0:?} is closed; open a new one with Client::sequence")]
    Closed(String),
    /// Any other answer: 400 (bad input), 413, 500 ...
    #[error("{message} ({status} {code})")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The server's code.
        code: String,
        /// The server's message.
        message: String,
    },
}

impl Error {
    /// Whether retrying the same call elsewhere or later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable(_) | Error::RateLimited { .. })
    }

    /// The server's code for a 409 or another error answer.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Conflict { code, .. } | Error::Server { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// The client's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! Errors as HTTP responses: `{"error": {"code": ..., "message": ...}}`.
//!
//! [`ApiError::from`] on a [`keysmith::Error`] is the one place where library
//! errors become statuses.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Seconds a client is asked to wait (`Retry-After`) after a 503.
pub const RETRY_AFTER_SECS: u32 = 1;

/// The header of a 421 `not_leader` that names the leader's address (also
/// in the body's `error.leader`): send the same request there.
pub const LEADER_HEADER: &str = "keysmith-leader";

/// The hint of a 404 `no_route` for a path that names a sequence, pool or
/// worker group with a `/` in it: the name is one path segment.
fn slash_hint(path: &str) -> String {
    let Some((kind, rest)) = ["/v1/sequences/", "/v1/pools/", "/v1/workers/"]
        .iter()
        .find_map(|p| path.strip_prefix(p).map(|rest| (*p, rest)))
    else {
        return String::new();
    };
    match rest.split_once('/') {
        Some((first, more)) if !first.is_empty() && !more.is_empty() => format!(
            "a name with `/` in it is one path segment, written with %2F: {kind}{first}%2F{more} \
             (the clients and `keysmith --server` encode names); "
        ),
        _ => String::new(),
    }
}

/// An error response: a status, a stable machine-readable code, a message
/// that says what was wrong and what to do, and for unknown names the
/// existing names that look alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code, e.g. `not_found`, `invalid_argument`, `contention`.
    pub code: &'static str,
    /// What went wrong and what to do.
    pub message: String,
    /// Existing names that look like the one asked for (404s only).
    pub similar: Vec<String>,
    /// The leader's address (421 `not_leader` only).
    pub leader: Option<String>,
}

/// The body of every error response.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub(crate) struct ErrorBody<'a> {
    error: Inner<'a>,
}

/// What went wrong.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = ErrorDetail)]
pub(crate) struct Inner<'a> {
    /// A stable, machine-readable code.
    #[schema(examples(
        "not_found",
        "already_exists",
        "invalid_name",
        "too_large",
        "contention"
    ))]
    code: &'a str,
    /// What was wrong and what to do.
    message: &'a str,
    /// Existing names that look alike (404 only).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    similar: &'a [String],
    /// The address of the leader of a leader-ordered sequence (421
    /// `not_leader` only; also in the `Keysmith-Leader` header): send the
    /// same request there.
    #[serde(skip_serializing_if = "Option::is_none")]
    leader: Option<&'a str>,
}

impl ApiError {
    /// An error with no "similar names".
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            similar: Vec::new(),
            leader: None,
        }
    }

    /// 400: the request is malformed (bad JSON, bad query parameter...).
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 413: the request asks for too much (body or count over the limit).
    pub fn too_large(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// 401: no token, or the wrong one.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403: the caller is known but lacks the grant.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 429: the caller is over its request rate (with `Retry-After`).
    pub fn too_many(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
    }

    /// 404 for a path that names no route.
    pub fn no_route(path: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no_route",
            format!(
                "no route {path:?}; {}GET /openapi.json lists the routes",
                slash_hint(path)
            ),
        )
    }

    /// 503: the request took longer than the server's request timeout.
    pub fn timeout(limit: std::time::Duration) -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!(
                "the request took longer than the server's limit of {} ms; retry later (a create or drop may still take effect: look before retrying)",
                limit.as_millis()
            ),
        )
    }
}

impl From<keysmith::Error> for ApiError {
    fn from(e: keysmith::Error) -> Self {
        use keysmith::Error as E;
        let mut message = e.to_string();
        // The library names the operation; the server names its route.
        if let Some(a) = e.fence_advice() {
            let skip = a.min_skip.map_or_else(|| "N".to_owned(), |s| s.to_string());
            message.push_str(&format!(
                " (POST /v1/fence {{\"name\":{},\"skip\":{skip}}}, admin on the name)",
                serde_json::Value::from(a.name)
            ));
        }
        let (status, code) = match e {
            E::NotFound {
                kind,
                name,
                similar,
            } => {
                // "Did you mean" names only what the caller may read, in the
                // message as in `similar` (converted inside the handler, so
                // in the caller's scope).
                let similar: Vec<String> = similar
                    .iter()
                    .filter(|n| crate::access::visible(n))
                    .cloned()
                    .collect();
                let message = E::NotFound {
                    kind,
                    name: name.clone(),
                    similar: similar.clone(),
                }
                .to_string();
                return ApiError {
                    status: StatusCode::NOT_FOUND,
                    code: "not_found",
                    message,
                    similar,
                    leader: None,
                };
            }
            E::AlreadyExists { .. } => (StatusCode::CONFLICT, "already_exists"),
            E::Exhausted { .. } => (StatusCode::CONFLICT, "exhausted"),
            E::InvalidName { .. } => (StatusCode::BAD_REQUEST, "invalid_name"),
            E::InvalidArgument(_) => (StatusCode::BAD_REQUEST, "invalid_argument"),
            E::Contention { .. } => (StatusCode::SERVICE_UNAVAILABLE, "contention"),
            E::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            // A handle closes only when its sequence is dropped or the
            // server shuts down; a retry gets a fresh handle or another server.
            E::Closed { .. } => (StatusCode::SERVICE_UNAVAILABLE, "closed"),
            E::Corrupt(_) => (StatusCode::INTERNAL_SERVER_ERROR, "corrupt"),
            // Every worker id held, or the clock too far behind: later may do.
            E::IdsUnavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "ids_unavailable"),
            // The ticket no longer holds its number: nothing changed.
            E::TicketRefused(_) => (StatusCode::CONFLICT, "ticket_refused"),
            // next on a gap-free sequence, tickets on an ordinary one...
            E::WrongKind(_) => (StatusCode::CONFLICT, "wrong_kind"),
            // A worker lease expired or was taken over: lease anew.
            E::LeaseRefused(_) => (StatusCode::CONFLICT, "lease_refused"),
            // A lease, ticket or handle of an earlier life of the name:
            // nothing written; take a new one.
            E::Dropped { .. } => (StatusCode::GONE, "dropped"),
            E::StoreWentBack { .. } => (StatusCode::SERVICE_UNAVAILABLE, "store_went_back"),
            E::FenceNeeded { .. } => (StatusCode::SERVICE_UNAVAILABLE, "fence_needed"),
            // Another server leads: the caller goes there (clients follow).
            E::NotLeader {
                leader: Some(leader),
                ..
            } => {
                return ApiError {
                    leader: Some(leader),
                    ..ApiError::new(StatusCode::MISDIRECTED_REQUEST, "not_leader", message)
                };
            }
            // A leader without an address, or none right now: later may do.
            E::NotLeader { leader: None, .. } => (StatusCode::SERVICE_UNAVAILABLE, "no_leader"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(mut self) -> Response {
        // "Did you mean" shows only names the caller may read.
        self.similar.retain(|n| crate::access::visible(n));
        let body = serde_json::to_vec(&ErrorBody {
            error: Inner {
                code: self.code,
                message: &self.message,
                similar: &self.similar,
                leader: self.leader.as_deref(),
            },
        })
        .unwrap_or_else(|_| b"{\"error\":{\"code\":\"internal\",\"message\":\"\"}}".to_vec());
        let mut res = (self.status, body).into_response();
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if self.status == StatusCode::SERVICE_UNAVAILABLE
            || self.status == StatusCode::TOO_MANY_REQUESTS
        {
            h.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        if let Some(v) = self
            .leader
            .as_deref()
            .and_then(|l| HeaderValue::from_str(l).ok())
        {
            h.insert(LEADER_HEADER, v);
        }
        if self.status == StatusCode::UNAUTHORIZED {
            h.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"keysmith\""),
            );
        }
        // Lets the metrics layer count errors by code without parsing bodies.
        res.extensions_mut().insert(ErrorCode(self.code));
        res
    }
}

/// The code of an error response, left in the response's extensions.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCode(pub &'static str);

/// What handlers return.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_errors_map_to_statuses() {
        use keysmith::Error as E;
        let cases = [
            (
                E::NotFound {
                    kind: "sequence",
                    name: "a".into(),
                    similar: vec!["b".into()],
                },
                404,
            ),
            (
                E::AlreadyExists {
                    kind: "sequence",
                    name: "a".into(),
                },
                409,
            ),
            (
                E::Exhausted {
                    name: "a".into(),
                    max: 3,
                },
                409,
            ),
            (
                E::InvalidName {
                    name: "a b".into(),
                    reason: "space".into(),
                },
                400,
            ),
            (E::InvalidArgument("x".into()), 400),
            (
                E::Contention {
                    name: "a".into(),
                    attempts: 3,
                },
                503,
            ),
            (E::Unavailable("down".into()), 503),
            (E::Closed { name: "a".into() }, 503),
            (E::IdsUnavailable("all taken".into()), 503),
            (E::Corrupt("bad".into()), 500),
        ];
        for (e, status) in cases {
            let api = ApiError::from(e.clone());
            assert_eq!(api.status.as_u16(), status, "{e:?}");
            assert_eq!(api.message, e.to_string());
        }
    }

    #[test]
    fn unavailable_carries_retry_after() {
        let res = ApiError::from(keysmith::Error::Unavailable("x".into())).into_response();
        assert_eq!(res.headers()[header::RETRY_AFTER], "1");
        let res = ApiError::bad_request("x").into_response();
        assert!(res.headers().get(header::RETRY_AFTER).is_none());
    }
}

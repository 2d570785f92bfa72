//! Request ids and the span every request runs in.
//!
//! Each request gets an id: the client's `x-request-id` when it is a short
//! token (at most [`MAX_CLIENT_ID`] bytes of `A-Z a-z 0-9 - _ . :`), else one
//! made here, unique across servers (a random prefix per process and a
//! counter). The answer carries it back in `x-request-id`. Every log line
//! written while the request runs is inside a `request` span with the id, the
//! method and the path, so it shows up as a field of each line (in JSON logs,
//! `span.request_id`). One line per finished request is logged at `debug`
//! (target `keysmith_server::request_log`), one per failed request (5xx) at `warn`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderValue, Response};
use axum::middleware::Next;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::request_id::{MakeRequestId, RequestId};
use tracing::Span;

/// The longest `x-request-id` a client may choose; a longer one (or one with
/// other characters) is replaced by the server's own.
pub const MAX_CLIENT_ID: usize = 64;

/// Makes `PREFIX-N` ids: a random prefix per process, then a counter.
#[derive(Clone, Debug)]
pub(crate) struct Ids {
    prefix: u32,
    next: std::sync::Arc<AtomicU64>,
}

impl Ids {
    pub(crate) fn new() -> Ids {
        Ids {
            prefix: rand::random(),
            next: std::sync::Arc::new(AtomicU64::new(1)),
        }
    }
}

impl MakeRequestId for Ids {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("{:08x}-{n}", self.prefix);
        HeaderValue::from_str(&id).ok().map(RequestId::new)
    }
}

/// Whether a client's id is kept: short, and only characters that need no
/// escaping in a log line.
pub(crate) fn acceptable(id: &HeaderValue) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_CLIENT_ID
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b':'))
}

/// Drops a client's `x-request-id` that is not [`acceptable`], so that the
/// server makes its own.
pub(crate) async fn screen_client_id(mut req: Request, next: Next) -> axum::response::Response {
    if let Some(id) = req.headers().get("x-request-id")
        && !acceptable(id)
    {
        req.headers_mut().remove("x-request-id");
    }
    next.run(req).await
}

/// The `request` span: the id the layer before set, the method and the path.
pub(crate) fn span<B>(req: &axum::http::Request<B>) -> Span {
    let id = req
        .extensions()
        .get::<RequestId>()
        .and_then(|id| id.header_value().to_str().ok())
        .unwrap_or("-");
    tracing::info_span!(
        "request",
        request_id = %id,
        method = %req.method(),
        path = %loggable_path(req.uri().path()),
    )
}

/// The path as logged: a lease token or ticket id in it is replaced by its
/// route parameter (`/v1/workers/g/lease/{token}/renew`), so that no log
/// holds a credential.
pub(crate) fn loggable_path(path: &str) -> std::borrow::Cow<'_, str> {
    let mut segs: Vec<&str> = path.split('/').collect();
    // "", "v1", kind, name, "lease" | "tickets", SECRET, ...: whatever
    // follows the secret (a verb, a slash, nothing), the secret goes.
    let secret = match segs.as_slice() {
        ["", "v1", "workers", _, "lease", _, ..] => "{token}",
        ["", "v1", "sequences", _, "tickets", _, ..] => "{ticket}",
        _ => return std::borrow::Cow::Borrowed(path),
    };
    if segs[5].is_empty() {
        return std::borrow::Cow::Borrowed(path);
    }
    segs[5] = secret;
    std::borrow::Cow::Owned(segs.join("/"))
}

/// One `debug` line per answered request.
pub(crate) fn on_response<B>(res: &Response<B>, latency: Duration, _: &Span) {
    tracing::debug!(
        status = res.status().as_u16(),
        latency_us = latency.as_micros() as u64,
        "answered"
    );
}

/// One `warn` line per failed request (a 5xx, or a connection error).
pub(crate) fn on_failure(class: ServerErrorsFailureClass, latency: Duration, _: &Span) {
    tracing::warn!(
        failure = %class,
        latency_us = latency.as_micros() as u64,
        "request failed"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_screened() {
        for ok in ["abc", "a-b_c.d:e", &"x".repeat(MAX_CLIENT_ID)] {
            assert!(acceptable(&HeaderValue::from_str(ok).unwrap()), "{ok}");
        }
        for bad in ["", "a b", "a\"b", "{x}", &"x".repeat(MAX_CLIENT_ID + 1)] {
            assert!(!acceptable(&HeaderValue::from_str(bad).unwrap()), "{bad}");
        }
    }

    #[test]
    fn secrets_stay_out_of_logged_paths() {
        assert_eq!(
            loggable_path("/v1/workers/g/lease/SECRET.sig/renew"),
            "/v1/workers/g/lease/{token}/renew"
        );
        assert_eq!(
            loggable_path("/v1/sequences/inv/tickets/T0K/commit"),
            "/v1/sequences/inv/tickets/{ticket}/commit"
        );
        assert_eq!(
            loggable_path("/v1/workers/g/lease/SECRET"),
            "/v1/workers/g/lease/{token}"
        );
        assert_eq!(
            loggable_path("/v1/workers/g/lease/SECRET/renew/"),
            "/v1/workers/g/lease/{token}/renew/"
        );
        for kept in [
            "/v1/sequences/tickets/next",
            "/v1/workers/g/lease",
            "/v1/workers/g/lease/",
            "/",
        ] {
            assert_eq!(loggable_path(kept), kept);
        }
    }

    #[test]
    fn made_ids_differ() {
        let mut ids = Ids::new();
        let req = axum::http::Request::new(());
        let a = ids.make_request_id(&req).unwrap();
        let b = ids.make_request_id(&req).unwrap();
        assert_ne!(a.header_value(), b.header_value());
        assert!(acceptable(a.header_value()));
    }
}

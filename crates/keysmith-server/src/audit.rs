//! The audit trail: one JSON line per admin action, access reload and
//! refused request.
//!
//! Each line goes to the log target [`TARGET`] (at `info`) and, with
//! `--audit-log PATH`, is appended to that file, written whole with one
//! `write` call. A line holds the time (RFC 3339, UTC), the event, the
//! principal, the peer address, the request id, the method and the route
//! *template* (never the path: lease tokens and ticket ids stay out of the
//! trail), the action and the object, the status, and for admin actions the
//! request's body and the object's state before and after. Refusals (401,
//! 403, 429) are capped at [`REFUSALS_PER_SECOND`] lines a second, those of
//! unknown callers (401) and those of known principals (403, 429) each on
//! their own, so a flood of bad tokens cannot hide a principal probing what
//! it may not do; the next line written of each says how many were left out
//! (`suppressed`).

use std::io::Write;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use serde::Serialize;

use crate::access::{Action, ObjectKind};

/// The log target of audit lines.
pub const TARGET: &str = "keysmith::audit";

/// The most refusal lines written a second (a burst of twice as many).
pub const REFUSALS_PER_SECOND: u32 = 20;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// An admin action was answered (with any status).
    Admin,
    /// A request was refused: no or a wrong credential, no grant, over its rate.
    Refused,
    /// The access file was read again (or could not be).
    AccessReload,
}

/// The object of an audit line.
#[derive(Debug, Clone, Serialize)]
pub struct Object {
    /// What kind of object (its word on the wire, e.g. `"sequence"`).
    pub kind: ObjectKind,
    /// Its name; `*` for every name (`fence --all`); absent for none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Object {
    /// An object of `kind` named `name`.
    pub fn new(kind: ObjectKind, name: Option<String>) -> Object {
        Object { kind, name }
    }
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// When, RFC 3339 in UTC (filled in when written).
    pub time: String,
    /// What happened.
    pub event: Event,
    /// Who: the principal's name, or `null` when the request named none.
    pub principal: Option<String>,
    /// The peer's address.
    pub peer: Option<String>,
    /// The request's id (`x-request-id`).
    pub request_id: Option<String>,
    /// The HTTP method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The route template, e.g. `/v1/sequences/{name}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The action the route needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// What it acted on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Object>,
    /// The answer's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why a request was refused, or a reload failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The request's JSON body (admin actions that have one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
    /// The object before (admin actions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<serde_json::Value>,
    /// The object after (admin actions; `null` once dropped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<serde_json::Value>,
    /// Refusal lines left out since the last one written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<u64>,
}

impl Line {
    /// A line of `event` with nothing else filled in.
    pub fn new(event: Event) -> Line {
        Line {
            time: String::new(),
            event,
            principal: None,
            peer: None,
            request_id: None,
            method: None,
            route: None,
            action: None,
            object: None,
            status: None,
            reason: None,
            request: None,
            before: None,
            after: None,
            suppressed: None,
        }
    }

    /// The peer and request id of a request.
    pub(crate) fn of_request(
        mut self,
        method: &axum::http::Method,
        extensions: &axum::http::Extensions,
    ) -> Line {
        self.peer = extensions
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
            .map(|c| c.0.to_string());
        self.request_id = extensions
            .get::<tower_http::request_id::RequestId>()
            .and_then(|id| id.header_value().to_str().ok())
            .map(str::to_owned);
        self.method = Some(method.to_string());
        self
    }
}

/// Where audit lines go.
#[derive(Debug)]
pub(crate) struct Audit {
    file: Option<(PathBuf, Mutex<std::fs::File>)>,
    /// Refusals of requests that named no principal, and what was left out.
    unknown: (DefaultDirectRateLimiter, AtomicU64),
    /// Refusals of known principals, and what was left out.
    known: (DefaultDirectRateLimiter, AtomicU64),
}

impl Audit {
    /// An audit trail to the log, and to `path` if given (created if
    /// missing, appended to).
    ///
    /// # Errors
    /// A message naming the file when it cannot be opened for appending.
    pub(crate) fn open(path: Option<&Path>) -> Result<Audit, String> {
        let file = match path {
            None => None,
            Some(p) => {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| {
                        format!(
                            "cannot open the audit log {} for appending: {e}; check the directory exists and is writable",
                            p.display()
                        )
                    })?;
                Some((p.to_owned(), Mutex::new(f)))
            }
        };
        let per_second = NonZeroU32::new(REFUSALS_PER_SECOND).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(2 * REFUSALS_PER_SECOND).unwrap_or(NonZeroU32::MIN);
        let bucket = || {
            (
                RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst)),
                AtomicU64::new(0),
            )
        };
        Ok(Audit {
            file,
            unknown: bucket(),
            known: bucket(),
        })
    }

    /// Writes `line` (a refusal only while under [`REFUSALS_PER_SECOND`]).
    pub(crate) fn write(&self, mut line: Line) {
        if line.event == Event::Refused {
            let (limiter, suppressed) = match line.principal {
                None => &self.unknown,
                Some(_) => &self.known,
            };
            if limiter.check().is_err() {
                suppressed.fetch_add(1, Relaxed);
                return;
            }
            let n = suppressed.swap(0, Relaxed);
            line.suppressed = (n > 0).then_some(n);
        }
        line.time = now_rfc3339();
        let text = match serde_json::to_string(&line) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(target: TARGET, "cannot write an audit line: {e}");
                return;
            }
        };
        tracing::info!(target: TARGET, "{text}");
        if let Some((path, file)) = &self.file {
            let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
            let mut bytes = text.into_bytes();
            bytes.push(b'\n');
            if let Err(e) = f.write_all(&bytes) {
                tracing::error!(
                    target: TARGET,
                    "cannot append to the audit log {}: {e}",
                    path.display()
                );
            }
        }
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

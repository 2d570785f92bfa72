//! The audit trail: one JSON line per admin action, access reload and
//! refused request.
//!
//! Each line goes to the log target [`TARGET`] (at `info`) and, with
//! `--audit-log PATH`, is appended to that file, written whole with one
//! `write` call. A line holds the time (RFC 3339, UTC), the event, the
//! principal, the peer address, the request id, the method and the route
//! *template* (never the path: lease tokens and ticket ids stay out of the
//! trail), the action and the object, the status, and for admin actions the
//! request's body and the object's state before and after.
//!
//! A line is bounded whatever the request: a body is kept whole only up to
//! [`MAX_BODY`] bytes of JSON, else as its first [`MAX_BODY`] bytes
//! (`excerpt`), its length (`bytes`) and its SHA-256 (`sha256`, hex); the
//! object's name, and any text in a body or a snapshot, is cut at
//! [`MAX_NAME`] bytes (a cut name's length and SHA-256 go into
//! `name_bytes` and `name_sha256`; a cut text ends with its length and
//! hash); a reason at [`MAX_REASON`] bytes.
//!
//! Refusals (401, 403, 429) and admin lines that changed nothing (a 4xx
//! answer) are capped at [`REFUSALS_PER_SECOND`] lines a second (a burst of
//! twice as many) per principal, and for callers that named none (401,
//! cross-origin 403) in one budget of their own, so a flood of bad tokens,
//! or one team's flood of 403s, cannot hide another principal's refusals;
//! the next line written of a budget says how many were left out
//! (`suppressed`).
//!
//! `--audit-log` is opened again on SIGHUP ([`crate::AppState::reopen_audit_log`]), so that
//! logrotate can rename it away and have a new file written at the path.
//! A line that cannot be appended (a full disk, a file made unwritable) is
//! counted in `keysmith_audit_write_errors_total` and warned about at most
//! once per [`WARN_EVERY`]; the request is answered all the same.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use serde::Serialize;

use crate::access::{Action, ObjectKind};

/// The log target of audit lines.
pub const TARGET: &str = "keysmith::audit";

/// The most refusal lines written a second per budget (a burst of twice
/// as many).
pub const REFUSALS_PER_SECOND: u32 = 20;

/// The most bytes of a request body kept in a line.
pub const MAX_BODY: usize = 256;

/// The most bytes of a name (or of any text of a body or snapshot) kept in
/// a line.
pub const MAX_NAME: usize = 256;

/// The most bytes of a reason kept in a line.
pub const MAX_REASON: usize = 1024;

/// At most one warning about failed writes to the audit log per this.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// Principals with budgets of their own; past it, one more shares one.
const MAX_BUDGETS: usize = 10_000;

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
    /// The object's name's length in bytes, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_bytes: Option<usize>,
    /// The object's name's SHA-256 (hex), when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_sha256: Option<String>,
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
            name_bytes: None,
            name_sha256: None,
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

/// A request body as an audit line keeps it: the JSON itself when it is
/// JSON of at most [`MAX_BODY`] bytes, else `{"excerpt", "bytes",
/// "sha256"}`: its first bytes (as text, cut at a character), its length
/// and its SHA-256 in hex. `None` for an empty body.
pub fn body(bytes: &[u8]) -> Option<serde_json::Value> {
    if bytes.is_empty() {
        return None;
    }
    if bytes.len() <= MAX_BODY
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes)
    {
        return Some(v);
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_BODY)]);
    Some(serde_json::json!({
        "excerpt": cut_at(&head, MAX_BODY),
        "bytes": bytes.len(),
        "sha256": sha256_hex(bytes),
    }))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `text`'s first `max` bytes or fewer, ending at a character boundary.
fn cut_at(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text`, or its first `max` bytes followed by its length and hash.
fn cap_text(text: &mut String, max: usize) {
    if text.len() > max {
        let cut = format!(
            "{}… (cut: {} bytes, sha256 {})",
            cut_at(text, max),
            text.len(),
            sha256_hex(text.as_bytes())
        );
        *text = cut;
    }
}

/// Every text in `v` capped at [`MAX_NAME`] bytes.
fn cap_texts(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => cap_text(s, MAX_NAME),
        serde_json::Value::Array(a) => a.iter_mut().for_each(cap_texts),
        serde_json::Value::Object(o) => o.values_mut().for_each(cap_texts),
        _ => {}
    }
}

/// One budget of refusal lines, and what it left out.
#[derive(Debug)]
struct Budget {
    limiter: DefaultDirectRateLimiter,
    suppressed: AtomicU64,
}

impl Budget {
    fn new() -> Budget {
        let per_second = NonZeroU32::new(REFUSALS_PER_SECOND).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(2 * REFUSALS_PER_SECOND).unwrap_or(NonZeroU32::MIN);
        Budget {
            limiter: RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst)),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `None` when the line is left out; else how many were before it.
    fn take(&self) -> Option<u64> {
        if self.limiter.check().is_err() {
            self.suppressed.fetch_add(1, Relaxed);
            return None;
        }
        Some(self.suppressed.swap(0, Relaxed))
    }
}

/// Failed writes to the audit log, and when they were last warned about.
#[derive(Debug)]
struct WriteErrors {
    total: prometheus::IntCounter,
    registry: prometheus::Registry,
    /// When the last warning was logged, and the failures since.
    warned: Mutex<(Option<Instant>, u64)>,
}

/// Where audit lines go.
#[derive(Debug)]
pub(crate) struct Audit {
    file: Option<(PathBuf, Mutex<std::fs::File>)>,
    /// Refusals of requests that named no principal.
    unknown: Budget,
    /// Refusals per known principal.
    known: Mutex<HashMap<String, Arc<Budget>>>,
    /// Principals past [`MAX_BUDGETS`] share this.
    overflow: Budget,
    errors: WriteErrors,
}

fn open_append(p: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| {
            format!(
                "cannot open the audit log {} for appending: {e}; check the directory exists and is writable",
                p.display()
            )
        })
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
            Some(p) => Some((p.to_owned(), Mutex::new(open_append(p)?))),
        };
        let total = prometheus::IntCounter::new(
            "keysmith_audit_write_errors_total",
            "Audit lines that could not be appended to the audit log (a full disk, an unwritable file); their requests were answered all the same.",
        )
        .map_err(|e| e.to_string())?;
        let registry = prometheus::Registry::new();
        registry
            .register(Box::new(total.clone()))
            .map_err(|e| e.to_string())?;
        Ok(Audit {
            file,
            unknown: Budget::new(),
            known: Mutex::default(),
            overflow: Budget::new(),
            errors: WriteErrors {
                total,
                registry,
                warned: Mutex::new((None, 0)),
            },
        })
    }

    /// Opens the audit log's path again (after logrotate renamed it): lines
    /// go to the file now at the path, created if missing. When it cannot
    /// be opened, lines keep going where they went, and the error is logged.
    pub(crate) fn reopen(&self) {
        let Some((path, file)) = &self.file else {
            return;
        };
        match open_append(path) {
            Ok(f) => {
                *file.lock().unwrap_or_else(|p| p.into_inner()) = f;
                tracing::info!(target: TARGET, "reopened the audit log {}", path.display());
            }
            Err(e) => {
                tracing::warn!(target: TARGET, "{e}; audit lines still go to the file opened before");
            }
        }
    }

    /// `keysmith_audit_write_errors_total` in the text exposition format.
    pub(crate) fn metrics_text(&self) -> String {
        use prometheus::Encoder;
        let mut buf = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&self.errors.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }

    /// The refusal budget of `principal`.
    fn budget_of(&self, principal: &str, f: impl FnOnce(&Budget) -> Option<u64>) -> Option<u64> {
        let b = {
            let mut m = self.known.lock().unwrap_or_else(|p| p.into_inner());
            match m.get(principal) {
                Some(b) => Some(b.clone()),
                None if m.len() < MAX_BUDGETS => {
                    let b = Arc::new(Budget::new());
                    m.insert(principal.to_owned(), b.clone());
                    Some(b)
                }
                None => None,
            }
        };
        match b {
            Some(b) => f(&b),
            None => f(&self.overflow),
        }
    }

    /// Writes `line` (a refusal, or an admin line answered with a 4xx, only
    /// while its budget lasts), with its body, names and reason capped.
    pub(crate) fn write(&self, mut line: Line) {
        let budgeted = line.event == Event::Refused
            || (line.event == Event::Admin && line.status.is_some_and(|s| (400..500).contains(&s)));
        if budgeted {
            let taken = match &line.principal {
                None => self.unknown.take(),
                Some(p) => self.budget_of(p, Budget::take),
            };
            let Some(n) = taken else { return };
            line.suppressed = (n > 0).then_some(n);
        }
        if let Some(o) = &mut line.object
            && let Some(name) = &mut o.name
            && name.len() > MAX_NAME
        {
            line.name_bytes = Some(name.len());
            line.name_sha256 = Some(sha256_hex(name.as_bytes()));
            *name = cut_at(name, MAX_NAME).to_owned();
        }
        if let Some(r) = &mut line.reason {
            cap_text(r, MAX_REASON);
        }
        for v in [&mut line.request, &mut line.before, &mut line.after]
            .into_iter()
            .flatten()
        {
            cap_texts(v);
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
            let mut bytes = text.into_bytes();
            bytes.push(b'\n');
            let written = {
                let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
                f.write_all(&bytes)
            };
            if let Err(e) = written {
                self.write_failed(path, &e);
            }
        }
    }

    /// Counts a failed write; warns at most once per [`WARN_EVERY`].
    fn write_failed(&self, path: &Path, e: &std::io::Error) {
        self.errors.total.inc();
        let mut w = self.errors.warned.lock().unwrap_or_else(|p| p.into_inner());
        w.1 += 1;
        if w.0.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            tracing::warn!(
                target: TARGET,
                failed = w.1,
                "cannot append to the audit log {}: {e}; still serving (lines failed since the last warning: {}; see keysmith_audit_write_errors_total)",
                path.display(),
                w.1
            );
            *w = (Some(Instant::now()), 0);
        }
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_and_texts_are_capped() {
        assert_eq!(body(b""), None);
        assert_eq!(
            body(br#"{"name":"a"}"#),
            Some(serde_json::json!({"name": "a"}))
        );
        let big = format!(r#"{{"name":"{}"}}"#, "é".repeat(300));
        let v = body(big.as_bytes()).unwrap();
        assert_eq!(v["bytes"], big.len());
        assert_eq!(v["sha256"], sha256_hex(big.as_bytes()));
        let excerpt = v["excerpt"].as_str().unwrap();
        assert!(excerpt.len() <= MAX_BODY && big.starts_with(excerpt));
        // Not JSON: kept the same way.
        assert_eq!(body(b"not json").unwrap()["bytes"], 8);
        let mut t = "x".repeat(MAX_NAME + 1);
        cap_text(&mut t, MAX_NAME);
        assert!(
            t.starts_with(&"x".repeat(MAX_NAME)) && t.contains("257 bytes"),
            "{t}"
        );
        let mut short = "ok".to_owned();
        cap_text(&mut short, MAX_NAME);
        assert_eq!(short, "ok");
    }

    #[test]
    fn each_principal_has_its_own_budget() {
        let a = Audit::open(None).unwrap();
        let taken = |p: &str| a.budget_of(p, Budget::take).is_some();
        // Alpha spends its budget (a burst of 40, then 20 a second)...
        let mut spent = false;
        for _ in 0..100_000 {
            if !taken("alpha") {
                spent = true;
                break;
            }
        }
        assert!(spent);
        // ...and beta's and the unknown callers' are whole.
        assert!(taken("beta"));
        assert!(a.unknown.take().is_some());
    }
}

//! Authentication and authorization: the two middlewares of access control.
//!
//! Tokens come from `$KEYSMITH_TOKEN`, a file, or the digests of an access
//! file ([`crate::access`]), never from the command line (where `ps` would
//! show them). Requests carry one as `Authorization: Bearer TOKEN`; HTTP
//! Basic with the token as the password (any user name) is accepted too, but
//! the server never asks for it (a 401 carries `WWW-Authenticate: Bearer`
//! only, so no browser prompts for and caches a credential that any page
//! could then make it send), and a Basic password shorter than
//! [`MIN_BASIC_PASSWORD`] bytes is refused without a lookup: it cannot be a
//! token. A presented token is looked up by its SHA-256 digest, so the
//! server holds no token, and timing can tell at most something about a
//! digest, never the token.
//!
//! Each client address has a budget of failed authentications
//! ([`crate::per_ip::FailedAuth`]): past it, its requests get a 429 with
//! `Retry-After` until its window ends, without a lookup; the first such
//! refusal of a window is audited.

use std::fmt;
use std::path::Path;

use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::AppState;
use crate::access::{self, Action, Caller, Need, ObjectKind, Principal, Requirement, Target};
use crate::audit;
use crate::error::ApiError;

/// The routes that need no token: the probes that touch nothing but the
/// process. `/healthz`, which pings the store, needs a principal when the
/// server has tokens.
pub const OPEN_PATHS: [&str; 2] = ["/livez", "/readyz"];

/// The first of [`OPEN_PATHS`]. Deprecated: use [`OPEN_PATHS`].
#[doc(hidden)]
pub const OPEN_PATH: &str = "/livez";

/// The shortest Basic password looked up: tokens are long and random
/// (`keysmith access new` makes 256-bit ones), so a shorter one is a guess.
pub const MIN_BASIC_PASSWORD: usize = 16;

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

/// What the `Authorization` header of a request carries.
#[derive(Debug, PartialEq, Eq)]
enum Presented {
    /// No header.
    Nothing,
    /// A header that is not `Bearer TOKEN` or `Basic BASE64`; why.
    Malformed(String),
    /// A bearer token, or the password of HTTP Basic.
    Credential(Vec<u8>),
    /// A Basic password too short to be a token.
    ShortBasic,
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
            Some(i) if raw.len() - i - 1 < MIN_BASIC_PASSWORD => Presented::ShortBasic,
            Some(i) => Presented::Credential(raw[i + 1..].to_vec()),
            None => malformed("its Basic credential has no `user:password`"),
        }
    } else {
        malformed("its scheme is neither Bearer nor Basic")
    }
}

/// Who a request comes from, and whether it may go on: the outer half of
/// access control. Without a token or access file every request is
/// [`Caller::anyone`]. Otherwise every route but [`OPEN_PATHS`] needs a
/// bearer token (or HTTP Basic with the token as password) that names a
/// principal, or a client certificate whose subject does (mutual TLS); then
/// the principal's request rate applies (429). The caller goes into the
/// request's extensions and [`access::scope`] for what runs after.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    if OPEN_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let access = state.shared().access.load_full();
    let Some(file) = &access.file else {
        let anyone = Caller::anyone();
        req.extensions_mut().insert(anyone.clone());
        return access::scope(anyone, next.run(req)).await;
    };
    if let Some(res) = throttled(&state, &req) {
        return res;
    }
    let principal = match presented(&req) {
        Presented::ShortBasic => {
            let why = format!(
                "the Basic password is shorter than {MIN_BASIC_PASSWORD} bytes, so it is no token of this server (tokens are long and random); send `Authorization: Bearer TOKEN`"
            );
            return refuse_unknown(&state, &req, why);
        }
        Presented::Credential(p) => {
            let digest: [u8; 32] = Sha256::digest(&p).into();
            match file.by_token_digest(&digest) {
                Some(p) => p.clone(),
                None => return refuse_unknown(&state, &req, "the token is wrong".into()),
            }
        }
        Presented::Malformed(why) => return refuse_unknown(&state, &req, why),
        Presented::Nothing => match req.extensions().get::<crate::tls::ClientCert>() {
            Some(cert) => {
                let several = state.shared().tls.as_ref().is_some_and(|t| t.several_cas());
                match file.by_cert(&cert.subject, &cert.issuer, &cert.sha256, several) {
                    Ok(p) => p.clone(),
                    Err(why) => return refuse_unknown(&state, &req, why),
                }
            }
            None => {
                return refuse_unknown(
                    &state,
                    &req,
                    "this server needs a token: send `Authorization: Bearer TOKEN`".into(),
                );
            }
        },
    };
    if let Some((_, limiter)) = access.limiters.get(&principal.name)
        && limiter.check().is_err()
    {
        let why = format!(
            "principal {:?} is over its request rate; retry after a second",
            principal.name
        );
        let mut line = audit::Line::new(audit::Event::Refused);
        line.principal = Some(principal.name.clone());
        line.reason = Some(why.clone());
        line.status = Some(429);
        state
            .shared()
            .audit
            .write(line.of_request(req.method(), req.extensions()));
        return ApiError::too_many(why).into_response();
    }
    let caller = Caller(principal);
    req.extensions_mut().insert(caller.clone());
    req.extensions_mut().insert(Generation(access.generation));
    access::scope(caller, next.run(req)).await
}

/// The peer's address, when the request came over a connection.
fn peer_ip(req: &Request) -> Option<std::net::IpAddr> {
    req.extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

/// A 429 with `Retry-After` when the peer's address is over its budget of
/// failed authentications (the first of a window audited).
fn throttled(state: &AppState, req: &Request) -> Option<Response> {
    let ip = peer_ip(req)?;
    let t = state
        .shared()
        .failed_auth
        .check(ip, std::time::Instant::now())?;
    let why = format!(
        "{} requests from this address had no valid credential within {} s; retry after {} s with a valid token",
        t.failures,
        crate::per_ip::AUTH_FAILURE_WINDOW.as_secs(),
        t.retry_after
    );
    if t.first {
        let mut line = audit::Line::new(audit::Event::Refused);
        line.reason = Some(why.clone());
        line.status = Some(429);
        state
            .shared()
            .audit
            .write(line.of_request(req.method(), req.extensions()));
    }
    let mut res = ApiError::too_many(why).into_response();
    res.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(t.retry_after),
    );
    Some(res)
}

/// A 401, audited and counted against the peer's address.
fn refuse_unknown(state: &AppState, req: &Request, why: String) -> Response {
    if let Some(ip) = peer_ip(req) {
        state
            .shared()
            .failed_auth
            .failed(ip, std::time::Instant::now());
    }
    let mut line = audit::Line::new(audit::Event::Refused);
    line.reason = Some(why.clone());
    line.status = Some(401);
    state
        .shared()
        .audit
        .write(line.of_request(req.method(), req.extensions()));
    ApiError::unauthorized(why).into_response()
}

/// The inner half of access control, run once the router has matched a
/// route: the grant the route needs ([`access::requirement`]) on the object
/// it names, checked before the handler runs (a 403 changes nothing); the
/// principal's quota of sequences and pools on create; and one audit line
/// for every admin action, with the object before and after.
pub(crate) async fn authorize(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(template) = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
    else {
        return next.run(req).await;
    };
    let need = match access::requirement(req.method(), &template) {
        Requirement::Open => return next.run(req).await,
        Requirement::NoSuchMethod => {
            return crate::routes::wrong_method(req.uri().clone())
                .await
                .into_response();
        }
        Requirement::Grant(need) => need,
    };
    let Some(Caller(principal)) = req.extensions().get::<Caller>().cloned() else {
        // authenticate runs first on every route that is not open.
        return refuse_unknown(&state, &req, "no credential was checked".into());
    };
    // The reading of the access file the caller was found in.
    let access_generation = req
        .extensions()
        .get::<Generation>()
        .map_or_else(|| state.shared().access.load().generation, |g| g.0);
    let (parts, body) = req.into_parts();
    let (object, body) = match object_of(&state, &parts, need, body).await {
        Ok(found) => found,
        Err(res) => return res,
    };
    let ids_group = state.shared().ids_config.group.clone();
    let allowed = allowed(&principal, need, &object, &ids_group);
    let mut parts = parts;
    parts.extensions.insert(Authorized {
        need,
        object: object.clone(),
        generation: access_generation,
    });
    let audit_object = |object: &Named| audit::Object::new(need.kind, object.name());
    let line = |event| {
        let mut l = audit::Line::new(event).of_request(&parts.method, &parts.extensions);
        l.principal = Some(principal.name.clone());
        l.route = Some(template.clone());
        l.action = Some(need.action);
        l.object = Some(audit_object(&object));
        l
    };
    if !allowed {
        let what = match &object {
            Named::One(name) if reserved(need, name, &ids_group) => format!(
                "{} {name:?}, which is this server's own (POST /v1/ids/next leases from it): leasing it directly needs `admin` on every name (`names = \"*\"`); lease another group",
                need.kind.as_str()
            ),
            Named::One(name) => format!("{} {name:?}", need.kind.as_str()),
            Named::Every => format!(
                "every name (a `names = \"*\"` grant), as this {} request asks",
                need.kind.as_str()
            ),
            _ => "any name".to_owned(),
        };
        let why = format!(
            "principal {:?} lacks the `{}` grant on {what}; ask the server's operator for a grant that covers it",
            principal.name, need.action
        );
        let mut l = line(audit::Event::Refused);
        l.status = Some(403);
        l.reason = Some(why.clone());
        state.shared().audit.write(l);
        return ApiError::forbidden(why).into_response();
    }
    if need.action != Action::Admin {
        // Worker leases and ticket takes are under the principal's quotas
        // (crate::quota).
        let refused = line(audit::Event::Refused);
        let req = Request::from_parts(parts, body);
        return crate::quota::run_use(&state, &principal, &template, refused, req, next).await;
    }
    // An admin request's body goes into its audit line (it holds settings,
    // never a credential).
    let body = match read_body(&state, body).await {
        Ok(b) => b,
        Err(res) => return res,
    };
    // Capped: a large body goes in as its first bytes, length and hash.
    let request = audit::body(&body);
    let req = Request::from_parts(parts.clone(), Body::from(body));
    // The admin action runs in a task of its own, in the caller's scope:
    // a client that hangs up cannot cut it off between the store's change
    // and its audit line. Its checks and snapshots are under the request
    // timeout (the handler has its own).
    let limit = state.shared().options.request_timeout;
    let audit_line = line(audit::Event::Admin);
    let refused_line = line(audit::Event::Refused);
    let caller = Caller(principal.clone());
    let is_delete = parts.method == axum::http::Method::DELETE;
    let task = access::scope(caller.clone(), async move {
        let quota = match (template.as_str(), &object) {
            ("/v1/sequences", Named::One(_)) => {
                principal.max_sequences.map(|m| (ObjectKind::Sequence, m))
            }
            ("/v1/pools", Named::One(_)) => principal.max_pools.map(|m| (ObjectKind::Pool, m)),
            _ => None,
        };
        // A drop leaves a tombstone: drops are under max_drops_per_hour.
        let drop = is_delete
            && matches!(
                (template.as_str(), &object),
                ("/v1/sequences/{name}" | "/v1/pools/{name}", Named::One(_))
            )
            && principal.limits.max_drops_per_hour.is_some();
        // A pool's members are under max_pool_members (a size that is not
        // a positive number is the handler's 400).
        let members = match (template.as_str(), &object, &request) {
            ("/v1/pools", Named::One(_), Some(body)) => body
                .get("size")
                .and_then(serde_json::Value::as_u64)
                .filter(|_| principal.limits.max_pool_members.is_some()),
            _ => None,
        };
        let refuse = |why: String, refused_line: audit::Line| {
            let mut l = refused_line;
            l.status = Some(403);
            l.reason = Some(why.clone());
            state.shared().audit.write(l);
            crate::quota::refusal(why).into_response()
        };
        // Creates and drops under a quota run one at a time, so that two
        // cannot both find room for one more (in this process: servers
        // sharing a store each count for themselves).
        let _one_at_a_time = if quota.is_some() || drop || members.is_some() {
            match tokio::time::timeout(limit, state.shared().create_lock.lock()).await {
                Ok(g) => Some(g),
                Err(_) => return ApiError::timeout(limit).into_response(),
            }
        } else {
            None
        };
        if drop && let Err(why) = state.shared().quotas.may_drop(&principal) {
            return refuse(why, refused_line);
        }
        if let Some(size) = members {
            match tokio::time::timeout(limit, crate::quota::pool_members(&state, &principal)).await
            {
                Err(_) => return ApiError::timeout(limit).into_response(),
                Ok(Err(e)) => return ApiError::from(e).into_response(),
                Ok(Ok(have)) => {
                    if let Err(why) = crate::quota::may_add_members(&principal, have, size) {
                        return refuse(why, refused_line);
                    }
                }
            }
        }
        if let Some((kind, max)) = quota {
            match tokio::time::timeout(limit, crate::quota::owned(&state, &principal, kind)).await {
                Err(_) => return ApiError::timeout(limit).into_response(),
                Ok(Err(e)) => return ApiError::from(e).into_response(),
                Ok(Ok(have)) if have >= max => {
                    let why = format!(
                        "principal {:?} has {have} {}s, its quota (max_{}s = {max}); drop one or ask the server's operator for a larger quota",
                        principal.name,
                        kind.as_str(),
                        kind.as_str()
                    );
                    return refuse(why, refused_line);
                }
                Ok(Ok(_)) => {}
            }
        }
        let before = snapshot(&state, need.kind, &object, limit).await;
        let res = next.run(req).await;
        if drop && res.status().is_success() {
            state.shared().quotas.dropped(&principal);
        }
        let (res, after) = if template == "/v1/fence" {
            // The fence's answer is its before and after.
            let (head, body) = res.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            let after = serde_json::from_slice(&bytes).ok();
            (
                Response::from_parts(head, axum::body::Body::from(bytes)),
                after,
            )
        } else {
            let after = snapshot(&state, need.kind, &object, limit).await;
            (res, after)
        };
        let mut l = audit_line;
        l.request = request;
        l.status = Some(res.status().as_u16());
        l.before = before.or(Some(serde_json::Value::Null));
        l.after = after.or(Some(serde_json::Value::Null));
        state.shared().audit.write(l);
        res
    });
    match tokio::spawn(task).await {
        Ok(res) => res,
        Err(e) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the admin request failed: {e}"),
        )
        .into_response(),
    }
}

/// The name a request acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    /// One name.
    One(String),
    /// Every name (`{"all": true}`, or a body whose name cannot be read).
    Every,
    /// Names filtered in the answer.
    Some,
    /// None (the API document).
    Nothing,
}

impl Named {
    fn name(&self) -> Option<String> {
        match self {
            Named::One(n) => Some(n.clone()),
            Named::Every => Some("*".into()),
            Named::Some | Named::Nothing => None,
        }
    }
}

/// The object a request names, from its path or body (the body is read,
/// within the body limit and the request timeout, and handed on).
async fn object_of(
    state: &AppState,
    parts: &axum::http::request::Parts,
    need: Need,
    body: Body,
) -> Result<(Named, Body), Response> {
    let named = match need.target {
        Target::Path | Target::LeaseGroup => {
            let mut p = parts.clone();
            let params = axum::extract::RawPathParams::from_request_parts(&mut p, &())
                .await
                .map_err(|e| {
                    ApiError::bad_request(format!("bad path: {}", e.body_text())).into_response()
                })?;
            match params.iter().next() {
                Some((_, v)) => Named::One(v.to_owned()),
                None => Named::Every,
            }
        }
        Target::IdsGroup => Named::One(state.shared().ids_config.group.clone()),
        Target::Fixed(n) => Named::One(n.to_owned()),
        Target::Listed => Named::Some,
        Target::Known => Named::Nothing,
        Target::Body => {
            let bytes = read_body(state, body).await?;
            let named = match crate::extract::parse_strict(&bytes) {
                Ok(v) => match (v.get("name"), v.get("all")) {
                    // A name, with `all` absent or false (the fence's body
                    // takes `"all": false` beside a name).
                    (
                        Some(serde_json::Value::String(n)),
                        None | Some(serde_json::Value::Bool(false)),
                    ) => Named::One(n.clone()),
                    // Unreadable: it takes a grant on every name (the
                    // handler refuses it anyway).
                    _ => Named::Every,
                },
                Err(_) => Named::Every,
            };
            return Ok((named, Body::from(bytes)));
        }
    };
    Ok((named, body))
}

/// Whether `principal` may do what `need` asks on `object`: the one rule,
/// applied when a request is authorized and again before it writes
/// ([`regrant`]). A fixed name ([`access::is_fixed`]) is covered only by a
/// grant naming it exactly (or `"*"`); the server's ids group is leased
/// directly only with `admin` on `"*"`.
fn allowed(principal: &Principal, need: Need, object: &Named, ids_group: &str) -> bool {
    match object {
        Named::One(name) if reserved(need, name, ids_group) => {
            principal.may_everywhere(Action::Admin)
        }
        Named::One(name) if access::is_fixed(name, ids_group) => {
            principal.may_exactly(need.action, name)
        }
        Named::One(name) => principal.may(need.action, name),
        Named::Every => principal.may_everywhere(need.action),
        Named::Some => principal.may_somewhere(need.action),
        Named::Nothing => true,
    }
}

/// Whether the request leases the server's own ids worker group directly.
fn reserved(need: Need, name: &str, ids_group: &str) -> bool {
    need.target == Target::LeaseGroup && name == ids_group
}

/// The [`crate::AccessState::generation`] a request's caller was found in.
#[derive(Debug, Clone, Copy)]
struct Generation(u64);

/// What [`authorize`] allowed a request, under which access file reading.
#[derive(Debug, Clone)]
pub(crate) struct Authorized {
    need: Need,
    object: Named,
    /// The [`crate::AccessState::generation`] it was allowed under.
    generation: u64,
}

/// What a request was allowed, kept for the re-checks of [`still_granted`]
/// while its handler runs.
#[derive(Debug, Clone)]
struct Granted {
    auth: Authorized,
    /// The principal it was allowed to.
    principal: String,
    /// The audit line of a refusal, but for its reason.
    refusal: audit::Line,
}

tokio::task_local! {
    /// The grant the running handler's request was allowed under (set by
    /// [`regrant`] around the handler).
    static GRANTED: Granted;
}

impl Granted {
    /// Why the grant no longer holds under the access file as it is now
    /// (reloaded since the request was allowed), if it does not.
    fn revoked(&self, state: &AppState) -> Option<String> {
        let access = state.shared().access.load();
        if access.generation == self.auth.generation || self.principal == access::TOKEN_PRINCIPAL {
            return None;
        }
        let file = access.file.as_ref()?;
        let ids_group = &state.shared().ids_config.group;
        let still = file
            .by_name(&self.principal)
            .is_some_and(|p| allowed(p, self.auth.need, &self.auth.object, ids_group));
        (!still).then(|| {
            format!(
                "principal {:?} lost the `{}` grant on {} {}: the access file was reloaded while this request ran; nothing was changed",
                self.principal,
                self.auth.need.action,
                self.auth.need.kind.as_str(),
                self.auth
                    .object
                    .name()
                    .map_or("names".to_owned(), |n| format!("{n:?}"))
            )
        })
    }

    /// The 403 of a revoked grant, audited.
    fn refuse(&self, state: &AppState, why: String) -> ApiError {
        let mut l = self.refusal.clone();
        l.reason = Some(why.clone());
        state.shared().audit.write(l);
        ApiError::forbidden(why)
    }
}

/// The innermost layer of every route: reads the request's body, then,
/// right before the handler runs, checks that the grant the request was
/// allowed under still holds. An access file reload since (a new
/// generation) that revoked it, while the body arrived or the admin checks
/// ran, makes the request a 403 that changes nothing. The grant stays with
/// the handler, which checks it again with [`still_granted`] after any step
/// that can wait (opening a handle) and right before it takes or writes.
pub(crate) async fn regrant(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(auth) = req.extensions().get::<Authorized>().cloned() else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let limit = state.shared().options.body_limit;
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(e) => return crate::extract::read_error(e).into_response(),
    };
    let Some(Caller(was)) = parts.extensions.get::<Caller>() else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let mut refusal =
        audit::Line::new(audit::Event::Refused).of_request(&parts.method, &parts.extensions);
    refusal.principal = Some(was.name.clone());
    refusal.route = parts
        .extensions
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    refusal.action = Some(auth.need.action);
    refusal.object = Some(audit::Object::new(auth.need.kind, auth.object.name()));
    refusal.status = Some(403);
    let granted = Granted {
        principal: was.name.clone(),
        auth,
        refusal,
    };
    if let Some(why) = granted.revoked(&state) {
        return granted.refuse(&state, why).into_response();
    }
    GRANTED
        .scope(
            granted,
            next.run(Request::from_parts(parts, Body::from(bytes))),
        )
        .await
}

/// Inside a handler: `Ok` while the grant its request was allowed under
/// still holds (or the request needed none). A handler calls it after a
/// step that can wait (opening a handle: a store round trip) and right
/// before it takes values or writes, so a request whose grant an access
/// file reload revoked meanwhile takes and changes nothing.
///
/// # Errors
/// A 403 (audited) naming the grant lost.
pub(crate) fn still_granted(state: &AppState) -> Result<(), ApiError> {
    GRANTED
        .try_with(|g| match g.revoked(state) {
            Some(why) => Err(g.refuse(state, why)),
            None => Ok(()),
        })
        .unwrap_or(Ok(()))
}

/// A request's body, within the body limit and the request timeout.
async fn read_body(state: &AppState, body: Body) -> Result<axum::body::Bytes, Response> {
    let s = state.shared();
    tokio::time::timeout(
        s.options.request_timeout,
        axum::body::to_bytes(body, s.options.body_limit),
    )
    .await
    .map_err(|_| ApiError::timeout(s.options.request_timeout).into_response())?
    .map_err(|_| {
        ApiError::too_large(format!(
            "the request body is larger than this server's limit of {} bytes, or was cut off",
            s.options.body_limit
        ))
        .into_response()
    })
}

/// A sequence or pool as `show` sees it, for the audit trail; `None` when
/// there is none (or the store could not say within `limit`).
async fn snapshot(
    state: &AppState,
    kind: ObjectKind,
    object: &Named,
    limit: std::time::Duration,
) -> Option<serde_json::Value> {
    tokio::time::timeout(limit, snapshot_now(state, kind, object))
        .await
        .ok()
        .flatten()
}

async fn snapshot_now(
    state: &AppState,
    kind: ObjectKind,
    object: &Named,
) -> Option<serde_json::Value> {
    let Named::One(name) = object else {
        return None;
    };
    let store = &*state.shared().store;
    match kind {
        // Not `show`: a missing name (every create's before) needs no
        // "did you mean".
        ObjectKind::Sequence => keysmith::sequence::show_if_exists(store, name)
            .await
            .ok()
            .flatten()
            .and_then(|i| serde_json::to_value(i).ok()),
        ObjectKind::Pool => keysmith::pool::describe_if_exists(store, name)
            .await
            .ok()
            .flatten()
            .and_then(|i| serde_json::to_value(i).ok()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

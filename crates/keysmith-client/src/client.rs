//! The async client: configuration, TLS, failover, error mapping, and one
//! method per route.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use keysmith_core::numbers::Numbering;
use keysmith_core::sequence::SequenceInfo;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Error, Result, Token};

/// The default deadline of one call, retries and failover included.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

/// What a path segment escapes: everything but `A-Z a-z 0-9 - . _ ~`; a `/`
/// in a name is sent as `%2F`.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A name as one path segment.
pub fn encode_segment(name: &str) -> String {
    utf8_percent_encode(name, SEGMENT).to_string()
}

/// How a [`Client`] is made: [`Client::builder`].
#[derive(Debug, Default)]
pub struct ClientBuilder {
    urls: Vec<String>,
    token: Option<Token>,
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    deadline: Option<Duration>,
}

impl ClientBuilder {
    /// A server URL, `https://HOST:PORT` or `http://HOST:PORT`; call again
    /// for each server of a group (tried in order, failing over).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.urls.push(url.into());
        self
    }

    /// The bearer token.
    pub fn token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }

    /// The CA certificates (PEM) that signed the server's certificate;
    /// default: the system's.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// A client certificate (PEM) and its key, for servers that ask for one.
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.cert_file = Some(cert.into());
        self.key_file = Some(key.into());
        self
    }

    /// How long one call may take, retries, `Retry-After` waits and
    /// failover included ([`DEFAULT_DEADLINE`] by default).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The client. Reads the certificate files now.
    ///
    /// # Errors
    /// [`Error::Setup`] with no URL, a URL that is not `http(s)://`, or a
    /// file that cannot be read or is not what it should be.
    pub fn build(self) -> Result<Client> {
        if self.urls.is_empty() {
            return Err(Error::Setup(
                "no server URL given; give at least one, e.g. https://keysmith.example:7878".into(),
            ));
        }
        let mut urls = Vec::new();
        for u in &self.urls {
            let t = u.trim_end_matches('/');
            let uri: http::Uri = t.parse().map_err(|e| {
                Error::Setup(format!(
                    "url {u:?} is not a URL ({e}); write it as https://HOST:PORT"
                ))
            })?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(Error::Setup(format!(
                    "url {u:?} is not an http:// or https:// server URL; write it as https://HOST:PORT"
                )));
            }
            if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
                return Err(Error::Setup(format!(
                    "url {:?} holds credentials; give the token with token (a file or $KEYSMITH_TOKEN), never in a URL",
                    uri.host().unwrap_or_default()
                )));
            }
            urls.push(t.to_owned());
        }
        let tls = self.tls_config()?;
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.enforce_http(false);
        connector.set_connect_timeout(Some(Duration::from_secs(3)));
        connector.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(connector);
        let http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https);
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                urls,
                preferred: AtomicUsize::new(0),
                token: self.token,
                deadline: self.deadline.unwrap_or(DEFAULT_DEADLINE),
            }),
        })
    }

    fn tls_config(&self) -> Result<rustls::ClientConfig> {
        use keysmith_core::driver::{credentials, tls};
        let setup = |e: keysmith_core::Error| Error::Setup(e.to_string());
        let roots = match &self.ca_file {
            Some(p) => tls::ca_roots(
                credentials::certificates(p, "ca_file").map_err(setup)?,
                "ca_file",
                &p.display().to_string(),
            )
            .map_err(setup)?,
            None => tls::system_roots("ca_file").unwrap_or_else(|_| rustls::RootCertStore::empty()),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Setup(format!("cannot set up TLS: {e}")))?
            .with_root_certificates(roots);
        let config = match (&self.cert_file, &self.key_file) {
            (Some(c), Some(k)) => {
                let certs = credentials::certificates(c, "cert_file").map_err(setup)?;
                let key = credentials::private_key(k, "key_file").map_err(setup)?;
                builder.with_client_auth_cert(certs, key).map_err(|e| {
                    Error::Setup(format!(
                        "cert_file={} and key_file={} do not make a client certificate: {e}; give the key of that certificate",
                        c.display(),
                        k.display()
                    ))
                })?
            }
            _ => builder.with_no_client_auth(),
        };
        // ALPN (h2, http/1.1) is set by the connector.
        Ok(config)
    }
}

type Http = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<bytes::Bytes>,
>;

struct Inner {
    http: Http,
    urls: Vec<String>,
    /// The server that answered last: calls start there.
    preferred: AtomicUsize,
    token: Option<Token>,
    deadline: Duration,
}

/// A client of one keysmith service (one server, or several over one store,
/// failing over between them). Cheap to clone; `Send + Sync`.
///
/// Every call has a deadline ([`ClientBuilder::deadline`]): within it, a
/// server that does not answer, answers 503, or is not the leader of a
/// leader-ordered sequence (421, followed to the leader it names) is left
/// for the next; a 429 is waited out when its `Retry-After` fits. Setup
/// errors, 401 and 403 fail at once.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("urls", &self.inner.urls)
            .field("token", &self.inner.token)
            .field("deadline", &self.inner.deadline)
            .finish()
    }
}

/// The body of an error answer.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    similar: Vec<String>,
    #[serde(default)]
    leader: Option<String>,
}

/// One request: method, path (segments already encoded), query, body, and
/// the secrets its body carries (kept out of every message).
pub(crate) struct Call<'a> {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: Vec<(&'static str, String)>,
    pub(crate) body: Option<Value>,
    pub(crate) secrets: Vec<&'a str>,
}

impl<'a> Call<'a> {
    pub(crate) fn new(method: Method, path: String) -> Self {
        Call {
            method,
            path,
            query: Vec::new(),
            body: None,
            secrets: Vec::new(),
        }
    }
    fn query(mut self, k: &'static str, v: impl ToString) -> Self {
        self.query.push((k, v.to_string()));
        self
    }
    fn body(mut self, v: Value) -> Self {
        self.body = Some(v);
        self
    }
    fn secret(mut self, s: &'a str) -> Self {
        self.secrets.push(s);
        self
    }
}

/// What one attempt at one server came to.
enum Attempt {
    Done(Value),
    /// Try the next server (the reason, kept for the final error).
    Next(String),
    /// Ask this server again (a leader) at once.
    Leader(String),
    /// Wait this long, then try again.
    Wait(Duration, Error),
    Fail(Error),
}

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The server URLs, in the order they are tried.
    pub fn urls(&self) -> &[String] {
        &self.inner.urls
    }

    /// The deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.inner.deadline
    }

    pub(crate) async fn call(&self, call: Call<'_>) -> Result<Value> {
        let deadline = Instant::now() + self.inner.deadline;
        let n = self.inner.urls.len();
        let mut last = String::from("no server was tried");
        let mut pause = Duration::from_millis(50);
        loop {
            let first = self.inner.preferred.load(Ordering::Relaxed);
            for k in 0..n {
                let i = (first + k) % n;
                let mut base = self.inner.urls[i].clone();
                let mut hops = 0;
                loop {
                    if Instant::now() >= deadline {
                        return Err(Error::Unavailable(format!(
                            "no server answered within {:?}: {last}",
                            self.inner.deadline
                        )));
                    }
                    match self.attempt(&base, &call, deadline).await {
                        Attempt::Done(v) => {
                            self.inner.preferred.store(i, Ordering::Relaxed);
                            return Ok(v);
                        }
                        Attempt::Fail(e) => return Err(e),
                        Attempt::Leader(url) if hops < 3 => {
                            hops += 1;
                            base = url;
                        }
                        Attempt::Leader(url) => {
                            last = format!("{base} and {url} both say the other leads");
                            break;
                        }
                        Attempt::Wait(d, e) => {
                            if Instant::now() + d >= deadline {
                                return Err(e);
                            }
                            tokio::time::sleep(d).await;
                        }
                        Attempt::Next(why) => {
                            last = why;
                            break;
                        }
                    }
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Unavailable(format!(
                    "no server answered within {:?}: {last}",
                    self.inner.deadline
                )));
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    async fn attempt(&self, base: &str, call: &Call<'_>, deadline: Instant) -> Attempt {
        let mut url = format!("{base}{}", call.path);
        if !call.query.is_empty() {
            let q: String = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(call.query.iter().map(|(k, v)| (*k, v.as_str())))
                .finish();
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&q);
        }
        let scrub = |s: String| scrub(s, &call.secrets, self.inner.token.as_ref());
        let mut req = http::Request::builder()
            .method(call.method.clone())
            .uri(&url);
        if let Some(t) = &self.inner.token {
            let mut v =
                http::HeaderValue::from_str(&t.bearer()).expect("a Token holds visible ASCII only");
            v.set_sensitive(true);
            req = req.header(http::header::AUTHORIZATION, v);
        }
        let body = match &call.body {
            Some(b) => {
                req = req.header(http::header::CONTENT_TYPE, "application/json");
                bytes::Bytes::from(b.to_string())
            }
            None => bytes::Bytes::new(),
        };
        let req = match req.body(Full::new(body)) {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Fail(Error::Setup(scrub(format!(
                    "cannot make a request to {base}{}: {e}",
                    call.path
                ))));
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let exchange = async {
            let resp = self.inner.http.request(req).await?;
            let (parts, body) = resp.into_parts();
            let bytes = body
                .collect()
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?
                .to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((parts, bytes))
        };
        let (parts, bytes) = match tokio::time::timeout(left, exchange).await {
            Err(_) => return Attempt::Next(format!("{base}: no answer before the deadline")),
            Ok(Err(e)) => {
                if let Some(tls) = tls_cause(&*e) {
                    return Attempt::Fail(Error::Setup(scrub(format!(
                        "TLS with {base} failed: {tls}; check ca_file (the CA that signed the server's certificate) \
                         and, if the server asks for one, the client certificate"
                    ))));
                }
                return Attempt::Next(scrub(format!("{base}: {}", chain(&*e))));
            }
            Ok(Ok(r)) => r,
        };
        let status = parts.status;
        let retry_after = parts
            .headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let leader_header = parts
            .headers
            .get("keysmith-leader")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if status.is_success() {
            return match serde_json::from_str(&text) {
                Ok(v) => Attempt::Done(v),
                Err(_) if text.is_empty() => Attempt::Done(Value::Null),
                Err(e) => Attempt::Fail(Error::Server {
                    status: status.as_u16(),
                    code: "bad_answer".into(),
                    message: format!("{base} answered {status} with a body that is not JSON: {e}"),
                }),
            };
        }
        let detail = serde_json::from_str::<ErrorBody>(&text)
            .map(|b| b.error)
            .unwrap_or_else(|_| ErrorDetail {
                code: status.as_str().to_owned(),
                message: format!(
                    "{base} answered {status}{}",
                    text.trim()
                        .chars()
                        .take(200)
                        .collect::<String>()
                        .split_whitespace()
                        .next()
                        .map(|_| format!(": {}", text.trim().chars().take(200).collect::<String>()))
                        .unwrap_or_default()
                ),
                similar: Vec::new(),
                leader: None,
            });
        let message = scrub(detail.message);
        match status {
            StatusCode::UNAUTHORIZED => Attempt::Fail(Error::Unauthorized(message)),
            StatusCode::FORBIDDEN => Attempt::Fail(Error::Forbidden(message)),
            StatusCode::NOT_FOUND => Attempt::Fail(Error::NotFound {
                message,
                similar: detail.similar,
            }),
            StatusCode::CONFLICT => Attempt::Fail(Error::Conflict {
                code: detail.code,
                message,
            }),
            StatusCode::GONE => Attempt::Fail(Error::Dropped(message)),
            StatusCode::TOO_MANY_REQUESTS => {
                let wait = retry_after.unwrap_or(Duration::from_secs(1));
                Attempt::Wait(
                    wait,
                    Error::RateLimited {
                        message,
                        retry_after,
                    },
                )
            }
            StatusCode::MISDIRECTED_REQUEST => match detail.leader.or(leader_header) {
                Some(l) => Attempt::Leader(l.trim_end_matches('/').to_owned()),
                None => Attempt::Next(format!("{base}: {message}")),
            },
            StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::BAD_GATEWAY
            | StatusCode::GATEWAY_TIMEOUT => Attempt::Next(format!("{base}: {message}")),
            _ => Attempt::Fail(Error::Server {
                status: status.as_u16(),
                code: detail.code,
                message,
            }),
        }
    }

    // ---- sequences ----

    fn seq_path(name: &str, rest: &str) -> String {
        format!("/v1/sequences/{}{rest}", encode_segment(name))
    }

    /// `POST /v1/sequences`: creates a sequence. `spec` is the create body
    /// (`{"name": ..., "start": ..., "gapless": true, ...}`, as the HTTP API
    /// documents it).
    ///
    /// # Errors
    /// [`Error::Conflict`] (`already_exists`), [`Error::Server`] 400 for a
    /// bad spec, and the errors every call has.
    pub async fn create_sequence(&self, spec: Value) -> Result<SequenceView> {
        let v = self
            .call(Call::new(Method::POST, "/v1/sequences".into()).body(spec))
            .await?;
        SequenceView::from_value(v)
    }

    /// `GET /v1/sequences/{name}`.
    ///
    /// # Errors
    /// [`Error::NotFound`], and the errors every call has.
    pub async fn show_sequence(&self, name: &str) -> Result<SequenceView> {
        let v = self
            .call(Call::new(Method::GET, Self::seq_path(name, "")))
            .await?;
        SequenceView::from_value(v)
    }

    /// `GET /v1/sequences`: the sequences the token may read.
    ///
    /// # Errors
    /// The errors every call has.
    pub async fn list_sequences(&self) -> Result<Vec<SequenceView>> {
        let v = self
            .call(Call::new(Method::GET, "/v1/sequences".into()))
            .await?;
        let items = v
            .get("sequences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        items.into_iter().map(SequenceView::from_value).collect()
    }

    /// `PATCH /v1/sequences/{name}` with `change` (`next`, `max`, `block`,
    /// `failover_skip`).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Server`] 400 for a change refused.
    pub async fn alter_sequence(&self, name: &str, change: Value) -> Result<SequenceView> {
        let v = self
            .call(Call::new(Method::PATCH, Self::seq_path(name, "")).body(change))
            .await?;
        SequenceView::from_value(v)
    }

    /// `POST /v1/sequences/{name}/rotate-key`: a new key of an opaque
    /// sequence; the answer as the server gives it.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Conflict`] for a sequence that is not opaque.
    pub async fn rotate_key(&self, name: &str) -> Result<Value> {
        self.call(Call::new(Method::POST, Self::seq_path(name, "/rotate-key")))
            .await
    }

    /// `DELETE /v1/sequences/{name}`: drops it for good.
    ///
    /// # Errors
    /// [`Error::NotFound`], and the errors every call has.
    pub async fn drop_sequence(&self, name: &str) -> Result<()> {
        self.call(Call::new(Method::DELETE, Self::seq_path(name, "")))
            .await
            .map(drop)
    }

    /// `POST /v1/sequences/{name}/next?count=N`: values taken by the
    /// server's own handle, of any kind of sequence (numbers, or strings
    /// for encoded and formatted ones).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Conflict`] (`exhausted`, `wrong_kind`
    /// for a gap-free sequence), and the errors every call has.
    pub async fn next_values(&self, name: &str, count: i64) -> Result<Vec<Value>> {
        let v = self
            .call(Call::new(Method::POST, Self::seq_path(name, "/next")).query("count", count))
            .await?;
        Ok(v.get("values")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// `POST /v1/sequences/{name}/reserve?count=N`: a block for this
    /// caller alone.
    ///
    /// # Errors
    /// [`Error::Conflict`] `wrong_kind` for a numbered sequence, and as
    /// [`Client::next_values`].
    pub async fn reserve(&self, name: &str, count: i64) -> Result<Lease> {
        let v = self
            .call(Call::new(Method::POST, Self::seq_path(name, "/reserve")).query("count", count))
            .await?;
        Lease::from_value(v)
    }

    /// `POST /v1/sequences/{name}/release`: hands `from..end` of a lease
    /// back (taken again only when no one reserved since).
    ///
    /// # Errors
    /// [`Error::Dropped`] when the name was dropped since, [`Error::Server`]
    /// 400 for a lease token that is not this server group's.
    pub async fn release(&self, name: &str, lease: &LeaseToken, from: i64) -> Result<Value> {
        self.call(
            Call::new(Method::POST, Self::seq_path(name, "/release"))
                .body(json!({ "lease": lease.0, "from": from }))
                .secret(&lease.0),
        )
        .await
    }

    /// `POST /v1/sequences/{name}/decode`: the counter behind a value of an
    /// opaque, encoded or bit-reversed sequence (`{"value", "counter"}`).
    ///
    /// # Errors
    /// [`Error::Server`] 400 for a value the sequence never made.
    pub async fn decode(&self, name: &str, value: Value) -> Result<Value> {
        self.call(
            Call::new(Method::POST, Self::seq_path(name, "/decode"))
                .body(json!({ "value": value })),
        )
        .await
    }

    // ---- tickets ----

    /// `POST /v1/sequences/{name}/tickets`: a gap-free number and its
    /// ticket (`ttl` in seconds).
    ///
    /// # Errors
    /// [`Error::Conflict`] `wrong_kind` for a sequence that is not gap-free.
    pub async fn take_ticket(&self, name: &str, ttl_secs: Option<u64>) -> Result<Ticket> {
        let mut c = Call::new(Method::POST, Self::seq_path(name, "/tickets"));
        if let Some(t) = ttl_secs {
            c = c.query("ttl", t);
        }
        let v = self.call(c).await?;
        serde_json::from_value(v).map_err(bad_answer)
    }

    /// `POST /v1/sequences/{name}/tickets/commit`: makes the number final;
    /// the answer's `committed` is the number.
    ///
    /// # Errors
    /// [`Error::Conflict`] for a ticket released, expired or committed by
    /// another; [`Error::Dropped`].
    pub async fn commit_ticket(&self, name: &str, ticket: &str) -> Result<Value> {
        self.call(
            Call::new(Method::POST, Self::seq_path(name, "/tickets/commit"))
                .body(json!({ "ticket": ticket })),
        )
        .await
    }

    /// `POST /v1/sequences/{name}/tickets/release`: gives the number back.
    ///
    /// # Errors
    /// As [`Client::commit_ticket`].
    pub async fn release_ticket(&self, name: &str, ticket: &str) -> Result<Value> {
        self.call(
            Call::new(Method::POST, Self::seq_path(name, "/tickets/release"))
                .body(json!({ "ticket": ticket })),
        )
        .await
    }

    // ---- ids and workers ----

    /// `POST /v1/ids/next?count=N[&format=uuidv7]`: time-ordered ids
    /// (numbers, or UUID strings). Needs `use` on the worker group `ids`.
    ///
    /// # Errors
    /// [`Error::Forbidden`] without that grant, and the errors every call has.
    pub async fn next_ids(&self, count: i64, uuidv7: bool) -> Result<Vec<Value>> {
        let mut c = Call::new(Method::POST, "/v1/ids/next".into()).query("count", count);
        if uuidv7 {
            c = c.query("format", "uuidv7");
        }
        let v = self.call(c).await?;
        Ok(v.get("ids")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// `GET /v1/ids/{id}`: an id taken apart.
    ///
    /// # Errors
    /// [`Error::Server`] 400 for an id not of the server's layout.
    pub async fn decode_id(&self, id: &str) -> Result<Value> {
        self.call(Call::new(
            Method::GET,
            format!("/v1/ids/{}", encode_segment(id)),
        ))
        .await
    }

    /// `GET /v1/ids/bounds?from=..&to=..`.
    ///
    /// # Errors
    /// [`Error::Server`] 400 for times it cannot read.
    pub async fn id_bounds(&self, from: &str, to: &str) -> Result<Value> {
        self.call(
            Call::new(Method::GET, "/v1/ids/bounds".into())
                .query("from", from)
                .query("to", to),
        )
        .await
    }

    /// `POST /v1/workers/{group}/lease`: a worker id leased for `ttl_ms`.
    ///
    /// # Errors
    /// [`Error::Conflict`] when every id of the group is leased.
    pub async fn lease_worker(
        &self,
        group: &str,
        ttl_ms: Option<u64>,
        max: Option<u64>,
    ) -> Result<WorkerLease> {
        let mut c = Call::new(
            Method::POST,
            format!("/v1/workers/{}/lease", encode_segment(group)),
        );
        if let Some(t) = ttl_ms {
            c = c.query("ttl_ms", t);
        }
        if let Some(m) = max {
            c = c.query("max", m);
        }
        WorkerLease::from_value(self.call(c).await?)
    }

    /// `POST /v1/workers/{group}/lease/renew`: the lease renewed, with a
    /// new token.
    ///
    /// # Errors
    /// [`Error::Conflict`] for a lease that lapsed and was taken over;
    /// [`Error::Dropped`].
    pub async fn renew_worker(
        &self,
        group: &str,
        lease: &LeaseToken,
        ttl_ms: Option<u64>,
    ) -> Result<WorkerLease> {
        let mut c = Call::new(
            Method::POST,
            format!("/v1/workers/{}/lease/renew", encode_segment(group)),
        )
        .body(json!({ "token": lease.0 }))
        .secret(&lease.0);
        if let Some(t) = ttl_ms {
            c = c.query("ttl_ms", t);
        }
        WorkerLease::from_value(self.call(c).await?)
    }

    /// `POST /v1/workers/{group}/lease/release`.
    ///
    /// # Errors
    /// As [`Client::renew_worker`].
    pub async fn release_worker(&self, group: &str, lease: &LeaseToken) -> Result<Value> {
        self.call(
            Call::new(
                Method::POST,
                format!("/v1/workers/{}/lease/release", encode_segment(group)),
            )
            .body(json!({ "token": lease.0 }))
            .secret(&lease.0),
        )
        .await
    }

    /// `GET /v1/workers/{group}`: the group's leases (without tokens).
    ///
    /// # Errors
    /// The errors every call has.
    pub async fn list_workers(&self, group: &str) -> Result<Value> {
        self.call(Call::new(
            Method::GET,
            format!("/v1/workers/{}", encode_segment(group)),
        ))
        .await
    }

    // ---- pools and the rest ----

    /// Any other route: `method` on `path` (segments encoded with
    /// [`encode_segment`]), with an optional JSON body; the answer's JSON.
    ///
    /// # Errors
    /// The errors every call has.
    pub async fn request(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value> {
        let mut c = Call::new(method, path.to_owned());
        c.body = body;
        self.call(c).await
    }

    /// `GET /v1/status`.
    ///
    /// # Errors
    /// The errors every call has.
    pub async fn status(&self) -> Result<Value> {
        self.call(Call::new(Method::GET, "/v1/status".into())).await
    }

    /// What `keysmith top` shows, from `GET /v1/status`: the sequences and
    /// pools the token may read, each with this server's rate (values per
    /// second over its last ten seconds), the runway the store's rate marks
    /// give, what is left of a sequence, and a leader-ordered sequence's
    /// lease, sorted by `key`.
    ///
    /// # Errors
    /// The errors every call has; a `bad_answer` [`Error::Server`] when the
    /// answer lacks a name.
    pub async fn top(
        &self,
        key: keysmith_core::top::SortKey,
    ) -> Result<Vec<keysmith_core::top::NameActivity>> {
        let mut rows = top_rows(&self.status().await?)?;
        keysmith_core::top::sort(&mut rows, key);
        Ok(rows)
    }
}

/// The rows of `keysmith top` in a `/v1/status` answer.
fn top_rows(status: &Value) -> Result<Vec<keysmith_core::top::NameActivity>> {
    use keysmith_core::top::{LeaderLease, NameActivity, NameKind};
    let mut rows = Vec::new();
    for (key, kind) in [("sequences", NameKind::Sequence), ("pools", NameKind::Pool)] {
        let items = status.get(key).and_then(Value::as_array);
        for item in items.into_iter().flatten() {
            let name = item
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad_answer(format!("an item of {key} without a name")))?;
            let lease = match item.get("lease") {
                Some(l) if !l.is_null() => {
                    Some(serde_json::from_value::<LeaderLease>(l.clone()).map_err(bad_answer)?)
                }
                _ => None,
            };
            rows.push(NameActivity {
                name: name.to_owned(),
                kind,
                rate_per_second: item.get("rate").and_then(Value::as_f64),
                runway_seconds: item.get("runway_seconds").and_then(Value::as_f64),
                // Integers that may pass 2^53 travel as strings.
                remaining: item
                    .get("remaining")
                    .and_then(|r| r.as_str().and_then(|s| s.parse().ok()).or(r.as_i64())),
                lease,
            });
        }
    }
    Ok(rows)
}

/// A sequence as the server shows it: the library's [`SequenceInfo`] and
/// numbering, and the whole JSON object (with the server's handle).
#[derive(Debug, Clone)]
pub struct SequenceView {
    /// The stored row as callers see it.
    pub info: SequenceInfo,
    /// How a numbered sequence hands out numbers (no secrets).
    pub numbering: Option<Numbering>,
    /// The object as the server sent it.
    pub json: Value,
}

impl SequenceView {
    fn from_value(v: Value) -> Result<SequenceView> {
        let info: SequenceInfo = serde_json::from_value(v.clone()).map_err(bad_answer)?;
        let numbering = match v.get("numbering") {
            Some(n) if !n.is_null() => Some(serde_json::from_value(n.clone()).map_err(bad_answer)?),
            _ => None,
        };
        Ok(SequenceView {
            info,
            numbering,
            json: v,
        })
    }
}

/// A lease token (of a reserved block or a worker lease): a secret; `Debug`
/// shows `LeaseToken(***)`.
#[derive(Clone, PartialEq, Eq)]
pub struct LeaseToken(pub(crate) String);

impl LeaseToken {
    /// The token as the server wrote it (for a caller that stores it).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A token a server handed out earlier.
    pub fn from_text(s: impl Into<String>) -> LeaseToken {
        LeaseToken(s.into())
    }
}

impl std::fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeaseToken(***)")
    }
}

/// A reserved block: values `start, start + step, ...` below `end`.
#[derive(Debug, Clone)]
pub struct Lease {
    /// The first value.
    pub start: i64,
    /// One past the last.
    pub end: i64,
    /// The distance between two values.
    pub step: i64,
    /// Names the reservation for [`Client::release`].
    pub token: LeaseToken,
}

impl Lease {
    fn from_value(v: Value) -> Result<Lease> {
        let r = v.get("ranges").and_then(|r| r.get(0));
        let int = |x: Option<&Value>| x.and_then(Value::as_i64);
        match (
            int(r.and_then(|r| r.get("start"))),
            int(r.and_then(|r| r.get("end"))),
            v.get("lease").and_then(Value::as_str),
        ) {
            (Some(start), Some(end), Some(token)) => Ok(Lease {
                start,
                end,
                step: int(v.get("step")).unwrap_or(1).max(1),
                token: LeaseToken(token.to_owned()),
            }),
            _ => Err(Error::Server {
                status: 200,
                code: "bad_answer".into(),
                message: "the reserve answer has no ranges[0].start/end or lease".into(),
            }),
        }
    }
}

/// A taken gap-free number and its ticket.
#[derive(Debug, Clone, Deserialize)]
pub struct Ticket {
    /// The number as it is printed (a string for a formatted sequence).
    pub value: Value,
    /// `PERIOD-VALUE-TOKEN`: commits or releases it.
    pub ticket: String,
    /// The counter.
    pub n: i64,
    /// The period, for a sequence with one.
    #[serde(default)]
    pub period: Option<i64>,
}

/// A leased worker id.
#[derive(Debug, Clone)]
pub struct WorkerLease {
    /// The worker id.
    pub worker: i64,
    /// Its fence (grows with every lease of the id).
    pub fence: i64,
    /// Ids may be made from this time on (ms since the epoch).
    pub not_before_ms: i64,
    /// The lease holds until then.
    pub until_ms: i64,
    /// The token for renew and release.
    pub token: LeaseToken,
    /// The whole answer, without the token.
    pub json: Value,
}

impl WorkerLease {
    fn from_value(mut v: Value) -> Result<WorkerLease> {
        let token = v
            .as_object_mut()
            .and_then(|o| o.remove("lease"))
            .and_then(|t| t.as_str().map(str::to_owned))
            .ok_or_else(|| bad_answer("no lease token in the answer"))?;
        let int = |k: &str| v.get(k).and_then(Value::as_i64).unwrap_or_default();
        Ok(WorkerLease {
            worker: int("worker"),
            fence: int("fence"),
            not_before_ms: int("not_before_ms"),
            until_ms: int("until_ms"),
            token: LeaseToken(token),
            json: v,
        })
    }
}

fn bad_answer(e: impl std::fmt::Display) -> Error {
    Error::Server {
        status: 200,
        code: "bad_answer".into(),
        message: format!("the server's answer is not what this client reads: {e}"),
    }
}

/// `s` without any of `secrets` or the token.
fn scrub(mut s: String, secrets: &[&str], token: Option<&Token>) -> String {
    for secret in secrets.iter().copied().filter(|x| x.len() >= 4) {
        s = s.replace(secret, "***");
    }
    if let Some(t) = token {
        let raw = t.bearer();
        let raw = raw.trim_start_matches("Bearer ");
        s = s.replace(raw, "***");
    }
    s
}

/// An error and its causes, `a: b: c`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}

/// The TLS failure behind a request error, if that is what it was.
fn tls_cause(e: &(dyn std::error::Error + Send + Sync + 'static)) -> Option<String> {
    let mut src: Option<&(dyn std::error::Error + 'static)> =
        Some(e as &(dyn std::error::Error + 'static));
    while let Some(c) = src {
        if let Some(t) = c.downcast_ref::<rustls::Error>() {
            return Some(t.to_string());
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(t) = inner.downcast_ref::<rustls::Error>()
        {
            return Some(t.to_string());
        }
        src = c.source();
    }
    // Layers that keep only the text of rustls' error.
    let text = chain(e);
    [
        "invalid peer certificate",
        "received fatal alert",
        "peer sent no certificates",
    ]
    .iter()
    .any(|m| text.contains(m))
    .then(|| {
        text.rsplit(": ")
            .next()
            .map_or_else(|| text.clone(), |t| t.to_owned())
    })
}

#[cfg(test)]
mod top_tests {
    use super::top_rows;
    use keysmith_core::top::NameKind;
    use serde_json::json;

    #[test]
    fn the_rows_of_top_are_read_from_a_status_answer() {
        let status = json!({
            "uptime_seconds": 3,
            "sequences": [
                {"name": "orders", "rate": 12.5, "runway_seconds": 80.0, "remaining": "9007199254740993",
                 "lease": {"holder": "http://10.0.0.5:7878 pid 7", "term": 3, "expires_in_ms": 2500}},
                {"name": "idle", "rate": 0.0, "runway": "–", "remaining": "10"}
            ],
            "pools": [{"name": "seats", "rate": 1.0, "runway_seconds": null}]
        });
        let rows = top_rows(&status).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].remaining, Some(9_007_199_254_740_993));
        assert_eq!(rows[0].runway_seconds, Some(80.0));
        let lease = rows[0].lease.as_ref().unwrap();
        assert!(lease.held() && lease.term == 3, "{lease:?}");
        assert_eq!(
            (rows[1].runway_seconds, rows[1].lease.as_ref()),
            (None, None)
        );
        assert_eq!(
            (rows[2].kind, rows[2].rate_per_second),
            (NameKind::Pool, Some(1.0))
        );
        let e = top_rows(&json!({"sequences": [{"rate": 1.0}]})).unwrap_err();
        assert!(e.to_string().contains("without a name"), "{e}");
    }
}

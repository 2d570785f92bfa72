//! The keysmith HTTP service: sequences, value pools, host counters and
//! shard keys for any language, as JSON over HTTP.
//!
//! The server only parses requests, calls the `keysmith` library and maps
//! its errors to statuses ([`ApiError`]); every allocation happens in the
//! library. It keeps one [`keysmith::sequence::Sequence`] handle per name,
//! opened on first use, so all of its clients share that handle's block
//! cache and get values that increase in the order the requests were
//! answered: a request sent after another was answered gets larger values.
//! Unused block tails go back to the store when the server stops cleanly.
//!
//! The routes, their parameters, bodies, answers and statuses are
//! described by `GET /openapi.json` ([`openapi::document`]), which is made
//! with the router from one route list: sequences (create, alter, next,
//! reserve and release, gap-free tickets), value pools, host counter names,
//! fences, time-ordered ids and worker leases, shard keys, the probes
//! (`/livez`, `/readyz`: no token; `/healthz`, the store ping: a principal
//! when the server has tokens), `/metrics`, and the status page (`/`,
//! `/v1/status`). A browser's cross-site request is refused unless its
//! origin is allowed, and without a token only a loopback `Host` is
//! answered ([`origin`]); strangers are bounded per client address
//! ([`per_ip`]).
//!
//! Errors are `{"error": {"code", "message"}}`, also for request heads
//! hyper refuses: 400 bad input, 401 no, wrong or malformed token, 404
//! unknown name, 405 wrong method, 409 exists or exhausted, 413 body or
//! count over the limit, 431 request head too large, 503 with `Retry-After`
//! for contention, an unavailable store or a request past the timeout.
//!
//! A route that takes values (`next`, `reserve`, `release`) is never cut
//! off once it takes values: a pool request stops a little before the
//! request timeout and answers with what it took (`"partial"`); a sequence
//! request is one reservation (or hand-back), and one the store does not
//! finish by then is answered with a 503 `timeout` while it goes on in the
//! background (its values are skipped, a gap). Their request bodies must
//! arrive by then too, or the answer is a 408. Connections are
//! capped ([`Config::max_connections`]) and closed when a client is too
//! slow to send headers or idle ([`Config::header_read_timeout`],
//! [`Config::idle_timeout`]). With [`Config::tls`] the server speaks HTTPS
//! only, and with a client CA requires client certificates ([`tls`]);
//! [`AppState::reload`] reads the files again.
//!
//! Nothing is kept in memory for a name that does not exist. The handles
//! kept per name are bounded: one no request used for
//! [`Config::handle_idle`] is closed (its unused tail handed back), and at
//! [`Config::max_open_handles`] of a kind an idle one is closed to open
//! another, the least recently used of the principal that opened the most
//! (a 503 when every one is in use). Metric series per name are capped at
//! [`Config::max_metric_names`] per principal; its names past it are
//! counted under `name="_other"`.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), keysmith_server::ServeError> {
//! let config = keysmith_server::Config {
//!     store_url: "sqlite://keysmith.db".into(),
//!     ..Default::default()
//! };
//! // Serves on 127.0.0.1:7878 until ctrl-c, then closes every handle.
//! keysmith_server::serve(config, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await
//! # }
//! ```
#![forbid(unsafe_code)]
#![recursion_limit = "256"]
#![warn(missing_docs)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use keysmith::pool::ValuePool;
use keysmith::sequence::AdaptivePolicy;
use keysmith::sequence::{MAX_BATCH, Strategy};
use keysmith::shard_key::{ShardKeyCodec, ShardKeySecret};
use keysmith::store::Store;

pub mod access;
pub mod audit;
mod auth;
mod conn;
mod error;
mod extract;
mod handles;
mod history;
mod html;
mod metrics;
pub mod openapi;
pub mod origin;
pub mod per_ip;
mod quota;
pub mod reload;
pub mod request_log;
mod routes;
mod runway;
mod schemas;
mod status;
pub mod tls;

#[allow(deprecated)]
pub use auth::OPEN_PATH;
pub use auth::{OPEN_PATHS, TOKEN_ENV, Token};
pub use conn::MAX_HEAD_BYTES;
pub use error::{ApiError, ErrorCode, RETRY_AFTER_SECS};
pub use per_ip::{
    AUTH_FAILURE_WINDOW, DEFAULT_AUTH_FAILURES_PER_IP, DEFAULT_MAX_CONNECTIONS_PER_IP,
};
pub use tls::TlsFiles;

use handles::{HandleLimits, Handles};
use metrics::{Gauges, HandleCounters, Metrics};

/// The address the server listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";
/// The default most values one request may ask for.
pub const DEFAULT_MAX_COUNT: i64 = 100_000;
/// The default largest pool `POST /v1/pools` creates: its members are
/// written in one transaction, which must finish within the request timeout.
pub const DEFAULT_MAX_POOL_SIZE: i64 = 100_000;
/// The default largest request body, in bytes.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024;
/// The default longest time a request may take.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The default longest time a client may take to send a request's headers.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The default longest time a connection stays open with no request in flight.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The default most connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// The default largest skip of `POST /v1/fence`.
pub const DEFAULT_MAX_FENCE_SKIP: i64 = 1_000_000_000;
/// The default longest TTL of a worker lease (`POST /v1/workers/...`).
pub const DEFAULT_MAX_WORKER_TTL: Duration = Duration::from_secs(300);
/// The default most worker ids of a group a lease may ask for (`max`).
pub const DEFAULT_MAX_WORKER_GROUP: i64 = 65_536;
/// The default time after which a handle no request used is closed.
pub const DEFAULT_HANDLE_IDLE: Duration = Duration::from_secs(300);
/// The default most handles of one kind open at once.
pub const DEFAULT_MAX_OPEN_HANDLES: usize = 10_000;
/// The default most names with metric series of their own.
pub const DEFAULT_MAX_METRIC_NAMES: usize = 1_000;

/// How to run a server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen. Default [`DEFAULT_LISTEN`]; port 0 picks a free port
    /// (see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// The store URL, as for [`keysmith::store::open`]. Default
    /// [`keysmith::store::default_url`].
    pub store_url: String,
    /// The bearer token every route but [`OPEN_PATHS`] needs. `None`: no auth,
    /// allowed only on a loopback address unless `insecure_no_auth`.
    pub token: Option<Token>,
    /// Allows listening on a non-loopback address without a token.
    pub insecure_no_auth: bool,
    /// The access file: principals, their credentials and grants
    /// ([`access`]). Read at start and again on [`AppState::reload`]. Not
    /// with [`Config::token`]: a token the file does not show is refused
    /// (name it in the file).
    pub access_file: Option<std::path::PathBuf>,
    /// Where audit lines are appended besides the log target
    /// [`audit::TARGET`] ([`audit`]).
    pub audit_log: Option<std::path::PathBuf>,
    /// Serve HTTPS with these files (and, with a client CA, require client
    /// certificates); `None` (the default): plain HTTP. Read at start and on
    /// [`AppState::reload`]; see [`tls`].
    pub tls: Option<TlsFiles>,
    /// The most values one request may ask for (1 to
    /// [`keysmith::sequence::MAX_BATCH`]), by `next` or `reserve`; more is
    /// a 413.
    pub max_count: i64,
    /// The largest `skip` of `POST /v1/fence` (1 to
    /// [`keysmith::store::MAX_RESERVATION`]); more is a 413 and moves
    /// nothing. Default [`DEFAULT_MAX_FENCE_SKIP`].
    pub max_fence_skip: i64,
    /// The longest `ttl_ms` of a worker lease or renewal (1 ms to
    /// [`keysmith::store::MAX_WORKER_TTL`]); longer is a 413. Default
    /// [`DEFAULT_MAX_WORKER_TTL`].
    pub max_worker_ttl: Duration,
    /// The largest `max` (worker ids in the group) of a worker lease (1 to
    /// [`keysmith::store::MAX_WORKERS`]); more is a 413. Default
    /// [`DEFAULT_MAX_WORKER_GROUP`].
    pub max_worker_group: i64,
    /// A handle (sequence or pool) no request used for this long is closed,
    /// handing its unused tail back; the next request opens it again.
    /// Default [`DEFAULT_HANDLE_IDLE`].
    pub handle_idle: Duration,
    /// The most handles of one kind (plain sequences, numbered sequences,
    /// pools) open at once; opening one more first closes one that no
    /// request holds (the least recently used of the principal that opened
    /// the most), and fails with a 503 when every one is in use. Default [`DEFAULT_MAX_OPEN_HANDLES`].
    pub max_open_handles: usize,
    /// The most names with metric series of their own, per principal (the
    /// one whose request opened the name's handle); the handles of its names
    /// past it are counted under `name="_other"`. Default
    /// [`DEFAULT_MAX_METRIC_NAMES`].
    pub max_metric_names: usize,
    /// How long the server keeps serving after the shutdown signal with
    /// `GET /readyz` answering 503, before it stops accepting connections
    /// (so that a load balancer takes it out first). Default 0.
    pub shutdown_delay: Duration,
    /// The largest pool `POST /v1/pools` creates (1 to
    /// [`keysmith::pool::MAX_POOL_SIZE`]); larger is a 413. Creating a pool
    /// writes every member, so this keeps a create within the request
    /// timeout. Default [`DEFAULT_MAX_POOL_SIZE`].
    pub max_pool_size: i64,
    /// The largest request body in bytes; more is a 413.
    pub body_limit: usize,
    /// The longest a request may take; then it is answered with a 503.
    /// The `next` routes of sequences and pools are not cut off (that could
    /// drop values already taken): a pool request stops taking numbers a
    /// little before this and answers with what it has (`"partial"`), and a
    /// sequence request, one reservation, waits for the store.
    pub request_timeout: Duration,
    /// HTTP/1: the longest a client may take to send a request's headers,
    /// counted from when the server starts waiting for them (the connection
    /// opened, or the previous answer was sent); then the connection is
    /// closed. Also the longest any connection may stay open before its
    /// first request. Default [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// The longest a connection that has had a request stays open with no
    /// request in flight (HTTP/2 and HTTP/1 alike; an idle HTTP/1
    /// connection is closed earlier by the header timeout). Default
    /// [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// The most connections served at once; more wait to be accepted until
    /// one closes. Keep it under the process's open-file limit. Default
    /// [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// The most connections one client address (an IPv4 address, an IPv6
    /// /64) holds at once ([`per_ip`]); one more is accepted and closed at
    /// once. At most `max_connections` takes effect. Default
    /// [`DEFAULT_MAX_CONNECTIONS_PER_IP`].
    pub max_connections_per_ip: usize,
    /// The most failed authentications (401s) of one client address in
    /// [`AUTH_FAILURE_WINDOW`]; past it, every request from that address
    /// that needs a credential gets a 429 with `Retry-After` until the window
    /// ends, without a token lookup. 0: no such budget. Default
    /// [`DEFAULT_AUTH_FAILURES_PER_IP`].
    pub auth_failures_per_ip: u32,
    /// Origins (`scheme://host[:port]`) whose browser requests are served
    /// ([`origin`]); a request with any other `Origin` (or `Sec-Fetch-Site:
    /// cross-site`) is refused with a 403. Default: none.
    pub allow_origins: Vec<String>,
    /// How the server's sequence handles reserve blocks.
    pub strategy: Strategy,
    /// How long a reservation or pool take keeps retrying races lost to
    /// other writers before the request fails with contention (a 503); less
    /// than `request_timeout`. `None` (the default): half the request timeout.
    pub retry_budget: Option<Duration>,
    /// How the server's handles size their blocks; `None` keeps each at its
    /// sequence's block size. Default: [`AdaptivePolicy::default`].
    pub adaptive: Option<AdaptivePolicy>,
    /// Where `POST /v1/counters/next` takes its names from.
    pub counter: CounterConfig,
    /// The secret that signs shard key strings; without one (and without
    /// `shard_key_secret_file`) the shard key routes answer 501 (the server
    /// never makes unsigned strings, which anyone could forge).
    pub shard_key_secret: Option<ShardKeySecret>,
    /// A file of shard key secrets (a key list or one bare secret, see
    /// [`keysmith::secrets`]), read at start and again by
    /// [`AppState::reload_secrets`]. Set this or `shard_key_secret`, not both.
    pub shard_key_secret_file: Option<std::path::PathBuf>,
    /// The key that signs lease tokens of `POST /v1/sequences/{name}/reserve`
    /// and of worker leases. `None` (the default, without
    /// `lease_secret_file`): a random key, so a release must come back to
    /// the same server process; give servers behind one load balancer the
    /// same key (`$KEYSMITH_LEASE_SECRET` or a lease secret file).
    pub lease_key: Option<keysmith::sequence::lease::LeaseKey>,
    /// A file of lease secrets (a key list or one bare secret, see
    /// [`keysmith::secrets`]), read at start and again by
    /// [`AppState::reload_secrets`]. Set this or `lease_key`, not both.
    pub lease_secret_file: Option<std::path::PathBuf>,
    /// The time-ordered ids of `POST /v1/ids/next`: layout, group, lease.
    /// The server leases its worker id on the first request and releases it
    /// on shutdown. Default: [`keysmith::ids::IdConfig::new`] of the
    /// Snowflake layout.
    pub ids: keysmith::ids::IdConfig,
    /// The address this server advertises while it leads a leader-ordered
    /// sequence (`http://host:port`): followers answer callers with it (a
    /// 421 `not_leader`). `None` (the default): `http(s)://` and the bound
    /// address when it is not a wildcard (0.0.0.0, ::); behind a wildcard
    /// without one, the server still leads, and followers say it advertises
    /// no address.
    pub advertise: Option<String>,
    /// The time to live of the leader leases this server takes
    /// ([`keysmith::sequence::LeaderOptions::ttl`]): a leader that dies is
    /// replaced within it. Between 200 ms and a day; default 3 s
    /// ([`keysmith::sequence::leader::DEFAULT_LEADER_TTL`]). Every server
    /// over one store should use the same.
    pub leader_ttl: Duration,
}

/// How long a `/metrics` scrape waits for the store (runway and unaccounted
/// gauges) before it answers without them.
const METRICS_STORE_BUDGET: Duration = Duration::from_millis(250);

/// The host counter of `POST /v1/counters/next`, opened on first use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterConfig {
    /// The counter directory; `None`:
    /// [`HostCounter::default_dir`](keysmith::names::HostCounter::default_dir).
    /// Every process on a host that hands out counter names must use the
    /// same directory.
    pub dir: Option<std::path::PathBuf>,
    /// The host name that prefixes the names; `None`: the system host name.
    pub host: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: DEFAULT_LISTEN.parse().expect("valid default address"),
            store_url: keysmith::store::default_url(),
            token: None,
            insecure_no_auth: false,
            access_file: None,
            audit_log: None,
            tls: None,
            max_count: DEFAULT_MAX_COUNT,
            max_fence_skip: DEFAULT_MAX_FENCE_SKIP,
            max_worker_ttl: DEFAULT_MAX_WORKER_TTL,
            max_worker_group: DEFAULT_MAX_WORKER_GROUP,
            handle_idle: DEFAULT_HANDLE_IDLE,
            max_open_handles: DEFAULT_MAX_OPEN_HANDLES,
            max_metric_names: DEFAULT_MAX_METRIC_NAMES,
            shutdown_delay: Duration::ZERO,
            max_pool_size: DEFAULT_MAX_POOL_SIZE,
            body_limit: DEFAULT_BODY_LIMIT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            auth_failures_per_ip: DEFAULT_AUTH_FAILURES_PER_IP,
            allow_origins: Vec::new(),
            strategy: Strategy::default(),
            retry_budget: None,
            adaptive: Some(AdaptivePolicy::default()),
            counter: CounterConfig::default(),
            shard_key_secret: None,
            shard_key_secret_file: None,
            lease_key: None,
            lease_secret_file: None,
            ids: keysmith::ids::IdConfig::new(keysmith::ids::Layout::snowflake()),
            advertise: None,
            leader_ttl: keysmith::sequence::leader::DEFAULT_LEADER_TTL,
        }
    }
}

impl Config {
    /// Checks the limits, that a server reachable from other hosts has a
    /// token (or is explicitly told `insecure_no_auth`), and that the TLS
    /// files, if any, can be read and used together.
    ///
    /// # Errors
    /// [`ServeError::Config`] saying what to change (for a TLS file: which
    /// file, and what is wrong with it).
    pub fn validate(&self) -> Result<(), ServeError> {
        self.check().map(drop)
    }

    /// [`Config::validate`], returning the TLS listener the files make.
    fn check(&self) -> Result<Option<tls::Tls>, ServeError> {
        if let Some(a) = &self.advertise {
            keysmith::sequence::leader::check_advertise(a)
                .map_err(|e| ServeError::Config(format!("advertise: {e}")))?;
        }
        keysmith::sequence::LeaderOptions {
            ttl: self.leader_ttl,
            ..Default::default()
        }
        .validate()
        .map_err(|e| ServeError::Config(format!("leader ttl: {e}")))?;
        self.ids
            .validate(keysmith::ids::wall_ms())
            .map_err(|e| ServeError::Config(format!("ids: {e}")))?;
        if !(1..=MAX_BATCH).contains(&self.max_count) {
            return Err(ServeError::Config(format!(
                "max count must be between 1 and {MAX_BATCH}, got {}",
                self.max_count
            )));
        }
        if !(1..=keysmith::pool::MAX_POOL_SIZE).contains(&self.max_pool_size) {
            return Err(ServeError::Config(format!(
                "max pool size must be between 1 and {}, got {}",
                keysmith::pool::MAX_POOL_SIZE,
                self.max_pool_size
            )));
        }
        let max_skip = keysmith::store::MAX_RESERVATION;
        if !(1..=max_skip).contains(&self.max_fence_skip) {
            return Err(ServeError::Config(format!(
                "max fence skip must be between 1 and {max_skip}, got {}",
                self.max_fence_skip
            )));
        }
        let max_ttl = keysmith::store::MAX_WORKER_TTL;
        if self.max_worker_ttl < Duration::from_millis(1) || self.max_worker_ttl > max_ttl {
            return Err(ServeError::Config(format!(
                "max worker ttl must be between 1 ms and {} ms, got {} ms",
                max_ttl.as_millis(),
                self.max_worker_ttl.as_millis()
            )));
        }
        let max_workers = keysmith::store::MAX_WORKERS;
        if !(1..=max_workers).contains(&self.max_worker_group) {
            return Err(ServeError::Config(format!(
                "max worker group must be between 1 and {max_workers}, got {}",
                self.max_worker_group
            )));
        }
        if self.handle_idle.is_zero() {
            return Err(ServeError::Config(
                "the handle idle time must be more than 0".into(),
            ));
        }
        if self.max_open_handles == 0 || self.max_metric_names == 0 {
            return Err(ServeError::Config(
                "max open handles and max metric names must be at least 1".into(),
            ));
        }
        if self.body_limit == 0 {
            return Err(ServeError::Config(
                "the body limit must be at least 1 byte".into(),
            ));
        }
        if let Some(budget) = self.retry_budget
            && budget >= self.request_timeout
        {
            return Err(ServeError::Config(format!(
                "the retry budget ({} ms) must be below the request timeout ({} ms), so that a contended request is answered before it times out",
                budget.as_millis(),
                self.request_timeout.as_millis()
            )));
        }
        if let Some(a) = &self.adaptive {
            a.validate()
                .map_err(|e| ServeError::Config(e.to_string()))?;
        }
        if self.request_timeout.is_zero() {
            return Err(ServeError::Config(
                "the request timeout must be more than 0".into(),
            ));
        }
        if self.header_read_timeout.is_zero() || self.idle_timeout.is_zero() {
            return Err(ServeError::Config(
                "the header and idle timeouts must be more than 0".into(),
            ));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(ServeError::Config(format!(
                "max connections must be between 1 and {MAX_CONNECTIONS}, got {}",
                self.max_connections
            )));
        }
        if self.max_connections_per_ip == 0 {
            return Err(ServeError::Config(
                "max connections per ip must be at least 1".into(),
            ));
        }
        for o in &self.allow_origins {
            origin::normalize(o).map_err(|e| ServeError::Config(format!("allow origin: {e}")))?;
        }
        if self.shard_key_secret.is_some() && self.shard_key_secret_file.is_some() {
            return Err(ServeError::Config(
                "both a shard key secret and a shard key secret file are set; set one (the file can be reloaded)"
                    .into(),
            ));
        }
        if self.lease_key.is_some() && self.lease_secret_file.is_some() {
            return Err(ServeError::Config(
                "both a lease key and a lease secret file are set; set one (the file can be reloaded)"
                    .into(),
            ));
        }
        if let (Some(_), Some(file)) = (&self.token, &self.access_file) {
            return Err(ServeError::Config(format!(
                "a token (${TOKEN_ENV} or --token-file) and an access file ({}) are both given: the token would be a principal with every right that the file does not show. \
                 Name it in the file instead: add a [[principal]] with token_sha256 = the digest `keysmith access hash` prints (the token on standard input) and the grants it needs, \
                 then unset ${TOKEN_ENV} or drop --token-file",
                file.display()
            )));
        }
        if self.token.is_none()
            && self.access_file.is_none()
            && !self.listen.ip().is_loopback()
            && !self.insecure_no_auth
        {
            return Err(ServeError::Config(format!(
                "refusing to listen on {} without a token: anyone who can reach it could take and waste values. \
                 Set ${TOKEN_ENV}, --token-file or --access-file, listen on 127.0.0.1, or pass --insecure-no-auth",
                self.listen
            )));
        }
        self.tls.clone().map(tls::Tls::new).transpose()
    }
}

/// The largest [`Config::max_connections`].
pub const MAX_CONNECTIONS: usize = 1 << 20;

/// Why a server could not start or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration is not acceptable.
    #[error("{0}")]
    Config(String),
    /// The store could not be opened.
    #[error("cannot open the store: {0}")]
    Store(#[from] keysmith::Error),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("serving failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The limits and choices handlers need.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) max_count: i64,
    pub(crate) max_fence_skip: i64,
    pub(crate) max_worker_ttl: Duration,
    pub(crate) max_worker_group: i64,
    pub(crate) max_pool_size: i64,
    pub(crate) body_limit: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) strategy: Strategy,
    pub(crate) retry_budget: Duration,
    pub(crate) adaptive: Option<AdaptivePolicy>,
    pub(crate) counter: CounterConfig,
    /// What the server advertises while it leads ([`Config::advertise`]).
    pub(crate) advertise: Option<String>,
    /// [`Config::leader_ttl`].
    pub(crate) leader_ttl: Duration,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) options: Options,
    /// The token's digest, if the server has one (a principal of
    /// [`Shared::access`], kept apart for reloads).
    pub(crate) token: Option<[u8; 32]>,
    pub(crate) access_file: Option<std::path::PathBuf>,
    /// Who may do what; swapped whole by [`AppState::reload`].
    pub(crate) access: arc_swap::ArcSwap<AccessState>,
    pub(crate) audit: audit::Audit,
    /// [`Config::allow_origins`], normalized.
    pub(crate) allow_origins: Vec<String>,
    /// [`Config::insecure_no_auth`] (the `Host` check takes IP addresses).
    pub(crate) insecure_no_auth: bool,
    /// Failed authentications per client address.
    pub(crate) failed_auth: per_ip::FailedAuth,
    /// Creates under a quota run one at a time.
    pub(crate) create_lock: tokio::sync::Mutex<()>,
    /// What each principal made that the store does not count for it.
    pub(crate) quotas: quota::Quotas,
    /// Reloads run one at a time.
    pub(crate) reloading: std::sync::Mutex<()>,
    /// Sequences' handles, of either kind (a numbered one holds its
    /// settings, read once).
    pub(crate) sequences: Handles<keysmith::AnySequence>,
    pub(crate) pools: Handles<ValuePool>,
    pub(crate) counter: tokio::sync::OnceCell<Arc<keysmith::names::HostCounter>>,
    /// Read once per request; replaced by [`AppState::reload_secrets`].
    pub(crate) shard_codec: Swappable<Option<Arc<ShardKeyCodec>>>,
    /// Read once per request; replaced by [`AppState::reload_secrets`].
    pub(crate) lease_key: Swappable<Arc<keysmith::sequence::lease::LeaseKey>>,
    /// The files `reload_secrets` reads again.
    secret_files: SecretFiles,
    /// Per sequence, the ranges this server reserved (handles and leases
    /// alike): a store that hands them out again is refused.
    pub(crate) high_waters: keysmith::sequence::HighWaters,
    pub(crate) metrics: Metrics,
    /// The status page's charts: each open sequence sampled every
    /// [`history::SAMPLE_EVERY`] over the last hour.
    pub(crate) history: history::History,
    pub(crate) started: Instant,
    pub(crate) ids_config: keysmith::ids::IdConfig,
    /// Leased on the first `POST /v1/ids/next`.
    pub(crate) ids: tokio::sync::OnceCell<Arc<keysmith::ids::IdGenerator>>,
    /// The TLS listener's configuration, if the server serves HTTPS.
    pub(crate) tls: Option<Arc<tls::Tls>>,
    /// Set when the shutdown signal came: `GET /readyz` answers 503.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    handle_idle: Duration,
}

/// Who may do what, as read from the access file and the token.
#[derive(Debug, Default)]
pub(crate) struct AccessState {
    /// `None`: no authentication (neither token nor access file).
    pub(crate) file: Option<access::AccessFile>,
    /// The request rate of each principal that has one, by name, with the
    /// rate it was made for (a reload keeps a limiter whose rate is the same,
    /// so that reloading refills no one's burst).
    pub(crate) limiters:
        std::collections::HashMap<String, (access::Rate, Arc<governor::DefaultDirectRateLimiter>)>,
    /// How many readings of the access file came before this one: a
    /// request allowed under another generation checks its grant again
    /// before it writes (`auth::regrant`).
    pub(crate) generation: u64,
}

impl AccessState {
    fn load(
        path: Option<&std::path::Path>,
        token: Option<[u8; 32]>,
        previous: Option<&AccessState>,
        tls: Option<&tls::Tls>,
    ) -> Result<AccessState, String> {
        let file = match (path, token) {
            (None, None) => return Ok(AccessState::default()),
            (Some(p), _) => access::AccessFile::load(p)?,
            (None, Some(_)) => access::AccessFile::default(),
        };
        let file = match token {
            Some(t) => file.with_token(t)?,
            None => file,
        };
        let cas = tls.and_then(tls::Tls::client_cas);
        file.check_client_ca(cas.as_deref())?;
        let limiters = file
            .principals()
            .iter()
            .filter_map(|p| {
                let r = p.rate?;
                let kept = previous
                    .and_then(|prev| prev.limiters.get(&p.name))
                    .filter(|(rate, _)| *rate == r)
                    .map(|(_, l)| l.clone());
                let limiter = kept.unwrap_or_else(|| {
                    let quota = governor::Quota::per_second(r.per_second).allow_burst(r.burst);
                    Arc::new(governor::RateLimiter::direct(quota))
                });
                Some((p.name.clone(), (r, limiter)))
            })
            .collect();
        Ok(AccessState {
            file: Some(file),
            limiters,
            generation: previous.map_or(0, |p| p.generation + 1),
        })
    }
}

/// A value every request reads once and a reload replaces whole: a lock
/// held only to clone it, never across an await.
#[derive(Debug)]
pub(crate) struct Swappable<T: Clone>(std::sync::RwLock<T>);

impl<T: Clone> Swappable<T> {
    fn new(value: T) -> Self {
        Swappable(std::sync::RwLock::new(value))
    }

    /// The current value.
    pub(crate) fn get(&self) -> T {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set(&self, value: T) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = value;
    }
}

/// The secret files a server reads at start and on reload.
#[derive(Debug)]
struct SecretFiles {
    lease: Option<std::path::PathBuf>,
    shard_key: Option<std::path::PathBuf>,
}

impl SecretFiles {
    /// Both files' keys (`None` for a file not configured), or the first
    /// error.
    fn read(&self) -> Result<FileSecrets, ServeError> {
        let bad = |e: keysmith::Error| ServeError::Config(e.to_string());
        let lease = self
            .lease
            .as_deref()
            .map(keysmith::sequence::lease::LeaseKey::from_file)
            .transpose()
            .map_err(bad)?;
        let shard = self
            .shard_key
            .as_deref()
            .map(ShardKeySecret::from_file)
            .transpose()
            .map_err(bad)?;
        Ok(FileSecrets { lease, shard })
    }
}

/// What [`SecretFiles::read`] read.
struct FileSecrets {
    lease: Option<keysmith::sequence::lease::LeaseKey>,
    shard: Option<ShardKeySecret>,
}

/// What every request of one server shares: the store, the open handles,
/// the metrics. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

impl AppState {
    /// State over an open store, with the limits, token and strategy of
    /// `config` (its `listen` and `store_url` are not used here).
    ///
    /// # Errors
    /// [`ServeError::Config`] as [`Config::validate`], or naming the file
    /// and line when a secret file cannot be read or parsed.
    pub fn new(store: Arc<dyn Store>, config: &Config) -> Result<AppState, ServeError> {
        let tls = config.check()?.map(Arc::new);
        let token = config.token.as_ref().map(Token::digest);
        let access = AccessState::load(config.access_file.as_deref(), token, None, tls.as_deref())
            .map_err(ServeError::Config)?;
        let audit = audit::Audit::open(config.audit_log.as_deref()).map_err(ServeError::Config)?;
        let limits = HandleLimits {
            max_open: config.max_open_handles,
            idle: config.handle_idle,
        };
        let secret_files = SecretFiles {
            lease: config.lease_secret_file.clone(),
            shard_key: config.shard_key_secret_file.clone(),
        };
        let from_files = secret_files.read()?;
        let lease_key = from_files
            .lease
            .or_else(|| config.lease_key.clone())
            .unwrap_or_else(keysmith::sequence::lease::LeaseKey::random);
        let shard_codec = from_files
            .shard
            .as_ref()
            .or(config.shard_key_secret.as_ref())
            .map(|s| Arc::new(ShardKeyCodec::signed(s)));
        let state = AppState {
            shared: Arc::new(Shared {
                store,
                access_file: config.access_file.clone(),
                access: arc_swap::ArcSwap::from_pointee(access),
                audit,
                allow_origins: config
                    .allow_origins
                    .iter()
                    .filter_map(|o| origin::normalize(o).ok())
                    .collect(),
                insecure_no_auth: config.insecure_no_auth,
                failed_auth: per_ip::FailedAuth::new(
                    config.auth_failures_per_ip,
                    AUTH_FAILURE_WINDOW,
                ),
                create_lock: tokio::sync::Mutex::new(()),
                quotas: quota::Quotas::default(),
                reloading: std::sync::Mutex::new(()),
                options: Options {
                    max_count: config.max_count,
                    max_fence_skip: config.max_fence_skip,
                    max_worker_ttl: config.max_worker_ttl,
                    max_worker_group: config.max_worker_group,
                    max_pool_size: config.max_pool_size,
                    body_limit: config.body_limit,
                    request_timeout: config.request_timeout,
                    strategy: config.strategy,
                    retry_budget: config.retry_budget.unwrap_or(config.request_timeout / 2),
                    adaptive: config.adaptive,
                    counter: config.counter.clone(),
                    advertise: config.advertise.clone(),
                    leader_ttl: config.leader_ttl,
                },
                token,
                sequences: Handles::new(access::ObjectKind::Sequence, limits),
                high_waters: keysmith::sequence::HighWaters::new(),
                pools: Handles::new(access::ObjectKind::Pool, limits),
                counter: tokio::sync::OnceCell::new(),
                shard_codec: Swappable::new(shard_codec),
                lease_key: Swappable::new(Arc::new(lease_key)),
                secret_files,
                metrics: Metrics::new(config.max_metric_names),
                history: history::History::default(),
                started: Instant::now(),
                ids_config: config.ids.clone(),
                ids: tokio::sync::OnceCell::new(),
                tls,
                draining: std::sync::atomic::AtomicBool::new(false),
                handle_idle: config.handle_idle,
            }),
        };
        state.start_sampler();
        state.start_idle_sweeper();
        state.start_history_sampler();
        reload::watch(&state, state.watched_files(), |s| match s.reload() {
            Ok(()) => tracing::info!("a file changed: reloaded the TLS files and the access file"),
            Err(e) => tracing::error!("a file changed, but {e}; kept what was in use"),
        });
        Ok(state)
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The files a change of which reloads the server ([`reload`]).
    fn watched_files(&self) -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = self.shared.access_file.iter().cloned().collect();
        if let Some(t) = self.tls_files() {
            files.extend([t.cert.clone(), t.key.clone()]);
            files.extend(t.client_ca.iter().cloned());
        }
        let secrets = &self.shared.secret_files;
        files.extend(secrets.lease.iter().cloned());
        files.extend(secrets.shard_key.iter().cloned());
        files
    }

    /// Reads the access file again and, if it is good, uses it for every
    /// request from now on (requests in flight keep the one they started
    /// with). A bad file keeps the one in use. Either way one audit line
    /// ([`audit::Event::AccessReload`]) says what happened.
    ///
    /// # Errors
    /// [`ServeError::Config`] saying what is wrong with the file.
    pub fn reload_access(&self) -> Result<(), ServeError> {
        let s = &self.shared;
        let Some(path) = &s.access_file else {
            return Ok(());
        };
        let mut line = audit::Line::new(audit::Event::AccessReload);
        line.object = Some(audit::Object {
            kind: access::ObjectKind::AccessFile,
            name: Some(path.display().to_string()),
        });
        let previous = s.access.load_full();
        let outcome = AccessState::load(Some(path), s.token, Some(&previous), s.tls.as_deref());
        match outcome {
            Ok(access) => {
                line.after = Some(serde_json::json!({
                    "principals": access.file.as_ref().map_or(0, |f| f.principals().len()),
                }));
                s.access.store(Arc::new(access));
                s.audit.write(line);
                Ok(())
            }
            Err(e) => {
                line.reason = Some(format!("kept the access file in use: {e}"));
                s.audit.write(line);
                Err(ServeError::Config(e))
            }
        }
    }

    /// Reloads what the server reads from files: the TLS certificate, key
    /// and client CA of [`Config::tls`], the access file
    /// ([`Config::access_file`]), and the secret files
    /// ([`AppState::reload_secrets`]). `keysmith serve` calls it on SIGHUP, and
    /// the server itself when one of the files changes ([`reload`]).
    /// Connections accepted afterwards use the TLS files read; connections
    /// already open keep what they had. Requests that start afterwards use
    /// the access file read.
    ///
    /// Each part is all or nothing: a TLS file, an access file or a secret
    /// file that cannot be read or used leaves that part as it was, and the server
    /// goes on serving; the other part is still reloaded.
    ///
    /// # Errors
    /// [`ServeError::Config`] naming the file and saying what is wrong (the
    /// first failure).
    pub fn reload(&self) -> Result<(), ServeError> {
        // One reload at a time (SIGHUP and the file watcher may ask at
        // once): the last to finish read the newest files.
        let _one = self
            .shared
            .reloading
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let tls = match &self.shared.tls {
            Some(tls) => tls.reload(),
            None => Ok(()),
        };
        let access = self.reload_access();
        let secrets = self.reload_secrets();
        tls.and(access).and(secrets)
    }

    /// How many principals the server knows (those of the access file, or
    /// the one of its token); 0 without authentication.
    pub fn principals(&self) -> usize {
        self.shared
            .access
            .load()
            .file
            .as_ref()
            .map_or(0, |f| f.principals().len())
    }

    /// Opens the audit log ([`Config::audit_log`]) again, at its path: after
    /// logrotate renamed it, lines go to a new file there. Never fails: when
    /// the path cannot be opened, lines keep going to the file opened before
    /// and a warning is logged.
    pub fn reopen_audit_log(&self) {
        self.shared.audit.reopen();
    }

    /// The access file the server reads, if it has one.
    pub fn access_file(&self) -> Option<&std::path::Path> {
        self.shared.access_file.as_deref()
    }

    /// The secret files the server reads (lease, shard key), if any.
    pub fn secret_files(&self) -> Vec<&std::path::Path> {
        let f = &self.shared.secret_files;
        f.lease
            .iter()
            .chain(f.shard_key.iter())
            .map(|p| p.as_path())
            .collect()
    }

    /// The TLS files the server reads, if it serves HTTPS.
    pub fn tls_files(&self) -> Option<&TlsFiles> {
        self.shared.tls.as_deref().map(tls::Tls::files)
    }

    /// Reads the lease secret file and the shard key secret file again (those
    /// of [`Config::lease_secret_file`] and [`Config::shard_key_secret_file`];
    /// secrets given otherwise do not change) and signs with their newest
    /// keys from now on, accepting every listed key: tokens and strings
    /// signed with a key still listed keep working, those of a removed key
    /// are refused. Requests in flight finish with the keys they started
    /// with. Without secret files it changes nothing.
    ///
    /// # Errors
    /// [`ServeError::Config`] saying which file and line is wrong (never
    /// showing a secret) when a file cannot be read or parsed; then no key
    /// changes, in either file.
    pub fn reload_secrets(&self) -> Result<(), ServeError> {
        let s = &self.shared;
        let read = s.secret_files.read()?;
        if let Some(k) = read.lease {
            tracing::info!(keys = ?k.ids(), "lease secret file reloaded; the last key signs");
            s.lease_key.set(Arc::new(k));
        }
        if let Some(k) = read.shard {
            tracing::info!(keys = ?k.ids(), "shard key secret file reloaded; the last key signs");
            s.shard_codec.set(Some(Arc::new(ShardKeyCodec::signed(&k))));
        }
        Ok(())
    }

    /// Samples allocation rates once a second while the state lives (and a
    /// tokio runtime runs).
    fn start_sampler(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.shared);
        rt.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let Some(s) = weak.upgrade() else { return };
                let now = Instant::now();
                s.sequences.sample_all(now);
                s.pools.sample_all(now);
            }
        });
    }

    /// Closes the handles no request used for the idle time of the
    /// configuration, checking a few times per idle time (at most once a
    /// second), while the state lives (and a tokio runtime runs).
    fn start_idle_sweeper(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let every =
            (self.shared.handle_idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let weak = Arc::downgrade(&self.shared);
        rt.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let Some(s) = weak.upgrade() else { return };
                s.sequences.close_idle(&s.metrics).await;
                s.pools.close_idle(&s.metrics).await;
                // The marks of the handles closed keep only their ends.
                s.high_waters.release_unheld();
            }
        });
    }

    /// Samples every open plain sequence with series of its own (values the
    /// server handed out, and its runway: a store read each, within
    /// [`METRICS_STORE_BUDGET`] in all) every [`history::SAMPLE_EVERY`],
    /// the first time at once, while the state lives (and a tokio runtime
    /// runs). Names whose handles closed are forgotten.
    fn start_history_sampler(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.shared);
        rt.spawn(async move {
            let mut tick = tokio::time::interval(history::SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let Some(s) = weak.upgrade() else { return };
                let open: Vec<_> = s
                    .sequences
                    .snapshot()
                    .into_iter()
                    .filter(|(_, e)| e.named && matches!(e.handle, keysmith::AnySequence::Plain(_)))
                    .take(history::MAX_NAMES)
                    .collect();
                let at = s.started.elapsed().as_secs_f64();
                let mut runways = std::collections::HashMap::new();
                let _ = tokio::time::timeout(METRICS_STORE_BUDGET, async {
                    for (name, _) in &open {
                        if let Ok(info) = keysmith::sequence::show(&*s.store, name).await
                            && let Some(r) = info.usage.and_then(|u| u.runway_seconds)
                        {
                            runways.insert(name.clone(), r);
                        }
                    }
                })
                .await;
                for (name, e) in &open {
                    let served = e.served.load(std::sync::atomic::Ordering::Relaxed);
                    s.history
                        .record(name, at, served, runways.get(name).copied());
                }
                s.history
                    .retain(&open.into_iter().map(|(n, _)| n).collect());
            }
        });
    }

    /// Marks the server as draining: `GET /readyz` answers 503 from now on.
    pub fn start_draining(&self) {
        self.shared
            .draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) async fn render_metrics(&self) -> String {
        let s = self.shared();
        // Runway and unaccounted values of what this server serves: a store
        // read each, within a short bound, so that a slow or unreachable
        // store never holds up a scrape (the gauges are left out then).
        let (usage, pool_runways) = tokio::time::timeout(METRICS_STORE_BUDGET, async {
            let mut usage = Vec::new();
            for (name, e) in s.sequences.snapshot() {
                if !e.named || !matches!(e.handle, keysmith::AnySequence::Plain(_)) {
                    continue;
                }
                if let Ok(info) = keysmith::sequence::show(&*s.store, &name).await
                    && let Some(u) = info.usage
                {
                    usage.push((name, u, info.range_left_share()));
                }
            }
            let mut pool_runways = Vec::new();
            for (name, e) in s.pools.snapshot() {
                if !e.named {
                    continue;
                }
                if let Ok(Some(r)) = keysmith::pool::runway(&*s.store, e.handle.row()).await {
                    pool_runways.push((name, r));
                }
            }
            (usage, pool_runways)
        })
        .await
        .unwrap_or_default();
        let open_sequences = s.sequences.snapshot();
        let numbered = open_sequences
            .iter()
            .filter(|(_, e)| matches!(e.handle, keysmith::AnySequence::Numbered(_)))
            .count();
        let seqs: Vec<_> = open_sequences
            .into_iter()
            .filter_map(|(n, e)| {
                let keysmith::AnySequence::Plain(seq) = &e.handle else {
                    return None;
                };
                let st = seq.stats();
                Some((
                    if e.named {
                        n
                    } else {
                        metrics::OTHER.to_owned()
                    },
                    HandleCounters {
                        refills: st.reservations,
                        conflicts: st.conflicts,
                        size: seq.block(),
                        skipped_at_failover: st.skipped_at_failover,
                        refill_seconds: st.reservation_micros as f64 / 1e6,
                    },
                ))
            })
            .collect();
        // Leader-ordered sequences under their own names only (their
        // series are a gauge and two counters a name).
        let leaders: Vec<_> = open_sequences_leaders(s);
        let pools: Vec<_> = s
            .pools
            .snapshot()
            .into_iter()
            .map(|(n, e)| {
                let st = e.handle.stats();
                (
                    if e.named {
                        n
                    } else {
                        metrics::OTHER.to_owned()
                    },
                    HandleCounters {
                        refills: st.attempts,
                        conflicts: st.conflicts,
                        size: e.handle.size(),
                        skipped_at_failover: 0,
                        refill_seconds: 0.0,
                    },
                )
            })
            .collect();
        let ids = s.ids.get().map(|g| g.status());
        let ids_runway = runway::ids_runway(s).await;
        let mut text = s.metrics.render(
            &seqs,
            &s.high_waters.refused(),
            &pools,
            &leaders,
            &usage,
            &pool_runways,
            ids.as_ref(),
            ids_runway.as_ref(),
            s.started.elapsed().as_secs_f64(),
            Gauges {
                sequences: seqs.len(),
                numbered,
                pools: s.pools.len(),
                high_waters: s.high_waters.len(),
            },
        );
        text.push_str(&s.audit.metrics_text());
        // Server-wide: only for a caller that may read every name.
        if let Some(tls) = &s.tls
            && crate::access::visible("*")
        {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            text.push_str(&tls.metrics_text(now));
        }
        text
    }

    /// Closes every open handle, handing unused block tails back to the
    /// store where no one reserved since. Handles asked for afterwards fail
    /// with [`keysmith::Error::Closed`] (a 503).
    pub async fn close(&self) {
        self.shared.sequences.close_all().await;
        self.shared.pools.close_all().await;
        if let Some(g) = self.shared.ids.get()
            && let Err(e) = g.close().await
        {
            tracing::warn!("releasing the ids worker lease: {e}; it expires after its TTL");
        }
    }
}

/// How the server's handles of leader-ordered sequences lead, by name (those
/// past the per-name cap are left out: a gauge is not summed).
fn open_sequences_leaders(s: &Shared) -> Vec<(String, keysmith::sequence::LeaderStats)> {
    s.sequences
        .snapshot()
        .into_iter()
        .filter_map(|(n, e)| match &e.handle {
            keysmith::AnySequence::Leader(l) if e.named => Some((n, l.stats())),
            _ => None,
        })
        .collect()
}

/// Answers a request that runs past the timeout with a 503. Not on the
/// `next` routes of sequences and pools, which keep their own deadline
/// ([`routes::deadline`]) so that no reservation the store committed is
/// cut off.
async fn timeout(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limit = state.shared().options.request_timeout;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError::timeout(limit).into_response(),
    }
}

/// Counts requests in flight, error responses by code, and requests by
/// route template, method and status with their durations.
async fn observe(State(state): State<AppState>, req: Request, next: Next) -> Response {
    struct InFlight(prometheus::IntGauge);
    impl Drop for InFlight {
        fn drop(&mut self) {
            self.0.dec();
        }
    }
    let m = &state.shared().metrics;
    m.in_flight.inc();
    let _guard = InFlight(m.in_flight.clone());
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let method = req.method().clone();
    let res = next.run(req).await;
    if let Some(ErrorCode(code)) = res.extensions().get::<ErrorCode>() {
        m.errors.with_label_values(&[code]).inc();
    }
    m.observe_request(
        route.as_deref(),
        &method,
        res.status(),
        started.elapsed().as_secs_f64(),
    );
    res
}

/// Every route of the API, over `state`, with auth, the body limit, the
/// request timeout and error counting.
pub fn router(state: AppState) -> Router {
    let body_limit = state.shared().options.body_limit;
    let (bounded, taking) = openapi::api();
    // Innermost: a grant revoked while the request ran refuses it before
    // its handler writes.
    let regrant = middleware::from_fn_with_state(state.clone(), auth::regrant);
    let (bounded, taking) = (
        bounded.route_layer(regrant.clone()),
        taking.route_layer(regrant),
    );
    // Cut off at the request timeout: nothing here takes values.
    let bounded = bounded.route_layer(middleware::from_fn_with_state(state.clone(), timeout));
    // Their own deadline: they answer with what they took. The body must
    // arrive before it.
    let taking = taking.route_layer(middleware::from_fn_with_state(
        state.clone(),
        routes::body_by_deadline,
    ));
    let (bounded, _) = bounded.split_for_parts();
    let (taking, _) = taking.split_for_parts();
    bounded
        .merge(taking)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ))
        .fallback(routes::no_route)
        .method_not_allowed_fallback(routes::wrong_method)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        // Before any credential is looked at: browsers' requests.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            origin::screen,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        // Outermost: every line logged while a request runs carries its id.
        .layer(tower_http::request_id::PropagateRequestIdLayer::x_request_id())
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(request_log::span)
                .on_request(())
                .on_response(request_log::on_response)
                .on_failure(request_log::on_failure),
        )
        .layer(tower_http::request_id::SetRequestIdLayer::x_request_id(
            request_log::Ids::new(),
        ))
        .layer(middleware::from_fn(request_log::screen_client_id))
        .with_state(state)
}

/// A server bound to its address, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: tokio::net::TcpListener,
    state: AppState,
    router: Router,
    limits: conn::Limits,
    shutdown_delay: Duration,
}

impl Server {
    /// Checks the configuration, opens the store and binds the address.
    ///
    /// # Errors
    /// [`ServeError::Config`], [`ServeError::Store`], [`ServeError::Bind`].
    pub async fn bind(config: Config) -> Result<Server, ServeError> {
        config.validate()?;
        let store = keysmith::store::open(&config.store_url).await?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServeError::Bind {
                addr: config.listen,
                source,
            })?;
        let mut config = config;
        if config.advertise.is_none() {
            config.advertise = derived_advertise(listener.local_addr()?, config.tls.is_some());
        }
        let state = AppState::new(store, &config)?;
        let router = router(state.clone());
        Ok(Server {
            listener,
            state,
            router,
            limits: conn::Limits {
                header_read_timeout: config.header_read_timeout,
                idle_timeout: config.idle_timeout,
                max_connections: config.max_connections,
                max_connections_per_ip: config.max_connections_per_ip.min(config.max_connections),
            },
            shutdown_delay: config.shutdown_delay,
        })
    }

    /// The address actually bound (useful with port 0).
    ///
    /// # Errors
    /// [`ServeError::Io`] if the socket cannot say.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// The server's state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes, and [`Config::shutdown_delay`]
    /// more with `GET /readyz` answering 503; then stops accepting connections,
    /// lets the requests in flight finish, and closes every handle (handing
    /// unused block tails back). Connections that stay open longer than the
    /// request timeout plus [`SHUTDOWN_GRACE`] after the signal (a client
    /// that never finishes sending its request) are not waited for.
    ///
    /// At most [`Config::max_connections`] connections are served at once,
    /// each closed after [`Config::header_read_timeout`] or
    /// [`Config::idle_timeout`] without a request in flight.
    ///
    /// # Errors
    /// [`ServeError::Io`] if serving fails.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let grace = self.state.shared().options.request_timeout + SHUTDOWN_GRACE;
        let state = self.state.clone();
        let delay = self.shutdown_delay;
        let shutdown = async move {
            shutdown.await;
            state.start_draining();
            if !delay.is_zero() {
                tracing::info!(
                    "draining: /readyz answers 503; still serving for {} ms",
                    delay.as_millis()
                );
                tokio::time::sleep(delay).await;
            }
        };
        let tls = self.state.shared().tls.clone();
        conn::serve(
            self.listener,
            self.router,
            tls,
            self.limits,
            grace,
            shutdown,
        )
        .await;
        self.state.close().await;
        Ok(())
    }
}

/// The address a server bound to `addr` advertises without
/// [`Config::advertise`]: none behind a wildcard address.
fn derived_advertise(addr: SocketAddr, https: bool) -> Option<String> {
    let scheme = if https { "https" } else { "http" };
    (!addr.ip().is_unspecified()).then(|| format!("{scheme}://{addr}"))
}

/// How long past the request timeout a shutdown waits for open connections.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Binds, serves until `shutdown` completes, then shuts down gracefully (see
/// [`Server::run`]).
///
/// # Errors
/// As [`Server::bind`] and [`Server::run`].
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    Server::bind(config).await?.run(shutdown).await
}

//! `serve`: runs the HTTP service until SIGTERM or ctrl-c; SIGHUP reloads
//! the files it reads (the TLS certificate, key and client CA).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use keysmith::sequence::{AdaptivePolicy, DEFAULT_BLOCK_MAX, DEFAULT_REFILL_TARGET, Strategy};
use keysmith::shard_key::ShardKeySecret;
use keysmith_server::{
    Config, CounterConfig, DEFAULT_BODY_LIMIT, DEFAULT_HANDLE_IDLE, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_COUNT,
    DEFAULT_MAX_FENCE_SKIP, DEFAULT_MAX_METRIC_NAMES, DEFAULT_MAX_OPEN_HANDLES,
    DEFAULT_MAX_POOL_SIZE, DEFAULT_MAX_WORKER_GROUP, DEFAULT_MAX_WORKER_TTL, Server, TOKEN_ENV,
    TlsFiles, Token,
};
use keysmith_server::{DEFAULT_AUTH_FAILURES_PER_IP, DEFAULT_MAX_CONNECTIONS_PER_IP};

use crate::{Global, LogFormat};

/// Options of `keysmith serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A TOML file of these options, each key an option's long name
    /// (`listen = "127.0.0.1:7878"`, `request-timeout-ms = 5000`,
    /// `fixed-blocks = true`), and `store`. The command line wins over the
    /// file, the file over the environment; relative paths are from the
    /// file's directory.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// How log lines are written: text, or json (one object per line, each
    /// line of a request with its `request_id`, also sent back in
    /// `x-request-id`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Address to listen on. Port 0 picks a free port (the address is printed).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    listen: SocketAddr,
    /// A file holding the bearer token every route but the probes (/livez,
    /// /readyz) then needs
    /// (one trailing newline is dropped). Without it, $KEYSMITH_TOKEN is used
    /// if set. The token is never taken as an argument, where `ps` would show it.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// The address this server advertises while it leads a leader-ordered
    /// sequence (http://HOST:PORT or https://...): other servers send its
    /// callers there. Default: http(s):// and the --listen address, unless
    /// that is a wildcard (0.0.0.0, ::), where it must be given for other
    /// servers to point at this one.
    #[arg(long, value_name = "URL")]
    advertise: Option<String>,
    /// The time to live of the leader leases this server takes, in
    /// milliseconds: a leader that dies is replaced within it (plus one
    /// acquisition); shorter costs more store writes (a renewal every
    /// quarter of it). 200 ms to a day; every server over one store should
    /// use the same.
    #[arg(long, default_value_t = 3_000, value_name = "MS")]
    leader_ttl_ms: u64,
    /// Allow listening on a non-loopback address without a token.
    #[arg(long)]
    insecure_no_auth: bool,
    /// An access file: principals, known by a token digest or a client
    /// certificate subject, with grants (`use`, `read`, `admin` on name
    /// prefixes). Read again on SIGHUP and when it changes. `keysmith access
    /// check FILE` checks one, `keysmith access new NAME` makes a token and
    /// its entry. Not with --token-file or $KEYSMITH_TOKEN: name that token
    /// in the file instead.
    #[arg(long, value_name = "FILE")]
    access_file: Option<PathBuf>,
    /// Also append the audit trail (admin actions, access reloads, refused
    /// requests; JSON lines) to this file. It always goes to the log target
    /// keysmith::audit.
    #[arg(long, value_name = "PATH")]
    audit_log: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM: the server's certificate
    /// first, then intermediates). Needs --tls-key. SIGHUP reads it again.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require a client certificate signed by a CA of this PEM file (mutual
    /// TLS); a client without one is refused in the handshake. Needs
    /// --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    client_ca: Option<PathBuf>,
    /// The most values one request (next or reserve) may ask for; more is a 413.
    #[arg(long, default_value_t = DEFAULT_MAX_COUNT, value_name = "N")]
    max_count: i64,
    /// The largest skip of POST /v1/fence; more is a 413 and moves nothing.
    #[arg(long, default_value_t = DEFAULT_MAX_FENCE_SKIP, value_name = "N")]
    max_fence_skip: i64,
    /// The longest TTL of a worker lease (POST /v1/workers/...), in
    /// milliseconds; longer is a 413.
    #[arg(long, default_value_t = DEFAULT_MAX_WORKER_TTL.as_millis() as u64, value_name = "MS")]
    max_worker_ttl_ms: u64,
    /// The most worker ids of a group a worker lease may ask for (`max`);
    /// more is a 413.
    #[arg(long, default_value_t = DEFAULT_MAX_WORKER_GROUP, value_name = "N")]
    max_worker_group: i64,
    /// A sequence or pool handle no request used for this many seconds is
    /// closed (its unused values handed back); the next request opens it again.
    #[arg(long, default_value_t = DEFAULT_HANDLE_IDLE.as_secs(), value_name = "SECS")]
    handle_idle_secs: u64,
    /// The most handles of one kind (sequences, numbered sequences, pools)
    /// open at once; then the least recently used idle one is closed, or the
    /// request gets a 503 when every one is in use.
    #[arg(long, default_value_t = DEFAULT_MAX_OPEN_HANDLES, value_name = "N")]
    max_open_handles: usize,
    /// The most sequence and pool names with metric series of their own;
    /// names past it are counted under name="_other".
    #[arg(long, default_value_t = DEFAULT_MAX_METRIC_NAMES, value_name = "N")]
    max_metric_names: usize,
    /// After SIGTERM, keep serving this many milliseconds with /readyz
    /// answering 503 (so that a load balancer stops sending), then stop
    /// accepting connections and finish.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    shutdown_delay_ms: u64,
    /// The largest pool POST /v1/pools creates (its members are written in one
    /// transaction within the request timeout); larger is a 413.
    #[arg(long, default_value_t = DEFAULT_MAX_POOL_SIZE, value_name = "N")]
    max_pool_size: i64,
    /// The largest request body, in bytes; more is a 413.
    #[arg(long, default_value_t = DEFAULT_BODY_LIMIT, value_name = "BYTES")]
    body_limit: usize,
    /// The longest a request may take, in milliseconds; then it gets a 503.
    /// `next` of a pool stops a little before and answers with the numbers it
    /// took ("partial"); `next` of a sequence waits for its reservation.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    request_timeout_ms: u64,
    /// The longest a client may take to send a request's headers, in
    /// milliseconds (from connecting, or from the previous answer); then the
    /// connection is closed.
    #[arg(long, default_value_t = DEFAULT_HEADER_READ_TIMEOUT.as_millis() as u64, value_name = "MS")]
    header_timeout_ms: u64,
    /// The longest a connection stays open with no request in flight, in
    /// milliseconds.
    #[arg(long, default_value_t = DEFAULT_IDLE_TIMEOUT.as_millis() as u64, value_name = "MS")]
    idle_timeout_ms: u64,
    /// The most connections served at once; more wait until one closes. Keep
    /// it under the open-file limit (`ulimit -n`).
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,
    /// The most connections one client address (IPv4 address, IPv6 /64)
    /// holds at once; one more is accepted and closed at once, so that one
    /// address cannot take every connection. At most --max-connections
    /// takes effect.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS_PER_IP, value_name = "N")]
    max_connections_per_ip: usize,
    /// The most requests without a valid credential (401s) one client
    /// address may send in a minute; then its requests get a 429 with
    /// Retry-After until the minute ends, without a token lookup. 0: no limit.
    #[arg(long, default_value_t = DEFAULT_AUTH_FAILURES_PER_IP, value_name = "N")]
    auth_failures_per_ip: u32,
    /// Serve browser requests from this origin (scheme://host[:port], e.g.
    /// https://app.example.com); repeatable (in a config file: a list).
    /// Any other request that carries an Origin header, or Sec-Fetch-Site:
    /// cross-site, is refused with a 403, so that no web page can act
    /// through a browser that reaches this server.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// How the server's handles reserve blocks: optimistic, locked or atomic.
    #[arg(long, default_value_t = Strategy::default())]
    strategy: Strategy,
    /// How long a reservation or pool take keeps retrying races lost to other
    /// writers, in milliseconds, before the request fails with contention
    /// (503). Below the request timeout; default half of it.
    #[arg(long, value_name = "MS")]
    retry_budget_ms: Option<u64>,
    /// The largest block a sequence's handle grows to under load (adaptive
    /// blocks: never below the sequence's own block size).
    #[arg(long, default_value_t = DEFAULT_BLOCK_MAX, value_name = "N")]
    block_max: i64,
    /// The wanted time between two block reservations of a handle, in
    /// milliseconds: blocks grow when refills come faster, shrink when slower.
    #[arg(long, default_value_t = DEFAULT_REFILL_TARGET.as_millis() as u64, value_name = "MS")]
    refill_target_ms: u64,
    /// Keep every handle at its sequence's block size (no adaptive blocks).
    #[arg(long, conflicts_with_all = ["block_max", "refill_target_ms"])]
    fixed_blocks: bool,
    /// Counter directory of POST /v1/counters/next. Default: $KEYSMITH_COUNTER_DIR,
    /// else $XDG_DATA_HOME/keysmith, else ~/.local/share/keysmith. Every process
    /// on a host that hands out counter names must use the same one.
    #[arg(long, value_name = "DIR")]
    counter_dir: Option<PathBuf>,
    /// Host name that prefixes counter names (default: the system host name).
    #[arg(long, value_name = "H")]
    counter_host: Option<String>,
    /// A file of the secrets that sign shard key strings: one bare secret (at
    /// least 16 bytes; one trailing newline is dropped), or one key a line,
    /// `KEY_ID:SECRET`, the last line signing and every listed key accepted
    /// (`#` comments and blank lines ignored). The server reads it again on
    /// reload. Without it, $KEYSMITH_SHARD_KEY_SECRET is used if set; with
    /// neither, the shard key routes answer 501.
    #[arg(long, value_name = "PATH")]
    shard_key_secret_file: Option<PathBuf>,
    /// A file of the secrets that sign lease tokens (of reserve and of worker
    /// leases), in the format of --shard-key-secret-file: the last key signs,
    /// every listed key opens; read again on reload. Without it,
    /// $KEYSMITH_LEASE_SECRET is used if set; with neither, a random key (a
    /// token opens only in this process).
    #[arg(long, value_name = "PATH")]
    lease_secret_file: Option<PathBuf>,
    /// Layout of the ids of POST /v1/ids/next: snowflake or js-safe (ids below 2^53).
    /// Every server of a group must use the same.
    #[arg(long, default_value = "snowflake", value_name = "PRESET")]
    ids_preset: String,
    /// Group whose worker ids POST /v1/ids/next leases (leased on the first request).
    #[arg(long, default_value = keysmith::ids::DEFAULT_GROUP, value_name = "NAME")]
    ids_group: String,
}

impl ServeArgs {
    /// The `--config` file, if one was given.
    pub fn config_file(&self) -> Option<&std::path::Path> {
        self.config.as_deref()
    }
}

/// Runs the server until SIGTERM or ctrl-c, then shuts down gracefully.
pub async fn run(args: ServeArgs, global: &Global) -> anyhow::Result<()> {
    let token = match &args.token_file {
        Some(path) => Some(Token::from_file(path).map_err(anyhow::Error::msg)?),
        None => Token::from_env().map_err(anyhow::Error::msg)?,
    };
    let authed = token.is_some() || args.access_file.is_some();
    // A file wins over the environment, and the server reads it (again on
    // reload).
    let shard_key_secret = match &args.shard_key_secret_file {
        Some(_) => None,
        None => ShardKeySecret::from_env()?,
    };
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert,
            key,
            client_ca: args.client_ca,
        }),
        // clap requires both, and the client CA with them.
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mtls = tls.as_ref().is_some_and(|t| t.client_ca.is_some());
    let lease_key = match &args.lease_secret_file {
        Some(_) => None,
        None => keysmith::sequence::lease::LeaseKey::from_env()?,
    };
    let config = Config {
        listen: args.listen,
        store_url: global.store_url(),
        token,
        insecure_no_auth: args.insecure_no_auth,
        access_file: args.access_file,
        audit_log: args.audit_log,
        tls,
        max_count: args.max_count,
        max_fence_skip: args.max_fence_skip,
        max_worker_ttl: Duration::from_millis(args.max_worker_ttl_ms),
        max_worker_group: args.max_worker_group,
        handle_idle: Duration::from_secs(args.handle_idle_secs),
        max_open_handles: args.max_open_handles,
        max_metric_names: args.max_metric_names,
        shutdown_delay: Duration::from_millis(args.shutdown_delay_ms),
        max_pool_size: args.max_pool_size,
        body_limit: args.body_limit,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        header_read_timeout: Duration::from_millis(args.header_timeout_ms),
        idle_timeout: Duration::from_millis(args.idle_timeout_ms),
        max_connections: args.max_connections,
        max_connections_per_ip: args.max_connections_per_ip,
        auth_failures_per_ip: args.auth_failures_per_ip,
        allow_origins: args.allow_origin,
        strategy: args.strategy,
        retry_budget: args.retry_budget_ms.map(Duration::from_millis),
        adaptive: (!args.fixed_blocks).then_some(AdaptivePolicy {
            max: args.block_max,
            target: Duration::from_millis(args.refill_target_ms),
        }),
        counter: CounterConfig {
            dir: args.counter_dir,
            host: args.counter_host,
        },
        shard_key_secret,
        shard_key_secret_file: args.shard_key_secret_file,
        lease_key,
        lease_secret_file: args.lease_secret_file,
        ids: keysmith::ids::IdConfig {
            group: args.ids_group,
            ..keysmith::ids::IdConfig::new(keysmith::ids::Layout::preset(&args.ids_preset)?)
        },
        advertise: args.advertise,
        leader_ttl: Duration::from_millis(args.leader_ttl_ms),
    };
    let log_format = args.log_format;
    let server = Server::bind(config).await?;
    let addr = server.local_addr()?;
    let mut auth = if authed {
        let n = server.state().principals();
        format!("token or certificate required; {n} principal(s) loaded")
    } else {
        format!("no token: set ${TOKEN_ENV} or --token-file to require one")
    };
    if mtls {
        auth.push_str("; client certificate required");
    }
    // The address line comes first: scripts and tests read it.
    if log_format == LogFormat::Text {
        say(
            log_format,
            &format!("listening on {scheme}://{addr} ({auth}); SIGTERM or ctrl-c stops"),
        );
    }
    crate::init_logging(crate::LogDefault::Service, log_format);
    if log_format == LogFormat::Json {
        tracing::info!(
            address = %addr,
            "keysmith: listening on {scheme}://{addr} ({auth}); SIGTERM or ctrl-c stops"
        );
    }
    reload_on_sighup(server.state().clone(), log_format);
    server.run(shutdown_signal(log_format)).await?;
    say(log_format, "stopped; every handle closed");
    Ok(())
}

/// A line about the server's own life: plain on stderr, or a log event
/// when logs are JSON (so that every line of stderr is JSON).
fn say(format: LogFormat, what: &str) {
    match format {
        LogFormat::Text => eprintln!("keysmith: {what}"),
        LogFormat::Json => tracing::info!("keysmith: {what}"),
    }
}

/// Reloads what the server reads from files ([`AppState::reload`]) on each
/// SIGHUP while the process runs, and says how it went: what was read, or
/// why the old files stay in use. Never a key or a secret.
///
/// [`AppState::reload`]: keysmith_server::AppState::reload
fn reload_on_sighup(state: keysmith_server::AppState, format: LogFormat) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hup = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot listen for SIGHUP, so it will not reload: {e}");
                return;
            }
        };
        while hup.recv().await.is_some() {
            // logrotate renamed the audit log: write a new one at its path.
            state.reopen_audit_log();
            match state.reload() {
                Ok(()) => {
                    let mut read = Vec::new();
                    if let Some(files) = state.tls_files() {
                        read.push(format!(
                            "the TLS certificate {}, key {}{} (new connections use them)",
                            files.cert.display(),
                            files.key.display(),
                            files
                                .client_ca
                                .as_ref()
                                .map(|ca| format!(" and client CA {}", ca.display()))
                                .unwrap_or_default()
                        ));
                    }
                    if let Some(access) = state.access_file() {
                        read.push(format!(
                            "the access file {} ({} principal(s))",
                            access.display(),
                            state.principals()
                        ));
                    }
                    for secrets in state.secret_files() {
                        read.push(format!("the secret file {}", secrets.display()));
                    }
                    if read.is_empty() {
                        read.push("nothing (no TLS, access or secret files)".into());
                    }
                    say(format, &format!("SIGHUP: reloaded {}", read.join("; ")));
                }
                Err(e) => {
                    let what = format!(
                        "SIGHUP: reload failed, still serving with the files read before: {e}"
                    );
                    match format {
                        LogFormat::Text => eprintln!("keysmith: {what}"),
                        LogFormat::Json => tracing::error!("keysmith: {what}"),
                    }
                }
            }
        }
    });
    #[cfg(not(unix))]
    let _ = (state, format);
}

/// Completes on SIGTERM or ctrl-c (SIGINT).
async fn shutdown_signal(format: LogFormat) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    say(
        format,
        "shutting down: finishing requests in flight, then closing handles",
    );
}

//! `serve`: runs the HTTP service until SIGTERM or ctrl-c.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use keysmith::sequence::{AdaptivePolicy, DEFAULT_BLOCK_MAX, DEFAULT_REFILL_TARGET, Strategy};
use keysmith::shard_key::ShardKeySecret;
use keysmith_server::{
    Config, CounterConfig, DEFAULT_BODY_LIMIT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_LISTEN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_COUNT, DEFAULT_MAX_POOL_SIZE, Server,
    TOKEN_ENV, Token,
};

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
    /// A file holding the bearer token every route but /healthz then needs
    /// (one trailing newline is dropped). Without it, $KEYSMITH_TOKEN is used
    /// if set. The token is never taken as an argument, where `ps` would show it.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// Allow listening on a non-loopback address without a token.
    #[arg(long)]
    insecure_no_auth: bool,
    /// The most values one request may ask for; more is a 413.
    #[arg(long, default_value_t = DEFAULT_MAX_COUNT, value_name = "N")]
    max_count: i64,
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
    let authed = token.is_some();
    // A file wins over the environment, and the server reads it (again on
    // reload).
    let shard_key_secret = match &args.shard_key_secret_file {
        Some(_) => None,
        None => ShardKeySecret::from_env()?,
    };
    let lease_key = match &args.lease_secret_file {
        Some(_) => None,
        None => keysmith::sequence::lease::LeaseKey::from_env()?,
    };
    let config = Config {
        listen: args.listen,
        store_url: global.store_url(),
        token,
        insecure_no_auth: args.insecure_no_auth,
        max_count: args.max_count,
        max_pool_size: args.max_pool_size,
        body_limit: args.body_limit,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        header_read_timeout: Duration::from_millis(args.header_timeout_ms),
        idle_timeout: Duration::from_millis(args.idle_timeout_ms),
        max_connections: args.max_connections,
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
    };
    let log_format = args.log_format;
    let server = Server::bind(config).await?;
    let addr = server.local_addr()?;
    let auth = if authed {
        "token required".to_owned()
    } else {
        format!("no token: set ${TOKEN_ENV} or --token-file to require one")
    };
    // The address line comes first: scripts and tests read it.
    if log_format == LogFormat::Text {
        say(
            log_format,
            &format!("listening on http://{addr} ({auth}); SIGTERM or ctrl-c stops"),
        );
    }
    crate::init_logging(crate::LogDefault::Service, log_format);
    if log_format == LogFormat::Json {
        tracing::info!(
            address = %addr,
            "keysmith: listening on http://{addr} ({auth}); SIGTERM or ctrl-c stops"
        );
    }
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

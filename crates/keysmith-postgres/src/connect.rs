//! Connections: the store URL, the session every connection sets up, and
//! one-off connections for code beside the store (the shard set, `adopt`,
//! benchmarks).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_postgres::Client;
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;

use super::DEFAULT_SCHEMA;
use super::tls::{self, PgTls};
use keysmith_core::driver::ConnParams;
use keysmith_core::{Error, Result};

pub(super) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What keysmith takes from a store URL.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) config: tokio_postgres::Config,
    pub(super) schema: String,
    pub(super) timeout: Duration,
    pub(super) pool_size: usize,
    pub(super) tls: PgTls,
}

/// Opens connections: connect, then set the session up explicitly rather
/// than trusting the server's or the role's defaults.
pub(super) struct Connector {
    pub(super) timeout: Duration,
    pub(super) tls: PgTls,
}

type ConnectFuture<'a> = Pin<
    Box<
        dyn Future<Output = std::result::Result<(Client, JoinHandle<()>), tokio_postgres::Error>>
            + Send
            + 'a,
    >,
>;

impl deadpool_postgres::Connect for Connector {
    fn connect(&self, config: &tokio_postgres::Config) -> ConnectFuture<'_> {
        let config = config.clone();
        let ms = self.timeout.as_millis().max(1);
        let tls = self.tls.clone();
        Box::pin(async move {
            let (client, task) = tls.connect(&config).await?;
            client
                .batch_execute(&format!(
                    "SET synchronous_commit = on; \
                     SET statement_timeout = {ms}; \
                     SET idle_in_transaction_session_timeout = {ms}"
                ))
                .await?;
            Ok((client, task))
        })
    }
}

/// One connection to the database a `postgres://` store URL names, with the
/// store's TLS settings and credentials (`sslmode`, `sslrootcert`,
/// `password_file`, ...), for tools that run their own statements beside
/// the store (benchmarks, checks). keysmith's own query parameters are
/// understood and not sent to the server; the schema is not set.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad URL, a TLS failure or a refused
/// login (saying what to fix); [`Error::Unavailable`] when the server
/// cannot be reached.
pub async fn connect(url: &str) -> Result<Client> {
    let (config, _schema) = connect_config(url)?;
    pg_connect(&config).await
}

/// The connection settings and schema a `postgres://` store URL names, for
/// code that opens its own connections to a store's database (the shard
/// set, `adopt`): the same TLS and credentials as the store's own.
///
/// # Errors
/// [`Error::InvalidArgument`] as [`crate::PostgresStore::open`] for a bad URL.
pub fn connect_config(url: &str) -> Result<(ConnectConfig, String)> {
    let s = parse_url(url)?;
    Ok((
        ConnectConfig {
            config: s.config,
            tls: s.tls,
        },
        s.schema,
    ))
}

/// What a connection of its own needs: the driver's settings (what this
/// dereferences to, for reading them) and the TLS connector.
#[derive(Debug, Clone)]
pub struct ConnectConfig {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: PgTls,
}

impl std::ops::Deref for ConnectConfig {
    type Target = tokio_postgres::Config;

    fn deref(&self) -> &tokio_postgres::Config {
        &self.config
    }
}

/// Splits keysmith's own parameters off the URL and parses the rest.
pub(super) fn parse_url(url: &str) -> Result<Settings> {
    let shown = keysmith_core::driver::redact_url(url);
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut schema = DEFAULT_SCHEMA.to_owned();
    let mut conn = ConnParams::default();
    let mut tls = tls::TlsParams::default();
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if tls.take(key, value) || conn.take(&shown, key, value)? {
            continue;
        }
        match key {
            "schema" => {
                validate_schema(value)?;
                value.clone_into(&mut schema);
            }
            _ => rest.push(pair),
        }
    }
    let base = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    let mut config: tokio_postgres::Config = base.parse().map_err(|e: tokio_postgres::Error| {
        Error::invalid(format!(
            "store URL {shown} is not a PostgreSQL URL: {}; use postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME]",
            one_line(&e.to_string())
        ))
    })?;
    let tls = tls.apply(&mut config, &shown)?;
    Ok(Settings {
        config,
        schema,
        timeout: conn.timeout,
        pool_size: conn.pool_size,
        tls,
    })
}

/// Checks a schema name: what PostgreSQL would take unquoted, lower case,
/// and not reserved for the system.
pub(super) fn validate_schema(name: &str) -> Result<()> {
    let ok = (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with("pg_");
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "schema name {name:?} in the store URL: use 1 to 63 characters of a-z, 0-9 and _, not starting with a digit or pg_ (e.g. ?schema=keysmith)"
        )))
    }
}

pub(super) fn describe_target(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Opens a connection with the store's TLS connector (the URL's `sslmode`,
/// `sslrootcert`, ...), as every PostgreSQL connection keysmith opens.
///
/// # Errors
/// [`Error::InvalidArgument`] for a TLS failure or a refused login (saying
/// what to fix), else as [`postgres_error`].
pub async fn pg_connect(config: &ConnectConfig) -> Result<tokio_postgres::Client> {
    let mut plain = config.config.clone();
    if plain.get_connect_timeout().is_none() {
        plain.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
    }
    let (client, _task) =
        config
            .tls
            .connect(&plain)
            .await
            .map_err(|e| match config.tls.explain(&e) {
                Some(why) => Error::invalid(format!("PostgreSQL: {why}")),
                None => postgres_error(e),
            })?;
    Ok(client)
}

/// A `tokio-postgres` error as a keysmith [`Error`]: a lost or refused
/// connection, a server shutting down or short of resources, a
/// serialization failure or deadlock is [`Error::Unavailable`] (retrying may
/// help); any other server error (a bad statement, a constraint)
/// [`Error::InvalidArgument`].
pub fn postgres_error(e: tokio_postgres::Error) -> Error {
    let text = keysmith_core::driver::error_chain(&e);
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            let retry = code.starts_with("08")
                || code.starts_with("53")
                || code.starts_with("57")
                || *db.code() == SqlState::T_R_SERIALIZATION_FAILURE
                || *db.code() == SqlState::T_R_DEADLOCK_DETECTED;
            if retry {
                Error::Unavailable(format!("PostgreSQL: {text}"))
            } else {
                Error::invalid(format!("PostgreSQL: {text} (SQLSTATE {code})"))
            }
        }
        None => Error::Unavailable(format!("PostgreSQL: {text}")),
    }
}

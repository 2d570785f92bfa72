//! The MySQL 8 / MariaDB 10.6+ backend (cargo feature `mysql`):
//! `mysql://USER[:PASSWORD]@HOST[:PORT]/DB`.
//!
//! # The URL
//!
//! `USER` and `PASSWORD` are percent-decoded; `PORT` defaults to 3306; `DB`
//! is required and must exist (keysmith creates its tables in it, never the
//! database). Query parameters:
//!
//! - `ssl-mode=disabled|preferred|required|verify_ca|verify_identity`
//!   (default `preferred`; upper case and `ssl_mode` are accepted too), as
//!   the MySQL clients read it: `preferred` uses TLS when the server offers
//!   it and plain TCP when it does not, `required` insists on TLS without
//!   checking the certificate, `verify_ca` checks that a trusted CA signed
//!   it (with a handshake of keysmith's own at open: see `tls.rs`),
//!   `verify_identity` also that it names the host.
//! - `ssl-ca=PATH`: the CA certificates (PEM) to trust, instead of the
//!   built-in web roots (Mozilla's, from `webpki-roots`).
//! - `password_file=PATH`: a file holding just the password (one trailing
//!   newline is ignored), kept off the command line; not with a password in
//!   the URL.
//! - `timeout=SECS`: how long one operation may take, getting a connection
//!   included, before it fails with [`Error::Unavailable`] (default 10); also
//!   the session's `innodb_lock_wait_timeout` (rounded up to whole seconds).
//! - `pool_size=N`: at most this many connections (default 16).
//!
//! Messages never show the password ([`super::redact_url`]).
//!
//! # Tables
//!
//! keysmith's tables live in `DB`, all named `keysmith_*`: `keysmith_meta`
//! (the schema version), `keysmith_sequences`, `keysmith_sequence_counts`,
//! `keysmith_pools`, `keysmith_pool_members`, `keysmith_pool_marks`,
//! `keysmith_workers`, `keysmith_numbering`, `keysmith_number_counters` and
//! `keysmith_tickets`. Names are `VARBINARY`, so they compare and sort byte
//! by byte, as every other backend does. MySQL runs DDL outside
//! transactions, so migrations run under a named lock (`GET_LOCK`), every
//! statement is `CREATE TABLE IF NOT EXISTS`, and the version is written
//! after each step: a migration cut short is finished by the next open. A
//! store already at the current version is opened with one read.
//!
//! # Durability and isolation
//!
//! Every write commits before its method returns (InnoDB, explicit
//! `COMMIT`). InnoDB makes a commit durable with
//! `innodb_flush_log_at_trx_commit=1` (and, with a binary log,
//! `sync_binlog=1`), both server settings: they are checked at open and
//! warned about otherwise. Each connection sets its session explicitly
//! rather than trusting the server's defaults: strict SQL mode (a value that
//! does not fit is an error, never clamped), `time_zone='+00:00'`, READ
//! COMMITTED, autocommit on, and the lock wait timeout. Expiry of worker
//! leases and tickets is by the server's clock (`SYSDATE(3)`).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, Pool, PoolConstraints, PoolOpts, Row, SslOpts, TxOpts};

use super::size_cache::PoolMetaCache;
use super::{
    Alteration, CountsDelta, PoolRow, PoolSpec, PoolStore, Put, RateMark, RateMarks, Reservation,
    SequenceCounts, SequenceRow, SequenceSpec, SequenceStore, Store,
};
use crate::{Error, Result};

mod pools;
mod sequences;
mod tickets;
mod tls;
mod workers;

/// The driver, for code that runs its own statements on a [`connect`]ed
/// connection (benchmarks, checks).
pub use mysql_async;

/// The schema version this build of keysmith writes (`keysmith_meta`).
pub const SCHEMA_VERSION: i64 = 2;

const _: () = assert!(MIGRATIONS.len() == SCHEMA_VERSION as usize);

const DEFAULT_PORT: u16 = 3306;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_POOL_SIZE: usize = 16;

/// How often a statement whose fallback row contradicts its own outcome is
/// run again before giving up with [`Error::Contention`] (see
/// `write_if_version`); also how often a pool sample is drawn again because
/// the pool's size changed under it.
const MAX_RERUNS: u32 = 3;

/// The server's clock in milliseconds since the Unix epoch. `SYSDATE`, not
/// `NOW`: the time the expression runs, not the statement's start. Exact
/// because every session runs at `time_zone = '+00:00'`.
const NOW_MS: &str = "CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)";

/// The columns of a sequence, in the order [`MysqlStore::sequence_row`] reads them.
const COLS: &str = "name, next_value, start_value, max_value, block, version, \
    generation, failover_skip, failover_skip_set, failover_skipped";

/// Migrations, in order: migration `i` takes the schema from version `i` to
/// `i + 1`; each is a list of statements, every one safe to run twice.
///
/// Names are `VARBINARY(512)` (a name is at most 512 bytes): compared and
/// ordered byte by byte, with no collation or trailing-space rules. `CHECK`
/// constraints are enforced by MySQL 8.0.16+ and MariaDB 10.2+; their
/// names are unique per database, so they carry the table's.
const MIGRATIONS: &[&[&str]] = &[
    &[
        // Sequences. `last_start` is written only by reserve_atomic: the first
        // value of the range its UPDATE reserved, read back in its transaction.
        "CREATE TABLE IF NOT EXISTS keysmith_sequences (
        name        VARBINARY(512) NOT NULL PRIMARY KEY,
        next_value  BIGINT NOT NULL,
        start_value BIGINT NOT NULL,
        max_value   BIGINT NOT NULL,
        block       BIGINT NOT NULL,
        version     BIGINT NOT NULL,
        last_start  BIGINT NULL,
        CONSTRAINT keysmith_sequences_bounds CHECK (
            start_value >= 0 AND start_value <= max_value
            AND max_value <= 9223372036854775806
            AND next_value >= 0 AND next_value - 1 <= max_value),
        CONSTRAINT keysmith_sequences_block CHECK (block BETWEEN 1 AND 1099511627776),
        CONSTRAINT keysmith_sequences_version CHECK (version >= 1)
    ) ENGINE=InnoDB",
        // What clean closes and alterations reported (see SequenceCounts).
        "CREATE TABLE IF NOT EXISTS keysmith_sequence_counts (
        name          VARBINARY(512) NOT NULL PRIMARY KEY,
        handed_back   BIGINT NOT NULL,
        handed_out    BIGINT NOT NULL,
        abandoned     BIGINT NOT NULL,
        skipped       BIGINT NOT NULL,
        mark_at       BIGINT NULL,
        mark_reserved BIGINT NULL,
        prev_at       BIGINT NULL,
        prev_reserved BIGINT NULL,
        CONSTRAINT keysmith_sequence_counts_seq FOREIGN KEY (name)
            REFERENCES keysmith_sequences (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        // Pools: one member per slot; slot s starts as start + s, and a swap
        // replaces `take` by `take + size` in the same slot.
        "CREATE TABLE IF NOT EXISTS keysmith_pools (
        name        VARBINARY(512) NOT NULL PRIMARY KEY,
        start_value BIGINT NOT NULL,
        size        BIGINT NOT NULL,
        CONSTRAINT keysmith_pools_size CHECK (size >= 0)
    ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS keysmith_pool_members (
        pool  VARBINARY(512) NOT NULL,
        slot  BIGINT NOT NULL,
        value BIGINT NOT NULL,
        PRIMARY KEY (pool, slot),
        UNIQUE KEY keysmith_pool_members_value (pool, value),
        CONSTRAINT keysmith_pool_members_pool FOREIGN KEY (pool)
            REFERENCES keysmith_pools (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS keysmith_pool_marks (
        name       VARBINARY(512) NOT NULL PRIMARY KEY,
        mark_at    BIGINT NULL,
        mark_value BIGINT NULL,
        prev_at    BIGINT NULL,
        prev_value BIGINT NULL,
        CONSTRAINT keysmith_pool_marks_pool FOREIGN KEY (name)
            REFERENCES keysmith_pools (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        // Worker-id leases (workers.rs). `until_ms` is the floor and outlives
        // the lease; `expires_at` is in ms by the server's clock.
        "CREATE TABLE IF NOT EXISTS keysmith_workers (
        grp        VARBINARY(512) NOT NULL,
        worker     BIGINT NOT NULL,
        fence      BIGINT NOT NULL,
        holder     VARCHAR(1024) NOT NULL,
        until_ms   BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (grp, worker),
        CONSTRAINT keysmith_workers_worker CHECK (worker >= 0),
        CONSTRAINT keysmith_workers_fence CHECK (fence >= 1)
    ) ENGINE=InnoDB",
        // Numbered sequences (tickets.rs): settings, counters per period, open
        // tickets (token NULL once released; expires_at in ms, server clock).
        "CREATE TABLE IF NOT EXISTS keysmith_numbering (
        name           VARBINARY(512) NOT NULL PRIMARY KEY,
        settings       TEXT NOT NULL,
        current_period BIGINT NOT NULL,
        CONSTRAINT keysmith_numbering_seq FOREIGN KEY (name)
            REFERENCES keysmith_sequences (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS keysmith_number_counters (
        name       VARBINARY(512) NOT NULL,
        period     BIGINT NOT NULL,
        next_value BIGINT NOT NULL,
        PRIMARY KEY (name, period),
        CONSTRAINT keysmith_number_counters_seq FOREIGN KEY (name)
            REFERENCES keysmith_numbering (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS keysmith_tickets (
        name       VARBINARY(512) NOT NULL,
        period     BIGINT NOT NULL,
        value      BIGINT NOT NULL,
        token      VARBINARY(512) NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (name, period, value),
        CONSTRAINT keysmith_tickets_seq FOREIGN KEY (name)
            REFERENCES keysmith_numbering (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
    ],
    // 2: generations (store/sequences.rs, `SequenceRow::fence`): the server a
    // row was last written on (MySQL `@@server_uuid`, MariaDB `@@server_id` and
    // `@@gtid_domain_id`), each sequence's failover margin and what was skipped
    // at generation changes; pools and worker ids record theirs too.
    &[
        "ALTER TABLE keysmith_sequences
         ADD COLUMN generation VARCHAR(255) NULL,
         ADD COLUMN failover_skip BIGINT NOT NULL DEFAULT 1000000,
         ADD COLUMN failover_skip_set BOOLEAN NOT NULL DEFAULT FALSE,
         ADD COLUMN failover_skipped BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE keysmith_pools ADD COLUMN generation VARCHAR(255) NULL",
        "ALTER TABLE keysmith_workers ADD COLUMN generation VARCHAR(255) NULL",
    ],
];

/// The SQL expression of the server's generation: which server, in which
/// replication domain. A promoted replica is another server.
fn generation_sql(mariadb: bool) -> &'static str {
    if mariadb {
        "CONCAT('mariadb:', @@server_id, '/', @@gtid_domain_id)"
    } else {
        "CONCAT('mysql:', @@server_uuid)"
    }
}

/// How the connection is encrypted (`ssl-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disabled,
    Preferred,
    Required,
    VerifyCa,
    VerifyIdentity,
}

impl SslMode {
    fn parse(value: &str, shown: &str) -> Result<SslMode> {
        Ok(
            match value.to_ascii_lowercase().replace('-', "_").as_str() {
                "disabled" => SslMode::Disabled,
                "preferred" => SslMode::Preferred,
                "required" => SslMode::Required,
                "verify_ca" => SslMode::VerifyCa,
                "verify_identity" => SslMode::VerifyIdentity,
                _ => {
                    return Err(Error::invalid(format!(
                        "store URL {shown}: ssl-mode={value:?} is not a mode; use disabled, preferred, required, verify_ca or verify_identity"
                    )));
                }
            },
        )
    }

    fn as_str(self) -> &'static str {
        match self {
            SslMode::Disabled => "disabled",
            SslMode::Preferred => "preferred",
            SslMode::Required => "required",
            SslMode::VerifyCa => "verify_ca",
            SslMode::VerifyIdentity => "verify_identity",
        }
    }
}

/// What keysmith takes from a `mysql://` URL.
#[derive(Clone)]
pub(crate) struct MysqlUrl {
    pub(crate) user: String,
    pub(crate) password: Option<String>,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) database: String,
    pub(crate) ssl_mode: SslMode,
    /// The `ssl-ca` file's contents (checked to hold a certificate) and path.
    pub(crate) ssl_ca: Option<(Vec<u8>, String)>,
    pub(crate) timeout: Duration,
    pub(crate) pool_size: usize,
    /// For `verify_ca`: the DNS name of the server's certificate, found by
    /// [`tls::certificate_name`] (after checking its chain); the driver
    /// checks the certificate against it.
    pub(crate) tls_name: Option<String>,
}

impl fmt::Debug for MysqlUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the password.
        f.debug_struct("MysqlUrl")
            .field("user", &self.user)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("ssl_mode", &self.ssl_mode)
            .field("timeout", &self.timeout)
            .field("pool_size", &self.pool_size)
            .finish_non_exhaustive()
    }
}

impl MysqlUrl {
    /// Parses a `mysql://` URL (see the [module documentation](self)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying what is wrong, never showing the
    /// password.
    pub(crate) fn parse(url: &str) -> Result<MysqlUrl> {
        let shown = super::redact_url(url);
        let usage = "use mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?ssl-mode=...&timeout=SECS]";
        let rest = url.strip_prefix("mysql://").ok_or_else(|| {
            Error::invalid(format!("store URL {shown} is not a MySQL URL; {usage}"))
        })?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(at) => (&authority[..at], &authority[at + 1..]),
            None => {
                return Err(Error::invalid(format!(
                    "store URL {shown} names no user; {usage}"
                )));
            }
        };
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(decode(p))),
            None => (userinfo, None),
        };
        let user = decode(user);
        if user.is_empty() {
            return Err(Error::invalid(format!(
                "store URL {shown} names no user; {usage}"
            )));
        }
        let (host, port) = split_host_port(hostport).ok_or_else(|| {
            Error::invalid(format!(
                "store URL {shown}: {hostport:?} is not HOST[:PORT] (a port is 1 to 65535; an IPv6 address goes in brackets); {usage}"
            ))
        })?;
        let database = decode(path);
        if database.is_empty() || database.contains('/') || database.len() > 64 {
            return Err(Error::invalid(format!(
                "store URL {shown} names no database (or one with '/' or over 64 bytes); {usage}; create the database first (CREATE DATABASE keysmith)"
            )));
        }
        let mut out = MysqlUrl {
            user,
            password,
            host,
            port,
            database,
            ssl_mode: SslMode::Preferred,
            ssl_ca: None,
            timeout: DEFAULT_TIMEOUT,
            pool_size: DEFAULT_POOL_SIZE,
            tls_name: None,
        };
        let mut password_file = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value);
            match key {
                "ssl-mode" | "ssl_mode" | "sslmode" => {
                    out.ssl_mode = SslMode::parse(&value, &shown)?;
                }
                "ssl-ca" | "ssl_ca" => {
                    let bytes = std::fs::read(&value).map_err(|e| {
                        Error::invalid(format!(
                            "store URL {shown}: cannot read ssl-ca={value}: {e}; give a PEM file of CA certificates readable by this user"
                        ))
                    })?;
                    check_pem_certificates(&bytes, &value)?;
                    out.ssl_ca = Some((bytes, value));
                }
                "password_file" | "password-file" => password_file = Some(value),
                "timeout" => {
                    out.timeout = value
                        .parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                        .map(Duration::from_secs_f64)
                        .ok_or_else(|| {
                            Error::invalid(format!(
                                "store URL {shown}: timeout={value:?} must be a number of seconds above 0 and at most 86400, e.g. timeout=10"
                            ))
                        })?;
                }
                "pool_size" => {
                    out.pool_size = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=1000).contains(n))
                        .ok_or_else(|| {
                            Error::invalid(format!(
                                "store URL {shown}: pool_size={value:?} must be a whole number from 1 to 1000, e.g. pool_size=16"
                            ))
                        })?;
                }
                other => {
                    return Err(Error::invalid(format!(
                        "store URL {shown}: unknown parameter {other:?}; a mysql:// URL takes ssl-mode, ssl-ca, password_file, timeout and pool_size"
                    )));
                }
            }
        }
        if let Some(path) = password_file {
            if out.password.is_some() {
                return Err(Error::invalid(format!(
                    "store URL {shown} has a password and a password_file; give one of them"
                )));
            }
            out.password = Some(super::credentials::read_password_file(
                std::path::Path::new(&path),
                "password_file",
            )?);
        }
        if out.ssl_ca.is_some() && out.ssl_mode == SslMode::Disabled {
            return Err(Error::invalid(format!(
                "store URL {shown}: ssl-ca is given but ssl-mode=disabled; drop one of them"
            )));
        }
        Ok(out)
    }

    /// For `verify_ca`, finds the name the driver checks the certificate
    /// against (see tls.rs); nothing for the other modes.
    async fn resolve_tls(&mut self) -> Result<()> {
        if self.ssl_mode == SslMode::VerifyCa {
            self.tls_name = tls::certificate_name(self).await?;
        }
        Ok(())
    }

    /// `host:port/database`, for messages.
    pub(crate) fn target(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}/{}", self.host, self.port, self.database)
        } else {
            format!("{}:{}/{}", self.host, self.port, self.database)
        }
    }

    /// The driver's options: this URL's server and credentials, TLS as
    /// `ssl` says (`None`: plain TCP), and the session keysmith wants.
    pub(crate) fn opts(&self, ssl: Option<SslOpts>) -> OptsBuilder {
        let lock_wait = self.timeout.as_secs_f64().ceil().max(1.0) as u64;
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(self.user.clone()))
            .pass(self.password.clone())
            .db_name(Some(self.database.clone()))
            .prefer_socket(false)
            .tcp_nodelay(true)
            .client_found_rows(true)
            .stmt_cache_size(128)
            .ssl_opts(ssl)
            .setup(vec![
                format!(
                    "SET SESSION sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION', \
                     time_zone = '+00:00', autocommit = 1, innodb_lock_wait_timeout = {lock_wait}"
                ),
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".to_owned(),
            ])
            .pool_opts(
                PoolOpts::default()
                    .with_constraints(
                        PoolConstraints::new(0, self.pool_size).unwrap_or_default(),
                    )
                    // The session set up above is kept across uses.
                    .with_reset_connection(false)
                    .with_inactive_connection_ttl(Duration::from_secs(60)),
            )
    }

    /// The TLS options of this URL's `ssl-mode` and `ssl-ca`.
    pub(crate) fn ssl_opts(&self) -> Option<SslOpts> {
        let base = || {
            let mut o = SslOpts::default();
            if let Some((bytes, _)) = &self.ssl_ca {
                o = o
                    .with_root_certs(vec![bytes.clone().into()])
                    .with_disable_built_in_roots(true);
            }
            o
        };
        match self.ssl_mode {
            SslMode::Disabled => None,
            // Encrypted, the certificate not checked (as the MySQL clients do).
            SslMode::Preferred | SslMode::Required => {
                Some(base().with_danger_accept_invalid_certs(true))
            }
            // The chain against the CA, the name against the one the
            // certificate holds (see tls.rs).
            SslMode::VerifyCa => Some(match &self.tls_name {
                Some(name) => base().with_danger_tls_hostname_override(Some(name.clone())),
                None => base().with_danger_skip_domain_validation(true),
            }),
            SslMode::VerifyIdentity => Some(base()),
        }
    }
}

/// `host` and `port` of `HOST[:PORT]` or `[V6]:PORT`.
fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':')?)),
        }
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0)?,
    };
    Some((host.to_owned(), port))
}

fn decode(s: &str) -> String {
    super::credentials::percent_decode(s)
}

/// Checks a PEM file holds at least one certificate.
fn check_pem_certificates(bytes: &[u8], path: &str) -> Result<()> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs: std::result::Result<Vec<_>, _> = CertificateDer::pem_slice_iter(bytes).collect();
    match certs {
        Ok(c) if !c.is_empty() => Ok(()),
        Ok(_) => Err(Error::invalid(format!(
            "ssl-ca={path} holds no certificate; give a PEM file with -----BEGIN CERTIFICATE----- blocks"
        ))),
        Err(e) => Err(Error::invalid(format!(
            "cannot read certificates (PEM) from ssl-ca={path}: {e}"
        ))),
    }
}

/// A store in a MySQL or MariaDB database. Cheap to share (`Arc`); it holds
/// a pool of connections that it opens as needed.
pub struct MysqlStore {
    pool: Pool,
    /// `host:port/database`, for messages.
    target: String,
    timeout: Duration,
    errors: Errors,
    /// The size of each pool this store sampled, so that a sample is one
    /// statement. Never trusted: the statement returns the size it saw.
    pool_sizes: PoolMetaCache<i64>,
    /// [`generation_sql`] of the server's kind, set when the store opens.
    gen_sql: std::sync::OnceLock<&'static str>,
}

impl fmt::Debug for MysqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("MysqlStore")
            .field("target", &self.target)
            .field("timeout", &self.timeout)
            .field("ssl_mode", &self.errors.ssl_mode.as_str())
            .finish_non_exhaustive()
    }
}

impl MysqlStore {
    /// Connects to the database a `mysql://` URL names (see the [module
    /// documentation](self) for its parameters) and creates or upgrades
    /// keysmith's tables in it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a URL that cannot be parsed, a refused
    /// login, a missing database, missing privileges or a TLS failure;
    /// [`Error::Unavailable`] when the server cannot be reached within the
    /// timeout; [`Error::Corrupt`] when the tables were written by a newer
    /// keysmith.
    pub async fn open(url: &str) -> Result<Self> {
        let mut u = MysqlUrl::parse(url)?;
        u.resolve_tls().await?;
        let target = u.target();
        let mut store = MysqlStore {
            pool: Pool::new(u.opts(u.ssl_opts())),
            errors: Errors {
                target: target.clone(),
                ssl_mode: u.ssl_mode,
            },
            target,
            timeout: u.timeout,
            pool_sizes: PoolMetaCache::new(),
            gen_sql: std::sync::OnceLock::new(),
        };
        let first = store.conn().await;
        let c = match first {
            Ok(c) => c,
            Err(_) if u.ssl_mode == SslMode::Preferred && store.offers_no_tls(&u).await => {
                // `preferred` against a server without TLS: plain TCP.
                tracing::info!(target = %store.target, "MySQL server offers no TLS; connecting without (ssl-mode=preferred)");
                let old = std::mem::replace(&mut store.pool, Pool::new(u.opts(None)));
                tokio::spawn(old.disconnect());
                store.conn().await?
            }
            Err(e) => return Err(e),
        };
        drop(c);
        store.migrate().await?;
        Ok(store)
    }

    /// Whether a connection with TLS fails only because the server does
    /// not offer it.
    async fn offers_no_tls(&self, u: &MysqlUrl) -> bool {
        matches!(
            connect_once(u, u.ssl_opts()).await,
            Ok(Err(mysql_async::Error::Driver(
                mysql_async::DriverError::NoClientSslFlagFromServer
            )))
        )
    }

    /// Creates or upgrades the tables. Fast path: one read of the version.
    async fn migrate(&self) -> Result<()> {
        let mut c = self.conn().await?;
        let out = self
            .deadline(async {
                self.check_server(&mut c).await?;
                match c
                    .query_first::<Option<i64>, _>("SELECT schema_version FROM keysmith_meta")
                    .await
                {
                    Ok(Some(Some(v))) if v == SCHEMA_VERSION => return Ok(()),
                    Ok(Some(Some(v))) => self.check_not_newer(v)?,
                    Ok(_) => {}
                    Err(mysql_async::Error::Server(e)) if e.code == ER_NO_SUCH_TABLE => {}
                    Err(e) => return Err(self.my(&e)),
                }
                // Every keysmith migrating this database takes the same named
                // lock first, so first uses run one after the other; it is
                // the session's, released below or when the connection ends.
                let got: Option<Option<i64>> = c
                    .exec_first(
                        "SELECT GET_LOCK(SHA1(CONCAT('keysmith-migrate:', DATABASE())), ?)",
                        (self.timeout.as_secs().max(1),),
                    )
                    .await
                    .map_err(|e| self.my(&e))?;
                if got != Some(Some(1)) {
                    return Err(Error::Unavailable(format!(
                        "MySQL at {}: another keysmith has been creating the tables for over {}s; retry",
                        self.target,
                        self.timeout.as_secs_f64()
                    )));
                }
                let out = self.migrate_locked(&mut c).await;
                let released = c
                    .query_drop("DO RELEASE_LOCK(SHA1(CONCAT('keysmith-migrate:', DATABASE())))")
                    .await
                    .map_err(|e| self.my(&e));
                out.and(released)
            })
            .await;
        self.settle(c, out)
    }

    async fn migrate_locked(&self, c: &mut Conn) -> Result<()> {
        c.query_drop(
            "CREATE TABLE IF NOT EXISTS keysmith_meta (
                 singleton TINYINT NOT NULL PRIMARY KEY,
                 schema_version BIGINT NOT NULL,
                 CONSTRAINT keysmith_meta_singleton CHECK (singleton = 1)
             ) ENGINE=InnoDB",
        )
        .await
        .map_err(|e| self.my(&e))?;
        let current: i64 = c
            .query_first::<i64, _>("SELECT schema_version FROM keysmith_meta")
            .await
            .map_err(|e| self.my(&e))?
            .unwrap_or(0);
        self.check_not_newer(current)?;
        for (i, step) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            for statement in *step {
                c.query_drop(*statement).await.map_err(|e| self.my(&e))?;
            }
            c.exec_drop(
                "INSERT INTO keysmith_meta (singleton, schema_version) VALUES (1, ?)
                 ON DUPLICATE KEY UPDATE schema_version = VALUES(schema_version)",
                (i as i64 + 1,),
            )
            .await
            .map_err(|e| self.my(&e))?;
        }
        if current != SCHEMA_VERSION {
            tracing::info!(target = %self.target, from = current, to = SCHEMA_VERSION, "migrated keysmith tables");
        }
        Ok(())
    }

    /// Refuses servers without what keysmith relies on (enforced CHECK
    /// constraints: MySQL 8.0.16, MariaDB 10.2; tested from MariaDB 10.6),
    /// and warns when commits are not flushed.
    async fn check_server(&self, c: &mut Conn) -> Result<()> {
        type Settings = (String, Option<i64>, Option<i64>, Option<i64>);
        let (version, flush, log_bin, sync_binlog): Settings = c
            .query_first(
                "SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog",
            )
            .await
            .map_err(|e| self.my(&e))?
            .ok_or_else(|| Error::Unavailable(format!("MySQL at {}: no answer", self.target)))?;
        let (major, minor, patch) = c.server_version();
        let mariadb = version.contains("MariaDB");
        let _ = self.gen_sql.set(generation_sql(mariadb));
        let old = if mariadb {
            (major, minor) < (10, 6)
        } else {
            (major, minor, patch) < (8, 0, 16)
        };
        if old {
            return Err(Error::invalid(format!(
                "MySQL at {}: server version {version} is too old; keysmith needs MySQL 8.0.16 or later, or MariaDB 10.6 or later",
                self.target
            )));
        }
        if flush != Some(1) {
            tracing::warn!(target = %self.target, "the server runs with innodb_flush_log_at_trx_commit={flush:?}, not 1: reservations may be lost in a crash of the server's machine, and values handed out again");
        }
        if log_bin == Some(1) && sync_binlog != Some(1) {
            tracing::warn!(target = %self.target, "the server writes a binary log with sync_binlog={sync_binlog:?}, not 1: after a crash a replica may miss reservations");
        }
        Ok(())
    }

    fn check_not_newer(&self, v: i64) -> Result<()> {
        if (0..=SCHEMA_VERSION).contains(&v) {
            Ok(())
        } else {
            Err(Error::Corrupt(format!(
                "MySQL at {}: keysmith's tables are at version {v}, this keysmith knows up to {SCHEMA_VERSION}; upgrade keysmith or use another database",
                self.target
            )))
        }
    }

    /// A pooled connection, or `Unavailable` within the timeout.
    async fn conn(&self) -> Result<Conn> {
        match tokio::time::timeout(self.timeout, self.pool.get_conn()).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(self.my(&e)),
            Err(_) => Err(Error::Unavailable(format!(
                "MySQL at {}: no connection within {}s; check that the server is running and reachable, then retry",
                self.target,
                self.timeout.as_secs_f64()
            ))),
        }
    }

    /// Runs `work` within the operation timeout.
    async fn deadline<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        match tokio::time::timeout(self.timeout, work).await {
            Ok(out) => out,
            Err(_) => Err(Error::Unavailable(format!(
                "MySQL at {}: no answer within {}s; check the server's load and health, or raise ?timeout=SECS",
                self.target,
                self.timeout.as_secs_f64()
            ))),
        }
    }

    /// Hands the connection back to the pool (which rolls back what a
    /// failed call left open), unless the call failed in a way that may have
    /// left it broken or mid-statement: then it is closed, in the
    /// background, and never reused.
    fn settle<T>(&self, c: Conn, out: Result<T>) -> Result<T> {
        if matches!(out, Err(Error::Unavailable(_))) {
            let within = self.timeout;
            tokio::spawn(async move {
                let _ = tokio::time::timeout(within, c.disconnect()).await;
            });
        }
        out
    }

    /// One column of a row, or [`Error::Corrupt`] naming it.
    fn col<T: FromValue>(&self, r: &Row, i: usize) -> Result<T> {
        match r.get_opt::<T, usize>(i) {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(self.corrupt(&format!("column {i} holds {:?}", e.0))),
            None => Err(self.corrupt(&format!("a row has no column {i}"))),
        }
    }

    fn corrupt(&self, what: &str) -> Error {
        Error::Corrupt(format!(
            "MySQL at {}: {what}; keysmith's tables were changed outside keysmith",
            self.target
        ))
    }

    /// The one place a [`SequenceRow`] is made: from the six columns of
    /// [`COLS`] starting at `at`.
    fn sequence_row(&self, r: &Row, at: usize) -> Result<SequenceRow> {
        let version: i64 = self.col(r, at + 5)?;
        Ok(SequenceRow {
            name: self.col(r, at)?,
            next: self.col(r, at + 1)?,
            start: self.col(r, at + 2)?,
            max: self.col(r, at + 3)?,
            block: self.col(r, at + 4)?,
            generation: self.col(r, at + 6)?,
            failover_skip: self.col(r, at + 7)?,
            failover_skip_set: self.col::<i64>(r, at + 8)? != 0,
            failover_skipped: self.col(r, at + 9)?,
            version: u64::try_from(version)
                .map_err(|_| self.corrupt(&format!("a sequence has version {version}")))?,
        })
    }

    /// Maps a driver error to keysmith's, in one line naming the server.
    fn my(&self, e: &mysql_async::Error) -> Error {
        self.errors.map(e)
    }
}

/// How driver errors of one server become keysmith's: the one place they
/// are mapped, for the store and for the connections of `adopt` and
/// `import`.
#[derive(Debug, Clone)]
pub(crate) struct Errors {
    /// `host:port/database`.
    pub(crate) target: String,
    pub(crate) ssl_mode: SslMode,
}

impl Errors {
    fn corrupt(&self, what: &str) -> Error {
        Error::Corrupt(format!(
            "MySQL at {}: {what}; keysmith's tables were changed outside keysmith",
            self.target
        ))
    }

    /// Maps a driver error to keysmith's, in one line naming the server.
    pub(crate) fn map(&self, e: &mysql_async::Error) -> Error {
        use mysql_async::{DriverError, Error as E, IoError};
        let t = &self.target;
        match e {
            E::Server(s) => {
                let msg = one_line(&s.message);
                let code = s.code;
                match code {
                    // Access denied (login), to a database, a command.
                    1045 | 1698 => Error::InvalidArgument(format!(
                        "MySQL at {t} refused the login: {msg}; check the user and password in the store URL (or its password_file)"
                    )),
                    1044 | 1142 | 1143 | 1227 => Error::InvalidArgument(format!(
                        "MySQL at {t}: {msg}; grant the user ALL on the database (GRANT ALL ON db.* TO user), or use another user"
                    )),
                    1049 => Error::InvalidArgument(format!(
                        "MySQL at {t}: {msg}; create the database (CREATE DATABASE name) or fix the store URL"
                    )),
                    // Insecure transport refused (require_secure_transport).
                    3159 => Error::InvalidArgument(format!(
                        "MySQL at {t}: {msg}; the server requires TLS: use ssl-mode=required, verify_ca or verify_identity"
                    )),
                    // No such table or column, wrong row count: not keysmith's tables.
                    1146 | 1054 | 1136 | 1222 | 1241 => Error::Corrupt(format!(
                        "MySQL at {t}: {msg} (error {code}); keysmith's tables were changed outside keysmith"
                    )),
                    // Out of range, too long, CHECK and foreign keys, truncation.
                    1264 | 1406 | 1292 | 1366 | 1690 | 3819 | 4025 | 1451 | 1452 | 1048 => {
                        Error::InvalidArgument(format!(
                            "MySQL at {t} rejected a value: {msg} (error {code})"
                        ))
                    }
                    // 1205 lock wait timeout, 1213 deadlock, 1040 too many
                    // connections, 1053 shutdown, 1317/1927/3024 interrupted or
                    // timed out, 2006/2013 gone, and anything unforeseen: the
                    // server's state, which retrying may get past.
                    _ => Error::Unavailable(format!(
                        "MySQL at {t}: {msg} (error {code}); retry, and check the server if it persists"
                    )),
                }
            }
            E::Io(IoError::Tls(tls)) => Error::InvalidArgument(format!(
                "MySQL at {t}: TLS failed with ssl-mode={}: {}; check ssl-ca (the CA that signed the server's certificate) and that the host in the URL is the one the certificate names, or choose another ssl-mode",
                self.ssl_mode.as_str(),
                crate::error_chain(tls)
            )),
            E::Io(IoError::Io(io))
                if io
                    .get_ref()
                    .is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some()) =>
            {
                Error::InvalidArgument(format!(
                    "MySQL at {t}: TLS failed with ssl-mode={}: {}; check ssl-ca (the CA that signed the server's certificate) and that the host in the URL is the one the certificate names, or choose another ssl-mode",
                    self.ssl_mode.as_str(),
                    crate::error_chain(io)
                ))
            }
            E::Io(IoError::Io(io)) => Error::Unavailable(format!(
                "MySQL at {t}: {}; check that the server is running and reachable, then retry",
                crate::error_chain(io)
            )),
            E::Driver(DriverError::NoClientSslFlagFromServer) => Error::InvalidArgument(format!(
                "MySQL at {t}: the server offers no TLS, and ssl-mode={} requires it; configure TLS on the server (ssl_cert, ssl_key) or use ssl-mode=preferred or disabled",
                self.ssl_mode.as_str()
            )),
            E::Driver(
                d @ (DriverError::FromValue { .. }
                | DriverError::FromRow { .. }
                | DriverError::UnexpectedPacket { .. }),
            ) => self.corrupt(&one_line(&d.to_string())),
            E::Driver(
                d @ (DriverError::UnknownAuthPlugin { .. }
                | DriverError::CleartextPluginDisabled
                | DriverError::MysqlOldPasswordDisabled),
            ) => Error::InvalidArgument(format!(
                "MySQL at {t}: {}; give the account mysql_native_password or caching_sha2_password authentication",
                one_line(&d.to_string())
            )),
            E::Url(u) => {
                Error::InvalidArgument(format!("MySQL at {t}: {}", one_line(&u.to_string())))
            }
            other => Error::Unavailable(format!(
                "MySQL at {t}: {}; check that the server is running and reachable, then retry",
                crate::error_chain(other)
            )),
        }
    }
}

/// One connection to the database a `mysql://` store URL names, with the
/// URL's TLS (`preferred` falling back to plain TCP when the server offers
/// no TLS) and credentials, and keysmith's session settings, for tools that
/// run their own statements beside the store (`adopt`, `import`,
/// benchmarks). keysmith's tables are not touched.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad URL, a TLS failure or a refused
/// login (saying what to fix); [`Error::Unavailable`] when the server
/// cannot be reached within the URL's timeout.
pub async fn connect(url: &str) -> Result<Conn> {
    connect_mapped(url).await.map(|(c, _)| c)
}

/// [`connect`], and how to map the errors of that connection.
pub(crate) async fn connect_mapped(url: &str) -> Result<(Conn, Errors)> {
    let mut u = MysqlUrl::parse(url)?;
    u.resolve_tls().await?;
    let errors = Errors {
        target: u.target(),
        ssl_mode: u.ssl_mode,
    };
    let conn =
        match connect_once(&u, u.ssl_opts()).await? {
            Err(mysql_async::Error::Driver(
                mysql_async::DriverError::NoClientSslFlagFromServer,
            )) if u.ssl_mode == SslMode::Preferred => connect_once(&u, None).await?,
            other => other,
        };
    conn.map(|c| (c, errors.clone()))
        .map_err(|e| errors.map(&e))
}

/// One connection attempt within the URL's timeout.
async fn connect_once(
    u: &MysqlUrl,
    ssl: Option<SslOpts>,
) -> Result<std::result::Result<Conn, mysql_async::Error>> {
    tokio::time::timeout(u.timeout, Conn::new(u.opts(ssl).pool_opts(None)))
        .await
        .map_err(|_| {
            Error::Unavailable(format!(
                "MySQL at {}: no connection within {}s; check that the server is running and reachable, then retry",
                u.target(),
                u.timeout.as_secs_f64()
            ))
        })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The server's error codes keysmith acts on.
const ER_DUP_ENTRY: u16 = 1062;
const ER_NO_SUCH_TABLE: u16 = 1146;
const ER_NO_REFERENCED_ROW: u16 = 1452;
const ER_LOCK_DEADLOCK: u16 = 1213;

/// The server error code of `e`, if it is one.
fn code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

/// Starts a transaction at the session's isolation (READ COMMITTED).
async fn begin(
    c: &mut Conn,
) -> std::result::Result<mysql_async::Transaction<'_>, mysql_async::Error> {
    c.start_transaction(TxOpts::default()).await
}

impl MysqlStore {
    /// The SQL expression of the server's generation.
    pub(super) fn generation_expr(&self) -> &'static str {
        self.gen_sql.get().copied().unwrap_or(generation_sql(false))
    }

    /// The row of sequence `name`, locked in `tx`, fenced into the current
    /// generation first when it was last written in another
    /// ([`SequenceRow::fence`]; the fenced row is written before anything
    /// else), and the values the fence skipped. The row returned carries the
    /// current generation, so the write that follows records it.
    pub(super) async fn fenced_row(
        &self,
        tx: &mut mysql_async::Transaction<'_>,
        name: &str,
    ) -> Result<Option<(SequenceRow, i64)>> {
        let bad = |e: mysql_async::Error| self.my(&e);
        let r: Option<Row> = tx
            .exec_first(
                format!(
                    "SELECT {COLS}, {} FROM keysmith_sequences WHERE name = ? FOR UPDATE",
                    self.generation_expr()
                ),
                (name,),
            )
            .await
            .map_err(bad)?;
        let Some(r) = r else {
            return Ok(None);
        };
        let row = self.sequence_row(&r, 0)?;
        let generation: String = self.col(&r, 10)?;
        match row.fence(&generation) {
            Some(f) => {
                self.write_row(tx, &f).await?;
                tracing::warn!(
                    sequence = name,
                    skipped = f.next - row.next,
                    "MySQL server changed (a failover or a restore): the sequence moved forward by its failover skip"
                );
                let skipped = f.next - row.next;
                Ok(Some((f, skipped)))
            }
            None => Ok(Some((
                SequenceRow {
                    generation: Some(generation),
                    ..row
                },
                0,
            ))),
        }
    }

    /// Writes a sequence's whole row in `tx`.
    pub(super) async fn write_row(
        &self,
        tx: &mut mysql_async::Transaction<'_>,
        row: &SequenceRow,
    ) -> Result<()> {
        let version = i64::try_from(row.version)
            .map_err(|_| self.corrupt(&format!("sequence {:?}: version overflow", row.name)))?;
        tx.exec_drop(
            "UPDATE keysmith_sequences SET next_value = ?, max_value = ?, block = ?, version = ?,
                 generation = ?, failover_skip = ?, failover_skip_set = ?, failover_skipped = ?
             WHERE name = ?",
            (
                row.next,
                row.max,
                row.block,
                version,
                row.generation.clone(),
                row.failover_skip,
                row.failover_skip_set,
                row.failover_skipped,
                row.name.clone(),
            ),
        )
        .await
        .map_err(|e| self.my(&e))
    }
}

#[async_trait]
impl Store for MysqlStore {
    async fn ping(&self) -> Result<()> {
        let mut c = self.conn().await?;
        let out = self
            .deadline(async { c.ping().await.map_err(|e| self.my(&e)) })
            .await;
        self.settle(c, out)
    }

    async fn generation(&self) -> Result<String> {
        let mut c = self.conn().await?;
        let sql = format!("SELECT {}", self.generation_expr());
        let out = self
            .deadline(async {
                c.query_first::<String, _>(sql)
                    .await
                    .map_err(|e| self.my(&e))?
                    .ok_or_else(|| {
                        Error::Unavailable(format!("MySQL at {}: no answer", self.target))
                    })
            })
            .await;
        self.settle(c, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed() {
        let u = MysqlUrl::parse(
            "mysql://app:p%40ss@db.example:3307/orders?ssl-mode=VERIFY_IDENTITY&timeout=2.5&pool_size=4",
        )
        .unwrap();
        assert_eq!(u.user, "app");
        assert_eq!(u.password.as_deref(), Some("p@ss"));
        assert_eq!((u.host.as_str(), u.port), ("db.example", 3307));
        assert_eq!(u.database, "orders");
        assert_eq!(u.ssl_mode, SslMode::VerifyIdentity);
        assert_eq!(u.timeout, Duration::from_millis(2500));
        assert_eq!(u.pool_size, 4);
        assert_eq!(u.target(), "db.example:3307/orders");
        assert!(!format!("{u:?}").contains("p@ss"));

        let d = MysqlUrl::parse("mysql://root@[::1]/ks").unwrap();
        assert_eq!((d.host.as_str(), d.port), ("::1", DEFAULT_PORT));
        assert_eq!(d.ssl_mode, SslMode::Preferred);
        assert_eq!(d.password, None);
        assert_eq!(d.target(), "[::1]:3306/ks");
        for mode in [
            "disabled",
            "preferred",
            "required",
            "verify_ca",
            "verify-ca",
        ] {
            MysqlUrl::parse(&format!("mysql://u@h/db?ssl-mode={mode}")).unwrap();
        }
    }

    #[test]
    fn bad_urls_say_what_to_do_and_hide_the_password() {
        for (url, needle) in [
            ("mysql://h/db", "names no user"),
            ("mysql://:secret@h/db", "names no user"),
            ("mysql://u:secret@h", "names no database"),
            ("mysql://u:secret@h/", "names no database"),
            ("mysql://u:secret@h:0/db", "HOST[:PORT]"),
            ("mysql://u:secret@h:99999/db", "HOST[:PORT]"),
            ("mysql://u:secret@h:x/db", "HOST[:PORT]"),
            ("mysql://u:secret@[::1/db", "HOST[:PORT]"),
            ("mysql://u:secret@/db", "HOST[:PORT]"),
            ("mysql://u:secret@h/db?ssl-mode=maybe", "verify_identity"),
            ("mysql://u:secret@h/db?timeout=0", "timeout"),
            ("mysql://u:secret@h/db?timeout=nan", "timeout"),
            ("mysql://u:secret@h/db?pool_size=0", "pool_size"),
            ("mysql://u:secret@h/db?schema=x", "unknown parameter"),
            (
                "mysql://u:secret@h/db?ssl-ca=/nonexistent/ca.pem",
                "cannot read ssl-ca",
            ),
            (
                "mysql://u:secret@h/db?password_file=/nonexistent/pw",
                "password_file",
            ),
            ("postgres://u:secret@h/db", "not a MySQL URL"),
        ] {
            let err = MysqlUrl::parse(url).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{url}: {err:?}");
            let msg = err.to_string();
            assert!(msg.contains(needle), "{url}: {msg}");
            assert!(!msg.contains("secret"), "{url}: {msg}");
            assert!(!msg.contains('\n'), "{url}: {msg}");
        }
    }

    #[test]
    fn password_files_are_read_and_not_mixed_with_url_passwords() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\n").unwrap();
        let url = format!("mysql://u@h/db?password_file={}", pw.display());
        assert_eq!(
            MysqlUrl::parse(&url).unwrap().password.as_deref(),
            Some("s3cret")
        );
        let both = format!("mysql://u:x@h/db?password_file={}", pw.display());
        let e = MysqlUrl::parse(&both).unwrap_err().to_string();
        assert!(e.contains("one of them"), "{e}");
        let bad_ca = dir.path().join("ca.pem");
        std::fs::write(&bad_ca, "not a certificate").unwrap();
        let e = MysqlUrl::parse(&format!("mysql://u@h/db?ssl-ca={}", bad_ca.display()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no certificate"), "{e}");
    }
}

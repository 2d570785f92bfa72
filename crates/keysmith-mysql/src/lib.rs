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
//! Messages never show the password ([`keysmith_core::driver::redact_url`]).
//!
//! # Tables
//!
//! keysmith's tables live in `DB`, all named `keysmith_*`: `keysmith_meta`
//! (the schema version), `keysmith_sequences`, `keysmith_sequence_counts`,
//! `keysmith_pools`, `keysmith_pool_members`, `keysmith_pool_marks`,
//! `keysmith_workers`, `keysmith_numbering`, `keysmith_number_counters`,
//! `keysmith_tickets` and `keysmith_tombstones` (what dropped sequences and
//! pools of a name handed out, and the versions their lives reached: every
//! row records its life, `incarnation`). Names are `VARBINARY`, so they
//! compare and sort byte by byte, as every other backend does. MySQL runs DDL outside
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
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod source;
pub use source::MysqlSource;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, Pool, PoolConstraints, PoolOpts, Row, SslOpts, TxOpts};

use keysmith_core::driver::conn::{ConnPool, no_connection, with_conn};
use keysmith_core::driver::remembered::Remembered;
use keysmith_core::driver::{
    Alteration, CountsDelta, POOL_KIND, PoolRow, PoolSpec, PoolStore, Put, RateMark, RateMarks,
    Reservation, SEQUENCE_KIND, SequenceCounts, SequenceRow, SequenceSpec, SequenceStore, Store,
    Tombstone,
};
use keysmith_core::{Error, Result};

mod connect;
mod errors;
mod migrations;
mod numbers;
mod pools;
mod sequences;
mod tls;
mod url;
mod workers;

pub use connect::*;
pub(crate) use errors::*;
use migrations::*;
pub(crate) use url::*;

/// The driver, for code that runs its own statements on a [`connect`]ed
/// connection (benchmarks, checks).
pub use mysql_async;

/// The schema version this build of keysmith writes (`keysmith_meta`).
pub const SCHEMA_VERSION: i64 = 5;

const _: () = assert!(MIGRATIONS.len() == SCHEMA_VERSION as usize);

/// The server's clock in milliseconds since the Unix epoch. `SYSDATE`, not
/// `NOW`: the time the expression runs, not the statement's start. Exact
/// because every session runs at `time_zone = '+00:00'`.
const NOW_MS: &str = "CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)";

/// The columns of a sequence, in the order [`MysqlStore::sequence_row`] reads them.
const COLS: &str = "name, next_value, start_value, max_value, block, version, \
    generation, failover_skip, failover_skip_set, failover_skipped, incarnation";

/// How many columns [`COLS`] names: the first column after them is this
/// far from their first.
const NCOLS: usize = 11;

/// [`COLS`], each column prefixed by `alias.`, for a join.
fn cols_of(alias: &str) -> String {
    COLS.split(", ")
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The SQL expression of the server's generation: which server, in which
/// replication domain. A promoted replica is another server.
fn generation_sql(mariadb: bool) -> &'static str {
    if mariadb {
        "CONCAT('mariadb:', @@server_id, '/', @@gtid_domain_id)"
    } else {
        "CONCAT('mysql:', @@server_uuid)"
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
    pool_sizes: Remembered<i64>,
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
            pool_sizes: Remembered::new(),
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
        with_conn(self, async |c| {
            self.check_server(c).await?;
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
            let out = self.migrate_locked(c).await;
            let released = c
                .query_drop("DO RELEASE_LOCK(SHA1(CONCAT('keysmith-migrate:', DATABASE())))")
                .await
                .map_err(|e| self.my(&e));
            out.and(released)
        })
        .await
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
                match c.query_drop(*statement).await {
                    Ok(()) => {}
                    // An ADD COLUMN of a migration cut short after it ran.
                    Err(e) if code(&e) == Some(ER_DUP_FIELDNAME) => {
                        tracing::info!(target = %self.target, step = i + 1, "a column of this migration was added already");
                    }
                    Err(e) => return Err(self.my(&e)),
                }
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
            Err(_) => Err(no_connection(&self.server(), self.timeout)),
        }
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

    /// The one place a [`SequenceRow`] is made: from the [`NCOLS`] columns
    /// of [`COLS`] starting at `at`.
    fn sequence_row(&self, r: &Row, at: usize) -> Result<SequenceRow> {
        let version: i64 = self.col(r, at + 5)?;
        let incarnation: i64 = self.col(r, at + 10)?;
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
            incarnation: u64::try_from(incarnation)
                .map_err(|_| self.corrupt(&format!("a sequence has incarnation {incarnation}")))?,
        })
    }

    /// Maps a driver error to keysmith's, in one line naming the server.
    fn my(&self, e: &mysql_async::Error) -> Error {
        self.errors.map(e)
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
    pub(crate) fn generation_expr(&self) -> &'static str {
        self.gen_sql.get().copied().unwrap_or(generation_sql(false))
    }

    /// The row of sequence `name`, locked in `tx`, fenced into the current
    /// generation first when it was last written in another
    /// ([`SequenceRow::fence`]; the fenced row is written before anything
    /// else), and the values the fence skipped. The row returned carries the
    /// current generation, so the write that follows records it.
    pub(crate) async fn fenced_row(
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
        let generation: String = self.col(&r, NCOLS)?;
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
    pub(crate) async fn write_row(
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

impl ConnPool for MysqlStore {
    type Conn = Conn;

    async fn take(&self) -> Result<Conn> {
        self.conn().await
    }

    /// Closed in the background (the pool would roll back what a failed
    /// call left open, on a connection that may be broken), never reused.
    fn discard(&self, conn: Conn) {
        let within = self.timeout;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(within, conn.disconnect()).await;
        });
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn server(&self) -> String {
        format!("MySQL at {}", self.target)
    }
}

#[async_trait]
impl Store for MysqlStore {
    async fn ping(&self) -> Result<()> {
        with_conn(self, async |c| c.ping().await.map_err(|e| self.my(&e))).await
    }

    async fn generation(&self) -> Result<String> {
        let sql = format!("SELECT {}", self.generation_expr());
        with_conn(self, async |c| {
            c.query_first::<String, _>(sql)
                .await
                .map_err(|e| self.my(&e))?
                .ok_or_else(|| Error::Unavailable(format!("MySQL at {}: no answer", self.target)))
        })
        .await
    }
}

impl MysqlStore {
    /// Locks the tombstones of `name` of every kind for the rest of `tx`
    /// (made empty where missing) and reads the name's tombstone over them
    /// ([`Tombstone::max`]): the first statements of every create and drop,
    /// of either kind, so that those of one name run one after the other.
    ///
    /// Both kinds' rows, not only the caller's: a create reads the other
    /// kind's tombstone too, and were it not locked, a create of a pool
    /// could read a sequence's tombstone just before a drop of that
    /// sequence raises it and commits, and the pool appear after the drop
    /// below the values the sequence handed out. Both rows are written by
    /// one statement in primary-key order (`pool` before `sequence`), the
    /// same order in every transaction, so two of them wait for each other
    /// rather than deadlock.
    async fn lock_tombstone(
        &self,
        tx: &mut mysql_async::Transaction<'_>,
        name: &str,
    ) -> Result<Tombstone> {
        let bad = |e: mysql_async::Error| self.my(&e);
        tx.exec_drop(
            "INSERT INTO keysmith_tombstones (kind, name, high_water, reversed_next, version)
             VALUES (?, ?, 0, 0, 0), (?, ?, 0, 0, 0) ON DUPLICATE KEY UPDATE high_water = high_water",
            (POOL_KIND, name, SEQUENCE_KIND, name),
        )
        .await
        .map_err(bad)?;
        let rows: Vec<Row> = tx
            .exec(
                "SELECT high_water, reversed_next, version FROM keysmith_tombstones
                 WHERE kind IN (?, ?) AND name = ? ORDER BY kind FOR UPDATE",
                (POOL_KIND, SEQUENCE_KIND, name),
            )
            .await
            .map_err(bad)?;
        if rows.len() != 2 {
            return Err(self.corrupt(&format!(
                "{} of the 2 tombstones of {name:?} were found",
                rows.len()
            )));
        }
        rows.iter().try_fold(Tombstone::default(), |t, r| {
            let version: i64 = self.col(r, 2)?;
            Ok(t.max(Tombstone {
                high_water: self.col(r, 0)?,
                reversed_next: self.col(r, 1)?,
                version: u64::try_from(version).map_err(|_| {
                    self.corrupt(&format!("the tombstone of {name:?} has version {version}"))
                })?,
            }))
        })
    }

    /// Raises the tombstone of `name` of `kind` (locked by
    /// [`Self::lock_tombstone`]) to `t`, never lowering it.
    async fn raise_tombstone(
        &self,
        tx: &mut mysql_async::Transaction<'_>,
        kind: &str,
        name: &str,
        t: Tombstone,
    ) -> Result<()> {
        let version = self.version_param(name, t.version)?;
        tx.exec_drop(
            "UPDATE keysmith_tombstones SET high_water = GREATEST(high_water, ?),
                 reversed_next = GREATEST(reversed_next, ?), version = GREATEST(version, ?)
             WHERE kind = ? AND name = ?",
            (t.high_water, t.reversed_next, version, kind, name),
        )
        .await
        .map_err(|e| self.my(&e))
    }

    /// A row version or incarnation of `name` as MySQL stores it (`BIGINT`).
    pub(crate) fn version_param(&self, name: &str, v: u64) -> Result<i64> {
        i64::try_from(v).map_err(|_| self.corrupt(&format!("{name:?}: version overflow")))
    }
}

/// One transaction of this store, as the algorithms of `keysmith_core::driver`
/// run in it: the numbered-sequence steps (`NumbersTx`, `numbers.rs`) and the
/// pool steps (`PoolTx`, `pools.rs`).
pub(crate) struct InTx<'a, 't> {
    pub(crate) store: &'a MysqlStore,
    pub(crate) tx: &'a mut mysql_async::Transaction<'t>,
}

impl MysqlStore {
    /// Runs `steps` in one transaction, committed when they succeed.
    pub(crate) async fn in_tx<T: Send>(
        &self,
        steps: impl AsyncFnOnce(&mut InTx<'_, '_>) -> Result<T> + Send,
    ) -> Result<T> {
        with_conn(self, async |c| {
            let mut tx = begin(c).await.map_err(|e| self.my(&e))?;
            let out = steps(&mut InTx {
                store: self,
                tx: &mut tx,
            })
            .await?;
            tx.commit().await.map_err(|e| self.my(&e))?;
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_are_locked_in_primary_key_order() {
        // `lock_tombstone` writes the pool's row before the sequence's: the
        // order of the table's key, (kind, name), compared byte by byte.
        assert!(POOL_KIND.as_bytes() < SEQUENCE_KIND.as_bytes());
    }

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

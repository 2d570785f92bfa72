//! The PostgreSQL backend: `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?schema=NAME]`.
//!
//! # The URL
//!
//! Any URL [`tokio_postgres::Config`] accepts (`postgres://` or
//! `postgresql://`, its query parameters such as `connect_timeout=SECS`), plus
//! three parameters keysmith reads and removes before handing the rest on:
//!
//! - `schema=NAME`: the schema keysmith keeps its tables in (default
//!   `keysmith`). 1 to 63 bytes of `a-z`, `0-9` and `_`, not starting with a
//!   digit or `pg_`. Two stores on one database with different schemas are
//!   independent.
//! - `timeout=SECS`: how long one operation may take, waiting for a connection
//!   included, before it fails with [`Error::Unavailable`] (default 10). The
//!   server's `statement_timeout` and `idle_in_transaction_session_timeout` are
//!   set to the same.
//! - `pool_size=N`: at most this many connections (default 16).
//!
//! `connect_timeout` defaults to 5 seconds when the URL does not set it.
//!
//! # TLS and credentials
//!
//! `sslmode=disable|prefer|require|verify-ca|verify-full` (default `prefer`),
//! `sslrootcert=PATH` (default: the system's CA certificates), `sslcert=PATH`
//! and `sslkey=PATH` (a client certificate), and `password_file=PATH` (the
//! password, kept off the command line), as libpq reads them; every
//! connection keysmith opens to PostgreSQL goes through the one rustls
//! connector of `tls.rs`, whose documentation says what each mode checks.
//!
//! # Tables
//!
//! On first use keysmith creates the schema (if missing) and its tables:
//! `keysmith_meta` (the schema version), `sequences`, `pools` and
//! `pool_members`. Migrations run in one transaction under an advisory lock,
//! so any number of processes may open a new store at the same time; a store
//! already at the current version is opened with a single read.
//!
//! # Durability and isolation
//!
//! Every connection runs `SET synchronous_commit = on` when it is opened, so a
//! method returns only after its commit is flushed to the server's WAL (with
//! the server's `fsync` on, which is checked at open and warned about
//! otherwise). Allocation uses the store's own connections, never a caller's
//! transaction. Statements run at READ COMMITTED; each method's comment says
//! why its SQL is safe there.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod source;
pub use source::PostgresSource;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{
    ClientWrapper, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use keysmith_core::driver::conn::{ConnPool, no_connection, with_conn};
use keysmith_core::driver::remembered::Remembered;
use keysmith_core::driver::{
    Alteration, CountsDelta, POOL_KIND, PoolRow, PoolSpec, PoolStore, Put, RateMark, RateMarks,
    Reservation, SEQUENCE_KIND, SequenceCounts, SequenceRow, SequenceSpec, SequenceStore, Store,
    Tombstone,
};
use keysmith_core::{Error, Result};

pub mod connect;
mod migrations;
mod numbers;
mod pools;
mod sequences;
mod tls;
mod workers;

pub use connect::connect;
pub use connect::connect_config;
use connect::{Connector, DEFAULT_CONNECT_TIMEOUT, describe_target, one_line, parse_url};
use migrations::MIGRATIONS;
pub(crate) use tls::PgTls;

/// The schema used when the URL names none.
pub const DEFAULT_SCHEMA: &str = "keysmith";

/// The schema version this build of keysmith writes (`keysmith_meta`).
pub const SCHEMA_VERSION: i32 = 12;

const _: () = assert!(MIGRATIONS.len() == SCHEMA_VERSION as usize);

/// A store in a PostgreSQL database. Cheap to share (`Arc`); it holds a pool
/// of connections that it opens as needed.
pub struct PostgresStore {
    pool: Pool,
    schema: String,
    /// `host:port/database`, for messages.
    target: String,
    timeout: Duration,
    sql: Sql,
    /// The size of each pool this store sampled, so that a sample is one
    /// statement. Never trusted: the statement returns the size it saw, and
    /// a sample drawn with another size is drawn again.
    pool_sizes: Remembered<i64>,
    /// The connector, also to explain TLS failures.
    tls: PgTls,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .field("schema", &self.schema)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database a `postgres://` or `postgresql://` URL names
    /// (see the [module documentation](self) for its parameters) and creates
    /// or upgrades keysmith's tables in the chosen schema.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a URL that cannot be parsed, a bad
    /// `schema`, `timeout` or `pool_size`, a refused login, a missing database
    /// or missing privileges; [`Error::Unavailable`] when the server cannot be
    /// reached within the timeouts; [`Error::Corrupt`] when the schema was
    /// written by a newer keysmith or holds tables keysmith cannot use.
    pub async fn open(url: &str) -> Result<Self> {
        let settings = parse_url(url)?;
        let target = describe_target(&settings.config);
        let mut config = settings.config;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("keysmith");
        }
        #[cfg(target_os = "linux")]
        if config.get_tcp_user_timeout().is_none() {
            // A dead peer with unacknowledged data is given up on, not waited for.
            config.tcp_user_timeout(settings.timeout);
        }
        let connect_timeout = *config
            .get_connect_timeout()
            .unwrap_or(&DEFAULT_CONNECT_TIMEOUT);
        let manager = Manager::from_connect(
            config,
            Connector {
                timeout: settings.timeout,
                tls: settings.tls.clone(),
            },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(settings.timeout))
            // Connecting plus the session's SET.
            .create_timeout(Some(connect_timeout + settings.timeout))
            .recycle_timeout(Some(settings.timeout))
            .build()
            .map_err(|e| Error::invalid(format!("cannot build a connection pool: {e}")))?;
        let schema = quote_ident(&settings.schema);
        let store = PostgresStore {
            pool,
            sql: Sql::new(&schema),
            schema: settings.schema,
            target,
            timeout: settings.timeout,
            pool_sizes: Remembered::new(),
            tls: settings.tls,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// The schema this store keeps its tables in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Creates or upgrades the tables. Fast path: one read of the version.
    async fn migrate(&self) -> Result<()> {
        with_conn(self, async |c| {
            let probe = format!(
                "SELECT schema_version FROM {}.keysmith_meta",
                quote_ident(&self.schema)
            );
            match c.query_opt(&probe, &[]).await {
                Ok(Some(row)) => {
                    let v: i32 = row.try_get(0).map_err(|e| self.pg(&e))?;
                    if v == SCHEMA_VERSION {
                        return self.warn_unless_durable(c).await;
                    }
                    self.check_not_newer(v)?;
                }
                Ok(None) => {}
                Err(e)
                    if matches!(
                        e.code(),
                        Some(&SqlState::UNDEFINED_TABLE | &SqlState::INVALID_SCHEMA_NAME)
                    ) => {}
                Err(e) => return Err(self.pg(&e)),
            }
            self.migrate_locked(c).await?;
            self.warn_unless_durable(c).await
        })
        .await
    }

    async fn migrate_locked(&self, c: &mut Client) -> Result<()> {
        let s = quote_ident(&self.schema);
        let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
        // Every keysmith that migrates this schema takes the same lock first,
        // so concurrent first uses run one after the other, and the later ones
        // find the work done.
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&advisory_key(&self.schema)],
        )
        .await
        .map_err(|e| self.pg(&e))?;
        let exists = tx
            .query_opt(
                "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1",
                &[&self.schema],
            )
            .await
            .map_err(|e| self.pg(&e))?
            .is_some();
        if !exists {
            tx.batch_execute(&format!("CREATE SCHEMA {s}"))
                .await
                .map_err(|e| self.pg(&e))?;
        }
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {s}.keysmith_meta (
                 singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                 schema_version integer NOT NULL)"
        ))
        .await
        .map_err(|e| self.pg(&e))?;
        let current: i32 = match tx
            .query_opt(
                &format!("SELECT schema_version FROM {s}.keysmith_meta"),
                &[],
            )
            .await
            .map_err(|e| self.pg(&e))?
        {
            Some(row) => row.try_get(0).map_err(|e| self.pg(&e))?,
            None => 0,
        };
        self.check_not_newer(current)?;
        if current == SCHEMA_VERSION {
            return Ok(()); // Someone else migrated while we waited; drop rolls back.
        }
        for step in &MIGRATIONS[current as usize..] {
            let step = step
                .replace("{s}", &s)
                .replace("{schema_name}", &self.schema);
            tx.batch_execute(&step).await.map_err(|e| self.pg(&e))?;
        }
        tx.execute(
            &format!(
                "INSERT INTO {s}.keysmith_meta (singleton, schema_version) VALUES (true, $1)
                 ON CONFLICT (singleton) DO UPDATE SET schema_version = EXCLUDED.schema_version"
            ),
            &[&SCHEMA_VERSION],
        )
        .await
        .map_err(|e| self.pg(&e))?;
        tx.commit().await.map_err(|e| self.pg(&e))?;
        tracing::info!(
            target = %self.target,
            schema = %self.schema,
            from = current,
            to = SCHEMA_VERSION,
            "migrated keysmith schema"
        );
        Ok(())
    }

    fn check_not_newer(&self, v: i32) -> Result<()> {
        if (0..=SCHEMA_VERSION).contains(&v) {
            Ok(())
        } else {
            Err(Error::Corrupt(format!(
                "PostgreSQL at {}: schema {:?} is at version {v}, this keysmith knows up to {SCHEMA_VERSION}; upgrade keysmith or use another schema (?schema=NAME)",
                self.target, self.schema
            )))
        }
    }

    async fn warn_unless_durable(&self, c: &Client) -> Result<()> {
        let row = c
            .query_one("SELECT current_setting('fsync')", &[])
            .await
            .map_err(|e| self.pg(&e))?;
        let fsync: String = row.try_get(0).map_err(|e| self.pg(&e))?;
        if fsync != "on" {
            tracing::warn!(
                target = %self.target,
                "PostgreSQL runs with fsync={fsync}: reservations may be lost in a crash of the server's machine, and values handed out again"
            );
        }
        Ok(())
    }

    /// A pooled session of this store, with the settings every session of
    /// it has (`synchronous_commit = on`, the statement and idle timeouts of
    /// the URL, the schema on the search path): for SQL beside the store,
    /// such as the SQL functions, or a check of those settings.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when no connection comes within the timeout.
    pub async fn client(&self) -> Result<Object> {
        self.pool.get().await.map_err(|e| match e {
            PoolError::Timeout(_) => no_connection(&self.server(), self.timeout),
            PoolError::Backend(e) => self.pg(&e),
            other => Error::Unavailable(format!(
                "PostgreSQL at {}: {}; retry",
                self.target,
                one_line(&other.to_string())
            )),
        })
    }

    /// Maps a driver error to keysmith's, in one line naming the server.
    fn pg(&self, e: &tokio_postgres::Error) -> Error {
        let t = &self.target;
        if let Some(why) = self.tls.explain(e) {
            return Error::InvalidArgument(format!("PostgreSQL at {t}: {why}"));
        }
        let Some(db) = e.as_db_error() else {
            let msg = keysmith_core::driver::error_chain(e);
            return if msg.starts_with("error deserializing")
                || msg.starts_with("query returned an unexpected number")
                || msg.starts_with("invalid column")
            {
                Error::Corrupt(format!(
                    "PostgreSQL at {t}, schema {:?}: {msg}; the tables were changed outside keysmith",
                    self.schema
                ))
            } else {
                Error::Unavailable(format!(
                    "PostgreSQL at {t}: {msg}; check that the server is running and reachable, then retry"
                ))
            };
        };
        let code = db.code().code();
        let msg = one_line(db.message());
        match &code[..2] {
            "28" => Error::InvalidArgument(format!(
                "PostgreSQL at {t} refused the login: {msg}; check the user and password in the store URL"
            )),
            "3D" => Error::InvalidArgument(format!(
                "PostgreSQL at {t}: {msg}; create the database or fix the store URL"
            )),
            "42" if db.code() == &SqlState::INSUFFICIENT_PRIVILEGE => {
                Error::InvalidArgument(format!(
                    "PostgreSQL at {t}: {msg}; grant the user CREATE on the database (or USAGE and CREATE on schema {:?}), or pick another schema with ?schema=NAME",
                    self.schema
                ))
            }
            "42" | "3F" | "2B" => Error::Corrupt(format!(
                "PostgreSQL at {t}, schema {:?}: {msg} (SQLSTATE {code}); the keysmith tables were changed outside keysmith",
                self.schema
            )),
            "23" | "22" => Error::InvalidArgument(format!(
                "PostgreSQL at {t} rejected a value: {msg} (SQLSTATE {code})"
            )),
            // 08 connection, 40 serialization/deadlock, 53 resources,
            // 55 lock not available, 57 shutdown/cancel (statement_timeout),
            // 58 system error, and anything unforeseen: the server's state,
            // which retrying may get past.
            _ => Error::Unavailable(format!(
                "PostgreSQL at {t}: {msg} (SQLSTATE {code}); retry, and check the server if it persists"
            )),
        }
    }
}

/// The SQL of every method, with the schema filled in.
#[derive(Debug)]
struct Sql {
    create: String,
    read: String,
    write_if_version: String,
    raise_failover_skip: String,
    generation: String,
    counts_ensure: String,
    counts_lock: String,
    counts_write: String,
    counts_read: String,
    pool_marks_ensure: String,
    pool_marks_lock: String,
    pool_marks_write: String,
    pool_marks_read: String,
    lock_row: String,
    write_next: String,
    reserve_atomic: String,
    list: String,
    /// `sequence_names_near`: the closest names before `$1`, then from it on.
    near_before: String,
    near_after: String,
    /// `pool_names_near`: the same over pools.
    pool_near_before: String,
    pool_near_after: String,
    drop: String,
    pool_create: String,
    pool_read: String,
    pool_sample: String,
    pool_swap: String,
    pool_members: String,
    pool_list: String,
    pool_drop: String,
    pool_fence_claim: String,
    pool_fence_top: String,
    pool_fence_move: String,
    tombstone_lock: String,
    tombstone_read: String,
    tombstone_raise: String,
}

/// The columns of a sequence, in the order `row` reads them.
const COLS: &str = "name, next, start_value, max_value, block, version, \
    generation, failover_skip, failover_skip_set, failover_skipped, incarnation";

/// The columns of a pool, in the order `pool_row` reads them.
const POOL_COLS: &str =
    "name, start_value, size, generation, class_increment, class_offset, incarnation";

/// The columns of a sequence's counts, in the order `counts_from` reads them.
const CCOLS: &str =
    "handed_back, handed_out, abandoned, skipped, mark_at, mark_reserved, prev_at, prev_reserved";
const CCOLS_C: &str = "c.handed_back, c.handed_out, c.abandoned, c.skipped, \
    c.mark_at, c.mark_reserved, c.prev_at, c.prev_reserved";

impl Sql {
    fn new(s: &str) -> Sql {
        Sql {
            create: format!(
                "INSERT INTO {s}.sequences (name, next, start_value, max_value, block, version,
                                            generation, failover_skip, failover_skip_set,
                                            incarnation)
                 VALUES ($1, $2, $2, $3, $4, $7, {s}.store_generation(), $5, $6, $7)
                 RETURNING {COLS}"
            ),
            near_before: format!(
                "SELECT name FROM {s}.sequences WHERE name < $1 ORDER BY name DESC LIMIT $2"
            ),
            near_after: format!(
                "SELECT name FROM {s}.sequences WHERE name >= $1 ORDER BY name LIMIT $2"
            ),
            pool_near_before: format!(
                "SELECT name FROM {s}.pools WHERE name < $1 ORDER BY name DESC LIMIT $2"
            ),
            pool_near_after: format!(
                "SELECT name FROM {s}.pools WHERE name >= $1 ORDER BY name LIMIT $2"
            ),
            read: format!("SELECT {COLS} FROM {s}.sequences WHERE name = $1"),
            // One round trip. `upd` writes when the version matches. When it
            // does not, `cur` returns the row with a plain read. At READ
            // COMMITTED that read sees the statement's snapshot, which can
            // predate a writer that `upd` waited for, so it may show the very
            // version that just failed to match: `put_if_version` then runs
            // the statement again (a new snapshot). A locking read (FOR SHARE)
            // would avoid the rerun but writes a row lock, and so costs a WAL
            // flush on every conflict: under contention that doubled the
            // flushes and made 8 optimistic clients slower than one.
            write_if_version: format!(
                "SELECT * FROM {s}.write_if_version($1, $2, $3, $4, $5, $6, $7)"
            ),
            raise_failover_skip: format!(
                "UPDATE {s}.sequences SET failover_skip = $2
                 WHERE name = $1 AND NOT failover_skip_set AND failover_skip < $2"
            ),
            generation: format!("SELECT {s}.store_generation()"),
            counts_ensure: format!(
                "INSERT INTO {s}.sequence_counts (name, handed_back, handed_out, abandoned, skipped)
                 VALUES ($1, 0, 0, 0, 0) ON CONFLICT (name) DO NOTHING"
            ),
            counts_lock: format!(
                "SELECT {CCOLS} FROM {s}.sequence_counts WHERE name = $1 FOR UPDATE"
            ),
            counts_write: format!(
                "UPDATE {s}.sequence_counts SET handed_back = $2, handed_out = $3, abandoned = $4,
                 skipped = $5, mark_at = $6, mark_reserved = $7, prev_at = $8, prev_reserved = $9
                 WHERE name = $1"
            ),
            counts_read: format!(
                "SELECT s.name, s.next, s.start_value, s.max_value, s.block, s.version,
                        s.generation, s.failover_skip, s.failover_skip_set, s.failover_skipped,
                        s.incarnation, {CCOLS_C}
                 FROM {s}.sequences s LEFT JOIN {s}.sequence_counts c ON c.name = s.name
                 WHERE s.name = $1"
            ),
            pool_marks_ensure: format!(
                "INSERT INTO {s}.pool_marks (name) VALUES ($1) ON CONFLICT (name) DO NOTHING"
            ),
            pool_marks_lock: format!(
                "SELECT mark_at, mark_value, prev_at, prev_value FROM {s}.pool_marks WHERE name = $1 FOR UPDATE"
            ),
            pool_marks_write: format!(
                "UPDATE {s}.pool_marks SET mark_at = $2, mark_value = $3, prev_at = $4, prev_value = $5
                 WHERE name = $1"
            ),
            pool_marks_read: format!(
                "SELECT m.mark_at, m.mark_value, m.prev_at, m.prev_value
                 FROM {s}.pools p LEFT JOIN {s}.pool_marks m ON m.name = p.name WHERE p.name = $1"
            ),
            lock_row: format!("SELECT * FROM {s}.lock_row($1)"),
            write_next: format!(
                "UPDATE {s}.sequences SET next = $2, version = $3, generation = $4 WHERE name = $1"
            ),
            // One UPDATE does the reservation. RETURNING sees only new values,
            // so the old `next` (the first value reserved) is copied into
            // `last_start` by the same SET, whose right-hand sides all read the
            // old row. The CASE clamps at max + 1 without computing next + n
            // when that could pass it (max - next + 1 >= 1 here, no overflow).
            // Under concurrency PostgreSQL re-evaluates WHERE and SET on the
            // newest row version after waiting for its writer, so two callers
            // never get the same range. When nothing was updated, `cur` tells
            // an exhausted sequence (next > max) from a missing one, reading
            // the newest version for the same reason as in put_if_version.
            // The SQL function of migration 2: the logic lives once.
            reserve_atomic: format!(
                "SELECT first_value, next_free, row_version, fenced, row_incarnation
                 FROM {s}.reserve_in($1, $2, $3)"
            ),
            list: format!("SELECT {COLS} FROM {s}.sequences ORDER BY name"),
            drop: format!("DELETE FROM {s}.sequences WHERE name = $1"),
            pool_create: format!(
                "WITH p AS (
                     INSERT INTO {s}.pools (name, start_value, size, generation,
                                           class_increment, class_offset, incarnation)
                     VALUES ($1, $2, $3, {s}.store_generation(), $5, $6, $7)
                     RETURNING name)
                 INSERT INTO {s}.pool_members (pool, slot, value)
                 SELECT p.name, g - $2, g FROM p, generate_series($2::bigint, $4::bigint) AS g"
            ),
            pool_read: format!(
                "SELECT {POOL_COLS} FROM {s}.pools WHERE name = $1"
            ),
            // One statement: the members of the slots the caller drew (with
            // the primary key index), and the size it should have drawn them
            // from, read in the same snapshot.
            pool_sample: format!(
                "SELECT (SELECT size FROM {s}.pools WHERE name = $1),
                        ARRAY(SELECT value FROM {s}.pool_members
                              WHERE pool = $1 AND slot = ANY($2))"
            ),
            // One statement; the member keeps its slot. Two swaps of the same
            // member: the second waits for the first's commit, then
            // re-evaluates `value = $2` on the new row version, finds it
            // false and swaps nothing.
            // The swap happens only in the pool's generation (or a pool
            // from before generations): the pool's and the store's come back
            // for the caller to act on (`PoolGeneration`).
            pool_swap: format!(
                "WITH g AS (SELECT {s}.store_generation() AS gen),
                      p AS (SELECT generation, incarnation FROM {s}.pools WHERE name = $1),
                      upd AS (
                     UPDATE {s}.pool_members SET value = $3 WHERE pool = $1 AND value = $2
                       AND ((SELECT generation FROM p) IS NULL
                            OR (SELECT generation FROM p) = (SELECT gen FROM g))
                       AND ($4::bigint = 0 OR (SELECT incarnation FROM p) IN (0, $4::bigint))
                     RETURNING 1)
                 SELECT EXISTS (SELECT 1 FROM p), (SELECT count(*) FROM upd),
                        (SELECT generation FROM p), (SELECT gen FROM g),
                        (SELECT incarnation FROM p)"
            ),
            // Claims the fence: records the store's generation if the pool
            // is still in `$2` (any, when NULL); the size and the residue
            // class come back only to the one caller that moved it.
            pool_fence_claim: format!(
                "UPDATE {s}.pools SET generation = {s}.store_generation()
                 WHERE name = $1 AND ($2::text IS NULL OR generation IS NOT DISTINCT FROM $2)
                 RETURNING size, class_increment, class_offset"
            ),
            pool_fence_top: format!("SELECT max(value) FROM {s}.pool_members WHERE pool = $1"),
            pool_fence_move: format!(
                "UPDATE {s}.pool_members SET value = value + $2 WHERE pool = $1"
            ),
            pool_members: format!(
                "SELECT EXISTS (SELECT 1 FROM {s}.pools WHERE name = $1),
                        ARRAY(SELECT value FROM {s}.pool_members WHERE pool = $1 ORDER BY value)"
            ),
            pool_list: format!(
                "SELECT {POOL_COLS} FROM {s}.pools ORDER BY name"
            ),
            pool_drop: format!("DELETE FROM {s}.pools WHERE name = $1"),
            // Locks the tombstone row of a name of one kind (made empty if
            // missing) for the rest of the transaction: creates and drops of
            // one name and kind take this lock first, so they run one after
            // the other.
            tombstone_lock: format!(
                "INSERT INTO {s}.tombstones (kind, name, high_water, reversed_next, version)
                 VALUES ($1, $2, 0, 0, 0)
                 ON CONFLICT (kind, name) DO UPDATE SET high_water = {s}.tombstones.high_water"
            ),
            // The name's tombstone over every kind (their `Tombstone::max`),
            // read in a snapshot taken after the lock above was granted.
            tombstone_read: format!(
                "SELECT COALESCE(max(high_water), 0), COALESCE(max(reversed_next), 0),
                        COALESCE(max(version), 0)
                 FROM {s}.tombstones WHERE name = $1"
            ),
            tombstone_raise: format!(
                "UPDATE {s}.tombstones SET high_water = GREATEST(high_water, $3),
                     reversed_next = GREATEST(reversed_next, $4),
                     version = GREATEST(version, $5)
                 WHERE kind = $1 AND name = $2"
            ),
        }
    }
}

impl PostgresStore {
    /// Locks the tombstone of `name` of `kind` for the rest of `tx` and
    /// reads the name's tombstone over every kind (sequences' and pools':
    /// their [`Tombstone::max`]; empty when nothing of that name was
    /// dropped): the first step of every create and drop.
    ///
    /// Only this kind's row is locked. Creates and drops of one name and
    /// kind run one after the other on it; across kinds nothing is lost
    /// without the other row's lock either: the read below is a statement
    /// of its own, so its snapshot is taken after the lock was granted, and
    /// sees every drop of the other kind that committed before. A drop of
    /// the other kind that commits later is of an object that still
    /// existed when this create read (a sequence and a pool of one name may
    /// live side by side), so the create comes first in any order of the
    /// two. And two drops of different kinds that each miss the other's
    /// raise lose nothing: each writes its own row, and every create reads
    /// the largest of both.
    async fn lock_tombstone(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        kind: &str,
        name: &str,
    ) -> Result<Tombstone> {
        let bad = |e: tokio_postgres::Error| self.pg(&e);
        tx.execute(&self.sql.tombstone_lock, &[&kind, &name])
            .await
            .map_err(bad)?;
        let r = tx
            .query_one(&self.sql.tombstone_read, &[&name])
            .await
            .map_err(bad)?;
        let version: i64 = r.try_get(2).map_err(bad)?;
        Ok(Tombstone {
            high_water: r.try_get(0).map_err(bad)?,
            reversed_next: r.try_get(1).map_err(bad)?,
            version: stored_version(version),
        })
    }

    /// Raises the tombstone of `name` of `kind` (locked by
    /// [`Self::lock_tombstone`]) to `t`, never lowering it.
    async fn raise_tombstone(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        kind: &str,
        name: &str,
        t: Tombstone,
    ) -> Result<()> {
        tx.execute(
            &self.sql.tombstone_raise,
            &[
                &kind,
                &name,
                &t.high_water,
                &t.reversed_next,
                &version_param(name, t.version)?,
            ],
        )
        .await
        .map(drop)
        .map_err(|e| self.pg(&e))
    }
}

/// A row version or incarnation as a `bigint` column holds it.
///
/// # Errors
/// [`Error::Corrupt`] past `i64::MAX`: versions start at an incarnation and
/// grow by one per change, so none gets there but from a corrupt row.
pub(crate) fn version_param(name: &str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::Corrupt(format!("{name:?}: version {v} overflows")))
}

/// A version or incarnation read from a `bigint` column whose 0 means
/// "unknown" (rows and tombstones from before keysmith recorded lives).
pub(crate) fn stored_version(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl ConnPool for PostgresStore {
    type Conn = Object;

    async fn take(&self) -> Result<Object> {
        self.client().await
    }

    fn discard(&self, conn: Object) {
        drop(Object::take(conn));
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn server(&self) -> String {
        format!("PostgreSQL at {}", self.target)
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn ping(&self) -> Result<()> {
        with_conn(self, async |c| {
            c.simple_query("SELECT 1")
                .await
                .map(drop)
                .map_err(|e| self.pg(&e))
        })
        .await
    }

    async fn generation(&self) -> Result<String> {
        with_conn(self, async |c| {
            let r = c
                .query_one(&self.sql.generation, &[])
                .await
                .map_err(|e| self.pg(&e))?;
            r.try_get(0).map_err(|e| self.pg(&e))
        })
        .await
    }
}

/// `"name"`, for names [`validate_schema`] accepted (no quotes inside).
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The advisory lock key of a schema's migration: FNV-1a of a fixed prefix
/// and the name, the same in every keysmith version.
fn advisory_key(schema: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in b"keysmith-migrate:".iter().chain(schema.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// One transaction of this store, as the algorithms of `keysmith_core::driver`
/// run in it: the numbered-sequence steps (`NumbersTx`, `numbers.rs`) and the
/// pool steps (`PoolTx`, `pools.rs`).
pub(crate) struct InTx<'a, 't> {
    pub(crate) store: &'a PostgresStore,
    pub(crate) tx: &'a tokio_postgres::Transaction<'t>,
}

impl PostgresStore {
    /// Runs `steps` in one transaction, committed when they succeed.
    pub(crate) async fn in_tx<T: Send>(
        &self,
        steps: impl AsyncFnOnce(&mut InTx<'_, '_>) -> Result<T> + Send,
    ) -> Result<T> {
        with_conn(self, async |c| {
            let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
            let out = steps(&mut InTx {
                store: self,
                tx: &tx,
            })
            .await?;
            tx.commit().await.map_err(|e| self.pg(&e))?;
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keysmith_core::driver::{DEFAULT_CONN_TIMEOUT as DEFAULT_TIMEOUT, DEFAULT_POOL_SIZE};

    #[test]
    fn keysmith_parameters_are_taken_off_the_url() {
        let s = parse_url(
            "postgres://u:pw@db.example:6543/app?schema=ks_1&connect_timeout=3&timeout=2.5&pool_size=4",
        )
        .unwrap();
        assert_eq!(s.schema, "ks_1");
        assert_eq!(s.timeout, Duration::from_millis(2500));
        assert_eq!(s.pool_size, 4);
        assert_eq!(s.config.get_dbname(), Some("app"));
        assert_eq!(s.config.get_ports(), &[6543]);
        assert_eq!(
            s.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        assert_eq!(describe_target(&s.config), "db.example:6543/app");

        let d = parse_url("postgresql://u@h/db").unwrap();
        assert_eq!(d.schema, DEFAULT_SCHEMA);
        assert_eq!(d.timeout, DEFAULT_TIMEOUT);
        assert_eq!(d.pool_size, DEFAULT_POOL_SIZE);
    }

    #[test]
    fn bad_parameters_say_what_to_do() {
        for (url, needle) in [
            ("postgres://u@h/db?schema=Bad", "a-z, 0-9 and _"),
            ("postgres://u@h/db?schema=pg_x", "pg_"),
            ("postgres://u@h/db?schema=1x", "digit"),
            ("postgres://u@h/db?schema=", "1 to 63"),
            ("postgres://u@h/db?schema=a%22b", "a-z"),
            ("postgres://u@h/db?timeout=0", "timeout"),
            ("postgres://u@h/db?timeout=abc", "timeout"),
            ("postgres://u@h/db?pool_size=0", "pool_size"),
            ("postgres://u@h/db?nonsense=1", "not a PostgreSQL URL"),
        ] {
            let err = parse_url(url).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{url}: {err:?}");
            let msg = err.to_string();
            assert!(msg.contains(needle), "{url}: {msg}");
            assert!(!msg.contains('\n'), "{url}: {msg}");
        }
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            keysmith_core::driver::redact_url("postgres://u:secret@h:1/db?x=1"),
            "postgres://u:***@h:1/db?x=1"
        );
        assert_eq!(
            keysmith_core::driver::redact_url("postgres://u@h/db"),
            "postgres://u@h/db"
        );
        let err = parse_url("postgres://u:secret@h/db?bogus=1").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn advisory_key_is_stable() {
        // A fixed value: changing it would let two keysmith versions migrate
        // the same schema at once.
        assert_eq!(advisory_key("keysmith"), advisory_key("keysmith"));
        assert_ne!(advisory_key("keysmith"), advisory_key("keysmith2"));
        assert_eq!(advisory_key("keysmith"), 6_772_400_477_577_499_785);
    }
}

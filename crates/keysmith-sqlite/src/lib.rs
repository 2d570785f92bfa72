//! The embedded default: one SQLite file, safe for many processes.
//!
//! The file is opened in WAL mode with `synchronous=FULL`, so a committed
//! reservation survives a power cut, and with a busy timeout, so processes
//! sharing the file wait for each other instead of failing. Every write runs in
//! `BEGIN IMMEDIATE`, which takes SQLite's write lock up front: the locked
//! strategy is exactly that, the optimistic one gets its conditional put
//! inside it, and the atomic one is the locked transaction (SQLite offers
//! no separate one-step path: `keysmith_core::store::AtomicReserve`). The write-ahead
//! log is kept small (checkpointed and truncated past [`WAL_SIZE_LIMIT`]),
//! so that it cannot fill a small disk by itself: see [`wal`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod source;
pub use source::SqliteSource;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

use keysmith_core::driver::{
    Alteration, CountsDelta, POOL_KIND, PoolRow, PoolSpec, PoolStore, PoolTotals, PrefixRange, Put,
    RateMark, RateMarks, Reservation, SEQUENCE_KIND, SequenceCounts, SequenceRow, SequenceSpec,
    SequenceStore, Store, Tombstone,
};
use keysmith_core::{Error, Result};

pub mod connect;
mod numbers;
mod pools;
mod sequences;
pub mod wal;
mod workers;

pub use wal::WAL_SIZE_LIMIT;

/// How long a writer waits for another process's write lock, by default.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The schema version this code writes; older files are migrated on open.
const SCHEMA_VERSION: i64 = 7;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS keysmith_meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS keysmith_sequences (
    name      TEXT PRIMARY KEY,
    next      INTEGER NOT NULL,
    start     INTEGER NOT NULL,
    max       INTEGER NOT NULL,
    block     INTEGER NOT NULL,
    version   INTEGER NOT NULL,
    -- `next` before the last change: lets the atomic UPDATE return its range.
    prev_next INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS keysmith_pools (
    name  TEXT PRIMARY KEY,
    start INTEGER NOT NULL,
    size  INTEGER NOT NULL
);
-- What clean closes and alterations reported of each sequence, and its
-- rate marks (see SequenceCounts). Deleted with the sequence.
CREATE TABLE IF NOT EXISTS keysmith_sequence_counts (
    name          TEXT PRIMARY KEY,
    handed_back   INTEGER NOT NULL,
    handed_out    INTEGER NOT NULL,
    abandoned     INTEGER NOT NULL,
    skipped       INTEGER NOT NULL,
    mark_at       INTEGER,
    mark_reserved INTEGER,
    prev_at       INTEGER,
    prev_reserved INTEGER
);
-- The rate marks of each pool (see RateMarks). Deleted with the pool.
CREATE TABLE IF NOT EXISTS keysmith_pool_marks (
    name       TEXT PRIMARY KEY,
    mark_at    INTEGER,
    mark_value INTEGER,
    prev_at    INTEGER,
    prev_value INTEGER
);
-- One member per slot: slot s holds the member equal to start + s (mod size).
CREATE TABLE IF NOT EXISTS keysmith_pool_members (
    pool  TEXT NOT NULL,
    slot  INTEGER NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (pool, slot)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS keysmith_pool_members_value
    ON keysmith_pool_members (pool, value);
";

/// Version 2: worker-id leases of time-ordered ids (`workers.rs`). One
/// `CREATE TABLE IF NOT EXISTS`, so it also runs on version-1 files.
const WORKERS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS keysmith_workers (
    grp        TEXT NOT NULL,
    worker     INTEGER NOT NULL,
    fence      INTEGER NOT NULL,
    holder     TEXT NOT NULL,
    -- Every id issued under this worker id lies below this time (ms).
    until_ms   INTEGER NOT NULL,
    -- System-clock ms at which the lease expires; 0 once released.
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (grp, worker)
) WITHOUT ROWID;
";

/// Version 6: the tombstones of dropped sequences and pools (see
/// [`keysmith_core::driver::Tombstone`]). `CREATE TABLE IF NOT EXISTS`, so it also
/// runs on older files, which dropped names before without a mark: their
/// earlier drops are not known, only those from now on.
const TOMBSTONES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS keysmith_tombstones (
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    high_water    INTEGER NOT NULL,
    reversed_next INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
) WITHOUT ROWID;
";

/// The tombstone of `name` over every kind (sequences' and pools': their
/// [`Tombstone::max`]); empty when nothing of that name was dropped.
pub(crate) fn read_tombstone(conn: &Connection, name: &str) -> Result<Tombstone> {
    conn.prepare_cached(
        "SELECT coalesce(max(high_water), 0), coalesce(max(reversed_next), 0), coalesce(max(version), 0)
         FROM keysmith_tombstones WHERE name = ?1",
    )
    .and_then(|mut s| {
        s.query_row(params![name], |r| {
            Ok(Tombstone {
                high_water: r.get(0)?,
                reversed_next: r.get(1)?,
                version: r.get::<_, i64>(2)?.max(0) as u64,
            })
        })
    })
    .map_err(db_err)
}

/// A row version as SQLite stores it.
pub(crate) fn version_param(v: u64) -> i64 {
    // Versions start at an incarnation and grow by one per change: they stay
    // far below i64::MAX.
    v as i64
}

/// Writes the tombstone of `name` of `kind`, in the caller's transaction
/// (the one that deletes the object): `t` is the old one raised already.
pub(crate) fn write_tombstone(
    conn: &Connection,
    kind: &str,
    name: &str,
    t: Tombstone,
) -> Result<()> {
    conn.execute(
        "INSERT INTO keysmith_tombstones (kind, name, high_water, reversed_next, version)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (kind, name) DO UPDATE SET high_water = max(high_water, excluded.high_water),
             reversed_next = max(reversed_next, excluded.reversed_next),
             version = max(version, excluded.version)",
        params![
            kind,
            name,
            t.high_water,
            t.reversed_next,
            version_param(t.version)
        ],
    )
    .map(drop)
    .map_err(db_err)
}

/// The numbering of `name`, if it has one (read by numbered sequences
/// and by a drop, for its tombstone).
pub(crate) fn read_numbering_on(
    conn: &Connection,
    name: &str,
) -> Result<Option<keysmith_core::driver::Numbering>> {
    let settings: Option<String> = conn
        .prepare_cached("SELECT settings FROM keysmith_numbering WHERE name = ?1")
        .and_then(|mut s| s.query_row([name], |r| r.get(0)).optional())
        .map_err(db_err)?;
    settings
        .map(|s| keysmith_core::driver::parse_numbering(name, &s))
        .transpose()
}

/// Columns added to tables of older files, each added if it is missing.
/// Version 4: generations. The store's id (its generation) in
/// `keysmith_meta`, and per sequence the generation of its last write, its
/// failover margin and what was skipped at generation changes. Version 5: a
/// pool's residue class (both NULL: none, as every older pool reads).
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("keysmith_sequences", "generation", "TEXT"),
    (
        "keysmith_sequences",
        "failover_skip",
        "INTEGER NOT NULL DEFAULT 1000000",
    ),
    (
        "keysmith_sequences",
        "failover_skip_set",
        "INTEGER NOT NULL DEFAULT 0",
    ),
    (
        "keysmith_sequences",
        "failover_skipped",
        "INTEGER NOT NULL DEFAULT 0",
    ),
    ("keysmith_pools", "generation", "TEXT"),
    ("keysmith_workers", "generation", "TEXT"),
    ("keysmith_pools", "class_increment", "INTEGER"),
    ("keysmith_pools", "class_offset", "INTEGER"),
    // Version 7: lives of a name (`SequenceRow::incarnation`,
    // `Tombstone::version`); 0 for rows and tombstones from before.
    (
        "keysmith_sequences",
        "incarnation",
        "INTEGER NOT NULL DEFAULT 0",
    ),
    (
        "keysmith_pools",
        "incarnation",
        "INTEGER NOT NULL DEFAULT 0",
    ),
    (
        "keysmith_tombstones",
        "version",
        "INTEGER NOT NULL DEFAULT 0",
    ),
];

const ROW_COLUMNS: &str = "name, next, start, max, block, version, generation, failover_skip, failover_skip_set, failover_skipped, incarnation";

/// A store in one SQLite file. Cheap to clone handles to: share it as
/// `Arc<dyn Store>`.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
    /// The store id kept in the file: its generation. A copy of the file
    /// keeps it.
    generation: Arc<str>,
    /// Checkpoints the write-ahead log after writes that made it too large.
    wal: Arc<wal::WalGuard>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, waiting up to
    /// [`DEFAULT_BUSY_TIMEOUT`] for other processes' write locks.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty path, [`Error::Unavailable`] when
    /// the file cannot be opened or is locked, [`Error::Corrupt`] when it is not
    /// a keysmith database.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with_timeout(path, DEFAULT_BUSY_TIMEOUT).await
    }

    /// Opens a store from the part of a `sqlite://` URL after the scheme:
    /// `PATH[?busy_timeout_ms=N]`.
    ///
    /// # Errors
    /// As [`Self::open`], and [`Error::InvalidArgument`] for an unknown or
    /// malformed parameter.
    pub async fn open_url(rest: &str) -> Result<Self> {
        let (path, timeout) = parse_url(rest)?;
        Self::open_with_timeout(path, timeout).await
    }

    /// Opens the database at `path`, waiting up to `busy_timeout` for other
    /// processes' write locks before failing with [`Error::Unavailable`].
    ///
    /// # Errors
    /// As [`Self::open`].
    pub async fn open_with_timeout(path: impl AsRef<Path>, busy_timeout: Duration) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if path.as_os_str().is_empty() {
            return Err(Error::invalid(
                "sqlite store URL has no path; use sqlite://keysmith.db or sqlite:///abs/path.db",
            ));
        }
        let p = path.clone();
        let (conn, generation) =
            tokio::task::spawn_blocking(move || open_connection(&p, busy_timeout))
                .await
                .map_err(|e| Error::Unavailable(format!("opening {}: {e}", path.display())))?
                .map_err(|e| with_path(e, &path))?;
        Ok(SqliteStore {
            wal: Arc::new(wal::WalGuard::new(&path, busy_timeout)),
            path,
            conn: Arc::new(Mutex::new(conn)),
            generation: generation.into(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection on the blocking pool.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = Arc::clone(&self.conn);
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn).map_err(|e| with_path(e, &path))
        })
        .await
        .map_err(|e| Error::Unavailable(format!("sqlite worker failed: {e}")))?
    }

    /// Runs `f` inside `BEGIN IMMEDIATE ... COMMIT` (rolled back if it
    /// fails), then keeps the write-ahead log small ([`wal`]).
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let wal = Arc::clone(&self.wal);
        self.run(move |conn| {
            let out = (|| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let out = f(&tx)?;
                tx.commit().map_err(db_err)?;
                Ok(out)
            })();
            wal.after_write(conn);
            out
        })
        .await
    }
}

/// The path and busy timeout of an `sqlite://` URL, given what follows the
/// scheme: `PATH[?busy_timeout_ms=N]`. For code that opens its own
/// connection to a store's file (the shard set).
///
/// # Errors
/// [`Error::InvalidArgument`] for an unknown or malformed parameter.
pub fn parse_url(rest: &str) -> Result<(PathBuf, Duration)> {
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut timeout = DEFAULT_BUSY_TIMEOUT;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("busy_timeout_ms", v)) => {
                let ms: u64 = v.parse().map_err(|_| {
                    Error::invalid(format!(
                        "sqlite URL: busy_timeout_ms must be a whole number of milliseconds, got {v:?}"
                    ))
                })?;
                timeout = Duration::from_millis(ms);
            }
            _ => {
                return Err(Error::invalid(format!(
                    "sqlite URL: unknown parameter {pair:?}; the only one is busy_timeout_ms=N"
                )));
            }
        }
    }
    Ok((PathBuf::from(path), timeout))
}

fn open_connection(path: &Path, busy_timeout: Duration) -> Result<(Connection, String)> {
    let conn = Connection::open(path).map_err(db_err)?;
    conn.busy_timeout(busy_timeout).map_err(db_err)?;
    // WAL lets readers run beside a writer; FULL syncs the WAL on every commit,
    // so a reservation is on disk before its first value is returned.
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(db_err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Unavailable(format!(
            "cannot switch to WAL mode (got {mode}); is the file on a network file system?"
        )));
    }
    conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
        .map_err(db_err)?;
    wal::configure(&conn).map_err(db_err)?;
    let generation = migrate(&conn)?;
    Ok((conn, generation))
}

/// Creates or upgrades the tables; returns the store id (made on first use).
fn migrate(conn: &Connection) -> Result<String> {
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; {SCHEMA} {WORKERS_SCHEMA} {} {TOMBSTONES_SCHEMA}",
        numbers::TICKETS_SCHEMA
    ))
    .map_err(db_err)?;
    let result = (|| {
        let found: Option<i64> = conn
            .query_row(
                "SELECT value FROM keysmith_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        let add_columns = || -> Result<()> {
            for (table, column, ty) in ADDED_COLUMNS {
                let present: bool = conn
                    .query_row(
                        "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = ?2",
                        [table, column],
                        |r| r.get(0),
                    )
                    .map_err(db_err)?;
                if !present {
                    conn.execute(&format!("ALTER TABLE {table} ADD COLUMN {column} {ty}"), [])
                        .map_err(db_err)?;
                }
            }
            Ok(())
        };
        match found {
            None => {
                add_columns()?;
                conn.execute(
                    "INSERT INTO keysmith_meta (key, value) VALUES ('schema_version', ?1)",
                    [SCHEMA_VERSION],
                )
                .map_err(db_err)?;
            }
            Some(v) if v == SCHEMA_VERSION => {}
            // Older files got the new tables from the batch above.
            Some(v) if (1..SCHEMA_VERSION).contains(&v) => {
                add_columns()?;
                conn.execute(
                    "UPDATE keysmith_meta SET value = ?1 WHERE key = 'schema_version'",
                    [SCHEMA_VERSION],
                )
                .map_err(db_err)?;
            }
            Some(v) => {
                return Err(Error::Corrupt(format!(
                    "schema version {v} is newer than this keysmith understands ({SCHEMA_VERSION}); upgrade keysmith"
                )));
            }
        }
        // The "sqlite-" prefix keeps the INTEGER column from taking the id
        // for a number.
        let id: Option<String> = conn
            .query_row(
                "SELECT value FROM keysmith_meta WHERE key = 'store_id'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        match id {
            Some(id) => Ok(id),
            None => {
                let id = format!("sqlite-{}", keysmith_core::driver::random_id());
                conn.execute(
                    "INSERT INTO keysmith_meta (key, value) VALUES ('store_id', ?1)",
                    [&id],
                )
                .map_err(db_err)?;
                Ok(id)
            }
        }
    })();
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    conn.execute_batch(end).map_err(db_err)?;
    result
}

/// Maps a SQLite error to what a caller can act on.
fn db_err(e: rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Error::Unavailable(format!(
            "database is locked by another process ({e}); retry, or stop the process holding it"
        )),
        Some(ErrorCode::NotADatabase) => {
            Error::Corrupt(format!("not a keysmith database ({e}); check the path"))
        }
        Some(ErrorCode::DatabaseCorrupt) => Error::Corrupt(format!("{e}")),
        Some(ErrorCode::DiskFull) => Error::Unavailable(format!(
            "the disk holding the database is full ({e}); nothing was written: free space on it and retry"
        )),
        Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::ReadOnly) => {
            Error::Unavailable(format!(
                "cannot open or write the database ({e}); check the path and its permissions"
            ))
        }
        _ => Error::Unavailable(e.to_string()),
    }
}

fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Unavailable(m) => Error::Unavailable(format!("{}: {m}", path.display())),
        Error::Corrupt(m) => Error::Corrupt(format!("{}: {m}", path.display())),
        other => other,
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<()> {
        self.run(|conn| conn.query_row("SELECT 1", [], |_| Ok(())).map_err(db_err))
            .await
    }

    async fn generation(&self) -> Result<String> {
        Ok(self.generation.to_string())
    }
}

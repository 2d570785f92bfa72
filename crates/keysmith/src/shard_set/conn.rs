//! Connections to one shard's database, and the shard id recorded in it.
//!
//! The id lives in a one-row table `keysmith_shard_identity` (for
//! PostgreSQL in the schema the URL names, `keysmith` by default): the
//! database's own statement of which shard it is. It is written by
//! [`super::ShardSet::init`] and read on every connection a shard set opens.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::TransactionBehavior;

use crate::{Error, Result};
use keysmith_postgres::connect::{ConnectConfig, pg_connect, postgres_error};
use keysmith_sqlite::connect::{sqlite_error, sqlite_open};

/// The table that records a database's shard id.
pub const IDENTITY_TABLE: &str = "keysmith_shard_identity";

/// Where a shard's database is.
#[derive(Debug, Clone)]
pub(super) enum Target {
    Sqlite {
        path: PathBuf,
        busy_timeout: Duration,
    },
    Postgres {
        config: Box<ConnectConfig>,
        schema: String,
    },
}

/// An open connection to one shard's database, whose recorded shard id was
/// checked against the shard set's configuration when it was opened.
///
/// Get one from [`super::ShardSet::connect`] or
/// [`super::ShardSet::connect_for`]; the fan-out
/// ([`super::ShardSet::query_by_keys`]) hands one to each shard's query.
#[derive(Debug)]
pub struct ShardConnection {
    shard: u16,
    url: String,
    db: ShardDb,
}

/// The database behind a [`ShardConnection`].
#[derive(Debug)]
pub enum ShardDb {
    /// An SQLite file.
    Sqlite(SqliteShard),
    /// A PostgreSQL database (and schema).
    Postgres(PostgresShard),
}

impl ShardConnection {
    /// The shard id, as configured and as the database records it.
    pub fn shard(&self) -> u16 {
        self.shard
    }

    /// The store URL of the database, as configured.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database, to match on.
    pub fn db(&self) -> &ShardDb {
        &self.db
    }

    /// The SQLite database.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if this shard is a PostgreSQL database.
    pub fn sqlite(&self) -> Result<&SqliteShard> {
        match &self.db {
            ShardDb::Sqlite(s) => Ok(s),
            ShardDb::Postgres(_) => Err(Error::invalid(format!(
                "shard {} ({}) is a PostgreSQL database, not SQLite; match on ShardConnection::db to serve both",
                self.shard, self.url
            ))),
        }
    }

    /// The PostgreSQL database.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if this shard is an SQLite database.
    pub fn postgres(&self) -> Result<&PostgresShard> {
        match &self.db {
            ShardDb::Postgres(p) => Ok(p),
            ShardDb::Sqlite(_) => Err(Error::invalid(format!(
                "shard {} ({}) is an SQLite database, not PostgreSQL; match on ShardConnection::db to serve both",
                self.shard, self.url
            ))),
        }
    }
}

/// An SQLite connection of a shard. Its calls run on Tokio's blocking pool.
#[derive(Debug, Clone)]
pub struct SqliteShard {
    conn: Arc<Mutex<rusqlite::Connection>>,
    path: PathBuf,
}

impl SqliteShard {
    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection on Tokio's blocking pool and returns its
    /// result. Map `rusqlite` errors with [`super::sqlite_error`].
    ///
    /// # Errors
    /// What `f` returns; [`Error::Unavailable`] if the blocking task failed.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
            Error::Unavailable(format!("the SQLite task was cancelled: {e}"))
        })?
    }
}

/// A PostgreSQL connection of a shard.
///
/// Its `search_path` starts with the shard's schema (then `public`), so
/// unqualified table names resolve in the shard's schema first: several
/// shards may be schemas of one database.
#[derive(Debug)]
pub struct PostgresShard {
    client: tokio_postgres::Client,
    schema: String,
}

impl PostgresShard {
    /// The client. Map its errors with [`super::postgres_error`].
    pub fn client(&self) -> &tokio_postgres::Client {
        &self.client
    }

    /// The schema the URL names (`keysmith` by default), where the shard's
    /// identity is recorded.
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

/// What a database says about its shard id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recorded {
    /// No id recorded (no table, no row, or for init: no file yet).
    Nothing,
    /// This id.
    Id(u16),
}

impl Target {
    /// Opens a connection (never creating a file) and reads the recorded id.
    pub(super) async fn open(&self, shard: u16, url: &str) -> Result<(ShardConnection, Recorded)> {
        match self {
            Target::Sqlite { path, busy_timeout } => {
                let (path, timeout) = (path.clone(), *busy_timeout);
                let p = path.clone();
                let (conn, recorded) = tokio::task::spawn_blocking(move || {
                    let conn = sqlite_open(&p, timeout, false)?;
                    let recorded = sqlite_read(&conn)?;
                    Ok::<_, Error>((conn, recorded))
                })
                .await
                .map_err(|e| Error::Unavailable(format!("opening {}: {e}", path.display())))??;
                let db = ShardDb::Sqlite(SqliteShard {
                    conn: Arc::new(Mutex::new(conn)),
                    path,
                });
                Ok((ShardConnection::new(shard, url, db), recorded))
            }
            Target::Postgres { config, schema } => {
                let client = pg_connect(config).await?;
                client
                    .batch_execute(&format!("SET search_path TO \"{schema}\", public"))
                    .await
                    .map_err(postgres_error)?;
                let recorded = pg_read(&client, schema).await?;
                let db = ShardDb::Postgres(PostgresShard {
                    client,
                    schema: schema.clone(),
                });
                Ok((ShardConnection::new(shard, url, db), recorded))
            }
        }
    }

    /// What `init` finds before writing: the recorded id (`Nothing` for an
    /// SQLite file not created yet, whose directory exists), and what makes
    /// the database itself unique, so that two URLs naming one database
    /// (a symbolic link, `localhost` and `127.0.0.1`) are caught before
    /// anything is written: for SQLite the file's device and inode (or the
    /// canonical path of a file yet to be created), for PostgreSQL the
    /// cluster's system identifier, the database's oid and the schema.
    pub(super) async fn peek(&self, shard: u16, url: &str) -> Result<(Recorded, String)> {
        if let Target::Sqlite { path, .. } = self
            && !path.exists()
        {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let canonical = std::fs::canonicalize(dir).map_err(|e| {
                Error::invalid(format!(
                    "the directory {} of {} cannot be used ({e}); create it or fix the url",
                    dir.display(),
                    path.display()
                ))
            })?;
            let name = path.file_name().unwrap_or_default();
            return Ok((
                Recorded::Nothing,
                format!("new SQLite file {}", canonical.join(name).display()),
            ));
        }
        let (conn, recorded) = self.open(shard, url).await?;
        let place = match &conn.db {
            ShardDb::Sqlite(s) => {
                use std::os::unix::fs::MetadataExt;
                let meta = std::fs::metadata(&s.path).map_err(|e| {
                    Error::Unavailable(format!("cannot read {}: {e}", s.path.display()))
                })?;
                format!("SQLite file device {} inode {}", meta.dev(), meta.ino())
            }
            ShardDb::Postgres(p) => {
                let row = p
                    .client
                    .query_one(
                        "SELECT (SELECT system_identifier FROM pg_control_system())::text,
                                (SELECT oid FROM pg_database WHERE datname = current_database())::text",
                        &[],
                    )
                    .await
                    .map_err(postgres_error)?;
                let (system, db): (String, String) = (
                    row.try_get(0).map_err(postgres_error)?,
                    row.try_get(1).map_err(postgres_error)?,
                );
                format!(
                    "PostgreSQL cluster {system} database oid {db} schema {}",
                    p.schema
                )
            }
        };
        Ok((recorded, place))
    }

    /// Records `shard` in the database, creating the SQLite file, the
    /// PostgreSQL schema and the table as needed. Accepts an equal record;
    /// refuses (changing nothing) a different one.
    pub(super) async fn record(&self, shard: u16) -> Result<Recorded> {
        match self {
            Target::Sqlite { path, busy_timeout } => {
                let (p, timeout) = (path.clone(), *busy_timeout);
                tokio::task::spawn_blocking(move || {
                    let mut conn = sqlite_open(&p, timeout, true)?;
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(sqlite_error)?;
                    tx.execute_batch(&format!(
                        "CREATE TABLE IF NOT EXISTS {IDENTITY_TABLE} (
                            singleton   INTEGER PRIMARY KEY CHECK (singleton = 1),
                            shard_id    INTEGER NOT NULL CHECK (shard_id BETWEEN 0 AND 65535),
                            recorded_at TEXT NOT NULL
                        )"
                    ))
                    .map_err(sqlite_error)?;
                    let before = sqlite_read(&tx)?;
                    if before == Recorded::Nothing {
                        tx.execute(
                            &format!(
                                "INSERT INTO {IDENTITY_TABLE} (singleton, shard_id, recorded_at)
                                 VALUES (1, ?1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
                            ),
                            [i64::from(shard)],
                        )
                        .map_err(sqlite_error)?;
                        tx.commit().map_err(sqlite_error)?;
                    }
                    Ok(before)
                })
                .await
                .map_err(|e| Error::Unavailable(format!("recording in {}: {e}", path.display())))?
            }
            Target::Postgres { config, schema } => {
                let mut client = pg_connect(config).await?;
                let tx = client.transaction().await.map_err(postgres_error)?;
                // Serialises concurrent inits (CREATE ... IF NOT EXISTS can
                // otherwise race on the catalog).
                tx.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('keysmith_shard_identity'))",
                    &[],
                )
                .await
                .map_err(postgres_error)?;
                tx.batch_execute(&format!(
                    "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
                     CREATE TABLE IF NOT EXISTS \"{schema}\".{IDENTITY_TABLE} (
                         singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                         shard_id    integer NOT NULL CHECK (shard_id BETWEEN 0 AND 65535),
                         recorded_at timestamptz NOT NULL DEFAULT now()
                     )"
                ))
                .await
                .map_err(postgres_error)?;
                let before = pg_read_row(&tx, schema).await?;
                if before == Recorded::Nothing {
                    tx.execute(
                        &format!(
                            "INSERT INTO \"{schema}\".{IDENTITY_TABLE} (shard_id) VALUES ($1)"
                        ),
                        &[&i32::from(shard)],
                    )
                    .await
                    .map_err(postgres_error)?;
                }
                tx.commit().await.map_err(postgres_error)?;
                Ok(before)
            }
        }
    }
}

impl ShardConnection {
    fn new(shard: u16, url: &str, db: ShardDb) -> ShardConnection {
        ShardConnection {
            shard,
            url: url.to_owned(),
            db,
        }
    }
}

fn sqlite_read(conn: &rusqlite::Connection) -> Result<Recorded> {
    use rusqlite::OptionalExtension;
    let exists: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [IDENTITY_TABLE],
            |r| r.get(0),
        )
        .map_err(sqlite_error)?;
    if !exists {
        return Ok(Recorded::Nothing);
    }
    let id: Option<i64> = conn
        .query_row(
            &format!("SELECT shard_id FROM {IDENTITY_TABLE} WHERE singleton = 1"),
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite_error)?;
    recorded(id)
}

fn recorded(id: Option<i64>) -> Result<Recorded> {
    match id {
        None => Ok(Recorded::Nothing),
        Some(v) => u16::try_from(v).map(Recorded::Id).map_err(|_| {
            Error::Corrupt(format!(
                "{IDENTITY_TABLE} records shard id {v}, which is not in 0..=65535; fix or drop the table, then run init"
            ))
        }),
    }
}

async fn pg_read(client: &tokio_postgres::Client, schema: &str) -> Result<Recorded> {
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = $2)",
            &[&schema, &IDENTITY_TABLE],
        )
        .await
        .and_then(|r| r.try_get(0))
        .map_err(postgres_error)?;
    if !exists {
        return Ok(Recorded::Nothing);
    }
    pg_read_row(client, schema).await
}

async fn pg_read_row(
    client: &impl tokio_postgres::GenericClient,
    schema: &str,
) -> Result<Recorded> {
    let row = client
        .query_opt(
            &format!("SELECT shard_id FROM \"{schema}\".{IDENTITY_TABLE} WHERE singleton"),
            &[],
        )
        .await
        .map_err(postgres_error)?;
    let id: Option<i32> = match row {
        Some(r) => Some(r.try_get(0).map_err(postgres_error)?),
        None => None,
    };
    recorded(id.map(i64::from))
}

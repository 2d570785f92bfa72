//! Keeping the write-ahead log small, so that a store on a small or nearly
//! full disk neither fills it with its log nor stays stuck once it is full.
//!
//! SQLite appends every commit to `FILE-wal` and copies it back into the
//! database at checkpoints. By default it checkpoints passively every 1,000
//! pages (about 4 MiB) and never shrinks the file, so the log alone can fill a
//! small disk, and a log that cannot grow any more cannot be checkpointed
//! either when the database must grow to take its pages. Three things keep
//! it small here:
//!
//! - `PRAGMA wal_autocheckpoint` of [`AUTOCHECKPOINT_BYTES`]: SQLite's own
//!   passive checkpoint runs after a commit once the log holds that much,
//!   and the next writer starts the log from its beginning again;
//! - `PRAGMA journal_size_limit` of [`WAL_SIZE_LIMIT`]: when the log starts
//!   again, a file larger than that is cut down to it;
//! - after every write (committed or failed) the store looks at the log's
//!   size, and past [`WAL_SIZE_LIMIT`] runs `PRAGMA wal_checkpoint(TRUNCATE)`
//!   on its own connection: every page goes back into the database and the
//!   log is cut to zero bytes. That checkpoint waits at most
//!   [`CHECKPOINT_BUSY_TIMEOUT`] for other processes (a reader of another
//!   process can hold it up); one that cannot finish is tried again once the
//!   log has grown by another quarter of the limit, so a long reader
//!   elsewhere does not slow every write down.
//!
//! A write that fails because the disk is full changes nothing (its
//! transaction is rolled back) and reports the full disk; once there is
//! space again, the next write succeeds and the log is checkpointed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::Connection;

/// The size past which the store checkpoints its write-ahead log and cuts
/// it to zero bytes (see the module documentation), and the size SQLite cuts
/// it down to when it starts the log again: 1 MiB. A single transaction
/// larger than that (creating a large pool) makes the log larger until the
/// checkpoint after it.
pub const WAL_SIZE_LIMIT: u64 = 1 << 20;

/// How much log SQLite's own passive checkpoint lets build up: 256 KiB (in
/// pages of the database's page size).
pub const AUTOCHECKPOINT_BYTES: u64 = 256 << 10;

/// The longest the store's own checkpoint waits for other processes'
/// locks before giving up until later.
pub const CHECKPOINT_BUSY_TIMEOUT: Duration = Duration::from_millis(100);

/// The pragmas of every store connection that bound the log's size.
pub(super) fn configure(conn: &Connection) -> rusqlite::Result<()> {
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    let page_size = u64::try_from(page_size).unwrap_or(4096).max(512);
    let pages = (AUTOCHECKPOINT_BYTES / page_size).max(1);
    conn.execute_batch(&format!(
        "PRAGMA wal_autocheckpoint={pages}; PRAGMA journal_size_limit={WAL_SIZE_LIMIT};"
    ))?;
    Ok(())
}

/// The log of one store file and when to checkpoint it next.
#[derive(Debug)]
pub(super) struct WalGuard {
    wal: PathBuf,
    busy_timeout: Duration,
    /// The log size past which the next write checkpoints.
    next_at: AtomicU64,
}

impl WalGuard {
    /// The guard of the database at `db`, whose connection waits
    /// `busy_timeout` for locks otherwise.
    pub(super) fn new(db: &Path, busy_timeout: Duration) -> WalGuard {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        WalGuard {
            wal: wal.into(),
            busy_timeout,
            next_at: AtomicU64::new(WAL_SIZE_LIMIT),
        }
    }

    /// After a write on `conn`: checkpoints and truncates the log if it has
    /// passed its limit. Never fails: a checkpoint that cannot run now is
    /// logged and tried again later.
    pub(super) fn after_write(&self, conn: &Connection) {
        let Ok(size) = std::fs::metadata(&self.wal).map(|m| m.len()) else {
            return;
        };
        if size <= self.next_at.load(Ordering::Relaxed) {
            return;
        }
        match self.checkpoint(conn) {
            Ok(true) => {
                tracing::debug!(wal = %self.wal.display(), size, "write-ahead log checkpointed and truncated");
                self.next_at.store(WAL_SIZE_LIMIT, Ordering::Relaxed);
            }
            outcome => {
                let why = match outcome {
                    Err(e) => e.to_string(),
                    _ => "another process is reading or writing the database".to_owned(),
                };
                tracing::warn!(
                    wal = %self.wal.display(),
                    size,
                    "the write-ahead log is past its limit of {WAL_SIZE_LIMIT} bytes and could not be checkpointed ({why}); trying again later"
                );
                self.next_at
                    .store(size + WAL_SIZE_LIMIT / 4, Ordering::Relaxed);
            }
        }
    }

    /// `PRAGMA wal_checkpoint(TRUNCATE)` waiting at most
    /// [`CHECKPOINT_BUSY_TIMEOUT`]: whether it finished.
    fn checkpoint(&self, conn: &Connection) -> rusqlite::Result<bool> {
        conn.busy_timeout(CHECKPOINT_BUSY_TIMEOUT)?;
        let done = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0).map(|busy| busy == 0)
        });
        let restored = conn.busy_timeout(self.busy_timeout);
        let done = done?;
        restored?;
        Ok(done)
    }
}

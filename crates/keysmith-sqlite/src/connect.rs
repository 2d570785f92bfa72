//! One-off connections to SQLite files beside a store (the shard set,
//! `adopt`), and what their errors mean.

use std::path::Path;
use std::time::Duration;

use rusqlite::OpenFlags;

use keysmith_core::{Error, Result};

/// Opens the database file at `path` read-write (creating it only when
/// `create`), waiting up to `busy_timeout` for a lock.
///
/// # Errors
/// [`Error::Unavailable`] when there is no file and `create` is false, or
/// it cannot be opened; as [`sqlite_error`] otherwise.
pub fn sqlite_open(
    path: &Path,
    busy_timeout: Duration,
    create: bool,
) -> Result<rusqlite::Connection> {
    if !create && !path.exists() {
        return Err(Error::Unavailable(format!(
            "there is no database file at {}; check the URL (a missing file is not created here)",
            path.display()
        )));
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = rusqlite::Connection::open_with_flags(path, flags)
        .map_err(|e| sqlite_error(e).context(&path.display().to_string()))?;
    conn.busy_timeout(busy_timeout).map_err(sqlite_error)?;
    Ok(conn)
}

/// A `rusqlite` error as a keysmith [`Error`]: a busy, locked or unopenable
/// database is [`Error::Unavailable`] (retrying may help), a file that is
/// not a database [`Error::Corrupt`], anything else (a bad statement, a
/// constraint) [`Error::InvalidArgument`].
pub fn sqlite_error(e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Error::Unavailable(format!(
            "database is locked by another process ({e}); retry, or stop the process holding it"
        )),
        Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::ReadOnly) => {
            Error::Unavailable(format!(
                "cannot open or write the database ({e}); check the path and its permissions"
            ))
        }
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            Error::Corrupt(format!("{e}; check the path"))
        }
        _ => Error::invalid(format!("SQLite: {e}")),
    }
}

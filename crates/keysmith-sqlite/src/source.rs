//! An SQLite file read as a [`SourceDatabase`]: the table `adopt` stays above.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use keysmith_core::sequence::{SourceDatabase, quote_ident as quote};
use keysmith_core::{Error, Result};

use crate::connect::{sqlite_error, sqlite_open};

/// An SQLite file opened read-only for `adopt` (`sqlite://PATH`).
#[derive(Debug, Clone)]
pub struct SqliteSource {
    path: PathBuf,
    busy_timeout: Duration,
}

impl SqliteSource {
    /// The file an `sqlite://` URL's rest (after the scheme) names; nothing
    /// is opened until it is read.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed URL.
    pub fn from_url_rest(rest: &str) -> Result<SqliteSource> {
        let (path, busy_timeout) = crate::parse_url(rest)?;
        Ok(SqliteSource { path, busy_timeout })
    }
}

#[async_trait]
impl SourceDatabase for SqliteSource {
    async fn largest_value(&self, table: &str, column: &str) -> Result<Option<i64>> {
        let (path, timeout) = (self.path.clone(), self.busy_timeout);
        let (table, column) = (table.to_owned(), column.to_owned());
        tokio::task::spawn_blocking(move || {
            let conn = sqlite_open(&path, timeout, false)?;
            sqlite_largest(&conn, &table, &column)
        })
        .await
        .map_err(|e| Error::Unavailable(format!("reading the table: {e}")))?
    }
}

fn sqlite_largest(conn: &rusqlite::Connection, table: &str, column: &str) -> Result<Option<i64>> {
    let columns: Vec<(String, String)> = conn
        .prepare("SELECT name, type FROM pragma_table_info(?1)")
        .and_then(|mut s| {
            s.query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(sqlite_error)?;
    if columns.is_empty() {
        return Err(Error::invalid(format!(
            "there is no table {table:?} in the database; check the name (SQLite names are case-sensitive when quoted)"
        )));
    }
    let Some((_, declared)) = columns.iter().find(|(c, _)| c == column) else {
        let names: Vec<&str> = columns.iter().map(|(c, _)| c.as_str()).collect();
        return Err(Error::invalid(format!(
            "table {table:?} has no column {column:?}; its columns are {}",
            names.join(", ")
        )));
    };
    let sql = format!(
        "SELECT max({c}), typeof(max({c})), (SELECT count(*) FROM {t} WHERE typeof({c}) NOT IN ('integer', 'null')) FROM {t}",
        c = quote(column),
        t = quote(table)
    );
    let (max, kind, others): (Option<i64>, String, i64) = conn
        .query_row(&sql, [], |r| {
            let kind: String = r.get(1)?;
            let max = if kind == "integer" { r.get(0)? } else { None };
            Ok((max, kind, r.get(2)?))
        })
        .map_err(sqlite_error)?;
    if others > 0 || !matches!(kind.as_str(), "integer" | "null") {
        return Err(Error::invalid(format!(
            "column {table}.{column} (declared {declared:?}) holds values that are not integers; adopt needs an integer key column"
        )));
    }
    Ok(max)
}

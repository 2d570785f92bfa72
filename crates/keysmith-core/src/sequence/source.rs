//! The databases keysmith reads keys from but does not allocate in: the
//! table [`super::adopt_from`] stays above, the old allocator's table
//! [`super::import_from`] moves from. A driver's capability, kept apart from
//! the store contract: a driver that cannot read such a database does not
//! implement it.

use async_trait::async_trait;

use super::{ImportFormat, SourceRow};
use crate::{Error, Result};

/// A database opened for reading by a driver (`keysmith-sqlite`'s
/// `SqliteSource`, `keysmith-postgres`'s `PostgresSource`, `keysmith-mysql`'s
/// `MysqlSource`). The `keysmith` crate opens one from a URL.
#[async_trait]
pub trait SourceDatabase: Send + Sync {
    /// The largest value of `column` in `table` (`schema.table` or
    /// `database.table` where the database has those), `None` for an empty
    /// table. Identifiers are quoted, never pasted into SQL; both are
    /// non-empty and hold no NUL byte (the caller checks).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a missing table or column, or a
    /// column that is not an integer (or holds a value past `i64::MAX`);
    /// [`Error::Unavailable`] when the database cannot be reached.
    async fn largest_value(&self, table: &str, column: &str) -> Result<Option<i64>>;

    /// The rows of a Meituan Leaf or Didi Tinyid allocator table, ordered by
    /// name. Only MySQL holds those: the default refuses.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a database that holds no such table
    /// (the default), a missing table or column; [`Error::Unavailable`].
    async fn allocator_rows(&self, format: ImportFormat, table: &str) -> Result<Vec<SourceRow>> {
        let _ = table;
        Err(Error::invalid(format!(
            "{format:?} keeps its table in MySQL; give the source database as mysql://USER@HOST:PORT/DB"
        )))
    }
}

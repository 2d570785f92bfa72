//! The numbering of a numbered sequence as the `keysmith_numbering` table
//! keeps it: read by the sequence methods (which refuse block-based use of
//! a numbered sequence) and the ticket methods alike.

use rusqlite::{Connection, OptionalExtension};

use super::db_err;
use crate::Result;
use crate::store::Numbering;

/// The numbering of `name`, if it has one.
pub(super) fn read_numbering_on(conn: &Connection, name: &str) -> Result<Option<Numbering>> {
    let settings: Option<String> = conn
        .prepare_cached("SELECT settings FROM keysmith_numbering WHERE name = ?1")
        .and_then(|mut s| s.query_row([name], |r| r.get(0)).optional())
        .map_err(db_err)?;
    settings
        .map(|s| crate::store::parse_numbering(name, &s))
        .transpose()
}

//! Adopting an existing table: move a sequence's next value above the
//! largest key a table already holds, so that the keys the sequence hands out
//! from now on never collide with the ones written before it.

use serde::Serialize;

use super::{AlterSpec, SequenceInfo, SourceDatabase, admin};
use crate::store::{DEFAULT_START, SequenceSpec, Store};
use crate::{Error, Result};

/// The column whose largest value a sequence must stay above.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdoptSource {
    /// The database: `sqlite://PATH`, `postgres://...` or (feature `mysql`)
    /// `mysql://...` (a store URL; for PostgreSQL, `schema=` is ignored: the
    /// table is looked up as given).
    #[serde(skip)]
    pub database: String,
    /// The table, optionally `schema.table` (PostgreSQL) or
    /// `database.table` (MySQL).
    pub table: String,
    /// The integer column.
    pub column: String,
}

/// What [`adopt_from`] did to the sequence (in JSON: `"created"`, `"moved"`,
/// `"unchanged"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AdoptAction {
    /// It did not exist and was created above the column's largest value.
    Created,
    /// Its next value moved above the column's largest value.
    Moved,
    /// It was above every value already.
    Unchanged,
}

/// What [`adopt_from`] did, or with `dry_run` would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdoptReport {
    /// The sequence.
    pub sequence: String,
    /// Where the largest value was read.
    #[serde(flatten)]
    pub source: AdoptSource,
    /// The column's largest value; `None` for an empty table.
    pub largest: Option<i64>,
    /// The sequence's next value before; `None` if it did not exist.
    pub next_before: Option<i64>,
    /// Its next value after (or that it would have).
    pub next_after: i64,
    /// What happened to the sequence.
    pub action: AdoptAction,
    /// Whether nothing was written.
    pub dry_run: bool,
}

/// Reads the largest value of `source` and moves sequence `name`'s next
/// value above it, with the same safe write as [`super::alter`] (next only
/// moves forward). A sequence already above it is left unchanged. With
/// `create`, a missing sequence is created starting above it (or at
/// [`DEFAULT_START`] for an empty table). With `dry_run` nothing is written.
///
/// Identifiers are quoted, never pasted into SQL as they are.
///
/// `db` is the database `source.database` names, opened by a driver: the
/// `keysmith` crate's `sequence::adopt` opens it from the URL and calls this.
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty table or column name, a missing
/// table or column (naming it), a column that is not an integer, a largest
/// value past the sequence's maximum; [`Error::NotFound`] for a missing
/// sequence without `create`; [`Error::Unavailable`] when the database
/// cannot be reached; as [`super::alter`] and [`super::create`]. Nothing is
/// written on error.
pub async fn adopt_from(
    store: &dyn Store,
    name: &str,
    source: &AdoptSource,
    db: &dyn SourceDatabase,
    create: bool,
    dry_run: bool,
) -> Result<AdoptReport> {
    crate::validate_name(name)?;
    // In values: a residue class's row is shown as its values.
    let mut residue = None;
    let existing = match admin::describe(store, name).await {
        Ok(row) => {
            residue = super::blocks_of(store, name).await?;
            Some(match &residue {
                Some(r) => super::row_in_values(r, row),
                None => row,
            })
        }
        Err(Error::NotFound { .. }) if create => None,
        Err(e) => return Err(e),
    };
    check_ident("table", &source.table)?;
    check_ident("column", &source.column)?;
    let largest = db.largest_value(&source.table, &source.column).await?;
    let above = match largest {
        Some(v) => Some(v.checked_add(1).ok_or_else(|| {
            Error::invalid(format!(
                "{}.{} holds {v}, the largest 64-bit integer: no value is above it",
                source.table, source.column
            ))
        })?),
        None => None,
    };
    let report = |next_before, next_after, action| AdoptReport {
        sequence: name.to_owned(),
        source: source.clone(),
        largest,
        next_before,
        next_after,
        action,
        dry_run,
    };
    match existing {
        Some(row) => {
            let Some(target) = above.filter(|&t| t > row.next) else {
                return Ok(report(Some(row.next), row.next, AdoptAction::Unchanged));
            };
            let spec = AlterSpec {
                next: Some(target),
                ..AlterSpec::default()
            };
            // Checked in full even for a dry run, so it says what would fail.
            spec.apply_to(&row)?;
            let after = if dry_run {
                // The first value of the class at or above the target.
                residue.map_or(target, |r| r.first_at_or_above(target))
            } else {
                let info: SequenceInfo = admin::alter(store, name, &spec).await?;
                info.row.next
            };
            Ok(report(Some(row.next), after, AdoptAction::Moved))
        }
        None => {
            let start = above.unwrap_or(DEFAULT_START).max(DEFAULT_START);
            let spec = SequenceSpec {
                start,
                ..SequenceSpec::new(name)
            };
            spec.validate()?;
            // A dropped name continues above the values it handed out: the
            // store may raise the start above the table's largest key too.
            let start = if dry_run {
                start
            } else {
                admin::create(store, &spec).await?.row.next
            };
            Ok(report(None, start, AdoptAction::Created))
        }
    }
}

/// `"name"`, with any `"` doubled: an SQL identifier (SQLite, PostgreSQL),
/// never SQL pasted as it is.
pub fn quote_ident(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn check_ident(what: &str, ident: &str) -> Result<()> {
    if ident.is_empty() || ident.contains('\0') {
        return Err(Error::invalid(format!(
            "the {what} name {ident:?} is empty or holds a NUL byte; give the name as the database spells it"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_not_pasted() {
        assert_eq!(quote_ident("id"), "\"id\"");
        assert_eq!(
            quote_ident("a\"; DROP TABLE x; --"),
            "\"a\"\"; DROP TABLE x; --\""
        );
    }
}

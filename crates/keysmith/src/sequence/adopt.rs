//! Adopting an existing table: move a sequence's next value above the
//! largest key a table already holds, so that the keys the sequence hands out
//! from now on never collide with the ones written before it.

use serde::Serialize;

use super::{AlterSpec, SequenceInfo, admin};
#[cfg(feature = "postgres")]
use crate::store::postgres::connect::{pg_connect, postgres_error};
#[cfg(feature = "sqlite")]
use crate::store::sqlite::connect::{sqlite_error, sqlite_open};
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

/// What [`adopt`] did to the sequence (in JSON: `"created"`, `"moved"`,
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

/// What [`adopt`] did, or with `dry_run` would do.
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
/// # Errors
/// [`Error::InvalidArgument`] for a database URL that is not SQLite,
/// PostgreSQL or (feature `mysql`) MySQL, a missing table or column (naming it), a column that is not an
/// integer, a largest value past the sequence's maximum; [`Error::NotFound`]
/// for a missing sequence without `create`; [`Error::Unavailable`] when the
/// database cannot be reached; as [`super::alter`] and [`super::create`].
/// Nothing is written on error.
pub async fn adopt(
    store: &dyn Store,
    name: &str,
    source: &AdoptSource,
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
    let largest = largest_value(source).await?;
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

/// `"name"`, with any `"` doubled: an identifier, never SQL.
fn quote(ident: &str) -> String {
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

/// The largest value of the column, `None` for an empty table.
async fn largest_value(source: &AdoptSource) -> Result<Option<i64>> {
    check_ident("table", &source.table)?;
    check_ident("column", &source.column)?;
    let (scheme, rest) = source.database.split_once("://").unwrap_or(("", ""));
    match scheme {
        #[cfg(feature = "sqlite")]
        "sqlite" => {
            let (path, timeout) = crate::store::sqlite::parse_url(rest)?;
            let (table, column) = (source.table.clone(), source.column.clone());
            tokio::task::spawn_blocking(move || {
                let conn = sqlite_open(&path, timeout, false)?;
                sqlite_largest(&conn, &table, &column)
            })
            .await
            .map_err(|e| Error::Unavailable(format!("reading the table: {e}")))?
        }
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => {
            let (config, _schema) = crate::store::postgres::connect_config(&source.database)?;
            let client = pg_connect(&config).await?;
            postgres_largest(&client, &source.table, &source.column).await
        }
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => Err(Error::invalid(
            "this build of keysmith has no SQLite support; rebuild with `--features sqlite`",
        )),
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Err(Error::invalid(
            "this build of keysmith has no PostgreSQL support; rebuild with `--features postgres`",
        )),
        #[cfg(feature = "mysql")]
        "mysql" => {
            let (mut conn, errors) = crate::store::mysql::connect_mapped(&source.database).await?;
            let out = mysql_largest(&mut conn, &source.table, &source.column)
                .await
                .map_err(|e| match e {
                    Fault::Driver(e) => errors.map(&e),
                    Fault::Keysmith(e) => e,
                });
            let _ = conn.disconnect().await;
            out
        }
        #[cfg(not(feature = "mysql"))]
        "mysql" => Err(Error::invalid(
            "this build of keysmith has no MySQL/MariaDB support; rebuild with `--features mysql`",
        )),
        _ => Err(Error::invalid(format!(
            "the database must be an SQLite file (sqlite://PATH), a PostgreSQL database (postgres://USER@HOST/DB) \
             or a MySQL/MariaDB database (mysql://USER@HOST/DB), not a URL with the scheme {scheme:?}"
        ))),
    }
}

#[cfg(feature = "sqlite")]
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

#[cfg(feature = "postgres")]
async fn postgres_largest(
    client: &tokio_postgres::Client,
    table: &str,
    column: &str,
) -> Result<Option<i64>> {
    let (schema, table) = match table.split_once('.') {
        Some((s, t)) => (Some(s), t),
        None => (None, table),
    };
    let schema: String = match schema {
        Some(s) => s.to_owned(),
        None => client
            .query_one("SELECT current_schema()", &[])
            .await
            .map_err(postgres_error)?
            .get(0),
    };
    let found = client
        .query_opt(
            "SELECT data_type FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = $2 AND column_name = $3",
            &[&schema, &table, &column],
        )
        .await
        .map_err(postgres_error)?;
    let Some(row) = found else {
        let table_exists = client
            .query_opt(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2",
                &[&schema, &table],
            )
            .await
            .map_err(postgres_error)?
            .is_some();
        return Err(Error::invalid(if table_exists {
            format!("table {schema}.{table} has no column {column:?}; check the name")
        } else {
            format!(
                "there is no table {schema}.{table}; check the name, or give it as schema.table"
            )
        }));
    };
    let data_type: String = row.get(0);
    if !matches!(data_type.as_str(), "smallint" | "integer" | "bigint") {
        return Err(Error::invalid(format!(
            "column {schema}.{table}.{column} is {data_type}, not an integer; adopt needs an integer key column"
        )));
    }
    let sql = format!(
        "SELECT max({})::bigint FROM {}.{}",
        quote(column),
        quote(&schema),
        quote(table)
    );
    let row = client.query_one(&sql, &[]).await.map_err(postgres_error)?;
    Ok(row.get(0))
}

/// What went wrong reading a MySQL table: the driver's error (mapped by the
/// caller, who knows the server) or keysmith's own.
#[cfg(feature = "mysql")]
enum Fault {
    Driver(mysql_async::Error),
    Keysmith(Error),
}

#[cfg(feature = "mysql")]
impl From<mysql_async::Error> for Fault {
    fn from(e: mysql_async::Error) -> Self {
        Fault::Driver(e)
    }
}

/// `` `name` ``, with any backtick doubled: a MySQL identifier, never SQL.
#[cfg(feature = "mysql")]
fn quote_mysql(ident: &str) -> String {
    format!("`{}`", ident.replace('`', "``"))
}

#[cfg(feature = "mysql")]
async fn mysql_largest(
    conn: &mut mysql_async::Conn,
    table: &str,
    column: &str,
) -> std::result::Result<Option<i64>, Fault> {
    use mysql_async::prelude::Queryable;
    let (db, table) = match table.split_once('.') {
        Some((d, t)) => (Some(d.to_owned()), t),
        None => (None, table),
    };
    let db: String = match db {
        Some(d) => d,
        None => conn
            .query_first::<Option<String>, _>("SELECT DATABASE()")
            .await?
            .flatten()
            .ok_or_else(|| {
                Fault::Keysmith(Error::invalid(
                    "the URL names no database; give the table as database.table",
                ))
            })?,
    };
    let found: Option<(String, String)> = conn
        .exec_first(
            "SELECT data_type, column_type FROM information_schema.columns
             WHERE table_schema = ? AND table_name = ? AND column_name = ?",
            (&db, table, column),
        )
        .await?;
    let Some((data_type, column_type)) = found else {
        let table_exists: Option<i64> = conn
            .exec_first(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
                (&db, table),
            )
            .await?;
        return Err(Fault::Keysmith(Error::invalid(if table_exists.is_some() {
            format!("table {db}.{table} has no column {column:?}; check the name")
        } else {
            format!("there is no table {db}.{table}; check the name, or give it as database.table")
        })));
    };
    let data_type = data_type.to_ascii_lowercase();
    if !matches!(
        data_type.as_str(),
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint"
    ) {
        return Err(Fault::Keysmith(Error::invalid(format!(
            "column {db}.{table}.{column} is {column_type}, not an integer; adopt needs an integer key column"
        ))));
    }
    // As text: an unsigned BIGINT may hold more than an i64.
    let sql = format!(
        "SELECT CAST(MAX({}) AS CHAR) FROM {}.{}",
        quote_mysql(column),
        quote_mysql(&db),
        quote_mysql(table)
    );
    let max: Option<Option<String>> = conn.query_first(sql).await?;
    match max.flatten() {
        None => Ok(None),
        Some(text) => text.parse::<i64>().map(Some).map_err(|_| {
            Fault::Keysmith(Error::invalid(format!(
                "{db}.{table}.{column} holds {text}, above the largest 64-bit signed integer: no sequence value is above it"
            )))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "mysql")]
    #[test]
    fn mysql_identifiers_are_quoted_not_pasted() {
        assert_eq!(quote_mysql("id"), "`id`");
        assert_eq!(
            quote_mysql("a`; DROP TABLE x; --"),
            "`a``; DROP TABLE x; --`"
        );
    }

    #[test]
    fn identifiers_are_quoted_not_pasted() {
        assert_eq!(quote("id"), "\"id\"");
        assert_eq!(
            quote("a\"; DROP TABLE x; --"),
            "\"a\"\"; DROP TABLE x; --\""
        );
    }
}

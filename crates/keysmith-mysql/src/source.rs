//! A MySQL / MariaDB database read as a [`SourceDatabase`]: the table
//! `adopt` stays above, and Leaf's or Tinyid's allocator table `import`
//! moves from.

use async_trait::async_trait;
use keysmith_core::sequence::{ImportFormat, SourceDatabase, SourceRow};
use keysmith_core::{Error, Result};

use crate::connect::connect_mapped;

/// A MySQL or MariaDB database opened for `adopt` and `import`
/// (`mysql://USER[:PASSWORD]@HOST[:PORT]/DB`).
pub struct MysqlSource {
    url: String,
}

impl MysqlSource {
    /// The database a `mysql://` URL names; nothing is connected until it
    /// is read (the URL is checked then).
    pub fn from_url(url: &str) -> MysqlSource {
        MysqlSource {
            url: url.to_owned(),
        }
    }
}

#[async_trait]
impl SourceDatabase for MysqlSource {
    async fn largest_value(&self, table: &str, column: &str) -> Result<Option<i64>> {
        let (mut conn, errors) = connect_mapped(&self.url).await?;
        let out = mysql_largest(&mut conn, table, column)
            .await
            .map_err(|e| match e {
                Fault::Driver(e) => errors.map(&e),
                Fault::Keysmith(e) => e,
            });
        let _ = conn.disconnect().await;
        out
    }

    async fn allocator_rows(&self, format: ImportFormat, table: &str) -> Result<Vec<SourceRow>> {
        mysql_rows(format, &self.url, table).await
    }
}

/// What went wrong reading a MySQL table: the driver's error (mapped by the
/// caller, who knows the server) or keysmith's own.
enum Fault {
    Driver(mysql_async::Error),
    Keysmith(Error),
}

impl From<mysql_async::Error> for Fault {
    fn from(e: mysql_async::Error) -> Self {
        Fault::Driver(e)
    }
}

/// `` `name` ``, with any backtick doubled: a MySQL identifier, never SQL.
fn quote_mysql(ident: &str) -> String {
    format!("`{}`", ident.replace('`', "``"))
}

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

async fn mysql_rows(format: ImportFormat, from: &str, table: &str) -> Result<Vec<SourceRow>> {
    use mysql_async::prelude::Queryable;
    if table.is_empty() || table.contains('\0') {
        return Err(Error::invalid(format!(
            "the table name {table:?} is empty or holds a NUL byte"
        )));
    }
    let (mut conn, errors) = connect_mapped(from).await?;
    let quoted = table
        .split('.')
        .map(|p| format!("`{}`", p.replace('`', "``")))
        .collect::<Vec<_>>()
        .join(".");
    let sql = match format {
        ImportFormat::Leaf => {
            format!("SELECT biz_tag, max_id, step, 1, 0 FROM {quoted} ORDER BY biz_tag")
        }
        ImportFormat::Tinyid => format!(
            "SELECT biz_type, max_id, step, delta, remainder FROM {quoted} ORDER BY biz_type"
        ),
    };
    /// name, max_id, step, delta, remainder.
    type Raw = (String, i64, Option<i64>, i64, i64);
    let rows: std::result::Result<Vec<Raw>, _> = conn.query(sql).await;
    let _ = conn.disconnect().await;
    let rows = rows.map_err(|e| match &e {
        mysql_async::Error::Server(s) if matches!(s.code, 1146 | 1054) => Error::invalid(format!(
            "MySQL at {}: {}; is this {} table? ({} keeps its rows in {}; name the table it is in)",
            errors.target,
            s.message,
            match format {
                ImportFormat::Leaf => "a Leaf leaf_alloc",
                ImportFormat::Tinyid => "a Tinyid tiny_id_info",
            },
            match format {
                ImportFormat::Leaf => "Leaf",
                ImportFormat::Tinyid => "Tinyid",
            },
            format.default_table()
        )),
        _ => errors.map(&e),
    })?;
    Ok(rows
        .into_iter()
        .map(|(name, max_id, step, delta, remainder)| SourceRow {
            name,
            max_id,
            step,
            delta,
            remainder,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_identifiers_are_quoted_not_pasted() {
        assert_eq!(quote_mysql("id"), "`id`");
        assert_eq!(
            quote_mysql("a`; DROP TABLE x; --"),
            "`a``; DROP TABLE x; --`"
        );
    }
}

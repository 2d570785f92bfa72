//! A PostgreSQL database read as a [`SourceDatabase`]: the table `adopt`
//! stays above.

use async_trait::async_trait;
use keysmith_core::sequence::{SourceDatabase, quote_ident as quote};
use keysmith_core::{Error, Result};

use crate::connect::{ConnectConfig, pg_connect, postgres_error};

/// A PostgreSQL database opened for `adopt` (`postgres://USER@HOST/DB`).
pub struct PostgresSource {
    config: ConnectConfig,
}

impl PostgresSource {
    /// The database a `postgres://` URL names; nothing is connected until
    /// it is read.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed URL or TLS settings.
    pub fn from_url(url: &str) -> Result<PostgresSource> {
        let (config, _schema) = crate::connect_config(url)?;
        Ok(PostgresSource { config })
    }
}

#[async_trait]
impl SourceDatabase for PostgresSource {
    async fn largest_value(&self, table: &str, column: &str) -> Result<Option<i64>> {
        let client = pg_connect(&self.config).await?;
        postgres_largest(&client, table, column).await
    }
}

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

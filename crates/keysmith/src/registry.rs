//! The URL registry: which crate opens a URL. The one place that knows every
//! driver this build holds, kept apart from the contract (as `object_store`
//! keeps `parse_url` apart from `ObjectStore`).

use std::sync::Arc;

use keysmith_core::sequence::{
    AdoptReport, AdoptSource, ImportFormat, ImportReport, SourceDatabase, adopt_from, import_from,
};
use keysmith_core::store::{Store, memory};
use keysmith_core::{Error, Result};

/// Opens the store a URL names:
///
/// - `sqlite://PATH[?busy_timeout_ms=N]` (relative or absolute:
///   `sqlite:///var/lib/k.db`),
/// - `memory://` (a fresh in-memory store, for tests and examples),
/// - `postgres://...`,
/// - (`sqlite://` and `postgres://` with the default features `sqlite` and
///   `postgres`),
/// - `etcd://...` (`etcds://` over TLS) and `mysql://USER@HOST/DB` (MySQL 8,
///   MariaDB 10.6+) when those backends are built in (features `etcd`,
///   `mysql`).
///
/// # Errors
/// [`Error::InvalidArgument`] for a URL that names no known store, and what
/// opening the store fails with ([`Error::Unavailable`], [`Error::Corrupt`]).
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    // What messages show of the URL: never its password.
    let shown = keysmith_core::store::redact_url(url);
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        Error::invalid(
            "the store URL has no scheme (it is not shown: it may hold a password); use sqlite://PATH, postgres://USER@HOST/DB, mysql://USER@HOST/DB or etcd://HOST:PORT",
        )
    })?;
    match scheme {
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Arc::new(
            keysmith_sqlite::SqliteStore::open_url(rest).await?,
        )),
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => Err(Error::invalid(format!(
            "store URL {shown:?}: this build of keysmith has no SQLite support; \
             rebuild with `--features sqlite` (a default feature)"
        ))),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => {
            Ok(Arc::new(keysmith_postgres::PostgresStore::open(url).await?))
        }
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Err(Error::invalid(format!(
            "store URL {}: this build of keysmith has no PostgreSQL support; \
             rebuild with `--features postgres` (a default feature)",
            keysmith_core::store::redact_url(url)
        ))),
        #[cfg(feature = "etcd")]
        "etcd" | "etcds" => Ok(Arc::new(keysmith_etcd::EtcdStore::connect(url).await?)),
        #[cfg(not(feature = "etcd"))]
        "etcd" | "etcds" => Err(Error::invalid(format!(
            "store URL {shown:?}: this build of keysmith has no etcd support; \
             rebuild with `--features etcd` (needs protoc), e.g. cargo install keysmith-cli --features etcd"
        ))),
        #[cfg(feature = "mysql")]
        "mysql" => Ok(Arc::new(keysmith_mysql::MysqlStore::open(url).await?)),
        #[cfg(not(feature = "mysql"))]
        "mysql" => Err(Error::invalid(format!(
            "store URL {}: this build of keysmith has no MySQL/MariaDB support; \
             rebuild with `--features mysql`, e.g. cargo install keysmith-cli --features mysql",
            keysmith_core::store::redact_url(url)
        ))),
        "memory" if rest.is_empty() => Ok(Arc::new(memory::MemoryStore::new())),
        "memory" => Err(Error::invalid(format!(
            "store URL {shown:?}: memory:// takes nothing after the scheme"
        ))),
        other => Err(Error::invalid(format!(
            "store URL {shown:?}: unknown scheme {other:?}; use sqlite://PATH, postgres://USER@HOST/DB, mysql://USER@HOST/DB or etcd://HOST:PORT"
        ))),
    }
}

/// Opens the database a URL names for reading keys from it (not as a
/// store): `sqlite://PATH`, `postgres://USER@HOST/DB` or
/// `mysql://USER@HOST/DB`, as this build holds them. Nothing is connected
/// until the source is read.
///
/// # Errors
/// [`Error::InvalidArgument`] for a URL of another scheme, or of a driver
/// this build lacks (saying which feature adds it), or malformed.
pub fn open_source(url: &str) -> Result<Box<dyn SourceDatabase>> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", ""));
    #[cfg(not(feature = "sqlite"))]
    let _ = rest;
    match scheme {
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Box::new(keysmith_sqlite::SqliteSource::from_url_rest(
            rest,
        )?)),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => {
            Ok(Box::new(keysmith_postgres::PostgresSource::from_url(url)?))
        }
        #[cfg(feature = "mysql")]
        "mysql" => Ok(Box::new(keysmith_mysql::MysqlSource::from_url(url))),
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => Err(missing_driver(url, "sqlite")),
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Err(missing_driver(url, "postgres")),
        #[cfg(not(feature = "mysql"))]
        "mysql" => Err(missing_driver(url, "mysql")),
        _ => Err(Error::invalid(format!(
            "the database must be an SQLite file (sqlite://PATH), a PostgreSQL database (postgres://USER@HOST/DB) \
             or a MySQL/MariaDB database (mysql://USER@HOST/DB), not a URL with the scheme {scheme:?}"
        ))),
    }
}

/// A database URL of a driver this build lacks: which feature adds it.
#[cfg(not(all(feature = "sqlite", feature = "postgres", feature = "mysql")))]
fn missing_driver(url: &str, feature: &str) -> Error {
    Error::invalid(format!(
        "database URL {}: this build of keysmith has no {feature} support; rebuild with `--features {feature}`",
        keysmith_core::store::redact_url(url)
    ))
}

/// Reads the largest value of `source` and moves sequence `name`'s next
/// value above it: [`keysmith_core::sequence::adopt_from`] on the database
/// `source.database` names, opened with [`open_source`].
///
/// # Errors
/// As [`open_source`] and [`adopt_from`]. Nothing is written on error.
pub async fn adopt(
    store: &dyn Store,
    name: &str,
    source: &AdoptSource,
    create: bool,
    dry_run: bool,
) -> Result<AdoptReport> {
    let db = open_source(&source.database)?;
    adopt_from(store, name, source, &*db, create, dry_run).await
}

/// Reads a Leaf or Tinyid allocator table from the MySQL database `from`
/// names and creates one sequence per row in `store`:
/// [`keysmith_core::sequence::import_from`] on the database opened with
/// [`open_source`].
///
/// # Errors
/// As [`open_source`] and [`import_from`]: a database that is not MySQL
/// holds no such table.
pub async fn import(
    store: &dyn Store,
    format: ImportFormat,
    from: &str,
    table: Option<&str>,
    dry_run: bool,
) -> Result<ImportReport> {
    let db = open_source(from)?;
    import_from(store, format, &*db, table, dry_run).await
}

#[cfg(all(test, not(all(feature = "etcd", feature = "mysql"))))]
mod tests {
    use super::*;

    #[cfg(not(feature = "etcd"))]
    #[tokio::test]
    async fn etcd_urls_without_the_feature_say_how_to_build_it_in() {
        let e = open("etcd://127.0.0.1:2379").await.err().unwrap();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("--features etcd"), "{e}");
    }

    #[cfg(not(feature = "mysql"))]
    #[tokio::test]
    async fn mysql_urls_without_the_feature_say_how_to_build_it_in() {
        let e = open("mysql://u:secret@127.0.0.1/db").await.err().unwrap();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("--features mysql"), "{e}");
        assert!(!e.to_string().contains("secret"), "{e}");
    }
}

#[cfg(test)]
mod redaction {
    use super::*;

    /// A mistyped scheme or a driver this build lacks: the message names
    /// the URL without its password.
    #[tokio::test]
    async fn messages_never_show_the_password() {
        for url in [
            "postgress://u:hunter2@h/db",
            "u:hunter2@h/db",
            "memory://u:hunter2@h",
        ] {
            let Err(e) = open(url).await else {
                panic!("{url} opened")
            };
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
        let e = open_source("oracle://u:hunter2@h/db")
            .err()
            .expect("refused");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}

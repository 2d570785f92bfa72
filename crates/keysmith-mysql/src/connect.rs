//! One-off connections for code beside the store (`adopt`, `import`,
//! benchmarks), with the store's TLS and credentials.

use super::*;

/// One connection to the database a `mysql://` store URL names, with the
/// URL's TLS (`preferred` falling back to plain TCP when the server offers
/// no TLS) and credentials, and keysmith's session settings, for tools that
/// run their own statements beside the store (`adopt`, `import`,
/// benchmarks). keysmith's tables are not touched.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad URL, a TLS failure or a refused
/// login (saying what to fix); [`Error::Unavailable`] when the server
/// cannot be reached within the URL's timeout.
pub async fn connect(url: &str) -> Result<Conn> {
    connect_mapped(url).await.map(|(c, _)| c)
}

/// [`connect`], and how to map the errors of that connection.
pub(crate) async fn connect_mapped(url: &str) -> Result<(Conn, Errors)> {
    let mut u = MysqlUrl::parse(url)?;
    u.resolve_tls().await?;
    let errors = Errors {
        target: u.target(),
        ssl_mode: u.ssl_mode,
    };
    let conn =
        match connect_once(&u, u.ssl_opts()).await? {
            Err(mysql_async::Error::Driver(
                mysql_async::DriverError::NoClientSslFlagFromServer,
            )) if u.ssl_mode == SslMode::Preferred => connect_once(&u, None).await?,
            other => other,
        };
    conn.map(|c| (c, errors.clone()))
        .map_err(|e| errors.map(&e))
}

/// One connection attempt within the URL's timeout.
pub(super) async fn connect_once(
    u: &MysqlUrl,
    ssl: Option<SslOpts>,
) -> Result<std::result::Result<Conn, mysql_async::Error>> {
    tokio::time::timeout(u.timeout, Conn::new(u.opts(ssl).pool_opts(None)))
        .await
        .map_err(|_| {
            keysmith_core::driver::conn::no_connection(
                &format!("MySQL at {}", u.target()),
                u.timeout,
            )
        })
}

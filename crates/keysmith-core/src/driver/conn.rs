//! The connection ceremony of the stores that talk to a server through a
//! pool of connections (PostgreSQL, MySQL), written once: take a connection
//! within the timeout, run the operation within the timeout, and close
//! rather than reuse a connection a failure may have left mid-statement.

use std::future::Future;
use std::time::Duration;

use crate::{Error, Result};

/// A pool of connections to a database server, as [`with_conn`] uses it.
pub trait ConnPool: Sync {
    /// A connection taken from the pool; dropping it hands it back.
    type Conn: Send;

    /// Takes a connection from the pool.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when none comes within [`Self::timeout`]
    /// ([`no_connection`]); what the driver's connect fails with.
    fn take(&self) -> impl Future<Output = Result<Self::Conn>> + Send;

    /// Closes `conn` instead of handing it back: an operation on it failed
    /// with [`Error::Unavailable`] and may have left it broken or
    /// mid-statement.
    fn discard(&self, conn: Self::Conn);

    /// How long taking a connection, and then an operation, may take.
    fn timeout(&self) -> Duration;

    /// The server as messages name it, e.g. `PostgreSQL at 127.0.0.1:5432`
    /// (never a password).
    fn server(&self) -> String;
}

/// Runs `work` on a connection of `pool` within the pool's timeout, then
/// hands the connection back, or closes it when `work` failed with
/// [`Error::Unavailable`] (see [`ConnPool::discard`]).
///
/// # Errors
/// What [`ConnPool::take`] fails with; [`Error::Unavailable`] when `work`
/// does not finish within the timeout ([`no_answer`]); what `work` fails
/// with.
pub async fn with_conn<P: ConnPool, T>(
    pool: &P,
    work: impl AsyncFnOnce(&mut P::Conn) -> Result<T>,
) -> Result<T> {
    let mut conn = pool.take().await?;
    let out = match tokio::time::timeout(pool.timeout(), work(&mut conn)).await {
        Ok(out) => out,
        Err(_) => Err(no_answer(&pool.server(), pool.timeout())),
    };
    if matches!(out, Err(Error::Unavailable(_))) {
        pool.discard(conn);
    }
    out
}

/// [`Error::Unavailable`]: no connection to `server` came within `timeout`.
pub fn no_connection(server: &str, timeout: Duration) -> Error {
    Error::Unavailable(format!(
        "{server}: no connection within {}s; check that the server is running and reachable, then retry",
        timeout.as_secs_f64()
    ))
}

/// [`Error::Unavailable`]: `server` did not answer within `timeout`.
pub fn no_answer(server: &str, timeout: Duration) -> Error {
    Error::Unavailable(format!(
        "{server}: no answer within {}s; check the server's load and health, or raise ?timeout=SECS",
        timeout.as_secs_f64()
    ))
}

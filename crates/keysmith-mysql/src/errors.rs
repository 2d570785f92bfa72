//! The one mapping of driver errors to keysmith's, also for `adopt` and
//! `import`.

use super::*;

/// How driver errors of one server become keysmith's: the one place they
/// are mapped, for the store and for the connections of `adopt` and
/// `import`.
#[derive(Debug, Clone)]
pub(crate) struct Errors {
    /// `host:port/database`.
    pub(crate) target: String,
    pub(crate) ssl_mode: SslMode,
}

impl Errors {
    pub(super) fn corrupt(&self, what: &str) -> Error {
        Error::Corrupt(format!(
            "MySQL at {}: {what}; keysmith's tables were changed outside keysmith",
            self.target
        ))
    }

    /// Maps a driver error to keysmith's, in one line naming the server.
    pub(crate) fn map(&self, e: &mysql_async::Error) -> Error {
        use mysql_async::{DriverError, Error as E, IoError};
        let t = &self.target;
        match e {
            E::Server(s) => {
                let msg = one_line(&s.message);
                let code = s.code;
                match code {
                    // Access denied (login), to a database, a command.
                    1045 | 1698 => Error::InvalidArgument(format!(
                        "MySQL at {t} refused the login: {msg}; check the user and password in the store URL (or its password_file)"
                    )),
                    1044 | 1142 | 1143 | 1227 => Error::InvalidArgument(format!(
                        "MySQL at {t}: {msg}; grant the user ALL on the database (GRANT ALL ON db.* TO user), or use another user"
                    )),
                    1049 => Error::InvalidArgument(format!(
                        "MySQL at {t}: {msg}; create the database (CREATE DATABASE name) or fix the store URL"
                    )),
                    // Insecure transport refused (require_secure_transport).
                    3159 => Error::InvalidArgument(format!(
                        "MySQL at {t}: {msg}; the server requires TLS: use ssl-mode=required, verify_ca or verify_identity"
                    )),
                    // No such table or column, wrong row count: not keysmith's tables.
                    1146 | 1054 | 1136 | 1222 | 1241 => Error::Corrupt(format!(
                        "MySQL at {t}: {msg} (error {code}); keysmith's tables were changed outside keysmith"
                    )),
                    // Out of range, too long, CHECK and foreign keys, truncation.
                    1264 | 1406 | 1292 | 1366 | 1690 | 3819 | 4025 | 1451 | 1452 | 1048 => {
                        Error::InvalidArgument(format!(
                            "MySQL at {t} rejected a value: {msg} (error {code})"
                        ))
                    }
                    // 1205 lock wait timeout, 1213 deadlock, 1040 too many
                    // connections, 1053 shutdown, 1317/1927/3024 interrupted or
                    // timed out, 2006/2013 gone, and anything unforeseen: the
                    // server's state, which retrying may get past.
                    _ => Error::Unavailable(format!(
                        "MySQL at {t}: {msg} (error {code}); retry, and check the server if it persists"
                    )),
                }
            }
            E::Io(IoError::Tls(tls)) => Error::InvalidArgument(format!(
                "MySQL at {t}: TLS failed with ssl-mode={}: {}; check ssl-ca (the CA that signed the server's certificate) and that the host in the URL is the one the certificate names, or choose another ssl-mode",
                self.ssl_mode.as_str(),
                keysmith_core::driver::error_chain(tls)
            )),
            E::Io(IoError::Io(io))
                if io
                    .get_ref()
                    .is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some()) =>
            {
                Error::InvalidArgument(format!(
                    "MySQL at {t}: TLS failed with ssl-mode={}: {}; check ssl-ca (the CA that signed the server's certificate) and that the host in the URL is the one the certificate names, or choose another ssl-mode",
                    self.ssl_mode.as_str(),
                    keysmith_core::driver::error_chain(io)
                ))
            }
            E::Io(IoError::Io(io)) => Error::Unavailable(format!(
                "MySQL at {t}: {}; check that the server is running and reachable, then retry",
                keysmith_core::driver::error_chain(io)
            )),
            E::Driver(DriverError::NoClientSslFlagFromServer) => Error::InvalidArgument(format!(
                "MySQL at {t}: the server offers no TLS, and ssl-mode={} requires it; configure TLS on the server (ssl_cert, ssl_key) or use ssl-mode=preferred or disabled",
                self.ssl_mode.as_str()
            )),
            E::Driver(
                d @ (DriverError::FromValue { .. }
                | DriverError::FromRow { .. }
                | DriverError::UnexpectedPacket { .. }),
            ) => self.corrupt(&one_line(&d.to_string())),
            E::Driver(
                d @ (DriverError::UnknownAuthPlugin { .. }
                | DriverError::CleartextPluginDisabled
                | DriverError::MysqlOldPasswordDisabled),
            ) => Error::InvalidArgument(format!(
                "MySQL at {t}: {}; give the account mysql_native_password or caching_sha2_password authentication",
                one_line(&d.to_string())
            )),
            E::Url(u) => {
                Error::InvalidArgument(format!("MySQL at {t}: {}", one_line(&u.to_string())))
            }
            other => Error::Unavailable(format!(
                "MySQL at {t}: {}; check that the server is running and reachable, then retry",
                keysmith_core::driver::error_chain(other)
            )),
        }
    }
}

pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The server's error codes keysmith acts on.
pub(super) const ER_DUP_ENTRY: u16 = 1062;
pub(super) const ER_DUP_FIELDNAME: u16 = 1060;
pub(super) const ER_NO_SUCH_TABLE: u16 = 1146;
pub(super) const ER_NO_REFERENCED_ROW: u16 = 1452;
pub(super) const ER_LOCK_DEADLOCK: u16 = 1213;

/// The server error code of `e`, if it is one.
pub(super) fn code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

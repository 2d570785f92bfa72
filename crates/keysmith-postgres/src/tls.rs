//! TLS and credentials for every PostgreSQL connection keysmith opens (the
//! store's pool, shard sets, `adopt`): written once here, over rustls.
//!
//! # URL parameters
//!
//! - `sslmode=disable|prefer|require|verify-ca|verify-full`, as libpq reads it.
//!   Default `prefer`, libpq's default: TLS when the server offers it, plain
//!   when it does not, so a local server without TLS works unchanged.
//!   - `disable`: never TLS.
//!   - `prefer`: TLS if the server accepts it, else plain; the certificate is
//!     not checked (unless `sslrootcert` is given, see below).
//!   - `require`: TLS or fail; the certificate is not checked (unless
//!     `sslrootcert` is given: then, as libpq does, the chain is checked as
//!     with `verify-ca`).
//!   - `verify-ca`: TLS, and the server's certificate must chain to a trusted
//!     CA; the host name is not checked.
//!   - `verify-full`: as `verify-ca`, and the certificate must be valid for the
//!     host name (or IP address) in the URL.
//! - `sslrootcert=PATH`: the CA certificates (PEM) to trust, instead of the
//!   system's (`sslrootcert=system`, or absent, means the system's roots).
//!   A failed check is always an error, never a silent fall-back to plain
//!   (libpq's `prefer` would retry without TLS; keysmith does not).
//! - `sslcert=PATH` and `sslkey=PATH`: a client certificate and its key (PEM),
//!   for servers that ask for one (`clientcert=verify-full` in pg_hba.conf).
//! - `password_file=PATH`: a file holding the password alone (one trailing
//!   newline is ignored), so the password never appears on a command line
//!   that `ps` shows. Not together with a password in the URL.
//!
//! Files are read when the URL is parsed: an unreadable or malformed one is
//! an [`Error::InvalidArgument`] naming the parameter and the file.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::{CertificateError, ClientConfig, RootCertStore};
use tokio::task::JoinHandle;
use tokio_postgres::Client;
use tokio_postgres_rustls::MakeRustlsConnect;

use keysmith_core::driver::credentials::{
    certificates, percent_decode, private_key, read_password_file,
};
use keysmith_core::driver::tls::{Check, Verifier, ca_roots, system_roots};
use keysmith_core::{Error, Result};

/// How a connection uses TLS: libpq's `sslmode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str, shown: &str) -> Result<SslMode> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(Error::invalid(format!(
                    "store URL {shown}: sslmode={other:?} is not a TLS mode; use one of disable, prefer, require, verify-ca, verify-full (verify-full checks the certificate and the host name)"
                )));
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS and credential parameters of a PostgreSQL URL, as given.
#[derive(Debug, Default)]
pub(crate) struct TlsParams {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    sslcert: Option<String>,
    sslkey: Option<String>,
    password_file: Option<String>,
}

impl TlsParams {
    /// Takes `key=value` if it is one of this module's parameters; returns
    /// whether it was.
    pub(crate) fn take(&mut self, key: &str, value: &str) -> bool {
        let slot = match key {
            "sslmode" => &mut self.sslmode,
            "sslrootcert" => &mut self.sslrootcert,
            "sslcert" => &mut self.sslcert,
            "sslkey" => &mut self.sslkey,
            "password_file" => &mut self.password_file,
            _ => return false,
        };
        *slot = Some(percent_decode(value));
        true
    }

    /// Applies the parameters: sets the password (from `password_file`) and
    /// the driver's TLS mode on `config`, and builds the connector.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad `sslmode`, an unreadable or
    /// malformed file, `sslcert` without `sslkey` (or the reverse), or a
    /// password both in the URL and in a file.
    pub(crate) fn apply(self, config: &mut tokio_postgres::Config, shown: &str) -> Result<PgTls> {
        if let Some(path) = &self.password_file {
            if config.get_password().is_some() {
                return Err(Error::invalid(format!(
                    "store URL {shown}: a password in the URL and password_file={path} both; give one of them (password_file keeps it off the command line)"
                )));
            }
            config.password(read_password_file(Path::new(path), "password_file")?);
        }
        let mode = match &self.sslmode {
            Some(v) => SslMode::parse(v, shown)?,
            None => SslMode::Prefer,
        };
        let system = |p: &Option<String>| p.as_deref().is_none_or(|p| p == "system");
        let check = match mode {
            SslMode::Disable => Check::Nothing,
            SslMode::Prefer | SslMode::Require if system(&self.sslrootcert) => Check::Nothing,
            SslMode::Prefer | SslMode::Require | SslMode::VerifyCa => Check::Chain,
            SslMode::VerifyFull => Check::ChainAndName,
        };
        config.ssl_mode(match mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (roots, trusted) = match (&self.sslrootcert, check) {
            (_, Check::Nothing) => (RootCertStore::empty(), String::new()),
            (Some(path), _) if path != "system" => (
                ca_roots(
                    certificates(Path::new(path), "sslrootcert")?,
                    "sslrootcert",
                    path,
                )?,
                format!("the CA in sslrootcert={path}"),
            ),
            _ => (
                system_roots("sslrootcert")?,
                "the system's CA certificates".to_owned(),
            ),
        };
        let verifier = Arc::new(Verifier::new(
            check,
            roots,
            provider.signature_verification_algorithms,
        ));
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::invalid(format!("TLS setup failed: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let client = match (&self.sslcert, &self.sslkey) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = certificates(Path::new(cert), "sslcert")?;
                let key = private_key(Path::new(key), "sslkey")?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    Error::invalid(format!(
                        "store URL {shown}: sslcert={cert} and sslkey do not make a client certificate: {e}; give the certificate and its own key"
                    ))
                })?
            }
            _ => {
                return Err(Error::invalid(format!(
                    "store URL {shown}: sslcert and sslkey go together; give both files or neither"
                )));
            }
        };
        Ok(PgTls {
            mode,
            check,
            trusted,
            connector: MakeRustlsConnect::new(client),
        })
    }
}

/// The one TLS connector of PostgreSQL connections, built from a URL's
/// parameters by [`TlsParams::apply`]. Cheap to clone.
#[derive(Clone)]
pub(crate) struct PgTls {
    mode: SslMode,
    check: Check,
    /// Where trusted certificates come from, for messages.
    trusted: String,
    connector: MakeRustlsConnect,
}

impl fmt::Debug for PgTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgTls")
            .field("mode", &self.mode)
            .field("check", &self.check)
            .finish_non_exhaustive()
    }
}

impl PgTls {
    /// Opens one connection with `config` (whose TLS mode [`TlsParams::apply`]
    /// set) and spawns the task that drives it.
    ///
    /// # Errors
    /// What the driver fails with; [`PgTls::explain`] tells TLS failures apart.
    pub(crate) async fn connect(
        &self,
        config: &tokio_postgres::Config,
    ) -> std::result::Result<(Client, JoinHandle<()>), tokio_postgres::Error> {
        let (client, connection) = config.connect(self.connector.clone()).await?;
        let task = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL connection ended: {e}");
            }
        });
        Ok((client, task))
    }

    /// A one-line explanation, saying what to do, when `e` is a failure of
    /// TLS (the certificate check, or a server without TLS), a server that
    /// refuses connections without it, or a missing or wrong password;
    /// `None` for other errors.
    pub(crate) fn explain(&self, e: &tokio_postgres::Error) -> Option<String> {
        if let Some(db) = e.as_db_error() {
            let msg = db.message();
            let code = db.code().code();
            return if code.starts_with("28") && msg.contains("no encryption") {
                Some(format!(
                    "the server refuses connections without TLS ({msg}); remove sslmode={} from the store URL, or use sslmode=verify-full with sslrootcert=CA_FILE",
                    self.mode.name()
                ))
            } else if code.starts_with("28") && msg.contains("certificate") {
                Some(format!(
                    "the server wants a client certificate for this user ({msg}); add sslcert=PATH&sslkey=PATH, a certificate for the user signed by the CA of the server's ssl_ca_file"
                ))
            } else if code == "28P01" {
                Some(format!(
                    "the server refused the login ({msg}); check the user and the password (in the store URL, or in the file password_file=PATH names)"
                ))
            } else {
                None
            };
        }
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        if text.contains("password missing") {
            return Some(
                "the server asks for a password and the store URL gives none; add password_file=PATH (a file holding the password alone), or put it in the URL".to_owned(),
            );
        }
        if !text.contains("TLS") {
            return None;
        }
        let rustls = std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        let mode = self.mode.name();
        let trusted = &self.trusted;
        Some(match rustls {
            Some(rustls::Error::InvalidCertificate(c)) => match c {
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => format!(
                    "the server's certificate does not name the host in the store URL ({c}); connect with a host name the certificate was issued for, or use sslmode=verify-ca to check the CA only"
                ),
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. } => format!(
                    "the server's certificate is not valid now ({c}); renew the server's certificate, or check this machine's clock"
                ),
                _ => format!(
                    "the server's certificate is not signed by {trusted} ({c}; sslmode={mode}); give sslrootcert=PATH the CA certificate (PEM) that signed the server's certificate"
                ),
            },
            Some(other) => format!(
                "the TLS handshake failed ({other}; sslmode={mode}); check the server's TLS setup and the sslcert/sslkey files"
            ),
            None if text.contains("does not support TLS") => format!(
                "the server does not accept TLS connections and sslmode={mode} requires TLS; turn on ssl in the server's postgresql.conf, or use sslmode=prefer"
            ),
            None => format!("{text} (sslmode={mode}); check the server's TLS setup"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(query: &[(&str, &str)]) -> Result<(tokio_postgres::Config, PgTls)> {
        let mut params = TlsParams::default();
        for (k, v) in query {
            assert!(params.take(k, v));
        }
        let mut config: tokio_postgres::Config = "postgres://u@h/db".parse().unwrap();
        let tls = params.apply(&mut config, "postgres://u@h/db")?;
        Ok((config, tls))
    }

    #[test]
    fn modes_map_to_checks() {
        use tokio_postgres::config::SslMode as Pg;
        let (c, t) = apply(&[]).unwrap();
        assert_eq!((c.get_ssl_mode(), t.check), (Pg::Prefer, Check::Nothing));
        let (c, t) = apply(&[("sslmode", "disable")]).unwrap();
        assert_eq!((c.get_ssl_mode(), t.check), (Pg::Disable, Check::Nothing));
        let (c, t) = apply(&[("sslmode", "require")]).unwrap();
        assert_eq!((c.get_ssl_mode(), t.check), (Pg::Require, Check::Nothing));
    }

    #[test]
    fn bad_values_say_what_to_do() {
        let err = apply(&[("sslmode", "strict")]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)));
        let msg = err.to_string();
        assert!(
            msg.contains("sslmode=\"strict\"") && msg.contains("verify-full"),
            "{msg}"
        );

        let err = apply(&[
            ("sslmode", "verify-full"),
            ("sslrootcert", "/nonexistent/ca.pem"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("sslrootcert=/nonexistent/ca.pem") && err.contains("check the path"),
            "{err}"
        );

        let err = apply(&[("sslcert", "/x.pem")]).unwrap_err().to_string();
        assert!(err.contains("go together"), "{err}");

        let err = apply(&[("password_file", "/nonexistent/pw")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("password_file=/nonexistent/pw"), "{err}");
    }

    #[test]
    fn password_file_is_read_and_never_doubled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        std::fs::write(&path, "s3cret\n").unwrap();
        let (c, _) = apply(&[("password_file", path.to_str().unwrap())]).unwrap();
        assert_eq!(c.get_password(), Some(&b"s3cret"[..]));

        let mut params = TlsParams::default();
        params.take("password_file", path.to_str().unwrap());
        let mut config: tokio_postgres::Config = "postgres://u:pw@h/db".parse().unwrap();
        let err = params
            .apply(&mut config, "postgres://u:***@h/db")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("give one of them") && !err.contains("s3cret"),
            "{err}"
        );
    }

    #[test]
    fn percent_escapes_decode() {
        assert_eq!(percent_decode("/a%20b/c%26d"), "/a b/c&d");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}

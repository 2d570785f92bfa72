//! A `mysql://` store URL: host, port, database, credentials, `ssl-mode`
//! and its files, checked when parsed.

use super::*;
use keysmith_core::driver::{ConnParams, DEFAULT_CONN_TIMEOUT, DEFAULT_POOL_SIZE};

pub(super) const DEFAULT_PORT: u16 = 3306;

/// How the connection is encrypted (`ssl-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disabled,
    Preferred,
    Required,
    VerifyCa,
    VerifyIdentity,
}

impl SslMode {
    pub(super) fn parse(value: &str, shown: &str) -> Result<SslMode> {
        Ok(
            match value.to_ascii_lowercase().replace('-', "_").as_str() {
                "disabled" => SslMode::Disabled,
                "preferred" => SslMode::Preferred,
                "required" => SslMode::Required,
                "verify_ca" => SslMode::VerifyCa,
                "verify_identity" => SslMode::VerifyIdentity,
                _ => {
                    return Err(Error::invalid(format!(
                        "store URL {shown}: ssl-mode={value:?} is not a mode; use disabled, preferred, required, verify_ca or verify_identity"
                    )));
                }
            },
        )
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            SslMode::Disabled => "disabled",
            SslMode::Preferred => "preferred",
            SslMode::Required => "required",
            SslMode::VerifyCa => "verify_ca",
            SslMode::VerifyIdentity => "verify_identity",
        }
    }
}

/// What keysmith takes from a `mysql://` URL.
#[derive(Clone)]
pub(crate) struct MysqlUrl {
    pub(crate) user: String,
    pub(crate) password: Option<String>,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) database: String,
    pub(crate) ssl_mode: SslMode,
    /// The `ssl-ca` file's contents (checked to hold a certificate) and path.
    pub(crate) ssl_ca: Option<(Vec<u8>, String)>,
    pub(crate) timeout: Duration,
    pub(crate) pool_size: usize,
    /// For `verify_ca`: the DNS name of the server's certificate, found by
    /// [`tls::certificate_name`] (after checking its chain); the driver
    /// checks the certificate against it.
    pub(crate) tls_name: Option<String>,
}

impl fmt::Debug for MysqlUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the password.
        f.debug_struct("MysqlUrl")
            .field("user", &self.user)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("ssl_mode", &self.ssl_mode)
            .field("timeout", &self.timeout)
            .field("pool_size", &self.pool_size)
            .finish_non_exhaustive()
    }
}

impl MysqlUrl {
    /// Parses a `mysql://` URL (see the [module documentation](self)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying what is wrong, never showing the
    /// password.
    pub(crate) fn parse(url: &str) -> Result<MysqlUrl> {
        let shown = keysmith_core::driver::redact_url(url);
        let usage = "use mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?ssl-mode=...&timeout=SECS]";
        let rest = url.strip_prefix("mysql://").ok_or_else(|| {
            Error::invalid(format!("store URL {shown} is not a MySQL URL; {usage}"))
        })?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(at) => (&authority[..at], &authority[at + 1..]),
            None => {
                return Err(Error::invalid(format!(
                    "store URL {shown} names no user; {usage}"
                )));
            }
        };
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(decode(p))),
            None => (userinfo, None),
        };
        let user = decode(user);
        if user.is_empty() {
            return Err(Error::invalid(format!(
                "store URL {shown} names no user; {usage}"
            )));
        }
        let (host, port) = split_host_port(hostport).ok_or_else(|| {
            Error::invalid(format!(
                "store URL {shown}: {hostport:?} is not HOST[:PORT] (a port is 1 to 65535; an IPv6 address goes in brackets); {usage}"
            ))
        })?;
        let database = decode(path);
        if database.is_empty() || database.contains('/') || database.len() > 64 {
            return Err(Error::invalid(format!(
                "store URL {shown} names no database (or one with '/' or over 64 bytes); {usage}; create the database first (CREATE DATABASE keysmith)"
            )));
        }
        let mut out = MysqlUrl {
            user,
            password,
            host,
            port,
            database,
            ssl_mode: SslMode::Preferred,
            ssl_ca: None,
            timeout: DEFAULT_CONN_TIMEOUT,
            pool_size: DEFAULT_POOL_SIZE,
            tls_name: None,
        };
        let mut conn = ConnParams::default();
        let mut password_file = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value);
            if conn.take(&shown, key, &value)? {
                continue;
            }
            match key {
                "ssl-mode" | "ssl_mode" | "sslmode" => {
                    out.ssl_mode = SslMode::parse(&value, &shown)?;
                }
                "ssl-ca" | "ssl_ca" => {
                    let bytes = std::fs::read(&value).map_err(|e| {
                        Error::invalid(format!(
                            "store URL {shown}: cannot read ssl-ca={value}: {e}; give a PEM file of CA certificates readable by this user"
                        ))
                    })?;
                    keysmith_core::driver::credentials::pem_certificates(&bytes, "ssl-ca", &value)?;
                    out.ssl_ca = Some((bytes, value));
                }
                "password_file" | "password-file" => password_file = Some(value),
                other => {
                    return Err(Error::invalid(format!(
                        "store URL {shown}: unknown parameter {other:?}; a mysql:// URL takes ssl-mode, ssl-ca, password_file, timeout and pool_size"
                    )));
                }
            }
        }
        (out.timeout, out.pool_size) = (conn.timeout, conn.pool_size);
        if let Some(path) = password_file {
            if out.password.is_some() {
                return Err(Error::invalid(format!(
                    "store URL {shown} has a password and a password_file; give one of them"
                )));
            }
            out.password = Some(keysmith_core::driver::credentials::read_password_file(
                std::path::Path::new(&path),
                "password_file",
            )?);
        }
        if out.ssl_ca.is_some() && out.ssl_mode == SslMode::Disabled {
            return Err(Error::invalid(format!(
                "store URL {shown}: ssl-ca is given but ssl-mode=disabled; drop one of them"
            )));
        }
        Ok(out)
    }

    /// For `verify_ca`, finds the name the driver checks the certificate
    /// against (see tls.rs); nothing for the other modes.
    pub(super) async fn resolve_tls(&mut self) -> Result<()> {
        if self.ssl_mode == SslMode::VerifyCa {
            self.tls_name = tls::certificate_name(self).await?;
        }
        Ok(())
    }

    /// `host:port/database`, for messages.
    pub(crate) fn target(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}/{}", self.host, self.port, self.database)
        } else {
            format!("{}:{}/{}", self.host, self.port, self.database)
        }
    }

    /// The driver's options: this URL's server and credentials, TLS as
    /// `ssl` says (`None`: plain TCP), and the session keysmith wants.
    pub(crate) fn opts(&self, ssl: Option<SslOpts>) -> OptsBuilder {
        let lock_wait = self.timeout.as_secs_f64().ceil().max(1.0) as u64;
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(self.user.clone()))
            .pass(self.password.clone())
            .db_name(Some(self.database.clone()))
            .prefer_socket(false)
            .tcp_nodelay(true)
            .client_found_rows(true)
            .stmt_cache_size(128)
            .ssl_opts(ssl)
            .setup(vec![
                format!(
                    "SET SESSION sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION', \
                     time_zone = '+00:00', autocommit = 1, innodb_lock_wait_timeout = {lock_wait}"
                ),
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".to_owned(),
            ])
            .pool_opts(
                PoolOpts::default()
                    .with_constraints(
                        PoolConstraints::new(0, self.pool_size).unwrap_or_default(),
                    )
                    // The session set up above is kept across uses.
                    .with_reset_connection(false)
                    .with_inactive_connection_ttl(Duration::from_secs(60)),
            )
    }

    /// The TLS options of this URL's `ssl-mode` and `ssl-ca`.
    pub(crate) fn ssl_opts(&self) -> Option<SslOpts> {
        let base = || {
            let mut o = SslOpts::default();
            if let Some((bytes, _)) = &self.ssl_ca {
                o = o
                    .with_root_certs(vec![bytes.clone().into()])
                    .with_disable_built_in_roots(true);
            }
            o
        };
        match self.ssl_mode {
            SslMode::Disabled => None,
            // Encrypted, the certificate not checked (as the MySQL clients do).
            SslMode::Preferred | SslMode::Required => {
                Some(base().with_danger_accept_invalid_certs(true))
            }
            // The chain against the CA, the name against the one the
            // certificate holds (see tls.rs).
            SslMode::VerifyCa => Some(match &self.tls_name {
                Some(name) => base().with_danger_tls_hostname_override(Some(name.clone())),
                None => base().with_danger_skip_domain_validation(true),
            }),
            SslMode::VerifyIdentity => Some(base()),
        }
    }
}

/// `host` and `port` of `HOST[:PORT]` or `[V6]:PORT`.
pub(super) fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':')?)),
        }
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0)?,
    };
    Some((host.to_owned(), port))
}

pub(super) fn decode(s: &str) -> String {
    keysmith_core::driver::credentials::percent_decode(s)
}

//! An `etcd://` or `etcds://` store URL: endpoints, key prefix, TLS files,
//! user and password. Hand-parsed: a URL of several `HOST:PORT`s is not one
//! the `url` crate takes.

use std::fmt;
use std::path::Path;

use super::DEFAULT_PREFIX;
use keysmith_core::driver::credentials::{
    certificates, percent_decode, private_key, read_password_file,
};
use keysmith_core::{Error, Result};

/// What an `etcd://` or `etcds://` URL says: the endpoints, the key prefix
/// (no slashes at either end), and how to connect (TLS, user and password).
///
/// Its `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdUrl {
    /// `host:port` of each member, in the order given.
    pub endpoints: Vec<String>,
    /// The key prefix, without leading or trailing `/`.
    pub prefix: String,
    pub(super) tls: Option<EtcdTls>,
    pub(super) user: Option<(String, String)>,
}

impl fmt::Debug for EtcdUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdUrl")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("tls", &self.tls.is_some())
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .finish()
    }
}

/// The TLS files of a URL, read and checked when it was parsed.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct EtcdTls {
    /// The `cacert` file's path and PEM text; `None`: the system's roots.
    pub(super) ca: Option<(String, Vec<u8>)>,
    /// The client certificate and key, PEM.
    pub(super) identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl EtcdUrl {
    /// Parses `etcd[s]://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...][/PREFIX][?PARAMS]`
    /// (see the [module documentation](crate) for the parameters `cacert`,
    /// `cert`, `key` and `password_file`). IPv6 hosts go in brackets
    /// (`[::1]:2379`). Without a prefix, [`DEFAULT_PREFIX`] is used. The
    /// files the URL names are read here.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying what is wrong with the URL or which
    /// file cannot be read; never showing the password.
    pub fn parse(url: &str) -> Result<EtcdUrl> {
        let shown = keysmith_core::driver::redact_url(url);
        let (tls_scheme, rest) = match (url.strip_prefix("etcds://"), url.strip_prefix("etcd://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => {
                return Err(Error::invalid(format!(
                    "store URL {shown:?} is not an etcd URL; {USAGE}"
                )));
            }
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let endpoints = endpoints(hosts, &shown)?;
        let prefix = prefix(path, &shown)?;
        let files = Files::parse(query, &shown)?;
        let user = user(userinfo, files.password_file.as_deref(), &shown)?;
        let tls = files.tls(tls_scheme, &shown)?;
        Ok(EtcdUrl {
            endpoints,
            prefix: prefix.to_owned(),
            tls,
            user,
        })
    }

    /// Whether connections use TLS.
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The etcd user the store logs in as, if any.
    pub fn user(&self) -> Option<&str> {
        self.user.as_ref().map(|(u, _)| u.as_str())
    }
}

fn read_file(path: &str, param: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        Error::invalid(format!(
            "cannot read {param}={path}: {e}; check the path and that this user may read it"
        ))
    })
}

const USAGE: &str = "expected etcd://[USER@]HOST:PORT[,HOST:PORT...][/PREFIX][?cacert=PATH&cert=PATH&key=PATH&password_file=PATH] (etcds:// for TLS), e.g. etcd://127.0.0.1:2379/keysmith";

/// The endpoints of `HOST:PORT[,HOST:PORT...]`, each checked.
fn endpoints(hosts: &str, shown: &str) -> Result<Vec<String>> {
    if hosts.is_empty() {
        return Err(Error::invalid(format!(
            "store URL {shown:?} names no endpoint; {USAGE}"
        )));
    }
    let mut endpoints = Vec::new();
    for host in hosts.split(',') {
        let bad = |why: &str| {
            Error::invalid(format!(
                "store URL {shown:?}: endpoint {host:?} {why}; {USAGE}"
            ))
        };
        let (h, port) = host.rsplit_once(':').ok_or_else(|| bad("has no port"))?;
        if h.is_empty() {
            return Err(bad("has no host"));
        }
        if h.contains(':') && !(h.starts_with('[') && h.ends_with(']')) {
            return Err(bad("is an IPv6 address without brackets"));
        }
        if h.chars()
            .any(|c| c.is_whitespace() || c.is_control() || "@?#".contains(c))
        {
            return Err(bad("is not a host name"));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(bad("has no valid port (1-65535)")),
        }
        endpoints.push(host.to_owned());
    }
    Ok(endpoints)
}

/// The key prefix of the URL's path (no slashes at either end), or
/// [`DEFAULT_PREFIX`].
fn prefix<'a>(path: &'a str, shown: &str) -> Result<&'a str> {
    let prefix = path.trim_matches('/');
    if prefix
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '?' || c == '#')
    {
        return Err(Error::invalid(format!(
            "store URL {shown:?}: prefix {prefix:?} may not contain whitespace, control characters, '?' or '#'"
        )));
    }
    Ok(if prefix.is_empty() {
        DEFAULT_PREFIX
    } else {
        prefix
    })
}

/// The files a URL's parameters name.
#[derive(Default)]
struct Files {
    cacert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    password_file: Option<String>,
}

impl Files {
    fn parse(query: &str, shown: &str) -> Result<Files> {
        let mut files = Files::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match k {
                "cacert" => &mut files.cacert,
                "cert" => &mut files.cert,
                "key" => &mut files.key,
                "password_file" => &mut files.password_file,
                other => {
                    return Err(Error::invalid(format!(
                        "store URL {shown:?}: unknown parameter {other:?}; an etcd URL takes cacert=PATH, cert=PATH, key=PATH and password_file=PATH"
                    )));
                }
            };
            if v.is_empty() {
                return Err(Error::invalid(format!(
                    "store URL {shown:?}: {k}= needs a file path"
                )));
            }
            *slot = Some(percent_decode(v));
        }
        Ok(files)
    }

    /// The TLS settings: read and checked now, with `etcds://` or any TLS
    /// file given.
    fn tls(self, tls_scheme: bool, shown: &str) -> Result<Option<EtcdTls>> {
        if !(tls_scheme || self.cacert.is_some() || self.cert.is_some() || self.key.is_some()) {
            return Ok(None);
        }
        let ca = match self.cacert {
            Some(path) => {
                certificates(Path::new(&path), "cacert")?;
                let pem = read_file(&path, "cacert")?;
                Some((path, pem))
            }
            None => None,
        };
        let identity = match (self.cert, self.key) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                certificates(Path::new(&cert), "cert")?;
                private_key(Path::new(&key), "key")?;
                Some((read_file(&cert, "cert")?, read_file(&key, "key")?))
            }
            _ => {
                return Err(Error::invalid(format!(
                    "store URL {shown:?}: cert and key go together; give both files (the client certificate and its key) or neither"
                )));
            }
        };
        Ok(Some(EtcdTls { ca, identity }))
    }
}

/// The user and password of `USER[:PASSWORD]@` (or `password_file`).
fn user(
    userinfo: Option<&str>,
    password_file: Option<&str>,
    shown: &str,
) -> Result<Option<(String, String)>> {
    let Some(info) = userinfo else {
        if password_file.is_some() {
            return Err(Error::invalid(format!(
                "store URL {shown:?}: password_file needs a user; write it before the host: etcd://USER@HOST:PORT?password_file=PATH"
            )));
        }
        return Ok(None);
    };
    let (name, password) = match info.split_once(':') {
        Some((n, p)) => (percent_decode(n), Some(percent_decode(p))),
        None => (percent_decode(info), None),
    };
    if name.is_empty() {
        return Err(Error::invalid(format!(
            "store URL {shown:?} has an empty user name; write etcd://USER@HOST:PORT, or nothing before the host"
        )));
    }
    let password = match (password, password_file) {
        (Some(_), Some(f)) => {
            return Err(Error::invalid(format!(
                "store URL {shown:?}: a password in the URL and password_file={f} both; give one of them (password_file keeps it off the command line)"
            )));
        }
        (Some(p), None) => p,
        (None, Some(f)) => read_password_file(Path::new(f), "password_file")?,
        (None, None) => {
            return Err(Error::invalid(format!(
                "store URL {shown:?}: user {name:?} has no password; add password_file=PATH (a file holding the password alone)"
            )));
        }
    };
    Ok(Some((name, password)))
}

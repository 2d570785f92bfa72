//! The client config file: which keysmith server(s) `keysmith` talks to, and
//! the files that hold what it needs to.
//!
//! Found at `$KEYSMITH_CONFIG`, else `$XDG_CONFIG_HOME/keysmith/config.toml`,
//! else `~/.config/keysmith/config.toml`; a missing default file is no
//! file, a missing `$KEYSMITH_CONFIG` an error. Keys: `server` (a URL or a
//! list of them, tried in order), `token_file`, `ca_file`, `cert_file`,
//! `key_file`; relative paths are taken from the file's directory. Flags
//! win over the environment, which wins over the file. Secrets are never
//! written in the file: a token or a store URL (which may carry a password)
//! is refused, with no part of its value in the message.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::UsageError;

/// The environment variable naming the config file.
pub const CONFIG_ENV: &str = "KEYSMITH_CONFIG";

/// The keys a config file may hold.
const KEYS: [&str; 5] = ["server", "token_file", "ca_file", "cert_file", "key_file"];

/// What a config file says; paths absolute or from the file's directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Its path.
    pub path: PathBuf,
    /// The servers, in order.
    pub servers: Vec<String>,
    /// The file holding the bearer token.
    pub token_file: Option<PathBuf>,
    /// The CA certificate.
    pub ca_file: Option<PathBuf>,
    /// The client certificate.
    pub cert_file: Option<PathBuf>,
    /// Its key.
    pub key_file: Option<PathBuf>,
}

/// `server = "URL"` or `server = ["URL", ...]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Servers {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    server: Option<Servers>,
    token_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
}

/// The config file's path: `$KEYSMITH_CONFIG` (`true`: named explicitly),
/// else the default one; `None` without a home.
fn path() -> Option<(PathBuf, bool)> {
    if let Some(p) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(p), true));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some((base.join("keysmith").join("config.toml"), false))
}

/// Reads the config file, if there is one.
///
/// # Errors
/// A [`UsageError`] naming the file: `$KEYSMITH_CONFIG` names no file; the
/// file cannot be read or is not TOML; a key is unknown, holds a secret, or
/// has the wrong type; `cert_file` without `key_file` or the other way.
pub fn load() -> Result<Option<ClientConfig>, UsageError> {
    let Some((path, named)) = path() else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => return Ok(None),
        Err(e) => {
            return Err(UsageError(format!(
                "cannot read the config file {}{}: {e}; fix it, or name another with ${CONFIG_ENV}",
                path.display(),
                if named {
                    format!(" (${CONFIG_ENV})")
                } else {
                    String::new()
                }
            )));
        }
    };
    parse(&path, &text).map(Some)
}

/// Parses a config file's text; `path` is named in every message.
///
/// # Errors
/// As [`load`].
pub fn parse(path: &Path, text: &str) -> Result<ClientConfig, UsageError> {
    let file = path.display();
    let err = |msg: String| UsageError(format!("in the config file {file}: {msg}"));
    // toml's own messages quote the line: a secret on it would be printed.
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                format!(" at line {line}")
            })
            .unwrap_or_default();
        err(format!("not valid TOML{at}: {}", e.message().trim_end()))
    })?;
    for key in table.keys() {
        if KEYS.contains(&key.as_str()) {
            continue;
        }
        let k = key.to_ascii_lowercase();
        if k.contains("token") || k.contains("password") || k.contains("secret") {
            return Err(err(format!(
                "`{key}` writes a secret into the config file, which is refused (its value is not \
                 shown); put the token in a file of its own, readable by you alone, and name it \
                 with `token_file = \"PATH\"`"
            )));
        }
        if k.starts_with("store") {
            return Err(err(format!(
                "`{key}`: a store URL, which may carry its credentials, is not read from the client \
                 config file (its value is not shown); give it with --store or $KEYSMITH_STORE"
            )));
        }
        return Err(err(format!(
            "unknown key `{key}`; the keys are {}",
            KEYS.join(", ")
        )));
    }
    let is_url_list = |v: &toml::Value| match v {
        toml::Value::String(_) => true,
        toml::Value::Array(a) => a.iter().all(toml::Value::is_str),
        _ => false,
    };
    if table.get("server").is_some_and(|v| !is_url_list(v)) {
        return Err(err(
            "`server` is a URL or a list of URLs: server = \"https://HOST:PORT\" or \
             server = [\"https://A:PORT\", \"https://B:PORT\"]"
                .into(),
        ));
    }
    let f: File = table
        .try_into()
        .map_err(|e: toml::de::Error| err(e.message().trim_end().to_owned()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let at = |p: Option<PathBuf>| p.map(|p| dir.join(p));
    let servers: Vec<String> = match f.server {
        None => Vec::new(),
        Some(Servers::One(s)) => vec![s],
        Some(Servers::Many(v)) => v,
    }
    .into_iter()
    .map(|s| s.trim().to_owned())
    .collect();
    if servers.iter().any(String::is_empty) {
        return Err(err(
            "`server` holds an empty URL; write server = \"https://HOST:PORT\"".into(),
        ));
    }
    if f.cert_file.is_some() != f.key_file.is_some() {
        return Err(err(
            "`cert_file` and `key_file` go together: give both or neither".into(),
        ));
    }
    Ok(ClientConfig {
        path: path.to_owned(),
        servers,
        token_file: at(f.token_file),
        ca_file: at(f.ca_file),
        cert_file: at(f.cert_file),
        key_file: at(f.key_file),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<ClientConfig, String> {
        parse(Path::new("/etc/k/config.toml"), text).map_err(|e| e.0)
    }

    #[test]
    fn keys_are_read_and_paths_taken_from_the_files_directory() {
        let c = parse_str(
            "server = [\"https://a:1\", \"https://b:2\"]\ntoken_file = \"tok\"\n\
             ca_file = \"/ca.pem\"\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\n",
        )
        .unwrap();
        assert_eq!(c.servers, ["https://a:1", "https://b:2"]);
        assert_eq!(c.token_file, Some(PathBuf::from("/etc/k/tok")));
        assert_eq!(c.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(c.key_file, Some(PathBuf::from("/etc/k/k.pem")));
        let one = parse_str("server = \"https://a:1\"").unwrap();
        assert_eq!(one.servers, ["https://a:1"]);
        assert_eq!(parse_str("").unwrap().servers, Vec::<String>::new());
    }

    #[test]
    fn secrets_unknown_keys_and_bad_values_are_refused_without_their_values() {
        let e = parse_str("token = \"s3cr3t-value\"").unwrap_err();
        assert!(
            e.contains("/etc/k/config.toml") && e.contains("token_file"),
            "{e}"
        );
        assert!(!e.contains("s3cr3t"), "{e}");
        let e = parse_str("store = \"postgres://u:pw-s3cr3t@h/db\"").unwrap_err();
        assert!(e.contains("--store") && !e.contains("s3cr3t"), "{e}");
        let e = parse_str("sever = \"https://a\"").unwrap_err();
        assert!(
            e.contains("unknown key `sever`") && e.contains("/etc/k/config.toml"),
            "{e}"
        );
        let e = parse_str("token_file = \"t\"\nx = \"s3cr3t").unwrap_err();
        assert!(
            e.contains("not valid TOML at line 2") && !e.contains("s3cr3t"),
            "{e}"
        );
        let e = parse_str("server = 5").unwrap_err();
        assert!(
            e.contains("/etc/k/config.toml") && e.contains("list of URLs"),
            "{e}"
        );
        let e = parse_str("ca_file = 5").unwrap_err();
        assert!(e.contains("/etc/k/config.toml"), "{e}");
        let e = parse_str("cert_file = \"c\"").unwrap_err();
        assert!(e.contains("key_file"), "{e}");
    }
}

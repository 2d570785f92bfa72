//! Who may do what: principals, their grants, and the grant each route needs.
//!
//! An access file (`keysmith serve --access-file FILE`) names principals,
//! each known by the SHA-256 digest of its bearer token(s) or by the subject
//! of its client certificate, and gives each a list of grants:
//!
//! ```toml
//! [[principal]]
//! name = "team-a"
//! token_sha256 = "hex of sha256(token)"   # or a list of digests, or:
//! # client_cert_subject = "CN=team-a"     # with, when --client-ca holds
//! # client_cert_issuer = "CN=team CA"     # several CAs, the issuer's DN,
//! # client_cert_sha256 = "hex of sha256(DER)"  # and/or the certificate's digest
//! grants = [ { names = "team-a/*", actions = ["use", "read"] } ]
//! shard_key_scope = "team-a"  # shard keys of its own (optional)
//! rate = 200           # requests a second (optional), with
//! burst = 400          # this many at once (optional, default: rate)
//! max_sequences = 100  # sequences and pools it may have (optional)
//! max_pools = 10
//! # the defaults below hold for a principal without admin on "*"
//! max_drops_per_hour = 10    # drops a rolling hour (default 10): tombstones
//! max_worker_leases = 16     # worker leases held, every group (default 16)
//! max_pool_members = 1000000 # members of its pools together (default 1000000)
//! max_open_tickets = 1000    # tickets taken and not settled (default 1000)
//! ```
//!
//! - [`Action::Use`] takes values: next, reserve, release, tickets, ids,
//!   worker leases, counters, shard-key decode. [`Action::Read`] shows and
//!   lists, the status page and `/metrics`. [`Action::Admin`] changes
//!   settings: create, alter, drop, fence, shard-key encode.
//! - `names` is a name, or a prefix ending in `*` (`"*"` alone: every name),
//!   matched against sequence, pool and worker-group names alike. Objects
//!   without a name of their own are matched by a fixed name:
//!   [`COUNTERS`] (`POST /v1/counters/next`), [`SHARD_KEYS`] (encode and
//!   decode); the ids of `/v1/ids` by the server's ids worker group (`ids`
//!   by default). A fixed name is covered only by a grant that names it
//!   exactly, or by `"*"`, never by a prefix (`"shard*"` does not cover
//!   `shard-keys`): see [`is_fixed`].
//! - The server's ids worker group is its own: `use` on it takes ids
//!   (`/v1/ids/next`), but leasing its worker ids directly
//!   (`/v1/workers/{group}/lease...`, [`Target::LeaseGroup`]) needs `admin`
//!   on `"*"`, so that no tenant can hold every worker id.
//! - A principal with `shard_key_scope` signs and checks shard keys with a
//!   key of that scope, derived from the server's shard key secret
//!   (HMAC-SHA-256 of the secret over the scope's name): principals of one
//!   scope share keys; a key minted in one scope does not decode in another.
//!   Without it, the server's secret itself (the shared scope).
//! - A principal known by a client certificate needs a server with
//!   `--client-ca`; when that bundle holds several CAs, each such principal
//!   must pin `client_cert_issuer` (the issuer's DN, written as subjects
//!   are) or `client_cert_sha256` (the hex SHA-256 of the certificate's DER),
//!   so that a certificate from another CA with the same subject is not it
//!   ([`AccessFile::check_client_ca`]).
//!
//! Each route names the grant it needs in one table, [`requirement`]; a request
//! without it is answered 403 before its handler runs, so it changes
//! nothing. Lists, the status page, `/metrics` and "did you mean" hints show
//! only names the caller may read.
//!
//! The token of `$KEYSMITH_TOKEN` / `--token-file` is the one principal of a
//! server without an access file, named [`TOKEN_PRINCIPAL`], with every
//! right; beside an access file it is refused (name it in the file instead).
//! Without a token and an access file, every request is [`Caller::anyone`],
//! with every right (allowed on loopback addresses only, unless
//! `--insecure-no-auth`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;

use axum::http::Method;
use keysmith::store::NameScope;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The fixed name that grants `POST /v1/counters/next`.
pub const COUNTERS: &str = "counters";
/// The fixed name that grants the shard-key routes (`use`: decode, `admin`: encode).
pub const SHARD_KEYS: &str = "shard-keys";
/// Whether `name` is a fixed name ([`COUNTERS`], [`SHARD_KEYS`], or the
/// server's ids worker group `ids_group`): one that only a grant naming it
/// exactly, or `"*"`, covers.
pub fn is_fixed(name: &str, ids_group: &str) -> bool {
    name == COUNTERS || name == SHARD_KEYS || name == ids_group
}

/// The characters that end a prefix cleanly: `team-a/*` covers only names
/// of team-a, where `team-a*` also covers `team-ab...`.
pub const SEPARATORS: &[char] = &['-', '/', '.', '_', ':'];

/// The principal of `$KEYSMITH_TOKEN` / `--token-file`.
pub const TOKEN_PRINCIPAL: &str = "token";
/// The principal of a server with neither token nor access file.
pub const ANYONE: &str = "anyone";

/// What a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Take values: next, reserve, release, tickets, ids, worker leases,
    /// counters, shard-key decode.
    Use,
    /// Show and list; the status page and `/metrics`.
    Read,
    /// Change settings: create, alter, drop, fence, shard-key encode.
    Admin,
}

impl Action {
    /// The word used in access files and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Use => "use",
            Action::Read => "read",
            Action::Admin => "admin",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Action::Use => 1,
            Action::Read => 2,
            Action::Admin => 4,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The names a grant covers: one name, or every name with a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Names {
    /// Exactly this name.
    Exact(String),
    /// Every name that starts with this (empty: every name).
    Prefix(String),
}

impl Names {
    fn parse(s: &str) -> Result<Names, String> {
        if s.is_empty() {
            return Err(
                "`names` is empty: write a name, a prefix ending in `*` (\"team-a/*\"), or \"*\""
                    .into(),
            );
        }
        match s.find('*') {
            None => Ok(Names::Exact(s.to_owned())),
            Some(i) if i == s.len() - 1 => Ok(Names::Prefix(s[..i].to_owned())),
            Some(_) => Err(format!(
                "`names = {s:?}` has a `*` before its end: only a trailing `*` (a prefix) is a pattern"
            )),
        }
    }

    /// Whether `name` is covered.
    pub fn covers(&self, name: &str) -> bool {
        match self {
            Names::Exact(n) => n == name,
            Names::Prefix(p) => name.starts_with(p.as_str()),
        }
    }

    /// Whether this covers every name (`"*"`).
    pub fn is_everything(&self) -> bool {
        matches!(self, Names::Prefix(p) if p.is_empty())
    }
}

impl fmt::Display for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Names::Exact(n) => f.write_str(n),
            Names::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

/// One grant: actions on a set of names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The names it covers.
    pub names: Names,
    actions: u8,
}

impl Grant {
    /// Whether this grant allows `action`.
    pub fn allows(&self, action: Action) -> bool {
        self.actions & action.bit() != 0
    }

    /// The actions it allows, in the order use, read, admin.
    pub fn actions(&self) -> Vec<Action> {
        [Action::Use, Action::Read, Action::Admin]
            .into_iter()
            .filter(|a| self.allows(*a))
            .collect()
    }

    /// Every action on every name.
    pub fn everything() -> Grant {
        Grant {
            names: Names::Prefix(String::new()),
            actions: Action::Use.bit() | Action::Read.bit() | Action::Admin.bit(),
        }
    }
}

/// A request rate with a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Requests a second, on average.
    pub per_second: NonZeroU32,
    /// Requests at once.
    pub burst: NonZeroU32,
}

/// Someone the server knows, with what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Its name, as audit lines and 403s show it.
    pub name: String,
    /// What it may do.
    pub grants: Vec<Grant>,
    /// Its request rate, if limited.
    pub rate: Option<Rate>,
    /// How many sequences it may have (counted over the names it may admin).
    pub max_sequences: Option<u64>,
    /// How many pools it may have (counted alike).
    pub max_pools: Option<u64>,
    /// The scope of its shard keys (`None`: the server's secret itself).
    pub shard_key_scope: Option<String>,
    /// The client certificate that names it, if any.
    pub cert: Option<CertPin>,
    /// Quotas on what it makes beside live sequences and pools (tombstones,
    /// worker leases, pool members, open tickets); see [`Limits`].
    pub limits: Limits,
}

/// What a client certificate must show to name a principal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CertPin {
    /// The subject, as [`crate::tls`] writes it.
    pub subject: Option<String>,
    /// The issuer's DN, written as subjects are.
    pub issuer: Option<String>,
    /// The SHA-256 digest of the certificate's DER.
    pub sha256: Option<[u8; 32]>,
}

impl CertPin {
    /// Whether a certificate of this subject, issuer and digest shows it.
    fn matches(&self, subject: &str, issuer: &str, sha256: &[u8; 32]) -> bool {
        self.subject.as_deref().is_none_or(|s| s == subject)
            && self.issuer.as_deref().is_none_or(|i| i == issuer)
            && self.sha256.as_ref().is_none_or(|d| d == sha256)
    }

    /// Whether only the subject is pinned.
    fn subject_only(&self) -> bool {
        self.issuer.is_none() && self.sha256.is_none()
    }
}

/// A principal's bounds on what it can make besides live sequences and
/// pools, each an access-file key with a default ([`Limits::DEFAULT`]). The
/// server's own principals ([`Principal::root`]) have none, nor by default
/// a principal with `admin` on `"*"` (an operator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Drops of sequences and pools a rolling hour (`max_drops_per_hour`):
    /// each drop leaves a tombstone row for ever.
    pub max_drops_per_hour: Option<u64>,
    /// Worker leases held at once, over every group (`max_worker_leases`).
    pub max_worker_leases: Option<u64>,
    /// Members of every pool it may admin, together (`max_pool_members`).
    pub max_pool_members: Option<u64>,
    /// Tickets it took and neither committed, released nor let expire
    /// (`max_open_tickets`).
    pub max_open_tickets: Option<u64>,
}

impl Limits {
    /// The bounds of a principal of the access file that names none.
    pub const DEFAULT: Limits = Limits {
        max_drops_per_hour: Some(10),
        max_worker_leases: Some(16),
        max_pool_members: Some(1_000_000),
        max_open_tickets: Some(1_000),
    };
    /// No bounds (the server's own principals).
    pub const NONE: Limits = Limits {
        max_drops_per_hour: None,
        max_worker_leases: None,
        max_pool_members: None,
        max_open_tickets: None,
    };
}

impl Principal {
    /// A principal with every right and no limits.
    pub fn root(name: &str) -> Principal {
        Principal {
            name: name.to_owned(),
            grants: vec![Grant::everything()],
            rate: None,
            max_sequences: None,
            max_pools: None,
            shard_key_scope: None,
            cert: None,
            limits: Limits::NONE,
        }
    }

    /// Whether it may do `action` on `name`.
    pub fn may(&self, action: Action, name: &str) -> bool {
        self.grants
            .iter()
            .any(|g| g.allows(action) && g.names.covers(name))
    }

    /// The names it may do `action` on, as the fewest prefixes and exact
    /// names that cover them: a prefix that another covers, and an exact
    /// name a prefix covers, are left out, so that counting each once
    /// counts every name once.
    pub fn scope(&self, action: Action) -> NameScope {
        let names: Vec<&Names> = self
            .grants
            .iter()
            .filter(|g| g.allows(action))
            .map(|g| &g.names)
            .collect();
        let mut prefixes: Vec<String> = names
            .iter()
            .filter_map(|n| match n {
                Names::Prefix(p) => Some(p.clone()),
                Names::Exact(_) => None,
            })
            .collect();
        // Shortest first: a prefix is kept unless a kept one covers it.
        prefixes.sort();
        prefixes.dedup();
        let mut kept: Vec<String> = Vec::new();
        for p in prefixes {
            if !kept.iter().any(|k| p.starts_with(k.as_str())) {
                kept.push(p);
            }
        }
        let mut exact: Vec<String> = names
            .iter()
            .filter_map(|n| match n {
                Names::Exact(e) if !kept.iter().any(|k| e.starts_with(k.as_str())) => {
                    Some(e.clone())
                }
                _ => None,
            })
            .collect();
        exact.sort();
        exact.dedup();
        NameScope {
            prefixes: kept,
            exact,
        }
    }

    /// Whether it may do `action` on the fixed name `name` ([`is_fixed`]):
    /// only a grant that names it exactly, or `"*"`, covers it.
    pub fn may_exactly(&self, action: Action, name: &str) -> bool {
        self.grants.iter().any(|g| {
            g.allows(action)
                && (g.names.is_everything() || g.names == Names::Exact(name.to_owned()))
        })
    }

    /// Whether it may do `action` on every name (a `"*"` grant).
    pub fn may_everywhere(&self, action: Action) -> bool {
        self.grants
            .iter()
            .any(|g| g.allows(action) && g.names.is_everything())
    }

    /// Whether it may do `action` on some name.
    pub fn may_somewhere(&self, action: Action) -> bool {
        self.grants.iter().any(|g| g.allows(action))
    }
}

/// The principals of an access file, by credential.
#[derive(Debug, Clone, Default)]
pub struct AccessFile {
    principals: Vec<Arc<Principal>>,
    by_digest: HashMap<[u8; 32], usize>,
    /// Principals known by a client certificate, by index.
    by_cert: Vec<usize>,
}

/// One `[[principal]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrincipal {
    name: String,
    #[serde(default)]
    token_sha256: Option<OneOrMany>,
    #[serde(default)]
    client_cert_subject: Option<String>,
    #[serde(default)]
    client_cert_issuer: Option<String>,
    #[serde(default)]
    client_cert_sha256: Option<String>,
    #[serde(default)]
    shard_key_scope: Option<String>,
    #[serde(default)]
    grants: Vec<RawGrant>,
    #[serde(default)]
    rate: Option<u32>,
    #[serde(default)]
    burst: Option<u32>,
    #[serde(default)]
    max_sequences: Option<u64>,
    #[serde(default)]
    max_pools: Option<u64>,
    #[serde(default)]
    max_drops_per_hour: Option<u64>,
    #[serde(default)]
    max_worker_leases: Option<u64>,
    #[serde(default)]
    max_pool_members: Option<u64>,
    #[serde(default)]
    max_open_tickets: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrant {
    names: String,
    actions: Vec<Action>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    principal: Vec<RawPrincipal>,
}

/// The hex SHA-256 digest of a token, as `token_sha256` takes it (what
/// `keysmith access hash` prints).
pub fn token_digest_hex(token: &[u8]) -> String {
    Sha256::digest(token)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl AccessFile {
    /// Reads and checks an access file.
    ///
    /// # Errors
    /// A message naming the file and what is wrong in it: unreadable, not
    /// TOML, an unknown key, a principal without a credential, a digest that
    /// is not 64 hex digits, a credential or name used twice, a bad `names`
    /// pattern, a grant without actions, a zero rate.
    ///
    /// The file is read until two readings in a row are the same, so that a
    /// file being written is never applied half way (a half-written file can
    /// be valid TOML with fewer principals or grants).
    pub fn load(path: &Path) -> Result<AccessFile, String> {
        let text = read_stable(|| std::fs::read(path))
            .map_err(|e| format!("cannot read the access file {}: {e}", path.display()))?;
        let text = String::from_utf8(text)
            .map_err(|_| format!("the access file {} is not UTF-8 text", path.display()))?;
        AccessFile::parse(&text).map_err(|e| format!("access file {}: {e}", path.display()))
    }

    /// Parses the text of an access file; see [`AccessFile::load`].
    ///
    /// # Errors
    /// As [`AccessFile::load`], without the file's name.
    pub fn parse(text: &str) -> Result<AccessFile, String> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            format!("{e}; the file holds [[principal]] tables with name, token_sha256 or client_cert_subject, and grants")
        })?;
        let mut file = AccessFile::default();
        let mut names = HashSet::new();
        for p in raw.principal {
            file.add(p, &mut names)?;
        }
        Ok(file)
    }

    fn add(&mut self, p: RawPrincipal, names: &mut HashSet<String>) -> Result<(), String> {
        let who = p.name.clone();
        if who.trim().is_empty() {
            return Err("a [[principal]] has an empty name: give each one a name".into());
        }
        if who == TOKEN_PRINCIPAL || who == ANYONE {
            return Err(format!(
                "principal {who:?}: that name is the server's own (the token of $KEYSMITH_TOKEN is {TOKEN_PRINCIPAL:?}, a server without auth {ANYONE:?}); pick another"
            ));
        }
        if !names.insert(who.clone()) {
            return Err(format!("principal {who:?} is named twice: each name once"));
        }
        let digests = match p.token_sha256 {
            None => Vec::new(),
            Some(OneOrMany::One(d)) => vec![d],
            Some(OneOrMany::Many(ds)) => ds,
        };
        let by_cert = p.client_cert_subject.is_some() || p.client_cert_sha256.is_some();
        if digests.is_empty() && !by_cert {
            return Err(format!(
                "principal {who:?} has neither token_sha256 nor client_cert_subject: give it one (`keysmith access new {who}` makes a token and its digest)"
            ));
        }
        if p.client_cert_issuer.is_some() && !by_cert {
            return Err(format!(
                "principal {who:?} has client_cert_issuer but no client_cert_subject or client_cert_sha256: the issuer only narrows a certificate that names the principal"
            ));
        }
        let shard_key_scope = match p.shard_key_scope {
            Some(s) if s.trim().is_empty() || s.chars().any(char::is_control) => {
                return Err(format!(
                    "principal {who:?}: shard_key_scope must be a non-empty name without control characters (e.g. the team's name)"
                ));
            }
            s => s,
        };
        let mut grants = Vec::new();
        for g in p.grants {
            let names = Names::parse(&g.names).map_err(|e| format!("principal {who:?}: {e}"))?;
            if g.actions.is_empty() {
                return Err(format!(
                    "principal {who:?}: the grant on {:?} has no actions: list some of \"use\", \"read\", \"admin\"",
                    g.names
                ));
            }
            let actions = g.actions.iter().fold(0, |bits, a| bits | a.bit());
            grants.push(Grant { names, actions });
        }
        let rate = match (p.rate, p.burst) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(format!(
                    "principal {who:?} has a burst but no rate: add `rate = N` (requests a second)"
                ));
            }
            (Some(r), b) => {
                let per_second = NonZeroU32::new(r).ok_or_else(|| {
                    format!("principal {who:?}: rate must be at least 1 request a second (leave it out for no limit)")
                })?;
                let burst = NonZeroU32::new(b.unwrap_or(r))
                    .ok_or_else(|| format!("principal {who:?}: burst must be at least 1"))?;
                Some(Rate { per_second, burst })
            }
        };
        let index = self.principals.len();
        for d in &digests {
            let digest = parse_digest(d).ok_or_else(|| {
                format!(
                    "principal {who:?}: token_sha256 must be 64 hex digits (`keysmith access hash` prints one), got {} characters",
                    d.len()
                )
            })?;
            if digest == <[u8; 32]>::from(Sha256::digest(b"")) {
                return Err(format!(
                    "principal {who:?}: token_sha256 is the digest of the empty string, which no token may be; make a token with `keysmith access new {who}`"
                ));
            }
            if self.by_digest.insert(digest, index).is_some() {
                return Err(format!(
                    "principal {who:?}: a token digest is listed twice (also under another principal?): each token names one principal"
                ));
            }
        }
        let cert = if by_cert {
            let pin = CertPin {
                subject: p.client_cert_subject,
                issuer: p.client_cert_issuer,
                sha256: p
                    .client_cert_sha256
                    .as_deref()
                    .map(|d| {
                        parse_digest(&d.replace(':', "")).ok_or_else(|| {
                            format!(
                                "principal {who:?}: client_cert_sha256 must be the 64 hex digits of the SHA-256 of the certificate's DER (`openssl x509 -in CERT -outform DER | sha256sum`)"
                            )
                        })
                    })
                    .transpose()?,
            };
            for (what, v) in [
                ("client_cert_subject", &pin.subject),
                ("client_cert_issuer", &pin.issuer),
            ] {
                if v.as_deref().is_some_and(|v| v.trim().is_empty()) {
                    return Err(format!("principal {who:?}: {what} is empty"));
                }
            }
            // Two principals one certificate could show: which one it names
            // would be a guess.
            for &other in &self.by_cert {
                let theirs = self.principals[other].cert.as_ref();
                if theirs.is_some_and(|t| overlap(t, &pin)) {
                    return Err(format!(
                        "principal {who:?}: a certificate could name both it and principal {:?} (the same client_cert_subject, and no client_cert_issuer or client_cert_sha256 that tells them apart): pin each one's issuer or digest",
                        self.principals[other].name
                    ));
                }
            }
            self.by_cert.push(index);
            Some(pin)
        } else {
            None
        };
        // An operator (admin on every name) has no default bounds: it may
        // drop every tenant's names anyway.
        let operator = grants
            .iter()
            .any(|g| g.allows(Action::Admin) && g.names.is_everything());
        let d = if operator {
            Limits::NONE
        } else {
            Limits::DEFAULT
        };
        self.principals.push(Arc::new(Principal {
            name: who,
            grants,
            rate,
            max_sequences: p.max_sequences,
            max_pools: p.max_pools,
            shard_key_scope,
            cert,
            limits: Limits {
                max_drops_per_hour: p.max_drops_per_hour.or(d.max_drops_per_hour),
                max_worker_leases: p.max_worker_leases.or(d.max_worker_leases),
                max_pool_members: p.max_pool_members.or(d.max_pool_members),
                max_open_tickets: p.max_open_tickets.or(d.max_open_tickets),
            },
        }));
        Ok(())
    }

    /// Adds the principal of the server's own token, [`TOKEN_PRINCIPAL`],
    /// with every right.
    ///
    /// # Errors
    /// When the access file already lists that token.
    pub fn with_token(mut self, digest: [u8; 32]) -> Result<AccessFile, String> {
        let index = self.principals.len();
        if self.by_digest.insert(digest, index).is_some() {
            return Err(
                "the server's token ($KEYSMITH_TOKEN or --token-file) is also in the access file: keep it in one place"
                    .into(),
            );
        }
        self.principals
            .push(Arc::new(Principal::root(TOKEN_PRINCIPAL)));
        Ok(self)
    }

    /// The principals, in file order.
    pub fn principals(&self) -> &[Arc<Principal>] {
        &self.principals
    }

    /// The principal whose token has this SHA-256 digest.
    pub fn by_token_digest(&self, digest: &[u8; 32]) -> Option<&Arc<Principal>> {
        self.by_digest.get(digest).map(|&i| &self.principals[i])
    }

    /// The principal named `name`.
    pub fn by_name(&self, name: &str) -> Option<&Arc<Principal>> {
        self.principals.iter().find(|p| p.name == name)
    }

    /// The principal a verified client certificate names: the one whose
    /// pins (subject, issuer, digest) it shows. With `several_cas` (the
    /// client CA bundle holds more than one CA), a principal pinned by
    /// subject only is not named by any certificate: a CA could sign any
    /// subject.
    ///
    /// # Errors
    /// Why no principal is named, and what to do.
    pub fn by_cert(
        &self,
        subject: &str,
        issuer: &str,
        sha256: &[u8; 32],
        several_cas: bool,
    ) -> Result<&Arc<Principal>, String> {
        let shows = |p: &&Arc<Principal>, by_digest: bool| {
            p.cert.as_ref().is_some_and(|c| {
                c.sha256.is_some() == by_digest && c.matches(subject, issuer, sha256)
            })
        };
        // A digest pin is the most specific: it wins.
        let mut pinned = self.by_cert.iter().map(|&i| &self.principals[i]);
        let found = pinned
            .clone()
            .find(|p| shows(p, true))
            .or_else(|| pinned.find(|p| shows(p, false)));
        match found {
            Some(p) if several_cas && p.cert.as_ref().is_some_and(CertPin::subject_only) => {
                Err(format!(
                    "principal {:?} is known by its certificate's subject only, and the server trusts several client CAs: the operator must add client_cert_issuer to it",
                    p.name
                ))
            }
            Some(p) => Ok(p),
            None => Err(format!(
                "the client certificate (subject {subject:?}, issuer {issuer:?}) names no principal of this server; send `Authorization: Bearer TOKEN` or ask for a principal with client_cert_subject = {subject:?} and client_cert_issuer = {issuer:?}"
            )),
        }
    }

    /// The principal named by a client certificate's subject, when one is
    /// pinned by that subject alone.
    pub fn by_cert_subject(&self, subject: &str) -> Option<&Arc<Principal>> {
        self.by_cert.iter().map(|&i| &self.principals[i]).find(|p| {
            p.cert
                .as_ref()
                .is_some_and(|c| c.subject_only() && c.subject.as_deref() == Some(subject))
        })
    }

    /// Whether any principal is known by a client certificate.
    pub fn has_cert_principals(&self) -> bool {
        !self.by_cert.is_empty()
    }

    /// Checks the principals known by a client certificate against the
    /// server's client CA bundle: `cas` the subjects of its CAs (`None`: the
    /// server asks for no client certificate).
    ///
    /// # Errors
    /// A message naming the principal and what to add: a principal by
    /// certificate without a client CA, or one pinned by subject only when
    /// the bundle holds several CAs.
    pub fn check_client_ca(&self, cas: Option<&[String]>) -> Result<(), String> {
        let Some(first) = self.by_cert.first() else {
            return Ok(());
        };
        let Some(cas) = cas else {
            return Err(format!(
                "principal {:?} is known by a client certificate, but the server asks for none: start it with --tls-cert, --tls-key and --client-ca (the CA bundle that signs the clients' certificates), or give the principal a token_sha256",
                self.principals[*first].name
            ));
        };
        if cas.len() > 1 {
            for &i in &self.by_cert {
                let p = &self.principals[i];
                if let Some(CertPin {
                    issuer: Some(issuer),
                    sha256: None,
                    ..
                }) = &p.cert
                {
                    let same = cas.iter().filter(|c| *c == issuer).count();
                    if same > 1 {
                        return Err(format!(
                            "principal {:?} pins client_cert_issuer = {issuer:?}, but {same} CAs of the client CA bundle have that name, so the pin cannot tell them apart: give the CAs distinct names, or pin client_cert_sha256",
                            p.name
                        ));
                    }
                }
                if p.cert.as_ref().is_some_and(CertPin::subject_only) {
                    return Err(format!(
                        "principal {:?} is known by its certificate's subject only, but the client CA bundle holds {} CAs ({}), and any of them could sign that subject: add client_cert_issuer = \"DN of the CA that signs its certificate\" (or client_cert_sha256)",
                        p.name,
                        cas.len(),
                        cas.iter()
                            .map(|c| format!("{c:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        Ok(())
    }

    /// What is allowed but likely not meant, one line each: a prefix
    /// without a separator before its `*` (`team-a*` also covers
    /// `team-ab...`); several principals sharing the server's own shard-key
    /// secret.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.principals {
            for g in &p.grants {
                if let Names::Prefix(prefix) = &g.names
                    && !prefix.is_empty()
                    && !prefix.ends_with(SEPARATORS)
                {
                    out.push(format!(
                        "principal {:?}: `names = \"{prefix}*\"` has no separator before its `*`, so it also covers names such as \"{prefix}x...\" of others; write e.g. \"{prefix}-*\" or \"{prefix}/*\"",
                        p.name
                    ));
                }
            }
        }
        let unscoped: Vec<&str> = self
            .principals
            .iter()
            .filter(|p| {
                p.shard_key_scope.is_none()
                    && (p.may_exactly(Action::Use, SHARD_KEYS)
                        || p.may_exactly(Action::Admin, SHARD_KEYS))
            })
            .map(|p| p.name.as_str())
            .collect();
        if unscoped.len() > 1 {
            out.push(format!(
                "principals {} share the server's own shard-key secret: each can decode and mint the others' shard keys; give each team a shard_key_scope",
                unscoped.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
            ));
        }
        out
    }
}

/// Whether one certificate could show both pins with neither more
/// specific: a digest pin wins over subject and issuer pins.
fn overlap(a: &CertPin, b: &CertPin) -> bool {
    match (&a.sha256, &b.sha256) {
        (Some(x), Some(y)) => x == y,
        (Some(_), None) | (None, Some(_)) => false,
        (None, None) => {
            let differ = |x: &Option<String>, y: &Option<String>| matches!((x, y), (Some(x), Some(y)) if x != y);
            !(differ(&a.subject, &b.subject) || differ(&a.issuer, &b.issuer))
        }
    }
}

/// The bytes `read` gives twice in a row: a file being written while it is
/// read gives different bytes, and is read again (at most 50 times, 20 ms
/// apart).
///
/// # Errors
/// As `read`, or when the readings never settle.
pub(crate) fn read_stable(
    mut read: impl FnMut() -> std::io::Result<Vec<u8>>,
) -> std::io::Result<Vec<u8>> {
    let mut last = read()?;
    for _ in 0..50 {
        let now = read()?;
        if now == last {
            return Ok(now);
        }
        last = now;
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(std::io::Error::other(
        "it kept changing while it was read; write the new file beside it and rename it over the old one",
    ))
}

/// The principal a request runs as.
#[derive(Debug, Clone)]
pub struct Caller(pub Arc<Principal>);

impl Caller {
    /// The caller of a server without authentication: every right. Made
    /// once per process (every request of such a server is this caller).
    pub fn anyone() -> Caller {
        static ANYONE_CALLER: std::sync::LazyLock<Arc<Principal>> =
            std::sync::LazyLock::new(|| Arc::new(Principal::root(ANYONE)));
        Caller(ANYONE_CALLER.clone())
    }
}

tokio::task_local! {
    static CALLER: Caller;
}

/// Runs `f` as `caller`: [`visible`] answers for it.
pub(crate) async fn scope<F: std::future::Future>(caller: Caller, f: F) -> F::Output {
    CALLER.scope(caller, f).await
}

/// Whether the request being answered may read `name` (true outside a
/// request): lists, the status page, `/metrics` and "did you mean" hints
/// keep only such names.
pub(crate) fn visible(name: &str) -> bool {
    CALLER
        .try_with(|c| c.0.may(Action::Read, name))
        .unwrap_or(true)
}

/// The name of the principal the request being answered runs as (`None`
/// outside a request): whose share of per-name metric series a handle
/// opened now takes.
pub(crate) fn caller_name() -> Option<String> {
    CALLER.try_with(|c| c.0.name.clone()).ok()
}

/// What kind of object a route acts on (and an audit line names): its
/// word on the wire ([`ObjectKind::as_str`], the serde name) is the same in
/// audit lines, metric labels and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// A sequence (`/v1/sequences`).
    Sequence,
    /// A value pool (`/v1/pools`).
    Pool,
    /// A worker group (`/v1/workers`, and the ids of `/v1/ids`).
    WorkerGroup,
    /// The host counter (`/v1/counters`).
    Counter,
    /// Shard keys (`/v1/shard-keys`).
    ShardKeys,
    /// The server itself: status, metrics, the API document.
    Server,
    /// Whatever bears the name: a fence moves sequences, pools and worker
    /// floors alike.
    #[serde(rename = "any")]
    AnyKind,
    /// The access file, whose reloads the audit trail records (no route
    /// acts on it).
    AccessFile,
}

impl ObjectKind {
    /// The word audit lines use.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Sequence => "sequence",
            ObjectKind::Pool => "pool",
            ObjectKind::WorkerGroup => "worker_group",
            ObjectKind::Counter => "counter",
            ObjectKind::ShardKeys => "shard_keys",
            ObjectKind::Server => "server",
            ObjectKind::AnyKind => "any",
            ObjectKind::AccessFile => "access_file",
        }
    }
}

/// Where a route's object name comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The path parameter `{name}` or `{group}`.
    Path,
    /// The JSON body's `name` (`{"all": true}`: every name).
    Body,
    /// The server's ids worker group.
    IdsGroup,
    /// The path's `{group}`, to lease from: the server's ids worker group
    /// is its own, and leasing it directly needs `admin` on `"*"`.
    LeaseGroup,
    /// A fixed name ([`COUNTERS`], [`SHARD_KEYS`]).
    Fixed(&'static str),
    /// Names are filtered in the answer: the action on some name suffices.
    Listed,
    /// Any principal the server knows (the API document).
    Known,
}

/// The grant a route needs: an action on an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// The action.
    pub action: Action,
    /// The kind of object.
    pub kind: ObjectKind,
    /// Where its name is.
    pub target: Target,
}

/// What a route asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Nothing: the probes `/healthz`, `/livez`, `/readyz`.
    Open,
    /// A grant.
    Grant(Need),
    /// The route does not take this method (answered 405): also what a
    /// route missing from the table gets, so that a route is never open by
    /// omission.
    NoSuchMethod,
}

/// What `method` on the route `template` needs: the one table of the API's
/// grants.
pub fn requirement(method: &Method, template: &str) -> Requirement {
    match need(method, template) {
        Some(n) => Requirement::Grant(n),
        None if matches!(template, "/healthz" | "/livez" | "/readyz") => Requirement::Open,
        None => Requirement::NoSuchMethod,
    }
}

fn need(method: &Method, template: &str) -> Option<Need> {
    use Action::{Admin, Read, Use};
    use ObjectKind as K;
    use Target as T;
    let n = |action, kind, target| {
        Some(Need {
            action,
            kind,
            target,
        })
    };
    let (get, post, patch, delete) = (
        *method == Method::GET || *method == Method::HEAD,
        *method == Method::POST,
        *method == Method::PATCH,
        *method == Method::DELETE,
    );
    match template {
        "/healthz" | "/livez" | "/readyz" => None,
        "/" | "/v1/status" | "/metrics" if get => n(Read, K::Server, T::Listed),
        "/openapi.json" if get => n(Read, K::Server, T::Known),
        "/v1/sequences" if post => n(Admin, K::Sequence, T::Body),
        "/v1/sequences" if get => n(Read, K::Sequence, T::Listed),
        "/v1/sequences/{name}" if get => n(Read, K::Sequence, T::Path),
        "/v1/sequences/{name}" if patch || delete => n(Admin, K::Sequence, T::Path),
        "/v1/sequences/{name}/rotate-key" if post => n(Admin, K::Sequence, T::Path),
        "/v1/sequences/{name}/next"
        | "/v1/sequences/{name}/reserve"
        | "/v1/sequences/{name}/release"
        | "/v1/sequences/{name}/tickets"
        | "/v1/sequences/{name}/tickets/{ticket}/commit"
        | "/v1/sequences/{name}/tickets/{ticket}/release"
        | "/v1/sequences/{name}/tickets/commit"
        | "/v1/sequences/{name}/tickets/release"
        | "/v1/sequences/{name}/decode"
            if post =>
        {
            n(Use, K::Sequence, T::Path)
        }
        "/v1/sequences/{name}/parse" if post => n(Read, K::Sequence, T::Path),
        "/v1/pools" if post => n(Admin, K::Pool, T::Body),
        "/v1/pools" if get => n(Read, K::Pool, T::Listed),
        "/v1/pools/{name}" if get => n(Read, K::Pool, T::Path),
        "/v1/pools/{name}" if delete => n(Admin, K::Pool, T::Path),
        "/v1/pools/{name}/next" if post => n(Use, K::Pool, T::Path),
        "/v1/fence" if post => n(Admin, K::AnyKind, T::Body),
        "/v1/counters/next" if post => n(Use, K::Counter, T::Fixed(COUNTERS)),
        "/v1/shard-keys/encode" if post => n(Admin, K::ShardKeys, T::Fixed(SHARD_KEYS)),
        "/v1/shard-keys/decode" if post => n(Use, K::ShardKeys, T::Fixed(SHARD_KEYS)),
        "/v1/ids/next" if post => n(Use, K::WorkerGroup, T::IdsGroup),
        "/v1/ids/bounds" | "/v1/ids/{id}" if get => n(Use, K::WorkerGroup, T::IdsGroup),
        "/v1/workers/{group}" if get => n(Read, K::WorkerGroup, T::Path),
        "/v1/workers/{group}/lease"
        | "/v1/workers/{group}/lease/{token}/renew"
        | "/v1/workers/{group}/lease/{token}/release"
        | "/v1/workers/{group}/lease/renew"
        | "/v1/workers/{group}/lease/release"
            if post =>
        {
            n(Use, K::WorkerGroup, T::LeaseGroup)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An object kind's word is its serde name, the same everywhere.
    #[test]
    fn object_kinds_serialize_as_their_words() {
        use ObjectKind as K;
        for k in [
            K::Sequence,
            K::Pool,
            K::WorkerGroup,
            K::Counter,
            K::ShardKeys,
            K::Server,
            K::AnyKind,
            K::AccessFile,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str(), "{k:?}");
        }
    }

    fn digest(t: &str) -> String {
        token_digest_hex(t.as_bytes())
    }

    #[test]
    fn parses_principals_and_grants() {
        let text = format!(
            r#"
            [[principal]]
            name = "team-a"
            token_sha256 = "{}"
            grants = [ {{ names = "team-a/*", actions = ["use", "read"] }} ]
            rate = 10
            [[principal]]
            name = "ops"
            token_sha256 = ["{}", "{}"]
            client_cert_subject = "CN=ops"
            grants = [ {{ names = "*", actions = ["use", "read", "admin"] }} ]
            "#,
            digest("a"),
            digest("o1"),
            digest("o2")
        );
        let f = AccessFile::parse(&text).unwrap();
        let d = |t: &str| -> [u8; 32] { Sha256::digest(t.as_bytes()).into() };
        let a = f.by_token_digest(&d("a")).unwrap();
        assert_eq!(a.name, "team-a");
        assert!(a.may(Action::Use, "team-a/orders"));
        assert!(!a.may(Action::Use, "team-b/orders"));
        assert!(!a.may(Action::Admin, "team-a/orders"));
        assert!(!a.may_everywhere(Action::Read));
        assert_eq!(a.rate.unwrap().burst.get(), 10);
        for t in ["o1", "o2"] {
            assert_eq!(f.by_token_digest(&d(t)).unwrap().name, "ops");
        }
        assert_eq!(f.by_cert_subject("CN=ops").unwrap().name, "ops");
        assert!(f.by_token_digest(&d("nobody")).is_none());
        assert!(
            f.by_token_digest(&d("o1"))
                .unwrap()
                .may_everywhere(Action::Admin)
        );
    }

    /// A scope covers each name once: nested prefixes and names under a
    /// prefix are left out; other actions' grants are not in it.
    #[test]
    fn a_scope_is_the_fewest_prefixes_and_names_that_cover_the_grants() {
        let text = format!(
            r#"
            [[principal]]
            name = "t"
            token_sha256 = "{}"
            grants = [
              {{ names = "a/x/*", actions = ["admin"] }},
              {{ names = "a/*", actions = ["admin", "use"] }},
              {{ names = "a/y", actions = ["admin"] }},
              {{ names = "b", actions = ["admin"] }},
              {{ names = "b", actions = ["admin"] }},
              {{ names = "ab*", actions = ["admin"] }},
              {{ names = "c/*", actions = ["use"] }},
            ]
            "#,
            digest("t")
        );
        let f = AccessFile::parse(&text).unwrap();
        let t = f.by_token_digest(&Sha256::digest(b"t").into()).unwrap();
        let s = t.scope(Action::Admin);
        assert_eq!(s.prefixes, ["a/", "ab"]);
        assert_eq!(s.exact, ["b"]);
        assert_eq!(t.scope(Action::Use).prefixes, ["a/", "c/"]);
        let root = Principal::root("root").scope(Action::Admin);
        assert_eq!((root.prefixes, root.exact), (vec![String::new()], vec![]));
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let ok = digest("x");
        let cases = [
            ("[[principal]]\nname = \"a\"\n", "neither token_sha256"),
            (
                "[[principal]]\nname = \"a\"\ntoken_sha256 = \"abc\"\n",
                "64 hex digits",
            ),
            (
                &format!(
                    "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{ok}\"\n[[principal]]\nname = \"a\"\nclient_cert_subject = \"CN=a\"\n"
                ),
                "named twice",
            ),
            (
                &format!(
                    "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{ok}\"\n[[principal]]\nname = \"b\"\ntoken_sha256 = \"{ok}\"\n"
                ),
                "listed twice",
            ),
            (
                &format!(
                    "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{ok}\"\ngrants = [{{ names = \"a*b\", actions = [\"use\"] }}]\n"
                ),
                "trailing `*`",
            ),
            (
                &format!(
                    "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{ok}\"\ngrants = [{{ names = \"a\", actions = [] }}]\n"
                ),
                "no actions",
            ),
            (
                &format!(
                    "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{ok}\"\ngrants = [{{ names = \"a\", actions = [\"write\"] }}]\n"
                ),
                "unknown variant",
            ),
            (
                &format!("[[principal]]\nname = \"a\"\ntoken_sha256 = \"{ok}\"\nrate = 0\n"),
                "at least 1",
            ),
            (
                &format!("[[principal]]\nname = \"a\"\ntoken = \"{ok}\"\n"),
                "unknown field",
            ),
            (
                &format!("[[principal]]\nname = \"token\"\ntoken_sha256 = \"{ok}\"\n"),
                "the server's own",
            ),
            (
                "[[principal]]\nname = \"a\"\nclient_cert_subject = \"CN=x\"\n[[principal]]\nname = \"b\"\nclient_cert_subject = \"CN=x\"\nclient_cert_issuer = \"CN=ca\"\n",
                "could name both",
            ),
            (
                "[[principal]]\nname = \"a\"\nclient_cert_issuer = \"CN=ca\"\ntoken_sha256 = \"00\"\n",
                "no client_cert_subject",
            ),
            (
                "[[principal]]\nname = \"a\"\nclient_cert_sha256 = \"zz\"\n",
                "SHA-256 of the certificate's DER",
            ),
        ];
        for (text, want) in cases {
            let e = AccessFile::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains("\"x\""), "never echoes a secret: {e}");
        }
    }

    /// A file read while it is being written is read again until two
    /// readings agree: the half written one (fewer grants, valid TOML) is
    /// never the one used.
    #[test]
    fn a_file_is_read_until_two_readings_agree() {
        let half = b"[[principal]]\nname = \"a\"\n".to_vec();
        let full = b"[[principal]]\nname = \"a\"\ntoken_sha256 = \"x\"\n".to_vec();
        let mut readings = vec![half.clone(), full.clone(), full.clone()].into_iter();
        let got = read_stable(|| Ok(readings.next().unwrap())).unwrap();
        assert_eq!(got, full);
        let mut flip = false;
        let e = read_stable(|| {
            flip = !flip;
            Ok(if flip { half.clone() } else { full.clone() })
        })
        .unwrap_err();
        assert!(e.to_string().contains("rename it over"), "{e}");
    }

    #[test]
    fn a_prefix_without_a_separator_and_shared_shard_keys_are_warned_about() {
        let text = format!(
            "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{}\"\ngrants = [{{ names = \"team-a*\", actions = [\"use\"] }}, {{ names = \"team-a/*\", actions = [\"use\"] }}, {{ names = \"shard-keys\", actions = [\"use\"] }}]\n[[principal]]\nname = \"b\"\ntoken_sha256 = \"{}\"\ngrants = [{{ names = \"shard-keys\", actions = [\"admin\"] }}]\n",
            digest("a"),
            digest("b")
        );
        let w = AccessFile::parse(&text).unwrap().warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("team-a*") && w[0].contains("separator"),
            "{w:?}"
        );
        assert!(w[1].contains("shard_key_scope"), "{w:?}");
    }

    #[test]
    fn the_servers_token_is_a_root_principal() {
        let f = AccessFile::default()
            .with_token(Sha256::digest(b"t").into())
            .unwrap();
        let p = f.by_token_digest(&Sha256::digest(b"t").into()).unwrap();
        assert_eq!(p.name, TOKEN_PRINCIPAL);
        assert!(p.may_everywhere(Action::Admin));
        assert!(
            f.with_token(Sha256::digest(b"t").into())
                .unwrap_err()
                .contains("also in the access file")
        );
    }

    #[test]
    fn probes_need_nothing_and_admin_routes_need_admin() {
        for p in ["/healthz", "/livez", "/readyz"] {
            assert_eq!(requirement(&Method::GET, p), Requirement::Open);
        }
        assert_eq!(
            need(&Method::DELETE, "/v1/sequences/{name}")
                .unwrap()
                .action,
            Action::Admin
        );
        assert_eq!(
            need(&Method::GET, "/v1/sequences/{name}").unwrap().action,
            Action::Read
        );
        assert_eq!(
            need(&Method::POST, "/v1/sequences/{name}/reserve")
                .unwrap()
                .action,
            Action::Use
        );
        assert_eq!(
            requirement(&Method::PUT, "/v1/sequences/{name}"),
            Requirement::NoSuchMethod
        );
        assert_eq!(
            requirement(&Method::GET, "/v1/not-a-route"),
            Requirement::NoSuchMethod
        );
    }
}

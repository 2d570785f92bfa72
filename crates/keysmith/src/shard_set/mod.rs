//! Shard sets: which database holds which shard, with each database's own
//! record of its shard id checked on every connection.
//!
//! A [`ShardSet`] maps shard ids (0 to 65535) to store URLs: SQLite files
//! (`sqlite://PATH`) or PostgreSQL databases (`postgres://...`, where the
//! `schema=NAME` parameter lets several shards share one database as
//! schemas). Build it in code ([`ShardSet::add`]) or from a TOML file
//! ([`ShardSet::from_toml_file`]):
//!
//! ```toml
//! [[shard]]
//! id = 1
//! url = "sqlite://orders-1.db"
//!
//! [[shard]]
//! id = 2
//! url = "postgres://app@db2.internal/orders?schema=shard_2"
//! ```
//!
//! # Shards know who they are
//!
//! A database alone does not know which shard it is, so a configuration
//! that swaps two URLs would send shard 4's updates to shard 2's database.
//! [`ShardSet::init`] (`keysmith shard-set init --config FILE`) therefore
//! records each shard's id inside its own database, in the table
//! [`IDENTITY_TABLE`] (for PostgreSQL in the schema the URL names,
//! `keysmith` by default), and every connection the set opens reads it back:
//! a database that records another id, or none, is refused before any
//! statement of the caller runs, with a message naming both ids.
//!
//! # Fan-out
//!
//! [`ShardSet::query_by_keys`] runs a query on every shard a list of keys
//! touches, in parallel, after checking every one of those shards, and
//! merges the answers by key with [`merge_by_key`].

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tokio::task::JoinSet;
use tokio_postgres::config::Host;

use crate::shard_key::{Duplicates, ShardKey, merge_by_key};
use crate::store::Store;
use crate::{Error, Result};

pub(crate) mod conn;

pub use conn::{IDENTITY_TABLE, PostgresShard, ShardConnection, ShardDb, SqliteShard};
use conn::{Recorded, Target};
pub use keysmith_postgres::connect::postgres_error;
pub use keysmith_sqlite::connect::sqlite_error;

/// What a shard set's configuration file looks like, for error messages.
const FORMAT_HELP: &str = "a shard set file is TOML with one [[shard]] table per shard, each with id (0 to 65535) and url (sqlite://PATH or postgres://...)";

/// Shard id -> database, with identity checks on every connection.
///
/// Ids and databases are one to one: adding an id twice, or two URLs that
/// name the same SQLite file or the same PostgreSQL database and schema, is
/// refused. A `ShardSet` holds no connections; each call opens its own.
#[derive(Debug, Clone, Default)]
pub struct ShardSet {
    shards: BTreeMap<u16, Shard>,
}

#[derive(Clone)]
struct Shard {
    /// The URL as configured, any password replaced by `***` (for messages).
    url: String,
    /// The URL for [`crate::store::open`] (an SQLite path made absolute).
    store_url: String,
    /// What identifies the database, for the duplicate check.
    place: String,
    target: Target,
}

impl std::fmt::Debug for Shard {
    /// Leaves out `store_url`, which may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("url", &self.url)
            .field("place", &self.place)
            .field("target", &self.target)
            .finish()
    }
}

/// What [`ShardSet::inspect`] found in one shard's database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardReport {
    /// The shard id the configuration gives.
    pub shard: u16,
    /// The configured URL, any password replaced by `***`.
    pub url: String,
    /// What the database records: `Ok(Some(id))`, `Ok(None)` for nothing
    /// recorded, or why it could not be read.
    pub recorded: std::result::Result<Option<u16>, Error>,
}

impl ShardReport {
    /// Whether the database records exactly the configured id.
    pub fn is_ok(&self) -> bool {
        self.recorded == Ok(Some(self.shard))
    }

    /// What is wrong, in one sentence naming the ids, or `None` if nothing.
    pub fn problem(&self) -> Option<String> {
        let (shard, url) = (self.shard, &self.url);
        match &self.recorded {
            Ok(Some(id)) if *id == shard => None,
            Ok(Some(id)) => Some(format!(
                "shard {shard} ({url}) is the database that records shard id {id}, not {shard}"
            )),
            Ok(None) => Some(format!(
                "shard {shard} ({url}) records no shard id; run `keysmith shard-set init --config FILE` once to record it"
            )),
            Err(e) => Some(format!("shard {shard} ({url}): {}", strip_kind(e))),
        }
    }

    fn is_mismatch(&self) -> bool {
        matches!(self.recorded, Ok(Some(id)) if id != self.shard)
    }
}

/// Said once after the mismatches an error lists.
const MISMATCH_HINT: &str = "the configuration swaps or misplaces databases: give each shard id the url of the database that records that id (`keysmith shard-set check --config FILE` shows them all)";

/// What [`ShardSet::init`] did to one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitAction {
    /// The id was recorded now.
    Recorded,
    /// The database already recorded this id; nothing changed.
    AlreadyRecorded,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    shard: Vec<FileShard>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShard {
    id: i64,
    url: String,
}

impl ShardSet {
    /// An empty set.
    pub fn new() -> ShardSet {
        ShardSet::default()
    }

    /// Adds shard `id` at the store URL `url`: `sqlite://PATH[?busy_timeout_ms=N]`
    /// (a relative path is taken from the current directory) or
    /// `postgres://...[?schema=NAME]`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`], changing nothing, if `id` is in the set
    /// already, if the URL is malformed or of another scheme (etcd and
    /// memory stores cannot be shards), or if another shard has the same
    /// database (the same SQLite file, or PostgreSQL host, port, database
    /// and schema).
    pub fn add(&mut self, id: u16, url: &str) -> Result<()> {
        self.add_relative_to(id, url, None)
    }

    /// [`ShardSet::add`] in builder form.
    ///
    /// # Errors
    /// As [`ShardSet::add`].
    pub fn with_shard(mut self, id: u16, url: &str) -> Result<ShardSet> {
        self.add(id, url)?;
        Ok(self)
    }

    fn add_relative_to(&mut self, id: u16, url: &str, base: Option<&Path>) -> Result<()> {
        if let Some(other) = self.shards.get(&id) {
            return Err(Error::invalid(format!(
                "shard id {id} is given twice ({} and {url}); give every shard its own id",
                other.url
            )));
        }
        let shard = parse_shard(id, url, base)?;
        if let Some((other, _)) = self.shards.iter().find(|(_, s)| s.place == shard.place) {
            return Err(Error::invalid(format!(
                "shards {other} and {id} name the same database ({}); give every shard its own database",
                shard.place
            )));
        }
        self.shards.insert(id, shard);
        Ok(())
    }

    /// A set from TOML text: `[[shard]]` tables with `id` and `url`.
    /// Relative SQLite paths are taken from the current directory.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for malformed TOML, unknown keys, a missing
    /// or out-of-range id, no shards at all, or as [`ShardSet::add`].
    pub fn from_toml(text: &str) -> Result<ShardSet> {
        ShardSet::parse(text, None, "the shard set")
    }

    /// A set from a TOML file (see [`ShardSet::from_toml`]). Relative SQLite
    /// paths are taken from the file's directory, so the file works from
    /// any current directory.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the file cannot be read, or as
    /// [`ShardSet::from_toml`]; messages name the file.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<ShardSet> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::invalid(format!(
                "cannot read the shard set file {}: {e}",
                path.display()
            ))
        })?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        ShardSet::parse(&text, Some(dir), &path.display().to_string())
    }

    fn parse(text: &str, base: Option<&Path>, name: &str) -> Result<ShardSet> {
        let config: FileConfig = toml::from_str(text).map_err(|e| {
            Error::invalid(format!(
                "{name}: {}; {FORMAT_HELP}",
                e.to_string().trim_end()
            ))
        })?;
        if config.shard.is_empty() {
            return Err(Error::invalid(format!(
                "{name} lists no shards; {FORMAT_HELP}"
            )));
        }
        let mut set = ShardSet::new();
        for (i, s) in config.shard.iter().enumerate() {
            let id = u16::try_from(s.id).map_err(|_| {
                Error::invalid(format!(
                    "{name}: shard #{} ({}) has id {}, outside 0 to 65535; shard ids are 16 bits",
                    i + 1,
                    s.url,
                    s.id
                ))
            })?;
            set.add_relative_to(id, &s.url, base)
                .map_err(|e| e.context(name))?;
        }
        Ok(set)
    }

    /// The shard ids, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.shards.keys().copied()
    }

    /// The number of shards.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Whether the set has no shards.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The URL configured for `shard`, any password replaced by `***`
    /// (the form every message shows).
    pub fn url(&self, shard: u16) -> Option<&str> {
        self.shards.get(&shard).map(|s| s.url.as_str())
    }

    fn shard(&self, id: u16) -> Result<&Shard> {
        self.shards.get(&id).ok_or_else(|| {
            Error::invalid(format!(
                "shard {id} is not in the shard set (it has {}); add it to the configuration",
                self.describe_ids()
            ))
        })
    }

    fn describe_ids(&self) -> String {
        let ids: Vec<String> = self.ids().map(|i| i.to_string()).collect();
        if ids.is_empty() {
            "no shards".to_owned()
        } else {
            format!("shards {}", ids.join(", "))
        }
    }

    /// A connection to shard `shard`'s database, after checking that the
    /// database records `shard` as its id.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the shard is not in the set, if its
    /// database records another id (naming both) or none; what opening the
    /// database fails with ([`Error::Unavailable`] for a missing SQLite
    /// file or an unreachable server).
    pub async fn connect(&self, shard: u16) -> Result<ShardConnection> {
        let s = self.shard(shard)?;
        let (conn, recorded) = s
            .target
            .open(shard, &s.url)
            .await
            .map_err(|e| e.context(&format!("shard {shard} ({})", s.url)))?;
        let report = ShardReport {
            shard,
            url: s.url.clone(),
            recorded: Ok(match recorded {
                Recorded::Nothing => None,
                Recorded::Id(id) => Some(id),
            }),
        };
        match report_error(&report) {
            None => Ok(conn),
            Some(e) => Err(e),
        }
    }

    /// The connection for `key`'s shard (see [`ShardSet::connect`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for [`ShardKey::EMPTY`]; as
    /// [`ShardSet::connect`].
    pub async fn connect_for(&self, key: &ShardKey) -> Result<ShardConnection> {
        if key.is_empty() {
            return Err(Error::invalid(
                "the empty shard key names no shard, so it has no connection",
            ));
        }
        self.connect(key.shard()).await
    }

    /// Connections to every shard in `shards`, opened in parallel, returned
    /// in the order asked (duplicates removed, ascending). Every database is
    /// checked before any connection is returned.
    ///
    /// # Errors
    /// One error naming every shard that failed: [`Error::InvalidArgument`]
    /// if any is not in the set or records another id or none (a swap names
    /// both ids), else the [`Error::Unavailable`] of an unreachable one.
    pub async fn connect_many(
        &self,
        shards: impl IntoIterator<Item = u16>,
    ) -> Result<Vec<ShardConnection>> {
        let wanted: BTreeSet<u16> = shards.into_iter().collect();
        for &id in &wanted {
            self.shard(id)?;
        }
        let mut tasks = JoinSet::new();
        for &id in &wanted {
            let set = self.clone();
            tasks.spawn(async move { (id, set.connect(id).await) });
        }
        let mut conns = BTreeMap::new();
        let mut failures = BTreeMap::new();
        while let Some(done) = tasks.join_next().await {
            let (id, result) = done.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            match result {
                Ok(c) => {
                    conns.insert(id, c);
                }
                Err(e) => {
                    failures.insert(id, e);
                }
            }
        }
        if failures.is_empty() {
            return Ok(conns.into_values().collect());
        }
        Err(combine(failures.into_values().collect()))
    }

    /// What each shard's database records, in shard order. Never fails as a
    /// whole: an unreachable shard is reported in its [`ShardReport`].
    pub async fn inspect(&self) -> Vec<ShardReport> {
        let mut tasks = JoinSet::new();
        for (&id, s) in &self.shards {
            let s = s.clone();
            tasks.spawn(async move {
                let recorded = s.target.open(id, &s.url).await.map(|(_, r)| match r {
                    Recorded::Nothing => None,
                    Recorded::Id(i) => Some(i),
                });
                ShardReport {
                    shard: id,
                    url: s.url,
                    recorded,
                }
            });
        }
        let mut reports = Vec::with_capacity(self.shards.len());
        while let Some(done) = tasks.join_next().await {
            reports.push(done.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())));
        }
        reports.sort_by_key(|r| r.shard);
        reports
    }

    /// Checks that every shard's database records its configured id
    /// (`keysmith shard-set check`). Changes nothing.
    ///
    /// # Errors
    /// One error naming every shard that is wrong and the ids involved:
    /// [`Error::InvalidArgument`] for a database that records another id
    /// (a swap names both ids) or none; [`Error::Unavailable`] if the only
    /// problems are unreachable databases.
    pub async fn check(&self) -> Result<Vec<ShardReport>> {
        let reports = self.inspect().await;
        let bad: Vec<Error> = reports.iter().filter_map(report_error).collect();
        if bad.is_empty() {
            Ok(reports)
        } else {
            Err(combine(bad))
        }
    }

    /// Records each shard's id in its own database (`keysmith shard-set
    /// init`), creating SQLite files, PostgreSQL schemas and the
    /// [`IDENTITY_TABLE`] as needed. Running it again is harmless.
    ///
    /// Every shard is read first; if any records a different id, cannot be
    /// reached (or an SQLite file's directory is missing), or two shards
    /// turn out to be one database under two URLs (a symbolic link,
    /// `localhost` and `127.0.0.1`), nothing is written anywhere. Only then are the missing records written, each in
    /// its own transaction; a record that another process wrote meanwhile
    /// with another id is refused, and one that fails midway (a server going
    /// down) leaves the others written: run `init` again.
    ///
    /// # Errors
    /// One error naming every shard at fault (see [`ShardSet::check`]); what
    /// writing fails with.
    pub async fn init(&self) -> Result<Vec<(u16, InitAction)>> {
        let mut tasks = JoinSet::new();
        for (&id, s) in &self.shards {
            let s = s.clone();
            tasks.spawn(async move { (id, s.target.peek(id, &s.url).await) });
        }
        let mut found = BTreeMap::new();
        let mut bad = BTreeMap::new();
        let mut places: BTreeMap<String, u16> = BTreeMap::new();
        let mut results = BTreeMap::new();
        while let Some(done) = tasks.join_next().await {
            let (id, result) = done.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            results.insert(id, result);
        }
        for (id, result) in results {
            let s = &self.shards[&id];
            match result {
                Ok((Recorded::Id(other), _)) if other != id => {
                    let report = ShardReport {
                        shard: id,
                        url: s.url.clone(),
                        recorded: Ok(Some(other)),
                    };
                    if let Some(e) = report_error(&report) {
                        bad.insert(id, e);
                    }
                }
                Ok((r, place)) => {
                    if let Some(first) = places.insert(place.clone(), id) {
                        bad.insert(
                            id,
                            Error::invalid(format!(
                                "shards {first} ({}) and {id} ({}) are one database ({place}); give every shard its own database",
                                self.shards[&first].url, s.url
                            )),
                        );
                    }
                    found.insert(id, r);
                }
                Err(e) => {
                    bad.insert(id, e.context(&format!("shard {id} ({})", s.url)));
                }
            }
        }
        if !bad.is_empty() {
            return Err(
                combine(bad.into_values().collect()).context("nothing was recorded on any shard")
            );
        }
        let mut out = Vec::with_capacity(found.len());
        for (id, r) in found {
            if r == Recorded::Id(id) {
                out.push((id, InitAction::AlreadyRecorded));
                continue;
            }
            let s = &self.shards[&id];
            let before = s
                .target
                .record(id)
                .await
                .map_err(|e| e.context(&format!("shard {id} ({})", s.url)))?;
            match before {
                Recorded::Nothing => out.push((id, InitAction::Recorded)),
                Recorded::Id(same) if same == id => out.push((id, InitAction::AlreadyRecorded)),
                Recorded::Id(other) => {
                    return Err(Error::invalid(format!(
                        "shard {id} ({}): another process recorded shard id {other} there meanwhile; left as it is, check the configuration",
                        s.url
                    )));
                }
            }
        }
        Ok(out)
    }

    /// The keysmith store in shard `shard`'s database ([`crate::store::open`]
    /// on its URL), after checking the database records `shard`. For
    /// sequences that must live beside the shard's data, such as the
    /// per-shard sequences of [`crate::shard_key::ShardRanges`] (see
    /// [`ShardRanges::open_shard_sequence`](crate::shard_key::ShardRanges::open_shard_sequence)).
    ///
    /// # Errors
    /// As [`ShardSet::connect`] and [`crate::store::open`].
    pub async fn open_store(&self, shard: u16) -> Result<Arc<dyn Store>> {
        drop(self.connect(shard).await?);
        let s = self.shard(shard)?;
        crate::store::open(&s.store_url)
            .await
            .map_err(|e| e.context(&format!("shard {shard} ({})", s.url)))
    }

    /// Runs `query` on every shard that `keys` touch, in parallel, and
    /// merges the answers by key.
    ///
    /// The keys are grouped by shard ([`ShardKey::EMPTY`] is skipped);
    /// `query` gets a checked connection to the shard and that shard's keys
    /// (ascending, without duplicates), and returns records; `key` gives a
    /// record's key. Every shard is connected and checked before any query
    /// runs. Each shard's records are sorted by key, then all are merged
    /// with [`merge_by_key`] in shard order; `duplicates` says what happens
    /// to a key returned by two shards.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] before any query runs if a key names a
    /// shard not in the set; as [`ShardSet::connect_many`]; the first
    /// failing query's error (prefixed with its shard; the other queries are
    /// cancelled); [`Error::InvalidArgument`] from [`merge_by_key`] if one
    /// shard returns a key twice, or two shards one key with
    /// [`Duplicates::Reject`].
    pub async fn query_by_keys<T, F, Fut>(
        &self,
        keys: &[ShardKey],
        duplicates: Duplicates,
        key: impl Fn(&T) -> &ShardKey,
        query: F,
    ) -> Result<Vec<T>>
    where
        F: Fn(ShardConnection, Vec<ShardKey>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<T>>> + Send + 'static,
        T: Send + 'static,
    {
        let mut by_shard: BTreeMap<u16, BTreeSet<ShardKey>> = BTreeMap::new();
        for k in keys.iter().filter(|k| !k.is_empty()) {
            by_shard.entry(k.shard()).or_default().insert(k.clone());
        }
        let unknown: Vec<String> = by_shard
            .keys()
            .filter(|id| !self.shards.contains_key(id))
            .map(|id| id.to_string())
            .collect();
        if !unknown.is_empty() {
            return Err(Error::invalid(format!(
                "keys name shard(s) {} that the shard set does not have (it has {}); add them to the configuration",
                unknown.join(", "),
                self.describe_ids()
            )));
        }
        let groups = by_shard
            .into_iter()
            .map(|(id, keys)| (id, keys.into_iter().collect()))
            .collect();
        self.fan_out(groups, duplicates, key, query).await
    }

    /// Runs `query` on every shard of the set, in parallel, and merges the
    /// answers by key: [`ShardSet::query_by_keys`] for a query that is not
    /// about given keys (a listing, a search). `query` gets an empty key
    /// list. Every shard is checked before any query runs.
    ///
    /// # Errors
    /// As [`ShardSet::query_by_keys`].
    pub async fn query_all<T, F, Fut>(
        &self,
        duplicates: Duplicates,
        key: impl Fn(&T) -> &ShardKey,
        query: F,
    ) -> Result<Vec<T>>
    where
        F: Fn(ShardConnection, Vec<ShardKey>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<T>>> + Send + 'static,
        T: Send + 'static,
    {
        let groups = self.ids().map(|id| (id, Vec::new())).collect();
        self.fan_out(groups, duplicates, key, query).await
    }

    async fn fan_out<T, F, Fut>(
        &self,
        groups: BTreeMap<u16, Vec<ShardKey>>,
        duplicates: Duplicates,
        key: impl Fn(&T) -> &ShardKey,
        query: F,
    ) -> Result<Vec<T>>
    where
        F: Fn(ShardConnection, Vec<ShardKey>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<T>>> + Send + 'static,
        T: Send + 'static,
    {
        let conns = self.connect_many(groups.keys().copied()).await?;
        let query = Arc::new(query);
        let mut tasks = JoinSet::new();
        for (conn, (id, shard_keys)) in conns.into_iter().zip(groups) {
            let query = Arc::clone(&query);
            let prefix = format!("shard {id} ({})", conn.url());
            tasks.spawn(async move {
                let out = query(conn, shard_keys).await;
                (id, out.map_err(|e| e.context(&prefix)))
            });
        }
        let mut answers = BTreeMap::new();
        while let Some(done) = tasks.join_next().await {
            let (id, result) = done.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            answers.insert(id, result?);
        }
        let mut merged: Vec<T> = Vec::new();
        for (id, mut records) in answers {
            records.sort_by(|a, b| key(a).cmp(key(b)));
            merged = merge_by_key(merged, records, &key, duplicates)
                .map_err(|e| e.context(&format!("merging shard {id}'s answer")))?;
        }
        Ok(merged)
    }
}

fn report_error(r: &ShardReport) -> Option<Error> {
    let problem = r.problem()?;
    Some(match &r.recorded {
        Err(e) if e.is_retryable() => Error::Unavailable(problem),
        Err(Error::Corrupt(_)) => Error::Corrupt(problem),
        _ if r.is_mismatch() => Error::invalid(format!("{problem}; {MISMATCH_HINT}")),
        _ => Error::invalid(problem),
    })
}

/// One error from several shards' errors: the message joins them; the kind
/// is InvalidArgument if any is (a configuration fault outranks an outage).
fn combine(mut errors: Vec<Error>) -> Error {
    if errors.len() == 1 {
        return errors.remove(0);
    }
    let mut hint = false;
    let text: Vec<String> = errors
        .iter()
        .map(|e| {
            let t = strip_kind(e);
            match t.strip_suffix(MISMATCH_HINT) {
                Some(short) => {
                    hint = true;
                    short.trim_end_matches("; ").to_owned()
                }
                None => t,
            }
        })
        .collect();
    let mut text = format!(
        "{} shards failed the check: {}",
        errors.len(),
        text.join("; ")
    );
    if hint {
        text.push_str("; ");
        text.push_str(MISMATCH_HINT);
    }
    if errors
        .iter()
        .any(|e| matches!(e, Error::InvalidArgument(_)))
    {
        Error::InvalidArgument(text)
    } else if errors.iter().all(Error::is_retryable) {
        Error::Unavailable(text)
    } else {
        Error::Corrupt(text)
    }
}

fn strip_kind(e: &Error) -> String {
    match e {
        Error::InvalidArgument(m) | Error::Unavailable(m) | Error::Corrupt(m) => m.clone(),
        other => other.to_string(),
    }
}

fn parse_shard(id: u16, url: &str, base: Option<&Path>) -> Result<Shard> {
    let shown = crate::store::redact_url(url);
    let bad_scheme = |what: &str| {
        Error::invalid(format!(
            "shard {id}: url {shown:?} {what}; a shard is an SQLite file (sqlite://PATH) or a PostgreSQL database (postgres://USER@HOST/DB[?schema=NAME])"
        ))
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad_scheme("has no scheme"))?;
    match scheme {
        "sqlite" => {
            let (path, busy_timeout) =
                keysmith_sqlite::parse_url(rest).map_err(|e| e.context(&format!("shard {id}")))?;
            if path.as_os_str().is_empty() {
                return Err(bad_scheme("has no path"));
            }
            let path = match base {
                Some(dir) if path.is_relative() => dir.join(&path),
                _ => path,
            };
            let path = normalize(&path)?;
            let query = rest.split_once('?').map(|(_, q)| q).unwrap_or("");
            let mut store_url = format!("sqlite://{}", path.display());
            if !query.is_empty() {
                store_url.push('?');
                store_url.push_str(query);
            }
            Ok(Shard {
                url: url.to_owned(),
                store_url,
                place: format!("the SQLite file {}", path.display()),
                target: Target::Sqlite { path, busy_timeout },
            })
        }
        "postgres" | "postgresql" => {
            let (config, schema) = keysmith_postgres::connect_config(url)
                .map_err(|e| e.context(&format!("shard {id}")))?;
            let hosts: Vec<String> = config
                .get_hosts()
                .iter()
                .map(|h| match h {
                    Host::Tcp(name) => name.clone(),
                    Host::Unix(path) => path.display().to_string(),
                })
                .collect();
            let ports: Vec<String> = match config.get_ports() {
                [] => vec!["5432".to_owned()],
                ports => ports.iter().map(u16::to_string).collect(),
            };
            let db = config
                .get_dbname()
                .or(config.get_user())
                .unwrap_or("")
                .to_owned();
            Ok(Shard {
                url: crate::store::redact_url(url),
                store_url: url.to_owned(),
                place: format!(
                    "PostgreSQL {} port {} database {db:?} schema {schema:?}",
                    hosts.join(","),
                    ports.join(",")
                ),
                target: Target::Postgres {
                    config: Box::new(config),
                    schema,
                },
            })
        }
        "etcd" | "memory" => Err(bad_scheme(&format!(
            "is a {scheme} store, which holds no shard data"
        ))),
        other => Err(bad_scheme(&format!("has the unknown scheme {other:?}"))),
    }
}

/// `path` made absolute (from the current directory) with `.` and `..`
/// resolved lexically, so that two spellings of one file compare equal.
fn normalize(path: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(path).map_err(|e| {
        Error::invalid(format!(
            "cannot make the path {} absolute: {e}",
            path.display()
        ))
    })?;
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

#[async_trait::async_trait]
impl crate::shard_key::ShardStores for ShardSet {
    async fn open_store(&self, shard: u16) -> Result<Arc<dyn Store>> {
        ShardSet::open_store(self, shard).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_files_parse_and_bad_ones_say_what_is_wrong() {
        let set = ShardSet::from_toml(
            "[[shard]]\nid = 1\nurl = \"sqlite://a.db\"\n\n[[shard]]\nid = 65535\nurl = \"postgres://u@h/db?schema=s2\"\n",
        )
        .unwrap();
        assert_eq!(set.ids().collect::<Vec<_>>(), [1, 65535]);
        assert_eq!(set.url(65535), Some("postgres://u@h/db?schema=s2"));
        for (text, needles) in [
            (
                "[[shard]]\nid = 70000\nurl = \"sqlite://a.db\"",
                &["70000", "0 to 65535"][..],
            ),
            (
                "[[shard]]\nid = -1\nurl = \"sqlite://a.db\"",
                &["-1", "0 to 65535"],
            ),
            ("[[shard]]\nid = 1\n", &["url", "[[shard]]"]),
            (
                "[[shard]]\nid = 1\nurl = \"sqlite://a.db\"\nuri = \"x\"",
                &["uri"],
            ),
            ("[[shard]\nid = 1", &["[[shard]]"]),
            ("", &["no shards"]),
            (
                "[[shard]]\nid = 1\nurl = \"sqlite://a.db\"\n[[shard]]\nid = 1\nurl = \"sqlite://b.db\"",
                &["shard id 1 is given twice"],
            ),
            (
                "[[shard]]\nid = 1\nurl = \"sqlite://a.db\"\n[[shard]]\nid = 2\nurl = \"sqlite://./x/../a.db\"",
                &["shards 1 and 2", "same database"],
            ),
            (
                "[[shard]]\nid = 1\nurl = \"postgres://u@h/db?schema=s\"\n[[shard]]\nid = 2\nurl = \"postgres://v@h:5432/db?schema=s\"",
                &["shards 1 and 2", "same database"],
            ),
            (
                "[[shard]]\nid = 1\nurl = \"etcd://h:2379\"",
                &["etcd", "sqlite://PATH"],
            ),
            (
                "[[shard]]\nid = 1\nurl = \"mysql://h/db\"",
                &["unknown scheme", "mysql"],
            ),
            ("[[shard]]\nid = 1\nurl = \"a.db\"", &["no scheme"]),
            (
                "[[shard]]\nid = 1\nurl = \"sqlite://a.db?x=1\"",
                &["shard 1", "busy_timeout_ms"],
            ),
        ] {
            let err = ShardSet::from_toml(text).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{text}: {err:?}");
            let err = err.to_string();
            for n in needles {
                assert!(err.contains(n), "{text:?}: {err:?} lacks {n:?}");
            }
        }
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            crate::store::redact_url(
                "postgres://app:s3cret@h1,h2:5433/db?schema=s&password=x2&sslmode=disable"
            ),
            "postgres://app:***@h1,h2:5433/db?schema=s&password=***&sslmode=disable"
        );
        assert_eq!(
            crate::store::redact_url("postgres://app@h/db"),
            "postgres://app@h/db"
        );
        let set = ShardSet::new()
            .with_shard(1, "postgres://app:s3cret@h/db")
            .unwrap();
        assert_eq!(set.url(1), Some("postgres://app:***@h/db"));
        assert!(!format!("{set:?}").contains("s3cret"));
        let err = ShardSet::new()
            .with_shard(1, "mysql://app:s3cret@h/db")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cret") && err.contains("***"), "{err}");
    }

    #[test]
    fn relative_sqlite_paths_follow_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("shards.toml");
        std::fs::write(&file, "[[shard]]\nid = 3\nurl = \"sqlite://data/s3.db\"\n").unwrap();
        let set = ShardSet::from_toml_file(&file).unwrap();
        let s = set.shard(3).unwrap();
        let want = normalize(&dir.path().join("data/s3.db")).unwrap();
        assert_eq!(s.store_url, format!("sqlite://{}", want.display()));
        let err = ShardSet::from_toml_file(dir.path().join("missing.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.toml"), "{err}");
    }
}

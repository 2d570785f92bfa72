//! The etcd backend: a store that outlives one machine.
//!
//! Built only with the cargo feature `etcd` (its gRPC code is generated at
//! build time, which needs `protoc`). Open it with a URL:
//!
//! ```text
//! etcd://HOST:PORT[,HOST:PORT...][/PREFIX]
//! ```
//!
//! Every key keysmith writes lives under `PREFIX/` (default `keysmith/`), so
//! several keysmith installations, or keysmith and other programs, can share a
//! cluster. Give all members of a cluster: requests go to one endpoint, and
//! when it cannot be reached, has no leader or does not answer in time, the
//! same request goes to the next (each endpoint once per request), and later
//! requests start from the endpoint that answered. A dead endpoint costs a
//! refused connection, or at most [`CONNECT_TIMEOUT`] when it does not
//! refuse, not a long wait.
//!
//! # Layout
//!
//! | key | value |
//! | --- | --- |
//! | `PREFIX/seq/NAME` | the sequence's fixed part, JSON `{"start":..,"max":..,"block":..}` |
//! | `PREFIX/next/NAME` | its next free value, decimal; the key's etcd *version* is [`Row::version`] |
//! | `PREFIX/pools/NAME` | a pool, JSON `{"start":..,"size":..}` |
//! | `PREFIX/pool-members/ENAME/SSSSSSSSSSSSSSSSSSSS` | the member in slot `S` (20 decimal digits), decimal |
//! | `PREFIX/pool-creating/ENAME` | claim held while a large pool is being written |
//! | `PREFIX/locks/ENAME/...` | etcd lock keys of [`Store::reserve_locked`] |
//!
//! `ENAME` is the name with `%` and `/` percent-encoded, so that no name's key
//! range contains another's. A pool of size `N` has `N` slots, `0..N`; slot
//! `s` starts out holding `start + s`, and a swap of `take` for `take + N`
//! keeps the slot, so slot `s` always holds a member equal to `start + s`
//! modulo `N`, and no two slots can hold the same member.
//!
//! # Versions
//!
//! [`Row::version`] is the etcd version of the `next/NAME` key: etcd sets it to
//! 1 when the key is created and adds 1 on every put, exactly the contract's
//! "version 1 on create, bumped by every change of `next`". Every write of
//! `next` is a transaction comparing that version, so a conditional put is a
//! single round trip, and on a mismatch the same transaction returns the
//! current row (no second read).
//!
//! # Strategies
//!
//! - **Optimistic** ([`Store::put_if_version`]): one transaction, compare the
//!   version, put `next`, read the row back; or, on a mismatch, read the row.
//! - **Atomic** ([`Store::reserve_atomic`]): etcd has no server-side
//!   arithmetic, so this is the optimistic transaction run in a loop: read,
//!   compare-and-put, and on a conflict retry from the row the failed
//!   transaction returned. It gives up with [`Error::Contention`] after
//!   [`ATOMIC_ATTEMPTS`] lost races.
//! - **Locked** ([`Store::reserve_locked`]): grants a lease of
//!   [`LOCK_TTL_SECS`] seconds (kept alive while held), takes etcd's lock
//!   `PREFIX/locks/ENAME` with it, reads the row, and writes `next` in a
//!   transaction that also checks the lock key still exists (so a holder whose
//!   lease ran out cannot write) and the version is unchanged (so it is safe
//!   next to optimistic writers). Revoking the lease afterwards deletes the
//!   lock key, which releases the lock. A holder that dies blocks others for at
//!   most the lease TTL.
//!
//! A sequence dropped and created again starts over at version 1, as in
//! every store: a handle that still quotes a version from before the drop
//! may match it. Dropping a sequence that handles still use is the caller's
//! mistake in any backend.
//!
//! # Pools
//!
//! - [`Store::pool_create`] writes a pool of up to 100 members in one
//!   transaction. A larger one (etcd takes at most 128 operations per
//!   transaction) is written in batches under a claim key and published with
//!   its meta key at the end; until then it does not exist for any other
//!   call, and `pool_create` of the same name says it already exists. A
//!   creator that dies half-way leaves the claim: [`Store::pool_drop`] clears it.
//! - [`Store::pool_sample`] draws `k` slots uniformly
//!   ([`super::sample_slots`]) and reads them in one transaction of gets that
//!   also compares the pool's meta key is the one whose start and size the
//!   slots were drawn from (its create revision): one round trip (with more
//!   than 100 slots, one per 100, sent together). Every member
//!   is equally likely, whatever the values.
//! - [`Store::pool_swap`] is one transaction: it compares the meta key's
//!   create revision and that the slot of `take` (`(take - start) mod size`)
//!   holds `take`, then puts `put` in that slot. `put` must be `take` plus a
//!   multiple of the size (the contract's `take + size`), else the swap is
//!   refused with [`Error::InvalidArgument`].
//!
//! A store remembers each pool's start, size and meta create revision once
//! it has read them. They never change while the pool lives; a pool dropped
//! and created again has a new create revision, so the compare fails, the
//! transaction returns the new meta instead, and the call is made again with
//! it.
//!
//! # Durability and failures
//!
//! etcd answers a write after the raft log entry is committed, i.e. fsynced
//! on a quorum of members. Each request has a deadline per endpoint
//! ([`REQUEST_TIMEOUT`], [`LOCK_WAIT`] for taking a lock; [`CONNECT_TIMEOUT`]
//! to open a connection); when every endpoint failed, the call fails with
//! [`Error::Unavailable`] naming each endpoint and what went wrong there. A
//! write whose answer was lost may or may not have happened; every write here
//! is conditional (a compare in the same transaction), so retrying it, on
//! another endpoint or by the caller, can lose values (a gap) but never hands
//! one out twice.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, LockOptions, Txn, TxnOp,
    TxnOpResponse, TxnResponse,
};
use serde::{Deserialize, Serialize};

use super::{PoolRow, Put, Reservation, Row, SequenceSpec, Store};
use crate::{Error, Result};

/// Deadline of one request to etcd.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Deadline for opening a TCP connection to one endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Time to live of the lease behind a lock of [`Store::reserve_locked`]: how
/// long a dead holder can block others.
pub const LOCK_TTL_SECS: i64 = 10;

/// How long [`Store::reserve_locked`] waits for the lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(3 * LOCK_TTL_SECS as u64);

/// How many lost races [`Store::reserve_atomic`] takes before it gives up.
pub const ATOMIC_ATTEMPTS: u32 = 64;

/// The key prefix used when the URL names none.
pub const DEFAULT_PREFIX: &str = "keysmith";

/// How many times [`Store::reserve_locked`] takes the lock again after losing it
/// (lease expired while held) before it gives up.
const LOCK_ATTEMPTS: u32 = 5;

// gRPC status codes for requests etcd refuses as malformed (not transient).
const GRPC_INVALID_ARGUMENT: i32 = 3;
const GRPC_FAILED_PRECONDITION: i32 = 9;
const GRPC_OUT_OF_RANGE: i32 = 11;

/// Members written per transaction (etcd allows 128 operations by default).
const POOL_BATCH: usize = 100;

/// Transactions in flight while a large pool is written.
const POOL_PARALLEL: usize = 4;

/// Members read per request by `pool_members`.
const PAGE: i64 = 5000;

/// How many times a pool call is made again because the pool's meta changed
/// under it (dropped and created again) before it gives up with
/// [`Error::Contention`].
const META_ATTEMPTS: u32 = 3;

/// How many pools' meta a store remembers before it forgets them all.
const META_CACHE: usize = 4096;

/// A [`Store`] in an etcd cluster (v3 API; etcd 3.4 or later).
#[derive(Clone)]
pub struct EtcdStore {
    /// One client per endpoint, in the URL's order.
    clients: Vec<Client>,
    /// The endpoint requests go to first; moves on when it fails.
    current: Arc<AtomicUsize>,
    endpoints: Vec<String>,
    /// The key prefix, ending in `/`.
    prefix: String,
    /// What this store last read of each pool's meta key.
    pool_meta: Arc<Mutex<HashMap<String, PoolMeta>>>,
}

/// A pool's start and size, and the create revision of the meta key they
/// were read from: a pool created again under the same name has another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PoolMeta {
    start: i64,
    size: i64,
    revision: i64,
}

impl PoolMeta {
    /// The slot that holds `v` if `v` is a member.
    fn slot_of(&self, v: i64) -> i64 {
        // Both below 2^64 in magnitude, size >= 1: the result is in 0..size.
        (i128::from(v) - i128::from(self.start)).rem_euclid(i128::from(self.size)) as i64
    }
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct SpecValue {
    start: i64,
    max: i64,
    block: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct PoolValue {
    start: i64,
    size: i64,
}

/// What an `etcd://` URL says: the endpoints and the key prefix (no slashes
/// at either end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdUrl {
    /// `host:port` of each member, in the order given.
    pub endpoints: Vec<String>,
    /// The key prefix, without leading or trailing `/`.
    pub prefix: String,
}

impl EtcdUrl {
    /// Parses `etcd://HOST:PORT[,HOST:PORT...][/PREFIX]`. IPv6 hosts go in
    /// brackets (`[::1]:2379`). Without a prefix, [`DEFAULT_PREFIX`] is used.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying what is wrong with the URL.
    pub fn parse(url: &str) -> Result<EtcdUrl> {
        let usage = "expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX], e.g. etcd://127.0.0.1:2379/keysmith";
        let rest = url.strip_prefix("etcd://").ok_or_else(|| {
            Error::invalid(format!("store URL {url:?} is not an etcd URL; {usage}"))
        })?;
        let (hosts, prefix) = match rest.split_once('/') {
            Some((h, p)) => (h, p.trim_matches('/')),
            None => (rest, ""),
        };
        if hosts.is_empty() {
            return Err(Error::invalid(format!(
                "store URL {url:?} names no endpoint; {usage}"
            )));
        }
        let mut endpoints = Vec::new();
        for host in hosts.split(',') {
            let bad = |why: &str| {
                Error::invalid(format!(
                    "store URL {url:?}: endpoint {host:?} {why}; {usage}"
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
        if prefix
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '?' || c == '#')
        {
            return Err(Error::invalid(format!(
                "store URL {url:?}: prefix {prefix:?} may not contain whitespace, control characters, '?' or '#'"
            )));
        }
        let prefix = if prefix.is_empty() {
            DEFAULT_PREFIX
        } else {
            prefix
        };
        Ok(EtcdUrl {
            endpoints,
            prefix: prefix.to_owned(),
        })
    }
}

impl EtcdStore {
    /// Connects to the cluster a URL names (see [`EtcdUrl::parse`]) and checks
    /// it answers.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad URL; [`Error::Unavailable`] when no
    /// endpoint answers within [`REQUEST_TIMEOUT`] or the cluster has no leader.
    pub async fn connect(url: &str) -> Result<EtcdStore> {
        let parsed = EtcdUrl::parse(url)?;
        let store = EtcdStore::connect_lazy(parsed).await?;
        store.ping().await?;
        Ok(store)
    }

    /// Like [`EtcdStore::connect`] without the check: the first request
    /// finds out whether the cluster is up.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the client rejects an endpoint.
    pub async fn connect_lazy(url: EtcdUrl) -> Result<EtcdStore> {
        let options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            // No channel-wide request timeout: `call` sets one per request
            // (a lock may wait longer than a read).
            // Notice a dead peer that did not close the connection.
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true)
            // A member cut off from the quorum fails fast instead of hanging.
            .with_require_leader(true);
        // One client per endpoint rather than one balancing over all: the
        // balancer routes requests to a dead endpoint as readily as to a live
        // one. `call` sticks to one endpoint and moves on when it fails.
        let mut clients = Vec::with_capacity(url.endpoints.len());
        for ep in &url.endpoints {
            let client = Client::connect([ep], Some(options.clone()))
                .await
                .map_err(|e| Error::invalid(format!("etcd endpoint {ep}: {e}")))?;
            clients.push(client);
        }
        Ok(EtcdStore {
            clients,
            current: Arc::new(AtomicUsize::new(0)),
            endpoints: url.endpoints,
            prefix: format!("{}/", url.prefix),
            pool_meta: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// The endpoints this store talks to.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The key prefix, ending in `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    // ---- keys ----

    fn seq_key(&self, name: &str) -> String {
        format!("{}seq/{name}", self.prefix)
    }

    fn next_key(&self, name: &str) -> String {
        format!("{}next/{name}", self.prefix)
    }

    fn pool_key(&self, name: &str) -> String {
        format!("{}pools/{name}", self.prefix)
    }

    fn creating_key(&self, name: &str) -> String {
        format!("{}pool-creating/{}", self.prefix, escape(name))
    }

    fn members_prefix(&self, name: &str) -> String {
        format!("{}pool-members/{}/", self.prefix, escape(name))
    }

    fn slot_key(&self, name: &str, slot: i64) -> String {
        format!("{}{slot:020}", self.members_prefix(name))
    }

    fn lock_name(&self, name: &str) -> String {
        format!("{}locks/{}", self.prefix, escape(name))
    }

    // ---- calls ----

    fn unavailable(&self, op: &str, why: impl fmt::Display) -> Error {
        Error::Unavailable(format!(
            "etcd at {} failed to {op}: {why}; check that a majority of the cluster is up and reachable",
            self.endpoints.join(",")
        ))
    }

    /// Runs one request, built by `request` from a client, on the current
    /// endpoint; when that endpoint fails (unreachable, no leader, no answer
    /// within `deadline`) it tries the next ones, each once, and the next
    /// call starts from the one that answered.
    ///
    /// Retrying on another endpoint is safe for every request keysmith
    /// makes: reads, conditional transactions, lock and lease calls.
    async fn call_within<T, F, Fut>(
        &self,
        op: &str,
        deadline: Duration,
        mut request: F,
    ) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let n = self.clients.len();
        let first = self.current.load(Ordering::Relaxed) % n;
        let mut failures = Vec::new();
        for k in 0..n {
            let i = (first + k) % n;
            let why = match tokio::time::timeout(deadline, request(self.clients[i].clone())).await {
                Ok(Ok(v)) => {
                    if k > 0 {
                        self.current.store(i, Ordering::Relaxed);
                    }
                    return Ok(v);
                }
                Ok(Err(etcd_client::Error::GRpcStatus(s)))
                    if matches!(
                        i32::from(s.code()),
                        GRPC_INVALID_ARGUMENT | GRPC_FAILED_PRECONDITION | GRPC_OUT_OF_RANGE
                    ) =>
                {
                    return Err(Error::invalid(format!(
                        "etcd at {} rejected the request to {op}: {}",
                        self.endpoints[i],
                        s.message()
                    )));
                }
                Ok(Err(etcd_client::Error::GRpcStatus(s))) => {
                    format!("{:?}: {}", s.code(), s.message())
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {deadline:?}"),
            };
            failures.push(format!("{}: {why}", self.endpoints[i]));
        }
        // Start the next call elsewhere.
        self.current.store((first + 1) % n, Ordering::Relaxed);
        Err(self.unavailable(op, failures.join("; ")))
    }

    async fn call<T, F, Fut>(&self, op: &str, request: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.call_within(op, REQUEST_TIMEOUT, request).await
    }

    async fn txn(&self, op: &str, txn: Txn) -> Result<TxnResponse> {
        self.call(op, |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await
    }

    /// The two gets that read a sequence's row, for the end of a transaction.
    fn row_gets(&self, name: &str) -> [TxnOp; 2] {
        [
            TxnOp::get(self.seq_key(name), None),
            TxnOp::get(self.next_key(name), None),
        ]
    }

    /// Reads the row from the two gets starting at response `at`.
    fn row_from(&self, name: &str, resp: &[TxnOpResponse], at: usize) -> Result<Option<Row>> {
        let spec = first_kv(resp, at)?;
        let next = first_kv(resp, at + 1)?;
        self.build_row(name, spec.as_ref(), next.as_ref())
    }

    fn build_row(
        &self,
        name: &str,
        spec: Option<&KeyValue>,
        next: Option<&KeyValue>,
    ) -> Result<Option<Row>> {
        let (spec_kv, next_kv) = match (spec, next) {
            (None, None) => return Ok(None),
            (Some(s), Some(n)) => (s, n),
            (Some(_), None) | (None, Some(_)) => {
                return Err(Error::Corrupt(format!(
                    "sequence {name:?} under etcd prefix {:?} has only one of its two keys ({} and {}); \
                     something other than keysmith changed them: drop the sequence and create it again",
                    self.prefix,
                    self.seq_key(name),
                    self.next_key(name)
                )));
            }
        };
        let spec: SpecValue = serde_json::from_slice(spec_kv.value()).map_err(|e| {
            Error::Corrupt(format!(
                "etcd key {} does not hold a keysmith sequence ({e}); drop the sequence and create it again",
                self.seq_key(name)
            ))
        })?;
        let next: i64 = std::str::from_utf8(next_kv.value())
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "etcd key {} holds {:?}, not a number; drop the sequence and create it again",
                    self.next_key(name),
                    String::from_utf8_lossy(next_kv.value())
                ))
            })?;
        let valid = 0 <= spec.start
            && spec.start <= spec.max
            && spec.max <= super::MAX_VALUE
            && spec.start <= next
            && next <= spec.max + 1
            && spec.block >= 1
            && next_kv.version() >= 1;
        if !valid {
            return Err(Error::Corrupt(format!(
                "sequence {name:?} in etcd is inconsistent (start {}, max {}, block {}, next {}); \
                 drop it and create it again",
                spec.start, spec.max, spec.block, next
            )));
        }
        Ok(Some(Row {
            name: name.to_owned(),
            next,
            start: spec.start,
            max: spec.max,
            block: spec.block,
            version: next_kv.version() as u64,
        }))
    }

    async fn read_row(&self, name: &str) -> Result<Option<Row>> {
        let resp = self
            .txn("read", Txn::new().and_then(self.row_gets(name)))
            .await?;
        self.row_from(name, &resp.op_responses(), 0)
    }

    /// One compare-and-put of `next` from `row`: `Ok(Ok(reservation))` on
    /// success, `Ok(Err(current row))` on a conflict. `extra` compares are
    /// added (the lock key); `extra_gets` are read on failure after the row.
    async fn try_reserve(
        &self,
        row: &Row,
        n: i64,
        extra: Option<Compare>,
        extra_gets: Vec<TxnOp>,
    ) -> Result<std::result::Result<Reservation, (Option<Row>, Vec<TxnOpResponse>)>> {
        let plan = row.plan(n)?;
        let Ok(expected) = i64::try_from(row.version) else {
            return Err(Error::Corrupt(format!(
                "sequence {:?}: version {} is out of etcd's range",
                row.name, row.version
            )));
        };
        let mut when = vec![Compare::version(
            self.next_key(&row.name),
            CompareOp::Equal,
            expected,
        )];
        when.extend(extra);
        let mut otherwise = self.row_gets(&row.name).to_vec();
        otherwise.extend(extra_gets);
        let txn = Txn::new()
            .when(when)
            .and_then([TxnOp::put(
                self.next_key(&row.name),
                plan.end.to_string(),
                None,
            )])
            .or_else(otherwise);
        let resp = self.txn("reserve", txn).await?;
        if resp.succeeded() {
            return Ok(Ok(plan));
        }
        let ops = resp.op_responses();
        let current = self.row_from(&row.name, &ops, 0)?;
        Ok(Err((current, ops)))
    }

    fn parse_pool(&self, name: &str, kv: &KeyValue) -> Result<PoolRow> {
        let v: PoolValue = serde_json::from_slice(kv.value()).map_err(|e| {
            Error::Corrupt(format!(
                "etcd key {} does not hold a keysmith pool ({e}); drop the pool and create it again",
                self.pool_key(name)
            ))
        })?;
        if v.size < 1 || v.start.checked_add(v.size).is_none() {
            return Err(Error::Corrupt(format!(
                "pool {name:?} in etcd has start {} and size {}, which is impossible; drop it and create it again",
                v.start, v.size
            )));
        }
        Ok(PoolRow {
            name: name.to_owned(),
            start: v.start,
            size: v.size,
        })
    }

    fn meta_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, PoolMeta>> {
        // The map holds plain values: a panic elsewhere cannot leave it torn.
        self.pool_meta
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn remember_meta(&self, name: &str, meta: PoolMeta) {
        let mut cache = self.meta_cache();
        if cache.get(name) == Some(&meta) {
            return;
        }
        if cache.len() >= META_CACHE {
            cache.clear();
        }
        cache.insert(name.to_owned(), meta);
    }

    fn forget_meta(&self, name: &str) {
        self.meta_cache().remove(name);
    }

    /// The meta a pool's key `kv` holds; remembered.
    fn meta_from(&self, name: &str, kv: &KeyValue) -> Result<PoolMeta> {
        let row = self.parse_pool(name, kv)?;
        let meta = PoolMeta {
            start: row.start,
            size: row.size,
            revision: kv.create_revision(),
        };
        self.remember_meta(name, meta);
        Ok(meta)
    }

    /// The pool's meta as this store remembers it, or read (one round trip).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Corrupt`], [`Error::Unavailable`].
    async fn pool_meta(&self, name: &str) -> Result<PoolMeta> {
        if let Some(meta) = self.meta_cache().get(name).copied() {
            return Ok(meta);
        }
        let key = self.pool_key(name);
        let resp = self
            .call("read a pool", |mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        match resp.kvs().first() {
            Some(kv) => self.meta_from(name, kv),
            None => Err(Error::not_found("pool", name)),
        }
    }

    /// The pool's meta read now (one round trip), and remembered.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Corrupt`], [`Error::Unavailable`].
    async fn fresh_meta(&self, name: &str) -> Result<PoolMeta> {
        self.forget_meta(name);
        self.pool_meta(name).await
    }

    /// The compare that the pool's meta key is still the one `meta` was read
    /// from.
    fn same_pool(&self, name: &str, meta: &PoolMeta) -> Compare {
        Compare::create_revision(self.pool_key(name), CompareOp::Equal, meta.revision)
    }

    /// After [`Self::same_pool`] failed: the pool's meta now, from the get of
    /// the meta key at answer `i`, or `NotFound`.
    fn meta_now(&self, name: &str, ops: &[TxnOpResponse], i: usize) -> Result<PoolMeta> {
        match first_kv(ops, i)? {
            Some(kv) => self.meta_from(name, &kv),
            None => {
                self.forget_meta(name);
                Err(Error::not_found("pool", name))
            }
        }
    }

    /// The member a slot key holds.
    fn member_of(&self, name: &str, kv: &KeyValue) -> Result<i64> {
        std::str::from_utf8(kv.value())
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "etcd key {:?} under pool {name:?} holds {:?}, not a member; drop the pool and create it again",
                    String::from_utf8_lossy(kv.key()),
                    String::from_utf8_lossy(kv.value())
                ))
            })
    }

    /// The put of `member` into `slot`.
    fn member_put(&self, name: &str, slot: i64, member: i64) -> TxnOp {
        TxnOp::put(self.slot_key(name, slot), member.to_string(), None)
    }

    /// Remembers the meta of a pool that the transaction `resp` created: it
    /// put the meta key, which did not exist, so the key's create revision
    /// is the transaction's revision.
    fn remember_created(&self, name: &str, start: i64, size: i64, resp: &TxnResponse) {
        if let Some(h) = resp.header() {
            self.remember_meta(
                name,
                PoolMeta {
                    start,
                    size,
                    revision: h.revision(),
                },
            );
        }
    }

    async fn release(&self, lease: &mut LeaseGuard) {
        if let Some(task) = lease.keep_alive.take() {
            task.abort();
        }
        let id = lease.id;
        // Revoking deletes the lock key, which releases the lock. If this fails
        // the lease (and with it the lock) expires after LOCK_TTL_SECS.
        match self
            .call(
                "release a lock",
                |mut c| async move { c.lease_revoke(id).await },
            )
            .await
        {
            Ok(_) => lease.released = true,
            Err(e) => tracing::warn!(lease = lease.id, error = %e, "cannot revoke lease"),
        }
    }

    /// One locked reservation: `Ok(None)` when the lock was lost before the
    /// write (the caller takes it again).
    async fn reserve_under_lock(
        &self,
        name: &str,
        n: i64,
        lock_key: &[u8],
    ) -> Result<Option<Reservation>> {
        let mut row = self
            .read_row(name)
            .await?
            .ok_or_else(|| Error::not_found("sequence", name))?;
        // Other strategies may write between our read and our put: we keep the
        // lock and retry from the row the transaction returns.
        for _ in 0..ATOMIC_ATTEMPTS {
            let still_held = Compare::version(lock_key.to_vec(), CompareOp::Greater, 0);
            let lock_get = TxnOp::get(lock_key.to_vec(), Some(GetOptions::new().with_keys_only()));
            match self
                .try_reserve(&row, n, Some(still_held), vec![lock_get])
                .await?
            {
                Ok(r) => return Ok(Some(r)),
                Err((current, ops)) => {
                    if first_kv(&ops, 2)?.is_none() {
                        return Ok(None);
                    }
                    row = current.ok_or_else(|| Error::not_found("sequence", name))?;
                }
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATOMIC_ATTEMPTS,
        })
    }
}

/// The lease of one locked reservation. Dropped without [`EtcdStore::release`]
/// (the future was cancelled), it revokes the lease in the background.
struct LeaseGuard {
    id: i64,
    store: EtcdStore,
    keep_alive: Option<tokio::task::JoinHandle<()>>,
    released: bool,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some(task) = self.keep_alive.take() {
            task.abort();
        }
        if self.released {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let store = self.store.clone();
            let id = self.id;
            handle.spawn(async move {
                let _ = store
                    .call(
                        "release a lock",
                        |mut c| async move { c.lease_revoke(id).await },
                    )
                    .await;
            });
        }
    }
}

/// Keeps lease `id` alive until aborted: one keep-alive every third of the
/// TTL. A failed one is retried at the next tick; a lease lost meanwhile is
/// caught by the lock-key compare of the write.
fn keep_alive(store: &EtcdStore, id: i64) -> tokio::task::JoinHandle<()> {
    let store = store.clone();
    tokio::spawn(async move {
        let period = Duration::from_secs(LOCK_TTL_SECS as u64) / 3;
        loop {
            tokio::time::sleep(period).await;
            let _ = store
                .call("keep a lock's lease alive", |mut c| async move {
                    c.lease_keep_alive(id).await.map(drop)
                })
                .await;
        }
    })
}

#[async_trait]
impl Store for EtcdStore {
    async fn create(&self, spec: &SequenceSpec) -> Result<Row> {
        let value = serde_json::to_vec(&SpecValue {
            start: spec.start,
            max: spec.max,
            block: spec.block,
        })
        .map_err(|e| Error::invalid(format!("cannot encode sequence {:?}: {e}", spec.name)))?;
        let txn = Txn::new()
            .when([
                Compare::version(self.seq_key(&spec.name), CompareOp::Equal, 0),
                Compare::version(self.next_key(&spec.name), CompareOp::Equal, 0),
            ])
            .and_then([
                TxnOp::put(self.seq_key(&spec.name), value, None),
                TxnOp::put(self.next_key(&spec.name), spec.start.to_string(), None),
            ])
            .or_else(self.row_gets(&spec.name));
        let resp = self.txn("create a sequence", txn).await?;
        if !resp.succeeded() {
            // Tells a half-written leftover (Corrupt) from a real sequence.
            self.row_from(&spec.name, &resp.op_responses(), 0)?;
            return Err(Error::AlreadyExists {
                kind: "sequence",
                name: spec.name.clone(),
            });
        }
        Ok(Row {
            name: spec.name.clone(),
            next: spec.start,
            start: spec.start,
            max: spec.max,
            block: spec.block,
            version: 1,
        })
    }

    async fn read(&self, name: &str) -> Result<Option<Row>> {
        self.read_row(name).await
    }

    async fn put_if_version(&self, name: &str, new_next: i64, expected: u64) -> Result<Put> {
        let gets = self.row_gets(name);
        let txn = match i64::try_from(expected) {
            Ok(expected) => Txn::new()
                .when([Compare::version(
                    self.next_key(name),
                    CompareOp::Equal,
                    expected,
                )])
                .and_then([
                    TxnOp::put(self.next_key(name), new_next.to_string(), None),
                    gets[0].clone(),
                    gets[1].clone(),
                ])
                .or_else(gets),
            // No etcd version is that large: a plain read, reported as a conflict.
            Err(_) => Txn::new().and_then(gets),
        };
        let resp = self.txn("write a sequence", txn).await?;
        let ops = resp.op_responses();
        if resp.succeeded() && ops.len() == 3 {
            let row = self
                .row_from(name, &ops, 1)?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            Ok(Put::Done(row))
        } else {
            let row = self
                .row_from(name, &ops, 0)?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            Ok(Put::Conflict(row))
        }
    }

    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        for _ in 0..LOCK_ATTEMPTS {
            let granted = self
                .call("grant a lease", |mut c| async move {
                    c.lease_grant(LOCK_TTL_SECS, None).await
                })
                .await?;
            let mut lease = LeaseGuard {
                id: granted.id(),
                store: self.clone(),
                keep_alive: Some(keep_alive(self, granted.id())),
                released: false,
            };
            let (lock_name, id) = (self.lock_name(name), lease.id);
            let locked = self
                .call_within("take a lock", LOCK_WAIT, |mut c| {
                    let lock_name = lock_name.clone();
                    async move {
                        c.lock(lock_name, Some(LockOptions::new().with_lease(id)))
                            .await
                    }
                })
                .await;
            let outcome = match locked {
                Ok(resp) => self.reserve_under_lock(name, n, resp.key()).await,
                Err(e) => Err(e),
            };
            self.release(&mut lease).await;
            match outcome? {
                Some(r) => return Ok(r),
                None => tracing::warn!(
                    sequence = name,
                    "lost the etcd lock (lease expired) before writing; taking it again"
                ),
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: LOCK_ATTEMPTS,
        })
    }

    async fn reserve_atomic(&self, name: &str, n: i64) -> Result<Reservation> {
        let mut row = self
            .read_row(name)
            .await?
            .ok_or_else(|| Error::not_found("sequence", name))?;
        for _ in 0..ATOMIC_ATTEMPTS {
            match self.try_reserve(&row, n, None, Vec::new()).await? {
                Ok(r) => return Ok(r),
                Err((current, _)) => {
                    row = current.ok_or_else(|| Error::not_found("sequence", name))?;
                }
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATOMIC_ATTEMPTS,
        })
    }

    async fn list(&self) -> Result<Vec<Row>> {
        let seq = format!("{}seq/", self.prefix);
        let next = format!("{}next/", self.prefix);
        let txn = Txn::new().and_then([
            TxnOp::get(seq.clone(), Some(GetOptions::new().with_prefix())),
            TxnOp::get(next.clone(), Some(GetOptions::new().with_prefix())),
        ]);
        let resp = self.txn("list sequences", txn).await?;
        let ops = resp.op_responses();
        let specs = kvs(&ops, 0)?;
        let mut nexts: std::collections::BTreeMap<Vec<u8>, KeyValue> = kvs(&ops, 1)?
            .into_iter()
            .filter_map(|kv| {
                let name = kv.key().strip_prefix(next.as_bytes())?.to_vec();
                Some((name, kv))
            })
            .collect();
        let mut rows = Vec::with_capacity(specs.len());
        for kv in &specs {
            let raw = &kv.key()[seq.len()..];
            let name = std::str::from_utf8(raw).map_err(|_| {
                Error::Corrupt(format!(
                    "etcd key {:?} is not a keysmith sequence name",
                    String::from_utf8_lossy(kv.key())
                ))
            })?;
            let next_kv = nexts.remove(raw);
            if let Some(row) = self.build_row(name, Some(kv), next_kv.as_ref())? {
                rows.push(row);
            }
        }
        if let Some(orphan) = nexts.keys().next() {
            let name = String::from_utf8_lossy(orphan).into_owned();
            return Err(self
                .build_row(&name, None, Some(&nexts[orphan]))
                .unwrap_err());
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }

    async fn drop_sequence(&self, name: &str) -> Result<()> {
        let txn = Txn::new()
            .when([Compare::version(self.seq_key(name), CompareOp::Greater, 0)])
            .and_then([
                TxnOp::delete(self.seq_key(name), None),
                TxnOp::delete(self.next_key(name), None),
            ]);
        if self.txn("drop a sequence", txn).await?.succeeded() {
            Ok(())
        } else {
            Err(Error::not_found("sequence", name))
        }
    }

    async fn pool_create(&self, name: &str, start: i64, size: i64) -> Result<PoolRow> {
        match start.checked_add(size) {
            Some(_) if size >= 1 => {}
            _ => {
                return Err(Error::invalid(format!(
                    "pool {name:?}: start {start} and size {size} do not make a range of i64 values; \
                     the size must be 1 or more and start + size must fit in an i64"
                )));
            }
        }
        let meta = serde_json::to_vec(&PoolValue { start, size })
            .map_err(|e| Error::invalid(format!("cannot encode pool {name:?}: {e}")))?;
        let absent = [
            Compare::version(self.pool_key(name), CompareOp::Equal, 0),
            Compare::version(self.creating_key(name), CompareOp::Equal, 0),
        ];
        let exists = || Error::AlreadyExists {
            kind: "pool",
            name: name.to_owned(),
        };
        let row = PoolRow {
            name: name.to_owned(),
            start,
            size,
        };
        if size as usize <= POOL_BATCH {
            // Small pool: one transaction.
            let mut ops = vec![TxnOp::put(self.pool_key(name), meta, None)];
            ops.extend((0..size).map(|slot| self.member_put(name, slot, start + slot)));
            let txn = Txn::new().when(absent).and_then(ops);
            let resp = self.txn("create a pool", txn).await?;
            if !resp.succeeded() {
                return Err(exists());
            }
            self.remember_created(name, start, size, &resp);
            return Ok(row);
        }
        // Large pool: claim the name, write the members in batches guarded by
        // the claim, then publish the pool and drop the claim in one
        // transaction. Until then every other call sees no pool.
        let claim = Txn::new().when(absent).and_then([
            TxnOp::put(self.creating_key(name), meta.clone(), None),
            TxnOp::delete(
                self.members_prefix(name),
                Some(etcd_client::DeleteOptions::new().with_prefix()),
            ),
        ]);
        let resp = self.txn("create a pool", claim).await?;
        if !resp.succeeded() {
            return Err(exists());
        }
        let claim_rev = resp
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| self.unavailable("create a pool", "answer without a revision"))?;
        let guard =
            || Compare::create_revision(self.creating_key(name), CompareOp::Equal, claim_rev);
        let gone = || Error::NotFound {
            kind: "pool",
            name: name.to_owned(),
            similar: Vec::new(),
        };
        // Half-open ranges of slots.
        let batches: Vec<(i64, i64)> = (0..size)
            .step_by(POOL_BATCH)
            .map(|lo| (lo, (lo + POOL_BATCH as i64).min(size)))
            .collect();
        for wave in batches.chunks(POOL_PARALLEL) {
            let writes = wave.iter().map(|&(lo, hi)| {
                let ops: Vec<TxnOp> = (lo..hi)
                    .map(|slot| self.member_put(name, slot, start + slot))
                    .collect();
                self.txn("create a pool", Txn::new().when([guard()]).and_then(ops))
            });
            for resp in futures_util::future::join_all(writes).await {
                if !resp?.succeeded() {
                    // Dropped while being created.
                    return Err(gone());
                }
            }
        }
        let publish = Txn::new().when([guard()]).and_then([
            TxnOp::put(self.pool_key(name), meta, None),
            TxnOp::delete(self.creating_key(name), None),
        ]);
        let resp = self.txn("create a pool", publish).await?;
        if resp.succeeded() {
            self.remember_created(name, start, size, &resp);
            Ok(row)
        } else {
            Err(gone())
        }
    }

    async fn pool_read(&self, name: &str) -> Result<Option<PoolRow>> {
        let key = self.pool_key(name);
        let resp = self
            .call("read a pool", |mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        resp.kvs()
            .first()
            .map(|kv| self.parse_pool(name, kv))
            .transpose()
    }

    async fn pool_sample(&self, name: &str, k: usize) -> Result<Vec<i64>> {
        let mut meta = self.pool_meta(name).await?;
        'draw: for _ in 0..META_ATTEMPTS {
            let slots = super::sample_slots(meta.size, k);
            // At least one transaction: it also says whether the pool exists.
            let batches: Vec<&[i64]> = if slots.is_empty() {
                vec![&[]]
            } else {
                slots.chunks(POOL_BATCH).collect()
            };
            let drawn_with = meta;
            let reads = batches.iter().map(|batch| {
                let gets: Vec<TxnOp> = batch
                    .iter()
                    .map(|&slot| TxnOp::get(self.slot_key(name, slot), None))
                    .collect();
                let txn = Txn::new()
                    .when([self.same_pool(name, &drawn_with)])
                    .and_then(gets)
                    .or_else([TxnOp::get(self.pool_key(name), None)]);
                self.txn("sample a pool", txn)
            });
            let answers = futures_util::future::join_all(reads).await;
            let mut out = Vec::with_capacity(slots.len());
            for (batch, resp) in batches.iter().zip(answers) {
                let resp = resp?;
                let ops = resp.op_responses();
                if !resp.succeeded() {
                    // Dropped, or dropped and created again: draw again from
                    // the pool as it is now.
                    meta = self.meta_now(name, &ops, 0)?;
                    continue 'draw;
                }
                for (i, &slot) in batch.iter().enumerate() {
                    let kv = first_kv(&ops, i)?.ok_or_else(|| {
                        Error::Corrupt(format!(
                            "pool {name:?} (size {}) has no member in slot {slot} (etcd key {}); drop the pool and create it again",
                            meta.size,
                            self.slot_key(name, slot)
                        ))
                    })?;
                    out.push(self.member_of(name, &kv)?);
                }
            }
            return Ok(out);
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: META_ATTEMPTS,
        })
    }

    async fn pool_swap(&self, name: &str, take: i64, put: i64) -> Result<bool> {
        let mut meta = self.pool_meta(name).await?;
        for _ in 0..META_ATTEMPTS {
            let slot = meta.slot_of(take);
            if meta.slot_of(put) != slot {
                // The remembered size may be stale: check with the pool as
                // it is now before refusing.
                let now = self.fresh_meta(name).await?;
                if now != meta {
                    meta = now;
                    continue;
                }
                // Would put a member where another slot's may be: refused
                // rather than risk holding a number twice.
                return Err(Error::invalid(format!(
                    "pool {name:?}: cannot swap {take} for {put}: the new member must be the old one plus the pool's size {} (here {})",
                    meta.size,
                    i128::from(take) + i128::from(meta.size)
                )));
            }
            let key = self.slot_key(name, slot);
            let txn = Txn::new()
                .when([
                    self.same_pool(name, &meta),
                    Compare::value(key, CompareOp::Equal, take.to_string()),
                ])
                .and_then([self.member_put(name, slot, put)])
                .or_else([TxnOp::get(self.pool_key(name), None)]);
            let resp = self.txn("swap a pool member", txn).await?;
            if resp.succeeded() {
                return Ok(true);
            }
            let now = self.meta_now(name, &resp.op_responses(), 0)?;
            if now.revision == meta.revision {
                // Same pool: the slot holds another member.
                return Ok(false);
            }
            meta = now;
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: META_ATTEMPTS,
        })
    }

    async fn pool_members(&self, name: &str) -> Result<Vec<i64>> {
        let prefix = self.members_prefix(name);
        let end = prefix_end(&prefix);
        let page_of = || GetOptions::new().with_range(end.clone()).with_limit(PAGE);
        let txn = Txn::new().and_then([
            TxnOp::get(self.pool_key(name), None),
            TxnOp::get(prefix.clone(), Some(page_of())),
        ]);
        let resp = self.txn("list pool members", txn).await?;
        let ops = resp.op_responses();
        if first_kv(&ops, 0)?.is_none() {
            return Err(Error::not_found("pool", name));
        }
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut page = kvs(&ops, 1)?;
        let mut out = Vec::new();
        // Later pages are read at the first page's revision: one snapshot.
        while !page.is_empty() {
            for kv in &page {
                out.push(self.member_of(name, kv)?);
            }
            if (page.len() as i64) < PAGE {
                break;
            }
            let mut from = page[page.len() - 1].key().to_vec();
            from.push(0);
            let opts = page_of().with_revision(revision);
            page = self
                .call("list pool members", |mut c| {
                    let (from, opts) = (from.clone(), opts.clone());
                    async move { c.get(from, Some(opts)).await }
                })
                .await?
                .take_kvs();
        }
        // Slot order is not value order.
        out.sort_unstable();
        Ok(out)
    }

    async fn pool_list(&self) -> Result<Vec<PoolRow>> {
        let prefix = format!("{}pools/", self.prefix);
        let resp = self
            .call("list pools", |mut c| {
                let prefix = prefix.clone();
                async move { c.get(prefix, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut rows = resp
            .kvs()
            .iter()
            .map(|kv| {
                let name = std::str::from_utf8(&kv.key()[prefix.len()..]).map_err(|_| {
                    Error::Corrupt(format!(
                        "etcd key {:?} is not a keysmith pool name",
                        String::from_utf8_lossy(kv.key())
                    ))
                })?;
                self.parse_pool(name, kv)
            })
            .collect::<Result<Vec<_>>>()?;
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }

    async fn pool_drop(&self, name: &str) -> Result<()> {
        let members = || {
            TxnOp::delete(
                self.members_prefix(name),
                Some(etcd_client::DeleteOptions::new().with_prefix()),
            )
        };
        let txn = Txn::new()
            .when([Compare::version(self.pool_key(name), CompareOp::Greater, 0)])
            .and_then([
                TxnOp::delete(self.pool_key(name), None),
                members(),
                TxnOp::delete(self.creating_key(name), None),
            ]);
        self.forget_meta(name);
        if self.txn("drop a pool", txn).await?.succeeded() {
            return Ok(());
        }
        // A pool whose creation is under way or died half-way.
        let txn = Txn::new()
            .when([Compare::version(
                self.creating_key(name),
                CompareOp::Greater,
                0,
            )])
            .and_then([TxnOp::delete(self.creating_key(name), None), members()]);
        if self.txn("drop a pool", txn).await?.succeeded() {
            Ok(())
        } else {
            Err(Error::not_found("pool", name))
        }
    }

    async fn ping(&self) -> Result<()> {
        // A linearizable read: answered only when a quorum has a leader.
        let key = self.prefix.clone();
        self.call("answer a read", |mut c| {
            let key = key.clone();
            async move { c.get(key, Some(GetOptions::new().with_count_only())).await }
        })
        .await
        .map(drop)
    }
}

/// The key-values of the get at position `i` of a transaction's answers.
fn kvs(ops: &[TxnOpResponse], i: usize) -> Result<Vec<KeyValue>> {
    match ops.get(i) {
        Some(TxnOpResponse::Get(g)) => Ok(g.kvs().to_vec()),
        _ => Err(Error::Unavailable(format!(
            "etcd answered a transaction without the expected read #{i}; is it etcd 3.4 or later?"
        ))),
    }
}

fn first_kv(ops: &[TxnOpResponse], i: usize) -> Result<Option<KeyValue>> {
    Ok(kvs(ops, i)?.into_iter().next())
}

/// The end of the key range of every key starting with `prefix` (which ends
/// in an ASCII byte below 0x7f, here always `/`).
fn prefix_end(prefix: &str) -> String {
    let mut bytes = prefix.as_bytes().to_vec();
    if let Some(last) = bytes.last_mut() {
        *last += 1;
    }
    String::from_utf8(bytes).unwrap_or_default()
}

/// `%` and `/` percent-encoded, so that an escaped name never contains `/`.
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parsing() {
        let u = EtcdUrl::parse("etcd://127.0.0.1:2379").unwrap();
        assert_eq!(u.endpoints, ["127.0.0.1:2379"]);
        assert_eq!(u.prefix, DEFAULT_PREFIX);
        let u = EtcdUrl::parse("etcd://a:1,b:2,[::1]:3/app/keys/").unwrap();
        assert_eq!(u.endpoints, ["a:1", "b:2", "[::1]:3"]);
        assert_eq!(u.prefix, "app/keys");
        for bad in [
            "etcd://",
            "etcd:///p",
            "etcd://host",
            "etcd://host:0",
            "etcd://host:99999",
            "etcd://:2379",
            "etcd://a:1,,b:2",
            "etcd://::1:2379",
            "etcd://a:1/with space",
            "http://a:1",
        ] {
            let err = EtcdUrl::parse(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err}");
            assert!(err.to_string().contains("etcd://"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_member_keeps_its_slot() {
        let meta = PoolMeta {
            start: -3,
            size: 5,
            revision: 1,
        };
        for slot in 0..5 {
            let v = -3 + slot;
            assert_eq!(meta.slot_of(v), slot);
            assert_eq!(meta.slot_of(v + 5), slot);
            assert_eq!(meta.slot_of(v + 5 * 1000), slot);
        }
        let far = PoolMeta {
            start: i64::MAX - 10,
            size: 7,
            revision: 1,
        };
        assert!((0..7).contains(&far.slot_of(i64::MIN)));
        assert_eq!(far.slot_of(i64::MAX - 10), 0);
    }

    #[test]
    fn escaped_names_have_no_slash_and_stay_distinct() {
        assert_eq!(escape("a/b"), "a%2Fb");
        assert_eq!(escape("a%2Fb"), "a%252Fb");
        assert_ne!(escape("a/b"), escape("a%2Fb"));
        assert!(!escape("x/y/z").contains('/'));
        assert_eq!(prefix_end("p/pool-members/a/"), "p/pool-members/a0");
    }
}

//! The etcd backend: a store that outlives one machine.
//!
//! Built only with the cargo feature `etcd` (its gRPC code is generated at
//! build time, which needs `protoc`). Open it with a URL:
//!
//! ```text
//! etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...][/PREFIX][?PARAMS]
//! etcds://...   (the same, over TLS)
//! ```
//!
//! # TLS and credentials
//!
//! TLS is on with the scheme `etcds://`, or when the URL gives any of:
//!
//! - `cacert=PATH`: the CA certificates (PEM) that signed etcd's server
//!   certificate; without it, the system's CA certificates;
//! - `cert=PATH` and `key=PATH`: a client certificate and its key (PEM), for
//!   an etcd started with `--client-cert-auth`.
//!
//! The server certificate must be valid for the host name (or IP address) of
//! each endpoint. `USER` is an etcd user (auth enabled); its password comes
//! from the URL, or better from `password_file=PATH` (a file holding the
//! password alone; one trailing newline is ignored), which keeps it off
//! command lines that `ps` shows. The password never appears in messages.
//! Files are read when the URL is parsed, so a missing or malformed one is
//! an [`Error::InvalidArgument`] naming it. A store with a user renews its
//! auth token when etcd expires it. Known limit: with a user, opening the
//! store logs in on every endpoint, so an endpoint that is down at that
//! moment makes the open fail (without a user, opening needs only one).
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
//! | `PREFIX/seq/NAME` | the sequence's fixed part, JSON `{"start":..,"max":..,"block":..,"incarnation":..}` (`incarnation`: [`SequenceRow::incarnation`], absent in sequences from before lives were recorded) |
//! | `PREFIX/next/NAME` | its next free value and generation, `NEXT GENERATION`; [`SequenceRow::version`] is `incarnation - 1` plus the key's etcd *version* plus `FENCE_VERSION_STEP - 1` per fence, its create revision names the life (see *Versions and lives*) |
//! | `PREFIX/fences/NAME` | put by every fence of the sequence (a new generation: a restore, a failover); its etcd version is the number of fences in this life, also kept as `fences` in the spec key |
//! | `PREFIX/counts/NAME` | what clean closes and alterations reported, and the rate marks: JSON [`SequenceCounts`] |
//! | `PREFIX/pool-marks/ENAME` | the pool's rate marks, JSON [`RateMarks`] |
//! | `PREFIX/pools/NAME` | a pool, JSON `{"start":..,"size":..,"generation":..,"incarnation":..}`, with `"residue":{"increment":..,"offset":..}` for a pool in a residue class (`incarnation`: [`PoolRow::incarnation`], absent in pools from before lives were recorded) |
//! | `PREFIX/pool-members/ENAME/SSSSSSSSSSSSSSSSSSSS` | the member in slot `S` (20 decimal digits), decimal |
//! | `PREFIX/pool-creating/ENAME` | claim held while a large pool is being written |
//! | `PREFIX/locks/ENAME/...` | etcd lock keys of [`SequenceStore::reserve_locked`] |
//! | `PREFIX/workers/EGROUP/WWWWWWWWWWWWWWWWWWWW/lease` | a worker id's lease (on an etcd lease), its fence |
//! | `PREFIX/workers/EGROUP/WWWWWWWWWWWWWWWWWWWW/floor` | its fence and time floor, JSON; outlives leases |
//! | `PREFIX/numbers/ENAME/...` | a numbered sequence's settings, current period, counters and tickets (`numbers.rs`) |
//! | `PREFIX/tombstones/sequence/ENAME`, `PREFIX/tombstones/pool/ENAME` | what a drop of the name left, JSON [`keysmith_core::driver::Tombstone`] (its `version`: the largest row version, or pool incarnation, a dropped life reached); a drop writes its own kind's, a create of either kind reads both, starts above their [`Tombstone::max`] and compares both unchanged since it read them |
//!
//! `ENAME` is the name with `%` and `/` percent-encoded, so that no name's key
//! range contains another's. A pool of size `N` has `N` slots, `0..N`; slot
//! `s` starts out holding `start + s`, and a swap of `take` for `take + N`
//! keeps the slot, so slot `s` always holds a member equal to `start + s`
//! modulo `N`, and no two slots can hold the same member.
//!
//! # Versions and lives
//!
//! etcd gives the `next/NAME` key version 1 when the key is created and adds
//! 1 on every put, but a drop deletes the key and the next create makes it
//! anew at version 1 again: etcd's own version repeats across the lives of
//! a name, and a conditional write planned in one life (a handle's put, a
//! lease's hand-back, an alteration) could match the next one. So the
//! version keysmith reports is offset by the life:
//!
//! - a create reads the name's tombstones of both kinds and writes
//!   `incarnation` = [`Tombstone::incarnation`] (one above every version an
//!   earlier life reached) into the spec key; [`SequenceRow::version`] is
//!   `incarnation - 1 + etcd version of next/NAME`, so a created row has
//!   version = incarnation, every change adds 1, and no version repeats
//!   across lives (a drop raises the tombstone's `version` to the row's);
//! - every conditional write also pins the life, not only the version: a
//!   write planned from a row this store read (the atomic and locked
//!   reservations, the fence of a row of an older generation) compares the
//!   mod revision its `next` key was read at; a write that has only the
//!   caller's version ([`SequenceStore::put_if_version`],
//!   [`SequenceStore::alter_if_version`]) compares the `next` key's create
//!   revision with the life this store last read of the name (a guess,
//!   remembered per name) and its etcd version with the caller's version in
//!   that life. When the guess was wrong, the row read back names its life,
//!   and the write is tried again in it only if the caller's version is the
//!   row's. A version of an earlier life is below every version of the
//!   current one, so it never matches: nothing planned before a drop writes
//!   after it.
//!
//! Why not keep the `next` key across drops, so that etcd's version goes on
//! by itself? A pool's life must also count (a sequence created under a
//! dropped pool's name starts above the pool's incarnation, and the other
//! way round), and pools have no `next` key; nor could a sequence's version
//! be raised above a tombstone written elsewhere (by hand, or a restore)
//! without one put per version. The offset serves both kinds.
//!
//! A fence (the first write in a new generation, [`SequenceRow::fence`])
//! raises the row's version by [`FENCE_VERSION_STEP`](keysmith_core::store::FENCE_VERSION_STEP), as in the other
//! stores, but etcd adds only 1 to the `next` key's version: the rest is
//! `fences` in the spec key, counted also by the etcd version of the
//! `fences/NAME` key that the fence puts in the same transaction, and a
//! write that has only the caller's version compares both. Without it a
//! fenced row has the version of the first write the restored copy lost,
//! and a hand-back planned on that write (its block's tail) matched it and
//! moved `next` back under values handed out before the restore
//! (`etcd_cluster.rs`, `a_hand_back_planned_on_a_write_a_restore_lost_is_refused`).
//!
//! Every write of `next` is one transaction with its compares, so a
//! conditional put is a single round trip when this store knows the
//! sequence's life (it read or wrote the row before, as a handle always
//! has), two otherwise; on a mismatch the same transaction returns the
//! current row. A sequence created before lives were recorded has no
//! `incarnation` (0): its version is the etcd version, as it always was.
//!
//! # Strategies
//!
//! - **Optimistic** ([`SequenceStore::put_if_version`]): one transaction, compare the
//!   version, put `next`, read the row back; or, on a mismatch, read the row.
//! - **Atomic** ([`SequenceStore::reserve_atomic`], through the store's
//!   [`AtomicReserve`](keysmith_core::store::AtomicReserve) capability): etcd
//!   has no server-side arithmetic, so this is one compare-and-put
//!   transaction planned from the row this store last wrote (or a fresh
//!   read), and on a conflict retried from the row the failed transaction
//!   returned. It gives up with [`Error::Contention`] after
//!   [`ATOMIC_ATTEMPTS`] lost races.
//! - **Locked** ([`SequenceStore::reserve_locked`]): grants a lease of
//!   [`LOCK_TTL_SECS`] seconds (kept alive while held), takes etcd's lock
//!   `PREFIX/locks/ENAME` with it, reads the row, and writes `next` in a
//!   transaction that also checks the lock key still exists (so a holder whose
//!   lease ran out cannot write) and the version is unchanged (so it is safe
//!   next to optimistic writers). Revoking the lease afterwards deletes the
//!   lock key, which releases the lock. A holder that dies blocks others for at
//!   most the lease TTL.
//!
//! A sequence dropped and created again starts above every version of its
//! earlier lives (*Versions and lives*): a handle, lease or hand-back that
//! still quotes a version from before the drop never matches, and the core
//! turns that into [`Error::Dropped`].
//!
//! # Pools
//!
//! - [`PoolStore::create_pool`] writes a pool of up to 100 members in one
//!   transaction. A larger one (etcd takes at most 128 operations per
//!   transaction) is written in batches under a claim key and published with
//!   its meta key at the end; until then it does not exist for any other
//!   call, and `create_pool` of the same name says it already exists. A
//!   creator that dies half-way leaves the claim: [`PoolStore::drop_pool`] clears it.
//! - [`PoolStore::sample_members`] draws `k` slots uniformly
//!   (`sample_slots` in the store module) and reads them in one transaction of gets that
//!   also compares the pool's meta key is the one whose start and size the
//!   slots were drawn from (its create revision): one round trip (with more
//!   than 100 slots, one per 100, sent together). Every member
//!   is equally likely, whatever the values.
//! - [`PoolStore::swap_member`] is one transaction: it compares the meta key's
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
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, KeyValue,
    LockOptions, TlsOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use serde::{Deserialize, Serialize};

use keysmith_core::driver::remembered::Remembered;
use keysmith_core::driver::{
    Alteration, CountsDelta, POOL_KIND, PoolRow, PoolSpec, PoolStore, Put, RateMarks, Reservation,
    SEQUENCE_KIND, SequenceCounts, SequenceRow, SequenceSpec, SequenceStore, Store, Tombstone,
};
use keysmith_core::{Error, Result};

mod causes;
mod generation;
mod pools;
mod url;
use causes::Cause;
/// The etcd client this crate speaks (`etcd-client`), for callers that need
/// its types next to an [`EtcdStore`]: tests that write keys by hand.
pub use etcd_client;
use pools::PoolMeta;
pub use url::EtcdUrl;
mod numbers;
mod sequences;
mod workers;

/// Deadline of one request to etcd.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Deadline for opening a TCP connection to one endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Time to live of the lease behind a lock of [`SequenceStore::reserve_locked`]: how
/// long a dead holder can block others.
pub const LOCK_TTL_SECS: i64 = 10;

/// How long [`SequenceStore::reserve_locked`] waits for the lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(3 * LOCK_TTL_SECS as u64);

/// How many lost races [`SequenceStore::reserve_atomic`] takes before it gives up.
pub const ATOMIC_ATTEMPTS: u32 = 64;

/// The kinds of tombstone a name can have, in the order
/// [`EtcdStore::read_tombstones`] reads them.
const TOMBSTONE_KINDS: [&str; 2] = [SEQUENCE_KIND, POOL_KIND];

/// The key prefix used when the URL names none.
pub const DEFAULT_PREFIX: &str = "keysmith";

// gRPC status codes for requests etcd refuses as malformed (not transient).
const GRPC_INVALID_ARGUMENT: i32 = 3;
const GRPC_FAILED_PRECONDITION: i32 = 9;
const GRPC_OUT_OF_RANGE: i32 = 11;

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
    pool_meta: Arc<Remembered<PoolMeta>>,
    /// The row each sequence had after this store's last atomic reservation
    /// of it: the next one compares it and writes at once (`sequences.rs`).
    row_hints: Arc<Remembered<sequences::RowHint>>,
    /// The life of each sequence this store last read (`sequences.rs`,
    /// `Life`): a guess that conditional writes check in etcd.
    lives: Arc<Remembered<sequences::Life>>,
    /// The store's generation as this process knows it (`generation.rs`).
    generation: Arc<generation::Tracker>,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects to the cluster a URL names (see [`EtcdUrl::parse`]) and checks
    /// it answers.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad URL, a refused user or password,
    /// and a failed TLS handshake (a certificate the CA did not sign, one
    /// for another host name, a missing or refused client certificate), each
    /// saying what to fix; [`Error::Unavailable`] when no endpoint answers
    /// within [`REQUEST_TIMEOUT`] or the cluster has no leader.
    pub async fn connect(url: &str) -> Result<EtcdStore> {
        let parsed = EtcdUrl::parse(url)?;
        let hints = Hints::of(&parsed);
        let store = EtcdStore::connect_lazy(parsed).await?;
        store
            .answer_a_read()
            .await
            .map_err(|(e, cause)| hints.explain(e, cause))?;
        Ok(store)
    }

    /// Like [`EtcdStore::connect`] without the check: the first request
    /// finds out whether the cluster is up.
    ///
    /// With a user, the client logs in here (one request to an endpoint).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the client rejects an endpoint or its
    /// TLS files, or, with a user, when the login fails on every endpoint.
    pub async fn connect_lazy(url: EtcdUrl) -> Result<EtcdStore> {
        let hints = Hints::of(&url);
        let mut options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            // No channel-wide request timeout: `call` sets one per request
            // (a lock may wait longer than a read).
            // Notice a dead peer that did not close the connection.
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true)
            // A member cut off from the quorum fails fast instead of hanging.
            .with_require_leader(true);
        if let Some(tls) = &url.tls {
            let mut t = TlsOptions::new().timeout(CONNECT_TIMEOUT);
            t = match &tls.ca {
                Some((_, pem)) => t.ca_certificate(Certificate::from_pem(pem)),
                None => t.with_native_roots(),
            };
            if let Some((cert, key)) = &tls.identity {
                t = t.identity(Identity::from_pem(cert, key));
            }
            options = options.with_tls(t);
        }
        if let Some((user, password)) = &url.user {
            options = options
                .with_user(user.clone(), password.clone())
                .with_auto_token_refresh(true);
        }
        // One client per endpoint rather than one balancing over all: the
        // balancer routes requests to a dead endpoint as readily as to a live
        // one. `call` sticks to one endpoint and moves on when it fails.
        let mut clients = Vec::with_capacity(url.endpoints.len());
        for ep in &url.endpoints {
            let client = tokio::time::timeout(
                REQUEST_TIMEOUT,
                Client::connect([ep], Some(options.clone())),
            )
            .await
            .map_err(|_| {
                Error::Unavailable(format!(
                    "etcd endpoint {ep}: no answer to the login within {REQUEST_TIMEOUT:?}; check that etcd is up and reachable"
                ))
            })?
            .map_err(|e| {
                hints.explain(
                    Error::invalid(format!(
                        "etcd endpoint {ep}: {}",
                        keysmith_core::driver::error_chain(&e)
                    )),
                    causes::classify(&e),
                )
            })?;
            clients.push(client);
        }
        Ok(EtcdStore {
            clients,
            current: Arc::new(AtomicUsize::new(0)),
            endpoints: url.endpoints,
            prefix: format!("{}/", url.prefix),
            pool_meta: Arc::new(Remembered::new()),
            row_hints: Arc::new(Remembered::new()),
            lives: Arc::new(Remembered::new()),
            generation: Arc::default(),
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

    /// Put by every fence of the sequence's life: its etcd version counts
    /// them (see `sequences::row_version`).
    fn fences_key(&self, name: &str) -> String {
        format!("{}fences/{name}", self.prefix)
    }

    fn counts_key(&self, name: &str) -> String {
        format!("{}counts/{name}", self.prefix)
    }

    fn pool_key(&self, name: &str) -> String {
        format!("{}pools/{name}", self.prefix)
    }

    fn pool_marks_key(&self, name: &str) -> String {
        format!("{}pool-marks/{}", self.prefix, escape(name))
    }

    fn creating_key(&self, name: &str) -> String {
        format!("{}pool-creating/{}", self.prefix, escape(name))
    }

    fn tombstone_key(&self, kind: &str, name: &str) -> String {
        format!("{}tombstones/{kind}/{}", self.prefix, escape(name))
    }

    /// The tombstone in `kv` (`None`: nothing dropped yet).
    fn tombstone_of(&self, kind: &str, name: &str, kv: Option<&KeyValue>) -> Result<Tombstone> {
        kv.map_or(Ok(Tombstone::default()), |kv| {
            serde_json::from_slice(kv.value()).map_err(|e| {
                Error::Corrupt(format!(
                    "the tombstone of {kind} {name:?} under etcd prefix {:?} cannot be read ({e}); was it written by a newer keysmith?",
                    self.prefix
                ))
            })
        })
    }

    /// The compare that the tombstone read as `kv` is still the one stored
    /// (a missing key has mod revision 0).
    fn tombstone_unchanged(&self, kind: &str, name: &str, kv: Option<&KeyValue>) -> Compare {
        Compare::mod_revision(
            self.tombstone_key(kind, name),
            CompareOp::Equal,
            kv.map_or(0, KeyValue::mod_revision),
        )
    }

    /// The put of tombstone `t`.
    fn tombstone_put(&self, kind: &str, name: &str, t: Tombstone) -> Result<TxnOp> {
        let v = serde_json::to_vec(&t).map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(TxnOp::put(self.tombstone_key(kind, name), v, None))
    }

    /// Reads the name's tombstones of both kinds in one snapshot: their
    /// [`Tombstone::max`] (one name has one history, whatever its kind:
    /// `store/tombstones.rs`), and their key-values, sequence's then
    /// pool's, for [`Self::tombstones_unchanged`].
    async fn read_tombstones(&self, name: &str) -> Result<(Tombstone, [Option<KeyValue>; 2])> {
        let txn = Txn::new()
            .and_then(TOMBSTONE_KINDS.map(|k| TxnOp::get(self.tombstone_key(k, name), None)));
        let resp = self.txn("read a tombstone", txn).await?;
        let ops = resp.op_responses();
        let kvs = [first_kv(&ops, 0)?, first_kv(&ops, 1)?];
        let mut t = Tombstone::default();
        for (kind, kv) in TOMBSTONE_KINDS.iter().zip(&kvs) {
            t = t.max(self.tombstone_of(kind, name, kv.as_ref())?);
        }
        Ok((t, kvs))
    }

    /// The compares that the tombstones [`Self::read_tombstones`] read are
    /// still the ones stored.
    fn tombstones_unchanged(&self, name: &str, kvs: &[Option<KeyValue>; 2]) -> [Compare; 2] {
        [
            self.tombstone_unchanged(TOMBSTONE_KINDS[0], name, kvs[0].as_ref()),
            self.tombstone_unchanged(TOMBSTONE_KINDS[1], name, kvs[1].as_ref()),
        ]
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
    async fn call_within<T, F, Fut>(&self, op: &str, deadline: Duration, request: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.call_classified(op, deadline, request)
            .await
            .map_err(|(e, _)| e)
    }

    /// [`Self::call_within`], with the failure's [`Cause`] read from the
    /// driver's errors (the most specific over the endpoints tried), for
    /// [`Hints::explain`].
    async fn call_classified<T, F, Fut>(
        &self,
        op: &str,
        deadline: Duration,
        mut request: F,
    ) -> std::result::Result<T, (Error, Option<Cause>)>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let n = self.clients.len();
        let first = self.current.load(Ordering::Relaxed) % n;
        let mut failures = Vec::new();
        let mut cause: Option<Cause> = None;
        for k in 0..n {
            let i = (first + k) % n;
            let why = match tokio::time::timeout(deadline, request(self.clients[i].clone())).await {
                Ok(Ok(v)) => {
                    if k > 0 {
                        self.current.store(i, Ordering::Relaxed);
                    }
                    return Ok(v);
                }
                Ok(Err(e)) => {
                    let here = causes::classify(&e);
                    cause = match (cause, here) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    match &e {
                        etcd_client::Error::GRpcStatus(s)
                            if matches!(
                                i32::from(s.code()),
                                GRPC_INVALID_ARGUMENT
                                    | GRPC_FAILED_PRECONDITION
                                    | GRPC_OUT_OF_RANGE
                            ) =>
                        {
                            return Err((
                                Error::invalid(format!(
                                    "etcd at {} rejected the request to {op}: {}",
                                    self.endpoints[i],
                                    s.message()
                                )),
                                here,
                            ));
                        }
                        etcd_client::Error::GRpcStatus(s) => {
                            format!("{:?}: {}", s.code(), s.message())
                        }
                        e => keysmith_core::driver::error_chain(e),
                    }
                }
                Err(_) => format!("no answer within {deadline:?}"),
            };
            failures.push(format!("{}: {why}", self.endpoints[i]));
        }
        // Start the next call elsewhere.
        self.current.store((first + 1) % n, Ordering::Relaxed);
        Err((self.unavailable(op, failures.join("; ")), cause))
    }

    /// [`Store::ping`], with the failure's [`Cause`] for [`Hints::explain`]:
    /// a linearizable read, answered only when a quorum has a leader.
    async fn answer_a_read(&self) -> std::result::Result<(), (Error, Option<Cause>)> {
        let key = self.prefix.clone();
        self.call_classified("answer a read", REQUEST_TIMEOUT, |mut c| {
            let key = key.clone();
            async move { c.get(key, Some(GetOptions::new().with_count_only())).await }
        })
        .await
        .map(drop)
    }

    async fn call<T, F, Fut>(&self, op: &str, request: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.call_within(op, REQUEST_TIMEOUT, request).await
    }

    /// Runs a transaction and notes its answer's header: a revision that
    /// went back or a new cluster id starts a new generation
    /// (`generation.rs`).
    async fn txn(&self, op: &str, txn: Txn) -> Result<TxnResponse> {
        let floor = self.generation.floor();
        let resp = self.txn_unobserved(op, txn).await?;
        self.observe(&resp, floor);
        Ok(resp)
    }

    async fn txn_unobserved(&self, op: &str, txn: Txn) -> Result<TxnResponse> {
        self.call(op, |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await
    }
}

/// What a URL says about TLS and login, to turn a failed connection into an
/// error that says what to fix.
struct Hints {
    tls: bool,
    /// Where trusted CA certificates come from.
    trusted: String,
    client_cert: bool,
    user: bool,
}

impl Hints {
    fn of(url: &EtcdUrl) -> Hints {
        Hints {
            tls: url.tls.is_some(),
            trusted: match url.tls.as_ref().and_then(|t| t.ca.as_ref()) {
                Some((path, _)) => format!("the CA in cacert={path}"),
                None => "the system's CA certificates".to_owned(),
            },
            client_cert: url.tls.as_ref().is_some_and(|t| t.identity.is_some()),
            user: url.user.is_some(),
        }
    }

    /// `e` as [`Error::InvalidArgument`] with what to do, when `cause` (the
    /// driver error's, [`causes::classify`]) is a TLS or login failure; a
    /// connection closed under TLS, or an HTTP/2 error without it, as
    /// [`Error::Unavailable`] with a likely reason; else `e` unchanged.
    fn explain(&self, e: Error, cause: Option<Cause>) -> Error {
        let text = match &e {
            Error::Unavailable(m) | Error::InvalidArgument(m) => m.clone(),
            _ => return e,
        };
        let Some(cause) = cause else {
            return e;
        };
        let why = match cause {
            Cause::UntrustedServer => format!(
                "etcd's certificate is not signed by {}; give cacert=PATH the CA certificate (PEM) that signed etcd's --cert-file",
                self.trusted
            ),
            Cause::WrongHostName => "etcd's certificate does not name the host in the store URL; connect with a host name or IP address the certificate was issued for".to_owned(),
            Cause::ClientCertRequired => CLIENT_CERT_REQUIRED.to_owned(),
            Cause::ClientCertRefused if self.tls && !self.client_cert => {
                CLIENT_CERT_REQUIRED.to_owned()
            }
            Cause::ClientCertRefused => "etcd refused the client certificate; give cert=PATH&key=PATH signed by the CA etcd trusts (--trusted-ca-file)".to_owned(),
            Cause::BadLogin => "etcd refused the user name or password; check USER in the store URL and the password (in the URL or the file password_file=PATH names)".to_owned(),
            Cause::UserEmpty => NO_USER.to_owned(),
            Cause::PermissionDenied if !self.user => NO_USER.to_owned(),
            Cause::Closed | Cause::Cancelled if self.tls => {
                let what = if self.client_cert {
                    "as etcd does when it refuses a client certificate; check that cert=PATH was signed by the CA etcd trusts (--trusted-ca-file)"
                } else {
                    "as etcd does when it requires a client certificate (--client-cert-auth) and gets none; add cert=PATH&key=PATH, signed by the CA etcd trusts (--trusted-ca-file)"
                };
                return Error::Unavailable(format!(
                    "etcd closed the TLS connection ({text}), {what}"
                ));
            }
            Cause::Closed | Cause::Http2 if !self.tls => {
                return Error::Unavailable(format!(
                    "{text}; if etcd serves TLS (https), use etcds:// or give cacert=PATH"
                ));
            }
            Cause::PermissionDenied | Cause::Cancelled | Cause::Closed | Cause::Http2 => {
                return e;
            }
        };
        Error::InvalidArgument(format!("{why} ({text})"))
    }
}

/// What [`Hints::explain`] says when etcd wants a client certificate.
const CLIENT_CERT_REQUIRED: &str = "etcd requires a client certificate (--client-cert-auth) and gets none; add cert=PATH&key=PATH, a certificate signed by the CA etcd trusts (--trusted-ca-file)";
/// What [`Hints::explain`] says when etcd wants a user.
const NO_USER: &str = "etcd has auth enabled and the store URL gives no user; write etcd://USER@HOST:PORT?password_file=PATH";

#[async_trait]
impl Store for EtcdStore {
    async fn ping(&self) -> Result<()> {
        self.answer_a_read().await.map_err(|(e, _)| e)
    }

    async fn generation(&self) -> Result<String> {
        self.current_generation().await
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

/// The name [`escape`] made `escaped` from.
fn unescape(escaped: &str) -> String {
    keysmith_core::driver::credentials::percent_decode(escaped)
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
    fn credentials_and_tls_in_urls() {
        let u = EtcdUrl::parse("etcd://app:p%40ss%3Aw@a:1,b:2/pre").unwrap();
        assert_eq!(u.endpoints, ["a:1", "b:2"]);
        assert_eq!(u.prefix, "pre");
        assert_eq!(u.user(), Some("app"));
        assert_eq!(u.user.as_ref().unwrap().1, "p@ss:w");
        assert!(!u.uses_tls());
        assert!(!format!("{u:?}").contains("p@ss"), "{u:?}");
        assert_eq!(
            keysmith_core::driver::redact_url("etcd://app:p%40ss@a:1,b:2/pre"),
            "etcd://app:***@a:1,b:2/pre"
        );
        // Existing URLs keep their meaning.
        let plain = EtcdUrl::parse("etcd://127.0.0.1:2379/k").unwrap();
        assert!(!plain.uses_tls() && plain.user().is_none());
        let tls = EtcdUrl::parse("etcds://h:2379").unwrap();
        assert!(tls.uses_tls());
        assert_eq!(tls.prefix, DEFAULT_PREFIX);
        for (bad, needle) in [
            ("etcd://:pw@h:1", "empty user name"),
            ("etcd://u:secret@h:1?cacert=", "needs a file path"),
            ("etcd://u:secret@h:1?key=/k.pem", "cert and key go together"),
        ] {
            let err = EtcdUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
            assert!(!err.contains("secret") && !err.contains(":pw@"), "{err}");
        }
    }

    #[test]
    fn escaped_names_have_no_slash_and_stay_distinct() {
        assert_eq!(escape("a/b"), "a%2Fb");
        assert_eq!(escape("a%2Fb"), "a%252Fb");
        assert_ne!(escape("a/b"), escape("a%2Fb"));
        assert!(!escape("x/y/z").contains('/'));
        for name in ["a/b", "a%2Fb", "100%", "%%/%/", "plain", "é/ü"] {
            assert_eq!(unescape(&escape(name)), name);
        }
        assert_eq!(prefix_end("p/pool-members/a/"), "p/pool-members/a0");
    }
}

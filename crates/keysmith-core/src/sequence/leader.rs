//! Leader-ordered sequences ([`Order::Leader`](crate::store::Order::Leader)): one process at a time, the
//! holder of the sequence's *leader lease*, hands values out from blocks it
//! reserved ahead, in the order calls arrive. Strict order at memory speed.
//!
//! # The lease
//!
//! The leader lease is a worker lease of the store contract
//! ([`WorkerStore`](crate::store::WorkerStore)): group [`leader_group`]
//! (`leader/NAME`) with one worker id. Its *fence*, bumped by every
//! acquisition, is the leader's *term*; its holder text starts with the
//! address the leader advertises (`http://host:port`), which followers hand
//! to callers ([`Error::NotLeader`]). Expiry is decided by the store's
//! clock (the system clock for SQLite, `clock_timestamp()` for PostgreSQL,
//! an etcd lease for etcd), as for every worker lease; a lease that expired
//! is acquired by whoever asks next. No new store operation is needed.
//!
//! # Why order holds, across every process and through failover
//!
//! Claim: a value returned before another call was *made* is smaller than
//! that call's value, whichever processes serve the two calls.
//!
//! 1. *One term.* The leader takes values from its blocks under one mutex, in
//!    the order calls arrive; its blocks are reserved one at a time, each
//!    above the last (a sequence row's `next` only grows), so values taken
//!    later are larger.
//! 2. *Local deadline.* Before each acquire or renewal request is sent the
//!    leader reads its lease clock (`t0`); once the store answers, the
//!    leader may issue until `t0 + ttl x (1 - 2 x MAX_CLOCK_DRIFT)`. The
//!    store measures `ttl` from a moment after `t0` (it received the
//!    request later), by a clock whose rate is within `MAX_CLOCK_DRIFT` of
//!    real time, so the lease expires at real time `>= t0 + ttl / (1 +
//!    drift)`; the leader's clock, within the same bound, stops it by real
//!    time `t0 + ttl (1 - 2 drift) / (1 - drift)`, which is earlier
//!    (`(1 - 2d)(1 + d) <= 1 - d`). So every issue check of a term happens
//!    before its lease expires by the store's time.
//! 3. *Check before return.* The deadline is checked after the values were
//!    taken (after the call arrived) and before they are returned: a value
//!    that passed the check was issued before the lease expired; one that
//!    failed it is never returned (a gap, never a duplicate).
//! 4. *Takeover.* A new leader acquires only after the old lease expired by
//!    the store's time (the store refuses before), so after every issue
//!    check of the old term. Every block the new leader reserves is
//!    reserved after its acquisition, hence above every block reserved
//!    before it.
//! 5. *Fencing late writes.* A block is used only after a *checked renewal*
//!    that follows its reservation succeeded: the renewal quotes the term's
//!    fence, and fails once anyone acquired the lease since. So every block
//!    an old leader issues from was reserved before any later term began,
//!    and lies below every block of that later term. A paused or
//!    partitioned leader's late reservation is refused this way (its values
//!    are a gap), and its late issue checks fail on its monotonic deadline.
//!
//! From 1-5: if call A returned value `a` before call B was made, and B got
//! `b` in a later term, `a`'s block was confirmed before B's term began and
//! `b`'s block reserved after, so `a < b`; B cannot be served in an earlier
//! term than A, because B's issue check came after A's, which came after
//! the acquisition of A's term, which came after every issue check of the
//! earlier terms (2, 4).
//!
//! # Clock assumption
//!
//! Every clock that measures a lease (the leader's monotonic clock and the
//! store's clock) runs within [`MAX_CLOCK_DRIFT`] (1%, 10 ms per second) of
//! real time over a lease's time to live, and the store's clock is not
//! stepped backwards or forwards while leases are live (NTP slews; a step of
//! the SQLite host's clock by more than the margin `2 x 1% x ttl` can break
//! order, never uniqueness). The leader's clock is
//! `LeaseInstant` (`clock.rs`): on Linux `CLOCK_BOOTTIME`, which counts
//! the time the host spends suspended, so a leader suspended past its
//! lease finds its deadline passed when it resumes. Elsewhere it is
//! `Instant`, which may not count a suspend: there the leader's host must
//! not be suspended while it leads (a host suspended past its lease and
//! resumed could serve values from memory before its deadline notices:
//! order across that failover, never uniqueness). A suspend in the middle
//! of a call is harmless anywhere: a call that overlaps the next term's
//! calls may be ordered either way. Uniqueness does not depend on clocks at all:
//! every value comes from a durable block reservation.
//!
//! # Failover time
//!
//! A leader that dies without releasing its lease is replaced once the
//! lease expires by the store's clock: at most the time to live
//! ([`DEFAULT_LEADER_TTL`], 3 s) after its last renewal, plus one
//! acquisition and one reservation. A leader that closes releases the lease
//! and is replaced at once.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Serialize;

use crate::clock::LeaseInstant;

use crate::store::{Store, WorkerClaim};
use crate::{Error, Result, validate_name};

use super::strategy::{Allocator, Strategy};
use super::{HighWater, MAX_BATCH, describe};

/// The time to live of a leader lease by default: a dead leader is
/// replaced within this time (plus one acquisition and reservation).
pub const DEFAULT_LEADER_TTL: Duration = Duration::from_secs(3);

/// The shortest leader lease time to live accepted.
pub const MIN_LEADER_TTL: Duration = Duration::from_millis(200);

/// The clock assumption: every clock that measures a lease runs within this
/// share of real time (1%: 10 ms per second). The leader stops issuing
/// `2 x MAX_CLOCK_DRIFT x ttl` before its lease can have expired.
pub const MAX_CLOCK_DRIFT: f64 = 0.01;

/// The block a leader reserves at least, whatever the sequence's own block:
/// values go out from memory, so blocks are large.
pub const MIN_LEADER_BLOCK: i64 = 1000;

/// The prefix of a leader lease's worker group (reserved: see
/// [`crate::store::check_user_group`]).
pub const LEADER_GROUP_PREFIX: &str = crate::store::LEADER_GROUP_PREFIX;

/// The worker group whose one worker id is the leader lease of sequence
/// `name`: `leader/NAME`.
///
/// # Errors
/// [`Error::InvalidName`] when `name` is not a valid name, or too long to
/// take the prefix.
pub fn leader_group(name: &str) -> Result<String> {
    validate_name(name)?;
    let group = format!("{LEADER_GROUP_PREFIX}{name}");
    validate_name(&group).map_err(|_| Error::InvalidName {
        name: crate::name::shorten(name),
        reason: format!(
            "a leader-ordered sequence's name must be at most {} bytes (its lease is named {LEADER_GROUP_PREFIX}NAME)",
            crate::MAX_NAME_BYTES - LEADER_GROUP_PREFIX.len()
        ),
    })?;
    Ok(group)
}

/// The address a leader lease's holder text advertises (its first word, if
/// it is an `http://` or `https://` URL).
pub fn advertised_address(holder: &str) -> Option<&str> {
    holder
        .split_whitespace()
        .next()
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
}

/// Checks an address to advertise: an `http://` or `https://` URL with a
/// host, no user or password, no whitespace.
///
/// # Errors
/// [`Error::InvalidArgument`] saying what is accepted.
pub fn check_advertise(url: &str) -> Result<()> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let ok = rest.is_some_and(|r| {
        let host = r.split('/').next().unwrap_or("");
        !host.is_empty() && !host.contains('@')
    }) && !url.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "the advertised address must be an http:// or https:// URL with a host and no user or password, such as http://10.0.0.5:8080; got {url:?}"
        )))
    }
}

/// How a [`LeaderSequence`] leads.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderOptions {
    /// The address followers send callers to while this process leads
    /// (`http://host:port`); `None` for a process that serves no HTTP (a
    /// CLI): it leads only for its own calls, and followers tell callers
    /// it advertises no address.
    pub advertise: Option<String>,
    /// The lease's time to live (by the store's clock); renewed every
    /// quarter of it. At least [`MIN_LEADER_TTL`], at most a day.
    pub ttl: Duration,
    /// Values per reservation; `None`: the sequence's block, at least
    /// [`MIN_LEADER_BLOCK`].
    pub block: Option<i64>,
    /// How blocks are reserved.
    pub strategy: Strategy,
    /// How long a reservation retries lost races.
    pub retry_budget: Duration,
}

impl Default for LeaderOptions {
    fn default() -> Self {
        LeaderOptions {
            advertise: None,
            ttl: DEFAULT_LEADER_TTL,
            block: None,
            strategy: Strategy::default(),
            retry_budget: crate::DEFAULT_RETRY_BUDGET,
        }
    }
}

impl LeaderOptions {
    /// Checks the address, the time to live and the block.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the parameter.
    pub fn validate(&self) -> Result<()> {
        if let Some(a) = &self.advertise {
            check_advertise(a)?;
        }
        if self.ttl < MIN_LEADER_TTL || self.ttl > crate::store::MAX_WORKER_TTL {
            return Err(Error::invalid(format!(
                "a leader lease's ttl must be between {} ms and a day, got {:?}",
                MIN_LEADER_TTL.as_millis(),
                self.ttl
            )));
        }
        if let Some(b) = self.block {
            crate::store::check_count("block", b)?;
        }
        Ok(())
    }

    /// How long after `t0` (read before the request) a term may issue.
    fn safe_for(&self) -> Duration {
        self.ttl.mul_f64(1.0 - 2.0 * MAX_CLOCK_DRIFT)
    }
}

/// A handle on a leader-ordered sequence. While this process holds the
/// sequence's leader lease it hands values out from memory; otherwise
/// [`Self::next_n`] acquires the lease if it is free, or fails with
/// [`Error::NotLeader`] naming the leader. Share it (`Arc`) between tasks:
/// one handle per process is the leader, many handles in one process would
/// compete for the lease.
///
/// Dropped without [`Self::close`], the lease expires after its time to
/// live (the next leader waits that long).
#[derive(Debug)]
pub struct LeaderSequence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    name: String,
    group: String,
    holder: String,
    options: LeaderOptions,
    block: i64,
    alloc: Allocator,
    state: Mutex<State>,
    /// One acquisition, renewal or reservation at a time.
    work: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct State {
    term: Option<Term>,
    /// Confirmed blocks, increasing; the front is being handed out.
    blocks: VecDeque<Range<i64>>,
    available: i64,
    prefetching: bool,
    renewer: Option<tokio::task::AbortHandle>,
    closed: bool,
    /// Values handed out, and values dropped (a lapsed term's, those past
    /// a deadline), since the handle opened: recorded in the sequence's
    /// counts when it closes.
    handed_out: i64,
    abandoned: i64,
    /// Terms this handle began (acquisitions of the lease), and terms it
    /// found taken by another process at renewal.
    terms_begun: u64,
    terms_lost: u64,
}

/// How a [`LeaderSequence`] handle has led so far ([`LeaderSequence::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LeaderStats {
    /// Whether it leads now (a term whose local deadline has not passed).
    pub leading: bool,
    /// Terms it began: each an acquisition of the lease. Many in a short
    /// time: the lease flaps between processes (or lapses between calls).
    pub terms_begun: u64,
    /// Terms it found taken by another process when it renewed them.
    pub terms_lost: u64,
}

#[derive(Debug, Clone, Copy)]
struct Term {
    fence: i64,
    /// Issue checks must pass before this instant.
    deadline: LeaseInstant,
    /// The lease's time floor, handed back on release.
    until_ms: i64,
}

impl State {
    fn take(&mut self, n: i64) -> Vec<i64> {
        let mut out = Vec::with_capacity(n as usize);
        while (out.len() as i64) < n {
            let Some(front) = self.blocks.front_mut() else {
                break;
            };
            let want = n - out.len() as i64;
            let end = front.end.min(front.start + want);
            out.extend(front.start..end);
            front.start = end;
            if front.is_empty() {
                self.blocks.pop_front();
            }
        }
        self.available -= out.len() as i64;
        out
    }

    /// The term ended: its values are a gap.
    fn lose(&mut self) {
        self.abandoned += self.available;
        self.term = None;
        self.blocks.clear();
        self.available = 0;
        if let Some(r) = self.renewer.take() {
            r.abort();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut st) = self.state.lock()
            && let Some(r) = st.renewer.take()
        {
            r.abort();
        }
    }
}

impl LeaderSequence {
    /// Opens a handle on leader-ordered sequence `name`. Reads the row and
    /// the numbering; acquires nothing yet. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::NotFound`] (with similar names),
    /// [`Error::InvalidArgument`] for bad `options`, [`Error::WrongKind`]
    /// for a sequence that is not leader-ordered, what the store fails with.
    pub async fn open(
        store: Arc<dyn Store>,
        name: &str,
        options: LeaderOptions,
    ) -> Result<LeaderSequence> {
        options.validate()?;
        let group = leader_group(name)?;
        let row = describe(&*store, name).await?;
        match store.read_numbering(name).await? {
            Some(n) if n.is_leader() => {}
            _ => {
                return Err(Error::WrongKind(format!(
                    "sequence {name:?} is not leader-ordered: open it with Sequence::builder() or AnySequence::open"
                )));
            }
        }
        let block = options.block.unwrap_or(row.block.max(MIN_LEADER_BLOCK));
        let holder = match &options.advertise {
            Some(a) => format!("{a} {}", crate::ids::holder()),
            None => crate::ids::holder(),
        };
        let alloc = Allocator::new(
            store.clone(),
            row,
            options.strategy,
            options.retry_budget,
            None,
            Arc::new(HighWater::default()),
        );
        Ok(LeaderSequence {
            inner: Arc::new(Inner {
                store,
                name: name.to_owned(),
                group,
                holder,
                options,
                block,
                alloc,
                state: Mutex::new(State::default()),
                work: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The sequence's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Values per reservation.
    pub fn block(&self) -> i64 {
        self.inner.block
    }

    /// The term (the lease's fence) this handle leads in now, if it leads
    /// and its local deadline has not passed.
    pub fn term(&self) -> Option<i64> {
        let st = self.inner.state.lock().ok()?;
        st.term
            .filter(|t| LeaseInstant::now() < t.deadline)
            .map(|t| t.fence)
    }

    /// How this handle has led so far.
    pub fn stats(&self) -> LeaderStats {
        let st = self.inner.lock();
        LeaderStats {
            leading: st.term.is_some_and(|t| LeaseInstant::now() < t.deadline),
            terms_begun: st.terms_begun,
            terms_lost: st.terms_lost,
        }
    }

    /// `n` values (1 to [`MAX_BATCH`]), ascending; each larger than every
    /// value any process returned for this sequence before this call was
    /// made. Acquires the leader lease when no live one is held.
    ///
    /// # Errors
    /// [`Error::NotLeader`] when another process holds the lease (with its
    /// advertised address, if any); [`Error::Closed`] after
    /// [`Self::close`]; [`Error::InvalidArgument`] for a bad `n`;
    /// [`Error::Exhausted`]; what the store fails with.
    pub async fn next_n(&self, n: i64) -> Result<Vec<i64>> {
        if !(1..=MAX_BATCH).contains(&n) {
            return Err(Error::invalid(format!(
                "count must be between 1 and {MAX_BATCH}, got {n}"
            )));
        }
        loop {
            if let Some(values) = self.try_take(n)? {
                return Ok(values);
            }
            self.inner.make_ready(n).await?;
        }
    }

    /// The fast path: values from memory under a live term, checked against
    /// the deadline after they were taken. `None`: not leading, the term's
    /// deadline passed, or too few values.
    fn try_take(&self, n: i64) -> Result<Option<Vec<i64>>> {
        let inner = &self.inner;
        let mut st = inner.lock();
        if st.closed {
            return Err(Error::Closed {
                name: inner.name.clone(),
            });
        }
        let Some(term) = st.term else {
            return Ok(None);
        };
        if st.available < n {
            return Ok(None);
        }
        let values = st.take(n);
        // After the call arrived, before the values are returned: a term
        // whose deadline passed returns nothing (the values are a gap).
        if LeaseInstant::now() >= term.deadline {
            tracing::debug!(sequence = %inner.name, skipped = values.len(), "leader term past its deadline: values skipped");
            st.abandoned += values.len() as i64;
            return Ok(None);
        }
        st.handed_out += n;
        let low = st.available < inner.block / 2 && !st.prefetching;
        if low {
            st.prefetching = true;
        }
        drop(st);
        if low {
            let weak = Arc::downgrade(&self.inner);
            tokio::spawn(async move {
                let Some(inner) = weak.upgrade() else { return };
                if let Err(e) = inner.make_ready(inner.block).await {
                    tracing::debug!(sequence = %inner.name, "leader prefetch failed: {e}");
                }
                inner.lock().prefetching = false;
            });
        }
        Ok(Some(values))
    }

    /// Stops leading: drops the values in memory (a gap) and releases the
    /// lease, so that another process leads at once. Records in the
    /// sequence's counts ([`crate::store::SequenceStore::record_counts`])
    /// the values this handle handed out and those it dropped (best effort:
    /// a count not recorded only leaves them unaccounted). Later calls fail
    /// with [`Error::Closed`].
    ///
    /// # Errors
    /// What the store fails with releasing (the lease then expires after
    /// its time to live).
    pub async fn close(&self) -> Result<()> {
        let _work = self.inner.work.lock().await;
        let (term, delta) = {
            let mut st = self.inner.lock();
            if st.closed {
                return Ok(());
            }
            st.closed = true;
            let term = st.term;
            st.lose();
            let delta = crate::store::CountsDelta {
                handed_out: std::mem::take(&mut st.handed_out),
                abandoned: std::mem::take(&mut st.abandoned),
                ..Default::default()
            };
            (term, delta)
        };
        if delta.handed_out > 0 || delta.abandoned > 0 {
            let (store, name) = (&self.inner.store, &self.inner.name);
            if let Err(e) = store
                .record_counts(name, &delta, crate::clock::now_ms())
                .await
            {
                tracing::warn!(sequence = %name, "closed, but its counts were not recorded: {e}");
            }
        }
        if let Some(t) = term {
            self.inner
                .store
                .release_worker(&self.inner.group, 0, t.fence, t.until_ms)
                .await?;
        }
        Ok(())
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `n` values ready to take under a live term: acquires the lease,
    /// renews a term whose deadline passed, reserves and confirms a block.
    async fn make_ready(self: &Arc<Self>, n: i64) -> Result<()> {
        let _work = self.work.lock().await;
        let (term, available) = {
            let st = self.lock();
            if st.closed {
                return Err(Error::Closed {
                    name: self.name.clone(),
                });
            }
            (st.term, st.available)
        };
        let term = match term {
            None => self.acquire().await?,
            Some(t) if LeaseInstant::now() >= t.deadline => self.renew(t).await?,
            Some(t) => t,
        };
        if available >= n && LeaseInstant::now() < term.deadline {
            return Ok(());
        }
        let want = self.block.max(n - available);
        let r = self.alloc.reserve(want).await?;
        // Confirm the term after the reservation: a block reserved after
        // another process acquired the lease is never used.
        let term = self.renew(term).await?;
        {
            let mut st = self.lock();
            if st.term.is_some_and(|t| t.fence == term.fence) && !st.closed {
                st.available += r.end - r.start;
                st.blocks.push_back(r.start..r.end);
            }
        }
        Ok(())
    }

    /// A checked renewal of `term`: the new deadline, or the lease is lost
    /// ([`Error::NotLeader`], everything in memory dropped).
    async fn renew(self: &Arc<Self>, term: Term) -> Result<Term> {
        let t0 = LeaseInstant::now();
        let renewed = self
            .store
            .renew_worker(
                &self.group,
                0,
                term.fence,
                self.options.ttl,
                crate::clock::now_ms(),
                1,
            )
            .await?;
        let renewed = {
            let mut st = self.lock();
            match renewed {
                // The term ended here meanwhile (closed, or lost).
                _ if st.term.is_none_or(|t| t.fence != term.fence) => None,
                Some(until_ms) => {
                    let t = Term {
                        fence: term.fence,
                        deadline: t0 + self.options.safe_for(),
                        until_ms,
                    };
                    st.term = Some(t);
                    Some(t)
                }
                None => {
                    st.lose();
                    st.terms_lost += 1;
                    tracing::warn!(sequence = %self.name, term = term.fence, "leader lease lost: another process acquired it");
                    None
                }
            }
        };
        match renewed {
            Some(t) => Ok(t),
            None => Err(self.lost().await),
        }
    }

    /// Acquires the lease for a new term, or says who holds it.
    async fn acquire(self: &Arc<Self>) -> Result<Term> {
        let t0 = LeaseInstant::now();
        let claim = WorkerClaim {
            group: self.group.clone(),
            max_workers: 1,
            holder: self.holder.clone(),
            ttl: self.options.ttl,
            now_ms: crate::clock::now_ms(),
            window_ms: 1,
        };
        match self.store.acquire_worker(&claim).await {
            Ok(lease) => {
                let term = Term {
                    fence: lease.fence,
                    deadline: t0 + self.options.safe_for(),
                    until_ms: lease.until_ms,
                };
                {
                    let mut st = self.lock();
                    st.lose();
                    st.term = Some(term);
                    st.terms_begun += 1;
                    st.renewer = Some(spawn_renewer(Arc::downgrade(self)).abort_handle());
                }
                tracing::info!(sequence = %self.name, term = term.fence, "leading");
                Ok(term)
            }
            Err(Error::IdsUnavailable(_)) => Err(self.lost().await),
            Err(e) => Err(e),
        }
    }

    /// [`Error::NotLeader`] naming the lease's holder as the store lists it.
    async fn lost(&self) -> Error {
        let holder = match self.store.list_workers(&self.group).await {
            Ok(entries) => entries.into_iter().find_map(|e| e.holder),
            Err(e) => {
                tracing::debug!(sequence = %self.name, "listing the leader lease failed: {e}");
                None
            }
        };
        // A lease this process's address still holds from before (a
        // restart within the time to live, a handle closed and not yet
        // released) is not a leader to send callers to: they would come
        // back here. No leader right now; it expires.
        let leader = holder
            .as_deref()
            .and_then(advertised_address)
            .filter(|a| self.options.advertise.as_deref() != Some(*a))
            .map(str::to_owned);
        Error::NotLeader {
            name: self.name.clone(),
            leader,
            holder,
        }
    }
}

/// Renews the lease every quarter of its time to live while the handle
/// lives and leads.
fn spawn_renewer(weak: Weak<Inner>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let period = match weak.upgrade() {
                Some(inner) => inner.options.ttl / 4,
                None => return,
            };
            tokio::time::sleep(period).await;
            let Some(inner) = weak.upgrade() else { return };
            let _work = inner.work.lock().await;
            let term = inner.lock().term;
            let Some(term) = term else {
                return;
            };
            if let Err(e) = inner.renew(term).await {
                match e {
                    Error::NotLeader { .. } => return,
                    e => {
                        tracing::warn!(sequence = %inner.name, "renewing the leader lease failed: {e}; retrying")
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_addresses_and_options_are_checked() {
        assert_eq!(leader_group("orders").unwrap(), "leader/orders");
        let long = "x".repeat(crate::MAX_NAME_BYTES);
        assert!(matches!(
            leader_group(&long),
            Err(Error::InvalidName { .. })
        ));
        assert!(leader_group("a b").is_err());

        assert_eq!(
            advertised_address("http://10.0.0.1:80 host/12"),
            Some("http://10.0.0.1:80")
        );
        assert_eq!(advertised_address("host/12"), None);
        for ok in ["http://h:1", "https://h", "http://[::1]:8080/"] {
            check_advertise(ok).unwrap();
        }
        for bad in ["h:1", "ftp://h", "http://", "http://u:p@h", "http://h x"] {
            assert!(check_advertise(bad).is_err(), "{bad}");
        }
        let short = LeaderOptions {
            ttl: Duration::from_millis(10),
            ..LeaderOptions::default()
        };
        assert!(short.validate().is_err());
        assert!(
            LeaderOptions {
                block: Some(0),
                ..LeaderOptions::default()
            }
            .validate()
            .is_err()
        );
        LeaderOptions::default().validate().unwrap();
    }

    #[test]
    fn the_issue_deadline_ends_before_the_lease_by_any_clock_within_the_drift() {
        // The leader's local budget, run slow by the drift, ends before the
        // store's ttl, run fast by the drift.
        let o = LeaderOptions::default();
        let local = o.safe_for().as_secs_f64() / (1.0 - MAX_CLOCK_DRIFT);
        let store = o.ttl.as_secs_f64() / (1.0 + MAX_CLOCK_DRIFT);
        assert!(local < store, "{local} >= {store}");
    }

    #[test]
    fn taking_spans_blocks_in_order() {
        let mut st = State {
            blocks: VecDeque::from([1..3, 10..12]),
            available: 4,
            ..State::default()
        };
        assert_eq!(st.take(3), vec![1, 2, 10]);
        assert_eq!(st.available, 1);
        assert_eq!(st.take(1), vec![11]);
        assert!(st.blocks.is_empty());
    }
}

//! Time-ordered 64-bit ids: `time | worker | sequence`, made in memory with
//! no store round trip, the worker id leased from the store and the time
//! guarded by a floor kept there.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> keysmith_core::Result<()> {
//! use keysmith_core::ids::{IdGenerator, Layout};
//!
//! let store = keysmith_core::store::open("memory://").await?;
//! let ids = IdGenerator::builder().store(store).layout(Layout::snowflake()).build().await?;
//! let a = ids.next().await?;
//! let b = ids.next().await?;
//! assert!(b > a);
//! assert_eq!(ids.layout().decode(a)?.worker, 0);
//! ids.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! The same generator hands out RFC 9562 version-7 UUIDs
//! ([`IdGenerator::next_uuids`], [`IdFormat::Uuidv7`]) built from the same
//! time, worker id and sequence: unique by construction within a group and
//! increasing per generator ([`decode_uuidv7`] takes one apart).
//!
//! # UUIDv7 bit layout
//!
//! Big-endian, bit 0 the most significant of the 128:
//!
//! | bits     | width | field (RFC 9562 name) | content                                        |
//! |----------|-------|-----------------------|------------------------------------------------|
//! | 0..48    | 48    | `unix_ts_ms`          | the start of the id's time unit, ms since 1970 |
//! | 48..52   | 4     | `ver`                 | `0111` (7)                                      |
//! | 52..64   | 12    | `rand_a`              | the counter: the id's sequence in its time unit |
//! | 64..66   | 2     | `var`                 | `10`                                            |
//! | 66..88   | 22    | `rand_b` (first part) | the worker id                                   |
//! | 88..128  | 40    | `rand_b` (rest)       | random bits, fresh for every UUID               |
//!
//! The counter is a fixed-length dedicated counter in `rand_a` (RFC 9562
//! section 6.2, method 1), right-aligned: a layout's sequence of up to 12
//! bits fits. The worker id is right-aligned in 22 bits (the most a layout
//! has). Within one group (same store, group and layout) no two UUIDs share
//! `(unix_ts_ms, worker, counter)`, so none are equal whatever the random
//! bits; across groups they are unique by chance, as any UUIDv7. One
//! issuer's UUIDs increase as bytes and as canonical strings: its
//! `(time unit, sequence)` pairs increase, across a change of worker id
//! too, and those are the most significant fields.
//!
//! # Guarantees
//!
//! - Ids from one generator increase; ids from all generators of a group
//!   (threads, processes, hosts, crashes and restarts included) are unique,
//!   as long as they share the store, the group and the layout.
//! - Worker ids: a generator leases the lowest free worker id of its group
//!   ([`crate::store::WorkerStore`]); two live leases never share one; with
//!   all taken, [`Error::IdsUnavailable`].
//! - Time: the lease carries a floor `until_ms` kept in the store, a window
//!   ahead of the time of every id issued under it. A generator issues ids
//!   only below the floor (it renews to move it), and a new holder of the
//!   worker id starts at or above it, so it never repeats an id of a
//!   previous holder, however far its clock is behind.
//! - The clock going back: ids go on from the last time used, *borrowing*
//!   ahead of the clock by up to [`IdConfig::max_borrow`]; a sequence that
//!   overflows moves to the next time unit. When an id would run further
//!   ahead, the call waits for the clock, at most [`IdConfig::max_wait`] in
//!   all, then fails with [`Error::IdsUnavailable`] naming the skew: never
//!   a duplicate, never an unbounded wait.
//! - The lease: renewed in the background every third of its TTL; the local
//!   deadline is two thirds of the TTL after the renewal was *sent*, before
//!   the store's expiry. Past it no id is issued before a successful
//!   renewal; a renewal that finds the lease taken by another holder (the
//!   fence moved) makes the generator acquire a new worker id.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::store::{Store, WorkerClaim};
use crate::{Error, Result};

mod clock;
mod layout;
mod leases;
mod runway;
mod uuid7;

pub use clock::{Clock, ManualClock, SystemClock};
pub use layout::{
    DEFAULT_EPOCH_MS, DecodedId, IdBounds, Layout, LayoutReport, LayoutRunway, MIN_LIFETIME_YEARS,
    RUNWAY_WARNING_SECONDS, parse_time_ms,
};
pub use leases::{
    DEFAULT_GROUP_SIZE, DEFAULT_LEASE_TTL, HeldWorker, ListedWorker, WorkerLeases, WorkerList,
    list_workers,
};
pub use runway::{WORKERS_FREE_WARNING_SHARE, WorkerOccupancy, worker_occupancy};
pub use uuid7::{
    DecodedUuid, IdFormat, UUIDV7_COUNTER_BITS, UUIDV7_RANDOM_BITS, UUIDV7_WORKER_BITS,
    decode_uuidv7, uuidv7_from_parts,
};

/// The system clock's wall time, ms since the Unix epoch.
pub fn wall_ms() -> i64 {
    crate::clock::now_ms()
}

/// The group ids are made in when none is given.
pub const DEFAULT_GROUP: &str = "ids";

/// The most ids one [`IdGenerator::next_n`] call returns.
pub const MAX_BATCH: i64 = 1_000_000;

/// How a generator runs. [`IdConfig::new`] gives the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdConfig {
    /// The group whose worker ids are leased (a name). Generators of one
    /// group must share the layout.
    pub group: String,
    /// The bit layout.
    pub layout: Layout,
    /// Worker ids `0..max_workers` are leased; default all the layout has
    /// (at most [`crate::store::MAX_WORKERS`]).
    pub max_workers: Option<i64>,
    /// The lease's time to live (default 10 s).
    pub ttl: Duration,
    /// How far ahead of the time in use the floor is reserved (default 10 s).
    pub window: Duration,
    /// How far ahead of the local clock ids may run (default 5 s): a clock
    /// going back by less goes unnoticed but for the metrics.
    pub max_borrow: Duration,
    /// How long one call may wait for the clock (default 1 s).
    pub max_wait: Duration,
    /// Accept a layout that runs out within [`MIN_LIFETIME_YEARS`].
    pub allow_short_lifetime: bool,
    /// Renew the lease in the background (default true).
    pub background_renewal: bool,
}

impl IdConfig {
    /// The defaults, for `layout`.
    pub fn new(layout: Layout) -> Self {
        IdConfig {
            group: DEFAULT_GROUP.to_owned(),
            layout,
            max_workers: None,
            ttl: Duration::from_secs(10),
            window: Duration::from_secs(10),
            max_borrow: Duration::from_secs(5),
            max_wait: Duration::from_secs(1),
            allow_short_lifetime: false,
            background_renewal: true,
        }
    }

    /// The size of the worker group: worker ids `0..group_size()` are
    /// leased (`max_workers`, else all the layout holds, at most
    /// [`crate::store::MAX_WORKERS`]).
    pub fn group_size(&self) -> i64 {
        self.workers()
    }

    fn workers(&self) -> i64 {
        self.max_workers.unwrap_or_else(|| {
            (1i64 << self.layout.worker_bits.min(62)).min(crate::store::MAX_WORKERS)
        })
    }

    /// Checks the group, the layout (with [`Layout::check`] at `now_ms`) and
    /// the durations: TTL 1 ms to a day, window at least one time unit.
    ///
    /// # Errors
    /// [`Error::InvalidName`] or [`Error::InvalidArgument`] saying which.
    pub fn validate(&self, now_ms: i64) -> Result<()> {
        crate::validate_name(&self.group)?;
        crate::store::check_user_group(&self.group)?;
        self.layout
            .check(now_ms, self.workers(), self.allow_short_lifetime)?;
        crate::store::check_times(self.ttl, now_ms.max(0), ms(self.window))?;
        if ms(self.window) < self.layout.unit_ms {
            return Err(Error::invalid(format!(
                "the reserved window ({} ms) must be at least one time unit ({} ms)",
                ms(self.window),
                self.layout.unit_ms
            )));
        }
        Ok(())
    }
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// Builds an [`IdGenerator`].
#[derive(Debug, Default)]
pub struct IdGeneratorBuilder {
    store: Option<Arc<dyn Store>>,
    config: Option<IdConfig>,
    layout: Option<Layout>,
    group: Option<String>,
    clock: Option<Arc<dyn Clock>>,
}

impl IdGeneratorBuilder {
    /// The store worker ids are leased from (required).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The whole configuration (else [`IdConfig::new`] of the layout).
    pub fn config(mut self, config: IdConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// The layout (default [`Layout::snowflake`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// The group (default [`DEFAULT_GROUP`]).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// The clock (default [`SystemClock`]); tests pass a [`ManualClock`].
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Checks the configuration and leases a worker id.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a missing store or a bad layout or
    /// configuration (nothing is written then); [`Error::IdsUnavailable`]
    /// when every worker id is held; what the store fails with.
    pub async fn build(self) -> Result<IdGenerator> {
        let store = self
            .store
            .ok_or_else(|| Error::invalid("an id generator needs a store: call .store(...)"))?;
        let mut config = self
            .config
            .unwrap_or_else(|| IdConfig::new(self.layout.unwrap_or_default()));
        if let Some(l) = self.layout {
            config.layout = l;
        }
        if let Some(g) = self.group {
            config.group = g;
        }
        let clock = self
            .clock
            .unwrap_or_else(|| Arc::new(SystemClock::new()) as Arc<dyn Clock>);
        config.validate(clock.now_ms())?;
        let inner = Arc::new(Inner {
            store,
            holder: holder(),
            config,
            clock,
            state: tokio::sync::Mutex::new(State::default()),
            stats: Stats::default(),
        });
        {
            let mut st = inner.state.lock().await;
            inner.acquire(&mut st).await?;
        }
        let renewer = inner
            .config
            .background_renewal
            .then(|| spawn_renewer(Arc::downgrade(&inner)));
        Ok(IdGenerator {
            inner,
            renewer: renewer.map(|t| t.abort_handle()),
        })
    }
}

pub(crate) fn holder() -> String {
    format!(
        "{}/{}",
        gethostname::gethostname().to_string_lossy(),
        std::process::id()
    )
}

/// Makes time-ordered ids. `Send + Sync`: share it (`Arc`) between tasks.
/// Dropped without [`IdGenerator::close`], its lease expires after its TTL.
#[derive(Debug)]
pub struct IdGenerator {
    inner: Arc<Inner>,
    renewer: Option<tokio::task::AbortHandle>,
}

impl Drop for IdGenerator {
    fn drop(&mut self) {
        if let Some(r) = &self.renewer {
            r.abort();
        }
    }
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    holder: String,
    config: IdConfig,
    clock: Arc<dyn Clock>,
    state: tokio::sync::Mutex<State>,
    stats: Stats,
}

#[derive(Debug, Default)]
struct State {
    held: Option<Held>,
    /// The time unit of the last id issued (or the one before the lease's
    /// first, with `seq` past the maximum).
    last: i64,
    /// The next sequence in `last`.
    seq: i64,
    closed: bool,
    /// Whether an id was issued: a new lease then keeps `last`, so ids go on
    /// increasing across worker ids.
    issued_any: bool,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    worker: i64,
    fence: i64,
    until_ms: i64,
    /// Monotonic time after which no id is issued without a renewal.
    deadline: Duration,
}

#[derive(Debug, Default)]
struct Stats {
    issued: AtomicU64,
    worker: AtomicI64,
    fence: AtomicI64,
    until_ms: AtomicI64,
    held: AtomicI64,
    acquisitions: AtomicU64,
    renewals: AtomicU64,
    leases_lost: AtomicU64,
    store_went_back: AtomicU64,
    clock_behind_ms: AtomicI64,
    max_clock_behind_ms: AtomicI64,
    clock_back_events: AtomicU64,
    last_now_ms: AtomicI64,
    waited_ms: AtomicU64,
}

/// Ids handed out in one [`IdFormat`]: what [`IdGenerator::next_as`]
/// returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdValues {
    /// 64-bit integers of the layout.
    Integers(Vec<i64>),
    /// Version-7 UUIDs.
    Uuids(Vec<uuid::Uuid>),
}

impl IdValues {
    /// How many ids.
    pub fn len(&self) -> usize {
        match self {
            IdValues::Integers(v) => v.len(),
            IdValues::Uuids(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a generator is doing: for metrics and status pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdStatus {
    /// The group.
    pub group: String,
    /// The worker id held, if any.
    pub worker: Option<i64>,
    /// Its fence.
    pub fence: i64,
    /// `held`, `none` (before a new acquisition) or `closed`.
    pub lease: &'static str,
    /// The floor: ids are issued below this time (ms since the Unix epoch).
    pub until_ms: i64,
    /// Ids issued.
    pub issued: u64,
    /// Worker ids acquired (1 + those acquired after a lost lease).
    pub acquisitions: u64,
    /// Successful renewals.
    pub renewals: u64,
    /// Leases found taken by another holder at renewal.
    pub leases_lost: u64,
    /// Renewals that found the worker id's floor below the one held: the
    /// store went back within its generation (the floor was raised again).
    pub store_went_back: u64,
    /// How far the last id ran ahead of the clock, ms (0: not borrowing).
    pub clock_behind_ms: i64,
    /// The most it ever ran ahead, ms.
    pub max_clock_behind_ms: i64,
    /// How often the clock was seen going back.
    pub clock_back_events: u64,
    /// Time spent waiting for the clock, ms.
    pub waited_ms: u64,
}

impl IdGenerator {
    /// A builder: `.store(s)` required, then `.layout(..)`, `.group(..)`,
    /// `.config(..)`, `.clock(..)`, `.build().await`.
    pub fn builder() -> IdGeneratorBuilder {
        IdGeneratorBuilder::default()
    }

    /// The layout ids are made with (to [`Layout::decode`] them).
    pub fn layout(&self) -> &Layout {
        &self.inner.config.layout
    }

    /// The configuration.
    pub fn config(&self) -> &IdConfig {
        &self.inner.config
    }

    /// The next id: larger than every id this generator returned before.
    ///
    /// # Errors
    /// As [`IdGenerator::next_n`].
    pub async fn next(&self) -> Result<i64> {
        Ok(self.next_n(1).await?[0])
    }

    /// `n` ids, increasing, larger than every id this generator returned.
    /// A call that fails returns nothing (ids it made are never handed out,
    /// which loses nothing but numbers).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `n` outside `1..=MAX_BATCH`;
    /// [`Error::IdsUnavailable`] when the clock is too far behind (see the
    /// [module documentation](self)) or no worker id is free;
    /// [`Error::Exhausted`] when the layout's time bits ran out;
    /// [`Error::Closed`] after [`IdGenerator::close`]; what the store fails
    /// with when a renewal is due.
    pub async fn next_n(&self, n: i64) -> Result<Vec<i64>> {
        self.issue(n, |l, t, w, s| Ok(l.compose(t, w, s))).await
    }

    /// `n` RFC 9562 version-7 UUIDs over the same time, worker id and
    /// sequence as [`IdGenerator::next_n`]'s integers (bits in
    /// [`IdFormat::Uuidv7`]): increasing (as bytes and as strings), larger
    /// than every UUID this generator returned, never equal to one of
    /// another generator of the group.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a layout with more sequence bits than
    /// the UUID's counter ([`IdFormat::check`]), before any id is made; as
    /// [`IdGenerator::next_n`].
    pub async fn next_uuids(&self, n: i64) -> Result<Vec<uuid::Uuid>> {
        IdFormat::Uuidv7.check(self.layout())?;
        self.issue(n, |l, t, w, s| {
            uuid7::uuidv7_from_parts(l.unit_start_ms(t), w, s, rand::random())
        })
        .await
    }

    /// `n` ids in `format`: [`IdGenerator::next_n`] or
    /// [`IdGenerator::next_uuids`].
    ///
    /// # Errors
    /// As those.
    pub async fn next_as(&self, n: i64, format: IdFormat) -> Result<IdValues> {
        Ok(match format {
            IdFormat::Integer => IdValues::Integers(self.next_n(n).await?),
            IdFormat::Uuidv7 => IdValues::Uuids(self.next_uuids(n).await?),
        })
    }

    /// Issues `n` (time unit, worker, sequence) triples, each made into a
    /// value by `make`; the time floor and worker lease logic is here once,
    /// whatever the format.
    async fn issue<T>(
        &self,
        n: i64,
        make: impl Fn(&Layout, i64, i64, i64) -> Result<T>,
    ) -> Result<Vec<T>> {
        if !(1..=MAX_BATCH).contains(&n) {
            return Err(Error::invalid(format!(
                "count must be between 1 and {MAX_BATCH}, got {n}"
            )));
        }
        let inner = &*self.inner;
        let mut st = inner.state.lock().await;
        if st.closed {
            return Err(Error::Closed {
                name: format!("ids of group {}", inner.config.group),
            });
        }
        let mut out = Vec::with_capacity(n as usize);
        let mut waited = Duration::ZERO;
        let layout = &inner.config.layout;
        while out.len() < n as usize {
            let (t, w, s) = inner.one(&mut st, &mut waited).await?;
            out.push(make(layout, t, w, s)?);
        }
        inner.stats.issued.fetch_add(n as u64, Ordering::Relaxed);
        Ok(out)
    }

    /// What the generator is doing now.
    pub fn status(&self) -> IdStatus {
        let s = &self.inner.stats;
        let held = s.held.load(Ordering::Relaxed);
        IdStatus {
            group: self.inner.config.group.clone(),
            worker: (held == 1).then(|| s.worker.load(Ordering::Relaxed)),
            fence: s.fence.load(Ordering::Relaxed),
            lease: match held {
                1 => "held",
                2 => "closed",
                _ => "none",
            },
            until_ms: s.until_ms.load(Ordering::Relaxed),
            issued: s.issued.load(Ordering::Relaxed),
            acquisitions: s.acquisitions.load(Ordering::Relaxed),
            renewals: s.renewals.load(Ordering::Relaxed),
            leases_lost: s.leases_lost.load(Ordering::Relaxed),
            store_went_back: s.store_went_back.load(Ordering::Relaxed),
            clock_behind_ms: s.clock_behind_ms.load(Ordering::Relaxed),
            max_clock_behind_ms: s.max_clock_behind_ms.load(Ordering::Relaxed),
            clock_back_events: s.clock_back_events.load(Ordering::Relaxed),
            waited_ms: s.waited_ms.load(Ordering::Relaxed),
        }
    }

    /// Renews the lease now (the background task does this every third of
    /// the TTL; tests without it call this).
    ///
    /// # Errors
    /// What the store fails with; [`Error::Closed`] after close.
    pub async fn renew(&self) -> Result<()> {
        let mut st = self.inner.state.lock().await;
        if st.closed {
            return Err(Error::Closed {
                name: format!("ids of group {}", self.inner.config.group),
            });
        }
        self.inner.renew(&mut st).await
    }

    /// Releases the worker id, lowering its floor to the end of the last
    /// time unit used, so the next holder need not start a window ahead.
    /// Later calls fail with [`Error::Closed`].
    ///
    /// # Errors
    /// What the store fails with (the lease then expires after its TTL).
    pub async fn close(&self) -> Result<()> {
        if let Some(r) = &self.renewer {
            r.abort();
        }
        let inner = &*self.inner;
        let mut st = inner.state.lock().await;
        st.closed = true;
        inner.stats.held.store(2, Ordering::Relaxed);
        if let Some(h) = st.held.take() {
            let floor = inner.config.layout.unit_start_ms(st.last + 1);
            inner
                .store
                .release_worker(&inner.config.group, h.worker, h.fence, floor)
                .await?;
        }
        Ok(())
    }
}

impl Inner {
    fn deadline_after(&self, sent: Duration) -> Duration {
        sent + self.config.ttl * 2 / 3
    }

    async fn acquire(&self, st: &mut State) -> Result<()> {
        let c = &self.config;
        let sent = self.clock.mono();
        let lease = self
            .store
            .acquire_worker(&WorkerClaim {
                group: c.group.clone(),
                max_workers: c.workers(),
                holder: self.holder.clone(),
                ttl: c.ttl,
                now_ms: self.clock.now_ms().max(0),
                window_ms: ms(c.window),
            })
            .await?;
        let first = c.layout.unit_at_or_after(lease.start_ms);
        st.last = if st.issued_any {
            st.last.max(first - 1)
        } else {
            first - 1
        };
        st.seq = c.layout.max_sequence() + 1;
        st.held = Some(Held {
            worker: lease.worker,
            fence: lease.fence,
            until_ms: lease.until_ms,
            deadline: self.deadline_after(sent),
        });
        let s = &self.stats;
        s.acquisitions.fetch_add(1, Ordering::Relaxed);
        s.worker.store(lease.worker, Ordering::Relaxed);
        s.fence.store(lease.fence, Ordering::Relaxed);
        s.until_ms.store(lease.until_ms, Ordering::Relaxed);
        s.held.store(1, Ordering::Relaxed);
        tracing::debug!(group = %c.group, worker = lease.worker, fence = lease.fence, "leased a worker id");
        Ok(())
    }

    /// Renews from the later of the clock and the time in use; a lost
    /// lease is replaced by a new acquisition.
    async fn renew(&self, st: &mut State) -> Result<()> {
        let Some(h) = st.held else {
            return self.acquire(st).await;
        };
        let c = &self.config;
        let from = floor_from(self.renew_from(st), &h, ms(c.window));
        let sent = self.clock.mono();
        match self
            .store
            .renew_worker(&c.group, h.worker, h.fence, c.ttl, from, ms(c.window))
            .await?
        {
            Some(until_ms) => {
                self.check_floor(&h, until_ms);
                let until_ms = until_ms.max(h.until_ms);
                st.held = Some(Held {
                    until_ms,
                    deadline: self.deadline_after(sent),
                    ..h
                });
                self.stats.renewals.fetch_add(1, Ordering::Relaxed);
                self.stats.until_ms.store(until_ms, Ordering::Relaxed);
                Ok(())
            }
            None => {
                tracing::warn!(group = %c.group, worker = h.worker, "worker lease lost to another holder; leasing a new worker id");
                st.held = None;
                self.stats.held.store(0, Ordering::Relaxed);
                self.stats.leases_lost.fetch_add(1, Ordering::Relaxed);
                self.acquire(st).await
            }
        }
    }

    /// A renewal that came back with a floor below the one this generator
    /// held: the store went back (a restore within its generation). The
    /// renewal asked for at least the held floor (see [`floor_from`]), so
    /// the store has it again; this only reports it.
    fn check_floor(&self, held: &Held, until_ms: i64) {
        if until_ms < held.until_ms {
            self.stats.store_went_back.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                group = %self.config.group,
                worker = held.worker,
                held = held.until_ms,
                got = until_ms,
                "the store went back: a worker id's floor was below the one this generator held; raised again"
            );
        }
    }

    /// The next unit to use is at least `last + 1` once `last` is full:
    /// renewals reserve from there (or from the clock, if later).
    fn renew_from(&self, st: &State) -> i64 {
        self.clock
            .now_ms()
            .max(self.config.layout.unit_start_ms(st.last.max(-1) + 1))
            .max(0)
    }

    /// The background renewal: the store call runs without the state lock,
    /// so ids go on being issued meanwhile; its answer is applied only to
    /// the lease it was sent for (a floor only grows).
    async fn renew_unlocked(&self) -> Result<()> {
        let (h, from) = {
            let mut st = self.state.lock().await;
            if st.closed {
                return Ok(());
            }
            match st.held {
                Some(h) => (
                    h,
                    floor_from(self.renew_from(&st), &h, ms(self.config.window)),
                ),
                None => return self.acquire(&mut st).await,
            }
        };
        let c = &self.config;
        let sent = self.clock.mono();
        let answer = self
            .store
            .renew_worker(&c.group, h.worker, h.fence, c.ttl, from, ms(c.window))
            .await?;
        let mut st = self.state.lock().await;
        let same = st
            .held
            .is_some_and(|cur| cur.worker == h.worker && cur.fence == h.fence);
        if st.closed || !same {
            return Ok(());
        }
        match answer {
            Some(until_ms) => {
                self.check_floor(&h, until_ms);
                if let Some(cur) = st.held.as_mut() {
                    cur.until_ms = cur.until_ms.max(until_ms);
                    cur.deadline = cur.deadline.max(self.deadline_after(sent));
                    self.stats.until_ms.store(cur.until_ms, Ordering::Relaxed);
                }
                self.stats.renewals.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            // Lost: the locked renewal finds it so and acquires anew.
            None => self.renew(&mut st).await,
        }
    }

    /// One id: its time unit, worker id and sequence.
    async fn one(&self, st: &mut State, waited: &mut Duration) -> Result<(i64, i64, i64)> {
        let layout = &self.config.layout;
        loop {
            if st.held.is_none_or(|h| self.clock.mono() >= h.deadline) {
                self.renew(st).await?;
            }
            let Some(h) = st.held else {
                continue;
            };
            let now_ms = self.clock.now_ms();
            let prev = self.stats.last_now_ms.swap(now_ms, Ordering::Relaxed);
            if now_ms < prev {
                self.stats.clock_back_events.fetch_add(1, Ordering::Relaxed);
            }
            let Some(now) = layout.unit_of(now_ms) else {
                return Err(Error::IdsUnavailable(format!(
                    "the clock reads {} ms since 1970, before the layout's epoch {}; fix the clock",
                    now_ms,
                    layout::rfc3339(layout.epoch_ms)
                )));
            };
            let (t, seq) = if now > st.last {
                (now, 0)
            } else if st.seq <= layout.max_sequence() {
                (st.last, st.seq)
            } else {
                (st.last + 1, 0)
            };
            if t > layout.max_time() {
                return Err(Error::Exhausted {
                    name: format!(
                        "time-ordered ids of layout {} (its time bits ran out on {})",
                        layout.bits(),
                        layout.report(now_ms).ends
                    ),
                    max: layout.compose(layout.max_time(), 0, 0),
                });
            }
            let ahead = (t - now).saturating_mul(layout.unit_ms);
            let max_borrow = ms(self.config.max_borrow);
            if ahead > max_borrow {
                let wait = Duration::from_millis((ahead - max_borrow) as u64);
                if *waited + wait > self.config.max_wait {
                    return Err(Error::IdsUnavailable(format!(
                        "the clock is {ahead} ms behind the time of the last id of worker {} in group {:?}; \
                         ids may run ahead of the clock by {max_borrow} ms (max_borrow) and a call waits \
                         for it at most {} ms (max_wait). Fix the clock (NTP), or raise max_borrow",
                        h.worker,
                        self.config.group,
                        ms(self.config.max_wait)
                    )));
                }
                self.clock.sleep(wait).await;
                *waited += wait;
                self.stats
                    .waited_ms
                    .fetch_add(wait.as_millis() as u64, Ordering::Relaxed);
                continue;
            }
            if layout.unit_start_ms(t + 1) > h.until_ms {
                // The reserved window is used up: move the floor first.
                self.renew(st).await?;
                continue;
            }
            st.last = t;
            st.seq = seq + 1;
            st.issued_any = true;
            let s = &self.stats;
            s.clock_behind_ms.store(ahead, Ordering::Relaxed);
            s.max_clock_behind_ms.fetch_max(ahead, Ordering::Relaxed);
            return Ok((t, h.worker, seq));
        }
    }
}

/// Renews every third of the TTL while the generator lives.
fn spawn_renewer(weak: std::sync::Weak<Inner>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let period = match weak.upgrade() {
                Some(inner) => inner.config.ttl / 3,
                None => return,
            };
            tokio::time::sleep(period).await;
            let Some(inner) = weak.upgrade() else {
                return;
            };
            if let Err(e) = inner.renew_unlocked().await {
                tracing::warn!(group = %inner.config.group, "renewing the worker lease failed: {e}; retrying");
            }
        }
    })
}

/// What a renewal asks the floor to reach: `from + window`, and never less
/// than the floor the generator holds, so a store that went back gets it
/// again.
fn floor_from(from: i64, held: &Held, window_ms: i64) -> i64 {
    from.max(held.until_ms.saturating_sub(window_ms))
}

#[cfg(test)]
mod tests;

//! Named, durable, increasing sequences.
//!
//! A [`Sequence`] is a handle on one sequence of a [`SequenceStore`]. It reserves
//! blocks of values in the store (durably, before the first value of a block
//! leaves the library) and hands them out from memory: inside a block
//! [`Sequence::next`] is one `fetch_add`, no lock and no store call. When
//! a fifth of the block is left (by default) the next block is reserved in
//! the background, so `next` does not wait on the store in steady state.
//!
//! With block size 1 (strict mode) no value is cached: every value comes from
//! a reservation committed before it is returned, and values from all handles
//! increase in the order they were taken. Callers of one strict handle that
//! wait at the same time share one reservation (`strict.rs`).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::store::{
    CountsDelta, MARK_INTERVAL_MS, Put, Reservation, Residue, SequenceRow, SequenceStore, Store,
    check_count,
};
use crate::{Error, Result};

mod admin;
mod adopt;
mod blocking;
pub mod cache;
pub mod high_water;
mod import;
pub mod leader;
pub mod lease;
mod numbered;
mod source;
mod strategy;
mod strict;
mod sync;

pub use admin::{
    AlterSpec, alter, create, create_in_class, create_leader, create_or_get, describe, list,
    remove, show, show_if_exists,
};
pub use adopt::{AdoptAction, AdoptReport, AdoptSource, adopt_from, quote_ident};
pub use blocking::BlockingSequence;
pub use high_water::{HighWater, HighWaters};
pub use import::{ImportAction, ImportFormat, ImportItem, ImportReport, SourceRow, import_from};
pub use leader::{LeaderOptions, LeaderSequence, LeaderStats};
pub use source::SourceDatabase;
pub use strategy::Strategy;

use cache::{BlockCache, Next};
pub(crate) use numbered::{blocks_of, blocks_refused, row_in_values, spec_in_slots};
use strategy::Allocator;
use strict::StrictQueue;

/// The most values one [`Sequence::next_n`] call returns.
pub const MAX_BATCH: i64 = 1_000_000;

/// The default share of a block left when the next one is prefetched.
pub const DEFAULT_PREFETCH: f64 = 0.2;

/// A handle on one sequence: cheap to clone, `Send + Sync`, shared by threads.
/// Clones share one block cache.
///
/// Every value it returns is unique across all handles, processes and hosts
/// on the same store, and values from one handle increase.
#[derive(Debug, Clone)]
pub struct Sequence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    alloc: Allocator,
    cache: BlockCache,
    refill: tokio::sync::Mutex<Refill>,
    /// Values per reservation; changes only under the refill mutex, and only
    /// when `adaptive` is set.
    block: AtomicI64,
    adaptive: Option<Adaptive>,
    /// Share of a block left when the next one is prefetched; 0 turns prefetch off.
    prefetch: f64,
    /// Strict mode's callers waiting for a shared reservation.
    strict: StrictQueue,
    runtime: tokio::runtime::Handle,
    /// The residue class of a sequence whose values are one: the cache,
    /// the store and everything in between count slots, made values as
    /// they leave ([`Sequence::value`]).
    residue: Option<Residue>,
}

/// Values a [`Sequence::next_n`] took from the cache and has not handed out
/// yet: on drop (the call failed or its future was dropped) they go back.
struct Restore<'a> {
    cache: &'a BlockCache,
    head: Range<i64>,
}

impl Restore<'_> {
    fn len(&self) -> i64 {
        self.head.end - self.head.start
    }

    /// The values, now the caller's: nothing goes back.
    fn take(&mut self) -> Range<i64> {
        std::mem::replace(&mut self.head, 0..0)
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        self.cache.restore(self.take());
    }
}

/// State changed only under the refill mutex.
#[derive(Debug, Default)]
struct Refill {
    /// Blocks reserved ahead of need, in increasing order: the prefetched
    /// one, and those a failed [`Sequence::next_n`] reserved before it failed.
    spare: VecDeque<Reservation>,
    /// The newest reservation of this handle (the spare, else the current one).
    last: Option<Reservation>,
    /// When the newest reservation was made (for the adaptive block size).
    last_at: Option<Instant>,
    /// When this handle last moved the sequence's rate mark (or first
    /// reserved): a long-lived handle marks once per [`MARK_INTERVAL_MS`].
    marked_at: Option<Instant>,
    closed: bool,
    /// Closed because the name was dropped since the handle was built
    /// ([`Error::Dropped`]): calls fail with that, not [`Error::Closed`].
    dropped: bool,
}

/// A block size that follows the allocation rate: after each reservation,
/// if the previous one was less than half of `target` ago the block doubles,
/// if more than twice `target` ago it halves, always within `min..=max`.
/// The aim is one store round trip per `target`, whatever the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Adaptive {
    /// Smallest block.
    pub min: i64,
    /// Largest block.
    pub max: i64,
    /// The wanted time between reservations.
    pub target: Duration,
}

impl Adaptive {
    /// Checks `1 <= min <= max <= MAX_RESERVATION` and a non-zero target.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying which.
    pub fn validate(&self) -> Result<()> {
        check_count("adaptive min block", self.min)?;
        check_count("adaptive max block", self.max)?;
        if self.min > self.max {
            return Err(Error::invalid(format!(
                "adaptive block: min ({}) is above max ({})",
                self.min, self.max
            )));
        }
        if self.target.is_zero() {
            return Err(Error::invalid(
                "adaptive block: the target interval must be above zero",
            ));
        }
        Ok(())
    }

    /// The block size to use after a reservation that came `since` after the
    /// one before, with `block` in use now.
    pub fn next_block(&self, block: i64, since: Duration) -> i64 {
        let b = if since < self.target / 2 {
            block.saturating_mul(2)
        } else if since > self.target.saturating_mul(2) {
            block / 2
        } else {
            block
        };
        b.clamp(self.min, self.max)
    }
}

/// Adaptive blocks relative to the sequence's own block size, for handles
/// opened on many sequences with one setting (the HTTP service): a handle's
/// block never goes below its sequence's block nor above `max` (or the
/// sequence's block, if that is larger), aiming at one reservation per
/// `target`. Strict sequences (block 1) stay strict. Resolved when the handle
/// is opened, from the row it reads anyway: no extra store read.
///
/// A larger block costs nothing while the handle lives and goes back on
/// [`Sequence::close`]; a process that is killed leaves at most two blocks
/// (the current one and the prefetched one) as a gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AdaptivePolicy {
    /// The largest block a handle grows to.
    pub max: i64,
    /// The wanted time between two reservations of one handle.
    pub target: Duration,
}

/// The default [`AdaptivePolicy::max`].
pub const DEFAULT_BLOCK_MAX: i64 = 10_000;

/// The default [`AdaptivePolicy::target`].
pub const DEFAULT_REFILL_TARGET: Duration = Duration::from_secs(1);

impl Default for AdaptivePolicy {
    fn default() -> Self {
        AdaptivePolicy {
            max: DEFAULT_BLOCK_MAX,
            target: DEFAULT_REFILL_TARGET,
        }
    }
}

impl AdaptivePolicy {
    /// Checks `1 <= max <= MAX_RESERVATION` and a non-zero target.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying which.
    pub fn validate(&self) -> Result<()> {
        check_count("the largest adaptive block", self.max)?;
        if self.target.is_zero() {
            return Err(Error::invalid(
                "the refill target interval must be more than 0",
            ));
        }
        Ok(())
    }

    /// The [`Adaptive`] setting for a sequence whose own block is `block`,
    /// or `None` for a strict sequence (block 1), which stays strict.
    pub fn for_block(&self, block: i64) -> Option<Adaptive> {
        (block > 1).then(|| Adaptive {
            min: block,
            max: self.max.max(block),
            target: self.target,
        })
    }
}

/// What a handle has cost so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SequenceStats {
    /// Block size of this handle.
    pub block: i64,
    /// Reservations made in the store (refills, prefetches, strict batches:
    /// one per group of strict callers that waited at once).
    pub reservations: u64,
    /// Time spent in those reservations, retries included, in
    /// microseconds: with `reservations`, the mean time a refill takes.
    pub reservation_micros: u64,
    /// Optimistic puts that lost to another writer and were retried.
    pub conflicts: u64,
    /// Values the store skipped at generation changes (failovers, restores)
    /// in this handle's reservations.
    pub skipped_at_failover: i64,
    /// Ranges refused because the store returned values this handle (or
    /// its [`HighWater`]) had reserved before ([`Error::StoreWentBack`]).
    pub store_went_back: u64,
}

/// Builds a [`Sequence`]; start with [`Sequence::builder`].
#[derive(Debug, Default)]
#[must_use]
pub struct SequenceBuilder {
    store: Option<Arc<dyn Store>>,
    name: Option<String>,
    block: Option<i64>,
    strategy: Strategy,
    retry_budget: Option<Duration>,
    max_attempts: Option<u32>,
    prefetch: Option<f64>,
    adaptive: Option<Adaptive>,
    adaptive_policy: Option<AdaptivePolicy>,
    high_water: Option<Arc<HighWater>>,
}

/// What [`SequenceBuilder::build_or_numbering`] opened: a handle on a
/// sequence served in blocks, or what a numbered sequence's handle is made
/// from.
pub(crate) enum Opened {
    /// A sequence served in blocks (plain, or a residue class).
    Blocks(Sequence),
    /// A numbered sequence: its name, its settings, and the life of the name
    /// they were read in (the row read first).
    Numbered {
        name: String,
        numbering: crate::store::Numbering,
        incarnation: u64,
    },
}

impl SequenceBuilder {
    /// The memory of reserved ranges to check every reservation against
    /// (see [`HighWater`]), to share it with other handles or leases of the
    /// same sequence in this process (a server keeps one per name). Default:
    /// a new one, this handle's own.
    pub fn high_water(mut self, high_water: Arc<HighWater>) -> Self {
        self.high_water = Some(high_water);
        self
    }

    /// The store holding the sequence (required).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The sequence's name (required). It must exist: see [`create`].
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Values reserved per store round trip. Default: the sequence's own
    /// block size. 1 is strict mode: no cache, values in global time order.
    pub fn block(mut self, block: i64) -> Self {
        self.block = Some(block);
        self
    }

    /// How blocks are reserved. Default [`Strategy::Atomic`].
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// How long one reservation keeps retrying races lost to other writers
    /// before it fails with [`Error::Contention`]. Default
    /// [`crate::DEFAULT_RETRY_BUDGET`]; zero gives up at the first lost race.
    pub fn retry_budget(mut self, budget: Duration) -> Self {
        self.retry_budget = Some(budget);
        self
    }

    /// At most this many attempts per reservation (at least 1), on top of the
    /// retry budget. Default: no limit but the budget.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = Some(attempts);
        self
    }

    /// Share of a block left when the next one is reserved in the background,
    /// in `0.0..1.0`; 0 turns prefetching off. Default [`DEFAULT_PREFETCH`].
    pub fn prefetch(mut self, share: f64) -> Self {
        self.prefetch = Some(share);
        self
    }

    /// Lets the block size follow the allocation rate (see [`Adaptive`]). The
    /// first block is the configured one, clamped into the bounds.
    pub fn adaptive(mut self, adaptive: Adaptive) -> Self {
        self.adaptive = Some(adaptive);
        self
    }

    /// Lets the block size follow the allocation rate with the sequence's own
    /// block as the floor (see [`AdaptivePolicy`]); replaces
    /// [`Self::adaptive`]. Strict sequences stay strict.
    pub fn adaptive_policy(mut self, policy: AdaptivePolicy) -> Self {
        self.adaptive_policy = Some(policy);
        self
    }

    /// Opens the handle. Reads the sequence once; reserves nothing yet.
    /// Must run inside a tokio runtime (else use [`Self::build_blocking`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a missing store or name, a bad block,
    /// attempt count or prefetch share, or no runtime; [`Error::InvalidName`];
    /// [`Error::NotFound`] (with similar names) when the sequence does not
    /// exist; what the store fails with.
    pub async fn build(self) -> Result<Sequence> {
        match self.build_or_numbering().await? {
            Opened::Blocks(sequence) => Ok(sequence),
            Opened::Numbered {
                name, numbering, ..
            } => Err(blocks_refused(&name, &numbering)),
        }
    }

    /// [`Self::build`], but a numbered sequence is not an error: its name,
    /// numbering and life come back instead, read in the same two store
    /// calls (the row, the numbering) the handle needs anyway.
    pub(crate) async fn build_or_numbering(self) -> Result<Opened> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::invalid("Sequence::build needs a tokio runtime; use build_blocking without one")
        })?;
        let store = self
            .store
            .ok_or_else(|| Error::invalid("Sequence::builder(): no store given"))?;
        let name = self
            .name
            .ok_or_else(|| Error::invalid("Sequence::builder(): no name given"))?;
        if self.max_attempts == Some(0) {
            return Err(Error::invalid("max_attempts must be at least 1"));
        }
        let retry_budget = self.retry_budget.unwrap_or(crate::DEFAULT_RETRY_BUDGET);
        let prefetch = self.prefetch.unwrap_or(DEFAULT_PREFETCH);
        if !(0.0..1.0).contains(&prefetch) {
            return Err(Error::invalid(format!(
                "prefetch share must be in 0.0..1.0, got {prefetch}"
            )));
        }
        if let Some(p) = &self.adaptive_policy {
            p.validate()?;
        }
        let row = describe(&*store, &name).await?;
        let residue = match store.read_numbering(&name).await? {
            None => None,
            Some(numbering) => match numbering.residue {
                Some(r) => Some(r),
                None => {
                    return Ok(Opened::Numbered {
                        name,
                        numbering,
                        incarnation: row.incarnation,
                    });
                }
            },
        };
        let mut block = self.block.unwrap_or(row.block);
        check_count("block", block)?;
        let adaptive = match &self.adaptive_policy {
            Some(p) => p.for_block(row.block),
            None => self.adaptive,
        };
        if let Some(a) = &adaptive {
            a.validate()?;
            block = block.clamp(a.min, a.max);
        }
        Ok(Opened::Blocks(Sequence {
            inner: Arc::new(Inner {
                alloc: Allocator::new(
                    store,
                    row,
                    self.strategy,
                    retry_budget,
                    self.max_attempts,
                    self.high_water.unwrap_or_default(),
                ),
                cache: BlockCache::new(),
                refill: tokio::sync::Mutex::new(Refill::default()),
                block: AtomicI64::new(block),
                adaptive,
                prefetch,
                strict: StrictQueue::default(),
                runtime,
                residue,
            }),
        }))
    }

    /// Opens a handle for code without an async runtime: it gets a small
    /// runtime of its own.
    ///
    /// # Errors
    /// As [`Self::build`], and [`Error::Unavailable`] if no runtime can start.
    pub fn build_blocking(self) -> Result<BlockingSequence> {
        BlockingSequence::build(self)
    }
}

impl Sequence {
    /// Starts building a handle.
    pub fn builder() -> SequenceBuilder {
        SequenceBuilder::default()
    }

    /// The sequence's name.
    pub fn name(&self) -> &str {
        &self.inner.alloc.name
    }

    /// Block size of this handle now (it changes only with [`Adaptive`]).
    pub fn block(&self) -> i64 {
        self.inner.block.load(Relaxed)
    }

    /// Whether every value is its own store round trip (block 1, not adaptive).
    pub fn is_strict(&self) -> bool {
        self.inner.adaptive.is_none() && self.block() == 1
    }

    /// The strategy of this handle.
    pub fn strategy(&self) -> Strategy {
        self.inner.alloc.strategy
    }

    /// The next value: unique, and greater than every value this handle
    /// returned before.
    ///
    /// A call that fails, or whose future is dropped before it is ready,
    /// takes no value: the next call gets it. In strict mode callers waiting
    /// at once share one reservation, served in the order they called; one
    /// dropped after that reservation was made hands its value back if it
    /// ends the reservation and no one reserved since, else it is a gap.
    ///
    /// # Errors
    /// [`Error::Exhausted`] past the maximum, [`Error::Contention`],
    /// [`Error::Unavailable`], [`Error::NotFound`] if the sequence was dropped,
    /// [`Error::Closed`] after [`Self::close`].
    #[inline]
    pub async fn next(&self) -> Result<i64> {
        let slot = match self.try_next_cached() {
            Some(v) => v,
            // Boxed: keeps this future one pointer plus the handle, and the
            // slow path's state off the hot path.
            None => Box::pin(self.next_slow()).await?,
        };
        Ok(self.value(slot))
    }

    /// The value of `slot`: itself, or its value in the sequence's residue
    /// class.
    #[inline]
    fn value(&self, slot: i64) -> i64 {
        match &self.inner.residue {
            None => slot,
            Some(r) => r.value(slot),
        }
    }

    /// The residue class of the sequence's values, for one created with an
    /// increment and offset: every value is `offset` modulo `increment`.
    pub fn residue(&self) -> Option<Residue> {
        self.inner.residue
    }

    /// `n` values (1 to [`MAX_BATCH`]), ascending, each unique and greater
    /// than every value this handle returned before. Consecutive unless a
    /// block boundary falls inside.
    ///
    /// All or nothing: every block it needs is reserved before any value is
    /// taken for the caller, so a call that fails hands nothing out and loses
    /// nothing. Blocks reserved before the failure stay with the handle and
    /// are the next values it hands out (or go back to the store on
    /// [`Self::close`]); in strict mode they go back to the store at once when
    /// no one reserved since.
    ///
    /// # Errors
    /// As [`Self::next`]; [`Error::InvalidArgument`] for a bad `n`;
    /// [`Error::Exhausted`] when fewer than `n` values are left (a smaller
    /// count may still succeed).
    pub async fn next_n(&self, n: i64) -> Result<Vec<i64>> {
        let mut values = self.next_n_slots(n).await?;
        if let Some(r) = &self.inner.residue {
            for v in &mut values {
                *v = r.value(*v);
            }
        }
        Ok(values)
    }

    /// [`Self::next_n`] in slots.
    async fn next_n_slots(&self, n: i64) -> Result<Vec<i64>> {
        if !(1..=MAX_BATCH).contains(&n) {
            return Err(Error::invalid(format!(
                "count must be between 1 and {MAX_BATCH}, got {n}"
            )));
        }
        if self.is_strict() {
            return self.next_n_strict(n).await;
        }
        if let Some((r, mark)) = self.inner.cache.take_exact(n) {
            if mark {
                self.start_prefetch();
            }
            return Ok(r.collect());
        }
        self.fill(n).await
    }

    /// The one refill path: `n` values when the current block has fewer,
    /// for [`Self::next`] (`n` = 1) and [`Self::next_n`] alike. Under the
    /// refill mutex it takes the rest of the current block, installs spare
    /// blocks or reserves new ones until there are `n` values, hands out the
    /// first `n` and installs what is left of the last block as the current
    /// one.
    ///
    /// All or nothing: every block it needs is reserved before any value is
    /// taken for the caller. If a reservation fails, or the future is
    /// dropped, the rest of the current block goes back to the cache and the
    /// new blocks stay spare (so nothing is lost and nothing is handed out);
    /// if the name was dropped, the rest of the current block, of the earlier
    /// life, is never served.
    async fn fill(&self, n: i64) -> Result<Vec<i64>> {
        let inner = &*self.inner;
        let mut st = inner.refill.lock().await;
        if st.closed {
            return Err(self.closed_error(&st));
        }
        // Another caller may have refilled while we waited for the mutex.
        if let Some((r, mark)) = inner.cache.take_exact(n) {
            drop(st);
            if mark {
                self.start_prefetch();
            }
            return Ok(r.collect());
        }
        // The rest of the current block, fewer than `n` values (the cache
        // only shrinks while we hold the mutex). From here on nobody takes
        // from this handle: the cache is empty, and installing a block needs
        // the mutex.
        let (head, mut passed_mark) = inner.cache.take_rest();
        // Until the values are handed out, the head goes back to the cache
        // if this call fails or is dropped (declared after `st`, so it is
        // dropped first, under the mutex); new blocks stay spare.
        let mut head = Restore {
            cache: &inner.cache,
            head,
        };
        let mut have = head.len() + st.spare.iter().map(Reservation::len).sum::<i64>();
        while have < n {
            let r = match self.reserve(&mut st, (n - have).max(self.block())).await {
                Ok(r) => r,
                Err(e) => {
                    if st.dropped {
                        // Of an earlier life: never served.
                        head.take();
                    }
                    return Err(e);
                }
            };
            self.note_reservation(&mut st, r);
            st.spare.push_back(r);
            have += r.len();
        }
        let mut out = Vec::with_capacity(n as usize);
        out.extend(head.take());
        while (out.len() as i64) < n {
            let b = st
                .spare
                .pop_front()
                .ok_or_else(|| Error::Corrupt("fill: counted blocks went missing".into()))?;
            let take = b.len().min(n - out.len() as i64);
            out.extend(b.start..b.start + take);
            // The mark of the whole block, as if its values came one by one.
            let mark = self.prefetch_mark(&b);
            passed_mark = mark < b.start + take;
            if take < b.len() {
                inner.cache.install(b.start + take..b.end, mark);
            }
        }
        let prefetch = passed_mark && st.spare.is_empty();
        drop(st);
        if prefetch {
            self.start_prefetch();
        }
        Ok(out)
    }

    /// [`Self::next_n`] in strict mode: the caller joins the queue of the
    /// handle's callers and gets its values from the next shared reservation
    /// (`strict.rs`); all or nothing: near the maximum it fails with
    /// [`Error::Exhausted`] and what was reserved for it goes back to the
    /// store if no one reserved since.
    async fn next_n_strict(&self, n: i64) -> Result<Vec<i64>> {
        Ok(self.take_strict(n).await?.collect())
    }

    /// Gives the reservations `got` (in order, none handed out) back to the
    /// store: the longest tail of them with no other write in between, with
    /// a conditional put on the version of the last, so only if no one
    /// reserved since. Otherwise they stay a gap: never handed out twice.
    async fn hand_back(&self, got: &[Reservation]) {
        let Some(last) = got.last() else {
            return;
        };
        let mut from = last.start;
        for pair in got.windows(2).rev() {
            let (a, b) = (pair[0], pair[1]);
            if a.end == b.start && a.version + 1 == b.version && b.start == from {
                from = a.start;
            } else {
                break;
            }
        }
        let alloc = &self.inner.alloc;
        match alloc
            .high_water
            .hand_back(&*alloc.store, self.name(), from, last.version)
            .await
        {
            Ok(Put::Done(_)) => {
                let c = &self.inner.alloc.counters;
                c.values.fetch_sub(last.end - from, Relaxed);
                c.handed_back.fetch_add(last.end - from, Relaxed);
            }
            Ok(Put::Conflict(_)) => {
                tracing::info!(sequence = %self.name(), "values {from}..{} stay a gap: others reserved since", last.end)
            }
            Err(e) => {
                tracing::warn!(sequence = %self.name(), "values {from}..{} stay a gap: handing them back failed: {e}", last.end)
            }
        }
    }

    /// The next value if the current block has one: no await, no store.
    /// `None` takes nothing (see `cache.rs`): the caller goes to
    /// [`Self::next_slow`] holding no value, so dropping it there, or a
    /// refill failing, loses none.
    #[inline]
    pub(crate) fn try_next_cached(&self) -> Option<i64> {
        match self.inner.cache.next() {
            Next::Value(v, mark) => {
                if mark {
                    self.start_prefetch();
                }
                Some(v)
            }
            Next::Empty => None,
        }
    }

    /// [`Self::next`] when the current block had no value for it.
    pub(crate) async fn next_slow(&self) -> Result<i64> {
        if self.is_strict() {
            return Ok(self.take_strict(1).await?.start);
        }
        let values = self.fill(1).await?;
        values
            .first()
            .copied()
            .ok_or_else(|| Error::Corrupt("fill(1) returned no value".into()))
    }

    /// Reserves a block of `n` values (caller holds the refill mutex). When
    /// the name was dropped since the handle was built ([`Error::Dropped`]),
    /// the handle closes: the rest of its current block and its spare
    /// blocks, all of the earlier life, are never served, and every later
    /// call fails with that error.
    async fn reserve(&self, st: &mut Refill, n: i64) -> Result<Reservation> {
        let r = self.inner.alloc.reserve(n).await;
        if matches!(r, Err(Error::Dropped { .. })) {
            st.closed = true;
            st.dropped = true;
            st.spare.clear();
            self.inner.cache.seal();
        }
        r
    }

    /// What a call on a closed handle fails with.
    fn closed_error(&self, st: &Refill) -> Error {
        if st.dropped {
            self.inner.alloc.dropped()
        } else {
            Error::Closed {
                name: self.name().to_owned(),
            }
        }
    }

    /// Records a reservation for the cache; adapts the block size.
    fn note_reservation(&self, st: &mut Refill, r: Reservation) {
        let now = Instant::now();
        if let (Some(a), Some(prev)) = (self.inner.adaptive, st.last_at) {
            let next = a.next_block(self.block(), now - prev);
            self.inner.block.store(next, Relaxed);
        }
        st.last = Some(r);
        st.last_at = Some(now);
        match st.marked_at {
            None => st.marked_at = Some(now),
            Some(at) if now - at >= Duration::from_millis(MARK_INTERVAL_MS.unsigned_abs()) => {
                st.marked_at = Some(now);
                let (store, name) = (self.inner.alloc.store.clone(), self.name().to_owned());
                self.inner.runtime.spawn(async move {
                    let delta = CountsDelta::default();
                    if let Err(e) = store.record_counts(&name, &delta, now_ms()).await {
                        tracing::debug!(sequence = %name, "rate mark not recorded: {e}");
                        return;
                    }
                    follow_rate_with_failover_skip(&*store, &name).await;
                });
            }
            Some(_) => {}
        }
    }

    fn prefetch_mark(&self, b: &Reservation) -> i64 {
        if self.inner.prefetch <= 0.0 {
            return i64::MAX;
        }
        let left = ((b.len() as f64) * self.inner.prefetch).ceil() as i64;
        (b.end - left.max(1)).max(b.start)
    }

    /// Reserves the next block in the background, unless one is spare or
    /// being reserved (the task holds the refill mutex while it reserves, so
    /// a caller that runs dry waits for it instead of reserving twice).
    fn start_prefetch(&self) {
        let this = self.clone();
        self.inner.runtime.spawn(async move {
            let inner = &*this.inner;
            let mut st = inner.refill.lock().await;
            if st.closed || !st.spare.is_empty() {
                return;
            }
            match this.reserve(&mut st, this.block()).await {
                Ok(r) => {
                    st.spare.push_back(r);
                    this.note_reservation(&mut st, r);
                }
                // The caller that runs dry reserves again and sees the error.
                Err(e) => tracing::warn!(sequence = %this.name(), "prefetch failed: {e}"),
            }
        });
    }

    /// Closes the handle (and its clones). The values it reserved but never
    /// handed out go back to the sequence if nobody reserved since (the row
    /// version is unchanged); otherwise they stay a gap, never reused.
    /// Returns the range handed back, if any (for a residue class, its
    /// values are every `increment`-th from the start on). Idempotent.
    ///
    /// # Errors
    /// What the store fails with; the handle is closed all the same.
    pub async fn close(&self) -> Result<Option<Range<i64>>> {
        let back = self.close_slots().await?;
        // One past the last value: exact also at the top of the range.
        Ok(back.map(|r| self.value(r.start)..self.value(r.end - 1) + 1))
    }

    /// [`Self::close`] in slots.
    async fn close_slots(&self) -> Result<Option<Range<i64>>> {
        let inner = &*self.inner;
        let mut st = inner.refill.lock().await;
        if st.closed {
            return Ok(None);
        }
        st.closed = true;
        let unused = inner.cache.seal();
        let Some(last) = st.last else {
            return Ok(None);
        };
        let left: i64 = std::iter::once(unused.clone())
            .chain(st.spare.iter().map(|r| r.start..r.end))
            .map(|r| (r.end - r.start).max(0))
            .sum();
        // The unused values that end where the newest reservation ends: walk
        // back from it over spare blocks and the current block's rest while
        // they are adjacent.
        let mut from = last.end;
        let pieces = std::iter::once(unused).chain(st.spare.iter().map(|r| r.start..r.end));
        for piece in pieces.collect::<Vec<_>>().into_iter().rev() {
            if piece.is_empty() || piece.end != from {
                break;
            }
            from = piece.start;
        }
        let alloc = &inner.alloc;
        // Dropped since (and perhaps created again): the counts of this
        // life are gone with it, and a later life's are not this handle's
        // to write.
        let ours = |row: &SequenceRow| row.check_life(alloc.incarnation, "handle").is_ok();
        let (back, same_life) = if from == last.end {
            // Nothing to hand back: the row tells which life the name is in.
            let row = alloc.store.read_sequence(self.name()).await?;
            (None, row.as_ref().is_some_and(ours))
        } else {
            match alloc
                .high_water
                .hand_back(&*alloc.store, self.name(), from, last.version)
                .await?
            {
                Put::Done(_) => (Some(from..last.end), true),
                Put::Conflict(current) => (None, ours(&current)),
            }
        };
        if same_life {
            self.report_close(left, back.as_ref().map_or(0, |r| r.end - r.start))
                .await;
        }
        Ok(back)
    }

    /// Tells the store what this handle did with what it reserved: handed
    /// out, handed back, or left as a gap. Best effort: a count not recorded
    /// only makes the sequence's unaccounted count larger.
    async fn report_close(&self, left: i64, handed_back_now: i64) {
        let c = &self.inner.alloc.counters;
        let delta = CountsDelta {
            handed_back: c.handed_back.load(Relaxed) + handed_back_now,
            handed_out: c.values.load(Relaxed) - left,
            abandoned: left - handed_back_now,
            skipped: 0,
            incarnation: self.inner.alloc.incarnation,
        };
        if let Err(e) = self
            .inner
            .alloc
            .store
            .record_counts(self.name(), &delta, now_ms())
            .await
        {
            tracing::warn!(sequence = %self.name(), "closed, but its counts were not recorded: {e}");
        }
    }

    /// What this handle has cost so far.
    pub fn stats(&self) -> SequenceStats {
        let c = &self.inner.alloc.counters;
        SequenceStats {
            block: self.block(),
            reservations: c.reservations.load(Relaxed),
            reservation_micros: c.reservation_micros.load(Relaxed),
            conflicts: c.conflicts.load(Relaxed),
            skipped_at_failover: c.fenced.load(Relaxed),
            store_went_back: self.inner.alloc.high_water.refused(),
        }
    }
}

/// Raises an automatic failover margin to what the sequence's rate now calls
/// for ([`crate::store::auto_failover_skip`]); best effort, once a minute
/// per handle.
async fn follow_rate_with_failover_skip(store: &dyn SequenceStore, name: &str) {
    let Ok((row, counts)) = store.read_counts(name).await else {
        return;
    };
    let wanted = counts.failover_skip_wanted(&row, now_ms());
    if !row.failover_skip_set && wanted > row.failover_skip {
        match store.raise_failover_skip(name, wanted).await {
            Ok(()) => {
                tracing::info!(sequence = %name, "failover skip raised to {wanted} for its rate")
            }
            Err(e) => tracing::debug!(sequence = %name, "failover skip not raised: {e}"),
        }
    }
}

/// Milliseconds since the Unix epoch by this process's clock (0 before 1970).
pub use crate::clock::now_ms;

/// The row of a sequence as a caller sees it, for `show` and `list`.
/// Deserializable too: the HTTP API's sequence objects (`keysmith-client`)
/// read back into this type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequenceInfo {
    /// The stored row.
    #[serde(flatten)]
    pub row: SequenceRow,
    /// Values not yet reserved by any handle.
    pub remaining: i64,
    /// Its rate, runway and where its values went; only from [`show`].
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub usage: Option<SequenceUsage>,
    /// For a sequence whose values are a residue class, the class
    /// (`increment` and `offset` in JSON); `row`'s `next`, `start` and
    /// `max` are then values of it (the store counts slots: see
    /// [`Residue`]).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub residue: Option<Residue>,
    /// Only from a create: `Some(start)` when a sequence of the same name
    /// had been dropped and the store raised the requested start above the
    /// values it handed out (creating a dropped name continues above the
    /// values it handed out; see [`crate::store::Tombstone`]): the first
    /// value (for a bit-reversed sequence, the first counter) it starts
    /// at. `None` when it starts where asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_above_dropped: Option<i64>,
    /// Only from [`show`], for a sequence whose numbers come from the
    /// store's period counters (gap-free, per period, formatted, opaque,
    /// encoded, bit-reversed): where its numbers are. Its row's `next` and
    /// its `usage` do not move for those (no block is reserved), so `show`
    /// leaves `usage` out and counts `remaining` from the counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numbers: Option<NumbersUsage>,
}

/// The numbers of a numbered sequence's current period
/// ([`SequenceInfo::numbers`]), from the store's
/// [`NumbersRead`](crate::store::NumbersRead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumbersUsage {
    /// The current period key (0 without a period).
    pub period: i64,
    /// The next new number of the period.
    pub next: i64,
    /// The last number given out in the period (taken with a ticket or
    /// reserved), `None` before the first.
    pub last: Option<i64>,
    /// Numbers given out in the period: `next - start`.
    pub taken: i64,
    /// Of those, open numbers a ticket holds.
    pub held: i64,
    /// Of those, numbers released and waiting to be taken again.
    pub released: i64,
    /// Of those, the rest: committed (for a sequence without tickets:
    /// handed out), or skipped by a fence.
    pub committed: i64,
}

impl NumbersUsage {
    /// The numbers `read` describes, of a sequence starting at `start`.
    pub fn of(read: &crate::store::NumbersRead, start: i64) -> NumbersUsage {
        let next = read.counter.unwrap_or(start);
        let taken = next.saturating_sub(start).max(0);
        NumbersUsage {
            period: read.period,
            next,
            last: (taken > 0).then(|| next - 1),
            taken,
            held: read.held,
            released: read.released,
            committed: taken
                .saturating_sub(read.held)
                .saturating_sub(read.released)
                .max(0),
        }
    }
}

impl From<SequenceRow> for SequenceInfo {
    fn from(row: SequenceRow) -> Self {
        SequenceInfo::of(row, None)
    }
}

impl SequenceInfo {
    /// A stored row as callers see it: in values of `residue`, if given.
    pub fn of(row: SequenceRow, residue: Option<Residue>) -> SequenceInfo {
        let remaining = row.remaining();
        SequenceInfo {
            remaining,
            row: match &residue {
                Some(r) => row_in_values(r, row),
                None => row,
            },
            usage: None,
            residue,
            continued_above_dropped: None,
            numbers: None,
        }
    }

    /// The share of the sequence's range (`start..=max`) not yet reserved,
    /// `0.0` to `1.0` (see [`range_left_share`]).
    pub fn range_left_share(&self) -> f64 {
        range_left_share(self.row.start, self.remaining, self.row.max)
    }

    /// A warning when less than `threshold` (a share, e.g.
    /// [`DEFAULT_RANGE_WARNING_SHARE`]) of the range is left; `None`
    /// otherwise.
    pub fn range_warning(&self, threshold: f64) -> Option<RangeWarning> {
        let left = self.range_left_share();
        (left < threshold).then_some(RangeWarning {
            left_share: left,
            remaining: self.remaining,
            threshold,
        })
    }

    /// [`Self::of`] for the row a create returned, given the start it asked
    /// for (in the row's own units: slots of a residue class): says whether
    /// the store raised it above a dropped sequence's values.
    pub(crate) fn created(row: SequenceRow, residue: Option<Residue>, asked: i64) -> SequenceInfo {
        let raised = row.start > asked;
        let info = SequenceInfo::of(row, residue);
        SequenceInfo {
            continued_above_dropped: raised.then_some(info.row.start),
            ..info
        }
    }
}

/// The share of the range left under which `show`, `/metrics` and the
/// status page warn: 10 %.
pub const DEFAULT_RANGE_WARNING_SHARE: f64 = 0.10;

/// The share of a range `start..=max` that `remaining` values are, `0.0` to
/// `1.0` (`0.0` for an empty range).
pub fn range_left_share(start: i64, remaining: i64, max: i64) -> f64 {
    let size = (i128::from(max) - i128::from(start) + 1) as f64;
    if size <= 0.0 {
        return 0.0;
    }
    (remaining.max(0) as f64 / size).clamp(0.0, 1.0)
}

/// A sequence near the end of its range: less than `threshold` of it left.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RangeWarning {
    /// The share of the range left, `0.0` to `1.0`.
    pub left_share: f64,
    /// Values not yet reserved.
    pub remaining: i64,
    /// The share it was compared with.
    pub threshold: f64,
}

impl std::fmt::Display for RangeWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "only {:.2}% of the range is left ({} values), under the {:.0}% warning share",
            self.left_share * 100.0,
            self.remaining,
            self.threshold * 100.0
        )
    }
}

/// How fast a sequence is used and where its values went, from the counts
/// the store keeps (see [`SequenceCounts`](crate::store::SequenceCounts)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SequenceUsage {
    /// Values ever reserved.
    pub reserved: i64,
    /// Values handles reported as handed out when they closed cleanly
    /// (leases: when they were granted).
    pub handed_out: i64,
    /// Values handed back by `close` (and reserved again later).
    pub handed_back: i64,
    /// Values a clean close could not hand back: a known gap.
    pub abandoned: i64,
    /// Values skipped by moving `next` forward.
    pub skipped: i64,
    /// Reserved values no clean close accounted for: those in open handles,
    /// and at most what handles that died had left.
    pub unaccounted: i64,
    /// Values reserved per second over the last one to two minutes of marks;
    /// `None` before there is a second of history.
    pub rate_per_second: Option<f64>,
    /// Seconds until the maximum at that rate; `None` without a rate or at
    /// a rate of zero.
    pub runway_seconds: Option<f64>,
}

impl SequenceUsage {
    /// The runway in words (see [`runway_words`]).
    #[deprecated(
        since = "0.1.0",
        note = "words are a front end's business: format `runway_seconds` where it is shown"
    )]
    #[allow(deprecated)]
    pub fn runway_words(&self) -> String {
        runway_words(self.runway_seconds)
    }
}

/// A runway in words, in the largest unit that fits ("3.2 years"); "–"
/// without one. Kept for callers of earlier versions; keysmith's CLI and
/// server say runways in their own words.
#[deprecated(
    since = "0.1.0",
    note = "words are a front end's business: format the seconds where they are shown"
)]
pub fn runway_words(seconds: Option<f64>) -> String {
    {
        const DAY: f64 = 86_400.0;
        match seconds {
            None => "–".to_owned(),
            Some(s) if s >= 365.0 * DAY => format!("{:.1} years", s / (365.0 * DAY)),
            Some(s) if s >= DAY => format!("{:.1} days", s / DAY),
            Some(s) if s >= 3600.0 => format!("{:.1} hours", s / 3600.0),
            Some(s) => format!("{s:.0} seconds"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_block_follows_the_refill_interval() {
        let a = Adaptive {
            min: 10,
            max: 1000,
            target: Duration::from_millis(100),
        };
        assert_eq!(
            a.next_block(100, Duration::from_millis(10)),
            200,
            "too fast: grow"
        );
        assert_eq!(
            a.next_block(100, Duration::from_millis(100)),
            100,
            "on target: keep"
        );
        assert_eq!(
            a.next_block(100, Duration::from_secs(1)),
            50,
            "too slow: shrink"
        );
        assert_eq!(a.next_block(800, Duration::ZERO), 1000, "bounded above");
        assert_eq!(
            a.next_block(15, Duration::from_secs(9)),
            10,
            "bounded below"
        );
        assert_eq!(
            a.next_block(i64::MAX / 2 + 1, Duration::ZERO),
            1000,
            "no overflow"
        );
    }

    #[test]
    fn adaptive_bounds_are_checked() {
        let ok = Adaptive {
            min: 1,
            max: 10,
            target: Duration::from_secs(1),
        };
        ok.validate().unwrap();
        for bad in [
            Adaptive { min: 0, ..ok },
            Adaptive { min: 11, ..ok },
            Adaptive {
                target: Duration::ZERO,
                ..ok
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}

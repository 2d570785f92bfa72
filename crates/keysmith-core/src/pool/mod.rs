//! The value pool: low-contention allocation without a hot row.
//!
//! A pool of size `N` holds `N` free numbers, at first `start..start + N`. A
//! taker reads `k` members at random (a *sample*, default
//! [`DEFAULT_SAMPLE`]), picks one of them at random and, in one atomic
//! conditional change, removes it and adds `number + N`. The change applies
//! only if the number is still a member; otherwise nothing changes and the
//! taker tries another of its candidates, then (after a short jittered wait)
//! a fresh sample, until its retry budget is spent
//! ([`crate::DEFAULT_RETRY_BUDGET`], then [`Error::Contention`]).
//! Concurrent takers spread over `N` members instead of meeting on one row,
//! so they rarely collide.
//!
//! What a pool guarantees, across threads, processes and crashes, on every
//! store:
//!
//! - every number is handed out at most once: the pool always holds exactly
//!   one member of each residue modulo `N`, a number leaves the pool only
//!   through a swap that found it there, and a member goes back down (from
//!   `v + N` to `v`) only when `v` was never handed out
//!   ([`ValuePool::give_back`]);
//! - the pool always holds exactly `N` members;
//! - no holes: every number from `start` up to a member of the same residue
//!   was handed out, except a number a taker swapped out and then lost (the
//!   process died before using it, or a swap's outcome was not reported).
//!   A [`ValuePool::take_n`] that fails part-way gives its numbers back.
//!
//! A pool may hand out only the values of a residue class
//! ([`PoolSpec::residue`]: every value `≡ offset (mod increment)`), so that
//! regions with stores of their own never hand out the same number. The
//! store keeps its members as slots of the class, an ordinary counter, and
//! this module makes values of them where they leave the library and turns
//! values given back into members (see [`crate::store::PoolRow::value`]):
//! the guarantees above hold for the members, hence for the values, one per
//! member. [`create`] keeps the class with the pool; every handle reads it.
//!
//! What it does not promise: order. Numbers come out in no particular order.
//! How close together they stay depends on the store's samples: when every
//! member is as likely to be sampled as any other, each residue is taken
//! about equally often, so the members stay close together (their spread
//! grows like the square root of the number of takes); a store whose
//! samples favour some members lets those residues race ahead, and makes
//! takers collide more, as they meet on the favoured members.
//!
//! ```no_run
//! # async fn demo() -> keysmith_core::Result<()> {
//! use keysmith_core::pool::{self, PoolSpec, ValuePool};
//!
//! let store = keysmith_core::store::open("sqlite://keysmith.db").await?;
//! pool::create(&*store, &PoolSpec::new("tickets", 100)).await?;
//! let tickets = ValuePool::builder().store(store).name("tickets").build().await?;
//! let n = tickets.take().await?; // one of 1..=100 the first time
//! # let _ = n; Ok(()) }
//! ```

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use rand::seq::SliceRandom;
use serde::Serialize;

use crate::backoff::Retries;
use crate::store::{PoolRow, PoolStore};
use crate::{Error, Result, validate_name};

mod admin;

pub use admin::{
    CreatedPool, PoolInfo, create, describe, describe_if_exists, list, members, remove, runway,
    runway_from_marks,
};

pub use crate::store::{MAX_POOL_SIZE, PoolSpec};

/// Members read per sample unless [`ValuePoolBuilder::sample`] says otherwise.
pub const DEFAULT_SAMPLE: usize = 5;

/// The largest sample a handle may read.
pub const MAX_SAMPLE: usize = 1_000;

/// The most numbers one [`ValuePool::take_n`] call returns.
pub const MAX_BATCH: i64 = 1_000_000;

/// A handle on one pool: cheap to clone, `Send + Sync`, shared by threads and
/// tasks. Clones share their counters and their spare candidates.
///
/// Every number it returns is unique across all handles, processes and hosts
/// on the same store, and, for a pool in a residue class, a value of it.
#[derive(Debug, Clone)]
pub struct ValuePool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn PoolStore>,
    /// The row as the store holds it: members, not values. Everything below
    /// works on members; [`ValuePool::take`] and [`ValuePool::give_back`]
    /// map at the edge.
    stored: PoolRow,
    /// The row as callers see it: `start` a value.
    row: PoolRow,
    sample: usize,
    retry_budget: std::time::Duration,
    max_rounds: Option<u32>,
    reuse: bool,
    /// Candidates (members) left over from the last sample, tried before a
    /// new sample.
    spare: Mutex<Vec<i64>>,
    /// Members this handle took but never handed out (a batch failed
    /// part-way) and could not give back to the pool: the next takes hand
    /// them out first.
    returned: Mutex<Vec<i64>>,
    /// Per slot, the largest member this handle took: a store that offers
    /// one at or below it went back in time ([`Error::StoreWentBack`]).
    /// At most one entry per slot.
    taken: Mutex<std::collections::HashMap<i64, i64>>,
    counters: Counters,
}

#[derive(Debug, Default)]
struct Counters {
    takes: AtomicU64,
    samples: AtomicU64,
    attempts: AtomicU64,
    conflicts: AtomicU64,
}

/// What a handle (and its clones) has cost so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PoolStats {
    /// Numbers handed out.
    pub takes: u64,
    /// Samples read from the store.
    pub samples: u64,
    /// Conditional swaps sent to the store.
    pub attempts: u64,
    /// Swaps that found their candidate already taken by someone else, so
    /// changed nothing.
    pub conflicts: u64,
}

/// Builds a [`ValuePool`]; start with [`ValuePool::builder`].
#[derive(Debug, Default)]
#[must_use]
pub struct ValuePoolBuilder {
    store: Option<Arc<dyn PoolStore>>,
    name: Option<String>,
    sample: Option<usize>,
    retry_budget: Option<std::time::Duration>,
    max_rounds: Option<u32>,
    reuse: Option<bool>,
}

impl ValuePoolBuilder {
    /// The store holding the pool (required).
    pub fn store(mut self, store: Arc<dyn PoolStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The pool's name (required). It must exist: see [`create`].
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Members read per sample, `1..=`[`MAX_SAMPLE`]. Default
    /// [`DEFAULT_SAMPLE`]. A larger sample gives a taker more candidates
    /// before it has to read again.
    pub fn sample(mut self, k: usize) -> Self {
        self.sample = Some(k);
        self
    }

    /// How long one take keeps trying (other candidates, fresh samples)
    /// when others took its candidates first, before it fails with
    /// [`Error::Contention`]. Default [`crate::DEFAULT_RETRY_BUDGET`]; zero
    /// reads one sample and tries its candidates only.
    pub fn retry_budget(mut self, budget: std::time::Duration) -> Self {
        self.retry_budget = Some(budget);
        self
    }

    /// At most this many samples per take (at least 1), on top of the retry
    /// budget. Default: no limit but the budget.
    pub fn max_rounds(mut self, rounds: u32) -> Self {
        self.max_rounds = Some(rounds);
        self
    }

    /// Whether a take may start from the candidates the previous take of
    /// this handle sampled but did not use, instead of reading a new sample.
    /// Default `false`: every take reads a fresh sample, as the pattern
    /// describes. `true` saves most sample reads; a stale candidate costs one
    /// failed swap.
    pub fn reuse_sample(mut self, reuse: bool) -> Self {
        self.reuse = Some(reuse);
        self
    }

    /// Opens the handle: reads the pool's row once (its size is fixed from
    /// then on), takes nothing yet. Must run inside a tokio runtime with
    /// timers enabled, as every take may wait between rounds.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a missing store or name, or a sample
    /// or round count out of range; [`Error::InvalidName`];
    /// [`Error::NotFound`] (with similar names) when the pool does not exist;
    /// what the store fails with.
    pub async fn build(self) -> Result<ValuePool> {
        let store = self
            .store
            .ok_or_else(|| Error::invalid("ValuePool::builder(): no store given"))?;
        let name = self
            .name
            .ok_or_else(|| Error::invalid("ValuePool::builder(): no name given"))?;
        let sample = self.sample.unwrap_or(DEFAULT_SAMPLE);
        if !(1..=MAX_SAMPLE).contains(&sample) {
            return Err(Error::invalid(format!(
                "sample must be between 1 and {MAX_SAMPLE}, got {sample}"
            )));
        }
        if self.max_rounds == Some(0) {
            return Err(Error::invalid("max_rounds must be at least 1"));
        }
        validate_name(&name)?;
        let row = admin::read(&*store, &name).await?;
        Ok(ValuePool {
            inner: Arc::new(Inner {
                store,
                row: row.clone().in_values(),
                stored: row,
                sample,
                retry_budget: self.retry_budget.unwrap_or(crate::DEFAULT_RETRY_BUDGET),
                max_rounds: self.max_rounds,
                reuse: self.reuse.unwrap_or(false),
                spare: Mutex::new(Vec::new()),
                returned: Mutex::new(Vec::new()),
                taken: Mutex::new(std::collections::HashMap::new()),
                counters: Counters::default(),
            }),
        })
    }
}

impl ValuePool {
    /// Starts building a handle.
    pub fn builder() -> ValuePoolBuilder {
        ValuePoolBuilder::default()
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.stored.name
    }

    /// The pool's row as the handle read it when it was opened (a pool's
    /// start, size and residue class never change), `start` a value.
    pub fn row(&self) -> &PoolRow {
        &self.inner.row
    }

    /// The pool's size `N`: how many members it holds at all times.
    pub fn size(&self) -> i64 {
        self.inner.stored.size
    }

    /// The pool's first number (for a pool in a residue class, the first
    /// value of its class at or above the start it was created with).
    pub fn start(&self) -> i64 {
        self.inner.row.start
    }

    /// The residue class of the pool's values, if it was created with one.
    pub fn residue(&self) -> Option<crate::store::Residue> {
        self.inner.stored.residue
    }

    /// Members read per sample.
    pub fn sample(&self) -> usize {
        self.inner.sample
    }

    /// How long one take keeps trying before it gives up.
    pub fn retry_budget(&self) -> std::time::Duration {
        self.inner.retry_budget
    }

    /// The largest number this pool can hand out: `i64::MAX - size`, since
    /// its replacement `number + size` must fit in an `i64` (for a pool in a
    /// residue class, the value `size` members below the last value of the
    /// class that fits: [`PoolRow::max_value`]).
    pub fn max_value(&self) -> i64 {
        self.inner.stored.max_value()
    }

    /// Takes one number: unique across every handle on the store, durably
    /// removed from the pool (its replacement durably added) before it is
    /// returned.
    ///
    /// Costs one sample read and one conditional swap when nobody collides;
    /// each collision costs one more swap, and each exhausted sample one
    /// more read.
    ///
    /// # Errors
    /// [`Error::Contention`] when others took every candidate of every
    /// sample it read within its retry budget;
    /// [`Error::Exhausted`] when every member is above [`Self::max_value`];
    /// [`Error::NotFound`] if the pool was dropped; [`Error::Corrupt`] if the
    /// store holds no members for it; [`Error::Unavailable`] and what else the
    /// store fails with. A take that fails hands out nothing; a swap whose
    /// outcome the store could not report may leave a hole, never a
    /// duplicate.
    pub async fn take(&self) -> Result<i64> {
        let member = self.take_member().await?;
        Ok(self.inner.stored.value(member))
    }

    /// [`Self::take`] of a stored member (the value for a pool without a
    /// residue class).
    async fn take_member(&self) -> Result<i64> {
        let inner = &*self.inner;
        if let Some(v) = lock(&inner.returned).pop() {
            inner.counters.takes.fetch_add(1, Relaxed);
            return Ok(v);
        }
        let mut candidates = if inner.reuse {
            std::mem::take(&mut *lock(&inner.spare))
        } else {
            Vec::new()
        };
        // A round is one sample; a lost round is a sample whose candidates
        // all went to others.
        let mut rounds = Retries::new(inner.retry_budget, inner.max_rounds);
        let mut sampled = false;
        let mut attempts = 0;
        loop {
            let Some(v) = candidates.pop() else {
                if sampled {
                    if !rounds.lost() {
                        return Err(Error::Contention {
                            name: inner.stored.name.clone(),
                            attempts,
                        });
                    }
                    rounds.wait().await;
                }
                sampled = true;
                candidates = self.sample_candidates().await?;
                continue;
            };
            // What this handle had taken from v's slot before the swap: a
            // candidate from an older sample may be below it (a lost race,
            // which the swap reports), but a swap the store accepts must be
            // above it.
            let floor = lock(&inner.taken).get(&self.slot_of(v)).copied();
            attempts += 1;
            inner.counters.attempts.fetch_add(1, Relaxed);
            // v <= highest_takeable (sample_candidates keeps no other):
            // cannot overflow.
            let swapped = inner
                .store
                .swap_member_in(
                    &inner.stored.name,
                    inner.stored.incarnation,
                    v,
                    v + inner.stored.size,
                )
                .await;
            if self.named(swapped).await? {
                self.check_forward(v, floor)?;
                inner.counters.takes.fetch_add(1, Relaxed);
                let slot = self.slot_of(v);
                let mut taken = lock(&inner.taken);
                let e = taken.entry(slot).or_insert(v);
                *e = (*e).max(v);
                drop(taken);
                if inner.reuse && !candidates.is_empty() {
                    let mut spare = lock(&inner.spare);
                    if spare.is_empty() {
                        *spare = candidates;
                    }
                }
                return Ok(v);
            }
            inner.counters.conflicts.fetch_add(1, Relaxed);
        }
    }

    /// `n` numbers (1 to [`MAX_BATCH`]), each unique, in the order taken.
    /// One [`Self::take`] after another: `n` times its cost.
    ///
    /// All or nothing: when a take fails part-way, the numbers already taken
    /// go back (see [`Self::give_back`]) and the call fails, handing out
    /// nothing and losing nothing, but for a give-back the store failed (a
    /// hole, never a duplicate).
    ///
    /// # Errors
    /// As [`Self::take`]; [`Error::InvalidArgument`] for a bad `n`.
    pub async fn take_n(&self, n: i64) -> Result<Vec<i64>> {
        check_batch(n)?;
        let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        for _ in 0..n {
            match self.take_member().await {
                Ok(m) => out.push(m),
                Err(e) => {
                    self.give_back_members(&out).await;
                    return Err(e);
                }
            }
        }
        let row = &self.inner.stored;
        Ok(out.into_iter().map(|m| row.value(m)).collect())
    }

    /// Gives back numbers this handle took and never handed out: each goes
    /// back into the pool (its replacement `v + size` is swapped for `v`, in
    /// the same slot) if no one has taken the replacement since; otherwise it
    /// stays with the handle, and its next takes hand it out first. A number
    /// whose swap failed with an error may be in the pool again or not: the
    /// handle drops it (a hole, logged). None is ever handed out twice.
    /// Numbers given to the caller must not be given back. A call dropped
    /// part-way drops the numbers it had not swapped yet (holes).
    ///
    /// Per slot the handle remembers only the last number it took, so it
    /// takes back only that one: of `v` and `v + size`, both taken by this
    /// handle, only `v + size` goes back; `v` stays with the caller (the
    /// handle cannot tell it from a number another handle took).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`], giving nothing back, when any of `numbers`
    /// is one this pool cannot have handed out (not a value of its residue
    /// class, below its start or above [`Self::max_value`]), or is not the
    /// last number this handle (or a clone) took from its slot and still
    /// holds: never taken, taken by another handle, an earlier number of its
    /// slot, given back already, or a second number of one slot in
    /// `numbers`. Each of those, taken back, could be handed out twice.
    /// Nothing else fails: a swap the store refused or failed is as said
    /// above.
    pub async fn give_back(&self, numbers: &[i64]) -> Result<()> {
        let row = &self.inner.stored;
        let members = {
            let mut slots = std::collections::HashSet::with_capacity(numbers.len());
            let mut taken = lock(&self.inner.taken);
            let returned = lock(&self.inner.returned);
            let mut members = Vec::with_capacity(numbers.len());
            for &v in numbers {
                let m = row.member(v)?;
                if m < row.start || m > row.highest_takeable() {
                    return Err(Error::invalid(format!(
                        "{v} is not a number pool {:?} can have handed out: its numbers are {} to {}",
                        row.name,
                        row.value(row.start),
                        self.max_value()
                    )));
                }
                let slot = self.slot_of(m);
                let held = taken.get(&slot) == Some(&m) && !returned.contains(&m);
                if !held || !slots.insert(slot) {
                    return Err(Error::invalid(format!(
                        "{v} is not a number this handle of pool {:?} can take back: give back \
                         only numbers this handle took and never handed out, the last it took \
                         from each slot, each once",
                        row.name
                    )));
                }
                members.push(m);
            }
            // Claimed: a second give_back of one of them, even one running
            // beside this, is refused above.
            for slot in &slots {
                taken.remove(slot);
            }
            members
        };
        self.give_back_members(&members).await;
        Ok(())
    }

    /// [`Self::give_back`] of stored members, checked by the caller.
    async fn give_back_members(&self, members: &[i64]) {
        let inner = &*self.inner;
        for &v in members {
            // v <= highest_takeable, so v + size fits.
            let swapped = inner
                .store
                .swap_member_in(
                    &inner.stored.name,
                    inner.stored.incarnation,
                    v + inner.stored.size,
                    v,
                )
                .await;
            // Not handed out: not a take (a later take of a returned number
            // counts again).
            inner.counters.takes.fetch_sub(1, Relaxed);
            let mut taken = lock(&inner.taken);
            match swapped {
                Ok(false) => {
                    // Someone took the replacement: v is still the handle's
                    // alone. The slot's floor again (a claim by give_back
                    // removed it), and its next take.
                    let e = taken.entry(self.slot_of(v)).or_insert(v);
                    *e = (*e).max(v);
                    lock(&inner.returned).push(v);
                }
                // Ok(true): v is the pool's again, and this handle may be
                // offered it. An error: the swap may have gone through (a
                // timeout after the store took it), so v may be the pool's;
                // the handle drops it, a hole, never a duplicate. Either way
                // v is no floor for the next take of its slot.
                Ok(true) | Err(_) => {
                    if taken.get(&self.slot_of(v)) == Some(&v) {
                        taken.remove(&self.slot_of(v));
                    }
                    if let Err(e) = swapped {
                        tracing::warn!(
                            pool = %inner.stored.name,
                            number = inner.stored.value(v),
                            "a number given back may or may not be in the pool again (the store failed: {e}); dropped, a hole"
                        );
                    }
                }
            }
        }
    }

    /// Takes `n` numbers (1 to [`MAX_BATCH`]) one after another and gives
    /// each to `each` as soon as its swap is committed, before the next take
    /// starts. A caller that records every number as it comes (prints it,
    /// writes it down) loses at most the one in flight if it dies.
    ///
    /// # Errors
    /// The first error of a take (as [`Self::take`]) or of `each`, which
    /// stops the loop; [`Error::InvalidArgument`] for a bad `n`, before
    /// anything is taken. `each` has seen every number taken, also on error
    /// (a number `each` failed on may have left it, so it is not given back).
    pub async fn take_each<E: From<Error>>(
        &self,
        n: i64,
        mut each: impl FnMut(i64) -> Result<(), E>,
    ) -> Result<(), E> {
        check_batch(n)?;
        for _ in 0..n {
            each(self.take().await?)?;
        }
        Ok(())
    }

    /// What this handle and its clones have cost so far.
    pub fn stats(&self) -> PoolStats {
        let c = &self.inner.counters;
        PoolStats {
            takes: c.takes.load(Relaxed),
            samples: c.samples.load(Relaxed),
            attempts: c.attempts.load(Relaxed),
            conflicts: c.conflicts.load(Relaxed),
        }
    }

    /// The slot (residue) of member `v`.
    fn slot_of(&self, v: i64) -> i64 {
        let row = &self.inner.stored;
        (i128::from(v) - i128::from(row.start)).rem_euclid(i128::from(row.size)) as i64
    }

    /// Refuses a member the store let this handle swap although it is at or
    /// below `held`, what the handle had taken from its slot before the
    /// swap: the store went back (a restore, a failover it did not detect).
    /// The number is not handed out (the swap moved it on: a gap). The
    /// error names values.
    fn check_forward(&self, v: i64, held: Option<i64>) -> Result<()> {
        let inner = &*self.inner;
        match held {
            Some(h) if v <= h => {
                let (h, v) = (inner.stored.value(h), inner.stored.value(v));
                tracing::error!(
                    pool = %inner.stored.name,
                    held = h,
                    got = v,
                    "the store went back: it offered a number this process already took; refused"
                );
                Err(Error::StoreWentBack {
                    kind: "pool",
                    name: inner.stored.name.clone(),
                    held: h,
                    got: v,
                })
            }
            _ => Ok(()),
        }
    }

    /// A fresh sample of members in random order, without members that
    /// cannot be taken (past [`PoolRow::highest_takeable`]). Empty when the
    /// sample held only such members but the pool still has others.
    async fn sample_candidates(&self) -> Result<Vec<i64>> {
        let inner = &*self.inner;
        let sample = inner
            .store
            .sample_members(&inner.stored.name, inner.sample)
            .await;
        let mut sample = self.named(sample).await?;
        inner.counters.samples.fetch_add(1, Relaxed);
        if sample.is_empty() {
            return Err(Error::Corrupt(format!(
                "pool {:?} has no members; drop it and create it again",
                inner.stored.name
            )));
        }
        let max = inner.stored.highest_takeable();
        sample.retain(|&v| v <= max);
        if sample.is_empty() {
            let members = inner.store.list_members(&inner.stored.name).await;
            if self.named(members).await?.iter().all(|&v| v > max) {
                return Err(Error::Exhausted {
                    name: inner.stored.name.clone(),
                    max: self.max_value(),
                });
            }
        }
        sample.shuffle(&mut rand::rng());
        Ok(sample)
    }

    /// Turns the store's bare `NotFound` into one with similar names.
    async fn named<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Err(Error::NotFound { .. }) => {
                Err(admin::not_found(&*self.inner.store, self.name()).await)
            }
            other => other,
        }
    }
}

fn check_batch(n: i64) -> Result<()> {
    if (1..=MAX_BATCH).contains(&n) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "count must be between 1 and {MAX_BATCH}, got {n}"
        )))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_bounds() {
        check_batch(1).unwrap();
        check_batch(MAX_BATCH).unwrap();
        for bad in [0, -5, MAX_BATCH + 1] {
            assert!(matches!(check_batch(bad), Err(Error::InvalidArgument(_))));
        }
    }
}

//! An in-memory store: for tests and examples. Nothing survives the process.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use async_trait::async_trait;
use rand::seq::IteratorRandom;

use std::time::Duration;

use super::{
    Alteration, CountsDelta, PoolRow, PoolSpec, PoolStore, Put, RateMarks, Reservation,
    SequenceCounts, SequenceRow, SequenceSpec, SequenceStore, Settle, Store, Tombstone,
    WorkerClaim, WorkerLease, WorkerStore, all_taken, lowest_free,
};
use super::{
    HeldNumber, NumberStore, Numbering, NumbersRead, PeriodRange, Release, Renewal, TakenNumber,
    TicketTake, not_numbered, refused, ticket_ttl_ms,
};
use crate::{Error, Result};

/// A store that lives in this process's memory. Cheap, fast, not durable.
///
/// Its generation is random per store; [`MemoryStore::snapshot`] and
/// [`MemoryStore::restore`] stand in for a backup and its restore in tests
/// (the real faults are tested on the real stores).
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    calls: std::sync::atomic::AtomicU64,
}

/// A copy of a [`MemoryStore`]'s contents, as a backup holds them.
#[derive(Debug, Clone)]
pub struct MemorySnapshot(State);

#[derive(Debug, Default, Clone)]
struct State {
    /// The store's generation; empty until first asked for.
    generation: String,
    sequences: BTreeMap<String, SequenceRow>,
    counts: BTreeMap<String, SequenceCounts>,
    pool_marks: BTreeMap<String, RateMarks>,
    pools: BTreeMap<String, (PoolRow, BTreeSet<i64>)>,
    /// (group, worker) -> its lease and floor; expiry by the system clock.
    workers: BTreeMap<(String, i64), WorkerSlot>,
    /// Numbered sequences: their numbering and current period.
    numbering: BTreeMap<String, (Numbering, i64)>,
    /// (name, period) -> the next new number.
    counters: BTreeMap<(String, i64), i64>,
    /// (name, period, number) -> its ticket (`None`: released) and expiry
    /// (system-clock ms), while the number is open.
    open: BTreeMap<(String, i64, i64), (Option<String>, i64)>,
    /// The tombstones of dropped sequences, by name.
    sequence_tombstones: BTreeMap<String, Tombstone>,
    /// The tombstones of dropped pools, by name.
    pool_tombstones: BTreeMap<String, Tombstone>,
}

#[derive(Debug, Clone)]
struct WorkerSlot {
    fence: i64,
    /// Who acquired it last.
    holder: String,
    until_ms: i64,
    /// System-clock ms at which the lease expires; 0 when released.
    expires_ms: i64,
    /// The store generation of the last acquisition or renewal.
    generation: Option<String>,
}

fn ttl_ms(ttl: Duration) -> i64 {
    ttl.as_millis().min(i64::MAX as u128) as i64
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of everything the store holds now.
    pub fn snapshot(&self) -> MemorySnapshot {
        MemorySnapshot(self.lock().clone())
    }

    /// How many contract methods this store has served: each one is a round
    /// trip (or a transaction) on a store behind a network, so this is what
    /// tests count to hold a call to the round trips its docs promise.
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State half-written: every
        // closure checks before it writes.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts back what `snapshot` held, as a restore from backup does.
    /// `same_generation`: the restore keeps the store's generation (as a
    /// copied SQLite file does), else the store starts a new one (as a
    /// promoted replica or a point-in-time recovery does).
    pub fn restore(&self, snapshot: &MemorySnapshot, same_generation: bool) {
        let mut s = self.lock();
        let generation = std::mem::take(&mut s.generation);
        *s = snapshot.0.clone();
        s.generation = if same_generation {
            generation
        } else {
            String::new()
        };
    }

    /// One contract method's work, counted in [`Self::calls`].
    fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f(&mut self.lock())
    }
}

/// The keys of `map` next to `name`, as
/// [`SequenceStore::sequence_names_near`] defines them: two range reads of
/// the ordered map.
fn keys_near<V>(map: &BTreeMap<String, V>, name: &str, limit: usize) -> Vec<String> {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let mut out: Vec<String> = map
        .range::<str, _>((Unbounded, Excluded(name)))
        .rev()
        .take(limit / 2)
        .map(|(n, _)| n.clone())
        .collect();
    out.reverse();
    out.extend(
        map.range::<str, _>((Included(name), Unbounded))
            .take(limit - limit / 2)
            .map(|(n, _)| n.clone()),
    );
    out
}

/// The entries of `map` whose keys start with `prefix`: one range read of
/// the ordered map.
fn with_prefix<'a, V>(
    map: &'a BTreeMap<String, V>,
    prefix: &str,
) -> impl Iterator<Item = (&'a String, &'a V)> {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let end = crate::prefix_end(prefix);
    let upper = end.as_deref().map_or(Unbounded, Excluded);
    map.range::<str, _>((Included(prefix), upper))
}

impl State {
    /// Every member of a pool moved forward by `rounds`, the generation
    /// recorded; nothing changes when a member would not fit.
    fn fence_members(
        name: &str,
        row: &mut PoolRow,
        members: &mut BTreeSet<i64>,
        rounds: i64,
        generation: String,
    ) -> Result<()> {
        let moved = members
            .iter()
            .map(|v| super::fenced_member(*v, rounds, row.size, row.residue.as_ref()))
            .collect::<Option<BTreeSet<i64>>>()
            .ok_or_else(|| super::fence_exhausts(name, row.size, row.residue.as_ref()))?;
        *members = moved;
        row.generation = Some(generation);
        Ok(())
    }

    fn generation(&mut self) -> String {
        if self.generation.is_empty() {
            self.generation = format!("memory:{}", super::random_id());
        }
        self.generation.clone()
    }

    fn row(&mut self, name: &str) -> Result<&mut SequenceRow> {
        self.sequences
            .get_mut(name)
            .ok_or_else(|| Error::not_found("sequence", name))
    }

    /// The row of `name`, fenced into the current generation first
    /// ([`SequenceRow::fence`]), and the values the fence skipped.
    fn fenced_row(&mut self, name: &str) -> Result<(&mut SequenceRow, i64)> {
        let generation = self.generation();
        let row = self.row(name)?;
        let mut skipped = 0;
        if let Some(f) = row.fence(&generation) {
            skipped = f.next - row.next;
            *row = f;
        }
        row.generation = Some(generation);
        Ok((row, skipped))
    }

    fn pool(&mut self, name: &str) -> Result<&mut (PoolRow, BTreeSet<i64>)> {
        self.pools
            .get_mut(name)
            .ok_or_else(|| Error::not_found("pool", name))
    }

    fn reserve(&mut self, name: &str, n: i64) -> Result<Reservation> {
        let (row, fenced) = self.fenced_row(name)?;
        let mut r = row.plan(n)?;
        row.next = r.end;
        row.version = r.version;
        r.fenced = fenced;
        Ok(r)
    }
}

#[async_trait]
impl SequenceStore for MemoryStore {
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow> {
        self.with(|s| {
            if s.sequences.contains_key(&spec.name) {
                return Err(Error::AlreadyExists {
                    kind: "sequence",
                    name: spec.name.clone(),
                });
            }
            let spec = s.raised(spec, None)?;
            let row = SequenceRow::created_after(&spec, &s.generation(), &s.tombstone(&spec.name));
            s.sequences.insert(spec.name.clone(), row.clone());
            Ok(row)
        })
    }

    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        self.with(|s| Ok(s.sequences.get(name).cloned()))
    }

    async fn put_if_version(&self, name: &str, new_next: i64, expected: u64) -> Result<Put> {
        self.with(|s| {
            let (row, _) = s.fenced_row(name)?;
            if row.version != expected {
                return Ok(Put::Conflict(row.clone()));
            }
            row.next = new_next;
            row.version += 1;
            Ok(Put::Done(row.clone()))
        })
    }

    async fn alter_checked(&self, name: &str, change: &Alteration, expected: u64) -> Result<Put> {
        self.with(|s| {
            let (row, _) = s.fenced_row(name)?;
            if row.version != expected {
                return Ok(Put::Conflict(row.clone()));
            }
            row.next = change.next;
            row.max = change.max;
            row.block = change.block;
            row.failover_skip = change.failover_skip;
            row.failover_skip_set = change.failover_skip_set;
            row.version += 1;
            Ok(Put::Done(row.clone()))
        })
    }

    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> Result<()> {
        self.with(|s| {
            let row = s.row(name)?;
            if !row.failover_skip_set && row.failover_skip < at_least {
                row.failover_skip = at_least;
            }
            Ok(())
        })
    }

    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        self.with(|s| s.reserve(name, n))
    }

    async fn reserve_locked_in(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        self.with(|s| {
            s.row(name)?.check_life(incarnation, "handle")?;
            s.reserve(name, n)
        })
    }

    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        self.with(|s| {
            let row = s.row(name)?.clone();
            let counts = s.counts.entry(name.to_owned()).or_default();
            *counts = counts.apply(&row, delta, now_ms)?;
            Ok(())
        })
    }

    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)> {
        self.with(|s| {
            let row = s.row(name)?.clone();
            Ok((row, s.counts.get(name).copied().unwrap_or_default()))
        })
    }

    async fn list_sequences(&self) -> Result<Vec<SequenceRow>> {
        self.with(|s| Ok(s.sequences.values().cloned().collect()))
    }

    async fn sequence_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.with(|s| Ok(keys_near(&s.sequences, name, limit)))
    }

    async fn count_sequences_with_prefix(&self, prefix: &str) -> Result<u64> {
        self.with(|s| Ok(with_prefix(&s.sequences, prefix).count() as u64))
    }

    async fn drop_sequence(&self, name: &str) -> Result<()> {
        self.with(|s| {
            let row = s
                .sequences
                .remove(name)
                .ok_or_else(|| Error::not_found("sequence", name))?;
            let numbering = s.numbering.get(name).map(|(n, _)| n.clone());
            let counters_next = s
                .counters
                .iter()
                .filter(|((n, _), _)| n == name)
                .map(|(_, next)| *next)
                .max();
            let generation = s.generation();
            let t = s.sequence_tombstones.entry(name.to_owned()).or_default();
            *t = t.after_sequence_drop(&row, numbering.as_ref(), counters_next, &generation);
            s.counts.remove(name);
            s.forget_numbers(name);
            Ok(())
        })
    }
}

#[async_trait]
impl PoolStore for MemoryStore {
    async fn create_pool(&self, spec: &PoolSpec) -> Result<PoolRow> {
        let name = spec.name.as_str();
        self.with(|s| {
            if s.pools.contains_key(name) {
                return Err(Error::AlreadyExists {
                    kind: "pool",
                    name: name.to_owned(),
                });
            }
            let t = s.tombstone(name);
            let raised = t.raise_pool(spec)?;
            let (start, size) = (raised.start, raised.size);
            let row = PoolRow {
                name: name.to_owned(),
                start,
                size,
                generation: Some(s.generation()),
                residue: spec.residue,
                incarnation: t.incarnation(),
            };
            s.pools.insert(
                name.to_owned(),
                (row.clone(), (start..start + size).collect()),
            );
            Ok(row)
        })
    }

    async fn read_pool(&self, name: &str) -> Result<Option<PoolRow>> {
        self.with(|s| Ok(s.pools.get(name).map(|(r, _)| r.clone())))
    }

    async fn sample_members(&self, name: &str, k: usize) -> Result<Vec<i64>> {
        self.with(|s| {
            let (_, members) = s.pool(name)?;
            Ok(members.iter().copied().sample(&mut rand::rng(), k))
        })
    }

    async fn swap_member(&self, name: &str, take: i64, put: i64) -> Result<bool> {
        self.swap_member_in(name, 0, take, put).await
    }

    async fn swap_member_in(
        &self,
        name: &str,
        incarnation: u64,
        take: i64,
        put: i64,
    ) -> Result<bool> {
        self.with(|s| {
            let generation = s.generation();
            let (row, members) = s.pool(name)?;
            row.check_life(incarnation)?;
            match super::pool_generation(row.generation.as_deref(), &generation) {
                super::PoolGeneration::Current => {}
                super::PoolGeneration::Record => row.generation = Some(generation),
                super::PoolGeneration::Fence => {
                    let rounds = super::pool_fence_rounds(row.size);
                    State::fence_members(name, row, members, rounds, generation)?;
                    return Ok(false);
                }
            }
            if !members.remove(&take) {
                return Ok(false);
            }
            if !members.insert(put) {
                return Err(Error::Corrupt(format!(
                    "pool {name:?} already holds {put}, which it should not yet"
                )));
            }
            Ok(true)
        })
    }

    async fn list_members(&self, name: &str) -> Result<Vec<i64>> {
        self.with(|s| Ok(s.pool(name)?.1.iter().copied().collect()))
    }

    async fn fence_pool(&self, name: &str, rounds: i64) -> Result<()> {
        self.with(|s| {
            let generation = s.generation();
            let (row, members) = s.pool(name)?;
            State::fence_members(name, row, members, rounds, generation)
        })
    }

    async fn record_pool_mark(&self, name: &str, now_ms: i64, taken: i64) -> Result<()> {
        self.with(|s| {
            s.pool(name)?;
            let marks = s.pool_marks.entry(name.to_owned()).or_default();
            *marks = marks.advance(now_ms, taken);
            Ok(())
        })
    }

    async fn read_pool_marks(&self, name: &str) -> Result<RateMarks> {
        self.with(|s| {
            s.pool(name)?;
            Ok(s.pool_marks.get(name).copied().unwrap_or_default())
        })
    }

    async fn pool_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.with(|s| Ok(keys_near(&s.pools, name, limit)))
    }

    async fn pool_totals_with_prefix(&self, prefix: &str) -> Result<super::PoolTotals> {
        self.with(|s| {
            Ok(super::PoolTotals::of(
                with_prefix(&s.pools, prefix).map(|(_, (row, _))| row),
            ))
        })
    }

    async fn list_pools(&self) -> Result<Vec<PoolRow>> {
        self.with(|s| Ok(s.pools.values().map(|(r, _)| r.clone()).collect()))
    }

    async fn drop_pool(&self, name: &str) -> Result<()> {
        self.with(|s| {
            let (row, members) = s
                .pools
                .remove(name)
                .ok_or_else(|| Error::not_found("pool", name))?;
            let generation = s.generation();
            let t = s.pool_tombstones.entry(name.to_owned()).or_default();
            *t = t.after_pool_drop(&row, members.last().copied(), &generation);
            s.pool_marks.remove(name);
            Ok(())
        })
    }
}

#[async_trait]
impl WorkerStore for MemoryStore {
    async fn acquire_worker(&self, claim: &WorkerClaim) -> Result<WorkerLease> {
        claim.validate()?;
        self.with(|s| {
            let now = crate::clock::now_ms();
            let generation = s.generation();
            let live: Vec<i64> = s
                .workers
                .range((claim.group.clone(), 0)..(claim.group.clone(), claim.max_workers))
                .filter(|(_, w)| super::worker_live(w.expires_ms, now))
                .map(|((_, w), _)| *w)
                .collect();
            let worker = lowest_free(&live, claim.max_workers)
                .ok_or_else(|| all_taken(&claim.group, claim.max_workers))?;
            let slot = s
                .workers
                .entry((claim.group.clone(), worker))
                .or_insert(WorkerSlot {
                    fence: 0,
                    holder: String::new(),
                    until_ms: 0,
                    expires_ms: 0,
                    generation: None,
                });
            let start_ms = super::acquisition_start(
                slot.generation.as_deref(),
                &generation,
                slot.until_ms,
                claim.now_ms,
            );
            slot.generation = Some(generation);
            slot.fence += 1;
            slot.holder.clone_from(&claim.holder);
            let lease = claim.lease(worker, slot.fence, start_ms);
            slot.until_ms = lease.until_ms;
            slot.expires_ms = now + ttl_ms(claim.ttl);
            Ok(lease)
        })
    }

    async fn renew_worker_checked(&self, renewal: &Renewal<'_>) -> Result<Option<i64>> {
        let (group, worker, fence) = (renewal.group, renewal.worker, renewal.fence);
        let (ttl, from_ms, window_ms) = (renewal.ttl, renewal.from_ms, renewal.window_ms);
        self.with(|s| {
            let generation = s.generation();
            match s.workers.get_mut(&(group.to_owned(), worker)) {
                Some(slot)
                    if slot.fence == fence
                        && super::same_worker_generation(
                            slot.generation.as_deref(),
                            &generation,
                        ) =>
                {
                    slot.until_ms = slot.until_ms.max(from_ms + window_ms);
                    slot.expires_ms = crate::clock::now_ms() + ttl_ms(ttl);
                    slot.generation = Some(generation);
                    Ok(Some(slot.until_ms))
                }
                _ => Ok(None),
            }
        })
    }

    async fn release_worker_checked(&self, release: &Release<'_>) -> Result<bool> {
        let (group, worker) = (release.group, release.worker);
        let (fence, floor_ms) = (release.fence, release.floor_ms);
        self.with(|s| {
            let generation = s.generation();
            match s.workers.get_mut(&(group.to_owned(), worker)) {
                Some(slot)
                    if slot.fence == fence
                        && super::same_worker_generation(
                            slot.generation.as_deref(),
                            &generation,
                        ) =>
                {
                    slot.until_ms = slot.until_ms.min(floor_ms);
                    slot.expires_ms = 0;
                    Ok(true)
                }
                _ => Ok(false),
            }
        })
    }

    async fn fence_workers(&self, skip_ms: i64) -> Result<Vec<super::WorkerFloorMove>> {
        self.with(|s| {
            Ok(s.workers
                .iter_mut()
                .map(|((group, worker), slot)| {
                    let before = slot.until_ms;
                    slot.until_ms = before.saturating_add(skip_ms);
                    super::WorkerFloorMove {
                        group: group.clone(),
                        worker: *worker,
                        before,
                        after: slot.until_ms,
                    }
                })
                .collect())
        })
    }

    async fn list_workers(&self, group: &str) -> Result<Vec<super::WorkerEntry>> {
        self.with(|s| {
            let now = crate::clock::now_ms();
            Ok(s.workers
                .range((group.to_owned(), 0)..=(group.to_owned(), i64::MAX))
                .map(|((_, worker), slot)| {
                    super::worker_entry(
                        *worker,
                        slot.fence,
                        slot.until_ms,
                        slot.holder.clone(),
                        slot.expires_ms,
                        now,
                    )
                })
                .collect())
        })
    }
}

impl State {
    /// The name's tombstone over every kind (see `tombstones.rs`).
    fn tombstone(&self, name: &str) -> Tombstone {
        let of = |m: &BTreeMap<String, Tombstone>| m.get(name).copied().unwrap_or_default();
        of(&self.sequence_tombstones).max(of(&self.pool_tombstones))
    }

    /// `spec` raised above its name's tombstone, if it has one.
    fn raised(&self, spec: &SequenceSpec, numbering: Option<&Numbering>) -> Result<SequenceSpec> {
        self.tombstone(&spec.name).raise_sequence(spec, numbering)
    }

    fn forget_numbers(&mut self, name: &str) {
        self.numbering.remove(name);
        self.counters.retain(|(n, _), _| n != name);
        self.open.retain(|(n, _, _), _| n != name);
    }

    /// The later of `period` and the current one, made current, and the
    /// sequence's row.
    fn current(&mut self, name: &str, period: i64) -> Result<(i64, SequenceRow)> {
        let row = self.row(name)?.clone();
        let (_, current) = self
            .numbering
            .get_mut(name)
            .ok_or_else(|| not_numbered(name))?;
        *current = (*current).max(period);
        Ok((*current, row))
    }

    /// [`Self::current`], with the generation rule of numbered sequences
    /// applied first ([`super::numbers::numbers_fence`]).
    fn current_fenced(
        &mut self,
        name: &str,
        period: i64,
        gapless: bool,
        incarnation: u64,
    ) -> Result<(i64, SequenceRow)> {
        let generation = self.generation();
        // Before `current` moves the period: a row of another life is left
        // as it is.
        self.row(name)?.check_life(incarnation, "handle")?;
        let (period, row) = self.current(name, period)?;
        let rule = super::numbers::numbers_fence(&row, gapless, &generation);
        rule.check(name)?;
        if let super::numbers::NumbersFence::Skip(skip) = rule {
            self.skip_numbers(name, period, skip, &row);
        }
        let row = self.row(name)?;
        row.generation = Some(generation);
        Ok((period, row.clone()))
    }

    /// Moves the counter of `period` forward by `skip`; returns it before and after.
    fn skip_numbers(
        &mut self,
        name: &str,
        period: i64,
        skip: i64,
        row: &SequenceRow,
    ) -> (i64, i64) {
        let next = self
            .counters
            .entry((name.to_owned(), period))
            .or_insert(row.start);
        let before = *next;
        *next = super::numbers::skip_counter(before, row.max, skip);
        let after = *next;
        if let Ok(r) = self.row(name) {
            r.failover_skipped = r.failover_skipped.saturating_add(after - before);
        }
        (before, after)
    }
}

#[async_trait]
impl NumberStore for MemoryStore {
    async fn read_numbering(&self, name: &str) -> Result<Option<Numbering>> {
        self.with(|s| Ok(s.numbering.get(name).map(|(n, _)| n.clone())))
    }

    async fn swap_numbering(&self, swap: &super::NumberingSwap<'_>) -> Result<bool> {
        self.with(|s| match s.numbering.get_mut(swap.name) {
            Some((n, _)) if swap.holds(n) => {
                *n = swap.new.clone();
                Ok(true)
            }
            _ => Ok(false),
        })
    }

    async fn create_numbered(
        &self,
        spec: &SequenceSpec,
        numbering: &Numbering,
    ) -> Result<SequenceRow> {
        self.with(|s| {
            if s.sequences.contains_key(&spec.name) {
                return Err(Error::AlreadyExists {
                    kind: "sequence",
                    name: spec.name.clone(),
                });
            }
            let spec = s.raised(spec, Some(numbering))?;
            let row = SequenceRow::created_after(&spec, &s.generation(), &s.tombstone(&spec.name));
            s.forget_numbers(&spec.name);
            s.sequences.insert(spec.name.clone(), row.clone());
            s.numbering
                .insert(spec.name.clone(), (numbering.clone(), 0));
            Ok(row)
        })
    }

    async fn clock_ms(&self) -> Result<i64> {
        self.with(|_| Ok(crate::clock::now_ms()))
    }

    async fn reserve_numbers_in(
        &self,
        name: &str,
        period: i64,
        n: i64,
        incarnation: u64,
    ) -> Result<PeriodRange> {
        super::check_count("count", n)?;
        self.with(|s| {
            let (period, row) = s.current_fenced(name, period, false, incarnation)?;
            let next = s
                .counters
                .entry((name.to_owned(), period))
                .or_insert(row.start);
            let r = SequenceRow { next: *next, ..row }.plan(n)?;
            *next = r.end;
            Ok(PeriodRange {
                period,
                start: r.start,
                end: r.end,
            })
        })
    }

    async fn take_ticket_checked(&self, take: &TicketTake<'_>) -> Result<TakenNumber> {
        let (name, period, token, ttl) = (take.name, take.period, take.token, take.ttl);
        self.with(|s| {
            let (period, row) = s.current_fenced(name, period, true, take.incarnation)?;
            let now = crate::clock::now_ms();
            let expires = now.saturating_add(ticket_ttl_ms(ttl));
            let key = (name.to_owned(), period);
            let free = s
                .open
                .range((key.0.clone(), period, i64::MIN)..=(key.0.clone(), period, i64::MAX))
                .find(|(_, (t, exp))| t.is_none() || *exp <= now)
                .map(|((_, _, v), _)| *v);
            let value = match free {
                Some(v) => v,
                None => {
                    let next = s.counters.entry(key).or_insert(row.start);
                    let r = SequenceRow { next: *next, ..row }.plan(1)?;
                    *next = r.end;
                    r.start
                }
            };
            s.open.insert(
                (name.to_owned(), period, value),
                (Some(token.to_owned()), expires),
            );
            Ok(TakenNumber { period, value })
        })
    }

    async fn settle_ticket(&self, what: Settle, held: &HeldNumber<'_>) -> Result<()> {
        let (name, period, value, token) = (held.name, held.period, held.value, held.token);
        self.with(|s| {
            s.row(name)?;
            let key = (name.to_owned(), period, value);
            match s.open.get_mut(&key) {
                Some((t, exp)) if t.as_deref() == Some(token) => {
                    match what {
                        Settle::Commit => {
                            s.open.remove(&key);
                        }
                        Settle::Release => {
                            *t = None;
                            *exp = 0;
                        }
                    }
                    Ok(())
                }
                other => Err(refused(
                    what,
                    name,
                    period,
                    value,
                    other.map(|(t, _)| t.as_deref()),
                )),
            }
        })
    }

    async fn read_numbers(&self, name: &str) -> Result<Option<NumbersRead>> {
        self.with(|s| {
            let Some((_, period)) = s.numbering.get(name) else {
                return Ok(None);
            };
            let period = *period;
            let counter = s.counters.get(&(name.to_owned(), period)).copied();
            let (mut held, mut released) = (0, 0);
            let range = (name.to_owned(), period, i64::MIN)..=(name.to_owned(), period, i64::MAX);
            for (ticket, _) in s.open.range(range).map(|(_, v)| v) {
                match ticket {
                    Some(_) => held += 1,
                    None => released += 1,
                }
            }
            Ok(Some(NumbersRead {
                period,
                counter,
                held,
                released,
            }))
        })
    }

    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)> {
        self.with(|s| {
            let generation = s.generation();
            let (period, row) = s.current(name, i64::MIN)?;
            let (before, after) = s.skip_numbers(name, period, skip, &row);
            s.row(name)?.generation = Some(generation);
            Ok((period, before, after))
        })
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn ping(&self) -> Result<()> {
        self.with(|_| Ok(()))
    }

    async fn generation(&self) -> Result<String> {
        self.with(|s| Ok(s.generation()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the store protocol model (`crates/keysmith-model`): two
    /// handles reserve, the store fails over to a replica that missed both
    /// reservations, and the first handle closes. Its hand-back is a put on
    /// the version its lost reservation left; the fence of that same call
    /// must make it conflict, even though the fenced row's version (the
    /// replica's plus one) is the lost reservation's.
    #[tokio::test]
    async fn a_hand_back_planned_on_a_lost_write_conflicts_after_a_failover() {
        let store = MemoryStore::new();
        let spec = SequenceSpec {
            block: 2,
            failover_skip: Some(100),
            ..SequenceSpec::new("s")
        };
        store.create_sequence(&spec).await.unwrap();
        let replica = store.snapshot();
        let a = store.reserve_locked_in("s", 2, 1).await.unwrap();
        let b = store.reserve_locked_in("s", 2, 1).await.unwrap();
        assert_eq!(a.end, b.start);
        // Failover: the replica, a new generation; `a` handed out 0 and
        // hands back the rest, `b` handed out 2.
        store.restore(&replica, false);
        match store
            .put_if_version("s", a.start + 1, a.version)
            .await
            .unwrap()
        {
            Put::Conflict(row) => assert_eq!(row.next, a.start + 100, "fenced"),
            Put::Done(row) => panic!("a put planned on a lost write was applied: {row:?}"),
        }
        let c = store.reserve_locked_in("s", 2, 1).await.unwrap();
        assert!(c.start >= b.end, "{c:?} hands out values of {b:?} again");
    }
}

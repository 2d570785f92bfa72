//! The pool half of the store contract: [`PoolStore`], [`PoolSpec`] and
//! [`PoolRow`].
//!
//! A pool holds one member per slot (residue modulo its size); a swap
//! replaces `v` by `v + size` in the same slot, and samples pick slots
//! uniformly, never value ranges.
//!
//! # Pools in a residue class
//!
//! A pool whose values are a residue class ([`Residue`]: every value
//! `≡ offset (mod increment)`) keeps its members in the store as the
//! class's slots, an ordinary counter: stored member `m` is the value
//! `m * increment + offset`. Everything below the library (create, samples,
//! swaps of `m` for `m + size`, fences) works on stored members unchanged;
//! the store keeps the class with the pool, so that every process and
//! server opening the pool reads it. The mapping is written once, here:
//! [`PoolSpec::stored`] turns a spec in values into the one the store
//! receives, [`PoolRow::value`] and [`PoolRow::member`] map members and
//! values both ways, and [`PoolRow::highest_takeable`] bounds members so
//! that every value handed out, and its replacement, fits in an `i64`. A
//! pool without a class is the same with the identity: its members are its
//! values.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::Residue;
use crate::{Error, Result};

/// The largest pool: a million members.
pub const MAX_POOL_SIZE: i64 = 1_000_000;

/// The first member of a pool created without one.
pub const DEFAULT_POOL_START: i64 = 1;

/// What a new pool looks like: `size` members, one per slot, at first the
/// `size` numbers (of its class, if it has one) from `start` on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSpec {
    /// Its name; see [`crate::validate_name`].
    pub name: String,
    /// The first member. As given to [`crate::pool::create`] and checked by
    /// [`Self::validate`]: a value (a pool in a residue class starts at the
    /// first value of its class at or above it). As given to
    /// [`PoolStore::create_pool`]: the first stored member, as
    /// [`Self::stored`] makes it (the same number for a pool without a class).
    pub start: i64,
    /// How many members it holds at all times.
    pub size: i64,
    /// The residue class of the pool's values (`increment` and `offset` in
    /// JSON), or `None`: the pool hands out every number from `start` on.
    /// The store keeps the members of a pool in a class as slots of it (see
    /// [`PoolRow`]).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub residue: Option<Residue>,
    /// Start where asked even below the values a dropped pool of the same
    /// name handed out. By default (`false`) creating a dropped name
    /// continues above the values it handed out: the store raises `start`
    /// to the first member above the name's [`super::Tombstone`]. Set it
    /// only when no value handed out under the name is in use any more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub start_below_dropped: bool,
}

impl PoolSpec {
    /// A pool of `size` members starting at [`DEFAULT_POOL_START`], without a
    /// residue class.
    pub fn new(name: impl Into<String>, size: i64) -> Self {
        PoolSpec {
            name: name.into(),
            start: DEFAULT_POOL_START,
            size,
            residue: None,
            start_below_dropped: false,
        }
    }

    /// This spec (in values, as given to [`crate::pool::create`]) as the
    /// store receives it: `start` becomes the first stored member, for a pool
    /// in a residue class the first slot of the class whose value is `start`
    /// or above; without a class, `start` itself.
    pub fn stored(&self) -> PoolSpec {
        PoolSpec {
            start: first_member(self.residue.as_ref(), self.start),
            ..self.clone()
        }
    }

    /// Checks a spec as given to [`crate::pool::create`] (`start` a value):
    /// the name; `1 <= size <= MAX_POOL_SIZE`; `start >= 0`; the residue
    /// class, if any ([`Residue::validate`]); and that every first member
    /// can be taken once without any value passing `i64::MAX`: the
    /// replacement of the last first member, `start + 2 * size - 1` in
    /// stored members, must still be a value that fits.
    ///
    /// # Errors
    /// [`Error::InvalidName`] or [`Error::InvalidArgument`] saying which.
    pub fn validate(&self) -> Result<()> {
        // The class first: the first member is computed with it.
        self.check_parts()?;
        self.check_room(first_member(self.residue.as_ref(), self.start))
    }

    /// What [`Self::validate`] checks, of a spec as a store receives it
    /// (`start` the first stored member): for backends that check again
    /// (MySQL).
    ///
    /// # Errors
    /// As [`Self::validate`].
    pub fn validate_stored(&self) -> Result<()> {
        self.check_parts()?;
        self.check_room(self.start)
    }

    /// That every first member of a spec as a store receives it (`start`
    /// the first stored member) can be taken once without passing
    /// `i64::MAX`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying the largest start that would do.
    pub fn check_stored_room(&self) -> Result<()> {
        self.check_room(self.start)
    }

    /// The name, the size, `start >= 0` and the class, each alone.
    fn check_parts(&self) -> Result<()> {
        crate::validate_name(&self.name)?;
        check_size(self.size)?;
        if self.start < 0 {
            return Err(Error::invalid(format!(
                "start must be 0 or more, got {}",
                self.start
            )));
        }
        if let Some(r) = &self.residue {
            r.validate()?;
        }
        Ok(())
    }

    /// That every first member can be taken once, `first` the first stored
    /// member, after [`Self::check_parts`].
    fn check_room(&self, first: i64) -> Result<()> {
        let (start, size, residue) = (self.start, self.size, self.residue.as_ref());
        let highest_first = last_start(size, residue);
        if first > highest_first {
            let (step, class) = match residue {
                // size <= MAX_POOL_SIZE, increment <= MAX_INCREMENT: fits.
                Some(r) => (
                    size * r.increment,
                    format!(" of values {} modulo {}", r.offset, r.increment),
                ),
                None => (size, String::new()),
            };
            return Err(Error::invalid(format!(
                "start {start} is too large for a pool of size {size}{class}: each member v is replaced by \
                 v + {step}, which must fit in a 64-bit integer; use a start of at most {}",
                value_of(residue, highest_first)
            )));
        }
        Ok(())
    }
}

/// The first stored member of a pool whose first value is `start` or above.
pub fn first_member(residue: Option<&Residue>, start: i64) -> i64 {
    residue.map_or(start, |r| r.slot_at_or_above(start))
}

/// The value of stored member `member`.
fn value_of(residue: Option<&Residue>, member: i64) -> i64 {
    residue.map_or(member, |r| r.value(member))
}

/// The largest stored member whose value fits in an `i64`.
fn last_member(residue: Option<&Residue>) -> i64 {
    residue.map_or(i64::MAX, |r| r.slot_at_or_below(i64::MAX))
}

/// The largest stored member a take may swap out: its replacement
/// `member + size` must still be a member whose value fits.
pub fn highest_takeable(size: i64, residue: Option<&Residue>) -> i64 {
    last_member(residue).saturating_sub(size)
}

/// The largest first stored member for which every first member can be
/// taken once.
fn last_start(size: i64, residue: Option<&Residue>) -> i64 {
    // size <= MAX_POOL_SIZE, so 2 * size - 1 cannot overflow, and the last
    // member of any class is far above it.
    last_member(residue) - (2 * size - 1)
}

/// The residue class a backend read from its two columns (both NULL: none).
///
/// # Errors
/// [`Error::Corrupt`] for half a class, or one keysmith does not write.
pub fn stored_residue(
    name: &str,
    increment: Option<i64>,
    offset: Option<i64>,
) -> Result<Option<Residue>> {
    match (increment, offset) {
        (None, None) => Ok(None),
        (Some(increment), Some(offset)) => {
            let r = Residue { increment, offset };
            r.validate().map_err(|e| {
                Error::Corrupt(format!(
                    "pool {name:?} is kept with the residue class increment {increment}, offset {offset}, \
                     which keysmith does not write ({e}); drop the pool and create it again"
                ))
            })?;
            Ok(Some(r))
        }
        _ => Err(Error::Corrupt(format!(
            "pool {name:?} is kept with half a residue class (increment {increment:?}, offset {offset:?}); \
             drop the pool and create it again"
        ))),
    }
}

/// Checks a pool size is in `1..=MAX_POOL_SIZE`.
fn check_size(size: i64) -> Result<()> {
    if size < 1 {
        return Err(Error::invalid(format!(
            "pool size must be between 1 and {MAX_POOL_SIZE}, got {size}"
        )));
    }
    if size > MAX_POOL_SIZE {
        return Err(Error::invalid(format!(
            "pool size must be between 1 and {MAX_POOL_SIZE}, got {size}; a pool spreads takers \
             over its members, and a few hundred members already make collisions rare"
        )));
    }
    Ok(())
}

/// The pools under a prefix, counted ([`PoolStore::pool_totals_with_prefix`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolTotals {
    /// How many pools.
    pub pools: u64,
    /// Their members together (the sum of their sizes).
    pub members: u64,
}

impl PoolTotals {
    /// The totals of `rows`.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a PoolRow>) -> PoolTotals {
        rows.into_iter()
            .fold(PoolTotals::default(), |t, r| PoolTotals {
                pools: t.pools + 1,
                members: t.members + u64::try_from(r.size).unwrap_or(0),
            })
    }
}

/// A value pool as the store holds it.
///
/// A pool in a residue class ([`Residue`]) keeps its members as slots of
/// the class, an ordinary counter: stored member `m` is the value
/// `m * increment + offset`, and a swap replaces `m` by `m + size`. The
/// store keeps the class with the pool, so that every process reading the
/// pool hands out values of it; [`PoolRow::value`] and [`PoolRow::member`]
/// map the two ways (the identity without a class).
///
/// From the store (`PoolStore`), `start` is the first stored member; as
/// [`crate::pool::create`], [`crate::pool::list`], [`crate::pool::describe`]
/// and [`crate::pool::ValuePool::row`] give it, the first value. The two
/// differ only for a pool in a residue class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRow {
    /// The pool's name.
    pub name: String,
    /// The first member: a stored member or a value, as said above.
    pub start: i64,
    /// How many members the pool holds at all times.
    pub size: i64,
    /// The store generation the pool was created or last fenced in (see
    /// [`PoolStore::swap_member`]); `None` for a pool from before keysmith
    /// recorded generations: its first swap records one.
    pub generation: Option<String>,
    /// The residue class of the pool's values (`increment` and `offset` in
    /// JSON, absent without one); `None` for a pool without a class, and for
    /// every pool from before keysmith kept classes with pools.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub residue: Option<Residue>,
    /// The life of the name this pool belongs to: above every row version
    /// and incarnation an earlier life of the name reached
    /// ([`super::Tombstone::incarnation`]). 0 for a pool created before
    /// keysmith recorded incarnations.
    pub incarnation: u64,
}

impl PoolRow {
    /// `Ok` when this row is of life `incarnation` of the name (or either is
    /// unknown: 0).
    ///
    /// # Errors
    /// [`Error::Dropped`] (held: "handle") when the pool was dropped and
    /// created again since.
    pub fn check_life(&self, incarnation: u64) -> Result<()> {
        if incarnation == 0 || self.incarnation == 0 || incarnation == self.incarnation {
            return Ok(());
        }
        Err(Error::Dropped {
            kind: "pool",
            name: self.name.clone(),
            held: "handle",
        })
    }

    /// The value of stored member `member` (itself without a class).
    pub fn value(&self, member: i64) -> i64 {
        value_of(self.residue.as_ref(), member)
    }

    /// The stored member of value `v` (itself without a class).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `v` is not a value of the pool's class.
    pub fn member(&self, v: i64) -> Result<i64> {
        match &self.residue {
            None => Ok(v),
            Some(r) => r.slot_of(v).map_err(|_| {
                Error::invalid(format!(
                    "{v} is not a value of pool {:?}: its values are {} modulo {}",
                    self.name, r.offset, r.increment
                ))
            }),
        }
    }

    /// The largest stored member a take may swap out: its replacement
    /// `member + size` is the largest member whose value fits in an `i64`.
    pub fn highest_takeable(&self) -> i64 {
        highest_takeable(self.size, self.residue.as_ref())
    }

    /// The largest value the pool can hand out: that of
    /// [`Self::highest_takeable`] (`i64::MAX - size` without a class).
    pub fn max_value(&self) -> i64 {
        self.value(self.highest_takeable())
    }

    /// A row from the store as callers see it: `start` as a value.
    pub fn in_values(self) -> PoolRow {
        PoolRow {
            start: self.value(self.start),
            ..self
        }
    }
}

/// How many rounds every member of a pool of `size` moves forward when a
/// swap finds the store in a new generation: enough that each slot's member
/// passes [`super::FAILOVER_SKIP_FLOOR`] values, so up to that many takes of
/// one slot lost with the old generation are never handed out again.
pub fn pool_fence_rounds(size: i64) -> i64 {
    let size = size.max(1);
    (super::FAILOVER_SKIP_FLOOR + size - 1) / size
}

/// What a swap does first in store generation `current` for a pool last
/// written in `recorded`: the rule every backend applies, written once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolGeneration {
    /// Written in this generation: swap.
    Current,
    /// From before generations were recorded: record this one, then swap.
    Record,
    /// Written in another generation: fence the pool
    /// ([`PoolStore::fence_pool`] with [`pool_fence_rounds`]) and swap
    /// nothing (the caller samples again, from the moved members).
    Fence,
}

/// Stored member `v` of a pool of `size` (in residue class `residue`, if
/// any) moved forward by `rounds`, if it can still be taken (a member `m`
/// must leave room for `m + size`: `highest_takeable`).
pub fn fenced_member(v: i64, rounds: i64, size: i64, residue: Option<&Residue>) -> Option<i64> {
    let moved = rounds.checked_mul(size).and_then(|d| v.checked_add(d))?;
    (moved <= highest_takeable(size, residue)).then_some(moved)
}

/// The error of a fence that would push a member past the largest value.
pub fn fence_exhausts(name: &str, size: i64, residue: Option<&Residue>) -> Error {
    Error::Exhausted {
        name: name.to_owned(),
        max: value_of(residue, highest_takeable(size, residue)),
    }
}

/// What a backend does with a pool whose recorded generation is
/// `recorded` in a store now at `current`: record it, use it, or fence it.
pub fn pool_generation(recorded: Option<&str>, current: &str) -> PoolGeneration {
    match recorded {
        None => PoolGeneration::Record,
        Some(g) if g == current => PoolGeneration::Current,
        Some(_) => PoolGeneration::Fence,
    }
}

/// What a backend does for value pools. Names given to these methods have
/// been validated by the caller, specs checked with [`PoolSpec::validate`].
/// Every write is durable when the method returns.
#[async_trait]
pub trait PoolStore: Send + Sync + std::fmt::Debug {
    /// Creates a pool holding `spec.start..spec.start + spec.size`: one member per slot,
    /// slot `s` holding `spec.start + s` (stored members: `spec` as
    /// [`PoolSpec::stored`] makes it), and keeps `spec.residue` with it, which
    /// every later [`Self::read_pool`] and [`Self::list_pools`] returns. A member never changes slot: the only
    /// changes are [`PoolStore::swap_member`] of `take` for `take + size`, and back
    /// (of `take + size` for `take`) to return a number never handed out.
    ///
    /// Before anything is written, in the same transaction, `spec.start` is
    /// raised above the name's tombstone ([`super::Tombstone::raise_pool`];
    /// unchanged with `spec.start_below_dropped`): creating a dropped name
    /// continues above the values it handed out. The row returned says the
    /// start used.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`]; [`Error::InvalidArgument`] when the raised
    /// members would pass `i64::MAX`.
    async fn create_pool(&self, spec: &PoolSpec) -> Result<PoolRow>;

    /// The pool's row, or `None`.
    async fn read_pool(&self, name: &str) -> Result<Option<PoolRow>>;

    /// `min(k, size)` distinct members of the pool, chosen uniformly at random:
    /// every member is equally likely, whatever the values (backends sample
    /// slots with `sample_slots`, never value ranges, which would favour
    /// members that follow a gap).
    ///
    /// # Errors
    /// [`Error::NotFound`].
    async fn sample_members(&self, name: &str, k: usize) -> Result<Vec<i64>>;

    /// Atomically replaces member `take` by `put`, only if `take` is a member.
    /// Returns whether it did. Callers pass `put = take + size` (a take) or
    /// `put = take - size` (giving back a number that was never handed out),
    /// so the member keeps its slot; backends may rely on that.
    ///
    /// Generations: a swap in a store generation other than the pool's
    /// (as recorded in the pool's row) first fences the pool
    /// ([`Self::fence_pool`] with [`pool_fence_rounds`]) and swaps nothing:
    /// the member sampled from the old generation may have been handed out
    /// already. The caller samples again.
    ///
    /// # Errors
    /// [`Error::NotFound`] if the pool is gone.
    async fn swap_member(&self, name: &str, take: i64, put: i64) -> Result<bool>;

    /// [`Self::swap_member`] in life `incarnation` of the pool only (0: any;
    /// see [`PoolRow::incarnation`]): a pool of another life is
    /// [`Error::Dropped`] and nothing is swapped. Handles swap through this,
    /// so a handle of a dropped pool never takes from, or gives back into,
    /// a pool created again under its name.
    ///
    /// The default reads the row, then swaps: a drop and create between the
    /// two goes unseen. A backend that can compare the life in its swap
    /// overrides it (the memory store, SQLite, PostgreSQL and MySQL do).
    ///
    /// # Errors
    /// As [`Self::swap_member`], and [`Error::Dropped`].
    async fn swap_member_in(
        &self,
        name: &str,
        incarnation: u64,
        take: i64,
        put: i64,
    ) -> Result<bool> {
        if incarnation != 0
            && let Some(row) = self.read_pool(name).await?
        {
            row.check_life(incarnation)?;
        }
        self.swap_member(name, take, put).await
    }

    /// Moves every member forward by `rounds` times the pool's size (each
    /// keeps its slot) and records the store's current generation: what a
    /// swap in a new generation does first, and what the operator's
    /// `keysmith fence` does to a pool. Safe to race with swaps (a swap of a
    /// member that moved finds it gone) and with another fence (members move
    /// twice: a gap, never a repeat).
    ///
    /// # Errors
    /// [`Error::NotFound`] if the pool is gone; [`Error::Exhausted`] when a
    /// member would no longer fit (changing nothing).
    async fn fence_pool(&self, name: &str, rounds: i64) -> Result<()>;

    /// Every member of the pool, ascending.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    async fn list_members(&self, name: &str) -> Result<Vec<i64>>;

    /// Moves the pool's [`RateMarks`](super::RateMarks) with `taken` (the
    /// numbers taken so far, as `pool::describe` counts them) at `now_ms`.
    ///
    /// # Errors
    /// [`Error::NotFound`] if the pool is gone.
    async fn record_pool_mark(&self, name: &str, now_ms: i64, taken: i64) -> Result<()>;

    /// The pool's rate marks (none before the first record).
    ///
    /// # Errors
    /// [`Error::NotFound`] if there is no such pool.
    async fn read_pool_marks(&self, name: &str) -> Result<super::RateMarks>;

    /// Every pool, ordered by name.
    async fn list_pools(&self) -> Result<Vec<PoolRow>>;

    /// The names of at most `limit` existing pools next to `name` in name
    /// order, as [`super::SequenceStore::sequence_names_near`] is for
    /// sequences: what a "did you mean" hint scores. The default lists
    /// every pool; a backend with an index on names overrides it with two
    /// bounded range reads.
    ///
    /// # Errors
    /// What the store fails with.
    async fn pool_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        let names = self
            .list_pools()
            .await?
            .into_iter()
            .map(|r| r.name)
            .collect();
        Ok(super::sequences::names_near(names, name, limit))
    }

    /// How many pools have a name that starts with `prefix` (every pool for
    /// `""`) and how many members they hold together: what the quotas on
    /// the pools of a principal count.
    ///
    /// The default lists every pool; a backend with an index on names
    /// overrides it with one range read of
    /// `prefix..`[`crate::prefix_end`]`(prefix)`: O(log n + k) for the k
    /// pools it counts, whatever else the store holds.
    ///
    /// # Errors
    /// What the store fails with.
    async fn pool_totals_with_prefix(&self, prefix: &str) -> Result<PoolTotals> {
        let rows = self.list_pools().await?;
        Ok(PoolTotals::of(
            rows.iter().filter(|r| r.name.starts_with(prefix)),
        ))
    }

    /// Removes a pool and its members, and in the same transaction raises
    /// the name's tombstone to the value of its largest member
    /// ([`super::Tombstone::after_pool_drop`]), above every value it handed
    /// out.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    async fn drop_pool(&self, name: &str) -> Result<()>;
}

/// `min(k, size)` distinct pool slots in `0..size`, uniformly at random.
pub fn sample_slots(size: i64, k: usize) -> Vec<i64> {
    let size = usize::try_from(size).unwrap_or(0);
    rand::seq::index::sample(&mut rand::rng(), size, k.min(size))
        .into_iter()
        .map(|s| s as i64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_checked() {
        PoolSpec::new("p", 1).validate().unwrap();
        PoolSpec::new("p", MAX_POOL_SIZE).validate().unwrap();
        for size in [0, -1, MAX_POOL_SIZE + 1, i64::MAX] {
            let e = PoolSpec::new("p", size).validate().unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        let top = PoolSpec {
            start: last_start(10, None),
            ..PoolSpec::new("p", 10)
        };
        top.validate().unwrap();
        for bad in [
            PoolSpec {
                start: top.start + 1,
                ..top.clone()
            },
            PoolSpec {
                start: -1,
                ..top.clone()
            },
            PoolSpec::new("bad name!", 10),
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    fn class(increment: i64, offset: i64) -> Option<Residue> {
        Some(Residue { increment, offset })
    }

    #[test]
    fn a_spec_in_a_class_starts_at_its_first_value_at_or_above_start() {
        let spec = PoolSpec {
            start: 10,
            residue: class(3, 2),
            ..PoolSpec::new("p", 4)
        };
        spec.validate().unwrap();
        // 11 = 3 * 3 + 2 is the first value of the class at or above 10.
        let stored = spec.stored();
        assert_eq!((stored.start, stored.residue), (3, class(3, 2)));
        let row = PoolRow {
            name: "p".into(),
            start: stored.start,
            size: 4,
            generation: None,
            residue: stored.residue,
            incarnation: 0,
        };
        assert_eq!(row.clone().in_values().start, 11);
        for m in 0..20 {
            assert_eq!(row.member(row.value(m)).unwrap(), m);
            assert_eq!(row.value(m).rem_euclid(3), 2);
        }
        let e = row.member(12).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("2 modulo 3"), "{e}");
        // Without a class the spec is stored as given.
        assert_eq!(PoolSpec::new("p", 4).stored(), PoolSpec::new("p", 4));
    }

    #[test]
    fn a_class_is_checked_and_bounds_values_not_members() {
        for (k, r) in [
            (1, 0),
            (0, 0),
            (3, 3),
            (3, -1),
            (crate::store::MAX_INCREMENT + 1, 0),
        ] {
            let bad = PoolSpec {
                residue: class(k, r),
                ..PoolSpec::new("p", 4)
            };
            let e = bad.validate().unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{k} {r}: {e}");
        }
        // The largest start: the last first member's replacement is the
        // class's last value that fits.
        let (k, r, size) = (1000, 7, 10);
        let last_value = i64::MAX - (i64::MAX - r).rem_euclid(k);
        let highest_start = last_value - (2 * size - 1) * k;
        let at = |start| PoolSpec {
            start,
            residue: class(k, r),
            ..PoolSpec::new("p", size)
        };
        at(highest_start).validate().unwrap();
        // Rounded up into the class, a start just above is one member too far.
        let e = at(highest_start + 1).validate().unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("use a start of at most {highest_start}")),
            "{e}"
        );
        // A start that passes without a class may not pass with one.
        let plain = PoolSpec {
            start: i64::MAX - 3 * size,
            ..PoolSpec::new("p", size)
        };
        plain.validate().unwrap();
        assert!(
            PoolSpec {
                residue: class(2, 1),
                ..plain
            }
            .validate()
            .is_err()
        );
        let top = PoolRow {
            name: "p".into(),
            start: at(highest_start).stored().start,
            size,
            generation: None,
            residue: class(k, r),
            incarnation: 0,
        };
        assert_eq!(top.value(top.highest_takeable() + size), last_value);
        assert_eq!(top.max_value(), last_value - size * k);
        assert_eq!(
            fenced_member(top.highest_takeable(), 1, size, top.residue.as_ref()),
            None
        );
        assert_eq!(
            fenced_member(top.highest_takeable() - size, 1, size, top.residue.as_ref()),
            Some(top.highest_takeable())
        );
    }

    #[test]
    fn stored_classes_are_both_columns_or_neither() {
        assert_eq!(stored_residue("p", None, None).unwrap(), None);
        assert_eq!(stored_residue("p", Some(4), Some(1)).unwrap(), class(4, 1));
        for (k, r) in [
            (Some(4), None),
            (None, Some(1)),
            (Some(1), Some(0)),
            (Some(4), Some(4)),
        ] {
            let e = stored_residue("p", k, r).unwrap_err();
            assert!(matches!(e, Error::Corrupt(_)), "{k:?} {r:?}: {e}");
        }
    }
}

//! The pool half of the store contract: [`PoolStore`], [`PoolSpec`] and
//! [`PoolRow`].
//!
//! A pool holds one member per slot (residue modulo its size); a swap
//! replaces `v` by `v + size` in the same slot, and samples pick slots
//! uniformly, never value ranges.

use async_trait::async_trait;
use serde::Serialize;

use crate::{Error, Result};

/// The largest pool: a million members.
pub const MAX_POOL_SIZE: i64 = 1_000_000;

/// The first member of a pool created without one.
pub const DEFAULT_POOL_START: i64 = 1;

/// What a new pool looks like: the `size` numbers `start..start + size`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSpec {
    /// Its name; see [`crate::validate_name`].
    pub name: String,
    /// The first member.
    pub start: i64,
    /// How many members it holds at all times.
    pub size: i64,
}

impl PoolSpec {
    /// A pool of `size` members starting at [`DEFAULT_POOL_START`].
    pub fn new(name: impl Into<String>, size: i64) -> Self {
        PoolSpec {
            name: name.into(),
            start: DEFAULT_POOL_START,
            size,
        }
    }

    /// Checks name and bounds: `1 <= size <= MAX_POOL_SIZE`, `start >= 0`, and
    /// every first member can be taken once without passing `i64::MAX`
    /// (`start + 2 * size - 1 <= i64::MAX`).
    ///
    /// # Errors
    /// [`Error::InvalidName`] or [`Error::InvalidArgument`] saying which.
    pub fn validate(&self) -> Result<()> {
        crate::validate_name(&self.name)?;
        let (start, size) = (self.start, self.size);
        check_size(size)?;
        if start < 0 {
            return Err(Error::invalid(format!(
                "start must be 0 or more, got {start}"
            )));
        }
        let highest_start = last_start(size);
        if start > highest_start {
            return Err(Error::invalid(format!(
                "start {start} is too large for a pool of size {size}: each member v is replaced by \
                 v + {size}, which must fit in a 64-bit integer; use a start of at most {highest_start}"
            )));
        }
        Ok(())
    }
}

/// The largest start for which every first member can be taken once.
fn last_start(size: i64) -> i64 {
    // size <= MAX_POOL_SIZE, so 2 * size - 1 cannot overflow.
    i64::MAX - (2 * size - 1)
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

/// A value pool as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolRow {
    /// The pool's name.
    pub name: String,
    /// The first value of the pool.
    pub start: i64,
    /// How many members the pool holds at all times.
    pub size: i64,
    /// The store generation the pool was created or last fenced in (see
    /// [`PoolStore::swap_member`]); `None` for a pool from before keysmith
    /// recorded generations: its first swap records one.
    pub generation: Option<String>,
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
pub(crate) enum PoolGeneration {
    /// Written in this generation: swap.
    Current,
    /// From before generations were recorded: record this one, then swap.
    Record,
    /// Written in another generation: fence the pool
    /// ([`PoolStore::fence_pool`] with [`pool_fence_rounds`]) and swap
    /// nothing (the caller samples again, from the moved members).
    Fence,
}

/// Member `v` of a pool of `size` moved forward by `rounds`, if it still
/// fits (a member `m` must leave room for `m + size`).
pub(crate) fn fenced_member(v: i64, rounds: i64, size: i64) -> Option<i64> {
    let moved = rounds.checked_mul(size).and_then(|d| v.checked_add(d))?;
    (moved <= i64::MAX - size).then_some(moved)
}

/// The error of a fence that would push a member past the largest value.
pub(crate) fn fence_exhausts(name: &str, size: i64) -> Error {
    Error::Exhausted {
        name: name.to_owned(),
        max: i64::MAX - size,
    }
}

pub(crate) fn pool_generation(recorded: Option<&str>, current: &str) -> PoolGeneration {
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
    /// slot `s` holding `spec.start + s`. A member never changes slot: the only
    /// changes are [`PoolStore::swap_member`] of `take` for `take + size`, and back
    /// (of `take + size` for `take`) to return a number never handed out.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`].
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

    /// Removes a pool and its members.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    async fn drop_pool(&self, name: &str) -> Result<()>;
}

/// `min(k, size)` distinct pool slots in `0..size`, uniformly at random.
pub(crate) fn sample_slots(size: i64, k: usize) -> Vec<i64> {
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
            start: last_start(10),
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
}

//! Creating, describing, listing and dropping pools: what the CLI and the
//! server call, with the argument checks and the "did you mean" in one place.
//!
//! Everything here takes and gives values: a pool in a residue class has
//! its spec turned into stored members on the way in ([`PoolSpec::stored`])
//! and its rows and members turned into values on the way out.

use serde::{Deserialize, Serialize};

use crate::store::{PoolRow, PoolSpec, PoolStore, RateMarks};
use crate::{Error, HINT_CANDIDATES, Result, closest_names, validate_name};

/// Creates a pool holding the `spec.size` numbers `spec.start..spec.start + spec.size`,
/// or, with a residue class (`spec.residue`), the `spec.size` values of the
/// class from the first at or above `spec.start` on. The class is kept with
/// the pool: every handle, process and server opening it hands out only
/// values of it.
///
/// Each take removes one member `v` and puts `v + size` (the value `size`
/// places further in the class) in its place, so the pool always holds
/// `size` numbers, one per slot, and every number from `start` on is handed
/// out at most once. Returns the row in values: `start` the pool's first
/// value, and its class.
///
/// Creating a dropped name continues above the values it handed out: the
/// store raises `start` to the first member above every value a dropped
/// pool of the name handed out (its tombstone), unless
/// `spec.start_below_dropped` is set; [`CreatedPool::continued_above_dropped`]
/// says when it did.
///
/// # Errors
/// What [`PoolSpec::validate`] finds ([`Error::InvalidName`],
/// [`Error::InvalidArgument`], also for a bad class or a start and size
/// whose values would pass `i64::MAX`, before or after the raise);
/// [`Error::AlreadyExists`]; what the store fails with. Nothing is written
/// on error.
pub async fn create(store: &dyn PoolStore, spec: &PoolSpec) -> Result<CreatedPool> {
    spec.validate()?;
    let stored = spec.stored();
    let row = store.create_pool(&stored).await?;
    let raised = row.start > stored.start;
    let row = row.in_values();
    Ok(CreatedPool {
        continued_above_dropped: raised.then_some(row.start),
        row,
    })
}

/// What [`create`] returns: the pool's row in values, and whether its start
/// was raised above a dropped pool's values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreatedPool {
    /// The row: name, start (its first value), size, generation, class.
    #[serde(flatten)]
    pub row: PoolRow,
    /// `Some(start)` when a pool of the same name had been dropped and the
    /// store raised the requested start above the values it handed out: the
    /// first value the pool starts at. `None` when it starts where asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continued_above_dropped: Option<i64>,
}

/// The state of a pool as [`describe`] sees it, in values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolInfo {
    /// The row: name, start (its first value), size, generation, and the
    /// residue class (`increment` and `offset` in JSON) of a pool in one.
    #[serde(flatten)]
    pub row: PoolRow,
    /// The smallest member: every number (of its class) below it has been
    /// handed out (or lost by a taker that died right after taking it).
    pub lowest: i64,
    /// The largest member.
    pub highest: i64,
    /// How many numbers have been taken from the pool since it was created.
    pub taken: i64,
    /// The largest number this pool can ever hand out: `i64::MAX - size`
    /// (of a pool in a residue class: [`PoolRow::max_value`]).
    pub max_value: i64,
    /// Numbers taken per second since the pool's older rate mark (moved by
    /// `describe` once a minute); `None` before there is a second of history.
    pub rate_per_second: Option<f64>,
    /// Seconds until every number up to `max_value` is taken at that rate;
    /// `None` without a rate, or at a rate of zero.
    pub runway_seconds: Option<f64>,
}

impl PoolInfo {
    /// Numbers left to take: those from `start` to `max_value`, less those
    /// taken.
    pub fn remaining(&self) -> i64 {
        capacity(&self.row).saturating_sub(self.taken)
    }
}

/// How many numbers a pool can hand out in all, from its row in values.
fn capacity(row: &PoolRow) -> i64 {
    let first = crate::store::first_member(row.residue.as_ref(), row.start);
    row.highest_takeable()
        .saturating_sub(first)
        .saturating_add(1)
}

/// The runway of a pool from its rate marks alone (no members read): the
/// rate between its two marks, and the numbers left at the newer one. For
/// pages that show many pools. `row` in values, as [`list`] and
/// [`ValuePool::row`](super::ValuePool::row) give it.
pub fn runway_from_marks(row: &PoolRow, marks: &RateMarks) -> Option<f64> {
    let rate = marks.rate_between().filter(|r| *r > 0.0)?;
    let left = capacity(row).saturating_sub(marks.mark?.reserved).max(0);
    Some(left as f64 / rate)
}

/// The runway of a pool whose row the caller holds (its handle's, in
/// values), from one read of its rate marks: see [`runway_from_marks`].
///
/// # Errors
/// What the store fails with.
pub async fn runway(store: &dyn PoolStore, row: &PoolRow) -> Result<Option<f64>> {
    let marks = store.read_pool_marks(&row.name).await?;
    Ok(runway_from_marks(row, &marks))
}

/// The current state of a pool, after checking that its members are what
/// takes alone can leave: `size` numbers, at least `start`, one per slot
/// (one of each residue modulo `size`, counted in places of its class for a
/// pool in a residue class). In values.
///
/// Reads every member: cost grows with the pool's size.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names;
/// [`Error::Corrupt`] when the members break the pool's invariant; what the
/// store fails with.
pub async fn describe(store: &dyn PoolStore, name: &str) -> Result<PoolInfo> {
    match describe_if_exists(store, name).await? {
        Some(info) => Ok(info),
        None => Err(not_found(store, name).await),
    }
}

/// [`describe`], but a missing pool is `None`, found without looking for
/// similar names: what a caller that only records the state (an audit
/// trail) asks.
///
/// # Errors
/// As [`describe`], but never [`Error::NotFound`].
pub async fn describe_if_exists(store: &dyn PoolStore, name: &str) -> Result<Option<PoolInfo>> {
    validate_name(name)?;
    let Some(row) = store.read_pool(name).await? else {
        return Ok(None);
    };
    let members = store.list_members(name).await?;
    let mut info = info(row, &members)?;
    // The rate since the older mark, then the marks move: best effort, a
    // describe that cannot write still describes.
    let now = crate::clock::now_ms();
    match store.read_pool_marks(name).await {
        Ok(marks) => {
            info.rate_per_second = marks.rate(now, info.taken);
            info.runway_seconds = info
                .rate_per_second
                .filter(|r| *r > 0.0)
                .map(|r| info.remaining().max(0) as f64 / r);
        }
        Err(e) => tracing::debug!(pool = %name, "rate marks not read: {e}"),
    }
    if let Err(e) = store.record_pool_mark(name, now, info.taken).await {
        tracing::debug!(pool = %name, "rate mark not recorded: {e}");
    }
    Ok(Some(info))
}

/// Checks the stored members against the stored row and sums up the pool,
/// in values.
fn info(row: PoolRow, members: &[i64]) -> Result<PoolInfo> {
    let corrupt = |what: String| Error::Corrupt(format!("pool {:?}: {what}", row.name));
    if members.len() as i64 != row.size {
        return Err(corrupt(format!(
            "holds {} members, but its size is {}",
            members.len(),
            row.size
        )));
    }
    let mut seen = vec![false; row.size as usize];
    let mut steps: i128 = 0;
    for &m in members {
        if m < row.start {
            return Err(corrupt(format!(
                "member {} is below the pool's start {}",
                row.value(m),
                row.value(row.start)
            )));
        }
        let offset = i128::from(m) - i128::from(row.start);
        let residue = (offset % i128::from(row.size)) as usize;
        if std::mem::replace(&mut seen[residue], true) {
            return Err(corrupt(format!(
                "two members share slot {residue} of {}",
                row.size
            )));
        }
        steps += offset / i128::from(row.size);
    }
    let (lowest, highest) = match (members.iter().min(), members.iter().max()) {
        (Some(&lo), Some(&hi)) => (lo, hi),
        _ => return Err(corrupt("has no members".into())),
    };
    Ok(PoolInfo {
        lowest: row.value(lowest),
        highest: row.value(highest),
        // Each member is at most (i64::MAX - start) / size steps from its
        // first value, so the sum of `size` of them fits in an i64.
        taken: i64::try_from(steps).unwrap_or(i64::MAX),
        max_value: row.max_value(),
        rate_per_second: None,
        runway_seconds: None,
        row: row.in_values(),
    })
}

/// Every member of a pool, ascending, as values: the numbers it can hand
/// out next. Reads the pool's row, then its members.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names; what
/// the store fails with.
pub async fn members(store: &dyn PoolStore, name: &str) -> Result<Vec<i64>> {
    validate_name(name)?;
    let row = read(store, name).await?;
    match store.list_members(name).await {
        Err(Error::NotFound { .. }) => Err(not_found(store, name).await),
        // Members of a class map to values in the same order.
        other => Ok(other?.into_iter().map(|m| row.value(m)).collect()),
    }
}

/// Every pool, by name, in values (`start` its first value, and its
/// residue class, if any).
///
/// # Errors
/// What the store fails with.
pub async fn list(store: &dyn PoolStore) -> Result<Vec<PoolRow>> {
    Ok(store
        .list_pools()
        .await?
        .into_iter()
        .map(PoolRow::in_values)
        .collect())
}

/// Drops a pool and its members. The store keeps a tombstone of the name
/// (in the same transaction), so creating a dropped name continues above
/// the values it handed out: a pool created later under the same name
/// starts above every value this one handed out, unless it is created with
/// `start_below_dropped`.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names; what
/// the store fails with.
pub async fn remove(store: &dyn PoolStore, name: &str) -> Result<()> {
    validate_name(name)?;
    match store.drop_pool(name).await {
        Err(Error::NotFound { .. }) => Err(not_found(store, name).await),
        other => other,
    }
}

/// The pool's row as the store holds it (members), or [`Error::NotFound`]
/// with similar names.
pub(super) async fn read(store: &dyn PoolStore, name: &str) -> Result<PoolRow> {
    match store.read_pool(name).await? {
        Some(row) => Ok(row),
        None => Err(not_found(store, name).await),
    }
}

/// The `NotFound` of a missing pool, with the similar names among the
/// [`HINT_CANDIDATES`] next to it in name order.
pub(super) async fn not_found(store: &dyn PoolStore, name: &str) -> Error {
    let similar = match store.pool_names_near(name, HINT_CANDIDATES).await {
        Ok(names) => closest_names(name, names.iter().map(String::as_str)),
        Err(_) => Vec::new(),
    };
    Error::NotFound {
        kind: "pool",
        name: name.to_owned(),
        similar,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(start: i64, size: i64) -> PoolRow {
        PoolRow {
            name: "p".into(),
            start,
            size,
            generation: None,
            residue: None,
            incarnation: 0,
        }
    }

    #[test]
    fn info_of_a_class_is_in_values() {
        // Values 1 mod 4, size 3, stored from member 2 (value 9): member 2
        // taken twice (-> 8), 3 never, 4 once (-> 7).
        let class = PoolRow {
            residue: Some(crate::store::Residue {
                increment: 4,
                offset: 1,
            }),
            ..row(2, 3)
        };
        let i = info(class.clone(), &[3, 7, 8]).unwrap();
        assert_eq!((i.lowest, i.highest, i.taken), (13, 33, 3));
        assert_eq!(i.row.start, 9);
        assert_eq!(i.max_value, class.value(class.highest_takeable()));
        assert_eq!(i.max_value.rem_euclid(4), 1);
        // Every member from the first to the highest takeable, less those
        // taken.
        assert_eq!(i.remaining(), class.highest_takeable() - 2 + 1 - 3);
        let e = info(class, &[1, 3, 4]).unwrap_err();
        assert!(
            e.to_string()
                .contains("member 5 is below the pool's start 9"),
            "{e}"
        );
    }

    #[test]
    fn info_counts_takes_per_residue() {
        // size 3 from 10: 10 taken twice (-> 16), 11 never, 12 once (-> 15).
        let i = info(row(10, 3), &[11, 15, 16]).unwrap();
        assert_eq!((i.lowest, i.highest, i.taken), (11, 16, 3));
        assert_eq!(i.max_value, i64::MAX - 3);
    }

    #[test]
    fn info_rejects_what_takes_cannot_leave() {
        for bad in [
            vec![10, 11],         // too few
            vec![10, 11, 13],     // 10 and 13 share a residue
            vec![9, 11, 12],      // below start
            vec![10, 11, 12, 13], // too many
        ] {
            let e = info(row(10, 3), &bad).unwrap_err();
            assert!(matches!(e, Error::Corrupt(_)), "{bad:?}: {e}");
        }
    }

    #[test]
    fn info_survives_members_near_i64_max() {
        let size = 2;
        let start = i64::MAX - (2 * size - 1);
        let i = info(row(start, size), &[i64::MAX - 1, i64::MAX]).unwrap();
        assert_eq!(i.taken, 2);
    }
}

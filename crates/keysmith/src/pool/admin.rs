//! Creating, describing, listing and dropping pools: what the CLI and the
//! server call, with the argument checks and the "did you mean" in one place.

use serde::Serialize;

use crate::store::{PoolRow, PoolSpec, PoolStore, RateMarks};
use crate::{Error, Result, closest_names, validate_name};

/// Creates a pool holding the `spec.size` numbers `spec.start..spec.start + spec.size`.
///
/// Each take removes one member `v` and puts `v + size` in its place, so the
/// pool always holds `size` numbers, one of each residue modulo `size`, and
/// every number from `start` on is handed out at most once.
///
/// # Errors
/// What [`PoolSpec::validate`] finds ([`Error::InvalidName`],
/// [`Error::InvalidArgument`]); [`Error::AlreadyExists`]; what the store fails
/// with. Nothing is written on error.
pub async fn create(store: &dyn PoolStore, spec: &PoolSpec) -> Result<PoolRow> {
    spec.validate()?;
    store.create_pool(spec).await
}

/// The state of a pool as [`describe`] sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolInfo {
    /// The stored row: name, start, size.
    #[serde(flatten)]
    pub row: PoolRow,
    /// The smallest member: every number below it has been handed out (or
    /// lost by a taker that died right after taking it).
    pub lowest: i64,
    /// The largest member.
    pub highest: i64,
    /// How many numbers have been taken from the pool since it was created.
    pub taken: i64,
    /// The largest number this pool can ever hand out: `i64::MAX - size`.
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

/// How many numbers a pool can hand out in all.
fn capacity(row: &PoolRow) -> i64 {
    (i64::MAX - row.size)
        .saturating_sub(row.start)
        .saturating_add(1)
}

/// The runway of a pool from its rate marks alone (no members read): the
/// rate between its two marks, and the numbers left at the newer one. For
/// pages that show many pools.
pub fn runway_from_marks(row: &PoolRow, marks: &RateMarks) -> Option<f64> {
    let rate = marks.rate_between().filter(|r| *r > 0.0)?;
    let left = capacity(row).saturating_sub(marks.mark?.reserved).max(0);
    Some(left as f64 / rate)
}

/// The runway of a pool whose row the caller holds (its handle's), from
/// one read of its rate marks: see [`runway_from_marks`].
///
/// # Errors
/// What the store fails with.
pub async fn runway(store: &dyn PoolStore, row: &PoolRow) -> Result<Option<f64>> {
    let marks = store.read_pool_marks(&row.name).await?;
    Ok(runway_from_marks(row, &marks))
}

/// The current state of a pool, after checking that its members are what
/// takes alone can leave: `size` numbers, at least `start`, one of each
/// residue modulo `size`.
///
/// Reads every member: cost grows with the pool's size.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names;
/// [`Error::Corrupt`] when the members break the pool's invariant; what the
/// store fails with.
pub async fn describe(store: &dyn PoolStore, name: &str) -> Result<PoolInfo> {
    validate_name(name)?;
    let row = read(store, name).await?;
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
    Ok(info)
}

/// Checks the members against the row and sums up the pool.
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
                "member {m} is below the pool's start {}",
                row.start
            )));
        }
        let offset = i128::from(m) - i128::from(row.start);
        let residue = (offset % i128::from(row.size)) as usize;
        if std::mem::replace(&mut seen[residue], true) {
            return Err(corrupt(format!(
                "two members share the residue {residue} modulo {}",
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
        lowest,
        highest,
        // Each member is at most (i64::MAX - start) / size steps from its
        // first value, so the sum of `size` of them fits in an i64.
        taken: i64::try_from(steps).unwrap_or(i64::MAX),
        max_value: i64::MAX - row.size,
        rate_per_second: None,
        runway_seconds: None,
        row,
    })
}

/// Every member of a pool, ascending.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names; what
/// the store fails with.
pub async fn members(store: &dyn PoolStore, name: &str) -> Result<Vec<i64>> {
    validate_name(name)?;
    match store.list_members(name).await {
        Err(Error::NotFound { .. }) => Err(not_found(store, name).await),
        other => other,
    }
}

/// Every pool, by name.
///
/// # Errors
/// What the store fails with.
pub async fn list(store: &dyn PoolStore) -> Result<Vec<PoolRow>> {
    store.list_pools().await
}

/// Drops a pool and its members. A pool created later under the same name
/// starts again from its own start: its numbers may repeat ones handed out
/// by the dropped pool.
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

/// The pool's row, or [`Error::NotFound`] with similar names.
pub(super) async fn read(store: &dyn PoolStore, name: &str) -> Result<PoolRow> {
    match store.read_pool(name).await? {
        Some(row) => Ok(row),
        None => Err(not_found(store, name).await),
    }
}

pub(super) async fn not_found(store: &dyn PoolStore, name: &str) -> Error {
    let similar = match store.list_pools().await {
        Ok(rows) => closest_names(name, rows.iter().map(|r| r.name.as_str())),
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
        }
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

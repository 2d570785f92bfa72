//! The worker-id half of the store contract: [`WorkerStore`], the leases of
//! worker ids that time-ordered ids ([`crate::ids`]) are made with.
//!
//! A *group* (a name) has worker ids `0..max_workers`. A holder leases one
//! for a time to live decided by the store (its own clock: the system clock
//! for SQLite and memory, `clock_timestamp()` for PostgreSQL, an etcd lease
//! for etcd), renews the lease while it runs and releases it on close. Each
//! `(group, worker)` keeps, across holders and expiries:
//!
//! - a **fence**, bumped by every acquisition: a renewal or release quoting
//!   an older fence does nothing, so a holder whose lease lapsed and was
//!   taken over can never extend it again;
//! - a **time floor** `until_ms` (milliseconds since the Unix epoch): every
//!   id issued under the worker id lies below it. An acquisition starts its
//!   holder at `max(until_ms, now_ms)` and moves `until_ms` a window ahead of
//!   that, so a new holder starts above everything issued before under that
//!   worker id, however far its clock is behind the previous holder's.
//!
//! The floor is what makes ids unique; the fence and the holder's local
//! deadline (earlier than the store's expiry) keep a lapsed holder from
//! reserving more time.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use crate::{Error, Result};

/// How far a worker id's time floor moves forward, in milliseconds, when an
/// acquisition finds its row written in another store generation (a
/// failover to a lagging replica, a restore): a holder that kept renewing
/// on the lost store moved the floor past the replica's by at most the
/// replication lag and one window, so a standby up to a minute behind is
/// covered. The next holder starts that much later (a generator waits, or
/// borrows up to its `max_borrow`, before its first id); a renewal or
/// release in a new generation is refused (the lease is lost).
pub const WORKER_FAILOVER_SKIP_MS: i64 = 60_000;

/// The floor an acquisition starts from for a worker row last written in
/// store generation `recorded` (with floor `floor`), when the store is in
/// `current` and the holder's clock reads `now_ms`: the rule every backend
/// applies (PostgreSQL's in its statement), written once.
pub fn acquisition_start(recorded: Option<&str>, current: &str, floor: i64, now_ms: i64) -> i64 {
    let start = floor.max(now_ms);
    match recorded {
        Some(g) if g != current => start.saturating_add(WORKER_FAILOVER_SKIP_MS),
        _ => start,
    }
}

/// Whether a renewal or release may touch a worker row last written in
/// `recorded` while the store is in `current`.
pub fn same_worker_generation(recorded: Option<&str>, current: &str) -> bool {
    recorded.is_none_or(|g| g == current)
}

/// The prefix of the worker groups that hold the leader leases of
/// leader-ordered sequences (`leader/NAME`, see
/// `crate::sequence::leader`): reserved. Worker leases for other
/// generators and keysmith's own id generators refuse such a group
/// ([`check_user_group`]), so no caller with a grant on worker groups can
/// take a sequence's leader lease.
pub const LEADER_GROUP_PREFIX: &str = "leader/";

/// Refuses a group reserved for leader leases ([`LEADER_GROUP_PREFIX`]).
///
/// # Errors
/// [`Error::InvalidName`] naming the group and the reserved prefix.
pub fn check_user_group(group: &str) -> Result<()> {
    if group.starts_with(LEADER_GROUP_PREFIX) {
        return Err(Error::InvalidName {
            name: crate::name::shorten(group),
            reason: format!(
                "groups starting with {LEADER_GROUP_PREFIX:?} hold the leader leases of leader-ordered sequences; choose another group"
            ),
        });
    }
    Ok(())
}

/// The most worker ids a group may have (2^22).
pub const MAX_WORKERS: i64 = 1 << 22;

/// What an acquisition asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerClaim {
    /// The group (a name; see [`crate::validate_name`]).
    pub group: String,
    /// Worker ids are `0..max_workers`, `1..=MAX_WORKERS`.
    pub max_workers: i64,
    /// Who holds it, for people reading the store (host and process id).
    pub holder: String,
    /// How long the lease lives without a renewal, by the store's clock.
    pub ttl: Duration,
    /// The holder's wall clock, milliseconds since the Unix epoch.
    pub now_ms: i64,
    /// How far ahead of the start the floor is moved.
    pub window_ms: i64,
}

/// The longest a worker lease may live between renewals: a day.
pub const MAX_WORKER_TTL: Duration = Duration::from_secs(86_400);

impl WorkerClaim {
    /// Checks the group name and the bounds: `1 <= max_workers <=
    /// MAX_WORKERS`, a TTL of at least a millisecond and at most a day,
    /// `now_ms >= 0`, `1 <= window_ms <= 10^9`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] or [`Error::InvalidArgument`] saying which.
    pub fn validate(&self) -> Result<()> {
        crate::validate_name(&self.group)?;
        if !(1..=MAX_WORKERS).contains(&self.max_workers) {
            return Err(Error::invalid(format!(
                "the number of worker ids must be between 1 and {MAX_WORKERS}, got {}",
                self.max_workers
            )));
        }
        check_times(self.ttl, self.now_ms, self.window_ms)
    }

    /// The lease this claim got of `worker` under `fence`, its holder
    /// starting at `start_ms` (from [`acquisition_start`]): its floor is
    /// `start_ms + window_ms`, the rule every backend writes to the row.
    pub fn lease(&self, worker: i64, fence: i64, start_ms: i64) -> WorkerLease {
        WorkerLease {
            group: self.group.clone(),
            worker,
            fence,
            start_ms,
            until_ms: start_ms + self.window_ms,
        }
    }
}

/// That a worker lease's `ttl` is between 1 ms and [`MAX_WORKER_TTL`] and
/// that `now_ms` and `window_ms` are sane.
///
/// # Errors
/// [`Error::InvalidArgument`] saying which.
pub fn check_times(ttl: Duration, now_ms: i64, window_ms: i64) -> Result<()> {
    if ttl < Duration::from_millis(1) || ttl > MAX_WORKER_TTL {
        return Err(Error::invalid(format!(
            "a worker lease's time to live must be between 1 ms and a day, got {ttl:?}"
        )));
    }
    if now_ms < 0 {
        return Err(Error::invalid(format!(
            "the clock reads {now_ms} ms, before 1970; set the system clock"
        )));
    }
    if !(1..=1_000_000_000).contains(&window_ms) {
        return Err(Error::invalid(format!(
            "the reserved time window must be between 1 ms and 10^9 ms, got {window_ms}"
        )));
    }
    Ok(())
}

/// The arguments of [`WorkerStore::renew_worker`], handed to a backend's
/// [`WorkerStore::renew_worker_checked`] once [`check_times`] accepted them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewal<'a> {
    /// The group.
    pub group: &'a str,
    /// The worker id.
    pub worker: i64,
    /// The fence the holder acquired: a renewal quoting another one is lost.
    pub fence: i64,
    /// The lease lives this long from now, by the store's clock.
    pub ttl: Duration,
    /// The holder's clock, ms since the Unix epoch: the floor becomes at
    /// least `from_ms + window_ms`.
    pub from_ms: i64,
    /// How far ahead of `from_ms` the floor moves, in ms.
    pub window_ms: i64,
}

/// The arguments of [`WorkerStore::release_worker`], handed to a backend's
/// [`WorkerStore::release_worker_checked`] once [`check_release_floor`]
/// accepted them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release<'a> {
    /// The group.
    pub group: &'a str,
    /// The worker id.
    pub worker: i64,
    /// The fence the holder acquired: a release quoting another one does
    /// nothing.
    pub fence: i64,
    /// The floor becomes at most this (ms since the Unix epoch, `>= 0`).
    pub floor_ms: i64,
}

/// That a release's `floor_ms` is a time at or after 1970 (`i64::MAX`
/// leaves the floor as it is).
///
/// # Errors
/// [`Error::InvalidArgument`] naming `floor_ms`.
pub fn check_release_floor(floor_ms: i64) -> Result<()> {
    if floor_ms < 0 {
        return Err(Error::invalid(format!(
            "a released worker id's floor_ms must be 0 or more (ms since the Unix epoch), got {floor_ms}"
        )));
    }
    Ok(())
}

/// A worker id held: what [`WorkerStore::acquire_worker`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerLease {
    /// The group.
    pub group: String,
    /// The worker id, `0..max_workers`: the lowest one without a live lease.
    pub worker: i64,
    /// Bumped by every acquisition of this worker id; quote it to renew and
    /// release.
    pub fence: i64,
    /// The holder issues ids at or above this time (ms since the Unix
    /// epoch): the previous holders' floor, or the holder's clock if later.
    pub start_ms: i64,
    /// The floor: the holder issues ids below this time. `start_ms +
    /// window_ms`.
    pub until_ms: i64,
}

/// What a backend does for worker-id leases. Claims have been checked with
/// [`WorkerClaim::validate`]. Every write is durable when the method
/// returns, and every method is safe to race with any other, in any
/// process.
#[async_trait]
pub trait WorkerStore: Send + Sync + std::fmt::Debug {
    /// Leases the lowest worker id in `0..max_workers` of the group that
    /// has no live lease (never one that has: two holders never share a
    /// worker id), bumps its fence (1 for a worker id never held), and moves
    /// its floor to `max(floor, now_ms) + window_ms`. The lease lives `ttl`
    /// by the store's clock.
    ///
    /// # Errors
    /// [`Error::IdsUnavailable`] when every worker id has a live lease.
    async fn acquire_worker(&self, claim: &WorkerClaim) -> Result<WorkerLease>;

    /// Extends the lease of a holder that still has `fence`: it lives `ttl`
    /// from now (by the store's clock), and its floor becomes
    /// `max(floor, from_ms + window_ms)`. A lease that expired but that no
    /// one acquired since is renewed too: the fence alone decides. Returns
    /// the new floor, or `None` when another holder acquired the worker id
    /// since (the lease is lost: stop issuing ids under it).
    ///
    /// Checks the times with [`check_times`] (so a backend never sees bad
    /// ones), then calls [`Self::renew_worker_checked`]: backends implement
    /// that, not this.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `ttl`, `from_ms` or `window_ms` that
    /// [`check_times`] refuses (nothing is written); [`Error::Unavailable`]
    /// when the store does not answer.
    async fn renew_worker(
        &self,
        group: &str,
        worker: i64,
        fence: i64,
        ttl: Duration,
        from_ms: i64,
        window_ms: i64,
    ) -> Result<Option<i64>> {
        check_times(ttl, from_ms, window_ms)?;
        let renewal = Renewal {
            group,
            worker,
            fence,
            ttl,
            from_ms,
            window_ms,
        };
        self.renew_worker_checked(&renewal).await
    }

    /// What a backend implements for [`Self::renew_worker`], with the same
    /// guarantees; its times have passed [`check_times`].
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn renew_worker_checked(&self, renewal: &Renewal<'_>) -> Result<Option<i64>>;

    /// Ends the lease of a holder that still has `fence`, so the worker id
    /// can be acquired at once, and lowers its floor to `floor_ms` if that
    /// is lower (the holder passes the end of the last time it issued ids
    /// in, so that the next holder need not start a window ahead). Returns
    /// whether it did (`false`: the lease was lost already).
    ///
    /// Checks `floor_ms` with [`check_release_floor`] (so a backend never
    /// sees a floor before 1970), then calls [`Self::release_worker_checked`]:
    /// backends implement that, not this.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative `floor_ms` (nothing is
    /// written); [`Error::Unavailable`] when the store does not answer.
    async fn release_worker(
        &self,
        group: &str,
        worker: i64,
        fence: i64,
        floor_ms: i64,
    ) -> Result<bool> {
        check_release_floor(floor_ms)?;
        let release = Release {
            group,
            worker,
            fence,
            floor_ms,
        };
        self.release_worker_checked(&release).await
    }

    /// What a backend implements for [`Self::release_worker`], with the
    /// same guarantees; its floor has passed [`check_release_floor`].
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn release_worker_checked(&self, release: &Release<'_>) -> Result<bool>;

    /// The operator's fence of worker ids: moves the time floor of every
    /// worker id of every group forward by `skip_ms`, so that a holder
    /// starts past every id issued before a restore the store cannot see.
    /// Leases stay as they are. Returns each worker id moved: its group, id,
    /// and floor before and after, ordered by group and id.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn fence_workers(&self, skip_ms: i64) -> Result<Vec<WorkerFloorMove>>;

    /// Every worker id of `group` the store has a row for (every one ever
    /// acquired), ordered by worker id: its fence, its time floor, and,
    /// while a live lease holds it, its holder and how long the lease has
    /// left. A worker id is live exactly when an acquisition at the same
    /// moment would pass it over (the same rule, by the store's clock). A
    /// group no one ever acquired a worker id of is an empty list: groups
    /// are not created, they exist by their worker ids. Reads only; one
    /// consistent read of the group (etcd: plus one call per live lease for
    /// its time left).
    ///
    /// The group name has been checked ([`crate::validate_name`]).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer;
    /// [`Error::Corrupt`] when a row is not a worker lease keysmith wrote.
    async fn list_workers(&self, group: &str) -> Result<Vec<WorkerEntry>>;
}

/// One worker id of a group as the store holds it: what
/// [`WorkerStore::list_workers`] returns. No lease token is kept in the
/// store, so none is here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerEntry {
    /// The worker id.
    pub worker: i64,
    /// The fence of its last acquisition (bumped by every acquisition).
    pub fence: i64,
    /// Its time floor (ms since the Unix epoch): every id issued under the
    /// worker id lies below it, and the next holder starts at or above it.
    /// It outlives holders: a worker id no one holds still has one.
    pub until_ms: i64,
    /// While a live lease holds the worker id (live as an acquisition
    /// decides it, by the store's clock): how long the lease has left, in
    /// ms by the store's clock, at least 0 (etcd: whole seconds, rounded
    /// down). `None`: no live lease (expired or released); an acquisition
    /// may take the worker id.
    pub expires_in_ms: Option<i64>,
    /// Who holds it ([`WorkerClaim::holder`]) while a live lease does;
    /// `None` when none does, or when the store did not record it (etcd
    /// leases made before holders were recorded).
    pub holder: Option<String>,
}

/// The entry of a worker row whose lease expires at `expires_ms` when the
/// store's clock reads `now_ms` (both ms, by that clock): held while
/// [`worker_live`]. For the backends that keep the expiry as a number and
/// read the clock beside it (memory, SQLite, MySQL); PostgreSQL says the
/// same in its statement, etcd's leases expire by themselves.
pub fn worker_entry(
    worker: i64,
    fence: i64,
    until_ms: i64,
    holder: String,
    expires_ms: i64,
    now_ms: i64,
) -> WorkerEntry {
    let live = worker_live(expires_ms, now_ms);
    WorkerEntry {
        worker,
        fence,
        until_ms,
        expires_in_ms: live.then(|| expires_ms.saturating_sub(now_ms)),
        holder: live.then_some(holder),
    }
}

/// Whether a lease expiring at `expires_ms` is live when the store's clock
/// reads `now_ms`: what memory's and MySQL's acquisitions pass over and
/// what listings call held. SQLite's and PostgreSQL's acquisitions say the
/// same in SQL (`expires > now`).
pub fn worker_live(expires_ms: i64, now_ms: i64) -> bool {
    expires_ms > now_ms
}

/// One worker id's floor moved by [`WorkerStore::fence_workers`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerFloorMove {
    /// The group.
    pub group: String,
    /// The worker id.
    pub worker: i64,
    /// Its floor before (ms since the Unix epoch).
    pub before: i64,
    /// Its floor after.
    pub after: i64,
}

/// The message of [`Error::IdsUnavailable`] when every worker id is held.
pub fn all_taken(group: &str, max_workers: i64) -> Error {
    Error::IdsUnavailable(format!(
        "all {max_workers} worker ids of group {group:?} are held by live leases; stop a generator, \
         wait for the leases of dead ones to expire (their time to live), or use a layout with more worker bits"
    ))
}

/// The lowest id in `0..max` not in `live` (sorted ascending), if any.
pub fn lowest_free(live: &[i64], max: i64) -> Option<i64> {
    let mut want = 0;
    for &w in live {
        if w == want {
            want += 1;
        } else if w > want {
            break;
        }
    }
    (want < max).then_some(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free_finds_the_first_gap() {
        assert_eq!(lowest_free(&[], 3), Some(0));
        assert_eq!(lowest_free(&[0, 1, 3], 5), Some(2));
        assert_eq!(lowest_free(&[1, 2], 5), Some(0));
        assert_eq!(lowest_free(&[0, 1, 2], 3), None);
        assert_eq!(lowest_free(&[0, 1], 3), Some(2));
    }

    #[test]
    fn claims_are_checked() {
        let ok = WorkerClaim {
            group: "g".into(),
            max_workers: 4,
            holder: "h".into(),
            ttl: Duration::from_secs(1),
            now_ms: 1,
            window_ms: 10,
        };
        ok.validate().unwrap();
        for bad in [
            WorkerClaim {
                max_workers: 0,
                ..ok.clone()
            },
            WorkerClaim {
                max_workers: MAX_WORKERS + 1,
                ..ok.clone()
            },
            WorkerClaim {
                ttl: Duration::ZERO,
                ..ok.clone()
            },
            WorkerClaim {
                now_ms: -1,
                ..ok.clone()
            },
            WorkerClaim {
                window_ms: 0,
                ..ok.clone()
            },
            WorkerClaim {
                group: "a b".into(),
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}

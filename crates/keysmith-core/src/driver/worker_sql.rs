//! Worker acquisition of the SQL stores (PostgreSQL, MySQL), written once:
//! the attempts an acquisition makes before [`Error::Contention`]
//! ([`acquire_worker_on`] over [`WorkerAcquire`]), and, for a store that
//! reads a group's rows under lock and decides in Rust (MySQL), which worker
//! id it takes and what it writes ([`plan_take`]: the lowest id without a
//! live lease, the generation skip of [`acquisition_start`], taking over a
//! lapsed lease). PostgreSQL says the same in its two statements.

use async_trait::async_trait;

use crate::store::{WorkerClaim, WorkerLease, acquisition_start, all_taken, lowest_free};
use crate::{Error, Result};

/// How many attempts an acquisition makes, each after losing its pick to
/// another acquirer (or a deadlock), before [`Error::Contention`].
pub const WORKER_ACQUIRE_ATTEMPTS: u32 = 32;

/// What one attempt of an acquisition came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The claim holds `worker` under `fence`, its floor now `until_ms`
    /// (the start of its lease plus the claim's window).
    Taken {
        /// The worker id.
        worker: i64,
        /// Its fence.
        fence: i64,
        /// Its floor as written.
        until_ms: i64,
    },
    /// Every worker id below the claim's `max_workers` has a live lease.
    AllTaken,
    /// Another acquirer took the id this attempt picked: try again.
    Lost,
}

/// One attempt of an acquisition on a connection of a SQL store: what
/// [`acquire_worker_on`] repeats.
#[async_trait]
pub trait WorkerAcquire: Send {
    /// Picks the lowest worker id of `claim.group` below
    /// `claim.max_workers` without a live lease and takes it for
    /// `claim.holder`, durably: a new row with fence 1, or the lapsed row
    /// with its fence plus 1, its floor from [`acquisition_start`] plus the
    /// claim's window, and the store's generation recorded.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn attempt(&mut self, claim: &WorkerClaim) -> Result<Attempt>;
}

/// [`crate::store::WorkerStore::acquire_worker`] over `acquire` (the claim
/// validated by the caller): attempts until one takes an id or finds every
/// id held.
///
/// # Errors
/// [`Error::IdsUnavailable`] when every id is held ([`all_taken`]);
/// [`Error::Contention`] after [`WORKER_ACQUIRE_ATTEMPTS`] lost attempts;
/// those of [`WorkerAcquire::attempt`].
pub async fn acquire_worker_on<T: WorkerAcquire + ?Sized>(
    acquire: &mut T,
    claim: &WorkerClaim,
) -> Result<WorkerLease> {
    for _ in 0..WORKER_ACQUIRE_ATTEMPTS {
        match acquire.attempt(claim).await? {
            Attempt::Taken {
                worker,
                fence,
                until_ms,
            } => return Ok(claim.lease(worker, fence, until_ms - claim.window_ms)),
            Attempt::AllTaken => return Err(all_taken(&claim.group, claim.max_workers)),
            Attempt::Lost => {}
        }
    }
    Err(Error::Contention {
        name: claim.group.clone(),
        attempts: WORKER_ACQUIRE_ATTEMPTS,
    })
}

/// A worker row of a group as an acquisition reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRow {
    /// The worker id.
    pub worker: i64,
    /// Its fence.
    pub fence: i64,
    /// Its floor (ms).
    pub until_ms: i64,
    /// Whether its lease is live by the store's clock.
    pub live: bool,
    /// The store generation it was last written in.
    pub generation: Option<String>,
}

/// What an acquisition writes for the worker id it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerTake {
    /// The worker id.
    pub worker: i64,
    /// Its new fence (1 for a new row).
    pub fence: i64,
    /// Its new floor.
    pub until_ms: i64,
    /// Whether the row is new (an INSERT) rather than a lapsed one (an
    /// UPDATE).
    pub new: bool,
}

/// Of a group's `rows` (ascending by worker id), the lowest worker id below
/// `claim.max_workers` without a live lease and what taking it writes in
/// store generation `generation`; `None` when every id is held.
pub fn plan_take(claim: &WorkerClaim, rows: &[GroupRow], generation: &str) -> Option<WorkerTake> {
    let live: Vec<i64> = rows.iter().filter(|r| r.live).map(|r| r.worker).collect();
    let worker = lowest_free(&live, claim.max_workers)?;
    let prior = rows.iter().find(|r| r.worker == worker);
    let (fence, floor, recorded) = prior.map_or((0, 0, None), |r| {
        (r.fence, r.until_ms, r.generation.as_deref())
    });
    let start = acquisition_start(recorded, generation, floor, claim.now_ms);
    Some(WorkerTake {
        worker,
        fence: fence + 1,
        until_ms: start + claim.window_ms,
        new: prior.is_none(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::WORKER_FAILOVER_SKIP_MS;

    fn claim() -> WorkerClaim {
        WorkerClaim {
            group: "g".into(),
            max_workers: 3,
            holder: "h".into(),
            ttl: Duration::from_secs(1),
            now_ms: 1_000,
            window_ms: 100,
        }
    }

    fn row(worker: i64, live: bool, until_ms: i64, generation: &str) -> GroupRow {
        GroupRow {
            worker,
            fence: 4,
            until_ms,
            live,
            generation: Some(generation.into()),
        }
    }

    #[test]
    fn plans_take_the_lowest_free_id_new_or_lapsed() {
        let c = claim();
        // Nothing yet: worker 0, new, from the holder's clock.
        let t = plan_take(&c, &[], "g1").unwrap();
        assert_eq!((t.worker, t.fence, t.until_ms, t.new), (0, 1, 1_100, true));
        // 0 live, 1 lapsed with a floor ahead of the clock: 1, taken over.
        let rows = [row(0, true, 0, "g1"), row(1, false, 5_000, "g1")];
        let t = plan_take(&c, &rows, "g1").unwrap();
        assert_eq!((t.worker, t.fence, t.until_ms, t.new), (1, 5, 5_100, false));
        // The same row from another generation: its floor skips ahead.
        let t = plan_take(&c, &rows, "g2").unwrap();
        assert_eq!(t.until_ms, 5_000 + WORKER_FAILOVER_SKIP_MS + 100);
        // Every id live: none.
        let all = [
            row(0, true, 0, "g1"),
            row(1, true, 0, "g1"),
            row(2, true, 0, "g1"),
        ];
        assert_eq!(plan_take(&c, &all, "g1"), None);
    }
}

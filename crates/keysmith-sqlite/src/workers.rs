//! SQLite: the [`WorkerStore`] half of the contract. Every call is one
//! `BEGIN IMMEDIATE` transaction, so acquisitions in any number of
//! processes run one after the other; expiry is by the system clock (one
//! file, one machine).

use std::time::Duration;

use super::*;
use keysmith_core::driver::{
    Release, Renewal, WorkerClaim, WorkerEntry, WorkerLease, WorkerStore, acquisition_start,
    all_taken, lowest_free, worker_entry,
};

fn ttl_ms(ttl: Duration) -> i64 {
    ttl.as_millis().min(i64::MAX as u128) as i64
}

#[async_trait]
impl WorkerStore for SqliteStore {
    async fn acquire_worker(&self, claim: &WorkerClaim) -> Result<WorkerLease> {
        claim.validate()?;
        let (claim, generation) = (claim.clone(), self.generation.clone());
        self.write(move |tx| {
            let now = keysmith_core::driver::now_ms();
            let live: Vec<i64> = tx
                .prepare_cached(
                    "SELECT worker FROM keysmith_workers
                     WHERE grp = ?1 AND worker < ?2 AND expires_ms > ?3 ORDER BY worker",
                )
                .and_then(|mut s| {
                    s.query_map(params![claim.group, claim.max_workers, now], |r| r.get(0))?
                        .collect()
                })
                .map_err(db_err)?;
            let worker = lowest_free(&live, claim.max_workers)
                .ok_or_else(|| all_taken(&claim.group, claim.max_workers))?;
            let old: Option<(i64, i64, Option<String>)> = tx
                .query_row(
                    "SELECT fence, until_ms, generation FROM keysmith_workers
                     WHERE grp = ?1 AND worker = ?2",
                    params![claim.group, worker],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(db_err)?;
            let (fence, floor, recorded) = old.unwrap_or((0, 0, None));
            let start_ms = acquisition_start(recorded.as_deref(), &generation, floor, claim.now_ms);
            let lease = claim.lease(worker, fence + 1, start_ms);
            tx.execute(
                "INSERT INTO keysmith_workers
                     (grp, worker, fence, holder, until_ms, expires_ms, generation)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (grp, worker) DO UPDATE SET fence = excluded.fence,
                     holder = excluded.holder, until_ms = excluded.until_ms,
                     expires_ms = excluded.expires_ms, generation = excluded.generation",
                params![
                    claim.group,
                    worker,
                    lease.fence,
                    claim.holder,
                    lease.until_ms,
                    now + ttl_ms(claim.ttl),
                    &*generation
                ],
            )
            .map_err(db_err)?;
            Ok(lease)
        })
        .await
    }

    async fn renew_worker_checked(&self, renewal: &Renewal<'_>) -> Result<Option<i64>> {
        let (group, worker, fence) = (renewal.group, renewal.worker, renewal.fence);
        let (ttl, from_ms, window_ms) = (renewal.ttl, renewal.from_ms, renewal.window_ms);
        let (group, generation) = (group.to_owned(), self.generation.clone());
        self.write(move |tx| {
            // A row of another generation is not renewed: the lease is lost.
            tx.query_row(
                "UPDATE keysmith_workers
                 SET until_ms = max(until_ms, ?4), expires_ms = ?5, generation = ?6
                 WHERE grp = ?1 AND worker = ?2 AND fence = ?3
                   AND (generation IS NULL OR generation = ?6)
                 RETURNING until_ms",
                params![
                    group,
                    worker,
                    fence,
                    from_ms + window_ms,
                    keysmith_core::driver::now_ms() + ttl_ms(ttl),
                    &*generation
                ],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
        })
        .await
    }

    async fn release_worker_checked(&self, release: &Release<'_>) -> Result<bool> {
        let (group, worker) = (release.group, release.worker);
        let (fence, floor_ms) = (release.fence, release.floor_ms);
        let (group, generation) = (group.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let n = tx
                .execute(
                    "UPDATE keysmith_workers SET until_ms = min(until_ms, ?4), expires_ms = 0
                     WHERE grp = ?1 AND worker = ?2 AND fence = ?3
                       AND (generation IS NULL OR generation = ?5)",
                    params![group, worker, fence, floor_ms, &*generation],
                )
                .map_err(db_err)?;
            Ok(n == 1)
        })
        .await
    }

    async fn fence_workers(
        &self,
        skip_ms: i64,
    ) -> Result<Vec<keysmith_core::driver::WorkerFloorMove>> {
        self.write(move |tx| {
            let mut s = tx
                .prepare(
                    "UPDATE keysmith_workers SET until_ms = until_ms + ?1
                     RETURNING grp, worker, until_ms - ?1, until_ms",
                )
                .map_err(db_err)?;
            let mut out = s
                .query_map([skip_ms], |r| {
                    Ok(keysmith_core::driver::WorkerFloorMove {
                        group: r.get(0)?,
                        worker: r.get(1)?,
                        before: r.get(2)?,
                        after: r.get(3)?,
                    })
                })
                .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(db_err)?;
            out.sort_by(|a, b| (&a.group, a.worker).cmp(&(&b.group, b.worker)));
            Ok(out)
        })
        .await
    }

    async fn list_workers(&self, group: &str) -> Result<Vec<WorkerEntry>> {
        let group = group.to_owned();
        self.run(move |conn| {
            // One statement: one snapshot of the group. The clock is read
            // as an acquisition reads it, before its SELECT.
            let now = keysmith_core::driver::now_ms();
            let mut s = conn
                .prepare_cached(
                    "SELECT worker, fence, until_ms, holder, expires_ms FROM keysmith_workers
                     WHERE grp = ?1 ORDER BY worker",
                )
                .map_err(db_err)?;
            s.query_map(params![group], |r| {
                Ok(worker_entry(
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    now,
                ))
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(db_err)
        })
        .await
    }
}

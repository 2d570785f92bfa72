//! MySQL: the [`WorkerStore`] half of the contract. Expiry is by the
//! server's clock ([`NOW_MS`]), so holders on hosts with different clocks
//! agree on it.
//!
//! An acquisition is one transaction: it locks the group's rows (`SELECT
//! ... FOR UPDATE`), so acquisitions of one group run one after the other,
//! picks the lowest worker id without a live lease, and takes it with an
//! UPDATE of its expired row or an INSERT of a new one. Two acquirers that
//! both insert the same new worker id collide on the primary key: the loser
//! rolls back and tries again. Renewal and release are one UPDATE each,
//! conditional on the fence.

use super::*;
use keysmith_core::driver::{
    Release, Renewal, WorkerClaim, WorkerEntry, WorkerLease, WorkerStore, acquisition_start,
    all_taken, lowest_free, ticket_ttl_ms, worker_entry, worker_live,
};

/// How often an acquisition tries again after losing a new worker id to
/// another acquirer (or a deadlock).
const ACQUIRE_ATTEMPTS: u32 = 32;

#[async_trait]
impl WorkerStore for MysqlStore {
    async fn acquire_worker(&self, claim: &WorkerClaim) -> Result<WorkerLease> {
        claim.validate()?;
        let ttl = ticket_ttl_ms(claim.ttl);
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            for _ in 0..ACQUIRE_ATTEMPTS {
                let mut tx = begin(c).await.map_err(bad)?;
                let rows: Vec<(i64, i64, i64, i64, Option<String>)> = tx
                    .exec(
                        "SELECT worker, fence, until_ms, expires_at, generation FROM keysmith_workers
                         WHERE grp = ? ORDER BY worker FOR UPDATE",
                        (&claim.group,),
                    )
                    .await
                    .map_err(bad)?;
                // The clock after the locks were granted: the lease runs
                // from here.
                let (now, generation): (i64, String) = tx
                    .query_first(format!("SELECT {NOW_MS}, {}", self.generation_expr()))
                    .await
                    .map_err(bad)?
                    .ok_or_else(|| self.corrupt("the server's clock gave no answer"))?;
                let live: Vec<i64> = rows
                    .iter()
                    .filter(|r| worker_live(r.3, now))
                    .map(|r| r.0)
                    .collect();
                let Some(worker) = lowest_free(&live, claim.max_workers) else {
                    return Err(all_taken(&claim.group, claim.max_workers));
                };
                let (fence, until_ms) = match rows.iter().find(|r| r.0 == worker) {
                    Some((_, fence, until_ms, _, recorded)) => {
                        let start = acquisition_start(
                            recorded.as_deref(),
                            &generation,
                            *until_ms,
                            claim.now_ms,
                        );
                        let lease = (fence + 1, start + claim.window_ms);
                        tx.exec_drop(
                            "UPDATE keysmith_workers SET fence = ?, holder = ?, until_ms = ?, expires_at = ?,
                                 generation = ?
                             WHERE grp = ? AND worker = ?",
                            (
                                lease.0,
                                &claim.holder,
                                lease.1,
                                now + ttl,
                                &generation,
                                &claim.group,
                                worker,
                            ),
                        )
                        .await
                        .map_err(bad)?;
                        lease
                    }
                    None => {
                        let until_ms = claim.now_ms + claim.window_ms;
                        match tx
                            .exec_drop(
                                "INSERT INTO keysmith_workers
                                     (grp, worker, fence, holder, until_ms, expires_at, generation)
                                 VALUES (?, ?, 1, ?, ?, ?, ?)",
                                (
                                    &claim.group,
                                    worker,
                                    &claim.holder,
                                    until_ms,
                                    now + ttl,
                                    &generation,
                                ),
                            )
                            .await
                        {
                            Ok(()) => (1, until_ms),
                            Err(e) if matches!(code(&e), Some(ER_DUP_ENTRY | ER_LOCK_DEADLOCK)) => {
                                // Another acquirer took this new worker id: again.
                                drop(tx);
                                continue;
                            }
                            Err(e) => return Err(bad(e)),
                        }
                    }
                };
                match tx.commit().await {
                    Ok(()) => {}
                    Err(e) if code(&e) == Some(ER_LOCK_DEADLOCK) => continue,
                    Err(e) => return Err(bad(e)),
                }
                return Ok(claim.lease(worker, fence, until_ms - claim.window_ms));
            }
            Err(Error::Contention {
                name: claim.group.clone(),
                attempts: ACQUIRE_ATTEMPTS,
            })
        })
        .await
    }

    async fn renew_worker_checked(&self, renewal: &Renewal<'_>) -> Result<Option<i64>> {
        let (group, worker, fence) = (renewal.group, renewal.worker, renewal.fence);
        let (ttl, from_ms, window_ms) = (renewal.ttl, renewal.from_ms, renewal.window_ms);
        let ttl = ticket_ttl_ms(ttl);
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            tx.exec_drop(
                format!(
                    "UPDATE keysmith_workers
                     SET until_ms = GREATEST(until_ms, ?), expires_at = {NOW_MS} + ?,
                         generation = {g}
                     WHERE grp = ? AND worker = ? AND fence = ?
                       AND (generation IS NULL OR generation = {g})",
                    g = self.generation_expr()
                ),
                (from_ms + window_ms, ttl, group, worker, fence),
            )
            .await
            .map_err(bad)?;
            if tx.affected_rows() != 1 {
                return Ok(None);
            }
            let until: Option<i64> = tx
                .exec_first(
                    "SELECT until_ms FROM keysmith_workers WHERE grp = ? AND worker = ?",
                    (group, worker),
                )
                .await
                .map_err(bad)?;
            tx.commit().await.map_err(bad)?;
            Ok(until)
        })
        .await
    }

    async fn release_worker_checked(&self, release: &Release<'_>) -> Result<bool> {
        let (group, worker) = (release.group, release.worker);
        let (fence, floor_ms) = (release.fence, release.floor_ms);
        with_conn(self, async |c| {
            // expires_at 0: expired by any clock after 1970.
            c.exec_drop(
                format!(
                    "UPDATE keysmith_workers SET until_ms = LEAST(until_ms, ?), expires_at = 0
                     WHERE grp = ? AND worker = ? AND fence = ?
                       AND (generation IS NULL OR generation = {})",
                    self.generation_expr()
                ),
                (floor_ms, group, worker, fence),
            )
            .await
            .map_err(|e| self.my(&e))?;
            Ok(c.affected_rows() == 1)
        })
        .await
    }

    async fn fence_workers(
        &self,
        skip_ms: i64,
    ) -> Result<Vec<keysmith_core::driver::WorkerFloorMove>> {
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            let rows: Vec<(Vec<u8>, i64, i64)> = tx
                .query(
                    "SELECT grp, worker, until_ms FROM keysmith_workers
                     ORDER BY grp, worker FOR UPDATE",
                )
                .await
                .map_err(bad)?;
            tx.exec_drop(
                "UPDATE keysmith_workers SET until_ms = until_ms + ?",
                (skip_ms,),
            )
            .await
            .map_err(bad)?;
            tx.commit().await.map_err(bad)?;
            Ok(rows
                .into_iter()
                .map(
                    |(g, worker, before)| keysmith_core::driver::WorkerFloorMove {
                        group: String::from_utf8_lossy(&g).into_owned(),
                        worker,
                        before,
                        after: before.saturating_add(skip_ms),
                    },
                )
                .collect())
        })
        .await
    }

    async fn list_workers(&self, group: &str) -> Result<Vec<WorkerEntry>> {
        with_conn(self, async |c| {
            // One statement: one snapshot of the group, and the server's
            // clock as an acquisition reads it.
            let rows: Vec<(i64, i64, i64, String, i64, i64)> = c
                .exec(
                    format!(
                        "SELECT worker, fence, until_ms, holder, expires_at, {NOW_MS}
                         FROM keysmith_workers WHERE grp = ? ORDER BY worker"
                    ),
                    (group,),
                )
                .await
                .map_err(|e| self.my(&e))?;
            Ok(rows
                .into_iter()
                .map(|(worker, fence, until_ms, holder, expires_at, now)| {
                    worker_entry(worker, fence, until_ms, holder, expires_at, now)
                })
                .collect())
        })
        .await
    }
}

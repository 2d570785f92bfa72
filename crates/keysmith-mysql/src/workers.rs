//! MySQL: the [`WorkerStore`] half of the contract. Expiry is by the
//! server's clock ([`NOW_MS`]), so holders on hosts with different clocks
//! agree on it.
//!
//! An acquisition is one transaction: it locks the group's rows (`SELECT
//! ... FOR UPDATE`), so acquisitions of one group run one after the other,
//! picks the lowest worker id without a live lease, and takes it with an
//! UPDATE of its expired row or an INSERT of a new one (`plan_take`; the
//! attempts are `acquire_worker_on`'s). Two acquirers that
//! both insert the same new worker id collide on the primary key: the loser
//! rolls back and tries again. Renewal and release are one UPDATE each,
//! conditional on the fence.

use super::*;
use keysmith_core::driver::{
    Attempt, GroupRow, Release, Renewal, WorkerAcquire, WorkerClaim, WorkerEntry, WorkerLease,
    WorkerStore, acquire_worker_on, plan_take, ticket_ttl_ms, worker_entry, worker_live,
};

/// A connection of this store: one attempt of an acquisition.
struct AcquireOn<'a> {
    store: &'a MysqlStore,
    c: &'a mut Conn,
}

#[async_trait]
impl WorkerAcquire for AcquireOn<'_> {
    async fn attempt(&mut self, claim: &WorkerClaim) -> Result<Attempt> {
        let store = self.store;
        let bad = |e: mysql_async::Error| store.my(&e);
        let mut tx = begin(self.c).await.map_err(bad)?;
        let rows: Vec<(i64, i64, i64, i64, Option<String>)> = tx
            .exec(
                "SELECT worker, fence, until_ms, expires_at, generation FROM keysmith_workers
                 WHERE grp = ? ORDER BY worker FOR UPDATE",
                (&claim.group,),
            )
            .await
            .map_err(bad)?;
        // The clock after the locks were granted: the lease runs from here.
        let (now, generation): (i64, String) = tx
            .query_first(format!("SELECT {NOW_MS}, {}", store.generation_expr()))
            .await
            .map_err(bad)?
            .ok_or_else(|| store.corrupt("the server's clock gave no answer"))?;
        let rows: Vec<GroupRow> = rows
            .into_iter()
            .map(
                |(worker, fence, until_ms, expires_at, generation)| GroupRow {
                    worker,
                    fence,
                    until_ms,
                    live: worker_live(expires_at, now),
                    generation,
                },
            )
            .collect();
        let Some(take) = plan_take(claim, &rows, &generation) else {
            return Ok(Attempt::AllTaken);
        };
        let expires_at = now + ticket_ttl_ms(claim.ttl);
        let written = if take.new {
            tx.exec_drop(
                "INSERT INTO keysmith_workers
                     (grp, worker, fence, holder, until_ms, expires_at, generation)
                 VALUES (?, ?, 1, ?, ?, ?, ?)",
                (
                    &claim.group,
                    take.worker,
                    &claim.holder,
                    take.until_ms,
                    expires_at,
                    &generation,
                ),
            )
            .await
        } else {
            tx.exec_drop(
                "UPDATE keysmith_workers SET fence = ?, holder = ?, until_ms = ?, expires_at = ?,
                     generation = ?
                 WHERE grp = ? AND worker = ?",
                (
                    take.fence,
                    &claim.holder,
                    take.until_ms,
                    expires_at,
                    &generation,
                    &claim.group,
                    take.worker,
                ),
            )
            .await
        };
        match written {
            Ok(()) => {}
            // Another acquirer took this new worker id (the transaction
            // rolls back).
            Err(e) if take.new && matches!(code(&e), Some(ER_DUP_ENTRY | ER_LOCK_DEADLOCK)) => {
                return Ok(Attempt::Lost);
            }
            Err(e) => return Err(bad(e)),
        }
        match tx.commit().await {
            Ok(()) => Ok(Attempt::Taken {
                worker: take.worker,
                fence: take.fence,
                until_ms: take.until_ms,
            }),
            Err(e) if code(&e) == Some(ER_LOCK_DEADLOCK) => Ok(Attempt::Lost),
            Err(e) => Err(bad(e)),
        }
    }
}

#[async_trait]
impl WorkerStore for MysqlStore {
    async fn acquire_worker(&self, claim: &WorkerClaim) -> Result<WorkerLease> {
        claim.validate()?;
        with_conn(self, async |c| {
            acquire_worker_on(&mut AcquireOn { store: self, c }, claim).await
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

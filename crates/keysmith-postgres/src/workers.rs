//! PostgreSQL: the [`WorkerStore`] half of the contract. Expiry is by the
//! server's `clock_timestamp()`, so holders on hosts with different clocks
//! agree on it.
//!
//! An acquisition reads the lowest worker id without a live lease, then
//! takes it with `INSERT ... ON CONFLICT DO UPDATE ... WHERE expired`: when
//! two acquirers pick the same id, the second waits for the first's commit,
//! re-evaluates the WHERE on the new row (now live), updates nothing and
//! returns no row; it then reads again (the attempts are
//! `acquire_worker_on`'s). Renewal and release are one UPDATE
//! each, conditional on the fence.

use super::*;
use keysmith_core::driver::{
    Attempt, Release, Renewal, WorkerAcquire, WorkerClaim, WorkerEntry, WorkerLease, WorkerStore,
    acquire_worker_on, ticket_ttl_ms,
};

impl PostgresStore {
    fn s(&self) -> String {
        quote_ident(&self.schema)
    }
}

/// A connection of this store: one attempt of an acquisition, its two
/// statements.
struct AcquireOn<'a> {
    store: &'a PostgresStore,
    c: &'a Object,
    pick: &'a str,
    take: &'a str,
}

#[async_trait]
impl WorkerAcquire for AcquireOn<'_> {
    async fn attempt(&mut self, claim: &WorkerClaim) -> Result<Attempt> {
        let bad = |e: tokio_postgres::Error| self.store.pg(&e);
        let Some(row) = self
            .c
            .query_opt(self.pick, &[&claim.group, &claim.max_workers])
            .await
            .map_err(bad)?
        else {
            return Ok(Attempt::AllTaken);
        };
        let worker: i64 = row.try_get(0).map_err(bad)?;
        let taken = self
            .c
            .query_opt(
                self.take,
                &[
                    &claim.group,
                    &worker,
                    &claim.holder,
                    &claim.now_ms,
                    &claim.window_ms,
                    &ticket_ttl_ms(claim.ttl),
                    &keysmith_core::driver::WORKER_FAILOVER_SKIP_MS,
                ],
            )
            .await
            .map_err(bad)?;
        let Some(r) = taken else {
            // Another acquirer took it first.
            return Ok(Attempt::Lost);
        };
        Ok(Attempt::Taken {
            worker,
            fence: r.try_get(0).map_err(bad)?,
            until_ms: r.try_get(1).map_err(bad)?,
        })
    }
}

#[async_trait]
impl WorkerStore for PostgresStore {
    async fn acquire_worker(&self, claim: &WorkerClaim) -> Result<WorkerLease> {
        claim.validate()?;
        let s = self.s();
        // The lowest free id is 0 or one above a live one.
        let pick = format!(
            "SELECT c.w FROM (SELECT 0::bigint AS w
                              UNION SELECT worker + 1 FROM {s}.workers
                              WHERE grp = $1 AND expires_at > clock_timestamp()) c
             WHERE c.w < $2 AND NOT EXISTS (
                 SELECT 1 FROM {s}.workers x
                 WHERE x.grp = $1 AND x.worker = c.w AND x.expires_at > clock_timestamp())
             ORDER BY c.w LIMIT 1"
        );
        let take = format!(
            "INSERT INTO {s}.workers AS w
                 (grp, worker, fence, holder, until_ms, expires_at, generation)
             VALUES ($1, $2, 1, $3, $4::bigint + $5::bigint,
                     clock_timestamp() + $6::bigint * interval '1 millisecond',
                     {s}.store_generation())
             ON CONFLICT (grp, worker) DO UPDATE
                 SET fence = w.fence + 1, holder = EXCLUDED.holder,
                     -- acquisition_start (store/workers.rs), in SQL.
                     until_ms = GREATEST(w.until_ms, $4::bigint)
                         + CASE WHEN w.generation IS NOT NULL
                                 AND w.generation <> EXCLUDED.generation
                                THEN $7::bigint ELSE 0 END
                         + $5::bigint,
                     expires_at = EXCLUDED.expires_at,
                     generation = EXCLUDED.generation
                 WHERE w.expires_at <= clock_timestamp()
             RETURNING fence, until_ms"
        );
        with_conn(self, async |c| {
            let mut on = AcquireOn {
                store: self,
                c,
                pick: &pick,
                take: &take,
            };
            acquire_worker_on(&mut on, claim).await
        })
        .await
    }

    async fn renew_worker_checked(&self, renewal: &Renewal<'_>) -> Result<Option<i64>> {
        let (group, worker, fence) = (renewal.group, renewal.worker, renewal.fence);
        let (ttl, from_ms, window_ms) = (renewal.ttl, renewal.from_ms, renewal.window_ms);
        let sql = format!(
            "UPDATE {s}.workers
             SET until_ms = GREATEST(until_ms, $4::bigint),
                 expires_at = clock_timestamp() + $5::bigint * interval '1 millisecond',
                 generation = {s}.store_generation()
             WHERE grp = $1 AND worker = $2 AND fence = $3
               AND (generation IS NULL OR generation = {s}.store_generation())
             RETURNING until_ms",
            s = self.s()
        );
        with_conn(self, async |c| {
            let r = c
                .query_opt(
                    &sql,
                    &[
                        &group,
                        &worker,
                        &fence,
                        &(from_ms + window_ms),
                        &ticket_ttl_ms(ttl),
                    ],
                )
                .await
                .map_err(|e| self.pg(&e))?;
            r.map(|r| r.try_get(0).map_err(|e| self.pg(&e))).transpose()
        })
        .await
    }

    async fn release_worker_checked(&self, release: &Release<'_>) -> Result<bool> {
        let (group, worker) = (release.group, release.worker);
        let (fence, floor_ms) = (release.fence, release.floor_ms);
        let sql = format!(
            "UPDATE {s}.workers
             SET until_ms = LEAST(until_ms, $4::bigint), expires_at = '-infinity'
             WHERE grp = $1 AND worker = $2 AND fence = $3
               AND (generation IS NULL OR generation = {s}.store_generation())",
            s = self.s()
        );
        with_conn(self, async |c| {
            c.execute(&sql, &[&group, &worker, &fence, &floor_ms])
                .await
                .map(|n| n == 1)
                .map_err(|e| self.pg(&e))
        })
        .await
    }

    async fn fence_workers(
        &self,
        skip_ms: i64,
    ) -> Result<Vec<keysmith_core::driver::WorkerFloorMove>> {
        let sql = format!(
            "UPDATE {}.workers SET until_ms = until_ms + $1
             RETURNING grp, worker, until_ms - $1, until_ms",
            self.s()
        );
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let rows = c.query(&sql, &[&skip_ms]).await.map_err(bad)?;
            let mut out = rows
                .iter()
                .map(|r| {
                    Ok(keysmith_core::driver::WorkerFloorMove {
                        group: r.try_get(0).map_err(bad)?,
                        worker: r.try_get(1).map_err(bad)?,
                        before: r.try_get(2).map_err(bad)?,
                        after: r.try_get(3).map_err(bad)?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            out.sort_by(|a, b| (&a.group, a.worker).cmp(&(&b.group, b.worker)));
            Ok(out)
        })
        .await
    }

    async fn list_workers(&self, group: &str) -> Result<Vec<WorkerEntry>> {
        // Live as an acquisition decides it (`expires_at >
        // clock_timestamp()`), against one reading of the clock (a
        // materialized CTE is evaluated once); the time left rounded up, so
        // that a live lease has at least 1 ms.
        let sql = format!(
            "WITH n AS MATERIALIZED (SELECT clock_timestamp() AS now)
             SELECT w.worker, w.fence, w.until_ms,
                    CASE WHEN w.expires_at > n.now THEN w.holder END,
                    CASE WHEN w.expires_at > n.now
                         THEN ceil(extract(epoch FROM w.expires_at - n.now) * 1000)::bigint END
             FROM {}.workers w CROSS JOIN n
             WHERE w.grp = $1 ORDER BY w.worker",
            self.s()
        );
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let rows = c.query(&sql, &[&group]).await.map_err(bad)?;
            rows.iter()
                .map(|r| {
                    Ok(WorkerEntry {
                        worker: r.try_get(0).map_err(bad)?,
                        fence: r.try_get(1).map_err(bad)?,
                        until_ms: r.try_get(2).map_err(bad)?,
                        holder: r.try_get(3).map_err(bad)?,
                        expires_in_ms: r.try_get(4).map_err(bad)?,
                    })
                })
                .collect()
        })
        .await
    }
}

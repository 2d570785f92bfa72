//! PostgreSQL: the [`PoolStore`] half of the contract.

use super::*;
use keysmith_core::driver::{
    FenceClaim, PoolReads, PoolSwaps, PoolTotals, PoolTx, SwapSeen, create_pool_in, drop_pool_in,
    fence_pool_in, sample_members_on, swap_member_with,
};

impl PostgresStore {
    fn pool_row(&self, r: &tokio_postgres::Row) -> Result<PoolRow> {
        let bad = |e: tokio_postgres::Error| self.pg(&e);
        let name: String = r.try_get(0).map_err(bad)?;
        let residue = keysmith_core::driver::stored_residue(
            &name,
            r.try_get(4).map_err(bad)?,
            r.try_get(5).map_err(bad)?,
        )?;
        Ok(PoolRow {
            name,
            start: r.try_get(1).map_err(bad)?,
            size: r.try_get(2).map_err(bad)?,
            generation: r.try_get(3).map_err(bad)?,
            residue,
            incarnation: stored_version(r.try_get(6).map_err(bad)?),
        })
    }
}

/// The last member of a pool of `size` from `start`, checked: what
/// `generate_series` writes up to.
fn last_member(name: &str, start: i64, size: i64) -> Result<i64> {
    match (start >= 0, size >= 0, start.checked_add(size)) {
        (true, true, Some(_)) => Ok(start + size - 1),
        _ => Err(Error::invalid(format!(
            "pool {name:?}: start ({start}) and size ({size}) must be 0 or more, and start + size must fit in a 64-bit integer"
        ))),
    }
}

/// A connection of this store: the statements of a sample.
struct PoolReadsOf<'a> {
    store: &'a PostgresStore,
    c: &'a Object,
}

#[async_trait]
impl PoolReads for PoolReadsOf<'_> {
    async fn pool_size(&mut self, name: &str) -> Result<Option<i64>> {
        let r = self
            .c
            .query_opt(&self.store.sql.pool_read, &[&name])
            .await
            .map_err(|e| self.store.pg(&e))?;
        Ok(r.map(|r| self.store.pool_row(&r))
            .transpose()?
            .map(|p| p.size))
    }

    async fn sample(&mut self, name: &str, slots: &[i64]) -> Result<Option<(i64, Vec<i64>)>> {
        let bad = |e: tokio_postgres::Error| self.store.pg(&e);
        let st = self
            .c
            .prepare_cached(&self.store.sql.pool_sample)
            .await
            .map_err(bad)?;
        let r = self.c.query_one(&st, &[&name, &slots]).await.map_err(bad)?;
        let Some(size) = r.try_get::<_, Option<i64>>(0).map_err(bad)? else {
            return Ok(None);
        };
        Ok(Some((size, r.try_get(1).map_err(bad)?)))
    }

    fn corrupt(&self, what: &str) -> Error {
        Error::Corrupt(format!(
            "PostgreSQL at {}, schema {:?}: {what}; the keysmith tables were changed outside keysmith",
            self.store.target, self.store.schema
        ))
    }
}

#[async_trait]
impl PoolTx for InTx<'_, '_> {
    async fn lock_tombstone(&mut self, name: &str) -> Result<Tombstone> {
        self.store.lock_tombstone(self.tx, POOL_KIND, name).await
    }

    async fn raise_tombstone(&mut self, name: &str, t: Tombstone) -> Result<()> {
        self.store
            .raise_tombstone(self.tx, POOL_KIND, name, t)
            .await
    }

    async fn insert_pool(&mut self, spec: &PoolSpec, incarnation: u64) -> Result<()> {
        let (name, start, size) = (spec.name.as_str(), spec.start, spec.size);
        let incarnation = version_param(name, incarnation)?;
        let last = last_member(name, start, size)?;
        let (increment, offset) = (
            spec.residue.map(|r| r.increment),
            spec.residue.map(|r| r.offset),
        );
        match self
            .tx
            .execute(
                &self.store.sql.pool_create,
                &[
                    &name,
                    &start,
                    &size,
                    &last,
                    &increment,
                    &offset,
                    &incarnation,
                ],
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Err(Error::AlreadyExists {
                kind: "pool",
                name: name.to_owned(),
            }),
            Err(e) => Err(self.store.pg(&e)),
        }
    }

    async fn generation(&mut self) -> Result<String> {
        let bad = |e: tokio_postgres::Error| self.store.pg(&e);
        self.tx
            .query_one(&self.store.sql.generation, &[])
            .await
            .map_err(bad)?
            .try_get(0)
            .map_err(bad)
    }

    async fn lock_pool(&mut self, name: &str) -> Result<Option<PoolRow>> {
        let r = self
            .tx
            .query_opt(
                &format!("{} FOR UPDATE", self.store.sql.pool_read),
                &[&name],
            )
            .await
            .map_err(|e| self.store.pg(&e))?;
        r.map(|r| self.store.pool_row(&r)).transpose()
    }

    async fn top_member(&mut self, name: &str) -> Result<Option<i64>> {
        let bad = |e: tokio_postgres::Error| self.store.pg(&e);
        self.tx
            .query_one(&self.store.sql.pool_fence_top, &[&name])
            .await
            .map_err(bad)?
            .try_get(0)
            .map_err(bad)
    }

    async fn delete_pool(&mut self, name: &str) -> Result<()> {
        self.tx
            .execute(&self.store.sql.pool_drop, &[&name])
            .await
            .map(drop)
            .map_err(|e| self.store.pg(&e))
    }

    async fn claim_fence(&mut self, name: &str, from: Option<&str>) -> Result<FenceClaim> {
        let bad = |e: tokio_postgres::Error| self.store.pg(&e);
        let claimed = self
            .tx
            .query_opt(&self.store.sql.pool_fence_claim, &[&name, &from])
            .await
            .map_err(bad)?;
        let Some(r) = claimed else {
            // With `from`: another caller fenced it (or it is gone: the
            // swap says so).
            return Ok(match from {
                None => FenceClaim::Missing,
                Some(_) => FenceClaim::Fenced,
            });
        };
        let residue = keysmith_core::driver::stored_residue(
            name,
            r.try_get(1).map_err(bad)?,
            r.try_get(2).map_err(bad)?,
        )?;
        Ok(FenceClaim::Claimed {
            size: r.try_get(0).map_err(bad)?,
            residue,
        })
    }

    async fn move_members(&mut self, name: &str, by: i64) -> Result<()> {
        self.tx
            .execute(&self.store.sql.pool_fence_move, &[&name, &by])
            .await
            .map(drop)
            .map_err(|e| self.store.pg(&e))
    }
}

#[async_trait]
impl PoolSwaps for PostgresStore {
    async fn swap_once(
        &self,
        name: &str,
        incarnation: u64,
        take: i64,
        put: i64,
    ) -> Result<SwapSeen> {
        let life = crate::version_param(name, incarnation)?;
        with_conn(self, async |c| {
            let st = c
                .prepare_cached(&self.sql.pool_swap)
                .await
                .map_err(|e| self.pg(&e))?;
            let r = match c.query_one(&st, &[&name, &take, &put, &life]).await {
                Ok(r) => r,
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    return Err(Error::Corrupt(format!(
                        "pool {name:?} already holds {put}, which it should not yet"
                    )));
                }
                Err(e) => return Err(self.pg(&e)),
            };
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let exists: bool = r.try_get(0).map_err(bad)?;
            if !exists {
                return Err(Error::not_found("pool", name));
            }
            let swapped: i64 = r.try_get(1).map_err(bad)?;
            let theirs: Option<i64> = r.try_get(4).map_err(bad)?;
            if swapped == 0 {
                let row_life = crate::stored_version(theirs.unwrap_or(0));
                if incarnation != 0 && row_life != 0 && row_life != incarnation {
                    return Err(Error::Dropped {
                        kind: "pool",
                        name: name.to_owned(),
                        held: "handle",
                    });
                }
            }
            Ok(SwapSeen {
                swapped: swapped == 1,
                generations: Some((r.try_get(2).map_err(bad)?, r.try_get(3).map_err(bad)?)),
                size: None,
            })
        })
        .await
    }

    async fn fence_from(&self, name: &str, rounds: i64, from: Option<&str>) -> Result<()> {
        self.in_tx(async |tx| fence_pool_in(tx, name, rounds, from).await)
            .await
    }
}

#[async_trait]
impl PoolStore for PostgresStore {
    async fn create_pool(&self, spec: &PoolSpec) -> Result<PoolRow> {
        last_member(&spec.name, spec.start, spec.size)?;
        self.in_tx(async |tx| create_pool_in(tx, spec).await).await
    }

    async fn read_pool(&self, name: &str) -> Result<Option<PoolRow>> {
        with_conn(self, async |c| {
            let r = c
                .query_opt(&self.sql.pool_read, &[&name])
                .await
                .map_err(|e| self.pg(&e))?;
            r.map(|r| self.pool_row(&r)).transpose()
        })
        .await
    }

    async fn sample_members(&self, name: &str, k: usize) -> Result<Vec<i64>> {
        with_conn(self, async |c| {
            let mut reads = PoolReadsOf { store: self, c };
            sample_members_on(&mut reads, &self.pool_sizes, name, k).await
        })
        .await
    }

    async fn swap_member(&self, name: &str, take: i64, put: i64) -> Result<bool> {
        swap_member_with(self, name, 0, take, put).await
    }

    async fn swap_member_in(
        &self,
        name: &str,
        incarnation: u64,
        take: i64,
        put: i64,
    ) -> Result<bool> {
        swap_member_with(self, name, incarnation, take, put).await
    }

    async fn fence_pool(&self, name: &str, rounds: i64) -> Result<()> {
        self.fence_from(name, rounds, None).await
    }

    async fn list_members(&self, name: &str) -> Result<Vec<i64>> {
        with_conn(self, async |c| {
            let r = c
                .query_one(&self.sql.pool_members, &[&name])
                .await
                .map_err(|e| self.pg(&e))?;
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let exists: bool = r.try_get(0).map_err(bad)?;
            if !exists {
                return Err(Error::not_found("pool", name));
            }
            r.try_get(1).map_err(bad)
        })
        .await
    }

    async fn record_pool_mark(&self, name: &str, now_ms: i64, taken: i64) -> Result<()> {
        with_conn(self, async |c| {
            let sql = &self.sql;
            let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
            match tx.execute(&sql.pool_marks_ensure, &[&name]).await {
                Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => {
                    return Err(Error::not_found("pool", name));
                }
                other => other.map_err(|e| self.pg(&e))?,
            };
            let r = tx
                .query_one(&sql.pool_marks_lock, &[&name])
                .await
                .map_err(|e| self.pg(&e))?;
            let m = marks_from(&r).advance(now_ms, taken);
            let at = |m: Option<RateMark>| (m.map(|m| m.at_ms), m.map(|m| m.reserved));
            let ((mark_at, mark_value), (prev_at, prev_value)) = (at(m.mark), at(m.prev_mark));
            tx.execute(
                &sql.pool_marks_write,
                &[&name, &mark_at, &mark_value, &prev_at, &prev_value],
            )
            .await
            .map_err(|e| self.pg(&e))?;
            tx.commit().await.map_err(|e| self.pg(&e))
        })
        .await
    }

    async fn read_pool_marks(&self, name: &str) -> Result<RateMarks> {
        with_conn(self, async |c| {
            let r = c
                .query_opt(&self.sql.pool_marks_read, &[&name])
                .await
                .map_err(|e| self.pg(&e))?
                .ok_or_else(|| Error::not_found("pool", name))?;
            Ok(marks_from(&r))
        })
        .await
    }

    async fn pool_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.names_near(
            &self.sql.pool_near_before,
            &self.sql.pool_near_after,
            name,
            limit,
        )
        .await
    }

    async fn pool_totals_with_prefix(&self, prefix: &str) -> Result<PoolTotals> {
        let what = "count(*), coalesce(sum(size), 0)::bigint";
        let row = self.with_prefix(what, "pools", prefix).await?;
        let (pools, members): (i64, i64) = (
            row.try_get(0).map_err(|e| self.pg(&e))?,
            row.try_get(1).map_err(|e| self.pg(&e))?,
        );
        Ok(PoolTotals {
            pools: u64::try_from(pools).unwrap_or(0),
            members: u64::try_from(members).unwrap_or(0),
        })
    }

    async fn list_pools(&self) -> Result<Vec<PoolRow>> {
        with_conn(self, async |c| {
            let rows = c
                .query(&self.sql.pool_list, &[])
                .await
                .map_err(|e| self.pg(&e))?;
            rows.iter().map(|r| self.pool_row(r)).collect()
        })
        .await
    }

    async fn drop_pool(&self, name: &str) -> Result<()> {
        let out = self.in_tx(async |tx| drop_pool_in(tx, name).await).await;
        self.pool_sizes.forget(name);
        out
    }
}

/// The marks in the four columns of a `pool_marks` row (NULL: no mark).
fn marks_from(r: &tokio_postgres::Row) -> RateMarks {
    let mark = |i: usize| {
        r.get::<_, Option<i64>>(i)
            .zip(r.get::<_, Option<i64>>(i + 1))
            .map(|(at_ms, reserved)| RateMark { at_ms, reserved })
    };
    RateMarks {
        mark: mark(0),
        prev_mark: mark(2),
    }
}

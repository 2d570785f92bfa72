//! PostgreSQL: the [`PoolStore`] half of the contract.

use super::*;

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
        })
    }

    /// Moves every member of pool `name` forward by `rounds` and records
    /// the store's generation, in one transaction, if the pool is still in
    /// generation `from` (any, when `None`): of racing fences of one stale
    /// pool, one moves it.
    async fn fence_from(&self, name: &str, rounds: i64, from: Option<&str>) -> Result<()> {
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let tx = c.transaction().await.map_err(bad)?;
            let Some(r) = tx
                .query_opt(&self.sql.pool_fence_claim, &[&name, &from])
                .await
                .map_err(bad)?
            else {
                if from.is_none() {
                    return Err(Error::not_found("pool", name));
                }
                // Another caller fenced it (or it is gone: the swap says so).
                return Ok(());
            };
            let size: i64 = r.try_get(0).map_err(bad)?;
            let residue = keysmith_core::driver::stored_residue(
                name,
                r.try_get(1).map_err(bad)?,
                r.try_get(2).map_err(bad)?,
            )?;
            let top: Option<i64> = tx
                .query_one(&self.sql.pool_fence_top, &[&name])
                .await
                .map_err(bad)?
                .try_get(0)
                .map_err(bad)?;
            if let Some(top) = top
                && keysmith_core::driver::fenced_member(top, rounds, size, residue.as_ref())
                    .is_none()
            {
                return Err(keysmith_core::driver::fence_exhausts(
                    name,
                    size,
                    residue.as_ref(),
                ));
            }
            tx.execute(&self.sql.pool_fence_move, &[&name, &(rounds * size)])
                .await
                .map_err(bad)?;
            tx.commit().await.map_err(bad)
        })
        .await
    }
}

#[async_trait]
impl PoolStore for PostgresStore {
    async fn create_pool(&self, spec: &PoolSpec) -> Result<PoolRow> {
        let name = spec.name.as_str();
        let (increment, offset) = (
            spec.residue.map(|r| r.increment),
            spec.residue.map(|r| r.offset),
        );
        let checked = |start: i64, size: i64| match (start >= 0, size >= 0, start.checked_add(size))
        {
            (true, true, Some(_)) => Ok(start + size - 1),
            _ => Err(Error::invalid(format!(
                "pool {name:?}: start ({start}) and size ({size}) must be 0 or more, and start + size must fit in a 64-bit integer"
            ))),
        };
        checked(spec.start, spec.size)?;
        let mut row = with_conn(self, async |c| {
            let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
            let spec = self
                .lock_tombstone(&tx, POOL_KIND, name)
                .await?
                .raise_pool(spec)?;
            let (start, size) = (spec.start, spec.size);
            let last = checked(start, size)?;
            match tx
                .execute(
                    &self.sql.pool_create,
                    &[&name, &start, &size, &last, &increment, &offset],
                )
                .await
            {
                Ok(_) => {
                    tx.commit().await.map_err(|e| self.pg(&e))?;
                    Ok(PoolRow {
                        name: name.to_owned(),
                        start,
                        size,
                        generation: None,
                        residue: spec.residue,
                    })
                }
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    Err(Error::AlreadyExists {
                        kind: "pool",
                        name: name.to_owned(),
                    })
                }
                Err(e) => Err(self.pg(&e)),
            }
        })
        .await?;
        // Recorded by the statement; read back for the caller.
        row.generation = self.generation().await.ok();
        Ok(row)
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
            let st = c
                .prepare_cached(&self.sql.pool_sample)
                .await
                .map_err(|e| self.pg(&e))?;
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            // The size this store saw last, or a read of it; then as long
            // as the statement reports another size (the pool was dropped
            // and created again), draw again from that one.
            let mut size = match self.pool_sizes.get(name) {
                Some(size) => size,
                None => match c
                    .query_opt(&self.sql.pool_read, &[&name])
                    .await
                    .map_err(bad)?
                {
                    Some(r) => self.pool_row(&r)?.size,
                    None => return Err(Error::not_found("pool", name)),
                },
            };
            for _ in 0..MAX_RERUNS {
                let slots = keysmith_core::driver::sample_slots(size, k);
                let r = c.query_one(&st, &[&name, &slots]).await.map_err(bad)?;
                let Some(seen) = r.try_get::<_, Option<i64>>(0).map_err(bad)? else {
                    self.pool_sizes.forget(name);
                    return Err(Error::not_found("pool", name));
                };
                self.pool_sizes.remember(name, seen);
                if seen != size {
                    size = seen;
                    continue;
                }
                let mut picked: Vec<i64> = r.try_get(1).map_err(bad)?;
                if picked.len() != slots.len() {
                    return Err(Error::Corrupt(format!(
                        "PostgreSQL at {}, schema {:?}: pool {name:?} of size {size} has {} of the {} slots drawn; the keysmith tables were changed outside keysmith: drop the pool and create it again",
                        self.target,
                        self.schema,
                        picked.len(),
                        slots.len()
                    )));
                }
                // The index returns slot order; callers get random order.
                picked.shuffle(&mut rand::rng());
                return Ok(picked);
            }
            Err(Error::Contention {
                name: name.to_owned(),
                attempts: MAX_RERUNS,
            })
        })
        .await
    }

    async fn swap_member(&self, name: &str, take: i64, put: i64) -> Result<bool> {
        let (swapped, recorded, current) = with_conn(self, async |c| {
            let st = c
                .prepare_cached(&self.sql.pool_swap)
                .await
                .map_err(|e| self.pg(&e))?;
            let r = match c.query_one(&st, &[&name, &take, &put]).await {
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
            let swapped: i64 = r.try_get(1).map_err(bad)?;
            let recorded: Option<String> = r.try_get(2).map_err(bad)?;
            let current: String = r.try_get(3).map_err(bad)?;
            if !exists {
                return Err(Error::not_found("pool", name));
            }
            Ok((swapped == 1, recorded, current))
        })
        .await?;
        match keysmith_core::driver::pool_generation(recorded.as_deref(), &current) {
            keysmith_core::driver::PoolGeneration::Current => Ok(swapped),
            keysmith_core::driver::PoolGeneration::Record => {
                // A pool from before generations: record this one (moving
                // nothing) and keep the swap.
                self.fence_from(name, 0, None).await?;
                Ok(swapped)
            }
            keysmith_core::driver::PoolGeneration::Fence => {
                let size = self
                    .read_pool(name)
                    .await?
                    .ok_or_else(|| Error::not_found("pool", name))?
                    .size;
                let rounds = keysmith_core::driver::pool_fence_rounds(size);
                self.fence_from(name, rounds, recorded.as_deref()).await?;
                Ok(false)
            }
        }
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
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let tx = c.transaction().await.map_err(bad)?;
            let before = self.lock_tombstone(&tx, POOL_KIND, name).await?;
            let Some(r) = tx
                .query_opt(&format!("{} FOR UPDATE", self.sql.pool_read), &[&name])
                .await
                .map_err(bad)?
            else {
                self.pool_sizes.forget(name);
                return Err(Error::not_found("pool", name));
            };
            let row = self.pool_row(&r)?;
            let highest: Option<i64> = tx
                .query_one(
                    &format!(
                        "SELECT max(value) FROM {}.pool_members WHERE pool = $1",
                        quote_ident(&self.schema)
                    ),
                    &[&name],
                )
                .await
                .map_err(bad)?
                .try_get(0)
                .map_err(bad)?;
            let generation: String = tx
                .query_one(&self.sql.generation, &[])
                .await
                .map_err(bad)?
                .try_get(0)
                .map_err(bad)?;
            let t = before.after_pool_drop(&row, highest, &generation);
            self.raise_tombstone(&tx, POOL_KIND, name, t).await?;
            tx.execute(&self.sql.pool_drop, &[&name])
                .await
                .map_err(bad)?;
            tx.commit().await.map_err(bad)?;
            self.pool_sizes.forget(name);
            Ok(())
        })
        .await
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

//! MySQL: the [`PoolStore`] half of the contract.
//!
//! Members live one per slot in `keysmith_pool_members` (primary key
//! `(pool, slot)`, unique `(pool, value)`). A sample is one statement
//! reading the drawn slots and the pool's size together; a swap is one
//! `UPDATE ... WHERE value = take`: InnoDB locks the member's row, so of two
//! swaps of the same member the second re-reads the row after the first
//! commits, finds `take` gone and changes nothing.

use mysql_async::Transaction;

use super::*;
use keysmith_core::driver::{
    FenceClaim, PoolReads, PoolSwaps, PoolTotals, PoolTx, Residue, SwapSeen, create_pool_in,
    drop_pool_in, fence_pool_in, sample_members_on, swap_member_with,
};

/// `(SELECT 0 AS d UNION ALL ... SELECT 9)`: one decimal digit, to make
/// slot numbers `0..size` in one `INSERT ... SELECT` (MySQL has no
/// `generate_series`, and recursive CTEs are capped at 1000 rows there).
const DIGITS: &str = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
     UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
     UNION ALL SELECT 8 UNION ALL SELECT 9)";

/// The `INSERT ... SELECT` of a pool's members: slots `0..size` as the
/// cross join of as many digit tables as `size - 1` has digits.
fn members_insert(size: i64) -> String {
    let digits = (size.max(1) - 1).to_string().len();
    let tables: Vec<String> = (0..digits).map(|i| format!("{DIGITS} d{i}")).collect();
    let slot: Vec<String> = (0..digits)
        .map(|i| format!("d{i}.d * {}", 10_i64.pow(i as u32)))
        .collect();
    format!(
        "INSERT INTO keysmith_pool_members (pool, slot, value)
         SELECT ?, g.s, ? + g.s FROM (SELECT {} AS s FROM {}) g WHERE g.s < ?",
        slot.join(" + "),
        tables.join(" CROSS JOIN ")
    )
}

/// The columns of a pool, in the order `pool_row` reads them.
const POOL_COLUMNS: &str =
    "name, start_value, size, generation, class_increment, class_offset, incarnation";

impl MysqlStore {
    /// A pool's row from [`POOL_COLUMNS`].
    fn pool_row(&self, r: &Row) -> Result<PoolRow> {
        let name: String = self.col(r, 0)?;
        let residue =
            keysmith_core::driver::stored_residue(&name, self.col(r, 4)?, self.col(r, 5)?)?;
        let incarnation: i64 = self.col(r, 6)?;
        let incarnation = u64::try_from(incarnation)
            .map_err(|_| self.corrupt(&format!("pool {name:?} has incarnation {incarnation}")))?;
        Ok(PoolRow {
            name,
            start: self.col(r, 1)?,
            size: self.col(r, 2)?,
            generation: self.col(r, 3)?,
            residue,
            incarnation,
        })
    }

    /// The pool's size and residue class in `tx`, or `None`.
    async fn pool_shape(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
    ) -> Result<Option<(i64, Option<Residue>)>> {
        let shape: Option<(i64, Option<i64>, Option<i64>)> = tx
            .exec_first(
                "SELECT size, class_increment, class_offset FROM keysmith_pools WHERE name = ?",
                (name,),
            )
            .await
            .map_err(|e| self.my(&e))?;
        shape
            .map(|(size, k, r)| Ok((size, keysmith_core::driver::stored_residue(name, k, r)?)))
            .transpose()
    }

    async fn pool_exists(&self, c: &mut Conn, name: &str) -> Result<bool> {
        let r: Option<i64> = c
            .exec_first("SELECT 1 FROM keysmith_pools WHERE name = ?", (name,))
            .await
            .map_err(|e| self.my(&e))?;
        Ok(r.is_some())
    }
}

/// A connection of this store: the statements of a sample.
struct PoolReadsOf<'a> {
    store: &'a MysqlStore,
    c: &'a mut Conn,
}

#[async_trait]
impl PoolReads for PoolReadsOf<'_> {
    async fn pool_size(&mut self, name: &str) -> Result<Option<i64>> {
        self.c
            .exec_first("SELECT size FROM keysmith_pools WHERE name = ?", (name,))
            .await
            .map_err(|e| self.store.my(&e))
    }

    async fn sample(&mut self, name: &str, slots: &[i64]) -> Result<Option<(i64, Vec<i64>)>> {
        if slots.is_empty() {
            // `IN ()` is no SQL: the size alone.
            return Ok(self.pool_size(name).await?.map(|size| (size, Vec::new())));
        }
        // One statement: the pool's size, and the members of the drawn
        // slots (by the primary key), in one snapshot.
        let marks = vec!["?"; slots.len()].join(", ");
        let sql = format!(
            "SELECT p.size, m.value FROM keysmith_pools p
             LEFT JOIN keysmith_pool_members m ON m.pool = p.name AND m.slot IN ({marks})
             WHERE p.name = ?"
        );
        let mut params: Vec<mysql_async::Value> = slots.iter().map(|s| (*s).into()).collect();
        params.push(name.into());
        let rows: Vec<(i64, Option<i64>)> = self
            .c
            .exec(sql, params)
            .await
            .map_err(|e| self.store.my(&e))?;
        Ok(rows
            .first()
            .map(|&(size, _)| (size, rows.iter().filter_map(|(_, v)| *v).collect())))
    }

    fn corrupt(&self, what: &str) -> Error {
        self.store.corrupt(what)
    }
}

#[async_trait]
impl PoolTx for InTx<'_, '_> {
    /// Both kinds' tombstones of `name`, locked: see
    /// [`MysqlStore::lock_tombstone`].
    async fn lock_tombstone(&mut self, name: &str) -> Result<Tombstone> {
        self.store.lock_tombstone(self.tx, name).await
    }

    async fn raise_tombstone(&mut self, name: &str, t: Tombstone) -> Result<()> {
        self.store
            .raise_tombstone(self.tx, POOL_KIND, name, t)
            .await
    }

    async fn insert_pool(&mut self, spec: &PoolSpec, incarnation: u64) -> Result<()> {
        let (store, tx) = (self.store, &mut *self.tx);
        let incarnation = store.version_param(&spec.name, incarnation)?;
        let (name, start, size) = (spec.name.as_str(), spec.start, spec.size);
        let (increment, offset) = (
            spec.residue.map(|r| r.increment),
            spec.residue.map(|r| r.offset),
        );
        match tx
            .exec_drop(
                format!(
                    "INSERT INTO keysmith_pools
                         (name, start_value, size, generation, class_increment, class_offset,
                          incarnation)
                     VALUES (?, ?, ?, {}, ?, ?, ?)",
                    store.generation_expr()
                ),
                (name, start, size, increment, offset, incarnation),
            )
            .await
        {
            Ok(()) => {}
            Err(e) if code(&e) == Some(ER_DUP_ENTRY) => {
                return Err(Error::AlreadyExists {
                    kind: "pool",
                    name: name.to_owned(),
                });
            }
            Err(e) => return Err(store.my(&e)),
        }
        tx.exec_drop(members_insert(size), (name, start, size))
            .await
            .map_err(|e| store.my(&e))?;
        if tx.affected_rows() != size as u64 {
            return Err(store.corrupt(&format!(
                "pool {name:?}: {} of {size} members were written",
                tx.affected_rows()
            )));
        }
        Ok(())
    }

    async fn generation(&mut self) -> Result<String> {
        self.tx
            .query_first(format!("SELECT {}", self.store.generation_expr()))
            .await
            .map_err(|e| self.store.my(&e))?
            .ok_or_else(|| self.store.corrupt("the server named no generation"))
    }

    async fn lock_pool(&mut self, name: &str) -> Result<Option<PoolRow>> {
        let r: Option<Row> = self
            .tx
            .exec_first(
                format!("SELECT {POOL_COLUMNS} FROM keysmith_pools WHERE name = ? FOR UPDATE"),
                (name,),
            )
            .await
            .map_err(|e| self.store.my(&e))?;
        r.map(|r| self.store.pool_row(&r)).transpose()
    }

    async fn top_member(&mut self, name: &str) -> Result<Option<i64>> {
        let top: Option<Option<i64>> = self
            .tx
            .exec_first(
                "SELECT MAX(value) FROM keysmith_pool_members WHERE pool = ?",
                (name,),
            )
            .await
            .map_err(|e| self.store.my(&e))?;
        Ok(top.flatten())
    }

    async fn delete_pool(&mut self, name: &str) -> Result<()> {
        self.tx
            .exec_drop("DELETE FROM keysmith_pools WHERE name = ?", (name,))
            .await
            .map_err(|e| self.store.my(&e))
    }

    async fn claim_fence(&mut self, name: &str, from: Option<&str>) -> Result<FenceClaim> {
        let (store, tx) = (self.store, &mut *self.tx);
        tx.exec_drop(
            format!(
                "UPDATE keysmith_pools SET generation = {}
                 WHERE name = ? AND (? IS NULL OR generation <=> ?)",
                store.generation_expr()
            ),
            (name, from, from),
        )
        .await
        .map_err(|e| store.my(&e))?;
        let changed = tx.affected_rows() != 0;
        Ok(match (store.pool_shape(tx, name).await?, from) {
            (None, _) => FenceClaim::Missing,
            // Fenced by another caller already.
            (Some(_), Some(_)) if !changed => FenceClaim::Fenced,
            // Claimed, or (MySQL counts changed rows only) recorded already
            // in this generation: move anyway.
            (Some((size, residue)), _) => FenceClaim::Claimed { size, residue },
        })
    }

    async fn move_members(&mut self, name: &str, by: i64) -> Result<()> {
        self.tx
            .exec_drop(
                "UPDATE keysmith_pool_members SET value = value + ? WHERE pool = ?",
                (by, name),
            )
            .await
            .map_err(|e| self.store.my(&e))
    }
}

#[async_trait]
impl PoolSwaps for MysqlStore {
    async fn swap_once(
        &self,
        name: &str,
        incarnation: u64,
        take: i64,
        put: i64,
    ) -> Result<SwapSeen> {
        let life = i64::try_from(incarnation).map_err(|_| {
            Error::Corrupt(format!(
                "pool {name:?}: incarnation {incarnation} overflows"
            ))
        })?;
        with_conn(self, async |c| {
            // Only in the pool's generation (or a pool from before
            // generations); otherwise the caller acts on what comes back.
            match c
                .exec_drop(
                    format!(
                        "UPDATE keysmith_pool_members m JOIN keysmith_pools p ON p.name = m.pool
                             SET m.value = ?
                             WHERE m.pool = ? AND m.value = ?
                               AND (p.generation IS NULL OR p.generation = {})
                               AND (? = 0 OR p.incarnation IN (0, ?))",
                        self.generation_expr()
                    ),
                    (put, name, take, life, life),
                )
                .await
            {
                Ok(()) => {}
                Err(e) if code(&e) == Some(ER_DUP_ENTRY) => {
                    return Err(Error::Corrupt(format!(
                        "pool {name:?} already holds {put}, which it should not yet"
                    )));
                }
                Err(e) => return Err(self.my(&e)),
            }
            if c.affected_rows() == 1 {
                return Ok(SwapSeen {
                    swapped: true,
                    generations: None,
                    size: None,
                });
            }
            let state: Option<(Option<String>, String, i64, i64)> = c
                .exec_first(
                    format!(
                        "SELECT generation, {}, size, incarnation FROM keysmith_pools WHERE name = ?",
                        self.generation_expr()
                    ),
                    (name,),
                )
                .await
                .map_err(|e| self.my(&e))?;
            let (recorded, current, size, theirs) =
                state.ok_or_else(|| Error::not_found("pool", name))?;
            let theirs = u64::try_from(theirs).unwrap_or(0);
            if incarnation != 0 && theirs != 0 && theirs != incarnation {
                return Err(Error::Dropped {
                    kind: "pool",
                    name: name.to_owned(),
                    held: "handle",
                });
            }
            Ok(SwapSeen {
                swapped: false,
                generations: Some((recorded, current)),
                size: Some(size),
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
impl PoolStore for MysqlStore {
    async fn create_pool(&self, spec: &PoolSpec) -> Result<PoolRow> {
        spec.validate_stored()?;
        self.in_tx(async |tx| create_pool_in(tx, spec).await).await
    }

    async fn read_pool(&self, name: &str) -> Result<Option<PoolRow>> {
        with_conn(self, async |c| {
            let r: Option<Row> = c
                .exec_first(
                    format!("SELECT {POOL_COLUMNS} FROM keysmith_pools WHERE name = ?"),
                    (name,),
                )
                .await
                .map_err(|e| self.my(&e))?;
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
            let values: Vec<i64> = c
                .exec(
                    "SELECT value FROM keysmith_pool_members WHERE pool = ? ORDER BY value",
                    (name,),
                )
                .await
                .map_err(|e| self.my(&e))?;
            if values.is_empty() && !self.pool_exists(c, name).await? {
                return Err(Error::not_found("pool", name));
            }
            Ok(values)
        })
        .await
    }

    async fn record_pool_mark(&self, name: &str, now_ms: i64, taken: i64) -> Result<()> {
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            match tx
                .exec_drop(
                    "INSERT INTO keysmith_pool_marks (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name",
                    (name,),
                )
                .await
            {
                Err(e) if code(&e) == Some(ER_NO_REFERENCED_ROW) => {
                    return Err(Error::not_found("pool", name));
                }
                other => other.map_err(bad)?,
            }
            let r: Row = tx
                .exec_first(
                    "SELECT mark_at, mark_value, prev_at, prev_value FROM keysmith_pool_marks
                     WHERE name = ? FOR UPDATE",
                    (name,),
                )
                .await
                .map_err(bad)?
                .ok_or_else(|| Error::not_found("pool", name))?;
            let m = self.marks_from(&r)?.advance(now_ms, taken);
            let at = |m: Option<RateMark>| (m.map(|m| m.at_ms), m.map(|m| m.reserved));
            let ((mark_at, mark_value), (prev_at, prev_value)) = (at(m.mark), at(m.prev_mark));
            tx.exec_drop(
                "UPDATE keysmith_pool_marks SET mark_at = ?, mark_value = ?, prev_at = ?, prev_value = ?
                 WHERE name = ?",
                (mark_at, mark_value, prev_at, prev_value, name),
            )
            .await
            .map_err(bad)?;
            tx.commit().await.map_err(bad)
        })
        .await
    }

    async fn read_pool_marks(&self, name: &str) -> Result<RateMarks> {
        with_conn(self, async |c| {
            let r: Row = c
                .exec_first(
                    "SELECT m.mark_at, m.mark_value, m.prev_at, m.prev_value
                     FROM keysmith_pools p LEFT JOIN keysmith_pool_marks m ON m.name = p.name
                     WHERE p.name = ?",
                    (name,),
                )
                .await
                .map_err(|e| self.my(&e))?
                .ok_or_else(|| Error::not_found("pool", name))?;
            self.marks_from(&r)
        })
        .await
    }

    async fn pool_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.names_near("keysmith_pools", name, limit).await
    }

    async fn pool_totals_with_prefix(&self, prefix: &str) -> Result<PoolTotals> {
        let what = "COUNT(*), CAST(COALESCE(SUM(size), 0) AS SIGNED)";
        let row = self.with_prefix(what, "keysmith_pools", prefix).await?;
        let (pools, members): (i64, i64) = (self.col(&row, 0)?, self.col(&row, 1)?);
        Ok(PoolTotals {
            pools: u64::try_from(pools).unwrap_or(0),
            members: u64::try_from(members).unwrap_or(0),
        })
    }

    async fn list_pools(&self) -> Result<Vec<PoolRow>> {
        with_conn(self, async |c| {
            let rows: Vec<Row> = c
                .query(format!(
                    "SELECT {POOL_COLUMNS} FROM keysmith_pools ORDER BY name"
                ))
                .await
                .map_err(|e| self.my(&e))?;
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

impl MysqlStore {
    /// The marks in the four columns of a `keysmith_pool_marks` row (NULL: no mark).
    fn marks_from(&self, r: &Row) -> Result<RateMarks> {
        let mark = |i: usize| -> Result<Option<RateMark>> {
            Ok(self
                .col::<Option<i64>>(r, i)?
                .zip(self.col::<Option<i64>>(r, i + 1)?)
                .map(|(at_ms, reserved)| RateMark { at_ms, reserved }))
        };
        Ok(RateMarks {
            mark: mark(0)?,
            prev_mark: mark(2)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_inserts_use_as_many_digits_as_the_size_needs() {
        assert_eq!(members_insert(1).matches("CROSS JOIN").count(), 0);
        assert_eq!(members_insert(10).matches("CROSS JOIN").count(), 0);
        assert_eq!(members_insert(11).matches("CROSS JOIN").count(), 1);
        assert_eq!(members_insert(1_000_000).matches("CROSS JOIN").count(), 5);
    }
}

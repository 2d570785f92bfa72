//! SQLite: the [`PoolStore`] half of the contract.

use super::*;

#[async_trait]
impl PoolStore for SqliteStore {
    async fn create_pool(&self, spec: &PoolSpec) -> Result<PoolRow> {
        let (spec, generation) = (spec.clone(), self.generation.to_string());
        self.write(move |tx| {
            let dropped = read_tombstone(tx, &spec.name)?;
            let spec = dropped.raise_pool(&spec)?;
            let incarnation = dropped.incarnation();
            let (name, start, size, residue) = (spec.name, spec.start, spec.size, spec.residue);
            let inserted = tx
                .execute(
                    "INSERT INTO keysmith_pools (name, start, size, generation, class_increment, class_offset,
                         incarnation)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (name) DO NOTHING",
                    params![
                        name,
                        start,
                        size,
                        generation,
                        residue.map(|r| r.increment),
                        residue.map(|r| r.offset),
                        version_param(incarnation)
                    ],
                )
                .map_err(db_err)?;
            if inserted == 0 {
                return Err(Error::AlreadyExists {
                    kind: "pool",
                    name: name.clone(),
                });
            }
            let mut ins = tx
                .prepare_cached(
                    "INSERT INTO keysmith_pool_members (pool, slot, value) VALUES (?1, ?2, ?3)",
                )
                .map_err(db_err)?;
            for slot in 0..size {
                ins.execute(params![name, slot, start + slot])
                    .map_err(db_err)?;
            }
            Ok(PoolRow {
                name,
                start,
                size,
                generation: Some(generation),
                residue,
                incarnation,
            })
        })
        .await
    }

    async fn read_pool(&self, name: &str) -> Result<Option<PoolRow>> {
        let name = name.to_owned();
        self.run(move |conn| match require_pool(conn, &name) {
            Ok(p) => Ok(Some(p)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        })
        .await
    }

    async fn sample_members(&self, name: &str, k: usize) -> Result<Vec<i64>> {
        let name = name.to_owned();
        self.run(move |conn| {
            let pool = require_pool(conn, &name)?;
            let slots = keysmith_core::driver::sample_slots(pool.size, k);
            let mut s = conn
                .prepare_cached(
                    "SELECT value FROM keysmith_pool_members
                     WHERE pool = ?1 AND slot IN (SELECT value FROM json_each(?2))",
                )
                .map_err(db_err)?;
            let slots = serde_json::to_string(&slots).map_err(|e| Error::Corrupt(e.to_string()))?;
            let out = s
                .query_map(params![name, slots], |r| r.get(0))
                .and_then(|it| it.collect::<rusqlite::Result<Vec<i64>>>())
                .map_err(db_err)?;
            Ok(out)
        })
        .await
    }

    async fn swap_member(&self, name: &str, take: i64, put: i64) -> Result<bool> {
        self.swap_member_in(name, 0, take, put).await
    }

    async fn swap_member_in(
        &self,
        name: &str,
        incarnation: u64,
        take: i64,
        put: i64,
    ) -> Result<bool> {
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let pool = require_pool(tx, &name)?;
            pool.check_life(incarnation)?;
            match keysmith_core::driver::pool_generation(pool.generation.as_deref(), &generation) {
                keysmith_core::driver::PoolGeneration::Current => {}
                keysmith_core::driver::PoolGeneration::Record => {
                    record_pool_generation(tx, &name, &generation)?;
                }
                keysmith_core::driver::PoolGeneration::Fence => {
                    let rounds = keysmith_core::driver::pool_fence_rounds(pool.size);
                    fence_members(tx, &pool, rounds, &generation)?;
                    return Ok(false);
                }
            }
            // The member keeps its slot: put = take + size (see the contract).
            let swapped = tx
                .prepare_cached(
                    "UPDATE keysmith_pool_members SET value = ?3 WHERE pool = ?1 AND value = ?2",
                )
                .and_then(|mut s| s.execute(params![name, take, put]))
                .map_err(|e| match e.sqlite_error_code() {
                    Some(ErrorCode::ConstraintViolation) => Error::Corrupt(format!(
                        "pool {name:?} already holds {put}, which it should not yet"
                    )),
                    _ => db_err(e),
                })?;
            Ok(swapped == 1)
        })
        .await
    }

    async fn list_members(&self, name: &str) -> Result<Vec<i64>> {
        let name = name.to_owned();
        self.run(move |conn| {
            require_pool(conn, &name)?;
            let mut s = conn
                .prepare_cached(
                    "SELECT value FROM keysmith_pool_members WHERE pool = ?1 ORDER BY value",
                )
                .map_err(db_err)?;
            let out = s
                .query_map([&name], |r| r.get(0))
                .and_then(|it| it.collect::<rusqlite::Result<Vec<i64>>>())
                .map_err(db_err)?;
            Ok(out)
        })
        .await
    }

    async fn record_pool_mark(&self, name: &str, now_ms: i64, taken: i64) -> Result<()> {
        let name = name.to_owned();
        self.write(move |tx| {
            require_pool(tx, &name)?;
            let m = read_pool_marks_on(tx, &name)?.advance(now_ms, taken);
            let at = |m: Option<RateMark>| (m.map(|m| m.at_ms), m.map(|m| m.reserved));
            let ((mark_at, mark_value), (prev_at, prev_value)) = (at(m.mark), at(m.prev_mark));
            tx.execute(
                "INSERT OR REPLACE INTO keysmith_pool_marks (name, mark_at, mark_value, prev_at, prev_value)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![name, mark_at, mark_value, prev_at, prev_value],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn read_pool_marks(&self, name: &str) -> Result<RateMarks> {
        let name = name.to_owned();
        self.run(move |conn| {
            require_pool(conn, &name)?;
            read_pool_marks_on(conn, &name)
        })
        .await
    }

    async fn fence_pool(&self, name: &str, rounds: i64) -> Result<()> {
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let pool = require_pool(tx, &name)?;
            fence_members(tx, &pool, rounds, &generation)
        })
        .await
    }

    async fn pool_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        let name = name.to_owned();
        self.run(move |conn| super::sequences::names_near(conn, "keysmith_pools", &name, limit))
            .await
    }

    async fn pool_totals_with_prefix(&self, prefix: &str) -> Result<PoolTotals> {
        let range = PrefixRange::of(prefix);
        self.run(move |conn| {
            let what = "COUNT(*), COALESCE(SUM(size), 0)";
            let (pools, members): (i64, i64) =
                super::sequences::with_prefix(conn, what, "keysmith_pools", &range, |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
            Ok(PoolTotals {
                pools: u64::try_from(pools).unwrap_or(0),
                members: u64::try_from(members).unwrap_or(0),
            })
        })
        .await
    }

    async fn list_pools(&self) -> Result<Vec<PoolRow>> {
        self.run(|conn| {
            let mut s = conn
                .prepare_cached(&format!(
                    "SELECT {POOL_COLUMNS} FROM keysmith_pools ORDER BY name"
                ))
                .map_err(db_err)?;
            let out = s
                .query_map([], pool_row)
                .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(db_err)?;
            out.into_iter().collect()
        })
        .await
    }

    async fn drop_pool(&self, name: &str) -> Result<()> {
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let row = require_pool(tx, &name)?;
            let highest: Option<i64> = tx
                .query_row(
                    "SELECT max(value) FROM keysmith_pool_members WHERE pool = ?1",
                    [&name],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            let t = read_tombstone(tx, &name)?.after_pool_drop(&row, highest, &generation);
            write_tombstone(tx, POOL_KIND, &name, t)?;
            tx.execute("DELETE FROM keysmith_pools WHERE name = ?1", [&name])
                .map_err(db_err)?;
            tx.execute("DELETE FROM keysmith_pool_marks WHERE name = ?1", [&name])
                .map_err(db_err)?;
            tx.execute("DELETE FROM keysmith_pool_members WHERE pool = ?1", [&name])
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }
}

/// The columns [`pool_row`] reads.
const POOL_COLUMNS: &str =
    "name, start, size, generation, class_increment, class_offset, incarnation";

/// A pool's row from [`POOL_COLUMNS`]; the inner error for a residue class
/// keysmith does not write.
fn pool_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<PoolRow>> {
    let name: String = r.get(0)?;
    let (start, size, generation) = (r.get(1)?, r.get(2)?, r.get(3)?);
    let residue = keysmith_core::driver::stored_residue(&name, r.get(4)?, r.get(5)?);
    let incarnation = r.get::<_, i64>(6)?.max(0) as u64;
    Ok(residue.map(|residue| PoolRow {
        name,
        start,
        size,
        generation,
        residue,
        incarnation,
    }))
}

fn require_pool(conn: &Connection, name: &str) -> Result<PoolRow> {
    conn.prepare_cached(&format!(
        "SELECT {POOL_COLUMNS} FROM keysmith_pools WHERE name = ?1"
    ))
    .and_then(|mut s| s.query_row([name], pool_row).optional())
    .map_err(db_err)?
    .transpose()?
    .ok_or_else(|| Error::not_found("pool", name))
}

fn record_pool_generation(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    generation: &str,
) -> Result<()> {
    tx.execute(
        "UPDATE keysmith_pools SET generation = ?2 WHERE name = ?1",
        params![name, generation],
    )
    .map_err(db_err)?;
    Ok(())
}

/// Every member of `pool` moved forward by `rounds` (each keeps its slot:
/// no two can collide) and the generation recorded, or nothing when the
/// largest member would not fit.
fn fence_members(
    tx: &rusqlite::Transaction<'_>,
    pool: &PoolRow,
    rounds: i64,
    generation: &str,
) -> Result<()> {
    let top: Option<i64> = tx
        .query_row(
            "SELECT max(value) FROM keysmith_pool_members WHERE pool = ?1",
            [&pool.name],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    if let Some(top) = top
        && keysmith_core::driver::fenced_member(top, rounds, pool.size, pool.residue.as_ref())
            .is_none()
    {
        return Err(keysmith_core::driver::fence_exhausts(
            &pool.name,
            pool.size,
            pool.residue.as_ref(),
        ));
    }
    tx.execute(
        "UPDATE keysmith_pool_members SET value = value + ?2 WHERE pool = ?1",
        params![pool.name, rounds * pool.size],
    )
    .map_err(db_err)?;
    record_pool_generation(tx, &pool.name, generation)
}

fn read_pool_marks_on(conn: &Connection, name: &str) -> Result<RateMarks> {
    let mark = |at: Option<i64>, value: Option<i64>| {
        at.zip(value)
            .map(|(at_ms, reserved)| RateMark { at_ms, reserved })
    };
    conn.query_row(
        "SELECT mark_at, mark_value, prev_at, prev_value FROM keysmith_pool_marks WHERE name = ?1",
        [name],
        |r| {
            Ok(RateMarks {
                mark: mark(r.get(0)?, r.get(1)?),
                prev_mark: mark(r.get(2)?, r.get(3)?),
            })
        },
    )
    .optional()
    .map(Option::unwrap_or_default)
    .map_err(db_err)
}

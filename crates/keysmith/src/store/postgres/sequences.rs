//! PostgreSQL: the [`SequenceStore`] half of the contract.

use super::*;

impl PostgresStore {
    /// Runs a [`conditional_update`](super::conditional_update) statement:
    /// `$1` the name, then `values`, then the expected version.
    async fn write_if_version(
        &self,
        sql: &str,
        name: &str,
        values: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        expected: u64,
    ) -> Result<Put> {
        let c = self.client().await?;
        let out = self
            .deadline(async {
                let Ok(expected_i) = i64::try_from(expected) else {
                    // No stored version is that large: it cannot match.
                    return match self.read_on(&c, name).await? {
                        Some(row) => Ok(Put::Conflict(row)),
                        None => Err(Error::not_found("sequence", name)),
                    };
                };
                let st = c.prepare_cached(sql).await.map_err(|e| self.pg(&e))?;
                let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&name];
                params.extend_from_slice(values);
                params.push(&expected_i);
                for _ in 0..MAX_RERUNS {
                    let rows = c.query(&st, &params).await.map_err(|e| self.pg(&e))?;
                    let Some(r) = rows.first() else {
                        return Err(Error::not_found("sequence", name));
                    };
                    let done: bool = r.try_get(0).map_err(|e| self.pg(&e))?;
                    let row = self.row(r, 1)?;
                    if done {
                        return Ok(Put::Done(row));
                    }
                    if row.version != expected {
                        return Ok(Put::Conflict(row));
                    }
                    // The row we were shown still has the version we expected,
                    // so the write should have matched: run it again.
                }
                Err(Error::Contention {
                    name: name.to_owned(),
                    attempts: MAX_RERUNS,
                })
            })
            .await;
        self.settle(c, out)
    }

    pub(super) fn row(&self, r: &tokio_postgres::Row, at: usize) -> Result<SequenceRow> {
        let bad = |e: tokio_postgres::Error| self.pg(&e);
        let version: i64 = r.try_get(at + 5).map_err(bad)?;
        Ok(SequenceRow {
            name: r.try_get(at).map_err(bad)?,
            next: r.try_get(at + 1).map_err(bad)?,
            start: r.try_get(at + 2).map_err(bad)?,
            max: r.try_get(at + 3).map_err(bad)?,
            block: r.try_get(at + 4).map_err(bad)?,
            version: u64::try_from(version).map_err(|_| {
                Error::Corrupt(format!(
                    "PostgreSQL at {}: a sequence has version {version}, below 1",
                    self.target
                ))
            })?,
        })
    }

    async fn read_on(&self, c: &ClientWrapper, name: &str) -> Result<Option<SequenceRow>> {
        let st = c
            .prepare_cached(&self.sql.read)
            .await
            .map_err(|e| self.pg(&e))?;
        let r = c.query_opt(&st, &[&name]).await.map_err(|e| self.pg(&e))?;
        r.map(|r| self.row(&r, 0)).transpose()
    }
}

#[async_trait]
impl SequenceStore for PostgresStore {
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow> {
        spec.validate()?;
        let c = self.client().await?;
        let out = self
            .deadline(async {
                let st = c
                    .prepare_cached(&self.sql.create)
                    .await
                    .map_err(|e| self.pg(&e))?;
                match c
                    .query_one(&st, &[&spec.name, &spec.start, &spec.max, &spec.block])
                    .await
                {
                    Ok(r) => self.row(&r, 0),
                    Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                        Err(Error::AlreadyExists {
                            kind: "sequence",
                            name: spec.name.clone(),
                        })
                    }
                    Err(e) => Err(self.pg(&e)),
                }
            })
            .await;
        self.settle(c, out)
    }

    async fn read_numbering(&self, name: &str) -> Result<Option<crate::store::Numbering>> {
        self.numbering_of(name).await
    }

    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        let c = self.client().await?;
        let out = self.deadline(self.read_on(&c, name)).await;
        self.settle(c, out)
    }

    async fn put_if_version(&self, name: &str, new_next: i64, expected: u64) -> Result<Put> {
        self.write_if_version(&self.sql.put_if_version, name, &[&new_next], expected)
            .await
    }

    async fn alter_if_version(
        &self,
        name: &str,
        change: &Alteration,
        expected: u64,
    ) -> Result<Put> {
        self.write_if_version(
            &self.sql.alter_if_version,
            name,
            &[&change.next, &change.max, &change.block],
            expected,
        )
        .await
    }

    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        let mut c = self.client().await?;
        let out = self
            .deadline(async {
                let sql = &self.sql;
                let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
                // The counts row is locked, never the sequence's: allocation
                // goes on meanwhile.
                match tx.execute(&sql.counts_ensure, &[&name]).await {
                    Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => {
                        return Err(Error::not_found("sequence", name));
                    }
                    other => other.map_err(|e| self.pg(&e))?,
                };
                let counts = tx
                    .query_one(&sql.counts_lock, &[&name])
                    .await
                    .map_err(|e| self.pg(&e))?;
                let counts = counts_from(&counts, 0);
                let row = tx
                    .query_opt(&sql.read, &[&name])
                    .await
                    .map_err(|e| self.pg(&e))?
                    .ok_or_else(|| Error::not_found("sequence", name))?;
                let row = self.row(&row, 0)?;
                let c = counts.apply(&row, delta, now_ms);
                let m = |m: Option<RateMark>| (m.map(|m| m.at_ms), m.map(|m| m.reserved));
                let ((mark_at, mark_reserved), (prev_at, prev_reserved)) =
                    (m(c.mark), m(c.prev_mark));
                tx.execute(
                    &sql.counts_write,
                    &[
                        &name,
                        &c.handed_back,
                        &c.handed_out,
                        &c.abandoned,
                        &c.skipped,
                        &mark_at,
                        &mark_reserved,
                        &prev_at,
                        &prev_reserved,
                    ],
                )
                .await
                .map_err(|e| self.pg(&e))?;
                tx.commit().await.map_err(|e| self.pg(&e))
            })
            .await;
        self.settle(c, out)
    }

    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)> {
        let c = self.client().await?;
        let out = self
            .deadline(async {
                let r = c
                    .query_opt(&self.sql.counts_read, &[&name])
                    .await
                    .map_err(|e| self.pg(&e))?
                    .ok_or_else(|| Error::not_found("sequence", name))?;
                Ok((self.row(&r, 0)?, counts_from(&r, 6)))
            })
            .await;
        self.settle(c, out)
    }

    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        crate::store::check_count("count", n)?;
        let mut c = self.client().await?;
        let out = self
            .deadline(async {
                let lock = c
                    .prepare_cached(&self.sql.lock_row)
                    .await
                    .map_err(|e| self.pg(&e))?;
                let write = c
                    .prepare_cached(&self.sql.write_next)
                    .await
                    .map_err(|e| self.pg(&e))?;
                let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
                let Some(r) = tx
                    .query_opt(&lock, &[&name])
                    .await
                    .map_err(|e| self.pg(&e))?
                else {
                    return Err(Error::not_found("sequence", name));
                };
                let plan = self.row(&r, 0)?.plan(n)?;
                let version = i64::try_from(plan.version)
                    .map_err(|_| Error::Corrupt(format!("sequence {name:?}: version overflow")))?;
                tx.execute(&write, &[&name, &plan.end, &version])
                    .await
                    .map_err(|e| self.pg(&e))?;
                tx.commit().await.map_err(|e| self.pg(&e))?;
                Ok(plan)
            })
            .await;
        self.settle(c, out)
    }

    async fn reserve_atomic(&self, name: &str, n: i64) -> Result<Reservation> {
        crate::store::check_count("count", n)?;
        let c = self.client().await?;
        let out = self
            .deadline(async {
                let st = c
                    .prepare_cached(&self.sql.reserve_atomic)
                    .await
                    .map_err(|e| self.pg(&e))?;
                let bad = |e: tokio_postgres::Error| self.pg(&e);
                let r = match c.query_one(&st, &[&name, &n]).await {
                    Ok(r) => r,
                    Err(e) => {
                        return Err(match e.code() {
                            Some(&SqlState::NO_DATA_FOUND) => Error::not_found("sequence", name),
                            Some(&SqlState::SEQUENCE_GENERATOR_LIMIT_EXCEEDED) => {
                                let max = self.read_sequence(name).await?.map_or(0, |row| row.max);
                                Error::Exhausted {
                                    name: name.to_owned(),
                                    max,
                                }
                            }
                            _ => bad(e),
                        });
                    }
                };
                let version: i64 = r.try_get(2).map_err(bad)?;
                Ok(Reservation {
                    start: r.try_get(0).map_err(bad)?,
                    end: r.try_get(1).map_err(bad)?,
                    version: u64::try_from(version).map_err(|_| {
                        Error::Corrupt(format!("sequence {name:?} has version {version}, below 1"))
                    })?,
                })
            })
            .await;
        self.settle(c, out)
    }

    async fn list_sequences(&self) -> Result<Vec<SequenceRow>> {
        let c = self.client().await?;
        let out = self
            .deadline(async {
                let rows = c
                    .query(&self.sql.list, &[])
                    .await
                    .map_err(|e| self.pg(&e))?;
                rows.iter().map(|r| self.row(r, 0)).collect()
            })
            .await;
        self.settle(c, out)
    }

    async fn drop_sequence(&self, name: &str) -> Result<()> {
        let c = self.client().await?;
        let out = self
            .deadline(async {
                let n = c
                    .execute(&self.sql.drop, &[&name])
                    .await
                    .map_err(|e| self.pg(&e))?;
                if n == 0 {
                    Err(Error::not_found("sequence", name))
                } else {
                    Ok(())
                }
            })
            .await;
        self.settle(c, out)
    }
}

/// The counts in the eight columns from `at` (NULL counts are zero: a
/// sequence never recorded).
fn counts_from(r: &tokio_postgres::Row, at: usize) -> SequenceCounts {
    let n = |i: usize| r.get::<_, Option<i64>>(at + i).unwrap_or(0);
    let mark = |i: usize| {
        r.get::<_, Option<i64>>(at + i)
            .zip(r.get::<_, Option<i64>>(at + i + 1))
            .map(|(at_ms, reserved)| RateMark { at_ms, reserved })
    };
    SequenceCounts {
        handed_back: n(0),
        handed_out: n(1),
        abandoned: n(2),
        skipped: n(3),
        mark: mark(4),
        prev_mark: mark(6),
    }
}

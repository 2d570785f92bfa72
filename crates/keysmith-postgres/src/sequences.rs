//! PostgreSQL: the [`SequenceStore`] half of the contract.

use super::*;
use keysmith_core::store::AtomicReserve;

impl PostgresStore {
    /// Runs the `write_if_version` function: `next`, and where given the
    /// rest of an alteration, only if the version is still `expected`.
    async fn write_if_version(
        &self,
        name: &str,
        expected: u64,
        next: i64,
        rest: Option<&Alteration>,
    ) -> Result<Put> {
        with_conn(self, async |c| {
            let Ok(expected_i) = i64::try_from(expected) else {
                // No stored version is that large: it cannot match.
                return match self.read_on(c, name).await? {
                    Some(row) => Ok(Put::Conflict(row)),
                    None => Err(Error::not_found("sequence", name)),
                };
            };
            let st = c
                .prepare_cached(&self.sql.write_if_version)
                .await
                .map_err(|e| self.pg(&e))?;
            let (max, block, skip, skip_set) = match rest {
                Some(a) => (
                    Some(a.max),
                    Some(a.block),
                    Some(a.failover_skip),
                    Some(a.failover_skip_set),
                ),
                None => (None, None, None, None),
            };
            let r = c
                .query_one(
                    &st,
                    &[&name, &expected_i, &next, &max, &block, &skip, &skip_set],
                )
                .await
                .map_err(|e| self.pg(&e))?;
            let missing: Option<String> = r.try_get(1).map_err(|e| self.pg(&e))?;
            if missing.is_none() {
                return Err(Error::not_found("sequence", name));
            }
            let done: bool = r.try_get(0).map_err(|e| self.pg(&e))?;
            let row = self.row(&r, 1)?;
            Ok(if done {
                Put::Done(row)
            } else {
                Put::Conflict(row)
            })
        })
        .await
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
            generation: r.try_get(at + 6).map_err(bad)?,
            failover_skip: r.try_get(at + 7).map_err(bad)?,
            failover_skip_set: r.try_get(at + 8).map_err(bad)?,
            failover_skipped: r.try_get(at + 9).map_err(bad)?,
            version: u64::try_from(version).map_err(|_| {
                Error::Corrupt(format!(
                    "PostgreSQL at {}: a sequence has version {version}, below 1",
                    self.target
                ))
            })?,
            incarnation: stored_version(r.try_get(at + 10).map_err(bad)?),
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
        with_conn(self, async |c| {
            let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
            let row = self.insert_sequence(&tx, spec, None).await?;
            tx.commit().await.map_err(|e| self.pg(&e))?;
            Ok(row)
        })
        .await
    }

    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        with_conn(self, async |c| self.read_on(c, name).await).await
    }

    async fn put_if_version(&self, name: &str, new_next: i64, expected: u64) -> Result<Put> {
        self.write_if_version(name, expected, new_next, None).await
    }

    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> Result<()> {
        with_conn(self, async |c| {
            c.execute(&self.sql.raise_failover_skip, &[&name, &at_least])
                .await
                .map(drop)
                .map_err(|e| self.pg(&e))
        })
        .await
    }

    async fn alter_checked(&self, name: &str, change: &Alteration, expected: u64) -> Result<Put> {
        self.write_if_version(name, expected, change.next, Some(change))
            .await
    }

    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        with_conn(self, async |c| {
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
            let c = counts.apply(&row, delta, now_ms)?;
            let m = |m: Option<RateMark>| (m.map(|m| m.at_ms), m.map(|m| m.reserved));
            let ((mark_at, mark_reserved), (prev_at, prev_reserved)) = (m(c.mark), m(c.prev_mark));
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
        .await
    }

    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)> {
        with_conn(self, async |c| {
            let r = c
                .query_opt(&self.sql.counts_read, &[&name])
                .await
                .map_err(|e| self.pg(&e))?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            Ok((self.row(&r, 0)?, counts_from(&r, 11)))
        })
        .await
    }

    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        self.reserve_locked_in(name, n, 0).await
    }

    async fn reserve_locked_in(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        keysmith_core::driver::check_count("count", n)?;
        with_conn(self, async |c| {
            let lock = c
                .prepare_cached(&self.sql.lock_row)
                .await
                .map_err(|e| self.pg(&e))?;
            let write = c
                .prepare_cached(&self.sql.write_next)
                .await
                .map_err(|e| self.pg(&e))?;
            let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
            let r = tx
                .query_one(&lock, &[&name])
                .await
                .map_err(|e| self.pg(&e))?;
            let missing: Option<String> = r.try_get(1).map_err(|e| self.pg(&e))?;
            if missing.is_none() {
                return Err(Error::not_found("sequence", name));
            }
            let fenced: i64 = r.try_get(0).map_err(|e| self.pg(&e))?;
            let row = self.row(&r, 1)?;
            // Another life: the transaction rolls back (the fence too).
            row.check_life(incarnation, "handle")?;
            let mut plan = row.plan(n)?;
            plan.fenced = fenced;
            let version = i64::try_from(plan.version)
                .map_err(|_| Error::Corrupt(format!("sequence {name:?}: version overflow")))?;
            tx.execute(&write, &[&name, &plan.end, &version, &row.generation])
                .await
                .map_err(|e| self.pg(&e))?;
            tx.commit().await.map_err(|e| self.pg(&e))?;
            Ok(plan)
        })
        .await
    }

    fn atomic_reserve(&self) -> Option<&dyn AtomicReserve> {
        Some(self)
    }

    async fn list_sequences(&self) -> Result<Vec<SequenceRow>> {
        with_conn(self, async |c| {
            let rows = c
                .query(&self.sql.list, &[])
                .await
                .map_err(|e| self.pg(&e))?;
            rows.iter().map(|r| self.row(r, 0)).collect()
        })
        .await
    }

    async fn sequence_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.names_near(&self.sql.near_before, &self.sql.near_after, name, limit)
            .await
    }

    async fn count_sequences_with_prefix(&self, prefix: &str) -> Result<u64> {
        let row = self.with_prefix("count(*)", "sequences", prefix).await?;
        let n: i64 = row.try_get(0).map_err(|e| self.pg(&e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn drop_sequence(&self, name: &str) -> Result<()> {
        let s = quote_ident(&self.schema);
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let tx = c.transaction().await.map_err(bad)?;
            let before = self.lock_tombstone(&tx, SEQUENCE_KIND, name).await?;
            let Some(r) = tx
                .query_opt(&format!("{} FOR UPDATE", self.sql.read), &[&name])
                .await
                .map_err(bad)?
            else {
                return Err(Error::not_found("sequence", name));
            };
            let row = self.row(&r, 0)?;
            let numbering = match tx
                .query_opt(
                    &format!("SELECT settings FROM {s}.numbering WHERE name = $1"),
                    &[&name],
                )
                .await
                .map_err(bad)?
            {
                Some(r) => Some(keysmith_core::driver::parse_numbering(
                    name,
                    &r.try_get::<_, String>(0).map_err(bad)?,
                )?),
                None => None,
            };
            let counters_next: Option<i64> = tx
                .query_one(
                    &format!("SELECT max(next) FROM {s}.number_counters WHERE name = $1"),
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
            let t =
                before.after_sequence_drop(&row, numbering.as_ref(), counters_next, &generation);
            self.raise_tombstone(&tx, SEQUENCE_KIND, name, t).await?;
            tx.execute(&self.sql.drop, &[&name]).await.map_err(bad)?;
            tx.commit().await.map_err(bad)
        })
        .await
    }
}

/// PostgreSQL's one-step reservation: one `UPDATE ... RETURNING` that
/// fences, plans and writes the row; waiters queue on the row lock and are
/// served in turn.
#[async_trait]
impl AtomicReserve for PostgresStore {
    async fn reserve_one_step(&self, name: &str, n: i64) -> Result<Reservation> {
        self.reserve_one_step_in(name, n, 0).await
    }

    async fn reserve_one_step_in(
        &self,
        name: &str,
        n: i64,
        incarnation: u64,
    ) -> Result<Reservation> {
        keysmith_core::driver::check_count("count", n)?;
        let life = crate::version_param(name, incarnation)?;
        with_conn(self, async |c| {
            let st = c
                .prepare_cached(&self.sql.reserve_atomic)
                .await
                .map_err(|e| self.pg(&e))?;
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let r = match c.query_one(&st, &[&name, &n, &life]).await {
                Ok(r) => r,
                Err(e) => {
                    return Err(match e.code() {
                        Some(&SqlState::NO_DATA_FOUND) => Error::not_found("sequence", name),
                        Some(c) if c.code() == "KS410" => Error::Dropped {
                            kind: "sequence",
                            name: name.to_owned(),
                            held: "handle",
                        },
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
                fenced: r.try_get(3).map_err(bad)?,
                incarnation: stored_version(r.try_get(4).map_err(bad)?),
            })
        })
        .await
    }
}

impl PostgresStore {
    /// Inserts the row of `spec` (with `numbering`, if it has one: the
    /// caller inserts that) in `tx`, its start raised above the name's
    /// tombstone (every kind's), and its version and incarnation the
    /// tombstone's [`Tombstone::incarnation`]; the sequences' tombstone row
    /// of the name stays locked until `tx` ends.
    pub(super) async fn insert_sequence(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        spec: &SequenceSpec,
        numbering: Option<&keysmith_core::driver::Numbering>,
    ) -> Result<SequenceRow> {
        let dropped = self.lock_tombstone(tx, SEQUENCE_KIND, &spec.name).await?;
        let spec = &dropped.raise_sequence(spec, numbering)?;
        let incarnation = version_param(&spec.name, dropped.incarnation())?;
        match tx
            .query_one(
                &self.sql.create,
                &[
                    &spec.name,
                    &spec.start,
                    &spec.max,
                    &spec.block,
                    &spec.initial_failover_skip(),
                    &spec.failover_skip.is_some(),
                    &incarnation,
                ],
            )
            .await
        {
            Ok(r) => self.row(&r, 0),
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Err(Error::AlreadyExists {
                kind: "sequence",
                name: spec.name.clone(),
            }),
            Err(e) => Err(self.pg(&e)),
        }
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

impl PostgresStore {
    /// `sequence_names_near` and `pool_names_near`: the statements
    /// `before_sql` and `after_sql` (name, limit), two index range reads.
    /// `SELECT what FROM schema.table` over the names starting with
    /// `prefix` (one range read of the name index): the one row it answers.
    pub(crate) async fn with_prefix(
        &self,
        what: &str,
        table: &str,
        prefix: &str,
    ) -> Result<tokio_postgres::Row> {
        let range = keysmith_core::driver::PrefixRange::of(prefix);
        let sql = format!(
            "SELECT {what} FROM {}.{table} WHERE {}",
            quote_ident(&self.schema),
            range.condition("name", |i| format!("${i}"))
        );
        let params = range.params();
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        with_conn(self, async |c| {
            c.query_one(&sql, &params).await.map_err(|e| self.pg(&e))
        })
        .await
    }

    pub(crate) async fn names_near(
        &self,
        before_sql: &str,
        after_sql: &str,
        name: &str,
        limit: usize,
    ) -> Result<Vec<String>> {
        let before = i64::try_from(limit / 2).unwrap_or(i64::MAX);
        let after = i64::try_from(limit - limit / 2).unwrap_or(i64::MAX);
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let names = |rows: Vec<tokio_postgres::Row>| {
                rows.iter()
                    .map(|r| r.try_get::<_, String>(0).map_err(bad))
                    .collect::<Result<Vec<_>>>()
            };
            let mut out = names(c.query(before_sql, &[&name, &before]).await.map_err(bad)?)?;
            out.reverse();
            out.extend(names(
                c.query(after_sql, &[&name, &after]).await.map_err(bad)?,
            )?);
            Ok(out)
        })
        .await
    }
}

//! MySQL: the [`SequenceStore`] half of the contract.
//!
//! Every write is one short transaction at READ COMMITTED, committed before
//! the method returns:
//!
//! - optimistic (`put_if_version`, `alter_if_version`): an `UPDATE ... WHERE
//!   version = ?`, then the row read in the same transaction: on a match it
//!   is the row just written (locked by us), on a conflict the newest
//!   committed row, which is what the caller retries from;
//! - locked (`reserve_locked`): `SELECT ... FOR UPDATE`, the plan computed
//!   here ([`SequenceRow::plan`]), one `UPDATE`;
//! - atomic: MySQL has no one-statement reservation (no `RETURNING`; an
//!   `UPDATE` read back costs the round trip the locking read costs, and
//!   the generation check needs the row first), so the store does not offer
//!   [`keysmith_core::store::AtomicReserve`] and the `atomic` strategy takes
//!   the locked transaction ([`SequenceStore::reserve_atomic`]). The
//!   `last_start` column the schema keeps is no longer written.
//!
//! InnoDB's UPDATE reads the newest committed row and locks it, so two
//! writers of one sequence run one after the other and never see the same
//! `next_value`.

use super::*;

impl MysqlStore {
    /// The conditional write of put and alter: the row fenced and locked
    /// ([`Self::fenced_row`]), then `change` applied only if its version is
    /// still `expected`; the row as it now is either way.
    async fn write_if_version(
        &self,
        name: &str,
        expected: u64,
        change: impl FnOnce(SequenceRow) -> SequenceRow,
    ) -> Result<Put> {
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            let Some((row, fenced)) = self.fenced_row(&mut tx, name).await? else {
                return Err(Error::not_found("sequence", name));
            };
            if row.version != expected {
                if fenced > 0 {
                    tx.commit().await.map_err(bad)?;
                }
                return Ok(Put::Conflict(row));
            }
            let new = change(SequenceRow {
                version: row.version + 1,
                ..row
            });
            self.write_row(&mut tx, &new).await?;
            tx.commit().await.map_err(bad)?;
            Ok(Put::Done(new))
        })
        .await
    }

    /// Both reservation strategies: the row fenced and locked, the plan
    /// computed here ([`SequenceRow::plan`]), one `UPDATE`, in one
    /// transaction.
    async fn reserve(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        keysmith_core::driver::check_count("count", n)?;
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            let Some((row, fenced)) = self.fenced_row(&mut tx, name).await? else {
                return Err(Error::not_found("sequence", name));
            };
            // A row of another life: nothing is committed (the transaction,
            // its fence too, rolls back when dropped).
            row.check_life(incarnation, "handle")?;
            let plan = match row.plan(n) {
                Ok(p) => p,
                Err(e) => {
                    if fenced > 0 {
                        tx.commit().await.map_err(bad)?;
                    }
                    return Err(e);
                }
            };
            self.write_row(
                &mut tx,
                &SequenceRow {
                    next: plan.end,
                    version: plan.version,
                    ..row
                },
            )
            .await?;
            tx.commit().await.map_err(bad)?;
            Ok(Reservation { fenced, ..plan })
        })
        .await
    }

    /// Inserts a sequence's row in `tx` and reads it back: raised above
    /// its name's tombstone over every kind, locked first
    /// ([`Self::lock_tombstone`]), and of the name's next life (version and
    /// incarnation [`Tombstone::incarnation`], as
    /// [`SequenceRow::created_after`]).
    pub(super) async fn insert_sequence(
        &self,
        tx: &mut mysql_async::Transaction<'_>,
        spec: &SequenceSpec,
        numbering: Option<&keysmith_core::driver::Numbering>,
    ) -> Result<SequenceRow> {
        let dropped = self.lock_tombstone(tx, &spec.name).await?;
        let spec = &dropped.raise_sequence(spec, numbering)?;
        let incarnation = self.version_param(&spec.name, dropped.incarnation())?;
        let inserted = tx
            .exec_drop(
                format!(
                    "INSERT INTO keysmith_sequences (name, next_value, start_value, max_value, block,
                         version, generation, failover_skip, failover_skip_set, incarnation)
                     VALUES (?, ?, ?, ?, ?, ?, {}, ?, ?, ?)",
                    self.generation_expr()
                ),
                (
                    &spec.name,
                    spec.start,
                    spec.start,
                    spec.max,
                    spec.block,
                    incarnation,
                    spec.initial_failover_skip(),
                    spec.failover_skip.is_some(),
                    incarnation,
                ),
            )
            .await;
        match inserted {
            Ok(()) => {}
            Err(e) if code(&e) == Some(ER_DUP_ENTRY) => {
                return Err(Error::AlreadyExists {
                    kind: "sequence",
                    name: spec.name.clone(),
                });
            }
            Err(e) => return Err(self.my(&e)),
        }
        let row: Row = tx
            .exec_first(
                format!("SELECT {COLS} FROM keysmith_sequences WHERE name = ?"),
                (&spec.name,),
            )
            .await
            .map_err(|e| self.my(&e))?
            .ok_or_else(|| Error::not_found("sequence", &spec.name))?;
        self.sequence_row(&row, 0)
    }
}

#[async_trait]
impl SequenceStore for MysqlStore {
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow> {
        spec.validate()?;
        with_conn(self, async |c| {
            let mut tx = begin(c).await.map_err(|e| self.my(&e))?;
            let row = self.insert_sequence(&mut tx, spec, None).await?;
            tx.commit().await.map_err(|e| self.my(&e))?;
            Ok(row)
        })
        .await
    }

    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        with_conn(self, async |c| {
            let r: Option<Row> = c
                .exec_first(
                    format!("SELECT {COLS} FROM keysmith_sequences WHERE name = ?"),
                    (name,),
                )
                .await
                .map_err(|e| self.my(&e))?;
            r.map(|r| self.sequence_row(&r, 0)).transpose()
        })
        .await
    }

    async fn put_if_version(&self, name: &str, new_next: i64, expected: u64) -> Result<Put> {
        self.write_if_version(name, expected, |row| SequenceRow {
            next: new_next,
            ..row
        })
        .await
    }

    async fn alter_checked(&self, name: &str, change: &Alteration, expected: u64) -> Result<Put> {
        let change = *change;
        self.write_if_version(name, expected, move |row| SequenceRow {
            next: change.next,
            max: change.max,
            block: change.block,
            failover_skip: change.failover_skip,
            failover_skip_set: change.failover_skip_set,
            ..row
        })
        .await
    }

    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> Result<()> {
        with_conn(self, async |c| {
            c.exec_drop(
                "UPDATE keysmith_sequences SET failover_skip = ?
                 WHERE name = ? AND NOT failover_skip_set AND failover_skip < ?",
                (at_least, name, at_least),
            )
            .await
            .map_err(|e| self.my(&e))
        })
        .await
    }

    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        // SELECT ... FOR UPDATE, the plan here, one UPDATE.
        self.reserve(name, n, 0).await
    }

    async fn reserve_locked_in(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        self.reserve(name, n, incarnation).await
    }

    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            // The counts row is locked, never the sequence's: allocation
            // goes on meanwhile.
            match tx
                .exec_drop(
                    "INSERT INTO keysmith_sequence_counts (name, handed_back, handed_out, abandoned, skipped)
                     VALUES (?, 0, 0, 0, 0) ON DUPLICATE KEY UPDATE name = name",
                    (name,),
                )
                .await
            {
                Err(e) if code(&e) == Some(ER_NO_REFERENCED_ROW) => {
                    return Err(Error::not_found("sequence", name));
                }
                other => other.map_err(bad)?,
            }
            let counts: Row = tx
                .exec_first(
                    format!("SELECT {CCOLS} FROM keysmith_sequence_counts WHERE name = ? FOR UPDATE"),
                    (name,),
                )
                .await
                .map_err(bad)?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            let counts = self.counts_from(&counts, 0)?;
            let row: Row = tx
                .exec_first(
                    format!("SELECT {COLS} FROM keysmith_sequences WHERE name = ?"),
                    (name,),
                )
                .await
                .map_err(bad)?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            let row = self.sequence_row(&row, 0)?;
            let c = counts.apply(&row, delta, now_ms)?;
            let m = |m: Option<RateMark>| (m.map(|m| m.at_ms), m.map(|m| m.reserved));
            let ((mark_at, mark_reserved), (prev_at, prev_reserved)) =
                (m(c.mark), m(c.prev_mark));
            tx.exec_drop(
                "UPDATE keysmith_sequence_counts SET handed_back = ?, handed_out = ?, abandoned = ?,
                 skipped = ?, mark_at = ?, mark_reserved = ?, prev_at = ?, prev_reserved = ?
                 WHERE name = ?",
                (
                    c.handed_back,
                    c.handed_out,
                    c.abandoned,
                    c.skipped,
                    mark_at,
                    mark_reserved,
                    prev_at,
                    prev_reserved,
                    name,
                ),
            )
            .await
            .map_err(bad)?;
            tx.commit().await.map_err(bad)
        })
        .await
    }

    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)> {
        with_conn(self, async |c| {
            let r: Row = c
                .exec_first(
                    format!(
                        "SELECT {}, {CCOLS_C}
                         FROM keysmith_sequences s
                         LEFT JOIN keysmith_sequence_counts c ON c.name = s.name
                         WHERE s.name = ?",
                        cols_of("s")
                    ),
                    (name,),
                )
                .await
                .map_err(|e| self.my(&e))?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            Ok((self.sequence_row(&r, 0)?, self.counts_from(&r, NCOLS)?))
        })
        .await
    }

    async fn list_sequences(&self) -> Result<Vec<SequenceRow>> {
        with_conn(self, async |c| {
            let rows: Vec<Row> = c
                .query(format!(
                    "SELECT {COLS} FROM keysmith_sequences ORDER BY name"
                ))
                .await
                .map_err(|e| self.my(&e))?;
            rows.iter().map(|r| self.sequence_row(r, 0)).collect()
        })
        .await
    }

    async fn sequence_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.names_near("keysmith_sequences", name, limit).await
    }

    async fn count_sequences_with_prefix(&self, prefix: &str) -> Result<u64> {
        let row = self
            .with_prefix("COUNT(*)", "keysmith_sequences", prefix)
            .await?;
        let n: i64 = self.col(&row, 0)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn drop_sequence(&self, name: &str) -> Result<()> {
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            let before = self.lock_tombstone(&mut tx, name).await?;
            let r: Option<Row> = tx
                .exec_first(
                    format!("SELECT {COLS} FROM keysmith_sequences WHERE name = ? FOR UPDATE"),
                    (name,),
                )
                .await
                .map_err(bad)?;
            let Some(r) = r else {
                return Err(Error::not_found("sequence", name));
            };
            let row = self.sequence_row(&r, 0)?;
            let settings: Option<String> = tx
                .exec_first(
                    "SELECT settings FROM keysmith_numbering WHERE name = ?",
                    (name,),
                )
                .await
                .map_err(bad)?;
            let numbering = settings
                .map(|s| keysmith_core::driver::parse_numbering(name, &s))
                .transpose()?;
            let counters_next: Option<i64> = tx
                .exec_first(
                    "SELECT MAX(next_value) FROM keysmith_number_counters WHERE name = ?",
                    (name,),
                )
                .await
                .map_err(bad)?
                .flatten();
            let generation: String = tx
                .query_first(format!("SELECT {}", self.generation_expr()))
                .await
                .map_err(bad)?
                .ok_or_else(|| self.corrupt("the server named no generation"))?;
            let t =
                before.after_sequence_drop(&row, numbering.as_ref(), counters_next, &generation);
            self.raise_tombstone(&mut tx, SEQUENCE_KIND, name, t)
                .await?;
            // The counts, numbering, counters and tickets go with it
            // (ON DELETE CASCADE), in the same statement.
            tx.exec_drop("DELETE FROM keysmith_sequences WHERE name = ?", (name,))
                .await
                .map_err(bad)?;
            tx.commit().await.map_err(bad)
        })
        .await
    }
}

/// The columns of a sequence's counts, in the order `counts_from` reads them.
const CCOLS: &str =
    "handed_back, handed_out, abandoned, skipped, mark_at, mark_reserved, prev_at, prev_reserved";
const CCOLS_C: &str = "c.handed_back, c.handed_out, c.abandoned, c.skipped, \
    c.mark_at, c.mark_reserved, c.prev_at, c.prev_reserved";

impl MysqlStore {
    /// `SELECT what FROM table` over the names starting with `prefix` (one
    /// range read of the primary key): the one row it answers.
    pub(crate) async fn with_prefix(&self, what: &str, table: &str, prefix: &str) -> Result<Row> {
        let range = keysmith_core::driver::PrefixRange::of(prefix);
        let sql = format!(
            "SELECT {what} FROM {table} WHERE {}",
            range.condition("name", |_| "?".to_owned())
        );
        let params: Vec<mysql_async::Value> = range
            .params()
            .into_iter()
            .map(mysql_async::Value::from)
            .collect();
        with_conn(self, async |c| {
            let row: Option<Row> = c.exec_first(&sql, params).await.map_err(|e| self.my(&e))?;
            row.ok_or_else(|| Error::Corrupt(format!("{sql} answered no row")))
        })
        .await
    }

    /// `sequence_names_near` and `pool_names_near` over `table`'s primary
    /// key: two index range reads.
    pub(crate) async fn names_near(
        &self,
        table: &str,
        name: &str,
        limit: usize,
    ) -> Result<Vec<String>> {
        let before = u64::try_from(limit / 2).unwrap_or(u64::MAX);
        let after = u64::try_from(limit - limit / 2).unwrap_or(u64::MAX);
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let names = |rows: Vec<Row>| {
                rows.iter()
                    .map(|r| self.col::<String>(r, 0))
                    .collect::<Result<Vec<_>>>()
            };
            let mut out = names(
                c.exec(
                    format!("SELECT name FROM {table} WHERE name < ? ORDER BY name DESC LIMIT ?"),
                    (name, before),
                )
                .await
                .map_err(bad)?,
            )?;
            out.reverse();
            out.extend(names(
                c.exec(
                    format!("SELECT name FROM {table} WHERE name >= ? ORDER BY name LIMIT ?"),
                    (name, after),
                )
                .await
                .map_err(bad)?,
            )?);
            Ok(out)
        })
        .await
    }

    /// The counts in the eight columns from `at` (NULL counts are zero: a
    /// sequence never recorded).
    fn counts_from(&self, r: &Row, at: usize) -> Result<SequenceCounts> {
        let n = |i: usize| -> Result<i64> { Ok(self.col::<Option<i64>>(r, at + i)?.unwrap_or(0)) };
        let mark = |i: usize| -> Result<Option<RateMark>> {
            Ok(self
                .col::<Option<i64>>(r, at + i)?
                .zip(self.col::<Option<i64>>(r, at + i + 1)?)
                .map(|(at_ms, reserved)| RateMark { at_ms, reserved }))
        };
        Ok(SequenceCounts {
            handed_back: n(0)?,
            handed_out: n(1)?,
            abandoned: n(2)?,
            skipped: n(3)?,
            mark: mark(4)?,
            prev_mark: mark(6)?,
        })
    }
}

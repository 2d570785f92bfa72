//! SQLite: the [`SequenceStore`] half of the contract.

use super::*;
use keysmith_core::driver::Numbering;

impl SqliteStore {
    /// Both reservation strategies: read (fenced), plan and write in one
    /// `BEGIN IMMEDIATE` transaction.
    /// Reserves up to `n` values in life `incarnation` of the name (0: any):
    /// a row of another life fails before anything is written.
    async fn reserve(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let (row, fenced) = fenced_row(tx, &name, &generation)?;
            // An error rolls back the fence fenced_row may have written.
            row.check_life(incarnation, "handle")?;
            let mut r = row.plan(n)?;
            write_row(
                tx,
                &SequenceRow {
                    next: r.end,
                    version: r.version,
                    ..row
                },
            )?;
            r.fenced = fenced;
            Ok(r)
        })
        .await
    }
}

#[async_trait]
impl SequenceStore for SqliteStore {
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow> {
        let (spec, generation) = (spec.clone(), self.generation.clone());
        self.write(move |tx| insert(tx, &spec, None, &generation))
            .await
    }

    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        let name = name.to_owned();
        self.run(move |conn| read_row(conn, &name)).await
    }

    async fn put_if_version(&self, name: &str, new_next: i64, expected: u64) -> Result<Put> {
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let (row, _) = fenced_row(tx, &name, &generation)?;
            if row.version != expected {
                // Same transaction: the row returned is the one that beat us
                // (or the fence just written).
                return Ok(Put::Conflict(row));
            }
            let row = SequenceRow {
                next: new_next,
                version: row.version + 1,
                ..row
            };
            write_row(tx, &row)?;
            Ok(Put::Done(row))
        })
        .await
    }

    async fn alter_checked(&self, name: &str, change: &Alteration, expected: u64) -> Result<Put> {
        let (name, change, generation) = (name.to_owned(), *change, self.generation.clone());
        self.write(move |tx| {
            let (row, _) = fenced_row(tx, &name, &generation)?;
            if row.version != expected {
                return Ok(Put::Conflict(row));
            }
            let row = SequenceRow {
                next: change.next,
                max: change.max,
                block: change.block,
                failover_skip: change.failover_skip,
                failover_skip_set: change.failover_skip_set,
                version: row.version + 1,
                ..row
            };
            write_row(tx, &row)?;
            Ok(Put::Done(row))
        })
        .await
    }

    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> Result<()> {
        let name = name.to_owned();
        self.write(move |tx| {
            require_row(tx, &name)?;
            tx.execute(
                "UPDATE keysmith_sequences SET failover_skip = ?2
                 WHERE name = ?1 AND failover_skip_set = 0 AND failover_skip < ?2",
                params![name, at_least],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        // BEGIN IMMEDIATE is SQLite's row lock: no other writer until COMMIT.
        self.reserve(name, n, 0).await
    }

    async fn reserve_locked_in(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        self.reserve(name, n, incarnation).await
    }

    async fn list_sequences(&self) -> Result<Vec<SequenceRow>> {
        self.run(|conn| {
            let mut s = conn
                .prepare_cached(&format!(
                    "SELECT {ROW_COLUMNS} FROM keysmith_sequences ORDER BY name"
                ))
                .map_err(db_err)?;
            let rows = s
                .query_map([], row_from)
                .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(db_err)?;
            Ok(rows)
        })
        .await
    }

    async fn sequence_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        let name = name.to_owned();
        self.run(move |conn| names_near(conn, "keysmith_sequences", &name, limit))
            .await
    }

    async fn count_sequences_with_prefix(&self, prefix: &str) -> Result<u64> {
        let range = PrefixRange::of(prefix);
        self.run(move |conn| {
            let (n,): (i64,) = with_prefix(conn, "COUNT(*)", "keysmith_sequences", &range, |r| {
                Ok((r.get(0)?,))
            })?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        let (name, delta) = (name.to_owned(), *delta);
        self.write(move |tx| {
            let row = require_row(tx, &name)?;
            let c = read_counts_on(tx, &name)?.apply(&row, &delta, now_ms)?;
            let mark = |m: Option<RateMark>| (m.map(|m| m.at_ms), m.map(|m| m.reserved));
            let ((mark_at, mark_reserved), (prev_at, prev_reserved)) = (mark(c.mark), mark(c.prev_mark));
            tx.execute(
                "INSERT OR REPLACE INTO keysmith_sequence_counts
                 (name, handed_back, handed_out, abandoned, skipped, mark_at, mark_reserved, prev_at, prev_reserved)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    name,
                    c.handed_back,
                    c.handed_out,
                    c.abandoned,
                    c.skipped,
                    mark_at,
                    mark_reserved,
                    prev_at,
                    prev_reserved
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)> {
        let name = name.to_owned();
        self.run(move |conn| Ok((require_row(conn, &name)?, read_counts_on(conn, &name)?)))
            .await
    }

    async fn drop_sequence(&self, name: &str) -> Result<()> {
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let row = require_row(tx, &name)?;
            let numbering = read_numbering_on(tx, &name)?;
            let counters_next: Option<i64> = tx
                .query_row(
                    "SELECT max(next) FROM keysmith_number_counters WHERE name = ?1",
                    [&name],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            let t = read_tombstone(tx, &name)?.after_sequence_drop(
                &row,
                numbering.as_ref(),
                counters_next,
                &generation,
            );
            write_tombstone(tx, SEQUENCE_KIND, &name, t)?;
            tx.execute(
                "DELETE FROM keysmith_sequence_counts WHERE name = ?1",
                [&name],
            )
            .map_err(db_err)?;
            tx.execute("DELETE FROM keysmith_sequences WHERE name = ?1", [&name])
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }
}

fn row_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<SequenceRow> {
    Ok(SequenceRow {
        name: r.get(0)?,
        next: r.get(1)?,
        start: r.get(2)?,
        max: r.get(3)?,
        block: r.get(4)?,
        version: r.get::<_, i64>(5)? as u64,
        generation: r.get(6)?,
        failover_skip: r.get(7)?,
        failover_skip_set: r.get(8)?,
        failover_skipped: r.get(9)?,
        incarnation: r.get::<_, i64>(10)?.max(0) as u64,
    })
}

/// Writes a sequence's whole row (in a write transaction).
fn write_row(tx: &rusqlite::Transaction<'_>, row: &SequenceRow) -> Result<()> {
    tx.prepare_cached(
        "UPDATE keysmith_sequences SET prev_next = next, next = ?2, max = ?3, block = ?4,
             version = ?5, generation = ?6, failover_skip = ?7, failover_skip_set = ?8,
             failover_skipped = ?9
         WHERE name = ?1",
    )
    .and_then(|mut s| {
        s.execute(params![
            row.name,
            row.next,
            row.max,
            row.block,
            version_param(row.version),
            row.generation,
            row.failover_skip,
            row.failover_skip_set,
            row.failover_skipped
        ])
    })
    .map_err(db_err)?;
    Ok(())
}

/// The row of a sequence as a write in generation `generation` starts from:
/// fenced and written first if it was last written in another generation
/// ([`SequenceRow::fence`]), with the values the fence skipped. The row
/// returned carries `generation`, so the write that follows records it.
fn fenced_row(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    generation: &str,
) -> Result<(SequenceRow, i64)> {
    let row = require_row(tx, name)?;
    match row.fence(generation) {
        Some(f) => {
            write_row(tx, &f)?;
            Ok((f.clone(), f.next - row.next))
        }
        None => Ok((
            SequenceRow {
                generation: Some(generation.to_owned()),
                ..row
            },
            0,
        )),
    }
}

fn read_row(conn: &Connection, name: &str) -> Result<Option<SequenceRow>> {
    conn.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS} FROM keysmith_sequences WHERE name = ?1"
    ))
    .and_then(|mut s| s.query_row([name], row_from).optional())
    .map_err(db_err)
}

/// Inserts a sequence's row (in a write transaction).
/// Inserts the row of `spec` (with `numbering`, if it has one: the caller
/// inserts that), its start raised above the name's tombstone.
pub(super) fn insert(
    tx: &rusqlite::Transaction<'_>,
    spec: &SequenceSpec,
    numbering: Option<&Numbering>,
    generation: &str,
) -> Result<SequenceRow> {
    let dropped = read_tombstone(tx, &spec.name)?;
    let spec = &dropped.raise_sequence(spec, numbering)?;
    let row = SequenceRow::created_after(spec, generation, &dropped);
    let inserted = tx
        .execute(
            "INSERT INTO keysmith_sequences (name, next, start, max, block, version, prev_next,
                 generation, failover_skip, failover_skip_set, failover_skipped, incarnation)
             VALUES (?1, ?2, ?2, ?3, ?4, ?8, ?2, ?5, ?6, ?7, 0, ?8) ON CONFLICT (name) DO NOTHING",
            params![
                row.name,
                row.start,
                row.max,
                row.block,
                row.generation,
                row.failover_skip,
                row.failover_skip_set,
                version_param(row.incarnation)
            ],
        )
        .map_err(db_err)?;
    if inserted == 0 {
        return Err(Error::AlreadyExists {
            kind: "sequence",
            name: spec.name.clone(),
        });
    }
    // Counts a drop by an older keysmith may have left behind.
    tx.execute(
        "DELETE FROM keysmith_sequence_counts WHERE name = ?1",
        [&spec.name],
    )
    .map_err(db_err)?;
    require_row(tx, &spec.name)
}

/// The row of a sequence that must exist.
pub(super) fn require(conn: &Connection, name: &str) -> Result<SequenceRow> {
    require_row(conn, name)
}

fn require_row(conn: &Connection, name: &str) -> Result<SequenceRow> {
    read_row(conn, name)?.ok_or_else(|| Error::not_found("sequence", name))
}

fn read_counts_on(conn: &Connection, name: &str) -> Result<SequenceCounts> {
    let mark = |at: Option<i64>, reserved: Option<i64>| {
        at.zip(reserved)
            .map(|(at_ms, reserved)| RateMark { at_ms, reserved })
    };
    conn.query_row(
        "SELECT handed_back, handed_out, abandoned, skipped, mark_at, mark_reserved, prev_at, prev_reserved
         FROM keysmith_sequence_counts WHERE name = ?1",
        [name],
        |r| {
            Ok(SequenceCounts {
                handed_back: r.get(0)?,
                handed_out: r.get(1)?,
                abandoned: r.get(2)?,
                skipped: r.get(3)?,
                mark: mark(r.get(4)?, r.get(5)?),
                prev_mark: mark(r.get(6)?, r.get(7)?),
            })
        },
    )
    .optional()
    .map(Option::unwrap_or_default)
    .map_err(db_err)
}

/// `SELECT what FROM table` over the names of `range` (one index range
/// read): the one row it answers, read by `row`.
pub(super) fn with_prefix<T>(
    conn: &Connection,
    what: &str,
    table: &str,
    range: &PrefixRange,
    row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<T> {
    let sql = format!(
        "SELECT {what} FROM {table} WHERE {}",
        range.condition("name", |i| format!("?{i}"))
    );
    let mut s = conn.prepare_cached(&sql).map_err(db_err)?;
    s.query_row(rusqlite::params_from_iter(range.params()), row)
        .map_err(db_err)
}

/// [`keysmith_core::store::SequenceStore::sequence_names_near`] over `table`'s
/// primary key: two bounded index range reads.
pub(super) fn names_near(
    conn: &Connection,
    table: &str,
    name: &str,
    limit: usize,
) -> Result<Vec<String>> {
    let side = |sql: &str, n: usize| -> Result<Vec<String>> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let mut s = conn.prepare_cached(sql).map_err(db_err)?;
        s.query_map(params![name, n], |r| r.get::<_, String>(0))
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(db_err)
    };
    let mut out = side(
        &format!("SELECT name FROM {table} WHERE name < ?1 ORDER BY name DESC LIMIT ?2"),
        limit / 2,
    )?;
    out.reverse();
    out.extend(side(
        &format!("SELECT name FROM {table} WHERE name >= ?1 ORDER BY name LIMIT ?2"),
        limit - limit / 2,
    )?);
    Ok(out)
}

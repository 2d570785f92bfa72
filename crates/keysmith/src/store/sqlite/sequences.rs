//! SQLite: the [`SequenceStore`] half of the contract.

use super::*;

#[async_trait]
impl SequenceStore for SqliteStore {
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow> {
        let spec = spec.clone();
        self.write(move |tx| insert(tx, &spec)).await
    }

    async fn read_numbering(&self, name: &str) -> Result<Option<crate::store::Numbering>> {
        let name = name.to_owned();
        self.run(move |conn| super::tickets::read_numbering_on(conn, &name))
            .await
    }

    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        let name = name.to_owned();
        self.run(move |conn| read_row(conn, &name)).await
    }

    async fn put_if_version(&self, name: &str, new_next: i64, expected: u64) -> Result<Put> {
        let name = name.to_owned();
        self.write(move |tx| {
            let done = tx
                .prepare_cached(&format!(
                    "UPDATE keysmith_sequences SET prev_next = next, next = ?2, version = version + 1
                     WHERE name = ?1 AND version = ?3 RETURNING {ROW_COLUMNS}"
                ))
                .and_then(|mut s| {
                    s.query_row(params![name, new_next, version_param(expected)], row_from)
                        .optional()
                })
                .map_err(db_err)?;
            match done {
                Some(row) => Ok(Put::Done(row)),
                // Same transaction: the row returned is the one that beat us.
                None => Ok(Put::Conflict(require_row(tx, &name)?)),
            }
        })
        .await
    }

    async fn alter_if_version(
        &self,
        name: &str,
        change: &Alteration,
        expected: u64,
    ) -> Result<Put> {
        let (name, change) = (name.to_owned(), *change);
        self.write(move |tx| {
            let done = tx
                .prepare_cached(&format!(
                    "UPDATE keysmith_sequences
                     SET prev_next = next, next = ?2, max = ?3, block = ?4, version = version + 1
                     WHERE name = ?1 AND version = ?5 RETURNING {ROW_COLUMNS}"
                ))
                .and_then(|mut s| {
                    s.query_row(
                        params![
                            name,
                            change.next,
                            change.max,
                            change.block,
                            version_param(expected)
                        ],
                        row_from,
                    )
                    .optional()
                })
                .map_err(db_err)?;
            match done {
                Some(row) => Ok(Put::Done(row)),
                None => Ok(Put::Conflict(require_row(tx, &name)?)),
            }
        })
        .await
    }

    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        let name = name.to_owned();
        // BEGIN IMMEDIATE is SQLite's row lock: no other writer until COMMIT.
        self.write(move |tx| {
            let r = require_row(tx, &name)?.plan(n)?;
            tx.execute(
                "UPDATE keysmith_sequences SET prev_next = next, next = ?2, version = ?3 WHERE name = ?1",
                params![name, r.end, version_param(r.version)],
            )
            .map_err(db_err)?;
            Ok(r)
        })
        .await
    }

    async fn reserve_atomic(&self, name: &str, n: i64) -> Result<Reservation> {
        let name = name.to_owned();
        self.write(move |tx| {
            // One statement reserves and returns the range; SQLite evaluates every
            // SET expression against the old row, so prev_next is the old next.
            let got = tx
                .prepare_cached(
                    "UPDATE keysmith_sequences
                     SET prev_next = next,
                         next = CASE WHEN max + 1 - next <= ?2 THEN max + 1 ELSE next + ?2 END,
                         version = version + 1
                     WHERE name = ?1 AND next <= max
                     RETURNING prev_next, next, version",
                )
                .and_then(|mut s| {
                    s.query_row(params![name, n], |r| {
                        Ok(Reservation {
                            start: r.get(0)?,
                            end: r.get(1)?,
                            version: r.get::<_, i64>(2)? as u64,
                        })
                    })
                    .optional()
                })
                .map_err(db_err)?;
            match got {
                Some(r) => Ok(r),
                // Nothing updated: tell a missing sequence from an exhausted one.
                None => require_row(tx, &name)?.plan(n),
            }
        })
        .await
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

    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        let (name, delta) = (name.to_owned(), *delta);
        self.write(move |tx| {
            let row = require_row(tx, &name)?;
            let c = read_counts_on(tx, &name)?.apply(&row, &delta, now_ms);
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
        let name = name.to_owned();
        self.write(move |tx| {
            tx.execute(
                "DELETE FROM keysmith_sequence_counts WHERE name = ?1",
                [&name],
            )
            .map_err(db_err)?;
            match tx
                .execute("DELETE FROM keysmith_sequences WHERE name = ?1", [&name])
                .map_err(db_err)?
            {
                0 => Err(Error::not_found("sequence", &name)),
                _ => Ok(()),
            }
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
    })
}

fn read_row(conn: &Connection, name: &str) -> Result<Option<SequenceRow>> {
    conn.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS} FROM keysmith_sequences WHERE name = ?1"
    ))
    .and_then(|mut s| s.query_row([name], row_from).optional())
    .map_err(db_err)
}

/// Inserts a sequence's row (in a write transaction).
pub(super) fn insert(tx: &rusqlite::Transaction<'_>, spec: &SequenceSpec) -> Result<SequenceRow> {
    let inserted = tx
        .execute(
            "INSERT INTO keysmith_sequences (name, next, start, max, block, version, prev_next)
             VALUES (?1, ?2, ?2, ?3, ?4, 1, ?2) ON CONFLICT (name) DO NOTHING",
            params![spec.name, spec.start, spec.max, spec.block],
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

fn version_param(v: u64) -> i64 {
    // Versions start at 1 and grow by one per change: they stay far below i64::MAX.
    v as i64
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

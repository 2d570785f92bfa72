//! SQLite: the [`NumberStore`] half of the contract. Every call is one
//! `BEGIN IMMEDIATE` transaction, so takes, commits and releases in any
//! number of processes run one after the other. The clock (periods, ticket
//! expiry) is the system clock: the file is on this machine, and so is
//! every process that opens it.
//!
//! Tables (schema version 3): `keysmith_numbering` (the settings as JSON
//! and the current period; gone with its sequence), `keysmith_number_counters`
//! (the next new number per period) and `keysmith_tickets` (the open
//! numbers: a ticket's token, `NULL` once released, and its expiry). A
//! committed number leaves no row.

use super::*;
use keysmith_core::driver::{
    HeldNumber, NumberStore, Numbering, PeriodRange, Settle, TakenNumber, TicketTake, not_numbered,
    refused, ticket_ttl_ms,
};

/// Version 3: numbered sequences. `CREATE TABLE IF NOT EXISTS`, so it also
/// runs on older files.
pub(super) const TICKETS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS keysmith_numbering (
    name           TEXT PRIMARY KEY REFERENCES keysmith_sequences (name) ON DELETE CASCADE,
    settings       TEXT NOT NULL,
    current_period INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS keysmith_number_counters (
    name   TEXT NOT NULL REFERENCES keysmith_numbering (name) ON DELETE CASCADE,
    period INTEGER NOT NULL,
    next   INTEGER NOT NULL,
    PRIMARY KEY (name, period)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS keysmith_tickets (
    name       TEXT NOT NULL REFERENCES keysmith_numbering (name) ON DELETE CASCADE,
    period     INTEGER NOT NULL,
    value      INTEGER NOT NULL,
    token      TEXT,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (name, period, value)
) WITHOUT ROWID;
";

/// The later of `period` and the current one, made current, with the
/// sequence's row.
fn current(tx: &rusqlite::Transaction<'_>, name: &str, period: i64) -> Result<(i64, SequenceRow)> {
    let row = super::sequences::require(tx, name)?;
    let p: Option<i64> = tx
        .query_row(
            "UPDATE keysmith_numbering SET current_period = max(current_period, ?2)
             WHERE name = ?1 RETURNING current_period",
            params![name, period],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    Ok((p.ok_or_else(|| not_numbered(name))?, row))
}

/// [`current`], with the generation rule of numbered sequences applied
/// first ([`keysmith_core::driver::numbers_fence`]), in the same transaction.
fn current_fenced(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    period: i64,
    gapless: bool,
    generation: &str,
) -> Result<(i64, SequenceRow)> {
    let (period, row) = current(tx, name, period)?;
    let rule = keysmith_core::driver::numbers_fence(&row, gapless, generation);
    rule.check(name)?;
    let mut skipped = 0;
    if let keysmith_core::driver::NumbersFence::Skip(skip) = rule {
        let (before, after) = skip_numbers(tx, &row, period, skip)?;
        skipped = after - before;
    }
    if rule != keysmith_core::driver::NumbersFence::Current {
        record_generation(tx, name, generation, skipped)?;
    }
    Ok((period, row))
}

/// Moves the counter of `period` forward by `skip`; returns it before and after.
fn skip_numbers(
    tx: &rusqlite::Transaction<'_>,
    row: &SequenceRow,
    period: i64,
    skip: i64,
) -> Result<(i64, i64)> {
    let before = next_of(tx, &row.name, period, row.start)?;
    let after = keysmith_core::driver::skip_counter(before, row.max, skip);
    set_next(tx, &row.name, period, after)?;
    Ok((before, after))
}

fn record_generation(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    generation: &str,
    skipped: i64,
) -> Result<()> {
    tx.execute(
        "UPDATE keysmith_sequences SET generation = ?2, failover_skipped = failover_skipped + ?3
         WHERE name = ?1",
        params![name, generation, skipped],
    )
    .map_err(db_err)?;
    Ok(())
}

/// The next new number of a period (the sequence's start if none was taken).
fn next_of(tx: &rusqlite::Transaction<'_>, name: &str, period: i64, start: i64) -> Result<i64> {
    let next: Option<i64> = tx
        .query_row(
            "SELECT next FROM keysmith_number_counters WHERE name = ?1 AND period = ?2",
            params![name, period],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    Ok(next.unwrap_or(start))
}

fn set_next(tx: &rusqlite::Transaction<'_>, name: &str, period: i64, next: i64) -> Result<()> {
    tx.execute(
        "INSERT INTO keysmith_number_counters (name, period, next) VALUES (?1, ?2, ?3)
         ON CONFLICT (name, period) DO UPDATE SET next = excluded.next",
        params![name, period, next],
    )
    .map_err(db_err)?;
    Ok(())
}

/// What the store holds for an open number: `None` when it is not open,
/// `Some(token)` (`None` once released) otherwise.
fn holder(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    period: i64,
    value: i64,
) -> Result<Option<Option<String>>> {
    tx.query_row(
        "SELECT token FROM keysmith_tickets WHERE name = ?1 AND period = ?2 AND value = ?3",
        params![name, period, value],
        |r| r.get(0),
    )
    .optional()
    .map_err(db_err)
}

#[async_trait]
impl NumberStore for SqliteStore {
    async fn read_numbering(&self, name: &str) -> Result<Option<keysmith_core::driver::Numbering>> {
        let name = name.to_owned();
        self.run(move |conn| read_numbering_on(conn, &name)).await
    }

    async fn replace_numbering(
        &self,
        name: &str,
        expected: &Numbering,
        new: &Numbering,
    ) -> Result<bool> {
        let (old, new) = (
            serde_json::to_string(expected).map_err(|e| Error::Corrupt(e.to_string()))?,
            serde_json::to_string(new).map_err(|e| Error::Corrupt(e.to_string()))?,
        );
        let name = name.to_owned();
        self.write(move |tx| {
            tx.execute(
                "UPDATE keysmith_numbering SET settings = ?3 WHERE name = ?1 AND settings = ?2",
                rusqlite::params![name, old, new],
            )
            .map(|n| n == 1)
            .map_err(db_err)
        })
        .await
    }

    async fn create_numbered(
        &self,
        spec: &SequenceSpec,
        numbering: &Numbering,
    ) -> Result<SequenceRow> {
        let (spec, generation) = (spec.clone(), self.generation.clone());
        let settings =
            serde_json::to_string(numbering).map_err(|e| Error::Corrupt(e.to_string()))?;
        let numbering = numbering.clone();
        self.write(move |tx| {
            let row = super::sequences::insert(tx, &spec, Some(&numbering), &generation)?;
            tx.execute(
                "INSERT INTO keysmith_numbering (name, settings, current_period) VALUES (?1, ?2, 0)",
                params![spec.name, settings],
            )
            .map_err(db_err)?;
            Ok(row)
        })
        .await
    }

    async fn clock_ms(&self) -> Result<i64> {
        Ok(keysmith_core::driver::now_ms())
    }

    async fn reserve_numbers(&self, name: &str, period: i64, n: i64) -> Result<PeriodRange> {
        keysmith_core::driver::check_count("count", n)?;
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let (period, row) = current_fenced(tx, &name, period, false, &generation)?;
            let next = next_of(tx, &name, period, row.start)?;
            let r = SequenceRow { next, ..row }.plan(n)?;
            set_next(tx, &name, period, r.end)?;
            Ok(PeriodRange {
                period,
                start: r.start,
                end: r.end,
            })
        })
        .await
    }

    async fn take_ticket_checked(&self, take: &TicketTake<'_>) -> Result<TakenNumber> {
        let (name, period, token, ttl) = (take.name, take.period, take.token, take.ttl);
        let (name, token, generation) =
            (name.to_owned(), token.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let (period, row) = current_fenced(tx, &name, period, true, &generation)?;
            let now = keysmith_core::driver::now_ms();
            let expires = now.saturating_add(ticket_ttl_ms(ttl));
            let again: Option<i64> = tx
                .query_row(
                    "UPDATE keysmith_tickets SET token = ?3, expires_ms = ?4
                     WHERE name = ?1 AND period = ?2 AND value = (
                         SELECT value FROM keysmith_tickets
                         WHERE name = ?1 AND period = ?2 AND (token IS NULL OR expires_ms <= ?5)
                         ORDER BY value LIMIT 1)
                     RETURNING value",
                    params![name, period, token, expires, now],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            if let Some(value) = again {
                return Ok(TakenNumber { period, value });
            }
            let next = next_of(tx, &name, period, row.start)?;
            let value = SequenceRow { next, ..row }.plan(1)?.start;
            set_next(tx, &name, period, value + 1)?;
            tx.execute(
                "INSERT INTO keysmith_tickets (name, period, value, token, expires_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![name, period, value, token, expires],
            )
            .map_err(db_err)?;
            Ok(TakenNumber { period, value })
        })
        .await
    }

    /// Commit (delete the open number) or release (empty its token) a number
    /// held by `token`; when it is not, says why.
    async fn settle_ticket(&self, what: Settle, held: &HeldNumber<'_>) -> Result<()> {
        let (name, period, value, token) = (held.name, held.period, held.value, held.token);
        let sql = if what == Settle::Commit {
            "DELETE FROM keysmith_tickets
             WHERE name = ?1 AND period = ?2 AND value = ?3 AND token = ?4"
        } else {
            "UPDATE keysmith_tickets SET token = NULL, expires_ms = 0
             WHERE name = ?1 AND period = ?2 AND value = ?3 AND token = ?4"
        };
        let (name, token) = (name.to_owned(), token.to_owned());
        self.write(move |tx| {
            let n = tx
                .execute(sql, params![name, period, value, token])
                .map_err(db_err)?;
            if n == 1 {
                return Ok(());
            }
            super::sequences::require(tx, &name)?;
            let h = holder(tx, &name, period, value)?;
            Err(refused(
                what,
                &name,
                period,
                value,
                h.as_ref().map(|t| t.as_deref()),
            ))
        })
        .await
    }

    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)> {
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let (period, row) = current(tx, &name, i64::MIN)?;
            let (before, after) = skip_numbers(tx, &row, period, skip)?;
            record_generation(tx, &name, &generation, after - before)?;
            Ok((period, before, after))
        })
        .await
    }
}

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
    HeldNumber, NumberStore, Numbering, NumberingSwap, NumbersRead, NumbersTx, PeriodRange, Settle,
    TakenNumber, TicketRows, TicketTake, fence_numbers_in, not_numbered, numbering_json,
    reserve_numbers_in, run_ready, settle_ticket_on, take_ticket_in, ticket_ttl_ms,
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

/// One `BEGIN IMMEDIATE` transaction of this store: the steps of a numbered
/// sequence's take, reservation, fence and settlement that
/// [`reserve_numbers_in`], [`take_ticket_in`], [`fence_numbers_in`] and
/// [`settle_ticket_on`] run. Synchronous: no step ever waits, so
/// [`run_ready`] drives them on the store's blocking thread.
struct InTx<'a, 'c> {
    tx: &'a rusqlite::Transaction<'c>,
    /// The store's generation (kept in the file, read at open).
    generation: &'a str,
    /// The system clock as the first ticket step of this transaction read
    /// it: its tickets expire by one reading.
    now: Option<i64>,
}

impl<'a, 'c> InTx<'a, 'c> {
    fn new(tx: &'a rusqlite::Transaction<'c>, generation: &'a str) -> Self {
        InTx {
            tx,
            generation,
            now: None,
        }
    }

    fn now(&mut self) -> i64 {
        *self.now.get_or_insert_with(keysmith_core::driver::now_ms)
    }
}

impl NumbersTx for InTx<'_, '_> {
    async fn current(&mut self, name: &str, period: i64) -> Result<(i64, SequenceRow, String)> {
        let row = super::sequences::require(self.tx, name)?;
        let p: Option<i64> = self
            .tx
            .query_row(
                "UPDATE keysmith_numbering SET current_period = max(current_period, ?2)
                 WHERE name = ?1 RETURNING current_period",
                params![name, period],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        let p = p.ok_or_else(|| not_numbered(name))?;
        Ok((p, row, self.generation.to_owned()))
    }

    async fn counter(&mut self, name: &str, period: i64) -> Result<Option<i64>> {
        self.tx
            .query_row(
                "SELECT next FROM keysmith_number_counters WHERE name = ?1 AND period = ?2",
                params![name, period],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }

    async fn set_counter(&mut self, name: &str, period: i64, next: i64) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO keysmith_number_counters (name, period, next) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name, period) DO UPDATE SET next = excluded.next",
                params![name, period, next],
            )
            .map_err(db_err)?;
        Ok(())
    }

    async fn record_generation(
        &mut self,
        name: &str,
        generation: &str,
        skipped: i64,
    ) -> Result<()> {
        self.tx
            .execute(
                "UPDATE keysmith_sequences SET generation = ?2, failover_skipped = failover_skipped + ?3
                 WHERE name = ?1",
                params![name, generation, skipped],
            )
            .map_err(db_err)?;
        Ok(())
    }

    async fn retake_ticket(&mut self, take: &TicketTake<'_>) -> Result<Option<i64>> {
        let now = self.now();
        let expires = now.saturating_add(ticket_ttl_ms(take.ttl));
        self.tx
            .query_row(
                "UPDATE keysmith_tickets SET token = ?3, expires_ms = ?4
                 WHERE name = ?1 AND period = ?2 AND value = (
                     SELECT value FROM keysmith_tickets
                     WHERE name = ?1 AND period = ?2 AND (token IS NULL OR expires_ms <= ?5)
                     ORDER BY value LIMIT 1)
                 RETURNING value",
                params![take.name, take.period, take.token, expires, now],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }

    async fn insert_ticket(&mut self, take: &TicketTake<'_>, value: i64) -> Result<()> {
        let expires = self.now().saturating_add(ticket_ttl_ms(take.ttl));
        self.tx
            .execute(
                "INSERT INTO keysmith_tickets (name, period, value, token, expires_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![take.name, take.period, value, take.token, expires],
            )
            .map_err(db_err)?;
        Ok(())
    }
}

impl TicketRows for InTx<'_, '_> {
    async fn settle_row(&mut self, what: Settle, held: &HeldNumber<'_>) -> Result<bool> {
        let sql = if what == Settle::Commit {
            "DELETE FROM keysmith_tickets
             WHERE name = ?1 AND period = ?2 AND value = ?3 AND token = ?4"
        } else {
            "UPDATE keysmith_tickets SET token = NULL, expires_ms = 0
             WHERE name = ?1 AND period = ?2 AND value = ?3 AND token = ?4"
        };
        let n = self
            .tx
            .execute(sql, params![held.name, held.period, held.value, held.token])
            .map_err(db_err)?;
        Ok(n == 1)
    }

    async fn sequence_exists(&mut self, name: &str) -> Result<bool> {
        self.tx
            .query_row(
                "SELECT 1 FROM keysmith_sequences WHERE name = ?1",
                params![name],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(db_err)
    }

    async fn holder(&mut self, held: &HeldNumber<'_>) -> Result<Option<Option<String>>> {
        self.tx
            .query_row(
                "SELECT token FROM keysmith_tickets WHERE name = ?1 AND period = ?2 AND value = ?3",
                params![held.name, held.period, held.value],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }
}

#[async_trait]
impl NumberStore for SqliteStore {
    async fn read_numbering(&self, name: &str) -> Result<Option<keysmith_core::driver::Numbering>> {
        let name = name.to_owned();
        self.run(move |conn| read_numbering_on(conn, &name)).await
    }

    async fn swap_numbering(&self, swap: &NumberingSwap<'_>) -> Result<bool> {
        let (old, new) = swap.json()?;
        let name = swap.name.to_owned();
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
        let settings = numbering_json(numbering)?;
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

    async fn reserve_numbers_in(
        &self,
        name: &str,
        period: i64,
        n: i64,
        incarnation: u64,
    ) -> Result<PeriodRange> {
        keysmith_core::driver::check_count("count", n)?;
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            let mut t = InTx::new(tx, &generation);
            run_ready(reserve_numbers_in(&mut t, &name, period, n, incarnation))
        })
        .await
    }

    async fn take_ticket_checked(&self, take: &TicketTake<'_>) -> Result<TakenNumber> {
        let (period, ttl, incarnation) = (take.period, take.ttl, take.incarnation);
        let (name, token, generation) = (
            take.name.to_owned(),
            take.token.to_owned(),
            self.generation.clone(),
        );
        self.write(move |tx| {
            let take = TicketTake {
                name: &name,
                period,
                token: &token,
                ttl,
                incarnation,
            };
            run_ready(take_ticket_in(&mut InTx::new(tx, &generation), &take))
        })
        .await
    }

    /// Commit (delete the open number) or release (empty its token) a number
    /// held by `token`; when it is not, says why.
    async fn settle_ticket(&self, what: Settle, held: &HeldNumber<'_>) -> Result<()> {
        let (period, value) = (held.period, held.value);
        let (name, token, generation) = (
            held.name.to_owned(),
            held.token.to_owned(),
            self.generation.clone(),
        );
        self.write(move |tx| {
            let held = HeldNumber {
                name: &name,
                period,
                value,
                token: &token,
            };
            run_ready(settle_ticket_on(
                &mut InTx::new(tx, &generation),
                what,
                &held,
            ))
        })
        .await
    }

    async fn read_numbers(&self, name: &str) -> Result<Option<NumbersRead>> {
        let name = name.to_owned();
        self.run(move |conn| {
            conn.query_row(
                "SELECT n.current_period,
                    (SELECT c.next FROM keysmith_number_counters c
                     WHERE c.name = n.name AND c.period = n.current_period),
                    (SELECT count(*) FROM keysmith_tickets t
                     WHERE t.name = n.name AND t.period = n.current_period AND t.token IS NOT NULL),
                    (SELECT count(*) FROM keysmith_tickets t
                     WHERE t.name = n.name AND t.period = n.current_period AND t.token IS NULL)
                 FROM keysmith_numbering n WHERE n.name = ?1",
                params![name],
                |r| {
                    Ok(NumbersRead {
                        period: r.get(0)?,
                        counter: r.get(1)?,
                        held: r.get(2)?,
                        released: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(db_err)
        })
        .await
    }

    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)> {
        let (name, generation) = (name.to_owned(), self.generation.clone());
        self.write(move |tx| {
            run_ready(fence_numbers_in(
                &mut InTx::new(tx, &generation),
                &name,
                skip,
            ))
        })
        .await
    }
}

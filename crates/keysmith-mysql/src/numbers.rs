//! MySQL: the [`NumberStore`] half of the contract. The clock is the
//! server's ([`NOW_MS`]): periods ([`NumberStore::clock_ms`]) and ticket
//! expiry are decided by one clock whatever the hosts' clocks say.
//!
//! Tables: `keysmith_numbering` (the settings as JSON and the current
//! period; gone with its sequence), `keysmith_number_counters` (the next new
//! number per period) and `keysmith_tickets` (the open numbers: token, NULL
//! once released, and `expires_at` in ms). A committed number leaves no row.
//!
//! A take or reservation is one transaction that starts by moving the
//! current period with an UPDATE of the numbering row: its row lock puts the
//! takes of one sequence one after the other, so a counter is read and
//! written by one caller at a time. Commit and release are one statement on
//! the ticket's row, conditional on its token.

use mysql_async::Conn;

use super::*;
use keysmith_core::driver::{
    HeldNumber, NumberStore, Numbering, NumberingSwap, NumbersRead, NumbersTx, PeriodRange, Settle,
    TakenNumber, TicketRows, TicketTake, fence_numbers_in, not_numbered, numbering_json,
    reserve_numbers_in, settle_ticket_on, take_ticket_in, ticket_ttl_ms,
};

impl<'a, 't> NumbersTx for InTx<'a, 't> {
    async fn current(&mut self, name: &str, period: i64) -> Result<(i64, SequenceRow, String)> {
        let (store, tx) = (self.store, &mut *self.tx);
        let bad = |e: mysql_async::Error| store.my(&e);
        tx.exec_drop(
            "UPDATE keysmith_numbering SET current_period = GREATEST(current_period, ?) WHERE name = ?",
            (period, name),
        )
        .await
        .map_err(bad)?;
        if tx.affected_rows() != 1 {
            let exists: Option<i64> = tx
                .exec_first("SELECT 1 FROM keysmith_sequences WHERE name = ?", (name,))
                .await
                .map_err(bad)?;
            return Err(match exists {
                Some(_) => not_numbered(name),
                None => Error::not_found("sequence", name),
            });
        }
        let r: Row = tx
            .exec_first(
                format!(
                    "SELECT n.current_period, {}, {}
                     FROM keysmith_numbering n JOIN keysmith_sequences q ON q.name = n.name
                     WHERE n.name = ?",
                    cols_of("q"),
                    store.generation_expr()
                ),
                (name,),
            )
            .await
            .map_err(bad)?
            .ok_or_else(|| Error::not_found("sequence", name))?;
        Ok((
            store.col(&r, 0)?,
            store.sequence_row(&r, 1)?,
            store.col(&r, 1 + NCOLS)?,
        ))
    }

    async fn counter(&mut self, name: &str, period: i64) -> Result<Option<i64>> {
        self.tx
            .exec_first(
                "SELECT next_value FROM keysmith_number_counters WHERE name = ? AND period = ?",
                (name, period),
            )
            .await
            .map_err(|e| self.store.my(&e))
    }

    async fn set_counter(&mut self, name: &str, period: i64, next: i64) -> Result<()> {
        self.tx
            .exec_drop(
                "INSERT INTO keysmith_number_counters (name, period, next_value) VALUES (?, ?, ?)
                 ON DUPLICATE KEY UPDATE next_value = VALUES(next_value)",
                (name, period, next),
            )
            .await
            .map_err(|e| self.store.my(&e))
    }

    async fn record_generation(
        &mut self,
        name: &str,
        generation: &str,
        skipped: i64,
    ) -> Result<()> {
        self.tx
            .exec_drop(
                "UPDATE keysmith_sequences SET generation = ?, failover_skipped = failover_skipped + ?
                 WHERE name = ?",
                (generation, skipped, name),
            )
            .await
            .map_err(|e| self.store.my(&e))
    }

    async fn retake_ticket(&mut self, take: &TicketTake<'_>) -> Result<Option<i64>> {
        let (store, tx) = (self.store, &mut *self.tx);
        let (name, period) = (take.name, take.period);
        let bad = |e: mysql_async::Error| store.my(&e);
        // The numbering row's lock makes this the only take of the
        // sequence now: the lowest open number that was released or
        // expired is ours to take again.
        let again: Option<i64> = tx
            .exec_first(
                format!(
                    "SELECT value FROM keysmith_tickets
                     WHERE name = ? AND period = ? AND (token IS NULL OR expires_at <= {NOW_MS})
                     ORDER BY value LIMIT 1 FOR UPDATE"
                ),
                (name, period),
            )
            .await
            .map_err(bad)?;
        if let Some(value) = again {
            tx.exec_drop(
                format!(
                    "UPDATE keysmith_tickets SET token = ?, expires_at = {NOW_MS} + ?
                     WHERE name = ? AND period = ? AND value = ?"
                ),
                (take.token, ticket_ttl_ms(take.ttl), name, period, value),
            )
            .await
            .map_err(bad)?;
        }
        Ok(again)
    }

    async fn insert_ticket(&mut self, take: &TicketTake<'_>, value: i64) -> Result<()> {
        let ttl_ms = ticket_ttl_ms(take.ttl);
        self.tx
            .exec_drop(
                format!(
                    "INSERT INTO keysmith_tickets (name, period, value, token, expires_at)
                     VALUES (?, ?, ?, ?, {NOW_MS} + ?)"
                ),
                (take.name, take.period, value, take.token, ttl_ms),
            )
            .await
            .map_err(|e| self.store.my(&e))
    }
}

/// A connection of this store, each statement committed alone: the
/// statements of a ticket's settlement that [`settle_ticket_on`] runs.
struct OnConn<'a> {
    store: &'a MysqlStore,
    c: &'a mut Conn,
}

impl<'a> TicketRows for OnConn<'a> {
    async fn settle_row(&mut self, what: Settle, held: &HeldNumber<'_>) -> Result<bool> {
        let write = if what == Settle::Commit {
            "DELETE FROM keysmith_tickets WHERE name = ? AND period = ? AND value = ? AND token = ?"
        } else {
            // expires_at 0: free to take at once.
            "UPDATE keysmith_tickets SET token = NULL, expires_at = 0
             WHERE name = ? AND period = ? AND value = ? AND token = ?"
        };
        self.c
            .exec_drop(write, (held.name, held.period, held.value, held.token))
            .await
            .map_err(|e| self.store.my(&e))?;
        Ok(self.c.affected_rows() == 1)
    }

    async fn sequence_exists(&mut self, name: &str) -> Result<bool> {
        let exists: Option<i64> = self
            .c
            .exec_first("SELECT 1 FROM keysmith_sequences WHERE name = ?", (name,))
            .await
            .map_err(|e| self.store.my(&e))?;
        Ok(exists.is_some())
    }

    async fn holder(&mut self, held: &HeldNumber<'_>) -> Result<Option<Option<String>>> {
        self.c
            .exec_first(
                "SELECT token FROM keysmith_tickets WHERE name = ? AND period = ? AND value = ?",
                (held.name, held.period, held.value),
            )
            .await
            .map_err(|e| self.store.my(&e))
    }
}

#[async_trait]
impl NumberStore for MysqlStore {
    async fn read_numbering(&self, name: &str) -> Result<Option<Numbering>> {
        with_conn(self, async |c| {
            let text: Option<String> = c
                .exec_first(
                    "SELECT settings FROM keysmith_numbering WHERE name = ?",
                    (name,),
                )
                .await
                .map_err(|e| self.my(&e))?;
            text.map(|t| keysmith_core::driver::parse_numbering(name, &t))
                .transpose()
        })
        .await
    }

    async fn swap_numbering(&self, swap: &NumberingSwap<'_>) -> Result<bool> {
        let (old, new) = swap.json()?;
        with_conn(self, async |c| {
            c.exec_drop(
                "UPDATE keysmith_numbering SET settings = ? WHERE name = ? AND settings = ?",
                (&new, swap.name, &old),
            )
            .await
            .map_err(|e| self.my(&e))?;
            Ok(c.affected_rows() == 1)
        })
        .await
    }

    async fn create_numbered(
        &self,
        spec: &SequenceSpec,
        numbering: &Numbering,
    ) -> Result<SequenceRow> {
        spec.validate()?;
        let settings = numbering_json(numbering)?;
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            let row = self.insert_sequence(&mut tx, spec, Some(numbering)).await?;
            tx.exec_drop(
                "INSERT INTO keysmith_numbering (name, settings, current_period) VALUES (?, ?, 0)",
                (&spec.name, &settings),
            )
            .await
            .map_err(bad)?;
            tx.commit().await.map_err(bad)?;
            Ok(row)
        })
        .await
    }

    async fn clock_ms(&self) -> Result<i64> {
        with_conn(self, async |c| {
            c.query_first(format!("SELECT {NOW_MS}"))
                .await
                .map_err(|e| self.my(&e))?
                .ok_or_else(|| self.corrupt("the server's clock gave no answer"))
        })
        .await
    }

    async fn reserve_numbers_in(
        &self,
        name: &str,
        period: i64,
        n: i64,
        incarnation: u64,
    ) -> Result<PeriodRange> {
        keysmith_core::driver::check_count("count", n)?;
        self.in_tx(async |t| reserve_numbers_in(t, name, period, n, incarnation).await)
            .await
    }

    async fn take_ticket_checked(&self, take: &TicketTake<'_>) -> Result<TakenNumber> {
        self.in_tx(async |t| take_ticket_in(t, take).await).await
    }

    async fn settle_ticket(&self, what: Settle, held: &HeldNumber<'_>) -> Result<()> {
        with_conn(self, async |c| {
            settle_ticket_on(&mut OnConn { store: self, c }, what, held).await
        })
        .await
    }

    async fn read_numbers(&self, name: &str) -> Result<Option<NumbersRead>> {
        with_conn(self, async |c| {
            let row: Option<(i64, Option<i64>, i64, i64)> = c
                .exec_first(
                    "SELECT n.current_period,
                        (SELECT c.next_value FROM keysmith_number_counters c
                         WHERE c.name = n.name AND c.period = n.current_period),
                        (SELECT COUNT(*) FROM keysmith_tickets t
                         WHERE t.name = n.name AND t.period = n.current_period AND t.token IS NOT NULL),
                        (SELECT COUNT(*) FROM keysmith_tickets t
                         WHERE t.name = n.name AND t.period = n.current_period AND t.token IS NULL)
                     FROM keysmith_numbering n WHERE n.name = ?",
                    (name,),
                )
                .await
                .map_err(|e| self.my(&e))?;
            Ok(row.map(|(period, counter, held, released)| NumbersRead {
                period,
                counter,
                held,
                released,
            }))
        })
        .await
    }

    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)> {
        self.in_tx(async |t| fence_numbers_in(t, name, skip).await)
            .await
    }
}

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

use mysql_async::Transaction;

use super::*;
use keysmith_core::driver::{
    HeldNumber, NumberStore, Numbering, NumbersTx, PeriodRange, Settle, TakenNumber, TicketTake,
    current_fenced, fence_numbers_in, not_numbered, refused, ticket_ttl_ms,
};

impl MysqlStore {
    async fn next_of(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        period: i64,
        start: i64,
    ) -> Result<i64> {
        let next: Option<i64> = tx
            .exec_first(
                "SELECT next_value FROM keysmith_number_counters WHERE name = ? AND period = ?",
                (name, period),
            )
            .await
            .map_err(|e| self.my(&e))?;
        Ok(next.unwrap_or(start))
    }

    async fn set_next(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        period: i64,
        next: i64,
    ) -> Result<()> {
        tx.exec_drop(
            "INSERT INTO keysmith_number_counters (name, period, next_value) VALUES (?, ?, ?)
             ON DUPLICATE KEY UPDATE next_value = VALUES(next_value)",
            (name, period, next),
        )
        .await
        .map_err(|e| self.my(&e))
    }
}

/// One transaction of this store: the steps of a numbered sequence's fence
/// that [`current_fenced`] and [`fence_numbers_in`] run.
struct InTx<'a, 't> {
    store: &'a MysqlStore,
    tx: &'a mut Transaction<'t>,
}

impl MysqlStore {
    fn in_tx<'a, 't>(&'a self, tx: &'a mut Transaction<'t>) -> InTx<'a, 't> {
        InTx { store: self, tx }
    }
}

#[async_trait]
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
                    "SELECT n.current_period, q.name, q.next_value, q.start_value, q.max_value,
                            q.block, q.version, q.generation, q.failover_skip,
                            q.failover_skip_set, q.failover_skipped, {}
                     FROM keysmith_numbering n JOIN keysmith_sequences q ON q.name = n.name
                     WHERE n.name = ?",
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
            store.col(&r, 11)?,
        ))
    }

    async fn skip_numbers(
        &mut self,
        row: &SequenceRow,
        period: i64,
        skip: i64,
    ) -> Result<(i64, i64)> {
        let (store, tx) = (self.store, &mut *self.tx);
        let before = store.next_of(tx, &row.name, period, row.start).await?;
        let after = keysmith_core::driver::skip_counter(before, row.max, skip);
        store.set_next(tx, &row.name, period, after).await?;
        Ok((before, after))
    }

    async fn record_generation(
        &mut self,
        name: &str,
        generation: &str,
        skipped: i64,
    ) -> Result<()> {
        let (store, tx) = (self.store, &mut *self.tx);
        tx.exec_drop(
            "UPDATE keysmith_sequences SET generation = ?, failover_skipped = failover_skipped + ?
             WHERE name = ?",
            (generation, skipped, name),
        )
        .await
        .map_err(|e| store.my(&e))
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
        with_conn(self, async |c| {
            c.exec_drop(
                "UPDATE keysmith_numbering SET settings = ? WHERE name = ? AND settings = ?",
                (&new, name, &old),
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
        let settings =
            serde_json::to_string(numbering).map_err(|e| Error::Corrupt(e.to_string()))?;
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

    async fn reserve_numbers(&self, name: &str, period: i64, n: i64) -> Result<PeriodRange> {
        keysmith_core::driver::check_count("count", n)?;
        with_conn(self, async |c| {
            let mut tx = begin(c).await.map_err(|e| self.my(&e))?;
            let (period, row) =
                current_fenced(&mut self.in_tx(&mut tx), name, period, false).await?;
            let next = self.next_of(&mut tx, name, period, row.start).await?;
            let r = SequenceRow { next, ..row }.plan(n)?;
            self.set_next(&mut tx, name, period, r.end).await?;
            tx.commit().await.map_err(|e| self.my(&e))?;
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
        let ttl = ticket_ttl_ms(ttl);
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            let (period, row) =
                current_fenced(&mut self.in_tx(&mut tx), name, period, true).await?;
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
            let value = match again {
                Some(value) => {
                    tx.exec_drop(
                        format!(
                            "UPDATE keysmith_tickets SET token = ?, expires_at = {NOW_MS} + ?
                             WHERE name = ? AND period = ? AND value = ?"
                        ),
                        (token, ttl, name, period, value),
                    )
                    .await
                    .map_err(bad)?;
                    value
                }
                None => {
                    let next = self.next_of(&mut tx, name, period, row.start).await?;
                    let value = SequenceRow { next, ..row }.plan(1)?.start;
                    self.set_next(&mut tx, name, period, value + 1).await?;
                    tx.exec_drop(
                        format!(
                            "INSERT INTO keysmith_tickets (name, period, value, token, expires_at)
                             VALUES (?, ?, ?, ?, {NOW_MS} + ?)"
                        ),
                        (name, period, value, token, ttl),
                    )
                    .await
                    .map_err(bad)?;
                    value
                }
            };
            tx.commit().await.map_err(bad)?;
            Ok(TakenNumber { period, value })
        })
        .await
    }

    /// Commit (delete) or release a number held by `token`; when it is
    /// not, says why.
    async fn settle_ticket(&self, what: Settle, held: &HeldNumber<'_>) -> Result<()> {
        let (name, period, value, token) = (held.name, held.period, held.value, held.token);
        let write = if what == Settle::Commit {
            "DELETE FROM keysmith_tickets WHERE name = ? AND period = ? AND value = ? AND token = ?"
        } else {
            // expires_at 0: free to take at once.
            "UPDATE keysmith_tickets SET token = NULL, expires_at = 0
             WHERE name = ? AND period = ? AND value = ? AND token = ?"
        };
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            c.exec_drop(write, (name, period, value, token))
                .await
                .map_err(bad)?;
            if c.affected_rows() == 1 {
                return Ok(());
            }
            let exists: Option<i64> = c
                .exec_first("SELECT 1 FROM keysmith_sequences WHERE name = ?", (name,))
                .await
                .map_err(bad)?;
            if exists.is_none() {
                return Err(Error::not_found("sequence", name));
            }
            let holder: Option<Option<String>> = c
                .exec_first(
                    "SELECT token FROM keysmith_tickets WHERE name = ? AND period = ? AND value = ?",
                    (name, period, value),
                )
                .await
                .map_err(bad)?;
            Err(refused(
                what,
                name,
                period,
                value,
                holder.as_ref().map(|t| t.as_deref()),
            ))
        })
        .await
    }

    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)> {
        with_conn(self, async |c| {
            let bad = |e: mysql_async::Error| self.my(&e);
            let mut tx = begin(c).await.map_err(bad)?;
            let fenced = fence_numbers_in(&mut self.in_tx(&mut tx), name, skip).await?;
            tx.commit().await.map_err(bad)?;
            Ok(fenced)
        })
        .await
    }
}

//! PostgreSQL: the [`NumberStore`] half of the contract. The clock is the
//! server's `clock_timestamp()`: periods ([`NumberStore::clock_ms`]) and
//! ticket expiry are decided by one clock whatever the hosts' clocks say.
//!
//! Tables (migration 5): `numbering` (the settings as JSON and the current
//! period; gone with its sequence), `number_counters` (the next new number
//! per period) and `tickets` (the open numbers: token, `NULL` once released,
//! and `expires_at`). A committed number leaves no row.
//!
//! A take or reservation is one transaction that starts by moving the
//! current period with an UPDATE of the `numbering` row: its row lock puts
//! the takes of one sequence one after the other, so a counter is read and
//! written by one caller at a time. Commit and release are one statement on
//! the ticket's row, conditional on its token: a take that picked the same
//! expired row waits for it, re-evaluates its WHERE on the new row version
//! (gone, or with another token) and updates nothing, then takes a new
//! number instead.

use tokio_postgres::Transaction;

use super::*;
use keysmith_core::driver::{
    HeldNumber, NumberStore, Numbering, NumbersTx, PeriodRange, Settle, TakenNumber, TicketTake,
    current_fenced, fence_numbers_in, not_numbered, refused, ticket_ttl_ms,
};

/// Migration 5: numbered sequences (numbers.rs).
pub(super) const TICKETS_MIGRATION: &str = r#"
    CREATE TABLE {s}.numbering (
        name           text COLLATE "C" PRIMARY KEY
                       REFERENCES {s}.sequences (name) ON DELETE CASCADE,
        settings       text NOT NULL,
        current_period bigint NOT NULL
    );
    CREATE TABLE {s}.number_counters (
        name   text COLLATE "C" NOT NULL REFERENCES {s}.numbering (name) ON DELETE CASCADE,
        period bigint NOT NULL,
        next   bigint NOT NULL,
        PRIMARY KEY (name, period)
    );
    CREATE TABLE {s}.tickets (
        name       text COLLATE "C" NOT NULL REFERENCES {s}.numbering (name) ON DELETE CASCADE,
        period     bigint NOT NULL,
        value      bigint NOT NULL,
        token      text,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (name, period, value)
    );
    "#;

impl PostgresStore {
    async fn next_of(
        &self,
        tx: &Transaction<'_>,
        name: &str,
        period: i64,
        start: i64,
    ) -> Result<i64> {
        let s = quote_ident(&self.schema);
        let r = tx
            .query_opt(
                &format!("SELECT next FROM {s}.number_counters WHERE name = $1 AND period = $2"),
                &[&name, &period],
            )
            .await
            .map_err(|e| self.pg(&e))?;
        match r {
            Some(r) => r.try_get(0).map_err(|e| self.pg(&e)),
            None => Ok(start),
        }
    }

    async fn set_next(
        &self,
        tx: &Transaction<'_>,
        name: &str,
        period: i64,
        next: i64,
    ) -> Result<()> {
        let s = quote_ident(&self.schema);
        tx.execute(
            &format!(
                "INSERT INTO {s}.number_counters (name, period, next) VALUES ($1, $2, $3)
                 ON CONFLICT (name, period) DO UPDATE SET next = EXCLUDED.next"
            ),
            &[&name, &period, &next],
        )
        .await
        .map_err(|e| self.pg(&e))?;
        Ok(())
    }
}

/// One transaction of this store: the steps of a numbered sequence's fence
/// that [`current_fenced`] and [`fence_numbers_in`] run.
struct InTx<'a, 't> {
    store: &'a PostgresStore,
    tx: &'a Transaction<'t>,
}

impl PostgresStore {
    fn in_tx<'a, 't>(&'a self, tx: &'a Transaction<'t>) -> InTx<'a, 't> {
        InTx { store: self, tx }
    }
}

#[async_trait]
impl<'a, 't> NumbersTx for InTx<'a, 't> {
    async fn current(&mut self, name: &str, period: i64) -> Result<(i64, SequenceRow, String)> {
        let (store, tx) = (self.store, self.tx);
        let s = quote_ident(&store.schema);
        let r = tx
            .query_opt(
                &format!(
                    "UPDATE {s}.numbering n SET current_period = GREATEST(n.current_period, $2)
                     FROM {s}.sequences q WHERE n.name = $1 AND q.name = n.name
                     RETURNING n.current_period, q.name, q.next, q.start_value, q.max_value,
                               q.block, q.version, q.generation, q.failover_skip,
                               q.failover_skip_set, q.failover_skipped, {s}.store_generation()"
                ),
                &[&name, &period],
            )
            .await
            .map_err(|e| store.pg(&e))?;
        let Some(r) = r else {
            let exists = tx
                .query_opt(
                    &format!("SELECT 1 FROM {s}.sequences WHERE name = $1"),
                    &[&name],
                )
                .await
                .map_err(|e| store.pg(&e))?;
            return Err(match exists {
                Some(_) => not_numbered(name),
                None => Error::not_found("sequence", name),
            });
        };
        let p: i64 = r.try_get(0).map_err(|e| store.pg(&e))?;
        let generation: String = r.try_get(11).map_err(|e| store.pg(&e))?;
        Ok((p, store.row(&r, 1)?, generation))
    }

    async fn skip_numbers(
        &mut self,
        row: &SequenceRow,
        period: i64,
        skip: i64,
    ) -> Result<(i64, i64)> {
        let (store, tx) = (self.store, self.tx);
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
        let (store, tx) = (self.store, self.tx);
        let s = quote_ident(&store.schema);
        tx.execute(
            &format!(
                "UPDATE {s}.sequences SET generation = $2, failover_skipped = failover_skipped + $3
                 WHERE name = $1"
            ),
            &[&name, &generation, &skipped],
        )
        .await
        .map_err(|e| store.pg(&e))?;
        Ok(())
    }
}

#[async_trait]
impl NumberStore for PostgresStore {
    async fn read_numbering(&self, name: &str) -> Result<Option<Numbering>> {
        let s = quote_ident(&self.schema);
        with_conn(self, async |c| {
            let row = c
                .query_opt(
                    &format!("SELECT settings FROM {s}.numbering WHERE name = $1"),
                    &[&name],
                )
                .await
                .map_err(|e| self.pg(&e))?;
            match row {
                None => Ok(None),
                Some(r) => {
                    let text: String = r.try_get(0).map_err(|e| self.pg(&e))?;
                    keysmith_core::driver::parse_numbering(name, &text).map(Some)
                }
            }
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
        let s = quote_ident(&self.schema);
        with_conn(self, async |c| {
            c.execute(
                &format!(
                    "UPDATE {s}.numbering SET settings = $3 WHERE name = $1 AND settings = $2"
                ),
                &[&name, &old, &new],
            )
            .await
            .map(|n| n == 1)
            .map_err(|e| self.pg(&e))
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
        let s = quote_ident(&self.schema);
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let tx = c.transaction().await.map_err(bad)?;
            let row = self.insert_sequence(&tx, spec, Some(numbering)).await?;
            tx.execute(
                &format!(
                    "INSERT INTO {s}.numbering (name, settings, current_period) VALUES ($1, $2, 0)"
                ),
                &[&spec.name, &settings],
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
            let r = c
                .query_one(
                    "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
                    &[],
                )
                .await
                .map_err(|e| self.pg(&e))?;
            r.try_get(0).map_err(|e| self.pg(&e))
        })
        .await
    }

    async fn reserve_numbers(&self, name: &str, period: i64, n: i64) -> Result<PeriodRange> {
        keysmith_core::driver::check_count("count", n)?;
        with_conn(self, async |c| {
            let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
            let (period, row) = current_fenced(&mut self.in_tx(&tx), name, period, false).await?;
            let next = self.next_of(&tx, name, period, row.start).await?;
            let r = SequenceRow { next, ..row }.plan(n)?;
            self.set_next(&tx, name, period, r.end).await?;
            tx.commit().await.map_err(|e| self.pg(&e))?;
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
        let s = quote_ident(&self.schema);
        let ttl = ticket_ttl_ms(ttl);
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let tx = c.transaction().await.map_err(bad)?;
            let (period, row) = current_fenced(&mut self.in_tx(&tx), name, period, true).await?;
            let again = tx
                .query_opt(
                    &format!(
                        "UPDATE {s}.tickets SET token = $3,
                             expires_at = clock_timestamp() + $4::bigint * interval '1 millisecond'
                         WHERE name = $1 AND period = $2 AND value = (
                             SELECT value FROM {s}.tickets
                             WHERE name = $1 AND period = $2
                               AND (token IS NULL OR expires_at <= clock_timestamp())
                             ORDER BY value LIMIT 1)
                         RETURNING value"
                    ),
                    &[&name, &period, &token, &ttl],
                )
                .await
                .map_err(bad)?;
            let value = match again {
                Some(r) => r.try_get(0).map_err(bad)?,
                None => {
                    let next = self.next_of(&tx, name, period, row.start).await?;
                    let value = SequenceRow { next, ..row }.plan(1)?.start;
                    self.set_next(&tx, name, period, value + 1).await?;
                    tx.execute(
                        &format!(
                            "INSERT INTO {s}.tickets (name, period, value, token, expires_at)
                             VALUES ($1, $2, $3, $4,
                                     clock_timestamp() + $5::bigint * interval '1 millisecond')"
                        ),
                        &[&name, &period, &value, &token, &ttl],
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

    /// Commit (`delete`) or release a number held by `token`; when it is
    /// not, says why.
    async fn settle_ticket(&self, what: Settle, held: &HeldNumber<'_>) -> Result<()> {
        let (name, period, value, token) = (held.name, held.period, held.value, held.token);
        let s = quote_ident(&self.schema);
        let write = if what == Settle::Commit {
            format!(
                "DELETE FROM {s}.tickets WHERE name = $1 AND period = $2 AND value = $3 AND token = $4"
            )
        } else {
            format!(
                "UPDATE {s}.tickets SET token = NULL, expires_at = '-infinity'
                 WHERE name = $1 AND period = $2 AND value = $3 AND token = $4"
            )
        };
        with_conn(self, async |c| {
            let bad = |e: tokio_postgres::Error| self.pg(&e);
            let n = c
                .execute(&write, &[&name, &period, &value, &token])
                .await
                .map_err(bad)?;
            if n == 1 {
                return Ok(());
            }
            if c.query_opt(&format!("SELECT 1 FROM {s}.sequences WHERE name = $1"), &[&name])
                .await
                .map_err(bad)?
                .is_none()
            {
                return Err(Error::not_found("sequence", name));
            }
            let h: Option<Option<String>> = c
                .query_opt(
                    &format!(
                        "SELECT token FROM {s}.tickets WHERE name = $1 AND period = $2 AND value = $3"
                    ),
                    &[&name, &period, &value],
                )
                .await
                .map_err(bad)?
                .map(|r| r.try_get(0))
                .transpose()
                .map_err(bad)?;
            Err(refused(
                what,
                name,
                period,
                value,
                h.as_ref().map(|t| t.as_deref()),
            ))
        })
        .await
    }

    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)> {
        with_conn(self, async |c| {
            let tx = c.transaction().await.map_err(|e| self.pg(&e))?;
            let fenced = fence_numbers_in(&mut self.in_tx(&tx), name, skip).await?;
            tx.commit().await.map_err(|e| self.pg(&e))?;
            Ok(fenced)
        })
        .await
    }
}

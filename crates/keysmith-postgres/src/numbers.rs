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

use tokio_postgres::Client;

use super::*;
use keysmith_core::driver::{
    HeldNumber, NumberStore, Numbering, NumberingSwap, NumbersRead, NumbersTx, PeriodRange, Settle,
    TakenNumber, TicketRows, TicketTake, fence_numbers_in, not_numbered, numbering_json,
    reserve_numbers_in, settle_ticket_on, take_ticket_in, ticket_ttl_ms,
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
                               q.failover_skip_set, q.failover_skipped, q.incarnation,
                               {s}.store_generation()"
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
        let generation: String = r.try_get(12).map_err(|e| store.pg(&e))?;
        Ok((p, store.row(&r, 1)?, generation))
    }

    async fn counter(&mut self, name: &str, period: i64) -> Result<Option<i64>> {
        let store = self.store;
        let s = quote_ident(&store.schema);
        self.tx
            .query_opt(
                &format!("SELECT next FROM {s}.number_counters WHERE name = $1 AND period = $2"),
                &[&name, &period],
            )
            .await
            .map_err(|e| store.pg(&e))?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| store.pg(&e))
    }

    async fn set_counter(&mut self, name: &str, period: i64, next: i64) -> Result<()> {
        let s = quote_ident(&self.store.schema);
        self.tx
            .execute(
                &format!(
                    "INSERT INTO {s}.number_counters (name, period, next) VALUES ($1, $2, $3)
                     ON CONFLICT (name, period) DO UPDATE SET next = EXCLUDED.next"
                ),
                &[&name, &period, &next],
            )
            .await
            .map_err(|e| self.store.pg(&e))?;
        Ok(())
    }

    async fn record_generation(
        &mut self,
        name: &str,
        generation: &str,
        skipped: i64,
    ) -> Result<()> {
        let s = quote_ident(&self.store.schema);
        self.tx
            .execute(
                &format!(
                    "UPDATE {s}.sequences SET generation = $2, failover_skipped = failover_skipped + $3
                     WHERE name = $1"
                ),
                &[&name, &generation, &skipped],
            )
            .await
            .map_err(|e| self.store.pg(&e))?;
        Ok(())
    }

    async fn retake_ticket(&mut self, take: &TicketTake<'_>) -> Result<Option<i64>> {
        let ttl_ms = ticket_ttl_ms(take.ttl);
        let store = self.store;
        let s = quote_ident(&store.schema);
        self.tx
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
                &[&take.name, &take.period, &take.token, &ttl_ms],
            )
            .await
            .map_err(|e| store.pg(&e))?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| store.pg(&e))
    }

    async fn insert_ticket(&mut self, take: &TicketTake<'_>, value: i64) -> Result<()> {
        let ttl_ms = ticket_ttl_ms(take.ttl);
        let s = quote_ident(&self.store.schema);
        self.tx
            .execute(
                &format!(
                    "INSERT INTO {s}.tickets (name, period, value, token, expires_at)
                     VALUES ($1, $2, $3, $4,
                             clock_timestamp() + $5::bigint * interval '1 millisecond')"
                ),
                &[&take.name, &take.period, &value, &take.token, &ttl_ms],
            )
            .await
            .map_err(|e| self.store.pg(&e))?;
        Ok(())
    }
}

/// A connection of this store, each statement committed alone: the
/// statements of a ticket's settlement that [`settle_ticket_on`] runs.
struct OnConn<'a> {
    store: &'a PostgresStore,
    c: &'a Client,
}

impl<'a> TicketRows for OnConn<'a> {
    async fn settle_row(&mut self, what: Settle, held: &HeldNumber<'_>) -> Result<bool> {
        let s = quote_ident(&self.store.schema);
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
        let n = self
            .c
            .execute(
                &write,
                &[&held.name, &held.period, &held.value, &held.token],
            )
            .await
            .map_err(|e| self.store.pg(&e))?;
        Ok(n == 1)
    }

    async fn sequence_exists(&mut self, name: &str) -> Result<bool> {
        let s = quote_ident(&self.store.schema);
        let exists = self
            .c
            .query_opt(
                &format!("SELECT 1 FROM {s}.sequences WHERE name = $1"),
                &[&name],
            )
            .await
            .map_err(|e| self.store.pg(&e))?;
        Ok(exists.is_some())
    }

    async fn holder(&mut self, held: &HeldNumber<'_>) -> Result<Option<Option<String>>> {
        let store = self.store;
        let s = quote_ident(&store.schema);
        self.c
            .query_opt(
                &format!(
                    "SELECT token FROM {s}.tickets WHERE name = $1 AND period = $2 AND value = $3"
                ),
                &[&held.name, &held.period, &held.value],
            )
            .await
            .map_err(|e| store.pg(&e))?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| store.pg(&e))
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

    async fn swap_numbering(&self, swap: &NumberingSwap<'_>) -> Result<bool> {
        let (old, new) = swap.json()?;
        let s = quote_ident(&self.schema);
        with_conn(self, async |c| {
            c.execute(
                &format!(
                    "UPDATE {s}.numbering SET settings = $3 WHERE name = $1 AND settings = $2"
                ),
                &[&swap.name, &old, &new],
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
        let settings = numbering_json(numbering)?;
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
        let s = quote_ident(&self.schema);
        with_conn(self, async |c| {
            let row = c
                .query_opt(
                    &format!(
                        "SELECT n.current_period,
                            (SELECT c.next FROM {s}.number_counters c
                             WHERE c.name = n.name AND c.period = n.current_period),
                            (SELECT count(*) FROM {s}.tickets t
                             WHERE t.name = n.name AND t.period = n.current_period AND t.token IS NOT NULL),
                            (SELECT count(*) FROM {s}.tickets t
                             WHERE t.name = n.name AND t.period = n.current_period AND t.token IS NULL)
                         FROM {s}.numbering n WHERE n.name = $1"
                    ),
                    &[&name],
                )
                .await
                .map_err(|e| self.pg(&e))?;
            row.map(|r| {
                Ok(NumbersRead {
                    period: r.try_get(0)?,
                    counter: r.try_get(1)?,
                    held: r.try_get(2)?,
                    released: r.try_get(3)?,
                })
            })
            .transpose()
            .map_err(|e: tokio_postgres::Error| self.pg(&e))
        })
        .await
    }

    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)> {
        self.in_tx(async |t| fence_numbers_in(t, name, skip).await)
            .await
    }
}

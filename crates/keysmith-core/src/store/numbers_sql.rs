//! The numbered-sequence algorithms of the SQL stores, written once over two
//! dialect traits: [`NumbersTx`] (the steps of a reservation, a ticket take
//! and a fence inside one open transaction) and [`TicketRows`] (the
//! statements of a ticket's commit or release). PostgreSQL and MySQL
//! implement them with their own statements on their drivers; SQLite on its
//! synchronous transaction, whose steps never wait ([`run_ready`] drives
//! them).
//!
//! The algorithms ([`reserve_numbers_in`], [`take_ticket_in`],
//! [`settle_ticket_on`], [`fence_numbers_in`], and [`current_fenced`] that
//! the first two start with) decide everything a backend would otherwise
//! decide again: which period, the generation fence, where a counter starts,
//! whether a released or expired number is taken again before a new one, and
//! why a settlement was refused. A backend keeps only its statements and
//! row decoding.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use super::SequenceRow;
use super::numbers::{
    HeldNumber, NumbersFence, PeriodRange, Settle, TakenNumber, TicketTake, numbers_fence, refused,
    skip_counter,
};
use crate::{Error, Result};

/// The steps of a numbered sequence's take, reservation or fence inside one
/// open transaction of a SQL store: what [`current_fenced`],
/// [`fence_numbers_in`], [`reserve_numbers_in`] and [`take_ticket_in`] are
/// written over, once for every dialect. An implementation wraps the store
/// and its transaction; nothing it does is committed until the caller
/// commits that transaction.
// `async fn` without a `Send` bound: PostgreSQL's and MySQL's steps are
// `Send` (their stores' futures are), SQLite's run on one thread over a
// transaction that is not; each backend's concrete futures decide.
#[allow(async_fn_in_trait)]
pub trait NumbersTx {
    /// The later of `period` and the sequence's current period, made current
    /// (locking the numbering row until the transaction ends), the
    /// sequence's row, and the store's generation.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing or unnumbered sequence;
    /// [`Error::Unavailable`] when the store does not answer.
    async fn current(&mut self, name: &str, period: i64) -> Result<(i64, SequenceRow, String)>;

    /// The counter of `period` as stored (the next new number), `None` when
    /// the period has none yet.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn counter(&mut self, name: &str, period: i64) -> Result<Option<i64>>;

    /// Writes the counter of `period` (creating it if the period has none).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn set_counter(&mut self, name: &str, period: i64, next: i64) -> Result<()>;

    /// Records `generation` as the one the sequence was last written in, and
    /// `skipped` numbers as lost to a fence.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn record_generation(&mut self, name: &str, generation: &str, skipped: i64)
    -> Result<()>;

    /// Gives `take.token` the lowest open number of `take.period` (the
    /// period [`current_fenced`] chose) that was released or whose ticket
    /// expired by the store's clock, valid `take.ttl` from now by that clock
    /// (its milliseconds: `ticket_ttl_ms`): `Some(number)`, or `None` (changing nothing) when
    /// there is none.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn retake_ticket(&mut self, take: &TicketTake<'_>) -> Result<Option<i64>>;

    /// Records new number `value` of `take.period` as open, held by
    /// `take.token` for `take.ttl` from now by the store's clock.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn insert_ticket(&mut self, take: &TicketTake<'_>, value: i64) -> Result<()>;

    /// The next new number of `period`: its counter, or `start` (the
    /// sequence's start) for a period that has none yet.
    ///
    /// # Errors
    /// Those of [`Self::counter`].
    async fn next_of(&mut self, name: &str, period: i64, start: i64) -> Result<i64> {
        Ok(self.counter(name, period).await?.unwrap_or(start))
    }

    /// Moves the counter of `period` of `row`'s sequence forward by `skip`
    /// (never past its maximum: [`skip_counter`]); returns the counter
    /// before and after.
    ///
    /// # Errors
    /// Those of [`Self::counter`] and [`Self::set_counter`].
    async fn skip_numbers(
        &mut self,
        row: &SequenceRow,
        period: i64,
        skip: i64,
    ) -> Result<(i64, i64)> {
        let before = self.next_of(&row.name, period, row.start).await?;
        let after = skip_counter(before, row.max, skip);
        self.set_counter(&row.name, period, after).await?;
        Ok((before, after))
    }
}

/// The statements of a ticket's commit or release on a SQL store
/// ([`settle_ticket_on`]): each one alone, on a connection or inside a
/// transaction.
#[allow(async_fn_in_trait)]
pub trait TicketRows {
    /// Only where `held.token` holds number `held.value` of `held.period`:
    /// [`Settle::Commit`] removes the open number (a committed number
    /// leaves no row), [`Settle::Release`] empties its token and expires it,
    /// so it is the next one taken. Whether it did.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn settle_row(&mut self, what: Settle, held: &HeldNumber<'_>) -> Result<bool>;

    /// Whether sequence `name` exists.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn sequence_exists(&mut self, name: &str) -> Result<bool>;

    /// What the store holds for number `held.value` of `held.period`
    /// (whatever `held.token`): `None` when it is not open (committed, or
    /// never taken), `Some(None)` when it was released, `Some(Some(token))`
    /// while a ticket holds it.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn holder(&mut self, held: &HeldNumber<'_>) -> Result<Option<Option<String>>>;
}

/// In `tx`: the period a take or reservation of `name` uses (the later of
/// `period` and the current one) and the sequence's row, in life
/// `incarnation` of the name only (0: any; [`SequenceRow::check_life`]),
/// after applying
/// [`numbers_fence`] for the store's generation: a counted sequence in a new
/// generation skips its failover margin first, and the generation is
/// recorded, in the same transaction.
///
/// # Errors
/// [`Error::FenceNeeded`] for a gap-free sequence in a new generation
/// (nothing is written); [`Error::Dropped`] for a row of another life
/// (nothing is written); those of [`NumbersTx`].
pub async fn current_fenced<T: NumbersTx + ?Sized>(
    tx: &mut T,
    name: &str,
    period: i64,
    gapless: bool,
    incarnation: u64,
) -> Result<(i64, SequenceRow)> {
    let (period, row, generation) = tx.current(name, period).await?;
    row.check_life(incarnation, "handle")?;
    let rule = numbers_fence(&row, gapless, &generation);
    rule.check(name)?;
    let mut skipped = 0;
    if let NumbersFence::Skip(skip) = rule {
        let (before, after) = tx.skip_numbers(&row, period, skip).await?;
        skipped = after - before;
    }
    if rule != NumbersFence::Current {
        tx.record_generation(name, &generation, skipped).await?;
    }
    Ok((period, row))
}

/// In `tx`: the operator's fence of `name`
/// ([`super::NumberStore::fence_numbers`]): moves the counter of the current
/// period forward by `skip` and records the store's generation. Returns the
/// period and the counter before and after.
///
/// # Errors
/// Those of [`NumbersTx`].
pub async fn fence_numbers_in<T: NumbersTx + ?Sized>(
    tx: &mut T,
    name: &str,
    skip: i64,
) -> Result<(i64, i64, i64)> {
    let (period, row, generation) = tx.current(name, i64::MIN).await?;
    let (before, after) = tx.skip_numbers(&row, period, skip).await?;
    tx.record_generation(name, &generation, after - before)
        .await?;
    Ok((period, before, after))
}

/// In `tx`: [`super::NumberStore::reserve_numbers_in`] of a counted
/// sequence: `n` numbers (checked by the caller) of the later of `period`
/// and the current period, in life `incarnation` of the name (0: any),
/// after [`current_fenced`].
///
/// # Errors
/// [`Error::Exhausted`] when the period's counter passed the maximum; those
/// of [`current_fenced`].
pub async fn reserve_numbers_in<T: NumbersTx + ?Sized>(
    tx: &mut T,
    name: &str,
    period: i64,
    n: i64,
    incarnation: u64,
) -> Result<PeriodRange> {
    let (period, row) = current_fenced(tx, name, period, false, incarnation).await?;
    let next = tx.next_of(name, period, row.start).await?;
    let r = SequenceRow { next, ..row }.plan(n)?;
    tx.set_counter(name, period, r.end).await?;
    Ok(PeriodRange {
        period,
        start: r.start,
        end: r.end,
    })
}

/// In `tx`: [`super::NumberStore::take_ticket_checked`]: after
/// [`current_fenced`] (whose lock on the numbering row makes this the only
/// take of the sequence until `tx` ends), the lowest released or expired
/// number of the period taken again ([`NumbersTx::retake_ticket`]), else the
/// next new one, recorded as held by `take.token`.
///
/// # Errors
/// [`Error::Exhausted`] when there is nothing to take again and the
/// counter passed the maximum; those of [`current_fenced`].
pub async fn take_ticket_in<T: NumbersTx + ?Sized>(
    tx: &mut T,
    take: &TicketTake<'_>,
) -> Result<TakenNumber> {
    let (period, row) = current_fenced(tx, take.name, take.period, true, take.incarnation).await?;
    let take = TicketTake { period, ..*take };
    if let Some(value) = tx.retake_ticket(&take).await? {
        return Ok(TakenNumber { period, value });
    }
    let next = tx.next_of(take.name, period, row.start).await?;
    let value = SequenceRow { next, ..row }.plan(1)?.start;
    tx.set_counter(take.name, period, value + 1).await?;
    tx.insert_ticket(&take, value).await?;
    Ok(TakenNumber { period, value })
}

/// On `rows`: [`super::NumberStore::settle_ticket`]: commits or releases the
/// number `held` names if its ticket still holds it; when it does not, says
/// why ([`refused`]).
///
/// # Errors
/// [`Error::NotFound`] for a missing sequence; [`Error::TicketRefused`];
/// those of [`TicketRows`].
pub async fn settle_ticket_on<T: TicketRows + ?Sized>(
    rows: &mut T,
    what: Settle,
    held: &HeldNumber<'_>,
) -> Result<()> {
    if rows.settle_row(what, held).await? {
        return Ok(());
    }
    let name = held.name;
    if !rows.sequence_exists(name).await? {
        return Err(Error::not_found("sequence", name));
    }
    let holder = rows.holder(held).await?;
    Err(refused(
        what,
        name,
        held.period,
        held.value,
        holder.as_ref().map(|t| t.as_deref()),
    ))
}

/// The output of `steps`, an algorithm of this file run over a store whose
/// [`NumbersTx`] or [`TicketRows`] never waits (SQLite's, on a synchronous
/// transaction): it is polled once, on the calling thread.
///
/// # Errors
/// What `steps` fails with; [`Error::Unavailable`] if a step waited after
/// all (a bug in the store: nothing was written by this call that its
/// transaction does not roll back on the error).
pub fn run_ready<T>(steps: impl Future<Output = Result<T>>) -> Result<T> {
    let mut steps = pin!(steps);
    match steps.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => Err(Error::Unavailable(
            "a store step of a numbered sequence waited where it never does; this is a bug in keysmith: please report it".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ready_answers_what_a_ready_step_gives() {
        assert_eq!(run_ready(async { Ok(7) }).unwrap(), 7);
        assert!(matches!(
            run_ready(async { Err::<(), _>(Error::invalid("bad")) }),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn run_ready_refuses_a_step_that_waits() {
        let waits = async {
            std::future::pending::<()>().await;
            Ok(())
        };
        assert!(matches!(run_ready(waits), Err(Error::Unavailable(m)) if m.contains("bug")));
    }
}

//! The business-number half of the store contract: [`NumberStore`], for
//! sequences created with [`Numbering`] settings (gap-free numbers with
//! tickets, numbers per day, month or year, formatted numbers; the library
//! side is [`crate::numbers`]).
//!
//! A numbered sequence has a row like any sequence (so names stay unique and
//! `list`, `show` and `drop` work), its [`Numbering`] beside it, and a
//! counter per *period key*: `0` for a sequence without a period, else the
//! period as a number (`20261123` for a day, `202611` for a month, `2026` for
//! a year, UTC). Each counter starts at the sequence's `start` and stops at
//! its `max`. The store also records the sequence's *current period*, which
//! only moves forward: a call names the period its clock says, and the store
//! uses the later of that and the recorded one, so a caller whose clock lags
//! never hands out numbers of a period that has ended.
//!
//! Gap-free numbers (a [`Numbering::gapless`] sequence) are handed out with a
//! ticket each: the number is *open* until its holder commits it (final) or
//! releases it. [`NumberStore::take_ticket`] hands out the lowest open number
//! of the current period that was released or whose ticket expired (its
//! holder died), else the next new one. A ticket stays valid until it is
//! committed, released or its number is taken again after it expired: the
//! time to live says when a number may go to someone else, not when a commit
//! is refused, the same way a fence decides for worker leases. Expiry is
//! decided by the store's clock: the system clock for SQLite and memory (one
//! machine), `clock_timestamp()` for PostgreSQL, an etcd lease for etcd.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::{SequenceRow, SequenceSpec};
use crate::numbering::Numbering;
use crate::{Error, Result};

/// How long a ticket lives when the caller does not say: 60 seconds. A
/// holder that dies blocks its number that long; after that the number is
/// handed out again.
pub const DEFAULT_TICKET_TTL: Duration = Duration::from_secs(60);

/// The longest a ticket may live: a day.
pub const MAX_TICKET_TTL: Duration = Duration::from_secs(86_400);

/// Numbers reserved from one period's counter: `start..end` of period key
/// `period` (0 without a period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PeriodRange {
    /// The period key the numbers belong to: the later of the one asked for
    /// and the sequence's current period.
    pub period: i64,
    /// First number (inclusive).
    pub start: i64,
    /// One past the last.
    pub end: i64,
}

/// The arguments of [`NumberStore::take_ticket`], handed to a backend's
/// [`NumberStore::take_ticket_checked`] once [`check_ttl`] accepted the TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketTake<'a> {
    /// The numbered sequence.
    pub name: &'a str,
    /// The period the caller's clock says; the store uses the later of this
    /// and the sequence's current period.
    pub period: i64,
    /// The caller's random ticket token.
    pub token: &'a str,
    /// How long the ticket holds the number, by the store's clock.
    pub ttl: Duration,
    /// The life of the name the caller's handle was opened in
    /// ([`SequenceRow::incarnation`]; 0: whatever life it is in). A backend
    /// takes nothing from a row of another life: [`Error::Dropped`], checked
    /// inside the take's own transaction.
    pub incarnation: u64,
}

/// A number its ticket holds: the arguments of [`NumberStore::commit_ticket`]
/// and [`NumberStore::release_ticket`], handed to a backend's
/// [`NumberStore::settle_ticket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldNumber<'a> {
    /// The numbered sequence.
    pub name: &'a str,
    /// The number's period key (0 without a period).
    pub period: i64,
    /// The number.
    pub value: i64,
    /// The ticket's token it was taken with.
    pub token: &'a str,
}

/// A number taken with a ticket: [`NumberStore::take_ticket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TakenNumber {
    /// Its period key (0 without a period).
    pub period: i64,
    /// The number.
    pub value: i64,
}

/// A numbered sequence's numbers as the store holds them:
/// [`NumberStore::read_numbers`]. The arithmetic on it (the last number, how
/// many were taken and committed) is done once above the backends, by the
/// sequences' `show` (`NumbersUsage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NumbersRead {
    /// The current period key (0 without a period).
    pub period: i64,
    /// That period's counter (the next new number), `None` before the
    /// period's first number.
    pub counter: Option<i64>,
    /// Open numbers of the period a ticket holds (its time to live may have
    /// passed: the number is then taken again by the next take).
    pub held: i64,
    /// Open numbers of the period that were released, to be taken again
    /// first.
    pub released: i64,
}

/// The arguments of [`NumberStore::replace_numbering`], handed to a
/// backend's [`NumberStore::swap_numbering`]: a compare-and-set of a
/// numbered sequence's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberingSwap<'a> {
    /// The numbered sequence.
    pub name: &'a str,
    /// The settings the caller read: the swap happens only if the store
    /// still has these.
    pub expected: &'a Numbering,
    /// The settings written in their place.
    pub new: &'a Numbering,
}

impl NumberingSwap<'_> {
    /// `expected` and `new` as the JSON text a store keeps (what
    /// [`numbering_json`] writes at creation): a store that compares text
    /// compares the first and writes the second.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a numbering cannot be written as JSON.
    pub fn json(&self) -> Result<(String, String)> {
        Ok((numbering_json(self.expected)?, numbering_json(self.new)?))
    }

    /// Whether `stored` (the settings read back) are still the expected
    /// ones: what a store that keeps [`Numbering`] values compares.
    pub fn holds(&self, stored: &Numbering) -> bool {
        stored == self.expected
    }
}

/// What a backend does for numbered sequences. Names have been validated;
/// numbering settings checked with [`Numbering::validate`]; tokens are the
/// caller's random strings. Every write is durable when the method returns,
/// and every method is safe to race with any other, in any process.
#[async_trait]
pub trait NumberStore: Send + Sync + std::fmt::Debug {
    /// Creates the sequence's row (as [`super::SequenceStore::create_sequence`])
    /// and its numbering, in one write: both or neither. The start is raised
    /// above the name's tombstone in that write as `create_sequence` does,
    /// in the numbering's own units ([`super::Tombstone::raise_sequence`]:
    /// slots of a residue class, counters of a bit-reversed sequence, the
    /// start of every period's counter).
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] if a sequence of that name exists;
    /// [`Error::InvalidArgument`] when `spec.max` leaves no room above the
    /// tombstone.
    async fn create_numbered(
        &self,
        spec: &SequenceSpec,
        numbering: &Numbering,
    ) -> Result<SequenceRow>;

    /// The numbering of a sequence created with [`Self::create_numbered`]:
    /// `None` for an ordinary sequence, and for one that does not exist.
    /// [`crate::sequence::Sequence`] handles and every other block-based use
    /// read it to refuse a numbered sequence.
    async fn read_numbering(&self, name: &str) -> Result<Option<Numbering>>;

    /// Replaces a numbered sequence's settings with `new` if they are still
    /// `expected` (compared as the JSON [`Self::create_numbered`] wrote), in
    /// one write: `Ok(true)`; `Ok(false)`, changing nothing, when they
    /// changed meanwhile or there is no such sequence. What rotating an
    /// opaque sequence's key writes ([`crate::numbers::rotate_key`]).
    ///
    /// Calls [`Self::swap_numbering`] with a [`NumberingSwap`]: backends
    /// implement that, not this.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store cannot be reached (or does not
    /// implement [`Self::swap_numbering`]); [`Error::Corrupt`] when a
    /// numbering cannot be written as JSON.
    async fn replace_numbering(
        &self,
        name: &str,
        expected: &Numbering,
        new: &Numbering,
    ) -> Result<bool> {
        let swap = NumberingSwap {
            name,
            expected,
            new,
        };
        self.swap_numbering(&swap).await
    }

    /// What a backend implements for [`Self::replace_numbering`], with the
    /// same guarantees: writes `swap.new` (as [`NumberingSwap::json`] gives
    /// it) only where the stored settings are still `swap.expected`.
    ///
    /// The default answers [`Error::Unavailable`]: a store written outside
    /// this workspace that cannot change settings.
    ///
    /// # Errors
    /// As [`Self::replace_numbering`].
    async fn swap_numbering(&self, swap: &NumberingSwap<'_>) -> Result<bool> {
        Err(Error::Unavailable(format!(
            "this store cannot change the settings of sequence {:?} (no swap_numbering)",
            swap.name
        )))
    }

    /// The store's clock, milliseconds since the Unix epoch: what periods
    /// are decided by. PostgreSQL's `clock_timestamp()`; the system clock for
    /// SQLite and memory (one machine); for etcd, which has no clock, the
    /// caller's system clock (the recorded current period keeps it from
    /// going back).
    ///
    /// # Errors
    /// [`Error::Unavailable`].
    async fn clock_ms(&self) -> Result<i64>;

    /// Reserves up to `n` numbers (`1..=MAX_RESERVATION`) of a numbered
    /// sequence in the later of `period` and its current period, which
    /// becomes current; a period's counter starts at the sequence's start.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing or unnumbered sequence,
    /// [`Error::Exhausted`] when the period's counter passed the maximum.
    async fn reserve_numbers(&self, name: &str, period: i64, n: i64) -> Result<PeriodRange> {
        self.reserve_numbers_in(name, period, n, 0).await
    }

    /// [`Self::reserve_numbers`] in life `incarnation` of the name only (0:
    /// whatever life it is in; see [`SequenceRow::incarnation`]): what a
    /// handle opened before a drop and create reserves with, so it never
    /// takes numbers of the next life with the settings of its own. Backends
    /// implement this, not [`Self::reserve_numbers`], and compare the life in
    /// the reservation's own transaction.
    ///
    /// # Errors
    /// As [`Self::reserve_numbers`]; [`Error::Dropped`] (nothing reserved)
    /// when the name is in another life.
    async fn reserve_numbers_in(
        &self,
        name: &str,
        period: i64,
        n: i64,
        incarnation: u64,
    ) -> Result<PeriodRange>;

    /// Takes a number of a numbered sequence with ticket `token`, valid for
    /// `ttl` by the store's clock: in the later of `period` and the current
    /// period (which becomes current), the lowest number that was released
    /// or whose ticket expired, else the next new one.
    ///
    /// Checks `ttl` with [`check_ttl`] (so a backend never sees a bad one),
    /// then calls [`Self::take_ticket_checked`]: backends implement that,
    /// not this.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Exhausted`] (no open number to take
    /// again and the counter passed the maximum), [`Error::InvalidArgument`]
    /// for a TTL outside 1 ms..=[`MAX_TICKET_TTL`] (nothing is taken).
    async fn take_ticket(
        &self,
        name: &str,
        period: i64,
        token: &str,
        ttl: Duration,
    ) -> Result<TakenNumber> {
        let take = TicketTake {
            name,
            period,
            token,
            ttl,
            incarnation: 0,
        };
        self.take_ticket_in(&take).await
    }

    /// [`Self::take_ticket`] with every argument in `take`, the life of the
    /// name included ([`TicketTake::incarnation`]): what a handle takes
    /// with. Checks the TTL with [`check_ttl`], then calls
    /// [`Self::take_ticket_checked`]: backends implement that, not this.
    ///
    /// # Errors
    /// As [`Self::take_ticket`]; [`Error::Dropped`] (nothing taken) when the
    /// name is in another life than `take.incarnation`.
    async fn take_ticket_in(&self, take: &TicketTake<'_>) -> Result<TakenNumber> {
        check_ttl(take.ttl)?;
        self.take_ticket_checked(take).await
    }

    /// What a backend implements for [`Self::take_ticket`], with the same
    /// guarantees; its TTL has passed [`check_ttl`]. Takes nothing from a
    /// row of another life than `take.incarnation` (when not 0), checked in
    /// the take's own transaction ([`SequenceRow::check_life`]).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Exhausted`] as [`Self::take_ticket`].
    async fn take_ticket_checked(&self, take: &TicketTake<'_>) -> Result<TakenNumber>;

    /// Makes number `value` of `period` final if it is still held by
    /// `token` (also after the ticket's time to live, as long as no one took
    /// the number since). Changes nothing otherwise. Calls
    /// [`Self::settle_ticket`] with [`Settle::Commit`].
    ///
    /// # Errors
    /// [`Error::TicketRefused`] saying why (committed already, released,
    /// taken again by another holder, never taken); [`Error::NotFound`] for
    /// a missing sequence.
    async fn commit_ticket(&self, name: &str, period: i64, value: i64, token: &str) -> Result<()> {
        let held = HeldNumber {
            name,
            period,
            value,
            token,
        };
        self.settle_ticket(Settle::Commit, &held).await
    }

    /// Frees number `value` of `period`, if it is still held by `token`, so
    /// that it is the next one handed out. Changes nothing otherwise. Calls
    /// [`Self::settle_ticket`] with [`Settle::Release`].
    ///
    /// # Errors
    /// As [`Self::commit_ticket`].
    async fn release_ticket(&self, name: &str, period: i64, value: i64, token: &str) -> Result<()> {
        let held = HeldNumber {
            name,
            period,
            value,
            token,
        };
        self.settle_ticket(Settle::Release, &held).await
    }

    /// What a backend implements for [`Self::commit_ticket`] (`what` is
    /// [`Settle::Commit`]) and [`Self::release_ticket`] ([`Settle::Release`]),
    /// with their guarantees: only while `held.token` holds number
    /// `held.value` of `held.period`, else nothing changes.
    ///
    /// # Errors
    /// As [`Self::commit_ticket`]; a refusal is made with [`refused`].
    async fn settle_ticket(&self, what: Settle, held: &HeldNumber<'_>) -> Result<()>;

    /// What the store holds of a numbered sequence's current period (as
    /// recorded; the caller's clock may say a later one has begun): its
    /// counter and how many of its numbers are open, in one consistent
    /// read that changes nothing. `None` for a missing or unnumbered
    /// sequence.
    ///
    /// The default answers `None` (a backend that cannot say: `show` then
    /// leaves the numbers out); every backend of this workspace reads them.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn read_numbers(&self, name: &str) -> Result<Option<NumbersRead>> {
        let _ = name;
        Ok(None)
    }

    /// The operator's fence of a numbered sequence: moves the counter of
    /// its current period forward by `skip` (0 allowed: a gap-free sequence
    /// confirmed to have lost nothing) and records the store's generation,
    /// which lets a gap-free sequence take numbers again. Returns the period
    /// and the counter before and after.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing or unnumbered sequence.
    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)>;
}

/// What a numbered sequence's take or reservation does first when the store
/// is in generation `generation` (see [`SequenceRow::fence`]): the rule every
/// backend applies in the same transaction, written once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NumbersFence {
    /// The row was written in this generation: nothing to do.
    Current,
    /// The row predates recorded generations: record this one, skip nothing.
    Record,
    /// A counted (not gap-free) sequence in a new generation: the period's
    /// counter moves forward by this many numbers first (a period counter
    /// never repeats a number), and the generation is recorded.
    Skip(i64),
    /// A gap-free sequence in a new generation: refused until the operator
    /// fences it ([`Error::FenceNeeded`]).
    Refuse,
}

/// The [`NumbersFence`] of `row` (gap-free or not) in `generation`.
pub fn numbers_fence(row: &SequenceRow, gapless: bool, generation: &str) -> NumbersFence {
    match row.generation.as_deref() {
        None => NumbersFence::Record,
        Some(g) if g == generation => NumbersFence::Current,
        Some(_) if gapless => NumbersFence::Refuse,
        Some(_) => NumbersFence::Skip(row.failover_skip),
    }
}

impl NumbersFence {
    /// The error of a refusal, for sequence `name`.
    pub fn check(&self, name: &str) -> Result<()> {
        match self {
            NumbersFence::Refuse => Err(Error::FenceNeeded {
                name: name.to_owned(),
            }),
            _ => Ok(()),
        }
    }
}

/// A period counter `next` moved forward by `skip`, clamped at `max + 1`.
pub fn skip_counter(next: i64, max: i64, skip: i64) -> i64 {
    next + skip.clamp(0, (max + 1 - next).max(0))
}

/// A numbering as the store keeps it: JSON text, read back with
/// [`parse_numbering`].
///
/// # Errors
/// [`Error::Corrupt`] when it cannot be written as JSON.
pub fn numbering_json(numbering: &Numbering) -> Result<String> {
    serde_json::to_string(numbering).map_err(|e| Error::Corrupt(e.to_string()))
}

/// A numbering as the store keeps it (JSON), read back.
///
/// # Errors
/// [`Error::Corrupt`] for text this keysmith cannot read.
pub fn parse_numbering(name: &str, s: &str) -> Result<Numbering> {
    serde_json::from_str(s).map_err(|e| {
        Error::Corrupt(format!(
            "the numbering of sequence {name:?} cannot be read ({e}); was it written by a newer keysmith?"
        ))
    })
}

/// Checks a ticket's time to live.
///
/// # Errors
/// [`Error::InvalidArgument`] outside 1 ms..=[`MAX_TICKET_TTL`].
pub fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < Duration::from_millis(1) || ttl > MAX_TICKET_TTL {
        return Err(Error::invalid(format!(
            "a ticket's time to live must be between 1 ms and a day (86400 s), got {ttl:?}"
        )));
    }
    Ok(())
}

/// Milliseconds of a TTL.
pub fn ttl_ms(ttl: Duration) -> i64 {
    ttl.as_millis().min(i64::MAX as u128) as i64
}

/// What a ticket's holder does with its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// The number is used: it stays taken for good.
    Commit,
    /// The number goes back, to be taken again.
    Release,
}

impl std::fmt::Display for Settle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Settle::Commit => "commit",
            Settle::Release => "release",
        })
    }
}

/// The error of a commit or release whose ticket does not hold the number.
/// `holder`: what the store holds for the number: `None` when the number is
/// not open (committed, or never taken), `Some(None)` when it was released,
/// `Some(Some(_))` when another ticket holds it.
pub fn refused(
    what: Settle,
    name: &str,
    period: i64,
    value: i64,
    holder: Option<Option<&str>>,
) -> Error {
    let number = if period == 0 {
        format!("number {value} of {name:?}")
    } else {
        format!("number {value} of period {period} of {name:?}")
    };
    let why = match holder {
        None => "it is not open: it was committed already, or never taken",
        Some(None) => "it was released: take a new number",
        Some(Some(_)) => {
            "its ticket expired and the number was taken again by another holder: take a new number"
        }
    };
    Error::TicketRefused(format!("cannot {what} {number} with this ticket: {why}"))
}

/// The error of a take, reservation or commit on a sequence with no
/// numbering.
pub fn not_numbered(name: &str) -> Error {
    Error::not_found("numbered sequence", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numbering_swap_compares_and_writes_what_create_wrote() {
        let old = Numbering::default();
        let new = Numbering {
            gapless: true,
            ..Numbering::default()
        };
        let swap = NumberingSwap {
            name: "n",
            expected: &old,
            new: &new,
        };
        assert_eq!(
            swap.json().unwrap(),
            (numbering_json(&old).unwrap(), numbering_json(&new).unwrap())
        );
        assert_ne!(swap.json().unwrap().0, swap.json().unwrap().1);
        assert_eq!(parse_numbering("n", &swap.json().unwrap().1).unwrap(), new);
        assert!(swap.holds(&old));
        assert!(!swap.holds(&new));
    }

    #[test]
    fn ttls_are_bounded() {
        check_ttl(Duration::from_secs(1)).unwrap();
        assert!(check_ttl(Duration::ZERO).is_err());
        assert!(check_ttl(MAX_TICKET_TTL + Duration::from_secs(1)).is_err());
    }
}

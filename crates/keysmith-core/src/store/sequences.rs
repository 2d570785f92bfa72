//! The sequence half of the store contract: [`SequenceStore`] and the rows,
//! specs and reservations it speaks in.
//!
//! The arithmetic of a reservation ([`SequenceRow::plan`]) and the bounds of
//! a spec live here, once, so no backend writes them again.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::MAX_VALUE;
use crate::{Error, Result};

/// The names of `names` next to `name` as [`SequenceStore::sequence_names_near`]
/// defines them, computed from every name (the contract's default, and a
/// backend's that keeps all names in memory).
pub(super) fn names_near(mut names: Vec<String>, name: &str, limit: usize) -> Vec<String> {
    names.sort_unstable();
    let at = names.partition_point(|n| n.as_str() < name);
    let from = at.saturating_sub(limit / 2);
    let to = at.saturating_add(limit - limit / 2).min(names.len());
    names.truncate(to);
    names.drain(..from);
    names
}

/// The largest number of values one reservation may ask for.
pub const MAX_RESERVATION: i64 = 1 << 40;

/// The first value of a sequence created without one.
pub const DEFAULT_START: i64 = 1;

/// The largest integer a JavaScript number holds exactly: `2^53 - 1`
/// (`Number.MAX_SAFE_INTEGER`). The max of a JavaScript-safe sequence.
pub const JS_SAFE_MAX: i64 = (1 << 53) - 1;

/// The max of a JavaScript-safe sequence: `max` if given (at most
/// [`JS_SAFE_MAX`]), else [`JS_SAFE_MAX`].
///
/// # Errors
/// [`Error::InvalidArgument`] for a `max` above [`JS_SAFE_MAX`], and for a
/// bit-reversed sequence (`bit_reversed`): its values span all 63 bits
/// whatever its max, which bounds only its counter.
pub fn js_safe_max(max: Option<i64>, bit_reversed: bool) -> Result<i64> {
    if bit_reversed {
        return Err(Error::invalid(
            "a bit-reversed sequence cannot be JavaScript-safe: its values span all 63 bits whatever its max (which bounds only its counter); leave out bit_reversed or js_safe",
        ));
    }
    match max {
        Some(m) if m > JS_SAFE_MAX => Err(Error::invalid(format!(
            "a JavaScript-safe sequence's max is at most 2^53 - 1 ({JS_SAFE_MAX}), the largest integer JavaScript holds exactly; got max {m}: give a smaller max or leave it out"
        ))),
        Some(m) => Ok(m),
        None => Ok(JS_SAFE_MAX),
    }
}

/// The block size of a sequence created without one.
pub const DEFAULT_BLOCK: i64 = 100;

/// The smallest automatic failover margin (see [`auto_failover_skip`]).
pub const FAILOVER_SKIP_FLOOR: i64 = 1_000_000;

/// The replication lag, in seconds, the automatic failover margin covers at
/// the sequence's peak rate (see [`auto_failover_skip`]).
pub const FAILOVER_LAG_ALLOWANCE_SECS: i64 = 600;

/// The automatic failover margin of a sequence with block size `block` whose
/// highest observed rate is `peak_rate` values per second: the largest of
/// [`FAILOVER_SKIP_FLOOR`], 100 blocks, and what the peak rate reserves in
/// [`FAILOVER_LAG_ALLOWANCE_SECS`], at most [`MAX_RESERVATION`].
///
/// The arithmetic: a standby that is `L` seconds behind lost at most what
/// was reserved in those `L` seconds, `rate x L` values, plus the blocks
/// reserved at once (adaptive blocks grow to 10 000 by default, so 100
/// blocks of the sequence's own size or the floor of a million cover many
/// servers' worth). Ten minutes at the peak rate covers the replication
/// lag of an asynchronous standby that is still worth promoting; a longer
/// lag needs a larger margin (`--failover-skip`) or the operator's
/// `keysmith fence`.
pub fn auto_failover_skip(block: i64, peak_rate: Option<f64>) -> i64 {
    let by_rate = peak_rate
        .filter(|r| r.is_finite() && *r > 0.0)
        .map_or(0, |r| {
            let v = (r * FAILOVER_LAG_ALLOWANCE_SECS as f64).ceil();
            if v >= MAX_RESERVATION as f64 {
                MAX_RESERVATION
            } else {
                v as i64
            }
        });
    FAILOVER_SKIP_FLOOR
        .max(block.saturating_mul(100))
        .max(by_rate)
        .min(MAX_RESERVATION)
}

/// Checks a failover margin is in `0..=MAX_RESERVATION`.
///
/// # Errors
/// [`Error::InvalidArgument`] saying what is accepted.
pub fn check_failover_skip(n: i64) -> Result<()> {
    if (0..=MAX_RESERVATION).contains(&n) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "failover skip must be between 0 and {MAX_RESERVATION}, got {n}"
        )))
    }
}

/// Checks a sequence's `max` is at most [`MAX_VALUE`].
fn check_max(max: i64) -> Result<()> {
    if max > MAX_VALUE {
        return Err(Error::invalid(format!(
            "max must be at most {MAX_VALUE}, got {max}"
        )));
    }
    Ok(())
}

/// What a new sequence looks like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SequenceSpec {
    /// Its name; see [`crate::validate_name`].
    pub name: String,
    /// The first value handed out: raised by the create above the values a
    /// dropped sequence of the same name handed out, unless
    /// [`Self::start_below_dropped`] is set.
    pub start: i64,
    /// The last value handed out (inclusive).
    pub max: i64,
    /// The default block size of handles opened on it.
    pub block: i64,
    /// How far `next` moves forward when a write finds the store in another
    /// generation (a failover, a restore); `None`: automatic
    /// ([`auto_failover_skip`], raised as the observed rate grows).
    pub failover_skip: Option<i64>,
    /// Start where asked even below the values a dropped sequence of the
    /// same name handed out. By default (`false`) creating a dropped name
    /// continues above the values it handed out: the store raises `start`
    /// above the name's [`super::Tombstone`] (see its module for how
    /// residue classes, bit-reversed and numbered sequences map), so no
    /// value is handed out twice. Set it only when no value handed out
    /// under the name is in use any more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub start_below_dropped: bool,
}

impl SequenceSpec {
    /// A spec with the defaults: start [`DEFAULT_START`], maximum
    /// [`MAX_VALUE`] and block [`DEFAULT_BLOCK`]. The CLI and the server
    /// take their defaults from here.
    pub fn new(name: impl Into<String>) -> Self {
        SequenceSpec {
            name: name.into(),
            start: DEFAULT_START,
            max: MAX_VALUE,
            block: DEFAULT_BLOCK,
            failover_skip: None,
            start_below_dropped: false,
        }
    }

    /// The failover margin the row starts with: the given one, else
    /// [`auto_failover_skip`] of the block.
    pub fn initial_failover_skip(&self) -> i64 {
        self.failover_skip
            .unwrap_or_else(|| auto_failover_skip(self.block, None))
    }

    /// Checks name and bounds: `0 <= start <= max <= MAX_VALUE`,
    /// `1 <= block <= MAX_RESERVATION`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] or [`Error::InvalidArgument`] saying which.
    pub fn validate(&self) -> Result<()> {
        crate::validate_name(&self.name)?;
        if self.start < 0 {
            return Err(Error::invalid(format!(
                "start must be 0 or more, got {}",
                self.start
            )));
        }
        check_max(self.max)?;
        if self.start > self.max {
            return Err(Error::invalid(format!(
                "start ({}) must not be above max ({})",
                self.start, self.max
            )));
        }
        check_count("block", self.block)?;
        if let Some(n) = self.failover_skip {
            check_failover_skip(n)?;
        }
        Ok(())
    }
}

/// A sequence as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceRow {
    /// The sequence's name.
    pub name: String,
    /// The next value nobody has reserved; `max + 1` once exhausted.
    pub next: i64,
    /// The first value the sequence was created with.
    pub start: i64,
    /// The last value it may hand out.
    pub max: i64,
    /// The default block size.
    pub block: i64,
    /// Bumped by every change of `next`; the basis of optimistic allocation.
    /// Starts at [`Self::incarnation`]: never a version an earlier life of
    /// the name had.
    pub version: u64,
    /// The life of the name this row belongs to: its first version, above
    /// every version an earlier life of the name reached
    /// ([`super::Tombstone::incarnation`]). A handle, lease or ticket taken
    /// in one life meets another incarnation after a drop and create, and
    /// fails with [`Error::Dropped`]. 0 for a row created before keysmith
    /// recorded incarnations.
    pub incarnation: u64,
    /// The generation of the store the row was last written in (see
    /// [`SequenceRow::fence`]); `None` for a row not written since keysmith
    /// began recording generations: its next write records one.
    pub generation: Option<String>,
    /// How far `next` moves forward when a write finds the row written in
    /// another generation of the store.
    pub failover_skip: i64,
    /// Whether [`Self::failover_skip`] was set by hand (`create`, `alter`);
    /// otherwise it follows the observed rate ([`auto_failover_skip`]).
    pub failover_skip_set: bool,
    /// Values skipped so far at generation changes ("skipped at failover";
    /// `skipped_at_failover` in JSON).
    #[serde(rename = "skipped_at_failover")]
    pub failover_skipped: i64,
}

/// How far [`SequenceRow::fence`] raises a row's version: above every
/// version the writes a store copy lost can have reached (fewer than 2^32
/// of them), so that no conditional write planned on a lost write matches
/// the fenced row. Without it the fenced version (the old one plus one) is
/// the version the first lost write left, and a handle that reserved in it
/// hands its block's rest back into the new generation (found by the model
/// in `crates/keysmith-model`). PostgreSQL's SQL `fence` raises by the same.
pub const FENCE_VERSION_STEP: u64 = 1 << 32;

impl SequenceRow {
    /// The row `create_sequence` writes for `spec` in store generation
    /// `generation` for a name never dropped: `next = start`, version and
    /// incarnation 1.
    pub fn created(spec: &SequenceSpec, generation: &str) -> SequenceRow {
        Self::created_after(spec, generation, &super::Tombstone::default())
    }

    /// The row `create_sequence` writes for `spec` in store generation
    /// `generation` over the name's tombstone `dropped` (every kind's, as
    /// [`super::Tombstone::max`]): `next = start`, version and incarnation
    /// [`super::Tombstone::incarnation`]. `spec` is already raised
    /// ([`super::Tombstone::raise_sequence`]).
    pub fn created_after(
        spec: &SequenceSpec,
        generation: &str,
        dropped: &super::Tombstone,
    ) -> SequenceRow {
        SequenceRow {
            name: spec.name.clone(),
            next: spec.start,
            start: spec.start,
            max: spec.max,
            block: spec.block,
            version: dropped.incarnation(),
            incarnation: dropped.incarnation(),
            generation: Some(generation.to_owned()),
            failover_skip: spec.initial_failover_skip(),
            failover_skip_set: spec.failover_skip.is_some(),
            failover_skipped: 0,
        }
    }

    /// The row a write in store generation `current` must start from.
    ///
    /// `None` when the row was last written in `current` (or in no recorded
    /// generation: the write records `current` and skips nothing). Otherwise
    /// the store lost writes or is another copy (a promoted replica, a
    /// restore): the fenced row, which every backend writes before anything
    /// else in the same transaction, has `next` moved forward by
    /// [`Self::failover_skip`] (clamped at `max + 1`), the new generation,
    /// the version raised by [`FENCE_VERSION_STEP`] and the skip added to
    /// [`Self::failover_skipped`]. A conditional put that was planned on the
    /// old row then conflicts, and its caller plans again from the fenced
    /// row: also a put planned on a write this copy lost (a hand-back of a
    /// block reserved just before a failover), whose version is above the
    /// old row's but far below the fenced one's.
    pub fn fence(&self, current: &str) -> Option<SequenceRow> {
        let old = self.generation.as_deref()?;
        if old == current {
            return None;
        }
        let skip = self.failover_skip.clamp(0, self.remaining().max(0));
        Some(SequenceRow {
            next: self.next + skip,
            version: self.version.saturating_add(FENCE_VERSION_STEP),
            generation: Some(current.to_owned()),
            failover_skipped: self.failover_skipped.saturating_add(skip),
            ..self.clone()
        })
    }

    /// How many values are left to reserve.
    pub fn remaining(&self) -> i64 {
        // next <= max + 1 and max + 1 <= i64::MAX, next >= 0: cannot overflow.
        self.max + 1 - self.next
    }

    /// Plans a reservation of up to `n` values from this row: the half-open
    /// range to hand out. Near the maximum the range is shorter than `n`.
    ///
    /// # Errors
    /// [`Error::Exhausted`] when nothing is left.
    pub fn plan(&self, n: i64) -> Result<Reservation> {
        let left = self.remaining();
        if left <= 0 {
            return Err(Error::Exhausted {
                name: self.name.clone(),
                max: self.max,
            });
        }
        let take = n.min(left);
        Ok(Reservation {
            start: self.next,
            end: self.next + take,
            version: self.version + 1,
            fenced: 0,
            incarnation: self.incarnation,
        })
    }

    /// `Ok` when this row is of life `incarnation` of the name (or either
    /// is unknown: 0, from before keysmith recorded lives).
    ///
    /// # Errors
    /// [`Error::Dropped`] naming `held` ("handle", "lease") when the name was
    /// dropped and created again since the holder was taken.
    pub fn check_life(&self, incarnation: u64, held: &'static str) -> Result<()> {
        if incarnation == 0 || self.incarnation == 0 || incarnation == self.incarnation {
            return Ok(());
        }
        Err(Error::Dropped {
            kind: "sequence",
            name: self.name.clone(),
            held,
        })
    }
}

/// A range of values reserved durably for one caller: `start..end`, and the
/// row version the reservation left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reservation {
    /// First value (inclusive).
    pub start: i64,
    /// One past the last value.
    pub end: i64,
    /// The row's version right after this reservation was committed.
    pub version: u64,
    /// Values the same store call skipped first because the row was written
    /// in another generation of the store ([`SequenceRow::fence`]); 0 almost
    /// always.
    pub fenced: i64,
    /// The life of the name the reservation was made in
    /// ([`SequenceRow::incarnation`]; 0 when the store does not know it).
    pub incarnation: u64,
}

impl Reservation {
    /// Number of values reserved.
    pub fn len(&self) -> i64 {
        self.end - self.start
    }

    /// Whether the range is empty (never true for a reservation a store returns).
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// The outcome of [`SequenceStore::put_if_version`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// The row was written; this is the row now stored.
    Done(SequenceRow),
    /// The version did not match; this is the row the store holds, so the
    /// caller can retry without reading again.
    Conflict(SequenceRow),
}

/// New values for a sequence's `next`, `max`, `block` and failover margin,
/// all of them (the caller fills in those it keeps from the row it read).
/// Checked above the backends: the bounds any sequence has by
/// [`SequenceStore::alter_if_version`] ([`Alteration::validate`]), and what
/// depends on the row by [`crate::sequence::alter`]: `next` only moves
/// forward and `max` never goes below what was reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Alteration {
    /// The next value to reserve.
    pub next: i64,
    /// The last value the sequence may hand out.
    pub max: i64,
    /// The default block size.
    pub block: i64,
    /// The failover margin ([`SequenceRow::failover_skip`]).
    pub failover_skip: i64,
    /// Whether the margin was set by hand ([`SequenceRow::failover_skip_set`]).
    pub failover_skip_set: bool,
}

impl Alteration {
    /// Checks the bounds any sequence has, whatever its row: `1 <= block <=
    /// MAX_RESERVATION`, `0 <= failover_skip <= MAX_RESERVATION`, `max <=
    /// MAX_VALUE` and `0 <= next`. What depends on the row (`next` only
    /// moves forward, `max` stays above what was reserved) is checked by
    /// [`crate::sequence::alter`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the field.
    pub fn validate(&self) -> Result<()> {
        check_count("block", self.block)?;
        check_failover_skip(self.failover_skip)?;
        check_max(self.max)?;
        if self.next < 0 {
            return Err(Error::invalid(format!(
                "next must be 0 or more, got {}",
                self.next
            )));
        }
        Ok(())
    }

    /// An alteration that keeps everything of `row`.
    pub fn keep(row: &SequenceRow) -> Alteration {
        Alteration {
            next: row.next,
            max: row.max,
            block: row.block,
            failover_skip: row.failover_skip,
            failover_skip_set: row.failover_skip_set,
        }
    }
}

/// How often a sequence's rate mark moves forward: its reservation rate is
/// measured over one to two of these.
pub const MARK_INTERVAL_MS: i64 = 60_000;

/// Changes to what the store counts of a sequence (see [`SequenceCounts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CountsDelta {
    /// Values handed back to the store by `close` (they are reserved again later).
    pub handed_back: i64,
    /// Values handles reported as handed out when they closed cleanly.
    pub handed_out: i64,
    /// Values a clean `close` could not hand back (someone reserved since): a
    /// known gap.
    pub abandoned: i64,
    /// Values skipped by moving `next` forward (`alter`, `adopt`).
    pub skipped: i64,
    /// The life of the name these counts are of
    /// ([`SequenceRow::incarnation`]; 0: whatever life it is in): counts of
    /// a handle or lease of an earlier life are refused
    /// ([`SequenceCounts::apply`]), never added to the next life's.
    pub incarnation: u64,
}

/// The count of a sequence or pool at one time, for its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateMark {
    /// Milliseconds since the Unix epoch, by the clock of the process that
    /// recorded it.
    pub at_ms: i64,
    /// The count then: [`SequenceCounts::reserved`] of a sequence, the
    /// numbers taken from a pool.
    pub reserved: i64,
}

/// The two newest [`RateMark`]s of a sequence or pool: the one place where
/// marks move and rates are measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateMarks {
    /// The newest mark.
    pub mark: Option<RateMark>,
    /// The one before it.
    pub prev_mark: Option<RateMark>,
}

impl RateMarks {
    /// The marks after seeing `value` at `now_ms`: the first value makes the
    /// first mark; after that the marks move once per [`MARK_INTERVAL_MS`].
    pub fn advance(self, now_ms: i64, value: i64) -> RateMarks {
        let here = RateMark {
            at_ms: now_ms,
            reserved: value,
        };
        match self.mark {
            None => RateMarks {
                mark: Some(here),
                prev_mark: None,
            },
            Some(m) if now_ms.saturating_sub(m.at_ms) >= MARK_INTERVAL_MS => RateMarks {
                mark: Some(here),
                prev_mark: Some(m),
            },
            Some(_) => self,
        }
    }

    /// Per second, from the older mark (else the newer) to `value` at
    /// `now_ms`; `None` before a second of history.
    pub fn rate(&self, now_ms: i64, value: i64) -> Option<f64> {
        let from = self.prev_mark.or(self.mark)?;
        let ms = now_ms.saturating_sub(from.at_ms);
        if ms < 1000 {
            return None;
        }
        let values = value.saturating_sub(from.reserved).max(0);
        Some(values as f64 * 1000.0 / ms as f64)
    }

    /// Per second between the two marks alone (for readers that have no
    /// newer value); `None` without both.
    pub fn rate_between(&self) -> Option<f64> {
        let (prev, mark) = (self.prev_mark?, self.mark?);
        let ms = mark.at_ms.saturating_sub(prev.at_ms);
        (ms >= 1000)
            .then(|| mark.reserved.saturating_sub(prev.reserved).max(0) as f64 * 1000.0 / ms as f64)
    }
}

/// What the store counts of a sequence beside its row. Every value reserved
/// is, in the end, handed out, handed back or lost; the counts say which as
/// far as clean closes reported it, and what is left is
/// [`Self::unaccounted`]: values in open handles, and at most what handles
/// that died had left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceCounts {
    /// Values handed back by `close`.
    pub handed_back: i64,
    /// Values reported handed out by handles that closed cleanly.
    pub handed_out: i64,
    /// Values a clean `close` could not hand back.
    pub abandoned: i64,
    /// Values skipped by moving `next` forward.
    pub skipped: i64,
    /// The newest rate mark.
    pub mark: Option<RateMark>,
    /// The one before it.
    pub prev_mark: Option<RateMark>,
}

impl SequenceCounts {
    /// Values ever reserved from `row`'s sequence: `next - start`, plus what
    /// was handed back (and reserved again), less what was skipped.
    pub fn reserved(&self, row: &SequenceRow) -> i64 {
        (row.next - row.start)
            .saturating_add(self.handed_back)
            .saturating_sub(self.skipped)
            .saturating_sub(row.failover_skipped)
    }

    /// Reserved values no clean close accounted for.
    pub fn unaccounted(&self, row: &SequenceRow) -> i64 {
        self.reserved(row)
            .saturating_sub(self.handed_back)
            .saturating_sub(self.handed_out)
            .saturating_sub(self.abandoned)
    }

    /// These counts after `delta`, at `now_ms`, for `row` as the store holds
    /// it: the one place the counts and rate marks are computed (backends
    /// apply it in a transaction with the row, or compare the row's life in
    /// the write).
    ///
    /// # Errors
    /// [`Error::Dropped`] when `row` is of another life than
    /// `delta.incarnation`: the counts went with the life they were of.
    pub fn apply(
        &self,
        row: &SequenceRow,
        delta: &CountsDelta,
        now_ms: i64,
    ) -> Result<SequenceCounts> {
        row.check_life(delta.incarnation, "handle")?;
        let mut c = SequenceCounts {
            handed_back: self.handed_back.saturating_add(delta.handed_back),
            handed_out: self.handed_out.saturating_add(delta.handed_out),
            abandoned: self.abandoned.saturating_add(delta.abandoned),
            skipped: self.skipped.saturating_add(delta.skipped),
            ..*self
        };
        let marks = RateMarks {
            mark: c.mark,
            prev_mark: c.prev_mark,
        }
        .advance(now_ms, c.reserved(row));
        c.mark = marks.mark;
        c.prev_mark = marks.prev_mark;
        Ok(c)
    }

    /// The automatic failover margin these counts call for (the rate now,
    /// see [`auto_failover_skip`]): what [`SequenceStore::raise_failover_skip`]
    /// is given once a minute.
    pub fn failover_skip_wanted(&self, row: &SequenceRow, now_ms: i64) -> i64 {
        auto_failover_skip(row.block, self.rate(row, now_ms))
    }

    /// Values reserved per second recently, measured from the older mark
    /// (else the newer) to `row` at `now_ms`; `None` before there is a second
    /// of history.
    pub fn rate(&self, row: &SequenceRow, now_ms: i64) -> Option<f64> {
        RateMarks {
            mark: self.mark,
            prev_mark: self.prev_mark,
        }
        .rate(now_ms, self.reserved(row))
    }

    /// Seconds until the sequence reaches its maximum at [`Self::rate`];
    /// `None` without a rate, or at a rate of zero.
    pub fn runway_seconds(&self, row: &SequenceRow, now_ms: i64) -> Option<f64> {
        let rate = self.rate(row, now_ms).filter(|r| *r > 0.0)?;
        Some(row.remaining().max(0) as f64 / rate)
    }
}

/// What a backend does for sequences. Names given to these methods have been
/// validated by the caller; counts are in `1..=MAX_RESERVATION`. Every write
/// is durable when the method returns.
///
/// Generations: every write of `next` (put, alter, the reservations) records
/// the store's current generation ([`super::Store::generation`]) in the row,
/// and first, in the same transaction, applies [`SequenceRow::fence`]: a row
/// last written in another generation moves forward by its failover margin
/// before anything is planned from it. Checking costs no extra round trip:
/// the generation is known to the store process or computed in the same
/// statement.
#[async_trait]
pub trait SequenceStore: Send + Sync + std::fmt::Debug {
    /// Creates a sequence with `next = start` and version 1, where `start`
    /// is `spec.start` raised above the name's tombstone, read in the same
    /// transaction ([`super::Tombstone::raise_sequence`]; unchanged with
    /// `spec.start_below_dropped`): creating a dropped name continues above
    /// the values it handed out. The row returned says the start used.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] if a sequence of that name exists;
    /// [`Error::InvalidArgument`] when `spec.max` leaves no room above the
    /// tombstone.
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow>;

    /// The row of a sequence, or `None`.
    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>>;

    /// Sets `next` to `new_next` and bumps the version, only if the version is
    /// still `expected_version`. On a mismatch nothing changes and the current
    /// row comes back.
    ///
    /// # Errors
    /// [`Error::NotFound`] if the sequence is gone.
    async fn put_if_version(&self, name: &str, new_next: i64, expected_version: u64)
    -> Result<Put>;

    /// Raises the failover margin of a sequence whose margin was not set by
    /// hand to `at_least`, if it is below; changes nothing else (not the
    /// version: allocation goes on undisturbed).
    ///
    /// # Errors
    /// [`Error::NotFound`] if the sequence is gone.
    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> Result<()>;

    /// Sets `next`, `max`, `block` and the failover margin to `change`'s and bumps the version,
    /// only if the version is still `expected_version`: the same conditional
    /// write as [`Self::put_if_version`], so it is safe while handles
    /// allocate. On a mismatch nothing changes and the current row comes back.
    ///
    /// Checks `change` with [`Alteration::validate`] (so a backend never
    /// writes a block size, margin or maximum no sequence may have), then
    /// calls [`Self::alter_checked`]: backends implement that, not this.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `change` that
    /// [`Alteration::validate`] refuses (nothing is written);
    /// [`Error::NotFound`] if the sequence is gone.
    async fn alter_if_version(
        &self,
        name: &str,
        change: &Alteration,
        expected_version: u64,
    ) -> Result<Put> {
        change.validate()?;
        self.alter_checked(name, change, expected_version).await
    }

    /// What a backend implements for [`Self::alter_if_version`], with the
    /// same guarantees; `change` has passed [`Alteration::validate`].
    ///
    /// # Errors
    /// [`Error::NotFound`] if the sequence is gone.
    async fn alter_checked(&self, name: &str, change: &Alteration, expected: u64) -> Result<Put>;

    /// Reserves up to `n` values under a row lock (SELECT ... FOR UPDATE,
    /// BEGIN IMMEDIATE, a lease-held lock), committed before it returns.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Exhausted`].
    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation>;

    /// [`Self::reserve_locked`] in life `incarnation` of the name only (0:
    /// whatever life it is in; see [`SequenceRow::incarnation`]): a row of
    /// another life is [`Error::Dropped`] (held: "handle") and nothing is
    /// written. Handles reserve through this, so a handle of a dropped
    /// life never writes into the next.
    ///
    /// The default reserves, then checks: a refused reservation is then a
    /// gap in the later life, none of it handed out. A backend that can
    /// check inside its transaction overrides it, as every backend in this
    /// workspace does.
    ///
    /// # Errors
    /// As [`Self::reserve_locked`], and [`Error::Dropped`].
    async fn reserve_locked_in(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        let r = self.reserve_locked(name, n).await?;
        check_reservation_life(name, &r, incarnation)?;
        Ok(r)
    }

    /// Reserves up to `n` values in one server-side step where the store
    /// has one ([`Self::atomic_reserve`]: PostgreSQL's one `UPDATE ...
    /// RETURNING`, etcd's one transaction from a cached row), else under the
    /// row lock of [`Self::reserve_locked`] (SQLite, MySQL, memory: there
    /// the lock is one short transaction already). This is the one place the
    /// `atomic` strategy is decided; backends implement
    /// [`AtomicReserve`], not this. A wrapper around a store overrides it
    /// only to add something of its own before forwarding.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Exhausted`], and what the path taken
    /// fails with.
    async fn reserve_atomic(&self, name: &str, n: i64) -> Result<Reservation> {
        match self.atomic_reserve() {
            Some(one_step) => one_step.reserve_one_step(name, n).await,
            None => self.reserve_locked(name, n).await,
        }
    }

    /// The store's one-step reservation ([`AtomicReserve`]), or `None`
    /// (the default) for a store without one: then
    /// [`Self::reserve_atomic`] takes the row lock. PostgreSQL and etcd
    /// return `Some`; SQLite, MySQL and the memory store `None`.
    fn atomic_reserve(&self) -> Option<&dyn AtomicReserve> {
        None
    }

    /// [`Self::reserve_atomic`] in life `incarnation` of the name only (0:
    /// whatever life it is in), as [`Self::reserve_locked_in`]: the one
    /// place the `atomic` strategy of a handle is decided.
    ///
    /// # Errors
    /// As [`Self::reserve_atomic`], and [`Error::Dropped`].
    async fn reserve_atomic_in(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        match self.atomic_reserve() {
            Some(one_step) => one_step.reserve_one_step_in(name, n, incarnation).await,
            None => self.reserve_locked_in(name, n, incarnation).await,
        }
    }

    /// Adds `delta` to the sequence's counts and moves its rate mark when the
    /// last is [`MARK_INTERVAL_MS`] old, in one transaction with the row
    /// (see [`SequenceCounts::apply`]).
    ///
    /// # Errors
    /// [`Error::NotFound`] if the sequence is gone.
    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()>;

    /// The sequence's row and counts (all zero before anything was recorded).
    ///
    /// # Errors
    /// [`Error::NotFound`] if there is no such sequence.
    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)>;

    /// Every sequence, ordered by name.
    async fn list_sequences(&self) -> Result<Vec<SequenceRow>>;

    /// The names of at most `limit` existing sequences next to `name` in
    /// name order, ascending: the `limit / 2` closest that sort before it
    /// and the `limit - limit / 2` closest that sort at or after it (fewer
    /// where a side has fewer). These are the names sharing the longest
    /// prefix with `name`: what a "did you mean" hint scores, so that a
    /// miss costs the same however many sequences exist. `name` need not
    /// exist.
    ///
    /// The default lists every sequence (a backend with an index on names
    /// overrides it with two bounded range reads: O(log n), whatever the
    /// store holds). A backend's own name order (a database collation) may
    /// differ from Rust's byte order; the names are still neighbours in it.
    ///
    /// # Errors
    /// What the store fails with.
    async fn sequence_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        let names = self
            .list_sequences()
            .await?
            .into_iter()
            .map(|r| r.name)
            .collect();
        Ok(names_near(names, name, limit))
    }

    /// How many sequences have a name that starts with `prefix` (every
    /// sequence for `""`): what a quota on the names of a principal counts.
    ///
    /// The default lists every sequence; a backend with an index on names
    /// overrides it with one counting range read of
    /// `prefix..`[`crate::prefix_end`]`(prefix)`: O(log n + k) for the k
    /// names it counts, whatever else the store holds.
    ///
    /// # Errors
    /// What the store fails with.
    async fn count_sequences_with_prefix(&self, prefix: &str) -> Result<u64> {
        let rows = self.list_sequences().await?;
        Ok(rows.iter().filter(|r| r.name.starts_with(prefix)).count() as u64)
    }

    /// Removes a sequence, and in the same transaction raises the name's
    /// tombstone above every value it handed out
    /// ([`super::Tombstone::after_sequence_drop`]), so that a sequence
    /// created again under the name continues above them.
    ///
    /// # Errors
    /// [`Error::NotFound`] if there is none.
    async fn drop_sequence(&self, name: &str) -> Result<()>;
}

/// An optional capability of a [`SequenceStore`] (as `object_store`'s
/// `MultipartStore` is of an `ObjectStore`): a reservation in one
/// server-side step, with no lock held across round trips. A store has it
/// only when it has such a step; it hands it out with
/// [`SequenceStore::atomic_reserve`], and [`SequenceStore::reserve_atomic`]
/// uses it. Which stores have it: PostgreSQL (one `UPDATE ... RETURNING`
/// that fences, plans and writes the row) and etcd (one transaction that
/// compares the version of the row its last reservation wrote, retried at
/// once from the row etcd returns). SQLite, MySQL and the memory store do
/// not: their `atomic` strategy is their locked transaction.
#[async_trait]
pub trait AtomicReserve: Send + Sync {
    /// Reserves up to `n` values (`n` in `1..=MAX_RESERVATION`) of the
    /// sequence `name` in one server-side step, fencing the row first as
    /// every write does ([`SequenceRow::fence`]); durable when it returns.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Exhausted`]; on etcd
    /// [`Error::Contention`] after too many lost races.
    async fn reserve_one_step(&self, name: &str, n: i64) -> Result<Reservation>;

    /// [`Self::reserve_one_step`] in life `incarnation` of the name only (0:
    /// whatever life it is in), as [`SequenceStore::reserve_locked_in`]. The
    /// default reserves, then checks (a refused reservation is a gap in the
    /// later life); a backend whose step can compare the life overrides it.
    ///
    /// # Errors
    /// As [`Self::reserve_one_step`], and [`Error::Dropped`].
    async fn reserve_one_step_in(
        &self,
        name: &str,
        n: i64,
        incarnation: u64,
    ) -> Result<Reservation> {
        let r = self.reserve_one_step(name, n).await?;
        check_reservation_life(name, &r, incarnation)?;
        Ok(r)
    }
}

/// `Ok` when reservation `r` of sequence `name` was made in life
/// `incarnation` (or either is unknown: 0).
///
/// # Errors
/// [`Error::Dropped`] (held: "handle") otherwise.
pub fn check_reservation_life(name: &str, r: &Reservation, incarnation: u64) -> Result<()> {
    if incarnation == 0 || r.incarnation == 0 || r.incarnation == incarnation {
        return Ok(());
    }
    Err(Error::Dropped {
        kind: "sequence",
        name: name.to_owned(),
        held: "handle",
    })
}

/// Checks a count (block size, number of values) is in `1..=MAX_RESERVATION`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming `what`.
pub fn check_count(what: &str, n: i64) -> Result<()> {
    if (1..=MAX_RESERVATION).contains(&n) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} must be between 1 and {MAX_RESERVATION}, got {n}"
        )))
    }
}

#[cfg(test)]
mod counts_tests {
    use super::*;

    fn row(next: i64) -> SequenceRow {
        let spec = SequenceSpec {
            max: 1_000_000,
            block: 10,
            ..SequenceSpec::new("s")
        };
        SequenceRow {
            next,
            ..SequenceRow::created(&spec, "g")
        }
    }

    #[test]
    fn counts_add_up_and_marks_move_once_a_minute() {
        let c = SequenceCounts::default();
        let c = c
            .apply(
                &row(101),
                &CountsDelta {
                    handed_out: 60,
                    handed_back: 10,
                    abandoned: 5,
                    skipped: 20,
                    incarnation: 0,
                },
                0,
            )
            .unwrap();
        // next - start + handed back - skipped = 100 + 10 - 20.
        assert_eq!(c.reserved(&row(101)), 90);
        assert_eq!(c.unaccounted(&row(101)), 90 - 10 - 60 - 5);
        assert_eq!(
            c.mark,
            Some(RateMark {
                at_ms: 0,
                reserved: 90
            })
        );
        let c = c
            .apply(&row(201), &CountsDelta::default(), MARK_INTERVAL_MS - 1)
            .unwrap();
        assert_eq!((c.mark.map(|m| m.at_ms), c.prev_mark), (Some(0), None));
        let c = c
            .apply(&row(301), &CountsDelta::default(), MARK_INTERVAL_MS)
            .unwrap();
        assert_eq!(
            c.prev_mark,
            Some(RateMark {
                at_ms: 0,
                reserved: 90
            })
        );
        assert_eq!(
            c.mark,
            Some(RateMark {
                at_ms: MARK_INTERVAL_MS,
                reserved: 290
            })
        );
    }

    #[test]
    fn rate_and_runway_from_the_older_mark() {
        let mut c = SequenceCounts::default();
        assert_eq!(c.rate(&row(1), 10_000), None, "no mark, no rate");
        c.mark = Some(RateMark {
            at_ms: 0,
            reserved: 0,
        });
        assert_eq!(c.rate(&row(1), 999), None, "under a second of history");
        // 1000 values in 10 s: 100/s; 999_001 left -> 9990.01 s.
        let r = row(1001);
        assert_eq!(c.rate(&r, 10_000), Some(100.0));
        assert_eq!(c.runway_seconds(&r, 10_000), Some(999_000.0 / 100.0));
        c.prev_mark = Some(RateMark {
            at_ms: -10_000,
            reserved: 0,
        });
        assert_eq!(
            c.rate(&r, 10_000),
            Some(50.0),
            "measured from the older mark"
        );
        assert_eq!(
            c.runway_seconds(&row(1), 10_000),
            None,
            "a rate of zero has no runway"
        );
    }
}

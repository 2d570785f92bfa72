//! Creating, describing, listing and dropping sequences: what the CLI and
//! the server call, with the name checks and the "did you mean" in one place.

use serde::{Deserialize, Serialize};

use crate::backoff::Retries;
use crate::store::{
    Alteration, CountsDelta, MAX_VALUE, Numbering, Put, Residue, SequenceRow, SequenceSpec,
    SequenceStore, Store, check_count,
};
use crate::{Error, HINT_CANDIDATES, Result, closest_names, validate_name};

use super::SequenceInfo;

/// Creates a sequence. Creating a dropped name continues above the values
/// it handed out: the start is raised above them unless
/// `spec.start_below_dropped` is set, and the result's
/// [`SequenceInfo::continued_above_dropped`] says so.
///
/// # Errors
/// [`Error::InvalidName`] / [`Error::InvalidArgument`] for a bad spec (see
/// [`SequenceSpec::validate`]) or a maximum that leaves no room above the
/// dropped values, [`Error::AlreadyExists`], what the store fails with.
/// Nothing is written on error.
pub async fn create(store: &dyn SequenceStore, spec: &SequenceSpec) -> Result<SequenceInfo> {
    spec.validate()?;
    let row = store.create_sequence(spec).await?;
    Ok(SequenceInfo::created(row, None, spec.start))
}

/// Creates a sequence whose values are all `residue.offset` modulo
/// `residue.increment` (see [`Residue`]): handed out in blocks like any
/// sequence's, one class per region with a store of its own, so that no two
/// regions hand out the same value. `spec`'s start and max are rounded into
/// the class; the result shows values.
///
/// # Errors
/// As [`create`]; [`Error::InvalidArgument`] for a bad class or no value of
/// it between start and max. Nothing is written on error.
pub async fn create_in_class(
    store: &dyn Store,
    spec: &SequenceSpec,
    residue: Residue,
) -> Result<SequenceInfo> {
    spec.validate()?;
    residue.validate()?;
    let slots = super::spec_in_slots(&residue, spec)?;
    let numbering = Numbering {
        residue: Some(residue),
        ..Numbering::default()
    };
    let row = store.create_numbered(&slots, &numbering).await?;
    Ok(SequenceInfo::created(row, Some(residue), slots.start))
}

/// Creates a leader-ordered sequence ([`crate::store::Order::Leader`]): a
/// plain sequence whose order is kept in the store with it (its numbering),
/// so that every process serves it through its leader
/// ([`super::LeaderSequence`]).
///
/// # Errors
/// As [`create`]; [`Error::InvalidName`] for a name too long to name its
/// lease ([`super::leader::leader_group`]). Nothing is written on error.
pub async fn create_leader(store: &dyn Store, spec: &SequenceSpec) -> Result<SequenceInfo> {
    spec.validate()?;
    super::leader::leader_group(&spec.name)?;
    let numbering = Numbering::of_order(crate::store::Order::Leader).unwrap_or_default();
    let row = store.create_numbered(spec, &numbering).await?;
    Ok(SequenceInfo::created(row, None, spec.start))
}

/// Creates a sequence unless one of that name exists, and returns the row
/// the store holds: the new one, or the existing one, whatever its bounds
/// (callers that care compare them). A new one over a dropped name starts
/// above the values the dropped one handed out, as with [`create`]. When two callers race, one creates it
/// and both get its row. The one place keysmith creates a sequence on first
/// use (revision numbers, identity ranges).
///
/// # Errors
/// As [`create`]; [`Error::AlreadyExists`] only if the sequence was dropped
/// again between the failed create and the read.
pub async fn create_or_get(store: &dyn SequenceStore, spec: &SequenceSpec) -> Result<SequenceRow> {
    spec.validate()?;
    match store.create_sequence(spec).await {
        Err(Error::AlreadyExists { kind, name }) => match store.read_sequence(&spec.name).await? {
            Some(row) => Ok(row),
            None => Err(Error::AlreadyExists { kind, name }),
        },
        other => other,
    }
}

/// The current state of a sequence.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names.
pub async fn describe(store: &dyn SequenceStore, name: &str) -> Result<SequenceRow> {
    validate_name(name)?;
    match store.read_sequence(name).await? {
        Some(row) => Ok(row),
        None => Err(not_found(store, name).await),
    }
}

/// A sequence with its [`SequenceUsage`](super::SequenceUsage): its rate,
/// the runway to its maximum at that rate, and where its values went.
///
/// # Errors
/// As [`describe`].
pub async fn show(store: &dyn Store, name: &str) -> Result<SequenceInfo> {
    match show_if_exists(store, name).await? {
        Some(info) => Ok(info),
        None => Err(not_found(store, name).await),
    }
}

/// [`show`], but a missing sequence is `None`, found without looking for
/// similar names: what a caller that only records the state (an audit
/// trail) asks, at the cost of one store read whatever the store holds.
///
/// # Errors
/// As [`show`], but never [`Error::NotFound`].
pub async fn show_if_exists(store: &dyn Store, name: &str) -> Result<Option<SequenceInfo>> {
    validate_name(name)?;
    let (row, counts) = match store.read_counts(name).await {
        Err(Error::NotFound { .. }) => return Ok(None),
        other => other?,
    };
    let numbering = store.read_numbering(name).await?;
    let residue = numbering.as_ref().and_then(|n| n.residue);
    // Numbers from the period counters: the row's next and counts stay.
    if numbering.is_some_and(|n| n.residue.is_none() && !n.is_leader()) {
        let numbers = store
            .read_numbers(name)
            .await?
            .map(|r| super::NumbersUsage::of(&r, row.start));
        let mut info = SequenceInfo::of(row, None);
        if let Some(n) = &numbers {
            info.remaining = info.row.max.saturating_sub(n.next).saturating_add(1).max(0);
        }
        info.numbers = numbers;
        return Ok(Some(info));
    }
    let now = super::now_ms();
    let usage = super::SequenceUsage {
        reserved: counts.reserved(&row),
        handed_out: counts.handed_out,
        handed_back: counts.handed_back,
        abandoned: counts.abandoned,
        skipped: counts.skipped,
        unaccounted: counts.unaccounted(&row),
        rate_per_second: counts.rate(&row, now),
        runway_seconds: counts.runway_seconds(&row, now),
    };
    Ok(Some(SequenceInfo {
        usage: Some(usage),
        ..SequenceInfo::of(row, residue)
    }))
}

/// The residue class of a sequence whose values are one (any other
/// numbering, or none: `None`).
async fn residue_of(store: &dyn Store, name: &str) -> Result<Option<Residue>> {
    Ok(store.read_numbering(name).await?.and_then(|n| n.residue))
}

/// Every sequence, by name. Reads each one's numbering too, to show the
/// values of one that is a residue class: one store call per sequence
/// after the listing.
///
/// # Errors
/// What the store fails with.
pub async fn list(store: &dyn Store) -> Result<Vec<SequenceInfo>> {
    let rows = store.list_sequences().await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let residue = residue_of(store, &row.name).await?;
        out.push(SequenceInfo::of(row, residue));
    }
    Ok(out)
}

/// What [`alter`] changes in a sequence; `None` keeps the current value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlterSpec {
    /// The next value to hand out: only forward, past every value a handle
    /// may still hand out. The values skipped are never handed out.
    pub next: Option<i64>,
    /// The last value: never below the values reserved so far.
    pub max: Option<i64>,
    /// The default block size of handles opened from now on.
    pub block: Option<i64>,
    /// The failover margin (see [`SequenceRow::fence`]): set by hand from
    /// now on, no longer following the rate.
    #[serde(default)]
    pub failover_skip: Option<i64>,
}

impl AlterSpec {
    /// The change `self` makes to `row`, checked against it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying what is wrong and what would do.
    pub fn apply_to(&self, row: &SequenceRow) -> Result<Alteration> {
        let name = &row.name;
        if self.next.is_none()
            && self.max.is_none()
            && self.block.is_none()
            && self.failover_skip.is_none()
        {
            return Err(Error::invalid(format!(
                "nothing to change in sequence {name:?}; give a new next, max, block or failover skip"
            )));
        }
        if let Some(n) = self.failover_skip {
            crate::store::check_failover_skip(n)?;
        }
        let block = self.block.unwrap_or(row.block);
        check_count("block", block)?;
        let max = self.max.unwrap_or(row.max);
        // Every value below `next` is reserved: handles may still hand it out.
        let lowest_max = (row.next - 1).max(row.start);
        if max > MAX_VALUE || max < lowest_max {
            return Err(Error::invalid(format!(
                "max {max} is out of range for sequence {name:?}: values up to {} are reserved already \
                 (open handles may still hand them out), so max must be between {lowest_max} and {MAX_VALUE}",
                row.next - 1
            )));
        }
        let next = self.next.unwrap_or(row.next);
        if next < row.next {
            return Err(Error::invalid(format!(
                "next can only move forward: values below {} of sequence {name:?} are reserved \
                 (open handles may still hand them out); give a next of {} or more",
                row.next, row.next
            )));
        }
        if next > max + 1 {
            return Err(Error::invalid(format!(
                "next {next} is past the maximum {max} of sequence {name:?}; raise max too, or give a next of at most {}",
                max + 1
            )));
        }
        Ok(Alteration {
            next,
            max,
            block,
            failover_skip: self.failover_skip.unwrap_or(row.failover_skip),
            failover_skip_set: row.failover_skip_set || self.failover_skip.is_some(),
        })
    }
}

/// Changes a sequence's next value, maximum or block size, with the same
/// conditional write as a reservation, so it is safe while handles allocate:
/// a reservation that comes in between makes it read the row again and check
/// the change against that. Returns the row after the change.
///
/// `next` only moves forward and `max` never goes below the values reserved
/// so far, so no value a handle may still hand out is handed out again, and
/// none is taken from a handle. Handles already open keep their block size.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names;
/// [`Error::InvalidArgument`] for a change the row does not allow (see
/// [`AlterSpec::apply_to`]), checked again after every lost race;
/// [`Error::Contention`] if reservations keep winning for
/// [`crate::DEFAULT_RETRY_BUDGET`]; what the store fails with. Nothing is
/// written on error.
pub async fn alter(store: &dyn Store, name: &str, spec: &AlterSpec) -> Result<SequenceInfo> {
    let mut row = describe(store, name).await?;
    let residue = super::blocks_of(store, name).await?;
    let mut retries = Retries::new(crate::DEFAULT_RETRY_BUDGET, None);
    loop {
        // Checked in values, so that what is refused is said in values;
        // written in slots.
        let change = match &residue {
            None => spec.apply_to(&row)?,
            Some(r) => {
                let c = spec.apply_to(&super::row_in_values(r, row.clone()))?;
                Alteration {
                    next: r.slot_at_or_above(c.next),
                    max: r.slot_at_or_below(c.max),
                    ..c
                }
            }
        };
        match store.alter_if_version(name, &change, row.version).await? {
            Put::Done(done) => {
                let skipped = done.next - row.next;
                if skipped > 0 {
                    let delta = CountsDelta {
                        skipped,
                        incarnation: done.incarnation,
                        ..CountsDelta::default()
                    };
                    // Best effort: unrecorded, the skipped values only show
                    // as unaccounted.
                    if let Err(e) = store.record_counts(name, &delta, super::now_ms()).await {
                        tracing::warn!(sequence = %name, "altered, but the {skipped} values skipped were not counted: {e}");
                    }
                }
                return Ok(SequenceInfo::of(done, residue));
            }
            Put::Conflict(current) => {
                row = current;
                if !retries.lost() {
                    return Err(Error::Contention {
                        name: name.to_owned(),
                        attempts: retries.lost_races(),
                    });
                }
            }
        }
    }
}

/// Drops a sequence. The store keeps a tombstone of the name (in the same
/// transaction), so creating a dropped name continues above the values it
/// handed out: a sequence created later under the same name starts above
/// every value this one reserved, unless it is created with
/// `start_below_dropped`.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names.
pub async fn remove(store: &dyn SequenceStore, name: &str) -> Result<()> {
    validate_name(name)?;
    match store.drop_sequence(name).await {
        Err(Error::NotFound { .. }) => Err(not_found(store, name).await),
        other => other,
    }
}

/// The `NotFound` of a missing sequence, with the similar names among the
/// [`HINT_CANDIDATES`] next to it in name order (a bounded read, whatever
/// the store holds).
async fn not_found(store: &dyn SequenceStore, name: &str) -> Error {
    let similar = match store.sequence_names_near(name, HINT_CANDIDATES).await {
        Ok(names) => closest_names(name, names.iter().map(String::as_str)),
        Err(_) => Vec::new(),
    };
    Error::NotFound {
        kind: "sequence",
        name: name.to_owned(),
        similar,
    }
}

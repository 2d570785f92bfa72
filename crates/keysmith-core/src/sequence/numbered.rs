//! What block-based uses (handles, reserve leases, alter, adopt) say to a
//! numbered sequence, whose numbers come from [`crate::numbers`] instead,
//! and how they take one whose values are a residue class: in slots, made
//! values at the edge ([`Residue`]).

use crate::Error;
use crate::Result;
use crate::store::{NumberStore, Numbering, Residue, SequenceRow, SequenceSpec};

/// The error for block-based use (a [`crate::sequence::Sequence`] handle, a
/// reserve lease, alter, adopt) of a numbered sequence.
pub(crate) fn blocks_refused(name: &str, numbering: &Numbering) -> Error {
    if numbering.is_leader() {
        Error::WrongKind(format!(
            "sequence {name:?} is leader-ordered: its values come from the process holding its leader lease (keysmith next {name}, POST /v1/sequences/{name}/next, keysmith::AnySequence or keysmith::sequence::LeaderSequence), not from blocks of other handles"
        ))
    } else if numbering.gapless {
        Error::WrongKind(format!(
            "sequence {name:?} is gap-free: take its numbers with tickets (take a ticket, then commit it), not in blocks"
        ))
    } else {
        Error::WrongKind(format!(
            "sequence {name:?} hands out numbered values (period or format): take them with next (keysmith::numbers::Numbers in the library); blocks of plain integers do not apply to it"
        ))
    }
}

/// What block-based uses (handles, reserve leases, alter, adopt) call after
/// reading the row: `None` for an ordinary sequence, its [`Residue`] for
/// one whose values are a residue class (still handed out in blocks).
///
/// # Errors
/// [`Error::WrongKind`] for any other numbered sequence, saying how to take
/// its numbers instead.
pub(crate) async fn blocks_of(store: &dyn NumberStore, name: &str) -> Result<Option<Residue>> {
    match store.read_numbering(name).await? {
        None => Ok(None),
        Some(n) => match n.residue {
            Some(r) => Ok(Some(r)),
            None => Err(blocks_refused(name, &n)),
        },
    }
}

/// `spec` (in values) as the row the store keeps for residue class `r` (in
/// slots): the first slot at or above `start`, the last at or below `max`.
///
/// # Errors
/// [`Error::InvalidArgument`] when no value of the class lies between
/// `start` and `max`.
pub(crate) fn spec_in_slots(r: &Residue, spec: &SequenceSpec) -> Result<SequenceSpec> {
    let (start, max) = (r.slot_at_or_above(spec.start), r.slot_at_or_below(spec.max));
    if start > max {
        return Err(Error::invalid(format!(
            "no value {} modulo {} lies between start {} and max {}; widen the range",
            r.offset, r.increment, spec.start, spec.max
        )));
    }
    Ok(SequenceSpec {
        start,
        max,
        ..spec.clone()
    })
}

/// A stored row of residue class `r` (in slots) as callers see it: `next`,
/// `start` and `max` in values. Block, version and the failover margin stay
/// counts of slots, which are counts of values.
pub(crate) fn row_in_values(r: &Residue, row: SequenceRow) -> SequenceRow {
    SequenceRow {
        next: r.value(row.next),
        start: r.value(row.start),
        max: r.value(row.max),
        ..row
    }
}

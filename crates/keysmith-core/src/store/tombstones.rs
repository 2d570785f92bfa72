//! Tombstones: what a store keeps of a sequence or pool it dropped, so that
//! creating a dropped name continues above the values it handed out.
//!
//! Dropping a sequence or a pool writes (or raises) the name's
//! [`Tombstone`] in the same transaction or atomic operation as the
//! delete; creating the name again reads it in the same transaction as the
//! insert and raises the start above it ([`Tombstone::raise_sequence`],
//! [`Tombstone::raise_pool`]), unless the spec asks to start below it
//! (`start_below_dropped`). A drop writes the tombstone of its own kind
//! (sequence or pool), but a create reads the name's tombstones of *every*
//! kind and raises above their [`Tombstone::max`]: one name has one history,
//! so a pool created under a dropped sequence's name starts above every
//! value that sequence handed out, and the other way round. A tombstone is
//! never removed and only moves up (the larger of the old and the new mark,
//! field by field, [`Tombstone::max`]).
//!
//! # Lives of a name
//!
//! Each create starts a new *life* of the name, and its row records the
//! life's *incarnation*: [`Tombstone::incarnation`], one above the largest
//! row version any earlier life reached ([`Tombstone::version`]). A row's
//! version starts at its incarnation and only grows, so the versions of one
//! name never repeat across its lives, and every conditional write (a put
//! on a version, a hand-back, an alteration) planned in one life fails in
//! any later one: nothing taken before a drop (a handle, a lease token)
//! writes after it. Handles and leases that meet a row of another
//! incarnation fail with [`Error::Dropped`].
//!
//! # What a tombstone bounds, and why two numbers
//!
//! The rule is that no value is handed out twice under one name, whatever
//! kind of sequence held it before. Values are compared as integers: the
//! number of a numbered sequence (per period, formatted or not), the value
//! of a residue class's slot, the bit reversal of a bit-reversed sequence's
//! counter.
//!
//! - [`Tombstone::high_water`]: every value handed out by a dropped sequence
//!   that was *not* bit-reversed (plain, residue class, numbered, gap-free)
//!   or by a dropped pool is below it. For a plain sequence that is its
//!   `next` (every reserved value is below it; handles still holding a block
//!   hand out values below it only); for a residue class the value of its
//!   next slot; for a numbered sequence the largest next number of any of
//!   its periods (a number of the new sequence is then above every number of
//!   *every* period of the old one: the simplest rule that never repeats a
//!   (period, number) pair); for a pool the value of its largest member
//!   (every value a slot handed out is below the member it holds now).
//! - [`Tombstone::reversed_next`]: every counter a dropped bit-reversed
//!   sequence reserved is below it. A bit-reversed sequence's values spread
//!   over the whole range, so a value bound would leave a later plain
//!   sequence little room and a later bit-reversed one none; its counter
//!   bound lets a bit-reversed sequence created again simply continue its
//!   counter (the reversal is one to one), and gives everything else the
//!   value bound [`reversed_bound`].
//!
//! Creating again: a sequence that is not bit-reversed starts at or above
//! [`Tombstone::floor`] (the larger of the high water and the reversed
//! bound), a residue class at its first slot whose value is there, a pool at
//! its first member there. A bit-reversed sequence continues its counter at
//! or above `reversed_next`, and, when non-reversed values were handed out
//! below `high_water`, keeps its counters below `2^(63 - b)` with
//! `2^b >= high_water`: every such counter has a set bit among its low
//! `63 - b` bits, so its reversal is `2^b` or more (its maximum is lowered to
//! that, and said in its row). When the object's bounds leave no room, the
//! create fails with [`Error::InvalidArgument`] saying so.

use serde::{Deserialize, Serialize};

use super::{PoolRow, PoolSpec, SequenceRow, SequenceSpec, first_member};
use crate::numbering::{Numbering, VALUE_BITS};
use crate::{Error, Result};

/// The tombstone kind of sequences, as backends that keep one table for
/// both kinds store it.
pub const SEQUENCE_KIND: &str = "sequence";

/// The tombstone kind of pools.
pub const POOL_KIND: &str = "pool";

/// What a store keeps of the sequences or pools of one name it dropped (see
/// the module docs): bounds above every value they handed out, and above
/// every row version they reached. The default (all 0) is "nothing
/// dropped".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    /// Every value a dropped non-bit-reversed sequence or a dropped pool of
    /// this name handed out is below it.
    pub high_water: i64,
    /// Every counter a dropped bit-reversed sequence of this name reserved
    /// is below it.
    pub reversed_next: i64,
    /// The largest row version a dropped life of this name reached (a
    /// pool's life counts as its incarnation): the next life's versions
    /// start above it ([`Tombstone::incarnation`]), so a conditional write
    /// carrying a version of an earlier life never matches a later one.
    /// 0 in tombstones written before keysmith kept it.
    #[serde(default)]
    pub version: u64,
}

/// A value bound of the bit reversals of every counter below `next` (0 when
/// `next <= 1`: counter 0 is never handed out): with `2^k > next - 1`, the
/// reversal of each such counter has its low `63 - k` bits clear, so it is
/// at most `2^63 - 2^(63 - k)`; the bound is one above that.
pub fn reversed_bound(next: i64) -> i64 {
    if next <= 1 {
        return 0;
    }
    let k = 64 - (next - 1).leading_zeros(); // 1..=63
    let top = (1u64 << VALUE_BITS) - (1u64 << (VALUE_BITS - k)); // 2^63 - 2^(63-k)
    i64::try_from(top + 1).unwrap_or(i64::MAX)
}

impl Tombstone {
    /// The larger of two tombstones, field by field: what a drop writes over
    /// an older tombstone (never lower).
    pub fn max(self, other: Tombstone) -> Tombstone {
        Tombstone {
            high_water: self.high_water.max(other.high_water),
            reversed_next: self.reversed_next.max(other.reversed_next),
            version: self.version.max(other.version),
        }
    }

    /// The incarnation of the name's next life: its first row version, one
    /// above every version an earlier life reached. Lives of one name, of
    /// any kind, never share a version; see the module docs.
    pub fn incarnation(&self) -> u64 {
        self.version.saturating_add(1)
    }

    /// Whether nothing was ever dropped under the name (both bounds 0).
    pub fn is_empty(&self) -> bool {
        self.high_water <= 0 && self.reversed_next <= 0
    }

    /// Every value handed out under the name is below this: the high water
    /// and the value bound of the reversed counters ([`reversed_bound`]).
    pub fn floor(&self) -> i64 {
        self.high_water.max(reversed_bound(self.reversed_next))
    }

    /// The tombstone a dropped sequence leaves: `row` as the store holds it
    /// (slots of a residue class, counters of a bit-reversed sequence),
    /// `numbering` its numbering (`None` for an ordinary sequence) and
    /// `counters_next` the largest next number of any of its period counters
    /// (`None` without any), raised over `self` (the tombstone before);
    /// `generation` is the store's current one: a row last written in
    /// another is fenced first ([`SequenceRow::fence`]), so values a restore
    /// lost from the row are covered too. A sequence that reserved nothing
    /// (its next still at its start) leaves `self` unchanged.
    pub fn after_sequence_drop(
        self,
        row: &SequenceRow,
        numbering: Option<&Numbering>,
        counters_next: Option<i64>,
        generation: &str,
    ) -> Tombstone {
        // A row last written in another generation of the store (a restore,
        // a promoted replica) may lag what was handed out: it is fenced
        // first, as its next write would be, and its counters by the same
        // margin.
        let (row, skip) = match row.fence(generation) {
            Some(fenced) => (fenced, row.failover_skip),
            None => (row.clone(), 0),
        };
        let row = &row;
        // Every life's versions end here, whatever it reserved.
        let this = Tombstone {
            version: self.version.max(row.version),
            ..self
        };
        let counters_next = counters_next.map(|c| super::numbers::skip_counter(c, row.max, skip));
        let next = row.next.max(counters_next.unwrap_or(i64::MIN));
        if next <= row.start {
            // Nothing reserved (or all of it handed back): no value to bound.
            return this;
        }
        let dropped = match numbering {
            // Opaque values spread over the whole value range: all of it
            // counts as handed out.
            Some(Numbering {
                opaque: Some(o), ..
            }) => Tombstone {
                high_water: o.value_max.saturating_add(1),
                ..Tombstone::default()
            },
            Some(n) if n.bit_reversed.is_some() => Tombstone {
                reversed_next: next,
                ..Tombstone::default()
            },
            Some(Numbering {
                residue: Some(r), ..
            }) => Tombstone {
                high_water: r.value(row.next).max(0),
                ..Tombstone::default()
            },
            _ => Tombstone {
                high_water: next,
                ..Tombstone::default()
            },
        };
        this.max(dropped)
    }

    /// The tombstone a dropped pool leaves: `row` as the store holds it,
    /// `highest_member` its largest stored member (`None`: it had none),
    /// `generation` the store's current one; raised over `self`.
    pub fn after_pool_drop(
        self,
        row: &PoolRow,
        highest_member: Option<i64>,
        generation: &str,
    ) -> Tombstone {
        // A pool last written in another generation may lag what was handed
        // out: its members count as fenced, as its next swap would fence
        // them ([`super::pool_fence_rounds`]).
        let rounds = match row.generation.as_deref() {
            Some(g) if g != generation => super::pool_fence_rounds(row.size),
            _ => 0,
        };
        let highest = highest_member.map(|m| m.saturating_add(rounds.saturating_mul(row.size)));
        let high_water = highest.map_or(0, |m| row.value(m).max(0));
        self.max(Tombstone {
            high_water,
            reversed_next: 0,
            version: row.incarnation,
        })
    }

    /// `spec` (as the store receives it: slots of a residue class, counters
    /// of a bit-reversed sequence) with its start raised above this
    /// tombstone (see the module docs), or unchanged when
    /// `spec.start_below_dropped` is set or nothing was dropped. What every
    /// backend's create applies, in the transaction that reads the
    /// tombstone.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the spec's maximum leaves no value
    /// above the dropped ones, saying what would do.
    pub fn raise_sequence(
        &self,
        spec: &SequenceSpec,
        numbering: Option<&Numbering>,
    ) -> Result<SequenceSpec> {
        if spec.start_below_dropped || self.is_empty() {
            return Ok(spec.clone());
        }
        if numbering.is_some_and(|n| n.opaque.is_some()) {
            return Err(Error::invalid(format!(
                "sequence {:?} was dropped before, and an opaque sequence's values spread over its whole \
                 range, so it cannot continue above the values the dropped one handed out (below {}); use \
                 another name, or start_below_dropped if no value handed out under this name is in use any more",
                spec.name,
                self.floor()
            )));
        }
        let (start, max) = match numbering {
            Some(n) if n.bit_reversed.is_some() => {
                let start = spec.start.max(self.reversed_next);
                let max = if self.high_water > 0 {
                    // 2^b >= high_water; counters below 2^(63 - b).
                    let b = 64 - (self.high_water - 1).leading_zeros();
                    if b >= VALUE_BITS {
                        0
                    } else {
                        // b = 0 (only value 0 below): every counter.
                        spec.max.min(((1u64 << (VALUE_BITS - b)) - 1) as i64)
                    }
                } else {
                    spec.max
                };
                (start, max)
            }
            Some(Numbering {
                residue: Some(r), ..
            }) => (spec.start.max(r.slot_at_or_above(self.floor())), spec.max),
            _ => (spec.start.max(self.floor()), spec.max),
        };
        if start > max {
            return Err(Error::invalid(format!(
                "sequence {:?} was dropped before, and creating it again continues above the values it \
                 handed out (below {}), but its maximum leaves no room there; give a larger max, another \
                 name, or start_below_dropped if no value handed out under this \
                 name is in use any more",
                spec.name,
                self.floor()
            )));
        }
        Ok(SequenceSpec {
            start,
            max,
            ..spec.clone()
        })
    }

    /// `spec` (as the store receives it: [`PoolSpec::stored`]) with its
    /// first member raised to the first member whose value is at or above
    /// [`Self::floor`], or unchanged when `spec.start_below_dropped` is set
    /// or nothing was dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the raised members would pass
    /// `i64::MAX` (the check of [`PoolSpec::validate`]).
    pub fn raise_pool(&self, spec: &PoolSpec) -> Result<PoolSpec> {
        if spec.start_below_dropped || self.is_empty() {
            return Ok(spec.clone());
        }
        let start = spec
            .start
            .max(first_member(spec.residue.as_ref(), self.floor()));
        let raised = PoolSpec {
            start,
            ..spec.clone()
        };
        raised.check_stored_room().map_err(|_| {
            Error::invalid(format!(
                "pool {:?} was dropped before, and creating it again continues above the values it \
                 handed out (below {}), but a pool of size {} leaves no room there; give another name, \
                 or start_below_dropped if no value handed out under this name \
                 is in use any more",
                spec.name,
                self.floor(),
                spec.size
            ))
        })?;
        Ok(raised)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numbering::{BitReversal, BitReversed};
    use crate::store::Residue;

    fn row(next: i64) -> SequenceRow {
        SequenceRow {
            next,
            ..SequenceRow::created(&SequenceSpec::new("s"), "g")
        }
    }

    #[test]
    fn reversed_bound_is_above_every_reversal() {
        let r = BitReversal::new(&BitReversed::default());
        for next in [2, 3, 4, 5, 17, 1000, 1 << 20] {
            let bound = reversed_bound(next);
            let highest = (1..next).filter_map(|c| r.value_of(c)).max().unwrap();
            assert!(highest < bound, "{next}: {highest} {bound}");
        }
        assert_eq!(reversed_bound(1), 0);
        assert_eq!(reversed_bound(i64::MAX), i64::MAX);
    }

    #[test]
    fn drops_only_raise_and_creates_continue_above() {
        let t = Tombstone::default().after_sequence_drop(&row(100), None, None, "g");
        assert_eq!(t.high_water, 100);
        let t = t.after_sequence_drop(&row(50), None, None, "g");
        assert_eq!(t.high_water, 100, "a lower drop keeps the higher mark");
        let spec = t.raise_sequence(&SequenceSpec::new("s"), None).unwrap();
        assert_eq!(spec.start, 100);
        let below = SequenceSpec {
            start_below_dropped: true,
            ..SequenceSpec::new("s")
        };
        assert_eq!(t.raise_sequence(&below, None).unwrap().start, 1);
        let small = SequenceSpec {
            max: 99,
            ..SequenceSpec::new("s")
        };
        let e = t.raise_sequence(&small, None).unwrap_err().to_string();
        assert!(e.contains("start_below_dropped"), "{e}");
    }

    #[test]
    fn residue_classes_and_reversed_counters_keep_values_apart() {
        let class = Residue {
            increment: 10,
            offset: 3,
        };
        let numbering = Numbering {
            residue: Some(class),
            ..Numbering::default()
        };
        // Slots 0..5 reserved: values up to 43; next slot 5 is value 53.
        let t = Tombstone::default().after_sequence_drop(&row(5), Some(&numbering), None, "g");
        assert_eq!(t.high_water, 53);
        // A plain sequence starts at 53; the class again at slot 5.
        assert_eq!(
            t.raise_sequence(&SequenceSpec::new("s"), None)
                .unwrap()
                .start,
            53
        );
        let slots = SequenceSpec {
            start: 0,
            ..SequenceSpec::new("s")
        };
        assert_eq!(t.raise_sequence(&slots, Some(&numbering)).unwrap().start, 5);
        // A bit-reversed one dropped at counter 8, created again: counter 8,
        // its counters below 2^57 (2^6 >= 53), whose reversals are >= 64.
        let reversed = Numbering {
            bit_reversed: Some(BitReversed::default()),
            ..Numbering::default()
        };
        let t = t.after_sequence_drop(&row(8), Some(&reversed), None, "g");
        let again = t
            .raise_sequence(&SequenceSpec::new("s"), Some(&reversed))
            .unwrap();
        assert_eq!((again.start, again.max), (8, (1 << 57) - 1));
        // Only value 0 handed out below: every counter is still fine.
        let zero = Tombstone {
            high_water: 1,
            ..Tombstone::default()
        };
        let all = zero
            .raise_sequence(&SequenceSpec::new("s"), Some(&reversed))
            .unwrap();
        assert_eq!((all.start, all.max), (1, SequenceSpec::new("s").max));
        // A plain one goes above every reversal of counters 1..8.
        let plain = t.raise_sequence(&SequenceSpec::new("s"), None).unwrap();
        assert_eq!(plain.start, reversed_bound(8));
    }

    #[test]
    fn a_row_of_another_generation_is_fenced_first() {
        // Written in generation "old", dropped in "new": the drop counts
        // the failover margin as a restore's possible loss.
        let spec = SequenceSpec {
            failover_skip: Some(1000),
            ..SequenceSpec::new("s")
        };
        let row = SequenceRow {
            next: 10,
            ..SequenceRow::created(&spec, "old")
        };
        let t = Tombstone::default().after_sequence_drop(&row, None, None, "new");
        assert_eq!(t.high_water, 1010);
        let same = Tombstone::default().after_sequence_drop(&row, None, None, "old");
        assert_eq!(same.high_water, 10);
        let pool = PoolRow {
            name: "p".into(),
            start: 1,
            size: 4,
            generation: Some("old".into()),
            residue: None,
            incarnation: 0,
        };
        let rounds = crate::store::pool_fence_rounds(4);
        let t = Tombstone::default().after_pool_drop(&pool, Some(9), "new");
        assert_eq!(t.high_water, 9 + rounds * 4);
        let t = Tombstone::default().after_pool_drop(&pool, Some(9), "old");
        assert_eq!(t.high_water, 9);
    }

    /// One incarnation of a name: its kind (0 plain, 1 a residue class of
    /// `3 mod 7`, 2 numbered per period, 3 bit-reversed), the start asked
    /// for and how many values it hands out before its drop.
    fn incarnation() -> impl proptest::strategy::Strategy<Value = (u8, i64, i64)> {
        (0u8..4, 0i64..60, 0i64..40)
    }

    proptest::proptest! {
        /// Whatever kinds follow each other under one name, no value is
        /// handed out twice (values compared as integers; a numbered
        /// sequence's numbers in two periods).
        #[test]
        fn no_value_repeats_across_incarnations(steps in proptest::collection::vec(incarnation(), 1..8)) {
            let class = Residue { increment: 7, offset: 3 };
            let reversal = BitReversal::new(&BitReversed::default());
            let mut t = Tombstone::default();
            let mut seen = std::collections::BTreeSet::new();
            for (kind, start, n) in steps {
                let numbering = match kind {
                    1 => Some(Numbering { residue: Some(class), ..Numbering::default() }),
                    2 => Some(Numbering { template: Some("N-{n}".into()), ..Numbering::default() }),
                    3 => Some(Numbering { bit_reversed: Some(BitReversed::default()), ..Numbering::default() }),
                    _ => None,
                };
                let asked = SequenceSpec {
                    start: match kind {
                        1 => class.slot_at_or_above(start),
                        3 => start.max(1),
                        _ => start,
                    },
                    ..SequenceSpec::new("s")
                };
                // No room above the dropped values (a bit-reversed one after
                // a plain one high up): refused, nothing created.
                let spec = match t.raise_sequence(&asked, numbering.as_ref()) {
                    Ok(spec) => spec,
                    Err(Error::InvalidArgument(_)) => continue,
                    Err(e) => panic!("{e}"),
                };
                let row = SequenceRow::created(&spec, "g");
                let counted = spec.start..spec.start + n;
                // This incarnation's values, as integers (a numbered one's
                // numbers of every period alike).
                let values: std::collections::BTreeSet<i64> = match kind {
                    1 => counted.clone().map(|slot| class.value(slot)).collect(),
                    3 => counted.clone().map(|c| reversal.value_of(c).unwrap()).collect(),
                    _ => counted.clone().collect(),
                };
                proptest::prop_assert!(
                    values.is_disjoint(&seen),
                    "kind {} from {} repeats {:?}",
                    kind,
                    spec.start,
                    values.intersection(&seen).next()
                );
                seen.extend(values);
                // Numbered and bit-reversed ones count in period counters.
                let (row, counters) = match kind {
                    2 | 3 => (row, Some(counted.end)),
                    _ => (SequenceRow { next: counted.end, ..row }, None),
                };
                t = t.after_sequence_drop(&row, numbering.as_ref(), counters, "g");
            }
        }
    }
}

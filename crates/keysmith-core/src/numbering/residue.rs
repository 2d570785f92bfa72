//! Residue classes: a sequence whose values are all congruent to `offset`
//! modulo `increment` (Tinyid's `delta`/`remainder`, TiDB's
//! `auto_increment_increment`/`offset`), so that regions with stores of
//! their own never hand out the same value.
//!
//! The store keeps the row in *slots*, an ordinary counter: slot `s` is
//! value `s * increment + offset`. Blocks, leases, the failover margin and
//! every other piece of allocation work on slots unchanged; values are
//! made at the edge, where they leave the library, and values given to it
//! (`alter`, a lease's release) are turned back into slots there.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The largest increment: a million regions (or shards) is plenty.
pub const MAX_INCREMENT: i64 = 1_000_000;

/// A residue class: values `≡ offset (mod increment)`, so that regions
/// with stores of their own never hand out the same value.
///
/// The store keeps the row in *slots*, an ordinary counter: slot `s` is
/// value `s * increment + offset`. Blocks, leases and the failover margin
/// work on slots unchanged; values are made where they leave the library,
/// and values given to it (`alter`, a lease's release) become slots there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Residue {
    /// The distance between two values: `2..=MAX_INCREMENT`.
    pub increment: i64,
    /// Every value's remainder modulo `increment`: `0..increment`.
    pub offset: i64,
}

impl Residue {
    /// Checks `2 <= increment <= MAX_INCREMENT` and `0 <= offset < increment`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying which and what to give.
    pub fn validate(&self) -> Result<()> {
        let (k, r) = (self.increment, self.offset);
        if !(2..=MAX_INCREMENT).contains(&k) {
            return Err(Error::invalid(format!(
                "increment must be between 2 and {MAX_INCREMENT}, got {k} (an increment of 1 is an ordinary sequence: leave it out)"
            )));
        }
        if !(0..k).contains(&r) {
            return Err(Error::invalid(format!(
                "offset must be between 0 and increment - 1 = {}, got {r}: every value is offset modulo increment",
                k - 1
            )));
        }
        Ok(())
    }

    /// The value of slot `slot`, saturating at `i64::MAX` (only a row's
    /// `next` past its last slot can get there).
    pub fn value(&self, slot: i64) -> i64 {
        let v = i128::from(slot) * i128::from(self.increment) + i128::from(self.offset);
        i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
    }

    /// The first slot whose value is `v` or above.
    pub fn slot_at_or_above(&self, v: i64) -> i64 {
        let d = i128::from(v) - i128::from(self.offset);
        let k = i128::from(self.increment);
        // Within i64: |d| <= 2^63 + k, divided by k >= 2.
        (d.div_euclid(k) + i128::from(d.rem_euclid(k) != 0)) as i64
    }

    /// The first value of the class at or above `v`.
    pub fn first_at_or_above(&self, v: i64) -> i64 {
        self.value(self.slot_at_or_above(v))
    }

    /// The last slot whose value is `v` or below.
    pub fn slot_at_or_below(&self, v: i64) -> i64 {
        let d = i128::from(v) - i128::from(self.offset);
        d.div_euclid(i128::from(self.increment)) as i64
    }

    /// The slot of value `v`, which must be in the class.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a value not `≡ offset (mod increment)`.
    pub fn slot_of(&self, v: i64) -> Result<i64> {
        let s = self.slot_at_or_below(v);
        if self.value(s) == v {
            Ok(s)
        } else {
            Err(Error::invalid(format!(
                "{v} is not a value of this sequence: its values are {} modulo {}",
                self.offset, self.increment
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_values_map_both_ways_over_a_small_space() {
        for k in 2..=7 {
            for r in 0..k {
                let c = Residue {
                    increment: k,
                    offset: r,
                };
                c.validate().unwrap();
                for v in -50..50 {
                    let up = c.slot_at_or_above(v);
                    let down = c.slot_at_or_below(v);
                    assert!(c.value(up) >= v && c.value(up - 1) < v, "{k} {r} {v}");
                    assert!(c.value(down) <= v && c.value(down + 1) > v, "{k} {r} {v}");
                    assert_eq!((v - r).rem_euclid(k) == 0, c.slot_of(v).is_ok());
                }
                for s in 0..50 {
                    assert_eq!(c.value(s).rem_euclid(k), r);
                    assert_eq!(c.slot_of(c.value(s)).unwrap(), s);
                }
            }
        }
    }

    #[test]
    fn the_extremes_do_not_overflow() {
        let c = Residue {
            increment: MAX_INCREMENT,
            offset: MAX_INCREMENT - 1,
        };
        let last = c.slot_at_or_below(i64::MAX - 1);
        assert!(c.value(last) < i64::MAX);
        assert_eq!(c.value(last + 1), i64::MAX);
        assert_eq!(c.slot_at_or_above(0), 0);
        assert_eq!(
            c.slot_at_or_above(i64::MIN),
            c.slot_at_or_below(i64::MIN) + 1
        );
    }

    #[test]
    fn bad_classes_say_what_to_give() {
        let e = |k, r| {
            Residue {
                increment: k,
                offset: r,
            }
            .validate()
            .unwrap_err()
            .to_string()
        };
        assert!(e(1, 0).contains("ordinary sequence"), "{}", e(1, 0));
        assert!(e(MAX_INCREMENT + 1, 0).contains("between 2 and"));
        assert!(e(4, 4).contains("between 0 and increment - 1 = 3"));
        assert!(e(4, -1).contains("got -1"));
    }
}

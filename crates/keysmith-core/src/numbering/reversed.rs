//! Bit-reversed values: a sequence whose values are the bit reversal of its
//! internal sequential counter, so that consecutive values land far apart
//! (no hot spot at the end of an index, as Spanner and Bigtable advise),
//! while the counter keeps them unique.
//!
//! The counter `c` (from the sequence's start, at least 1) maps to
//! `reverse(c)`: its low 63 bits in reverse order, always in `1..2^63`
//! (positive: `reverse` is a bijection of `0..2^63` and `reverse(0) = 0`).
//! A value inside the skip range `A..B` (half-open) is never handed out: its
//! counter is skipped (a gap). [`BitReversal::counter_of`] maps a value back.
//!
//! The setting is kept with the sequence in its [`super::Numbering`] (the
//! store keeps it as JSON), so every process maps the same way; the
//! transform is applied above the store, to the numbers it reserves.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The width of the values: 63 bits, every positive `i64`.
pub const VALUE_BITS: u32 = 63;

/// A half-open range `start..end` of values never handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkipRange {
    /// The first value skipped.
    pub start: i64,
    /// One past the last value skipped.
    pub end: i64,
}

impl std::str::FromStr for SkipRange {
    type Err = Error;

    /// `A..B` (half-open), with `0 <= A < B <= 2^63 - 1`.
    fn from_str(s: &str) -> Result<SkipRange> {
        let bad = || {
            Error::invalid(format!(
                "{s:?} is not a skip range: give A..B (half-open, B excluded), whole numbers with 0 <= A < B"
            ))
        };
        let (a, b) = s.trim().split_once("..").ok_or_else(bad)?;
        let r = SkipRange {
            start: a.trim().parse().map_err(|_| bad())?,
            end: b.trim().parse().map_err(|_| bad())?,
        };
        r.validate()?;
        Ok(r)
    }
}

impl SkipRange {
    /// Whether `v` is skipped.
    pub fn contains(&self, v: i64) -> bool {
        (self.start..self.end).contains(&v)
    }

    /// Checks `0 <= start < end` and that at most half of the values are
    /// skipped (so that a take always finds a value within a few counters).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying which.
    pub fn validate(&self) -> Result<()> {
        if self.start < 0 || self.start >= self.end {
            return Err(Error::invalid(format!(
                "the skip range {}..{} must have 0 <= start < end",
                self.start, self.end
            )));
        }
        if self.end - self.start > 1 << (VALUE_BITS - 1) {
            return Err(Error::invalid(format!(
                "the skip range {}..{} skips more than half of the values (2^62); skip less",
                self.start, self.end
            )));
        }
        Ok(())
    }
}

/// The bit-reversal setting of a sequence: kept in its numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BitReversed {
    /// Values never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<SkipRange>,
}

/// The transform of [`BitReversed`] over `width` bits (63 for sequences;
/// smaller in tests, which check it over the whole value space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitReversal {
    width: u32,
    skip: Option<SkipRange>,
}

impl BitReversal {
    /// Over the 63 bits of sequence values.
    pub fn new(setting: &BitReversed) -> BitReversal {
        BitReversal {
            width: VALUE_BITS,
            skip: setting.skip,
        }
    }

    /// Over `width` bits (1 to 63).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a width outside 1..=63.
    pub fn with_width(width: u32, skip: Option<SkipRange>) -> Result<BitReversal> {
        if !(1..=VALUE_BITS).contains(&width) {
            return Err(Error::invalid(format!(
                "a bit reversal is 1 to 63 bits wide, got {width}"
            )));
        }
        Ok(BitReversal { width, skip })
    }

    /// The largest counter and value: `2^width - 1`.
    pub fn max(&self) -> i64 {
        ((1u64 << self.width) - 1) as i64
    }

    fn reverse(&self, x: i64) -> i64 {
        ((x as u64).reverse_bits() >> (64 - self.width)) as i64
    }

    /// The value of counter `c`, or `None` when it lies in the skip range
    /// (or `c` is outside `0..=max`).
    pub fn value_of(&self, c: i64) -> Option<i64> {
        if !(0..=self.max()).contains(&c) {
            return None;
        }
        let v = self.reverse(c);
        (!self.skip.is_some_and(|s| s.contains(v))).then_some(v)
    }

    /// The counter a value was made from.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a value outside `0..=max` or inside
    /// the skip range (no counter makes it).
    pub fn counter_of(&self, v: i64) -> Result<i64> {
        if !(0..=self.max()).contains(&v) {
            return Err(Error::invalid(format!(
                "{v} is not a value of a bit-reversed sequence: values are 0 to {}",
                self.max()
            )));
        }
        if let Some(s) = self.skip.filter(|s| s.contains(v)) {
            return Err(Error::invalid(format!(
                "{v} lies in the skip range {}..{}: the sequence never hands it out",
                s.start, s.end
            )));
        }
        Ok(self.reverse(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_full_width_reverses_63_bits() {
        let r = BitReversal::new(&BitReversed::default());
        assert_eq!(r.value_of(1), Some(1 << 62));
        assert_eq!(r.value_of(2), Some(1 << 61));
        assert_eq!(r.value_of(3), Some((1 << 62) | (1 << 61)));
        assert_eq!(r.value_of(i64::MAX), Some(i64::MAX));
        for c in [1, 2, 12_345, i64::MAX - 1] {
            let v = r.value_of(c).unwrap();
            assert!(v > 0);
            assert_eq!(r.counter_of(v).unwrap(), c);
        }
        assert!(r.counter_of(-1).is_err());
    }

    #[test]
    fn skip_ranges_parse_and_are_checked() {
        let s: SkipRange = "10..20".parse().unwrap();
        assert_eq!((s.start, s.end), (10, 20));
        for bad in [
            "",
            "1",
            "5..5",
            "6..5",
            "-1..3",
            "a..b",
            "0..9223372036854775807",
        ] {
            assert!(bad.parse::<SkipRange>().is_err(), "{bad}");
        }
        let r = BitReversal::new(&BitReversed { skip: Some(s) });
        assert!(
            r.counter_of(15)
                .unwrap_err()
                .to_string()
                .contains("skip range")
        );
    }

    proptest! {
        /// Over the whole space of a small width: every counter's value is
        /// unique, outside the skip range, and maps back to the counter;
        /// every value outside the skip range is some counter's.
        #[test]
        fn a_bijection_that_never_lands_in_the_skip_range(
            width in 1u32..=12,
            a in 0i64..4096,
            len in 1i64..4096,
        ) {
            let limit = 1i64 << width;
            let skip = SkipRange { start: a % limit, end: (a % limit + len).min(limit) };
            let r = BitReversal::with_width(width, Some(skip)).unwrap();
            prop_assert_eq!(r.max(), limit - 1);
            let mut seen = vec![false; limit as usize];
            let mut made = 0;
            for c in 0..limit {
                match r.value_of(c) {
                    Some(v) => {
                        prop_assert!((0..limit).contains(&v));
                        prop_assert!(!skip.contains(v));
                        prop_assert!(!seen[v as usize], "{} twice", v);
                        seen[v as usize] = true;
                        prop_assert_eq!(r.counter_of(v).unwrap(), c);
                        made += 1;
                    }
                    None => prop_assert!(skip.contains(r.reverse(c))),
                }
            }
            prop_assert_eq!(made, limit - (skip.end - skip.start));
            for v in 0..limit {
                prop_assert_eq!(seen[v as usize], !skip.contains(v));
            }
            prop_assert!(r.value_of(limit).is_none() && r.value_of(-1).is_none());
        }
    }
}

//! What a numbered sequence is, as plain data: its [`Period`], its
//! [`Numbering`] settings, the [`Template`] its numbers are printed with and
//! the [`BitReversal`] of bit-reversed values. Below the store contract and
//! the library alike (both re-export these: `keysmith_core::store::Numbering`,
//! `keysmith_core::numbers::Template`), so that neither reaches up into the other.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod encoding;
mod opaque;
mod residue;
mod reversed;
mod template;

pub use encoding::{Alphabet, Encoding, MAX_PREFIX_BYTES};
pub use opaque::{
    FEISTEL_ROUNDS, Feistel, KEY_SLOTS, KeySecret, MIN_OPAQUE_MAX, Opaque, OpaqueKey, OpaqueMap,
};

pub use residue::{MAX_INCREMENT, Residue};
pub use reversed::{BitReversal, BitReversed, SkipRange, VALUE_BITS};
pub use template::{DEFAULT_PERIOD_TEMPLATE, MAX_PADDING, MAX_TEMPLATE_BYTES, Number, Template};

/// How often a sequence's numbers restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    /// Every UTC day; period keys like `20261123`.
    Day,
    /// Every UTC month; period keys like `202611`.
    Month,
    /// Every UTC year; period keys like `2026`.
    Year,
}

impl Period {
    /// The name used on the command line, in HTTP and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Month => "month",
            Period::Year => "year",
        }
    }

    /// How many digits its period key has (8, 6 or 4).
    pub fn width(self) -> usize {
        match self {
            Period::Day => 8,
            Period::Month => 6,
            Period::Year => 4,
        }
    }

    /// The period key (`YYYYMMDD`, `YYYYMM` or `YYYY`, UTC) of the instant
    /// `ms` milliseconds after the Unix epoch.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a time before year 1000 or after 9999
    /// (the key would not have its width): fix the clock.
    pub fn key_at(self, ms: i64) -> Result<i64> {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
            .ok()
            .filter(|t| (1000..=9999).contains(&t.year()))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "the clock reads {ms} ms since 1970, outside the years 1000 to 9999 a period can name; fix the clock"
                ))
            })?;
        let (y, m, d) = (
            i64::from(t.year()),
            i64::from(u8::from(t.month())),
            i64::from(t.day()),
        );
        Ok(match self {
            Period::Day => y * 10_000 + m * 100 + d,
            Period::Month => y * 100 + m,
            Period::Year => y,
        })
    }

    /// Whether `key` is a period key of this kind (a real date).
    pub fn is_key(self, key: i64) -> bool {
        let (y, m, d) = match self {
            Period::Day => (key / 10_000, key / 100 % 100, key % 100),
            Period::Month => (key / 100, key % 100, 1),
            Period::Year => (key, 1, 1),
        };
        (1000..=9999).contains(&y)
            && u8::try_from(m)
                .ok()
                .and_then(|m| time::Month::try_from(m).ok())
                .and_then(|m| time::Date::from_calendar_date(y as i32, m, d as u8).ok())
                .is_some()
            && (1..=31).contains(&d)
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Period {
    type Err = Error;

    /// `day`, `month` or `year`.
    fn from_str(s: &str) -> Result<Period> {
        match s {
            "day" => Ok(Period::Day),
            "month" => Ok(Period::Month),
            "year" => Ok(Period::Year),
            other => Err(Error::invalid(format!(
                "unknown period {other:?}; use day, month or year"
            ))),
        }
    }
}

/// The order a plain sequence's values are handed out in, across every
/// process: kept in the store with the sequence ([`Numbering::order`]), so
/// every process and server knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Today's behaviour: every handle hands out values from blocks of its
    /// own, increasing per handle; with block 1 (strict) every value is a
    /// store reservation and values increase in time order across handles.
    #[default]
    Cached,
    /// One process at a time, the holder of the sequence's leader lease,
    /// hands values out from blocks it reserved ahead, in the order calls
    /// arrive: a value returned before another call was made is smaller,
    /// across every process (see [`crate::sequence::leader`]).
    Leader,
}

impl Order {
    /// The name used on the command line, in HTTP and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Cached => "cached",
            Order::Leader => "leader",
        }
    }

    /// Whether this is [`Order::Cached`] (the default, not written).
    pub fn is_cached(&self) -> bool {
        *self == Order::Cached
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Order {
    type Err = Error;

    /// `cached` or `leader`.
    fn from_str(s: &str) -> Result<Order> {
        match s {
            "cached" => Ok(Order::Cached),
            "leader" => Ok(Order::Leader),
            other => Err(Error::invalid(format!(
                "unknown order {other:?}; use cached (the default: blocks per handle) or leader (one leased leader hands values out in arrival order)"
            ))),
        }
    }
}

/// How a numbered sequence hands out its numbers; kept in the store with
/// the sequence, so every process formats and counts the same way.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Numbering {
    /// Gap-free: numbers are taken with a ticket and committed or released
    /// ([`crate::store::NumberStore::take_ticket`]); `next` is refused.
    pub gapless: bool,
    /// Numbers restart every period, decided by the store's clock.
    pub period: Option<Period>,
    /// The template numbers are printed with (see
    /// [`Template`]); `None`: plain integers, or
    /// `{period}-{n}` for a sequence with a period.
    pub template: Option<String>,
    /// Values are the bit reversal of the counter (see
    /// [`BitReversal`]); plain integers, never with a
    /// period, a template or gap-free numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bit_reversed: Option<BitReversed>,
    /// Values are all `offset` modulo `increment` (see [`Residue`]);
    /// plain integers in blocks like an ordinary sequence's, never with a
    /// period, a template, gap-free numbers or bit reversal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residue: Option<Residue>,
    /// Values are a keyed permutation of the counter (see [`Opaque`]):
    /// plain integers (or an [`Encoding`]'s strings), never with a period,
    /// a template, gap-free numbers, bit reversal or a residue class. Its
    /// keys are secret: show [`Numbering::public`], never this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Opaque>,
    /// Values are written as fixed-width base32 or base62 strings (see
    /// [`Encoding`]); never with a period, a template, gap-free numbers or
    /// a residue class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    /// The order values are handed out in: [`Order::Leader`] for a plain
    /// sequence served by one leased leader (never with gap-free numbers, a
    /// period, a format, bit reversal or a residue class); absent in the
    /// store for [`Order::Cached`].
    #[serde(default, skip_serializing_if = "Order::is_cached")]
    pub order: Order,
}

impl Numbering {
    /// Checks the template against the period (see
    /// [`Template::parse`]), so that a bad one is refused
    /// before anything is written.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what is wrong and how to fix it.
    pub fn validate(&self) -> Result<()> {
        if self.order == Order::Leader
            && (self.gapless
                || self.period.is_some()
                || self.template.is_some()
                || self.bit_reversed.is_some()
                || self.residue.is_some()
                || self.opaque.is_some()
                || self.encoding.is_some())
        {
            return Err(Error::invalid(
                "a leader-ordered sequence hands out plain integers: no gap-free numbers, period, format, bit reversal, opaque values, encoding or increment and offset with it",
            ));
        }
        if self.opaque.is_some()
            && (self.gapless
                || self.period.is_some()
                || self.template.is_some()
                || self.bit_reversed.is_some()
                || self.residue.is_some())
        {
            return Err(Error::invalid(
                "an opaque sequence hands out permuted integers (or encoded strings): no gap-free numbers, period, format, bit reversal or increment and offset with it",
            ));
        }
        if let Some(e) = &self.encoding {
            if self.gapless
                || self.period.is_some()
                || self.template.is_some()
                || self.residue.is_some()
            {
                return Err(Error::invalid(
                    "an encoded sequence writes its values as base32 or base62 strings: no gap-free numbers, period, format or increment and offset with it",
                ));
            }
            e.validate()?;
        }
        if let Some(r) = &self.residue {
            if self.gapless
                || self.period.is_some()
                || self.template.is_some()
                || self.bit_reversed.is_some()
            {
                return Err(Error::invalid(
                    "a sequence with an increment and offset hands out plain integers in blocks: no gap-free numbers, period, format or bit reversal with it",
                ));
            }
            r.validate()?;
        }
        if let Some(b) = &self.bit_reversed {
            if self.gapless || self.period.is_some() || self.template.is_some() {
                return Err(Error::invalid(
                    "a bit-reversed sequence hands out plain integers: no gap-free numbers, period or format with it",
                ));
            }
            if let Some(s) = &b.skip {
                s.validate()?;
            }
        }
        Template::for_numbering(self).map(drop)
    }

    /// The settings without their secrets (the opaque keys'): what the
    /// front ends show. Never show a [`Numbering`] read from the store
    /// otherwise.
    pub fn public(&self) -> Numbering {
        Numbering {
            opaque: self.opaque.as_ref().map(Opaque::public),
            ..self.clone()
        }
    }

    /// Whether values are handed out as text (a template or an encoding)
    /// rather than integers.
    pub fn is_text(&self) -> bool {
        self.encoding.is_some() || self.template.is_some() || self.period.is_some()
    }

    /// The numbering of a plain sequence created with `order`: `None` for
    /// [`Order::Cached`] (an ordinary sequence has none).
    pub fn of_order(order: Order) -> Option<Numbering> {
        (order == Order::Leader).then(|| Numbering {
            order,
            ..Numbering::default()
        })
    }

    /// Whether the sequence is leader-ordered ([`Order::Leader`]).
    pub fn is_leader(&self) -> bool {
        self.order == Order::Leader
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn period_keys_by_utc_date() {
        // 2026-11-23T23:59:59.999Z and a millisecond later.
        let before = 1_795_478_399_999;
        assert_eq!(Period::Day.key_at(before).unwrap(), 20261123);
        assert_eq!(Period::Day.key_at(before + 1).unwrap(), 20261124);
        assert_eq!(Period::Month.key_at(before).unwrap(), 202611);
        assert_eq!(Period::Year.key_at(before).unwrap(), 2026);
        assert!(Period::Day.key_at(i64::MAX).is_err());
        assert!(Period::Day.key_at(-1_000_000_000_000_000).is_err());
        assert!(Period::Day.is_key(20240229));
        assert!(!Period::Day.is_key(20230229));
        assert!(!Period::Month.is_key(202613));
        assert!(!Period::Year.is_key(999));
        assert_eq!("month".parse::<Period>().unwrap(), Period::Month);
        let e = "weekly".parse::<Period>().unwrap_err().to_string();
        assert!(e.contains("day, month or year"), "{e}");
    }
}

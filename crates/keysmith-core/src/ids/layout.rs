//! The bit layout of an id: `time | worker | sequence`, with the time in
//! units of `unit_ms` milliseconds since `epoch_ms`; and decoding ids.

use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::{Error, Result};

/// 2024-01-01T00:00:00Z, the epoch of the presets, in ms since 1970.
pub const DEFAULT_EPOCH_MS: i64 = 1_704_067_200_000;

/// The shortest lifetime (from now) a layout is accepted with, unless
/// allowed explicitly: 30 years.
pub const MIN_LIFETIME_YEARS: f64 = 30.0;

const MS_PER_YEAR: f64 = 365.2425 * 86_400_000.0;

/// A layout warns when its time bits run out in less than this: 5 years
/// (of 365.2425 days), time enough to plan a move to a new layout or epoch.
pub const RUNWAY_WARNING_SECONDS: f64 = 5.0 * 365.2425 * 86_400.0;

/// How an id's 63 (or fewer) bits are split. Ids are positive `i64`s:
/// `time << (worker_bits + sequence_bits) | worker << sequence_bits | sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Bits of time, in units of `unit_ms` since `epoch_ms`.
    pub time_bits: u32,
    /// Bits of worker id: `2^worker_bits` workers.
    pub worker_bits: u32,
    /// Bits of sequence: ids per time unit and worker.
    pub sequence_bits: u32,
    /// Milliseconds per time unit.
    pub unit_ms: i64,
    /// Time zero, ms since the Unix epoch.
    pub epoch_ms: i64,
}

impl Default for Layout {
    fn default() -> Self {
        Layout::snowflake()
    }
}

/// What a layout gives: `keysmith ids layout` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutReport {
    /// The layout.
    #[serde(flatten)]
    pub layout: Layout,
    /// Its epoch, RFC 3339.
    pub epoch: String,
    /// When its time bits run out, RFC 3339.
    pub ends: String,
    /// Years from the epoch to the end.
    pub lifetime_years: f64,
    /// Years from now to the end.
    pub years_left: f64,
    /// How many worker ids it holds.
    pub workers: i64,
    /// Ids per time unit and worker.
    pub ids_per_unit: i64,
    /// Ids per second and worker.
    pub ids_per_second_per_worker: f64,
    /// The largest id it can make.
    pub max_id: i64,
    /// Whether every id is below 2^53 (exact in JavaScript numbers).
    pub javascript_safe: bool,
    /// How long the time bits last from now, with the warning
    /// ([`Layout::runway`]).
    pub runway: LayoutRunway,
}

/// An id taken apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecodedId {
    /// The id.
    pub id: i64,
    /// The start of its time unit, ms since the Unix epoch.
    pub time_ms: i64,
    /// The same, RFC 3339.
    pub time: String,
    /// The worker id that made it.
    pub worker: i64,
    /// Its sequence within the time unit.
    pub sequence: i64,
}

impl Layout {
    /// Twitter's: 41 time bits of 1 ms (69.7 years), 10 worker bits (1024),
    /// 12 sequence bits (4096 ids per ms per worker); epoch 2024-01-01.
    pub const fn snowflake() -> Self {
        Layout {
            time_bits: 41,
            worker_bits: 10,
            sequence_bits: 12,
            unit_ms: 1,
            epoch_ms: DEFAULT_EPOCH_MS,
        }
    }

    /// Ids below 2^53, exact as JavaScript numbers: 37 time bits of 10 ms
    /// (43.6 years), 8 worker bits (256), 8 sequence bits (25,600 ids per
    /// second per worker); epoch 2024-01-01.
    pub const fn javascript_safe() -> Self {
        Layout {
            time_bits: 37,
            worker_bits: 8,
            sequence_bits: 8,
            unit_ms: 10,
            epoch_ms: DEFAULT_EPOCH_MS,
        }
    }

    /// A preset by name: `snowflake` or `js-safe`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the presets.
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "snowflake" => Ok(Layout::snowflake()),
            "js-safe" | "javascript-safe" => Ok(Layout::javascript_safe()),
            other => Err(Error::invalid(format!(
                "unknown layout preset {other:?}; use snowflake (41/10/12 bits, 1 ms) or js-safe (37/8/8 bits, 10 ms, ids below 2^53)"
            ))),
        }
    }

    /// Checks the bits and the unit: at least one time bit, at most 63 bits
    /// in all (ids are positive `i64`s), at most 22 worker bits, a unit of 1
    /// ms to a day, an epoch at or after 1970.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying what is wrong.
    pub fn validate(&self) -> Result<()> {
        let total = self.time_bits as u64 + self.worker_bits as u64 + self.sequence_bits as u64;
        if self.time_bits == 0 || total > 63 {
            return Err(Error::invalid(format!(
                "layout {}: an id has 63 bits (a positive 64-bit integer) with at least one time bit; \
                 time + worker + sequence bits is {total}",
                self.bits()
            )));
        }
        if self.worker_bits > 22 {
            return Err(Error::invalid(format!(
                "layout {}: at most 22 worker bits (4,194,304 workers), got {}",
                self.bits(),
                self.worker_bits
            )));
        }
        if !(1..=86_400_000).contains(&self.unit_ms) {
            return Err(Error::invalid(format!(
                "layout {}: the time unit must be 1 ms to a day, got {} ms",
                self.bits(),
                self.unit_ms
            )));
        }
        if self.epoch_ms < 0 {
            return Err(Error::invalid(format!(
                "layout {}: the epoch must be at or after 1970, got {} ms",
                self.bits(),
                self.epoch_ms
            )));
        }
        Ok(())
    }

    /// Checks the layout ([`Layout::validate`]), that it holds `workers`
    /// worker ids, and, unless `allow_short_lifetime`, that its time bits
    /// last at least [`MIN_LIFETIME_YEARS`] from `now_ms`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] giving the layout's lifetime and capacity.
    pub fn check(&self, now_ms: i64, workers: i64, allow_short_lifetime: bool) -> Result<()> {
        self.validate()?;
        let r = self.report(now_ms);
        if workers < 1 || workers > r.workers {
            return Err(Error::invalid(format!(
                "layout {} holds {} worker ids, and {workers} were asked for; use more worker bits \
                 (each doubles the workers and halves the lifetime or the ids per unit)",
                self.bits(),
                r.workers
            )));
        }
        if !allow_short_lifetime && r.years_left < MIN_LIFETIME_YEARS {
            return Err(Error::invalid(format!(
                "layout {}: its ids run out on {} ({:.1} years from now, {:.1} years from its epoch), \
                 under the {MIN_LIFETIME_YEARS} years required; it holds {} workers and {} ids per {} ms \
                 per worker. Use more time bits, a coarser time unit or a later epoch, or allow a short \
                 lifetime explicitly (allow_short_lifetime)",
                self.bits(),
                r.ends,
                r.years_left,
                r.lifetime_years,
                r.workers,
                r.ids_per_unit,
                self.unit_ms
            )));
        }
        Ok(())
    }

    /// `T/W/S bits, U ms`, for messages.
    pub fn bits(&self) -> String {
        format!(
            "{}/{}/{} bits of {} ms",
            self.time_bits, self.worker_bits, self.sequence_bits, self.unit_ms
        )
    }

    /// Lifetime, capacity and rate of the layout, with "years left" from `now_ms`.
    pub fn report(&self, now_ms: i64) -> LayoutReport {
        let lifetime_ms = self.lifetime_ms();
        let end_ms = self.end_ms();
        let ids_per_unit = 1i64 << self.sequence_bits.min(62);
        let total = self.time_bits + self.worker_bits + self.sequence_bits;
        LayoutReport {
            layout: *self,
            epoch: rfc3339(self.epoch_ms),
            ends: rfc3339(end_ms),
            lifetime_years: round1(lifetime_ms as f64 / MS_PER_YEAR),
            years_left: round1((end_ms as f64 - now_ms as f64) / MS_PER_YEAR),
            workers: 1i64 << self.worker_bits.min(62),
            ids_per_unit,
            ids_per_second_per_worker: ids_per_unit as f64 * 1000.0 / self.unit_ms as f64,
            max_id: ((1i128 << total.min(63)) - 1) as i64,
            javascript_safe: total <= 53,
            runway: self.runway(now_ms),
        }
    }

    /// How long the time bits last from the epoch, ms.
    fn lifetime_ms(&self) -> i128 {
        (1i128 << self.time_bits.min(62)) * self.unit_ms as i128
    }

    /// When the time bits run out: the first ms no id can carry (ms since
    /// the Unix epoch, saturating).
    pub(crate) fn end_ms(&self) -> i64 {
        (self.epoch_ms as i128 + self.lifetime_ms()).min(i64::MAX as i128) as i64
    }

    pub(crate) fn max_sequence(&self) -> i64 {
        (1i64 << self.sequence_bits) - 1
    }

    pub(crate) fn max_time(&self) -> i64 {
        (1i64 << self.time_bits) - 1
    }

    /// The time unit `ms` falls in (floor), or `None` before the epoch.
    pub(crate) fn unit_of(&self, ms: i64) -> Option<i64> {
        (ms >= self.epoch_ms).then(|| (ms - self.epoch_ms) / self.unit_ms)
    }

    /// The first unit starting at or after `ms`.
    pub(crate) fn unit_at_or_after(&self, ms: i64) -> i64 {
        let d = ms - self.epoch_ms;
        if d <= 0 {
            0
        } else {
            (d + self.unit_ms - 1) / self.unit_ms
        }
    }

    /// Where unit `t` starts, ms since the Unix epoch.
    pub(crate) fn unit_start_ms(&self, t: i64) -> i64 {
        self.epoch_ms.saturating_add(t.saturating_mul(self.unit_ms))
    }

    pub(crate) fn compose(&self, t: i64, worker: i64, sequence: i64) -> i64 {
        (t << (self.worker_bits + self.sequence_bits)) | (worker << self.sequence_bits) | sequence
    }

    /// Takes an id apart: its time, worker and sequence.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative id or one with bits above
    /// the layout's, saying it was likely made with another layout.
    pub fn decode(&self, id: i64) -> Result<DecodedId> {
        self.validate()?;
        let total = self.time_bits + self.worker_bits + self.sequence_bits;
        if id < 0 || (total < 63 && id >> total != 0) {
            return Err(Error::invalid(format!(
                "{id} is not an id of layout {} (ids are 0 to {}); was it made with another layout? \
                 pass the same layout options it was made with",
                self.bits(),
                self.report(0).max_id
            )));
        }
        let t = id >> (self.worker_bits + self.sequence_bits);
        let time_ms = self.unit_start_ms(t);
        Ok(DecodedId {
            id,
            time_ms,
            time: rfc3339(time_ms),
            worker: (id >> self.sequence_bits) & ((1i64 << self.worker_bits) - 1),
            sequence: id & self.max_sequence(),
        })
    }

    /// Parses an id given as text and decodes it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for text that is not a whole number, and
    /// as [`Layout::decode`].
    pub fn decode_str(&self, text: &str) -> Result<DecodedId> {
        let id: i64 = text.trim().parse().map_err(|_| {
            Error::invalid(format!(
                "{text:?} is not an id: expected a whole number from 0 to {}",
                self.report(0).max_id
            ))
        })?;
        self.decode(id)
    }
}

/// How long a layout's time bits last from a given moment: what
/// [`Layout::runway`] returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutRunway {
    /// When the time bits run out (the first ms no id can carry), ms since
    /// the Unix epoch.
    pub ends_ms: i64,
    /// The same, RFC 3339.
    pub ends: String,
    /// Seconds from the moment asked about to the end; 0 once past it.
    pub seconds_left: f64,
    /// Whether `seconds_left` is under [`RUNWAY_WARNING_SECONDS`].
    pub warning: bool,
}

impl Layout {
    /// The runway of the layout's time bits at `now_ms` (ms since the Unix
    /// epoch): when they run out, the seconds left (never negative), and
    /// whether that is under [`RUNWAY_WARNING_SECONDS`]. Pure arithmetic;
    /// never fails (a layout that does not [`Layout::validate`] gives the
    /// figures of its bits anyway).
    pub fn runway(&self, now_ms: i64) -> LayoutRunway {
        let ends_ms = self.end_ms();
        let seconds_left = (ends_ms as f64 - now_ms as f64).max(0.0) / 1000.0;
        LayoutRunway {
            ends_ms,
            ends: rfc3339(ends_ms),
            seconds_left,
            warning: seconds_left < RUNWAY_WARNING_SECONDS,
        }
    }
}

/// The ids of a time window: every id whose time unit overlaps
/// `from_ms..=to_ms` lies in `min_id..=max_id`, and no other id does
/// (`WHERE id BETWEEN min_id AND max_id` selects the ids made in the
/// window). What [`Layout::bounds`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdBounds {
    /// The window's start, ms since the Unix epoch (inclusive).
    pub from_ms: i64,
    /// The window's end, ms since the Unix epoch (inclusive).
    pub to_ms: i64,
    /// The start, RFC 3339.
    pub from: String,
    /// The end, RFC 3339.
    pub to: String,
    /// The smallest id of the window: its first time unit, worker 0,
    /// sequence 0.
    pub min_id: i64,
    /// The largest id of the window: its last time unit, the last worker
    /// id, the last sequence.
    pub max_id: i64,
}

impl Layout {
    /// The smallest and largest id made in `from_ms..=to_ms` (ms since the
    /// Unix epoch, both ends included): an id lies between them exactly when
    /// its time unit overlaps the window. A window starting before the
    /// layout's epoch starts at it; one ending after its ids run out ends
    /// there.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad layout, `from_ms > to_ms`, or a
    /// window wholly before the epoch or after the layout's last id.
    pub fn bounds(&self, from_ms: i64, to_ms: i64) -> Result<IdBounds> {
        self.validate()?;
        if from_ms > to_ms {
            return Err(Error::invalid(format!(
                "the window starts ({}) after it ends ({}); give a from at or before the to",
                rfc3339(from_ms),
                rfc3339(to_ms)
            )));
        }
        let Some(last) = self.unit_of(to_ms) else {
            return Err(Error::invalid(format!(
                "the window ends ({}) before the layout's epoch ({}): no id lies in it",
                rfc3339(to_ms),
                rfc3339(self.epoch_ms)
            )));
        };
        let first = self.unit_of(from_ms).unwrap_or(0);
        if first > self.max_time() {
            return Err(Error::invalid(format!(
                "the window starts ({}) after the ids of layout {} run out ({}): no id lies in it",
                rfc3339(from_ms),
                self.bits(),
                self.report(0).ends
            )));
        }
        let last = last.min(self.max_time());
        let max_worker = (1i64 << self.worker_bits) - 1;
        Ok(IdBounds {
            from_ms,
            to_ms,
            from: rfc3339(from_ms),
            to: rfc3339(to_ms),
            min_id: self.compose(first, 0, 0),
            max_id: self.compose(last, max_worker, self.max_sequence()),
        })
    }
}

/// A time given as text: RFC 3339 (`2026-11-24T17:00:00Z`,
/// `2026-11-24T18:00:00.250+01:00`) or whole milliseconds since the Unix
/// epoch; in ms since the Unix epoch.
///
/// # Errors
/// [`Error::InvalidArgument`] for anything else, saying what is accepted.
pub fn parse_time_ms(text: &str) -> Result<i64> {
    let t = text.trim();
    if let Ok(ms) = t.parse::<i64>() {
        return Ok(ms);
    }
    OffsetDateTime::parse(t, &Rfc3339)
        .ok()
        .and_then(|d| i64::try_from(d.unix_timestamp_nanos().div_euclid(1_000_000)).ok())
        .ok_or_else(|| {
            Error::invalid(format!(
                "{text:?} is not a time: give RFC 3339 (e.g. 2026-11-24T17:00:00Z) or whole milliseconds since 1970"
            ))
        })
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// `ms` (since the Unix epoch) as RFC 3339, or the number if out of range.
pub(crate) fn rfc3339(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| format!("{ms} ms"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_795_000_000_000; // 2026-11

    #[test]
    fn presets_are_accepted_and_say_what_they_give() {
        let s = Layout::snowflake();
        s.check(NOW, 1024, false).unwrap();
        let r = s.report(NOW);
        assert_eq!((r.workers, r.ids_per_unit), (1024, 4096));
        assert_eq!(r.lifetime_years, 69.7);
        assert!(!r.javascript_safe);
        let j = Layout::javascript_safe();
        j.check(NOW, 256, false).unwrap();
        let r = j.report(NOW);
        assert!(r.javascript_safe);
        assert_eq!(r.max_id, (1i64 << 53) - 1);
        assert_eq!(r.ids_per_second_per_worker, 25_600.0);
    }

    #[test]
    fn short_lifetimes_and_too_few_workers_are_refused_with_figures() {
        let short = Layout {
            time_bits: 36,
            ..Layout::javascript_safe()
        };
        let e = short.check(NOW, 1, false).unwrap_err().to_string();
        assert!(
            e.contains("years from now") && e.contains("256 workers"),
            "{e}"
        );
        assert!(e.contains("allow_short_lifetime"), "{e}");
        short.check(NOW, 1, true).unwrap();
        let e = Layout::snowflake().check(NOW, 1025, false).unwrap_err();
        assert!(e.to_string().contains("holds 1024 worker ids"), "{e}");
        for bad in [
            Layout {
                time_bits: 42,
                ..Layout::snowflake()
            },
            Layout {
                time_bits: 0,
                ..Layout::snowflake()
            },
            Layout {
                unit_ms: 0,
                ..Layout::snowflake()
            },
            Layout {
                epoch_ms: -1,
                ..Layout::snowflake()
            },
        ] {
            assert!(bad.check(NOW, 1, true).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn times_parse_as_rfc3339_or_milliseconds() {
        assert_eq!(parse_time_ms("1795000000000").unwrap(), 1_795_000_000_000);
        assert_eq!(parse_time_ms(" -5 ").unwrap(), -5);
        assert_eq!(
            parse_time_ms("2024-01-01T00:00:00Z").unwrap(),
            DEFAULT_EPOCH_MS
        );
        assert_eq!(
            parse_time_ms("2024-01-01T01:00:00.250+01:00").unwrap(),
            DEFAULT_EPOCH_MS + 250
        );
        for bad in ["", "yesterday", "2024-01-01", "1.5", "99999999999999999999"] {
            let e = parse_time_ms(bad).unwrap_err();
            assert!(e.to_string().contains("RFC 3339"), "{bad}: {e}");
        }
    }

    #[test]
    fn bounds_refuse_empty_windows_and_clamp_to_the_layout() {
        let l = Layout::snowflake();
        let b = l.bounds(NOW, NOW).unwrap();
        assert_eq!(l.decode(b.min_id).unwrap().time_ms, NOW);
        assert_eq!(l.decode(b.max_id).unwrap().time_ms, NOW);
        assert_eq!(b.max_id - b.min_id, (1 << 22) - 1);
        let all = l.bounds(0, i64::MAX).unwrap();
        assert_eq!((all.min_id, all.max_id), (0, i64::MAX));
        assert!(l.bounds(NOW, NOW - 1).is_err());
        assert!(l.bounds(0, DEFAULT_EPOCH_MS - 1).is_err());
        let end = l.unit_start_ms(l.max_time() + 1);
        assert!(l.bounds(end, end + 5).is_err());
        let bad = Layout {
            unit_ms: 0,
            ..Layout::snowflake()
        };
        assert!(bad.bounds(NOW, NOW).is_err());
    }

    #[test]
    fn decode_takes_apart_what_compose_made() {
        for l in [Layout::snowflake(), Layout::javascript_safe()] {
            let t = l.unit_of(NOW).unwrap();
            let id = l.compose(t, 5, 7);
            let d = l.decode(id).unwrap();
            assert_eq!((d.worker, d.sequence), (5, 7));
            assert!(d.time_ms <= NOW && NOW - d.time_ms < l.unit_ms);
            assert_eq!(l.decode_str(&id.to_string()).unwrap(), d);
        }
        let j = Layout::javascript_safe();
        for bad in ["-1", "abc", "", "9007199254740992"] {
            let e = j.decode_str(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad}: {e}");
        }
    }
}

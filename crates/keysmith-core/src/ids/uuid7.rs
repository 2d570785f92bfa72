//! RFC 9562 version-7 UUIDs built from a time id's parts: the time, the
//! leased worker id and the per-worker counter, so they are unique by
//! construction (not by chance) within a group and increasing per issuer.
//!
//! The bit layout is documented in the `ids` module (`ids/mod.rs`).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use uuid::Uuid;

use super::layout::{Layout, rfc3339};
use crate::{Error, Result};

/// Bits of the counter (`rand_a`).
pub const UUIDV7_COUNTER_BITS: u32 = 12;
/// Bits of the worker id (the first part of `rand_b`).
pub const UUIDV7_WORKER_BITS: u32 = 22;
/// Random bits at the end of `rand_b`.
pub const UUIDV7_RANDOM_BITS: u32 = 40;

const MAX_UNIX_MS: i64 = (1i64 << 48) - 1;

/// How generated ids are handed out. Enums, not strings, decide:
/// front ends parse the text with [`IdFormat::from_str`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IdFormat {
    /// The 64-bit integer of the layout (`time | worker | sequence`).
    #[default]
    Integer,
    /// An RFC 9562 version-7 UUID over the same time, worker and sequence
    /// (bits: 48 of `unix_ts_ms`, version 7, the 12-bit counter as `rand_a`,
    /// variant `10`, the 22-bit worker id, 40 random bits).
    Uuidv7,
}

impl IdFormat {
    /// Every format, in the order messages name them.
    pub const ALL: [IdFormat; 2] = [IdFormat::Integer, IdFormat::Uuidv7];

    /// The name `from_str` accepts: `integer` or `uuidv7`.
    pub fn name(self) -> &'static str {
        match self {
            IdFormat::Integer => "integer",
            IdFormat::Uuidv7 => "uuidv7",
        }
    }

    /// Checks that ids of `layout` can be handed out in this format: a
    /// UUIDv7 holds a sequence of at most [`UUIDV7_COUNTER_BITS`] bits.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the layout's sequence bits.
    pub fn check(self, layout: &Layout) -> Result<()> {
        match self {
            IdFormat::Integer => Ok(()),
            IdFormat::Uuidv7 if layout.sequence_bits > UUIDV7_COUNTER_BITS => {
                Err(Error::invalid(format!(
                    "format uuidv7 puts the sequence in the {UUIDV7_COUNTER_BITS}-bit counter of the UUID, \
                     and layout {} has {} sequence bits; use a layout with at most {UUIDV7_COUNTER_BITS} \
                     (the snowflake preset has 12)",
                    layout.bits(),
                    layout.sequence_bits
                )))
            }
            IdFormat::Uuidv7 => Ok(()),
        }
    }
}

impl fmt::Display for IdFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IdFormat {
    type Err = Error;

    /// `integer` or `uuidv7` (ASCII case ignored).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the formats.
    fn from_str(text: &str) -> Result<Self> {
        IdFormat::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown id format {text:?}: use integer (64-bit time ids, the default) or \
                     uuidv7 (RFC 9562 version-7 UUIDs)"
                ))
            })
    }
}

/// Builds the UUIDv7 of a time (`unix_ms`, ms since 1970), a worker id and
/// a counter, with `random`'s low [`UUIDV7_RANDOM_BITS`] bits at the end
/// (the rest of `random` is ignored).
///
/// # Errors
/// [`Error::InvalidArgument`] for a time outside `0..2^48` ms, a worker id
/// outside `0..2^22` or a counter outside `0..2^12`.
pub fn uuidv7_from_parts(unix_ms: i64, worker: i64, counter: i64, random: u64) -> Result<Uuid> {
    if !(0..=MAX_UNIX_MS).contains(&unix_ms) {
        return Err(Error::invalid(format!(
            "a UUIDv7 holds times from 1970 to 10889 (48 bits of ms), got {unix_ms} ms"
        )));
    }
    if !(0..1i64 << UUIDV7_WORKER_BITS).contains(&worker) {
        return Err(Error::invalid(format!(
            "worker must be 0 to {} for a UUIDv7, got {worker}",
            (1i64 << UUIDV7_WORKER_BITS) - 1
        )));
    }
    if !(0..1i64 << UUIDV7_COUNTER_BITS).contains(&counter) {
        return Err(Error::invalid(format!(
            "counter must be 0 to {} for a UUIDv7, got {counter}",
            (1i64 << UUIDV7_COUNTER_BITS) - 1
        )));
    }
    Ok(Uuid::from_u128(compose(unix_ms, worker, counter, random)))
}

/// The bits, for parts known to be in range.
pub(crate) fn compose(unix_ms: i64, worker: i64, counter: i64, random: u64) -> u128 {
    ((unix_ms as u128) << 80)
        | (0x7u128 << 76)
        | ((counter as u128) << 64)
        | (0b10u128 << 62)
        | ((worker as u128) << UUIDV7_RANDOM_BITS)
        | (random as u128 & ((1u128 << UUIDV7_RANDOM_BITS) - 1))
}

/// A keysmith UUIDv7 taken apart: what [`decode_uuidv7`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecodedUuid {
    /// The UUID, canonical (lower-case, hyphenated).
    pub uuid: String,
    /// Its `unix_ts_ms`: the start of the time unit, ms since 1970.
    pub time_ms: i64,
    /// The same, RFC 3339.
    pub time: String,
    /// The worker id that made it.
    pub worker: i64,
    /// Its counter (the sequence within the time unit).
    pub counter: i64,
}

/// Takes a UUIDv7 apart: its time, worker id and counter, as
/// [`uuidv7_from_parts`] put them. Accepts the forms the `uuid` crate
/// parses (hyphenated, simple, braced, URN).
///
/// # Errors
/// [`Error::InvalidArgument`] for text that is not a UUID, or a UUID of
/// another version or variant.
pub fn decode_uuidv7(text: &str) -> Result<DecodedUuid> {
    let u = Uuid::parse_str(text.trim()).map_err(|e| {
        Error::invalid(format!(
            "{text:?} is not a UUID ({e}); expected e.g. 019b0f6e-3a40-7000-8000-00c0ffee0001"
        ))
    })?;
    if u.get_version_num() != 7 || u.get_variant() != uuid::Variant::RFC4122 {
        return Err(Error::invalid(format!(
            "{u} is a version-{} UUID of variant {:?}, not a version-7 UUID of the RFC 9562 \
             variant; only UUIDv7s can be taken apart",
            u.get_version_num(),
            u.get_variant()
        )));
    }
    let v = u.as_u128();
    let time_ms = (v >> 80) as i64;
    Ok(DecodedUuid {
        uuid: u.hyphenated().to_string(),
        time_ms,
        time: rfc3339(time_ms),
        worker: ((v >> UUIDV7_RANDOM_BITS) & ((1u128 << UUIDV7_WORKER_BITS) - 1)) as i64,
        counter: ((v >> 64) & ((1u128 << UUIDV7_COUNTER_BITS) - 1)) as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats_parse_by_name_and_refuse_others_naming_the_choices() {
        assert_eq!("uuidv7".parse::<IdFormat>().unwrap(), IdFormat::Uuidv7);
        assert_eq!(" Integer ".parse::<IdFormat>().unwrap(), IdFormat::Integer);
        for bad in ["", "uuid", "uuidv4", "int"] {
            let e = bad.parse::<IdFormat>().unwrap_err().to_string();
            assert!(e.contains("integer") && e.contains("uuidv7"), "{bad}: {e}");
        }
        let wide = Layout {
            sequence_bits: 13,
            worker_bits: 9,
            ..Layout::snowflake()
        };
        let e = IdFormat::Uuidv7.check(&wide).unwrap_err().to_string();
        assert!(e.contains("13 sequence bits"), "{e}");
        IdFormat::Integer.check(&wide).unwrap();
        IdFormat::Uuidv7.check(&Layout::snowflake()).unwrap();
        IdFormat::Uuidv7.check(&Layout::javascript_safe()).unwrap();
    }

    #[test]
    fn parts_out_of_range_and_other_uuids_are_refused() {
        assert!(uuidv7_from_parts(-1, 0, 0, 0).is_err());
        assert!(uuidv7_from_parts(1 << 48, 0, 0, 0).is_err());
        assert!(uuidv7_from_parts(0, 1 << 22, 0, 0).is_err());
        assert!(uuidv7_from_parts(0, 0, 4096, 0).is_err());
        assert!(uuidv7_from_parts(0, -1, 0, 0).is_err());
        for bad in [
            "not a uuid",
            "67e55044-10b1-426f-9247-bb680e5fe0c8", // version 4
            "019b0f6e-3a40-7000-c000-00c0ffee0001", // variant 110
        ] {
            assert!(
                matches!(decode_uuidv7(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_bits_are_where_the_documentation_says() {
        let u = uuidv7_from_parts(0x0123_4567_89ab, 0x2a_aaaa, 0xabc, u64::MAX).unwrap();
        assert_eq!(u.to_string(), "01234567-89ab-7abc-aaaa-aaffffffffff");
    }

    proptest! {
        #[test]
        fn version_variant_and_parts_round_trip(
            ms in 0..=MAX_UNIX_MS,
            worker in 0..1i64 << UUIDV7_WORKER_BITS,
            counter in 0..1i64 << UUIDV7_COUNTER_BITS,
            random in any::<u64>(),
        ) {
            let u = uuidv7_from_parts(ms, worker, counter, random).unwrap();
            prop_assert_eq!(u.get_version_num(), 7);
            prop_assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
            let d = decode_uuidv7(&u.to_string()).unwrap();
            prop_assert_eq!((d.time_ms, d.worker, d.counter), (ms, worker, counter));
            prop_assert_eq!(decode_uuidv7(&u.simple().to_string()).unwrap(), d);
        }

        #[test]
        fn order_follows_time_then_counter_whatever_the_worker_and_random_bits(
            a in (0..=MAX_UNIX_MS, 0..4096i64),
            b in (0..=MAX_UNIX_MS, 0..4096i64),
            wa in 0..1i64 << 22, wb in 0..1i64 << 22,
            ra in any::<u64>(), rb in any::<u64>(),
        ) {
            prop_assume!(a != b);
            let ua = uuidv7_from_parts(a.0, wa, a.1, ra).unwrap();
            let ub = uuidv7_from_parts(b.0, wb, b.1, rb).unwrap();
            prop_assert_eq!(a < b, ua.as_bytes() < ub.as_bytes());
            prop_assert_eq!(a < b, ua.to_string() < ub.to_string());
        }
    }
}

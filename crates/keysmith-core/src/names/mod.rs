//! Host counters (`<hostname>/<counter>`) and structured row names.
//!
//! Two ways to name a row when no natural key exists:
//!
//! - [`HostCounter`]: every host keeps its own 64-bit counter in a small file
//!   under a file lock, and names are `<hostname>/<counter>`. No cluster-wide
//!   lock, no store: unique across a cluster because host names are.
//! - [`RowName`]: names derived from a content's canonical URL, with branches,
//!   revisions, locales, author drafts and visitor suggestions encoded in the
//!   key. [`next_revision`] hands out gap-free revision numbers per branch from a
//!   keysmith sequence.

mod host_counter;
mod revision;
mod row_name;

pub use host_counter::{
    COUNTER_FILE, CounterName, CounterNames, HostCounter, MAX_COUNT, MAX_HOSTNAME_BYTES,
    system_hostname, validate_hostname,
};
pub use revision::next_revision;
pub use row_name::{
    Branch, ContentUrl, Domain, Draft, Locale, MAX_USER_ID_BYTES, Revision, RowKind, RowName,
    RowNameParts, Suggestion, User, UserId,
};

/// Parses a non-negative decimal integer written the one canonical way:
/// ASCII digits only, no sign, no leading zero (except `0` itself), at most
/// `u64::MAX`. On failure, says what is wrong in a phrase that completes
/// "... is not a valid NUMBER: ".
fn parse_decimal(s: &str) -> std::result::Result<u64, &'static str> {
    if s.is_empty() {
        return Err("it is empty");
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("it must be written with the digits 0-9 only (no sign, no spaces)");
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err("it has a leading zero; write the number without it");
    }
    s.parse::<u64>()
        .map_err(|_| "it is larger than the largest allowed value, 18446744073709551615")
}

#[cfg(test)]
mod tests {
    use super::parse_decimal;

    #[test]
    fn decimals_are_canonical() {
        assert_eq!(parse_decimal("0"), Ok(0));
        assert_eq!(parse_decimal("42"), Ok(42));
        assert_eq!(parse_decimal("18446744073709551615"), Ok(u64::MAX));
        for bad in [
            "",
            "-1",
            "+1",
            "01",
            "00",
            "1.0",
            " 1",
            "1e3",
            "١",
            "18446744073709551616",
        ] {
            assert!(parse_decimal(bad).is_err(), "{bad:?}");
        }
    }
}

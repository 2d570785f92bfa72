//! The wall clock, in the one unit keysmith stores times in.

/// Milliseconds since the Unix epoch by this process's clock (0 before 1970,
/// `i64::MAX` in the far future).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

//! Presentation helpers: numbers the library returns, said in words.

/// A runway in words, in the largest unit that fits ("3.2 years", "4.0
/// days", "2.5 hours", "40 seconds"); "–" without one.
pub fn runway_words(seconds: Option<f64>) -> String {
    const DAY: f64 = 86_400.0;
    match seconds {
        None => "–".to_owned(),
        Some(s) if s >= 365.0 * DAY => format!("{:.1} years", s / (365.0 * DAY)),
        Some(s) if s >= DAY => format!("{:.1} days", s / DAY),
        Some(s) if s >= 3600.0 => format!("{:.1} hours", s / 3600.0),
        Some(s) => format!("{s:.0} seconds"),
    }
}

#[cfg(test)]
mod tests {
    use super::runway_words;

    #[test]
    fn the_runway_is_said_in_the_largest_unit_that_fits() {
        assert_eq!(runway_words(None), "–");
        assert_eq!(runway_words(Some(40.4)), "40 seconds");
        assert_eq!(runway_words(Some(9000.0)), "2.5 hours");
        assert_eq!(runway_words(Some(4.0 * 86_400.0)), "4.0 days");
        assert_eq!(runway_words(Some(3.2 * 365.0 * 86_400.0)), "3.2 years");
    }
}

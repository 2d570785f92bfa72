//! The query parameters the URL of every pooled SQL store takes
//! (`timeout=SECS`, `pool_size=N`), parsed once with one wording of their
//! errors.

use std::time::Duration;

use crate::{Error, Result};

/// How long taking a connection, and then an operation, may take when the
/// URL says nothing (`timeout=`).
pub const DEFAULT_CONN_TIMEOUT: Duration = Duration::from_secs(10);

/// How many connections a store keeps at most when the URL says nothing
/// (`pool_size=`).
pub const DEFAULT_POOL_SIZE: usize = 16;

/// A store URL's `timeout` and `pool_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnParams {
    /// `timeout=SECS`: above 0 and at most a day.
    pub timeout: Duration,
    /// `pool_size=N`: 1 to 1000.
    pub pool_size: usize,
}

impl Default for ConnParams {
    fn default() -> Self {
        ConnParams {
            timeout: DEFAULT_CONN_TIMEOUT,
            pool_size: DEFAULT_POOL_SIZE,
        }
    }
}

impl ConnParams {
    /// Takes query parameter `key=value` of store URL `shown` (redacted) if
    /// it is one of these two; returns whether it was.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the parameter, what it takes and an
    /// example.
    pub fn take(&mut self, shown: &str, key: &str, value: &str) -> Result<bool> {
        match key {
            "timeout" => {
                self.timeout = value
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "store URL {shown}: timeout={value:?} must be a number of seconds above 0 and at most 86400, e.g. timeout=10"
                        ))
                    })?;
            }
            "pool_size" => {
                self.pool_size = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "store URL {shown}: pool_size={value:?} must be a whole number from 1 to 1000, e.g. pool_size=16"
                        ))
                    })?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_its_two_parameters_and_refuses_bad_values() {
        let mut p = ConnParams::default();
        assert!(p.take("u", "timeout", "2.5").unwrap());
        assert!(p.take("u", "pool_size", "4").unwrap());
        assert!(!p.take("u", "schema", "x").unwrap());
        assert_eq!(p.timeout, Duration::from_millis(2500));
        assert_eq!(p.pool_size, 4);
        for (k, v) in [
            ("timeout", "0"),
            ("timeout", "nan"),
            ("timeout", "86401"),
            ("pool_size", "0"),
            ("pool_size", "1001"),
        ] {
            let e = p.take("u", k, v).unwrap_err().to_string();
            assert!(e.contains(k), "{e}");
        }
        assert_eq!(p.pool_size, 4, "a refused value changes nothing");
    }
}

//! The wait between contended retries, shared by sequences and pools.

use std::time::Duration;

/// Full jitter: a random wait up to 1 ms doubled per retry, at most 64 ms.
pub(crate) fn backoff(retry: u32) -> Duration {
    let cap_us = 1_000u64 << retry.min(6);
    Duration::from_micros(rand::random_range(0..=cap_us))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded() {
        for r in 0..40 {
            assert!(backoff(r) <= Duration::from_millis(64));
        }
    }
}

//! How contended calls retry, shared by sequences and pools: a time budget
//! (not a small count) and a jittered wait between lost races.

use std::time::{Duration, Instant};

/// How long a reservation or a pool take keeps retrying lost races before it
/// fails with [`crate::Error::Contention`], unless told otherwise. Long enough
/// that with default settings a call does not give up while the store is up:
/// 32 processes at once on one sequence of a three-node etcd on a loaded
/// two-core machine had some wait over 5 s for their turn (the contention
/// test; BENCHMARKS.md has the figures). The HTTP service uses half its
/// request timeout instead, so that it answers before the timeout.
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(15);

/// Full jitter: a random wait up to 1 ms doubled per retry, at most 64 ms.
pub(crate) fn backoff(retry: u32) -> Duration {
    let cap_us = 1_000u64 << retry.min(6);
    Duration::from_micros(rand::random_range(0..=cap_us))
}

/// The retries of one call: lost races counted against a deadline and, if
/// set, a cap on their number.
#[derive(Debug)]
pub(crate) struct Retries {
    deadline: Instant,
    cap: Option<u32>,
    lost: u32,
}

impl Retries {
    /// Starts the clock of one call.
    pub(crate) fn new(budget: Duration, cap: Option<u32>) -> Self {
        Retries {
            // A budget too large for an Instant means "no deadline" in practice.
            deadline: Instant::now()
                .checked_add(budget)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365)),
            cap,
            lost: 0,
        }
    }

    /// Counts a lost race; whether another attempt may follow (the budget is
    /// not spent and the cap not reached).
    pub(crate) fn lost(&mut self) -> bool {
        self.lost = self.lost.saturating_add(1);
        self.cap.is_none_or(|cap| self.lost < cap) && Instant::now() < self.deadline
    }

    /// How many races were lost so far.
    pub(crate) fn lost_races(&self) -> u32 {
        self.lost
    }

    /// Waits a jittered backoff for the current number of lost races, never
    /// past the deadline.
    pub(crate) async fn wait(&self) {
        let left = self.deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(backoff(self.lost).min(left)).await;
    }
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

    #[test]
    fn a_zero_budget_allows_no_retry() {
        let mut r = Retries::new(Duration::ZERO, None);
        assert!(!r.lost());
        assert_eq!(r.lost_races(), 1);
    }

    #[test]
    fn the_cap_counts_attempts() {
        let mut r = Retries::new(Duration::from_secs(60), Some(3));
        assert!(r.lost(), "attempt 2 may follow");
        assert!(r.lost(), "attempt 3 may follow");
        assert!(!r.lost(), "no fourth attempt");
        let mut one = Retries::new(Duration::from_secs(60), Some(1));
        assert!(!one.lost(), "a cap of 1 allows no retry");
        assert_eq!(one.lost_races(), 1);
    }

    #[test]
    fn a_huge_budget_does_not_overflow() {
        let mut r = Retries::new(Duration::MAX, None);
        assert!(r.lost());
    }
}

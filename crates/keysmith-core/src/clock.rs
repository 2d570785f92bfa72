//! The wall clock, in the one unit keysmith stores times in.

/// Milliseconds since the Unix epoch by this process's clock (0 before 1970,
/// `i64::MAX` in the far future).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A reading of the clock that lease deadlines are measured by: monotonic
/// (never steps, never goes back) and, on Linux, counting the time the host
/// spends suspended (`CLOCK_BOOTTIME`), so that a deadline passes during a
/// suspend as it does for the store that measures the lease. Elsewhere it
/// is [`std::time::Instant`], which may not count a suspend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LeaseInstant(std::time::Duration);

impl LeaseInstant {
    /// Now.
    pub(crate) fn now() -> Self {
        LeaseInstant(since_an_origin())
    }

    /// The time from `earlier` to `self` (zero if `earlier` is later).
    pub(crate) fn duration_since(self, earlier: LeaseInstant) -> std::time::Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl std::ops::Add<std::time::Duration> for LeaseInstant {
    type Output = LeaseInstant;

    fn add(self, d: std::time::Duration) -> LeaseInstant {
        LeaseInstant(self.0.saturating_add(d))
    }
}

/// `CLOCK_BOOTTIME`: time since boot, suspends included.
#[cfg(target_os = "linux")]
fn since_an_origin() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    // The kernel's timespec is never negative here.
    std::time::Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// `Instant` since the first reading of this process.
#[cfg(not(target_os = "linux"))]
fn since_an_origin() -> std::time::Duration {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn lease_time_moves_forward_with_real_time() {
        let (a, i) = (LeaseInstant::now(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (b, j) = (LeaseInstant::now(), Instant::now());
        assert!(b > a);
        // Both clocks measured the same stretch (no suspend here): within
        // what two pairs of readings can differ by.
        let (lease, mono) = (b.duration_since(a), j.duration_since(i));
        assert!(lease >= Duration::from_millis(20), "{lease:?}");
        assert!(
            lease.abs_diff(mono) < Duration::from_millis(10),
            "{lease:?} vs {mono:?}"
        );
        assert_eq!(a.duration_since(b), Duration::ZERO);
        assert!(a + Duration::from_secs(1) > a);
    }

    /// On Linux the lease clock is `CLOCK_BOOTTIME`, at or above
    /// `CLOCK_MONOTONIC` (it adds the time suspended), not `Instant`'s own.
    #[cfg(target_os = "linux")]
    #[test]
    fn on_linux_the_lease_clock_counts_suspends() {
        let mono = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let boot = LeaseInstant::now().0;
        let mono = Duration::new(mono.tv_sec as u64, mono.tv_nsec as u32);
        assert!(boot >= mono, "{boot:?} < {mono:?}");
    }
}

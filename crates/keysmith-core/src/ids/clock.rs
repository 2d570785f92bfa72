//! The clocks a generator reads: wall time for the ids, a monotonic clock
//! for its lease deadline. [`SystemClock`] in production; [`ManualClock`]
//! for tests that move time by hand (jumps back, jumps forward, pauses).

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use crate::clock::LeaseInstant;

use async_trait::async_trait;

/// What a generator reads the time from.
#[async_trait]
pub trait Clock: Send + Sync + fmt::Debug {
    /// Wall time: milliseconds since the Unix epoch. May jump either way.
    fn now_ms(&self) -> i64;
    /// Monotonic time since an arbitrary origin: never goes back.
    fn mono(&self) -> Duration;
    /// Waits `d` (a [`ManualClock`] moves itself forward instead).
    async fn sleep(&self, d: Duration);
}

/// The system's clocks: `SystemTime`, a monotonic clock that on Linux
/// counts the time the host spends suspended (`CLOCK_BOOTTIME`, so a lease
/// deadline passes during a suspend), and tokio's sleep.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: LeaseInstant,
}

impl SystemClock {
    /// The system clock.
    pub fn new() -> Self {
        SystemClock {
            origin: LeaseInstant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        crate::clock::now_ms()
    }

    fn mono(&self) -> Duration {
        LeaseInstant::now().duration_since(self.origin)
    }

    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

/// A clock moved by hand, for tests: wall time jumps with
/// [`ManualClock::jump_ms`] (the monotonic clock does not see it, as with an
/// NTP step), real time passes with [`ManualClock::advance`] (both move), and
/// [`Clock::sleep`] advances it instead of waiting, so tests are
/// deterministic.
#[derive(Debug)]
pub struct ManualClock {
    inner: Mutex<(i64, Duration)>,
}

impl ManualClock {
    /// A clock reading `now_ms` (wall) and zero (monotonic).
    pub fn new(now_ms: i64) -> Self {
        ManualClock {
            inner: Mutex::new((now_ms, Duration::ZERO)),
        }
    }

    /// Moves the wall clock by `delta_ms` (negative: back); the monotonic
    /// clock stays.
    pub fn jump_ms(&self, delta_ms: i64) {
        self.lock().0 += delta_ms;
    }

    /// Lets `d` pass: both clocks move forward.
    pub fn advance(&self, d: Duration) {
        let mut g = self.lock();
        g.0 += d.as_millis() as i64;
        g.1 += d;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (i64, Duration)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.lock().0
    }

    fn mono(&self) -> Duration {
        self.lock().1
    }

    async fn sleep(&self, d: Duration) {
        self.advance(d);
    }
}

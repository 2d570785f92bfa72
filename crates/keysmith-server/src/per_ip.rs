//! Strangers are bounded per client address, as nginx's `limit_conn` and
//! `limit_req` do: connections held at once (`Connections`, used by the
//! accept loop in `conn.rs`) and failed authentications
//! (`FailedAuth`, used by `auth.rs`).
//!
//! An address is an IPv4 address, or an IPv6 address's /64 (one host, or
//! one customer of a provider, usually holds a whole /64). An IPv4 address
//! mapped into IPv6 counts as the IPv4 address.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default most connections one client address holds at once.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 64;

/// The default most failed authentications of one client address in
/// [`AUTH_FAILURE_WINDOW`]; past it every request of that address gets a 429
/// until the window ends.
pub const DEFAULT_AUTH_FAILURES_PER_IP: u32 = 20;

/// The window of [`DEFAULT_AUTH_FAILURES_PER_IP`].
pub const AUTH_FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// How many addresses' windows are kept before expired ones are swept.
const SWEEP_AT: usize = 4096;

/// The key an address is counted under.
pub(crate) fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Connections held per address, capped.
#[derive(Debug)]
pub(crate) struct Connections {
    max: usize,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection counted against its address; uncounted when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    ip: IpAddr,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut m = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

impl Connections {
    /// At most `max` connections per address.
    pub(crate) fn new(max: usize) -> Self {
        Connections {
            max: max.max(1),
            held: Arc::default(),
        }
    }

    /// Counts a connection of `ip`, or `None` when that address already
    /// holds its most.
    pub(crate) fn admit(&self, ip: IpAddr) -> Option<Held> {
        let ip = key(ip);
        let mut m = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Held {
            ip,
            held: self.held.clone(),
        })
    }
}

/// Failed authentications per address in fixed windows.
#[derive(Debug)]
pub(crate) struct FailedAuth {
    max: u32,
    window: Duration,
    by_ip: Mutex<HashMap<IpAddr, Window>>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    failures: u32,
    /// Whether the throttling of this window was audited.
    audited: bool,
}

/// An address over its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Throttled {
    /// Seconds until its window ends (at least 1).
    pub(crate) retry_after: u64,
    /// The first refusal of the window (audit it).
    pub(crate) first: bool,
    /// Failures counted in the window.
    pub(crate) failures: u32,
}

impl FailedAuth {
    /// At most `max` failures per `window`; 0 turns the budget off.
    pub(crate) fn new(max: u32, window: Duration) -> Self {
        FailedAuth {
            max,
            window,
            by_ip: Mutex::default(),
        }
    }

    /// Whether `ip` is over its budget now.
    pub(crate) fn check(&self, ip: IpAddr, now: Instant) -> Option<Throttled> {
        if self.max == 0 {
            return None;
        }
        let mut m = self.by_ip.lock().unwrap_or_else(|p| p.into_inner());
        let w = m.get_mut(&key(ip))?;
        let ends = w.started + self.window;
        if now >= ends || w.failures < self.max {
            return None;
        }
        let first = !w.audited;
        w.audited = true;
        Some(Throttled {
            retry_after: (ends - now).as_secs_f64().ceil().max(1.0) as u64,
            first,
            failures: w.failures,
        })
    }

    /// Counts a failed authentication of `ip`.
    pub(crate) fn failed(&self, ip: IpAddr, now: Instant) {
        if self.max == 0 {
            return;
        }
        let mut m = self.by_ip.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= SWEEP_AT {
            let window = self.window;
            m.retain(|_, w| now < w.started + window);
        }
        let w = m.entry(key(ip)).or_insert(Window {
            started: now,
            failures: 0,
            audited: false,
        });
        if now >= w.started + self.window {
            *w = Window {
                started: now,
                failures: 0,
                audited: false,
            };
        }
        w.failures = w.failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_capped_per_address() {
        let c = Connections::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = c.admit(a).unwrap();
        let _a2 = c.admit(a).unwrap();
        assert!(c.admit(a).is_none());
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert!(c.admit(mapped).is_none());
        assert!(c.admit(b).is_some());
        drop(a1);
        assert!(c.admit(a).is_some());
        // One /64.
        let c = Connections::new(1);
        let _x = c.admit("2001:db8::1".parse().unwrap()).unwrap();
        assert!(c.admit("2001:db8::2".parse().unwrap()).is_none());
        assert!(c.admit("2001:db8:0:1::1".parse().unwrap()).is_some());
    }

    #[test]
    fn failures_throttle_until_the_window_ends() {
        let f = FailedAuth::new(3, Duration::from_secs(60));
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(f.check(ip, t0).is_none());
            f.failed(ip, t0);
        }
        let t = f.check(ip, t0 + Duration::from_secs(10)).unwrap();
        assert!(t.first);
        assert_eq!(t.retry_after, 50);
        assert!(!f.check(ip, t0 + Duration::from_secs(11)).unwrap().first);
        assert!(f.check("10.0.0.2".parse().unwrap(), t0).is_none());
        assert!(f.check(ip, t0 + Duration::from_secs(60)).is_none());
        f.failed(ip, t0 + Duration::from_secs(61));
        assert!(f.check(ip, t0 + Duration::from_secs(62)).is_none());
        assert!(
            FailedAuth::new(0, Duration::from_secs(1))
                .check(ip, t0)
                .is_none()
        );
    }
}

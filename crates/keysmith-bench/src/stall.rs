//! The stall at block boundaries: single `next()` calls timed one by one
//! (`keysmith-bench stall`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use keysmith::Result;
use keysmith::sequence::{self, Strategy};
use keysmith::store::Store;
use serde::Serialize;

use super::rate::{bench_sequence, open};

/// What [`stall`] measured: latencies of single `next()` calls.
#[derive(Debug, Clone, Serialize)]
pub struct StallReport {
    /// Block size.
    pub block: i64,
    /// Whether the next block was prefetched in the background.
    pub prefetch: bool,
    /// Calls measured.
    pub calls: u64,
    /// Median latency, nanoseconds.
    pub p50_ns: u64,
    /// 99.9th percentile, nanoseconds.
    pub p999_ns: u64,
    /// The longest call, nanoseconds.
    pub max_ns: u64,
    /// The longest call that took the first value of a block, nanoseconds.
    pub max_at_boundary_ns: u64,
}

/// Calls `next()` one at a time across `blocks` block boundaries and records
/// how long each call took, with or without prefetch.
///
/// A pause of `pause` after every call models a client that does work
/// between keys (prefetch can only hide the store if it has time to run).
///
/// # Errors
/// What the store fails with.
pub async fn stall(
    store: Arc<dyn Store>,
    block: i64,
    blocks: u64,
    prefetch: bool,
    pause: Duration,
) -> Result<StallReport> {
    let name = bench_sequence(&*store).await?;
    let share = if prefetch {
        sequence::DEFAULT_PREFETCH
    } else {
        0.0
    };
    let seq = open(
        store.clone(),
        &name,
        block,
        Strategy::Optimistic,
        Some(share),
    )
    .await?;
    let calls = blocks * block as u64;
    let mut lat = Vec::with_capacity(calls as usize);
    let mut max_at_boundary = 0u64;
    let first = seq.next().await?; // the first refill is not a boundary crossing
    for _ in 0..calls {
        let t = Instant::now();
        let v = seq.next().await?;
        let ns = t.elapsed().as_nanos() as u64;
        lat.push(ns);
        if (v - first) % block == 0 {
            max_at_boundary = max_at_boundary.max(ns);
        }
        if !pause.is_zero() {
            spin_for(pause);
        }
    }
    seq.close().await?;
    sequence::remove(&*store, &name).await?;
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize];
    Ok(StallReport {
        block,
        prefetch,
        calls,
        p50_ns: pct(0.5),
        p999_ns: pct(0.999),
        max_ns: *lat.last().unwrap_or(&0),
        max_at_boundary_ns: max_at_boundary,
    })
}

/// Busy-waits: a client doing CPU work, without yielding to the runtime.
fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

//! Measurements behind `keysmith bench`: durable allocation rate and the
//! stall at block boundaries, on any store.
//!
//! Each run creates its own sequence (`keysmith-bench-<random>`) and drops it
//! afterwards, so it can run against a store that holds real sequences.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::Result;
use crate::sequence::{self, Sequence, Strategy};
use crate::store::{MAX_VALUE, SequenceSpec, Store};

/// What [`allocation_rate`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct RateReport {
    /// Block size of every handle.
    pub block: i64,
    /// Concurrent clients, each with its own store connection and handle.
    pub clients: usize,
    /// The strategy used.
    pub strategy: Strategy,
    /// Values handed out in total.
    pub values: u64,
    /// Wall time of the run.
    pub seconds: f64,
    /// `values / seconds`.
    pub values_per_sec: f64,
    /// Store reservations in total.
    pub reservations: u64,
    /// Optimistic conflicts in total.
    pub conflicts: u64,
}

/// `clients` tasks, each opening its own store from `url` and its own handle,
/// call `next()` for `duration`. Every value is unique (checked by the
/// sequence's guarantees, not here); the report says how many there were.
///
/// # Errors
/// What opening the store or allocating fails with.
pub async fn allocation_rate(
    url: &str,
    block: i64,
    clients: usize,
    strategy: Strategy,
    duration: Duration,
) -> Result<RateReport> {
    let admin = crate::store::open(url).await?;
    let name = bench_sequence(&*admin).await?;
    let mut tasks = Vec::new();
    let start = Instant::now();
    for _ in 0..clients.max(1) {
        let store = crate::store::open(url).await?;
        let seq = open(store, &name, block, strategy, None).await?;
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < duration {
                seq.next().await?;
                n += 1;
            }
            seq.close().await?;
            Ok::<_, crate::Error>((n, seq.stats()))
        }));
    }
    let (mut values, mut reservations, mut conflicts) = (0, 0, 0);
    let mut failure = None;
    for t in tasks {
        match t.await {
            Ok(Ok((n, s))) => {
                values += n;
                reservations += s.reservations;
                conflicts += s.conflicts;
            }
            Ok(Err(e)) => failure = Some(e),
            Err(e) => failure = Some(crate::Error::Unavailable(format!("bench task: {e}"))),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    sequence::remove(&*admin, &name).await?;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(RateReport {
        block,
        clients: clients.max(1),
        strategy,
        values,
        seconds,
        values_per_sec: values as f64 / seconds,
        reservations,
        conflicts,
    })
}

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

async fn bench_sequence(store: &dyn Store) -> Result<String> {
    let name = format!("keysmith-bench-{:016x}", rand::random::<u64>());
    let spec = SequenceSpec {
        name: name.clone(),
        start: 1,
        max: MAX_VALUE,
        block: 100,
    };
    sequence::create(store, &spec).await?;
    Ok(name)
}

async fn open(
    store: Arc<dyn Store>,
    name: &str,
    block: i64,
    strategy: Strategy,
    prefetch: Option<f64>,
) -> Result<Sequence> {
    let mut b = Sequence::builder()
        .store(store)
        .name(name)
        .block(block)
        .strategy(strategy);
    if let Some(p) = prefetch {
        b = b.prefetch(p);
    }
    b.build().await
}

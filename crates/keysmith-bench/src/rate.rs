//! Durable allocation rate: clients calling `next()` for a while, on any
//! store (`keysmith-bench rate`).
//!
//! Written against the library's public API only, so the library's own
//! benches (`crates/keysmith/benches/postgres.rs`, `etcd.rs`) include this
//! file with `#[path]` and measure with the same code.
//!
//! Each run creates its own sequence (`keysmith-bench-<random>`) and drops it
//! afterwards, so it can run against a store that holds real sequences.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keysmith::Result;
use keysmith::sequence::{self, Sequence, Strategy};
use keysmith::store::{MAX_VALUE, SequenceSpec, Store};
use serde::Serialize;

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
    let admin = keysmith::store::open(url).await?;
    let name = bench_sequence(&*admin).await?;
    let mut tasks = Vec::new();
    let start = Instant::now();
    for _ in 0..clients.max(1) {
        let store = keysmith::store::open(url).await?;
        let seq = open(store, &name, block, strategy, None).await?;
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < duration {
                seq.next().await?;
                n += 1;
            }
            seq.close().await?;
            Ok::<_, keysmith::Error>((n, seq.stats()))
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
            Err(e) => failure = Some(keysmith::Error::Unavailable(format!("bench task: {e}"))),
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

/// Creates a throwaway sequence for one run (block 100).
///
/// # Errors
/// What the store fails with.
pub async fn bench_sequence(store: &dyn Store) -> Result<String> {
    let name = format!("keysmith-bench-{:016x}", rand::random::<u64>());
    let spec = SequenceSpec {
        name: name.clone(),
        start: 1,
        max: MAX_VALUE,
        block: 100,
        failover_skip: None,
        start_below_dropped: false,
    };
    sequence::create(store, &spec).await?;
    Ok(name)
}

/// A handle on `name` with the given block, strategy and prefetch share.
///
/// # Errors
/// What the store fails with.
pub async fn open(
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

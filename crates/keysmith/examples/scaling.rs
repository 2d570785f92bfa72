//! What adaptive blocks do to a store's write rate: `servers` handles on one
//! sequence (each with its own store connection, as separate servers have),
//! each asked for a fixed number of values per second, for a few seconds.
//! Prints, per row, the values per second served and the store writes
//! (reservations) per second per handle, beside the fixed-block figure the
//! same load would cost (rate / block). The user guide's Scaling chapter (docs/book/src/scaling.md) explains the model.
//!
//! `cargo run --release -p keysmith --features etcd --example scaling -- URL [SECONDS]`
//!
//! URL is any store URL (`sqlite:///tmp/scale.db`, `postgres://...`,
//! `etcd://...`); each row uses a fresh sequence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keysmith::sequence::{AdaptivePolicy, Sequence};
use keysmith::store::SequenceSpec;

/// Handles (servers) on one sequence, and values per second asked of each.
const ROWS: [(usize, u64); 6] = [
    (1, 1_000),
    (1, 10_000),
    (1, 100_000),
    (4, 1_000),
    (4, 10_000),
    (4, 50_000),
];

/// Pacing tick: each handle takes rate / TICKS_PER_SEC values per tick.
const TICKS_PER_SEC: u64 = 100;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .ok_or("usage: scaling URL [SECONDS] (a store URL, e.g. sqlite:///tmp/scale.db)")?;
    let seconds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(6);
    let policy = AdaptivePolicy::default();
    println!(
        "store {}; adaptive blocks from 100 up to {} aiming at one write per {:?}; {seconds} s a row, the first third to settle",
        url.split("://").next().unwrap_or("?"),
        policy.max,
        policy.target
    );
    println!(
        "| servers | asked values/s each | served values/s (all) | writes/s per server | block at the end | writes/s per server at block 100 |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for (i, (servers, rate)) in ROWS.into_iter().enumerate() {
        let name = format!("scale-{}-{i}", std::process::id());
        let admin = keysmith::store::open(&url).await?;
        admin.create_sequence(&SequenceSpec::new(&name)).await?;
        let mut handles = Vec::new();
        for _ in 0..servers {
            let store = keysmith::store::open(&url).await?;
            let seq = Sequence::builder()
                .store(store)
                .name(&name)
                .adaptive_policy(policy)
                .build()
                .await?;
            handles.push(Arc::new(seq));
        }
        let settle = Duration::from_secs(seconds / 3);
        let run = Duration::from_secs(seconds);
        let tasks: Vec<_> = handles
            .iter()
            .map(|seq| {
                let seq = seq.clone();
                tokio::spawn(async move { paced(&seq, rate, settle, run).await })
            })
            .collect();
        let mut served = 0;
        let mut writes = 0;
        for t in tasks {
            let (v, w) = t.await??;
            served += v;
            writes += w;
        }
        let measured = (run - settle).as_secs_f64();
        let block = handles[0].block();
        for seq in &handles {
            seq.close().await?;
        }
        println!(
            "| {servers} | {rate} | {:.0} | {:.2} | {block} | {:.0} |",
            served as f64 / measured,
            writes as f64 / measured / servers as f64,
            rate as f64 / 100.0,
        );
        admin.drop_sequence(&name).await?;
    }
    Ok(())
}

/// Takes `rate` values a second from `seq` until `run` is over; returns the
/// values taken and the reservations made after `settle`.
async fn paced(
    seq: &Sequence,
    rate: u64,
    settle: Duration,
    run: Duration,
) -> keysmith::Result<(u64, u64)> {
    let per_tick = rate / TICKS_PER_SEC;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / TICKS_PER_SEC));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let start = Instant::now();
    let mut base = None;
    let mut taken = 0;
    while start.elapsed() < run {
        tick.tick().await;
        if base.is_none() && start.elapsed() >= settle {
            base = Some(seq.stats().reservations);
        }
        for _ in 0..per_tick {
            seq.next().await?;
            if base.is_some() {
                taken += 1;
            }
        }
    }
    let writes = seq.stats().reservations - base.unwrap_or(0);
    Ok((taken, writes))
}

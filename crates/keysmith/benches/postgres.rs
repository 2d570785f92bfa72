//! keysmith's durable allocation on PostgreSQL next to a bare
//! `SELECT nextval('s')`, on one throwaway server, in the same run.
//!
//! `cargo bench -p keysmith --bench postgres`
//!
//! Starts a server with `keysmith-testsupport` (fsync=on,
//! synchronous_commit=on), then prints two tables:
//!
//! - `allocation_rate` (`crates/keysmith-bench/src/rate.rs`, the code behind `keysmith-bench rate`) for the atomic and optimistic
//!   strategies, block sizes 1, 100 and 10 000, 1 and 8 clients: values/s,
//!   store reservations, optimistic conflicts;
//! - `SELECT nextval(...)` through tokio-postgres, one statement (one round
//!   trip) per value, 1 and 8 clients, on a sequence without cache and one
//!   with `CACHE 1000`.
//!
//! Both tables also give the server's WAL fsyncs (`pg_stat_wal.wal_sync`)
//! per 1000 values: how many values one flush to disk covers.
//!
//! Each measurement runs `KEYSMITH_BENCH_SECS` seconds (default 2.5), on a
//! tokio runtime of `KEYSMITH_BENCH_WORKERS` worker threads (default 16). Without
//! `--bench` on the command line (as under `cargo test --benches`) each runs
//! for 50 ms, to check that the benchmark works. Without the PostgreSQL
//! binaries it prints why and exits (or panics when
//! `KEYSMITH_REQUIRE_BACKENDS=1`).

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../../keysmith-bench/src/rate.rs"]
mod rate;

use keysmith::sequence::Strategy;
use keysmith_testsupport::postgres::TempPostgres;
use rate::allocation_rate;
use tokio_postgres::{Client, NoTls};

/// Runtime worker threads: more than the 8 clients. A client whose block has
/// values left never yields (`next()` is ready at once), so with fewer
/// workers than clients the prefetch tasks and the connections' driver tasks
/// wait for a worker, and the figures measure the runtime's queue instead of
/// the store. With a thread each, the clients are preempted by the OS like
/// the threads of a real application.
const DEFAULT_WORKERS: usize = 16;

/// `application_name` of the plain nextval clients.
const NEXTVAL_APP: &str = "keysmith-bench-nextval";
/// `application_name` the keysmith store gives its connections.
const KEYSMITH_APP: &str = "keysmith";

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let secs = if bench {
        match std::env::var("KEYSMITH_BENCH_SECS") {
            Ok(s) => s
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .unwrap_or_else(|| {
                    panic!("KEYSMITH_BENCH_SECS={s:?}: give a number of seconds above 0")
                }),
            Err(_) => 2.5,
        }
    } else {
        0.05
    };
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let workers = match std::env::var("KEYSMITH_BENCH_WORKERS") {
        Ok(s) => s
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("KEYSMITH_BENCH_WORKERS={s:?}: give a whole number above 0")),
        Err(_) => DEFAULT_WORKERS,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("cannot start a tokio runtime");
    rt.block_on(run(&pg, Duration::from_secs_f64(secs), workers));
}

async fn run(pg: &TempPostgres, duration: Duration, workers: usize) {
    let observer = connect(&pg.url(), "keysmith-bench-observer").await;
    let setting = |name: &'static str| {
        let observer = &observer;
        async move {
            observer
                .query_one(&format!("SHOW {name}"), &[])
                .await
                .expect("SHOW")
                .get::<_, String>(0)
        }
    };
    println!(
        "PostgreSQL {} on 127.0.0.1, fsync={}, synchronous_commit={}, wal_sync_method={}",
        setting("server_version").await,
        setting("fsync").await,
        setting("synchronous_commit").await,
        setting("wal_sync_method").await,
    );
    println!(
        "{} CPUs, load average {}; {workers} runtime worker threads; {:.2} s per measurement",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        duration.as_secs_f64()
    );

    println!();
    println!(
        "keysmith durable allocation (bench/rate.rs allocation_rate: each client its own store and handle, next() in a loop)"
    );
    println!(
        "{:<11} {:>6} {:>7} {:>12} {:>12} {:>10} {:>14}",
        "strategy", "block", "clients", "values/s", "reservations", "conflicts", "fsyncs/1000"
    );
    let url = format!("{}?schema=bench", pg.url());
    for strategy in [Strategy::Atomic, Strategy::Optimistic] {
        for block in [1i64, 100, 10_000] {
            for clients in [1usize, 8] {
                let before = wal_syncs(&observer).await;
                let report = allocation_rate(&url, block, clients, strategy, duration).await;
                wait_until_gone(&observer, KEYSMITH_APP).await;
                let syncs = wal_syncs(&observer).await - before;
                match report {
                    Ok(r) => println!(
                        "{:<11} {:>6} {:>7} {:>12.0} {:>12} {:>10} {:>14.2}",
                        strategy.to_string(),
                        block,
                        clients,
                        r.values_per_sec,
                        r.reservations,
                        r.conflicts,
                        per_1000(syncs, r.values)
                    ),
                    Err(e) => println!("{strategy:<11} {block:>6} {clients:>7}  failed: {e}"),
                }
            }
        }
    }

    println!();
    println!(
        "bare SELECT nextval(...) through tokio-postgres (one round trip per value, autocommit)"
    );
    println!(
        "{:<13} {:>7} {:>12} {:>14}",
        "sequence", "clients", "values/s", "fsyncs/1000"
    );
    observer
        .batch_execute(
            "DROP SEQUENCE IF EXISTS bench_nocache, bench_cache1000;
             CREATE SEQUENCE bench_nocache;
             CREATE SEQUENCE bench_cache1000 CACHE 1000;",
        )
        .await
        .expect("cannot create the benchmark sequences");
    for (label, seq) in [
        ("no cache", "bench_nocache"),
        ("CACHE 1000", "bench_cache1000"),
    ] {
        for clients in [1usize, 8] {
            let before = wal_syncs(&observer).await;
            let values = nextval_rate(&pg.url(), seq, clients, duration).await;
            wait_until_gone(&observer, NEXTVAL_APP).await;
            let syncs = wal_syncs(&observer).await - before;
            println!(
                "{:<13} {:>7} {:>12.0} {:>14.2}",
                label,
                clients,
                values as f64 / duration.as_secs_f64(),
                per_1000(syncs, values)
            );
        }
    }
    println!();
    println!("load average at the end {}", load_average());
}

/// `clients` connections each call `nextval(seq)` in a loop for `duration`;
/// returns how many values they got in total (all distinct: checked).
async fn nextval_rate(url: &str, seq: &str, clients: usize, duration: Duration) -> u64 {
    let sql = Arc::new(format!("SELECT nextval('{seq}')"));
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(connect(url, NEXTVAL_APP).await);
    }
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|c| {
            let sql = sql.clone();
            tokio::spawn(async move {
                let st = c.prepare(&sql).await.expect("prepare nextval");
                let mut got = Vec::new();
                while start.elapsed() < duration {
                    let v: i64 = c.query_one(&st, &[]).await.expect("nextval").get(0);
                    got.push(v);
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("nextval task"));
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "nextval handed out a value twice");
    n as u64
}

/// A connection of its own, with its driver task spawned.
async fn connect(url: &str, app: &str) -> Client {
    let mut config: tokio_postgres::Config = url.parse().expect("bad URL");
    config.application_name(app);
    let (client, conn) = config
        .connect(NoTls)
        .await
        .expect("cannot connect to PostgreSQL");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// The server's WAL fsyncs so far. Backends report their counts when they
/// exit (see [`wait_until_gone`]), so a count taken after the measured
/// connections are gone includes all of theirs.
async fn wal_syncs(observer: &Client) -> i64 {
    observer
        .query_one("SELECT wal_sync FROM pg_stat_wal", &[])
        .await
        .expect("cannot read pg_stat_wal (PostgreSQL 14 or later)")
        .get(0)
}

/// Waits until no backend of `app` is left (they flush their statistics
/// before they leave `pg_stat_activity`).
async fn wait_until_gone(observer: &Client, app: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n: i64 = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .expect("cannot read pg_stat_activity")
            .get(0);
        if n == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{n} {app} connections still open after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn per_1000(count: i64, values: u64) -> f64 {
    if values == 0 {
        f64::NAN
    } else {
        count as f64 * 1000.0 / values as f64
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

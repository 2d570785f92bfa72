//! keysmith's durable allocation on MySQL/MariaDB, every strategy, next to
//! the MySQL sequence-table idiom (`UPDATE ... SET v = LAST_INSERT_ID(v +
//! 1)`), on one throwaway MariaDB server, in the same run.
//!
//! `cargo bench -p keysmith --features mysql --bench mysql`
//!
//! Starts a server with `keysmith-testsupport`
//! (`innodb_flush_log_at_trx_commit=1`), then prints two tables:
//!
//! - `allocation_rate` (`crates/keysmith-bench/src/rate.rs`, the code
//!   behind `keysmith-bench rate`) for the atomic, locked and optimistic
//!   strategies, block sizes 1, 100 and 10 000, 1 and 8 clients: values/s,
//!   store reservations, optimistic conflicts;
//! - the bare `UPDATE ... LAST_INSERT_ID(v + 1)` per value (one autocommit
//!   statement, one round trip), 1 and 8 clients.
//!
//! Each measurement runs `KEYSMITH_BENCH_SECS` seconds (default 2.5) on a
//! tokio runtime of 16 worker threads. Without `--bench` on the command line
//! (as under `cargo test --benches`) each runs for 50 ms, to check that the
//! benchmark works. Without the MariaDB binaries it prints why and exits (or
//! panics when `KEYSMITH_REQUIRE_BACKENDS=1`).

use std::time::{Duration, Instant};

#[path = "../../keysmith-bench/src/rate.rs"]
mod rate;

use keysmith::sequence::Strategy;
use keysmith::store::mysql::mysql_async::prelude::Queryable;
use keysmith_testsupport::mariadb::TempMariaDb;
use rate::allocation_rate;

/// Runtime worker threads: more than the 8 clients (see benches/postgres.rs).
const WORKERS: usize = 16;

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
    let Some(db) = TempMariaDb::start() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("cannot start a tokio runtime");
    rt.block_on(run(&db, Duration::from_secs_f64(secs)));
}

async fn run(db: &TempMariaDb, duration: Duration) {
    println!(
        "MariaDB {} on 127.0.0.1, innodb_flush_log_at_trx_commit={}",
        db.sql("SELECT VERSION()").trim(),
        db.sql("SELECT @@innodb_flush_log_at_trx_commit").trim()
    );
    println!(
        "{} CPUs, load average {}; {WORKERS} runtime worker threads; {:.2} s per measurement",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        duration.as_secs_f64()
    );
    println!();
    println!(
        "keysmith durable allocation (bench/rate.rs allocation_rate: each client its own store and handle, next() in a loop)"
    );
    println!(
        "{:<11} {:>6} {:>7} {:>12} {:>12} {:>10}",
        "strategy", "block", "clients", "values/s", "reservations", "conflicts"
    );
    let url = db.fresh_url();
    for strategy in [Strategy::Atomic, Strategy::Locked, Strategy::Optimistic] {
        for block in [1i64, 100, 10_000] {
            for clients in [1usize, 8] {
                match allocation_rate(&url, block, clients, strategy, duration).await {
                    Ok(r) => println!(
                        "{:<11} {:>6} {:>7} {:>12.0} {:>12} {:>10}",
                        strategy.to_string(),
                        block,
                        clients,
                        r.values_per_sec,
                        r.reservations,
                        r.conflicts
                    ),
                    Err(e) => println!("{strategy:<11} {block:>6} {clients:>7}  failed: {e}"),
                }
            }
        }
    }

    println!();
    println!(
        "bare UPDATE ... SET v = LAST_INSERT_ID(v + 1) (one autocommit statement, one round trip per value)"
    );
    println!("{:<7} {:>12}", "clients", "values/s");
    db.sql(&format!(
        "CREATE TABLE {}.bench_counter (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB;
         INSERT INTO {0}.bench_counter VALUES (1, 0);",
        db_name(&url)
    ));
    for clients in [1usize, 8] {
        let values = last_insert_id_rate(&url, clients, duration).await;
        println!(
            "{:<7} {:>12.0}",
            clients,
            values as f64 / duration.as_secs_f64()
        );
    }
    println!();
    println!("load average at the end {}", load_average());
}

/// `clients` connections each run the counter UPDATE in a loop for
/// `duration`; returns how many values they got in total (all distinct:
/// checked).
async fn last_insert_id_rate(url: &str, clients: usize, duration: Duration) -> u64 {
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(
            keysmith::store::mysql::connect(url)
                .await
                .expect("cannot connect to MariaDB"),
        );
    }
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let mut got = Vec::new();
                while start.elapsed() < duration {
                    c.exec_drop(
                        "UPDATE bench_counter SET v = LAST_INSERT_ID(v + 1) WHERE id = 1",
                        (),
                    )
                    .await
                    .expect("UPDATE");
                    got.push(c.last_insert_id().expect("no LAST_INSERT_ID"));
                }
                let _ = c.disconnect().await;
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("counter task"));
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "the counter handed out a value twice");
    n as u64
}

fn db_name(url: &str) -> &str {
    let path = url.rsplit_once('/').map_or("", |(_, p)| p);
    path.split('?').next().unwrap_or(path)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

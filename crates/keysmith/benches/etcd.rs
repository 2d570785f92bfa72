//! Durable allocation on a real etcd node: the rate by block size, clients
//! and strategy, and how often optimistic puts collide when eight clients
//! share one key. Everything is measured in one run against one throwaway
//! node (started by keysmith-testsupport, etcd's default durability: every
//! commit fsynced).
//!
//! `cargo bench -p keysmith --features etcd --bench etcd`
//!
//! A plain `main` (no criterion): each figure is one run of
//! `allocation_rate` (`crates/keysmith-bench/src/rate.rs`, included
//! here) for [`MEASURE`], the same code behind `keysmith-bench rate`. Without an etcd binary it prints why and exits.

use std::process::Command;
use std::time::{Duration, Instant};

#[path = "../../keysmith-bench/src/rate.rs"]
mod rate;

use keysmith::sequence::Strategy;
use keysmith_testsupport::etcd::{TempEtcd, etcd_binary};
use rate::{RateReport, allocation_rate};

/// Length of one measurement.
const MEASURE: Duration = Duration::from_millis(2500);

/// Block sizes of the rate table.
const BLOCKS: [i64; 3] = [1, 100, 10_000];

/// Client counts of the rate table.
const CLIENTS: [usize; 2] = [1, 8];

fn main() {
    // `cargo bench` passes `--bench` (and any filter); this bench takes none.
    let began = Instant::now();
    let Some(etcd) = TempEtcd::start() else {
        return;
    };
    let version = etcd_binary()
        .ok()
        .and_then(|b| Command::new(b).arg("--version").output().ok())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "etcd bench: one throwaway node ({version}), default durability; {cpus} CPUs; \
         {:.1} s per measurement",
        MEASURE.as_secs_f64()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime");

    let mut runs: Vec<(Strategy, i64, usize)> = Vec::new();
    for strategy in [Strategy::Optimistic, Strategy::Atomic] {
        for block in BLOCKS {
            for clients in CLIENTS {
                runs.push((strategy, block, clients));
            }
        }
    }
    for clients in CLIENTS {
        runs.push((Strategy::Locked, 100, clients));
    }

    println!();
    println!(
        "## Durable allocation rate (one sequence, every client its own connection and handle)"
    );
    println!();
    println!(
        "| strategy | block | clients | values/s | reservations/s | conflicts / reservation |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let mut reports: Vec<RateReport> = Vec::new();
    for (strategy, block, clients) in runs {
        let url = etcd.url_with_prefix(&format!("bench-{strategy}-{block}-{clients}"));
        match rt.block_on(allocation_rate(&url, block, clients, strategy, MEASURE)) {
            Ok(r) => {
                println!(
                    "| {} | {} | {} | {:.0} | {:.0} | {} |",
                    r.strategy,
                    r.block,
                    r.clients,
                    r.values_per_sec,
                    r.reservations as f64 / r.seconds,
                    per(r.conflicts, r.reservations),
                );
                reports.push(r);
            }
            Err(e) => println!("| {strategy} | {block} | {clients} | error: {e} | | |"),
        }
    }

    println!();
    println!("## Optimistic conflicts, 8 clients on one key (from the runs above)");
    println!();
    println!(
        "| block | reservations | conflicts | conflicts / reservation | put attempts / reservation |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for r in reports
        .iter()
        .filter(|r| r.strategy == Strategy::Optimistic && r.clients == 8 && r.block <= 100)
    {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.block,
            r.reservations,
            r.conflicts,
            per(r.conflicts, r.reservations),
            per(r.conflicts + r.reservations, r.reservations),
        );
    }
    println!();
    println!("total bench time: {:.0} s", began.elapsed().as_secs_f64());
}

/// `a / b` with two decimals, or "-" when nothing was reserved.
fn per(a: u64, b: u64) -> String {
    if b == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

//! Many processes at once, back to back, with default settings: failed runs,
//! values per second, and fairness (the slowest process's share of the
//! values, 1.00 = every process got as many as the mean).
//!
//! The load is the one operators run: `keysmith next orders --count 10` on a
//! sequence with block 20, and `keysmith pool take tickets --count 10` on a
//! pool of 100, each process starting again as soon as it exits. For
//! sequences the default strategy (atomic) runs beside the old default
//! (optimistic), in the same run, as the baseline.
//!
//! `cargo bench -p keysmith-cli --all-features --bench contention`
//! (`KEYSMITH_BENCH_SECS`, default 10, per row; `KEYSMITH_BENCH_STORES`, a
//! comma-separated subset of `sqlite,postgres,etcd`).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::load::{Job, Until, back_to_back};
use common::ok;

fn main() {
    let secs: u64 = std::env::var("KEYSMITH_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let stores =
        std::env::var("KEYSMITH_BENCH_STORES").unwrap_or_else(|_| "sqlite,postgres,etcd".into());
    let until = Until::Elapsed(Duration::from_secs(secs));

    println!("{secs} s per row; each process runs `--count 10` again as soon as it exits\n");
    println!(
        "| store | job | processes | runs | failed runs | values/s | slowest process's share |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");

    let db = common::Db::new();
    let pg = keysmith_testsupport::postgres::TempPostgres::shared();
    #[cfg(feature = "etcd")]
    let etcd = keysmith_testsupport::etcd::EtcdCluster::start(3);
    let mut targets: Vec<(&str, String)> = Vec::new();
    for s in stores.split(',') {
        match s {
            "sqlite" => targets.push(("SQLite", db.url())),
            "postgres" => {
                if let Some(pg) = pg {
                    targets.push((
                        "PostgreSQL",
                        format!("{}?schema=bench_contention", pg.url()),
                    ));
                }
            }
            #[cfg(feature = "etcd")]
            "etcd" => {
                if let Some(c) = &etcd {
                    targets.push(("etcd, 3 nodes", format!("{}/bench", c.url())));
                }
            }
            _ => {}
        }
    }

    for (store, url) in &targets {
        for procs in [4, 8, 32] {
            let jobs: [(&str, Job); 3] = [
                (
                    "next (default: atomic)",
                    Job::Next {
                        count: 10,
                        strategy: None,
                    },
                ),
                (
                    "next --strategy optimistic",
                    Job::Next {
                        count: 10,
                        strategy: Some("optimistic"),
                    },
                ),
                ("pool take", Job::PoolTake { count: 10 }),
            ];
            for (i, (label, job)) in jobs.into_iter().enumerate() {
                let name = format!("c{procs}-{i}");
                if matches!(job, Job::PoolTake { .. }) {
                    ok(url, &["pool", "create", &name, "--size", "100"]);
                } else {
                    ok(url, &["create", &name, "--block", "20"]);
                }
                let r = back_to_back(url, &name, job, procs, until);
                r.assert_unique(label);
                println!(
                    "| {store} | {label} | {procs} | {} | {} | {:.0} | {:.2} |",
                    r.runs(),
                    r.failures.len(),
                    r.values_per_second(),
                    r.slowest_share()
                );
            }
        }
    }
}

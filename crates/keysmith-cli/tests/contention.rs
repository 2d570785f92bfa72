//! With default settings no call fails because of contention while the store
//! is up: 4, 8 and 32 processes at once run `keysmith next orders --count 10`
//! (a sequence with block 20) and `keysmith pool take tickets --count 10`
//! back to back, on SQLite, PostgreSQL, MariaDB (feature `mysql`) and a
//! three-node etcd. Not one run may
//! fail, and no value may repeat.
//!
//! Fairness (the slowest process's share of the values) is measured by
//! `benches/contention.rs`, in BENCHMARKS.md.

mod common;

use common::load::{Job, Until, back_to_back};
use common::ok;

/// Runs per slot: every slot runs this many times, all at once with the others.
const RUNS: usize = 3;

const LOADS: [usize; 3] = [4, 8, 32];

/// The load on the store at `url`: for each process count, a fresh
/// sequence (block 20) and a fresh pool (size 100), every run succeeds.
fn defaults_never_fail(url: &str, store: &str) {
    for procs in LOADS {
        let jobs = [
            (
                "next",
                format!("orders-{procs}"),
                Job::Next {
                    count: 10,
                    strategy: None,
                },
            ),
            (
                "pool take",
                format!("tickets-{procs}"),
                Job::PoolTake { count: 10 },
            ),
        ];
        for (label, name, job) in jobs {
            match job {
                Job::Next { .. } => ok(url, &["create", &name, "--block", "20"]),
                Job::PoolTake { .. } => ok(url, &["pool", "create", &name, "--size", "100"]),
            };
            let r = back_to_back(url, &name, job, procs, Until::Runs(RUNS));
            let what = format!("{store}, {procs} processes, {label}");
            r.assert_unique(&what);
            r.assert_no_failures(&what);
            assert_eq!(r.all.len(), procs * RUNS * 10, "{what}");
            eprintln!(
                "{what}: {} runs, slowest share {:.2}",
                r.runs(),
                r.slowest_share()
            );
        }
    }
}

#[test]
fn sqlite_defaults_never_fail_under_contention() {
    let db = common::Db::new();
    defaults_never_fail(&db.url(), "SQLite");
}

#[test]
fn postgres_defaults_never_fail_under_contention() {
    let Some(server) = keysmith_testsupport::postgres::TempPostgres::shared() else {
        return;
    };
    defaults_never_fail(&format!("{}?schema=contention", server.url()), "PostgreSQL");
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_defaults_never_fail_under_contention() {
    let Some(server) = keysmith_testsupport::mariadb::TempMariaDb::shared() else {
        return;
    };
    defaults_never_fail(&server.fresh_url(), "MariaDB");
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_cluster_defaults_never_fail_under_contention() {
    let Some(cluster) = keysmith_testsupport::etcd::EtcdCluster::start(3) else {
        return;
    };
    defaults_never_fail(&format!("{}/contention", cluster.url()), "etcd (3 nodes)");
}

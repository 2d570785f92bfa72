//! A strict sequence (block 1) keeps time order across processes (issue 26):
//! two `keysmith serve` processes on one store, each with its own strict
//! handle that groups the requests waiting at once into one reservation, and
//! `keysmith next` processes beside them. Clients record when each request
//! was sent and when its answer came (one clock: this test process), and
//! every pair is checked: a value returned before another request was sent
//! is smaller than that request's values. Values are also gap-free and
//! unique (no caller is dropped here).
//!
//! On SQLite, PostgreSQL and etcd (throwaway servers from
//! `keysmith-testsupport`; without their binaries those tests print why and
//! pass, unless `KEYSMITH_REQUIRE_BACKENDS=1`). The SQLite test also plants
//! an inversion in the history it recorded and checks the checker catches it.
//!
//! `cargo test -p keysmith-cli --all-features --test strict_order`

mod common;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::server::{ServerProc, values};
use common::{keysmith, ok};
use keysmith::verify::{TimedCall, check_time_order};
#[cfg(feature = "etcd")]
use keysmith_testsupport::etcd::TempEtcd;
use keysmith_testsupport::postgres::TempPostgres;
use tokio::task::block_in_place;

const SEQ: &str = "invoices";
/// HTTP clients, each one request at a time, over both servers.
const CLIENTS: usize = 8;
const REQUESTS: usize = 30;
/// `keysmith next` processes, one after the other, beside the clients.
const CLI_RUNS: usize = 12;

/// Runs the clients and CLI processes against two servers on `url`; checks
/// the history and returns it.
async fn history_on(url: &str) -> Vec<TimedCall<Instant>> {
    ok(url, &["create", SEQ, "--block", "1"]);
    let servers = [
        ServerProc::start_on(url, &[], &[]).await,
        ServerProc::start_on(url, &[], &[]).await,
    ];
    let bases: Vec<String> = servers.iter().map(|s| s.base().to_owned()).collect();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (bases, calls) = (bases.clone(), calls.clone());
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            for i in 0..REQUESTS {
                let base = &bases[(c + i) % bases.len()];
                let count = if (c + i) % 4 == 0 { 3 } else { 1 };
                let invoked = Instant::now();
                let r = client
                    .post(format!("{base}/v1/sequences/{SEQ}/next?count={count}"))
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success(), "{}", r.status());
                let v = values(&r.json().await.unwrap());
                let completed = Instant::now();
                assert_eq!(v.len(), count, "{v:?}");
                common::assert_increasing(&v, "one answer");
                calls.lock().unwrap().push(TimedCall {
                    invoked,
                    completed,
                    first: v[0],
                    last: *v.last().unwrap(),
                });
            }
        }));
    }
    // `keysmith next` processes: a strict handle each, in processes of
    // their own, while the servers answer the clients.
    let cli = {
        let (url, calls) = (url.to_owned(), calls.clone());
        tokio::task::spawn_blocking(move || {
            for _ in 0..CLI_RUNS {
                let invoked = Instant::now();
                let out = keysmith(&url)
                    .args(["next", SEQ, "--block", "1"])
                    .output()
                    .unwrap();
                let completed = Instant::now();
                assert!(out.status.success(), "{out:?}");
                let v: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
                calls.lock().unwrap().push(TimedCall {
                    invoked,
                    completed,
                    first: v,
                    last: v,
                });
            }
        })
    };
    for t in tasks {
        t.await.unwrap();
    }
    cli.await.unwrap();
    drop(servers);
    let calls = std::mem::take(&mut *calls.lock().unwrap());
    let pairs = check_time_order(&calls).unwrap_or_else(|v| {
        panic!(
            "out of time order: {:?} returned before {:?} was sent",
            calls[v.earlier], calls[v.later]
        )
    });
    let mut all: Vec<i64> = calls.iter().flat_map(|c| c.first..=c.last).collect();
    all.sort_unstable();
    let n = all.len() as i64;
    assert_eq!(all, (1..=n).collect::<Vec<_>>(), "gap-free, none twice");
    eprintln!(
        "{} calls, {n} values, {pairs} ordered pairs checked",
        calls.len()
    );
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_and_cli_processes_on_one_sqlite_file_keep_time_order() {
    let db = common::Db::new();
    let calls = history_on(&db.url()).await;
    // The checker fails on a wrong order: swap the values of two calls of
    // the real history, one of which returned before the other was sent.
    let (a, b) = (0..calls.len())
        .flat_map(|a| (0..calls.len()).map(move |b| (a, b)))
        .find(|&(a, b)| calls[a].completed < calls[b].invoked)
        .expect("some call returned before another was sent");
    let mut planted = calls.clone();
    (planted[a].first, planted[b].first) = (calls[b].first, calls[a].first);
    (planted[a].last, planted[b].last) = (calls[b].last, calls[a].last);
    assert!(
        check_time_order(&planted).is_err(),
        "a planted inversion of calls {a} and {b} was not caught"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_and_cli_processes_on_postgres_keep_time_order() {
    let Some(pg) = block_in_place(TempPostgres::start) else {
        return;
    };
    history_on(&pg.url()).await;
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_and_cli_processes_on_etcd_keep_time_order() {
    let Some(etcd) = block_in_place(TempEtcd::start) else {
        return;
    };
    history_on(&etcd.url()).await;
}

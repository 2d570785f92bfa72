//! Eight `keysmith ids next` processes on one store, SIGKILLed at random
//! moments (chosen by their progress) and restarted, on SQLite, PostgreSQL
//! and etcd: no id is ever printed twice, and each process's ids increase.
//!
//! Worker ids are few (10 for 8 processes) and leases short (1 s), so
//! restarted processes take over the worker ids of killed ones once their
//! leases expire: the store's time floor is what keeps their ids apart.

mod common;

use std::collections::HashSet;
use std::io::Read;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{DEADLINE, Db, assert_increasing, complete_values, drain, keysmith};
use rand::RngExt;

struct Runner {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    reader: JoinHandle<()>,
    want: usize,
}

/// A process asked for up to 60,000 ids, killed once it printed a random
/// part of them (ids come fast: an unbounded one would fill memory).
fn spawn(url: &str) -> Runner {
    let want_ids = rand::rng().random_range(1..30_000);
    let mut child = keysmith(url)
        .args([
            "ids",
            "next",
            "--count",
            &(2 * want_ids).to_string(),
            "--workers",
            "10",
            "--ttl-ms",
            "1000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, reader) = drain(child.stdout.take().unwrap());
    Runner {
        child,
        out,
        reader,
        // Ids are 18 or 19 digits and a newline.
        want: want_ids * 19,
    }
}

/// Runs 8 processes until `kills` of them were SIGKILLed, restarting each
/// one killed (or one that found every worker id held). Checks every id.
fn ids_survive_sigkills(url: &str, kills: usize) {
    // One store at a time: 8 processes each are plenty for a small machine.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut seen = HashSet::new();
    // How many processes printed ids under each worker id (snowflake
    // layout: 10 worker bits above 12 sequence bits).
    let mut holders = [0usize; 1024];
    let mut record = |who: &str, bytes: &[u8]| {
        let ids = complete_values(bytes);
        assert_increasing(&ids, who);
        let mut workers = HashSet::new();
        for id in ids {
            assert!(seen.insert(id), "{who}: id {id} printed twice");
            workers.insert((id >> 12) & 1023);
        }
        for w in workers {
            holders[w as usize] += 1;
        }
    };
    let mut runners: Vec<Runner> = (0..8).map(|_| spawn(url)).collect();
    let (mut killed, mut full) = (0, 0);
    let give_up = Instant::now() + DEADLINE;
    while killed < kills {
        assert!(Instant::now() < give_up, "processes made no progress");
        for (i, r) in runners.iter_mut().enumerate() {
            if r.out.lock().unwrap().len() >= r.want {
                r.child.kill().unwrap(); // SIGKILL
                r.child.wait().unwrap();
                killed += 1;
            } else if let Some(status) = r.child.try_wait().unwrap() {
                let mut err = String::new();
                r.child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                // Done before its kill, or every worker id held by live
                // or not yet expired leases (the clear error): a restart.
                if !status.success() {
                    assert!(
                        err.contains("worker ids of group"),
                        "process {i} failed ({status}): {err}"
                    );
                    full += 1;
                }
            } else {
                continue;
            }
            let old = std::mem::replace(r, spawn(url));
            old.reader.join().unwrap();
            record(&format!("process {i}"), &old.out.lock().unwrap());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    for (i, mut r) in runners.into_iter().enumerate() {
        r.child.kill().unwrap();
        r.child.wait().unwrap();
        r.reader.join().unwrap();
        record(&format!("process {i}"), &r.out.lock().unwrap());
    }
    assert!(seen.len() > 1000, "only {} ids", seen.len());
    assert!(
        holders[10..].iter().all(|&n| n == 0),
        "a worker id outside --workers 10"
    );
    // More processes than worker ids ran: worker ids were taken over.
    let reused = holders.iter().filter(|&&n| n > 1).count();
    assert!(
        reused > 0,
        "no worker id was held twice: {:?}",
        &holders[..10]
    );
    eprintln!(
        "{} ids, {killed} kills, {full} restarts on all-taken, holders per worker id {:?}",
        seen.len(),
        &holders[..10]
    );
}

#[test]
fn sqlite_ids_survive_sigkills() {
    let db = Db::new();
    ids_survive_sigkills(&db.url(), 24);
}

#[test]
fn postgres_ids_survive_sigkills() {
    let Some(pg) = keysmith_testsupport::postgres::TempPostgres::shared() else {
        return;
    };
    ids_survive_sigkills(&format!("{}?schema=ids_procs", pg.url()), 24);
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_ids_survive_sigkills() {
    let Some(etcd) = keysmith_testsupport::etcd::TempEtcd::shared() else {
        return;
    };
    let url = etcd.url_with_prefix(&format!("ids-{:016x}", rand::random::<u64>()));
    ids_survive_sigkills(&url, 24);
}

//! Leader-ordered sequences through failover (issue 41): three `keysmith
//! serve` processes on one store, clients calling all three and following a
//! 421 `not_leader` to the leader it names (as the clients do). Under load,
//! the leader is SIGKILLed; then the next leader is SIGSTOPped until another
//! server leads, and SIGCONTed (it must not issue again: its term is over).
//! Every call is written down (invoke, complete, values) and the whole
//! history goes to `keysmith::verify::history::check` with real-time order:
//! 0 duplicates, 0 order violations. Calls whose outcome is unknown (a
//! timeout against a paused server) are left out, as the checker asks. Each
//! scenario prints one `leader failover:` line with the time from the kill
//! to the first value from the new leader.
//!
//! On SQLite (several processes on one file), PostgreSQL and etcd
//! (throwaway servers; without their binaries those tests print why and
//! pass, unless `KEYSMITH_REQUIRE_BACKENDS=1`).
//!
//! `cargo test -p keysmith-cli --all-features --test leader_failover -- --nocapture`

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::server::{ServerProc, values};
use common::{Db, ok};
use keysmith::verify::history::{History, Order};
#[cfg(feature = "etcd")]
use keysmith_testsupport::etcd::TempEtcd;
use keysmith_testsupport::postgres::TempPostgres;
use tokio::task::block_in_place;

const SEQ: &str = "ordered";
const CLIENTS: u32 = 6;
/// A client's bound on one call: past it the outcome is unknown (left out).
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// A bound on a hang, not a performance threshold.
const DEADLINE: Duration = Duration::from_secs(120);

/// What the clients share with the scenario.
struct Shared {
    bases: Vec<String>,
    /// Servers the scenario took away (killed): not called any more.
    gone: Mutex<Vec<bool>>,
    history: Mutex<History>,
    /// Successful calls so far, and the base of the server that answered
    /// the last one (the leader), with when.
    ok: AtomicU64,
    last_leader: Mutex<Option<(String, Instant)>>,
    stop: AtomicBool,
}

/// One call: to `base`, following one 421 to the leader it names.
/// `Some(values, answered_by)`; `None` for a refusal (503 and the like,
/// no values); `Err(())` when the outcome is unknown.
async fn call(client: &reqwest::Client, base: &str) -> Result<Option<(Vec<i64>, String)>, ()> {
    let mut base = base.to_owned();
    for _ in 0..2 {
        let r = client
            .post(format!("{base}/v1/sequences/{SEQ}/next"))
            .send()
            .await;
        let r = match r {
            // Refused before sending (nothing listens): no values for sure.
            Err(e) if e.is_connect() => return Ok(None),
            Err(_) => return Err(()),
            Ok(r) => r,
        };
        match r.status().as_u16() {
            200 => {
                let v = values(&r.json().await.map_err(|_| ())?);
                return Ok(Some((v, base)));
            }
            421 => {
                let leader = r
                    .headers()
                    .get("keysmith-leader")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
                    .expect("a 421 names the leader");
                base = leader;
            }
            503 => return Ok(None),
            other => panic!("unexpected status {other}: {:?}", r.text().await),
        }
    }
    Ok(None)
}

fn spawn_clients(shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    (0..CLIENTS)
        .map(|c| {
            let shared = shared.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::builder()
                    .timeout(CALL_TIMEOUT)
                    .build()
                    .unwrap();
                let mut i = c as usize;
                while !shared.stop.load(SeqCst) {
                    i += 1;
                    let n = shared.bases.len();
                    let pick = (0..n)
                        .map(|k| (i + k) % n)
                        .find(|&k| !shared.gone.lock().unwrap()[k])
                        .expect("a server left");
                    let invoked = Instant::now();
                    let r = call(&client, &shared.bases[pick]).await;
                    let completed = Instant::now();
                    match r {
                        Ok(Some((v, by))) => {
                            shared
                                .history
                                .lock()
                                .unwrap()
                                .record(c, invoked, completed, v);
                            shared.ok.fetch_add(1, SeqCst);
                            let mut last = shared.last_leader.lock().unwrap();
                            if last.is_none() {
                                *last = Some((by, completed));
                            } else if let Some(l) = last.as_mut() {
                                l.0 = by;
                            }
                        }
                        Ok(None) => {
                            shared.history.lock().unwrap().record(
                                c,
                                invoked,
                                completed,
                                Vec::new(),
                            );
                            // Paces retries while there is no leader.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        Err(()) => {}
                    }
                }
            })
        })
        .collect()
}

/// Waits until `more` calls succeeded after now.
async fn until_more(shared: &Shared, more: u64) {
    let target = shared.ok.load(SeqCst) + more;
    let give_up = Instant::now() + DEADLINE;
    while shared.ok.load(SeqCst) < target {
        assert!(Instant::now() < give_up, "no progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until a server other than `not` answered with values (the scenario
/// cleared `last_leader` when it took `not` away); returns it and when its
/// first value came.
async fn new_leader(shared: &Shared, not: &str) -> (String, Instant) {
    let give_up = Instant::now() + DEADLINE;
    loop {
        {
            let mut last = shared.last_leader.lock().unwrap();
            match last.clone() {
                // An answer that left before the fault, recorded after.
                Some((b, _)) if b == not => *last = None,
                Some((b, at)) => return (b, at),
                None => {}
            }
        }
        assert!(Instant::now() < give_up, "no new leader");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn scenario(url: &str, label: &str) {
    ok(
        url,
        &["create", SEQ, "--order", "leader", "--block", "1000"],
    );
    let mut servers = [
        ServerProc::start_on(url, &[], &[]).await,
        ServerProc::start_on(url, &[], &[]).await,
        ServerProc::start_on(url, &[], &[]).await,
    ];
    let bases: Vec<String> = servers.iter().map(|s| s.base().to_owned()).collect();
    let shared = Arc::new(Shared {
        gone: Mutex::new(vec![false; bases.len()]),
        bases,
        history: Mutex::new(History::new()),
        ok: AtomicU64::new(0),
        last_leader: Mutex::new(None),
        stop: AtomicBool::new(false),
    });
    let clients = spawn_clients(&shared);
    until_more(&shared, 300).await;

    // SIGKILL the leader.
    let leader = shared.last_leader.lock().unwrap().clone().unwrap().0;
    let li = shared.bases.iter().position(|b| *b == leader).unwrap();
    shared.gone.lock().unwrap()[li] = true;
    let killed_at = Instant::now();
    servers[li].sigkill();
    *shared.last_leader.lock().unwrap() = None;
    let (second, first_at) = new_leader(&shared, &leader).await;
    let failover = first_at.saturating_duration_since(killed_at);
    until_more(&shared, 300).await;

    // SIGSTOP the new leader until another server leads, then SIGCONT it.
    let si = shared.bases.iter().position(|b| *b == second).unwrap();
    let stopped_at = Instant::now();
    servers[si].signal(libc::SIGSTOP);
    *shared.last_leader.lock().unwrap() = None;
    let (third, third_at) = new_leader(&shared, &second).await;
    assert_ne!(third, leader, "the killed server cannot lead");
    servers[si].signal(libc::SIGCONT);
    let paused_failover = third_at.saturating_duration_since(stopped_at);
    until_more(&shared, 300).await;

    shared.stop.store(true, SeqCst);
    for c in clients {
        c.await.unwrap();
    }
    let history = std::mem::take(&mut *shared.history.lock().unwrap());
    let checked = history
        .check(Order::RealTime)
        .unwrap_or_else(|v| panic!("{label}: {v:?}"));
    println!(
        "leader failover: {label}: {} calls, {:?}; SIGKILL -> first value from the new leader {} ms; SIGSTOP -> {} ms",
        history.ops().len(),
        checked,
        failover.as_millis(),
        paused_failover.as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_failover_on_sqlite_processes() {
    let db = Db::new();
    scenario(&db.url(), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_failover_on_postgres() {
    let Some(pg) = block_in_place(TempPostgres::start) else {
        return;
    };
    scenario(&pg.url(), "postgres").await;
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_failover_on_etcd() {
    let Some(etcd) = block_in_place(TempEtcd::start) else {
        return;
    };
    scenario(&etcd.url(), "etcd").await;
}

/// `keysmith next` on a leader-ordered sequence leads for its own call when
/// no server does (and releases the lease as it exits), and names the
/// server that leads otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_next_leads_alone_and_names_the_leading_server() {
    let db = Db::new();
    db.ok(&["create", SEQ, "--order", "leader"]);
    assert!(db.ok(&["show", SEQ]).contains("order:     leader"));
    let first: Vec<i64> = db
        .ok(&["next", SEQ, "--count", "3"])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(first, vec![1, 2, 3]);
    // A second process leads at once (the first released its lease), above
    // everything the first reserved.
    let second: i64 = db.ok(&["next", SEQ]).trim().parse().unwrap();
    assert!(second > 3, "{second}");

    let server = ServerProc::start(&db, &[], &[]).await;
    let r = reqwest::Client::new()
        .post(server.url(&format!("/v1/sequences/{SEQ}/next")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v = values(&r.json().await.unwrap());
    assert!(v[0] > second, "{v:?}");
    let (code, err) = block_in_place(|| db.fails(&["next", SEQ]));
    assert_ne!(code, 0);
    assert!(err.contains(server.base()), "{err}");
    assert!(err.contains("leader-ordered"), "{err}");

    // A bad order is a usage error and creates nothing.
    let (code, err) = db.fails(&["create", "x", "--order", "fastest"]);
    assert_eq!(code, 2, "{err}");
    db.fails(&["show", "x"]);
}

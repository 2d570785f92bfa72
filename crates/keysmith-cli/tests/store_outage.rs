//! A store outage under load: `keysmith serve` on PostgreSQL (the server
//! stopped), on MariaDB (the server killed; feature `mysql`) and on a
//! three-node etcd cluster (two nodes killed) for ten seconds, then started
//! again, each through its
//! `keysmith_testsupport::processes::CrashableServer`.
//!
//! What must hold: the service keeps answering from the blocks it has cached
//! (every value cached when the store went down is served), then answers 503
//! with `Retry-After`; nothing else (no 500, no hang); it recovers without a
//! restart; and no value is handed out twice, before, during or after.
//!
//! Each run prints one `outage:` line with its figures (BENCHMARKS.md):
//! `cargo test -p keysmith-cli --all-features --test store_outage -- --nocapture`

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::server::{SERVER_DEADLINE, ServerProc};
use keysmith_testsupport::processes::{CrashableServer, Postgres, ProcessBackend};
use serde_json::Value;

/// How long the store stays down: the scenario, not a synchronisation.
const OUTAGE: Duration = Duration::from_secs(10);
/// Clients hammering `next` at once.
const CLIENTS: usize = 8;
/// Successful requests wanted before the outage and after the recovery.
const WARM: usize = 500;

/// One answered request.
#[derive(Debug, Clone)]
struct Outcome {
    sent: Instant,
    done: Instant,
    status: u16,
    retry_after: bool,
    code: String,
    values: Vec<i64>,
}

async fn request(client: &reqwest::Client, url: &str) -> Outcome {
    let sent = Instant::now();
    let res = client
        .post(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("request failed or hung past the client's bound: {e}"));
    let status = res.status().as_u16();
    let retry_after = res.headers().contains_key("retry-after");
    let body: Value = res.json().await.unwrap_or(Value::Null);
    let values = body["values"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_i64().unwrap()).collect())
        .unwrap_or_default();
    Outcome {
        sent,
        done: Instant::now(),
        status,
        retry_after,
        code: body["error"]["code"].as_str().unwrap_or("").to_owned(),
        values,
    }
}

/// [`CLIENTS`] tasks sending `next` back to back until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<Outcome>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(client: &reqwest::Client, url: &str, log: &Arc<Mutex<Vec<Outcome>>>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let tasks = (0..CLIENTS)
            .map(|_| {
                let (client, url) = (client.clone(), url.to_owned());
                let (stop, ok, log) = (stop.clone(), ok.clone(), log.clone());
                tokio::spawn(async move {
                    while !stop.load(SeqCst) {
                        let o = request(&client, &url).await;
                        if o.status == 200 {
                            ok.fetch_add(1, SeqCst);
                        }
                        log.lock().unwrap().push(o);
                    }
                })
            })
            .collect();
        Load {
            stop,
            ok,
            log: log.clone(),
            tasks,
        }
    }

    /// Waits until `n` requests of this load succeeded (within the deadline).
    async fn until_ok(&self, n: usize, what: &str) {
        let until = Instant::now() + SERVER_DEADLINE;
        while self.ok.load(SeqCst) < n {
            assert!(
                Instant::now() < until,
                "{what}: {} of {n} succeeded",
                self.ok.load(SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the clients and waits until every request in flight is answered.
    async fn stop(self) {
        self.stop.store(true, SeqCst);
        for t in self.tasks {
            t.await.unwrap();
        }
        drop(self.log);
    }
}

/// The outage scenario on `store`, whose server (its
/// [`CrashableServer`]) is crashed for [`OUTAGE`] and started again.
async fn store_outage(what: &str, store: &dyn ProcessBackend) {
    let server = store
        .server()
        .expect("the outage needs a server of the test's own");
    let url = store.fresh_url();
    common::ok(&url, &["create", "s"]);
    // A cap on adaptive blocks (default 10 000) so that the cache runs out
    // within the outage on a slow machine too; otherwise the defaults.
    let srv = ServerProc::start_on(&url, &["--block-max", "1000"], &[]).await;
    let next = srv.url("/v1/sequences/s/next");
    let client = reqwest::Client::builder()
        .timeout(SERVER_DEADLINE)
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));

    let load = Load::start(&client, &next, &log);
    load.until_ok(WARM, "before the outage").await;
    load.stop().await;
    let served_before: i64 = log
        .lock()
        .unwrap()
        .iter()
        .flat_map(|o| o.values.iter().copied())
        .max()
        .unwrap();
    // What the server holds in its cache: reserved in the store, not yet served.
    let reserved_before = reserved(&url).await;
    let cached = reserved_before - served_before;

    let down_at = Instant::now();
    tokio::task::block_in_place(|| server.crash());
    // One client at a time first: every cached value comes out, then a 503.
    let mut probe = Vec::new();
    loop {
        let o = request(&client, &next).await;
        let status = o.status;
        probe.push(o);
        if status != 200 || down_at.elapsed() >= OUTAGE {
            break;
        }
    }
    let served_from_cache = probe.iter().filter(|o| o.status == 200).count() as i64;
    log.lock().unwrap().extend(probe);
    // Then the full load for the rest of the outage.
    let load = Load::start(&client, &next, &log);
    tokio::time::sleep(OUTAGE.saturating_sub(down_at.elapsed())).await;
    let up_from = Instant::now();
    tokio::task::block_in_place(|| server.restart());
    let up_at = Instant::now();
    let recovered = Load::start(&client, &next, &log);
    load.stop().await;
    recovered.until_ok(WARM, "after the store came back").await;
    recovered.stop().await;
    srv.signal(0); // the same process: it recovered without a restart

    let log = log.lock().unwrap().clone();
    let mut seen = HashSet::new();
    for o in &log {
        assert!(
            o.status == 200 || (o.status == 503 && o.retry_after),
            "{what}: only values or 503 with Retry-After: {o:?}"
        );
        for v in &o.values {
            assert!(seen.insert(*v), "{what}: {v} was handed out twice");
        }
    }
    assert!(
        served_from_cache >= cached,
        "{what}: {cached} values were cached when the store went down, {served_from_cache} served"
    );
    let during: Vec<&Outcome> = log
        .iter()
        .filter(|o| o.sent >= down_at && o.done < up_from)
        .collect();
    let ok_during = during.iter().filter(|o| o.status == 200).count();
    let refused = during.len() - ok_during;
    assert!(
        refused > 0,
        "{what}: the cache never ran out: no 503 in the outage"
    );
    let first_503 = during
        .iter()
        .filter(|o| o.status == 503)
        .map(|o| o.done)
        .min()
        .unwrap();
    let back = log
        .iter()
        .filter(|o| o.sent >= up_at && o.status == 200)
        .map(|o| o.done)
        .min()
        .unwrap();
    let codes: HashSet<&str> = during
        .iter()
        .filter(|o| o.status == 503)
        .map(|o| o.code.as_str())
        .collect();
    let slowest_503 = during
        .iter()
        .filter(|o| o.status == 503)
        .map(|o| o.done - o.sent)
        .max()
        .unwrap();
    let last = reserved(&url).await;
    assert!(
        seen.iter().all(|v| *v <= last),
        "{what}: a value above what the store reserved"
    );
    println!(
        "outage: {what}: {} s down; cached when it went down: {cached} values; \
         during: {ok_during} requests answered with a value, {refused} with 503 \
         (codes {codes:?}, slowest {:.2} s); first 503 {:.2} s after the stop; \
         first value {:.2} s after the store was back; {} values in all, none twice",
        (up_from - down_at).as_secs(),
        slowest_503.as_secs_f64(),
        (first_503 - down_at).as_secs_f64(),
        (back - up_at).as_secs_f64(),
        seen.len(),
    );
}

/// The largest value the store has reserved of `s`.
async fn reserved(url: &str) -> i64 {
    let store = keysmith::store::open(url).await.unwrap();
    let row = store.read_sequence("s").await.unwrap().unwrap();
    row.next - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_outage_under_load() {
    // Its own server: the test stops it (`pg_ctl stop -m immediate`).
    let Some(pg) = Postgres::start() else {
        return;
    };
    store_outage("postgres", &pg).await;
}

/// A three-node etcd cluster whose outage is two nodes killed with SIGKILL
/// (the majority: no quorum), and its end their restart.
#[cfg(feature = "etcd")]
struct EtcdMajority(Mutex<keysmith_testsupport::etcd::EtcdCluster>);

#[cfg(feature = "etcd")]
impl EtcdMajority {
    fn cluster(&self) -> std::sync::MutexGuard<'_, keysmith_testsupport::etcd::EtcdCluster> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(feature = "etcd")]
impl ProcessBackend for EtcdMajority {
    fn name(&self) -> &str {
        "etcd, 2 of 3 nodes"
    }
    fn fresh_url(&self) -> String {
        format!(
            "{}/outage-{:016x}",
            self.cluster().url(),
            rand::random::<u64>()
        )
    }
    fn server(&self) -> Option<&dyn CrashableServer> {
        Some(self)
    }
}

#[cfg(feature = "etcd")]
impl CrashableServer for EtcdMajority {
    fn crash(&self) {
        let mut cluster = self.cluster();
        cluster.kill(1);
        cluster.kill(2);
    }
    fn restart(&self) {
        let mut cluster = self.cluster();
        cluster.restart(1);
        cluster.restart(2);
    }
    /// The first killed node's (the store URL names all three).
    fn port(&self) -> u16 {
        let endpoint = self.cluster().endpoints().remove(1);
        endpoint.rsplit(':').next().unwrap().parse().unwrap()
    }
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_majority_outage_under_load() {
    let Some(cluster) = keysmith_testsupport::etcd::EtcdCluster::start(3) else {
        return;
    };
    store_outage("etcd, 2 of 3 nodes", &EtcdMajority(Mutex::new(cluster))).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_outage_under_load() {
    // Its own server: the test kills it (SIGKILL) and starts it again.
    let Some(db) = keysmith_testsupport::processes::MariaDb::start() else {
        return;
    };
    store_outage("mysql (MariaDB)", &db).await;
}

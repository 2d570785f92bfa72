//! Several `keysmith serve` processes over one store, the way they run behind
//! a load balancer: three servers over one PostgreSQL, three over one
//! MariaDB (feature `mysql`), and three over a three-node etcd. Clients spread requests over all servers round-robin and,
//! on a refused or cut connection or a 503, send the same request to the next
//! server. Mid-run one server is killed with SIGKILL and started again (on a
//! new port, which the clients learn), and on etcd one member is killed and
//! restarted as well.
//!
//! No value is ever handed out twice (sequences or pool), each client's
//! values of a cached sequence increase per server, those of a strict
//! sequence (block 1) increase whichever server answers, every request a
//! client made succeeded on some server, and values kept coming after every
//! kill.
//!
//! The servers are throwaway ones from `keysmith-testsupport`; without their
//! binaries these tests print why and pass, unless `KEYSMITH_REQUIRE_BACKENDS=1`.
//!
//! `cargo test -p keysmith-cli --all-features --test multi_server`

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use common::server::{ServerProc, values};
use common::{DEADLINE, assert_increasing, ok};
#[cfg(feature = "etcd")]
use keysmith_testsupport::etcd::EtcdCluster;
use keysmith_testsupport::pool_holes;
use keysmith_testsupport::postgres::TempPostgres;
use tokio::task::{JoinHandle, block_in_place};

/// Servers over the one store.
const SERVERS: usize = 3;
/// Concurrent clients; each sends one request at a time.
const CLIENTS: usize = 6;
/// A cached sequence with small blocks, kept small (`--fixed-blocks`) on
/// servers 0 and 1: they go back to the store often, so reservations of the
/// servers interleave all along the run, and optimistic reservations
/// collide. Server 2 runs with adaptive blocks, the default.
const SEQ: &str = "orders";
const SEQ_BLOCK: &str = "10";

/// Options of server `i` (see [`SEQ`]).
fn server_args(i: usize) -> &'static [&'static str] {
    if i == 2 { &[] } else { &["--fixed-blocks"] }
}
/// A strict sequence (block 1): every value is a reservation of its own.
const STRICT: &str = "invoices";
const POOL: &str = "tickets";
const POOL_START: i64 = 1;
const POOL_SIZE: i64 = 40;
/// What the clients must collect in each phase of a run, by [`Kind`], before
/// the next kill or restart.
const STEP: [usize; 3] = [1000, 100, 150];
/// Requests a restarted server must have answered before the run goes on:
/// the clients found its new address.
const RESTARTED_SERVED: usize = 20;
/// What each client asks for in turn, and how many.
const REQUESTS: [(Kind, usize); 7] = [
    (Kind::Seq, 1),
    (Kind::Seq, 10),
    (Kind::Pool, 1),
    (Kind::Strict, 1),
    (Kind::Seq, 3),
    (Kind::Pool, 2),
    (Kind::Strict, 2),
];

/// What a request asks for; also the index of its counts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Seq = 0,
    Strict = 1,
    Pool = 2,
}

impl Kind {
    fn path(self, count: usize) -> String {
        match self {
            Kind::Seq => format!("/v1/sequences/{SEQ}/next?count={count}"),
            Kind::Strict => format!("/v1/sequences/{STRICT}/next?count={count}"),
            Kind::Pool => format!("/v1/pools/{POOL}/next?count={count}"),
        }
    }
}

/// Counts the clients update as they go; the test waits on them.
#[derive(Default)]
struct Progress {
    /// Values collected, by [`Kind`].
    got: [AtomicUsize; 3],
    /// Requests answered, per server slot.
    served: [AtomicUsize; SERVERS],
    /// 503 answers (contention, store unavailable, request timeout).
    unavailable: AtomicUsize,
    /// Refused connections (a dead server's port).
    refused: AtomicUsize,
    /// Other connection errors: a request or answer cut off (a server killed
    /// while it had the request).
    cut: AtomicUsize,
}

/// What the clients share with the test: the servers' addresses (the load
/// balancer's configuration), the stop flag and the progress counts.
struct Shared {
    addrs: RwLock<Vec<String>>,
    stop: AtomicBool,
    progress: Progress,
}

/// What one client saw.
#[derive(Default)]
struct ClientLog {
    /// Values collected, by [`Kind`].
    got: [Vec<i64>; 3],
    requests: usize,
    /// Requests that no server answered with values before the deadline.
    failures: Vec<String>,
}

/// Why one attempt of a request did not bring values.
enum Failure {
    /// A 503 or a connection error: try the next server.
    Retry(String),
    /// Anything else: the request failed.
    Fatal(String),
}

async fn attempt(http: &reqwest::Client, url: &str, p: &Progress) -> Result<Vec<i64>, Failure> {
    let connection = |e: reqwest::Error| {
        let count = if e.is_connect() { &p.refused } else { &p.cut };
        count.fetch_add(1, SeqCst);
        Failure::Retry(format!("{url}: {e}"))
    };
    let res = http.post(url).send().await.map_err(connection)?;
    let status = res.status();
    // A server killed mid-answer cuts the body: its values are lost, a gap.
    let body = res.text().await.map_err(connection)?;
    match status.as_u16() {
        200 => match serde_json::from_str(&body) {
            Ok(v) => Ok(values(&v)),
            Err(e) => Err(Failure::Fatal(format!("{url}: 200 with {body:?}: {e}"))),
        },
        503 => {
            p.unavailable.fetch_add(1, SeqCst);
            Err(Failure::Retry(format!("{url}: 503 {body}")))
        }
        _ => Err(Failure::Fatal(format!("{url}: {status} {body}"))),
    }
}

/// Sends requests until told to stop, one at a time, each to the next server
/// in turn; a request that fails with a 503 or a connection error goes to the
/// next server, again and again until [`DEADLINE`].
async fn client(c: usize, shared: Arc<Shared>) -> ClientLog {
    let http = reqwest::Client::builder()
        // A bound on a hang (the server's own request timeout is 10 s).
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let p = &shared.progress;
    let mut log = ClientLog::default();
    // The last cached-sequence value each server gave this client, by
    // address: a restarted server has a new one (and a new handle).
    let mut last: HashMap<String, i64> = HashMap::new();
    // The last strict value this client got, from any server.
    let mut last_strict = None;
    let mut slot = c % SERVERS;
    let mut i = c;
    while !shared.stop.load(SeqCst) {
        let (kind, count) = REQUESTS[i % REQUESTS.len()];
        i += 1;
        let path = kind.path(count);
        let give_up = Instant::now() + DEADLINE;
        let mut failed = 0usize;
        let outcome = loop {
            let (this, base) = (slot, shared.addrs.read().unwrap()[slot].clone());
            slot = (slot + 1) % SERVERS;
            match attempt(&http, &format!("{base}{path}"), p).await {
                Ok(v) => break Ok((this, base, v)),
                Err(Failure::Fatal(why)) => break Err(why),
                Err(Failure::Retry(why)) => {
                    if Instant::now() > give_up {
                        break Err(format!("no server answered in {DEADLINE:?}; last: {why}"));
                    }
                    failed += 1;
                    if failed.is_multiple_of(SERVERS) {
                        // Every server failed it once (no quorum, say): a
                        // short pause before the next round, not a hot loop.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        };
        let (this, base, v) = match outcome {
            Ok(ok) => ok,
            Err(why) => {
                log.failures.push(format!("client {c}: POST {path}: {why}"));
                continue;
            }
        };
        assert_eq!(v.len(), count, "client {c}: {path} from {base}: {v:?}");
        match kind {
            Kind::Seq => {
                let who = format!("client {c}, server {base}");
                assert_increasing(&v, &who);
                if let Some(&l) = last.get(&base) {
                    assert!(v[0] > l, "{who}: {l}, then {}", v[0]);
                }
                last.insert(base, v[count - 1]);
            }
            Kind::Strict => {
                // Strict values follow time order, whichever server answers.
                let who = format!("client {c}, {STRICT} from server {base}");
                assert_increasing(&v, &who);
                if let Some(l) = last_strict {
                    assert!(v[0] > l, "{who}: {l}, then {}", v[0]);
                }
                last_strict = Some(v[count - 1]);
            }
            Kind::Pool => {}
        }
        log.requests += 1;
        p.served[this].fetch_add(1, SeqCst);
        p.got[kind as usize].fetch_add(count, SeqCst);
        log.got[kind as usize].extend(v);
    }
    log
}

/// One run: the servers over one store, the clients, and what each phase
/// collected.
struct Run {
    url: String,
    shared: Arc<Shared>,
    servers: Vec<ServerProc>,
    clients: Vec<JoinHandle<ClientLog>>,
    /// What the clients had collected when the last phase ended, by [`Kind`].
    mark: [usize; 3],
    /// What each phase collected, by [`Kind`].
    phases: Vec<(String, [usize; 3])>,
}

impl Run {
    /// Creates the sequences and the pool, starts the servers and the clients.
    async fn start(url: String) -> Run {
        ok(&url, &["create", SEQ, "--block", SEQ_BLOCK]);
        ok(&url, &["create", STRICT, "--block", "1"]);
        let (start, size) = (POOL_START.to_string(), POOL_SIZE.to_string());
        ok(
            &url,
            &["pool", "create", POOL, "--size", &size, "--start", &start],
        );
        let mut servers = Vec::new();
        for i in 0..SERVERS {
            servers.push(ServerProc::start_on(&url, server_args(i), &[]).await);
        }
        let shared = Arc::new(Shared {
            addrs: RwLock::new(servers.iter().map(|s| s.base().to_owned()).collect()),
            stop: AtomicBool::new(false),
            progress: Progress::default(),
        });
        let clients = (0..CLIENTS)
            .map(|c| tokio::spawn(client(c, shared.clone())))
            .collect();
        Run {
            url,
            shared,
            servers,
            clients,
            mark: [0; 3],
            phases: Vec::new(),
        }
    }

    /// Waits until `done` holds (polling the clients' counts), failing the
    /// test after [`DEADLINE`] or when a client stopped (its panic is raised
    /// here).
    async fn wait_for(&mut self, what: &str, done: impl Fn(&Progress) -> bool) {
        let give_up = Instant::now() + DEADLINE;
        while !done(&self.shared.progress) {
            if let Some(c) = self.clients.iter().position(|c| c.is_finished()) {
                match self.clients.swap_remove(c).await {
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    other => panic!("a client stopped early ({:?})", other.err()),
                }
            }
            assert!(Instant::now() < give_up, "{what}: not within {DEADLINE:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the clients collected [`STEP`] more values of each kind
    /// than when the last phase ended.
    async fn phase(&mut self, what: &str) {
        let mark = self.mark;
        self.wait_for(what, |p| {
            (0..3).all(|k| p.got[k].load(SeqCst) >= mark[k] + STEP[k])
        })
        .await;
        let now = self.shared.progress.got.each_ref().map(|g| g.load(SeqCst));
        self.phases
            .push((what.to_owned(), [0, 1, 2].map(|k| now[k] - mark[k])));
        self.mark = now;
    }

    /// SIGKILLs server `i` under load, and waits until clients ran into it
    /// (and so retried elsewhere).
    async fn kill_server(&mut self, i: usize) {
        let before = self.shared.progress.refused.load(SeqCst);
        block_in_place(|| self.servers[i].sigkill());
        self.wait_for(&format!("clients notice server {i} is gone"), |p| {
            p.refused.load(SeqCst) > before
        })
        .await;
    }

    /// Starts server `i` again (on a new port), tells the clients its new
    /// address, and waits until it has answered some of their requests.
    async fn restart_server(&mut self, i: usize) {
        let srv = ServerProc::start_on(&self.url, server_args(i), &[]).await;
        let before = self.shared.progress.served[i].load(SeqCst);
        self.shared.addrs.write().unwrap()[i] = srv.base().to_owned();
        self.servers[i] = srv;
        self.wait_for(&format!("clients use the restarted server {i}"), |p| {
            p.served[i].load(SeqCst) >= before + RESTARTED_SERVED
        })
        .await;
    }

    /// Stops the clients and checks everything they collected.
    async fn finish(mut self) {
        self.shared.stop.store(true, SeqCst);
        let mut logs = Vec::new();
        for c in std::mem::take(&mut self.clients) {
            match c.await {
                Ok(log) => logs.push(log),
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        let failures: Vec<&str> = logs
            .iter()
            .flat_map(|l| l.failures.iter().map(String::as_str))
            .collect();
        assert!(
            failures.is_empty(),
            "{} requests failed on every server:\n{}",
            failures.len(),
            failures.join("\n")
        );

        // Every value of a kind, checked unique.
        let all = |k: Kind| -> Vec<i64> {
            let all: Vec<i64> = logs
                .iter()
                .flat_map(|l| l.got[k as usize].iter().copied())
                .collect();
            let mut seen = HashSet::new();
            for &v in &all {
                assert!(seen.insert(v), "{k:?}: {v} handed out twice");
            }
            all
        };
        for (k, name) in [(Kind::Seq, SEQ), (Kind::Strict, STRICT)] {
            let max = all(k).into_iter().max().unwrap();
            let after: i64 = ok(&self.url, &["next", name]).trim().parse().unwrap();
            assert!(after > max, "{name} resumed at {after}, below {max}");
        }
        let taken = all(Kind::Pool);
        let members: Vec<i64> =
            serde_json::from_str(&ok(&self.url, &["--json", "pool", "members", POOL])).unwrap();
        // Also: no taken number is still a member, the pool holds one member
        // per slot, and every taken number lies below its slot's member.
        let holes = pool_holes(POOL_START, POOL_SIZE, &taken, &members);

        let p = &self.shared.progress;
        let requests: usize = logs.iter().map(|l| l.requests).sum();
        let [seq, strict, pool] = self.mark;
        eprintln!(
            "{seq} cached and {strict} strict sequence values and {pool} pool numbers in \
             {requests} requests, all answered; retried on the next server after {} 503s, \
             {} refused connections and {} cut ones; {} pool numbers lost (taken, answer lost). \
             Phases (cached, strict, pool):",
            p.unavailable.load(SeqCst),
            p.refused.load(SeqCst),
            p.cut.load(SeqCst),
            holes.len(),
        );
        for (what, [seq, strict, pool]) in &self.phases {
            eprintln!("  {what}: {seq}, {strict}, {pool}");
        }
    }
}

/// Three servers over one PostgreSQL database; server 1 is killed with
/// SIGKILL and restarted mid-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_servers_over_one_postgres_never_repeat_a_value_or_fail_a_request() {
    let Some(pg) = block_in_place(TempPostgres::start) else {
        return;
    };
    let mut run = Run::start(format!("{}?schema=multi_server", pg.url())).await;
    run.phase("three servers").await;
    run.kill_server(1).await;
    run.phase("server 1 killed").await;
    run.restart_server(1).await;
    run.phase("server 1 restarted").await;
    run.finish().await;
}

/// Three servers over one MariaDB database (the `mysql://` store); server 1
/// is killed with SIGKILL and restarted mid-run.
#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_servers_over_one_mariadb_never_repeat_a_value_or_fail_a_request() {
    let Some(db) = block_in_place(keysmith_testsupport::mariadb::TempMariaDb::start) else {
        return;
    };
    let mut run = Run::start(db.url()).await;
    run.phase("three servers").await;
    run.kill_server(1).await;
    run.phase("server 1 killed").await;
    run.restart_server(1).await;
    run.phase("server 1 restarted").await;
    run.finish().await;
}

/// Three servers over a three-node etcd cluster. Every server talks to
/// member 0 first (the first endpoint of the URL); it is killed with SIGKILL,
/// so all of them fail over to the others. While it is down, server 1 is
/// killed and restarted (it starts on the degraded cluster); then member 0
/// comes back.
#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_servers_over_a_three_node_etcd_never_repeat_a_value_or_fail_a_request() {
    let Some(mut cluster) = block_in_place(|| EtcdCluster::start(3)) else {
        return;
    };
    let mut run = Run::start(format!("{}/multi-server", cluster.url())).await;
    run.phase("three servers").await;
    block_in_place(|| cluster.kill(0));
    run.phase("etcd member 0 killed").await;
    run.kill_server(1).await;
    run.phase("server 1 killed, member 0 down").await;
    run.restart_server(1).await;
    run.phase("server 1 restarted, member 0 down").await;
    block_in_place(|| cluster.restart(0));
    run.phase("member 0 restarted").await;
    run.finish().await;
}

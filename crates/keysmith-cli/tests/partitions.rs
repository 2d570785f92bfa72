//! Network partitions and paused processes, tested the way Jepsen tests
//! stores (issue 28).
//!
//! Every etcd member, PostgreSQL and every `keysmith serve` (the built
//! binary) runs in a network namespace of its own, on a bridge in a private
//! subnet that exists only inside the test's namespaces
//! (`keysmith_testsupport::netns`); the test process is the client, from a
//! thread inside a client namespace. Faults are real: links cut (packets
//! dropped silently, connections hang), one pair of hosts cut, a link slowed,
//! processes paused with SIGSTOP. Every client writes down each call (invoke
//! and complete time, values), and the histories of all clients go to
//! `keysmith::verify::history::check` (uniqueness, per-client order, and
//! real-time order of the clients of one server).
//!
//! The servers, the load clients and their calls, the PostgreSQL scenario
//! and the checking of the calls' histories (`check_calls`, `check_loads`)
//! are `keysmith_testsupport::partitions`, shared with `keysmith-bench
//! partitions`, which runs that scenario by hand; what each test asserts
//! is here.
//!
//! Needs root and `ip netns` (CI runs as root): elsewhere each test says
//! why and skips, or fails under `KEYSMITH_REQUIRE_BACKENDS=1`. The scenarios
//! run one at a time (the machine may have two cores); each prints one
//! `partition:` line with its figures (the guide's Scaling chapter, docs/book/src/scaling.md):
//! `cargo test -p keysmith-cli --all-features --test partitions -- --nocapture`

mod common;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keysmith::ids::Layout;
use keysmith::verify::history::{History, Order};
use keysmith_testsupport::netns::{Host, Net, POSTGRES_PORT, PostgresNet};
use keysmith_testsupport::partitions::{
    self, Call, DEADLINE, HANG, Load, Loads, LoadsChecked, MAX_CALLS, REQUEST_TIMEOUT_MS, Server,
    Timing, http, in_client,
};
use rand::RngExt;
use serde_json::Value;

use common::KEYSMITH;

/// One scenario at a time: each starts a store and servers of its own.
static SERIAL: Mutex<()> = Mutex::new(());

/// How long a partition lasts: the scenario, not a synchronisation.
const PARTITION: Duration = Duration::from_secs(8);

/// etcd's deadline of one request to one endpoint.
#[cfg(feature = "etcd")]
const ETCD_REQUEST: Duration = keysmith::store::etcd::REQUEST_TIMEOUT;

/// How long the etcd minority partition lasts: longer than a refill's
/// worst case (each of 3 endpoints tried within the request deadline).
#[cfg(feature = "etcd")]
const ETCD_PARTITION: Duration = Duration::from_secs(20);

/// How long PostgreSQL is cut off from a server: longer than its
/// statement deadline.
const PG_PARTITION: Duration = Duration::from_secs(20);

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A network with a client host, or `None` (skipped) where namespaces are
/// not available.
fn network() -> Option<(Net, Host)> {
    let net = Net::new()?;
    let client = net.add_host("c");
    Some((net, client))
}

/// `keysmith --store URL ARGS` in `host`; panics unless it succeeds.
fn cli(net: &Net, host: &Host, url: &str, args: &[&str]) -> String {
    partitions::keysmith(net, host, Path::new(KEYSMITH), url, args).unwrap()
}

/// `n` `keysmith serve` (the built binary), in hosts `s0`, `s1`, ...; not
/// waited for.
fn start_servers(net: &Net, n: usize, url: &str, args: &[&str]) -> Vec<Server> {
    Server::start_n(net, Path::new(KEYSMITH), n, url, args)
}

/// [`partitions::check_calls`]: the values checked; panics with the first
/// violation.
fn check_history(what: &str, calls: &[Call], start: Instant, per_server_real_time: bool) -> usize {
    partitions::check_calls(calls, start, Order::PerClient, per_server_real_time)
        .unwrap_or_else(|v| panic!("{what}: {v}"))
        .values
}

/// Bytes `host` sent to `peer:port` and not yet acknowledged (`ss`'s
/// Send-Q, summed over its connections): a request on the wire.
fn unacked(net: &Net, host: &Host, peer: std::net::Ipv4Addr, port: u16) -> u64 {
    let out = net
        .command(host, "ss")
        .args(["-tnH", "dst", &format!("{peer}:{port}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
        .sum()
}

/// Only values, 503s (with the refusal's code) and, for a server cut off
/// from its clients, nothing; no call hung past the client's bound.
fn check_statuses(what: &str, calls: &[Call]) {
    for c in calls {
        assert!(
            c.took() < HANG,
            "{what}: a call to server {} hung: {c:?}",
            c.server
        );
        assert!(
            c.status == 200 || c.status == 503,
            "{what}: only values or 503: {c:?}"
        );
    }
}

/// The longest a call may take: the servers' request timeout and a
/// scheduling allowance (the route answers a little before the timeout).
fn within_request_timeout() -> Duration {
    Duration::from_millis(REQUEST_TIMEOUT_MS) + Duration::from_secs(2)
}

/// Every call answered within [`within_request_timeout`], values or 503,
/// whatever the store does; returns the slowest.
fn check_within_request_timeout(what: &str, calls: &[Call]) -> Duration {
    let slowest = partitions::slowest(calls).unwrap();
    assert!(
        slowest.took() < within_request_timeout(),
        "{what}: a call took longer than the request timeout ({REQUEST_TIMEOUT_MS} ms): {slowest:?}"
    );
    slowest.took()
}

/// The calls of the three [`Loads`]: only values or 503s
/// ([`check_statuses`]), the histories as [`partitions::check_loads`] checks
/// them, and the ids with no worker id shared by two servers in a time unit
/// ([`check_workers`], snowflake layout). Panics with the first violation;
/// returns the values of each history and the workers each server used.
fn check_loads(
    what: &str,
    start: Instant,
    seq: &[Call],
    ids: &[Call],
    strict: &[Call],
) -> (LoadsChecked, HashMap<usize, BTreeSet<i64>>) {
    check_statuses(&format!("{what} strict"), strict);
    check_statuses(what, seq);
    check_statuses(&format!("{what} ids"), ids);
    let checked = partitions::check_loads(start, seq, ids, strict);
    if let Some((load, v)) = &checked.violation {
        panic!("{what}: {load}: {v}");
    }
    let issued: Vec<(usize, i64)> = ids
        .iter()
        .flat_map(|c| c.values.iter().map(move |&v| (c.server, v)))
        .collect();
    let workers = check_workers(
        &format!("{what} ids"),
        &Layout::preset("snowflake").unwrap(),
        &issued,
    );
    (checked, workers)
}

/// Ids unique, and no (worker, time unit) issued by two issuers: a worker id
/// is never held by two at once. Returns the workers each issuer used.
fn check_workers(
    what: &str,
    layout: &Layout,
    ids: &[(usize, i64)],
) -> HashMap<usize, BTreeSet<i64>> {
    let mut owner: HashMap<(i64, i64), usize> = HashMap::new();
    let mut seen = HashSet::new();
    let mut workers: HashMap<usize, BTreeSet<i64>> = HashMap::new();
    for &(who, id) in ids {
        assert!(seen.insert(id), "{what}: id {id} issued twice");
        let d = layout.decode(id).unwrap();
        workers.entry(who).or_default().insert(d.worker);
        if let Some(&other) = owner.get(&(d.worker, d.time_ms))
            && other != who
        {
            panic!(
                "{what}: worker id {} used by issuers {other} and {who} in the same time unit {} (id {id})",
                d.worker, d.time
            );
        }
        owner.insert((d.worker, d.time_ms), who);
    }
    workers
}

// ---------------------------------------------------------------------------
// 1. A server cut off from the etcd majority.

#[cfg(feature = "etcd")]
#[test]
fn a_server_cut_off_from_the_etcd_majority_serves_its_cache_then_503s_and_resumes() {
    let _serial = serial();
    let Some((net, client)) = network() else {
        return;
    };
    let Some(etcd) = keysmith_testsupport::netns::EtcdNet::start(&net, 3, &client) else {
        return;
    };
    let url = etcd.url();
    cli(&net, &client, &url, &["create", "s", "--block", "20"]);
    let servers = start_servers(&net, 2, &url, &["--fixed-blocks"]);
    in_client(&net, &client, || async {
        let http = http();
        for s in &servers {
            s.healthy(&http).await.unwrap();
        }
        let start = Instant::now();
        let load = Load::start(
            &http,
            &Server::targets(&servers),
            3,
            "/v1/sequences/s/next",
            "values",
            0,
        );
        load.until_ok(0, start, 200, "before the cut")
            .await
            .unwrap();
        // s0 and e2 on one side: s0 reaches only a member that cannot
        // commit; e0, e1 and s1 go on.
        let (minority, majority) = (
            [&servers[0].host, &etcd.hosts[2]],
            [&etcd.hosts[0], &etcd.hosts[1], &servers[1].host],
        );
        let cut = Instant::now();
        net.partition(&minority, &majority);
        let s1_before = load.ok_from(1, cut);
        tokio::time::sleep(ETCD_PARTITION).await;
        let s1_during = load.ok_from(1, cut) - s1_before;
        let heal = Instant::now();
        net.heal_partition(&minority, &majority);
        load.until_ok(0, heal, 100, "after the heal").await.unwrap();
        let calls = load.stop().await;
        check_statuses("etcd minority", &calls);
        let values = check_history("etcd minority", &calls, start, true);
        let t = Timing::of(&calls, 0, cut, heal);
        assert!(
            s1_during > 0,
            "the majority side served nothing during the cut"
        );
        // A refill cannot finish while the server reaches no majority (each
        // of 3 endpoints is tried for etcd's request deadline): the 503s
        // come at the request deadline, not the store's.
        let to_503 = t.to_503(0);
        assert!(
            to_503 < within_request_timeout() + ETCD_REQUEST,
            "the first 503 came {to_503:?} after the cut"
        );
        let slowest = check_within_request_timeout("etcd minority", &calls);
        println!(
            "partition: etcd, server cut off with 1 of 3 members for {:.0} s: {}; slowest call \
             {:.2} s (server request timeout {REQUEST_TIMEOUT_MS} ms); the other server served \
             {s1_during} calls meanwhile; {values} values, none twice",
            ETCD_PARTITION.as_secs_f64(),
            t.line(),
            slowest.as_secs_f64()
        );
    });
}

// ---------------------------------------------------------------------------
// 2. The etcd leader isolated from its followers and some servers.

#[cfg(feature = "etcd")]
#[test]
fn an_isolated_etcd_leader_is_replaced_and_no_value_or_worker_id_is_shared() {
    let _serial = serial();
    let Some((net, client)) = network() else {
        return;
    };
    let Some(etcd) = keysmith_testsupport::netns::EtcdNet::start(&net, 3, &client) else {
        return;
    };
    let url = etcd.url();
    cli(&net, &client, &url, &["create", "s", "--block", "20"]);
    cli(&net, &client, &url, &["create", "t", "--block", "1"]);
    let servers = start_servers(&net, 3, &url, &["--fixed-blocks"]);
    let leader = (0..3)
        .find_map(|i| etcd.leader_seen_by(&net, &client, i))
        .expect("no etcd member names a leader");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    in_client(&net, &client, || async {
        let http = http();
        for s in &servers {
            s.healthy(&http).await.unwrap();
        }
        let start = Instant::now();
        let Loads { seq, ids, strict } = Loads::start(&http, &servers);
        Loads::ready(&seq, &ids, start, servers.len())
            .await
            .unwrap();
        // The leader and s0 on one side; the followers, s1 and s2 on the
        // other.
        let left = [&etcd.hosts[leader], &servers[0].host];
        let right = [
            &etcd.hosts[followers[0]],
            &etcd.hosts[followers[1]],
            &servers[1].host,
            &servers[2].host,
        ];
        let cut = Instant::now();
        net.partition(&left, &right);
        // A new leader on the majority side, as a follower sees it.
        let until = Instant::now() + DEADLINE;
        let new_leader = loop {
            let seen =
                tokio::task::block_in_place(|| etcd.leader_seen_by(&net, &client, followers[0]));
            if let Some(l) = seen
                && l != leader
            {
                break l;
            }
            assert!(Instant::now() < until, "no new leader elected");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let elected = cut.elapsed();
        tokio::time::sleep(PARTITION.saturating_sub(cut.elapsed())).await;
        let heal = Instant::now();
        net.heal_partition(&left, &right);
        seq.until_ok(0, heal, 50, "after the heal").await.unwrap();
        ids.until_ok(0, heal, 10, "ids after the heal")
            .await
            .unwrap();
        let seq_calls = seq.stop().await;
        let id_calls = ids.stop().await;
        let strict_calls = strict.stop().await;
        let (checked, workers) =
            check_loads("etcd leader", start, &seq_calls, &id_calls, &strict_calls);
        let (values, n_ids, strict_values) = (checked.seq, checked.ids, checked.strict);
        let layout = Layout::preset("snowflake").unwrap();
        // The server's own decoding agrees with the layout's.
        let issued: Vec<i64> = id_calls.iter().flat_map(|c| c.values.clone()).collect();
        let some = issued[issued.len() / 2];
        let decoded: Value = http
            .get(servers[0].url(&format!("/v1/ids/{some}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            decoded["worker"].as_i64(),
            Some(layout.decode(some).unwrap().worker)
        );
        let t = Timing::of(&seq_calls, 0, cut, heal);
        println!(
            "partition: etcd leader n{leader} isolated with s0 for {:.0} s: member n{new_leader} \
             elected within {:.2} s; s0 {}; {values} values, {strict_values} of a strict sequence (block 1, in real-time \
             order across servers) and {n_ids} ids, none twice; \
             worker ids per server {workers:?}, none shared in a time unit",
            PARTITION.as_secs_f64(),
            elected.as_secs_f64(),
            t.line()
        );
    });
}

// ---------------------------------------------------------------------------
// 3. PostgreSQL cut off from one of three servers.

#[test]
fn postgres_cut_off_from_one_of_three_servers() {
    let _serial = serial();
    let Some((net, client)) = network() else {
        return;
    };
    let Some(pg) = PostgresNet::start(&net, "pg") else {
        return;
    };
    // The scenario `keysmith-bench partitions` runs, with its figures
    // asserted here.
    let run = partitions::postgres_cut_off_from_one_of_three(
        &net,
        &client,
        &pg,
        Path::new(KEYSMITH),
        PG_PARTITION,
    )
    .unwrap();
    let (start, cut, heal) = (run.start, run.cut, run.heal);
    let (seq_calls, id_calls, strict_calls) = (run.seq, run.ids, run.strict);
    let others_during = run.others_during;
    let (checked, workers) =
        check_loads("postgres cut", start, &seq_calls, &id_calls, &strict_calls);
    let (values, n_ids, strict_values) = (checked.seq, checked.ids, checked.strict);
    assert!(
        others_during > 0,
        "the other servers served nothing during the cut"
    );
    let t = Timing::of(&seq_calls, 0, cut, heal);
    // The store's statement deadline is longer than the request
    // timeout: the 503s come at the request deadline.
    let to_503 = t.to_503(0);
    assert!(
        to_503 < within_request_timeout() * 2,
        "the first 503 came {to_503:?} after the cut"
    );
    let slowest = check_within_request_timeout("postgres cut", &seq_calls);
    let ids_slowest = check_within_request_timeout("postgres cut ids", &id_calls);
    let ids_503 = id_calls
        .iter()
        .filter(|c| c.server == 0 && c.status == 503)
        .count();
    println!(
        "partition: postgres cut off from s0 for {:.0} s: s0 {}; slowest next {:.2} s, \
         slowest ids/next {:.2} s ({ids_503} ids 503s from s0; server request timeout \
         {REQUEST_TIMEOUT_MS} ms); the other two served {others_during} calls meanwhile; \
         {values} values, {strict_values} of a strict sequence (block 1, in real-time \
         order across servers) and {n_ids} ids, none twice; worker ids per server {workers:?}",
        PG_PARTITION.as_secs_f64(),
        t.line(),
        slowest.as_secs_f64(),
        ids_slowest.as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 4. Time-ordered ids: a worker lease's holder paused, or cut off, past its
// lease while another takes the worker id.

/// The lease TTL of the id issuers, ms.
const ID_TTL_MS: u64 = 1_000;

/// A layout with few ids per time unit, so an issuer prints a bounded
/// stream: 51 time bits of 1 ms, 10 worker bits, 2 sequence bits.
const ID_LAYOUT: [&str; 8] = [
    "--time-bits",
    "51",
    "--worker-bits",
    "10",
    "--sequence-bits",
    "2",
    "--allow-short-lifetime",
    "--unit-ms=1",
];

fn id_layout() -> Layout {
    let mut l = Layout::preset("snowflake").unwrap();
    l.time_bits = 51;
    l.worker_bits = 10;
    l.sequence_bits = 2;
    l
}

/// An issuer: `keysmith ids next` with one worker id in its group, printing
/// ids as it makes them; its lines read as they come.
struct Issuer {
    id: usize,
    pid: u32,
    lines: Arc<Mutex<Vec<(Instant, i64)>>>,
    reader: std::thread::JoinHandle<()>,
    err: std::thread::JoinHandle<String>,
}

impl Issuer {
    fn start(net: &Net, host: &Host, url: &str, id: usize) -> Issuer {
        let mut cmd = net.command(host, KEYSMITH);
        cmd.arg("--store")
            .arg(url)
            .args(["ids", "next", "--count", "1000000000", "--group", "jepsen"])
            .args(["--workers", "1", "--ttl-ms", &ID_TTL_MS.to_string()])
            .args(ID_LAYOUT)
            .env_remove("KEYSMITH_STORE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let p = net.spawn(cmd);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let mut out = p.stdout.unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            while let Ok(n @ 1..) = out.read(&mut chunk) {
                buf.extend_from_slice(&chunk[..n]);
                let at = Instant::now();
                let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
                    continue;
                };
                let got: Vec<(Instant, i64)> = String::from_utf8_lossy(&buf[..end])
                    .lines()
                    .map(|l| (at, l.parse().unwrap()))
                    .collect();
                sink.lock().unwrap().extend(got);
                buf.drain(..=end);
            }
        });
        let mut stderr = p.stderr.unwrap();
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Issuer {
            id,
            pid: p.pid,
            lines,
            reader,
            err,
        }
    }

    fn count(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    /// Kills it (if still running) and returns its ids with the times they
    /// were read, and its stderr.
    fn finish(self, net: &Net) -> (usize, Vec<(Instant, i64)>, String) {
        net.kill(self.pid);
        self.reader.join().unwrap();
        let err = self.err.join().unwrap();
        let lines = std::mem::take(&mut *self.lines.lock().unwrap());
        (self.id, lines, err)
    }
}

/// How a round keeps the holder from renewing its lease.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Pause,
    Partition,
}

#[test]
fn an_id_issuer_paused_or_cut_off_past_its_lease_never_repeats_an_id() {
    let _serial = serial();
    let Some((net, client)) = network() else {
        return;
    };
    let Some(pg) = PostgresNet::start(&net, "pg") else {
        return;
    };
    let url = pg.url();
    let a_host = net.add_host("a");
    let b_host = net.add_host("b");
    let mut rng = rand::rng();
    let start = Instant::now();
    let mut history = History::starting_at(start);
    let mut issued: Vec<(usize, i64)> = Vec::new();
    let mut next_id = 0;
    let mut taken_over = HashMap::new();
    let mut rounds = Vec::new();
    for (round, fault) in std::iter::repeat_n(Fault::Pause, 6)
        .chain(std::iter::repeat_n(Fault::Partition, 3))
        .enumerate()
    {
        // Alternate which host holds the lease first.
        let (h1, h2) = if round % 2 == 0 {
            (&a_host, &b_host)
        } else {
            (&b_host, &a_host)
        };
        // The last round's issuers were killed holding the lease: it expires
        // within a TTL; until then each try exits at once.
        let until = Instant::now() + DEADLINE;
        let first = loop {
            let i = Issuer::start(&net, h1, &url, next_id);
            next_id += 1;
            let issuing = loop {
                if i.count() >= 100 {
                    break true;
                }
                if net.try_wait(i.pid).is_some() {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            if issuing {
                break i;
            }
            let (id, lines, err) = i.finish(&net);
            assert!(
                lines.is_empty(),
                "issuer {id} issued ids, then exited: {err}"
            );
            assert!(
                Instant::now() < until,
                "round {round}: no issuer got the worker id: {err}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // Around the TTL: some pauses shorter, most longer.
        let length = Duration::from_millis(rng.random_range(ID_TTL_MS / 2..ID_TTL_MS * 3));
        let faulted = Instant::now();
        match fault {
            Fault::Pause => net.signal(first.pid, libc::SIGSTOP),
            Fault::Partition => net.cut_pair(h1, &pg.host),
        }
        // Meanwhile another tries to take the worker id, again and again
        // (each try that finds it held exits at once).
        let mut second: Option<Issuer> = None;
        let mut failed_tries = Vec::new();
        while faulted.elapsed() < length {
            match &second {
                Some(s) if net.try_wait(s.pid).is_some() => {
                    failed_tries.push(second.take().unwrap().finish(&net));
                }
                Some(_) => {}
                None => {
                    second = Some(Issuer::start(&net, h2, &url, next_id));
                    next_id += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let took_over = second.as_ref().is_some_and(|s| s.count() > 0);
        // Resumed while the second is (when it got the lease) issuing.
        match fault {
            Fault::Pause => net.signal(first.pid, libc::SIGCONT),
            Fault::Partition => net.heal_pair(h1, &pg.host),
        }
        let resumed = Instant::now();
        let after = second.as_ref().map(Issuer::count).unwrap_or(0);
        while resumed.elapsed() < Duration::from_millis(700) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if took_over {
            let s = second.as_ref().unwrap();
            assert!(
                s.count() > after || net.try_wait(s.pid).is_some(),
                "round {round}: the second issuer stopped issuing"
            );
        }
        *taken_over.entry(fault as u8).or_insert(0) += usize::from(took_over);
        rounds.push((fault, length, took_over));
        for issuer in [Some(first), second].into_iter().flatten() {
            let (id, lines, _) = issuer.finish(&net);
            for chunk in lines.chunk_by(|x, y| x.0 == y.0) {
                let at = chunk[0].0;
                history.record(id as u32, at, at, chunk.iter().map(|x| x.1).collect());
            }
            issued.extend(lines.iter().map(|&(_, v)| (id, v)));
        }
        for (id, lines, err) in failed_tries {
            assert!(
                lines.is_empty(),
                "issuer {id} got ids without a lease? {err}"
            );
        }
    }
    let checked = history
        .check(Order::PerClient)
        .unwrap_or_else(|v| panic!("ids: {v}"));
    check_workers("ids", &id_layout(), &issued);
    let pauses = taken_over.get(&(Fault::Pause as u8)).copied().unwrap_or(0);
    let cuts = taken_over
        .get(&(Fault::Partition as u8))
        .copied()
        .unwrap_or(0);
    assert!(
        pauses > 0,
        "no paused round saw the worker id taken over: {rounds:?}"
    );
    assert!(
        cuts > 0,
        "no partitioned round saw the worker id taken over: {rounds:?}"
    );
    println!(
        "partition: ids, lease TTL {ID_TTL_MS} ms, {} rounds (pause or cut 0.5-3 TTL): worker id \
         taken over in {pauses} paused and {cuts} cut-off rounds; {} ids from {next_id} issuers, \
         none twice, none sharing a worker id in a time unit",
        rounds.len(),
        checked.values
    );
    drop(client);
}

// ---------------------------------------------------------------------------
// 5. Gap-free tickets: a holder paused past its ticket's TTL commits late.

#[test]
fn a_ticket_committed_late_after_a_pause_is_refused_and_numbers_stay_gap_free() {
    let _serial = serial();
    let Some((net, client)) = network() else {
        return;
    };
    let Some(pg) = PostgresNet::start(&net, "pg") else {
        return;
    };
    let url = pg.url();
    cli(&net, &client, &url, &["create", "g", "--gapless"]);
    let servers = start_servers(&net, 2, &url, &[]);
    in_client(&net, &client, || async {
        let http = http();
        for s in &servers {
            s.healthy(&http).await.unwrap();
        }
        let start = Instant::now();
        // Other holders, through s1: take and commit at once.
        let stop = Arc::new(AtomicBool::new(false));
        let committed: Arc<Mutex<Vec<Call>>> = Arc::default();
        let taken: Arc<Mutex<Vec<(Instant, i64)>>> = Arc::default();
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (http, base, stop, committed, taken) = (
                    http.clone(),
                    servers[1].base.clone(),
                    stop.clone(),
                    committed.clone(),
                    taken.clone(),
                );
                tokio::spawn(async move {
                    for _ in 0..MAX_CALLS {
                        if stop.load(SeqCst) {
                            break;
                        }
                        let sent = Instant::now();
                        let r = http
                            .post(format!("{base}/v1/sequences/g/tickets?ttl=10"))
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(r.status().as_u16(), 201);
                        let t: Value = r.json().await.unwrap();
                        let n = t["value"].as_i64().unwrap();
                        taken.lock().unwrap().push((Instant::now(), n));
                        let ticket = t["ticket"].as_str().unwrap();
                        let r = http
                            .post(format!("{base}/v1/sequences/g/tickets/{ticket}/commit"))
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(r.status().as_u16(), 200, "a prompt commit refused");
                        // Gap-free numbers are the lowest open one, not
                        // increasing: each commit is a client of its own.
                        {
                            let mut c = committed.lock().unwrap();
                            let me = w + 2 * c.len() as u32;
                            c.push(Call::ok(me, 1, sent, Instant::now(), vec![n]));
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })
            })
            .collect();
        let mut rng = rand::rng();
        let mut outcomes = Vec::new();
        for round in 0..8u32 {
            // The holder, through s0: a ticket of 1 s.
            let r = http
                .post(servers[0].url("/v1/sequences/g/tickets?ttl=1"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 201);
            let took = Instant::now();
            let t: Value = r.json().await.unwrap();
            let n = t["value"].as_i64().unwrap();
            let ticket = t["ticket"].as_str().unwrap().to_owned();
            // The holder pauses (its server stopped) with its commit sent.
            net.signal(servers[0].pid, libc::SIGSTOP);
            let commit = {
                let (http, url) = (
                    http.clone(),
                    servers[0].url(&format!("/v1/sequences/g/tickets/{ticket}/commit")),
                );
                tokio::spawn(async move {
                    let sent = Instant::now();
                    let r = http.post(url).send().await.unwrap();
                    let status = r.status().as_u16();
                    let body: Value = r.json().await.unwrap_or(Value::Null);
                    (sent, Instant::now(), status, body)
                })
            };
            let length = Duration::from_millis(rng.random_range(500..3_000));
            tokio::time::sleep(length).await;
            net.signal(servers[0].pid, libc::SIGCONT);
            let (sent, done, status, body) = commit.await.unwrap();
            let retaken = taken
                .lock()
                .unwrap()
                .iter()
                .any(|&(at, v)| v == n && at > took);
            match status {
                200 => {
                    assert!(
                        !retaken,
                        "round {round}: {n} committed late although taken again"
                    );
                    committed.lock().unwrap().push(Call::ok(
                        u32::MAX - round,
                        0,
                        sent,
                        done,
                        vec![n],
                    ));
                }
                409 => assert_eq!(
                    body["error"]["code"], "ticket_refused",
                    "round {round}: {body}"
                ),
                other => panic!("round {round}: the late commit got {other}: {body}"),
            }
            if took.elapsed() > Duration::from_millis(1_600) && retaken {
                assert_eq!(status, 409, "round {round}: a late commit was accepted");
            }
            outcomes.push((length, status, retaken));
        }
        stop.store(true, SeqCst);
        for w in workers {
            w.await.unwrap();
        }
        let calls = committed.lock().unwrap().clone();
        check_history("tickets", &calls, start, false);
        // Gap-free: after every holder settled, the committed numbers are 1..n.
        let mut numbers: Vec<i64> = calls.iter().flat_map(|c| c.values.clone()).collect();
        numbers.sort_unstable();
        let n = numbers.len() as i64;
        assert_eq!(
            numbers,
            (1..=n).collect::<Vec<_>>(),
            "the committed numbers are not 1..{n}"
        );
        let refused = outcomes.iter().filter(|o| o.1 == 409).count();
        assert!(refused > 0, "no late commit was refused: {outcomes:?}");
        println!(
            "partition: tickets, TTL 1 s, {} holders paused 0.5-3 s with their commit sent: \
             {refused} late commits refused (number taken again), {} accepted; committed 1..{n}, \
             none twice, no gap",
            outcomes.len(),
            outcomes.len() - refused
        );
    });
}

// ---------------------------------------------------------------------------
// 6. A server paused in the middle of a block reservation.

#[test]
fn a_server_paused_mid_reservation_never_repeats_a_value() {
    let _serial = serial();
    let Some((net, client)) = network() else {
        return;
    };
    let Some(pg) = PostgresNet::start(&net, "pg") else {
        return;
    };
    let url = pg.url();
    cli(&net, &client, &url, &["create", "r", "--block", "5"]);
    let servers = start_servers(&net, 3, &url, &["--fixed-blocks"]);
    in_client(&net, &client, || async {
        let http = http();
        for s in &servers {
            s.healthy(&http).await.unwrap();
        }
        // s0's link is slow: each of its round trips to the store takes
        // long, so a reservation is in flight for a while.
        net.slow(&servers[0].host, 16);
        let start = Instant::now();
        let others: Vec<(usize, String)> = (1..3).map(|i| (i, servers[i].base.clone())).collect();
        let load = Load::start(&http, &others, 2, "/v1/sequences/r/next", "values", 0);
        let mut rng = rand::rng();
        let mut burst_calls = Vec::new();
        let mut client_id = 100;
        let mut in_flight = 0;
        for _round in 0..6 {
            // Requests that use up s0's block and force a refill...
            let burst: Vec<_> = (0..8)
                .map(|_| {
                    let (http, url) = (http.clone(), servers[0].url("/v1/sequences/r/next"));
                    client_id += 1;
                    let me = client_id;
                    tokio::spawn(async move { Call::post(&http, me, 0, &url, "values").await })
                })
                .collect();
            // ...then s0 paused as soon as a store request of its is on the
            // wire, unanswered (polled with `ss`; the slow link keeps it
            // there for a while).
            let until = Instant::now() + Duration::from_secs(3);
            let seen = loop {
                let bytes = tokio::task::block_in_place(|| {
                    unacked(&net, &servers[0].host, pg.host.ip, POSTGRES_PORT)
                });
                if bytes > 0 {
                    break true;
                }
                if Instant::now() > until {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            net.signal(servers[0].pid, libc::SIGSTOP);
            in_flight += usize::from(seen);
            let length = Duration::from_millis(rng.random_range(500..2_500));
            tokio::time::sleep(length).await;
            net.signal(servers[0].pid, libc::SIGCONT);
            for b in burst {
                burst_calls.push(b.await.unwrap());
            }
        }
        net.unslow(&servers[0].host);
        let mut calls = load.stop().await;
        let s0_values: usize = burst_calls.iter().map(|c| c.values.len()).sum();
        calls.extend(burst_calls);
        check_statuses("paused mid-reservation", &calls);
        let values = check_history("paused mid-reservation", &calls, start, false);
        assert!(s0_values > 0, "the paused server never served a value");
        assert!(
            in_flight >= 3,
            "only {in_flight} of 6 pauses caught a store request on the wire"
        );
        println!(
            "partition: postgres, s0 (link capped at 16 kbit/s) paused 0.5-2.5 s with a store \
             request on the wire in {in_flight} of 6 rounds: {s0_values} values from s0, \
             {values} in all, none twice"
        );
    });
}

/// The test support tears down: no namespace of this process is left.
#[test]
fn namespaces_are_removed_on_drop_even_after_a_panic() {
    let _serial = serial();
    let Some((net, client)) = network() else {
        return;
    };
    let names: Vec<String> = net.hosts().iter().map(|h| h.ns.clone()).collect();
    let c = client.clone();
    let pid = net
        .spawn({
            let mut cmd = net.command(&c, "sleep");
            cmd.arg("600");
            cmd
        })
        .pid;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _net = net;
        panic!("a planted panic (expected): the network must still be torn down");
    }));
    assert!(r.is_err());
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for n in names {
        assert!(!list.contains(&n), "{n} left behind");
    }
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z ")),
        "the process started in it still runs"
    );
}

// ---------------------------------------------------------------------------
// 8. A leader-ordered sequence (issue 41) whose leader is cut off from the
// store and every client.

/// How long the leader stays cut off: past its 3 s lease, so another server
/// leads meanwhile.
const LEADER_CUT: Duration = Duration::from_secs(10);

/// Three servers on PostgreSQL serve a leader-ordered sequence under load
/// (two clients per server, not following 421s: only the leader's clients
/// get values). The leader's host is cut off from everything; it must stop
/// issuing before its lease can have expired, another server leads once it
/// has, and after the heal the old leader issues nothing more (its term is
/// over). The history of every call is checked in real-time order across
/// all clients: 0 duplicates, 0 order violations.
#[test]
fn a_leader_cut_off_stops_and_another_leads_in_real_time_order() {
    let _serial = serial();
    let Some((net, client)) = network() else {
        return;
    };
    let Some(pg) = PostgresNet::start(&net, "pg") else {
        return;
    };
    let url = pg.url();
    cli(
        &net,
        &client,
        &url,
        &["create", "led", "--order", "leader", "--block", "1000"],
    );
    let servers = start_servers(&net, 3, &url, &[]);
    let run = in_client(&net, &client, || async {
        let http = http();
        for s in &servers {
            s.healthy(&http).await?;
        }
        let start = Instant::now();
        let targets = Server::targets(&servers);
        let load = Load::start(&http, &targets, 2, "/v1/sequences/led/next", "values", 0);
        let loaded = async {
            // The first server a call made lead: the one that answers.
            let until = Instant::now() + DEADLINE;
            let leader = loop {
                if let Some(s) = (0..servers.len()).find(|&s| load.ok_from(s, start) >= 50) {
                    break s;
                }
                if Instant::now() >= until {
                    return Err("no server led within the deadline".to_owned());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            let cut = Instant::now();
            net.cut(&servers[leader].host);
            let held = partitions::hold(LEADER_CUT).await;
            let heal = Instant::now();
            net.heal(&servers[leader].host);
            held?;
            let next = (0..servers.len())
                .filter(|&s| s != leader)
                .max_by_key(|&s| load.ok_from(s, cut))
                .expect("three servers");
            load.until_ok(next, heal, 50, "the new leader after the heal")
                .await?;
            Ok::<_, String>((leader, next, cut, heal))
        }
        .await;
        let calls = load.stop().await;
        let (leader, next, cut, heal) = loaded?;
        Ok::<_, String>((start, leader, next, cut, heal, calls))
    })
    .unwrap_or_else(|e| panic!("leader cut: {e}"));
    let (start, leader, next, cut, heal, calls) = run;
    let checked = partitions::check_calls(&calls, start, Order::RealTime, false)
        .unwrap_or_else(|v| panic!("leader cut: {v}"));
    let first_new = calls
        .iter()
        .filter(|c| c.server == next && c.sent >= cut && !c.values.is_empty())
        .map(|c| c.done)
        .min()
        .expect("the new leader answered");
    assert!(
        first_new < heal,
        "no other server led while the leader was cut off"
    );
    let late = calls
        .iter()
        .filter(|c| c.server == leader && c.sent >= heal && !c.values.is_empty())
        .count();
    assert_eq!(late, 0, "the cut-off leader issued values after the heal");
    let refused_after = calls
        .iter()
        .filter(|c| c.server == leader && c.sent >= heal && c.status == 421)
        .count();
    println!(
        "partition: leader of a leader-ordered sequence cut off for {:.0} s: s{next} led \
         {} ms after the cut; the old leader answered {refused_after} calls after the heal \
         with 421, none with values; {} values in real-time order across every client, none twice",
        LEADER_CUT.as_secs_f64(),
        first_new.saturating_duration_since(cut).as_millis(),
        checked.values
    );
}

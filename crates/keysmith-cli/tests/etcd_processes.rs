//! Many `keysmith` processes on one etcd, processes killed with SIGKILL, the
//! one node killed and restarted under running processes, and an etcd
//! member killed (and restarted) in a three-node cluster: no value is ever
//! handed out twice. The single-node scenarios are written once in
//! `keysmith_testsupport::processes` and run by every backend; the cluster
//! one (allocation goes on while a member is dead) is etcd's alone: the
//! other backends have one server, with which nothing can go on.
//!
//! Needs the `etcd` feature and an etcd binary (see keysmith-testsupport);
//! without the binary every test prints that it skips, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.
//!
//! `cargo test -p keysmith-cli --features etcd --test etcd_processes`
#![cfg(feature = "etcd")]

mod common;

use std::collections::HashSet;
use std::io::Read;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{DEADLINE, assert_increasing, complete_values, keysmith, ok};
use keysmith_testsupport::etcd::EtcdCluster;
use keysmith_testsupport::processes::{Etcd, PROCESSES};

/// 8, then 32 processes at once on one sequence, each strategy (fewer
/// values each than on the SQL stores: every reservation is a raft write).
#[test]
fn processes_never_share_a_value() {
    let Some(etcd) = Etcd::shared() else {
        return;
    };
    for n in PROCESSES {
        common::processes(&etcd).never_share_a_value(n, 100);
    }
}

/// SIGKILL rounds. On etcd optimistic and atomic kill each child when it has
/// printed its share (the last winner tends to keep winning); locked kills
/// a round together, three rounds (a dead lock holder blocks the others
/// until its lease expires, once per round): `Etcd::sigkill_plan`.
#[test]
fn sigkill_at_random_moments_never_repeats_a_value() {
    let Some(etcd) = Etcd::shared() else {
        return;
    };
    common::processes(&etcd).sigkill_rounds();
}

/// The one node is killed with SIGKILL while `keysmith next` processes
/// stream values, then restarted on its data, twice: the processes running
/// fail with one `store unavailable` line, those started after succeed, no
/// value is handed out twice (`Processes::server_crash_mid_run`).
#[test]
fn server_crash_mid_run_fails_cleanly_and_repeats_no_value() {
    // A node of its own: the test kills it.
    let Some(etcd) = Etcd::start() else {
        return;
    };
    common::processes(&etcd).server_crash_mid_run();
}

/// The index of the node that is the raft leader now, asked of each running
/// node through etcd's JSON gateway (`POST /v3/maintenance/status`): the one
/// whose member id is the leader id it reports.
fn leader(cluster: &EtcdCluster) -> usize {
    let give_up = Instant::now() + DEADLINE;
    loop {
        for (i, endpoint) in cluster.endpoints().iter().enumerate() {
            if !cluster.is_running(i) {
                continue;
            }
            if let Some(status) = status(endpoint) {
                let me = &status["header"]["member_id"];
                if me.is_string() && status["leader"] == *me {
                    return i;
                }
            }
        }
        assert!(Instant::now() < give_up, "no etcd leader");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One `POST /v3/maintenance/status` over plain HTTP/1.0; `None` on any failure.
fn status(endpoint: &str) -> Option<serde_json::Value> {
    use std::io::Write;
    let timeout = Duration::from_secs(2);
    let mut s = std::net::TcpStream::connect_timeout(&endpoint.parse().ok()?, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    write!(
        s,
        "POST /v3/maintenance/status HTTP/1.0\r\nHost: {endpoint}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    )
    .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (_, body) = answer.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

/// What one `keysmith next` process did.
struct Run {
    strategy: &'static str,
    values: Vec<i64>,
    success: bool,
    stderr: String,
}

/// Runs `keysmith next` processes one after another until `stop`, counting
/// every value line into `progress` as it arrives.
fn cli_worker(
    url: String,
    strategy: &'static str,
    stop: Arc<AtomicBool>,
    progress: Arc<AtomicUsize>,
) -> Vec<Run> {
    let mut runs = Vec::new();
    while !stop.load(SeqCst) {
        let mut child = keysmith(&url)
            .args(["next", "ids", "--count", "100", "--block", "5"])
            .args(["--strategy", strategy])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = out.read(&mut chunk) {
            bytes.extend_from_slice(&chunk[..n]);
            progress.fetch_add(chunk[..n].iter().filter(|&&b| b == b'\n').count(), SeqCst);
        }
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        runs.push(Run {
            strategy,
            values: complete_values(&bytes),
            success: status.success(),
            stderr,
        });
    }
    runs
}

/// CLI processes of every strategy allocate from a three-node cluster while
/// the leader is killed with SIGKILL and restarted, and then the new leader
/// is killed, so that the quorum needs the restarted node. Every process either succeeds with all its values or fails with one
/// line, `error: store unavailable ...`; no value is handed out twice; each
/// process's values increase; allocation goes on through every phase; and
/// afterwards the sequence resumes above everything seen.
#[test]
fn cli_processes_survive_a_killed_and_restarted_member() {
    let Some(mut cluster) = EtcdCluster::start(3) else {
        return;
    };
    let url = format!("{}/cli-fault", cluster.url());
    ok(&url, &["create", "ids", "--block", "5"]);

    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicUsize::new(0));
    let workers: Vec<JoinHandle<Vec<Run>>> = ["optimistic", "locked", "atomic"]
        .into_iter()
        .flat_map(|s| [s, s])
        .map(|strategy| {
            let (url, stop, progress) = (url.clone(), stop.clone(), progress.clone());
            std::thread::spawn(move || cli_worker(url, strategy, stop, progress))
        })
        .collect();
    let wait_for_progress = |what: &str| {
        let from = progress.load(SeqCst);
        let give_up = Instant::now() + DEADLINE;
        while progress.load(SeqCst) < from + 300 {
            assert!(Instant::now() < give_up, "no allocation {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    wait_for_progress("at the start");
    let first = leader(&cluster);
    cluster.kill(first);
    wait_for_progress("with the leader dead");
    cluster.restart(first);
    wait_for_progress("after it restarted");
    let mut second = leader(&cluster);
    if second == first {
        second = (first + 1) % cluster.len();
    }
    cluster.kill(second);
    wait_for_progress("with another node dead (the restarted one is in the quorum)");
    cluster.restart(second);
    stop.store(true, SeqCst);

    let mut seen = HashSet::new();
    let mut max_seen = 0;
    let (mut succeeded, mut failed) = (0, 0);
    for w in workers {
        for run in w.join().unwrap() {
            let who = run.strategy;
            if run.success {
                assert_eq!(run.values.len(), 100, "{who}: succeeded short");
                succeeded += 1;
            } else {
                let lines: Vec<&str> = run.stderr.lines().collect();
                assert!(
                    lines.len() == 1 && lines[0].starts_with("error: store unavailable"),
                    "{who}: a process failed other than with one `error: store unavailable` \
                     line:\n{}",
                    run.stderr
                );
                failed += 1;
            }
            assert_increasing(&run.values, who);
            for v in run.values {
                assert!(seen.insert(v), "{who}: {v} handed out twice");
                max_seen = max_seen.max(v);
            }
        }
    }
    assert!(succeeded > 0, "no process succeeded");
    let after: i64 = ok(&url, &["next", "ids"]).trim().parse().unwrap();
    assert!(after > max_seen, "resumed at {after}, below {max_seen}");
    eprintln!(
        "{} values; {succeeded} processes succeeded, {failed} failed with `store unavailable`; \
         killed node {first}, then node {second}",
        seen.len()
    );
}

/// A process holding a handle, paused while others drop the sequence and
/// create it again: resumed, it fails saying so and writes nothing into the
/// new life (`Processes::a_dropped_life_never_writes_into_the_next`).
#[test]
fn a_dropped_life_never_writes_into_the_next() {
    let Some(etcd) = Etcd::shared() else {
        return;
    };
    common::processes(&etcd).a_dropped_life_never_writes_into_the_next();
}

//! Many `keysmith` processes on one etcd, processes killed with SIGKILL, and
//! an etcd member killed (and restarted) under running processes: no value
//! is ever handed out twice.
//!
//! The etcd counterpart of `sequence_processes.rs`. Needs the `etcd` feature
//! and an etcd binary (see keysmith-testsupport); without the binary every
//! test prints that it skips, unless `KEYSMITH_REQUIRE_BACKENDS=1`.
//!
//! `cargo test -p keysmith-cli --features etcd --test etcd_processes`
#![cfg(feature = "etcd")]

mod common;

use std::collections::HashSet;
use std::io::Read;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{KEYSMITH, complete_values};
use keysmith_testsupport::etcd::{EtcdCluster, TempEtcd};
use rand::RngExt;

/// How long an awaited condition may take before the test fails. Generous:
/// it bounds a hang (a locked reservation may wait out a dead holder's
/// lease), it is not a performance threshold.
const DEADLINE: Duration = Duration::from_secs(120);

/// `keysmith --store URL` with nothing from the environment.
fn keysmith(url: &str) -> Command {
    let mut c = Command::new(KEYSMITH);
    c.arg("--store").arg(url).env_remove("KEYSMITH_STORE");
    c
}

/// Runs `keysmith --store URL args...`, expects success, returns stdout.
fn ok(url: &str, args: &[&str]) -> String {
    let out = keysmith(url).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "keysmith {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A store URL on the shared node with a fresh key prefix: an empty store.
fn fresh_url(etcd: &TempEtcd) -> String {
    etcd.url_with_prefix(&format!("procs-{:016x}", rand::random::<u64>()))
}

fn assert_increasing(values: &[i64], who: &str) {
    for w in values.windows(2) {
        assert!(w[0] < w[1], "{who}: {} then {}", w[0], w[1]);
    }
}

/// Reads a child's stdout to its end in a thread, into a buffer the test
/// can watch grow.
fn drain(mut out: ChildStdout) -> (Arc<Mutex<Vec<u8>>>, JoinHandle<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = buf.clone();
    let reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = out.read(&mut chunk) {
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    (buf, reader)
}

/// At least 4 processes at once on one sequence, small blocks so they
/// collide often: all values unique, each process's values increasing.
/// (With blocks this small, optimistic puts collide so often that the
/// default 10 attempts can run out: that is a `Contention` error, never a
/// duplicate; the attempt limit is raised so every process finishes.)
fn processes_never_share_a_value(strategy: &str) {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    let url = fresh_url(etcd);
    ok(&url, &["create", "s", "--block", "3"]);
    const COUNT: usize = 100;
    let children: Vec<Child> = (0..5)
        .map(|i| {
            let block = if i == 0 { "1" } else { "3" };
            keysmith(&url)
                .args(["next", "s", "--count", &COUNT.to_string()])
                .args(["--strategy", strategy, "--block", block])
                .args(["--max-attempts", "10000"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut all = HashSet::new();
    let mut total = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{strategy}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let values = complete_values(&out.stdout);
        assert_eq!(values.len(), COUNT, "{strategy}");
        assert_increasing(&values, strategy);
        total += values.len();
        all.extend(values);
    }
    assert_eq!(all.len(), total, "{strategy}: a value was handed out twice");
}

#[test]
fn optimistic_processes_never_share_a_value() {
    processes_never_share_a_value("optimistic");
}

#[test]
fn locked_processes_never_share_a_value() {
    processes_never_share_a_value("locked");
}

#[test]
fn atomic_processes_never_share_a_value() {
    processes_never_share_a_value("atomic");
}

/// One child of a SIGKILL round: its stdout so far, and how much of it to
/// wait for before the kill.
struct Victim {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    reader: JoinHandle<()>,
    want: usize,
    killed: bool,
}

/// Rounds of children allocating in a loop, killed with SIGKILL at moments
/// chosen by progress (a random amount of output first), so that kills land
/// mid-block, mid-refill and, for `locked`, while holding or queued for the
/// etcd lock. No value is ever seen twice, each child's values increase, and
/// afterwards the sequence resumes above everything handed out.
///
/// With `together`, a round's children are all killed once the last of them
/// has printed its share (each is wherever it is then); otherwise each is
/// killed as soon as it has printed its own. Optimistic and atomic need the
/// latter: on etcd the process that just won a put tends to win the next
/// ones too, so the others may starve until it dies. Locked needs the
/// former: a child killed while holding or queued for the lock blocks the
/// others until its lease expires (`LOCK_TTL_SECS`), and one such wait per
/// round (at the start of the next round, and before the final `next`: a
/// dead holder must not block for good) keeps the test short; the lock
/// queue is fair, so nobody starves meanwhile.
fn sigkill_at_random_moments_never_repeats_a_value(strategy: &str, rounds: usize, together: bool) {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    let url = fresh_url(etcd);
    ok(&url, &["create", "k", "--block", "10"]);
    let mut rng = rand::rng();
    let mut seen = HashSet::new();
    let mut max_seen = 0;
    for round in 0..rounds {
        let mut children: Vec<Victim> = (0..3)
            .map(|_| {
                let mut child = keysmith(&url)
                    .args(["next", "k", "--count", "100000000", "--strategy", strategy])
                    .args(["--max-attempts", "10000"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                let (out, reader) = drain(child.stdout.take().unwrap());
                let want = rng.random_range(1..2000);
                Victim {
                    child,
                    out,
                    reader,
                    want,
                    killed: false,
                }
            })
            .collect();
        let give_up = Instant::now() + DEADLINE;
        while children.iter().any(|c| !c.killed) {
            let all_ready = children
                .iter()
                .all(|c| c.out.lock().unwrap().len() >= c.want);
            for c in children.iter_mut().filter(|c| !c.killed) {
                let done = c.out.lock().unwrap().len() >= c.want;
                if (done && !together) || all_ready {
                    c.child.kill().unwrap(); // SIGKILL
                    c.killed = true;
                } else if let Some(status) = c.child.try_wait().unwrap() {
                    let mut err = String::new();
                    c.child
                        .stderr
                        .take()
                        .unwrap()
                        .read_to_string(&mut err)
                        .unwrap();
                    panic!("{strategy} round {round}: a child exited by itself ({status}): {err}");
                }
            }
            assert!(
                Instant::now() < give_up,
                "{strategy} round {round}: children made no progress"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        for mut c in children {
            c.child.wait().unwrap();
            c.reader.join().unwrap();
            let values = complete_values(&c.out.lock().unwrap());
            assert!(!values.is_empty(), "child printed nothing before the kill");
            assert_increasing(&values, strategy);
            for v in values {
                assert!(seen.insert(v), "{strategy}: {v} handed out twice");
                max_seen = max_seen.max(v);
            }
        }
    }
    let after: i64 = ok(&url, &["next", "k", "--strategy", strategy])
        .trim()
        .parse()
        .unwrap();
    assert!(
        after > max_seen,
        "{strategy}: resumed at {after}, below {max_seen}"
    );
}

#[test]
fn optimistic_sigkill_at_random_moments_never_repeats_a_value() {
    sigkill_at_random_moments_never_repeats_a_value("optimistic", 6, false);
}

/// Fewer rounds: each may wait out a killed lock holder's lease.
#[test]
fn locked_sigkill_at_random_moments_never_repeats_a_value() {
    sigkill_at_random_moments_never_repeats_a_value("locked", 3, true);
}

#[test]
fn atomic_sigkill_at_random_moments_never_repeats_a_value() {
    sigkill_at_random_moments_never_repeats_a_value("atomic", 6, false);
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
            .args(["--strategy", strategy, "--max-attempts", "10000"])
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

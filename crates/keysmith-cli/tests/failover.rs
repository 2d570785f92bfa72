//! Stores that go back in time under load (issue 24): a PostgreSQL standby
//! promoted after it lost the primary's last commits, a PostgreSQL
//! point-in-time restore, an etcd snapshot restore, an SQLite file copied
//! back from a backup.
//!
//! Every scenario runs `keysmith serve` (the built binary) with several HTTP
//! clients and `keysmith next` processes back to back, collects every value
//! handed out, and counts the values handed out twice: none may be. Each
//! also checks that the fence acted: every reservation records the store's
//! generation, and a reservation that finds it changed skips the sequence's
//! failover margin ahead (`skipped_at_failover` in `show --json`), a handle
//! refuses a range below the highest value it reserved (503
//! `store_went_back`; the CLI says "went back"), and an operator's `keysmith
//! fence` moves everything forward where the generation cannot show the
//! restore (an SQLite file copied back keeps its store id).
//!
//! The margin, [`SKIP`], covers what the faults lose (some 75 000 values in
//! the failovers on a 2-core machine: adaptive blocks grow to `--block-max`).
//!
//! `cargo test -p keysmith-cli --all-features --test failover -- --nocapture`
//! prints one `failover:` line per scenario.

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::server::{SERVER_DEADLINE, ServerProc};
use serde_json::Value;

/// The sequence's failover margin, above what any scenario loses.
const SKIP: i64 = 1_000_000;
/// HTTP clients sending `next` back to back.
const HTTP_CLIENTS: usize = 4;
/// `keysmith next` processes run back to back, at once.
const CLI_SLOTS: usize = 2;
/// Values per HTTP request and per `keysmith next` run.
const PER_REQUEST: usize = 10;
const PER_RUN: usize = 20;
/// Values wanted before a fault (and between the steps before it).
const WARM: usize = 1500;
/// How long the standby stays cut off from the primary: the scenario.
const BLIP: Duration = Duration::from_secs(3);
/// The longest the load runs after the store came back (it stops earlier
/// once it has handed out as many values as the store lost).
const AFTER: Duration = Duration::from_secs(8);
/// The fewest values wanted after the store came back.
const AFTER_MIN: usize = 300;

/// Every value handed out, and how requests ended.
#[derive(Debug, Default)]
struct Ledger {
    values: Vec<i64>,
    /// HTTP 503 `store_went_back`.
    went_back_http: usize,
    /// `keysmith next` runs that failed saying the store went back.
    went_back_cli: usize,
    /// Other answers than 200, by status and code; connection errors as 0.
    http_other: HashMap<(u16, String), usize>,
    /// Failed `keysmith next` runs (other than "went back").
    cli_failed: usize,
    cli_last_error: String,
}

/// Where the load goes; switched by the scenarios.
struct Target {
    /// The server's base URL; `None` while there is no server.
    http: Mutex<Option<String>>,
    /// The store URL of the `keysmith next` processes.
    store: Mutex<String>,
}

impl Target {
    fn new(http: Option<&str>, store: &str) -> Arc<Target> {
        Arc::new(Target {
            http: Mutex::new(http.map(str::to_owned)),
            store: Mutex::new(store.to_owned()),
        })
    }
    fn set_http(&self, base: Option<&str>) {
        *self.http.lock().unwrap() = base.map(str::to_owned);
    }
    fn set_store(&self, url: &str) {
        *self.store.lock().unwrap() = url.to_owned();
    }
}

/// [`HTTP_CLIENTS`] tasks and [`CLI_SLOTS`] threads allocating until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(target: &Arc<Target>, ledger: &Arc<Mutex<Ledger>>) -> Load {
        Load::start_with(target, ledger, CLI_SLOTS)
    }

    /// [`HTTP_CLIENTS`] clients and `cli_slots` `keysmith next` slots.
    fn start_with(target: &Arc<Target>, ledger: &Arc<Mutex<Ledger>>, cli_slots: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let client = reqwest::Client::builder()
            .timeout(SERVER_DEADLINE)
            .build()
            .unwrap();
        let tasks = (0..HTTP_CLIENTS)
            .map(|_| {
                let (client, target, ledger, stop) =
                    (client.clone(), target.clone(), ledger.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(SeqCst) {
                        let base = target.http.lock().unwrap().clone();
                        let Some(base) = base else {
                            // No server at the moment: pace, not a synchronisation.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        let url = format!("{base}/v1/sequences/s/next?count={PER_REQUEST}");
                        let (status, body) = match client.post(&url).send().await {
                            Ok(r) => {
                                let status = r.status().as_u16();
                                (status, r.json::<Value>().await.unwrap_or(Value::Null))
                            }
                            Err(_) => (0, Value::Null),
                        };
                        let served = status == 200;
                        {
                            let mut l = ledger.lock().unwrap();
                            let code = body["error"]["code"].as_str().unwrap_or("").to_owned();
                            if served {
                                l.values.extend(common::server::values(&body));
                            } else if status == 503 && code == "store_went_back" {
                                l.went_back_http += 1;
                            } else {
                                *l.http_other.entry((status, code)).or_default() += 1;
                            }
                        }
                        if !served {
                            // The store or the server is down: pace the retries.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                })
            })
            .collect();
        let threads = (0..cli_slots)
            .map(|_| {
                let (target, ledger, stop) = (target.clone(), ledger.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(SeqCst) {
                        let url = target.store.lock().unwrap().clone();
                        let out = common::keysmith(&url)
                            .args(["next", "s", "--count", &PER_RUN.to_string()])
                            .stdin(Stdio::null())
                            .output()
                            .unwrap();
                        // Values printed by a failed run were handed out too.
                        let got = common::complete_values(&out.stdout);
                        common::assert_increasing(&got, "a keysmith next run");
                        let mut l = ledger.lock().unwrap();
                        l.values.extend(got);
                        if out.status.success() {
                            continue;
                        }
                        let err = String::from_utf8_lossy(&out.stderr).into_owned();
                        if err.contains("went back") {
                            l.went_back_cli += 1;
                        } else {
                            l.cli_failed += 1;
                            l.cli_last_error = err;
                        }
                        drop(l);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                })
            })
            .collect();
        Load {
            stop,
            tasks,
            threads,
        }
    }

    /// Stops starting requests and runs; waits for those in flight.
    async fn stop(mut self) {
        self.stop.store(true, SeqCst);
        for t in std::mem::take(&mut self.tasks) {
            t.await.unwrap();
        }
        let threads = std::mem::take(&mut self.threads);
        tokio::task::spawn_blocking(move || {
            for t in threads {
                t.join().unwrap();
            }
        })
        .await
        .unwrap();
    }
}

impl Drop for Load {
    /// A test that fails midway stops its load too (the HTTP tasks end with
    /// the runtime, the CLI threads after their current run).
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
    }
}

fn count(ledger: &Arc<Mutex<Ledger>>) -> usize {
    ledger.lock().unwrap().values.len()
}

fn highest(ledger: &Arc<Mutex<Ledger>>) -> i64 {
    ledger.lock().unwrap().values.iter().copied().max().unwrap()
}

/// Waits until `n` values have been handed out in all (a bound on a hang,
/// not a performance threshold).
async fn until_values(ledger: &Arc<Mutex<Ledger>>, n: usize, what: &str) {
    let until = Instant::now() + common::DEADLINE;
    while count(ledger) < n {
        assert!(
            Instant::now() < until,
            "{what}: {} of {n} values handed out; {:?}",
            count(ledger),
            ledger.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// After the store came back: runs until as many values as the store lost
/// (`lost`) were handed out again, at least [`AFTER_MIN`], at most for
/// [`AFTER`] (then at least [`AFTER_MIN`] must have come).
async fn run_after(ledger: &Arc<Mutex<Ledger>>, lost: usize, what: &str) {
    let from = count(ledger);
    let want = lost.max(AFTER_MIN);
    let started = Instant::now();
    while count(ledger) < from + want && started.elapsed() < AFTER {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    until_values(ledger, from + AFTER_MIN, what).await;
}

/// How many values were handed out more than once (each extra copy counts).
fn duplicates(values: &[i64]) -> usize {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.windows(2).filter(|w| w[0] == w[1]).count()
}

/// `keysmith --store URL --json show s`.
fn show(url: &str) -> Value {
    serde_json::from_str(&common::ok(url, &["--json", "show", "s"])).unwrap()
}

fn next_of(url: &str) -> i64 {
    show(url)["next"].as_i64().unwrap()
}

/// A number field of `show --json`, which must be there.
fn shown(v: &Value, field: &str) -> i64 {
    v[field]
        .as_i64()
        .unwrap_or_else(|| panic!("show --json has no number {field:?}: {v}"))
}

/// The store generation `show --json` reports.
fn generation(url: &str) -> String {
    let v = show(url);
    v["generation"]
        .as_str()
        .filter(|g| !g.is_empty())
        .unwrap_or_else(|| panic!("show --json has no generation: {v}"))
        .to_owned()
}

/// The sum of a Prometheus counter's samples on the server's /metrics; it
/// must be there.
async fn metric(srv: &ServerProc, name: &str) -> f64 {
    let text = reqwest::get(srv.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let samples: Vec<f64> = text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(!samples.is_empty(), "/metrics has no {name}:\n{text}");
    samples.iter().sum()
}

/// Both failover counters are on /metrics; returns (went back, skips).
async fn fence_metrics(srv: &ServerProc) -> (f64, f64) {
    (
        metric(srv, "keysmith_store_went_back_total").await,
        metric(srv, "keysmith_failover_skips_total").await,
    )
}

/// After the scenario: the margin is the sequence's, and the fence acted:
/// values were skipped at a generation change, or a range was refused as
/// the store going back.
fn assert_fence_acted(what: &str, url: &str, ledger: &Arc<Mutex<Ledger>>) -> Value {
    let v = show(url);
    assert_eq!(shown(&v, "failover_skip"), SKIP, "{what}: the margin: {v}");
    let skipped = shown(&v, "skipped_at_failover");
    let l = ledger.lock().unwrap();
    let refused = l.went_back_http + l.went_back_cli;
    assert!(
        skipped > 0 || refused > 0,
        "{what}: no values skipped at the failover and no range refused: {v}"
    );
    v
}

/// `keysmith --json fence ARGS` (with `--dry-run` or not); checks the
/// answer's shape and returns the change of sequence `s`: (before, after),
/// at least [`SKIP`] apart.
fn fence(url: &str, what: &str, args: &[&str]) -> (Value, i64, i64) {
    let mut all = vec!["--json", "fence"];
    all.extend_from_slice(args);
    all.extend(["--skip", "1000000"]);
    let out = common::ok(url, &all);
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{what}: fence {args:?} printed no JSON ({e}): {out}"));
    let dry = args.contains(&"--dry-run");
    assert_eq!(v["dry_run"].as_bool(), Some(dry), "{what}: {v}");
    let changes = v["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no changes in {v}"));
    for c in changes {
        let kind = c["kind"].as_str().unwrap_or("");
        assert!(
            ["sequence", "pool", "workers"].contains(&kind),
            "{what}: change of kind {kind:?}: {v}"
        );
        assert!(c["name"].is_string(), "{what}: {v}");
        assert!(
            c["after"].as_i64().unwrap() >= c["before"].as_i64().unwrap() + SKIP,
            "{what}: a change that moved less than the skip: {c}"
        );
    }
    let s = changes
        .iter()
        .find(|c| c["kind"] == "sequence" && c["name"] == "s")
        .unwrap_or_else(|| panic!("{what}: fence {args:?} did not move sequence s: {v}"));
    (
        v.clone(),
        s["before"].as_i64().unwrap(),
        s["after"].as_i64().unwrap(),
    )
}

/// The operator's fence after a restore: a dry run that changes nothing,
/// then the fence itself, which moves `s` past everything handed out (`hi`).
fn operator_fence(url: &str, what: &str, dry_args: &[&str], args: &[&str], hi: i64) -> Value {
    let before = next_of(url);
    let (_, dry_before, dry_after) = fence(url, what, dry_args);
    assert_eq!(dry_before, before, "{what}: the dry run's before");
    assert_eq!(next_of(url), before, "{what}: the dry run changed s");
    let (v, was, now) = fence(url, what, args);
    assert_eq!(
        (was, now),
        (dry_before, dry_after),
        "{what}: the fence did other than its dry run said"
    );
    let next = next_of(url);
    assert!(
        next >= now && next > hi,
        "{what}: after the fence s is at {next}, {hi} was handed out"
    );
    v
}

/// Prints the scenario's line and returns the duplicates.
fn report(what: &str, ledger: &Arc<Mutex<Ledger>>, lost_range: (i64, i64)) -> usize {
    let l = ledger.lock().unwrap();
    let dups = duplicates(&l.values);
    println!(
        "failover: {what}: {} values handed out, {dups} twice; the store went back from {} to {} \
         ({} values); refused as went back: {} HTTP, {} CLI; other HTTP answers {:?}; \
         {} CLI runs failed otherwise (last: {})",
        l.values.len(),
        lost_range.1,
        lost_range.0,
        lost_range.1 - lost_range.0,
        l.went_back_http,
        l.went_back_cli,
        l.http_other,
        l.cli_failed,
        l.cli_last_error.trim(),
    );
    dups
}

/// A `keysmith next` process held across a failover with its handle: its
/// stdout is read for a while, then not, so that it blocks writing (the pipe
/// full) holding the blocks it reserved; read again after the failover, it
/// goes on and refills from the new primary.
struct HeldCli {
    child: std::process::Child,
    stdout: std::process::ChildStdout,
}

impl HeldCli {
    /// Starts `keysmith next s` (block 1000) on `url` and returns once it is
    /// blocked on a full pipe.
    fn start(url: &str) -> HeldCli {
        let mut child = common::keysmith(url)
            .args(["next", "s", "--count", "100000000", "--block", "1000"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let until = Instant::now() + common::DEADLINE;
        while !blocked_writing_a_pipe(child.id()) {
            if let Some(st) = child.try_wait().unwrap() {
                panic!("the held keysmith next exited ({st}) before its pipe filled");
            }
            assert!(
                Instant::now() < until,
                "the held keysmith next never blocked on its full pipe"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        HeldCli { child, stdout }
    }

    /// Reads its output again until it exits or printed `more` bytes more
    /// (or [`AFTER`] passed: a handle that neither refuses nor goes on),
    /// then kills it; returns its values and, if it failed, its stderr.
    fn resume(mut self, more: usize) -> (Vec<i64>, Option<String>) {
        use std::io::Read;
        let mut stdout = self.stdout;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut read = Vec::new();
            let mut chunk = [0u8; 65536];
            while read.len() < more {
                match stdout.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = done_tx.send(());
            read
        });
        // Read enough, exited (end of file), or out of time: then it goes.
        let _ = done_rx.recv_timeout(AFTER);
        let _ = self.child.kill();
        let status = self.child.wait().unwrap();
        let read = reader.join().unwrap();
        let mut err = String::new();
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
        let values = common::complete_values(&read);
        common::assert_increasing(&values, "the held keysmith next");
        // Killed by us: it was still going (or stuck); exited non-zero: it failed.
        let failed = status.code().is_some_and(|c| c != 0);
        (values, failed.then_some(err))
    }
}

/// Whether a thread of process `pid` sleeps in the kernel writing a pipe
/// (`/proc/PID/task/*/wchan`: `pipe_write`, `anon_pipe_write` on newer kernels).
fn blocked_writing_a_pipe(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("wchan")).is_ok_and(|w| w.ends_with("pipe_write"))
    })
}

/// How the server meets the promoted standby.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// The server is restarted with the new primary's URL (and so are the
    /// `keysmith next` runs).
    Restarted,
    /// The server keeps running; a TCP proxy, its store address, switches
    /// from the crashed primary to the promoted standby (as HAProxy or a
    /// virtual IP would).
    BehindProxy,
}

/// The measured bug: the standby loses its primary for [`BLIP`], the primary
/// keeps serving and crashes, the standby is promoted.
async fn pg_failover(form: Form) {
    use keysmith_testsupport::pg_replica::{PgReplicaSet, TcpProxy};
    let what = format!("postgres failover, {form:?}");
    let Some(set) = PgReplicaSet::start() else {
        return;
    };
    let proxy = (form == Form::BehindProxy).then(|| TcpProxy::start(set.primary_port()));
    let url = match &proxy {
        Some(p) => p.postgres_url(),
        None => set.primary_url(),
    };
    common::ok(
        &url,
        &["create", "s", "--block", "10", "--failover-skip", "1000000"],
    );
    let mut srv = ServerProc::start_on(&url, &["--block-max", "1000"], &[]).await;
    let target = Target::new(Some(srv.base()), &url);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let load = Load::start(&target, &ledger);
    until_values(&ledger, WARM, "before the blip").await;
    let generation_before = generation(&url);
    tokio::task::block_in_place(|| {
        set.wait_standby_caught_up();
        set.cut_replication();
    });
    let at_cut = count(&ledger);
    // The blip: the primary serves alone.
    tokio::time::sleep(BLIP).await;
    tokio::task::block_in_place(|| set.crash_primary());
    let lost = count(&ledger) - at_cut;
    let hi = highest(&ledger);
    tokio::task::block_in_place(|| set.promote_standby());
    // Nothing has reached the standby since its promotion.
    let promoted_next = next_of(&set.standby_url());
    assert!(
        promoted_next <= hi,
        "{what}: the promoted standby did not lose the primary's last reservations \
         (next {promoted_next}, {hi} handed out): the blip did not happen"
    );
    match &proxy {
        Some(p) => p.switch_to(set.standby_port()),
        None => {
            target.set_http(None);
            srv.sigkill();
            srv = ServerProc::start_on(&set.standby_url(), &["--block-max", "1000"], &[]).await;
            target.set_store(&set.standby_url());
            target.set_http(Some(srv.base()));
        }
    }
    run_after(&ledger, lost, &what).await;
    load.stop().await;
    let dups = report(&what, &ledger, (promoted_next, hi + 1));
    assert_eq!(dups, 0, "{what}: {dups} values handed out twice");
    let new_url = match &proxy {
        Some(p) => p.postgres_url(),
        None => set.standby_url(),
    };
    assert_fence_acted(&what, &new_url, &ledger);
    assert_ne!(
        generation(&new_url),
        generation_before,
        "{what}: the promoted standby (a new timeline) is another generation"
    );
    let (went_back, _) = fence_metrics(&srv).await;
    if form == Form::BehindProxy {
        // The same server answered every request.
        let refused = ledger.lock().unwrap().went_back_http as f64;
        assert!(went_back >= refused, "{what}: {went_back} < {refused}");
    }
    drop(srv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_failover_server_restarted_on_new_primary() {
    pg_failover(Form::Restarted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_failover_behind_a_proxy_server_kept_running() {
    pg_failover(Form::BehindProxy).await;
}

/// A margin smaller than what the failover lost: the skip is not enough,
/// and the server, kept running behind the proxy, refuses the ranges below
/// what it reserved (503 `store_went_back`) rather than hand them out again.
/// HTTP clients only: a `keysmith next` process is a new handle that
/// remembers nothing, and with too small a margin would hand lost values
/// out again (that is what the margin is for).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_failover_margin_too_small_is_refused() {
    use keysmith_testsupport::pg_replica::{PgReplicaSet, TcpProxy};
    let what = "postgres failover, margin too small, server behind a proxy";
    let Some(set) = PgReplicaSet::start() else {
        return;
    };
    let proxy = TcpProxy::start(set.primary_port());
    let url = proxy.postgres_url();
    common::ok(
        &url,
        &["create", "s", "--block", "10", "--failover-skip", "100"],
    );
    let srv = ServerProc::start_on(&url, &["--block-max", "1000"], &[]).await;
    let target = Target::new(Some(srv.base()), &url);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let load = Load::start_with(&target, &ledger, 0);
    until_values(&ledger, WARM, "before the blip").await;
    tokio::task::block_in_place(|| {
        set.wait_standby_caught_up();
        set.cut_replication();
    });
    // A CLI handle that reserves during the blip and holds on.
    let held = tokio::task::block_in_place(|| HeldCli::start(&url));
    tokio::time::sleep(BLIP).await;
    tokio::task::block_in_place(|| set.crash_primary());
    let hi = highest(&ledger);
    tokio::task::block_in_place(|| set.promote_standby());
    let promoted_next = next_of(&set.standby_url());
    assert!(
        promoted_next + 100 <= hi,
        "{what}: the failover lost less than the margin (next {promoted_next}, {hi} handed out)"
    );
    proxy.switch_to(set.standby_port());
    // Until the server refuses, or has handed out as much as was lost.
    let from = count(&ledger);
    let started = Instant::now();
    while ledger.lock().unwrap().went_back_http == 0
        && count(&ledger) < from + (hi - promoted_next) as usize
        && started.elapsed() < AFTER
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    load.stop().await;
    // The held process goes on: it must refuse, not hand out what it got.
    let (held_values, held_error) = tokio::task::block_in_place(|| held.resume(1 << 20));
    {
        let mut l = ledger.lock().unwrap();
        let others: std::collections::HashSet<i64> = l.values.iter().copied().collect();
        let shared = held_values.iter().filter(|v| others.contains(v)).count();
        println!(
            "failover: {what}: the held keysmith next printed {} values, {shared} of them \
             also handed out by the server; it {}",
            held_values.len(),
            match &held_error {
                Some(e) => format!("failed: {}", e.trim()),
                None => "was still going".to_owned(),
            }
        );
        l.values.extend(held_values);
        match held_error {
            Some(e) if e.contains("went back") => l.went_back_cli += 1,
            Some(e) => {
                l.cli_failed += 1;
                l.cli_last_error = e;
            }
            None => {}
        }
    }
    let dups = report(what, &ledger, (promoted_next, hi + 1));
    assert_eq!(dups, 0, "{what}: {dups} values handed out twice");
    let refused = ledger.lock().unwrap().went_back_http;
    assert!(refused > 0, "{what}: no 503 store_went_back");
    let (went_back_cli, last_error) = {
        let l = ledger.lock().unwrap();
        (l.went_back_cli, l.cli_last_error.clone())
    };
    assert_eq!(
        went_back_cli, 1,
        "{what}: the held keysmith next did not stop saying the store went back: {last_error}"
    );
    let (went_back, _) = fence_metrics(&srv).await;
    assert!(
        went_back >= refused as f64,
        "{what}: keysmith_store_went_back_total {went_back}, {refused} refusals seen"
    );
}

/// A point-in-time restore: a base backup under load, more load, the
/// restore to an LSN between the two, the PostgreSQL server restarted on the
/// restored data at the same port while `keysmith serve` keeps running;
/// traffic resumes at once (the restored server's new timeline is a new
/// generation), then the operator runs `keysmith fence` as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_point_in_time_restore() {
    use keysmith_testsupport::pg_replica::{PgReplicaSet, RecoveryTarget};
    let what = "postgres point-in-time restore";
    let Some(set) = PgReplicaSet::start_primary_only() else {
        return;
    };
    let url = set.primary_url();
    common::ok(
        &url,
        &["create", "s", "--block", "10", "--failover-skip", "1000000"],
    );
    let srv = ServerProc::start_on(&url, &["--block-max", "1000"], &[]).await;
    let target = Target::new(Some(srv.base()), &url);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let load = Load::start(&target, &ledger);
    until_values(&ledger, WARM, "before the backup").await;
    let generation_before = generation(&url);
    let backup = tokio::task::block_in_place(|| set.base_backup());
    until_values(&ledger, count(&ledger) + WARM, "after the backup").await;
    let lsn = tokio::task::block_in_place(|| set.current_lsn());
    let at_target = count(&ledger);
    until_values(&ledger, at_target + 2 * WARM, "after the target").await;
    tokio::task::block_in_place(|| set.archive_now());
    load.stop().await;
    let lost = count(&ledger) - at_target;
    let hi = highest(&ledger);
    tokio::task::block_in_place(|| set.restore_primary(&backup, &RecoveryTarget::Lsn(lsn)));
    let restored_next = next_of(&url);
    assert!(
        restored_next <= hi,
        "{what}: the restore did not go back (next {restored_next}, {hi} handed out)"
    );
    // Traffic comes back at once: the new timeline alone must protect it.
    let load = Load::start(&target, &ledger);
    run_after(&ledger, lost, what).await;
    load.stop().await;
    let dups = report(what, &ledger, (restored_next, hi + 1));
    assert_eq!(dups, 0, "{what}: {dups} values handed out twice");
    assert_fence_acted(what, &url, &ledger);
    assert_ne!(
        generation(&url),
        generation_before,
        "{what}: the restored server (a new timeline) is another generation"
    );
    let (went_back, _) = fence_metrics(&srv).await;
    let refused = ledger.lock().unwrap().went_back_http as f64;
    assert!(went_back >= refused, "{what}: {went_back} < {refused}");
    // The runbook's fence after a restore, on PostgreSQL: a dry run, then
    // the fence, then traffic again.
    let hi = highest(&ledger);
    operator_fence(&url, what, &["s", "--dry-run"], &["--all"], hi);
    let load = Load::start(&target, &ledger);
    until_values(&ledger, count(&ledger) + AFTER_MIN, "after the fence").await;
    load.stop().await;
    let dups = duplicates(&ledger.lock().unwrap().values);
    assert_eq!(dups, 0, "{what}: {dups} values handed out twice");
    drop(srv);
}

/// An SQLite store file copied back from a backup (`VACUUM INTO`) while the
/// server is stopped, then the server started again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_restored_file_copy() {
    let what = "sqlite file copied back from a backup";
    let db = common::Db::new();
    let url = db.url();
    common::ok(
        &url,
        &["create", "s", "--block", "10", "--failover-skip", "1000000"],
    );
    // A pool as well: `fence --all` moves pools too.
    common::ok(&url, &["pool", "create", "p", "--size", "10"]);
    common::ok(&url, &["pool", "take", "p", "--count", "25"]);
    let mut srv = ServerProc::start_on(&url, &["--block-max", "1000"], &[]).await;
    let target = Target::new(Some(srv.base()), &url);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let load = Load::start(&target, &ledger);
    until_values(&ledger, WARM, "before the backup").await;
    let generation_before = generation(&url);
    let backup = db.dir.path().join("backup.db");
    tokio::task::block_in_place(|| {
        let conn = rusqlite::Connection::open(db.path()).unwrap();
        conn.busy_timeout(SERVER_DEADLINE).unwrap();
        conn.execute("VACUUM INTO ?1", [backup.to_str().unwrap()])
            .unwrap();
    });
    let at_backup = count(&ledger);
    until_values(&ledger, at_backup + 2 * WARM, "after the backup").await;
    load.stop().await;
    let lost = count(&ledger) - at_backup;
    let hi = highest(&ledger);
    srv.signal(libc::SIGTERM);
    srv.wait();
    for suffix in ["", "-wal", "-shm"] {
        let p = format!("{}{suffix}", db.path().display());
        let _ = std::fs::remove_file(p);
    }
    std::fs::copy(&backup, db.path()).unwrap();
    let restored_next = next_of(&url);
    assert!(
        restored_next <= hi,
        "{what}: the copy did not go back (next {restored_next}, {hi} handed out)"
    );
    // A copy keeps its store id: the generation cannot show the restore.
    assert_eq!(
        generation(&url),
        generation_before,
        "{what}: the copy is the same generation"
    );
    // Only the operator's fence helps.
    let fenced = operator_fence(&url, what, &["--all", "--dry-run"], &["--all"], hi);
    assert!(
        fenced["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == "pool" && c["name"] == "p"),
        "{what}: fence --all did not move pool p: {fenced}"
    );
    let srv = ServerProc::start_on(&url, &["--block-max", "1000"], &[]).await;
    target.set_http(Some(srv.base()));
    let load = Load::start(&target, &ledger);
    run_after(&ledger, lost, what).await;
    load.stop().await;
    let dups = report(what, &ledger, (restored_next, hi + 1));
    assert_eq!(dups, 0, "{what}: {dups} values handed out twice");
    let v = show(&url);
    assert_eq!(shown(&v, "failover_skip"), SKIP, "{what}: {v}");
    fence_metrics(&srv).await;
}

/// An etcd snapshot restore: `etcdctl snapshot save` under load, more load,
/// every node stopped and restored from the snapshot into fresh data
/// directories, started at the same endpoints; `keysmith serve` keeps running.
#[cfg(feature = "etcd")]
async fn etcd_snapshot_restore(nodes: usize) {
    use keysmith_testsupport::etcd::EtcdCluster;
    use keysmith_testsupport::etcd_restore::EtcdTools;
    let what = format!("etcd snapshot restore, {nodes} node(s)");
    let Some(mut cluster) = EtcdCluster::start(nodes) else {
        return;
    };
    let Some(tools) = EtcdTools::find() else {
        return;
    };
    let url = cluster.url();
    common::ok(&url, &["create", "s", "--block", "10"]);
    // The margin set afterwards, with alter.
    common::ok(&url, &["alter", "s", "--failover-skip", "1000000"]);
    let srv = ServerProc::start_on(&url, &["--block-max", "1000"], &[]).await;
    let target = Target::new(Some(srv.base()), &url);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let load = Load::start(&target, &ledger);
    until_values(&ledger, WARM, "before the snapshot").await;
    let snapshot = tokio::task::block_in_place(|| tools.save(&cluster, 0));
    let at_snapshot = count(&ledger);
    until_values(&ledger, at_snapshot + 2 * WARM, "after the snapshot").await;
    load.stop().await;
    let lost = count(&ledger) - at_snapshot;
    let hi = highest(&ledger);
    let id_before = tools.cluster_id(&cluster, 0);
    tokio::task::block_in_place(|| tools.restore(&mut cluster, &snapshot));
    let id_after = tools.cluster_id(&cluster, 0);
    println!("failover: {what}: cluster id {id_before:x} before the restore, {id_after:x} after");
    let restored_next = next_of(&url);
    assert!(
        restored_next <= hi,
        "{what}: the restore did not go back (next {restored_next}, {hi} handed out)"
    );
    let load = Load::start(&target, &ledger);
    run_after(&ledger, lost, &what).await;
    load.stop().await;
    let dups = report(&what, &ledger, (restored_next, hi + 1));
    assert_eq!(dups, 0, "{what}: {dups} values handed out twice");
    assert_fence_acted(&what, &url, &ledger);
    let (went_back, _) = fence_metrics(&srv).await;
    let refused = ledger.lock().unwrap().went_back_http as f64;
    assert!(went_back >= refused, "{what}: {went_back} < {refused}");
    drop(srv);
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_snapshot_restore_one_node() {
    etcd_snapshot_restore(1).await;
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_snapshot_restore_three_nodes() {
    etcd_snapshot_restore(3).await;
}

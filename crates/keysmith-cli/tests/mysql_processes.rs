//! Many `keysmith` processes on one MariaDB database (the `mysql://`
//! store, feature `mysql`), processes killed with SIGKILL, and the server
//! itself killed (SIGKILL: InnoDB crash recovery on restart) in the middle
//! of a run: no value is ever handed out twice.
//!
//! The servers are throwaway ones from `keysmith-testsupport`; without the
//! MariaDB binaries these tests print why and pass, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.
#![cfg(feature = "mysql")]

mod common;

use std::collections::HashSet;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::{DEADLINE, KEYSMITH, Kill, STRATEGIES, assert_increasing, complete_values};
use keysmith_testsupport::mariadb::TempMariaDb;

/// A store URL: a database of its own on a MariaDB server.
struct My {
    url: String,
}

impl My {
    fn new(server: &TempMariaDb) -> Self {
        My {
            url: server.fresh_url(),
        }
    }

    /// A command with `--store` set to this database.
    fn cmd(&self) -> Command {
        let mut c = Command::new(KEYSMITH);
        c.arg("--store").arg(&self.url).env_remove("KEYSMITH_STORE");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "keysmith {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `keysmith next NAME --strategy S ...` with stdout piped.
    fn next(&self, name: &str, count: &str, strategy: &str, block: Option<&str>) -> Command {
        let mut c = self.cmd();
        c.args(["next", name, "--count", count, "--strategy", strategy]);
        if let Some(b) = block {
            c.args(["--block", b]);
        }
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    /// The row's next free value, from `keysmith show --json`.
    fn next_free(&self, name: &str) -> i64 {
        let out = self.ok(&["show", name, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["next"]
            .as_i64()
            .unwrap_or_else(|| panic!("no next in {out}"))
    }
}

/// Six processes at once, each strategy, small blocks so they collide
/// often: all values unique, each process's values increasing.
#[test]
fn processes_never_share_a_value() {
    let Some(server) = TempMariaDb::shared() else {
        return;
    };
    let my = My::new(server);
    for strategy in STRATEGIES {
        common::processes_never_share_a_value(&my.url, strategy, strategy, 6, 300);
    }
}

/// Children allocate in a loop and are killed with SIGKILL at random
/// moments (chosen by progress), several at once, over several rounds: no
/// value is ever seen twice, and afterwards the sequence resumes above
/// everything handed out. A child killed inside a transaction (the locked
/// strategy holds a row lock) is rolled back by the server when its
/// connection drops.
#[test]
fn sigkill_at_random_moments_never_repeats_a_value() {
    let Some(server) = TempMariaDb::shared() else {
        return;
    };
    let my = My::new(server);
    for strategy in STRATEGIES {
        common::sigkill_rounds(&my.url, strategy, strategy, 6, Kill::EachWhenDone);
    }
}

/// A `keysmith next` child whose stdout is drained by a thread, so that
/// progress can be watched while it runs.
struct Runner {
    who: String,
    child: Child,
    lines: Arc<AtomicUsize>,
    stdout: JoinHandle<Vec<u8>>,
}

impl Runner {
    fn spawn(mut cmd: Command, who: String) -> Runner {
        let mut child = cmd.spawn().unwrap();
        let mut pipe = child.stdout.take().unwrap();
        let lines = Arc::new(AtomicUsize::new(0));
        let counter = lines.clone();
        let stdout = thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => {
                        let newlines = buf[..n].iter().filter(|b| **b == b'\n').count();
                        got.extend_from_slice(&buf[..n]);
                        counter.fetch_add(newlines, Ordering::SeqCst);
                    }
                }
            }
        });
        Runner {
            who,
            child,
            lines,
            stdout,
        }
    }

    /// Waits for the child to exit (killing it and failing the test past
    /// [`DEADLINE`]); returns its status, its values and its stderr.
    fn finish(mut self) -> (ExitStatus, Vec<i64>, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > DEADLINE {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("{}: still running after {DEADLINE:?}", self.who);
            }
            thread::sleep(Duration::from_millis(10));
        };
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let out = self.stdout.join().unwrap();
        let values = complete_values(&out);
        assert_increasing(&values, &self.who);
        (status, values, stderr)
    }
}

/// Every value handed out so far, and the largest.
#[derive(Default)]
struct Seen {
    values: HashSet<i64>,
    max: i64,
}

impl Seen {
    fn record(&mut self, who: &str, values: Vec<i64>) {
        for v in values {
            assert!(self.values.insert(v), "{who}: {v} handed out twice");
            self.max = self.max.max(v);
        }
    }
}

/// Waits until every runner has printed `lines` values, failing the test
/// when one exits first (with its stderr) or past [`DEADLINE`].
fn wait_for_progress(runners: &mut [Runner], lines: usize) {
    let start = Instant::now();
    while !runners
        .iter()
        .all(|r| r.lines.load(Ordering::SeqCst) >= lines)
    {
        for r in runners.iter_mut() {
            if let Some(status) = r.child.try_wait().unwrap() {
                let mut stderr = String::new();
                let _ = r.child.stderr.take().unwrap().read_to_string(&mut stderr);
                panic!("{} exited early: {status}; {stderr}", r.who);
            }
        }
        let counts: Vec<usize> = runners
            .iter()
            .map(|r| r.lines.load(Ordering::SeqCst))
            .collect();
        assert!(
            start.elapsed() < DEADLINE,
            "timed out waiting for every runner to print {lines} values: {counts:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts the one-line `error: store unavailable: ...` and a failure exit.
fn assert_unavailable(who: &str, status: ExitStatus, stderr: &str, port: u16) {
    assert!(!status.success(), "{who}: succeeded with the server down");
    assert_eq!(status.code(), Some(1), "{who}: {status}; stderr: {stderr}");
    assert!(
        stderr.starts_with("error: store unavailable: ") && stderr.ends_with('\n'),
        "{who}: stderr is {stderr:?}"
    );
    assert_eq!(stderr.lines().count(), 1, "{who}: stderr is {stderr:?}");
    assert!(stderr.contains(&port.to_string()), "{who}: {stderr:?}");
}

/// The server is killed with SIGKILL (a crash as far as its data files
/// know) while `keysmith next` processes stream values, two
/// per strategy (block 1 and block 4), then restarted (crash recovery);
/// twice. Processes running during the stop fail with one line
/// `error: store unavailable: ...` and exit 1, as does one started while
/// the server is down; processes started after the restart succeed. Across
/// all of them no value is handed out twice, after each restart the row
/// lies above every value seen (each block was committed before its first
/// value was printed), and the sequence resumes above all of them.
///
/// Each runner has its own sequence: optimistic concurrency is not fair, and
/// an optimistic handle that shares a sequence with a handle reserving one
/// value at a time without pause can lose nearly every race (its row is
/// stale by the time its put lands). That is contention, not what this test
/// is about; `processes_never_share_a_value` covers shared sequences.
#[test]
fn server_crash_mid_run_fails_cleanly_and_repeats_no_value() {
    let Some(server) = TempMariaDb::start() else {
        return;
    };
    let my = My::new(&server);
    // One sequence per (strategy, block size): (name, strategy, block).
    let sequences: Vec<(String, &str, &str)> = STRATEGIES
        .iter()
        .flat_map(|&st| ["1", "4"].map(|b| (format!("{st}-{b}"), st, b)))
        .collect();
    for (name, _, _) in &sequences {
        my.ok(&["create", name, "--block", "4"]);
    }
    let mut seen: Vec<Seen> = sequences.iter().map(|_| Seen::default()).collect();
    // (index into `sequences`, runner) for each sequence.
    let spawn = |count: &str, label: &str| -> Vec<(usize, Runner)> {
        sequences
            .iter()
            .enumerate()
            .map(|(s, (name, strategy, block))| {
                let r = Runner::spawn(
                    my.next(name, count, strategy, Some(block)),
                    format!("{label} ({strategy}, block {block})"),
                );
                (s, r)
            })
            .collect()
    };

    for round in 0..2 {
        // Streaming processes, each asking for far more values than it will get.
        let (idx, mut runners): (Vec<usize>, Vec<Runner>) = spawn(
            "1000000000",
            &format!("round {round}: running at the crash"),
        )
        .into_iter()
        .unzip();
        wait_for_progress(&mut runners, 20);

        server.kill();

        // Every runner was still streaming, so it fails at its next store call.
        for (s, r) in idx.into_iter().zip(runners) {
            let who = r.who.clone();
            let (status, values, stderr) = r.finish();
            assert_unavailable(&who, status, &stderr, server.port());
            assert!(values.len() >= 20, "{who}: lost printed values");
            seen[s].record(&who, values);
        }
        // One started while the server is down fails the same way.
        let out = my.run(&["next", "atomic-4", "--count", "5"]);
        assert_unavailable(
            "started while down",
            out.status,
            &String::from_utf8_lossy(&out.stderr),
            server.port(),
        );
        assert!(out.stdout.is_empty(), "printed values with the server down");

        server.restart();

        let mut recovered = vec![0i64; sequences.len()];
        for (s, (name, _, _)) in sequences.iter().enumerate() {
            recovered[s] = my.next_free(name);
            assert!(
                recovered[s] > seen[s].max,
                "round {round}, {name}: after recovery the row is at {}, but {} was handed out",
                recovered[s],
                seen[s].max
            );
        }

        // Processes started after the restart succeed.
        for (s, r) in spawn("200", &format!("round {round}: after the restart")) {
            let who = r.who.clone();
            let (status, values, stderr) = r.finish();
            assert!(status.success(), "{who}: {status}; stderr: {stderr}");
            assert_eq!(values.len(), 200, "{who}");
            assert!(
                values[0] >= recovered[s],
                "{who}: {} is below the recovered row {}",
                values[0],
                recovered[s]
            );
            seen[s].record(&who, values);
        }
    }

    for (s, (name, strategy, _)) in sequences.iter().enumerate() {
        let after: i64 = my
            .ok(&["next", name, "--strategy", strategy])
            .trim()
            .parse()
            .unwrap();
        assert!(
            after > seen[s].max,
            "{name}: resumed at {after}, below {}",
            seen[s].max
        );
    }
}

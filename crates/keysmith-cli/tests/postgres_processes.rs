//! Many `keysmith` processes on one PostgreSQL database, processes killed
//! with SIGKILL, and the server itself stopped the hard way
//! (`pg_ctl stop -m immediate`) in the middle of a run: no value is ever
//! handed out twice.
//!
//! The servers are throwaway ones from `keysmith-testsupport`; without the
//! PostgreSQL binaries these tests print why and pass, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.

mod common;

use std::collections::HashSet;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::{DEADLINE, KEYSMITH, Kill, STRATEGIES, assert_increasing, complete_values};
use keysmith_testsupport::postgres::TempPostgres;

/// A store URL: one schema of a PostgreSQL database.
struct Pg {
    url: String,
}

impl Pg {
    fn new(server: &TempPostgres, schema: &str) -> Self {
        Pg {
            url: format!("{}?schema={schema}", server.url()),
        }
    }

    /// A command with `--store` set to this schema.
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
    let Some(server) = TempPostgres::shared() else {
        return;
    };
    let pg = Pg::new(server, "procs_unique");
    for strategy in STRATEGIES {
        common::processes_never_share_a_value(&pg.url, strategy, strategy, 6, 300);
    }
}

/// Children allocate in a loop and are killed with SIGKILL at random
/// moments (chosen by progress), several at once, over several rounds: no
/// value is ever seen twice, and afterwards the sequence resumes above
/// everything handed out. A child killed inside a transaction (the locked
/// strategy holds a row lock) is rolled back by the server.
#[test]
fn sigkill_at_random_moments_never_repeats_a_value() {
    let Some(server) = TempPostgres::shared() else {
        return;
    };
    let pg = Pg::new(server, "procs_kill");
    for strategy in STRATEGIES {
        common::sigkill_rounds(&pg.url, strategy, strategy, 6, Kill::EachWhenDone);
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

/// The server is stopped with `pg_ctl stop -m immediate` (a crash as far as
/// its data files know) while `keysmith next` processes stream values, two
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
    let Some(server) = TempPostgres::start() else {
        return;
    };
    let pg = Pg::new(&server, "procs_crash");
    // One sequence per (strategy, block size): (name, strategy, block).
    let sequences: Vec<(String, &str, &str)> = STRATEGIES
        .iter()
        .flat_map(|&st| ["1", "4"].map(|b| (format!("{st}-{b}"), st, b)))
        .collect();
    for (name, _, _) in &sequences {
        pg.ok(&["create", name, "--block", "4"]);
    }
    let mut seen: Vec<Seen> = sequences.iter().map(|_| Seen::default()).collect();
    // (index into `sequences`, runner) for each sequence.
    let spawn = |count: &str, label: &str| -> Vec<(usize, Runner)> {
        sequences
            .iter()
            .enumerate()
            .map(|(s, (name, strategy, block))| {
                let r = Runner::spawn(
                    pg.next(name, count, strategy, Some(block)),
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

        server.stop_immediate();

        // Every runner was still streaming, so it fails at its next store call.
        for (s, r) in idx.into_iter().zip(runners) {
            let who = r.who.clone();
            let (status, values, stderr) = r.finish();
            assert_unavailable(&who, status, &stderr, server.port());
            assert!(values.len() >= 20, "{who}: lost printed values");
            seen[s].record(&who, values);
        }
        // One started while the server is down fails the same way.
        let out = pg.run(&["next", "atomic-4", "--count", "5"]);
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
            recovered[s] = pg.next_free(name);
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
        let after: i64 = pg
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

/// `psql` beside the server's other binaries, or on the PATH.
fn psql() -> std::path::PathBuf {
    let dirs = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/psql"));
    dirs.into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| "psql".into())
}

/// The SQL functions `next_key` and `next_keys` allocate from the same rows
/// as the library: psql sessions calling them, CLI processes (atomic and
/// optimistic) and a library handle, all at once on one sequence, never
/// share a value. A missing sequence and an exhausted one are errors that
/// name it, and a refused `next_keys` takes nothing.
#[test]
fn sql_functions_allocate_beside_the_library_and_the_cli() {
    let Some(server) = TempPostgres::shared() else {
        return;
    };
    let pg = Pg::new(server, "sqlfn");
    pg.ok(&["create", "orders", "--block", "5"]);
    let psql_run = |sql: &[String]| {
        let mut c = Command::new(psql());
        c.args(["-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", &server.url()]);
        for s in sql {
            c.args(["-c", s]);
        }
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    };
    // Each -c is its own transaction: the row lock is held for one call.
    let mut sql: Vec<String> = (0..60)
        .map(|_| "SELECT sqlfn.next_key('orders')".to_owned())
        .collect();
    sql.extend((0..10).map(|_| "SELECT * FROM sqlfn.next_keys('orders', 7)".to_owned()));
    let mut children: Vec<(String, std::process::Child)> = Vec::new();
    for i in 0..3 {
        children.push((format!("psql {i}"), psql_run(&sql).spawn().unwrap()));
    }
    for (i, strategy) in ["atomic", "optimistic"].into_iter().enumerate() {
        children.push((
            format!("cli {i}"),
            pg.next("orders", "300", strategy, Some("3"))
                .spawn()
                .unwrap(),
        ));
    }
    let url = pg.url.clone();
    let library = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let store = keysmith::store::open(&url).await.unwrap();
            let seq = keysmith::sequence::Sequence::builder()
                .store(store)
                .name("orders")
                .block(4)
                .build()
                .await
                .unwrap();
            let mut got = Vec::new();
            for _ in 0..200 {
                got.push(seq.next().await.unwrap());
            }
            seq.close().await.unwrap();
            got
        })
    });
    let mut all = HashSet::new();
    let mut total = 0;
    for (who, c) in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{who}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let values = complete_values(&out.stdout);
        if who.starts_with("psql") {
            assert_eq!(values.len(), 60 + 70, "{who}");
        } else {
            assert_eq!(values.len(), 300, "{who}");
            assert_increasing(&values, &who);
        }
        total += values.len();
        all.extend(values);
    }
    let lib = library.join().unwrap();
    assert_increasing(&lib, "library");
    total += lib.len();
    all.extend(lib);
    assert_eq!(all.len(), total, "a value was handed out twice");

    // A missing sequence is an error naming it, never a default.
    let out = psql_run(&["SELECT sqlfn.next_key('nope')".into()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'nope' does not exist"), "{err}");

    // Near the maximum: next_keys asking for more than is left takes nothing.
    pg.ok(&["create", "few", "--max", "3", "--block", "1"]);
    let out = psql_run(&["SELECT * FROM sqlfn.next_keys('few', 5)".into()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only 3 values left"), "{err}");
    assert_eq!(pg.next_free("few"), 1, "the refused call took nothing");
    let out = psql_run(&["SELECT * FROM sqlfn.next_keys('few', 3)".into()])
        .output()
        .unwrap();
    assert_eq!(complete_values(&out.stdout), vec![1, 2, 3]);
    let out = psql_run(&["SELECT sqlfn.next_key('few')".into()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exhausted"), "{err}");
}

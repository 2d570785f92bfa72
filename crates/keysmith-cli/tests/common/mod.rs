//! Helpers for running the real `keysmith` binary.
#![allow(dead_code)]

pub mod server;

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::RngExt;

pub mod load;

/// The binary under test.
pub const KEYSMITH: &str = env!("CARGO_BIN_EXE_keysmith");

/// A temporary directory with a database file in it.
pub struct Db {
    pub dir: tempfile::TempDir,
}

impl Db {
    pub fn new() -> Self {
        Db {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("k.db")
    }

    pub fn url(&self) -> String {
        format!("sqlite://{}", self.path().display())
    }

    /// A command with `--store` set to this database.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(KEYSMITH);
        c.arg("--store")
            .arg(self.url())
            .env_remove("KEYSMITH_STORE");
        c
    }

    /// Runs `keysmith --store URL args...` and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "keysmith {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs and expects failure; returns (exit code, stderr).
    pub fn fails(&self, args: &[&str]) -> (i32, String) {
        let out = self.run(args);
        assert!(!out.status.success(), "keysmith {args:?} should fail");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stderr).unwrap(),
        )
    }
}

/// Parses complete lines (ending in '\n') as integers; a line cut short by
/// a kill is ignored.
pub fn complete_values(bytes: &[u8]) -> Vec<i64> {
    let text = String::from_utf8_lossy(bytes);
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete.lines().map(|l| l.parse().unwrap()).collect()
}

pub fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_default()
}

/// The three allocation strategies, as the CLI names them.
pub const STRATEGIES: [&str; 3] = ["optimistic", "locked", "atomic"];

/// How long an awaited condition may take before a test fails: a bound on a
/// hang on a loaded machine (a locked reservation may wait out a dead
/// holder's lease), not a performance threshold.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// `keysmith --store URL` with nothing from the environment.
pub fn keysmith(url: &str) -> Command {
    let mut c = Command::new(KEYSMITH);
    c.arg("--store").arg(url).env_remove("KEYSMITH_STORE");
    c
}

/// Runs `keysmith --store URL args...`, expects success, returns stdout.
pub fn ok(url: &str, args: &[&str]) -> String {
    let out = keysmith(url).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "keysmith {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn assert_increasing(values: &[i64], who: &str) {
    for w in values.windows(2) {
        assert!(w[0] < w[1], "{who}: {} then {}", w[0], w[1]);
    }
}

/// Reads a child's stdout to its end in a thread, into a buffer the test
/// can watch grow.
pub fn drain(mut out: ChildStdout) -> (Arc<Mutex<Vec<u8>>>, JoinHandle<()>) {
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

/// `processes` concurrent `keysmith next SEQ --count COUNT` on the store at
/// `url` (one with block 1, the others block 3, so they collide often): all
/// values unique, each process's values increasing. Creates `seq`.
/// With blocks this small optimistic puts collide often: the default retry
/// budget must see every process through.
pub fn processes_never_share_a_value(
    url: &str,
    seq: &str,
    strategy: &str,
    processes: usize,
    count: usize,
) {
    ok(url, &["create", seq, "--block", "3"]);
    let children: Vec<Child> = (0..processes)
        .map(|i| {
            keysmith(url)
                .args([
                    "next",
                    seq,
                    "--count",
                    &count.to_string(),
                    "--strategy",
                    strategy,
                ])
                .args(["--block", if i == 0 { "1" } else { "3" }])
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
        assert_eq!(values.len(), count, "{strategy}");
        assert_increasing(&values, strategy);
        total += values.len();
        all.extend(values);
    }
    assert_eq!(all.len(), total, "{strategy}: a value was handed out twice");
}

/// How the children of a SIGKILL round die.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// Each as soon as it has printed its share. Needed where the process
    /// that just won a put tends to win the next ones too (optimistic and
    /// atomic on etcd): the others could starve until it dies.
    EachWhenDone,
    /// All at once, when the last has printed its share (each is wherever
    /// it is then). Needed for etcd's locked strategy: a child killed while
    /// holding or queued for the lock blocks the others until its lease
    /// expires, and one such wait per round keeps the test short.
    Together,
}

struct Victim {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    reader: JoinHandle<()>,
    want: usize,
    killed: bool,
}

/// Rounds of 3 children running `keysmith next SEQ` in a loop on the store at
/// `url`, killed with SIGKILL at moments chosen by progress (a random amount
/// of output first), so kills land mid-block, mid-refill and mid-transaction.
/// No value is ever seen twice, each child's values increase, and afterwards
/// the sequence resumes above everything handed out. Creates `seq`.
pub fn sigkill_rounds(url: &str, seq: &str, strategy: &str, rounds: usize, kill: Kill) {
    ok(url, &["create", seq, "--block", "10"]);
    let mut rng = rand::rng();
    let mut seen = HashSet::new();
    let mut max_seen = 0;
    for round in 0..rounds {
        let mut children: Vec<Victim> = (0..3)
            .map(|_| {
                let mut child = keysmith(url)
                    .args(["next", seq, "--count", "100000000", "--strategy", strategy])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                let (out, reader) = drain(child.stdout.take().unwrap());
                let want = rng.random_range(1..4000);
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
                if (done && kill == Kill::EachWhenDone) || all_ready {
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
    let after: i64 = ok(url, &["next", seq, "--strategy", strategy])
        .trim()
        .parse()
        .unwrap();
    assert!(
        after > max_seen,
        "{strategy}: resumed at {after}, below {max_seen}"
    );
}

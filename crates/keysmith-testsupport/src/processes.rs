//! The second conformance tier: process and crash scenarios written once and
//! run by every backend.
//!
//! A [`ProcessBackend`] gives a store URL and, where the backend has a server
//! a test may crash, a [`CrashableServer`] that kills it the hard way and
//! starts it again on the same data. [`Processes`] runs the real `keysmith`
//! binary against it: many `keysmith next` processes at once, processes
//! killed with SIGKILL mid-allocation, the store's server killed and
//! restarted under load, id generators and gap-free ticket holders killed.
//!
//! The oracle is the same everywhere: every value printed by every process is
//! collected, no value appears twice (set sizes), and each process's values
//! increase.
//!
//! Backends: [`Sqlite`] (no server: its crash tests kill the client
//! processes), [`Postgres`], [`MariaDb`] (`mysql://`, the CLI's feature
//! `mysql`) and [`Etcd`] (the CLI's feature `etcd`). Each has `shared()`, on
//! the test binary's one shared server (no [`ProcessBackend::server`]: a
//! shared server must not be crashed), and `start()`, on a server of its own
//! that the server-crash scenario may kill.
//!
//! Scenarios run one at a time in a test binary (a process-wide lock): each
//! starts up to 32 processes, and two such at once on a small machine make
//! the deadlines, not the stores, the thing under test.

use std::collections::{BTreeSet, HashSet};

use keysmith_core::ids::IdFormat;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rand::RngExt;

use crate::etcd::TempEtcd;
use crate::mariadb::TempMariaDb;
use crate::postgres::TempPostgres;

/// The three allocation strategies, as the CLI names them.
pub const STRATEGIES: [&str; 3] = ["optimistic", "locked", "atomic"];

/// How many `keysmith next` processes run at once in
/// [`Processes::never_share_a_value`]: the scenario's two sizes.
pub const PROCESSES: [usize; 2] = [8, 32];

/// How long an awaited condition may take before a test fails: a bound on a
/// hang on a loaded machine (a locked reservation may wait out a dead
/// holder's lease), not a performance threshold.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// `url` with a short wait for locks (SQLite's busy timeout, the pooled SQL
/// stores' operation timeout): a call that meets a lock held by a paused
/// process gives up soon instead of waiting for it.
fn quick_url(url: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    if url.starts_with("sqlite://") {
        format!("{url}{sep}busy_timeout_ms=300")
    } else if url.starts_with("postgres") || url.starts_with("mysql") {
        format!("{url}{sep}timeout=2")
    } else {
        url.to_owned()
    }
}

/// Parses complete lines (ending in '\n') as integers; a line cut short by
/// a kill is ignored.
///
/// # Panics
/// When a complete line is not an integer.
pub fn complete_values(bytes: &[u8]) -> Vec<i64> {
    let text = String::from_utf8_lossy(bytes);
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete
        .lines()
        .map(|l| {
            l.parse()
                .unwrap_or_else(|e| panic!("not an integer line: {l:?} ({e})"))
        })
        .collect()
}

/// The complete lines of a process's output (a killed process may leave a
/// partial last line, which is dropped).
pub fn complete_lines(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete.lines().map(str::to_owned).collect()
}

/// Asserts that `values` strictly increase; `who` names them in the panic.
///
/// # Panics
/// At the first value not above the one before it.
pub fn assert_increasing(values: &[i64], who: &str) {
    for w in values.windows(2) {
        assert!(w[0] < w[1], "{who}: {} then {}", w[0], w[1]);
    }
}

/// Reads a child's stdout to its end in a thread, into a buffer the test
/// can watch grow. The thread ends at end of file (the child's exit).
pub fn drain(mut out: ChildStdout) -> (Arc<Mutex<Vec<u8>>>, JoinHandle<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = buf.clone();
    let reader = thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = out.read(&mut chunk) {
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    (buf, reader)
}

/// How the children of a SIGKILL round die.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
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

/// A store the process scenarios run on.
pub trait ProcessBackend: Sync {
    /// A short name for messages: `sqlite`, `postgres`, `mysql`, `etcd`.
    fn name(&self) -> &str;

    /// The URL of a store no other caller uses (a new file, schema, database
    /// or key prefix at each call), empty until a scenario creates objects.
    fn fresh_url(&self) -> String;

    /// The server a scenario may kill and restart, or `None`: SQLite has no
    /// server, and a server shared with other tests must not be crashed.
    fn server(&self) -> Option<&dyn CrashableServer>;

    /// How [`Processes::sigkill_rounds`] kills `strategy`'s children on this
    /// store: the number of rounds and when the children die. Six rounds,
    /// each child when it has printed its share, unless the backend says
    /// otherwise.
    fn sigkill_plan(&self, strategy: &str) -> (usize, Kill) {
        let _ = strategy;
        (6, Kill::EachWhenDone)
    }
}

/// A store server a test may crash and start again on the same data.
pub trait CrashableServer {
    /// Stops the server the hard way (no shutdown, clients cut off; the next
    /// start runs crash recovery) and returns when it has exited.
    ///
    /// # Panics
    /// When it is not running.
    fn crash(&self);

    /// Starts the server again on the same port and data and returns when
    /// it accepts clients.
    ///
    /// # Panics
    /// When it is running already, or does not come up.
    fn restart(&self);

    /// The port clients reach the server on (their errors name it).
    fn port(&self) -> u16;
}

/// A server for the backends: the test binary's shared one, or one of the
/// test's own (which only then is crashable).
enum Held<T: 'static> {
    Shared(&'static T),
    Own(T),
}

impl<T> Held<T> {
    fn get(&self) -> &T {
        match self {
            Held::Shared(t) => t,
            Held::Own(t) => t,
        }
    }
}

fn random_suffix() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// SQLite files in a temporary directory, removed on drop. No server: its
/// crash scenarios kill the client processes, and
/// [`Processes::server_crash_mid_run`] does not apply.
pub struct Sqlite {
    dir: tempfile::TempDir,
    files: AtomicUsize,
}

impl Sqlite {
    /// A new temporary directory for the store files.
    ///
    /// # Panics
    /// When no temporary directory can be created.
    pub fn new() -> Sqlite {
        Sqlite {
            dir: tempfile::tempdir().expect("cannot create a temporary directory"),
            files: AtomicUsize::new(0),
        }
    }
}

impl Default for Sqlite {
    fn default() -> Self {
        Sqlite::new()
    }
}

impl ProcessBackend for Sqlite {
    fn name(&self) -> &str {
        "sqlite"
    }
    fn fresh_url(&self) -> String {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        format!(
            "sqlite://{}",
            self.dir.path().join(format!("{n}.db")).display()
        )
    }
    fn server(&self) -> Option<&dyn CrashableServer> {
        None
    }
}

/// PostgreSQL from [`TempPostgres`]; each store a schema of its own.
/// Crashing is `pg_ctl stop -m immediate` (SIGQUIT to the postmaster): a
/// SIGKILLed postmaster leaves its backends holding the shared memory and
/// the restart refuses to start.
pub struct Postgres(Held<TempPostgres>);

impl Postgres {
    /// On the shared server (not crashable); `None` as [`TempPostgres::shared`].
    pub fn shared() -> Option<Postgres> {
        TempPostgres::shared().map(|s| Postgres(Held::Shared(s)))
    }

    /// On a server of its own (crashable); `None` as [`TempPostgres::start`].
    pub fn start() -> Option<Postgres> {
        TempPostgres::start().map(|s| Postgres(Held::Own(s)))
    }

    /// The server (shared or the test's own).
    pub fn temp(&self) -> &TempPostgres {
        self.0.get()
    }
}

impl ProcessBackend for Postgres {
    fn name(&self) -> &str {
        "postgres"
    }
    fn fresh_url(&self) -> String {
        format!("{}?schema=p{}", self.0.get().url(), random_suffix())
    }
    fn server(&self) -> Option<&dyn CrashableServer> {
        match self.0 {
            Held::Own(_) => Some(self),
            Held::Shared(_) => None,
        }
    }
}

impl CrashableServer for Postgres {
    fn crash(&self) {
        self.0.get().stop_immediate();
    }
    fn restart(&self) {
        self.0.get().restart();
    }
    fn port(&self) -> u16 {
        self.0.get().port()
    }
}

/// MariaDB from [`TempMariaDb`] (`mysql://` stores, the CLI's feature
/// `mysql`); each store a database of its own. Crashing is SIGKILL (InnoDB
/// crash recovery at the restart).
pub struct MariaDb(Held<TempMariaDb>);

impl MariaDb {
    /// On the shared server (not crashable); `None` as [`TempMariaDb::shared`].
    pub fn shared() -> Option<MariaDb> {
        TempMariaDb::shared().map(|s| MariaDb(Held::Shared(s)))
    }

    /// On a server of its own (crashable); `None` as [`TempMariaDb::start`].
    pub fn start() -> Option<MariaDb> {
        TempMariaDb::start().map(|s| MariaDb(Held::Own(s)))
    }
}

impl ProcessBackend for MariaDb {
    fn name(&self) -> &str {
        "mysql"
    }
    fn fresh_url(&self) -> String {
        self.0.get().fresh_url()
    }
    fn server(&self) -> Option<&dyn CrashableServer> {
        match self.0 {
            Held::Own(_) => Some(self),
            Held::Shared(_) => None,
        }
    }
}

impl CrashableServer for MariaDb {
    fn crash(&self) {
        self.0.get().kill();
    }
    fn restart(&self) {
        self.0.get().restart();
    }
    fn port(&self) -> u16 {
        self.0.get().port()
    }
}

/// One etcd node from [`TempEtcd`] (the CLI's feature `etcd`); each store a
/// key prefix of its own. Crashing is SIGKILL. On etcd the locked strategy's
/// SIGKILL rounds kill a round's children together, three rounds: a child
/// killed holding or queued for the lock blocks the others until its lease
/// expires, once per round.
pub struct Etcd(EtcdHeld);

enum EtcdHeld {
    Shared(&'static TempEtcd),
    Own(Mutex<TempEtcd>),
}

impl Etcd {
    /// On the shared node (not crashable); `None` as [`TempEtcd::shared`].
    pub fn shared() -> Option<Etcd> {
        TempEtcd::shared().map(|s| Etcd(EtcdHeld::Shared(s)))
    }

    /// On a node of its own (crashable); `None` as [`TempEtcd::start`].
    pub fn start() -> Option<Etcd> {
        TempEtcd::start().map(|s| Etcd(EtcdHeld::Own(Mutex::new(s))))
    }

    fn own(&self) -> MutexGuard<'_, TempEtcd> {
        match &self.0 {
            EtcdHeld::Own(m) => m.lock().unwrap_or_else(|p| p.into_inner()),
            EtcdHeld::Shared(_) => panic!("the shared etcd node is not crashable"),
        }
    }
}

impl ProcessBackend for Etcd {
    fn name(&self) -> &str {
        "etcd"
    }
    fn fresh_url(&self) -> String {
        let prefix = format!("procs-{}", random_suffix());
        match &self.0 {
            EtcdHeld::Shared(s) => s.url_with_prefix(&prefix),
            EtcdHeld::Own(_) => self.own().url_with_prefix(&prefix),
        }
    }
    fn server(&self) -> Option<&dyn CrashableServer> {
        match self.0 {
            EtcdHeld::Own(_) => Some(self),
            EtcdHeld::Shared(_) => None,
        }
    }
    fn sigkill_plan(&self, strategy: &str) -> (usize, Kill) {
        if strategy == "locked" {
            (3, Kill::Together)
        } else {
            (6, Kill::EachWhenDone)
        }
    }
}

impl CrashableServer for Etcd {
    fn crash(&self) {
        self.own().kill();
    }
    fn restart(&self) {
        self.own().restart();
    }
    fn port(&self) -> u16 {
        let endpoint = self.own().endpoint();
        endpoint
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in the endpoint {endpoint}"))
    }
}

/// The scenarios, on one backend, with one `keysmith` binary.
pub struct Processes<'a> {
    keysmith: PathBuf,
    backend: &'a dyn ProcessBackend,
}

/// Held by each scenario: one at a time in a test binary.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

impl<'a> Processes<'a> {
    /// The scenarios on `backend`, running the binary at `keysmith` (a test
    /// passes `env!("CARGO_BIN_EXE_keysmith")`).
    pub fn new(keysmith: impl AsRef<Path>, backend: &'a dyn ProcessBackend) -> Self {
        Processes {
            keysmith: keysmith.as_ref().to_path_buf(),
            backend,
        }
    }

    /// `keysmith --store URL` with nothing from the environment.
    pub fn cmd(&self, url: &str) -> Command {
        let mut c = Command::new(&self.keysmith);
        c.arg("--store").arg(url).env_remove("KEYSMITH_STORE");
        c
    }

    /// Runs `keysmith --store URL args...` and returns its output.
    pub fn run(&self, url: &str, args: &[&str]) -> Output {
        self.cmd(url).args(args).output().unwrap()
    }

    /// Runs `keysmith --store URL args...`, expects success, returns stdout.
    ///
    /// # Panics
    /// When the command fails (with its stderr).
    pub fn ok(&self, url: &str, args: &[&str]) -> String {
        let out = self.run(url, args);
        assert!(
            out.status.success(),
            "{}: keysmith {args:?} failed: {}",
            self.backend.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `keysmith next NAME --count COUNT --strategy S [--block B]`, stdout
    /// and stderr piped.
    pub fn next(
        &self,
        url: &str,
        name: &str,
        count: &str,
        strategy: &str,
        block: Option<&str>,
    ) -> Command {
        let mut c = self.cmd(url);
        c.args(["next", name, "--count", count, "--strategy", strategy]);
        if let Some(b) = block {
            c.args(["--block", b]);
        }
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    /// The row's next free value, from `keysmith --json show`.
    ///
    /// # Panics
    /// When `show` fails or its JSON has no `next`.
    pub fn next_free(&self, url: &str, name: &str) -> i64 {
        let out = self.ok(url, &["--json", "show", name]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["next"]
            .as_i64()
            .unwrap_or_else(|| panic!("no next in {out}"))
    }

    /// `processes` concurrent `keysmith next SEQ --count COUNT` per strategy,
    /// each strategy on a fresh store (one process with block 1, the others
    /// block 3, so they collide often): every process succeeds with `count`
    /// values, its values increase, and no value is handed out twice. With
    /// blocks this small optimistic puts collide often: the default retry
    /// budget must see every process through.
    ///
    /// # Panics
    /// On any violation, with the backend and strategy.
    pub fn never_share_a_value(&self, processes: usize, count: usize) {
        let _turn = one_at_a_time();
        let name = self.backend.name();
        for strategy in STRATEGIES {
            let url = self.backend.fresh_url();
            self.ok(&url, &["create", "s", "--block", "3"]);
            let who = format!("{name}, {strategy}, {processes} processes");
            let children: Vec<Child> = (0..processes)
                .map(|i| {
                    let block = if i == 0 { "1" } else { "3" };
                    self.next(&url, "s", &count.to_string(), strategy, Some(block))
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
                    "{who}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let values = complete_values(&out.stdout);
                assert_eq!(values.len(), count, "{who}");
                assert_increasing(&values, &who);
                total += values.len();
                all.extend(values);
            }
            assert_eq!(all.len(), total, "{who}: a value was handed out twice");
        }
    }

    /// Lives of a name with real processes, per strategy, each on a fresh
    /// store: a `keysmith next` process holding a handle (blocks of 5) is
    /// paused with SIGSTOP once it printed a value; other processes drop
    /// the sequence and create it again; the paused one resumes and fails,
    /// saying the name was dropped and created again, and it wrote nothing
    /// into the new life (no reservation, no hand-back at its close, no
    /// counts: the new life's row and counts are as created). A process of
    /// the new life then hands out values, none of which the old one
    /// printed.
    ///
    /// # Panics
    /// On any violation, or when the paused process makes no progress
    /// within [`DEADLINE`].
    pub fn a_dropped_life_never_writes_into_the_next(&self) {
        let _turn = one_at_a_time();
        let backend = self.backend.name();
        for strategy in STRATEGIES {
            let who = format!("{backend}, {strategy}");
            let url = self.backend.fresh_url();
            self.ok(&url, &["create", "s", "--block", "5"]);
            let mut old = self
                .next(&url, "s", "1000000000", strategy, Some("5"))
                .spawn()
                .unwrap();
            let (printed, reader) = drain(old.stdout.take().unwrap());
            let started = Instant::now();
            while complete_values(&printed.lock().unwrap()).is_empty() {
                assert!(
                    started.elapsed() < DEADLINE,
                    "{who}: the old process printed nothing"
                );
                if let Some(status) = old.try_wait().unwrap() {
                    panic!("{who}: the old process exited early: {status}");
                }
                thread::sleep(Duration::from_millis(5));
            }
            let pid = old.id() as libc::pid_t;
            // Paused inside a transaction (the store's lock held: SQLite's
            // write lock, a row lock), the drop cannot go through: it gives
            // up quickly, the old process runs a little, and again.
            let quick = quick_url(&url);
            let mut tries = 0;
            loop {
                // SAFETY: signals to our own unreaped child.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                if self.run(&quick, &["drop", "s"]).status.success() {
                    break;
                }
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                tries += 1;
                assert!(tries < 200, "{who}: the drop never got through");
                thread::sleep(Duration::from_millis(10));
            }
            self.ok(&url, &["create", "s", "--block", "5"]);
            let created: serde_json::Value =
                serde_json::from_str(&self.ok(&url, &["--json", "show", "s"])).unwrap();
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
            let out = old.wait_with_output().unwrap();
            reader.join().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{who}: the old process went on");
            assert!(
                stderr.contains("dropped and created again"),
                "{who}: the old process failed otherwise: {stderr}"
            );
            let after: serde_json::Value =
                serde_json::from_str(&self.ok(&url, &["--json", "show", "s"])).unwrap();
            for field in [
                "next",
                "version",
                "incarnation",
                "handed_out",
                "handed_back",
                "abandoned",
            ] {
                assert_eq!(
                    after[field], created[field],
                    "{who}: the old life wrote {field} into the new one: {created} then {after}"
                );
            }
            let old_values: HashSet<i64> = complete_values(&printed.lock().unwrap())
                .into_iter()
                .collect();
            let new_values =
                complete_values(&self.ok(&url, &["next", "s", "--count", "20"]).into_bytes());
            assert!(
                new_values.iter().all(|v| !old_values.contains(v)),
                "{who}: the new life handed out a value of the old one"
            );
        }
    }

    /// Per strategy, on a fresh store, the strategies at once: rounds of 3
    /// children running `keysmith next` in a loop, killed with SIGKILL at
    /// moments chosen by progress (a random amount of output first), so
    /// kills land mid-block, mid-refill and mid-transaction; rounds and
    /// manner from [`ProcessBackend::sigkill_plan`]. No child exits by
    /// itself, each printed something, no value is ever seen twice, each
    /// child's values increase, and afterwards the sequence resumes above
    /// everything handed out.
    ///
    /// # Panics
    /// On any violation, or when the children make no progress within
    /// [`DEADLINE`].
    pub fn sigkill_rounds(&self) {
        let _turn = one_at_a_time();
        // The strategies at once, each on its own store (nine children): a
        // round that waits out a killed lock holder's lease then overlaps
        // the others' work.
        thread::scope(|scope| {
            for strategy in STRATEGIES {
                let (rounds, kill) = self.backend.sigkill_plan(strategy);
                scope.spawn(move || self.sigkill_rounds_of(strategy, rounds, kill));
            }
        });
    }

    fn sigkill_rounds_of(&self, strategy: &str, rounds: usize, kill: Kill) {
        struct Victim {
            child: Child,
            out: Arc<Mutex<Vec<u8>>>,
            reader: JoinHandle<()>,
            want: usize,
            killed: bool,
        }
        let who = format!("{}, {strategy}", self.backend.name());
        let url = self.backend.fresh_url();
        self.ok(&url, &["create", "k", "--block", "10"]);
        let mut rng = rand::rng();
        let mut seen = HashSet::new();
        let mut max_seen = 0;
        for round in 0..rounds {
            let mut children: Vec<Victim> = (0..3)
                .map(|_| {
                    let mut child = self
                        .next(&url, "k", "100000000", strategy, None)
                        .spawn()
                        .unwrap();
                    let (out, reader) = drain(child.stdout.take().unwrap());
                    Victim {
                        child,
                        out,
                        reader,
                        want: rng.random_range(1..4000),
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
                        let err = stderr_of(&mut c.child);
                        panic!("{who} round {round}: a child exited by itself ({status}): {err}");
                    }
                }
                assert!(
                    Instant::now() < give_up,
                    "{who} round {round}: children made no progress"
                );
                thread::sleep(Duration::from_millis(2));
            }
            for mut c in children {
                c.child.wait().unwrap();
                c.reader.join().unwrap();
                let values = complete_values(&c.out.lock().unwrap());
                assert!(
                    !values.is_empty(),
                    "{who}: child printed nothing before the kill"
                );
                assert_increasing(&values, &who);
                for v in values {
                    assert!(seen.insert(v), "{who}: {v} handed out twice");
                    max_seen = max_seen.max(v);
                }
            }
        }
        let after: i64 = self
            .ok(&url, &["next", "k", "--strategy", strategy])
            .trim()
            .parse()
            .unwrap();
        assert!(
            after > max_seen,
            "{who}: resumed at {after}, below {max_seen}"
        );
    }

    /// The store's server is crashed ([`CrashableServer::crash`]) while
    /// `keysmith next` processes stream values, two per strategy (block 1
    /// and block 4), then restarted (crash recovery); twice. Processes
    /// running during the crash fail with one line `error: store
    /// unavailable: ...` naming the server's port and exit 1, losing none
    /// of the values they printed, as does one started while the server is
    /// down (printing nothing); processes started after the restart succeed
    /// with every value, at or above the recovered row. Across all of them
    /// no value is handed out twice, after each restart the row lies above
    /// every value seen (each block was committed before its first value was
    /// printed), and each sequence resumes above all of them.
    ///
    /// Each runner has its own sequence: optimistic concurrency is not fair,
    /// and an optimistic handle that shares a sequence with a handle
    /// reserving one value at a time without pause can lose nearly every
    /// race. That is contention, not what this scenario is about;
    /// [`Self::never_share_a_value`] covers shared sequences.
    ///
    /// # Panics
    /// On any violation; and when the backend has no crashable server (SQLite,
    /// or a shared server: use the backend's `start()`).
    pub fn server_crash_mid_run(&self) {
        let _turn = one_at_a_time();
        let server = self.backend.server().unwrap_or_else(|| {
            panic!(
                "server_crash_mid_run needs a server of the test's own; {} has none here",
                self.backend.name()
            )
        });
        let name = self.backend.name();
        let url = self.backend.fresh_url();
        // One sequence per (strategy, block size): (name, strategy, block).
        let sequences: Vec<(String, &str, &str)> = STRATEGIES
            .iter()
            .flat_map(|&st| ["1", "4"].map(|b| (format!("{st}-{b}"), st, b)))
            .collect();
        for (seq, _, _) in &sequences {
            self.ok(&url, &["create", seq, "--block", "4"]);
        }
        let mut seen: Vec<Seen> = sequences.iter().map(|_| Seen::default()).collect();
        let spawn = |count: &str, label: &str| -> Vec<Runner> {
            sequences
                .iter()
                .map(|(seq, strategy, block)| {
                    Runner::spawn(
                        self.next(&url, seq, count, strategy, Some(block)),
                        format!("{name}, {label} ({strategy}, block {block})"),
                    )
                })
                .collect()
        };

        for round in 0..2 {
            // Streaming processes, each asking for far more values than it will get.
            let mut runners = spawn(
                "1000000000",
                &format!("round {round}: running at the crash"),
            );
            wait_for_progress(&mut runners, 20);

            server.crash();

            // Every runner was still streaming, so it fails at its next store call.
            for (s, r) in runners.into_iter().enumerate() {
                let who = r.who.clone();
                let (status, values, stderr) = r.finish();
                assert_unavailable(&who, status, &stderr, server.port());
                assert!(values.len() >= 20, "{who}: lost printed values");
                seen[s].record(&who, values);
            }
            // One started while the server is down fails the same way.
            let out = self.run(&url, &["next", "atomic-4", "--count", "5"]);
            let who = format!("{name}: started while down");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_unavailable(&who, out.status, &stderr, server.port());
            assert!(out.stdout.is_empty(), "{who}: printed values");

            server.restart();

            let mut recovered = vec![0i64; sequences.len()];
            for (s, (seq, _, _)) in sequences.iter().enumerate() {
                recovered[s] = self.next_free(&url, seq);
                assert!(
                    recovered[s] > seen[s].max,
                    "{name} round {round}, {seq}: after recovery the row is at {}, but {} was handed out",
                    recovered[s],
                    seen[s].max
                );
            }

            // Processes started after the restart succeed.
            let label = format!("round {round}: after the restart");
            for (s, r) in spawn("200", &label).into_iter().enumerate() {
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

        for (s, (seq, strategy, _)) in sequences.iter().enumerate() {
            let after: i64 = self
                .ok(&url, &["next", seq, "--strategy", strategy])
                .trim()
                .parse()
                .unwrap();
            assert!(
                after > seen[s].max,
                "{name}, {seq}: resumed at {after}, below {}",
                seen[s].max
            );
        }
    }

    /// Eight `keysmith ids next` processes (10 worker ids, 1 s leases) run
    /// until `kills` of them were SIGKILLed at random moments (chosen by
    /// their progress), each killed one (or one that found every worker id
    /// held, the clear error) restarted. No id is printed twice, each
    /// process's ids increase, more than 1000 ids came out, no worker id
    /// lies outside the 10, and some worker id was taken over by a later
    /// process (the store's time floor is what keeps their ids apart).
    ///
    /// # Panics
    /// On any violation, or when the processes make no progress within
    /// [`DEADLINE`].
    pub fn ids_survive_sigkills(&self, kills: usize) {
        self.ids_survive_sigkills_as(kills, IdFormat::Integer);
    }

    /// [`Processes::ids_survive_sigkills`] with `ids next --format FORMAT`.
    /// For UUIDv7s, uniqueness is checked on the time, worker and counter
    /// alone (the random bits masked off): unique by construction, not by
    /// chance; each process's UUIDs increase as strings.
    ///
    /// # Panics
    /// As [`Processes::ids_survive_sigkills`].
    pub fn ids_survive_sigkills_as(&self, kills: usize, format: IdFormat) {
        struct IdRunner {
            child: Child,
            out: Arc<Mutex<Vec<u8>>>,
            reader: JoinHandle<()>,
            want: usize,
        }
        // A process asked for up to 60,000 ids, killed once it printed a
        // random part of them (ids come fast: an unbounded one would fill memory).
        let spawn = |url: &str| {
            let want_ids = rand::rng().random_range(1..30_000);
            let mut child = self
                .cmd(url)
                .args(["ids", "next", "--count", &(2 * want_ids).to_string()])
                .args(["--workers", "10", "--ttl-ms", "1000"])
                .args(["--format", format.name()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let (out, reader) = drain(child.stdout.take().unwrap());
            // Ids are 18 or 19 digits and a newline; UUIDs 36 characters and one.
            let width = match format {
                IdFormat::Integer => 19,
                IdFormat::Uuidv7 => 37,
            };
            IdRunner {
                child,
                out,
                reader,
                want: want_ids * width,
            }
        };
        let _turn = one_at_a_time();
        let name = self.backend.name();
        let url = self.backend.fresh_url();
        let mut seen = HashSet::new();
        // How many processes printed ids under each worker id (snowflake
        // layout: 10 worker bits above 12 sequence bits).
        let mut holders = [0usize; 1024];
        let mut record = |who: &str, bytes: &[u8]| {
            // (key, worker): the key orders a process's ids and must be
            // unique; for UUIDs (time, counter, worker), the random bits left out.
            let ids: Vec<(i128, i64)> = match format {
                IdFormat::Integer => complete_values(bytes)
                    .into_iter()
                    .map(|id| (id as i128, (id >> 12) & 1023))
                    .collect(),
                IdFormat::Uuidv7 => {
                    let lines = complete_lines(bytes);
                    for w in lines.windows(2) {
                        assert!(w[0] < w[1], "{who}: {} then {}", w[0], w[1]);
                    }
                    lines
                        .iter()
                        .map(|l| {
                            let d = keysmith_core::ids::decode_uuidv7(l)
                                .unwrap_or_else(|e| panic!("{who}: {l:?}: {e}"));
                            let key = ((d.time_ms as i128) << 34)
                                | ((d.counter as i128) << 22)
                                | d.worker as i128;
                            (key, d.worker)
                        })
                        .collect()
                }
            };
            let mut workers = HashSet::new();
            for w in ids.windows(2) {
                assert!(w[0].0 < w[1].0, "{who}: {:?} then {:?}", w[0], w[1]);
            }
            for (id, worker) in ids {
                assert!(seen.insert(id), "{who}: id {id} printed twice");
                workers.insert(worker);
            }
            for w in workers {
                holders[w as usize] += 1;
            }
        };
        let mut runners: Vec<IdRunner> = (0..8).map(|_| spawn(&url)).collect();
        let (mut killed, mut full) = (0, 0);
        let give_up = Instant::now() + DEADLINE;
        while killed < kills {
            assert!(
                Instant::now() < give_up,
                "{name}: processes made no progress"
            );
            for (i, r) in runners.iter_mut().enumerate() {
                if r.out.lock().unwrap().len() >= r.want {
                    r.child.kill().unwrap(); // SIGKILL
                    r.child.wait().unwrap();
                    killed += 1;
                } else if let Some(status) = r.child.try_wait().unwrap() {
                    let err = stderr_of(&mut r.child);
                    // Done before its kill, or every worker id held by live
                    // or not yet expired leases (the clear error): a restart.
                    if !status.success() {
                        assert!(
                            err.contains("worker ids of group"),
                            "{name}: process {i} failed ({status}): {err}"
                        );
                        full += 1;
                    }
                } else {
                    continue;
                }
                let old = std::mem::replace(r, spawn(&url));
                old.reader.join().unwrap();
                record(&format!("{name}: process {i}"), &old.out.lock().unwrap());
            }
            thread::sleep(Duration::from_millis(2));
        }
        for (i, mut r) in runners.into_iter().enumerate() {
            r.child.kill().unwrap();
            r.child.wait().unwrap();
            r.reader.join().unwrap();
            record(&format!("{name}: process {i}"), &r.out.lock().unwrap());
        }
        assert!(seen.len() > 1000, "{name}: only {} ids", seen.len());
        assert!(
            holders[10..].iter().all(|&n| n == 0),
            "{name}: a worker id outside --workers 10"
        );
        // More processes than worker ids ran: worker ids were taken over.
        let reused = holders.iter().filter(|&&n| n > 1).count();
        assert!(
            reused > 0,
            "{name}: no worker id was held twice: {:?}",
            &holders[..10]
        );
        eprintln!(
            "{name}: {} ids, {killed} kills, {full} restarts on all-taken, holders per worker id {:?}",
            seen.len(),
            &holders[..10]
        );
    }

    /// Gap-free numbers under SIGKILLs: `holders` holder processes, four at
    /// a time, each `keysmith ticket take` a number (1 s ticket), then
    /// commit it, release it, or are SIGKILLed holding it, and some are
    /// killed in the middle of the take. Then take-and-commit until the
    /// committed numbers have no hole (killed holders' numbers come back
    /// when their tickets expire). The committed numbers are exactly
    /// `1..=n`, no number is committed twice, a dead holder's ticket is
    /// refused and changes nothing, and both the release and the killed
    /// paths were taken.
    ///
    /// # Panics
    /// On any violation, or a holder that hangs past [`DEADLINE`].
    pub fn gapless_under_sigkills(&self, holders: usize) {
        let _turn = one_at_a_time();
        let name = self.backend.name();
        let url = self.backend.fresh_url();
        self.ok(&url, &["create", "inv", "--gapless"]);
        let mut committed: Vec<i64> = Vec::new();
        let mut seen_max = 0;
        let mut killed_tickets = Vec::new();
        let (mut released, mut killed, mut killed_in_take) = (0, 0, 0);
        let mut rng = rand::rng();
        let mut done = 0;
        while done < holders {
            // A few holders at a time, so they race.
            let batch: Vec<Child> = (0..4).map(|_| self.holder(&url, "inv")).collect();
            for mut h in batch {
                done += 1;
                let roll = rng.random_range(0..100);
                if roll < 10 {
                    // Killed in the middle of the take (or just after it).
                    thread::sleep(Duration::from_millis(rng.random_range(0..30)));
                    h.kill().unwrap();
                    h.wait().unwrap();
                    killed_in_take += 1;
                    continue;
                }
                let mut stdin = h.stdin.take().unwrap();
                // Reading the line first: the number is held when we decide.
                let (tx, rx) = std::sync::mpsc::channel();
                let mut out = h.stdout.take().unwrap();
                thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut byte = [0u8; 1];
                    while let Ok(1) = out.read(&mut byte) {
                        buf.push(byte[0]);
                        if byte[0] == b'\n' {
                            let _ = tx.send(Some(String::from_utf8_lossy(&buf).into_owned()));
                            buf.clear();
                        }
                    }
                    let _ = tx.send(None);
                });
                let Some(line) = rx.recv_timeout(DEADLINE).expect("a holder hung") else {
                    let out = h.wait_with_output().unwrap();
                    panic!(
                        "{name}: a holder took nothing: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                };
                let (value, ticket) = taken(&line);
                seen_max = seen_max.max(value);
                if roll < 30 {
                    // Dies holding the ticket.
                    h.kill().unwrap();
                    h.wait().unwrap();
                    killed += 1;
                    killed_tickets.push((value, ticket));
                    continue;
                }
                let what = if roll < 45 { "release" } else { "commit" };
                writeln!(stdin, "{what}").unwrap();
                drop(stdin);
                let printed = rx.recv_timeout(DEADLINE).expect("a holder hung");
                let status = h.wait().unwrap();
                let err = stderr_of(&mut h);
                assert!(status.success(), "{name}: {what} of {value} failed: {err}");
                assert_eq!(
                    printed.as_deref().map(str::trim),
                    Some(value.to_string().as_str())
                );
                if what == "commit" {
                    committed.push(value);
                } else {
                    released += 1;
                }
            }
        }
        let mut set: BTreeSet<i64> = committed.iter().copied().collect();
        assert_eq!(
            set.len(),
            committed.len(),
            "{name}: a number was committed twice"
        );
        // Drain: take and commit until the committed numbers have no hole.
        // The numbers of killed holders come back once their tickets expire
        // (1 s; etcd's leases at least its minimum TTL): until then a take
        // gets a new number, which is committed too, and the loop polls.
        let give_up = Instant::now() + DEADLINE;
        let mut drained = 0;
        while !(is_contiguous(&set) && set.len() as i64 >= seen_max) {
            assert!(
                Instant::now() < give_up,
                "{name}: holes never filled: {set:?}"
            );
            let (value, ticket) = taken(&self.ok(&url, &["ticket", "take", "inv", "--ttl", "60"]));
            let was_hole = value <= *set.iter().next_back().unwrap_or(&0);
            assert_eq!(
                self.ok(&url, &["ticket", "commit", "inv", &ticket]).trim(),
                value.to_string()
            );
            assert!(set.insert(value), "{name}: {value} committed twice");
            drained += 1;
            if !was_hole {
                thread::sleep(Duration::from_millis(100));
            }
        }
        let n = set.len() as i64;
        assert_eq!(set, (1..=n).collect::<BTreeSet<_>>());
        // A dead holder's ticket, its number since taken and committed by
        // another, is refused and changes nothing.
        if let Some((value, ticket)) = killed_tickets.first() {
            let out = self.run(&url, &["ticket", "commit", "inv", ticket]);
            assert!(
                !out.status.success(),
                "{name}: a dead holder committed {value}"
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("not open") || err.contains("taken again"),
                "{name}: {err}"
            );
        }
        let (next, t) = taken(&self.ok(&url, &["ticket", "take", "inv"]));
        assert_eq!(next, n + 1, "{name}: the refused commit changed nothing");
        self.ok(&url, &["ticket", "release", "inv", &t]);
        eprintln!(
            "{name}: {n} committed: {} by holders ({released} released, {killed} killed holding, {killed_in_take} killed taking), {drained} while draining",
            committed.len()
        );
        assert!(killed > 0 && released > 0, "{name}: every path taken");
    }

    /// A holder: takes a number with a 1 s ticket, prints `VALUE TICKET`,
    /// then waits for a line on stdin (`commit` or `release`) and does that.
    fn holder(&self, url: &str, name: &str) -> Child {
        Command::new("sh")
            .arg("-c")
            .arg(
                r#"out=$("$K" --store "$URL" ticket take "$NAME" --ttl 1) || exit 3
echo "$out"
read what || exit 4
exec "$K" --store "$URL" ticket "$what" "$NAME" "${out#* }""#,
            )
            .env("K", &self.keysmith)
            .env("URL", url)
            .env("NAME", name)
            .env_remove("KEYSMITH_STORE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Where values go when processes die: three processes that finish and
    /// three SIGKILLed mid-stream, at once, on a sequence with block 10;
    /// then `keysmith --json show` accounts for what they printed:
    /// `handed_out` is exactly what the clean ones printed, `unaccounted`
    /// lies between what the killed ones printed and that plus three blocks
    /// each, `reserved` is the sum of handed out, handed back, abandoned and
    /// unaccounted and covers every value printed, `next - start` is what was
    /// reserved and not handed back plus what was skipped, and
    /// `runway_seconds` is there.
    ///
    /// # Panics
    /// On any violation, or a victim that prints too little within
    /// [`DEADLINE`].
    pub fn killed_values_fit_within_unaccounted(&self) {
        const BLOCK: i64 = 10;
        let _turn = one_at_a_time();
        let name = self.backend.name();
        let url = self.backend.fresh_url();
        self.ok(&url, &["create", "lv", "--block", &BLOCK.to_string()]);
        let clean: Vec<Child> = (0..3)
            .map(|_| {
                self.cmd(&url)
                    .args(["next", "lv", "--count", "25"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let victims: Vec<_> = (0..3)
            .map(|i| {
                let mut child = self
                    .cmd(&url)
                    .args(["next", "lv", "--count", "100000000"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let (out, reader) = drain(child.stdout.take().unwrap());
                (child, out, reader, 20 + 37 * i)
            })
            .collect();
        let mut printed_clean = 0;
        for c in clean {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            printed_clean += complete_values(&out.stdout).len() as i64;
        }
        let started = Instant::now();
        let mut printed_killed = 0;
        for (mut child, out, reader, want) in victims {
            while complete_values(&out.lock().unwrap()).len() < want {
                assert!(
                    started.elapsed() < DEADLINE,
                    "{name}: a victim never printed {want} values"
                );
                thread::yield_now();
            }
            child.kill().unwrap();
            child.wait().unwrap();
            reader.join().unwrap();
            printed_killed += complete_values(&out.lock().unwrap()).len() as i64;
        }
        let show: serde_json::Value =
            serde_json::from_str(&self.ok(&url, &["--json", "show", "lv"])).unwrap();
        assert!(show.get("runway_seconds").is_some(), "{name}: {show}");
        let n = |k: &str| show[k].as_i64().unwrap_or_else(|| panic!("{k} in {show}"));
        assert_eq!(n("handed_out"), printed_clean, "{name}: {show}");
        let unaccounted = n("unaccounted");
        // A killed process had at most its current block, a prefetched one
        // and one batch taken but not yet printed.
        assert!(
            (printed_killed..=printed_killed + 3 * 3 * BLOCK).contains(&unaccounted),
            "{name}: killed processes printed {printed_killed}, unaccounted {unaccounted}: {show}"
        );
        assert_eq!(
            n("reserved"),
            n("handed_out") + n("handed_back") + n("abandoned") + unaccounted,
            "{name}: {show}"
        );
        // Every value printed was reserved; the next free value is past them all.
        assert!(
            n("reserved") >= printed_clean + printed_killed,
            "{name}: {show}"
        );
        // What moved next: reservations not handed back, values skipped by
        // alter, and values skipped at a generation change (on etcd a
        // process may start a new epoch when the raft log's gap reads lower
        // than the one recorded: a gap, never a repeat).
        assert_eq!(
            n("next") - n("start"),
            n("reserved") - n("handed_back") + n("skipped") + n("skipped_at_failover"),
            "{name}: {show}"
        );
    }

    /// The pool's members, from `keysmith --json pool members`.
    fn pool_members(&self, url: &str, pool: &str) -> Vec<i64> {
        serde_json::from_str(&self.ok(url, &["--json", "pool", "members", pool])).unwrap()
    }

    /// The pool's `taken` count, from `keysmith --json pool show`.
    fn pool_taken(&self, url: &str, pool: &str) -> usize {
        let show: serde_json::Value =
            serde_json::from_str(&self.ok(url, &["--json", "pool", "show", pool])).unwrap();
        show["taken"].as_u64().unwrap() as usize
    }

    /// Six `keysmith pool take` processes at once on a pool of 20, 150
    /// numbers each, three of them reusing their samples: all finish with
    /// every number, no number is taken twice, the pool keeps exactly 20
    /// members, there is no hole at all ([`crate::pool_holes`]), and the
    /// pool counts every number taken.
    ///
    /// # Panics
    /// On any violation.
    pub fn pool_processes_never_share_a_number(&self) {
        let _turn = one_at_a_time();
        let name = self.backend.name();
        let url = self.backend.fresh_url();
        self.ok(
            &url,
            &["pool", "create", "p", "--size", "20", "--start", "1"],
        );
        let children: Vec<Child> = (0..6)
            .map(|i| {
                let mut c = self.cmd(&url);
                c.args(["pool", "take", "p", "--count", "150"]);
                if i % 2 == 1 {
                    c.arg("--reuse-sample");
                }
                c.stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut taken = Vec::new();
        let mut logs = String::new();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let values = complete_values(&out.stdout);
            assert_eq!(values.len(), 150, "{name}");
            taken.extend(values);
            logs.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        let members = self.pool_members(&url, "p");
        let holes = crate::pool_holes(1, 20, &taken, &members);
        assert!(
            holes.is_empty(),
            "{name}: {} holes (first {:?}, last {:?}); members {members:?}; the takers logged:\n{logs}",
            holes.len(),
            &holes[..holes.len().min(10)],
            holes.last()
        );
        assert_eq!(self.pool_taken(&url, "p"), 6 * 150, "{name}");
    }

    /// Rounds of four `keysmith pool take` processes on a pool of 16, half
    /// of them reusing their samples, SIGKILLed at moments chosen by their
    /// progress; then a survivor takes 50. No number is taken twice, the
    /// pool keeps exactly 16 members, there is at most one hole per killed
    /// taker (the number it had swapped out but not yet printed), every
    /// taker printed something, and the pool's `taken` count is what was
    /// printed plus the holes.
    ///
    /// # Panics
    /// On any violation.
    pub fn sigkilled_pool_takers_leave_at_most_one_hole_each(&self) {
        let _turn = one_at_a_time();
        let name = self.backend.name();
        let url = self.backend.fresh_url();
        let mut rng = rand::rng();
        let (start, size) = (1000, 16);
        let (size_arg, start_arg) = (size.to_string(), start.to_string());
        self.ok(
            &url,
            &[
                "pool", "create", "k", "--size", &size_arg, "--start", &start_arg,
            ],
        );
        let mut taken = Vec::new();
        let mut killed = 0;
        for round in 0..5 {
            let mut children: Vec<Child> = (0..4)
                .map(|i| {
                    let mut c = self.cmd(&url);
                    c.args(["pool", "take", "k", "--count", "1000000"]);
                    if (round + i) % 2 == 1 {
                        c.arg("--reuse-sample");
                    }
                    c.stdout(Stdio::piped())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect();
            let mut outputs = Vec::new();
            for child in &mut children {
                let want = rng.random_range(1..600);
                let mut got = Vec::new();
                let stdout = child.stdout.as_mut().unwrap();
                let mut buf = [0u8; 256];
                while got.len() < want {
                    match stdout.read(&mut buf).unwrap() {
                        0 => break,
                        n => got.extend_from_slice(&buf[..n]),
                    }
                }
                child.kill().unwrap(); // SIGKILL
                killed += 1;
                outputs.push(got);
            }
            for (mut child, mut got) in children.into_iter().zip(outputs) {
                child.stdout.take().unwrap().read_to_end(&mut got).unwrap();
                child.wait().unwrap();
                let values = complete_values(&got);
                assert!(
                    !values.is_empty(),
                    "{name}: a taker printed nothing before the kill"
                );
                taken.extend(values);
            }
        }
        // A survivor after all the kills still works and adds no hole.
        taken.extend(complete_values(
            self.ok(&url, &["pool", "take", "k", "-n", "50"]).as_bytes(),
        ));
        let members = self.pool_members(&url, "k");
        let holes = crate::pool_holes(start, size, &taken, &members);
        assert!(
            holes.len() <= killed,
            "{name}: {} holes from {killed} killed takers: {holes:?}",
            holes.len()
        );
        assert_eq!(
            self.pool_taken(&url, "k"),
            taken.len() + holes.len(),
            "{name}"
        );
    }
}

/// A child's stderr, read to its end.
fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut err);
    }
    err
}

/// `VALUE TICKET` parsed.
fn taken(line: &str) -> (i64, String) {
    let (v, t) = line
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("not VALUE TICKET: {line:?}"));
    (v.parse().unwrap(), t.to_owned())
}

fn is_contiguous(s: &BTreeSet<i64>) -> bool {
    s.iter().next_back().is_none_or(|m| *m == s.len() as i64)
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
    /// [`DEADLINE`]); returns its status, its values (checked increasing)
    /// and its stderr.
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
        let stderr = stderr_of(&mut self.child);
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
                let stderr = stderr_of(&mut r.child);
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

/// Asserts the one-line `error: store unavailable: ...` naming `port`, and
/// exit code 1.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cut_short_by_a_kill_is_not_a_value() {
        assert_eq!(complete_values(b"1\n2\n3"), vec![1, 2]);
        assert_eq!(complete_values(b"17"), Vec::<i64>::new());
        assert_eq!(complete_values(b""), Vec::<i64>::new());
    }

    #[test]
    #[should_panic(expected = "p: 5 then 5")]
    fn a_repeated_value_is_not_increasing() {
        assert_increasing(&[4, 5, 5], "p");
    }

    #[test]
    #[should_panic(expected = "w: 7 handed out twice")]
    fn a_value_seen_twice_across_processes_fails() {
        let mut seen = Seen::default();
        seen.record("v", vec![1, 7]);
        assert_eq!(seen.max, 7);
        seen.record("w", vec![3, 7]);
    }

    #[test]
    fn a_shared_server_is_not_crashable() {
        // The shared PostgreSQL, when installed: `server()` is None, so no
        // scenario can crash a server other tests use.
        if let Some(pg) = Postgres::shared() {
            assert!(pg.server().is_none());
        }
        assert!(Sqlite::new().server().is_none());
    }

    #[test]
    fn sqlite_urls_are_fresh() {
        let s = Sqlite::new();
        assert_ne!(s.fresh_url(), s.fresh_url());
    }
}

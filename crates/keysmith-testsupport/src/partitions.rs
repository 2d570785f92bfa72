//! What the partition tests (`crates/keysmith-cli/tests/partitions.rs`) and
//! `keysmith-bench partitions` share, written once: a `keysmith serve`
//! in a host of a [`Net`], load clients that call it over HTTP and write
//! down every call ([`Call`]: invoke and complete time, status, values),
//! what a cut-off server did ([`Timing`]), one whole scenario,
//! [`postgres_cut_off_from_one_of_three`], and the checking of the calls:
//! [`check_calls`] feeds them to `keysmith::verify::history`, and
//! [`check_loads`] checks the three [`Loads`] of the multi-server scenarios.
//! What a violation does (a test's panic, the command's report and exit
//! status) is the caller's.
//!
//! Waits that can fail return `Err` with what did not happen; they also
//! stop early, with `Err`, after [`interrupt`] (ctrl-c in the command), so
//! that the caller drops its [`Net`] and everything is torn down.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keysmith_core::verify::history::{Checked, History, HistoryViolation, Order};
use serde_json::Value;

use crate::netns::{Host, Net, PostgresNet};

/// The port every server listens on, in its own namespace.
pub const PORT: u16 = 8080;

/// The servers' request timeout: every call is answered within it.
pub const REQUEST_TIMEOUT_MS: u64 = 3_000;

/// The client's own bound on a call: past it the call hung.
pub const HANG: Duration = Duration::from_secs(40);

/// A bound on waiting for a condition (a server to answer again, a leader).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Between two calls of one load client: a rate limit, so that a loaded
/// 2-core machine still runs etcd's elections on time.
pub const PACE: Duration = Duration::from_millis(4);

/// The most calls one load client makes.
pub const MAX_CALLS: usize = 20_000;

/// Set by [`interrupt`]: every wait of this module returns `Err` at once.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Makes every wait of this module (and so a running scenario) stop with
/// `Err("interrupted")`, for a caller that got ctrl-c. For this process's
/// lifetime.
pub fn interrupt() {
    INTERRUPTED.store(true, SeqCst);
}

fn interrupted() -> Result<(), String> {
    if INTERRUPTED.load(SeqCst) {
        Err("interrupted".to_owned())
    } else {
        Ok(())
    }
}

/// Waits `length` (a fault's length: the scenario, not a synchronisation),
/// or until [`interrupt`].
pub async fn hold(length: Duration) -> Result<(), String> {
    let until = Instant::now() + length;
    loop {
        interrupted()?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        tokio::time::sleep(left.min(Duration::from_millis(50))).await;
    }
}

/// Runs `body` on a runtime whose threads live in `client`'s namespace.
///
/// # Panics
/// When the runtime cannot be built, or `body` panics.
pub fn in_client<T: Send, F: std::future::Future<Output = T>>(
    net: &Net,
    client: &Host,
    body: impl FnOnce() -> F + Send,
) -> T {
    net.run_in(client, || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(3)
            .enable_all()
            .build()
            .expect("cannot build the client's runtime")
            .block_on(body())
    })
}

/// `EXE --store URL ARGS` in `host`: its stdout, or why it failed.
pub fn keysmith(
    net: &Net,
    host: &Host,
    exe: &Path,
    url: &str,
    args: &[&str],
) -> Result<String, String> {
    let out = net
        .command(host, exe)
        .arg("--store")
        .arg(url)
        .args(args)
        .env_remove("KEYSMITH_STORE")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "keysmith {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A `keysmith serve` in a namespace of its own.
#[derive(Debug)]
pub struct Server {
    /// Its host.
    pub host: Host,
    /// Its pid (killed with the network).
    pub pid: u32,
    /// `http://IP:PORT`.
    pub base: String,
    log: std::path::PathBuf,
}

impl Server {
    /// Starts `EXE --store URL serve` on `host` (not waiting for it), with
    /// no auth and the request timeout [`REQUEST_TIMEOUT_MS`]; its stderr
    /// goes to a log in the network's directory.
    ///
    /// # Panics
    /// When it cannot be started.
    pub fn start(net: &Net, exe: &Path, host: Host, url: &str, args: &[&str]) -> Server {
        let log = net.dir().join(format!("serve-{}.log", host.label));
        let file = std::fs::File::create(&log).expect("cannot create the server's log");
        let mut cmd = net.command(&host, exe);
        cmd.arg("--store")
            .arg(url)
            .args(["serve", "--listen", &format!("{}:{PORT}", host.ip)])
            .args(["--insecure-no-auth"])
            .args(["--request-timeout-ms", &REQUEST_TIMEOUT_MS.to_string()])
            .args(args)
            .env_remove("KEYSMITH_STORE")
            .env_remove("KEYSMITH_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file);
        let pid = net.spawn(cmd).pid;
        Server {
            base: format!("http://{}:{PORT}", host.ip),
            host,
            pid,
            log,
        }
    }

    /// `n` servers as [`Server::start`] starts one, each in a host of its
    /// own, named `s0`, `s1`, ...
    ///
    /// # Panics
    /// When one cannot be started.
    pub fn start_n(net: &Net, exe: &Path, n: usize, url: &str, args: &[&str]) -> Vec<Server> {
        (0..n)
            .map(|i| Server::start(net, exe, net.add_host(&format!("s{i}")), url, args))
            .collect()
    }

    /// Each of `servers` with its index and base URL, as [`Load::start`]
    /// takes them.
    pub fn targets(servers: &[Server]) -> Vec<(usize, String)> {
        servers
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.base.clone()))
            .collect()
    }

    /// `{base}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `/healthz` answers 200 (at most [`DEADLINE`]).
    ///
    /// # Errors
    /// It never did (with its log), or [`interrupt`].
    pub async fn healthy(&self, http: &reqwest::Client) -> Result<(), String> {
        let until = Instant::now() + DEADLINE;
        loop {
            interrupted()?;
            if let Ok(r) = http.get(self.url("/healthz")).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if Instant::now() >= until {
                return Err(format!(
                    "server {} never became healthy; log:\n{}",
                    self.host.label,
                    self.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// An HTTP client whose calls give up after [`HANG`].
///
/// # Panics
/// When the client cannot be built.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(HANG)
        .pool_max_idle_per_host(64)
        .build()
        .expect("cannot build the HTTP client")
}

/// One call a load client made.
#[derive(Debug, Clone)]
pub struct Call {
    /// The client: one caller doing one thing at a time.
    pub client: u32,
    /// The index of the server it called.
    pub server: usize,
    /// When it was sent.
    pub sent: Instant,
    /// When its answer was read.
    pub done: Instant,
    /// The HTTP status; 0: no answer (connection error).
    pub status: u16,
    /// The values it got.
    pub values: Vec<i64>,
    /// The error code of a refusal, or the connection error.
    pub error: String,
}

impl Call {
    /// `client`'s `POST url` to server `server`, timed; `key` names the
    /// array of values in the answer.
    pub async fn post(
        http: &reqwest::Client,
        client: u32,
        server: usize,
        url: &str,
        key: &str,
    ) -> Call {
        let sent = Instant::now();
        let (status, values, error) = match http.post(url).send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let body: Value = r.json().await.unwrap_or(Value::Null);
                let values = body[key]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_i64).collect())
                    .unwrap_or_default();
                let error = body["error"]["code"].as_str().unwrap_or("").to_owned();
                (status, values, error)
            }
            Err(e) => (0, Vec::new(), e.to_string()),
        };
        Call {
            client,
            server,
            sent,
            done: Instant::now(),
            status,
            values,
            error,
        }
    }

    /// A call answered (200) with `values`, for a caller that made it by
    /// other means than [`Call::post`].
    pub fn ok(client: u32, server: usize, sent: Instant, done: Instant, values: Vec<i64>) -> Call {
        Call {
            client,
            server,
            sent,
            done,
            status: 200,
            values,
            error: String::new(),
        }
    }

    /// From sent to answered.
    pub fn took(&self) -> Duration {
        self.done - self.sent
    }
}

/// The slowest of `calls` (`None`: there are none).
pub fn slowest<'a>(calls: impl IntoIterator<Item = &'a Call>) -> Option<&'a Call> {
    calls.into_iter().max_by_key(|c| c.took())
}

/// Load clients, each bound to one server, calling one route back to back.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    calls: Arc<Mutex<Vec<Call>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// `per_server` clients for each of `servers` (index, base URL), calling
    /// `POST {base}{path}` and reading the array `key`; client ids from
    /// `first_client`. Each pauses [`PACE`] between calls (25 times that
    /// after a refusal, as a client honouring Retry-After would), at most
    /// [`MAX_CALLS`] calls. Must be called within a tokio runtime.
    pub fn start(
        http: &reqwest::Client,
        servers: &[(usize, String)],
        per_server: usize,
        path: &str,
        key: &'static str,
        first_client: u32,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        let mut client = first_client;
        for (server, base) in servers {
            for _ in 0..per_server {
                let (http, url, stop, calls) = (
                    http.clone(),
                    format!("{base}{path}"),
                    stop.clone(),
                    calls.clone(),
                );
                let (server, me) = (*server, client);
                client += 1;
                tasks.push(tokio::spawn(async move {
                    for _ in 0..MAX_CALLS {
                        if stop.load(SeqCst) {
                            break;
                        }
                        let call = Call::post(&http, me, server, &url, key).await;
                        let failed = call.status != 200;
                        calls.lock().unwrap_or_else(|p| p.into_inner()).push(call);
                        let pause = if failed { PACE * 25 } else { PACE };
                        tokio::time::sleep(pause).await;
                    }
                }));
            }
        }
        Load { stop, calls, tasks }
    }

    /// How many calls `server` answered with values that were sent at or
    /// after `since`.
    pub fn ok_from(&self, server: usize, since: Instant) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|c| c.server == server && c.status == 200 && c.sent >= since)
            .count()
    }

    /// Waits (at most [`DEADLINE`]) until `server` answered `n` calls with
    /// values that were sent at or after `since`.
    ///
    /// # Errors
    /// It did not (`what` says when), or [`interrupt`].
    pub async fn until_ok(
        &self,
        server: usize,
        since: Instant,
        n: usize,
        what: &str,
    ) -> Result<(), String> {
        let until = Instant::now() + DEADLINE;
        while self.ok_from(server, since) < n {
            interrupted()?;
            if Instant::now() >= until {
                return Err(format!(
                    "{what}: server {server} answered {} of {n} calls within {} s",
                    self.ok_from(server, since),
                    DEADLINE.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// Stops the clients (each finishes its call in flight) and returns
    /// every call they made.
    pub async fn stop(self) -> Vec<Call> {
        self.stop.store(true, SeqCst);
        for t in self.tasks {
            // A client task does not panic; if one did, its calls are in.
            let _ = t.await;
        }
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// What a partitioned server did: from the cut to its first 503, its slowest
/// 503, and from the heal to its first value.
#[derive(Debug, Clone)]
pub struct Timing {
    /// `None`: no 503 at all (the partition ended first).
    pub to_503: Option<Duration>,
    /// Its slowest 503.
    pub slowest_503: Duration,
    /// `None`: no value after the heal.
    pub to_value: Option<Duration>,
    /// Values it answered while cut off (from its cache).
    pub served_while_cut: usize,
    /// The error codes of its 503s.
    pub codes: std::collections::BTreeSet<String>,
}

impl Timing {
    /// `server`'s calls among `calls`, cut off at `cut`, healed at `heal`.
    pub fn of(calls: &[Call], server: usize, cut: Instant, heal: Instant) -> Timing {
        let mine: Vec<&Call> = calls.iter().filter(|c| c.server == server).collect();
        let first_503 = mine
            .iter()
            .filter(|c| c.status == 503 && c.sent >= cut)
            .map(|c| c.done)
            .min();
        let slowest_503 = mine
            .iter()
            .filter(|c| c.status == 503)
            .map(|c| c.took())
            .max()
            .unwrap_or_default();
        let first_value = mine
            .iter()
            .filter(|c| c.status == 200 && c.sent >= heal)
            .map(|c| c.done)
            .min();
        let served_while_cut = mine
            .iter()
            .filter(|c| c.status == 200 && c.sent >= cut && c.done < heal)
            .count();
        let codes = mine
            .iter()
            .filter(|c| c.status == 503)
            .map(|c| c.error.clone())
            .collect();
        Timing {
            codes,
            to_503: first_503.map(|t| t - cut),
            slowest_503,
            to_value: first_value.map(|t| t - heal),
            served_while_cut,
        }
    }

    /// The first 503, which must have come.
    ///
    /// # Panics
    /// When there was none.
    pub fn to_503(&self, server: usize) -> Duration {
        self.to_503
            .unwrap_or_else(|| panic!("server {server} never answered 503 while cut off"))
    }

    /// One line: first 503, slowest 503, codes, values served meanwhile,
    /// first value after the heal.
    pub fn line(&self) -> String {
        let first_503 = match self.to_503 {
            Some(t) => format!("first 503 {:.2} s after the cut", t.as_secs_f64()),
            None => "no 503 before the heal".to_owned(),
        };
        let first_value = match self.to_value {
            Some(t) => format!("first value {:.2} s after the heal", t.as_secs_f64()),
            None => "no value after the heal".to_owned(),
        };
        format!(
            "{first_503} (slowest 503 {:.2} s, codes {:?}, {} values served from the cache \
             meanwhile); {first_value}",
            self.slowest_503.as_secs_f64(),
            self.codes,
            self.served_while_cut,
        )
    }
}

/// The load of the multi-server scenarios: a sequence `s` (2 clients per
/// server, clients 0..), `/v1/ids/next` (1 per server, from 100) and a
/// strict sequence `t` (1 per server, from 200).
pub struct Loads {
    /// `POST /v1/sequences/s/next`.
    pub seq: Load,
    /// `POST /v1/ids/next`.
    pub ids: Load,
    /// `POST /v1/sequences/t/next`.
    pub strict: Load,
}

impl Loads {
    /// Starts the three loads on `servers`.
    pub fn start(http: &reqwest::Client, servers: &[Server]) -> Loads {
        let targets = Server::targets(servers);
        Loads {
            seq: Load::start(http, &targets, 2, "/v1/sequences/s/next", "values", 0),
            ids: Load::start(http, &targets, 1, "/v1/ids/next", "ids", 100),
            strict: Load::start(http, &targets, 1, "/v1/sequences/t/next", "values", 200),
        }
    }

    /// Waits until each of `servers` servers answered 50 sequence calls and
    /// 20 ids since `start`: the run is under way before any fault.
    ///
    /// # Errors
    /// As [`Load::until_ok`].
    pub async fn ready(
        seq: &Load,
        ids: &Load,
        start: Instant,
        servers: usize,
    ) -> Result<(), String> {
        for i in 0..servers {
            seq.until_ok(i, start, 50, "before the cut").await?;
            ids.until_ok(i, start, 20, "ids before the cut").await?;
        }
        Ok(())
    }
}

/// The first violation [`check_calls`] found: in which history, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallsViolation {
    /// `None`: in the history of all the calls; `Some(server)`: in that
    /// server's calls alone (real-time order).
    pub server: Option<usize>,
    /// The violation, with both operations.
    pub violation: HistoryViolation,
}

impl std::fmt::Display for CallsViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.server {
            None => write!(f, "{}", self.violation),
            Some(s) => write!(f, "through server {s}: {}", self.violation),
        }
    }
}

impl std::error::Error for CallsViolation {}

/// Every answered call of `calls` in one history timed from `start`,
/// checked in `order` (unique, in order per client, and with
/// [`Order::RealTime`] in real time across all clients); then, with
/// `per_server`, each server's calls alone in real-time order (the clients
/// of one server see its values in time order). A call with no answer
/// (status 0) may or may not have taken values: it is left out.
///
/// # Errors
/// The first violation: in the history of all, or else of the lowest
/// server that has one.
pub fn check_calls(
    calls: &[Call],
    start: Instant,
    order: Order,
    per_server: bool,
) -> Result<Checked, CallsViolation> {
    let mut all = History::starting_at(start);
    let mut servers: std::collections::BTreeMap<usize, History> = Default::default();
    for c in calls.iter().filter(|c| c.status != 0) {
        all.record(c.client, c.sent, c.done, c.values.clone());
        servers
            .entry(c.server)
            .or_insert_with(|| History::starting_at(start))
            .record(c.client, c.sent, c.done, c.values.clone());
    }
    let checked = all.check(order).map_err(|violation| CallsViolation {
        server: None,
        violation,
    })?;
    if per_server {
        for (&s, h) in &servers {
            h.check(Order::RealTime)
                .map_err(|violation| CallsViolation {
                    server: Some(s),
                    violation,
                })?;
        }
    }
    Ok(checked)
}

/// What [`check_loads`] found: the values checked of each load (0 for a
/// load not checked, after a violation), and the first violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadsChecked {
    /// Values of sequence `s`.
    pub seq: usize,
    /// Ids.
    pub ids: usize,
    /// Values of the strict sequence `t`.
    pub strict: usize,
    /// The first violation, with the load's name: `sequence s`, `ids` or
    /// `strict sequence t`.
    pub violation: Option<(&'static str, CallsViolation)>,
}

/// Checks the calls of the three [`Loads`] with [`check_calls`], in this
/// order, stopping at the first violation: sequence `s` (block 20) and the
/// ids in order per client, and each server's in real time; the strict
/// sequence `t` (block 1) in real time across every client of every server.
pub fn check_loads(start: Instant, seq: &[Call], ids: &[Call], strict: &[Call]) -> LoadsChecked {
    let checks = [
        ("sequence s", seq, Order::PerClient, true),
        ("ids", ids, Order::PerClient, true),
        ("strict sequence t", strict, Order::RealTime, false),
    ];
    let mut values = [0; 3];
    let mut violation = None;
    for (i, (what, calls, order, per_server)) in checks.into_iter().enumerate() {
        match check_calls(calls, start, order, per_server) {
            Ok(c) => values[i] = c.values,
            Err(v) => {
                violation = Some((what, v));
                break;
            }
        }
    }
    let [seq, ids, strict] = values;
    LoadsChecked {
        seq,
        ids,
        strict,
        violation,
    }
}

/// What [`postgres_cut_off_from_one_of_three`] did: every call, and when.
#[derive(Debug)]
pub struct CutRun {
    /// When the load started: the histories' time zero.
    pub start: Instant,
    /// When PostgreSQL was cut off from server 0.
    pub cut: Instant,
    /// When the link was healed.
    pub heal: Instant,
    /// The calls of `POST /v1/sequences/s/next` (block 20, 2 clients per
    /// server, clients 0..6).
    pub seq: Vec<Call>,
    /// The calls of `POST /v1/ids/next` (1 client per server, from 100).
    pub ids: Vec<Call>,
    /// The calls of `POST /v1/sequences/t/next` (strict: block 1; 1 client
    /// per server, from 200).
    pub strict: Vec<Call>,
    /// Calls of the sequence the other two servers answered during the cut.
    pub others_during: usize,
}

/// One scenario: PostgreSQL (`pg`) cut off from one of three `keysmith
/// serve` (the binary `exe`, each in a host of its own, `--fixed-blocks`)
/// for `partition`, under load from `client` on a sequence `s` (block 20),
/// a strict sequence `t` (block 1) and `/v1/ids/next`; then healed, and
/// loaded until the cut-off server answered 50 sequence calls and 10 ids
/// again.
///
/// # Errors
/// A sequence cannot be created, a server never became healthy or never
/// answered again, or [`interrupt`].
///
/// # Panics
/// When a namespace command fails (see [`Net`]).
pub fn postgres_cut_off_from_one_of_three(
    net: &Net,
    client: &Host,
    pg: &PostgresNet,
    exe: &Path,
    partition: Duration,
) -> Result<CutRun, String> {
    let url = pg.url();
    keysmith(net, client, exe, &url, &["create", "s", "--block", "20"])?;
    keysmith(net, client, exe, &url, &["create", "t", "--block", "1"])?;
    let servers = Server::start_n(net, exe, 3, &url, &["--fixed-blocks"]);
    in_client(net, client, || async {
        let http = http();
        for s in &servers {
            s.healthy(&http).await?;
        }
        let start = Instant::now();
        let Loads { seq, ids, strict } = Loads::start(&http, &servers);
        let loaded = async {
            Loads::ready(&seq, &ids, start, servers.len()).await?;
            let cut = Instant::now();
            net.cut_pair(&pg.host, &servers[0].host);
            let others_before = seq.ok_from(1, cut) + seq.ok_from(2, cut);
            let held = hold(partition).await;
            let others_during = seq.ok_from(1, cut) + seq.ok_from(2, cut) - others_before;
            let heal = Instant::now();
            net.heal_pair(&pg.host, &servers[0].host);
            held?;
            seq.until_ok(0, heal, 50, "after the heal").await?;
            ids.until_ok(0, heal, 10, "ids after the heal").await?;
            Ok::<_, String>((cut, heal, others_during))
        }
        .await;
        // Stopped whatever happened: no client task outlives the run.
        let seq = seq.stop().await;
        let ids = ids.stop().await;
        let strict = strict.stop().await;
        let (cut, heal, others_during) = loaded?;
        Ok(CutRun {
            start,
            cut,
            heal,
            seq,
            ids,
            strict,
            others_during,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answered call of `client` through `server`, sent `at_ms` after
    /// `start`, taking 1 ms.
    fn call(start: Instant, client: u32, server: usize, at_ms: u64, values: &[i64]) -> Call {
        let sent = start + Duration::from_millis(at_ms);
        Call::ok(
            client,
            server,
            sent,
            sent + Duration::from_millis(1),
            values.to_vec(),
        )
    }

    /// Two clients of server 1 whose values go back in real time: fine per
    /// client across all servers, a violation of server 1's own history.
    #[test]
    fn one_servers_values_going_back_in_real_time_are_found_per_server() {
        let start = Instant::now();
        let calls = [
            call(start, 0, 0, 0, &[1, 2]),
            call(start, 2, 1, 0, &[10]),
            call(start, 3, 1, 5, &[4]),
        ];
        let all = check_calls(&calls, start, Order::PerClient, false).unwrap();
        assert_eq!(all.values, 4);
        let v = check_calls(&calls, start, Order::PerClient, true).unwrap_err();
        assert_eq!(v.server, Some(1));
        assert!(
            matches!(v.violation, HistoryViolation::RealTime { .. }),
            "{v}"
        );
        let text = v.to_string();
        assert!(
            text.starts_with("through server 1: real-time order"),
            "{text}"
        );
        assert!(
            text.contains("client 2") && text.contains("client 3"),
            "{text}"
        );
    }

    /// A value answered by two servers: a duplicate in the history of all.
    #[test]
    fn a_value_from_two_servers_is_a_duplicate_of_the_history_of_all() {
        let start = Instant::now();
        let calls = [call(start, 0, 0, 0, &[1, 2]), call(start, 2, 1, 5, &[2, 3])];
        let v = check_calls(&calls, start, Order::PerClient, true).unwrap_err();
        assert_eq!(v.server, None);
        assert!(
            matches!(v.violation, HistoryViolation::Duplicate { value: 2, .. }),
            "{v}"
        );
        assert!(
            v.to_string().starts_with("duplicate: 2 handed out twice"),
            "{v}"
        );
    }

    /// A call with no answer may or may not have taken its values: left
    /// out, even when they repeat another's.
    #[test]
    fn a_call_with_no_answer_is_left_out() {
        let start = Instant::now();
        let mut lost = call(start, 1, 0, 3, &[2]);
        lost.status = 0;
        let calls = [call(start, 0, 0, 0, &[1, 2]), lost];
        let c = check_calls(&calls, start, Order::RealTime, true).unwrap();
        assert_eq!((c.ops, c.values), (1, 2));
    }

    /// The loads are checked in turn; the first violation names its load,
    /// and the loads after it are not checked.
    #[test]
    fn check_loads_stops_at_the_first_violation_and_names_its_load() {
        let start = Instant::now();
        let seq = [call(start, 0, 0, 0, &[1, 2]), call(start, 1, 1, 0, &[21])];
        let ids = [call(start, 100, 0, 0, &[7]), call(start, 101, 1, 5, &[7])];
        let strict = [call(start, 200, 0, 0, &[5]), call(start, 201, 1, 10, &[4])];
        let c = check_loads(start, &seq, &ids, &strict);
        assert_eq!((c.seq, c.ids, c.strict), (3, 0, 0));
        let (what, v) = c.violation.expect("a violation");
        assert_eq!(what, "ids");
        assert!(
            matches!(v.violation, HistoryViolation::Duplicate { value: 7, .. }),
            "{v}"
        );

        let c = check_loads(start, &seq, &ids[..1], &strict);
        assert_eq!((c.seq, c.ids, c.strict), (3, 1, 0));
        let (what, v) = c.violation.expect("a violation");
        assert_eq!(what, "strict sequence t");
        assert!(
            matches!(v.violation, HistoryViolation::RealTime { .. }),
            "{v}"
        );

        let c = check_loads(start, &seq, &ids[..1], &strict[..1]);
        assert_eq!(
            c,
            LoadsChecked {
                seq: 3,
                ids: 1,
                strict: 1,
                violation: None
            }
        );
    }
}

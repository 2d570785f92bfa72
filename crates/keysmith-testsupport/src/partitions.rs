//! What the partition tests (`crates/keysmith-cli/tests/partitions.rs`) and
//! `keysmith verify --partitions` share, written once: a `keysmith serve`
//! in a host of a [`Net`], load clients that call it over HTTP and write
//! down every call ([`Call`]: invoke and complete time, status, values),
//! what a cut-off server did ([`Timing`]), and one whole scenario,
//! [`postgres_cut_off_from_one_of_three`].
//!
//! The checking of the calls is not here: the caller feeds them to
//! `keysmith::verify::history` (this crate does not depend on keysmith).
//!
//! Waits that can fail return `Err` with what did not happen; they also
//! stop early, with `Err`, after [`interrupt`] (ctrl-c in the command), so
//! that the caller drops its [`Net`] and everything is torn down.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// `POST url` and what came back; `key` names the array of values.
pub async fn post(http: &reqwest::Client, url: &str, key: &str) -> (u16, Vec<i64>, String) {
    match http.post(url).send().await {
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
    }
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
                        let sent = Instant::now();
                        let (status, values, error) = post(&http, &url, key).await;
                        let done = Instant::now();
                        let failed = status != 200;
                        calls.lock().unwrap_or_else(|p| p.into_inner()).push(Call {
                            client: me,
                            server,
                            sent,
                            done,
                            status,
                            values,
                            error,
                        });
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
            .map(|c| c.done - c.sent)
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
        let targets: Vec<(usize, String)> = servers
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.base.clone()))
            .collect();
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
    let servers: Vec<Server> = (0..3)
        .map(|i| {
            Server::start(
                net,
                exe,
                net.add_host(&format!("s{i}")),
                &url,
                &["--fixed-blocks"],
            )
        })
        .collect();
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

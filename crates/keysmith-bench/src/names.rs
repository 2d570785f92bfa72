//! `keysmith-bench names`: a release `keysmith serve` holding many sequences
//! (issue 50: one sequence per customer). Per store and name count N:
//! creates N sequences over HTTP and uses each once, and measures, beside a
//! second server over a store holding one name (the baseline, in the same
//! run, in alternating slices): the create rate, the first-use rate, the hot
//! sequence's `next` rate (while the sweeper closes the customers' handles,
//! and again once the server says none is open), the cost of a 404 (a
//! `next` on a name that does not exist), and the subject server's RSS
//! before the names, at its peak, when idle eviction has closed their
//! handles, and [`SETTLE`] later (the allocator returns freed pages to the
//! kernel in the background).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::http;

/// The stores `names` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// A SQLite file in a temporary directory.
    Sqlite,
    /// A throwaway PostgreSQL (keysmith-testsupport starts it).
    Postgres,
}

impl StoreKind {
    fn label(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "SQLite",
            StoreKind::Postgres => "PostgreSQL",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Name counts, each a run of its own on fresh stores.
    pub counts: Vec<usize>,
    /// The stores.
    pub stores: Vec<StoreKind>,
    /// The `keysmith` binary (a release build).
    pub keysmith: PathBuf,
    /// Seconds of hot `next` per server (in alternating slices).
    pub seconds: f64,
    /// The servers' `--handle-idle-secs`.
    pub idle_secs: u64,
    /// 404s per server (in alternating slices).
    pub misses: usize,
}

/// One run: a store, a name count.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub store: StoreKind,
    pub names: usize,
    /// Creates per second over one keep-alive connection, all N.
    pub create_per_sec: f64,
    /// Creates per second over the last tenth of the N (the most names).
    pub create_last_tenth_per_sec: f64,
    /// First `next` per second on each name, one connection.
    pub first_use_per_sec: f64,
    /// Requests answered other than 2xx, of the creates and first uses.
    pub failed: u64,
    /// The hot sequence's `next`, 2 connections, on the server with N names.
    pub hot_per_sec: f64,
    /// The same on the baseline server (one name), in the slices between.
    pub hot_one_name_per_sec: f64,
    /// The same after idle eviction closed every handle: N names in the
    /// store, none open (the first `next` opens the hot one again).
    pub hot_idle_per_sec: f64,
    /// And on the server with one name, in the same slices.
    pub hot_idle_one_name_per_sec: f64,
    /// Microseconds per 404 on the server with N names, one connection.
    pub miss_us: f64,
    /// The same on the baseline server.
    pub miss_one_name_us: f64,
    /// The server's RSS in MiB: before the names, at its peak (VmHWM, read
    /// when eviction ends), and when idle eviction has closed the handles.
    pub rss_before_mib: f64,
    pub rss_peak_mib: f64,
    pub rss_after_mib: f64,
    /// And [`SETTLE`] after the last handle closed.
    pub rss_settled_mib: f64,
    /// Handles still open after eviction (from /metrics; `None`: not read).
    pub open_after: Option<u64>,
}

/// A `keysmith serve` child, killed (by its own pid) when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    async fn start(o: &Options, url: &str, log: &Path) -> anyhow::Result<Served> {
        let port = keysmith_testsupport::free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let file = std::fs::File::create(log)?;
        let child = Command::new(&o.keysmith)
            .arg("--store")
            .arg(url)
            .args(["serve", "--listen", &addr.to_string()])
            .args(["--handle-idle-secs", &o.idle_secs.to_string()])
            .env_remove("KEYSMITH_STORE")
            .env_remove("KEYSMITH_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", o.keysmith.display()))?;
        let served = Served { child, addr };
        let since = Instant::now();
        loop {
            if let Ok(mut c) = http::Conn::open(addr).await
                && let Ok((200, _)) = c.call(&http::request("GET", "/livez")).await
            {
                return Ok(served);
            }
            if since.elapsed() > Duration::from_secs(30) {
                anyhow::bail!(
                    "keysmith serve on {url} did not answer /livez in 30 s; its log: {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `(VmRSS, VmHWM)` in MiB.
    fn rss(&self) -> anyhow::Result<(f64, f64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .map(|kb| kb / 1024.0)
                .ok_or_else(|| anyhow::anyhow!("no {k} in /proc/PID/status"))
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }
}

/// Calls `req` once per item on one keep-alive connection; returns the
/// seconds taken and the answers other than `ok`.
async fn each(
    addr: SocketAddr,
    reqs: impl Iterator<Item = Vec<u8>>,
    ok: u16,
) -> anyhow::Result<(f64, u64, Option<String>)> {
    let mut c = http::Conn::open(addr).await?;
    let mut failed = 0;
    let mut first_failure = None;
    let since = Instant::now();
    for r in reqs {
        let (status, body) = c.call(&r).await?;
        if status != ok {
            failed += 1;
            first_failure
                .get_or_insert_with(|| format!("{status} {}", String::from_utf8_lossy(body)));
        }
    }
    Ok((since.elapsed().as_secs_f64(), failed, first_failure))
}

fn create(name: &str) -> Vec<u8> {
    http::json_request("POST", "/v1/sequences", &format!(r#"{{"name":"{name}"}}"#))
}

fn next(name: &str) -> Vec<u8> {
    http::request("POST", &format!("/v1/sequences/{name}/next"))
}

fn customer(i: usize) -> String {
    format!("customer-{i:07}")
}

/// The open sequence handles a server reports on /metrics, if it does.
async fn open_handles(addr: SocketAddr) -> Option<u64> {
    let mut c = http::Conn::open(addr).await.ok()?;
    let (_, body) = c.call(&http::request("GET", "/metrics")).await.ok()?;
    let text = String::from_utf8_lossy(body);
    text.lines()
        .filter(|l| l.starts_with("keysmith_open_handles{kind=\"sequence\"}"))
        .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
}

/// Runs every count on every store.
///
/// # Errors
/// Bad options; a server that does not start; a store that cannot be made.
pub async fn run(o: &Options) -> anyhow::Result<Vec<Row>> {
    if o.counts.is_empty() || o.counts.iter().any(|&n| !(1..=10_000_000).contains(&n)) {
        anyhow::bail!("--count must be between 1 and 10000000");
    }
    if !(o.seconds > 0.0 && o.seconds <= 600.0) {
        anyhow::bail!(
            "--seconds must be above 0 and at most 600, got {}",
            o.seconds
        );
    }
    if !(1..=3600).contains(&o.idle_secs) {
        anyhow::bail!(
            "--idle-secs must be between 1 and 3600, got {}",
            o.idle_secs
        );
    }
    let dir = tempfile::tempdir()?;
    let pg = match o.stores.contains(&StoreKind::Postgres) {
        true => Some(keysmith_testsupport::postgres::TempPostgres::start().ok_or_else(|| {
            anyhow::anyhow!(
                "cannot start a throwaway PostgreSQL (initdb and postgres on PATH or in /usr/lib/postgresql/*/bin?)"
            )
        })?),
        false => None,
    };
    let mut rows = Vec::new();
    for &store in &o.stores {
        for &n in &o.counts {
            let url = |tag: &str| match (store, &pg) {
                (StoreKind::Postgres, Some(pg)) => format!("{}?schema=names_{n}_{tag}", pg.url()),
                _ => format!(
                    "sqlite://{}",
                    dir.path().join(format!("{n}-{tag}.db")).display()
                ),
            };
            eprintln!("{} with {n} names:", store.label());
            let row = one(o, store, n, &url("many"), &url("one"), dir.path()).await?;
            eprintln!("  {row:?}");
            rows.push(row);
        }
    }
    Ok(rows)
}

/// How long after the last handle closed the settled RSS is read.
pub const SETTLE: Duration = Duration::from_secs(20);

/// Slices of each alternating measurement.
const SLICES: u32 = 6;

/// The hot sequence's `next` on `many` and on `one`, 2 connections, in
/// alternating slices of `--seconds` in all per server.
async fn hot_pair(
    o: &Options,
    many: &Served,
    one: &Served,
) -> anyhow::Result<(http::Load, http::Load)> {
    let slice = Duration::from_secs_f64(o.seconds / f64::from(SLICES));
    let (mut hot, mut hot_one) = (http::Load::default(), http::Load::default());
    for _ in 0..SLICES {
        for (load, s) in [(&mut hot, many), (&mut hot_one, one)] {
            let l = http::load(s.addr, &next("hot"), 2, slice, None).await?;
            load.requests += l.requests;
            load.seconds += l.seconds;
            load.failed += l.failed;
        }
    }
    Ok((hot, hot_one))
}

async fn one(
    o: &Options,
    store: StoreKind,
    n: usize,
    many_url: &str,
    one_url: &str,
    dir: &Path,
) -> anyhow::Result<Row> {
    let many = Served::start(o, many_url, &dir.join(format!("{n}-many.log"))).await?;
    let one = Served::start(o, one_url, &dir.join(format!("{n}-one.log"))).await?;
    for s in [&many, &one] {
        let (_, failed, why) = each(s.addr, std::iter::once(create("hot")), 201).await?;
        if failed > 0 {
            anyhow::bail!("creating the hot sequence: {}", why.unwrap_or_default());
        }
        // Warm: the handle open, its block taken.
        http::load(s.addr, &next("hot"), 2, Duration::from_millis(300), None).await?;
    }
    let (rss_before, _) = many.rss()?;
    let tenth = (n / 10).max(1);
    let (first, f1, w1) =
        each(many.addr, (0..n - tenth).map(|i| create(&customer(i))), 201).await?;
    let (last, f2, w2) = each(many.addr, (n - tenth..n).map(|i| create(&customer(i))), 201).await?;
    let (used, f3, w3) = each(many.addr, (0..n).map(|i| next(&customer(i))), 200).await?;
    let failed = f1 + f2 + f3;
    if let Some(why) = w1.or(w2).or(w3) {
        eprintln!("  {failed} failed; the first: {why}");
    }
    // The hot sequence, on each server in turn, while the sweeper closes
    // the customers' handles (each close a store write).
    let (hot, hot_one) = hot_pair(o, &many, &one).await?;
    // Idle eviction: every handle unused for idle_secs is closed by the
    // sweeper; awaited on the server's own count of open handles.
    let evicted = std::time::Instant::now();
    let open_after = loop {
        let open = open_handles(many.addr).await;
        if open == Some(0) {
            break open;
        }
        if evicted.elapsed() > Duration::from_secs(o.idle_secs * 4 + 600) {
            anyhow::bail!("the server with {n} names still has {open:?} handles open");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (rss_after, peak) = many.rss()?;
    let closed = Instant::now();
    // The hot sequence again, with N names in the store and none open.
    let (hot_idle, hot_idle_one) = hot_pair(o, &many, &one).await?;
    // 404s: names that are not there, sorting among the customers (so a
    // hint would have neighbours to score), on servers that close nothing
    // meanwhile.
    let per = (o.misses / SLICES as usize).max(1);
    let (mut miss, mut miss_one) = (0.0, 0.0);
    for k in 0..SLICES as usize {
        for (secs, s) in [(&mut miss, &many), (&mut miss_one, &one)] {
            let reqs = (0..per).map(|i| next(&format!("{}x", customer((k * per + i) % n))));
            let (t, _, _) = each(s.addr, reqs, 404).await?;
            *secs += t;
        }
    }
    let total_misses = (per * SLICES as usize) as f64;
    // The allocator hands idle pages back over seconds (jemalloc's decay:
    // 10 s): RSS once SETTLE has passed since the last handle closed.
    let settle = SETTLE.saturating_sub(closed.elapsed());
    tokio::time::sleep(settle).await;
    let (rss_settled, _) = many.rss()?;
    Ok(Row {
        store,
        names: n,
        create_per_sec: n as f64 / (first + last),
        create_last_tenth_per_sec: tenth as f64 / last,
        first_use_per_sec: n as f64 / used,
        failed: failed + hot.failed + hot_one.failed + hot_idle.failed + hot_idle_one.failed,
        hot_per_sec: hot.per_sec(),
        hot_one_name_per_sec: hot_one.per_sec(),
        hot_idle_per_sec: hot_idle.per_sec(),
        hot_idle_one_name_per_sec: hot_idle_one.per_sec(),
        miss_us: miss / total_misses * 1e6,
        miss_one_name_us: miss_one / total_misses * 1e6,
        rss_before_mib: rss_before,
        rss_peak_mib: peak,
        rss_after_mib: rss_after,
        rss_settled_mib: rss_settled,
        open_after,
    })
}

/// The rows as a Markdown table, with each row's ratios to its baseline
/// and the create and first-use rates against the smallest count's on the
/// same store.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| store | names | creates/s (last tenth) | vs fewest | first uses/s | vs fewest | hot next/s during eviction: N names / one name | hot next/s after: N names / one name | 404: N names / one name (us) | RSS MiB before / peak / at eviction's end / 20 s later | failed |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let least = rows
            .iter()
            .filter(|b| b.store == r.store)
            .min_by_key(|b| b.names)
            .unwrap_or(r);
        out.push_str(&format!(
            "| {} | {} | {:.0} ({:.0}) | {:.2}x | {:.0} | {:.2}x | {:.0} / {:.0} = {:.2}x | {:.0} / {:.0} = {:.2}x | {:.0} / {:.0} | {:.1} / {:.1} / {:.1} / {:.1} | {} |\n",
            r.store.label(),
            r.names,
            r.create_per_sec,
            r.create_last_tenth_per_sec,
            r.create_per_sec / least.create_per_sec,
            r.first_use_per_sec,
            r.first_use_per_sec / least.first_use_per_sec,
            r.hot_per_sec,
            r.hot_one_name_per_sec,
            r.hot_per_sec / r.hot_one_name_per_sec,
            r.hot_idle_per_sec,
            r.hot_idle_one_name_per_sec,
            r.hot_idle_per_sec / r.hot_idle_one_name_per_sec,
            r.miss_us,
            r.miss_one_name_us,
            r.rss_before_mib,
            r.rss_peak_mib,
            r.rss_after_mib,
            r.rss_settled_mib,
            r.failed,
        ));
    }
    out
}

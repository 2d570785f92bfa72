//! The strict rows of `keysmith-bench compare` (issue 26): a strict sequence (block 1)
//! over HTTP at 1, 4, 16 and 64 connections, beside the store's bare fsync
//! loop, one durable write per value, measured in alternating slices with
//! each row (the disk's fsync rate moves with the machine's other work).
//!
//! A strict handle groups the requests waiting at once into one reservation
//! (`keysmith::sequence`, `strict.rs`), so with many connections it serves
//! many values per commit; the bare loop pays one commit per value.

use std::hint::black_box;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use super::http;
use super::rows::{KS_STRICT, Row, human, measured, skipped};

/// Connections of the strict HTTP rows.
pub const CONNS: [usize; 4] = [1, 4, 16, 64];

/// The name of the baseline row of `store_name`.
pub fn baseline_name(store_name: &str) -> String {
    format!("bare fsync loop, {store_name}")
}

/// The row names of a store, for skipped stores.
pub fn names(store_name: &str) -> Vec<String> {
    let mut v = vec![baseline_name(store_name)];
    v.extend(CONNS.iter().map(|c| row_name(store_name, *c)));
    v.push(fixed_rate_name(store_name));
    v
}

fn fixed_rate_name(store_name: &str) -> String {
    format!("POST next, strict, {store_name}, fixed rate")
}

fn row_name(store_name: &str, conns: usize) -> String {
    format!("POST next, strict, {store_name}, {conns} connection(s)")
}

/// The baseline and the strict rows of one store.
///
/// # Errors
/// A store or server that fails mid-run.
pub async fn rows(
    store_name: &str,
    url: &str,
    dir: &Path,
    d: Duration,
) -> anyhow::Result<Vec<Row>> {
    let config = keysmith_server::Config {
        listen: "127.0.0.1:0".parse()?,
        store_url: url.to_owned(),
        // Every connection of the lab comes from one address.
        max_connections_per_ip: usize::MAX,
        ..keysmith_server::Config::default()
    };
    let server = keysmith_server::Server::bind(config).await?;
    let addr = server.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run(async {
        let _ = stop_rx.await;
    }));
    // One file for every slice of the bare SQLite loop: a warm file, whose
    // WAL has reached its size, as keysmith's own file is (a fresh WAL
    // grows on every commit, and a grown file's fsync costs more).
    let bare_file = dir.join(format!("keysmith-fsync-{:016x}.db", rand::random::<u64>()));
    let at = At {
        addr,
        store_name,
        url,
        bare_file: &bare_file,
        d,
    };
    let result = measure(&at).await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", bare_file.display()));
    }
    let _ = stop_tx.send(());
    serving.await??;
    result
}

/// Slices of the bare loop and of a strict row, in turn, per row.
const SLICES: u32 = 6;

/// Connections of the fixed-rate row.
const FIXED_RATE_CONNS: usize = 16;

/// One run of a bare loop: values, seconds, and each value's latency.
#[derive(Debug, Default)]
struct BareRun {
    values: u64,
    seconds: f64,
    /// Nanoseconds, one per value.
    latencies: Vec<u64>,
    start: Option<Instant>,
    length: Duration,
}

impl BareRun {
    fn new(length: Duration) -> Self {
        BareRun {
            length,
            ..BareRun::default()
        }
    }

    /// Starts the clock (after the loop's set-up).
    fn begin(&mut self) {
        self.start = Some(Instant::now());
    }

    /// The next write's start, while the run lasts.
    fn next(&self) -> Option<Instant> {
        let start = self.start?;
        (start.elapsed() < self.length).then(Instant::now)
    }

    /// One value, written since `t`.
    fn took(&mut self, t: Instant) {
        self.values += 1;
        self.latencies
            .push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }

    fn done(mut self) -> Self {
        self.seconds = self.start.take().map_or(0.0, |s| s.elapsed().as_secs_f64());
        self
    }

    /// Adds `other`'s values, seconds and latencies.
    fn add(&mut self, other: BareRun) {
        self.values += other.values;
        self.seconds += other.seconds;
        self.latencies.extend(other.latencies);
    }

    fn rate(&self) -> f64 {
        self.values as f64 / self.seconds
    }

    /// The `p` quantile of the latencies, nanoseconds.
    fn pct(&mut self, p: f64) -> u64 {
        self.latencies.sort_unstable();
        let i = ((self.latencies.len().max(1) - 1) as f64 * p).round() as usize;
        self.latencies.get(i).copied().unwrap_or(0)
    }

    /// The `p` quantile of the latencies weighted by their length: the
    /// length of the write in progress that a moment picked at random
    /// during the loop finds, which is what a request arriving then waits
    /// behind. Slow writes fill more of the time than of the count.
    fn pct_by_time(&mut self, p: f64) -> u64 {
        self.latencies.sort_unstable();
        let total: u128 = self.latencies.iter().map(|&l| u128::from(l)).sum();
        let mut below = 0u128;
        for &l in &self.latencies {
            below += u128::from(l);
            if below as f64 >= total as f64 * p {
                return l;
            }
        }
        self.latencies.last().copied().unwrap_or(0)
    }
}

fn bare_note(store_name: &str) -> &'static str {
    match store_name {
        "SQLite" => {
            "BEGIN IMMEDIATE; UPDATE; COMMIT per value on a WAL file with synchronous=FULL (keysmith's own settings), one connection; all its slices"
        }
        "PostgreSQL" => {
            "one synchronously committed UPDATE per value, one connection; all its slices"
        }
        _ => "one put per value (a raft commit each), one client; all its slices",
    }
}

/// The rows of a store without a URL.
pub fn skipped_rows(store_name: &str, why: &str) -> Vec<Row> {
    names(store_name)
        .into_iter()
        .map(|n| skipped("strict", n, KS_STRICT, why))
        .collect()
}

async fn measure(at: &At<'_>) -> anyhow::Result<Vec<Row>> {
    let (addr, store_name) = (at.addr, at.store_name);
    let name = format!("cmp-strict-{:08x}", rand::random::<u32>());
    let (status, body) = http::Conn::open(addr)
        .await?
        .call(&http::json_request(
            "POST",
            "/v1/sequences",
            &format!(r#"{{"name":"{name}","block":1}}"#),
        ))
        .await
        .map(|(s, b)| (s, String::from_utf8_lossy(b).into_owned()))?;
    if status != 201 {
        anyhow::bail!("creating {name} over HTTP: {status} {body}");
    }
    let req = http::request("POST", &format!("/v1/sequences/{name}/next"));
    let mut rows = Vec::new();
    let mut all = BareRun::default();
    for conns in CONNS {
        let before = row_of(addr, &name).await?;
        let Sliced { load: l, bare: b } = at.sliced(&req, conns, None).await?;
        let after = row_of(addr, &name).await?;
        let base_rate = b.rate();
        all.add(b);
        let reservations = after.1 - before.1;
        let per = if reservations > 0 {
            format!(
                "{:.1} values per store reservation",
                (after.0 - before.0) as f64 / reservations as f64
            )
        } else {
            "no reservation".into()
        };
        rows.push(Row {
            requests_per_sec: Some(l.per_sec()),
            note: format!(
                "count=1; {per}; p50 {:.0} us, p99.9 {:.0} us; the bare loop in the slices between: {}/s",
                l.pct(0.5).unwrap_or(0) as f64 / 1000.0,
                l.pct(0.999).unwrap_or(0) as f64 / 1000.0,
                human(base_rate),
            ),
            baseline: Some((
                format!("{}, interleaved", baseline_name(store_name)),
                l.per_sec() / base_rate,
            )),
            ..measured(
                "strict",
                row_name(store_name, conns),
                KS_STRICT,
                l.per_sec(),
            )
        });
    }
    rows.push(at.fixed_rate(&req, all.rate() / 2.0).await?);
    http::Conn::open(addr)
        .await?
        .call(&http::request("DELETE", &format!("/v1/sequences/{name}")))
        .await?;
    let base = Row {
        note: bare_note(store_name).into(),
        ..measured("strict", baseline_name(store_name), KS_STRICT, all.rate())
    };
    rows.insert(0, base);
    Ok(rows)
}

/// Rates of `conns` connections sending `req` to the server at `addr`,
/// in [`SLICES`] slices alternating with the store's bare loop (the
/// leader rows of `keysmith-bench leader` use the strict rows' slicing):
/// (requests per second, p99 ns, the bare loop's values per second).
///
/// # Errors
/// A store or server that fails mid-run, or a failed request.
pub async fn sliced_rates(
    addr: SocketAddr,
    store_name: &str,
    url: &str,
    bare_file: &Path,
    d: Duration,
    req: &[u8],
    conns: usize,
) -> anyhow::Result<(f64, u64, f64)> {
    let at = At {
        addr,
        store_name,
        url,
        bare_file,
        d,
    };
    let Sliced { load, bare } = at.sliced(req, conns, None).await?;
    Ok((load.per_sec(), load.pct(0.99).unwrap_or(0), bare.rate()))
}

/// What [`At::sliced`] measured.
struct Sliced {
    /// The strict requests of every slice.
    load: http::Load,
    /// The bare loop in the slices between.
    bare: BareRun,
}

/// Where a store's strict rows run: the server, the store, and how long
/// each row takes.
struct At<'a> {
    addr: SocketAddr,
    store_name: &'a str,
    url: &'a str,
    /// The bare SQLite loop's file, kept from slice to slice.
    bare_file: &'a Path,
    d: Duration,
}

impl At<'_> {
    /// The store's bare loop for one slice of `slice`.
    async fn bare(&self, slice: Duration) -> anyhow::Result<BareRun> {
        let run = BareRun::new(slice);
        match self.store_name {
            "SQLite" => sqlite_loop(self.bare_file, run).await,
            "PostgreSQL" => postgres_loop(self.url, run).await,
            _ => etcd_loop(self.url, run).await,
        }
    }

    /// [`SLICES`] slices each of the bare loop and of `conns` connections
    /// sending `req` (at `rate` if given), in turn: the disk's fsync rate
    /// changes with the machine's other work, and weighs on both alike.
    async fn sliced(&self, req: &[u8], conns: usize, rate: Option<f64>) -> anyhow::Result<Sliced> {
        let slice = self.d / SLICES;
        let mut load = http::Load::default();
        let mut bare = BareRun::default();
        for _ in 0..SLICES {
            bare.add(self.bare(slice).await?);
            let x = http::load(self.addr, req, conns, slice, rate).await?;
            load.requests += x.requests;
            load.seconds += x.seconds;
            load.failed += x.failed;
            load.latencies.extend(x.latencies);
        }
        load.latencies.sort_unstable();
        if load.failed > 0 {
            anyhow::bail!(
                "{} on {}, {conns} connection(s): {} of {} requests failed",
                String::from_utf8_lossy(req).lines().next().unwrap_or(""),
                self.store_name,
                load.failed,
                load.requests
            );
        }
        Ok(Sliced { load, bare })
    }

    /// The strict row at a fixed rate (open loop, [`FIXED_RATE_CONNS`]
    /// connections) of half what the bare loop wrote in the throughput
    /// rows: its latency beside the bare loop's own per value in the slices
    /// between, and the issue's bound, one fsync plus one batch (twice the
    /// bare p99).
    async fn fixed_rate(&self, req: &[u8], rate: f64) -> anyhow::Result<Row> {
        let rate = (rate.round() as u64).max(1);
        let Sliced {
            load: l,
            bare: mut b,
        } = self
            .sliced(req, FIXED_RATE_CONNS, Some(rate as f64))
            .await?;
        let us = |ns: u64| ns as f64 / 1000.0;
        let p99 = l.pct(0.99).unwrap_or(0);
        let bare_p99 = b.pct(0.99);
        let bare_p99_by_time = b.pct_by_time(0.99);
        Ok(Row {
            requests_per_sec: Some(l.per_sec()),
            note: format!(
                "{rate}/s asked (half the bare loop's rate), {FIXED_RATE_CONNS} connections, open loop; p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us; the bare loop's p99 per value in the slices between: {:.0} us (weighted by time, the write a request arriving at a random moment finds in progress: {:.0} us); p99 / (one fsync plus one batch = 2 x bare p99) = {:.2}",
                us(l.pct(0.5).unwrap_or(0)),
                us(p99),
                us(l.pct(0.999).unwrap_or(0)),
                us(bare_p99),
                us(bare_p99_by_time),
                p99 as f64 / (2.0 * bare_p99.max(1) as f64),
            ),
            ..measured(
                "strict",
                fixed_rate_name(self.store_name),
                KS_STRICT,
                l.per_sec(),
            )
        })
    }
}

/// The sequence's next free value and row version, over HTTP.
async fn row_of(addr: SocketAddr, name: &str) -> anyhow::Result<(i64, i64)> {
    let mut c = http::Conn::open(addr).await?;
    let (status, body) = c
        .call(&http::request("GET", &format!("/v1/sequences/{name}")))
        .await?;
    if status != 200 {
        anyhow::bail!("reading {name}: {status}");
    }
    let v: serde_json::Value = serde_json::from_slice(body)?;
    let field = |k: &str| {
        v[k].as_i64()
            .ok_or_else(|| anyhow::anyhow!("{name}: no {k} in {v}"))
    };
    Ok((field("next")?, field("version")?))
}

async fn sqlite_loop(path: &Path, mut run: BareRun) -> anyhow::Result<BareRun> {
    let p = path.to_owned();
    tokio::task::spawn_blocking(move || -> anyhow::Result<BareRun> {
        let c = rusqlite::Connection::open(&p)?;
        let mode: String = c.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        anyhow::ensure!(mode.eq_ignore_ascii_case("wal"), "journal mode {mode}");
        c.execute_batch(
            "PRAGMA synchronous=FULL;
             CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
             INSERT OR IGNORE INTO t VALUES (1, 0);",
        )?;
        run.begin();
        while let Some(t) = run.next() {
            c.execute_batch("BEGIN IMMEDIATE; UPDATE t SET v = v + 1 WHERE id = 1; COMMIT;")?;
            run.took(t);
        }
        Ok(run.done())
    })
    .await?
}

async fn postgres_loop(url: &str, mut run: BareRun) -> anyhow::Result<BareRun> {
    let client = keysmith::store::postgres::connect(url).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot connect to PostgreSQL at {}: {e}",
            keysmith::store::redact_url(url)
        )
    })?;
    let t = format!("ks_cmp_fsync_{:016x}", rand::random::<u64>());
    client
        .batch_execute(&format!(
            "SET synchronous_commit = on;
             CREATE TABLE {t} (id int PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO {t} VALUES (1, 0);"
        ))
        .await?;
    let stmt = client
        .prepare(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
        .await?;
    run.begin();
    while let Some(t) = run.next() {
        black_box(client.execute(&stmt, &[]).await?);
        run.took(t);
    }
    let rate = run.done();
    client.batch_execute(&format!("DROP TABLE {t}")).await?;
    Ok(rate)
}

#[cfg(feature = "etcd")]
async fn etcd_loop(url: &str, mut run: BareRun) -> anyhow::Result<BareRun> {
    let u = keysmith::store::etcd::EtcdUrl::parse(url)?;
    if u.uses_tls() || u.user().is_some() {
        anyhow::bail!("the bare etcd loop takes a plain etcd:// URL without a user");
    }
    let mut client = etcd_client::Client::connect(&u.endpoints, None).await?;
    let key = format!("{}/keysmith-fsync-{:016x}", u.prefix, rand::random::<u64>());
    run.begin();
    while let Some(t) = run.next() {
        client
            .put(key.as_str(), run.values.to_string(), None)
            .await?;
        run.took(t);
    }
    let rate = run.done();
    client.delete(key.as_str(), None).await?;
    Ok(rate)
}

#[cfg(not(feature = "etcd"))]
async fn etcd_loop(_url: &str, _run: BareRun) -> anyhow::Result<BareRun> {
    anyhow::bail!("built without the etcd feature")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One slow write in a hundred is past the p99 by count, and is the
    /// p99 by time when it fills half the time.
    #[test]
    fn pct_by_time_weighs_slow_writes_by_their_length() {
        let mut run = BareRun::new(Duration::ZERO);
        run.latencies = vec![100; 99];
        run.latencies.push(9_900);
        assert_eq!(run.pct(0.99), 100);
        assert_eq!(run.pct_by_time(0.99), 9_900);
        assert_eq!(run.pct_by_time(0.4), 100);
        assert_eq!(BareRun::default().pct_by_time(0.99), 0);
    }
}

//! `keysmith-bench latency`: the latency of `POST /v1/sequences/{name}/next`
//! (count=1) at a fixed request rate beside the server's no-op `GET /livez`
//! at the same rate, in alternating rows of one run, on an in-process server
//! over a fresh SQLite file. Two sequences: one whose block runs out during
//! the run (`--block`, refilled and prefetched as usual) and one whose block
//! (2^40) never does, so a stall that only the first shows is a block
//! boundary's. Requests slower than 2 ms are grouped into stalls (slow
//! requests less than 5 ms apart), each with where in its block the first
//! value of the stall lay. A third sequence is leader-ordered (`--order
//! leader`): the p99 of strict order from the leader's memory at the same rate.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::http;
use super::rows;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Requests per second.
    pub rate: f64,
    /// Seconds per row.
    pub seconds: f64,
    /// Rounds of (livez, next with `block`, next with a block that never runs out, next of a leader-ordered sequence).
    pub rounds: u32,
    /// Connections.
    pub conns: usize,
    /// Block of the sequence that refills.
    pub block: i64,
    /// Directory of the SQLite file.
    pub dir: PathBuf,
}

/// Slow requests close together.
#[derive(Debug, Clone, Serialize)]
pub struct Stall {
    /// When the first was due, ms since the row started.
    pub at_ms: f64,
    /// How many requests.
    pub requests: usize,
    /// The longest, ms.
    pub max_ms: f64,
    /// The smallest value answered in the stall, as a position in its block
    /// (value - start) mod block; `None` for `/livez`.
    pub block_position: Option<i64>,
}

/// One row.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    pub round: u32,
    /// Rate asked and served, percentiles, load: as a row of `keysmith-bench compare`.
    #[serde(flatten)]
    pub line: rows::LatencyRow,
    /// The sequence's block (`None` for `/livez`).
    pub block: Option<i64>,
    pub stalls: Vec<Stall>,
}

/// Every row in the order run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<LatencyRow>,
    pub block: i64,
}

/// Runs the rows.
///
/// # Errors
/// Bad options, or a server or request that fails.
pub async fn run(o: &Options) -> anyhow::Result<Report> {
    if !(o.rate > 0.0 && o.rate <= 1e6) {
        anyhow::bail!("--rate must be above 0 and at most 1000000");
    }
    if !(o.seconds > 0.0 && o.seconds <= 600.0) {
        anyhow::bail!("--seconds must be above 0 and at most 600");
    }
    if !(1..=100).contains(&o.rounds) || !(1..=1024).contains(&o.conns) {
        anyhow::bail!("--rounds must be 1 to 100 and --conns 1 to 1024");
    }
    if !(2..=keysmith::store::MAX_RESERVATION).contains(&o.block) {
        anyhow::bail!("--block must be between 2 and 2^40");
    }
    let path = o.dir.join(format!(
        "keysmith-latency-{:016x}.db",
        rand::random::<u64>()
    ));
    let config = keysmith_server::Config {
        listen: "127.0.0.1:0".parse()?,
        store_url: format!("sqlite://{}", path.display()),
        adaptive: None,
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
    let result = measure(addr, o).await;
    let _ = stop_tx.send(());
    serving.await??;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    result
}

async fn measure(addr: SocketAddr, o: &Options) -> anyhow::Result<Report> {
    let d = Duration::from_secs_f64(o.seconds);
    let huge = 1i64 << 40;
    for (name, block, order) in [
        ("lat-refills", o.block, "cached"),
        ("lat-never", huge, "cached"),
        ("lat-leader", o.block, "leader"),
    ] {
        let (status, _) = http::Conn::open(addr)
            .await?
            .call(&http::json_request(
                "POST",
                "/v1/sequences",
                &format!(r#"{{"name":"{name}","block":{block},"order":"{order}"}}"#),
            ))
            .await?;
        if status != 201 {
            anyhow::bail!("creating {name}: status {status}");
        }
    }
    let livez = http::request("GET", "/livez");
    let refills = http::request("POST", "/v1/sequences/lat-refills/next");
    let never = http::request("POST", "/v1/sequences/lat-never/next");
    // Leader-ordered (issue 41): this server leads (its first call takes the
    // lease) and hands values out from memory in arrival order.
    let leader = http::request("POST", "/v1/sequences/lat-leader/next");
    // Warm-up: connections, handles, first blocks and the leader lease.
    for r in [&livez, &refills, &never, &leader] {
        http::load(addr, r, o.conns, Duration::from_millis(200), None).await?;
    }
    let mut rows = Vec::new();
    for round in 1..=o.rounds {
        for (name, req, block) in [
            ("GET /livez".to_string(), &livez, None),
            (
                format!("POST next, block {}", o.block),
                &refills,
                Some(o.block),
            ),
            (
                "POST next, block 2^40 (never refills)".into(),
                &never,
                Some(huge),
            ),
            ("POST next, leader-ordered".into(), &leader, None),
        ] {
            let l = http::load(addr, req, o.conns, d, Some(o.rate)).await?;
            if l.failed > 0 {
                anyhow::bail!("{name}: {} of {} requests failed", l.failed, l.requests);
            }
            let row = LatencyRow {
                round,
                line: rows::LatencyRow::of(name, o.rate, &l),
                block,
                stalls: stalls(&l.slow, block),
            };
            eprintln!(
                "  {} (round {round}): p50 {:.0} us, p99 {:.0} us, max {:.0} us, {} stalls",
                row.line.name,
                row.line.p50_us,
                row.line.p99_us,
                row.line.max_us,
                row.stalls.len()
            );
            rows.push(row);
        }
    }
    Ok(Report {
        rows,
        block: o.block,
    })
}

/// Groups slow requests (sorted by when due) less than 5 ms apart.
fn stalls(slow: &[(u64, u64, Option<i64>)], block: Option<i64>) -> Vec<Stall> {
    const GAP: u64 = 5_000_000;
    let mut out: Vec<(u64, u64, usize, u64, Option<i64>)> = Vec::new();
    for &(at, lat, v) in slow {
        match out.last_mut() {
            Some(s) if at <= s.1 + GAP => {
                s.1 = at;
                s.2 += 1;
                s.3 = s.3.max(lat);
                s.4 = match (s.4, v) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            _ => out.push((at, at, 1, lat, v)),
        }
    }
    out.into_iter()
        .map(|(first, _, n, max, v)| Stall {
            at_ms: first as f64 / 1e6,
            requests: n,
            max_ms: max as f64 / 1e6,
            // Sequences start at 1 (the default) and one handle takes every block.
            block_position: block.zip(v).map(|(b, v)| (v - 1).rem_euclid(b)),
        })
        .collect()
}

/// The rows as a Markdown table, and the stalls below it.
pub fn markdown(r: &Report) -> String {
    let mut s = String::from(
        "| round | route | rate asked | rate served | p50 | p99 | p99.9 | max | stalls (slow requests) | load |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n",
    );
    for row in &r.rows {
        let stalls: Vec<String> = row
            .stalls
            .iter()
            .filter(|st| st.requests >= 5)
            .map(|st| {
                format!(
                    "{:.0} ms: {} req, max {:.1} ms{}",
                    st.at_ms,
                    st.requests,
                    st.max_ms,
                    st.block_position
                        .zip(row.block)
                        .map_or(String::new(), |(p, b)| format!(", at {p} of {b}"))
                )
            })
            .collect();
        s.push_str(&format!(
            "| {} | {} | {:.0}/s | {:.0}/s | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {} | {} |\n",
            row.round,
            row.line.name,
            row.line.rate,
            row.line.achieved,
            row.line.p50_us,
            row.line.p99_us,
            row.line.p999_us,
            row.line.max_us,
            if stalls.is_empty() {
                "–".into()
            } else {
                stalls.join("; ")
            },
            row.line.load.map_or("–".into(), |l| format!("{l:.2}")),
        ));
    }
    s
}

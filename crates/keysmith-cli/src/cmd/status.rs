//! `status`: what a store holds, or what a keysmith server serves (its
//! `GET /v1/status`), printed by one function.

use serde::Serialize;

use crate::Global;

/// How many sequences and pools get their usage (rate, runway,
/// unaccounted) read: a read each, as the server's status page does.
const USAGE_ROWS: usize = 100;

/// `keysmith status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {}

/// What `status` prints.
#[derive(Debug, Default, Serialize)]
struct Report {
    sequences: Vec<SeqLine>,
    pools: Vec<PoolLine>,
}

/// One sequence.
#[derive(Debug, Serialize)]
struct SeqLine {
    name: String,
    next: i64,
    remaining: i64,
    max: i64,
    /// Values reserved per second by every process (the store's rate
    /// marks); `None` before a second of history.
    rate: Option<f64>,
    /// The runway to `max` at `rate`, in words.
    runway: String,
    unaccounted: i64,
    /// With `--server`: what that server's own handle served.
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<Served>,
}

/// One pool.
#[derive(Debug, Serialize)]
struct PoolLine {
    name: String,
    start: i64,
    size: i64,
    /// The runway until every number is taken, in words.
    runway: String,
    /// With `--server`: what that server's own handle served.
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<Served>,
}

/// What one server's handle served, which a store does not record.
#[derive(Debug, Serialize)]
struct Served {
    served: i64,
    /// Per second over the server's last ten seconds.
    rate: f64,
}

/// Runs `status`.
pub async fn run(_args: StatusArgs, global: &Global) -> anyhow::Result<()> {
    let report = match global.client()? {
        Some(client) => from_server(&client.status().await?)?,
        None => from_store(&*global.open_existing().await?).await?,
    };
    print(&report, global.json)
}

/// The report of a store.
async fn from_store(store: &dyn keysmith::store::Store) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for (i, info) in keysmith::sequence::list(store)
        .await?
        .into_iter()
        .enumerate()
    {
        let shown = if i < USAGE_ROWS {
            keysmith::sequence::show_if_exists(store, &info.row.name).await?
        } else {
            None
        };
        let usage = shown.as_ref().and_then(|s| s.usage);
        // A numbered sequence's next is its period counter's.
        let (next, remaining) = shown
            .as_ref()
            .and_then(|s| s.numbers.map(|n| (n.next, s.remaining)))
            .unwrap_or((info.row.next, info.remaining));
        report.sequences.push(SeqLine {
            next,
            remaining,
            max: info.row.max,
            rate: usage.and_then(|u| u.rate_per_second),
            runway: super::words::runway_words(usage.and_then(|u| u.runway_seconds)),
            unaccounted: usage.map_or(0, |u| u.unaccounted),
            server: None,
            name: info.row.name,
        });
    }
    for (i, row) in keysmith::pool::list(store).await?.into_iter().enumerate() {
        let runway = if i < USAGE_ROWS {
            keysmith::pool::runway(store, &row).await?
        } else {
            None
        };
        report.pools.push(PoolLine {
            start: row.start,
            size: row.size,
            runway: super::words::runway_words(runway),
            server: None,
            name: row.name,
        });
    }
    Ok(report)
}

/// The report of a server's `GET /v1/status` answer.
fn from_server(v: &serde_json::Value) -> anyhow::Result<Report> {
    let bad = |what: &str| {
        anyhow::anyhow!(
            "the server's status has no {what}; is it a keysmith server of this version?"
        )
    };
    // Integers that may pass 2^53 travel as strings.
    let int = |o: &serde_json::Value, k: &str| -> anyhow::Result<i64> {
        match o.get(k) {
            Some(serde_json::Value::String(s)) => s.parse().map_err(|_| bad(k)),
            Some(n) => n.as_i64().ok_or_else(|| bad(k)),
            None => Err(bad(k)),
        }
    };
    let text = |o: &serde_json::Value, k: &str| -> anyhow::Result<String> {
        o.get(k)
            .and_then(|s| s.as_str())
            .map(str::to_owned)
            .ok_or_else(|| bad(k))
    };
    let served = |o: &serde_json::Value| -> anyhow::Result<Option<Served>> {
        Ok(Some(Served {
            served: int(o, "served")?,
            rate: o.get("rate").and_then(|r| r.as_f64()).unwrap_or(0.0),
        }))
    };
    let mut report = Report::default();
    for o in v
        .get("sequences")
        .and_then(|s| s.as_array())
        .ok_or_else(|| bad("sequences"))?
    {
        report.sequences.push(SeqLine {
            name: text(o, "name")?,
            next: int(o, "next")?,
            remaining: int(o, "remaining")?,
            max: int(o, "max")?,
            rate: o.get("store_rate").and_then(|r| r.as_f64()),
            runway: text(o, "runway")?,
            unaccounted: int(o, "unaccounted")?,
            server: served(o)?,
        });
    }
    for o in v
        .get("pools")
        .and_then(|s| s.as_array())
        .ok_or_else(|| bad("pools"))?
    {
        report.pools.push(PoolLine {
            name: text(o, "name")?,
            start: int(o, "start")?,
            size: int(o, "size")?,
            runway: text(o, "runway")?,
            server: served(o)?,
        });
    }
    Ok(report)
}

/// A rate in words: `-` without one.
fn rate_words(r: Option<f64>) -> String {
    r.map_or("-".to_owned(), |r| format!("{r:.1}/s"))
}

fn print(report: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(report)?);
        return Ok(());
    }
    let by_server = |s: &Option<Served>| {
        s.as_ref().map_or(String::new(), |s| {
            format!(
                "; this server: served {}, {}",
                s.served,
                rate_words(Some(s.rate))
            )
        })
    };
    for s in &report.sequences {
        println!(
            "sequence {}: next {}, remaining {}, max {}, rate {}, runway {}, unaccounted {}{}",
            s.name,
            s.next,
            s.remaining,
            s.max,
            rate_words(s.rate),
            s.runway,
            s.unaccounted,
            by_server(&s.server)
        );
    }
    for p in &report.pools {
        println!(
            "pool {}: start {}, size {}, runway {}{}",
            p.name,
            p.start,
            p.size,
            p.runway,
            by_server(&p.server)
        );
    }
    if report.sequences.is_empty() && report.pools.is_empty() {
        println!("no sequences or pools");
    }
    Ok(())
}

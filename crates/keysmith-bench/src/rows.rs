//! The table: what each row guarantees, its figures, and the markdown of
//! the report.

use serde::Serialize;

use crate::http;

/// The 1-minute load average, from `/proc/loadavg` (Linux); `None` elsewhere.
pub fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What a row's values are guaranteed to be.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Guarantees {
    /// A value is on disk (committed) before it is returned: a crash never
    /// hands it out again.
    pub durable: bool,
    /// Unique across processes and hosts (not only in this process).
    pub unique_across_processes: Unique,
    /// How values are ordered.
    pub ordered: Order,
}

/// How unique across processes.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Unique {
    /// Only within one process.
    No,
    /// With overwhelming probability (random bits).
    Probably,
    /// Yes, by a store.
    Yes,
    /// Yes, until a crash (then a value may come again).
    UntilCrash,
}

/// How ordered.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Increasing in time order across all callers.
    Global,
    /// Increasing per handle (or session / process).
    PerHandle,
    /// Sorted by the millisecond of creation; random within one.
    Millisecond,
}

impl Guarantees {
    pub(super) const fn new(durable: bool, unique: Unique, ordered: Order) -> Self {
        Guarantees {
            durable,
            unique_across_processes: unique,
            ordered,
        }
    }
}

/// One line of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// "limit", "in process", "HTTP", "PostgreSQL", "Redis".
    pub group: String,
    pub name: String,
    pub guarantees: Guarantees,
    /// `None` when skipped.
    pub values_per_sec: Option<f64>,
    /// For HTTP rows: requests per second.
    pub requests_per_sec: Option<f64>,
    /// The row measured against, and this row's share of it.
    pub baseline: Option<(String, f64)>,
    /// Why skipped, or what else to know.
    pub note: String,
    /// The machine's 1-minute load average when the row was done (Linux).
    pub load: Option<f64>,
}

/// A latency line measured at a fixed request rate.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    pub name: String,
    pub rate: f64,
    pub achieved: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// The 1-minute load average when the row was done.
    pub load: Option<f64>,
}

impl LatencyRow {
    /// The percentiles of `l`, a load sent at `rate` requests a second.
    pub fn of(name: String, rate: f64, l: &http::Load) -> LatencyRow {
        LatencyRow {
            name,
            rate,
            achieved: l.per_sec(),
            p50_us: us_f(l.pct(0.5)),
            p99_us: us_f(l.pct(0.99)),
            p999_us: us_f(l.pct(0.999)),
            max_us: us_f(l.latencies.last().copied()),
            load: loadavg(),
        }
    }
}

/// What `keysmith-bench compare` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub seconds: f64,
    pub rows: Vec<Row>,
    pub latency: Vec<LatencyRow>,
}

pub(super) const KS_DURABLE: Guarantees = Guarantees::new(true, Unique::Yes, Order::PerHandle);

pub(crate) const KS_STRICT: Guarantees = Guarantees::new(true, Unique::Yes, Order::Global);

pub(super) const LOCAL: Guarantees = Guarantees::new(false, Unique::No, Order::PerHandle);

pub(super) fn row(group: &str, name: impl Into<String>, g: Guarantees) -> Row {
    Row {
        group: group.into(),
        name: name.into(),
        guarantees: g,
        values_per_sec: None,
        requests_per_sec: None,
        baseline: None,
        note: String::new(),
        load: None,
    }
}

pub(crate) fn skipped(group: &str, name: impl Into<String>, g: Guarantees, why: &str) -> Row {
    Row {
        note: format!("skipped: {why}"),
        ..row(group, name, g)
    }
}

pub(crate) fn measured(group: &str, name: impl Into<String>, g: Guarantees, per_sec: f64) -> Row {
    Row {
        values_per_sec: Some(per_sec),
        ..row(group, name, g)
    }
}

pub(crate) fn with_baseline(mut r: Row, base: &Row) -> Row {
    if let (Some(v), Some(b)) = (r.values_per_sec, base.values_per_sec) {
        r.baseline = Some((base.name.clone(), v / b));
    }
    r
}

/// `1.23 M/s`, or the skip note.
pub fn fmt_rate(r: &Row) -> String {
    match r.values_per_sec {
        Some(v) => format!("{}/s", human(v)),
        None => r.note.clone(),
    }
}

/// 3 significant digits with k/M/G.
pub fn human(v: f64) -> String {
    let (d, unit) = if v >= 1e9 {
        (v / 1e9, " G")
    } else if v >= 1e6 {
        (v / 1e6, " M")
    } else if v >= 1e3 {
        (v / 1e3, " k")
    } else {
        (v, " ")
    };
    let s = if d >= 100.0 {
        format!("{d:.0}")
    } else if d >= 10.0 {
        format!("{d:.1}")
    } else {
        format!("{d:.2}")
    };
    format!("{s}{unit}").trim_end().to_owned()
}

pub(super) fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

impl Unique {
    pub(super) fn label(self) -> &'static str {
        match self {
            Unique::No => "no (one process)",
            Unique::Probably => "probably (random bits)",
            Unique::Yes => "yes",
            Unique::UntilCrash => "until a crash",
        }
    }
}

impl Order {
    pub(super) fn label(self) -> &'static str {
        match self {
            Order::Global => "increasing, time order",
            Order::PerHandle => "increasing per handle",
            Order::Millisecond => "by millisecond",
        }
    }
}

/// The report as Markdown tables.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{} s per row, one after the other in one process; load: the machine's 1-minute load average when the row was done.\n\n",
        r.seconds
    ));
    s.push_str("| group | what | values/s | share of baseline | durable before returned | unique across processes | ordered | load | note |\n");
    s.push_str("| --- | --- | ---: | ---: | --- | --- | --- | ---: | --- |\n");
    for row in &r.rows {
        let v = row.values_per_sec.map(human).unwrap_or_else(|| "–".into());
        let share = row
            .baseline
            .as_ref()
            .map(|(b, x)| format!("{x:.2} of {b}"))
            .unwrap_or_default();
        let load = row.load.map(|l| format!("{l:.2}")).unwrap_or_default();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.group,
            row.name,
            v,
            share,
            yes_no(row.guarantees.durable),
            row.guarantees.unique_across_processes.label(),
            row.guarantees.ordered.label(),
            load,
            row.note
        ));
    }
    if !r.latency.is_empty() {
        s.push_str("\nLatency at a fixed request rate (open loop over the same connections; a request held up by the answer before it counts from when it was due):\n\n");
        s.push_str("| route | rate asked | rate served | p50 | p99 | p99.9 | max | load |\n");
        s.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for l in &r.latency {
            s.push_str(&format!(
                "| {} | {:.0}/s | {:.0}/s | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {} |\n",
                l.name,
                l.rate,
                l.achieved,
                l.p50_us,
                l.p99_us,
                l.p999_us,
                l.max_us,
                l.load.map(|x| format!("{x:.2}")).unwrap_or_default()
            ));
        }
    }
    s
}

pub(super) fn us(ns: Option<u64>) -> String {
    format!("{:.0}", us_f(ns))
}

pub(super) fn us_f(ns: Option<u64>) -> f64 {
    ns.unwrap_or(0) as f64 / 1000.0
}

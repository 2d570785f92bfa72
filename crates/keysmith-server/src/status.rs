//! `GET /`: a status page for a person, and `GET /v1/status`, the JSON it
//! refreshes itself from every few seconds.
//!
//! The page is rendered on the server (it reads fine without script); a
//! small script re-renders the tables from `/v1/status`. Names are escaped
//! on the server and set as text by the script, so a name like `<b>&"` shows
//! as written. Integers that may pass 2^53 travel as strings, so the page
//! never shows a rounded value.

use std::fmt::Write;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::AppState;
use crate::error::ApiResult;
use crate::html::escape;
use crate::routes::pools::PoolHandleView;
use crate::routes::sequences::HandleView;

/// How often the page refreshes, in milliseconds.
pub(crate) const REFRESH_MS: u32 = 2000;

/// How many sequences the page shows usage (runway, unaccounted) for.
const USAGE_ROWS: usize = 100;

/// A runway in words, in the largest unit that fits ("3.2 years", "4.0
/// days", "2.5 hours", "40 seconds"); "–" without one (no rate measured
/// yet, or nothing handed out).
fn runway_words(seconds: Option<f64>) -> String {
    const DAY: f64 = 86_400.0;
    const YEAR: f64 = 365.0 * DAY;
    match seconds {
        None => "–".to_owned(),
        Some(s) if s >= YEAR => format!("{:.1} years", s / YEAR),
        Some(s) if s >= DAY => format!("{:.1} days", s / DAY),
        Some(s) if s >= 3600.0 => format!("{:.1} hours", s / 3600.0),
        Some(s) => format!("{s:.0} seconds"),
    }
}

/// Everything the status page shows.
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    uptime_seconds: u64,
    refresh_ms: u32,
    sequences: Vec<SeqStatus>,
    pools: Vec<PoolStatus>,
    /// The id generator, once `POST /v1/ids/next` leased a worker id.
    #[serde(skip_serializing_if = "Option::is_none")]
    ids: Option<keysmith::ids::IdStatus>,
    /// The runway of the server's ids: its layout's time bits and its
    /// worker group (absent when the group's name is not visible).
    #[serde(skip_serializing_if = "Option::is_none")]
    ids_runway: Option<crate::runway::IdsRunway>,
    /// The charts of the last hour, drawn on the server (the page only).
    #[serde(skip)]
    charts: Vec<Charts>,
}

/// One sequence's charts on the page: its rate and its runway over the last
/// hour ([`crate::history`]), with the latest values in words.
#[derive(Debug)]
struct Charts {
    name: String,
    rate_svg: Option<String>,
    rate_words: String,
    runway_svg: Option<String>,
    runway_words: String,
}

#[derive(Debug, Serialize)]
struct PoolStatus {
    name: String,
    start: String,
    size: i64,
    served: String,
    /// Numbers per second over the last ten seconds.
    rate: f64,
    /// Time until every number is taken, from the pool's rate marks.
    runway: String,
    /// The same in seconds; absent without a rate (`keysmith top`).
    #[serde(skip_serializing_if = "Option::is_none")]
    runway_seconds: Option<f64>,
    /// Share of this server's swap attempts that lost to another taker.
    conflict_rate: f64,
    conflicts: u64,
}

#[derive(Debug, Serialize)]
struct SeqStatus {
    name: String,
    /// The next value no handle has reserved yet.
    next: String,
    remaining: String,
    max: String,
    /// Present when less than the warning share (10 %) of the range is left.
    #[serde(skip_serializing_if = "Option::is_none")]
    range_warning: Option<String>,
    /// The server handle's current block size, else the sequence's default.
    block: i64,
    /// Whether `block` is the server handle's ("server") or the default.
    block_of: &'static str,
    served: String,
    last_served: Option<String>,
    /// Values per second over the last ten seconds.
    rate: f64,
    /// Values reserved per second by every process, from the store's rate
    /// marks (what `keysmith show` says); absent before a second of history
    /// or beyond the first hundred sequences.
    #[serde(skip_serializing_if = "Option::is_none")]
    store_rate: Option<f64>,
    refills: u64,
    conflicts: u64,
    /// Time to the maximum at the recent rate, in words ("–" without one).
    runway: String,
    /// The same in seconds; absent without a rate (`keysmith top`).
    #[serde(skip_serializing_if = "Option::is_none")]
    runway_seconds: Option<f64>,
    /// A leader-ordered sequence's leader lease (who holds it, its term);
    /// absent for any other sequence.
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<keysmith::top::LeaderLease>,
    /// Reserved values no clean close accounted for.
    unaccounted: i64,
    /// Values skipped at generation changes of the store (failovers,
    /// restores), all servers.
    skipped_at_failover: i64,
    /// Ranges this server refused because the store returned values it had
    /// already reserved: the store went back without a new generation.
    went_back: u64,
}

pub(crate) async fn collect(state: &AppState) -> ApiResult<Status> {
    let s = state.shared();
    let mut rows = Vec::new();
    for (i, info) in keysmith::sequence::list(&*s.store)
        .await?
        .into_iter()
        .filter(|i| crate::access::visible(&i.row.name))
        .enumerate()
    {
        // Usage and lease cost a few reads per sequence: the first
        // hundred get them.
        let (shown, lease) = if i < USAGE_ROWS {
            let shown = keysmith::sequence::show(&*s.store, &info.row.name)
                .await
                .ok();
            let lease = keysmith::top::leader_lease(&*s.store, &info.row.name)
                .await
                .ok()
                .flatten();
            (shown, lease)
        } else {
            (None, None)
        };
        let usage = shown.as_ref().and_then(|i| i.usage);
        // A numbered sequence's next is its period counter's.
        let mut info = info;
        if let Some((n, remaining)) = shown
            .as_ref()
            .and_then(|i| i.numbers.map(|n| (n, i.remaining)))
        {
            info.row.next = n.next;
            info.remaining = remaining;
        }
        rows.push((info, usage, lease));
    }
    // Read once, without making a mark for names that have none.
    let refused: std::collections::HashMap<String, u64> =
        s.high_waters.refused().into_iter().collect();
    let sequences: Vec<SeqStatus> = rows
        .into_iter()
        .map(|(info, usage, lease)| {
            let h = s
                .sequences
                .get(&info.row.name)
                .and_then(|e| HandleView::of(&e));
            SeqStatus {
                next: info.row.next.to_string(),
                remaining: info.remaining.to_string(),
                max: info.row.max.to_string(),
                range_warning: info
                    .range_warning(keysmith::sequence::DEFAULT_RANGE_WARNING_SHARE)
                    .map(|w| w.to_string()),
                block: h.as_ref().map_or(info.row.block, |h| h.block),
                block_of: if h.is_some() { "server" } else { "default" },
                served: h.as_ref().map_or(0, |h| h.served).to_string(),
                last_served: h
                    .as_ref()
                    .and_then(|h| h.last_served)
                    .map(|v| v.to_string()),
                rate: h.as_ref().map_or(0.0, |h| h.rate),
                store_rate: usage.and_then(|u| u.rate_per_second),
                refills: h.as_ref().map_or(0, |h| h.refills),
                conflicts: h.as_ref().map_or(0, |h| h.conflicts),
                runway: runway_words(usage.and_then(|u| u.runway_seconds)),
                runway_seconds: usage.and_then(|u| u.runway_seconds),
                lease,
                unaccounted: usage.map_or(0, |u| u.unaccounted),
                skipped_at_failover: info.row.failover_skipped,
                went_back: refused.get(&info.row.name).copied().unwrap_or(0),
                name: info.row.name,
            }
        })
        .collect();
    let mut rows = Vec::new();
    for (i, row) in keysmith::pool::list(&*s.store)
        .await?
        .into_iter()
        .filter(|r| crate::access::visible(&r.name))
        .enumerate()
    {
        // The marks cost a read per pool: the first hundred get them.
        let runway = if i < USAGE_ROWS {
            keysmith::pool::runway(&*s.store, &row).await.ok().flatten()
        } else {
            None
        };
        rows.push((row, runway));
    }
    let pools = rows
        .into_iter()
        .map(|(row, runway)| {
            let h = s.pools.get(&row.name).map(|e| PoolHandleView::of(&e));
            PoolStatus {
                runway: runway_words(runway),
                runway_seconds: runway,
                start: row.start.to_string(),
                size: row.size,
                served: h.as_ref().map_or(0, |h| h.served).to_string(),
                rate: h.as_ref().map_or(0.0, |h| h.rate),
                conflict_rate: h.as_ref().map_or(0.0, |h| h.conflict_rate),
                conflicts: h.as_ref().map_or(0, |h| h.conflicts),
                name: row.name,
            }
        })
        .collect();
    let now = s.started.elapsed().as_secs_f64();
    let charts = sequences
        .iter()
        // The names this server serves (a handle open now).
        .filter(|q: &&SeqStatus| s.sequences.get(&q.name).is_some())
        .map(|q| {
            let h = s.history.series(&q.name);
            let last = |p: &[(f64, f64)]| p.last().map(|p| p.1);
            let peak = |p: &[(f64, f64)]| {
                p.iter()
                    .map(|p| p.1)
                    .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            };
            let low = |p: &[(f64, f64)]| {
                p.iter()
                    .map(|p| p.1)
                    .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))))
            };
            let rate_words = match (last(&h.rate), peak(&h.rate)) {
                (Some(l), Some(p)) => format!("{} now, peak {}", rate(l), rate(p)),
                _ => "collecting".to_owned(),
            };
            let runway_words = match (last(&h.runway), low(&h.runway)) {
                (Some(l), Some(m)) => format!(
                    "{} now, lowest {}",
                    runway_words(Some(l)),
                    runway_words(Some(m))
                ),
                _ => "–".to_owned(),
            };
            Charts {
                rate_svg: crate::history::sparkline(
                    &h.rate,
                    now,
                    &format!(
                        "{}: values per second over the last hour, {rate_words}",
                        q.name
                    ),
                ),
                runway_svg: crate::history::sparkline(
                    &h.runway,
                    now,
                    &format!("{}: runway over the last hour, {runway_words}", q.name),
                ),
                rate_words,
                runway_words,
                name: q.name.clone(),
            }
        })
        .collect();
    Ok(Status {
        charts,
        uptime_seconds: s.started.elapsed().as_secs(),
        refresh_ms: REFRESH_MS,
        sequences,
        pools,
        // The ids generator's worker group is a name like any other.
        ids: s
            .ids
            .get()
            .filter(|_| crate::access::visible(&s.ids_config.group))
            .map(|g| g.status()),
        ids_runway: crate::runway::ids_runway(s).await,
    })
}

/// `GET /v1/status`.
#[utoipa::path(get, path = "/v1/status", summary = "What the status page shows", description = "",
    responses((status = 200, description = "Status; integers that may pass 2^53 are strings.", content_type = "application/json")))]
pub(crate) async fn json(State(state): State<AppState>) -> ApiResult<Json<Status>> {
    Ok(Json(collect(&state).await?))
}

/// `GET /`.
#[utoipa::path(get, path = "/", summary = "Status page (HTML)", description = "",
    responses((status = 200, description = "HTML.", content_type = "text/html")))]
pub(crate) async fn page(State(state): State<AppState>) -> ApiResult<Response> {
    let status = collect(&state).await?;
    let mut res = render(&status).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

/// Digits in groups of three, separated by thin spaces, for large counts.
pub(crate) fn grouped(digits: &str) -> String {
    let (sign, d) = match digits.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", digits),
    };
    let mut out = String::from(sign);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    out
}

fn rate(r: f64) -> String {
    format!("{r:.1}/s")
}

fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

fn uptime(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d {h}h {m}m")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else {
        format!("{m}m {s}s")
    }
}

/// One line on the runway of the time-ordered ids: the layout's time bits
/// and the worker ids free, each with its warning.
fn ids_runway_line(r: Option<&crate::runway::IdsRunway>) -> String {
    let Some(r) = r else {
        return String::new();
    };
    let mut warnings = Vec::new();
    if r.runway.warning {
        warnings.push(format!(
            "the time bits run out in under {}",
            runway_words(Some(keysmith::ids::RUNWAY_WARNING_SECONDS))
        ));
    }
    let workers = match &r.workers {
        Some(w) => {
            if w.warning {
                warnings.push(format!(
                    "{} of {} worker ids free (a warning at {}% or less)",
                    w.free,
                    w.size,
                    keysmith::ids::WORKERS_FREE_WARNING_SHARE * 100.0
                ));
            }
            format!("{} of {} worker ids free", w.free, w.size)
        }
        None => "worker ids free: – (the store did not answer)".to_owned(),
    };
    let warning = if warnings.is_empty() {
        String::new()
    } else {
        format!(
            " <strong class=\"alert\">Warning: {}.</strong>",
            escape(&warnings.join("; "))
        )
    };
    format!(
        "<p id=\"ids-runway\">Ids of group <code>{}</code> (layout {}): time bits run out in {} ({}); {}.{}</p>",
        escape(&r.group),
        escape(&r.layout),
        runway_words(Some(r.runway.seconds_left)),
        escape(&r.runway.ends),
        workers,
        warning
    )
}

/// One line on the time-ordered ids: worker id, lease, clock skew.
fn ids_line(ids: Option<&keysmith::ids::IdStatus>) -> String {
    match ids {
        None => "<p class=\"muted\" id=\"ids\">Time-ordered ids: none issued yet \
                 (<code>POST /v1/ids/next</code> leases a worker id).</p>"
            .to_owned(),
        Some(st) => format!(
            "<p id=\"ids\">Time-ordered ids of group <code>{}</code>: worker id {}, lease {} \
             (fence {}), {} issued, clock skew {} ms (max {} ms, went back {} times), \
             leases lost {}.</p>",
            escape(&st.group),
            st.worker.map_or("–".to_owned(), |w| w.to_string()),
            st.lease,
            st.fence,
            st.issued,
            st.clock_behind_ms,
            st.max_clock_behind_ms,
            st.clock_back_events,
            st.leases_lost
        ),
    }
}

fn render(st: &Status) -> String {
    let mut rows = String::new();
    for s in &st.sequences {
        let _ = write!(
            rows,
            "<tr><td class=\"name\">{}</td><td class=\"num next\">{}</td>\
             <td class=\"num block\">{}{}</td><td class=\"num rate\">{}</td>\
             <td class=\"num remaining{}\"{}>{}{}</td><td class=\"num runway\">{}</td><td class=\"num served\">{}</td>\
             <td class=\"num last\">{}</td><td class=\"num refills\">{}</td>\
             <td class=\"num failover{}\">{} / {}</td></tr>",
            escape(&s.name),
            s.next,
            s.block,
            if s.block_of == "default" {
                " <span class=\"muted\">(default)</span>"
            } else {
                ""
            },
            rate(s.rate),
            if s.range_warning.is_some() {
                " alert"
            } else {
                ""
            },
            s.range_warning
                .as_deref()
                .map_or(String::new(), |w| format!(" title=\"{}\"", escape(w))),
            grouped(&s.remaining),
            if s.range_warning.is_some() {
                " <span class=\"warning\">(range nearly used up)</span>"
            } else {
                ""
            },
            escape(&s.runway),
            s.served,
            s.last_served.as_deref().unwrap_or("–"),
            s.refills,
            if s.went_back > 0 { " alert" } else { "" },
            s.skipped_at_failover,
            s.went_back,
        );
    }
    let mut pool_rows = String::new();
    for p in &st.pools {
        let _ = write!(
            pool_rows,
            "<tr><td class=\"name\">{}</td><td class=\"num size\">{}</td>\
             <td class=\"num start\">{}</td><td class=\"num rate\">{}</td><td class=\"num runway\">{}</td>\
             <td class=\"num served\">{}</td><td class=\"num conflicts\">{}</td></tr>",
            escape(&p.name),
            p.size,
            p.start,
            rate(p.rate),
            escape(&p.runway),
            p.served,
            percent(p.conflict_rate),
        );
    }
    let mut chart_rows = String::new();
    for c in &st.charts {
        let pending = format!(
            "<span class=\"muted\">collecting: a point every {} s</span>",
            crate::history::SAMPLE_EVERY.as_secs()
        );
        let _ = write!(
            chart_rows,
            "<tr><td class=\"name\">{}</td><td class=\"rate-chart\">{}<div class=\"muted\">{}</div></td>\
             <td class=\"runway-chart\">{}<div class=\"muted\">{}</div></td></tr>",
            escape(&c.name),
            c.rate_svg.as_deref().unwrap_or(&pending),
            escape(&c.rate_words),
            c.runway_svg.as_deref().unwrap_or(&pending),
            escape(&c.runway_words),
        );
    }
    let hidden = |empty: bool| if empty { "" } else { " hidden" };
    let page = PAGE
        .replace("{{uptime}}", &uptime(st.uptime_seconds))
        .replace("{{refresh_ms}}", &st.refresh_ms.to_string())
        .replace("{{seq_empty}}", hidden(st.sequences.is_empty()))
        .replace("{{pool_empty}}", hidden(st.pools.is_empty()))
        .replace("{{charts_empty}}", hidden(st.charts.is_empty()));
    // Rows last, each placeholder once: names are never scanned for placeholders.
    let (head, tail) = page.split_once("{{seq_rows}}").expect("placeholder");
    let head = head.replace(
        "{{ids}}",
        &(ids_line(st.ids.as_ref()) + &ids_runway_line(st.ids_runway.as_ref())),
    );
    let head = head.as_str();
    let (mid, tail) = tail.split_once("{{chart_rows}}").expect("placeholder");
    let (mid2, tail) = tail.split_once("{{pool_rows}}").expect("placeholder");
    [head, &rows, mid, &chart_rows, mid2, &pool_rows, tail].concat()
}

const PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>keysmith</title>
<style>
  body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #1d232b; background: #fbfbfc; }
  h1 { font-size: 1.5rem; margin: 0; }
  h2 { font-size: 1.1rem; margin: 2rem 0 .5rem; }
  header { display: flex; align-items: baseline; gap: 1rem; flex-wrap: wrap; border-bottom: 1px solid #d8dde3; padding-bottom: .6rem; }
  .muted { color: #68717d; font-weight: normal; }
  #updated.stale { color: #b3261e; }
  table { border-collapse: collapse; width: 100%; background: #fff; box-shadow: 0 0 0 1px #e2e6ea; }
  th, td { padding: .45rem .7rem; text-align: left; border-bottom: 1px solid #eef0f2; }
  th { font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; color: #4b5460; background: #f3f5f7; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
  td.alert, .alert { color: #b00020; font-weight: bold; }
  td.name { font-family: ui-monospace, "DejaVu Sans Mono", monospace; word-break: break-all; }
  p.empty { color: #68717d; }
  code { background: #eef0f2; padding: .1rem .3rem; border-radius: 3px; }
  svg.chart { display: block; }
</style>
</head>
<body>
<header>
  <h1>keysmith</h1>
  <span class="muted">up <span id="uptime">{{uptime}}</span></span>
  <span class="muted" id="updated">refreshes every {{refresh_ms}} ms</span>
</header>
{{ids}}

<h2>Sequences</h2>
<table id="sequences">
  <thead><tr>
    <th>Name</th><th class="num" title="The next value no handle has reserved yet">Next in store</th>
    <th class="num">Block size</th><th class="num" title="Values handed out per second, last 10 s">Rate</th>
    <th class="num" title="Values left before the maximum">Remaining</th><th class="num" title="Time to the maximum at the rate of the last minutes, all servers">Runway</th><th class="num" title="Values this server handed out">Served</th>
    <th class="num" title="The greatest value this server handed out">Last served</th><th class="num" title="Blocks this server reserved in the store">Refills</th>
    <th class="num" title="Values skipped at failovers and restores (all servers) / ranges this server refused because the store went back">Failover</th>
  </tr></thead>
  <tbody>{{seq_rows}}</tbody>
</table>
<p class="empty" id="sequences-empty"{{seq_empty}}>No sequences yet. Create one with <code>curl -d '{"name":"orders"}' http://HOST/v1/sequences</code>.</p>

<h2>Last hour <span class="muted">(drawn by the server when the page loads, since the server started if that is less than an hour; reload for new points)</span></h2>
<table id="charts">
  <thead><tr>
    <th>Name</th><th title="Values this server handed out per second, a point every 10 s">Rate</th>
    <th title="Time to the maximum at the rate of the last minutes, all servers, a point every 10 s">Runway</th>
  </tr></thead>
  <tbody>{{chart_rows}}</tbody>
</table>
<p class="empty" id="charts-empty"{{charts_empty}}>No charts yet: a sequence gets them once this server serves it.</p>

<h2>Pools</h2>
<table id="pools">
  <thead><tr>
    <th>Name</th><th class="num" title="Members the pool holds">Size</th><th class="num">Start</th>
    <th class="num" title="Numbers handed out per second, last 10 s">Rate</th><th class="num" title="Time until every number is taken, at the rate between the pool's last two marks (moved by pool show)">Runway</th><th class="num" title="Numbers this server handed out">Served</th>
    <th class="num" title="Share of this server's attempts that lost to another taker">Conflict rate</th>
  </tr></thead>
  <tbody>{{pool_rows}}</tbody>
</table>
<p class="empty" id="pools-empty"{{pool_empty}}>No pools yet. Create one with <code>curl -d '{"name":"tickets","size":100}' http://HOST/v1/pools</code>.</p>

<script>
"use strict";
const REFRESH_MS = {{refresh_ms}};
function cell(tr, cls, text) {
  const td = document.createElement("td");
  td.className = cls;
  td.textContent = text;
  tr.appendChild(td);
  return td;
}
function grouped(digits) {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, "\u2009");
}
function uptime(secs) {
  const d = Math.floor(secs / 86400), h = Math.floor(secs / 3600) % 24, m = Math.floor(secs / 60) % 60, s = secs % 60;
  return d > 0 ? `${d}d ${h}h ${m}m` : h > 0 ? `${h}h ${m}m` : `${m}m ${s}s`;
}
function render(st) {
  const body = document.querySelector("#sequences tbody");
  const rows = st.sequences.map((s) => {
    const tr = document.createElement("tr");
    cell(tr, "name", s.name);
    cell(tr, "num next", s.next);
    const b = cell(tr, "num block", String(s.block));
    if (s.block_of === "default") {
      const span = document.createElement("span");
      span.className = "muted";
      span.textContent = " (default)";
      b.appendChild(span);
    }
    cell(tr, "num rate", s.rate.toFixed(1) + "/s");
    cell(tr, "num remaining", grouped(s.remaining));
    cell(tr, "num runway", s.runway);
    cell(tr, "num served", s.served);
    cell(tr, "num last", s.last_served ?? "–");
    cell(tr, "num refills", String(s.refills));
    cell(tr, "num failover" + (s.went_back > 0 ? " alert" : ""), `${s.skipped_at_failover} / ${s.went_back}`);
    return tr;
  });
  body.replaceChildren(...rows);
  document.getElementById("sequences-empty").hidden = st.sequences.length > 0;
  const pools = st.pools.map((p) => {
    const tr = document.createElement("tr");
    cell(tr, "name", p.name);
    cell(tr, "num size", String(p.size));
    cell(tr, "num start", p.start);
    cell(tr, "num rate", p.rate.toFixed(1) + "/s");
    cell(tr, "num runway", p.runway);
    cell(tr, "num served", p.served);
    cell(tr, "num conflicts", (p.conflict_rate * 100).toFixed(1) + "%");
    return tr;
  });
  document.querySelector("#pools tbody").replaceChildren(...pools);
  document.getElementById("pools-empty").hidden = st.pools.length > 0;
  document.getElementById("uptime").textContent = uptime(st.uptime_seconds);
}
async function refresh() {
  const updated = document.getElementById("updated");
  try {
    const res = await fetch("/v1/status", { cache: "no-store", credentials: "same-origin" });
    if (!res.ok) throw new Error("HTTP " + res.status);
    render(await res.json());
    updated.textContent = "updated " + new Date().toLocaleTimeString();
    updated.className = "muted";
    document.body.dataset.refreshed = "yes";
  } catch (e) {
    updated.textContent = "refresh failed (" + e.message + "); retrying";
    updated.className = "muted stale";
  }
}
refresh();
setInterval(refresh, REFRESH_MS);
</script>
</body>
</html>
"##;

#[cfg(test)]
mod tests {
    /// The runway is said in the largest unit that fits.
    #[test]
    fn the_runway_is_said_in_the_largest_unit_that_fits() {
        use super::runway_words;
        assert_eq!(runway_words(None), "–");
        assert_eq!(runway_words(Some(40.4)), "40 seconds");
        assert_eq!(runway_words(Some(9000.0)), "2.5 hours");
        assert_eq!(runway_words(Some(4.0 * 86_400.0)), "4.0 days");
        assert_eq!(runway_words(Some(3.2 * 365.0 * 86_400.0)), "3.2 years");
    }

    use super::*;

    #[test]
    fn groups_digits() {
        assert_eq!(grouped("1"), "1");
        assert_eq!(grouped("1234"), "1\u{2009}234");
        assert_eq!(grouped("123456"), "123\u{2009}456");
        assert_eq!(grouped("-1234567"), "-1\u{2009}234\u{2009}567");
    }

    #[test]
    fn uptime_reads_well() {
        assert_eq!(uptime(5), "0m 5s");
        assert_eq!(uptime(3725), "1h 2m");
        assert_eq!(uptime(90061), "1d 1h 1m");
    }
}

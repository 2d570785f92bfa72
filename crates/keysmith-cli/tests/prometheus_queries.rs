//! The alert rules (`packaging/prometheus/keysmith-rules.yml`) and the
//! Grafana dashboard (`packaging/grafana/keysmith.json`) against a real
//! Prometheus scraping real `keysmith serve` processes under load: one over
//! plain HTTP with an audit log, taking sequence (one leader-ordered), pool
//! and id requests (and some that fail), one over HTTPS (for the
//! certificate's expiry gauge).
//! Prometheus loads the rules file itself (it refuses to start on a rule that
//! does not parse) and evaluates every rule; then every rule's expression and
//! every dashboard query (Grafana's variables filled in) is evaluated through
//! Prometheus's HTTP API: each must parse, and each metric it names must be
//! one Prometheus scraped from the servers, so a query naming a metric that
//! does not exist fails the test. The dashboard's queries must also return
//! series.
//!
//! Skips with a message when prometheus is not installed, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1` (Debian: `apt-get install prometheus`).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::Db;
use common::server::ServerProc;
use keysmith_testsupport::prometheus::TempPrometheus;
use keysmith_testsupport::tls::{Certs, SERVER_NAMES};
use serde_json::Value;

/// How long Prometheus may take to have scraped and evaluated everything:
/// a bound on a hang, not a performance threshold.
const SCRAPED_DEADLINE: Duration = Duration::from_secs(180);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The names of metrics (`keysmith_...`) a PromQL expression names. Every
/// keysmith metric starts with `keysmith_`; no label or function does.
fn metrics_named(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expr.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    let mut i = 0;
    while i < bytes.len() {
        if ident(bytes[i]) && (i == 0 || !ident(bytes[i - 1])) {
            let start = i;
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            if word.starts_with("keysmith_") {
                out.insert(word.to_owned());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// What is wrong with `expr` evaluated by `prom` (`None`: it parses and
/// names only metrics in `scraped`). `must_return`: it must return series.
async fn check(
    prom: &TempPrometheus,
    scraped: &BTreeSet<String>,
    expr: &str,
    must_return: bool,
) -> Option<String> {
    let data = match prom.query(expr).await {
        Ok(d) => d,
        Err(e) => return Some(format!("Prometheus refused it: {e}")),
    };
    let missing: Vec<_> = metrics_named(expr)
        .into_iter()
        .filter(|m| {
            // A histogram's series are `_bucket`, `_sum`, `_count`.
            !scraped.contains(m)
        })
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "names metrics the servers do not export: {missing:?}"
        ));
    }
    if metrics_named(expr).is_empty() {
        return Some("names no keysmith metric".to_owned());
    }
    let n = data["result"].as_array().map_or(0, Vec::len);
    if must_return && n == 0 {
        return Some("returned no series".to_owned());
    }
    None
}

/// Grafana's variables as the dashboard's users see them with "All".
fn fill_in(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$instance", ".*")
        .replace("$name", ".*")
}

/// The dashboard's queries: each panel's targets, and each query
/// variable's (`label_values(SELECTOR, label)` evaluated as `SELECTOR`).
fn dashboard_queries() -> Vec<(String, String)> {
    let path = repo().join("packaging/grafana/keysmith.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut out = Vec::new();
    for v in dash["templating"]["list"].as_array().unwrap() {
        if v["type"] == "query" {
            let q = v["query"]["query"].as_str().unwrap();
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|r| r.rsplit_once(','))
                .map(|(sel, _)| sel)
                .unwrap_or_else(|| panic!("variable {} is not label_values(...): {q}", v["name"]));
            out.push((format!("variable {}", v["name"]), fill_in(inner)));
        }
    }
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push((
                format!("panel {:?} {}", p["title"].as_str().unwrap(), t["refId"]),
                fill_in(t["expr"].as_str().unwrap()),
            ));
        }
    }
    assert!(out.len() > 20, "the dashboard has {} queries", out.len());
    out
}

/// Load until `stop`: sequence, pool and id requests, and requests that
/// fail (an unknown sequence: 404).
async fn load(base: String, stop: Arc<AtomicBool>) -> u64 {
    let client = reqwest::Client::new();
    let mut answered = 0;
    while !stop.load(Ordering::Relaxed) {
        for path in [
            "/v1/sequences/orders/next?count=50",
            "/v1/sequences/users/next",
            "/v1/sequences/ledger/next",
            "/v1/pools/tickets/next",
            "/v1/ids/next",
            "/v1/sequences/no-such-name/next",
        ] {
            let r = client.post(format!("{base}{path}")).send().await.unwrap();
            let st = r.status();
            assert!(
                st.is_success() || path.contains("no-such-name") && st == 404,
                "{path}: {st} {}",
                r.text().await.unwrap_or_default()
            );
            answered += 1;
        }
    }
    answered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_alert_rule_and_dashboard_query_runs_on_prometheus_against_a_live_server() {
    let started = Instant::now();
    if let Err(why) = keysmith_testsupport::prometheus::prometheus_binary() {
        keysmith_testsupport::skip_or_fail("prometheus", &why);
        return;
    }
    let db = Db::new();
    db.ok(&["create", "orders"]);
    db.ok(&["create", "users"]);
    // Led by the server: the leader's gauge and term counters.
    db.ok(&["create", "ledger", "--order", "leader"]);
    db.ok(&[
        "pool", "create", "tickets", "--size", "1000", "--start", "1",
    ]);
    let audit = tempfile::tempdir().unwrap();
    let audit_log = audit.path().join("audit.log");
    let plain = ServerProc::start(&db, &["--audit-log", audit_log.to_str().unwrap()], &[]).await;

    let certs = Certs::generate(&SERVER_NAMES, "client");
    let tls_db = Db::new();
    let tls = ServerProc::start(
        &tls_db,
        &[
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
        ],
        &[],
    )
    .await;

    let rules = repo().join("packaging/prometheus/keysmith-rules.yml");
    let alerts_in_file = std::fs::read_to_string(&rules)
        .unwrap()
        .lines()
        .filter(|l| l.trim_start().starts_with("- alert:"))
        .count();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         rule_files:\n  - {rules}\n\
         scrape_configs:\n\
         \x20 - job_name: keysmith\n    static_configs:\n      - targets: ['{plain}']\n\
         \x20 - job_name: keysmith-tls\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n\
         \x20   static_configs:\n      - targets: ['{tls}']\n",
        rules = rules.canonicalize().unwrap().display(),
        plain = plain.addr(),
        ca = certs.ca.display(),
        tls = tls.addr(),
    );
    let Some(prom) = TempPrometheus::start(&config).await else {
        return;
    };

    let stop = Arc::new(AtomicBool::new(false));
    let loader = tokio::spawn(load(plain.base().to_owned(), stop.clone()));

    // Until Prometheus has scraped both servers (up), seen values move (a
    // rate needs two scrapes), has the runways (a pool's needs two rate
    // marks a minute apart, moved by GET /v1/pools/NAME) and evaluated every
    // rule of the file.
    let until = Instant::now() + SCRAPED_DEADLINE;
    let client = reqwest::Client::new();
    let rule_list = loop {
        let shown = client
            .get(plain.url("/v1/pools/tickets"))
            .send()
            .await
            .unwrap();
        assert!(shown.status().is_success(), "{}", shown.status());
        let up = prom.query("sum(up)").await.unwrap();
        let up = up["result"][0]["value"][1]
            .as_str()
            .unwrap_or("0")
            .to_owned();
        let moving = prom
            .query("rate(keysmith_values_total{name=\"orders\"}[1m]) > 0")
            .await
            .unwrap();
        let moving = !moving["result"].as_array().unwrap().is_empty();
        let runway = prom
            .query("keysmith_sequence_runway_seconds and on () keysmith_pool_runway_seconds")
            .await
            .unwrap();
        let runway = !runway["result"].as_array().unwrap().is_empty();
        let groups = prom.api("rules", &[("type", "alert")]).await.unwrap();
        let rules: Vec<Value> = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap().clone())
            .collect();
        let evaluated = rules.len() == alerts_in_file
            && rules.iter().all(|r| {
                r["lastEvaluation"]
                    .as_str()
                    .is_some_and(|t| !t.starts_with("0001"))
            });
        if up == "2" && moving && runway && evaluated {
            break rules;
        }
        assert!(
            Instant::now() < until,
            "Prometheus had not scraped and evaluated everything within {SCRAPED_DEADLINE:?} \
             (up {up}, values moving {moving}, runway {runway}, {} of {alerts_in_file} rules evaluated):\n{}",
            rules.len(),
            prom.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let scraped: BTreeSet<String> = prom.metric_names().await.into_iter().collect();
    let waited = started.elapsed();

    // The checker itself: a metric that does not exist is caught.
    let bogus = check(
        &prom,
        &scraped,
        "rate(keysmith_no_such_metric_total[1m])",
        false,
    )
    .await;
    assert!(
        bogus
            .as_deref()
            .is_some_and(|e| e.contains("keysmith_no_such_metric_total")),
        "{bogus:?}"
    );
    let bad = check(&prom, &scraped, "rate(keysmith_values_total[1m]", false).await;
    assert!(
        bad.as_deref().is_some_and(|e| e.contains("refused")),
        "{bad:?}"
    );

    let mut failures = Vec::new();
    assert_eq!(rule_list.len(), alerts_in_file);
    for r in &rule_list {
        let name = r["name"].as_str().unwrap();
        if r["health"] != "ok" {
            failures.push(format!(
                "alert {name}: health {} ({})",
                r["health"], r["lastError"]
            ));
        }
        let expr = r["query"].as_str().unwrap();
        if let Some(e) = check(&prom, &scraped, expr, false).await {
            failures.push(format!("alert {name}: {expr}: {e}"));
        }
    }
    let queries = dashboard_queries();
    for (what, expr) in &queries {
        if let Some(e) = check(&prom, &scraped, expr, true).await {
            failures.push(format!("dashboard {what}: {expr}: {e}"));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let answered = loader.await.unwrap();
    assert!(answered > 0);
    assert!(
        failures.is_empty(),
        "{} of {} alert expressions and dashboard queries fail on Prometheus:\n{}\n\nmetrics scraped: {scraped:?}",
        failures.len(),
        rule_list.len() + queries.len(),
        failures.join("\n")
    );
    eprintln!(
        "prometheus_queries: {} alert rules and {} dashboard queries checked; \
         {answered} requests; scraped after {waited:?}, done after {:?}",
        rule_list.len(),
        queries.len(),
        started.elapsed()
    );
}

//! `/metrics` per principal: a team sees the series of its own names only,
//! the server-wide series need `read` on `"*"`, and each principal has its
//! own share of per-name series, so one team's names cannot push another's
//! under `name="_other"`, nor close another's open handles.

mod common;

use common::{TestServer, call, enc};
use keysmith_server::access::token_digest_hex;
use reqwest::{Method, StatusCode};
use serde_json::json;

const OPS: &str = "ops-token-0123456789";
const ALPHA: &str = "alpha-token-0123456789";
const BETA: &str = "beta-token-0123456789";

async fn server(max_metric_names: usize) -> TestServer {
    server_with(max_metric_names, keysmith_server::DEFAULT_MAX_OPEN_HANDLES).await
}

async fn server_with(max_metric_names: usize, max_open_handles: usize) -> TestServer {
    let d = |t: &str| token_digest_hex(t.as_bytes());
    let text = format!(
        r#"
[[principal]]
name = "ops"
token_sha256 = "{}"
grants = [ {{ names = "*", actions = ["read"] }} ]

[[principal]]
name = "alpha"
token_sha256 = "{}"
grants = [ {{ names = "alpha-*", actions = ["use", "read", "admin"] }} ]

[[principal]]
name = "beta"
token_sha256 = "{}"
grants = [ {{ names = "beta-*", actions = ["use", "read", "admin"] }} ]
"#,
        d(OPS),
        d(ALPHA),
        d(BETA)
    );
    TestServer::start_with(move |c, db| {
        let file = db.parent().unwrap().join("access.toml");
        std::fs::write(&file, &text).unwrap();
        c.access_file = Some(file);
        c.max_metric_names = max_metric_names;
        c.max_open_handles = max_open_handles;
    })
    .await
}

/// Creates sequence `name` as `token` and takes a value of it.
async fn make_and_use(srv: &TestServer, token: &str, name: &str) {
    let (st, v) = call(
        srv,
        token,
        Method::POST,
        "/v1/sequences",
        Some(json!({"name": name})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, v) = call(
        srv,
        token,
        Method::POST,
        &format!("/v1/sequences/{}/next", enc(name)),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

async fn scrape(srv: &TestServer, token: &str) -> String {
    let res = srv
        .client
        .get(srv.url("/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    check_format(&text);
    text
}

/// The text exposition format as `promtool check metrics` reads it: each
/// family's `# HELP` and `# TYPE` once, before its samples, every sample of
/// a family together, no family without samples, every sample
/// `name{labels} value` with a number.
fn check_format(text: &str) {
    let mut typed: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    let mut samples_of_current = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if current.is_some() {
                assert!(
                    samples_of_current > 0,
                    "a family without samples before {line:?}\n{text}"
                );
            }
            let family = rest.split(' ').next().unwrap().to_owned();
            assert!(!typed.contains(&family), "{family} typed twice\n{text}");
            typed.push(family.clone());
            current = Some(family);
            samples_of_current = 0;
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let family = current
            .as_deref()
            .unwrap_or_else(|| panic!("a sample before any TYPE: {line:?}"));
        let name = line.split(['{', ' ']).next().unwrap();
        assert!(
            name == family
                || ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| name == format!("{family}{s}")),
            "sample {line:?} outside its family {family}"
        );
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line:?}"
        );
        let value = line.rsplit(' ').next().unwrap();
        assert!(
            value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
            "{line:?}"
        );
        samples_of_current += 1;
    }
    if current.is_some() {
        assert!(
            samples_of_current > 0,
            "the last family has no samples\n{text}"
        );
    }
}

#[tokio::test]
async fn a_teams_metrics_show_only_its_names_and_no_server_wide_series() {
    let srv = server(1000).await;
    make_and_use(&srv, ALPHA, "alpha-orders").await;
    make_and_use(&srv, BETA, "beta-orders").await;
    // A refusal of beta's, and a pool of alpha's.
    let (st, _) = call(
        &srv,
        BETA,
        Method::POST,
        "/v1/sequences/alpha-orders/next",
        None,
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, v) = call(
        &srv,
        ALPHA,
        Method::POST,
        "/v1/pools",
        Some(json!({"name": "alpha-pool", "size": 3})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, _) = call(&srv, ALPHA, Method::POST, "/v1/pools/alpha-pool/next", None).await;
    assert_eq!(st, StatusCode::OK);

    let beta = scrape(&srv, BETA).await;
    assert!(
        beta.contains("keysmith_values_total{kind=\"sequence\",name=\"beta-orders\"} 1"),
        "{beta}"
    );
    assert!(!beta.contains("alpha"), "beta sees alpha's names:\n{beta}");
    for server_wide in [
        "keysmith_http_requests_total",
        "keysmith_http_errors_total",
        "keysmith_http_request_duration_seconds",
        "keysmith_open_handles",
        "keysmith_build_info",
        "keysmith_uptime_seconds",
        "process_",
        "_other",
    ] {
        assert!(
            !beta.contains(server_wide),
            "beta sees the server-wide {server_wide}:\n{beta}"
        );
    }
    let alpha = scrape(&srv, ALPHA).await;
    assert!(alpha.contains("name=\"alpha-orders\""), "{alpha}");
    assert!(
        alpha.contains("keysmith_pool_size{name=\"alpha-pool\"} 3"),
        "{alpha}"
    );
    assert!(!alpha.contains("beta"), "{alpha}");
    assert!(!alpha.contains("keysmith_http_requests_total"), "{alpha}");

    let ops = scrape(&srv, OPS).await;
    for want in [
        "name=\"alpha-orders\"",
        "name=\"beta-orders\"",
        "name=\"alpha-pool\"",
        "keysmith_http_requests_total{method=\"POST\",route=\"/v1/sequences/{name}/next\",status=\"403\"} 1",
        "keysmith_http_errors_total",
        "keysmith_build_info",
        "keysmith_open_handles{kind=\"sequence\"} 2",
    ] {
        assert!(ops.contains(want), "ops misses {want}:\n{ops}");
    }
    srv.stop().await;
}

#[tokio::test]
async fn each_principal_has_its_own_share_of_per_name_series() {
    let srv = server(2).await;
    for n in ["alpha-a", "alpha-b", "alpha-c", "alpha-d"] {
        make_and_use(&srv, ALPHA, n).await;
    }
    make_and_use(&srv, BETA, "beta-x").await;
    let beta = scrape(&srv, BETA).await;
    assert!(
        beta.contains("keysmith_values_total{kind=\"sequence\",name=\"beta-x\"} 1"),
        "beta's name fell out of its own series:\n{beta}"
    );
    let ops = scrape(&srv, OPS).await;
    // alpha's first two have their own; its others share `_other`.
    assert!(
        ops.contains("keysmith_values_total{kind=\"sequence\",name=\"alpha-a\"} 1"),
        "{ops}"
    );
    assert!(
        ops.contains("keysmith_values_total{kind=\"sequence\",name=\"alpha-b\"} 1"),
        "{ops}"
    );
    assert!(
        ops.contains("keysmith_values_total{kind=\"sequence\",name=\"_other\"} 2"),
        "{ops}"
    );
    assert!(!ops.contains("name=\"alpha-c\""), "{ops}");
    srv.stop().await;
}

/// Whether the server holds a handle of sequence `name` open (its `show`
/// has a `server` part).
async fn open_here(srv: &TestServer, name: &str) -> bool {
    let (st, v) = call(
        srv,
        OPS,
        Method::GET,
        &format!("/v1/sequences/{}", enc(name)),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    !v["server"].is_null()
}

/// At the cap of open handles, the principal that opened the most gives
/// one of its own up: alpha's many names never close beta's handle.
#[tokio::test]
async fn one_principals_names_close_its_own_handles_not_anothers() {
    let srv = server_with(1000, 3).await;
    make_and_use(&srv, BETA, "beta-x").await;
    for n in ["alpha-a", "alpha-b", "alpha-c", "alpha-d"] {
        make_and_use(&srv, ALPHA, n).await;
    }
    assert!(
        open_here(&srv, "beta-x").await,
        "alpha's names closed beta's handle"
    );
    assert!(
        !open_here(&srv, "alpha-a").await,
        "alpha's oldest handle should have given way"
    );
    assert!(open_here(&srv, "alpha-d").await);
    srv.stop().await;
}

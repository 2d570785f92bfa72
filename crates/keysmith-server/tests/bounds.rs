//! The server's bounds: caps on what one request may ask for (each a 4xx
//! that changes nothing), nothing kept in memory for names that do not
//! exist, idle and least-recently-used handles closed with their tails
//! handed back, bodies read by the deadline, the open probes, and the
//! conventional metrics.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long an awaited condition may take before a test fails: a bound on a
/// hang, not a performance threshold.
const DEADLINE: Duration = Duration::from_secs(60);

/// The server's Prometheus text.
async fn scrape(srv: &TestServer) -> String {
    let res = srv.req(Method::GET, "/metrics").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.text().await.unwrap()
}

/// The value of the sample whose line starts with `series` (name and
/// labels, as the text format writes them).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

/// The open handles of each kind and the high-water entries, as scraped.
async fn held(srv: &TestServer) -> [f64; 4] {
    let text = scrape(srv).await;
    let get = |s: &str| sample(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    [
        get("keysmith_open_handles{kind=\"sequence\"}"),
        get("keysmith_open_handles{kind=\"numbered_sequence\"}"),
        get("keysmith_open_handles{kind=\"pool\"}"),
        get("keysmith_high_water_entries"),
    ]
}

/// Polls the metrics until `done` holds of them.
async fn await_metrics(srv: &TestServer, what: &str, done: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + DEADLINE;
    loop {
        let text = scrape(srv).await;
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < until, "never: {what}\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The stored row of sequence `name` (its `next` and version).
async fn row(srv: &TestServer, name: &str) -> Value {
    let (st, v) = srv
        .call(Method::GET, &format!("/v1/sequences/{name}"), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    json!({"next": v["next"], "version": v["version"], "max": v["max"]})
}

#[tokio::test]
async fn reserve_is_capped_like_next_and_takes_nothing() {
    let srv = TestServer::start_with(|c, _| c.max_count = 1000).await;
    srv.create("orders", 10).await;
    let before = row(&srv, "orders").await;
    for count in ["1099511627776", "1001"] {
        let (st, v) = srv
            .call(
                Method::POST,
                &format!("/v1/sequences/orders/reserve?count={count}"),
                None,
            )
            .await;
        assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("limit of 1000"), "{msg}");
    }
    assert_eq!(row(&srv, "orders").await, before);
    // At the limit it is granted.
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences/orders/reserve?count=1000",
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["ranges"][0]["end"], 1001, "{v}");
}

#[tokio::test]
async fn a_fence_over_the_skip_limit_is_413_and_moves_nothing() {
    let srv = TestServer::start_with(|c, _| c.max_fence_skip = 5000).await;
    srv.create("orders", 10).await;
    let before = row(&srv, "orders").await;
    for body in [
        json!({"name": "orders", "skip": 5001}),
        json!({"all": true, "skip": 1_000_000_000_000i64}),
        json!({"all": true, "skip": 5001, "dry_run": true}),
    ] {
        let (st, v) = srv.call(Method::POST, "/v1/fence", Some(body)).await;
        assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("limit of 5000"), "{msg}");
    }
    assert_eq!(row(&srv, "orders").await, before);
    let (_, doc) = srv.call(Method::GET, "/openapi.json", None).await;
    let skip = &doc["components"]["schemas"]["Fence"]["properties"]["skip"];
    assert_eq!(skip["maximum"], 5000, "{skip}");
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/fence",
            Some(json!({"name": "orders", "skip": 5000})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_ne!(row(&srv, "orders").await, before);
}

#[tokio::test]
async fn worker_leases_over_the_ttl_or_group_limit_are_413_and_lease_nothing() {
    let srv = TestServer::start_with(|c, _| {
        c.max_worker_ttl = Duration::from_millis(60_000);
        c.max_worker_group = 8;
    })
    .await;
    let listing = || srv.call(Method::GET, "/v1/workers/g", None);
    let before = listing().await;
    assert_eq!(before.0, StatusCode::OK);
    for (query, limit) in [
        ("ttl_ms=60001", "limit of 60000 ms"),
        ("ttl_ms=86400000", "limit of 60000 ms"),
        ("max=9", "limit of 8 worker ids"),
        ("max=1024", "limit of 8 worker ids"),
    ] {
        let (st, v) = srv
            .call(Method::POST, &format!("/v1/workers/g/lease?{query}"), None)
            .await;
        assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE, "{query}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(limit), "{query}: {msg}");
    }
    assert_eq!(listing().await, before);
    // The document states the server's limits.
    let (_, doc) = srv.call(Method::GET, "/openapi.json", None).await;
    let params = &doc["paths"]["/v1/workers/{group}/lease"]["post"]["parameters"];
    let param = |name: &str| {
        params
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .unwrap_or_else(|| panic!("no parameter {name}: {params}"))
    };
    assert_eq!(param("ttl_ms")["schema"]["maximum"], 60_000, "{params}");
    assert_eq!(param("max")["schema"]["maximum"], 8, "{params}");
    // Within the limits, and without a max (the server's limit when below
    // the default group size): granted.
    let (st, v) = srv
        .call(Method::POST, "/v1/workers/g/lease?ttl_ms=60000&max=8", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = srv.call(Method::POST, "/v1/workers/h/lease", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["max"], 8, "{v}");
    // A renewal over the TTL limit is refused too, and the lease still holds.
    let token = v["lease"].as_str().unwrap();
    let (st, e) = srv
        .call(
            Method::POST,
            &format!("/v1/workers/h/lease/{token}/renew?ttl_ms=60001"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    let (st, e) = srv
        .call(
            Method::POST,
            &format!("/v1/workers/h/lease/{token}/release"),
            None,
        )
        .await;
    assert_eq!((st, &e["released"]), (StatusCode::OK, &json!(true)), "{e}");
}

/// 100 000 names that do not exist, asked for by `next`, `reserve` and pool
/// `next` over 16 connections: every answer is a 404, and the server holds
/// no more handles and high-water marks than before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unknown_names_leaves_nothing_in_memory() {
    const NAMES: usize = 100_000;
    const CONNECTIONS: usize = 16;
    let srv = Arc::new(TestServer::start().await);
    srv.create("real", 10).await;
    srv.next("real", 1).await;
    let before = held(&srv).await;
    assert_eq!(before, [1.0, 0.0, 0.0, 1.0]);
    let next_name = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..CONNECTIONS {
        let (srv, next_name) = (srv.clone(), next_name.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let i = next_name.fetch_add(1, Relaxed);
                if i >= NAMES {
                    return;
                }
                let path = match i % 3 {
                    0 => format!("/v1/sequences/ghost-{i}/next"),
                    1 => format!("/v1/sequences/ghost-{i}/reserve?count=5"),
                    _ => format!("/v1/pools/ghost-{i}/next"),
                };
                let res = srv.req(Method::POST, &path).send().await.unwrap();
                assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(held(&srv).await, before);
}

#[tokio::test]
async fn an_idle_handle_is_closed_and_its_tail_handed_back() {
    let srv = TestServer::start_with(|c, _| {
        c.handle_idle = Duration::from_millis(200);
        c.adaptive = None;
    })
    .await;
    srv.create("orders", 100).await;
    assert_eq!(srv.next("orders", 3).await, vec![1, 2, 3]);
    // The block is reserved: the store's next is past it.
    assert!(row(&srv, "orders").await["next"].as_i64().unwrap() > 100);
    await_metrics(&srv, "the idle handle closed", |t| {
        sample(t, "keysmith_open_handles{kind=\"sequence\"}") == Some(0.0)
    })
    .await;
    assert_eq!(
        row(&srv, "orders").await["next"],
        4,
        "the tail was not handed back"
    );
    // Asked for again, it opens again and goes on from there.
    assert_eq!(srv.next("orders", 1).await, vec![4]);
}

#[tokio::test]
async fn at_the_handle_cap_the_least_recently_used_handle_is_closed() {
    let srv = TestServer::start_with(|c, _| {
        c.max_open_handles = 2;
        c.adaptive = None;
    })
    .await;
    for name in ["a", "b", "c"] {
        srv.create(name, 100).await;
    }
    assert_eq!(srv.next("a", 1).await, vec![1]);
    assert_eq!(srv.next("b", 1).await, vec![1]);
    // `a` used again: `b` is now the least recently used.
    assert_eq!(srv.next("a", 1).await, vec![2]);
    assert_eq!(srv.next("c", 1).await, vec![1]);
    assert_eq!(held(&srv).await[0], 2.0);
    // b was closed, its tail handed back; a still holds its block.
    assert_eq!(row(&srv, "b").await["next"], 2);
    assert!(row(&srv, "a").await["next"].as_i64().unwrap() > 100);
    // b comes back without a repeat, pushing out a.
    assert_eq!(srv.next("b", 1).await, vec![2]);
    assert_eq!(row(&srv, "a").await["next"], 3);
    assert_eq!(held(&srv).await[0], 2.0);
}

/// A request of `head` whose body never arrives in full.
async fn trickle(srv: &TestServer, head: &str) -> (u16, String) {
    let mut conn = TcpStream::connect(srv.addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(b"{\"lea").await.unwrap();
    // The server answers and closes by its deadline; the bound is on a hang.
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(DEADLINE, async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") {
                        let text = String::from_utf8_lossy(&out).to_string();
                        if let Some(len) = text[..end]
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .and_then(|n| n.trim().parse::<usize>().ok())
                            && out.len() >= end + 4 + len
                        {
                            break;
                        }
                    }
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer to a trickling body");
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    (status, text)
}

#[tokio::test]
async fn a_trickling_body_is_answered_by_the_deadline() {
    let srv = TestServer::start_with(|c, _| {
        c.request_timeout = Duration::from_millis(500);
    })
    .await;
    srv.create("orders", 10).await;
    let before = row(&srv, "orders").await;
    for path in [
        "/v1/sequences/orders/release",
        "/v1/sequences/orders/reserve?count=5",
        "/v1/sequences/orders/next",
    ] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        );
        let (status, text) = trickle(&srv, &head).await;
        assert_eq!(status, 408, "{path}: {text}");
        assert!(text.contains("body_timeout"), "{path}: {text}");
    }
    // A route under the request timeout answers 503 `timeout`.
    let head = "POST /v1/sequences HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n";
    let (status, text) = trickle(&srv, head).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("\"timeout\""), "{text}");
    // Nothing was reserved or created.
    assert_eq!(row(&srv, "orders").await, before);
    let (_, list) = srv.call(Method::GET, "/v1/sequences", None).await;
    assert_eq!(list["sequences"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn the_probes_need_no_token() {
    let srv = TestServer::start_with(|c, _| {
        c.token = Some(keysmith_server::Token::new("s3cret-token-xyz").unwrap());
    })
    .await;
    for path in ["/livez", "/readyz"] {
        let res = srv.client.get(srv.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
    }
    // The store ping answers principals only.
    let (st, v) = srv.call(reqwest::Method::GET, "/healthz", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    for path in ["/healthz", "/metrics", "/v1/sequences", "/livez/x"] {
        let res = srv.client.get(srv.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
}

#[tokio::test]
async fn metrics_follow_the_conventions() {
    let srv = TestServer::start_with(|c, _| c.max_metric_names = 1).await;
    srv.create("a", 10).await;
    srv.create("b", 10).await;
    srv.next("a", 2).await;
    srv.next("b", 3).await;
    srv.next("b", 1).await;
    let (st, _) = srv
        .call(Method::POST, "/v1/sequences/nothing-here/next", None)
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let text = scrape(&srv).await;
    let version = env!("CARGO_PKG_VERSION");
    for series in [
        format!("keysmith_build_info{{version=\"{version}\"}} 1"),
        "keysmith_http_requests_total{method=\"POST\",route=\"/v1/sequences/{name}/next\",status=\"200\"} 3".into(),
        "keysmith_http_requests_total{method=\"POST\",route=\"/v1/sequences/{name}/next\",status=\"404\"} 1".into(),
        "keysmith_http_requests_total{method=\"POST\",route=\"/v1/sequences\",status=\"201\"} 2".into(),
        "keysmith_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/sequences/{name}/next\"} 4".into(),
        "keysmith_http_request_duration_seconds_bucket{method=\"POST\",route=\"/v1/sequences/{name}/next\",le=\"+Inf\"} 4".into(),
        "keysmith_open_handles{kind=\"sequence\"} 2".into(),
        "keysmith_open_handles{kind=\"pool\"} 0".into(),
        "keysmith_high_water_entries 2".into(),
        // The first name has series of its own; the second is past the cap.
        "keysmith_values_total{kind=\"sequence\",name=\"a\"} 2".into(),
        "keysmith_values_total{kind=\"sequence\",name=\"_other\"} 4".into(),
        "keysmith_sequence_refills_total{name=\"_other\"}".into(),
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(&series)),
            "no {series:?} in\n{text}"
        );
    }
    assert!(!text.contains("name=\"b\""), "{text}");
    // Process metrics, on Linux.
    if cfg!(target_os = "linux") {
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(name)),
                "no {name:?} in\n{text}"
            );
        }
    }
    // Base units: no metric in milliseconds.
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("keysmith_")
                && l.split([' ', '{']).next().unwrap().ends_with("_ms")),
        "{text}"
    );
    // An unmatched path is one series, whatever the path.
    let (st, _) = srv.call(Method::GET, "/no/such/path", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let text = scrape(&srv).await;
    assert!(
        text.contains(
            "keysmith_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"} 1"
        ),
        "{text}"
    );
    assert!(!text.contains("/no/such/path"), "{text}");
}

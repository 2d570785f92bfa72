//! The pool routes against a real server on a free port over SQLite.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

async fn create_pool(srv: &TestServer, name: &str, start: i64, size: i64) {
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": name, "start": start, "size": size})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["size"], size);
}

/// 16 clients take from one pool at once: every number unique, each one a
/// number the pool could hand out (at least its start).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_takers_get_unique_numbers() {
    let srv = Arc::new(TestServer::start().await);
    create_pool(&srv, "tickets", 100, 50).await;
    let mut tasks = Vec::new();
    for c in 0..16i64 {
        let srv = srv.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for i in 0..15 {
                mine.extend(srv.take("tickets", 1 + (c + i) % 4).await);
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "a number was handed out twice");
    assert!(all.iter().all(|&v| v >= 100));

    let (st, v) = srv.call(Method::GET, "/v1/pools/tickets", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["taken"], all.len() as i64, "{v}");
    assert_eq!(v["server"]["served"], all.len() as i64);
    let (st, v) = srv.call(Method::GET, "/v1/status", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["pools"][0]["name"], "tickets");
    assert_eq!(v["pools"][0]["size"], 50);
    assert_eq!(v["pools"][0]["served"], all.len().to_string());
}

#[tokio::test]
async fn create_list_show_take_drop() {
    let srv = TestServer::start().await;
    create_pool(&srv, "p", 1, 3).await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "q", "size": 2})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(v["start"], 1, "default start");

    let mut got = srv.take("p", 3).await;
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 3);
    // Three takes from a pool of 1..=3 each replace a member v by v + 3.
    assert!(got.iter().all(|v| (1..=9).contains(v)), "{got:?}");
    let (st, v) = srv
        .call(Method::POST, "/v1/pools/p/next?as=string", None)
        .await;
    assert_eq!(st, StatusCode::OK);
    let fourth: i64 = v["values"][0].as_str().unwrap().parse().unwrap();
    assert!(
        fourth >= 1 && !got.contains(&fourth),
        "{fourth} after {got:?}"
    );

    let (_, v) = srv.call(Method::GET, "/v1/pools", None).await;
    let names: Vec<&str> = v["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["p", "q"]);

    let (st, _) = srv.call(Method::DELETE, "/v1/pools/p", None).await;
    assert_eq!(st, StatusCode::OK);
    let (st, v) = srv.call(Method::POST, "/v1/pools/p/next", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "not_found");
}

#[tokio::test]
async fn bad_pool_input_gets_its_status_and_changes_nothing() {
    let srv = TestServer::start_with(|c, _| c.max_count = 20).await;
    create_pool(&srv, "p", 1, 5).await;
    let before = srv.take("p", 1).await;
    let cases = [
        (
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "x"})),
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "x", "size": 0})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "x", "size": 3, "start": -1})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "x y", "size": 3})),
            400,
            "invalid_name",
        ),
        (
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "p", "size": 9})),
            409,
            "already_exists",
        ),
        (
            Method::POST,
            "/v1/pools/p/next?count=0",
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/pools/p/next?count=21",
            None,
            413,
            "too_large",
        ),
        (Method::POST, "/v1/pools/nope/next", None, 404, "not_found"),
        (Method::GET, "/v1/pools/nope", None, 404, "not_found"),
        (Method::DELETE, "/v1/pools/nope", None, 404, "not_found"),
    ];
    for (m, path, body, status, code) in cases {
        let (st, v) = srv.call(m.clone(), path, body.clone()).await;
        assert_eq!(st.as_u16(), status, "{m} {path} {body:?}: {v}");
        assert_eq!(v["error"]["code"], code, "{m} {path} {body:?}: {v}");
    }
    let (_, v) = srv.call(Method::GET, "/v1/pools", None).await;
    assert_eq!(v["pools"].as_array().unwrap().len(), 1, "{v}");
    let (_, v) = srv.call(Method::GET, "/v1/pools/p", None).await;
    assert_eq!(v["taken"], 1, "a bad request took a number: {v}");
    assert_eq!(v["size"], 5);
    assert!(before[0] >= 1);
}

#[tokio::test]
async fn pool_metrics() {
    let srv = TestServer::start().await;
    create_pool(&srv, "m", 1, 10).await;
    for _ in 0..3 {
        srv.take("m", 2).await;
    }
    let text = srv
        .req(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let metric = |prefix: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(
        metric(r#"keysmith_values_total{kind="pool",name="m"}"#),
        6.0
    );
    assert_eq!(
        metric(r#"keysmith_allocation_seconds_count{kind="pool",name="m"}"#),
        3.0
    );
    assert!(metric(r#"keysmith_pool_attempts_total{name="m"}"#) >= 6.0);
    assert_eq!(metric(r#"keysmith_pool_conflicts_total{name="m"}"#), 0.0);
    assert_eq!(metric(r#"keysmith_pool_size{name="m"}"#), 10.0);
}

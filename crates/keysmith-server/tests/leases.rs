//! Block leases over HTTP: `reserve` hands a caller ranges nobody else gets;
//! `release` hands the unused tail back only if no one reserved since.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn reserve(srv: &TestServer, name: &str, count: i64) -> (i64, i64, String) {
    let (st, v) = srv
        .call(
            Method::POST,
            &format!("/v1/sequences/{name}/reserve?count={count}"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let r = &v["ranges"][0];
    (
        r["start"].as_i64().unwrap(),
        r["end"].as_i64().unwrap(),
        v["lease"].as_str().unwrap().to_owned(),
    )
}

async fn release(srv: &TestServer, name: &str, lease: &str, from: Value) -> (StatusCode, Value) {
    srv.call(
        Method::POST,
        &format!("/v1/sequences/{name}/release"),
        Some(json!({"lease": lease, "from": from})),
    )
    .await
}

#[tokio::test]
async fn reserve_then_release_the_unused_tail() {
    let srv = TestServer::start().await;
    srv.create("s", 10).await;
    let (a0, a1, lease) = reserve(&srv, "s", 100).await;
    assert_eq!((a0, a1), (1, 101));
    // The caller used 1..=40; 41..101 goes back.
    let (st, v) = release(&srv, "s", &lease, json!(41)).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["released"], json!({"start": 41, "end": 101}));
    // Released twice: nothing changes.
    let (_, v) = release(&srv, "s", &lease, json!("41")).await;
    assert_eq!(v["released"], Value::Null);
    // The next reservation starts where the caller stopped.
    let (b0, b1, b_lease) = reserve(&srv, "s", 5).await;
    assert_eq!((b0, b1), (41, 46));
    // The server's own handle and another lease come after: b's tail cannot
    // go back any more.
    assert_eq!(srv.next("s", 1).await, vec![46]);
    let (_, v) = release(&srv, "s", &b_lease, json!(43)).await;
    assert_eq!(v["released"], Value::Null, "someone reserved since");
}

#[tokio::test]
async fn as_string_and_bad_input() {
    let srv = TestServer::start().await;
    srv.create("s", 10).await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences/s/reserve?count=3&as=string",
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["ranges"], json!([{"start": "1", "end": "4"}]));
    let lease = v["lease"].as_str().unwrap().to_owned();

    for (from, why) in [
        (json!(4), "past the lease"),
        (json!(0), "before the lease"),
        (json!("x"), "not a number"),
        (json!(1.5), "not whole"),
    ] {
        let (st, v) = release(&srv, "s", &lease, from).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{why}: {v}");
    }
    // An edited token, and a token for another sequence.
    let mut edited = lease.clone();
    edited.replace_range(0..1, if lease.starts_with('A') { "B" } else { "A" });
    let (st, v) = release(&srv, "s", &edited, json!(2)).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    srv.create("t", 10).await;
    let (st, v) = release(&srv, "t", &lease, json!(2)).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    // Nothing changed: the next reservation of s starts after the first one.
    assert_eq!(reserve(&srv, "s", 1).await.0, 4);

    let (st, _) = srv
        .call(Method::POST, "/v1/sequences/nope/reserve?count=3", None)
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = srv
        .call(Method::POST, "/v1/sequences/s/reserve?count=0", None)
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
}

/// Many clients reserving at once, beside the server's own `next`: no value
/// in two places.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_reservations_never_overlap() {
    let srv = Arc::new(TestServer::start().await);
    srv.create("s", 7).await;
    let mut tasks = Vec::new();
    for i in 0..12 {
        let srv = srv.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..10 {
                if i % 3 == 0 {
                    got.extend(srv.next("s", 3).await);
                } else {
                    let (a, b, _) = reserve(&srv, "s", 1 + i).await;
                    got.extend(a..b);
                }
            }
            got
        }));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        for v in t.await.unwrap() {
            assert!(seen.insert(v), "{v} in two places");
        }
    }
}

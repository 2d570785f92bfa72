//! `POST /v1/counters/next`: this host's `<hostname>/<n>` names.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::TestServer;
use keysmith::names::HostCounter;
use reqwest::{Method, StatusCode};
use serde_json::json;

/// 16 clients at once: every name unique, all `testhost/N`, N from 1 with no
/// gap, and the counter file holds the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_get_unique_names() {
    let srv = Arc::new(TestServer::start().await);
    let mut tasks = Vec::new();
    for c in 0..16u64 {
        let srv = srv.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for i in 0..10u64 {
                let count = 1 + (c + i) % 5;
                let (st, v) = srv
                    .call(
                        Method::POST,
                        &format!("/v1/counters/next?count={count}"),
                        None,
                    )
                    .await;
                assert_eq!(st, StatusCode::OK, "{v}");
                assert_eq!(v["host"], "testhost");
                let names: Vec<String> = v["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap().to_owned())
                    .collect();
                assert_eq!(names.len() as u64, count);
                assert_eq!(names[0], format!("testhost/{}", v["first"]));
                assert_eq!(names.last().unwrap(), &format!("testhost/{}", v["last"]));
                mine.extend(names);
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let numbers: HashSet<u64> = all
        .iter()
        .map(|n| n.strip_prefix("testhost/").unwrap().parse().unwrap())
        .collect();
    assert_eq!(numbers.len(), all.len(), "a name was handed out twice");
    assert_eq!(numbers, (1..=all.len() as u64).collect());
    let dir = srv.dir.path().join("counter");
    let counter = HostCounter::open_with_host(&dir, "testhost").unwrap();
    assert_eq!(counter.peek().unwrap(), all.len() as u64);
}

#[tokio::test]
async fn counter_bad_input_and_strings() {
    let srv = TestServer::start_with(|c, _| c.max_count = 10).await;
    for (path, status) in [
        ("/v1/counters/next?count=0", 400),
        ("/v1/counters/next?count=x", 400),
        ("/v1/counters/next?count=11", 413),
        ("/v1/counters/next?as=bytes", 400),
    ] {
        let (st, v) = srv.call(Method::POST, path, None).await;
        assert_eq!(st.as_u16(), status, "{path}: {v}");
    }
    let (st, v) = srv.call(Method::GET, "/v1/counters/next", None).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED, "{v}");
    // Nothing was taken by the bad requests.
    let (st, v) = srv
        .call(Method::POST, "/v1/counters/next?count=2&as=string", None)
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        v,
        json!({"host": "testhost", "first": "1", "last": "2", "names": ["testhost/1", "testhost/2"]})
    );
}

/// A counter directory that cannot be used is a 503 saying what to do; the
/// rest of the server works.
#[tokio::test]
async fn unusable_counter_dir_is_503() {
    let srv = TestServer::start_with(|c, db| {
        // A file where the directory should be.
        std::fs::write(db.with_file_name("not-a-dir"), b"x").unwrap();
        c.counter.dir = Some(db.with_file_name("not-a-dir"));
    })
    .await;
    let (st, v) = srv.call(Method::POST, "/v1/counters/next", None).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "no_counter");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--counter-dir"),
        "{v}"
    );
    let (st, _) = srv.call(Method::GET, "/healthz", None).await;
    assert_eq!(st, StatusCode::OK);
}

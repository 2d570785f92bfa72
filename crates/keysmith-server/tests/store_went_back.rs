//! The server when its store goes back in time (issue 24): a backup of the
//! SQLite file restored into it under the running server. The server
//! refuses the ranges it had already handed out (503 `store_went_back`,
//! counted in `/metrics`, shown on the status page), hands out no value
//! twice, and the operator's `POST /v1/fence` moves the sequence past them.

mod common;

use std::collections::HashSet;

use common::{TestServer, values};
use reqwest::{Method, StatusCode};
use serde_json::json;

fn restore(backup: &std::path::Path, live: &std::path::Path) {
    let src = rusqlite::Connection::open(backup).unwrap();
    let mut dst = rusqlite::Connection::open(live).unwrap();
    rusqlite::backup::Backup::new(&src, &mut dst)
        .unwrap()
        .run_to_completion(100, std::time::Duration::ZERO, None)
        .unwrap();
}

#[tokio::test]
async fn a_restored_store_is_refused_and_fenced() {
    let srv = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("backup.db");
    srv.create("orders", 10).await;
    let mut seen = srv.next("orders", 5).await;
    {
        let c = rusqlite::Connection::open(srv.db_path()).unwrap();
        c.execute("VACUUM INTO ?1", [backup.to_str().unwrap()])
            .unwrap();
    }
    seen.extend(srv.next("orders", 40).await);
    restore(&backup, &srv.db_path());

    // The handle serves what it holds, then every request is a 503 until
    // the store passes what the server reserved; no value twice.
    let mut refused = 0;
    for _ in 0..20 {
        let res = srv
            .req(Method::POST, "/v1/sequences/orders/next?count=5")
            .send()
            .await
            .unwrap();
        let st = res.status();
        let retry_after = res.headers().get("retry-after").cloned();
        let v: serde_json::Value = res.json().await.unwrap();
        if st == StatusCode::OK {
            seen.extend(values(&v));
        } else {
            assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
            assert_eq!(v["error"]["code"], "store_went_back", "{v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("POST /v1/fence {\"name\":\"orders\",\"skip\":"),
                "{v}"
            );
            assert!(retry_after.is_some());
            refused += 1;
            break;
        }
    }
    assert_eq!(refused, 1, "the restored range must be refused");
    let unique: HashSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no value twice");
    let high = *seen.iter().max().unwrap();

    let metrics = srv
        .req(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The refill and the background prefetch may both have been refused.
    let counted: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("keysmith_store_went_back_total{name=\"orders\"} "))
        .unwrap_or_else(|| panic!("{metrics}"))
        .parse()
        .unwrap();
    assert!(counted >= 1, "{metrics}");
    let (_, status) = srv.call(Method::GET, "/v1/status", None).await;
    assert_eq!(status["sequences"][0]["went_back"], counted, "{status}");
    let page = srv
        .req(Method::GET, "/")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("num failover alert"), "the page shows it");

    // The fence over HTTP: bad bodies are 400 and change nothing; a dry run
    // writes nothing; the fence moves the sequence past every value served.
    let (_, before) = srv.call(Method::GET, "/v1/sequences/orders", None).await;
    for body in [
        json!({"skip": 100}),
        json!({"name": "orders", "all": true, "skip": 100}),
        json!({"name": "orders", "skip": 0}),
        json!({"name": "orders", "skip": "many"}),
        json!({"name": "orders", "skip": 5, "extra": 1}),
    ] {
        let (st, v) = srv
            .call(Method::POST, "/v1/fence", Some(body.clone()))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {v}");
    }
    let (st, _) = srv
        .call(
            Method::POST,
            "/v1/fence",
            Some(json!({"name": "nope", "skip": 5})),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, plan) = srv
        .call(
            Method::POST,
            "/v1/fence",
            Some(json!({"all": true, "skip": 1000, "dry_run": true})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{plan}");
    assert_eq!(plan["dry_run"], true);
    let (_, after_dry) = srv.call(Method::GET, "/v1/sequences/orders", None).await;
    assert_eq!(after_dry["next"], before["next"]);
    let (st, done) = srv
        .call(
            Method::POST,
            "/v1/fence",
            Some(json!({"name": "orders", "skip": 1000})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{done}");
    let after = done["changes"][0]["after"].as_i64().unwrap();
    assert!(after > high, "fenced past {high}: {done}");
    let more = srv.next("orders", 5).await;
    assert!(more.iter().all(|v| *v >= after), "{more:?}");
}

//! A failed request changes nothing: a sequence batch that cannot be served
//! whole is refused without handing out or losing a value, and the values it
//! would have taken are the next ones served, also after a restart. (Pool
//! batches answer what they took, marked partial: `hostile.rs`.)

mod common;

use common::{TestServer, values};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn next(srv: &TestServer, route: &str, count: i64) -> (StatusCode, Value) {
    srv.call(Method::POST, &format!("{route}/next?count={count}"), None)
        .await
}

/// The probe: a sequence with 3 values, `count=5` is a 409, then
/// `count=3` gets exactly 1, 2, 3; a stored `next` never runs ahead of
/// what was served once the server stops.
#[tokio::test]
async fn a_refused_sequence_batch_loses_no_value() {
    for block in [1, 2] {
        let srv = TestServer::start().await;
        let (st, v) = srv
            .call(
                Method::POST,
                "/v1/sequences",
                Some(json!({"name": "ex", "max": 3, "block": block})),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (st, v) = next(&srv, "/v1/sequences/ex", 5).await;
        assert_eq!(st, StatusCode::CONFLICT, "block {block}: {v}");
        assert_eq!(v["error"]["code"], "exhausted", "{v}");
        let (st, v) = next(&srv, "/v1/sequences/ex", 3).await;
        assert_eq!(st, StatusCode::OK, "block {block}: {v}");
        assert_eq!(values(&v), vec![1, 2, 3], "block {block}");
        let (_, v) = srv.call(Method::GET, "/v1/sequences/ex", None).await;
        assert_eq!(v["server"]["served"], 3, "block {block}: {v}");
        assert_eq!(v["next"], 4, "block {block}: {v}");
    }
}

/// Two values left after some were served; a batch of 5 is refused, and the
/// two are still there, also for a server started afresh on the same file
/// (the refused batch's blocks went back to the store at shutdown).
#[tokio::test]
async fn refused_values_survive_a_restart() {
    let srv = TestServer::start().await;
    let (st, _) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "ex", "max": 10, "block": 4})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(srv.next("ex", 8).await, (1..=8).collect::<Vec<_>>());
    let (st, _) = next(&srv, "/v1/sequences/ex", 5).await;
    assert_eq!(st, StatusCode::CONFLICT);
    let db = srv.db_path();
    let dir = srv.stop().await;
    let store = keysmith::store::open(&common::sqlite_url(&db, ""))
        .await
        .unwrap();
    let row = keysmith::sequence::describe(&*store, "ex").await.unwrap();
    assert_eq!(
        row.next, 9,
        "the refused batch's values went back to the store"
    );
    drop(store);

    let again = TestServer::start_with(|c, _| c.store_url = common::sqlite_url(&db, "")).await;
    assert_eq!(again.next("ex", 2).await, vec![9, 10]);
    drop(dir);
}

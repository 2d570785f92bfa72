//! Residue classes over HTTP: `increment` and `offset` at create, values of
//! the class from `next` and from leases (with their `step`), the class in
//! `show`, and bad classes refused with a 400 that creates nothing.

mod common;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn residue_classes_over_http() {
    let srv = TestServer::start().await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "us", "increment": 5, "offset": 2, "block": 3})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(
        (&v["increment"], &v["offset"], &v["start"]),
        (&json!(5), &json!(2), &json!(2)),
        "{v}"
    );

    let values = srv.next("us", 4).await;
    assert_eq!(values, [2, 7, 12, 17]);

    let (st, lease) = srv
        .call(Method::POST, "/v1/sequences/us/reserve?count=3", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{lease}");
    assert_eq!(lease["step"], 5, "{lease}");
    let (start, end) = (
        lease["ranges"][0]["start"].as_i64().unwrap(),
        lease["ranges"][0]["end"].as_i64().unwrap(),
    );
    let leased: Vec<i64> = (start..end).step_by(5).collect();
    assert_eq!(leased.len(), 3, "{lease}");
    assert!(
        leased.iter().all(|v| v % 5 == 2 && !values.contains(v)),
        "{lease}"
    );
    // A from outside the class is a 400; from the second value, the tail
    // goes back.
    for (from, status) in [
        (leased[1] + 1, StatusCode::BAD_REQUEST),
        (leased[1], StatusCode::OK),
    ] {
        let (st, v) = srv
            .call(
                Method::POST,
                "/v1/sequences/us/release",
                Some(json!({"lease": lease["lease"], "from": from})),
            )
            .await;
        assert_eq!(st, status, "{v}");
    }
    let (_, shown) = srv.call(Method::GET, "/v1/sequences/us", None).await;
    assert_eq!(shown["next"], leased[1], "{shown}");
    assert_eq!(shown["increment"], 5, "{shown}");

    // An ordinary sequence's lease has step 1.
    srv.create("plain", 10).await;
    let (_, lease) = srv
        .call(Method::POST, "/v1/sequences/plain/reserve?count=2", None)
        .await;
    assert_eq!(lease["step"], 1, "{lease}");

    for body in [
        json!({"name": "a", "increment": 5, "offset": 5}),
        json!({"name": "b", "increment": 1}),
        json!({"name": "c", "offset": 1}),
        json!({"name": "d", "increment": 5, "gapless": true}),
        json!({"name": "e", "increment": 10, "offset": 9, "start": 0, "max": 8}),
        json!({"name": "f", "increment": "5"}),
    ] {
        let (st, v) = srv
            .call(Method::POST, "/v1/sequences", Some(body.clone()))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
    }
    let (_, list) = srv.call(Method::GET, "/v1/sequences", None).await;
    assert_eq!(list["sequences"].as_array().unwrap().len(), 2, "{list}");
}

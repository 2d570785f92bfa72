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
        refused(&srv, "/v1/sequences", body).await;
    }
    let (_, list) = srv.call(Method::GET, "/v1/sequences", None).await;
    assert_eq!(list["sequences"].as_array().unwrap().len(), 2, "{list}");
}

/// Pools in a residue class over HTTP: `increment` and `offset` at create
/// (the start rounded into the class), only numbers of the class from
/// `next`, on this server and on a second one over the same store (which
/// reads the class from the store), the class in `show` and `list`, and
/// bad classes or starts refused with a 400 that creates nothing.
#[tokio::test]
async fn pools_in_a_residue_class_over_http() {
    let srv = TestServer::start().await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "eu", "size": 5, "start": 10, "increment": 4, "offset": 1})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    // 13 is the first value 1 mod 4 at or above 10.
    assert_eq!(
        (&v["start"], &v["size"], &v["increment"], &v["offset"]),
        (&json!(13), &json!(5), &json!(4), &json!(1)),
        "{v}"
    );
    let (st, plain) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "plain", "size": 3})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{plain}");
    assert!(
        plain.get("increment").is_none() && plain.get("offset").is_none(),
        "{plain}"
    );

    let other = TestServer::start_with(|c, _| {
        c.store_url = common::sqlite_url(&srv.db_path(), "");
    })
    .await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..4 {
        for s in [&srv, &other] {
            for v in s.take("eu", 6).await {
                assert_eq!(v.rem_euclid(4), 1, "{v} is not 1 mod 4");
                assert!(v >= 13, "{v} is below the start");
                assert!(seen.insert(v), "{v} handed out twice");
            }
        }
    }
    let (st, shown) = other.call(Method::GET, "/v1/pools/eu", None).await;
    assert_eq!(st, StatusCode::OK, "{shown}");
    assert_eq!(
        (&shown["increment"], &shown["offset"]),
        (&json!(4), &json!(1))
    );
    assert_eq!(shown["taken"], 48, "{shown}");
    for field in ["start", "lowest", "highest", "max_value"] {
        let v = shown[field].as_i64().unwrap();
        assert_eq!(v.rem_euclid(4), 1, "{field}: {shown}");
    }
    let lowest = shown["lowest"].as_i64().unwrap();
    assert!(!seen.contains(&lowest), "{shown}");
    assert!(
        (13..lowest).step_by(4).all(|v| seen.contains(&v)),
        "holes below {lowest}"
    );
    let (_, list) = srv.call(Method::GET, "/v1/pools", None).await;
    let pools = list["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2, "{list}");
    assert_eq!(
        (&pools[0]["name"], &pools[0]["increment"]),
        (&json!("eu"), &json!(4))
    );
    assert!(pools[1].get("increment").is_none(), "{list}");

    for body in [
        json!({"name": "a", "size": 3, "increment": 5, "offset": 5}),
        json!({"name": "b", "size": 3, "increment": 1}),
        json!({"name": "c", "size": 3, "increment": 0}),
        json!({"name": "d", "size": 3, "offset": 1}),
        json!({"name": "e", "size": 3, "increment": 4, "offset": -1}),
        json!({"name": "f", "size": 3, "increment": "4"}),
        // Fits without a class (start <= 2^63 - 2 * size), not in values
        // of one: the last first member's replacement would pass 2^63 - 1.
        json!({"name": "g", "size": 10, "start": i64::MAX - 30, "increment": 2}),
        json!({"name": "h", "size": 10, "start": i64::MAX - 19, "increment": 2, "offset": 1}),
    ] {
        refused(&srv, "/v1/pools", body).await;
    }
    let (_, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "a", "size": 3, "increment": 5, "offset": 5})),
        )
        .await;
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("offset must be between 0 and increment - 1 = 4")),
        "{v}"
    );
    let (_, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "g", "size": 10, "start": i64::MAX - 30, "increment": 2})),
        )
        .await;
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("too large")),
        "{v}"
    );
    let (_, list) = srv.call(Method::GET, "/v1/pools", None).await;
    assert_eq!(
        list["pools"].as_array().unwrap().len(),
        2,
        "refused bodies created a pool: {list}"
    );
    other.stop().await;
}

/// POSTs `body` to `path` and checks it is refused: 400 with a message.
async fn refused(srv: &TestServer, path: &str, body: serde_json::Value) {
    let (st, v) = srv.call(Method::POST, path, Some(body.clone())).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
}

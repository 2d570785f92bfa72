//! Creating a dropped name continues above the values it handed out,
//! through the service: `DELETE`, `POST` create again, `next` is above;
//! `start_below_dropped` starts lower on purpose, and must be a boolean.

mod common;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn a_sequence_created_again_continues_above_its_dropped_values() {
    let srv = TestServer::start().await;
    srv.create("orders", 10).await;
    let before = srv.next("orders", 3).await;
    let (st, v) = srv.call(Method::DELETE, "/v1/sequences/orders", None).await;
    assert!(st.is_success(), "{st} {v}");
    let created = srv.create("orders", 10).await;
    // The server's handle had reserved a block of 10: above all of it.
    assert_eq!(
        created["continued_above_dropped"], created["start"],
        "{created}"
    );
    assert!(created["start"].as_i64().unwrap() > *before.iter().max().unwrap());
    let after = srv.next("orders", 3).await;
    let highest = *before.iter().max().unwrap();
    assert!(
        after.iter().all(|v| *v > highest),
        "{after:?} repeats a value of {before:?}"
    );
    // Explicitly below: honoured, and the answer has no continuation.
    let (st, _) = srv.call(Method::DELETE, "/v1/sequences/orders", None).await;
    assert!(st.is_success());
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "orders", "start": 1, "start_below_dropped": true})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["start"], 1);
    assert!(v.get("continued_above_dropped").is_none(), "{v}");
    srv.stop().await;
}

#[tokio::test]
async fn a_pool_created_again_continues_above_its_dropped_numbers() {
    let srv = TestServer::start().await;
    let body = json!({"name": "p", "size": 4});
    let (st, v) = srv
        .call(Method::POST, "/v1/pools", Some(body.clone()))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let before = srv.take("p", 6).await;
    let (st, _) = srv.call(Method::DELETE, "/v1/pools/p", None).await;
    assert!(st.is_success());
    let (st, v) = srv.call(Method::POST, "/v1/pools", Some(body)).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["continued_above_dropped"], v["start"], "{v}");
    let after = srv.take("p", 4).await;
    let highest = *before.iter().max().unwrap();
    assert!(
        after.iter().all(|v| *v > highest),
        "{after:?} repeats a number of {before:?}"
    );
    srv.stop().await;
}

#[tokio::test]
async fn a_start_below_dropped_that_is_not_a_boolean_is_a_400_and_creates_nothing() {
    let srv = TestServer::start().await;
    for (path, body) in [
        (
            "/v1/sequences",
            json!({"name": "s", "start_below_dropped": "yes"}),
        ),
        (
            "/v1/pools",
            json!({"name": "s", "size": 3, "start_below_dropped": 1}),
        ),
    ] {
        let (st, v) = srv.call(Method::POST, path, Some(body)).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{path}: {v}");
        assert!(v.to_string().contains("start_below_dropped"), "{path}: {v}");
    }
    let (st, _) = srv.call(Method::GET, "/v1/sequences/s", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = srv.call(Method::GET, "/v1/pools/s", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    srv.stop().await;
}

#[tokio::test]
async fn no_room_above_the_dropped_values_is_a_400_naming_the_field() {
    let srv = TestServer::start().await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "small", "max": 20, "block": 15})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    srv.next("small", 1).await;
    let (st, _) = srv.call(Method::DELETE, "/v1/sequences/small", None).await;
    assert!(st.is_success());
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "small", "max": 10})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert!(v.to_string().contains("start_below_dropped"), "{v}");
    let (st, _) = srv.call(Method::GET, "/v1/sequences/small", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    srv.stop().await;
}

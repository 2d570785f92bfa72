//! Leader-ordered sequences over HTTP: `"order":"leader"` at create; the
//! server that takes the first `next` leads, another server over the same
//! store answers 421 `not_leader` naming the leader (body and header); a
//! stopped leader releases its lease and the follower leads, above every
//! value the first one handed out.

mod common;

use common::{TestServer, json_of};
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn followers_name_the_leader_and_take_over_when_it_stops() {
    let a = TestServer::start().await;
    let db = a.db_path();
    let b = TestServer::start_with(|c, _| c.store_url = common::sqlite_url(&db, "")).await;

    let (st, body) = a
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "o", "order": "leader"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    assert_eq!(body["numbering"]["order"], "leader", "{body}");
    // Every server knows the order: it is in the store.
    let (_, shown) = b.call(Method::GET, "/v1/sequences/o", None).await;
    assert_eq!(shown["numbering"]["order"], "leader", "{shown}");

    let first = a.next("o", 3).await;
    assert_eq!(first, vec![1, 2, 3]);

    let res = b
        .req(Method::POST, "/v1/sequences/o/next")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::MISDIRECTED_REQUEST);
    let header = res
        .headers()
        .get("keysmith-leader")
        .map(|v| v.to_str().unwrap().to_owned());
    let (_, err) = json_of(res).await;
    let leader = format!("http://{}", a.addr);
    assert_eq!(header.as_deref(), Some(leader.as_str()));
    assert_eq!(err["error"]["code"], "not_leader");
    assert_eq!(err["error"]["leader"], leader.as_str());

    // The advertised address serves the call: what a client does.
    let via_leader = a.next("o", 2).await;
    assert_eq!(via_leader, vec![4, 5]);

    // Who leads, in /metrics and in /v1/status (what `keysmith top` shows).
    assert_eq!(
        series(&a, "keysmith_leader_leading{name=\"o\"}").await,
        Some(1.0)
    );
    assert_eq!(
        series(&a, "keysmith_leader_terms_total{name=\"o\"}").await,
        Some(1.0)
    );
    assert_eq!(
        series(&a, "keysmith_leader_terms_lost_total{name=\"o\"}").await,
        Some(0.0)
    );
    assert_eq!(
        series(&b, "keysmith_leader_leading{name=\"o\"}").await,
        Some(0.0)
    );
    assert_eq!(
        series(&b, "keysmith_leader_terms_total{name=\"o\"}").await,
        Some(0.0)
    );
    let (_, status) = b.call(Method::GET, "/v1/status", None).await;
    let lease = &status["sequences"][0]["lease"];
    assert_eq!(status["sequences"][0]["name"], "o", "{status}");
    assert!(lease["expires_in_ms"].is_i64(), "{status}");
    let holder = lease["holder"].as_str().unwrap_or_default();
    assert!(holder.starts_with(&format!("{leader} ")), "{status}");

    // A leader that shuts down releases its lease: b leads at once, above
    // every value a reserved.
    let reserved = {
        let (_, row) = b.call(Method::GET, "/v1/sequences/o", None).await;
        row["next"].as_i64().unwrap()
    };
    let _dir = a.stop().await;
    let after = b.next("o", 1).await;
    assert!(after[0] >= reserved, "{after:?} below {reserved}");
    assert_eq!(
        series(&b, "keysmith_leader_leading{name=\"o\"}").await,
        Some(1.0)
    );
    assert_eq!(
        series(&b, "keysmith_leader_terms_total{name=\"o\"}").await,
        Some(1.0)
    );
}

/// The value of the series `name_and_labels` on `server`'s /metrics.
async fn series(server: &TestServer, name_and_labels: &str) -> Option<f64> {
    let res = server.req(Method::GET, "/metrics").send().await.unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let text = res.text().await.unwrap();
    text.lines().find_map(|l| {
        l.strip_prefix(name_and_labels)
            .and_then(|v| v.trim().parse().ok())
    })
}

#[tokio::test]
async fn a_bad_order_is_a_400_and_creates_nothing() {
    let a = TestServer::start().await;
    for body in [
        json!({"name": "x", "order": "fastest"}),
        json!({"name": "x", "order": "leader", "gapless": true}),
    ] {
        let (st, err) = a.call(Method::POST, "/v1/sequences", Some(body)).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    }
    let (st, _) = a.call(Method::GET, "/v1/sequences/x", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_bad_advertised_address_refuses_to_start() {
    let config = keysmith_server::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: Some("10.0.0.1:80".into()),
        ..keysmith_server::Config::default()
    };
    let e = config.validate().unwrap_err().to_string();
    assert!(e.contains("advertise"), "{e}");
}

/// `leader_ttl` (`serve --leader-ttl-ms`) is the time to live of the leader
/// leases the server takes; one outside 200 ms to a day is refused.
#[tokio::test]
async fn the_leader_lease_lives_as_long_as_the_server_is_told() {
    let a = TestServer::start_with(|c, _| c.leader_ttl = std::time::Duration::from_secs(60)).await;
    let (st, body) = a
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "o", "order": "leader"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    assert_eq!(a.next("o", 1).await, vec![1]);
    let store = keysmith::store::open(&common::sqlite_url(&a.db_path(), ""))
        .await
        .unwrap();
    let group = keysmith::sequence::leader::leader_group("o").unwrap();
    let lease = store.list_workers(&group).await.unwrap();
    let left = lease[0].expires_in_ms.expect("a live lease");
    // The default is 3 s: a lease with more than that left was taken with
    // the server's 60 s.
    assert!(left > 3_000 && left <= 60_000, "{left} ms left");

    let bad = keysmith_server::Config {
        leader_ttl: std::time::Duration::from_millis(50),
        ..keysmith_server::Config::default()
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("leader ttl") && e.contains("200 ms"), "{e}");
}

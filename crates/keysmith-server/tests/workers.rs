//! `GET /v1/workers/{group}`: a group's worker ids as the store holds them,
//! beside the lease routes that make them; what the OpenAPI document says
//! of it is what it answers.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn lease(srv: &TestServer, group: &str, ttl_ms: i64) -> Value {
    let (st, v) = srv
        .call(
            Method::POST,
            &format!("/v1/workers/{group}/lease?ttl_ms={ttl_ms}&max=8"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v
}

async fn list(srv: &TestServer, group: &str) -> Value {
    let (st, v) = srv
        .call(Method::GET, &format!("/v1/workers/{group}"), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[tokio::test]
async fn a_group_lists_held_released_and_expired_worker_ids() {
    let srv = TestServer::start().await;
    // Unknown group: empty, not a 404.
    assert_eq!(
        list(&srv, "g%2F1").await,
        json!({"group": "g/1", "workers": []})
    );
    let a = lease(&srv, "g%2F1", 60_000).await;
    let b = lease(&srv, "g%2F1", 100).await;
    let c = lease(&srv, "g%2F1", 60_000).await;
    lease(&srv, "other", 60_000).await;
    let tok = a["lease"].as_str().unwrap();
    let (st, v) = srv
        .call(
            Method::POST,
            &format!("/v1/workers/g%2F1/lease/{tok}/release"),
            None,
        )
        .await;
    assert_eq!((st, &v["released"]), (StatusCode::OK, &json!(true)), "{v}");

    // b's lease expires by the store's clock: await it in the listing.
    let give_up = Instant::now() + Duration::from_secs(60);
    let (before, l, after) = loop {
        let before = keysmith::ids::wall_ms();
        let l = list(&srv, "g%2F1").await;
        if l["workers"][1]["held"] == false {
            break (before, l, keysmith::ids::wall_ms());
        }
        assert!(Instant::now() < give_up, "b never expired: {l}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let text = l.to_string();
    for t in [&a, &b, &c] {
        assert!(
            !text.contains(t["lease"].as_str().unwrap()),
            "a token in {text}"
        );
    }
    assert_eq!(l["group"], "g/1");
    let w = l["workers"].as_array().unwrap();
    let ids: Vec<_> = w.iter().map(|e| e["worker"].as_i64().unwrap()).collect();
    assert_eq!(ids, [0, 1, 2]);
    for (e, lease) in w.iter().zip([&a, &b, &c]) {
        assert_eq!(
            (&e["fence"], &e["until_ms"]),
            (&lease["fence"], &lease["until_ms"])
        );
    }
    for free in &w[..2] {
        assert_eq!(free["held"], false);
        for k in ["holder", "expires_ms", "expires_in_ms"] {
            assert!(free[k].is_null(), "{k}: {l}");
        }
    }
    let held = &w[2];
    assert_eq!(held["held"], true);
    assert!(
        held["holder"].as_str().unwrap().starts_with("lease/"),
        "{l}"
    );
    let left = held["expires_in_ms"].as_i64().unwrap();
    assert!(0 < left && left <= 60_000, "{l}");
    // expires_ms: the server's clock while it answered, plus the time left.
    let read_at = held["expires_ms"].as_i64().unwrap() - left;
    assert!(before <= read_at && read_at <= after, "{l}");

    // What the document promises is what came back.
    let (_, doc) = srv.call(Method::GET, "/openapi.json", None).await;
    let get = &doc["paths"]["/v1/workers/{group}"]["get"];
    assert_eq!(
        get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/WorkerList"
    );
    let schema = &doc["components"]["schemas"]["WorkerList"];
    let required = |s: &Value| -> BTreeSet<String> {
        s["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(required(schema), keys(&l));
    let item = &schema["properties"]["workers"]["items"];
    assert_eq!(required(item), keys(held));
    assert_eq!(keys(&item["properties"]), keys(held));

    // Bad input: a 400 with the error body.
    let (st, v) = srv.call(Method::GET, "/v1/workers/a%20b", None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "invalid_name", "{v}");
    assert!(v["error"]["message"].as_str().is_some(), "{v}");
    let (st, v) = srv.call(Method::POST, "/v1/workers/g", None).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED, "{v}");
}

#[tokio::test]
async fn listing_needs_the_token() {
    let srv = TestServer::start_with(|c, _| {
        c.token = Some(keysmith_server::Token::new("t0ken-xyz").unwrap());
    })
    .await;
    let res = srv
        .client
        .get(srv.url("/v1/workers/g"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(list(&srv, "g").await, json!({"group": "g", "workers": []}));
}

/// Renew and release with the token in the body (never in a URL): the
/// same answers as the deprecated path forms; a bad body is a 400 that
/// changes nothing; a renewed lease's old token is refused.
#[tokio::test]
async fn leases_renew_and_release_with_the_token_in_the_body() {
    let srv = TestServer::start().await;
    let a = lease(&srv, "tb", 60_000).await;
    let tok = a["lease"].as_str().unwrap().to_owned();
    for bad in [
        json!({}),
        json!({"token": 1}),
        json!({"token": "junk"}),
        json!({"token": tok, "x": 1}),
    ] {
        let (st, v) = srv
            .call(
                Method::POST,
                "/v1/workers/tb/lease/renew",
                Some(bad.clone()),
            )
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {v}");
        let (st, v) = srv
            .call(
                Method::POST,
                "/v1/workers/tb/lease/release",
                Some(bad.clone()),
            )
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    // Nothing changed: worker 0 is still held by a.
    assert_eq!(list(&srv, "tb").await["workers"][0]["held"], true);
    let (st, r) = srv
        .call(
            Method::POST,
            "/v1/workers/tb/lease/renew?ttl_ms=30000",
            Some(json!({"token": tok})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!(r["worker"], a["worker"]);
    let renewed = r["lease"].as_str().unwrap();
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/workers/tb/lease/release",
            Some(json!({"token": renewed})),
        )
        .await;
    assert_eq!((st, &v["released"]), (StatusCode::OK, &json!(true)), "{v}");
    assert_eq!(list(&srv, "tb").await["workers"][0]["held"], false);
    let (_, doc) = srv.call(Method::GET, "/openapi.json", None).await;
    for what in ["renew", "release"] {
        assert!(doc["paths"][format!("/v1/workers/{{group}}/lease/{what}")]["post"].is_object());
        assert_eq!(
            doc["paths"][format!("/v1/workers/{{group}}/lease/{{token}}/{what}")]["post"]["deprecated"],
            true
        );
    }
    srv.stop().await;
}

/// The groups of leader leases (`leader/NAME`) are reserved: a caller with
/// a grant on worker groups cannot take a leader-ordered sequence's lease
/// (and with it the sequence) through the lease route. Refused with a 400
/// that leases nothing.
#[tokio::test]
async fn leader_lease_groups_are_reserved() {
    let srv = TestServer::start().await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/workers/leader%2Forders/lease?max=1",
            None,
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("leader/"),
        "{v}"
    );
    assert_eq!(list(&srv, "leader%2Forders").await["workers"], json!([]));
    srv.stop().await;
}

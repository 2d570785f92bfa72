//! Numbered sequences over HTTP: gap-free numbers with tickets (take,
//! commit, release, refusals that change nothing), periodic formatted
//! numbers from `next`, parse, and bad settings that create nothing.

mod common;

use common::{TestServer, enc};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn create(srv: &TestServer, body: Value) -> (StatusCode, Value) {
    srv.call(Method::POST, "/v1/sequences", Some(body)).await
}

async fn take(srv: &TestServer, name: &str, query: &str) -> (StatusCode, Value) {
    srv.call(
        Method::POST,
        &format!("/v1/sequences/{}/tickets{query}", enc(name)),
        None,
    )
    .await
}

async fn settle(srv: &TestServer, name: &str, ticket: &str, what: &str) -> (StatusCode, Value) {
    srv.call(
        Method::POST,
        &format!("/v1/sequences/{}/tickets/{}/{what}", enc(name), enc(ticket)),
        None,
    )
    .await
}

#[tokio::test]
async fn gapless_numbers_with_tickets() {
    let srv = TestServer::start().await;
    let (st, v) = create(&srv, json!({"name": "g", "gapless": true})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["numbering"]["gapless"], true);
    let (st, a) = take(&srv, "g", "?ttl=30").await;
    assert_eq!(st, StatusCode::CREATED, "{a}");
    assert_eq!(
        (a["value"].clone(), a["n"].clone(), a["period"].clone()),
        (json!(1), json!(1), Value::Null)
    );
    let (_, b) = take(&srv, "g", "").await;
    assert_eq!(b["value"], 2);
    let (ta, tb) = (a["ticket"].as_str().unwrap(), b["ticket"].as_str().unwrap());

    // Refused: someone else's ticket, a forged one, junk; nothing changes.
    let forged = format!("0-1-{}", "0".repeat(32));
    for (ticket, what, status, code) in [
        (tb, "commit", StatusCode::CONFLICT, "ticket_refused"),
        (
            forged.as_str(),
            "release",
            StatusCode::CONFLICT,
            "ticket_refused",
        ),
        (
            "junk",
            "commit",
            StatusCode::BAD_REQUEST,
            "invalid_argument",
        ),
    ] {
        let path_ticket = if ticket == tb {
            ticket.replace("-2-", "-1-")
        } else {
            ticket.to_owned()
        };
        let (st, v) = settle(&srv, "g", &path_ticket, what).await;
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{v}"
        );
    }
    let (st, v) = settle(&srv, "g", ta, "commit").await;
    assert_eq!(
        (st, v["committed"].clone()),
        (StatusCode::OK, json!(1)),
        "{v}"
    );
    let (st, v) = settle(&srv, "g", ta, "commit").await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("committed already"),
        "{v}"
    );
    let (st, v) = settle(&srv, "g", tb, "release").await;
    assert_eq!(
        (st, v["released"].clone()),
        (StatusCode::OK, json!(2)),
        "{v}"
    );
    let (_, c) = take(&srv, "g", "").await;
    assert_eq!(c["value"], 2, "the released number comes back first");

    // next on a gap-free sequence, tickets on an ordinary one, bad ttls.
    let (st, v) = srv.call(Method::POST, "/v1/sequences/g/next", None).await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "wrong_kind");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("tickets"),
        "{v}"
    );
    srv.create("plain", 10).await;
    let (st, v) = take(&srv, "plain", "").await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    let (st, v) = srv
        .call(Method::POST, "/v1/sequences/g/reserve", None)
        .await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("wrong_kind")),
        "{v}"
    );
    for q in ["?ttl=0", "?ttl=x", "?ttl=86401", "?other=1"] {
        let (st, v) = take(&srv, "g", q).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{q}: {v}");
    }
    let (st, _) = take(&srv, "nope", "").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    // The plain sequence still works as before.
    assert_eq!(srv.next("plain", 2).await, vec![1, 2]);
    srv.stop().await;
}

#[tokio::test]
async fn periodic_formatted_numbers_and_parse() {
    let srv = TestServer::start().await;
    let (st, v) = create(
        &srv,
        json!({"name": "inv", "period": "month", "format": "INV-{period}-{n:04}", "gapless": false}),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["numbering"]["period"], "month");
    let (st, v) = srv
        .call(Method::POST, "/v1/sequences/inv/next?count=2", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let values: Vec<&str> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(values.len(), 2);
    let month = &values[0][4..10];
    assert!(
        values[0].starts_with("INV-") && values[0].ends_with("-0001"),
        "{values:?}"
    );
    let (st, p) = srv
        .call(
            Method::POST,
            "/v1/sequences/inv/parse",
            Some(json!({"value": values[1]})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{p}");
    assert_eq!(p, json!({"period": month.parse::<i64>().unwrap(), "n": 2}));
    let (st, p) = srv
        .call(
            Method::POST,
            "/v1/sequences/inv/parse",
            Some(json!({"value": "INV-202613-0001"})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{p}");
    let (st, v) = srv.call(Method::GET, "/v1/sequences/inv", None).await;
    assert_eq!(
        (st, v["numbering"]["template"].clone()),
        (StatusCode::OK, json!("INV-{period}-{n:04}"))
    );
    // Bad settings: 400, nothing created.
    for body in [
        json!({"name": "b", "period": "week"}),
        json!({"name": "b", "period": "day", "format": "X{n}"}),
        json!({"name": "b", "format": "X{period}-{n}"}),
        json!({"name": "b", "format": "{n}{n}"}),
        json!({"name": "b", "format": "a{b}{n}"}),
        json!({"name": "b", "format": ""}),
    ] {
        let (st, v) = create(&srv, body.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {v}");
        let (st, _) = srv.call(Method::GET, "/v1/sequences/b", None).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{body} created b");
    }
    srv.stop().await;
}

/// The commit and release routes that take the ticket in the body (the
/// ticket never in a URL): the same answers as the deprecated path forms,
/// and bad bodies refused with a 400 that changes nothing.
#[tokio::test]
async fn tickets_settle_with_the_ticket_in_the_body() {
    let srv = TestServer::start().await;
    let (st, v) = create(&srv, json!({"name": "b", "gapless": true})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (_, a) = take(&srv, "b", "").await;
    let (_, b) = take(&srv, "b", "").await;
    let (ta, tb) = (a["ticket"].as_str().unwrap(), b["ticket"].as_str().unwrap());
    let body = |what: &str, v: Value| {
        let path = format!("/v1/sequences/b/tickets/{what}");
        let srv = &srv;
        async move { srv.call(Method::POST, &path, Some(v)).await }
    };

    // Bad bodies: no ticket, an unknown field, a number, junk; a 400 each.
    for bad in [
        json!({}),
        json!({"ticket": ta, "extra": 1}),
        json!({"ticket": 7}),
        json!({"ticket": "junk"}),
    ] {
        let (st, v) = body("commit", bad.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    // ... and they changed nothing: a's ticket still commits, once.
    let (st, v) = body("commit", json!({"ticket": ta})).await;
    assert_eq!(
        (st, v["committed"].clone()),
        (StatusCode::OK, json!(1)),
        "{v}"
    );
    let (st, v) = body("commit", json!({"ticket": ta})).await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    let (st, v) = body("release", json!({"ticket": tb})).await;
    assert_eq!(
        (st, v["released"].clone()),
        (StatusCode::OK, json!(2)),
        "{v}"
    );
    let (_, c) = take(&srv, "b", "").await;
    assert_eq!(c["value"], 2, "the released number comes back first");
    // The deprecated path form still works.
    let (st, v) = settle(&srv, "b", c["ticket"].as_str().unwrap(), "commit").await;
    assert_eq!(
        (st, v["committed"].clone()),
        (StatusCode::OK, json!(2)),
        "{v}"
    );
    // Both forms are in the API document; the path forms are deprecated.
    let (_, doc) = srv.call(Method::GET, "/openapi.json", None).await;
    let paths = &doc["paths"];
    for what in ["commit", "release"] {
        assert!(
            paths[format!("/v1/sequences/{{name}}/tickets/{what}")]["post"].is_object(),
            "{what}"
        );
        assert_eq!(
            paths[format!("/v1/sequences/{{name}}/tickets/{{ticket}}/{what}")]["post"]["deprecated"],
            true,
            "{what}"
        );
    }
    srv.stop().await;
}

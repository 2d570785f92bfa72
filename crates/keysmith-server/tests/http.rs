//! The HTTP API against a real server (in this process) on a free port over
//! a real SQLite file.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestServer, enc, json_of, values};
use keysmith::sequence::{self, Sequence};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// 16 clients at once, small blocks so the handle refills often: every value
/// is unique, each client's values increase, a request answered before
/// another was sent got smaller values, and (one server, one handle) the
/// values are exactly 1..=N.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_get_unique_values_in_time_order() {
    let srv = Arc::new(TestServer::start().await);
    srv.create("orders", 7).await;
    let epoch = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..16u64 {
        let srv = srv.clone();
        tasks.push(tokio::spawn(async move {
            let mut log = Vec::new();
            for i in 0..40u64 {
                let count = 1 + (client * 7 + i * 3) % 13;
                let sent = epoch.elapsed();
                let got = srv.next("orders", count as i64).await;
                let answered = epoch.elapsed();
                assert_eq!(got.len() as u64, count);
                log.push((sent, answered, got));
            }
            log
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let log = t.await.unwrap();
        let mine: Vec<i64> = log.iter().flat_map(|l| l.2.clone()).collect();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "a client's values must increase"
        );
        all.extend(log);
    }
    let flat: Vec<i64> = all.iter().flat_map(|l| l.2.clone()).collect();
    let unique: HashSet<i64> = flat.iter().copied().collect();
    assert_eq!(unique.len(), flat.len(), "a value was handed out twice");
    let n = flat.len() as i64;
    assert_eq!(unique, (1..=n).collect(), "one handle: no gaps");

    // Time order: every request sent after another was answered got larger values.
    let mut by_answer: Vec<_> = all
        .iter()
        .map(|(_, a, v)| (*a, *v.last().unwrap()))
        .collect();
    by_answer.sort();
    for (sent, _, v) in &all {
        let before = by_answer.partition_point(|(a, _)| a < sent);
        if let Some(max_before) = by_answer[..before].iter().map(|x| x.1).max() {
            assert!(
                v[0] > max_before,
                "a request sent after {max_before} was served got {}",
                v[0]
            );
        }
    }
}

#[tokio::test]
async fn create_show_list_next_drop() {
    let srv = TestServer::start().await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "inv", "start": 10, "max": 1000, "block": 5})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(v["next"], 10);
    assert_eq!(v["remaining"], 991);
    assert_eq!(v["server"], Value::Null);

    assert_eq!(srv.next("inv", 1).await, vec![10]);
    assert_eq!(srv.next("inv", 3).await, vec![11, 12, 13]);

    let (st, v) = srv.call(Method::GET, "/v1/sequences/inv", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["server"]["served"], 4);
    assert_eq!(v["server"]["last_served"], 13);
    assert_eq!(v["server"]["block"], 5);
    assert!(v["next"].as_i64().unwrap() > 13, "{v}");

    srv.create("a", 1).await;
    let (st, v) = srv.call(Method::GET, "/v1/sequences", None).await;
    assert_eq!(st, StatusCode::OK);
    let names: Vec<&str> = v["sequences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "inv"]);

    let (st, v) = srv.call(Method::DELETE, "/v1/sequences/inv", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["dropped"], "inv");
    let (st, v) = srv.call(Method::POST, "/v1/sequences/inv/next", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");

    // The dropped sequence's handle was closed: a new sequence of the same
    // name starts from its own start, not from the old handle's cache.
    let (st, _) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "inv", "start": 500, "block": 5})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(srv.next("inv", 1).await, vec![500]);
    srv.stop().await;
}

/// Names with '/', '#', '<', '&' and quotes work in paths when percent-encoded.
#[tokio::test]
async fn url_like_names() {
    let srv = TestServer::start().await;
    let name = r#"example.com/a#main<&"'"#;
    srv.create(name, 10).await;
    assert_eq!(srv.next(&enc(name), 2).await, vec![1, 2]);
    let (st, v) = srv
        .call(Method::GET, &format!("/v1/sequences/{}", enc(name)), None)
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["name"], name);
    let (st, _) = srv
        .call(
            Method::DELETE,
            &format!("/v1/sequences/{}", enc(name)),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK);
}

/// Values above 2^53 come back exact, as numbers and with `as=string`.
#[tokio::test]
async fn large_values_as_strings() {
    let srv = TestServer::start().await;
    let start: i64 = (1 << 53) + 1;
    let (st, _) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "big", "start": start})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(srv.next("big", 1).await, vec![start]);
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences/big/next?count=2&as=string",
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        v,
        json!({"values": [(start + 1).to_string(), (start + 2).to_string()]})
    );
    let (st, v) = srv
        .call(Method::POST, "/v1/sequences/big/next?as=number", None)
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(values(&v), vec![start + 3]);
}

/// Missing, wrong and right token; Basic with the token as password (never
/// asked for); the probes open, `/healthz` not; a refused request takes no
/// value.
#[tokio::test]
async fn auth() {
    let srv = TestServer::start_with(|c, _| {
        c.token = Some(keysmith_server::Token::new("t0ken-xyz-0123456789").unwrap());
    })
    .await;
    srv.create("s", 10).await;
    let url = srv.url("/v1/sequences/s/next");

    let res = srv.client.post(&url).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(
        res.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let (_, v) = json_of(res).await;
    assert_eq!(v["error"]["code"], "unauthorized");

    for wrong in [
        "t0ken-xyz-012345678",
        "t0ken-xyz-0123456789z",
        "T0KEN-XYZ-0123456789",
        "",
    ] {
        let res = srv
            .client
            .post(&url)
            .header("authorization", format!("Bearer {wrong}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{wrong:?}");
    }
    let res = srv
        .client
        .post(&url)
        .header("authorization", "Token t0ken-xyz-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);

    // Every route but the probes needs the token, unknown ones too.
    for path in [
        "/",
        "/v1/status",
        "/metrics",
        "/openapi.json",
        "/v1/sequences",
        "/nope",
        "/healthz",
    ] {
        let res = srv.client.get(srv.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    for path in ["/livez", "/readyz"] {
        let res = srv.client.get(srv.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
    }
    // A browser opening the page gets no Basic prompt (it would cache the
    // token for any page to use).
    let res = srv.client.get(srv.url("/")).send().await.unwrap();
    assert!(
        res.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );

    // Nothing was taken by the refused requests.
    let res = srv
        .client
        .post(&url)
        .bearer_auth("t0ken-xyz-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(values(&json_of(res).await.1), vec![1]);
    let res = srv
        .client
        .post(&url)
        .basic_auth("anyone", Some("t0ken-xyz-0123456789"))
        .send()
        .await
        .unwrap();
    assert_eq!(values(&json_of(res).await.1), vec![2]);
    let res = srv
        .client
        .post(&url)
        .basic_auth("anyone", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

/// The stored state of every sequence, to compare before and after.
async fn snapshot(srv: &TestServer) -> Vec<(String, i64, i64, i64, u64)> {
    let store = keysmith::store::open(&common::sqlite_url(&srv.db_path(), ""))
        .await
        .unwrap();
    sequence::list(&*store)
        .await
        .unwrap()
        .into_iter()
        .map(|i| {
            (
                i.row.name,
                i.row.next,
                i.row.max,
                i.row.block,
                i.row.version,
            )
        })
        .collect()
}

/// Every bad input gets its status and code, and changes nothing.
#[tokio::test]
async fn bad_input_gets_its_status_and_changes_nothing() {
    let srv = TestServer::start_with(|c, _| {
        c.max_count = 50;
        c.body_limit = 1024;
    })
    .await;
    srv.create("s", 10).await;
    let (st, _) = srv
        .call(
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": "tiny", "start": 7, "max": 7})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(srv.next("tiny", 1).await, vec![7]);
    // A handle is open on "s" with a cached block: later values prove the
    // bad requests took none from it either.
    assert_eq!(srv.next("s", 1).await, vec![1]);
    let before = snapshot(&srv).await;

    let long = "n".repeat(513);
    let big_body = json!({"name": "x".repeat(2000)});
    let cases: Vec<(Method, String, Option<Value>, u16, &str)> = vec![
        // 400
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": "a b"})),
            400,
            "invalid_name",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": ""})),
            400,
            "invalid_name",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"nme": "x"})),
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": "x", "blok": 3})),
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": "x", "start": "1"})),
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!(["x"])),
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": "x", "start": 9, "max": 3})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": "x", "start": -1})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": "x", "block": 0})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?count=0".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?count=-3".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?count=abc".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?count=1.5".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?count=".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?count=99999999999999999999".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?as=hex".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?cout=2".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::POST,
            format!("/v1/sequences/{long}/next"),
            None,
            400,
            "invalid_name",
        ),
        (
            Method::POST,
            "/v1/sequences/a%20b/next".into(),
            None,
            400,
            "invalid_name",
        ),
        (
            Method::POST,
            "/v1/sequences/%FF/next".into(),
            None,
            400,
            "bad_request",
        ),
        (
            Method::GET,
            "/v1/sequences/a%09b".into(),
            None,
            400,
            "invalid_name",
        ),
        // 404
        (
            Method::POST,
            "/v1/sequences/nope/next".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::GET,
            "/v1/sequences/nope".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::DELETE,
            "/v1/sequences/nope".into(),
            None,
            404,
            "not_found",
        ),
        (Method::GET, "/v2/sequences".into(), None, 404, "no_route"),
        // 405
        (
            Method::GET,
            "/v1/sequences/s/next".into(),
            None,
            405,
            "method_not_allowed",
        ),
        // 409
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": "s", "block": 99})),
            409,
            "already_exists",
        ),
        (
            Method::POST,
            "/v1/sequences/tiny/next".into(),
            None,
            409,
            "exhausted",
        ),
        // 413
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(big_body),
            413,
            "too_large",
        ),
        (
            Method::POST,
            "/v1/sequences/s/next?count=51".into(),
            None,
            413,
            "too_large",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let (st, v) = srv.call(method.clone(), &path, body.clone()).await;
        assert_eq!(st.as_u16(), status, "{method} {path} {body:?}: {v}");
        assert_eq!(v["error"]["code"], code, "{method} {path} {body:?}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.len() > 10, "{method} {path}: message {msg:?}");
    }
    // A 404 names what looks alike.
    let (_, v) = srv.call(Method::POST, "/v1/sequences/ss/next", None).await;
    assert_eq!(v["error"]["similar"], json!(["s"]));

    assert_eq!(
        snapshot(&srv).await,
        before,
        "a bad request changed the store"
    );
    assert_eq!(
        srv.next("s", 2).await,
        vec![2, 3],
        "a bad request took a value"
    );
    assert_eq!(srv.next("s", 50).await.len(), 50);
}

/// A 503 with Retry-After and error `code`.
async fn assert_503(res: reqwest::Response, code: &str) {
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "1");
    let (_, v) = json_of(res).await;
    assert_eq!(v["error"]["code"], code, "{v}");
}

/// A write lock held by another process: past the store's busy timeout the
/// store is unavailable (503, Retry-After); a route that takes no values
/// held up past the request timeout gets a 503 `timeout`; so does a `next`,
/// at its deadline, while its reservation goes on (cutting it off would drop
/// the block the store commits once the lock goes): the value it took then
/// is skipped, and no value is handed out twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_unavailable_and_timeout_are_503_with_retry_after() {
    for (busy_ms, timeout_ms) in [(50, 10_000), (20_000, 200)] {
        let srv = TestServer::start_with(|c, db| {
            c.store_url = common::sqlite_url(db, &format!("?busy_timeout_ms={busy_ms}"));
            c.request_timeout = Duration::from_millis(timeout_ms);
        })
        .await;
        srv.create("s", 1).await;
        assert_eq!(srv.next("s", 1).await, vec![1]);

        let lock = rusqlite::Connection::open(srv.db_path()).unwrap();
        lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
        if busy_ms < timeout_ms {
            let res = srv
                .req(Method::POST, "/v1/sequences/s/next")
                .send()
                .await
                .unwrap();
            assert_503(res, "unavailable").await;
            lock.execute_batch("ROLLBACK").unwrap();
            // The failed reservation took nothing.
            assert_eq!(srv.next("s", 1).await, vec![2]);
        } else {
            let res = srv
                .req(Method::POST, "/v1/sequences")
                .json(&json!({"name": "t"}))
                .send()
                .await
                .unwrap();
            assert_503(res, "timeout").await;

            // A `next` waiting on the lock answers at its deadline too; its
            // reservation goes on in the background.
            let res = srv
                .req(Method::POST, "/v1/sequences/s/next")
                .send()
                .await
                .unwrap();
            assert_503(res, "timeout").await;
            lock.execute_batch("ROLLBACK").unwrap();
            // The next request waits for that reservation (or makes its
            // own): one of the two values is skipped, never handed out, and
            // none is handed out twice.
            let after = srv.next("s", 1).await;
            assert!(after == vec![2] || after == vec![3], "{after:?}");
        }
        let url = common::sqlite_url(&srv.db_path(), "");
        let _dir = srv.stop().await;
        let store = keysmith::store::open(&url).await.unwrap();
        assert_eq!(
            sequence::describe(&*store, "s").await.unwrap().next,
            if busy_ms < timeout_ms { 3 } else { 4 }
        );
    }
}

/// An optimistic reservation that loses every attempt is a 503 contention
/// with Retry-After; the next request succeeds from the row the conflict
/// returned.
#[tokio::test]
async fn contention_is_503_with_retry_after() {
    let srv = TestServer::start_with(|c, _| {
        c.strategy = keysmith::sequence::Strategy::Optimistic;
        c.retry_budget = Some(std::time::Duration::ZERO);
    })
    .await;
    srv.create("s", 1).await;
    assert_eq!(srv.next("s", 1).await, vec![1]);
    // Another writer moves the row under the server's remembered version.
    let store = keysmith::store::open(&common::sqlite_url(&srv.db_path(), ""))
        .await
        .unwrap();
    let other = Sequence::builder()
        .store(store)
        .name("s")
        .block(1)
        .build()
        .await
        .unwrap();
    assert_eq!(other.next().await.unwrap(), 2);

    let res = srv
        .req(Method::POST, "/v1/sequences/s/next")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "1");
    assert_eq!(json_of(res).await.1["error"]["code"], "contention");
    assert_eq!(srv.next("s", 1).await, vec![3]);
}

/// A graceful stop closes the handle: the unused tail goes back, so the
/// stored next value is one past the last value served.
#[tokio::test]
async fn graceful_stop_hands_the_tail_back() {
    let srv = TestServer::start().await;
    srv.create("s", 1000).await;
    let got = srv.next("s", 17).await;
    assert_eq!(*got.last().unwrap(), 17);
    let url = common::sqlite_url(&srv.db_path(), "");
    let _dir = srv.stop().await;
    let store = keysmith::store::open(&url).await.unwrap();
    assert_eq!(sequence::describe(&*store, "s").await.unwrap().next, 18);
}

#[tokio::test]
async fn metrics_count_values_and_refills() {
    let srv = TestServer::start().await;
    srv.create("m", 10).await;
    for _ in 0..5 {
        srv.next("m", 4).await;
    }
    let _ = srv.call(Method::POST, "/v1/sequences/zz/next", None).await;
    let res = srv.req(Method::GET, "/metrics").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = res.text().await.unwrap();
    let metric = |line: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(line))
            .unwrap_or_else(|| panic!("no {line} in\n{text}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(
        metric(r#"keysmith_values_total{kind="sequence",name="m"}"#),
        20.0
    );
    assert_eq!(
        metric(r#"keysmith_allocation_requests_total{kind="sequence",name="m"}"#),
        5.0
    );
    assert_eq!(
        metric(r#"keysmith_allocation_seconds_count{kind="sequence",name="m"}"#),
        5.0
    );
    assert!(metric(r#"keysmith_sequence_refills_total{name="m"}"#) >= 2.0);
    assert_eq!(
        metric(r#"keysmith_sequence_conflicts_total{name="m"}"#),
        0.0
    );
    // Adaptive: at least the sequence's own block.
    assert!(metric(r#"keysmith_sequence_block_size{name="m"}"#) >= 10.0);
    assert_eq!(
        metric(r#"keysmith_http_errors_total{code="not_found"}"#),
        1.0
    );
}

#[tokio::test]
async fn healthz_livez_status_and_openapi() {
    let srv = TestServer::start().await;
    let (st, v) = srv.call(Method::GET, "/healthz", None).await;
    assert_eq!(
        (st, v),
        (StatusCode::OK, json!({"status": "ok", "store": "ok"}))
    );
    let (st, v) = srv.call(Method::GET, "/livez", None).await;
    assert_eq!((st, v), (StatusCode::OK, json!({"status": "ok"})));

    let name = r#"<b>x&"y'</b>"#;
    srv.create(name, 10).await;
    srv.next(&enc(name), 3).await;
    let (st, v) = srv.call(Method::GET, "/v1/status", None).await;
    assert_eq!(st, StatusCode::OK);
    let s = &v["sequences"][0];
    assert_eq!(s["name"], name);
    assert_eq!(s["last_served"], "3");
    assert_eq!(s["remaining"], (i64::MAX - 1 - 10).to_string(), "{s}");

    let res = srv.req(Method::GET, "/").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = res.text().await.unwrap();
    assert!(
        html.contains("&lt;b&gt;x&amp;&quot;y&#39;&lt;/b&gt;"),
        "{html}"
    );
    assert!(!html.contains(name));

    // Every route the document lists answers for every method it lists.
    let (st, doc) = srv.call(Method::GET, "/openapi.json", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 9);
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            let m = match method.as_str() {
                "get" => Method::GET,
                "post" => Method::POST,
                "delete" => Method::DELETE,
                _ => continue, // "parameters"
            };
            let concrete = path.replace("{name}", "nothing-here");
            let (st, v) = srv.call(m.clone(), &concrete, None).await;
            assert!(
                st != StatusCode::METHOD_NOT_ALLOWED && v["error"]["code"] != "no_route",
                "{m} {path}: {st} {v}"
            );
        }
    }
}

#[test]
fn non_loopback_without_token_refuses_to_start() {
    let mut c = keysmith_server::Config {
        listen: "0.0.0.0:7878".parse().unwrap(),
        ..Default::default()
    };
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("without a token") && e.contains("--insecure-no-auth"),
        "{e}"
    );
    c.insecure_no_auth = true;
    c.validate().unwrap();
    c.insecure_no_auth = false;
    c.token = Some(keysmith_server::Token::new("x").unwrap());
    c.validate().unwrap();
    c.listen = "[::1]:7878".parse().unwrap();
    c.token = None;
    c.validate().unwrap();
    c.max_count = 0;
    assert!(c.validate().is_err());
}

/// Refills that come faster than the target make a handle's block grow (up
/// to the maximum), visible in `show` and on the status page; a strict
/// sequence stays strict.
#[tokio::test]
async fn adaptive_blocks_grow_under_load_and_show() {
    let srv = TestServer::start_with(|c, _| {
        c.adaptive = Some(keysmith::sequence::AdaptivePolicy {
            max: 160,
            // Far longer than this test runs: every refill counts as fast.
            target: Duration::from_secs(600),
        });
    })
    .await;
    srv.create("grow", 10).await;
    srv.create("strict", 1).await;
    let mut all = Vec::new();
    for _ in 0..40 {
        all.extend(srv.next("grow", 10).await);
        srv.next("strict", 1).await;
    }
    assert_eq!(all, (1..=400).collect::<Vec<_>>());
    let (_, v) = srv.call(Method::GET, "/v1/sequences/grow", None).await;
    assert_eq!(v["server"]["block"], 160, "{v}");
    assert_eq!(v["block"], 10, "the stored default block is unchanged");
    let (_, v) = srv.call(Method::GET, "/v1/sequences/strict", None).await;
    assert_eq!(v["server"]["block"], 1, "{v}");
    assert_eq!(
        v["server"]["refills"], 40,
        "strict: one reservation a value"
    );
    let (_, v) = srv.call(Method::GET, "/v1/status", None).await;
    assert_eq!(v["sequences"][0]["name"], "grow");
    assert_eq!(v["sequences"][0]["block"], 160);
}

/// A client that never finishes its request does not keep a stopping server
/// alive: it stops after the request timeout plus a grace period, and still
/// hands the tail back.
#[tokio::test]
async fn stop_does_not_wait_for_a_half_sent_request_forever() {
    use tokio::io::AsyncWriteExt;
    let srv = TestServer::start_with(|c, _| c.request_timeout = Duration::from_millis(100)).await;
    srv.create("s", 100).await;
    assert_eq!(srv.next("s", 2).await, vec![1, 2]);
    let mut stuck = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    stuck
        .write_all(b"POST /v1/sequences/s/next HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let url = common::sqlite_url(&srv.db_path(), "");
    // A guard against hanging forever, not a timing assertion.
    let _dir = tokio::time::timeout(Duration::from_secs(120), srv.stop())
        .await
        .expect("the server never stopped");
    let store = keysmith::store::open(&url).await.unwrap();
    assert_eq!(sequence::describe(&*store, "s").await.unwrap().next, 3);
    drop(stuck);
}

/// `PATCH /v1/sequences/{name}` alters; a change the row does not allow is a
/// 400 that changes nothing; the server's handle goes on without a repeat.
#[tokio::test]
async fn alter_by_patch() {
    let srv = TestServer::start().await;
    srv.create("inv", 1).await;
    assert_eq!(srv.next("inv", 2).await, vec![1, 2]);
    let (st, v) = srv
        .call(
            Method::PATCH,
            "/v1/sequences/inv",
            Some(json!({"next": 100, "block": 3})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(
        (v["next"].as_i64(), v["block"].as_i64()),
        (Some(100), Some(3))
    );
    // The server's handle still holds the rest of its block (values below
    // 100 reserved before the change), then continues at 100.
    let got = srv.next("inv", 200).await;
    let mut all: Vec<i64> = vec![1, 2];
    all.extend(&got);
    let unique: std::collections::BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "a value twice: {all:?}");
    assert!(
        got.iter().all(|x| !(3..100).contains(x)),
        "a skipped value was handed out: {got:?}"
    );
    let (_, before) = srv.call(Method::GET, "/v1/sequences/inv", None).await;
    for body in [
        json!({"next": 5}),
        json!({"max": 1}),
        json!({"block": 0}),
        json!({}),
        json!({"next": "x"}),
        json!({"nxt": 5}),
        json!({"next": null, "failover_skip": null}),
    ] {
        let (st, v) = srv
            .call(Method::PATCH, "/v1/sequences/inv", Some(body.clone()))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {v}");
    }
    let (st, _) = srv
        .call(
            Method::PATCH,
            "/v1/sequences/nope",
            Some(json!({"next": 5})),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, after) = srv.call(Method::GET, "/v1/sequences/inv", None).await;
    assert_eq!(after["next"], before["next"]);
    assert_eq!(after["version"], before["version"]);
    // The 98 values skipped are counted, not lost; no rate yet, so no runway.
    assert_eq!(after["skipped"], 97, "{after}");
    assert!(after["runway_seconds"].is_null(), "{after}");
    assert!(after["unaccounted"].as_i64().unwrap() >= 0, "{after}");
    let metrics = srv
        .req(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("keysmith_sequence_unaccounted_values{name=\"inv\"}"),
        "{metrics}"
    );
    // A null field is an absent one (the OpenAPI schema says so): it keeps
    // the current value.
    let (st, v) = srv
        .call(
            Method::PATCH,
            "/v1/sequences/inv",
            Some(json!({"next": null, "max": null, "block": 4})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!((&v["next"], &v["max"]), (&after["next"], &after["max"]));
    assert_eq!(v["block"], 4, "{v}");
    srv.stop().await;
}

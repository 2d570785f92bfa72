//! The service under hostile and careless clients, over real SQLite files:
//! a pool request past its deadline answers every number it took; idle and
//! trickling connections beyond the cap do not starve the others; errors
//! hyper answers by itself are JSON; a malformed Authorization header or a
//! duplicate JSON key is refused; `as` is checked before `count`. Every
//! "a failed request changes nothing" is checked in the store afterwards.

mod common;

use std::time::Duration;

use common::{TestServer, json_of, values};
use keysmith::{pool, sequence};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The store of a server, opened beside it.
async fn store_of(srv: &TestServer) -> std::sync::Arc<dyn keysmith::store::Store> {
    keysmith::store::open(&common::sqlite_url(&srv.db_path(), ""))
        .await
        .unwrap()
}

/// Every number below its residue's member was served: no hole.
async fn assert_served_exactly(
    srv: &TestServer,
    name: &str,
    start: i64,
    size: i64,
    served: &[i64],
) {
    let store = store_of(srv).await;
    let members = pool::members(&*store, name).await.unwrap();
    let holes = keysmith_testsupport::pool_holes(start, size, served, &members);
    assert!(
        holes.is_empty(),
        "numbers taken but never served: {holes:?}"
    );
    let info = pool::describe(&*store, name).await.unwrap();
    assert_eq!(info.taken, served.len() as i64);
}

/// A pool request that cannot finish within the request timeout (SQLite
/// commits each take) stops a little before it and answers with every
/// number it took, marked partial; the pool's members show that nothing
/// else was taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_request_past_its_deadline_answers_every_number_it_took() {
    let srv = TestServer::start_with(|c, _| c.request_timeout = Duration::from_millis(300)).await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "p", "size": 50})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, v) = srv
        .call(Method::POST, "/v1/pools/p/next?count=100000", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let got = values(&v);
    assert!(!got.is_empty() && got.len() < 100_000, "{}", got.len());
    assert_eq!(v["partial"]["reason"], "deadline", "{}", v["partial"]);
    assert_eq!(v["partial"]["requested"], 100_000);
    assert_served_exactly(&srv, "p", 1, 50, &got).await;

    // A request that finishes is not partial.
    let (st, v) = srv
        .call(Method::POST, "/v1/pools/p/next?count=3", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert!(v.get("partial").is_none(), "{v}");
    let mut all = got;
    all.extend(values(&v));
    assert_served_exactly(&srv, "p", 1, 50, &all).await;
}

/// A pool with fewer numbers left than asked for answers with those left,
/// marked partial with the reason; the next request, with nothing left,
/// fails and takes nothing.
#[tokio::test]
async fn a_pool_near_its_maximum_answers_what_is_left() {
    let srv = TestServer::start().await;
    let start = i64::MAX - 10;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "end", "start": start, "size": 3})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, v) = srv
        .call(Method::POST, "/v1/pools/end/next?count=20", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let got = values(&v);
    // Members may be swapped while member + 3 fits: 8 numbers in all.
    assert_eq!(got.len(), 8, "{v}");
    assert_eq!(v["partial"]["reason"], "exhausted", "{v}");
    assert_served_exactly(&srv, "end", start, 3, &got).await;

    let (st, v) = srv.call(Method::POST, "/v1/pools/end/next", None).await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "exhausted");
    assert_served_exactly(&srv, "end", start, 3, &got).await;
}

/// `as` is checked before `count`: a bad `as` with a count over the limit
/// is a 400, not a 413; neither takes a value.
#[tokio::test]
async fn as_is_checked_before_count() {
    let srv = TestServer::start_with(|c, _| c.max_count = 10).await;
    srv.create("s", 5).await;
    for path in [
        "/v1/sequences/s/next?count=11&as=bogus",
        "/v1/pools/s/next?count=11&as=bogus",
        "/v1/counters/next?count=11&as=bogus",
    ] {
        let (st, v) = srv.call(Method::POST, path, None).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{path}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("as must be"),
            "{v}"
        );
    }
    let (st, _) = srv
        .call(
            Method::POST,
            "/v1/sequences/s/next?count=11&as=string",
            None,
        )
        .await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
    let store = store_of(&srv).await;
    assert_eq!(sequence::describe(&*store, "s").await.unwrap().next, 1);
}

/// Reads what the server sends until it closes the connection; `None` if
/// it closed it with an error (a reset).
async fn read_to_close(conn: &mut TcpStream) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match conn.read_to_end(&mut out).await {
        Ok(_) => Some(out),
        Err(_) => None,
    }
}

/// More idle and trickling connections than the cap: the server closes
/// them (header and idle timeouts) and `/healthz` and `next` still answer;
/// every attacker's connection ends closed by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_trickling_connections_beyond_the_cap_do_not_starve_others() {
    const CAP: usize = 4;
    let srv = TestServer::start_with(|c, _| {
        c.max_connections = CAP;
        c.header_read_timeout = Duration::from_millis(300);
        c.idle_timeout = Duration::from_millis(300);
    })
    .await;
    srv.create("s", 10).await;
    assert_eq!(srv.next("s", 2).await, vec![1, 2]);

    // Idle: connect and send nothing.
    let mut idle = Vec::new();
    for _ in 0..3 * CAP {
        idle.push(TcpStream::connect(srv.addr).await.unwrap());
    }
    // Trickling: a byte of a request head now and then, never the end.
    let mut trickling = Vec::new();
    for i in 0..3 * CAP {
        let mut conn = TcpStream::connect(srv.addr).await.unwrap();
        trickling.push(tokio::spawn(async move {
            let head = b"POST /v1/sequences/s/next HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
            let mut sent = 0usize;
            loop {
                // The pace of a slow client, not a synchronisation.
                tokio::time::sleep(Duration::from_millis(50 + i as u64)).await;
                let byte = head.get(sent).copied().unwrap_or(b'a');
                if conn.write_all(&[byte]).await.is_err() {
                    return sent;
                }
                sent += 1;
                // The server closed it: a read ends.
                let mut buf = [0u8; 1024];
                if let Ok(Ok(0) | Err(_)) =
                    tokio::time::timeout(Duration::ZERO, conn.read(&mut buf)).await
                {
                    return sent;
                }
            }
        }));
    }

    // A guard against hanging forever (what a server without the timeouts
    // does here), not a timing assertion.
    let guarded = tokio::time::timeout(Duration::from_secs(120), async {
        // Fresh clients still get answers (they queue behind the attackers
        // until the timeouts close them).
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let res = client.get(srv.url("/healthz")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let res = client
            .post(srv.url("/v1/sequences/s/next?count=3"))
            .send()
            .await
            .unwrap();
        let (st, v) = json_of(res).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(values(&v), vec![3, 4, 5]);

        // Every idle connection is closed by the server, having been sent
        // nothing; every trickler finds its connection closed.
        for mut conn in idle {
            if let Some(bytes) = read_to_close(&mut conn).await {
                assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
            }
        }
        for t in trickling {
            t.await.unwrap();
        }
    });
    guarded
        .await
        .expect("starved: the server never answered or never closed the attackers");
    let _dir = srv.stop().await;
}

/// Sends raw bytes on a fresh connection and returns the status and the
/// JSON body of the answer.
async fn raw(srv: &TestServer, request: &[u8]) -> (u16, Value) {
    let mut conn = TcpStream::connect(srv.addr).await.unwrap();
    conn.write_all(request).await.unwrap();
    let bytes = read_to_close(&mut conn)
        .await
        .expect("a reset, not an answer");
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {text:?}"));
    let status = head[9..12].parse().unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    (status, v)
}

/// Request heads hyper refuses by itself (a NUL in a header, headers too
/// large, a garbled request line) get JSON error bodies like every other
/// error, and take nothing.
#[tokio::test]
async fn errors_from_bad_request_heads_are_json() {
    let srv = TestServer::start().await;
    srv.create("s", 10).await;
    let (st, v) = raw(
        &srv,
        b"POST /v1/sequences/s/next HTTP/1.1\r\nHost: localhost\r\nX-Bad: a\0b\r\n\r\n",
    )
    .await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["code"], "bad_request");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("NUL"),
        "{v}"
    );

    let mut big = b"POST /v1/sequences/s/next HTTP/1.1\r\nHost: localhost\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(
        b'a',
        keysmith_server::MAX_HEAD_BYTES + 1,
    ));
    big.extend_from_slice(b"\r\n\r\n");
    let (st, v) = raw(&srv, &big).await;
    assert_eq!(st, 431, "{v}");
    assert_eq!(v["error"]["code"], "headers_too_large");

    let (st, v) = raw(&srv, b"POST /v1/sequences/s/next HTTP/9.9\r\n\r\n").await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["code"], "bad_request");

    // Nothing was reserved: the refused requests never reached a handler.
    let store = store_of(&srv).await;
    assert_eq!(sequence::describe(&*store, "s").await.unwrap().next, 1);
    assert_eq!(
        srv.call(Method::GET, "/v1/sequences/s", None).await.1["server"],
        Value::Null
    );

    // A good request on a raw connection still answers as before.
    let (st, v) = raw(
        &srv,
        b"POST /v1/sequences/s/next HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(values(&v), vec![1], "a refused request took a value");
}

/// An Authorization header that is not ASCII is a 401 saying the header is
/// malformed (not that the server needs a token); so is an unknown scheme.
/// Neither takes a value.
#[tokio::test]
async fn a_malformed_authorization_header_is_named() {
    let srv = TestServer::start_with(|c, _| {
        c.token = Some(keysmith_server::Token::new("s3cret").unwrap());
    })
    .await;
    srv.create("s", 10).await;
    for value in [
        &b"Bearer s3cr\xc3\xa9t"[..],
        b"Token s3cret",
        b"Basic !!!",
        b"s3cret",
    ] {
        let res = srv
            .client
            .post(srv.url("/v1/sequences/s/next"))
            .header(
                "authorization",
                reqwest::header::HeaderValue::from_bytes(value).unwrap(),
            )
            .send()
            .await
            .unwrap();
        let (st, v) = json_of(res).await;
        assert_eq!(st, StatusCode::UNAUTHORIZED, "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("Authorization header is malformed"), "{msg}");
    }
    let res = srv
        .client
        .post(srv.url("/v1/sequences/s/next"))
        .send()
        .await
        .unwrap();
    let (st, v) = json_of(res).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs a token"),
        "{v}"
    );
    let store = store_of(&srv).await;
    assert_eq!(sequence::describe(&*store, "s").await.unwrap().next, 1);
}

/// A pool larger than the server creates is a 413 and creates nothing; the
/// limit is the one `/openapi.json` states.
#[tokio::test]
async fn a_pool_over_the_size_limit_is_413() {
    let srv = TestServer::start_with(|c, _| c.max_pool_size = 40).await;
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "p", "size": 41})),
        )
        .await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    let (_, doc) = srv.call(Method::GET, "/openapi.json", None).await;
    assert_eq!(
        doc["components"]["schemas"]["CreatePool"]["properties"]["size"]["maximum"],
        40
    );
    let store = store_of(&srv).await;
    assert!(pool::list(&*store).await.unwrap().is_empty());
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "p", "size": 40})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
}

/// A JSON body with a key twice is a 400 naming the key, and creates
/// nothing.
#[tokio::test]
async fn a_json_key_given_twice_is_refused() {
    let srv = TestServer::start().await;
    for (path, body) in [
        ("/v1/sequences", r#"{"name":"a","name":"b"}"#),
        ("/v1/pools", r#"{"name":"p","size":3,"size":4}"#),
    ] {
        let res = srv.req(Method::POST, path).body(body).send().await.unwrap();
        let (st, v) = json_of(res).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("appears twice"), "{msg}");
    }
    let store = store_of(&srv).await;
    assert!(sequence::list(&*store).await.unwrap().is_empty());
    assert!(pool::list(&*store).await.unwrap().is_empty());
}

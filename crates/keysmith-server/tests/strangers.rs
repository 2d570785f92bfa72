//! Strangers are bounded per client address: connections one address
//! holds, failed authentications (then a 429 with `Retry-After`, audited
//! once), connections that only ever failed to authenticate closed as soon
//! as idle ones before a first request, and `/healthz` (a store ping) only
//! for principals. Test traffic comes from 127.0.0.1 and, to be another
//! address, from 127.0.0.2 (Linux routes all of 127/8 to the loopback).

mod common;
mod edge;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use common::{TestServer, json_of};
use edge::{TOKEN, audit_lines, store_state, token_server};
use reqwest::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A guard against a hang (what the old code does here), not a timing
/// assertion: each awaited condition comes long before it.
const HANG: Duration = Duration::from_secs(60);

async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(from.parse().unwrap(), 0)).unwrap();
    s.connect(to).await.unwrap()
}

/// Whether the server closes `s` (end of stream or reset) before it
/// answers anything.
async fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(HANG, s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_hold_every_connection() {
    let srv = TestServer::start_with(|c, _| {
        c.max_connections = 4;
        c.max_connections_per_ip = 2;
        // Idle sockets are not closed by the timeouts during the test.
        c.header_read_timeout = Duration::from_secs(600);
        c.idle_timeout = Duration::from_secs(600);
    })
    .await;
    // Two idle sockets from 127.0.0.2 are held; the next ones are closed
    // at once.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(connect_from("127.0.0.2", srv.addr).await);
    }
    for _ in 0..4 {
        let mut s = connect_from("127.0.0.2", srv.addr).await;
        assert!(
            closed_by_server(&mut s).await,
            "a connection over the cap stayed open"
        );
    }
    // A real client from another address is served.
    let client = reqwest::Client::builder()
        .local_address(Some("127.0.0.1".parse::<IpAddr>().unwrap()))
        .pool_max_idle_per_host(0)
        .timeout(HANG)
        .build()
        .unwrap();
    let res = client.get(srv.url("/v1/sequences")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // The held sockets still work.
    let s = &mut held[0];
    s.write_all(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_past_its_failed_authentications_is_throttled() {
    let srv = token_server(|c| c.auth_failures_per_ip = 5).await;
    srv.create("s", 10).await;
    let before = store_state(&srv.db_path());
    for _ in 0..5 {
        let res = srv
            .client
            .post(srv.url("/v1/sequences/s/next"))
            .bearer_auth("wrong-token-0123456789")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    // Now every request of that address, the right token too, gets a 429.
    for token in ["wrong-token-0123456789", TOKEN, TOKEN] {
        let res = srv
            .client
            .post(srv.url("/v1/sequences/s/next"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let after: u64 = res.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&after), "{after}");
        let (_, v) = json_of(res).await;
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("retry after"),
            "{v}"
        );
    }
    assert_eq!(store_state(&srv.db_path()), before);
    // The probes stay open; another address is not throttled.
    let res = srv.client.get(srv.url("/livez")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let other = reqwest::Client::builder()
        .local_address(Some("127.0.0.2".parse::<IpAddr>().unwrap()))
        .build()
        .unwrap();
    let res = other
        .post(srv.url("/v1/sequences/s/next"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // Audited once for the window.
    let throttled: Vec<_> = audit_lines(&srv)
        .into_iter()
        .filter(|l| l["status"] == 429)
        .collect();
    assert_eq!(throttled.len(), 1, "{throttled:?}");
    assert!(
        throttled[0]["peer"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
}

/// Over HTTP/2 (which hyper's HTTP/1 header timer does not cover), a
/// connection whose requests were all refused for want of a credential is
/// closed after the header timeout, not kept for the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_that_never_authenticated_is_closed_when_idle() {
    let srv = token_server(|c| {
        // Long enough for the first request to arrive on a busy machine.
        c.header_read_timeout = Duration::from_secs(3);
        c.idle_timeout = Duration::from_secs(600);
    })
    .await;
    let tcp = TcpStream::connect(srv.addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(conn);
    let req = hyper::Request::get(srv.url("/v1/sequences"))
        .body(String::new())
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    drop(res);
    // The server ends the connection.
    assert!(
        tokio::time::timeout(HANG, conn).await.is_ok(),
        "the stranger's HTTP/2 connection stayed open"
    );
}

#[tokio::test]
async fn healthz_answers_principals_only() {
    let srv = token_server(|_| {}).await;
    let res = srv.client.get(srv.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let (st, v) = srv.call(Method::GET, "/healthz", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["store"], "ok");
    for open in keysmith_server::OPEN_PATHS {
        let res = srv.client.get(srv.url(open)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{open}");
    }
    assert!(!keysmith_server::OPEN_PATHS.contains(&"/healthz"));
    // Without a token, everyone is a principal.
    let srv = TestServer::start().await;
    let res = srv.client.get(srv.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

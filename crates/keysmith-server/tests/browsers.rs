//! Browsers cannot act for anyone: a cross-site request (it carries an
//! `Origin`, or `Sec-Fetch-Site: cross-site`) is refused unless its origin
//! is allowed; a server without a token answers only a loopback `Host`
//! (DNS rebinding); the server never asks for Basic credentials, and a
//! Basic password too short to be a token is refused. curl-like requests,
//! the status page and allowed origins keep working. Every refusal is
//! checked to change nothing in the store.

mod common;
mod edge;

use common::{TestServer, json_of};
use edge::{TOKEN, store_state, token_server};
use reqwest::{Method, StatusCode};

/// What a page on another site can make a browser send without a CORS
/// preflight: a form POST whose body is `text/plain`.
fn form_post(srv: &TestServer, path: &str) -> reqwest::RequestBuilder {
    srv.client
        .post(srv.url(path))
        .header("content-type", "text/plain")
        .header("origin", "http://attacker.example")
        .header("sec-fetch-site", "cross-site")
        .header("sec-fetch-mode", "no-cors")
        .body(r#"{"name":"orders"}"#)
}

#[tokio::test]
async fn a_cross_site_form_post_creates_nothing() {
    // No token: the default loopback server.
    let srv = TestServer::start().await;
    let before = store_state(&srv.db_path());
    let (st, v) = json_of(form_post(&srv, "/v1/sequences").send().await.unwrap()).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "cross_origin", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("--allow-origin"), "{msg}");
    assert!(msg.contains("http://attacker.example"), "{msg}");
    // Only Sec-Fetch-Site (a browser that sends no Origin on this request).
    let res = srv
        .client
        .post(srv.url("/v1/sequences"))
        .header("sec-fetch-site", "cross-site")
        .body(r#"{"name":"orders"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert_eq!(store_state(&srv.db_path()), before);

    // With a token the browser holds (Basic, as it would have cached it).
    let srv = token_server(|_| {}).await;
    srv.create("s", 10).await;
    let before = store_state(&srv.db_path());
    for path in ["/v1/sequences", "/v1/sequences/s/next"] {
        let res = form_post(&srv, path)
            .basic_auth("anyone", Some(TOKEN))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(store_state(&srv.db_path()), before);
}

#[tokio::test]
async fn a_foreign_host_is_refused_without_a_token() {
    let srv = TestServer::start().await;
    let port = srv.addr.port();
    let before = store_state(&srv.db_path());
    for host in [
        format!("attacker.example:{port}"),
        "attacker.example".to_owned(),
        "10.0.0.1".to_owned(),
    ] {
        let res = srv
            .client
            .post(srv.url("/v1/sequences"))
            .header("host", &host)
            .json(&serde_json::json!({"name": "orders"}))
            .send()
            .await
            .unwrap();
        let (st, v) = json_of(res).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{host}: {v}");
        assert_eq!(v["error"]["code"], "forbidden_host", "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("Host"),
            "{v}"
        );
        let res = srv
            .client
            .get(srv.url("/v1/sequences"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{host}");
    }
    assert_eq!(store_state(&srv.db_path()), before);
    // Loopback names and addresses, with or without a port.
    for host in [
        format!("localhost:{port}"),
        "localhost".to_owned(),
        format!("127.0.0.1:{port}"),
        "127.1.2.3".to_owned(),
        format!("[::1]:{port}"),
    ] {
        let res = srv
            .client
            .get(srv.url("/v1/sequences"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{host}");
    }
    // A server with a token answers any Host (its callers prove who they are).
    let srv = token_server(|_| {}).await;
    let res = srv
        .req(Method::GET, "/v1/sequences")
        .header("host", "keysmith.internal.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_server_never_asks_for_basic_credentials() {
    // Many refusals from one address: no budget of failed authentications.
    let srv = token_server(|c| c.auth_failures_per_ip = 0).await;
    let auth_headers: [Option<String>; 4] = [
        None,
        Some("Bearer wrong-token-0123456789".into()),
        Some("Basic !!!".into()),
        Some("Digest x".into()),
    ];
    for path in [
        "/",
        "/v1/status",
        "/v1/sequences",
        "/healthz",
        "/metrics",
        "/nope",
    ] {
        for auth in &auth_headers {
            let mut b = srv.client.get(srv.url(path));
            if let Some(a) = auth {
                b = b.header("authorization", a);
            }
            let res = b.send().await.unwrap();
            assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{path} {auth:?}");
            for v in res.headers().get_all("www-authenticate") {
                let v = v.to_str().unwrap();
                assert!(!v.to_ascii_lowercase().contains("basic"), "{path}: {v}");
                assert!(v.starts_with("Bearer"), "{path}: {v}");
            }
        }
    }
}

#[tokio::test]
async fn a_short_basic_password_is_refused_without_a_lookup() {
    // A short token still works as a bearer token; by Basic it cannot be
    // told from a guess typed into a browser prompt.
    let srv = TestServer::start_with(|c, _| {
        c.token = Some(keysmith_server::Token::new("short-tok").unwrap());
    })
    .await;
    let res = srv
        .client
        .get(srv.url("/v1/sequences"))
        .basic_auth("me", Some("short-tok"))
        .send()
        .await
        .unwrap();
    let (st, v) = json_of(res).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("long and random"),
        "{v}"
    );
    let (st, _) = srv.call(Method::GET, "/v1/sequences", None).await;
    assert_eq!(st, StatusCode::OK);
}

#[tokio::test]
async fn an_allowed_origin_works() {
    let srv = TestServer::start_with(|c, _| {
        c.allow_origins = vec!["https://App.Example/".into()];
    })
    .await;
    // Its preflight, then the request.
    let res = srv
        .client
        .request(Method::OPTIONS, srv.url("/v1/sequences"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        res.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let res = srv
        .client
        .post(srv.url("/v1/sequences"))
        .header("origin", "https://app.example")
        .header("sec-fetch-site", "cross-site")
        .json(&serde_json::json!({"name": "orders"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let (st, v) = json_of(res).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    // Another origin is not.
    let res = srv
        .client
        .post(srv.url("/v1/sequences/orders/next"))
        .header("origin", "https://app.example.evil")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    // A bad origin is a start error that says how to write one.
    let e = keysmith_server::Config {
        allow_origins: vec!["app.example".into()],
        ..Default::default()
    }
    .validate()
    .unwrap_err()
    .to_string();
    assert!(e.contains("scheme"), "{e}");
}

#[tokio::test]
async fn curl_and_the_status_page_keep_working() {
    let srv = TestServer::start().await;
    // The README's `curl -d '{"name":"orders"}'`: no content type at all
    // (reqwest adds none for a string body).
    let res = srv
        .client
        .post(srv.url("/v1/sequences"))
        .body(r#"{"name":"orders"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    // curl's own form content type.
    let res = srv
        .client
        .post(srv.url("/v1/sequences/orders/next"))
        .header("content-type", "application/x-www-form-urlencoded")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // A browser opening the page (also from a link on another site), and
    // the page's own fetch of /v1/status.
    for (site, mode, path) in [
        ("none", "navigate", "/"),
        ("cross-site", "navigate", "/"),
        ("same-origin", "cors", "/v1/status"),
    ] {
        let res = srv
            .client
            .get(srv.url(path))
            .header("sec-fetch-site", site)
            .header("sec-fetch-mode", mode)
            .header("host", format!("localhost:{}", srv.addr.port()))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{site} {mode} {path}");
    }
}

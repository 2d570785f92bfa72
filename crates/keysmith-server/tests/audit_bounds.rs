//! A bounded, fair audit trail: bodies and names in lines are capped (the
//! first bytes, the length and the SHA-256), admin lines that changed
//! nothing are rate-capped like refusals, each principal has a refusal
//! budget of its own, and an audit log that cannot be written to (a full
//! disk) never stops the service.

mod common;
mod edge;

use common::{TestServer, enc, json_of};
use edge::{audit_lines, audit_text, store_state, token_server};
use keysmith_server::access::token_digest_hex;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest;

const ALPHA: &str = "alpha-token-0123456789abcdef";
const BETA: &str = "beta-token-0123456789abcdef";

fn sha256_hex(b: &[u8]) -> String {
    sha2::Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Two teams: alpha may do anything under `alpha/`, beta use `beta/`.
async fn teams() -> TestServer {
    let text = format!(
        r#"
[[principal]]
name = "alpha"
token_sha256 = "{}"
grants = [ {{ names = "alpha/*", actions = ["use", "read", "admin"] }} ]

[[principal]]
name = "beta"
token_sha256 = "{}"
grants = [ {{ names = "beta/*", actions = ["use", "read", "admin"] }} ]
"#,
        token_digest_hex(ALPHA.as_bytes()),
        token_digest_hex(BETA.as_bytes())
    );
    TestServer::start_with(move |c, db| {
        let dir = db.parent().unwrap();
        std::fs::write(dir.join("access.toml"), &text).unwrap();
        c.access_file = Some(dir.join("access.toml"));
        c.audit_log = Some(dir.join("audit.log"));
    })
    .await
}

async fn post(srv: &TestServer, token: &str, path: &str, body: Option<String>) -> StatusCode {
    let mut b = srv.client.post(srv.url(path)).bearer_auth(token);
    if let Some(body) = body {
        b = b.header("content-type", "application/json").body(body);
    }
    b.send().await.unwrap().status()
}

/// `n` requests made by `make`, one after another.
async fn flood<F, Fut>(n: usize, make: F) -> Vec<StatusCode>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = StatusCode>,
{
    let mut out = Vec::new();
    for i in 0..n {
        out.push(make(i).await);
    }
    out
}

#[tokio::test]
async fn bodies_and_names_in_audit_lines_are_capped() {
    let srv = token_server(|_| {}).await;
    // Twenty rejected creates with 50 kB bodies.
    let body =
        json!({"name": "big", "block": "not a number", "pad": "a".repeat(50_000)}).to_string();
    for _ in 0..20 {
        let st = post(&srv, edge::TOKEN, "/v1/sequences", Some(body.clone())).await;
        assert_eq!(st, StatusCode::BAD_REQUEST);
    }
    // A create with a 30 kB name.
    let name = "n".repeat(30_000);
    let long = json!({ "name": name }).to_string();
    let st = post(&srv, edge::TOKEN, "/v1/sequences", Some(long.clone())).await;
    assert!(st.is_client_error(), "{st}");
    let text = audit_text(&srv);
    assert!(text.len() < 21 * 2048, "{} bytes of audit", text.len());
    let lines = audit_lines(&srv);
    assert_eq!(lines.len(), 21, "{text}");
    for l in &lines[..20] {
        let r = &l["request"];
        assert_eq!(r["bytes"], body.len(), "{l}");
        assert_eq!(r["sha256"], sha256_hex(body.as_bytes()), "{l}");
        assert_eq!(r["excerpt"].as_str().unwrap(), &body[..256]);
    }
    let l = &lines[20];
    assert_eq!(l["object"]["name"].as_str().unwrap(), &name[..256], "{l}");
    assert_eq!(l["name_bytes"], 30_000);
    assert_eq!(l["name_sha256"], sha256_hex(name.as_bytes()));
    assert_eq!(l["request"]["bytes"], long.len());
    // A small body is kept whole, as JSON.
    let st = post(
        &srv,
        edge::TOKEN,
        "/v1/sequences",
        Some(json!({"name": "small", "block": 5}).to_string()),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let last = audit_lines(&srv).pop().unwrap();
    assert_eq!(last["request"], json!({"name": "small", "block": 5}));
}

#[tokio::test]
async fn a_refusal_naming_a_huge_name_writes_a_short_line() {
    let srv = teams().await;
    let name = format!("beta/{}", "x".repeat(30_000));
    let st = post(
        &srv,
        ALPHA,
        &format!("/v1/sequences/{}/next", enc(&name)),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let text = audit_text(&srv);
    assert!(text.len() < 4096, "{} bytes: {}", text.len(), &text[..200]);
    let l: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(l["event"], "refused");
    assert_eq!(l["name_bytes"], name.len(), "{l}");
    assert!(l["reason"].as_str().unwrap().contains("sha256"), "{l}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_flood_hides_no_other_principals_refusals() {
    let srv = teams().await;
    let st = post(
        &srv,
        BETA,
        "/v1/sequences",
        Some(json!({"name": "beta/s"}).to_string()),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let before = store_state(&srv.db_path());
    // Alpha: 300 refusals (no grant on beta/s), and 300 creates that are
    // rejected (400), changing nothing.
    let refused = flood(300, |_| {
        post(&srv, ALPHA, "/v1/sequences/beta%2Fs/next", None)
    })
    .await;
    assert!(refused.iter().all(|s| *s == StatusCode::FORBIDDEN));
    let bad = json!({"name": "alpha/x", "block": "many"}).to_string();
    let rejected = flood(300, |_| {
        post(&srv, ALPHA, "/v1/sequences", Some(bad.clone()))
    })
    .await;
    assert!(rejected.iter().all(|s| *s == StatusCode::BAD_REQUEST));
    assert_eq!(store_state(&srv.db_path()), before);
    // Then beta is refused once: that line is written.
    let st = post(&srv, BETA, "/v1/sequences/alpha%2Fx/next", None).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let lines = audit_lines(&srv);
    let of = |who: &str, event: &str| {
        lines
            .iter()
            .filter(|l| l["principal"] == who && l["event"] == event)
            .count()
    };
    assert_eq!(of("beta", "refused"), 1, "beta's refusal was left out");
    assert!(
        of("alpha", "refused") < 300,
        "alpha's refusals were not capped"
    );
    assert!(
        of("alpha", "admin") < 300,
        "alpha's rejected admin lines were not capped"
    );
}

#[tokio::test]
async fn a_full_disk_never_stops_the_service() {
    // /dev/full: every write fails with ENOSPC.
    let srv = TestServer::start_with(|c, _| {
        c.token = Some(keysmith_server::Token::new(edge::TOKEN).unwrap());
        c.audit_log = Some("/dev/full".into());
    })
    .await;
    srv.create("s", 10).await;
    assert_eq!(srv.next("s", 2).await, vec![1, 2]);
    let res = srv
        .client
        .get(srv.url("/v1/sequences"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let (st, v) = json_of(
        srv.req(reqwest::Method::GET, "/metrics")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let text = v.as_str().unwrap();
    let errors: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("keysmith_audit_write_errors_total "))
        .unwrap_or_else(|| panic!("no keysmith_audit_write_errors_total in {text}"))
        .trim()
        .parse()
        .unwrap();
    // The create and the refusal.
    assert!(errors >= 2.0, "{errors}");
}

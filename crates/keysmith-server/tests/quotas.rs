//! Quotas on what a principal makes beside live sequences and pools: drops
//! (each leaves a tombstone for ever), worker leases over every group, pool
//! members, open tickets. Each refusal is a 403 `quota_exceeded` naming the
//! access-file key, and changes nothing in the store.

mod common;

use common::{TestServer, call, enc, store_state};
use keysmith_server::access::token_digest_hex;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const OPS: &str = "ops-token-0123456789";
const SMALL: &str = "small-token-0123456789";
const PLAIN: &str = "plain-token-0123456789";

/// `small` has the bounds in `limits`; `plain` names none (the defaults).
async fn server(limits: &str) -> TestServer {
    let d = |t: &str| token_digest_hex(t.as_bytes());
    let text = format!(
        r#"
[[principal]]
name = "ops"
token_sha256 = "{}"
grants = [ {{ names = "*", actions = ["use", "read", "admin"] }} ]

[[principal]]
name = "small"
token_sha256 = "{}"
grants = [ {{ names = "small/*", actions = ["use", "read", "admin"] }} ]
{limits}

[[principal]]
name = "plain"
token_sha256 = "{}"
grants = [ {{ names = "plain/*", actions = ["use", "read", "admin"] }} ]
"#,
        d(OPS),
        d(SMALL),
        d(PLAIN)
    );
    TestServer::start_with(move |c, db| {
        let dir = db.parent().unwrap();
        let file = dir.join("access.toml");
        std::fs::write(&file, &text).unwrap();
        c.access_file = Some(file);
        c.audit_log = Some(dir.join("audit.log"));
    })
    .await
}

/// A 403 `quota_exceeded` whose message names `key` and says how to raise it.
fn assert_quota(st: StatusCode, v: &Value, key: &str) {
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "quota_exceeded", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(key), "names {key}: {msg}");
    assert!(msg.contains("access file"), "says how to raise it: {msg}");
}

async fn create_seq(srv: &TestServer, token: &str, name: &str) {
    let (st, v) = call(
        srv,
        token,
        Method::POST,
        "/v1/sequences",
        Some(json!({"name": name})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
}

async fn drop_seq(srv: &TestServer, token: &str, name: &str) -> (StatusCode, Value) {
    call(
        srv,
        token,
        Method::DELETE,
        &format!("/v1/sequences/{}", enc(name)),
        None,
    )
    .await
}

/// The attack: `max_sequences = 2`, and names created and dropped one after
/// another, each drop leaving a tombstone row for ever. Drops (of sequences
/// and pools alike) are bounded by `max_drops_per_hour`.
#[tokio::test]
async fn drops_past_max_drops_per_hour_are_refused_and_change_nothing() {
    let srv = server("max_sequences = 2\nmax_drops_per_hour = 3").await;
    for i in 0..2 {
        let name = format!("small/s{i}");
        create_seq(&srv, SMALL, &name).await;
        let (st, v) = drop_seq(&srv, SMALL, &name).await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
    // A pool's drop counts too.
    let (st, v) = call(
        &srv,
        SMALL,
        Method::POST,
        "/v1/pools",
        Some(json!({"name": "small/p", "size": 2})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, v) = call(
        &srv,
        SMALL,
        Method::DELETE,
        &format!("/v1/pools/{}", enc("small/p")),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    create_seq(&srv, SMALL, "small/s9").await;
    let before = store_state(&srv.db_path());
    let (st, v) = drop_seq(&srv, SMALL, "small/s9").await;
    assert_quota(st, &v, "max_drops_per_hour = 3");
    assert_eq!(
        store_state(&srv.db_path()),
        before,
        "a refused drop changed the store"
    );
    let (st, v) = call(
        &srv,
        SMALL,
        Method::GET,
        &format!("/v1/sequences/{}", enc("small/s9")),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "still there: {v}");
    // The refusal is in the audit trail.
    let audit = std::fs::read_to_string(srv.dir.path().join("audit.log")).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"refused\"") && l.contains("max_drops_per_hour")),
        "{audit}"
    );
    // Another principal's budget is its own.
    create_seq(&srv, PLAIN, "plain/x").await;
    let (st, v) = drop_seq(&srv, PLAIN, "plain/x").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    srv.stop().await;
}

/// A principal that names no `max_drops_per_hour` has the default, 10.
#[tokio::test]
async fn the_drop_budget_has_a_finite_default() {
    let srv = server("").await;
    for i in 0..10 {
        let name = format!("plain/s{i}");
        create_seq(&srv, PLAIN, &name).await;
        let (st, v) = drop_seq(&srv, PLAIN, &name).await;
        assert_eq!(st, StatusCode::OK, "drop {i}: {v}");
    }
    create_seq(&srv, PLAIN, "plain/last").await;
    let before = store_state(&srv.db_path());
    let (st, v) = drop_seq(&srv, PLAIN, "plain/last").await;
    assert_quota(st, &v, "max_drops_per_hour = 10, the default");
    assert_eq!(store_state(&srv.db_path()), before);
    srv.stop().await;
}

async fn lease(srv: &TestServer, token: &str, group: &str) -> (StatusCode, Value) {
    call(
        srv,
        token,
        Method::POST,
        &format!("/v1/workers/{}/lease?ttl_ms=300000", enc(group)),
        None,
    )
    .await
}

/// Leases over every group count: a released lease makes room again.
#[tokio::test]
async fn worker_leases_past_max_worker_leases_are_refused_and_change_nothing() {
    let srv = server("max_worker_leases = 2").await;
    let (st, first) = lease(&srv, SMALL, "small/g1").await;
    assert_eq!(st, StatusCode::OK, "{first}");
    let (st, v) = lease(&srv, SMALL, "small/g2").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let before = store_state(&srv.db_path());
    let (st, v) = lease(&srv, SMALL, "small/g3").await;
    assert_quota(st, &v, "max_worker_leases = 2");
    let (st, v) = lease(&srv, SMALL, "small/g1").await;
    assert_quota(st, &v, "max_worker_leases = 2");
    assert_eq!(
        store_state(&srv.db_path()),
        before,
        "a refused lease changed the store"
    );
    // Release one: room for one more.
    let (st, v) = call(
        &srv,
        SMALL,
        Method::POST,
        "/v1/workers/small%2Fg1/lease/release",
        Some(json!({"token": first["lease"]})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["released"], true, "{v}");
    let (st, v) = lease(&srv, SMALL, "small/g3").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    srv.stop().await;
}

/// The attack held 30 worker groups; by default a principal holds 16 leases.
#[tokio::test]
async fn worker_leases_have_a_finite_default() {
    let srv = server("").await;
    for i in 0..16 {
        let (st, v) = lease(&srv, PLAIN, &format!("plain/g{i}")).await;
        assert_eq!(st, StatusCode::OK, "lease {i}: {v}");
    }
    let before = store_state(&srv.db_path());
    let (st, v) = lease(&srv, PLAIN, "plain/g16").await;
    assert_quota(st, &v, "max_worker_leases = 16, the default");
    assert_eq!(store_state(&srv.db_path()), before);
    srv.stop().await;
}

/// The members of all of a principal's pools together are bounded.
#[tokio::test]
async fn pool_members_past_max_pool_members_are_refused_and_change_nothing() {
    let srv = server("max_pool_members = 10").await;
    let pool = |name: &str, size: i64| json!({"name": name, "size": size});
    let (st, v) = call(
        &srv,
        SMALL,
        Method::POST,
        "/v1/pools",
        Some(pool("small/a", 6)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let before = store_state(&srv.db_path());
    let (st, v) = call(
        &srv,
        SMALL,
        Method::POST,
        "/v1/pools",
        Some(pool("small/b", 5)),
    )
    .await;
    assert_quota(st, &v, "max_pool_members = 10");
    assert_eq!(
        store_state(&srv.db_path()),
        before,
        "a refused create changed the store"
    );
    let (st, v) = call(
        &srv,
        SMALL,
        Method::POST,
        "/v1/pools",
        Some(pool("small/b", 4)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    srv.stop().await;
}

async fn take(srv: &TestServer, token: &str, name: &str) -> (StatusCode, Value) {
    call(
        srv,
        token,
        Method::POST,
        &format!("/v1/sequences/{}/tickets?ttl=600", enc(name)),
        None,
    )
    .await
}

/// Tickets taken and neither committed nor released are bounded; settling
/// one makes room.
#[tokio::test]
async fn open_tickets_past_max_open_tickets_are_refused_and_change_nothing() {
    let srv = server("max_open_tickets = 2").await;
    let (st, v) = call(
        &srv,
        SMALL,
        Method::POST,
        "/v1/sequences",
        Some(json!({"name": "small/inv", "gapless": true})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, first) = take(&srv, SMALL, "small/inv").await;
    assert_eq!(st, StatusCode::CREATED, "{first}");
    let (st, v) = take(&srv, SMALL, "small/inv").await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let before = store_state(&srv.db_path());
    let (st, v) = take(&srv, SMALL, "small/inv").await;
    assert_quota(st, &v, "max_open_tickets = 2");
    assert_eq!(
        store_state(&srv.db_path()),
        before,
        "a refused take changed the store"
    );
    let (st, v) = call(
        &srv,
        SMALL,
        Method::POST,
        "/v1/sequences/small%2Finv/tickets/commit",
        Some(json!({"ticket": first["ticket"]})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = take(&srv, SMALL, "small/inv").await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    srv.stop().await;
}

/// A bad value for a new key is a clear error at load.
#[test]
fn the_new_keys_parse_and_a_bad_value_says_so() {
    let d = token_digest_hex(b"x-0123456789");
    let ok = format!(
        "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{d}\"\nmax_drops_per_hour = 1\nmax_worker_leases = 2\nmax_pool_members = 3\nmax_open_tickets = 4\n"
    );
    let f = keysmith_server::access::AccessFile::parse(&ok).unwrap();
    let l = f.principals()[0].limits;
    assert_eq!(
        (
            l.max_drops_per_hour,
            l.max_worker_leases,
            l.max_pool_members,
            l.max_open_tickets
        ),
        (Some(1), Some(2), Some(3), Some(4))
    );
    let bad =
        format!("[[principal]]\nname = \"a\"\ntoken_sha256 = \"{d}\"\nmax_worker_leases = -1\n");
    let e = keysmith_server::access::AccessFile::parse(&bad).unwrap_err();
    assert!(e.contains("max_worker_leases"), "{e}");
}

/// An operator (admin on every name) has no default bounds; a bound it
/// names still holds.
#[test]
fn an_operator_has_no_default_bounds() {
    let d = token_digest_hex(b"x-0123456789");
    let text = format!(
        "[[principal]]\nname = \"ops\"\ntoken_sha256 = \"{d}\"\ngrants = [ {{ names = \"*\", actions = [\"admin\"] }} ]\nmax_worker_leases = 5\n"
    );
    let f = keysmith_server::access::AccessFile::parse(&text).unwrap();
    let l = f.principals()[0].limits;
    assert_eq!(
        (
            l.max_drops_per_hour,
            l.max_worker_leases,
            l.max_pool_members,
            l.max_open_tickets
        ),
        (None, Some(5), None, None)
    );
    let tenant = text.replace("\"*\"", "\"t/*\"");
    let f = keysmith_server::access::AccessFile::parse(&tenant).unwrap();
    assert_eq!(
        f.principals()[0].limits.max_drops_per_hour,
        keysmith_server::access::Limits::DEFAULT.max_drops_per_hour
    );
}

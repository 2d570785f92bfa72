//! A name's lives across two real `keysmith serve` processes over one store
//! (SQLite, PostgreSQL, MariaDB, etcd), the way they run behind a load
//! balancer: server A holds a cached handle and made a lease; the name is
//! dropped and created again through server B; then A's release of the old
//! lease is a 410 `dropped`, A's idle close of its old handle, and its next
//! requests, write nothing into the new life, and no value of either life
//! is handed out twice.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::server::{SERVER_DEADLINE, ServerProc, values};
#[cfg(feature = "etcd")]
use keysmith_testsupport::processes::Etcd;
#[cfg(feature = "mysql")]
use keysmith_testsupport::processes::MariaDb;
use keysmith_testsupport::processes::{Postgres, ProcessBackend, Sqlite};
use serde_json::{Value, json};

/// The lease secret both servers share, so a token of one opens on the other.
const SECRET: &str = "lives-test-lease-secret-0123456789";

async fn call(
    client: &reqwest::Client,
    srv: &ServerProc,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = client.request(method, srv.url(path));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The sequence's row as server B shows it: what a write would change.
async fn row(client: &reqwest::Client, srv: &ServerProc) -> Value {
    let (st, v) = call(
        client,
        srv,
        reqwest::Method::GET,
        "/v1/sequences/orders",
        None,
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let mut kept = serde_json::Map::new();
    for f in ["next", "version", "incarnation", "handed_back", "abandoned"] {
        kept.insert(f.to_owned(), v[f].clone());
    }
    Value::Object(kept)
}

/// How many sequence handles `srv` holds open, from its metrics.
async fn open_handles(client: &reqwest::Client, srv: &ServerProc) -> i64 {
    let text = client
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with("keysmith_open_handles{kind=\"sequence\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no open handles gauge in\n{text}"))
}

async fn two_servers_and_a_drop(backend: &dyn ProcessBackend) {
    let url = backend.fresh_url();
    let env = [("KEYSMITH_LEASE_SECRET", SECRET)];
    let a = ServerProc::start_on(&url, &["--handle-idle-secs", "1"], &env).await;
    let b = ServerProc::start_on(&url, &[], &env).await;
    let client = reqwest::Client::new();
    let post = reqwest::Method::POST;
    let (st, v) = call(
        &client,
        &a,
        post.clone(),
        "/v1/sequences",
        Some(json!({"name": "orders", "block": 5})),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let mut seen: Vec<i64> = Vec::new();
    let (_, v) = call(
        &client,
        &a,
        post.clone(),
        "/v1/sequences/orders/next?count=1",
        None,
    )
    .await;
    seen.extend(values(&v));
    let (st, lease) = call(
        &client,
        &a,
        post.clone(),
        "/v1/sequences/orders/reserve?count=10",
        None,
    )
    .await;
    assert_eq!(st, 200, "{lease}");
    let (start, end) = (
        lease["ranges"][0]["start"].as_i64().unwrap(),
        lease["ranges"][0]["end"].as_i64().unwrap(),
    );
    seen.extend(start..end);

    // Through the other server: drop, create again.
    let (st, v) = call(
        &client,
        &b,
        reqwest::Method::DELETE,
        "/v1/sequences/orders",
        None,
    )
    .await;
    assert!(st < 300, "{st} {v}");
    let (st, v) = call(
        &client,
        &b,
        post.clone(),
        "/v1/sequences",
        Some(json!({"name": "orders", "block": 5})),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let created = row(&client, &b).await;
    assert!(
        created["incarnation"].as_u64().is_some_and(|i| i > 1),
        "{created}"
    );
    assert!(created["handed_back"].is_i64(), "{created}");

    // The old lease's release through A: refused, nothing written.
    let (st, v) = call(
        &client,
        &a,
        post.clone(),
        "/v1/sequences/orders/release",
        Some(json!({"lease": lease["lease"], "from": start})),
    )
    .await;
    assert_eq!(st, 410, "{v}");
    assert_eq!(v["error"]["code"], "dropped", "{v}");
    assert_eq!(row(&client, &b).await, created, "{}", backend.name());

    // A's old handle closes when idle: nothing handed back into the new
    // life, no counts there.
    let deadline = Instant::now() + SERVER_DEADLINE;
    while open_handles(&client, &a).await > 0 {
        assert!(Instant::now() < deadline, "A never closed its idle handle");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(row(&client, &b).await, created, "{}", backend.name());

    // Both servers hand out the new life's values, none seen before.
    for srv in [&a, &b, &a] {
        let (st, v) = call(
            &client,
            srv,
            post.clone(),
            "/v1/sequences/orders/next?count=7",
            None,
        )
        .await;
        assert_eq!(st, 200, "{v}");
        seen.extend(values(&v));
    }
    let unique: HashSet<i64> = seen.iter().copied().collect();
    assert_eq!(
        unique.len(),
        seen.len(),
        "{}: a value twice: {seen:?}",
        backend.name()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_servers_never_let_an_old_life_write() {
    two_servers_and_a_drop(&Sqlite::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_servers_never_let_an_old_life_write() {
    let Some(pg) = Postgres::shared() else {
        return;
    };
    two_servers_and_a_drop(&pg).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_two_servers_never_let_an_old_life_write() {
    let Some(my) = MariaDb::shared() else {
        return;
    };
    two_servers_and_a_drop(&my).await;
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_two_servers_never_let_an_old_life_write() {
    let Some(etcd) = Etcd::shared() else {
        return;
    };
    two_servers_and_a_drop(&etcd).await;
}

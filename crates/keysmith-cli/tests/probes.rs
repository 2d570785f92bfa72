//! The probes of a real `keysmith serve` process: `/livez` and `/readyz`
//! need no token; after SIGTERM with `--shutdown-delay-ms`, `/readyz`
//! answers 503 while the server still serves (`/livez` 200, requests with
//! the token answered), then the process stops and exits 0.

mod common;

use std::time::{Duration, Instant};

use common::Db;
use common::server::{SERVER_DEADLINE, ServerProc};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_503_during_the_shutdown_delay_while_livez_stays_200() {
    let db = Db::new();
    db.ok(&["create", "orders"]);
    let token = "probe-token-0123456789";
    // Long enough for the checks below to run inside it; the test waits it
    // out once at the end.
    let mut srv = ServerProc::start(
        &db,
        &["--shutdown-delay-ms", "10000"],
        &[("KEYSMITH_TOKEN", token)],
    )
    .await;
    let client = reqwest::Client::new();
    let status = |path: &'static str| {
        let (client, url) = (client.clone(), srv.url(path));
        async move { client.get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("/livez").await, 200);
    assert_eq!(status("/readyz").await, 200);
    assert_eq!(status("/metrics").await, 401);

    srv.signal(libc::SIGTERM);
    let until = Instant::now() + SERVER_DEADLINE;
    loop {
        match status("/readyz").await {
            503 => break,
            200 => {}
            other => panic!("/readyz answered {other}"),
        }
        assert!(Instant::now() < until, "/readyz never turned 503");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let res = client.get(srv.url("/readyz")).send().await.unwrap();
    assert_eq!(res.status(), 503);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "draining", "{body}");
    // Still serving meanwhile.
    assert_eq!(status("/livez").await, 200);
    let res = client
        .post(srv.url("/v1/sequences/orders/next"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    let st = srv.wait();
    assert!(st.success(), "exit status {st:?}");
}

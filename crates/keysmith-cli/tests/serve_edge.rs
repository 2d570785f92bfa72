//! `keysmith serve` against browsers and for logrotate, on the real binary:
//! `--audit-log` is opened again on SIGHUP (rename the file, send SIGHUP,
//! a new file is written at the path), and `allow-origin` takes a list in a
//! config file.

mod common;

use std::time::Instant;

use common::Db;
use common::server::{SERVER_DEADLINE, ServerProc};

const TOKEN: &str = "rotate-token-0123456789abcdef";

/// Waits for a stderr line of the server that contains `what`.
fn wait_for_line(srv: &ServerProc, what: &str) -> String {
    let until = Instant::now() + SERVER_DEADLINE;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match srv.lines.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(_) => {}
            Err(e) => panic!("the server wrote no line with {what:?}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reopens_the_audit_log_for_logrotate() {
    let db = Db::new();
    let audit = db.dir.path().join("audit.log");
    let rotated = db.dir.path().join("audit.log.1");
    let srv = ServerProc::start(
        &db,
        &["--audit-log", audit.to_str().unwrap()],
        &[("KEYSMITH_TOKEN", TOKEN)],
    )
    .await;
    let client = reqwest::Client::new();
    let create = |name: &str| {
        client
            .post(srv.url("/v1/sequences"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({ "name": name }))
            .send()
    };
    assert_eq!(create("before").await.unwrap().status(), 201);
    // logrotate: rename, then SIGHUP.
    std::fs::rename(&audit, &rotated).unwrap();
    srv.signal(libc::SIGHUP);
    wait_for_line(&srv, "SIGHUP");
    assert_eq!(create("after").await.unwrap().status(), 201);
    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&audit)
        .unwrap_or_else(|e| panic!("no new audit log at {} after SIGHUP: {e}", audit.display()));
    assert!(
        old.contains(r#""name":"before""#) && !old.contains(r#""name":"after""#),
        "{old}"
    );
    assert!(
        new.contains(r#""name":"after""#) && !new.contains(r#""name":"before""#),
        "{new}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_origins_come_from_flags_and_config_lists() {
    let db = Db::new();
    let config = db.dir.path().join("keysmith.toml");
    std::fs::write(
        &config,
        "allow-origin = [\"https://a.example\", \"https://b.example\"]\nmax-connections-per-ip = 8\n",
    )
    .unwrap();
    let srv = ServerProc::start(&db, &["--config", config.to_str().unwrap()], &[]).await;
    let client = reqwest::Client::new();
    for (origin, status) in [
        ("https://a.example", 201),
        ("https://b.example", 201),
        ("https://c.example", 403),
    ] {
        let name = origin.replace("https://", "").replace('.', "-");
        let res = client
            .post(srv.url("/v1/sequences"))
            .header("origin", origin)
            .json(&serde_json::json!({ "name": name }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), status, "{origin}");
    }
    drop(srv);
    // On the command line, repeated; a malformed one stops the start.
    let srv = ServerProc::start(&db, &["--allow-origin", "https://c.example"], &[]).await;
    let res = client
        .post(srv.url("/v1/sequences"))
        .header("origin", "https://c.example")
        .json(&serde_json::json!({ "name": "c" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let (_, err) = db.fails(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--allow-origin",
        "c.example",
    ]);
    assert!(err.contains("allow origin"), "{err}");
}

//! The real `keysmith serve` process: killed with SIGKILL and restarted
//! mid-run it never repeats a value (on SQLite, PostgreSQL, MariaDB and
//! etcd); SIGTERM finishes the request in flight, exits 0 and hands the
//! unused tail back; token and address checks.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use common::Db;
use common::server::{SERVER_DEADLINE, ServerProc, values};
use keysmith_testsupport::processes::{Postgres, ProcessBackend, Sqlite};
use serde_json::{Value, json};

/// How long an awaited condition may take before a test fails.
const DEADLINE: Duration = SERVER_DEADLINE;

async fn take(client: &reqwest::Client, srv: &ServerProc, name: &str, count: i64) -> Vec<i64> {
    let res = client
        .post(srv.url(&format!("/v1/sequences/{name}/next?count={count}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    values(&res.json().await.unwrap())
}

/// 16 clients hammer a server on the store at `url` that is killed with
/// SIGKILL once a few hundred values went out, then restarted on the same
/// store, five times, with each strategy: no value is ever handed out
/// twice, each client's values increase while one server lives, and after
/// the last restart the sequence resumes above everything handed out.
async fn sigkill_and_restart(url: &str) {
    common::ok(url, &["create", "k", "--block", "10"]);
    let client = reqwest::Client::new();
    let mut seen = HashSet::new();
    let mut total = 0usize;
    for (round, strategy) in ["optimistic", "locked", "atomic", "optimistic", "atomic"]
        .into_iter()
        .enumerate()
    {
        let mut srv = ServerProc::start_on(url, &["--strategy", strategy], &[]).await;
        let got = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicBool::new(false));
        let mut clients = Vec::new();
        for c in 0..16i64 {
            let (client, url, got, dead) = (
                client.clone(),
                srv.url("/v1/sequences/k/next"),
                got.clone(),
                dead.clone(),
            );
            clients.push(tokio::spawn(async move {
                let mut mine: Vec<i64> = Vec::new();
                let mut i = 0i64;
                // Runs until the server is gone (bounded by the test's deadline).
                while !dead.load(SeqCst) {
                    i += 1;
                    let count = 1 + (c * 5 + i * 7) % 17;
                    let res = match client.post(format!("{url}?count={count}")).send().await {
                        Ok(r) => r,
                        Err(_) => break, // killed
                    };
                    let status = res.status();
                    let body = match res.json::<Value>().await {
                        Ok(b) => b,
                        Err(_) => break, // killed mid-answer: those values are lost, never reused
                    };
                    match status.as_u16() {
                        200 => {
                            let v = values(&body);
                            assert_eq!(v.len() as i64, count);
                            if let Some(last) = mine.last() {
                                assert!(v[0] > *last, "client {c}: {last} then {}", v[0]);
                            }
                            got.fetch_add(v.len(), SeqCst);
                            mine.extend(v);
                        }
                        // Contention under optimistic; retrying is allowed.
                        503 => continue,
                        other => panic!("client {c}: {other} {body}"),
                    }
                }
                mine
            }));
        }
        // Kill once enough went out (a different amount each round).
        let want = 300 + round * 150;
        let until = Instant::now() + DEADLINE;
        while got.load(SeqCst) < want {
            assert!(
                Instant::now() < until,
                "round {round}: clients got too little"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        srv.sigkill();
        dead.store(true, SeqCst);
        for c in clients {
            for v in c.await.unwrap() {
                total += 1;
                assert!(
                    seen.insert(v),
                    "round {round} ({strategy}): {v} handed out twice"
                );
            }
        }
    }
    assert_eq!(seen.len(), total);
    assert!(total >= 2500, "{total}");

    let srv = ServerProc::start_on(url, &[], &[]).await;
    let after = take(&client, &srv, "k", 5).await;
    let max_seen = *seen.iter().max().unwrap();
    assert!(
        after[0] > max_seen,
        "resumed at {} below {max_seen}",
        after[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_and_restart_never_repeat_a_value() {
    let sqlite = Sqlite::new();
    sigkill_and_restart(&sqlite.fresh_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_sigkill_and_restart_never_repeat_a_value() {
    if let Some(pg) = Postgres::shared() {
        sigkill_and_restart(&pg.fresh_url()).await;
    }
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_sigkill_and_restart_never_repeat_a_value() {
    if let Some(my) = keysmith_testsupport::processes::MariaDb::shared() {
        sigkill_and_restart(&my.fresh_url()).await;
    }
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_sigkill_and_restart_never_repeat_a_value() {
    if let Some(etcd) = keysmith_testsupport::processes::Etcd::shared() {
        sigkill_and_restart(&etcd.fresh_url()).await;
    }
}

/// SIGTERM while a request waits on the store: the request is answered, the
/// process exits 0, and the unused tail of the block goes back, so the
/// stored next value is one past the last value served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_requests_and_hands_the_tail_back() {
    let db = Db::new();
    let mut srv = ServerProc::start(&db, &[], &[]).await;
    let client = reqwest::Client::new();
    for (name, block) in [("big", 1000), ("strict", 1)] {
        let res = client
            .post(srv.url("/v1/sequences"))
            .json(&json!({"name": name, "block": block}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    let mut last = 0;
    for n in [1, 5, 50, 67] {
        last = *take(&client, &srv, "big", n).await.last().unwrap();
    }
    assert_eq!(last, 123);
    take(&client, &srv, "strict", 1).await;

    // Hold the write lock so the next strict request waits in the server.
    let lock = rusqlite::Connection::open(db.path()).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let in_flight = tokio::spawn({
        let (client, url) = (client.clone(), srv.url("/v1/sequences/strict/next"));
        async move { client.post(url).send().await.unwrap() }
    });
    // Wait until the server has it: this scrape plus that request.
    let until = Instant::now() + DEADLINE;
    loop {
        let text = client
            .get(srv.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let n: i64 = text
            .lines()
            .find_map(|l| l.strip_prefix("keysmith_http_requests_in_flight "))
            .unwrap()
            .parse()
            .unwrap();
        if n >= 2 {
            break;
        }
        assert!(Instant::now() < until, "the request never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    srv.signal(libc::SIGTERM);
    // The server stops accepting; its notice comes before it waits for the request.
    let until = Instant::now() + DEADLINE;
    loop {
        let line = srv
            .lines
            .recv_timeout(until.saturating_duration_since(Instant::now()))
            .expect("no shutdown notice");
        if line.contains("shutting down") {
            break;
        }
    }
    lock.execute_batch("ROLLBACK").unwrap();
    let res = in_flight.await.unwrap();
    assert_eq!(res.status(), 200, "the request in flight was not finished");
    assert_eq!(values(&res.json().await.unwrap()), vec![2]);
    let st = srv.wait();
    assert!(st.success(), "exit status {st:?}");
    // The binary logs (tracing-subscriber): the hand-back is in its stderr.
    // The reader thread ends at EOF, which the exit brought: read to it.
    let rest: Vec<String> = srv.lines.iter().collect();
    assert!(
        rest.iter().any(|l| l.contains("handed back")),
        "no hand-back in the server's log: {rest:?}"
    );

    let shown: Value = serde_json::from_str(&db.ok(&["--json", "show", "big"])).unwrap();
    assert_eq!(
        shown["next"],
        last + 1,
        "the tail was not handed back: {shown}"
    );
    let shown: Value = serde_json::from_str(&db.ok(&["--json", "show", "strict"])).unwrap();
    assert_eq!(shown["next"], 3);
}

#[tokio::test]
async fn token_from_file_or_environment() {
    let db = Db::new();
    db.ok(&["create", "s"]);
    let client = reqwest::Client::new();
    let file = db.dir.path().join("token");
    std::fs::write(&file, "file-secret\n").unwrap();
    let from_file = ServerProc::start(&db, &["--token-file", file.to_str().unwrap()], &[]).await;
    let from_env = ServerProc::start(&db, &[], &[("KEYSMITH_TOKEN", "env-secret")]).await;
    // The shard key secret from a file: the server signs with it.
    let secret = db.dir.path().join("shard-secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
    let signer = ServerProc::start(
        &db,
        &["--shard-key-secret-file", secret.to_str().unwrap()],
        &[],
    )
    .await;
    let res = client
        .post(signer.url("/v1/shard-keys/encode"))
        .json(&json!({"origin": "c", "shard": 3, "record": 42}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let external = res.json::<Value>().await.unwrap()["external"]
        .as_str()
        .unwrap()
        .to_owned();
    let decoded = std::process::Command::new(common::KEYSMITH)
        .args(["shard-key", "decode", &external])
        .env(
            "KEYSMITH_SHARD_KEY_SECRET",
            "0123456789abcdef0123456789abcdef",
        )
        .output()
        .unwrap();
    assert!(decoded.status.success(), "{decoded:?}");
    assert_eq!(
        String::from_utf8(decoded.stdout).unwrap().trim(),
        r#"["c",3,42]"#
    );
    for (srv, token) in [(&from_file, "file-secret"), (&from_env, "env-secret")] {
        let url = srv.url("/v1/sequences/s/next");
        let st = |r: reqwest::Response| r.status().as_u16();
        assert_eq!(st(client.post(&url).send().await.unwrap()), 401);
        assert_eq!(
            st(client.post(&url).bearer_auth("nope").send().await.unwrap()),
            401
        );
        assert_eq!(
            st(client.post(&url).bearer_auth(token).send().await.unwrap()),
            200
        );
        // The store ping needs a principal on a server with tokens; the
        // open probes do not.
        assert_eq!(
            st(client.get(srv.url("/healthz")).send().await.unwrap()),
            401
        );
        assert_eq!(
            st(client
                .get(srv.url("/healthz"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()),
            200
        );
        assert_eq!(st(client.get(srv.url("/livez")).send().await.unwrap()), 200);
    }
}

#[test]
fn refuses_bad_tokens_and_open_addresses() {
    let db = Db::new();
    let empty = db.dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let (code, err) = db.fails(&["serve", "--token-file", empty.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error: ") && err.contains("empty"), "{err}");

    let (code, err) = db.fails(&["serve", "--token-file", "/nonexistent/token"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read the token file"), "{err}");

    // The token is never an argument.
    let (code, _) = db.fails(&["serve", "--token", "abc"]);
    assert_eq!(code, 2);

    // Reachable from other hosts without a token: refused before binding.
    let (code, err) = db.fails(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 1);
    assert!(err.contains("--insecure-no-auth"), "{err}");

    let (code, err) = db.fails(&["serve", "--max-count", "0"]);
    assert_eq!(code, 1);
    assert!(err.contains("max count"), "{err}");

    let short = db.dir.path().join("short");
    std::fs::write(&short, "too-short\n").unwrap();
    let (code, err) = db.fails(&["serve", "--shard-key-secret-file", short.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("at least 16 bytes"), "{err}");

    // A lease secret file with a key id twice: the line, never the secret.
    let keys = db.dir.path().join("lease-keys");
    std::fs::write(&keys, "k1:0123456789abcdef\nk1:fedcba9876543210\n").unwrap();
    let (code, err) = db.fails(&["serve", "--lease-secret-file", keys.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("line 2: the key id \"k1\" is already used on line 1"),
        "{err}"
    );
    assert!(!err.contains("fedcba"), "{err}");

    let help = db.ok(&["serve", "--help"]);
    assert!(help.contains("127.0.0.1:7878"), "{help}");
}

//! `keysmith serve --config FILE` and `--log-format json` on the real binary:
//! the file's options apply, the command line wins over them, a bad file is
//! a usage error that starts nothing, and JSON logs carry each request's id.

mod common;

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use common::Db;
use common::server::{SERVER_DEADLINE, ServerProc};
use serde_json::Value;

fn write_config(db: &Db, text: &str) -> String {
    let path = db.dir.path().join("keysmith.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

async fn status(req: reqwest::RequestBuilder) -> u16 {
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_sets_options_and_the_command_line_wins() {
    let db = Db::new();
    db.ok(&["create", "s"]);
    // A relative token file: next to the config file, not the working directory.
    std::fs::write(db.dir.path().join("token"), "file-secret\n").unwrap();
    let config = write_config(
        &db,
        "max-count = 5\ntoken_file = \"token\"\nrequest-timeout-ms = 4000\nfixed-blocks = true\n",
    );
    let client = reqwest::Client::new();

    let from_file = ServerProc::start(&db, &["--config", &config], &[]).await;
    let next = |n: u32| from_file.url(&format!("/v1/sequences/s/next?count={n}"));
    assert_eq!(
        status(client.post(next(1))).await,
        401,
        "token-file applies"
    );
    let authed = |n| client.post(next(n)).bearer_auth("file-secret");
    assert_eq!(status(authed(5)).await, 200);
    assert_eq!(status(authed(6)).await, 413, "max-count = 5 applies");
    drop(from_file);

    let overridden = ServerProc::start(&db, &["--config", &config, "--max-count", "7"], &[]).await;
    let next = |n: u32| overridden.url(&format!("/v1/sequences/s/next?count={n}"));
    let authed = |n| client.post(next(n)).bearer_auth("file-secret");
    assert_eq!(status(authed(7)).await, 200, "the command line wins");
    assert_eq!(status(authed(8)).await, 413);
}

#[test]
fn a_bad_file_is_a_usage_error_that_starts_nothing() {
    let cases = [
        ("lsten = \"127.0.0.1:0\"\n", "did you mean `listen`"),
        (
            "listen = \"nowhere\"\n",
            "invalid value 'nowhere' for '--listen",
        ),
        ("max-count = true\n", "takes text or a whole number"),
        (
            "log-format = \"xml\"\n",
            "invalid value 'xml' for '--log-format",
        ),
        ("listen = \n", "not valid TOML"),
    ];
    for (text, says) in cases {
        let db = Db::new();
        let config = write_config(&db, text);
        let (code, err) = db.fails(&["serve", "--config", &config]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(err.contains(says), "{text}: {err}");
        assert!(err.contains("keysmith.toml"), "names the file: {err}");
        assert!(!db.path().exists(), "{text}: the store was opened");
    }
    let db = Db::new();
    let (code, err) = db.fails(&["serve", "--config", "/nonexistent/keysmith.toml"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot read the config file /nonexistent/keysmith.toml"),
        "{err}"
    );
}

/// The next JSON log line that `pred` accepts, within the deadline; every
/// line on the way must be JSON.
fn await_line(srv: &ServerProc, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let until = Instant::now() + SERVER_DEADLINE;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match srv.lines.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(line) => {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
                if pred(&v) {
                    return v;
                }
            }
            Err(RecvTimeoutError::Timeout) => panic!("no log line {what}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed stderr before {what}"),
        }
    }
}

fn request_id(v: &Value) -> Option<&str> {
    v["span"]["request_id"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_each_request_id() {
    let db = Db::new();
    db.ok(&["create", "s"]);
    let config = write_config(&db, "log-format = \"json\"\n");
    let env = [("RUST_LOG", "info,keysmith_server=debug")];
    let srv = ServerProc::start(&db, &["--config", &config], &env).await;
    let client = reqwest::Client::new();
    let next = srv.url("/v1/sequences/s/next");

    // The client's id is kept, answered back and logged.
    let res = client
        .post(&next)
        .header("x-request-id", "order-42")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], "order-42");
    let line = await_line(&srv, "for order-42", |v| request_id(v) == Some("order-42"));
    assert_eq!(line["span"]["path"], "/v1/sequences/s/next");
    assert_eq!(line["status"], 200);

    // Without one (or with one that is not a short token) the server makes one.
    for sent in [None, Some("bad id with spaces"), Some(&*"x".repeat(65))] {
        let mut req = client.post(srv.url("/v1/sequences/missing/next"));
        if let Some(id) = sent {
            req = req.header("x-request-id", id);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status().as_u16(), 404);
        let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
        assert_ne!(Some(id.as_str()), sent);
        let line = await_line(&srv, "for a made id", |v| request_id(v) == Some(&id));
        assert_eq!(line["status"], 404);
    }
}

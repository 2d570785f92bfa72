//! `keysmith access hash|check` and `keysmith serve --access-file
//! --audit-log` on the real binary.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::Db;
use common::server::ServerProc;
use serde_json::Value;

/// `keysmith access hash` with `input` on stdin: (success, stdout, stderr).
fn hash(db: &Db, input: &[u8]) -> (bool, String, String) {
    let mut child = db
        .cmd()
        .args(["access", "hash"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn hash_prints_the_sha256_of_the_token_on_stdin() {
    let db = Db::new();
    // The FIPS 180-2 test vector: SHA-256("abc").
    let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n";
    for input in [&b"abc"[..], b"abc\n", b"abc\r\n"] {
        let (ok, out, err) = hash(&db, input);
        assert!(ok, "{err}");
        assert_eq!(out, abc, "{input:?}");
    }
    for bad in [&b""[..], b"\n", b"a b\n"] {
        let (ok, out, err) = hash(&db, bad);
        assert!(!ok && out.is_empty(), "{bad:?}");
        assert!(err.contains("standard input"), "{err}");
    }
}

#[test]
fn check_lists_a_good_file_and_names_what_is_wrong_in_a_bad_one() {
    let db = Db::new();
    let file = db.dir.path().join("access.toml");
    std::fs::write(
        &file,
        format!(
            "[[principal]]\nname = \"team-a\"\ntoken_sha256 = \"{}\"\ngrants = [{{ names = \"team-a/*\", actions = [\"use\", \"read\"] }}]\n",
            "ab".repeat(32)
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let out = db.ok(&["access", "check", f]);
    assert_eq!(out, "team-a: use+read on team-a/*\n");
    let json: Value = serde_json::from_str(&db.ok(&["--json", "access", "check", f])).unwrap();
    assert_eq!(json["principals"][0]["grants"][0]["names"], "team-a/*");

    std::fs::write(
        &file,
        "[[principal]]\nname = \"x\"\ntoken_sha256 = \"12\"\n",
    )
    .unwrap();
    let (code, err) = db.fails(&["access", "check", f]);
    assert_eq!(code, 1);
    assert!(
        err.contains("64 hex digits") && err.contains("access.toml"),
        "{err}"
    );
    let (_, err) = db.fails(&["access", "check", "/nonexistent/access.toml"]);
    assert!(err.contains("cannot read"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_an_access_file_refuses_and_audits() {
    let db = Db::new();
    db.ok(&["create", "team-a/s"]);
    db.ok(&["create", "team-b/s"]);
    let digest = |t: &str| {
        let (ok, out, _) = hash(&db, t.as_bytes());
        assert!(ok);
        out.trim().to_owned()
    };
    let file = db.dir.path().join("access.toml");
    std::fs::write(
        &file,
        format!(
            "[[principal]]\nname = \"team-a\"\ntoken_sha256 = \"{}\"\ngrants = [{{ names = \"team-a/*\", actions = [\"use\", \"read\", \"admin\"] }}]\n",
            digest("token-a-0123456789")
        ),
    )
    .unwrap();
    let audit = db.dir.path().join("audit.log");
    let srv = ServerProc::start(
        &db,
        &[
            "--access-file",
            file.to_str().unwrap(),
            "--audit-log",
            audit.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let client = reqwest::Client::new();
    let post = |path: &str| client.post(srv.url(path)).bearer_auth("token-a-0123456789");
    let res = post("/v1/sequences/team-b%2Fs/next").send().await.unwrap();
    assert_eq!(res.status(), 403);
    let res = post("/v1/sequences/team-a%2Fs/next").send().await.unwrap();
    assert_eq!(res.status(), 200);
    let res = client
        .delete(srv.url("/v1/sequences/team-a%2Fs"))
        .bearer_auth("token-a-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // team-b's sequence was not touched by the refused request.
    assert_eq!(db.ok(&["next", "team-b/s"]), "1\n");
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["event"].as_str().unwrap(),
                l["object"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(events, [("refused", "team-b/s"), ("admin", "team-a/s")]);
    assert!(lines.iter().all(|l| l["principal"] == "team-a"));
    // The token itself is in no line.
    assert!(
        !std::fs::read_to_string(&audit)
            .unwrap()
            .contains("token-a-0123456789")
    );
}

/// Writes `text` over `path` in place, keeping its modification time: only
/// a SIGHUP, not the file watcher, can then notice a change of the same
/// length.
fn rewrite_unseen(path: &std::path::Path, text: &str) {
    let before = std::fs::metadata(path).unwrap();
    assert_eq!(
        before.len(),
        text.len() as u64,
        "same length, or the watcher sees it"
    );
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.set_modified(before.modified().unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_access_file_under_load() {
    let db = Db::new();
    db.ok(&["create", "team-a/s", "--block", "50"]);
    let digest = |t: &str| {
        let (ok, out, _) = hash(&db, t.as_bytes());
        assert!(ok);
        out.trim().to_owned()
    };
    let file_with = |team_a: &[&str]| {
        let list: Vec<String> = team_a
            .iter()
            .map(|t| format!("\"{}\"", digest(t)))
            .collect();
        format!(
            "[[principal]]\nname = \"ops\"\ntoken_sha256 = \"{}\"\ngrants = [{{ names = \"*\", actions = [\"use\", \"read\", \"admin\"] }}]\n\
             [[principal]]\nname = \"team-a\"\ntoken_sha256 = [{}]\ngrants = [{{ names = \"team-a/*\", actions = [\"use\", \"read\"] }}]\n",
            digest("ops-0123456789"),
            list.join(", ")
        )
    };
    let (old, new, other) = ("old-0123456789", "new-0123456789", "oth-0123456789");
    let file = db.dir.path().join("access.toml");
    std::fs::write(&file, file_with(&[old])).unwrap();
    let srv = ServerProc::start(&db, &["--access-file", file.to_str().unwrap()], &[]).await;
    let client = reqwest::Client::new();
    let next = srv.url("/v1/sequences/team-a%2Fs/next");
    let status = |token: &'static str| {
        let (client, next) = (client.clone(), next.clone());
        async move {
            client
                .post(&next)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    // Load with a token that stays valid throughout.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let load = {
        let (client, next) = (client.clone(), next.clone());
        tokio::spawn(async move {
            let (mut n, mut failed) = (0u32, Vec::new());
            while !*stop_rx.borrow() && n < 200_000 {
                let st = client
                    .post(&next)
                    .bearer_auth("ops-0123456789")
                    .send()
                    .await
                    .unwrap()
                    .status();
                if !st.is_success() {
                    failed.push(st.as_u16());
                }
                n += 1;
            }
            (n, failed)
        })
    };
    /// Awaits `token` answering `want` (bounded).
    async fn until<F: std::future::Future<Output = u16>>(mut f: impl FnMut() -> F, want: u16) {
        for _ in 0..300 {
            if f().await == want {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("never answered {want}");
    }
    // Add the new token beside the old one.
    std::fs::write(&file, file_with(&[old, new])).unwrap();
    srv.signal(libc::SIGHUP);
    until(|| status(new), 200).await;
    assert_eq!(status(old).await, 200);
    // Take the old one out, unseen by the watcher: only SIGHUP reloads.
    rewrite_unseen(&file, &file_with(&[other, new]));
    assert_eq!(
        status(old).await,
        200,
        "nothing reloaded without the signal"
    );
    srv.signal(libc::SIGHUP);
    until(|| status(old), 401).await;
    assert_eq!(status(new).await, 200);
    stop_tx.send(true).unwrap();
    let (n, failed) = load.await.unwrap();
    assert!(n > 0);
    assert!(
        failed.is_empty(),
        "{failed:?} of {n} requests with a valid token failed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_names_a_principal_with_only_its_grants() {
    use keysmith_testsupport::tls::{Certs, HttpsClient, SERVER_NAMES};
    let certs = Certs::generate(&SERVER_NAMES, "team-a");
    let db = Db::new();
    db.ok(&["create", "team-a/s"]);
    db.ok(&["create", "team-b/s"]);
    let file = db.dir.path().join("access.toml");
    std::fs::write(
        &file,
        "[[principal]]\nname = \"team-a\"\nclient_cert_subject = \"CN=team-a\"\n\
         grants = [{ names = \"team-a/*\", actions = [\"read\"] }]\n",
    )
    .unwrap();
    let audit = db.dir.path().join("audit.log");
    let p = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let srv = ServerProc::start(
        &db,
        &[
            "--tls-cert",
            &p(&certs.server_cert),
            "--tls-key",
            &p(&certs.server_key),
            "--client-ca",
            &p(&certs.ca),
            "--access-file",
            &p(&file),
            "--audit-log",
            &p(&audit),
        ],
        &[],
    )
    .await;
    let addr = srv.addr();
    let client = HttpsClient::new(
        &[&certs.ca],
        Some((&certs.client_cert, &certs.client_key)),
        &[],
    );
    let (st, body) = client.get(addr, "/v1/sequences/team-a%2Fs").unwrap();
    assert_eq!(st, 200, "{body}");
    let (st, body) = client.get(addr, "/v1/sequences/team-b%2Fs").unwrap();
    assert_eq!(st, 403, "{body}");
    assert!(body.contains("team-a") && body.contains("`read`"), "{body}");
    let (st, body) = client.get(addr, "/v1/sequences").unwrap();
    assert_eq!(st, 200);
    assert!(
        body.contains("team-a/s") && !body.contains("team-b"),
        "{body}"
    );
    let refused: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["principal"], "team-a");
    assert!(
        refused[0]["peer"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
}

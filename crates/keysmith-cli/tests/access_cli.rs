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

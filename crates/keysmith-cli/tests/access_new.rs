//! `keysmith access new`, the warnings and client CA check of `keysmith
//! access check`, and `keysmith serve --access-file` refusing a token
//! beside the file (issue 48, items 2, 3 and 8), on the real binary.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::Db;
use keysmith_testsupport::tls::Certs;

/// `keysmith access hash` of `token`.
fn hash(db: &Db, token: &str) -> String {
    let mut child = db
        .cmd()
        .args(["access", "hash"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(token.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn access_new_prints_a_random_token_and_the_entry_of_its_digest() {
    let db = Db::new();
    let run = || {
        let out = db.run(&["access", "new", "team-a"]);
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (first, err) = run();
    let (second, _) = run();
    let token = first.lines().next().unwrap();
    assert_eq!(token.len(), 64, "256 bits in hex: {first}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
    assert_ne!(Some(token), second.lines().next(), "a new token each time");
    // The entry names the principal by the token's digest, and nothing else
    // of it.
    let entry: String = first.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert!(entry.contains("name = \"team-a\""), "{entry}");
    assert!(
        entry.contains(&format!("token_sha256 = \"{}\"", hash(&db, token))),
        "{entry}"
    );
    assert!(!entry.contains(token), "{entry}");
    assert!(
        err.contains("--token-file") && err.contains("never in the access file"),
        "{err}"
    );
    // The entry is a good access file.
    let file = db.dir.path().join("access.toml");
    std::fs::write(&file, &entry).unwrap();
    db.ok(&["access", "check", file.to_str().unwrap()]);

    // --out: the token goes to a new file of mode 600, not to stdout.
    let out_file = db.dir.path().join("team-b.token");
    let out = db.ok(&[
        "access",
        "new",
        "team-b",
        "--out",
        out_file.to_str().unwrap(),
    ]);
    let token = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(token.trim().len(), 64);
    assert!(!out.contains(token.trim()), "{out}");
    assert!(out.contains(&hash(&db, token.trim())), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&out_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Never over an existing file; never a reserved name.
    let (code, err) = db.fails(&[
        "access",
        "new",
        "team-c",
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("never overwritten"), "{err}");
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), token);
    let (_, err) = db.fails(&["access", "new", "token"]);
    assert!(err.contains("the server's own"), "{err}");
}

#[test]
fn check_warns_about_a_prefix_without_a_separator() {
    let db = Db::new();
    let file = db.dir.path().join("access.toml");
    std::fs::write(
        &file,
        format!(
            "[[principal]]\nname = \"team-a\"\ntoken_sha256 = \"{}\"\ngrants = [{{ names = \"team-a*\", actions = [\"use\"] }}]\n",
            "ab".repeat(32)
        ),
    )
    .unwrap();
    let out = db.run(&["access", "check", file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("warning:") && err.contains("team-a*") && err.contains("team-a-*"),
        "{err}"
    );
}

#[test]
fn check_knows_the_client_ca_bundle() {
    let db = Db::new();
    let one = Certs::generate_with_ca(&["127.0.0.1"], "ops-cert", "team CA one");
    let two = Certs::generate_with_ca(&["127.0.0.1"], "ops-cert", "team CA two");
    let bundle = db.dir.path().join("bundle.pem");
    let mut pem = std::fs::read(&one.ca).unwrap();
    pem.extend(std::fs::read(&two.ca).unwrap());
    std::fs::write(&bundle, pem).unwrap();
    let file = db.dir.path().join("access.toml");
    let write = |pin: &str| {
        std::fs::write(
            &file,
            format!("[[principal]]\nname = \"ops\"\nclient_cert_subject = \"CN=ops-cert\"\n{pin}grants = []\n"),
        )
        .unwrap();
    };
    let f = file.to_str().unwrap();
    write("");
    // Without the bundle: a warning that it was not checked.
    let out = db.run(&["access", "check", f]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("warning:") && err.contains("--client-ca"),
        "{err}"
    );
    // With a two-CA bundle: the subject alone is refused.
    let (code, err) = db.fails(&[
        "access",
        "check",
        f,
        "--client-ca",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("\"ops\"")
            && err.contains("client_cert_issuer")
            && err.contains("CN=team CA one"),
        "{err}"
    );
    // One CA, or the issuer pinned: good.
    db.ok(&[
        "access",
        "check",
        f,
        "--client-ca",
        one.ca.to_str().unwrap(),
    ]);
    write("client_cert_issuer = \"CN=team CA one\"\n");
    db.ok(&[
        "access",
        "check",
        f,
        "--client-ca",
        bundle.to_str().unwrap(),
    ]);
}

/// Kills the child when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_refuses_a_token_beside_an_access_file_and_counts_principals() {
    let db = Db::new();
    let file = db.dir.path().join("access.toml");
    std::fs::write(
        &file,
        format!(
            "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{}\"\n[[principal]]\nname = \"b\"\ntoken_sha256 = \"{}\"\n",
            "ab".repeat(32),
            "cd".repeat(32)
        ),
    )
    .unwrap();
    let serve = |token: Option<&str>| {
        let mut cmd = db.cmd();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--access-file"])
            .arg(&file)
            .env_remove("KEYSMITH_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(t) = token {
            cmd.env("KEYSMITH_TOKEN", t);
        }
        cmd.spawn().unwrap()
    };
    // With $KEYSMITH_TOKEN: it does not start.
    let proc = serve(Some("hidden-root-token-0123456789"));
    let pid = proc.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(proc.wait_with_output().unwrap()));
    let out = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => out,
        Err(_) => {
            // kill(2) on our own child, which has not been waited for.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the server started with a token beside its access file");
        }
    };
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("keysmith access hash") && err.contains("token_sha256"),
        "{err}"
    );
    assert!(
        !err.contains("hidden-root-token"),
        "never shows the token: {err}"
    );

    // Without: its first line says how many principals it loaded.
    let mut child = Killed(serve(None));
    let mut first = String::new();
    BufReader::new(child.0.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("2 principal(s) loaded"), "{first}");
}

//! `keysmith serve --tls-cert --tls-key [--client-ca]` on the real binary,
//! with certificates the test makes: HTTPS with the CA works and plain HTTP
//! to the port gets no answer; with a client CA a client without a
//! certificate (or with one another CA signed) is refused; SIGHUP serves a
//! renewed certificate to new connections, and a broken file keeps the old
//! one while the server goes on answering; unusable files stop the server
//! before it listens, naming the file.

mod common;

use std::io::{Read, Write};
use std::path::Path;

use common::Db;
use common::server::{SERVER_DEADLINE, ServerProc};
use keysmith_testsupport::tls::{Certs, HttpsClient, SERVER_NAMES, first_certificate_der};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The server's next stderr line holding `what`, within the deadline.
fn line_with(server: &ServerProc, what: &str) -> String {
    loop {
        let line = server
            .lines
            .recv_timeout(SERVER_DEADLINE)
            .unwrap_or_else(|e| panic!("no line with {what:?} from the server: {e}"));
        if line.contains(what) {
            return line;
        }
    }
}

/// Checks that `text` holds no line of the key file `key`.
fn no_key_in(text: &str, key: &Path) {
    let pem = std::fs::read_to_string(key).unwrap();
    for line in pem.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!text.contains(line), "key material shows: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_the_ca_works_and_plain_http_to_the_tls_port_fails() {
    let certs = Certs::generate(&SERVER_NAMES, "team-a");
    let db = Db::new();
    db.ok(&["create", "orders"]);
    let server = ServerProc::start(
        &db,
        &[
            "--tls-cert",
            s(&certs.server_cert),
            "--tls-key",
            s(&certs.server_key),
        ],
        &[],
    )
    .await;
    assert!(server.base().starts_with("https://"), "{}", server.base());
    let addr = server.addr();

    let client = HttpsClient::new(&[&certs.ca], None, &[b"http/1.1"]);
    let mut conn = client.connect(addr).unwrap();
    assert_eq!(conn.alpn().as_deref(), Some(&b"http/1.1"[..]));
    let (status, body) = conn.get("/v1/sequences/orders").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"orders\""), "{body}");
    // A second request on the same connection.
    assert_eq!(conn.get("/healthz").unwrap().0, 200);

    // HTTP/2 is offered by ALPN.
    let h2 = HttpsClient::new(&[&certs.ca], None, &[b"h2", b"http/1.1"]);
    assert_eq!(
        h2.connect(addr).unwrap().alpn().as_deref(),
        Some(&b"h2"[..])
    );

    // A client that trusts another CA refuses the server.
    let stranger = HttpsClient::new(&[&certs.other_ca], None, &[]);
    let err = stranger.get(addr, "/healthz").unwrap_err();
    assert!(err.contains("certificate"), "{err}");

    // Plain HTTP to the TLS port: no HTTP answer, the connection is closed.
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(SERVER_DEADLINE)).unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    // Reset or end of stream: either way it ends, with no HTTP in it.
    let _ = tcp.read_to_end(&mut got);
    assert!(
        !String::from_utf8_lossy(&got).contains("HTTP/"),
        "plain HTTP got an answer: {got:?}"
    );
    // And the server still serves HTTPS.
    assert_eq!(client.get(addr, "/healthz").unwrap().0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_only_clients_with_a_certificate_it_signed_get_in() {
    let certs = Certs::generate(&SERVER_NAMES, "team-a");
    let other = Certs::generate(&SERVER_NAMES, "team-b");
    let db = Db::new();
    // From the config file, with paths relative to its directory.
    let dir = db.dir.path();
    for (from, to) in [
        (&certs.server_cert, "server.pem"),
        (&certs.server_key, "server-key.pem"),
        (&certs.ca, "clients-ca.pem"),
    ] {
        std::fs::copy(from, dir.join(to)).unwrap();
    }
    let config = dir.join("keysmith.toml");
    std::fs::write(
        &config,
        "tls-cert = \"server.pem\"\ntls_key = \"server-key.pem\"\nclient-ca = \"clients-ca.pem\"\n",
    )
    .unwrap();
    let mut server = ServerProc::start(&db, &["--config", s(&config)], &[]).await;
    assert!(server.base().starts_with("https://"), "{}", server.base());
    let addr = server.addr();

    let anonymous = HttpsClient::new(&[&certs.ca], None, &[]);
    let err = anonymous.get(addr, "/healthz").unwrap_err();
    assert!(err.contains("CertificateRequired"), "{err}");

    let outsider = HttpsClient::new(
        &[&certs.ca],
        Some((&other.client_cert, &other.client_key)),
        &[],
    );
    let err = outsider.get(addr, "/healthz").unwrap_err();
    assert!(err.contains("alert"), "{err}");

    let member = HttpsClient::new(
        &[&certs.ca],
        Some((&certs.client_cert, &certs.client_key)),
        &[],
    );
    assert_eq!(member.get(addr, "/healthz").unwrap().0, 200);

    server.signal(libc::SIGTERM);
    assert!(server.wait().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_serves_a_renewed_certificate_and_a_broken_file_keeps_the_old() {
    let first = Certs::generate(&SERVER_NAMES, "team-a");
    let renewed = Certs::generate(&SERVER_NAMES, "team-a");
    let db = Db::new();
    let cert = db.dir.path().join("server.pem");
    let key = db.dir.path().join("server-key.pem");
    std::fs::copy(&first.server_cert, &cert).unwrap();
    std::fs::copy(&first.server_key, &key).unwrap();
    let server = ServerProc::start(
        &db,
        &[
            "--tls-cert",
            s(&cert),
            "--tls-key",
            s(&key),
            // The connection opened first stays open across the reloads.
            "--header-timeout-ms",
            "600000",
            "--idle-timeout-ms",
            "600000",
        ],
        &[],
    )
    .await;
    let addr = server.addr();
    let client = HttpsClient::new(&[&first.ca, &renewed.ca], None, &[]);
    let first_der = first_certificate_der(&first.server_cert);
    let renewed_der = first_certificate_der(&renewed.server_cert);
    assert_ne!(first_der, renewed_der);

    let mut open = client.connect(addr).unwrap();
    assert_eq!(open.served_certificate(), first_der);
    assert_eq!(open.get("/healthz").unwrap().0, 200);

    // Renewal: new files, then SIGHUP.
    std::fs::copy(&renewed.server_cert, &cert).unwrap();
    std::fs::copy(&renewed.server_key, &key).unwrap();
    server.signal(libc::SIGHUP);
    let line = line_with(&server, "SIGHUP");
    assert!(line.contains("reloaded the TLS certificate"), "{line}");
    let mut fresh = client.connect(addr).unwrap();
    assert_eq!(
        fresh.served_certificate(),
        renewed_der,
        "a new connection after SIGHUP is not served the renewed certificate"
    );
    assert_eq!(fresh.get("/healthz").unwrap().0, 200);
    // The connection opened before keeps its session and is still served.
    assert_eq!(open.get("/healthz").unwrap().0, 200);

    // A broken key file: the reload fails, saying which file, and the
    // renewed certificate stays in use.
    std::fs::write(&key, "not a key\n").unwrap();
    server.signal(libc::SIGHUP);
    let line = line_with(&server, "SIGHUP");
    assert!(
        line.contains("reload failed") && line.contains(s(&key)),
        "{line}"
    );
    no_key_in(&line, &renewed.server_key);
    let mut after = client.connect(addr).unwrap();
    assert_eq!(after.served_certificate(), renewed_der);
    assert_eq!(after.get("/healthz").unwrap().0, 200);
    assert_eq!(fresh.get("/healthz").unwrap().0, 200);
}

#[test]
fn unusable_tls_options_stop_the_server_before_it_listens() {
    let certs = Certs::generate(&SERVER_NAMES, "team-a");
    let other = Certs::generate(&SERVER_NAMES, "team-b");
    let db = Db::new();
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let out = db
            .cmd()
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("listening"), "{extra:?} started: {err}");
        (out.status.code(), err)
    };
    let missing = certs.dir().join("missing.pem");
    let (code, err) = serve(&["--tls-cert", s(&missing), "--tls-key", s(&certs.server_key)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot read the TLS certificate file {}",
            s(&missing)
        )),
        "{err}"
    );

    let (code, err) = serve(&[
        "--tls-cert",
        s(&certs.server_cert),
        "--tls-key",
        s(&other.server_key),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "the TLS key file {} is not the key of the certificate in {}",
            s(&other.server_key),
            s(&certs.server_cert)
        )),
        "{err}"
    );
    no_key_in(&err, &other.server_key);

    // A certificate without its key, or a client CA without TLS: usage errors.
    let (code, err) = serve(&["--tls-cert", s(&certs.server_cert)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls-key"), "{err}");
    let (code, err) = serve(&["--client-ca", s(&certs.ca)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls-cert"), "{err}");
}

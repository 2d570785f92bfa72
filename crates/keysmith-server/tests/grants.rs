//! Grants that say exactly what they mean (issue 48): fixed names only when
//! named, the server's own ids worker group, shard-key scopes, no hidden
//! root token, client certificates pinned to their issuer, and a grant
//! revoked while a request runs.

mod common;

use common::{TestServer, call, json_of, store_state};
use keysmith_server::access::{AccessFile, token_digest_hex};
use keysmith_server::{Config, TlsFiles, Token};
use keysmith_testsupport::tls::{Certs, HttpsClient};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OPS: &str = "ops-token-0123456789";
const TEAM_A: &str = "team-a-token-0123456789";
const APP_A: &str = "app-a-token-0123456789";
const TEAM_B: &str = "team-b-token-0123456789";
const OLD: &str = "old-token-0123456789";
const PREFIXES: &str = "prefixes-token-0123456789";
const EXACT: &str = "exact-token-0123456789";

fn d(t: &str) -> String {
    token_digest_hex(t.as_bytes())
}

/// A principal with every right, and `more`.
fn file(more: &str) -> String {
    format!(
        "[[principal]]\nname = \"ops\"\ntoken_sha256 = \"{}\"\ngrants = [ {{ names = \"*\", actions = [\"use\", \"read\", \"admin\"] }} ]\n{more}",
        d(OPS)
    )
}

async fn server(access: String) -> TestServer {
    TestServer::start_with(move |c, db| {
        let path = db.parent().unwrap().join("access.toml");
        std::fs::write(&path, &access).unwrap();
        c.access_file = Some(path);
        c.shard_key_secret = Some(
            keysmith::shard_key::ShardKeySecret::new(*b"0123456789abcdef0123456789abcdef").unwrap(),
        );
    })
    .await
}

fn shard_key() -> Value {
    json!({"origin": "c", "shard": 3, "record": 42})
}

/// `names = "shard*"`, `"c*"`, `"i*"` cover none of the fixed names
/// `shard-keys`, `counters`, `ids`; grants that name them do.
#[tokio::test]
async fn fixed_names_are_granted_only_when_named_exactly() {
    let srv = server(file(&format!(
        r#"
[[principal]]
name = "prefixes"
token_sha256 = "{}"
grants = [ {{ names = "shard*", actions = ["use", "admin"] }}, {{ names = "c*", actions = ["use"] }}, {{ names = "i*", actions = ["use"] }} ]

[[principal]]
name = "exact"
token_sha256 = "{}"
grants = [ {{ names = "shard-keys", actions = ["use", "admin"] }}, {{ names = "counters", actions = ["use"] }}, {{ names = "ids", actions = ["use"] }} ]
"#,
        d(PREFIXES),
        d(EXACT)
    )))
    .await;
    let (st, minted) = call(
        &srv,
        OPS,
        Method::POST,
        "/v1/shard-keys/encode",
        Some(shard_key()),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{minted}");
    let decode = json!({ "external": minted["external"] });
    let routes = [
        ("/v1/shard-keys/encode", Some(shard_key())),
        ("/v1/shard-keys/decode", Some(decode.clone())),
        ("/v1/counters/next", None),
        ("/v1/ids/next", None),
    ];
    let before = store_state(&srv.db_path());
    for (path, body) in &routes {
        let (st, v) = call(&srv, PREFIXES, Method::POST, path, body.clone()).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{path}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("prefixes"),
            "{v}"
        );
    }
    assert_eq!(
        store_state(&srv.db_path()),
        before,
        "a refusal changes nothing"
    );
    for (path, body) in &routes {
        let (st, v) = call(&srv, EXACT, Method::POST, path, body.clone()).await;
        assert_eq!(st, StatusCode::OK, "{path}: {v}");
    }
}

/// `use` on the server's ids group takes ids through `/v1/ids/next`, but
/// leasing that group's worker ids directly needs admin on every name: a
/// tenant cannot hold them all and starve every tenant's `/v1/ids/next`.
#[tokio::test]
async fn a_tenant_cannot_lease_the_servers_own_ids_group() {
    let srv = server(file(&format!(
        r#"
[[principal]]
name = "tenant"
token_sha256 = "{}"
grants = [ {{ names = "ids", actions = ["use", "read"] }}, {{ names = "tenant/*", actions = ["use"] }} ]
"#,
        d(TEAM_A)
    )))
    .await;
    let (st, v) = call(&srv, TEAM_A, Method::POST, "/v1/ids/next?count=2", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let before = store_state(&srv.db_path());
    for (path, body) in [
        ("/v1/workers/ids/lease", None),
        ("/v1/workers/ids/lease/renew", Some(json!({"token": "x"}))),
        ("/v1/workers/ids/lease/release", Some(json!({"token": "x"}))),
    ] {
        let (st, v) = call(&srv, TEAM_A, Method::POST, path, body).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{path}: {v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains("server's own") && m.contains("admin"), "{m}");
    }
    assert_eq!(
        store_state(&srv.db_path()),
        before,
        "a refusal changes nothing"
    );
    // It still reads the group, takes ids, and leases groups of its own.
    let (st, v) = call(&srv, TEAM_A, Method::GET, "/v1/workers/ids", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = call(&srv, TEAM_A, Method::POST, "/v1/ids/next", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = call(
        &srv,
        TEAM_A,
        Method::POST,
        "/v1/workers/tenant%2Fw/lease",
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // An operator (admin on "*") may.
    let (st, v) = call(&srv, OPS, Method::POST, "/v1/workers/ids/lease", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

/// Principals of one `shard_key_scope` share keys; another scope can
/// neither decode them nor mint the same strings.
#[tokio::test]
async fn shard_key_scopes_keep_teams_apart() {
    let srv = server(file(&format!(
        r#"
[[principal]]
name = "team-a"
token_sha256 = "{}"
shard_key_scope = "team-a"
grants = [ {{ names = "shard-keys", actions = ["use", "admin"] }} ]

[[principal]]
name = "app-a"
token_sha256 = "{}"
shard_key_scope = "team-a"
grants = [ {{ names = "shard-keys", actions = ["use"] }} ]

[[principal]]
name = "team-b"
token_sha256 = "{}"
shard_key_scope = "team-b"
grants = [ {{ names = "shard-keys", actions = ["use", "admin"] }} ]
"#,
        d(TEAM_A),
        d(APP_A),
        d(TEAM_B)
    )))
    .await;
    let encode = |t| {
        call(
            &srv,
            t,
            Method::POST,
            "/v1/shard-keys/encode",
            Some(shard_key()),
        )
    };
    let (st, a) = encode(TEAM_A).await;
    assert_eq!(st, StatusCode::OK, "{a}");
    let (st, b) = encode(TEAM_B).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    let (_, server_wide) = encode(OPS).await;
    let (a, b) = (a["external"].clone(), b["external"].clone());
    assert_ne!(a, b, "another scope mints other strings");
    assert_ne!(a, server_wide["external"]);
    let decode = |t, ext: &Value| {
        call(
            &srv,
            t,
            Method::POST,
            "/v1/shard-keys/decode",
            Some(json!({ "external": ext })),
        )
    };
    let (st, v) = decode(APP_A, &a).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["key"]["shard"], 3, "{v}");
    for (who, ext) in [
        (TEAM_B, &a),
        (OPS, &a),
        (TEAM_A, &b),
        (APP_A, &server_wide["external"]),
    ] {
        let (st, v) = decode(who, ext).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    }
}

/// `$KEYSMITH_TOKEN` / `--token-file` beside an access file would be a
/// root principal the file does not show: refused, saying how to name it.
#[test]
fn a_token_beside_an_access_file_is_refused() {
    let config = Config {
        token: Some(Token::new("a-token-0123456789").unwrap()),
        access_file: Some("/etc/keysmith/access.toml".into()),
        ..Config::default()
    };
    let e = config.validate().unwrap_err().to_string();
    assert!(
        e.contains("token_sha256")
            && e.contains("keysmith access hash")
            && e.contains("/etc/keysmith/access.toml"),
        "{e}"
    );
    assert!(
        !e.contains("a-token-0123456789"),
        "never shows the token: {e}"
    );
}

/// The digest of the empty string names no token anyone should have.
#[test]
fn the_digest_of_the_empty_string_is_refused() {
    let text = format!(
        "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{}\"\n",
        token_digest_hex(b"")
    );
    let e = AccessFile::parse(&text).unwrap_err();
    assert!(
        e.contains("empty string") && e.contains("keysmith access new"),
        "{e}"
    );
}

/// A two-CA client bundle, each CA with a client certificate of the same
/// subject `CN=ops-cert`: the certificate of the other CA does not become
/// principal `ops`, pinned to its issuer; a digest pin names exactly one
/// certificate; a subject-only principal beside such a bundle, or without a
/// client CA, is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_names_a_principal_only_with_its_issuer() {
    let one = Certs::generate_with_ca(&["127.0.0.1"], "ops-cert", "team CA one");
    let two = Certs::generate_with_ca(&["127.0.0.1"], "ops-cert", "team CA two");
    let bundle = one.dir().join("bundle.pem");
    let mut pem = std::fs::read(&one.ca).unwrap();
    pem.extend(std::fs::read(&two.ca).unwrap());
    std::fs::write(&bundle, pem).unwrap();
    let der = keysmith_testsupport::tls::first_certificate_der(&two.client_cert);
    let two_digest = token_digest_hex(&der);
    let access = format!(
        r#"
[[principal]]
name = "ops"
client_cert_subject = "CN=ops-cert"
client_cert_issuer = "CN=team CA one"
grants = [ {{ names = "*", actions = ["use", "read", "admin"] }} ]

[[principal]]
name = "two-ops"
client_cert_sha256 = "{two_digest}"
grants = [ {{ names = "two/*", actions = ["read"] }} ]
"#
    );
    let tls = TlsFiles {
        cert: one.server_cert.clone(),
        key: one.server_key.clone(),
        client_ca: Some(bundle.clone()),
    };
    let t = tls.clone();
    let srv = TestServer::start_with(move |c, db| {
        let path = db.parent().unwrap().join("access.toml");
        std::fs::write(&path, &access).unwrap();
        c.access_file = Some(path);
        c.tls = Some(t);
    })
    .await;
    let addr = srv.addr;
    let get = |certs: &Certs| {
        let client = HttpsClient::new(
            &[&one.ca],
            Some((&certs.client_cert, &certs.client_key)),
            &[b"http/1.1"],
        );
        client.get(addr, "/v1/sequences/nothing").unwrap()
    };
    let (ca_one, ca_two) = tokio::task::block_in_place(|| (get(&one), get(&two)));
    // ops may read anything: the sequence is not there.
    assert_eq!(ca_one.0, 404, "{}", ca_one.1);
    // The other CA's CN=ops-cert is not ops, but the principal its digest
    // names, which may not read this name.
    assert_eq!(ca_two.0, 403, "{}", ca_two.1);
    assert!(ca_two.1.contains("two-ops"), "{}", ca_two.1);
    drop(srv);

    // Subject only, beside two CAs: refused at start, naming what to add.
    let start = |access: &str, tls: Option<TlsFiles>| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.toml");
        std::fs::write(&path, access).unwrap();
        let config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            store_url: common::sqlite_url(&dir.path().join("k.db"), ""),
            access_file: Some(path),
            tls,
            ..Config::default()
        };
        async move {
            let r = keysmith_server::Server::bind(config).await.map(drop);
            drop(dir);
            r.map_err(|e| e.to_string())
        }
    };
    let subject_only =
        "[[principal]]\nname = \"ops\"\nclient_cert_subject = \"CN=ops-cert\"\ngrants = []\n";
    let e = start(subject_only, Some(tls.clone())).await.unwrap_err();
    assert!(
        e.contains("\"ops\"") && e.contains("client_cert_issuer") && e.contains("CN=team CA two"),
        "{e}"
    );
    // With the one CA that signs it, the subject is enough.
    let single = TlsFiles {
        client_ca: Some(one.ca.clone()),
        ..tls.clone()
    };
    start(subject_only, Some(single)).await.unwrap();
    // Principals by certificate on a server that asks for none.
    let e = start(subject_only, None).await.unwrap_err();
    assert!(e.contains("\"ops\"") && e.contains("--client-ca"), "{e}");
}

/// The `keysmith_http_requests_in_flight` gauge.
async fn in_flight(srv: &TestServer) -> i64 {
    let text = srv
        .client
        .get(srv.url("/metrics"))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("keysmith_http_requests_in_flight "))
        .unwrap_or_else(|| panic!("no in-flight gauge in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// A request allowed before a reload that revoked its grant, whose body
/// was still arriving, is refused when it would write, and takes nothing.
#[tokio::test]
async fn a_grant_revoked_while_a_request_runs_refuses_it() {
    let with = |grant: &str| {
        file(&format!(
            "[[principal]]\nname = \"old\"\ntoken_sha256 = \"{}\"\ngrants = [ {{ names = \"{grant}\", actions = [\"use\"] }} ]\n",
            d(OLD)
        ))
    };
    let srv = server(with("team-a/*")).await;
    let (st, v) = call(
        &srv,
        OPS,
        Method::POST,
        "/v1/sequences",
        Some(json!({"name": "team-a/orders", "block": 10})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let before = store_state(&srv.db_path());

    // The head now, the body later.
    let mut tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    tcp.write_all(
        format!(
            "POST /v1/sequences/team-a%2Forders/next HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {OLD}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // It is in flight (besides the scrape itself): past authorization,
    // waiting for its body.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while in_flight(&srv).await < 2 {
        assert!(
            std::time::Instant::now() < until,
            "the request never arrived"
        );
        tokio::task::yield_now().await;
    }
    let path = srv.dir.path().join("access.toml");
    std::fs::write(&path, with("team-b/*")).unwrap();
    srv.state.reload().unwrap();
    tcp.write_all(b"{}").await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    // Refused where it would write (or, had the reload come before its
    // authorization, there): either way a 403 that took nothing.
    assert!(
        answer.contains("was reloaded while this request ran") || answer.contains("lacks"),
        "{answer}"
    );
    assert_eq!(store_state(&srv.db_path()), before, "it took nothing");
    let (st, v) = call(
        &srv,
        OPS,
        Method::POST,
        "/v1/sequences/team-a%2Forders/next",
        None,
    )
    .await;
    assert_eq!(
        (st, v["values"].clone()),
        (StatusCode::OK, json!([1])),
        "{v}"
    );
}

/// A request past every check whose handler waits on the store (its handle
/// opening, on a PostgreSQL table another session locked) while a reload
/// revokes its grant is refused right before it takes values: a 403 that
/// took nothing, read back from the store.
#[tokio::test]
async fn a_grant_revoked_while_the_handler_waits_on_the_store_refuses_it() {
    let Some(pg) = keysmith_testsupport::postgres::TempPostgres::shared() else {
        return;
    };
    let schema = format!("regrant_{}", std::process::id());
    let store_url = format!("{}?schema={schema}", pg.url());
    let with = |grant: &str| {
        file(&format!(
            "[[principal]]\nname = \"old\"\ntoken_sha256 = \"{}\"\ngrants = [ {{ names = \"{grant}\", actions = [\"use\"] }} ]\n",
            d(OLD)
        ))
    };
    let access = with("team-a/*");
    let srv = TestServer::start_with(move |c, db| {
        let path = db.parent().unwrap().join("access.toml");
        std::fs::write(&path, &access).unwrap();
        c.access_file = Some(path);
        c.store_url = store_url;
    })
    .await;
    let (st, v) = call(
        &srv,
        OPS,
        Method::POST,
        "/v1/sequences",
        Some(json!({"name": "team-a/orders", "block": 10})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");

    let (db, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let row_of = async |db: &tokio_postgres::Client| -> (i64, i64) {
        let r = db
            .query_one(
                &format!("SELECT next, version FROM {schema}.sequences WHERE name = $1"),
                &[&"team-a/orders"],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    let before = row_of(&db).await;
    db.batch_execute(&format!(
        "BEGIN; LOCK TABLE {schema}.sequences IN ACCESS EXCLUSIVE MODE"
    ))
    .await
    .unwrap();

    let request = {
        let (client, url) = (
            srv.client.clone(),
            srv.url("/v1/sequences/team-a%2Forders/next"),
        );
        tokio::spawn(async move {
            json_of(client.post(url).bearer_auth(OLD).send().await.unwrap()).await
        })
    };
    // Its handler is waiting on the lock: past authorization and the
    // re-check before the handler.
    let (watch, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let waiting: i64 = watch
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%sequences%'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the request never waited on the lock"
        );
        tokio::task::yield_now().await;
    }
    let path = srv.dir.path().join("access.toml");
    std::fs::write(&path, with("team-b/*")).unwrap();
    srv.state.reload().unwrap();
    db.batch_execute("ROLLBACK").await.unwrap();

    let (st, v) = request.await.unwrap();
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("was reloaded while this request ran"), "{msg}");
    assert_eq!(row_of(&db).await, before, "it took nothing");
    db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
}

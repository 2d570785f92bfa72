//! PostgreSQL over TLS with a password, against a real server that refuses
//! plain connections (`hostnossl ... reject`) and wants the password
//! (`hostssl ... scram-sha-256`), with certificates this test makes
//! (`keysmith_testsupport::tls`).
//!
//! The whole conformance suite runs over `sslmode=verify-full` with the
//! password from a file; the other tests show each `sslmode`, the CA and
//! host-name checks, and that every failure says what to do and never shows
//! the password. Where PostgreSQL is not installed every test says why it
//! skips (or fails, with `KEYSMITH_REQUIRE_BACKENDS=1`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use keysmith::Error;
use keysmith::sequence::{self, AdoptSource};
use keysmith::shard_set::ShardSet;
use keysmith::store::{self, SequenceSpec, Store};
use keysmith_testsupport::tls::{CERT_USER, PASSWORD, TlsPostgres};

#[path = "common/tls.rs"]
mod tls;
use tls::open_error;

fn fresh_schema() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("tls{}", N.fetch_add(1, Ordering::Relaxed))
}

/// `sslmode=verify-full` with the right CA, the password from a file.
fn verified_url(pg: &TlsPostgres, host: &str, schema: &str) -> String {
    pg.url(
        host,
        &format!(
            "sslmode=verify-full&sslrootcert={}&password_file={}&schema={schema}",
            pg.certs().ca.display(),
            pg.password_file().display()
        ),
    )
}

async fn fresh_store() -> Option<Arc<dyn Store>> {
    let pg = TlsPostgres::shared()?;
    Some(
        store::open(&verified_url(pg, "127.0.0.1", &fresh_schema()))
            .await
            .unwrap(),
    )
}

mod conformance {
    keysmith::conformance_tests!(super::fresh_store, one_step_reservation = true);
}

/// A superuser connection over the server's Unix socket (trusted there, and
/// no TLS), to look at the server from outside keysmith.
async fn local_admin(pg: &TlsPostgres) -> tokio_postgres::Client {
    let socket_dir = pg.server().data_dir().parent().unwrap().to_owned();
    let mut config = tokio_postgres::Config::new();
    config
        .host_path(socket_dir)
        .port(pg.server().port())
        .user("keysmith")
        .dbname("postgres");
    let (client, conn) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

/// Connections the server sees from keysmith, and whether each is TLS.
async fn keysmith_sessions(pg: &TlsPostgres) -> Vec<(bool, String)> {
    local_admin(pg)
        .await
        .query(
            "SELECT s.ssl, coalesce(s.version, '') FROM pg_stat_ssl s
             JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'keysmith'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[tokio::test]
async fn verify_full_allocates_over_tls_with_the_password_from_a_file() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    let store = store::open(&verified_url(pg, "127.0.0.1", &fresh_schema()))
        .await
        .unwrap();
    // The handle (and with it the store's connections) stays open while
    // the server's sessions are read.
    let _seq = tls::a_sequence_allocates(store).await;

    let sessions = keysmith_sessions(pg).await;
    assert!(!sessions.is_empty(), "no keysmith session seen");
    for (ssl, version) in &sessions {
        assert!(*ssl, "a keysmith connection without TLS: {sessions:?}");
        assert!(version.starts_with("TLSv1."), "{version}");
    }
}

#[tokio::test]
async fn a_wrong_ca_fails_naming_the_ca_and_what_to_do() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    let url = pg.url(
        "127.0.0.1",
        &format!(
            "sslmode=verify-full&sslrootcert={}&password_file={}",
            pg.certs().other_ca.display(),
            pg.password_file().display()
        ),
    );
    let err = open_error(&url).await;
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        msg.contains("not signed by the CA in sslrootcert=")
            && msg.contains(&pg.certs().other_ca.display().to_string())
            && msg.contains("give sslrootcert=PATH the CA certificate"),
        "{msg}"
    );
    // verify-ca checks the same chain.
    let err = open_error(&url.replace("verify-full", "verify-ca")).await;
    assert!(err.to_string().contains("not signed by"), "{err}");
    // And so does require once a CA file is given, as libpq does.
    let err = open_error(&url.replace("verify-full", "require")).await;
    assert!(err.to_string().contains("not signed by"), "{err}");
}

#[tokio::test]
async fn a_host_name_the_certificate_does_not_name_fails_verify_full_only() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    // Connect to 127.0.0.1, but check the certificate against another name.
    let url = verified_url(pg, "db.wrong.example", &fresh_schema()) + "&hostaddr=127.0.0.1";
    let err = open_error(&url).await;
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        msg.contains("does not name the host") && msg.contains("sslmode=verify-ca"),
        "{msg}"
    );
    // verify-ca checks the CA, not the name: the same URL works.
    let store = store::open(&url.replace("verify-full", "verify-ca"))
        .await
        .unwrap();
    store.ping().await.unwrap();
    // The names the certificate does hold work with verify-full.
    store::open(&verified_url(pg, "localhost", &fresh_schema()))
        .await
        .unwrap()
        .ping()
        .await
        .unwrap();
}

#[tokio::test]
async fn require_and_prefer_encrypt_without_a_ca() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    for mode in ["sslmode=require&", "sslmode=prefer&", ""] {
        let url = pg.url(
            "127.0.0.1",
            &format!(
                "{mode}password_file={}&schema={}",
                pg.password_file().display(),
                fresh_schema()
            ),
        );
        let store = store::open(&url).await.unwrap();
        sequence::create(&*store, &SequenceSpec::new("s"))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn sslmode_disable_is_refused_by_the_server_with_what_to_do() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    let url = pg.url(
        "127.0.0.1",
        &format!(
            "sslmode=disable&password_file={}",
            pg.password_file().display()
        ),
    );
    let err = open_error(&url).await;
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        msg.contains("refuses connections without TLS") && msg.contains("remove sslmode=disable"),
        "{msg}"
    );
}

#[tokio::test]
async fn passwords_from_the_url_or_a_file_and_a_wrong_one() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    let ca = pg.certs().ca.display().to_string();
    // In the URL.
    let url = pg
        .url(
            "127.0.0.1",
            &format!(
                "sslmode=verify-full&sslrootcert={ca}&schema={}",
                fresh_schema()
            ),
        )
        .replace("keysmith@", &format!("keysmith:{PASSWORD}@"));
    store::open(&url).await.unwrap().ping().await.unwrap();

    // None at all.
    let url = pg.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let err = open_error(&url).await;
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("asks for a password and the store URL gives none"),
        "{err}"
    );

    // A wrong one, in a file or in the URL.
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("pw");
    std::fs::write(&wrong, "not-the-password\n").unwrap();
    let url = pg.url(
        "127.0.0.1",
        &format!(
            "sslmode=verify-full&sslrootcert={ca}&password_file={}",
            wrong.display()
        ),
    );
    let err = open_error(&url).await;
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        msg.contains("password authentication failed") && msg.contains("password_file=PATH"),
        "{msg}"
    );
    assert!(!msg.contains("not-the-password"), "{msg}");
    let url = pg
        .url(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        )
        .replace("keysmith@", "keysmith:wrong-secret@");
    let msg = open_error(&url).await.to_string();
    assert!(msg.contains("password authentication failed"), "{msg}");
    assert!(!msg.contains("wrong-secret"), "{msg}");
}

#[tokio::test]
async fn shard_sets_and_adopt_connect_with_the_same_tls() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    let url = verified_url(pg, "127.0.0.1", &fresh_schema());
    let set = ShardSet::new().with_shard(7, &url).unwrap();
    set.init().await.unwrap();
    set.check().await.unwrap();
    let conn = set.connect(7).await.unwrap();
    assert_eq!(conn.shard(), 7);

    // adopt reads the table over its own connection.
    local_admin(pg)
        .await
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS adopt_me (id bigint PRIMARY KEY);
             INSERT INTO adopt_me VALUES (41), (99) ON CONFLICT DO NOTHING;",
        )
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(keysmith::store::memory::MemoryStore::new());
    let report = sequence::adopt(
        &*store,
        "adopted",
        &AdoptSource {
            database: verified_url(pg, "127.0.0.1", "keysmith"),
            table: "adopt_me".into(),
            column: "id".into(),
        },
        true,
        false,
    )
    .await
    .unwrap();
    assert_eq!(report.next_after, 100);

    // A wrong CA fails there too, saying so.
    let bad = url.replace(
        &pg.certs().ca.display().to_string(),
        &pg.certs().other_ca.display().to_string(),
    );
    let err = ShardSet::new()
        .with_shard(7, &bad)
        .unwrap()
        .check()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not signed by the CA in sslrootcert="),
        "{err}"
    );
}

#[tokio::test]
async fn a_client_certificate_logs_in_without_a_password() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    local_admin(pg)
        .await
        .batch_execute(&format!(
            "DO $$ BEGIN CREATE ROLE {CERT_USER} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
             GRANT CREATE ON DATABASE postgres TO {CERT_USER};"
        ))
        .await
        .unwrap();
    let c = pg.certs();
    let base = pg
        .url(
            "127.0.0.1",
            &format!(
                "sslmode=verify-full&sslrootcert={}&schema={}",
                c.ca.display(),
                fresh_schema()
            ),
        )
        .replace("keysmith@", &format!("{CERT_USER}@"));
    let with_cert = format!(
        "{base}&sslcert={}&sslkey={}",
        c.client_cert.display(),
        c.client_key.display()
    );
    let store = store::open(&with_cert).await.unwrap();
    sequence::create(&*store, &SequenceSpec::new("s"))
        .await
        .unwrap();
    // Without it the server says no, and the message says what to add.
    let err = open_error(&base).await;
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        err.to_string().contains("add sslcert=PATH&sslkey=PATH"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_tls_parameters_say_what_to_do_and_hide_the_password() {
    let cases = [
        (
            "sslmode=verify-all",
            "sslmode=\"verify-all\" is not a TLS mode",
        ),
        (
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            "cannot read certificates (PEM) from sslrootcert=/nonexistent/ca.pem",
        ),
        (
            "sslcert=/nonexistent/c.pem",
            "sslcert and sslkey go together",
        ),
        ("password_file=/nonexistent/pw", "both; give one of them"),
    ];
    for (query, needle) in cases {
        let url = format!("postgres://keysmith:{PASSWORD}@127.0.0.1:1/postgres?{query}");
        let err = open_error(&url).await;
        assert!(matches!(err, Error::InvalidArgument(_)), "{query}: {err:?}");
        assert!(err.to_string().contains(needle), "{query}: {err}");
    }
    let url = "postgres://keysmith@127.0.0.1:1/postgres?password_file=/nonexistent/pw";
    let err = open_error(url).await.to_string();
    assert!(
        err.contains("cannot read password_file=/nonexistent/pw"),
        "{err}"
    );
}

/// `store::postgres::connect`, for tools beside the store (`bench compare`'s
/// bare `nextval`): the store's TLS and password file, the same refusals.
#[tokio::test]
async fn a_plain_client_connects_with_the_store_tls_and_credentials() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    let url = verified_url(pg, "127.0.0.1", &fresh_schema());
    let client = store::postgres::connect(&url).await.unwrap();
    let ssl: bool = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ssl, "the connection is TLS");
    let wrong_ca = url.replace(
        &pg.certs().ca.display().to_string(),
        &pg.certs().other_ca.display().to_string(),
    );
    let err = store::postgres::connect(&wrong_ca).await.unwrap_err();
    assert!(err.to_string().contains("not signed by"), "{err}");
    let shown = store::redact_url("postgres://app:s3cret@h/db?password=s3cret");
    assert!(!shown.contains("s3cret"), "{shown}");
}

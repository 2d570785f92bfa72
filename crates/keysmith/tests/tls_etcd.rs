//! etcd over TLS with a client certificate and a user with a password,
//! against a real node started with `--client-cert-auth` on https and auth
//! enabled (`keysmith_testsupport::tls::TlsEtcd`), with certificates this
//! test makes.
//!
//! The whole conformance suite runs over TLS with the CA, the client
//! certificate and the password from a file; the other tests show that a
//! wrong CA, a missing client certificate, a wrong or missing password and a
//! plain connection fail saying what to do, and never show the password.
//! Needs the `etcd` feature and an etcd binary (else every test says why it
//! skips, or fails with `KEYSMITH_REQUIRE_BACKENDS=1`).
#![cfg(feature = "etcd")]

use std::sync::Arc;

use keysmith::Error;
use keysmith::store::etcd::EtcdUrl;
use keysmith::store::{self, Store};
use keysmith_testsupport::tls::{PASSWORD, TlsEtcd};

#[path = "common/tls.rs"]
mod tls;
use tls::open_error;

/// One node for the whole test binary (killed and removed at exit).
fn node() -> Option<&'static TlsEtcd> {
    TlsEtcd::shared()
}

fn fresh_prefix() -> String {
    format!("tls-{:016x}", rand::random::<u64>())
}

/// `etcd://keysmith@127.0.0.1:PORT/PREFIX?` with `query`.
fn url(etcd: &TlsEtcd, user: &str, query: &str) -> String {
    format!(
        "etcd://{user}{}127.0.0.1:{}/{}?{query}",
        if user.is_empty() { "" } else { "@" },
        etcd.endpoint().rsplit_once(':').unwrap().1,
        fresh_prefix()
    )
}

/// The CA, the client certificate and the password file: everything right.
fn full_query(etcd: &TlsEtcd) -> String {
    let c = etcd.certs();
    format!(
        "cacert={}&cert={}&key={}&password_file={}",
        c.ca.display(),
        c.client_cert.display(),
        c.client_key.display(),
        etcd.password_file().display()
    )
}

async fn fresh_store() -> Option<Arc<dyn Store>> {
    let etcd = node()?;
    Some(
        store::open(&url(etcd, etcd.user(), &full_query(etcd)))
            .await
            .unwrap(),
    )
}

mod conformance {
    keysmith::conformance_tests!(super::fresh_store, one_step_reservation = true);
}

#[tokio::test]
async fn a_sequence_allocates_over_tls_with_a_client_certificate_and_a_password() {
    let Some(etcd) = node() else {
        return;
    };
    for scheme in ["etcd://", "etcds://"] {
        let u = url(etcd, etcd.user(), &full_query(etcd)).replacen("etcd://", scheme, 1);
        let parsed = EtcdUrl::parse(&u).unwrap();
        assert!(parsed.uses_tls());
        assert_eq!(parsed.user(), Some("keysmith"));
        assert!(!format!("{parsed:?}").contains(PASSWORD));
        tls::a_sequence_allocates(store::open(&u).await.unwrap()).await;
    }
    // The password may be in the URL too.
    let c = etcd.certs();
    let u = url(
        etcd,
        &format!("keysmith:{PASSWORD}"),
        &format!(
            "cacert={}&cert={}&key={}",
            c.ca.display(),
            c.client_cert.display(),
            c.client_key.display()
        ),
    );
    store::open(&u).await.unwrap().ping().await.unwrap();
}

#[tokio::test]
async fn a_wrong_ca_fails_naming_the_ca() {
    let Some(etcd) = node() else {
        return;
    };
    let c = etcd.certs();
    let query = full_query(etcd).replace(
        &c.ca.display().to_string(),
        &c.other_ca.display().to_string(),
    );
    let err = open_error(&url(etcd, etcd.user(), &query)).await;
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("not signed by the CA in cacert=")
            && msg.contains(&c.other_ca.display().to_string())
            && msg.contains("give cacert=PATH"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_missing_client_certificate_is_named() {
    let Some(etcd) = node() else {
        return;
    };
    let query = format!(
        "cacert={}&password_file={}",
        etcd.certs().ca.display(),
        etcd.password_file().display()
    );
    // etcd answers with an alert or just closes the connection, depending
    // on timing: either way the message names the client certificate.
    let msg = open_error(&url(etcd, etcd.user(), &query))
        .await
        .to_string();
    assert!(
        msg.contains("requires a client certificate (--client-cert-auth)")
            && msg.contains("add cert=PATH&key=PATH"),
        "{msg}"
    );
    // A client certificate from another CA is refused.
    let other = keysmith_testsupport::tls::Certs::generate(&["127.0.0.1"], "stranger");
    let query = format!(
        "cacert={}&cert={}&key={}&password_file={}",
        etcd.certs().ca.display(),
        other.client_cert.display(),
        other.client_key.display(),
        etcd.password_file().display()
    );
    let msg = open_error(&url(etcd, etcd.user(), &query))
        .await
        .to_string();
    assert!(
        msg.contains("client certificate") && msg.contains("--trusted-ca-file"),
        "{msg}"
    );
}

#[tokio::test]
async fn wrong_or_missing_credentials_say_what_to_fix() {
    let Some(etcd) = node() else {
        return;
    };
    let c = etcd.certs();
    let tls = format!(
        "cacert={}&cert={}&key={}",
        c.ca.display(),
        c.client_cert.display(),
        c.client_key.display()
    );
    // A wrong password, from a file and in the URL.
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("pw");
    std::fs::write(&wrong, "not-the-password\n").unwrap();
    let err = open_error(&url(
        etcd,
        etcd.user(),
        &format!("{tls}&password_file={}", wrong.display()),
    ))
    .await;
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("refused the user name or password"), "{msg}");
    assert!(!msg.contains("not-the-password"), "{msg}");
    let msg = open_error(&url(etcd, "keysmith:wrong-secret", &tls))
        .await
        .to_string();
    assert!(msg.contains("refused the user name or password"), "{msg}");
    assert!(!msg.contains("wrong-secret"), "{msg}");
    // An unknown user.
    let msg = open_error(&url(
        etcd,
        "nobody",
        &format!("{tls}&password_file={}", etcd.password_file().display()),
    ))
    .await
    .to_string();
    assert!(msg.contains("refused the user name or password"), "{msg}");
    // No user at all: etcd has auth enabled.
    let err = open_error(&url(etcd, "", &tls)).await;
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("etcd has auth enabled and the store URL gives no user"),
        "{err}"
    );
}

#[tokio::test]
async fn a_plain_connection_to_a_tls_node_suggests_tls() {
    let Some(etcd) = node() else {
        return;
    };
    let err = open_error(&url(
        etcd,
        etcd.user(),
        &format!("password_file={}", etcd.password_file().display()),
    ))
    .await;
    assert!(err.to_string().contains("etcds://"), "{err}");
}

#[tokio::test]
async fn bad_tls_parameters_say_what_to_do_and_hide_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let pw = format!("u:{PASSWORD}@");
    let cases = [
        (
            format!("etcd://{pw}h:1?cacert=/nonexistent/ca.pem"),
            "cacert=/nonexistent/ca.pem",
        ),
        (
            format!("etcd://{pw}h:1?cacert={}", not_pem.display()),
            "holds no certificate",
        ),
        (
            format!("etcd://{pw}h:1?cert=/x.pem"),
            "cert and key go together",
        ),
        (
            format!("etcd://{pw}h:1?sslmode=require"),
            "unknown parameter \"sslmode\"",
        ),
        (
            format!("etcd://{pw}h:1?password_file=/x"),
            "both; give one of them",
        ),
        ("etcd://u@h:1".to_owned(), "has no password"),
        (
            "etcd://h:1?password_file=/x".to_owned(),
            "password_file needs a user",
        ),
        (
            "etcd://u@h:1?password_file=/nonexistent/pw".to_owned(),
            "cannot read password_file=/nonexistent/pw",
        ),
    ];
    for (u, needle) in cases {
        let err = open_error(&u).await;
        assert!(matches!(err, Error::InvalidArgument(_)), "{u}: {err:?}");
        assert!(err.to_string().contains(needle), "{u}: {err}");
    }
}

//! `keysmith --store URL` with TLS and credentials in the URL, as a user
//! runs it: against a PostgreSQL that accepts only TLS and a password (and,
//! with the `etcd` feature, an etcd node with client certificates and
//! auth), and with bad TLS parameters, whose errors say what to do and never
//! show the password.

use std::process::{Command, Output};

use keysmith_testsupport::tls::{PASSWORD, TlsPostgres};

fn run(store: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keysmith"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("KEYSMITH_STORE")
        .output()
        .expect("keysmith runs")
}

fn ok(store: &str, args: &[&str]) -> String {
    let out = run(store, args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

/// Runs a command that must fail (exit 1, nothing on stdout); returns
/// stderr, checked not to hold the password.
fn fails(store: &str, args: &[&str]) -> String {
    let out = run(store, args);
    assert_eq!(out.status.code(), Some(1), "{store} {args:?}: {out:?}");
    assert!(out.stdout.is_empty(), "{args:?} printed {out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains(PASSWORD), "the password shows: {err}");
    err
}

#[test]
fn bad_tls_parameters_fail_saying_what_to_do_without_the_password() {
    let base = format!("postgres://keysmith:{PASSWORD}@127.0.0.1:1/postgres");
    let err = fails(&format!("{base}?sslmode=bogus"), &["list"]);
    assert!(
        err.contains("sslmode=\"bogus\" is not a TLS mode") && err.contains("verify-full"),
        "{err}"
    );
    let err = fails(
        &format!("{base}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"),
        &["list"],
    );
    assert!(
        err.contains("cannot read certificates (PEM) from sslrootcert=/nonexistent/ca.pem")
            && err.contains("check the path"),
        "{err}"
    );
    let err = fails(
        "postgres://keysmith@127.0.0.1:1/postgres?password_file=/nonexistent/pw",
        &["list"],
    );
    assert!(
        err.contains("cannot read password_file=/nonexistent/pw"),
        "{err}"
    );
}

#[test]
fn a_tls_only_postgres_serves_the_cli_with_the_password_from_a_file() {
    let Some(pg) = TlsPostgres::shared() else {
        return;
    };
    let url = pg.url(
        "127.0.0.1",
        &format!(
            "sslmode=verify-full&sslrootcert={}&password_file={}&schema=cli",
            pg.certs().ca.display(),
            pg.password_file().display()
        ),
    );
    ok(&url, &["create", "orders"]);
    assert_eq!(ok(&url, &["next", "orders", "--count", "3"]), "1\n2\n3");

    // A wrong CA: exit 1, naming the CA file and what to do.
    let wrong = url.replace(
        &pg.certs().ca.display().to_string(),
        &pg.certs().other_ca.display().to_string(),
    );
    let err = fails(&wrong, &["list"]);
    assert!(
        err.contains("not signed by the CA in sslrootcert=") && err.contains("give sslrootcert"),
        "{err}"
    );
    // The password in the URL works too, and never shows when refused.
    let refused = pg
        .url("127.0.0.1", "sslmode=require")
        .replace("keysmith@", &format!("keysmith:{PASSWORD}x@"));
    let err = fails(&refused, &["list"]);
    assert!(err.contains("password authentication failed"), "{err}");
}

#[cfg(feature = "etcd")]
#[test]
fn a_tls_etcd_with_auth_serves_the_cli() {
    let Some(etcd) = keysmith_testsupport::tls::TlsEtcd::start("keysmith") else {
        return;
    };
    let c = etcd.certs();
    let url = format!(
        "etcds://keysmith@{}/cli?cacert={}&cert={}&key={}&password_file={}",
        etcd.endpoint(),
        c.ca.display(),
        c.client_cert.display(),
        c.client_key.display(),
        etcd.password_file().display()
    );
    ok(&url, &["create", "orders"]);
    assert_eq!(ok(&url, &["next", "orders", "--count", "2"]), "1\n2");
    let err = fails(
        &format!(
            "etcd://keysmith:{PASSWORD}@{}/cli?cert=/x.pem",
            etcd.endpoint()
        ),
        &["list"],
    );
    assert!(err.contains("cert and key go together"), "{err}");
}

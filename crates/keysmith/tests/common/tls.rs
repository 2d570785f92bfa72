//! What the TLS test files (`tls_postgres.rs`, `tls_etcd.rs`, which include
//! this file with `#[path]`) share: a store URL that must fail to open.

use keysmith::Error;
use keysmith::store;
use keysmith_testsupport::tls::PASSWORD;

/// The error `url` fails to open with; asserts it never shows the
/// password of testsupport's TLS servers.
pub async fn open_error(url: &str) -> Error {
    let err = match store::open(url).await {
        Ok(_) => panic!("{url} opened"),
        Err(e) => e,
    };
    assert!(
        !err.to_string().contains(PASSWORD),
        "the password shows: {err}"
    );
    eprintln!("{url}\n  -> {err}");
    err
}

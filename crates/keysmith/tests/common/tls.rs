//! What the TLS test files (`tls_postgres.rs`, `tls_etcd.rs`, which include
//! this file with `#[path]`) share: a store URL that must fail to open, and
//! a sequence allocating over a store that opened.

use std::sync::Arc;

use keysmith::Error;
use keysmith::sequence::{self, Sequence};
use keysmith::store::{self, SequenceSpec, Store};
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

/// A sequence created on `store` hands out 1..=25 through a handle with
/// blocks of 10 (three reservations over the connection under test); the
/// handle comes back, so its store and connections stay open while the
/// caller looks at them.
pub async fn a_sequence_allocates(store: Arc<dyn Store>) -> Sequence {
    sequence::create(&*store, &SequenceSpec::new("orders"))
        .await
        .unwrap();
    let seq = Sequence::builder()
        .store(store)
        .name("orders")
        .block(10)
        .build()
        .await
        .unwrap();
    assert_eq!(
        seq.next_n(25).await.unwrap(),
        (1..=25).collect::<Vec<i64>>()
    );
    seq
}

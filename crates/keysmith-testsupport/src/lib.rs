//! Test support for keysmith: throwaway PostgreSQL and etcd servers started
//! from the installed binaries, torn down on drop.
//!
//! Where a binary is missing, [`skip_or_fail`] prints why the test skips, or
//! panics when `KEYSMITH_REQUIRE_BACKENDS=1` (as CI sets it).

pub mod etcd;
pub mod postgres;

/// Called when a backend's server binary is missing: returns normally (the
/// caller then skips) after printing why, or panics when
/// `KEYSMITH_REQUIRE_BACKENDS=1`.
pub fn skip_or_fail(backend: &str, why: &str) {
    if std::env::var("KEYSMITH_REQUIRE_BACKENDS").as_deref() == Ok("1") {
        panic!("{backend} tests required (KEYSMITH_REQUIRE_BACKENDS=1) but cannot run: {why}");
    }
    eprintln!("SKIP {backend} tests: {why}; install it or see .ci/run");
}

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
}

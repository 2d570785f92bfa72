//! Where values go when processes die: processes that close cleanly report
//! what they handed out; the values processes killed with SIGKILL printed are
//! within the sequence's unaccounted count, which is at most what they had
//! reserved. On every store, with the real binary
//! (`keysmith_testsupport::processes`, written once).

mod common;

use keysmith_testsupport::processes::{Postgres, Sqlite};

#[test]
fn sqlite() {
    common::processes(&Sqlite::new()).killed_values_fit_within_unaccounted();
}

#[test]
fn postgres() {
    if let Some(pg) = Postgres::shared() {
        common::processes(&pg).killed_values_fit_within_unaccounted();
    }
}

#[cfg(feature = "mysql")]
#[test]
fn mysql() {
    if let Some(my) = keysmith_testsupport::processes::MariaDb::shared() {
        common::processes(&my).killed_values_fit_within_unaccounted();
    }
}

#[cfg(feature = "etcd")]
#[test]
fn etcd() {
    if let Some(etcd) = keysmith_testsupport::processes::Etcd::shared() {
        common::processes(&etcd).killed_values_fit_within_unaccounted();
    }
}

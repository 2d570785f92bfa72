//! Many OS processes taking from one pool, and takers killed with SIGKILL,
//! on SQLite, PostgreSQL, MariaDB and etcd: every number unique, the pool
//! keeps exactly N members, and taken ∪ members has no holes but what
//! killed takers held. The scenarios are written once in
//! `keysmith_testsupport::processes`.

mod common;

use keysmith_testsupport::processes::{Postgres, Sqlite};

/// Six processes at once on a pool of 20, three of them reusing their
/// samples: all finish, no number twice, no hole at all.
#[test]
fn processes_never_share_a_number_and_leave_no_holes() {
    common::processes(&Sqlite::new()).pool_processes_never_share_a_number();
}

/// Rounds of four takers killed with SIGKILL at moments chosen by their
/// progress: no number twice, N members, and at most one hole per killed
/// taker (the number it had swapped out but not yet printed).
#[test]
fn sigkilled_takers_leave_at_most_one_hole_each() {
    common::processes(&Sqlite::new()).sigkilled_pool_takers_leave_at_most_one_hole_each();
}

#[test]
fn postgres_processes_never_share_a_number_and_leave_no_holes() {
    if let Some(pg) = Postgres::shared() {
        common::processes(&pg).pool_processes_never_share_a_number();
    }
}

#[test]
fn postgres_sigkilled_takers_leave_at_most_one_hole_each() {
    if let Some(pg) = Postgres::shared() {
        common::processes(&pg).sigkilled_pool_takers_leave_at_most_one_hole_each();
    }
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_processes_never_share_a_number_and_leave_no_holes() {
    if let Some(my) = keysmith_testsupport::processes::MariaDb::shared() {
        common::processes(&my).pool_processes_never_share_a_number();
    }
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_sigkilled_takers_leave_at_most_one_hole_each() {
    if let Some(my) = keysmith_testsupport::processes::MariaDb::shared() {
        common::processes(&my).sigkilled_pool_takers_leave_at_most_one_hole_each();
    }
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_processes_never_share_a_number_and_leave_no_holes() {
    if let Some(etcd) = keysmith_testsupport::processes::Etcd::shared() {
        common::processes(&etcd).pool_processes_never_share_a_number();
    }
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_sigkilled_takers_leave_at_most_one_hole_each() {
    if let Some(etcd) = keysmith_testsupport::processes::Etcd::shared() {
        common::processes(&etcd).sigkilled_pool_takers_leave_at_most_one_hole_each();
    }
}

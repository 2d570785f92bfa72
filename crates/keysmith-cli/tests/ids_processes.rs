//! Eight `keysmith ids next` processes on one store, SIGKILLed at random
//! moments (chosen by their progress) and restarted, on SQLite, PostgreSQL,
//! MariaDB and etcd: no id is ever printed twice, and each process's ids
//! increase (`keysmith_testsupport::processes`, written once); on SQLite and
//! PostgreSQL also with `--format uuidv7`.
//!
//! Worker ids are few (10 for 8 processes) and leases short (1 s), so
//! restarted processes take over the worker ids of killed ones once their
//! leases expire: the store's time floor is what keeps their ids apart.

mod common;

use keysmith::ids::IdFormat;
use keysmith_testsupport::processes::{Postgres, Sqlite};

#[test]
fn sqlite_ids_survive_sigkills() {
    common::processes(&Sqlite::new()).ids_survive_sigkills(24);
}

#[test]
fn postgres_ids_survive_sigkills() {
    if let Some(pg) = Postgres::shared() {
        common::processes(&pg).ids_survive_sigkills(24);
    }
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_ids_survive_sigkills() {
    if let Some(my) = keysmith_testsupport::processes::MariaDb::shared() {
        common::processes(&my).ids_survive_sigkills(24);
    }
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_ids_survive_sigkills() {
    if let Some(etcd) = keysmith_testsupport::processes::Etcd::shared() {
        common::processes(&etcd).ids_survive_sigkills(24);
    }
}

/// The same with `--format uuidv7`: no UUID repeats (time, worker and
/// counter compared, the random bits left out), each process's increase.
#[test]
fn sqlite_uuidv7s_survive_sigkills() {
    common::processes(&Sqlite::new()).ids_survive_sigkills_as(12, IdFormat::Uuidv7);
}

#[test]
fn postgres_uuidv7s_survive_sigkills() {
    if let Some(pg) = Postgres::shared() {
        common::processes(&pg).ids_survive_sigkills_as(12, IdFormat::Uuidv7);
    }
}

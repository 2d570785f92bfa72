//! Tests written once for every store whose data outlives a store handle (a
//! file, a database, an etcd prefix): `backend_sqlite.rs`,
//! `backend_postgres.rs`, `backend_mysql.rs` and `backend_etcd.rs` include
//! this file with `#[path]`. Each check opens the store URL it is given,
//! through `keysmith::store::open`, as often as it needs.

use std::sync::Arc;

use keysmith::Error;
use keysmith::store::{PoolSpec, SequenceSpec, Store};

async fn open(url: &str) -> Arc<dyn Store> {
    keysmith::store::open(url).await.unwrap()
}

/// The tombstone is kept with the data: a sequence and a pool dropped
/// through one store, created again through a store opened afterwards,
/// continue above the values they handed out.
pub async fn a_tombstone_survives_reopening(url: &str) {
    let a = open(url).await;
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    let r = a.reserve_atomic("s", 40).await.unwrap();
    a.drop_sequence("s").await.unwrap();
    a.create_pool(&PoolSpec::new("p", 3)).await.unwrap();
    assert!(a.swap_member("p", 1, 4).await.unwrap());
    a.drop_pool("p").await.unwrap();
    drop(a);
    let b = open(url).await;
    let s = b.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    assert_eq!(s.start, r.end);
    let p = b.create_pool(&PoolSpec::new("p", 3)).await.unwrap();
    assert_eq!(
        p.start, 4,
        "above 1, the value handed out, at the largest member"
    );
}

/// A store opened after another committed a reservation and went away
/// reads the row that reservation left: `next` and the version.
pub async fn a_second_store_sees_committed_reservations(url: &str) {
    let a = open(url).await;
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    let r = a.reserve_locked("s", 10).await.unwrap();
    drop(a);
    let b = open(url).await;
    let row = b.read_sequence("s").await.unwrap().unwrap();
    assert_eq!((row.next, row.version), (r.end, r.version));
}

/// Data written by a newer keysmith is refused, saying to upgrade:
/// `set_newer_version` writes schema version 99 where the store keeps it,
/// after a first open made the tables.
#[allow(dead_code)] // not in backend_etcd.rs: etcd keeps no schema version
pub async fn a_newer_schema_is_refused(url: &str, set_newer_version: impl AsyncFnOnce()) {
    drop(open(url).await);
    set_newer_version().await;
    let e = match keysmith::store::open(url).await {
        Ok(_) => panic!("a store with schema version 99 opened"),
        Err(e) => e,
    };
    assert!(
        matches!(&e, Error::Corrupt(m) if m.contains("upgrade keysmith")),
        "{e}"
    );
}

//! The conformance suite on SQLite, plus what only a file can show.

use std::sync::Arc;

use keysmith::Error;
use keysmith::store::{PoolStore, SequenceStore};
use keysmith::store::{SequenceSpec, Store, sqlite::SqliteStore};

/// A fresh database file in a temporary directory that lives as long as the
/// test process (the OS cleans /tmp; each call gets its own file).
async fn fresh_store() -> Option<Arc<dyn Store>> {
    let dir = tempfile::tempdir().unwrap().keep();
    Some(Arc::new(SqliteStore::open(dir.join("k.db")).await.unwrap()))
}

#[path = "common/reopen.rs"]
mod reopen;

keysmith::conformance_tests!(fresh_store, one_step_reservation = false);

/// A file written at schema version 1 (before worker leases) is migrated
/// on open: the version goes to the current one (5: worker leases, numbered
/// sequences, generations, pools' residue classes), the new tables and
/// columns are there, old rows stay, an old row records the store's
/// generation at its first write, skipping nothing, and an old pool has no
/// residue class.
#[tokio::test]
async fn a_version_1_file_gets_the_worker_table() {
    use keysmith::store::{WorkerClaim, WorkerStore};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    let a = SqliteStore::open(&path).await.unwrap();
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    a.create_pool(&keysmith::store::PoolSpec::new("p", 3))
        .await
        .unwrap();
    drop(a);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(
        "DROP TABLE keysmith_workers;
         DROP TABLE keysmith_tombstones;
         ALTER TABLE keysmith_pools DROP COLUMN class_increment;
         ALTER TABLE keysmith_pools DROP COLUMN class_offset;
         ALTER TABLE keysmith_sequences DROP COLUMN generation;
         ALTER TABLE keysmith_sequences DROP COLUMN failover_skip;
         ALTER TABLE keysmith_sequences DROP COLUMN failover_skip_set;
         ALTER TABLE keysmith_sequences DROP COLUMN failover_skipped;
         UPDATE keysmith_meta SET value = 1 WHERE key = 'schema_version';",
    )
    .unwrap();
    drop(c);
    let b = SqliteStore::open(&path).await.unwrap();
    let pool = b.read_pool("p").await.unwrap().unwrap();
    assert_eq!((pool.start, pool.size, pool.residue), (1, 3, None));
    assert_eq!(b.list_members("p").await.unwrap(), [1, 2, 3]);
    let old = b.read_sequence("s").await.unwrap().unwrap();
    assert_eq!(old.generation, None);
    let r = b.reserve_atomic("s", 5).await.unwrap();
    assert_eq!((r.start, r.fenced), (old.next, 0), "no skip for an old row");
    let row = b.read_sequence("s").await.unwrap().unwrap();
    assert_eq!(row.generation, Some(b.generation().await.unwrap()));
    let lease = b
        .acquire_worker(&WorkerClaim {
            group: "g".into(),
            max_workers: 2,
            holder: "t".into(),
            ttl: std::time::Duration::from_secs(5),
            now_ms: 10,
            window_ms: 10,
        })
        .await
        .unwrap();
    assert_eq!(lease.worker, 0);
    // Version 6: the tombstones table; a drop leaves one.
    b.drop_sequence("s").await.unwrap();
    let again = b.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    assert_eq!(again.start, r.end, "continues above the values handed out");
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = c
        .query_row(
            "SELECT value FROM keysmith_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v, 7);
    // Version 7: lives; the row made after the drop is of a new one.
    assert!(again.incarnation > 1, "{again:?}");
}

/// A tombstone is in the file: a sequence and a pool dropped by one
/// process, created again by another that opened the file afresh,
/// continue above the values they handed out.
#[tokio::test]
async fn a_tombstone_survives_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("k.db").display());
    reopen::a_tombstone_survives_reopening(&url).await;
}

#[tokio::test]
async fn a_second_connection_sees_committed_reservations() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("k.db").display());
    reopen::a_second_store_sees_committed_reservations(&url).await;
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.db");
    std::fs::write(&path, vec![b'x'; 4096]).unwrap();
    let e = SqliteStore::open(&path).await.unwrap_err();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
    assert!(e.to_string().contains("junk.db"), "{e}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        vec![b'x'; 4096],
        "the file was changed"
    );
}

#[tokio::test]
async fn a_missing_directory_is_unavailable() {
    let e = SqliteStore::open("/nonexistent-dir/k.db")
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    let url = format!("sqlite://{}", path.display());
    reopen::a_newer_schema_is_refused(&url, async || {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute(
            "UPDATE keysmith_meta SET value = 99 WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    })
    .await;
}

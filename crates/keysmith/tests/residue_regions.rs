//! The multi-region recipe: two regions, each with a store of its own (an
//! SQLite file and a PostgreSQL server), one sequence each with increment 2
//! and offsets 0 and 1. Handles, strict handles and leases in both regions
//! at once never hand out the same value, and each region's values stay in
//! its class. The same for a value pool in each region.
//!
//! PostgreSQL is real, started by `keysmith_testsupport::postgres`; where it
//! is not installed the test prints why it skips (or fails, with
//! `KEYSMITH_REQUIRE_BACKENDS=1`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use keysmith::numbers::{self, Numbering};
use keysmith::pool::{self, PoolSpec, ValuePool};
use keysmith::sequence::{self, Sequence, Strategy};
use keysmith::store::{self, Residue, SequenceSpec, Store};
use keysmith_testsupport::postgres::TempPostgres;

/// Everything region `offset` hands out: 4 tasks on one handle, a strict
/// handle, and leases, interleaved.
async fn region(store: Arc<dyn Store>, offset: i64) -> Vec<i64> {
    let numbering = Numbering {
        residue: Some(Residue {
            increment: 2,
            offset,
        }),
        ..Numbering::default()
    };
    let spec = SequenceSpec {
        block: 7,
        ..SequenceSpec::new("orders")
    };
    numbers::create(&*store, &spec, &numbering).await.unwrap();
    let handle = Sequence::builder()
        .store(store.clone())
        .name("orders")
        .build()
        .await
        .unwrap();
    let strict = Sequence::builder()
        .store(store.clone())
        .name("orders")
        .block(1)
        .build()
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let h = handle.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for _ in 0..200 {
                out.push(h.next().await.unwrap());
            }
            out.extend(h.next_n(25).await.unwrap());
            out
        }));
    }
    let mut values = Vec::new();
    for _ in 0..50 {
        values.push(strict.next().await.unwrap());
        let lease = sequence::lease::lease(
            store.clone(),
            "orders",
            5,
            Strategy::Optimistic,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        values.extend((lease.start..lease.end).step_by(lease.step as usize));
    }
    for t in tasks {
        values.extend(t.await.unwrap());
    }
    handle.close().await.unwrap();
    strict.close().await.unwrap();
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_regions_with_their_own_stores_never_hand_out_the_same_value() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let (_dir, sqlite, postgres) = two_stores(pg, "regions").await;
    let (a, b) = tokio::join!(region(sqlite, 0), region(postgres, 1));
    let a = regions_apart(&a, &b, 4 * 225 + 50 * 6);
    // Both regions counted from the same start: without the classes they
    // would have collided on every value.
    assert!(
        a.contains(&2) && b.contains(&1),
        "{:?} {:?}",
        a.first(),
        b.iter().min()
    );
}

/// Everything region `offset`'s pool hands out: 4 tasks on two handles
/// (the class read from the store by each), single takes and batches.
async fn pool_region(store: Arc<dyn Store>, offset: i64) -> Vec<i64> {
    let spec = PoolSpec {
        start: 0,
        residue: Some(Residue {
            increment: 2,
            offset,
        }),
        ..PoolSpec::new("tickets", 16)
    };
    pool::create(&*store, &spec).await.unwrap();
    let open = || {
        ValuePool::builder()
            .store(store.clone())
            .name("tickets")
            .build()
    };
    let handles = [open().await.unwrap(), open().await.unwrap()];
    let mut tasks = Vec::new();
    for i in 0..4 {
        let h = handles[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for _ in 0..40 {
                out.push(h.take().await.unwrap());
            }
            out.extend(h.take_n(10).await.unwrap());
            out
        }));
    }
    let mut values = Vec::new();
    for t in tasks {
        values.extend(t.await.unwrap());
    }
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_regions_pools_never_hand_out_the_same_number() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let (_dir, sqlite, postgres) = two_stores(pg, "pool_regions").await;
    let (a, b) = tokio::join!(pool_region(sqlite, 0), pool_region(postgres, 1));
    let a = regions_apart(&a, &b, 4 * 50);
    // Both pools started at 0: each handed out some of its first 16
    // members, below 32; without the classes they would have been the same
    // 16 numbers.
    let (lo_a, lo_b) = (a.first().unwrap(), b.iter().min().unwrap());
    assert!(*lo_a < 32 && *lo_b < 32, "{lo_a} {lo_b}");
}

/// Region a's store (a fresh SQLite file in the returned directory) and
/// region b's (schema `schema` of the shared PostgreSQL).
async fn two_stores(
    pg: &TempPostgres,
    schema: &str,
) -> (tempfile::TempDir, Arc<dyn Store>, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = store::open(&format!(
        "sqlite://{}",
        dir.path().join("region-a.db").display()
    ))
    .await
    .unwrap();
    let postgres = store::open(&format!("{}?schema={schema}", pg.url()))
        .await
        .unwrap();
    (dir, sqlite, postgres)
}

/// Checks what regions a (offset 0) and b (offset 1 modulo 2) handed out:
/// `len` values each, none twice, each of its region's class, none in
/// both. Returns a's values.
fn regions_apart(a: &[i64], b: &[i64], len: usize) -> BTreeSet<i64> {
    for (values, offset, name) in [(a, 0, "SQLite"), (b, 1, "PostgreSQL")] {
        assert_eq!(values.len(), len, "{name}");
        let unique: BTreeSet<i64> = values.iter().copied().collect();
        assert_eq!(
            unique.len(),
            values.len(),
            "{name} handed out a value twice"
        );
        assert!(
            values.iter().all(|v| v.rem_euclid(2) == offset),
            "{name} handed out a value outside its class"
        );
    }
    let a: BTreeSet<i64> = a.iter().copied().collect();
    let shared: Vec<&i64> = b.iter().filter(|v| a.contains(v)).collect();
    assert!(shared.is_empty(), "both regions handed out {shared:?}");
    a
}

//! The conformance suite on a real etcd, plus what only etcd can show.
//!
//! Needs the `etcd` feature and an etcd binary (see keysmith-testsupport);
//! without the binary every test prints that it skips, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.
#![cfg(feature = "etcd")]

use std::sync::Arc;

use keysmith::Error;
use keysmith::store::etcd::{EtcdStore, EtcdUrl, etcd_client};
use keysmith::store::{PoolSpec, PoolStore, SequenceStore};
use keysmith::store::{Put, SequenceSpec, Store};
use keysmith_testsupport::etcd::TempEtcd;

/// A fresh random key prefix: an empty store on the shared node.
fn fresh_prefix() -> String {
    format!("test-{:016x}", rand::random::<u64>())
}

/// One etcd node for the whole test binary, and a fresh prefix per call.
async fn fresh_store() -> Option<Arc<dyn Store>> {
    let etcd = TempEtcd::shared()?;
    let store = keysmith::store::open(&etcd.url_with_prefix(&fresh_prefix()))
        .await
        .unwrap();
    Some(store)
}

async fn fresh_etcd_store() -> Option<EtcdStore> {
    let etcd = TempEtcd::shared()?;
    Some(
        EtcdStore::connect(&etcd.url_with_prefix(&fresh_prefix()))
            .await
            .unwrap(),
    )
}

#[path = "common/reopen.rs"]
mod reopen;

keysmith::conformance_tests!(fresh_store, one_step_reservation = true);

/// Two stores (two processes, say) on one fresh prefix.
async fn two_stores() -> Option<(EtcdStore, EtcdStore)> {
    let etcd = TempEtcd::shared()?;
    let url = etcd.url_with_prefix(&fresh_prefix());
    Some((
        EtcdStore::connect(&url).await.unwrap(),
        EtcdStore::connect(&url).await.unwrap(),
    ))
}

#[tokio::test]
async fn prefixes_keep_stores_apart() {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    let (pa, pb) = (fresh_prefix(), fresh_prefix());
    let a = EtcdStore::connect(&etcd.url_with_prefix(&pa))
        .await
        .unwrap();
    let b = EtcdStore::connect(&etcd.url_with_prefix(&pb))
        .await
        .unwrap();
    // "x" under prefix "P/y" must not show up as "y/x" under "P".
    let nested = EtcdStore::connect(&etcd.url_with_prefix(&format!("{pa}/y")))
        .await
        .unwrap();
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    nested
        .create_sequence(&SequenceSpec::new("x"))
        .await
        .unwrap();
    a.create_pool(&PoolSpec::new("p", 3)).await.unwrap();
    assert_eq!(b.read_sequence("s").await.unwrap(), None);
    assert!(b.list_sequences().await.unwrap().is_empty());
    assert!(b.list_pools().await.unwrap().is_empty());
    let names: Vec<String> = a
        .list_sequences()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["s"]);
    assert_eq!(a.prefix(), format!("{pa}/"));
}

#[tokio::test]
async fn a_second_client_sees_committed_reservations() {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    reopen::a_second_store_sees_committed_reservations(&etcd.url_with_prefix(&fresh_prefix()))
        .await;
}

/// An atomic reservation plans from the row its store last wrote. Another
/// process drops the sequence and creates it again higher up, then takes a
/// block: the `next` key's etcd version is again what it was under the
/// remembered row (the row's version is above, offset by the new life), but
/// not its mod revision, so the reservation is planned from the new row and
/// never moves `next` back under values already handed out.
#[tokio::test]
async fn an_atomic_reservation_never_plans_from_a_sequence_dropped_and_created_again() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    let first = a.reserve_atomic("s", 10).await.unwrap();
    assert_eq!((first.start, first.end, first.version), (1, 11, 2));
    b.drop_sequence("s").await.unwrap();
    let spec = SequenceSpec {
        start: 1000,
        ..SequenceSpec::new("s")
    };
    b.create_sequence(&spec).await.unwrap();
    let theirs = b.reserve_atomic("s", 10).await.unwrap();
    assert!(
        theirs.incarnation > first.version && theirs.version > first.version,
        "a later life's versions are above the earlier one's: {theirs:?} {first:?}"
    );
    let mine = a.reserve_atomic("s", 10).await.unwrap();
    assert_eq!(mine.start, theirs.end, "planned from the row b left");
    assert_eq!(mine.incarnation, theirs.incarnation);
    let row = b.read_sequence("s").await.unwrap().unwrap();
    assert_eq!(row.next, mine.end);
}

/// The row an atomic reservation remembers is only a plan: another store's
/// writes in between cost a conflict, and the ranges stay one after another.
#[tokio::test]
async fn atomic_reservations_of_two_stores_take_turns_without_overlap() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    let mut expect = 1;
    for i in 0..20 {
        let store = if i % 3 == 0 { &b } else { &a };
        let r = store.reserve_atomic("s", 7).await.unwrap();
        assert_eq!(r.start, expect, "reservation {i}");
        expect = r.end;
    }
    // A hand-back by the other store moves next down: the remembered row
    // is above it, and the next reservation starts where the store says.
    let row = b.read_sequence("s").await.unwrap().unwrap();
    let Put::Done(_) = b
        .put_if_version("s", row.next - 3, row.version)
        .await
        .unwrap()
    else {
        panic!("b's put of its own read row");
    };
    let r = a.reserve_atomic("s", 7).await.unwrap();
    assert_eq!(r.start, expect - 3);
}

#[tokio::test]
async fn versions_start_at_one_and_count_changes() {
    let Some(store) = fresh_etcd_store().await else {
        return;
    };
    let row = store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    assert_eq!(row.version, 1);
    assert_eq!(store.read_sequence("s").await.unwrap().unwrap().version, 1);
    let a = store.reserve_atomic("s", 5).await.unwrap();
    assert_eq!(a.version, 2);
    let l = store.reserve_locked("s", 5).await.unwrap();
    assert_eq!(l.version, 3);
    let Put::Done(done) = store.put_if_version("s", 100, 3).await.unwrap() else {
        panic!("version 3 is current");
    };
    assert_eq!((done.next, done.version), (100, 4));
    // A version no etcd key can have is a conflict that returns the row.
    match store.put_if_version("s", 1, u64::MAX).await.unwrap() {
        Put::Conflict(row) => assert_eq!(row, done),
        Put::Done(row) => panic!("applied with an impossible version: {row:?}"),
    }
}

#[tokio::test]
async fn names_with_slashes_do_not_mix_pools() {
    let Some(store) = fresh_etcd_store().await else {
        return;
    };
    store.create_pool(&PoolSpec::new("a", 2)).await.unwrap();
    store
        .create_pool(&PoolSpec {
            start: 100,
            ..PoolSpec::new("a/b", 2)
        })
        .await
        .unwrap();
    store
        .create_pool(&PoolSpec {
            start: 200,
            ..PoolSpec::new("a%2Fb", 2)
        })
        .await
        .unwrap();
    assert_eq!(store.list_members("a").await.unwrap(), [1, 2]);
    assert_eq!(store.list_members("a/b").await.unwrap(), [100, 101]);
    assert_eq!(store.list_members("a%2Fb").await.unwrap(), [200, 201]);
    store.drop_pool("a").await.unwrap();
    assert_eq!(store.list_members("a/b").await.unwrap(), [100, 101]);
}

#[tokio::test]
async fn negative_pool_members_keep_numeric_order() {
    let Some(store) = fresh_etcd_store().await else {
        return;
    };
    store
        .create_pool(&PoolSpec {
            start: -3,
            ..PoolSpec::new("p", 5)
        })
        .await
        .unwrap();
    assert_eq!(store.list_members("p").await.unwrap(), [-3, -2, -1, 0, 1]);
    assert!(store.swap_member("p", -2, 3).await.unwrap());
    assert_eq!(store.list_members("p").await.unwrap(), [-3, -1, 0, 1, 3]);
}

#[tokio::test]
async fn a_large_pool_is_written_in_batches_and_read_in_pages() {
    let Some(store) = fresh_etcd_store().await else {
        return;
    };
    // More members than one transaction (128 ops) or one page (5000) holds.
    const SIZE: i64 = 12_345;
    let row = store
        .create_pool(&PoolSpec {
            start: 1_000,
            ..PoolSpec::new("big", SIZE)
        })
        .await
        .unwrap();
    assert_eq!(row.size, SIZE);
    assert_eq!(store.read_pool("big").await.unwrap(), Some(row));
    let members = store.list_members("big").await.unwrap();
    assert_eq!(members, (1_000..1_000 + SIZE).collect::<Vec<_>>());
    let e = store
        .create_pool(&PoolSpec {
            start: 0,
            ..PoolSpec::new("big", 500)
        })
        .await
        .unwrap_err();
    assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
    let sample = store.sample_members("big", 10).await.unwrap();
    assert_eq!(sample.len(), 10);
    assert!(sample.iter().all(|v| (1_000..1_000 + SIZE).contains(v)));
    // More slots than one transaction reads: several, all distinct members.
    let sample = store.sample_members("big", 250).await.unwrap();
    let distinct: std::collections::BTreeSet<i64> = sample.iter().copied().collect();
    assert_eq!(distinct.len(), 250);
    assert!(sample.iter().all(|v| (1_000..1_000 + SIZE).contains(v)));
    store.drop_pool("big").await.unwrap();
    assert_eq!(store.read_pool("big").await.unwrap(), None);
}

#[tokio::test]
async fn pool_sample_wraps_around_and_follows_swaps() {
    let Some(store) = fresh_etcd_store().await else {
        return;
    };
    store
        .create_pool(&PoolSpec {
            start: 0,
            ..PoolSpec::new("p", 10)
        })
        .await
        .unwrap();
    // Move the pool forward: members become 5..15.
    for v in 0..5 {
        assert!(store.swap_member("p", v, v + 10).await.unwrap());
    }
    let members: Vec<i64> = (5..15).collect();
    assert_eq!(store.list_members("p").await.unwrap(), members);
    for _ in 0..20 {
        let mut s = store.sample_members("p", 10).await.unwrap();
        s.sort();
        assert_eq!(s, members, "k = size must give every member once");
    }
}

#[tokio::test]
async fn a_put_that_is_not_take_plus_size_is_refused_and_changes_nothing() {
    let Some(store) = fresh_etcd_store().await else {
        return;
    };
    store.create_pool(&PoolSpec::new("p", 3)).await.unwrap();
    // 2 would land in 1's slot while slot 1 holds 2 as well.
    let e = store.swap_member("p", 1, 2).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("size 3"), "{e}");
    assert_eq!(store.list_members("p").await.unwrap(), [1, 2, 3]);
    assert!(
        store.swap_member("p", 2, 2).await.unwrap(),
        "a no-op swap of a member"
    );
    assert!(!store.swap_member("p", 9, 9).await.unwrap());
    assert_eq!(store.list_members("p").await.unwrap(), [1, 2, 3]);
}

/// A store remembers a pool's start and size; a pool dropped and created
/// again under the same name by another client is used at its new shape.
#[tokio::test]
async fn a_pool_created_again_elsewhere_is_used_at_its_new_shape() {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    let url = etcd.url_with_prefix(&fresh_prefix());
    let a = EtcdStore::connect(&url).await.unwrap();
    let b = EtcdStore::connect(&url).await.unwrap();
    a.create_pool(&PoolSpec {
        start: 0,
        ..PoolSpec::new("p", 4)
    })
    .await
    .unwrap();
    assert_eq!(a.sample_members("p", 10).await.unwrap().len(), 4);
    assert!(a.swap_member("p", 1, 5).await.unwrap());

    b.drop_pool("p").await.unwrap();
    b.create_pool(&PoolSpec {
        start: 100,
        ..PoolSpec::new("p", 10)
    })
    .await
    .unwrap();
    let mut s = a.sample_members("p", 10).await.unwrap();
    s.sort();
    assert_eq!(s, (100..110).collect::<Vec<_>>());

    b.drop_pool("p").await.unwrap();
    // Below the dropped pool's values on purpose: the size is what matters.
    b.create_pool(&PoolSpec {
        start: 7,
        start_below_dropped: true,
        ..PoolSpec::new("p", 3)
    })
    .await
    .unwrap();
    // `a` last saw size 10, by which 8 -> 11 is no swap at all.
    assert!(a.swap_member("p", 8, 11).await.unwrap());
    assert_eq!(b.list_members("p").await.unwrap(), [7, 9, 11]);

    // Same size, start moved by one: by `a`'s stale start 8 would be in
    // slot 1, which holds 9 now.
    b.drop_pool("p").await.unwrap();
    b.create_pool(&PoolSpec {
        start: 8,
        start_below_dropped: true,
        ..PoolSpec::new("p", 3)
    })
    .await
    .unwrap();
    assert!(a.swap_member("p", 8, 11).await.unwrap());
    assert_eq!(b.list_members("p").await.unwrap(), [9, 10, 11]);

    b.drop_pool("p").await.unwrap();
    for e in [
        a.sample_members("p", 1).await.unwrap_err(),
        a.swap_member("p", 7, 10).await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
    }
}

#[tokio::test]
async fn values_keysmith_did_not_write_are_corrupt() {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    let prefix = fresh_prefix();
    let store = EtcdStore::connect(&etcd.url_with_prefix(&prefix))
        .await
        .unwrap();
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    store.create_pool(&PoolSpec::new("p", 2)).await.unwrap();
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    raw.put(format!("{prefix}/next/s"), "not a number", None)
        .await
        .unwrap();
    raw.put(format!("{prefix}/pools/p"), "{", None)
        .await
        .unwrap();
    raw.put(
        format!("{prefix}/seq/half"),
        r#"{"start":1,"max":9,"block":1}"#,
        None,
    )
    .await
    .unwrap();
    for e in [
        store.read_sequence("s").await.unwrap_err(),
        store.reserve_atomic("s", 1).await.unwrap_err(),
        store.reserve_locked("s", 1).await.unwrap_err(),
        store.read_pool("p").await.unwrap_err(),
        store.read_sequence("half").await.unwrap_err(),
        store.list_sequences().await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::Corrupt(_)), "{e}");
        assert!(e.to_string().contains("drop"), "says what to do: {e}");
    }
}

/// A lock holder that dies (its lease is no longer kept alive) blocks a
/// locked reservation only until its lease expires; while it holds the lock,
/// the waiting caller writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lock_holder_blocks_only_until_its_lease_expires() {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    let prefix = fresh_prefix();
    let store = Arc::new(
        EtcdStore::connect(&etcd.url_with_prefix(&prefix))
            .await
            .unwrap(),
    );
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    let lease = raw.lease_grant(3, None).await.unwrap().id();
    let (mut keeper, _answers) = raw.lease_keep_alive(lease).await.unwrap();
    let lock = format!("{prefix}/locks/s");
    raw.lock(
        lock.clone(),
        Some(etcd_client::LockOptions::new().with_lease(lease)),
    )
    .await
    .unwrap();

    let waiter = {
        let store = store.clone();
        tokio::spawn(async move { store.reserve_locked("s", 5).await })
    };
    // Wait until the reservation queues behind the held lock.
    let queued = etcd_client::GetOptions::new()
        .with_prefix()
        .with_count_only();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        keeper.keep_alive().await.unwrap();
        let n = raw
            .get(format!("{lock}/"), Some(queued.clone()))
            .await
            .unwrap()
            .count();
        if n == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the waiter never queued"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        !waiter.is_finished(),
        "reserved while another held the lock"
    );
    assert_eq!(store.read_sequence("s").await.unwrap().unwrap().next, 1);

    // The holder dies: nobody keeps its lease alive any more.
    drop(keeper);
    let r = waiter.await.unwrap().unwrap();
    assert_eq!((r.start, r.end), (1, 6));
}

#[tokio::test]
async fn a_dead_endpoint_is_unavailable_and_named() {
    // A port nobody listens on: bound, then released.
    let port = keysmith_testsupport::free_port();
    let url = format!("etcd://127.0.0.1:{port}/x");
    let e = keysmith::store::open(&url).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
    assert!(e.is_retryable());
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}

#[tokio::test]
async fn bad_urls_are_invalid_arguments() {
    for bad in ["etcd://", "etcd://host", "etcd://h:notaport/p"] {
        let e = keysmith::store::open(bad).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad}: {e}");
    }
    assert_eq!(
        EtcdUrl::parse("etcd://h:1,h:2/p").unwrap().endpoints,
        ["h:1", "h:2"]
    );
}

/// The shared etcd, a store on a fresh prefix, and a claim of group `g`
/// (holder `t`, at 1 000 ms, windows of 100 ms) of `max_workers` ids for
/// `ttl`; `None` where etcd is not installed.
async fn worker_store(
    max_workers: i64,
    ttl: std::time::Duration,
) -> Option<(
    &'static TempEtcd,
    String,
    EtcdStore,
    keysmith::store::WorkerClaim,
)> {
    let etcd = TempEtcd::shared()?;
    let prefix = fresh_prefix();
    let store = EtcdStore::connect(&etcd.url_with_prefix(&prefix))
        .await
        .unwrap();
    let claim = keysmith::store::WorkerClaim {
        group: "g".into(),
        max_workers,
        holder: "t".into(),
        ttl,
        now_ms: 1_000,
        window_ms: 100,
    };
    Some((etcd, prefix, store, claim))
}

/// A worker lease whose etcd lease expired (the `lease` key is gone) but
/// that no one acquired since is renewed under the same fence: the store
/// takes it again, so a second acquirer then finds it held; the floor key
/// outlived the etcd lease.
#[tokio::test]
async fn a_lapsed_worker_lease_no_one_took_is_renewed_under_its_fence() {
    use keysmith::store::WorkerStore;
    use std::time::{Duration, Instant};
    let Some((etcd, prefix, store, claim)) = worker_store(1, Duration::from_secs(1)).await else {
        return;
    };
    let a = store.acquire_worker(&claim).await.unwrap();
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    let key = format!("{prefix}/workers/g/{:020}/lease", 0);
    let floor = format!("{prefix}/workers/g/{:020}/floor", 0);
    let give_up = Instant::now() + Duration::from_secs(60);
    // Awaits etcd's expiry of the lease key.
    while raw.get(key.as_str(), None).await.unwrap().count() > 0 {
        assert!(Instant::now() < give_up, "the etcd lease never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(raw.get(floor.as_str(), None).await.unwrap().count(), 1);
    let until = store
        .renew_worker("g", 0, a.fence, Duration::from_secs(30), 2_000, 100)
        .await
        .unwrap();
    assert_eq!(until, Some(2_100));
    assert_eq!(raw.get(key.as_str(), None).await.unwrap().count(), 1);
    let e = store.acquire_worker(&claim).await.unwrap_err();
    assert!(matches!(e, Error::IdsUnavailable(_)), "{e}");
}

/// A floor written before holders were recorded (no `holder`, no
/// `generation`) still lists: held while its `lease` key lives, with no
/// holder, its fence and floor; a renewal keeps it so.
#[tokio::test]
async fn a_floor_from_before_holders_were_recorded_lists_without_a_holder() {
    use keysmith::store::WorkerStore;
    use std::time::Duration;
    let Some((etcd, prefix, store, claim)) = worker_store(4, Duration::from_secs(60)).await else {
        return;
    };
    let a = store.acquire_worker(&claim).await.unwrap();
    let listed = store.list_workers("g").await.unwrap();
    assert_eq!(listed[0].holder.as_deref(), Some("t"), "{listed:?}");
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    let floor = format!("{prefix}/workers/g/{:020}/floor", 0);
    raw.put(
        floor,
        format!(r#"{{"fence":{},"until_ms":1100}}"#, a.fence),
        None,
    )
    .await
    .unwrap();
    let listed = store.list_workers("g").await.unwrap();
    let e = &listed[0];
    assert_eq!(
        (e.worker, e.fence, e.until_ms, e.holder.as_deref()),
        (0, a.fence, 1_100, None)
    );
    let left = e.expires_in_ms.unwrap();
    assert!((0..=60_000).contains(&left), "{e:?}");
    let until = store
        .renew_worker("g", 0, a.fence, Duration::from_secs(60), 2_000, 100)
        .await
        .unwrap();
    assert_eq!(until, Some(2_100));
    let e = &store.list_workers("g").await.unwrap()[0];
    assert_eq!((e.until_ms, e.holder.as_deref()), (2_100, None));
    assert!(e.expires_in_ms.is_some(), "{e:?}");
}

/// A pool written before pools kept a residue class (its JSON without
/// `residue`) reads back without one; a pool in a class keeps it in the
/// JSON, where a fence's rewrite keeps it too.
#[tokio::test]
async fn a_pool_from_before_classes_reads_without_one() {
    use keysmith::store::Residue;
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    let prefix = fresh_prefix();
    let store = EtcdStore::connect(&etcd.url_with_prefix(&prefix))
        .await
        .unwrap();
    store.create_pool(&PoolSpec::new("old", 2)).await.unwrap();
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    raw.put(
        format!("{prefix}/pools/old"),
        r#"{"start":1,"size":2}"#,
        None,
    )
    .await
    .unwrap();
    let other = EtcdStore::connect(&etcd.url_with_prefix(&prefix))
        .await
        .unwrap();
    let old = other.read_pool("old").await.unwrap().unwrap();
    assert_eq!((old.start, old.size, old.residue), (1, 2, None));
    assert_eq!(other.list_members("old").await.unwrap(), [1, 2]);

    let class = Residue {
        increment: 3,
        offset: 1,
    };
    store
        .create_pool(&PoolSpec {
            residue: Some(class),
            ..PoolSpec::new("c", 2)
        })
        .await
        .unwrap();
    store.fence_pool("c", 1).await.unwrap();
    let json = raw.get(format!("{prefix}/pools/c"), None).await.unwrap();
    let json: serde_json::Value = serde_json::from_slice(json.kvs()[0].value()).unwrap();
    assert_eq!(
        json["residue"],
        serde_json::json!({"increment": 3, "offset": 1}),
        "{json}"
    );
    assert_eq!(
        other.read_pool("c").await.unwrap().unwrap().residue,
        Some(class)
    );
}

/// The tombstone is in etcd: a sequence and a pool dropped through one
/// store, created again through another, continue above the values they
/// handed out.
#[tokio::test]
async fn a_tombstone_is_seen_by_another_store() {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    reopen::a_tombstone_survives_reopening(&etcd.url_with_prefix(&fresh_prefix())).await;
}

/// etcd restarts the `next` key's own version at 1 when a drop deleted it
/// and a create makes it again: the row's version is offset by the life,
/// and a put through a store that remembers the earlier life compares that
/// life's create revision too. A version of the old life whose etcd version
/// is the new life's conflicts; a version of the new life, sent through a
/// store that remembers the old one, lands (tried again in the row's life).
#[tokio::test]
async fn a_put_through_a_store_that_remembers_an_earlier_life_is_pinned_to_the_life() {
    let Some((a, b)) = two_stores().await else {
        return;
    };
    let first = a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    assert_eq!((first.version, first.incarnation), (1, 1));
    a.reserve_locked("s", 10).await.unwrap();
    let old = a.read_sequence("s").await.unwrap().unwrap();
    assert_eq!(old.version, 2);
    b.drop_sequence("s").await.unwrap();
    let below = SequenceSpec {
        start_below_dropped: true,
        ..SequenceSpec::new("s")
    };
    let new = b.create_sequence(&below).await.unwrap();
    assert_eq!((new.version, new.incarnation), (3, 3), "{new:?}");
    // The new `next` key is at etcd version 2, as the old one was at `old`.
    b.reserve_locked("s", 1).await.unwrap();
    let now = b.read_sequence("s").await.unwrap().unwrap();
    assert_eq!(now.version, 4);
    // `a` still remembers the first life: the old version is refused.
    match a.put_if_version("s", 1, old.version).await.unwrap() {
        Put::Conflict(row) => assert_eq!(row, now),
        Put::Done(row) => panic!("a put of the old life landed: {row:?}"),
    }
    let alter = keysmith::store::Alteration {
        next: 1,
        max: now.max,
        block: now.block,
        failover_skip: now.failover_skip,
        failover_skip_set: now.failover_skip_set,
    };
    let altered = a.alter_if_version("s", &alter, old.version).await.unwrap();
    assert!(matches!(altered, Put::Conflict(_)), "{altered:?}");
    assert_eq!(b.read_sequence("s").await.unwrap().unwrap(), now);
    // A store that never read the sequence, and one that remembers the old
    // life, both put on the current version.
    let (c, _) = two_stores_on(&a).await;
    let Put::Done(done) = c
        .put_if_version("s", now.next + 5, now.version)
        .await
        .unwrap()
    else {
        panic!("the current version must land through a fresh store");
    };
    assert_eq!((done.version, done.incarnation), (5, 3));
    b.drop_sequence("s").await.unwrap();
    let third = b.create_sequence(&below).await.unwrap();
    assert_eq!(third.incarnation, 6);
    let Put::Done(done) = c.put_if_version("s", 7, third.version).await.unwrap() else {
        panic!("the current version must land through a store that remembers an earlier life");
    };
    assert_eq!((done.next, done.version), (7, 7));
}

/// Another store on `a`'s prefix, and a second one.
async fn two_stores_on(a: &EtcdStore) -> (EtcdStore, EtcdStore) {
    let etcd = TempEtcd::shared().unwrap();
    let url = etcd.url_with_prefix(a.prefix().trim_end_matches('/'));
    (
        EtcdStore::connect(&url).await.unwrap(),
        EtcdStore::connect(&url).await.unwrap(),
    )
}

/// A sequence whose spec key has no `incarnation` (written before lives
/// were recorded) reads as incarnation 0, its version the etcd version;
/// a pool's meta without one, incarnation 0 too. A create over tombstones
/// without `version` starts at incarnation 1.
#[tokio::test]
async fn rows_from_before_lives_read_with_incarnation_zero() {
    let Some(etcd) = TempEtcd::shared() else {
        return;
    };
    let prefix = fresh_prefix();
    let store = EtcdStore::connect(&etcd.url_with_prefix(&prefix))
        .await
        .unwrap();
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    client
        .put(
            format!("{prefix}/seq/old"),
            r#"{"start":1,"max":100,"block":10}"#,
            None,
        )
        .await
        .unwrap();
    client
        .put(format!("{prefix}/next/old"), "1", None)
        .await
        .unwrap();
    client
        .put(format!("{prefix}/next/old"), "5", None)
        .await
        .unwrap();
    let row = store.read_sequence("old").await.unwrap().unwrap();
    assert_eq!((row.next, row.version, row.incarnation), (5, 2, 0));
    let Put::Done(done) = store.put_if_version("old", 9, 2).await.unwrap() else {
        panic!("the current version of an old row");
    };
    assert_eq!((done.version, done.incarnation), (3, 0));
    client
        .put(format!("{prefix}/pools/p"), r#"{"start":1,"size":3}"#, None)
        .await
        .unwrap();
    assert_eq!(store.read_pool("p").await.unwrap().unwrap().incarnation, 0);
    client
        .put(
            format!("{prefix}/tombstones/sequence/t"),
            r#"{"high_water":50,"reversed_next":0}"#,
            None,
        )
        .await
        .unwrap();
    let t = store
        .create_sequence(&SequenceSpec::new("t"))
        .await
        .unwrap();
    assert_eq!((t.start, t.version, t.incarnation), (50, 1, 1));
}

/// A lease taken through one store (one server), the name dropped and
/// created again below its values through another: its release through
/// the first store, which remembers the earlier life, and through a store
/// that never read the name, is refused as [`Error::Dropped`] and changes
/// nothing; the new life's own lease goes back through either.
#[tokio::test]
async fn a_lease_released_through_another_store_after_a_drop_is_refused() {
    use keysmith::sequence::{Strategy, lease};
    let Some((a, b)) = two_stores().await else {
        return;
    };
    let (c, _) = two_stores_on(&a).await;
    let (a, b, c): (Arc<dyn Store>, Arc<dyn Store>, Arc<dyn Store>) =
        (Arc::new(a), Arc::new(b), Arc::new(c));
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    let budget = std::time::Duration::from_secs(5);
    let old = lease::lease(a.clone(), "s", 10, Strategy::Optimistic, budget)
        .await
        .unwrap();
    b.drop_sequence("s").await.unwrap();
    let below = SequenceSpec {
        start_below_dropped: true,
        ..SequenceSpec::new("s")
    };
    b.create_sequence(&below).await.unwrap();
    let new = lease::lease(b.clone(), "s", 10, Strategy::Optimistic, budget)
        .await
        .unwrap();
    assert!(new.incarnation > old.incarnation, "{new:?} {old:?}");
    let before = b.read_sequence("s").await.unwrap().unwrap();
    for store in [&a, &c] {
        let e = lease::release(&**store, &old, old.start).await.unwrap_err();
        assert!(matches!(e, Error::Dropped { held: "lease", .. }), "{e}");
        assert_eq!(b.read_sequence("s").await.unwrap().unwrap(), before);
    }
    let back = lease::release(&*c, &new, new.start).await.unwrap();
    assert_eq!(back, Some(new.start..new.end));
}

//! Pool tests written once for the server backends (`backend_postgres.rs`
//! and `backend_mysql.rs` include this file with `#[path]`): what the
//! conformance suite cannot check with one small pool on one store.

use std::collections::BTreeSet;

use keysmith::Error;
use keysmith::store::{PoolSpec, Store};

/// A pool of 5000 members: samples are distinct members of it and differ
/// between calls; a `k` above the size gives every member; a member that
/// moved up (a swap) is still found, and the one it replaced is gone.
pub async fn large_pools_give_distinct_members_and_follow_swaps(store: &dyn Store) {
    store
        .create_pool(&PoolSpec {
            start: 1000,
            ..PoolSpec::new("big", 5000)
        })
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    for _ in 0..20 {
        let s = store.sample_members("big", 8).await.unwrap();
        assert_eq!(s.len(), 8);
        let set: BTreeSet<i64> = s.iter().copied().collect();
        assert_eq!(set.len(), 8, "repeats: {s:?}");
        assert!(s.iter().all(|v| (1000..6000).contains(v)), "{s:?}");
        seen.insert(set);
    }
    assert!(seen.len() > 1, "every caller got the same sample");
    // k above the size gives every member.
    assert_eq!(store.sample_members("big", 6000).await.unwrap().len(), 5000);
    // Members that moved up (swaps) are still found.
    assert!(store.swap_member("big", 1000, 6000).await.unwrap());
    let all: BTreeSet<i64> = store
        .sample_members("big", 10_000)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(all.len(), 5000);
    assert!(all.contains(&6000) && !all.contains(&1000));
}

/// Two stores `a` and `b` on the same URL: a pool `a` sampled, dropped and
/// created again by `b` with another size (and start), is sampled by `a` at
/// its new size; dropped for good, it is not found.
pub async fn a_pool_created_again_with_another_size_is_sampled_at_its_new_size(
    a: &dyn Store,
    b: &dyn Store,
) {
    a.create_pool(&PoolSpec {
        start: 0,
        ..PoolSpec::new("p", 4)
    })
    .await
    .unwrap();
    assert_eq!(a.sample_members("p", 10).await.unwrap().len(), 4);
    // Dropped and created again by another store: `a` still remembers size 4.
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
        ..PoolSpec::new("p", 2)
    })
    .await
    .unwrap();
    let mut s = a.sample_members("p", 10).await.unwrap();
    s.sort();
    assert_eq!(s, [7, 8]);
    b.drop_pool("p").await.unwrap();
    assert!(matches!(
        a.sample_members("p", 1).await,
        Err(Error::NotFound { .. })
    ));
}

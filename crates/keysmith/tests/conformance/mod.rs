//! The Store conformance suite: one set of checks, run for every backend.
//!
//! A backend's test file does
//! ```ignore
//! #[macro_use]
//! mod conformance;
//! async fn fresh_store() -> Option<Arc<dyn Store>> { ... }   // None: skip
//! conformance_tests!(fresh_store);
//! ```
//! and gets one `#[tokio::test]` per check below. Each call of the factory must
//! give a fresh, empty store.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::Arc;

use keysmith::Error;
use keysmith::pool::ValuePool;
use keysmith::sequence::{Sequence, Strategy};
use keysmith::store::{MAX_VALUE, Put, Reservation, SequenceSpec, Store};

/// Generates one test per check for a backend.
macro_rules! conformance_tests {
    ($factory:path) => {
        conformance_tests!(@each $factory;
            create_then_read,
            put_if_version_applies_on_match,
            put_if_version_conflict_returns_current_row,
            missing_sequence_is_not_found,
            reserve_locked_and_atomic_hand_out_contiguous_ranges,
            reservations_clamp_at_max_then_exhaust,
            values_near_i64_max_do_not_overflow,
            list_and_drop,
            names_are_stored_verbatim,
            concurrent_optimistic_callers_never_overlap,
            concurrent_locked_and_atomic_callers_never_overlap,
            pool_create_read_members,
            pool_sample_is_random_subset,
            pool_sample_is_uniform_after_swaps,
            pool_swap_only_when_member,
            concurrent_pool_swaps_of_one_member_have_one_winner,
            pool_list_and_drop,
            ping_answers,
            a_failed_next_n_near_the_maximum_loses_nothing,
            a_failed_strict_next_n_hands_its_values_back,
            a_failed_pool_take_n_near_the_maximum_loses_nothing
        );
    };
    (@each $factory:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $check() {
                match $factory().await {
                    Some(store) => conformance::$check(store).await,
                    None => eprintln!("skipped: backend unavailable"),
                }
            }
        )*
    };
}

fn spec(name: &str, start: i64, max: i64) -> SequenceSpec {
    SequenceSpec {
        name: name.into(),
        start,
        max,
        block: 10,
    }
}

pub async fn create_then_read(store: Arc<dyn Store>) {
    let row = store.create(&spec("orders", 5, 1000)).await.unwrap();
    assert_eq!(
        (row.name.as_str(), row.next, row.start, row.max, row.block),
        ("orders", 5, 5, 1000, 10)
    );
    assert_eq!(store.read("orders").await.unwrap(), Some(row.clone()));
    let again = store.create(&spec("orders", 1, 10)).await.unwrap_err();
    assert!(matches!(again, Error::AlreadyExists { .. }), "{again}");
    assert_eq!(
        store.read("orders").await.unwrap(),
        Some(row),
        "failed create changed the row"
    );
    assert_eq!(store.read("nope").await.unwrap(), None);
}

pub async fn put_if_version_applies_on_match(store: Arc<dyn Store>) {
    let row = store.create(&spec("s", 1, 100)).await.unwrap();
    let Put::Done(done) = store.put_if_version("s", 11, row.version).await.unwrap() else {
        panic!("put with the current version must apply");
    };
    assert_eq!(done.next, 11);
    assert!(done.version != row.version);
    assert_eq!(store.read("s").await.unwrap(), Some(done));
}

pub async fn put_if_version_conflict_returns_current_row(store: Arc<dyn Store>) {
    let row = store.create(&spec("s", 1, 100)).await.unwrap();
    let Put::Done(current) = store.put_if_version("s", 21, row.version).await.unwrap() else {
        panic!("first put must apply");
    };
    match store.put_if_version("s", 31, row.version).await.unwrap() {
        Put::Conflict(seen) => assert_eq!(seen, current, "conflict must return the stored row"),
        Put::Done(r) => panic!("stale version applied: {r:?}"),
    }
    assert_eq!(
        store.read("s").await.unwrap(),
        Some(current),
        "a conflict changed the row"
    );
}

pub async fn missing_sequence_is_not_found(store: Arc<dyn Store>) {
    let e = store.put_if_version("ghost", 5, 1).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    let e = store.reserve_locked("ghost", 5).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    let e = store.reserve_atomic("ghost", 5).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert_eq!(
        store.read("ghost").await.unwrap(),
        None,
        "a failed call created the sequence"
    );
}

pub async fn reserve_locked_and_atomic_hand_out_contiguous_ranges(store: Arc<dyn Store>) {
    let row = store.create(&spec("s", 100, 10_000)).await.unwrap();
    let a = store.reserve_locked("s", 10).await.unwrap();
    assert_eq!((a.start, a.end), (100, 110));
    let b = store.reserve_atomic("s", 5).await.unwrap();
    assert_eq!((b.start, b.end), (110, 115));
    let after = store.read("s").await.unwrap().unwrap();
    assert_eq!(after.next, 115);
    assert_eq!(
        after.version, b.version,
        "reservation must report the version it left"
    );
    assert!(a.version != row.version && b.version != a.version);
    // The reported version is the one a conditional put must quote.
    assert!(matches!(
        store.put_if_version("s", 112, b.version).await.unwrap(),
        Put::Done(_)
    ));
}

pub async fn reservations_clamp_at_max_then_exhaust(store: Arc<dyn Store>) {
    store.create(&spec("s", 1, 25)).await.unwrap();
    let reserve = |locked: bool| {
        let store = store.clone();
        async move {
            if locked {
                store.reserve_locked("s", 10).await
            } else {
                store.reserve_atomic("s", 10).await
            }
        }
    };
    let got: Vec<Reservation> = vec![
        reserve(true).await.unwrap(),
        reserve(false).await.unwrap(),
        reserve(true).await.unwrap(),
    ];
    let spans: Vec<_> = got.iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(
        spans,
        vec![(1, 11), (11, 21), (21, 26)],
        "the last block is cut at max"
    );
    for locked in [true, false] {
        let e = reserve(locked).await.unwrap_err();
        assert!(matches!(e, Error::Exhausted { max: 25, .. }), "{e}");
    }
    assert_eq!(
        store.read("s").await.unwrap().unwrap().next,
        26,
        "exhausted calls changed next"
    );
}

pub async fn values_near_i64_max_do_not_overflow(store: Arc<dyn Store>) {
    store
        .create(&spec("big", MAX_VALUE - 5, MAX_VALUE))
        .await
        .unwrap();
    let r = store.reserve_atomic("big", 1 << 40).await.unwrap();
    assert_eq!((r.start, r.end), (MAX_VALUE - 5, MAX_VALUE + 1));
    assert!(matches!(
        store.reserve_atomic("big", 1).await,
        Err(Error::Exhausted { .. })
    ));
    assert!(matches!(
        store.reserve_locked("big", 1 << 40).await,
        Err(Error::Exhausted { .. })
    ));
    let row = store.read("big").await.unwrap().unwrap();
    assert_eq!(row.next, MAX_VALUE + 1);
}

pub async fn list_and_drop(store: Arc<dyn Store>) {
    for n in ["b", "a", "c"] {
        store.create(&spec(n, 1, 10)).await.unwrap();
    }
    let names: Vec<_> = store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    store.drop_sequence("b").await.unwrap();
    assert_eq!(store.read("b").await.unwrap(), None);
    let e = store.drop_sequence("b").await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert_eq!(store.list().await.unwrap().len(), 2);
    // A dropped name can be created again, from its own start.
    let again = store.create(&spec("b", 7, 10)).await.unwrap();
    assert_eq!(again.next, 7);
}

pub async fn names_are_stored_verbatim(store: Arc<dyn Store>) {
    let names = [
        "example.com/a#main",
        "ünïcödé-名前",
        "a'b\"c;--",
        "x%2Fy?z=1&w",
    ];
    for n in names {
        store.create(&spec(n, 1, 10)).await.unwrap();
        let r = store.reserve_atomic(n, 2).await.unwrap();
        assert_eq!((r.start, r.end), (1, 3), "{n}");
    }
    let listed: BTreeSet<_> = store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(listed, names.iter().map(|s| s.to_string()).collect());
}

/// Each task: read, conditional put, on conflict retry from the returned row.
pub async fn concurrent_optimistic_callers_never_overlap(store: Arc<dyn Store>) {
    const TASKS: usize = 8;
    const EACH: usize = 25;
    store.create(&spec("hot", 0, MAX_VALUE)).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            let mut conflicts = 0u32;
            let mut row = store.read("hot").await.unwrap().unwrap();
            while got.len() < EACH {
                let plan = row.plan(3).unwrap();
                match store
                    .put_if_version("hot", plan.end, row.version)
                    .await
                    .unwrap()
                {
                    Put::Done(now) => {
                        got.push((plan.start, plan.end));
                        row = now;
                    }
                    Put::Conflict(now) => {
                        assert!(
                            now.version != row.version,
                            "conflict returned the stale row"
                        );
                        conflicts += 1;
                        row = now;
                    }
                }
            }
            (got, conflicts)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap().0);
    }
    assert_disjoint_and_dense(all, 0, (TASKS * EACH * 3) as i64);
    assert_eq!(
        store.read("hot").await.unwrap().unwrap().next,
        (TASKS * EACH * 3) as i64
    );
}

pub async fn concurrent_locked_and_atomic_callers_never_overlap(store: Arc<dyn Store>) {
    const TASKS: usize = 8;
    const EACH: usize = 25;
    store.create(&spec("hot", 0, MAX_VALUE)).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..EACH {
                let r = if i % 2 == 0 {
                    store.reserve_locked("hot", 4).await
                } else {
                    store.reserve_atomic("hot", 4).await
                }
                .unwrap();
                got.push((r.start, r.end));
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_disjoint_and_dense(all, 0, (TASKS * EACH * 4) as i64);
}

fn assert_disjoint_and_dense(mut ranges: Vec<(i64, i64)>, from: i64, to: i64) {
    ranges.sort();
    let mut at = from;
    for (s, e) in ranges {
        assert_eq!(s, at, "ranges overlap or leave a hole at {at}");
        assert!(e > s);
        at = e;
    }
    assert_eq!(at, to);
}

pub async fn pool_create_read_members(store: Arc<dyn Store>) {
    let p = store.pool_create("p", 10, 5).await.unwrap();
    assert_eq!((p.name.as_str(), p.start, p.size), ("p", 10, 5));
    assert_eq!(store.pool_read("p").await.unwrap(), Some(p));
    assert_eq!(
        store.pool_members("p").await.unwrap(),
        vec![10, 11, 12, 13, 14]
    );
    let e = store.pool_create("p", 0, 3).await.unwrap_err();
    assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
    assert_eq!(store.pool_members("p").await.unwrap().len(), 5);
    assert_eq!(store.pool_read("nope").await.unwrap(), None);
    for e in [
        store.pool_members("nope").await.unwrap_err(),
        store.pool_sample("nope", 3).await.unwrap_err(),
        store.pool_swap("nope", 1, 2).await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
    }
}

pub async fn pool_sample_is_random_subset(store: Arc<dyn Store>) {
    store.pool_create("p", 1, 50).await.unwrap();
    let members: BTreeSet<i64> = store.pool_members("p").await.unwrap().into_iter().collect();
    let mut seen = BTreeSet::new();
    for _ in 0..30 {
        let s = store.pool_sample("p", 5).await.unwrap();
        assert_eq!(s.len(), 5);
        let set: BTreeSet<i64> = s.iter().copied().collect();
        assert_eq!(set.len(), 5, "sample repeats a member: {s:?}");
        assert!(set.is_subset(&members), "sample {s:?} holds non-members");
        seen.insert(s.into_iter().collect::<Vec<_>>());
    }
    assert!(seen.len() > 1, "every caller got the same sample");
    assert_eq!(
        store.pool_sample("p", 500).await.unwrap().len(),
        50,
        "k above size gives all"
    );
}

/// One member is swapped far ahead, leaving a big gap below it: sampling
/// must still pick every member equally often (sampling a random point of
/// the value range would pick the far member almost every time).
pub async fn pool_sample_is_uniform_after_swaps(store: Arc<dyn Store>) {
    store.pool_create("u", 0, 10).await.unwrap();
    for i in 0..50 {
        assert!(store.pool_swap("u", 3 + 10 * i, 13 + 10 * i).await.unwrap());
    }
    let members = store.pool_members("u").await.unwrap();
    assert_eq!(members, vec![0, 1, 2, 4, 5, 6, 7, 8, 9, 503]);
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..1000 {
        for v in store.pool_sample("u", 2).await.unwrap() {
            *counts.entry(v).or_insert(0u32) += 1;
        }
    }
    // 2000 picks over 10 members: 200 each on average, sd about 13.
    for m in members {
        let c = counts.get(&m).copied().unwrap_or(0);
        assert!(
            (100..=300).contains(&c),
            "member {m} sampled {c} times of 2000: {counts:?}"
        );
    }
}

pub async fn pool_swap_only_when_member(store: Arc<dyn Store>) {
    store.pool_create("p", 1, 3).await.unwrap();
    assert!(store.pool_swap("p", 2, 5).await.unwrap());
    assert_eq!(store.pool_members("p").await.unwrap(), vec![1, 3, 5]);
    assert!(
        !store.pool_swap("p", 2, 5).await.unwrap(),
        "2 was taken already"
    );
    assert!(!store.pool_swap("p", 99, 102).await.unwrap());
    assert_eq!(
        store.pool_members("p").await.unwrap(),
        vec![1, 3, 5],
        "failed swaps changed the pool"
    );
}

pub async fn concurrent_pool_swaps_of_one_member_have_one_winner(store: Arc<dyn Store>) {
    store.pool_create("p", 1, 4).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.pool_swap("p", 3, 7).await.unwrap()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += t.await.unwrap() as usize;
    }
    assert_eq!(wins, 1);
    assert_eq!(store.pool_members("p").await.unwrap(), vec![1, 2, 4, 7]);
}

pub async fn pool_list_and_drop(store: Arc<dyn Store>) {
    store.pool_create("b", 1, 2).await.unwrap();
    store.pool_create("a", 1, 2).await.unwrap();
    let names: Vec<_> = store
        .pool_list()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    store.pool_drop("a").await.unwrap();
    assert!(matches!(
        store.pool_drop("a").await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(store.pool_read("a").await.unwrap(), None);
    // Re-created, it starts full again.
    store.pool_create("a", 100, 2).await.unwrap();
    assert_eq!(store.pool_members("a").await.unwrap(), vec![100, 101]);
}

pub async fn ping_answers(store: Arc<dyn Store>) {
    store.ping().await.unwrap();
}

/// A cached handle near the maximum: a batch larger than what is left fails
/// with `Exhausted` and hands nothing out; the values it reserved stay with
/// the handle and are the next ones handed out, for every strategy.
pub async fn a_failed_next_n_near_the_maximum_loses_nothing(store: Arc<dyn Store>) {
    for strategy in [Strategy::Atomic, Strategy::Optimistic, Strategy::Locked] {
        let name = format!("near-max-{strategy}");
        store
            .create(&SequenceSpec {
                block: 4,
                ..spec(&name, 1, 10)
            })
            .await
            .unwrap();
        let h = Sequence::builder()
            .store(store.clone())
            .name(&name)
            .strategy(strategy)
            .prefetch(0.0)
            .build()
            .await
            .unwrap();
        assert_eq!(h.next_n(3).await.unwrap(), vec![1, 2, 3], "{strategy}");
        // 7 left (4 in the handle's block, 3 in the store): 8 is too many.
        let e = h.next_n(8).await.unwrap_err();
        assert!(matches!(e, Error::Exhausted { .. }), "{strategy}: {e}");
        // Nothing was lost: the next values are exactly the rest.
        assert_eq!(h.next().await.unwrap(), 4, "{strategy}");
        assert_eq!(
            h.next_n(6).await.unwrap(),
            (5..=10).collect::<Vec<_>>(),
            "{strategy}"
        );
        assert!(
            matches!(h.next().await, Err(Error::Exhausted { .. })),
            "{strategy}"
        );
    }
}

/// A strict handle (block 1) asking for more than is left: the short
/// reservation it made goes back to the store, so another handle gets it.
pub async fn a_failed_strict_next_n_hands_its_values_back(store: Arc<dyn Store>) {
    for strategy in [Strategy::Atomic, Strategy::Optimistic, Strategy::Locked] {
        let name = format!("strict-near-max-{strategy}");
        store
            .create(&SequenceSpec {
                block: 1,
                ..spec(&name, 1, 3)
            })
            .await
            .unwrap();
        let open = || {
            Sequence::builder()
                .store(store.clone())
                .name(&name)
                .strategy(strategy)
                .build()
        };
        let h = open().await.unwrap();
        assert!(h.is_strict());
        let e = h.next_n(5).await.unwrap_err();
        assert!(matches!(e, Error::Exhausted { .. }), "{strategy}: {e}");
        assert_eq!(
            store.read(&name).await.unwrap().unwrap().next,
            1,
            "{strategy}: handed back"
        );
        let other = open().await.unwrap();
        assert_eq!(other.next_n(3).await.unwrap(), vec![1, 2, 3], "{strategy}");
    }
}

/// A pool near its maximum (only some members can still be taken): a batch
/// larger than what is left fails with `Exhausted`, gives back what it took,
/// and those numbers are what the next batch gets.
pub async fn a_failed_pool_take_n_near_the_maximum_loses_nothing(store: Arc<dyn Store>) {
    let size = 10;
    // The highest start a pool of 10 may have: each member can be taken once
    // (its replacement, above i64::MAX - size, cannot), so 10 numbers in all.
    let start = i64::MAX - 2 * size + 1;
    keysmith::pool::create(&*store, "near-max", start, size)
        .await
        .unwrap();
    let before = store.pool_members("near-max").await.unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("near-max")
        .build()
        .await
        .unwrap();
    let e = h.take_n(11).await.unwrap_err();
    assert!(matches!(e, Error::Exhausted { .. }), "{e}");
    assert_eq!(
        store.pool_members("near-max").await.unwrap(),
        before,
        "the numbers taken went back into the pool"
    );
    let mut got = h.take_n(10).await.unwrap();
    got.sort();
    assert_eq!(got, (start..start + size).collect::<Vec<_>>());
    assert_eq!(
        h.stats().takes,
        10,
        "numbers given back are not counted as taken"
    );
    assert!(matches!(h.take().await, Err(Error::Exhausted { .. })));
}

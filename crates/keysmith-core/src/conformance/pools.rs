//! The pool half of the store contract ([`PoolStore`](crate::store::PoolStore)):
//! members, uniform samples and swaps, alone and racing.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::pool_spec;
use crate::Error;
use crate::store::{PoolSpec, PoolTotals, Store};

/// A created pool holds `start..start + size`; creating it again is
/// `AlreadyExists`.
pub async fn pool_create_read_members(store: Arc<dyn Store>) {
    let p = store.create_pool(&pool_spec("p", 10, 5)).await.unwrap();
    assert_eq!((p.name.as_str(), p.start, p.size), ("p", 10, 5));
    assert_eq!(store.read_pool("p").await.unwrap(), Some(p));
    assert_eq!(
        store.list_members("p").await.unwrap(),
        vec![10, 11, 12, 13, 14]
    );
    let e = store.create_pool(&pool_spec("p", 0, 3)).await.unwrap_err();
    assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
    assert_eq!(store.list_members("p").await.unwrap().len(), 5);
    assert_eq!(store.read_pool("nope").await.unwrap(), None);
    for e in [
        store.list_members("nope").await.unwrap_err(),
        store.sample_members("nope", 3).await.unwrap_err(),
        store.swap_member("nope", 1, 2).await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
    }
}

/// Samples are distinct members, never more than the pool holds, and vary
/// between calls.
pub async fn pool_sample_is_random_subset(store: Arc<dyn Store>) {
    store.create_pool(&pool_spec("p", 1, 50)).await.unwrap();
    let members: BTreeSet<i64> = store.list_members("p").await.unwrap().into_iter().collect();
    let mut seen = BTreeSet::new();
    for _ in 0..30 {
        let s = store.sample_members("p", 5).await.unwrap();
        assert_eq!(s.len(), 5);
        let set: BTreeSet<i64> = s.iter().copied().collect();
        assert_eq!(set.len(), 5, "sample repeats a member: {s:?}");
        assert!(set.is_subset(&members), "sample {s:?} holds non-members");
        seen.insert(s.into_iter().collect::<Vec<_>>());
    }
    assert!(seen.len() > 1, "every caller got the same sample");
    assert_eq!(
        store.sample_members("p", 500).await.unwrap().len(),
        50,
        "k above size gives all"
    );
}

/// One member is swapped far ahead, leaving a big gap below it: sampling
/// must still pick every member equally often (sampling a random point of
/// the value range would pick the far member almost every time).
pub async fn pool_sample_is_uniform_after_swaps(store: Arc<dyn Store>) {
    store.create_pool(&pool_spec("u", 0, 10)).await.unwrap();
    for i in 0..50 {
        assert!(
            store
                .swap_member("u", 3 + 10 * i, 13 + 10 * i)
                .await
                .unwrap()
        );
    }
    let members = store.list_members("u").await.unwrap();
    assert_eq!(members, vec![0, 1, 2, 4, 5, 6, 7, 8, 9, 503]);
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..1000 {
        for v in store.sample_members("u", 2).await.unwrap() {
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

/// A swap of a number that is not a member does nothing and returns false; of a
/// member, replaces it.
pub async fn pool_swap_only_when_member(store: Arc<dyn Store>) {
    store.create_pool(&pool_spec("p", 1, 3)).await.unwrap();
    assert!(store.swap_member("p", 2, 5).await.unwrap());
    assert_eq!(store.list_members("p").await.unwrap(), vec![1, 3, 5]);
    assert!(
        !store.swap_member("p", 2, 5).await.unwrap(),
        "2 was taken already"
    );
    assert!(!store.swap_member("p", 99, 102).await.unwrap());
    assert_eq!(
        store.list_members("p").await.unwrap(),
        vec![1, 3, 5],
        "failed swaps changed the pool"
    );
}

/// Tasks swapping the same member at once: exactly one wins.
pub async fn concurrent_pool_swaps_of_one_member_have_one_winner(store: Arc<dyn Store>) {
    store.create_pool(&pool_spec("p", 1, 4)).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.swap_member("p", 3, 7).await.unwrap()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += t.await.unwrap() as usize;
    }
    assert_eq!(wins, 1);
    assert_eq!(store.list_members("p").await.unwrap(), vec![1, 2, 4, 7]);
}

/// `pool_names_near`: as `sequence_names_near`, over pools only.
pub async fn pool_names_near_are_the_neighbours_in_name_order(store: Arc<dyn Store>) {
    for c in 'a'..='f' {
        let name = format!("p{c}");
        store.create_pool(&pool_spec(&name, 1, 2)).await.unwrap();
    }
    store
        .create_sequence(&super::spec("pcc", 1, 100))
        .await
        .unwrap();
    let near = store.pool_names_near("pcc", 4).await.unwrap();
    assert_eq!(near, ["pb", "pc", "pd", "pe"], "a sequence is no pool");
    store.drop_pool("pd").await.unwrap();
    let near = store.pool_names_near("pz", 4).await.unwrap();
    assert_eq!(near, ["pe", "pf"]);
    assert_eq!(store.pool_names_near("pa", 2).await.unwrap(), ["pa"]);
}

/// `list_pools` is ordered by name; a dropped pool is gone with its members,
/// and a pool created again under its name starts full.
pub async fn pool_list_and_drop(store: Arc<dyn Store>) {
    store.create_pool(&pool_spec("b", 1, 2)).await.unwrap();
    store.create_pool(&pool_spec("a", 1, 2)).await.unwrap();
    let names: Vec<_> = store
        .list_pools()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    store.drop_pool("a").await.unwrap();
    assert!(matches!(
        store.drop_pool("a").await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(store.read_pool("a").await.unwrap(), None);
    // Re-created, it starts full again.
    store.create_pool(&pool_spec("a", 100, 2)).await.unwrap();
    assert_eq!(store.list_members("a").await.unwrap(), vec![100, 101]);
}

/// A pool's rate marks move once per
/// [`MARK_INTERVAL_MS`](crate::store::MARK_INTERVAL_MS) and go with the
/// pool: dropped and created again, it has none.
pub async fn pool_rate_marks_move_and_go_with_the_pool(store: Arc<dyn Store>) {
    use crate::store::{MARK_INTERVAL_MS, RateMark, RateMarks};
    store.create_pool(&pool_spec("m", 1, 4)).await.unwrap();
    assert_eq!(
        store.read_pool_marks("m").await.unwrap(),
        RateMarks::default()
    );
    store.record_pool_mark("m", 1_000, 5).await.unwrap();
    store.record_pool_mark("m", 2_000, 9).await.unwrap();
    let marks = store.read_pool_marks("m").await.unwrap();
    assert_eq!(
        marks.mark,
        Some(RateMark {
            at_ms: 1_000,
            reserved: 5
        })
    );
    assert_eq!(marks.prev_mark, None);
    store
        .record_pool_mark("m", 1_000 + MARK_INTERVAL_MS, 65)
        .await
        .unwrap();
    let marks = store.read_pool_marks("m").await.unwrap();
    assert_eq!(
        marks.prev_mark,
        Some(RateMark {
            at_ms: 1_000,
            reserved: 5
        })
    );
    assert_eq!(marks.rate_between(), Some(1.0));
    store.drop_pool("m").await.unwrap();
    assert!(matches!(
        store.read_pool_marks("m").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.record_pool_mark("m", 0, 0).await,
        Err(Error::NotFound { .. })
    ));
    store.create_pool(&pool_spec("m", 1, 4)).await.unwrap();
    assert_eq!(
        store.read_pool_marks("m").await.unwrap(),
        RateMarks::default()
    );
}

/// A pool records the store's generation; `fence_pool` moves every member
/// forward by whole rounds (each keeps its slot), takes go on above, and a
/// fence that would push a member past the largest value changes nothing.
pub async fn fence_pool_moves_every_member_by_whole_rounds(store: Arc<dyn Store>) {
    let generation = store.generation().await.unwrap();
    let row = store.create_pool(&PoolSpec::new("fp", 5)).await.unwrap();
    assert_eq!(row.generation.as_deref(), Some(generation.as_str()));
    assert!(store.swap_member("fp", 1, 6).await.unwrap());
    let before = store.list_members("fp").await.unwrap();
    store.fence_pool("fp", 3).await.unwrap();
    let after = store.list_members("fp").await.unwrap();
    let moved: Vec<i64> = before.iter().map(|v| v + 15).collect();
    assert_eq!(after, moved, "every member plus 3 rounds of 5");
    assert_eq!(
        store.read_pool("fp").await.unwrap().unwrap().generation,
        Some(generation)
    );
    // The old members are gone: swapping one changes nothing.
    assert!(!store.swap_member("fp", 2, 7).await.unwrap());
    assert!(store.swap_member("fp", 17, 22).await.unwrap());
    // Near the largest value: refused, nothing moved.
    let top = PoolSpec {
        start: i64::MAX - 20,
        ..PoolSpec::new("fp-top", 3)
    };
    store.create_pool(&top).await.unwrap();
    let before = store.list_members("fp-top").await.unwrap();
    let e = store.fence_pool("fp-top", 10).await.unwrap_err();
    assert!(matches!(e, Error::Exhausted { .. }), "{e}");
    assert_eq!(store.list_members("fp-top").await.unwrap(), before);
    assert!(matches!(
        store.fence_pool("nope", 1).await,
        Err(Error::NotFound { .. })
    ));
}

/// A pool's residue class is kept with it: the store returns it from
/// `create_pool`, `read_pool` and `list_pools`, whoever reads; a pool
/// created without one reads back `None`. The store keeps members as it is
/// given them (stored members, not values), and a fence of a pool in a
/// class stops where a member's value would no longer fit.
pub async fn pool_residue_class_is_kept_with_the_pool(store: Arc<dyn Store>) {
    use crate::store::Residue;
    let class = Residue {
        increment: 4,
        offset: 3,
    };
    let plain = store.create_pool(&pool_spec("plain", 1, 3)).await.unwrap();
    assert_eq!(plain.residue, None);
    let spec = PoolSpec {
        residue: Some(class),
        ..pool_spec("class", 7, 3)
    };
    let row = store.create_pool(&spec).await.unwrap();
    assert_eq!((row.start, row.size, row.residue), (7, 3, Some(class)));
    assert_eq!(store.list_members("class").await.unwrap(), vec![7, 8, 9]);
    assert_eq!(store.read_pool("class").await.unwrap(), Some(row.clone()));
    assert_eq!(
        store.read_pool("plain").await.unwrap().unwrap().residue,
        None
    );
    let listed: Vec<_> = store
        .list_pools()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name, p.residue))
        .collect();
    assert_eq!(
        listed,
        [
            ("class".to_owned(), Some(class)),
            ("plain".to_owned(), None)
        ]
    );
    // A swap and a fence keep the class (a backend that rewrites the pool's
    // metadata with the generation must write the class back).
    assert!(store.swap_member("class", 8, 11).await.unwrap());
    store.fence_pool("class", 2).await.unwrap();
    assert_eq!(
        store.list_members("class").await.unwrap(),
        vec![13, 15, 17],
        "every member plus 2 rounds of 3"
    );
    assert_eq!(
        store.read_pool("class").await.unwrap().unwrap().residue,
        Some(class)
    );
    // Near the top of the class: members whose values fit in an i64 only
    // up to the last slot of the class, far below i64::MAX as members.
    let last = class.slot_at_or_below(i64::MAX);
    let top = PoolSpec {
        start: last - 5 - 2,
        residue: Some(class),
        ..pool_spec("class-top", 0, 3)
    };
    store.create_pool(&top).await.unwrap();
    let before = store.list_members("class-top").await.unwrap();
    let e = store.fence_pool("class-top", 1).await.unwrap_err();
    assert!(
        matches!(e, Error::Exhausted { max, .. } if max == class.value(last - 3)),
        "{e}"
    );
    assert_eq!(store.list_members("class-top").await.unwrap(), before);
    // The same members without a class move: the bound is the class's.
    store
        .create_pool(&PoolSpec {
            name: "plain-top".into(),
            residue: None,
            ..top
        })
        .await
        .unwrap();
    store.fence_pool("plain-top", 1).await.unwrap();
}

/// Creating a dropped pool name continues above the values it handed out
/// (its largest member bounds them); a second drop keeps the higher mark;
/// `start_below_dropped` starts where asked.
pub async fn a_dropped_pool_name_continues_above_what_it_handed_out(store: Arc<dyn Store>) {
    store.create_pool(&pool_spec("t", 1, 4)).await.unwrap();
    // Take 1 (its slot now holds 5), then 5 (9): handed out 1 and 5.
    assert!(store.swap_member("t", 1, 5).await.unwrap());
    assert!(store.swap_member("t", 5, 9).await.unwrap());
    store.drop_pool("t").await.unwrap();
    let again = store.create_pool(&pool_spec("t", 1, 4)).await.unwrap();
    assert_eq!(
        again.start, 9,
        "the largest member bounds what was handed out"
    );
    assert_eq!(store.list_members("t").await.unwrap(), vec![9, 10, 11, 12]);
    store.drop_pool("t").await.unwrap();
    let below = PoolSpec {
        start_below_dropped: true,
        ..pool_spec("t", 1, 4)
    };
    assert_eq!(store.create_pool(&below).await.unwrap().start, 1);
    store.drop_pool("t").await.unwrap();
    let again = store.create_pool(&pool_spec("t", 1, 4)).await.unwrap();
    assert_eq!(
        again.start, 12,
        "the higher mark (12) of the two drops is kept"
    );
    // A pool whose members would pass i64::MAX above the mark is refused.
    store.drop_pool("t").await.unwrap();
    let top = i64::MAX - 10;
    store.create_pool(&pool_spec("big", top, 4)).await.unwrap();
    assert!(store.swap_member("big", top, top + 4).await.unwrap());
    store.drop_pool("big").await.unwrap();
    let e = store
        .create_pool(&pool_spec("big", 1, 4))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(store.read_pool("big").await.unwrap(), None);
}

/// `pool_totals_with_prefix`: how many pools start with the prefix and
/// their members together; none that sorts next to them; a dropped pool is
/// no longer counted.
pub async fn pool_totals_count_the_pools_under_a_prefix(store: Arc<dyn Store>) {
    let totals = |prefix: &'static str| {
        let store = store.clone();
        async move { store.pool_totals_with_prefix(prefix).await.unwrap() }
    };
    let t = |pools, members| PoolTotals { pools, members };
    assert_eq!(totals("").await, t(0, 0));
    for (name, size) in [("t/a", 3), ("t/é", 4), ("t0", 5), ("s", 6)] {
        store.create_pool(&pool_spec(name, 1, size)).await.unwrap();
    }
    assert_eq!(totals("t/").await, t(2, 7));
    assert_eq!(totals("t/é").await, t(1, 4), "a prefix ending in two bytes");
    assert_eq!(totals("t").await, t(3, 12));
    assert_eq!(totals("").await, t(4, 18), "every pool");
    assert_eq!(totals("x").await, t(0, 0));
    store.drop_pool("t/a").await.unwrap();
    assert_eq!(totals("t/").await, t(1, 4), "a dropped pool is not counted");
}

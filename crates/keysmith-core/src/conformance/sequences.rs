//! The sequence half of the store contract ([`SequenceStore`](crate::store::SequenceStore)):
//! rows, versions, conditional puts and reservations, alone and racing.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::spec;
use crate::Error;
use crate::store::{MAX_VALUE, Put, Reservation, SequenceSpec, Store};

/// A created sequence reads back as created (next = start, version 1); creating
/// it again is `AlreadyExists` and changes nothing.
pub async fn create_then_read(store: Arc<dyn Store>) {
    let row = store
        .create_sequence(&spec("orders", 5, 1000))
        .await
        .unwrap();
    assert_eq!(
        (row.name.as_str(), row.next, row.start, row.max, row.block),
        ("orders", 5, 5, 1000, 10)
    );
    assert_eq!(
        store.read_sequence("orders").await.unwrap(),
        Some(row.clone())
    );
    let again = store
        .create_sequence(&spec("orders", 1, 10))
        .await
        .unwrap_err();
    assert!(matches!(again, Error::AlreadyExists { .. }), "{again}");
    assert_eq!(
        store.read_sequence("orders").await.unwrap(),
        Some(row),
        "failed create changed the row"
    );
    assert_eq!(store.read_sequence("nope").await.unwrap(), None);
}

/// A conditional put with the current version writes `next` and bumps the
/// version.
pub async fn put_if_version_applies_on_match(store: Arc<dyn Store>) {
    let row = store.create_sequence(&spec("s", 1, 100)).await.unwrap();
    let Put::Done(done) = store.put_if_version("s", 11, row.version).await.unwrap() else {
        panic!("put with the current version must apply");
    };
    assert_eq!(done.next, 11);
    assert!(done.version != row.version);
    assert_eq!(store.read_sequence("s").await.unwrap(), Some(done));
}

/// A conditional put with a stale version changes nothing and returns the row
/// the store holds.
pub async fn put_if_version_conflict_returns_current_row(store: Arc<dyn Store>) {
    let row = store.create_sequence(&spec("s", 1, 100)).await.unwrap();
    let Put::Done(current) = store.put_if_version("s", 21, row.version).await.unwrap() else {
        panic!("first put must apply");
    };
    match store.put_if_version("s", 31, row.version).await.unwrap() {
        Put::Conflict(seen) => assert_eq!(seen, current, "conflict must return the stored row"),
        Put::Done(r) => panic!("stale version applied: {r:?}"),
    }
    assert_eq!(
        store.read_sequence("s").await.unwrap(),
        Some(current),
        "a conflict changed the row"
    );
}

/// `sequence_names_near`: the `limit / 2` names just before the name and
/// the rest from it on, ascending, whether or not the name exists; a
/// dropped name is gone from them. (Names of one case and length, so that
/// every backend's order is the same.)
pub async fn names_near_are_the_neighbours_in_name_order(store: Arc<dyn Store>) {
    assert!(store.sequence_names_near("m", 4).await.unwrap().is_empty());
    for c in 'a'..='j' {
        let name = format!("n{c}");
        store.create_sequence(&spec(&name, 1, 100)).await.unwrap();
    }
    let near = |name: &'static str, limit: usize| {
        let store = store.clone();
        async move { store.sequence_names_near(name, limit).await.unwrap() }
    };
    assert_eq!(near("nd", 4).await, ["nb", "nc", "nd", "ne"]);
    assert_eq!(
        near("nda", 4).await,
        ["nc", "nd", "ne", "nf"],
        "a missing name"
    );
    assert_eq!(near("na", 3).await, ["na", "nb"], "nothing sorts before it");
    assert_eq!(near("nz", 4).await, ["ni", "nj"], "nothing sorts after it");
    assert_eq!(near("nd", 100).await.len(), 10, "fewer than the limit");
    assert!(near("nd", 0).await.is_empty());
    store.drop_sequence("ne").await.unwrap();
    assert_eq!(near("nd", 4).await, ["nb", "nc", "nd", "nf"]);
}

/// `count_sequences_with_prefix`: the names that start with the prefix,
/// none that sorts next to them (`t0` is just past `t/` in byte order), a
/// prefix ending in a character of several bytes, the empty prefix for
/// all; a dropped name is no longer counted.
pub async fn names_with_a_prefix_are_counted(store: Arc<dyn Store>) {
    assert_eq!(store.count_sequences_with_prefix("").await.unwrap(), 0);
    for name in ["t/", "t/a", "t/b", "t/é", "t/éz", "t0", "t.", "s", "tx"] {
        store.create_sequence(&spec(name, 1, 100)).await.unwrap();
    }
    let count = |prefix: &'static str| {
        let store = store.clone();
        async move { store.count_sequences_with_prefix(prefix).await.unwrap() }
    };
    assert_eq!(count("t/").await, 5);
    assert_eq!(count("t/é").await, 2, "a prefix ending in two bytes");
    assert_eq!(count("t").await, 8);
    assert_eq!(count("").await, 9, "every sequence");
    assert_eq!(count("u").await, 0);
    assert_eq!(count("t/\u{10FFFF}").await, 0, "a prefix with no end");
    assert_eq!(count("t/a").await, 1, "a whole name");
    store.drop_sequence("t/b").await.unwrap();
    assert_eq!(count("t/").await, 4, "a dropped name is not counted");
}

/// Every sequence operation on a missing name is `NotFound` (or `None` for a
/// read).
pub async fn missing_sequence_is_not_found(store: Arc<dyn Store>) {
    let e = store.put_if_version("ghost", 5, 1).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    let e = store.reserve_locked("ghost", 5).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    let e = store.reserve_atomic("ghost", 5).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert_eq!(
        store.read_sequence("ghost").await.unwrap(),
        None,
        "a failed call created the sequence"
    );
}

/// Locked and atomic reservations hand out consecutive ranges and move `next`
/// past them.
pub async fn reserve_locked_and_atomic_hand_out_contiguous_ranges(store: Arc<dyn Store>) {
    let row = store
        .create_sequence(&spec("s", 100, 10_000))
        .await
        .unwrap();
    let a = store.reserve_locked("s", 10).await.unwrap();
    assert_eq!((a.start, a.end), (100, 110));
    let b = store.reserve_atomic("s", 5).await.unwrap();
    assert_eq!((b.start, b.end), (110, 115));
    let after = store.read_sequence("s").await.unwrap().unwrap();
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

/// The one-step reservation ([`AtomicReserve`](crate::store::AtomicReserve)),
/// where a store offers it, keeps the contract of every reservation: a
/// missing name is `NotFound` and creates nothing, its ranges follow the
/// locked ones without a gap or an overlap and report the version they
/// left, and near the maximum it is shortened, then `Exhausted`. A store
/// without it passes trivially (its `reserve_atomic` is `reserve_locked`,
/// checked by the other checks).
pub async fn the_one_step_reservation_keeps_the_contract(store: Arc<dyn Store>) {
    let Some(one_step) = store.atomic_reserve() else {
        return;
    };
    let e = one_step.reserve_one_step("ghost", 5).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert_eq!(store.read_sequence("ghost").await.unwrap(), None);
    store.create_sequence(&spec("s", 1, 25)).await.unwrap();
    let a = one_step.reserve_one_step("s", 10).await.unwrap();
    let b = store.reserve_locked("s", 10).await.unwrap();
    let c = one_step.reserve_one_step("s", 10).await.unwrap();
    assert_eq!(
        [(a.start, a.end), (b.start, b.end), (c.start, c.end)],
        [(1, 11), (11, 21), (21, 26)],
        "one-step and locked ranges must follow each other, clamped at max"
    );
    let row = store.read_sequence("s").await.unwrap().unwrap();
    assert_eq!((row.next, row.version), (26, c.version));
    let e = one_step.reserve_one_step("s", 1).await.unwrap_err();
    assert!(matches!(e, Error::Exhausted { max: 25, .. }), "{e}");
}

/// Whether `store` offers the one-step reservation
/// ([`SequenceStore::atomic_reserve`](crate::store::SequenceStore::atomic_reserve))
/// is what its backend says (`expected`): a store must not fake one, nor
/// hide a real one. Not in [`conformance_tests!`](crate::conformance_tests)
/// (the answer differs by backend): each backend's tests call it.
pub async fn offers_the_one_step_reservation(store: Arc<dyn Store>, expected: bool) {
    assert_eq!(
        store.atomic_reserve().is_some(),
        expected,
        "atomic_reserve() must be Some exactly for a store with a one-step reservation"
    );
}

/// A reservation near the maximum is shortened to what is left; the next one is
/// `Exhausted`, for every way of reserving.
pub async fn reservations_clamp_at_max_then_exhaust(store: Arc<dyn Store>) {
    store.create_sequence(&spec("s", 1, 25)).await.unwrap();
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
        store.read_sequence("s").await.unwrap().unwrap().next,
        26,
        "exhausted calls changed next"
    );
}

/// Reservations of up to `MAX_RESERVATION` values next to `MAX_VALUE` neither
/// overflow nor wrap.
pub async fn values_near_i64_max_do_not_overflow(store: Arc<dyn Store>) {
    store
        .create_sequence(&spec("big", MAX_VALUE - 5, MAX_VALUE))
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
    let row = store.read_sequence("big").await.unwrap().unwrap();
    assert_eq!(row.next, MAX_VALUE + 1);
}

/// `list_sequences` is ordered by name; a dropped sequence is gone, and
/// dropping it again is `NotFound`.
pub async fn list_and_drop(store: Arc<dyn Store>) {
    for n in ["b", "a", "c"] {
        store.create_sequence(&spec(n, 1, 10)).await.unwrap();
    }
    let names: Vec<_> = store
        .list_sequences()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    store.drop_sequence("b").await.unwrap();
    assert_eq!(store.read_sequence("b").await.unwrap(), None);
    let e = store.drop_sequence("b").await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert_eq!(store.list_sequences().await.unwrap().len(), 2);
    // A dropped name can be created again; it reserved nothing, so from
    // its own start.
    let again = store.create_sequence(&spec("b", 7, 10)).await.unwrap();
    assert_eq!(again.next, 7);
}

/// Names with dots, dashes, slashes, percent signs and Unicode are stored and
/// listed exactly as given, and never mix.
pub async fn names_are_stored_verbatim(store: Arc<dyn Store>) {
    let names = [
        "example.com/a#main",
        "ünïcödé-名前",
        "a'b\"c;--",
        "x%2Fy?z=1&w",
    ];
    for n in names {
        store.create_sequence(&spec(n, 1, 10)).await.unwrap();
        let r = store.reserve_atomic(n, 2).await.unwrap();
        assert_eq!((r.start, r.end), (1, 3), "{n}");
    }
    let listed: BTreeSet<_> = store
        .list_sequences()
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
    store
        .create_sequence(&spec("hot", 0, MAX_VALUE))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            let mut conflicts = 0u32;
            let mut row = store.read_sequence("hot").await.unwrap().unwrap();
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
        store.read_sequence("hot").await.unwrap().unwrap().next,
        (TASKS * EACH * 3) as i64
    );
}

/// Tasks reserving at once with locked and atomic reservations get disjoint
/// ranges that cover everything reserved.
pub async fn concurrent_locked_and_atomic_callers_never_overlap(store: Arc<dyn Store>) {
    const TASKS: usize = 8;
    const EACH: usize = 25;
    store
        .create_sequence(&spec("hot", 0, MAX_VALUE))
        .await
        .unwrap();
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

/// `ping` succeeds on a store that is up.
pub async fn ping_answers(store: Arc<dyn Store>) {
    store.ping().await.unwrap();
}

/// A conditional alteration with the current version sets `next`, `max` and
/// `block` together and bumps the version; with a stale one it changes
/// nothing and returns the row the store holds.
pub async fn alter_if_version_applies_on_match_only(store: Arc<dyn Store>) {
    use crate::store::Alteration;
    let row = store.create_sequence(&spec("alt", 1, 1000)).await.unwrap();
    let change = Alteration {
        next: 50,
        max: 900,
        block: 3,
        failover_skip: 77,
        failover_skip_set: true,
    };
    let done = match store
        .alter_if_version("alt", &change, row.version)
        .await
        .unwrap()
    {
        Put::Done(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (done.next, done.max, done.block, done.start, done.version),
        (50, 900, 3, 1, row.version + 1)
    );
    assert_eq!((done.failover_skip, done.failover_skip_set), (77, true));
    assert_eq!(
        store.read_sequence("alt").await.unwrap(),
        Some(done.clone())
    );
    let stale = Alteration {
        next: 60,
        max: 800,
        block: 4,
        ..Alteration::keep(&row)
    };
    match store
        .alter_if_version("alt", &stale, row.version)
        .await
        .unwrap()
    {
        Put::Conflict(current) => assert_eq!(current, done),
        other => panic!("{other:?}"),
    }
    // A reservation sees the new bounds.
    let r = store.reserve_atomic("alt", 1000).await.unwrap();
    assert_eq!((r.start, r.end), (50, 901));
    assert!(matches!(
        store.alter_if_version("nope", &change, 1).await,
        Err(Error::NotFound { .. })
    ));
    // An alteration no sequence may have is refused above the backend, at
    // the current version too, and writes nothing.
    let current = store.read_sequence("alt").await.unwrap().unwrap();
    for (bad, field) in [
        (Alteration { block: 0, ..change }, "block"),
        (
            Alteration {
                failover_skip: -1,
                ..change
            },
            "failover skip",
        ),
        (Alteration { next: -1, ..change }, "next"),
    ] {
        let e = store
            .alter_if_version("alt", &bad, current.version)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains(field)),
            "{field}: {e}"
        );
    }
    assert_eq!(store.read_sequence("alt").await.unwrap(), Some(current));
}

/// Counts add up across records, rate marks move once per
/// [`MARK_INTERVAL_MS`](crate::store::MARK_INTERVAL_MS), and the counts go
/// with the sequence: dropped and created again, it starts from zero.
pub async fn counts_are_recorded_and_go_with_the_sequence(store: Arc<dyn Store>) {
    use crate::store::{CountsDelta, MARK_INTERVAL_MS, RateMark, SequenceCounts};
    store.create_sequence(&spec("c", 1, 1000)).await.unwrap();
    let (_, zero) = store.read_counts("c").await.unwrap();
    assert_eq!(zero, SequenceCounts::default());
    store.reserve_atomic("c", 100).await.unwrap();
    let d = CountsDelta {
        handed_back: 3,
        handed_out: 50,
        abandoned: 7,
        skipped: 2,
        incarnation: 0,
    };
    store.record_counts("c", &d, 1_000).await.unwrap();
    store.record_counts("c", &d, 2_000).await.unwrap();
    let (row, c) = store.read_counts("c").await.unwrap();
    assert_eq!(
        (c.handed_back, c.handed_out, c.abandoned, c.skipped),
        (6, 100, 14, 4)
    );
    assert_eq!(c.reserved(&row), 100 + 6 - 4);
    assert_eq!(
        c.mark,
        Some(RateMark {
            at_ms: 1_000,
            reserved: 100 + 3 - 2
        })
    );
    store.reserve_atomic("c", 50).await.unwrap();
    store
        .record_counts("c", &CountsDelta::default(), 1_000 + MARK_INTERVAL_MS)
        .await
        .unwrap();
    let (_, c) = store.read_counts("c").await.unwrap();
    assert_eq!(c.prev_mark.map(|m| m.at_ms), Some(1_000));
    assert_eq!(
        c.mark,
        Some(RateMark {
            at_ms: 1_000 + MARK_INTERVAL_MS,
            reserved: 150 + 6 - 4
        })
    );
    store.drop_sequence("c").await.unwrap();
    assert!(matches!(
        store.read_counts("c").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.record_counts("c", &d, 0).await,
        Err(Error::NotFound { .. })
    ));
    store.create_sequence(&spec("c", 1, 1000)).await.unwrap();
    assert_eq!(
        store.read_counts("c").await.unwrap().1,
        SequenceCounts::default()
    );
}

/// A new row records the store's generation and its failover margin (the
/// automatic one unless given); every write records the generation again;
/// `raise_failover_skip` raises only an automatic margin, only upwards,
/// and leaves the version alone.
pub async fn rows_record_generation_and_failover_margin(store: Arc<dyn Store>) {
    use crate::store::auto_failover_skip;
    let generation = store.generation().await.unwrap();
    assert!(!generation.is_empty());
    assert_eq!(store.generation().await.unwrap(), generation, "stable");
    let auto = store
        .create_sequence(&spec("gen-auto", 1, 1_000_000_000))
        .await
        .unwrap();
    assert_eq!(auto.generation.as_deref(), Some(generation.as_str()));
    assert_eq!(
        (
            auto.failover_skip,
            auto.failover_skip_set,
            auto.failover_skipped
        ),
        (auto_failover_skip(10, None), false, 0)
    );
    let set = store
        .create_sequence(&SequenceSpec {
            failover_skip: Some(5),
            ..spec("gen-set", 1, 100)
        })
        .await
        .unwrap();
    assert_eq!((set.failover_skip, set.failover_skip_set), (5, true));

    let r = store.reserve_atomic("gen-auto", 3).await.unwrap();
    assert_eq!(
        (r.start, r.end, r.fenced),
        (1, 4, 0),
        "same generation: no skip"
    );
    let r = store.reserve_locked("gen-auto", 3).await.unwrap();
    assert_eq!((r.start, r.fenced), (4, 0));
    let row = store.read_sequence("gen-auto").await.unwrap().unwrap();
    assert_eq!(row.generation.as_deref(), Some(generation.as_str()));
    assert_eq!(row.failover_skipped, 0);

    let v = row.version;
    store
        .raise_failover_skip("gen-auto", auto.failover_skip + 10)
        .await
        .unwrap();
    store.raise_failover_skip("gen-auto", 1).await.unwrap();
    let row = store.read_sequence("gen-auto").await.unwrap().unwrap();
    assert_eq!(
        row.failover_skip,
        auto.failover_skip + 10,
        "raised, never lowered"
    );
    assert_eq!(row.version, v, "allocation is not disturbed");
    store.raise_failover_skip("gen-set", 1_000).await.unwrap();
    let row = store.read_sequence("gen-set").await.unwrap().unwrap();
    assert_eq!(row.failover_skip, 5, "a margin set by hand stays");
}

/// Creating a dropped name continues above the values it handed out: every
/// way of moving `next` (atomic and locked reservations, a conditional put)
/// is covered by the tombstone the drop leaves; a second drop keeps the
/// higher mark; `start_below_dropped` starts where asked; a maximum with no
/// room above the mark is a clear error that creates nothing.
pub async fn a_dropped_name_continues_above_what_it_handed_out(store: Arc<dyn Store>) {
    let mut handed = Vec::new();
    store.create_sequence(&spec("t", 1, 1000)).await.unwrap();
    let a = store.reserve_atomic("t", 10).await.unwrap();
    let l = store.reserve_locked("t", 5).await.unwrap();
    handed.extend((a.start..a.end).chain(l.start..l.end));
    let row = store.read_sequence("t").await.unwrap().unwrap();
    let Put::Done(row) = store.put_if_version("t", 30, row.version).await.unwrap() else {
        panic!("a put on the current version conflicted");
    };
    handed.extend(16..30);
    assert_eq!(row.next, 30);
    store.drop_sequence("t").await.unwrap();
    let again = store.create_sequence(&spec("t", 1, 1000)).await.unwrap();
    assert_eq!((again.start, again.next), (30, 30), "{again:?}");
    let r = store.reserve_atomic("t", 5).await.unwrap();
    assert!(
        handed.iter().all(|v| *v < r.start),
        "{r:?} repeats a value handed out before the drop"
    );
    // Dropped again with a lower next (created below on purpose): the
    // mark stays at the higher of the two drops.
    store.drop_sequence("t").await.unwrap();
    let below = SequenceSpec {
        start_below_dropped: true,
        ..spec("t", 1, 1000)
    };
    let low = store.create_sequence(&below).await.unwrap();
    assert_eq!(
        (low.start, low.next),
        (1, 1),
        "start_below_dropped starts where asked"
    );
    store.reserve_atomic("t", 3).await.unwrap();
    store.drop_sequence("t").await.unwrap();
    let again = store.create_sequence(&spec("t", 1, 1000)).await.unwrap();
    assert_eq!(again.start, 35, "the mark of the first drop (35) is kept");
    // A start above the mark is kept as asked.
    store.drop_sequence("t").await.unwrap();
    let high = store.create_sequence(&spec("t", 500, 1000)).await.unwrap();
    assert_eq!(high.start, 500);
    store.drop_sequence("t").await.unwrap();
    // No room above the mark: refused, nothing written.
    let e = store.create_sequence(&spec("t", 1, 20)).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("start_below_dropped"), "{e}");
    assert_eq!(store.read_sequence("t").await.unwrap(), None);
    // Another name is not affected.
    let other = store.create_sequence(&spec("u", 1, 20)).await.unwrap();
    assert_eq!(other.start, 1);
}

/// Numbered, residue-class and bit-reversed sequences leave tombstones in
/// their own units and continue above them: period numbers above every
/// number of every period, a class above its values, a bit-reversed one
/// from its next counter, and a plain one above all of those values.
pub async fn numbered_and_mapped_sequences_continue_above_a_drop(store: Arc<dyn Store>) {
    use crate::store::{Numbering, Residue, reversed_bound};
    // Numbers with a format, two periods.
    let formatted = Numbering {
        template: Some("INV-{n}".into()),
        ..Numbering::default()
    };
    store
        .create_numbered(&spec("n", 1, 1000), &formatted)
        .await
        .unwrap();
    let r = store.reserve_numbers("n", 0, 7).await.unwrap();
    assert_eq!((r.start, r.end), (1, 8));
    store.drop_sequence("n").await.unwrap();
    let again = store
        .create_numbered(&spec("n", 1, 1000), &formatted)
        .await
        .unwrap();
    assert_eq!(again.start, 8);
    assert_eq!(store.reserve_numbers("n", 0, 1).await.unwrap().start, 8);
    store.drop_sequence("n").await.unwrap();
    // A residue class (values 3 mod 10; the store keeps slots).
    let class = Residue {
        increment: 10,
        offset: 3,
    };
    let in_class = Numbering {
        residue: Some(class),
        ..Numbering::default()
    };
    store
        .create_numbered(&spec("c", 0, 1000), &in_class)
        .await
        .unwrap();
    let r = store.reserve_atomic("c", 5).await.unwrap(); // slots 0..5: values up to 43
    assert_eq!((r.start, r.end), (0, 5));
    store.drop_sequence("c").await.unwrap();
    let plain = store.create_sequence(&spec("c", 1, 1000)).await.unwrap();
    assert_eq!(
        plain.start, 53,
        "above value 43 (slot 4), at the class's next value"
    );
    store.drop_sequence("c").await.unwrap();
    let class_again = store
        .create_numbered(&spec("c", 0, 1000), &in_class)
        .await
        .unwrap();
    // The plain one reserved nothing: the mark is still 53, slot 5.
    assert_eq!(class_again.start, 5);
    // Bit-reversed: the counter continues.
    let reversed = Numbering {
        bit_reversed: Some(Default::default()),
        ..Numbering::default()
    };
    store
        .create_numbered(&spec("b", 1, MAX_VALUE), &reversed)
        .await
        .unwrap();
    let r = store.reserve_numbers("b", 0, 8).await.unwrap();
    assert_eq!((r.start, r.end), (1, 9));
    store.drop_sequence("b").await.unwrap();
    let b = store
        .create_numbered(&spec("b", 1, MAX_VALUE), &reversed)
        .await
        .unwrap();
    assert_eq!(b.start, 9, "a bit-reversed sequence continues its counter");
    store.drop_sequence("b").await.unwrap();
    let plain = store
        .create_sequence(&spec("b", 1, MAX_VALUE))
        .await
        .unwrap();
    assert_eq!(
        plain.start,
        reversed_bound(9),
        "above every reversal of counters 1..9"
    );
}

/// Tasks that create, reserve from and drop one name at once, over and over:
/// no two reservations overlap, whichever incarnation of the sequence they
/// came from (a create and a drop of one name never miss each other's
/// tombstone).
pub async fn racing_drops_and_creates_never_repeat_a_value(store: Arc<dyn Store>) {
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..15 {
                    match store.create_sequence(&spec("race", 1, MAX_VALUE)).await {
                        Ok(_) | Err(Error::AlreadyExists { .. }) => {}
                        Err(e) => panic!("create: {e}"),
                    }
                    for _ in 0..2 {
                        match store.reserve_atomic("race", 3).await {
                            Ok(r) => got.push(r),
                            Err(Error::NotFound { .. } | Error::Contention { .. }) => {}
                            Err(e) => panic!("reserve: {e}"),
                        }
                    }
                    match store.drop_sequence("race").await {
                        Ok(()) | Err(Error::NotFound { .. } | Error::Contention { .. }) => {}
                        Err(e) => panic!("drop: {e}"),
                    }
                }
                got
            })
        })
        .collect();
    let mut all = BTreeSet::new();
    let mut ranges = 0;
    for t in tasks {
        for r in t.await.unwrap() {
            ranges += 1;
            for v in r.start..r.end {
                assert!(all.insert(v), "{v} was reserved twice");
            }
        }
    }
    assert!(ranges > 0, "nothing was reserved");
}

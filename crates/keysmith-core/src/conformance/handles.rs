//! What [`Sequence`] and [`ValuePool`] handles must do on top of any store:
//! no value twice across threads and handles, strict order, close hand-back
//! (with and without a prefetched block), exhaustion, contention, and calls
//! that fail without losing a value.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{pool_spec, spec};
use crate::Error;
use crate::pool::{self, ValuePool};
use crate::sequence::{self, Sequence, Strategy};
use crate::store::{Alteration, MAX_VALUE, Put, SequenceSpec, Store};

const STRATEGIES: [Strategy; 3] = [Strategy::Atomic, Strategy::Optimistic, Strategy::Locked];

async fn create(store: &Arc<dyn Store>, name: &str, start: i64, max: i64, block: i64) {
    sequence::create(
        &**store,
        &SequenceSpec {
            block,
            ..spec(name, start, max)
        },
    )
    .await
    .unwrap();
}

fn assert_increasing(values: &[i64], what: &str) {
    for w in values.windows(2) {
        assert!(w[0] < w[1], "{what}: {} then {}", w[0], w[1]);
    }
}

/// Whether `rate` is `values` over the time from a mark 90 s before `since`
/// to some moment between `since` and now: the bounds follow the clock, so
/// a slow machine cannot fail the check.
fn rate_between(values: i64, since: i64, rate: &f64) -> bool {
    let longest = crate::clock::now_ms() - since + 90_000;
    let slowest = values as f64 * 1000.0 / longest as f64;
    let fastest = values as f64 * 1000.0 / 90_000.0;
    (slowest..=fastest * (1.0 + 1e-9)).contains(rate)
}

/// Waits until `name`'s next free value is `next` (a background prefetch
/// landed), failing after 10 s.
async fn await_next(store: &Arc<dyn Store>, name: &str, next: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = store.read_sequence(name).await.unwrap().unwrap();
        if row.next == next {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "prefetch never happened: next is {}",
            row.next
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// 4 handles of each strategy with 4 tasks each, mixing `next` and
/// `next_n`: every value unique, each task's values increasing.
pub async fn threads_and_handles_never_share_a_value(store: Arc<dyn Store>) {
    for strategy in STRATEGIES {
        let name = format!("s-{strategy}");
        create(&store, &name, 1, MAX_VALUE, 7).await;
        let mut tasks = Vec::new();
        for h in 0..4 {
            let seq = Sequence::builder()
                .store(store.clone())
                .name(&name)
                .strategy(strategy)
                .block(5 + h)
                .build()
                .await
                .unwrap();
            for t in 0..4 {
                let seq = seq.clone();
                tasks.push(tokio::spawn(async move {
                    let mut got = Vec::new();
                    for i in 0..60 {
                        if (i + t) % 10 == 0 {
                            got.extend(seq.next_n(3).await.unwrap());
                        } else {
                            got.push(seq.next().await.unwrap());
                        }
                    }
                    got
                }));
            }
        }
        let mut all = HashSet::new();
        let mut count = 0;
        for t in tasks {
            let got = t.await.unwrap();
            assert_increasing(&got, "one task");
            count += got.len();
            all.extend(got);
        }
        assert_eq!(all.len(), count, "{strategy}: a value was handed out twice");
    }
}

/// Strict mode (block 1): values of all handles, whatever their strategy,
/// increase in the order they are taken, without gaps.
pub async fn strict_handles_increase_in_time_order(store: Arc<dyn Store>) {
    create(&store, "strict", 1, MAX_VALUE, 100).await;
    let mut handles = Vec::new();
    for strategy in STRATEGIES {
        let b = Sequence::builder()
            .store(store.clone())
            .name("strict")
            .block(1);
        handles.push(b.strategy(strategy).build().await.unwrap());
    }
    let mut seen = Vec::new();
    for i in 0..30 {
        seen.push(handles[i % 3].next().await.unwrap());
    }
    assert_eq!(
        seen,
        (1..=30).collect::<Vec<_>>(),
        "strict values are gap-free and in time order"
    );
}

/// Many tasks over three strict handles (one per strategy): callers of one
/// handle who wait at once share a reservation (`sequence/strict.rs`), and
/// every pair of calls where one returned before the other was sent is in
/// order (a logical clock ticks at every send and every answer); the values
/// are gap-free and none comes twice.
pub async fn strict_callers_sharing_reservations_keep_time_order(store: Arc<dyn Store>) {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

    use crate::verify::{TimedCall, check_time_order};

    create(&store, "strict-many", 1, MAX_VALUE, 1).await;
    let mut handles = Vec::new();
    for strategy in STRATEGIES {
        let b = Sequence::builder()
            .store(store.clone())
            .name("strict-many")
            .strategy(strategy);
        handles.push(b.build().await.unwrap());
    }
    let clock = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..12 {
        let (seq, clock) = (handles[t % 3].clone(), clock.clone());
        tasks.push(tokio::spawn(async move {
            let mut calls = Vec::new();
            for i in 0..20 {
                let n = if (t + i) % 5 == 0 { 3 } else { 1 };
                let invoked = clock.fetch_add(1, SeqCst);
                let v = if n == 1 {
                    vec![seq.next().await.unwrap()]
                } else {
                    seq.next_n(n).await.unwrap()
                };
                let completed = clock.fetch_add(1, SeqCst);
                calls.push(TimedCall {
                    invoked,
                    completed,
                    first: v[0],
                    last: v[v.len() - 1],
                });
            }
            calls
        }));
    }
    let mut calls = Vec::new();
    for t in tasks {
        calls.extend(t.await.unwrap());
    }
    if let Err(v) = check_time_order(&calls) {
        panic!(
            "out of time order: {:?} then {:?}",
            calls[v.earlier], calls[v.later]
        );
    }
    let mut all: Vec<i64> = calls.iter().flat_map(|c| c.first..=c.last).collect();
    all.sort_unstable();
    let n = all.len() as i64;
    assert_eq!(all, (1..=n).collect::<Vec<_>>(), "gap-free, none twice");
    let reservations: u64 = handles.iter().map(|h| h.stats().reservations).sum();
    eprintln!(
        "{n} values in {} calls, {reservations} reservations",
        calls.len()
    );
}

/// `close()` hands the tail back when nobody reserved since, else leaves a
/// gap; a closed handle refuses to hand out more.
pub async fn close_hands_back_the_tail_only_when_untouched(store: Arc<dyn Store>) {
    create(&store, "c", 1, MAX_VALUE, 10).await;
    let open = || {
        Sequence::builder()
            .store(store.clone())
            .name("c")
            .prefetch(0.0)
            .build()
    };

    let a = open().await.unwrap();
    assert_eq!(a.next_n(3).await.unwrap(), vec![1, 2, 3]);
    assert_eq!(a.close().await.unwrap(), Some(4..11));
    assert!(matches!(a.next().await, Err(Error::Closed { .. })));
    assert_eq!(store.read_sequence("c").await.unwrap().unwrap().next, 4);

    let b = open().await.unwrap();
    assert_eq!(
        b.next().await.unwrap(),
        4,
        "the handed-back tail is used next"
    );
    let c = open().await.unwrap();
    assert_eq!(c.next().await.unwrap(), 14, "c reserved after b");
    assert_eq!(
        b.close().await.unwrap(),
        None,
        "b's tail is a gap: c reserved since"
    );
    assert_eq!(c.next().await.unwrap(), 15);
    assert_eq!(c.close().await.unwrap(), Some(16..24));
    assert_eq!(store.read_sequence("c").await.unwrap().unwrap().next, 16);
}

/// With prefetch on (the default), the next block is reserved in the
/// background before the current one runs out, and `close()` hands back the
/// spare block and the current tail together.
pub async fn close_with_a_spare_block_hands_back_both(store: Arc<dyn Store>) {
    create(&store, "p", 1, MAX_VALUE, 10).await;
    let a = Sequence::builder()
        .store(store.clone())
        .name("p")
        .build()
        .await
        .unwrap();
    assert_eq!(a.next_n(9).await.unwrap(), (1..=9).collect::<Vec<_>>());
    // The prefetch started at value 9.
    await_next(&store, "p", 21).await;
    assert_eq!(a.next().await.unwrap(), 10, "the current block comes first");
    assert_eq!(a.close().await.unwrap(), Some(11..21));
    assert_eq!(store.read_sequence("p").await.unwrap().unwrap().next, 11);
}

/// Past the maximum every strategy fails with `Exhausted` naming the
/// sequence, and never wraps.
pub async fn exhaustion_is_an_error_never_a_wrap(store: Arc<dyn Store>) {
    for strategy in STRATEGIES {
        let name = format!("e-{strategy}");
        create(&store, &name, MAX_VALUE - 9, MAX_VALUE, 4).await;
        let seq = Sequence::builder()
            .store(store.clone())
            .name(&name)
            .strategy(strategy);
        let seq = seq.build().await.unwrap();
        let got = seq.next_n(10).await.unwrap();
        assert_eq!(got, (MAX_VALUE - 9..=MAX_VALUE).collect::<Vec<_>>());
        let e = seq.next().await.unwrap_err();
        assert!(matches!(e, Error::Exhausted { .. }), "{strategy}: {e}");
        assert!(
            e.to_string().contains(&format!("{name:?}")),
            "the error names the sequence: {e}"
        );
    }
}

/// Opening a handle on a missing sequence creates nothing and names the
/// closest existing one.
pub async fn missing_sequence_is_not_created_and_names_the_closest(store: Arc<dyn Store>) {
    create(&store, "orders", 1, 100, 10).await;
    let e = Sequence::builder()
        .store(store.clone())
        .name("order")
        .build()
        .await
        .unwrap_err();
    match &e {
        Error::NotFound { name, similar, .. } => {
            assert_eq!(name, "order");
            assert_eq!(similar, &["orders".to_string()]);
        }
        other => panic!("{other}"),
    }
    assert_eq!(store.list_sequences().await.unwrap().len(), 1);
}

/// Optimistic strict handles racing: lost races are retried from the
/// returned row, every handle gets its values, and strict mode leaves no gap.
pub async fn racing_optimistic_handles_retry_and_leave_no_gap(store: Arc<dyn Store>) {
    create(&store, "o", 1, MAX_VALUE, 1).await;
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let seq = Sequence::builder()
            .store(store.clone())
            .name("o")
            .strategy(Strategy::Optimistic)
            .build()
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..20 {
                got.push(seq.next().await.unwrap());
            }
            (got, seq.stats())
        }));
    }
    let mut all = HashSet::new();
    for t in tasks {
        let (got, stats) = t.await.unwrap();
        assert_eq!(stats.reservations, 20);
        all.extend(got);
    }
    assert_eq!(
        all,
        (1..=120).collect::<HashSet<_>>(),
        "strict mode leaves no gaps"
    );
}

/// After the last allowed attempt loses, the error says so and names the
/// sequence; the next call starts from the row the conflict returned.
pub async fn contention_is_reported_after_the_last_attempt(store: Arc<dyn Store>) {
    create(&store, "busy", 1, MAX_VALUE, 10).await;
    let b = || Sequence::builder().store(store.clone()).name("busy");
    let loser = b()
        .strategy(Strategy::Optimistic)
        .max_attempts(1)
        .build()
        .await
        .unwrap();
    let winner = b().build().await.unwrap();
    assert_eq!(winner.next().await.unwrap(), 1);
    // The loser's first put quotes the version it saw when it opened.
    match loser.next().await {
        Err(Error::Contention { name, attempts }) => {
            assert_eq!((name.as_str(), attempts), ("busy", 1))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(loser.stats().conflicts, 1);
    assert_eq!(loser.next().await.unwrap(), 11);
}

/// A cached handle near the maximum: a batch larger than what is left fails
/// with `Exhausted` and hands nothing out; the values it reserved stay with
/// the handle and are the next ones handed out, for every strategy.
pub async fn a_failed_next_n_near_the_maximum_loses_nothing(store: Arc<dyn Store>) {
    for strategy in [Strategy::Atomic, Strategy::Optimistic, Strategy::Locked] {
        let name = format!("near-max-{strategy}");
        store
            .create_sequence(&SequenceSpec {
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
            .create_sequence(&SequenceSpec {
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
            store.read_sequence(&name).await.unwrap().unwrap().next,
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
    crate::pool::create(&*store, &pool_spec("near-max", start, size))
        .await
        .unwrap();
    let before = store.list_members("near-max").await.unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("near-max")
        .build()
        .await
        .unwrap();
    let e = h.take_n(11).await.unwrap_err();
    assert!(matches!(e, Error::Exhausted { .. }), "{e}");
    assert_eq!(
        store.list_members("near-max").await.unwrap(),
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

/// Many tasks, each with its own pool handle or sharing one: every number
/// is taken once, and the pool's own count of takes agrees (no number lost,
/// none twice).
pub async fn pool_handles_take_unique_numbers_under_many_tasks(store: Arc<dyn Store>) {
    pool::create(&*store, &pool_spec("p", 1, 8)).await.unwrap();
    let shared = ValuePool::builder()
        .store(store.clone())
        .name("p")
        .build()
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let h = if i % 2 == 0 {
            ValuePool::builder()
                .store(store.clone())
                .name("p")
                .reuse_sample(i % 4 == 0)
                .build()
                .await
                .unwrap()
        } else {
            shared.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..15 {
                got.push(h.take().await.unwrap());
            }
            got
        }));
    }
    let mut taken = Vec::new();
    for t in tasks {
        taken.extend(t.await.unwrap());
    }
    let unique: BTreeSet<i64> = taken.iter().copied().collect();
    assert_eq!(unique.len(), taken.len(), "a number was handed out twice");
    let info = pool::describe(&*store, "p").await.unwrap();
    assert_eq!(
        info.taken,
        taken.len() as i64,
        "the pool counts other takes than were handed out"
    );
    assert_eq!(
        shared.stats().takes,
        4 * 15,
        "the shared handle counts its clones' takes"
    );
}

/// A pool whose replacements would pass `i64::MAX` hands out what it can,
/// then fails with `Exhausted`, leaving its members as they were.
pub async fn pool_numbers_near_i64_max_exhaust_instead_of_wrapping(store: Arc<dyn Store>) {
    let start = i64::MAX - 5;
    pool::create(&*store, &pool_spec("top", start, 3))
        .await
        .unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("top")
        .build()
        .await
        .unwrap();
    assert_eq!(h.max_value(), i64::MAX - 3);
    let got: BTreeSet<i64> = h.take_n(3).await.unwrap().into_iter().collect();
    assert_eq!(got, (start..start + 3).collect());
    let e = h.take().await.unwrap_err();
    assert!(
        matches!(e, Error::Exhausted { max, .. } if max == i64::MAX - 3),
        "{e}"
    );
    assert_eq!(
        store.list_members("top").await.unwrap(),
        vec![i64::MAX - 2, i64::MAX - 1, i64::MAX],
        "exhaustion changed the pool"
    );
}

/// A handle on a pool dropped under it fails with `NotFound`; other pools
/// are untouched.
pub async fn a_dropped_pool_is_not_found_by_open_handles(store: Arc<dyn Store>) {
    pool::create(&*store, &pool_spec("p", 1, 5)).await.unwrap();
    pool::create(&*store, &pool_spec("q", 1, 5)).await.unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("p")
        .build()
        .await
        .unwrap();
    h.take().await.unwrap();
    pool::remove(&*store, "p").await.unwrap();
    let e = h.take().await.unwrap_err();
    assert!(matches!(e, Error::NotFound { kind: "pool", .. }), "{e}");
    let names: Vec<String> = pool::list(&*store)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["q"]);
}

/// Takes spread evenly over the members: 2000 takes from 20 members take
/// each residue about 100 times (standard deviation about 10). A store whose
/// samples favour some members lets their residues race ahead, and the span
/// between lowest and highest member grows with the takes.
pub async fn pool_takes_spread_evenly(store: Arc<dyn Store>) {
    pool::create(&*store, &pool_spec("even", 0, 20))
        .await
        .unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("even")
        .build()
        .await
        .unwrap();
    h.take_n(2000).await.unwrap();
    let info = pool::describe(&*store, "even").await.unwrap();
    assert_eq!(info.taken, 2000);
    // Uniform: span = 20 * (most - fewest takes of a residue), about 700;
    // 2400 needs a residue 6 standard deviations off.
    let span = info.highest - info.lowest;
    assert!(
        span < 2400,
        "members span {span}: the store's samples favour some members"
    );
}

/// Moving `next` forward while handles of every strategy allocate: no value
/// twice, and the values skipped are never handed out; then `alter` refuses
/// what the row does not allow (next backwards, max below what was
/// reserved, no change at all) and changes nothing.
pub async fn alter_while_handles_allocate_hands_out_nothing_twice(store: Arc<dyn Store>) {
    use crate::sequence::AlterSpec;
    create(&store, "alt", 1, MAX_VALUE, 5).await;
    let mut tasks = Vec::new();
    for strategy in STRATEGIES {
        let seq = Sequence::builder()
            .store(store.clone())
            .name("alt")
            .strategy(strategy)
            .build()
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..100 {
                got.push(seq.next().await.unwrap());
            }
            seq.close().await.unwrap();
            got
        }));
    }
    // Each move skips exactly the values between the `next` of the row it
    // matched and the new `next`: none of them may ever be handed out.
    let mut skipped = Vec::new();
    while skipped.len() < 5 {
        let row = store.read_sequence("alt").await.unwrap().unwrap();
        let change = Alteration {
            next: row.next + 1000,
            ..Alteration::keep(&row)
        };
        if let Put::Done(_) = store
            .alter_if_version("alt", &change, row.version)
            .await
            .unwrap()
        {
            skipped.push(row.next..change.next);
        }
        tokio::task::yield_now().await;
    }
    let mut all = HashSet::new();
    for t in tasks {
        for v in t.await.unwrap() {
            assert!(all.insert(v), "{v} handed out twice");
        }
    }
    for range in &skipped {
        assert!(
            !all.iter().any(|v| range.contains(v)),
            "a skipped value of {range:?} was handed out"
        );
    }
    let row = store.read_sequence("alt").await.unwrap().unwrap();
    for bad in [
        AlterSpec {
            next: Some(row.next - 1),
            ..AlterSpec::default()
        },
        AlterSpec {
            max: Some(row.next - 2),
            ..AlterSpec::default()
        },
        AlterSpec {
            block: Some(0),
            ..AlterSpec::default()
        },
        AlterSpec::default(),
    ] {
        let e = sequence::alter(&*store, "alt", &bad).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
    }
    assert_eq!(
        store.read_sequence("alt").await.unwrap().unwrap(),
        row,
        "a refused alter changed the row"
    );
}

/// Handles that close cleanly account for every value they reserved
/// (handed out, handed back, or a known gap); a handle that never closes (a
/// process that died) leaves at most what it had reserved and not handed
/// out as unaccounted. The counts add up; `show` gives a runway once there
/// is a rate.
pub async fn clean_closes_account_for_every_value(store: Arc<dyn Store>) {
    use crate::store::CountsDelta;
    create(&store, "acc", 1, 1_000_000, 10).await;
    let mut taken = 0;
    for (i, strategy) in STRATEGIES.into_iter().enumerate() {
        let h = Sequence::builder()
            .store(store.clone())
            .name("acc")
            .strategy(strategy)
            .build()
            .await
            .unwrap();
        let n = 7 + 6 * i as i64;
        taken += h.next_n(n).await.unwrap().len() as i64;
        h.close().await.unwrap();
    }
    let u = sequence::show(&*store, "acc").await.unwrap().usage.unwrap();
    assert_eq!(u.handed_out, taken);
    assert_eq!(u.unaccounted, 0, "{u:?}");
    assert_eq!(u.reserved, u.handed_out + u.handed_back + u.abandoned);
    // A handle that dies: 5 values handed out, its block never reported.
    let dead = Sequence::builder()
        .store(store.clone())
        .name("acc")
        .prefetch(0.0)
        .build()
        .await
        .unwrap();
    dead.next_n(5).await.unwrap();
    drop(dead);
    let u = sequence::show(&*store, "acc").await.unwrap().usage.unwrap();
    assert!((5..=10).contains(&u.unaccounted), "{u:?}");
    assert_eq!(
        u.reserved,
        u.handed_out + u.handed_back + u.abandoned + u.unaccounted
    );
    // A rate from a mark a minute and a half old: 6000 values in 90 s.
    create(&store, "rate", 1, 1_000_000, 10).await;
    let u = sequence::show(&*store, "rate")
        .await
        .unwrap()
        .usage
        .unwrap();
    assert_eq!((u.rate_per_second, u.runway_seconds), (None, None));
    let now = crate::clock::now_ms();
    store
        .record_counts("rate", &CountsDelta::default(), now - 90_000)
        .await
        .unwrap();
    store.reserve_atomic("rate", 6000).await.unwrap();
    let u = sequence::show(&*store, "rate")
        .await
        .unwrap()
        .usage
        .unwrap();
    let rate = u.rate_per_second.expect("a rate");
    assert!(rate_between(6000, now, &rate), "{rate}");
    let runway = u.runway_seconds.expect("a runway");
    assert!(
        ((1_000_000 - 6000) as f64 / runway - rate).abs() < 1e-6,
        "{runway} {rate}"
    );
}

/// `pool::describe` measures a pool's rate since its older mark and moves
/// the marks; the runway is the numbers left at that rate, and pages that
/// read only the marks get the same rate.
pub async fn pool_describe_gives_a_rate_and_runway(store: Arc<dyn Store>) {
    pool::create(&*store, &pool_spec("r", 1, 10)).await.unwrap();
    let info = pool::describe(&*store, "r").await.unwrap();
    assert_eq!((info.rate_per_second, info.runway_seconds), (None, None));
    // A mark a minute and a half ago with nothing taken, then 30 takes.
    let now = crate::clock::now_ms();
    store.drop_pool("r").await.unwrap();
    pool::create(&*store, &pool_spec("r", 1, 10)).await.unwrap();
    store.record_pool_mark("r", now - 90_000, 0).await.unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("r")
        .build()
        .await
        .unwrap();
    h.take_n(30).await.unwrap();
    let info = pool::describe(&*store, "r").await.unwrap();
    let rate = info.rate_per_second.expect("a rate");
    assert!(rate_between(30, now, &rate), "{rate}");
    let runway = info.runway_seconds.expect("a runway");
    assert!((info.remaining() as f64 / runway - rate).abs() < 1e-9);
    let marks = store.read_pool_marks("r").await.unwrap();
    let from_marks = pool::runway_from_marks(&info.row, &marks).expect("a runway from the marks");
    assert!(
        (from_marks / runway - 1.0).abs() < 0.05,
        "{from_marks} {runway}"
    );
}

/// A residue class (values `2 mod 3`, between 10 and 100): handles, strict
/// handles, leases and their release, `alter`, `show` and `close` all deal
/// in values of the class, none is handed out twice, and the last value is
/// the largest of the class at or below the maximum.
pub async fn residue_class_values_stay_in_their_class(store: Arc<dyn Store>) {
    use crate::numbers::{self, Numbering};
    use crate::store::Residue;
    let class = Residue {
        increment: 3,
        offset: 2,
    };
    let in_class = |v: i64| v.rem_euclid(3) == 2;
    let numbering = Numbering {
        residue: Some(class),
        ..Numbering::default()
    };
    let info = numbers::create(
        &*store,
        &SequenceSpec {
            block: 4,
            ..spec("r", 10, 100)
        },
        &numbering,
    )
    .await
    .unwrap();
    // Rounded into the class: 11 is the first value at or above 10, 98 the
    // last at or below 100.
    assert_eq!((info.row.start, info.row.next, info.row.max), (11, 11, 98));
    assert_eq!(info.residue, Some(class));
    assert_eq!(info.remaining, 30);

    let mut seen = BTreeSet::new();
    let plain = Sequence::builder()
        .store(store.clone())
        .name("r")
        .build()
        .await
        .unwrap();
    assert_eq!(plain.residue(), Some(class));
    let strict = Sequence::builder()
        .store(store.clone())
        .name("r")
        .block(1)
        .build()
        .await
        .unwrap();
    let mut from_plain = vec![plain.next().await.unwrap()];
    from_plain.extend(plain.next_n(5).await.unwrap());
    let from_strict = strict.next_n(2).await.unwrap();
    assert_increasing(&from_plain, "a residue handle");
    assert_increasing(&from_strict, "a strict residue handle");
    let lease = sequence::lease::lease(
        store.clone(),
        "r",
        3,
        Strategy::Atomic,
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!(lease.step, 3);
    assert_eq!(lease.len(), 3);
    let leased: Vec<i64> = (lease.start..lease.end).step_by(3).collect();
    assert_eq!(leased.len(), 3, "{lease:?}");
    for v in from_plain.iter().chain(&from_strict).chain(&leased) {
        assert!(in_class(*v), "{v} is not 2 mod 3");
        assert!(seen.insert(*v), "{v} handed out twice");
    }
    // A release from a value outside the class is refused; from the second
    // value of the lease, the tail goes back (no one reserved since).
    let e = sequence::lease::release(&*store, &lease, leased[1] + 1)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let back = sequence::lease::release(&*store, &lease, leased[1])
        .await
        .unwrap();
    assert_eq!(back, Some(leased[1]..lease.end));
    for v in &leased[1..] {
        seen.remove(v);
    }
    // Those two values come again, to the next caller.
    let again = sequence::lease::lease(
        store.clone(),
        "r",
        2,
        Strategy::Locked,
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!(again.start, leased[1]);
    for v in (again.start..again.end).step_by(3) {
        assert!(in_class(v) && seen.insert(v), "{v}");
    }

    // alter: a next outside the class is rounded up into it; a max too.
    let shown = sequence::show(&*store, "r").await.unwrap();
    let next = shown.row.next;
    assert!(in_class(next) && next > *seen.iter().next_back().unwrap());
    let altered = sequence::alter(
        &*store,
        "r",
        &sequence::AlterSpec {
            next: Some(next + 4),
            max: Some(96),
            ..sequence::AlterSpec::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(altered.row.next, next + 6, "rounded up into the class");
    assert_eq!(altered.row.max, 95, "rounded down into the class");
    assert!(in_class(altered.row.next));
    // The handles' cached values stay theirs; after them, the new next.
    let rest = plain.next_n(1).await.unwrap();
    assert!(in_class(rest[0]) && seen.insert(rest[0]));
    // The strict handle hands back its unused block on close, in values.
    let _ = strict.close().await.unwrap();
    let _ = plain.close().await.unwrap();
    let tail = Sequence::builder()
        .store(store.clone())
        .name("r")
        .block(100)
        .build()
        .await
        .unwrap();
    let mut last = 0;
    loop {
        match tail.next().await {
            Ok(v) => {
                assert!(in_class(v), "{v}");
                assert!(seen.insert(v), "{v} handed out twice");
                last = v;
            }
            Err(Error::Exhausted { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(last, 95, "the largest value 2 mod 3 at or below the max");
    let listed = sequence::list(&*store).await.unwrap();
    let r = listed.iter().find(|i| i.row.name == "r").unwrap();
    assert_eq!((r.residue, r.remaining), (Some(class), 0));
}

/// A pool in a residue class (values `2 mod 3`, from 10, five members):
/// `create` rounds the start into the class and keeps the class with the
/// pool; handles opened later (as another process would) read it; tasks on
/// two handles take only values of the class, none twice; `give_back` of a
/// taken value puts that value back, and refuses, giving nothing back, a
/// number the pool cannot have handed out; `describe`, `members` and
/// `list` speak in values. A pool created without a class has none.
pub async fn pool_values_stay_in_their_class(store: Arc<dyn Store>) {
    use crate::store::{PoolSpec, Residue};
    let class = Residue {
        increment: 3,
        offset: 2,
    };
    let in_class = |v: i64| v.rem_euclid(3) == 2;
    let row = pool::create(
        &*store,
        &PoolSpec {
            residue: Some(class),
            ..pool_spec("rc", 10, 5)
        },
    )
    .await
    .unwrap()
    .row;
    // 11 is the first value 2 mod 3 at or above 10.
    assert_eq!((row.start, row.size, row.residue), (11, 5, Some(class)));
    assert_eq!(
        pool::members(&*store, "rc").await.unwrap(),
        vec![11, 14, 17, 20, 23]
    );
    let plain = pool::create(&*store, &pool_spec("plain", 10, 5))
        .await
        .unwrap()
        .row;
    assert_eq!((plain.start, plain.residue), (10, None));

    let open = || ValuePool::builder().store(store.clone()).name("rc").build();
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    assert_eq!((a.start(), a.residue()), (11, Some(class)));
    assert_eq!(a.row().start, 11);
    assert!(in_class(a.max_value()) && a.max_value() > i64::MAX - 3 * 6);
    let mut tasks = Vec::new();
    for h in [a.clone(), b.clone(), a.clone(), b.clone()] {
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for _ in 0..15 {
                out.push(h.take().await.unwrap());
            }
            out.extend(h.take_n(5).await.unwrap());
            out
        }));
    }
    let mut seen = BTreeSet::new();
    for t in tasks {
        for v in t.await.unwrap() {
            assert!(in_class(v), "{v} is not 2 mod 3");
            assert!(v >= 11, "{v} is below the pool's start");
            assert!(seen.insert(v), "{v} handed out twice");
        }
    }
    assert_eq!(seen.len(), 80);
    let info = pool::describe(&*store, "rc").await.unwrap();
    assert_eq!(info.taken, 80);
    assert_eq!((info.row.start, info.row.residue), (11, Some(class)));
    assert!(in_class(info.lowest) && in_class(info.highest));
    assert!(!seen.contains(&info.lowest) && !seen.contains(&info.highest));
    assert_eq!(info.max_value, a.max_value());
    // Every number from the start up to the lowest member was handed out:
    // no holes, in values of the class.
    assert!((11..info.lowest).step_by(3).all(|v| seen.contains(&v)));

    // give_back of a taken value: it is a member again.
    let v = a.take().await.unwrap();
    assert!(in_class(v) && seen.insert(v));
    a.give_back(&[v]).await.unwrap();
    let members = pool::members(&*store, "rc").await.unwrap();
    assert!(members.contains(&v), "{v} not back in {members:?}");
    assert!(members.iter().all(|m| in_class(*m)), "{members:?}");
    // Numbers it cannot have handed out are refused, and nothing goes back.
    let w = a.take().await.unwrap();
    for bad in [
        vec![w, w + 1],             // w + 1 is not 2 mod 3
        vec![w, 8],                 // 8 is 2 mod 3, but below the start
        vec![a.max_value() + 3, w], // above the largest value
    ] {
        let e = a.give_back(&bad).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
        assert_eq!(pool::members(&*store, "rc").await.unwrap().len(), 5);
        assert!(!pool::members(&*store, "rc").await.unwrap().contains(&w));
    }
    assert!(
        a.give_back(&[w + 1])
            .await
            .unwrap_err()
            .to_string()
            .contains("2 modulo 3")
    );
    let rows = pool::list(&*store).await.unwrap();
    let shown: Vec<_> = rows
        .iter()
        .map(|r| (r.name.as_str(), r.start, r.residue))
        .collect();
    assert_eq!(shown, [("plain", 10, None), ("rc", 11, Some(class))]);
}

/// `give_back` takes back only what the handle holds as the last number of
/// its slot: a number it never took (still a member), one another handle
/// took, one listed twice, one given back already, or an earlier number of
/// a slot it took again, is refused, and nothing goes back (each, taken
/// back, could be handed out twice). Clones share what they hold.
pub async fn pool_give_back_takes_only_what_the_handle_holds(store: Arc<dyn Store>) {
    pool::create(&*store, &pool_spec("gb", 100, 4))
        .await
        .unwrap();
    let open = |name: &str| ValuePool::builder().store(store.clone()).name(name).build();
    let (a, b) = (open("gb").await.unwrap(), open("gb").await.unwrap());
    let x = a.take().await.unwrap();
    // y from another slot than x (b may be offered x's replacement, x + 4:
    // it gives that back, which puts x + 4 back in the pool).
    let y = loop {
        let y = b.take().await.unwrap();
        if (y - x) % 4 != 0 {
            break y;
        }
        b.give_back(&[y]).await.unwrap();
    };
    let members = || async { pool::members(&*store, "gb").await.unwrap() };
    let before = members().await;
    let untaken = *before.iter().find(|m| **m < 104).unwrap();
    for bad in [
        vec![untaken], // never taken: still a member
        vec![x, y],    // y is b's
        vec![x, x],    // listed twice
        vec![x + 4],   // x's replacement, which no one took
    ] {
        let e = a.give_back(&bad).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
        assert!(e.to_string().contains("give back only"), "{e}");
        assert_eq!(members().await, before, "{bad:?} changed the pool");
    }
    // A clone holds what the handle holds; once back, x is refused again.
    a.clone().give_back(&[x]).await.unwrap();
    assert!(members().await.contains(&x));
    assert!(a.give_back(&[x]).await.is_err());
    // b gives its own back: the pool as it was made.
    b.give_back(&[y]).await.unwrap();
    assert_eq!(members().await, vec![100, 101, 102, 103]);

    // One slot: the handle holds 10 and 11, and takes back only 11, the
    // last of the slot (10 it cannot tell from another handle's).
    pool::create(&*store, &pool_spec("gb1", 10, 1))
        .await
        .unwrap();
    let c = open("gb1").await.unwrap();
    assert_eq!(c.take_n(2).await.unwrap(), vec![10, 11]);
    let one = || async { pool::members(&*store, "gb1").await.unwrap() };
    for bad in [vec![10, 11], vec![11, 10], vec![10]] {
        let e = c.give_back(&bad).await.unwrap_err();
        assert!(e.to_string().contains("the last it took"), "{bad:?}: {e}");
        assert_eq!(one().await, vec![12], "{bad:?} changed the pool");
    }
    c.give_back(&[11]).await.unwrap();
    assert_eq!(one().await, vec![11]);
    assert!(c.give_back(&[10]).await.is_err());
}

/// A pool in a residue class created at the largest start its class allows
/// hands out each first member once, then is exhausted: no value past the
/// class's last value that fits in an `i64`, none wrapped.
pub async fn pool_values_of_a_class_near_i64_max_exhaust(store: Arc<dyn Store>) {
    use crate::store::{PoolSpec, Residue};
    let class = Residue {
        increment: 1000,
        offset: 999,
    };
    let last = class.value(class.slot_at_or_below(i64::MAX));
    let start = last - 3 * 1000;
    let too_far = pool::create(
        &*store,
        &PoolSpec {
            start: start + 1,
            residue: Some(class),
            ..pool_spec("top", 0, 2)
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(too_far, Error::InvalidArgument(_)), "{too_far}");
    assert!(store.read_pool("top").await.unwrap().is_none(), "created");
    pool::create(
        &*store,
        &PoolSpec {
            start,
            residue: Some(class),
            ..pool_spec("top", 0, 2)
        },
    )
    .await
    .unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("top")
        .build()
        .await
        .unwrap();
    assert_eq!(h.max_value(), start + 1000);
    let got: BTreeSet<i64> = h.take_n(2).await.unwrap().into_iter().collect();
    assert_eq!(got, [start, start + 1000].into());
    let e = h.take().await.unwrap_err();
    assert!(
        matches!(e, Error::Exhausted { max, .. } if max == start + 1000),
        "{e}"
    );
    assert_eq!(
        pool::members(&*store, "top").await.unwrap(),
        vec![last - 1000, last],
        "exhaustion changed the pool"
    );
}

/// A handle that allocated, its sequence dropped and created again: a new
/// handle's values are above every value the old handle handed out or
/// still holds in its block, and the create says it continued above them.
pub async fn a_sequence_created_again_hands_out_above_a_dropped_one(store: Arc<dyn Store>) {
    create(&store, "again", 1, 1_000_000, 10).await;
    let old = Sequence::builder()
        .store(store.clone())
        .name("again")
        .build()
        .await
        .unwrap();
    let mut before = vec![old.next().await.unwrap(), old.next().await.unwrap()];
    sequence::remove(&*store, "again").await.unwrap();
    let info = sequence::create(&*store, &spec("again", 1, 1_000_000))
        .await
        .unwrap();
    let start = info
        .continued_above_dropped
        .expect("continued above the drop");
    assert_eq!(start, info.row.start);
    // The old handle still hands out what its block holds.
    before.push(old.next().await.unwrap());
    let new = Sequence::builder()
        .store(store.clone())
        .name("again")
        .build()
        .await
        .unwrap();
    let after = new.next_n(5).await.unwrap();
    let highest = *before.iter().max().unwrap();
    assert!(
        after.iter().all(|v| *v > highest),
        "{after:?} not above {before:?}"
    );
    // And a pool the same way.
    pool::create(&*store, &pool_spec("again", 1, 3))
        .await
        .unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("again")
        .build()
        .await
        .unwrap();
    let taken = h.take_n(5).await.unwrap();
    pool::remove(&*store, "again").await.unwrap();
    let created = pool::create(&*store, &pool_spec("again", 1, 3))
        .await
        .unwrap();
    assert!(created.continued_above_dropped.is_some());
    let h = ValuePool::builder()
        .store(store.clone())
        .name("again")
        .build()
        .await
        .unwrap();
    let later = h.take_n(3).await.unwrap();
    let highest = *taken.iter().max().unwrap();
    assert!(
        later.iter().all(|v| *v > highest),
        "{later:?} not above {taken:?}"
    );
}

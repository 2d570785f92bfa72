//! The generator under a hand-moved clock, on real stores (memory, SQLite).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::store::memory::MemoryStore;

const NOW: i64 = 1_795_000_000_000; // 2026-11

fn store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

fn config(layout: Layout) -> IdConfig {
    IdConfig {
        background_renewal: false,
        ..IdConfig::new(layout)
    }
}

async fn generator(store: &Arc<dyn Store>, clock: &Arc<ManualClock>, c: IdConfig) -> IdGenerator {
    IdGenerator::builder()
        .store(store.clone())
        .clock(clock.clone())
        .config(c)
        .build()
        .await
        .unwrap()
}

fn assert_increasing(ids: &[i64]) {
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "{} then {}", w[0], w[1]);
    }
}

#[tokio::test]
async fn ids_increase_and_decode_to_clock_worker_and_sequence() {
    let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
    let g = generator(&s, &clock, config(Layout::snowflake())).await;
    let ids = g.next_n(10).await.unwrap();
    assert_increasing(&ids);
    let d = g.layout().decode(ids[3]).unwrap();
    assert_eq!((d.time_ms, d.worker, d.sequence), (NOW, 0, 3));
    let other = generator(&s, &clock, config(Layout::snowflake())).await;
    assert_eq!(
        g.layout()
            .decode(other.next().await.unwrap())
            .unwrap()
            .worker,
        1
    );
    clock.advance(Duration::from_millis(5));
    let d = g.layout().decode(g.next().await.unwrap()).unwrap();
    assert_eq!((d.time_ms, d.sequence), (NOW + 5, 0));
    for bad in [0, -1, MAX_BATCH + 1] {
        let e = g.next_n(bad).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
}

/// Back by 1 ms and by 1 s: ids go on increasing without waiting, from the
/// last time used; the skew shows in the status.
#[tokio::test]
async fn a_clock_going_back_a_little_neither_repeats_nor_waits() {
    let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
    let g = generator(&s, &clock, config(Layout::snowflake())).await;
    let mut ids = g.next_n(100).await.unwrap();
    for back in [1, 1_000] {
        clock.jump_ms(-back);
        ids.extend(g.next_n(5000).await.unwrap());
        let st = g.status();
        assert!(st.clock_behind_ms >= back, "{st:?}");
    }
    assert_increasing(&ids);
    let st = g.status();
    assert_eq!(st.waited_ms, 0, "{st:?}");
    assert_eq!(st.clock_back_events, 2, "{st:?}");
    assert!(st.max_clock_behind_ms >= 1_001, "{st:?}");
    assert_eq!(clock.now_ms(), NOW - 1_001, "nothing slept");
}

/// Back by an hour: a clear error naming the skew, at once (no wait, no
/// id); when the clock is right again, ids go on above the earlier ones.
#[tokio::test]
async fn a_clock_an_hour_behind_is_a_clear_error_not_a_hang() {
    let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
    let g = generator(&s, &clock, config(Layout::snowflake())).await;
    let before = g.next_n(10).await.unwrap();
    clock.jump_ms(-3_600_000);
    let e = g.next().await.unwrap_err();
    assert!(matches!(e, Error::IdsUnavailable(_)), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("3600000 ms behind") && msg.contains("max_borrow"),
        "{msg}"
    );
    assert_eq!(clock.now_ms(), NOW - 3_600_000, "it waited");
    clock.jump_ms(3_600_000);
    let after = g.next().await.unwrap();
    assert!(after > *before.last().unwrap());
}

/// A jump forward moves ids (and the floor, synchronously) forward; a jump
/// back afterwards borrows within the limit.
#[tokio::test]
async fn forward_jumps_move_the_floor_and_ids_stay_unique() {
    let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
    let g = generator(&s, &clock, config(Layout::snowflake())).await;
    let mut ids = g.next_n(10).await.unwrap();
    clock.jump_ms(3_600_000);
    ids.extend(g.next_n(10).await.unwrap());
    let d = g.layout().decode(*ids.last().unwrap()).unwrap();
    assert_eq!(d.time_ms, NOW + 3_600_000);
    let st = g.status();
    assert!(st.until_ms > NOW + 3_600_000 && st.renewals >= 1, "{st:?}");
    clock.jump_ms(-2_000);
    ids.extend(g.next_n(10).await.unwrap());
    assert_increasing(&ids);
}

/// Faster than the sequence bits allow, at a clock that stands still: ids
/// run ahead up to max_borrow, then the call waits for the clock (here a
/// manual one, which moves when slept on), within max_wait.
#[tokio::test]
async fn sequence_overflow_borrows_then_waits_a_bounded_time() {
    let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
    let c = IdConfig {
        max_borrow: Duration::from_millis(50),
        ..config(Layout::javascript_safe())
    };
    let g = generator(&s, &clock, c).await;
    // 256 ids per 10 ms: 20 units' worth.
    let ids = g.next_n(256 * 20).await.unwrap();
    assert_increasing(&ids);
    let st = g.status();
    assert!(st.waited_ms > 0 && st.waited_ms <= 1_000, "{st:?}");
    assert!(clock.now_ms() > NOW);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    // A max_wait of zero: the same load is an error, not a wait.
    let c = IdConfig {
        max_borrow: Duration::from_millis(50),
        max_wait: Duration::ZERO,
        group: "other".into(),
        ..config(Layout::javascript_safe())
    };
    let g = generator(&s, &clock, c).await;
    let e = g.next_n(256 * 20).await.unwrap_err();
    assert!(matches!(e, Error::IdsUnavailable(_)), "{e}");
}

/// A clean close lowers the floor to what was used: the next holder, even
/// with a clock an hour behind and enough max_borrow, starts right above.
/// After a crash (no close) the next holder starts above the whole window.
#[tokio::test]
async fn a_new_holder_starts_above_everything_before_it() {
    let s = store();
    let one = |clock_ms: i64, borrow: Duration| {
        let clock = Arc::new(ManualClock::new(clock_ms));
        let c = IdConfig {
            max_workers: Some(1),
            max_borrow: borrow,
            ttl: Duration::from_millis(200),
            window: Duration::from_millis(300),
            ..config(Layout::snowflake())
        };
        (clock, c)
    };
    let (ca, cfg) = one(NOW, Duration::from_secs(5));
    let a = generator(&s, &ca, cfg).await;
    let a_ids = a.next_n(1000).await.unwrap();
    a.close().await.unwrap();
    assert!(matches!(a.next().await, Err(Error::Closed { .. })));
    let (cb, cfg) = one(NOW - 3_600_000, Duration::from_secs(7_200));
    let b = generator(&s, &cb, cfg).await;
    let b_first = b.next().await.unwrap();
    assert!(b_first > *a_ids.last().unwrap());
    assert_eq!(
        b.layout().decode(b_first).unwrap().time_ms,
        NOW + 1,
        "right above the last unit A used"
    );
    // B crashes (dropped, not closed): C waits out the lease, then starts
    // above B's whole window, with its clock an hour behind.
    let b_until = b.status().until_ms;
    drop(b);
    let (cc, cfg) = one(NOW - 3_600_000, Duration::from_secs(7_200));
    let give_up = Instant::now() + Duration::from_secs(30);
    let c = loop {
        match IdGenerator::builder()
            .store(s.clone())
            .clock(cc.clone())
            .config(cfg.clone())
            .build()
            .await
        {
            Ok(c) => break c,
            Err(Error::IdsUnavailable(_)) if Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    let c_first = c.next().await.unwrap();
    assert!(c.layout().decode(c_first).unwrap().time_ms >= b_until);
    // With the default max_borrow, a clock that far behind the floor is a
    // clear error.
    c.close().await.unwrap();
    let (cd, cfg) = one(NOW - 3_600_000, Duration::from_secs(5));
    let d = generator(&s, &cd, cfg).await;
    assert!(matches!(d.next().await, Err(Error::IdsUnavailable(_))));
}

/// The holder pauses past its lease; another takes the worker id. The
/// paused one then finds its lease lost, cannot share the only worker id
/// (a clear error), and once it is free again starts above the other's ids.
#[tokio::test]
async fn a_lease_that_lapses_during_a_pause_is_never_shared() {
    let s = store();
    let cfg = IdConfig {
        max_workers: Some(1),
        ttl: Duration::from_millis(200),
        window: Duration::from_millis(300),
        ..config(Layout::snowflake())
    };
    let ca = Arc::new(ManualClock::new(NOW));
    let a = generator(&s, &ca, cfg.clone()).await;
    let mut all = a.next_n(100).await.unwrap();
    let e = IdGenerator::builder()
        .store(s.clone())
        .config(cfg.clone())
        .build()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::IdsUnavailable(_)), "{e}");
    // A is paused for a second (both its clocks move on).
    ca.advance(Duration::from_secs(1));
    let cb = Arc::new(ManualClock::new(NOW + 1_000));
    let give_up = Instant::now() + Duration::from_secs(30);
    let b = loop {
        match IdGenerator::builder()
            .store(s.clone())
            .clock(cb.clone())
            .config(cfg.clone())
            .build()
            .await
        {
            Ok(b) => break b,
            Err(Error::IdsUnavailable(_)) if Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    let b_ids = b.next_n(100).await.unwrap();
    // A wakes: past its deadline it renews, finds the fence moved, and
    // finds no free worker id.
    let e = a.next().await.unwrap_err();
    assert!(matches!(e, Error::IdsUnavailable(_)), "{e}");
    assert_eq!(a.status().leases_lost, 1);
    assert_eq!(a.status().worker, None);
    b.close().await.unwrap();
    let a_more = a.next_n(100).await.unwrap();
    assert!(a_more[0] > *b_ids.last().unwrap());
    assert!(a_more[0] > *all.last().unwrap());
    all.extend(&b_ids);
    all.extend(&a_more);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len());
}

#[tokio::test]
async fn bad_configurations_are_refused_and_lease_nothing() {
    let s = store();
    let clock = Arc::new(ManualClock::new(NOW));
    let short = Layout {
        time_bits: 30,
        ..Layout::snowflake()
    };
    for c in [
        config(short),
        IdConfig {
            max_workers: Some(2000),
            ..config(Layout::snowflake())
        },
        IdConfig {
            window: Duration::from_millis(5),
            ..config(Layout::javascript_safe())
        },
        IdConfig {
            group: "bad group".into(),
            ..config(Layout::snowflake())
        },
    ] {
        let e = IdGenerator::builder()
            .store(s.clone())
            .clock(clock.clone())
            .config(c)
            .build()
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_) | Error::InvalidName { .. }),
            "{e}"
        );
    }
    let g = generator(&s, &clock, config(Layout::snowflake())).await;
    assert_eq!(
        g.status().worker,
        Some(0),
        "a refused build leased a worker id"
    );
    let g = IdGenerator::builder()
        .store(s.clone())
        .clock(clock.clone())
        .config(IdConfig {
            allow_short_lifetime: true,
            group: "short".into(),
            ..config(short)
        })
        .build()
        .await;
    assert!(g.is_ok(), "the explicit override");
}

/// With the real clock and a short TTL, the background task keeps the
/// lease alive (without the generator's lock): another generator finds the
/// only worker id held long after the TTL, and the floor moves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_renewal_keeps_the_lease() {
    let s = store();
    let cfg = IdConfig {
        max_workers: Some(1),
        ttl: Duration::from_millis(300),
        window: Duration::from_millis(300),
        ..IdConfig::new(Layout::snowflake())
    };
    let g = IdGenerator::builder()
        .store(s.clone())
        .config(cfg.clone())
        .build()
        .await
        .unwrap();
    let first_floor = g.status().until_ms;
    let mut ids = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(30);
    // Awaits five renewals (five TTLs' worth of time).
    while g.status().renewals < 5 {
        assert!(Instant::now() < give_up, "no background renewals");
        ids.extend(g.next_n(10).await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let e = IdGenerator::builder()
        .store(s.clone())
        .config(cfg)
        .build()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::IdsUnavailable(_)), "{e}");
    let st = g.status();
    assert!(st.until_ms > first_floor, "{st:?}");
    assert_eq!(
        (st.worker, st.leases_lost, st.acquisitions),
        (Some(0), 0, 1)
    );
    assert_increasing(&ids);
}

mod bounds {
    use super::*;
    use proptest::prelude::*;

    fn layouts() -> impl Strategy<Value = Layout> {
        (
            1u32..=41,
            0u32..=10,
            0u32..=12,
            1i64..=1000,
            0i64..=DEFAULT_EPOCH_MS,
        )
            .prop_filter_map("63 bits at most", |(t, w, s, unit_ms, epoch_ms)| {
                let l = Layout {
                    time_bits: t,
                    worker_bits: w,
                    sequence_bits: s,
                    unit_ms,
                    epoch_ms,
                };
                l.validate().ok().map(|_| l)
            })
    }

    proptest! {
        /// An id lies within the bounds of a window exactly when its time
        /// unit overlaps the window; an id made at a time in the window
        /// decodes to a unit holding that time, inside the bounds.
        #[test]
        fn an_id_is_within_the_bounds_exactly_when_its_unit_overlaps_the_window(
            l in layouts(),
            a in 0u64..u64::MAX,
            b in 0u64..u64::MAX,
            at in 0u64..u64::MAX,
            id in 0u64..u64::MAX,
        ) {
            let life = (l.max_time() + 1).saturating_mul(l.unit_ms);
            let span = life.saturating_add(2 * l.unit_ms);
            let t = |x: u64| l.epoch_ms - l.unit_ms + (x % span as u64) as i64;
            let (from, to) = (t(a).min(t(b)), t(a).max(t(b)));
            let Ok(bd) = l.bounds(from, to) else {
                prop_assert!(to < l.epoch_ms || from >= l.unit_start_ms(l.max_time() + 1));
                return Ok(());
            };
            let max_id = l.report(0).max_id;
            let id = (id % (max_id as u64).saturating_add(1).max(1)) as i64;
            let d = l.decode(id).unwrap();
            let overlaps = d.time_ms <= to && d.time_ms + l.unit_ms > from;
            prop_assert_eq!(bd.min_id <= id && id <= bd.max_id, overlaps, "{:?} {:?}", bd, d);
            // An id made at a time in the window.
            let w = from + (at % ((to - from) as u64 + 1)) as i64;
            if let Some(u) = l.unit_of(w).filter(|&u| u <= l.max_time()) {
                let made = l.compose(u, d.worker, d.sequence);
                let m = l.decode(made).unwrap();
                prop_assert!(m.time_ms <= w && w < m.time_ms + l.unit_ms);
                prop_assert!(bd.min_id <= made && made <= bd.max_id);
            }
        }
    }

    /// Ids of a real generator, made while the clock walks through a
    /// window: all inside its bounds, none of them outside a neighbour's.
    #[tokio::test]
    async fn a_generators_ids_lie_within_the_bounds_of_their_window() {
        let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
        let g = generator(&s, &clock, config(Layout::javascript_safe())).await;
        let l = *g.layout();
        let mut made = Vec::new();
        for step in 0..50 {
            made.push((clock.now_ms(), g.next_n(3).await.unwrap()));
            clock.advance(Duration::from_millis(1 + step % 7));
        }
        let from = made[10].0;
        let to = made[40].0;
        let bd = l.bounds(from, to).unwrap();
        for (at, ids) in &made {
            for &id in ids {
                let inside = bd.min_id <= id && id <= bd.max_id;
                let d = l.decode(id).unwrap();
                if (from..=to).contains(at) {
                    assert!(inside, "{id} made at {at} outside {bd:?}");
                    assert!(d.time_ms <= *at && *at < d.time_ms + l.unit_ms);
                }
                assert_eq!(
                    inside,
                    d.time_ms <= to && d.time_ms + l.unit_ms > from,
                    "{id} {d:?}"
                );
            }
        }
        g.close().await.unwrap();
    }
}

mod uuids {
    use super::*;
    use proptest::prelude::*;

    fn assert_uuids_increase(u: &[uuid::Uuid]) {
        for w in u.windows(2) {
            assert!(w[0].as_bytes() < w[1].as_bytes(), "{} then {}", w[0], w[1]);
            assert!(
                w[0].to_string() < w[1].to_string(),
                "{} then {}",
                w[0],
                w[1]
            );
        }
    }

    /// Same-millisecond bursts past the 4096-id counter move to the next
    /// ms; every UUID is a version-7 one of the RFC variant, they increase,
    /// and each parses back to the time, worker and counter of the integer
    /// id the same generator would have made.
    #[tokio::test]
    async fn uuids_increase_through_bursts_and_counter_overflow_and_parse_back() {
        let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
        let _worker0 = generator(&s, &clock, config(Layout::snowflake())).await;
        let g = generator(&s, &clock, config(Layout::snowflake())).await;
        let mut all = Vec::new();
        // 3 bursts of 4096 * 2 + 5 within one clock ms each: two overflows a burst.
        for _ in 0..3 {
            all.extend(g.next_uuids(4096 * 2 + 5).await.unwrap());
            clock.advance(Duration::from_millis(1));
        }
        assert_uuids_increase(&all);
        let parts: Vec<DecodedUuid> = all
            .iter()
            .map(|u| decode_uuidv7(&u.to_string()).unwrap())
            .collect();
        for (u, d) in all.iter().zip(&parts) {
            assert_eq!(u.get_version_num(), 7);
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
            assert_eq!(d.worker, 1, "{d:?}");
        }
        assert_eq!(
            (parts[0].time_ms, parts[0].counter),
            (NOW, 0),
            "{:?}",
            parts[0]
        );
        assert_eq!((parts[4095].time_ms, parts[4095].counter), (NOW, 4095));
        assert_eq!((parts[4096].time_ms, parts[4096].counter), (NOW + 1, 0));
        // The next integer id follows the last UUID's triple.
        let last = parts.last().unwrap();
        let next = g.layout().decode(g.next().await.unwrap()).unwrap();
        assert!((next.time_ms, next.sequence) > (last.time_ms, last.counter));
        let set: HashSet<_> = all.iter().collect();
        assert_eq!(set.len(), all.len());
    }

    /// Many generators of one group on one store, clocks stopped (every id
    /// in a burst): no two UUIDs are equal, and each one's increase.
    #[tokio::test]
    async fn generators_of_a_group_never_make_the_same_uuid() {
        let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
        let mut gens = Vec::new();
        for _ in 0..8 {
            gens.push(generator(&s, &clock, config(Layout::javascript_safe())).await);
        }
        let mut seen = HashSet::new();
        for g in &gens {
            let u = g.next_uuids(600).await.unwrap();
            assert_uuids_increase(&u);
            for x in u {
                assert!(seen.insert(x), "{x} twice");
            }
        }
    }

    #[tokio::test]
    async fn a_layout_with_too_many_sequence_bits_is_refused_before_any_id() {
        let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
        let l = Layout {
            worker_bits: 8,
            sequence_bits: 14,
            ..Layout::snowflake()
        };
        let g = generator(&s, &clock, config(l)).await;
        let e = g.next_uuids(1).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert_eq!(g.status().issued, 0);
        let v = g.next_as(2, IdFormat::Integer).await.unwrap();
        assert_eq!(v.len(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Random bursts and clock steps (including none): one generator's
        /// UUIDs always increase and carry the version and variant.
        #[test]
        fn one_issuers_uuids_always_increase(steps in proptest::collection::vec((1i64..3000, 0u64..3), 1..12)) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
            rt.block_on(async {
                let (s, clock) = (store(), Arc::new(ManualClock::new(NOW)));
                let g = generator(&s, &clock, config(Layout::snowflake())).await;
                let mut all = Vec::new();
                for (n, ms) in steps {
                    all.extend(g.next_uuids(n).await.unwrap());
                    clock.advance(Duration::from_millis(ms));
                }
                for u in &all {
                    assert_eq!((u.get_version_num(), u.get_variant()), (7, uuid::Variant::RFC4122));
                }
                assert_uuids_increase(&all);
            });
        }
    }
}

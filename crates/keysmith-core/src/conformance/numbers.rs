//! The business-number half of the store contract
//! ([`NumberStore`](crate::store::NumberStore)), and what
//! [`crate::numbers::Numbers`] does on top of it: numbering kept
//! with the sequence, tickets taken lowest-free-first, refused commits and
//! releases that change nothing, expiry, periods that only move forward,
//! racing takers, formatted numbers across a period boundary.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Error;
use crate::ids::ManualClock;
use crate::numbers::{self, Number, Numbering, Numbers, Period};
use crate::sequence::Sequence;
use crate::store::{SequenceSpec, Store};

use super::spec;

const LONG: Duration = Duration::from_secs(300);

fn gapless(period: Option<Period>, template: Option<&str>) -> Numbering {
    Numbering {
        order: Default::default(),
        gapless: true,
        period,
        template: template.map(str::to_owned),
        bit_reversed: None,
        residue: None,
        opaque: None,
        encoding: None,
    }
}

fn token(i: u32) -> String {
    format!("{i:032x}")
}

/// An opaque sequence's key rotates by compare-and-set on its stored
/// settings: a replace from stale settings changes nothing; values from
/// before and after the rotation are distinct and all decode.
pub async fn opaque_keys_rotate_by_compare_and_set(store: Arc<dyn Store>) {
    let n = Numbering {
        opaque: Some(crate::numbers::Opaque::default()),
        ..Numbering::default()
    };
    numbers::create(&*store, &spec("opq", 1, 16 * 1000), &n)
        .await
        .unwrap();
    let before = store.read_numbering("opq").await.unwrap().unwrap();
    let h = Numbers::open(store.clone(), "opq").await.unwrap();
    let mut values: Vec<i64> = h
        .next_n(10)
        .await
        .unwrap()
        .iter()
        .map(|f| f.number.n)
        .collect();
    numbers::rotate_key(&*store, "opq").await.unwrap();
    let after = store.read_numbering("opq").await.unwrap().unwrap();
    assert_eq!(after.opaque.as_ref().unwrap().keys.len(), 2);
    // From stale settings: refused, nothing changed.
    assert!(!store.replace_numbering("opq", &before, &n).await.unwrap());
    assert!(
        !store
            .replace_numbering("missing", &before, &n)
            .await
            .unwrap()
    );
    assert_eq!(store.read_numbering("opq").await.unwrap().unwrap(), after);
    let h2 = Numbers::open(store.clone(), "opq").await.unwrap();
    values.extend(h2.next_n(10).await.unwrap().iter().map(|f| f.number.n));
    let distinct: std::collections::HashSet<_> = values.iter().collect();
    assert_eq!(
        distinct.len(),
        20,
        "a value twice across the rotation: {values:?}"
    );
    let counters: Vec<i64> = values
        .iter()
        .map(|v| h2.decode_value(*v).unwrap().counter)
        .collect();
    // Counter 11 marks the rotation.
    assert_eq!(counters, (1..=10).chain(12..=21).collect::<Vec<_>>());
}

/// A numbered sequence is created with its numbering in one write, reads
/// it back, refuses a second create, and loses it with a drop; an ordinary
/// one has none.
pub async fn numbering_is_kept_with_the_sequence(store: Arc<dyn Store>) {
    let n = gapless(Some(Period::Month), Some("INV-{period}-{n:04}"));
    let row = store
        .create_numbered(&spec("inv", 1, 100), &n)
        .await
        .unwrap();
    assert_eq!((row.name.as_str(), row.next, row.max), ("inv", 1, 100));
    assert_eq!(store.read_numbering("inv").await.unwrap(), Some(n.clone()));
    assert!(matches!(
        store.create_numbered(&spec("inv", 1, 100), &n).await,
        Err(Error::AlreadyExists { .. })
    ));
    assert!(matches!(
        store.create_sequence(&spec("inv", 1, 100)).await,
        Err(Error::AlreadyExists { .. })
    ));
    store.create_sequence(&spec("plain", 1, 100)).await.unwrap();
    assert_eq!(store.read_numbering("plain").await.unwrap(), None);
    assert_eq!(store.read_numbering("missing").await.unwrap(), None);
    // Listed like any sequence.
    let names: Vec<String> = store
        .list_sequences()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["inv", "plain"]);
    // Its tickets go with it, and a new sequence of the name continues
    // above the numbers it handed out.
    store
        .take_ticket("inv", 202611, &token(1), LONG)
        .await
        .unwrap();
    store.drop_sequence("inv").await.unwrap();
    assert_eq!(store.read_numbering("inv").await.unwrap(), None);
    store.create_sequence(&spec("inv", 1, 100)).await.unwrap();
    assert_eq!(store.read_numbering("inv").await.unwrap(), None);
    store.drop_sequence("inv").await.unwrap();
    store
        .create_numbered(&spec("inv", 1, 100), &n)
        .await
        .unwrap();
    let t = store
        .take_ticket("inv", 202611, &token(2), LONG)
        .await
        .unwrap();
    assert_eq!(
        t.value, 2,
        "no ticket survived the drop, and number 1 is not handed out again"
    );
    // An ordinary sequence has no numbers to take.
    for e in [
        store
            .take_ticket("plain", 0, &token(3), LONG)
            .await
            .unwrap_err(),
        store.reserve_numbers("plain", 0, 1).await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
    }
    for e in [
        store
            .take_ticket("nope", 0, &token(3), LONG)
            .await
            .unwrap_err(),
        store.reserve_numbers("nope", 0, 1).await.unwrap_err(),
        store
            .commit_ticket("nope", 0, 1, &token(3))
            .await
            .unwrap_err(),
        store
            .release_ticket("nope", 0, 1, &token(3))
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
    }
}

/// Takes hand out the lowest released number first, else a new one; a
/// commit makes a number final (never handed out again).
pub async fn tickets_take_the_lowest_free_number(store: Arc<dyn Store>) {
    store
        .create_numbered(&spec("g", 1, 1000), &gapless(None, None))
        .await
        .unwrap();
    let mut got = Vec::new();
    for i in 0..4 {
        got.push(store.take_ticket("g", 0, &token(i), LONG).await.unwrap());
    }
    assert_eq!(
        got.iter().map(|t| (t.period, t.value)).collect::<Vec<_>>(),
        [(0, 1), (0, 2), (0, 3), (0, 4)]
    );
    store.release_ticket("g", 0, 3, &token(2)).await.unwrap();
    store.release_ticket("g", 0, 2, &token(1)).await.unwrap();
    assert_eq!(
        store
            .take_ticket("g", 0, &token(10), LONG)
            .await
            .unwrap()
            .value,
        2
    );
    assert_eq!(
        store
            .take_ticket("g", 0, &token(11), LONG)
            .await
            .unwrap()
            .value,
        3
    );
    for (v, t) in [(1, 0), (2, 10), (3, 11), (4, 3)] {
        store.commit_ticket("g", 0, v, &token(t)).await.unwrap();
    }
    assert_eq!(
        store
            .take_ticket("g", 0, &token(12), LONG)
            .await
            .unwrap()
            .value,
        5
    );
}

/// A commit or release with a wrong token, of a number never taken, after
/// a release or a commit, is refused with a message saying why, and changes
/// nothing: the rightful holder still commits, and the next take is as if
/// the refused call never happened.
pub async fn refused_commits_and_releases_change_nothing(store: Arc<dyn Store>) {
    store
        .create_numbered(&spec("g", 1, 1000), &gapless(None, None))
        .await
        .unwrap();
    let a = store.take_ticket("g", 0, &token(1), LONG).await.unwrap();
    let b = store.take_ticket("g", 0, &token(2), LONG).await.unwrap();
    let refused = |e: Error, says: &str| match e {
        Error::TicketRefused(m) => assert!(m.contains(says), "{m}"),
        other => panic!("expected a refused ticket, got {other}"),
    };
    // Someone else's token.
    refused(
        store
            .commit_ticket("g", 0, a.value, &token(2))
            .await
            .unwrap_err(),
        "taken again",
    );
    refused(
        store
            .release_ticket("g", 0, a.value, &token(9))
            .await
            .unwrap_err(),
        "taken again",
    );
    // A number never taken, a period never used.
    refused(
        store
            .commit_ticket("g", 0, 99, &token(1))
            .await
            .unwrap_err(),
        "not open",
    );
    refused(
        store
            .commit_ticket("g", 7, a.value, &token(1))
            .await
            .unwrap_err(),
        "not open",
    );
    // Nothing changed: the holders still settle, and take comes next.
    store
        .commit_ticket("g", 0, a.value, &token(1))
        .await
        .unwrap();
    refused(
        store
            .commit_ticket("g", 0, a.value, &token(1))
            .await
            .unwrap_err(),
        "committed already",
    );
    refused(
        store
            .release_ticket("g", 0, a.value, &token(1))
            .await
            .unwrap_err(),
        "committed already",
    );
    store
        .release_ticket("g", 0, b.value, &token(2))
        .await
        .unwrap();
    refused(
        store
            .commit_ticket("g", 0, b.value, &token(2))
            .await
            .unwrap_err(),
        "released",
    );
    refused(
        store
            .release_ticket("g", 0, b.value, &token(2))
            .await
            .unwrap_err(),
        "released",
    );
    let c = store.take_ticket("g", 0, &token(3), LONG).await.unwrap();
    assert_eq!(c.value, b.value, "the released number, once");
    assert_eq!(
        store
            .take_ticket("g", 0, &token(4), LONG)
            .await
            .unwrap()
            .value,
        3
    );
    store
        .commit_ticket("g", 0, c.value, &token(3))
        .await
        .unwrap();
}

/// A ticket whose holder goes away expires by the store's clock: its number
/// is taken again (before any new one), and the old ticket can no longer
/// commit it.
pub async fn an_expired_ticket_is_taken_again(store: Arc<dyn Store>) {
    store
        .create_numbered(&spec("g", 1, 1000), &gapless(None, None))
        .await
        .unwrap();
    let dead = store
        .take_ticket("g", 0, &token(1), Duration::from_millis(200))
        .await
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    // Awaits the expiry: until then a take gets another number, released
    // again at once (so it is the one taken on the next round).
    let (again, t) = loop {
        let t = token(100);
        let got = store.take_ticket("g", 0, &t, LONG).await.unwrap();
        if got.value == dead.value {
            break (got, t);
        }
        assert_eq!(got.value, 2, "only the released number comes in between");
        store.release_ticket("g", 0, got.value, &t).await.unwrap();
        assert!(Instant::now() < give_up, "the ticket never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    match store.commit_ticket("g", 0, dead.value, &token(1)).await {
        Err(Error::TicketRefused(m)) => assert!(m.contains("taken again"), "{m}"),
        other => panic!("the dead holder's commit must be refused, got {other:?}"),
    }
    store.commit_ticket("g", 0, again.value, &t).await.unwrap();
}

/// Periods only move forward: a caller whose clock lags gets the current
/// period's numbers; each period counts from the start on its own.
pub async fn periods_only_move_forward(store: Arc<dyn Store>) {
    let n = Numbering {
        order: Default::default(),
        gapless: false,
        period: Some(Period::Day),
        template: None,
        bit_reversed: None,
        residue: None,
        opaque: None,
        encoding: None,
    };
    store
        .create_numbered(&spec("d", 5, 1000), &n)
        .await
        .unwrap();
    let r = store.reserve_numbers("d", 20261123, 2).await.unwrap();
    assert_eq!((r.period, r.start, r.end), (20261123, 5, 7));
    let r = store.reserve_numbers("d", 20261124, 1).await.unwrap();
    assert_eq!((r.period, r.start, r.end), (20261124, 5, 6));
    let r = store.reserve_numbers("d", 20261123, 3).await.unwrap();
    assert_eq!(
        (r.period, r.start, r.end),
        (20261124, 6, 9),
        "a lagging clock does not go back"
    );
    store
        .create_numbered(&spec("gd", 1, 1000), &gapless(Some(Period::Day), None))
        .await
        .unwrap();
    let a = store
        .take_ticket("gd", 20261123, &token(1), LONG)
        .await
        .unwrap();
    let b = store
        .take_ticket("gd", 20261125, &token(2), LONG)
        .await
        .unwrap();
    let c = store
        .take_ticket("gd", 20261124, &token(3), LONG)
        .await
        .unwrap();
    assert_eq!(
        [
            (a.period, a.value),
            (b.period, b.value),
            (c.period, c.value)
        ],
        [(20261123, 1), (20261125, 1), (20261125, 2)]
    );
    // A number of an ended period is still committed under its period.
    store
        .commit_ticket("gd", 20261123, 1, &token(1))
        .await
        .unwrap();
}

/// Counters stop at the maximum: a short reservation, then a clear error;
/// a gap-free sequence at its maximum still hands out released numbers.
pub async fn numbers_exhaust_at_the_maximum(store: Arc<dyn Store>) {
    let plain = Numbering {
        template: Some("N{n}".into()),
        ..Numbering::default()
    };
    store
        .create_numbered(&spec("m", 5, 7), &plain)
        .await
        .unwrap();
    let r = store.reserve_numbers("m", 0, 10).await.unwrap();
    assert_eq!((r.start, r.end), (5, 8));
    assert!(matches!(
        store.reserve_numbers("m", 0, 1).await,
        Err(Error::Exhausted { max: 7, .. })
    ));
    store
        .create_numbered(&spec("g", 1, 2), &gapless(None, None))
        .await
        .unwrap();
    store.take_ticket("g", 0, &token(1), LONG).await.unwrap();
    store.take_ticket("g", 0, &token(2), LONG).await.unwrap();
    assert!(matches!(
        store.take_ticket("g", 0, &token(3), LONG).await,
        Err(Error::Exhausted { max: 2, .. })
    ));
    store.release_ticket("g", 0, 2, &token(2)).await.unwrap();
    assert_eq!(
        store
            .take_ticket("g", 0, &token(4), LONG)
            .await
            .unwrap()
            .value,
        2
    );
}

/// Many takers at once, some releasing: every number is held by one taker
/// at a time, and the committed numbers are exactly `1..=n`.
pub async fn racing_takers_commit_exactly_one_to_n(store: Arc<dyn Store>) {
    store
        .create_numbered(&spec("g", 1, 1_000_000), &gapless(None, None))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..12u32)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut committed = Vec::new();
                for i in 0..8u32 {
                    let t = token(w * 1000 + i);
                    let got = store.take_ticket("g", 0, &t, LONG).await.unwrap();
                    if (w + i) % 3 == 0 {
                        store.release_ticket("g", 0, got.value, &t).await.unwrap();
                    } else {
                        store.commit_ticket("g", 0, got.value, &t).await.unwrap();
                        committed.push(got.value);
                    }
                }
                committed
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let set: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(set.len(), all.len(), "a number was committed twice");
    // Released numbers were taken again, so the committed ones have no
    // hole unless a release came after the last take: take and commit
    // until no released number is left.
    let mut set = set;
    loop {
        let t = token(999_999);
        let got = store.take_ticket("g", 0, &t, LONG).await.unwrap();
        store.commit_ticket("g", 0, got.value, &t).await.unwrap();
        assert!(set.insert(got.value), "{} committed twice", got.value);
        if set.len() as i64 == *set.iter().next_back().unwrap() {
            break;
        }
    }
    let want: BTreeSet<i64> = (1..=set.len() as i64).collect();
    assert_eq!(set, want);
}

/// `Numbers`: formatted numbers across a period boundary read from an
/// injected clock, parse back, tickets through the handle, `next` refused on
/// a gap-free sequence and `take` on one that is not; `Sequence` handles
/// refuse numbered sequences.
pub async fn numbers_cross_a_period_boundary(store: Arc<dyn Store>) {
    // 2026-11-23T23:59:59.900Z.
    let clock = Arc::new(ManualClock::new(1_795_478_399_900));
    let inv = Numbering {
        order: Default::default(),
        gapless: false,
        period: Some(Period::Day),
        template: Some("INV-{period}-{n:04}".into()),
        bit_reversed: None,
        residue: None,
        opaque: None,
        encoding: None,
    };
    numbers::create(&*store, &SequenceSpec::new("inv"), &inv)
        .await
        .unwrap();
    let h = Numbers::open(store.clone(), "inv")
        .await
        .unwrap()
        .with_clock(clock.clone());
    let texts = |v: Vec<numbers::Formatted>| v.into_iter().map(|f| f.text).collect::<Vec<_>>();
    assert_eq!(
        texts(h.next_n(2).await.unwrap()),
        ["INV-20261123-0001", "INV-20261123-0002"]
    );
    clock.jump_ms(100);
    assert_eq!(texts(h.next_n(1).await.unwrap()), ["INV-20261124-0001"]);
    assert_eq!(
        h.parse("INV-20261124-0001").unwrap(),
        Number {
            period: Some(20261124),
            n: 1
        }
    );
    // A process whose clock is still before midnight agrees.
    let late = Numbers::open(store.clone(), "inv")
        .await
        .unwrap()
        .with_clock(Arc::new(ManualClock::new(1_795_478_399_000)));
    assert_eq!(texts(late.next_n(1).await.unwrap()), ["INV-20261124-0002"]);
    assert!(matches!(h.take(LONG).await, Err(Error::WrongKind(_))));
    let e = Sequence::builder()
        .store(store.clone())
        .name("inv")
        .build()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("take them with next"), "{e}");

    // Gap-free, periodic, formatted: the invoice case.
    numbers::create(
        &*store,
        &SequenceSpec::new("bill"),
        &gapless(Some(Period::Year), Some("B{period}/{n:03}")),
    )
    .await
    .unwrap();
    let g = Numbers::open(store.clone(), "bill")
        .await
        .unwrap()
        .with_clock(clock.clone());
    let t = g.take(LONG).await.unwrap();
    assert_eq!(t.text, "B2026/001");
    assert_eq!(g.parse(&t.text).unwrap(), t.number);
    let u = g.take(LONG).await.unwrap();
    g.release(&u.ticket.to_string()).await.unwrap();
    assert!(matches!(
        g.commit(&u.ticket.to_string()).await,
        Err(Error::TicketRefused(_))
    ));
    assert_eq!(
        g.commit(&t.ticket.to_string()).await.unwrap().text,
        "B2026/001"
    );
    assert_eq!(g.take(LONG).await.unwrap().text, "B2026/002");
    assert!(matches!(g.next_n(1).await, Err(Error::WrongKind(_))));
    assert!(matches!(
        g.commit("not-a-ticket").await,
        Err(Error::InvalidArgument(_))
    ));
    let e = Sequence::builder()
        .store(store.clone())
        .name("bill")
        .build()
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("take a ticket, then commit it"),
        "{e}"
    );

    // Bad settings create nothing.
    for bad in [
        Numbering {
            order: Default::default(),
            template: Some("INV-{n}".into()),
            period: Some(Period::Day),
            gapless: false,
            bit_reversed: None,
            residue: None,
            opaque: None,
            encoding: None,
        },
        Numbering {
            order: Default::default(),
            template: Some("{period}{n}".into()),
            period: None,
            gapless: true,
            bit_reversed: None,
            residue: None,
            opaque: None,
            encoding: None,
        },
    ] {
        assert!(matches!(
            numbers::create(&*store, &SequenceSpec::new("bad"), &bad).await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(store.read_sequence("bad").await.unwrap().is_none());
    }
    // An ordinary sequence is not a numbered one.
    crate::sequence::create(&*store, &SequenceSpec::new("plain"))
        .await
        .unwrap();
    assert!(matches!(
        Numbers::open(store.clone(), "plain").await,
        Err(Error::WrongKind(_))
    ));
    assert!(matches!(
        Numbers::open(store.clone(), "nope").await,
        Err(Error::NotFound { .. })
    ));
}

/// The store's clock is close to this host's (all test stores run here).
pub async fn the_store_clock_reads_now(store: Arc<dyn Store>) {
    let ms = store.clock_ms().await.unwrap();
    let here = crate::clock::now_ms();
    assert!((ms - here).abs() < 60_000, "store clock {ms}, here {here}");
}

/// The operator's fence of numbered sequences: the current period's counter
/// moves forward (0 moves nothing) and the store's generation is recorded;
/// numbers continue above it, takes of a gap-free one too.
pub async fn fence_numbers_moves_the_current_counter(store: Arc<dyn Store>) {
    let plain = Numbering::default();
    numbers::create(&*store, &spec("fn-counted", 1, 1000), &plain)
        .await
        .unwrap();
    let h = Numbers::open(store.clone(), "fn-counted").await.unwrap();
    assert_eq!(h.next_n(3).await.unwrap().len(), 3);
    let (_, before, after) = store.fence_numbers("fn-counted", 10).await.unwrap();
    assert_eq!((before, after), (4, 14));
    let next = h.next_n(1).await.unwrap();
    assert_eq!(next[0].text, "14");
    let row = store.read_sequence("fn-counted").await.unwrap().unwrap();
    assert_eq!(row.generation, Some(store.generation().await.unwrap()));
    assert_eq!(row.failover_skipped, 10);
    // Near the maximum the counter stops at max + 1.
    let (_, _, after) = store.fence_numbers("fn-counted", 5000).await.unwrap();
    assert_eq!(after, 1001);

    let gapless = Numbering {
        gapless: true,
        ..Numbering::default()
    };
    numbers::create(&*store, &spec("fn-gapless", 1, 1000), &gapless)
        .await
        .unwrap();
    let g = Numbers::open(store.clone(), "fn-gapless").await.unwrap();
    let t = g.take(Duration::from_secs(30)).await.unwrap();
    g.commit(&t.ticket.to_string()).await.unwrap();
    assert_eq!(
        store.fence_numbers("fn-gapless", 0).await.unwrap().1..=2,
        2..=2,
        "0 moves nothing"
    );
    let t = g.take(Duration::from_secs(30)).await.unwrap();
    assert_eq!(t.ticket.value, 2);
    assert!(matches!(
        store.fence_numbers("nope", 1).await,
        Err(Error::NotFound { .. })
    ));
}

/// `read_numbers` says where a numbered sequence's numbers are (the current
/// period's counter, its held and released numbers) and changes nothing;
/// `sequence::show` reports the last number given out and the tickets
/// from it, not the row's `next`, which numbers never move.
pub async fn show_reports_the_numbers_of_the_current_period(store: Arc<dyn Store>) {
    use crate::sequence::{self, NumbersUsage};
    store
        .create_numbered(&spec("g", 10, 1000), &gapless(None, None))
        .await
        .unwrap();
    store
        .create_sequence(&spec("plain", 1, 1000))
        .await
        .unwrap();
    assert_eq!(store.read_numbers("plain").await.unwrap(), None);
    assert_eq!(store.read_numbers("missing").await.unwrap(), None);
    let fresh = store.read_numbers("g").await.unwrap().unwrap();
    assert_eq!(
        (fresh.period, fresh.counter, fresh.held, fresh.released),
        (0, None, 0, 0)
    );
    let info = sequence::show(&*store, "g").await.unwrap();
    assert_eq!(info.numbers.unwrap().last, None);
    assert_eq!(info.numbers.unwrap().next, 10);

    // Three taken: one committed, one released, one held.
    for i in 0..3 {
        store.take_ticket("g", 0, &token(i), LONG).await.unwrap();
    }
    store.commit_ticket("g", 0, 10, &token(0)).await.unwrap();
    store.release_ticket("g", 0, 11, &token(1)).await.unwrap();
    let read = store.read_numbers("g").await.unwrap().unwrap();
    assert_eq!(
        (read.period, read.counter, read.held, read.released),
        (0, Some(13), 1, 1)
    );
    let info = sequence::show(&*store, "g").await.unwrap();
    assert_eq!(
        info.numbers,
        Some(NumbersUsage {
            period: 0,
            next: 13,
            last: Some(12),
            taken: 3,
            held: 1,
            released: 1,
            committed: 1,
        })
    );
    assert_eq!(info.remaining, 1000 - 13 + 1);
    // The block counts say nothing of numbers: left out.
    assert!(info.usage.is_none());
    // Reading changed nothing: the released number is the next taken.
    let again = store.take_ticket("g", 0, &token(3), LONG).await.unwrap();
    assert_eq!(again.value, 11);

    // A sequence per year reserving numbers: the current period's counter.
    let yearly = Numbering {
        period: Some(Period::Year),
        ..Numbering::default()
    };
    store
        .create_numbered(&spec("y", 1, 1000), &yearly)
        .await
        .unwrap();
    store.reserve_numbers("y", 2025, 4).await.unwrap();
    store.reserve_numbers("y", 2026, 2).await.unwrap();
    let read = store.read_numbers("y").await.unwrap().unwrap();
    assert_eq!(
        (read.period, read.counter, read.held, read.released),
        (2026, Some(3), 0, 0)
    );
    let n = sequence::show(&*store, "y").await.unwrap().numbers.unwrap();
    assert_eq!(
        (n.period, n.last, n.taken, n.committed),
        (2026, Some(2), 2, 2)
    );
    // A plain sequence has none.
    assert!(
        sequence::show(&*store, "plain")
            .await
            .unwrap()
            .numbers
            .is_none()
    );
}

//! Lives of a name: nothing taken before a drop writes after it. A row's
//! versions never repeat across the lives of its name, so a conditional
//! write planned in one life (a put, an alteration, a hand-back from a
//! handle or a lease) fails in the next and changes nothing; handles and
//! leases of an earlier life fail with [`Error::Dropped`]; and one name has
//! one tombstone whatever its kind, so a pool created under a dropped
//! sequence's name starts above everything that name handed out.
//!
//! Each check creates the next life with `start_below_dropped`, the worst
//! case: its values overlap the earlier life's, so only the life tells a
//! stale write from a current one.

use std::sync::Arc;
use std::time::Duration;

use super::{pool_spec, spec};
use crate::Error;
use crate::pool;
use crate::sequence::{Sequence, Strategy, lease};
use crate::store::{Alteration, Put, SequenceSpec, Store};

/// `name` created again below its dropped values (the worst case).
fn below(name: &str) -> SequenceSpec {
    SequenceSpec {
        start_below_dropped: true,
        ..spec(name, 1, 1_000_000)
    }
}

/// A put and an alteration planned in one life, sent after a drop and a
/// create, conflict and change nothing; the new life's incarnation and
/// versions are above every version of the old one.
pub async fn a_write_planned_in_an_earlier_life_never_lands(store: Arc<dyn Store>) {
    let first = store.create_sequence(&spec("life", 1, 1000)).await.unwrap();
    assert!(first.incarnation >= 1, "{first:?}");
    assert_eq!(first.version, first.incarnation, "{first:?}");
    store.reserve_locked("life", 10).await.unwrap();
    let old = store.read_sequence("life").await.unwrap().unwrap();
    store.drop_sequence("life").await.unwrap();
    let again = store.create_sequence(&below("life")).await.unwrap();
    assert!(
        again.incarnation > old.version && again.version == again.incarnation,
        "the new life {again:?} must start above every version of {old:?}"
    );
    store.reserve_locked("life", 3).await.unwrap();
    let before = store.read_sequence("life").await.unwrap().unwrap();
    // Every version the old life had.
    for expected in 1..=old.version {
        match store.put_if_version("life", 1, expected).await.unwrap() {
            Put::Conflict(row) => assert_eq!(row, before),
            Put::Done(row) => panic!("a put of the old life (version {expected}) landed: {row:?}"),
        }
        let alter = Alteration {
            next: 1,
            max: before.max,
            block: before.block,
            failover_skip: before.failover_skip,
            failover_skip_set: before.failover_skip_set,
        };
        match store.alter_if_version("life", &alter, expected).await {
            Ok(Put::Conflict(row)) => assert_eq!(row, before),
            Ok(Put::Done(row)) => panic!("an alteration of the old life landed: {row:?}"),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(store.read_sequence("life").await.unwrap().unwrap(), before);
}

/// A lease of one life released into the next: [`Error::Dropped`], and the
/// new life's row is unchanged; its next reservation repeats nothing.
pub async fn a_lease_of_an_earlier_life_is_refused(store: Arc<dyn Store>) {
    store
        .create_sequence(&spec("leased", 1, 1000))
        .await
        .unwrap();
    let budget = Duration::from_secs(5);
    let old = lease::lease(store.clone(), "leased", 10, Strategy::Optimistic, budget)
        .await
        .unwrap();
    store.drop_sequence("leased").await.unwrap();
    store.create_sequence(&below("leased")).await.unwrap();
    let new = lease::lease(store.clone(), "leased", 10, Strategy::Optimistic, budget)
        .await
        .unwrap();
    assert!(new.incarnation > old.incarnation, "{new:?} {old:?}");
    let before = store.read_sequence("leased").await.unwrap().unwrap();
    let e = lease::release(&*store, &old, old.start).await.unwrap_err();
    assert!(matches!(e, Error::Dropped { held: "lease", .. }), "{e}");
    assert!(e.to_string().contains("dropped and created again"), "{e}");
    assert_eq!(
        store.read_sequence("leased").await.unwrap().unwrap(),
        before
    );
    // The current life's own lease still goes back.
    let back = lease::release(&*store, &new, new.start).await.unwrap();
    assert_eq!(back, Some(new.start..new.end));
}

/// A handle of one life, after a drop and a create: its next store contact
/// fails with [`Error::Dropped`], it serves nothing more (its spare values
/// neither), writes nothing into the new life (no reservation, no counts at
/// close), and keeps failing.
pub async fn a_handle_of_an_earlier_life_stops_at_its_next_reservation(store: Arc<dyn Store>) {
    for strategy in [Strategy::Optimistic, Strategy::Locked, Strategy::Atomic] {
        let name = format!("handle-{strategy}");
        store.create_sequence(&spec(&name, 1, 1000)).await.unwrap();
        let old = Sequence::builder()
            .store(store.clone())
            .name(name.as_str())
            .block(5)
            .prefetch(0.0)
            .strategy(strategy)
            .build()
            .await
            .unwrap();
        let first = old.next().await.unwrap();
        store.drop_sequence(&name).await.unwrap();
        store.create_sequence(&below(&name)).await.unwrap();
        let before = store.read_sequence(&name).await.unwrap().unwrap();
        // The rest of the block it holds (of the old life, below the
        // tombstone's version), then the reservation that finds the drop.
        let mut seen = vec![first];
        let e = loop {
            match old.next().await {
                Ok(v) => {
                    seen.push(v);
                    assert!(seen.len() <= 5, "served past its block: {seen:?}");
                }
                Err(e) => break e,
            }
        };
        assert!(matches!(e, Error::Dropped { held: "handle", .. }), "{e}");
        assert!(matches!(old.next().await, Err(Error::Dropped { .. })));
        assert!(matches!(old.next_n(3).await, Err(Error::Dropped { .. })));
        assert_eq!(old.close().await.unwrap(), None);
        // Optimistic writes carry versions of the old life; locked and
        // atomic ones reserve in the handle's life only
        // (`reserve_locked_in`, `reserve_atomic_in`).
        let after = store.read_sequence(&name).await.unwrap().unwrap();
        assert_eq!(after, before, "{strategy}: the old handle wrote");
        let (_, counts) = store.read_counts(&name).await.unwrap();
        assert_eq!(
            counts.handed_out, 0,
            "{strategy}: old counts in the new life"
        );
        assert_eq!(
            counts.abandoned, 0,
            "{strategy}: old counts in the new life"
        );
        // A handle of the new life hands out what the old one never saw
        // from the new life.
        let new = Sequence::builder()
            .store(store.clone())
            .name(name.as_str())
            .build()
            .await
            .unwrap();
        new.next().await.unwrap();
        new.close().await.unwrap();
    }
}

/// A handle closed after a drop and create hands nothing back into the new
/// life and records no counts there.
pub async fn closing_a_handle_of_an_earlier_life_writes_nothing(store: Arc<dyn Store>) {
    store
        .create_sequence(&spec("closing", 1, 1000))
        .await
        .unwrap();
    let old = Sequence::builder()
        .store(store.clone())
        .name("closing")
        .block(10)
        .prefetch(0.0)
        .build()
        .await
        .unwrap();
    old.next().await.unwrap();
    store.drop_sequence("closing").await.unwrap();
    store.create_sequence(&below("closing")).await.unwrap();
    let before = store.read_sequence("closing").await.unwrap().unwrap();
    // Its tail would fit the new life's rows; the version of the old life
    // keeps it out.
    assert_eq!(old.close().await.unwrap(), None);
    let (after, counts) = store.read_counts("closing").await.unwrap();
    assert_eq!(after, before);
    assert_eq!(
        (counts.handed_out, counts.handed_back, counts.abandoned),
        (0, 0, 0),
        "a closed handle of the old life wrote counts into the new one"
    );
}

/// One tombstone per name, whatever its kind: a pool created under a
/// dropped sequence's name starts above every value it handed out, a
/// sequence under a dropped pool's name above the pool's members, and each
/// life's incarnation is above the last.
pub async fn one_tombstone_per_name_across_kinds(store: Arc<dyn Store>) {
    store
        .create_sequence(&spec("kinds", 1, 1000))
        .await
        .unwrap();
    let r = store.reserve_locked("kinds", 100).await.unwrap();
    let seq_row = store.read_sequence("kinds").await.unwrap().unwrap();
    store.drop_sequence("kinds").await.unwrap();
    let p = pool::create(&*store, &pool_spec("kinds", 1, 5))
        .await
        .unwrap()
        .row;
    assert!(
        p.start >= r.end,
        "a pool under a dropped sequence's name starts at {} though the sequence handed out up to {}",
        p.start,
        r.end - 1
    );
    let stored = store.read_pool("kinds").await.unwrap().unwrap();
    assert!(
        stored.incarnation > seq_row.version,
        "{stored:?} {seq_row:?}"
    );
    let top = *pool::members(&*store, "kinds")
        .await
        .unwrap()
        .last()
        .unwrap();
    store.drop_pool("kinds").await.unwrap();
    let again = store
        .create_sequence(&spec("kinds", 1, 1000))
        .await
        .unwrap();
    assert!(
        again.start >= top,
        "a sequence under a dropped pool's name starts at {} below its member {top}",
        again.start
    );
    assert!(
        again.incarnation > stored.incarnation,
        "{again:?} {stored:?}"
    );
}

/// A pool handle of one life, after a drop and a create of another size:
/// its next take fails with [`Error::Dropped`] and swaps nothing in the new
/// pool (its members are as created), whatever it sampled; a handle of the
/// new life takes as usual.
pub async fn a_pool_handle_of_an_earlier_life_takes_nothing_from_the_next(store: Arc<dyn Store>) {
    pool::create(&*store, &pool_spec("lives-pool", 1, 3))
        .await
        .unwrap();
    let old = pool::ValuePool::builder()
        .store(store.clone())
        .name("lives-pool")
        .build()
        .await
        .unwrap();
    old.take().await.unwrap();
    store.drop_pool("lives-pool").await.unwrap();
    let again = crate::store::PoolSpec {
        start_below_dropped: true,
        ..pool_spec("lives-pool", 1, 5)
    };
    pool::create(&*store, &again).await.unwrap();
    let before = pool::members(&*store, "lives-pool").await.unwrap();
    let e = old.take().await.unwrap_err();
    assert!(matches!(e, Error::Dropped { kind: "pool", .. }), "{e}");
    assert_eq!(pool::members(&*store, "lives-pool").await.unwrap(), before);
    let new = pool::ValuePool::builder()
        .store(store.clone())
        .name("lives-pool")
        .build()
        .await
        .unwrap();
    let v = new.take().await.unwrap();
    assert!(before.contains(&v), "{v} {before:?}");
}

/// A numbered sequence's handle of an earlier life reserves and takes
/// nothing from the next, and its tickets are refused there as
/// [`Error::Dropped`], by any handle: the next life's counters and open
/// numbers are as its own calls left them.
pub async fn numbered_handles_and_tickets_of_an_earlier_life_are_refused(store: Arc<dyn Store>) {
    use crate::numbers::{self, Numbers};
    use crate::store::Numbering;
    let ttl = Duration::from_secs(300);
    let gapless = Numbering {
        gapless: true,
        ..Numbering::default()
    };
    let counted = Numbering {
        template: Some("N-{n}".into()),
        ..Numbering::default()
    };
    for (name, numbering) in [("life-g", &gapless), ("life-c", &counted)] {
        numbers::create(&*store, &spec(name, 1, 1_000_000), numbering)
            .await
            .unwrap();
    }
    let old_g = Numbers::open(store.clone(), "life-g").await.unwrap();
    let old_c = Numbers::open(store.clone(), "life-c").await.unwrap();
    let open_ticket = old_g.take(ttl).await.unwrap().ticket;
    assert_eq!(open_ticket.life(), 1, "{open_ticket}");
    let committed = old_g.take(ttl).await.unwrap().ticket;
    old_g.commit_ticket(&committed).await.unwrap();
    assert_eq!(old_c.next_n(5).await.unwrap().len(), 5);

    for (name, numbering) in [("life-g", &gapless), ("life-c", &counted)] {
        store.drop_sequence(name).await.unwrap();
        numbers::create(&*store, &below(name), numbering)
            .await
            .unwrap();
    }
    let new_g = Numbers::open(store.clone(), "life-g").await.unwrap();
    let new_c = Numbers::open(store.clone(), "life-c").await.unwrap();
    let first = new_g.take(ttl).await.unwrap();
    assert!(first.ticket.life() > 1, "{}", first.ticket);
    let text = first.ticket.to_string();
    assert_eq!(
        text.parse::<crate::numbers::Ticket>().unwrap(),
        first.ticket
    );
    assert!(
        text.ends_with(&format!("-{}", first.ticket.life())),
        "{text}"
    );
    let taken_c = new_c.next_n(2).await.unwrap();

    let dropped = |r: crate::Result<_>, what: &str| match r {
        Err(Error::Dropped { .. }) => {}
        other => panic!("{what}: expected Dropped, got {other:?}"),
    };
    dropped(
        old_g.take(ttl).await.map(|_| ()),
        "a take by the old handle",
    );
    dropped(
        old_c.next_n(3).await.map(|_| ()),
        "next_n by the old handle",
    );
    dropped(
        old_g.commit_ticket(&open_ticket).await.map(|_| ()),
        "the old handle committing its open ticket",
    );
    dropped(
        new_g.release_ticket(&open_ticket).await.map(|_| ()),
        "the new handle releasing a ticket of the old life",
    );
    dropped(
        new_g.commit_ticket(&committed).await.map(|_| ()),
        "the new handle committing a ticket of the old life",
    );

    // The next life is as its own calls left it: its one open number is
    // still held (taking again gives the next one), and its counted
    // sequence continues right after what it handed out.
    let second = new_g.take(ttl).await.unwrap();
    assert_eq!(second.number.n, first.number.n + 1);
    new_g.commit_ticket(&first.ticket).await.unwrap();
    let after = new_c.next_n(1).await.unwrap();
    assert_eq!(
        after[0].number.n,
        taken_c[1].number.n + 1,
        "{taken_c:?} then {after:?}"
    );
}

/// Counts of an earlier life (a close or a lease's hand-back that raced a
/// drop and create) are refused and added to nothing: the next life's
/// counts are only its own.
pub async fn counts_of_an_earlier_life_are_not_added_to_the_next(store: Arc<dyn Store>) {
    use crate::store::{CountsDelta, SequenceCounts};
    let old = store
        .create_sequence(&spec("life-n", 1, 1000))
        .await
        .unwrap();
    store.reserve_locked("life-n", 10).await.unwrap();
    store.drop_sequence("life-n").await.unwrap();
    let new = store.create_sequence(&below("life-n")).await.unwrap();
    assert_ne!(old.incarnation, new.incarnation);
    let stale = CountsDelta {
        handed_out: 7,
        handed_back: 3,
        incarnation: old.incarnation,
        ..CountsDelta::default()
    };
    match store.record_counts("life-n", &stale, 1_000).await {
        Err(Error::Dropped { .. }) => {}
        other => panic!("counts of the earlier life: expected Dropped, got {other:?}"),
    }
    let (_, counts) = store.read_counts("life-n").await.unwrap();
    assert_eq!(counts, SequenceCounts::default());
    let own = CountsDelta {
        incarnation: new.incarnation,
        ..stale
    };
    store.record_counts("life-n", &own, 1_000).await.unwrap();
    let (_, counts) = store.read_counts("life-n").await.unwrap();
    assert_eq!((counts.handed_out, counts.handed_back), (7, 3));
}

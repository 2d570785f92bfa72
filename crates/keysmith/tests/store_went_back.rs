//! The store goes back in time under running handles (issue 24): a handle
//! never hands out a value of a range below what it reserved
//! (`Error::StoreWentBack`), a store in a new generation moves each sequence
//! forward by its failover skip before anything is planned from it, and the
//! operator's `fence` moves sequences forward when nothing could tell.
//!
//! SQLite: a real backup (`VACUUM INTO`) restored into the live file with
//! SQLite's backup API while a handle is open. Memory: a snapshot restored in
//! the same or a new generation. Real failovers of PostgreSQL and etcd are in
//! `crates/keysmith-cli/tests/failover.rs`.

use std::collections::BTreeSet;
use std::sync::Arc;

use keysmith::Error;
use keysmith::fence::{FenceTarget, fence};
use keysmith::sequence::{self, Sequence};
use keysmith::store::memory::MemoryStore;
use keysmith::store::sqlite::SqliteStore;
use keysmith::store::{SequenceSpec, Store};

fn spec(name: &str, block: i64, failover_skip: Option<i64>) -> SequenceSpec {
    SequenceSpec {
        block,
        failover_skip,
        ..SequenceSpec::new(name)
    }
}

async fn handle(store: Arc<dyn Store>, name: &str) -> Sequence {
    Sequence::builder()
        .store(store)
        .name(name)
        .prefetch(0.0)
        .build()
        .await
        .unwrap()
}

/// Takes values until the handle fails; returns them and the error.
async fn take_until_error(seq: &Sequence, at_most: usize) -> (Vec<i64>, Option<Error>) {
    let mut got = Vec::new();
    for _ in 0..at_most {
        match seq.next().await {
            Ok(v) => got.push(v),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

#[tokio::test]
async fn a_restored_sqlite_file_under_a_running_handle_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    let backup = dir.path().join("backup.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    sequence::create(&*store, &spec("s", 10, Some(5)))
        .await
        .unwrap();
    let seq = handle(store.clone(), "s").await;
    let mut seen: Vec<i64> = Vec::new();
    for _ in 0..5 {
        seen.push(seq.next().await.unwrap());
    }
    // The backup holds next = 11: the first block is reserved.
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute("VACUUM INTO ?1", [backup.to_str().unwrap()])
            .unwrap();
    }
    for _ in 0..20 {
        seen.push(seq.next().await.unwrap());
    }
    // The operator restores the backup into the live file.
    {
        let src = rusqlite::Connection::open(&backup).unwrap();
        let mut dst = rusqlite::Connection::open(&path).unwrap();
        let b = rusqlite::backup::Backup::new(&src, &mut dst).unwrap();
        b.run_to_completion(100, std::time::Duration::ZERO, None)
            .unwrap();
    }
    // A copy keeps the store id: no new generation, no skip. The handle
    // serves what its block holds, then refuses the store's stale range.
    let (more, err) = take_until_error(&seq, 100).await;
    seen.extend(more);
    let err = err.expect("the handle must refuse the restored range");
    match &err {
        Error::StoreWentBack {
            kind,
            name,
            held,
            got,
        } => {
            assert_eq!((*kind, name.as_str()), ("sequence", "s"));
            assert_eq!(*held, 31, "three blocks of 10 reserved from 1");
            assert_eq!(*got, 11, "the backup's next");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .contains("fence \"s\" with a skip of at least 21"),
        "{err}"
    );
    assert!(
        !err.to_string().contains("--skip"),
        "no CLI flag in a library error: {err}"
    );
    assert_eq!(
        err.fence_advice(),
        Some(keysmith::FenceAdvice {
            name: "s",
            min_skip: Some(21)
        })
    );
    let unique: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no value twice");
    assert_eq!(seq.stats().store_went_back, 1);
    // Refused again, not handed out, on every try.
    assert!(matches!(seq.next().await, Err(Error::StoreWentBack { .. })));

    // The refused ranges stay reserved in the store (a gap, never handed
    // out): the store's next is past them.
    let before = store.read_sequence("s").await.unwrap().unwrap();
    assert_eq!(before.next, 31);
    // The operator's fence, first as a dry run that writes nothing.
    let plan = fence(&*store, &FenceTarget::One("s".into()), 100, true)
        .await
        .unwrap();
    assert!(plan.dry_run);
    assert_eq!((plan.changes[0].before, plan.changes[0].after), (31, 131));
    assert_eq!(store.read_sequence("s").await.unwrap().unwrap(), before);
    let done = fence(&*store, &FenceTarget::All, 100, false).await.unwrap();
    assert_eq!(done.changes[0].after, 131);
    let (after, err) = take_until_error(&seq, 30).await;
    assert!(err.is_none(), "{err:?}");
    assert!(after.iter().all(|v| *v >= 131), "{after:?}");
    let (_, counts) = store.read_counts("s").await.unwrap();
    assert_eq!(counts.skipped, 100, "the fence counts as skipped");
}

#[tokio::test]
async fn a_new_generation_moves_every_sequence_forward_before_it_plans() {
    let mem = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = mem.clone();
    sequence::create(&*store, &spec("s", 10, Some(1000)))
        .await
        .unwrap();
    let snapshot_taken_early = {
        let seq = handle(store.clone(), "s").await;
        seq.next().await.unwrap();
        let snap = mem.snapshot();
        for _ in 0..30 {
            seq.next().await.unwrap();
        }
        seq.close().await.unwrap();
        snap
    };
    let old_generation = store.generation().await.unwrap();
    // A promoted replica that lacks the last writes: a new generation.
    mem.restore(&snapshot_taken_early, false);
    assert_ne!(store.generation().await.unwrap(), old_generation);
    let seq = handle(store.clone(), "s").await;
    let v = seq.next().await.unwrap();
    assert_eq!(
        v,
        11 + 1000,
        "the replica's next (11) plus the failover skip"
    );
    assert_eq!(seq.stats().skipped_at_failover, 1000);
    let row = store.read_sequence("s").await.unwrap().unwrap();
    assert_eq!(row.failover_skipped, 1000);
    assert_eq!(row.generation, Some(store.generation().await.unwrap()));
    // Once: the next reservation skips nothing more.
    for _ in 0..20 {
        seq.next().await.unwrap();
    }
    assert_eq!(
        store
            .read_sequence("s")
            .await
            .unwrap()
            .unwrap()
            .failover_skipped,
        1000
    );
}

#[tokio::test]
async fn an_optimistic_put_planned_before_a_new_generation_conflicts_and_replans() {
    use keysmith::store::Put;
    let mem = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = mem.clone();
    sequence::create(&*store, &spec("s", 10, Some(500)))
        .await
        .unwrap();
    let snap = mem.snapshot();
    let stale = store.read_sequence("s").await.unwrap().unwrap();
    mem.restore(&snap, false);
    // Planned from the old generation's row: refused, and the row that comes
    // back is the fenced one.
    match store
        .put_if_version("s", stale.next + 10, stale.version)
        .await
        .unwrap()
    {
        Put::Conflict(now) => {
            assert_eq!(now.next, stale.next + 500);
            assert_eq!(
                now.version,
                stale.version + keysmith::store::FENCE_VERSION_STEP
            );
        }
        other => panic!("{other:?}"),
    }
    // A handle with the optimistic strategy gets values above the skip.
    let seq = Sequence::builder()
        .store(store.clone())
        .name("s")
        .strategy(keysmith::sequence::Strategy::Optimistic)
        .build()
        .await
        .unwrap();
    assert!(seq.next().await.unwrap() >= stale.next + 500);
}

#[tokio::test]
async fn fence_checks_its_input_and_changes_nothing_on_error() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    sequence::create(&*store, &spec("s", 10, None))
        .await
        .unwrap();
    let before = store.read_sequence("s").await.unwrap();
    for skip in [0, -1, keysmith::store::MAX_RESERVATION + 1] {
        let e = fence(&*store, &FenceTarget::All, skip, false)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("skip must be"), "{e}");
    }
    let e = fence(&*store, &FenceTarget::One("nope".into()), 5, false)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert_eq!(store.read_sequence("s").await.unwrap(), before);
    // Near the maximum the fence stops at max + 1: exhausted, not wrapped.
    sequence::create(
        &*store,
        &SequenceSpec {
            max: 20,
            ..spec("small", 5, None)
        },
    )
    .await
    .unwrap();
    let r = fence(&*store, &FenceTarget::One("small".into()), 1000, false)
        .await
        .unwrap();
    assert_eq!(r.changes[0].after, 21);
    let seq = handle(store.clone(), "small").await;
    assert!(matches!(seq.next().await, Err(Error::Exhausted { .. })));
}

/// Numbered sequences in a new generation: a counted one skips its failover
/// skip in the current period (a period counter never repeats a number); a
/// gap-free one is refused (`FenceNeeded`) until the operator fences it by
/// name, with 0 when no committed number was lost.
#[tokio::test]
async fn numbered_sequences_skip_or_wait_for_the_operator() {
    use keysmith::numbers::{self, Numbers};
    use keysmith::store::Numbering;
    let mem = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = mem.clone();
    let counted = Numbering::default();
    let gapless = Numbering {
        gapless: true,
        ..counted.clone()
    };
    numbers::create(&*store, &spec("inv", 10, Some(100)), &counted)
        .await
        .unwrap();
    numbers::create(&*store, &spec("gf", 10, Some(100)), &gapless)
        .await
        .unwrap();
    let inv = Numbers::open(store.clone(), "inv").await.unwrap();
    let gf = Numbers::open(store.clone(), "gf").await.unwrap();
    let texts = |v: Vec<keysmith::numbers::Formatted>| -> Vec<String> {
        v.into_iter().map(|f| f.text).collect()
    };
    let ttl = std::time::Duration::from_secs(60);
    assert_eq!(texts(inv.next_n(3).await.unwrap()), ["1", "2", "3"]);
    let t1 = gf.take(ttl).await.unwrap();
    gf.commit(&t1.ticket.to_string()).await.unwrap();
    let snap = mem.snapshot();
    assert_eq!(texts(inv.next_n(2).await.unwrap()), ["4", "5"]);
    let t2 = gf.take(ttl).await.unwrap();
    assert_eq!(t2.ticket.value, 2);
    gf.commit_ticket(&t2.ticket).await.unwrap();
    // A replica that lacks the last writes is promoted.
    mem.restore(&snap, false);
    assert_eq!(
        texts(inv.next_n(1).await.unwrap()),
        ["104"],
        "4 plus the failover skip: 4 and 5 never again"
    );
    let e = gf.take(ttl).await.unwrap_err();
    assert!(matches!(e, Error::FenceNeeded { .. }), "{e}");
    assert!(e.to_string().contains("fences \"gf\" with a skip"), "{e}");
    assert_eq!(
        e.fence_advice(),
        Some(keysmith::FenceAdvice {
            name: "gf",
            min_skip: None
        })
    );
    // Refused again, and nothing changed.
    assert!(matches!(gf.take(ttl).await, Err(Error::FenceNeeded { .. })));
    // `--all` leaves the gap-free one alone; by name, 1 lost number is skipped.
    let all = fence(&*store, &FenceTarget::All, 10, false).await.unwrap();
    assert!(
        all.left_alone.iter().any(|w| w.contains("\"gf\"")),
        "{all:?}"
    );
    let r = fence(&*store, &FenceTarget::One("gf".into()), 1, false)
        .await
        .unwrap();
    assert_eq!((r.changes[0].before, r.changes[0].after), (2, 3));
    let t3 = gf.take(ttl).await.unwrap();
    assert_eq!(
        t3.ticket.value, 3,
        "the number committed on the lost primary is skipped"
    );
}

/// Pools: a handle refuses a number at or below one it took from the same
/// slot (a restore within the generation); in a new generation the first
/// swap moves every member forward by whole rounds and takes go on above;
/// the operator's fence moves pools too.
#[tokio::test]
async fn pools_refuse_what_they_took_and_move_forward_in_a_new_generation() {
    use keysmith::pool;
    use keysmith::store::{PoolSpec, pool_fence_rounds};
    let mem = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = mem.clone();
    pool::create(&*store, &PoolSpec::new("p", 4)).await.unwrap();
    let open = || open_pool(&store, "p");
    let h = open().await;
    let snap = mem.snapshot();
    let taken = take_from_every_slot(&h, |v| (v - 1) % 4).await;
    // The same generation, older members: the handle refuses every one.
    mem.restore(&snap, true);
    let e = h.take().await.unwrap_err();
    assert!(
        matches!(e, Error::StoreWentBack { kind: "pool", .. }),
        "{e}"
    );
    // A new generation: the first swap fences, every member moves forward.
    mem.restore(&snap, false);
    let fresh = open().await;
    let v = fresh.take().await.unwrap();
    let moved = pool_fence_rounds(4) * 4;
    assert!(v > moved, "{v}: members moved by {moved}");
    assert!(!taken.contains(&v));
    let row = store.read_pool("p").await.unwrap().unwrap();
    assert_eq!(row.generation, Some(store.generation().await.unwrap()));
    // The operator's fence by name moves the pool by whole rounds.
    let before = store.list_members("p").await.unwrap();
    let r = fence(&*store, &FenceTarget::One("p".into()), 10, false)
        .await
        .unwrap();
    assert_eq!((r.changes[0].kind, r.changes[0].after), ("pool", 12));
    let after = store.list_members("p").await.unwrap();
    assert_eq!(after, before.iter().map(|v| v + 12).collect::<Vec<_>>());
}

/// A pool in a residue class (values 2 mod 3): a restore within the
/// generation is refused with values of the class in the error; in a new
/// generation takes go on above, in the class; the operator's fence reports
/// how far every member moved in values (whole rounds times the increment).
#[tokio::test]
async fn a_pool_in_a_residue_class_is_refused_and_fenced_in_values() {
    use keysmith::pool;
    use keysmith::store::{PoolSpec, Residue};
    let mem = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = mem.clone();
    let spec = PoolSpec {
        start: 0,
        residue: Some(Residue {
            increment: 3,
            offset: 2,
        }),
        ..PoolSpec::new("rp", 4)
    };
    pool::create(&*store, &spec).await.unwrap();
    let open = || open_pool(&store, "rp");
    let h = open().await;
    let snap = mem.snapshot();
    // Value 2 + 3 * s is in slot s mod 4.
    let taken = take_from_every_slot(&h, |v| (v - 2) / 3 % 4).await;
    assert!(taken.iter().all(|v| v.rem_euclid(3) == 2), "{taken:?}");
    mem.restore(&snap, true);
    match h.take().await.unwrap_err() {
        Error::StoreWentBack {
            kind, held, got, ..
        } => {
            assert_eq!(kind, "pool");
            assert!(held.rem_euclid(3) == 2 && got.rem_euclid(3) == 2 && got <= held);
        }
        e => panic!("{e}"),
    }
    mem.restore(&snap, false);
    let fresh = open().await;
    let v = fresh.take().await.unwrap();
    assert!(v.rem_euclid(3) == 2 && !taken.contains(&v), "{v}");
    let before = pool::members(&*store, "rp").await.unwrap();
    let r = fence(&*store, &FenceTarget::One("rp".into()), 10, false)
        .await
        .unwrap();
    assert_eq!((r.changes[0].kind, r.changes[0].after), ("pool", 36));
    let after = pool::members(&*store, "rp").await.unwrap();
    assert_eq!(after, before.iter().map(|v| v + 36).collect::<Vec<_>>());
}

/// Worker-id leases: in a new generation, an acquisition starts its holder
/// `WORKER_FAILOVER_SKIP_MS` past the floor the replica knew (a holder that
/// renewed on the lost store moved it by at most the lag), and the old
/// holder's renewal and release are refused: its lease is lost.
#[tokio::test]
async fn worker_floors_move_forward_and_old_leases_are_lost_in_a_new_generation() {
    use keysmith::store::{WORKER_FAILOVER_SKIP_MS, WorkerClaim};
    use std::time::Duration;
    let mem = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = mem.clone();
    let claim = |now_ms: i64| WorkerClaim {
        group: "g".into(),
        max_workers: 1,
        holder: "test".into(),
        ttl: Duration::from_millis(1),
        now_ms,
        window_ms: 1000,
    };
    let first = store.acquire_worker(&claim(10_000)).await.unwrap();
    assert_eq!((first.start_ms, first.until_ms), (10_000, 11_000));
    let snap = mem.snapshot();
    // The holder renews on the store that will be lost.
    let until = store
        .renew_worker("g", 0, first.fence, Duration::from_secs(60), 20_000, 1000)
        .await
        .unwrap();
    assert_eq!(until, Some(21_000));
    mem.restore(&snap, false);
    // The old holder's renewal is refused in the new generation.
    assert_eq!(
        store
            .renew_worker("g", 0, first.fence, Duration::from_secs(60), 21_000, 1000)
            .await
            .unwrap(),
        None
    );
    assert!(!store.release_worker("g", 0, first.fence, 0).await.unwrap());
    // Once its short lease expired on the replica, the worker id is taken
    // again, starting past the replica's floor by the skip: above the 21 000
    // the lost store had reached.
    let second = loop {
        match store.acquire_worker(&claim(12_000)).await {
            Ok(l) => break l,
            Err(Error::IdsUnavailable(_)) => tokio::task::yield_now().await,
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(second.start_ms, 12_000 + WORKER_FAILOVER_SKIP_MS);
    assert!(second.start_ms > 21_000);
    // The generation is recorded: the next acquisition skips nothing more.
    assert!(
        store
            .release_worker("g", 0, second.fence, second.start_ms)
            .await
            .unwrap()
    );
    let third = store.acquire_worker(&claim(0)).await.unwrap();
    assert_eq!(third.start_ms, second.start_ms);
}

/// A handle of pool `name`.
async fn open_pool(store: &Arc<dyn Store>, name: &str) -> keysmith::pool::ValuePool {
    keysmith::pool::ValuePool::builder()
        .store(store.clone())
        .name(name)
        .build()
        .await
        .unwrap()
}

/// Takes from a pool of 4 members until every slot (`slot_of` a number)
/// was taken from at least once; every number is new.
async fn take_from_every_slot(
    h: &keysmith::pool::ValuePool,
    slot_of: impl Fn(i64) -> i64,
) -> BTreeSet<i64> {
    let mut taken = BTreeSet::new();
    while taken
        .iter()
        .map(|v| slot_of(*v))
        .collect::<BTreeSet<_>>()
        .len()
        < 4
    {
        assert!(taken.insert(h.take().await.unwrap()));
    }
    taken
}

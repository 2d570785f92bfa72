//! A `next()` that fails or is dropped at a block boundary loses nothing
//! (issue 19): the value after the last one handed out is the next one
//! handed out, with one caller, with dropped futures piling up at the
//! boundary, with tasks aborted at random on threads, and with refills
//! failing under threads. On the in-memory store behind [`faulty::Faulty`],
//! which fails or holds reservations on demand.

mod faulty;
mod pass_through;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use faulty::{Faulty, poll_once};
use keysmith::Error;
use keysmith::sequence::{self, Sequence};
use keysmith::store::{MAX_VALUE, SequenceSpec, Store, memory::MemoryStore};

async fn setup(block: i64) -> (Arc<Faulty>, Sequence) {
    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let spec = SequenceSpec {
        name: "s".into(),
        start: 1,
        max: MAX_VALUE,
        block,
        failover_skip: None,
        start_below_dropped: false,
    };
    sequence::create(&*inner, &spec).await.unwrap();
    let store = Faulty::new(inner);
    let seq = Sequence::builder()
        .store(store.clone())
        .name("s")
        .prefetch(0.0)
        .build()
        .await
        .unwrap();
    (store, seq)
}

/// Closes the handle and checks that what was handed out plus what went
/// back is every value the sequence ever reserved, each once.
async fn assert_nothing_lost(store: &Faulty, seq: &Sequence, got: &[i64]) {
    let set: BTreeSet<i64> = got.iter().copied().collect();
    assert_eq!(set.len(), got.len(), "a value was handed out twice");
    seq.close().await.unwrap();
    let next = store.inner.read_sequence("s").await.unwrap().unwrap().next;
    let lost: Vec<i64> = (1..next).filter(|v| !set.contains(v)).take(10).collect();
    assert!(lost.is_empty(), "values lost: {lost:?}");
    assert!(set.iter().all(|&v| v < next), "a value outside the blocks");
}

#[tokio::test]
async fn a_next_dropped_at_a_block_boundary_loses_nothing() {
    let (store, seq) = setup(2).await;
    assert_eq!(seq.next().await.unwrap(), 1);
    assert_eq!(seq.next().await.unwrap(), 2);
    store.hold.store(true, SeqCst);
    // The block is used up: the call waits for the store, and is dropped.
    assert!(poll_once(seq.next()).is_none(), "it waits for the store");
    // Several more, all pending at once (one in the store, the others on
    // the refill), then all dropped.
    let mut pending: Vec<_> = (0..8).map(|_| Box::pin(seq.next())).collect();
    for f in &mut pending {
        assert!(poll_once(f.as_mut()).is_none());
    }
    drop(pending);
    store.hold.store(false, SeqCst);
    assert_eq!(
        seq.next().await.unwrap(),
        3,
        "the dropped calls took nothing"
    );
    assert_eq!(seq.next().await.unwrap(), 4);
    assert_nothing_lost(&store, &seq, &[1, 2, 3, 4]).await;
}

#[tokio::test]
async fn a_next_whose_refill_fails_loses_nothing() {
    let (store, seq) = setup(3).await;
    let mut got = vec![];
    for _ in 0..3 {
        got.push(seq.next().await.unwrap());
    }
    store.fail.store(true, SeqCst);
    for _ in 0..3 {
        assert!(matches!(seq.next().await, Err(Error::Unavailable(_))));
    }
    store.fail.store(false, SeqCst);
    assert_eq!(
        seq.next().await.unwrap(),
        4,
        "the failed calls took nothing"
    );
    got.push(4);
    assert_nothing_lost(&store, &seq, &got).await;
}

#[tokio::test]
async fn a_next_n_dropped_or_failing_after_taking_the_rest_loses_nothing() {
    let (store, seq) = setup(4).await;
    assert_eq!(seq.next().await.unwrap(), 1);
    store.hold.store(true, SeqCst);
    // Takes 2..5, then waits for the store for the rest: dropped.
    assert!(poll_once(seq.next_n(6)).is_none());
    store.hold.store(false, SeqCst);
    store.fail.store(true, SeqCst);
    assert!(seq.next_n(6).await.is_err());
    store.fail.store(false, SeqCst);
    assert_eq!(
        seq.next().await.unwrap(),
        2,
        "the rest went back both times"
    );
    assert_eq!(seq.next_n(3).await.unwrap(), vec![3, 4, 5]);
    assert_nothing_lost(&store, &seq, &[1, 2, 3, 4, 5]).await;
}

/// Tasks on two worker threads call `next()` on tiny blocks; every other
/// task is aborted as soon as it is spawned, wherever it is (before its
/// first poll, waiting for the refill mutex, or in the store, which yields
/// once per reservation). Each value is recorded as soon as `next()`
/// returns it (no await in between, so an abort cannot come between).
/// Nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_aborted_nexts_racing_lose_nothing() {
    let (store, seq) = setup(3).await;
    store.yield_first.store(true, SeqCst);
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut aborted_unfinished = 0;
    for _round in 0..200 {
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (seq, got) = (seq.clone(), got.clone());
                tokio::spawn(async move {
                    for _ in 0..4 {
                        let v = seq.next().await.unwrap();
                        got.lock().unwrap().push(v);
                    }
                })
            })
            .collect();
        for (i, t) in tasks.iter().enumerate() {
            if i % 2 == 1 {
                t.abort();
            }
        }
        for t in tasks {
            match t.await {
                Ok(()) => {}
                Err(e) if e.is_cancelled() => aborted_unfinished += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(aborted_unfinished > 0, "no task was aborted mid-way");
    let got = got.lock().unwrap().clone();
    assert_nothing_lost(&store, &seq, &got).await;
}

/// Threads on one blocking handle with tiny blocks, one reservation in
/// three failing: callers retry after an error. Nothing is lost.
#[test]
fn threads_with_failing_refills_lose_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (store, seq) = rt.block_on(setup(2));
    store.fail_every.store(3, SeqCst);
    let got: Vec<i64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let seq = seq.clone();
                let rt = rt.handle().clone();
                s.spawn(move || {
                    let mut got = Vec::new();
                    let mut failures = 0;
                    while got.len() < 3_000 {
                        match rt.block_on(seq.next()) {
                            Ok(v) => got.push(v),
                            Err(Error::Unavailable(_)) => failures += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    assert!(got.windows(2).all(|w| w[0] < w[1]), "per-thread order");
                    (got, failures)
                })
            })
            .collect();
        let mut all = Vec::new();
        let mut failures = 0;
        for h in hs {
            let (g, f) = h.join().unwrap();
            all.extend(g);
            failures += f;
        }
        assert!(failures > 0, "no refill failed");
        all
    });
    store.fail_every.store(0, SeqCst);
    rt.block_on(assert_nothing_lost(&store, &seq, &got));
}

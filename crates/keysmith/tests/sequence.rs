//! Sequence handles over real stores: uniqueness across threads and handles,
//! per-handle order, strict mode, hand-back on close, exhaustion.

use std::collections::HashSet;
use std::sync::Arc;

use keysmith::Error;
use keysmith::sequence::{self, Sequence, Strategy};
use keysmith::store::{MAX_VALUE, SequenceSpec, Store, memory::MemoryStore, sqlite::SqliteStore};

async fn sqlite() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("k.db")).await.unwrap();
    (dir, Arc::new(store))
}

async fn create(store: &Arc<dyn Store>, name: &str, start: i64, max: i64, block: i64) {
    let spec = SequenceSpec {
        name: name.into(),
        start,
        max,
        block,
    };
    sequence::create(&**store, &spec).await.unwrap();
}

fn assert_increasing(values: &[i64], what: &str) {
    for w in values.windows(2) {
        assert!(w[0] < w[1], "{what}: {} then {}", w[0], w[1]);
    }
}

/// 8 threads on one handle and 4 handles in one process, each strategy: all
/// values unique, each thread's values increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn threads_and_handles_never_share_a_value() {
    let (_dir, store) = sqlite().await;
    for strategy in [Strategy::Optimistic, Strategy::Locked, Strategy::Atomic] {
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
            for t in 0..8 {
                let seq = seq.clone();
                tasks.push(tokio::spawn(async move {
                    let mut got = Vec::new();
                    for i in 0..150 {
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
        let mut total = 0;
        for t in tasks {
            let got = t.await.unwrap();
            assert_increasing(&got, "one task on one handle");
            total += got.len();
            all.extend(got);
        }
        assert_eq!(all.len(), total, "{strategy}: a value was handed out twice");
    }
}

/// The blocking facade, shared by OS threads.
#[test]
fn blocking_handle_shared_by_threads() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("k.db").display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt.block_on(keysmith::store::open(&url)).unwrap();
    rt.block_on(create(&store, "b", 1, MAX_VALUE, 16));
    drop(rt);
    let seq = Arc::new(
        Sequence::builder()
            .store(store)
            .name("b")
            .build_blocking()
            .unwrap(),
    );
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let seq = seq.clone();
            std::thread::spawn(move || (0..500).map(|_| seq.next().unwrap()).collect::<Vec<_>>())
        })
        .collect();
    let mut all = HashSet::new();
    for t in threads {
        let got = t.join().unwrap();
        assert_increasing(&got, "one thread");
        all.extend(got);
    }
    assert_eq!(all.len(), 8 * 500);
}

/// Strict mode: values of all handles increase in the order they are taken.
#[tokio::test]
async fn strict_handles_increase_in_time_order() {
    let (_dir, store) = sqlite().await;
    create(&store, "strict", 1, MAX_VALUE, 100).await;
    let mut handles = Vec::new();
    for strategy in [Strategy::Optimistic, Strategy::Locked, Strategy::Atomic] {
        let b = Sequence::builder()
            .store(store.clone())
            .name("strict")
            .block(1);
        handles.push(b.strategy(strategy).build().await.unwrap());
    }
    let mut seen = Vec::new();
    for i in 0..60 {
        seen.push(handles[i % 3].next().await.unwrap());
    }
    assert_eq!(
        seen,
        (1..=60).collect::<Vec<_>>(),
        "strict values are gap-free and in time order"
    );
}

/// close() hands the tail back when nobody reserved since, else leaves a gap.
#[tokio::test]
async fn close_hands_back_the_tail_only_when_untouched() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
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
    assert_eq!(store.read("c").await.unwrap().unwrap().next, 4);

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
    assert_eq!(store.read("c").await.unwrap().unwrap().next, 16);
}

/// With prefetch, close hands back the spare block and the current tail when
/// they are contiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_with_a_spare_block_hands_back_both() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    create(&store, "p", 1, MAX_VALUE, 10).await;
    let a = Sequence::builder()
        .store(store.clone())
        .name("p")
        .build()
        .await
        .unwrap();
    let got = a.next_n(9).await.unwrap();
    assert_eq!(got, (1..=9).collect::<Vec<_>>());
    // The prefetch started at value 9; wait until it is in the store.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.read("p").await.unwrap().unwrap().next != 21 {
        assert!(
            std::time::Instant::now() < deadline,
            "prefetch never happened"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(a.close().await.unwrap(), Some(10..21));
    assert_eq!(store.read("p").await.unwrap().unwrap().next, 10);
}

#[tokio::test]
async fn exhaustion_is_an_error_never_a_wrap() {
    for strategy in [Strategy::Optimistic, Strategy::Locked, Strategy::Atomic] {
        let (_dir, store) = sqlite().await;
        create(&store, "e", MAX_VALUE - 9, MAX_VALUE, 4).await;
        let seq = Sequence::builder()
            .store(store.clone())
            .name("e")
            .strategy(strategy);
        let seq = seq.build().await.unwrap();
        let got = seq.next_n(10).await.unwrap();
        assert_eq!(got, (MAX_VALUE - 9..=MAX_VALUE).collect::<Vec<_>>());
        let e = seq.next().await.unwrap_err();
        assert!(matches!(e, Error::Exhausted { .. }), "{strategy}: {e}");
        assert!(
            e.to_string().contains("\"e\""),
            "the error names the sequence: {e}"
        );
    }
}

#[tokio::test]
async fn missing_sequence_is_not_created_and_names_the_closest() {
    let (_dir, store) = sqlite().await;
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
    assert_eq!(store.list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn bad_arguments_are_rejected_before_the_store() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    create(&store, "s", 1, 100, 10).await;
    let b = || Sequence::builder().store(store.clone()).name("s");
    for e in [
        b().block(0).build().await.unwrap_err(),
        b().max_attempts(0).build().await.unwrap_err(),
        b().prefetch(1.5).build().await.unwrap_err(),
        Sequence::builder().name("s").build().await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    let seq = b().build().await.unwrap();
    for n in [0, -1, keysmith::sequence::MAX_BATCH + 1] {
        assert!(matches!(
            seq.next_n(n).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    assert_eq!(
        store.read("s").await.unwrap().unwrap().next,
        1,
        "nothing was reserved"
    );
}

/// Optimistic handles racing on a tiny block: conflicts happen and are
/// retried from the returned row, and nothing is handed out twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn optimistic_conflicts_are_retried() {
    let (dir, store) = sqlite().await;
    create(&store, "o", 1, MAX_VALUE, 1).await;
    let mut tasks = Vec::new();
    for _ in 0..6 {
        // Each handle on its own connection, as separate processes would be.
        let own = SqliteStore::open(dir.path().join("k.db")).await.unwrap();
        let seq = Sequence::builder()
            .store(Arc::new(own))
            .name("o")
            .strategy(Strategy::Optimistic)
            .build()
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..40 {
                got.push(seq.next().await.unwrap());
            }
            (got, seq.stats())
        }));
    }
    let mut all = HashSet::new();
    let mut conflicts = 0;
    for t in tasks {
        let (got, stats) = t.await.unwrap();
        conflicts += stats.conflicts;
        assert_eq!(stats.reservations, 40);
        all.extend(got);
    }
    assert_eq!(all.len(), 6 * 40);
    assert_eq!(
        all,
        (1..=240).collect::<HashSet<_>>(),
        "strict mode leaves no gaps"
    );
    eprintln!("conflicts: {conflicts}");
}

/// After the last attempt loses, the error says so and names the sequence.
#[tokio::test]
async fn contention_is_reported_after_the_last_attempt() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
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
    // The next call starts from the row the conflict returned, and succeeds.
    assert_eq!(loser.next().await.unwrap(), 11);
}

/// Refills that come fast grow the block up to its bound; slow ones shrink it.
#[tokio::test]
async fn adaptive_block_grows_under_load_and_shrinks_when_idle() {
    use keysmith::sequence::Adaptive;
    use std::time::Duration;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    create(&store, "a", 1, MAX_VALUE, 4).await;
    let open = |target: Duration| {
        let a = Adaptive {
            min: 2,
            max: 64,
            target,
        };
        Sequence::builder()
            .store(store.clone())
            .name("a")
            .prefetch(0.0)
            .adaptive(a)
            .build()
    };
    // Every refill comes far sooner than an hour: the block doubles each time.
    let fast = open(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(fast.block(), 4);
    let mut sizes = Vec::new();
    let mut before = store.read("a").await.unwrap().unwrap().next;
    for _ in 0..200 {
        fast.next().await.unwrap();
        let now = store.read("a").await.unwrap().unwrap().next;
        if now != before {
            sizes.push(now - before);
            before = now;
        }
    }
    assert_eq!(sizes[..6], [4, 4, 8, 16, 32, 64]);
    assert!(sizes[6..].iter().all(|&s| s == 64), "bounded: {sizes:?}");
    assert_eq!(fast.stats().block, 64);
    fast.close().await.unwrap();
    // Every refill comes later than a nanosecond target: it shrinks to min.
    let slow = open(Duration::from_nanos(1)).await.unwrap();
    for _ in 0..50 {
        slow.next().await.unwrap();
    }
    assert_eq!(slow.block(), 2);
}

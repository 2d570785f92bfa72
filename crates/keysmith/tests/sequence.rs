//! Sequence handles beyond the conformance suite (`keysmith::store::conformance::handles`,
//! run on every backend): blocking handles, separate connections, bad arguments, adaptive blocks.

use std::collections::HashSet;
use std::sync::Arc;

use keysmith::Error;
use keysmith::sequence::{self, Sequence};
use keysmith::store::{MAX_VALUE, SequenceSpec, Store, memory::MemoryStore, sqlite::SqliteStore};

async fn sqlite() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("k.db")).await.unwrap();
    (dir, Arc::new(store))
}

async fn create(store: &Arc<dyn Store>, name: &str, start: i64, max: i64, block: i64) {
    let spec = SequenceSpec {
        start,
        max,
        block,
        ..SequenceSpec::new(name)
    };
    sequence::create(&**store, &spec).await.unwrap();
}

fn assert_increasing(values: &[i64], what: &str) {
    for w in values.windows(2) {
        assert!(w[0] < w[1], "{what}: {} then {}", w[0], w[1]);
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
        store.read_sequence("s").await.unwrap().unwrap().next,
        1,
        "nothing was reserved"
    );
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
    let mut before = store.read_sequence("a").await.unwrap().unwrap().next;
    for _ in 0..200 {
        fast.next().await.unwrap();
        let now = store.read_sequence("a").await.unwrap().unwrap().next;
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

/// An adaptive policy takes the sequence's own block as its floor, read
/// with the row the builder reads anyway; a strict sequence stays strict;
/// a bad policy is refused before the store is asked.
#[tokio::test]
async fn an_adaptive_policy_floors_at_the_sequences_own_block() {
    use keysmith::sequence::AdaptivePolicy;
    use std::time::Duration;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    create(&store, "big", 1, MAX_VALUE, 500).await;
    create(&store, "strict", 1, MAX_VALUE, 1).await;
    let policy = AdaptivePolicy {
        max: 100,
        target: Duration::from_nanos(1),
    };
    let open = |name: &'static str, policy: AdaptivePolicy| {
        Sequence::builder()
            .store(store.clone())
            .name(name)
            .prefetch(0.0)
            .adaptive_policy(policy)
            .build()
    };
    // Floor 500 (the sequence's block) is above the policy's max: the
    // block stays at 500, however slow the refills.
    let big = open("big", policy).await.unwrap();
    for _ in 0..1200 {
        big.next().await.unwrap();
    }
    assert_eq!(big.block(), 500);
    let strict = open("strict", policy).await.unwrap();
    assert!(strict.is_strict());
    assert_eq!(strict.next().await.unwrap(), 1);
    assert_eq!(
        store.read_sequence("strict").await.unwrap().unwrap().next,
        2
    );
    for bad in [
        AdaptivePolicy { max: 0, ..policy },
        AdaptivePolicy {
            target: Duration::ZERO,
            ..policy
        },
    ] {
        let e = open("big", bad).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
}

/// `create_or_get` creates once; later calls, and racing ones, get the row
/// that is there, whatever its bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn create_or_get_creates_once_and_returns_what_is_there() {
    let (_dir, store) = sqlite().await;
    let spec = SequenceSpec {
        block: 7,
        ..SequenceSpec::new("first-use")
    };
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (store, spec) = (store.clone(), spec.clone());
        tasks.push(tokio::spawn(async move {
            sequence::create_or_get(&*store, &spec).await.unwrap()
        }));
    }
    for t in tasks {
        let row = t.await.unwrap();
        assert_eq!((row.start, row.block, row.version), (1, 7, 1));
    }
    let other = SequenceSpec {
        start: 50,
        ..spec.clone()
    };
    let row = sequence::create_or_get(&*store, &other).await.unwrap();
    assert_eq!(row.start, 1, "the existing row comes back unchanged");
    let bad = SequenceSpec {
        block: 0,
        ..SequenceSpec::new("never")
    };
    assert!(sequence::create_or_get(&*store, &bad).await.is_err());
    assert!(store.read_sequence("never").await.unwrap().is_none());
}

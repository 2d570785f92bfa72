//! ValuePool and the pool admin functions, on real stores (SQLite files and
//! the in-memory store).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use keysmith::Error;
use keysmith::pool::{self, MAX_POOL_SIZE, PoolStats, ValuePool};
use keysmith::sequence::{Sequence, Strategy};
use keysmith::store::{
    Alteration, CountsDelta, PoolRow, PoolSpec, PoolStore, Put, RateMarks, Reservation,
    SequenceCounts, SequenceRow, SequenceSpec, SequenceStore, Store, memory::MemoryStore,
    sqlite::SqliteStore,
};
use keysmith_testsupport::pool_holes;

#[macro_use]
mod pass_through;

fn memory() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

async fn handle(store: &Arc<dyn Store>, name: &str) -> ValuePool {
    ValuePool::builder()
        .store(store.clone())
        .name(name)
        .build()
        .await
        .unwrap()
}

/// The pool's invariants after a run (see `pool_holes`), with no hole.
fn check_invariants(start: i64, size: i64, taken: &[i64], members: &[i64]) {
    let holes = pool_holes(start, size, taken, members);
    assert!(
        holes.is_empty(),
        "holes left by takers that were not killed: {holes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_on_separate_connections_and_one_shared_handle_take_unique_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    let admin: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    pool::create(&*admin, &PoolSpec::new("p", 20))
        .await
        .unwrap();

    let shared = handle(&admin, "p").await;
    let mut tasks = Vec::new();
    for i in 0..12 {
        let path = path.clone();
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move {
            let h = if i % 2 == 0 {
                // Its own connection: a different writer for SQLite.
                let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
                ValuePool::builder()
                    .store(store)
                    .name("p")
                    .reuse_sample(i % 4 == 0)
                    .max_rounds(1_000)
                    .build()
                    .await
                    .unwrap()
            } else {
                shared
            };
            let mut got = Vec::new();
            for _ in 0..40 {
                got.push(h.take().await.unwrap());
            }
            (got, h.stats())
        }));
    }
    let mut taken = Vec::new();
    for t in tasks {
        taken.extend(t.await.unwrap().0);
    }
    assert_eq!(taken.len(), 12 * 40);
    let members = pool::members(&*admin, "p").await.unwrap();
    check_invariants(1, 20, &taken, &members);

    let info = pool::describe(&*admin, "p").await.unwrap();
    assert_eq!(info.taken, 12 * 40);
    assert_eq!(info.row.size, 20);
    let s = shared.stats();
    assert_eq!(
        s.takes,
        6 * 40,
        "the shared handle counts its clones' takes"
    );
    assert_eq!(s.attempts, s.takes + s.conflicts);
}

#[test]
fn os_threads_with_their_own_runtimes_take_unique_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = SqliteStore::open(&path).await.unwrap();
        pool::create(
            &s,
            &PoolSpec {
                start: 0,
                ..PoolSpec::new("p", 7)
            },
        )
        .await
        .unwrap();
    });
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
                    let h = ValuePool::builder()
                        .store(store)
                        .name("p")
                        .max_rounds(1_000)
                        .build()
                        .await
                        .unwrap();
                    h.take_n(25).await.unwrap()
                })
            })
        })
        .collect();
    let taken: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let members = rt.block_on(async {
        let s = SqliteStore::open(&path).await.unwrap();
        pool::members(&s, "p").await.unwrap()
    });
    check_invariants(0, 7, &taken, &members);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_under_many_tasks() {
    let store = memory();
    pool::create(
        &*store,
        &PoolSpec {
            start: 100,
            ..PoolSpec::new("p", 3)
        },
    )
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let h = ValuePool::builder()
            .store(store.clone())
            .name("p")
            .sample(2)
            .max_rounds(10_000)
            .build()
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move { h.take_n(30).await.unwrap() }));
    }
    let mut taken = Vec::new();
    for t in tasks {
        taken.extend(t.await.unwrap());
    }
    let members = pool::members(&*store, "p").await.unwrap();
    check_invariants(100, 3, &taken, &members);
}

#[tokio::test]
async fn a_lone_taker_never_conflicts_and_pays_one_sample_and_one_swap_per_take() {
    let store = memory();
    pool::create(&*store, &PoolSpec::new("p", 10))
        .await
        .unwrap();
    let h = handle(&store, "p").await;
    let got = h.take_n(25).await.unwrap();
    check_invariants(1, 10, &got, &pool::members(&*store, "p").await.unwrap());
    assert_eq!(
        h.stats(),
        PoolStats {
            takes: 25,
            samples: 25,
            attempts: 25,
            conflicts: 0
        }
    );
}

#[tokio::test]
async fn reusing_the_sample_saves_reads() {
    let store = memory();
    pool::create(&*store, &PoolSpec::new("p", 50))
        .await
        .unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("p")
        .sample(5)
        .reuse_sample(true)
        .build()
        .await
        .unwrap();
    let got = h.take_n(10).await.unwrap();
    assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), 10);
    let s = h.stats();
    assert_eq!((s.samples, s.attempts, s.conflicts), (2, 10, 0), "{s:?}");
}

#[tokio::test]
async fn take_each_sees_every_number_as_it_is_taken() {
    let store = memory();
    pool::create(
        &*store,
        &PoolSpec {
            start: 5,
            ..PoolSpec::new("p", 4)
        },
    )
    .await
    .unwrap();
    let h = handle(&store, "p").await;
    let mut seen = Vec::new();
    h.take_each(6, |v| {
        seen.push(v);
        Ok::<_, Error>(())
    })
    .await
    .unwrap();
    assert_eq!(seen.len(), 6);
    check_invariants(5, 4, &seen, &pool::members(&*store, "p").await.unwrap());

    // An error of the callback stops the loop at once.
    let mut calls = 0;
    let e = h
        .take_each(100, |_| {
            calls += 1;
            Err(Error::Unavailable("output closed".into()))
        })
        .await
        .unwrap_err();
    assert_eq!(e, Error::Unavailable("output closed".into()));
    assert_eq!(calls, 1);
    assert_eq!(pool::describe(&*store, "p").await.unwrap().taken, 7);
}

#[tokio::test]
async fn bad_counts_take_nothing() {
    let store = memory();
    pool::create(&*store, &PoolSpec::new("p", 4)).await.unwrap();
    let h = handle(&store, "p").await;
    for n in [0, -1, pool::MAX_BATCH + 1] {
        let e = h.take_n(n).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{n}: {e}");
        assert!(e.to_string().contains("count"), "{e}");
    }
    assert_eq!(pool::describe(&*store, "p").await.unwrap().taken, 0);
    assert_eq!(h.stats(), PoolStats::default());
}

#[tokio::test]
async fn create_checks_its_arguments_and_writes_nothing_on_error() {
    let store = memory();
    let cases: [(&str, i64, i64); 6] = [
        ("", 1, 10),
        ("a b", 1, 10),
        ("p", -1, 10),
        ("p", 1, 0),
        ("p", 1, MAX_POOL_SIZE + 1),
        ("p", i64::MAX - 18, 10),
    ];
    for (name, start, size) in cases {
        let e = pool::create(
            &*store,
            &PoolSpec {
                start,
                ..PoolSpec::new(name, size)
            },
        )
        .await
        .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_) | Error::InvalidName { .. }),
            "{name:?} {start} {size}: {e}"
        );
    }
    assert!(pool::list(&*store).await.unwrap().is_empty());
    // The largest start allowed: every first member can be taken once.
    pool::create(
        &*store,
        &PoolSpec {
            start: i64::MAX - 19,
            ..PoolSpec::new("top", 10)
        },
    )
    .await
    .unwrap();
    let e = pool::create(&*store, &PoolSpec::new("top", 10))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::AlreadyExists { kind: "pool", .. }),
        "{e}"
    );
}

#[tokio::test]
async fn missing_pools_are_not_found_with_similar_names() {
    let store = memory();
    pool::create(&*store, &PoolSpec::new("tickets", 5))
        .await
        .unwrap();
    let similar = vec!["tickets".to_owned()];
    let errors = [
        ValuePool::builder()
            .store(store.clone())
            .name("tikets")
            .build()
            .await
            .unwrap_err(),
        pool::describe(&*store, "tikets").await.unwrap_err(),
        pool::members(&*store, "tikets").await.unwrap_err(),
        pool::remove(&*store, "tikets").await.unwrap_err(),
    ];
    for e in errors {
        assert_eq!(
            e,
            Error::NotFound {
                kind: "pool",
                name: "tikets".into(),
                similar: similar.clone()
            }
        );
        assert!(e.to_string().contains("did you mean \"tickets\""), "{e}");
    }
}

#[tokio::test]
async fn builder_rejects_bad_settings() {
    let store = memory();
    pool::create(&*store, &PoolSpec::new("p", 5)).await.unwrap();
    let base = || ValuePool::builder().store(store.clone()).name("p");
    for (what, b) in [
        ("sample", base().sample(0)),
        ("sample", base().sample(pool::MAX_SAMPLE + 1)),
        ("max_rounds", base().max_rounds(0)),
        ("no store", ValuePool::builder().name("p")),
        ("no name", ValuePool::builder().store(store.clone())),
    ] {
        let e = b.build().await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{what}: {e}");
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
    let e = base().name("a\tb").build().await.unwrap_err();
    assert!(matches!(e, Error::InvalidName { .. }), "{e}");
}

/// A real store plus a rival that always gets there first. Pools: right
/// after every sample it hands out, it takes each sampled member through the
/// same store. Sequences: right after every put that conflicts, it reserves
/// one more value, so the row the conflict returned is stale by the time the
/// loser retries (a writer that never pauses). Makes contention
/// deterministic without faking the store.
#[derive(Debug)]
struct RivalFirst {
    inner: MemoryStore,
    rival_took: std::sync::Mutex<Vec<i64>>,
}

impl RivalFirst {
    fn new() -> Arc<RivalFirst> {
        Arc::new(RivalFirst {
            inner: MemoryStore::new(),
            rival_took: Default::default(),
        })
    }
}

/// Sequences and pools get the rival; the other concerns go straight
/// through (a `Sequence` reads the numbering, to refuse a numbered one).
#[async_trait]
impl SequenceStore for RivalFirst {
    async fn create_sequence(&self, spec: &SequenceSpec) -> keysmith::Result<SequenceRow> {
        self.inner.create_sequence(spec).await
    }
    async fn read_sequence(&self, name: &str) -> keysmith::Result<Option<SequenceRow>> {
        self.inner.read_sequence(name).await
    }
    async fn put_if_version(&self, name: &str, n: i64, v: u64) -> keysmith::Result<Put> {
        let put = self.inner.put_if_version(name, n, v).await?;
        if let Put::Conflict(_) = put {
            self.inner.reserve_atomic(name, 1).await?;
        }
        Ok(put)
    }
    async fn alter_checked(
        &self,
        name: &str,
        change: &Alteration,
        v: u64,
    ) -> keysmith::Result<Put> {
        self.inner.alter_checked(name, change, v).await
    }
    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> keysmith::Result<()> {
        self.inner.raise_failover_skip(name, at_least).await
    }
    async fn reserve_locked(&self, name: &str, n: i64) -> keysmith::Result<Reservation> {
        self.inner.reserve_locked(name, n).await
    }
    // reserve_atomic: the contract's own, over reserve_locked (the memory
    // store has no one-step path, so atomic_reserve stays None).
    async fn record_counts(
        &self,
        name: &str,
        delta: &CountsDelta,
        now_ms: i64,
    ) -> keysmith::Result<()> {
        self.inner.record_counts(name, delta, now_ms).await
    }
    async fn read_counts(&self, name: &str) -> keysmith::Result<(SequenceRow, SequenceCounts)> {
        self.inner.read_counts(name).await
    }
    async fn list_sequences(&self) -> keysmith::Result<Vec<SequenceRow>> {
        self.inner.list_sequences().await
    }
    async fn drop_sequence(&self, name: &str) -> keysmith::Result<()> {
        self.inner.drop_sequence(name).await
    }
}

pass_through!(RivalFirst: numbers, workers, store);

#[async_trait]
impl PoolStore for RivalFirst {
    async fn create_pool(&self, spec: &PoolSpec) -> keysmith::Result<PoolRow> {
        self.inner.create_pool(spec).await
    }
    async fn read_pool(&self, name: &str) -> keysmith::Result<Option<PoolRow>> {
        self.inner.read_pool(name).await
    }
    async fn sample_members(&self, name: &str, k: usize) -> keysmith::Result<Vec<i64>> {
        let sample = self.inner.sample_members(name, k).await?;
        let size = self.inner.read_pool(name).await?.unwrap().size;
        for &v in &sample {
            assert!(self.inner.swap_member(name, v, v + size).await?);
            self.rival_took.lock().unwrap().push(v);
        }
        Ok(sample)
    }
    async fn swap_member(&self, name: &str, take: i64, put: i64) -> keysmith::Result<bool> {
        self.inner.swap_member(name, take, put).await
    }
    async fn fence_pool(&self, name: &str, rounds: i64) -> keysmith::Result<()> {
        self.inner.fence_pool(name, rounds).await
    }
    async fn list_members(&self, name: &str) -> keysmith::Result<Vec<i64>> {
        self.inner.list_members(name).await
    }
    async fn record_pool_mark(&self, name: &str, now_ms: i64, taken: i64) -> keysmith::Result<()> {
        self.inner.record_pool_mark(name, now_ms, taken).await
    }
    async fn read_pool_marks(&self, name: &str) -> keysmith::Result<RateMarks> {
        self.inner.read_pool_marks(name).await
    }
    async fn list_pools(&self) -> keysmith::Result<Vec<PoolRow>> {
        self.inner.list_pools().await
    }
    async fn drop_pool(&self, name: &str) -> keysmith::Result<()> {
        self.inner.drop_pool(name).await
    }
}

#[tokio::test]
async fn a_taker_that_always_loses_gives_up_with_contention_after_max_rounds() {
    let store = RivalFirst::new();
    pool::create(&*store, &PoolSpec::new("p", 10))
        .await
        .unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("p")
        .sample(2)
        .max_rounds(3)
        .build()
        .await
        .unwrap();
    let e = h.take().await.unwrap_err();
    assert_eq!(
        e,
        Error::Contention {
            name: "p".into(),
            attempts: 6
        }
    );
    assert!(e.is_retryable());
    assert_eq!(
        h.stats(),
        PoolStats {
            takes: 0,
            samples: 3,
            attempts: 6,
            conflicts: 6
        }
    );
    // The rival's takes kept the pool whole.
    let rival = store.rival_took.lock().unwrap().clone();
    check_invariants(1, 10, &rival, &store.list_members("p").await.unwrap());
}

/// A handle that retried from the row a conflict returned, again and again,
/// would lose to this rival forever: the row is stale every time. With the
/// default settings the handle retries once from the returned row, then waits
/// and reads the row afresh, and is served.
#[tokio::test]
async fn an_optimistic_handle_never_retries_from_a_row_known_to_be_stale() {
    let store = RivalFirst::new();
    let spec = SequenceSpec::new("s");
    keysmith::sequence::create(&*store, &spec).await.unwrap();
    let h = Sequence::builder()
        .store(store.clone())
        .name("s")
        .block(1)
        .strategy(Strategy::Optimistic)
        .build()
        .await
        .unwrap();
    // The rival moves the row once before the handle's first put.
    store.inner.reserve_atomic("s", 1).await.unwrap();
    let v = h.next().await.unwrap();
    let s = h.stats();
    assert_eq!(
        s.conflicts, 2,
        "one conflict from the remembered row, one from the returned row"
    );
    // The rival took 1, then 2 and 3 after the two conflicts; the fresh read
    // after the wait saw that.
    assert_eq!(v, 4);
}

/// With a zero retry budget a take reads one sample, tries its candidates,
/// and gives up.
#[tokio::test]
async fn a_zero_retry_budget_gives_up_after_one_sample() {
    let store = RivalFirst::new();
    pool::create(&*store, &PoolSpec::new("p", 10))
        .await
        .unwrap();
    let h = ValuePool::builder()
        .store(store.clone())
        .name("p")
        .sample(3)
        .retry_budget(std::time::Duration::ZERO)
        .build()
        .await
        .unwrap();
    assert_eq!(
        h.take().await.unwrap_err(),
        Error::Contention {
            name: "p".into(),
            attempts: 3
        }
    );
    assert_eq!(h.stats().samples, 1);
}

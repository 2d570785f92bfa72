//! A store with many sequences: creating one more, opening one, and missing
//! one (the 404 path, with its "did you mean") never list the names
//! (issue 50). Counted in store calls, on a real SQLite file, through a
//! wrapper that counts what the library asks of the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use async_trait::async_trait;
use keysmith::store::{
    Alteration, AtomicReserve, CountsDelta, NameScope, Put, Reservation, SequenceCounts,
    SequenceRow, SequenceSpec, SequenceStore, Store, sqlite::SqliteStore,
};
use keysmith::{AnySequence, Error, HINT_CANDIDATES, Result, sequence::Sequence};

mod pass_through;

/// How many sequences the store holds before the calls are counted: more
/// than a hint reads.
const NAMES: usize = 2_000;
const _: () = assert!(HINT_CANDIDATES < NAMES);

/// A real store, with the sequence calls that could read every name
/// counted.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn Store>,
    /// `list_sequences` calls: each reads every sequence.
    lists: AtomicU64,
    /// `count_sequences_with_prefix` calls.
    prefix_counts: AtomicU64,
    /// `sequence_names_near` calls, and the most names one asked for.
    near: AtomicU64,
    near_limit: AtomicU64,
    /// Every other sequence call.
    others: AtomicU64,
}

impl Counting {
    fn other(&self) {
        self.others.fetch_add(1, SeqCst);
    }
    fn reset(&self) {
        for c in [
            &self.lists,
            &self.prefix_counts,
            &self.near,
            &self.near_limit,
            &self.others,
        ] {
            c.store(0, SeqCst);
        }
    }
}

#[async_trait]
impl SequenceStore for Counting {
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow> {
        self.other();
        self.inner.create_sequence(spec).await
    }
    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        self.other();
        self.inner.read_sequence(name).await
    }
    async fn put_if_version(&self, name: &str, n: i64, v: u64) -> Result<Put> {
        self.other();
        self.inner.put_if_version(name, n, v).await
    }
    async fn alter_checked(&self, name: &str, change: &Alteration, v: u64) -> Result<Put> {
        self.other();
        self.inner.alter_checked(name, change, v).await
    }
    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> Result<()> {
        self.other();
        self.inner.raise_failover_skip(name, at_least).await
    }
    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        self.other();
        self.inner.reserve_locked(name, n).await
    }
    async fn reserve_atomic(&self, name: &str, n: i64) -> Result<Reservation> {
        self.other();
        self.inner.reserve_atomic(name, n).await
    }
    fn atomic_reserve(&self) -> Option<&dyn AtomicReserve> {
        self.inner.atomic_reserve()
    }
    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        self.other();
        self.inner.record_counts(name, delta, now_ms).await
    }
    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)> {
        self.other();
        self.inner.read_counts(name).await
    }
    async fn list_sequences(&self) -> Result<Vec<SequenceRow>> {
        self.lists.fetch_add(1, SeqCst);
        self.inner.list_sequences().await
    }
    async fn sequence_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.near.fetch_add(1, SeqCst);
        self.near_limit.fetch_max(limit as u64, SeqCst);
        self.inner.sequence_names_near(name, limit).await
    }
    async fn count_sequences_with_prefix(&self, prefix: &str) -> Result<u64> {
        self.prefix_counts.fetch_add(1, SeqCst);
        self.inner.count_sequences_with_prefix(prefix).await
    }
    async fn drop_sequence(&self, name: &str) -> Result<()> {
        self.other();
        self.inner.drop_sequence(name).await
    }
}

crate::pass_through!(Counting: pools, numbers, workers, store);

fn spec(name: &str) -> SequenceSpec {
    SequenceSpec {
        name: name.into(),
        start: 1,
        max: keysmith::store::MAX_VALUE,
        block: 10,
        failover_skip: None,
        start_below_dropped: false,
    }
}

/// A SQLite file with [`NAMES`] sequences (`customer-00000` ...), behind
/// the counter, counts at zero.
async fn many() -> Arc<Counting> {
    let dir = tempfile::tempdir().unwrap().keep();
    let inner = SqliteStore::open(dir.join("k.db")).await.unwrap();
    for i in 0..NAMES {
        inner
            .create_sequence(&spec(&format!("customer-{i:05}")))
            .await
            .unwrap();
    }
    Arc::new(Counting {
        inner: Arc::new(inner),
        lists: AtomicU64::new(0),
        prefix_counts: AtomicU64::new(0),
        near: AtomicU64::new(0),
        near_limit: AtomicU64::new(0),
        others: AtomicU64::new(0),
    })
}

#[tokio::test]
async fn a_create_and_a_first_use_among_many_names_read_none_of_the_others() {
    let store = many().await;
    let dyn_store: Arc<dyn Store> = store.clone();
    // A create as the server makes it: the audit trail's look before (a
    // missing name), the create, the look after.
    assert!(
        keysmith::sequence::show_if_exists(&*dyn_store, "customer-99999")
            .await
            .unwrap()
            .is_none()
    );
    let info = keysmith::sequence::create(&*dyn_store, &spec("customer-99999"))
        .await
        .unwrap();
    assert_eq!(info.row.name, "customer-99999");
    assert!(
        keysmith::sequence::show_if_exists(&*dyn_store, "customer-99999")
            .await
            .unwrap()
            .is_some()
    );
    // Its first use: the handle opens and takes a block.
    let seq = Sequence::builder()
        .store(dyn_store.clone())
        .name("customer-99999")
        .build()
        .await
        .unwrap();
    assert_eq!(seq.next().await.unwrap(), 1);
    assert_eq!(
        store.lists.load(SeqCst),
        0,
        "a create or first use listed every name"
    );
    assert_eq!(
        store.near.load(SeqCst),
        0,
        "nothing was missing: no hint to look for"
    );
    assert!(store.others.load(SeqCst) > 0, "the wrapper saw the calls");
}

#[tokio::test]
async fn a_miss_among_many_names_reads_a_bounded_neighbourhood_for_its_hint() {
    let store = many().await;
    let dyn_store: Arc<dyn Store> = store.clone();
    // The 404 path of `next`: opening a handle on a name that is not there.
    let e = AnySequence::open(dyn_store.clone(), "customer-01234x", Sequence::builder())
        .await
        .unwrap_err();
    match &e {
        Error::NotFound { name, similar, .. } => {
            assert_eq!(name, "customer-01234x");
            assert_eq!(
                similar.first().map(String::as_str),
                Some("customer-01234"),
                "{e}"
            );
        }
        other => panic!("expected NotFound, got {other}"),
    }
    // The CLI's and the server's `show` of a missing name.
    let e = keysmith::sequence::show(&*dyn_store, "customr-01999")
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert_eq!(store.lists.load(SeqCst), 0, "a miss listed every name");
    assert_eq!(store.near.load(SeqCst), 2, "one bounded look-up per miss");
    assert_eq!(store.near_limit.load(SeqCst), HINT_CANDIDATES as u64);
    store.reset();
    // The listing itself still lists (it is asked to).
    assert_eq!(
        keysmith::sequence::list(&*dyn_store).await.unwrap().len(),
        NAMES
    );
    assert_eq!(store.lists.load(SeqCst), 1);
}

#[tokio::test]
async fn a_quota_count_among_many_names_lists_none_of_them() {
    let store = many().await;
    for i in 0..3 {
        store
            .inner
            .create_sequence(&spec(&format!("team-b/{i}")))
            .await
            .unwrap();
    }
    store.reset();
    // What the server counts of a principal with the grants `team-b/*`,
    // `customer-00007` and `customer-x` (no such sequence) before a create
    // under its `max_sequences`.
    let scope = NameScope {
        prefixes: vec!["team-b/".into()],
        exact: vec!["customer-00007".into(), "customer-x".into()],
    };
    assert_eq!(scope.count_sequences(&*store).await.unwrap(), 4);
    assert_eq!(
        store.lists.load(SeqCst),
        0,
        "a quota count listed every name"
    );
    assert_eq!(store.prefix_counts.load(SeqCst), 1, "one count per prefix");
    assert_eq!(store.others.load(SeqCst), 2, "one read per exact name");
    // A principal of every name counts them all, still without a listing.
    let all = NameScope {
        prefixes: vec![String::new()],
        exact: vec![],
    };
    assert_eq!(
        all.count_sequences(&*store).await.unwrap(),
        NAMES as u64 + 3
    );
    assert_eq!(store.lists.load(SeqCst), 0);
}

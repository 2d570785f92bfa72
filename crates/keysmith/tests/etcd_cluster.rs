//! Fault tests on a three-node etcd cluster: a member killed with SIGKILL
//! while allocators run, restarted later; a client whose first endpoint is
//! dead. Nothing here measures time: the tests assert that allocation goes on
//! and that no value is handed out twice.
#![cfg(feature = "etcd")]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use keysmith::sequence::{Sequence, Strategy};
use keysmith::store::etcd::EtcdStore;
use keysmith::store::etcd::etcd_client;
use keysmith::store::{PoolSpec, PoolStore, SequenceStore};
use keysmith::store::{Put, SequenceSpec, Store};
use keysmith_testsupport::etcd::EtcdCluster;

/// How long any awaited condition may take before the test fails. Generous:
/// this bounds a hang, it is not a performance threshold.
const DEADLINE: Duration = Duration::from_secs(120);

/// Polls `cond` until it holds; fails with `what` after [`DEADLINE`].
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The index of the node that is the raft leader now.
async fn leader(cluster: &EtcdCluster) -> usize {
    let give_up = Instant::now() + DEADLINE;
    loop {
        for (i, ep) in cluster.endpoints().iter().enumerate() {
            if !cluster.is_running(i) {
                continue;
            }
            let Ok(mut c) = etcd_client::Client::connect([ep], None).await else {
                continue;
            };
            if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(2), c.status()).await {
                let me = s.header().map(|h| h.member_id());
                if s.leader() != 0 && Some(s.leader()) == me {
                    return i;
                }
            }
        }
        assert!(Instant::now() < give_up, "no etcd leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One allocator: its own client and handle; retries what is retryable.
async fn allocator(
    url: String,
    strategy: Strategy,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicUsize>,
    mine: Arc<AtomicUsize>,
) -> (Vec<i64>, usize) {
    let store = loop {
        match keysmith::store::open(&url).await {
            Ok(s) => break s,
            Err(e) if e.is_retryable() => continue,
            Err(e) => panic!("{e}"),
        }
    };
    let seq = Sequence::builder()
        .store(store)
        .name("ids")
        .block(7)
        .strategy(strategy)
        .build()
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut errors = 0;
    while !stop.load(SeqCst) {
        match seq.next().await {
            Ok(v) => {
                got.push(v);
                count.fetch_add(1, SeqCst);
                mine.fetch_add(1, SeqCst);
            }
            Err(e) if e.is_retryable() => {
                errors += 1;
                // Paces retries while the cluster elects a leader.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{strategy} allocator: {e}"),
        }
    }
    (got, errors)
}

/// One pool taker: samples members, swaps one for member + size, and hands
/// out the member it took. An answer lost to a fault counts as not taken.
async fn pool_taker(url: String, stop: Arc<AtomicBool>, count: Arc<AtomicUsize>) -> Vec<i64> {
    let store = loop {
        match keysmith::store::open(&url).await {
            Ok(s) => break s,
            Err(e) if e.is_retryable() => continue,
            Err(e) => panic!("{e}"),
        }
    };
    let mut got = Vec::new();
    while !stop.load(SeqCst) {
        let sample = match store.sample_members("pool", 4).await {
            Ok(s) => s,
            Err(e) if e.is_retryable() => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        for take in sample {
            match store.swap_member("pool", take, take + POOL_SIZE).await {
                Ok(true) => {
                    got.push(take);
                    count.fetch_add(1, SeqCst);
                    break;
                }
                Ok(false) => {}
                Err(e) if e.is_retryable() => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    got
}

const POOL_SIZE: i64 = 16;

/// Optimistic, locked and atomic allocators, each with its own client, run
/// while the leader is killed with SIGKILL and later restarted. Every value
/// is handed out once, each allocator's values increase, and allocation goes
/// on with one node down and after it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn allocation_survives_a_killed_and_restarted_node() {
    let Some(mut cluster) = EtcdCluster::start(3) else {
        return;
    };
    let url = format!("{}/fault", cluster.url());
    let admin = EtcdStore::connect(&url).await.unwrap();
    admin
        .create_sequence(&SequenceSpec::new("ids"))
        .await
        .unwrap();
    admin
        .create_pool(&PoolSpec::new("pool", POOL_SIZE))
        .await
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let mut each = Vec::new();
    for strategy in [Strategy::Optimistic, Strategy::Locked, Strategy::Atomic] {
        for _ in 0..2 {
            let mine = Arc::new(AtomicUsize::new(0));
            each.push(mine.clone());
            tasks.push(tokio::spawn(allocator(
                url.clone(),
                strategy,
                stop.clone(),
                count.clone(),
                mine,
            )));
        }
    }
    let taken = Arc::new(AtomicUsize::new(0));
    let mut takers = Vec::new();
    for _ in 0..2 {
        takers.push(tokio::spawn(pool_taker(
            url.clone(),
            stop.clone(),
            taken.clone(),
        )));
    }
    let progressed = |by: usize| {
        let from = count.load(SeqCst);
        let count = count.clone();
        move || count.load(SeqCst) >= from + by
    };

    wait_until("allocation starts", progressed(300)).await;
    let victim = leader(&cluster).await;
    cluster.kill(victim);
    wait_until("allocation goes on with a node dead", progressed(300)).await;
    // A second fault: the new leader dies too only after the first is back.
    cluster.restart(victim);
    wait_until("allocation goes on after the restart", progressed(300)).await;
    let second = leader(&cluster).await;
    cluster.kill(second);
    wait_until("allocation goes on after a second kill", progressed(300)).await;
    cluster.restart(second);
    wait_until(
        "allocation goes on after the second restart",
        progressed(300),
    )
    .await;
    // Each allocator, not only all of them together, goes on after both
    // faults (on a loaded machine one may be far behind the others).
    let after: Vec<usize> = each.iter().map(|c| c.load(SeqCst)).collect();
    wait_until("every allocator goes on after the faults", || {
        each.iter().zip(&after).all(|(c, a)| c.load(SeqCst) > *a)
    })
    .await;
    stop.store(true, SeqCst);

    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (got, e) = t.await.unwrap();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "one handle's values must increase"
        );
        assert!(!got.is_empty(), "every allocator got values");
        errors += e;
        all.extend(got);
    }
    let unique: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "a value was handed out twice");

    let mut from_pool = Vec::new();
    for t in takers {
        from_pool.extend(t.await.unwrap());
    }
    assert!(taken.load(SeqCst) > 0, "the pool takers got nothing");
    let unique: BTreeSet<i64> = from_pool.iter().copied().collect();
    assert_eq!(
        unique.len(),
        from_pool.len(),
        "a pool value was taken twice"
    );
    let members = admin.list_members("pool").await.unwrap();
    assert_eq!(
        members.len() as i64,
        POOL_SIZE,
        "the pool lost or gained members"
    );
    assert!(
        members.iter().all(|m| !unique.contains(m)),
        "a value taken is still in the pool"
    );
    let next = admin.read_sequence("ids").await.unwrap().unwrap().next;
    assert!(
        all.iter().all(|&v| v < next),
        "a value at or past the stored next ({next}) was handed out"
    );
    eprintln!(
        "{} values, {} from the pool, {} retryable errors during the faults",
        all.len(),
        from_pool.len(),
        errors
    );
}

/// A client given all three endpoints, the first one dead, connects and
/// allocates: it moves on to the live endpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_first_endpoint_does_not_block_the_client() {
    let Some(mut cluster) = EtcdCluster::start(3) else {
        return;
    };
    cluster.kill(0);
    let url = format!("{}/dead-first", cluster.url());
    assert!(url.starts_with(&format!("etcd://{},", cluster.endpoints()[0])));
    let store = EtcdStore::connect(&url).await.unwrap();
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    for i in 0..30 {
        let r = if i % 2 == 0 {
            store.reserve_atomic("s", 3).await.unwrap()
        } else {
            store.reserve_locked("s", 3).await.unwrap()
        };
        assert!(seen.insert(r.start));
        let row = store.read_sequence("s").await.unwrap().unwrap();
        assert!(matches!(
            store
                .put_if_version("s", row.next, row.version)
                .await
                .unwrap(),
            Put::Done(_)
        ));
    }
    store.create_pool(&PoolSpec::new("p", 4)).await.unwrap();
    assert!(store.swap_member("p", 1, 5).await.unwrap());
    assert_eq!(store.ping().await, Ok(()));
}

/// With two of three nodes dead there is no quorum: calls fail with a
/// retryable Unavailable naming the endpoints (they do not hang), and work
/// again once a node is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_quorum_calls_fail_clearly_and_recover() {
    let Some(mut cluster) = EtcdCluster::start(3) else {
        return;
    };
    let url = format!("{}/quorum", cluster.url());
    let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(&url).await.unwrap());
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    let before = store.reserve_atomic("s", 10).await.unwrap();
    cluster.kill(1);
    cluster.kill(2);
    let e = store.reserve_atomic("s", 10).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains(&cluster.endpoints()[0]), "{e}");
    cluster.restart(1);
    // The first calls after the restart may still meet an election.
    let give_up = Instant::now() + DEADLINE;
    let after = loop {
        match store.reserve_atomic("s", 10).await {
            Ok(r) => break r,
            Err(e) if e.is_retryable() && Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(after.start >= before.end, "{after:?} overlaps {before:?}");
}

/// A one-node cluster that can be restored from a snapshot, and two stores
/// on it; `None` (after the skip or failure the test support decides) when
/// etcd or etcdctl is missing.
async fn restorable() -> Option<(
    EtcdCluster,
    keysmith_testsupport::etcd_restore::EtcdTools,
    EtcdStore,
    EtcdStore,
)> {
    let cluster = EtcdCluster::start(1)?;
    let tools = keysmith_testsupport::etcd_restore::EtcdTools::find()?;
    let url = cluster.url();
    let a = EtcdStore::connect(&url).await.unwrap();
    let b = EtcdStore::connect(&url).await.unwrap();
    Some((cluster, tools, a, b))
}

/// The result of `call` once the restored node answers: it may refuse the
/// first calls as unavailable (fails after [`DEADLINE`]).
async fn until_back<T>(mut call: impl AsyncFnMut() -> keysmith::Result<T>) -> T {
    let give_up = Instant::now() + DEADLINE;
    loop {
        match call().await {
            Ok(v) => return v,
            Err(keysmith::Error::Unavailable(e)) => {
                assert!(Instant::now() < give_up, "etcd never came back: {e}");
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// An atomic reservation plans from the row its store last wrote. A
/// snapshot restore can bring back exactly that row (version, mod revision
/// and epoch) after another store moved it on and handed the values out:
/// the write that lands on it is noticed by its revision and its range is
/// never handed out; the reservation is made from the row fenced forward.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_row_brought_back_by_a_restore_is_never_handed_out_from() {
    let Some((mut cluster, tools, a, b)) = restorable().await else {
        return;
    };
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    let first = a.reserve_atomic("s", 10).await.unwrap();
    let snapshot = tokio::task::block_in_place(|| tools.save(&cluster, 0));
    let theirs = b.reserve_atomic("s", 10).await.unwrap();
    assert_eq!(theirs.start, first.end);
    // `a` sees the store's revision after b's write.
    a.read_sequence("s").await.unwrap();
    tokio::task::block_in_place(|| tools.restore(&mut cluster, &snapshot));
    let mine = until_back(async || a.reserve_atomic("s", 10).await).await;
    assert!(
        mine.start >= theirs.end,
        "values {}..{} were handed out again after the restore (b had {}..{})",
        mine.start,
        mine.end,
        theirs.start,
        theirs.end
    );
    assert!(mine.fenced > 0, "the sequence was fenced forward: {mine:?}");
}

/// A handle reserves a block with a conditional put, another reserves the
/// next one, and a snapshot restore loses both writes. The first store to
/// read the row fences it forward past both blocks. The first handle then
/// hands its block's tail back with the version its lost write left: that
/// version must not match the fenced row (etcd's version of the `next` key
/// went up by one at the fence, exactly as the lost write's did), or `next`
/// moves back under the second block and its values are handed out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_back_planned_on_a_write_a_restore_lost_is_refused() {
    let Some((mut cluster, tools, a, b)) = restorable().await else {
        return;
    };
    let spec = SequenceSpec {
        failover_skip: Some(100),
        ..SequenceSpec::new("s")
    };
    a.create_sequence(&spec).await.unwrap();
    let snapshot = tokio::task::block_in_place(|| tools.save(&cluster, 0));
    // a reserves [n, n + 10) and b [n + 10, n + 20): both writes are lost.
    let row = a.read_sequence("s").await.unwrap().unwrap();
    let n = row.next;
    let Put::Done(after_a) = a.put_if_version("s", n + 10, row.version).await.unwrap() else {
        panic!("a's reservation lost a race it had no rival in");
    };
    let row = b.read_sequence("s").await.unwrap().unwrap();
    assert_eq!(row.version, after_a.version);
    let Put::Done(_) = b.put_if_version("s", n + 20, row.version).await.unwrap() else {
        panic!("b's reservation lost a race it had no rival in");
    };
    tokio::task::block_in_place(|| tools.restore(&mut cluster, &snapshot));
    // b reads first: the row is fenced forward by its failover skip.
    let fenced = until_back(async || b.read_sequence("s").await)
        .await
        .unwrap();
    assert_eq!(fenced.next, n + 100);
    // a's store makes another call first (another handle of its process
    // may have): it learns the store's new epoch and sees the fenced row.
    let seen = a.read_sequence("s").await.unwrap().unwrap();
    assert_eq!((seen.next, seen.version), (fenced.next, fenced.version));
    // a used 3 values and hands back the rest of its block, quoting the
    // version its (lost) reservation left.
    match a.put_if_version("s", n + 3, after_a.version).await.unwrap() {
        Put::Conflict(now) => assert_eq!(now.next, n + 100),
        Put::Done(row) => panic!(
            "a hand-back planned on a lost write moved next back to {} under b's block {}..{}",
            row.next,
            n + 10,
            n + 20
        ),
    }
    let now = b.read_sequence("s").await.unwrap().unwrap();
    assert_eq!((now.next, now.version), (fenced.next, fenced.version));
    assert_eq!(
        fenced.version,
        after_a.version - 1 + keysmith::store::FENCE_VERSION_STEP,
        "a fence raises the version by FENCE_VERSION_STEP, as in every store"
    );
    // Writes planned on the fenced row still land, and the version goes on
    // from it.
    let Put::Done(next) = a
        .put_if_version("s", n + 110, fenced.version)
        .await
        .unwrap()
    else {
        panic!("a put on the fenced row's version was refused");
    };
    assert_eq!(next.version, fenced.version + 1);
}

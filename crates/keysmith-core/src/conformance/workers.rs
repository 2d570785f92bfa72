//! The worker-id half of the store contract
//! ([`WorkerStore`](crate::store::WorkerStore)): lowest free ids, fences,
//! floors that outlive holders, expiry, and racing acquirers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Error;
use crate::store::{Store, WorkerClaim};

fn claim(group: &str, max_workers: i64, now_ms: i64, window_ms: i64) -> WorkerClaim {
    WorkerClaim {
        group: group.into(),
        max_workers,
        holder: "conformance".into(),
        ttl: Duration::from_secs(60),
        now_ms,
        window_ms,
    }
}

/// Acquisitions take the lowest free worker id, fence 1 the first time,
/// and start at the holder's clock with the floor a window ahead; groups
/// are independent.
pub async fn workers_are_leased_lowest_first(store: Arc<dyn Store>) {
    let a = store
        .acquire_worker(&claim("g", 8, 1_000, 500))
        .await
        .unwrap();
    let b = store
        .acquire_worker(&claim("g", 8, 1_000, 500))
        .await
        .unwrap();
    assert_eq!(
        (a.worker, a.fence, a.start_ms, a.until_ms),
        (0, 1, 1_000, 1_500)
    );
    assert_eq!((b.worker, b.fence), (1, 1));
    let other = store.acquire_worker(&claim("h", 8, 7, 5)).await.unwrap();
    assert_eq!((other.group.as_str(), other.worker), ("h", 0));
    // Freed in the middle: the gap is filled first.
    assert!(store.release_worker("g", 0, 1, 1_000).await.unwrap());
    let c = store
        .acquire_worker(&claim("g", 8, 1_000, 500))
        .await
        .unwrap();
    assert_eq!((c.worker, c.fence), (0, 2));
    let d = store
        .acquire_worker(&claim("g", 8, 1_000, 500))
        .await
        .unwrap();
    assert_eq!(d.worker, 2);
}

/// With every worker id held the answer is a clear error naming the group
/// and its size, never a shared worker id; a release makes room.
pub async fn all_worker_ids_taken_is_a_clear_error(store: Arc<dyn Store>) {
    for w in 0..3 {
        let l = store
            .acquire_worker(&claim("full", 3, 10, 10))
            .await
            .unwrap();
        assert_eq!(l.worker, w);
    }
    let e = store
        .acquire_worker(&claim("full", 3, 10, 10))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::IdsUnavailable(_)), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("\"full\"") && msg.contains("all 3 worker ids"),
        "{msg}"
    );
    assert!(store.release_worker("full", 1, 1, 20).await.unwrap());
    let l = store
        .acquire_worker(&claim("full", 3, 10, 10))
        .await
        .unwrap();
    assert_eq!((l.worker, l.fence), (1, 2));
    // Bad claims change nothing.
    let e = store
        .acquire_worker(&claim("full", 0, 10, 10))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

/// The floor outlives its holder: a new holder whose clock is far behind
/// starts above everything the previous ones could have issued; renewals
/// move it forward, a release lowers it only to what the holder says it
/// used, and never raises it.
pub async fn the_time_floor_outlives_holders(store: Arc<dyn Store>) {
    let a = store
        .acquire_worker(&claim("f", 1, 1_000, 500))
        .await
        .unwrap();
    assert_eq!(a.until_ms, 1_500);
    let until = store
        .renew_worker("f", 0, a.fence, Duration::from_secs(60), 2_000, 500)
        .await
        .unwrap();
    assert_eq!(until, Some(2_500));
    // A renewal never lowers the floor.
    let until = store
        .renew_worker("f", 0, a.fence, Duration::from_secs(60), 100, 500)
        .await
        .unwrap();
    assert_eq!(until, Some(2_500));
    assert!(store.release_worker("f", 0, a.fence, 2_200).await.unwrap());
    // A clock an hour behind still starts above 2_200.
    let b = store
        .acquire_worker(&claim("f", 1, 100, 500))
        .await
        .unwrap();
    assert_eq!((b.fence, b.start_ms, b.until_ms), (2, 2_200, 2_700));
    // A release never raises the floor.
    assert!(
        store
            .release_worker("f", 0, b.fence, 1_000_000)
            .await
            .unwrap()
    );
    let c = store
        .acquire_worker(&claim("f", 1, 100, 500))
        .await
        .unwrap();
    assert_eq!((c.fence, c.start_ms), (3, 2_700));
    // A clock ahead of the floor starts at the clock.
    assert!(store.release_worker("f", 0, c.fence, 2_800).await.unwrap());
    let d = store
        .acquire_worker(&claim("f", 1, 9_000, 500))
        .await
        .unwrap();
    assert_eq!((d.start_ms, d.until_ms), (9_000, 9_500));
}

/// A holder whose worker id was acquired by another since can neither renew
/// nor release it, and its stale calls leave the new holder's lease alone.
pub async fn a_stale_fence_is_refused(store: Arc<dyn Store>) {
    let a = store
        .acquire_worker(&claim("s", 1, 1_000, 100))
        .await
        .unwrap();
    assert!(store.release_worker("s", 0, a.fence, 1_000).await.unwrap());
    let b = store
        .acquire_worker(&claim("s", 1, 1_000, 100))
        .await
        .unwrap();
    assert_eq!(b.fence, a.fence + 1);
    let ttl = Duration::from_secs(60);
    assert_eq!(
        store
            .renew_worker("s", 0, a.fence, ttl, 5_000, 100)
            .await
            .unwrap(),
        None
    );
    assert!(!store.release_worker("s", 0, a.fence, 0).await.unwrap());
    // Unknown worker ids and groups: nothing to renew or release.
    assert_eq!(
        store
            .renew_worker("s", 7, 1, ttl, 5_000, 100)
            .await
            .unwrap(),
        None
    );
    assert!(!store.release_worker("nope", 0, 1, 0).await.unwrap());
    // A floor before 1970 is refused above the backend and writes nothing.
    let e = store.release_worker("s", 0, b.fence, -1).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("floor_ms")),
        "{e}"
    );
    // The new holder is untouched: still held, floor not lowered.
    let e = store
        .acquire_worker(&claim("s", 1, 1_000, 100))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::IdsUnavailable(_)), "{e}");
    assert_eq!(
        store
            .renew_worker("s", 0, b.fence, ttl, 1_050, 100)
            .await
            .unwrap(),
        Some(1_150)
    );
}

/// A lease not renewed expires by the store's clock (etcd: whole seconds,
/// at least its minimum TTL) and the worker id is acquired again with a
/// new fence, above the old floor; the old holder then cannot renew.
pub async fn an_expired_lease_is_recycled(store: Arc<dyn Store>) {
    let mut short = claim("x", 1, 1_000, 300);
    short.ttl = Duration::from_millis(200);
    let a = store.acquire_worker(&short).await.unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    // Awaits the expiry: acquisitions fail until the store lets the lease go.
    let b = loop {
        match store.acquire_worker(&claim("x", 1, 500, 300)).await {
            Ok(b) => break b,
            Err(Error::IdsUnavailable(_)) if Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the lease never expired: {e}"),
        }
    };
    assert_eq!((b.worker, b.fence), (0, a.fence + 1));
    assert_eq!(
        b.start_ms, a.until_ms,
        "the new holder starts at the old floor"
    );
    assert_eq!(
        store
            .renew_worker("x", 0, a.fence, Duration::from_secs(60), 2_000, 300)
            .await
            .unwrap(),
        None
    );
}

/// Many acquirers at once: each gets its own worker id, all of `0..n`, and
/// the one too many gets the clear error.
pub async fn racing_acquirers_never_share_a_worker_id(store: Arc<dyn Store>) {
    let n = 12;
    let tasks: Vec<_> = (0..n + 1)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.acquire_worker(&claim("r", n, 1_000, 100)).await })
        })
        .collect();
    let mut got = BTreeSet::new();
    let mut refused = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(l) => assert!(got.insert(l.worker), "worker {} given twice", l.worker),
            Err(Error::IdsUnavailable(_)) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got, (0..n).collect::<BTreeSet<i64>>());
    assert_eq!(refused, 1);
}

/// The operator's fence of worker ids moves every floor of every group
/// forward and reports each; the next holder starts past it.
pub async fn fence_workers_moves_every_floor(store: Arc<dyn Store>) {
    let a = store
        .acquire_worker(&claim("fw-a", 4, 10_000, 1000))
        .await
        .unwrap();
    let b = store
        .acquire_worker(&claim("fw-b", 4, 10_000, 1000))
        .await
        .unwrap();
    // A group name as URL-like as names may be: reported as it is.
    let c = store
        .acquire_worker(&claim("fw-c/x%2Fy", 4, 10_000, 1000))
        .await
        .unwrap();
    assert_eq!(
        (a.until_ms, b.until_ms, c.until_ms),
        (11_000, 11_000, 11_000)
    );
    let moved = store.fence_workers(500).await.unwrap();
    let ours: Vec<_> = moved
        .iter()
        .filter(|m| m.group.starts_with("fw-"))
        .map(|m| (m.group.as_str(), m.worker, m.before, m.after))
        .collect();
    assert_eq!(
        ours,
        [
            ("fw-a", 0, 11_000, 11_500),
            ("fw-b", 0, 11_000, 11_500),
            ("fw-c/x%2Fy", 0, 11_000, 11_500)
        ]
    );
    // The holder keeps its lease; its floor is the moved one.
    let renewed = store
        .renew_worker("fw-a", 0, a.fence, Duration::from_secs(30), 0, 1)
        .await
        .unwrap();
    assert_eq!(renewed, Some(11_500));
}

/// A group's listing: every worker id ever acquired, ordered by id, with its
/// fence and floor; the holder and the time left only while a live lease
/// holds it. A released worker id and one whose lease expired (awaited by
/// listing again) are listed free, keep their floors, and are the ones the
/// next acquisitions take; other groups and unknown ones stay apart.
pub async fn a_group_lists_its_worker_ids(store: Arc<dyn Store>) {
    // A group's name may hold a `/`; "ls" is another group.
    let group = "ls/a";
    assert!(store.list_workers(group).await.unwrap().is_empty());
    let held = |holder: &str, ttl: Duration| WorkerClaim {
        holder: holder.into(),
        ttl,
        ..claim(group, 8, 1_000, 500)
    };
    let long = Duration::from_secs(60);
    let a = store.acquire_worker(&held("a", long)).await.unwrap();
    let b = store
        .acquire_worker(&held("b", Duration::from_millis(200)))
        .await
        .unwrap();
    let c = store.acquire_worker(&held("c", long)).await.unwrap();
    assert_eq!((a.worker, b.worker, c.worker), (0, 1, 2));
    store
        .acquire_worker(&claim("ls", 8, 1_000, 500))
        .await
        .unwrap();
    assert!(
        store
            .release_worker(group, 0, a.fence, 1_200)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .renew_worker(group, 2, c.fence, long, 5_000, 500)
            .await
            .unwrap(),
        Some(5_500)
    );

    // Await b's expiry by the store's clock: listed held until then.
    let give_up = Instant::now() + Duration::from_secs(60);
    let list = loop {
        let list = store.list_workers(group).await.unwrap();
        assert_eq!(
            list.iter().map(|e| e.worker).collect::<Vec<_>>(),
            [0, 1, 2],
            "{list:?}"
        );
        let b_now = &list[1];
        assert_eq!((b_now.fence, b_now.until_ms), (b.fence, b.until_ms));
        match (&b_now.holder, b_now.expires_in_ms) {
            (None, None) => break list,
            (Some(h), Some(left)) if h == "b" && left >= 0 => {
                assert!(Instant::now() < give_up, "the lease never expired");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("held without holder or time left: {other:?}"),
        }
    };
    // Released: free, its floor lowered to what the holder said.
    let e = &list[0];
    assert_eq!(
        (e.worker, e.fence, e.until_ms, &e.holder, e.expires_in_ms),
        (0, a.fence, 1_200, &None, None)
    );
    // Held and renewed: the holder, the renewal's floor, time left within the TTL.
    let e = &list[2];
    assert_eq!(
        (e.worker, e.fence, e.until_ms, e.holder.as_deref()),
        (2, c.fence, 5_500, Some("c"))
    );
    let left = e.expires_in_ms.unwrap();
    assert!(0 < left && left <= 60_000, "{e:?}");

    // The free ones are what acquisitions take next, above their floors.
    let d = store.acquire_worker(&held("d", long)).await.unwrap();
    let f = store.acquire_worker(&held("f", long)).await.unwrap();
    assert_eq!(
        (d.worker, d.fence, d.start_ms),
        (0, a.fence + 1, 1_200),
        "{d:?}"
    );
    assert_eq!(
        (f.worker, f.fence, f.start_ms),
        (1, b.fence + 1, b.until_ms),
        "{f:?}"
    );
    let list = store.list_workers(group).await.unwrap();
    let holders: Vec<_> = list
        .iter()
        .map(|e| (e.worker, e.fence, e.holder.as_deref()))
        .collect();
    assert_eq!(
        holders,
        [(0, 2, Some("d")), (1, 2, Some("f")), (2, 1, Some("c"))]
    );
    assert!(list.iter().all(|e| e.expires_in_ms.is_some()), "{list:?}");

    // Groups stay apart; a group never acquired is empty.
    let other = store.list_workers("ls").await.unwrap();
    assert_eq!(
        other
            .iter()
            .map(|e| (e.worker, e.holder.as_deref()))
            .collect::<Vec<_>>(),
        [(0, Some("conformance"))]
    );
    assert!(store.list_workers("ls/").await.unwrap().is_empty());
    assert!(store.list_workers("nobody").await.unwrap().is_empty());
}

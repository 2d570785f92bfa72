//! Tests written once for the SQL server backends: `backend_postgres.rs` and
//! `backend_mysql.rs` include this file with `#[path]`, and call
//! [`server_tests!`] for the tests that need nothing but a fresh store URL.

use keysmith::Error;
use keysmith::store::{Put, SequenceSpec, Store};

/// Twelve stores opened at once on a URL whose tables do not exist yet all
/// open and work on the same tables; `check_meta` then looks at the
/// server's metadata table (one row, the current schema version); opening
/// again later changes nothing.
pub async fn concurrent_first_use_migrates_once(url: &str, check_meta: impl AsyncFnOnce()) {
    let mut opens = Vec::new();
    for _ in 0..12 {
        let url = url.to_owned();
        opens.push(tokio::spawn(
            async move { keysmith::store::open(&url).await },
        ));
    }
    let mut stores = Vec::new();
    for o in opens {
        stores.push(o.await.unwrap().expect("a concurrent first open failed"));
    }
    // All of them work on the same tables.
    stores[0]
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    for s in &stores {
        assert!(s.read_sequence("s").await.unwrap().is_some());
    }
    check_meta().await;
    // And opening again later changes nothing.
    keysmith::store::open(url).await.unwrap();
    assert!(stores[3].read_sequence("s").await.unwrap().is_some());
}

/// A URL naming a port nothing listens on (`port`) fails `Unavailable`, in
/// one line naming the address and never showing `secret` (the URL's
/// password, if it has one).
pub async fn a_server_that_is_not_there_is_unavailable_and_named(
    url: &str,
    port: u16,
    secret: Option<&str>,
) {
    let e = match keysmith::store::open(url).await {
        Ok(_) => panic!("a store with no server behind it opened"),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    if let Some(secret) = secret {
        assert!(!msg.contains(secret), "{msg}");
    }
    assert!(!msg.contains('\n'), "{msg}");
}

/// A conditional put of a `next` beyond what the column may hold for the
/// row's maximum is refused by the server (strict constraints, never a
/// clamp) and changes nothing.
pub async fn a_put_beyond_the_maximum_is_refused(store: &dyn Store) {
    let row = store
        .create_sequence(&SequenceSpec {
            max: 10,
            ..SequenceSpec::new("s")
        })
        .await
        .unwrap();
    let e = match store.put_if_version("s", 12, row.version).await {
        Ok(Put::Done(r) | Put::Conflict(r)) => panic!("a put beyond the maximum answered {r:?}"),
        Err(e) => e,
    };
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(store.read_sequence("s").await.unwrap(), Some(row));
}

/// Generates the tests that need nothing of a server backend but a fresh
/// store URL from `$fresh_url()` (`None`: the server is not installed, the
/// test passes without running): the test file includes `common/pools.rs`
/// as `pools` and `common/reopen.rs` as `reopen`.
macro_rules! server_tests {
    ($fresh_url:path) => {
        #[tokio::test]
        async fn large_pools_give_distinct_members_and_follow_swaps() {
            let Some(url) = $fresh_url() else { return };
            let store = keysmith::store::open(&url).await.unwrap();
            pools::large_pools_give_distinct_members_and_follow_swaps(&*store).await;
        }

        #[tokio::test]
        async fn a_pool_created_again_with_another_size_is_sampled_at_its_new_size() {
            let Some(url) = $fresh_url() else { return };
            let a = keysmith::store::open(&url).await.unwrap();
            let b = keysmith::store::open(&url).await.unwrap();
            pools::a_pool_created_again_with_another_size_is_sampled_at_its_new_size(&*a, &*b)
                .await;
        }

        /// The tombstone is in the database: a sequence and a pool dropped
        /// through one store, created again through a store opened
        /// afterwards, continue above the values they handed out.
        #[tokio::test]
        async fn a_tombstone_survives_reopening_the_store() {
            let Some(url) = $fresh_url() else { return };
            reopen::a_tombstone_survives_reopening(&url).await;
        }

        #[tokio::test]
        async fn a_second_store_sees_committed_reservations() {
            let Some(url) = $fresh_url() else { return };
            reopen::a_second_store_sees_committed_reservations(&url).await;
        }
    };
}
pub(crate) use server_tests;

//! A name's lives through the service (issue: "a dropped name's values come
//! back"): a lease token of one life released into the next is a 410
//! `dropped` and changes nothing; the server's own cached handle of the old
//! life neither serves nor writes after a drop and create behind its back;
//! a pool created under a dropped sequence's name starts above it. Every
//! "changes nothing" is read back from the store.

mod common;

use std::sync::Arc;

use common::TestServer;
use keysmith::store::Store;
use reqwest::{Method, StatusCode};
use serde_json::json;

async fn store_of(srv: &TestServer) -> Arc<dyn Store> {
    keysmith::store::open(&common::sqlite_url(&srv.db_path(), ""))
        .await
        .unwrap()
}

/// The attack as measured: reserve 1..11, drop and create again (above
/// 11), the new life reserves once, then the old lease's release: before
/// the fix it was accepted into the new life and values came back.
#[tokio::test]
async fn the_release_of_a_lease_of_a_dropped_life_is_410_and_changes_nothing() {
    let srv = TestServer::start().await;
    srv.create("alpha-s", 10).await;
    let (st, old) = srv
        .call(Method::POST, "/v1/sequences/alpha-s/reserve?count=10", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{old}");
    assert_eq!(old["ranges"][0]["start"], 1, "{old}");
    let (st, v) = srv
        .call(Method::DELETE, "/v1/sequences/alpha-s", None)
        .await;
    assert!(st.is_success(), "{st} {v}");
    let created = srv.create("alpha-s", 10).await;
    assert!(created["start"].as_i64().unwrap() >= 11, "{created}");
    let (st, new) = srv
        .call(Method::POST, "/v1/sequences/alpha-s/reserve?count=10", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{new}");
    let store = store_of(&srv).await;
    let before = store.read_sequence("alpha-s").await.unwrap().unwrap();

    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/sequences/alpha-s/release",
            Some(json!({"lease": old["lease"], "from": 1})),
        )
        .await;
    assert_eq!(st, StatusCode::GONE, "{v}");
    assert_eq!(v["error"]["code"], "dropped", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("dropped and created again"), "{msg}");
    assert!(!msg.contains(old["lease"].as_str().unwrap()), "{msg}");
    // The row as it was, and no hand-back or gap recorded in the new
    // life's counts (a lease's own count of handed-out values lands in the
    // background, so only those two are compared).
    assert_eq!(
        store.read_sequence("alpha-s").await.unwrap().unwrap(),
        before
    );
    let (_, counts) = store.read_counts("alpha-s").await.unwrap();
    assert_eq!((counts.handed_back, counts.abandoned), (0, 0), "{counts:?}");

    // Nothing of either life comes back.
    let next = srv.next("alpha-s", 3).await;
    let new_end = new["ranges"][0]["end"].as_i64().unwrap();
    assert!(next.iter().all(|v| *v >= new_end), "{next:?} after {new}");
    let (_, again) = srv
        .call(Method::POST, "/v1/sequences/alpha-s/reserve?count=10", None)
        .await;
    assert!(
        again["ranges"][0]["start"].as_i64().unwrap() >= new_end,
        "{again}"
    );
    srv.stop().await;
}

/// The server's cached handle of a name dropped and created again behind
/// its back (another server, the CLI): the request that finds the new life
/// gets a fresh handle (no error to the caller, who held nothing), the old
/// block's rest is never served, and the old handle wrote nothing into the
/// new life: its row shows only the fresh handle's block.
#[tokio::test]
async fn a_handle_cached_by_the_server_stops_at_a_drop_behind_its_back() {
    let srv = TestServer::start().await;
    srv.create("orders", 5).await;
    assert_eq!(srv.next("orders", 1).await, vec![1]);
    // Behind the server's back: a second store on the same file.
    let store = store_of(&srv).await;
    store.drop_sequence("orders").await.unwrap();
    let row = store
        .create_sequence(&keysmith::store::SequenceSpec {
            block: 5,
            ..keysmith::store::SequenceSpec::new("orders")
        })
        .await
        .unwrap();
    assert_eq!(row.start, 6, "above the old handle's block 1..6");
    // Five values: more than the old block's rest (2..6), so the handle
    // goes to the store, finds the new life and is replaced.
    let got = srv.next("orders", 5).await;
    assert_eq!(got, (6..11).collect::<Vec<_>>());
    // The new life's first block went to the fresh handle (had the old one
    // reserved there, it would start at 11); the fresh handle may have
    // prefetched its next block since, always whole blocks of 5.
    let now = store.read_sequence("orders").await.unwrap().unwrap();
    assert_eq!(now.incarnation, row.incarnation, "{now:?}");
    assert!(now.next >= 11 && (now.next - 6) % 5 == 0, "{now:?}");
    // And it goes on from the fresh handle's blocks.
    assert_eq!(srv.next("orders", 1).await, vec![11]);
    srv.stop().await;
}

/// One tombstone per name: a pool created under a dropped sequence's name
/// starts above every value the sequence handed out.
#[tokio::test]
async fn a_pool_under_a_dropped_sequences_name_starts_above_it() {
    let srv = TestServer::start().await;
    srv.create("shared-name", 10).await;
    let values = srv.next("shared-name", 5).await;
    let (st, _) = srv
        .call(Method::DELETE, "/v1/sequences/shared-name", None)
        .await;
    assert!(st.is_success());
    let (st, v) = srv
        .call(
            Method::POST,
            "/v1/pools",
            Some(json!({"name": "shared-name", "size": 3})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let taken = srv.take("shared-name", 6).await;
    let highest = *values.iter().max().unwrap();
    assert!(
        taken.iter().all(|t| *t > highest),
        "pool numbers {taken:?} repeat the dropped sequence's {values:?}"
    );
    srv.stop().await;
}

/// A ticket of a gap-free sequence's dropped life, quoted after a drop and
/// create: commit and release are 410 `dropped` (not "unknown ticket"), the
/// new life's open number and counter are untouched, and a ticket of the
/// new life names its life.
#[tokio::test]
async fn a_ticket_of_a_dropped_life_is_410_and_changes_nothing() {
    let srv = TestServer::start().await;
    let create = || async {
        let (st, v) = srv
            .call(
                Method::POST,
                "/v1/sequences",
                Some(json!({"name": "inv", "gapless": true})),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
    };
    create().await;
    let (st, old) = srv
        .call(Method::POST, "/v1/sequences/inv/tickets", None)
        .await;
    assert_eq!(st, StatusCode::CREATED, "{old}");
    let old_ticket = old["ticket"].as_str().unwrap().to_owned();
    let (st, v) = srv.call(Method::DELETE, "/v1/sequences/inv", None).await;
    assert!(st.is_success(), "{st} {v}");
    create().await;
    let (st, new) = srv
        .call(Method::POST, "/v1/sequences/inv/tickets", None)
        .await;
    assert_eq!(st, StatusCode::CREATED, "{new}");
    let new_ticket = new["ticket"].as_str().unwrap().to_owned();
    assert_eq!(new_ticket.split('-').count(), 4, "{new_ticket}");
    let store = store_of(&srv).await;
    let before = store.read_sequence("inv").await.unwrap().unwrap();

    for how in ["commit", "release"] {
        let (st, v) = srv
            .call(
                Method::POST,
                &format!("/v1/sequences/inv/tickets/{old_ticket}/{how}"),
                None,
            )
            .await;
        assert_eq!(st, StatusCode::GONE, "{how}: {v}");
        assert_eq!(v["error"]["code"], "dropped", "{v}");
        assert!(
            !v["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&old_ticket[old_ticket.len() - 32..]),
            "{v}"
        );
    }
    assert_eq!(store.read_sequence("inv").await.unwrap().unwrap(), before);
    // The new life's open number is still held by its own ticket: the next
    // take gets the number after it, and the ticket commits.
    let (_, next) = srv
        .call(Method::POST, "/v1/sequences/inv/tickets", None)
        .await;
    assert_eq!(
        next["n"].as_i64(),
        new["n"].as_i64().map(|n| n + 1),
        "{next}"
    );
    let (st, v) = srv
        .call(
            Method::POST,
            &format!("/v1/sequences/inv/tickets/{new_ticket}/commit"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

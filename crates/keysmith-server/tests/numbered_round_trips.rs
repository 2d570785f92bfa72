//! `next` on a numbered sequence costs the server the store calls the
//! library promises: two to open its handle (the row, the numbering) on the
//! first request, then one per request (no period), counted on a real
//! in-memory store behind the real router.

use std::sync::Arc;

use keysmith::numbers::{self, Numbering};
use keysmith::store::SequenceSpec;
use keysmith::store::memory::MemoryStore;
use keysmith_server::{AppState, Config, router};
use serde_json::{Value, json};

#[tokio::test]
async fn numbered_next_round_trips() {
    let mem = Arc::new(MemoryStore::new());
    let formatted = Numbering {
        template: Some("INV-{n:04}".into()),
        ..Numbering::default()
    };
    numbers::create(&*mem, &SequenceSpec::new("inv"), &formatted)
        .await
        .unwrap();
    let state = AppState::new(mem.clone(), &Config::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, router(state)).await });
    let client = reqwest::Client::new();
    let next = |count: i64| {
        let client = client.clone();
        async move {
            let r = client
                .post(format!("http://{addr}/v1/sequences/inv/next?count={count}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()
        }
    };

    let before = mem.calls();
    assert_eq!(next(2).await, json!({"values": ["INV-0001", "INV-0002"]}));
    assert_eq!(
        mem.calls() - before,
        3,
        "first request: open (2) and next (1)"
    );
    for round in 0..3 {
        let before = mem.calls();
        let got = next(1).await;
        assert_eq!(got, json!({"values": [format!("INV-{:04}", round + 3)]}));
        assert_eq!(mem.calls() - before, 1, "later requests: one reservation");
    }

    // Dropped and made plain behind the server's back: the next request
    // forgets the numbered handle and serves the plain sequence, which
    // continues above the numbers handed out (1 to 5).
    keysmith::sequence::remove(&*mem, "inv").await.unwrap();
    keysmith::sequence::create(&*mem, &SequenceSpec::new("inv"))
        .await
        .unwrap();
    assert_eq!(next(2).await, json!({"values": [6, 7]}));
    server.abort();
}

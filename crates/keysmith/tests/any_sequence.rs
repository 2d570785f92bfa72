//! `AnySequence`, the one `next` for both kinds, costs the store calls its
//! docs promise, counted on a real (in-memory) store: two to open either
//! kind, one per numbered `next` (two with a period), none for a plain
//! `next` inside its block.

use std::sync::Arc;

use keysmith::numbers::{self, Numbering, Period};
use keysmith::sequence::{self, Sequence};
use keysmith::store::SequenceSpec;
use keysmith::store::memory::MemoryStore;
use keysmith::{AnySequence, Error, Values};

fn spec(name: &str) -> SequenceSpec {
    SequenceSpec {
        block: 10,
        ..SequenceSpec::new(name)
    }
}

/// The store calls `f` makes.
async fn calls<T>(store: &MemoryStore, f: impl std::future::Future<Output = T>) -> (T, u64) {
    let before = store.calls();
    let out = f.await;
    (out, store.calls() - before)
}

fn builder() -> keysmith::sequence::SequenceBuilder {
    Sequence::builder().prefetch(0.0)
}

#[tokio::test]
async fn round_trips_of_each_kind() {
    let mem = Arc::new(MemoryStore::new());
    let store: Arc<dyn keysmith::store::Store> = mem.clone();
    sequence::create(&*store, &spec("plain")).await.unwrap();
    let formatted = Numbering {
        template: Some("INV-{n:04}".into()),
        ..Numbering::default()
    };
    numbers::create(&*store, &spec("inv"), &formatted)
        .await
        .unwrap();
    let daily = Numbering {
        period: Some(Period::Day),
        ..Numbering::default()
    };
    numbers::create(&*store, &spec("daily"), &daily)
        .await
        .unwrap();

    // Plain: two calls to open, one reservation for the first block, none
    // inside it.
    let (plain, n) = calls(&mem, AnySequence::open(store.clone(), "plain", builder())).await;
    let plain = plain.unwrap();
    assert_eq!(n, 2, "opening a plain sequence");
    assert!(matches!(plain, AnySequence::Plain(_)));
    let (first, n) = calls(&mem, plain.next_n(3)).await;
    assert_eq!(first.unwrap(), Values::Plain(vec![1, 2, 3]));
    assert_eq!(n, 1, "the first block");
    let (more, n) = calls(&mem, plain.next_n(5)).await;
    assert_eq!(more.unwrap(), Values::Plain(vec![4, 5, 6, 7, 8]));
    assert_eq!(n, 0, "inside the block");

    // Formatted, no period: two to open, one per next.
    let (inv, n) = calls(&mem, AnySequence::open(store.clone(), "inv", builder())).await;
    let inv = inv.unwrap();
    assert_eq!(n, 2, "opening a numbered sequence");
    for round in 0..3 {
        let (got, n) = calls(&mem, inv.next_n(2)).await;
        let got = got.unwrap();
        assert_eq!(n, 1, "a numbered next without a period");
        assert_eq!(
            got.texts(),
            vec![
                format!("INV-{:04}", round * 2 + 1),
                format!("INV-{:04}", round * 2 + 2)
            ]
        );
        assert_eq!(
            got.json_values(true),
            vec![
                serde_json::json!(format!("INV-{:04}", round * 2 + 1)),
                serde_json::json!(format!("INV-{:04}", round * 2 + 2))
            ],
            "formatted numbers are text, whatever as_strings says"
        );
    }

    // A period: the store's clock, then the reservation.
    let daily = AnySequence::open(store.clone(), "daily", builder())
        .await
        .unwrap();
    let (got, n) = calls(&mem, daily.next_n(1)).await;
    assert_eq!(got.unwrap().len(), 1);
    assert_eq!(n, 2, "a numbered next with a period");

    // The plain JSON value: an integer, or a string for JavaScript.
    let taken = plain.next_n(1).await.unwrap();
    assert_eq!(taken.json_values(false), vec![serde_json::json!(9)]);
    assert_eq!(taken.json_values(true), vec![serde_json::json!("9")]);
    plain.close().await.unwrap();
}

/// A gap-free sequence opens (its numbers are taken with tickets) and its
/// `next` says so; a missing name says what exists.
#[tokio::test]
async fn wrong_kinds_and_missing_names() {
    let store: Arc<dyn keysmith::store::Store> = Arc::new(MemoryStore::new());
    let gapless = Numbering {
        gapless: true,
        ..Numbering::default()
    };
    numbers::create(&*store, &spec("gf"), &gapless)
        .await
        .unwrap();
    let gf = AnySequence::open(store.clone(), "gf", builder())
        .await
        .unwrap();
    let e = gf.next_n(1).await.unwrap_err();
    assert!(
        matches!(&e, Error::WrongKind(m) if m.contains("ticket")),
        "{e:?}"
    );
    let e = AnySequence::open(store.clone(), "gff", builder())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::NotFound { similar, .. } if similar.contains(&"gf".to_owned())),
        "{e:?}"
    );
    // The plain builder still refuses a numbered sequence, as before.
    let e = builder()
        .store(store.clone())
        .name("gf")
        .build()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::WrongKind(_)), "{e:?}");
}

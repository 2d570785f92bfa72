//! Leader-ordered sequences (`Order::Leader`) on one SQLite file opened
//! twice (two stores, as two processes would): one handle leads, the other
//! is told who leads; a closed leader is replaced at once, a dropped one
//! once its lease expired by the store's clock; every new leader starts
//! above everything the old one reserved.

use std::sync::Arc;
use std::time::Duration;

use keysmith::sequence::{self, LeaderOptions, LeaderSequence, Sequence};
use keysmith::store::{SequenceSpec, Store};
use keysmith::{AnySequence, Error, Values};

async fn two_stores() -> (tempfile::TempDir, Arc<dyn Store>, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("k.db").display());
    let a = keysmith::store::open(&url).await.unwrap();
    let b = keysmith::store::open(&url).await.unwrap();
    (dir, a, b)
}

fn options(addr: &str, ttl: Duration) -> LeaderOptions {
    LeaderOptions {
        advertise: Some(addr.to_owned()),
        ttl,
        block: Some(10),
        ..LeaderOptions::default()
    }
}

#[tokio::test]
async fn one_leads_the_other_is_told_where() {
    let (_dir, a, b) = two_stores().await;
    sequence::create_leader(&*a, &SequenceSpec::new("orders"))
        .await
        .unwrap();
    let la = LeaderSequence::open(
        a.clone(),
        "orders",
        options("http://10.0.0.1:1", Duration::from_secs(30)),
    )
    .await
    .unwrap();
    let lb = LeaderSequence::open(
        b.clone(),
        "orders",
        options("http://10.0.0.2:2", Duration::from_secs(30)),
    )
    .await
    .unwrap();
    let first = la.next_n(3).await.unwrap();
    assert_eq!(first, vec![1, 2, 3]);
    assert!(la.term().is_some());
    match lb.next_n(1).await {
        Err(Error::NotLeader {
            name,
            leader,
            holder,
        }) => {
            assert_eq!(name, "orders");
            assert_eq!(leader.as_deref(), Some("http://10.0.0.1:1"));
            assert!(holder.unwrap().starts_with("http://10.0.0.1:1 "));
        }
        other => panic!("expected NotLeader, got {other:?}"),
    }
    assert!(lb.term().is_none());
    // Values across blocks stay in order on the leader (block 10).
    let more = la.next_n(25).await.unwrap();
    assert_eq!(more, (4..29).collect::<Vec<_>>());

    // A closed leader releases its lease: the other leads at once, above
    // everything the first reserved.
    la.close().await.unwrap();
    let reserved = sequence::describe(&*a, "orders").await.unwrap().next;
    let v = lb.next_n(1).await.unwrap()[0];
    assert!(
        v >= reserved,
        "new leader's first value {v} is below {reserved}, reserved by the old one"
    );
    assert!(matches!(la.next_n(1).await, Err(Error::Closed { .. })));
}

#[tokio::test]
async fn a_dead_leader_is_replaced_once_its_lease_expired() {
    let (_dir, a, b) = two_stores().await;
    sequence::create_leader(&*a, &SequenceSpec::new("s"))
        .await
        .unwrap();
    let ttl = Duration::from_millis(400);
    let la = LeaderSequence::open(a.clone(), "s", options("http://h:1", ttl))
        .await
        .unwrap();
    let last_of_a = *la.next_n(5).await.unwrap().last().unwrap();
    let term_a = la.term().unwrap();
    // Dropped without close: the lease is not released, nobody renews it.
    drop(la);
    let reserved = sequence::describe(&*a, "s").await.unwrap().next;
    let lb = LeaderSequence::open(b.clone(), "s", options("http://h:2", ttl))
        .await
        .unwrap();
    // Until the store's clock passes the lease, b is told a leads.
    let mut refused = 0;
    let first = loop {
        match lb.next_n(1).await {
            Ok(v) => break v[0],
            Err(Error::NotLeader { leader, .. }) => {
                assert!(leader.is_none() || leader.as_deref() == Some("http://h:1"));
                refused += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(refused > 0, "b led before a's lease expired");
    assert!(first > last_of_a);
    assert!(first >= reserved);
    assert!(lb.term().unwrap() > term_a, "a new term has a higher fence");
}

#[tokio::test]
async fn any_sequence_routes_leader_sequences_and_handles_refuse_them() {
    let (_dir, a, _b) = two_stores().await;
    keysmith::numbers::create(
        &*a,
        &SequenceSpec::new("led"),
        &keysmith::numbers::Numbering {
            order: keysmith::store::Order::Leader,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let any = AnySequence::open(a.clone(), "led", Sequence::builder())
        .await
        .unwrap();
    assert!(matches!(any, AnySequence::Leader(_)));
    assert_eq!(any.next_n(2).await.unwrap(), Values::Plain(vec![1, 2]));
    any.close().await.unwrap();
    // A block handle would hand values out of order: refused, saying why.
    let e = Sequence::builder()
        .store(a.clone())
        .name("led")
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::WrongKind(m) if m.contains("leader-ordered")),
        "{e}"
    );
    // A leader order goes with nothing else.
    let e = keysmith::numbers::create(
        &*a,
        &SequenceSpec::new("bad"),
        &keysmith::numbers::Numbering {
            order: keysmith::store::Order::Leader,
            gapless: true,
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)));
    assert!(
        sequence::describe(&*a, "bad").await.is_err(),
        "nothing created"
    );
    // Bad options are refused naming the parameter.
    let e = LeaderSequence::open(
        a.clone(),
        "led",
        LeaderOptions {
            advertise: Some("ftp://x".into()),
            ..LeaderOptions::default()
        },
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("advertised address"), "{e}");
}

/// A closed leader records what it handed out and what it dropped: every
/// value it reserved is accounted for, none left "unaccounted".
#[tokio::test]
async fn a_closed_leader_accounts_for_every_value_it_reserved() {
    let (_dir, a, _b) = two_stores().await;
    sequence::create_leader(&*a, &SequenceSpec::new("orders"))
        .await
        .unwrap();
    let la = LeaderSequence::open(
        a.clone(),
        "orders",
        options("http://10.0.0.1:1", Duration::from_secs(30)),
    )
    .await
    .unwrap();
    let mut handed = 0;
    for n in [3, 1, 25, 7] {
        handed += la.next_n(n).await.unwrap().len() as i64;
    }
    la.close().await.unwrap();
    la.close().await.unwrap(); // a second close records nothing more
    let (row, counts) = a.read_counts("orders").await.unwrap();
    assert_eq!(counts.handed_out, handed);
    assert!(counts.abandoned > 0, "the values left in memory are a gap");
    assert_eq!(
        counts.unaccounted(&row),
        0,
        "reserved {} = handed out {} + abandoned {}",
        counts.reserved(&row),
        counts.handed_out,
        counts.abandoned
    );
}

//! The conformance suite on PostgreSQL, plus what only a server can show:
//! schemas, concurrent migration, errors naming the server, and a server
//! crash (`pg_ctl stop -m immediate`) and restart in the middle of a run.
//!
//! The servers are real, started by `keysmith_testsupport::postgres`. Where
//! PostgreSQL is not installed every test prints why it skips (or fails, with
//! `KEYSMITH_REQUIRE_BACKENDS=1`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keysmith::Error;
use keysmith::store::postgres::{PostgresStore, SCHEMA_VERSION};
use keysmith::store::{PoolSpec, PoolStore, SequenceStore};
use keysmith::store::{Put, SequenceSpec, Store};
use keysmith_testsupport::postgres::TempPostgres;

/// One server per test binary; each call gets a schema of its own, so each
/// store starts empty.
async fn fresh_store() -> Option<Arc<dyn Store>> {
    let pg = TempPostgres::shared()?;
    Some(Arc::new(
        PostgresStore::open(&url_with(pg, &fresh_schema()))
            .await
            .unwrap(),
    ))
}

keysmith::conformance_tests!(fresh_store);

fn fresh_schema() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("t{}", N.fetch_add(1, Ordering::Relaxed))
}

fn url_with(pg: &TempPostgres, schema: &str) -> String {
    format!("{}?schema={schema}", pg.url())
}

/// A plain client, to look at what keysmith wrote.
async fn admin(pg: &TempPostgres) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

#[tokio::test]
async fn each_schema_is_a_separate_store() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let (sa, sb) = (fresh_schema(), fresh_schema());
    let a = PostgresStore::open(&url_with(pg, &sa)).await.unwrap();
    let b = PostgresStore::open(&url_with(pg, &sb)).await.unwrap();
    assert_eq!(a.schema(), sa);
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    assert_eq!(
        b.read_sequence("s").await.unwrap(),
        None,
        "schemas share rows"
    );
    b.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    a.reserve_atomic("s", 50).await.unwrap();
    assert_eq!(b.read_sequence("s").await.unwrap().unwrap().next, 1);

    // The tables are where the URL said, and nowhere else.
    let admin = admin(pg).await;
    let tables: Vec<String> = admin
        .query(
            "SELECT table_name::text FROM information_schema.tables
             WHERE table_schema = $1 ORDER BY 1",
            &[&sa],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        tables,
        [
            "keysmith_meta",
            "number_counters",
            "numbering",
            "pool_marks",
            "pool_members",
            "pools",
            "sequence_counts",
            "sequences",
            "tickets",
            "tombstones",
            "workers"
        ]
    );
    let next: i64 = admin
        .query_one(
            &format!("SELECT next FROM \"{sa}\".sequences WHERE name = 's'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(next, 51);
}

#[tokio::test]
async fn without_a_schema_parameter_the_schema_is_keysmith() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    // Opened through the generic URL entry point, as the CLI does.
    let store = keysmith::store::open(&pg.url()).await.unwrap();
    store.ping().await.unwrap();
    let admin = admin(pg).await;
    let v: i32 = admin
        .query_one("SELECT schema_version FROM keysmith.keysmith_meta", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, SCHEMA_VERSION);
    // postgresql:// is accepted too.
    let alt = pg.url().replacen("postgres://", "postgresql://", 1);
    keysmith::store::open(&alt)
        .await
        .unwrap()
        .ping()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_bad_schema_name_is_refused_before_connecting() {
    for bad in ["Upper", "pg_catalog", "a-b", "x;drop", "9lives", ""] {
        let url = format!("postgres://u@127.0.0.1:1/db?schema={bad}");
        let e = keysmith::store::open(&url).await.unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("schema")),
            "{bad}: {e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_use_migrates_once() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let schema = fresh_schema();
    let url = url_with(pg, &schema);
    let mut opens = Vec::new();
    for _ in 0..12 {
        let url = url.clone();
        opens.push(tokio::spawn(async move { PostgresStore::open(&url).await }));
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
    let admin = admin(pg).await;
    let rows = admin
        .query(
            &format!("SELECT schema_version FROM \"{schema}\".keysmith_meta"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i32>(0), SCHEMA_VERSION);
    // And opening again later changes nothing.
    PostgresStore::open(&url).await.unwrap();
    assert!(stores[3].read_sequence("s").await.unwrap().is_some());
}

#[tokio::test]
async fn a_schema_from_a_newer_keysmith_is_refused() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let schema = fresh_schema();
    let url = url_with(pg, &schema);
    drop(PostgresStore::open(&url).await.unwrap());
    admin(pg)
        .await
        .execute(
            &format!("UPDATE \"{schema}\".keysmith_meta SET schema_version = 99"),
            &[],
        )
        .await
        .unwrap();
    let e = PostgresStore::open(&url).await.unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt(m) if m.contains("upgrade keysmith")),
        "{e}"
    );
}

#[tokio::test]
async fn a_user_without_create_rights_is_told_what_to_grant() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let admin = admin(pg).await;
    admin
        .batch_execute("CREATE ROLE plain LOGIN")
        .await
        .unwrap();
    let schema = fresh_schema();
    let url = url_with(pg, &schema).replace("keysmith@", "plain@");
    let e = PostgresStore::open(&url).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("grant")),
        "{e}"
    );
    // A schema the DBA made for the user is enough: keysmith does not ask
    // to create what exists.
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema} AUTHORIZATION plain"))
        .await
        .unwrap();
    let store = PostgresStore::open(&url).await.unwrap();
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    assert_eq!(store.reserve_atomic("s", 3).await.unwrap().end, 4);
}

#[tokio::test]
async fn a_server_that_is_not_there_is_unavailable_and_named() {
    let port = keysmith_testsupport::free_port();
    let url = format!("postgres://keysmith@127.0.0.1:{port}/postgres?timeout=5");
    let e = PostgresStore::open(&url).await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
}

#[tokio::test]
async fn a_missing_database_is_a_clear_error() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let url = pg.url().replace("/postgres", "/no_such_db");
    let e = PostgresStore::open(&url).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("no_such_db") && m.contains("create the database")),
        "{e}"
    );
}

#[tokio::test]
async fn large_pools_give_distinct_members_and_follow_swaps() {
    let Some(store) = fresh_store().await else {
        return;
    };
    store
        .create_pool(&PoolSpec {
            start: 1000,
            ..PoolSpec::new("big", 5000)
        })
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    for _ in 0..20 {
        let s = store.sample_members("big", 8).await.unwrap();
        assert_eq!(s.len(), 8);
        let set: BTreeSet<i64> = s.iter().copied().collect();
        assert_eq!(set.len(), 8, "repeats: {s:?}");
        assert!(s.iter().all(|v| (1000..6000).contains(v)), "{s:?}");
        seen.insert(set);
    }
    assert!(seen.len() > 1, "every caller got the same sample");
    // k above the size gives every member.
    assert_eq!(store.sample_members("big", 6000).await.unwrap().len(), 5000);
    // Members that moved up (swaps) are still found.
    assert!(store.swap_member("big", 1000, 6000).await.unwrap());
    let all: BTreeSet<i64> = store
        .sample_members("big", 10_000)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(all.len(), 5000);
    assert!(all.contains(&6000) && !all.contains(&1000));
}

/// The conformance check `pool_sample_is_uniform_after_swaps` on a pool
/// larger than 1024 members (the size up to which the old PostgreSQL
/// sampling was uniform): one member far ahead of the rest, behind a gap,
/// is sampled no more often than any other.
#[tokio::test]
async fn a_large_pool_samples_uniformly_after_swaps() {
    let Some(store) = fresh_store().await else {
        return;
    };
    const SIZE: i64 = 1100;
    store
        .create_pool(&PoolSpec {
            start: 0,
            ..PoolSpec::new("u", SIZE)
        })
        .await
        .unwrap();
    for i in 0..50 {
        assert!(
            store
                .swap_member("u", 3 + SIZE * i, 3 + SIZE * (i + 1))
                .await
                .unwrap()
        );
    }
    let members = store.list_members("u").await.unwrap();
    assert_eq!(members.len(), SIZE as usize);
    assert_eq!(members.last(), Some(&(3 + 50 * SIZE)));
    assert!(!members.contains(&3));
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..SIZE {
        let sample = store.sample_members("u", 200).await.unwrap();
        assert_eq!(sample.iter().collect::<BTreeSet<_>>().len(), 200);
        for v in sample {
            *counts.entry(v).or_insert(0u32) += 1;
        }
    }
    // 220,000 picks over 1100 members: 200 each on average, sd about 13.
    for m in members {
        let c = counts.get(&m).copied().unwrap_or(0);
        assert!(
            (100..=300).contains(&c),
            "member {m} sampled {c} times of 220000"
        );
    }
}

#[tokio::test]
async fn a_pool_created_again_with_another_size_is_sampled_at_its_new_size() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let url = url_with(pg, &fresh_schema());
    let a = PostgresStore::open(&url).await.unwrap();
    let b = PostgresStore::open(&url).await.unwrap();
    a.create_pool(&PoolSpec {
        start: 0,
        ..PoolSpec::new("p", 4)
    })
    .await
    .unwrap();
    assert_eq!(a.sample_members("p", 10).await.unwrap().len(), 4);
    // Dropped and created again by another store: `a` still remembers size 4.
    b.drop_pool("p").await.unwrap();
    b.create_pool(&PoolSpec {
        start: 100,
        ..PoolSpec::new("p", 10)
    })
    .await
    .unwrap();
    let mut s = a.sample_members("p", 10).await.unwrap();
    s.sort();
    assert_eq!(s, (100..110).collect::<Vec<_>>());
    b.drop_pool("p").await.unwrap();
    // Below the dropped pool's values on purpose: the size is what matters.
    b.create_pool(&PoolSpec {
        start: 7,
        start_below_dropped: true,
        ..PoolSpec::new("p", 2)
    })
    .await
    .unwrap();
    let mut s = a.sample_members("p", 10).await.unwrap();
    s.sort();
    assert_eq!(s, [7, 8]);
    b.drop_pool("p").await.unwrap();
    assert!(matches!(
        a.sample_members("p", 1).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn a_put_beyond_the_maximum_is_refused() {
    let Some(store) = fresh_store().await else {
        return;
    };
    let row = store
        .create_sequence(&SequenceSpec {
            max: 10,
            ..SequenceSpec::new("s")
        })
        .await
        .unwrap();
    let e = store
        .put_if_version("s", 12, row.version)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(store.read_sequence("s").await.unwrap(), Some(row));
}

/// Allocation across a crash of the server: tasks allocate with all three
/// strategies; the server is stopped with `pg_ctl stop -m immediate` while
/// they run; they see `Unavailable` and wait; the server restarts (crash
/// recovery); the row then lies above every value handed out before the
/// crash (each was committed with synchronous commit before it was
/// returned), and after the tasks resume no value has been handed out twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_crash_mid_run_loses_no_reservation_and_repeats_no_value() {
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let url = format!("{}?schema=crash&timeout=5", pg.url());
    let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&url).await.unwrap());
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();

    const TASKS: usize = 6;
    const AFTER: usize = 20; // reservations per task after the restart
    let handed_out = Arc::new(Mutex::new(Vec::<(i64, i64)>::new()));
    let done_before = Arc::new(AtomicUsize::new(0));
    let paused = Arc::new(AtomicUsize::new(0));
    let (up_tx, up_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (store, handed_out, done_before, paused) = (
            store.clone(),
            handed_out.clone(),
            done_before.clone(),
            paused.clone(),
        );
        let mut up_rx = up_rx.clone();
        tasks.push(tokio::spawn(async move {
            let mut after = 0;
            let mut unavailable = 0;
            while after < AFTER {
                match reserve(&*store, i % 3).await {
                    Ok(r) => {
                        handed_out.lock().unwrap().push(r);
                        if *up_rx.borrow() {
                            after += 1;
                        } else {
                            done_before.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    Err(Error::Unavailable(msg)) => {
                        assert!(!msg.contains('\n'), "{msg}");
                        unavailable += 1;
                        if !*up_rx.borrow() {
                            // Server down: say so once, then wait for it.
                            if unavailable == 1 {
                                paused.fetch_add(1, Ordering::SeqCst);
                            }
                            up_rx.wait_for(|up| *up).await.unwrap();
                        }
                    }
                    Err(e) => panic!("task {i}: unexpected error {e}"),
                }
            }
            unavailable
        }));
    }

    wait_until("60 reservations before the crash", || {
        done_before.load(Ordering::SeqCst) >= 60
    })
    .await;
    pg.stop_immediate();
    assert!(!pg.is_running());

    // With the server gone, calls fail with Unavailable (refused, not hung).
    for e in [
        store.read_sequence("s").await.unwrap_err(),
        store.reserve_atomic("s", 1).await.unwrap_err(),
        store.reserve_locked("s", 1).await.unwrap_err(),
        store.put_if_version("s", 1, 1).await.unwrap_err(),
        store.ping().await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::Unavailable(_)), "{e}");
        assert!(e.to_string().contains(&pg.port().to_string()), "{e}");
    }
    wait_until("every task to see the server down", || {
        paused.load(Ordering::SeqCst) == TASKS
    })
    .await;
    let before: Vec<(i64, i64)> = handed_out.lock().unwrap().clone();

    pg.restart();
    // The pool's connections died with the server: the first calls may still
    // report Unavailable, then the store reconnects.
    let deadline = Instant::now() + Duration::from_secs(60);
    let row = loop {
        match store.read_sequence("s").await {
            Ok(row) => break row.unwrap(),
            Err(Error::Unavailable(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("after restart: {e}"),
        }
    };
    let top = before.iter().map(|r| r.1).max().unwrap();
    assert!(
        row.next >= top,
        "crash lost a reservation: next is {} but {top} was handed out",
        row.next
    );

    up_tx.send(true).unwrap();
    let mut unavailable = 0;
    for t in tasks {
        unavailable += t.await.unwrap();
    }
    assert!(unavailable >= TASKS, "every task saw the server down");
    let mut all = handed_out.lock().unwrap().clone();
    assert_eq!(all.len(), before.len() + TASKS * AFTER);
    all.sort();
    for w in all.windows(2) {
        assert!(w[0].1 <= w[1].0, "value handed out twice: {w:?}");
    }
    // Values after the restart continue above everything before it.
    let after_min = all
        .iter()
        .filter(|r| !before.contains(r))
        .map(|r| r.0)
        .min()
        .unwrap();
    assert!(after_min >= top);
}

/// One reservation of 7 values with strategy 0 (optimistic), 1 (locked) or
/// 2 (atomic).
async fn reserve(store: &dyn Store, strategy: usize) -> keysmith::Result<(i64, i64)> {
    match strategy {
        0 => loop {
            let row = store.read_sequence("s").await?.unwrap();
            let plan = row.plan(7)?;
            if let Put::Done(_) = store.put_if_version("s", plan.end, row.version).await? {
                return Ok((plan.start, plan.end));
            }
        },
        1 => store.reserve_locked("s", 7).await.map(|r| (r.start, r.end)),
        _ => store.reserve_atomic("s", 7).await.map(|r| (r.start, r.end)),
    }
}

async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A schema at version 6 (before pools kept a residue class) is migrated
/// on open: the version goes to the current one, a pool created before
/// reads back without a class, its members as they were, and a drop leaves
/// a tombstone (version 8).
#[tokio::test]
async fn a_version_6_schema_gets_the_pool_class_columns() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let schema = fresh_schema();
    let url = url_with(pg, &schema);
    let a = PostgresStore::open(&url).await.unwrap();
    a.create_pool(&PoolSpec::new("old", 3)).await.unwrap();
    drop(a);
    let admin = admin(pg).await;
    admin
        .batch_execute(&format!(
            "ALTER TABLE \"{schema}\".pools DROP COLUMN class_increment, DROP COLUMN class_offset;
             DROP TABLE \"{schema}\".tombstones;
             UPDATE \"{schema}\".keysmith_meta SET schema_version = 6;"
        ))
        .await
        .unwrap();
    let b = PostgresStore::open(&url).await.unwrap();
    let old = b.read_pool("old").await.unwrap().unwrap();
    assert_eq!((old.start, old.size, old.residue), (1, 3, None));
    assert_eq!(b.list_members("old").await.unwrap(), [1, 2, 3]);
    let v: i32 = admin
        .query_one(
            &format!("SELECT schema_version FROM \"{schema}\".keysmith_meta"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, SCHEMA_VERSION);
    // The columns only hold a class keysmith writes.
    let e = admin
        .execute(
            &format!("UPDATE \"{schema}\".pools SET class_increment = 4 WHERE name = 'old'"),
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.as_db_error().and_then(|d| d.constraint()),
        Some("pools_class"),
        "{e:?}"
    );
    assert!(b.swap_member("old", 1, 4).await.unwrap());
    b.drop_pool("old").await.unwrap();
    let again = b.create_pool(&PoolSpec::new("old", 3)).await.unwrap();
    assert_eq!(again.start, 4, "continues above the number handed out");
}

/// The tombstone is in the database: a sequence and a pool dropped through
/// one store, created again through a store opened afterwards, continue
/// above the values they handed out.
#[tokio::test]
async fn a_tombstone_survives_reopening_the_store() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let url = url_with(pg, &fresh_schema());
    let a = PostgresStore::open(&url).await.unwrap();
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    let r = a.reserve_atomic("s", 40).await.unwrap();
    a.drop_sequence("s").await.unwrap();
    a.create_pool(&PoolSpec::new("p", 3)).await.unwrap();
    assert!(a.swap_member("p", 1, 4).await.unwrap());
    a.drop_pool("p").await.unwrap();
    drop(a);
    let b = PostgresStore::open(&url).await.unwrap();
    let s = b.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    assert_eq!(s.start, r.end);
    let p = b.create_pool(&PoolSpec::new("p", 3)).await.unwrap();
    assert_eq!(p.start, 4);
}

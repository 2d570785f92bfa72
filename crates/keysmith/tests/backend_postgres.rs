//! The conformance suite on PostgreSQL, plus what only a server can show:
//! schemas, concurrent migration, errors naming the server, and a server
//! crash (`pg_ctl stop -m immediate`) and restart in the middle of a run.
//!
//! The servers are real, started by `keysmith_testsupport::postgres`. Where
//! PostgreSQL is not installed every test prints why it skips (or fails, with
//! `KEYSMITH_REQUIRE_BACKENDS=1`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use keysmith::Error;
use keysmith::store::postgres::{PostgresStore, SCHEMA_VERSION};
use keysmith::store::{PoolSpec, PoolStore, SequenceStore};
use keysmith::store::{SequenceSpec, Store};
use keysmith_testsupport::postgres::TempPostgres;
use keysmith_testsupport::processes::Postgres;

#[path = "common/crash.rs"]
mod crash;
#[path = "common/pools.rs"]
mod pools;
#[path = "common/reopen.rs"]
mod reopen;
#[path = "common/servers.rs"]
mod servers;

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

keysmith::conformance_tests!(fresh_store, one_step_reservation = true);

/// A fresh store URL: a schema of its own on the shared server.
fn fresh_url() -> Option<String> {
    TempPostgres::shared().map(|pg| url_with(pg, &fresh_schema()))
}

servers::server_tests!(fresh_url);

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
    servers::concurrent_first_use_migrates_once(&url_with(pg, &schema), async || {
        let rows = admin(pg)
            .await
            .query(
                &format!("SELECT schema_version FROM \"{schema}\".keysmith_meta"),
                &[],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get::<_, i32>(0), SCHEMA_VERSION);
    })
    .await;
}

#[tokio::test]
async fn a_schema_from_a_newer_keysmith_is_refused() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let schema = fresh_schema();
    reopen::a_newer_schema_is_refused(&url_with(pg, &schema), async || {
        admin(pg)
            .await
            .execute(
                &format!("UPDATE \"{schema}\".keysmith_meta SET schema_version = 99"),
                &[],
            )
            .await
            .unwrap();
    })
    .await;
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
    servers::a_server_that_is_not_there_is_unavailable_and_named(&url, port, None).await;
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
async fn a_put_beyond_the_maximum_is_refused() {
    let Some(store) = fresh_store().await else {
        return;
    };
    servers::a_put_beyond_the_maximum_is_refused(&*store).await;
}

/// Allocation across a crash of the server: tasks allocate with all three
/// strategies; the server is stopped with `pg_ctl stop -m immediate` while
/// they run; they see `Unavailable` and wait; the server restarts (crash
/// recovery); the row then lies above every value handed out before the
/// crash (each was committed with synchronous commit before it was
/// returned), and after the tasks resume no value has been handed out twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_crash_mid_run_loses_no_reservation_and_repeats_no_value() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    crash::server_crash_mid_run_loses_no_reservation_and_repeats_no_value(&pg).await;
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
            "ALTER TABLE \"{schema}\".pools DROP COLUMN class_increment, DROP COLUMN class_offset,
                 DROP COLUMN incarnation;
             ALTER TABLE \"{schema}\".sequences DROP COLUMN incarnation;
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

/// A schema at version 10 (before lives of a name) is migrated on open:
/// the columns `incarnation` (sequences, pools) and `version` (tombstones)
/// are added, 0 (unknown) for what was there; `reserve`, `write_if_version`
/// and `lock_row` return the row's incarnation as their last column;
/// sequences and pools from before go on as they were; a drop records the
/// version the old row reached, so its name's next life starts above it.
#[tokio::test]
async fn a_version_10_schema_gets_the_lives_columns() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let schema = fresh_schema();
    let url = url_with(pg, &schema);
    let a = PostgresStore::open(&url).await.unwrap();
    a.create_sequence(&SequenceSpec::new("old")).await.unwrap();
    a.reserve_locked("old", 10).await.unwrap();
    a.create_pool(&PoolSpec::new("oldp", 3)).await.unwrap();
    a.create_sequence(&SequenceSpec::new("gone")).await.unwrap();
    let gone = a.reserve_locked("gone", 5).await.unwrap();
    a.drop_sequence("gone").await.unwrap();
    drop(a);
    // Version 10's tables. Its functions differ from this version's only
    // by the last OUT column, which the migration drops and creates again
    // whatever it finds (their arguments are the same).
    let admin = admin(pg).await;
    let s = format!("\"{schema}\"");
    admin
        .batch_execute(&format!(
            "ALTER TABLE {s}.sequences DROP COLUMN incarnation;
             ALTER TABLE {s}.pools DROP COLUMN incarnation;
             ALTER TABLE {s}.tombstones DROP COLUMN version;
             UPDATE {s}.keysmith_meta SET schema_version = 10;"
        ))
        .await
        .unwrap();
    let b = PostgresStore::open(&url).await.unwrap();
    let v: i32 = admin
        .query_one(
            &format!("SELECT schema_version FROM {s}.keysmith_meta"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, SCHEMA_VERSION);
    for (table, column) in [
        ("sequences", "incarnation"),
        ("pools", "incarnation"),
        ("tombstones", "version"),
    ] {
        let r = admin
            .query_opt(
                "SELECT data_type, is_nullable, column_default FROM information_schema.columns
                 WHERE table_schema = $1 AND table_name = $2 AND column_name = $3",
                &[&schema, &table, &column],
            )
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no column {table}.{column} after the upgrade"));
        let (ty, nullable, default): (String, String, Option<String>) =
            (r.get(0), r.get(1), r.get(2));
        assert_eq!(
            (ty.as_str(), nullable.as_str(), default.as_deref()),
            ("bigint", "NO", Some("0")),
            "{table}.{column}"
        );
    }
    // The functions' last column is the row's incarnation, by name.
    let r = admin
        .query_one(
            &format!("SELECT first_value, row_incarnation FROM {s}.reserve('old', 1)"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (11, 0));
    let r = admin
        .query_one(&format!("SELECT * FROM {s}.lock_row('old')"), &[])
        .await
        .unwrap();
    assert_eq!(r.columns().last().unwrap().name(), "r_incarnation");
    let r = admin
        .query_one(
            &format!("SELECT * FROM {s}.write_if_version('old', 0, 1, NULL, NULL, NULL, NULL)"),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.columns().last().unwrap().name(), "r_incarnation");
    assert!(!r.get::<_, bool>(0), "version 0 never matches");
    // A sequence and a pool from before: life 0 (unknown), working as before.
    let old = b.read_sequence("old").await.unwrap().unwrap();
    assert_eq!((old.incarnation, old.next), (0, 12));
    let r = b.reserve_locked("old", 3).await.unwrap();
    assert_eq!((r.start, r.end, r.incarnation), (12, 15, 0));
    let atomic = b.reserve_atomic("old", 2).await.unwrap();
    assert_eq!((atomic.start, atomic.incarnation), (15, 0));
    let pool = b.read_pool("oldp").await.unwrap().unwrap();
    assert_eq!(pool.incarnation, 0);
    assert!(b.swap_member("oldp", 1, 4).await.unwrap());
    // A tombstone from before knows no version: the next life of its name
    // starts above its values, at life 1.
    let again = b.create_sequence(&SequenceSpec::new("gone")).await.unwrap();
    assert!(again.start >= gone.end, "{again:?} {gone:?}");
    assert_eq!((again.version, again.incarnation), (1, 1));
    // A drop now records the version an old row reached.
    let old = b.read_sequence("old").await.unwrap().unwrap();
    b.drop_sequence("old").await.unwrap();
    let next = b.create_sequence(&SequenceSpec::new("old")).await.unwrap();
    assert!(next.incarnation > old.version, "{next:?} {old:?}");
    assert_eq!(next.version, next.incarnation);
    b.drop_pool("oldp").await.unwrap();
    let p = b.create_pool(&PoolSpec::new("oldp", 3)).await.unwrap();
    assert!(
        p.incarnation >= 1 && p.start > 1,
        "above the member taken: {p:?}"
    );
}

//! `sequence::adopt` against real tables: an SQLite file and PostgreSQL
//! schemas, with awkward names, empty tables, wrong columns and dry runs.
//! Whatever fails changes nothing.

use std::sync::Arc;

use keysmith::Error;
use keysmith::sequence::{self, AdoptAction, AdoptSource};
use keysmith::store::{SequenceSpec, Store, memory::MemoryStore};
use keysmith_testsupport::postgres::TempPostgres;

fn store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

fn source(database: &str, table: &str, column: &str) -> AdoptSource {
    AdoptSource {
        database: database.to_owned(),
        table: table.to_owned(),
        column: column.to_owned(),
    }
}

async fn next_of(store: &Arc<dyn Store>, name: &str) -> Option<i64> {
    store.read_sequence(name).await.unwrap().map(|r| r.next)
}

/// A SQLite file with `orders(id)` up to 1042, an empty table, a text column
/// and a table whose name needs quoting.
fn sqlite_db() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        r#"
        CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT);
        INSERT INTO orders (id, note) VALUES (7, 'a'), (1042, 'b'), (300, 'c');
        CREATE TABLE empty (id INTEGER PRIMARY KEY);
        CREATE TABLE "we""ird; --" ("k e y" INTEGER);
        INSERT INTO "we""ird; --" VALUES (55);
        CREATE TABLE loose (id);
        INSERT INTO loose VALUES (3), ('x');
        "#,
    )
    .unwrap();
    (dir, format!("sqlite://{}", path.display()))
}

#[tokio::test]
async fn sqlite_tables_move_create_or_leave_the_sequence() {
    let (_dir, db) = sqlite_db();
    let store = store();
    sequence::create(&*store, &SequenceSpec::new("orders"))
        .await
        .unwrap();
    let orders = source(&db, "orders", "id");

    let dry = sequence::adopt(&*store, "orders", &orders, false, true)
        .await
        .unwrap();
    assert_eq!(
        (dry.largest, dry.next_before, dry.next_after, dry.action),
        (Some(1042), Some(1), 1043, AdoptAction::Moved)
    );
    assert_eq!(next_of(&store, "orders").await, Some(1), "a dry run wrote");

    let done = sequence::adopt(&*store, "orders", &orders, false, false)
        .await
        .unwrap();
    assert_eq!((done.next_after, done.action), (1043, AdoptAction::Moved));
    assert_eq!(next_of(&store, "orders").await, Some(1043));
    let again = sequence::adopt(&*store, "orders", &orders, false, false)
        .await
        .unwrap();
    assert_eq!(
        (again.next_after, again.action),
        (1043, AdoptAction::Unchanged)
    );

    let made = sequence::adopt(
        &*store,
        "weird",
        &source(&db, "we\"ird; --", "k e y"),
        true,
        false,
    )
    .await
    .unwrap();
    assert_eq!((made.action, made.next_after), (AdoptAction::Created, 56));
    assert_eq!(next_of(&store, "weird").await, Some(56));
    let empty = sequence::adopt(&*store, "fresh", &source(&db, "empty", "id"), true, false)
        .await
        .unwrap();
    assert_eq!((empty.largest, empty.next_after), (None, 1));
}

#[tokio::test]
async fn sqlite_mistakes_say_what_is_wrong_and_change_nothing() {
    let (dir, db) = sqlite_db();
    let store = store();
    sequence::create(
        &*store,
        &SequenceSpec {
            max: 500,
            ..SequenceSpec::new("small")
        },
    )
    .await
    .unwrap();
    let cases = [
        (source(&db, "nope", "id"), "no table \"nope\""),
        (source(&db, "orders", "nope"), "no column \"nope\""),
        (source(&db, "loose", "id"), "not integers"),
        (source(&db, "orders", "id"), "max"),
        (source("redis://x/y", "orders", "id"), "scheme \"redis\""),
        (
            source(
                &format!("sqlite://{}", dir.path().join("missing.db").display()),
                "orders",
                "id",
            ),
            "no database file",
        ),
    ];
    for (src, says) in cases {
        for dry_run in [true, false] {
            let e = sequence::adopt(&*store, "small", &src, false, dry_run)
                .await
                .unwrap_err();
            assert!(e.to_string().contains(says), "{src:?}: {e}");
        }
    }
    assert_eq!(next_of(&store, "small").await, Some(1));
    let e = sequence::adopt(
        &*store,
        "absent",
        &source(&db, "orders", "id"),
        false,
        false,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert_eq!(next_of(&store, "absent").await, None);
    assert!(
        !dir.path().join("missing.db").exists(),
        "adopt created a file"
    );
}

#[tokio::test]
async fn postgres_tables_in_any_schema() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let (client, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(
            r#"
            DROP SCHEMA IF EXISTS adopt_app CASCADE;
            CREATE SCHEMA adopt_app;
            CREATE TABLE adopt_app.invoices (id bigint PRIMARY KEY, code text);
            INSERT INTO adopt_app.invoices VALUES (10, 'a'), (99999, 'b');
            CREATE TABLE adopt_app."Mixed Case" ("Id" integer);
            INSERT INTO adopt_app."Mixed Case" VALUES (41);
            DROP TABLE IF EXISTS public.adopt_plain;
            CREATE TABLE public.adopt_plain (n smallint);
            INSERT INTO public.adopt_plain VALUES (12);
            "#,
        )
        .await
        .unwrap();
    let db = pg.url();
    let store = store();
    sequence::create(&*store, &SequenceSpec::new("inv"))
        .await
        .unwrap();
    let r = sequence::adopt(
        &*store,
        "inv",
        &source(&db, "adopt_app.invoices", "id"),
        false,
        false,
    )
    .await
    .unwrap();
    assert_eq!((r.largest, r.next_after), (Some(99999), 100_000));
    let r = sequence::adopt(
        &*store,
        "mixed",
        &source(&db, "adopt_app.Mixed Case", "Id"),
        true,
        false,
    )
    .await
    .unwrap();
    assert_eq!(r.next_after, 42);
    let r = sequence::adopt(
        &*store,
        "plain",
        &source(&db, "adopt_plain", "n"),
        true,
        true,
    )
    .await
    .unwrap();
    assert_eq!(
        (r.action, r.next_after, r.dry_run),
        (AdoptAction::Created, 13, true)
    );
    assert_eq!(next_of(&store, "plain").await, None, "a dry run created it");
    for (src, says) in [
        (
            source(&db, "adopt_app.nope", "id"),
            "no table adopt_app.nope",
        ),
        (
            source(&db, "adopt_app.invoices", "nope"),
            "no column \"nope\"",
        ),
        (
            source(&db, "adopt_app.invoices", "code"),
            "is text, not an integer",
        ),
    ] {
        let e = sequence::adopt(&*store, "inv", &src, false, false)
            .await
            .unwrap_err();
        assert!(e.to_string().contains(says), "{src:?}: {e}");
    }
    assert_eq!(next_of(&store, "inv").await, Some(100_000));
}

/// `adopt --create` over a dropped name: the store continues above the
/// values the dropped sequence handed out when they are above the table's
/// largest key, and the report says where it really starts.
#[tokio::test]
async fn adopt_create_over_a_dropped_name_continues_above_it() {
    let (_dir, db) = sqlite_db();
    let store = store();
    sequence::create(&*store, &SequenceSpec::new("orders"))
        .await
        .unwrap();
    let r = store.reserve_atomic("orders", 5000).await.unwrap();
    sequence::remove(&*store, "orders").await.unwrap();
    let report = sequence::adopt(&*store, "orders", &source(&db, "orders", "id"), true, false)
        .await
        .unwrap();
    assert_eq!(report.action, AdoptAction::Created);
    assert_eq!(
        report.next_after, r.end,
        "above the dropped values, not 1043"
    );
    assert_eq!(next_of(&store, "orders").await, Some(r.end));
}

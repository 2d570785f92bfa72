//! Shard sets on real databases: SQLite files and PostgreSQL schemas as
//! shards. Keys mapped from rows (NULLs, foreign shards, wrong types),
//! fan-out and merge, identities recorded by `init` and checked on every
//! connection, a swapped configuration refused before any query runs, and a
//! failed `init` that changes nothing anywhere.
//!
//! PostgreSQL tests use one throwaway server per test binary and a schema
//! per shard; where PostgreSQL is not installed they print why they skip
//! (or fail, with `KEYSMITH_REQUIRE_BACKENDS=1`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use keysmith::Error;
use keysmith::shard_key::{
    Duplicates, Id, IdType, KeyMapping, KeySchema, ShardKey, ShardRanges, foreign_shards,
};
use keysmith::shard_set::{
    IDENTITY_TABLE, InitAction, ShardConnection, ShardDb, ShardSet, postgres_error, sqlite_error,
};
use keysmith_testsupport::postgres::TempPostgres;
use tempfile::TempDir;

fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// Three SQLite shard files with an `orders` table: order id, the customer's
/// shard and id (NULL for a walk-in sale), the amount.
fn three_sqlite_shards(dir: &TempDir) -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = (1..=3)
        .map(|i| dir.path().join(format!("shard-{i}.db")))
        .collect();
    for (i, p) in paths.iter().enumerate() {
        let conn = rusqlite::Connection::open(p).unwrap();
        conn.execute_batch(
            "CREATE TABLE orders (
                 order_id INTEGER PRIMARY KEY,
                 customer_shard INTEGER,
                 customer_id INTEGER,
                 amount REAL NOT NULL
             );",
        )
        .unwrap();
        let shard = i as i64 + 1;
        // Orders 10*shard+1 and +2; the first one's customer lives on the
        // next shard (a foreign shard), the second is a walk-in (NULL).
        conn.execute(
            "INSERT INTO orders VALUES (?1, ?2, ?3, 9.5), (?4, NULL, NULL, 1.0)",
            [10 * shard + 1, shard % 3 + 1, 100 + shard, 10 * shard + 2],
        )
        .unwrap();
    }
    paths
}

fn set_of(pairs: &[(u16, String)]) -> ShardSet {
    let mut set = ShardSet::new();
    for (id, url) in pairs {
        set.add(*id, url).unwrap();
    }
    set
}

fn sqlite_has_identity(path: &Path) -> bool {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE name = ?1",
        [IDENTITY_TABLE],
        |r| r.get(0),
    )
    .unwrap()
}

/// An order as the fan-out returns it.
#[derive(Debug, Clone, PartialEq)]
struct Order {
    key: ShardKey,
    customer: Option<ShardKey>,
}

fn order_mapping() -> KeyMapping {
    KeyMapping::new('o', "order_id").unwrap()
}

fn customer_mapping() -> KeyMapping {
    KeyMapping::foreign("customer_shard", 'c', "customer_id").unwrap()
}

/// Reads the orders among `keys` from an SQLite shard.
async fn sqlite_orders(conn: ShardConnection, keys: Vec<ShardKey>) -> keysmith::Result<Vec<Order>> {
    let shard = conn.shard();
    let ids: Vec<i64> = keys
        .iter()
        .map(|k| match k.record() {
            Id::I64(v) => *v,
            other => panic!("unexpected id {other}"),
        })
        .collect();
    conn.sqlite()?
        .run(move |c| {
            let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let mut stmt = c
                .prepare(&format!(
                    "SELECT order_id, customer_shard, customer_id FROM orders WHERE order_id IN ({list}) ORDER BY order_id DESC"
                ))
                .map_err(sqlite_error)?;
            let mut rows = stmt.query([]).map_err(sqlite_error)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(sqlite_error)? {
                out.push(Order {
                    key: order_mapping().required().from_sqlite_row(row, shard)?.unwrap(),
                    customer: customer_mapping().from_sqlite_row(row, shard)?,
                });
            }
            Ok(out)
        })
        .await
}

#[tokio::test]
async fn sqlite_rows_map_to_keys_with_nulls_and_foreign_shards() {
    let dir = TempDir::new().unwrap();
    let paths = three_sqlite_shards(&dir);
    let set = set_of(&[(1, sqlite_url(&paths[0])), (2, sqlite_url(&paths[1]))]);
    set.init().await.unwrap();

    let conn = set.connect(2).await.unwrap();
    assert_eq!(conn.shard(), 2);
    let rows = conn
        .sqlite()
        .unwrap()
        .run(|c| {
            let mut stmt = c
                .prepare("SELECT * FROM orders ORDER BY order_id")
                .map_err(sqlite_error)?;
            let mut rows = stmt.query([]).map_err(sqlite_error)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(sqlite_error)? {
                out.push((
                    order_mapping().from_sqlite_row(row, 2)?,
                    customer_mapping().from_sqlite_row(row, 2)?,
                    customer_mapping().required().from_sqlite_row(row, 2),
                    KeyMapping::new('o', "amount")?.from_sqlite_row(row, 2),
                ));
            }
            Ok(out)
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    // Order 21: its own key on the connection's shard, its customer on shard 3.
    assert_eq!(rows[0].0, Some(ShardKey::new('o', 2, 21i64).unwrap()));
    assert_eq!(rows[0].1, Some(ShardKey::new('c', 3, 102i64).unwrap()));
    assert_eq!(
        foreign_shards(rows[0].1.iter(), conn.shard()),
        [3].into_iter().collect()
    );
    // Order 22: a walk-in, so NULL customer: None, or an error naming the
    // column when required.
    assert_eq!(rows[1].0, Some(ShardKey::new('o', 2, 22i64).unwrap()));
    assert_eq!(rows[1].1, None);
    let err = rows[1].2.clone().unwrap_err().to_string();
    assert!(
        err.contains("\"customer_shard\"") && err.contains("NULL"),
        "{err}"
    );
    // A REAL column is no key: the error names the column and its type.
    let err = rows[0].3.clone().unwrap_err().to_string();
    assert!(err.contains("\"amount\"") && err.contains("REAL"), "{err}");

    // The reverse: the key's parts as parameters find the row again.
    let m = customer_mapping();
    let customer = ShardKey::new('c', 3, 102i64).unwrap();
    let params = m.params(&customer).unwrap();
    let order_id: i64 = conn
        .sqlite()
        .unwrap()
        .run(move |c| {
            c.query_row(
                "SELECT order_id FROM orders WHERE customer_shard = ?1 AND customer_id = ?2",
                rusqlite::params_from_iter(params),
                |r| r.get(0),
            )
            .map_err(sqlite_error)
        })
        .await
        .unwrap();
    assert_eq!(order_id, 21);
}

#[tokio::test]
async fn fan_out_queries_only_the_shards_the_keys_touch_and_merges_by_key() {
    let dir = TempDir::new().unwrap();
    let paths = three_sqlite_shards(&dir);
    let set = set_of(&[
        (1, sqlite_url(&paths[0])),
        (2, sqlite_url(&paths[1])),
        (3, sqlite_url(&paths[2])),
    ]);
    set.init().await.unwrap();

    let keys = vec![
        ShardKey::new('o', 3, 32i64).unwrap(),
        ShardKey::new('o', 1, 11i64).unwrap(),
        ShardKey::new('o', 3, 31i64).unwrap(),
        ShardKey::new('o', 1, 11i64).unwrap(), // twice: asked once
        ShardKey::new('o', 1, 99i64).unwrap(), // no such order
        ShardKey::EMPTY,                       // names no shard
    ];
    let visited = Arc::new(Mutex::new(Vec::new()));
    let v = Arc::clone(&visited);
    let orders = set
        .query_by_keys(
            &keys,
            Duplicates::Reject,
            |o: &Order| &o.key,
            move |conn, keys| {
                v.lock().unwrap().push((conn.shard(), keys.clone()));
                sqlite_orders(conn, keys)
            },
        )
        .await
        .unwrap();
    let got: Vec<String> = orders.iter().map(|o| o.key.to_string()).collect();
    // Merged in key order (record id first), whatever each shard's order.
    assert_eq!(got, [r#"["o",1,11]"#, r#"["o",3,31]"#, r#"["o",3,32]"#]);
    assert_eq!(
        orders[0].customer,
        Some(ShardKey::new('c', 2, 101i64).unwrap())
    );
    assert_eq!(orders[2].customer, None);
    let mut visited = visited.lock().unwrap().clone();
    visited.sort_by_key(|(s, _)| *s);
    assert_eq!(
        visited,
        vec![
            (
                1,
                vec![
                    ShardKey::new('o', 1, 11i64).unwrap(),
                    ShardKey::new('o', 1, 99i64).unwrap()
                ]
            ),
            (
                3,
                vec![
                    ShardKey::new('o', 3, 31i64).unwrap(),
                    ShardKey::new('o', 3, 32i64).unwrap()
                ]
            ),
        ],
        "shard 2 is not touched, each shard gets its own keys once, in order"
    );

    // The shards' queries run at the same time: each waits at a barrier
    // that opens only when all three have arrived (sequential queries would
    // never pass it, and the timeout turns that into a failure).
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let all =
        [(1, 11), (2, 21), (3, 31)].map(|(s, id)| ShardKey::new('o', s, i64::from(id)).unwrap());
    let b = Arc::clone(&barrier);
    let orders = set
        .query_by_keys(
            &all,
            Duplicates::Reject,
            |o: &Order| &o.key,
            move |conn, keys| {
                let b = Arc::clone(&b);
                async move {
                    tokio::time::timeout(std::time::Duration::from_secs(60), b.wait())
                        .await
                        .expect("every shard's query is under way at once");
                    sqlite_orders(conn, keys).await
                }
            },
        )
        .await
        .unwrap();
    assert_eq!(orders.len(), 3);

    // A key of a shard the set lacks: refused before any query runs.
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    let err = set
        .query_by_keys(
            &[
                ShardKey::new('o', 1, 11i64).unwrap(),
                ShardKey::new('o', 9, 1i64).unwrap(),
            ],
            Duplicates::Reject,
            |o: &Order| &o.key,
            move |conn, keys| {
                r.fetch_add(1, Ordering::SeqCst);
                sqlite_orders(conn, keys)
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("shard(s) 9") && err.contains("1, 2, 3"),
        "{err}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);

    // A failing query names its shard.
    let err = set
        .query_by_keys(
            &[ShardKey::new('o', 2, 21i64).unwrap()],
            Duplicates::Reject,
            |o: &Order| &o.key,
            |conn, _keys| async move {
                conn.sqlite()?
                    .run(|c| {
                        c.execute("SELECT * FROM no_such_table", [])
                            .map_err(sqlite_error)?;
                        Ok(Vec::<Order>::new())
                    })
                    .await
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("shard 2") && err.contains("no_such_table"),
        "{err}"
    );

    // A shard that answers one key twice: merge_by_key refuses, naming it.
    let err = set
        .query_by_keys(
            &[ShardKey::new('o', 1, 11i64).unwrap()],
            Duplicates::KeepLeft,
            |o: &Order| &o.key,
            |conn, keys| async move {
                let mut twice = sqlite_orders(conn, keys).await?;
                twice.extend(twice.clone());
                Ok(twice)
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("shard 1")
            && err.contains(r#"["o",1,11]"#)
            && err.contains("not strictly ordered"),
        "{err}"
    );
}

#[tokio::test]
async fn a_swapped_configuration_is_refused_before_any_query_runs() {
    let dir = TempDir::new().unwrap();
    let paths = three_sqlite_shards(&dir);
    let (a, b, c) = (
        sqlite_url(&paths[0]),
        sqlite_url(&paths[1]),
        sqlite_url(&paths[2]),
    );
    set_of(&[(1, a.clone()), (2, b.clone()), (3, c.clone())])
        .init()
        .await
        .unwrap();
    let swapped = set_of(&[(1, b.clone()), (2, a.clone()), (3, c.clone())]);

    let err = swapped.check().await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let err = err.to_string();
    assert!(
        err.contains("shard 1 (") && err.contains("records shard id 2"),
        "{err}"
    );
    assert!(
        err.contains("shard 2 (") && err.contains("records shard id 1"),
        "{err}"
    );
    assert!(!err.contains("shard 3 ("), "shard 3 is fine: {err}");
    let reports = swapped.inspect().await;
    let fine: Vec<u16> = reports
        .iter()
        .filter(|r| r.is_ok())
        .map(|r| r.shard)
        .collect();
    assert_eq!(fine, [3]);

    // A single connection, and a fan-out: refused, and the query never runs.
    let err = swapped.connect(1).await.unwrap_err().to_string();
    assert!(
        err.contains("shard 1") && err.contains("records shard id 2"),
        "{err}"
    );
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    let err = swapped
        .query_by_keys(
            &[
                ShardKey::new('o', 3, 31i64).unwrap(),
                ShardKey::new('o', 2, 21i64).unwrap(),
            ],
            Duplicates::Reject,
            |o: &Order| &o.key,
            move |conn, keys| {
                r.fetch_add(1, Ordering::SeqCst);
                sqlite_orders(conn, keys)
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("shard 2") && err.contains("records shard id 1"),
        "{err}"
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "no query ran, not even shard 3's"
    );

    // Identity ranges get the same check: a sequence for shard 2's range
    // is not opened in shard 1's database.
    let ranges = ShardRanges::new(0, 1000, 4).unwrap();
    let err = ranges
        .open_shard_sequence(&swapped, "ids", 2, 10)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("records shard id 1"), "{err}");
    let right = set_of(&[(1, a), (2, b), (3, c)]);
    let seq = ranges
        .open_shard_sequence(&right, "ids", 2, 10)
        .await
        .unwrap();
    let id = seq.next().await.unwrap();
    assert_eq!(id, 2000);
    ranges.check_owner(2, id).unwrap();
    let err = ranges.check_owner(1, id).unwrap_err().to_string();
    assert!(
        err.contains("shard 1") && err.contains("shard 2's range"),
        "{err}"
    );
    // A shard outside the ranges is refused too.
    assert!(
        ranges
            .open_shard_sequence(&right, "ids", 7, 10)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn init_records_ids_once_and_connections_need_them() {
    let dir = TempDir::new().unwrap();
    let paths = three_sqlite_shards(&dir);
    let fresh = dir.path().join("new/../fresh.db");
    let set = set_of(&[(1, sqlite_url(&paths[0])), (7, sqlite_url(&fresh))]);

    // Before init: no recorded id, and a missing file is not created.
    let err = set.connect(1).await.unwrap_err().to_string();
    assert!(
        err.contains("records no shard id") && err.contains("init"),
        "{err}"
    );
    let err = set.connect(7).await.unwrap_err().to_string();
    assert!(err.contains("no database file"), "{err}");
    assert!(!dir.path().join("fresh.db").exists());
    let err = set.connect(5).await.unwrap_err().to_string();
    assert!(err.contains("shard 5 is not in the shard set"), "{err}");

    assert_eq!(
        set.init().await.unwrap(),
        [(1, InitAction::Recorded), (7, InitAction::Recorded)]
    );
    assert!(
        dir.path().join("fresh.db").exists(),
        "init creates the file"
    );
    assert_eq!(
        set.init().await.unwrap(),
        [
            (1, InitAction::AlreadyRecorded),
            (7, InitAction::AlreadyRecorded)
        ]
    );
    assert_eq!(set.check().await.unwrap().len(), 2);
    let conn = set
        .connect_for(&ShardKey::new('o', 7, 1i64).unwrap())
        .await
        .unwrap();
    assert_eq!(conn.shard(), 7);
    assert!(set.connect_for(&ShardKey::EMPTY).await.is_err());

    // A file in a directory that does not exist: init refuses before writing.
    let bad = set_of(&[
        (2, sqlite_url(&paths[1])),
        (3, sqlite_url(&dir.path().join("nowhere/x.db"))),
    ]);
    let err = bad.init().await.unwrap_err().to_string();
    assert!(
        err.contains("nowhere") && err.contains("nothing was recorded"),
        "{err}"
    );
    assert!(!sqlite_has_identity(&paths[1]));
}

#[tokio::test]
async fn a_failed_init_changes_nothing_on_any_shard() {
    let dir = TempDir::new().unwrap();
    let paths = three_sqlite_shards(&dir);
    set_of(&[(1, sqlite_url(&paths[0]))]).init().await.unwrap();
    // Shard 1's database configured as shard 3, beside two fresh databases
    // (one listed before it, one after), and a missing file.
    let missing = dir.path().join("missing.db");
    let set = set_of(&[
        (2, sqlite_url(&paths[1])),
        (3, sqlite_url(&paths[0])),
        (4, sqlite_url(&paths[2])),
        (5, sqlite_url(&missing)),
    ]);
    let before: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let err = set.init().await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let err = err.to_string();
    assert!(
        err.contains("shard 3 (") && err.contains("records shard id 1"),
        "{err}"
    );
    assert!(err.contains("nothing was recorded"), "{err}");
    for (p, bytes) in paths.iter().zip(before) {
        assert_eq!(std::fs::read(p).unwrap(), bytes, "{} changed", p.display());
    }
    assert!(!sqlite_has_identity(&paths[1]) && !sqlite_has_identity(&paths[2]));
    assert!(!missing.exists(), "no file created");

    // One file under two names (a symbolic link): caught before writing,
    // for an existing file and for one init would create.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&paths[1], &link).unwrap();
    let linkdir = dir.path().join("linkdir");
    std::os::unix::fs::symlink(dir.path(), &linkdir).unwrap();
    let set = set_of(&[
        (6, sqlite_url(&paths[1])),
        (7, sqlite_url(&link)),
        (8, sqlite_url(&dir.path().join("new.db"))),
        (9, sqlite_url(&linkdir.join("new.db"))),
    ]);
    let err = set.init().await.unwrap_err().to_string();
    assert!(
        err.contains("shards 6 (") && err.contains("and 7 (") && err.contains("one database"),
        "{err}"
    );
    assert!(
        err.contains("shards 8 (") && err.contains("and 9 (") && err.contains("one database"),
        "{err}"
    );
    assert!(!sqlite_has_identity(&paths[1]));
    assert!(!dir.path().join("new.db").exists());
}

// ---- PostgreSQL: schemas of one database as shards -------------------------

fn fresh_schema() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "shard_t{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

async fn admin(pg: &TempPostgres) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// A schema with an `orders` table of PostgreSQL's own types.
async fn pg_shard(pg: &TempPostgres, admin: &tokio_postgres::Client, n: i32) -> String {
    let schema = fresh_schema();
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA {schema};
             CREATE TABLE {schema}.orders (
                 order_id integer PRIMARY KEY,
                 line smallint,
                 customer_shard smallint,
                 customer_id bigint,
                 token uuid,
                 placed timestamptz,
                 amount double precision
             );"
        ))
        .await
        .unwrap();
    admin
        .execute(
            &format!(
                "INSERT INTO {schema}.orders VALUES
                 ($1, 1, $2, $3, '67e55044-10b1-426f-9247-bb680e5fe0c8', '2024-05-01 12:00:00+00', 9.5),
                 ($1 + 1, NULL, NULL, NULL, NULL, NULL, 1.0)"
            ),
            &[&(10 * n + 1), &((n % 3 + 1) as i16), &(100 + i64::from(n))],
        )
        .await
        .unwrap();
    format!("{}?schema={schema}", pg.url())
}

async fn pg_has_identity(admin: &tokio_postgres::Client, url: &str) -> bool {
    let schema = url.rsplit_once("schema=").unwrap().1;
    admin
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("{schema}.{IDENTITY_TABLE}")],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn postgres_rows_map_with_their_own_types_nulls_and_foreign_shards() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let admin = admin(pg).await;
    let url = pg_shard(pg, &admin, 4).await;
    let set = set_of(&[(4, url)]);
    set.init().await.unwrap();
    let conn = set.connect(4).await.unwrap();
    let client = conn.postgres().unwrap().client();
    // Unqualified names resolve in the shard's schema.
    let rows = client
        .query("SELECT * FROM orders ORDER BY order_id", &[])
        .await
        .unwrap();

    let line = KeyMapping::new('l', "order_id")
        .unwrap()
        .with_child("line")
        .unwrap();
    let key = line
        .from_postgres_row(&rows[0], conn.shard())
        .unwrap()
        .unwrap();
    assert_eq!(key.record(), &Id::I32(41), "integer column -> i32");
    assert_eq!(key.children(), [Id::I16(1)]);
    assert_eq!(key.shard(), 4);
    assert_eq!(line.from_postgres_row(&rows[1], 4).unwrap(), None);
    let err = line
        .clone()
        .required()
        .from_postgres_row(&rows[1], 4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"line\"") && err.contains("NULL"), "{err}");

    // A foreign shard from a smallint column, ids declared as u32.
    let customer = KeyMapping::foreign("customer_shard", 'c', "customer_id")
        .unwrap()
        .with_types(KeySchema::new('c', IdType::U32).unwrap())
        .unwrap();
    assert_eq!(
        customer.from_postgres_row(&rows[0], 4).unwrap(),
        Some(ShardKey::new('c', 2, 104u32).unwrap())
    );
    assert_eq!(customer.from_postgres_row(&rows[1], 4).unwrap(), None);

    // uuid and timestamptz columns.
    let by_token = KeyMapping::new('t', "token")
        .unwrap()
        .with_child("placed")
        .unwrap();
    let k = by_token.from_postgres_row(&rows[0], 4).unwrap().unwrap();
    assert_eq!(k.record().id_type(), IdType::Uuid);
    assert_eq!(k.children()[0].to_string(), "2024-05-01T12:00:00Z");

    // Wrong types name the column and its type.
    let err = KeyMapping::new('o', "amount")
        .unwrap()
        .from_postgres_row(&rows[0], 4)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"amount\"") && err.contains("float8"),
        "{err}"
    );
    let err = KeyMapping::new('o', "order_id")
        .unwrap()
        .with_types(KeySchema::new('o', IdType::Uuid).unwrap())
        .unwrap()
        .from_postgres_row(&rows[0], 4)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"order_id\"") && err.contains("int4"),
        "{err}"
    );
    let err = KeyMapping::foreign("token", 'c', "customer_id")
        .unwrap()
        .from_postgres_row(&rows[0], 4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"token\"") && err.contains("uuid"), "{err}");

    // The reverse: key parts as parameters, converted to the columns' types
    // (u32 and u16 into bigint and smallint; uuid and timestamptz as such).
    let customer_key = ShardKey::new('c', 2, 104u32).unwrap();
    let params = customer.params(&customer_key).unwrap();
    let found: i32 = client
        .query_one(
            "SELECT order_id FROM orders WHERE customer_shard = $1 AND customer_id = $2",
            &[&params[0], &params[1]],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(found, 41);
    let params = by_token.params(&k).unwrap();
    let found: i32 = client
        .query_one(
            "SELECT order_id FROM orders WHERE token = $1 AND placed = $2",
            &[&params[0], &params[1]],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(found, 41);
    // A value that does not fit the parameter's type is an error, not a wrap.
    let too_big = ShardKey::new('c', 40000, 1u32).unwrap();
    let params = customer.params(&too_big).unwrap();
    let err = client
        .query(
            "SELECT order_id FROM orders WHERE customer_shard = $1 AND customer_id = $2",
            &[&params[0], &params[1]],
        )
        .await
        .map_err(postgres_error)
        .unwrap_err()
        .to_string();
    assert!(err.contains("40000") && err.contains("int2"), "{err}");
}

#[tokio::test]
async fn fan_out_over_postgres_schemas_and_sqlite_files_merges_by_key() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let admin = admin(pg).await;
    let dir = TempDir::new().unwrap();
    let paths = three_sqlite_shards(&dir);
    let set = set_of(&[
        (1, sqlite_url(&paths[0])),
        (2, pg_shard(pg, &admin, 2).await),
        (3, pg_shard(pg, &admin, 3).await),
    ]);
    set.init().await.unwrap();
    let keys: Vec<ShardKey> = [(3, 31), (2, 22), (1, 12), (2, 21), (3, 39)]
        .into_iter()
        .map(|(s, id)| ShardKey::new('o', s, i64::from(id)).unwrap())
        .collect();
    let mapping = KeyMapping::new('o', "order_id")
        .unwrap()
        .with_types(KeySchema::new('o', IdType::I64).unwrap())
        .unwrap();
    let m = mapping.clone();
    let orders = set
        .query_by_keys(
            &keys,
            Duplicates::Reject,
            |k: &ShardKey| k,
            move |conn, keys| {
                let m = m.clone();
                async move {
                    let shard = conn.shard();
                    match conn.db() {
                        ShardDb::Postgres(p) => {
                            let ids: Vec<i32> = keys
                                .iter()
                                .map(|k| match k.record() {
                                    Id::I64(v) => *v as i32,
                                    _ => unreachable!(),
                                })
                                .collect();
                            let rows = p
                                .client()
                                .query(
                                    "SELECT order_id FROM orders WHERE order_id = ANY($1)",
                                    &[&ids],
                                )
                                .await
                                .map_err(postgres_error)?;
                            rows.iter()
                                .map(|r| m.from_postgres_row(r, shard).map(Option::unwrap))
                                .collect()
                        }
                        ShardDb::Sqlite(s) => {
                            s.run(move |c| {
                                let mut out = Vec::new();
                                for k in keys {
                                    let params = m.params(&k)?;
                                    let mut stmt = c
                                        .prepare("SELECT order_id FROM orders WHERE order_id = ?1")
                                        .map_err(sqlite_error)?;
                                    let mut rows = stmt
                                        .query(rusqlite::params_from_iter(params))
                                        .map_err(sqlite_error)?;
                                    while let Some(r) = rows.next().map_err(sqlite_error)? {
                                        out.push(m.from_sqlite_row(r, shard)?.unwrap());
                                    }
                                }
                                Ok(out)
                            })
                            .await
                        }
                    }
                }
            },
        )
        .await
        .unwrap();
    let got: Vec<String> = orders.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            r#"["o",1,12]"#,
            r#"["o",2,21]"#,
            r#"["o",2,22]"#,
            r#"["o",3,31]"#
        ],
        "every existing order once, in key order, shard 3's 39 absent"
    );
}

#[tokio::test]
async fn swapped_postgres_schemas_are_refused_and_a_failed_init_writes_nowhere() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let admin = admin(pg).await;
    let (a, b) = (pg_shard(pg, &admin, 1).await, pg_shard(pg, &admin, 2).await);
    set_of(&[(1, a.clone()), (2, b.clone())])
        .init()
        .await
        .unwrap();
    let swapped = set_of(&[(1, b.clone()), (2, a.clone())]);
    let err = swapped.check().await.unwrap_err().to_string();
    assert!(
        err.contains("shard 1 (") && err.contains("records shard id 2"),
        "{err}"
    );
    assert!(
        err.contains("shard 2 (") && err.contains("records shard id 1"),
        "{err}"
    );
    let err = swapped.connect(2).await.unwrap_err().to_string();
    assert!(err.contains("records shard id 1"), "{err}");

    // Init with one schema recording another id: the fresh schemas (one
    // with tables, one not even created yet) stay untouched.
    let c = pg_shard(pg, &admin, 3).await;
    let unborn = format!("{}?schema={}", pg.url(), fresh_schema());
    let set = set_of(&[(3, c.clone()), (4, a.clone()), (5, unborn.clone())]);
    let err = set.init().await.unwrap_err().to_string();
    assert!(
        err.contains("shard 4 (")
            && err.contains("records shard id 1")
            && err.contains("nothing was recorded"),
        "{err}"
    );
    assert!(!pg_has_identity(&admin, &c).await);
    let unborn_schema = unborn.rsplit_once("schema=").unwrap().1.to_owned();
    let schemas: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
            &[&unborn_schema],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(schemas, 0, "init created no schema");
    // Without the bad shard, init creates the schema and records the ids.
    let good = set_of(&[(3, c.clone()), (5, unborn.clone())]);
    assert_eq!(
        good.init().await.unwrap(),
        [(3, InitAction::Recorded), (5, InitAction::Recorded)]
    );
    assert!(pg_has_identity(&admin, &unborn).await);
    good.check().await.unwrap();

    // One schema under two host names: caught before anything is written.
    let d = pg_shard(pg, &admin, 6).await;
    let alias = d.replace("127.0.0.1", "localhost");
    assert_ne!(alias, d);
    let err = set_of(&[(6, d.clone()), (7, alias)])
        .init()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("shards 6 (")
            && err.contains("one database")
            && err.contains("nothing was recorded"),
        "{err}"
    );
    assert!(!pg_has_identity(&admin, &d).await);

    // An unreachable server: Unavailable, naming the shard.
    let down = set_of(&[(
        9,
        format!(
            "postgres://keysmith@127.0.0.1:{}/postgres?connect_timeout=2",
            keysmith_testsupport::free_port()
        ),
    )]);
    let err = down.check().await.unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
    assert!(err.to_string().contains("shard 9"), "{err}");
}

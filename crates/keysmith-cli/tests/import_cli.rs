//! Moving onto keysmith from MySQL tables, on the real binary and a
//! throwaway MariaDB (feature `mysql`): `keysmith import leaf|tinyid` on
//! tables made from Leaf's and Tinyid's published schemas, and `keysmith
//! adopt` on a MySQL table.
//!
//! Without the MariaDB binaries these tests print why and pass, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.
#![cfg(feature = "mysql")]

mod common;

use common::{Db, keysmith};
use keysmith_testsupport::mariadb::TempMariaDb;

/// Leaf's `leaf_alloc` (scripts/leaf_alloc.sql of Meituan-Dianping/Leaf).
const LEAF_SCHEMA: &str = "CREATE TABLE leaf_alloc (
  biz_tag varchar(128) NOT NULL DEFAULT '',
  max_id bigint(20) NOT NULL DEFAULT '1',
  step int(11) NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB";

/// Tinyid's `tiny_id_info` (tinyid-server/db.sql of didi/tinyid).
const TINYID_SCHEMA: &str = "CREATE TABLE tiny_id_info (
  id bigint(20) unsigned NOT NULL AUTO_INCREMENT,
  biz_type varchar(63) NOT NULL DEFAULT '',
  begin_id bigint(20) NOT NULL DEFAULT '0',
  max_id bigint(20) NOT NULL DEFAULT '0',
  step int(11) DEFAULT '0',
  delta int(11) NOT NULL DEFAULT '1',
  remainder int(11) NOT NULL DEFAULT '0',
  create_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  update_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00',
  version bigint(20) NOT NULL DEFAULT '0',
  PRIMARY KEY (id),
  UNIQUE KEY uniq_biz_type (biz_type)
) ENGINE=InnoDB AUTO_INCREMENT=1 DEFAULT CHARSET=utf8";

/// A fresh database on the shared server with `sql` run in it; its URL.
fn database_with(db: &TempMariaDb, sql: &str) -> String {
    let url = db.fresh_url();
    let name = url.rsplit_once('/').unwrap().1.split('?').next().unwrap();
    db.sql(&format!("USE {name}; {sql}"));
    url
}

/// `keysmith show NAME --json` of a store: (next, block).
fn next_and_block(store: &str, name: &str) -> (i64, i64) {
    let out = common::ok(store, &["show", name, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    (v["next"].as_i64().unwrap(), v["block"].as_i64().unwrap())
}

fn names(store: &str) -> Vec<String> {
    common::ok(store, &["list"])
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .collect()
}

#[test]
fn leaf_rows_become_sequences_above_their_max_id() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let from = database_with(
        db,
        &format!(
            "{LEAF_SCHEMA};
             INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES
               ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id'),
               ('orders', 1500000, 1000, 'order ids'),
               ('payments', 42, 10, NULL),
               ('has space', 7, 10, 'not a keysmith name');"
        ),
    );
    // The keysmith store is another MariaDB database: the path of a user
    // who keeps Leaf's MySQL and adds keysmith beside it.
    let store = db.fresh_url();
    // One sequence exists already: reported, never overwritten.
    common::ok(
        &store,
        &["create", "payments", "--start", "7", "--block", "5"],
    );

    // A dry run says what it would do and changes nothing.
    let out = keysmith(&store)
        .args(["import", "leaf", "--from", &from, "--dry-run"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("orders: would create starting at 1500001 with block 1000"),
        "{stdout}"
    );
    assert!(stdout.contains("has space: refused"), "{stdout}");
    assert!(stdout.contains("nothing was written"), "{stdout}");
    assert!(
        stderr.contains("1 of 4 rows of leaf_alloc were refused"),
        "{stderr}"
    );
    assert!(!stderr.contains(db.password()) && !stdout.contains(db.password()));
    assert_eq!(names(&store), ["payments"]);

    let out = keysmith(&store)
        .args(["import", "leaf", "--from", &from])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("payments: a keysmith sequence of that name exists, next 7")
            && stdout.contains("at or below the old max_id 42"),
        "{stdout}"
    );
    assert_eq!(names(&store), ["leaf-segment-test", "orders", "payments"]);
    assert_eq!(next_and_block(&store, "orders"), (1_500_001, 1000));
    assert_eq!(next_and_block(&store, "leaf-segment-test"), (2, 2000));
    assert_eq!(next_and_block(&store, "payments"), (7, 5), "overwritten");
    // The first value handed out is above everything Leaf may have handed out.
    let v: i64 = common::ok(&store, &["next", "orders"])
        .trim()
        .parse()
        .unwrap();
    assert_eq!(v, 1_500_001);

    // Again: everything exists now, nothing changes.
    let out = keysmith(&store)
        .args(["--json", "import", "leaf", "--from", &from])
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    let actions: Vec<&str> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["refused", "exists", "exists", "exists"]);
}

#[test]
fn tinyid_rows_become_sequences_residue_classes_too() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let from = database_with(
        db,
        &format!(
            "{TINYID_SCHEMA};
             INSERT INTO tiny_id_info (id, biz_type, begin_id, max_id, step, delta, remainder, create_time, update_time, version) VALUES
               (1, 'test', 1, 1, 100000, 1, 0, '2018-07-21 23:52:58', '2018-07-22 23:19:27', 1),
               (2, 'test_odd', 1, 1, 100000, 2, 1, '2018-07-21 23:52:58', '2018-07-23 00:39:24', 3),
               (3, 'users', 1, 900100, 100, 1, 0, '2018-07-21 23:52:58', '2018-07-23 00:39:24', 9001),
               (4, 'nostep', 1, 5, NULL, 1, 0, '2018-07-21 23:52:58', '2018-07-23 00:39:24', 2),
               (5, 'test_bad', 1, 1, 100, 2, 2, '2018-07-21 23:52:58', '2018-07-23 00:39:24', 2);"
        ),
    );
    // Into an SQLite store this time.
    let sqlite = Db::new();
    let store = sqlite.url();
    let out = keysmith(&store)
        .args(["import", "tinyid", "--from", &from])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("test_bad: refused (delta=2 remainder=2 is not a residue class"),
        "{stdout}"
    );
    assert!(
        stderr.contains("1 of 5 rows of tiny_id_info were refused"),
        "{stderr}"
    );
    assert_eq!(names(&store), ["nostep", "test", "test_odd", "users"]);
    // Tinyid's delta 2, remainder 1: the odd values above max_id 1.
    assert_eq!(next_and_block(&store, "test_odd"), (3, 100_000));
    assert_eq!(
        common::ok(&store, &["next", "test_odd", "--count", "2"]),
        "3\n5\n"
    );
    assert_eq!(next_and_block(&store, "users"), (900_101, 100));
    assert_eq!(next_and_block(&store, "test"), (2, 100_000));
    assert_eq!(next_and_block(&store, "nostep").0, 6);

    // Without refused rows the command succeeds.
    db.sql(&format!(
        "DELETE FROM {}.tiny_id_info WHERE biz_type = 'test_bad'",
        from.rsplit_once('/').unwrap().1.split('?').next().unwrap()
    ));
    let fresh = Db::new();
    let out = common::ok(
        &fresh.url(),
        &["import", "tinyid", "--from", &from, "--dry-run"],
    );
    assert!(out.contains("4 rows of tiny_id_info: 4 to create"), "{out}");
    assert!(names(&fresh.url()).is_empty(), "a dry run wrote");
}

#[test]
fn import_errors_are_clear() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let store = Db::new();
    // Not their table.
    let empty = db.fresh_url();
    let (code, err) = store.fails(&["import", "leaf", "--from", &empty]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("leaf_alloc") && err.contains("--table"),
        "{err}"
    );
    assert!(!err.contains(db.password()), "{err}");
    // Not MySQL.
    let (code, err) = store.fails(&["import", "tinyid", "--from", "postgres://u:pw@h/db"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("mysql://") && !err.contains(":pw@"), "{err}");
    // Not a format.
    let (code, err) = store.fails(&["import", "snowflake", "--from", &empty]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn adopt_reads_the_largest_key_of_a_mysql_table() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let from = database_with(
        db,
        "CREATE TABLE orders (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, note TEXT);
         INSERT INTO orders VALUES (5, 'a'), (9000, 'b'), (77, 'c');
         CREATE TABLE empty_t (id INT PRIMARY KEY);
         CREATE TABLE texty (id VARCHAR(10) PRIMARY KEY);",
    );
    let store = Db::new();
    let out = store.ok(&[
        "adopt",
        "orders",
        "--database",
        &from,
        "--table",
        "orders",
        "--column",
        "id",
        "--create",
    ]);
    assert!(out.contains("create it starting at 9001"), "{out}");
    assert_eq!(next_and_block(&store.url(), "orders").0, 9001);
    db.sql(&format!(
        "INSERT INTO {}.orders VALUES (12345, 'd')",
        from.rsplit_once('/').unwrap().1.split('?').next().unwrap()
    ));
    let out = store.ok(&[
        "adopt",
        "orders",
        "--database",
        &from,
        "--table",
        "orders",
        "--column",
        "id",
        "--dry-run",
    ]);
    assert!(out.contains("would move next from 9001 to 12346"), "{out}");
    assert_eq!(next_and_block(&store.url(), "orders").0, 9001);
    let out = store.ok(&[
        "adopt",
        "orders",
        "--database",
        &from,
        "--table",
        "orders",
        "--column",
        "id",
    ]);
    assert!(out.contains("move next from 9001 to 12346"), "{out}");
    // An empty table, a missing column, a text column: said plainly.
    let out = store.ok(&[
        "adopt",
        "e",
        "--database",
        &from,
        "--table",
        "empty_t",
        "--column",
        "id",
        "--create",
    ]);
    assert!(out.contains("empty_t is empty"), "{out}");
    let (code, err) = store.fails(&[
        "adopt",
        "orders",
        "--database",
        &from,
        "--table",
        "orders",
        "--column",
        "nope",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("has no column \"nope\""), "{err}");
    let (_, err) = store.fails(&[
        "adopt",
        "t",
        "--database",
        &from,
        "--table",
        "texty",
        "--column",
        "id",
        "--create",
    ]);
    assert!(err.contains("not an integer"), "{err}");
    assert!(!err.contains(db.password()), "{err}");
}

/// An import over a name keysmith dropped: the sequence continues above the
/// values the dropped one handed out when they are above `max_id`, and the
/// report says where it really starts.
#[test]
fn an_import_over_a_dropped_name_continues_above_it() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let from = database_with(
        db,
        &format!(
            "{LEAF_SCHEMA};
             INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 10, 100);"
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("k.db").display());
    common::ok(&store, &["create", "orders", "--start", "900"]);
    common::ok(&store, &["next", "orders", "--count", "3"]);
    common::ok(&store, &["drop", "orders"]);
    let out = keysmith(&store)
        .args(["import", "leaf", "--from", &from])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // The handle reserved a block of 100 from 900, handed the tail back.
    let (next, _) = next_and_block(&store, "orders");
    assert_eq!(next, 903);
    assert!(
        stdout.contains("orders: created starting at 903"),
        "{stdout}"
    );
}

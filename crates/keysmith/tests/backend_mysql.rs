//! The conformance suite on MariaDB (the MySQL backend, feature `mysql`),
//! plus what only a server can show: the tables, concurrent migration,
//! logins with a password (in the URL and in a file), errors naming the
//! server without the password, TLS modes against a server without TLS, and
//! a server crash (SIGKILL) and restart in the middle of a run.
//!
//! The servers are real, started by `keysmith_testsupport::mariadb`. Where
//! MariaDB is not installed every test prints why it skips (or fails, with
//! `KEYSMITH_REQUIRE_BACKENDS=1`).
#![cfg(feature = "mysql")]

use std::sync::Arc;

use keysmith::Error;
use keysmith::store::mysql::{MysqlStore, SCHEMA_VERSION};
use keysmith::store::{PoolSpec, PoolStore, SequenceSpec, SequenceStore, Store};
use keysmith_testsupport::mariadb::TempMariaDb;
use keysmith_testsupport::processes::MariaDb;

#[path = "common/crash.rs"]
mod crash;
#[path = "common/pools.rs"]
mod pools;
#[path = "common/reopen.rs"]
mod reopen;
#[path = "common/servers.rs"]
mod servers;

/// One server per test binary; each call gets a database of its own, so
/// each store starts empty.
async fn fresh_store() -> Option<Arc<dyn Store>> {
    let db = TempMariaDb::shared()?;
    Some(Arc::new(MysqlStore::open(&db.fresh_url()).await.unwrap()))
}

keysmith::conformance_tests!(fresh_store, one_step_reservation = false);

/// A fresh store URL: a database of its own on the shared server.
fn fresh_url() -> Option<String> {
    TempMariaDb::shared().map(|db| db.fresh_url())
}

servers::server_tests!(fresh_url);

/// The database name of a URL from `fresh_url`.
fn db_of(url: &str) -> &str {
    let path = url.rsplit_once('/').unwrap().1;
    path.split('?').next().unwrap()
}

#[tokio::test]
async fn the_tables_are_in_the_urls_database_and_nowhere_else() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let (ua, ub) = (db.fresh_url(), db.fresh_url());
    // Opened through the generic URL entry point, as the CLI does.
    let a = keysmith::store::open(&ua).await.unwrap();
    let b = keysmith::store::open(&ub).await.unwrap();
    a.ping().await.unwrap();
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    assert_eq!(
        b.read_sequence("s").await.unwrap(),
        None,
        "databases share rows"
    );
    b.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    a.reserve_atomic("s", 50).await.unwrap();
    assert_eq!(b.read_sequence("s").await.unwrap().unwrap().next, 1);

    let tables = db.sql(&format!(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = '{}' ORDER BY BINARY table_name",
        db_of(&ua)
    ));
    assert_eq!(
        tables.lines().collect::<Vec<_>>(),
        [
            "keysmith_meta",
            "keysmith_number_counters",
            "keysmith_numbering",
            "keysmith_pool_marks",
            "keysmith_pool_members",
            "keysmith_pools",
            "keysmith_sequence_counts",
            "keysmith_sequences",
            "keysmith_tickets",
            "keysmith_tombstones",
            "keysmith_workers",
        ]
    );
    let row = db.sql(&format!(
        "SELECT next_value, version FROM {}.keysmith_sequences WHERE name = 's'",
        db_of(&ua)
    ));
    assert_eq!(row.trim(), "51\t2");
    let v = db.sql(&format!(
        "SELECT schema_version FROM {}.keysmith_meta",
        db_of(&ua)
    ));
    assert_eq!(v.trim(), SCHEMA_VERSION.to_string());
    // The tables are InnoDB (transactions, row locks, crash recovery).
    let engines = db.sql(&format!(
        "SELECT DISTINCT engine FROM information_schema.tables WHERE table_schema = '{}'",
        db_of(&ua)
    ));
    assert_eq!(engines.trim(), "InnoDB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_use_migrates_once() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.fresh_url();
    servers::concurrent_first_use_migrates_once(&url, async || {
        let rows = db.sql(&format!(
            "SELECT singleton, schema_version FROM {}.keysmith_meta",
            db_of(&url)
        ));
        assert_eq!(rows.trim(), format!("1\t{SCHEMA_VERSION}"));
    })
    .await;
}

#[tokio::test]
async fn tables_from_a_newer_keysmith_are_refused() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.fresh_url();
    reopen::a_newer_schema_is_refused(&url, async || {
        db.sql(&format!(
            "UPDATE {}.keysmith_meta SET schema_version = 99",
            db_of(&url)
        ));
    })
    .await;
}

#[tokio::test]
async fn a_wrong_password_is_a_clear_error_that_never_shows_it() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.url().replace(db.password(), "not-the-password-1234");
    let e = keysmith::store::open(&url).await.unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("refused the login")),
        "{e}"
    );
    assert!(!msg.contains("not-the-password-1234"), "{msg}");
    assert!(!msg.contains(db.password()), "{msg}");
}

#[tokio::test]
async fn the_password_can_come_from_a_file() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, format!("{}\n", db.password())).unwrap();
    let url = db.fresh_url().replace(&format!(":{}@", db.password()), "@")
        + &format!("&password_file={}", file.display());
    assert!(!url.contains(db.password()));
    let store = keysmith::store::open(&url).await.unwrap();
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    assert_eq!(store.reserve_atomic("s", 5).await.unwrap().end, 6);
}

#[tokio::test]
async fn a_user_without_rights_is_told_what_to_grant() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.fresh_url();
    let name = db_of(&url).to_owned();
    db.sql(&format!(
        "CREATE USER IF NOT EXISTS 'plain'@'127.0.0.1' IDENTIFIED BY 'plainpw';
         GRANT SELECT ON {name}.* TO 'plain'@'127.0.0.1';"
    ));
    let plain = url.replace(&format!("keysmith:{}@", db.password()), "plain:plainpw@");
    let e = MysqlStore::open(&plain).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("GRANT ALL")),
        "{e}"
    );
    // Tables the DBA made are enough with data rights: keysmith creates
    // nothing that exists.
    drop(MysqlStore::open(&url).await.unwrap());
    db.sql(&format!(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON {name}.* TO 'plain'@'127.0.0.1'"
    ));
    let store = MysqlStore::open(&plain).await.unwrap();
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    assert_eq!(store.reserve_locked("s", 3).await.unwrap().end, 4);
}

#[tokio::test]
async fn a_server_that_is_not_there_is_unavailable_and_named() {
    let port = keysmith_testsupport::free_port();
    let url = format!("mysql://keysmith:hunter2@127.0.0.1:{port}/keysmith?timeout=5");
    servers::a_server_that_is_not_there_is_unavailable_and_named(&url, port, Some("hunter2")).await;
}

#[tokio::test]
async fn a_missing_database_is_a_clear_error() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.url_for("no_such_db");
    let e = MysqlStore::open(&url).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("no_such_db") && m.contains("CREATE DATABASE")),
        "{e}"
    );
}

#[tokio::test]
async fn tls_modes_against_a_server_without_tls() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.fresh_url();
    // `preferred` (the default) falls back to plain TCP.
    for preferred in [
        url.replace("ssl-mode=disabled", "ssl-mode=preferred"),
        url.replace("?ssl-mode=disabled", ""),
    ] {
        let store = MysqlStore::open(&preferred).await.unwrap();
        store.ping().await.unwrap();
    }
    // Modes that insist on TLS fail, saying why, without the password.
    for mode in ["required", "verify_ca", "verify_identity"] {
        let strict = url.replace("ssl-mode=disabled", &format!("ssl-mode={mode}"));
        let e = MysqlStore::open(&strict).await.unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("offers no TLS")),
            "{mode}: {e}"
        );
        assert!(!msg.contains(db.password()), "{msg}");
    }
}

#[tokio::test]
async fn sessions_are_strict_utc_and_read_committed_and_commits_are_flushed() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let store = MysqlStore::open(&db.fresh_url()).await.unwrap();
    // A value that does not fit is refused, never clamped (strict mode).
    servers::a_put_beyond_the_maximum_is_refused(&store).await;
    // The store's clock is the server's, in UTC.
    let server: i64 = db
        .sql("SELECT CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)")
        .trim()
        .parse()
        .unwrap();
    let ours = keysmith::store::NumberStore::clock_ms(&store)
        .await
        .unwrap();
    assert!((ours - server).abs() < 60_000, "{ours} vs {server}");
    assert_eq!(
        db.sql("SELECT @@innodb_flush_log_at_trx_commit").trim(),
        "1"
    );
}

/// Allocation across a crash of the server: tasks allocate with all three
/// strategies; the server is killed (SIGKILL) while they run; they see
/// `Unavailable` and wait; the server restarts (InnoDB crash recovery); the
/// row then lies above every value handed out before the crash (each was
/// committed, with the log flushed, before it was returned), and after the
/// tasks resume no value has been handed out twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_crash_mid_run_loses_no_reservation_and_repeats_no_value() {
    let Some(db) = MariaDb::start() else {
        return;
    };
    crash::server_crash_mid_run_loses_no_reservation_and_repeats_no_value(&db).await;
}

/// Many tasks on one sequence with every strategy at once: the ranges are
/// disjoint and together cover exactly what the row says was reserved.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn all_strategies_at_once_hand_out_disjoint_ranges() {
    let Some(store) = fresh_store().await else {
        return;
    };
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..12 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..25 {
                got.push(crash::reserve(&*store, i % 3).await.unwrap());
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    assert_eq!(all.len(), 300);
    assert_eq!(all[0].0, 1);
    for w in all.windows(2) {
        assert_eq!(w[0].1, w[1].0, "gap or overlap: {w:?}");
    }
    assert_eq!(
        store.read_sequence("s").await.unwrap().unwrap().next,
        1 + 300 * 7
    );
}

/// A server with TLS (certificates made by the test, for `localhost` only):
/// every ssl-mode does what its name says, the session is encrypted, and a
/// certificate that fails a check is a clear error without the password.
#[tokio::test]
async fn tls_modes_against_a_server_with_tls() {
    use keysmith::store::mysql::mysql_async::prelude::Queryable;
    use keysmith_testsupport::tls::Certs;
    // The certificate names localhost, never 127.0.0.1: verify_identity
    // must fail on the IP address and pass on the name.
    let certs = Certs::generate(&["localhost"], "keysmith");
    let Some(db) = TempMariaDb::start_tls(&certs) else {
        return;
    };
    let plain = db.fresh_url();
    let with = |mode: &str, host: &str, ca: Option<&std::path::Path>| {
        let mut url = plain
            .replace("ssl-mode=disabled", &format!("ssl-mode={mode}"))
            .replace("@127.0.0.1:", &format!("@{host}:"));
        if let Some(ca) = ca {
            url.push_str(&format!("&ssl-ca={}", ca.display()));
        }
        url
    };
    let cipher = |url: String| async move {
        let mut c = keysmith::store::mysql::connect(&url).await?;
        let row: Option<(String, String)> = c
            .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            .await
            .unwrap();
        let _ = c.disconnect().await;
        Ok::<String, Error>(row.map(|r| r.1).unwrap_or_default())
    };
    // Encrypted without checks, and plain when asked.
    assert!(
        !cipher(with("preferred", "127.0.0.1", None))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !cipher(with("required", "127.0.0.1", None))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(cipher(plain.clone()).await.unwrap().is_empty());
    // The right CA: verify_ca passes on either host, verify_identity only
    // on the name the certificate holds.
    let ca = Some(certs.ca.as_path());
    assert!(
        !cipher(with("verify_ca", "127.0.0.1", ca))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !cipher(with("verify_identity", "localhost", ca))
            .await
            .unwrap()
            .is_empty()
    );
    let store = MysqlStore::open(&with("verify_identity", "localhost", ca))
        .await
        .unwrap();
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();
    assert_eq!(store.reserve_atomic("s", 2).await.unwrap().end, 3);
    for (url, why) in [
        (with("verify_identity", "127.0.0.1", ca), "not the host"),
        (
            with("verify_ca", "localhost", Some(certs.other_ca.as_path())),
            "wrong CA",
        ),
        (with("verify_identity", "localhost", None), "not a web root"),
    ] {
        let e = MysqlStore::open(&url).await.unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("TLS failed")),
            "{why}: {e}"
        );
        assert!(!msg.contains(db.password()), "{msg}");
    }
}

/// Tables at version 2 (before pools kept a residue class) are migrated on
/// open: the version goes to the current one, a pool created before reads
/// back without a class, its members as they were, and a drop leaves a
/// tombstone (version 4) and the pool's life (version 5).
#[tokio::test]
async fn version_2_tables_get_the_pool_class_columns() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.fresh_url();
    let a = MysqlStore::open(&url).await.unwrap();
    a.create_pool(&PoolSpec::new("old", 3)).await.unwrap();
    drop(a);
    let name = db_of(&url);
    db.sql(&format!(
        "ALTER TABLE {name}.keysmith_pools DROP CONSTRAINT keysmith_pools_class,
             DROP COLUMN class_increment, DROP COLUMN class_offset, DROP COLUMN incarnation;
         ALTER TABLE {name}.keysmith_sequences DROP COLUMN incarnation;
         DROP TABLE {name}.keysmith_tombstones;
         UPDATE {name}.keysmith_meta SET schema_version = 2;"
    ));
    let b = MysqlStore::open(&url).await.unwrap();
    let old = b.read_pool("old").await.unwrap().unwrap();
    assert_eq!((old.start, old.size, old.residue), (1, 3, None));
    assert_eq!(old.incarnation, 0, "a pool from before lives were kept");
    assert_eq!(b.list_members("old").await.unwrap(), [1, 2, 3]);
    let v = db.sql(&format!("SELECT schema_version FROM {name}.keysmith_meta"));
    assert_eq!(v.trim(), SCHEMA_VERSION.to_string());
    assert_lives_columns(db, name);
    // The columns only hold a class keysmith writes (not half of one):
    // `sql` panics on the refused statement.
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        db.sql(&format!(
            "UPDATE {name}.keysmith_pools SET class_increment = 4 WHERE name = 'old'"
        ))
    }))
    .is_err();
    assert!(refused, "half a class was stored");
    assert!(b.swap_member("old", 1, 4).await.unwrap());
    b.drop_pool("old").await.unwrap();
    let again = b.create_pool(&PoolSpec::new("old", 3)).await.unwrap();
    assert_eq!(again.start, 4, "continues above the number handed out");
    assert_eq!(again.incarnation, 1);
    assert_eq!(b.read_pool("old").await.unwrap().unwrap(), again);
}

/// The columns of lives (schema version 5) are there, `BIGINT NOT NULL
/// DEFAULT 0`, in database `name`.
fn assert_lives_columns(db: &TempMariaDb, name: &str) {
    let columns = db.sql(&format!(
        "SELECT table_name, column_name, data_type, is_nullable, column_default
         FROM information_schema.columns
         WHERE table_schema = '{name}' AND column_name IN ('incarnation', 'version')
           AND table_name IN ('keysmith_sequences', 'keysmith_pools', 'keysmith_tombstones')
         ORDER BY BINARY table_name, BINARY column_name"
    ));
    assert_eq!(
        columns.lines().collect::<Vec<_>>(),
        [
            "keysmith_pools\tincarnation\tbigint\tNO\t0",
            "keysmith_sequences\tincarnation\tbigint\tNO\t0",
            "keysmith_sequences\tversion\tbigint\tNO\tNULL",
            "keysmith_tombstones\tversion\tbigint\tNO\t0",
        ]
    );
}

/// Tables at version 4 (before lives were kept) are migrated on open, also
/// when an earlier open added some of the columns and stopped (a migration
/// cut short): rows from before read incarnation 0 and keep working, and a
/// name dropped after the upgrade is created again above every version its
/// old row reached, whatever the kind.
#[tokio::test]
async fn version_4_tables_get_the_lives_columns() {
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.fresh_url();
    let a = MysqlStore::open(&url).await.unwrap();
    a.create_sequence(&SequenceSpec::new("s")).await.unwrap();
    for _ in 0..4 {
        a.reserve_locked("s", 10).await.unwrap();
    }
    a.create_sequence(&SequenceSpec::new("p")).await.unwrap();
    a.reserve_locked("p", 10).await.unwrap();
    a.drop_sequence("p").await.unwrap();
    a.create_pool(&PoolSpec::new("q", 3)).await.unwrap();
    drop(a);
    let name = db_of(&url);
    // Cut short: the sequences' column is there, the others are not.
    db.sql(&format!(
        "UPDATE {name}.keysmith_sequences SET incarnation = 0;
         ALTER TABLE {name}.keysmith_pools DROP COLUMN incarnation;
         ALTER TABLE {name}.keysmith_tombstones DROP COLUMN version;
         UPDATE {name}.keysmith_meta SET schema_version = 4;"
    ));
    let b = MysqlStore::open(&url).await.unwrap();
    let v = db.sql(&format!("SELECT schema_version FROM {name}.keysmith_meta"));
    assert_eq!(v.trim(), SCHEMA_VERSION.to_string());
    assert_lives_columns(db, name);
    let old = b.read_sequence("s").await.unwrap().unwrap();
    assert_eq!((old.version, old.incarnation), (5, 0), "{old:?}");
    assert_eq!(b.read_pool("q").await.unwrap().unwrap().incarnation, 0);
    // A row of an unknown life still works.
    let r = b.reserve_locked("s", 10).await.unwrap();
    assert_eq!((r.start, r.incarnation), (41, 0));
    // Dropped after the upgrade: the next life starts above its versions.
    b.drop_sequence("s").await.unwrap();
    let again = b
        .create_sequence(&SequenceSpec {
            start_below_dropped: true,
            ..SequenceSpec::new("s")
        })
        .await
        .unwrap();
    assert_eq!((again.version, again.incarnation), (7, 7), "{again:?}");
    // Dropped before: its tombstone knew no version; the value bound holds.
    let p = b.create_pool(&PoolSpec::new("p", 3)).await.unwrap();
    assert_eq!((p.start, p.incarnation), (11, 1), "{p:?}");
    // A pool of an unknown life dropped, a sequence of its name created
    // from its largest member (3: what it may have handed out is below).
    b.drop_pool("q").await.unwrap();
    let q = b.create_sequence(&SequenceSpec::new("q")).await.unwrap();
    assert_eq!((q.start, q.incarnation), (3, 1), "{q:?}");
}

/// A create of one kind and a drop of the other kind of one name wait for
/// each other: a pool create that starts while a sequence of its name is
/// being dropped (the drop's transaction holds the sequence's tombstone)
/// waits for that drop, and then starts above what the sequence handed
/// out, never below it after the drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_waits_for_a_drop_of_its_name_of_the_other_kind() {
    use keysmith::store::mysql::mysql_async::TxOpts;
    use keysmith::store::mysql::mysql_async::prelude::Queryable;
    let Some(db) = TempMariaDb::shared() else {
        return;
    };
    let url = db.fresh_url();
    let store = Arc::new(MysqlStore::open(&url).await.unwrap());
    store
        .create_sequence(&SequenceSpec::new("both"))
        .await
        .unwrap();
    // A drop of the sequence, as far as holding its tombstone: raised
    // (to 1001) but not yet committed.
    let mut c = keysmith::store::mysql::connect(&url).await.unwrap();
    let mut tx = c.start_transaction(TxOpts::default()).await.unwrap();
    tx.query_drop(
        "INSERT INTO keysmith_tombstones (kind, name, high_water, reversed_next, version)
         VALUES ('sequence', 'both', 0, 0, 0) ON DUPLICATE KEY UPDATE high_water = high_water",
    )
    .await
    .unwrap();
    tx.query_drop(
        "UPDATE keysmith_tombstones SET high_water = 1001, version = 40
         WHERE kind = 'sequence' AND name = 'both'",
    )
    .await
    .unwrap();
    let creating = tokio::spawn({
        let store = store.clone();
        async move { store.create_pool(&PoolSpec::new("both", 3)).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !creating.is_finished(),
        "the pool was created while a drop of its name held the sequence's tombstone: {:?}",
        creating.await
    );
    tx.commit().await.unwrap();
    let pool = creating.await.unwrap().unwrap();
    assert_eq!((pool.start, pool.incarnation), (1001, 41), "{pool:?}");
    let _ = c.disconnect().await;
}

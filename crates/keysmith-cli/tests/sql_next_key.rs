//! `next_key` from a block per session (issue 38): SQL sessions inserting
//! with `next_key` beside the library, `keysmith next` processes and a
//! server; transactions that roll back (whole, to a savepoint, prepared);
//! sessions killed with `pg_terminate_backend`; one connection shared by
//! several clients the way a pooler in transaction mode shares it; a
//! failover with SQL callers in flight. The oracles are a primary key on
//! the table the sessions insert into, and a join with every value handed
//! out elsewhere: no value twice.
//!
//! The servers are throwaway ones from `keysmith-testsupport`; without the
//! PostgreSQL binaries these tests print why and pass, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.

mod common;

use std::collections::HashSet;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::server::{ServerProc, values};
use keysmith_testsupport::postgres::{Setup, TempPostgres};
use serde_json::Value;
use tokio_postgres::{Client, NoTls};

/// The store's schema in every test: the functions are `nk.next_key`, ...
const SCHEMA: &str = "nk";
/// How long a condition a test waits for may take: a bound on a hang.
const DEADLINE: Duration = Duration::from_secs(120);

/// A server allowing prepared transactions (two-phase commit).
fn server() -> Option<TempPostgres> {
    TempPostgres::start_with(&Setup {
        settings: vec![
            "max_prepared_transactions = 20".into(),
            "max_connections = 60".into(),
        ],
        ..Setup::default()
    })
}

/// A session on `url` (a PostgreSQL URL without `?schema`), named `app` in
/// pg_stat_activity; its connection task runs on the test's runtime.
async fn session(url: &str, app: &str) -> Client {
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.application_name(app);
    let (client, conn) = config.connect(NoTls).await.unwrap();
    tokio::spawn(async move {
        // Ends with an error when the backend is terminated: expected here.
        let _ = conn.await;
    });
    client
}

/// One `INSERT ... VALUES (nk.next_key(seq), who) RETURNING id`.
async fn insert(c: &Client, seq: &str, who: &str) -> Result<i64, tokio_postgres::Error> {
    let r = c
        .query_one(
            &format!("INSERT INTO {seq}_rows VALUES ({SCHEMA}.next_key($1), $2) RETURNING id"),
            &[&seq, &who],
        )
        .await?;
    Ok(r.get(0))
}

/// An insert that failed: a duplicate key is a value handed out twice.
fn refused(e: tokio_postgres::Error) -> i64 {
    panic!("an insert with next_key failed (23505: a value handed out twice): {e:?}")
}

async fn next_key(c: &Client, seq: &str) -> i64 {
    c.query_one(&format!("SELECT {SCHEMA}.next_key($1)"), &[&seq])
        .await
        .unwrap()
        .get(0)
}

/// `keysmith --json show NAME` on the store URL.
fn show(url: &str, name: &str) -> Value {
    serde_json::from_str(&common::ok(url, &["--json", "show", name])).unwrap()
}

fn next_free(url: &str, name: &str) -> i64 {
    show(url, name)["next"].as_i64().unwrap()
}

/// The store URL of `pg`: schema [`SCHEMA`].
fn store_url(pg_url: &str) -> String {
    format!("{pg_url}?schema={SCHEMA}")
}

/// Creates sequence `name` (block `block`) and its table `NAME_rows`
/// (`id` the primary key: the first oracle).
async fn create(url: &str, admin: &Client, name: &str, block: &str, extra: &[&str]) {
    let mut args = vec!["create", name, "--block", block];
    args.extend_from_slice(extra);
    common::ok(url, &args);
    admin
        .batch_execute(&format!(
            "CREATE TABLE {name}_rows (id bigint PRIMARY KEY, who text NOT NULL)"
        ))
        .await
        .unwrap();
}

/// A session's block, its rollbacks and prepared transactions, a savepoint,
/// a strict sequence and a setting that is not this backend's, one step at
/// a time against the row.
/// A session that commits asynchronously (a role or database default) still
/// commits the transaction that reserves a block synchronously: later calls
/// hand that block out in transactions that write nothing, so a crash must
/// not be able to take the reservation back. Calls that take from the block
/// leave the caller's setting alone.
#[tokio::test]
async fn a_block_is_reserved_with_a_synchronous_commit_in_an_async_session() {
    let Some(pg) = server() else {
        return;
    };
    let url = store_url(&pg.url());
    let admin = session(&pg.url(), "nk-admin").await;
    create(&url, &admin, "sync", "10", &[]).await;
    let c = session(&pg.url(), "nk-async").await;
    c.batch_execute("SET synchronous_commit = off")
        .await
        .unwrap();
    c.batch_execute("BEGIN").await.unwrap();
    let first = next_key(&c, "sync").await;
    let during: String = c
        .query_one("SHOW synchronous_commit", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        during, "on",
        "the reserving transaction commits synchronously"
    );
    c.batch_execute("COMMIT").await.unwrap();
    let after: String = c
        .query_one("SHOW synchronous_commit", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(after, "off", "the session's own setting comes back");
    // From the block: no reservation, the caller's setting untouched.
    c.batch_execute("BEGIN").await.unwrap();
    assert_eq!(next_key(&c, "sync").await, first + 1);
    let taking: String = c
        .query_one("SHOW synchronous_commit", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(taking, "off");
    c.batch_execute("COMMIT").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_block_follows_its_reservation() {
    let Some(pg) = server() else {
        return;
    };
    let url = store_url(&pg.url());
    let admin = session(&pg.url(), "nk-admin").await;
    create(&url, &admin, "b", "10", &[]).await;
    let a = session(&pg.url(), "nk-a").await;
    let b = session(&pg.url(), "nk-b").await;
    // A session that has taken nothing yet: it reserves a block at once.
    let pg_url = pg.url();
    let fresh = || session(&pg_url, "nk-fresh");

    // One reservation of a block of 10: the row moves once for ten calls.
    let first = next_key(&a, "b").await;
    assert_eq!(next_free(&url, "b"), first + 10, "one block reserved");
    for i in 1..10 {
        assert_eq!(
            next_key(&a, "b").await,
            first + i,
            "from the session's block"
        );
    }
    assert_eq!(
        next_free(&url, "b"),
        first + 10,
        "no reservation within the block"
    );

    // A rollback of the transaction that reserved a block takes the
    // session's cursor back with the row: another session gets the block,
    // and this one never hands out its values.
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(next_key(&a, "b").await, first + 10);
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        next_free(&url, "b"),
        first + 10,
        "the reservation rolled back"
    );
    assert_eq!(
        next_key(&fresh().await, "b").await,
        first + 10,
        "reserved again"
    );
    let after = next_key(&a, "b").await;
    assert_eq!(
        after,
        first + 20,
        "a reserved the next block, not its old cursor"
    );

    // Values taken from a committed block in a transaction that rolls back
    // go back to the session, as they went back to the sequence before.
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(next_key(&a, "b").await, after + 1);
    a.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(next_key(&a, "b").await, after + 1);

    // A savepoint rolled back takes its reservation and the cursor back.
    for i in after + 2..after + 10 {
        assert_eq!(next_key(&a, "b").await, i);
    }
    let top = next_free(&url, "b");
    a.batch_execute("BEGIN; SAVEPOINT s").await.unwrap();
    assert_eq!(next_key(&a, "b").await, top, "a new block at the savepoint");
    a.batch_execute("ROLLBACK TO SAVEPOINT s; COMMIT")
        .await
        .unwrap();
    assert_eq!(next_free(&url, "b"), top);
    assert_eq!(next_key(&fresh().await, "b").await, top, "reserved again");
    assert_eq!(next_key(&a, "b").await, top + 10);

    // Two-phase commit: PREPARE keeps session settings whatever follows, so
    // a block reserved in a prepared transaction is used only once that
    // transaction committed.
    for i in 11..20 {
        assert_eq!(next_key(&a, "b").await, top + i);
    }
    let top = next_free(&url, "b");
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(next_key(&a, "b").await, top);
    a.batch_execute("PREPARE TRANSACTION 'nk-rolled-back'")
        .await
        .unwrap();
    admin
        .batch_execute("ROLLBACK PREPARED 'nk-rolled-back'")
        .await
        .unwrap();
    assert_eq!(
        next_free(&url, "b"),
        top,
        "the prepared reservation rolled back"
    );
    assert_eq!(next_key(&fresh().await, "b").await, top, "reserved again");
    assert_eq!(
        next_key(&a, "b").await,
        top + 10,
        "a dropped the block of its prepared transaction that rolled back"
    );
    for i in 11..20 {
        assert_eq!(next_key(&a, "b").await, top + i);
    }
    let top = next_free(&url, "b");
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(next_key(&a, "b").await, top);
    a.batch_execute("PREPARE TRANSACTION 'nk-committed'")
        .await
        .unwrap();
    admin
        .batch_execute("COMMIT PREPARED 'nk-committed'")
        .await
        .unwrap();
    assert_eq!(
        next_key(&a, "b").await,
        top + 1,
        "a committed prepared block is kept"
    );

    // A setting that is not this backend's block is never used.
    let other_pid: i32 = b
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let key = format!("keysmith.b_{SCHEMA}_{}", hex(b"b"));
    a.execute(
        "SELECT set_config($1, $2, false)",
        &[&key, &format!("{other_pid},1,100000,0")],
    )
    .await
    .unwrap();
    let top = next_free(&url, "b");
    assert_eq!(
        next_key(&a, "b").await,
        top,
        "another backend's cursor ignored"
    );

    // Strict (block 1): every call reserves in the caller's transaction, as
    // before; nothing is kept in the session.
    create(&url, &admin, "strict", "1", &[]).await;
    let s1 = next_key(&a, "strict").await;
    assert_eq!(next_free(&url, "strict"), s1 + 1);
    assert_eq!(
        next_key(&b, "strict").await,
        s1 + 1,
        "time order across sessions"
    );
    assert_eq!(next_key(&a, "strict").await, s1 + 2);
    let kept: Option<String> = a
        .query_one(
            "SELECT current_setting($1, true)",
            &[&format!("keysmith.b_{SCHEMA}_{}", hex(b"strict"))],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, None, "a strict sequence keeps no session block");

    // The longest name (512 bytes, not ASCII) keys a session block too.
    let long = "é/".repeat(170) + "é";
    assert_eq!(long.len(), keysmith::MAX_NAME_BYTES);
    common::ok(&url, &["create", &long, "--block", "10"]);
    let l1 = next_key(&a, &long).await;
    assert_eq!(next_key(&a, &long).await, l1 + 1);
    assert_eq!(next_free(&url, &long), l1 + 10);

    // Errors as before: a missing sequence names it.
    let err = a
        .query_one(&format!("SELECT {SCHEMA}.next_key('nope')"), &[])
        .await
        .unwrap_err();
    assert!(
        format!("{err:?}").contains("'nope' does not exist"),
        "{err:?}"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What the SQL side committed, by who.
#[derive(Default)]
struct Tally {
    committed: usize,
    rolled_back: usize,
    prepared: usize,
    killed: usize,
}

/// Sessions inserting with `next_key` (committing, rolling back, through
/// prepared transactions), sessions killed with `pg_terminate_backend` in
/// the middle of a transaction, three clients sharing one connection a
/// transaction at a time (a pooler in transaction mode), while a library
/// handle, `keysmith next` processes and a `keysmith serve` allocate from
/// the same sequence: the table's primary key takes every committed value
/// once, and none of them is among the values handed out elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sql_sessions_beside_the_library_the_cli_and_a_server_never_share_a_value() {
    let Some(pg) = server() else {
        return;
    };
    let pg_url = pg.url();
    let url = store_url(&pg_url);
    let admin = session(&pg_url, "nk-admin").await;
    create(&url, &admin, "orders", "20", &[]).await;
    admin
        .batch_execute("CREATE TABLE outside (id bigint PRIMARY KEY, who text NOT NULL)")
        .await
        .unwrap();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut sql = Vec::new();

    // Sessions: commit, roll back, or go through PREPARE TRANSACTION.
    for s in 0..4 {
        let (pg_url, tally) = (pg_url.clone(), tally.clone());
        sql.push(tokio::spawn(async move {
            let c = session(&pg_url, &format!("nk-session-{s}")).await;
            for i in 0..40usize {
                c.batch_execute("BEGIN").await.unwrap();
                // The transactions that roll back or prepare take more than
                // a block: each reserves one of its own that must not
                // outlive its rollback.
                let rows = match i % 6 {
                    1 | 4 => 21 + (i + s) % 5,
                    _ => 1 + (i + s) % 3,
                };
                for _ in 0..rows {
                    insert(&c, "orders", "sql").await.unwrap_or_else(refused);
                }
                match i % 6 {
                    1 => {
                        c.batch_execute("ROLLBACK").await.unwrap();
                        tally.lock().unwrap().rolled_back += rows;
                    }
                    4 => {
                        let gid = format!("nk-{s}-{i}");
                        c.batch_execute(&format!("PREPARE TRANSACTION '{gid}'"))
                            .await
                            .unwrap();
                        let commit = i % 12 == 4;
                        let end = if commit { "COMMIT" } else { "ROLLBACK" };
                        c.batch_execute(&format!("{end} PREPARED '{gid}'"))
                            .await
                            .unwrap();
                        let mut t = tally.lock().unwrap();
                        t.prepared += rows;
                        if commit {
                            t.committed += rows;
                        } else {
                            t.rolled_back += rows;
                        }
                    }
                    _ => {
                        c.batch_execute("COMMIT").await.unwrap();
                        tally.lock().unwrap().committed += rows;
                    }
                }
            }
        }));
    }

    // Victims: commit a row (the session holds a committed block), then
    // take more in a transaction that a killer ends with
    // pg_terminate_backend; connect again, and again.
    for v in 0..2 {
        let (pg_url, tally) = (pg_url.clone(), tally.clone());
        sql.push(tokio::spawn(async move {
            let killer = session(&pg_url, &format!("nk-killer-{v}")).await;
            for round in 0..8 {
                let c = session(&pg_url, &format!("nk-victim-{v}")).await;
                insert(&c, "orders", "sql").await.unwrap_or_else(refused);
                tally.lock().unwrap().committed += 1;
                c.batch_execute("BEGIN").await.unwrap();
                // Every other round the transaction reserves a block of its own.
                let rows = if round % 2 == 0 { 2 } else { 25 };
                for _ in 0..rows {
                    insert(&c, "orders", "sql").await.unwrap_or_else(refused);
                }
                let pid: i32 = c
                    .query_one("SELECT pg_backend_pid()", &[])
                    .await
                    .unwrap()
                    .get(0);
                let done: bool = killer
                    .query_one("SELECT pg_terminate_backend($1, 60000)", &[&pid])
                    .await
                    .unwrap()
                    .get(0);
                assert!(done, "the victim's backend did not end");
                assert!(
                    c.batch_execute("COMMIT").await.is_err(),
                    "a terminated session committed"
                );
                tally.lock().unwrap().killed += rows;
            }
        }));
    }

    // One connection, three clients taking turns a transaction at a time.
    let pooled = Arc::new(tokio::sync::Mutex::new(session(&pg_url, "nk-pooled").await));
    let pooled_values = Arc::new(Mutex::new(Vec::new()));
    for p in 0..3 {
        let (pooled, tally, seen) = (pooled.clone(), tally.clone(), pooled_values.clone());
        sql.push(tokio::spawn(async move {
            for i in 0..30usize {
                let c = pooled.lock().await;
                c.batch_execute("BEGIN").await.unwrap();
                let v = insert(&c, "orders", &format!("pooled-{p}"))
                    .await
                    .unwrap_or_else(refused);
                if (i + p) % 5 == 2 {
                    c.batch_execute("ROLLBACK").await.unwrap();
                    tally.lock().unwrap().rolled_back += 1;
                } else {
                    c.batch_execute("COMMIT").await.unwrap();
                    tally.lock().unwrap().committed += 1;
                    seen.lock().unwrap().push(v);
                }
            }
        }));
    }

    // The library: a handle of its own.
    let lib_url = url.clone();
    let library = tokio::spawn(async move {
        let store = keysmith::store::open(&lib_url).await.unwrap();
        let seq = keysmith::sequence::Sequence::builder()
            .store(store)
            .name("orders")
            .block(7)
            .build()
            .await
            .unwrap();
        let mut got = Vec::new();
        for _ in 0..400 {
            got.push(seq.next().await.unwrap());
        }
        seq.close().await.unwrap();
        got
    });

    // `keysmith next` processes.
    let cli: Vec<_> = (0..2)
        .map(|_| {
            common::keysmith(&url)
                .args(["next", "orders", "--count", "300", "--block", "5"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();

    // A server, and an HTTP client asking it for values.
    let srv = ServerProc::start_on(&url, &[], &[]).await;
    let http = reqwest::Client::new();
    let mut served = Vec::new();
    for _ in 0..60 {
        let r: Value = http
            .post(srv.url("/v1/sequences/orders/next?count=5"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        served.extend(values(&r));
    }

    for t in sql {
        t.await.unwrap();
    }
    let mut outside: Vec<(i64, &str)> = library
        .await
        .unwrap()
        .into_iter()
        .map(|v| (v, "library"))
        .collect();
    for child in cli {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "keysmith next: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = common::complete_values(&out.stdout);
        assert_eq!(got.len(), 300);
        outside.extend(got.into_iter().map(|v| (v, "cli")));
    }
    outside.extend(served.into_iter().map(|v| (v, "server")));
    drop(srv);

    // The second oracle: the values handed out elsewhere, under a primary
    // key of their own, joined with the rows.
    for chunk in outside.chunks(500) {
        let ids: Vec<i64> = chunk.iter().map(|x| x.0).collect();
        let who: Vec<&str> = chunk.iter().map(|x| x.1).collect();
        admin
            .execute(
                "INSERT INTO outside SELECT * FROM unnest($1::bigint[], $2::text[])",
                &[&ids, &who],
            )
            .await
            .unwrap_or_else(|e| panic!("a value handed out twice outside SQL: {e:?}"));
    }
    let shared: i64 = admin
        .query_one(
            "SELECT count(*) FROM orders_rows JOIN outside USING (id)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        shared, 0,
        "values both in the table and handed out elsewhere"
    );
    let rows: i64 = admin
        .query_one("SELECT count(*) FROM orders_rows", &[])
        .await
        .unwrap()
        .get(0);
    let left: i64 = admin
        .query_one("SELECT count(*) FROM pg_prepared_xacts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "no prepared transaction left");
    let t = tally.lock().unwrap();
    assert_eq!(
        rows as usize, t.committed,
        "every committed insert is a row"
    );
    assert!(t.rolled_back > 0 && t.prepared > 0 && t.killed > 0);
    // The clients sharing a connection shared its block: their values run
    // on from one another's (a block of 20 serves several of them).
    let pooled = pooled_values.lock().unwrap();
    let runs = pooled.windows(2).filter(|w| w[1] == w[0] + 1).count();
    assert!(
        runs * 2 >= pooled.len(),
        "the pooled clients did not continue one block: {pooled:?}"
    );
    eprintln!(
        "sql_next_key: {} rows committed, {} rolled back, {} through PREPARE, {} in killed sessions; {} values outside SQL",
        t.committed,
        t.rolled_back,
        t.prepared,
        t.killed,
        outside.len()
    );
}

/// A failover with SQL callers in flight: sessions insert with `next_key`
/// on the primary, the standby is cut off and the primary serves alone,
/// then crashes; the standby is promoted, and sessions on it go on. Every
/// value a commit acknowledged, on either server, is distinct: the fence in
/// `reserve` moved the promoted row past what the lost primary handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_with_sql_sessions_in_flight_repeats_no_value() {
    use keysmith_testsupport::pg_replica::PgReplicaSet;
    let Some(set) = PgReplicaSet::start() else {
        return;
    };
    let url = store_url(&set.primary_url());
    let admin = session(&set.primary_url(), "nk-admin").await;
    create(&url, &admin, "f", "50", &["--failover-skip", "100000"]).await;
    let acked = Arc::new(Mutex::new(Vec::<i64>::new()));

    /// Sessions inserting until their server goes away; returns how many
    /// commits failed (the last of each session, at the crash).
    fn load(pg_url: String, acked: Arc<Mutex<Vec<i64>>>) -> Vec<tokio::task::JoinHandle<()>> {
        (0..4)
            .map(|s| {
                let (pg_url, acked) = (pg_url.clone(), acked.clone());
                tokio::spawn(async move {
                    let c = session(&pg_url, &format!("nk-load-{s}")).await;
                    loop {
                        if c.batch_execute("BEGIN").await.is_err() {
                            return;
                        }
                        let mut got = Vec::new();
                        for _ in 0..3 {
                            match insert(&c, "f", "sql").await {
                                Ok(v) => got.push(v),
                                Err(_) => return,
                            }
                        }
                        if c.batch_execute("COMMIT").await.is_err() {
                            return;
                        }
                        acked.lock().unwrap().extend(got);
                    }
                })
            })
            .collect()
    }

    let count = |acked: &Arc<Mutex<Vec<i64>>>| acked.lock().unwrap().len();
    let until = |acked: Arc<Mutex<Vec<i64>>>, n: usize, what: &'static str| async move {
        let t0 = Instant::now();
        while acked.lock().unwrap().len() < n {
            assert!(
                t0.elapsed() < DEADLINE,
                "{what}: {} values",
                acked.lock().unwrap().len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    let before = load(set.primary_url(), acked.clone());
    until(acked.clone(), 300, "before the cut").await;
    tokio::task::block_in_place(|| {
        set.wait_standby_caught_up();
        set.cut_replication();
    });
    let at_cut = count(&acked);
    // The primary serves alone: the standby will not have these.
    until(
        acked.clone(),
        at_cut + 600,
        "while the primary serves alone",
    )
    .await;
    tokio::task::block_in_place(|| set.crash_primary());
    for t in before {
        t.await.unwrap();
    }
    let hi = acked.lock().unwrap().iter().copied().max().unwrap();
    tokio::task::block_in_place(|| set.promote_standby());
    let promoted_url = store_url(&set.standby_url());
    let promoted_next = next_free(&promoted_url, "f");
    assert!(
        promoted_next <= hi,
        "the promoted standby did not lose the primary's last values (next {promoted_next}, {hi} acknowledged)"
    );

    let after_crash = count(&acked);
    let after = load(set.standby_url(), acked.clone());
    until(acked.clone(), after_crash + 600, "on the promoted standby").await;
    // Stop the sessions: terminate them from an admin session.
    let admin2 = session(&set.standby_url(), "nk-admin").await;
    admin2
        .batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'nk-load-%'",
        )
        .await
        .unwrap();
    for t in after {
        t.await.unwrap();
    }

    let all = acked.lock().unwrap();
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a value acknowledged twice across the failover"
    );
    let v = show(&promoted_url, "f");
    assert!(
        v["skipped_at_failover"].as_i64().unwrap() > 0,
        "the fence did not act: {v}"
    );
    eprintln!(
        "sql_next_key failover: {} values acknowledged, {} while the primary served alone, promoted at {promoted_next} below {hi}",
        all.len(),
        after_crash - at_cut
    );
}

/// A store at schema version 8 (every call of `next_key` reserved one
/// value in the caller's transaction) gets the session blocks when a
/// keysmith of this version opens it, and keeps allocating above what the
/// old function handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_8_store_gets_session_blocks_on_open() {
    let Some(pg) = server() else {
        return;
    };
    let pg_url = pg.url();
    let url = store_url(&pg_url);
    let admin = session(&pg_url, "nk-admin").await;
    create(&url, &admin, "old", "10", &[]).await;
    // The function and version as migration 8 left them.
    admin
        .batch_execute(&format!(
            "CREATE OR REPLACE FUNCTION {SCHEMA}.next_key(seq text) RETURNS bigint
             LANGUAGE sql AS $fn$ SELECT first_value FROM {SCHEMA}.reserve(seq, 1) $fn$;
             UPDATE {SCHEMA}.keysmith_meta SET schema_version = 8;"
        ))
        .await
        .unwrap();
    let a = session(&pg_url, "nk-a").await;
    let v1 = next_key(&a, "old").await;
    assert_eq!(
        next_free(&url, "old"),
        v1 + 1,
        "version 8: one value per call"
    );
    // `keysmith show` (in next_free, above) opened the store: it migrated.
    let version: i32 = admin
        .query_one(
            &format!("SELECT schema_version FROM {SCHEMA}.keysmith_meta"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, keysmith::store::postgres::SCHEMA_VERSION);
    let v2 = next_key(&a, "old").await;
    assert_eq!(v2, v1 + 1);
    assert_eq!(
        next_free(&url, "old"),
        v1 + 11,
        "a block of 10 for the session"
    );
    assert_eq!(next_key(&a, "old").await, v2 + 1);
}

/// `next_key` and `next_keys` serve plain sequences only: on a sequence
/// with a numbering (an encoded, opaque, residue-class, bit-reversed or
/// leader-ordered one) the `sequences` row does not count the values
/// keysmith hands out, so SQL would repeat them. Refused, naming the
/// sequence, and nothing changes: `keysmith next` goes on where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_key_refuses_a_sequence_whose_values_keysmith_maps() {
    let Some(pg) = server() else {
        return;
    };
    let url = store_url(&pg.url());
    let a = session(&pg.url(), "nk-mapped").await;
    for (name, extra) in [
        ("enc", &["--encoding", "base32"][..]),
        ("opq", &["--opaque"][..]),
        ("cls", &["--increment", "4", "--offset", "1"][..]),
        ("rev", &["--bit-reversed"][..]),
        ("led", &["--order", "leader"][..]),
    ] {
        let mut args = vec!["create", name];
        args.extend_from_slice(extra);
        common::ok(&url, &args);
        let before = common::ok(&url, &["next", name]);
        for sql in [
            format!("SELECT {SCHEMA}.next_key($1)"),
            format!("SELECT {SCHEMA}.next_keys($1, 3)"),
        ] {
            let e = a.query(&sql, &[&name]).await.unwrap_err();
            let db = e.as_db_error().expect("a database error");
            assert_eq!(db.code().code(), "42809", "{name}: {db:?}");
            assert!(
                db.message().contains("not a plain sequence"),
                "{name}: {db:?}"
            );
        }
        let after = common::ok(&url, &["next", name]);
        assert_ne!(before, after, "{name}: values go on");
    }
    // A plain sequence still works.
    common::ok(&url, &["create", "plain", "--block", "5"]);
    assert_eq!(next_key(&a, "plain").await, 1);
}

//! Many `keysmith` processes on one PostgreSQL database, processes killed
//! with SIGKILL, and the server itself stopped the hard way
//! (`pg_ctl stop -m immediate`) in the middle of a run: no value is ever
//! handed out twice. The scenarios are written once in
//! `keysmith_testsupport::processes` and run by every backend.
//!
//! The servers are throwaway ones from `keysmith-testsupport`; without the
//! PostgreSQL binaries these tests print why and pass, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.

mod common;

use std::collections::HashSet;
use std::process::{Command, Stdio};

use common::{assert_increasing, complete_values};
use keysmith_testsupport::processes::{PROCESSES, Postgres};

/// 8, then 32 processes at once, each strategy, small blocks so they
/// collide often: all values unique, each process's values increasing.
#[test]
fn processes_never_share_a_value() {
    let Some(pg) = Postgres::shared() else {
        return;
    };
    for n in PROCESSES {
        common::processes(&pg).never_share_a_value(n, 300);
    }
}

/// Children allocate in a loop and are killed with SIGKILL at random
/// moments (chosen by progress), several at once, over several rounds: no
/// value is ever seen twice, and afterwards the sequence resumes above
/// everything handed out. A child killed inside a transaction (the locked
/// strategy holds a row lock) is rolled back by the server when its
/// connection drops.
#[test]
fn sigkill_at_random_moments_never_repeats_a_value() {
    let Some(pg) = Postgres::shared() else {
        return;
    };
    common::processes(&pg).sigkill_rounds();
}

/// The server is killed the hard way while `keysmith next` processes stream
/// values, then restarted, twice: the processes running fail with one
/// `store unavailable` line, those started after succeed, no value is
/// handed out twice (`Processes::server_crash_mid_run`).
#[test]
fn server_crash_mid_run_fails_cleanly_and_repeats_no_value() {
    // A server of its own: the test kills it.
    let Some(pg) = Postgres::start() else {
        return;
    };
    common::processes(&pg).server_crash_mid_run();
}

/// `psql` beside the server's other binaries, or on the PATH.
fn psql() -> std::path::PathBuf {
    let dirs = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/psql"));
    dirs.into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| "psql".into())
}

/// The SQL functions `next_key` and `next_keys` allocate from the same rows
/// as the library: psql sessions calling them, CLI processes (atomic and
/// optimistic) and a library handle, all at once on one sequence, never
/// share a value. A missing sequence and an exhausted one are errors that
/// name it, and a refused `next_keys` takes nothing.
#[test]
fn sql_functions_allocate_beside_the_library_and_the_cli() {
    let Some(backend) = Postgres::shared() else {
        return;
    };
    let server = backend.temp();
    let pg = common::processes(&backend);
    let url = format!("{}?schema=sqlfn", server.url());
    pg.ok(&url, &["create", "orders", "--block", "5"]);
    let psql_run = |sql: &[String]| {
        let mut c = Command::new(psql());
        c.args(["-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", &server.url()]);
        for s in sql {
            c.args(["-c", s]);
        }
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    };
    // Each -c is its own transaction: the row lock is held for one call.
    let mut sql: Vec<String> = (0..60)
        .map(|_| "SELECT sqlfn.next_key('orders')".to_owned())
        .collect();
    sql.extend((0..10).map(|_| "SELECT * FROM sqlfn.next_keys('orders', 7)".to_owned()));
    let mut children: Vec<(String, std::process::Child)> = Vec::new();
    for i in 0..3 {
        children.push((format!("psql {i}"), psql_run(&sql).spawn().unwrap()));
    }
    for (i, strategy) in ["atomic", "optimistic"].into_iter().enumerate() {
        children.push((
            format!("cli {i}"),
            pg.next(&url, "orders", "300", strategy, Some("3"))
                .spawn()
                .unwrap(),
        ));
    }
    let lib_url = url.clone();
    let library = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let store = keysmith::store::open(&lib_url).await.unwrap();
            let seq = keysmith::sequence::Sequence::builder()
                .store(store)
                .name("orders")
                .block(4)
                .build()
                .await
                .unwrap();
            let mut got = Vec::new();
            for _ in 0..200 {
                got.push(seq.next().await.unwrap());
            }
            seq.close().await.unwrap();
            got
        })
    });
    let mut all = HashSet::new();
    let mut total = 0;
    for (who, c) in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{who}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let values = complete_values(&out.stdout);
        if who.starts_with("psql") {
            assert_eq!(values.len(), 60 + 70, "{who}");
        } else {
            assert_eq!(values.len(), 300, "{who}");
            assert_increasing(&values, &who);
        }
        total += values.len();
        all.extend(values);
    }
    let lib = library.join().unwrap();
    assert_increasing(&lib, "library");
    total += lib.len();
    all.extend(lib);
    assert_eq!(all.len(), total, "a value was handed out twice");

    // A missing sequence is an error naming it, never a default.
    let out = psql_run(&["SELECT sqlfn.next_key('nope')".into()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'nope' does not exist"), "{err}");

    // Near the maximum: next_keys asking for more than is left takes nothing.
    pg.ok(&url, &["create", "few", "--max", "3", "--block", "1"]);
    let out = psql_run(&["SELECT * FROM sqlfn.next_keys('few', 5)".into()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only 3 values left"), "{err}");
    assert_eq!(
        pg.next_free(&url, "few"),
        1,
        "the refused call took nothing"
    );
    let out = psql_run(&["SELECT * FROM sqlfn.next_keys('few', 3)".into()])
        .output()
        .unwrap();
    assert_eq!(complete_values(&out.stdout), vec![1, 2, 3]);
    let out = psql_run(&["SELECT sqlfn.next_key('few')".into()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exhausted"), "{err}");
}

/// A process holding a handle, paused while others drop the sequence and
/// create it again: resumed, it fails saying so and writes nothing into the
/// new life (`Processes::a_dropped_life_never_writes_into_the_next`).
#[test]
fn a_dropped_life_never_writes_into_the_next() {
    let Some(pg) = Postgres::shared() else {
        return;
    };
    common::processes(&pg).a_dropped_life_never_writes_into_the_next();
}

//! `keysmith bench ...` and `keysmith verify --partitions` moved to the lab
//! binary `keysmith-bench`. The old command lines still parse: each says
//! where the command went and how to run it, prints nothing on stdout,
//! touches no store, and exits 2 (a usage error).
//!
//! `cargo test -p keysmith-cli --test moved_commands`

mod common;

use common::Db;

/// Runs `keysmith --store URL args...`, expects the moved-command usage
/// error, and returns stderr.
fn moved(db: &Db, args: &[&str]) -> String {
    let out = db.run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        out.stdout.is_empty(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!db.path().exists(), "{args:?} touched the store");
    assert!(
        err.contains("keysmith-bench, the repository's lab binary"),
        "{args:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    err
}

#[test]
fn bench_says_it_moved_and_how_to_run_each_subcommand() {
    let db = Db::new();
    for sub in ["rate", "stall", "limit", "latency", "compare"] {
        let err = moved(&db, &["bench", sub, "--seconds", "1"]);
        assert!(
            err.contains(&format!(
                "cargo run -p keysmith-bench --release -- {sub} [the same options]"
            )),
            "{sub}: {err}"
        );
    }
    // No subcommand, an unknown one, and --help: the same message (compare).
    for args in [&["bench"][..], &["bench", "nonsense"], &["bench", "--help"]] {
        let err = moved(&db, args);
        assert!(
            err.contains("cargo run -p keysmith-bench --release -- compare"),
            "{args:?}: {err}"
        );
    }
}

/// The message never repeats the rest of the command line: a store URL
/// there may hold a password.
#[test]
fn bench_does_not_echo_its_options() {
    let db = Db::new();
    let err = moved(
        &db,
        &[
            "bench",
            "compare",
            "--postgres",
            "postgres://bench:hunter2@127.0.0.1/db",
        ],
    );
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn verify_partitions_says_it_moved_and_how_to_run_it() {
    let db = Db::new();
    let err = moved(&db, &["verify", "--partitions", "--seconds", "5"]);
    assert!(
        err.contains("target/release/keysmith-bench partitions --seconds 5"),
        "{err}"
    );
    assert!(
        err.contains("cargo build --release -p keysmith-cli -p keysmith-bench"),
        "{err}"
    );
    // The old flags that went with it are still accepted.
    let err = moved(&db, &["verify", "--partitions"]);
    assert!(err.contains("partitions --seconds 10"), "{err}");
}

/// `keysmith --help` no longer offers the moved commands; `verify` stays.
#[test]
fn help_lists_verify_not_bench() {
    let db = Db::new();
    let help = db.ok(&["--help"]);
    assert!(help.contains("\n  verify "), "{help}");
    assert!(!help.contains("\n  bench "), "{help}");
    let verify = db.ok(&["verify", "--help"]);
    assert!(!verify.contains("--partitions"), "{verify}");
}

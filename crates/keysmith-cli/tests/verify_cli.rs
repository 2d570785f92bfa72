//! `keysmith verify` against each store: a short run with kills passes,
//! reports what it did on its last line, and leaves nothing behind; bad
//! arguments are usage errors that change nothing.
//!
//! PostgreSQL, MariaDB and etcd are throwaway servers from
//! `keysmith-testsupport`; without their binaries those tests print why and
//! pass, unless `KEYSMITH_REQUIRE_BACKENDS=1`. etcd needs the `etcd` feature,
//! MariaDB the `mysql` feature.
//!
//! `cargo test -p keysmith-cli --all-features --test verify_cli`

mod common;

use std::collections::HashMap;

use common::{Db, keysmith, ok};
use keysmith_testsupport::postgres::TempPostgres;

/// Runs `keysmith --store URL verify --seconds 3 --procs 3 --kill-every 0.5`,
/// expects success, and returns the summary's `key=value` fields and its
/// verdict.
fn verify(url: &str) -> (HashMap<String, u64>, String) {
    let out = keysmith(url)
        .args([
            "verify",
            "--seconds",
            "3",
            "--procs",
            "3",
            "--kill-every",
            "0.5",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "verify on {url} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().expect("a summary line");
    let mut words: Vec<&str> = last.split(' ').collect();
    let verdict = words.pop().unwrap().to_owned();
    let fields = words
        .iter()
        .map(|w| {
            let (k, v) = w.split_once('=').unwrap_or_else(|| panic!("{last}"));
            (k.to_owned(), v.parse().unwrap_or_else(|_| panic!("{last}")))
        })
        .collect();
    (fields, verdict)
}

/// A run with kills passes: values of both kinds, kills, one replacement per
/// kill, nothing repeated; and no scratch sequence or pool is left.
fn a_run_with_kills_passes_and_cleans_up(url: &str) {
    let (f, verdict) = verify(url);
    assert_eq!(verdict, "ok", "{f:?}");
    assert!(f["sequence_values"] > 0, "{f:?}");
    assert!(f["pool_values"] > 0, "{f:?}");
    assert!(f["kills"] > 0, "{f:?}");
    assert_eq!(f["processes"], 3 + f["kills"], "{f:?}");
    for zero in [
        "duplicates",
        "order_violations",
        "resume_violations",
        "errors",
    ] {
        assert_eq!(f[zero], 0, "{zero}: {f:?}");
    }
    assert!(f["pool_holes"] <= f["kills"], "{f:?}");
    assert_eq!(ok(url, &["list"]), "", "a scratch sequence is left");
    assert_eq!(ok(url, &["pool", "list"]), "", "a scratch pool is left");
}

#[test]
fn sqlite_run_with_kills_passes_and_cleans_up() {
    let db = Db::new();
    a_run_with_kills_passes_and_cleans_up(&db.url());
}

#[test]
fn postgres_run_with_kills_passes_and_cleans_up() {
    if let Some(server) = TempPostgres::shared() {
        a_run_with_kills_passes_and_cleans_up(&format!("{}?schema=verify_cli", server.url()));
    }
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_run_with_kills_passes_and_cleans_up() {
    if let Some(server) = keysmith_testsupport::mariadb::TempMariaDb::shared() {
        a_run_with_kills_passes_and_cleans_up(&server.fresh_url());
    }
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_run_with_kills_passes_and_cleans_up() {
    use keysmith_testsupport::etcd::TempEtcd;
    if let Some(etcd) = TempEtcd::shared() {
        let prefix = format!("verify-{:016x}", rand::random::<u64>());
        a_run_with_kills_passes_and_cleans_up(&etcd.url_with_prefix(&prefix));
    }
}

#[test]
fn json_summary_is_the_last_line() {
    let db = Db::new();
    let out = db.ok(&[
        "--json",
        "verify",
        "--seconds",
        "1",
        "--procs",
        "2",
        "--kill-every",
        "0",
    ]);
    let report: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let s = &report["summary"];
    assert_eq!(s["ok"], true, "{report}");
    assert_eq!(s["kills"], 0, "{report}");
    assert_eq!(s["processes"], 2, "{report}");
    assert!(s["sequence_values"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["violations"], serde_json::json!([]), "{report}");
}

#[test]
fn bad_arguments_are_usage_errors_that_change_nothing() {
    let db = Db::new();
    for (args, flag) in [
        (&["--procs", "0"][..], "--procs"),
        (&["--procs", "257"], "--procs"),
        (&["--seconds", "-1"], "--seconds"),
        (&["--seconds", "0"], "--seconds"),
        (&["--seconds", "soon"], "--seconds"),
        (&["--kill-every", "-0.5"], "--kill-every"),
        (&["--kill-every", "0.01"], "--kill-every"),
    ] {
        let mut all = vec!["verify"];
        all.extend_from_slice(args);
        let (code, err) = db.fails(&all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(!db.path().exists(), "{args:?} touched the store");
    }
}

#[test]
fn a_store_private_to_one_process_is_refused() {
    let out = keysmith("memory://")
        .args(["verify", "--seconds", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("memory://"), "{err}");
    assert!(out.stdout.is_empty());
}

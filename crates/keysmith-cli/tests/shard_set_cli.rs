//! `keysmith shard-set init|check --config FILE` as a user runs them, on
//! SQLite files and PostgreSQL schemas.

use std::path::Path;
use std::process::{Command, Output};

use keysmith_testsupport::postgres::TempPostgres;
use tempfile::TempDir;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keysmith"))
        .args(args)
        .env_remove("KEYSMITH_STORE")
        .output()
        .expect("keysmith runs")
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

/// Runs a command that must fail with `code`; returns stderr.
fn fails(args: &[&str], code: i32) -> String {
    let out = run(args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
    assert!(out.stdout.is_empty(), "{args:?} printed {out:?}");
    String::from_utf8(out.stderr).unwrap()
}

fn write_config(dir: &Path, name: &str, shards: &[(i64, &str)]) -> String {
    let mut text = String::new();
    for (id, url) in shards {
        text.push_str(&format!("[[shard]]\nid = {id}\nurl = \"{url}\"\n\n"));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn has_identity(path: &Path) -> bool {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'keysmith_shard_identity'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn init_then_check_and_a_swapped_file_is_refused_naming_both_ids() {
    let dir = TempDir::new().unwrap();
    // Relative paths are taken from the file's directory.
    let good = write_config(
        dir.path(),
        "shards.toml",
        &[(1, "sqlite://one.db"), (2, "sqlite://two.db")],
    );
    let err = fails(&["shard-set", "check", "--config", &good], 1);
    assert!(
        err.contains("shard 1") && err.contains("no database file"),
        "{err}"
    );
    assert!(!dir.path().join("one.db").exists(), "check creates nothing");

    assert_eq!(
        ok(&["shard-set", "init", "--config", &good]),
        "shard 1 sqlite://one.db recorded\nshard 2 sqlite://two.db recorded"
    );
    assert_eq!(
        ok(&["shard-set", "init", "--config", &good]),
        "shard 1 sqlite://one.db already recorded\nshard 2 sqlite://two.db already recorded"
    );
    assert_eq!(
        ok(&["shard-set", "check", "--config", &good]),
        "shard 1 sqlite://one.db ok\nshard 2 sqlite://two.db ok"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["--json", "shard-set", "check", "--config", &good])).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["shards"][1]["recorded"], 2);

    let swapped = write_config(
        dir.path(),
        "swapped.toml",
        &[(1, "sqlite://two.db"), (2, "sqlite://one.db")],
    );
    for cmd in ["check", "init"] {
        let err = fails(&["shard-set", cmd, "--config", &swapped], 1);
        assert!(
            err.contains("shard 1 (sqlite://two.db) is the database that records shard id 2"),
            "{cmd}: {err}"
        );
        assert!(
            err.contains("shard 2 (sqlite://one.db) is the database that records shard id 1"),
            "{cmd}: {err}"
        );
    }
    // Still what init recorded.
    ok(&["shard-set", "check", "--config", &good]);
}

#[test]
fn a_failed_init_changes_nothing_on_any_shard() {
    let dir = TempDir::new().unwrap();
    let first = write_config(dir.path(), "first.toml", &[(5, "sqlite://a.db")]);
    ok(&["shard-set", "init", "--config", &first]);
    for name in ["b.db", "c.db"] {
        rusqlite::Connection::open(dir.path().join(name))
            .unwrap()
            .execute_batch("CREATE TABLE t (x INTEGER)")
            .unwrap();
    }
    let before: Vec<Vec<u8>> = ["a.db", "b.db", "c.db"]
        .iter()
        .map(|n| std::fs::read(dir.path().join(n)).unwrap())
        .collect();
    // b.db before and c.db after the database that records another id.
    let config = write_config(
        dir.path(),
        "shards.toml",
        &[
            (1, "sqlite://b.db"),
            (2, "sqlite://a.db"),
            (3, "sqlite://c.db"),
            (4, "sqlite://d.db"),
        ],
    );
    let err = fails(&["shard-set", "init", "--config", &config], 1);
    assert!(
        err.contains("nothing was recorded") && err.contains("records shard id 5, not 2"),
        "{err}"
    );
    for (n, bytes) in ["a.db", "b.db", "c.db"].iter().zip(before) {
        assert_eq!(
            std::fs::read(dir.path().join(n)).unwrap(),
            bytes,
            "{n} changed"
        );
    }
    assert!(!has_identity(&dir.path().join("b.db")));
    assert!(!has_identity(&dir.path().join("c.db")));
    assert!(!dir.path().join("d.db").exists());
}

#[test]
fn bad_files_are_explained_and_change_nothing() {
    let dir = TempDir::new().unwrap();
    let cases: &[(&str, &[&str])] = &[
        (
            "[[shard]]\nid = 65536\nurl = \"sqlite://x.db\"\n",
            &["65536", "0 to 65535"],
        ),
        (
            "[[shard]]\nid = 1\nurl = \"sqlite://x.db\"\n[[shard]]\nid = 1\nurl = \"sqlite://y.db\"\n",
            &["shard id 1 is given twice"],
        ),
        (
            "[[shard]]\nid = 1\nurl = \"sqlite://x.db\"\n[[shard]]\nid = 2\nurl = \"sqlite://./x.db\"\n",
            &["shards 1 and 2", "same database"],
        ),
        (
            "[[shard]]\nid = 1\nurl = \"redis://h\"\n",
            &["unknown scheme", "sqlite://PATH"],
        ),
        (
            "[[shard]]\nid = 1\nurl = \"etcd://h:2379\"\n",
            &["etcd", "no shard data"],
        ),
        (
            "[[shard]]\nid = \"one\"\nurl = \"sqlite://x.db\"\n",
            &["id", "[[shard]]"],
        ),
        (
            "[[shards]]\nid = 1\nurl = \"sqlite://x.db\"\n",
            &["shards", "[[shard]]"],
        ),
        ("", &["no shards"]),
        (
            "[[shard]]\nid = 1\nurl = \"postgres://u@h/db?schema=Bad-Name\"\n",
            &["shard 1", "schema"],
        ),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        for cmd in ["init", "check"] {
            let err = fails(&["shard-set", cmd, "--config", path.to_str().unwrap()], 1);
            assert!(err.starts_with("error: "), "{err}");
            assert!(err.contains(&format!("bad{i}.toml")), "{text:?}: {err}");
            for n in *needles {
                assert!(err.contains(n), "{text:?}: {err} lacks {n:?}");
            }
        }
    }
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.ends_with(".toml"))
        .collect();
    assert!(names.is_empty(), "bad files created {names:?}");
    let err = fails(
        &["shard-set", "check", "--config", "/nonexistent/s.toml"],
        1,
    );
    assert!(err.contains("/nonexistent/s.toml"), "{err}");
    fails(&["shard-set", "check"], 2);
}

#[test]
fn postgres_schemas_as_shards_are_checked() {
    let Some(pg) = TempPostgres::shared() else {
        return;
    };
    let dir = TempDir::new().unwrap();
    let (a, b) = (
        format!("{}?schema=cli_shard_a", pg.url()),
        format!("{}?schema=cli_shard_b", pg.url()),
    );
    let good = write_config(dir.path(), "good.toml", &[(10, &a), (11, &b)]);
    let out = ok(&["shard-set", "init", "--config", &good]);
    assert!(
        out.contains("shard 10") && out.contains("recorded"),
        "{out}"
    );
    ok(&["shard-set", "check", "--config", &good]);
    let swapped = write_config(dir.path(), "swapped.toml", &[(10, &b), (11, &a)]);
    let err = fails(&["shard-set", "check", "--config", &swapped], 1);
    assert!(
        err.contains("records shard id 11, not 10") && err.contains("records shard id 10, not 11"),
        "{err}"
    );
}

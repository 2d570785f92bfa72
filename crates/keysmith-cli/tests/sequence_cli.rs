//! The sequence commands of the real binary: output, errors, exit codes, and
//! that a failing command changes nothing.

mod common;

use common::{Db, KEYSMITH};

#[test]
fn create_next_show_list_drop() {
    let db = Db::new();
    db.ok(&["create", "orders", "--start", "10", "--block", "4"]);
    assert_eq!(db.ok(&["next", "orders", "--count", "3"]), "10\n11\n12\n");
    // The closed handle handed its tail back: the next process continues at 13.
    assert_eq!(db.ok(&["next", "orders"]), "13\n");
    let show: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "show", "orders"])).unwrap();
    assert_eq!(show["next"], 14);
    assert_eq!(show["block"], 4);
    assert_eq!(show["start"], 10);
    db.ok(&["create", "users"]);
    let list: serde_json::Value = serde_json::from_str(&db.ok(&["--json", "list"])).unwrap();
    let names: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["orders", "users"]);
    db.ok(&["drop", "users"]);
    assert!(db.ok(&["list"]).starts_with("orders\t"));
    let json: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "next", "orders", "-n", "2"])).unwrap();
    assert_eq!(json["values"], serde_json::json!([14, 15]));
}

#[test]
fn every_strategy_and_strict_mode() {
    let db = Db::new();
    db.ok(&["create", "s"]);
    let mut all = Vec::new();
    for strategy in ["optimistic", "locked", "atomic"] {
        for block in ["1", "7"] {
            let out = db.ok(&[
                "next",
                "s",
                "-n",
                "5",
                "--strategy",
                strategy,
                "--block",
                block,
            ]);
            all.extend(out.lines().map(|l| l.parse::<i64>().unwrap()));
        }
    }
    assert_eq!(
        all,
        (1..=30).collect::<Vec<_>>(),
        "one process at a time leaves no gaps"
    );
}

#[test]
fn a_missing_sequence_is_an_error_naming_the_closest_and_is_not_created() {
    let db = Db::new();
    db.ok(&["create", "orders"]);
    let (code, err) = db.fails(&["next", "ordres"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("\"ordres\" does not exist") && err.contains("\"orders\""),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one-line error: {err}");
    let (_, err) = db.fails(&["show", "ordres"]);
    assert!(err.contains("did you mean"), "{err}");
    db.fails(&["drop", "ordres"]);
    assert_eq!(db.ok(&["list"]).lines().count(), 1);
}

#[test]
fn bad_input_is_a_one_line_error_and_changes_nothing() {
    let db = Db::new();
    db.ok(&["create", "s", "--max", "100"]);
    let long = "x".repeat(513);
    let cases: Vec<Vec<&str>> = vec![
        vec!["create", ""],
        vec!["create", "has space"],
        vec!["create", "tab\there"],
        vec!["create", "ctl\u{1}x"],
        vec!["create", &long],
        vec!["create", "neg", "--start", "-5"],
        vec!["create", "inv", "--start", "10", "--max", "5"],
        vec!["create", "blk", "--block", "0"],
        vec!["create", "s"],
        vec!["next", "s", "--count", "0"],
        vec!["next", "s", "--count", "-3"],
        vec!["next", "s", "--count", "99999999999999"],
        vec!["next", "s", "--block", "0"],
    ];
    for args in cases {
        let (code, err) = db.fails(&args);
        assert!(code == 1 || code == 2, "{args:?}: exit {code}");
        assert!(err.starts_with("error:"), "{args:?}: {err}");
        if code == 1 {
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
    }
    let list: serde_json::Value = serde_json::from_str(&db.ok(&["--json", "list"])).unwrap();
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "a failed command created something"
    );
    assert_eq!(list[0]["next"], 1, "a failed command reserved values");
    assert_eq!(list[0]["version"], 1, "a failed command wrote the row");
}

#[test]
fn url_like_names_work() {
    let db = Db::new();
    db.ok(&["create", "example.com/a#main"]);
    assert_eq!(db.ok(&["next", "example.com/a#main"]), "1\n");
}

#[test]
fn exhaustion_is_an_error_not_a_wrap() {
    let db = Db::new();
    db.ok(&["create", "tiny", "--start", "1", "--max", "3"]);
    assert_eq!(db.ok(&["next", "tiny", "-n", "3"]), "1\n2\n3\n");
    let (code, err) = db.fails(&["next", "tiny"]);
    assert_eq!(code, 1);
    assert!(err.contains("exhausted"), "{err}");
}

#[test]
fn bad_store_urls() {
    for url in [
        "nonsense",
        "bogus://x",
        "sqlite://",
        "sqlite://k.db?bad=1",
        "memory://x",
    ] {
        let out = std::process::Command::new(KEYSMITH)
            .args(["--store", url, "list"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{url}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("error:") && err.lines().count() == 1,
            "{url}: {err}"
        );
    }
}

#[test]
fn an_unreadable_or_foreign_file_is_a_clear_error() {
    let db = Db::new();
    std::fs::write(db.path(), b"this is not a database, just text".repeat(200)).unwrap();
    let before = std::fs::read(db.path()).unwrap();
    let (code, err) = db.fails(&["list"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a keysmith database"), "{err}");
    assert_eq!(
        std::fs::read(db.path()).unwrap(),
        before,
        "the file was changed"
    );
}

#[test]
fn a_locked_database_is_a_clear_error_after_the_busy_timeout() {
    let db = Db::new();
    db.ok(&["create", "s"]);
    let holder = rusqlite::Connection::open(db.path()).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let url = format!("{}?busy_timeout_ms=100", db.url());
    let out = std::process::Command::new(KEYSMITH)
        .args(["--store", &url, "next", "s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("locked"), "{err}");
    assert!(out.stdout.is_empty());
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        db.ok(&["next", "s"]),
        "1\n",
        "nothing was reserved while locked"
    );
}

#[test]
fn usage_errors_exit_2() {
    let db = Db::new();
    assert_eq!(db.fails(&["frobnicate"]).0, 2);
    assert_eq!(db.fails(&["next"]).0, 2);
    assert_eq!(db.fails(&["next", "s", "--count", "x"]).0, 2);
}

/// `alter` moves next forward and changes max and block; a change the
/// sequence does not allow exits non-zero, says why and changes nothing.
#[test]
fn alter_moves_forward_only_and_refuses_what_would_repeat_a_value() {
    let db = Db::new();
    db.ok(&["create", "inv", "--block", "10"]);
    assert_eq!(db.ok(&["next", "inv", "-n", "3"]), "1\n2\n3\n");
    let after: serde_json::Value = serde_json::from_str(&db.ok(&[
        "--json", "alter", "inv", "--next", "1000", "--max", "5000", "--block", "7",
    ]))
    .unwrap();
    assert_eq!(
        (&after["next"], &after["max"], &after["block"]),
        (
            &serde_json::json!(1000),
            &serde_json::json!(5000),
            &serde_json::json!(7)
        )
    );
    assert_eq!(db.ok(&["next", "inv", "-n", "2"]), "1000\n1001\n");
    let before = db.ok(&["--json", "show", "inv"]);
    for (args, says) in [
        (vec!["alter", "inv", "--next", "5"], "only move forward"),
        (vec!["alter", "inv", "--max", "10"], "reserved already"),
        (vec!["alter", "inv", "--block", "0"], "block"),
        (vec!["alter", "inv", "--next", "-1"], "only move forward"),
        (vec!["alter", "inv"], "nothing to change"),
        (vec!["alter", "nope", "--next", "5"], "does not exist"),
    ] {
        let (code, err) = db.fails(&args);
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(
        db.ok(&["--json", "show", "inv"]),
        before,
        "a refused alter changed the sequence"
    );
}

/// `adopt` reads a table's largest key and moves the sequence above it;
/// `--dry-run` only says so; a missing table exits non-zero and changes
/// nothing.
#[test]
fn adopt_a_table() {
    let db = Db::new();
    let app = db.path().with_file_name("app.db");
    let conn = rusqlite::Connection::open(&app).unwrap();
    conn.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY); INSERT INTO orders VALUES (41), (9);",
    )
    .unwrap();
    let url = format!("sqlite://{}", app.display());
    let args = |extra: &[&'static str]| {
        let mut v = vec![
            "adopt",
            "orders",
            "--database",
            url.as_str(),
            "--table",
            "orders",
            "--column",
            "id",
        ];
        v.extend_from_slice(extra);
        v
    };
    // No store yet: adopting without --create makes none.
    let (code, err) = db.fails(&args(&[]));
    assert_ne!(code, 0);
    assert!(err.contains("there is no store at"), "{err}");
    let out = db.ok(&args(&["--create", "--dry-run"]));
    assert!(out.contains("would create it starting at 42"), "{out}");
    assert!(
        db.ok(&["list"]).is_empty(),
        "a dry run created the sequence"
    );
    let out = db.ok(&args(&["--create"]));
    assert!(out.contains("create it starting at 42"), "{out}");
    conn.execute_batch("INSERT INTO orders VALUES (500);")
        .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&db.ok(&[&["--json"][..], &args(&[])].concat())).unwrap();
    assert_eq!(
        (json["action"].as_str(), json["next_after"].as_i64()),
        (Some("moved"), Some(501))
    );
    assert_eq!(db.ok(&["next", "orders"]), "501\n");
    let before = db.ok(&["--json", "show", "orders"]);
    let (code, err) = db.fails(&[
        "adopt",
        "orders",
        "--database",
        &url,
        "--table",
        "nope",
        "--column",
        "id",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("no table \"nope\""), "{err}");
    assert_eq!(db.ok(&["--json", "show", "orders"]), before);
}

/// `create|alter --failover-skip` set the margin `show` reports; `fence`
/// moves sequences forward, `--dry-run` changes nothing, bad input exits
/// non-zero saying what to give and changes nothing.
#[test]
fn failover_skip_and_fence() {
    let db = Db::new();
    db.ok(&["create", "a", "--failover-skip", "5000"]);
    db.ok(&["create", "b"]);
    let show = |name: &str| -> serde_json::Value {
        serde_json::from_str(&db.ok(&["--json", "show", name])).unwrap()
    };
    let a = show("a");
    assert_eq!(a["failover_skip"], 5000);
    assert_eq!(a["failover_skip_set"], true);
    assert_eq!(a["skipped_at_failover"], 0);
    assert!(a["generation"].as_str().unwrap().starts_with("sqlite-"));
    let b = show("b");
    assert_eq!(b["failover_skip"], 1_000_000, "automatic: the floor");
    assert_eq!(b["failover_skip_set"], false);
    db.ok(&["alter", "b", "--failover-skip", "7"]);
    assert_eq!(show("b")["failover_skip"], 7);
    assert!(db.ok(&["show", "a"]).contains("failover:  skip 5000 (set)"));

    assert_eq!(db.ok(&["next", "a", "-n", "3"]), "1\n2\n3\n");
    // A dry run prints the plan and writes nothing.
    let before = db.ok(&["--json", "show", "a"]);
    let plan: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "fence", "a", "--skip", "100", "--dry-run"]))
            .unwrap();
    assert_eq!(plan["dry_run"], true);
    assert_eq!(
        plan["changes"],
        serde_json::json!([{"kind": "sequence", "name": "a", "before": 4, "after": 104}])
    );
    assert_eq!(db.ok(&["--json", "show", "a"]), before);
    assert_eq!(
        db.ok(&["fence", "a", "--skip", "100"]),
        "sequence a: moved next 4 -> 104\n"
    );
    assert_eq!(db.ok(&["next", "a"]), "104\n");
    let all = db.ok(&["fence", "--all", "--skip", "10"]);
    assert!(all.contains("sequence a: moved next 105 -> 115"), "{all}");
    assert!(all.contains("sequence b: moved next 1 -> 11"), "{all}");

    let before = db.ok(&["--json", "list"]);
    for (args, says) in [
        (&["fence", "a", "--skip", "0"][..], "skip must be between 1"),
        (
            &["fence", "a", "--skip", "-5"][..],
            "skip must be between 1",
        ),
        (&["fence", "nope", "--skip", "5"][..], "does not exist"),
        (
            &["create", "c", "--failover-skip", "-1"][..],
            "failover skip must be between 0",
        ),
        (
            &["alter", "a", "--failover-skip", "-1"][..],
            "failover skip must be between 0",
        ),
    ] {
        let (code, err) = db.fails(args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    for args in [
        &["fence", "--skip", "5"][..],
        &["fence", "a", "--all", "--skip", "5"][..],
    ] {
        let (code, err) = db.fails(args);
        assert_eq!(code, 2, "usage error {args:?}: {err}");
    }
    assert_eq!(
        db.ok(&["--json", "list"]),
        before,
        "failed commands change nothing"
    );
}

/// `--increment K --offset R`: every value `next` prints, in any process,
/// is R modulo K; `show` and `list` give values and the class; `alter`
/// rounds into the class; bad classes are refused and create nothing.
#[test]
fn residue_classes_from_the_command_line() {
    let db = Db::new();
    db.ok(&[
        "create",
        "eu",
        "--increment",
        "4",
        "--offset",
        "3",
        "--start",
        "1",
        "--block",
        "5",
    ]);
    let first: Vec<i64> = db
        .ok(&["next", "eu", "--count", "3"])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(first, [3, 7, 11]);
    // Another process: the tail came back, so it continues at 15.
    assert_eq!(db.ok(&["next", "eu"]), "15\n");
    let show: serde_json::Value = serde_json::from_str(&db.ok(&["--json", "show", "eu"])).unwrap();
    assert_eq!(
        (
            &show["next"],
            &show["start"],
            &show["increment"],
            &show["offset"]
        ),
        (
            &serde_json::json!(19),
            &serde_json::json!(3),
            &serde_json::json!(4),
            &serde_json::json!(3)
        ),
        "{show}"
    );
    assert!(db.ok(&["show", "eu"]).contains("values:    3 modulo 4"));
    db.ok(&["alter", "eu", "--next", "100"]);
    assert_eq!(
        db.ok(&["next", "eu"]),
        "103\n",
        "100 rounded up into the class"
    );
    let list: serde_json::Value = serde_json::from_str(&db.ok(&["--json", "list"])).unwrap();
    assert_eq!(list[0]["next"], 107);

    for args in [
        vec!["create", "a", "--increment", "4", "--offset", "4"],
        vec!["create", "b", "--increment", "1"],
        vec!["create", "c", "--increment", "4", "--offset", "-1"],
        vec!["create", "d", "--increment", "4", "--gapless"],
        vec!["create", "e", "--offset", "1"],
        vec![
            "create",
            "f",
            "--increment",
            "10",
            "--offset",
            "9",
            "--start",
            "0",
            "--max",
            "8",
        ],
    ] {
        let (code, err) = db.fails(&args);
        assert!(code == 1 || code == 2, "{args:?}: exit {code}");
        assert!(err.starts_with("error:"), "{args:?}: {err}");
    }
    let (_, err) = db.fails(&["create", "a", "--increment", "4", "--offset", "4"]);
    assert!(
        err.contains("offset must be between 0 and increment - 1 = 3"),
        "{err}"
    );
    let list: serde_json::Value = serde_json::from_str(&db.ok(&["--json", "list"])).unwrap();
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "a refused class created a sequence"
    );
}

//! The pool commands of the real binary: output, errors, exit codes, and that
//! a failing command changes nothing.

mod common;

use std::collections::BTreeSet;

use common::Db;

fn lines(s: &str) -> Vec<i64> {
    s.lines().map(|l| l.parse().unwrap()).collect()
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[test]
fn create_take_show_members_list_drop() {
    let db = Db::new();
    let created = db.ok(&["pool", "create", "tickets", "--size", "5", "--start", "10"]);
    assert!(created.contains("size:      5"), "{created}");

    let first = lines(&db.ok(&["pool", "take", "tickets", "--count", "5"]));
    let first_set: BTreeSet<i64> = first.iter().copied().collect();
    assert_eq!(first_set.len(), 5, "{first:?}");
    // Any generation: a slot taken twice hands out its replacement (v + 5).
    assert!(first.iter().all(|&v| v >= 10), "{first:?}");

    let more = json(&db.ok(&["--json", "pool", "take", "tickets", "-n", "3"]));
    let more: Vec<i64> = more["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(more.len(), 3);
    assert!(more.iter().all(|v| !first_set.contains(v)), "{more:?}");

    let show = json(&db.ok(&["--json", "pool", "show", "tickets"]));
    assert_eq!(show["name"], "tickets");
    assert_eq!(show["start"], 10);
    assert_eq!(show["size"], 5);
    assert_eq!(show["taken"], 8);
    let plain = db.ok(&["pool", "show", "tickets"]);
    assert!(plain.contains("taken:     8"), "{plain}");

    // Members: five numbers, none of them handed out, one per residue mod 5.
    let members = lines(&db.ok(&["pool", "members", "tickets"]));
    assert_eq!(members.len(), 5);
    assert!(members.windows(2).all(|w| w[0] < w[1]), "ascending");
    let residues: BTreeSet<i64> = members.iter().map(|m| (m - 10) % 5).collect();
    assert_eq!(residues.len(), 5);
    assert!(
        members
            .iter()
            .all(|m| !first_set.contains(m) && !more.contains(m))
    );
    assert_eq!(
        json(&db.ok(&["--json", "pool", "members", "tickets"])),
        serde_json::json!(members)
    );
    // Every number below a member was handed out: no holes.
    let taken: Vec<i64> = first.iter().chain(&more).copied().collect();
    assert!(keysmith_testsupport::pool_holes(10, 5, &taken, &members).is_empty());

    db.ok(&["pool", "create", "alpha", "--size", "2"]);
    assert_eq!(
        db.ok(&["pool", "list"]),
        "alpha\tstart=1\tsize=2\ntickets\tstart=10\tsize=5\n"
    );
    let listed = json(&db.ok(&["--json", "pool", "list"]));
    assert_eq!(listed[1]["name"], "tickets");
    assert_eq!(
        json(&db.ok(&["--json", "pool", "drop", "alpha"])),
        serde_json::json!({ "dropped": "alpha" })
    );
    assert_eq!(db.ok(&["pool", "list"]), "tickets\tstart=10\tsize=5\n");
}

#[test]
fn stats_go_to_stderr_and_a_lone_taker_never_conflicts() {
    let db = Db::new();
    db.ok(&["pool", "create", "p", "--size", "4"]);
    let out = db.run(&["pool", "take", "p", "-n", "6", "--stats", "--sample", "2"]);
    assert!(out.status.success());
    assert_eq!(lines(&String::from_utf8(out.stdout).unwrap()).len(), 6);
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "takes=6 samples=6 attempts=6 conflicts=0\n"
    );
    let out = db.run(&["pool", "take", "p", "-n", "6", "--stats", "--reuse-sample"]);
    let stats = String::from_utf8(out.stderr).unwrap();
    assert!(stats.starts_with("takes=6 samples=2 "), "{stats}");
}

#[test]
fn a_missing_pool_is_an_error_naming_the_closest() {
    let db = Db::new();
    db.ok(&["pool", "create", "tickets", "--size", "3"]);
    for cmd in ["take", "show", "members", "drop"] {
        let (code, err) = db.fails(&["pool", cmd, "tikets"]);
        assert_eq!(code, 1, "{cmd}");
        assert_eq!(
            err,
            "error: pool \"tikets\" does not exist; did you mean \"tickets\"? (or create the pool first)\n",
            "{cmd}"
        );
    }
    let (_, err) = db.fails(&["pool", "take", "zzz"]);
    assert!(err.contains("create it first"), "{err}");
}

#[test]
fn bad_input_is_a_one_line_error_and_changes_nothing() {
    let db = Db::new();
    db.ok(&["pool", "create", "p", "--size", "3"]);
    let long = "x".repeat(513);
    let cases: Vec<Vec<&str>> = vec![
        vec!["pool", "create", "", "--size", "3"],
        vec!["pool", "create", "has space", "--size", "3"],
        vec!["pool", "create", &long, "--size", "3"],
        vec!["pool", "create", "q"],
        vec!["pool", "create", "q", "--size", "0"],
        vec!["pool", "create", "q", "--size", "-2"],
        vec!["pool", "create", "q", "--size", "1000001"],
        vec!["pool", "create", "q", "--size", "abc"],
        vec!["pool", "create", "q", "--size", "3", "--start", "-1"],
        vec![
            "pool",
            "create",
            "q",
            "--size",
            "3",
            "--start",
            "9223372036854775803",
        ],
        vec!["pool", "create", "p", "--size", "3"],
        vec!["pool", "take", "p", "--count", "0"],
        vec!["pool", "take", "p", "--count", "-3"],
        vec!["pool", "take", "p", "--count", "1000001"],
        vec!["pool", "take", "p", "--sample", "0"],
        vec!["pool", "take", "p", "--sample", "1001"],
        vec!["pool", "take", "p", "--max-rounds", "0"],
        vec!["pool", "take"],
        vec!["pool", "frobnicate"],
    ];
    for args in cases {
        let (code, err) = db.fails(&args);
        assert!(code == 1 || code == 2, "{args:?}: exit {code}");
        assert!(err.starts_with("error:"), "{args:?}: {err}");
        if code == 1 {
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
    }
    assert_eq!(db.ok(&["pool", "list"]), "p\tstart=1\tsize=3\n");
    assert_eq!(lines(&db.ok(&["pool", "members", "p"])), [1, 2, 3]);
}

#[test]
fn a_bad_count_does_not_touch_the_store() {
    let db = Db::new();
    db.fails(&["pool", "take", "p", "--count", "0"]);
    assert!(!db.path().exists(), "the database file was created");
}

#[test]
fn the_largest_start_hands_out_each_first_member_then_is_exhausted() {
    let db = Db::new();
    // i64::MAX - 5: members MAX-5..=MAX-3, replaced by MAX-2..=MAX.
    db.ok(&[
        "pool",
        "create",
        "top",
        "--size",
        "3",
        "--start",
        "9223372036854775802",
    ]);
    let got: BTreeSet<i64> = lines(&db.ok(&["pool", "take", "top", "-n", "3"]))
        .into_iter()
        .collect();
    assert_eq!(got, (i64::MAX - 5..=i64::MAX - 3).collect());
    let (code, err) = db.fails(&["pool", "take", "top"]);
    assert_eq!(code, 1);
    assert!(err.contains("exhausted"), "{err}");
    assert_eq!(
        lines(&db.ok(&["pool", "members", "top"])),
        [i64::MAX - 2, i64::MAX - 1, i64::MAX]
    );
}

/// `pool create --increment K --offset R`: every number `take` prints, in
/// any process, is R modulo K; `show`, `members` and `list` speak in values
/// and give the class; a bad class, an offset without an increment, and a
/// start whose values would pass 2^63 - 1 are usage errors (exit 2) that
/// create nothing and leave the store unopened.
#[test]
fn pools_in_a_residue_class_from_the_command_line() {
    let db = Db::new();
    let created = db.ok(&[
        "pool",
        "create",
        "eu",
        "--size",
        "4",
        "--start",
        "10",
        "--increment",
        "4",
        "--offset",
        "3",
    ]);
    // 11 is the first value 3 mod 4 at or above 10.
    assert!(created.contains("start:     11"), "{created}");
    assert!(
        created.contains("values:    3 modulo 4 (--increment 4 --offset 3)"),
        "{created}"
    );
    let mut seen = BTreeSet::new();
    for _ in 0..3 {
        for v in lines(&db.ok(&["pool", "take", "eu", "-n", "5"])) {
            assert_eq!(v.rem_euclid(4), 3, "{v} is not 3 mod 4");
            assert!(v >= 11, "{v} is below the start");
            assert!(seen.insert(v), "{v} taken twice");
        }
    }
    let show = json(&db.ok(&["--json", "pool", "show", "eu"]));
    assert_eq!(
        (
            &show["start"],
            &show["increment"],
            &show["offset"],
            &show["taken"]
        ),
        (
            &serde_json::json!(11),
            &serde_json::json!(4),
            &serde_json::json!(3),
            &serde_json::json!(15)
        ),
        "{show}"
    );
    for field in ["lowest", "highest", "max_value"] {
        assert_eq!(
            show[field].as_i64().unwrap().rem_euclid(4),
            3,
            "{field}: {show}"
        );
    }
    let members = lines(&db.ok(&["pool", "members", "eu"]));
    assert_eq!(members.len(), 4);
    assert!(
        members
            .iter()
            .all(|m| m.rem_euclid(4) == 3 && !seen.contains(m)),
        "{members:?}"
    );
    // No holes: every value of the class below the lowest member was taken.
    assert!((11..members[0]).step_by(4).all(|v| seen.contains(&v)));
    // The offset defaults to 0.
    let zero = json(&db.ok(&[
        "--json",
        "pool",
        "create",
        "z",
        "--size",
        "2",
        "--start",
        "7",
        "--increment",
        "5",
    ]));
    assert_eq!(
        (&zero["start"], &zero["offset"]),
        (&serde_json::json!(10), &serde_json::json!(0))
    );
    assert_eq!(
        db.ok(&["pool", "list"]),
        "eu\tstart=11\tsize=4\tincrement=4\toffset=3\nz\tstart=10\tsize=2\tincrement=5\toffset=0\n"
    );
    assert_eq!(json(&db.ok(&["--json", "pool", "list"]))[0]["increment"], 4);

    let too_far = (i64::MAX - 30).to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--increment", "4", "--offset", "4"],
            "offset must be between 0 and increment - 1 = 3",
        ),
        (vec!["--increment", "1"], "increment must be between 2 and"),
        (vec!["--increment", "0"], "increment must be between 2 and"),
        (vec!["--increment", "4", "--offset", "-1"], "got -1"),
        (vec!["--offset", "1"], "--increment"),
        // Fits without a class (start <= 2^63 - 2 * size), not in values
        // of one.
        (vec!["--start", &too_far, "--increment", "2"], "too large"),
    ];
    for (extra, says) in cases {
        let mut args = vec!["pool", "create", "bad", "--size", "10"];
        args.extend(extra);
        let (code, err) = db.fails(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.starts_with("error:") && err.contains(says),
            "{args:?}: {err}"
        );
    }
    db.ok(&[
        "pool", "create", "fits", "--size", "10", "--start", &too_far,
    ]);
    assert_eq!(
        json(&db.ok(&["--json", "pool", "list"]))
            .as_array()
            .unwrap()
            .len(),
        3,
        "a refused create made a pool"
    );
    // Checked before the store is opened.
    let fresh = Db::new();
    fresh.fails(&["pool", "create", "p", "--size", "3", "--increment", "1"]);
    assert!(!fresh.path().exists(), "the database file was created");
}

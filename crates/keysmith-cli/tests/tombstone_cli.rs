//! Creating a dropped name continues above the values it handed out: the
//! real binary on a SQLite file, for sequences and pools, and
//! `--start-below-dropped` to start lower on purpose.

mod common;

use common::Db;

fn values(out: &str) -> Vec<i64> {
    out.lines().map(|l| l.parse().unwrap()).collect()
}

#[test]
fn a_sequence_created_again_continues_above_its_dropped_values() {
    let db = Db::new();
    db.ok(&["create", "orders", "--block", "5"]);
    let before = values(&db.ok(&["next", "orders", "-n", "7"]));
    assert_eq!(before, (1..=7).collect::<Vec<_>>());
    db.ok(&["drop", "orders"]);
    let out = db.cmd().args(["create", "orders"]).output().unwrap();
    assert!(out.status.success());
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(
        note.contains("dropped before") && note.contains("--start-below-dropped"),
        "{note}"
    );
    let after = values(&db.ok(&["next", "orders", "-n", "3"]));
    let highest = before.iter().max().unwrap();
    assert!(
        after.iter().all(|v| v > highest),
        "{after:?} repeats a value of {before:?}"
    );
    // JSON says where it continued.
    db.ok(&["drop", "orders"]);
    let created: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "create", "orders"])).unwrap();
    assert_eq!(created["continued_above_dropped"], created["start"]);
    assert!(created["start"].as_i64().unwrap() > after[2]);
    // Explicitly below: the start is honoured.
    db.ok(&["drop", "orders"]);
    let created: serde_json::Value = serde_json::from_str(&db.ok(&[
        "--json",
        "create",
        "orders",
        "--start",
        "2",
        "--start-below-dropped",
    ]))
    .unwrap();
    assert_eq!(created["start"], 2);
    assert!(
        created.get("continued_above_dropped").is_none(),
        "{created}"
    );
    assert_eq!(db.ok(&["next", "orders"]), "2\n");
}

#[test]
fn no_room_above_the_dropped_values_is_an_error_that_creates_nothing() {
    let db = Db::new();
    db.ok(&["create", "small", "--max", "20"]);
    db.ok(&["next", "small", "-n", "15"]);
    db.ok(&["drop", "small"]);
    let (code, err) = db.fails(&["create", "small", "--max", "10"]);
    assert_ne!(code, 0);
    assert!(err.contains("start_below_dropped"), "{err}");
    db.fails(&["show", "small"]);
}

#[test]
fn a_pool_created_again_continues_above_its_dropped_numbers() {
    let db = Db::new();
    db.ok(&["pool", "create", "tickets", "--size", "4"]);
    let before = values(&db.ok(&["pool", "take", "tickets", "-n", "6"]));
    db.ok(&["pool", "drop", "tickets"]);
    db.ok(&["pool", "create", "tickets", "--size", "4"]);
    let after = values(&db.ok(&["pool", "take", "tickets", "-n", "4"]));
    let highest = before.iter().max().unwrap();
    assert!(
        after.iter().all(|v| v > highest),
        "{after:?} repeats a number of {before:?}"
    );
    db.ok(&["pool", "drop", "tickets"]);
    let shown: serde_json::Value = serde_json::from_str(&db.ok(&[
        "--json",
        "pool",
        "create",
        "tickets",
        "--size",
        "4",
        "--start-below-dropped",
    ]))
    .unwrap();
    assert_eq!(shown["start"], 1);
}

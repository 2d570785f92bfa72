//! Gap-free numbers on the real binary, on SQLite, PostgreSQL, MariaDB and etcd:
//! many holder processes each `keysmith ticket take` a number, then commit
//! it, release it, or are SIGKILLed while holding it (a short `--ttl`), and
//! some are killed in the middle of the take. In the end the committed
//! numbers are exactly `1..=n`: no duplicate, no hole. Also: the CLI's
//! refusals (bad tickets, `next` on a gap-free sequence, bad periods and
//! templates) exit non-zero, say what to do, and change nothing. The
//! SIGKILL scenario is `keysmith_testsupport::processes`, written once.

mod common;

use common::Db;
use keysmith_testsupport::processes::{Postgres, Sqlite};

/// `VALUE TICKET` parsed.
fn taken(line: &str) -> (i64, String) {
    let (v, t) = line
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("not VALUE TICKET: {line:?}"));
    (v.parse().unwrap(), t.to_owned())
}

#[test]
fn sqlite_gapless_numbers_survive_sigkills() {
    common::processes(&Sqlite::new()).gapless_under_sigkills(60);
}

#[test]
fn postgres_gapless_numbers_survive_sigkills() {
    if let Some(pg) = Postgres::shared() {
        common::processes(&pg).gapless_under_sigkills(60);
    }
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_gapless_numbers_survive_sigkills() {
    if let Some(my) = keysmith_testsupport::processes::MariaDb::shared() {
        common::processes(&my).gapless_under_sigkills(60);
    }
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_gapless_numbers_survive_sigkills() {
    if let Some(etcd) = keysmith_testsupport::processes::Etcd::shared() {
        common::processes(&etcd).gapless_under_sigkills(60);
    }
}

/// Bad tickets are refused with a message, exit non-zero, and change
/// nothing; `next` on a gap-free sequence and `ticket take` on an ordinary
/// one say what to use instead.
#[test]
fn refusals_say_why_and_change_nothing() {
    let db = Db::new();
    db.ok(&["create", "g", "--gapless"]);
    db.ok(&["create", "plain"]);
    let (one, t1) = taken(&db.ok(&["ticket", "take", "g"]));
    assert_eq!(one, 1);
    let forged = format!("0-1-{}", "0".repeat(32));
    for (args, says) in [
        (vec!["ticket", "commit", "g", "junk"], "not a ticket"),
        (
            vec!["ticket", "commit", "g", forged.as_str()],
            "taken again",
        ),
        (
            vec!["ticket", "release", "g", forged.as_str()],
            "taken again",
        ),
        (
            vec!["ticket", "commit", "g", &format!("0-7-{}", "a".repeat(32))],
            "not open",
        ),
        (vec!["ticket", "commit", "nope", &t1], "does not exist"),
        (
            vec!["ticket", "take", "g", "--ttl", "0"],
            "between 1 ms and a day",
        ),
        (vec!["ticket", "take", "plain"], "not gap-free"),
        (vec!["next", "g"], "take a ticket, then commit it"),
    ] {
        let (code, err) = db.fails(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Nothing changed: the holder commits, the next number is 2.
    assert_eq!(db.ok(&["ticket", "commit", "g", &t1]).trim(), "1");
    let (code, err) = db.fails(&["ticket", "commit", "g", &t1]);
    assert!(code == 1 && err.contains("committed already"), "{err}");
    let (two, t2) = taken(&db.ok(&["ticket", "take", "g"]));
    assert_eq!(two, 2);
    assert_eq!(db.ok(&["ticket", "release", "g", &t2]).trim(), "2");
    let (code, err) = db.fails(&["ticket", "commit", "g", &t2]);
    assert!(code == 1 && err.contains("released"), "{err}");
    assert_eq!(taken(&db.ok(&["ticket", "take", "g"])).0, 2);
    // The plain sequence was not touched.
    assert_eq!(db.ok(&["next", "plain"]).trim(), "1");
}

/// Periods and templates from the command line: formatted numbers from
/// `next`, JSON strings, parse back; bad periods and templates create
/// nothing.
#[test]
fn periodic_formatted_numbers_from_the_cli() {
    let db = Db::new();
    db.ok(&[
        "create",
        "d",
        "--period",
        "day",
        "--format",
        "D{period}-{n:02}",
    ]);
    let lines: Vec<String> = db
        .ok(&["next", "d", "--count", "3"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 3);
    for l in &lines {
        // D + an 8-digit day + the counter.
        assert_eq!(l.len(), 12, "{l}");
        assert!(
            l.starts_with('D') && l[1..9].bytes().all(|b| b.is_ascii_digit()),
            "{l}"
        );
        let parsed = db.ok(&["parse", "d", l]);
        assert_eq!(
            parsed.trim(),
            format!("period={} n={}", &l[1..9], l[10..].trim_start_matches('0'))
        );
    }
    if lines[0][1..9] == lines[2][1..9] {
        // Not run across midnight (which restarts the counter).
        assert!(
            lines
                .iter()
                .zip(["-01", "-02", "-03"])
                .all(|(l, e)| l.ends_with(e)),
            "{lines:?}"
        );
    }
    let json = db.ok(&["--json", "next", "d", "--count", "2"]);
    assert!(json.starts_with("{\"values\":[\"D"), "{json}");
    // A counter wider than its padding prints whole.
    db.ok(&["create", "w", "--format", "W{n:02}", "--start", "123"]);
    assert_eq!(db.ok(&["next", "w"]).trim(), "W123");
    assert_eq!(db.ok(&["parse", "w", "W123"]).trim(), "n=123");
    let (code, err) = db.fails(&["parse", "w", "W0123"]);
    assert!(
        code == 1 && err.contains("not a number of template"),
        "{err}"
    );
    // The invoice case: gap-free, yearly, formatted.
    db.ok(&[
        "create",
        "inv",
        "--gapless",
        "--period",
        "year",
        "--format",
        "INV-{period}-{n:04}",
    ]);
    let (text, ticket) = db
        .ok(&["ticket", "take", "inv"])
        .trim()
        .split_once(' ')
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .unwrap();
    assert!(
        text.starts_with("INV-") && text.ends_with("-0001"),
        "{text}"
    );
    assert_eq!(db.ok(&["ticket", "commit", "inv", &ticket]).trim(), text);
    for (args, says) in [
        (
            vec!["create", "b1", "--period", "week"],
            "use day, month or year",
        ),
        (
            vec!["create", "b2", "--period", "day", "--format", "X{n}"],
            "{period} 0 times",
        ),
        (
            vec!["create", "b3", "--format", "X{period}{n}"],
            "no period",
        ),
        (vec!["create", "b4", "--format", "X{n}{n}"], "exactly once"),
        (vec!["create", "b5", "--format", "X{n}{"], "literal braces"),
        (vec!["create", "b6", "--format", "X {n}"], "whitespace"),
    ] {
        let (code, err) = db.fails(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        let (_, err) = db.fails(&["show", args[1]]);
        assert!(
            err.contains("does not exist"),
            "{args:?} created something: {err}"
        );
    }
}

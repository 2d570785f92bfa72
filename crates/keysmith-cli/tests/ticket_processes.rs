//! Gap-free numbers on the real binary, on SQLite, PostgreSQL, MariaDB and etcd:
//! many holder processes each `keysmith ticket take` a number, then commit
//! it, release it, or are SIGKILLed while holding it (a short `--ttl`), and
//! some are killed in the middle of the take. In the end the committed
//! numbers are exactly `1..=n`: no duplicate, no hole. Also: the CLI's
//! refusals (bad tickets, `next` on a gap-free sequence, bad periods and
//! templates) exit non-zero, say what to do, and change nothing.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{DEADLINE, Db, KEYSMITH, keysmith, ok};
use rand::RngExt;

/// A holder: takes a number with a 1 s ticket, prints `VALUE TICKET`, then
/// waits for a line on stdin (`commit` or `release`) and does that.
fn holder(url: &str, name: &str) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(
            r#"out=$("$K" --store "$URL" ticket take "$NAME" --ttl 1) || exit 3
echo "$out"
read what || exit 4
exec "$K" --store "$URL" ticket "$what" "$NAME" "${out#* }""#,
        )
        .env("K", KEYSMITH)
        .env("URL", url)
        .env("NAME", name)
        .env_remove("KEYSMITH_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `VALUE TICKET` parsed.
fn taken(line: &str) -> (i64, String) {
    let (v, t) = line
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("not VALUE TICKET: {line:?}"));
    (v.parse().unwrap(), t.to_owned())
}

fn is_contiguous(s: &BTreeSet<i64>) -> bool {
    s.iter().next_back().is_none_or(|m| *m == s.len() as i64)
}

fn gapless_under_sigkills(url: &str, holders: usize) {
    ok(url, &["create", "inv", "--gapless"]);
    let mut committed: Vec<i64> = Vec::new();
    let mut seen_max = 0;
    let mut killed_tickets = Vec::new();
    let (mut released, mut killed, mut killed_in_take) = (0, 0, 0);
    let mut rng = rand::rng();
    let mut done = 0;
    while done < holders {
        // A few holders at a time, so they race.
        let mut batch: Vec<Child> = (0..4).map(|_| holder(url, "inv")).collect();
        for mut h in batch.drain(..) {
            done += 1;
            let roll = rng.random_range(0..100);
            if roll < 10 {
                // Killed in the middle of the take (or just after it).
                std::thread::sleep(Duration::from_millis(rng.random_range(0..30)));
                h.kill().unwrap();
                h.wait().unwrap();
                killed_in_take += 1;
                continue;
            }
            let mut stdin = h.stdin.take().unwrap();
            // Reading the line first: the number is held when we decide.
            let (tx, rx) = mpsc::channel();
            let mut out = h.stdout.take().unwrap();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut byte = [0u8; 1];
                while let Ok(1) = std::io::Read::read(&mut out, &mut byte) {
                    buf.push(byte[0]);
                    if byte[0] == b'\n' {
                        let _ = tx.send(Some(String::from_utf8_lossy(&buf).into_owned()));
                        buf.clear();
                    }
                }
                let _ = tx.send(None);
            });
            let Some(line) = rx.recv_timeout(DEADLINE).expect("a holder hung") else {
                let out = h.wait_with_output().unwrap();
                panic!(
                    "a holder took nothing: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            };
            let (value, ticket) = taken(&line);
            seen_max = seen_max.max(value);
            if roll < 30 {
                // Dies holding the ticket.
                h.kill().unwrap();
                h.wait().unwrap();
                killed += 1;
                killed_tickets.push((value, ticket));
                continue;
            }
            let what = if roll < 45 { "release" } else { "commit" };
            writeln!(stdin, "{what}").unwrap();
            drop(stdin);
            let printed = rx.recv_timeout(DEADLINE).expect("a holder hung");
            let status = h.wait().unwrap();
            let mut err = String::new();
            std::io::Read::read_to_string(&mut h.stderr.take().unwrap(), &mut err).unwrap();
            assert!(status.success(), "{what} of {value} failed: {err}");
            assert_eq!(
                printed.as_deref().map(str::trim),
                Some(value.to_string().as_str())
            );
            if what == "commit" {
                committed.push(value);
            } else {
                released += 1;
            }
        }
    }
    let mut set: BTreeSet<i64> = committed.iter().copied().collect();
    assert_eq!(set.len(), committed.len(), "a number was committed twice");
    // Drain: take and commit until the committed numbers have no hole. The
    // numbers of killed holders come back once their tickets expire (1 s;
    // etcd's leases at least its minimum TTL): until then a take gets a new
    // number, which is committed too, and the loop polls.
    let give_up = Instant::now() + DEADLINE;
    let mut drained = 0;
    while !(is_contiguous(&set) && set.len() as i64 >= seen_max) {
        assert!(Instant::now() < give_up, "holes never filled: {set:?}");
        let (value, ticket) = taken(&ok(url, &["ticket", "take", "inv", "--ttl", "60"]));
        let was_hole = value <= *set.iter().next_back().unwrap_or(&0);
        assert_eq!(
            ok(url, &["ticket", "commit", "inv", &ticket]).trim(),
            value.to_string()
        );
        assert!(set.insert(value), "{value} committed twice");
        drained += 1;
        if !was_hole {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let n = set.len() as i64;
    assert_eq!(set, (1..=n).collect::<BTreeSet<_>>());
    // A dead holder's ticket, its number since taken and committed by
    // another, is refused and changes nothing.
    if let Some((value, ticket)) = killed_tickets.first() {
        let out = keysmith(url)
            .args(["ticket", "commit", "inv", ticket])
            .output()
            .unwrap();
        assert!(!out.status.success(), "a dead holder committed {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("not open") || err.contains("taken again"),
            "{err}"
        );
    }
    let (next, t) = taken(&ok(url, &["ticket", "take", "inv"]));
    assert_eq!(next, n + 1, "the refused commit changed nothing");
    ok(url, &["ticket", "release", "inv", &t]);
    eprintln!(
        "{n} committed: {} by holders ({released} released, {killed} killed holding, {killed_in_take} killed taking), {drained} while draining",
        committed.len()
    );
    assert!(killed > 0 && released > 0, "every path taken");
}

#[test]
fn sqlite_gapless_numbers_survive_sigkills() {
    let db = Db::new();
    gapless_under_sigkills(&db.url(), 60);
}

#[test]
fn postgres_gapless_numbers_survive_sigkills() {
    let Some(pg) = keysmith_testsupport::postgres::TempPostgres::shared() else {
        return;
    };
    gapless_under_sigkills(&format!("{}?schema=ticket_procs", pg.url()), 60);
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_gapless_numbers_survive_sigkills() {
    let Some(db) = keysmith_testsupport::mariadb::TempMariaDb::shared() else {
        return;
    };
    gapless_under_sigkills(&db.fresh_url(), 60);
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_gapless_numbers_survive_sigkills() {
    let Some(etcd) = keysmith_testsupport::etcd::TempEtcd::shared() else {
        return;
    };
    let url = etcd.url_with_prefix(&format!("tickets-{:016x}", rand::random::<u64>()));
    gapless_under_sigkills(&url, 60);
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
        (vec!["next", "g"], "ticket take g"),
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

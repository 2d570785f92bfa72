//! Many OS processes on one SQLite file, and processes killed with SIGKILL:
//! no value is ever handed out twice.

mod common;

use std::collections::HashSet;
use std::io::Read;
use std::process::{Child, Stdio};

use common::{Db, complete_values};
use rand::RngExt;

const STRATEGIES: [&str; 3] = ["optimistic", "locked", "atomic"];

fn assert_increasing(values: &[i64], who: &str) {
    for w in values.windows(2) {
        assert!(w[0] < w[1], "{who}: {} then {}", w[0], w[1]);
    }
}

/// At least 4 processes at once, each strategy, small blocks so they
/// collide often: all values unique, each process's values increasing.
/// (With blocks this small, optimistic puts collide so often that the
/// default 10 attempts can run out: that is a `Contention` error, never a
/// duplicate; the attempt limit is raised so every process finishes.)
#[test]
fn processes_never_share_a_value() {
    for strategy in STRATEGIES {
        let db = Db::new();
        db.ok(&["create", "s", "--block", "3"]);
        let children: Vec<Child> = (0..6)
            .map(|i| {
                let block = if i == 0 { "1" } else { "3" };
                db.cmd()
                    .args([
                        "next",
                        "s",
                        "--count",
                        "300",
                        "--strategy",
                        strategy,
                        "--block",
                        block,
                    ])
                    .args(["--max-attempts", "10000"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut all = HashSet::new();
        let mut total = 0;
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{strategy}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let values = complete_values(&out.stdout);
            assert_eq!(values.len(), 300);
            assert_increasing(&values, strategy);
            total += values.len();
            all.extend(values);
        }
        assert_eq!(all.len(), total, "{strategy}: a value was handed out twice");
    }
}

/// Children allocate in a loop and are killed with SIGKILL at random
/// moments, many times, several at once: no value is ever seen twice, and
/// afterwards the sequence resumes above everything handed out.
#[test]
fn sigkill_at_random_moments_never_repeats_a_value() {
    let mut rng = rand::rng();
    for strategy in STRATEGIES {
        let db = Db::new();
        db.ok(&["create", "k", "--block", "10"]);
        let mut seen = HashSet::new();
        let mut max_seen = 0;
        for _round in 0..6 {
            let mut children: Vec<Child> = (0..3)
                .map(|_| {
                    db.cmd()
                        .args(["next", "k", "--count", "100000000", "--strategy", strategy])
                        .args(["--max-attempts", "10000"])
                        .stdout(Stdio::piped())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect();
            // Kill each after it printed a random number of bytes: a moment
            // chosen by progress, so mid-block and mid-refill both happen.
            let mut outputs = Vec::new();
            for child in &mut children {
                let want = rng.random_range(1..4000);
                let mut got = Vec::new();
                let stdout = child.stdout.as_mut().unwrap();
                let mut buf = [0u8; 512];
                while got.len() < want {
                    match stdout.read(&mut buf).unwrap() {
                        0 => break,
                        n => got.extend_from_slice(&buf[..n]),
                    }
                }
                child.kill().unwrap(); // SIGKILL
                outputs.push(got);
            }
            for (mut child, mut got) in children.into_iter().zip(outputs) {
                child.stdout.take().unwrap().read_to_end(&mut got).unwrap();
                child.wait().unwrap();
                let values = complete_values(&got);
                assert!(!values.is_empty(), "child printed nothing before the kill");
                assert_increasing(&values, strategy);
                for v in values {
                    assert!(seen.insert(v), "{strategy}: {v} handed out twice");
                    max_seen = max_seen.max(v);
                }
            }
        }
        let after: i64 = db
            .ok(&["next", "k", "--strategy", strategy])
            .trim()
            .parse()
            .unwrap();
        assert!(
            after > max_seen,
            "{strategy}: resumed at {after}, below {max_seen}"
        );
    }
}

//! Many OS processes taking from one pool in one SQLite file, and takers
//! killed with SIGKILL: every number unique, the pool keeps exactly N
//! members, and taken ∪ members has no holes but what killed takers held.

mod common;

use std::io::Read;
use std::process::{Child, Stdio};

use common::{Db, complete_values};
use keysmith_testsupport::pool_holes;
use rand::RngExt;

fn members(db: &Db, pool: &str) -> Vec<i64> {
    serde_json::from_str(&db.ok(&["--json", "pool", "members", pool])).unwrap()
}

fn taken_count(db: &Db, pool: &str) -> usize {
    let show: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "pool", "show", pool])).unwrap();
    show["taken"].as_u64().unwrap() as usize
}

/// Six processes at once on a pool of 20, three of them reusing their
/// samples: all finish, no number twice, no hole at all.
#[test]
fn processes_never_share_a_number_and_leave_no_holes() {
    let db = Db::new();
    db.ok(&["pool", "create", "p", "--size", "20", "--start", "1"]);
    let children: Vec<Child> = (0..6)
        .map(|i| {
            let mut c = db.cmd();
            c.args(["pool", "take", "p", "--count", "150"]);
            if i % 2 == 1 {
                c.arg("--reuse-sample");
            }
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut taken = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let values = complete_values(&out.stdout);
        assert_eq!(values.len(), 150);
        taken.extend(values);
    }
    assert_eq!(
        pool_holes(1, 20, &taken, &members(&db, "p")),
        Vec::<i64>::new()
    );
    assert_eq!(taken_count(&db, "p"), 6 * 150);
}

/// Rounds of four takers killed with SIGKILL at moments chosen by their
/// progress: no number twice, N members, and at most one hole per killed
/// taker (the number it had swapped out but not yet printed).
#[test]
fn sigkilled_takers_leave_at_most_one_hole_each() {
    let mut rng = rand::rng();
    let db = Db::new();
    let (start, size) = (1000, 16);
    db.ok(&[
        "pool",
        "create",
        "k",
        "--size",
        &size.to_string(),
        "--start",
        &start.to_string(),
    ]);
    let mut taken = Vec::new();
    let mut killed = 0;
    for round in 0..5 {
        let mut children: Vec<Child> = (0..4)
            .map(|i| {
                let mut c = db.cmd();
                c.args(["pool", "take", "k", "--count", "1000000"]);
                if (round + i) % 2 == 1 {
                    c.arg("--reuse-sample");
                }
                c.stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut outputs = Vec::new();
        for child in &mut children {
            let want = rng.random_range(1..600);
            let mut got = Vec::new();
            let stdout = child.stdout.as_mut().unwrap();
            let mut buf = [0u8; 256];
            while got.len() < want {
                match stdout.read(&mut buf).unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            child.kill().unwrap(); // SIGKILL
            killed += 1;
            outputs.push(got);
        }
        for (mut child, mut got) in children.into_iter().zip(outputs) {
            child.stdout.take().unwrap().read_to_end(&mut got).unwrap();
            child.wait().unwrap();
            let values = complete_values(&got);
            assert!(
                !values.is_empty(),
                "a taker printed nothing before the kill"
            );
            taken.extend(values);
        }
    }
    // A survivor after all the kills still works and adds no hole.
    taken.extend(complete_values(
        db.ok(&["pool", "take", "k", "-n", "50"]).as_bytes(),
    ));
    let holes = pool_holes(start, size, &taken, &members(&db, "k"));
    assert!(
        holes.len() <= killed,
        "{} holes from {killed} killed takers: {holes:?}",
        holes.len()
    );
    assert_eq!(taken_count(&db, "k"), taken.len() + holes.len());
}

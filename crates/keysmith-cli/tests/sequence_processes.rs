//! Many OS processes on one SQLite file, and processes killed with SIGKILL:
//! no value is ever handed out twice. The checks live in `common`, shared
//! with the PostgreSQL and etcd runs.

mod common;

use common::{Db, Kill, STRATEGIES};

/// Six processes at once, each strategy, small blocks so they collide often:
/// all values unique, each process's values increasing.
#[test]
fn processes_never_share_a_value() {
    for strategy in STRATEGIES {
        let db = Db::new();
        common::processes_never_share_a_value(&db.url(), "s", strategy, 6, 300);
    }
}

/// Children allocate in a loop and are killed with SIGKILL at random
/// moments, many times, several at once: no value is ever seen twice, and
/// afterwards the sequence resumes above everything handed out.
#[test]
fn sigkill_at_random_moments_never_repeats_a_value() {
    for strategy in STRATEGIES {
        let db = Db::new();
        common::sigkill_rounds(&db.url(), "k", strategy, 6, Kill::EachWhenDone);
    }
}

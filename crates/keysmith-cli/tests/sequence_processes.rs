//! Many OS processes on one SQLite file, and processes killed with SIGKILL:
//! no value is ever handed out twice. The scenarios are written once in
//! `keysmith_testsupport::processes` and run by every backend
//! (`postgres_processes.rs`, `mysql_processes.rs`, `etcd_processes.rs`).
//!
//! SQLite has no server, so `server_crash_mid_run` does not apply: its crash
//! tests kill the client processes (below), and `serve_processes.rs` kills
//! the `keysmith serve` process.

mod common;

use keysmith_testsupport::processes::{PROCESSES, Sqlite};

/// 8, then 32 processes at once, each strategy, small blocks so they
/// collide often: all values unique, each process's values increasing.
#[test]
fn processes_never_share_a_value() {
    let sqlite = Sqlite::new();
    for n in PROCESSES {
        common::processes(&sqlite).never_share_a_value(n, 300);
    }
}

/// Children allocate in a loop and are killed with SIGKILL at random
/// moments, many times, several at once: no value is ever seen twice, and
/// afterwards the sequence resumes above everything handed out.
#[test]
fn sigkill_at_random_moments_never_repeats_a_value() {
    common::processes(&Sqlite::new()).sigkill_rounds();
}

/// A process holding a handle, paused while others drop the sequence and
/// create it again: resumed, it fails saying so and writes nothing into the
/// new life.
#[test]
fn a_dropped_life_never_writes_into_the_next() {
    common::processes(&Sqlite::new()).a_dropped_life_never_writes_into_the_next();
}

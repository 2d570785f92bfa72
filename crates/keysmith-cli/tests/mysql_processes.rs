//! Many `keysmith` processes on one MariaDB database (the `mysql://`
//! store, feature `mysql`), processes killed with SIGKILL, and the server
//! itself killed (SIGKILL: InnoDB crash recovery on restart) in the middle
//! of a run: no value is ever handed out twice. The scenarios are written
//! once in `keysmith_testsupport::processes` and run by every backend.
//!
//! The servers are throwaway ones from `keysmith-testsupport`; without the
//! MariaDB binaries these tests print why and pass, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1`.
#![cfg(feature = "mysql")]

mod common;

use keysmith_testsupport::processes::{MariaDb, PROCESSES};

/// 8, then 32 processes at once, each strategy, small blocks so they
/// collide often: all values unique, each process's values increasing.
#[test]
fn processes_never_share_a_value() {
    let Some(my) = MariaDb::shared() else {
        return;
    };
    for n in PROCESSES {
        common::processes(&my).never_share_a_value(n, 300);
    }
}

/// Children allocate in a loop and are killed with SIGKILL at random
/// moments (chosen by progress), several at once, over several rounds: no
/// value is ever seen twice, and afterwards the sequence resumes above
/// everything handed out. A child killed inside a transaction (the locked
/// strategy holds a row lock) is rolled back by the server when its
/// connection drops.
#[test]
fn sigkill_at_random_moments_never_repeats_a_value() {
    let Some(my) = MariaDb::shared() else {
        return;
    };
    common::processes(&my).sigkill_rounds();
}

/// The server is killed the hard way while `keysmith next` processes stream
/// values, then restarted, twice: the processes running fail with one
/// `store unavailable` line, those started after succeed, no value is
/// handed out twice (`Processes::server_crash_mid_run`).
#[test]
fn server_crash_mid_run_fails_cleanly_and_repeats_no_value() {
    // A server of its own: the test kills it.
    let Some(my) = MariaDb::start() else {
        return;
    };
    common::processes(&my).server_crash_mid_run();
}

/// A process holding a handle, paused while others drop the sequence and
/// create it again: resumed, it fails saying so and writes nothing into the
/// new life (`Processes::a_dropped_life_never_writes_into_the_next`).
#[test]
fn a_dropped_life_never_writes_into_the_next() {
    let Some(my) = MariaDb::shared() else {
        return;
    };
    common::processes(&my).a_dropped_life_never_writes_into_the_next();
}

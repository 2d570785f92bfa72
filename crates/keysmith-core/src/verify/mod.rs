//! What `keysmith verify` checks: the uniqueness guarantees, tested on a
//! real store by processes that are killed at random.
//!
//! A run creates a scratch sequence and a scratch pool ([`create_scratch`]),
//! both named `keysmith-verify-<random>`, so it can run against a store that
//! holds real sequences and pools. Worker processes each open a [`Worker`]
//! and report every value as soon as it is durable (a [`Value`] line); the
//! caller kills some of them with SIGKILL along the way. A [`Ledger`] reads
//! every reported value and, after the run, what the store holds
//! ([`check_after_run`]); [`Ledger::finish`] sums it up in a [`Report`].
//! [`remove_scratch`] drops the scratch objects again.
//!
//! A run passes ([`Summary::ok`]) when all of these hold:
//!
//! - no sequence value was reported twice, and no pool number twice;
//! - the sequence values each process reported strictly increase;
//! - after the run, a new handle on the sequence gets a value above every
//!   value reported (no value reported can come out again);
//! - after the run, the pool holds one member per residue modulo its size,
//!   and every number reported lies below its residue's member (so none of
//!   them is still, or can again become, a member);
//! - the pool has at most as many holes (numbers taken that nobody reported)
//!   as processes were killed: a taker killed between its swap and its report
//!   loses that one number, and nothing else loses any;
//! - no process failed other than by being killed, every check could read the
//!   store, and at least one value was reported (a run that verified nothing
//!   does not pass).
//!
//! It fails on the first of these that does not hold, and reports every
//! violation it found (up to [`MAX_KEPT`] in detail, all of them counted).
//! What it cannot see: values a process took but never reported. A passing
//! run is evidence, not proof; a failing one is a bug (or a store that does
//! not keep what it committed) worth reporting with the lines it printed.
//!
//! [`history`] checks the histories of concurrent clients (invoke and
//! complete times and values per operation): uniqueness, per-client order
//! and, for strict sequences, real-time order. The partition tests
//! (`crates/keysmith-cli/tests/partitions.rs`) feed theirs to it.

pub mod history;
mod ledger;
mod run;
mod time_order;

pub use ledger::*;
pub use run::*;
pub use time_order::*;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::pool::{self, ValuePool};
use crate::sequence::{self, Sequence};
use crate::store::{PoolSpec, SequenceSpec, Store};
use crate::{Error, Result};

/// The block size of the scratch sequence: small, so blocks change often and
/// kills land near block boundaries.
pub const SCRATCH_BLOCK: i64 = 100;

/// Sequence values a worker takes per [`Worker::step`], beside one pool
/// number: a pool take is one store write, a sequence value from a block is
/// none, so a run checks many more sequence values than pool numbers.
pub const SEQUENCE_VALUES_PER_STEP: usize = 64;

/// How many numbers the scratch pool holds.
pub const SCRATCH_POOL_SIZE: i64 = 256;

/// The first number of the scratch pool.
pub const SCRATCH_POOL_START: i64 = 1;

/// The most violations a [`Report`] describes one by one; the rest are only
/// counted.
pub const MAX_KEPT: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger where processes 0 and 1 reported increasing sequence values
    /// 1..=4 and 11..=14 and pool numbers 1, 2 (pool of 4 from 1).
    fn clean() -> Ledger {
        let mut l = Ledger::new();
        let (a, b) = (l.process_started(), l.process_started());
        for v in 1..=4 {
            l.record(a, Value::Sequence(v));
            l.record(b, Value::Sequence(v + 10));
        }
        l.record(a, Value::Pool(1));
        l.record(b, Value::Pool(2));
        l
    }

    #[test]
    fn a_clean_run_passes() {
        let mut l = clean();
        l.check_sequence_resumes(15);
        l.check_pool(1, 4, &[5, 6, 3, 4]);
        let r = l.finish();
        assert_eq!(r.violations, vec![]);
        assert!(r.summary.ok, "{}", r.summary);
        assert_eq!(r.summary.sequence_values, 8);
        assert_eq!(r.summary.pool_values, 2);
        assert_eq!(r.summary.processes, 2);
        assert!(r.summary.to_string().ends_with(" ok"));
    }

    #[test]
    fn a_duplicate_is_detected() {
        for dup in [Value::Sequence(3), Value::Pool(2)] {
            let mut l = clean();
            let c = l.process_started();
            l.record(c, dup);
            l.check_sequence_resumes(15);
            l.check_pool(1, 4, &[5, 6, 3, 4]);
            let r = l.finish();
            assert_eq!(r.summary.duplicates, 1);
            assert!(!r.summary.ok);
            let first = match dup {
                Value::Sequence(_) => 0,
                Value::Pool(_) => 1,
            };
            assert_eq!(
                r.violations,
                vec![Violation::Duplicate {
                    value: dup,
                    first,
                    again: c
                }]
            );
            assert!(r.summary.to_string().ends_with(" FAILED"));
        }
    }

    #[test]
    fn an_out_of_order_value_is_detected() {
        let mut l = clean();
        l.record(0, Value::Sequence(7)); // above 4: fine
        l.record(0, Value::Sequence(6)); // below 7, and new
        l.record(0, Value::Sequence(6)); // equal: a duplicate and out of order
        l.check_sequence_resumes(15);
        l.check_pool(1, 4, &[5, 6, 3, 4]);
        let r = l.finish();
        assert_eq!(r.summary.order_violations, 2);
        assert_eq!(r.summary.duplicates, 1);
        assert!(!r.summary.ok);
        assert!(r.violations.contains(&Violation::OutOfOrder {
            process: 0,
            previous: 7,
            value: 6
        }));
        assert!(r.violations.contains(&Violation::OutOfOrder {
            process: 0,
            previous: 6,
            value: 6
        }));
    }

    #[test]
    fn values_of_different_processes_need_not_increase_together() {
        let mut l = Ledger::new();
        let (a, b) = (l.process_started(), l.process_started());
        l.record(a, Value::Sequence(20));
        l.record(b, Value::Sequence(10));
        l.record(a, Value::Sequence(21));
        l.record(b, Value::Sequence(11));
        assert_eq!(l.summary().order_violations, 0);
    }

    #[test]
    fn a_sequence_resuming_at_or_below_a_value_seen_is_detected() {
        for next in [14, 3] {
            let mut l = clean();
            l.check_sequence_resumes(next);
            l.check_pool(1, 4, &[5, 6, 3, 4]);
            let r = l.finish();
            assert_eq!(r.summary.resume_violations, 1);
            assert!(!r.summary.ok);
            assert_eq!(
                r.violations,
                vec![Violation::NotResumedAbove { next, max_seen: 14 }]
            );
        }
    }

    #[test]
    fn a_pool_number_seen_and_still_a_member_is_detected() {
        let mut l = clean();
        l.check_sequence_resumes(15);
        // 2 was taken, but its residue's member is still 2.
        l.check_pool(1, 4, &[5, 2, 3, 4]);
        let r = l.finish();
        assert_eq!(r.summary.resume_violations, 1);
        assert!(!r.summary.ok);
        assert_eq!(
            r.violations,
            vec![Violation::PoolNotBelow {
                value: 2,
                member: Some(2)
            }]
        );
    }

    #[test]
    fn a_pool_number_seen_above_its_member_is_detected() {
        let mut l = Ledger::new();
        let a = l.process_started();
        l.record(a, Value::Pool(9)); // residue 0 of a pool of 4 from 1
        l.killed(); // 1 was taken and not reported: one hole, one kill
        l.check_sequence_resumes(1);
        l.check_pool(1, 4, &[5, 2, 3, 4]);
        let r = l.finish();
        assert!(!r.summary.ok);
        assert_eq!(
            r.violations,
            vec![Violation::PoolNotBelow {
                value: 9,
                member: Some(5)
            }]
        );
    }

    #[test]
    fn a_broken_pool_is_detected() {
        let mut l = clean();
        l.check_sequence_resumes(15);
        l.check_pool(1, 4, &[5, 6, 3, 7]); // 3 and 7 share a residue, 4 has none
        let r = l.finish();
        assert!(!r.summary.ok);
        assert!(
            r.violations
                .iter()
                .any(|v| matches!(v, Violation::PoolCorrupt(_))),
            "{:?}",
            r.violations
        );
    }

    #[test]
    fn pool_holes_pass_up_to_one_per_kill() {
        // 1 and 2 reported; members 5, 6, 7, 4: 3 was taken and not reported.
        let mut l = clean();
        l.check_sequence_resumes(15);
        l.check_pool(1, 4, &[5, 6, 7, 4]);
        assert_eq!(l.summary().pool_holes, 1);
        let r = l.finish();
        assert!(!r.summary.ok);
        assert_eq!(
            r.violations,
            vec![Violation::PoolHoles { holes: 1, kills: 0 }]
        );

        let mut l = clean();
        l.killed();
        l.check_sequence_resumes(15);
        l.check_pool(1, 4, &[5, 6, 7, 4]);
        let r = l.finish();
        assert!(r.summary.ok, "{:?}", r.violations);
        assert_eq!((r.summary.pool_holes, r.summary.kills), (1, 1));
    }

    #[test]
    fn errors_and_unchecked_or_empty_runs_fail() {
        let mut l = clean();
        l.error("process 3 exited with status 1");
        l.check_sequence_resumes(15);
        l.check_pool(1, 4, &[5, 6, 3, 4]);
        let r = l.finish();
        assert_eq!(r.summary.errors, 1);
        assert!(!r.summary.ok);

        let r = clean().finish(); // never checked after the run
        assert!(!r.summary.ok);
        assert_eq!(r.summary.errors, 1);

        let mut l = Ledger::new();
        l.check_sequence_resumes(1);
        l.check_pool(1, 4, &[1, 2, 3, 4]);
        let r = l.finish();
        assert!(!r.summary.ok);
        assert_eq!(r.violations, vec![Violation::NothingVerified]);
    }

    #[test]
    fn only_the_first_violations_are_kept_but_all_are_counted() {
        let mut l = Ledger::new();
        let a = l.process_started();
        for _ in 0..MAX_KEPT + 5 {
            l.record(a, Value::Pool(1));
        }
        l.check_sequence_resumes(1);
        l.check_pool(1, 4, &[5, 2, 3, 4]);
        let r = l.finish();
        assert_eq!(r.summary.duplicates, MAX_KEPT as u64 + 4);
        assert_eq!(r.violations.len(), MAX_KEPT);
        assert_eq!(r.more, 4);
    }

    #[test]
    fn values_round_trip_through_their_text_form() {
        for v in [
            Value::Sequence(0),
            Value::Pool(42),
            Value::Sequence(i64::MAX),
        ] {
            assert_eq!(v.to_string().parse::<Value>().unwrap(), v);
        }
        for bad in ["", "s", "s ", "x 1", "s 1.5", "p -", "s  1", "1"] {
            assert!(bad.parse::<Value>().is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_worker_run_on_one_store_passes_and_scratch_is_removed() {
        let store = crate::store::open("memory://").await.unwrap();
        let scratch = create_scratch(&*store).await.unwrap();
        let mut l = Ledger::new();
        for _ in 0..2 {
            let p = l.process_started();
            let w = Worker::open(store.clone(), &scratch.name).await.unwrap();
            for _ in 0..25 {
                w.step(|v| {
                    l.record(p, v);
                    Ok::<(), Error>(())
                })
                .await
                .unwrap();
            }
            w.close().await.unwrap();
        }
        check_after_run(store.clone(), &scratch, &mut l).await;
        remove_scratch(&*store, &scratch).await.unwrap();
        let r = l.finish();
        assert!(r.summary.ok, "{:?}", r.violations);
        assert_eq!(
            (r.summary.sequence_values, r.summary.pool_values),
            (50 * SEQUENCE_VALUES_PER_STEP as u64, 50)
        );
        assert!(sequence::list(&*store).await.unwrap().is_empty());
        assert!(pool::list(&*store).await.unwrap().is_empty());
    }

    fn call(invoked: u64, completed: u64, v: i64) -> TimedCall<u64> {
        TimedCall {
            invoked,
            completed,
            first: v,
            last: v,
        }
    }

    #[test]
    fn time_order_passes_in_order_and_overlapping_calls() {
        // 0 and 1 overlap (any order); 2 comes after both; 3 overlaps 2.
        let calls = [
            call(0, 10, 2),
            call(1, 9, 1),
            call(11, 20, 3),
            call(12, 13, 4),
        ];
        assert_eq!(check_time_order(&calls), Ok(4));
        assert_eq!(check_time_order::<u64>(&[]), Ok(0));
    }

    #[test]
    fn time_order_catches_a_planted_inversion() {
        // Call 1 was sent after call 0 returned 5, and got 4.
        let calls = [call(0, 10, 5), call(11, 12, 4), call(13, 14, 6)];
        assert_eq!(
            check_time_order(&calls),
            Err(OrderViolation {
                earlier: 0,
                later: 1
            })
        );
        // An equal value is a violation too, and so is an overlap of ranges.
        let calls = [call(0, 10, 5), call(11, 12, 5)];
        assert!(check_time_order(&calls).is_err());
        let ranges = [
            TimedCall {
                invoked: 0,
                completed: 1,
                first: 1,
                last: 3,
            },
            TimedCall {
                invoked: 2,
                completed: 3,
                first: 3,
                last: 4,
            },
        ];
        assert!(check_time_order(&ranges).is_err());
        // Deep in a larger history, after many good pairs.
        let mut calls: Vec<_> = (0..100).map(|i| call(2 * i, 2 * i + 1, i as i64)).collect();
        calls[70].first = 10;
        calls[70].last = 10;
        let e = check_time_order(&calls).unwrap_err();
        assert_eq!(e.later, 70);
        assert_eq!(calls[e.earlier].last, 69);
    }
}

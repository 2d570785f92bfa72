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

/// The scratch sequence and pool of one run: both have the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scratch {
    /// `keysmith-verify-<16 hex digits>`, the name of the sequence and of
    /// the pool.
    pub name: String,
    /// The pool's first number.
    pub pool_start: i64,
    /// The pool's size.
    pub pool_size: i64,
}

/// Creates a scratch sequence (block [`SCRATCH_BLOCK`]) and a scratch pool
/// ([`SCRATCH_POOL_SIZE`] numbers from [`SCRATCH_POOL_START`]) under a fresh
/// random name.
///
/// # Errors
/// What the store fails with; then nothing is left behind (a sequence
/// created before the pool failed is removed again, as far as the store
/// lets it).
pub async fn create_scratch(store: &dyn Store) -> Result<Scratch> {
    let name = format!("keysmith-verify-{:016x}", rand::random::<u64>());
    let spec = SequenceSpec {
        block: SCRATCH_BLOCK,
        ..SequenceSpec::new(name.clone())
    };
    sequence::create(store, &spec).await?;
    if let Err(e) = pool::create(
        store,
        &PoolSpec {
            name: name.clone(),
            start: SCRATCH_POOL_START,
            size: SCRATCH_POOL_SIZE,
        },
    )
    .await
    {
        let _ = sequence::remove(store, &name).await;
        return Err(e);
    }
    Ok(Scratch {
        name,
        pool_start: SCRATCH_POOL_START,
        pool_size: SCRATCH_POOL_SIZE,
    })
}

/// Drops the scratch sequence and pool. Tries both, also when the first
/// fails.
///
/// # Errors
/// The first failure (of the sequence, then of the pool).
pub async fn remove_scratch(store: &dyn Store, scratch: &Scratch) -> Result<()> {
    let s = sequence::remove(store, &scratch.name).await;
    let p = pool::remove(store, &scratch.name).await;
    s.and(p)
}

/// One value a worker reports: where it came from and the value. Its text
/// form, one a line, is `s VALUE` for the sequence and `p VALUE` for the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Value {
    /// A value of the scratch sequence.
    Sequence(i64),
    /// A number of the scratch pool.
    Pool(i64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Sequence(v) => write!(f, "s {v}"),
            Value::Pool(v) => write!(f, "p {v}"),
        }
    }
}

impl std::str::FromStr for Value {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid(format!("{s:?} is not a reported value (`s N` or `p N`)"));
        let (tag, n) = s.split_once(' ').ok_or_else(bad)?;
        let n: i64 = n.parse().map_err(|_| bad())?;
        match tag {
            "s" => Ok(Value::Sequence(n)),
            "p" => Ok(Value::Pool(n)),
            _ => Err(bad()),
        }
    }
}

/// What one worker process does: takes a sequence value and a pool number
/// in turn, and hands each to the caller as soon as it is durable.
#[derive(Debug)]
pub struct Worker {
    sequence: Sequence,
    pool: ValuePool,
}

impl Worker {
    /// Opens handles on the scratch sequence and pool called `name`, with
    /// the default strategy, block and sample.
    ///
    /// # Errors
    /// What opening the handles fails with ([`Error::NotFound`] when the
    /// scratch objects are gone).
    pub async fn open(store: Arc<dyn Store>, name: &str) -> Result<Worker> {
        let sequence = Sequence::builder()
            .store(store.clone())
            .name(name)
            .build()
            .await?;
        let pool = ValuePool::builder().store(store).name(name).build().await?;
        Ok(Worker { sequence, pool })
    }

    /// Takes [`SEQUENCE_VALUES_PER_STEP`] sequence values (with
    /// [`Sequence::next`]) and one pool number (with
    /// [`ValuePool::take_each`]), giving each to `report` as soon as it is
    /// returned, so a process that reports what it is given and then dies
    /// loses at most the value in flight.
    ///
    /// # Errors
    /// The first error of the sequence, the pool or `report`.
    pub async fn step<E: From<Error>>(
        &self,
        mut report: impl FnMut(Value) -> Result<(), E>,
    ) -> Result<(), E> {
        for _ in 0..SEQUENCE_VALUES_PER_STEP {
            report(Value::Sequence(self.sequence.next().await?))?;
        }
        self.pool.take_each(1, |v| report(Value::Pool(v))).await
    }

    /// Closes the sequence handle, handing its unused tail back.
    ///
    /// # Errors
    /// As [`Sequence::close`].
    pub async fn close(&self) -> Result<()> {
        self.sequence.close().await.map(|_| ())
    }
}

/// Reads the store after a run and records in `ledger` what it finds: a new
/// handle on the scratch sequence must get a value above every sequence
/// value reported ([`Ledger::check_sequence_resumes`]); the scratch pool's
/// members must be a valid pool with every reported number below its
/// residue's member, and at most as many holes as kills
/// ([`Ledger::check_pool`]).
///
/// Call it after every worker has ended and every reported value is in the
/// ledger. A store error is recorded as a violation ([`Violation::Error`]):
/// the run cannot pass without these checks.
pub async fn check_after_run(store: Arc<dyn Store>, scratch: &Scratch, ledger: &mut Ledger) {
    let resumed = async {
        let seq = Sequence::builder()
            .store(store.clone())
            .name(&scratch.name)
            .block(1)
            .build()
            .await?;
        let next = seq.next().await?;
        seq.close().await?;
        Ok::<_, Error>(next)
    };
    match resumed.await {
        Ok(next) => ledger.check_sequence_resumes(next),
        Err(e) => ledger.error(format!("cannot take a value after the run: {e}")),
    }
    match pool::members(&*store, &scratch.name).await {
        Ok(members) => ledger.check_pool(scratch.pool_start, scratch.pool_size, &members),
        Err(e) => ledger.error(format!("cannot read the pool after the run: {e}")),
    }
}

/// Something a run found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// A value was reported twice.
    Duplicate {
        /// The value.
        value: Value,
        /// The process that reported it first.
        first: u32,
        /// The process that reported it again.
        again: u32,
    },
    /// A process reported a sequence value not above its previous one.
    OutOfOrder {
        /// The process.
        process: u32,
        /// Its previous sequence value.
        previous: i64,
        /// The value that came after it.
        value: i64,
    },
    /// After the run the sequence handed out a value not above the largest
    /// one reported.
    NotResumedAbove {
        /// What a new handle got.
        next: i64,
        /// The largest sequence value reported.
        max_seen: i64,
    },
    /// A reported pool number is not below its residue's member after the
    /// run: it is still a member, or could become one again.
    PoolNotBelow {
        /// The reported number.
        value: i64,
        /// The member of its residue (`None`: the residue has no member, or
        /// the number is below the pool's start).
        member: Option<i64>,
    },
    /// The pool's members break its invariant (count, residues, start).
    PoolCorrupt(String),
    /// More pool numbers were taken and not reported than processes were
    /// killed.
    PoolHoles {
        /// Numbers below their residue's member that nobody reported.
        holes: u64,
        /// Processes killed.
        kills: u64,
    },
    /// A process failed other than by being killed, printed something that
    /// is not a value, or the store could not be read for a check.
    Error(String),
    /// No value was reported at all: nothing was verified.
    NothingVerified,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Duplicate {
                value,
                first,
                again,
            } => {
                let (what, v) = match value {
                    Value::Sequence(v) => ("sequence value", v),
                    Value::Pool(v) => ("pool number", v),
                };
                write!(
                    f,
                    "duplicate: {what} {v} reported by process {first} and again by process {again}"
                )
            }
            Violation::OutOfOrder {
                process,
                previous,
                value,
            } => write!(
                f,
                "out of order: process {process} got sequence value {value} after {previous}"
            ),
            Violation::NotResumedAbove { next, max_seen } => write!(
                f,
                "not resumed above: after the run the sequence handed out {next}, but {max_seen} was reported"
            ),
            Violation::PoolNotBelow {
                value,
                member: Some(m),
            } => write!(
                f,
                "pool: {value} was reported taken, but the member of its residue after the run is {m}, not above it"
            ),
            Violation::PoolNotBelow {
                value,
                member: None,
            } => write!(
                f,
                "pool: {value} was reported taken, but the pool has no member of its residue"
            ),
            Violation::PoolCorrupt(why) => write!(f, "pool: {why}"),
            Violation::PoolHoles { holes, kills } => write!(
                f,
                "pool: {holes} numbers were taken and never reported, more than the {kills} processes killed"
            ),
            Violation::Error(why) => write!(f, "error: {why}"),
            Violation::NothingVerified => {
                write!(f, "no value was reported: nothing was verified")
            }
        }
    }
}

/// The bookkeeping of a run: every reported value, per kind and per
/// process, the processes started and killed, and what the checks after
/// the run found.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Sequence values seen, with the process that reported each first.
    sequence: HashMap<i64, u32>,
    /// Pool numbers seen, likewise.
    pool: HashMap<i64, u32>,
    /// Each process's last sequence value.
    last: HashMap<u32, i64>,
    max_sequence: Option<i64>,
    sequence_values: u64,
    pool_values: u64,
    processes: u32,
    kills: u64,
    duplicates: u64,
    order_violations: u64,
    resume_violations: u64,
    pool_holes: u64,
    errors: u64,
    resume_checked: bool,
    pool_checked: bool,
    failures: u64,
    kept: Vec<Violation>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Counts a new process and returns its number (0, 1, 2, ...).
    pub fn process_started(&mut self) -> u32 {
        self.processes += 1;
        self.processes - 1
    }

    /// Counts a process killed on purpose.
    pub fn killed(&mut self) {
        self.kills += 1;
    }

    /// Records a value `process` reported, checking it against every value
    /// seen so far.
    pub fn record(&mut self, process: u32, value: Value) {
        match value {
            Value::Sequence(v) => {
                self.sequence_values += 1;
                let first = first_seen(&mut self.sequence, v, process);
                self.check_first(first, value, process);
                if let Some(previous) = self.last.insert(process, v)
                    && v <= previous
                {
                    self.order_violations += 1;
                    self.violation(Violation::OutOfOrder {
                        process,
                        previous,
                        value: v,
                    });
                }
                self.max_sequence = Some(self.max_sequence.map_or(v, |m| m.max(v)));
            }
            Value::Pool(v) => {
                self.pool_values += 1;
                let first = first_seen(&mut self.pool, v, process);
                self.check_first(first, value, process);
            }
        }
    }

    /// A duplicate when `value` was first seen from another report.
    fn check_first(&mut self, first: Option<u32>, value: Value, again: u32) {
        if let Some(first) = first {
            self.duplicates += 1;
            self.violation(Violation::Duplicate {
                value,
                first,
                again,
            });
        }
    }

    /// Records an error: a process that failed other than by being killed,
    /// output that is not a value, a check that could not read the store.
    pub fn error(&mut self, message: impl Into<String>) {
        self.errors += 1;
        self.violation(Violation::Error(message.into()));
    }

    /// Checks the value a new handle got after the run: it must be above
    /// every sequence value reported.
    pub fn check_sequence_resumes(&mut self, next: i64) {
        self.resume_checked = true;
        if let Some(max_seen) = self.max_sequence
            && next <= max_seen
        {
            self.resume_violations += 1;
            self.violation(Violation::NotResumedAbove { next, max_seen });
        }
    }

    /// Checks the pool's members after the run (a pool of `size` numbers
    /// from `start`): one per residue modulo `size`, none below `start`;
    /// every reported number below its residue's member; and at most as many
    /// holes (numbers below their member nobody reported) as kills, so call
    /// it after the last kill.
    pub fn check_pool(&mut self, start: i64, size: i64, members: &[i64]) {
        self.pool_checked = true;
        if size < 1 {
            self.resume_violations += 1;
            self.violation(Violation::PoolCorrupt(format!(
                "size {size} is not positive"
            )));
            return;
        }
        if members.len() as i64 != size {
            self.resume_violations += 1;
            self.violation(Violation::PoolCorrupt(format!(
                "holds {} members, but its size is {size}",
                members.len()
            )));
        }
        let residue = |v: i64| (i128::from(v) - i128::from(start)).rem_euclid(i128::from(size));
        let mut by_residue: HashMap<i128, i64> = HashMap::new();
        for &m in members {
            if m < start {
                self.resume_violations += 1;
                self.violation(Violation::PoolCorrupt(format!(
                    "member {m} is below the pool's start {start}"
                )));
                continue;
            }
            if let Some(other) = by_residue.insert(residue(m), m) {
                self.resume_violations += 1;
                self.violation(Violation::PoolCorrupt(format!(
                    "members {other} and {m} share a residue modulo {size}"
                )));
                by_residue.insert(residue(m), other.max(m));
            }
        }
        let mut reported_below: u64 = 0;
        let mut taken = Vec::new();
        for &v in self.pool.keys() {
            let member = (v >= start)
                .then(|| by_residue.get(&residue(v)).copied())
                .flatten();
            match member {
                Some(m) if v < m => reported_below += 1,
                _ => taken.push(Violation::PoolNotBelow { value: v, member }),
            }
        }
        taken.sort_by_key(|t| match t {
            Violation::PoolNotBelow { value, .. } => *value,
            _ => 0,
        });
        for t in taken {
            self.resume_violations += 1;
            self.violation(t);
        }
        // Numbers handed out from each residue: (member - first) / size.
        let below: i128 = by_residue
            .values()
            .map(|&m| (i128::from(m) - i128::from(start)) / i128::from(size))
            .sum();
        let holes = u64::try_from(below - i128::from(reported_below)).unwrap_or(0);
        self.pool_holes = holes;
        if holes > self.kills {
            self.violation(Violation::PoolHoles {
                holes,
                kills: self.kills,
            });
        }
    }

    /// The summary so far (as [`Ledger::finish`] would give it).
    pub fn summary(&self) -> Summary {
        Summary {
            sequence_values: self.sequence_values,
            pool_values: self.pool_values,
            processes: u64::from(self.processes),
            kills: self.kills,
            duplicates: self.duplicates,
            order_violations: self.order_violations,
            resume_violations: self.resume_violations,
            pool_holes: self.pool_holes,
            errors: self.errors,
            ok: self.failures == 0
                && self.sequence_values + self.pool_values > 0
                && self.resume_checked
                && self.pool_checked,
        }
    }

    /// Ends the run: the summary and the violations found, with
    /// [`Violation::NothingVerified`] when no value was reported and a
    /// [`Violation::Error`] when the checks after the run were not made.
    pub fn finish(mut self) -> Report {
        if self.sequence_values + self.pool_values == 0 {
            self.violation(Violation::NothingVerified);
        }
        if !self.resume_checked || !self.pool_checked {
            self.error("the store was not checked after the run");
        }
        Report {
            summary: self.summary(),
            more: self.failures.saturating_sub(self.kept.len() as u64),
            violations: self.kept,
        }
    }

    fn violation(&mut self, v: Violation) {
        self.failures += 1;
        if self.kept.len() < MAX_KEPT {
            self.kept.push(v);
        }
    }
}

/// The counts of a run, and whether it passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Sequence values reported.
    pub sequence_values: u64,
    /// Pool numbers reported.
    pub pool_values: u64,
    /// Worker processes started (replacements included).
    pub processes: u64,
    /// Worker processes killed with SIGKILL.
    pub kills: u64,
    /// Values reported more than once (sequence and pool together).
    pub duplicates: u64,
    /// Sequence values not above their process's previous one.
    pub order_violations: u64,
    /// After the run: a sequence resumed at or below a value reported, pool
    /// numbers reported that are not below their residue's member, and
    /// breaks of the pool's invariant.
    pub resume_violations: u64,
    /// Pool numbers taken and never reported (at most one per kill passes).
    pub pool_holes: u64,
    /// Processes that failed other than by being killed, and checks that
    /// could not read the store.
    pub errors: u64,
    /// Whether the run passed: no violation of any kind, at least one value
    /// reported, and the store checked after the run.
    pub ok: bool,
}

impl fmt::Display for Summary {
    /// One line: `sequence_values=N pool_values=N processes=N kills=N
    /// duplicates=N order_violations=N resume_violations=N pool_holes=N
    /// errors=N ok` (or `FAILED` at the end).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sequence_values={} pool_values={} processes={} kills={} duplicates={} \
             order_violations={} resume_violations={} pool_holes={} errors={} {}",
            self.sequence_values,
            self.pool_values,
            self.processes,
            self.kills,
            self.duplicates,
            self.order_violations,
            self.resume_violations,
            self.pool_holes,
            self.errors,
            if self.ok { "ok" } else { "FAILED" }
        )
    }
}

/// What [`Ledger::finish`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The counts and the verdict.
    pub summary: Summary,
    /// The violations found, in the order found (at most [`MAX_KEPT`]).
    pub violations: Vec<Violation>,
    /// Violations found beyond those described.
    pub more: u64,
}

/// The process that first reported `v`, or `None` after recording `process`
/// as that one.
fn first_seen(seen: &mut HashMap<i64, u32>, v: i64, process: u32) -> Option<u32> {
    match seen.entry(v) {
        std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(process);
            None
        }
    }
}

/// One call to a strict sequence as its caller saw it: when it was sent,
/// when its answer came back (any clock all callers share, e.g. `Instant`s
/// of one test process), and the lowest and highest value it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimedCall<T> {
    /// When the call was sent.
    pub invoked: T,
    /// When its answer came back.
    pub completed: T,
    /// Its lowest value.
    pub first: i64,
    /// Its highest value.
    pub last: i64,
}

/// Two calls out of time order: `earlier` completed before `later` was
/// invoked, yet `later` got a value not above all of `earlier`'s. Indices
/// into the slice given to [`check_time_order`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OrderViolation {
    /// The call that completed first.
    pub earlier: usize,
    /// The call sent after it, with a value not above it.
    pub later: usize,
}

/// Checks the strict column's time order over every pair of `calls`: a
/// value returned before another call was sent is smaller than every value
/// of that call. Returns how many ordered pairs (one completed before the
/// other was sent) were checked, or the first violation found (the
/// offending earlier call is the one with the highest value among those that
/// completed before `later` was sent). Calls that overlap in time may come
/// in any order. `O(n log n)`.
///
/// # Errors
/// The violation, naming both calls.
pub fn check_time_order<T: Ord + Copy>(
    calls: &[TimedCall<T>],
) -> std::result::Result<u64, OrderViolation> {
    let mut by_completed: Vec<usize> = (0..calls.len()).collect();
    by_completed.sort_by_key(|&i| calls[i].completed);
    let mut by_invoked: Vec<usize> = (0..calls.len()).collect();
    by_invoked.sort_by_key(|&i| calls[i].invoked);
    let mut done = 0;
    // The call with the highest value among those completed so far.
    let mut highest: Option<usize> = None;
    let mut pairs = 0u64;
    for &b in &by_invoked {
        while done < by_completed.len() && calls[by_completed[done]].completed < calls[b].invoked {
            let a = by_completed[done];
            if highest.is_none_or(|h| calls[a].last > calls[h].last) {
                highest = Some(a);
            }
            done += 1;
        }
        pairs += done as u64;
        if let Some(a) = highest
            && calls[a].last >= calls[b].first
        {
            return Err(OrderViolation {
                earlier: a,
                later: b,
            });
        }
    }
    Ok(pairs)
}

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

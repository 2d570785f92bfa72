//! The [`Ledger`]: every value reported, the violations found, and the
//! [`Report`] of a run.

use super::*;

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
pub(super) fn first_seen(seen: &mut HashMap<i64, u32>, v: i64, process: u32) -> Option<u32> {
    match seen.entry(v) {
        std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(process);
            None
        }
    }
}
